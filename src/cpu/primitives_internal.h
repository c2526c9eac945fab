/* Internals shared by the CPU primitives (scan.c, filter.c, compact.c,
 * histopyramid.c): the fixed chunking used by the blocked two-pass scans and
 * the HistoPyramid paths of compaction and expansion, exposed so tests and
 * benchmarks can run both paths side by side. Internal header. */
#ifndef PM_CPU_PRIMITIVES_INTERNAL_H
#define PM_CPU_PRIMITIVES_INTERNAL_H

#include "cpu/cpu.h"

/* Elements per chunk of the blocked scans: large enough that the per-chunk
 * bookkeeping is noise, small enough that a chunk's second pass still finds
 * it in cache (64 Ki elements = 256 KiB of floats). */
#define PMI_CPU_CHUNK ((size_t)1 << 16)

/* Number of chunks of PMI_CPU_CHUNK elements covering n (n > 0). */
static inline size_t pmi_cpu_num_chunks(size_t n) { return (n - 1) / PMI_CPU_CHUNK + 1; }

/* One past the last element of chunk c. */
static inline size_t pmi_cpu_chunk_end(size_t c, size_t n)
{
    size_t e = (c + 1) * PMI_CPU_CHUNK;
    return e < n ? e : n;
}

/* Exclusive scan of the chunk totals in place (the serial middle step of
 * every blocked two-pass scan); returns 0 when the 64-bit running total
 * overflows. */
static inline int pmi_cpu_scan_chunks(uint64_t *offs, size_t nchunks, uint64_t *total)
{
    uint64_t run = 0;
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t k = offs[c];
        offs[c] = run;
        if (__builtin_add_overflow(run, k, &run)) return 0;
    }
    *total = run;
    return 1;
}

/* pm_compact and pm_expand computed through a HistoPyramid (build, then one
 * traversal per output key) instead of the blocked scan. Same contract and
 * the same outputs as pmi_cpu_compact / pmi_cpu_expand. */
pm_status pmi_cpu_compact_histopyramid(pm_context *ctx, const uint8_t *flags, size_t n,
                                       uint64_t *out_index, size_t capacity, size_t *count);
pm_status pmi_cpu_expand_histopyramid(pm_context *ctx, const uint32_t *counts, size_t n,
                                      uint64_t *out_source, uint32_t *out_local, size_t capacity,
                                      size_t *count);

/* Builds a pyramid whose base is n 0/1 flags (nonzero byte = 1). */
pm_status pmi_cpu_histopyramid_build_flags(pm_context *ctx, const uint8_t *flags, size_t n,
                                           pm_histopyramid **out);

#endif
