/* Contexts: choosing a device, resolving the descriptor (struct_size keeps
 * older callers working), and the memory functions of the context's space. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* PYRAMESH_DEVICE overrides an AUTO request; a value other than cpu, cuda,
 * auto (or empty) is an error, not a silent "auto". */
static pm_status device_from_env(pm_device requested, pm_device *out)
{
    const char *e = getenv("PYRAMESH_DEVICE");
    *out = requested;
    if (requested != PM_DEVICE_AUTO || !e || !*e || strcmp(e, "auto") == 0) return PM_STATUS_OK;
    if (strcmp(e, "cpu") == 0)
        *out = PM_DEVICE_CPU;
    else if (strcmp(e, "cuda") == 0)
        *out = PM_DEVICE_CUDA;
    else
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "PYRAMESH_DEVICE=\"%s\": expected cpu, cuda or auto", e);
    return PM_STATUS_OK;
}

int pm_cuda_available(void) { return pmi_cuda_backend() != NULL && pmi_cuda_device_count() > 0; }

int pm_cuda_device_count(void) { return pmi_cuda_backend() != NULL ? pmi_cuda_device_count() : 0; }

pm_status pm_context_create(const pm_context_desc *desc_in, pm_context **out)
{
    pmi_clear_error();
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_context_create: out is NULL");
    *out = NULL;
    /* Copy only the fields the caller's struct has. */
    pm_context_desc desc;
    memset(&desc, 0, sizeof desc);
    if (desc_in) {
        size_t sz = desc_in->struct_size ? desc_in->struct_size : sizeof desc;
        if (sz > sizeof desc) sz = sizeof desc;
        if (sz < offsetof(pm_context_desc, cuda_stream))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_context_create: struct_size %zu is too small", sz);
        memcpy(&desc, desc_in, sz);
    }
    if (desc.device != PM_DEVICE_AUTO && desc.device != PM_DEVICE_CPU &&
        desc.device != PM_DEVICE_CUDA)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_context_create: unknown device %d",
                         (int)desc.device);
    if (desc.num_threads < 0 || desc.cuda_device < 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_context_create: negative num_threads or cuda_device");

    pm_device dev;
    pm_status es = device_from_env(desc.device, &dev);
    if (es != PM_STATUS_OK) return es;
    const pmi_backend *be = NULL;
    if (dev == PM_DEVICE_CUDA) {
        if (!pm_cuda_available())
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             pmi_cuda_backend() ? "CUDA requested but no usable GPU was found"
                                                : "CUDA requested but this build has no CUDA "
                                                  "backend");
        be = pmi_cuda_backend();
    } else if (dev == PM_DEVICE_AUTO) {
        if (pm_cuda_available() && desc.cuda_device < pmi_cuda_device_count()) {
            be = pmi_cuda_backend();
            dev = PM_DEVICE_CUDA;
        } else {
            be = pmi_cpu_backend();
            dev = PM_DEVICE_CPU;
        }
    } else {
        be = pmi_cpu_backend();
    }

    pm_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_context_create: out of memory");
    ctx->device = dev;
    ctx->backend = be;
    ctx->cuda_device = desc.cuda_device;
    ctx->cuda_stream = desc.cuda_stream;
    int threads = desc.num_threads;
#ifdef _OPENMP
    if (threads == 0) threads = omp_get_max_threads();
#endif
    ctx->num_threads = threads > 0 ? threads : 1;
    strcpy(ctx->device_name, dev == PM_DEVICE_CPU ? "cpu" : "cuda");
    if (be->init) {
        pm_status s = be->init(ctx);
        if (s == PM_STATUS_UNSUPPORTED && desc.device == PM_DEVICE_AUTO && dev == PM_DEVICE_CUDA) {
            /* A GPU this build cannot run on (no kernel image for its
             * architecture): AUTO takes the CPU and says why. */
            snprintf(ctx->note, sizeof ctx->note, "%s; using the CPU", pm_last_error());
            pmi_clear_error();
            ctx->device = dev = PM_DEVICE_CPU;
            ctx->backend = be = pmi_cpu_backend();
            strcpy(ctx->device_name, "cpu");
            s = be->init ? be->init(ctx) : PM_STATUS_OK;
        }
        if (s != PM_STATUS_OK) {
            free(ctx);
            return s;
        }
    }
    pmi_host_arrays_init(ctx);
    *out = ctx;
    return PM_STATUS_OK;
}

pm_status pmi_context_twin(pm_context *ctx, pm_context **out)
{
    /* Made once, kept with ctx: a frame loop does not create a stream and
     * pinned staging buffers per call. */
    if (!ctx->twin) {
        pm_context_desc d;
        memset(&d, 0, sizeof d);
        d.struct_size = sizeof d;
        d.device = ctx->device;
        d.cuda_device = ctx->cuda_device;
        d.num_threads = ctx->num_threads;
        pm_status s = pm_context_create(&d, &ctx->twin);
        if (s != PM_STATUS_OK) {
            ctx->twin = NULL;
            return s;
        }
    }
    *out = ctx->twin;
    return PM_STATUS_OK;
}

pm_status pmi_context_workers(pm_context *const *ctxs, int n, int per_gpu, pm_context ***out,
                              int *count)
{
    if (per_gpu < 1) per_gpu = 1;
    pm_context **w = calloc((size_t)n * (size_t)per_gpu + 1, sizeof *w);
    if (!w) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "no memory for %d worker contexts", n);
    int k = 0;
    pm_status st = PM_STATUS_OK;
    for (int i = 0; i < n && st == PM_STATUS_OK; i++) {
        w[k++] = ctxs[i];
        for (int t = 1; t < per_gpu && ctxs[i]->backend->free_bytes && st == PM_STATUS_OK; t++)
            if ((st = pmi_context_twin(w[k - 1], &w[k])) == PM_STATUS_OK) k++;
    }
    if (st != PM_STATUS_OK) {
        free(w);
        return st;
    }
    *out = w;
    *count = k;
    return PM_STATUS_OK;
}

pm_status pmi_contexts_check(const char *fn, pm_context *const *ctxs, int count, int same_backend)
{
    if (!ctxs || count < 1) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no contexts", fn);
    for (int i = 0; i < count; i++) {
        if (!ctxs[i]) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: context %d is NULL", fn, i);
        for (int j = 0; j < i; j++)
            if (ctxs[j] == ctxs[i])
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "%s: context %d is given twice (one host thread per context)", fn,
                                 i);
        if (same_backend && ctxs[i]->backend != ctxs[0]->backend)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: context %d is %s, context 0 %s: one kind of device per call", fn,
                             i, ctxs[i]->backend->name, ctxs[0]->backend->name);
    }
    return PM_STATUS_OK;
}

void pm_context_destroy(pm_context *ctx)
{
    if (!ctx) return;
    pm_context_destroy(ctx->twin);
    if (ctx->backend->shutdown) ctx->backend->shutdown(ctx);
    pmi_host_arrays_release(ctx);
    free(ctx);
}

pm_device pm_context_device(const pm_context *ctx) { return ctx ? ctx->device : PM_DEVICE_AUTO; }

const char *pm_context_device_name(const pm_context *ctx) { return ctx ? ctx->device_name : ""; }

int pm_context_num_threads(const pm_context *ctx) { return ctx ? ctx->num_threads : 1; }

const char *pm_context_note(const pm_context *ctx) { return ctx ? ctx->note : ""; }

const char *pm_build_info(void)
{
#ifdef PM_HAVE_MESHOPTIMIZER
#define PMI_MESHOPT_INFO "; meshoptimizer (pm_mesh_simplify)"
#else
#define PMI_MESHOPT_INFO "; no meshoptimizer (pm_mesh_simplify unsupported)"
#endif
#ifdef PM_HAVE_CUDA
    return "cpu (OpenMP); cuda (" PM_CUDA_ARCH_LIST ")" PMI_MESHOPT_INFO;
#else
    return "cpu (OpenMP); no cuda (built without nvcc)" PMI_MESHOPT_INFO;
#endif
#undef PMI_MESHOPT_INFO
}

pm_status pm_context_synchronize(pm_context *ctx)
{
    if (!ctx) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_context_synchronize: NULL");
    return ctx->backend->synchronize ? ctx->backend->synchronize(ctx) : PM_STATUS_OK;
}

pm_status pm_alloc(pm_context *ctx, size_t bytes, void **out)
{
    if (!ctx || !out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_alloc: NULL argument");
    *out = NULL;
    return ctx->backend->alloc(ctx, bytes, out);
}

void pm_free(pm_context *ctx, void *p)
{
    if (ctx && p) ctx->backend->free(ctx, p);
}

pm_status pm_upload(pm_context *ctx, void *dst, const void *src_host, size_t bytes)
{
    if (!ctx || ((!dst || !src_host) && bytes))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_upload: NULL argument");
    if (!bytes) return PM_STATUS_OK;
    return ctx->backend->upload(ctx, dst, src_host, bytes);
}

pm_status pm_download(pm_context *ctx, void *dst_host, const void *src, size_t bytes)
{
    if (!ctx || ((!dst_host || !src) && bytes))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_download: NULL argument");
    if (!bytes) return PM_STATUS_OK;
    return ctx->backend->download(ctx, dst_host, src, bytes);
}
