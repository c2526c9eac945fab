/* CUDA marching cubes (seed 003 on the GPU), pass 2 and the host side.
 * Pass 1 (mc_stream.cu for f32 volumes and small u8/u16/i16 ones, else
 * mc_classify.cu) reads the volume once and leaves the active lattice
 * points compacted, in lattice order, with exact prefixes of their
 * triangles and owned-edge crossings. Pass 2 expands them: one thread per
 * output element finds its record by a search over those prefixes (the
 * traversal of a HistoPyramid whose levels are the sorted prefixes), reads
 * the few samples around its edge and writes position and normal, so the
 * writes are coalesced and the reads stay in L1/L2. The vertices and the
 * soup take blocks of 256 records, whose outputs are a contiguous range,
 * each record listing its outputs at its prefix in shared memory; the
 * indexed triangles take blocks of 256 triangles, whose first record comes
 * from a start table. An edge's owner comes from the row table (each
 * lattice row's first record). Soup is the indexed vertices, computed
 * once each, gathered by one thread per record (the CPU's
 * mc_soup_from_indexed); small volumes' soup is computed from the cells
 * instead (mc_soup_cell_kernel). All kernels are chained by programmatic
 * dependent launch where the device has it (pmi_launch).
 * Output order and arithmetic are the CPU backend's (src/cpu/isosurface.c),
 * bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_mc.h"
#include "cuda/mc_internal.cuh"

MCD_TABLES_UPLOAD

/* Last r in [lo, hi] with a[r] <= key (a[lo] <= key holds). */
static __device__ __forceinline__ long long mc_last_le(const unsigned long long *a, long long lo, long long hi,
                                                       unsigned long long key)
{
    while (lo < hi) {
        long long mid = (lo + hi + 1) >> 1;
        if (__ldg(a + mid) <= key) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* The block's outputs start at key `first` of the sorted prefixes `pref`:
 * thread 0 reads the first record from `starts` (entry sstride * block:
 * the soup's per-triangle gather reads the table of 256 / 3 triangles per
 * entry) or, without that table, finds it by a binary search; the block loads the next MC_WIN
 * prefixes into shared memory, and each thread searches there (falling
 * back to global memory past the window). Call from every thread. */
#define MC_WIN 512
static __device__ __forceinline__ long long mc_find(const unsigned long long *pref, long long nrec,
                                                   const long long *starts, unsigned long long first,
                                                   unsigned long long key, unsigned long long *s_pref,
                                                   long long *s_r0, unsigned sstride = 1)
{
    if (threadIdx.x == 0)
        *s_r0 = starts ? __ldg(starts + (unsigned long long)sstride * blockIdx.x) : mc_last_le(pref, 0, nrec - 1, first);
    __syncthreads();
    const long long r0 = *s_r0;
    const int nwin = (int)min((long long)MC_WIN, nrec - r0);
    for (int w = threadIdx.x; w < nwin; w += blockDim.x) s_pref[w] = __ldg(pref + r0 + w);
    __syncthreads();
    if (key >= s_pref[nwin - 1]) {
        if (nwin < MC_WIN) return r0 + nwin - 1;
        return mc_last_le(pref, r0 + nwin - 1, nrec - 1, key);
    }
    int lo = 0, hi = nwin - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (s_pref[mid] <= key) lo = mid;
        else hi = mid - 1;
    }
    return r0 + lo;
}

/* Counts of pm_isosurface_async's pass 2, written on the device by
 * mc_final_kernel after pass 1: records, crossings, triangles, and whether
 * the mesh is written at all (0 when it does not fit the caller's
 * capacities). Its kernels are launched for the capacities: a block past
 * the outputs returns at once (block-uniform, before any barrier), as does
 * every block when ok is 0. NULL in pm_isosurface, whose counts come from
 * the host. */
typedef struct mc_dcounts {
    unsigned long long nrec, ncross, ntri, ok;
} mc_dcounts;
#define MC_DCOUNTS(nout_expr)                                                                                   \
    do {                                                                                                       \
        if (dc) {                                                                                              \
            if (!dc->ok) return;                                                                               \
            nrec = (long long)dc->nrec;                                                                        \
            nout = (nout_expr);                                                                                \
        }                                                                                                      \
        if ((unsigned long long)blockIdx.x * blockDim.x >= nout) return;                                       \
    } while (0)

/* The same for the kernels that take blocks of `per` records: nrec and the
 * output limit from dc; returns when the block has no record. Defines r0,
 * the block's first record. */
#define MC_DCOUNTS_RECORDS(limit, dc_limit, per)                                                               \
    if (dc) {                                                                                                  \
        if (!dc->ok) return;                                                                                   \
        nrec = (long long)dc->nrec;                                                                            \
        limit = (dc_limit);                                                                                    \
    }                                                                                                          \
    const long long r0 = (long long)blockIdx.x * (per);                                                        \
    if (r0 >= nrec) return /* block-uniform, before any barrier */

static __device__ __forceinline__ void mc_point_ijk(const mcd_volume &v, unsigned long long p, long long *i,
                                                    long long *j, long long *k)
{
    if ((p | (unsigned long long)v.nx | (unsigned long long)v.ny) >> 32 == 0) { /* 32-bit divisions */
        const unsigned nx = (unsigned)v.nx, ny = (unsigned)v.ny, row = (unsigned)p / nx, kk = row / ny;
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

static __device__ __forceinline__ void mc_store(float *pos, float *nrm, unsigned long long o, const float p[3],
                                                const float n[3])
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

/* Soup: output vertex o is vertex o % 3 of triangle o / 3, in the order
 * of the cells and of the case table. */
template <typename T, int MODE>
__global__ void __launch_bounds__(MC_THREADS)
mc_soup_kernel(mcd_volume v, mc_records rec, long long nrec, const long long *starts, unsigned long long nout,
               float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    MC_DCOUNTS(3 * dc->ntri);
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x, o = first + threadIdx.x;
    const unsigned long long q = (o < nout ? o : nout - 1) / 3;
    const long long r = mc_find(rec.tri, nrec, starts, first / 3, q, s_pref, &s_r0);
    if (o < nout) {
        int l = (int)(o - 3 * __ldg(rec.tri + r));
        unsigned cs = __ldg(rec.info + r) & 255u;
        int e = mcd_tri_table[cs][l];
        long long i, j, k;
        mc_point_ijk(v, __ldg(rec.point + r), &i, &j, &k);
        int c = mcd_edge_corner[e][0];
        float p[3], n[3];
        mcd_vertex<T, MODE>(v, i + mcd_corner[c][0], j + mcd_corner[c][1], k + mcd_corner[c][2],
                            mcd_edge_axis[e], p, n);
        mc_store(pos, nrm, o, p, n);
    }
}

/* Soup from the cells (kind 3 of mc_launch_vertices, pl.soup_cells: small
 * volumes, where pass 2 is bound by its latencies rather than by its
 * arithmetic): block b takes records [64 b, 64 b + 64) (few records per
 * block: more warps to hide the latencies of small volumes) of a
 * classification that is not indexed (each record a cell with triangles),
 * whose triangles are a contiguous range. Each record lists its triangles
 * at its prefix in shared memory; thread u of the range's soup vertices
 * reads its record there and computes the vertex of its corner's edge from
 * the edge's owner point and axis, as mc_soup_kernel (and as the indexed
 * vertices: the same function of the same edge, so the same bits). One
 * kernel, no search, no vertex scratch, but an edge shared by n triangles
 * is computed n times. Vertices from nvout on are not written. */
#define MC_CELL_RECS 64 /* records per block of mc_soup_cell_kernel */
/* Blocks of mc_soup_cell_kernel for n records (at least one launched). */
static unsigned long long mc_cell_blocks(unsigned long long n)
{
    return n ? (n + MC_CELL_RECS - 1) / MC_CELL_RECS : 1;
}
template <typename T, int MODE>
__global__ void __launch_bounds__(MC_THREADS)
mc_soup_cell_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout, float *pos, float *nrm,
                    const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pt[MC_CELL_RECS];
    __shared__ unsigned s_tp[MC_CELL_RECS];
    __shared__ uint8_t s_cs[MC_CELL_RECS];
    __shared__ uint8_t s_own[5 * MC_CELL_RECS]; /* the record of each of the block's triangles */
    __shared__ unsigned s_total;
    MC_DCOUNTS_RECORDS(nvout, 3 * dc->ntri, MC_CELL_RECS);
    const int t = threadIdx.x, nvalid = (int)min((long long)MC_CELL_RECS, nrec - r0);
    const unsigned long long T0 = __ldg(rec.tri + r0);
    if (t < nvalid) {
        const long long r = r0 + t;
        const unsigned long long tri = __ldg(rec.tri + r);
        const unsigned info = __ldg(rec.info + r), nt = info >> 11 & 7u;
        s_tp[t] = (unsigned)(tri - T0);
        s_pt[t] = __ldg(rec.point + r);
        s_cs[t] = (uint8_t)(info & 255u);
        for (unsigned q = 0; q < nt; q++) s_own[tri - T0 + q] = (uint8_t)t;
        if (t == nvalid - 1) s_total = (unsigned)(tri + nt - T0);
    }
    __syncthreads();
    const unsigned n3 = 3 * s_total;
    for (unsigned u = t; u < n3; u += MC_THREADS) {
        const unsigned lt = u / 3, m = u - 3 * lt;
        const unsigned long long o = 3 * (T0 + lt) + m;
        if (o >= nvout) break; /* o grows with u; no barrier follows */
        const int a = s_own[lt];
        const int e = mcd_tri_table[s_cs[a]][3 * (lt - s_tp[a]) + m], c = mcd_edge_corner[e][0];
        long long i, j, k;
        mc_point_ijk(v, s_pt[a], &i, &j, &k);
        float pp[3], n[3];
        mcd_vertex<T, MODE>(v, i + mcd_corner[c][0], j + mcd_corner[c][1], k + mcd_corner[c][2],
                            mcd_edge_axis[e], pp, n);
        mc_store(pos, nrm, o, pp, n);
    }
}

/* Indexed vertices: crossing o is the (o - prefix)-th set bit (x, y, z)
 * of the owned edges of its lattice point. */
template <typename T, int MODE>
__global__ void __launch_bounds__(MC_THREADS)
mc_vertex_kernel(mcd_volume v, mc_records rec, long long nrec, const long long *starts, unsigned long long nout,
                 float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    MC_DCOUNTS(dc->ncross);
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x, o = first + threadIdx.x;
    const long long r = mc_find(rec.cross, nrec, starts, first, o < nout ? o : nout - 1, s_pref, &s_r0);
    if (o < nout) {
        int rank = (int)(o - __ldg(rec.cross + r));
        unsigned bits = __ldg(rec.info + r) >> 8 & 7u;
        int axis = 0;
        for (; axis < 3; axis++)
            if (bits >> axis & 1) {
                if (rank == 0) break;
                rank--;
            }
        long long i, j, k;
        mc_point_ijk(v, __ldg(rec.point + r), &i, &j, &k);
        float p[3], n[3];
        mcd_vertex<T, MODE>(v, i, j, k, axis, p, n);
        mc_store(pos, nrm, o, p, n);
    }
}

/* Indexed vertices by blocks of records (kind 2 of mc_launch_vertices):
 * block b takes records [256 b, 256 b + 256), whose crossings are a
 * contiguous range starting at the first one's prefix. Each record lists
 * its crossings (record and axis) at its prefix in shared memory, so
 * thread u of the range reads its record there (no search, no start
 * table, no window of another block's prefixes to wait for), then computes
 * the vertex as mc_vertex_kernel. Vertices from nvout on are not
 * written. */
template <typename T, int MODE>
__global__ void __launch_bounds__(MC_THREADS)
mc_vertex_block_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout, float *pos,
                       float *nrm, const mc_dcounts *dc)
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
    for (unsigned b = bits, q = 0; b; b &= b - 1, q++) s_own[cp + q] = (uint16_t)(t | (__ffs(b) - 1) << 8);
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
static __device__ __forceinline__ unsigned long long mc_row_of(const mcd_volume &v, unsigned long long p)
{
    const unsigned long long nx = (unsigned long long)v.nx;
    return (p | nx) >> 32 == 0 ? (unsigned long long)((unsigned)p / (unsigned)nx) : p / nx;
}

/* Record of the lattice point that owns the edge from corner c of the cell
 * at point p (record r, lattice row prow): that point has a record (the
 * edge crosses), at or after r. Same row (corner dy = dz = 0): it is p or
 * p + 1, so record r or r + 1. Otherwise a binary search over the records
 * of the owner's row (row prow + dy + ny*dz; rows: each row's first
 * record), or, without the row table, over the next nx*ny + nx + 1 records
 * (the owner is at most that many points on). */
static __device__ __forceinline__ long long mc_owner(const mcd_volume &v, const mc_records &rec,
                                                     const unsigned long long *rows, long long nrec, long long r,
                                                     unsigned long long p, unsigned long long prow, int c)
{
    const int dx = mcd_corner[c][0], dy = mcd_corner[c][1], dz = mcd_corner[c][2];
    if (!(dy | dz)) return r + dx;
    const unsigned long long nx = (unsigned long long)v.nx, ny = (unsigned long long)v.ny;
    const unsigned long long drow = (unsigned long long)dy + ny * dz;
    const unsigned long long owner = p + (unsigned long long)dx + nx * drow;
    long long lo, hi;
    if (rows) {
        const unsigned long long orow = prow + drow, nrows = ny * (unsigned long long)v.nz;
        lo = (long long)__ldg(rows + orow);
        hi = (orow + 1 < nrows ? (long long)__ldg(rows + orow + 1) : nrec) - 1;
    } else {
        lo = r;
        hi = r + (long long)(owner - p);
        if (hi > nrec - 1) hi = nrec - 1;
    }
    while (lo < hi) { /* first record with point >= owner */
        const long long mid = (lo + hi) >> 1;
        if (__ldg(rec.point + mid) < owner) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Index of the vertex on edge e of the cell at point p (record r, row
 * prow): the owner's crossing prefix plus the edge's rank among its
 * crossings. */
static __device__ __forceinline__ unsigned long long mc_edge_vertex(const mcd_volume &v, const mc_records &rec,
                                                                    const unsigned long long *rows, long long nrec,
                                                                    long long r, unsigned long long p,
                                                                    unsigned long long prow, int e)
{
    const long long ow = mc_owner(v, rec, rows, nrec, r, p, prow, mcd_edge_corner[e][0]);
    const unsigned bits = __ldg(rec.info + ow) >> 8 & 7u;
    return __ldg(rec.cross + ow) + (unsigned long long)__popc(bits & ((1u << mcd_edge_axis[e]) - 1u));
}

/* Indexed triangles: one thread per triangle, its three edges' vertices. */
__global__ void __launch_bounds__(MC_THREADS)
mc_triangle_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows, long long nrec,
                   const long long *starts, unsigned long long nout, uint32_t *idx, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    MC_DCOUNTS(dc->ntri);
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x, q = first + threadIdx.x;
    const long long r = mc_find(rec.tri, nrec, starts, first, q < nout ? q : nout - 1, s_pref, &s_r0);
    if (q < nout) {
        const int l = (int)(q - __ldg(rec.tri + r));
        const unsigned cs = __ldg(rec.info + r) & 255u;
        const unsigned long long p = __ldg(rec.point + r), prow = rows ? mc_row_of(v, p) : 0;
        for (int m = 0; m < 3; m++)
            idx[3 * q + m] = (uint32_t)mc_edge_vertex(v, rec, rows, nrec, r, p, prow, mcd_tri_table[cs][3 * l + m]);
    }
}

/* Soup from the indexed vertices (the CPU's mc_soup_from_indexed): one
 * thread per triangle finds its record once, the vertex indices of its
 * three edges (independent searches, in flight together), and copies
 * their positions and normals from vpos/vnrm (all the crossings, computed
 * once by the vertex kernel) into shared memory; the block then writes its
 * triangles' 9 floats each as consecutive, coalesced stores. starts: the
 * soup's start table (entry b: the record holding triangle 256 b / 3, so
 * this kernel's block b reads entry 3 b). */
__global__ void __launch_bounds__(MC_THREADS)
mc_gather_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows, long long nrec,
                 const long long *starts, unsigned long long nout, const float *vpos, const float *vnrm, float *pos,
                 float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    __shared__ float s_o[2][MC_THREADS * 9];
    MC_DCOUNTS(dc->ntri);
    const unsigned long long ntri = nout;
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x, q = first + threadIdx.x;
    const long long r = mc_find(rec.tri, nrec, starts, first, q < ntri ? q : ntri - 1, s_pref, &s_r0, 3);
    if (q < ntri) {
        const int l = (int)(q - __ldg(rec.tri + r));
        const unsigned cs = __ldg(rec.info + r) & 255u;
        const unsigned long long p = __ldg(rec.point + r), prow = rows ? mc_row_of(v, p) : 0;
        unsigned long long vi[3];
#pragma unroll
        for (int m = 0; m < 3; m++) vi[m] = mc_edge_vertex(v, rec, rows, nrec, r, p, prow, mcd_tri_table[cs][3 * l + m]);
#pragma unroll
        for (int m = 0; m < 3; m++)
#pragma unroll
            for (int c = 0; c < 3; c++) {
                s_o[0][9 * threadIdx.x + 3 * m + c] = __ldg(vpos + 3 * vi[m] + c);
                if (nrm) s_o[1][9 * threadIdx.x + 3 * m + c] = __ldg(vnrm + 3 * vi[m] + c);
            }
    }
    __syncthreads();
    const unsigned long long left = ntri - first;
    const unsigned n = 9u * (unsigned)(left < blockDim.x ? left : blockDim.x);
    float *po = pos + 9 * first, *no = nrm ? nrm + 9 * first : NULL;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
        po[i] = s_o[0][i];
        if (no) no[i] = s_o[1][i];
    }
}

/* Soup per record (the default where pass 1 wrote the row table): one
 * thread per record, so no thread searches for its record, and the
 * searches for the owners of its cell's edges are shared by all its
 * triangles. A thread takes the vertex index of each edge its cell's
 * triangles use: the record itself and the next one in its row own the
 * edges of corners 0 and 1; corners 3, 4 and 7 (y + 1, z + 1, both) are
 * found by three searches in the row table's rows, run side by side;
 * corners 2 and 5 are the records after 3 and 4 when those points have
 * records of their own. The indices go to shared memory; the block then
 * writes its records' triangles (a contiguous range) as consecutive soup
 * corners, each reading its record from the list of the block's triangles
 * in shared memory (each record writes its own at its prefix) and copying
 * its vertex from vpos/vnrm (the indexed vertices, computed once each by
 * mc_vertex_block_kernel or mc_vertex_kernel). Triangles from ntout on are
 * not written (the caller's capacity; from dc in pm_isosurface_async).
 * Vertex indices fit 32 bits (the host checks).
 *
 * Lattice edges by owner corner (Bourke numbering, src/core/mc_tables.c):
 * corner 0 (the point) owns edges 0 (x), 3 (y), 8 (z); corner 1 (x + 1)
 * edges 1 (y), 9 (z); corner 3 (y + 1) edges 2 (x), 11 (z); corner 2
 * (x + 1, y + 1) edge 10 (z); corner 4 (z + 1) edges 4 (x), 7 (y); corner
 * 5 (x + 1, z + 1) edge 5 (y); corner 7 (y + 1, z + 1) edge 6 (x). */
#define MC_E(e) (1u << (e))
/* Crossing bits (*b) and crossing prefix (*c) of owner record o, when
 * `used` (the cell uses an edge it owns). */
static __device__ __forceinline__ void mc_owner_load(const mc_records &rec, unsigned used, long long o, unsigned *b,
                                                     unsigned long long *c)
{
    if (used) {
        *b = __ldg(rec.info + o) >> 8;
        *c = __ldg(rec.cross + o);
    }
}
__global__ void __launch_bounds__(MC_THREADS)
mc_soup_record_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows, long long nrec,
                      unsigned long long ntout, float *pos, float *nrm, const float *vpos, const float *vnrm,
                      const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ uint32_t s_v[12][MC_THREADS];
    __shared__ unsigned s_tp[MC_THREADS];
    __shared__ uint8_t s_cs[MC_THREADS];
    __shared__ uint8_t s_own[5 * MC_THREADS]; /* the record of each of the block's triangles */
    __shared__ unsigned s_total;
    MC_DCOUNTS_RECORDS(ntout, dc->ntri, MC_THREADS);
    const int t = threadIdx.x;
    const long long r = r0 + t;
    const bool valid = r < nrec;
    unsigned info = 0;
    unsigned long long p = 0, tri = 0, cross = 0;
    if (valid) {
        info = __ldg(rec.info + r);
        p = __ldg(rec.point + r);
        tri = __ldg(rec.tri + r);
        cross = __ldg(rec.cross + r);
    }
    const unsigned cs = info & 255u, nt = info >> 11 & 7u;
    const unsigned long long T0 = __ldg(rec.tri + r0);
    if (nt) {
        unsigned em = 0; /* edges the cell's triangles use */
        for (unsigned q = 0; q < 3 * nt; q++) em |= 1u << mcd_tri_table[cs][q];
        const unsigned long long nx = (unsigned long long)v.nx, ny = (unsigned long long)v.ny;
        const unsigned long long nrows = ny * (unsigned long long)v.nz, prow = mc_row_of(v, p);
        /* Corners 3 (g = 0), 4 (g = 1), 7 (g = 2): the first record at or
         * after the corner's point, in the point's row. */
        const unsigned need[3] = {em & (MC_E(2) | MC_E(11) | MC_E(10)), em & (MC_E(4) | MC_E(7) | MC_E(5)),
                                  em & MC_E(6)};
        const unsigned long long drow[3] = {1, ny, 1 + ny}, tgt[3] = {p + nx, p + nx * ny, p + nx + nx * ny};
        long long lo[3], hi[3];
#pragma unroll
        for (int g = 0; g < 3; g++) {
            lo[g] = hi[g] = 0;
            if (need[g]) {
                const unsigned long long orow = prow + drow[g];
                lo[g] = (long long)__ldg(rows + orow);
                hi[g] = (orow + 1 < nrows ? (long long)__ldg(rows + orow + 1) : nrec) - 1;
            }
        }
        for (;;) {
            bool more = false;
#pragma unroll
            for (int g = 0; g < 3; g++)
                if (lo[g] < hi[g]) {
                    more = true;
                    const long long mid = (lo[g] + hi[g]) >> 1;
                    if (__ldg(rec.point + mid) < tgt[g]) lo[g] = mid + 1;
                    else hi[g] = mid;
                }
            if (!more) break;
        }
        long long o2 = lo[0], o5 = lo[1];
        if (em & MC_E(10)) o2 += __ldg(rec.point + lo[0]) == tgt[0];
        if (em & MC_E(5)) o5 += __ldg(rec.point + lo[1]) == tgt[1];
        /* Owners' crossing bits (x, y, z) and prefixes, loaded where the
         * cell uses one of their edges. */
        unsigned b1 = 0, b3 = 0, b2 = 0, b4 = 0, b5 = 0;
        unsigned long long c1 = 0, c3 = 0, c2 = 0, c4 = 0, c5 = 0, c7 = 0;
        mc_owner_load(rec, em & (MC_E(1) | MC_E(9)), r + 1, &b1, &c1);
        mc_owner_load(rec, em & (MC_E(2) | MC_E(11)), lo[0], &b3, &c3);
        mc_owner_load(rec, em & MC_E(10), o2, &b2, &c2);
        mc_owner_load(rec, em & (MC_E(4) | MC_E(7)), lo[1], &b4, &c4);
        mc_owner_load(rec, em & MC_E(5), o5, &b5, &c5);
        if (em & MC_E(6)) c7 = __ldg(rec.cross + lo[2]); /* edge 6 is x, the owner's first */
        const unsigned b0 = info >> 8;
        /* The crossing on an owner's axis a: its prefix plus the owner's
         * crossings on the axes before a. */
        s_v[0][t] = (uint32_t)cross;
        s_v[3][t] = (uint32_t)(cross + (b0 & 1u));
        s_v[8][t] = (uint32_t)(cross + __popc(b0 & 3u));
        s_v[1][t] = (uint32_t)(c1 + (b1 & 1u));
        s_v[9][t] = (uint32_t)(c1 + __popc(b1 & 3u));
        s_v[2][t] = (uint32_t)c3;
        s_v[11][t] = (uint32_t)(c3 + __popc(b3 & 3u));
        s_v[10][t] = (uint32_t)(c2 + __popc(b2 & 3u));
        s_v[4][t] = (uint32_t)c4;
        s_v[7][t] = (uint32_t)(c4 + (b4 & 1u));
        s_v[5][t] = (uint32_t)(c5 + (b5 & 1u));
        s_v[6][t] = (uint32_t)c7;
    }
    s_tp[t] = (unsigned)(tri - T0);
    for (unsigned q = 0; q < nt; q++) s_own[tri - T0 + q] = (uint8_t)t;
    s_cs[t] = (uint8_t)cs;
    const int nvalid = (int)min((long long)MC_THREADS, nrec - r0);
    if (t == nvalid - 1) s_total = (unsigned)(tri + nt - T0);
    __syncthreads();
    const unsigned n3 = 3 * s_total;
    for (unsigned u = t; u < n3; u += MC_THREADS) {
        const unsigned lt = u / 3, m = u - 3 * lt;
        const int a = s_own[lt];
        const uint32_t vi = s_v[mcd_tri_table[s_cs[a]][3 * (lt - s_tp[a]) + m]][a];
        const unsigned long long q = T0 + lt, o = 3 * q + m;
        if (q < ntout) {
#pragma unroll
            for (int c = 0; c < 3; c++) pos[3 * o + c] = __ldg(vpos + 3 * (unsigned long long)vi + c);
            if (nrm)
#pragma unroll
                for (int c = 0; c < 3; c++) nrm[3 * o + c] = __ldg(vnrm + 3 * (unsigned long long)vi + c);
        }
    }
}

/* Zeroes n 16-byte words: pass 1's tile states and counters (a kernel
 * rather than a memset, so that it chains with the kernels after it by
 * programmatic dependent launch). */
__global__ void __launch_bounds__(MC_THREADS) mc_clear_kernel(uint4 *p, unsigned long long n)
{
    pmi_pdl_enter();
    for (unsigned long long i = blockIdx.x * (unsigned long long)MC_THREADS + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * MC_THREADS)
        p[i] = make_uint4(0, 0, 0, 0);
}

/* One thread per output (n <= 2^32 * 3 keeps the grid below 2^31). */
static unsigned mc_blocks(unsigned long long n)
{
    unsigned long long b = (n + MC_THREADS - 1) / MC_THREADS;
    return (unsigned)(b < 1 ? 1 : b);
}

/* First records of the blocks of up to two expansion kernels, all searched
 * at once (so each block starts without a dependent chain of ~log2(nrec)
 * loads): table a (na blocks, keys of prefixes pa, a block's first key its
 * first output / da), then table b likewise. */
typedef struct mc_starts {
    const unsigned long long *pref;
    unsigned long long nblocks;
    unsigned div;
    long long *out;
} mc_starts;

__global__ void __launch_bounds__(MC_THREADS)
mc_starts_kernel(long long nrec, mc_starts a, mc_starts b)
{
    pmi_pdl_enter();
    unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (t >= a.nblocks) {
        t -= a.nblocks;
        a = b;
        if (t >= a.nblocks) return;
    }
    a.out[t] = mc_last_le(a.pref, 0, nrec - 1, t * MC_THREADS / a.div);
}

template <typename T, int MODE>
static void mc_launch_vertices(cudaStream_t s, int pdl, int indexed, const mcd_volume &v, mc_records rec,
                               long long nrec, const long long *st, unsigned long long n, float *pos, float *nrm,
                               const mc_dcounts *dc)
{
    if (indexed == 3)
        pmi_launch(pdl, mc_soup_cell_kernel<T, MODE>,
                   (unsigned)mc_cell_blocks((unsigned long long)(nrec > 0 ? nrec : 0)), MC_THREADS,
                   s, v, rec, nrec, n, pos, nrm, dc);
    else if (indexed == 2)
        pmi_launch(pdl, mc_vertex_block_kernel<T, MODE>, mc_blocks((unsigned long long)nrec), MC_THREADS, s, v, rec,
                   nrec, n, pos, nrm, dc);
    else
        pmi_launch(pdl, indexed ? mc_vertex_kernel<T, MODE> : mc_soup_kernel<T, MODE>, mc_blocks(n), MC_THREADS, s, v,
                   rec, nrec, st, n, pos, nrm, dc);
}

template <typename T>
static void mc_launch_mode(cudaStream_t s, int pdl, pm_normals mode, int indexed, const mcd_volume &v, mc_records rec,
                           long long nrec, const long long *st, unsigned long long n, float *pos, float *nrm,
                           const mc_dcounts *dc)
{
    switch (mode) {
    case PM_NORMALS_FORWARD: mc_launch_vertices<T, PM_NORMALS_FORWARD>(s, pdl, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_NORMALS_SOBEL: mc_launch_vertices<T, PM_NORMALS_SOBEL>(s, pdl, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_NORMALS_NONE: mc_launch_vertices<T, PM_NORMALS_NONE>(s, pdl, indexed, v, rec, nrec, st, n, pos, NULL, dc); break;
    default: mc_launch_vertices<T, PM_NORMALS_CENTRAL>(s, pdl, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    }
}

static void mc_launch_expand(cudaStream_t s, int pdl, pm_sample_type type, pm_normals mode, int indexed,
                             const mcd_volume &v, mc_records rec, long long nrec, const long long *st,
                             unsigned long long n, float *pos, float *nrm, const mc_dcounts *dc = NULL)
{
    switch (type) {
    case PM_SAMPLE_U8: mc_launch_mode<uint8_t>(s, pdl, mode, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_SAMPLE_U16: mc_launch_mode<uint16_t>(s, pdl, mode, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_SAMPLE_I16: mc_launch_mode<int16_t>(s, pdl, mode, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_SAMPLE_F32: mc_launch_mode<float>(s, pdl, mode, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    case PM_SAMPLE_F64: mc_launch_mode<double>(s, pdl, mode, indexed, v, rec, nrec, st, n, pos, nrm, dc); break;
    }
}

/* Device buffers the expansion writes to, and where they go afterwards. */
typedef struct mc_out {
    float *pos, *nrm;
    uint32_t *idx;
    float *tmp; /* device staging for host outputs (one block) */
} mc_out;

/* Frees what this call allocated for the mesh (on failure). */
static void mc_mesh_release(pm_context *ctx, pm_mesh *mesh)
{
    if (mesh->owns_arrays) {
        if (mesh->in_context_memory) {
            ctx->backend->free(ctx, mesh->positions);
            ctx->backend->free(ctx, mesh->normals);
            ctx->backend->free(ctx, mesh->indices);
        } else {
            free(mesh->positions);
            free(mesh->normals);
            free(mesh->indices);
        }
    }
    memset(mesh, 0, sizeof *mesh);
}

#define MC_TRY_MESH(expr)                                                                      \
    do {                                                                                       \
        pm_status s_ = (expr);                                                                 \
        if (s_ != PM_STATUS_OK) {                                                              \
            mc_mesh_release(ctx, mesh);                                                        \
            return s_;                                                                         \
        }                                                                                      \
    } while (0)

static pm_status mc_device_alloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY : PM_STATUS_DEVICE_ERROR,
                         "pm_isosurface: cannot allocate %zu bytes of device memory for %s (%s)", bytes,
                         what, cudaGetErrorString(e));
    }
    return PM_STATUS_OK;
}

/* Stage timing for bench/bench_cuda_isosurface.cu: when pmi_mc_profile is
 * set, CUDA events bracket pass 1 and pass 2 of each call, the inside
 * bits part of pass 1, and the vertex part of pass 2 (milliseconds: pass 1,
 * pass 2, bits, pass 2 vertices).
 * pmi_mc_variant picks older paths for comparison (bench, tests): bit 0
 * (MC_VAR_DIRECT) soup by one vertex computation per soup vertex, bit 1
 * (MC_VAR_BOUNDED) owner search without the row table; bits 2 and 3: the
 * classification kernel compiled for 2 or 5 blocks per SM instead of 4;
 * bit 4 (MC_VAR_NOSTARTS): pass 2 blocks find their first record by their
 * own search instead of the start table; bit 5 (MC_VAR_OLDCLS): the older
 * classification kernel (mc_classify_kernel) without the start tables
 * (searched by mc_starts_kernel; the classification writes them by
 * default); bit 6 (MC_VAR_CLS1): the older classification kernel at every
 * size, writing the start tables; bit 7 (MC_VAR_RELOAD): mc_classify2_kernel
 * loading each active word's neighbours again in its record pass, as the
 * older kernel; bit 8 (MC_VAR_CLS2): mc_classify2_kernel at every size (by
 * default only while the bitmask fits in half the L2); bit 9
 * (MC_VAR_BITMASK): pass 1 by the bitmask kernels (mc_classify.cu) at
 * every size and type; bit 10 (MC_VAR_STREAM): by the streaming
 * classification (mc_stream.cu) at every size and type but f64 (by
 * default: f32, and other types up to 2^24 points); bit 11
 * (MC_VAR_SEARCH): pass 2 per output, each thread searching its record
 * (vertices per crossing, the soup gathered per triangle) instead of by
 * blocks of records; bit 12 (MC_VAR_NOPDL): every kernel launched the
 * ordinary way (by default they are chained by programmatic dependent
 * launch on devices of compute capability 9.0 and later, pmi_launch);
 * bit 13 (MC_VAR_CELLS): soup computed from the cells (mc_soup_cell_kernel)
 * at every size, bit 14 (MC_VAR_NOCELLS) from the indexed vertices at
 * every size where they fit (by default from the cells up to MC_CELLS_MAX
 * points, and where they do not fit); bit 15 (MC_VAR_NOVROOM):
 * pm_isosurface leaves the soup's indexed vertices no room in the
 * scratch, as when they do not fit ("novroom" sets it with
 * MC_VAR_NOCELLS: the fallback's test). -1: read once from PYRAMESH_CUDA_MC
 * ("direct", "bounded", "oldcls", "bitmask", "stream", "search", "nopdl",
 * "cells", "nocells", "novroom", "old" = the older paths, a number = the
 * bits; else 0). */
#define MC_VAR_DIRECT 1
#define MC_VAR_BOUNDED 2
#define MC_VAR_MINB2 4
#define MC_VAR_MINB5 8
#define MC_VAR_NOSTARTS 16
#define MC_VAR_OLDCLS 32
#define MC_VAR_CLS1 64
#define MC_VAR_RELOAD 128
#define MC_VAR_CLS2 256
#define MC_VAR_BITMASK 512
#define MC_VAR_STREAM 1024
#define MC_VAR_SEARCH 2048
#define MC_VAR_NOPDL 4096
#define MC_VAR_CELLS 8192
#define MC_VAR_NOCELLS 16384
#define MC_VAR_NOVROOM 32768
/* Soup from the cells up to 2^23 points (about 203^3). Measured on the
 * H100 (cayley f32, pm_isosurface_async, session 8): from the cells /
 * from the indexed vertices 0.049-0.050 / 0.060 ms at 128^3, 0.055 /
 * 0.063 at 160^3, 0.072-0.073 / 0.074-0.075 at 192^3, 0.089-0.091 / 0.090
 * at 224^3, 0.107-0.111 / 0.104-0.106 at 256^3, 0.241 / 0.214 at 384^3. */
#define MC_CELLS_MAX ((size_t)1 << 23)
extern "C" {
int pmi_mc_profile;
double pmi_mc_stage_ms[4];
int pmi_mc_variant = -1;
}

static int mc_variant(void)
{
    int var = __atomic_load_n(&pmi_mc_variant, __ATOMIC_RELAXED);
    if (var >= 0) return var;
    const char *e = getenv("PYRAMESH_CUDA_MC");
    var = 0;
    if (e && !strcmp(e, "direct")) var = MC_VAR_DIRECT;
    if (e && !strcmp(e, "bounded")) var = MC_VAR_BOUNDED;
    if (e && !strcmp(e, "oldcls")) var = MC_VAR_OLDCLS;
    if (e && !strcmp(e, "bitmask")) var = MC_VAR_BITMASK;
    if (e && !strcmp(e, "stream")) var = MC_VAR_STREAM;
    if (e && !strcmp(e, "old"))
        var = MC_VAR_DIRECT | MC_VAR_BOUNDED | MC_VAR_NOSTARTS | MC_VAR_OLDCLS | MC_VAR_BITMASK | MC_VAR_SEARCH;
    if (e && !strcmp(e, "search")) var = MC_VAR_SEARCH;
    if (e && !strcmp(e, "nopdl")) var = MC_VAR_NOPDL;
    if (e && !strcmp(e, "cells")) var = MC_VAR_CELLS;
    if (e && !strcmp(e, "nocells")) var = MC_VAR_NOCELLS;
    if (e && !strcmp(e, "novroom")) var = MC_VAR_NOVROOM | MC_VAR_NOCELLS;
    if (e && *e >= '0' && *e <= '9') var = atoi(e) & 65535;
    __atomic_store_n(&pmi_mc_variant, var, __ATOMIC_RELAXED);
    return var;
}

/* Whether the kernels running on the current device were compiled for
 * compute capability 9.0 or later, i.e. have the wait of pmi_pdl_enter
 * (a build for older architectures only runs on the H100 from their PTX,
 * without it): checked once per process on the first device asked (a
 * later device of another architecture gets no chaining where its own
 * st->pdl says so). */
static int mc_pdl_compiled(void)
{
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        cudaFuncAttributes a;
        k = cudaFuncGetAttributes(&a, mc_clear_kernel) == cudaSuccess && a.ptxVersion >= 90;
        cudaGetLastError();
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

/* How pass 1 runs, decided on the host: the volume as the kernels see it,
 * the tiling and the path (see mc_variant). */
typedef struct mc_plan {
    mcd_volume v;
    mc_tiling tl;
    mc_stream_grid sg;
    size_t npoints;
    int indexed, var, cls_indexed, use_rows, cls_tables, cls_kernel, use_stream, per_record, vblock;
    int soup_cells; /* soup from the cells (mc_soup_cell_kernel) */
    int pdl; /* kernels chained by programmatic dependent launch */
} mc_plan;

/* async: pm_isosurface_async, whose pass 2 needs, where its kernels search
 * their records, the start tables written by the classification (the
 * direct, no-start-table and older classification variants are not
 * taken). */
static pm_status mc_plan_make(pm_context *ctx, const pm_volume *vol, double iso, const pm_isosurface_options *opt,
                              int async, mc_plan *pl)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_TRY(mcd_tables_upload(st->device));
    memset(pl, 0, sizeof *pl);
    mcd_volume &v = pl->v;
    v.data = vol->data;
    v.nx = (long long)vol->nx;
    v.ny = (long long)vol->ny;
    v.nz = (long long)vol->nz;
    v.rs = (long long)vol->row_stride;
    v.ss = (long long)vol->slice_stride;
    v.iso = iso;
    v.sg = opt->inside_above ? -1.0 : 1.0;
    v.siso = v.sg * iso;
    {
        float f = (float)iso;
        if (v.sg > 0 && (double)f < iso) f = nextafterf(f, INFINITY);
        if (v.sg < 0 && (double)f > iso) f = nextafterf(f, -INFINITY);
        v.fthr = f;
    }
    for (int a = 0; a < 3; a++) {
        v.org[a] = vol->origin[a];
        v.sp[a] = vol->spacing[a];
    }
    pl->indexed = opt->mode == PM_MESH_INDEXED;
    pl->tl = mc_make_tiling(vol);
    if (!pmi_mul3_size(vol->nx, vol->ny, vol->nz, &pl->npoints))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: lattice size overflows");
    /* Soup is classified as indexed (records with crossing prefixes), so
     * that pass 2 can compute each edge vertex once, unless it is computed
     * from the cells (below) or the direct variant is asked for. */
    int var = mc_variant();
    if (async) var &= ~(MC_VAR_DIRECT | MC_VAR_NOSTARTS | MC_VAR_OLDCLS);
    pl->var = var;
    /* Soup from the cells (mc_soup_cell_kernel: one kernel for pass 2, a
     * classification that is not indexed) up to MC_CELLS_MAX points, from
     * the indexed vertices above (measured on the H100,
     * bench/RESULTS-cudamc.md, session 8). */
    pl->soup_cells = !pl->indexed && !(var & (MC_VAR_DIRECT | MC_VAR_NOCELLS | MC_VAR_SEARCH)) &&
                     ((var & MC_VAR_CELLS) || pl->npoints <= MC_CELLS_MAX) &&
                     mc_cell_blocks(pl->npoints) <= 0x7fffffffull;
    pl->cls_indexed = pl->indexed || !(var & MC_VAR_DIRECT) && !pl->soup_cells;
    pl->use_rows = pl->cls_indexed && !(var & MC_VAR_BOUNDED);
    /* Pass 2 (bench/RESULTS-cudamc.md, session 7, measured on the H100):
     * - vertices by blocks of 256 records (mc_vertex_block_kernel; the
     *   vertex part of pass 2 at 512^3 0.049 -> 0.046-0.048 ms, at 768^3
     *   0.096-0.098 -> 0.088-0.089); per crossing, each thread searching
     *   its record (mc_vertex_kernel), for MC_VAR_SEARCH;
     * - the soup gathered per record (mc_soup_record_kernel; pass 2 at
     *   512^3 0.123 -> 0.110, 768^3 0.249 -> 0.219) wherever the row table
     *   is written; per triangle (mc_gather_kernel) for MC_VAR_SEARCH,
     *   without the row table and where the soup's vertex indices pass
     *   2^32;
     * - indexed triangles per triangle (mc_triangle_kernel): per record
     *   was no faster; so were the vertices one thread per record.
     * The block start tables of the kernels that search their records are
     * written by the classification (either kernel; mc_starts_kernel
     * searches them for MC_VAR_OLDCLS and where one is missing):
     * triangles (keys of the per-triangle soup kernels, divisor 3, or of
     * the triangle kernel, divisor 1) and crossings (mc_vertex_kernel). */
    pl->per_record = !pl->indexed && pl->use_rows && !(var & MC_VAR_SEARCH);
    pl->pdl = st->pdl && mc_pdl_compiled() && !(var & MC_VAR_NOPDL);
    pl->vblock = pl->cls_indexed && !(var & MC_VAR_SEARCH);
    pl->cls_tables = !(var & (MC_VAR_OLDCLS | MC_VAR_NOSTARTS));
    /* Classification kernel: mc_classify2_kernel while the bitmask fits
     * in half the L2 (measured on the H100: 256^3 and 512^3, 2 and 17 MB,
     * faster than the older kernel, 512^3 by about 0.012 ms), else the
     * older mc_classify_kernel (768^3, 57 MB: faster by about 0.02 ms). */
    pl->cls_kernel = 2;
    if (var & (MC_VAR_OLDCLS | MC_VAR_CLS1)) {
        pl->cls_kernel = 1;
    } else if (!(var & MC_VAR_CLS2)) {
        int l2 = 0;
        if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, st->device) != cudaSuccess) {
            cudaGetLastError();
            l2 = 0;
        }
        if ((double)pl->tl.nwords * 4.0 > (double)l2 / 2.0) pl->cls_kernel = 1;
    }
    /* Pass 1 by the streaming classification (mc_stream.cu) for f32
     * volumes and for 1- and 2-byte samples up to 2^24 points, else by the
     * bitmask kernels (measured on the H100, bench/RESULTS-cudamc.md: f32
     * streamed is faster at every size from 64^3 to 1024^3, also with rows
     * filling 59% of their 256-point chunks (300^3); the streaming kernel
     * costs about the same per point whatever the sample size while the
     * bits kernel scales with the bytes, so u8/u16 are faster streamed up to
     * 256^3 and through the bitmask from 384^3). MC_VAR_BITMASK /
     * MC_VAR_STREAM force either (f64 always takes the bitmask kernels);
     * PYRAMESH_CUDA_MC_SLICES sets the streaming kernel's slices per block
     * (tuning, tests). */
    pl->use_stream = mc_stream_supported(vol) && !(var & MC_VAR_BITMASK) &&
                     ((var & MC_VAR_STREAM) || vol->type == PM_SAMPLE_F32 || pl->npoints <= ((size_t)1 << 24));
    if (pl->use_stream) {
        const char *se = getenv("PYRAMESH_CUDA_MC_SLICES");
        pl->sg = mc_stream_make_grid(vol, st->num_sms, se ? atoll(se) : 0);
    }
    return PM_STATUS_OK;
}

/* Pass 1's scratch (in the context's arena) and results. */
typedef struct mc_pass1 {
    char *base, *end;
    mc_records rec;
    unsigned long long *rows;   /* row table, or NULL */
    unsigned long long *totals; /* records, triangles, crossings, active cells */
    mc_tables ctab;             /* start tables (t NULL: none) */
    char *extra;                /* extra_b bytes of the caller's */
} mc_pass1;

/* Lays out the scratch for rec_cap records and launches pass 1 (no wait).
 * Scratch: tile states, records (point, triangle prefix, info, row table,
 * start tables, extra, crossing prefix), then the bitmask last: after
 * pass 1 the records' unused room and the bitmask are free (pm_isosurface
 * puts the soup's vertices there). ev: profiling events or NULLs. */
static pm_status mc_pass1_launch(pm_context *ctx, const pm_volume *vol, const mc_plan &pl, size_t rec_cap,
                                 size_t extra_b, mc_pass1 *p, cudaEvent_t *ev)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const mc_tiling &tl = pl.tl;
    const mc_stream_grid &sg = pl.sg;
    const size_t nrows = (size_t)vol->ny * vol->nz;
    size_t state_b = pmi_align256((size_t)(pl.use_stream ? sg.ntiles : tl.ntiles) * 3 * sizeof(unsigned long long));
    size_t head_b = 256 + state_b;
    /* Last: the bitmask, or the streaming classification's segment
     * counts, segment bases and record pool. */
    size_t segc_b = pl.use_stream ? pmi_align256((size_t)sg.nseg * 4 + 16) : 0;
    size_t segb_b = pl.use_stream ? pmi_align256((size_t)sg.nseg * 24) : 0;
    size_t bits_b = pl.use_stream ? segc_b + segb_b + pmi_align256(rec_cap * 16)
                                  : pmi_align256((size_t)tl.nwords * 4 + 16);
    size_t rows_b = pl.use_rows ? pmi_align256(nrows * 8) : 0;
    /* Table entries: blocks of up to 5 triangles per record (times 3 for
     * soup) or 3 crossings per record, for rec_cap records. */
    mc_tables tab = {NULL, NULL, 0, 0, pl.indexed ? 1u : 3u};
    if (pl.cls_tables) {
        /* The per-record triangle kernels need no triangle table. */
        tab.nt = pl.per_record || pl.soup_cells ? 0 : ((unsigned long long)rec_cap * 5 * tab.tdiv + 255) / 256 + 1;
        tab.nc = pl.cls_indexed && !pl.vblock ? ((unsigned long long)rec_cap * 3 + 255) / 256 + 1 : 0;
    }
    size_t tab_b = pl.cls_tables ? pmi_align256((size_t)tab.nt * 8) + pmi_align256((size_t)tab.nc * 8) : 0;
    extra_b = pmi_align256(extra_b);
    size_t bytes = head_b + pmi_align256(rec_cap * 8) * 3 + pmi_align256(rec_cap * 2) + rows_b + tab_b + extra_b +
                   bits_b;
    char *base = NULL;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&base));
    p->base = base;
    p->end = base + bytes;
    unsigned int *ticket = (unsigned int *)base;
    p->totals = (unsigned long long *)(base + 64);
    unsigned long long *state = (unsigned long long *)(base + 256);
    char *q = base + head_b;
    p->rec.point = (unsigned long long *)q;
    q += pmi_align256(rec_cap * 8);
    p->rec.tri = (unsigned long long *)q;
    q += pmi_align256(rec_cap * 8);
    p->rec.info = (uint16_t *)q;
    q += pmi_align256(rec_cap * 2);
    p->rows = pl.use_rows ? (unsigned long long *)q : NULL;
    q += rows_b;
    p->ctab = tab;
    p->ctab.t = NULL;
    if (pl.cls_tables) {
        tab.t = tab.nt ? (long long *)q : NULL;
        tab.c = tab.nc ? (long long *)(q + pmi_align256((size_t)tab.nt * 8)) : NULL;
        q += tab_b;
        p->ctab = tab;
    }
    p->extra = q;
    q += extra_b;
    p->rec.cross = (unsigned long long *)q;
    q += pmi_align256(rec_cap * 8);
    unsigned int *bits = (unsigned int *)q;
    if (ev[0]) cudaEventRecord(ev[0], s);
    /* head_b is a multiple of 256 bytes. */
    pmi_launch(pl.pdl, mc_clear_kernel, mc_blocks(head_b / 16), MC_THREADS, s, (uint4 *)base,
               (unsigned long long)(head_b / 16));
    PMI_TRY(pmi_cuda_launched("pm_isosurface: clearing tile states"));
    const mc_tables *tp = pl.cls_tables ? &tab : NULL;
    if (pl.use_stream) {
        mc_stream_mem sm;
        sm.segc = bits;
        sm.segbase = (unsigned long long *)(q + segc_b);
        sm.pool = (uint4 *)(q + segc_b + segb_b);
        sm.pool_cap = rec_cap;
        sm.pool_ctr = (unsigned long long *)(base + 128);
        sm.ticket = ticket;
        sm.state = state;
        PMI_TRY(mc_stream_classify(ctx, pl.v, vol->type, sg, pl.cls_indexed, sm, p->rec, rec_cap, p->rows,
                                   p->totals, tp, ev[4], pl.pdl));
    } else {
        PMI_TRY(mc_inside_bits(ctx, pl.v, tl, vol->type, bits, pl.pdl));
        if (ev[4]) cudaEventRecord(ev[4], s);
        PMI_TRY(mc_classify(ctx, pl.v, tl, pl.cls_indexed, bits, ticket, state, p->rec, rec_cap, p->rows, p->totals,
                            pl.cls_kernel, pl.var & MC_VAR_MINB2 ? 2 : pl.var & MC_VAR_MINB5 ? 5 : 4,
                            (pl.var & MC_VAR_RELOAD) != 0, tp, pl.pdl));
    }
    if (ev[1]) cudaEventRecord(ev[1], s);
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_isosurface(pm_context *ctx, const pm_volume *vol, double iso,
                                         const pm_isosurface_options *opt, pm_mesh *mesh)
{
    mc_plan pl;
    PMI_TRY(mc_plan_make(ctx, vol, iso, opt, 0, &pl));
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const mcd_volume &v = pl.v;
    const int indexed = pl.indexed, cls_indexed = pl.cls_indexed, var = pl.var;

    /* Pass 1. The records' room is a guess (surfaces cross few cells); a
     * volume with more active points runs pass 1 again with the exact
     * room. */
    size_t rec_cap = pl.npoints / 64 + ((size_t)1 << 20);
    if (rec_cap > pl.npoints) rec_cap = pl.npoints;
    unsigned long long tot[4];
    mc_pass1 p1;
    cudaEvent_t ev[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    if (pmi_mc_profile)
        for (int e = 0; e < 6; e++) cudaEventCreate(&ev[e]);
    for (;;) {
        PMI_TRY(mc_pass1_launch(ctx, vol, pl, rec_cap, 0, &p1, ev));
        /* Into the context's pinned words: an asynchronous copy (a
         * pageable destination would make it a staged, blocking one). */
        PMI_CU_TRY(cudaMemcpyAsync(&st->host[PMI_HOST_COUNTS], p1.totals, sizeof tot, cudaMemcpyDeviceToHost, s),
                   "pm_isosurface: reading counts");
        PMI_TRY(pmi_cuda_wait(ctx, "pm_isosurface: classification"));
        memcpy(tot, &st->host[PMI_HOST_COUNTS], sizeof tot);
        if (tot[0] <= rec_cap) break;
        rec_cap = (size_t)tot[0];
    }
    const mc_records rec = p1.rec;
    const unsigned long long *rows = p1.rows;
    const mc_tables ctab = p1.ctab;
    char *const base = p1.base, *const base_end = p1.end;
    const long long nrec = (long long)tot[0];
    const unsigned long long ntri = tot[1], ncross = tot[2];
    if (indexed && ncross > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface: %llu vertices do not fit the 32-bit indices of an indexed mesh",
                         ncross);
    const unsigned long long nv = indexed ? ncross : 3 * ntri;
    mesh->num_vertices = (size_t)nv;
    mesh->num_triangles = (size_t)ntri;
    mesh->active_cells = tot[3];
    const int want_n = opt->normals != PM_NORMALS_NONE;
    const int to_ctx = opt->output_in_context_memory != 0;

    /* Where the output goes and how much of it. */
    unsigned long long nv_w = nv, nt_w = indexed ? ntri : 0;
    pm_status result = PM_STATUS_OK;
    float *hpos = NULL, *hnrm = NULL;
    uint32_t *hidx = NULL;
    if (opt->out_positions) {
        /* The CPU's rule: write what fits; soup writes whole triangles. */
        nv_w = nv < opt->vertex_capacity ? nv : opt->vertex_capacity;
        unsigned long long tl_ = ntri < opt->triangle_capacity ? ntri : opt->triangle_capacity;
        if (indexed) {
            nt_w = tl_;
        } else {
            if (tl_ > nv_w / 3) tl_ = nv_w / 3;
            nv_w = 3 * tl_;
        }
        if (nv > opt->vertex_capacity || ntri > opt->triangle_capacity)
            result = pmi_error(PM_STATUS_TRUNCATED,
                               "pm_isosurface: %llu vertices / %llu triangles exceed the capacity "
                               "%zu / %zu",
                               nv, ntri, opt->vertex_capacity, opt->triangle_capacity);
        hpos = opt->out_positions;
        hnrm = want_n ? opt->out_normals : NULL;
        hidx = indexed ? opt->out_indices : NULL;
        mesh->positions = hpos;
        mesh->normals = hnrm;
        mesh->indices = hidx;
        mesh->in_context_memory = to_ctx;
        if (!hidx) nt_w = 0;
    } else if (to_ctx) {
        void *p = NULL;
        MC_TRY_MESH(ctx->backend->alloc(ctx, (size_t)nv * 3 * sizeof(float), &p));
        hpos = (float *)p;
        mesh->positions = hpos;
        mesh->in_context_memory = 1;
        mesh->owns_arrays = 1;
        if (want_n) {
            MC_TRY_MESH(ctx->backend->alloc(ctx, (size_t)nv * 3 * sizeof(float), &p));
            hnrm = (float *)p;
            mesh->normals = hnrm;
        }
        if (indexed) {
            MC_TRY_MESH(ctx->backend->alloc(ctx, (size_t)ntri * 3 * sizeof(uint32_t), &p));
            hidx = (uint32_t *)p;
            mesh->indices = hidx;
        }
    } else {
        mesh->owns_arrays = 1;
        hpos = (float *)malloc(nv ? (size_t)nv * 3 * sizeof(float) : 1);
        mesh->positions = hpos;
        if (want_n) mesh->normals = hnrm = (float *)malloc(nv ? (size_t)nv * 3 * sizeof(float) : 1);
        if (indexed) mesh->indices = hidx = (uint32_t *)malloc(ntri ? (size_t)ntri * 3 * sizeof(uint32_t) : 1);
        if (!hpos || (want_n && !hnrm) || (indexed && !hidx))
            MC_TRY_MESH(pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: out of host memory for %llu vertices",
                                  nv));
    }

    /* Device targets: the final arrays, or staging for host outputs. */
    mc_out o = {NULL, NULL, NULL, NULL};
    if (to_ctx) {
        o.pos = hpos;
        o.nrm = hnrm;
        o.idx = hidx;
    } else {
        size_t vb = (size_t)nv_w * 3 * sizeof(float), ib = (size_t)nt_w * 3 * sizeof(uint32_t);
        MC_TRY_MESH(mc_device_alloc((void **)&o.tmp, vb + (hnrm ? vb : 0) + ib, "the mesh"));
        o.pos = o.tmp;
        o.nrm = hnrm ? o.tmp + (size_t)nv_w * 3 : NULL;
        o.idx = (uint32_t *)(o.tmp + (size_t)nv_w * 3 * (hnrm ? 2 : 1));
    }
    /* Scratch left after the records' used part (the records' spare room
     * and the bitmask, both dead after pass 1) holds, when they fit: the
     * soup's indexed vertices (ncross * 24 bytes, 12 without normals), then
     * the expansion kernels' block start tables (8 bytes per block). Soup
     * goes through the indexed vertices when they fit; else (and for small
     * volumes, pl.soup_cells) it is computed from the cells, one vertex
     * computation per soup vertex (per output for the direct variant). */
    char *fb = base + pmi_align256((size_t)((char *)(rec.cross + nrec) - base));
    size_t fleft = fb <= base_end ? (size_t)(base_end - fb) : 0;
    float *vpos = NULL, *vnrm = NULL;
    if (!indexed && cls_indexed && nv_w) {
        size_t need = pmi_align256((size_t)ncross * 3 * sizeof(float) * (want_n ? 2 : 1));
        if (need <= fleft && !(var & MC_VAR_NOVROOM)) {
            vpos = (float *)fb;
            vnrm = want_n ? vpos + (size_t)ncross * 3 : NULL;
            fb += need;
            fleft -= need;
        }
    }
    /* The kernels of pass 2: a (vertices, or the direct soup), b (the soup
     * gather, or the triangles), and their start tables. */
    const int tri_k = nt_w && o.idx;
    /* The soup gather per record (mc_soup_record_kernel) where the row
     * table exists and the vertex indices fit 32 bits. */
    const unsigned long long rgrid = ((unsigned long long)nrec + MC_THREADS - 1) / MC_THREADS;
    const int soup_rec = vpos && pl.per_record && ncross <= UINT32_MAX + 1ull && rgrid <= 0x7fffffffull;
    /* Vertices by blocks of records (pl.vblock: not MC_VAR_SEARCH), or per
     * crossing. */
    const int vkind = pl.vblock && rgrid <= 0x7fffffffull ? 2 : 1;
    /* Soup without the indexed vertices (pl.soup_cells, or when they do not
     * fit): from the cells, or one vertex computation per soup vertex for
     * the direct and search variants. */
    const int skind = !indexed && !vpos && !(var & (MC_VAR_DIRECT | MC_VAR_SEARCH)) &&
                      mc_cell_blocks((unsigned long long)nrec) <= 0x7fffffffull ? 3 : 0;
    /* Start tables of the kernels that search their records: a (the
     * per-crossing vertex kernel, or the direct soup), b (the
     * per-triangle gather, or the triangle kernel); written by the
     * classification, else searched here for all blocks at once. */
    mc_starts sa = {NULL, 0, 1, NULL}, sb = {NULL, 0, 1, NULL};
    if (vpos ? vkind == 1 : nv_w && !(indexed && vkind == 2) && skind != 3) {
        const int vx = vpos || indexed;
        sa.pref = vx ? rec.cross : rec.tri;
        sa.nblocks = mc_blocks(vpos ? ncross : nv_w);
        sa.div = vx ? 1 : 3;
        sa.out = vx ? ctab.c : ctab.t;
    }
    if (vpos ? !soup_rec : tri_k) {
        sb.pref = rec.tri;
        sb.nblocks = mc_blocks(vpos ? nv_w : nt_w);
        sb.div = vpos ? 3 : 1;
        sb.out = ctab.t;
    }
    mc_starts qa = sa, qb = sb; /* the tables still missing */
    if (sa.out) qa.nblocks = 0;
    if (sb.out) qb.nblocks = 0;
    int search_starts = 0;
    if ((qa.nblocks || qb.nblocks) && !(var & MC_VAR_NOSTARTS) && (qa.nblocks + qb.nblocks) * 8 <= fleft &&
        nrec > 0) {
        qa.out = (long long *)fb;
        qb.out = qa.out + qa.nblocks;
        if (qa.nblocks) sa.out = qa.out;
        if (qb.nblocks) sb.out = qb.out;
        search_starts = 1;
    }
    if (ev[2]) cudaEventRecord(ev[2], s);
    if (search_starts)
        pmi_launch(pl.pdl, mc_starts_kernel, mc_blocks(qa.nblocks + qb.nblocks), MC_THREADS, s, nrec, qa, qb);
    if (vpos) {
        mc_launch_expand(s, pl.pdl, vol->type, opt->normals, vkind, v, rec, nrec, sa.out, ncross, vpos, vnrm);
        if (ev[5]) cudaEventRecord(ev[5], s);
        if (cudaPeekAtLastError() == cudaSuccess && soup_rec)
            pmi_launch(pl.pdl, mc_soup_record_kernel, (unsigned)rgrid, MC_THREADS, s, v, rec, rows, nrec, nv_w / 3,
                       o.pos, o.nrm, vpos, o.nrm ? vnrm : NULL, (const mc_dcounts *)NULL);
        else if (cudaPeekAtLastError() == cudaSuccess)
            pmi_launch(pl.pdl, mc_gather_kernel, mc_blocks(nv_w / 3), MC_THREADS, s, v, rec, rows, nrec, sb.out,
                       nv_w / 3, vpos, o.nrm ? vnrm : NULL, o.pos, o.nrm, (const mc_dcounts *)NULL);
    } else if (nv_w) {
        mc_launch_expand(s, pl.pdl, vol->type, opt->normals, indexed ? vkind : skind, v, rec, nrec, sa.out, nv_w, o.pos,
                         o.nrm);
        if (ev[5]) cudaEventRecord(ev[5], s);
    }
    pm_status ls = pmi_cuda_launched("pm_isosurface: vertices");
    if (ls == PM_STATUS_OK && tri_k)
        pmi_launch(pl.pdl, mc_triangle_kernel, mc_blocks(nt_w), MC_THREADS, s, v, rec, rows, nrec, sb.out, nt_w,
                   o.idx, (const mc_dcounts *)NULL);
    if (ls == PM_STATUS_OK) ls = pmi_cuda_launched("pm_isosurface: triangles");
    if (ev[3]) cudaEventRecord(ev[3], s);
    if (ls == PM_STATUS_OK && !to_ctx) {
        cudaError_t e = cudaMemcpyAsync(hpos, o.pos, (size_t)nv_w * 3 * sizeof(float), cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess && hnrm)
            e = cudaMemcpyAsync(hnrm, o.nrm, (size_t)nv_w * 3 * sizeof(float), cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess && nt_w && hidx)
            e = cudaMemcpyAsync(hidx, o.idx, (size_t)nt_w * 3 * sizeof(uint32_t), cudaMemcpyDeviceToHost, s);
        if (e != cudaSuccess) ls = pmi_cuda_status(e, "pm_isosurface: copying the mesh to the host");
    }
    /* The records live in the scratch arena, which the next call may
     * reuse: wait here (the caller gets a finished mesh either way). */
    pm_status ws = pmi_cuda_wait(ctx, "pm_isosurface: expansion");
    if (o.tmp) cudaFree(o.tmp);
    if (ev[0]) {
        float a = 0, b = 0, c = 0, d = 0;
        cudaEventElapsedTime(&a, ev[0], ev[1]);
        cudaEventElapsedTime(&b, ev[2], ev[3]);
        cudaEventElapsedTime(&c, ev[0], ev[4]);
        if (cudaEventElapsedTime(&d, ev[2], ev[5]) != cudaSuccess) d = 0;
        pmi_mc_stage_ms[0] = a;
        pmi_mc_stage_ms[1] = b;
        pmi_mc_stage_ms[2] = c;
        pmi_mc_stage_ms[3] = d;
        for (int e = 0; e < 6; e++) cudaEventDestroy(ev[e]);
        cudaGetLastError();
    }
    if (ls == PM_STATUS_OK) ls = ws;
    if (ls != PM_STATUS_OK) {
        mc_mesh_release(ctx, mesh);
        return ls;
    }
    return result;
}

/* pm_isosurface_async's end of pass 1: the counts for the caller
 * (vertices, triangles, active cells, flags) and for pass 2 (dc). Flags:
 * bit 0 (PM_ISOSURFACE_DOES_NOT_FIT) the mesh exceeds a capacity (then the
 * records' room, sized from the capacities, or the soup's vertex room may
 * be short too: nothing is written); bit 1 (PM_ISOSURFACE_INDEX_OVERFLOW)
 * an indexed mesh with more than 2^32 vertices. */
__global__ void mc_final_kernel(const unsigned long long *totals, int indexed, unsigned long long rec_cap,
                                unsigned long long vcap, unsigned long long tcap, unsigned long long vroom,
                                mc_dcounts *dc, unsigned long long *counts)
{
    pmi_pdl_enter();
    const unsigned long long nrec = totals[0], ntri = totals[1], ncross = totals[2];
    const unsigned long long nv = indexed ? ncross : 3 * ntri;
    unsigned long long flags = 0;
    if (nv > vcap || ntri > tcap || nrec > rec_cap || ncross > vroom) flags |= 1;
    if (indexed && ncross > 0xffffffffull) flags |= 2;
    counts[0] = nv;
    counts[1] = ntri;
    counts[2] = totals[3];
    counts[3] = flags;
    dc->nrec = nrec;
    dc->ncross = ncross;
    dc->ntri = ntri;
    dc->ok = flags == 0;
}

static unsigned long long mc_min(unsigned long long a, unsigned long long b)
{
    return a < b ? a : b;
}

/* Both passes queued on the context's stream, no host wait: pass 1 with a
 * record room that holds any mesh fitting the caller's capacities (a
 * record is a point whose cell has triangles, or a point on the last
 * row, column or slice of the lattice, which owns edges but no cell), pass
 * 2 launched for the capacities and told the counts on the device. The
 * scratch stays in use until the queued work ends; the next call on the
 * context comes after it in stream order. */
extern "C" pm_status pmi_cuda_isosurface_async(pm_context *ctx, const pm_volume *vol, double iso,
                                               const pm_isosurface_options *opt, pm_isosurface_counts *counts_ctx)
{
    mc_plan pl;
    PMI_TRY(mc_plan_make(ctx, vol, iso, opt, 1, &pl));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    const int indexed = pl.indexed;
    const unsigned long long np = pl.npoints;
    const unsigned long long inner = (unsigned long long)(vol->nx - 1) * (vol->ny - 1) * (vol->nz - 1);
    const unsigned long long border = np - inner;
    const unsigned long long vcap = opt->vertex_capacity, tcap = opt->triangle_capacity;
    /* Triangles that can be written, records they need (at most one per
     * triangle, plus the border points). */
    const unsigned long long tfit = indexed ? tcap : mc_min(tcap, vcap / 3);
    const unsigned long long rec_cap = tfit >= np ? np : mc_min(np, tfit + border);
    /* Outputs of each kernel, at most: crossings (3 per record), the soup's
     * indexed vertices (at most its soup vertices), triangles (5 per
     * record). */
    const unsigned long long nvk = mc_min(vcap, 3 * rec_cap), ntk = mc_min(tfit, 5 * rec_cap);
    if ((nvk + MC_THREADS - 1) / MC_THREADS > 0x7fffffffull || (ntk + MC_THREADS - 1) / MC_THREADS > 0x7fffffffull)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface_async: the capacities are too large for one launch");
    const int want_n = opt->normals != PM_NORMALS_NONE && opt->out_normals;
    size_t vroom_b = 0;
    if (!indexed && !pl.soup_cells && !pmi_mul3_size((size_t)nvk, (size_t)3 * sizeof(float), want_n ? 2 : 1, &vroom_b))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface_async: vertex room overflows");
    mc_pass1 p1;
    cudaEvent_t ev[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
    PMI_TRY(mc_pass1_launch(ctx, vol, pl, (size_t)rec_cap, 256 + vroom_b, &p1, ev));
    mc_dcounts *dc = (mc_dcounts *)p1.extra;
    float *vpos = indexed || pl.soup_cells ? NULL : (float *)(p1.extra + 256);
    float *vnrm = vpos && want_n ? vpos + (size_t)nvk * 3 : NULL;
    pmi_launch(pl.pdl, mc_final_kernel, 1, 1, s, p1.totals, indexed, rec_cap, vcap, tcap,
               indexed ? vcap : pl.soup_cells ? ~0ull : nvk, dc, (unsigned long long *)counts_ctx);
    PMI_TRY(pmi_cuda_launched("pm_isosurface_async: counts"));
    float *pnrm = want_n ? opt->out_normals : NULL;
    const long long nrb = (long long)rec_cap; /* replaced by dc->nrec */
    const int vkind = pl.vblock && (rec_cap + MC_THREADS - 1) / MC_THREADS <= 0x7fffffffull ? 2 : 1;
    if (indexed) {
        if (nvk)
            mc_launch_expand(s, pl.pdl, vol->type, opt->normals, vkind, pl.v, p1.rec, nrb, p1.ctab.c, nvk, opt->out_positions,
                             pnrm, dc);
        PMI_TRY(pmi_cuda_launched("pm_isosurface_async: vertices"));
        if (ntk && opt->out_indices)
            pmi_launch(pl.pdl, mc_triangle_kernel, mc_blocks(ntk), MC_THREADS, s, pl.v, p1.rec, p1.rows, nrb,
                       p1.ctab.t, ntk, opt->out_indices, dc);
    } else if (pl.soup_cells) {
        if (ntk)
            mc_launch_expand(s, pl.pdl, vol->type, opt->normals, 3, pl.v, p1.rec, nrb, NULL, 3 * ntk, opt->out_positions,
                             pnrm, dc);
    } else {
        if (nvk) mc_launch_expand(s, pl.pdl, vol->type, opt->normals, vkind, pl.v, p1.rec, nrb, p1.ctab.c, nvk, vpos, vnrm, dc);
        PMI_TRY(pmi_cuda_launched("pm_isosurface_async: vertices"));
        const unsigned long long rgrid = (rec_cap + MC_THREADS - 1) / MC_THREADS;
        if (ntk && pl.per_record && rgrid <= 0x7fffffffull && nvk <= UINT32_MAX + 1ull)
            pmi_launch(pl.pdl, mc_soup_record_kernel, (unsigned)rgrid, MC_THREADS, s, pl.v, p1.rec, p1.rows, nrb, ntk,
                       opt->out_positions, pnrm, vpos, vnrm, dc);
        else if (ntk)
            pmi_launch(pl.pdl, mc_gather_kernel, mc_blocks(ntk), MC_THREADS, s, pl.v, p1.rec, p1.rows, nrb, p1.ctab.t,
                       ntk, vpos, vnrm, opt->out_positions, pnrm, dc);
    }
    return pmi_cuda_launched("pm_isosurface_async: triangles");
}
