/* Large host-to-host copies with threads: the CUDA backend stages copies
 * between pageable host memory and the device through pinned buffers, and
 * one core's memcpy (about 10 GB/s) would cap that pipeline below the
 * DMA's speed. */
#include <omp.h>
#include <string.h>

#include "core/backend.h"
#include "core/util.h"

void pmi_memcpy_threads(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return; /* src and dst may be NULL then */
    int nt = omp_get_max_threads();
    if (nt > 8) nt = 8; /* memory bandwidth, not cores, is the limit past that */
    if (bytes < ((size_t)1 << 20) || nt < 2) {
        memcpy(dst, src, bytes);
        return;
    }
    const size_t part = ((bytes + (size_t)nt - 1) / (size_t)nt + 4095) & ~(size_t)4095;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) {
        const size_t a = (size_t)t * part;
        if (a < bytes)
            memcpy((char *)dst + a, (const char *)src + a, bytes - a < part ? bytes - a : part);
    }
}

pm_status pmi_place(pm_context *ctx, int device, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return PM_STATUS_OK;
    if (device) return ctx->backend->upload(ctx, dst, src, bytes);
    pmi_memcpy_threads(dst, src, bytes);
    return PM_STATUS_OK;
}
