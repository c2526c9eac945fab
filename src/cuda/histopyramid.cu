/* HistoPyramid in the HP5 layout (Dyken and Ziegler, "GPU-accelerated data
 * expansion for the marching cubes algorithm", 2010; Ziegler et al. 2006):
 * 5:1 levels whose nodes store the partial sums of their first four children
 * in one 32-byte node (one memory sector; the fifth child gets the rest).
 * The sums are 64-bit so any counts work, as on the CPU (a u32 node would
 * overflow once a block of inputs sums past 2^32); three levels built per
 * launch in shared memory, a prefix-summed 64-bit apex on top, and traversal
 * with one thread per output key. For pm_expand the counts themselves are the
 * base level: level 1 reads them and nothing else does. */
#include "cuda/cuda_internal.h"

#define HP_THREADS 128
#define HP_FANIN 625     /* inputs per build block: 5^4 (three levels) */
#define HP_APEX_MAX 4096 /* the apex is a single-block prefix sum */
#define HP_MAX_LEVELS 30

/* Partial sums of the first four children; 32-byte aligned so a node is
 * one sector, read with two 16-byte loads. */
typedef struct __align__(32) hp_node { unsigned long long s1, s2, s3, s4; }
hp_node;

typedef struct hp_view {
    const hp_node *level[HP_MAX_LEVELS]; /* level[0] is over the base */
    int num_levels;
    const unsigned long long *apex; /* exclusive prefix of the top level's totals */
    unsigned apex_n;
    const unsigned long long *total;
    const unsigned *overflow; /* the 64-bit sum of the counts wrapped */
} hp_view;

struct pm_histopyramid {
    size_t n;
    hp_view view;
    void *mem;
    int have_total;
    uint64_t total;
    unsigned overflow;
};

/* Host-side plan: node counts per level, and where everything lives in one
 * block of device memory. */
typedef struct hp_plan {
    int num_levels, launches;
    size_t nodes[HP_MAX_LEVELS];
    size_t level_off[HP_MAX_LEVELS];
    size_t tot_off[2], apex_off, total_off, overflow_off, bytes;
    unsigned apex_n;
} hp_plan;

static size_t div5(size_t m) { return m / 5 + (m % 5 != 0); }

static pm_status hp_make_plan(size_t n, hp_plan *p)
{
    memset(p, 0, sizeof *p);
    size_t m = n, off = 0, tot_max = 0;
    for (;;) {
        if (p->num_levels + 3 > HP_MAX_LEVELS)
            return pmi_error(PM_STATUS_OVERFLOW, "histopyramid: %zu inputs is too many", n);
        for (int k = 0; k < 3; k++) {
            m = div5(m);
            p->nodes[p->num_levels] = m;
            p->level_off[p->num_levels] = off;
            off += pmi_align256(m * sizeof(hp_node));
            p->num_levels++;
        }
        p->launches++;
        if (m > tot_max) tot_max = m;
        if (m <= HP_APEX_MAX) break;
    }
    p->apex_n = (unsigned)m;
    p->tot_off[0] = off;
    off += pmi_align256(tot_max * 8);
    p->tot_off[1] = off;
    off += pmi_align256(tot_max * 8);
    p->apex_off = off;
    off += pmi_align256(m * 8);
    p->total_off = off;
    p->overflow_off = off + 8;
    p->bytes = off + 256;
    return PM_STATUS_OK;
}

/* Builds three levels over m inputs (u32 counts or u64 node totals): each
 * block reduces 625 inputs to 125, 25 and 5 nodes and writes the 5 totals. */
static __global__ void __launch_bounds__(HP_THREADS)
    hp_build(const uint32_t *__restrict__ in32, const unsigned long long *__restrict__ in64,
             size_t m, hp_node *lvA, hp_node *lvB, hp_node *lvC, size_t nA, size_t nB, size_t nC,
             unsigned long long *out_tot, unsigned *overflow)
{
    __shared__ unsigned long long buf[HP_FANIN];
    __shared__ unsigned long long t1[125], t2[25];
    const unsigned t = threadIdx.x;
    const size_t base = (size_t)blockIdx.x * HP_FANIN;
    for (unsigned i = t; i < HP_FANIN; i += HP_THREADS) {
        size_t e = base + i;
        buf[i] = e < m ? (in32 ? (unsigned long long)in32[e] : in64[e]) : 0ull;
    }
    __syncthreads();
    bool ovf = false;
    /* One node: partial sums of the first four of its five children. */
#define HP_NODE(src, dst_level, dst_count, idx, tot_out)                                           \
    do {                                                                                           \
        unsigned long long s1 = src[5 * t], s2 = s1 + src[5 * t + 1], s3 = s2 + src[5 * t + 2];    \
        unsigned long long s4 = s3 + src[5 * t + 3], sum_ = s4 + src[5 * t + 4];                   \
        if (sum_ < s4 || s4 < s3 || s3 < s2 || s2 < s1) ovf = true; /* 64-bit wrap */              \
        if ((idx) < (dst_count)) {                                                                 \
            hp_node nd_ = {s1, s2, s3, s4};                                                        \
            dst_level[idx] = nd_;                                                                  \
        }                                                                                          \
        tot_out = sum_;                                                                            \
    } while (0)
    if (t < 125) HP_NODE(buf, lvA, nA, (size_t)blockIdx.x * 125 + t, t1[t]);
    __syncthreads();
    if (t < 25) HP_NODE(t1, lvB, nB, (size_t)blockIdx.x * 25 + t, t2[t]);
    __syncthreads();
    if (t < 5) {
        size_t g = (size_t)blockIdx.x * 5 + t;
        unsigned long long tot;
        HP_NODE(t2, lvC, nC, g, tot);
        if (g < nC) out_tot[g] = tot;
    }
#undef HP_NODE
    if (ovf) atomicOr(overflow, 1u);
}

/* The apex: exclusive prefix of at most HP_APEX_MAX totals, in one block of
 * 1024 threads with 4 consecutive items each. Also publishes the total. */
static __global__ void __launch_bounds__(1024)
    hp_apex(const unsigned long long *tot, unsigned m, unsigned long long *apex,
            unsigned long long *total_d, const unsigned *overflow, unsigned long long *count_out,
            unsigned *flag_out)
{
    __shared__ unsigned long long wsum[32];
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    unsigned long long x[4], s = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        unsigned i = 4 * t + j;
        x[j] = i < m ? tot[i] : 0;
        s += x[j];
    }
    unsigned long long incl = s;
    for (int off = 1; off < 32; off <<= 1) {
        unsigned long long y = __shfl_up_sync(0xffffffffu, incl, off);
        if ((int)lane >= off) incl += y;
    }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        unsigned long long w = wsum[lane], wi = w;
        for (int off = 1; off < 32; off <<= 1) {
            unsigned long long y = __shfl_up_sync(0xffffffffu, wi, off);
            if ((int)lane >= off) wi += y;
        }
        wsum[lane] = wi - w;
        if (lane == 31) {
            unsigned ovf = *overflow;
            *total_d = wi;
            /* An overflowing pyramid cannot be traversed: say so in the count. */
            if (count_out) *count_out = ovf ? ~0ull : wi;
            if (flag_out) *flag_out = ovf;
        }
    }
    __syncthreads();
    unsigned long long run = wsum[warp] + incl - s;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        unsigned i = 4 * t + j;
        if (i < m) apex[i] = run;
        run += x[j];
    }
}

/* One thread per output key, grid-stride; the number of keys is bounded on
 * the device by the total when limit_by_total is set (pm_expand with a
 * capacity larger than the output). */
static __global__ void __launch_bounds__(256)
    hp_traverse(hp_view v, unsigned long long first_key, unsigned long long num_keys,
                int limit_by_total, unsigned long long *out_source, unsigned *out_local)
{
    if (*v.overflow) return;
    unsigned long long limit = num_keys;
    if (limit_by_total) {
        unsigned long long tot = *v.total, avail = tot > first_key ? tot - first_key : 0;
        if (avail < limit) limit = avail;
    }
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long idx = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         idx < limit; idx += stride) {
        const unsigned long long key = first_key + idx;
        /* Last apex node whose prefix is <= key (empty nodes are skipped). */
        unsigned lo = 0, hi = v.apex_n;
        while (hi - lo > 1) {
            unsigned mid = (lo + hi) >> 1;
            if (__ldg(v.apex + mid) <= key)
                lo = mid;
            else
                hi = mid;
        }
        unsigned long long local = key - __ldg(v.apex + lo);
        unsigned long long node = lo;
        for (int l = v.num_levels - 1; l >= 0; l--) {
            const ulonglong2 *q = (const ulonglong2 *)(v.level[l] + node);
            const ulonglong2 a = __ldg(q), b = __ldg(q + 1);
            unsigned c = (local >= a.x) + (local >= a.y) + (local >= b.x) + (local >= b.y);
            unsigned long long sub = c == 0   ? 0ull
                                     : c == 1 ? a.x
                                     : c == 2 ? a.y
                                     : c == 3 ? b.x
                                              : b.y;
            local -= sub;
            node = node * 5 + c;
        }
        if (out_source) out_source[idx] = node;
        if (out_local) out_local[idx] = (unsigned)local;
    }
}

/* Queues the build of a pyramid over counts in `mem` (plan p). */
static pm_status hp_queue_build(pm_context *ctx, const uint32_t *counts, size_t n, const hp_plan *p,
                                char *mem, hp_view *v, unsigned long long *count_out,
                                unsigned *flag_out)
{
    cudaStream_t s = pmi_cuda(ctx)->stream;
    PMI_CU_TRY(cudaMemsetAsync(mem + p->total_off, 0, 16, s), "histopyramid build");
    unsigned *overflow = (unsigned *)(mem + p->overflow_off);
    size_t m = n;
    const unsigned long long *in64 = NULL;
    for (int L = 0; L < p->launches; L++) {
        unsigned long long *tot = (unsigned long long *)(mem + p->tot_off[L & 1]);
        size_t grid = (m + HP_FANIN - 1) / HP_FANIN;
        hp_build<<<(unsigned)grid, HP_THREADS, 0, s>>>(
            L == 0 ? counts : NULL, in64, m, (hp_node *)(mem + p->level_off[3 * L]),
            (hp_node *)(mem + p->level_off[3 * L + 1]), (hp_node *)(mem + p->level_off[3 * L + 2]),
            p->nodes[3 * L], p->nodes[3 * L + 1], p->nodes[3 * L + 2], tot, overflow);
        PMI_TRY(pmi_cuda_launched("histopyramid build"));
        in64 = tot;
        m = p->nodes[3 * L + 2];
    }
    hp_apex<<<1, 1024, 0, s>>>(in64, p->apex_n, (unsigned long long *)(mem + p->apex_off),
                               (unsigned long long *)(mem + p->total_off), overflow, count_out,
                               flag_out);
    PMI_TRY(pmi_cuda_launched("histopyramid apex"));
    memset(v, 0, sizeof *v);
    for (int l = 0; l < p->num_levels; l++)
        v->level[l] = (const hp_node *)(mem + p->level_off[l]);
    v->num_levels = p->num_levels;
    v->apex = (const unsigned long long *)(mem + p->apex_off);
    v->apex_n = p->apex_n;
    v->total = (const unsigned long long *)(mem + p->total_off);
    v->overflow = overflow;
    return PM_STATUS_OK;
}

static pm_status hp_queue_traverse(pm_context *ctx, const hp_view *v, uint64_t first,
                                   size_t num_keys, int limit_by_total, uint64_t *out_source,
                                   uint32_t *out_local)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    size_t want = (num_keys + 255) / 256, cap = (size_t)st->num_sms * 32;
    unsigned grid = (unsigned)(want < cap ? want : cap);
    if (!grid || (!out_source && !out_local)) return PM_STATUS_OK;
    hp_traverse<<<grid, 256, 0, st->stream>>>(*v, first, num_keys, limit_by_total,
                                              (unsigned long long *)out_source, out_local);
    return pmi_cuda_launched("histopyramid traverse");
}

static pm_status expand_queue(pm_context *ctx, const uint32_t *counts, size_t n,
                              uint64_t *out_source, uint32_t *out_local, size_t capacity,
                              unsigned long long *count_out, unsigned *flag_out)
{
    hp_plan p;
    PMI_TRY(hp_make_plan(n, &p));
    void *mem;
    PMI_TRY(pmi_cuda_scratch(ctx, p.bytes, &mem));
    hp_view v;
    PMI_TRY(hp_queue_build(ctx, counts, n, &p, (char *)mem, &v, count_out, flag_out));
    return hp_queue_traverse(ctx, &v, 0, capacity, 1, out_source, out_local);
}

extern "C" pm_status pmi_cuda_expand(pm_context *ctx, const uint32_t *counts, size_t n,
                                     uint64_t *out_source, uint32_t *out_local, size_t capacity,
                                     size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_TRY(expand_queue(ctx, counts, n, out_source, out_local, capacity,
                         &st->host_d[PMI_HOST_RESULT], (unsigned *)&st->host_d[PMI_HOST_FLAG]));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_expand"));
    if (*(volatile unsigned *)&st->host[PMI_HOST_FLAG])
        return pmi_error(PM_STATUS_OVERFLOW, "pm_expand: the sum of the counts exceeds 2^64 - 1");
    return pmi_cuda_host_count(ctx, capacity, count, "pm_expand");
}

extern "C" pm_status pmi_cuda_expand_async(pm_context *ctx, const uint32_t *counts, size_t n,
                                           uint64_t *out_source, uint32_t *out_local,
                                           size_t capacity, uint64_t *count_ctx)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    if (n == 0) {
        PMI_CU_TRY(cudaMemsetAsync(count_ctx, 0, sizeof *count_ctx, pmi_cuda(ctx)->stream),
                   "pm_expand_async");
        return PM_STATUS_OK;
    }
    return expand_queue(ctx, counts, n, out_source, out_local, capacity,
                        (unsigned long long *)count_ctx, NULL);
}

extern "C" pm_status pmi_cuda_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                                 pm_histopyramid **out)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pm_histopyramid *hp = (pm_histopyramid *)calloc(1, sizeof *hp);
    if (!hp) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_histopyramid_build: out of memory");
    hp->n = n;
    hp_plan p;
    pm_status s = hp_make_plan(n ? n : 1, &p);
    if (s == PM_STATUS_OK) {
        cudaError_t e = cudaMalloc(&hp->mem, p.bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            hp->mem = NULL;
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "pm_histopyramid_build: cannot allocate %zu bytes of device memory",
                          p.bytes);
        }
    }
    /* n == 0: a one-input pyramid over a zero count gives total 0. */
    if (s == PM_STATUS_OK && n == 0) {
        cudaError_t e = cudaMemsetAsync(hp->mem, 0, p.bytes, pmi_cuda(ctx)->stream);
        if (e != cudaSuccess) s = pmi_cuda_status(e, "pm_histopyramid_build");
    }
    if (s == PM_STATUS_OK)
        s = hp_queue_build(ctx, n ? counts : (const uint32_t *)hp->mem, n ? n : 1, &p,
                           (char *)hp->mem, &hp->view, NULL, NULL);
    if (s != PM_STATUS_OK) {
        pmi_cuda_histopyramid_destroy(ctx, hp);
        return s;
    }
    *out = hp;
    return PM_STATUS_OK;
}

/* The total and the overflow flag, read once (the only host wait). */
static pm_status hp_fetch_total(pm_context *ctx, pm_histopyramid *hp)
{
    if (hp->have_total) return PM_STATUS_OK;
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_CU_TRY(cudaMemcpyAsync(&st->host[PMI_HOST_RESULT], hp->view.total, 8,
                               cudaMemcpyDeviceToHost, st->stream),
               "pm_histopyramid_total");
    PMI_CU_TRY(cudaMemcpyAsync(&st->host[PMI_HOST_FLAG], hp->view.overflow, 4,
                               cudaMemcpyDeviceToHost, st->stream),
               "pm_histopyramid_total");
    PMI_TRY(pmi_cuda_wait(ctx, "pm_histopyramid_total"));
    hp->total = st->host[PMI_HOST_RESULT];
    hp->overflow = *(unsigned *)&st->host[PMI_HOST_FLAG];
    hp->have_total = 1;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp,
                                                 uint64_t *total)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    PMI_TRY(hp_fetch_total(ctx, (pm_histopyramid *)hp));
    *total = hp->total;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp,
                                                    uint64_t first_key, size_t num_keys,
                                                    uint64_t *out_source, uint32_t *out_local)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pm_histopyramid *h = (pm_histopyramid *)hp;
    PMI_TRY(hp_fetch_total(ctx, h));
    if (first_key > h->total || num_keys > h->total - first_key)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_histopyramid_traverse: keys %llu..%llu past the total %llu",
                         (unsigned long long)first_key,
                         (unsigned long long)(first_key + num_keys - 1),
                         (unsigned long long)h->total);
    if (h->overflow)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_histopyramid_traverse: the sum of the counts exceeds 2^64 - 1");
    return hp_queue_traverse(ctx, &h->view, first_key, num_keys, 0, out_source, out_local);
}

extern "C" void pmi_cuda_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp)
{
    if (!hp) return;
    if (hp->mem && cudaSetDevice(pmi_cuda(ctx)->device) == cudaSuccess) cudaFree(hp->mem);
    cudaGetLastError();
    free(hp);
}
