/* Loop subdivision on the GPU: each step of src/core/loop_rules.h as a
 * kernel, one thread per element, queued on the context's stream (the
 * level loop is src/core/subdivide.c; the stream of triangles stays in
 * device memory between levels). The step is a template parameter, so each
 * kernel holds only its own step's code. */
#include "cuda/cuda_internal.h"

extern "C" {
#include "core/loop_rules.h"
}

template <int STEP> static __global__ void loop_step_kernel(size_t n, pmi_loop_args a)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pmi_loop_step(STEP, (uint32_t)i, &a);
}

/* RED_UNIFORM with a block's output staged in shared memory: each thread
 * writes its triangle's 12 words of each array (children, twins, owner
 * numbers) there, then the block stores its 12 * RED_THREADS words of each
 * array as contiguous 16-byte stores. Written directly, a warp's store of
 * one word per thread touched 32 lines 48 bytes apart, 36 times per
 * triangle. */
#define RED_THREADS 128

/* The block's words are 48 * RED_THREADS bytes from the array's start
 * times the block number, and the arrays come from cudaMalloc or the pool
 * (256-byte aligned): 16-byte stores are aligned. */
static __device__ void red_store(uint32_t *dst, const uint32_t *src, unsigned words)
{
    uint4 *d4 = (uint4 *)dst;
    const uint4 *s4 = (const uint4 *)src;
    for (unsigned i = threadIdx.x; i < words / 4; i += blockDim.x)
        d4[i] = s4[i];
}

static __global__ void __launch_bounds__(RED_THREADS)
    red_uniform_kernel(size_t n, pmi_loop_args a)
{
    __shared__ __align__(16) uint32_t s_tri[12 * RED_THREADS];
    __shared__ __align__(16) uint32_t s_twin[12 * RED_THREADS];
    __shared__ __align__(16) uint32_t s_own[12 * RED_THREADS];
    const size_t t0 = (size_t)blockIdx.x * RED_THREADS;
    const size_t t = t0 + threadIdx.x;
    const unsigned j = 12 * threadIdx.x;
    if (t < n)
        pmi_loop_red_uniform_into(&a, (uint32_t)t, s_tri + j, a.twin_next ? s_twin + j : NULL,
                                  a.owner_next ? s_own + j : NULL);
    __syncthreads();
    const unsigned words = 12 * (unsigned)(n - t0 < RED_THREADS ? n - t0 : RED_THREADS);
    red_store(a.tri_next + 12 * t0, s_tri, words);
    if (a.twin_next) red_store(a.twin_next + 12 * t0, s_twin, words);
    if (a.owner_next) red_store(a.owner_next + 12 * t0, s_own, words);
}

template <int STEP> static pm_status loop_launch(pm_context *ctx, size_t n, const pmi_loop_args *a)
{
    const unsigned threads = 256;
    const size_t blocks = (n + threads - 1) / threads;
    loop_step_kernel<STEP><<<(unsigned)blocks, threads, 0, pmi_cuda(ctx)->stream>>>(n, *a);
    return pmi_cuda_launched("pm_subdivide_loop");
}

extern "C" pm_status pmi_cuda_subdivide_step(pm_context *ctx, int step, size_t n,
                                             const pmi_loop_args *a)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    switch (step) {
    case PMI_LOOP_CHECK_TRI: return loop_launch<PMI_LOOP_CHECK_TRI>(ctx, n, a);
    case PMI_LOOP_CSR_COUNT: return loop_launch<PMI_LOOP_CSR_COUNT>(ctx, n, a);
    case PMI_LOOP_CSR_FILL: return loop_launch<PMI_LOOP_CSR_FILL>(ctx, n, a);
    case PMI_LOOP_CSR_SORT: return loop_launch<PMI_LOOP_CSR_SORT>(ctx, n, a);
    case PMI_LOOP_TWIN: return loop_launch<PMI_LOOP_TWIN>(ctx, n, a);
    case PMI_LOOP_VSTART: return loop_launch<PMI_LOOP_VSTART>(ctx, n, a);
    case PMI_LOOP_CSR_NORMAL: return loop_launch<PMI_LOOP_CSR_NORMAL>(ctx, n, a);
    case PMI_LOOP_WALK_VERTEX: return loop_launch<PMI_LOOP_WALK_VERTEX>(ctx, n, a);
    case PMI_LOOP_SPLIT: return loop_launch<PMI_LOOP_SPLIT>(ctx, n, a);
    case PMI_LOOP_MARK_TWO: return loop_launch<PMI_LOOP_MARK_TWO>(ctx, n, a);
    case PMI_LOOP_PROMOTE: return loop_launch<PMI_LOOP_PROMOTE>(ctx, n, a);
    case PMI_LOOP_CLASSIFY: return loop_launch<PMI_LOOP_CLASSIFY>(ctx, n, a);
    case PMI_LOOP_EVEN: return loop_launch<PMI_LOOP_EVEN>(ctx, n, a);
    case PMI_LOOP_ODD: return loop_launch<PMI_LOOP_ODD>(ctx, n, a);
    case PMI_LOOP_EMIT: return loop_launch<PMI_LOOP_EMIT>(ctx, n, a);
    case PMI_LOOP_COPY_U32: return loop_launch<PMI_LOOP_COPY_U32>(ctx, n, a);
    case PMI_LOOP_ZERO_U32: return loop_launch<PMI_LOOP_ZERO_U32>(ctx, n, a);
    case PMI_LOOP_EVEN_UNIFORM: return loop_launch<PMI_LOOP_EVEN_UNIFORM>(ctx, n, a);
    case PMI_LOOP_RED_UNIFORM: {
        const size_t blocks = (n + RED_THREADS - 1) / RED_THREADS;
        red_uniform_kernel<<<(unsigned)blocks, RED_THREADS, 0, pmi_cuda(ctx)->stream>>>(n, *a);
        return pmi_cuda_launched("pm_subdivide_loop");
    }
    case PMI_LOOP_NORMAL_OLD: return loop_launch<PMI_LOOP_NORMAL_OLD>(ctx, n, a);
    case PMI_LOOP_NORMAL_NEW: return loop_launch<PMI_LOOP_NORMAL_NEW>(ctx, n, a);
    default: break;
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_subdivide_loop: unknown step %d", step);
}
