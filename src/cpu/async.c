/* The CPU backend's per-frame entry points (pm_isosurface_async and
 * pm_field_compute_async): context memory is host memory, so they run
 * synchronously and write their counts and status words directly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/mesh_out.h"
#include "core/util.h"
#include "cpu/cpu.h"

pm_status pmi_cpu_isosurface_async(pm_context *ctx, const pm_volume *vol, double iso,
                                   const pm_isosurface_options *opt, pm_isosurface_counts *counts)
{
    pm_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    pm_status s = pmi_cpu_isosurface(ctx, vol, iso, opt, &mesh);
    if (s != PM_STATUS_OK && s != PM_STATUS_TRUNCATED && s != PM_STATUS_OVERFLOW) return s;
    /* The flags of the CUDA backend: a mesh that does not fit the buffers
     * or the 32-bit indices is a flag in the counts, not an error. */
    counts->flags = s == PM_STATUS_TRUNCATED ? PM_ISOSURFACE_DOES_NOT_FIT : 0;
    if (s == PM_STATUS_OVERFLOW) {
        if (opt->mode != PM_MESH_INDEXED) return s; /* a size overflow, not the index rule */
        counts->flags = PM_ISOSURFACE_INDEX_OVERFLOW;
    }
    counts->num_vertices = mesh.num_vertices;
    counts->num_triangles = mesh.num_triangles;
    counts->active_cells = mesh.active_cells;
    pm_mesh_free(ctx, &mesh);
    pmi_clear_error();
    return PM_STATUS_OK;
}

/* The CPU's pm_field_compute_async: the field of pm_field_compute copied
 * into the caller's lattice (zero where that field has no points; its
 * lattice is the global one, so points line up exactly). */
pm_status pmi_cpu_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                      const pm_field_params *p, const pm_field_grid *grid,
                                      float *out, pm_field_status *status)
{
    size_t points;
    if (!pmi_mul3_size(grid->dims[0], grid->dims[1], grid->dims[2], &points))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute_async: grid size overflows");
    status->particles_used = 0;
    status->first_nonfinite = UINT64_MAX;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            status->first_nonfinite = i; /* the field is unspecified: left as it is */
            return PM_STATUS_OK;
        }
        kept += !p->use_aabb ||
                (q[0] >= p->aabb_min[0] && q[0] <= p->aabb_max[0] && q[1] >= p->aabb_min[1] &&
                 q[1] <= p->aabb_max[1] && q[2] >= p->aabb_min[2] && q[2] <= p->aabb_max[2]);
    }
    memset(out, 0, points * sizeof *out);
    if (kept == 0) return PM_STATUS_OK;
    pm_field f;
    pm_status s = pmi_cpu_field_compute(ctx, xyz, n, p, &f);
    if (s != PM_STATUS_OK) return s;
    const pm_volume *v = &f.volume;
    const float *src = (const float *)v->data;
    int64_t off[3]; /* the caller's point 0 in the field's lattice */
    const size_t fd[3] = {v->nx, v->ny, v->nz};
    for (int a = 0; a < 3; a++)
        off[a] = grid->lo[a] - (int64_t)llround(v->origin[a] / v->spacing[a]);
    for (size_t k = 0; k < grid->dims[2]; k++) {
        const int64_t sk = off[2] + (int64_t)k;
        if (sk < 0 || sk >= (int64_t)fd[2]) continue;
        for (size_t j = 0; j < grid->dims[1]; j++) {
            const int64_t sj = off[1] + (int64_t)j;
            if (sj < 0 || sj >= (int64_t)fd[1]) continue;
            /* Columns i with 0 <= off[0] + i < nx. */
            const int64_t i0 = off[0] < 0 ? -off[0] : 0;
            const int64_t nxs = (int64_t)fd[0] - off[0];
            const int64_t i1 = nxs < (int64_t)grid->dims[0] ? nxs : (int64_t)grid->dims[0];
            if (i1 > i0)
                memcpy(out + (k * grid->dims[1] + j) * grid->dims[0] + (size_t)i0,
                       src + ((size_t)sk * fd[1] + (size_t)sj) * fd[0] + (size_t)(off[0] + i0),
                       (size_t)(i1 - i0) * sizeof *out);
        }
    }
    status->particles_used = f.particles_used;
    pm_field_free(ctx, &f);
    return PM_STATUS_OK;
}
