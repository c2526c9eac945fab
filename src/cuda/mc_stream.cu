/* CUDA marching cubes, pass 1, streaming version (the default past the
 * direct classification for f32 volumes, for u8/u16/i16 ones in rows of
 * whole 16-byte parts, and for other u8/u16/i16 ones up to 2^24 points,
 * see mc_plan_make in isosurface.cu): the volume is read once and classified in
 * the same kernel, and the records come out in lattice order with the same exact
 * prefixes as the bitmask kernels of mc_classify.cu, in three kernels:
 *
 * (a) mc_stream_kernel: a block owns a band of 31 lattice rows of one
 *     256-point chunk of the rows (or 63 rows of a 128-point chunk, where
 *     that leaves fewer lanes idle: pmi_mc_stream_make_grid) over a range
 *     of slices (16 in the bulk of the volume, then 4, or 8 in large
 *     volumes, at the end) and walks the slices, keeping the inside
 *     bits of corner slices (the band and the row after) in shared memory,
 *     three buffers so one barrier per slice suffices. Each slice is
 *     loaded once, a warp instruction reading 32 consecutive samples of a
 *     row, packed by one ballot per 32-point word (or, for 1- and 2-byte
 *     samples in rows of whole 16-byte parts, 16 bytes a lane compared
 *     by subtraction on packed samples: ms_vpack), the next slice in
 *     flight while the current one is classified. A thread classifies
 *     one word (the masks of mc_words.cuh), unless the warp's step is
 *     quiet (every word's corners all outside or all inside: its counts
 *     are zero, nothing else computed); in the 16-byte instances of
 *     256-point chunks a warp queues its busy words in a ring and
 *     classifies them 32 at a time (ms_dense). The counts of each segment (one
 *     chunk of one row: 8 or 4 words) go to segc; a warp's records are
 *     staged in shared memory and copied to a pool in batches (one
 *     atomic per batch), each with its point and its prefixes inside its
 *     segment. Odd slice ranges walk
 *     backwards, so the slice two ranges share is read by both near the
 *     same time (from L2 the second time).
 * (b) mc_segscan_kernel: one scan of the segment counts in lattice order
 *     (decoupled look-back, as the classification kernels): each segment's
 *     first record, triangle and crossing, the row table, the totals.
 * (c) mc_scatter_kernel: each pooled record to its place in lattice order,
 *     with its global prefixes; not for
 *     a soup, whose pass 2 reads the pool (mc_pool_recs: a soup needs its
 *     triangles in order, not its records).
 *
 * The bitmask kernels chain tiles in lattice order while they read; here
 * the blocks stream independently (only the pool counter is shared) and
 * the ordering moves to the small segment scan. Measured on the H100
 * (bench/RESULTS-cudamc.md): the streaming kernel takes 0.227 ms at 512^3
 * f32 (the bits kernel alone 0.20), pass 1 0.26 ms against 0.31 for the
 * bitmask kernels; 0.74 against 0.92 ms at 768^3. */
#include "cuda/mc_words.cuh"

MCD_TABLES_UPLOAD

/* Chunk shapes, by XW = 32-point words per segment (8 or 4): a block of
 * MC_THREADS threads, one per word, loads MS_ROWS(XW) corner rows per
 * slice and classifies MS_J(XW) lattice rows; a warp loads MS_RW(XW) rows
 * of XW words. */
#define MS_ROWS(XW) (MC_THREADS / (XW))
#define MS_J(XW) (MS_ROWS(XW) - 1)
#define MS_RW(XW) (32 / (XW))
/* Rounds of 1024 segments per segment-scan tile: 2 (measured on the H100,
 * pass 1 at 512^3: 8 rounds 0.291-0.294 ms, 1 round 0.281-0.288, 2
 * rounds 0.278-0.284; the 8-round tiles ran 64 blocks, 26 us in ncu,
 * against 14 us for 1-round tiles). */
#define MS_SEG_ROUNDS 2
#define MS_SEG_TILE (1024 * MS_SEG_ROUNDS)
#define MS_MINB 2 /* streaming blocks per SM (128 registers, no spills) */
/* Slices a block walks (pmi_mc_stream_make_grid): at most MS_SLICES, or
 * up to MS_SLICES_LONG in large volumes; MS_TIER_SLICES in the bulk of
 * the volume, before a tail of MS_TAIL_WAVES waves of blocks of the
 * shorter ranges (0: no bulk). Defined here unless the build sets them
 * (for measurements). */
#ifndef MS_SLICES
#define MS_SLICES 4
#endif
#ifndef MS_SLICES_LONG
#define MS_SLICES_LONG 8
#endif
#ifndef MS_TIER_SLICES
#define MS_TIER_SLICES 16
#endif
#ifndef MS_TAIL_WAVES
#define MS_TAIL_WAVES 4
#endif
/* The tail's waves for 1-byte samples in 16-byte loads, whose blocks are
 * the cheapest (measured on the H200, bench/RESULTS-cudamc.md: 512^3 u8
 * 3-4% faster than with 4, 768^3 level; f32 and 16-bit samples 1% slower
 * with 6). */
#ifndef MS_TAIL_WAVES_1B
#define MS_TAIL_WAVES_1B 6
#endif
/* Quiet steps skipped (mc_stream_kernel; measured faster on the H200
 * for every type, bench/RESULTS-cudamc.md); 0 classifies every word (for
 * measurements). */
#ifndef MS_QUIET
#define MS_QUIET 1
#endif
/* With 16-byte loads (ms_vpack): 3 on sm_90 (u8 71 registers, 16-bit 80,
 * no spills; faster than 2 on the H100 for both, bench/RESULTS-cudamc.md);
 * 16-bit samples 2 on older GPUs, where 3 would spill (not measured
 * there). */
#define MS_MINB_V90 3
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define MS_MINB_V(T) (sizeof(T) == 1 ? MS_MINB_V90 : 2)
#else
#define MS_MINB_V(T) MS_MINB_V90
#endif

/* Segment counts (segc) are packed in 32 bits: records (<= 256) |
 * triangles (<= 1280) << 9 | crossings (<= 768) << 20. */

/* Loading one corner slice k: warp w's lane l loads the samples x0 + 32 q
 * + l of block rows RW w + m / XW (q = m % XW, RW = 32 / XW) for items m =
 * 0..31 (a warp instruction reads 32 consecutive samples). okm: bit m set
 * when item m exists (row < ny, x < nx); FULL: all do. h: the halo sample
 * (threads t < MS_ROWS: the first point of the next chunk in row t). */
template <typename T, int XW, int FULL>
static __device__ __forceinline__ void ms_load(const T *p0, long long rs, unsigned okm, T s[32])
{
#pragma unroll
    for (int m = 0; m < 32; m++) {
        if (FULL || (okm >> m & 1))
            s[m] = __ldg(p0 + (m / XW) * rs + 32 * (m % XW));
        else
            s[m] = (T)0;
    }
}

/* Packs the loaded slice: the ballot of item m is word m % XW of block
 * row RW w + m / XW, which lane 0 stores straight into the slice's buffer
 * (rows of XW + 1 words); zero when the slice is past the volume. */
template <typename T, int XW, int ABOVE, int FULL>
static __device__ __forceinline__ void ms_pack(const T s[32], unsigned okm, float ft, int it,
                                               bool in, unsigned (*rows)[XW + 1])
{
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int m = 0; m < 32; m++) {
        const unsigned wd = __ballot_sync(0xffffffffu, in && (FULL || (okm >> m & 1)) &&
                                                           mc_inside_cmp<T, ABOVE>(s[m], ft, it));
        if (lane == 0) rows[MS_RW(XW) * w + m / XW][m % XW] = wd;
    }
}

/* 1- and 2-byte samples, 16 bytes a lane (mc_stream_grid.vec: rows that
 * start 16-byte aligned and hold whole 16-byte parts). A row's segment is
 * LPR = 32 XW / E lanes of E = 16 / sizeof(T) samples, a load instruction
 * covers RPL = 32 / LPR rows, and the warp's RW rows take MS_NV(T) loads.
 * Lane l holds part l % LPR of row RPL i + l / LPR of load i. */
#define MS_VE(T) (16 / (int)sizeof(T))
#define MS_NV(T) ((int)sizeof(T) * 2)

/* The threshold of the vector compares: inside is (u >= y) ^ inv, u the
 * sample as an unsigned value (i16 offset by 2^15), y replicated in every
 * element of a word; y7 = y without the elements' top bits, z = all ones
 * when y's top bit is clear. A threshold no sample reaches is y = 0 (every
 * sample reaches it) with inv flipped. */
typedef struct ms_thr {
    unsigned y7, z, inv;
} ms_thr;

template <typename T> static ms_thr ms_thr_make(int it, bool above)
{
    constexpr int off = (T)-1 < (T)0 ? 32768 : 0, mx = sizeof(T) == 1 ? 255 : 65535;
    constexpr unsigned H = sizeof(T) == 1 ? 0x80808080u : 0x80008000u;
    /* above: x > it, i.e. u >= it + 1 + off; else x < it, i.e. not u >= it + off. */
    int y = (it < -65537 ? -65537 : it > 65537 ? 65537 : it) + off + (above ? 1 : 0);
    ms_thr r;
    r.inv = above ? 0u : 0xffffffffu;
    if (y > mx) {
        y = 0;
        r.inv = ~r.inv;
    }
    const unsigned yr = (unsigned)(y > 0 ? y : 0) * (sizeof(T) == 1 ? 0x01010101u : 0x00010001u);
    r.y7 = yr & ~H;
    r.z = yr & H ? 0u : 0xffffffffu;
    return r;
}

/* The inside bits (u >= y) of the 4 / sizeof(T) samples of word x, at the
 * elements' top bits: each element's top bit of (x | H) - y7 compares the
 * low bits without a borrow between elements, and the top bits of x and y
 * decide the rest (y's are all equal: x and d when set, x or d when
 * clear). */
template <typename T>
static __device__ __forceinline__ unsigned ms_swar(unsigned x, const ms_thr &th)
{
    constexpr unsigned H = sizeof(T) == 1 ? 0x80808080u : 0x80008000u;
    if constexpr ((T)-1 < (T)0) x ^= H; /* i16: offset binary */
    const unsigned d = (x | H) - th.y7;
    return ((x & d) | ((x | d) & th.z)) & H;
}

/* The 16 (u8) or 8 (16-bit) inside bits of a lane's 16 bytes, sample 0
 * lowest: each word's top bits gathered by a multiply (no two partial
 * products meet) and shifted to its place. */
template <typename T>
static __device__ __forceinline__ unsigned ms_swar16(uint4 q, const ms_thr &th)
{
    constexpr int S = 4 / (int)sizeof(T); /* samples a word */
    constexpr unsigned M = sizeof(T) == 1 ? 0x00204081u : 0x8001u;
    constexpr int TOP = 32 - S; /* the gathered bits' lowest position */
    constexpr unsigned F = (1u << S) - 1u;
    const unsigned b = (ms_swar<T>(q.x, th) * M) >> TOP |
                       ((ms_swar<T>(q.y, th) * M) >> (TOP - S) & F << S) |
                       ((ms_swar<T>(q.z, th) * M) >> (TOP - 2 * S) & F << (2 * S)) |
                       ((ms_swar<T>(q.w, th) * M) >> (TOP - 3 * S) & F << (3 * S));
    return (b ^ th.inv) & ((1u << (4 * S)) - 1u);
}

/* Loads one corner slice into the lane's MS_NV(T) parts: load i from p0
 * + i ls (ls: RPL rows, in samples); okv: bit i set when load i's part
 * exists. */
template <typename T>
static __device__ __forceinline__ void ms_vload(const T *p0, long long ls, unsigned okv,
                                                uint4 q[MS_NV(T)])
{
#pragma unroll
    for (int i = 0; i < MS_NV(T); i++)
        q[i] = okv >> i & 1 ? __ldg((const uint4 *)(p0 + i * ls)) : make_uint4(0, 0, 0, 0);
}

/* Packs the lane's parts into the slice's buffer: the parts of a 32-point
 * word are 32 / E neighbouring lanes, which exchange their bits so that
 * each lane stores one word (u8: two lanes swap halves; 16-bit: a 4 x 4
 * byte transpose in two steps). Parts past the volume, or a slice past it
 * (in false), are outside. */
template <typename T, int XW>
static __device__ __forceinline__ void ms_vpack(const uint4 q[MS_NV(T)], unsigned okv,
                                                const ms_thr &th, bool in, unsigned (*rows)[XW + 1])
{
    constexpr int E = MS_VE(T), LPR = 32 * XW / E, RPL = 32 / LPR, TPW = 32 / E;
    const unsigned lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const unsigned rr = lane / LPR, sub = lane % LPR, wd = sub / TPW, part = sub % TPW;
    unsigned b[MS_NV(T)];
#pragma unroll
    for (int i = 0; i < MS_NV(T); i++)
        b[i] = in && (okv >> i & 1) ? ms_swar16<T>(q[i], th) : 0u;
    unsigned word;
    if constexpr (sizeof(T) == 1) {
        /* part 0 keeps load 0's word, part 1 load 1's */
        const unsigned r = __shfl_xor_sync(0xffffffffu, part ? b[0] : b[1], 1);
        word = part ? r | b[1] << 16 : b[0] | r << 16;
    } else {
        /* byte i of lane part p: load i's bits of samples 8 p .. 8 p + 7;
         * lane p ends with load p's word, byte p' from lane p'. */
        const unsigned m = b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24;
        const unsigned r1 = __shfl_xor_sync(0xffffffffu, m, 1);
        /* even p: bytes (m0, r0, m2, r2); odd p: (r1, m1, r3, m3) */
        const unsigned t1 = part & 1 ? __byte_perm(m, r1, 0x3715) : __byte_perm(m, r1, 0x6240);
        const unsigned r2 = __shfl_xor_sync(0xffffffffu, t1, 2);
        /* p < 2: own bytes 0, 1 (column p) and the partner's 0, 1; p >= 2:
         * the partner's 2, 3 and own 2, 3 */
        word = part & 2 ? __byte_perm(r2, t1, 0x7632) : __byte_perm(t1, r2, 0x5410);
    }
    /* sizeof(T) == 1: the lane's word is load `part`'s; 16-bit: load `part`. */
    rows[MS_RW(XW) * w + part * RPL + rr][wd] = word;
}

/* x as a value ptxas cannot recompute: a shuffle from the lane itself
 * (every lane calls it). Under the 16-byte instances' 80 registers ptxas
 * rematerializes loop invariants from their inputs inside the slice loop,
 * 64-bit compares and clamps at every step; an empty asm statement does
 * not stop it, as ptxas sees through it. */
static __device__ __forceinline__ unsigned ms_opaque(unsigned x)
{
    return __shfl_sync(0xffffffffu, x, threadIdx.x & 31);
}

/* Records staged per warp in shared memory (MS_STAGE entries of 16
 * bytes) and copied to the pool in batches, one atomic per batch: no
 * global round trip inside a slice step. */
#define MS_STAGE 192

/* Copies the warp's n staged records to the pool (one atomic). */
static __device__ __forceinline__ void ms_flush(const uint4 *stage, unsigned n, uint4 *pool,
                                                unsigned long long pool_cap,
                                                unsigned long long *pool_ctr)
{
    const unsigned lane = threadIdx.x & 31;
    unsigned long long base = 0;
    __syncwarp();
    if (lane == 0) base = atomicAdd(pool_ctr, (unsigned long long)n);
    base = __shfl_sync(0xffffffffu, base, 0);
    for (unsigned i = lane; i < n; i += 32)
        if (base + i < pool_cap) pool[base + i] = stage[i];
    __syncwarp();
}

/* The records of a warp whose lane l holds word m with active points act,
 * exr records of the warp before it (non-decreasing over the lanes), tot
 * in all, loc its counts before it inside its segment (segc's packed
 * form) and row0 its first point: one record per lane in rounds of 32
 * (mc_warp_record), record gi to stage[fill + gi] (or straight to the
 * pool, when they cannot fit the stage at all), its prefixes inside its
 * segment from its word's (loc), the round's scan of triangles and
 * crossings since the word's first record of the round, and carry: the
 * word's records of earlier rounds (kept by the word's lane). Every lane
 * calls it. */
static __device__ __forceinline__ void
ms_emit(unsigned exr, unsigned tot, unsigned act, const mc_word &m, unsigned loc,
        unsigned long long row0, const uint8_t *s_nt, uint4 *stage, unsigned &fill, uint4 *pool,
        unsigned long long pool_cap, unsigned long long *pool_ctr)
{
    const unsigned lane = threadIdx.x & 31;
    if (!tot) return;
    if (fill + tot > MS_STAGE) {
        ms_flush(stage, fill, pool, pool_cap, pool_ctr);
        fill = 0;
    }
    unsigned long long direct = 0;
    if (tot > MS_STAGE) {
        if (lane == 0) direct = atomicAdd(pool_ctr, (unsigned long long)tot);
        direct = __shfl_sync(0xffffffffu, direct, 0);
    }
    const unsigned cnt = __popc(act);
    unsigned carry = 0;
    for (unsigned qr = 0; qr < tot; qr += 32) {
        const unsigned gi = qr + lane;
        int p;
        const unsigned w = mc_warp_record(gi, exr, act, &p);
        const mc_word mw = mc_word_shfl(m, w);
        const bool has = gi < tot;
        unsigned nt = 0, nc = 0, info = 0;
        if (has) info = mc_record_info(mw, p, s_nt, &nt, &nc);
        const unsigned x0 = nt | nc << 16, xi = mc_warp_scan(x0), xe = xi - x0;
        const unsigned ew = __shfl_sync(0xffffffffu, exr, w), lw = __shfl_sync(0xffffffffu, loc, w),
                       cw = __shfl_sync(0xffffffffu, carry, w);
        const unsigned xf = __shfl_sync(0xffffffffu, xe, max(ew, qr) - qr);
        const unsigned long long pt = __shfl_sync(0xffffffffu, row0, w) + (unsigned long long)p;
        const unsigned pre = xe - xf + cw; /* the word's triangles | crossings << 16 */
        const unsigned lrec = (lw & 511u) + gi - ew, ltri = (lw >> 9 & 2047u) + (pre & 0xffffu),
                       lcr = (lw >> 20) + (pre >> 16);
        const uint4 r =
            make_uint4((unsigned)pt, (unsigned)(pt >> 32), info | lrec << 16, ltri | lcr << 16);
        if (has) {
            if (tot <= MS_STAGE)
                stage[fill + gi] = r;
            else if (direct + gi < pool_cap)
                pool[direct + gi] = r;
        }
        /* This lane's word: its records of the round are lanes [a, e). */
        const unsigned a = max(exr, qr) - qr, e = min(exr + cnt, qr + 32u) - qr;
        const unsigned xa = __shfl_sync(0xffffffffu, xe, a & 31u),
                       xb = __shfl_sync(0xffffffffu, xi, (e - 1u) & 31u);
        if (exr + cnt > qr && exr < qr + 32u && cnt) carry += xb - xa;
    }
    if (tot <= MS_STAGE) fill += tot;
}

/* Busy words wait in a ring of MS_Q entries per warp (MS_Q - 1 >= 31 + 32:
 * a step adds at most 32 to at most 31 waiting) and are classified 32 at
 * a time, so a lane of a classification holds a word that has a mixed cell
 * or a crossing (about 15% of the lanes of a step with any, at 512^3
 * cayley). An entry: the words of the four corner rows and f = the first
 * bits of the words after them (bits 0-3) | min(points left in the row,
 * 33) << 4 | (row j + 1 exists) << 10 | (slice kk + 1 exists) << 11 |
 * word wq of its segment << 12 | band row jj << 15 | kk - k0 << 21; f >>
 * 15 is its segment's key in the block. */
#define MS_Q 64
/* 0: every instance classifies a step's words in the step (for
 * measurements). */
#ifndef MS_DENSE
#define MS_DENSE 1
#endif
typedef struct ms_ring {
    unsigned a[MS_Q], b[MS_Q], c[MS_Q], d[MS_Q], f[MS_Q];
} ms_ring;
static_assert(MS_TIER_SLICES < 2048 && MS_SLICES_LONG < 2048 && MS_SLICES < 2048,
              "a block's slices fit an entry's 11 bits");
/* The ring (10 KB a block) leaves three blocks an SM where an SM has
 * 164 KB of shared memory or more (sm_80, sm_90); with 64-100 KB (sm_70,
 * sm_75, sm_86, sm_87, sm_89) it would cost the 16-byte instances a block
 * an SM, so those keep the step's own classification (neither measured
 * there). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800 || (__CUDA_ARCH__ > 800 && __CUDA_ARCH__ < 900))
#define MS_RING_FITS 0
#else
#define MS_RING_FITS 1
#endif
/* The running counts of a segment whose words span two rounds: its key
 * (none: ~0) and its packed counts so far. */
typedef struct ms_carry {
    unsigned key, sum;
} ms_carry;

/* Classifies the ring's first n entries (every lane calls it), in rounds
 * of 32: each lane's word's counts, their scan by segment (with the carry
 * of a segment begun in the round before), segc at each segment's last
 * word (a segment is complete when the entry after it is of another one
 * or not yet queued: a step queues all of its busy words at once), and
 * the records, staged as in the step before. */
template <int XW>
static __device__ __forceinline__ void
ms_dense(const ms_ring *q, unsigned &qh, unsigned &qn, unsigned n, ms_carry &ck,
         const mcd_volume &v, const mc_stream_grid &g, long long chunk, long long j0, long long k0,
         int edges, const uint8_t *s_nt, unsigned *segc, uint4 *stage, unsigned &fill, uint4 *pool,
         unsigned long long pool_cap, unsigned long long *pool_ctr, unsigned &cells)
{
    const unsigned lane = threadIdx.x & 31;
    __syncwarp();
    for (unsigned r0 = 0; r0 < n; r0 += 32) {
        const unsigned i = r0 + lane, e = (qh + i) & (MS_Q - 1);
        const bool valid = i < n;
        unsigned f = 0, act = 0, sv = 0;
        mc_word m;
        if (valid) {
            f = q->f[e];
            mc_make_word8(q->a[e], f, q->b[e], f >> 1, q->c[e], f >> 2, q->d[e], f >> 3,
                          (int)(f >> 4 & 63u), f >> 10 & 1u, f >> 11 & 1u, m);
            const unsigned long long val = mc_word_counts(m, s_nt, edges, &act, &cells);
            sv =
                (unsigned)MC_F(val, 0) | (unsigned)MC_F(val, 1) << 9 | (unsigned)MC_F(val, 2) << 20;
        }
        const unsigned key = valid ? f >> 15 : ~0u;
        /* Scan by segment of the packed counts (no field overflows inside a
         * segment): lane l adds lane l - o's sum while that lane is in its
         * segment (at or after its first lane h). */
        const unsigned pk = __shfl_up_sync(0xffffffffu, key, 1);
        const unsigned heads = __ballot_sync(0xffffffffu, lane == 0 || key != pk);
        const unsigned h = 31u - __clz(heads & (0xffffffffu >> (31u - lane)));
        unsigned sinc = sv + (lane == 0 && key == ck.key ? ck.sum : 0u);
#pragma unroll
        for (unsigned o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(0xffffffffu, sinc, o);
            if (lane >= h + o) sinc += y;
        }
        const unsigned loc = sinc - sv; /* exclusive, inside the segment, carry included */
        const unsigned nkey = i + 1 < qn ? q->f[(e + 1) & (MS_Q - 1)] >> 15 : ~0u;
        const long long kk = k0 + (long long)(f >> 21), jl = j0 + (long long)(f >> 15 & 63u);
        if (valid && nkey != key) segc[(kk * v.ny + jl) * g.nchunks + chunk] = sinc;
        const unsigned last = min(n - r0, 32u) - 1u;
        ck.key = __shfl_sync(0xffffffffu, key, last);
        ck.sum = __shfl_sync(0xffffffffu, sinc, last);

        const unsigned cnt = __popc(act), rin = mc_warp_scan(cnt);
        const unsigned long long row0 =
            (unsigned long long)v.nx * (unsigned long long)(jl + v.ny * kk) +
            32ull * (unsigned long long)(chunk * XW + (long long)(f >> 12 & 7u));
        ms_emit(rin - cnt, __shfl_sync(0xffffffffu, rin, 31), act, m, loc, row0, s_nt, stage, fill,
                pool, pool_cap, pool_ctr);
    }
    qh = (qh + n) & (MS_Q - 1);
    qn -= n;
    __syncwarp();
}

/* (a), one long kernel: the slice loop's load, pack, classify and stage
 * steps share the loaded samples, the shared buffers and the staging
 * state. */
template <typename T, int XW, int ABOVE, int VEC>
static __global__ void __launch_bounds__(MC_THREADS, VEC ? MS_MINB_V(T) : MS_MINB)
    mc_stream_kernel(mcd_volume v, mc_stream_grid g, ms_thr th, int edges, unsigned *segc,
                     uint4 *pool, unsigned long long pool_cap, unsigned long long *pool_ctr,
                     unsigned long long *totals)
{
    pmi_pdl_enter();
    __shared__ uint8_t s_nt[256];
    /* Three buffers: slice step n packs buffer n % 3 while slow warps may
     * still classify from (n - 2) % 3 and (n - 1) % 3, so one barrier per
     * step suffices. */
    __shared__ unsigned s_b[3][MS_ROWS(XW)][XW + 1];
    __shared__ uint4 s_stage[MC_THREADS / 32][MS_STAGE];
    /* Busy words classified 32 at a time (ms_dense) in the 16-byte
     * instances of 256-point chunks; a warp's step classifies its own
     * words in the others, where the ring measured slower on the H200
     * (bench/RESULTS-cudamc.md). */
    constexpr bool DENSE = MS_DENSE && MS_RING_FITS && VEC && XW == 8;
    __shared__ ms_ring s_q[DENSE ? MC_THREADS / 32 : 1];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    s_nt[t] = mcd_tri_count[t];
    /* Block b (< 2^31) is chunk b % nchunks of band (b / nchunks) % nbands
     * of slice range b / (nchunks nbands): 32-bit divisions. */
    const unsigned b = blockIdx.x, bq = b / (unsigned)g.nchunks;
    const long long chunk = b - bq * (unsigned)g.nchunks, band = bq % (unsigned)g.nbands,
                    zr = bq / (unsigned)g.nbands;
    const long long zl = g.nzl, x0 = chunk * (32 * XW), j0 = band * MS_J(XW),
                    k0 = zr < zl ? zr * g.SL : zl * g.SL + (zr - zl) * g.S;
    const long long kend = min(k0 + (zr < zl ? g.SL : g.S), v.nz); /* point slices [k0, kend) */
    const int back = (int)(zr & 1);
    const long long words = (v.nx + 31) / 32;
    const float ft = v.fthr;
    const int it = mcd_int_threshold(ft, ABOVE);

    /* The thread's word: row jj of the band, word wq of the segment. */
    const int jj = t / XW, wq = t % XW;
    const long long j = j0 + jj, wi = chunk * XW + wq;
    const bool on = jj < MS_J(XW) && j < v.ny && wi < words;
    const bool seg_on = jj < MS_J(XW) && j < v.ny;
    const int left = (int)(v.nx - 32 * wi);
    /* The thread's segment in point slice 0, and a slice's segments. */
    unsigned *const segrow = segc + j * g.nchunks + chunk;
    const long long sstr = v.ny * g.nchunks;

    /* Load items of this lane (rows RW warp + m / XW, samples x0 + 32 (m %
     * XW) + lane) that exist. */
    const int RW = MS_RW(XW), ROWS = MS_ROWS(XW);
    unsigned okm = 0;
    {
        /* Item m = XW r + q exists when row RW warp + r < ny - j0 and
         * sample x0 + 32 q + lane < nx: the columns' XW-bit mask, once per
         * row. */
        const long long rl = v.ny - j0 - RW * warp, cl = v.nx - x0 - lane;
        const int nq = cl <= 0 ? 0 : cl >= 32 * XW ? XW : (int)((cl + 31) / 32);
        const unsigned colm = (1u << nq) - 1u;
#pragma unroll
        for (int r = 0; r < RW; r++)
            if (r < rl) okm |= colm << (XW * r);
    }
    const bool wfull = __all_sync(0xffffffffu, okm == 0xffffffffu);
    const T *prow = (const T *)v.data + x0 + lane + (j0 + RW * warp) * v.rs;
    /* VEC: the lane's parts (ms_vpack), load i from row RW warp + RPL i +
     * rr; nx is a multiple of E, so a part is all in the row or past it. */
    constexpr int VE = VEC ? MS_VE(T) : 1, LPR = 32 * XW / VE, RPL = VEC ? 32 / LPR : 1;
    const int rr = lane / LPR, sub = lane % LPR;
    unsigned okv = 0;
    if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < MS_NV(T); i++)
            if (j0 + RW * warp + RPL * i + rr < v.ny && x0 + VE * sub < v.nx) okv |= 1u << i;
    }
    /* VEC: pointers at the slice in q, moved a slice a step. */
    const T *pvec = (const T *)v.data + x0 + VE * sub + (j0 + RW * warp + rr) * v.rs;
    const long long vls = RPL * v.rs, dss = back ? -v.ss : v.ss;
    bool hok = t < ROWS && j0 + t < v.ny && x0 + 32 * XW < v.nx;
    /* Kept in registers: the parts' mask and the halo's flag made opaque
     * (ms_opaque), else recomputed from their inputs at every slice step
     * (the threshold's words th are the kernel's arguments for the same
     * reason). */
    if constexpr (VEC) {
        okv = ms_opaque(okv | (hok ? 1u << 16 : 0u));
        hok = okv >> 16 & 1;
    }
    const T *phalo = (const T *)v.data + x0 + 32 * XW + (j0 + (t < ROWS ? t : 0)) * v.rs;

    T s[VEC ? 1 : 32];
    uint4 q[VEC ? MS_NV(T) : 1];
    T h = (T)0;
    long long kl = back ? kend : k0; /* the slice in s (q) */
    const T *pk = pvec + kl * v.ss, *hk = phalo + kl * v.ss;
    if (kl < v.nz) {
        if constexpr (VEC)
            ms_vload<T>(pk, vls, okv, q);
        else if (wfull)
            ms_load<T, XW, 1>(prow + kl * v.ss, v.rs, okm, s);
        else
            ms_load<T, XW, 0>(prow + kl * v.ss, v.rs, okm, s);
        if (hok) h = __ldg(phalo + kl * v.ss);
    }
    unsigned cells = 0, fill = 0;
    uint4 *stage = s_stage[warp];
    ms_ring *rq = &s_q[warp];
    unsigned qh = 0, qn = 0; /* the ring's first entry and entries */
    ms_carry ck = {~0u, 0u};
    int buf = 0, prev = 2;
    const long long nsteps = kend - k0 + 1;
    for (long long n = 0; n < nsteps; n++) {
        const long long kc = back ? kend - n : k0 + n; /* corner slice in s */
        {
            if constexpr (VEC)
                ms_vpack<T, XW>(q, okv, th, kc < v.nz, s_b[buf]);
            else if (wfull)
                ms_pack<T, XW, ABOVE, 1>(s, okm, ft, it, kc < v.nz, s_b[buf]);
            else
                ms_pack<T, XW, ABOVE, 0>(s, okm, ft, it, kc < v.nz, s_b[buf]);
            if (t < ROWS) s_b[buf][t][XW] = kc < v.nz && hok && mc_inside_cmp<T, ABOVE>(h, ft, it);
        }
        if (n + 1 < nsteps) {
            kl = back ? kc - 1 : kc + 1;
            if constexpr (VEC) {
                pk += dss;
                hk += dss;
                if (kl < v.nz) {
                    ms_vload<T>(pk, vls, okv, q);
                    if (hok) h = __ldg(hk);
                }
            } else if (kl < v.nz) {
                if (wfull)
                    ms_load<T, XW, 1>(prow + kl * v.ss, v.rs, okm, s);
                else
                    ms_load<T, XW, 0>(prow + kl * v.ss, v.rs, okm, s);
                if (hok) h = __ldg(phalo + kl * v.ss);
            }
        }
        __syncthreads();
        if (n > 0) {
            /* Point slice kk: corners kk (buffer lo) and kk + 1 (hi). */
            const int lo = back ? buf : prev, hi = back ? prev : buf;
            const long long kk = back ? kc : kc - 1;
            /* A quiet step: every word of the warp has its 32 cells' corners
             * (the four rows' words and the first bit of the words after
             * them) all outside or all inside, so no cell is mixed and no
             * edge crosses: its segments' counts are zero, with no masks,
             * scans or records to compute (most steps far from the surface;
             * words past the row or the volume are outside, so a quiet
             * inside step never meets the lattice's end). */
            const unsigned *a = s_b[lo][jj], *bb = s_b[lo][jj + 1], *c = s_b[hi][jj],
                           *d = s_b[hi][jj + 1];
            bool busy = on;
            if (MS_QUIET) {
                /* The next word's first bits: the next lane's word, or the
                 * halo's at the segment's end. */
                unsigned wor = 0, wand = 0;
                if (on) {
                    wor = a[wq] | bb[wq] | c[wq] | d[wq];
                    wand = a[wq] & bb[wq] & c[wq] & d[wq];
                }
                unsigned nor = __shfl_down_sync(0xffffffffu, wor, 1),
                         nand = __shfl_down_sync(0xffffffffu, wand, 1);
                if (wq == XW - 1 && on) {
                    nor = a[XW] | bb[XW] | c[XW] | d[XW];
                    nand = a[XW] & bb[XW] & c[XW] & d[XW];
                }
                busy = on && (wor | (nor & 1u)) != 0 && (~wand | (~nand & 1u)) != 0;
            }
            const unsigned bm = __ballot_sync(0xffffffffu, busy);
            unsigned *const segk = segrow + kk * sstr; /* segment (kk, j, chunk) */
            if constexpr (DENSE) {
                /* Segments without a busy word count zero now; the busy
                 * words go to the warp's ring, classified 32 at a time. */
                if (lane % XW == XW - 1 && seg_on && !(bm >> (lane - (XW - 1)) & ((1u << XW) - 1u)))
                    *segk = 0u;
                if (bm) {
                    if (busy) {
                        const unsigned e =
                            (qh + qn + __popc(bm & ((1u << lane) - 1u))) & (MS_Q - 1);
                        rq->a[e] = a[wq];
                        rq->b[e] = bb[wq];
                        rq->c[e] = c[wq];
                        rq->d[e] = d[wq];
                        rq->f[e] = (a[wq + 1] & 1u) | (bb[wq + 1] & 1u) << 1 |
                                   (c[wq + 1] & 1u) << 2 | (d[wq + 1] & 1u) << 3 |
                                   (unsigned)min(left, 33) << 4 | (unsigned)(j + 1 < v.ny) << 10 |
                                   (unsigned)(kk + 1 < v.nz) << 11 | (unsigned)wq << 12 |
                                   (unsigned)jj << 15 | (unsigned)(kk - k0) << 21;
                    }
                    qn += __popc(bm);
                    if (qn >= 32)
                        ms_dense<XW>(rq, qh, qn, 32u, ck, v, g, chunk, j0, k0, edges, s_nt, segc,
                                     stage, fill, pool, pool_cap, pool_ctr, cells);
                }
            } else if (!bm) {
                if (lane % XW == XW - 1 && seg_on) *segk = 0u;
            } else {
                /* Every lane classifies its word (zero counts when it is
                 * not busy); the scan of each segment's XW lanes in segc's
                 * packed form (a segment has at most 256 records, 1280
                 * triangles and 768 crossings, so no field overflows); the
                 * records of the warp's earlier segments from the RW
                 * segment totals. */
                unsigned act = 0, sv = 0;
                mc_word m;
                if (busy) {
                    mc_make_word8(a[wq], a[wq + 1], bb[wq], bb[wq + 1], c[wq], c[wq + 1], d[wq],
                                  d[wq + 1], left, j + 1 < v.ny, kk + 1 < v.nz, m);
                    const unsigned long long val = mc_word_counts(m, s_nt, edges, &act, &cells);
                    sv = (unsigned)MC_F(val, 0) | (unsigned)MC_F(val, 1) << 9 |
                         (unsigned)MC_F(val, 2) << 20;
                }
                unsigned sinc = sv;
#pragma unroll
                for (int off = 1; off < XW; off <<= 1) {
                    const unsigned o = __shfl_up_sync(0xffffffffu, sinc, off, XW);
                    if (lane % XW >= off) sinc += o;
                }
                if (lane % XW == XW - 1 && seg_on) *segk = sinc;
                const unsigned sgi = lane / XW, loc = sinc - sv;
                unsigned exr = loc & 511u, tot = 0;
#pragma unroll
                for (int q = 0; q < RW; q++) {
                    const unsigned rt = __shfl_sync(0xffffffffu, sinc, XW * q + XW - 1) & 511u;
                    exr += sgi > (unsigned)q ? rt : 0u;
                    tot += rt;
                }
                const unsigned long long row0 =
                    (unsigned long long)v.nx * (unsigned long long)(j + v.ny * kk) +
                    32ull * (unsigned long long)wi;
                ms_emit(exr, tot, act, m, loc, row0, s_nt, stage, fill, pool, pool_cap, pool_ctr);
            }
        }
        prev = buf;
        buf = buf == 2 ? 0 : buf + 1;
    }
    if constexpr (DENSE)
        if (qn)
            ms_dense<XW>(rq, qh, qn, qn, ck, v, g, chunk, j0, k0, edges, s_nt, segc, stage, fill,
                         pool, pool_cap, pool_ctr, cells);
    if (fill) ms_flush(stage, fill, pool, pool_cap, pool_ctr);
    for (int off = 16; off; off >>= 1)
        cells += __shfl_xor_sync(0xffffffffu, cells, off);
    if (lane == 0 && cells) atomicAdd(&totals[3], (unsigned long long)cells);
}

/* (b) Segment bases: for every segment s with records, its first record,
 * triangle and crossing (segbase[s], segbase[nseg + s], segbase[2 nseg +
 * s]); the row table from each row's first segment; totals[0..2] from the
 * last tile. A tile is MS_SEG_ROUNDS rounds of 1024 consecutive segments,
 * 4 per thread, so loads and stores are coalesced; its sums are chained by
 * the look-back before the rounds are scanned. One long kernel: its phases
 * run between barriers on shared state. */
static __global__ void __launch_bounds__(MC_THREADS, 2)
    mc_segscan_kernel(long long nseg, long long nchunks, long long ntiles, const unsigned *segc,
                      unsigned int *ticket, unsigned long long *state, unsigned long long *segbase,
                      unsigned long long *rows, unsigned long long *totals, mc_final_args fin)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_w[2][2][MC_THREADS / 32];
    __shared__ unsigned long long s_out[3][1024];
    __shared__ unsigned s_cnt[1024];
    __shared__ unsigned long long base[3];
    __shared__ long long s_tile;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (t == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const long long tile = s_tile, t0 = tile * MS_SEG_TILE;
    /* The counts (records | triangles << 9 | crossings << 20) of segments
     * t0 + 1024 r + 4 t + q. Sums: a = records | crossings << 32 (a tile
     * has at most 2^21 points' records and 3 * 2^21 crossings), b =
     * triangles. */
    uint4 c[MS_SEG_ROUNDS];
    unsigned long long a = 0, bt = 0;
#pragma unroll
    for (int r = 0; r < MS_SEG_ROUNDS; r++) {
        const long long s = t0 + 1024ll * r + 4ll * t;
        if (s + 4 <= nseg) {
            c[r] = __ldg((const uint4 *)(segc + s));
        } else {
            c[r] = make_uint4(
                s < nseg ? __ldg(segc + s) : 0u, s + 1 < nseg ? __ldg(segc + s + 1) : 0u,
                s + 2 < nseg ? __ldg(segc + s + 2) : 0u, s + 3 < nseg ? __ldg(segc + s + 3) : 0u);
        }
        const unsigned q[4] = {c[r].x, c[r].y, c[r].z, c[r].w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a += (unsigned long long)(q[i] & 511u) | (unsigned long long)(q[i] >> 20) << 32;
            bt += q[i] >> 9 & 2047u;
        }
    }
    for (int off = 16; off; off >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, off);
        bt += __shfl_xor_sync(0xffffffffu, bt, off);
    }
    if (lane == 0) {
        s_w[0][0][warp] = a;
        s_w[0][1][warp] = bt;
    }
    __syncthreads();
    if (warp < 3) {
        unsigned long long ga = 0, gb = 0;
#pragma unroll
        for (int q = 0; q < MC_THREADS / 32; q++) {
            ga += s_w[0][0][q];
            gb += s_w[0][1][q];
        }
        const unsigned long long agg = warp == 0 ? (ga & 0xffffffffull) : warp == 1 ? gb : ga >> 32;
        mc_chain(state + warp * ntiles, tile, ntiles, agg, &base[warp], &totals[warp]);
    }
    __syncthreads();
    /* The last tile has the totals (its chains wrote the first three, the
     * classification the active cells): pm_isosurface_async's counts, as
     * mc_final_kernel writes them after the bitmask kernels. */
    if (fin.dc && tile == ntiles - 1 && t == 0) mc_final_counts(totals, fin);
    unsigned long long rb = base[0], tb = base[1], cb = base[2];
    unsigned long long *sr = segbase, *st = segbase + nseg, *sc = segbase + 2 * nseg;
#pragma unroll
    for (int r = 0; r < MS_SEG_ROUNDS; r++) {
        if (t0 + 1024ll * r >= nseg) break; /* block-uniform */
        const unsigned q[4] = {c[r].x, c[r].y, c[r].z, c[r].w};
        unsigned long long va = 0, vb = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            va += (unsigned long long)(q[i] & 511u) | (unsigned long long)(q[i] >> 20) << 32;
            vb += q[i] >> 9 & 2047u;
        }
        unsigned long long ia = va, ib = vb;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const unsigned long long oa = __shfl_up_sync(0xffffffffu, ia, off);
            const unsigned long long ob = __shfl_up_sync(0xffffffffu, ib, off);
            if (lane >= off) {
                ia += oa;
                ib += ob;
            }
        }
        const int par = (r + 1) & 1; /* s_w[0] held the tile sums; s_out is
                                      * rewritten only after the next
                                      * round's barrier */
        if (lane == 31) {
            s_w[par][0][warp] = ia;
            s_w[par][1][warp] = ib;
        }
        __syncthreads();
        unsigned long long wa = 0, wb = 0, ga = 0, gb = 0;
#pragma unroll
        for (int w = 0; w < MC_THREADS / 32; w++) {
            const unsigned long long xa = s_w[par][0][w], xb = s_w[par][1][w];
            if (w < warp) {
                wa += xa;
                wb += xb;
            }
            ga += xa;
            gb += xb;
        }
        /* The round's bases go through shared memory, so that the stores
         * below are coalesced (segment t + 256 i by thread t). */
        const unsigned long long ea = wa + ia - va;
        unsigned long long r0 = rb + (ea & 0xffffffffull), tr = tb + wb + ib - vb,
                           c0 = cb + (ea >> 32);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s_out[0][4 * t + i] = r0;
            s_out[1][4 * t + i] = tr;
            s_out[2][4 * t + i] = c0;
            s_cnt[4 * t + i] = q[i];
            r0 += q[i] & 511u;
            tr += q[i] >> 9 & 2047u;
            c0 += q[i] >> 20;
        }
        __syncthreads();
        const long long sr0 = t0 + 1024ll * r;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int u = t + MC_THREADS * i;
            const long long s = sr0 + u;
            if (s < nseg) {
                const unsigned long long x = s_out[0][u];
                if (s_cnt[u] & 511u) {
                    sr[s] = x;
                    st[s] = s_out[1][u];
                    sc[s] = s_out[2][u];
                }
                if (rows) {
                    const long long row = nseg < (1ll << 32)
                                              ? (long long)((unsigned)s / (unsigned)nchunks)
                                              : s / nchunks;
                    if (s == row * nchunks) rows[row] = x;
                }
            }
        }
        rb += ga & 0xffffffffull;
        tb += gb;
        cb += ga >> 32;
    }
}

/* (c) Pooled records to their places. */
static __global__ void __launch_bounds__(MC_THREADS)
    mc_scatter_kernel(mcd_volume v, int cshift, long long nchunks, long long nseg,
                      const uint4 *pool, const unsigned long long *pool_ctr,
                      unsigned long long pool_cap, const unsigned long long *segbase,
                      mc_records rec, unsigned long long rec_cap, int edges)
{
    pmi_pdl_enter();
    const unsigned long long n = min(*pool_ctr, pool_cap), nx = (unsigned long long)v.nx;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const uint4 e = __ldg(pool + i);
        const unsigned long long pt = (unsigned long long)e.x | (unsigned long long)e.y << 32;
        const unsigned long long row = pt / nx, x = pt - row * nx;
        const unsigned long long seg = row * (unsigned long long)nchunks + (x >> cshift);
        const unsigned long long r = __ldg(segbase + seg) + (e.z >> 16);
        const unsigned long long tb = __ldg(segbase + nseg + seg) + (e.w & 0xffffu);
        const unsigned long long cb = __ldg(segbase + 2 * nseg + seg) + (e.w >> 16);
        const unsigned info = e.z & 0xffffu;
        if (r < rec_cap) {
            rec.point[r] = pt;
            rec.info[r] = (uint16_t)info;
            rec.tri[r] = tb;
            if (edges) rec.cross[r] = cb;
        }
    }
}

int pmi_mc_stream_supported(const pm_volume *vol)
{
    return vol->type != PM_SAMPLE_F64 && vol->nx < ((size_t)1 << 30) && vol->nx > 0 &&
           vol->ny > 0 && vol->nz > 0;
}

int pmi_mc_stream_vec(const pm_volume *vol)
{
    /* 16-byte loads (ms_vpack) for 1- and 2-byte samples. */
    return pm_sample_size(vol->type) < 4 && pmi_mc_rows16(vol);
}

mc_stream_grid pmi_mc_stream_make_grid(const pm_volume *vol, int nsm)
{
    mc_stream_grid g;
    const long long nx = (long long)vol->nx, ny = (long long)vol->ny, nz = (long long)vol->nz;
    /* Chunks of 128 points (bands of 63 rows) where they take at least
     * 10% fewer lanes per slice than chunks of 256 (bands of 31): chunks x
     * chunk width x bands x rows loaded. Part of the kernel's time follows
     * the lanes (measured on the H100, bench/RESULTS-cudamc.md: 384^3,
     * which idles about a third of its lanes in 256-point chunks, is 3%
     * faster in 128-point ones; 640^3 about 1%). */
    const double lanes8 = (double)((nx + 255) / 256) * 256.0 * (double)((ny + 30) / 31) * 32.0,
                 lanes4 = (double)((nx + 127) / 128) * 128.0 * (double)((ny + 62) / 63) * 64.0;
    g.cshift = lanes4 < 0.9 * lanes8 ? 7 : 8;
    g.vec = pmi_mc_stream_vec(vol);
    const long long cw = 1ll << g.cshift, bj = (long long)MS_J(cw / 32);
    g.nchunks = (nx + cw - 1) / cw;
    g.nbands = (ny + bj - 1) / bj;
    g.nseg = g.nchunks * ny * nz;
    g.ntiles = (g.nseg + MS_SEG_TILE - 1) / MS_SEG_TILE;
    /* Slices per block: 4 (measured on the H100 at 512^3 and 768^3: 2, 4,
     * 6, 8, 12 slices gave 0.278, 0.247, 0.251, 0.261, 0.285 ms for the
     * 512^3 kernel: short blocks balance the surface's uneven cost, the
     * shared slice between ranges costs 1/slices more reads), fewer when
     * that leaves under four waves of blocks (MS_MINB per SM, MS_MINB_V90
     * with 16-byte loads). */
    const long long layer = g.nchunks * g.nbands,
                    slots = (long long)(g.vec ? MS_MINB_V90 : MS_MINB) * (nsm > 0 ? nsm : 1);
    long long slices = nz / ((4 * slots + layer - 1) / layer);
    if (slices > MS_SLICES) slices = MS_SLICES;
    if (slices < 1) slices = 1;
    /* Up to 8 where that leaves at least 16 waves of blocks: the shared
     * slice is read twice, and on the H200 the kernel is bound by the
     * traffic between the L2's two halves (ncu at 768^3: 93% of the
     * fabric's cycles, 74 M sectors read for the volume's 57 M), while
     * the blocks' uneven cost matters less with many waves (measured on
     * the H200, bench/RESULTS-cudamc.md: 640^3 to 1024^3 3-6% faster
     * than 4; 6 and 12 within 1% of 8; 384^3 and 512^3 keep 4). */
    for (long long s2 = MS_SLICES_LONG; s2 > slices; s2--)
        if (layer * ((nz + s2 - 1) / s2) >= 16 * slots) {
            slices = s2;
            break;
        }
    if (slices > nz) slices = nz;
    /* The bulk: the first slices in ranges of MS_TIER_SLICES (16), the
     * blocks of the lowest numbers, which the GPU starts first; then at
     * least four waves of blocks of the ranges above, whose blocks even out
     * the end. Long ranges read the shared slices less often, and only
     * the end of a kernel needs short blocks (measured on the H200,
     * bench/RESULTS-cudamc.md: 512^3 f32 4-5% faster than ranges of 4
     * alone, 384^3 and 640^3 to 1024^3 1-2%; bulks of 12 and 24 and tails
     * of 2 and 6 waves measured too). u8 in 16-byte loads: a tail of six
     * waves (MS_TAIL_WAVES_1B). */
    g.S = g.SL = slices;
    g.nzl = 0;
    {
        const long long waves =
            g.vec && pm_sample_size(vol->type) == 1 ? MS_TAIL_WAVES_1B : MS_TAIL_WAVES;
        const long long tail = (waves * slots + layer - 1) / layer * slices;
        if (MS_TIER_SLICES > slices && nz - tail >= MS_TIER_SLICES) {
            g.SL = MS_TIER_SLICES;
            g.nzl = (nz - tail) / g.SL;
        }
    }
    g.nzr = g.nzl + (nz - g.nzl * g.SL + g.S - 1) / g.S;
    return g;
}

template <typename T>
static void ms_launch(cudaStream_t s, int pdl, unsigned grid, const mcd_volume &v,
                      const mc_stream_grid &g, int edges, const mc_stream_mem &m,
                      unsigned long long *totals)
{
    const bool above = v.sg < 0;
    constexpr int V = sizeof(T) < 4; /* a vector instance for 1- and 2-byte samples */
    auto k = g.cshift == 7
                 ? (above ? (g.vec ? mc_stream_kernel<T, 4, 1, V> : mc_stream_kernel<T, 4, 1, 0>)
                          : (g.vec ? mc_stream_kernel<T, 4, 0, V> : mc_stream_kernel<T, 4, 0, 0>))
                 : (above ? (g.vec ? mc_stream_kernel<T, 8, 1, V> : mc_stream_kernel<T, 8, 1, 0>)
                          : (g.vec ? mc_stream_kernel<T, 8, 0, V> : mc_stream_kernel<T, 8, 0, 0>));
    /* The threshold's words for the 16-byte loads, as the kernel's
     * arguments. */
    const ms_thr th = ms_thr_make<T>(mcd_int_threshold(v.fthr, above), above);
    pmi_launch(pdl, k, grid, MC_THREADS, s, v, g, th, edges, m.segc, m.pool, m.pool_cap, m.pool_ctr,
               totals);
}

pm_status pmi_mc_stream_classify(pm_context *ctx, const mcd_volume &v, pm_sample_type type,
                                 const mc_stream_grid &g, int edges, const mc_stream_mem &m,
                                 mc_records rec, unsigned long long rec_cap,
                                 unsigned long long *rows, unsigned long long *totals,
                                 const mc_final_args *fin, int pooled, int pdl)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    /* Never empty (pmi_mc_stream_supported takes non-empty lattices);
     * nothing would write the totals and counts. */
    if (g.nseg == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_isosurface: empty lattice to stream");
    const long long blocks = g.nchunks * g.nbands * g.nzr;
    if (blocks > 0x7fffffffll || g.ntiles > 0x7fffffffll)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface: the lattice is too large for the GPU tiling");
    switch (type) {
    case PM_SAMPLE_U8: ms_launch<uint8_t>(s, pdl, (unsigned)blocks, v, g, edges, m, totals); break;
    case PM_SAMPLE_U16:
        ms_launch<uint16_t>(s, pdl, (unsigned)blocks, v, g, edges, m, totals);
        break;
    case PM_SAMPLE_I16: ms_launch<int16_t>(s, pdl, (unsigned)blocks, v, g, edges, m, totals); break;
    case PM_SAMPLE_F32: ms_launch<float>(s, pdl, (unsigned)blocks, v, g, edges, m, totals); break;
    default:
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface: no streaming classification for f64");
    }
    PMI_TRY(pmi_cuda_launched("pm_isosurface: streaming classification"));
    mc_final_args f;
    memset(&f, 0, sizeof f);
    if (fin) f = *fin;
    pmi_launch(pdl, mc_segscan_kernel, (unsigned)g.ntiles, MC_THREADS, s, g.nseg, g.nchunks,
               g.ntiles, m.segc, m.ticket, m.state, m.segbase, rows, totals, f);
    PMI_TRY(pmi_cuda_launched("pm_isosurface: segment scan"));
    if (pooled) return PM_STATUS_OK;
    const unsigned sgrid = (unsigned)(st->num_sms > 0 ? st->num_sms * 16 : 2048);
    pmi_launch(pdl, mc_scatter_kernel, sgrid, MC_THREADS, s, v, g.cshift, g.nchunks, g.nseg, m.pool,
               m.pool_ctr, m.pool_cap, m.segbase, rec, rec_cap, edges);
    return pmi_cuda_launched("pm_isosurface: record scatter");
}

/* Kernel preloading (preload.cu): f32 first. */
void pmi_mc_stream_preload(pmi_preload *p, int tier)
{
    const void *const k0[] = {(const void *)mc_stream_kernel<float, 8, 0, 0>,
                              (const void *)mc_stream_kernel<float, 8, 1, 0>,
                              (const void *)mc_stream_kernel<float, 4, 0, 0>,
                              (const void *)mc_stream_kernel<float, 4, 1, 0>,
                              (const void *)mc_segscan_kernel,
                              (const void *)mc_scatter_kernel};
    /* 1- and 2-byte samples: the vector instances (aligned rows) first. */
#define MS_K(T, XW, A, V) (const void *)mc_stream_kernel<T, XW, A, V>
#define MS_K4(T, V) MS_K(T, 8, 0, V), MS_K(T, 8, 1, V), MS_K(T, 4, 0, V), MS_K(T, 4, 1, V)
    const void *const k1[] = {MS_K4(uint8_t, 1), MS_K4(uint16_t, 1), MS_K4(int16_t, 1),
                              MS_K4(uint8_t, 0), MS_K4(uint16_t, 0), MS_K4(int16_t, 0)};
#undef MS_K4
#undef MS_K
    if (tier == 0)
        pmi_preload_all(p, k0);
    else
        pmi_preload_all(p, k1);
}
