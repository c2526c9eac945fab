/* Reductions of floats and non-power-of-two images (large fan-in per pass,
 * never reading outside the valid width x height region), with per-block
 * accumulation in double. */
#include <math.h>
#include <stdlib.h>

#include "core/util.h"
#include "cpu/cpu.h"

/* The image is seen as width*height logical elements in row-major order and
 * cut into fixed blocks of BLOCK elements, whatever the thread count: pass 1
 * reduces each block (fan-in 65536) into a double, pass 2 combines the block
 * results in block order (fan-in = number of blocks). The result therefore
 * depends on the data alone, never on the number of threads. */
#define BLOCK ((size_t)1 << 16)

typedef struct block_result {
    double acc; /* sum (SUM/MEAN), sum of logs (GEOMEAN), min or max */
    int seen;   /* MIN/MAX: the block held a non-NaN element */
} block_result;

/* Sum of a contiguous run in double. Eight independent accumulators let the
 * compiler keep several additions in flight; their order is fixed, so the
 * result is reproducible. */
static double sum_run(const float *p, size_t len)
{
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= len; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += (double)p[i + k];
    for (; i < len; i++)
        a[0] += (double)p[i];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static double log_run(const float *p, size_t len)
{
    double s = 0.0;
    for (size_t i = 0; i < len; i++)
        s += log((double)p[i]);
    return s;
}

/* MIN (is_max 0) or MAX over a run; NaNs are skipped because a comparison
 * with NaN is false (x < m ? x : m keeps m). Eight lanes let the compiler
 * use vector min/max, whose NaN rule is exactly this one. *seen records
 * that some element was not NaN. */
static float minmax_run(const float *p, size_t len, int is_max, float m, int *seen)
{
    float a[8];
    int any[8];
    for (int k = 0; k < 8; k++)
        a[k] = m, any[k] = 0;
    size_t i = 0;
    if (is_max) {
        for (; i + 8 <= len; i += 8)
            for (int k = 0; k < 8; k++) {
                float x = p[i + k];
                a[k] = x > a[k] ? x : a[k];
                any[k] |= x == x;
            }
        for (; i < len; i++) {
            a[0] = p[i] > a[0] ? p[i] : a[0];
            any[0] |= p[i] == p[i];
        }
        for (int k = 0; k < 8; k++)
            m = a[k] > m ? a[k] : m;
    } else {
        for (; i + 8 <= len; i += 8)
            for (int k = 0; k < 8; k++) {
                float x = p[i + k];
                a[k] = x < a[k] ? x : a[k];
                any[k] |= x == x;
            }
        for (; i < len; i++) {
            a[0] = p[i] < a[0] ? p[i] : a[0];
            any[0] |= p[i] == p[i];
        }
        for (int k = 0; k < 8; k++)
            m = a[k] < m ? a[k] : m;
    }
    for (int k = 0; k < 8; k++)
        *seen |= any[k];
    return m;
}

/* Reduces logical elements [begin, end) of the image: one call per block. */
static block_result reduce_block(pm_reduce_op op, const float *image, size_t width,
                                 size_t row_stride, size_t begin, size_t end)
{
    block_result r = {0.0, 0};
    int is_max = op == PM_REDUCE_MAX;
    float m = is_max ? -INFINITY : INFINITY;
    size_t row = begin / width, col = begin % width;
    size_t k = begin;
    while (k < end) {
        size_t len = width - col;
        if (len > end - k) len = end - k;
        const float *p = image + row * row_stride + col;
        switch (op) {
        case PM_REDUCE_SUM:
        case PM_REDUCE_MEAN: r.acc += sum_run(p, len); break;
        case PM_REDUCE_GEOMEAN: r.acc += log_run(p, len); break;
        default: m = minmax_run(p, len, is_max, m, &r.seen); break;
        }
        k += len;
        row++;
        col = 0;
    }
    if (op == PM_REDUCE_MIN || op == PM_REDUCE_MAX) r.acc = (double)m;
    return r;
}

static pm_status reduce_2d(pm_context *ctx, pm_reduce_op op, const float *image, size_t width,
                           size_t height, size_t row_stride, double *result)
{
    size_t total = width * height; /* fits: checked by the caller's span */
    size_t nblocks = (total - 1) / BLOCK + 1;
    block_result *blocks = malloc(nblocks * sizeof *blocks);
    if (!blocks)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "reduce: cannot allocate %zu block results",
                         nblocks);
    int nt = ctx->num_threads;
    if ((size_t)nt > nblocks) nt = (int)nblocks;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t b = 0; b < nblocks; b++) {
        size_t begin = b * BLOCK;
        size_t end = begin + BLOCK < total ? begin + BLOCK : total;
        blocks[b] = reduce_block(op, image, width, row_stride, begin, end);
    }

    /* Pass 2: combine in block order. */
    double acc = blocks[0].acc;
    int seen = blocks[0].seen;
    for (size_t b = 1; b < nblocks; b++) {
        double v = blocks[b].acc;
        switch (op) {
        case PM_REDUCE_MIN:
            if (blocks[b].seen && (!seen || v < acc)) acc = v;
            seen |= blocks[b].seen;
            break;
        case PM_REDUCE_MAX:
            if (blocks[b].seen && (!seen || v > acc)) acc = v;
            seen |= blocks[b].seen;
            break;
        default: acc += v; break;
        }
    }
    free(blocks);

    switch (op) {
    case PM_REDUCE_SUM: *result = acc; break;
    case PM_REDUCE_MEAN: *result = acc / (double)total; break;
    case PM_REDUCE_GEOMEAN: *result = exp(acc / (double)total); break;
    default: *result = seen ? acc : (double)NAN; break; /* all NaN */
    }
    return PM_STATUS_OK;
}

pm_status pmi_cpu_reduce_f32(pm_context *ctx, const float *in, size_t n, pm_reduce_op op,
                             double *result)
{
    return reduce_2d(ctx, op, in, n, 1, n, result);
}

pm_status pmi_cpu_reduce_image_f32(pm_context *ctx, const float *image, size_t width, size_t height,
                                   size_t row_stride, pm_reduce_op op, double *result)
{
    return reduce_2d(ctx, op, image, width, height, row_stride, result);
}
