/* Bitmask words of the CUDA marching cubes' classification, shared by
 * mc_classify.cu (bitmask kernels), mc_stream.cu (the streaming
 * classification) and mc_direct.cu (the direct classification): the
 * masks of one 32-point word, its cases, the look-back chain of a tile's
 * packed counts and the tiles' block scan. */
#ifndef PM_CUDA_MC_WORDS_CUH
#define PM_CUDA_MC_WORDS_CUH

#include "cuda/mc_internal.cuh"

/* One warp chains a tile's aggregate a of one quantity to its predecessors'
 * (decoupled look-back on that quantity's states st, with the primitives'
 * tile states of cuda_internal.h): *base gets the exclusive prefix, and the
 * last tile writes the total. (The direct classification has its own,
 * md_chain: epoch-tagged states and 32-bit values.) */
static __device__ __forceinline__ void mc_chain(unsigned long long *st, long long tile,
                                                long long ntiles, unsigned long long a,
                                                unsigned long long *base, unsigned long long *total)
{
    const unsigned lane = threadIdx.x & 31;
    if (lane == 0) pmi_tile_publish(st + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | a);
    const unsigned long long b = tile ? pmi_lookback(st, (unsigned long long)tile) : 0;
    if (lane == 0) {
        if (tile) pmi_tile_publish(st + tile, PMI_FLAG_P | (b + a));
        *base = b;
        if (tile == ntiles - 1) *total = b + a;
    }
}

/* Exclusive scan of x over a block of NT threads in thread order (s_wsum:
 * NT / 32 words of shared memory); *agg gets the block's total. Has a
 * barrier: every thread of the block calls it, and s_wsum is read after
 * it, so a second scan takes other words or a barrier first. */
template <int NT>
static __device__ __forceinline__ unsigned long long
mc_block_scan_n(unsigned long long x, unsigned long long *s_wsum, unsigned long long *agg)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned long long inc = x;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned long long o = __shfl_up_sync(0xffffffffu, inc, off);
        if (lane >= off) inc += o;
    }
    if (lane == 31) s_wsum[warp] = inc;
    __syncthreads();
    unsigned long long wb = 0, a = 0;
#pragma unroll
    for (int w = 0; w < NT / 32; w++) {
        const unsigned long long v = s_wsum[w];
        if (w < warp) wb += v;
        a += v;
    }
    *agg = a;
    return wb + inc - x;
}
/* The same over the MC_THREADS threads of a classification block. */
static __device__ __forceinline__ unsigned long long
mc_block_scan(unsigned long long x, unsigned long long *s_wsum, unsigned long long *agg)
{
    return mc_block_scan_n<MC_THREADS>(x, s_wsum, agg);
}

/* Packed counts: records | triangles << 21 | crossings << 42; a tile has
 * at most MC_ROUNDS * MC_TILE_WORDS * 32 = 131072 points (the bitmask
 * kernels'; at most 655360 triangles), so no field overflows. */
#define MC_F(x, f) (((x) >> (21 * (f))) & 0x1fffffull)

/* (b) The masks of one bitmask word (32 points of row r = j + ny*k,
 * starting at i = 32 * wi): a, b, c, d are the inside bits of rows (j, k),
 * (j+1, k), (j, k+1), (j+1, k+1); a1.. the same shifted to point i + 1. */
typedef struct mc_word {
    unsigned a, a1, b, b1, c, c1, d, d1;
    unsigned cell;       /* points whose cell exists */
    unsigned xc, yc, zc; /* owned edges +x, +y, +z that cross */
} mc_word;

/* The masks of one word from the words of its four rows and the words
 * after them; left >= 1: points of the row from this word on (clamped). */
static __device__ __forceinline__ void mc_make_word8(unsigned a, unsigned an, unsigned b,
                                                     unsigned bn, unsigned c, unsigned cn,
                                                     unsigned d, unsigned dn, int left, bool jy,
                                                     bool kz, mc_word &m)
{
    const unsigned pv = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
    const unsigned xv = left > 32 ? 0xffffffffu : (1u << (left - 1)) - 1u;
    m.a = a;
    m.b = b;
    m.c = c;
    m.d = d;
    m.a1 = __funnelshift_r(a, an, 1);
    m.b1 = __funnelshift_r(b, bn, 1);
    m.c1 = __funnelshift_r(c, cn, 1);
    m.d1 = __funnelshift_r(d, dn, 1);
    m.cell = jy && kz ? xv : 0u;
    m.xc = (m.a ^ m.a1) & xv;
    m.yc = jy ? (m.a ^ m.b) & pv : 0u;
    m.zc = kz ? (m.a ^ m.c) & pv : 0u;
}

/* The same from the row length nx and the word's index wi in its row. */
static __device__ __forceinline__ void mc_make_word(unsigned a, unsigned an, unsigned b,
                                                    unsigned bn, unsigned c, unsigned cn,
                                                    unsigned d, unsigned dn, long long nx,
                                                    long long wi, int jy, int kz, mc_word &m)
{
    const long long left = nx - 32 * wi;
    mc_make_word8(a, an, b, bn, c, cn, d, dn, left > 64 ? 64 : (int)left, jy, kz, m);
}

static __device__ __forceinline__ unsigned mc_case(const mc_word &m, int q)
{
    return (m.a >> q & 1) | (m.a1 >> q & 1) << 1 | (m.b1 >> q & 1) << 2 | (m.b >> q & 1) << 3 |
           (m.c >> q & 1) << 4 | (m.c1 >> q & 1) << 5 | (m.d1 >> q & 1) << 6 | (m.d >> q & 1) << 7;
}

/* Points of the word whose cell has corners on both sides (the others
 * have case 0 or 255). */
static __device__ __forceinline__ unsigned mc_mixed(const mc_word &m)
{
    const unsigned any = m.a | m.a1 | m.b | m.b1 | m.c | m.c1 | m.d | m.d1;
    const unsigned all = m.a & m.a1 & m.b & m.b1 & m.c & m.c1 & m.d & m.d1;
    return any & ~all & m.cell;
}

/* Classifies word m: *act gets the points that get a record (with
 * triangles, or with edges also those with an owned crossing), *cells += the
 * points whose cell has triangles; returns the packed counts records |
 * triangles << 21 | crossings << 42. */
static __device__ __forceinline__ unsigned long long
mc_word_counts(const mc_word &m, const uint8_t *s_nt, int edges, unsigned *act, unsigned *cells)
{
    unsigned mix = mc_mixed(m), tmask = 0, ntri = 0;
    while (mix) {
        const int p = __ffs(mix) - 1;
        mix &= mix - 1;
        const unsigned nt = s_nt[mc_case(m, p)];
        ntri += nt;
        tmask |= (nt > 0) << p;
    }
    *cells += __popc(tmask);
    *act = edges ? tmask | m.xc | m.yc | m.zc : tmask;
    return (unsigned long long)__popc(*act) | (unsigned long long)ntri << 21 |
           (unsigned long long)(__popc(m.xc) + __popc(m.yc) + __popc(m.zc)) << 42;
}

/* A record's info for point p of word m (case | crossings << 8 |
 * triangles << 11 | 1 << 14); *nt, *nc: its triangles and crossings. */
static __device__ __forceinline__ unsigned
mc_record_info(const mc_word &m, int p, const uint8_t *s_nt, unsigned *nt, unsigned *nc)
{
    const unsigned cs = m.cell >> p & 1 ? mc_case(m, p) : 0u;
    const unsigned cr = (m.xc >> p & 1) | (m.yc >> p & 1) << 1 | (m.zc >> p & 1) << 2;
    *nt = s_nt[cs];
    *nc = __popc(cr);
    return cs | cr << 8 | *nt << 11 | 1u << 14;
}

/* The warp's inclusive scan of x (every lane calls it). */
static __device__ __forceinline__ unsigned mc_warp_scan(unsigned x)
{
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= (unsigned)o) x += y;
    }
    return x;
}

/* The position of the set bit of x that has k set bits below it (x has
 * more than k). */
static __device__ __forceinline__ int mc_nth_bit(unsigned x, unsigned k)
{
    int pos = 0;
#pragma unroll
    for (int s = 16; s; s >>= 1) {
        const unsigned lo = __popc(x & ((1u << s) - 1u));
        if (k >= lo) {
            k -= lo;
            x >>= s;
            pos += s;
        }
    }
    return pos;
}

/* Record g of a warp whose lane l holds a word with active points act and
 * ex records before it (non-decreasing over the lanes): the lane of its
 * word (a binary search over ex) and, in *p, its point there. For g past
 * the warp's records both are of no use. Every lane calls it, so a warp
 * emits its records one per lane in rounds of 32, consecutive lanes
 * storing consecutive records. */
static __device__ __forceinline__ unsigned mc_warp_record(unsigned g, unsigned ex, unsigned act,
                                                          int *p)
{
    unsigned w = 0;
#pragma unroll
    for (unsigned s = 16; s; s >>= 1)
        if (__shfl_sync(0xffffffffu, ex, w + s) <= g) w += s;
    *p = mc_nth_bit(__shfl_sync(0xffffffffu, act, w), g - __shfl_sync(0xffffffffu, ex, w));
    return w;
}

/* Lane w's word masks (every lane calls it). */
static __device__ __forceinline__ mc_word mc_word_shfl(const mc_word &m, unsigned w)
{
    mc_word r;
    r.a = __shfl_sync(0xffffffffu, m.a, w);
    r.a1 = __shfl_sync(0xffffffffu, m.a1, w);
    r.b = __shfl_sync(0xffffffffu, m.b, w);
    r.b1 = __shfl_sync(0xffffffffu, m.b1, w);
    r.c = __shfl_sync(0xffffffffu, m.c, w);
    r.c1 = __shfl_sync(0xffffffffu, m.c1, w);
    r.d = __shfl_sync(0xffffffffu, m.d, w);
    r.d1 = __shfl_sync(0xffffffffu, m.d1, w);
    r.cell = __shfl_sync(0xffffffffu, m.cell, w);
    r.xc = __shfl_sync(0xffffffffu, m.xc, w);
    r.yc = __shfl_sync(0xffffffffu, m.yc, w);
    r.zc = __shfl_sync(0xffffffffu, m.zc, w);
    return r;
}

/* Inside test on a loaded sample, as mcd_inside_t but with one compare:
 * floats against fthr, integer samples (exact in float) against the
 * integer threshold it (mcd_int_threshold). ABOVE: inside is above iso.
 * NaN is never inside. */
template <typename T, int ABOVE>
static __device__ __forceinline__ bool mc_inside_cmp(T x, float ft, int it)
{
    if constexpr (sizeof(T) == 4 && (T)0.5 != 0)
        return ABOVE ? x > ft : x < ft;
    else
        return ABOVE ? (int)x > it : (int)x < it;
}

/* The records of the active points am of word m (first point row0), in
 * order: record rb, triangle prefix tb, crossing prefix cb, advanced past
 * them. */
static __device__ __forceinline__ void
mc_emit_records(const mc_word &m, unsigned am, unsigned long long row0, const uint8_t *s_nt,
                const mc_records &rec, unsigned long long rec_cap, int edges,
                unsigned long long *rb, unsigned long long *tb, unsigned long long *cb)
{
    while (am) {
        const int p = __ffs(am) - 1;
        am &= am - 1;
        unsigned nt, nc;
        const unsigned info = mc_record_info(m, p, s_nt, &nt, &nc);
        if (*rb < rec_cap) {
            rec.point[*rb] = row0 + (unsigned long long)p;
            rec.info[*rb] = (uint16_t)info;
            rec.tri[*rb] = *tb;
            if (edges) rec.cross[*rb] = *cb;
        }
        ++*rb;
        *tb += nt;
        *cb += nc;
    }
}

#endif
