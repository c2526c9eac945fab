/* CUDA marching cubes, pass 2: the expansion of the records that pass 1
 * (mc_stream.cu, mc_classify.cu) left compacted in lattice order, with
 * exact prefixes of their triangles and owned-edge crossings, into the
 * mesh. The vertices and the soup take blocks of 256 records, whose
 * outputs are a contiguous range, each record listing its outputs at its
 * prefix in shared memory; the indexed triangles (and the soup gathered per
 * triangle) take one thread per triangle, which finds its record by a
 * search over the prefixes (the traversal of a HistoPyramid whose levels
 * are the sorted prefixes), starting from the start table. An edge's owner
 * comes from the row table (each lattice row's first record). A thread
 * reads the few samples around its edge and writes position and normal,
 * so the writes are coalesced and the reads stay in L1/L2. Output order
 * and arithmetic are the CPU backend's, bit for bit. */
#include "cuda/mc_internal.cuh"

MCD_TABLES_UPLOAD

/* Last r in [lo, hi] with a[r] <= key (a[lo] <= key holds). */
static __device__ __forceinline__ long long mc_last_le(const unsigned long long *a, long long lo,
                                                       long long hi, unsigned long long key)
{
    while (lo < hi) {
        long long mid = (lo + hi + 1) >> 1;
        if (__ldg(a + mid) <= key)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The block's outputs start at key `first` of the sorted prefixes `pref`:
 * thread 0 reads the first record from `starts` (entry sstride * block:
 * the soup's per-triangle gather reads the table of 256 / 3 triangles per
 * entry) or, without that table (a soup gathered per triangle where the
 * classification wrote none), finds it by a binary search; the block loads
 * the next MC_WIN prefixes into shared memory, and each thread searches
 * there (falling back to global memory past the window). Call from every
 * thread. */
#define MC_WIN 512
static __device__ __forceinline__ long long
mc_find(const unsigned long long *pref, long long nrec, const long long *starts,
        unsigned long long first, unsigned long long key, unsigned long long *s_pref,
        long long *s_r0, unsigned sstride = 1)
{
    if (threadIdx.x == 0)
        *s_r0 = starts ? __ldg(starts + (unsigned long long)sstride * blockIdx.x)
                       : mc_last_le(pref, 0, nrec - 1, first);
    __syncthreads();
    const long long r0 = *s_r0;
    const int nwin = (int)min((long long)MC_WIN, nrec - r0);
    for (int w = threadIdx.x; w < nwin; w += blockDim.x)
        s_pref[w] = __ldg(pref + r0 + w);
    __syncthreads();
    if (key >= s_pref[nwin - 1]) {
        if (nwin < MC_WIN) return r0 + nwin - 1;
        return mc_last_le(pref, r0 + nwin - 1, nrec - 1, key);
    }
    int lo = 0, hi = nwin - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (s_pref[mid] <= key)
            lo = mid;
        else
            hi = mid - 1;
    }
    return r0 + lo;
}

/* The kernels' outputs from dc (pm_isosurface_async); returns when the
 * block has none (block-uniform, before any barrier). */
#define MC_DCOUNTS(nout_expr)                                                                      \
    do {                                                                                           \
        if (dc) {                                                                                  \
            if (!dc->ok) return;                                                                   \
            nrec = (long long)dc->nrec;                                                            \
            nout = (nout_expr);                                                                    \
        }                                                                                          \
        if ((unsigned long long)blockIdx.x * blockDim.x >= nout) return;                           \
    } while (0)

/* The same for the kernels that take blocks of `per` records: nrec and the
 * output limit from dc; returns when the block has no record. Defines r0,
 * the block's first record. */
#define MC_DCOUNTS_RECORDS(limit, dc_limit, per)                                                   \
    if (dc) {                                                                                      \
        if (!dc->ok) return;                                                                       \
        nrec = (long long)dc->nrec;                                                                \
        limit = (dc_limit);                                                                        \
    }                                                                                              \
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

/* Soup from the cells (MC_SOUP_CELLS: small volumes, where pass 2 is
 * bound by its latencies rather than by its arithmetic, and the fallback
 * where the indexed vertices get no room): block b takes records
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
 * than the waves (bench/RESULTS-cudamc.md, session 24). */
#define MC_CELL_RECS_SMALL 80
#define MC_CELL_RECS_LARGE 128
#define MC_CELL_SMALL (1ull << 22)
static int mc_cell_recs(const mcd_volume &v)
{
    return (unsigned long long)v.nx * (unsigned long long)v.ny * (unsigned long long)v.nz <=
                   MC_CELL_SMALL
               ? MC_CELL_RECS_SMALL
               : MC_CELL_RECS_LARGE;
}
/* Blocks of mc_soup_cell_kernel for n records of R a block (at least one
 * launched). */
static unsigned long long mc_cell_blocks(unsigned long long n, int R)
{
    return n ? (n + (unsigned long long)R - 1) / (unsigned long long)R : 1;
}
template <typename T, int MODE, int R>
static __global__ void __launch_bounds__(MC_THREADS)
    mc_soup_cell_kernel(mcd_volume v, mc_records rec, long long nrec, unsigned long long nvout,
                        float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    static_assert(R <= 256, "a record's number in the block fits a byte");
    __shared__ long long s_ijk[3][R]; /* each record's point, split once */
    __shared__ unsigned s_tp[R];
    __shared__ uint8_t s_cs[R];
    __shared__ uint8_t s_own[5 * R]; /* the record of each of the block's triangles */
    __shared__ unsigned s_total;
    MC_DCOUNTS_RECORDS(nvout, 3 * dc->ntri, R);
    const int t = threadIdx.x, nvalid = (int)min((long long)R, nrec - r0);
    const unsigned long long T0 = __ldg(rec.tri + r0);
    if (t < nvalid) {
        const long long r = r0 + t;
        const unsigned long long tri = __ldg(rec.tri + r);
        const unsigned info = __ldg(rec.info + r), nt = info >> 11 & 7u;
        s_tp[t] = (unsigned)(tri - T0);
        mc_point_ijk(v, __ldg(rec.point + r), &s_ijk[0][t], &s_ijk[1][t], &s_ijk[2][t]);
        s_cs[t] = (uint8_t)(info & 255u);
        for (unsigned q = 0; q < nt; q++)
            s_own[tri - T0 + q] = (uint8_t)t;
        if (t == nvalid - 1) s_total = (unsigned)(tri + nt - T0);
    }
    __syncthreads();
    const unsigned n3 = 3 * s_total;
    for (unsigned u = t; u < n3; u += MC_THREADS) {
        const unsigned lt = u / 3, m = u - 3 * lt;
        const unsigned long long o = 3 * (T0 + lt) + m;
        if (o >= nvout) break; /* o grows with u; no barrier follows */
        const int a = s_own[lt];
        const unsigned eo = mcd_tri_origin[s_cs[a]][3 * (lt - s_tp[a]) + m];
        float pp[3], n[3];
        mcd_vertex<T, MODE>(v, s_ijk[0][a] + MCD_ORIGIN_DX(eo), s_ijk[1][a] + MCD_ORIGIN_DY(eo),
                            s_ijk[2][a] + MCD_ORIGIN_DZ(eo), MCD_ORIGIN_AXIS(eo), pp, n);
        mc_store(pos, nrm, o, pp, n);
    }
}

/* Indexed vertices by blocks of records: block b takes records [256 b,
 * 256 b + 256), whose crossings are a contiguous range starting at the
 * first one's prefix. Each record lists its crossings (record and axis) at
 * its prefix in shared memory, so thread u of the range reads its record
 * there (no search, no start table, no window of another block's prefixes
 * to wait for), then computes the vertex of the owned edge on that axis.
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

/* Record of the lattice point that owns the edge whose lower end is at
 * offsets eo (mcd_tri_origin) from the cell at point p (record r, lattice
 * row prow): that point has a record (the edge crosses), at or after r.
 * Same row (dy = dz = 0): it is p or p + 1, so record r or r + 1.
 * Otherwise a binary search over the records of the owner's row (row
 * prow + dy + ny*dz; rows: each row's first record). */
static __device__ __forceinline__ long long mc_owner(const mcd_volume &v, const mc_records &rec,
                                                     const unsigned long long *rows, long long nrec,
                                                     long long r, unsigned long long p,
                                                     unsigned long long prow, unsigned eo)
{
    const int dx = MCD_ORIGIN_DX(eo), dy = MCD_ORIGIN_DY(eo), dz = MCD_ORIGIN_DZ(eo);
    if (!(dy | dz)) return r + dx;
    const unsigned long long nx = (unsigned long long)v.nx, ny = (unsigned long long)v.ny;
    const unsigned long long drow = (unsigned long long)dy + ny * dz;
    const unsigned long long owner = p + (unsigned long long)dx + nx * drow;
    const unsigned long long orow = prow + drow, nrows = ny * (unsigned long long)v.nz;
    long long lo = (long long)__ldg(rows + orow);
    long long hi = (orow + 1 < nrows ? (long long)__ldg(rows + orow + 1) : nrec) - 1;
    while (lo < hi) { /* first record with point >= owner */
        const long long mid = (lo + hi) >> 1;
        if (__ldg(rec.point + mid) < owner)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of the vertex on the edge at eo (mcd_tri_origin) of the cell at
 * point p (record r, row prow): the owner's crossing prefix plus the
 * edge's rank among its crossings. */
static __device__ __forceinline__ unsigned long long
mc_edge_vertex(const mcd_volume &v, const mc_records &rec, const unsigned long long *rows,
               long long nrec, long long r, unsigned long long p, unsigned long long prow,
               unsigned eo)
{
    const long long ow = mc_owner(v, rec, rows, nrec, r, p, prow, eo);
    const unsigned bits = __ldg(rec.info + ow) >> 8 & 7u;
    return __ldg(rec.cross + ow) +
           (unsigned long long)__popc(bits & ((1u << MCD_ORIGIN_AXIS(eo)) - 1u));
}

/* Indexed triangles: one thread per triangle, its three edges' vertices. */
static __global__ void __launch_bounds__(MC_THREADS)
    mc_triangle_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows, long long nrec,
                       const long long *starts, unsigned long long nout, uint32_t *idx,
                       const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    MC_DCOUNTS(dc->ntri);
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x,
                             q = first + threadIdx.x;
    const long long r =
        mc_find(rec.tri, nrec, starts, first, q < nout ? q : nout - 1, s_pref, &s_r0);
    if (q < nout) {
        const int l = (int)(q - __ldg(rec.tri + r));
        const unsigned cs = __ldg(rec.info + r) & 255u;
        const unsigned long long p = __ldg(rec.point + r), prow = mc_row_of(v, p);
        for (int m = 0; m < 3; m++)
            idx[3 * q + m] = (uint32_t)mc_edge_vertex(v, rec, rows, nrec, r, p, prow,
                                                      mcd_tri_origin[cs][3 * l + m]);
    }
}

/* Soup from the indexed vertices (the CPU's mc_soup_from_indexed): one
 * thread per triangle finds its record once, the vertex indices of its
 * three edges (independent searches, in flight together), and copies
 * their positions and normals from vpos/vnrm (all the crossings, computed
 * once by the vertex kernel) into shared memory; the block then writes its
 * triangles' 9 floats each as consecutive, coalesced stores. starts: the
 * soup's start table (entry b: the record holding triangle 256 b / 3, so
 * this kernel's block b reads entry 3 b), or NULL. */
static __global__ void __launch_bounds__(MC_THREADS)
    mc_gather_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows, long long nrec,
                     const long long *starts, unsigned long long nout, const float *vpos,
                     const float *vnrm, float *pos, float *nrm, const mc_dcounts *dc)
{
    pmi_pdl_enter();
    __shared__ unsigned long long s_pref[MC_WIN];
    __shared__ long long s_r0;
    __shared__ float s_o[2][MC_THREADS * 9];
    MC_DCOUNTS(dc->ntri);
    const unsigned long long ntri = nout;
    const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x,
                             q = first + threadIdx.x;
    const long long r =
        mc_find(rec.tri, nrec, starts, first, q < ntri ? q : ntri - 1, s_pref, &s_r0, 3);
    if (q < ntri) {
        const int l = (int)(q - __ldg(rec.tri + r));
        const unsigned cs = __ldg(rec.info + r) & 255u;
        const unsigned long long p = __ldg(rec.point + r), prow = mc_row_of(v, p);
        unsigned long long vi[3];
#pragma unroll
        for (int m = 0; m < 3; m++)
            vi[m] = mc_edge_vertex(v, rec, rows, nrec, r, p, prow, mcd_tri_origin[cs][3 * l + m]);
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

/* Soup per record (MC_SOUP_RECORDS): one
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
 * mc_vertex_block_kernel). Triangles from ntout on are not written (the
 * caller's capacity; from dc in pm_isosurface_async). Vertex indices fit
 * 32 bits (pmi_mc_expand checks).
 *
 * Lattice edges by owner corner (Bourke numbering, src/core/mc_tables.c):
 * corner 0 (the point) owns edges 0 (x), 3 (y), 8 (z); corner 1 (x + 1)
 * edges 1 (y), 9 (z); corner 3 (y + 1) edges 2 (x), 11 (z); corner 2
 * (x + 1, y + 1) edge 10 (z); corner 4 (z + 1) edges 4 (x), 7 (y); corner
 * 5 (x + 1, z + 1) edge 5 (y); corner 7 (y + 1, z + 1) edge 6 (x). */
#define MC_E(e) (1u << (e))
/* Crossing bits (*b) and crossing prefix (*c) of owner record o, when
 * `used` (the cell uses an edge it owns). */
static __device__ __forceinline__ void
mc_owner_load(const mc_records &rec, unsigned used, long long o, unsigned *b, unsigned long long *c)
{
    if (used) {
        *b = __ldg(rec.info + o) >> 8;
        *c = __ldg(rec.cross + o);
    }
}
static __global__ void __launch_bounds__(MC_THREADS)
    mc_soup_record_kernel(mcd_volume v, mc_records rec, const unsigned long long *rows,
                          long long nrec, unsigned long long ntout, float *pos, float *nrm,
                          const float *vpos, const float *vnrm, const mc_dcounts *dc)
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
        for (unsigned q = 0; q < 3 * nt; q++)
            em |= 1u << mcd_tri_table[cs][q];
        const unsigned long long nx = (unsigned long long)v.nx, ny = (unsigned long long)v.ny;
        const unsigned long long nrows = ny * (unsigned long long)v.nz, prow = mc_row_of(v, p);
        /* Corners 3 (g = 0), 4 (g = 1), 7 (g = 2): the first record at or
         * after the corner's point, in the point's row. */
        const unsigned need[3] = {em & (MC_E(2) | MC_E(11) | MC_E(10)),
                                  em & (MC_E(4) | MC_E(7) | MC_E(5)), em & MC_E(6)};
        const unsigned long long drow[3] = {1, ny, 1 + ny},
                                 tgt[3] = {p + nx, p + nx * ny, p + nx + nx * ny};
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
                    if (__ldg(rec.point + mid) < tgt[g])
                        lo[g] = mid + 1;
                    else
                        hi[g] = mid;
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
    for (unsigned q = 0; q < nt; q++)
        s_own[tri - T0 + q] = (uint8_t)t;
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
            for (int c = 0; c < 3; c++)
                pos[3 * o + c] = __ldg(vpos + 3 * (unsigned long long)vi + c);
            if (nrm)
#pragma unroll
                for (int c = 0; c < 3; c++)
                    nrm[3 * o + c] = __ldg(vnrm + 3 * (unsigned long long)vi + c);
        }
    }
}

/* The vertex kernels: indexed vertices by blocks of records, or the soup
 * from the cells; n vertices at most. */
template <typename T, int MODE>
static void mc_launch_vertices(cudaStream_t s, int pdl, int cells, const mcd_volume &v,
                               mc_records rec, long long nrec, unsigned long long n, float *pos,
                               float *nrm, const mc_dcounts *dc)
{
    if (cells) {
        const int R = mc_cell_recs(v);
        pmi_launch(pdl,
                   R == MC_CELL_RECS_SMALL ? mc_soup_cell_kernel<T, MODE, MC_CELL_RECS_SMALL>
                                           : mc_soup_cell_kernel<T, MODE, MC_CELL_RECS_LARGE>,
                   (unsigned)mc_cell_blocks((unsigned long long)(nrec > 0 ? nrec : 0), R),
                   MC_THREADS, s, v, rec, nrec, n, pos, nrm, dc);
    } else
        pmi_launch(pdl, mc_vertex_block_kernel<T, MODE>, mc_blocks((unsigned long long)nrec),
                   MC_THREADS, s, v, rec, nrec, n, pos, nrm, dc);
}

template <typename T>
static void mc_launch_mode(cudaStream_t s, int pdl, pm_normals mode, int cells, const mcd_volume &v,
                           mc_records rec, long long nrec, unsigned long long n, float *pos,
                           float *nrm, const mc_dcounts *dc)
{
    switch (mode) {
    case PM_NORMALS_FORWARD:
        mc_launch_vertices<T, PM_NORMALS_FORWARD>(s, pdl, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_NORMALS_SOBEL:
        mc_launch_vertices<T, PM_NORMALS_SOBEL>(s, pdl, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_NORMALS_NONE:
        mc_launch_vertices<T, PM_NORMALS_NONE>(s, pdl, cells, v, rec, nrec, n, pos, NULL, dc);
        break;
    default:
        mc_launch_vertices<T, PM_NORMALS_CENTRAL>(s, pdl, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    }
}

static void mc_launch_type(cudaStream_t s, int pdl, pm_sample_type type, pm_normals mode, int cells,
                           const mcd_volume &v, mc_records rec, long long nrec,
                           unsigned long long n, float *pos, float *nrm, const mc_dcounts *dc)
{
    switch (type) {
    case PM_SAMPLE_U8:
        mc_launch_mode<uint8_t>(s, pdl, mode, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_SAMPLE_U16:
        mc_launch_mode<uint16_t>(s, pdl, mode, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_SAMPLE_I16:
        mc_launch_mode<int16_t>(s, pdl, mode, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_SAMPLE_F32:
        mc_launch_mode<float>(s, pdl, mode, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    case PM_SAMPLE_F64:
        mc_launch_mode<double>(s, pdl, mode, cells, v, rec, nrec, n, pos, nrm, dc);
        break;
    }
}

/* Grid size of the kernels that take blocks of records, 0 when too large
 * for one launch. */
static unsigned mc_record_blocks(unsigned long long nrec)
{
    const unsigned long long b = (nrec + MC_THREADS - 1) / MC_THREADS;
    return b > 0x7fffffffull ? 0u : b < 1 ? 1u : (unsigned)b;
}

pm_status pmi_mc_expand(pm_context *ctx, int pdl, pm_sample_type type, pm_normals mode,
                        const mcd_volume &v, const mc_records &rec, const unsigned long long *rows,
                        const mc_expand_job &j, mc_soup *soup_ran)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    const unsigned long long nr = j.nrec > 0 ? (unsigned long long)j.nrec : 0;
    mc_soup soup = j.soup;
    *soup_ran = soup;
    if (soup == MC_SOUP_CELLS) {
        if (mc_cell_blocks(nr, mc_cell_recs(v)) > 0x7fffffffull)
            return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: too many records for one launch");
        if (j.ntri)
            mc_launch_type(s, pdl, type, mode, 1, v, rec, j.nrec, 3 * j.ntri, j.pos, j.nrm, j.dc);
        return pmi_cuda_launched("pm_isosurface: soup");
    }
    const unsigned rgrid = mc_record_blocks(nr);
    if (!rgrid)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: too many records for one launch");
    /* The indexed vertices: the mesh's, or the soup's in the scratch. */
    if (j.nvert)
        mc_launch_type(s, pdl, type, mode, 0, v, rec, j.nrec, j.nvert,
                       soup == MC_SOUP_NONE ? j.pos : j.vpos, soup == MC_SOUP_NONE ? j.nrm : j.vnrm,
                       j.dc);
    PMI_TRY(pmi_cuda_launched("pm_isosurface: vertices"));
    if (soup == MC_SOUP_NONE) {
        if (j.ntri && j.idx)
            pmi_launch(pdl, mc_triangle_kernel, mc_blocks(j.ntri), MC_THREADS, s, v, rec, rows,
                       j.nrec, j.tstarts, j.ntri, j.idx, j.dc);
        return pmi_cuda_launched("pm_isosurface: triangles");
    }
    /* The soup per record keeps its vertex indices in 32 bits. */
    if (soup == MC_SOUP_RECORDS && j.nvert > UINT32_MAX + 1ull) soup = MC_SOUP_GATHER;
    *soup_ran = soup;
    const float *vn = j.nrm ? j.vnrm : NULL;
    if (j.ntri && soup == MC_SOUP_RECORDS)
        pmi_launch(pdl, mc_soup_record_kernel, rgrid, MC_THREADS, s, v, rec, rows, j.nrec, j.ntri,
                   j.pos, j.nrm, (const float *)j.vpos, vn, j.dc);
    else if (j.ntri)
        pmi_launch(pdl, mc_gather_kernel, mc_blocks(j.ntri), MC_THREADS, s, v, rec, rows, j.nrec,
                   j.tstarts, j.ntri, (const float *)j.vpos, vn, j.pos, j.nrm, j.dc);
    return pmi_cuda_launched("pm_isosurface: soup");
}

/* Kernel preloading (preload.cu): the vertex kernels of one sample type,
 * central normals and none first. */
template <typename T> static int mc_expand_preload_type(pmi_preload *p)
{
#define MC_CELL_PAIR(M)                                                                            \
    (const void *)mc_soup_cell_kernel<T, M, MC_CELL_RECS_SMALL>,                                   \
        (const void *)mc_soup_cell_kernel<T, M, MC_CELL_RECS_LARGE>
    const void *const k[] = {(const void *)mc_vertex_block_kernel<T, PM_NORMALS_CENTRAL>,
                             MC_CELL_PAIR(PM_NORMALS_CENTRAL),
                             (const void *)mc_vertex_block_kernel<T, PM_NORMALS_NONE>,
                             MC_CELL_PAIR(PM_NORMALS_NONE),
                             (const void *)mc_vertex_block_kernel<T, PM_NORMALS_FORWARD>,
                             MC_CELL_PAIR(PM_NORMALS_FORWARD),
                             (const void *)mc_vertex_block_kernel<T, PM_NORMALS_SOBEL>,
                             MC_CELL_PAIR(PM_NORMALS_SOBEL)};
#undef MC_CELL_PAIR
    return pmi_preload_all(p, k);
}

void pmi_mc_expand_preload(pmi_preload *p, int tier)
{
    if (tier == 0) {
        const void *const k[] = {(const void *)mc_triangle_kernel,
                                 (const void *)mc_soup_record_kernel};
        if (pmi_preload_all(p, k)) mc_expand_preload_type<float>(p);
        return;
    }
    if (pmi_preload_fn(p, (const void *)mc_gather_kernel) && mc_expand_preload_type<uint8_t>(p) &&
        mc_expand_preload_type<uint16_t>(p) && mc_expand_preload_type<int16_t>(p))
        mc_expand_preload_type<double>(p);
}
