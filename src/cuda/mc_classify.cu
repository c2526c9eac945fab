/* CUDA marching cubes, pass 1: classification and compaction of the active
 * lattice points (the HistoPyramid's base level, stored compacted), in two
 * kernels as the CPU backend (src/cpu/isosurface.c). (a) A streaming kernel
 * reads the volume once with 16-byte loads and writes one inside bit per
 * lattice point (P/8 bytes, which stays in L2). (b) A classification kernel
 * reads only the bitmask: per 32-point word the cases, triangle counts and
 * owned-edge crossings come from bitwise operations on the words of rows
 * (j, k), (j+1, k), (j, k+1), (j+1, k+1); the tile's counts are scanned in
 * the block and chained to the previous tiles by a single-pass decoupled
 * look-back (Merrill & Garland 2016), so the records come out in lattice
 * order with exact 64-bit prefixes of triangles and owned-edge crossings:
 * everything the expansion needs, and the expansion kernels' block start
 * table. Two classification kernels with the same output:
 * mc_classify2_kernel (fewer instructions per word; used while the bitmask
 * fits in half the L2) and mc_classify_kernel (fewer loads in flight,
 * faster when the bitmask does not stay in L2). */
#include "cuda/mc_words.cuh"

MCD_TABLES_UPLOAD

/* (a) Inside bits. A thread takes E = 16 / sizeof(T) consecutive samples of
 * a row (one 16-byte load when rows are aligned, VEC), 32 / E lanes pack
 * one word by shuffles; MC_BU items per thread are loaded before any is
 * used, to keep many loads in flight. */
#define MC_BU 4
template <typename T, int VEC>
static __global__ void __launch_bounds__(MC_THREADS)
    mc_bits_kernel(mcd_volume v, long long words, unsigned cpr, unsigned long long nitems,
                   unsigned *bits)
{
    pmi_pdl_enter();
    constexpr int E = 16 / (int)sizeof(T), TPW = 32 / E;
    __shared__ long long s_row, s_j, s_k;
    __shared__ unsigned s_c;
    const int t = threadIdx.x, lane = t & 31;
    const unsigned long long gb = (unsigned long long)blockIdx.x * (MC_THREADS * MC_BU);
    if (t == 0) {
        unsigned long long row = gb / cpr;
        s_row = (long long)row;
        s_c = (unsigned)(gb - row * cpr);
        s_k = (long long)(row / (unsigned long long)v.ny);
        s_j = (long long)(row - (unsigned long long)s_k * (unsigned long long)v.ny);
    }
    __syncthreads();
    const T *d = (const T *)v.data;
    union {
        uint4 u;
        T s[E];
    } w[MC_BU];
    long long row[MC_BU];
    int cnt[MC_BU];
    unsigned col[MC_BU];
#pragma unroll
    for (int u = 0; u < MC_BU; u++) {
        const unsigned off = s_c + (unsigned)(u * MC_THREADS + t);
        const unsigned dr = off / cpr, c = off - dr * cpr;
        long long j = s_j + dr, k = s_k;
        if (j >= v.ny) {
            k += j / v.ny;
            j -= (j / v.ny) * v.ny;
        }
        const long long x = (long long)c * E;
        row[u] = s_row + dr;
        col[u] = c;
        cnt[u] = gb + u * MC_THREADS + t < nitems ? (int)max(0ll, min((long long)E, v.nx - x)) : 0;
        const T *p = d + x + j * v.rs + k * v.ss;
        w[u].u = make_uint4(0, 0, 0, 0);
        if (VEC && cnt[u] == E) {
            w[u].u = __ldg((const uint4 *)p);
        } else {
#pragma unroll
            for (int e = 0; e < E; e++)
                if (e < cnt[u]) w[u].s[e] = __ldg(p + e);
        }
    }
    /* Integer samples against the integer threshold (mcd_int_threshold)
     * as sgn x < sgn thr, sgn = -1 when inside is above. */
    const bool above = v.sg < 0;
    const int sgn = above ? -1 : 1, ithr = sgn * mcd_int_threshold(v.fthr, above);
#pragma unroll
    for (int u = 0; u < MC_BU; u++) {
        unsigned m = 0;
#pragma unroll
        for (int e = 0; e < E; e++) {
            unsigned in;
            if constexpr (sizeof(T) <= 2)
                in = sgn * (int)w[u].s[e] < ithr;
            else
                in = mcd_inside_t<T>(v, w[u].s[e]);
            m |= (e < cnt[u] ? in : 0u) << e;
        }
        if (TPW < 32) m <<= E * (lane % TPW);
#pragma unroll
        for (int o = 1; o < TPW; o <<= 1)
            m |= __shfl_xor_sync(0xffffffffu, m, o);
        if (lane % TPW == 0 && gb + u * MC_THREADS + t < nitems)
            bits[row[u] * words + col[u] / TPW] = m;
    }
}

static __device__ __forceinline__ void mc_load_word(const unsigned *bits, long long w,
                                                    long long nwords, long long words, long long ny,
                                                    long long nx, long long wi, int jy, int kz,
                                                    mc_word &m)
{
    const long long up = words, back = words * ny;
    const unsigned a = __ldg(bits + w), an = w + 1 < nwords ? __ldg(bits + w + 1) : 0u;
    unsigned b = 0, bn = 0, c = 0, cn = 0, d = 0, dn = 0;
    if (jy) {
        b = __ldg(bits + w + up);
        bn = w + up + 1 < nwords ? __ldg(bits + w + up + 1) : 0u;
    }
    if (kz) {
        c = __ldg(bits + w + back);
        cn = w + back + 1 < nwords ? __ldg(bits + w + back + 1) : 0u;
    }
    if (jy && kz) {
        d = __ldg(bits + w + back + up);
        dn = w + back + up + 1 < nwords ? __ldg(bits + w + back + up + 1) : 0u;
    }
    mc_make_word(a, an, b, bn, c, cn, d, dn, nx, wi, jy, kz, m);
}

/* Row coordinates of bitmask word w. */
static __device__ __forceinline__ void mc_word_pos(long long w, long long words, long long ny,
                                                   long long *wi, long long *j, long long *k)
{
    if ((unsigned long long)w < (1ull << 32) && (unsigned long long)words < (1ull << 32) &&
        (unsigned long long)ny < (1ull << 32)) {
        const unsigned r = (unsigned)w / (unsigned)words;
        *wi = (long long)((unsigned)w - r * (unsigned)words);
        *k = r / (unsigned)ny;
        *j = (long long)(r - (unsigned)*k * (unsigned)ny);
    } else {
        const long long r = w / words;
        *wi = w - r * words;
        *k = r / ny;
        *j = r - *k * ny;
    }
}

/* Advances (wi, j, k) to the next word. */
static __device__ __forceinline__ void mc_word_next(long long words, long long ny, long long *wi,
                                                    long long *j, long long *k)
{
    if (++*wi == words) {
        *wi = 0;
        if (++*j == ny) {
            *j = 0;
            ++*k;
        }
    }
}

/* 4 blocks per SM: 64 registers (the row-table stores would otherwise take
 * it to 73 and 3 blocks). One long kernel: its phases (counts, block scan,
 * look-back, records) run between barriers on shared state. */
static __global__ void __launch_bounds__(MC_THREADS, 4)
    mc_classify_kernel(mcd_volume v, mc_tiling tl, int edges, const unsigned *bits,
                       unsigned int *ticket, unsigned long long *state, mc_records rec,
                       unsigned long long rec_cap, unsigned long long *rows,
                       unsigned long long *totals)
{
    pmi_pdl_enter();
    __shared__ uint8_t s_nt[256];
    __shared__ unsigned long long warp_sum[MC_ROUNDS][MC_THREADS / 32];
    __shared__ unsigned long long base[3];
    __shared__ long long s_tile;
    __shared__ unsigned int s_cells;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    s_nt[t] = mcd_tri_count[t];
    if (t == 0) {
        s_tile = atomicAdd(ticket, 1u);
        s_cells = 0;
    }
    __syncthreads();
    const long long tile = s_tile;

    /* Counts of the thread's words, round by round (round r: words
     * r * MC_TILE_WORDS + t * MC_WPT .. of the tile, so each round is in
     * lattice order across the block); act: the points that get a record. */
    unsigned act[MC_ROUNDS][MC_WPT];
    unsigned long long mine[MC_ROUNDS];
    unsigned int cells = 0;
    unsigned rstart = 0; /* bit r * MC_WPT + q: word q of round r starts a row */
#pragma unroll
    for (int r = 0; r < MC_ROUNDS; r++) {
        const long long w0 = (tile * MC_ROUNDS + r) * MC_TILE_WORDS + (long long)t * MC_WPT;
        long long wi = 0, j = 0, k = 0;
        if (w0 < tl.nwords) mc_word_pos(w0, tl.words, v.ny, &wi, &j, &k);
        mine[r] = 0;
        /* All the round's words first (rows j, j+1 and slices k, k+1, and the
         * word after each), so the loads overlap; words of missing rows only
         * meet masks that drop them, so only the array's end is guarded. */
        unsigned raw[4][MC_WPT + 1];
        const long long offs[4] = {0, tl.words, tl.words * v.ny, tl.words * v.ny + tl.words};
#pragma unroll
        for (int o = 0; o < 4; o++)
#pragma unroll
            for (int q = 0; q <= MC_WPT; q++)
                raw[o][q] = w0 + q + offs[o] < tl.nwords ? __ldg(bits + w0 + q + offs[o]) : 0u;
#pragma unroll
        for (int q = 0; q < MC_WPT; q++) {
            act[r][q] = 0;
            const long long w = w0 + q;
            if (w < tl.nwords && wi == 0) rstart |= 1u << (r * MC_WPT + q);
            if (w < tl.nwords) {
                mc_word m;
                mc_make_word(raw[0][q], raw[0][q + 1], raw[1][q], raw[1][q + 1], raw[2][q],
                             raw[2][q + 1], raw[3][q], raw[3][q + 1], v.nx, wi, j + 1 < v.ny,
                             k + 1 < v.nz, m);
                mine[r] += mc_word_counts(m, s_nt, edges, &act[r][q], &cells);
            }
            mc_word_next(tl.words, v.ny, &wi, &j, &k);
        }
    }
    for (int off = 16; off; off >>= 1)
        cells += __shfl_xor_sync(0xffffffffu, cells, off);
    if (lane == 0 && cells) atomicAdd(&s_cells, cells);

    /* Block scans in lattice order: round by round, thread by thread. */
    unsigned long long incl[MC_ROUNDS];
#pragma unroll
    for (int r = 0; r < MC_ROUNDS; r++) {
        incl[r] = mine[r];
        for (int off = 1; off < 32; off <<= 1) {
            unsigned long long o = __shfl_up_sync(0xffffffffu, incl[r], off);
            if (lane >= off) incl[r] += o;
        }
        if (lane == 31) warp_sum[r][warp] = incl[r];
    }
    __syncthreads();
    unsigned long long excl[MC_ROUNDS], agg = 0;
#pragma unroll
    for (int r = 0; r < MC_ROUNDS; r++) {
        unsigned long long before = 0, ragg = 0;
        for (int w = 0; w < MC_THREADS / 32; w++) {
            if (w < warp) before += warp_sum[r][w];
            ragg += warp_sum[r][w];
        }
        excl[r] = agg + before + incl[r] - mine[r];
        agg += ragg;
    }

    /* Chain to the previous tiles: warp q looks back for quantity q. */
    if (warp < 3)
        mc_chain(state + warp * tl.ntiles, tile, tl.ntiles, MC_F(agg, warp), &base[warp],
                 &totals[warp]);
    if (t == 0 && s_cells) atomicAdd(&totals[3], (unsigned long long)s_cells);
    __syncthreads();

    /* Records of the active points (the words' masks again, from L1/L2).
     * Points without a record have no triangles and, with edges, no
     * crossings, so only the record points advance the prefixes that are
     * written. A word that starts a row writes the row's first record. */
    if (!rows) rstart = 0;
#pragma unroll 1
    for (int r = 0; r < MC_ROUNDS; r++) {
        const unsigned rs = rstart >> (r * MC_WPT) & ((1u << MC_WPT) - 1u);
        if (!MC_F(mine[r], 0) && !rs) continue;
        unsigned long long rb = base[0] + MC_F(excl[r], 0), tb = base[1] + MC_F(excl[r], 1),
                           cb = base[2] + MC_F(excl[r], 2);
        const long long w0 = (tile * MC_ROUNDS + r) * MC_TILE_WORDS + (long long)t * MC_WPT;
        long long wi, j, k;
        mc_word_pos(w0, tl.words, v.ny, &wi, &j, &k);
#pragma unroll 1
        for (int q = 0; q < MC_WPT; q++) {
            if (rs >> q & 1) rows[j + v.ny * k] = rb;
            unsigned am = act[r][q];
            if (am) {
                const long long w = w0 + q;
                mc_word m;
                mc_load_word(bits, w, tl.nwords, tl.words, v.ny, v.nx, wi, j + 1 < v.ny,
                             k + 1 < v.nz, m);
                const unsigned long long row0 =
                    (unsigned long long)v.nx * (unsigned long long)(j + v.ny * k) +
                    32ull * (unsigned long long)wi;
                mc_emit_records(m, am, row0, s_nt, rec, rec_cap, edges, &rb, &tb, &cb);
            }
            mc_word_next(tl.words, v.ny, &wi, &j, &k);
        }
    }
}

/* ---- Classification, second version: same records, row table and
 * totals as mc_classify_kernel, with fewer instructions per
 * word: a round's 20 words come as
 * four 16-byte loads plus a shuffle for the word after (rows of a multiple
 * of 4 words, VEC) and without per-load guards except in the tile rounds
 * that reach the bitmask's end; 32-bit mask arithmetic; the counts of
 * (round, thread) scanned once in shared memory (thread t scans items
 * 4t .. 4t+3, lattice order) instead of four rounds of warp scans; the
 * active masks kept in shared memory (no local memory); the record pass
 * reloads a round's words in one batch (one L1/L2 latency per round, not
 * one per word). */

/* The words of one round: raw[o][q] = word w0 + q + offs[o], q = 0..4
 * (0 past the bitmask's end). safe (block-uniform): no word of the round
 * is past the end, so no guards; with VEC the first four come as one
 * 16-byte load and the fifth from the next lane (lane 31 loads it). */
template <int VEC>
static __device__ __forceinline__ void mc_round_words(const unsigned *bits, long long w0,
                                                      const long long offs[4], bool safe,
                                                      long long nwords, unsigned raw[4][MC_WPT + 1])
{
    if (safe) {
        if (VEC) {
            const unsigned lane = threadIdx.x & 31;
#pragma unroll
            for (int o = 0; o < 4; o++) {
                const uint4 x = __ldg((const uint4 *)(bits + w0 + offs[o]));
                raw[o][0] = x.x;
                raw[o][1] = x.y;
                raw[o][2] = x.z;
                raw[o][3] = x.w;
            }
            unsigned nx[4];
#pragma unroll
            for (int o = 0; o < 4; o++)
                nx[o] = __shfl_down_sync(0xffffffffu, raw[o][0], 1);
            if (lane == 31) {
#pragma unroll
                for (int o = 0; o < 4; o++)
                    nx[o] = __ldg(bits + w0 + MC_WPT + offs[o]);
            }
#pragma unroll
            for (int o = 0; o < 4; o++)
                raw[o][MC_WPT] = nx[o];
        } else {
#pragma unroll
            for (int o = 0; o < 4; o++)
#pragma unroll
                for (int q = 0; q <= MC_WPT; q++)
                    raw[o][q] = __ldg(bits + w0 + q + offs[o]);
        }
    } else {
#pragma unroll
        for (int o = 0; o < 4; o++)
#pragma unroll
            for (int q = 0; q <= MC_WPT; q++)
                raw[o][q] = w0 + q + offs[o] < nwords ? __ldg(bits + w0 + q + offs[o]) : 0u;
    }
}

/* mc_make_word8 on the words of one round. */
static __device__ __forceinline__ void mc_make_word32(const unsigned raw[4][MC_WPT + 1], int q,
                                                      int left, bool jy, bool kz, mc_word &m)
{
    mc_make_word8(raw[0][q], raw[0][q + 1], raw[1][q], raw[1][q + 1], raw[2][q], raw[2][q + 1],
                  raw[3][q], raw[3][q + 1], left, jy, kz, m);
}

/* 3 blocks per SM: 80 registers, no spills (4 blocks: 64 registers with
 * spills, measured slower). One long kernel, as mc_classify_kernel. */
template <int VEC>
static __global__ void __launch_bounds__(MC_THREADS, 3)
    mc_classify2_kernel(mcd_volume v, mc_tiling tl, int edges, const unsigned *bits,
                        unsigned int *ticket, unsigned long long *state, mc_records rec,
                        unsigned long long rec_cap, unsigned long long *rows,
                        unsigned long long *totals)
{
    pmi_pdl_enter();
    __shared__ uint8_t s_nt[256];
    __shared__ uint4 s_act[MC_ROUNDS * MC_THREADS]; /* active masks of (round, thread) */
    __shared__ unsigned long long
        s_scan[MC_ROUNDS * MC_THREADS]; /* counts, then exclusive prefixes */
    __shared__ unsigned long long s_wsum[MC_THREADS / 32];
    __shared__ unsigned long long base[3];
    __shared__ long long s_tile;
    __shared__ unsigned int s_cells;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    s_nt[t] = mcd_tri_count[t];
    if (t == 0) {
        s_tile = atomicAdd(ticket, 1u);
        s_cells = 0;
    }
    __syncthreads();
    const long long tile = s_tile;
    const long long offs[4] = {0, tl.words, tl.words * v.ny, tl.words * v.ny + tl.words};
    const int nx32 = (int)v.nx;

    unsigned int cells = 0;
#pragma unroll
    for (int r = 0; r < MC_ROUNDS; r++) {
        const long long rbase = (tile * MC_ROUNDS + r) * MC_TILE_WORDS,
                        w0 = rbase + (long long)t * MC_WPT;
        const bool safe = rbase + MC_TILE_WORDS + offs[3] < tl.nwords;
        unsigned raw[4][MC_WPT + 1];
        mc_round_words<VEC>(bits, w0, offs, safe, tl.nwords, raw);
        long long wi = 0, j = 0, k = 0;
        if (w0 < tl.nwords) mc_word_pos(w0, tl.words, v.ny, &wi, &j, &k);
        unsigned act[MC_WPT];
        unsigned long long cnt = 0;
#pragma unroll
        for (int q = 0; q < MC_WPT; q++) {
            act[q] = 0;
            if (safe || w0 + q < tl.nwords) {
                mc_word m;
                mc_make_word32(raw, q, nx32 - 32 * (int)wi, j + 1 < v.ny, k + 1 < v.nz, m);
                cnt += mc_word_counts(m, s_nt, edges, &act[q], &cells);
            }
            mc_word_next(tl.words, v.ny, &wi, &j, &k);
        }
        s_act[r * MC_THREADS + t] = make_uint4(act[0], act[1], act[2], act[3]);
        s_scan[r * MC_THREADS + t] = cnt;
    }
    for (int off = 16; off; off >>= 1)
        cells += __shfl_xor_sync(0xffffffffu, cells, off);
    if (lane == 0 && cells) atomicAdd(&s_cells, cells);
    __syncthreads();

    /* One block scan in lattice order: item r * MC_THREADS + t is round r
     * of thread t; thread t takes items 4t .. 4t + 3. */
    unsigned long long agg = 0;
    {
        unsigned long long it[MC_ROUNDS], sum = 0;
#pragma unroll
        for (int i = 0; i < MC_ROUNDS; i++) {
            it[i] = s_scan[MC_ROUNDS * t + i];
            sum += it[i];
        }
        unsigned long long ex = mc_block_scan(sum, s_wsum, &agg);
#pragma unroll
        for (int i = 0; i < MC_ROUNDS; i++) {
            s_scan[MC_ROUNDS * t + i] = ex;
            ex += it[i];
        }
    }

    /* Chain to the previous tiles: warp q looks back for quantity q. */
    if (warp < 3)
        mc_chain(state + warp * tl.ntiles, tile, tl.ntiles, MC_F(agg, warp), &base[warp],
                 &totals[warp]);
    if (t == 0 && s_cells) atomicAdd(&totals[3], (unsigned long long)s_cells);
    __syncthreads();

    /* Records and row table, round by round. */
#pragma unroll 1
    for (int r = 0; r < MC_ROUNDS; r++) {
        const long long rbase = (tile * MC_ROUNDS + r) * MC_TILE_WORDS,
                        w0 = rbase + (long long)t * MC_WPT;
        if (rbase >= tl.nwords) break;
        const uint4 a4 = s_act[r * MC_THREADS + t];
        const unsigned act[MC_WPT] = {a4.x, a4.y, a4.z, a4.w};
        const unsigned long long ex = s_scan[r * MC_THREADS + t];
        unsigned long long rb = base[0] + MC_F(ex, 0), tb = base[1] + MC_F(ex, 1),
                           cb = base[2] + MC_F(ex, 2);
        long long wi = 0, j = 0, k = 0;
        if (w0 < tl.nwords) mc_word_pos(w0, tl.words, v.ny, &wi, &j, &k);
        const bool mine = (act[0] | act[1] | act[2] | act[3]) != 0;
        if (!__any_sync(0xffffffffu, mine)) {
            /* No records in the warp's words: the row starts only. */
            if (rows)
#pragma unroll
                for (int q = 0; q < MC_WPT; q++) {
                    if (w0 + q < tl.nwords && wi == 0) rows[j + v.ny * k] = rb;
                    mc_word_next(tl.words, v.ny, &wi, &j, &k);
                }
            continue;
        }
        const bool safe = rbase + MC_TILE_WORDS + offs[3] < tl.nwords;
        unsigned raw[4][MC_WPT + 1];
        mc_round_words<VEC>(bits, w0, offs, safe, tl.nwords, raw);
#pragma unroll
        for (int q = 0; q < MC_WPT; q++) {
            if (rows && w0 + q < tl.nwords && wi == 0) rows[j + v.ny * k] = rb;
            unsigned am = act[q];
            if (am) {
                mc_word m;
                mc_make_word32(raw, q, nx32 - 32 * (int)wi, j + 1 < v.ny, k + 1 < v.nz, m);
                const unsigned long long row0 =
                    (unsigned long long)v.nx * (unsigned long long)(j + v.ny * k) +
                    32ull * (unsigned long long)wi;
                mc_emit_records(m, am, row0, s_nt, rec, rec_cap, edges, &rb, &tb, &cb);
            }
            mc_word_next(tl.words, v.ny, &wi, &j, &k);
        }
    }
}

int pmi_mc_rows16(const pm_volume *vol)
{
    const size_t es = pm_sample_size(vol->type);
    return ((uintptr_t)vol->data % 16) == 0 && (vol->row_stride * es) % 16 == 0 &&
           (vol->slice_stride * es) % 16 == 0 && (vol->nx * es) % 16 == 0;
}

mc_tiling pmi_mc_make_tiling(const pm_volume *vol)
{
    mc_tiling tl;
    tl.words = ((long long)vol->nx + 31) / 32;
    tl.nwords = tl.words * (long long)vol->ny * (long long)vol->nz;
    tl.ntiles = (tl.nwords + MC_ROUNDS * MC_TILE_WORDS - 1) / (MC_ROUNDS * MC_TILE_WORDS);
    tl.vec = 0;
    tl.mw = tl.mny = 0;
    return tl;
}

template <typename T>
static void mc_launch_bits(cudaStream_t s, int pdl, const mcd_volume &v, const mc_tiling &tl,
                           int vec, unsigned *bits)
{
    constexpr int E = 16 / (int)sizeof(T);
    const unsigned cpr = (unsigned)(tl.words * (32 / E));
    const unsigned long long nitems = (unsigned long long)tl.nwords * (32 / E);
    const unsigned long long per = MC_THREADS * MC_BU;
    const unsigned grid = (unsigned)((nitems + per - 1) / per);
    pmi_launch(pdl, vec ? mc_bits_kernel<T, 1> : mc_bits_kernel<T, 0>, grid, MC_THREADS, s, v,
               tl.words, cpr, nitems, bits);
}

pm_status pmi_mc_inside_bits(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl,
                             pm_sample_type type, unsigned int *bits, int pdl)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    if (tl.nwords == 0) return PM_STATUS_OK;
    /* The bits kernel's grid and row chunks: 32-bit, checked. */
    if (tl.words * 32 > 0x7fffffffll || tl.nwords * 32 / (MC_THREADS * MC_BU) > 0x7fffffffll)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface: the lattice rows are too long for the GPU tiling");
    /* Vector loads when every row starts 16-byte aligned. */
    size_t es = pm_sample_size(type);
    int vec = ((uintptr_t)v.data % 16) == 0 && (v.rs * (long long)es) % 16 == 0 &&
              (v.ss * (long long)es) % 16 == 0;
    switch (type) {
    case PM_SAMPLE_U8: mc_launch_bits<uint8_t>(s, pdl, v, tl, vec, bits); break;
    case PM_SAMPLE_U16: mc_launch_bits<uint16_t>(s, pdl, v, tl, vec, bits); break;
    case PM_SAMPLE_I16: mc_launch_bits<int16_t>(s, pdl, v, tl, vec, bits); break;
    case PM_SAMPLE_F32: mc_launch_bits<float>(s, pdl, v, tl, vec, bits); break;
    case PM_SAMPLE_F64: mc_launch_bits<double>(s, pdl, v, tl, vec, bits); break;
    }
    return pmi_cuda_launched("pm_isosurface: inside bits");
}

pm_status pmi_mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int edges,
                          const unsigned int *bits, unsigned int *ticket, unsigned long long *state,
                          mc_records rec, unsigned long long rec_cap, unsigned long long *rows,
                          unsigned long long *totals, mc_cls_kernel kernel, int pdl)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    if (tl.nwords == 0) return PM_STATUS_OK;
    if (tl.ntiles > 0x7fffffffll)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: too many tiles");
    unsigned long long *rw = edges ? rows : NULL;
    const unsigned g = (unsigned)tl.ntiles;
    void (*k)(mcd_volume, mc_tiling, int, const unsigned *, unsigned int *, unsigned long long *,
              mc_records, unsigned long long, unsigned long long *, unsigned long long *);
    if (kernel == MC_CLS_BATCHED) {
        /* 16-byte loads when every row (and so every slice) is a whole
         * number of 16-byte groups of words. */
        const int vec = ((uintptr_t)bits % 16) == 0 && tl.words % 4 == 0;
        k = vec ? mc_classify2_kernel<1> : mc_classify2_kernel<0>;
    } else {
        k = mc_classify_kernel;
    }
    pmi_launch(pdl, k, g, MC_THREADS, s, v, tl, edges, bits, ticket, state, rec, rec_cap, rw,
               totals);
    return pmi_cuda_launched("pm_isosurface: classification");
}

/* Kernel preloading (preload.cu): the bitmask path is tier 1 (f64 and
 * large integer volumes). */
#define MC_BITS_PAIR(T) (const void *)mc_bits_kernel<T, 1>, (const void *)mc_bits_kernel<T, 0>
void pmi_mc_classify_preload(pmi_preload *p, int tier)
{
    if (tier == 0) return;
    const void *const k[] = {(const void *)mc_classify2_kernel<1>,
                             (const void *)mc_classify2_kernel<0>,
                             (const void *)mc_classify_kernel,
                             MC_BITS_PAIR(double),
                             MC_BITS_PAIR(uint8_t),
                             MC_BITS_PAIR(uint16_t),
                             MC_BITS_PAIR(int16_t),
                             MC_BITS_PAIR(float)};
    pmi_preload_all(p, k);
}
#undef MC_BITS_PAIR
