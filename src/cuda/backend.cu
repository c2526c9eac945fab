/* The CUDA backend table: context set-up (device index, the caller's stream
 * or an own one), device memory, a scratch arena reused across calls, and a
 * few mapped pinned host words that kernels write host results into. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_mc.h"

pm_status pmi_cuda_status(cudaError_t e, const char *what)
{
    cudaGetLastError(); /* clear non-sticky errors so the next call starts clean */
    if (e == cudaErrorMemoryAllocation)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of device memory (%s)", what,
                         cudaGetErrorString(e));
    return pmi_error(PM_STATUS_DEVICE_ERROR, "%s: CUDA error %d: %s", what, (int)e,
                     cudaGetErrorString(e));
}

pm_status pmi_cuda_begin(pm_context *ctx)
{
    PMI_CU_TRY(cudaSetDevice(pmi_cuda(ctx)->device), "cudaSetDevice");
    return PM_STATUS_OK;
}

pm_status pmi_cuda_launched(const char *what)
{
    PMI_CU_TRY(cudaGetLastError(), what);
    return PM_STATUS_OK;
}

pm_status pmi_cuda_wait(pm_context *ctx, const char *what)
{
    PMI_CU_TRY(cudaStreamSynchronize(pmi_cuda(ctx)->stream), what);
    return PM_STATUS_OK;
}

pm_status pmi_cuda_host_count(pm_context *ctx, size_t capacity, size_t *count, const char *fn)
{
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    unsigned long long c = pmi_cuda(ctx)->host[PMI_HOST_RESULT];
    *count = (size_t)c;
    if (c > capacity)
        return pmi_error(PM_STATUS_TRUNCATED, "%s: %llu outputs, capacity %zu", fn, c, capacity);
    return PM_STATUS_OK;
}

pm_status pmi_cuda_scratch(pm_context *ctx, size_t bytes, void **out)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (bytes > st->arena_bytes) {
        /* Grow to at least 1 MiB and by at least half, so a series of slowly
         * growing calls does not reallocate every time. */
        size_t want = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes;
        if (want < st->arena_bytes + st->arena_bytes / 2)
            want = st->arena_bytes + st->arena_bytes / 2;
        if (st->arena) cudaFree(st->arena); /* waits for queued work using it */
        st->arena = NULL;
        st->arena_bytes = 0;
        cudaError_t e = cudaMalloc(&st->arena, want);
        if (e != cudaSuccess && want > bytes) {
            cudaGetLastError();
            want = bytes;
            e = cudaMalloc(&st->arena, want);
        }
        if (e != cudaSuccess) {
            cudaGetLastError();
            st->arena = NULL;
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "CUDA scratch: cannot allocate %zu bytes of device memory", bytes);
        }
        st->arena_bytes = want;
    }
    *out = st->arena;
    return PM_STATUS_OK;
}

/* Frees the mesh arrays kept for reuse (cuda_mesh_array_free). */
static void cuda_release_kept(pmi_cuda_state *st)
{
    for (unsigned i = 0; i < st->nkept; i++)
        cudaFree(st->kept[i].p);
    st->nkept = 0;
    st->kept_bytes = 0;
    cudaGetLastError();
}

static void cuda_shutdown(pm_context *ctx)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (!st) return;
    pmi_cuda_preload_stop(st);
    cudaSetDevice(st->device);
    if (st->stream) cudaStreamSynchronize(st->stream);
    pmi_isosurface_graph_free(st);
    if (st->arena) cudaFree(st->arena);
    if (st->win_out) cudaFree(st->win_out);
    if (st->md_buf) cudaFree(st->md_buf);
    if (st->ticket_d) cudaFree(st->ticket_d);
    if (st->host) cudaFreeHost(st->host);
    for (int i = 0; i < 2; i++) {
        if (st->pin[i]) cudaFreeHost(st->pin[i]);
        if (st->pin_ev[i]) cudaEventDestroy(st->pin_ev[i]);
    }
    if (st->pool) cudaMemPoolDestroy(st->pool);
    cuda_release_kept(st);
    if (st->own_stream && st->stream) cudaStreamDestroy(st->stream);
    cudaGetLastError();
    free(st);
    ctx->backend_state = NULL;
}

/* An empty kernel: whether the running GPU has a kernel image of this
 * build (cudaFuncGetAttributes fails when none of the compiled
 * architectures, nor the PTX, runs on it). */
static __global__ void cuda_probe_kernel(void) {}

static pm_status cuda_init(pm_context *ctx)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    cudaGetLastError();
    if (ctx->cuda_device >= count)
        return pmi_error(PM_STATUS_UNSUPPORTED, "CUDA device %d requested but %d present",
                         ctx->cuda_device, count);
    pmi_cuda_state *st = (pmi_cuda_state *)calloc(1, sizeof *st);
    if (!st) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "CUDA context: out of host memory");
    ctx->backend_state = st;
    st->device = ctx->cuda_device;
    pm_status s = PM_STATUS_OK;
    cudaDeviceProp prop;
    cudaError_t e = cudaSetDevice(st->device);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, st->device);
    if (e != cudaSuccess) {
        s = pmi_cuda_status(e, "CUDA context: device set-up");
        goto fail;
    }
    cudaFuncAttributes fa;
    {
        e = cudaFuncGetAttributes(&fa, cuda_probe_kernel);
        if (e != cudaSuccess) {
            cudaGetLastError();
            s = pmi_error(
                PM_STATUS_UNSUPPORTED,
                "GPU cuda:%d %.100s (compute capability %d.%d) has no kernel image in this build "
                "(built for " PM_CUDA_ARCH_LIST ")",
                st->device, prop.name, prop.major, prop.minor);
            goto fail;
        }
    }
    st->num_sms = prop.multiProcessorCount;
    /* pmi_launch: devices of compute capability 9.0 and later running
     * kernels compiled for 9.0 or later, which have the wait of
     * pmi_pdl_enter (a build for older architectures only runs there from
     * their PTX, without it; every kernel has the probe's architectures) */
    st->pdl = prop.major >= 9 && fa.ptxVersion >= 90;
    snprintf(ctx->device_name, sizeof ctx->device_name, "cuda:%d %.100s", st->device, prop.name);
    if (ctx->cuda_stream) {
        st->stream = (cudaStream_t)ctx->cuda_stream;
    } else {
        e = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            s = pmi_cuda_status(e, "CUDA context: stream creation");
            goto fail;
        }
        st->own_stream = 1;
    }
    e = cudaHostAlloc((void **)&st->host, PMI_HOST_SLOTS * sizeof(unsigned long long),
                      cudaHostAllocMapped);
    if (e == cudaSuccess) e = cudaHostGetDevicePointer((void **)&st->host_d, st->host, 0);
    if (e == cudaSuccess) e = cudaMalloc((void **)&st->ticket_d, 256);
    if (e == cudaSuccess) e = cudaMemset(st->ticket_d, 0, 256);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        s = pmi_cuda_status(e, "CUDA context: pinned/ticket memory");
        goto fail;
    }
    pmi_cuda_preload_start(st);
    return PM_STATUS_OK;
fail:
    cuda_shutdown(ctx);
    return s;
}

static pm_status cuda_synchronize(pm_context *ctx)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    return pmi_cuda_wait(ctx, "pm_context_synchronize");
}

/* Gives back what the context holds unused: the scratch pool's free
 * memory (after the stream's work, which may still use it) and the kept
 * mesh arrays. */
static void cuda_release_unused(pmi_cuda_state *st)
{
    if (st->pool) {
        cudaStreamSynchronize(st->stream);
        cudaMemPoolTrimTo(st->pool, 0);
    }
    cuda_release_kept(st);
}

/* cudaMalloc, or from `pool` on the context's stream; when the device is
 * out of memory, what the context holds unused is given back and the
 * allocation tried once more. */
static pm_status cuda_alloc_in(pm_context *ctx, cudaMemPool_t pool, size_t bytes, void **out,
                               const char *what)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    const size_t b = bytes ? bytes : 1;
    void *p = NULL;
    cudaError_t e = pool ? cudaMallocFromPoolAsync(&p, b, pool, st->stream) : cudaMalloc(&p, b);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        cuda_release_unused(st);
        e = pool ? cudaMallocFromPoolAsync(&p, b, pool, st->stream) : cudaMalloc(&p, b);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY
                                                        : PM_STATUS_DEVICE_ERROR,
                         "%s: cannot allocate %zu bytes of device memory (%s)", what, bytes,
                         cudaGetErrorString(e));
    }
    *out = p;
    return PM_STATUS_OK;
}

static pm_status cuda_alloc(pm_context *ctx, size_t bytes, void **out)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    return cuda_alloc_in(ctx, NULL, bytes, out, "pm_alloc");
}

static void cuda_free(pm_context *ctx, void *p)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    memset(st->seen, 0, sizeof st->seen); /* the address may come back as something else */
    for (unsigned i = 0; i < PMI_CUDA_OUT; i++)
        if (st->out[i].p == p) st->out[i].p = NULL;
    if (cudaSetDevice(st->device) == cudaSuccess) cudaFree(p);
    cudaGetLastError();
}

static pm_status cuda_upload(pm_context *ctx, void *dst, const void *src_host, size_t bytes)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    PMI_TRY(pmi_cuda_copy_host(ctx, dst, src_host, bytes, 0, "pm_upload"));
    return pmi_cuda_wait(ctx, "pm_upload");
}

static pm_status cuda_download(pm_context *ctx, void *dst_host, const void *src, size_t bytes)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    PMI_TRY(pmi_cuda_copy_host(ctx, dst_host, src, bytes, 1, "pm_download"));
    return pmi_cuda_wait(ctx, "pm_download");
}

/* Device and managed memory, and host memory registered as mapped (with
 * unified addressing its device pointer is itself), are readable by the
 * kernels; plain host memory is not. */
static int cuda_accessible(pm_context *ctx, const void *p)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    for (unsigned i = 0; i < 8; i++)
        if (st->seen[i] == p) return 1;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    const int ok = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
                   (a.type == cudaMemoryTypeHost && a.devicePointer == p);
    if (ok) st->seen[st->seen_next++ & 7] = p;
    return ok;
}

/* Mesh post-processing (postprocess.cu). */
extern "C" pm_status pmi_cuda_post_step(pm_context *ctx, int step, size_t n,
                                        const struct pmi_post_args *args);
extern "C" pm_status pmi_cuda_sph_build(pm_context *ctx, const float *xyz, size_t n,
                                        const pm_field_params *p, struct pm_sph_interpolator *ip);
/* The marching-cubes cleanup (mesh_cleanup.cu). */
extern "C" pm_status pmi_cuda_mc_cleanup(pm_context *ctx, struct pmi_hmesh *m,
                                         const pm_mc_cleanup_options *o);

/* Stream-ordered scratch from the context's own pool (cudaMallocFromPoolAsync
 * on the context's stream). The pool keeps what is freed (release
 * threshold: unlimited), so a call that allocates and frees the same
 * buffers as the last one maps no memory and never waits for the device,
 * where cudaMalloc and cudaFree would (cudaFree waits for the whole
 * device). What the pool holds unused is given back when an allocation
 * fails and before free memory is measured (cuda_free_bytes). */
static pm_status cuda_scratch_alloc(pm_context *ctx, size_t bytes, void **out)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    unsigned hooks = 0;
    if (!st->pool && !st->no_pool) {
        if (pmi_hooks(&hooks) != PM_STATUS_OK) pmi_clear_error(); /* the extraction reports it */
        if (hooks & PMI_HOOK_NOPOOL) st->no_pool = 1; /* the test of the path without pools */
    }
    if (!st->pool && !st->no_pool) {
        cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = st->device;
        cudaError_t e = cudaMemPoolCreate(&st->pool, &props);
        if (e == cudaSuccess) {
            uint64_t keep = UINT64_MAX;
            e = cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &keep);
        }
        if (e != cudaSuccess) { /* no pools on this device: for good, so no
                                   cudaMalloc'ed scratch reaches cudaFreeAsync */
            cudaGetLastError();
            if (st->pool) cudaMemPoolDestroy(st->pool);
            st->pool = NULL;
            st->no_pool = 1;
        }
    }
    return cuda_alloc_in(ctx, st->pool, bytes, out, "device scratch");
}

/* Whether ctx's scratch comes from its pool (tests: the nopool hook). */
extern "C" int pmi_cuda_scratch_pooled(pm_context *ctx)
{
    return pmi_cuda(ctx)->pool != NULL;
}

static void cuda_scratch_free(pm_context *ctx, void *p)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (!p) return;
    memset(st->seen, 0, sizeof st->seen); /* the address may come back as something else */
    if (cudaSetDevice(st->device) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    if (st->pool)
        cudaFreeAsync(p, st->stream);
    else
        cudaFree(p);
    cudaGetLastError();
}

/* Recycled mesh arrays. A frame loop that meshes into context memory and
 * frees the last mesh (pm_mesh_free) would pay a cudaMalloc and a cudaFree
 * of the whole mesh per frame (about 1 ms for 1.3 GB on an H100).
 * Freed arrays of 1 MiB and more are kept instead (at most PMI_CUDA_KEPT,
 * within an eighth of the device's memory) and handed to the next mesh
 * that fits in them with at most twice its size. Before an array is kept
 * the device is synchronised, as cudaFree would (work of other streams may
 * still read it). Kept arrays are released when an allocation fails,
 * before free memory is measured and with the context. Only arrays whose
 * size this context handed out are kept. */
#define PMI_CUDA_MIN_KEPT ((size_t)1 << 20)


static pm_status cuda_mesh_array_alloc(pm_context *ctx, size_t bytes, void **out)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    void *p = NULL;
    size_t size = bytes;
    if (bytes >= PMI_CUDA_MIN_KEPT) {
        unsigned best = st->nkept;
        for (unsigned i = 0; i < st->nkept; i++)
            if (st->kept[i].size >= bytes && st->kept[i].size - bytes <= bytes &&
                (best == st->nkept || st->kept[i].size < st->kept[best].size))
                best = i;
        if (best < st->nkept) {
            p = st->kept[best].p;
            size = st->kept[best].size;
            st->kept_bytes -= size;
            for (unsigned j = best + 1; j < st->nkept; j++)
                st->kept[j - 1] = st->kept[j];
            st->nkept--;
        }
    }
    if (!p) PMI_TRY(cuda_alloc_in(ctx, NULL, bytes, &p, "mesh array"));
    if (size >= PMI_CUDA_MIN_KEPT) {
        st->out[st->out_next].p = p;
        st->out[st->out_next].size = size;
        st->out_next = (st->out_next + 1) % PMI_CUDA_OUT;
    }
    *out = p;
    return PM_STATUS_OK;
}

static void cuda_mesh_array_free(pm_context *ctx, void *p)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (!p) return;
    size_t size = 0;
    for (unsigned i = 0; i < PMI_CUDA_OUT; i++)
        if (st->out[i].p == p) {
            size = st->out[i].size;
            st->out[i].p = NULL;
            break;
        }
    if (!st->kept_budget) {
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(st->device) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            st->kept_budget = total_b / 8;
        cudaGetLastError();
    }
    if (size < PMI_CUDA_MIN_KEPT || size > st->kept_budget ||
        cudaSetDevice(st->device) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        cuda_free(ctx, p);
        return;
    }
    memset(st->seen, 0, sizeof st->seen);
    while (st->nkept && (st->nkept == PMI_CUDA_KEPT || st->kept_bytes + size > st->kept_budget)) {
        cudaFree(st->kept[0].p);
        st->kept_bytes -= st->kept[0].size;
        for (unsigned j = 1; j < st->nkept; j++)
            st->kept[j - 1] = st->kept[j];
        st->nkept--;
    }
    cudaGetLastError();
    st->kept[st->nkept].p = p;
    st->kept[st->nkept].size = size;
    st->nkept++;
    st->kept_bytes += size;
}

static uint64_t cuda_free_bytes(pm_context *ctx)
{
    size_t free_b = 0, total_b = 0;
    if (pmi_cuda_begin(ctx) != PM_STATUS_OK) return 0;
    pmi_cuda_state *st = pmi_cuda(ctx);
    cuda_release_unused(st); /* kept mesh arrays and unused scratch are free memory */
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (uint64_t)free_b;
}

static const pmi_backend cuda_backend = {
    /* .name = */ "cuda",
    /* .init = */ cuda_init,
    /* .shutdown = */ cuda_shutdown,
    /* .synchronize = */ cuda_synchronize,
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_download,
    /* .accessible = */ cuda_accessible,
    /* .reduce_f32 = */ pmi_cuda_reduce_f32,
    /* .reduce_image_f32 = */ pmi_cuda_reduce_image_f32,
    /* .scan_exclusive_u32 = */ pmi_cuda_scan_exclusive_u32,
    /* .scan_many_u32 = */ pmi_cuda_scan_many_u32,
    /* .filter_f32 = */ pmi_cuda_filter_f32,
    /* .filter_horn_f32 = */ pmi_cuda_filter_horn_f32,
    /* .compact = */ pmi_cuda_compact,
    /* .expand = */ pmi_cuda_expand,
    /* .filter_f32_async = */ pmi_cuda_filter_f32_async,
    /* .compact_async = */ pmi_cuda_compact_async,
    /* .expand_async = */ pmi_cuda_expand_async,
    /* .histopyramid_build = */ pmi_cuda_histopyramid_build,
    /* .histopyramid_total = */ pmi_cuda_histopyramid_total,
    /* .histopyramid_traverse = */ pmi_cuda_histopyramid_traverse,
    /* .histopyramid_destroy = */ pmi_cuda_histopyramid_destroy,
    /* .isosurface = */ pmi_cuda_isosurface,
    /* .isosurface_async = */ pmi_cuda_isosurface_async,
    /* .field_compute = */ pmi_cuda_field_compute,
    /* .field_compute_async = */ pmi_cuda_field_compute_async,
    /* .bvh_build = */ pmi_cuda_bvh_build,
    /* .bvh_destroy = */ pmi_cuda_bvh_destroy,
    /* .collide = */ pmi_cuda_collide,
    /* .subdivide_step = */ pmi_cuda_subdivide_step,
    /* .post_step = */ pmi_cuda_post_step,
    /* .sph_build = */ pmi_cuda_sph_build,
    /* .mc_cleanup = */ pmi_cuda_mc_cleanup,
    /* .isosurface_piece = */ pmi_cuda_isosurface_piece,
    /* .sparse_plan = */ pmi_cuda_sparse_plan,
    /* .sparse_pieces = */ pmi_cuda_sparse_pieces,
    /* .sparse_plan_free = */ pmi_cuda_sparse_plan_free,
    /* .free_bytes = */ cuda_free_bytes,
    /* .isosurface_window = */ pmi_cuda_isosurface_window,
    /* .scratch_alloc = */ cuda_scratch_alloc,
    /* .scratch_free = */ cuda_scratch_free,
    /* .mesh_array_alloc = */ cuda_mesh_array_alloc,
    /* .mesh_array_free = */ cuda_mesh_array_free,
    /* .mesh_indices_check = */ pmi_cuda_mesh_indices_check,
    /* .ply_body = */ pmi_cuda_ply_body,
    /* .scan_queued_u32 = */ pmi_cuda_scan_queued_u32,
};

extern "C" const pmi_backend *pmi_cuda_backend(void) { return &cuda_backend; }

extern "C" int pmi_cuda_device_count(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    cudaGetLastError();
    return count;
}
