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

template <typename T>
__global__ void __launch_bounds__(MC_THREADS)
mc_classify_kernel(mcd_volume v, mc_tiling tl, int indexed, unsigned int *ticket,
                   unsigned long long *state, mc_records rec, unsigned long long rec_cap,
                   unsigned long long *totals)
{
    __shared__ uint16_t info[MC_TILE];
    __shared__ unsigned long long warp_sum[MC_THREADS / 32];
    __shared__ unsigned long long base[3];
    __shared__ long long s_tile;
    __shared__ unsigned int s_cells;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
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
    const int wpad = (width + 31) & ~31;
    const int groups = wpad >= MC_THREADS ? 1 : MC_THREADS / wpad;
    const int kz = k + 1 < v.nz;
    unsigned int cells = 0;

    /* Classify: thread = column x of row group g. */
    const int g = wpad >= MC_THREADS ? 0 : t / wpad;
    if (g < groups) {
        const int r_begin = rows * g / groups, r_end = rows * (g + 1) / groups;
        const int step = wpad >= MC_THREADS ? MC_THREADS : wpad;
        for (int xb = wpad >= MC_THREADS ? 0 : 0; xb < wpad; xb += step) {
            const int x = xb + (wpad >= MC_THREADS ? t : t - g * wpad);
            const long long i = i0 + x;
            const int valid = x < width;
            const int xr = i + 1 < v.nx;
            const int own_right = valid && xr && (lane == 31 || x + 1 >= width);
            unsigned cur = 0, cur_r = 0;
            for (int r = r_begin; r < r_end; r++) {
                const long long j = j0 + r;
                if (r == r_begin) {
                    unsigned b = 0, br = 0;
                    if (valid) {
                        b = mcd_inside(v, mcd_load<T>(v, i, j, k));
                        if (kz) b |= mcd_inside(v, mcd_load<T>(v, i, j, k + 1)) << 1;
                    }
                    if (own_right) {
                        br = mcd_inside(v, mcd_load<T>(v, i + 1, j, k));
                        if (kz) br |= mcd_inside(v, mcd_load<T>(v, i + 1, j, k + 1)) << 1;
                    }
                    unsigned sh = __shfl_down_sync(0xffffffffu, b, 1);
                    cur = b;
                    cur_r = own_right ? br : sh;
                }
                const int jy = j + 1 < v.ny;
                unsigned nx_ = 0, nxr = 0;
                if (valid && jy) {
                    nx_ = mcd_inside(v, mcd_load<T>(v, i, j + 1, k));
                    if (kz) nx_ |= mcd_inside(v, mcd_load<T>(v, i, j + 1, k + 1)) << 1;
                }
                if (own_right && jy) {
                    nxr = mcd_inside(v, mcd_load<T>(v, i + 1, j + 1, k));
                    if (kz) nxr |= mcd_inside(v, mcd_load<T>(v, i + 1, j + 1, k + 1)) << 1;
                }
                unsigned sh = __shfl_down_sync(0xffffffffu, nx_, 1);
                if (!own_right) nxr = sh;
                if (valid) {
                    const int cell = xr && jy && kz;
                    unsigned cs = (cur & 1) | (cur_r & 1) << 1 | (nxr & 1) << 2 | (nx_ & 1) << 3 |
                                  (cur >> 1) << 4 | (cur_r >> 1) << 5 | (nxr >> 1) << 6 |
                                  (nx_ >> 1) << 7;
                    unsigned nt = cell ? mcd_tri_count[cs] : 0u;
                    unsigned cross = (xr && ((cur ^ cur_r) & 1)) | (jy && ((cur ^ nx_) & 1)) << 1 |
                                     (kz && ((cur ^ (cur >> 1)) & 1)) << 2;
                    unsigned act = indexed ? (nt || cross) : nt > 0;
                    cells += nt > 0;
                    info[r * width + x] = (uint16_t)((cell ? cs : 0u) | cross << 8 | nt << 11 | act << 14);
                }
                cur = nx_;
                cur_r = nxr;
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
    for (int m = 0; m < MC_PPT; m++) {
        int p = p0 + m;
        if (p < npts) {
            unsigned w = info[p];
            mine += (unsigned long long)(w >> 14 & 1) | (unsigned long long)(w >> 11 & 7) << 21 |
                    (unsigned long long)__popc(w >> 8 & 7) << 42;
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

    /* Chain to the previous tiles. */
    if (warp == 0) {
        unsigned long long a[3] = {MC_F(agg, 0), MC_F(agg, 1), MC_F(agg, 2)};
        unsigned long long *st[3] = {state, state + tl.ntiles, state + 2 * tl.ntiles};
        if (tile == 0) {
            if (lane < 3) {
                __threadfence();
                *(volatile unsigned long long *)(st[lane] + 0) = MC_FLAG_P | a[lane];
                base[lane] = 0;
            }
        } else {
            if (lane < 3) *(volatile unsigned long long *)(st[lane] + tile) = MC_FLAG_A | a[lane];
            unsigned long long b[3];
            for (int q = 0; q < 3; q++) b[q] = mc_lookback(st[q], tile);
            if (lane < 3) {
                *(volatile unsigned long long *)(st[lane] + tile) = MC_FLAG_P | (b[lane] + a[lane]);
                base[lane] = b[lane];
            }
        }
        if (tile == tl.ntiles - 1 && lane < 3) totals[lane] = base[lane] + a[lane];
        if (lane == 0 && s_cells) atomicAdd(&totals[3], (unsigned long long)s_cells);
    }
    __syncthreads();

    /* Records of the active points. */
    unsigned long long rb = base[0] + MC_F(excl, 0), tb = base[1] + MC_F(excl, 1),
                       cb = base[2] + MC_F(excl, 2);
    for (int m = 0; m < MC_PPT; m++) {
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

pm_status mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int indexed,
                      pm_sample_type type, unsigned int *ticket, unsigned long long *state,
                      mc_records rec, unsigned long long rec_cap, unsigned long long *totals)
{
    PMI_TRY(mcd_tables_upload(pmi_cuda(ctx)->device));
    cudaStream_t s = pmi_cuda(ctx)->stream;
    dim3 grid((unsigned)tl.ntiles);
    switch (type) {
    case PM_SAMPLE_U8:
        mc_classify_kernel<uint8_t><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals);
        break;
    case PM_SAMPLE_U16:
        mc_classify_kernel<uint16_t><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals);
        break;
    case PM_SAMPLE_I16:
        mc_classify_kernel<int16_t><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals);
        break;
    case PM_SAMPLE_F32:
        mc_classify_kernel<float><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals);
        break;
    case PM_SAMPLE_F64:
        mc_classify_kernel<double><<<grid, MC_THREADS, 0, s>>>(v, tl, indexed, ticket, state, rec, rec_cap, totals);
        break;
    }
    return pmi_cuda_launched("pm_isosurface: classification");
}
