/* pm_field_compute on the CPU: particle filtering and bounding box, the
 * lattice layout and its memory check, then the neighbour grid
 * (neighbours.c) and the SPH (sph.c) or blur (blur.c) field. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/density.h"

static double gb(double bytes) { return bytes / 1e9; }

/* Lays out the lattice over [bmin, bmax] grown by `margin` plus one lattice
 * point on each side (so the surface closes inside the volume), on the
 * global lattice of spacing s (points at integer multiples of s), with
 * neighbour cells of `block` points per edge, block * s >= reach. Checks
 * the memory: the field (4 B per point) plus `per_cell` bytes per neighbour
 * cell plus `fixed` bytes must fit max_bytes. */
static pm_status layout(const pmi_field_rule *f, const double bmin[3], const double bmax[3],
                        double per_cell, double fixed, size_t max_bytes, pmi_field_layout *lay)
{
    memset(lay, 0, sizeof *lay);
    const double s = f->s, B = f->B;
    double lo[3], dims[3], cdims[3];
    pm_status es = pmi_field_extent("pm_field_compute", f, bmin, bmax, lo, dims);
    if (es != PM_STATUS_OK) return es;
    for (int a = 0; a < 3; a++) {
        lay->lo[a] = (int64_t)lo[a];
        cdims[a] = ceil(dims[a] / B);
    }
    double points = dims[0] * dims[1] * dims[2];
    double cells = cdims[0] * cdims[1] * cdims[2];
    double need = 4.0 * points + per_cell * cells + fixed;
    if (!(need <= (double)max_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: grid %.0f x %.0f x %.0f (cell %g) needs %.4g GB, more "
                         "than the memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                         dims[0], dims[1], dims[2], s, gb(need), gb((double)max_bytes));
    /* need <= max_bytes <= SIZE_MAX, so every count below fits size_t. */
    lay->spacing = s;
    lay->block = (size_t)B;
    lay->reach = f->cell_reach;
    for (int a = 0; a < 3; a++) {
        lay->dims[a] = (size_t)dims[a];
        lay->cdims[a] = (size_t)cdims[a];
    }
    if (!pmi_mul3_size(lay->dims[0], lay->dims[1], lay->dims[2], &lay->points) ||
        !pmi_mul3_size(lay->cdims[0], lay->cdims[1], lay->cdims[2], &lay->ncells) ||
        lay->ncells >= SIZE_MAX / 8)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute: grid size overflows");
    return PM_STATUS_OK;
}

pm_status pmi_particles_box(pm_context *ctx, const char *fn, const float *xyz, size_t n,
                            const pm_field_params *p, double bmin[3], double bmax[3],
                            size_t *out_kept)
{
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no particles", fn);
    /* Slots and cell offsets are 32-bit. */
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: %zu particles, at most 4294967294 per call", fn, n);

    /* Pass 1: finite coordinates, aabb filter, bounding box of the kept
     * particles. min/max reductions do not depend on the schedule. */
    const int aabb = p->use_aabb;
    const double *amin = p->aabb_min, *amax = p->aabb_max;
    size_t first_bad = SIZE_MAX, kept = 0;
    double b0 = INFINITY, b1 = INFINITY, b2 = INFINITY;
    double e0 = -INFINITY, e1 = -INFINITY, e2 = -INFINITY;
    const long long sn = (long long)n;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) \
    reduction(min : first_bad, b0, b1, b2) reduction(max : e0, e1, e2) reduction(+ : kept)
    for (long long i = 0; i < sn; i++) {
        const float *q = xyz + 3 * (size_t)i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            if ((size_t)i < first_bad) first_bad = (size_t)i;
            continue;
        }
        if (aabb && !(q[0] >= amin[0] && q[0] <= amax[0] && q[1] >= amin[1] && q[1] <= amax[1] &&
                      q[2] >= amin[2] && q[2] <= amax[2]))
            continue;
        kept++;
        b0 = fmin(b0, q[0]), b1 = fmin(b1, q[1]), b2 = fmin(b2, q[2]);
        e0 = fmax(e0, q[0]), e1 = fmax(e1, q[1]), e2 = fmax(e2, q[2]);
    }
    if (first_bad != SIZE_MAX) {
        const float *q = xyz + 3 * first_bad;
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: particle %zu has a non-finite coordinate (%g, %g, %g)", fn,
                         first_bad, q[0], q[1], q[2]);
    }
    if (kept == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: all %zu particles lie outside the aabb "
                         "(%g, %g, %g) .. (%g, %g, %g)",
                         fn, n, amin[0], amin[1], amin[2], amax[0], amax[1], amax[2]);
    bmin[0] = b0, bmin[1] = b1, bmin[2] = b2;
    bmax[0] = e0, bmax[1] = e1, bmax[2] = e2;
    *out_kept = kept;
    return PM_STATUS_OK;
}

/* Everything up to the neighbour grid: checks, aabb filter, bounding box,
 * layout and memory check, cell list of the kept particles. */
static pm_status prepare(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                         pmi_field_layout *out_lay, pmi_cell_list *cells, size_t *out_kept)
{
    double bmin[3], bmax[3];
    size_t kept;
    pm_status st = pmi_particles_box(ctx, "pm_field_compute", xyz, n, p, bmin, bmax, &kept);
    if (st != PM_STATUS_OK) return st;
    const double *amin = p->aabb_min, *amax = p->aabb_max;

    /* Layout and the memory check, before anything big is allocated. */
    const int sph = p->method == PM_FIELD_SPH;
    const pmi_field_rule f = pmi_field_rule_of(p);
    const double B = f.B;
    const double T = ctx->num_threads;
    /* Per particle: cell id 8, slot 4, sorted xyz 12, volume 8 (SPH), a
     * filtered copy 12 when the aabb drops some. Per cell: count and start.
     * Per thread: the gather buffers (SPH: a superblock of doubles, capped;
     * blur: a slice of doubles and a line of floats). */
    double per_particle = 24.0 + (sph ? 8.0 : 0.0) + (kept < n ? 12.0 : 0.0);
    double per_thread = 8.0 * fmin(B * B * B, (double)PMI_ACC_CAP + B * B) + 24.0 * B + 64.0;
    if (sph && B <= PMI_SB_X) {
        /* The superblock buffers (sph.c): a box of doubles and its
         * coordinates, 4 doubles of padding each (larger cells: one cell
         * per box, as above plus the padding, below 24 B). */
        size_t sbc[3], pts[3], slab;
        pmi_sph_superblock((size_t)B, sbc, pts, &slab);
        per_thread = 8.0 * ((double)pts[0] * (double)pts[1] * (double)slab + 4.0) +
                     8.0 * ((double)pts[0] + (double)pts[1] + (double)pts[2] + 4.0);
    }
    pmi_field_layout lay;
    st = layout(&f, bmin, bmax, 8.0, per_particle * (double)kept + T * per_thread + 4.0,
                          p->max_memory_bytes, &lay);
    if (st != PM_STATUS_OK) return st;
    if (!sph) {
        /* The blur's line buffers are one x-row of floats per thread. */
        double extra = T * 4.0 * (double)lay.dims[0];
        double need = 4.0 * (double)lay.points + 8.0 * (double)lay.ncells +
                      per_particle * (double)kept + T * per_thread + extra;
        if (need > (double)p->max_memory_bytes)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_field_compute: grid %zu x %zu x %zu needs %.4g GB, more than "
                             "the memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                             lay.dims[0], lay.dims[1], lay.dims[2], gb(need),
                             gb((double)p->max_memory_bytes));
    }

    /* The particles that take part, in input order. */
    const float *pts = xyz;
    float *filtered = NULL;
    if (kept < n) {
        filtered = malloc(kept * 3 * sizeof *filtered);
        if (!filtered)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_field_compute: could not allocate %zu filtered particles", kept);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const float *q = xyz + 3 * i;
            if (q[0] >= amin[0] && q[0] <= amax[0] && q[1] >= amin[1] && q[1] <= amax[1] &&
                q[2] >= amin[2] && q[2] <= amax[2])
                memcpy(filtered + 3 * k++, q, 3 * sizeof *q);
        }
        pts = filtered;
    }

    st = pmi_cells_build(ctx, &lay, pts, kept, cells);
    free(filtered);
    if (st != PM_STATUS_OK) return st;
    *out_lay = lay;
    *out_kept = kept;
    return PM_STATUS_OK;
}

pm_status pmi_cpu_field_compute_with(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *p, const pmi_sph_stages *stages,
                                     pm_field *out)
{
    double t0 = pmi_now_ms();
    pmi_field_layout lay;
    pmi_cell_list cells;
    size_t kept;
    pm_status st = prepare(ctx, xyz, n, p, &lay, &cells, &kept);
    if (st != PM_STATUS_OK) return st;
    const int sph = p->method == PM_FIELD_SPH;
    const pmi_field_rule f = pmi_field_rule_of(p);
    const double r = p->radius, s = f.s, h = f.h;
    const int steps = sph ? 0 : p->blur_steps;
    double t1 = pmi_now_ms();

    float *data = NULL;
    double *vol = NULL;
    st = pm_alloc(ctx, lay.points * sizeof(float), (void **)&data);
    if (st == PM_STATUS_OK && sph && !(vol = malloc(kept * sizeof *vol)))
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                       "pm_field_compute: could not allocate %zu particle densities", kept);
    double t2 = t1;
    if (st == PM_STATUS_OK && sph) {
        const double mass = pmi_sph_mass(r, p->rest_density);
        st = stages->volumes(ctx, &lay, &cells, h, mass, vol);
        t2 = pmi_now_ms();
        if (st == PM_STATUS_OK) st = stages->field(ctx, &lay, &cells, h, vol, data);
    } else if (st == PM_STATUS_OK) {
        st = pmi_blur_field(ctx, &lay, &cells, r, steps, data);
    }
    double t3 = pmi_now_ms();
    free(vol);
    pmi_cells_free(&cells);
    if (st != PM_STATUS_OK) {
        pm_free(ctx, data);
        return st;
    }

    pm_volume *v = &out->volume;
    v->data = data;
    v->type = PM_SAMPLE_F32;
    v->nx = lay.dims[0];
    v->ny = lay.dims[1];
    v->nz = lay.dims[2];
    v->row_stride = lay.dims[0];
    v->slice_stride = lay.dims[0] * lay.dims[1];
    for (int a = 0; a < 3; a++) {
        v->spacing[a] = s;
        v->origin[a] = pmi_lattice_coord(lay.lo[a], s);
    }
    out->iso = p->iso;
    out->inside = PM_INSIDE_ABOVE;
    out->particles_used = kept;
    out->particles_dropped = n - kept;
    out->timings.neighbours_ms = t1 - t0;
    out->timings.density_ms = t2 - t1;
    out->timings.field_ms = t3 - t2;
    return PM_STATUS_OK;
}

pm_status pmi_cpu_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                const pm_field_params *p, pm_field *out)
{
    static const pmi_sph_stages fast = {pmi_sph_volumes, pmi_sph_field};
    return pmi_cpu_field_compute_with(ctx, xyz, n, p, &fast, out);
}

pm_status pmi_cpu_particle_densities(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *p, double *rho)
{
    if (p->use_aabb || p->method != PM_FIELD_SPH)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "particle densities: sph without aabb only");
    pmi_field_layout lay;
    pmi_cell_list cells;
    size_t kept;
    pm_status st = prepare(ctx, xyz, n, p, &lay, &cells, &kept);
    if (st != PM_STATUS_OK) return st;
    const double h = pmi_field_rule_of(p).h, mass = pmi_sph_mass(p->radius, p->rest_density);
    double *vol = malloc(kept * sizeof *vol);
    if (!vol) st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "particle densities: out of memory");
    if (st == PM_STATUS_OK) st = pmi_sph_volumes(ctx, &lay, &cells, h, mass, vol);
    if (st == PM_STATUS_OK)
        for (size_t k = 0; k < kept; k++)
            rho[cells.order[k]] = mass / vol[k];
    free(vol);
    pmi_cells_free(&cells);
    return st;
}
