/* scikit-image's marching_cubes conventions applied to a pyramesh mesh:
 * the mask (cells computed only where the mask is set at their far
 * corner), the per-vertex `values`, NumPy axis order and the winding of
 * gradient_direction; and the volume's range for the default level. Host
 * memory. (mc_classic.c: the mesh clean-ups.) */
#include "pmx.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define PMX_SAMPLE_CASES(X)                                                                        \
    X(PM_SAMPLE_U8, uint8_t)                                                                       \
    X(PM_SAMPLE_U16, uint16_t)                                                                     \
    X(PM_SAMPLE_I16, int16_t)                                                                      \
    X(PM_SAMPLE_F32, float)                                                                        \
    X(PM_SAMPLE_F64, double)

static double load(const pmx_mc_post *p, size_t off)
{
    switch (p->type) {
    case PM_SAMPLE_U8: return ((const uint8_t *)p->data)[off];
    case PM_SAMPLE_U16: return ((const uint16_t *)p->data)[off];
    case PM_SAMPLE_I16: return ((const int16_t *)p->data)[off];
    case PM_SAMPLE_F32: return ((const float *)p->data)[off];
    case PM_SAMPLE_F64: return ((const double *)p->data)[off];
    }
    return 0.0;
}

/* ------------------------------------------------------------------------ */
/* Triangles per case, asked of the library                                  */
/* ------------------------------------------------------------------------ */

static uint8_t case_tris[2][256];
static int case_ready[2];
static pthread_mutex_t case_mu = PTHREAD_MUTEX_INITIALIZER;

/* The number of triangles the library emits for each of the 256 cases
 * (bit c: corner c inside, Bourke's numbering), found by extracting a
 * 2x2x2 volume per case. Output order is by cell, then table order
 * (docs/isosurface.md), so these counts place every cell's triangles. */
static const uint8_t *case_counts(int below)
{
    static const int off[8][3] = {{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {0, 1, 0},
                                  {0, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 1, 1}};
    pthread_mutex_lock(&case_mu);
    if (!case_ready[below]) {
        pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, 1, NULL};
        pm_context *ctx = NULL;
        int ok = pm_context_create(&desc, &ctx) == PM_STATUS_OK;
        for (int c = 0; ok && c < 256; c++) {
            float v[8];
            for (int k = 0; k < 8; k++) {
                int in = (c >> k) & 1;
                v[off[k][0] + 2 * off[k][1] + 4 * off[k][2]] = (float)(below ? !in : in);
            }
            pm_volume vol = {v, PM_SAMPLE_F32, 2, 2, 2, 0, 0, {1, 1, 1}, {0, 0, 0}};
            pm_isosurface_options o = {.struct_size = sizeof o,
                                       .normals = PM_NORMALS_NONE,
                                       .inside = below ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE};
            pm_mesh m;
            ok = pm_isosurface(ctx, &vol, 0.5, &o, &m) == PM_STATUS_OK;
            case_tris[below][c] = (uint8_t)m.num_triangles;
            pm_mesh_free(ctx, &m);
        }
        pm_context_destroy(ctx);
        case_ready[below] = ok;
    }
    const uint8_t *r = case_ready[below] ? case_tris[below] : NULL;
    pthread_mutex_unlock(&case_mu);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Mask                                                                       */
/* ------------------------------------------------------------------------ */

/* Inside flags of one lattice slice (the library's predicate). */
#define INSIDE_SLICE(ST, T)                                                                        \
    case ST:                                                                                       \
        for (size_t j = 0; j < p->n[1]; j++) {                                                     \
            const T *row = (const T *)p->data + k * p->stride[2] + j * p->stride[1];               \
            uint8_t *o = out + j * p->n[0];                                                        \
            if (p->inside_below)                                                                   \
                for (size_t i = 0; i < p->n[0]; i++)                                               \
                    o[i] = (double)row[i] < p->iso_eff;                                            \
            else                                                                                   \
                for (size_t i = 0; i < p->n[0]; i++)                                               \
                    o[i] = (double)row[i] > p->iso_eff;                                            \
        }                                                                                          \
        break;

static void inside_slice(const pmx_mc_post *p, size_t k, uint8_t *out)
{
    switch (p->type) {
        PMX_SAMPLE_CASES(INSIDE_SLICE)
    }
}

static int cell_case(const uint8_t *s0, const uint8_t *s1, size_t nx, size_t i, size_t j)
{
    const size_t a = j * nx + i, b = a + nx;
    return s0[a] | s0[a + 1] << 1 | s0[b + 1] << 2 | s0[b] << 3 | s1[a] << 4 | s1[a + 1] << 5 |
           s1[b + 1] << 6 | s1[b] << 7;
}

static int mask_cell(const pmx_mc_post *p, size_t i, size_t j, size_t k)
{
    const size_t s = (size_t)p->step;
    return p->mask[(i + 1) * s * p->mask_stride[0] + (j + 1) * s * p->mask_stride[1] +
                   (k + 1) * s * p->mask_stride[2]] != 0;
}

/* Walks cell slice k: adds its triangle count, or (keep != NULL) clears
 * the keep flags of the triangles of masked-out cells from `first` on. */
static uint64_t walk_slice(const pmx_mc_post *p, const uint8_t *tris, size_t k, uint8_t *s0,
                           uint8_t *s1, uint8_t *keep, uint64_t first)
{
    inside_slice(p, k, s0);
    inside_slice(p, k + 1, s1);
    uint64_t t = first;
    for (size_t j = 0; j + 1 < p->n[1]; j++)
        for (size_t i = 0; i + 1 < p->n[0]; i++) {
            int c = cell_case(s0, s1, p->n[0], i, j);
            if (!tris[c]) continue;
            if (keep && !mask_cell(p, i, j, k)) memset(keep + t, 0, tris[c]);
            t += tris[c];
        }
    return t - first;
}

int pmx_mc_apply_mask(const pmx_mc_post *p, pm_mesh *m, float *values)
{
    const uint8_t *tris = case_counts(p->inside_below);
    const size_t ncz = p->n[2] - 1, V = m->num_vertices, F = m->num_triangles;
    uint64_t *first = calloc(ncz + 1, sizeof *first);
    uint8_t *keep = malloc(F ? F : 1);
    uint32_t *remap = malloc((V ? V : 1) * sizeof *remap);
    int ok = tris && first && keep && remap;
    if (ok) {
        memset(keep, 1, F);
        const size_t slice = p->n[0] * p->n[1];
#pragma omp parallel num_threads(p->threads)
        {
            uint8_t *buf = malloc(2 * slice);
            if (!buf) {
#pragma omp atomic write
                ok = 0;
            }
#pragma omp for schedule(dynamic, 1)
            for (size_t k = 0; k < ncz; k++)
                if (buf) first[k + 1] = walk_slice(p, tris, k, buf, buf + slice, NULL, 0);
#pragma omp single
            for (size_t k = 0; k < ncz; k++)
                first[k + 1] += first[k];
#pragma omp for schedule(dynamic, 1)
            for (size_t k = 0; k < ncz; k++)
                if (buf && ok && first[ncz] == F)
                    walk_slice(p, tris, k, buf, buf + slice, keep, first[k]);
            free(buf);
        }
        /* The counts must place every triangle; anything else is a bug. */
        ok = ok && first[ncz] == F;
    }
    if (ok) {
        /* Keep the triangles, then the vertices they use, in order. */
        memset(remap, 0, V * sizeof *remap);
        size_t nt = 0;
        for (size_t t = 0; t < F; t++) {
            if (!keep[t]) continue;
            memmove(m->indices + 3 * nt, m->indices + 3 * t, 3 * sizeof(uint32_t));
            for (int q = 0; q < 3; q++)
                remap[m->indices[3 * nt + q]] = 1;
            nt++;
        }
        size_t nv = 0;
        for (size_t v = 0; v < V; v++) {
            if (!remap[v]) continue;
            memmove(m->positions + 3 * nv, m->positions + 3 * v, 3 * sizeof(float));
            if (m->normals) memmove(m->normals + 3 * nv, m->normals + 3 * v, 3 * sizeof(float));
            if (values) values[nv] = values[v];
            remap[v] = (uint32_t)nv++;
        }
        for (size_t q = 0; q < 3 * nt; q++)
            m->indices[q] = remap[m->indices[q]];
        m->num_triangles = nt;
        m->num_vertices = nv;
    }
    free(first);
    free(keep);
    free(remap);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------ */
/* values                                                                     */
/* ------------------------------------------------------------------------ */

static void widen(double d, double *mx, double *mn)
{
    if (d > *mx) *mx = d;
    if (d < *mn) *mn = d;
}

/* scikit-image's value of one cell: its samples' range measured from iso
 * and including iso, max(0, max(v - iso)) - min(0, min(v - iso)). */
static double cell_range(const pmx_mc_post *p, const size_t c[3])
{
    double mx = 0.0, mn = 0.0;
    for (int q = 0; q < 8; q++) {
        size_t off = 0;
        for (int L = 0; L < 3; L++)
            off += (c[L] + ((q >> L) & 1)) * p->stride[L];
        widen(load(p, off) - p->iso, &mx, &mn);
    }
    return mx - mn;
}

static int cell_ok(const pmx_mc_post *p, const long long c[3])
{
    for (int L = 0; L < 3; L++)
        if (c[L] < 0 || (size_t)c[L] + 1 >= p->n[L]) return 0;
    return !p->mask || mask_cell(p, (size_t)c[0], (size_t)c[1], (size_t)c[2]);
}

/* The vertex on the edge from lattice point lo along axis a: the cells
 * around the edge, from the 2 x 3 x 3 samples they share. Each column
 * (two samples along a) gives its largest and smallest v - iso, starting
 * from 0 as scikit-image does; a cell is 4 columns. */
#define EDGE_VALUE(NAME, T, LOWEST, HIGHEST)                                                       \
    static double NAME(const pmx_mc_post *p, const size_t lo[3], int a)                            \
    {                                                                                              \
        const T *d = (const T *)p->data;                                                           \
        const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;                                          \
        const size_t sa = p->stride[a], sb = p->stride[b], sc = p->stride[c];                      \
        if (!p->mask && lo[b] >= 1 && lo[b] + 1 < p->n[b] && lo[c] >= 1 && lo[c] + 1 < p->n[c]) {  \
            /* Interior: v - iso is monotone in v, so a cell's extremes are                        \
             * taken on the samples and shifted once (the same doubles). */                        \
            const size_t base = lo[a] * sa + (lo[b] - 1) * sb + (lo[c] - 1) * sc;                  \
            /* Comparisons against LOWEST / HIGHEST skip NaN without branches. */                  \
            T hi9[9], lo9[9];                                                                      \
            for (int k = 0; k < 9; k++) {                                                          \
                const T *x = d + base + (size_t)(k / 3) * sb + (size_t)(k % 3) * sc;               \
                const T x0 = x[0], x1 = x[sa];                                                     \
                T h = x0 > LOWEST ? x0 : LOWEST, l = x0 < HIGHEST ? x0 : HIGHEST;                  \
                hi9[k] = x1 > h ? x1 : h;                                                          \
                lo9[k] = x1 < l ? x1 : l;                                                          \
            }                                                                                      \
            double best = 0.0;                                                                     \
            for (int q = 0; q < 4; q++) {                                                          \
                const int k0 = (q >> 1) * 3 + (q & 1);                                             \
                T h = hi9[k0], l = lo9[k0];                                                        \
                h = hi9[k0 + 1] > h ? hi9[k0 + 1] : h;                                             \
                h = hi9[k0 + 3] > h ? hi9[k0 + 3] : h;                                             \
                h = hi9[k0 + 4] > h ? hi9[k0 + 4] : h;                                             \
                l = lo9[k0 + 1] < l ? lo9[k0 + 1] : l;                                             \
                l = lo9[k0 + 3] < l ? lo9[k0 + 3] : l;                                             \
                l = lo9[k0 + 4] < l ? lo9[k0 + 4] : l;                                             \
                const double mx = (double)h - p->iso, mn = (double)l - p->iso;                     \
                const double r = (mx > 0.0 ? mx : 0.0) - (mn < 0.0 ? mn : 0.0);                    \
                if (r > best) best = r;                                                            \
            }                                                                                      \
            return best;                                                                           \
        }                                                                                          \
        double cmax[3][3], cmin[3][3];                                                             \
        int have[3][3];                                                                            \
        for (int ib = 0; ib < 3; ib++)                                                             \
            for (int ic = 0; ic < 3; ic++) {                                                       \
                const long long pb = (long long)lo[b] + ib - 1, pc = (long long)lo[c] + ic - 1;    \
                have[ib][ic] = pb >= 0 && pc >= 0 && (size_t)pb < p->n[b] && (size_t)pc < p->n[c]; \
                double mx = 0.0, mn = 0.0;                                                         \
                if (have[ib][ic]) {                                                                \
                    const size_t off = lo[a] * sa + (size_t)pb * sb + (size_t)pc * sc;             \
                    widen((double)d[off] - p->iso, &mx, &mn);                                      \
                    widen((double)d[off + sa] - p->iso, &mx, &mn);                                 \
                }                                                                                  \
                cmax[ib][ic] = mx;                                                                 \
                cmin[ib][ic] = mn;                                                                 \
            }                                                                                      \
        double best = 0.0;                                                                         \
        for (int db = 0; db < 2; db++)                                                             \
            for (int dc = 0; dc < 2; dc++) {                                                       \
                if (!have[db][dc] || !have[db + 1][dc + 1]) continue;                              \
                if (p->mask) {                                                                     \
                    long long cc[3];                                                               \
                    cc[a] = (long long)lo[a];                                                      \
                    cc[b] = (long long)lo[b] + db - 1;                                             \
                    cc[c] = (long long)lo[c] + dc - 1;                                             \
                    if (!cell_ok(p, cc)) continue;                                                 \
                }                                                                                  \
                double mx = cmax[db][dc], mn = cmin[db][dc];                                       \
                for (int u = 0; u < 2; u++)                                                        \
                    for (int w = 0; w < 2; w++) {                                                  \
                        if (cmax[db + u][dc + w] > mx) mx = cmax[db + u][dc + w];                  \
                        if (cmin[db + u][dc + w] < mn) mn = cmin[db + u][dc + w];                  \
                    }                                                                              \
                if (mx - mn > best) best = mx - mn;                                                \
            }                                                                                      \
        return best;                                                                               \
    }

EDGE_VALUE(edge_value_u8, uint8_t, 0, UINT8_MAX)
EDGE_VALUE(edge_value_u16, uint16_t, 0, UINT16_MAX)
EDGE_VALUE(edge_value_i16, int16_t, INT16_MIN, INT16_MAX)
EDGE_VALUE(edge_value_f32, float, -INFINITY, INFINITY)
EDGE_VALUE(edge_value_f64, double, -INFINITY, INFINITY)

#if defined(__SSE2__)
/* float volumes, interior edges (no mask): the same value from SSE2
 * vectors, about a fifth of the instructions. max_ps(x, acc) is
 * `x > acc ? x : acc`, the scalar code's comparison: a NaN sample is
 * skipped (the accumulators start at -inf / +inf, never NaN). The maximum
 * of NaN-free floats does not depend on the order it is taken in (up to
 * the sign of a zero, which the clamps at 0 below erase), and the last
 * steps are the scalar code's doubles: the results are the same floats. */

/* Largest range over the 4 cells from their highest (H) and lowest (L)
 * samples, measured from iso and including it. */
static inline double cells_best_sse(__m128 H, __m128 L, double iso)
{
    const __m128d isov = _mm_set1_pd(iso), zero = _mm_setzero_pd();
    const __m128d hA = _mm_sub_pd(_mm_cvtps_pd(H), isov);
    const __m128d hB = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(H, H)), isov);
    const __m128d lA = _mm_sub_pd(_mm_cvtps_pd(L), isov);
    const __m128d lB = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(L, L)), isov);
    const __m128d rA = _mm_sub_pd(_mm_max_pd(hA, zero), _mm_min_pd(lA, zero));
    const __m128d rB = _mm_sub_pd(_mm_max_pd(hB, zero), _mm_min_pd(lB, zero));
    __m128d r = _mm_max_pd(rA, rB);
    r = _mm_max_sd(r, _mm_unpackhi_pd(r, r));
    return _mm_cvtsd_f64(r); /* >= 0: the scalar code's best starts at 0 */
}

/* Edge along y or z (a = 1, 2): the other axes are x (unit stride, the
 * vector lanes: x - 1, x, x + 1 and one unused) and c. Needs
 * lo[0] + 2 < n[0] (the 4-float loads stay in the row). */
static double edge_value_f32_yz(const float *r, size_t sa, size_t sc, double iso)
{
    const __m128 lowest = _mm_set1_ps(-INFINITY), highest = _mm_set1_ps(INFINITY);
    __m128 ch[3], cl[3];
    for (int ic = 0; ic < 3; ic++, r += sc) {
        const __m128 r0 = _mm_loadu_ps(r), r1 = _mm_loadu_ps(r + sa);
        ch[ic] = _mm_max_ps(r1, _mm_max_ps(r0, lowest));
        cl[ic] = _mm_min_ps(r1, _mm_min_ps(r0, highest));
    }
    /* Pairs along c, then along x (lanes i and i + 1): lanes 0 and 1. */
    __m128 h0 = _mm_max_ps(ch[0], ch[1]), h1 = _mm_max_ps(ch[1], ch[2]);
    __m128 l0 = _mm_min_ps(cl[0], cl[1]), l1 = _mm_min_ps(cl[1], cl[2]);
    h0 = _mm_max_ps(h0, _mm_shuffle_ps(h0, h0, _MM_SHUFFLE(3, 3, 2, 1)));
    h1 = _mm_max_ps(h1, _mm_shuffle_ps(h1, h1, _MM_SHUFFLE(3, 3, 2, 1)));
    l0 = _mm_min_ps(l0, _mm_shuffle_ps(l0, l0, _MM_SHUFFLE(3, 3, 2, 1)));
    l1 = _mm_min_ps(l1, _mm_shuffle_ps(l1, l1, _MM_SHUFFLE(3, 3, 2, 1)));
    return cells_best_sse(_mm_movelh_ps(h0, h1), _mm_movelh_ps(l0, l1), iso);
}

/* Two samples x, x + 1 of a row into lanes (0, 1) and of another into
 * (2, 3); __m64 loads (may alias any type). */
static inline __m128 load_pairs(const float *r0, const float *r1)
{
    return _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)r0), (const __m64 *)r1);
}

/* Edge along x (a = 0): columns are the sample pairs (x, x + 1) of the
 * rows y - 1 .. y + 1 (b) of the slices z - 1 .. z + 1 (c). */
static double edge_value_f32_x(const float *r, size_t sb, size_t sc, double iso)
{
    const __m128 lowest = _mm_set1_ps(-INFINITY), highest = _mm_set1_ps(INFINITY);
    __m128 ph[3], pl[3];
    for (int ic = 0; ic < 3; ic++, r += sc) {
        /* A: rows y - 1, y; B: rows y, y + 1. Column extremes in both
         * lanes of a pair, then the two y pairs of cells. */
        const __m128 A = load_pairs(r, r + sb), B = load_pairs(r + sb, r + 2 * sb);
        const __m128 As = _mm_shuffle_ps(A, A, _MM_SHUFFLE(2, 3, 0, 1));
        const __m128 Bs = _mm_shuffle_ps(B, B, _MM_SHUFFLE(2, 3, 0, 1));
        const __m128 hA = _mm_max_ps(As, _mm_max_ps(A, lowest));
        const __m128 hB = _mm_max_ps(Bs, _mm_max_ps(B, lowest));
        const __m128 lA = _mm_min_ps(As, _mm_min_ps(A, highest));
        const __m128 lB = _mm_min_ps(Bs, _mm_min_ps(B, highest));
        ph[ic] = _mm_max_ps(hA, hB); /* cells y - 1..y in lanes 0, 1; y..y + 1 in 2, 3 */
        pl[ic] = _mm_min_ps(lA, lB);
    }
    const __m128 h0 = _mm_max_ps(ph[0], ph[1]), h1 = _mm_max_ps(ph[1], ph[2]);
    const __m128 l0 = _mm_min_ps(pl[0], pl[1]), l1 = _mm_min_ps(pl[1], pl[2]);
    return cells_best_sse(_mm_shuffle_ps(h0, h1, _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm_shuffle_ps(l0, l1, _MM_SHUFFLE(2, 0, 2, 0)), iso);
}

/* The first sample a vertex's vectors read (its cells' corner with the
 * lowest coordinates; x - 1 for y and z edges), or NULL where the vector
 * code does not apply (the mask, the volume's border). */
static inline const float *edge_rows_f32(const pmx_mc_post *p, const size_t lo[3], int a)
{
    if (p->mask) return NULL;
    if (a == 0) {
        if (lo[1] >= 1 && lo[1] + 1 < p->n[1] && lo[2] >= 1 && lo[2] + 1 < p->n[2])
            return (const float *)p->data + lo[0] + (lo[1] - 1) * p->stride[1] +
                   (lo[2] - 1) * p->stride[2];
        return NULL;
    }
    const int c = a == 2 ? 1 : 2;
    if (lo[0] >= 1 && lo[0] + 2 < p->n[0] && lo[c] >= 1 && lo[c] + 1 < p->n[c])
        return (const float *)p->data + (lo[0] - 1) + lo[a] * p->stride[a] +
               (lo[c] - 1) * p->stride[c];
    return NULL;
}

static inline double edge_value_f32_rows(const pmx_mc_post *p, const float *r, int a)
{
    if (a == 0) return edge_value_f32_x(r, p->stride[1], p->stride[2], p->iso);
    return edge_value_f32_yz(r, p->stride[a], p->stride[a == 2 ? 1 : 2], p->iso);
}

static double edge_value_f32_fast(const pmx_mc_post *p, const size_t lo[3], int a)
{
    const float *r = edge_rows_f32(p, lo, a);
    return r ? edge_value_f32_rows(p, r, a) : edge_value_f32(p, lo, a);
}
#endif

typedef double (*edge_value_fn)(const pmx_mc_post *, const size_t *, int);

static edge_value_fn edge_value_for(pm_sample_type t)
{
    switch (t) {
    case PM_SAMPLE_U8: return edge_value_u8;
    case PM_SAMPLE_U16: return edge_value_u16;
    case PM_SAMPLE_I16: return edge_value_i16;
#if defined(__SSE2__)
    case PM_SAMPLE_F32: return edge_value_f32_fast;
#else
    case PM_SAMPLE_F32: return edge_value_f32;
#endif
    case PM_SAMPLE_F64: return edge_value_f64;
    }
    return edge_value_f64;
}

static double edge_value(const pmx_mc_post *p, const size_t lo[3], int a)
{
    return edge_value_for(p->type)(p, lo, a);
}

/* A vertex exactly on a lattice point (its sample equals iso, or the
 * interpolation rounded onto it): its edge is not known from the
 * position, so every cell around the point counts. */
static double point_value(const pmx_mc_post *p, const long long pt[3])
{
    double best = 0.0;
    for (int q = 0; q < 8; q++) {
        long long c[3];
        for (int L = 0; L < 3; L++)
            c[L] = pt[L] - 1 + ((q >> L) & 1);
        if (!cell_ok(p, c)) continue;
        size_t cu[3] = {(size_t)c[0], (size_t)c[1], (size_t)c[2]};
        double r = cell_range(p, cu);
        if (r > best) best = r;
    }
    return best;
}

/* Whether the edge from lattice point lo along axis a crosses the level
 * and the library places its vertex exactly at `at` (a coordinate of the
 * lattice point the vertex sits on): the library's formula
 * (docs/isosurface.md), spacing = step, origin 0. */
static int edge_lands_on(const pmx_mc_post *p, const long long lo[3], int a, float at)
{
    for (int L = 0; L < 3; L++)
        if (lo[L] < 0 || (size_t)lo[L] >= p->n[L] || (L == a && (size_t)lo[L] + 1 >= p->n[L]))
            return 0;
    size_t off = 0;
    for (int L = 0; L < 3; L++)
        off += (size_t)lo[L] * p->stride[L];
    const double vlo = load(p, off), vhi = load(p, off + p->stride[a]);
    int in_lo, in_hi;
    if (p->inside_below) {
        in_lo = vlo < p->iso_eff;
        in_hi = vhi < p->iso_eff;
    } else {
        in_lo = vlo > p->iso_eff;
        in_hi = vhi > p->iso_eff;
    }
    if (in_lo == in_hi) return 0;
    double t = (p->iso_eff - vlo) / (vhi - vlo);
    if (!(t >= 0 && t <= 1)) t = 0.5;
    const double q = (double)lo[a] + t;
    return (float)(0.0 + (double)p->step * q) == at;
}

typedef struct {
    uint64_t key; /* the lattice point's linear index */
    size_t v;     /* the vertex */
} point_vertex;

static int cmp_point_vertex(const void *x, const void *y)
{
    const point_vertex *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->v < b->v ? -1 : a->v > b->v;
}

/* Vertices exactly on lattice points (a sample equal to the level, or an
 * interpolation that rounded onto the point). Several edges' vertices can
 * sit on one point; the library numbers vertices by (edge's lower point,
 * axis), so the k-th vertex on point P (by index) belongs to the k-th
 * edge landing on P in that order: (P - z, z), (P - y, y), (P - x, x),
 * (P, x), (P, y), (P, z). */
static void point_values(const pmx_mc_post *p, const pm_mesh *m, point_vertex *pv, size_t count,
                         float *values)
{
    qsort(pv, count, sizeof *pv, cmp_point_vertex);
    for (size_t g = 0; g < count;) {
        size_t e = g;
        while (e < count && pv[e].key == pv[g].key)
            e++;
        const float *pos = m->positions + 3 * pv[g].v;
        long long P[3];
        for (int L = 0; L < 3; L++)
            P[L] = (long long)((double)pos[L] / (double)p->step);
        long long cand_lo[6][3];
        int cand_axis[6], nc = 0;
        for (int k = 0; k < 6; k++) {
            const int a = k < 3 ? 2 - k : k - 3; /* z, y, x below P; x, y, z from P */
            long long lo[3] = {P[0], P[1], P[2]};
            if (k < 3) lo[a]--;
            if (edge_lands_on(p, lo, a, pos[a])) {
                memcpy(cand_lo[nc], lo, sizeof lo);
                cand_axis[nc++] = a;
            }
        }
        for (size_t i = g; i < e; i++) {
            double r;
            if ((size_t)nc == e - g) {
                const size_t lo[3] = {(size_t)cand_lo[i - g][0], (size_t)cand_lo[i - g][1],
                                      (size_t)cand_lo[i - g][2]};
                r = edge_value(p, lo, cand_axis[i - g]);
            } else {
                /* Not the library's numbering (cannot happen): every cell around. */
                r = point_value(p, P);
            }
            values[pv[i].v] = (float)r;
        }
        g = e;
    }
}

/* Whether vertex v lies on a lattice point; else its edge (lo, axis). */
static int vertex_edge(const pmx_mc_post *p, const float *pos, long long pt[3], int *axis)
{
    /* Positions are >= 0 (origin 0): truncation is floor. */
    const double inv = p->step == 1 ? 1.0 : 1.0 / (double)p->step;
    int fractional = 0;
    *axis = -1;
    for (int L = 0; L < 3; L++) {
        double q = p->step == 1 ? (double)pos[L] : (double)pos[L] * inv;
        if (p->step != 1 && q * (double)p->step != (double)pos[L])
            q = (double)pos[L] / (double)p->step;
        const long long f = (long long)q;
        pt[L] = f;
        if (q != (double)f) {
            *axis = L;
            fractional++;
        }
    }
    return fractional;
}

/* The samples of a vertex's cells are scattered over three slices: asking
 * for them a few vertices ahead hides most of the memory latency (the
 * values pass is otherwise bound by it). */
#ifndef PMX_PREFETCH_AHEAD
#define PMX_PREFETCH_AHEAD 16
#endif

typedef struct {
    long long pt[3];
    int axis, fractional;
    const float *rows; /* float volumes: the vector code's first sample, or NULL */
} vertex_decode;

/* vertex_edge for step 1, on floats: the same answers (a float is an
 * integer exactly when it equals its truncation; positions are >= 0). */
static inline int vertex_edge_step1(const float *pos, long long pt[3], int *axis)
{
    int fractional = 0;
    *axis = -1;
    for (int L = 0; L < 3; L++) {
        const long long f = (long long)pos[L];
        pt[L] = f;
        if ((float)f != pos[L]) {
            *axis = L;
            fractional++;
        }
    }
    return fractional;
}

static void decode_and_prefetch(const pmx_mc_post *p, const float *pos, vertex_decode *d)
{
    d->rows = NULL;
    d->fractional =
        p->step == 1 ? vertex_edge_step1(pos, d->pt, &d->axis) : vertex_edge(p, pos, d->pt, &d->axis);
    if (d->fractional != 1) return;
    const long long *pt = d->pt;
    const int a = d->axis, b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
    if ((size_t)pt[a] + 1 >= p->n[a]) return;
#if defined(__SSE2__)
    if (p->type == PM_SAMPLE_F32) {
        const size_t lo[3] = {(size_t)pt[0], (size_t)pt[1], (size_t)pt[2]};
        const float *r = d->rows = edge_rows_f32(p, lo, a);
        if (r) {
            /* The rows the vectors load: 9 sample pairs (x edges) or 6
             * runs of 4 samples (y, z edges). */
            /* The rows the vectors load: 9 sample pairs (x edges) or 6
             * runs of 4 samples (y, z edges). */
            if (a == 0) {
                for (int k = 0; k < 9; k++)
                    __builtin_prefetch(r + (size_t)(k / 3) * p->stride[2] +
                                       (size_t)(k % 3) * p->stride[1]);
            } else {
                for (int k = 0; k < 6; k++) {
                    const float *x =
                        r + (size_t)(k >> 1) * p->stride[c] + (size_t)(k & 1) * p->stride[a];
                    __builtin_prefetch(x);
                    __builtin_prefetch(x + 3);
                }
            }
            return;
        }
    }
#endif
    if (pt[b] < 1 || pt[c] < 1 || (size_t)pt[b] + 1 >= p->n[b] || (size_t)pt[c] + 1 >= p->n[c])
        return;
    const size_t es = pm_sample_size(p->type);
    const char *base =
        p->data + es * ((size_t)pt[a] * p->stride[a] + (size_t)(pt[b] - 1) * p->stride[b] +
                        (size_t)(pt[c] - 1) * p->stride[c]);
    for (int k = 0; k < 9; k++) {
        const char *x =
            base + es * ((size_t)(k / 3) * p->stride[b] + (size_t)(k % 3) * p->stride[c]);
        __builtin_prefetch(x);
        __builtin_prefetch(x + es * p->stride[a]);
    }
}

static void permute3(float *a, const int col[3], float sign)
{
    const float x[3] = {a[0], a[1], a[2]};
    for (int L = 0; L < 3; L++)
        a[col[L]] = sign * x[L];
}

/* Vertex v's position and normal into output columns. */
static void reorder_vertex(const pmx_mc_post *p, pm_mesh *m, size_t v)
{
    permute3(m->positions + 3 * v, p->axis, 1.0f);
    if (m->normals) permute3(m->normals + 3 * v, p->axis, p->negate_normals ? -1.0f : 1.0f);
}

static void flip_indexed(pm_mesh *m, long long t)
{
    uint32_t x = m->indices[3 * t + 1];
    m->indices[3 * t + 1] = m->indices[3 * t + 2];
    m->indices[3 * t + 2] = x;
}

void pmx_mc_values(const pmx_mc_post *p, pm_mesh *m, float *values, int reorder)
{
    const long long V = (long long)m->num_vertices, F = (long long)m->num_triangles;
    const edge_value_fn value_of = edge_value_for(p->type);
    const int flip = reorder && p->flip_faces && m->indices;
    long long on_points = 0;
#pragma omp parallel num_threads(p->threads) if (V > 65536) reduction(+ : on_points)
    {
        /* Each thread walks a contiguous share, decoding (and prefetching
         * for) vertex v + PMX_PREFETCH_AHEAD while it computes vertex v. */
        const long long nt = omp_get_num_threads(), tid = omp_get_thread_num();
        const long long v0 = V * tid / nt, v1 = V * (tid + 1) / nt;
        vertex_decode ring[PMX_PREFETCH_AHEAD];
        for (long long v = v0; v < v1 && v < v0 + PMX_PREFETCH_AHEAD; v++)
            decode_and_prefetch(p, m->positions + 3 * v, &ring[v % PMX_PREFETCH_AHEAD]);
        for (long long v = v0; v < v1; v++) {
            const vertex_decode d = ring[v % PMX_PREFETCH_AHEAD];
            if (v + PMX_PREFETCH_AHEAD < v1)
                decode_and_prefetch(p, m->positions + 3 * (v + PMX_PREFETCH_AHEAD),
                                    &ring[v % PMX_PREFETCH_AHEAD]);
            const int axis = d.axis;
#if defined(__SSE2__)
            if (d.rows) {
                values[v] = (float)edge_value_f32_rows(p, d.rows, axis);
                if (reorder) reorder_vertex(p, m, (size_t)v);
                continue;
            }
#endif
            if (d.fractional == 1 && (size_t)d.pt[axis] + 1 < p->n[axis]) {
                const size_t lo[3] = {(size_t)d.pt[0], (size_t)d.pt[1], (size_t)d.pt[2]};
                values[v] = (float)value_of(p, lo, axis);
            } else if (d.fractional == 0) {
                on_points++; /* after this loop, in the library's frame */
                values[v] = 0.0f;
                continue;
            } else {
                values[v] = (float)point_value(p, d.pt);
            }
            if (reorder) reorder_vertex(p, m, (size_t)v);
        }
        if (flip) {
#pragma omp for schedule(static)
            for (long long t = 0; t < F; t++)
                flip_indexed(m, t);
        }
    }
    if (!on_points) return;
    point_vertex *pv = malloc((size_t)on_points * sizeof *pv);
    size_t count = 0;
    for (long long v = 0; v < V; v++) {
        long long pt[3];
        int axis;
        if (vertex_edge(p, m->positions + 3 * v, pt, &axis) != 0) continue;
        if (!pv) {
            values[v] = (float)point_value(p, pt);
            if (reorder) reorder_vertex(p, m, (size_t)v);
            continue;
        }
        pv[count].key = (uint64_t)pt[0] + p->n[0] * ((uint64_t)pt[1] + p->n[1] * (uint64_t)pt[2]);
        pv[count++].v = (size_t)v;
    }
    if (pv) {
        point_values(p, m, pv, count, values);
        if (reorder)
            for (size_t i = 0; i < count; i++)
                reorder_vertex(p, m, pv[i].v);
    }
    free(pv);
}

/* ------------------------------------------------------------------------ */
/* Axis order and winding                                                      */
/* ------------------------------------------------------------------------ */

void pmx_mc_reorder(const pmx_mc_post *p, pm_mesh *m)
{
    const long long V = (long long)m->num_vertices, F = (long long)m->num_triangles;
#pragma omp parallel num_threads(p->threads) if (V > 65536)
    {
#pragma omp for schedule(static) nowait
        for (long long v = 0; v < V; v++)
            reorder_vertex(p, m, (size_t)v);
        if (p->flip_faces && m->indices) {
#pragma omp for schedule(static)
            for (long long t = 0; t < F; t++)
                flip_indexed(m, t);
        }
    }
    if (p->flip_faces && !m->indices) {
        /* A soup: the second and third vertex of every triangle trade places. */
        for (long long t = 0; t < F; t++) {
            float tmp[3];
            float *a = m->positions + 9 * t + 3, *b = a + 3;
            memcpy(tmp, a, sizeof tmp);
            memcpy(a, b, sizeof tmp);
            memcpy(b, tmp, sizeof tmp);
            if (m->normals) {
                a = m->normals + 9 * t + 3;
                b = a + 3;
                memcpy(tmp, a, sizeof tmp);
                memcpy(a, b, sizeof tmp);
                memcpy(b, tmp, sizeof tmp);
            }
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Range                                                                      */
/* ------------------------------------------------------------------------ */

/* The range of one row: NaN left out (lo > hi when every sample is NaN);
 * the loop compares in the sample type (vectorised: x < l ? x : l is a
 * vector minimum). */
#define ROW_RANGE(NAME, T)                                                                         \
    static void NAME(const char *p, size_t n, double *lo, double *hi)                              \
    {                                                                                              \
        const T *row = (const T *)p;                                                               \
        size_t i = 0;                                                                              \
        while (i < n && row[i] != row[i])                                                          \
            i++;                                                                                   \
        if (i == n) {                                                                              \
            *lo = INFINITY;                                                                        \
            *hi = -INFINITY;                                                                       \
            return;                                                                                \
        }                                                                                          \
        T l = row[i], h = row[i];                                                                  \
        for (; i < n; i++) {                                                                       \
            const T x = row[i];                                                                    \
            l = x < l ? x : l;                                                                     \
            h = x > h ? x : h;                                                                     \
        }                                                                                          \
        *lo = (double)l;                                                                           \
        *hi = (double)h;                                                                           \
    }

ROW_RANGE(row_range_u8, uint8_t)
ROW_RANGE(row_range_u16, uint16_t)
ROW_RANGE(row_range_i16, int16_t)
#if defined(__SSE2__)
/* Floats: the compiler does not vectorise `x < l ? x : l` (without
 * -ffast-math), and the scalar loop ran at a third of the memory's speed.
 * min_ps(x, acc) is `x < acc ? x : acc`: a NaN x leaves acc, and the
 * accumulators start at +inf / -inf, so NaN is left out as above; four
 * accumulators per side. */
static void row_range_f32(const char *p, size_t n, double *lo, double *hi)
{
    const float *row = (const float *)p;
    __m128 l[4], h[4];
    for (int q = 0; q < 4; q++) {
        l[q] = _mm_set1_ps(INFINITY);
        h[q] = _mm_set1_ps(-INFINITY);
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int q = 0; q < 4; q++) {
            const __m128 x = _mm_loadu_ps(row + i + 4 * q);
            l[q] = _mm_min_ps(x, l[q]);
            h[q] = _mm_max_ps(x, h[q]);
        }
    __m128 L = _mm_min_ps(_mm_min_ps(l[0], l[1]), _mm_min_ps(l[2], l[3]));
    __m128 H = _mm_max_ps(_mm_max_ps(h[0], h[1]), _mm_max_ps(h[2], h[3]));
    float lv[4], hv[4];
    _mm_storeu_ps(lv, L);
    _mm_storeu_ps(hv, H);
    float ls = lv[0], hs = hv[0];
    for (int q = 1; q < 4; q++) {
        ls = lv[q] < ls ? lv[q] : ls;
        hs = hv[q] > hs ? hv[q] : hs;
    }
    for (; i < n; i++) {
        const float x = row[i];
        ls = x < ls ? x : ls;
        hs = x > hs ? x : hs;
    }
    *lo = (double)ls;
    *hi = (double)hs;
}

static void row_range_f64(const char *p, size_t n, double *lo, double *hi)
{
    const double *row = (const double *)p;
    __m128d l[4], h[4];
    for (int q = 0; q < 4; q++) {
        l[q] = _mm_set1_pd(INFINITY);
        h[q] = _mm_set1_pd(-INFINITY);
    }
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int q = 0; q < 4; q++) {
            const __m128d x = _mm_loadu_pd(row + i + 2 * q);
            l[q] = _mm_min_pd(x, l[q]);
            h[q] = _mm_max_pd(x, h[q]);
        }
    __m128d L = _mm_min_pd(_mm_min_pd(l[0], l[1]), _mm_min_pd(l[2], l[3]));
    __m128d H = _mm_max_pd(_mm_max_pd(h[0], h[1]), _mm_max_pd(h[2], h[3]));
    double lv[2], hv[2];
    _mm_storeu_pd(lv, L);
    _mm_storeu_pd(hv, H);
    double ls = lv[1] < lv[0] ? lv[1] : lv[0], hs = hv[1] > hv[0] ? hv[1] : hv[0];
    for (; i < n; i++) {
        const double x = row[i];
        ls = x < ls ? x : ls;
        hs = x > hs ? x : hs;
    }
    *lo = ls;
    *hi = hs;
}
#else
ROW_RANGE(row_range_f32, float)
ROW_RANGE(row_range_f64, double)
#endif

void pmx_range(const char *data, pm_sample_type type, const size_t n[3], const size_t stride[3],
               int threads, double *lo_out, double *hi_out)
{
    void (*row_range)(const char *, size_t, double *, double *) = row_range_f64;
    switch (type) {
    case PM_SAMPLE_U8: row_range = row_range_u8; break;
    case PM_SAMPLE_U16: row_range = row_range_u16; break;
    case PM_SAMPLE_I16: row_range = row_range_i16; break;
    case PM_SAMPLE_F32: row_range = row_range_f32; break;
    case PM_SAMPLE_F64: row_range = row_range_f64; break;
    }
    const size_t es = pm_sample_size(type);
    const long long rows = (long long)(n[1] * n[2]);
    double lo = INFINITY, hi = -INFINITY;
    if (threads < 1) threads = 1;
    /* Small volumes (the calls that run on the calling thread) stay serial:
     * no OpenMP team is started for them. */
    const int par = threads > 1 && (double)rows * (double)n[0] >= (double)(1 << 20);
#pragma omp parallel for schedule(static) reduction(min                                            \
                                                    : lo) reduction(max                            \
                                                                    : hi) num_threads(threads) if (par)
    for (long long r = 0; r < rows; r++) {
        const size_t k = (size_t)r / n[1], j = (size_t)r % n[1];
        double l, h;
        row_range(data + es * (k * stride[2] + j * stride[1]), n[0], &l, &h);
        if (l < lo) lo = l;
        if (h > hi) hi = h;
    }
    *lo_out = lo;
    *hi_out = hi;
}
