/* Device helpers of the CUDA marching cubes: sample loads of every type,
 * the corner/edge tables in device memory, and the vertex position and
 * normal, whose arithmetic is core/mc_math.h's, shared with the CPU
 * backend (src/cpu/isosurface_kernel.h), so both give the same bits. */
#ifndef PM_CUDA_MC_DEVICE_CUH
#define PM_CUDA_MC_DEVICE_CUH

#include <float.h>
#include <stdint.h>

#include "pyramesh.h"
#include "core/mc_math.h"

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
    double gw[3][3]; /* gradient weights pmi_mc_diff_weight(span, sp[a]), [span][a] */
    /* Global z of slice 0: a slab window's vertices are placed at their
     * global lattice slice (pmi_cuda_isosurface_window); 0 otherwise. */
    long long kz;
    /* Every lattice index and sample offset below 2^31 (mc_plan_make):
     * pass 2 computes its vertices with 32-bit indices. */
    int i32;
} mcd_volume;

/* Tables copied from src/core/mc_tables.c at first use on each device;
 * without separable compilation every file has its own copy, uploaded by
 * its own mcd_tables_upload (MCD_TABLES_UPLOAD below). */
static __device__ int8_t mcd_tri_table[256][16];
static __device__ uint8_t mcd_tri_count[256];
static __device__ uint8_t mcd_edge_corner[12][2];
static __device__ uint8_t mcd_edge_axis[12];
static __device__ uint8_t mcd_corner[8][3];
/* mcd_tri_table with each edge e given as its lower end's corner offsets
 * and axis, dx | dy << 1 | dz << 2 | axis << 3 (MCD_ORIGIN_*): one load
 * where the edge, corner and axis tables took three in a chain. */
static __device__ uint8_t mcd_tri_origin[256][16];
/* The same table with each edge given as its number 0-11 in the soup
 * kernels' order (x edges 0-3 by dy + 2 dz, y edges 4-7 by dx + 2 dz, z
 * edges 8-11 by dx + 2 dy; 255 past the case's triangles), and each case's
 * edges that its triangles use (bit e for edge number e). */
static __device__ __align__(16) uint8_t mcd_tri_edge[256][16];
static __device__ uint16_t mcd_case_edges[256];
#define MCD_ORIGIN_DX(o) ((int)((o)&1u))
#define MCD_ORIGIN_DY(o) ((int)((o) >> 1 & 1u))
#define MCD_ORIGIN_DZ(o) ((int)((o) >> 2 & 1u))
#define MCD_ORIGIN_AXIS(o) ((int)((o) >> 3))

#define MCD_TABLES_UPLOAD                                                                          \
    static pm_status mcd_tables_upload(int device)                                                 \
    {                                                                                              \
        static int done[64];                                                                       \
        if (device >= 0 && device < 64 && __atomic_load_n(&done[device], __ATOMIC_ACQUIRE))        \
            return PM_STATUS_OK;                                                                   \
        cudaError_t e =                                                                            \
            cudaMemcpyToSymbol(mcd_tri_table, pmi_mc_tri_table, sizeof pmi_mc_tri_table);          \
        if (e == cudaSuccess)                                                                      \
            e = cudaMemcpyToSymbol(mcd_tri_count, pmi_mc_tri_count, sizeof pmi_mc_tri_count);      \
        if (e == cudaSuccess)                                                                      \
            e = cudaMemcpyToSymbol(mcd_edge_corner, pmi_mc_edge_corner,                            \
                                   sizeof pmi_mc_edge_corner);                                     \
        if (e == cudaSuccess)                                                                      \
            e = cudaMemcpyToSymbol(mcd_edge_axis, pmi_mc_edge_axis, sizeof pmi_mc_edge_axis);      \
        if (e == cudaSuccess)                                                                      \
            e = cudaMemcpyToSymbol(mcd_corner, pmi_mc_corner, sizeof pmi_mc_corner);               \
        if (e == cudaSuccess) {                                                                    \
            uint8_t org[256][16];                                                                  \
            for (int cs = 0; cs < 256; cs++)                                                       \
                for (int q = 0; q < 16; q++) {                                                     \
                    const int ed = pmi_mc_tri_table[cs][q];                                        \
                    const uint8_t *c = ed < 0 ? NULL : pmi_mc_corner[pmi_mc_edge_corner[ed][0]];   \
                    org[cs][q] =                                                                   \
                        c ? (uint8_t)(c[0] | c[1] << 1 | c[2] << 2 | pmi_mc_edge_axis[ed] << 3)    \
                          : (uint8_t)255;                                                          \
                }                                                                                  \
            e = cudaMemcpyToSymbol(mcd_tri_origin, org, sizeof org);                               \
            uint8_t num[256][16];                                                                  \
            uint16_t used[256];                                                                    \
            for (int cs = 0; cs < 256; cs++) {                                                     \
                used[cs] = 0;                                                                      \
                for (int q = 0; q < 16; q++) {                                                     \
                    const unsigned o = org[cs][q], ax = o >> 3, dx = o & 1u, dy = o >> 1 & 1u,     \
                                   dz = o >> 2 & 1u;                                               \
                    num[cs][q] = o == 255u ? (uint8_t)255                                          \
                                           : (uint8_t)(4 * ax + (ax == 0   ? dy + 2 * dz           \
                                                                 : ax == 1 ? dx + 2 * dz           \
                                                                           : dx + 2 * dy));        \
                    if (o != 255u) used[cs] = (uint16_t)(used[cs] | 1u << num[cs][q]);             \
                }                                                                                  \
            }                                                                                      \
            if (e == cudaSuccess) e = cudaMemcpyToSymbol(mcd_tri_edge, num, sizeof num);           \
            if (e == cudaSuccess) e = cudaMemcpyToSymbol(mcd_case_edges, used, sizeof used);       \
        }                                                                                          \
        if (e != cudaSuccess) return pmi_cuda_status(e, "pm_isosurface: marching cubes tables");   \
        if (device >= 0 && device < 64) __atomic_store_n(&done[device], 1, __ATOMIC_RELEASE);      \
        return PM_STATUS_OK;                                                                       \
    }

/* The sample at (i, j, k), the offset in index type I (int where
 * mcd_volume.i32 allows it). */
template <typename T, typename I>
static __device__ __forceinline__ double mcd_load(const mcd_volume &v, I i, I j, I k)
{
    return (double)__ldg((const T *)v.data + (i + j * (I)v.rs + k * (I)v.ss));
}

/* The inside test in double (pmi_mc_inside). */
static __device__ __forceinline__ int mcd_inside(const mcd_volume &v, double x)
{
    return pmi_mc_inside(v.sg, v.siso, x);
}

/* The integer threshold of an integer sample type's inside test, for
 * comparisons with no conversion to float (a quarter of the integer rate):
 * x < fthr <=> x < ceil(fthr) when inside is below, x > fthr <=> x >
 * floor(fthr) when above (fthr clamped to the int range first). */
static __host__ __device__ __forceinline__ int mcd_int_threshold(float fthr, bool above)
{
    const float fc = fminf(fmaxf(fthr, -2e9f), 2e9f);
    return above ? (int)floorf(fc) : (int)ceilf(fc);
}

/* The inside test on a sample of type T: the float test (fthr) for the
 * types exact in float, the double one for f64. */
template <typename T>
static __device__ __forceinline__ unsigned mcd_inside_t(const mcd_volume &v, T x)
{
    if constexpr (sizeof(T) == 8)
        return (unsigned)mcd_inside(v, (double)x);
    else
        return v.sg > 0 ? (float)x < v.fthr : (float)x > v.fthr;
}

/* Gradient at lattice point (i,j,k) per unit length, as the CPU's
 * gradient() (the differences of core/mc_math.h): forward and central
 * from two samples, Sobel over the clamped 3x3 cross-section, outer loop
 * over the higher cross axis. */
template <typename T, int MODE, typename I>
static __device__ __forceinline__ void mcd_gradient(const mcd_volume &v, I i, I j, I k, double g[3])
{
    const I p[3] = {i, j, k}, n[3] = {(I)v.nx, (I)v.ny, (I)v.nz};
#pragma unroll
    for (int a = 0; a < 3; a++) {
        const I ip = PMI_MC_DIFF_HI(p[a], n[a]);
        const I im = MODE == PM_NORMALS_FORWARD ? PMI_MC_DIFF_LO_FORWARD(p[a], n[a])
                                                : PMI_MC_DIFF_LO_CENTRAL(p[a]);
        if constexpr (MODE != PM_NORMALS_SOBEL) {
            I qp[3] = {i, j, k}, qm[3] = {i, j, k};
            qp[a] = ip;
            qm[a] = im;
            g[a] = pmi_mc_diff_w(
                mcd_load<T, I>(v, qp[0], qp[1], qp[2]), mcd_load<T, I>(v, qm[0], qm[1], qm[2]),
                pmi_mc_diff_pick(v.gw[0][a], v.gw[1][a], v.gw[2][a], (long long)(ip - im)));
        } else {
            const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
            double s = 0.0;
#pragma unroll
            for (int dc = -1; dc <= 1; dc++) {
                const I qc = PMI_MC_SOBEL_STEP(p[c], dc, n[c]);
#pragma unroll
                for (int db = -1; db <= 1; db++) {
                    const I qb = PMI_MC_SOBEL_STEP(p[b], db, n[b]);
                    I qp[3], qm[3];
                    qp[a] = ip;
                    qm[a] = im;
                    qp[b] = qm[b] = qb;
                    qp[c] = qm[c] = qc;
                    s = pmi_mc_sobel_add(s, db, dc, mcd_load<T, I>(v, qp[0], qp[1], qp[2]),
                                         mcd_load<T, I>(v, qm[0], qm[1], qm[2]));
                }
            }
            g[a] = pmi_mc_sobel_grad(s, (double)(ip - im), v.sp[a]);
        }
    }
}

/* Position and normal of the crossing on the lattice edge from (i,j,k)
 * along `axis` (the lower end), as the CPU's vertex(). */
template <typename T, int MODE, typename I>
static __device__ __forceinline__ void mcd_vertex_i(const mcd_volume &v, I i, I j, I k, int axis,
                                                    float pos[3], float nrm[3])
{
    const I i1 = i + (axis == 0), j1 = j + (axis == 1), k1 = k + (axis == 2);
    const double vlo = mcd_load<T, I>(v, i, j, k), vhi = mcd_load<T, I>(v, i1, j1, k1);
    const double t = pmi_mc_edge_t(v.iso, vlo, vhi);
    pmi_mc_position(v.org, v.sp, i, j, (long long)k + v.kz, axis, t, pos);
    if constexpr (MODE != PM_NORMALS_NONE) {
        double g0[3], g1[3];
        mcd_gradient<T, MODE, I>(v, i, j, k, g0);
        mcd_gradient<T, MODE, I>(v, i1, j1, k1, g1);
        pmi_mc_normal(t, v.sg, v.siso, vlo, axis, g0, g1, nrm);
    }
}
/* The same samples and arithmetic either way: 32-bit indices and offsets
 * where the volume's offsets fit (i32, the common case: fewer integer
 * instructions per vertex), else 64-bit ones. */
template <typename T, int MODE>
static __device__ __forceinline__ void mcd_vertex(const mcd_volume &v, long long i, long long j,
                                                  long long k, int axis, float pos[3], float nrm[3])
{
    if (v.i32)
        mcd_vertex_i<T, MODE, int>(v, (int)i, (int)j, (int)k, axis, pos, nrm);
    else
        mcd_vertex_i<T, MODE, long long>(v, i, j, k, axis, pos, nrm);
}

#endif
