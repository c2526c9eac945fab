/* Collision detection on the GPU by breadth-first filtering of candidate
 * node pairs (Horn, GPU Gems 2 ch. 36, 2005, after Gottschalk, Lin and
 * Manocha's RAPID, 1996). Each level decides every pair of the stream
 * (src/core/collide_math.h), tests leaf pairs with the exact predicate
 * (src/core/tri_tri.h) and appends the children of split pairs to the next
 * level's stream, one atomic per warp; the level sizes live in device
 * memory. Two ways to run the levels (docs/collide.md):
 *
 * - persistent (the default): one cooperative kernel runs every level,
 *   the grid waiting for itself between levels (a grid-wide barrier, no
 *   launch); levels of at most CD_SMALL pairs are run by block 0 alone
 *   with block barriers, the other blocks waiting once for the whole run
 *   of small levels. One launch per traversal.
 * - levels: one kernel launch per possible level (the trees' depths bound
 *   the count), each reading its size from the previous one; for devices
 *   that cannot launch the cooperative grid (or the test hook "levels").
 *
 * Either way the host waits once per traversal, for a summary of eight
 * words the kernels write into the context's mapped host words. The order
 * inside a level varies from run to run; the pairs found do not, and they
 * are sorted at the end: by one block in shared memory right after the
 * traversal when they are few (CD_SORT_MAX), by cub's radix sort after the
 * wait otherwise. */
#include <cooperative_groups.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <limits.h>

#include "core/hooks.h"
#include "cuda/cuda_internal.h"

extern "C" {
#include "core/collide_math.h"
#include "core/tri_tri.h"
}

namespace cg = cooperative_groups;

#define CD_THREADS 256
/* A level of at most this many pairs is run by block 0 alone (two rounds
 * of its threads): cheaper than a grid-wide barrier. */
#define CD_SMALL 512
/* The pairs found are sorted by one block when they are at most this many. */
#define CD_SORT_ITEMS 16
#define CD_SORT_MAX (CD_THREADS * CD_SORT_ITEMS)
/* Most devices whose cooperative grid size is cached. */
#define CD_MAX_DEVICES 64

/* Device words of one traversal. */
enum {
    CD_HITS = 0,   /* intersecting pairs found (all, even past the hit buffer) */
    CD_LEAVES = 1, /* leaf pairs tested */
    CD_WORDS = 4
};

/* The summary of one traversal run, written to device memory and to the
 * context's mapped host words (PMI_HOST_SLOTS). */
enum {
    CS_HITS = 0,     /* CD_HITS at the end */
    CS_LEAVES = 1,   /* CD_LEAVES at the end */
    CS_LEVELS = 2,   /* levels run with a non-empty stream */
    CS_BOXES = 3,    /* pairs decided, all levels */
    CS_OVERFLOW = 4, /* first level whose pairs did not fit (> cap); 0: none */
    CS_LAST = 5,     /* size of the level before it; with no overflow, of the
                        level after the last one run (0: the traversal ended) */
    CS_MAX = 6,      /* largest level size seen */
    CS_SORTED = 7,   /* 1: the block sort wrote the pairs */
    CS_WORDS = 8
};
static_assert((int)CS_WORDS <= (int)PMI_HOST_SLOTS, "the summary must fit the mapped host words");

typedef struct cd_trees {
    struct pm_bvh a, b;
    int self;
} cd_trees;

/* Everything the traversal kernels read. */
typedef struct cd_args {
    cd_trees t;
    pmi_xform x;
    const unsigned long long *seeds; /* level 0's pairs; NULL: (root, root) in buf[0] */
    unsigned long long nseeds;       /* at most cap */
    unsigned long long cap;          /* pairs per level buffer */
    unsigned long long hit_cap;      /* pairs found that can be stored */
    unsigned long long hits0, leaves0; /* CD_HITS and CD_LEAVES to start from */
    unsigned long long *buf[2];      /* level l reads buf[l & 1] (level 0: seeds) */
    unsigned long long *counts;      /* nlevels + 2 level sizes */
    unsigned long long *hits, *words;
    unsigned long long *sum_d, *sum_h; /* CS_WORDS each: device, mapped host */
    unsigned nlevels;
} cd_args;

static __device__ __forceinline__ unsigned long long ldv(const unsigned long long *p)
{
    return *(const volatile unsigned long long *)p;
}

static __device__ __forceinline__ const unsigned long long *cd_input(const cd_args &A, unsigned l)
{
    return l == 0 && A.seeds ? A.seeds : A.buf[l & 1];
}

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

/* One level over the pairs in[0..n): this thread takes pairs first +
 * threadIdx.x, then every `stride` on; first and stride are the same for
 * a whole block, so whole warps iterate together (warp_append). Children
 * go to out (count in *count_out, the full number even past cap). */
static __device__ __forceinline__ void cd_level(const cd_trees &t, const pmi_xform &x,
                                                const unsigned long long *in,
                                                unsigned long long n, unsigned long long *out,
                                                unsigned long long *count_out,
                                                unsigned long long cap, unsigned long long *hits,
                                                unsigned long long hit_cap,
                                                unsigned long long *words,
                                                unsigned long long first,
                                                unsigned long long stride,
                                                unsigned long long &leaves)
{
    const int64_t an = (int64_t)t.a.num_triangles, bn = (int64_t)t.b.num_triangles;
    for (unsigned long long base = first; base < n; base += stride) {
        unsigned long long i = base + threadIdx.x;
        int fate = PMI_PAIR_DROP;
        uint32_t na = 0, nb = 0;
        if (i < n) {
            /* L2, not L1: the stream was written by other blocks. */
            unsigned long long p = __ldcg(in + i);
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
}

/* Whether block 0 runs level l alone: its stream is small and fits. */
static __device__ __forceinline__ bool cd_small(const cd_args &A, unsigned long long n)
{
    return n != 0 && n <= A.cap && n <= CD_SMALL;
}

/* ---- the persistent traversal -------------------------------------------- */

/* The whole traversal in one cooperative launch (every block resident).
 * Each iteration of the level loop ends at one grid barrier, reached by
 * every block: after it the level sizes written before it are final, and
 * every block reads the same ones, so every block takes the same
 * decisions and reaches the same number of barriers. */
static __global__ void __launch_bounds__(CD_THREADS) cd_persistent_kernel(cd_args A)
{
    cg::grid_group grid = cg::this_grid();
    const unsigned long long gsize = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long gtid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool lead = gtid == 0;
    for (unsigned long long i = gtid; i <= (unsigned long long)A.nlevels + 1; i += gsize)
        A.counts[i] = i == 0 ? A.nseeds : 0;
    if (lead) {
        A.words[CD_HITS] = A.hits0;
        A.words[CD_LEAVES] = A.leaves0;
        if (!A.seeds) A.buf[0][0] = 0; /* (root, root) */
    }
    grid.sync();
    unsigned long long leaves = 0;
    unsigned long long levels = 0, boxes = 0; /* the lead thread's */
    unsigned l = 0, overflow = 0;
    while (l < A.nlevels) {
        unsigned long long n = ldv(A.counts + l);
        if (n == 0) break;
        if (n > A.cap) {
            overflow = l;
            break;
        }
        if (n <= CD_SMALL) {
            /* Block 0 runs this level and the small ones after it. */
            if (blockIdx.x == 0) {
                unsigned k = l;
                for (;;) {
                    if (lead) {
                        levels++;
                        boxes += n;
                    }
                    cd_level(A.t, A.x, cd_input(A, k), n, A.buf[(k + 1) & 1], A.counts + k + 1,
                             A.cap, A.hits, A.hit_cap, A.words, 0, blockDim.x, leaves);
                    __syncthreads(); /* the level's children and size are written */
                    if (++k >= A.nlevels) break;
                    n = ldv(A.counts + k);
                    if (!cd_small(A, n)) break;
                }
            }
            grid.sync();
            /* Where block 0 stopped, found by every block by the same rule
             * from the final sizes (no word that a later run rewrites). */
            for (l++; l < A.nlevels && cd_small(A, ldv(A.counts + l)); l++) {
            }
        } else {
            if (lead) {
                levels++;
                boxes += n;
            }
            cd_level(A.t, A.x, cd_input(A, l), n, A.buf[(l + 1) & 1], A.counts + l + 1, A.cap,
                     A.hits, A.hit_cap, A.words, (unsigned long long)blockIdx.x * blockDim.x,
                     gsize, leaves);
            grid.sync();
            l++;
        }
    }
    if (leaves) atomicAdd(&A.words[CD_LEAVES], leaves);
    grid.sync();
    if (lead) {
        unsigned end = l < A.nlevels ? l : A.nlevels;
        unsigned long long mx = 0;
        for (unsigned i = 0; i <= end; i++) {
            unsigned long long c = ldv(A.counts + i);
            mx = c > mx ? c : mx;
        }
        unsigned long long s[CS_WORDS];
        s[CS_HITS] = ldv(A.words + CD_HITS);
        s[CS_LEAVES] = ldv(A.words + CD_LEAVES);
        s[CS_LEVELS] = levels;
        s[CS_BOXES] = boxes;
        s[CS_OVERFLOW] = overflow;
        s[CS_LAST] = overflow ? ldv(A.counts + overflow - 1) : ldv(A.counts + end);
        s[CS_MAX] = mx;
        s[CS_SORTED] = 0;
        for (int k = 0; k < CS_WORDS; k++) {
            A.sum_d[k] = s[k];
            A.sum_h[k] = s[k];
        }
    }
}

/* ---- the level-by-level traversal ----------------------------------------- */

static __global__ void cd_init_kernel(cd_args A)
{
    for (unsigned long long i = threadIdx.x; i <= (unsigned long long)A.nlevels + 1;
         i += blockDim.x)
        A.counts[i] = i == 0 ? A.nseeds : 0;
    if (threadIdx.x == 0) {
        A.words[CD_HITS] = A.hits0;
        A.words[CD_LEAVES] = A.leaves0;
        if (!A.seeds) A.buf[0][0] = 0;
    }
}

/* Level l: reads counts[l] pairs (at most cap were stored). */
static __global__ void __launch_bounds__(CD_THREADS) cd_level_kernel(cd_args A, unsigned l)
{
    unsigned long long n = ldv(A.counts + l);
    if (n > A.cap) n = A.cap; /* an overflowed level: the host runs again */
    unsigned long long leaves = 0;
    cd_level(A.t, A.x, cd_input(A, l), n, A.buf[(l + 1) & 1], A.counts + l + 1, A.cap, A.hits,
             A.hit_cap, A.words, (unsigned long long)blockIdx.x * blockDim.x,
             (unsigned long long)gridDim.x * blockDim.x, leaves);
    if (leaves) atomicAdd(&A.words[CD_LEAVES], leaves);
}

/* The summary of the level-by-level run, as the persistent kernel writes it. */
static __global__ void cd_summary_kernel(cd_args A)
{
    if (threadIdx.x != 0) return;
    unsigned long long s[CS_WORDS] = {0};
    s[CS_HITS] = A.words[CD_HITS];
    s[CS_LEAVES] = A.words[CD_LEAVES];
    for (unsigned l = 0; l <= A.nlevels; l++) {
        unsigned long long c = A.counts[l];
        if (l < A.nlevels) {
            s[CS_LEVELS] += c != 0;
            s[CS_BOXES] += c;
        }
        if (l && !s[CS_OVERFLOW] && c > A.cap) s[CS_OVERFLOW] = l;
        s[CS_MAX] = c > s[CS_MAX] ? c : s[CS_MAX];
    }
    s[CS_LAST] = A.counts[s[CS_OVERFLOW] ? s[CS_OVERFLOW] - 1 : A.nlevels];
    for (int k = 0; k < CS_WORDS; k++) {
        A.sum_d[k] = s[k];
        A.sum_h[k] = s[k];
    }
}

/* ---- sorting the pairs found ------------------------------------------------ */

/* One block: when the traversal ended in one run with at most CD_SORT_MAX
 * pairs found (all stored), sorts them in shared memory and writes the
 * first `capacity` to pairs; marks the summary. Otherwise does nothing
 * (the host sorts after the wait). */
static __global__ void __launch_bounds__(CD_THREADS)
    cd_sort_small_kernel(const unsigned long long *hits, unsigned long long hit_cap,
                         const unsigned long long *sum_d, unsigned long long *sum_h,
                         uint32_t *pairs, unsigned long long capacity)
{
    typedef cub::BlockRadixSort<unsigned long long, CD_THREADS, CD_SORT_ITEMS> Sort;
    __shared__ typename Sort::TempStorage tmp;
    const unsigned long long found = sum_d[CS_HITS];
    if (sum_d[CS_OVERFLOW] || sum_d[CS_LAST] || found > hit_cap || found > CD_SORT_MAX) return;
    unsigned long long keys[CD_SORT_ITEMS];
    for (int k = 0; k < CD_SORT_ITEMS; k++) {
        unsigned long long i = (unsigned long long)threadIdx.x * CD_SORT_ITEMS + k;
        keys[k] = i < found ? hits[i] : ~0ull; /* no pair is all ones */
    }
    Sort(tmp).Sort(keys); /* blocked: thread t holds ranks t * CD_SORT_ITEMS + k */
    const unsigned long long w = found < capacity ? found : capacity;
    for (int k = 0; k < CD_SORT_ITEMS; k++) {
        unsigned long long i = (unsigned long long)threadIdx.x * CD_SORT_ITEMS + k;
        if (i < w) {
            pairs[2 * i] = (uint32_t)(keys[k] >> 32);
            pairs[2 * i + 1] = (uint32_t)keys[k];
        }
    }
    if (threadIdx.x == 0) sum_h[CS_SORTED] = 1;
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

/* ---- host side ------------------------------------------------------------------ */

/* Device memory of one traversal, carved from the context's scratch. */
typedef struct cd_mem {
    unsigned long long *buf[2]; /* the level read and the level written */
    unsigned long long *hits, *sorted, *counts, *words, *sum_d;
    char *sort_tmp;
} cd_mem;

/* Sizes of one traversal's device memory, and how its levels run. */
typedef struct cd_plan {
    size_t cap;     /* pairs per level buffer */
    size_t hit_cap; /* pairs found that can be stored */
    unsigned levels;
    size_t sort_bytes;
    unsigned grid;  /* blocks of the persistent kernel; 0: the level-by-level path */
    unsigned level_grid;
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
    size_t cnt =
        pmi_align256((p->levels + 2 + CD_WORDS + CS_WORDS) * sizeof(unsigned long long));
    char *w;
    PMI_TRY(pmi_cuda_scratch(ctx, 2 * lvl + 2 * hit + cnt + pmi_align256(p->sort_bytes),
                             (void **)&w));
    m->buf[0] = (unsigned long long *)w;
    m->buf[1] = (unsigned long long *)(w + lvl);
    m->hits = (unsigned long long *)(w + 2 * lvl);
    m->sorted = (unsigned long long *)(w + 2 * lvl + hit);
    m->counts = (unsigned long long *)(w + 2 * lvl + 2 * hit);
    m->words = m->counts + p->levels + 2;
    m->sum_d = m->words + CD_WORDS;
    m->sort_tmp = w + 2 * lvl + 2 * hit + cnt;
    return PM_STATUS_OK;
}

/* Blocks of the persistent kernel that the device keeps resident at once
 * (0: no cooperative launch on this device), cached per device. */
static unsigned cd_coop_grid(pm_context *ctx)
{
    static int cached[CD_MAX_DEVICES]; /* 0: not asked yet; -1: none; else blocks */
    pmi_cuda_state *st = pmi_cuda(ctx);
    int dev = st->device;
    if (dev >= 0 && dev < CD_MAX_DEVICES && cached[dev]) return cached[dev] > 0 ? cached[dev] : 0;
    int coop = 0, per_sm = 0;
    if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess) coop = 0;
    if (coop && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cd_persistent_kernel,
                                                              CD_THREADS, 0) != cudaSuccess)
        per_sm = 0;
    (void)cudaGetLastError();
    long long g = coop ? (long long)per_sm * st->num_sms : 0;
    if (g > 65535) g = 65535;
    if (dev >= 0 && dev < CD_MAX_DEVICES) cached[dev] = g > 0 ? (int)g : -1;
    return (unsigned)g;
}

/* Runs `nlevels` levels from the n candidate pairs at seeds_d (NULL: the
 * pair (root, root)), the hit and leaf words starting from acc's; with
 * `sort`, the block sort follows (into pairs_out, capacity pairs). Waits once, for the summary (sum).
 * A cooperative launch the device refuses (too large a grid, e.g. under
 * MPS) moves this and later runs of the call to the level-by-level path. */
static pm_status cd_run(pm_context *ctx, const cd_trees &t, const pmi_xform &x, cd_plan *p,
                        const cd_mem &m, const unsigned long long *seeds_d, unsigned long long n,
                        unsigned nlevels, const cd_acc &acc, int sort, uint32_t *pairs_out,
                        size_t capacity, unsigned long long *sum)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    cd_args A;
    memset(&A, 0, sizeof A);
    A.t = t;
    A.x = x;
    A.seeds = seeds_d;
    A.nseeds = n;
    A.cap = p->cap;
    A.hit_cap = p->hit_cap;
    A.hits0 = acc.words[CD_HITS];
    A.leaves0 = acc.words[CD_LEAVES];
    A.buf[0] = m.buf[0];
    A.buf[1] = m.buf[1];
    A.counts = m.counts;
    A.hits = m.hits;
    A.words = m.words;
    A.sum_d = m.sum_d;
    A.sum_h = st->host_d;
    A.nlevels = nlevels;
    if (p->grid) {
        void *params[] = {&A};
        cudaError_t e = cudaLaunchCooperativeKernel((const void *)cd_persistent_kernel,
                                                    dim3(p->grid), dim3(CD_THREADS), params, 0, s);
        if (e == cudaErrorCooperativeLaunchTooLarge) {
            (void)cudaGetLastError();
            p->grid = 0;
        } else if (e != cudaSuccess) {
            return pmi_cuda_status(e, "pm_collide: traversal");
        }
    }
    if (!p->grid) {
        cd_init_kernel<<<1, CD_THREADS, 0, s>>>(A);
        for (unsigned l = 0; l < nlevels; l++)
            cd_level_kernel<<<p->level_grid, CD_THREADS, 0, s>>>(A, l);
        cd_summary_kernel<<<1, 32, 0, s>>>(A);
    }
    if (sort)
        cd_sort_small_kernel<<<1, CD_THREADS, 0, s>>>(m.hits, p->hit_cap, m.sum_d, st->host_d,
                                                      pairs_out, capacity);
    PMI_TRY(pmi_cuda_launched("pm_collide: traversal"));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_collide: traversal"));
    memcpy(sum, (const void *)st->host, CS_WORDS * sizeof *sum);
    return PM_STATUS_OK;
}

/* Adds a completed run to acc. */
static void cd_account(cd_acc *acc, const unsigned long long *sum)
{
    acc->levels += sum[CS_LEVELS];
    acc->boxes += sum[CS_BOXES];
    acc->words[CD_HITS] = sum[CS_HITS];
    acc->words[CD_LEAVES] = sum[CS_LEAVES];
}

/* The traversal from n seed pairs with level buffers at the bound
 * max_candidates. A run that overflows at level L is run again up to level
 * L - 1 (whose pairs fit), that level is saved and finished in parts of at
 * most cap / 3 pairs (at most cap children each), each part by a nested
 * call. Memory: the saved level per nesting. The hits and leaf words carry
 * over from run to run, so every pair is tested once. */
static pm_status cd_solve(pm_context *ctx, const cd_trees &t, const pmi_xform &x, cd_plan *p,
                          const cd_mem &m, const unsigned long long *seeds_d,
                          unsigned long long n, cd_acc *acc)
{
    unsigned long long sum[CS_WORDS];
    PMI_TRY(cd_run(ctx, t, x, p, m, seeds_d, n, p->levels, *acc, 0, NULL, 0, sum));
    unsigned L = (unsigned)sum[CS_OVERFLOW];
    if (!L) {
        if (sum[CS_LAST] != 0)
            return pmi_error(PM_STATUS_DEVICE_ERROR,
                             "pm_collide: the traversal did not end within %u levels", p->levels);
        cd_account(acc, sum);
        return PM_STATUS_OK;
    }
    /* Seeds are at most cap / 3 pairs, so their children fit: L >= 2. */
    if (L < 2) return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_collide: a part overflowed its bound");
    PMI_TRY(cd_run(ctx, t, x, p, m, seeds_d, n, L - 1, *acc, 0, NULL, 0, sum));
    unsigned long long saved = sum[CS_LAST];
    if (sum[CS_OVERFLOW] || saved > p->cap || saved == 0)
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_collide: a level changed size between runs");
    cd_account(acc, sum);
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
    const unsigned long long chunk = p->cap / 3;
    for (unsigned long long off = 0; off < saved && s == PM_STATUS_OK; off += chunk)
        s = cd_solve(ctx, t, x, p, m, part + off, saved - off < chunk ? saved - off : chunk, acc);
    cudaFree(part);
    return s;
}

extern "C" pm_status pmi_cuda_collide(pm_context *ctx, const struct pm_bvh *a,
                                      const struct pm_bvh *b, const pmi_xform *x,
                                      const pm_collide_options *o, uint32_t *pairs, size_t capacity,
                                      size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    unsigned hooks = 0;
    PMI_TRY(pmi_hooks(&hooks));
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
    p.grid = cd_coop_grid(ctx);
#ifdef PMI_HOOK_LEVELS
    if (hooks & PMI_HOOK_LEVELS) p.grid = 0;
#endif
    p.level_grid = (unsigned)pmi_cuda(ctx)->num_sms * 8;
    cd_mem m;
    cd_acc acc;
    pm_status s = PM_STATUS_OK;
    int sorted = 0;
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
        unsigned long long sum[CS_WORDS];
        /* The first run sorts its pairs itself when they are few. */
        s = cd_run(ctx, t, *x, &p, m, NULL, 1, p.levels, acc, 1, pairs, capacity, sum);
        if (s != PM_STATUS_OK) break;
        unsigned L = (unsigned)sum[CS_OVERFLOW];
        if (L && p.cap < o->max_candidates) {
            unsigned long long need = sum[CS_MAX];
            p.cap = need < o->max_candidates ? (size_t)need : o->max_candidates;
            continue;
        }
        if (L)
            s = cd_solve(ctx, t, *x, &p, m, NULL, 1, &acc);
        else if (sum[CS_LAST] != 0)
            s = pmi_error(PM_STATUS_DEVICE_ERROR,
                          "pm_collide: the traversal did not end within %u levels", p.levels);
        else
            cd_account(&acc, sum);
        if (s != PM_STATUS_OK) break;
        if (acc.words[CD_HITS] > p.hit_cap) {
            p.hit_cap = (size_t)acc.words[CD_HITS];
            continue;
        }
        sorted = !L && sum[CS_SORTED] == 1;
        break;
    }
    if (s == PM_STATUS_OK) {
        unsigned long long found = acc.words[CD_HITS];
        if (found && !sorted) {
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
            static const char *const paths[2][3] = {
                {"backend=cuda traversal=levels sort=none", "backend=cuda traversal=levels sort=block",
                 "backend=cuda traversal=levels sort=cub"},
                {"backend=cuda traversal=persistent sort=none",
                 "backend=cuda traversal=persistent sort=block",
                 "backend=cuda traversal=persistent sort=cub"}};
            pmi_collide_set_path(paths[p.grid != 0][!found ? 0 : sorted ? 1 : 2]);
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
    return s;
}
