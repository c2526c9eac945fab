/* Compaction and expansion (seeds 000, 003): pm_compact and pm_expand, and
 * on the CPU also their HistoPyramid paths, against serial references:
 * selectivities 0% .. 100%, counts 0..15 (marching cubes' range) and large
 * counts, truncation with guard elements, NULL outputs, bad arguments. */
#include "test_common.h"

#include "cpu/primitives_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define PMT_BIG 1000000
#else
#define PMT_BIG 10000000
#endif
#define GUARD 8
#define SENTINEL 0xA5A5A5A5A5A5A5A5ull

typedef pm_status (*compact_fn)(pm_context *, const uint8_t *, size_t, uint64_t *, size_t,
                                size_t *);
typedef pm_status (*expand_fn)(pm_context *, const uint32_t *, size_t, uint64_t *, uint32_t *,
                               size_t, size_t *);

/* Path 0: the public call (on the device under test). Path 1: the CPU's
 * HistoPyramid path, called directly (CPU contexts only: it trusts host
 * pointers). */
static int num_paths;
static const char *path_names[] = {"public", "histopyramid"};
static const compact_fn compact_paths[] = {pm_compact, pmi_cpu_compact_histopyramid};
static const expand_fn expand_paths[] = {pm_expand, pmi_cpu_expand_histopyramid};

static uint64_t *guarded_u64(pm_context *ctx, size_t cap)
{
    uint64_t *h = malloc((cap + GUARD) * sizeof *h);
    for (size_t i = 0; i < cap + GUARD; i++)
        h[i] = SENTINEL;
    uint64_t *d = pmt_to_ctx(ctx, h, (cap + GUARD) * sizeof *h);
    free(h);
    return d;
}

static void check_compact_cap(pm_context *ctx, int path, const uint8_t *d, size_t n,
                              const uint64_t *ref, size_t m, size_t cap, int null_out)
{
    uint64_t *dout = null_out ? NULL : guarded_u64(ctx, cap);
    size_t count = 4242;
    pm_status s = compact_paths[path](ctx, d, n, dout, cap, &count);
    PMT_CHECK(s == (m > cap ? PM_STATUS_TRUNCATED : PM_STATUS_OK) && count == m,
              "compact/%s n %zu cap %zu: %s, count %zu want %zu", path_names[path], n, cap,
              pm_status_string(s), count, m);
    if (dout) {
        uint64_t *out = pmt_to_host(ctx, dout, (cap + GUARD) * sizeof *out);
        size_t w = m < cap ? m : cap, bad = 0;
        for (size_t i = 0; i < w; i++)
            if (out[i] != ref[i] && bad++ < 3)
                PMT_CHECK(0, "compact/%s n %zu: out[%zu] = %" PRIu64 " want %" PRIu64,
                          path_names[path], n, i, out[i], ref[i]);
        for (size_t i = cap; i < cap + GUARD; i++)
            if (out[i] != SENTINEL && bad++ < 3)
                PMT_CHECK(0, "compact/%s n %zu: wrote past capacity %zu", path_names[path], n, cap);
        free(out);
        pm_free(ctx, dout);
    }
}

static void check_compact(pm_context *ctx, size_t n, double p)
{
    uint8_t *f = malloc(n ? n : 1);
    uint64_t *ref = malloc((n ? n : 1) * sizeof *ref);
    size_t m = 0;
    uint64_t thresh = (uint64_t)(p * 1000000.0);
    for (size_t i = 0; i < n; i++) {
        int on = pmt_rand() % 1000000 < thresh;
        f[i] = on ? (uint8_t)(1 + pmt_rand() % 255) : 0; /* any nonzero byte counts */
        if (on) ref[m++] = i;
    }
    uint8_t *d = pmt_to_ctx(ctx, f, n);
    /* The HistoPyramid path at 10^7 only with few outputs (time); it is
     * checked at 50% on 2^20 + 1 elements. */
    int paths = n >= PMT_BIG && p > 0.01 ? 1 : num_paths;
    for (int path = 0; path < paths; path++) {
        check_compact_cap(ctx, path, d, n, ref, m, m, 0);
        if (m && n < PMT_BIG) check_compact_cap(ctx, path, d, n, ref, m, m / 2, 0);
        check_compact_cap(ctx, path, d, n, ref, m, 0, 1);
    }
    pm_free(ctx, d);
    free(ref);
    free(f);
}

/* Expands counts with the given capacity (SIZE_MAX: exactly the total)
 * and compares the first min(total, capacity) outputs with a serial
 * expansion. which: 3 = both outputs, 1 = source only, 2 = local only. */
static void check_expand_cap(pm_context *ctx, int path, const uint32_t *h, const uint32_t *d,
                             size_t n, size_t cap, int which)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += h[i];
    if (cap == SIZE_MAX) cap = (size_t)total;
    uint64_t *dsrc = which & 1 ? guarded_u64(ctx, cap) : NULL;
    uint32_t *dloc = NULL;
    if (which & 2) {
        uint32_t *g = malloc((cap + GUARD) * sizeof *g);
        for (size_t i = 0; i < cap + GUARD; i++)
            g[i] = 0xDEADBEEFu;
        dloc = pmt_to_ctx(ctx, g, (cap + GUARD) * sizeof *g);
        free(g);
    }
    size_t count = 4242;
    pm_status s = expand_paths[path](ctx, d, n, dsrc, dloc, cap, &count);
    PMT_CHECK(s == (total > cap ? PM_STATUS_TRUNCATED : PM_STATUS_OK) && count == total,
              "expand/%s n %zu cap %zu: %s, count %zu want %" PRIu64, path_names[path], n, cap,
              pm_status_string(s), count, total);
    uint64_t *src = dsrc ? pmt_to_host(ctx, dsrc, (cap + GUARD) * sizeof *src) : NULL;
    uint32_t *loc = dloc ? pmt_to_host(ctx, dloc, (cap + GUARD) * sizeof *loc) : NULL;
    size_t k = 0, bad = 0;
    for (size_t i = 0; i < n && k < cap; i++)
        for (uint64_t j = 0; j < h[i] && k < cap; j++, k++) {
            if (src && src[k] != i && bad++ < 3)
                PMT_CHECK(0, "expand/%s n %zu: source[%zu] = %" PRIu64 " want %zu",
                          path_names[path], n, k, src[k], i);
            if (loc && loc[k] != j && bad++ < 3)
                PMT_CHECK(0, "expand/%s n %zu: local[%zu] = %u want %" PRIu64, path_names[path], n,
                          k, loc[k], j);
        }
    for (size_t i = cap; i < cap + GUARD; i++)
        if (((src && src[i] != SENTINEL) || (loc && loc[i] != 0xDEADBEEFu)) && bad++ < 3)
            PMT_CHECK(0, "expand/%s n %zu: wrote past capacity %zu", path_names[path], n, cap);
    free(src);
    free(loc);
    pm_free(ctx, dsrc);
    pm_free(ctx, dloc);
}

enum { COUNTS_MC, COUNTS_SPARSE, COUNTS_LARGE };

static void check_expand(pm_context *ctx, size_t n, int kind)
{
    uint32_t *h = malloc((n ? n : 1) * sizeof *h);
    uint64_t rare = n / 10 > 50 ? n / 10 : 50; /* about 10 large counts, ~1e6 outputs */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = pmt_rand();
        switch (kind) {
        case COUNTS_MC: h[i] = (uint32_t)(r % 16); break;
        case COUNTS_SPARSE: h[i] = r % 100 == 0 ? (uint32_t)(r >> 32) % 16 : 0; break;
        default: h[i] = r % rare == 0 ? (uint32_t)((r >> 32) % 200000) : (uint32_t)(r % 3); break;
        }
    }
    uint32_t *d = pmt_to_ctx(ctx, h, n * sizeof *h);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += h[i];
    for (int path = 0; path < num_paths; path++) {
        check_expand_cap(ctx, path, h, d, n, SIZE_MAX, 3);
        if (total) check_expand_cap(ctx, path, h, d, n, (size_t)total / 3, 3);
        check_expand_cap(ctx, path, h, d, n, (size_t)(total < 5000 ? total : 5000), 1);
        check_expand_cap(ctx, path, h, d, n, (size_t)(total < 5000 ? total : 5000), 2);
        size_t count = 1;
        pm_status s = expand_paths[path](ctx, d, n, NULL, NULL, 0, &count);
        PMT_CHECK(count == total && s == (total ? PM_STATUS_TRUNCATED : PM_STATUS_OK),
                  "expand/%s n %zu: capacity 0 gives %s, count %zu", path_names[path], n,
                  pm_status_string(s), count);
    }
    pm_free(ctx, d);
    free(h);
}

/* Counts of 2^32 - 1: the total needs 64 bits; only the first outputs fit. */
static void check_expand_huge_counts(pm_context *ctx)
{
    uint32_t h[5] = {UINT32_MAX, 0, UINT32_MAX, 7, UINT32_MAX};
    uint32_t *d = pmt_to_ctx(ctx, h, sizeof h);
    for (int path = 0; path < num_paths; path++) {
        check_expand_cap(ctx, path, h, d, 5, 1000, 3);
        size_t count = 0;
        uint64_t *src = guarded_u64(ctx, 1);
        pm_status s = expand_paths[path](ctx, d, 5, src, NULL, 1, &count);
        PMT_CHECK(s == PM_STATUS_TRUNCATED && count == 3 * (size_t)UINT32_MAX + 7,
                  "expand/%s huge counts: %s, count %zu", path_names[path], pm_status_string(s),
                  count);
        pm_free(ctx, src);
    }
    pm_free(ctx, d);
}

/* The device-count variants: the full count lands in context memory and a
 * truncated call still returns OK; outputs match the synchronous call. */
static void check_async(pm_context *ctx)
{
    size_t n = 100003;
    uint8_t *f = malloc(n);
    uint32_t *c = malloc(n * sizeof *c);
    size_t m = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        f[i] = pmt_rand() % 10 == 0;
        c[i] = (uint32_t)(pmt_rand() % 16);
        m += f[i];
        total += c[i];
    }
    uint8_t *df = pmt_to_ctx(ctx, f, n);
    uint32_t *dc = pmt_to_ctx(ctx, c, n * sizeof *c);
    uint64_t *dcount, *a = guarded_u64(ctx, m), *b = guarded_u64(ctx, m);
    PMT_OK(pm_alloc(ctx, sizeof *dcount, (void **)&dcount));
    size_t cap = m / 2, k;
    uint64_t hc = 0;
    PMT_OK(pm_compact_async(ctx, df, n, a, cap, dcount));
    PMT_OK(pm_context_synchronize(ctx));
    PMT_OK(pm_download(ctx, &hc, dcount, sizeof hc));
    PMT_CHECK(hc == m, "compact_async count %" PRIu64 " want %zu", hc, m);
    PMT_CHECK(pm_compact(ctx, df, n, b, cap, &k) == PM_STATUS_TRUNCATED, "compact truncation");
    uint64_t *ha = pmt_to_host(ctx, a, (m + GUARD) * sizeof *ha);
    uint64_t *hb = pmt_to_host(ctx, b, (m + GUARD) * sizeof *hb);
    PMT_CHECK(memcmp(ha, hb, (m + GUARD) * sizeof *ha) == 0, "compact_async output differs");
    free(ha);
    free(hb);
    PMT_OK(pm_expand_async(ctx, dc, n, NULL, NULL, 0, dcount));
    PMT_OK(pm_context_synchronize(ctx));
    PMT_OK(pm_download(ctx, &hc, dcount, sizeof hc));
    PMT_CHECK(hc == total, "expand_async count %" PRIu64 " want %" PRIu64, hc, total);
    PMT_OK(pm_compact_async(ctx, NULL, 0, NULL, 0, dcount));
    PMT_OK(pm_download(ctx, &hc, dcount, sizeof hc));
    PMT_CHECK(hc == 0, "compact_async of nothing gives %" PRIu64, hc);
    pm_free(ctx, dcount);
    pm_free(ctx, a);
    pm_free(ctx, b);
    pm_free(ctx, df);
    pm_free(ctx, dc);
    free(f);
    free(c);
}

static void check_bad_arguments(pm_context *ctx)
{
    uint8_t f = 1;
    uint32_t c = 1;
    uint8_t *df = pmt_to_ctx(ctx, &f, 1);
    uint32_t *dc = pmt_to_ctx(ctx, &c, sizeof c);
    uint64_t *o = guarded_u64(ctx, 1);
    size_t k;
    PMT_CHECK(pm_compact(NULL, df, 1, o, 1, &k) == PM_STATUS_INVALID_ARGUMENT, "compact NULL ctx");
    PMT_CHECK(pm_compact(ctx, NULL, 1, o, 1, &k) == PM_STATUS_INVALID_ARGUMENT,
              "compact NULL flags");
    PMT_CHECK(pm_compact(ctx, df, 1, NULL, 1, &k) == PM_STATUS_INVALID_ARGUMENT,
              "compact NULL out");
    PMT_CHECK(pm_compact(ctx, df, 1, o, 1, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "compact NULL count");
    PMT_CHECK(pm_compact(ctx, df, 1, o, SIZE_MAX / 2, &k) == PM_STATUS_OVERFLOW,
              "compact capacity overflow");
    PMT_CHECK(pm_expand(NULL, dc, 1, o, NULL, 1, &k) == PM_STATUS_INVALID_ARGUMENT,
              "expand NULL ctx");
    PMT_CHECK(pm_expand(ctx, NULL, 1, o, NULL, 1, &k) == PM_STATUS_INVALID_ARGUMENT,
              "expand NULL counts");
    PMT_CHECK(pm_expand(ctx, dc, 1, o, NULL, 1, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "expand NULL count");
    PMT_CHECK(pm_expand(ctx, dc, SIZE_MAX / 2, o, NULL, 1, &k) == PM_STATUS_OVERFLOW,
              "expand n overflow");
    PMT_CHECK(pm_expand(ctx, dc, 1, o, NULL, SIZE_MAX / 2, &k) == PM_STATUS_OVERFLOW,
              "expand capacity overflow");
    k = 3;
    PMT_CHECK(pm_compact(ctx, NULL, 0, NULL, 0, &k) == PM_STATUS_OK && k == 0, "compact empty");
    k = 3;
    PMT_CHECK(pm_expand(ctx, NULL, 0, NULL, NULL, 0, &k) == PM_STATUS_OK && k == 0, "expand empty");
    pm_free(ctx, df);
    pm_free(ctx, dc);
    pm_free(ctx, o);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    num_paths = dev == PM_DEVICE_CPU ? 2 : 1;

    size_t sizes[] = {0, 1, 2, 31, 32, 33, 1000, 65535, 65537, 131071, 1048577, PMT_BIG};
    const double sel[] = {0.0, 0.001, 0.01, 0.5, 1.0};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t k = 0; k < 5; k++) {
            if (sizes[i] == PMT_BIG && k != 1 && k != 3) continue; /* time */
            check_compact(ctx, sizes[i], sel[k]);
        }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (sizes[i] <= 131071) check_expand(ctx, sizes[i], COUNTS_MC);
        check_expand(ctx, sizes[i], COUNTS_SPARSE);
        if (sizes[i] <= 131071) check_expand(ctx, sizes[i], COUNTS_LARGE);
    }
    check_expand(ctx, 262145, COUNTS_MC);
    check_expand_huge_counts(ctx);
    check_async(ctx);
    check_bad_arguments(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_compact");
}
