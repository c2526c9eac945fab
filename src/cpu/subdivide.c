/* Loop subdivision on the CPU: each step of src/core/loop_rules.h as an
 * OpenMP loop over its elements (the level loop is src/core/subdivide.c).
 * Steps either write only their own element's slots or use atomics whose
 * results do not depend on the order (counts, sorted lists, minima), so
 * any thread count gives the same bytes. */
#include "core/loop_rules.h"
#include "cpu/cpu.h"

/* One loop per step, so the step's code is inlined without a switch per
 * element: static chunks where every element costs about the same,
 * dynamic ones for walks, sorts and corner lists. */
#define PMI_SD_LOOP(SCHED, CALL)                                                                   \
    do {                                                                                           \
        _Pragma(SCHED) for (long long i = 0; i < count; i++) CALL;                                 \
    } while (0)
#define PMI_SD_STATIC(CALL) PMI_SD_LOOP("omp parallel for num_threads(nt) schedule(static)", CALL)
#define PMI_SD_DYNAMIC(CALL)                                                                       \
    PMI_SD_LOOP("omp parallel for num_threads(nt) schedule(dynamic, 4096)", CALL)

pm_status pmi_cpu_subdivide_step(pm_context *ctx, int step, size_t n, const pmi_loop_args *args)
{
    const pmi_loop_args a = *args;
    const int nt = ctx->num_threads;
    const long long count = (long long)n;
    switch (step) {
    case PMI_LOOP_EVEN_UNIFORM: PMI_SD_DYNAMIC(pmi_loop_even_uniform(&a, (uint32_t)i)); break;
    case PMI_LOOP_RED_UNIFORM: PMI_SD_STATIC(pmi_loop_red_uniform(&a, (uint32_t)i)); break;
    case PMI_LOOP_EVEN_NEW: PMI_SD_STATIC(pmi_loop_even_new(&a, (uint32_t)i)); break;
    case PMI_LOOP_RED_LAST2: PMI_SD_STATIC(pmi_loop_red_last2(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_OLD: PMI_SD_DYNAMIC(pmi_loop_normal_old(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_NEW: PMI_SD_STATIC(pmi_loop_normal_new(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_PATCH: PMI_SD_STATIC(pmi_loop_normal_patch(&a, (uint32_t)i)); break;
    case PMI_LOOP_SPLIT: PMI_SD_STATIC(pmi_loop_split(&a, (uint32_t)i)); break;
    case PMI_LOOP_CLASSIFY: PMI_SD_STATIC(pmi_loop_classify(&a, (uint32_t)i)); break;
    case PMI_LOOP_ODD: PMI_SD_STATIC(pmi_loop_odd(&a, (uint32_t)i)); break;
    case PMI_LOOP_COPY_U32: PMI_SD_STATIC(a.dst[i] = a.src[i]); break;
    case PMI_LOOP_ZERO_U32: PMI_SD_STATIC(a.dst[i] = 0); break;
    case PMI_LOOP_PROMOTE:
        /* passes until one changes no edge */
        do {
            *a.changed = 0;
            PMI_SD_DYNAMIC(pmi_loop_step(PMI_LOOP_PROMOTE_PASS, (uint32_t)i, &a));
        } while (*a.changed);
        break;
    default:
        /* Walks and sorts vary in cost per element: dynamic chunks. */
        PMI_SD_DYNAMIC(pmi_loop_step(step, (uint32_t)i, &a));
        break;
    }
    return PM_STATUS_OK;
}
