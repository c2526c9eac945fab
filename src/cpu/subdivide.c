/* Loop subdivision on the CPU: each step of src/core/loop_rules.h as an
 * OpenMP loop over its elements (the level loop is src/core/subdivide.c).
 * Steps either write only their own element's slots or use atomics whose
 * results do not depend on the order (counts, sorted lists, minima), so
 * any thread count gives the same bytes. */
#include "core/loop_rules.h"
#include "cpu/cpu.h"

pm_status pmi_cpu_subdivide_step(pm_context *ctx, int step, size_t n, const pmi_loop_args *args)
{
    const pmi_loop_args a = *args;
    const int nt = ctx->num_threads;
    const long long count = (long long)n;
    /* Walks and sorts vary in cost per element: dynamic chunks. */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4096)
    for (long long i = 0; i < count; i++)
        pmi_loop_step(step, (uint32_t)i, &a);
    return PM_STATUS_OK;
}
