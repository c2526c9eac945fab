/* Times every CPU primitive (median of repeated runs, elements per second):
 * reductions, image reductions, scan, filter, Horn's filter beside
 * the blocked filter, compaction and expansion through both paths (blocked
 * scan and HistoPyramid), packing. Usage: bench_cpu_primitives [--quick]
 * [--threads N] [--log2n K]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/primitives_internal.h"
#include "pyramesh.h"

static int reps = 7;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double uni(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes); /* touch the pages outside the timed region */
    return p;
}

static void check(pm_status s, const char *what)
{
    if (s != PM_STATUS_OK && s != PM_STATUS_TRUNCATED) {
        fprintf(stderr, "%s: %s: %s\n", what, pm_status_string(s), pm_last_error());
        exit(1);
    }
}

/* The timed operation: a closure over the benchmark's arrays. */
typedef struct job {
    pm_context *ctx;
    int kind;
    pm_reduce_op op;
    const float *f;
    float *fout;
    const uint32_t *u;
    uint32_t *uout;
    const uint8_t *flags;
    uint64_t *idx;
    uint8_t *bytes;
    size_t n, w, h, cap;
    float t;
} job;

enum {
    J_REDUCE,
    J_IMAGE,
    J_SCAN,
    J_FILTER,
    J_HORN,
    J_COMPACT,
    J_COMPACT_HP,
    J_EXPAND,
    J_EXPAND_HP,
    J_PACK,
    J_UNPACK,
    J_PACK_UNORM,
    J_UNPACK_UNORM
};

static void run(job *j)
{
    size_t count = 0;
    double r;
    uint64_t total;
    switch (j->kind) {
    case J_REDUCE: check(pm_reduce_f32(j->ctx, j->f, j->n, j->op, &r), "reduce"); break;
    case J_IMAGE:
        check(pm_reduce_image_f32(j->ctx, j->f, j->w, j->h, j->w, j->op, &r), "reduce_image");
        break;
    case J_SCAN: check(pm_scan_exclusive_u32(j->ctx, j->u, j->n, j->uout, &total), "scan"); break;
    case J_FILTER:
        check(pm_filter_f32(j->ctx, j->f, j->n, PM_LESS, j->t, j->fout, j->cap, &count), "filter");
        break;
    case J_HORN:
        check(pm_filter_horn_f32(j->ctx, j->f, j->n, PM_LESS, j->t, j->fout, j->cap, &count),
              "horn");
        break;
    case J_COMPACT:
        check(pm_compact(j->ctx, j->flags, j->n, j->idx, j->cap, &count), "compact");
        break;
    case J_COMPACT_HP:
        check(pmi_cpu_compact_histopyramid(j->ctx, j->flags, j->n, j->idx, j->cap, &count),
              "compact_hp");
        break;
    case J_EXPAND:
        check(pm_expand(j->ctx, j->u, j->n, j->idx, j->uout, j->cap, &count), "expand");
        break;
    case J_EXPAND_HP:
        check(pmi_cpu_expand_histopyramid(j->ctx, j->u, j->n, j->idx, j->uout, j->cap, &count),
              "expand_hp");
        break;
    case J_PACK: pm_pack_f32_rgba8(j->f, j->n, j->bytes); break;
    case J_UNPACK: pm_unpack_rgba8_f32(j->bytes, j->n, j->fout); break;
    case J_PACK_UNORM: pm_pack_unorm_rgba8(j->f, j->n, j->bytes); break;
    case J_UNPACK_UNORM: pm_unpack_unorm_rgba8(j->bytes, j->n, j->fout); break;
    }
}

/* Median of reps timed runs after one warm-up; prints one table row. */
static double bench(const char *name, const char *detail, job *j, size_t elements)
{
    double t[64];
    run(j);
    for (int r = 0; r < reps; r++) {
        double a = now_s();
        run(j);
        t[r] = now_s() - a;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    double med = t[reps / 2];
    printf("| %-22s | %-26s | %11zu | %9.3f | %8.1f | %7.2f |\n", name, detail, elements, med * 1e3,
           (double)elements / med / 1e6, med * 1e9 / (double)elements);
    fflush(stdout);
    return med;
}

/* Reductions of the whole array and of two image sizes. */
static void bench_reductions(job *j, size_t n)
{
    const char *opn[] = {"sum", "mean", "min", "max", "geomean"};
    char d[64];
    j->kind = J_REDUCE;
    for (int op = 0; op < 5; op++) {
        if (op == 1) continue;
        j->op = (pm_reduce_op)op;
        snprintf(d, sizeof d, "%s", opn[op]);
        bench("reduce_f32", d, j, n);
    }
    j->kind = J_IMAGE;
    j->op = PM_REDUCE_SUM;
    size_t dims[][2] = {{1920, 1080}, {7680, 4320}};
    for (int k = 0; k < 2; k++) {
        if (dims[k][0] * dims[k][1] > n) continue;
        j->w = dims[k][0];
        j->h = dims[k][1];
        snprintf(d, sizeof d, "sum %zux%zu", j->w, j->h);
        bench("reduce_image_f32", d, j, j->w * j->h);
    }
}

/* Filter: threshold p keeps a fraction p of uniform values; then Horn's
 * O(n log n) filter beside the blocked one, per element, as n grows (10%
 * kept). */
static void bench_filters(job *j, size_t n, int log2n, int quick)
{
    const float sel[] = {0.01f, 0.1f, 0.5f};
    char d[64];
    j->kind = J_FILTER;
    for (int k = 0; k < 3; k++) {
        j->t = sel[k];
        snprintf(d, sizeof d, "blocked, %g%% kept", sel[k] * 100);
        bench("filter_f32", d, j, n);
    }
    j->t = 0.1f;
    for (int k = 16; k <= (quick ? 18 : 24) && k <= log2n; k += 2) {
        j->n = (size_t)1 << k;
        j->kind = J_HORN;
        snprintf(d, sizeof d, "horn, 10%%, n = 2^%d", k);
        bench("filter_horn_f32", d, j, j->n);
        j->kind = J_FILTER;
        snprintf(d, sizeof d, "blocked, 10%%, n = 2^%d", k);
        bench("filter_f32", d, j, j->n);
    }
    j->n = n;
}

/* Compaction and expansion, each through both paths. Expansion: sparse
 * counts (5% of inputs produce 1..15, as in marching cubes on a smooth
 * field) and dense counts 0..15; the capacity is the exact output count. */
static void bench_compaction(job *j, size_t n, uint8_t *flags, uint32_t *u)
{
    const double csel[] = {0.01, 0.1, 0.5};
    char d[64];
    for (int k = 0; k < 3; k++) {
        uint64_t th = (uint64_t)(csel[k] * 1e6);
        for (size_t i = 0; i < n; i++)
            flags[i] = rnd() % 1000000 < th;
        j->kind = J_COMPACT;
        snprintf(d, sizeof d, "blocked scan, %g%%", csel[k] * 100);
        bench("compact", d, j, n);
        j->kind = J_COMPACT_HP;
        snprintf(d, sizeof d, "histopyramid, %g%%", csel[k] * 100);
        bench("compact", d, j, n);
    }
    for (int k = 0; k < 2; k++) {
        size_t m = k == 0 ? n : n / 8, total = 0;
        for (size_t i = 0; i < m; i++) {
            u[i] = k == 0 ? (rnd() % 20 == 0 ? (uint32_t)(1 + rnd() % 15) : 0)
                          : (uint32_t)(rnd() % 16);
            total += u[i];
        }
        if (total > n) continue; /* outputs must fit idx/uout */
        j->n = m;
        j->cap = total;
        j->kind = J_EXPAND;
        snprintf(d, sizeof d, "blocked scan, %s", k == 0 ? "sparse 5%" : "dense 0..15");
        bench("expand", d, j, m);
        j->kind = J_EXPAND_HP;
        snprintf(d, sizeof d, "histopyramid, %s", k == 0 ? "sparse 5%" : "dense 0..15");
        bench("expand", d, j, m);
        printf("| %-22s | %-26s | %11zu | %9s | %8s | %7s |\n", "  (expand outputs)", "", total, "",
               "", "");
    }
    j->n = n;
    j->cap = n;
}

int main(int argc, char **argv)
{
    int quick = 0, threads = 0, log2n = 26;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--log2n") && i + 1 < argc)
            log2n = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--threads N] [--log2n K]\n", argv[0]);
            return 2;
        }
    }
    if (quick) {
        log2n = 18;
        reps = 3;
    }
    pm_context *ctx;
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, threads, NULL};
    check(pm_context_create(&desc, &ctx), "context");
    size_t n = (size_t)1 << log2n;
    printf("CPU primitives: %s, threads %d (0 = all cores), n = 2^%d, median of %d runs\n\n",
           pm_context_device_name(ctx), threads, log2n, reps);
    printf("| %-22s | %-26s | %11s | %9s | %8s | %7s |\n", "primitive", "case", "elements", "ms",
           "Melem/s", "ns/elem");
    printf("|%s|%s|%s|%s|%s|%s|\n", "------------------------", "----------------------------",
           "-------------", "-----------", "----------", "---------");

    float *f = xmalloc(n * sizeof *f), *fout = xmalloc(n * sizeof *fout);
    uint32_t *u = xmalloc(n * sizeof *u), *uout = xmalloc(n * sizeof *uout);
    uint8_t *flags = xmalloc(n);
    uint64_t *idx = xmalloc(n * sizeof *idx);
    uint8_t *bytes = xmalloc(4 * n);
    for (size_t i = 0; i < n; i++)
        f[i] = (float)uni() + 0.001f;

    job j = {.ctx = ctx,
             .f = f,
             .fout = fout,
             .u = u,
             .uout = uout,
             .flags = flags,
             .idx = idx,
             .bytes = bytes,
             .n = n,
             .cap = n};
    bench_reductions(&j, n);

    /* Scan of marching-cubes-like counts 0..15. */
    for (size_t i = 0; i < n; i++)
        u[i] = (uint32_t)(rnd() % 16);
    j.kind = J_SCAN;
    bench("scan_exclusive_u32", "counts 0..15", &j, n);

    bench_filters(&j, n, log2n, quick);
    bench_compaction(&j, n, flags, u);

    /* Packing (single-threaded host functions). */
    j.kind = J_PACK;
    bench("pack_f32_rgba8", "exact bits", &j, n);
    j.kind = J_UNPACK;
    bench("unpack_rgba8_f32", "exact bits", &j, n);
    j.kind = J_PACK_UNORM;
    bench("pack_unorm_rgba8", "base 255", &j, n);
    j.kind = J_UNPACK_UNORM;
    bench("unpack_unorm_rgba8", "base 255", &j, n);

    free(f);
    free(fout);
    free(u);
    free(uout);
    free(flags);
    free(idx);
    free(bytes);
    pm_context_destroy(ctx);
    return 0;
}
