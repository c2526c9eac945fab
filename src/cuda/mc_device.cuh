/* Device helpers of the CUDA marching cubes: sample loads of every type,
 * the corner/edge tables in device memory, and the vertex position and
 * normal arithmetic, written operation for operation as the CPU reference
 * (src/cpu/isosurface.c) so both backends give the same bits (doubles,
 * no contraction: the library is compiled with --fmad=false). */
#ifndef PM_CUDA_MC_DEVICE_CUH
#define PM_CUDA_MC_DEVICE_CUH

#include <float.h>
#include <stdint.h>

#include "pyramesh.h"

/* The volume as the kernels see it (strides in elements). */
typedef struct mcd_volume {
    const void *data;
    long long nx, ny, nz;
    long long rs, ss;
    double iso, sg, siso; /* sg = -1 when inside is above iso; siso = sg * iso */
    /* The same test in float for samples that are exact floats (all but
     * f64): sg > 0: x < fthr (the smallest float >= iso); sg < 0: x > fthr
     * (the largest float <= iso). Exactly equivalent, NaN never inside. */
    float fthr;
    double org[3], sp[3];
} mcd_volume;

/* Tables copied from src/core/mc_tables.c at first use on each device;
 * without separable compilation every file has its own copy, uploaded by
 * its own mcd_tables_upload (MCD_TABLES_UPLOAD below). */
static __device__ int8_t mcd_tri_table[256][16];
static __device__ uint8_t mcd_tri_count[256];
static __device__ uint8_t mcd_edge_corner[12][2];
static __device__ uint8_t mcd_edge_axis[12];
static __device__ uint8_t mcd_corner[8][3];

#define MCD_TABLES_UPLOAD                                                                      \
    static pm_status mcd_tables_upload(int device)                                             \
    {                                                                                          \
        static int done[64];                                                                   \
        if (device >= 0 && device < 64 && __atomic_load_n(&done[device], __ATOMIC_ACQUIRE))    \
            return PM_STATUS_OK;                                                               \
        cudaError_t e = cudaMemcpyToSymbol(mcd_tri_table, pmi_mc_tri_table, sizeof pmi_mc_tri_table); \
        if (e == cudaSuccess)                                                                  \
            e = cudaMemcpyToSymbol(mcd_tri_count, pmi_mc_tri_count, sizeof pmi_mc_tri_count);  \
        if (e == cudaSuccess)                                                                  \
            e = cudaMemcpyToSymbol(mcd_edge_corner, pmi_mc_edge_corner, sizeof pmi_mc_edge_corner); \
        if (e == cudaSuccess)                                                                  \
            e = cudaMemcpyToSymbol(mcd_edge_axis, pmi_mc_edge_axis, sizeof pmi_mc_edge_axis);  \
        if (e == cudaSuccess) e = cudaMemcpyToSymbol(mcd_corner, pmi_mc_corner, sizeof pmi_mc_corner); \
        if (e != cudaSuccess) return pmi_cuda_status(e, "pm_isosurface: marching cubes tables"); \
        if (device >= 0 && device < 64) __atomic_store_n(&done[device], 1, __ATOMIC_RELEASE);   \
        return PM_STATUS_OK;                                                                   \
    }

template <typename T> static __device__ __forceinline__ double mcd_load(const mcd_volume &v, long long i, long long j, long long k)
{
    return (double)__ldg((const T *)v.data + (i + j * v.rs + k * v.ss));
}

/* Inside test, in double, exactly as the CPU: sg = +1 makes value < iso
 * inside, sg = -1 makes value > iso inside (-v < -iso). NaN is never inside. */
static __device__ __forceinline__ int mcd_inside(const mcd_volume &v, double x)
{
    return v.sg * x < v.siso;
}

/* The integer threshold of an integer sample type's inside test, for
 * comparisons with no conversion to float (a quarter of the integer rate):
 * x < fthr <=> x < ceil(fthr) when inside is below, x > fthr <=> x >
 * floor(fthr) when above (fthr clamped to the int range first). */
static __device__ __forceinline__ int mcd_int_threshold(float fthr, bool above)
{
    const float fc = fminf(fmaxf(fthr, -2e9f), 2e9f);
    return above ? (int)floorf(fc) : (int)ceilf(fc);
}

/* The inside test on a sample of type T: the float test (fthr) for the
 * types exact in float, the double one for f64. */
template <typename T> static __device__ __forceinline__ unsigned mcd_inside_t(const mcd_volume &v, T x)
{
    if constexpr (sizeof(T) == 8) return (unsigned)mcd_inside(v, (double)x);
    else return v.sg > 0 ? (float)x < v.fthr : (float)x > v.fthr;
}

/* Gradient at lattice point (i,j,k) per unit length, as the CPU's
 * gradient(): (v[ip] - v[im]) / ((ip - im) * h) for forward and central;
 * Sobel sums w * (v[ip] - v[im]) over the clamped 3x3 cross-section, outer
 * loop over the higher cross axis, and divides by 16 * (ip - im) * h. */
template <typename T, int MODE>
static __device__ __forceinline__ void mcd_gradient(const mcd_volume &v, long long i, long long j, long long k,
                                                    double g[3])
{
    const long long p[3] = {i, j, k}, n[3] = {v.nx, v.ny, v.nz};
#pragma unroll
    for (int a = 0; a < 3; a++) {
        long long ip, im;
        if constexpr (MODE == PM_NORMALS_FORWARD) {
            ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
            im = p[a] + 1 < n[a] ? p[a] : p[a] - 1;
        } else {
            ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
            im = p[a] > 0 ? p[a] - 1 : 0;
        }
        if constexpr (MODE != PM_NORMALS_SOBEL) {
            long long qp[3] = {i, j, k}, qm[3] = {i, j, k};
            qp[a] = ip;
            qm[a] = im;
            double d = mcd_load<T>(v, qp[0], qp[1], qp[2]) - mcd_load<T>(v, qm[0], qm[1], qm[2]);
            g[a] = d / ((double)(ip - im) * v.sp[a]);
        } else {
            const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
            double s = 0.0;
#pragma unroll
            for (int dc = -1; dc <= 1; dc++) {
                long long qc = p[c];
                if (dc < 0 && qc > 0) qc--;
                if (dc > 0 && qc + 1 < n[c]) qc++;
#pragma unroll
                for (int db = -1; db <= 1; db++) {
                    long long qb = p[b];
                    if (db < 0 && qb > 0) qb--;
                    if (db > 0 && qb + 1 < n[b]) qb++;
                    long long qp[3], qm[3];
                    qp[a] = ip;
                    qm[a] = im;
                    qp[b] = qm[b] = qb;
                    qp[c] = qm[c] = qc;
                    double w = (double)((2 - (db < 0 ? -db : db)) * (2 - (dc < 0 ? -dc : dc)));
                    double d = mcd_load<T>(v, qp[0], qp[1], qp[2]) - mcd_load<T>(v, qm[0], qm[1], qm[2]);
                    s = s + w * d;
                }
            }
            g[a] = s / ((16.0 * (double)(ip - im)) * v.sp[a]);
        }
    }
}

/* Position and normal of the crossing on the lattice edge from (i,j,k)
 * along `axis` (the lower end), as the CPU's vertex(). */
template <typename T, int MODE>
static __device__ __forceinline__ void mcd_vertex(const mcd_volume &v, long long i, long long j, long long k, int axis,
                                                  float pos[3], float nrm[3])
{
    const long long i1 = i + (axis == 0), j1 = j + (axis == 1), k1 = k + (axis == 2);
    const double vlo = mcd_load<T>(v, i, j, k), vhi = mcd_load<T>(v, i1, j1, k1);
    double t = (v.iso - vlo) / (vhi - vlo);
    /* Only non-finite samples can leave [0, 1] (or give NaN). */
    if (!(t >= 0.0 && t <= 1.0)) t = 0.5;
    /* The lattice coordinates, t added along the edge's axis (selects, not
     * an index by axis: that would put the array in local memory). */
    const double q[3] = {axis == 0 ? (double)i + t : (double)i, axis == 1 ? (double)j + t : (double)j,
                         axis == 2 ? (double)k + t : (double)k};
#pragma unroll
    for (int c = 0; c < 3; c++) pos[c] = (float)(v.org[c] + v.sp[c] * q[c]);
    if constexpr (MODE != PM_NORMALS_NONE) {
        double g0[3], g1[3], n[3];
        mcd_gradient<T, MODE>(v, i, j, k, g0);
        mcd_gradient<T, MODE>(v, i1, j1, k1, g1);
#pragma unroll
        for (int c = 0; c < 3; c++) n[c] = (1.0 - t) * g0[c] + t * g1[c];
#pragma unroll
        for (int c = 0; c < 3; c++) n[c] = v.sg * n[c];
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
        /* Vanishing or non-finite gradient: the edge direction from its
         * inside end to its outside end. */
        float s = mcd_inside(v, vlo) ? 1.0f : -1.0f;
        nrm[0] = axis == 0 ? s : 0.0f;
        nrm[1] = axis == 1 ? s : 0.0f;
        nrm[2] = axis == 2 ? s : 0.0f;
    }
}

#endif
