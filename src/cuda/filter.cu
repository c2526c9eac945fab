/* Order-preserving filter of floats in a single pass over the input
 * (decoupled look-back, Merrill and Garland 2016): each 8192-element tile is
 * read once with 16-byte loads, ranked with packed warp scans, staged in
 * shared memory in output order and written contiguously. A HistoPyramid
 * would read the kept elements a second time (see docs/cuda.md). Also seed
 * 002's reference method (Horn, GPU Gems 2 ch. 36) for comparison. */
#include "cuda/cuda_internal.h"

#define FLT_THREADS 256
#define FLT_ROUNDS 8 /* float4 per thread: 8192-element tiles */
#define FLT_PACKS (FLT_ROUNDS / 4)
#define FLT_TILE (FLT_THREADS * FLT_ROUNDS * 4)

static __device__ __forceinline__ unsigned flt_pass(int cmp, float x, float t)
{
    /* NaN compares false everywhere, so it never passes. */
    bool r = cmp == PM_LESS ? x < t : cmp == PM_LESS_EQUAL ? x <= t : cmp == PM_GREATER ? x > t
                                                                                         : x >= t;
    return r ? 1u : 0u;
}

/* Look-back by one warp reading K states per lane at once (a window of 32 K
 * predecessors per round trip): walks far in few L2 round trips when the
 * nearest inclusive prefix is many tiles back. K = 0: pmi_lookback. */
template <int K>
static __device__ __forceinline__ unsigned long long lookback_wide(unsigned long long *state,
                                                                   unsigned long long tile)
{
    if (K == 0) return pmi_lookback(state, tile);
    constexpr int KK = K > 0 ? K : 1;
    const unsigned lane = threadIdx.x & 31;
    unsigned long long excl = 0;
    long long end = (long long)tile - 1;
    for (;;) {
        unsigned long long s[KK];
        int dp; /* distance of the nearest inclusive prefix, or 32 K */
        for (;;) {
#pragma unroll
            for (int k = 0; k < KK; k++) {
                long long idx = end - (long long)lane - 32 * k;
                s[k] = idx >= 0 ? *(volatile unsigned long long *)(state + idx) : PMI_FLAG_P;
            }
            dp = 32 * KK;
            unsigned bad = 0;
#pragma unroll
            for (int k = KK - 1; k >= 0; k--) {
                unsigned pm = __ballot_sync(0xffffffffu, (s[k] >> 62) == 2);
                if (pm) dp = 32 * k + __ffs(pm) - 1;
            }
            /* Every state nearer than the prefix must have its aggregate. */
#pragma unroll
            for (int k = 0; k < KK; k++)
                bad |= __ballot_sync(0xffffffffu, (s[k] >> 62) == 0 && 32 * k + (int)lane < dp);
            if (!bad) break;
            __nanosleep(64);
        }
        unsigned long long v = 0;
#pragma unroll
        for (int k = 0; k < KK; k++)
            if (32 * k + (int)lane <= dp) v += s[k] & PMI_VALUE_MASK;
        for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        excl += v;
        if (dp < 32 * KK) break;
        end -= 32 * KK;
    }
    return excl;
}

template <int K>
__global__ void __launch_bounds__(FLT_THREADS)
    filter_kernel(const float *__restrict__ in, size_t n, int vec, int cmp, float thr,
                  float *__restrict__ out, size_t capacity, unsigned long long *state,
                  unsigned *tile_counter, unsigned long long num_tiles,
                  unsigned long long *count_out)
{
    __shared__ float stage[FLT_TILE];
    __shared__ unsigned warp_tot[FLT_PACKS][FLT_THREADS / 32];
    __shared__ unsigned pref[2 * 32];
    __shared__ unsigned long long s_excl;
    __shared__ unsigned s_agg;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    /* Tiles follow blockIdx: blocks are dispatched in index order, so every
     * predecessor of a resident block is resident or done (as in CUB); an
     * atomic tile counter would add a round trip before the first load. */
    (void)tile_counter;
    const unsigned long long tile = blockIdx.x;
    const size_t base = (size_t)tile * FLT_TILE;
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
    for (int q = 0; q < FLT_PACKS; q++) packed[q] = 0;
#pragma unroll
    for (int r = 0; r < FLT_ROUNDS; r++) {
        m[r] = flt_pass(cmp, v[r].x, thr) | flt_pass(cmp, v[r].y, thr) << 1 |
               flt_pass(cmp, v[r].z, thr) << 2 | flt_pass(cmp, v[r].w, thr) << 3;
        packed[r / 4] |= (unsigned)__popc(m[r]) << (8 * (r % 4));
    }
#pragma unroll
    for (int q = 0; q < FLT_PACKS; q++) incl[q] = packed[q];
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
        for (int q = 0; q < FLT_PACKS; q++) warp_tot[q][warp] = incl[q];
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
        if (lane == 0) {
            pmi_tile_publish(state + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | agg);
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
    if (warp == 0) {
        unsigned long long excl = tile ? lookback_wide<K>(state, tile) : 0;
        if (lane == 0) {
            if (tile) pmi_tile_publish(state + tile, PMI_FLAG_P | (excl + s_agg));
            s_excl = excl;
            if (tile == num_tiles - 1) *count_out = excl + s_agg;
        }
    }
    __syncthreads();
    const unsigned long long start = s_excl;
    const unsigned cnt = s_agg;
    for (unsigned i = t; i < cnt; i += FLT_THREADS)
        if (start + i < capacity) out[start + i] = stage[i];
}

/* ---- persistent variant: tiles taken from an atomic counter by a grid that
 * fits on the GPU at once; each block keeps the next STAGES-1 tiles loading
 * (cp.async into shared memory) while it ranks the current one and waits on
 * its look-back, so the memory system stays busy through the waits. ---- */

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
static __device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int R, int S, int K>
__global__ void __launch_bounds__(FLT_THREADS)
    pfilter_kernel(const float *__restrict__ in, size_t n, int vec, int cmp, float thr,
                   float *__restrict__ out, size_t capacity, unsigned long long *state,
                   unsigned *tile_counter, unsigned long long num_tiles,
                   unsigned long long *count_out)
{
    constexpr int TILE4 = FLT_THREADS * R; /* float4 per tile */
    constexpr int PACKS = R / 4;
    constexpr int PER_LANE = R * 8 / 32; /* (round, warp) entries per lane */
    extern __shared__ float4 buf[];      /* S slots of TILE4 */
    __shared__ unsigned warp_tot[PACKS][FLT_THREADS / 32];
    __shared__ unsigned pref[R * 8];
    __shared__ unsigned long long s_excl;
    __shared__ unsigned s_agg;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    (void)tile_counter;
    const unsigned long long G = gridDim.x;
    for (int k = 0; k < S - 1; k++) {
        unsigned long long tk = blockIdx.x + k * G;
        if (vec && (tk + 1) * (R * FLT_THREADS * 4) <= n)
#pragma unroll
            for (int r = 0; r < R; r++)
                cp_async16(&buf[k * TILE4 + r * FLT_THREADS + t],
                           (const float4 *)in + tk * TILE4 + r * FLT_THREADS + t);
        cp_async_commit();
    }
    for (unsigned j = 0;; j++) {
        const int slot = j % S;
        cp_async_wait<S - 2>();
        __syncthreads();
        const unsigned long long tile = blockIdx.x + j * G;
        if (tile >= num_tiles) break; /* later tiles are larger: nothing in flight */
        {
            const unsigned long long nx = tile + (S - 1) * G;
            const int ns = (j + S - 1) % S;
            if (vec && (nx + 1) * (R * FLT_THREADS * 4) <= n)
#pragma unroll
                for (int r = 0; r < R; r++)
                    cp_async16(&buf[ns * TILE4 + r * FLT_THREADS + t],
                               (const float4 *)in + nx * TILE4 + r * FLT_THREADS + t);
            cp_async_commit();
        }
        const size_t base = (size_t)tile * (TILE4 * 4);
        float4 v[R];
        if (vec && base + TILE4 * 4 <= n) {
#pragma unroll
            for (int r = 0; r < R; r++) v[r] = buf[slot * TILE4 + r * FLT_THREADS + t];
        } else {
            const float nan = __int_as_float(0x7fc00000);
#pragma unroll
            for (int r = 0; r < R; r++) {
                size_t e = base + 4 * ((size_t)r * FLT_THREADS + t);
                v[r].x = e < n ? in[e] : nan;
                v[r].y = e + 1 < n ? in[e + 1] : nan;
                v[r].z = e + 2 < n ? in[e + 2] : nan;
                v[r].w = e + 3 < n ? in[e + 3] : nan;
            }
        }
        unsigned m[R], packed[PACKS], incl[PACKS];
#pragma unroll
        for (int q = 0; q < PACKS; q++) packed[q] = 0;
#pragma unroll
        for (int r = 0; r < R; r++) {
            m[r] = flt_pass(cmp, v[r].x, thr) | flt_pass(cmp, v[r].y, thr) << 1 |
                   flt_pass(cmp, v[r].z, thr) << 2 | flt_pass(cmp, v[r].w, thr) << 3;
            packed[r / 4] |= (unsigned)__popc(m[r]) << (8 * (r % 4));
        }
#pragma unroll
        for (int q = 0; q < PACKS; q++) incl[q] = packed[q];
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
#pragma unroll
            for (int q = 0; q < PACKS; q++) {
                unsigned y = __shfl_up_sync(0xffffffffu, incl[q], off);
                if ((int)lane >= off) incl[q] += y;
            }
        }
        if (lane == 31)
#pragma unroll
            for (int q = 0; q < PACKS; q++) warp_tot[q][warp] = incl[q];
        __syncthreads();
        if (warp == 0) {
            /* Output order: round-major, then warp: entry 8 round + warp. */
            unsigned val[PER_LANE], sum = 0;
#pragma unroll
            for (int k = 0; k < PER_LANE; k++) {
                unsigned e = PER_LANE * lane + k, r = e >> 3, w = e & 7;
                val[k] = (warp_tot[r / 4][w] >> (8 * (r % 4))) & 0xffu;
                sum += val[k];
            }
            unsigned vi = sum;
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) {
                unsigned y = __shfl_up_sync(0xffffffffu, vi, off);
                if ((int)lane >= off) vi += y;
            }
            unsigned run = vi - sum;
#pragma unroll
            for (int k = 0; k < PER_LANE; k++) {
                pref[PER_LANE * lane + k] = run;
                run += val[k];
            }
            unsigned agg = __shfl_sync(0xffffffffu, vi, 31);
            if (lane == 0) {
                pmi_tile_publish(state + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | agg);
                s_agg = agg;
            }
        }
        __syncthreads();
        /* The slot is free (every thread holds its values): stage in it. */
        float *stage = (float *)&buf[slot * TILE4];
#pragma unroll
        for (int r = 0; r < R; r++) {
            unsigned wex = incl[r / 4] - packed[r / 4];
            unsigned pos = pref[8 * r + warp] + ((wex >> (8 * (r % 4))) & 0xffu);
            if (m[r] & 1) stage[pos++] = v[r].x;
            if (m[r] & 2) stage[pos++] = v[r].y;
            if (m[r] & 4) stage[pos++] = v[r].z;
            if (m[r] & 8) stage[pos] = v[r].w;
        }
        if (warp == 0) {
            unsigned long long excl = tile ? lookback_wide<K>(state, tile) : 0;
            if (lane == 0) {
                if (tile) pmi_tile_publish(state + tile, PMI_FLAG_P | (excl + s_agg));
                s_excl = excl;
                if (tile == num_tiles - 1) *count_out = excl + s_agg;
            }
        }
        __syncthreads();
        const unsigned long long start = s_excl;
        const unsigned cnt = s_agg;
        for (unsigned i = t; i < cnt; i += FLT_THREADS)
            if (start + i < capacity) out[start + i] = stage[i];
    }
}

typedef void (*pfilter_fn)(const float *, size_t, int, int, float, float *, size_t,
                           unsigned long long *, unsigned *, unsigned long long,
                           unsigned long long *);

static int flt_variant(void)
{
    const char *e = getenv("PM_FLT_VARIANT");
    return e ? atoi(e) : 1;
}

/* Launches the single-pass filter; the full count goes to count_d (device
 * or mapped host memory). */
static pm_status filter_launch(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                               float thr, float *out, size_t capacity, unsigned long long *count_d)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    int var = flt_variant();
    pfilter_fn fn = NULL;
    int r4 = 8, stages = 2;
    switch (var) {
    case 1: fn = pfilter_kernel<4, 3, 8>; r4 = 4; stages = 3; break;
    case 2: fn = pfilter_kernel<8, 2, 8>; r4 = 8; stages = 2; break;
    case 3: fn = pfilter_kernel<8, 2, 16>; r4 = 8; stages = 2; break;
    default: break;
    }
    void (*old)(const float *, size_t, int, int, float, float *, size_t, unsigned long long *,
                unsigned *, unsigned long long, unsigned long long *) =
        var == 4 ? filter_kernel<2> : var == 5 ? filter_kernel<4> : var == 6 ? filter_kernel<8>
                                                                  : filter_kernel<0>;
    const size_t tile_elems = fn ? (size_t)FLT_THREADS * r4 * 4 : FLT_TILE;
    unsigned long long tiles = (n + tile_elems - 1) / tile_elems;
    if (tiles > UINT32_MAX / 2)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_filter_f32: %zu elements is too many", n);
    void *arena;
    PMI_TRY(pmi_cuda_scratch(ctx, 256 + tiles * 8, &arena));
    PMI_CU_TRY(cudaMemsetAsync(arena, 0, 256 + tiles * 8, st->stream), "pm_filter_f32");
    if (!fn) {
        old<<<(unsigned)tiles, FLT_THREADS, 0, st->stream>>>(
            in, n, ((uintptr_t)in & 15) == 0, (int)cmp, thr, out, capacity,
            (unsigned long long *)((char *)arena + 256), (unsigned *)arena, tiles, count_d);
        return pmi_cuda_launched("pm_filter_f32");
    }
    const size_t smem = (size_t)stages * FLT_THREADS * r4 * 16;
    PMI_CU_TRY(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
               "pm_filter_f32: shared memory");
    int per_sm = 0;
    PMI_CU_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, FLT_THREADS, smem),
               "pm_filter_f32: occupancy");
    unsigned long long grid = (unsigned long long)(per_sm > 0 ? per_sm : 1) * st->num_sms;
    if (grid > tiles) grid = tiles;
    fn<<<(unsigned)grid, FLT_THREADS, smem, st->stream>>>(
        in, n, ((uintptr_t)in & 15) == 0, (int)cmp, thr, out, capacity,
        (unsigned long long *)((char *)arena + 256), (unsigned *)arena, tiles, count_d);
    return pmi_cuda_launched("pm_filter_f32");
}

/* Reads the count the kernel left in the mapped host word. */
pm_status pmi_cuda_host_count(pm_context *ctx, size_t capacity, size_t *count, const char *fn)
{
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    unsigned long long c = pmi_cuda(ctx)->host[PMI_HOST_RESULT];
    *count = (size_t)c;
    if (c > capacity)
        return pmi_error(PM_STATUS_TRUNCATED, "%s: %llu outputs, capacity %zu", fn, c, capacity);
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_filter_f32(pm_context *ctx, const float *in, size_t n,
                                         pm_compare cmp, float threshold, float *out,
                                         size_t capacity, size_t *count)
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

__global__ void horn_flags(const float *in, size_t n, int cmp, float thr, unsigned long long *s)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) s[i] = flt_pass(cmp, in[i], thr);
}

/* One Hillis-Steele step: dst[i] = src[i] + src[i - d] (inclusive scan after
 * log2(n) steps; O(n log n) work, as in the seed). */
__global__ void horn_step(const unsigned long long *src, unsigned long long *dst, size_t n,
                          size_t d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i] + (i >= d ? src[i - d] : 0);
}

/* Output k is the first i whose inclusive count exceeds k. */
__global__ void horn_gather(const float *in, const unsigned long long *incl, size_t n,
                            float *out, size_t capacity, unsigned long long *count_out)
{
    unsigned long long total = incl[n - 1];
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k == 0) *count_out = total;
    if (k >= total || k >= capacity) return;
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (incl[mid] > k) hi = mid;
        else lo = mid + 1;
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
