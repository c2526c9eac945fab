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
    case PMI_LOOP_RED_UNIFORM: return loop_launch<PMI_LOOP_RED_UNIFORM>(ctx, n, a);
    case PMI_LOOP_NORMAL_OLD: return loop_launch<PMI_LOOP_NORMAL_OLD>(ctx, n, a);
    case PMI_LOOP_NORMAL_NEW: return loop_launch<PMI_LOOP_NORMAL_NEW>(ctx, n, a);
    default: break;
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_subdivide_loop: unknown step %d", step);
}
