/* Copies into output arrays much larger than the caches with non-temporal
 * (streaming) stores: the lines go to memory without being read first, so
 * writing a mesh of gigabytes moves its bytes once instead of twice.
 * Internal header. */
#ifndef PM_CPU_STREAM_STORE_H
#define PM_CPU_STREAM_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define PMI_STREAM_STORES 1
#else
#define PMI_STREAM_STORES 0
#endif

/* Outputs of at least this many bytes are written with streaming stores;
 * smaller ones stay in the caches for the caller, who reads them next. */
#define PMI_STREAM_MIN_BYTES ((uint64_t)64 << 20)

/* Whether a mesh of nvert vertices (positions, and normals if `normals`)
 * and ntri indexed triangles is written with streaming stores. */
static inline int pmi_stream_wanted(uint64_t nvert, uint64_t ntri, int normals)
{
    uint64_t bytes = 12 * nvert * (normals ? 2u : 1u) + 12 * ntri;
    return bytes >= PMI_STREAM_MIN_BYTES;
}

/* n 32-bit words from src to dst (4-byte aligned), streaming: single words
 * up to a 16-byte boundary of dst, then 16 bytes per store, then single
 * words. Without SSE2, memcpy. The caller ends its writes with
 * pmi_stream_fence() before another thread reads them. */
static inline void pmi_stream_copy32(void *dst, const void *src, size_t n)
{
#if PMI_STREAM_STORES
    int *d = (int *)dst;
    const int *s = (const int *)src;
    while (n && ((uintptr_t)d & 15)) {
        _mm_stream_si32(d++, *s++);
        n--;
    }
    for (; n >= 16; n -= 16, d += 16, s += 16)
        for (int q = 0; q < 4; q++) /* unrolled: a line's 4 stores, one loop test */
            _mm_stream_si128((__m128i *)d + q, _mm_loadu_si128((const __m128i *)s + q));
    for (; n >= 4; n -= 4, d += 4, s += 4)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    while (n--)
        _mm_stream_si32(d++, *s++);
#else
    memcpy(dst, src, 4 * n);
#endif
}

/* Orders this thread's streaming stores before its later stores (and so
 * before the barrier that publishes them). */
static inline void pmi_stream_fence(void)
{
#if PMI_STREAM_STORES
    _mm_sfence();
#endif
}

#endif
