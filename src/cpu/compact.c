/* Order-preserving stream compaction and expansion. Two paths with one
 * contract: a blocked two-pass scan (the default on a CPU, where a
 * sequential pass per chunk is cheapest) and the HistoPyramid
 * (Ziegler et al. 2006; Dyken et al. 2008): build, then traverse one key per
 * output, as a GPU does it. */
#include <stdlib.h>

#include "core/util.h"
#include "cpu/primitives_internal.h"

pm_status pmi_cpu_compact(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                          size_t capacity, size_t *count)
{
    size_t nchunks = pmi_cpu_num_chunks(n);
    uint64_t *offs = malloc(nchunks * sizeof *offs);
    if (!offs)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "compact: cannot allocate %zu chunk counts",
                         nchunks);
    int nt = ctx->num_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t k = 0;
        for (size_t i = c * PMI_CPU_CHUNK, e = pmi_cpu_chunk_end(c, n); i < e; i++)
            k += flags[i] != 0;
        offs[c] = k;
    }
    uint64_t total;
    pmi_cpu_scan_chunks(offs, nchunks, &total); /* total <= n: cannot overflow */
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t pos = offs[c];
        uint64_t stop = c + 1 < nchunks ? offs[c + 1] : total;
        if (stop > capacity) stop = capacity;
        /* Branch-free stores that never leave [offs[c], stop): see filter.c. */
        for (size_t i = c * PMI_CPU_CHUNK; pos < stop; i++) {
            out_index[pos] = i;
            pos += flags[i] != 0;
        }
    }
    free(offs);
    *count = (size_t)total;
    return total > capacity ? PM_STATUS_TRUNCATED : PM_STATUS_OK;
}

pm_status pmi_cpu_expand(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                         uint32_t *out_local, size_t capacity, size_t *count)
{
    size_t nchunks = pmi_cpu_num_chunks(n);
    uint64_t *offs = malloc(nchunks * sizeof *offs);
    if (!offs)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "expand: cannot allocate %zu chunk counts",
                         nchunks);
    int nt = ctx->num_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t k = 0;
        for (size_t i = c * PMI_CPU_CHUNK, e = pmi_cpu_chunk_end(c, n); i < e; i++)
            k += counts[i];
        offs[c] = k;
    }
    uint64_t total;
    if (!pmi_cpu_scan_chunks(offs, nchunks, &total) || total > SIZE_MAX) {
        free(offs);
        return pmi_error(PM_STATUS_OVERFLOW, "pm_expand: the number of outputs overflows");
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t pos = offs[c];
        uint64_t stop = c + 1 < nchunks ? offs[c + 1] : total;
        if (stop > capacity) stop = capacity;
        /* Stop at the capacity: a huge count must not cost a loop over
         * outputs that are never written. */
        for (size_t i = c * PMI_CPU_CHUNK; pos < stop; i++) {
            uint64_t k = counts[i];
            if (k > stop - pos) k = stop - pos;
            if (out_source)
                for (uint64_t j = 0; j < k; j++)
                    out_source[pos + j] = i;
            if (out_local)
                for (uint64_t j = 0; j < k; j++)
                    out_local[pos + j] = (uint32_t)j;
            pos += k;
        }
    }
    free(offs);
    *count = (size_t)total;
    return total > capacity ? PM_STATUS_TRUNCATED : PM_STATUS_OK;
}

/* HistoPyramid paths: build, read the total, traverse the first
 * min(total, capacity) keys. */
static pm_status traverse_all(pm_context *ctx, pm_histopyramid *hp, uint64_t *out_source,
                              uint32_t *out_local, size_t capacity, size_t *count)
{
    uint64_t total = 0;
    pm_status s = pmi_cpu_histopyramid_total(ctx, hp, &total);
    if (s == PM_STATUS_OK && total > SIZE_MAX)
        s = pmi_error(PM_STATUS_OVERFLOW, "expand: the number of outputs overflows");
    if (s == PM_STATUS_OK) {
        uint64_t m = total < capacity ? total : capacity;
        if (m) s = pmi_cpu_histopyramid_traverse(ctx, hp, 0, (size_t)m, out_source, out_local);
    }
    pmi_cpu_histopyramid_destroy(ctx, hp);
    if (s != PM_STATUS_OK) return s;
    *count = (size_t)total;
    return total > capacity ? PM_STATUS_TRUNCATED : PM_STATUS_OK;
}

pm_status pmi_cpu_compact_histopyramid(pm_context *ctx, const uint8_t *flags, size_t n,
                                       uint64_t *out_index, size_t capacity, size_t *count)
{
    pm_histopyramid *hp = NULL;
    pm_status s = pmi_cpu_histopyramid_build_flags(ctx, flags, n, &hp);
    if (s != PM_STATUS_OK) return s;
    return traverse_all(ctx, hp, out_index, NULL, capacity, count);
}

pm_status pmi_cpu_expand_histopyramid(pm_context *ctx, const uint32_t *counts, size_t n,
                                      uint64_t *out_source, uint32_t *out_local, size_t capacity,
                                      size_t *count)
{
    pm_histopyramid *hp = NULL;
    pm_status s = pmi_cpu_histopyramid_build(ctx, counts, n, &hp);
    if (s != PM_STATUS_OK) return s;
    return traverse_all(ctx, hp, out_source, out_local, capacity, count);
}
