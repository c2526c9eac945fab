/* CUDA-specific behaviour of the primitives against serial references on
 * the host: odd sizes and unaligned pointers (16-byte load paths), in-place
 * scan, truncation, device-side counts of the async variants, a caller
 * stream, scratch reuse across sizes, CUDA failures as statuses, and the
 * kernel preloading thread (src/cuda/preload.cu). Skips
 * (77) on the CPU backend and without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_common.h"

#ifdef PM_HAVE_CUDA
/* The two runtime calls the caller-stream test needs (C linkage in cudart). */
typedef struct CUstream_st *pmt_stream;
extern int cudaStreamCreate(pmt_stream *s);
extern int cudaStreamDestroy(pmt_stream s);
/* The kernel preloading thread (src/cuda/preload.cu): waits for it, then
 * returns how many kernels it loaded, how many it was listed, its time. */
int pmi_cuda_preload_wait(pm_context *ctx, int *listed, double *ms);
#endif

static const size_t sizes[] = {1,    2,    3,    31,   32,    33,      255,           4095,
                               4096, 4097, 8191, 8193, 65537, 1000003, (1u << 22) + 5};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static float rand_float(void) { return (float)(pmt_uniform() * 2.0 - 1.0); }

static void test_reduce(pm_context *ctx)
{
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        for (size_t shift = 0; shift < 2; shift++) {
            float *h = malloc((n + 1) * sizeof *h);
            for (size_t i = 0; i < n + 1; i++)
                h[i] = rand_float() + 1.5f; /* > 0 for geomean */
            float *d = pmt_to_ctx(ctx, h, (n + 1) * sizeof *h);
            const float *in = d + shift, *hin = h + shift;
            double sum = 0, abs = 0, lg = 0, mn = INFINITY, mx = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                sum += hin[i];
                abs += fabs(hin[i]);
                lg += log((double)hin[i]);
                mn = fmin(mn, hin[i]);
                mx = fmax(mx, hin[i]);
            }
            double r;
            PMT_OK(pm_reduce_f32(ctx, in, n, PM_REDUCE_SUM, &r));
            PMT_CHECK(fabs(r - sum) <= 1e-12 * abs + 1e-300, "sum n=%zu: %.17g vs %.17g", n, r,
                      sum);
            PMT_OK(pm_reduce_f32(ctx, in, n, PM_REDUCE_MEAN, &r));
            PMT_CHECK(fabs(r - sum / n) <= 1e-12 * abs / n, "mean n=%zu", n);
            PMT_OK(pm_reduce_f32(ctx, in, n, PM_REDUCE_MIN, &r));
            PMT_CHECK(r == mn, "min n=%zu: %g vs %g", n, r, mn);
            PMT_OK(pm_reduce_f32(ctx, in, n, PM_REDUCE_MAX, &r));
            PMT_CHECK(r == mx, "max n=%zu", n);
            PMT_OK(pm_reduce_f32(ctx, in, n, PM_REDUCE_GEOMEAN, &r));
            PMT_CHECK(fabs(r - exp(lg / n)) <= 1e-12 * exp(lg / n), "geomean n=%zu", n);
            pm_free(ctx, d);
            free(h);
        }
    }
    /* NaN: propagates for SUM, ignored by MIN unless everything is NaN. */
    float h[5] = {3, NAN, -2, 7, NAN};
    float *d = pmt_to_ctx(ctx, h, sizeof h);
    double r;
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_SUM, &r));
    PMT_CHECK(isnan(r), "NaN sum");
    PMT_OK(pm_reduce_f32(ctx, d, 5, PM_REDUCE_MIN, &r));
    PMT_CHECK(r == -2, "min ignores NaN");
    PMT_OK(pm_reduce_f32(ctx, d + 4, 1, PM_REDUCE_MAX, &r));
    PMT_CHECK(isnan(r), "all-NaN max");
    pm_free(ctx, d);
    /* Strided images, aligned and not, never reading the padding (NaN). */
    const size_t dims[][3] = {{1920, 1080, 1924}, {37, 19, 41}, {1, 5, 3}, {333, 7, 334}};
    for (int k = 0; k < 4; k++) {
        size_t w = dims[k][0], hgt = dims[k][1], s = dims[k][2], tot = s * hgt;
        float *img = malloc(tot * sizeof *img);
        double sum = 0, abs = 0, mx = -INFINITY;
        for (size_t y = 0; y < hgt; y++)
            for (size_t x = 0; x < s; x++) {
                float v = x < w ? rand_float() : NAN;
                img[y * s + x] = v;
                if (x < w) sum += v, abs += fabs(v), mx = fmax(mx, v);
            }
        float *di = pmt_to_ctx(ctx, img, tot * sizeof *img);
        PMT_OK(pm_reduce_image_f32(ctx, di, w, hgt, s, PM_REDUCE_SUM, &r));
        PMT_CHECK(fabs(r - sum) <= 1e-12 * abs, "image sum %zux%zu/%zu", w, hgt, s);
        PMT_OK(pm_reduce_image_f32(ctx, di, w, hgt, s, PM_REDUCE_MAX, &r));
        PMT_CHECK(r == mx, "image max %zux%zu/%zu", w, hgt, s);
        pm_free(ctx, di);
        free(img);
    }
}

static void test_scan(pm_context *ctx)
{
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        for (int mode = 0; mode < 3; mode++) { /* aligned, shifted, in place */
            size_t shift = mode == 1;
            uint32_t *h = malloc((n + 1) * sizeof *h), *ref = malloc(n * sizeof *ref);
            for (size_t i = 0; i < n + 1; i++)
                h[i] = (uint32_t)(pmt_rand() % 1000);
            uint64_t acc = 0;
            for (size_t i = 0; i < n; i++)
                ref[i] = (uint32_t)acc, acc += h[i + shift];
            uint32_t *d = pmt_to_ctx(ctx, h, (n + 1) * sizeof *h), *o;
            PMT_OK(pm_alloc(ctx, (n + 1) * sizeof *o, (void **)&o));
            uint32_t *out = mode == 2 ? d : o + shift;
            uint64_t total = 0;
            PMT_OK(pm_scan_exclusive_u32(ctx, d + shift, n, out, &total));
            uint32_t *got = pmt_to_host(ctx, out, n * sizeof *got);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += got[i] != ref[i];
            PMT_CHECK(bad == 0 && total == acc, "scan n=%zu mode %d: %zu wrong, total %llu/%llu", n,
                      mode, bad, (unsigned long long)total, (unsigned long long)acc);
            free(got);
            free(h);
            free(ref);
            pm_free(ctx, d);
            pm_free(ctx, o);
        }
    }
    /* Overflow: the status says so and the total stays exact. */
    size_t n = 70000;
    uint32_t *h = malloc(n * sizeof *h);
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++)
        h[i] = 0xfff00000u + (uint32_t)(pmt_rand() & 0xffff), acc += h[i];
    uint32_t *d = pmt_to_ctx(ctx, h, n * sizeof *h);
    uint64_t total = 0;
    pm_status s = pm_scan_exclusive_u32(ctx, d, n, d, &total);
    PMT_CHECK(s == PM_STATUS_OVERFLOW && total == acc, "overflow: %s total %llu vs %llu",
              pm_status_string(s), (unsigned long long)total, (unsigned long long)acc);
    pm_free(ctx, d);
    free(h);
}

static int pass(pm_compare c, float x, float t)
{
    return c == PM_LESS ? x < t : c == PM_LESS_EQUAL ? x <= t : c == PM_GREATER ? x > t : x >= t;
}

/* One filter call on h[shift .. shift + n) (host copy h of n + 1 values):
 * full output, truncation, the async count, and Horn's method if asked. */
static void filter_case(pm_context *ctx, const float *h, size_t n, size_t shift, pm_compare c,
                        float thr, int horn)
{
    if (n > ((size_t)1 << 40)) return; /* bounds the sizes for the compiler's allocation checks */
    float *ref = malloc((n ? n : 1) * sizeof *ref);
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (pass(c, h[i + shift], thr)) ref[cnt++] = h[i + shift];
    float *d = pmt_to_ctx(ctx, h, (n + 1) * sizeof *h), *o;
    PMT_OK(pm_alloc(ctx, n * sizeof *o, (void **)&o));
    size_t got_n = 0;
    PMT_OK(pm_filter_f32(ctx, d + shift, n, c, thr, o, n, &got_n));
    float *got = pmt_to_host(ctx, o, got_n * sizeof *got);
    PMT_CHECK(got_n == cnt && memcmp(got, ref, cnt * sizeof *got) == 0,
              "filter n=%zu cmp %d shift %zu: %zu vs %zu", n, (int)c, shift, got_n, cnt);
    free(got);
    /* Truncation: the first half written, full count reported. */
    size_t cap = cnt / 2;
    pm_status s = pm_filter_f32(ctx, d + shift, n, c, thr, o, cap, &got_n);
    PMT_CHECK(got_n == cnt && (cap == cnt ? s == PM_STATUS_OK : s == PM_STATUS_TRUNCATED),
              "filter truncation n=%zu", n);
    got = pmt_to_host(ctx, o, cap * sizeof *got);
    PMT_CHECK(memcmp(got, ref, cap * sizeof *got) == 0, "filter truncated prefix");
    free(got);
    /* Async: the count stays on the device. */
    uint64_t *cd, ch = 0;
    PMT_OK(pm_alloc(ctx, sizeof *cd, (void **)&cd));
    PMT_OK(pm_filter_f32_async(ctx, d + shift, n, c, thr, o, n, cd));
    PMT_OK(pm_download(ctx, &ch, cd, sizeof ch));
    PMT_CHECK(ch == cnt, "filter async count n=%zu", n);
    if (horn) {
        PMT_OK(pm_filter_horn_f32(ctx, d + shift, n, c, thr, o, n, &got_n));
        got = pmt_to_host(ctx, o, got_n * sizeof *got);
        PMT_CHECK(got_n == cnt && memcmp(got, ref, cnt * sizeof *got) == 0, "horn n=%zu", n);
        free(got);
    }
    pm_free(ctx, cd);
    pm_free(ctx, d);
    pm_free(ctx, o);
    free(ref);
}

static void test_filter(pm_context *ctx)
{
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        for (int v = 0; v < 8; v++) {
            pm_compare c = (pm_compare)(v & 3);
            size_t shift = (v >> 2) & 1;
            float thr = (float)(pmt_uniform() * 2 - 1);
            float *h = malloc((n + 1) * sizeof *h);
            for (size_t i = 0; i < n + 1; i++)
                h[i] = pmt_rand() % 50 == 0 ? NAN : pmt_rand() % 7 == 0 ? thr : rand_float();
            filter_case(ctx, h, n, shift, c, thr, n < 100000);
            free(h);
        }
    }
    /* The sizes above all take the single look-back pass (fewer than
     * FLT_STAGE_MIN_N = 2^26 elements, src/cuda/filter.cu). From 2^26 on a
     * device-side sample picks the path: about 1% kept takes the staged
     * two-pass filter (the count then comes from its copy kernel), 10% the
     * look-back pass; aligned and not. tests/test_filter.c covers the
     * boundary and inputs that mislead the sample. */
    const size_t n = ((size_t)1 << 26) + 3;
    float *h = malloc((n + 1) * sizeof *h);
    for (size_t i = 0; i < n + 1; i++)
        h[i] = pmt_rand() % 50 == 0 ? NAN : rand_float();
    for (size_t shift = 0; shift < 2; shift++) {
        filter_case(ctx, h, n, shift, PM_LESS, -0.98f, 0);
        filter_case(ctx, h, n, shift, PM_GREATER_EQUAL, 0.8f, 0);
    }
    free(h);
}

static void test_compact(pm_context *ctx)
{
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        for (int v = 0; v < 4; v++) {
            size_t shift = v & 1;
            unsigned density = v < 2 ? 2 : 100; /* 50% and 1% */
            uint8_t *h = malloc(n + 1);
            uint64_t *ref = malloc(n * sizeof *ref);
            for (size_t i = 0; i < n + 1; i++)
                h[i] = pmt_rand() % density == 0 ? (uint8_t)(1 + pmt_rand() % 255) : 0;
            size_t cnt = 0;
            for (size_t i = 0; i < n; i++)
                if (h[i + shift]) ref[cnt++] = i;
            uint8_t *d = pmt_to_ctx(ctx, h, n + 1);
            uint64_t *o, *cd, ch = 0;
            PMT_OK(pm_alloc(ctx, n * sizeof *o, (void **)&o));
            PMT_OK(pm_alloc(ctx, sizeof *cd, (void **)&cd));
            size_t got_n = 0;
            PMT_OK(pm_compact(ctx, d + shift, n, o, n, &got_n));
            uint64_t *got = pmt_to_host(ctx, o, got_n * sizeof *got);
            PMT_CHECK(got_n == cnt && memcmp(got, ref, cnt * sizeof *got) == 0,
                      "compact n=%zu v=%d: %zu vs %zu", n, v, got_n, cnt);
            free(got);
            PMT_OK(pm_compact_async(ctx, d + shift, n, o, cnt / 3, cd));
            PMT_OK(pm_download(ctx, &ch, cd, sizeof ch));
            got = pmt_to_host(ctx, o, cnt / 3 * sizeof *got);
            PMT_CHECK(ch == cnt && memcmp(got, ref, cnt / 3 * sizeof *got) == 0,
                      "compact async n=%zu", n);
            free(got);
            pm_free(ctx, d);
            pm_free(ctx, o);
            pm_free(ctx, cd);
            free(h);
            free(ref);
        }
    }
}

static void test_expand(pm_context *ctx)
{
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        uint32_t *h = malloc(n * sizeof *h);
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++) {
            h[i] = pmt_rand() % 3 ? 0 : (uint32_t)(pmt_rand() % 6);
            total += h[i];
        }
        uint64_t *rs = malloc((total + 1) * sizeof *rs);
        uint32_t *rl = malloc((total + 1) * sizeof *rl);
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < h[i]; j++)
                rs[k] = i, rl[k] = j, k++;
        uint32_t *d = pmt_to_ctx(ctx, h, n * sizeof *h), *ol;
        uint64_t *os, *cd, ch = 0;
        PMT_OK(pm_alloc(ctx, (total + 1) * sizeof *os, (void **)&os));
        PMT_OK(pm_alloc(ctx, (total + 1) * sizeof *ol, (void **)&ol));
        PMT_OK(pm_alloc(ctx, sizeof *cd, (void **)&cd));
        size_t got_n = 0;
        PMT_OK(pm_expand(ctx, d, n, os, ol, total + 1, &got_n));
        uint64_t *gs = pmt_to_host(ctx, os, total * sizeof *gs);
        uint32_t *gl = pmt_to_host(ctx, ol, total * sizeof *gl);
        PMT_CHECK(got_n == total && memcmp(gs, rs, total * sizeof *gs) == 0 &&
                      memcmp(gl, rl, total * sizeof *gl) == 0,
                  "expand n=%zu: %zu vs %llu", n, got_n, (unsigned long long)total);
        free(gs);
        free(gl);
        size_t cap = total / 2;
        pm_status s = pm_expand(ctx, d, n, os, NULL, cap, &got_n);
        PMT_CHECK(got_n == total && (cap == total ? s == PM_STATUS_OK : s == PM_STATUS_TRUNCATED),
                  "expand truncation n=%zu", n);
        PMT_OK(pm_expand_async(ctx, d, n, os, ol, total, cd));
        PMT_OK(pm_download(ctx, &ch, cd, sizeof ch));
        PMT_CHECK(ch == total, "expand async count n=%zu", n);
        /* The pyramid API: build, free the counts, traverse a sub-range. */
        pm_histopyramid *hp = NULL;
        PMT_OK(pm_histopyramid_build(ctx, d, n, &hp));
        pm_free(ctx, d);
        uint64_t t = 0;
        PMT_OK(pm_histopyramid_total(ctx, hp, &t));
        PMT_CHECK(t == total, "histopyramid total n=%zu", n);
        if (total > 2) {
            uint64_t first = total / 3;
            size_t num = (size_t)(total - first - 1);
            PMT_OK(pm_histopyramid_traverse(ctx, hp, first, num, os, ol));
            gs = pmt_to_host(ctx, os, num * sizeof *gs);
            gl = pmt_to_host(ctx, ol, num * sizeof *gl);
            PMT_CHECK(memcmp(gs, rs + first, num * sizeof *gs) == 0 &&
                          memcmp(gl, rl + first, num * sizeof *gl) == 0,
                      "traverse sub-range n=%zu", n);
            free(gs);
            free(gl);
        }
        s = pm_histopyramid_traverse(ctx, hp, total, 1, os, ol);
        PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "key past total: %s", pm_status_string(s));
        pm_histopyramid_destroy(ctx, hp);
        pm_free(ctx, os);
        pm_free(ctx, ol);
        pm_free(ctx, cd);
        free(h);
        free(rs);
        free(rl);
    }
}

/* A context on the caller's stream runs the same work correctly. */
static void test_caller_stream(void)
{
#ifdef PM_HAVE_CUDA
    pmt_stream st = NULL;
    PMT_CHECK(cudaStreamCreate(&st) == 0, "cudaStreamCreate");
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CUDA, 0, 0, st};
    pm_context *c2 = NULL;
    PMT_OK(pm_context_create(&desc, &c2));
    size_t n = 300001;
    uint32_t *h = malloc(n * sizeof *h);
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++)
        h[i] = (uint32_t)(pmt_rand() & 7), acc += h[i];
    uint32_t *d = pmt_to_ctx(c2, h, n * sizeof *h);
    uint64_t total = 0;
    PMT_OK(pm_scan_exclusive_u32(c2, d, n, d, &total));
    uint32_t *got = pmt_to_host(c2, d, n * sizeof *got);
    uint64_t run = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += got[i] != (uint32_t)run, run += h[i];
    PMT_CHECK(bad == 0 && total == acc, "caller stream scan");
    free(got);
    free(h);
    pm_free(c2, d);
    pm_context_destroy(c2);
    cudaStreamDestroy(st);
#endif
}

/* Kernel preloading, run first, while the first context's thread is still
 * loading: contexts destroyed at once stop their thread part way; a
 * context computes while its thread loads; the thread loads every kernel
 * its modules list. With PYRAMESH_PRELOAD=0 (the CTest variant
 * test_cuda_backend_cuda_nopreload) no thread runs. */
static void test_preload(pm_context *first, const char *argv0)
{
#ifdef PM_HAVE_CUDA
    const char *e = getenv("PYRAMESH_PRELOAD");
    const int off = e && strcmp(e, "0") == 0;
    /* Processes that exit while their context's thread loads, without
     * pm_context_destroy ("exit-early" below): the exit handler stops the
     * thread before CUDA's teardown. */
    char cmd[4200];
    if (strlen(argv0) < 4000 && !strchr(argv0, '\'')) {
        snprintf(cmd, sizeof cmd, "'%s' exit-early", argv0);
        for (int i = 0; i < 8; i++) {
            int rc = system(cmd);
            PMT_CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
                      "a process exiting while its kernels load: status %d", rc);
        }
    }
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CUDA, 0, 0, NULL};
    for (int i = 0; i < 6; i++) {
        pm_context *c = NULL;
        PMT_OK(pm_context_create(&desc, &c));
        pm_context_destroy(c);
    }
    pm_context *c2 = NULL;
    PMT_OK(pm_context_create(&desc, &c2));
    size_t n = 100003;
    uint32_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = 1;
    uint32_t *d = pmt_to_ctx(c2, h, n * sizeof *h);
    uint64_t total = 0;
    PMT_OK(pm_scan_exclusive_u32(c2, d, n, d, &total));
    PMT_CHECK(total == n, "scan while preloading: %llu", (unsigned long long)total);
    pm_context *ctxs[2] = {first, c2};
    for (int i = 0; i < 2; i++) {
        double ms = 0;
        int listed = 0, loaded = pmi_cuda_preload_wait(ctxs[i], &listed, &ms);
        printf("preload, %s context: %d of %d kernels in %.1f ms\n", i ? "second" : "first",
               loaded, listed, ms);
        if (off)
            PMT_CHECK(listed == 0 && loaded == 0, "PYRAMESH_PRELOAD=0, yet %d kernels preloaded",
                      loaded);
        else
            PMT_CHECK(listed > 0 && loaded == listed, "preloaded %d of the %d kernels listed",
                      loaded, listed);
    }
    free(h);
    pm_free(c2, d);
    pm_context_destroy(c2);
#else
    (void)first;
    (void)argv0;
#endif
}

static void test_errors(pm_context *ctx)
{
    void *p = NULL;
    pm_status s = pm_alloc(ctx, (size_t)1 << 52, &p);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && p == NULL &&
                  strstr(pm_last_error(), "4503599627370496") != NULL,
              "huge alloc: %s: %s", pm_status_string(s), pm_last_error());
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CUDA, 4096, 0, NULL};
    pm_context *c2 = NULL;
    s = pm_context_create(&desc, &c2);
    PMT_CHECK(s != PM_STATUS_OK && c2 == NULL, "device 4096 accepted");
    /* The context still works after the failures. */
    float h[3] = {1, 2, 3};
    float *d = pmt_to_ctx(ctx, h, sizeof h);
    double r = 0;
    PMT_OK(pm_reduce_f32(ctx, d, 3, PM_REDUCE_SUM, &r));
    PMT_CHECK(r == 6, "reduce after errors");
    pm_free(ctx, d);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (argc == 2 && strcmp(argv[1], "exit-early") == 0) {
        /* test_preload's child: a context left to the process's exit. */
        pm_context_desc desc = {sizeof desc, PM_DEVICE_CUDA, 0, 0, NULL};
        return pm_context_create(&desc, &ctx) == PM_STATUS_OK ? 0 : 3;
    }
    if (argc < 2 || strcmp(argv[1], "cuda") != 0) {
        printf("skipped: CUDA-only test\n");
        return PMT_SKIP;
    }
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    test_preload(ctx, argv[0]);
    test_reduce(ctx);
    test_scan(ctx);
    test_filter(ctx);
    test_compact(ctx);
    test_expand(ctx);
    test_caller_stream();
    test_errors(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_cuda_backend");
}
