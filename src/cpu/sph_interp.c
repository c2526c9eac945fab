/* The SPH interpolator's particle grid on the CPU (splashsurf's
 * SphInterpolator): the particles the density field uses, sorted into
 * cells of edge h by the counting sort of cpu/neighbours.c (input order
 * inside a cell), and their volumes m / rho_j by pmi_sph_volumes
 * (pm_field_compute's density definition, the same bits as the per-slot
 * rule pmi_post_sph_volume of core/post_rules.h). The sums at query
 * points are steps of core/post_rules.h, run by src/core/postprocess.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/post_rules.h"
#include "core/sph_kernel.h"
#include "core/util.h"
#include "cpu/density.h"
#include "cpu/post_cpu.h"

pm_status pmi_cpu_sph_build(int threads, const float *xyz, size_t n, const pm_field_params *p,
                            pm_sph_interpolator *ip)
{
    const char *fn = "pm_sph_interpolator_create";
    const double h = 2.0 * p->smoothing_length * p->radius;
    uint32_t *kept_idx = malloc(n * sizeof *kept_idx);
    float *kept_xyz = malloc(n * 3 * sizeof *kept_xyz);
    if (!kept_idx || !kept_xyz) {
        free(kept_idx);
        free(kept_xyz);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    double bmin[3] = {INFINITY, INFINITY, INFINITY}, bmax[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            free(kept_idx);
            free(kept_xyz);
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: particle %zu has a non-finite coordinate", fn, i);
        }
        if (p->use_aabb) { /* pm_field_compute's filter: inclusive */
            int in = 1;
            for (int a = 0; a < 3; a++)
                in &= q[a] >= p->aabb_min[a] && q[a] <= p->aabb_max[a];
            if (!in) continue;
        }
        for (int a = 0; a < 3; a++) {
            bmin[a] = fmin(bmin[a], q[a]);
            bmax[a] = fmax(bmax[a], q[a]);
        }
        memcpy(kept_xyz + 3 * kept, q, 3 * sizeof *q);
        kept_idx[kept++] = (uint32_t)i;
    }
    if (kept == 0) {
        free(kept_idx);
        free(kept_xyz);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: every particle lies outside the aabb",
                         fn);
    }
    /* Cells of edge h (core/post_rules.h's layout), as a field layout of
     * block 1 for the shared counting sort and density code. */
    pmi_post_grid *g = &ip->g;
    long long lo[3];
    if (!pmi_post_grid_layout(bmin, bmax, h, lo, g->cd, g->origin)) {
        free(kept_idx);
        free(kept_xyz);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: coordinates too large for the kernel radius %g", fn, h);
    }
    pmi_field_layout lay;
    memset(&lay, 0, sizeof lay);
    lay.spacing = h;
    lay.block = 1;
    lay.reach = h;
    double ncells = 1;
    for (int a = 0; a < 3; a++) {
        lay.lo[a] = lo[a];
        lay.dims[a] = lay.cdims[a] = (size_t)g->cd[a];
        ncells *= (double)g->cd[a];
    }
    if (ncells >= (double)UINT32_MAX || ncells * 4.0 > 0.5 * (double)pmi_total_ram_bytes() + 1e9) {
        free(kept_idx);
        free(kept_xyz);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %.0f neighbour cells of edge %g over the particles' box are too "
                         "many",
                         fn, ncells, h);
    }
    lay.ncells = lay.points = (size_t)ncells;
    pm_context c;
    memset(&c, 0, sizeof c);
    c.device = PM_DEVICE_CPU;
    c.backend = pmi_cpu_backend();
    c.num_threads = threads;
    pmi_cell_list cells;
    pm_status s = pmi_cells_build(&c, &lay, kept_xyz, kept, &cells);
    free(kept_xyz);
    if (s != PM_STATUS_OK) {
        free(kept_idx);
        return s;
    }
    double *vol = malloc(kept * sizeof *vol);
    uint32_t *input = malloc(kept * sizeof *input);
    if (!vol || !input) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    g->h = h;
    g->mass = pmi_sph_mass(p->radius, p->rest_density);
    if (s == PM_STATUS_OK) s = pmi_sph_volumes(&c, &lay, &cells, h, g->mass, vol);
    if (s != PM_STATUS_OK) {
        free(kept_idx);
        free(vol);
        free(input);
        pmi_cells_free(&cells);
        return s;
    }
    for (size_t k = 0; k < kept; k++)
        input[k] = kept_idx[cells.order[k]];
    free(kept_idx);
    free(cells.order);
    g->n = n;
    g->kept = kept;
    g->start = cells.start;
    g->xyz = cells.xyz;
    g->vol = vol;
    g->input = input;
    ip->own[0] = cells.start;
    ip->own[1] = cells.xyz;
    ip->own[2] = vol;
    ip->own[3] = input;
    return PM_STATUS_OK;
}
