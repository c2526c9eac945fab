/* The HistoPyramid itself (seed 000): build, total and traversal of key
 * ranges against a serial expansion; 64-bit totals (counts of 2^32 - 1,
 * and totals past 2^32 from small counts, where the lower levels are 32-bit
 * and the upper ones 64-bit); rejected keys; bad arguments. */
#include "test_common.h"

#include "cpu/primitives_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define PMT_BIG 1000000
#else
#define PMT_BIG 10000000
#endif

/* Serial reference of key k: the first source i whose inclusive prefix sum
 * exceeds k (binary search). */
static uint64_t ref_source(const uint64_t *incl, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (incl[mid] > k)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Builds from h (host) and traverses `num` keys starting at `first`,
 * comparing with the reference; returns the pyramid's total. */
static uint64_t check_keys(pm_context *ctx, const uint32_t *h, size_t n, uint64_t first, size_t num,
                           const char *what)
{
    uint64_t *incl = malloc((n ? n : 1) * sizeof *incl);
    uint64_t run = 0;
    for (size_t i = 0; i < n; i++)
        incl[i] = run += h[i];
    uint32_t *d = pmt_to_ctx(ctx, h, n * sizeof *h);
    pm_histopyramid *hp = NULL;
    PMT_OK(pm_histopyramid_build(ctx, d, n, &hp));
    pm_free(ctx, d); /* the pyramid owns its levels: counts may go */
    uint64_t total = 0;
    PMT_OK(pm_histopyramid_total(ctx, hp, &total));
    PMT_CHECK(total == run, "%s n %zu: total %" PRIu64 " want %" PRIu64, what, n, total, run);
    if (first + num > total) num = first < total ? (size_t)(total - first) : 0;
    if (num) {
        uint64_t *dsrc;
        uint32_t *dloc;
        PMT_OK(pm_alloc(ctx, num * sizeof *dsrc, (void **)&dsrc));
        PMT_OK(pm_alloc(ctx, num * sizeof *dloc, (void **)&dloc));
        PMT_OK(pm_histopyramid_traverse(ctx, hp, first, num, dsrc, dloc));
        uint64_t *src = pmt_to_host(ctx, dsrc, num * sizeof *src);
        uint32_t *loc = pmt_to_host(ctx, dloc, num * sizeof *loc);
        size_t bad = 0;
        for (size_t i = 0; i < num; i++) {
            uint64_t s = ref_source(incl, n, first + i);
            uint64_t l = first + i - (incl[s] - h[s]); /* key minus the start of s's range */
            if ((src[i] != s || loc[i] != l) && bad++ < 3)
                PMT_CHECK(0,
                          "%s n %zu key %" PRIu64 ": (%" PRIu64 ", %u), want (%" PRIu64 ", %" PRIu64
                          ")",
                          what, n, first + i, src[i], loc[i], s, l);
        }
        /* Either output may be NULL. */
        PMT_OK(pm_histopyramid_traverse(ctx, hp, first, num, NULL, dloc));
        PMT_OK(pm_histopyramid_traverse(ctx, hp, first, num, dsrc, NULL));
        free(src);
        free(loc);
        pm_free(ctx, dsrc);
        pm_free(ctx, dloc);
    }
    /* Keys at or past the total are rejected (NULL outputs: nothing may be
     * written anyway, and host pointers would not suit a device). */
    PMT_CHECK(pm_histopyramid_traverse(ctx, hp, total, 1, NULL, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "%s n %zu: key == total accepted", what, n);
    if (total)
        PMT_CHECK(pm_histopyramid_traverse(ctx, hp, total - 1, 2, NULL, NULL) ==
                      PM_STATUS_INVALID_ARGUMENT,
                  "%s n %zu: range past the total accepted", what, n);
    PMT_CHECK(pm_histopyramid_traverse(ctx, hp, UINT64_MAX, 1, NULL, NULL) ==
                  PM_STATUS_INVALID_ARGUMENT,
              "%s n %zu: key 2^64-1 accepted", what, n);
    PMT_OK(pm_histopyramid_traverse(ctx, hp, 0, 0, NULL, NULL)); /* nothing to do */
    pm_histopyramid_destroy(ctx, hp);
    free(incl);
    return total;
}

static void check_size(pm_context *ctx, size_t n)
{
    uint32_t *h = malloc((n ? n : 1) * sizeof *h);
    /* Marching cubes' counts 0..15 with half zeros: all keys. */
    for (size_t i = 0; i < n; i++)
        h[i] = pmt_rand() % 2 ? (uint32_t)(pmt_rand() % 16) : 0;
    size_t all = n < 2000000 ? SIZE_MAX : 100000;
    uint64_t t = check_keys(ctx, h, n, 0, all, "counts 0..15");
    if (t > 10) check_keys(ctx, h, n, t / 2 - 5, 1000, "counts 0..15 middle");
    /* 0/1 flags (compaction), 0.1% set. */
    for (size_t i = 0; i < n; i++)
        h[i] = pmt_rand() % 1000 == 0;
    check_keys(ctx, h, n, 0, SIZE_MAX, "flags");
    free(h);
}

/* Counts of up to 4096 over 2^21 elements: total ~2^33. The levels' sums
 * are 16-bit (level 0), 32-bit (levels 1..7) and 64-bit (8 and up); keys
 * near the end of the range and past 2^32 exercise the 64-bit levels. */
static void check_mixed_width(pm_context *ctx)
{
    size_t n = (size_t)1 << 21;
    uint32_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = 4096 - (i % 7 == 0) * (uint32_t)(pmt_rand() % 4096);
    uint64_t t = check_keys(ctx, h, n, 0, 0, "mixed");
    PMT_CHECK(t > UINT32_MAX, "mixed total %" PRIu64 " should exceed 32 bits", t);
    check_keys(ctx, h, n, t - 50000, 50000, "mixed end");
    check_keys(ctx, h, n, (uint64_t)UINT32_MAX - 5000, 10000, "mixed at 2^32");
    for (int r = 0; r < 5; r++)
        check_keys(ctx, h, n, pmt_rand() % t, 2000, "mixed random");
    free(h);
}

/* Counts of 2^32 - 1: every level is 64-bit. (Counts 0..15 and flags,
 * above, use 8- and 16-bit levels.) */
static void check_max_counts(pm_context *ctx)
{
    size_t n = 100003;
    uint32_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = i % 3 ? UINT32_MAX : (uint32_t)(pmt_rand() % 3);
    uint64_t t = check_keys(ctx, h, n, 0, 1000, "max counts");
    check_keys(ctx, h, n, t - 1000, 1000, "max counts end");
    check_keys(ctx, h, n, pmt_rand() % t, 1000, "max counts random");
    free(h);
}

/* On the CPU, the flag-based build used by compaction must give the same
 * pyramid as a build from 0/1 counts. */
static void check_flags_build(pm_context *ctx, size_t n)
{
    uint8_t *f = malloc(n ? n : 1);
    uint32_t *c = malloc((n ? n : 1) * sizeof *c);
    for (size_t i = 0; i < n; i++) {
        f[i] = pmt_rand() % 3 == 0 ? (uint8_t)(1 + pmt_rand() % 255) : 0;
        c[i] = f[i] != 0;
    }
    pm_histopyramid *a, *b;
    PMT_OK(pmi_cpu_histopyramid_build_flags(ctx, f, n, &a));
    PMT_OK(pm_histopyramid_build(ctx, c, n, &b));
    uint64_t ta, tb;
    PMT_OK(pm_histopyramid_total(ctx, a, &ta));
    PMT_OK(pm_histopyramid_total(ctx, b, &tb));
    PMT_CHECK(ta == tb, "flags build n %zu: total %" PRIu64 " vs %" PRIu64, n, ta, tb);
    if (ta && ta == tb) {
        uint64_t *sa = malloc(ta * sizeof *sa), *sb = malloc(ta * sizeof *sb);
        PMT_OK(pm_histopyramid_traverse(ctx, a, 0, ta, sa, NULL));
        PMT_OK(pm_histopyramid_traverse(ctx, b, 0, ta, sb, NULL));
        PMT_CHECK(memcmp(sa, sb, ta * sizeof *sa) == 0, "flags build n %zu differs", n);
        free(sa);
        free(sb);
    }
    pm_histopyramid_destroy(ctx, a);
    pm_histopyramid_destroy(ctx, b);
    free(f);
    free(c);
}

static void check_bad_arguments(pm_context *ctx)
{
    uint32_t c = 3;
    uint32_t *d = pmt_to_ctx(ctx, &c, sizeof c);
    pm_histopyramid *hp = NULL;
    uint64_t t;
    PMT_CHECK(pm_histopyramid_build(NULL, d, 1, &hp) == PM_STATUS_INVALID_ARGUMENT, "NULL ctx");
    PMT_CHECK(pm_histopyramid_build(ctx, NULL, 1, &hp) == PM_STATUS_INVALID_ARGUMENT,
              "NULL counts");
    PMT_CHECK(pm_histopyramid_build(ctx, d, 1, NULL) == PM_STATUS_INVALID_ARGUMENT, "NULL out");
    PMT_CHECK(pm_histopyramid_build(ctx, d, SIZE_MAX / 2, &hp) == PM_STATUS_OVERFLOW, "n overflow");
    PMT_CHECK(pm_histopyramid_total(ctx, NULL, &t) == PM_STATUS_INVALID_ARGUMENT, "NULL hp");
    PMT_OK(pm_histopyramid_build(ctx, d, 1, &hp));
    PMT_CHECK(pm_histopyramid_total(ctx, hp, NULL) == PM_STATUS_INVALID_ARGUMENT, "NULL total");
    PMT_CHECK(pm_histopyramid_traverse(ctx, NULL, 0, 1, NULL, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "traverse NULL hp");
    PMT_CHECK(pm_histopyramid_traverse(ctx, hp, 0, SIZE_MAX / 2, NULL, NULL) == PM_STATUS_OVERFLOW,
              "traverse num_keys overflow");
    pm_histopyramid_destroy(ctx, hp);
    pm_histopyramid_destroy(ctx, NULL);
    /* An empty pyramid has total 0 and accepts no key. */
    PMT_OK(pm_histopyramid_build(ctx, NULL, 0, &hp));
    PMT_OK(pm_histopyramid_total(ctx, hp, &t));
    PMT_CHECK(t == 0, "empty pyramid total %" PRIu64, t);
    PMT_CHECK(pm_histopyramid_traverse(ctx, hp, 0, 1, NULL, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "empty pyramid accepts key 0");
    pm_histopyramid_destroy(ctx, hp);
    pm_free(ctx, d);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    size_t sizes[] = {1,  2,    4,    5,    6,     24,    25,     26,     31,      32,
                      33, 1000, 3125, 3126, 65535, 65537, 390625, 390626, 1048577, PMT_BIG};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        check_size(ctx, sizes[i]);
    check_mixed_width(ctx);
    check_max_counts(ctx);
    if (dev == PM_DEVICE_CPU) {
        size_t fs[] = {0, 1, 7, 33, 1000, 65537, 390626};
        for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
            check_flags_build(ctx, fs[i]);
    }
    check_bad_arguments(ctx);
    pm_context_destroy(ctx);
    return pmt_finish("test_histopyramid");
}
