/* CUDA marching cubes, pass 1 in one kernel: the direct classification
 * (the default for small volumes, up to MC_DIRECT_MAX points, see
 * mc_plan_make in isosurface.cu). The same records, row table, start
 * table and totals as the bitmask kernels of mc_classify.cu, with the
 * bitmask never stored: a block owns a tile of MC_THREADS consecutive
 * 32-point words in lattice order and computes the inside bits its words
 * need straight from the volume into shared memory, 16 bytes of a word
 * per lane where the rows allow (one warp load reads 4 to 16 words; else
 * one sample a load, a second instance): the tile's words and the
 * row after them (window 0), and the same words one slice on (window 1).
 * Thread t then classifies word t (mc_words.cuh), the block scans the
 * counts, the tile chains them to the tiles before it by decoupled
 * look-back (ticket order, so the chain never waits on a tile that has
 * not started) and each warp writes its words' records in lattice order,
 * one per lane (md_emit_warp).
 *
 * Soups above 2^22 points skip the look-back (CH, chunked records): a
 * tile's wait for the tiles before it was a fifth of the kernel's time at
 * 256^3. Each tile takes a chunk of the record array from a counter and
 * writes its records there, in lattice order within the tile, each with
 * the tile in the high word of a tile-local triangle prefix, and stores
 * its entry {chunk, records, triangles, active cells}. A one-block kernel
 * (md_chunks_scan_kernel) then scans the entries' triangles into the
 * tiles' prefixes and writes the totals, and the soup kernel adds a
 * record's tile prefix. The mesh is the same, byte for byte: every triangle goes
 * to its lattice-order position; only the records' order in memory
 * differs. Indexed meshes keep the look-back: their edges' owners are
 * found by searching records in lattice order.
 *
 * Why a third pass-1 path: a small volume is meshed by latency, not by
 * bandwidth. The streaming classification takes three kernels (stream,
 * segment scan, scatter) and its blocks walk four slices in turn; the
 * bitmask path two kernels and a round trip of the bits through memory.
 * Here one launch holds every tile of a 128^3 volume at once (256 tiles),
 * each reads its 2 (256 + W + 1) words in a few batches of loads, and the
 * slice that two tiles share is read twice (from L2 the second time).
 * Rows of at most 32 * MC_DIRECT_WMAX points (the windows' size). Measured
 * figures: bench/RESULTS-cudamc.md. */
#include "cuda/mc_words.cuh"
#include "core/hooks.h"

MCD_TABLES_UPLOAD

#define MD_WIN (MC_THREADS + MC_DIRECT_WMAX + 1) /* words in a window, at most */
/* The load phase: a lane's samples of a word (one 16-byte load), the
 * groups of E words a warp loads before it packs any of them (f32: 12
 * words, 16-bit: 16, 8-bit: 48; 8-bit loaded one sample at a time: 16),
 * and the elements a warp places at once (two per lane, in whole
 * batches). */
#define MD_E(T) (16 / (int)sizeof(T))
#define MD_GROUPS(T, V) (sizeof(T) == 2 ? 2 : sizeof(T) == 1 && !(V) ? 1 : 3)
#define MD_PLACE(T, V) (MD_GROUPS(T, V) * MD_E(T) * (64 / (MD_GROUPS(T, V) * MD_E(T))))
template <typename T> union md_part {
    uint4 u;
    T s[16 / sizeof(T)];
};
/* A lane's c samples from p (c is 0 or E when VEC): one 16-byte load
 * when VEC, from the volume's first 16 bytes when c is 0 (the caller
 * drops those bits), so no lane branches; else one load each and the rest
 * zero. */
template <typename T, int VEC>
static __device__ __forceinline__ md_part<T> md_load(const T *p, const T *data, int c)
{
    md_part<T> w;
    if (VEC) {
        w.u = __ldg((const uint4 *)(c ? p : data));
    } else {
#pragma unroll
        for (int i = 0; i < MD_E(T); i++)
            w.s[i] = i < c ? __ldg(p + i) : (T)0;
    }
    return w;
}

/* n / d for n < 2^32 by the host's m = (2^64 - 1) / d + 1 (md_magic): the
 * high word of n m is n / d, since n m / 2^64 exceeds n / d by less than
 * 2^-32 <= 1 / d. m = 0 stands for d = 1. */
static __device__ __forceinline__ unsigned md_div(unsigned n, unsigned long long m)
{
    return m ? (unsigned)__umul64hi(n, m) : n;
}

/* The tile states and ticket of the direct classification, kept by the
 * context across calls (md_sync_get): no kernel clears them. A state word
 * is a flag (PMI_FLAG_A or PMI_FLAG_P), the call's epoch (30 bits) and a
 * 32-bit value; a state of another epoch is one not yet published. The
 * chained tiles are numbered by ticket: the ticket counter is never
 * reset, each block takes one, and the host knows how many earlier calls
 * took (tbase). Chunked tiles wait for no other tile, so they take
 * neither states nor tickets: a block's tile is its index. */
#define MD_EPOCH_SHIFT 32
#define MD_EPOCH_BITS 30
#define MD_EPOCH_MASK (((1ull << MD_EPOCH_BITS) - 1) << MD_EPOCH_SHIFT)
#define MD_CHAINS MD_CHAINS_MAX /* records, triangles, crossings, active cells */
typedef struct md_sync {
    unsigned int *ticket;
    unsigned int tbase;
    unsigned long long *state; /* MD_CHAINS * ntiles words */
    unsigned long long epoch;  /* the call's epoch, shifted into place */
    /* Chunked records (soups, pmi_mc_direct_classify's ch.tile): no chains;
     * ctr[0] hands out the tiles' record chunks (zero between calls:
     * md_chunks_scan_kernel resets it). */
    unsigned int *ctr;
    uint4 *tinfo;
} md_sync;

/* Sum of a 32-bit value over the warp: one reduction instruction from
 * compute capability 8.0 on, else five shuffles. */
static __device__ __forceinline__ unsigned md_warp_sum(unsigned v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(0xffffffffu, v);
#else
    for (int off = 16; off; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
#endif
}

/* One chain of tile `tile` (all 32 lanes of one warp): publish the tile's
 * aggregate a, look back 32 predecessors a poll (a state of another epoch
 * counts as not yet published) down to the nearest inclusive prefix, then
 * publish the tile's own and set *base (the exclusive prefix) and, on the
 * last tile, *total. As pmi_lookback_ns (cuda_internal.h, whose polls
 * it shares: pmi_lookback_window), with 32-bit
 * values: a point adds at most 5 triangles, 3 crossings, one record and
 * one cell, and pmi_mc_direct_classify takes at most 2^32 / 160 words, so
 * every prefix is below 2^32 (below 2^28 for the plan's volumes,
 * MC_DIRECT_MAX). A poll's values (one prefix and tile aggregates of at
 * most 40960) are an exact prefix, so they add up in one warp reduction
 * of 32-bit words, and the chain's latency between a tile's predecessors
 * and its records is shorter. */
static __device__ __forceinline__ void md_chain(unsigned long long *st, unsigned tile,
                                                unsigned ntiles, unsigned a,
                                                unsigned long long epoch, unsigned long long *base,
                                                unsigned long long *total)
{
    const unsigned FULL = 0xffffffffu, lane = threadIdx.x & 31;
    if (lane == 0) pmi_tile_publish(st + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | epoch | a);
    unsigned ex = 0;
    for (long long end = (long long)tile - 1; tile; end -= 32) {
        const unsigned long long s = pmi_lookback_window(st, end, 64, MD_EPOCH_MASK, epoch);
        const unsigned pm = __ballot_sync(FULL, (s >> 62) == 2);
        ex += md_warp_sum(pm && (int)lane > __ffs(pm) - 1 ? 0u : (unsigned)s);
        if (pm) break;
    }
    if (lane == 0) {
        if (tile) pmi_tile_publish(st + tile, PMI_FLAG_P | epoch | (ex + a));
        *base = ex;
        if (tile == ntiles - 1) *total = ex + a;
    }
}

/* The records of a warp's 32 words in lattice order, one record per lane
 * per round (lane l holds its word's masks m, active points act, first
 * point row0 and first record, triangle and crossing rb, tb, cb): lane k
 * of round q takes the warp's record 32 q + k, its word and point by
 * mc_warp_record, the word's masks by shuffle and its prefixes by a warp
 * scan, so consecutive lanes store consecutive records (the per-word loop of
 * mc_emit_records ran as often as the busiest lane's word had records,
 * each lane storing its own). Every lane of the warp calls it. */
static __device__ __forceinline__ void md_emit_warp(const mc_word &m, unsigned act,
                                                    unsigned long long row0, unsigned long long rb,
                                                    unsigned long long tb, unsigned long long cb,
                                                    const uint8_t *s_nt, const mc_records &rec,
                                                    unsigned long long rec_cap, int edges)
{
    const unsigned FULL = 0xffffffffu, lane = threadIdx.x & 31;
    const unsigned cnt = __popc(act), inc = mc_warp_scan(cnt);
    const unsigned ex = inc - cnt, R = __shfl_sync(FULL, inc, 31);
    if (R == 0) return;
    /* Lane 0's word is the warp's first (a warp with records has it). */
    const unsigned long long R0 = __shfl_sync(FULL, rb, 0);
    unsigned long long T = __shfl_sync(FULL, tb, 0), C = __shfl_sync(FULL, cb, 0);
    for (unsigned q = 0; q < R; q += 32) {
        const unsigned g = q + lane;
        int pb;
        const unsigned w = mc_warp_record(g, ex, act, &pb);
        const mc_word mw = mc_word_shfl(m, w);
        const unsigned long long p0 = __shfl_sync(FULL, row0, w);
        const bool has = g < R;
        unsigned nt = 0, nc = 0, info = 0;
        if (has) info = mc_record_info(mw, pb, s_nt, &nt, &nc);
        /* Triangles (<= 5) and crossings (<= 3) of the round's records,
         * scanned in one word. */
        const unsigned x0 = nt | nc << 16, xi = mc_warp_scan(x0);
        const unsigned xe = xi - x0, xt = __shfl_sync(FULL, xi, 31);
        if (has) {
            const unsigned long long ri = R0 + g, ti = T + (xe & 0xffffu), ci = C + (xe >> 16);
            if (ri < rec_cap) {
                rec.point[ri] = p0 + (unsigned long long)pb;
                rec.info[ri] = (uint16_t)info;
                rec.tri[ri] = ti;
                if (edges) rec.cross[ri] = ci;
            }
        }
        T += xt & 0xffffu;
        C += xt >> 16;
    }
}

/* The chunked records' scan (one block of MD_SCAN_THREADS, after the
 * direct classification): each tile's triangles' exclusive prefix over the
 * tiles into ch.pre (K consecutive tiles a thread, read 8 at a time so
 * that their loads are in flight together), the totals and
 * pm_isosurface_async's counts, and the chunk counter reset for the next
 * call. The entries themselves are not written: the soup kernel reads
 * them while this kernel runs (mc_soup_chunk_kernel). */
#define MD_SCAN_THREADS 1024
static __global__ void __launch_bounds__(MD_SCAN_THREADS)
    md_chunks_scan_kernel(const uint4 *tinfo, unsigned *pre, unsigned *ctr, unsigned ntiles,
                          unsigned long long *totals, mc_final_args fin)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_w[2][MD_SCAN_THREADS / 32], s_tot[MD_CHAINS];
    const unsigned t = threadIdx.x, K = (ntiles + MD_SCAN_THREADS - 1) / MD_SCAN_THREADS;
    const unsigned a0 = min(t * K, ntiles), a1 = min(a0 + K, ntiles);
    unsigned long long tri = 0, rc = 0; /* rc: records | active cells << 32 */
    for (unsigned g = a0; g < a1; g += 8) {
        uint4 e[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            e[i] = g + i < a1 ? tinfo[g + i] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            rc += e[i].y | (unsigned long long)e[i].w << 32;
            tri += e[i].z;
        }
    }
    unsigned long long all, r2;
    unsigned long long ex = mc_block_scan_n<MD_SCAN_THREADS>(tri, s_w[0], &all);
    mc_block_scan_n<MD_SCAN_THREADS>(rc, s_w[1], &r2);
    for (unsigned g = a0; g < a1; g += 8) {
        unsigned n[8];
#pragma unroll
        for (int i = 0; i < 8; i++)
            n[i] = g + i < a1 ? tinfo[g + i].z : 0u;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (g + i < a1) {
                pre[g + i] = (unsigned)ex;
                ex += n[i];
            }
    }
    if (t == 0) {
        s_tot[0] = r2 & 0xffffffffull;
        s_tot[1] = all;
        s_tot[2] = 0;
        s_tot[3] = r2 >> 32;
        for (int c = 0; c < MD_CHAINS; c++)
            totals[c] = s_tot[c];
        if (fin.dc) mc_final_counts(s_tot, fin);
        ctr[0] = 0;
    }
}

/* 4 blocks per SM: 55 to 64 registers on sm_90, no spills (ptxas; likewise
 * for sm_75 to sm_86, not measured there). VEC: 16-byte loads (tl.vec). */
template <typename T, int ABOVE, int VEC, int CH = 0>
static __global__ void __launch_bounds__(MC_THREADS, 4)
    mc_direct_kernel(mcd_volume v, mc_tiling tl, int edges, md_sync sy, mc_records rec,
                     unsigned long long rec_cap, unsigned long long *rows,
                     unsigned long long *totals, mc_final_args fin)
{
    pmi_pdl_enter();
    __shared__ uint8_t s_nt[256];
    __shared__ unsigned s_w[2 * MD_WIN];
    __shared__ unsigned long long s_wsum[MC_THREADS / 32];
    __shared__ unsigned long long base[MD_CHAINS], s_tot[MD_CHAINS];
    __shared__ unsigned s_tile, s_cells;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    s_nt[t] = mcd_tri_count[t];
    if (t == 0) {
        if constexpr (!CH) s_tile = atomicAdd(sy.ticket, 1u) - sy.tbase;
        s_cells = 0;
    }
    __syncthreads();
    /* 32-bit positions: the plan keeps nwords + one slice of words +
     * MD_WIN below 2^32. */
    const unsigned tile = CH ? blockIdx.x : s_tile, W = (unsigned)tl.words, ny = (unsigned)v.ny,
                   nw = (unsigned)tl.nwords;
    const unsigned w0 = tile * MC_THREADS, nwin = MC_THREADS + W + 1, slice = W * ny;
    const float ft = v.fthr;
    const int it = mcd_int_threshold(ft, ABOVE);
    const T *data = (const T *)v.data;

    /* (1) Inside bits of element e of both windows (word w0 + e, and
     * the word one slice on) into s_w[e] and s_w[nwin + e]. A lane takes
     * E = 16 / sizeof(T) consecutive samples of a word (one 16-byte load
     * when VEC, all in the row or all past its end), TPW = 32 / E lanes
     * pack a word by shuffles, so a warp
     * instruction loads E words. Warp w takes a contiguous share of whole
     * batches (the last warp less). Lane l places elements e0 + l and e0
     * + 32 + l of each MD_PLACE(T, VEC) elements from e0: their row offset and
     * how many of their 32 points each window holds (0 past the lattice,
     * past the share, or for a missing word). Then a batch loads
     * MD_GROUPS(T, VEC) groups of E elements of both windows, each lane with its
     * element's values by shuffle, before it packs any, so the warp's
     * loads take few round trips. Missing words and points are outside,
     * as in the bitmask. */
    {
        constexpr int E = MD_E(T), TPW = 32 / E, BATCH = MD_GROUPS(T, VEC) * E;
        const unsigned nb = (nwin + BATCH - 1) / BATCH;
        const unsigned per = BATCH * ((nb + MC_THREADS / 32 - 1) / (MC_THREADS / 32));
        const unsigned s0 = min(warp * per, nwin), s1 = min(s0 + per, nwin);
        const unsigned sub = lane % TPW, gw = lane / TPW;
        const long long next_slice = v.ss;
        for (unsigned e0 = s0; e0 < s1; e0 += MD_PLACE(T, VEC)) {
            const unsigned e1 = min(e0 + MD_PLACE(T, VEC), s1);
            long long off[2];
            unsigned lim[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const unsigned e = e0 + 32 * h + lane, p0 = w0 + e;
                const unsigned r0 = md_div(p0, tl.mw), wi = p0 - r0 * W, k = md_div(r0, tl.mny),
                               j = r0 - k * ny;
                off[h] = (long long)j * v.rs + (long long)k * v.ss + 32ll * wi;
                const unsigned n = (unsigned)min(32ll, v.nx - 32ll * wi);
                lim[h] = e < e1 ? (p0 < nw ? n : 0u) | (p0 + slice < nw ? n : 0u) << 8 : 0u;
            }
            for (unsigned eb = e0; eb < e1; eb += BATCH) {
                md_part<T> q[MD_GROUPS(T, VEC)][2];
                int c[MD_GROUPS(T, VEC)][2];
#pragma unroll
                for (int g = 0; g < MD_GROUPS(T, VEC); g++) {
                    /* rel < MD_PLACE(T, VEC) <= 64: h is 0 or 1. */
                    const unsigned rel = eb - e0 + g * E + gw, h = rel >> 5;
                    const long long o =
                        __shfl_sync(0xffffffffu, h ? off[1] : off[0], rel & 31) + E * sub;
                    const unsigned m = __shfl_sync(0xffffffffu, h ? lim[1] : lim[0], rel & 31);
                    c[g][0] = min(max((int)(m & 255u) - E * (int)sub, 0), E);
                    c[g][1] = min(max((int)(m >> 8) - E * (int)sub, 0), E);
                    q[g][0] = md_load<T, VEC>(data + o, data, c[g][0]);
                    q[g][1] = md_load<T, VEC>(data + o + next_slice, data, c[g][1]);
                }
#pragma unroll
                for (int g = 0; g < MD_GROUPS(T, VEC); g++) {
                    const unsigned el = eb + g * E + gw;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        unsigned b = 0;
#pragma unroll
                        for (int i = 0; i < E; i++)
                            b |= (unsigned)((VEC || i < c[g][h]) &&
                                            mc_inside_cmp<T, ABOVE>(q[g][h].s[i], ft, it))
                                 << i;
                        if (VEC && !c[g][h]) b = 0;
                        b <<= E * sub;
#pragma unroll
                        for (int x = 1; x < TPW; x <<= 1)
                            b |= __shfl_xor_sync(0xffffffffu, b, x);
                        if (sub == 0 && el < e1) s_w[h * nwin + el] = b;
                    }
                }
            }
        }
    }
    __syncthreads();

    /* (2) Word w0 + t: its rows (j, k), (j+1, k), (j, k+1), (j+1, k+1)
     * are the window words t and t + W of both windows. */
    const unsigned p = w0 + (unsigned)t;
    const bool valid = p < nw;
    unsigned act = 0, cells = 0, r = 0, wi = 0;
    unsigned long long cnt = 0;
    mc_word m = {};
    if (valid) {
        r = md_div(p, tl.mw);
        wi = p - r * W;
        const unsigned k = md_div(r, tl.mny), j = r - k * ny;
        const long long left = v.nx - 32ll * wi;
        const unsigned *a = s_w + t, *c = s_w + nwin + t;
        mc_make_word8(a[0], a[1], a[W], a[W + 1], c[0], c[1], c[W], c[W + 1],
                      left > 64 ? 64 : (int)left, j + 1 < ny, (long long)k + 1 < v.nz, m);
        cnt = mc_word_counts(m, s_nt, edges, &act, &cells);
    }
    for (int off = 16; off; off >>= 1)
        cells += __shfl_xor_sync(0xffffffffu, cells, off);
    if (lane == 0 && cells) atomicAdd(&s_cells, cells);

    /* (3) Block scan of the packed counts (a tile has 8192 points: no
     * field overflows), then the chain to the earlier tiles. */
    unsigned long long agg;
    const unsigned long long ex = mc_block_scan(cnt, s_wsum, &agg);
    const unsigned ntiles = (unsigned)tl.ntiles;
    if constexpr (CH) {
        /* Chunked records (soups): the tile takes a chunk of the records
         * and stores its records there, each with the tile in the high
         * word of its triangle prefix and its tile-local prefix below; no
         * tile waits for another. md_chunks_scan_kernel then scans the
         * tiles' entries; pass 2 adds each tile's prefix. */
        if (t == 0) {
            const unsigned nr = (unsigned)MC_F(agg, 0);
            const unsigned c0 = nr ? atomicAdd(sy.ctr, nr) : 0u;
            base[0] = c0;
            sy.tinfo[tile] = make_uint4(c0, nr, (unsigned)MC_F(agg, 1), s_cells);
        }
        __syncthreads();
        const unsigned long long row0 = (unsigned long long)v.nx * r + 32ull * wi;
        md_emit_warp(m, act, row0, base[0] + MC_F(ex, 0),
                     (unsigned long long)tile << 32 | MC_F(ex, 1), 0, s_nt, rec, rec_cap, 0);
        return;
    }
    if (warp < MD_CHAINS)
        md_chain(sy.state + warp * tl.ntiles, tile, ntiles,
                 warp < 3 ? (unsigned)MC_F(agg, warp) : s_cells, sy.epoch, &base[warp],
                 &s_tot[warp]);
    __syncthreads();
    /* The last tile has the totals: pass 1's, and pm_isosurface_async's
     * counts (mc_final_counts, as mc_final_kernel after the bitmask
     * kernels). */
    if (tile == ntiles - 1 && t == 0) {
        for (int c = 0; c < MD_CHAINS; c++)
            totals[c] = s_tot[c];
        if (fin.dc) mc_final_counts(s_tot, fin);
    }

    /* (4) The warp's records (md_emit_warp), and each word's row start. */
    const unsigned long long rb = base[0] + MC_F(ex, 0), tb = base[1] + MC_F(ex, 1),
                             cb = base[2] + MC_F(ex, 2);
    if (rows && valid && wi == 0) rows[r] = rb;
    const unsigned long long row0 = (unsigned long long)v.nx * r + 32ull * wi;
    md_emit_warp(m, act, row0, rb, tb, cb, s_nt, rec, rec_cap, edges);
}

int pmi_mc_direct_supported(const pm_volume *vol)
{
    if (vol->type == PM_SAMPLE_F64 || vol->nx == 0 || vol->ny == 0 || vol->nz == 0) return 0;
    if (vol->nx > 32 * (size_t)MC_DIRECT_WMAX) return 0;
    if (vol->ny >= (1ull << 32) || vol->nz >= (1ull << 32)) return 0;
    const unsigned long long words = (vol->nx + 31) / 32;
    const unsigned long long slice = words * vol->ny; /* < 2^38 */
    /* 32-bit word positions: nwords + one slice + a window below 2^32
     * (checked without 64-bit wrap-around). */
    const unsigned long long lim = (1ull << 32) - 2 * MD_WIN;
    if (slice >= lim || vol->nz > (lim - slice) / slice) return 0;
    return slice * vol->nz + slice < lim;
}

/* md_div's multiplier for d >= 1. */
static unsigned long long md_magic(unsigned long long d) { return d == 1 ? 0 : UINT64_MAX / d + 1; }

/* The bitmask path's words, in tiles of MC_THREADS words; 16-byte loads
 * when every row starts 16-byte aligned and holds a whole number of
 * 16-byte parts (so a lane's part is all in its row or all past it). */
mc_tiling pmi_mc_direct_tiling(const pm_volume *vol)
{
    mc_tiling tl = pmi_mc_make_tiling(vol);
    tl.ntiles = (tl.nwords + MC_THREADS - 1) / MC_THREADS;
    tl.vec = pmi_mc_rows16(vol);
    tl.mw = md_magic((unsigned long long)tl.words);
    tl.mny = md_magic((unsigned long long)vol->ny);
    return tl;
}

/* The context's tile states and ticket for a launch of ntiles tiles:
 * grown (and zeroed) as volumes need, then a new epoch per call; zeroed
 * again when the epochs wrap around, or after a launch that failed (its
 * tickets or chunk counter unknown). Chunked tiles (chunked) take only
 * the chunk counter: no states, epoch or tickets. */
static pm_status md_sync_get(pmi_cuda_state *st, unsigned long long ntiles, unsigned hooks,
                             int chunked, md_sync *sy)
{
    const unsigned epochs = (hooks & PMI_HOOK_EPOCHS) ? 4u : 1u << MD_EPOCH_BITS;
    const size_t need =
        256 + (chunked ? 0 : (size_t)ntiles * MD_CHAINS * sizeof(unsigned long long));
    if (st->md_bytes < need) {
        if (st->md_buf) cudaFree(st->md_buf); /* waits for the device */
        st->md_buf = NULL;
        st->md_bytes = 0;
        const size_t bytes = need < ((size_t)1 << 16) ? (size_t)1 << 16 : need;
        cudaError_t e = cudaMalloc(&st->md_buf, bytes);
        if (e != cudaSuccess) {
            cudaGetLastError();
            st->md_buf = NULL;
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_isosurface: cannot allocate %zu bytes of device memory for the "
                             "direct classification's tile states (%s)",
                             bytes, cudaGetErrorString(e));
        }
        st->md_bytes = bytes;
        st->md_reset = 1;
    }
    st->md_zeroed = 0;
    if (st->md_reset || (!chunked && st->md_epoch + 1 >= epochs)) {
        PMI_CU_TRY(cudaMemsetAsync(st->md_buf, 0, st->md_bytes, st->stream),
                   "pm_isosurface: zeroing the direct classification's tile states");
        st->md_epoch = 0;
        st->md_tickets = 0;
        st->md_reset = 0;
        st->md_zeroed = 1;
    }
    sy->ticket = (unsigned int *)st->md_buf;
    sy->ctr = sy->ticket + 2;
    sy->state = (unsigned long long *)((char *)st->md_buf + 256);
    if (chunked) return PM_STATUS_OK;
    st->md_epoch++;
    sy->tbase = st->md_tickets;
    sy->epoch = (unsigned long long)st->md_epoch << MD_EPOCH_SHIFT;
    st->md_tickets += (unsigned)ntiles; /* modulo 2^32, as the device counter */
    return PM_STATUS_OK;
}

/* A capture of chunked records (the CUDA graph of a repeated call,
 * isosurface.cu) takes the context's chunk counter, which every call
 * leaves at zero (md_chunks_scan_kernel resets it), when the context
 * holds one that needs no zeroing; pmi_mc_direct_prepare makes it so
 * before the capture (the zeroing runs then, not in the graph). */
int pmi_mc_direct_counter_ready(const pmi_cuda_state *st) { return st->md_buf && !st->md_reset; }

pm_status pmi_mc_direct_prepare(pmi_cuda_state *st, unsigned hooks)
{
    md_sync sy;
    return md_sync_get(st, 0, hooks, 1, &sy);
}

template <typename T>
static void md_launch(cudaStream_t s, int pdl, const mcd_volume &v, const mc_tiling &tl, int edges,
                      const md_sync &sy, const mc_records &rec, unsigned long long rec_cap,
                      unsigned long long *rows, unsigned long long *totals,
                      const mc_final_args &fin)
{
    void (*k)(mcd_volume, mc_tiling, int, md_sync, mc_records, unsigned long long,
              unsigned long long *, unsigned long long *, mc_final_args) =
        sy.tinfo
            ? (tl.vec ? (v.sg < 0 ? mc_direct_kernel<T, 1, 1, 1> : mc_direct_kernel<T, 0, 1, 1>)
                      : (v.sg < 0 ? mc_direct_kernel<T, 1, 0, 1> : mc_direct_kernel<T, 0, 0, 1>))
        : tl.vec ? (v.sg < 0 ? mc_direct_kernel<T, 1, 1> : mc_direct_kernel<T, 0, 1>)
                 : (v.sg < 0 ? mc_direct_kernel<T, 1, 0> : mc_direct_kernel<T, 0, 0>);
    pmi_launch(pdl, k, (unsigned)tl.ntiles, MC_THREADS, s, v, tl, edges, sy, rec, rec_cap, rows,
               totals, fin);
}

pm_status pmi_mc_direct_classify(pm_context *ctx, const mcd_volume &v, pm_sample_type type,
                                 const mc_tiling &tl, int edges, unsigned int *ticket,
                                 unsigned long long *state, mc_records rec,
                                 unsigned long long rec_cap, unsigned long long *rows,
                                 unsigned long long *totals, const mc_final_args *fin,
                                 const mc_chunks &ch, unsigned hooks, int pdl)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_TRY(mcd_tables_upload(st->device));
    if (type != PM_SAMPLE_U8 && type != PM_SAMPLE_U16 && type != PM_SAMPLE_I16 &&
        type != PM_SAMPLE_F32)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface: no direct classification for %s",
                         pm_sample_type_string(type));
    /* At least one word, and 32-bit values for every count (at most 5
     * triangles a point): a plan's volume (MC_DIRECT_MAX) has them. */
    if (tl.nwords == 0 || tl.nwords > (1ll << 32) / 160)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface: %lld words for the direct classification", tl.nwords);
    /* The caller's states and counters (zeroed, epoch 0), else the context's. */
    md_sync sy = {ticket, 0, state, 0, ticket ? ticket + 2 : NULL, NULL};
    st->md_cleared = ticket != NULL;
    sy.tinfo = edges ? NULL : ch.tile;
    if (!ticket)
        PMI_TRY(md_sync_get(st, (unsigned long long)tl.ntiles, hooks, sy.tinfo != NULL, &sy));
    cudaStream_t s = st->stream;
    unsigned long long *rw = edges ? rows : NULL;
    mc_final_args f;
    memset(&f, 0, sizeof f);
    if (fin) f = *fin;
    switch (type) {
    case PM_SAMPLE_U8:
        md_launch<uint8_t>(s, pdl, v, tl, edges, sy, rec, rec_cap, rw, totals, f);
        break;
    case PM_SAMPLE_U16:
        md_launch<uint16_t>(s, pdl, v, tl, edges, sy, rec, rec_cap, rw, totals, f);
        break;
    case PM_SAMPLE_I16:
        md_launch<int16_t>(s, pdl, v, tl, edges, sy, rec, rec_cap, rw, totals, f);
        break;
    default: md_launch<float>(s, pdl, v, tl, edges, sy, rec, rec_cap, rw, totals, f); break;
    }
    if (sy.tinfo)
        pmi_launch(pdl, md_chunks_scan_kernel, 1, MD_SCAN_THREADS, s, (const uint4 *)sy.tinfo,
                   ch.pre, sy.ctr, (unsigned)tl.ntiles, totals, f);
    pm_status ls = pmi_cuda_launched("pm_isosurface: direct classification");
    if (ls != PM_STATUS_OK && !ticket) st->md_reset = 1;
    return ls;
}

/* Kernel preloading (preload.cu): f32 with 16-byte loads first. */
void pmi_mc_direct_preload(pmi_preload *p, int tier)
{
/* A type's kernels with 16-byte loads (VEC 1) or one sample a load (VEC
 * 0), both inside sides, ordered (CH 0) or chunked (CH 1) records. */
#define MD_KERNELS(T, VEC, CH)                                                                     \
    (const void *)mc_direct_kernel<T, 0, VEC, CH>, (const void *)mc_direct_kernel<T, 1, VEC, CH>
    const void *const k0[] = {MD_KERNELS(float, 1, 0), MD_KERNELS(float, 1, 1),
                              (const void *)md_chunks_scan_kernel};
    const void *const k1[] = {
        MD_KERNELS(uint8_t, 1, 0),  MD_KERNELS(uint16_t, 1, 0), MD_KERNELS(int16_t, 1, 0),
        MD_KERNELS(float, 0, 0),    MD_KERNELS(uint8_t, 0, 0),  MD_KERNELS(uint16_t, 0, 0),
        MD_KERNELS(int16_t, 0, 0),  MD_KERNELS(uint8_t, 1, 1),  MD_KERNELS(uint16_t, 1, 1),
        MD_KERNELS(int16_t, 1, 1),  MD_KERNELS(float, 0, 1),    MD_KERNELS(uint8_t, 0, 1),
        MD_KERNELS(uint16_t, 0, 1), MD_KERNELS(int16_t, 0, 1)};
#undef MD_KERNELS
    if (tier == 0)
        pmi_preload_all(p, k0);
    else
        pmi_preload_all(p, k1);
}
