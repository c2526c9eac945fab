/* CUDA marching cubes, pass 2: the expansion of the records that pass 1
 * (mc_stream.cu, mc_classify.cu) left compacted in lattice order, with
 * exact prefixes of their triangles and owned-edge crossings, into the
 * mesh. The vertices, the soup and the indexed triangles take blocks of
 * records, whose outputs are a contiguous range, each record listing its
 * outputs at its prefix in shared memory, so that consecutive threads
 * write consecutive outputs. An indexed triangle's vertex is its edge's
 * owner's crossing prefix; the owners in other lattice rows are found by
 * a search among that row's records, from the row table (each lattice
 * row's first record). A thread reads the few samples around its edge and
 * writes position and normal, so the writes are coalesced and the reads
 * stay in L1/L2. Output order and arithmetic are the CPU backend's, bit
 * for bit. */
#include <type_traits>
#include "cuda/mc_internal.cuh"
#include "cuda/mc_words.cuh"

MCD_TABLES_UPLOAD

/* nrec and the output limit from dc (pm_isosurface_async), or return when
 * its counts did not fit. */
#define MC_DCOUNTS_LOAD(limit, dc_limit)                                                           \
    if (dc) {                                                                                      \
        if (!dc->ok) return;                                                                       \
        nrec = (long long)dc->nrec;                                                                \
        limit = (dc_limit);                                                                        \
    }

/* The kernels' outputs from dc; returns when the block has none
 * (block-uniform, before any barrier). */
#define MC_DCOUNTS(nout_expr)                                                                      \
    do {                                                                                           \
        MC_DCOUNTS_LOAD(nout, nout_expr)                                                           \
        if ((unsigned long long)blockIdx.x * blockDim.x >= nout) return;                           \
    } while (0)

/* The same for the kernels that take blocks of `per` records: nrec and the
 * output limit from dc; returns when the block has no record. Defines r0,
 * the block's first record. */
#define MC_DCOUNTS_RECORDS(limit, dc_limit, per)                                                   \
    MC_DCOUNTS_LOAD(limit, dc_limit)                                                               \
    const long long r0 = (long long)blockIdx.x * (per);                                            \
    if (r0 >= nrec) return /* block-uniform, before any barrier */

static __device__ __forceinline__ void mc_point_ijk(const mcd_volume &v, unsigned long long p,
                                                    long long *i, long long *j, long long *k)
{
    if ((p | (unsigned long long)v.nx | (unsigned long long)v.ny) >> 32 ==
        0) { /* 32-bit divisions */
        const unsigned nx = (unsigned)v.nx, ny = (unsigned)v.ny, row = (unsigned)p / nx,
                       kk = row / ny;
        *i = (long long)((unsigned)p - row * nx);
        *k = (long long)kk;
        *j = (long long)(row - kk * ny);
        return;
    }
    unsigned long long row = p / (unsigned long long)v.nx;
    *i = (long long)(p - row * (unsigned long long)v.nx);
    *k = (long long)(row / (unsigned long long)v.ny);
    *j = (long long)(row - (unsigned long long)*k * (unsigned long long)v.ny);
}

static __device__ __forceinline__ void mc_store(float *pos, float *nrm, unsigned long long o,
                                                const float p[3], const float n[3])
{
    pos[3 * o] = p[0];
    pos[3 * o + 1] = p[1];
    pos[3 * o + 2] = p[2];
    if (nrm) {
        nrm[3 * o] = n[0];
        nrm[3 * o + 1] = n[1];
        nrm[3 * o + 2] = n[2];
    }
}

/* Soup from the cells (MC_SOUP_CELLS, every soup: faster at every size
 * than computing the indexed vertices and gathering them, since the
 * kernel waits on its loads more than on its arithmetic): block b takes records
 * [R b, R (b + 1)) (few records per block, mc_cell_recs: more
 * warps to hide the latencies of small volumes), whose triangles are a
 * contiguous range (records without triangles, of a classification with
 * edges, take no part). Each record lists its triangles at its prefix in
 * shared memory, with its point split into (i, j, k); thread u of the
 * range's soup vertices reads its record there and computes the vertex of
 * its corner's edge from the edge's owner point and axis, both from one
 * load of mcd_tri_origin (as the indexed vertices: the same function of
 * the same edge, so the same bits). One
 * kernel, no search, no vertex scratch, but an edge shared by n triangles
 * is computed n times. Vertices from nvout on are not written. */
/* Records per block of mc_soup_cell_kernel: 80 (about 480 corners, two
 * per thread) up to MC_CELL_SMALL points, where the blocks of a 128^3
 * volume fit one wave; 128 above, where the blocks' set-up weighs more
 * than the waves (measured on the H100, bench/RESULTS-cudamc.md). */
#define MC_CELL_RECS_SMALL 80
#define MC_CELL_RECS_LARGE 128
#define MC_CELL_SMALL (1ull << 22)
/* Records per block: small up to limit points, large above. */
static int mc_recs_by_points(const mcd_volume &v, unsigned long long limit, int small, int large)
{
    const unsigned long long n =
        (unsigned long long)v.nx * (unsigned long long)v.ny * (unsigned long long)v.nz;
    return n <= limit ? small : large;
}
static int mc_cell_recs(const mcd_volume &v)
{
    return mc_recs_by_points(v, MC_CELL_SMALL, MC_CELL_RECS_SMALL, MC_CELL_RECS_LARGE);
}
/* Records per block of mc_soup_chunk_kernel: 128 up to MC_CHUNK_BIG
 * points, 256 above, where fewer blocks wait fewer times for the chunks'
 * prefixes (measured on the H100, bench/RESULTS-cudamc.md). */
#define MC_CHUNK_RECS_LARGE 256
#define MC_CHUNK_BIG (1ull << 24)
static int mc_chunk_recs(const mcd_volume &v)
{
    return mc_recs_by_points(v, MC_CHUNK_BIG, MC_CELL_RECS_LARGE, MC_CHUNK_RECS_LARGE);
}
/* Blocks of mc_soup_cell_kernel for n records of R a block (at least one
 * launched). */
static unsigned long long mc_cell_blocks(unsigned long long n, int R)
{
    return n ? (n + (unsigned long long)R - 1) / (unsigned long long)R : 1;
}
/* A block's records in shared memory: each one's point split once, its
 * cell's case, its first triangle in the block (tp), and the record of
 * each of the block's triangles. */
template <int R> struct mc_soup_block {
    static_assert(R <= 256, "a record's number in the block fits a byte");
    long long ijk[3][R];
    unsigned tp[R];
    uint8_t cs[R];
    uint8_t own[5 * R];
    unsigned total;
};
/* A record (its info and point words) into slot t of the block: its
 * point and case; returns its triangles. */
template <int R>
static __device__ __forceinline__ unsigned mc_soup_record(const mcd_volume &v, unsigned info,
                                                          unsigned long long point,
                                                          mc_soup_block<R> &sb, int t)
{
    mc_point_ijk(v, point, &sb.ijk[0][t], &sb.ijk[1][t], &sb.ijk[2][t]);
    sb.cs[t] = (uint8_t)(info & 255u);
    return info >> 11 & 7u;
}
/* Lists the block's triangles: record t (of nvalid) has nt of them from
 * its block prefix tp. Ends with a barrier. */
template <int R>
static __device__ __forceinline__ void mc_soup_list(mc_soup_block<R> &sb, int t, int nvalid,
                                                    unsigned tp, unsigned nt)
{
    if (t < nvalid) {
        sb.tp[t] = tp;
        for (unsigned k = 0; k < nt; k++)
            sb.own[tp + k] = (uint8_t)t;
        if (t == nvalid - 1) sb.total = tp + nt;
    }
    __syncthreads();
}
/* Soup vertex u of the block (corner m of the block's triangle u / 3,
 * triangle k of record a): its position and normal. */
template <typename T, int MODE, int R>
static __device__ __forceinline__ void
mc_soup_corner(const mcd_volume &v, const mc_soup_block<R> &sb, unsigned u, int *a, unsigned *k,
               unsigned *m, float p[3], float n[3])
{
    const unsigned lt = u / 3;
    *m = u - 3 * lt;
    *a = sb.own[lt];
    *k = lt - sb.tp[*a];
    const unsigned eo = mcd_tri_origin[sb.cs[*a]][3 * *k + *m];
    mcd_vertex<T, MODE>(v, sb.ijk[0][*a] + MCD_ORIGIN_DX(eo), sb.ijk[1][*a] + MCD_ORIGIN_DY(eo),
                        sb.ijk[2][*a] + MCD_ORIGIN_DZ(eo), MCD_ORIGIN_AXIS(eo), p, n);
}
/* Records in lattice order: a block's triangles are one range, from its
 * first record's prefix. */
template <typename T, int MODE, int R>
static __global__ void __launch_bounds__(MC_THREADS)
    mc_soup_cell_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout,
                        float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ mc_soup_block<R> sb;
    MC_DCOUNTS_RECORDS(nvout, 3 * dc->ntri, R);
    const int t = threadIdx.x, nvalid = (int)min((long long)R, nrec - r0);
    const unsigned long long T0 = __ldg(rec.tri + r0);
    unsigned nt = 0, tp = 0;
    if (t < nvalid) {
        tp = (unsigned)(__ldg(rec.tri + r0 + t) - T0);
        nt = mc_soup_record(v, __ldg(rec.info + r0 + t), __ldg(rec.point + r0 + t), sb, t);
    }
    mc_soup_list(sb, t, nvalid, tp, nt);
    const unsigned n3 = 3 * sb.total;
    for (unsigned u = t; u < n3; u += MC_THREADS) {
        const unsigned long long o = 3 * T0 + u;
        if (o >= nvout) break; /* o grows with u */
        int a;
        unsigned k, m;
        float p[3], n[3];
        mc_soup_corner<T, MODE>(v, sb, u, &a, &k, &m, p, n);
        mc_store(pos, nrm, o, p, n);
    }
}

/* Cell edges by number (mcd_tri_edge): the edges of the cell's -x face
 * are 4, 6, 8 and 10; the cell at x - 1 has them as 5, 7, 9 and 11. */
#define MC_EDGES_MINUS_X 0x550u
/* Vertices computed at once by a block of pooled records (shared memory:
 * 24 bytes each with normals). */
#define MC_POOL_SLOTS 1024

/* The pooled soup kernel's vertices and corners (mc_soup_chunk_kernel with
 * POOL, after its triangles are listed; tri: thread t's record's
 * segment << 16 | its first triangle there). Each
 * vertex of the block is computed once: a record takes a slot for each
 * cell edge its triangles use, but for the edges of its -x face when the
 * record before it is the cell at x - 1 of the same row (that cell uses
 * the same crossed edges, as its +x face); the slots are computed into
 * shared memory, MC_POOL_SLOTS at a time, and each corner copies its
 * edge's slot. The same mcd_vertex of the same edge as per corner, so
 * the same bits. Before the wait: everything but the mesh's prefixes and
 * the counts (written by the segment scan). */
template <typename T, int MODE, int R>
static __device__ __forceinline__ void
mc_pool_corners(const mcd_volume &v, const mc_soup_block<R> &sb, int nvalid, unsigned long long tri,
                const mc_pool_recs &pp, const mc_dcounts *dc, unsigned long long nvout, float *pos,
                float *nrm, unsigned long long *gt)
{
    constexpr int NF = MODE == PM_NORMALS_NONE ? 3 : 6;
    __shared__ uint16_t s_own[R], s_take[R], s_base[R], s_slot[MC_POOL_SLOTS];
    __shared__ uint16_t s_cq[3 * 5 * R]; /* each corner's slot (a record has at most 5 triangles) */
    __shared__ unsigned s_w[MC_THREADS / 32];
    __shared__ float s_v[MC_POOL_SLOTS][NF];
    const int t = threadIdx.x;
    /* The edges each record's triangles use. */
    unsigned used = 0;
    if (t < nvalid) {
        used = __ldg(&mcd_case_edges[sb.cs[t]]);
        s_own[t] = (uint16_t)used;
    }
    __syncthreads();
    unsigned take = 0;
    if (t < nvalid && t > 0 && sb.ijk[0][t - 1] + 1 == sb.ijk[0][t] &&
        sb.ijk[1][t - 1] == sb.ijk[1][t] && sb.ijk[2][t - 1] == sb.ijk[2][t])
        take = used & MC_EDGES_MINUS_X & ((unsigned)s_own[t - 1] >> 1);
    const unsigned own = used & ~take, cnt = __popc(own);
    /* The records' first slots (a block scan) and the block's slots. */
    const unsigned inc = mc_warp_scan(cnt);
    if ((t & 31) == 31) s_w[t >> 5] = inc;
    __syncthreads();
    unsigned base = inc - cnt, total = 0;
    for (int w = 0; w < MC_THREADS / 32; w++) {
        if (w < (t >> 5)) base += s_w[w];
        total += s_w[w];
    }
    if (t < R) {
        s_own[t] = (uint16_t)own;
        s_take[t] = (uint16_t)take;
        s_base[t] = (uint16_t)base;
    }
    const unsigned n3 = 3 * sb.total;
    /* At least one round: every block waits before it ends. */
    for (unsigned s0 = 0; s0 == 0 || s0 < total; s0 += MC_POOL_SLOTS) {
        /* This round's slots: record and edge. */
        if (t < nvalid) {
            unsigned b = base;
            for (unsigned x = own; x; x &= x - 1, b++)
                if (b - s0 < MC_POOL_SLOTS) s_slot[b - s0] = (uint16_t)(t | (__ffs(x) - 1) << 8);
        }
        __syncthreads();
        const unsigned ns = min(total - s0, (unsigned)MC_POOL_SLOTS);
        for (unsigned q = t; q < ns; q += MC_THREADS) {
            const unsigned a = s_slot[q] & 255u, e = s_slot[q] >> 8, axis = e >> 2, r = e & 3u;
            const unsigned dx = axis == 0 ? 0u : r & 1u,
                           dy = axis == 0   ? r & 1u
                                : axis == 1 ? 0u
                                            : r >> 1,
                           dz = axis == 2 ? 0u : r >> 1;
            float p[3], n[3];
            mcd_vertex<T, MODE>(v, sb.ijk[0][a] + dx, sb.ijk[1][a] + dy, sb.ijk[2][a] + dz,
                                (int)axis, p, n);
            for (int c = 0; c < 3; c++) {
                s_v[q][c] = p[c];
                if (NF == 6) s_v[q][3 + c] = n[c];
            }
        }
        if (s0 == 0) {
            /* Each corner's slot, a triangle a thread. */
            for (unsigned lt = t; lt < sb.total; lt += MC_THREADS) {
                const unsigned a = sb.own[lt], k = lt - sb.tp[a], c = sb.cs[a], tk = s_take[a],
                               ow = s_own[a], bs = s_base[a], ap = a ? a - 1 : 0u, owp = s_own[ap],
                               bsp = s_base[ap];
                for (unsigned m = 0; m < 3; m++) {
                    const unsigned e = __ldg(&mcd_tri_edge[c][3 * k + m]);
                    s_cq[3 * lt + m] =
                        (uint16_t)((tk >> e & 1u) ? bsp + __popc(owp & ((2u << e) - 1u))
                                                  : bs + __popc(ow & ((1u << e) - 1u)));
                }
            }
            pmi_pdl_enter();
            /* The counts and the prefixes loaded together. */
            unsigned long long ok = 1, dnt = 0, pg = 0;
            if (dc) {
                ok = __ldcg(&dc->ok);
                dnt = __ldcg(&dc->ntri);
            }
            if (t < nvalid) pg = __ldcg(pp.segtri + (tri >> 16)) + (tri & 0xffffull);
            if (!ok) return; /* block-uniform */
            if (dc) nvout = 3 * dnt;
            if (t < nvalid) gt[t] = pg;
        }
        __syncthreads();
        for (unsigned u = t; u < n3; u += MC_THREADS) {
            const unsigned q = s_cq[u];
            if (q - s0 >= MC_POOL_SLOTS) continue; /* another round's */
            const unsigned lt = u / 3, m = u - 3 * lt, a = sb.own[lt];
            const unsigned long long o = 3 * (gt[a] + (lt - sb.tp[a])) + m;
            if (o >= nvout) continue; /* past the caller's capacity */
            pos[3 * o] = s_v[q - s0][0];
            pos[3 * o + 1] = s_v[q - s0][1];
            pos[3 * o + 2] = s_v[q - s0][2];
            if (NF == 6 && nrm) {
                nrm[3 * o] = s_v[q - s0][3];
                nrm[3 * o + 1] = s_v[q - s0][4];
                nrm[3 * o + 2] = s_v[q - s0][5];
            }
        }
        __syncthreads(); /* before the next round's slots */
    }
}

/* Chunked records (pmi_mc_direct_classify's ch: the records of each tile
 * together, the tiles in any order), blocks of R (mc_chunk_recs): a
 * record's first triangle is its tile's prefix plus its tile-local one
 * (the tile in the high word), the block's numbered by a scan. The kernel
 * starts while md_chunks_scan_kernel runs (that kernel lets it go once the
 * direct classification has completed). Its first wave of blocks
 * (early_blocks) reads, until pmi_pdl_enter, only what the classification
 * wrote: its records, its tiles' chunks and each thread's first soup
 * vertex. Slot r holds one of this call's records exactly when r lies in
 * the chunk of the tile its record names (the chunks cover the records'
 * slots, so a stale slot that passes was written by this call), so the
 * valid slots are found without the record count. After the wait: the
 * tiles' prefixes and pm_isosurface_async's counts. Later blocks start
 * after the scan has ended in practice: they wait first and read the
 * record count, so a grid sized for generous capacities costs a read a
 * block past the records, not a block's records. Every block waits
 * before it ends (a kernel after this one relies on it).
 * POOL: the records in the streaming classification's pool instead (pp,
 * arrival order), whose triangles start at their segment's prefix plus
 * their own. The kernel before this one is the segment scan (or a host
 * wait), so the pool and its counter, written by the classification
 * before it, are read by every block before its wait (the record count
 * is known: no stale slots); the segments' prefixes and the counts after
 * it. */
template <typename T, int MODE, int R, int POOL>
static __global__ void __launch_bounds__(MC_THREADS, 4)
    mc_soup_chunk_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout,
                         float *pos, float *nrm, const mc_dcounts *dc, mc_chunks ch,
                         mc_pool_recs pp, unsigned early_blocks)
{
    __shared__ mc_soup_block<R> sb;
    /* Each record's first triangle in the mesh; the warps' triangles. */
    __shared__ unsigned long long gt[R];
    static_assert(R % 32 == 0, "whole warps of records");
    __shared__ unsigned wt[R / 32];
    const int t = threadIdx.x;
    const long long r0 = (long long)blockIdx.x * R;
    /* The first wave's blocks (early_blocks) start while the scan runs;
     * the others wait first, then know the record count and the prefixes. */
    const bool early = POOL || blockIdx.x < early_blocks;
    if (POOL) {
        nrec = (long long)min(__ldcg(pp.ctr), pp.cap);
        if (r0 >= nrec) {
            pmi_pdl_enter(); /* block-uniform, before any barrier */
            return;
        }
    } else if (!early) {
        pmi_pdl_enter();
        if (dc) {
            if (!dc->ok) return;
            nrec = (long long)dc->nrec;
            nvout = 3 * dc->ntri;
        }
        if (r0 >= nrec) return; /* block-uniform, before any barrier */
    }
    unsigned long long tri = 0;
    unsigned nt = 0;
    int valid = 0;
    if (POOL && t < R && r0 + t < nrec) {
        /* tri: the record's first triangle in the mesh. */
        const uint4 e = __ldg(pp.pool + r0 + t);
        nt = mc_soup_record(v, e.z & 0xffffu,
                            (unsigned long long)e.x | (unsigned long long)e.y << 32, sb, t);
        /* The record's segment (from its point, split once) and its
         * first triangle there. */
        const unsigned long long row = (unsigned long long)sb.ijk[2][t] * (unsigned long long)v.ny +
                                       (unsigned long long)sb.ijk[1][t];
        tri =
            (row * (unsigned long long)pp.nchunks + ((unsigned long long)sb.ijk[0][t] >> pp.cshift))
                << 16 |
            (e.w & 0xffffu);
        valid = 1;
    } else if (t < R && r0 + t < nrec) {
        /* The record's words are loaded with its triangle word, before
         * the check that needs the latter. */
        const long long r = r0 + t;
        tri = __ldg(rec.tri + r);
        const unsigned info = __ldg(rec.info + r);
        const unsigned long long point = __ldg(rec.point + r);
        const unsigned tile = (unsigned)(tri >> 32);
        if (!early) {
            valid = 1;
            gt[t] = __ldcg(ch.pre + tile) + (tri & 0xffffffffull);
        } else if (tile < ch.ntiles) {
            const uint2 e = __ldg((const uint2 *)(ch.tile + tile));
            valid = (unsigned)r - e.x < e.y;
        }
        if (valid) nt = mc_soup_record(v, info, point, sb, t);
    }
    /* The valid slots are [0, records): a prefix of the block's. */
    const int nvalid = __syncthreads_count(valid);
    if (!nvalid) {
        /* Every block waits before it ends: a kernel that starts after
         * this one may rely on the scan having completed. */
        if (early) pmi_pdl_enter();
        return;
    }
    unsigned tp = 0;
    if (t < R) {
        const unsigned inc = mc_warp_scan(nt);
        tp = inc - nt;
        if ((t & 31) == 31) wt[t >> 5] = inc;
    }
    __syncthreads();
    for (int w = 0; w < (t >> 5) && w < R / 32; w++)
        tp += wt[w];
    mc_soup_list(sb, t, nvalid, tp, nt);
    if constexpr (POOL) {
        mc_pool_corners<T, MODE, R>(v, sb, nvalid, tri, pp, dc, nvout, pos, nrm, gt);
        return;
    }
    const unsigned n3 = 3 * sb.total;
    unsigned u = t, k = 0, m = 0;
    int a = 0;
    float p[3], n[3];
    if (u < n3) mc_soup_corner<T, MODE>(v, sb, u, &a, &k, &m, p, n);
    if (early) {
        pmi_pdl_enter();
        /* The counts and the prefix loaded together. */
        unsigned long long ok = 1, dnt = 0;
        if (dc) {
            ok = __ldcg(&dc->ok);
            dnt = __ldcg(&dc->ntri);
        }
        const unsigned pg = t < nvalid ? __ldcg(ch.pre + (tri >> 32)) : 0u;
        if (!ok) return;
        if (dc) nvout = 3 * dnt;
        if (t < nvalid) gt[t] = pg + (tri & 0xffffffffull);
        __syncthreads();
    }
    for (; u < n3; u += MC_THREADS) {
        if (u != (unsigned)t) mc_soup_corner<T, MODE>(v, sb, u, &a, &k, &m, p, n);
        const unsigned long long o = 3 * (gt[a] + k) + m;
        if (o < nvout) mc_store(pos, nrm, o, p, n); /* else past the caller's capacity */
    }
}

/* Indexed vertices by blocks of records: block b takes records [256 b,
 * 256 b + 256), whose crossings are a contiguous range starting at the
 * first one's prefix. Each record lists its crossings (record and axis) at
 * its prefix in shared memory, so thread u of the range reads its record
 * there (no search, no window of another block's prefixes to wait for),
 * then computes the vertex of the owned edge on that axis.
 * Vertices from nvout on are not written. */
template <typename T, int MODE>
static __global__ void __launch_bounds__(MC_THREADS)
    mc_vertex_block_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout,
                           float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ uint16_t s_own[3 * MC_THREADS]; /* the block's crossings: record | axis << 8 */
    __shared__ unsigned s_total;
    MC_DCOUNTS_RECORDS(nvout, dc->ncross, MC_THREADS);
    const int t = threadIdx.x;
    const long long r = r0 + t;
    const bool valid = r < nrec;
    const unsigned long long C0 = __ldg(rec.cross + r0);
    const unsigned long long cross = valid ? __ldg(rec.cross + r) : 0;
    const unsigned bits = valid ? __ldg(rec.info + r) >> 8 & 7u : 0u;
    /* Each record lists its crossings (at most 3) at its prefix. */
    const unsigned cp = (unsigned)(cross - C0);
    for (unsigned b = bits, q = 0; b; b &= b - 1, q++)
        s_own[cp + q] = (uint16_t)(t | (__ffs(b) - 1) << 8);
    const int nvalid = (int)min((long long)MC_THREADS, nrec - r0);
    if (t == nvalid - 1) s_total = cp + __popc(bits);
    __syncthreads();
    const unsigned n = s_total;
    for (unsigned u = t; u < n; u += MC_THREADS) {
        const unsigned long long o = C0 + u;
        if (o >= nvout) continue;
        const unsigned e = s_own[u];
        const int a = (int)(e & 255u), axis = (int)(e >> 8);
        long long i, j, k;
        mc_point_ijk(v, __ldg(rec.point + r0 + a), &i, &j, &k);
        float p[3], nn[3];
        mcd_vertex<T, MODE>(v, i, j, k, axis, p, nn);
        mc_store(pos, nrm, o, p, nn);
    }
}

/* Lattice row (j + ny*k) of point p: 32-bit division when p and nx fit. */
static __device__ __forceinline__ unsigned long long mc_row_of(const mcd_volume &v,
                                                               unsigned long long p)
{
    const unsigned long long nx = (unsigned long long)v.nx;
    return (p | nx) >> 32 == 0 ? (unsigned long long)((unsigned)p / (unsigned)nx) : p / nx;
}

/* The edges that the cell's triangles take from each lattice row (edge
 * numbers of mcd_tri_edge): row j + 1 (x edge 1, z edges 10 and 11), row
 * k + 1 (x edge 2, y edges 6 and 7), row (j + 1, k + 1) (x edge 3). */
#define MC_EDGES_ROW_Y 0xc02u
#define MC_EDGES_ROW_Z 0x0c4u
#define MC_EDGES_ROW_YZ 0x008u

/* Indexed triangles by blocks of records: each block takes records [256
 * b, 256 b + 256) for b = its index, then every grid's width on (the grid
 * is sized to fill the GPU, not to a capacity); a block's triangles are
 * one range from its first record's prefix. Thread t's record first
 * finds the owners of the edges its triangles use (the lattice point at
 * each edge's lower end): in its own row itself and the next record (the
 * points at x and x + 1); in each other row its triangles use (j + 1, k +
 * 1, both) by one search among that row's records (from the row table)
 * for the first at or past x, which is the owner at x when its point is
 * x, and then the next record is the owner at x + 1 (else it is that
 * owner itself). The three searches run in step, so their loads are in
 * flight together. An edge's vertex is its owner's crossing prefix plus
 * its rank among the owner's crossings (x, y, z), kept in shared memory
 * by edge number; the record then lists its corners' vertices in order
 * (their edges: mcd_tri_edge, one 16-byte load) at its triangles' place
 * in the block's list, and the block stores the list, consecutive threads
 * consecutive indices. Triangles from nout on are not written. */
static __global__ void __launch_bounds__(MC_THREADS)
    mc_triangle_block_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows,
                             long long nrec, unsigned long long nout, uint32_t *idx,
                             const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ uint32_t s_vb[12][MC_THREADS];     /* each record's edges' vertices */
    __shared__ uint32_t s_cv[3 * 5 * MC_THREADS]; /* each corner's (at most 5 triangles a record) */
    __shared__ unsigned s_total;
    MC_DCOUNTS_LOAD(nout, dc->ntri)
    const int t = threadIdx.x;
    const unsigned long long nx = (unsigned long long)v.nx, ny = (unsigned long long)v.ny,
                             nrows = ny * (unsigned long long)v.nz;
    for (long long r0 = (long long)blockIdx.x * MC_THREADS; r0 < nrec;
         r0 += (long long)gridDim.x * MC_THREADS) {
        const long long r = r0 + t, nvalid = min((long long)MC_THREADS, nrec - r0);
        const unsigned long long T0 = __ldg(rec.tri + r0);
        unsigned info = 0;
        unsigned long long p = 0, T = T0;
        if (t < nvalid) {
            info = __ldg(rec.info + r);
            p = __ldg(rec.point + r);
            T = __ldg(rec.tri + r);
        }
        const unsigned cs = info & 255u, nt = info >> 11 & 7u, lt = (unsigned)(T - T0);
        if (t == nvalid - 1) s_total = lt + nt;
        if (nt) {
            /* The corners' edge numbers, one 16-byte load. */
            const uint4 ce = __ldg((const uint4 *)mcd_tri_edge[cs]);
            const unsigned long long prow = mc_row_of(v, p), x = p - prow * nx;
            const unsigned used = __ldg(&mcd_case_edges[cs]);
            /* Search q (rows j + 1, k + 1, both): [lo, hi] for the first
             * record at or past point x of row prow + ((q + 1) & 1) + ny
             * ((q + 1) >> 1); an unused row's is empty. */
            long long lo[3], hi[3];
            unsigned long long key[3];
#pragma unroll
            for (int q = 0; q < 3; q++) {
                const unsigned m = q == 0   ? MC_EDGES_ROW_Y
                                   : q == 1 ? MC_EDGES_ROW_Z
                                            : MC_EDGES_ROW_YZ;
                const unsigned long long orow = prow + (unsigned long long)((q + 1) & 1) +
                                                ny * (unsigned long long)((q + 1) >> 1);
                key[q] = orow * nx + x;
                lo[q] = hi[q] = 0;
                if (used & m) {
                    lo[q] = (long long)__ldg(rows + orow);
                    hi[q] = (orow + 1 < nrows ? (long long)__ldg(rows + orow + 1) : nrec) - 1;
                }
            }
            while (lo[0] < hi[0] || lo[1] < hi[1] || lo[2] < hi[2]) {
#pragma unroll
                for (int q = 0; q < 3; q++) {
                    if (lo[q] < hi[q]) {
                        const long long mid = (lo[q] + hi[q]) >> 1;
                        if (__ldg(rec.point + mid) < key[q])
                            lo[q] = mid + 1;
                        else
                            hi[q] = mid;
                    }
                }
            }
            /* at[q]: 1 when search q's record is at x (x + 1's is the
             * next); row (j + 1, k + 1) has only an edge at x. */
            long long at[2];
#pragma unroll
            for (int q = 0; q < 2; q++) {
                at[q] = (used & (q == 0 ? MC_EDGES_ROW_Y : MC_EDGES_ROW_Z)) &&
                        __ldg(rec.point + lo[q]) == key[q];
            }
            /* Edge e: axis e >> 2, lower end (dx, dy, dz) by its number. */
#pragma unroll
            for (int e = 0; e < 12; e++) {
                if (!(used >> e & 1u)) continue;
                const int ax = e >> 2, f = e & 3, dx = ax == 0 ? 0 : f & 1,
                          dy = ax == 0   ? f & 1
                               : ax == 1 ? 0
                                         : f >> 1,
                          dz = ax == 2 ? 0 : f >> 1, q = dy | dz << 1;
                /* (An edge of row (j + 1, k + 1) has dx = 0.) */
                const long long ow = q == 0 ? r + dx : lo[q - 1] + (dx ? at[(q - 1) & 1] : 0);
                const unsigned bits = __ldg(rec.info + ow) >> 8 & 7u;
                s_vb[e][t] = (uint32_t)(__ldg(rec.cross + ow) +
                                        (unsigned long long)__popc(bits & ((1u << ax) - 1u)));
            }
            /* The record's corners in order (its own edges' vertices: no
             * barrier). */
            const unsigned cw[4] = {ce.x, ce.y, ce.z, ce.w};
#pragma unroll
            for (unsigned c = 0; c < 15; c++)
                if (c < 3 * nt) s_cv[3 * lt + c] = s_vb[cw[c >> 2] >> 8 * (c & 3) & 255u][t];
        }
        __syncthreads();
        const unsigned n3 = 3 * s_total;
        for (unsigned u = t; u < n3; u += MC_THREADS) {
            const unsigned long long o = 3 * T0 + u;
            if (o >= 3 * nout) break; /* o grows with u */
            idx[o] = s_cv[u];
        }
        __syncthreads(); /* before the next records' shared arrays */
    }
}

/* The vertex kernels of job j: indexed vertices by blocks of records, or
 * the soup from the cells (chunked or pooled records: the unordered
 * kernel); n vertices at most. */
template <typename T, int MODE>
static void mc_launch_vertices(cudaStream_t s, int pdl, int cells, const mcd_volume &v,
                               const mc_records &rec, const mc_expand_job &j, unsigned long long n,
                               unsigned early_blocks)
{
    const long long nrec = j.nrec;
    const unsigned long long nb = (unsigned long long)(nrec > 0 ? nrec : 0);
    float *nrm = MODE == PM_NORMALS_NONE ? NULL : j.nrm;
    /* No chunked or pooled records for f64 volumes (the direct and the
     * streaming classification take the other types), so no instance of
     * the unordered kernel. */
    if constexpr (!std::is_same<T, double>::value) {
        if (cells && (j.ch.tile || j.pool.pool)) {
            const int R = mc_chunk_recs(v);
            auto k = j.pool.pool ? (R == MC_CELL_RECS_LARGE
                                        ? mc_soup_chunk_kernel<T, MODE, MC_CELL_RECS_LARGE, 1>
                                        : mc_soup_chunk_kernel<T, MODE, MC_CHUNK_RECS_LARGE, 1>)
                     : R == MC_CELL_RECS_LARGE
                         ? mc_soup_chunk_kernel<T, MODE, MC_CELL_RECS_LARGE, 0>
                         : mc_soup_chunk_kernel<T, MODE, MC_CHUNK_RECS_LARGE, 0>;
            pmi_launch(pdl, k, (unsigned)mc_cell_blocks(nb, R), MC_THREADS, s, v, rec, nrec, n,
                       j.pos, nrm, j.dc, j.ch, j.pool, early_blocks);
            return;
        }
    }
    if (cells) {
        const int R = mc_cell_recs(v);
        pmi_launch(pdl,
                   R == MC_CELL_RECS_SMALL ? mc_soup_cell_kernel<T, MODE, MC_CELL_RECS_SMALL>
                                           : mc_soup_cell_kernel<T, MODE, MC_CELL_RECS_LARGE>,
                   (unsigned)mc_cell_blocks(nb, R), MC_THREADS, s, v, rec, nrec, n, j.pos, nrm,
                   j.dc);
    } else
        pmi_launch(pdl, mc_vertex_block_kernel<T, MODE>, mc_blocks(nb), MC_THREADS, s, v, rec, nrec,
                   n, j.pos, nrm, j.dc);
}

template <typename T>
static void mc_launch_mode(cudaStream_t s, int pdl, pm_normals mode, int cells, const mcd_volume &v,
                           const mc_records &rec, const mc_expand_job &j, unsigned long long n,
                           unsigned early_blocks)
{
    switch (mode) {
    case PM_NORMALS_FORWARD:
        mc_launch_vertices<T, PM_NORMALS_FORWARD>(s, pdl, cells, v, rec, j, n, early_blocks);
        break;
    case PM_NORMALS_SOBEL:
        mc_launch_vertices<T, PM_NORMALS_SOBEL>(s, pdl, cells, v, rec, j, n, early_blocks);
        break;
    case PM_NORMALS_NONE:
        mc_launch_vertices<T, PM_NORMALS_NONE>(s, pdl, cells, v, rec, j, n, early_blocks);
        break;
    default:
        mc_launch_vertices<T, PM_NORMALS_CENTRAL>(s, pdl, cells, v, rec, j, n, early_blocks);
        break;
    }
}

static void mc_launch_type(cudaStream_t s, int pdl, pm_sample_type type, pm_normals mode, int cells,
                           const mcd_volume &v, const mc_records &rec, const mc_expand_job &j,
                           unsigned long long n, unsigned early_blocks)
{
    switch (type) {
    case PM_SAMPLE_U8:
        mc_launch_mode<uint8_t>(s, pdl, mode, cells, v, rec, j, n, early_blocks);
        break;
    case PM_SAMPLE_U16:
        mc_launch_mode<uint16_t>(s, pdl, mode, cells, v, rec, j, n, early_blocks);
        break;
    case PM_SAMPLE_I16:
        mc_launch_mode<int16_t>(s, pdl, mode, cells, v, rec, j, n, early_blocks);
        break;
    case PM_SAMPLE_F32:
        mc_launch_mode<float>(s, pdl, mode, cells, v, rec, j, n, early_blocks);
        break;
    case PM_SAMPLE_F64:
        mc_launch_mode<double>(s, pdl, mode, cells, v, rec, j, n, early_blocks);
        break;
    }
}

/* mc_triangle_block_kernel's grid: at most this many blocks an SM (each
 * block loops over record blocks; a grid sized to pm_isosurface_async's
 * record room would launch mostly blocks without records). 16: about 3
 * waves on the H100 (5 blocks fit an SM), faster there than 5 or 8 at
 * 512^3 and 768^3 and level below (bench/RESULTS-cudamc.md). */
#define MC_TRI_BLOCKS_PER_SM 16
/* Grid size of the kernels that take blocks of records, 0 when too large
 * for one launch. */
static unsigned mc_record_blocks(unsigned long long nrec)
{
    const unsigned long long b = (nrec + MC_THREADS - 1) / MC_THREADS;
    return b > 0x7fffffffull ? 0u : b < 1 ? 1u : (unsigned)b;
}

pm_status pmi_mc_expand(pm_context *ctx, int pdl, pm_sample_type type, pm_normals mode,
                        const mcd_volume &v, const mc_records &rec, const unsigned long long *rows,
                        const mc_expand_job &j)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    const unsigned long long nr = j.nrec > 0 ? (unsigned long long)j.nrec : 0;
    /* The chunked soup kernel's first wave: 4 blocks an SM. */
    const unsigned early_blocks = 4u * (unsigned)pmi_cuda(ctx)->num_sms;
    if (j.soup == MC_SOUP_CELLS) {
        const int unordered = j.ch.tile || j.pool.pool;
        if (unordered && type == PM_SAMPLE_F64) /* mc_launch_vertices has no such kernel */
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_isosurface: no chunked or pooled soup records for f64 volumes");
        if (mc_cell_blocks(nr, unordered ? mc_chunk_recs(v) : mc_cell_recs(v)) > 0x7fffffffull)
            return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: too many records for one launch");
        if (j.ntri) mc_launch_type(s, pdl, type, mode, 1, v, rec, j, 3 * j.ntri, early_blocks);
        return pmi_cuda_launched("pm_isosurface: soup");
    }
    if (!mc_record_blocks(nr))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: too many records for one launch");
    if (j.nvert) mc_launch_type(s, pdl, type, mode, 0, v, rec, j, j.nvert, early_blocks);
    PMI_TRY(pmi_cuda_launched("pm_isosurface: vertices"));
    if (j.ntri && j.idx) {
        const unsigned nb = mc_record_blocks(nr),
                       cap = MC_TRI_BLOCKS_PER_SM * (unsigned)pmi_cuda(ctx)->num_sms;
        pmi_launch(pdl, mc_triangle_block_kernel, nb < cap ? nb : cap, MC_THREADS, s, v, rec, rows,
                   j.nrec, j.ntri, j.idx, j.dc);
    }
    return pmi_cuda_launched("pm_isosurface: triangles");
}

/* Kernel preloading (preload.cu): the vertex kernels of one sample type
 * and normal mode; the unordered ones but for f64 (mc_launch_vertices). */
template <typename T, int M> static int mc_expand_preload_mode(pmi_preload *p)
{
    const void *const k[] = {(const void *)mc_vertex_block_kernel<T, M>,
                             (const void *)mc_soup_cell_kernel<T, M, MC_CELL_RECS_SMALL>,
                             (const void *)mc_soup_cell_kernel<T, M, MC_CELL_RECS_LARGE>};
    if (!pmi_preload_all(p, k)) return 0;
    if constexpr (!std::is_same<T, double>::value) {
        const void *const c[] = {(const void *)mc_soup_chunk_kernel<T, M, MC_CELL_RECS_LARGE, 0>,
                                 (const void *)mc_soup_chunk_kernel<T, M, MC_CHUNK_RECS_LARGE, 0>,
                                 (const void *)mc_soup_chunk_kernel<T, M, MC_CHUNK_RECS_LARGE, 1>,
                                 (const void *)mc_soup_chunk_kernel<T, M, MC_CELL_RECS_LARGE, 1>};
        return pmi_preload_all(p, c);
    }
    return 1;
}
/* Central normals and none first. */
template <typename T> static int mc_expand_preload_type(pmi_preload *p)
{
    return mc_expand_preload_mode<T, PM_NORMALS_CENTRAL>(p) &&
           mc_expand_preload_mode<T, PM_NORMALS_NONE>(p) &&
           mc_expand_preload_mode<T, PM_NORMALS_FORWARD>(p) &&
           mc_expand_preload_mode<T, PM_NORMALS_SOBEL>(p);
}

void pmi_mc_expand_preload(pmi_preload *p, int tier)
{
    if (tier == 0) {
        if (pmi_preload_fn(p, (const void *)mc_triangle_block_kernel))
            mc_expand_preload_type<float>(p);
        return;
    }
    if (mc_expand_preload_type<uint8_t>(p) && mc_expand_preload_type<uint16_t>(p) &&
        mc_expand_preload_type<int16_t>(p))
        mc_expand_preload_type<double>(p);
}
