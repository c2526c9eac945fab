/* The per-element rules of mesh post-processing (docs/splashsurf.md):
 * face normals, the Laplacian and Taubin steps, normal smoothing, the
 * smoothing-weight curve, the SPH kernel gradient, the nearest lattice
 * point of the marching-cubes cleanup and the quad criteria. Compiled by
 * gcc for the CPU runners (src/cpu/smooth.c, mesh_cleanup.c, quads.c,
 * sph_interp.c) and meant for nvcc as well, so that a CUDA runner computes
 * the same bits (both build without contraction: -ffp-contract=off,
 * --fmad=false); the operations and their order here are the definition.
 * The summation order lives with the loops: neighbours and triangles in
 * ascending index. Internal header, C and CUDA C++. */
#ifndef PM_CORE_POST_RULES_H
#define PM_CORE_POST_RULES_H

#include <math.h>
#include <stdint.h>

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

#endif
