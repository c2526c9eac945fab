/* Reductions (seed 001): pm_reduce_f32 and pm_reduce_image_f32 against a
 * serial double-precision reference, on awkward sizes and images, NaN rules,
 * thread-count independence, the 1e8-element accuracy case, bad arguments. */
#include <math.h>

#include "test_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define PMT_BIG 1000000
#define PMT_HUGE 0 /* the 1e8 case is skipped under sanitizers */
#else
#define PMT_BIG 10000000
#define PMT_HUGE 100000000
#endif

static const pm_reduce_op ops[] = {PM_REDUCE_SUM, PM_REDUCE_MEAN, PM_REDUCE_MIN, PM_REDUCE_MAX,
                                   PM_REDUCE_GEOMEAN};
static const char *op_names[] = {"sum", "mean", "min", "max", "geomean"};

/* Serial reference over a strided image, in double (long double for sums). */
static double reference(pm_reduce_op op, const float *img, size_t w, size_t h, size_t stride)
{
    long double s = 0;
    double m = NAN;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++) {
            float v = img[y * stride + x];
            if (op == PM_REDUCE_GEOMEAN)
                s += log((double)v);
            else
                s += v;
            if (!isnan(v)) {
                if (isnan(m) || (op == PM_REDUCE_MIN ? v < m : v > m)) m = v;
            }
        }
    double n = (double)w * (double)h;
    switch (op) {
    case PM_REDUCE_SUM: return (double)s;
    case PM_REDUCE_MEAN: return (double)(s / n);
    case PM_REDUCE_GEOMEAN: return exp((double)(s / n));
    default: return m;
    }
}

static int close_enough(pm_reduce_op op, double got, double want, double scale)
{
    if (op == PM_REDUCE_MIN || op == PM_REDUCE_MAX) return got == want;
    return fabs(got - want) <= 1e-7 * (scale > fabs(want) ? scale : fabs(want)) + 1e-300;
}

/* Reduces an image with every op; padding columns hold NaN so a read
 * outside width x height shows up in every result. */
static void check_image(pm_context *ctx, size_t w, size_t h, size_t pad, int positive)
{
    size_t stride = w + pad;
    size_t cells = (h - 1) * stride + w;
    float *img = malloc(cells * sizeof *img);
    double abs_sum = 0;
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < stride && y * stride + x < cells; x++) {
            float v = x < w ? (positive ? (float)(0.25 + 2 * pmt_uniform())
                                        : (float)(2 * pmt_uniform() - 1))
                            : NAN;
            img[y * stride + x] = v;
            if (x < w) abs_sum += fabs(v);
        }
    float *d = pmt_to_ctx(ctx, img, cells * sizeof *img);
    for (size_t k = 0; k < 5; k++) {
        if (ops[k] == PM_REDUCE_GEOMEAN && !positive) continue;
        double got = -1, want = reference(ops[k], img, w, h, stride);
        double scale = ops[k] == PM_REDUCE_SUM    ? abs_sum
                       : ops[k] == PM_REDUCE_MEAN ? abs_sum / ((double)w * (double)h)
                                                  : 0;
        if (h == 1 && pad == 0)
            PMT_OK(pm_reduce_f32(ctx, d, w, ops[k], &got));
        else
            PMT_OK(pm_reduce_image_f32(ctx, d, w, h, stride, ops[k], &got));
        PMT_CHECK(close_enough(ops[k], got, want, scale),
                  "%s of %zux%zu (stride %zu): %.17g vs %.17g", op_names[k], w, h, stride, got,
                  want);
    }
    pm_free(ctx, d);
    free(img);
}

static void check_nan_rules(pm_context *ctx)
{
    float h[5] = {NAN, 3.0f, NAN, -2.0f, 7.0f};
    float *d = pmt_to_ctx(ctx, h, sizeof h);
    double r;
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_SUM, &r));
    PMT_CHECK(isnan(r), "SUM with NaN gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_MEAN, &r));
    PMT_CHECK(isnan(r), "MEAN with NaN gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_MIN, &r));
    PMT_CHECK(r == -2.0, "MIN ignoring NaN gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_MAX, &r));
    PMT_CHECK(r == 7.0, "MAX ignoring NaN gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, 1, PM_REDUCE_MIN, &r));
    PMT_CHECK(isnan(r), "MIN of all-NaN gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, 1, PM_REDUCE_MAX, &r));
    PMT_CHECK(isnan(r), "MAX of all-NaN gives %g", r);
    pm_free(ctx, d);

    /* A NaN in a late block, after blocks of plain values, and an all-NaN
     * first block before real values: the block combination must handle
     * both. */
    size_t n = 300000;
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = i < 70000 ? NAN : (float)(i % 1000);
    d = pmt_to_ctx(ctx, a, n * sizeof *a);
    PMT_OK(pm_reduce_f32(ctx, d, n, PM_REDUCE_MIN, &r));
    PMT_CHECK(r == 0.0, "MIN after an all-NaN block gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, n, PM_REDUCE_MAX, &r));
    PMT_CHECK(r == 999.0, "MAX after an all-NaN block gives %g", r);
    PMT_OK(pm_reduce_f32(ctx, d, n, PM_REDUCE_SUM, &r));
    PMT_CHECK(isnan(r), "SUM with an all-NaN block gives %g", r);
    pm_free(ctx, d);
    free(a);
}

/* The same data reduced by contexts of 1, 2 and 3 threads must give
 * bit-identical doubles. */
static void check_thread_independence(pm_device dev)
{
    size_t n = 3000017;
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(pmt_uniform() * 1000.0 - 3.0);
    double first[5] = {0};
    for (int t = 1; t <= 3; t++) {
        pm_context *c;
        pm_context_desc desc = {sizeof desc, dev, 0, t, NULL};
        PMT_OK(pm_context_create(&desc, &c));
        float *d = pmt_to_ctx(c, a, n * sizeof *a);
        for (int k = 0; k < 4; k++) {
            double r;
            PMT_OK(pm_reduce_f32(c, d, n, ops[k], &r));
            if (t == 1)
                first[k] = r;
            else
                PMT_CHECK(memcmp(&r, &first[k], sizeof r) == 0,
                          "%s with %d threads: %.17g, with 1 thread %.17g", op_names[k], t, r,
                          first[k]);
        }
        pm_free(c, d);
        pm_context_destroy(c);
    }
    free(a);
}

/* 1e8 uniform [0,1) floats, generated and uploaded in slices so only the
 * context holds the whole array. */
static void check_huge(pm_context *ctx)
{
    size_t n = PMT_HUGE, slice = 1 << 20;
    if (!n) return;
    void *d = NULL;
    if (pm_alloc(ctx, n * sizeof(float), &d) != PM_STATUS_OK) {
        printf("1e8 case skipped: no context memory\n");
        return;
    }
    float *a = malloc(slice * sizeof *a);
    double ref = 0;
    for (size_t b = 0; b < n; b += slice) {
        size_t len = n - b < slice ? n - b : slice;
        for (size_t i = 0; i < len; i++) {
            a[i] = (float)pmt_uniform();
            ref += a[i];
        }
        PMT_OK(pm_upload(ctx, (float *)d + b, a, len * sizeof *a));
    }
    double s, m;
    PMT_OK(pm_reduce_f32(ctx, d, n, PM_REDUCE_SUM, &s));
    PMT_OK(pm_reduce_f32(ctx, d, n, PM_REDUCE_MEAN, &m));
    PMT_CHECK(fabs(s - ref) <= 1e-6 * ref, "1e8 sum %.17g vs %.17g", s, ref);
    PMT_CHECK(fabs(m - ref / (double)n) <= 1e-6 * ref / (double)n, "1e8 mean %.17g vs %.17g", m,
              ref / (double)n);
    printf("1e8 floats: sum relative error %.3g\n", fabs(s - ref) / ref);
    pm_free(ctx, d);
    free(a);
}

static void check_bad_arguments(pm_context *ctx)
{
    double r;
    float x = 1.0f;
    float *d = pmt_to_ctx(ctx, &x, sizeof x);
    PMT_CHECK(pm_reduce_f32(NULL, d, 1, PM_REDUCE_SUM, &r) == PM_STATUS_INVALID_ARGUMENT,
              "NULL ctx");
    PMT_CHECK(pm_reduce_f32(ctx, NULL, 1, PM_REDUCE_SUM, &r) == PM_STATUS_INVALID_ARGUMENT,
              "NULL in");
    PMT_CHECK(pm_reduce_f32(ctx, d, 1, PM_REDUCE_SUM, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "NULL result");
    PMT_CHECK(pm_reduce_f32(ctx, d, 1, (pm_reduce_op)99, &r) == PM_STATUS_INVALID_ARGUMENT,
              "bad op");
    PMT_CHECK(pm_reduce_f32(ctx, d, SIZE_MAX / 2, PM_REDUCE_SUM, &r) == PM_STATUS_OVERFLOW,
              "byte count overflow");
    r = -1;
    PMT_CHECK(pm_reduce_f32(ctx, NULL, 0, PM_REDUCE_SUM, &r) == PM_STATUS_OK && r == 0.0,
              "empty sum");
    for (int k = 1; k < 5; k++)
        PMT_CHECK(pm_reduce_f32(ctx, d, 0, ops[k], &r) == PM_STATUS_INVALID_ARGUMENT, "empty %s",
                  op_names[k]);
    PMT_CHECK(pm_reduce_image_f32(ctx, d, 2, 1, 1, PM_REDUCE_SUM, &r) == PM_STATUS_INVALID_ARGUMENT,
              "row_stride < width");
    PMT_CHECK(pm_reduce_image_f32(ctx, d, 4, SIZE_MAX / 4, 4, PM_REDUCE_SUM, &r) ==
                  PM_STATUS_OVERFLOW,
              "image size overflow");
    PMT_CHECK(pm_reduce_image_f32(ctx, NULL, 1, 1, 1, PM_REDUCE_MAX, &r) ==
                  PM_STATUS_INVALID_ARGUMENT,
              "NULL image");
    PMT_CHECK(pm_reduce_image_f32(ctx, d, 0, 5, 5, PM_REDUCE_MAX, &r) == PM_STATUS_INVALID_ARGUMENT,
              "empty image max");
    pm_free(ctx, d);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;

    size_t sizes[] = {1, 2, 31, 32, 33, 1000, 65535, 65536, 65537, 131071, 1048577, PMT_BIG};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (sizes[i] < 2000000) check_image(ctx, sizes[i], 1, 0, 0); /* signed values */
        check_image(ctx, sizes[i], 1, 0, 1);
    }
    /* Seed 001's images, with and without row padding. */
    size_t dims[][2] = {{1, 1}, {3, 3}, {1920, 1080}, {4095, 4097}, {1, 70000}, {70001, 3}};
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
        check_image(ctx, dims[i][0], dims[i][1], 0, 1);
        check_image(ctx, dims[i][0], dims[i][1], 7, i % 2 == 0);
    }
    check_nan_rules(ctx);
    check_thread_independence(dev);
    check_huge(ctx);
    check_bad_arguments(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_reduce");
}
