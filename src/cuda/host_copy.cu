/* Copies between the device and pageable host memory through two pinned
 * buffers per context: while the DMA engine moves one chunk, host threads
 * copy the other between the pinned buffer and the caller's memory. A
 * plain cudaMemcpy from pageable memory goes through the driver's own
 * staging, one core and no overlap with our side (bench_cuda_isosurface
 * measures both). Small copies and pinned or managed memory go straight. */
#include <string.h>

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/util.h"
}

#define HC_CHUNK PMI_PIN_CHUNK
#define HC_MIN ((size_t)4 << 20) /* below: one cudaMemcpyAsync */

/* Whether host pointer p is pageable (not pinned, registered or managed). */
static int hc_pageable(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    return a.type == cudaMemoryTypeUnregistered;
}

extern "C" pm_status pmi_cuda_pin_buffers(pmi_cuda_state *st)
{
    for (int i = 0; i < 2; i++) {
        if (!st->pin[i]) {
            PMI_CU_TRY(cudaHostAlloc(&st->pin[i], HC_CHUNK, cudaHostAllocDefault),
                       "pinned staging buffer");
        }
        if (!st->pin_ev[i]) {
            PMI_CU_TRY(cudaEventCreateWithFlags(&st->pin_ev[i], cudaEventDisableTiming),
                       "pinned staging event");
        }
        /* A previous upload's DMA may still read the buffer. */
        if (st->pin_busy[i]) PMI_CU_TRY(cudaEventSynchronize(st->pin_ev[i]), "pinned staging");
        st->pin_busy[i] = 0;
    }
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_copy_host(pm_context *ctx, void *dst, const void *src, size_t bytes,
                                        int to_host, const char *what)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const void *host = to_host ? dst : src;
    if (bytes < HC_MIN || !hc_pageable(host)) {
        PMI_CU_TRY(cudaMemcpyAsync(dst, src, bytes,
                                   to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s),
                   what);
        return PM_STATUS_OK;
    }
    PMI_TRY(pmi_cuda_pin_buffers(st));
    char *d = (char *)dst;
    const char *q = (const char *)src;
    size_t at[2] = {0, 0}, len[2] = {0, 0};
    int i = 0;
    for (size_t off = 0; off < bytes; off += HC_CHUNK, i ^= 1) {
        const size_t n = bytes - off < HC_CHUNK ? bytes - off : HC_CHUNK;
        if (st->pin_busy[i]) {
            /* Chunk i's earlier copy has finished: hand its bytes on
             * (download) or reuse the buffer (upload). */
            PMI_CU_TRY(cudaEventSynchronize(st->pin_ev[i]), what);
            st->pin_busy[i] = 0;
            if (to_host) pmi_memcpy_threads(d + at[i], st->pin[i], len[i]);
        }
        if (to_host) {
            PMI_CU_TRY(cudaMemcpyAsync(st->pin[i], q + off, n, cudaMemcpyDeviceToHost, s), what);
        } else {
            pmi_memcpy_threads(st->pin[i], q + off, n);
            PMI_CU_TRY(cudaMemcpyAsync(d + off, st->pin[i], n, cudaMemcpyHostToDevice, s), what);
        }
        PMI_CU_TRY(cudaEventRecord(st->pin_ev[i], s), what);
        st->pin_busy[i] = 1;
        at[i] = off;
        len[i] = n;
    }
    if (to_host) {
        /* The older chunk first (either order is correct). */
        for (int k = 0; k < 2; k++, i ^= 1) {
            if (!st->pin_busy[i]) continue;
            PMI_CU_TRY(cudaEventSynchronize(st->pin_ev[i]), what);
            st->pin_busy[i] = 0;
            pmi_memcpy_threads(d + at[i], st->pin[i], len[i]);
        }
    }
    /* Uploads: the last DMAs may still run; the stream orders them before
     * any kernel that reads dst, and pmi_cuda_pin_buffers waits before reuse. */
    return PM_STATUS_OK;
}
