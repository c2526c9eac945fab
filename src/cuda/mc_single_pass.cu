/* CUDA marching cubes in a single pass over the volume (seed 003 on the
 * GPU, with the HistoPyramid's base level never stored: each tile's counts
 * are scanned in the block and chained to the previous tiles by decoupled
 * look-back, Merrill and Garland 2016). Used when the mesh goes to the
 * caller's device buffers (the per-frame case of simulation codes, and how
 * HP5 is timed), where nothing has to be allocated from the counts.
 *
 * A tile is K consecutive lattice rows of one slice z (rows y0 .. y0+K-1,
 * K * ceil(nx/32) <= 256 bitmask words), numbered in lattice order by an
 * atomic ticket. A block reads the tile's samples once (16-byte loads,
 * rows y0 .. y0+K, the row after for the cells' +y corners), packs them
 * into inside bits, stores its own rows' bits in the global bitmask and
 * takes the bits of slice z - 1 from there (written by the tiles one slice
 * earlier, which have published their state: that slice is also still in
 * L2). It then owns the cells and points of slice z - 1, rows y0 ..: their
 * cases and counts give the tile's aggregate, the look-back its exclusive
 * prefix, and the block writes its outputs in place, one thread per output
 * vertex (a search over the words' prefixes in shared memory), positions
 * and normals computed from the samples around the edge (L1/L2). So the
 * volume is read from memory once and the mesh written once, in the CPU's
 * order (cells, then table order; indexed vertices by lattice point, then
 * x, y, z edge), with the CPU's arithmetic (mc_device.cuh).
 *
 * Indexed triangles refer to vertices of points one slice later, whose
 * numbers are known only when those tiles have run: a second, small kernel
 * writes them from the bitmask and each word's first vertex number. */
#include "cuda/mc_internal.cuh"

MCD_TABLES_UPLOAD

extern "C" {
extern int pmi_mc_profile; /* isosurface.cu: stage times for the benchmark */
extern double pmi_mc_stage_ms[4];
}

#define MCS_NT 256
#define MCS_MAXW 512 /* bitmask words of a tile's cells (of one slice) */

typedef struct mcs_args {
    mcd_volume v;
    long long W;   /* words per row, ceil(nx / 32) */
    long long K;   /* rows per tile */
    long long nyt; /* tiles per slice */
    long long ntiles;
    int indexed, vec;
    unsigned *bits;
    unsigned *ticket;
    /* Look-back states: soup triangles, or indexed vertices (st0);
     * indexed triangles (st1). */
    unsigned long long *st0, *st1;
    unsigned long long *tbase; /* indexed: each tile's first triangle */
    unsigned *wvb;             /* indexed: each word's first vertex (mod 2^32) */
    unsigned long long *totals; /* st0's total, st1's total, active cells */
    float *pos, *nrm;
    unsigned long long vcap; /* vertices that may be written (soup: whole triangles) */
} mcs_args;

/* The masks of word q of the tile (row yl = q / W of slice k = z - 1) from
 * the bits of slice k (lo) and slice k + 1 (hi), rows yl and yl + 1. */
static __device__ __forceinline__ void mcs_word(const unsigned *lo, const unsigned *hi, int q, int W,
                                                long long y0, const mcd_volume &v, bool kz, mc_word &m)
{
    const int yl = q / W, wi = q - yl * W;
    const bool jy = y0 + yl + 1 < v.ny, nxt = wi + 1 < W;
    const int o = yl * W + wi, o1 = o + W;
    unsigned a = lo[o], an = nxt ? lo[o + 1] : 0u, b = 0, bn = 0, c = 0, cn = 0, d = 0, dn = 0;
    if (jy) {
        b = lo[o1];
        bn = nxt ? lo[o1 + 1] : 0u;
    }
    if (kz) {
        c = hi[o];
        cn = nxt ? hi[o + 1] : 0u;
    }
    if (jy && kz) {
        d = hi[o1];
        dn = nxt ? hi[o1 + 1] : 0u;
    }
    mc_make_word(a, an, b, bn, c, cn, d, dn, v.nx, wi, jy, kz, m);
}

/* 16-byte asynchronous copies global -> shared (cp.async, sm_80+): the
 * next tile's samples land in shared memory while the block works on the
 * current one. */
static __device__ __forceinline__ void mcs_cp16(void *smem, const void *gmem)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void mcs_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
static __device__ __forceinline__ void mcs_cp_wait(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Geometry of tile `tile`: slice z, first row y0, rows, rows with the one
 * after, and the 16-byte items of its samples (row r, chunk c of E
 * samples; cpr = W * TPW chunks per row, the last ones past nx empty). */
typedef struct mcs_tile {
    long long z, y0;
    int rows, hrows, items;
} mcs_tile;

static __device__ __forceinline__ mcs_tile mcs_tile_of(const mcs_args &a, long long tile, int cpr)
{
    mcs_tile g;
    g.z = tile / a.nyt;
    g.y0 = (tile - g.z * a.nyt) * a.K;
    g.rows = (int)min(a.K, a.v.ny - g.y0);
    g.hrows = (int)min(a.K + 1, a.v.ny - g.y0);
    g.items = g.z < a.v.nz ? g.hrows * cpr : 0;
    return g;
}

/* Starts the copies of a tile's samples into buf (item i at buf[i]). */
template <typename T>
static __device__ __forceinline__ void mcs_fetch(const mcs_args &a, const mcs_tile &g, int cpr, uint4 *buf)
{
    constexpr int E = 16 / (int)sizeof(T);
    const mcd_volume &v = a.v;
    const T *sl = (const T *)v.data + g.z * v.ss + g.y0 * v.rs;
    for (int i = threadIdx.x; i < g.items; i += MCS_NT) {
        const int r = i / cpr, c = i - r * cpr;
        const long long x = (long long)c * E;
        const int cnt = (int)max(0ll, min((long long)E, v.nx - x));
        const T *p = sl + r * v.rs + x;
        if (a.vec && cnt == E) {
            mcs_cp16(buf + i, p);
        } else if (cnt > 0) {
            union {
                uint4 u;
                T s[E];
            } w;
            w.u = make_uint4(0, 0, 0, 0);
            for (int e = 0; e < cnt; e++) w.s[e] = __ldg(p + e);
            buf[i] = w.u;
        }
    }
    mcs_cp_commit();
}

/* Persistent blocks (as many as fit on the device); each takes tiles in
 * ticket order, one ahead: the next tile's samples are being copied while
 * the block classifies, chains and writes the current one. */
template <typename T, int MODE>
__global__ void __launch_bounds__(MCS_NT, 2) mcs_kernel(mcs_args a)
{
    constexpr int E = 16 / (int)sizeof(T), TPW = 32 / E;
    extern __shared__ uint4 s_buf[];
    __shared__ unsigned s_lo[2 * MCS_MAXW], s_hi[2 * MCS_MAXW];
    __shared__ unsigned s_wp[MCS_MAXW];
    __shared__ unsigned long long s_warp[MCS_NT / 32];
    __shared__ unsigned long long s_base[2];
    __shared__ long long s_next;
    __shared__ unsigned s_cells;
    __shared__ uint8_t s_nt[256];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const mcd_volume &v = a.v;
    const int W = (int)a.W, cpr = W * TPW;
    s_nt[t] = mcd_tri_count[t];
    if (t == 0) s_next = atomicAdd(a.ticket, 1u);
    __syncthreads();
    long long tile = s_next;
    if (tile < a.ntiles) mcs_fetch<T>(a, mcs_tile_of(a, tile, cpr), cpr, s_buf);
    while (tile < a.ntiles) {
        const mcs_tile g = mcs_tile_of(a, tile, cpr);
        const long long z = g.z, y0 = g.y0, row0 = z * v.ny + y0; /* bitmask row of the first */
        const int rows = g.rows, hrows = g.hrows;
        mcs_cp_wait();
        if (t == 0) {
            s_next = atomicAdd(a.ticket, 1u);
            s_cells = 0;
        }
        __syncthreads();

        /* 1. Inside bits of slice z, rows y0 .. y0 + hrows - 1 (s_hi); the
         * tile's own rows go to the bitmask for the tiles of slice z + 1. */
        for (int i0 = 0; i0 < g.items; i0 += MCS_NT) {
            const int i = i0 + t, r = i / cpr, c = i - r * cpr;
            const long long x = (long long)c * E;
            const int cnt = i < g.items ? (int)max(0ll, min((long long)E, v.nx - x)) : 0;
            union {
                uint4 u;
                T s[E];
            } w;
            w.u = cnt ? s_buf[i] : make_uint4(0, 0, 0, 0);
            unsigned m = 0;
#pragma unroll
            for (int e = 0; e < E; e++) m |= (e < cnt ? mcd_inside_t<T>(v, w.s[e]) : 0u) << e;
            if (TPW < 32) m <<= E * (lane % TPW);
#pragma unroll
            for (int o = 1; o < TPW; o <<= 1) m |= __shfl_xor_sync(0xffffffffu, m, o);
            if (lane % TPW == 0 && i < g.items) s_hi[i / TPW] = m;
        }
        __syncthreads();
        const long long next = s_next;
        if (next < a.ntiles) mcs_fetch<T>(a, mcs_tile_of(a, next, cpr), cpr, s_buf);
        if (z < v.nz) {
            for (int q = t; q < rows * W; q += MCS_NT) a.bits[row0 * W + q] = s_hi[q];
            /* Bits ready: state 1 (no flag: the look-back still waits), so
             * the tiles of slice z + 1 need not wait for this tile's
             * classification, which waits for slice z - 1. */
            __threadfence();
            __syncthreads();
            if (t == 0) pmi_tile_publish(a.st0 + tile, 1ull);
        }

        /* 2. Slice z - 1, rows y0 .. y0 + hrows - 1 (s_lo), once the tiles
         * that wrote them (one slice back: tile - nyt, and tile - nyt + 1
         * for the row after) have said so (any nonzero state). */
        const bool cells_z = z >= 1, kz = z < v.nz;
        if (cells_z) {
            if (t == 0) {
                const long long p = tile - a.nyt;
                while (*(volatile unsigned long long *)(a.st0 + p) == 0) __nanosleep(64);
                if (hrows > rows)
                    while (*(volatile unsigned long long *)(a.st0 + p + 1) == 0) __nanosleep(64);
                __threadfence();
            }
            __syncthreads();
            const unsigned *src = a.bits + (row0 - v.ny) * W;
            for (int q = t; q < hrows * W; q += MCS_NT) s_lo[q] = __ldcg(src + q);
        }
        __syncthreads();

        /* 3. Counts of the words of slice z - 1, rows y0 .. y0 + rows - 1:
         * thread t takes words t * P .. t * P + P - 1, so thread order is
         * lattice order. Soup: triangles; indexed: vertices | triangles << 32. */
        const int nw = cells_z ? rows * W : 0, P = (nw + MCS_NT - 1) / MCS_NT;
        unsigned long long mine = 0;
        unsigned wc[MCS_MAXW / MCS_NT], cells = 0;
#pragma unroll
        for (int j = 0; j < MCS_MAXW / MCS_NT; j++) {
            const int q = t * P + j;
            wc[j] = 0;
            if (j < P && q < nw) {
                mc_word m;
                mcs_word(s_lo, s_hi, q, W, y0, v, kz, m);
                unsigned mix = mc_mixed(m), nt = 0;
                cells += __popc(mix);
                while (mix) {
                    const int p = __ffs(mix) - 1;
                    mix &= mix - 1;
                    nt += s_nt[mc_case(m, p)];
                }
                if (a.indexed) {
                    const unsigned vc = __popc(m.xc) + __popc(m.yc) + __popc(m.zc);
                    wc[j] = vc;
                    mine += vc | (unsigned long long)nt << 32;
                } else {
                    wc[j] = 3 * nt;
                    mine += nt;
                }
            }
        }
        for (int o = 16; o; o >>= 1) cells += __shfl_xor_sync(0xffffffffu, cells, o);
        if (lane == 0 && cells) atomicAdd(&s_cells, cells);
        unsigned long long incl = mine;
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned long long y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) s_warp[warp] = incl;
        __syncthreads();
        unsigned long long agg = 0, excl = incl - mine;
#pragma unroll
        for (int w = 0; w < MCS_NT / 32; w++) {
            const unsigned long long sw = s_warp[w];
            if (w < warp) excl += sw;
            agg += sw;
        }
        {
            unsigned run = a.indexed ? (unsigned)excl : 3u * (unsigned)excl;
#pragma unroll
            for (int j = 0; j < MCS_MAXW / MCS_NT; j++) {
                const int q = t * P + j;
                if (j < P && q < nw) s_wp[q] = run;
                run += wc[j];
            }
        }
        const unsigned long long agg0 = a.indexed ? agg & 0xffffffffull : agg, agg1 = agg >> 32;

        /* 4. Publish and look back. */
        if (warp == 0) mc_chain(a.st0, tile, a.ntiles, agg0, &s_base[0], &a.totals[0]);
        else if (warp == 1 && a.indexed) mc_chain(a.st1, tile, a.ntiles, agg1, &s_base[1], &a.totals[1]);
        else if (warp == 2 && t == 64 && s_cells) atomicAdd(&a.totals[2], (unsigned long long)s_cells);
        __syncthreads();

        /* 5. Outputs: one thread per vertex of the tile. */
        if (a.indexed) {
            if (t == 0) a.tbase[tile] = s_base[1];
            for (int q = t; q < nw; q += MCS_NT) a.wvb[(row0 - v.ny) * W + q] = (unsigned)(s_base[0] + s_wp[q]);
        }
        const unsigned long long gb = a.indexed ? s_base[0] : 3 * s_base[0];
        const unsigned L = a.indexed ? (unsigned)agg0 : 3u * (unsigned)agg0;
        for (unsigned o = t; o < L; o += MCS_NT) {
            const unsigned long long gv = gb + o;
            if (gv >= a.vcap) break;
            int lo = 0, hi = nw - 1;
            while (lo < hi) {
                const int mid = (lo + hi + 1) >> 1;
                if (s_wp[mid] <= o) lo = mid;
                else hi = mid - 1;
            }
            unsigned off = o - s_wp[lo];
            mc_word m;
            mcs_word(s_lo, s_hi, lo, W, y0, v, kz, m);
            const int yl = lo / W;
            const long long xb = 32ll * (lo - yl * W), y = y0 + yl, k = z - 1;
            long long i, j, kk;
            int axis;
            if (!a.indexed) {
                unsigned mix = mc_mixed(m), cs = 0;
                int p = 0;
                for (;;) {
                    p = __ffs(mix) - 1;
                    mix &= mix - 1;
                    cs = mc_case(m, p);
                    const unsigned n3 = 3u * s_nt[cs];
                    if (off < n3) break;
                    off -= n3;
                }
                const int e = mcd_tri_table[cs][off], c0 = mcd_edge_corner[e][0];
                i = xb + p + mcd_corner[c0][0];
                j = y + mcd_corner[c0][1];
                kk = k + mcd_corner[c0][2];
                axis = mcd_edge_axis[e];
            } else {
                unsigned any = m.xc | m.yc | m.zc, cr = 0;
                int p = 0;
                for (;;) {
                    p = __ffs(any) - 1;
                    any &= any - 1;
                    cr = (m.xc >> p & 1) | (m.yc >> p & 1) << 1 | (m.zc >> p & 1) << 2;
                    const unsigned n = __popc(cr);
                    if (off < n) break;
                    off -= n;
                }
                axis = 0;
                for (; axis < 3; axis++)
                    if (cr >> axis & 1) {
                        if (off == 0) break;
                        off--;
                    }
                i = xb + p;
                j = y;
                kk = k;
            }
            float pp[3], nn[3];
            mcd_vertex<T, MODE>(v, i, j, kk, axis, pp, nn);
            mc_store(a.pos, a.nrm, gv, pp, nn);
        }
        __syncthreads(); /* s_lo, s_hi, s_wp, s_base are the next tile's */
        tile = next;
    }
}

/* Indexed triangles of the tiles of slices 1 .. nz - 1 (the cells of slice
 * k = z - 1), in shared memory: the bits of slices k, k + 1, k + 2, rows
 * y0 .. y0 + K + 1 (an owner's +y and +z neighbours), and the first vertex
 * of each word of slices k and k + 1, rows y0 .. y0 + K (written by the
 * single pass). The block counts its words' triangles again, scans them
 * from the tile's first triangle, and writes one triangle per thread: its
 * cell by a search over the words' prefixes, each edge's vertex as its
 * owner word's first vertex plus the crossings before it in the word. */
__global__ void __launch_bounds__(MCS_NT) mcs_triangle_kernel(mcs_args a, uint32_t *idx, unsigned long long tcap)
{
    __shared__ unsigned s_b[3 * 3 * MCS_MAXW]; /* bits: [slice 0..2][row 0..K+1][word] */
    __shared__ unsigned s_v[2 * 2 * MCS_MAXW]; /* first vertices: [slice 0..1][row 0..K][word] */
    __shared__ unsigned s_tp[MCS_MAXW];
    __shared__ unsigned s_warp[MCS_NT / 32];
    __shared__ uint8_t s_nt[256];
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const mcd_volume &v = a.v;
    s_nt[t] = mcd_tri_count[t];
    const long long tile = a.nyt + blockIdx.x, z = tile / a.nyt, y0 = (tile - z * a.nyt) * a.K, k = z - 1;
    const int W = (int)a.W, rows = (int)min(a.K, v.ny - y0), nw = rows * W, P = (nw + MCS_NT - 1) / MCS_NT;
    const int br = (int)min(a.K + 2, v.ny - y0), vr = (int)min(a.K + 1, v.ny - y0);
    const int ns = (int)min(3ll, v.nz - k); /* slices present: k, k + 1 (z < nz), k + 2 */
    const long long w0 = (k * v.ny + y0) * a.W, sw = v.ny * a.W;
    for (int sl = 0; sl < ns; sl++)
        for (int q = t; q < br * W; q += MCS_NT) s_b[sl * br * W + q] = __ldg(a.bits + w0 + sl * sw + q);
    for (int sl = 0; sl < 2; sl++)
        for (int q = t; q < vr * W; q += MCS_NT) s_v[sl * vr * W + q] = __ldg(a.wvb + w0 + sl * sw + q);
    __syncthreads();

    /* Counts per word, thread order = lattice order. */
    unsigned wc[MCS_MAXW / MCS_NT], mine = 0;
#pragma unroll
    for (int jj = 0; jj < MCS_MAXW / MCS_NT; jj++) {
        const int q = t * P + jj;
        wc[jj] = 0;
        if (jj < P && q < nw) {
            mc_word m;
            mcs_word(s_b, s_b + br * W, q, W, y0, v, true, m);
            unsigned mix = mc_mixed(m);
            while (mix) {
                const int p = __ffs(mix) - 1;
                mix &= mix - 1;
                wc[jj] += s_nt[mc_case(m, p)];
            }
            mine += wc[jj];
        }
    }
    unsigned incl = mine;
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
    }
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    unsigned run = incl - mine, total = 0;
#pragma unroll
    for (int w = 0; w < MCS_NT / 32; w++) {
        if (w < warp) run += s_warp[w];
        total += s_warp[w];
    }
#pragma unroll
    for (int jj = 0; jj < MCS_MAXW / MCS_NT; jj++) {
        const int q = t * P + jj;
        if (jj < P && q < nw) s_tp[q] = run;
        run += wc[jj];
    }
    __syncthreads();

    const unsigned long long tb = __ldg(a.tbase + tile);
    for (unsigned l = t; l < total; l += MCS_NT) {
        const unsigned long long g = tb + l;
        if (g >= tcap) break;
        int lo = 0, hi = nw - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (s_tp[mid] <= l) lo = mid;
            else hi = mid - 1;
        }
        unsigned off = l - s_tp[lo];
        mc_word m;
        mcs_word(s_b, s_b + br * W, lo, W, y0, v, true, m);
        const int yl = lo / W, wi = lo - yl * W;
        unsigned mix = mc_mixed(m), cs = 0;
        int p = 0;
        for (;;) {
            p = __ffs(mix) - 1;
            mix &= mix - 1;
            cs = mc_case(m, p);
            const unsigned n = s_nt[cs];
            if (off < n) break;
            off -= n;
        }
#pragma unroll
        for (int c = 0; c < 3; c++) {
            const int e = mcd_tri_table[cs][3 * off + c], c0 = mcd_edge_corner[e][0], ax = mcd_edge_axis[e];
            /* The owner: row yl + dy of slice dz (tile-relative), point p + dx. */
            const int px = p + mcd_corner[c0][0], oy = yl + mcd_corner[c0][1], oz = mcd_corner[c0][2];
            const int ow = wi + (px >> 5), bit = px & 31;
            const unsigned *row = s_b + (oz * br + oy) * W;
            const bool jy = y0 + oy + 1 < v.ny, kz = k + oz + 1 < v.nz, nxt = ow + 1 < W;
            const unsigned aw = row[ow], an = nxt ? row[ow + 1] : 0u;
            const long long left = v.nx - 32ll * ow;
            const unsigned pv = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
            const unsigned xv = left > 32 ? 0xffffffffu : (1u << (left - 1)) - 1u;
            const unsigned xc = (aw ^ (aw >> 1 | an << 31)) & xv;
            const unsigned yc = jy ? (aw ^ row[ow + W]) & pv : 0u;
            const unsigned zc = kz ? (aw ^ row[ow + br * W]) & pv : 0u;
            const unsigned below = (1u << bit) - 1u;
            unsigned rank = __popc(xc & below) + __popc(yc & below) + __popc(zc & below);
            if (ax >= 1) rank += xc >> bit & 1;
            if (ax == 2) rank += yc >> bit & 1;
            idx[3 * g + c] = s_v[(oz * vr + oy) * W + ow] + rank;
        }
    }
}

/* Tile words (K * W): 512 (16384 points), 256 for f64; the samples of a
 * tile and its row after must fit MCS_SMEM bytes of shared memory. */
#define MCS_SMEM (96 * 1024)
static long long mcs_tile_words(pm_sample_type type)
{
    /* PYRAMESH_CUDA_MCS_TW=64..512: other tile sizes, an experiment. */
    const char *e = getenv("PYRAMESH_CUDA_MCS_TW");
    if (e) {
        const long long w = atoll(e);
        if (w >= 32 && w <= MCS_MAXW) return w;
    }
    return type == PM_SAMPLE_F64 ? 256 : MCS_MAXW;
}

template <typename T, int MODE>
static pm_status mcs_go(const pmi_cuda_state *st, unsigned long long ntiles, size_t smem, const mcs_args &a)
{
    cudaError_t e = cudaFuncSetAttribute(mcs_kernel<T, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int per_sm = 0;
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mcs_kernel<T, MODE>, MCS_NT, smem);
    if (e != cudaSuccess) return pmi_cuda_status(e, "pm_isosurface: single pass setup");
    unsigned long long grid = (unsigned long long)(per_sm > 0 ? per_sm : 1) * (unsigned long long)st->num_sms;
    if (grid > ntiles) grid = ntiles;
    mcs_kernel<T, MODE><<<(unsigned)grid, MCS_NT, smem, st->stream>>>(a);
    return pmi_cuda_launched("pm_isosurface: single pass");
}

template <typename T>
static pm_status mcs_launch_type(const pmi_cuda_state *st, pm_normals mode, unsigned long long ntiles, size_t smem,
                                 const mcs_args &a)
{
    switch (mode) {
    case PM_NORMALS_FORWARD: return mcs_go<T, PM_NORMALS_FORWARD>(st, ntiles, smem, a);
    case PM_NORMALS_SOBEL: return mcs_go<T, PM_NORMALS_SOBEL>(st, ntiles, smem, a);
    case PM_NORMALS_NONE: return mcs_go<T, PM_NORMALS_NONE>(st, ntiles, smem, a);
    default: return mcs_go<T, PM_NORMALS_CENTRAL>(st, ntiles, smem, a);
    }
}

/* Rows per tile and shared memory bytes of the tile's samples. */
static void mcs_shape(long long nx, long long ny, pm_sample_type type, long long *K, size_t *smem)
{
    const long long W = (nx + 31) / 32, tw = mcs_tile_words(type);
    long long k = W <= tw ? tw / W : 1;
    if (k > ny) k = ny;
    if (k < 1) k = 1;
    *K = k;
    *smem = (size_t)(k + 1) * (size_t)W * 32 * pm_sample_size(type);
}

int mc_single_pass_fits(const pm_volume *vol)
{
    long long K;
    size_t smem;
    if ((vol->nx + 31) / 32 > MCS_MAXW) return 0;
    mcs_shape((long long)vol->nx, (long long)vol->ny, vol->type, &K, &smem);
    return smem <= MCS_SMEM;
}

pm_status mc_single_pass(pm_context *ctx, const mcd_volume &v, pm_sample_type type, pm_normals normals, int indexed,
                         float *pos, float *nrm, uint32_t *idx, unsigned long long vcap, unsigned long long tcap,
                         unsigned long long tot[3])
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    PMI_TRY(mcd_tables_upload(st->device));
    tot[0] = tot[1] = tot[2] = 0;
    if (v.nx == 0 || v.ny == 0 || v.nz == 0) return PM_STATUS_OK;
    mcs_args a;
    memset(&a, 0, sizeof a);
    a.v = v;
    a.W = (v.nx + 31) / 32;
    size_t smem;
    mcs_shape(v.nx, v.ny, type, &a.K, &smem);
    a.nyt = (v.ny + a.K - 1) / a.K;
    a.indexed = indexed;
    /* Soup needs no tiles past the last slice; indexed meshes one row of
     * tiles more for the vertices of slice nz - 1. */
    unsigned long long ntiles;
    size_t nrowsw, bits_b;
    if (__builtin_mul_overflow((unsigned long long)a.nyt, (unsigned long long)v.nz + (indexed ? 1 : 0), &ntiles) ||
        ntiles > 0x7fffffffull ||
        __builtin_mul_overflow((size_t)v.ny * (size_t)v.nz, (size_t)a.W, &nrowsw) ||
        nrowsw > ((size_t)1 << 60))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: the volume is too large for the GPU tiling");
    a.ntiles = (long long)ntiles;
    bits_b = pmi_align256(nrowsw * 4 + 16);
    const size_t es = pm_sample_size(type);
    a.vec = ((uintptr_t)v.data % 16) == 0 && (v.rs * (long long)es) % 16 == 0 && (v.ss * (long long)es) % 16 == 0;
    const size_t st_b = pmi_align256((size_t)ntiles * 8);
    const size_t head_b = 256 + st_b * (indexed ? 2 : 1);
    const size_t bytes = head_b + (indexed ? st_b + bits_b : 0) + bits_b;
    char *base = NULL;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&base));
    a.ticket = (unsigned *)base;
    a.totals = (unsigned long long *)(base + 64);
    a.st0 = (unsigned long long *)(base + 256);
    a.st1 = indexed ? (unsigned long long *)(base + 256 + st_b) : NULL;
    char *q = base + head_b;
    if (indexed) {
        a.tbase = (unsigned long long *)q;
        q += st_b;
        a.wvb = (unsigned *)q;
        q += bits_b;
    }
    a.bits = (unsigned *)q;
    a.pos = pos;
    a.nrm = nrm;
    a.vcap = pos ? vcap : 0;
    /* Experiment for the benchmark: PYRAMESH_CUDA_MCS=noemit counts only
     * (no vertex or triangle written), to time the pass without its output. */
    {
        const char *e = getenv("PYRAMESH_CUDA_MCS");
        if (e && !strcmp(e, "noemit")) {
            a.vcap = 0;
            tcap = 0;
        }
    }
    cudaEvent_t ev[3] = {NULL, NULL, NULL};
    if (pmi_mc_profile)
        for (int e = 0; e < 3; e++) cudaEventCreate(&ev[e]);
    if (ev[0]) cudaEventRecord(ev[0], s);
    PMI_CU_TRY(cudaMemsetAsync(base, 0, head_b, s), "pm_isosurface: clearing tile states");
    pm_status ls = PM_STATUS_OK;
    switch (type) {
    case PM_SAMPLE_U8: ls = mcs_launch_type<uint8_t>(st, normals, ntiles, smem, a); break;
    case PM_SAMPLE_U16: ls = mcs_launch_type<uint16_t>(st, normals, ntiles, smem, a); break;
    case PM_SAMPLE_I16: ls = mcs_launch_type<int16_t>(st, normals, ntiles, smem, a); break;
    case PM_SAMPLE_F32: ls = mcs_launch_type<float>(st, normals, ntiles, smem, a); break;
    case PM_SAMPLE_F64: ls = mcs_launch_type<double>(st, normals, ntiles, smem, a); break;
    }
    if (ev[1]) cudaEventRecord(ev[1], s);
    if (ls == PM_STATUS_OK && indexed && idx && tcap && v.nz >= 2) {
        mcs_triangle_kernel<<<(unsigned)(a.nyt * (v.nz - 1)), MCS_NT, 0, s>>>(a, idx, tcap);
        ls = pmi_cuda_launched("pm_isosurface: triangles");
    }
    if (ev[2]) cudaEventRecord(ev[2], s);
    if (ls == PM_STATUS_OK) {
        cudaError_t e = cudaMemcpyAsync(tot, a.totals, 3 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s);
        if (e != cudaSuccess) ls = pmi_cuda_status(e, "pm_isosurface: reading counts");
    }
    pm_status ws = pmi_cuda_wait(ctx, "pm_isosurface: single pass");
    if (ev[0]) {
        /* Stages: the single pass, the triangle kernel (pass 1, pass 2). */
        float p1 = 0, p2 = 0;
        cudaEventElapsedTime(&p1, ev[0], ev[1]);
        cudaEventElapsedTime(&p2, ev[1], ev[2]);
        pmi_mc_stage_ms[0] = p1;
        pmi_mc_stage_ms[1] = p2;
        pmi_mc_stage_ms[2] = pmi_mc_stage_ms[3] = 0;
        for (int e = 0; e < 3; e++) cudaEventDestroy(ev[e]);
        cudaGetLastError();
    }
    return ls != PM_STATUS_OK ? ls : ws;
}
