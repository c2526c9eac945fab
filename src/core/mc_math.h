/* The arithmetic of marching cubes that every backend computes bit for bit
 * (docs/isosurface.md): the inside test and its float threshold, the
 * crossing's interpolation parameter and position, the gradient
 * differences of the three normal modes, the normal's blend and
 * normalisation, and the fallback normal along the edge. Compiled by gcc
 * (src/cpu/isosurface_kernel.h) and by nvcc (src/cuda/mc_device.cuh), so
 * the backends agree by construction; both build without contraction
 * (-ffp-contract=off, --fmad=false). Only the loads and the loops around
 * these expressions differ between the backends. Internal header. */
#ifndef PM_CORE_MC_MATH_H
#define PM_CORE_MC_MATH_H

#include <float.h>
#include <math.h>

#ifdef __CUDACC__
#define PMI_HD static __host__ __device__ __forceinline__
#else
#define PMI_HD static inline
#endif
#ifdef __CUDA_ARCH__
#define PMI_UNROLL _Pragma("unroll")
#else
#define PMI_UNROLL
#endif

/* The inside test, in double (exact for every sample type): sg = +1 makes
 * "x < iso" inside, sg = -1 makes "x > iso" inside (-x < -iso is exactly
 * x > iso); siso = sg * iso. NaN is never inside. */
PMI_HD int pmi_mc_inside(double sg, double siso, double x) { return sg * x < siso; }

/* The smallest float >= x. For a sample v exact in float (every type but
 * f64), v < x in double exactly when (float)v < pmi_mc_float_threshold(x)
 * in float, since no float lies in [x, threshold): the inside test of
 * pmi_mc_inside with x = siso, done in float. */
PMI_HD float pmi_mc_float_threshold(double x)
{
    float f = (float)x;
    if ((double)f < x) f = nextafterf(f, INFINITY);
    return f;
}

/* Where the field crosses iso on the edge from the sample vlo (lower end)
 * to vhi: t in [0, 1]. Only non-finite samples can leave [0, 1] (or give
 * NaN); they get the middle of the edge. */
PMI_HD double pmi_mc_edge_t(double iso, double vlo, double vhi)
{
    double t = (iso - vlo) / (vhi - vlo);
    if (!(t >= 0.0 && t <= 1.0)) t = 0.5;
    return t;
}

/* The crossing's position on the lattice edge from point (i, j, k) along
 * `axis`: origin + spacing * lattice coordinates, t added along the axis
 * (selects rather than an index by axis, which would put the coordinates
 * in local memory on the GPU). Lattice indices are below 2^63. */
PMI_HD void pmi_mc_position(const double origin[3], const double h[3], long long i, long long j,
                            long long k, int axis, double t, float pos[3])
{
    const double q[3] = {axis == 0 ? (double)i + t : (double)i,
                         axis == 1 ? (double)j + t : (double)j,
                         axis == 2 ? (double)k + t : (double)k};
    PMI_UNROLL
    for (int c = 0; c < 3; c++)
        pos[c] = (float)(origin[c] + h[c] * q[c]);
}

/* The lattice points of a gradient difference along one axis at point p of
 * the axis's n points: the upper one (p + 1, clamped) and the lower one,
 * central: p - 1 (clamped); forward: p, or p - 1 at the last point. The
 * Sobel kernel takes the central pair. Integer expressions of any index
 * type. */
#define PMI_MC_DIFF_HI(p, n) ((p) + 1 < (n) ? (p) + 1 : (p))
#define PMI_MC_DIFF_LO_CENTRAL(p) ((p) > 0 ? (p)-1 : 0)
#define PMI_MC_DIFF_LO_FORWARD(p, n) ((p) + 1 < (n) ? (p) : (p)-1)
/* The Sobel kernel's neighbour across the axis: q + d for d in {-1, 0, 1},
 * clamped to [0, n). */
#define PMI_MC_SOBEL_STEP(q, d, n)                                                                 \
    ((d) < 0 && (q) > 0 ? (q)-1 : (d) > 0 && (q) + 1 < (n) ? (q) + 1 : (q))

/* Gradient component of central and forward differences: the samples at
 * the upper and lower points, span = their distance in lattice points,
 * h = the spacing along the axis. The difference is multiplied by the
 * weight 1 / (span h), which depends on the axis and the span only (0, 1
 * or 2: a kernel may compute the weights once per call), rather than
 * divided by span h: a division per component was the largest cost of a
 * vertex. A span of 0 (an axis of one point) gives 0 * inf = NaN, which
 * pmi_mc_normal turns into the edge's direction. */
PMI_HD double pmi_mc_diff_weight(double span, double h) { return 1.0 / (span * h); }
PMI_HD double pmi_mc_diff_w(double hi, double lo, double w)
{
    double d = hi - lo;
    return d * w;
}
PMI_HD double pmi_mc_diff(double hi, double lo, double span, double h)
{
    return pmi_mc_diff_w(hi, lo, pmi_mc_diff_weight(span, h));
}
/* The weight of span 0, 1 or 2 from the three of an axis, w[span]: selects
 * rather than indexes (an index would put them in local memory on the
 * GPU). */
PMI_HD double pmi_mc_diff_pick(const double w0, const double w1, const double w2, long long span)
{
    return span == 2 ? w2 : span == 1 ? w1 : w0;
}

/* One term of the Sobel sum: the 3x3 cross-section's weight (1 2 1 times
 * 1 2 1) at offsets db, dc in {-1, 0, 1}, times the difference of the
 * samples at the upper and lower points. The terms are added in order, the
 * higher cross axis (dc) outer. */
PMI_HD double pmi_mc_sobel_add(double s, int db, int dc, double hi, double lo)
{
    double w = (double)((2 - (db < 0 ? -db : db)) * (2 - (dc < 0 ? -dc : dc)));
    double d = hi - lo;
    return s + w * d;
}

/* The Sobel gradient component from the sum of its 9 terms. */
PMI_HD double pmi_mc_sobel_grad(double s, double span, double h) { return s / ((16.0 * span) * h); }

/* The normal at the crossing t along the edge from lattice point p0 along
 * `axis`, whose ends have gradients g0 and g1: the blend, turned out of
 * the inside region (sg, siso as pmi_mc_inside), normalised, as floats.
 * Where that gives no finite unit vector (a vanishing or non-finite
 * gradient), the edge's direction from its inside end to its outside end
 * (vlo: the sample at p0). */
PMI_HD void pmi_mc_normal(double t, double sg, double siso, double vlo, int axis,
                          const double g0[3], const double g1[3], float nrm[3])
{
    double n[3];
    PMI_UNROLL
    for (int c = 0; c < 3; c++)
        n[c] = (1.0 - t) * g0[c] + t * g1[c];
    PMI_UNROLL
    for (int c = 0; c < 3; c++)
        n[c] = sg * n[c];
    double l2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    if (l2 > 0.0 && l2 <= DBL_MAX) {
        double inv = 1.0 / sqrt(l2);
        double m0 = n[0] * inv, m1 = n[1] * inv, m2 = n[2] * inv;
        if (m0 - m0 == 0.0 && m1 - m1 == 0.0 && m2 - m2 == 0.0) {
            nrm[0] = (float)m0;
            nrm[1] = (float)m1;
            nrm[2] = (float)m2;
            return;
        }
    }
    const float s = pmi_mc_inside(sg, siso, vlo) ? 1.0f : -1.0f;
    nrm[0] = axis == 0 ? s : 0.0f;
    nrm[1] = axis == 1 ? s : 0.0f;
    nrm[2] = axis == 2 ? s : 0.0f;
}

#endif
