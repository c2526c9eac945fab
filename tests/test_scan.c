/* Exclusive scan (seed 002): pm_scan_exclusive_u32 against a serial
 * reference, in place and out of place, the 64-bit total, the 32-bit
 * overflow status, bad arguments. */
#include "test_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define PMT_BIG 1000000
#else
#define PMT_BIG 10000000
#endif

/* Scans n random values below `range` (0 = full 32-bit range) and checks
 * every prefix, the total, and the status (OVERFLOW exactly when the total
 * exceeds 32 bits). */
static void check_scan(pm_context *ctx, size_t n, uint32_t range, int in_place)
{
    uint32_t *in = malloc((n ? n : 1) * sizeof *in);
    for (size_t i = 0; i < n; i++)
        in[i] = range ? (uint32_t)(pmt_rand() % range) : (uint32_t)pmt_rand();
    uint32_t *din = pmt_to_ctx(ctx, in, n * sizeof *in);
    uint32_t *dout = in_place ? din : pmt_to_ctx(ctx, in, n * sizeof *in);
    uint64_t total = 12345;
    pm_status s = pm_scan_exclusive_u32(ctx, din, n, dout, &total);
    uint64_t ref = 0;
    for (size_t i = 0; i < n; i++)
        ref += in[i];
    PMT_CHECK(total == ref, "n %zu: total %" PRIu64 " vs %" PRIu64, n, total, ref);
    if (ref > UINT32_MAX) {
        PMT_CHECK(s == PM_STATUS_OVERFLOW, "n %zu: total %" PRIu64 " gives %s", n, ref,
                  pm_status_string(s));
    } else {
        PMT_CHECK(s == PM_STATUS_OK, "n %zu: status %s", n, pm_status_string(s));
        uint32_t *out = pmt_to_host(ctx, dout, n * sizeof *out);
        uint64_t run = 0;
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            if (out[i] != run && bad++ < 3)
                PMT_CHECK(out[i] == run, "n %zu%s: out[%zu] = %u, want %" PRIu64, n,
                          in_place ? " in place" : "", i, out[i], run);
            run += in[i];
        }
        free(out);
        /* total may be NULL */
        if (!in_place) PMT_OK(pm_scan_exclusive_u32(ctx, din, n, dout, NULL));
    }
    if (!in_place) pm_free(ctx, dout);
    pm_free(ctx, din);
    free(in);
}

static void check_overflow_edges(pm_context *ctx)
{
    /* Total exactly 2^32 - 1 fits; one more does not. */
    uint32_t a[4] = {UINT32_MAX - 10, 4, 6, 0};
    uint32_t *d = pmt_to_ctx(ctx, a, sizeof a);
    uint32_t *o = pmt_to_ctx(ctx, a, sizeof a);
    uint64_t total = 0;
    PMT_CHECK(pm_scan_exclusive_u32(ctx, d, 4, o, &total) == PM_STATUS_OK && total == UINT32_MAX,
              "total 2^32-1 must fit (got %" PRIu64 ")", total);
    uint32_t *h = pmt_to_host(ctx, o, sizeof a);
    PMT_CHECK(h[3] == UINT32_MAX && h[1] == UINT32_MAX - 10, "prefixes near 2^32: %u %u", h[1],
              h[3]);
    free(h);
    a[3] = 1; /* the total overflows, no prefix does */
    PMT_OK(pm_upload(ctx, d, a, sizeof a));
    PMT_CHECK(pm_scan_exclusive_u32(ctx, d, 4, o, &total) == PM_STATUS_OVERFLOW &&
                  total == (uint64_t)UINT32_MAX + 1,
              "total 2^32 must overflow and be exact (got %" PRIu64 ")", total);
    pm_free(ctx, d);
    pm_free(ctx, o);
    /* Many large values over several chunks: the 64-bit total stays exact. */
    check_scan(ctx, 300007, 0, 0);
}

static void check_bad_arguments(pm_context *ctx)
{
    uint32_t x = 1;
    uint32_t *d = pmt_to_ctx(ctx, &x, sizeof x);
    uint64_t t;
    PMT_CHECK(pm_scan_exclusive_u32(NULL, d, 1, d, &t) == PM_STATUS_INVALID_ARGUMENT, "NULL ctx");
    PMT_CHECK(pm_scan_exclusive_u32(ctx, NULL, 1, d, &t) == PM_STATUS_INVALID_ARGUMENT, "NULL in");
    PMT_CHECK(pm_scan_exclusive_u32(ctx, d, 1, NULL, &t) == PM_STATUS_INVALID_ARGUMENT, "NULL out");
    PMT_CHECK(pm_scan_exclusive_u32(ctx, d, SIZE_MAX / 2, d, &t) == PM_STATUS_OVERFLOW,
              "byte count overflow");
    t = 7;
    PMT_CHECK(pm_scan_exclusive_u32(ctx, NULL, 0, NULL, &t) == PM_STATUS_OK && t == 0,
              "empty scan");
    pm_free(ctx, d);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    size_t sizes[] = {0,     1,     2,      31,     32,     33,      1000,   65535,
                      65536, 65537, 131071, 131073, 262145, 1048575, PMT_BIG};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        check_scan(ctx, sizes[i], 16, 0);
        check_scan(ctx, sizes[i], 1000, 1);
    }
    check_overflow_edges(ctx);
    check_bad_arguments(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_scan");
}
