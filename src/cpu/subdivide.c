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

/* Red promotion on the CPU: the rule of pmi_loop_promote (an edge splits
 * when a triangle on it has exactly 2 split edges, unless the edge's other
 * side has left the stream), applied along the chain it starts within the
 * same pass: the triangle across a promoted edge may now have exactly 2
 * split edges itself, and its third edge splits at once, and so on. The
 * rule only adds splits, so applying it in any order, in one pass or in
 * many, ends at the same least closure that the rounds of the other
 * backends reach (src/core/subdivide.c repeats passes until none changes
 * an edge); a level whose splits spread along long strips of triangles
 * takes a few passes instead of one per triangle of the strip (591
 * rounds and 1.5 s for a 1e5-triangle surface at max_edge 0.5 x its mean
 * edge, before). Threads share the split flags, so they are read and
 * written atomically; both halves of an edge get the same flags and
 * owner flags (as each would decide by itself). */
static uint32_t sd_split_count(const pmi_loop_args *a, uint32_t t)
{
    uint32_t c = 0;
    for (uint32_t j = 0; j < 3; j++)
        c += __atomic_load_n(a->split + 3 * t + j, __ATOMIC_RELAXED);
    return c;
}

static void sd_split_edge(const pmi_loop_args *a, uint32_t h, uint32_t tw)
{
    __atomic_store_n(a->split + h, (uint8_t)1, __ATOMIC_RELAXED);
    __atomic_store_n(a->owner + h, (uint32_t)(tw == PMI_LOOP_NONE || h < tw), __ATOMIC_RELAXED);
    if (tw == PMI_LOOP_NONE) return;
    __atomic_store_n(a->split + tw, (uint8_t)1, __ATOMIC_RELAXED);
    __atomic_store_n(a->owner + tw, (uint32_t)(h < tw ? 0u : 1u), __ATOMIC_RELAXED);
}

/* From triangle t: while it has exactly 2 split edges and its third can
 * split, split it and go on across it. Each step splits an edge this
 * thread saw unsplit, so the walk ends within the edge count. */
static void sd_promote_from(const pmi_loop_args *a, uint32_t t)
{
    for (uint64_t steps = 0; steps <= 3 * (uint64_t)a->n; steps++) {
        if (sd_split_count(a, t) != 2) return;
        uint32_t h = 3 * t;
        while (h < 3 * t + 3 && __atomic_load_n(a->split + h, __ATOMIC_RELAXED))
            h++;
        if (h == 3 * t + 3) return; /* another thread split the third meanwhile */
        const uint32_t tw = a->twin[h];
        if (tw == PMI_LOOP_FROZEN) return;
        sd_split_edge(a, h, tw);
        __atomic_store_n(a->changed, 1u, __ATOMIC_RELAXED);
        if (tw == PMI_LOOP_NONE) return;
        t = tw / 3;
    }
}

static void sd_promote_chain(const pmi_loop_args *a, uint32_t h)
{
    const uint32_t tw = a->twin[h];
    if (__atomic_load_n(a->split + h, __ATOMIC_RELAXED) || tw == PMI_LOOP_FROZEN) return;
    if (!a->red[h / 3] && !(tw != PMI_LOOP_NONE && a->red[tw / 3])) return;
    sd_split_edge(a, h, tw);
    __atomic_store_n(a->changed, 1u, __ATOMIC_RELAXED);
    sd_promote_from(a, h / 3);
    if (tw != PMI_LOOP_NONE) sd_promote_from(a, tw / 3);
}

pm_status pmi_cpu_subdivide_step(pm_context *ctx, int step, size_t n, const pmi_loop_args *args)
{
    const pmi_loop_args a = *args;
    const int nt = ctx->num_threads;
    const long long count = (long long)n;
    switch (step) {
    case PMI_LOOP_PROMOTE: PMI_SD_DYNAMIC(sd_promote_chain(&a, (uint32_t)i)); break;
    case PMI_LOOP_EVEN_UNIFORM: PMI_SD_DYNAMIC(pmi_loop_even_uniform(&a, (uint32_t)i)); break;
    case PMI_LOOP_RED_UNIFORM: PMI_SD_STATIC(pmi_loop_red_uniform(&a, (uint32_t)i)); break;
    case PMI_LOOP_EVEN_NEW: PMI_SD_STATIC(pmi_loop_even_new(&a, (uint32_t)i)); break;
    case PMI_LOOP_RED_LAST2: PMI_SD_STATIC(pmi_loop_red_last2(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_OLD: PMI_SD_DYNAMIC(pmi_loop_normal_old(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_NEW: PMI_SD_STATIC(pmi_loop_normal_new(&a, (uint32_t)i)); break;
    case PMI_LOOP_NORMAL_PREV: PMI_SD_STATIC(pmi_loop_normal_prev(&a, (uint32_t)i)); break;
    case PMI_LOOP_SPLIT: PMI_SD_STATIC(pmi_loop_split(&a, (uint32_t)i)); break;
    case PMI_LOOP_CLASSIFY: PMI_SD_STATIC(pmi_loop_classify(&a, (uint32_t)i)); break;
    case PMI_LOOP_ODD: PMI_SD_STATIC(pmi_loop_odd(&a, (uint32_t)i)); break;
    case PMI_LOOP_COPY_U32: PMI_SD_STATIC(a.dst[i] = a.src[i]); break;
    case PMI_LOOP_ZERO_U32: PMI_SD_STATIC(a.dst[i] = 0); break;
    default:
        /* Walks and sorts vary in cost per element: dynamic chunks. */
        PMI_SD_DYNAMIC(pmi_loop_step(step, (uint32_t)i, &a));
        break;
    }
    return PM_STATUS_OK;
}
