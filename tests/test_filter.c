/* Order-preserving filtering: pm_filter_f32 and Horn's method
 * pm_filter_horn_f32 against a serial reference, every comparison,
 * selectivities 0% .. 100%, NaN inputs, truncation (with guard elements past
 * the capacity), bad arguments, and on CUDA both paths of the filter. */
#include <math.h>

#include "test_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define PMT_BIG 1000000
#else
#define PMT_BIG 10000000
#endif
#define GUARD 16

typedef pm_status (*filter_fn)(pm_context *, const float *, size_t, pm_compare, float, float *,
                               size_t, size_t *);
static const char *fn_names[] = {"pm_filter_f32", "pm_filter_horn_f32"};
static const filter_fn fns[] = {pm_filter_f32, pm_filter_horn_f32};

static int ref_keep(float x, pm_compare c, float t)
{
    if (isnan(x) || isnan(t)) return 0;
    switch (c) {
    case PM_LESS: return x < t;
    case PM_LESS_EQUAL: return x <= t;
    case PM_GREATER: return x > t;
    default: return x >= t;
    }
}

/* Runs one filter on in (host copy h, context copy d) with the given
 * capacity and compares with the reference, including that nothing past
 * the capacity was written. */
static void check_one(pm_context *ctx, int fi, const float *h, const float *d, size_t n,
                      pm_compare cmp, float t, size_t capacity)
{
    float *ref = malloc((n ? n : 1) * sizeof *ref);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ref_keep(h[i], cmp, t)) ref[m++] = h[i];
    size_t cap = capacity == SIZE_MAX ? m : capacity;
    float *init = malloc((cap + GUARD) * sizeof *init);
    for (size_t i = 0; i < cap + GUARD; i++)
        init[i] = -12345.0f;
    float *dout = pmt_to_ctx(ctx, init, (cap + GUARD) * sizeof *init);
    size_t count = 777;
    pm_status s = fns[fi](ctx, d, n, cmp, t, dout, cap, &count);
    pm_status want = m > cap ? PM_STATUS_TRUNCATED : PM_STATUS_OK;
    PMT_CHECK(s == want, "%s n %zu cmp %d t %g cap %zu: status %s", fn_names[fi], n, (int)cmp, t,
              cap, pm_status_string(s));
    PMT_CHECK(count == m, "%s n %zu cmp %d t %g: count %zu, want %zu", fn_names[fi], n, (int)cmp, t,
              count, m);
    float *out = pmt_to_host(ctx, dout, (cap + GUARD) * sizeof *out);
    size_t w = m < cap ? m : cap, bad = 0;
    for (size_t i = 0; i < w; i++)
        if (memcmp(&out[i], &ref[i], sizeof(float)) != 0 && bad++ < 3)
            PMT_CHECK(0, "%s n %zu cmp %d t %g: out[%zu] = %g, want %g", fn_names[fi], n, (int)cmp,
                      t, i, out[i], ref[i]);
    for (size_t i = cap; i < cap + GUARD; i++)
        if (out[i] != -12345.0f && bad++ < 3)
            PMT_CHECK(0, "%s n %zu: wrote past the capacity %zu at %zu", fn_names[fi], n, cap, i);
    free(out);
    pm_free(ctx, dout);
    free(init);
    free(ref);
}

/* Uniform [0,1) values with 1% NaNs and a few infinities; threshold p
 * with PM_LESS keeps a fraction p. */
static void fill_uniform(float *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = pmt_rand() % 1000;
        h[i] = r < 10 ? NAN : r == 10 ? INFINITY : r == 11 ? -INFINITY : (float)pmt_uniform();
    }
}

static void check_size(pm_context *ctx, size_t n)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    fill_uniform(h, n);
    float *d = pmt_to_ctx(ctx, h, n * sizeof *h);
    const float sel[] = {0.0f, 0.001f, 0.01f, 0.5f, 1.0f};
    /* The full matrix on small sizes; on large ones (and for the O(n log n)
     * Horn filter above 2^17) a subset, to keep the test short. */
    int full = n <= ((size_t)1 << 17) + 1;
    for (int fi = 0; fi < 2; fi++) {
        if (fi == 1 && n > ((size_t)1 << 20) + 1) continue;
        if (fi == 1 && !full) {
            check_one(ctx, fi, h, d, n, PM_LESS, 0.01f, SIZE_MAX);
            check_one(ctx, fi, h, d, n, PM_GREATER_EQUAL, 0.5f, 1000);
            continue;
        }
        for (size_t k = 0; k < 5; k++) {
            check_one(ctx, fi, h, d, n, PM_LESS, sel[k], SIZE_MAX);
            if (full) check_one(ctx, fi, h, d, n, PM_GREATER_EQUAL, sel[k], SIZE_MAX);
        }
        if (full) {
            check_one(ctx, fi, h, d, n, PM_LESS_EQUAL, 0.25f, SIZE_MAX);
            check_one(ctx, fi, h, d, n, PM_GREATER, 0.75f, SIZE_MAX);
            check_one(ctx, fi, h, d, n, PM_LESS, NAN, SIZE_MAX); /* nothing passes */
            check_one(ctx, fi, h, d, n, PM_GREATER, -INFINITY, SIZE_MAX);
        }
        /* Truncation: half the outputs, one fewer, none. */
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += ref_keep(h[i], PM_LESS, 0.5f);
        check_one(ctx, fi, h, d, n, PM_LESS, 0.5f, m / 2);
        if (m && full) check_one(ctx, fi, h, d, n, PM_LESS, 0.5f, m - 1);
        if (full) check_one(ctx, fi, h, d, n, PM_LESS, 0.5f, 0);
        /* Capacity 0 with a NULL output. */
        size_t count = 99;
        pm_status s = fns[fi](ctx, d, n, PM_LESS, 0.5f, NULL, 0, &count);
        PMT_CHECK(count == m && s == (m ? PM_STATUS_TRUNCATED : PM_STATUS_OK),
                  "%s n %zu: NULL out, capacity 0: count %zu (want %zu), %s", fn_names[fi], n,
                  count, m, pm_status_string(s));
    }
    pm_free(ctx, (void *)d);
    free(h);
}

/* pm_filter_f32_async: the full count lands in context memory, a
 * truncated call returns OK, the outputs equal the synchronous call's. */
static void check_async(pm_context *ctx)
{
    size_t n = 70001, m = 0;
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[i] = (float)pmt_uniform();
        m += h[i] < 0.3f;
    }
    float *d = pmt_to_ctx(ctx, h, n * sizeof *h);
    float *a, *b;
    uint64_t *dcount, hc = 0;
    PMT_OK(pm_alloc(ctx, m * sizeof *a, (void **)&a));
    PMT_OK(pm_alloc(ctx, m * sizeof *b, (void **)&b));
    PMT_OK(pm_alloc(ctx, sizeof *dcount, (void **)&dcount));
    PMT_OK(pm_filter_f32_async(ctx, d, n, PM_LESS, 0.3f, a, m / 2, dcount));
    PMT_OK(pm_context_synchronize(ctx));
    PMT_OK(pm_download(ctx, &hc, dcount, sizeof hc));
    PMT_CHECK(hc == m, "filter_async count %" PRIu64 " want %zu", hc, m);
    size_t k;
    PMT_CHECK(pm_filter_f32(ctx, d, n, PM_LESS, 0.3f, b, m / 2, &k) == PM_STATUS_TRUNCATED,
              "filter truncation");
    float *ha = pmt_to_host(ctx, a, m / 2 * sizeof *ha),
          *hb = pmt_to_host(ctx, b, m / 2 * sizeof *hb);
    PMT_CHECK(memcmp(ha, hb, m / 2 * sizeof *ha) == 0, "filter_async output differs");
    free(ha);
    free(hb);
    pm_free(ctx, a);
    pm_free(ctx, b);
    pm_free(ctx, dcount);
    pm_free(ctx, d);
    free(h);
}

/* pm_filter_f32_async's count, written in context memory, is the full one. */
static void check_async_count(pm_context *ctx, const float *d, size_t n, pm_compare cmp, float t,
                              size_t capacity, size_t want)
{
    float *out = NULL;
    uint64_t *dcount, hc = 0;
    PMT_OK(pm_alloc(ctx, (capacity ? capacity : 1) * sizeof *out, (void **)&out));
    PMT_OK(pm_alloc(ctx, sizeof *dcount, (void **)&dcount));
    PMT_OK(pm_filter_f32_async(ctx, d, n, cmp, t, out, capacity, dcount));
    PMT_OK(pm_context_synchronize(ctx));
    PMT_OK(pm_download(ctx, &hc, dcount, sizeof hc));
    PMT_CHECK(hc == want, "filter_async n %zu t %g: count %" PRIu64 ", want %zu", n, t, hc, want);
    pm_free(ctx, out);
    pm_free(ctx, dcount);
}

/* The CUDA filter has two paths (src/cuda/filter.cu): below FLT_STAGE_MIN_N
 * = 2^26 elements always the single look-back pass; from there on a sample
 * (64 windows of 1024 elements, window b starting at b * (n / 64)) picks
 * the staged two-pass filter when at most 3% of it passes, else the
 * look-back pass. These inputs take each path by their size and their
 * selectivity, with no switch in the library; the last two make the sample
 * misjudge the input both ways, so the staged path must hold a dense output
 * and the look-back path a sparse one. CUDA only: the CPU filter has one
 * path, which the sizes of check_size cover. */
#define STAGE_MIN_N ((size_t)1 << 26)
#define SAMPLE_WINDOWS 64
#define SAMPLE_WINDOW 1024

static __attribute__((unused)) void check_paths(pm_context *ctx)
{
    const size_t nmax = STAGE_MIN_N + 8193;
    float *h = malloc((nmax + 1) * sizeof *h);
    fill_uniform(h, nmax + 1);
    float *d = pmt_to_ctx(ctx, h, (nmax + 1) * sizeof *h);
    struct {
        size_t n, shift;
        float t;
        const char *path;
    } cases[] = {
        {STAGE_MIN_N - 1, 0, 0.01f, "look-back, no sample (below the size)"},
        {STAGE_MIN_N, 0, 0.01f, "staged (1% kept)"},
        {nmax, 1, 0.005f, "staged, unaligned, partial last tile"},
        {nmax, 0, 0.10f, "look-back after the sample (10% kept)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        size_t n = cases[k].n, sh = cases[k].shift, m = 0;
        float t = cases[k].t;
        printf("filter path: n %zu, %s\n", n, cases[k].path);
        for (size_t i = 0; i < n; i++)
            m += ref_keep(h[sh + i], PM_LESS, t);
        check_one(ctx, 0, h + sh, d + sh, n, PM_LESS, t, SIZE_MAX);
        check_one(ctx, 0, h + sh, d + sh, n, PM_LESS, t, m / 2);
        check_async_count(ctx, d + sh, n, PM_LESS, t, m / 3, m);
    }
    /* The sample sees nothing pass (staged, about half the input kept),
     * then 1/16 of it pass while nothing outside the windows does
     * (look-back, 4096 of 2^26 kept). */
    const size_t n = STAGE_MIN_N, win = n / SAMPLE_WINDOWS;
    for (size_t i = 0; i < n; i++)
        if (i % win < SAMPLE_WINDOW) h[i] = 2.0f;
    float *d2 = pmt_to_ctx(ctx, h, n * sizeof *h);
    printf("filter path: n %zu, staged, the sample sees nothing pass\n", n);
    check_one(ctx, 0, h, d2, n, PM_LESS, 0.5f, SIZE_MAX);
    check_one(ctx, 0, h, d2, n, PM_LESS, 0.5f, 1000);
    pm_free(ctx, d2);
    for (size_t i = 0; i < n; i++)
        h[i] = i % win < SAMPLE_WINDOW ? (float)(i % 16) : 100.0f;
    d2 = pmt_to_ctx(ctx, h, n * sizeof *h);
    printf("filter path: n %zu, look-back, only the sampled windows pass\n", n);
    check_one(ctx, 0, h, d2, n, PM_LESS, 1.0f, SIZE_MAX);
    check_one(ctx, 0, h, d2, n, PM_GREATER_EQUAL, 15.0f, 100);
    pm_free(ctx, d2);
    pm_free(ctx, d);
    free(h);
}

static void check_bad_arguments(pm_context *ctx)
{
    float x = 1.0f;
    float *d = pmt_to_ctx(ctx, &x, sizeof x);
    float *o = pmt_to_ctx(ctx, &x, sizeof x);
    size_t c;
    for (int fi = 0; fi < 2; fi++) {
        const char *f = fn_names[fi];
        PMT_CHECK(fns[fi](NULL, d, 1, PM_LESS, 2, o, 1, &c) == PM_STATUS_INVALID_ARGUMENT,
                  "%s NULL ctx", f);
        PMT_CHECK(fns[fi](ctx, NULL, 1, PM_LESS, 2, o, 1, &c) == PM_STATUS_INVALID_ARGUMENT,
                  "%s NULL in", f);
        PMT_CHECK(fns[fi](ctx, d, 1, PM_LESS, 2, NULL, 1, &c) == PM_STATUS_INVALID_ARGUMENT,
                  "%s NULL out", f);
        PMT_CHECK(fns[fi](ctx, d, 1, PM_LESS, 2, o, 1, NULL) == PM_STATUS_INVALID_ARGUMENT,
                  "%s NULL count", f);
        PMT_CHECK(fns[fi](ctx, d, 1, (pm_compare)9, 2, o, 1, &c) == PM_STATUS_INVALID_ARGUMENT,
                  "%s bad cmp", f);
        PMT_CHECK(fns[fi](ctx, d, SIZE_MAX / 2, PM_LESS, 2, o, 1, &c) == PM_STATUS_OVERFLOW,
                  "%s n overflow", f);
        PMT_CHECK(fns[fi](ctx, d, 1, PM_LESS, 2, o, SIZE_MAX / 2, &c) == PM_STATUS_OVERFLOW,
                  "%s capacity overflow", f);
        c = 5;
        PMT_CHECK(fns[fi](ctx, NULL, 0, PM_LESS, 2, NULL, 0, &c) == PM_STATUS_OK && c == 0,
                  "%s empty", f);
    }
    pm_free(ctx, d);
    pm_free(ctx, o);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    size_t sizes[] = {0, 1, 2, 31, 32, 33, 1000, 65535, 65537, 131073, 1048577, PMT_BIG};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_size(ctx, sizes[i]);
    check_async(ctx);
#if !defined(__SANITIZE_ADDRESS__)
    if (dev == PM_DEVICE_CUDA) check_paths(ctx);
#endif
    check_bad_arguments(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_filter");
}
