/* The per-element rules of mesh post-processing (docs/splashsurf.md):
 * face normals, the Laplacian and Taubin steps, normal smoothing, the
 * smoothing-weight curve, the SPH kernel gradient, the nearest lattice
 * point of the marching-cubes cleanup and the quad criteria, and the
 * data-parallel steps built from them (pmi_post_step: adjacency, vertex
 * normals, normal smoothing, Laplacian steps, the AABB clip, SPH
 * interpolation), each run over an index range by the CPU runner
 * (src/cpu/smooth.c, OpenMP) or the CUDA one (src/cuda/postprocess.cu, one
 * thread per element); src/core/postprocess.c drives them. Compiled by gcc
 * and nvcc without contraction (-ffp-contract=off, --fmad=false), so both
 * backends compute the same bits: the operations and their order here are
 * the definition. Every sum runs over a sorted list (triangles and
 * neighbours ascending, particles in cell order), in double; atomics only
 * count, or store values that do not depend on the order. Internal header,
 * C and CUDA C++. */
#ifndef PM_CORE_POST_RULES_H
#define PM_CORE_POST_RULES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"
#include "core/atomics.h"
#include "core/sph_kernel.h"

#ifdef __CUDACC__
#define PMI_PHD static __host__ __device__ __forceinline__
#else
#define PMI_PHD static inline
#endif

/* (b - a) x (c - b) in double: twice the area times the unit normal of the
 * triangle (a, b, c), as splashsurf's vertex normals sum it. */
PMI_PHD void pmi_post_face_normal(const float *a, const float *b, const float *c, double n[3])
{
    const double e0x = (double)b[0] - (double)a[0], e0y = (double)b[1] - (double)a[1],
                 e0z = (double)b[2] - (double)a[2];
    const double e1x = (double)c[0] - (double)b[0], e1y = (double)c[1] - (double)b[1],
                 e1z = (double)c[2] - (double)b[2];
    n[0] = e0y * e1z - e0z * e1y;
    n[1] = e0z * e1x - e0x * e1z;
    n[2] = e0x * e1y - e0y * e1x;
}

/* v / |v| rounded to float; 1 when written, 0 (out untouched) when |v| is
 * zero or not finite. */
PMI_PHD int pmi_post_normalize(const double v[3], float out[3])
{
    const double len = sqrt(v[0] * v[0] + (v[1] * v[1] + v[2] * v[2]));
    if (!(len > 0.0) || !(len < INFINITY)) return 0;
    out[0] = (float)(v[0] / len);
    out[1] = (float)(v[1] / len);
    out[2] = (float)(v[2] / len);
    return 1;
}

/* One coordinate of a Laplacian step: x moves by factor f towards the mean
 * of its k neighbours (their sum s, in ascending index order):
 * (1 - f) x + f (s / k). */
PMI_PHD float pmi_post_laplace(float x, double s, uint32_t k, double f)
{
    const double mean = s / (double)k;
    return (float)((1.0 - f) * (double)x + f * mean);
}

/* splashsurf's smoothing weight of an interpolated weighted neighbour
 * count n: x = min(max(n, 0) / norm, 1), smooth step 6x^5 - 15x^4 + 10x^3
 * (in that association). */
PMI_PHD double pmi_post_smooth_weight(double n, double norm)
{
    double x = (n > 0.0 ? n : 0.0) / norm;
    if (x > 1.0) x = 1.0;
    if (!(x >= 0.0)) x = 0.0; /* NaN */
    const double x2 = x * x, x3 = x2 * x, x4 = x3 * x, x5 = x4 * x;
    return (6.0 * x5 - 15.0 * x4) + 10.0 * x3;
}

/* The weighted neighbour count term of a pair at squared distance d2:
 * 1 - d2 / h2 (the caller tests d2 < h2). */
PMI_PHD double pmi_post_wnn_term(double d2, double h2) { return 1.0 - d2 / h2; }

/* dW/dr of the cubic spline with support h (splashsurf's
 * CubicSplineKernel::evaluate_gradient_norm written in q = r / h):
 * (8 / (pi h^3)) (2 / h) f'(2q) with f'(s) = 3/4 (3s^2 - 4s) for s < 1 and
 * -3/4 (2 - s)^2 for 1 <= s < 2, 0 beyond; <= 0. */
PMI_PHD double pmi_post_kernel_dwdr(double r, double h)
{
    const double pi = 3.14159265358979323846;
    const double s = (r + r) / h;
    double f;
    if (s < 1.0)
        f = (3.0 / (4.0 * pi)) * (-4.0 * s + 3.0 * s * s);
    else if (s < 2.0) {
        const double t = 2.0 - s;
        f = -(3.0 / (4.0 * pi)) * (t * t);
    } else
        f = 0.0;
    return (8.0 / (h * h * h)) * f * (2.0 / h);
}

/* The nearest lattice index on one axis of coordinate x (lattice points at
 * origin + g * spacing): splashsurf's rule, the cell's lower point g =
 * floor((x - origin) / spacing), then g + 1 when x lies more than half a
 * spacing above it. */
PMI_PHD int64_t pmi_post_nearest_point(float x, double origin, double spacing)
{
    const double g = floor(((double)x - origin) / spacing);
    const double lower = origin + g * spacing;
    return (int64_t)g + (((double)x - lower) > 0.5 * spacing ? 1 : 0);
}

/* ---- quads (splashsurf's convert_tris_to_quads) ----------------------- */

/* The quad of triangles ti and tj sharing an edge, in ti's orientation:
 * ti's vertices with tj's other vertex inserted after the first shared
 * corner of ti that is followed by the other shared one. */
PMI_PHD void pmi_post_quad_of(const uint32_t ti[3], const uint32_t tj[3], uint32_t q[4])
{
    uint32_t missing = tj[0];
    for (int k = 0; k < 3; k++)
        if (tj[k] != ti[0] && tj[k] != ti[1] && tj[k] != ti[2]) missing = tj[k];
    const int has0 = tj[0] == ti[0] || tj[1] == ti[0] || tj[2] == ti[0];
    const int has1 = tj[0] == ti[1] || tj[1] == ti[1] || tj[2] == ti[1];
    q[0] = ti[0];
    if (has0 && has1) {
        q[1] = missing;
        q[2] = ti[1];
        q[3] = ti[2];
    } else if (has0) {
        q[1] = ti[1];
        q[2] = ti[2];
        q[3] = missing;
    } else {
        q[1] = ti[1];
        q[2] = missing;
        q[3] = ti[2];
    }
}

/* Interior angle of a quad at `c` between the directions to prev and next,
 * measured through the opposite vertex: angle(prev, opp) + angle(opp, next)
 * (splashsurf's quad_interior_angle), in double. */
PMI_PHD double pmi_post_quad_angle(const float *c, const float *prev, const float *next,
                                   const float *opp)
{
    double dp[3], dm[3], dn[3];
    for (int k = 0; k < 3; k++) {
        dp[k] = (double)prev[k] - (double)c[k];
        dm[k] = (double)opp[k] - (double)c[k];
        dn[k] = (double)next[k] - (double)c[k];
    }
    const double lp = sqrt(dp[0] * dp[0] + dp[1] * dp[1] + dp[2] * dp[2]);
    const double lm = sqrt(dm[0] * dm[0] + dm[1] * dm[1] + dm[2] * dm[2]);
    const double ln = sqrt(dn[0] * dn[0] + dn[1] * dn[1] + dn[2] * dn[2]);
    double cp = (dp[0] * dm[0] + dp[1] * dm[1] + dp[2] * dm[2]) / (lp * lm);
    double cn = (dm[0] * dn[0] + dm[1] * dn[1] + dm[2] * dn[2]) / (lm * ln);
    cp = cp > 1.0 ? 1.0 : cp < -1.0 ? -1.0 : cp;
    cn = cn > 1.0 ? 1.0 : cn < -1.0 ? -1.0 : cn;
    return acos(cp) + acos(cn);
}

/* Whether the quad q (4 vertex indices into pos) of two triangles with unit
 * normals ni, nj and shared edge (sa, sb) meets the three criteria: every
 * edge within [d / sqrt2 / ratio, d / sqrt2 * ratio] (d = |sa - sb|), every
 * interior angle <= max_angle (radians, NaN fails), ni . nj >= min_dot. */
PMI_PHD int pmi_post_quad_ok(const float *pos, const uint32_t q[4], uint32_t sa, uint32_t sb,
                             const double ni[3], const double nj[3], double ratio, double max_angle,
                             double min_dot)
{
    const float *a = pos + 3 * (size_t)sa, *b = pos + 3 * (size_t)sb;
    const double dx = (double)a[0] - (double)b[0], dy = (double)a[1] - (double)b[1],
                 dz = (double)a[2] - (double)b[2];
    const double diag = sqrt(dx * dx + dy * dy + dz * dz);
    const double sqrt2 = 1.4142135623730951;
    const double max_len = (diag / sqrt2) * ratio, min_len = (diag / sqrt2) * (1.0 / ratio);
    const float *v[4];
    for (int k = 0; k < 4; k++)
        v[k] = pos + 3 * (size_t)q[k];
    for (int k = 0; k < 4; k++) {
        const float *p0 = v[k], *p1 = v[(k + 1) & 3];
        const double ex = (double)p1[0] - (double)p0[0], ey = (double)p1[1] - (double)p0[1],
                     ez = (double)p1[2] - (double)p0[2];
        const double l = sqrt(ex * ex + ey * ey + ez * ez);
        if (!(l <= max_len && l >= min_len)) return 0;
    }
    const double ang[4] = {
        pmi_post_quad_angle(v[0], v[3], v[1], v[2]), pmi_post_quad_angle(v[1], v[0], v[2], v[3]),
        pmi_post_quad_angle(v[2], v[3], v[1], v[0]), pmi_post_quad_angle(v[3], v[2], v[0], v[1])};
    for (int k = 0; k < 4; k++)
        if (!(ang[k] <= max_angle)) return 0;
    const double dot = ni[0] * nj[0] + ni[1] * nj[1] + ni[2] * nj[2];
    return dot >= min_dot;
}

/* ---- the data-parallel steps -------------------------------------------- */

/* The steps, each run over an index range (pmi_post_step). */
enum pmi_post_step_id {
    PMI_POST_ZERO_U32 = 0,  /* per element: dst[i] = 0 */
    PMI_POST_COPY_U32,      /* per element: dst[i] = src[i] */
    PMI_POST_CHECK_INDEX,   /* per corner: an index >= nv puts its triangle into *error (min) */
    PMI_POST_VT_COUNT,      /* per corner: cnt[v]++ */
    PMI_POST_VT_FILL,       /* per corner: its triangle into v's row (atomic cursor) */
    PMI_POST_VT_SORT,       /* per vertex: its triangles ascending */
    PMI_POST_NB_FILL,       /* per vertex: the other corners of its triangles, sorted, distinct
                             * ones first; their count to cnt[v] */
    PMI_POST_NB_COMPACT,    /* per vertex: the distinct neighbours into nb_list */
    PMI_POST_NORMAL,        /* per vertex: area-weighted normal */
    PMI_POST_SMOOTH_NORMAL, /* per vertex: normalised sum of the neighbours' normals */
    PMI_POST_LAPLACE,       /* per vertex: one Laplacian step (factor, weights) */
    PMI_POST_CLIP_KEEP,     /* per triangle: flag = a vertex in [min, max) */
    PMI_POST_CLIP_MARK,     /* per kept triangle: used[v] = 1 for its vertices */
    PMI_POST_CLIP_TRI,      /* per kept triangle: its (renumbered) vertices to tri_out */
    PMI_POST_CLIP_VERT,     /* per kept vertex: position (clamped) and normal to its new slot;
                             * map_out[v] = new index or UINT32_MAX */
    PMI_POST_SPH_NORMAL,    /* per point: SPH normal */
    PMI_POST_SPH_INTERP,    /* per point: corrected interpolation of comps values */
    PMI_POST_SPH_NEED,      /* per point: need[cell] = 1 for its 27 cells */
    PMI_POST_SPH_WNN,       /* per particle slot: weighted neighbour count (0 where unneeded) */
    PMI_POST_SPH_WEIGHT,    /* per point: smoothing weight (out) and count (out2, optional) */
    PMI_POST_SPH_VOLUME,    /* per particle slot: m / rho_j into slot_d (the CUDA build; the
                             * CPU's vectorised pmi_sph_volumes gives the same bits) */
    PMI_POST_NUM_STEPS
};

/* The SPH interpolator's particles: those kept (the aabb filter) sorted by
 * cells of edge h (cell (i, j, k) spans origin + [i, i+1) h ..., cd cells
 * per axis, x fastest), in input order inside a cell, with their volumes
 * m / rho_j and input indices. Arrays in host memory, or device memory. */
typedef struct pmi_post_grid {
    size_t n;    /* particles given */
    size_t kept; /* sorted slots */
    long long cd[3];
    double origin[3];
    double h;
    double mass;
    const uint32_t *start; /* cd[0] cd[1] cd[2] + 1 slot offsets */
    const float *xyz;      /* 3 per slot */
    const double *vol;     /* per slot */
    const uint32_t *input; /* slot -> index among the n given */
} pmi_post_grid;

/* pm_sph_interpolator (opaque in pyramesh.h). */
struct pm_sph_interpolator {
    pmi_post_grid g;
    pm_context *ctx; /* the CUDA context whose memory holds g's arrays; NULL: host */
    void *own[4];    /* g's arrays, freed by pm_sph_interpolator_destroy */
};

/* Everything a step reads or writes, by value (arrays in the memory of the
 * runner). */
typedef struct pmi_post_args {
    /* the mesh */
    size_t nv, nt;
    const uint32_t *tri;
    const float *pos;
    float *pos_out;
    const float *nrm;
    float *nrm_out;
    const float *weights; /* per vertex or NULL */
    double factor;        /* Laplacian factor */
    /* adjacency: vertex -> triangles (vt_*), vertex -> neighbours (nb_*) */
    uint32_t *cnt;     /* nv + 1 counts (cnt[nv] stays 0: scanned into *_off) */
    uint32_t *cursor;  /* nv */
    uint32_t *vt_off;  /* nv + 1 */
    uint32_t *vt_list; /* 3 nt */
    uint32_t *raw;     /* 6 nt: neighbour candidates, row v at 2 vt_off[v] */
    uint32_t *nb_off;  /* nv + 1 */
    uint32_t *nb_list;
    /* the AABB clip */
    double box_min[3], box_max[3];
    int clamp, keep_vertices;
    uint32_t *flag, *toff, *used, *vmap, *tri_out, *map_out;
    /* SPH */
    pmi_post_grid g;
    const float *points;
    const float *values; /* per input particle, comps each */
    int comps;
    float *out, *out2;
    double *slot_d; /* per slot */
    uint32_t *need; /* per cell */
    double normalization;
    /* copies; the first failure */
    uint32_t *dst;
    const uint32_t *src;
    unsigned long long *error;
} pmi_post_args;

/* *p = 1 where several elements may store the same value. */
PMI_PHD void pmi_post_store_one(uint32_t *p)
{
#ifdef __CUDA_ARCH__
    *(volatile uint32_t *)p = 1u;
#else
    __atomic_store_n(p, 1u, __ATOMIC_RELAXED);
#endif
}

/* Sorts k values ascending: insertion sort for short rows (every row of a
 * marching-cubes mesh), heap sort beyond (a fan of thousands stays
 * O(k log k)). */
PMI_PHD void pmi_post_sift(uint32_t *a, uint32_t root, uint32_t end)
{
    while (2 * root + 1 < end) {
        uint32_t child = 2 * root + 1;
        if (child + 1 < end && a[child] < a[child + 1]) child++;
        if (!(a[root] < a[child])) return;
        const uint32_t t = a[root];
        a[root] = a[child];
        a[child] = t;
        root = child;
    }
}
PMI_PHD void pmi_post_sort(uint32_t *a, uint32_t k)
{
    if (k <= 32) {
        for (uint32_t i = 1; i < k; i++) {
            const uint32_t x = a[i];
            uint32_t j = i;
            while (j > 0 && a[j - 1] > x) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    for (uint32_t s = k / 2; s-- > 0;)
        pmi_post_sift(a, s, k);
    for (uint32_t e = k; e-- > 1;) {
        const uint32_t t = a[0];
        a[0] = a[e];
        a[e] = t;
        pmi_post_sift(a, 0, e);
    }
}

/* Area-weighted normal of vertex v: the face normals of its triangles
 * (row list[off[v] .. off[v+1]), ascending) summed in double, normalised;
 * (0, 0, 0) where the sum is zero. */
PMI_PHD void pmi_post_vertex_normal(const float *pos, const uint32_t *tri, const uint32_t *off,
                                    const uint32_t *list, size_t v, float *out)
{
    double sum[3] = {0.0, 0.0, 0.0};
    for (uint32_t i = off[v]; i < off[v + 1]; i++) {
        const uint32_t *t = tri + 3 * (size_t)list[i];
        double n[3];
        pmi_post_face_normal(pos + 3 * (size_t)t[0], pos + 3 * (size_t)t[1], pos + 3 * (size_t)t[2],
                             n);
        sum[0] += n[0];
        sum[1] += n[1];
        sum[2] += n[2];
    }
    if (!pmi_post_normalize(sum, out)) out[0] = out[1] = out[2] = 0.0f;
}

/* Normal smoothing of vertex v: normalise(sum of its neighbours' normals,
 * ascending, in double); unchanged where the sum is zero. */
PMI_PHD void pmi_post_smooth_normal(const float *nrm, const uint32_t *off, const uint32_t *list,
                                    size_t v, float *out)
{
    double sum[3] = {0.0, 0.0, 0.0};
    for (uint32_t i = off[v]; i < off[v + 1]; i++) {
        const float *n = nrm + 3 * (size_t)list[i];
        sum[0] += (double)n[0];
        sum[1] += (double)n[1];
        sum[2] += (double)n[2];
    }
    if (!pmi_post_normalize(sum, out)) {
        out[0] = nrm[3 * v];
        out[1] = nrm[3 * v + 1];
        out[2] = nrm[3 * v + 2];
    }
}

/* One Laplacian step of vertex v with factor f (times weights[v] when
 * given): the neighbours' positions summed ascending in double; a vertex
 * without neighbours stays. */
PMI_PHD void pmi_post_laplace_vertex(const float *pos, const uint32_t *off, const uint32_t *list,
                                     const float *weights, double factor, size_t v, float *out)
{
    const float *x = pos + 3 * v;
    const uint32_t k = off[v + 1] - off[v];
    if (k == 0) {
        out[0] = x[0];
        out[1] = x[1];
        out[2] = x[2];
        return;
    }
    double sum[3] = {0.0, 0.0, 0.0};
    for (uint32_t i = off[v]; i < off[v + 1]; i++) {
        const float *y = pos + 3 * (size_t)list[i];
        sum[0] += (double)y[0];
        sum[1] += (double)y[1];
        sum[2] += (double)y[2];
    }
    const double f = weights ? factor * (double)weights[v] : factor;
    for (int c = 0; c < 3; c++)
        out[c] = pmi_post_laplace(x[c], sum[c], k, f);
}

/* splashsurf's Aabb3d::contains_point: min <= p < max on every axis. */
PMI_PHD int pmi_post_in_box(const float *p, const double *mn, const double *mx)
{
    int in = 1;
    for (int a = 0; a < 3; a++)
        in &= (double)p[a] >= mn[a] && (double)p[a] < mx[a];
    return in;
}

/* ---- SPH sums over the grid --------------------------------------------- */

/* The cells of edge h over the kept particles' box [bmin, bmax] grown by h
 * and one more cell per side: lo[a] (cell 0's global index), cd[a] cells.
 * 0 when the coordinates are too large. */
PMI_PHD int pmi_post_grid_layout(const double bmin[3], const double bmax[3], double h,
                                 long long lo[3], long long cd[3], double origin[3])
{
    for (int a = 0; a < 3; a++) {
        const double g0 = floor((bmin[a] - h) / h) - 1, g1 = ceil((bmax[a] + h) / h) + 1;
        if (!(fabs(g0) < 1e15 && fabs(g1) < 1e15)) return 0;
        lo[a] = (long long)g0;
        cd[a] = (long long)(g1 - g0 + 1);
        origin[a] = pmi_lattice_coord((int64_t)lo[a], h);
    }
    return 1;
}

/* The cell of a point, clamped into the grid (pmi_cell_of per axis). */
PMI_PHD void pmi_post_cell(const pmi_post_grid *g, const float *x, long long c[3])
{
    for (int a = 0; a < 3; a++)
        c[a] = pmi_cell_of(x[a], g->origin[a], g->h, g->cd[a]);
}

/* The slot ranges of the (up to) 9 rows of cells around cell c: rows in z,
 * then y order, each the cells x-1 .. x+1 (one contiguous run of slots).
 * Returns the row count. */
PMI_PHD int pmi_post_rows(const pmi_post_grid *g, const long long c[3], uint32_t b[9],
                          uint32_t e[9])
{
    int n = 0;
    const long long x0 = c[0] > 0 ? c[0] - 1 : 0,
                    x1 = c[0] + 1 < g->cd[0] ? c[0] + 1 : g->cd[0] - 1;
    for (int dz = -1; dz <= 1; dz++) {
        const long long z = c[2] + dz;
        if (z < 0 || z >= g->cd[2]) continue;
        for (int dy = -1; dy <= 1; dy++) {
            const long long y = c[1] + dy;
            if (y < 0 || y >= g->cd[1]) continue;
            const size_t row = ((size_t)z * (size_t)g->cd[1] + (size_t)y) * (size_t)g->cd[0];
            b[n] = g->start[row + (size_t)x0];
            e[n] = g->start[row + (size_t)x1 + 1];
            n++;
        }
    }
    return n;
}

/* SPH normal at x: normalise(sum_j V_j (x_j - x) / d dW/dr) over the
 * particles with 0 < d^2 < h^2, in row order; (0, 0, 0) where none. */
PMI_PHD void pmi_post_sph_normal(const pmi_post_grid *g, const float *x, float *out)
{
    long long c[3];
    uint32_t b[9], e[9];
    pmi_post_cell(g, x, c);
    const int rows = pmi_post_rows(g, c, b, e);
    const double h = g->h, h2 = h * h;
    const float *X = g->xyz;
    double gr[3] = {0.0, 0.0, 0.0};
    for (int r = 0; r < rows; r++)
        for (uint32_t j = b[r]; j < e[r]; j++) {
            const double dx = (double)X[3 * (size_t)j] - (double)x[0];
            const double dy = (double)X[3 * (size_t)j + 1] - (double)x[1];
            const double dz = (double)X[3 * (size_t)j + 2] - (double)x[2];
            const double d2 = pmi_dist2(dx, dy, dz);
            if (!(d2 < h2) || d2 == 0.0) continue;
            const double d = pmi_sqrt(d2);
            const double f = g->vol[j] * (pmi_post_kernel_dwdr(d, h) / d);
            gr[0] += dx * f;
            gr[1] += dy * f;
            gr[2] += dz * f;
        }
    if (!pmi_post_normalize(gr, out)) out[0] = out[1] = out[2] = 0.0f;
}

/* sum_j A_j V_j W_j / sum_j V_j W_j at x (d^2 < h^2, row order), for
 * per-slot values (per_slot, one component) or per-input values
 * (per_input, comps components, at most 16); 0 where no particle is near. */
PMI_PHD void pmi_post_sph_interp(const pmi_post_grid *g, const float *x, const double *per_slot,
                                 const float *per_input, int comps, double *acc)
{
    long long c[3];
    uint32_t b[9], e[9];
    pmi_post_cell(g, x, c);
    const int rows = pmi_post_rows(g, c, b, e);
    const pmi_sph_kernel k = pmi_sph_kernel_of(g->h);
    const float *X = g->xyz;
    double wsum = 0.0;
    for (int q = 0; q < comps; q++)
        acc[q] = 0.0;
    for (int r = 0; r < rows; r++)
        for (uint32_t j = b[r]; j < e[r]; j++) {
            const double dx = (double)X[3 * (size_t)j] - (double)x[0];
            const double dy = (double)X[3 * (size_t)j + 1] - (double)x[1];
            const double dz = (double)X[3 * (size_t)j + 2] - (double)x[2];
            const double d2 = pmi_dist2(dx, dy, dz);
            if (!(d2 < k.h2)) continue;
            const double vw = g->vol[j] * pmi_sph_w(d2, &k);
            wsum += vw;
            if (per_slot)
                acc[0] += per_slot[j] * vw;
            else
                for (int q = 0; q < comps; q++)
                    acc[q] += (double)per_input[(size_t)comps * g->input[j] + (size_t)q] * vw;
        }
    for (int q = 0; q < comps; q++)
        acc[q] = wsum > 0.0 ? acc[q] / wsum : 0.0;
}

/* The weighted neighbour count of slot s: sum over the other particles
 * with d^2 < h^2 of 1 - d^2 / h^2, in row order. */
PMI_PHD double pmi_post_sph_wnn(const pmi_post_grid *g, size_t s)
{
    const float *X = g->xyz, *x = X + 3 * s;
    long long c[3];
    uint32_t b[9], e[9];
    pmi_post_cell(g, x, c);
    const int rows = pmi_post_rows(g, c, b, e);
    const double h2 = g->h * g->h;
    double sum = 0.0;
    for (int r = 0; r < rows; r++)
        for (uint32_t j = b[r]; j < e[r]; j++) {
            if (j == (uint32_t)s) continue;
            const double d2 = pmi_dist2((double)X[3 * (size_t)j] - (double)x[0],
                                        (double)X[3 * (size_t)j + 1] - (double)x[1],
                                        (double)X[3 * (size_t)j + 2] - (double)x[2]);
            if (d2 < h2) sum += pmi_post_wnn_term(d2, h2);
        }
    return sum;
}

/* The volume m / rho_j of slot s, rho_j = m sum_k W (the particle itself
 * included), in row order: the CPU density's definition
 * (docs/reconstruct.md, pmi_sph_volumes on cells of edge h). */
PMI_PHD double pmi_post_sph_volume(const pmi_post_grid *g, size_t s)
{
    const float *X = g->xyz;
    long long c[3];
    uint32_t b[9], e[9];
    pmi_post_cell(g, X + 3 * s, c);
    const int rows = pmi_post_rows(g, c, b, e);
    const pmi_sph_kernel k = pmi_sph_kernel_of(g->h);
    const double xk = X[3 * s], yk = X[3 * s + 1], zk = X[3 * s + 2];
    double sum = 0.0;
    for (int r = 0; r < rows; r++)
        for (uint32_t j = b[r]; j < e[r]; j++) {
            const double d2 =
                pmi_dist2((double)X[3 * (size_t)j] - xk, (double)X[3 * (size_t)j + 1] - yk,
                          (double)X[3 * (size_t)j + 2] - zk);
            if (d2 < k.h2) sum += pmi_sph_w(d2, &k);
        }
    return pmi_sph_volume(g->mass, sum);
}

/* ---- the step dispatcher -------------------------------------------------- */

PMI_PHD void pmi_post_step(int step, size_t i, const pmi_post_args *a)
{
    switch (step) {
    case PMI_POST_ZERO_U32: a->dst[i] = 0; break;
    case PMI_POST_COPY_U32: a->dst[i] = a->src[i]; break;
    case PMI_POST_CHECK_INDEX:
        if (a->tri[i] >= a->nv) pmi_atomic_min(a->error, (unsigned long long)(i / 3));
        break;
    case PMI_POST_VT_COUNT: pmi_atomic_inc(a->cnt + a->tri[i]); break;
    case PMI_POST_VT_FILL: {
        const uint32_t v = a->tri[i];
        a->vt_list[a->vt_off[v] + pmi_atomic_inc(a->cursor + v)] = (uint32_t)(i / 3);
        break;
    }
    case PMI_POST_VT_SORT:
        pmi_post_sort(a->vt_list + a->vt_off[i], a->vt_off[i + 1] - a->vt_off[i]);
        break;
    case PMI_POST_NB_FILL: {
        uint32_t *row = a->raw + 2 * (size_t)a->vt_off[i];
        uint32_t k = 0;
        for (uint32_t j = a->vt_off[i]; j < a->vt_off[i + 1]; j++) {
            const uint32_t *t = a->tri + 3 * (size_t)a->vt_list[j];
            for (int c = 0; c < 3; c++)
                if (t[c] != (uint32_t)i) row[k++] = t[c];
        }
        pmi_post_sort(row, k);
        uint32_t u = 0;
        for (uint32_t j = 0; j < k; j++)
            if (u == 0 || row[u - 1] != row[j]) row[u++] = row[j];
        a->cnt[i] = u;
        break;
    }
    case PMI_POST_NB_COMPACT: {
        const uint32_t *row = a->raw + 2 * (size_t)a->vt_off[i];
        uint32_t *o = a->nb_list + a->nb_off[i];
        const uint32_t u = a->nb_off[i + 1] - a->nb_off[i];
        for (uint32_t j = 0; j < u; j++)
            o[j] = row[j];
        break;
    }
    case PMI_POST_NORMAL:
        pmi_post_vertex_normal(a->pos, a->tri, a->vt_off, a->vt_list, i, a->nrm_out + 3 * i);
        break;
    case PMI_POST_SMOOTH_NORMAL:
        pmi_post_smooth_normal(a->nrm, a->nb_off, a->nb_list, i, a->nrm_out + 3 * i);
        break;
    case PMI_POST_LAPLACE:
        pmi_post_laplace_vertex(a->pos, a->nb_off, a->nb_list, a->weights, a->factor, i,
                                a->pos_out + 3 * i);
        break;
    case PMI_POST_CLIP_KEEP: {
        const uint32_t *t = a->tri + 3 * i;
        int in = 0;
        for (int k = 0; k < 3; k++)
            in |= pmi_post_in_box(a->pos + 3 * (size_t)t[k], a->box_min, a->box_max);
        a->flag[i] = (uint32_t)in;
        break;
    }
    case PMI_POST_CLIP_MARK:
        if (a->flag[i])
            for (int k = 0; k < 3; k++)
                pmi_post_store_one(a->used + a->tri[3 * i + (size_t)k]);
        break;
    case PMI_POST_CLIP_TRI:
        if (a->flag[i]) {
            uint32_t *o = a->tri_out + 3 * (size_t)a->toff[i];
            for (int k = 0; k < 3; k++) {
                const uint32_t v = a->tri[3 * i + (size_t)k];
                o[k] = a->keep_vertices ? v : a->vmap[v];
            }
        }
        break;
    case PMI_POST_CLIP_VERT: {
        const int kept = a->keep_vertices || a->used[i];
        const uint32_t j = a->keep_vertices ? (uint32_t)i : a->vmap[i];
        if (a->map_out) a->map_out[i] = kept ? j : 0xFFFFFFFFu;
        if (!kept) break;
        for (int c = 0; c < 3; c++) {
            float x = a->pos[3 * i + (size_t)c];
            if (a->clamp) {
                if ((double)x < a->box_min[c]) x = (float)a->box_min[c];
                if ((double)x > a->box_max[c]) x = (float)a->box_max[c];
            }
            a->pos_out[3 * (size_t)j + (size_t)c] = x;
            if (a->nrm) a->nrm_out[3 * (size_t)j + (size_t)c] = a->nrm[3 * i + (size_t)c];
        }
        break;
    }
    case PMI_POST_SPH_NORMAL: pmi_post_sph_normal(&a->g, a->points + 3 * i, a->out + 3 * i); break;
    case PMI_POST_SPH_INTERP: {
        double acc[16];
        pmi_post_sph_interp(&a->g, a->points + 3 * i, NULL, a->values, a->comps, acc);
        for (int q = 0; q < a->comps; q++)
            a->out[(size_t)a->comps * i + (size_t)q] = (float)acc[q];
        break;
    }
    case PMI_POST_SPH_NEED: {
        long long c[3];
        pmi_post_cell(&a->g, a->points + 3 * i, c);
        for (long long z = c[2] - 1; z <= c[2] + 1; z++)
            for (long long y = c[1] - 1; y <= c[1] + 1; y++)
                for (long long x = c[0] - 1; x <= c[0] + 1; x++) {
                    if (z < 0 || y < 0 || x < 0 || z >= a->g.cd[2] || y >= a->g.cd[1] ||
                        x >= a->g.cd[0])
                        continue;
                    pmi_post_store_one(a->need +
                                       ((size_t)z * (size_t)a->g.cd[1] + (size_t)y) *
                                           (size_t)a->g.cd[0] +
                                       (size_t)x);
                }
        break;
    }
    case PMI_POST_SPH_WNN: {
        long long c[3];
        pmi_post_cell(&a->g, a->g.xyz + 3 * i, c);
        const size_t cell =
            ((size_t)c[2] * (size_t)a->g.cd[1] + (size_t)c[1]) * (size_t)a->g.cd[0] + (size_t)c[0];
        a->slot_d[i] = a->need[cell] ? pmi_post_sph_wnn(&a->g, i) : 0.0;
        break;
    }
    case PMI_POST_SPH_WEIGHT: {
        double n;
        pmi_post_sph_interp(&a->g, a->points + 3 * i, a->slot_d, NULL, 1, &n);
        if (a->out2) a->out2[i] = (float)n;
        a->out[i] = (float)pmi_post_smooth_weight(n, a->normalization);
        break;
    }
    case PMI_POST_SPH_VOLUME: a->slot_d[i] = pmi_post_sph_volume(&a->g, i); break;
    default: break;
    }
}

#endif
