/* Internal helpers shared by every part of the library: checked size
 * arithmetic, the thread-local error message, timing. */
#ifndef PM_CORE_UTIL_H
#define PM_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"

#if defined(__GNUC__)
#define PMI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PMI_PRINTF(a, b)
#endif

/* Checked arithmetic: return 0 and leave *out untouched on overflow. */
static inline int pmi_mul_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}
static inline int pmi_add_size(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_add_overflow(a, b, &r)) return 0;
    *out = r;
    return 1;
}
static inline int pmi_mul3_size(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;
    return pmi_mul_size(a, b, &ab) && pmi_mul_size(ab, c, out);
}

/* The first index i in a[0..n) (ascending) with a[i] >= key, n if none. */
static inline size_t pmi_lower_bound_u64(const uint64_t *a, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Records a message for pm_last_error() and returns `s` so callers can
 * write `return pmi_error(PM_STATUS_PARSE_ERROR, "%s: ...", path);`. */
pm_status pmi_error(pm_status s, const char *fmt, ...) PMI_PRINTF(2, 3);
/* Clears the thread's message. */
void pmi_clear_error(void);

/* Monotonic wall clock in milliseconds. */
double pmi_now_ms(void);

/* malloc for large arrays: from 1 MiB on, 2 MiB-aligned and advised to
 * use transparent huge pages (a machine with THP on "madvise" otherwise
 * takes a page fault per 4 KiB of a fresh mesh). Free with free(). */
void *pmi_alloc_huge(size_t bytes);

/* memcpy of large host buffers by up to 8 threads (host_copy.c). */
void pmi_memcpy_threads(void *dst, const void *src, size_t bytes);
/* dst (host memory, or context memory of a device context: `device` set)
 * <- src (host memory): an upload, or pmi_memcpy_threads (host_copy.c). */
pm_status pmi_place(pm_context *ctx, int device, void *dst, const void *src, size_t bytes);

/* Physical memory of the machine in bytes (0 if unknown). */
uint64_t pmi_total_ram_bytes(void);

#endif
