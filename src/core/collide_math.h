/* What both backends of pm_bvh_build and pm_collide compute the same way:
 * the bounding volume hierarchy's layout and its construction rule (a
 * linear BVH over Morton codes of the triangle centroids, Karras,
 * "Maximizing Parallelism in the Construction of BVHs, Octrees, and k-d
 * Trees", 2012), the rigid transformation of B's vertices into A's frame,
 * and the conservative box test of the traversal (docs/collide.md).
 * Compiled by gcc and nvcc without contraction. Internal header. */
#ifndef PM_CORE_COLLIDE_MATH_H
#define PM_CORE_COLLIDE_MATH_H

#include <math.h>
#include <stdint.h>

#include "pyramesh.h"

#ifdef __CUDACC__
#define PMI_CM static __host__ __device__ __forceinline__
#define PMI_CM_HOT PMI_CM
#define PMI_CM_COLD PMI_CM
#else
#define PMI_CM static inline
/* The box test's common part inlined into the traversal loop, its rotation
 * parts kept out of it. */
#define PMI_CM_HOT static inline __attribute__((always_inline))
#define PMI_CM_COLD static __attribute__((noinline, unused))
#endif

/* A BVH over n triangles: nodes 0 .. n-2 are internal (0 is the root when
 * n >= 2), nodes n-1 .. 2n-2 are the leaves in Morton order (node n-1+i is
 * leaf i; with n == 1 the root is the only leaf). Arrays in context memory;
 * boxes are axis-aligned in the mesh's own frame and exact (float min/max
 * of the vertices), so they do not depend on the order they were merged. */
struct pm_bvh {
    pm_context *ctx;
    size_t num_triangles;
    unsigned depth;      /* edges from the root to the deepest leaf */
    int soup;            /* the mesh had no indices: adjacency is by position */
    float *boxes;        /* 2n-1 nodes x (lo x, y, z, hi x, y, z) */
    int32_t *children;   /* n-1 internal nodes x (left, right) */
    float *tris;         /* n leaves x 9: the triangle's vertices */
    uint32_t *tri_index; /* n leaves: the triangle's index in the mesh */
    uint32_t *tri_verts; /* n leaves x 3: vertex indices (3t+k for a soup) */
};

/* Most triangles a BVH takes (node indices are int32). */
#define PMI_BVH_MAX_TRIANGLES ((size_t)1 << 30)

PMI_CM int pmi_bvh_is_leaf(int64_t node, int64_t n) { return node >= n - 1; }

/* ---- construction ---------------------------------------------------------- */

/* Spreads the low 10 bits of v to every third bit. */
PMI_CM uint32_t pmi_morton_spread(uint32_t v)
{
    v &= 0x3ffu;
    v = (v | (v << 16)) & 0x030000ffu;
    v = (v | (v << 8)) & 0x0300f00fu;
    v = (v | (v << 4)) & 0x030c30c3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}

PMI_CM uint32_t pmi_morton_axis(double c, float lo, float hi)
{
    if (!(hi > lo)) return 0;
    double u = (c - (double)lo) / ((double)hi - (double)lo) * 1024.0;
    if (!(u > 0.0)) return 0;
    if (u >= 1023.0) return 1023;
    return (uint32_t)u;
}

/* The 30-bit Morton code of triangle t (9 floats) in the scene box lo..hi. */
PMI_CM uint32_t pmi_morton_triangle(const float *t, const float *lo, const float *hi)
{
    uint32_t code = 0;
    for (int k = 0; k < 3; k++) {
        double c = ((double)t[k] + (double)t[3 + k] + (double)t[6 + k]) / 3.0;
        code |= pmi_morton_spread(pmi_morton_axis(c, lo[k], hi[k])) << (2 - k);
    }
    return code;
}

PMI_CM int pmi_clz64(uint64_t x)
{
#ifdef __CUDA_ARCH__
    return __clzll((long long)x);
#else
    return x ? __builtin_clzll(x) : 64;
#endif
}

/* Karras's delta on unique keys: the Morton code extended by the position
 * in sorted order; -1 outside 0..n-1. */
PMI_CM int pmi_lbvh_delta(const uint32_t *codes, int64_t n, int64_t i, int64_t j)
{
    if (j < 0 || j >= n) return -1;
    uint64_t ki = ((uint64_t)codes[i] << 32) | (uint64_t)i;
    uint64_t kj = ((uint64_t)codes[j] << 32) | (uint64_t)j;
    return pmi_clz64(ki ^ kj);
}

/* Children of internal node i (0 <= i < n-1) of the LBVH over the sorted
 * codes: node indices as in struct pm_bvh. */
PMI_CM void pmi_lbvh_children(const uint32_t *codes, int64_t n, int64_t i, int32_t *left,
                              int32_t *right)
{
    int d = pmi_lbvh_delta(codes, n, i, i + 1) > pmi_lbvh_delta(codes, n, i, i - 1) ? 1 : -1;
    int dmin = pmi_lbvh_delta(codes, n, i, i - d);
    int64_t lmax = 2;
    while (pmi_lbvh_delta(codes, n, i, i + lmax * d) > dmin)
        lmax *= 2;
    int64_t l = 0;
    for (int64_t t = lmax / 2; t >= 1; t /= 2)
        if (pmi_lbvh_delta(codes, n, i, i + (l + t) * d) > dmin) l += t;
    int64_t j = i + l * d;
    int dnode = pmi_lbvh_delta(codes, n, i, j);
    int64_t s = 0;
    for (int64_t k = 2;; k *= 2) {
        int64_t t = (l + k - 1) / k;
        if (pmi_lbvh_delta(codes, n, i, i + (s + t) * d) > dnode) s += t;
        if (t <= 1) break;
    }
    int64_t gamma = i + s * d + (d < 0 ? -1 : 0);
    int64_t lo = i < j ? i : j, hi = i < j ? j : i;
    *left = (int32_t)(lo == gamma ? (n - 1) + gamma : gamma);
    *right = (int32_t)(hi == gamma + 1 ? (n - 1) + gamma + 1 : gamma + 1);
}

PMI_CM void pmi_box_of_triangle(const float *t, float *box)
{
    for (int k = 0; k < 3; k++) {
        float a = t[k], b = t[3 + k], c = t[6 + k];
        float lo = a < b ? a : b, hi = a < b ? b : a;
        box[k] = lo < c ? lo : c;
        box[3 + k] = hi > c ? hi : c;
    }
}

PMI_CM void pmi_box_merge(const float *a, const float *b, float *out)
{
    for (int k = 0; k < 3; k++) {
        out[k] = a[k] < b[k] ? a[k] : b[k];
        out[3 + k] = a[3 + k] > b[3 + k] ? a[3 + k] : b[3 + k];
    }
}

/* ---- traversal --------------------------------------------------------------- */

/* transform_b_to_a, row-major 3x4 [R | t]. identity: no transform at all
 * (B's floats are used as they are). translation: R is exactly the
 * identity (t is not zero). orthonormal: R^T is R's inverse to 1e-12,
 * which enables the second half of the box test. */
typedef struct pmi_xform {
    double r[9], t[3];
    int identity, translation, orthonormal;
} pmi_xform;

/* B's vertex p in A's frame: evaluated in double in a fixed order, rounded
 * to float once; the exact predicate then sees these floats. */
PMI_CM void pmi_xform_point(const pmi_xform *x, const float *p, float *out)
{
    for (int k = 0; k < 3; k++)
        out[k] = (float)(((x->r[3 * k] * p[0] + x->r[3 * k + 1] * p[1]) + x->r[3 * k + 2] * p[2]) +
                         x->t[k]);
}

/* The float box in A's frame that holds every vertex of B's box b as
 * pmi_xform_point maps it, rounding included. Coordinate k of the mapped
 * point is a chain of rounded products and sums, each monotone in its
 * operands, so it is monotone in every coordinate of p (rising where
 * r[k][j] >= 0, falling where it is negative): over the box its least and
 * largest values are those of two corners, evaluated here by the same
 * expression. The bounds are therefore exact, with no margin. For a pure
 * translation the expression is (float)(p + t) (the zero products change
 * nothing but the sign of a zero). */
PMI_CM_COLD void pmi_xform_box_rotated(const pmi_xform *x, const float *b, float *out)
{
    for (int k = 0; k < 3; k++) {
        const double *r = x->r + 3 * k;
        float lo[3], hi[3];
        for (int j = 0; j < 3; j++) {
            int up = r[j] >= 0.0;
            lo[j] = up ? b[j] : b[3 + j];
            hi[j] = up ? b[3 + j] : b[j];
        }
        out[k] = (float)(((r[0] * lo[0] + r[1] * lo[1]) + r[2] * lo[2]) + x->t[k]);
        out[3 + k] = (float)(((r[0] * hi[0] + r[1] * hi[1]) + r[2] * hi[2]) + x->t[k]);
    }
}

PMI_CM_HOT void pmi_xform_box(const pmi_xform *x, const float *b, float *out)
{
    if (!x->translation) {
        pmi_xform_box_rotated(x, b, out);
        return;
    }
    for (int k = 0; k < 3; k++) {
        out[k] = (float)((double)b[k] + x->t[k]);
        out[3 + k] = (float)((double)b[3 + k] + x->t[k]);
    }
}

/* Closed axis-aligned boxes (lo xyz, hi xyz) overlap. */
PMI_CM int pmi_aabb_overlap(const float *a, const float *b)
{
    return a[0] <= b[3] && b[0] <= a[3] && a[1] <= b[4] && b[1] <= a[4] && a[2] <= b[5] &&
           b[2] <= a[5];
}

/* The second half of pmi_box_overlap: B's three axes, with the margin. */
PMI_CM_COLD int pmi_box_overlap_back(const float *a, const float *b, const pmi_xform *x)
{
    double ca[3], ha[3], cb[3], hb[3];
    double sa = 0.0, sb = 0.0;
    for (int k = 0; k < 3; k++) {
        ca[k] = 0.5 * ((double)a[k] + (double)a[3 + k]);
        ha[k] = 0.5 * ((double)a[3 + k] - (double)a[k]);
        cb[k] = 0.5 * ((double)b[k] + (double)b[3 + k]);
        hb[k] = 0.5 * ((double)b[3 + k] - (double)b[k]);
        double m = fabs(ca[k]) + ha[k];
        sa = m > sa ? m : sa;
    }
    for (int k = 0; k < 3; k++) {
        const double *r = x->r + 3 * k;
        double m = fabs(r[0]) * (fabs(cb[0]) + hb[0]) + fabs(r[1]) * (fabs(cb[1]) + hb[1]) +
                   fabs(r[2]) * (fabs(cb[2]) + hb[2]) + fabs(x->t[k]);
        sb = m > sb ? m : sb;
    }
    double margin = (sa + sb) * 9.5367431640625e-07 + 1e-30; /* 2^-20 */
    for (int j = 0; j < 3; j++) {
        double c = x->r[j] * (ca[0] - x->t[0]) + x->r[3 + j] * (ca[1] - x->t[1]) +
                   x->r[6 + j] * (ca[2] - x->t[2]);
        double h = fabs(x->r[j]) * ha[0] + fabs(x->r[3 + j]) * ha[1] + fabs(x->r[6 + j]) * ha[2];
        if (fabs(c - cb[j]) > h + hb[j] + 2.0 * margin) return 0;
    }
    return 1;
}

/* Whether box a (A's frame) and box b (B's frame, mapped by x) may hold
 * intersecting triangles. Closed boxes: touching counts. With a transform
 * the test is first the separating-axis test on A's three axes: b's
 * vertices mapped as pmi_xform_point maps them lie in the float box
 * pmi_xform_box gives, exactly. Then, for an orthonormal R that is not
 * the identity, the test on B's three axes (a's box mapped back), widened
 * by a margin that covers the rounding of pmi_xform_point (2^-20 of the
 * magnitudes involved, against a rounding of at most about 2^-23). Either
 * way it never rejects a pair the exact predicate would accept. */
PMI_CM_HOT int pmi_box_overlap(const float *a, const float *b, const pmi_xform *x)
{
    if (x->identity) return pmi_aabb_overlap(a, b);
    float bt[6];
    pmi_xform_box(x, b, bt);
    if (!pmi_aabb_overlap(a, bt)) return 0;
    if (x->translation || !x->orthonormal) return 1;
    return pmi_box_overlap_back(a, b, x);
}

/* Half the surface measure used to pick which node of a pair to split:
 * the sum of the box's extents. */
PMI_CM double pmi_box_size(const float *b)
{
    return ((double)b[3] - b[0]) + ((double)b[4] - b[1]) + ((double)b[5] - b[2]);
}

/* The fate of a candidate pair (na, nb) in one level of the traversal. */
enum {
    PMI_PAIR_DROP = 0,  /* boxes apart, or a triangle with itself */
    PMI_PAIR_LEAF,      /* two leaves: test the triangles */
    PMI_PAIR_SPLIT_A,   /* replace by (left(na), nb), (right(na), nb) */
    PMI_PAIR_SPLIT_B,   /* replace by (na, left(nb)), (na, right(nb)) */
    PMI_PAIR_SPLIT_SELF /* na == nb internal: (l, l), (l, r), (r, r) */
};

/* Children a pair's fate produces. */
PMI_CM unsigned pmi_pair_children(int fate)
{
    return fate == PMI_PAIR_SPLIT_SELF ? 3u : fate >= PMI_PAIR_SPLIT_A ? 2u : 0u;
}

/* Decides one pair. self: A and B are the same BVH (then only pairs with
 * na <= nb are ever generated, and x is the identity). */
PMI_CM int pmi_pair_fate(const float *boxes_a, int64_t na_count, const float *boxes_b,
                         int64_t nb_count, uint32_t na, uint32_t nb, int self, const pmi_xform *x)
{
    int la = pmi_bvh_is_leaf(na, na_count), lb = pmi_bvh_is_leaf(nb, nb_count);
    if (self && na == nb) return la ? PMI_PAIR_DROP : PMI_PAIR_SPLIT_SELF;
    if (!pmi_box_overlap(boxes_a + 6 * (size_t)na, boxes_b + 6 * (size_t)nb, x))
        return PMI_PAIR_DROP;
    if (la && lb) return PMI_PAIR_LEAF;
    if (la) return PMI_PAIR_SPLIT_B;
    if (lb) return PMI_PAIR_SPLIT_A;
    return pmi_box_size(boxes_a + 6 * (size_t)na) >= pmi_box_size(boxes_b + 6 * (size_t)nb)
               ? PMI_PAIR_SPLIT_A
               : PMI_PAIR_SPLIT_B;
}

/* Writes the children of a split pair (as (na << 32) | nb words) to out. In
 * self mode every pair keeps its smaller node first, so the pair of two
 * disjoint subtrees is generated once. */
PMI_CM void pmi_pair_split(const int32_t *children_a, const int32_t *children_b, uint32_t na,
                           uint32_t nb, int fate, int self, uint64_t *out)
{
    if (fate == PMI_PAIR_SPLIT_SELF) {
        uint64_t l = (uint32_t)children_a[2 * (size_t)na],
                 r = (uint32_t)children_a[2 * (size_t)na + 1];
        out[0] = (l << 32) | l;
        out[1] = l < r ? (l << 32) | r : (r << 32) | l;
        out[2] = (r << 32) | r;
        return;
    }
    for (int c = 0; c < 2; c++) {
        uint64_t a = na, b = nb;
        if (fate == PMI_PAIR_SPLIT_A)
            a = (uint32_t)children_a[2 * (size_t)na + c];
        else
            b = (uint32_t)children_b[2 * (size_t)nb + c];
        if (self && a > b) {
            uint64_t t = a;
            a = b;
            b = t;
        }
        out[c] = (a << 32) | b;
    }
}

/* The path the calling thread's last pm_collide took, a static string
 * ("backend=... traversal=... sort=..."; "" before the first), for tests
 * and --stats; the backends set it (src/core/collide.c). */
void pmi_collide_set_path(const char *path);
const char *pmi_collide_last_path(void);

/* Whether two triangles of one mesh are neighbours, which self-collision
 * leaves out: they share a vertex index, or (a soup) a vertex position. */
PMI_CM int pmi_tris_adjacent(const uint32_t *va, const uint32_t *vb, const float *ta,
                             const float *tb, int soup)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            if (soup) {
                if (ta[3 * i] == tb[3 * j] && ta[3 * i + 1] == tb[3 * j + 1] &&
                    ta[3 * i + 2] == tb[3 * j + 2])
                    return 1;
            } else if (va[i] == vb[j]) {
                return 1;
            }
        }
    return 0;
}

#endif
