/* Collision detection on the GPU by breadth-first filtering of candidate
 * node pairs (Horn, GPU Gems 2 ch. 36, 2005, after Gottschalk, Lin and
 * Manocha's RAPID, 1996). One kernel per level decides every pair
 * (src/core/collide_math.h), tests leaf pairs with the exact predicate
 * (src/core/tri_tri.h) and appends the children of split pairs to the next
 * level. The level sizes live in device memory: the host queues a fixed
 * number of levels (the trees' depths bound it) and each kernel reads its
 * count from the previous one, so nothing waits between levels. Appending
 * takes one atomic per warp, so the order inside a level varies from run
 * to run; the pairs found do not, and they are sorted at the end. */
#include <cub/device/device_radix_sort.cuh>
#include <limits.h>

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/collide_math.h"
#include "core/tri_tri.h"
}

#define CD_THREADS 256

/* Device words of one traversal. */
enum {
    CD_HITS = 0,   /* intersecting pairs found (all, even past the hit buffer) */
    CD_LEAVES = 1, /* leaf pairs tested */
    CD_WORDS = 4
};

typedef struct cd_trees {
    struct pm_bvh a, b;
    int self;
} cd_trees;

/* Appends k words per lane to out (one atomic per warp); returns the lane's
 * first slot. Every lane of the warp must call it. */
static __device__ __forceinline__ unsigned long long warp_append(unsigned long long *count,
                                                                 unsigned k)
{
    const unsigned lane = threadIdx.x & 31;
    unsigned incl = k;
    for (int off = 1; off < 32; off <<= 1) {
        unsigned v = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= (unsigned)off) incl += v;
    }
    unsigned total = __shfl_sync(0xffffffffu, incl, 31);
    unsigned long long base = 0;
    if (lane == 31 && total) base = atomicAdd(count, (unsigned long long)total);
    base = __shfl_sync(0xffffffffu, base, 31);
    return base + (incl - k);
}

static __device__ void cd_leaf(const cd_trees &t, const pmi_xform &x, uint32_t na, uint32_t nb,
                               unsigned long long *hits, unsigned long long hit_cap,
                               unsigned long long *words)
{
    const int64_t an = (int64_t)t.a.num_triangles, bn = (int64_t)t.b.num_triangles;
    size_t la = na - (size_t)(an - 1), lb = nb - (size_t)(bn - 1);
    const float *ta = t.a.tris + 9 * la, *tb = t.b.tris + 9 * lb;
    if (t.self &&
        pmi_tris_adjacent(t.a.tri_verts + 3 * la, t.b.tri_verts + 3 * lb, ta, tb, t.a.soup))
        return;
    float ua[9], ub[9];
    for (int k = 0; k < 9; k++) {
        ua[k] = ta[k];
        ub[k] = tb[k];
    }
    if (!x.identity) {
        float v[9];
        for (int k = 0; k < 3; k++)
            pmi_xform_point(&x, ub + 3 * k, v + 3 * k);
        for (int k = 0; k < 9; k++)
            ub[k] = v[k];
    }
    if (!pmi_tri_tri(ua, ub)) return;
    unsigned long long ia = t.a.tri_index[la], ib = t.b.tri_index[lb];
    if (t.self && ia > ib) {
        unsigned long long s = ia;
        ia = ib;
        ib = s;
    }
    unsigned long long slot = atomicAdd(&words[CD_HITS], 1ull);
    if (slot < hit_cap) hits[slot] = (ia << 32) | ib;
}

/* One level: reads *count_in pairs of `in` (at most cap were stored),
 * appends the children to `out` (count in *count_out, the full number even
 * past cap). */
static __global__ void __launch_bounds__(CD_THREADS)
    cd_level_kernel(cd_trees t, pmi_xform x, const unsigned long long *in,
                    const unsigned long long *count_in, unsigned long long *out,
                    unsigned long long *count_out, unsigned long long cap, unsigned long long *hits,
                    unsigned long long hit_cap, unsigned long long *words)
{
    unsigned long long n = *count_in;
    if (n > cap) n = cap; /* an overflowed level: the host runs again */
    const int64_t an = (int64_t)t.a.num_triangles, bn = (int64_t)t.b.num_triangles;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned leaves = 0;
    /* Whole warps iterate together so that warp_append sees every lane. */
    for (unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x; base < n;
         base += stride) {
        unsigned long long i = base + threadIdx.x;
        int fate = PMI_PAIR_DROP;
        uint32_t na = 0, nb = 0;
        if (i < n) {
            unsigned long long p = in[i];
            na = (uint32_t)(p >> 32);
            nb = (uint32_t)p;
            fate = pmi_pair_fate(t.a.boxes, an, t.b.boxes, bn, na, nb, t.self, &x);
        }
        unsigned k = pmi_pair_children(fate);
        unsigned long long slot = warp_append(count_out, k);
        if (k && slot < cap) {
            /* Every slot below cap is written, also by a lane whose
             * children straddle cap: the next level reads [0, cap) whole
             * (the host then runs again with a larger cap). */
            uint64_t kids[3];
            pmi_pair_split(t.a.children, t.b.children, na, nb, fate, t.self, kids);
            for (unsigned c = 0; c < k && slot + c < cap; c++)
                out[slot + c] = kids[c];
        }
        if (fate == PMI_PAIR_LEAF) {
            leaves++;
            cd_leaf(t, x, na, nb, hits, hit_cap, words);
        }
    }
    if (leaves) atomicAdd(&words[CD_LEAVES], (unsigned long long)leaves);
}

static __global__ void cd_pairs_kernel(const unsigned long long *sorted, unsigned long long n,
                                       uint32_t *pairs)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        pairs[2 * i] = (uint32_t)(sorted[i] >> 32);
        pairs[2 * i + 1] = (uint32_t)sorted[i];
    }
}

/* Device memory of one traversal, carved from the context's scratch. */
typedef struct cd_mem {
    unsigned long long *buf[2]; /* the level read and the level written */
    unsigned long long *hits, *sorted, *counts, *words;
    char *sort_tmp;
} cd_mem;

/* Sizes of one traversal's device memory. */
typedef struct cd_plan {
    size_t cap;     /* pairs per level buffer */
    size_t hit_cap; /* pairs found that can be stored */
    unsigned levels;
    size_t sort_bytes;
} cd_plan;

/* What the runs of one traversal add up to. */
typedef struct cd_acc {
    unsigned long long words[CD_WORDS]; /* hits and leaf tests so far */
    unsigned long long levels, boxes, parts;
} cd_acc;

static pm_status cd_layout(pm_context *ctx, cd_plan *p, cd_mem *m)
{
    p->sort_bytes = 0;
    cub::DeviceRadixSort::SortKeys(NULL, p->sort_bytes, (const unsigned long long *)NULL,
                                   (unsigned long long *)NULL, (int)p->hit_cap, 0, 64,
                                   pmi_cuda(ctx)->stream);
    size_t lvl = pmi_align256(p->cap * sizeof(unsigned long long));
    size_t hit = pmi_align256(p->hit_cap * sizeof(unsigned long long));
    size_t cnt = pmi_align256((p->levels + 2 + CD_WORDS) * sizeof(unsigned long long));
    char *w;
    PMI_TRY(pmi_cuda_scratch(ctx, 2 * lvl + 2 * hit + cnt + pmi_align256(p->sort_bytes),
                             (void **)&w));
    m->buf[0] = (unsigned long long *)w;
    m->buf[1] = (unsigned long long *)(w + lvl);
    m->hits = (unsigned long long *)(w + 2 * lvl);
    m->sorted = (unsigned long long *)(w + 2 * lvl + hit);
    m->counts = (unsigned long long *)(w + 2 * lvl + 2 * hit);
    m->words = m->counts + p->levels + 2;
    m->sort_tmp = w + 2 * lvl + 2 * hit + cnt;
    return PM_STATUS_OK;
}

/* Queues `nlevels` levels from the n candidate pairs at seeds_d (NULL: the
 * pair (root, root)), the hit and leaf words starting from acc's, and
 * waits once for the level sizes (counts_h[0..nlevels]) and the words. */
static pm_status cd_run(pm_context *ctx, const cd_trees &t, const pmi_xform &x, const cd_plan &p,
                        const cd_mem &m, const unsigned long long *seeds_d, unsigned long long n,
                        unsigned nlevels, const cd_acc &acc, unsigned long long *counts_h,
                        unsigned long long *words_h)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    PMI_CU_TRY(cudaMemsetAsync(m.counts, 0, (p.levels + 2) * sizeof(unsigned long long), s),
               "pm_collide: init");
    PMI_CU_TRY(cudaMemcpyAsync(m.counts, &n, sizeof n, cudaMemcpyHostToDevice, s),
               "pm_collide: init");
    PMI_CU_TRY(cudaMemcpyAsync(m.words, acc.words, sizeof acc.words, cudaMemcpyHostToDevice, s),
               "pm_collide: init");
    if (seeds_d)
        PMI_CU_TRY(cudaMemcpyAsync(m.buf[0], seeds_d, n * sizeof(unsigned long long),
                                   cudaMemcpyDeviceToDevice, s),
                   "pm_collide: init");
    else
        PMI_CU_TRY(cudaMemsetAsync(m.buf[0], 0, sizeof(unsigned long long), s), "pm_collide: init");
    /* A fixed grid: a level's size is known only on the device. */
    unsigned grid = (unsigned)st->num_sms * 8;
    for (unsigned l = 0; l < nlevels; l++) {
        cd_level_kernel<<<grid, CD_THREADS, 0, s>>>(t, x, m.buf[l & 1], m.counts + l,
                                                    m.buf[(l + 1) & 1], m.counts + l + 1, p.cap,
                                                    m.hits, p.hit_cap, m.words);
    }
    PMI_TRY(pmi_cuda_launched("pm_collide: levels"));
    PMI_CU_TRY(cudaMemcpyAsync(counts_h, m.counts, (nlevels + 1) * sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, s),
               "pm_collide: counts");
    PMI_CU_TRY(cudaMemcpyAsync(words_h, m.words, CD_WORDS * sizeof(unsigned long long),
                               cudaMemcpyDeviceToHost, s),
               "pm_collide: counts");
    return pmi_cuda_wait(ctx, "pm_collide");
}

/* Adds the levels 0..nlevels-1 of a completed run to acc. */
static void cd_account(cd_acc *acc, const unsigned long long *counts_h, unsigned nlevels,
                       const unsigned long long *words_h)
{
    for (unsigned l = 0; l < nlevels; l++) {
        acc->levels += counts_h[l] != 0;
        acc->boxes += counts_h[l];
    }
    memcpy(acc->words, words_h, sizeof acc->words);
}

/* First level whose pairs did not fit (0: none did overflow). */
static unsigned cd_overflow(const unsigned long long *counts_h, unsigned nlevels, size_t cap)
{
    for (unsigned l = 1; l <= nlevels; l++)
        if (counts_h[l] > cap) return l;
    return 0;
}

/* The traversal from n seed pairs with level buffers at the bound
 * max_candidates. A run that overflows at level L is run again up to level
 * L - 1 (whose pairs fit), that level is saved and finished in parts of at
 * most cap / 3 pairs (at most cap children each), each part by a nested
 * call. Memory: the saved level per nesting. The hits and leaf words carry
 * over from run to run, so every pair is tested once. */
static pm_status cd_solve(pm_context *ctx, const cd_trees &t, const pmi_xform &x,
                          const cd_plan &p, const cd_mem &m, const unsigned long long *seeds_d,
                          unsigned long long n, cd_acc *acc, unsigned long long *counts_h)
{
    unsigned long long words_h[CD_WORDS];
    PMI_TRY(cd_run(ctx, t, x, p, m, seeds_d, n, p.levels, *acc, counts_h, words_h));
    unsigned L = cd_overflow(counts_h, p.levels, p.cap);
    if (!L) {
        if (counts_h[p.levels] != 0)
            return pmi_error(PM_STATUS_DEVICE_ERROR,
                             "pm_collide: the traversal did not end within %u levels", p.levels);
        cd_account(acc, counts_h, p.levels, words_h);
        return PM_STATUS_OK;
    }
    /* Seeds are at most cap / 3 pairs, so their children fit: L >= 2. */
    if (L < 2) return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_collide: a part overflowed its bound");
    PMI_TRY(cd_run(ctx, t, x, p, m, seeds_d, n, L - 1, *acc, counts_h, words_h));
    cd_account(acc, counts_h, L - 1, words_h);
    unsigned long long saved = counts_h[L - 1];
    if (saved > p.cap)
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_collide: a level changed size between runs");
    unsigned long long *part = NULL;
    cudaError_t e = cudaMalloc(&part, saved * sizeof *part);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_collide: cannot allocate %llu candidate pairs to split a level",
                         saved);
    }
    e = cudaMemcpyAsync(part, m.buf[(L - 1) & 1], saved * sizeof *part, cudaMemcpyDeviceToDevice,
                        pmi_cuda(ctx)->stream);
    pm_status s = e == cudaSuccess ? PM_STATUS_OK : pmi_cuda_status(e, "pm_collide: split");
    acc->parts++;
    const unsigned long long chunk = p.cap / 3;
    for (unsigned long long off = 0; off < saved && s == PM_STATUS_OK; off += chunk)
        s = cd_solve(ctx, t, x, p, m, part + off, saved - off < chunk ? saved - off : chunk, acc,
                     counts_h);
    cudaFree(part);
    return s;
}

extern "C" pm_status pmi_cuda_collide(pm_context *ctx, const struct pm_bvh *a,
                                      const struct pm_bvh *b, const pmi_xform *x,
                                      const pm_collide_options *o, uint32_t *pairs, size_t capacity,
                                      size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    cd_trees t;
    t.a = *a;
    t.b = *b;
    t.self = a == b;
    cd_plan p;
    /* Enough levels for the deepest pair of leaves: each level moves one
     * side of a pair one node down (plus the final leaf level). */
    p.levels = a->depth + b->depth + 2;
    size_t guess = 4 * (a->num_triangles + b->num_triangles) + 4096;
    p.cap = guess < o->max_candidates ? guess : o->max_candidates;
    p.hit_cap = capacity > ((size_t)1 << 16) ? capacity : ((size_t)1 << 16);
    unsigned long long *counts_h = (unsigned long long *)malloc((p.levels + 2) * sizeof(*counts_h));
    if (!counts_h) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_collide: out of host memory");
    cd_mem m;
    cd_acc acc;
    pm_status s = PM_STATUS_OK;
    /* Level buffers grow to the largest level seen, up to max_candidates;
     * past it the traversal is split (cd_solve). The pairs found overflowing
     * their buffer: all again with the count seen. Each retry is larger, so
     * this ends after a few runs. */
    for (unsigned attempt = 0;; attempt++) {
        if (attempt > 64) {
            s = pmi_error(PM_STATUS_DEVICE_ERROR, "pm_collide: the buffers did not settle");
            break;
        }
        memset(&acc, 0, sizeof acc);
        if (p.hit_cap > (size_t)INT_MAX) {
            s = pmi_error(PM_STATUS_OVERFLOW,
                          "pm_collide: %zu intersecting pairs, above the %d one call can sort",
                          p.hit_cap, INT_MAX);
            break;
        }
        s = cd_layout(ctx, &p, &m);
        if (s != PM_STATUS_OK) break;
        unsigned long long words_h[CD_WORDS];
        s = cd_run(ctx, t, *x, p, m, NULL, 1, p.levels, acc, counts_h, words_h);
        if (s != PM_STATUS_OK) break;
        unsigned L = cd_overflow(counts_h, p.levels, p.cap);
        if (L && p.cap < o->max_candidates) {
            unsigned long long need = 0;
            for (unsigned l = 0; l <= p.levels; l++)
                need = counts_h[l] > need ? counts_h[l] : need;
            p.cap = need < o->max_candidates ? (size_t)need : o->max_candidates;
            continue;
        }
        if (L)
            s = cd_solve(ctx, t, *x, p, m, NULL, 1, &acc, counts_h);
        else if (counts_h[p.levels] != 0)
            s = pmi_error(PM_STATUS_DEVICE_ERROR,
                          "pm_collide: the traversal did not end within %u levels", p.levels);
        else
            cd_account(&acc, counts_h, p.levels, words_h);
        if (s != PM_STATUS_OK) break;
        if (acc.words[CD_HITS] > p.hit_cap) {
            p.hit_cap = (size_t)acc.words[CD_HITS];
            continue;
        }
        break;
    }
    if (s == PM_STATUS_OK) {
        unsigned long long found = acc.words[CD_HITS];
        if (found) {
            cudaStream_t cs = pmi_cuda(ctx)->stream;
            cudaError_t e = cub::DeviceRadixSort::SortKeys(m.sort_tmp, p.sort_bytes, m.hits,
                                                           m.sorted, (int)found, 0, 64, cs);
            size_t w = found < capacity ? (size_t)found : capacity;
            if (e == cudaSuccess && w) {
                size_t blocks = (w + CD_THREADS - 1) / CD_THREADS;
                cd_pairs_kernel<<<(unsigned)(blocks < 4096 ? blocks : 4096), CD_THREADS, 0, cs>>>(
                    m.sorted, w, pairs);
            }
            if (e == cudaSuccess) e = cudaGetLastError();
            if (e == cudaSuccess) e = cudaStreamSynchronize(cs);
            if (e != cudaSuccess) s = pmi_cuda_status(e, "pm_collide: sort");
        }
        if (s == PM_STATUS_OK) {
            *count = (size_t)found;
            if (o->stats_levels) *o->stats_levels = acc.levels;
            if (o->stats_box_tests) *o->stats_box_tests = acc.boxes;
            if (o->stats_leaf_tests) *o->stats_leaf_tests = acc.words[CD_LEAVES];
            if (o->stats_parts) *o->stats_parts = acc.parts;
            if (found > capacity)
                s = pmi_error(PM_STATUS_TRUNCATED,
                              "pm_collide: %llu intersecting pairs, capacity %zu", found, capacity);
        }
    }
    free(counts_h);
    return s;
}
