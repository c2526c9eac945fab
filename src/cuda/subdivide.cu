/* Loop subdivision on the GPU: each step of src/core/loop_rules.h as a
 * kernel, one thread per element, queued on the context's stream (the
 * level loop is src/core/subdivide.c; the stream of triangles stays in
 * device memory between levels); red promotion runs to its closure in one
 * cooperative launch. The step is a template parameter, so each kernel
 * holds only its own step's code. */
#include <cooperative_groups.h>

#include "core/hooks.h"
#include "cuda/cuda_internal.h"

extern "C" {
#include "core/loop_rules.h"
}

namespace cg = cooperative_groups;

template <int STEP> static __global__ void loop_step_kernel(size_t n, pmi_loop_args a)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pmi_loop_step(STEP, (uint32_t)i, &a);
}

/* RED_UNIFORM with a block's output staged in shared memory: each thread
 * writes its triangle's 12 words of each array (children, twins, owner
 * numbers) there, and the positions and start corners of the new vertices
 * on the edges it owns; then the block stores its 12 * RED_THREADS words
 * of each array as contiguous 16-byte stores, and its new vertices (a
 * consecutive range of owner numbers) as contiguous words. Written
 * directly, a warp's store of one word per thread touched 32 lines 48
 * bytes apart, 36 times per triangle, and each new position was three
 * 4-byte stores to scattered lines. */
#define RED_THREADS 128

/* A block's contiguous words (a multiple of 4) 16 bytes at a time; both
 * ends 16-byte aligned. RED_UNIFORM's block stores 48 * RED_THREADS bytes
 * from the array's start times the block number, NORMAL_PATCH reads
 * 192 * PATCH_SPAN likewise, and the arrays come from cudaMalloc or the
 * pool (256-byte aligned). */
static __device__ void block_copy16(uint32_t *dst, const uint32_t *src, unsigned words)
{
    uint4 *d4 = (uint4 *)dst;
    const uint4 *s4 = (const uint4 *)src;
    for (unsigned i = threadIdx.x; i < words / 4; i += blockDim.x)
        d4[i] = s4[i];
}

/* Contiguous words of any alignment (positions, start corners). */
template <typename T> static __device__ void block_store(T *dst, const T *src, unsigned words)
{
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x)
        dst[i] = src[i];
}

/* TOPO: the next stream's topology is stored (tri_next set); without it
 * (the level before RED_LAST2's) only the new vertices' positions are,
 * and the block's shared memory is a quarter of it. */
#define RED_WORDS(TOPO) ((TOPO) ? 12 * RED_THREADS : 4)

template <bool TOPO>
static __global__ void __launch_bounds__(RED_THREADS) red_uniform_kernel(size_t n, pmi_loop_args a)
{
    __shared__ __align__(16) uint32_t s_tri[RED_WORDS(TOPO)];
    __shared__ __align__(16) uint32_t s_twin[RED_WORDS(TOPO)];
    __shared__ __align__(16) uint32_t s_own[RED_WORDS(TOPO)];
    __shared__ float s_pos[9 * RED_THREADS];
    __shared__ uint32_t s_vs[3 * RED_THREADS];
    const size_t t0 = (size_t)blockIdx.x * RED_THREADS;
    const size_t t = t0 + threadIdx.x;
    const unsigned j = 12 * threadIdx.x;
    /* the block's new vertices: owner numbers elo .. elo + owned - 1 */
    const uint32_t elo = a.owner[3 * t0];
    int own[3] = {0, 0, 0};
    if (t < n)
        for (int k = 0; k < 3; k++) {
            const uint32_t h = 3 * (uint32_t)t + k, tw = a.twin[h];
            own[k] = pmi_loop_owns(h, tw);
        }
    const unsigned owned =
        __syncthreads_count(own[0]) + __syncthreads_count(own[1]) + __syncthreads_count(own[2]);
    if (t < n)
        pmi_loop_red_uniform_into(
            &a, (uint32_t)t, TOPO ? s_tri + j : NULL, TOPO && a.twin_next ? s_twin + j : NULL,
            TOPO && a.owner_next ? s_own + j : NULL, s_pos, a.vstart_new ? s_vs : NULL, elo);
    __syncthreads();
    const unsigned words = 12 * (unsigned)(n - t0 < RED_THREADS ? n - t0 : RED_THREADS);
    if (TOPO) block_copy16(a.tri_next + 12 * t0, s_tri, words);
    if (TOPO && a.twin_next) block_copy16(a.twin_next + 12 * t0, s_twin, words);
    if (TOPO && a.owner_next) block_copy16(a.owner_next + 12 * t0, s_own, words);
    const size_t m0 = (size_t)a.nv + elo;
    block_store(a.pos_new + 3 * m0, s_pos, 3 * owned);
    if (a.vstart_new) block_store(a.vstart_new + m0, s_vs, owned);
}

/* EVEN_UNIFORM with the block's positions staged in shared memory and
 * stored as contiguous words (AHEAD: pos_out2 is set, its positions
 * likewise). */
#define EVEN_THREADS 256

template <bool AHEAD>
static __global__ void __launch_bounds__(EVEN_THREADS)
    even_uniform_kernel(size_t n, pmi_loop_args a)
{
    __shared__ float s_pos[3 * EVEN_THREADS];
    __shared__ float s_pos2[AHEAD ? 3 * EVEN_THREADS : 1];
    const size_t v0 = (size_t)blockIdx.x * EVEN_THREADS;
    const size_t v = v0 + threadIdx.x;
    if (v < n)
        pmi_loop_even_uniform_into(&a, (uint32_t)v, s_pos + 3 * threadIdx.x,
                                   AHEAD ? s_pos2 + 3 * threadIdx.x : NULL);
    __syncthreads();
    const unsigned cnt = (unsigned)(n - v0 < EVEN_THREADS ? n - v0 : EVEN_THREADS);
    block_store(a.pos_new + 3 * v0, s_pos, 3 * cnt);
    if (AHEAD) block_store(a.pos_out2 + 3 * v0, s_pos2, 3 * cnt);
}

/* EMIT (adaptive) staged likewise: a block's emitted triangles are a
 * contiguous range of the output (from emit[t0]) and its red triangles'
 * children and their twins a contiguous range of the next stream (from 12
 * red[t0]; on the level before the last the children's range is in the
 * output and their twins are not stored), so they go through shared
 * memory and out as contiguous words. */
#define EMIT_THREADS 128

static __global__ void __launch_bounds__(EMIT_THREADS) emit_kernel(size_t n, pmi_loop_args a)
{
    __shared__ uint32_t s_out[9 * EMIT_THREADS];
    __shared__ uint32_t s_tri[12 * EMIT_THREADS];
    __shared__ uint32_t s_twin[12 * EMIT_THREADS];
    const size_t t0 = (size_t)blockIdx.x * EMIT_THREADS, t = t0 + threadIdx.x;
    const uint32_t e0 = a.emit[t0], r0 = a.last ? 0u : a.red[t0];
    int red = 0;
    unsigned ne = 0; /* triangles this one emits */
    if (t < n) {
        red = !a.last && pmi_loop_is_red(&a, (uint32_t)t);
        if (!red) ne = a.last ? 1u : 1u + a.split[3 * t] + a.split[3 * t + 1] + a.split[3 * t + 2];
    }
    const unsigned nred = __syncthreads_count(red);
    const unsigned nout =
        __syncthreads_count(ne >= 1) + __syncthreads_count(ne >= 2) + __syncthreads_count(ne >= 3);
    if (red) {
        const uint32_t c = 12 * (a.red[t] - r0);
        pmi_loop_red_into(&a, (uint32_t)t, s_tri + c, s_twin + c);
    } else if (t < n) {
        pmi_loop_emit_into(&a, (uint32_t)t, s_out + 3 * (a.emit[t] - e0));
    }
    __syncthreads();
    block_store(a.out_tri + 3 * (size_t)e0, s_out, 3 * nout);
    if (nred) {
        block_store(a.tri_next + 12 * (size_t)r0, s_tri, 12 * nred);
        if (a.twin_next) block_store(a.twin_next + 12 * (size_t)r0, s_twin, 12 * nred);
    }
}

/* Steps whose elements mostly return at once: a block of QUEUE_THREADS
 * threads takes queue_span<STEP>() elements, queues those that take part
 * (queue_takes, the step's own test) in shared memory and runs them one
 * per thread, rather than leave most of each warp idle: about half the
 * half-edges own their edge. */
#define QUEUE_THREADS 256

template <int STEP> static constexpr __host__ __device__ unsigned queue_span()
{
    return STEP == PMI_LOOP_ODD ? 4 * QUEUE_THREADS : 2 * QUEUE_THREADS;
}

template <int STEP> static __device__ bool queue_takes(const pmi_loop_args &a, size_t i)
{
    const uint32_t e = (uint32_t)i;
    switch (STEP) {
    case PMI_LOOP_ODD: return a.split[e] && pmi_loop_owns(e, a.twin[e]);
    case PMI_LOOP_NORMAL_NEW: return pmi_loop_owns(e, a.twin[e]);
    default: return pmi_loop_owns(e, a.ptwin[e]); /* EVEN_NEW */
    }
}

/* Queues the elements of [i0, i0 + queue_span) below n that take part in
 * STEP into q, *cnt of them, in order within each warp's share (the warps'
 * shares in any order); has barriers. */
template <int STEP>
static __device__ void step_queue(const pmi_loop_args &a, size_t i0, size_t n, uint32_t *q,
                                  unsigned *cnt)
{
    const unsigned lane = threadIdx.x & 31;
    if (threadIdx.x == 0) *cnt = 0;
    __syncthreads();
    for (unsigned r = 0; r < queue_span<STEP>() / QUEUE_THREADS; r++) {
        const size_t i = i0 + r * QUEUE_THREADS + threadIdx.x;
        const bool takes = i < n && queue_takes<STEP>(a, i);
        const unsigned m = __ballot_sync(0xffffffffu, takes);
        unsigned base = 0;
        if (lane == 0 && m) base = atomicAdd(cnt, (unsigned)__popc(m));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (takes) q[base + __popc(m & ((1u << lane) - 1u))] = (uint32_t)i;
    }
    __syncthreads();
}

/* EVEN_NEW per half-edge of the previous stream, the owning ones queued
 * (step_queue) and staged likewise: the vertices a block's owning
 * half-edges created are consecutive (AHEAD: their pos_out2 too, at 3
 * blocks an SM: 80 registers, no spills, where ptxas alone takes 94 and
 * 2 blocks run). */
#define EVEN_NEW_SPAN queue_span<PMI_LOOP_EVEN_NEW>()

template <bool AHEAD>
static __global__ void __launch_bounds__(QUEUE_THREADS, AHEAD ? 3 : 1)
    even_new_kernel(size_t n, pmi_loop_args a)
{
    __shared__ float s_pos[3 * EVEN_NEW_SPAN];
    __shared__ float s_pos2[AHEAD ? 3 * EVEN_NEW_SPAN : 1];
    __shared__ uint32_t s_vs[EVEN_NEW_SPAN];
    __shared__ uint32_t q[EVEN_NEW_SPAN];
    __shared__ unsigned cnt;
    const size_t h0 = (size_t)blockIdx.x * EVEN_NEW_SPAN;
    const uint32_t elo = a.powner[h0];
    step_queue<PMI_LOOP_EVEN_NEW>(a, h0, n, q, &cnt);
    for (unsigned i = threadIdx.x; i < cnt; i += QUEUE_THREADS) {
        const uint32_t e = a.powner[q[i]] - elo;
        pmi_loop_even_new_into(&a, q[i], s_pos + 3 * e, s_vs + e, AHEAD ? s_pos2 + 3 * e : NULL);
    }
    __syncthreads();
    const size_t m0 = (size_t)a.pnv + elo;
    block_store(a.pos_new + 3 * m0, s_pos, 3 * cnt);
    if (AHEAD) block_store(a.pos_out2 + 3 * m0, s_pos2, 3 * cnt);
    if (a.vstart_new) block_store(a.vstart_new + m0, s_vs, cnt);
}

/* RED_LAST2 as two kernels over the same triangles, staged likewise. The
 * first writes 16 output triangles a thread (48 words); the second the
 * vertices created on the edges its triangle's children own, 3 + 2
 * (own[0] + own[1] + own[2]) of them, consecutive over the block, and the
 * even rules of the vertices on the edges its triangle owns (straight to
 * the output). */
#define LAST2_THREADS 128
/* A thread's words in shared memory: 16-byte rows whose 16-byte stores
 * and loads by 8 threads (a quarter warp) meet no bank twice (52 words =
 * 20 banks on, mod 32). */
#define LAST2_ROW 52

static __global__ void __launch_bounds__(LAST2_THREADS)
    red_last2_tri_kernel(size_t n, pmi_loop_args a)
{
    __shared__ __align__(16) uint32_t s_tri[LAST2_ROW * LAST2_THREADS];
    const size_t t0 = (size_t)blockIdx.x * LAST2_THREADS;
    const size_t t = t0 + threadIdx.x;
    const unsigned rows = (unsigned)(n - t0 < LAST2_THREADS ? n - t0 : LAST2_THREADS);
    if (t < n) pmi_loop_red_last2_tri(&a, (uint32_t)t, s_tri + LAST2_ROW * threadIdx.x);
    __syncthreads();
    /* 16-byte stores (the output comes from cudaMalloc or the pool, and
     * a block's 48 * 128 words start at a multiple of 192 bytes), each
     * of 4 words of a thread's row, read with one 16-byte load */
    uint4 *dst = (uint4 *)(a.out_tri + 48 * t0);
    for (unsigned w = threadIdx.x; w < 12 * rows; w += LAST2_THREADS) {
        const unsigned r = w / 12;
        dst[w] = *(const uint4 *)(s_tri + LAST2_ROW * r + 4 * (w - 12 * r));
    }
}

static __global__ void __launch_bounds__(LAST2_THREADS)
    red_last2_pos_kernel(size_t n, pmi_loop_args a)
{
    __shared__ float s_pos[27 * LAST2_THREADS];
    const size_t t0 = (size_t)blockIdx.x * LAST2_THREADS;
    const size_t t = t0 + threadIdx.x;
    const unsigned rows = (unsigned)(n - t0 < LAST2_THREADS ? n - t0 : LAST2_THREADS);
    const uint32_t elo = 3 * (uint32_t)t0 + 2 * a.powner[3 * t0];
    uint32_t own[3] = {0, 0, 0};
    if (t < n)
        for (uint32_t k = 0; k < 3; k++)
            own[k] = pmi_loop_prev_own(&a, 3 * (uint32_t)t + k);
    const unsigned owned =
        3 * rows + 2 * (__syncthreads_count(own[0]) + __syncthreads_count(own[1]) +
                        __syncthreads_count(own[2]));
    if (t < n) pmi_loop_red_last2_pos(&a, (uint32_t)t, s_pos, elo);
    __syncthreads();
    block_store(a.pos_new + 3 * ((size_t)a.nv + elo), s_pos, 3 * owned);
}

/* NORMAL_PATCH per triangle of the stream two levels before the output,
 * 16 threads a triangle: the block's 48 output words a triangle are read
 * as contiguous words into shared memory; then thread j < 15 of a
 * triangle loads point j's position, thread j computes output triangle
 * j's normal (threads 0, 5 and 10 store theirs: the corner triangles'),
 * each step's results in shared memory for the next. The vertex tasks
 * (pmi_loop_patch_vertex: 12 a triangle, those on edges the triangle does
 * not own empty) are queued meanwhile, those that read a twin's triangles
 * first, and the block's first threads run them, one a thread: a task's
 * twin is loaded before the first step, the twin's first vertex during
 * it, and both are queued with it. */
#define PATCH_THREADS 128
#define PATCH_SPAN (PATCH_THREADS / 16)
/* the queue holds thread numbers in bytes, whole warps ballot */
static_assert(PATCH_THREADS <= 256 && PATCH_THREADS % 32 == 0, "NORMAL_PATCH's queue");
/* doubles between two triangles' 16 normals in shared memory: 48 and one
 * more, so that tasks of different triangles reading the same normal
 * meet other banks */
#define PATCH_FN 49

static __global__ void __launch_bounds__(PATCH_THREADS)
    normal_patch_kernel(size_t n, pmi_loop_args a)
{
    __shared__ __align__(16) uint32_t s_o[48 * PATCH_SPAN];
    __shared__ float s_p[45 * PATCH_SPAN];
    __shared__ double s_fn[PATCH_FN * PATCH_SPAN];
    __shared__ uint32_t s_tw[PATCH_THREADS], s_c2[PATCH_THREADS];
    __shared__ uint8_t s_q[PATCH_THREADS];
    __shared__ unsigned s_n[2];
    const size_t t0 = (size_t)blockIdx.x * PATCH_SPAN;
    const unsigned rows = (unsigned)(n - t0 < PATCH_SPAN ? n - t0 : PATCH_SPAN);
    const unsigned p = threadIdx.x / 16, j = threadIdx.x % 16, lane = threadIdx.x % 32;
    const uint32_t t = (uint32_t)(t0 + p);
    const uint32_t tw = p < rows && j < 12 ? pmi_loop_patch_twin(&a, t, j) : PMI_LOOP_FROZEN;
    if (threadIdx.x < 2) s_n[threadIdx.x] = 0;
    block_copy16(s_o, a.ntri + 48 * t0, 48 * rows);
    __syncthreads();
    const uint32_t *o = s_o + 48 * p;
    if (p < rows && j < 15) pmi_loop_patch_load(&a, o, j, s_p + 45 * p + 3 * j);
    /* the queue: tasks with a twin from the front, the others from the
     * back */
    const bool task = tw != PMI_LOOP_FROZEN, far = tw < PMI_LOOP_FROZEN;
    const unsigned mf = __ballot_sync(0xffffffffu, task && far);
    const unsigned mn = __ballot_sync(0xffffffffu, task && !far);
    unsigned bf = 0, bn = 0;
    if (lane == 0) {
        if (mf) bf = atomicAdd(&s_n[0], (unsigned)__popc(mf));
        if (mn) bn = atomicAdd(&s_n[1], (unsigned)__popc(mn));
    }
    bf = __shfl_sync(0xffffffffu, bf, 0);
    bn = __shfl_sync(0xffffffffu, bn, 0);
    if (task) {
        const unsigned below = (1u << lane) - 1u;
        const unsigned slot =
            far ? bf + __popc(mf & below) : PATCH_THREADS - 1 - bn - __popc(mn & below);
        s_tw[slot] = tw;
        s_c2[slot] = far ? a.ptri[tw] : 0;
        s_q[slot] = (uint8_t)threadIdx.x;
    }
    __syncthreads();
    if (p < rows) {
        double *fn = s_fn + PATCH_FN * p + 3 * j;
        pmi_loop_patch_face(s_p + 45 * p, j, fn);
        if (j % 5 == 0 && j < 15) pmi_loop_patch_corner_normal(&a, t, j / 5, fn);
    }
    __syncthreads();
    const unsigned nf = s_n[0];
    if (threadIdx.x < nf + s_n[1]) {
        const unsigned slot =
            threadIdx.x < nf ? threadIdx.x : PATCH_THREADS - 1 - (threadIdx.x - nf);
        const unsigned e = s_q[slot];
        pmi_loop_patch_vertex(&a, s_o + 48 * (e / 16), e % 16,
                              (const double(*)[3])(s_fn + PATCH_FN * (e / 16)), s_tw[slot],
                              s_c2[slot]);
    }
}

/* The queued steps (step_queue): NORMAL_NEW of the owning half-edges of
 * the input (one uniform level) or of the stream three levels before the
 * output (three or more), and in adaptive mode ODD (per half-edge that
 * owns a split edge). */
template <int STEP>
static __global__ void __launch_bounds__(QUEUE_THREADS) queued_kernel(size_t n, pmi_loop_args a)
{
    __shared__ uint32_t q[queue_span<STEP>()];
    __shared__ unsigned cnt;
    step_queue<STEP>(a, (size_t)blockIdx.x * queue_span<STEP>(), n, q, &cnt);
    for (unsigned i = threadIdx.x; i < cnt; i += QUEUE_THREADS)
        pmi_loop_step(STEP, q[i], &a);
}

/* Red promotion on CUDA, to the closure in one cooperative launch: the
 * CPU's chains first, and where a chain runs long, strip rounds.
 *
 * Chain passes (chain_pass): each triangle that has exactly 2 split edges
 * splits its third and its thread follows the chain that starts (as on
 * the CPU, pmi_loop_promote_step), until a pass changes nothing. A chain
 * step is one round of loads, and on a reconstructed surface a chain can
 * cross hundreds of triangles in a row; so a chain that reaches a cap
 * of steps stops there (its last triangle, now with 2 split edges, is
 * left to what follows), and after a pass that cut one the rest goes by
 * strip rounds, whose cost follows the log of a strip's length and the
 * stream's size. The cap is the stream's triangles / 8192, at least 32
 * and at most 4096 (promote_chain_cap): 42 steps for 345,000 triangles,
 * 545 for 4.5 M, whose chains (under 100 steps on the bench's surfaces)
 * then run whole (measured on the H200, bench/RESULTS-subdivide.md).
 *
 * Strip rounds: a triangle with exactly 2 split edges whose third is not
 * frozen is a feed: it splits its third. A triangle with exactly 1 split
 * edge is a relay: entered across one of its two unsplit edges (its
 * sides) it splits the other, so relays linked side to side form strips,
 * and a strip splits whole when a feed lies across one of its ends. A
 * round (grid barriers between its phases):
 *   1. classify (strip_classify): each triangle's class as of the
 *      round's flags into cls; each relay side's link into S: the relay
 *      side across it (the next relay and the side it leaves by), or an
 *      end: fed (a feed across) or not (a boundary, a frozen twin, a
 *      triangle with no split edge). No feed: the closure is reached.
 *   2. jump (strip_chase): each relay side follows its link to the
 *      strip's end by pointer jumping in place (a side's link replaced by
 *      its target's: each store still names a relay side further along,
 *      or the end itself, so any interleaving of the threads is sound),
 *      about log2 of the strip's length rounds of loads. A link carries
 *      the relays it spans; a strip that is a cycle (no end) reaches
 *      the stream's triangle count and ends unfed.
 *   3. apply (strip_apply): each feed splits its third edge, each relay
 *      with a fed end splits its unsplit edges that are not frozen.
 * The flags only change in phase 3, so phases 1 and 2 see one state.
 *
 * Every split either way is one the chains make (a fed strip is the
 * chain from its feed; a late read sees fewer splits, never more), and a
 * pass or round that changes nothing proves the closure: the same flags
 * as the CPU's, whose closure is unique. */
#define PROMOTE_THREADS 256
#define STRIP_END 0xFFFFFFFEu /* a link's target: an end with no feed */
#define STRIP_FED 0xFFFFFFFFu /* an end with a feed across */
enum { STRIP_NONE = 0, STRIP_RELAY = 1, STRIP_FEED = 2 };

static __device__ __forceinline__ unsigned long long strip_load(const unsigned long long *p)
{
    unsigned long long x;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(x) : "l"(p) : "memory");
    return x;
}

static __device__ __forceinline__ void strip_store(unsigned long long *p, unsigned long long x)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" : : "l"(p), "l"(x) : "memory");
}

/* Triangle t's split flags as bits 0-2. */
static __device__ __forceinline__ unsigned strip_flags(const pmi_loop_args &a, uint32_t t)
{
    const uint8_t *f = a.split + 3 * (size_t)t;
    return pmi_loop_load_flag(f) | pmi_loop_load_flag(f + 1) << 1 | pmi_loop_load_flag(f + 2) << 2;
}

/* The link across relay t's edge k: a relay side (2 u + the side u
 * leaves by: 0 its lower unsplit edge, 1 its higher) spanning 1 relay,
 * or an end. */
static __device__ unsigned long long strip_link(const pmi_loop_args &a, uint32_t t, unsigned k)
{
    const uint32_t tw = a.twin[3 * (size_t)t + k];
    if (tw == PMI_LOOP_NONE || tw == PMI_LOOP_FROZEN) return STRIP_END;
    const uint32_t u = tw / 3, e = tw % 3;
    const unsigned m = strip_flags(a, u), c = __popc(m);
    if (m >> e & 1) return STRIP_END; /* (both halves of an edge share its flag) */
    if (c == 2) return STRIP_FED;     /* the shared edge is u's unsplit third */
    if (c != 1) return STRIP_END;
    const unsigned x = (~m & 7u) & ~(1u << e); /* u's other unsplit edge */
    return 1ull << 32 | (2ull * u + (x > (1u << e) ? 1u : 0u));
}

/* Phase 1 for triangle t: its class into cls, a relay's two links into
 * S[2t], S[2t + 1]. Returns whether t is a feed. */
static __device__ int strip_classify(const pmi_loop_args &a, uint32_t t, unsigned long long *S,
                                     uint8_t *cls)
{
    const unsigned m = strip_flags(a, t), c = __popc(m);
    unsigned k = STRIP_NONE;
    if (c == 2) {
        const unsigned e = __ffs(~m & 7u) - 1;
        if (a.twin[3 * (size_t)t + e] != PMI_LOOP_FROZEN) k = STRIP_FEED;
    } else if (c == 1) {
        k = STRIP_RELAY;
        const unsigned z = ~m & 7u, k0 = __ffs(z) - 1, k1 = __ffs(z & (z - 1)) - 1;
        const unsigned long long l0 = strip_link(a, t, k0), l1 = strip_link(a, t, k1);
        strip_store(S + 2 * (size_t)t, l0);
        strip_store(S + 2 * (size_t)t + 1, l1);
    }
    cls[t] = (uint8_t)k;
    return k == STRIP_FEED;
}

/* One jump of link p (not an end): its target's link, spanning both;
 * an end once the span passes the n triangles (a cycle). */
static __device__ __forceinline__ unsigned long long strip_jump(unsigned long long p,
                                                                unsigned long long q, size_t n)
{
    if ((uint32_t)q >= STRIP_END) return q;
    const unsigned long long d = (p >> 32) + (q >> 32);
    return d >= n ? (unsigned long long)STRIP_END : d << 32 | (uint32_t)q;
}

/* Phase 2 for relay t: both sides' links to their strip's ends, their
 * loads side by side. */
static __device__ void strip_chase(unsigned long long *S, uint32_t t, size_t n)
{
    unsigned long long *s0 = S + 2 * (size_t)t, *s1 = s0 + 1;
    unsigned long long p0 = strip_load(s0), p1 = strip_load(s1);
    for (;;) {
        const bool o0 = (uint32_t)p0 < STRIP_END, o1 = (uint32_t)p1 < STRIP_END;
        if (!o0 && !o1) break;
        const unsigned long long q0 = o0 ? strip_load(S + (uint32_t)p0) : 0,
                                 q1 = o1 ? strip_load(S + (uint32_t)p1) : 0;
        if (o0) {
            p0 = strip_jump(p0, q0, n);
            strip_store(s0, p0);
        }
        if (o1) {
            p1 = strip_jump(p1, q1, n);
            strip_store(s1, p1);
        }
    }
}

/* Phase 3 for triangle t of class k: a feed splits its third edge, a
 * relay with a fed end its unsplit edges that are not frozen (flags seen
 * set by this phase's other threads are already split). */
static __device__ void strip_apply(const pmi_loop_args &a, uint32_t t, unsigned k,
                                   const unsigned long long *S)
{
    if (k == STRIP_NONE) return;
    if (k == STRIP_RELAY && (uint32_t)strip_load(S + 2 * (size_t)t) != STRIP_FED &&
        (uint32_t)strip_load(S + 2 * (size_t)t + 1) != STRIP_FED)
        return;
    const unsigned m = strip_flags(a, t);
    for (unsigned e = 0; e < 3; e++) {
        const uint32_t h = 3 * t + e, tw = a.twin[h];
        if (!(m >> e & 1) && tw != PMI_LOOP_FROZEN) pmi_loop_split_edge(&a, h, tw);
    }
}

/* The triangles g j .. g j + g - 1 of the stream (those below n; g = 1
 * or 4) that have exactly 2 split edges, as bits 0 .. g - 1: a whole
 * group of 4 reads its 12 flags as three words (4j's are 4-byte aligned,
 * the array 256-byte aligned), other groups flag by flag. */
static __device__ unsigned promote_group(const pmi_loop_args &a, size_t j, unsigned g, size_t n)
{
    const size_t t0 = g * j;
    unsigned m = 0;
    if (g != 4 || t0 + 4 > n) {
        for (unsigned i = 0; i < g && t0 + i < n; i++)
            m |= (unsigned)pmi_loop_promote_starts(&a, (uint32_t)(t0 + i)) << i;
        return m;
    }
    /* words over bytes that chains store one at a time: a word may mix old
     * and new flags, which only hides starts this pass (a chain's first
     * step reloads all three; a pass that changes nothing has no stores to
     * race) */
    const uint32_t *p = (const uint32_t *)(a.split + 3 * t0);
    uint32_t w[3];
#pragma unroll
    for (int i = 0; i < 3; i++)
        asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(w[i]) : "l"(p + i) : "memory");
#pragma unroll
    for (unsigned i = 0; i < 4; i++) {
        unsigned sum = 0;
#pragma unroll
        for (unsigned b = 3 * i; b < 3 * i + 3; b++)
            sum += (w[b / 4] >> (8 * (b % 4))) & 0xffu;
        m |= (unsigned)(sum == 2u) << i;
    }
    return m;
}

/* A chain pass: each thread takes groups of 4 triangles (its rank, then
 * a grid's worth of threads further; groups of 1 in a stream of fewer
 * than PROMOTE_GROUPS_FROM triangles, where groups of 4 would leave most
 * of the grid's threads idle), reads their flags at once and runs the
 * chain of each that has 2 split edges, one step (one round of loads) per
 * turn of a single loop: a thread whose chain ends takes its next start
 * or group while the others of its warp go on with theirs. Flags read
 * with a group may be stale when a triangle of it starts; stale flags
 * show fewer splits, never more, and a chain's first step reloads them (a
 * later step all but the one its own thread set). Sets *split when it
 * split an edge, *cut when it stopped a chain at cap steps. */
#define PROMOTE_GROUPS_FROM (1u << 20)
/* The chain cap: n >> PROMOTE_CAP_SHIFT steps, within [PROMOTE_CAP_MIN,
 * PROMOTE_CAP_MAX] (a strip round costs more on a longer stream). */
#define PROMOTE_CAP_SHIFT 13
#define PROMOTE_CAP_MIN 32u
#define PROMOTE_CAP_MAX 4096u
static __device__ void chain_pass(size_t n, const pmi_loop_args &a, size_t first, size_t stride,
                                  unsigned cap, uint32_t *split, uint32_t *cut)
{
    const unsigned gs = n >= PROMOTE_GROUPS_FROM ? 4u : 1u;
    const size_t groups = (n + gs - 1) / gs;
    size_t j = first, t0 = 0;
    unsigned m = 0;                    /* the group's triangles left to start */
    uint32_t t = PMI_LOOP_NONE, e = 3; /* the chain's triangle, its entry edge */
    unsigned steps = 0;
    for (;;) {
        if (t == PMI_LOOP_NONE) {
            if (!m) {
                if (j >= groups) break;
                m = promote_group(a, j, gs, n);
                t0 = gs * j;
                j += stride;
                continue;
            }
            t = (uint32_t)(t0 + (unsigned)(__ffs(m) - 1));
            e = 3;
            m &= m - 1;
            steps = 0;
        }
        const uint32_t tw = pmi_loop_promote_step(&a, t, e, split);
        if (tw == PMI_LOOP_NONE) {
            t = PMI_LOOP_NONE;
        } else if (++steps == cap) {
            *cut = 1;
            t = PMI_LOOP_NONE;
        } else {
            t = tw / 3;
            e = tw % 3;
        }
    }
}

/* The passes, then (after one that cut a chain) the rounds. ctl: a pass's
 * or round's word that says it changed something (ctl[r & 1]) and that
 * it cut a chain (ctl[2 + (r & 1)]), each set once per block and only
 * when still clear (stores from every thread to one word serialise at
 * its L2 slice). Every thread reads them after the barrier that ends the
 * pass (or the classification), and the first clears the next's, which
 * no thread reads or sets before a later barrier. In the rounds each
 * thread takes the triangles of its rank and a grid's worth of threads
 * further in every phase, so cls[t] is read by the thread that wrote it.
 * S holds 2 links a triangle, cls a byte (promote_launch's scratch).
 * cap = 0 (the test hook "strips"): rounds from the start. */
static __global__ void __launch_bounds__(PROMOTE_THREADS)
    promote_kernel(size_t n, pmi_loop_args a, uint32_t *ctl, unsigned long long *S, uint8_t *cls,
                   unsigned cap)
{
    cg::grid_group g = cg::this_grid();
    if (g.thread_rank() == 0) ctl[0] = ctl[1] = ctl[2] = ctl[3] = 0;
    g.sync();
    const size_t stride = (size_t)gridDim.x * PROMOTE_THREADS, first = g.thread_rank();
    unsigned r = 0;
    for (; cap; r++) {
        uint32_t split = 0, cut = 0;
        chain_pass(n, a, first, stride, cap, &split, &cut);
        if (__syncthreads_or(split) && threadIdx.x == 0) pmi_loop_atomic_set(ctl + (r & 1));
        if (__syncthreads_or(cut) && threadIdx.x == 0) pmi_loop_atomic_set(ctl + 2 + (r & 1));
        g.sync();
        const uint32_t more = *(volatile uint32_t *)(ctl + (r & 1)),
                       long_chain = *(volatile uint32_t *)(ctl + 2 + (r & 1));
        if (g.thread_rank() == 0) ctl[(r + 1) & 1] = ctl[2 + ((r + 1) & 1)] = 0;
        g.sync();
        if (!more) return;
        if (long_chain) break;
    }
    for (r++;; r++) {
        int feed = 0;
        for (size_t t = first; t < n; t += stride)
            feed |= strip_classify(a, (uint32_t)t, S, cls);
        if (__syncthreads_or(feed) && threadIdx.x == 0) pmi_loop_atomic_set(ctl + (r & 1));
        g.sync();
        if (!*(volatile uint32_t *)(ctl + (r & 1))) return;
        if (g.thread_rank() == 0) ctl[(r + 1) & 1] = 0;
        for (size_t t = first; t < n; t += stride)
            if (cls[t] == STRIP_RELAY) strip_chase(S, (uint32_t)t, n);
        g.sync();
        for (size_t t = first; t < n; t += stride)
            strip_apply(a, (uint32_t)t, cls[t], S);
        g.sync();
    }
}

/* One pass of PROMOTE (PROMOTE_PASS), changed[0] set once per block that
 * split an edge: for a GPU that cannot launch the cooperative grid. */
static __global__ void promote_pass_kernel(size_t n, pmi_loop_args a)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int split = i < n && pmi_loop_promote(&a, (uint32_t)i);
    if (__syncthreads_or(split) && threadIdx.x == 0) pmi_loop_atomic_set(a.changed);
}

/* The cooperative launch of promote_kernel: as many blocks as can be
 * resident at once (a grid barrier needs them all), at most one per
 * PROMOTE_THREADS triangles, with 17 bytes of scratch a triangle (the
 * strip rounds' links and classes). PM_STATUS_UNSUPPORTED, with no
 * message, where the device cannot launch a cooperative grid, or refuses
 * this one (MPS or a context limited to fewer SMs), or the test hook
 * "levels" says so: the level loop then runs PROMOTE_PASS a pass at a
 * time. */
static unsigned promote_chain_cap(size_t n)
{
    const size_t c = n >> PROMOTE_CAP_SHIFT;
    return c < PROMOTE_CAP_MIN   ? PROMOTE_CAP_MIN
           : c > PROMOTE_CAP_MAX ? PROMOTE_CAP_MAX
                                 : (unsigned)c;
}

static pm_status promote_launch(pm_context *ctx, size_t n, const pmi_loop_args *a)
{
    if (n == 0) return PM_STATUS_OK;
    pmi_cuda_state *st = pmi_cuda(ctx);
    int coop = 0;
    unsigned hooks = 0;
    PMI_TRY(pmi_hooks(&hooks));
    if (cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, st->device) != cudaSuccess)
        coop = 0;
    cudaGetLastError();
    if (!coop || (hooks & PMI_HOOK_LEVELS)) return PM_STATUS_UNSUPPORTED;
    /* a link names a relay side, 2 t + 1 < STRIP_END (3 n half-edges fit
     * 32 bits, so this holds) */
    if (n >= STRIP_END / 2)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_subdivide_loop: %zu triangles in a level's stream, more than red "
                         "promotion's 32-bit links can name (at most %u)",
                         n, STRIP_END / 2 - 1);
    int per_sm = 0;
    PMI_CU_TRY(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, promote_kernel, PROMOTE_THREADS, 0),
        "pm_subdivide_loop: red promotion's occupancy");
    size_t blocks = (n + PROMOTE_THREADS - 1) / PROMOTE_THREADS;
    const size_t most = (size_t)(per_sm > 0 ? per_sm : 1) * (size_t)st->num_sms;
    if (blocks > most) blocks = most;
    const pmi_backend *be = ctx->backend;
    void *scratch = NULL;
    PMI_TRY(be->scratch_alloc(ctx, 16 + 16 * n + n, &scratch));
    uint32_t *ctl = (uint32_t *)scratch;
    unsigned long long *S = (unsigned long long *)(ctl + 4);
    uint8_t *cls = (uint8_t *)(S + 2 * n);
    pmi_loop_args args = *a;
    unsigned cap = hooks & PMI_HOOK_STRIPS ? 0u : promote_chain_cap(n);
    void *params[] = {&n, &args, &ctl, &S, &cls, &cap};
    const cudaError_t e =
        cudaLaunchCooperativeKernel((const void *)promote_kernel, dim3((unsigned)blocks),
                                    dim3(PROMOTE_THREADS), params, 0, st->stream);
    be->scratch_free(ctx, scratch); /* stream-ordered: after the kernel */
    if (e == cudaErrorCooperativeLaunchTooLarge) {
        (void)cudaGetLastError();
        return PM_STATUS_UNSUPPORTED;
    }
    if (e != cudaSuccess) return pmi_cuda_status(e, "pm_subdivide_loop: red promotion");
    return pmi_cuda_launched("pm_subdivide_loop");
}

/* MARK_ENDS, 16 half-edges a thread: their split flags in one 16-byte
 * load (the flags are 256-byte aligned, from cudaMalloc or the pool), most
 * of them clear. */
static __global__ void mark_ends_kernel(size_t n, pmi_loop_args a)
{
    const size_t h0 = 16 * ((size_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (h0 >= n) return;
    if (h0 + 16 <= n) {
        const uint4 f = *(const uint4 *)(a.split + h0);
        if (!(f.x | f.y | f.z | f.w)) return;
    }
    const unsigned e = n - h0 < 16 ? (unsigned)(n - h0) : 16u;
    for (unsigned j = 0; j < e; j++)
        pmi_loop_mark_ends(&a, (uint32_t)(h0 + j));
}

/* TWIN and CSR_SORT, one corner a thread: a block takes LIST_THREADS
 * vertices, whose lists are one contiguous range of a->list, and reads
 * the range into shared memory (with, for TWIN, the other two corners of
 * each corner's triangle: independent loads, coalesced for the list);
 * then each thread runs pmi_loop_list_entry on its corners, a pass over
 * its vertex's list there: its rank (its place in the sorted list) and
 * its half-edge's twin. A warp's work follows its corners' valences, not
 * its busiest vertex's n^2 matches. A block whose range passes LIST_CAP
 * corners (12 a vertex on average; a closed mesh has 6) holds a vertex
 * of very high valence: its threads sort their vertices' lists in place
 * and search them per half-edge (pmi_loop_twin_global). */
#define LIST_THREADS 128
#define LIST_CAP (12 * LIST_THREADS)
template <bool TWINS>
static __global__ void __launch_bounds__(LIST_THREADS) list_kernel(size_t n, pmi_loop_args a)
{
    __shared__ uint32_t s_c[LIST_CAP], s_nx[TWINS ? LIST_CAP : 1], s_pv[TWINS ? LIST_CAP : 1];
    __shared__ uint32_t s_beg[LIST_THREADS], s_n[LIST_THREADS], s_total;
    __shared__ uint8_t s_v[LIST_CAP]; /* each entry's vertex in the block */
    const size_t v0 = (size_t)blockIdx.x * LIST_THREADS;
    const unsigned tid = threadIdx.x,
                   nb = n - v0 < LIST_THREADS ? (unsigned)(n - v0) : LIST_THREADS;
    const uint32_t base = a.offset[v0], v = (uint32_t)(v0 + tid);
    uint32_t beg = 0, cnt = 0;
    if (tid < nb) {
        beg = a.offset[v] - base;
        cnt = a.count[v];
        if (tid == nb - 1) s_total = beg + cnt;
    }
    __syncthreads();
    const uint32_t total = s_total;
    if (total > LIST_CAP) {
        if (tid < nb) {
            if (TWINS)
                pmi_loop_twin_global(&a, v);
            else
                pmi_loop_csr_sort(&a, v);
        }
        return;
    }
    if (tid < nb) {
        s_beg[tid] = beg;
        s_n[tid] = cnt;
        for (uint32_t j = 0; j < cnt; j++)
            s_v[beg + j] = (uint8_t)tid;
    }
    for (uint32_t e = tid; e < total; e += LIST_THREADS) {
        const uint32_t c = a.list[base + e];
        s_c[e] = c;
        if (TWINS) pmi_loop_list_corners(&a, c, s_nx + e, s_pv + e);
    }
    __syncthreads();
    for (uint32_t e = tid; e < total; e += LIST_THREADS) {
        const uint32_t j = s_v[e], b = s_beg[j];
        pmi_loop_list_entry(&a, a.list + base + b, s_c + b, TWINS ? s_nx + b : NULL,
                            TWINS ? s_pv + b : NULL, s_n[j], e - b);
    }
}

/* A kernel of `threads` per block over n elements, `span` of them a
 * block (one a thread, or queue_span for the queued kernels). */
static pm_status block_launch(pm_context *ctx, void (*kernel)(size_t, pmi_loop_args),
                              unsigned threads, size_t span, size_t n, const pmi_loop_args *a)
{
    const size_t blocks = (n + span - 1) / span;
    kernel<<<(unsigned)blocks, threads, 0, pmi_cuda(ctx)->stream>>>(n, *a);
    return pmi_cuda_launched("pm_subdivide_loop");
}

template <int STEP> static pm_status loop_launch(pm_context *ctx, size_t n, const pmi_loop_args *a)
{
    return block_launch(ctx, loop_step_kernel<STEP>, 256, 256, n, a);
}

template <int STEP>
static pm_status queued_launch(pm_context *ctx, size_t n, const pmi_loop_args *a)
{
    return block_launch(ctx, queued_kernel<STEP>, QUEUE_THREADS, queue_span<STEP>(), n, a);
}

extern "C" pm_status pmi_cuda_subdivide_step(pm_context *ctx, int step, size_t n,
                                             const pmi_loop_args *a)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    switch (step) {
    case PMI_LOOP_CHECK_TRI: return loop_launch<PMI_LOOP_CHECK_TRI>(ctx, n, a);
    case PMI_LOOP_CSR_COUNT: return loop_launch<PMI_LOOP_CSR_COUNT>(ctx, n, a);
    case PMI_LOOP_CSR_FILL: return loop_launch<PMI_LOOP_CSR_FILL>(ctx, n, a);
    case PMI_LOOP_CSR_SORT:
        return block_launch(ctx, list_kernel<false>, LIST_THREADS, LIST_THREADS, n, a);
    case PMI_LOOP_TWIN:
        return block_launch(ctx, list_kernel<true>, LIST_THREADS, LIST_THREADS, n, a);
    case PMI_LOOP_VSTART: return loop_launch<PMI_LOOP_VSTART>(ctx, n, a);
    case PMI_LOOP_CSR_NORMAL: return loop_launch<PMI_LOOP_CSR_NORMAL>(ctx, n, a);
    case PMI_LOOP_WALK_VERTEX: return loop_launch<PMI_LOOP_WALK_VERTEX>(ctx, n, a);
    case PMI_LOOP_SPLIT: return loop_launch<PMI_LOOP_SPLIT>(ctx, n, a);
    case PMI_LOOP_PROMOTE: return promote_launch(ctx, n, a);
    case PMI_LOOP_PROMOTE_PASS: return block_launch(ctx, promote_pass_kernel, 256, 256, n, a);
    case PMI_LOOP_MARK_ENDS: return block_launch(ctx, mark_ends_kernel, 256, 16 * 256, n, a);
    case PMI_LOOP_CLASSIFY: return loop_launch<PMI_LOOP_CLASSIFY>(ctx, n, a);
    case PMI_LOOP_EVEN: return loop_launch<PMI_LOOP_EVEN>(ctx, n, a);
    case PMI_LOOP_ODD: return queued_launch<PMI_LOOP_ODD>(ctx, n, a);
    case PMI_LOOP_EMIT: return block_launch(ctx, emit_kernel, EMIT_THREADS, EMIT_THREADS, n, a);
    case PMI_LOOP_COPY_U32: return loop_launch<PMI_LOOP_COPY_U32>(ctx, n, a);
    case PMI_LOOP_ZERO_U32: return loop_launch<PMI_LOOP_ZERO_U32>(ctx, n, a);
    case PMI_LOOP_EVEN_UNIFORM:
        return block_launch(ctx,
                            a->pos_out2 ? even_uniform_kernel<true> : even_uniform_kernel<false>,
                            EVEN_THREADS, EVEN_THREADS, n, a);
    case PMI_LOOP_RED_UNIFORM:
        /* the level loop sets twin_next and owner_next only with tri_next */
        return block_launch(ctx, a->tri_next ? red_uniform_kernel<true> : red_uniform_kernel<false>,
                            RED_THREADS, RED_THREADS, n, a);
    case PMI_LOOP_NORMAL_OLD: return loop_launch<PMI_LOOP_NORMAL_OLD>(ctx, n, a);
    case PMI_LOOP_NORMAL_NEW: return queued_launch<PMI_LOOP_NORMAL_NEW>(ctx, n, a);
    case PMI_LOOP_NORMAL_PATCH:
        return block_launch(ctx, normal_patch_kernel, PATCH_THREADS, PATCH_SPAN, n, a);
    case PMI_LOOP_RED_LAST2:
        PMI_TRY(block_launch(ctx, red_last2_tri_kernel, LAST2_THREADS, LAST2_THREADS, n, a));
        return block_launch(ctx, red_last2_pos_kernel, LAST2_THREADS, LAST2_THREADS, n, a);
    case PMI_LOOP_EVEN_NEW:
        return block_launch(ctx, a->pos_out2 ? even_new_kernel<true> : even_new_kernel<false>,
                            QUEUE_THREADS, EVEN_NEW_SPAN, n, a);
    default: break;
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_subdivide_loop: unknown step %d", step);
}
