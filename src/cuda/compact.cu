/* Order-preserving compaction of u8 flags into u64 indices in a single pass
 * (decoupled look-back, Merrill and Garland 2016): 8192 flags per tile read
 * with 16-byte loads, ranked with one packed warp scan, in-tile offsets
 * staged in shared memory so the u64 outputs are written contiguously. */
#include "cuda/cuda_internal.h"

#define CMP_THREADS 256
#define CMP_ROUNDS 2 /* uint4 (16 flags) per thread and round */
#define CMP_TILE (CMP_THREADS * CMP_ROUNDS * 16)

/* 4-bit mask of the non-zero bytes of w: __vcmpne4 gives 0xff per non-zero
 * byte, the multiply gathers bit 0 of each byte into bits 21..24. */
static __device__ __forceinline__ unsigned nz4(unsigned w)
{
    return (((__vcmpne4(w, 0u) & 0x01010101u) * 0x00204081u) >> 21) & 0xfu;
}

static __global__ void __launch_bounds__(CMP_THREADS)
    compact_kernel(const uint8_t *__restrict__ flags, size_t n, int vec,
                   unsigned long long *__restrict__ out, size_t capacity, unsigned long long *state,
                   unsigned long long num_tiles, unsigned long long *count_out)
{
    __shared__ unsigned short stage[CMP_TILE];
    __shared__ unsigned warp_tot[CMP_THREADS / 32];
    __shared__ unsigned pref[32];
    __shared__ unsigned long long s_excl;
    __shared__ unsigned s_agg;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    /* Tiles follow blockIdx: blocks are dispatched in index order, so every
     * predecessor of a resident block is resident or done (as in CUB); an
     * atomic tile counter would add a round trip before the first load. */
    const unsigned long long tile = blockIdx.x;
    const size_t base = (size_t)tile * CMP_TILE;
    unsigned m[CMP_ROUNDS];
    if (vec && base + CMP_TILE <= n) {
        uint4 w[CMP_ROUNDS];
#pragma unroll
        for (int r = 0; r < CMP_ROUNDS; r++)
            w[r] = __ldcs((const uint4 *)(flags + base) + r * CMP_THREADS + t);
#pragma unroll
        for (int r = 0; r < CMP_ROUNDS; r++)
            m[r] = nz4(w[r].x) | nz4(w[r].y) << 4 | nz4(w[r].z) << 8 | nz4(w[r].w) << 12;
    } else {
#pragma unroll
        for (int r = 0; r < CMP_ROUNDS; r++) {
            size_t e = base + 16 * ((size_t)r * CMP_THREADS + t);
            unsigned mm = 0;
            for (int j = 0; j < 16; j++)
                if (e + j < n && flags[e + j]) mm |= 1u << j;
            m[r] = mm;
        }
    }
    /* Round counts packed in 16 bits each (a warp's round total <= 512). */
    unsigned packed = (unsigned)__popc(m[0]) | (unsigned)__popc(m[1]) << 16;
    unsigned incl = packed;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        unsigned y = __shfl_up_sync(0xffffffffu, incl, off);
        if ((int)lane >= off) incl += y;
    }
    if (lane == 31) warp_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        /* Output order: round-major, then warp (lanes 0..15 hold the 16). */
        unsigned val = lane < 16 ? (warp_tot[lane & 7] >> (16 * (lane >> 3))) & 0xffffu : 0;
        unsigned vi = val;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            unsigned y = __shfl_up_sync(0xffffffffu, vi, off);
            if ((int)lane >= off) vi += y;
        }
        pref[lane] = vi - val;
        unsigned agg = __shfl_sync(0xffffffffu, vi, 31);
        if (lane == 0) {
            pmi_tile_publish(state + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | agg);
            s_agg = agg;
        }
    }
    __syncthreads();
    const unsigned wex = incl - packed;
#pragma unroll
    for (int r = 0; r < CMP_ROUNDS; r++) {
        unsigned pos = pref[8 * r + warp] + ((wex >> (16 * r)) & 0xffffu);
        unsigned mm = m[r];
        const unsigned first = 16 * (r * CMP_THREADS + t);
        while (mm) {
            int j = __ffs(mm) - 1;
            mm &= mm - 1;
            stage[pos++] = (unsigned short)(first + j);
        }
    }
    if (warp == 0) {
        unsigned long long excl = tile ? pmi_lookback(state, tile) : 0;
        if (lane == 0) {
            if (tile) pmi_tile_publish(state + tile, PMI_FLAG_P | (excl + s_agg));
            s_excl = excl;
            if (tile == num_tiles - 1) *count_out = excl + s_agg;
        }
    }
    __syncthreads();
    const unsigned long long start = s_excl;
    const unsigned cnt = s_agg;
    for (unsigned i = t; i < cnt; i += CMP_THREADS)
        if (start + i < capacity) __stcs(out + start + i, (unsigned long long)(base + stage[i]));
}

static pm_status compact_launch(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out,
                                size_t capacity, unsigned long long *count_d)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    unsigned long long tiles = (n + CMP_TILE - 1) / CMP_TILE;
    if (tiles > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_compact: %zu elements is too many", n);
    void *arena;
    PMI_TRY(pmi_cuda_scratch(ctx, tiles * 8, &arena));
    PMI_CU_TRY(cudaMemsetAsync(arena, 0, tiles * 8, st->stream), "pm_compact");
    compact_kernel<<<(unsigned)tiles, CMP_THREADS, 0, st->stream>>>(
        flags, n, ((uintptr_t)flags & 15) == 0, (unsigned long long *)out, capacity,
        (unsigned long long *)arena, tiles, count_d);
    return pmi_cuda_launched("pm_compact");
}

extern "C" pm_status pmi_cuda_compact(pm_context *ctx, const uint8_t *flags, size_t n,
                                      uint64_t *out_index, size_t capacity, size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    PMI_TRY(compact_launch(ctx, flags, n, out_index, capacity,
                           &pmi_cuda(ctx)->host_d[PMI_HOST_RESULT]));
    return pmi_cuda_host_count(ctx, capacity, count, "pm_compact");
}

extern "C" pm_status pmi_cuda_compact_async(pm_context *ctx, const uint8_t *flags, size_t n,
                                            uint64_t *out_index, size_t capacity,
                                            uint64_t *count_ctx)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    if (n == 0) {
        PMI_CU_TRY(cudaMemsetAsync(count_ctx, 0, sizeof *count_ctx, pmi_cuda(ctx)->stream),
                   "pm_compact_async");
        return PM_STATUS_OK;
    }
    return compact_launch(ctx, flags, n, out_index, capacity, (unsigned long long *)count_ctx);
}
