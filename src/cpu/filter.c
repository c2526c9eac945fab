/* Order-preserving filtering of floats. The fast path is a blocked two-pass
 * scan (count per chunk, then write from the chunk's offset); the reference
 * path is Horn's method (GPU Gems 2, ch. 36, 2005): a Hillis-Steele scan
 * of the keep flags in log2 n steps, then a binary search and gather per
 * output. */
#include <stdlib.h>

#include "core/util.h"
#include "cpu/primitives_internal.h"

/* A comparison with NaN (on either side) is false, so NaN never passes. */
static inline int keep(float x, pm_compare cmp, float t)
{
    switch (cmp) {
    case PM_LESS: return x < t;
    case PM_LESS_EQUAL: return x <= t;
    case PM_GREATER: return x > t;
    default: return x >= t;
    }
}

pm_status pmi_cpu_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                             float threshold, float *out, size_t capacity, size_t *count)
{
    size_t nchunks = pmi_cpu_num_chunks(n);
    uint64_t *offs = malloc(nchunks * sizeof *offs);
    if (!offs)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "filter: cannot allocate %zu chunk counts",
                         nchunks);
    int nt = ctx->num_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        uint64_t k = 0;
        for (size_t i = c * PMI_CPU_CHUNK, e = pmi_cpu_chunk_end(c, n); i < e; i++)
            k += (uint64_t)keep(in[i], cmp, threshold);
        offs[c] = k;
    }
    uint64_t run = 0;
    pmi_cpu_scan_chunks(offs, nchunks, &run); /* run <= n: cannot overflow */
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t c = 0; c < nchunks; c++) {
        size_t pos = offs[c];
        size_t stop = c + 1 < nchunks ? offs[c + 1] : run;
        if (stop > capacity) stop = capacity;
        /* Branch-free: every element is stored at pos and pos advances only
         * when it is kept. The loop ends as soon as the chunk's last kept
         * element is written, so no store lands outside [offs[c], stop),
         * the part of out this chunk owns. */
        for (size_t i = c * PMI_CPU_CHUNK; pos < stop; i++) {
            float x = in[i];
            out[pos] = x;
            pos += (size_t)keep(x, cmp, threshold);
        }
    }
    free(offs);
    *count = run;
    return run > capacity ? PM_STATUS_TRUNCATED : PM_STATUS_OK;
}

/* Horn's filter, with the running count type T (uint32_t when n fits,
 * else uint64_t). A: inclusive running count of kept elements, built by
 * Hillis-Steele: step d adds the value d to the left, ping-ponging between
 * two buffers, log2 n steps of n additions each. Output k then binary-
 * searches the smallest i with A[i] > k (A is non-decreasing) and gathers
 * in[i]. */
/* clang-format off */
#define DEFINE_HORN(NAME, T)                                                                   \
    static pm_status NAME(pm_context *ctx, const float *in, size_t n, pm_compare cmp,         \
                          float threshold, float *out, size_t capacity, size_t *count)        \
    {                                                                                          \
        size_t bytes;                                                                          \
        if (!pmi_mul_size(n, 2 * sizeof(T), &bytes))                                           \
            return pmi_error(PM_STATUS_OVERFLOW, "filter_horn: %zu elements overflow", n);    \
        T *a = malloc(bytes);                                                                  \
        if (!a)                                                                                \
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "filter_horn: cannot allocate %zu bytes", \
                             bytes);                                                           \
        T *b = a + n;                                                                          \
        int nt = ctx->num_threads;                                                             \
        _Pragma("omp parallel for num_threads(nt) schedule(static)")                           \
        for (size_t i = 0; i < n; i++) a[i] = (T)keep(in[i], cmp, threshold);                 \
        for (size_t d = 1; d < n; d *= 2) {                                                    \
            _Pragma("omp parallel for num_threads(nt) schedule(static)")                       \
            for (size_t i = 0; i < n; i++) b[i] = i >= d ? a[i] + a[i - d] : a[i];             \
            T *t = a;                                                                          \
            a = b;                                                                             \
            b = t;                                                                             \
        }                                                                                      \
        size_t total = (size_t)a[n - 1];                                                       \
        size_t m = total < capacity ? total : capacity;                                        \
        _Pragma("omp parallel for num_threads(nt) schedule(static)")                           \
        for (size_t k = 0; k < m; k++) {                                                       \
            size_t lo = 0, hi = n - 1; /* A[hi] = total > k */                                 \
            while (lo < hi) {                                                                  \
                size_t mid = lo + (hi - lo) / 2;                                               \
                if ((size_t)a[mid] > k)                                                        \
                    hi = mid;                                                                  \
                else                                                                           \
                    lo = mid + 1;                                                              \
            }                                                                                  \
            out[k] = in[lo];                                                                   \
        }                                                                                      \
        free(a < b ? a : b); /* the allocation starts at the lower buffer */                   \
        *count = total;                                                                        \
        return total > capacity ? PM_STATUS_TRUNCATED : PM_STATUS_OK;                          \
    }

/* clang-format on */

DEFINE_HORN(horn_u32, uint32_t)
DEFINE_HORN(horn_u64, uint64_t)

pm_status pmi_cpu_filter_horn_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                  float threshold, float *out, size_t capacity, size_t *count)
{
    if (n <= UINT32_MAX) return horn_u32(ctx, in, n, cmp, threshold, out, capacity, count);
    return horn_u64(ctx, in, n, cmp, threshold, out, capacity, count);
}
