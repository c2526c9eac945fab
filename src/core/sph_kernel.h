/* The per-term arithmetic of the density fields (docs/reconstruct.md),
 * compiled by gcc for the CPU backend (src/cpu/sph.c, blur.c,
 * neighbours.c, density.c) and by nvcc for the CUDA backend
 * (src/cuda/density.cu, neighbours.cu): both evaluate every term with
 * these functions, so their f32 fields agree bit for bit by construction.
 * The build keeps each operation rounded as written (-ffp-contract=off,
 * --fmad=false); the operations and their order here are the definition,
 * so they must not be rearranged. The summation order lives with the
 * loops (neighbour cells z, y, x; particles by cell, then input index).
 * Internal header, C and CUDA C++. */
#ifndef PM_CORE_SPH_KERNEL_H
#define PM_CORE_SPH_KERNEL_H

#include <math.h>
#include <stdint.h>
#if defined(__SSE2__) && !defined(__CUDACC__)
#include <emmintrin.h>
#endif

#ifdef __CUDACC__
#define PMI_SPH_FN static __host__ __device__ __forceinline__
#else
#define PMI_SPH_FN static inline
#endif

#define PMI_SPH_PI 3.14159265358979323846

/* The cubic spline kernel of splashsurf (CubicSplineKernel in
 * splashsurf_lib/src/kernel.rs) with compact support radius h:
 * sigma = 8 / (pi h^3), q = d / h,
 * W = sigma (6q^3 - 6q^2 + 1) for q <= 1/2, 2 sigma (1-q)^3 for q <= 1, 0
 * beyond, evaluated as q = sqrt(d2) * inv_h, sigma (6q^2 (q - 1) + 1) and
 * sigma2 (1-q)^3 with sigma2 = 2 sigma. */
typedef struct pmi_sph_kernel {
    double h, h2, inv_h, sigma, sigma2;
} pmi_sph_kernel;

PMI_SPH_FN pmi_sph_kernel pmi_sph_kernel_of(double h)
{
    pmi_sph_kernel k;
    k.h = h;
    k.h2 = h * h;
    k.inv_h = 1.0 / h;
    k.sigma = 8.0 / (PMI_SPH_PI * h * h * h);
    k.sigma2 = 2.0 * k.sigma;
    return k;
}

/* Particle mass m = rest_density (2r)^3: particles packed at rest, one per
 * cube of edge 2r. */
PMI_SPH_FN double pmi_sph_mass(double radius, double rest_density)
{
    const double d = 2.0 * radius;
    return rest_density * (d * d * d);
}

/* IEEE square root (correctly rounded on both backends). On the CPU the
 * SSE2 form skips the errno check libm's sqrt carries without
 * -fno-math-errno, a compare and branch in the hottest loop. */
PMI_SPH_FN double pmi_sqrt(double d2)
{
#if defined(__SSE2__) && !defined(__CUDACC__)
    return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(d2)));
#else
    return sqrt(d2);
#endif
}

/* Squared distance of a difference vector, in this association. */
PMI_SPH_FN double pmi_dist2(double dx, double dy, double dz)
{
    return dx * dx + (dy * dy + dz * dz);
}

/* The two pieces of the spline: q <= 1/2, and q > 1/2 from v = 1 - q. */
PMI_SPH_FN double pmi_spline_near(double q, double sigma)
{
    const double q2 = q * q;
    return sigma * ((6.0 * q2) * (q - 1.0) + 1.0);
}
PMI_SPH_FN double pmi_spline_far(double v, double sigma2) { return sigma2 * ((v * v) * v); }

/* W at q = d / h (any q >= 0). */
PMI_SPH_FN double pmi_cubic_spline(double q, double sigma, double sigma2)
{
    if (q <= 0.5) return pmi_spline_near(q, sigma);
    const double v = 1.0 - q;
    if (v <= 0.0) return 0.0;
    return pmi_spline_far(v, sigma2);
}

/* The same value as pmi_cubic_spline with both pieces evaluated and one
 * selected, for code where a branch costs more than the arithmetic (a
 * warp's lanes, the AVX2 lanes of sph.c, which repeat it per lane). */
PMI_SPH_FN double pmi_cubic_spline_select(double q, double sigma, double sigma2)
{
    const double wa = pmi_spline_near(q, sigma);
    const double v = 1.0 - q;
    const double wb = pmi_spline_far(v, sigma2);
    return q <= 0.5 ? wa : v <= 0.0 ? 0.0 : wb;
}

/* W(d) for d2 = d^2 (the caller tests d2 < h2). */
PMI_SPH_FN double pmi_sph_w(double d2, const pmi_sph_kernel *k)
{
    return pmi_cubic_spline(pmi_sqrt(d2) * k->inv_h, k->sigma, k->sigma2);
}

/* A particle's volume m / rho from its kernel sum (rho = m sum; the
 * particle itself is one of the terms, so sum > 0). */
PMI_SPH_FN double pmi_sph_volume(double mass, double sum)
{
    const double rho = mass * sum;
    return mass / rho;
}

/* Coordinate of global lattice index g on one axis (spacing s). */
PMI_SPH_FN double pmi_lattice_coord(int64_t g, double s) { return (double)g * s; }

/* The neighbour cell of one coordinate: floor((x - origin) / edge), clamped
 * to [0, cells). The clamp never triggers for points inside the grid's
 * margin; it only keeps a rounding accident at the border from indexing
 * outside (and puts particles outside a caller's fixed lattice into its
 * border cells). */
PMI_SPH_FN long long pmi_cell_of(float x, double origin, double edge, long long cells)
{
    const double c = floor(((double)x - origin) / edge);
    if (!(c >= 0.0)) return 0;
    if (c >= (double)(cells - 1)) return cells - 1;
    return (long long)c;
}

/* Blur splat: the fraction of the lattice point's box [l - s/2, l + s/2]
 * covered along one axis by the particle's cube [p - r, p + r], in units
 * of s. */
PMI_SPH_FN double pmi_box_weight(double p, double r, double l, double s)
{
    const double hs = 0.5 * s;
    const double a = p - r > l - hs ? p - r : l - hs;
    const double b = p + r < l + hs ? p + r : l + hs;
    return b > a ? (b - a) / s : 0.0;
}

/* One binomial blur tap: (a + 2b + c) / 4 in float, in this order. */
PMI_SPH_FN float pmi_blur_tap(float a, float b, float c) { return ((a + 2.0f * b) + c) * 0.25f; }

#endif
