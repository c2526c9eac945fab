/* Synthetic volumes shared by the tests and benchmarks: the cayley field of
 * ANCHORS.md (the HP5 test field), a sphere and a torus as signed distances
 * (inside below 0), and random samples; plus conversion to every sample
 * type. Fields are evaluated in double and rounded once to the sample type. */
#ifndef PM_TEST_VOLUMES_H
#define PM_TEST_VOLUMES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pyramesh.h"

/* Lattice coordinate i of n mapped onto [-1, 1] (ANCHORS: 2i/(N-1) - 1). */
static inline double pmt_unit(size_t i, size_t n)
{
    return 2.0 * (double)i / (double)(n - 1) - 1.0;
}

/* Cayley cubic: v = 1 - 16xyz - 4(x^2 + y^2 + z^2) over [-1,1]^3, iso 0. */
static inline double pmt_cayley(double x, double y, double z)
{
    return 1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z);
}
/* Signed distance to a sphere of radius r at the origin. */
static inline double pmt_sphere(double x, double y, double z, double r)
{
    return sqrt(x * x + y * y + z * z) - r;
}
/* Signed distance to a torus around the z axis (radii R > r). */
static inline double pmt_torus(double x, double y, double z, double R, double r)
{
    double q = sqrt(x * x + y * y) - R;
    return sqrt(q * q + z * z) - r;
}

typedef enum { PMT_FIELD_CAYLEY, PMT_FIELD_SPHERE, PMT_FIELD_TORUS } pmt_field;

/* An nx*ny*nz f64 array (x fastest) of the field on [-1,1]^3; a, b are the
 * radii (sphere: a; torus: a = R, b = r). Exits on allocation failure. */
static inline double *pmt_field_f64(pmt_field f, size_t nx, size_t ny, size_t nz, double a,
                                    double b)
{
    double *v = malloc(sizeof(double) * nx * ny * nz);
    if (!v) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = pmt_unit(i, nx), y = pmt_unit(j, ny), z = pmt_unit(k, nz), w;
                if (f == PMT_FIELD_CAYLEY)
                    w = pmt_cayley(x, y, z);
                else if (f == PMT_FIELD_SPHERE)
                    w = pmt_sphere(x, y, z, a);
                else
                    w = pmt_torus(x, y, z, a, b);
                v[i + nx * (j + ny * k)] = w;
            }
    return v;
}

/* The cayley field as packed f32 (the benchmark input). */
static inline float *pmt_cayley_f32(size_t n)
{
    float *v = malloc(sizeof(float) * n * n * n);
    if (!v) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                v[i + n * (j + n * k)] =
                    (float)pmt_cayley(pmt_unit(i, n), pmt_unit(j, n), pmt_unit(k, n));
    return v;
}

/* Converts count doubles to `type` (rounded to nearest and clamped for
 * integers) into a fresh array laid out with row/slice strides (elements;
 * 0 = packed). Padding is filled with a huge value so reading it would show. */
static inline void *pmt_convert(const double *src, size_t nx, size_t ny, size_t nz,
                                pm_sample_type type, size_t rs, size_t ss)
{
    if (!rs) rs = nx;
    if (!ss) ss = rs * ny;
    size_t total = ss * nz, es = pm_sample_size(type);
    size_t bytes = total * es;
    unsigned char *dst = malloc(bytes ? bytes : 1);
    if (!dst) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t p = 0; p < total; p++) {
        double w = 1e30;
        size_t i = p % ss % rs, j = p % ss / rs, k = p / ss;
        if (i < nx && j < ny) w = src[i + nx * (j + ny * k)];
        switch (type) {
        case PM_SAMPLE_U8: {
            double c = w < 0 ? 0 : w > 255 ? 255 : floor(w + 0.5);
            ((uint8_t *)dst)[p] = (uint8_t)c;
            break;
        }
        case PM_SAMPLE_U16: {
            double c = w < 0 ? 0 : w > 65535 ? 65535 : floor(w + 0.5);
            ((uint16_t *)dst)[p] = (uint16_t)c;
            break;
        }
        case PM_SAMPLE_I16: {
            double c = w < -32768 ? -32768 : w > 32767 ? 32767 : floor(w + 0.5);
            ((int16_t *)dst)[p] = (int16_t)c;
            break;
        }
        case PM_SAMPLE_F32: ((float *)dst)[p] = (float)w; break;
        case PM_SAMPLE_F64: ((double *)dst)[p] = w; break;
        }
    }
    return dst;
}

#endif
