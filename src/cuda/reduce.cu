/* Reductions in double (a large fan-in reduction, done the way GPUs like it): a grid-stride pass
 * with 16-byte loads, one double partial per block, and the last block to finish (a ticket)
 * combines the partials in block order, so the result is deterministic on a given GPU. */
#include <math.h>

#include "cuda/cuda_internal.h"

#define RED_THREADS 256
#define RED_UNROLL 4 /* float4 loads in flight per thread */
#define RED_MAX_BLOCKS 2048

/* Element transform and combine per op; SUM/MEAN share one kernel. MIN/MAX
 * start from NaN, which fmin/fmax ignore, so all-NaN inputs give NaN. */
static __device__ __forceinline__ double red_prep(int op, float x)
{
    return op == PM_REDUCE_GEOMEAN ? log((double)x) : (double)x;
}
static __device__ __forceinline__ double red_comb(int op, double a, double b)
{
    if (op == PM_REDUCE_MIN) return fmin(a, b);
    if (op == PM_REDUCE_MAX) return fmax(a, b);
    return a + b;
}
static __device__ __forceinline__ double red_identity(int op)
{
    return (op == PM_REDUCE_MIN || op == PM_REDUCE_MAX) ? __longlong_as_double(0x7ff8000000000000ll)
                                                        : 0.0;
}

/* Block-wide combine into thread 0 (fixed tree, deterministic). */
static __device__ double red_block(int op, double v)
{
    __shared__ double warp_v[RED_THREADS / 32];
    for (int off = 16; off; off >>= 1)
        v = red_comb(op, v, __shfl_down_sync(0xffffffffu, v, off));
    if ((threadIdx.x & 31) == 0) warp_v[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < RED_THREADS / 32 ? warp_v[threadIdx.x] : red_identity(op);
        for (int off = 16; off; off >>= 1)
            v = red_comb(op, v, __shfl_down_sync(0xffffffffu, v, off));
    }
    __syncthreads(); /* warp_v may be reused by a second call */
    return v;
}

/* The last block to arrive combines all partials in index order and writes
 * the result (a mapped host word); it also rearms the ticket. */
static __device__ void red_finish(int op, double v, double *partial, unsigned *ticket,
                                  double *result)
{
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = v;
        __threadfence();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    double acc = red_identity(op);
    for (unsigned i = threadIdx.x; i < gridDim.x; i += RED_THREADS)
        acc = red_comb(op, acc, *(volatile double *)&partial[i]);
    acc = red_block(op, acc);
    if (threadIdx.x == 0) {
        *result = acc;
        *ticket = 0;
    }
}

/* Contiguous input. The op is a uniform kernel argument; the SUM loop is the
 * hot one, so it is written out separately from the general one. */
static __global__ void __launch_bounds__(RED_THREADS)
    red_linear(int op, const float *__restrict__ in, size_t n, double *partial, unsigned *ticket,
               double *result)
{
    double acc = red_identity(op);
    const size_t tid = (size_t)blockIdx.x * RED_THREADS + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * RED_THREADS;
    size_t head = 0;
    if (((uintptr_t)in & 15) == 0) {
        const float4 *in4 = (const float4 *)in;
        const size_t n4 = n / 4;
        size_t i = tid;
        if (op == PM_REDUCE_SUM || op == PM_REDUCE_MEAN) {
            double a1 = 0.0;
            for (; i + (RED_UNROLL - 1) * stride < n4; i += RED_UNROLL * stride) {
                float4 v[RED_UNROLL];
#pragma unroll
                for (int u = 0; u < RED_UNROLL; u++)
                    v[u] = __ldcs(in4 + i + u * stride);
#pragma unroll
                for (int u = 0; u < RED_UNROLL; u++) {
                    acc += (double)v[u].x + (double)v[u].y;
                    a1 += (double)v[u].z + (double)v[u].w;
                }
            }
            for (; i < n4; i += stride) {
                float4 v = __ldcs(in4 + i);
                acc += (double)v.x + (double)v.y;
                a1 += (double)v.z + (double)v.w;
            }
            acc += a1;
        } else {
            for (; i < n4; i += stride) {
                float4 v = __ldcs(in4 + i);
                acc = red_comb(op, acc, red_prep(op, v.x));
                acc = red_comb(op, acc, red_prep(op, v.y));
                acc = red_comb(op, acc, red_prep(op, v.z));
                acc = red_comb(op, acc, red_prep(op, v.w));
            }
        }
        head = n4 * 4;
    }
    for (size_t i = head + tid; i < n; i += stride)
        acc = red_comb(op, acc, red_prep(op, in[i]));
    acc = red_block(op, acc);
    red_finish(op, acc, partial, ticket, result);
}

/* Strided image: each warp takes whole rows; the lanes walk a row, with
 * 16-byte loads when every row start is 16-byte aligned. Never touches the
 * padding between width and row_stride. */
static __global__ void __launch_bounds__(RED_THREADS)
    red_image(int op, const float *__restrict__ img, size_t width, size_t height, size_t stride,
              int vec, double *partial, unsigned *ticket, double *result)
{
    double acc = red_identity(op);
    const unsigned lane = threadIdx.x & 31;
    const size_t warp = ((size_t)blockIdx.x * RED_THREADS + threadIdx.x) >> 5;
    const size_t nwarps = ((size_t)gridDim.x * RED_THREADS) >> 5;
    for (size_t y = warp; y < height; y += nwarps) {
        const float *row = img + y * stride;
        size_t x0 = 0;
        if (vec) {
            const float4 *r4 = (const float4 *)row;
            for (size_t i = lane; i < width / 4; i += 32) {
                float4 v = __ldcs(r4 + i);
                acc = red_comb(op, acc, red_prep(op, v.x));
                acc = red_comb(op, acc, red_prep(op, v.y));
                acc = red_comb(op, acc, red_prep(op, v.z));
                acc = red_comb(op, acc, red_prep(op, v.w));
            }
            x0 = width / 4 * 4;
        }
        for (size_t x = x0 + lane; x < width; x += 32)
            acc = red_comb(op, acc, red_prep(op, row[x]));
    }
    acc = red_block(op, acc);
    red_finish(op, acc, partial, ticket, result);
}

static unsigned red_grid(pm_context *ctx, size_t work_items)
{
    size_t want = (work_items + RED_THREADS - 1) / RED_THREADS;
    size_t cap = (size_t)pmi_cuda(ctx)->num_sms * 8; /* 8 blocks of 256 fill an SM */
    if (cap > RED_MAX_BLOCKS) cap = RED_MAX_BLOCKS;
    if (want > cap) want = cap;
    return want ? (unsigned)want : 1u;
}

static pm_status red_result(pm_context *ctx, pm_reduce_op op, size_t count, double *result)
{
    PMI_TRY(pmi_cuda_wait(ctx, "pm_reduce"));
    double v;
    memcpy(&v, &pmi_cuda(ctx)->host[PMI_HOST_RESULT], sizeof v);
    if (op == PM_REDUCE_MEAN) v /= (double)count;
    if (op == PM_REDUCE_GEOMEAN) v = exp(v / (double)count);
    *result = v;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_reduce_f32(pm_context *ctx, const float *in, size_t n,
                                         pm_reduce_op op, double *result)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    unsigned grid = red_grid(ctx, (n + 3) / 4 / RED_UNROLL);
    void *partial;
    PMI_TRY(pmi_cuda_scratch(ctx, grid * sizeof(double), &partial));
    red_linear<<<grid, RED_THREADS, 0, st->stream>>>(
        (int)op, in, n, (double *)partial, st->ticket_d, (double *)&st->host_d[PMI_HOST_RESULT]);
    PMI_TRY(pmi_cuda_launched("pm_reduce_f32"));
    return red_result(ctx, op, n, result);
}

extern "C" pm_status pmi_cuda_reduce_image_f32(pm_context *ctx, const float *image, size_t width,
                                               size_t height, size_t row_stride, pm_reduce_op op,
                                               double *result)
{
    if (row_stride == width) return pmi_cuda_reduce_f32(ctx, image, width * height, op, result);
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    int vec = ((uintptr_t)image & 15) == 0 && row_stride % 4 == 0;
    /* One warp per row; enough warps to cover the rows or fill the GPU. */
    unsigned grid = red_grid(ctx, height * 32);
    void *partial;
    PMI_TRY(pmi_cuda_scratch(ctx, grid * sizeof(double), &partial));
    red_image<<<grid, RED_THREADS, 0, st->stream>>>((int)op, image, width, height, row_stride, vec,
                                                    (double *)partial, st->ticket_d,
                                                    (double *)&st->host_d[PMI_HOST_RESULT]);
    PMI_TRY(pmi_cuda_launched("pm_reduce_image_f32"));
    return red_result(ctx, op, width * height, result);
}
