/* The exact closed triangle-triangle intersection predicate of pm_collide,
 * on float coordinates, compiled by gcc (src/cpu/collide.c) and nvcc
 * (src/cuda/collide.cu) so both backends decide every pair the same way.
 *
 * Everything reduces to the signs of two determinants, orient3d and orient2d
 * (Shewchuk, "Adaptive Precision Floating-Point Arithmetic and Fast Robust
 * Geometric Predicates", 1997): a double-precision evaluation with his
 * static error bound, and where that cannot decide, an exact evaluation.
 * Inputs are floats, so the exact path is simple: every term of the
 * expanded determinant is a product of two floats (exact in a double) or of
 * three (exact as the sum of two doubles after a Veltkamp split), and the
 * terms are summed without error into a Shewchuk expansion whose most
 * significant component carries the sign. No step underflows or overflows
 * for finite float inputs (|product| stays within 2^-447 .. 2^384).
 *
 * The triangles are closed sets: touching at a vertex or an edge, or
 * overlapping in a common plane, is an intersection. A triangle whose
 * vertices are collinear (or equal) is the segment (or point) they span.
 * Two non-degenerate triangles meet iff an edge of one meets the other
 * triangle (the intersection is convex: its extreme points lie on an
 * edge); a degenerate one meets another triangle iff its segment does.
 * Internal header. */
#ifndef PM_CORE_TRI_TRI_H
#define PM_CORE_TRI_TRI_H

#include <math.h>

#ifdef __CUDACC__
#define PMI_TT static __host__ __device__ __forceinline__
#define PMI_TT_NOINLINE static __host__ __device__ __noinline__
#else
#define PMI_TT static inline
#define PMI_TT_NOINLINE static
#endif

/* ---- exact sums (Shewchuk's Two-Sum and Grow-Expansion) ----------------- */

#define PMI_TT_MAX_TERMS 48

/* Adds b to the nonoverlapping expansion e[0..*n) (increasing magnitude,
 * zero components dropped) without error. */
PMI_TT void pmi_tt_grow(double *e, int *n, double b)
{
    double q = b;
    int m = 0;
    for (int i = 0; i < *n; i++) {
        double x = q + e[i];
        double bv = x - q;
        double av = x - bv;
        double err = (q - av) + (e[i] - bv);
        q = x;
        if (err != 0.0) e[m++] = err;
    }
    if (q != 0.0) e[m++] = q;
    *n = m;
}

/* Sign of an exactly summed expansion: its largest component's sign. */
PMI_TT int pmi_tt_sign(const double *e, int n)
{
    if (n == 0) return 0;
    return e[n - 1] > 0.0 ? 1 : -1;
}

/* Adds s * x * y * z (x a product of two floats, exact in a double; z a
 * float) to the expansion: x is split into two 26-bit halves (Veltkamp), so
 * both partial products are exact. */
PMI_TT void pmi_tt_grow3(double *e, int *n, double s, double xy, double z)
{
    double t = 134217729.0 * xy; /* 2^27 + 1 */
    double hi = t - (t - xy);
    double lo = xy - hi;
    pmi_tt_grow(e, n, s * (hi * z));
    pmi_tt_grow(e, n, s * (lo * z));
}

/* ---- orientation predicates --------------------------------------------- */

/* Sign of det[a-d; b-d; c-d] (rows): +1, 0 or -1, exact. */
PMI_TT_NOINLINE int pmi_orient3d_exact(const float *a, const float *b, const float *c,
                                       const float *d)
{
    /* det(a-d, b-d, c-d) = det(a,b,c) - det(d,b,c) - det(a,d,c) - det(a,b,d)
     * (multilinearity; terms with d in two rows vanish). */
    const float *rows[4][3] = {{a, b, c}, {d, b, c}, {a, d, c}, {a, b, d}};
    const double sg[4] = {1.0, -1.0, -1.0, -1.0};
    double e[PMI_TT_MAX_TERMS];
    int n = 0;
    for (int k = 0; k < 4; k++) {
        const float *u = rows[k][0], *v = rows[k][1], *w = rows[k][2];
        double s = sg[k];
        pmi_tt_grow3(e, &n, s, (double)v[1] * (double)w[2], u[0]);
        pmi_tt_grow3(e, &n, -s, (double)v[2] * (double)w[1], u[0]);
        pmi_tt_grow3(e, &n, -s, (double)v[0] * (double)w[2], u[1]);
        pmi_tt_grow3(e, &n, s, (double)v[2] * (double)w[0], u[1]);
        pmi_tt_grow3(e, &n, s, (double)v[0] * (double)w[1], u[2]);
        pmi_tt_grow3(e, &n, -s, (double)v[1] * (double)w[0], u[2]);
    }
    return pmi_tt_sign(e, n);
}

PMI_TT int pmi_orient3d(const float *a, const float *b, const float *c, const float *d)
{
    double adx = (double)a[0] - d[0], ady = (double)a[1] - d[1], adz = (double)a[2] - d[2];
    double bdx = (double)b[0] - d[0], bdy = (double)b[1] - d[1], bdz = (double)b[2] - d[2];
    double cdx = (double)c[0] - d[0], cdy = (double)c[1] - d[1], cdz = (double)c[2] - d[2];
    double bc = bdy * cdz, cb = bdz * cdy;
    double ca = cdy * adz, ac = cdz * ady;
    double ab = ady * bdz, ba = adz * bdy;
    double det = adx * (bc - cb) + bdx * (ca - ac) + cdx * (ab - ba);
    double perm = (fabs(bc) + fabs(cb)) * fabs(adx) + (fabs(ca) + fabs(ac)) * fabs(bdx) +
                  (fabs(ab) + fabs(ba)) * fabs(cdx);
    double bound = 7.7715611723761027e-16 * perm; /* (7 + 56 eps) eps, eps = 2^-53 */
    if (det > bound) return 1;
    if (-det > bound) return -1;
    if (perm == 0.0) return 0; /* every product exactly zero */
    return pmi_orient3d_exact(a, b, c, d);
}

/* Sign of the 2x2 determinant of the points (a, b, c) projected onto the
 * coordinate plane (i, j), exact. */
PMI_TT_NOINLINE int pmi_orient2d_exact(const float *a, const float *b, const float *c, int i, int j)
{
    double e[12];
    int n = 0;
    /* (ai-ci)(bj-cj) - (aj-cj)(bi-ci), expanded: 6 products of two floats. */
    pmi_tt_grow(e, &n, (double)a[i] * b[j]);
    pmi_tt_grow(e, &n, -((double)a[i] * c[j]));
    pmi_tt_grow(e, &n, -((double)c[i] * b[j]));
    pmi_tt_grow(e, &n, -((double)a[j] * b[i]));
    pmi_tt_grow(e, &n, (double)a[j] * c[i]);
    pmi_tt_grow(e, &n, (double)c[j] * b[i]);
    return pmi_tt_sign(e, n);
}

PMI_TT int pmi_orient2d(const float *a, const float *b, const float *c, int i, int j)
{
    double l = ((double)a[i] - c[i]) * ((double)b[j] - c[j]);
    double r = ((double)a[j] - c[j]) * ((double)b[i] - c[i]);
    double det = l - r;
    double bound = 3.3306690738754716e-16 * (fabs(l) + fabs(r)); /* (3 + 16 eps) eps */
    if (det > bound) return 1;
    if (-det > bound) return -1;
    if (l == 0.0 && r == 0.0) return 0;
    return pmi_orient2d_exact(a, b, c, i, j);
}

/* Lexicographic comparison of two points: -1, 0, +1. For points on one
 * line this is their order along the line. */
PMI_TT int pmi_lex_cmp(const float *p, const float *q)
{
    for (int k = 0; k < 3; k++) {
        if (p[k] < q[k]) return -1;
        if (p[k] > q[k]) return 1;
    }
    return 0;
}

/* The coordinate plane (i, j) onto which triangle abc projects without
 * degenerating (that projection is one-to-one on its plane); returns the
 * dropped axis, or -1 when the three points are collinear. */
PMI_TT int pmi_tt_drop_axis(const float *a, const float *b, const float *c)
{
    for (int k = 2; k >= 0; k--)
        if (pmi_orient2d(a, b, c, (k + 1) % 3, (k + 2) % 3) != 0) return k;
    return -1;
}

/* ---- segments ------------------------------------------------------------ */

/* Closed segments pq and rs, all four points on one line: 1D overlap. */
PMI_TT int pmi_tt_collinear_overlap(const float *p, const float *q, const float *r, const float *s)
{
    const float *p0 = pmi_lex_cmp(p, q) <= 0 ? p : q, *p1 = p0 == p ? q : p;
    const float *r0 = pmi_lex_cmp(r, s) <= 0 ? r : s, *r1 = r0 == r ? s : r;
    return pmi_lex_cmp(p1, r0) >= 0 && pmi_lex_cmp(r1, p0) >= 0;
}

/* Closed segments pq and rs lying in one plane on which the projection
 * (i, j) is one-to-one. Either may be a single point. */
PMI_TT int pmi_tt_seg_seg_2d(const float *p, const float *q, const float *r, const float *s, int i,
                             int j)
{
    int o1 = pmi_orient2d(p, q, r, i, j), o2 = pmi_orient2d(p, q, s, i, j);
    int o3 = pmi_orient2d(r, s, p, i, j), o4 = pmi_orient2d(r, s, q, i, j);
    if (o1 == 0 && o2 == 0 && o3 == 0 && o4 == 0) return pmi_tt_collinear_overlap(p, q, r, s);
    return o1 * o2 <= 0 && o3 * o4 <= 0;
}

/* Closed segments pq and rs in space (either may be a point). */
PMI_TT int pmi_tt_seg_seg_3d(const float *p, const float *q, const float *r, const float *s)
{
    if (pmi_orient3d(p, q, r, s) != 0) return 0;
    /* Coplanar: find a projection one-to-one on their plane, from any
     * non-collinear triple; none means all four are on one line. */
    const float *pts[4] = {p, q, r, s};
    for (int t = 0; t < 4; t++) {
        int k = pmi_tt_drop_axis(pts[(t + 1) & 3], pts[(t + 2) & 3], pts[(t + 3) & 3]);
        if (k >= 0) return pmi_tt_seg_seg_2d(p, q, r, s, (k + 1) % 3, (k + 2) % 3);
    }
    return pmi_tt_collinear_overlap(p, q, r, s);
}

/* Point p inside (or on) the closed triangle abc, all in the plane on which
 * (i, j) is one-to-one and abc non-degenerate. */
PMI_TT int pmi_tt_point_in_tri_2d(const float *p, const float *a, const float *b, const float *c,
                                  int i, int j)
{
    int o1 = pmi_orient2d(a, b, p, i, j), o2 = pmi_orient2d(b, c, p, i, j);
    int o3 = pmi_orient2d(c, a, p, i, j);
    return (o1 >= 0 && o2 >= 0 && o3 >= 0) || (o1 <= 0 && o2 <= 0 && o3 <= 0);
}

/* Closed segment pq (possibly a point) against the closed non-degenerate
 * triangle abc; op, oq: orient3d(a, b, c, p) and of q, already known. */
PMI_TT int pmi_tt_seg_tri(const float *p, const float *q, int op, int oq, const float *a,
                          const float *b, const float *c)
{
    if ((op > 0 && oq > 0) || (op < 0 && oq < 0)) return 0;
    if (op == 0 && oq == 0) {
        int k = pmi_tt_drop_axis(a, b, c), i = (k + 1) % 3, j = (k + 2) % 3;
        return pmi_tt_point_in_tri_2d(p, a, b, c, i, j) ||
               pmi_tt_point_in_tri_2d(q, a, b, c, i, j) || pmi_tt_seg_seg_2d(p, q, a, b, i, j) ||
               pmi_tt_seg_seg_2d(p, q, b, c, i, j) || pmi_tt_seg_seg_2d(p, q, c, a, i, j);
    }
    /* The line pq crosses the plane once, inside the segment: the crossing
     * is in the closed triangle iff the line passes on one side (or on) of
     * each edge, seen along the line. */
    int s1 = pmi_orient3d(p, q, a, b), s2 = pmi_orient3d(p, q, b, c), s3 = pmi_orient3d(p, q, c, a);
    return (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0);
}

/* The segment a degenerate triangle spans: its lexicographically smallest
 * and largest vertices (for collinear points, the two ends). */
PMI_TT void pmi_tt_span(const float *t, const float **lo, const float **hi)
{
    const float *v[3] = {t, t + 3, t + 6};
    *lo = v[0];
    *hi = v[0];
    for (int k = 1; k < 3; k++) {
        if (pmi_lex_cmp(v[k], *lo) < 0) *lo = v[k];
        if (pmi_lex_cmp(v[k], *hi) > 0) *hi = v[k];
    }
}

/* Whether the closed triangles t (9 floats: 3 vertices) and u intersect. */
PMI_TT int pmi_tri_tri(const float *t, const float *u)
{
    const float *a = t, *b = t + 3, *c = t + 6;
    const float *d = u, *e = u + 3, *f = u + 6;
    int degt = pmi_tt_drop_axis(a, b, c) < 0, degu = pmi_tt_drop_axis(d, e, f) < 0;
    if (degt && degu) {
        const float *p, *q, *r, *s;
        pmi_tt_span(t, &p, &q);
        pmi_tt_span(u, &r, &s);
        return pmi_tt_seg_seg_3d(p, q, r, s);
    }
    if (degt || degu) {
        const float *p, *q;
        pmi_tt_span(degt ? t : u, &p, &q);
        const float *x = degt ? d : a, *y = degt ? e : b, *z = degt ? f : c;
        return pmi_tt_seg_tri(p, q, pmi_orient3d(x, y, z, p), pmi_orient3d(x, y, z, q), x, y, z);
    }
    /* Both proper. The usual early outs first: all of u strictly on one side
     * of t's plane, or all of t strictly on one side of u's. */
    int od = pmi_orient3d(a, b, c, d), oe = pmi_orient3d(a, b, c, e), of = pmi_orient3d(a, b, c, f);
    if ((od > 0 && oe > 0 && of > 0) || (od < 0 && oe < 0 && of < 0)) return 0;
    int oa = pmi_orient3d(d, e, f, a), ob = pmi_orient3d(d, e, f, b), oc = pmi_orient3d(d, e, f, c);
    if ((oa > 0 && ob > 0 && oc > 0) || (oa < 0 && ob < 0 && oc < 0)) return 0;
    return pmi_tt_seg_tri(a, b, oa, ob, d, e, f) || pmi_tt_seg_tri(b, c, ob, oc, d, e, f) ||
           pmi_tt_seg_tri(c, a, oc, oa, d, e, f) || pmi_tt_seg_tri(d, e, od, oe, a, b, c) ||
           pmi_tt_seg_tri(e, f, oe, of, a, b, c) || pmi_tt_seg_tri(f, d, of, od, a, b, c);
}

#endif
