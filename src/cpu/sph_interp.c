/* SPH interpolation at arbitrary points (splashsurf's SphInterpolator):
 * the particles the density field uses, sorted into cells of edge h by the
 * counting sort of cpu/neighbours.c, their volumes m / rho_j by
 * pmi_sph_volumes (pm_field_compute's density definition), then per query
 * point the sums over the particles of its 27 cells in ascending slot
 * order, in double: one value whatever the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/post_rules.h"
#include "core/sph_kernel.h"
#include "core/util.h"
#include "cpu/density.h"
#include "cpu/post_cpu.h"

struct pm_sph_interpolator {
    size_t n; /* particles given */
    size_t kept;
    pmi_field_layout lay; /* cells of edge h (block 1, spacing h) */
    pmi_cell_list cells;
    double *vol;     /* per sorted slot */
    uint32_t *input; /* sorted slot -> index among the n given */
    double h;
    double origin[3];
};

/* A context that only carries the thread count, for the density helpers. */
static void host_ctx(pm_context *c, int threads)
{
    memset(c, 0, sizeof *c);
    c->device = PM_DEVICE_CPU;
    c->backend = pmi_cpu_backend();
    c->num_threads = threads;
}

void pmi_cpu_sph_destroy(pm_sph_interpolator *ip)
{
    if (!ip) return;
    pmi_cells_free(&ip->cells);
    free(ip->vol);
    free(ip->input);
    free(ip);
}

pm_status pmi_cpu_sph_create(int threads, const float *xyz, size_t n, const pm_field_params *p,
                             pm_sph_interpolator **out)
{
    const char *fn = "pm_sph_interpolator_create";
    *out = NULL;
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no particles", fn);
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles, at most 4294967294", fn, n);
    const double h = 2.0 * p->smoothing_length * p->radius;
    pm_sph_interpolator *ip = calloc(1, sizeof *ip);
    uint32_t *kept_idx = malloc(n * sizeof *kept_idx);
    float *kept_xyz = malloc(n * 3 * sizeof *kept_xyz);
    if (!ip || !kept_idx || !kept_xyz) {
        free(ip);
        free(kept_idx);
        free(kept_xyz);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    ip->n = n;
    ip->h = h;
    double bmin[3] = {INFINITY, INFINITY, INFINITY}, bmax[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            free(kept_idx);
            free(kept_xyz);
            free(ip);
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
        free(ip);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: every particle lies outside the aabb",
                         fn);
    }
    ip->kept = kept;
    /* Cells of edge h over the kept particles' box grown by h and one
     * more cell. */
    pmi_field_layout *lay = &ip->lay;
    lay->spacing = h;
    lay->block = 1;
    lay->reach = h;
    double ncells = 1;
    for (int a = 0; a < 3; a++) {
        double g0 = floor((bmin[a] - h) / h) - 1, g1 = ceil((bmax[a] + h) / h) + 1;
        if (!(fabs(g0) < 1e15 && fabs(g1) < 1e15)) {
            free(kept_idx);
            free(kept_xyz);
            free(ip);
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: coordinates too large for the kernel radius %g", fn, h);
        }
        lay->lo[a] = (int64_t)g0;
        lay->dims[a] = (size_t)(g1 - g0 + 1);
        lay->cdims[a] = lay->dims[a];
        ip->origin[a] = pmi_lattice_coord(lay->lo[a], h);
        ncells *= (double)lay->dims[a];
    }
    if (ncells > (double)UINT32_MAX || ncells * 4.0 > 0.5 * (double)pmi_total_ram_bytes() + 1e9) {
        free(kept_idx);
        free(kept_xyz);
        free(ip);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %.0f neighbour cells of edge %g over the particles' box are too "
                         "many",
                         fn, ncells, h);
    }
    lay->ncells = lay->points = (size_t)ncells;
    pm_context c;
    host_ctx(&c, threads);
    pm_status s = pmi_cells_build(&c, lay, kept_xyz, kept, &ip->cells);
    free(kept_xyz);
    if (s == PM_STATUS_OK) {
        ip->vol = malloc(kept * sizeof *ip->vol);
        ip->input = malloc(kept * sizeof *ip->input);
        if (!ip->vol || !ip->input) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (s == PM_STATUS_OK) {
        const double mass = pmi_sph_mass(p->radius, p->rest_density);
        s = pmi_sph_volumes(&c, lay, &ip->cells, h, mass, ip->vol);
    }
    if (s != PM_STATUS_OK) {
        free(kept_idx);
        pmi_cpu_sph_destroy(ip);
        return s;
    }
    for (size_t k = 0; k < kept; k++)
        ip->input[k] = kept_idx[ip->cells.order[k]];
    free(kept_idx);
    *out = ip;
    return PM_STATUS_OK;
}

/* The slot ranges of the (up to) 9 rows of cells around point x. */
static int rows_of(const pm_sph_interpolator *ip, const float *x, uint32_t b[9], uint32_t e[9])
{
    const pmi_field_layout *lay = &ip->lay;
    long long c[3];
    for (int a = 0; a < 3; a++)
        c[a] = pmi_cell_of(x[a], ip->origin[a], ip->h, (long long)lay->cdims[a]);
    int n = 0;
    for (int dz = -1; dz <= 1; dz++) {
        long long z = c[2] + dz;
        if (z < 0 || z >= (long long)lay->cdims[2]) continue;
        for (int dy = -1; dy <= 1; dy++) {
            long long y = c[1] + dy;
            if (y < 0 || y >= (long long)lay->cdims[1]) continue;
            pmi_row_range(lay, &ip->cells, (size_t)c[0],
                          ((size_t)z * lay->cdims[1] + (size_t)y) * lay->cdims[0], &b[n], &e[n]);
            n++;
        }
    }
    return n;
}

pm_status pmi_cpu_sph_normals(const pm_sph_interpolator *ip, int threads, const float *points,
                              size_t np, float *normals)
{
    const long long snp = (long long)np;
    const double h = ip->h, h2 = h * h;
    const float *X = ip->cells.xyz;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (long long i = 0; i < snp; i++) {
        const float *x = points + 3 * i;
        uint32_t b[9], e[9];
        int rows = rows_of(ip, x, b, e);
        double g[3] = {0.0, 0.0, 0.0};
        for (int r = 0; r < rows; r++)
            for (uint32_t j = b[r]; j < e[r]; j++) {
                const double dx = (double)X[3 * (size_t)j] - (double)x[0];
                const double dy = (double)X[3 * (size_t)j + 1] - (double)x[1];
                const double dz = (double)X[3 * (size_t)j + 2] - (double)x[2];
                const double d2 = pmi_dist2(dx, dy, dz);
                if (!(d2 < h2) || d2 == 0.0) continue;
                const double d = pmi_sqrt(d2);
                const double f = ip->vol[j] * (pmi_post_kernel_dwdr(d, h) / d);
                g[0] += dx * f;
                g[1] += dy * f;
                g[2] += dz * f;
            }
        float *o = normals + 3 * i;
        if (!pmi_post_normalize(g, o)) o[0] = o[1] = o[2] = 0.0f;
    }
    return PM_STATUS_OK;
}

/* sum_j A_j V_j W_j / sum_j V_j W_j at one point, for per-slot values
 * given by a callback-free pair of arrays: slot values (per_slot) or input
 * values (per_input, components c). */
static void interpolate_one(const pm_sph_interpolator *ip, const float *x, const double *per_slot,
                            const float *per_input, int comps, double *acc)
{
    uint32_t b[9], e[9];
    int rows = rows_of(ip, x, b, e);
    const pmi_sph_kernel k = pmi_sph_kernel_of(ip->h);
    const float *X = ip->cells.xyz;
    double wsum = 0.0;
    for (int c = 0; c < comps; c++)
        acc[c] = 0.0;
    for (int r = 0; r < rows; r++)
        for (uint32_t j = b[r]; j < e[r]; j++) {
            const double dx = (double)X[3 * (size_t)j] - (double)x[0];
            const double dy = (double)X[3 * (size_t)j + 1] - (double)x[1];
            const double dz = (double)X[3 * (size_t)j + 2] - (double)x[2];
            const double d2 = pmi_dist2(dx, dy, dz);
            if (!(d2 < k.h2)) continue;
            const double vw = ip->vol[j] * pmi_sph_w(d2, &k);
            wsum += vw;
            if (per_slot)
                acc[0] += per_slot[j] * vw;
            else
                for (int c = 0; c < comps; c++)
                    acc[c] += (double)per_input[(size_t)comps * ip->input[j] + (size_t)c] * vw;
        }
    for (int c = 0; c < comps; c++)
        acc[c] = wsum > 0.0 ? acc[c] / wsum : 0.0;
}

pm_status pmi_cpu_sph_interpolate(const pm_sph_interpolator *ip, int threads, const float *values,
                                  int components, const float *points, size_t np, float *out)
{
    const long long snp = (long long)np;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (long long i = 0; i < snp; i++) {
        double acc[16];
        interpolate_one(ip, points + 3 * i, NULL, values, components, acc);
        for (int c = 0; c < components; c++)
            out[(size_t)components * (size_t)i + (size_t)c] = (float)acc[c];
    }
    return PM_STATUS_OK;
}

pm_status pmi_cpu_sph_weights(const pm_sph_interpolator *ip, int threads, const float *points,
                              size_t np, double normalization, float *weights, float *wnn)
{
    const size_t kept = ip->kept;
    double *cnt = malloc((kept ? kept : 1) * sizeof *cnt);
    if (!cnt) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_sph_smoothing_weights: out of memory");
    const double h2 = ip->h * ip->h;
    const float *X = ip->cells.xyz;
    /* Only the particles a point can reach need their count: those of the
     * 27 cells around each point's cell. */
    const pmi_field_layout *lay = &ip->lay;
    uint8_t *need = calloc(lay->ncells ? lay->ncells : 1, 1);
    if (!need) {
        free(cnt);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_sph_smoothing_weights: out of memory");
    }
    const long long snp0 = (long long)np;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long i = 0; i < snp0; i++) {
        long long c[3];
        for (int a = 0; a < 3; a++)
            c[a] = pmi_cell_of(points[3 * i + a], ip->origin[a], ip->h, (long long)lay->cdims[a]);
        for (long long z = c[2] - 1; z <= c[2] + 1; z++)
            for (long long y = c[1] - 1; y <= c[1] + 1; y++)
                for (long long x = c[0] - 1; x <= c[0] + 1; x++) {
                    if (z < 0 || y < 0 || x < 0 || z >= (long long)lay->cdims[2] ||
                        y >= (long long)lay->cdims[1] || x >= (long long)lay->cdims[0])
                        continue;
                    size_t cell =
                        ((size_t)z * lay->cdims[1] + (size_t)y) * lay->cdims[0] + (size_t)x;
#pragma omp atomic write
                    need[cell] = 1;
                }
    }
    const long long snc = (long long)lay->ncells;
    /* Per particle: sum over the others within h of 1 - d2 / h2. */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (long long cell = 0; cell < snc; cell++) {
        for (uint32_t s = ip->cells.start[cell]; s < ip->cells.start[cell + 1]; s++) {
            if (!need[cell]) {
                cnt[s] = 0.0; /* never read */
                continue;
            }
            uint32_t b[9], e[9];
            int rows = rows_of(ip, X + 3 * s, b, e);
            double sum = 0.0;
            for (int r = 0; r < rows; r++)
                for (uint32_t j = b[r]; j < e[r]; j++) {
                    if (j == (uint32_t)s) continue;
                    const double d2 =
                        pmi_dist2((double)X[3 * (size_t)j] - (double)X[3 * s],
                                  (double)X[3 * (size_t)j + 1] - (double)X[3 * s + 1],
                                  (double)X[3 * (size_t)j + 2] - (double)X[3 * s + 2]);
                    if (d2 < h2) sum += pmi_post_wnn_term(d2, h2);
                }
            cnt[s] = sum;
        }
    }
    free(need);
    const long long snp = (long long)np;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
    for (long long i = 0; i < snp; i++) {
        double n;
        interpolate_one(ip, points + 3 * i, cnt, NULL, 1, &n);
        if (wnn) wnn[i] = (float)n;
        weights[i] = (float)pmi_post_smooth_weight(n, normalization);
    }
    free(cnt);
    return PM_STATUS_OK;
}
