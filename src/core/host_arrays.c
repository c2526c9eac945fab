/* Recycled host arrays of a context. A loop that extracts a mesh per frame
 * and frees the last one (pm_mesh_free) would otherwise get fresh memory
 * for every mesh: the system maps and zeroes every page of it again (a
 * 256^3 mesh of 7.4 MB cost 2 ms of page faults per call, a quarter of
 * the extraction). pm_mesh_free gives arrays of PMI_HOST_ARRAY_MIN bytes
 * and more to the context instead, which keeps the newest few (up to
 * PMI_HOST_ARRAYS arrays and a byte budget) and hands them out again to
 * the next mesh of about the same size. The arrays stay ordinary malloc
 * memory: one the caller free()s instead, or never gives back, is fine.
 * pm_context_destroy frees what is held. Only where the C library can
 * tell an array's size (glibc's malloc_usable_size); elsewhere every array
 * is freed as before. */
#include <pthread.h>
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#define PMI_HOST_ARRAY_SIZE(p) malloc_usable_size(p)
#endif

#include "core/backend.h"
#include "core/util.h"

#define PMI_HOST_ARRAYS 16
#define PMI_HOST_ARRAY_MIN ((size_t)1 << 20)
#define PMI_HOST_ARRAYS_MAX_BYTES ((size_t)512 << 20)

struct pmi_host_arrays {
    pthread_mutex_t mu;
    void *p[PMI_HOST_ARRAYS]; /* oldest first */
    size_t size[PMI_HOST_ARRAYS];
    size_t n, bytes, budget;
};

void pmi_host_arrays_init(pm_context *ctx)
{
#ifdef PMI_HOST_ARRAY_SIZE
    pmi_host_arrays *H = calloc(1, sizeof *H);
    if (!H) return; /* no recycling: every array is freed */
    if (pthread_mutex_init(&H->mu, NULL) != 0) {
        free(H);
        return;
    }
    /* At most 1/16 of the machine's memory. */
    uint64_t ram = pmi_total_ram_bytes();
    H->budget = ram && ram / 16 < PMI_HOST_ARRAYS_MAX_BYTES ? (size_t)(ram / 16)
                                                            : PMI_HOST_ARRAYS_MAX_BYTES;
    ctx->host_arrays = H;
#else
    (void)ctx;
#endif
}

void pmi_host_arrays_release(pm_context *ctx)
{
    pmi_host_arrays *H = ctx->host_arrays;
    if (!H) return;
    for (size_t i = 0; i < H->n; i++)
        free(H->p[i]);
    pthread_mutex_destroy(&H->mu);
    free(H);
    ctx->host_arrays = NULL;
}

static void take(pmi_host_arrays *H, size_t i)
{
    H->bytes -= H->size[i];
    for (size_t j = i + 1; j < H->n; j++) {
        H->p[j - 1] = H->p[j];
        H->size[j - 1] = H->size[j];
    }
    H->n--;
}

void *pmi_host_array_get(pm_context *ctx, size_t bytes)
{
    pmi_host_arrays *H = ctx ? ctx->host_arrays : NULL;
    void *p = NULL;
    if (H && bytes >= PMI_HOST_ARRAY_MIN) {
        pthread_mutex_lock(&H->mu);
        /* The smallest that fits, and not more than twice the request
         * (plus a huge page): a big array is kept for a big mesh. */
        size_t best = H->n;
        for (size_t i = 0; i < H->n; i++)
            if (H->size[i] >= bytes && H->size[i] - bytes <= bytes + ((size_t)2 << 20) &&
                (best == H->n || H->size[i] < H->size[best]))
                best = i;
        if (best < H->n) {
            p = H->p[best];
            take(H, best);
        }
        pthread_mutex_unlock(&H->mu);
    }
    return p ? p : pmi_alloc_huge(bytes);
}

void pmi_host_array_put(pm_context *ctx, void *p)
{
    pmi_host_arrays *H = ctx ? ctx->host_arrays : NULL;
    if (!p) return;
#ifdef PMI_HOST_ARRAY_SIZE
    size_t size = H ? PMI_HOST_ARRAY_SIZE(p) : 0;
    if (H && size >= PMI_HOST_ARRAY_MIN && size <= H->budget) {
        void *evicted[PMI_HOST_ARRAYS];
        size_t ne = 0;
        pthread_mutex_lock(&H->mu);
        while (H->n && (H->n == PMI_HOST_ARRAYS || H->bytes + size > H->budget)) {
            evicted[ne++] = H->p[0];
            take(H, 0);
        }
        H->p[H->n] = p;
        H->size[H->n++] = size;
        H->bytes += size;
        pthread_mutex_unlock(&H->mu);
        for (size_t i = 0; i < ne; i++)
            free(evicted[i]);
        return;
    }
#endif
    free(p);
}
