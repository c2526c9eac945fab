/* CUDA marching cubes, pass 1: classification fused with the compaction of
 * active lattice points (the HistoPyramid's base level, stored compacted).
 * One read of the volume: each block takes a tile of whole rows (a band of
 * rows in one slice, or a chunk of one long row), each thread marches a
 * column of the band along y keeping the inside bits of the previous row in
 * registers, neighbours along x come by warp shuffles. The tile's counts
 * are scanned in the block and chained to the previous tiles by a
 * single-pass decoupled look-back (Merrill & Garland 2016), so the records
 * come out in lattice order with exact 64-bit prefixes of triangles and
 * owned-edge crossings: everything the expansion needs. */
#include "cuda/mc_internal.cuh"

MCD_TABLES_UPLOAD

/* One 64-bit tile state per quantity: 2 flag bits and a 62-bit value,
 * written and read whole. */
#define MC_FLAG_A (1ull << 62)
#define MC_FLAG_P (2ull << 62)
#define MC_VALUE (MC_FLAG_A - 1)

/* Exclusive prefix of tile `tile` (> 0) for one quantity; all 32 lanes of a
 * warp call it, looking back 32 predecessors at a time. */
static __device__ unsigned long long mc_lookback(unsigned long long *state, long long tile)
{
    const unsigned lane = threadIdx.x & 31;
    unsigned long long excl = 0;
    long long end = tile - 1;
    for (;;) {
        long long idx = end - (long long)lane;
        unsigned long long s;
        for (;;) {
            s = idx >= 0 ? *(volatile unsigned long long *)(state + idx) : MC_FLAG_P;
            if (!__any_sync(0xffffffffu, (s >> 62) == 0)) break;
        }
        unsigned pmask = __ballot_sync(0xffffffffu, (s >> 62) == 2);
        unsigned long long val = s & MC_VALUE;
        if (pmask && (int)lane > __ffs(pmask) - 1) val = 0;
        for (int off = 16; off; off >>= 1) val += __shfl_xor_sync(0xffffffffu, val, off);
        excl += val;
        if (pmask) break;
        end -= 32;
    }
    return excl;
}

/* Packed per-point counts: active (record) | triangles << 21 | crossings << 42;
 * a tile has at most MC_TILE points, so no field overflows. */
#define MC_F(x, f) (((x) >> (21 * (f))) & 0x1fffffull)

/* Inside bits of the `cnt` (<= 4) samples p[0..cnt-1]; VEC: p is aligned
 * to 4 samples, so a full group is one vector load. */
template <typename T> struct mc_vec;
template <> struct mc_vec<uint8_t> { typedef uchar4 type; };
template <> struct mc_vec<uint16_t> { typedef ushort4 type; };
template <> struct mc_vec<int16_t> { typedef short4 type; };
template <> struct mc_vec<float> { typedef float4 type; };

template <typename T, int VEC>
static __device__ __forceinline__ unsigned mc_in5(const mcd_volume &v, const T *p, int cnt)
{
    /* Inside bits of the cnt (<= 5) samples p[0..cnt-1]: the thread's 4
     * points and the first point of the next group. VEC: p is aligned to 4
     * samples, so the first four are one vector load. */
    if constexpr (VEC && sizeof(T) <= 4) {
        if (cnt >= 4) {
            typename mc_vec<T>::type w = __ldg((const typename mc_vec<T>::type *)p);
            unsigned m = mcd_inside_t<T>(v, w.x) | mcd_inside_t<T>(v, w.y) << 1 | mcd_inside_t<T>(v, w.z) << 2 |
                         mcd_inside_t<T>(v, w.w) << 3;
            if (cnt == 5) m |= mcd_inside_t<T>(v, __ldg(p + 4)) << 4;
            return m;
        }
    }
    if constexpr (VEC && sizeof(T) == 8) {
        if (cnt >= 4) {
            double2 w0 = __ldg((const double2 *)p), w1 = __ldg((const double2 *)p + 1);
            unsigned m = mcd_inside_t<T>(v, w0.x) | mcd_inside_t<T>(v, w0.y) << 1 | mcd_inside_t<T>(v, w1.x) << 2 |
                         mcd_inside_t<T>(v, w1.y) << 3;
            if (cnt == 5) m |= mcd_inside_t<T>(v, __ldg(p + 4)) << 4;
            return m;
        }
    }
    unsigned m = 0;
#pragma unroll
    for (int q = 0; q < 5; q++)
        if (q < cnt) m |= mcd_inside_t<T>(v, __ldg(p + q)) << q;
    return m;
}

#define MC_BATCH 8 /* rows loaded together, for memory-level parallelism */
#ifndef MC_MINB
#define MC_MINB 3 /* blocks per SM the register budget is cut for */
#endif

template <typename T, int VEC>
__global__ void __launch_bounds__(MC_THREADS, MC_MINB)
mc_classify_kernel(mcd_volume v, mc_tiling tl, int indexed, unsigned int *ticket,
                   unsigned long long *state, mc_records rec, unsigned long long rec_cap,
                   unsigned long long *totals)
{
    __shared__ __align__(16) uint16_t info[MC_TILE];
    __shared__ uint8_t s_nt[256];
    __shared__ unsigned long long warp_sum[MC_THREADS / 32];
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
    const long long per_slice = tl.bands * tl.chunks;
    const long long k = tile / per_slice;
    const long long rem = tile - k * per_slice;
    const long long band = rem / tl.chunks, chunk = rem - band * tl.chunks;
    const long long j0 = band * tl.rows;
    const int rows = (int)min((long long)tl.rows, v.ny - j0);
    const long long i0 = chunk * tl.width;
    const int width = (int)min((long long)tl.width, v.nx - i0);
    const int kz = k + 1 < v.nz;
    const T *d = (const T *)v.data;
    unsigned int cells = 0;

    /* Classify: a thread takes 4 consecutive points of a row and marches
     * its row group along y; row groups split the band when a row needs
     * fewer than MC_THREADS threads. */
    const int nchunk = (width + 3) >> 2;
    const int lanes = (nchunk + 31) & ~31;
    const int groups = lanes >= MC_THREADS ? 1 : MC_THREADS / lanes;
    const int g = lanes >= MC_THREADS ? 0 : t / lanes;
    if (g < groups) {
        const int r_begin = rows * g / groups, r_end = rows * (g + 1) / groups;
        const int cstep = lanes >= MC_THREADS ? MC_THREADS : lanes;
        for (int cb = 0; cb < lanes; cb += cstep) {
            const int c = cb + (lanes >= MC_THREADS ? t : t - g * lanes);
            const int x = 4 * c;
            const int cnt = max(0, min(4, width - x));
            const long long i = i0 + x;
            /* Samples x .. x+4 of the row (x + 4 is the next thread's
             * first: an L1 hit), fewer at the end of the row. */
            const int cnt5 = cnt ? (int)min(5ll, v.nx - i) : 0;
            const T *col = d + i + k * v.ss;
            unsigned e0 = 0, e1 = 0;
            {
                const long long j = j0 + r_begin;
                e0 = mc_in5<T, VEC>(v, col + j * v.rs, cnt5);
                if (kz) e1 = mc_in5<T, VEC>(v, col + j * v.rs + v.ss, cnt5);
            }
            for (int rb = r_begin; rb < r_end; rb += MC_BATCH) {
                unsigned m0[MC_BATCH], m1[MC_BATCH];
#pragma unroll
                for (int b = 0; b < MC_BATCH; b++) {
                    const long long jn = j0 + rb + b + 1;
                    const int ok = rb + b < r_end && jn < v.ny;
                    m0[b] = ok ? mc_in5<T, VEC>(v, col + jn * v.rs, cnt5) : 0u;
                    m1[b] = ok && kz ? mc_in5<T, VEC>(v, col + jn * v.rs + v.ss, cnt5) : 0u;
                }
#pragma unroll
                for (int b = 0; b < MC_BATCH; b++) {
                    const unsigned n0 = m0[b], n1 = m1[b];
                    const int row = rb + b;
                    /* Fast path: the 2 x 2 rows x 5 columns around the 4
                     * points agree, so no cell is active and no edge crosses. */
                    const unsigned full = (1u << cnt5) - 1u;
                    if (row < r_end && e0 == n0 && e0 == e1 && e0 == n1 && (e0 == 0u || e0 == full)) {
#pragma unroll
                        for (int q = 0; q < 4; q++)
                            if (q < cnt) info[row * width + x + q] = 0;
                    } else if (row < r_end) {
                        const int jy = j0 + row + 1 < v.ny;
#pragma unroll
                        for (int q = 0; q < 4; q++) {
                            if (q < cnt) {
                                const int xr = i + q + 1 < v.nx;
                                const int cell = xr && jy && kz;
                                unsigned cs = (e0 >> q & 1) | (e0 >> (q + 1) & 1) << 1 |
                                              (n0 >> (q + 1) & 1) << 2 | (n0 >> q & 1) << 3 |
                                              (e1 >> q & 1) << 4 | (e1 >> (q + 1) & 1) << 5 |
                                              (n1 >> (q + 1) & 1) << 6 | (n1 >> q & 1) << 7;
                                cs = cell ? cs : 0u;
#ifdef MC_DEBUG_CHECK
                                if (cell) {
                                    const long long ii = i + q, jj = j0 + row;
                                    unsigned ref = 0;
                                    for (int cc = 0; cc < 8; cc++)
                                        ref |= (unsigned)mcd_inside(v, mcd_load<T>(v, ii + mcd_corner[cc][0], jj + mcd_corner[cc][1], k + mcd_corner[cc][2])) << cc;
                                    if (ref != cs)
                                        printf("MISMATCH tile %lld t %d c %d q %d row %d (i %lld j %lld k %lld) cs %x ref %x e0 %x e1 %x n0 %x n1 %x cnt %d hr %d VEC %d\n",
                                               tile, t, c, q, row, ii, jj, k, cs, ref, e0, e1, n0, n1, cnt, cnt5, VEC);
                                }
#endif
                                unsigned nt = s_nt[cs];
                                unsigned cross = (xr && ((e0 ^ (e0 >> 1)) >> q & 1)) |
                                                 (jy && ((e0 ^ n0) >> q & 1)) << 1 |
                                                 (kz && ((e0 ^ e1) >> q & 1)) << 2;
                                unsigned act = indexed ? (nt || cross) : nt > 0;
                                cells += nt > 0;
                                info[row * width + x + q] = (uint16_t)(cs | cross << 8 | nt << 11 | act << 14);
                            }
                        }
                    }
                    e0 = n0;
                    e1 = n1;
                }
            }
        }
    }
    for (int off = 16; off; off >>= 1) cells += __shfl_xor_sync(0xffffffffu, cells, off);
    if (lane == 0 && cells) atomicAdd(&s_cells, cells);
    __syncthreads();

    /* Block scan over the tile in lattice order: thread t owns MC_PPT
     * consecutive points. */
    const int npts = rows * width;
    const int p0 = t * MC_PPT;
    unsigned long long mine = 0;
#pragma unroll
    for (int m8 = 0; m8 < MC_PPT; m8 += 8) {
        uint4 w4 = *(const uint4 *)(info + p0 + m8);
        const unsigned ww[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
        for (int h = 0; h < 8; h++) {
            if (p0 + m8 + h < npts) {
                unsigned w = (ww[h >> 1] >> (16 * (h & 1))) & 0xffffu;
                mine += (unsigned long long)(w >> 14 & 1) | (unsigned long long)(w >> 11 & 7) << 21 |
                        (unsigned long long)__popc(w >> 8 & 7) << 42;
            }
        }
    }
    unsigned long long incl = mine;
    for (int off = 1; off < 32; off <<= 1) {
        unsigned long long o = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += o;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    unsigned long long before = 0, agg = 0;
    for (int w = 0; w < MC_THREADS / 32; w++) {
        if (w < warp) before += warp_sum[w];
        agg += warp_sum[w];
    }
    unsigned long long excl = before + incl - mine;

    /* Chain to the previous tiles: warp q looks back for quantity q. */
    if (warp < 3) {
        unsigned long long a = MC_F(agg, warp);
        unsigned long long *st = state + warp * tl.ntiles;
        unsigned long long b = 0;
#ifdef MC_NO_LOOKBACK
        if (1) { /* timing experiment only: wrong prefixes */
#else
        if (tile == 0) {
#endif
            if (lane == 0) *(volatile unsigned long long *)st = MC_FLAG_P | a;
        } else {
            if (lane == 0) *(volatile unsigned long long *)(st + tile) = MC_FLAG_A | a;
            b = mc_lookback(st, tile);
            if (lane == 0) *(volatile unsigned long long *)(st + tile) = MC_FLAG_P | (b + a);
        }
        if (lane == 0) {
            base[warp] = b;
            if (tile == tl.ntiles - 1) totals[warp] = b + a;
        }
    }
    if (t == 0 && s_cells) atomicAdd(&totals[3], (unsigned long long)s_cells);
    __syncthreads();

    /* Records of the active points. */
    unsigned long long rb = base[0] + MC_F(excl, 0), tb = base[1] + MC_F(excl, 1),
                       cb = base[2] + MC_F(excl, 2);
    for (int m = 0; m < (MC_F(mine, 0) ? MC_PPT : 0); m++) {
        int p = p0 + m;
        if (p >= npts) break;
        unsigned w = info[p];
        if (w >> 14 & 1) {
            if (rb < rec_cap) {
                int r = p / width, x = p - r * width;
                rec.point[rb] = (unsigned long long)(i0 + x) +
                                (unsigned long long)v.nx * (unsigned long long)(j0 + r + v.ny * k);
                rec.info[rb] = (uint16_t)w;
                rec.tri[rb] = tb;
                if (indexed) rec.cross[rb] = cb;
            }
            rb++;
        }
        tb += w >> 11 & 7;
        cb += __popc(w >> 8 & 7);
    }
}

mc_tiling mc_make_tiling(const pm_volume *vol)
{
    mc_tiling tl;
    if (vol->nx <= MC_TILE) {
        tl.width = (long long)vol->nx;
        tl.rows = (long long)(MC_TILE / vol->nx);
        if (tl.rows > (long long)vol->ny) tl.rows = (long long)vol->ny;
    } else {
        tl.width = MC_TILE;
        tl.rows = 1;
    }
    tl.chunks = ((long long)vol->nx + tl.width - 1) / tl.width;
    tl.bands = ((long long)vol->ny + tl.rows - 1) / tl.rows;
    tl.ntiles = (long long)vol->nz * tl.bands * tl.chunks;
    return tl;
}

#define MC_LAUNCH(T)                                                                           \
    (vec ? mc_classify_kernel<T, 1><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals) \
         : mc_classify_kernel<T, 0><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals))

pm_status mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int indexed,
                      pm_sample_type type, unsigned int *ticket, unsigned long long *state,
                      mc_records rec, unsigned long long rec_cap, unsigned long long *totals)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    dim3 grid((unsigned)tl.ntiles);
    /* Vector loads when every group of 4 samples starts aligned. */
    size_t es = pm_sample_size(type);
    int vec = ((uintptr_t)v.data % (4 * es)) == 0 && v.rs % 4 == 0 && v.ss % 4 == 0;
    switch (type) {
    case PM_SAMPLE_U8: MC_LAUNCH(uint8_t); break;
    case PM_SAMPLE_U16: MC_LAUNCH(uint16_t); break;
    case PM_SAMPLE_I16: MC_LAUNCH(int16_t); break;
    case PM_SAMPLE_F32: MC_LAUNCH(float); break;
    case PM_SAMPLE_F64: MC_LAUNCH(double); break;
    }
    return pmi_cuda_launched("pm_isosurface: classification");
}
