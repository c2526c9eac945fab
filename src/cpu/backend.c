/* The CPU backend table: host memory, OpenMP-parallel algorithms. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/post_cpu.h"
#include "cpu/sparse.h"

static pm_status cpu_alloc(pm_context *ctx, size_t bytes, void **out)
{
    (void)ctx;
    /* 64-byte alignment for vector loads; aligned_alloc needs a multiple. */
    size_t rounded;
    if (!pmi_add_size(bytes, 63, &rounded))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_alloc: %zu bytes overflow", bytes);
    rounded &= ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (!p)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_alloc: could not allocate %zu bytes", bytes);
    *out = p;
    return PM_STATUS_OK;
}

static void cpu_free(pm_context *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* Scratch of one call (pm_subdivide_loop's streams): from the context's
 * recycled host arrays (host_arrays.c), so that a loop of calls does not
 * have the system map and zero every page of its buffers again each time. */
static pm_status cpu_scratch_alloc(pm_context *ctx, size_t bytes, void **out)
{
    void *p = pmi_host_array_get(ctx, bytes);
    if (!p)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "scratch: could not allocate %zu bytes", bytes);
    *out = p;
    return PM_STATUS_OK;
}

static void cpu_scratch_free(pm_context *ctx, void *p) { pmi_host_array_put(ctx, p); }

static pm_status cpu_copy(pm_context *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memmove(dst, src, bytes);
    return PM_STATUS_OK;
}

static const pmi_backend cpu_backend = {
    .name = "cpu",
    .shutdown = pmi_cpu_isosurface_release,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .scratch_alloc = cpu_scratch_alloc,
    .scratch_free = cpu_scratch_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .reduce_f32 = pmi_cpu_reduce_f32,
    .reduce_image_f32 = pmi_cpu_reduce_image_f32,
    .scan_exclusive_u32 = pmi_cpu_scan_exclusive_u32,
    .filter_f32 = pmi_cpu_filter_f32,
    .filter_horn_f32 = pmi_cpu_filter_horn_f32,
    .compact = pmi_cpu_compact,
    .expand = pmi_cpu_expand,
    .histopyramid_build = pmi_cpu_histopyramid_build,
    .histopyramid_total = pmi_cpu_histopyramid_total,
    .histopyramid_traverse = pmi_cpu_histopyramid_traverse,
    .histopyramid_destroy = pmi_cpu_histopyramid_destroy,
    .isosurface = pmi_cpu_isosurface,
    .isosurface_async = pmi_cpu_isosurface_async,
    .field_compute = pmi_cpu_field_compute,
    .field_compute_async = pmi_cpu_field_compute_async,
    .bvh_build = pmi_cpu_bvh_build,
    .bvh_destroy = pmi_cpu_bvh_destroy,
    .collide = pmi_cpu_collide,
    .subdivide_step = pmi_cpu_subdivide_step,
    .mc_cleanup = pmi_cpu_mc_cleanup_entry,
    .isosurface_piece = pmi_cpu_isosurface_piece,
    .sparse_plan = pmi_cpu_sparse_plan,
    .sparse_pieces = pmi_cpu_sparse_pieces,
    .sparse_plan_free = pmi_cpu_sparse_plan_free,
};

const pmi_backend *pmi_cpu_backend(void) { return &cpu_backend; }
