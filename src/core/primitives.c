/* Public entry points of the data-parallel primitives: arguments are checked
 * once here (NULLs, enums, byte counts that overflow), then the call goes to
 * the context's backend. */
#include <string.h>

#include "core/backend.h"
#include "core/util.h"

#define CHECK_CTX(fn)                                                                              \
    do {                                                                                           \
        pmi_clear_error();                                                                         \
        if (!ctx) return pmi_error(PM_STATUS_INVALID_ARGUMENT, fn ": context is NULL");            \
    } while (0)

#define DISPATCH(fn, entry, ...)                                                                   \
    do {                                                                                           \
        if (!ctx->backend->entry)                                                                  \
            return pmi_error(PM_STATUS_UNSUPPORTED, fn ": not supported on the %s backend",        \
                             ctx->backend->name);                                                  \
        return ctx->backend->entry(ctx, __VA_ARGS__);                                              \
    } while (0)

/* n elements of `elem` bytes must have a representable byte count. */
/* n elements of `elem` bytes must have a representable byte count and,
 * when there are any, live where the backend can reach them (a host
 * pointer on a CUDA context is refused here, before any kernel runs: a
 * kernel reading it would fault and poison the process's GPU). */
static pm_status check_array(pm_context *ctx, const char *fn, const char *what, const void *p, size_t n,
                             size_t elem)
{
    size_t bytes;
    if (!pmi_mul_size(n, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s of %zu elements overflows a byte count", fn,
                         what, n);
    if (n && !p) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    if (n && !pmi_ctx_accessible(ctx, p))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: %s is host memory, which the %s backend cannot read (pm_alloc and "
                         "pm_upload it, or pass device, managed or mapped pinned memory)",
                         fn, what, ctx->backend->name);
    return PM_STATUS_OK;
}

/* An optional output (NULL allowed) must be readable by the backend too. */
static pm_status check_out(pm_context *ctx, const char *fn, const char *what, const void *p)
{
    return p ? check_array(ctx, fn, what, p, 1, 1) : PM_STATUS_OK;
}

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        pm_status s_ = (expr);                                                                     \
        if (s_ != PM_STATUS_OK) return s_;                                                         \
    } while (0)

static int valid_op(pm_reduce_op op) { return op >= PM_REDUCE_SUM && op <= PM_REDUCE_GEOMEAN; }
static int valid_cmp(pm_compare c) { return c >= PM_LESS && c <= PM_GREATER_EQUAL; }

pm_status pm_reduce_f32(pm_context *ctx, const float *in, size_t n, pm_reduce_op op, double *result)
{
    CHECK_CTX("pm_reduce_f32");
    if (!result || !valid_op(op))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_reduce_f32: NULL result or bad op");
    CHECK(check_array(ctx, "pm_reduce_f32", "in", in, n, sizeof(float)));
    if (n == 0) {
        if (op == PM_REDUCE_SUM) {
            *result = 0.0;
            return PM_STATUS_OK;
        }
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_reduce_f32: empty input");
    }
    DISPATCH("pm_reduce_f32", reduce_f32, in, n, op, result);
}

pm_status pm_reduce_image_f32(pm_context *ctx, const float *image, size_t width, size_t height,
                              size_t row_stride, pm_reduce_op op, double *result)
{
    CHECK_CTX("pm_reduce_image_f32");
    if (!result || !valid_op(op))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_reduce_image_f32: NULL result or bad op");
    if (row_stride < width)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_reduce_image_f32: row_stride %zu < width %zu", row_stride, width);
    size_t span;
    if (height &&
        (!pmi_mul_size(height - 1, row_stride, &span) || !pmi_add_size(span, width, &span)))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_reduce_image_f32: image size overflows");
    if (width == 0 || height == 0) {
        if (op == PM_REDUCE_SUM) {
            *result = 0.0;
            return PM_STATUS_OK;
        }
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_reduce_image_f32: empty image");
    }
    CHECK(check_array(ctx, "pm_reduce_image_f32", "image", image, span, sizeof(float)));
    DISPATCH("pm_reduce_image_f32", reduce_image_f32, image, width, height, row_stride, op, result);
}

pm_status pm_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                uint64_t *total)
{
    CHECK_CTX("pm_scan_exclusive_u32");
    CHECK(check_array(ctx, "pm_scan_exclusive_u32", "in", in, n, sizeof(uint32_t)));
    CHECK(check_array(ctx, "pm_scan_exclusive_u32", "out", out, n, sizeof(uint32_t)));
    if (n == 0) {
        if (total) *total = 0;
        return PM_STATUS_OK;
    }
    DISPATCH("pm_scan_exclusive_u32", scan_exclusive_u32, in, n, out, total);
}

static pm_status check_filter(pm_context *ctx, const char *fn, const float *in, size_t n, pm_compare cmp,
                              float *out, size_t capacity, size_t *count)
{
    if (!count || !valid_cmp(cmp))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL count or bad comparison", fn);
    CHECK(check_array(ctx, fn, "in", in, n, sizeof(float)));
    CHECK(check_array(ctx, fn, "out", out, capacity, sizeof(float)));
    return PM_STATUS_OK;
}

pm_status pm_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp, float threshold,
                        float *out, size_t capacity, size_t *count)
{
    CHECK_CTX("pm_filter_f32");
    CHECK(check_filter(ctx, "pm_filter_f32", in, n, cmp, out, capacity, count));
    if (n == 0) {
        *count = 0;
        return PM_STATUS_OK;
    }
    DISPATCH("pm_filter_f32", filter_f32, in, n, cmp, threshold, out, capacity, count);
}

pm_status pm_filter_horn_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                             float threshold, float *out, size_t capacity, size_t *count)
{
    CHECK_CTX("pm_filter_horn_f32");
    CHECK(check_filter(ctx, "pm_filter_horn_f32", in, n, cmp, out, capacity, count));
    if (n == 0) {
        *count = 0;
        return PM_STATUS_OK;
    }
    DISPATCH("pm_filter_horn_f32", filter_horn_f32, in, n, cmp, threshold, out, capacity, count);
}

pm_status pm_compact(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                     size_t capacity, size_t *count)
{
    CHECK_CTX("pm_compact");
    if (!count) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_compact: count is NULL");
    CHECK(check_array(ctx, "pm_compact", "flags", flags, n, 1));
    CHECK(check_array(ctx, "pm_compact", "out_index", out_index, capacity, sizeof(uint64_t)));
    if (n == 0) {
        *count = 0;
        return PM_STATUS_OK;
    }
    DISPATCH("pm_compact", compact, flags, n, out_index, capacity, count);
}

pm_status pm_expand(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                    uint32_t *out_local, size_t capacity, size_t *count)
{
    CHECK_CTX("pm_expand");
    if (!count) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_expand: count is NULL");
    CHECK(check_array(ctx, "pm_expand", "counts", counts, n, sizeof(uint32_t)));
    CHECK(check_out(ctx, "pm_expand", "out_source", out_source));
    CHECK(check_out(ctx, "pm_expand", "out_local", out_local));
    size_t b;
    if (!pmi_mul_size(capacity, sizeof(uint64_t), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_expand: capacity %zu overflows", capacity);
    if (n == 0) {
        *count = 0;
        return PM_STATUS_OK;
    }
    DISPATCH("pm_expand", expand, counts, n, out_source, out_local, capacity, count);
}

pm_status pm_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                pm_histopyramid **out)
{
    CHECK_CTX("pm_histopyramid_build");
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_histopyramid_build: out is NULL");
    *out = NULL;
    CHECK(check_array(ctx, "pm_histopyramid_build", "counts", counts, n, sizeof(uint32_t)));
    DISPATCH("pm_histopyramid_build", histopyramid_build, counts, n, out);
}

pm_status pm_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total)
{
    CHECK_CTX("pm_histopyramid_total");
    if (!hp || !total)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_histopyramid_total: NULL argument");
    DISPATCH("pm_histopyramid_total", histopyramid_total, hp, total);
}

pm_status pm_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp, uint64_t first_key,
                                   size_t num_keys, uint64_t *out_source, uint32_t *out_local)
{
    CHECK_CTX("pm_histopyramid_traverse");
    if (!hp) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_histopyramid_traverse: hp is NULL");
    size_t b;
    if (!pmi_mul_size(num_keys, sizeof(uint64_t), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_histopyramid_traverse: num_keys overflows");
    if (num_keys == 0) return PM_STATUS_OK;
    CHECK(check_out(ctx, "pm_histopyramid_traverse", "out_source", out_source));
    CHECK(check_out(ctx, "pm_histopyramid_traverse", "out_local", out_local));
    DISPATCH("pm_histopyramid_traverse", histopyramid_traverse, hp, first_key, num_keys, out_source,
             out_local);
}

void pm_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp)
{
    if (ctx && hp && ctx->backend->histopyramid_destroy)
        ctx->backend->histopyramid_destroy(ctx, hp);
}

/* Device-count variants: the backend's own entry when it has one; else the
 * synchronous call, with the count stored into context memory through the
 * backend's upload (the core never writes context memory itself). */
static pm_status store_count(pm_context *ctx, pm_status s, size_t count, uint64_t *count_ctx)
{
    if (s != PM_STATUS_OK && s != PM_STATUS_TRUNCATED) return s;
    uint64_t c = count;
    pm_status u = ctx->backend->upload(ctx, count_ctx, &c, sizeof c);
    return u != PM_STATUS_OK ? u : PM_STATUS_OK;
}

pm_status pm_filter_f32_async(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                              float threshold, float *out, size_t capacity, uint64_t *count_ctx)
{
    CHECK_CTX("pm_filter_f32_async");
    size_t dummy;
    if (!count_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_filter_f32_async: count_ctx is NULL");
    CHECK(check_filter(ctx, "pm_filter_f32_async", in, n, cmp, out, capacity, &dummy));
    CHECK(check_out(ctx, "pm_filter_f32_async", "count_ctx", count_ctx));
    if (ctx->backend->filter_f32_async)
        return ctx->backend->filter_f32_async(ctx, in, n, cmp, threshold, out, capacity, count_ctx);
    size_t count = 0;
    pm_status s =
        n ? pm_filter_f32(ctx, in, n, cmp, threshold, out, capacity, &count) : PM_STATUS_OK;
    return store_count(ctx, s, count, count_ctx);
}

pm_status pm_compact_async(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                           size_t capacity, uint64_t *count_ctx)
{
    CHECK_CTX("pm_compact_async");
    if (!count_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_compact_async: count_ctx is NULL");
    CHECK(check_array(ctx, "pm_compact_async", "flags", flags, n, 1));
    CHECK(check_array(ctx, "pm_compact_async", "out_index", out_index, capacity, sizeof(uint64_t)));
    CHECK(check_out(ctx, "pm_compact_async", "count_ctx", count_ctx));
    if (ctx->backend->compact_async)
        return ctx->backend->compact_async(ctx, flags, n, out_index, capacity, count_ctx);
    size_t count = 0;
    pm_status s = n ? pm_compact(ctx, flags, n, out_index, capacity, &count) : PM_STATUS_OK;
    return store_count(ctx, s, count, count_ctx);
}

pm_status pm_expand_async(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                          uint32_t *out_local, size_t capacity, uint64_t *count_ctx)
{
    CHECK_CTX("pm_expand_async");
    if (!count_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_expand_async: count_ctx is NULL");
    CHECK(check_array(ctx, "pm_expand_async", "counts", counts, n, sizeof(uint32_t)));
    CHECK(check_out(ctx, "pm_expand_async", "out_source", out_source));
    CHECK(check_out(ctx, "pm_expand_async", "out_local", out_local));
    CHECK(check_out(ctx, "pm_expand_async", "count_ctx", count_ctx));
    size_t b;
    if (!pmi_mul_size(capacity, sizeof(uint64_t), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_expand_async: capacity %zu overflows", capacity);
    if (ctx->backend->expand_async)
        return ctx->backend->expand_async(ctx, counts, n, out_source, out_local, capacity,
                                          count_ctx);
    size_t count = 0;
    pm_status s =
        n ? pm_expand(ctx, counts, n, out_source, out_local, capacity, &count) : PM_STATUS_OK;
    return store_count(ctx, s, count, count_ctx);
}
