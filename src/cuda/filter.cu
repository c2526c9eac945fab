/* Order-preserving filter of floats. Dense inputs: a single pass over the
 * input with decoupled look-back (Merrill and Garland 2016): each
 * 8192-element tile is read once with 16-byte loads, ranked with packed warp
 * scans, staged in shared memory in output order and written contiguously.
 * Sparse large inputs (a 64K-element sample decides on the device): the same
 * tiles skip the look-back and append their kept values to a per-tile slot
 * of the scratch arena; a copy kernel then moves them to their final place
 * (staged two-pass filter, see docs/cuda.md). A HistoPyramid would read the
 * kept elements a second time. Also Horn's method (GPU Gems 2, ch. 36,
 * 2005) for comparison. */
#include "cuda/cuda_internal.h"

#define FLT_THREADS 256
#define FLT_ROUNDS 8 /* float4 per thread: 8192-element tiles */
#define FLT_PACKS (FLT_ROUNDS / 4)
#define FLT_TILE (FLT_THREADS * FLT_ROUNDS * 4)
/* Sampling: FLT_SAMPLE_BLOCKS blocks each read 4 * FLT_THREADS consecutive
 * elements at evenly spread places; staging is chosen when at most
 * FLT_STAGE_PERCENT of the sample passes (break-even about 3.6%, between the
 * measured 1% and 10% cases, bench/RESULTS-cudaprims.md). */
#define FLT_SAMPLE_BLOCKS 64
#define FLT_SAMPLES (FLT_SAMPLE_BLOCKS * FLT_THREADS * 4)
#define FLT_STAGE_PERCENT 3
/* Inputs below this many elements always take the single pass: there the
 * sample and copy launches cost more than the look-back (measured: 2^22
 * and 2^24 at 10% kept were 1.4x / 1.1x slower with them). */
#define FLT_STAGE_MIN_N ((size_t)1 << 26)
/* Modes of one call: look-back only, or staged when the sample says so. */
enum { FLT_DENSE = 0, FLT_AUTO = 1 };

static __device__ __forceinline__ unsigned flt_pass(int cmp, float x, float t)
{
    /* NaN compares false everywhere, so it never passes. */
    bool r = cmp == PM_LESS         ? x < t
             : cmp == PM_LESS_EQUAL ? x <= t
             : cmp == PM_GREATER    ? x > t
                                    : x >= t;
    return r ? 1u : 0u;
}

/* Counts the passing elements of block b's sample slice into sample[b]. */
static __global__ void __launch_bounds__(FLT_THREADS)
    filter_sample(const float *__restrict__ in, size_t n, int cmp, float thr, unsigned *sample)
{
    const size_t base = (size_t)blockIdx.x * (n / FLT_SAMPLE_BLOCKS) + 4 * (size_t)threadIdx.x;
    unsigned c = 0;
#pragma unroll
    for (int k = 0; k < 4; k++)
        c += __syncthreads_count(base + k < n && flt_pass(cmp, in[base + k], thr));
    if (threadIdx.x == 0) sample[blockIdx.x] = c;
}

/* The sample counts a lane of warp 0 loads (early, to hide the latency). */
static __device__ __forceinline__ unsigned flt_sample_load(int mode, const unsigned *sample)
{
    const unsigned lane = threadIdx.x & 31;
    return mode == FLT_AUTO ? sample[lane] + sample[lane + 32] : 0;
}

/* Called by one whole warp with flt_sample_load's value: whether this call
 * stages (the same answer in every block and in the copy kernel). */
static __device__ __forceinline__ bool flt_staged(int mode, unsigned c)
{
    if (mode != FLT_AUTO) return false;
    for (int off = 16; off; off >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, off);
    return (unsigned long long)c * 100 <= (unsigned long long)FLT_STAGE_PERCENT * FLT_SAMPLES;
}

/* One tile per block: load, rank, stage in shared memory, then either the
 * look-back and a contiguous write to out (dense) or an append to the
 * tile's slot of the staging area (staged; state words are plain tile
 * counts then, and group_sum collects them per copy group). */
static __global__ void __launch_bounds__(FLT_THREADS)
    filter_kernel(const float *__restrict__ in, size_t n, int vec, int cmp, float thr,
                  float *__restrict__ out, size_t capacity, unsigned long long *state,
                  unsigned long long num_tiles, unsigned long long *count_out, int mode,
                  const unsigned *sample, float *staging, unsigned long long *group_sum,
                  unsigned tiles_per_group)
{
    __shared__ float stage[FLT_TILE];
    __shared__ unsigned warp_tot[FLT_PACKS][FLT_THREADS / 32];
    __shared__ unsigned pref[2 * 32];
    __shared__ unsigned long long s_excl, s_cap;
    __shared__ float *s_dst;
    __shared__ unsigned s_agg;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    /* Tiles follow blockIdx: blocks are dispatched in index order, so every
     * predecessor of a resident block is resident or done (as in CUB); an
     * atomic tile counter would add a round trip before the first load. */
    const unsigned long long tile = blockIdx.x;
    const size_t base = (size_t)tile * FLT_TILE;
    const unsigned smp = warp == 0 ? flt_sample_load(mode, sample) : 0;
    float4 v[FLT_ROUNDS];
    if (vec && base + FLT_TILE <= n) {
#pragma unroll
        for (int r = 0; r < FLT_ROUNDS; r++)
            v[r] = __ldcs((const float4 *)(in + base) + r * FLT_THREADS + t);
    } else {
        const float nan = __int_as_float(0x7fc00000);
#pragma unroll
        for (int r = 0; r < FLT_ROUNDS; r++) {
            size_t e = base + 4 * ((size_t)r * FLT_THREADS + t);
            v[r].x = e < n ? in[e] : nan;
            v[r].y = e + 1 < n ? in[e + 1] : nan;
            v[r].z = e + 2 < n ? in[e + 2] : nan;
            v[r].w = e + 3 < n ? in[e + 3] : nan;
        }
    }
    /* Keep masks, and the per-round counts packed one byte each (four
     * rounds per word): a warp's round total is at most 128, so one scan
     * ranks four rounds at once. */
    unsigned m[FLT_ROUNDS], packed[FLT_PACKS], incl[FLT_PACKS];
#pragma unroll
    for (int q = 0; q < FLT_PACKS; q++)
        packed[q] = 0;
#pragma unroll
    for (int r = 0; r < FLT_ROUNDS; r++) {
        m[r] = flt_pass(cmp, v[r].x, thr) | flt_pass(cmp, v[r].y, thr) << 1 |
               flt_pass(cmp, v[r].z, thr) << 2 | flt_pass(cmp, v[r].w, thr) << 3;
        packed[r / 4] |= (unsigned)__popc(m[r]) << (8 * (r % 4));
    }
#pragma unroll
    for (int q = 0; q < FLT_PACKS; q++)
        incl[q] = packed[q];
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
#pragma unroll
        for (int q = 0; q < FLT_PACKS; q++) {
            unsigned y = __shfl_up_sync(0xffffffffu, incl[q], off);
            if ((int)lane >= off) incl[q] += y;
        }
    }
    if (lane == 31)
#pragma unroll
        for (int q = 0; q < FLT_PACKS; q++)
            warp_tot[q][warp] = incl[q];
    __syncthreads();
    if (warp == 0) {
        /* Output order is round-major, then warp: entry 8 round + warp. Each
         * lane takes two consecutive entries (64 of them). */
        unsigned val[2], pair = 0;
#pragma unroll
        for (int k = 0; k < 2; k++) {
            unsigned e = 2 * lane + k, r = e >> 3, w = e & 7;
            val[k] = (warp_tot[r / 4][w] >> (8 * (r % 4))) & 0xffu;
            pair += val[k];
        }
        unsigned vi = pair;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            unsigned y = __shfl_up_sync(0xffffffffu, vi, off);
            if ((int)lane >= off) vi += y;
        }
        pref[2 * lane] = vi - pair;
        pref[2 * lane + 1] = vi - pair + val[0];
        unsigned agg = __shfl_sync(0xffffffffu, vi, 31);
        const bool staged = flt_staged(mode, smp);
        if (lane == 0) {
            if (staged) {
                /* No look-back: the tile's count (state words are plain
                 * counts here) and its group's sum, for the copy kernel. */
                state[tile] = agg;
                if (agg) atomicAdd(group_sum + tile / tiles_per_group, (unsigned long long)agg);
                s_dst = staging + tile * FLT_TILE;
                s_cap = ~0ull;
                s_excl = 0;
            } else {
                pmi_tile_publish(state + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | agg);
                s_dst = out;
                s_cap = capacity;
            }
            s_agg = agg;
        }
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < FLT_ROUNDS; r++) {
        unsigned wex = incl[r / 4] - packed[r / 4];
        unsigned pos = pref[8 * r + warp] + ((wex >> (8 * (r % 4))) & 0xffu);
        if (m[r] & 1) stage[pos++] = v[r].x;
        if (m[r] & 2) stage[pos++] = v[r].y;
        if (m[r] & 4) stage[pos++] = v[r].z;
        if (m[r] & 8) stage[pos] = v[r].w;
    }
    if (warp == 0 && s_dst == out) {
        unsigned long long excl = tile ? pmi_lookback_backoff(state, tile) : 0;
        if (lane == 0) {
            if (tile) pmi_tile_publish(state + tile, PMI_FLAG_P | (excl + s_agg));
            s_excl = excl;
            if (tile == num_tiles - 1) *count_out = excl + s_agg;
        }
    }
    __syncthreads();
    const unsigned long long start = s_excl, cap = s_cap;
    float *dst = s_dst;
    const unsigned cnt = s_agg;
    for (unsigned i = t; i < cnt; i += FLT_THREADS)
        if (start + i < cap) dst[start + i] = stage[i];
}

/* Staged mode, second pass: block b moves the staged values of tiles
 * [b * tiles_per_group, ...) to their output places (first `capacity` only);
 * its offset is the sum of the group sums before it. The last block writes
 * the full count. */
static __global__ void __launch_bounds__(FLT_THREADS)
    filter_copy(int mode, const unsigned *sample, const unsigned long long *counts,
                const unsigned long long *group_sum, unsigned long long num_tiles,
                unsigned tiles_per_group, const float *__restrict__ staging,
                float *__restrict__ out, size_t capacity, unsigned long long *count_out)
{
    __shared__ unsigned long long s_part[FLT_THREADS / 32], s_off[FLT_THREADS];
    __shared__ unsigned s_cnt[FLT_THREADS];
    __shared__ bool s_staged;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    if (warp == 0) {
        bool st = flt_staged(mode, flt_sample_load(mode, sample));
        if (lane == 0) s_staged = st;
    }
    __syncthreads();
    if (!s_staged) return; /* dense call: the look-back pass did it all */
    unsigned long long p = 0;
    for (unsigned i = t; i < blockIdx.x; i += FLT_THREADS)
        p += group_sum[i];
    for (int off = 16; off; off >>= 1)
        p += __shfl_xor_sync(0xffffffffu, p, off);
    if (lane == 0) s_part[warp] = p;
    __syncthreads();
    unsigned long long base = 0;
    for (int w = 0; w < FLT_THREADS / 32; w++)
        base += s_part[w];
    const unsigned long long first = (unsigned long long)blockIdx.x * tiles_per_group;
    unsigned long long last = first + tiles_per_group;
    if (last > num_tiles) last = num_tiles;
    for (unsigned long long c0 = first; c0 < last; c0 += FLT_THREADS) {
        /* Exclusive offsets of up to 256 tiles (block scan of counts). */
        const unsigned c = c0 + t < last ? (unsigned)counts[c0 + t] : 0;
        unsigned long long v = c;
        for (int off = 1; off < 32; off <<= 1) {
            unsigned long long y = __shfl_up_sync(0xffffffffu, v, off);
            if ((int)lane >= off) v += y;
        }
        __syncthreads(); /* s_part of the previous chunk has been read */
        if (lane == 31) s_part[warp] = v;
        __syncthreads();
        unsigned long long wbase = base, tot = 0;
        for (unsigned w = 0; w < FLT_THREADS / 32; w++) {
            if (w < warp) wbase += s_part[w];
            tot += s_part[w];
        }
        s_off[t] = wbase + v - c;
        s_cnt[t] = c;
        __syncthreads();
        /* One warp per tile, four loads in flight per lane. */
        const unsigned ntiles = (unsigned)(last - c0 < FLT_THREADS ? last - c0 : FLT_THREADS);
        for (unsigned k = warp; k < ntiles; k += FLT_THREADS / 32) {
            const unsigned kc = s_cnt[k];
            const unsigned long long o = s_off[k];
            if (o >= capacity) break; /* later tiles start further on */
            const float *src = staging + (c0 + k) * FLT_TILE;
            for (unsigned i = lane; i < kc; i += 4 * 32) {
                float x[4];
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (i + u * 32 < kc) x[u] = __ldcs(src + i + u * 32);
#pragma unroll
                for (int u = 0; u < 4; u++)
                    if (i + u * 32 < kc && o + i + u * 32 < capacity) out[o + i + u * 32] = x[u];
            }
        }
        base += tot;
    }
    if (blockIdx.x == gridDim.x - 1 && t == 0) *count_out = base;
}

/* Launches the filter; the full count goes to count_d (device or mapped
 * host memory). Arena: sample counts (256 B), tile states, group sums, and
 * for staging one 8192-float slot per tile (4n bytes: any selectivity fits).
 * When that much scratch cannot be had, the look-back pass alone runs. */
static pm_status filter_launch(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                               float thr, float *out, size_t capacity, unsigned long long *count_d)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    unsigned long long tiles = (n + FLT_TILE - 1) / FLT_TILE;
    if (tiles > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_filter_f32: %zu elements is too many", n);
    /* Inputs of FLT_STAGE_MIN_N or more let the sample decide. */
    int mode = n >= FLT_STAGE_MIN_N ? FLT_AUTO : FLT_DENSE;
    /* Copy groups: about 8 blocks per SM (four loads in flight per lane). */
    const unsigned long long want_groups = 8ull * (unsigned)st->num_sms;
    const unsigned tpg = (unsigned)((tiles + want_groups - 1) / want_groups);
    const unsigned long long groups = (tiles + tpg - 1) / tpg;
    const size_t head = pmi_align256(256 + tiles * 8 + groups * 8);
    void *arena = NULL;
    if (mode != FLT_DENSE) {
        size_t bytes;
        if (!pmi_mul_size(tiles, (size_t)FLT_TILE * 4, &bytes) || bytes > SIZE_MAX - head ||
            pmi_cuda_scratch(ctx, head + bytes, &arena) != PM_STATUS_OK) {
            mode = FLT_DENSE;
            pmi_clear_error(); /* the fallback is no failure */
        }
    }
    if (mode == FLT_DENSE) PMI_TRY(pmi_cuda_scratch(ctx, head, &arena));
    unsigned *sample = (unsigned *)arena;
    unsigned long long *state = (unsigned long long *)((char *)arena + 256),
                       *group_sum = state + tiles;
    float *staging = (float *)((char *)arena + head);
    PMI_CU_TRY(cudaMemsetAsync(state, 0, tiles * 8 + groups * 8, st->stream), "pm_filter_f32");
    if (mode == FLT_AUTO) {
        filter_sample<<<FLT_SAMPLE_BLOCKS, FLT_THREADS, 0, st->stream>>>(in, n, (int)cmp, thr,
                                                                         sample);
        PMI_TRY(pmi_cuda_launched("pm_filter_f32"));
    }
    filter_kernel<<<(unsigned)tiles, FLT_THREADS, 0, st->stream>>>(
        in, n, ((uintptr_t)in & 15) == 0, (int)cmp, thr, out, capacity, state, tiles, count_d, mode,
        sample, staging, group_sum, tpg);
    PMI_TRY(pmi_cuda_launched("pm_filter_f32"));
    if (mode == FLT_DENSE) return PM_STATUS_OK;
    filter_copy<<<(unsigned)groups, FLT_THREADS, 0, st->stream>>>(
        mode, sample, state, group_sum, tiles, tpg, staging, out, capacity, count_d);
    return pmi_cuda_launched("pm_filter_f32");
}

extern "C" pm_status pmi_cuda_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                         float threshold, float *out, size_t capacity,
                                         size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    PMI_TRY(filter_launch(ctx, in, n, cmp, threshold, out, capacity,
                          &pmi_cuda(ctx)->host_d[PMI_HOST_RESULT]));
    return pmi_cuda_host_count(ctx, capacity, count, "pm_filter_f32");
}

extern "C" pm_status pmi_cuda_filter_f32_async(pm_context *ctx, const float *in, size_t n,
                                               pm_compare cmp, float threshold, float *out,
                                               size_t capacity, uint64_t *count_ctx)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    if (n == 0) {
        PMI_CU_TRY(cudaMemsetAsync(count_ctx, 0, sizeof *count_ctx, pmi_cuda(ctx)->stream),
                   "pm_filter_f32_async");
        return PM_STATUS_OK;
    }
    return filter_launch(ctx, in, n, cmp, threshold, out, capacity,
                         (unsigned long long *)count_ctx);
}

/* ---- Horn's method: Hillis-Steele scan, then binary search per output ---- */

static __global__ void horn_flags(const float *in, size_t n, int cmp, float thr,
                                  unsigned long long *s)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[i] = flt_pass(cmp, in[i], thr);
}

/* One Hillis-Steele step: dst[i] = src[i] + src[i - d] (inclusive scan after
 * log2(n) steps; O(n log n) work, as Horn describes it). */
static __global__ void horn_step(const unsigned long long *src, unsigned long long *dst, size_t n,
                                 size_t d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + (i >= d ? src[i - d] : 0);
}

/* Output k is the first i whose inclusive count exceeds k. */
static __global__ void horn_gather(const float *in, const unsigned long long *incl, size_t n,
                                   float *out, size_t capacity, unsigned long long *count_out)
{
    unsigned long long total = incl[n - 1];
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k == 0) *count_out = total;
    if (k >= total || k >= capacity) return;
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (incl[mid] > k)
            hi = mid;
        else
            lo = mid + 1;
    }
    out[k] = in[lo];
}

extern "C" pm_status pmi_cuda_filter_horn_f32(pm_context *ctx, const float *in, size_t n,
                                              pm_compare cmp, float threshold, float *out,
                                              size_t capacity, size_t *count)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    size_t bytes;
    if (!pmi_mul_size(n, 16, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_filter_horn_f32: %zu elements overflow", n);
    void *arena;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, &arena));
    unsigned long long *a = (unsigned long long *)arena, *b = a + n;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    horn_flags<<<blocks, 256, 0, st->stream>>>(in, n, (int)cmp, threshold, a);
    for (size_t d = 1; d < n; d <<= 1) {
        horn_step<<<blocks, 256, 0, st->stream>>>(a, b, n, d);
        unsigned long long *tmp = a;
        a = b;
        b = tmp;
    }
    size_t outs = n < capacity ? n : capacity;
    horn_gather<<<(unsigned)((outs + 255) / 256 + 1), 256, 0, st->stream>>>(
        in, a, n, out, capacity, &st->host_d[PMI_HOST_RESULT]);
    PMI_TRY(pmi_cuda_launched("pm_filter_horn_f32"));
    return pmi_cuda_host_count(ctx, capacity, count, "pm_filter_horn_f32");
}
