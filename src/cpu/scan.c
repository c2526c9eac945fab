/* Exclusive prefix sum of u32, as the classic blocked two-pass parallel
 * scan: chunk totals, a serial scan of the totals, then each chunk rescans
 * itself from its offset. */
#include <stdlib.h>

#include "core/util.h"
#include "cpu/primitives_internal.h"

pm_status pmi_cpu_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                     uint64_t *total)
{
    size_t nchunks = pmi_cpu_num_chunks(n);
    uint64_t *offs = malloc(nchunks * sizeof *offs);
    if (!offs)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "scan: cannot allocate %zu chunk sums", nchunks);
    int nt = ctx->num_threads;

    /* Pass 1: chunk totals in 64 bits, so the total is exact even when it
     * overflows 32 bits. */
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        size_t b = c * PMI_CPU_CHUNK, e = pmi_cpu_chunk_end(c, n);
        uint64_t s = 0;
        for (size_t i = b; i < e; i++)
            s += in[i];
        offs[c] = s;
    }
    uint64_t run = 0; /* at most n * (2^32 - 1): cannot overflow 64 bits */
    pmi_cpu_scan_chunks(offs, nchunks, &run);
    if (total) *total = run;
    /* Every prefix is at most the total, so one comparison covers them all. */
    if (run > UINT32_MAX) {
        free(offs);
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_scan_exclusive_u32: total %llu does not fit 32 bits",
                         (unsigned long long)run);
    }

    /* Pass 2: in[i] is read before out[i] is written, so out may alias in. */
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        size_t b = c * PMI_CPU_CHUNK, e = pmi_cpu_chunk_end(c, n);
        uint32_t s = (uint32_t)offs[c];
        for (size_t i = b; i < e; i++) {
            uint32_t v = in[i];
            out[i] = s;
            s += v;
        }
    }
    free(offs);
    return PM_STATUS_OK;
}
