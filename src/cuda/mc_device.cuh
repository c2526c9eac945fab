/* Device helpers of the CUDA marching cubes: sample loads of every type,
 * the corner/edge tables in device memory, and the vertex position and
 * normal arithmetic, written operation for operation as the CPU reference
 * (src/cpu/isosurface.c) so both backends give the same bits (doubles,
 * no contraction: the library is compiled with --fmad=false). */
#ifndef PM_CUDA_MC_DEVICE_CUH
#define PM_CUDA_MC_DEVICE_CUH

#include <stdint.h>

#include "pyramesh.h"

/* The volume as the kernels see it (strides in elements). */
typedef struct mcd_volume {
    const void *data;
    long long nx, ny, nz;
    long long rs, ss;
    double iso;
    int above; /* options->inside_above */
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

static __device__ __forceinline__ int mcd_inside(const mcd_volume &v, double x)
{
    return v.above ? (x > v.iso) : (x < v.iso);
}

/* Gradient at lattice point (i,j,k) in world units, by the mode's rule. */
template <typename T, int MODE>
static __device__ __forceinline__ void mcd_gradient(const mcd_volume &v, long long i, long long j, long long k, double g[3])
{
    const long long n[3] = {v.nx, v.ny, v.nz};
    const long long p[3] = {i, j, k};
    if constexpr (MODE == PM_NORMALS_SOBEL) {
        /* 3x3x3 Sobel: derivative [-1 0 1] along the axis, smoothing
         * [1 2 1] across it, indices clamped to the volume. */
        double s[3] = {0.0, 0.0, 0.0};
        long long c[3][3];
        for (int a = 0; a < 3; a++)
            for (int d = 0; d < 3; d++) {
                long long q = p[a] + d - 1;
                c[a][d] = q < 0 ? 0 : (q > n[a] - 1 ? n[a] - 1 : q);
            }
        const double w[3] = {1.0, 2.0, 1.0};
        for (int dz = 0; dz < 3; dz++)
            for (int dy = 0; dy < 3; dy++)
                for (int dx = 0; dx < 3; dx++) {
                    double val = mcd_load<T>(v, c[0][dx], c[1][dy], c[2][dz]);
                    s[0] += (double)(dx - 1) * w[dy] * w[dz] * val;
                    s[1] += (double)(dy - 1) * w[dx] * w[dz] * val;
                    s[2] += (double)(dz - 1) * w[dx] * w[dy] * val;
                }
        for (int a = 0; a < 3; a++) g[a] = s[a] / (32.0 * v.sp[a]);
    } else {
    for (int a = 0; a < 3; a++) {
        long long lo = p[a], hi = p[a];
        double den = v.sp[a];
        if (MODE == PM_NORMALS_FORWARD) {
            if (p[a] < n[a] - 1) hi = p[a] + 1;
            else lo = p[a] - 1;
        } else {
            if (p[a] > 0) lo = p[a] - 1;
            if (p[a] < n[a] - 1) hi = p[a] + 1;
            if (hi - lo == 2) den = 2.0 * v.sp[a];
        }
        long long qh[3] = {i, j, k}, ql[3] = {i, j, k};
        qh[a] = hi;
        ql[a] = lo;
        g[a] = (mcd_load<T>(v, qh[0], qh[1], qh[2]) - mcd_load<T>(v, ql[0], ql[1], ql[2])) / den;
    }
    }
}

/* Position and normal of the crossing on the edge from lattice point lo
 * along `axis` (lo is the lower end). */
template <typename T, int MODE>
static __device__ __forceinline__ void mcd_vertex(const mcd_volume &v, long long i, long long j, long long k, int axis,
                                                  float pos[3], float nrm[3])
{
    long long hi[3] = {i, j, k};
    hi[axis] += 1;
    double vlo = mcd_load<T>(v, i, j, k);
    double vhi = mcd_load<T>(v, hi[0], hi[1], hi[2]);
    double t = (v.iso - vlo) / (vhi - vlo);
    const long long lo[3] = {i, j, k};
    for (int a = 0; a < 3; a++)
        pos[a] = (float)(v.org[a] + v.sp[a] * ((double)lo[a] + (a == axis ? t : 0.0)));
    if constexpr (MODE == PM_NORMALS_NONE) return;
    double g0[3], g1[3], n[3];
    mcd_gradient<T, MODE>(v, i, j, k, g0);
    mcd_gradient<T, MODE>(v, hi[0], hi[1], hi[2], g1);
    for (int a = 0; a < 3; a++) n[a] = (1.0 - t) * g0[a] + t * g1[a];
    if (v.above)
        for (int a = 0; a < 3; a++) n[a] = -n[a];
    double len2 = n[0] * n[0] + n[1] * n[1] + n[2] * n[2];
    if (len2 > 0.0 && isfinite(len2)) {
        double inv = 1.0 / sqrt(len2);
        for (int a = 0; a < 3; a++) nrm[a] = (float)(n[a] * inv);
    } else {
        float s = mcd_inside(v, vlo) ? 1.0f : -1.0f;
        for (int a = 0; a < 3; a++) nrm[a] = a == axis ? s : 0.0f;
    }
}

#endif
