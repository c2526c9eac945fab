/* Exclusive scan of u32 in one pass over the data: decoupled look-back
 * (Merrill and Garland 2016). Tiles of 3072 elements (128 threads x 24, the
 * shape of CUB's sm90 tuning for 4-byte scans) are loaded with 16-byte
 * loads, transposed through shared memory to 24 consecutive items per
 * thread, scanned, and each tile takes its prefix from its predecessors'
 * published aggregates, napping before the look-back and between looks
 * (pmi_lookback_naps; CUB's sm90 scan does the same). Plain loads and
 * stores: the streaming hints (__ldcs/__stcs) were slower here
 * (bench/RESULTS-cudaprims.md). Prefixes
 * are carried in 64 bits so the total (and hence the overflow status) is
 * exact. */
#include "cuda/cuda_internal.h"

#define SCAN_THREADS 128
#define SCAN_ITEMS 24
/* The scan's look-back naps (grids of PMI_LB_DELAY_GRID blocks or more):
 * longer than the filter's, the fastest pair of those measured on the H100;
 * the filter is slower with them (bench/RESULTS-cudaprims.md). */
#define SCAN_NAP_FIRST_NS 3000
#define SCAN_NAP_RETRY_NS 1000
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)
#define SCAN_CHUNKS (SCAN_ITEMS * 32 / 4) /* 16-byte chunks per warp */
/* Tile states hold 62-bit values: a launch covers at most 2^30 elements
 * (2^30 * (2^32 - 1) < 2^62); longer inputs are scanned in chunks, chained
 * through a 64-bit carry on the device. */
#define SCAN_CHUNK ((size_t)1 << 30)

/* Position of 16-byte chunk c of a warp's segment in shared memory. The
 * striped pattern (32k + lane) is conflict-free; the blocked one (6 lane + j
 * with 24 items) keeps some 2- and 3-way conflicts (the swizzle is
 * conflict-free for 8 lane + j, 32 items). */
static __device__ __forceinline__ unsigned swz(unsigned c) { return c ^ ((c >> 3) & 7); }

static __global__ void __launch_bounds__(SCAN_THREADS)
    scan_kernel(const uint32_t *in, uint32_t *out, size_t n, int vec, unsigned long long *state,
                const unsigned long long *carry_in, unsigned long long *carry_out,
                unsigned long long num_tiles)
{
    __shared__ uint4 xfer[SCAN_THREADS / 32][SCAN_CHUNKS];
    __shared__ unsigned long long warp_sum[SCAN_THREADS / 32];
    __shared__ unsigned long long s_prefix;
    const unsigned t = threadIdx.x, lane = t & 31, warp = t >> 5;
    /* Tiles follow blockIdx: blocks are dispatched in index order, so every
     * predecessor of a resident block is resident or done (as in CUB); an
     * atomic tile counter would add a round trip before the first load. */
    const unsigned long long tile = blockIdx.x;
    const size_t seg = (size_t)tile * SCAN_TILE + (size_t)warp * (SCAN_ITEMS * 32);
    const bool fast = vec && (size_t)(tile + 1) * SCAN_TILE <= n;

    /* Striped 16-byte loads (coalesced), then a blocked re-read. */
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS / 4; k++) {
        unsigned c = 32 * k + lane;
        uint4 v;
        if (fast) {
            v = ((const uint4 *)(in + seg))[c];
        } else {
            size_t e = seg + 4 * (size_t)c;
            v.x = e < n ? in[e] : 0;
            v.y = e + 1 < n ? in[e + 1] : 0;
            v.z = e + 2 < n ? in[e + 2] : 0;
            v.w = e + 3 < n ? in[e + 3] : 0;
        }
        xfer[warp][swz(c)] = v;
    }
    __syncwarp();
    uint32_t x[SCAN_ITEMS];
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS / 4; j++) {
        uint4 v = xfer[warp][swz(SCAN_ITEMS / 4 * lane + j)];
        x[4 * j] = v.x;
        x[4 * j + 1] = v.y;
        x[4 * j + 2] = v.z;
        x[4 * j + 3] = v.w;
    }
    /* Thread-local exclusive scan (mod 2^32, as the output) and exact sum. */
    unsigned long long tsum = 0;
    uint32_t run = 0;
#pragma unroll
    for (int i = 0; i < SCAN_ITEMS; i++) {
        uint32_t v = x[i];
        x[i] = run;
        run += v;
        tsum += v;
    }
    unsigned long long incl = tsum;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        unsigned long long y = __shfl_up_sync(0xffffffffu, incl, off);
        if ((int)lane >= off) incl += y;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        unsigned long long w = lane < SCAN_THREADS / 32 ? warp_sum[lane] : 0, wi = w;
#pragma unroll
        for (int off = 1; off < SCAN_THREADS / 32; off <<= 1) {
            unsigned long long y = __shfl_up_sync(0xffffffffu, wi, off);
            if ((int)lane >= off) wi += y;
        }
        unsigned long long agg = __shfl_sync(0xffffffffu, wi, SCAN_THREADS / 32 - 1);
        if (lane == 0) pmi_tile_publish(state + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | agg);
        unsigned long long excl =
            tile ? pmi_lookback_naps(state, tile, SCAN_NAP_FIRST_NS, SCAN_NAP_RETRY_NS) : 0;
        if (lane == 0) {
            if (tile) pmi_tile_publish(state + tile, PMI_FLAG_P | (excl + agg));
            unsigned long long carry = carry_in ? *carry_in : 0;
            s_prefix = carry + excl;
            if (tile == num_tiles - 1 && carry_out) *carry_out = carry + excl + agg;
        }
        __syncwarp();
        if (lane < SCAN_THREADS / 32) warp_sum[lane] = wi - w; /* exclusive per warp */
    }
    __syncthreads();
    const uint32_t base = (uint32_t)(s_prefix + warp_sum[warp] + (incl - tsum));
#pragma unroll
    for (int j = 0; j < SCAN_ITEMS / 4; j++) {
        uint4 v = make_uint4(base + x[4 * j], base + x[4 * j + 1], base + x[4 * j + 2],
                             base + x[4 * j + 3]);
        xfer[warp][swz(SCAN_ITEMS / 4 * lane + j)] = v;
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS / 4; k++) {
        unsigned c = 32 * k + lane;
        uint4 v = xfer[warp][swz(c)];
        if (fast) {
            ((uint4 *)(out + seg))[c] = v;
        } else {
            size_t e = seg + 4 * (size_t)c;
            if (e < n) out[e] = v.x;
            if (e + 1 < n) out[e + 1] = v.y;
            if (e + 2 < n) out[e + 2] = v.z;
            if (e + 3 < n) out[e + 3] = v.w;
        }
    }
}

size_t pmi_cuda_scan_tmp_bytes(size_t n)
{
    const size_t max_tiles = ((n < SCAN_CHUNK ? n : SCAN_CHUNK) + SCAN_TILE - 1) / SCAN_TILE;
    return max_tiles * 8 + 16;
}

pm_status pmi_cuda_scan_launch(pm_context *ctx, const uint32_t *in, uint32_t *out, size_t n,
                               void *tmp, unsigned long long *total)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    const size_t max_tiles = ((n < SCAN_CHUNK ? n : SCAN_CHUNK) + SCAN_TILE - 1) / SCAN_TILE;
    /* tmp: [tile states][two carries], so one memset clears the states and
     * leaves the carries. */
    unsigned long long *state = (unsigned long long *)tmp;
    unsigned long long *carry = state + max_tiles;
    const int vec = ((uintptr_t)in & 15) == 0 && ((uintptr_t)out & 15) == 0;
    size_t chunk_index = 0;
    for (size_t off = 0; off < n; off += SCAN_CHUNK, chunk_index++) {
        size_t len = n - off < SCAN_CHUNK ? n - off : SCAN_CHUNK;
        unsigned long long tiles = (len + SCAN_TILE - 1) / SCAN_TILE;
        bool last = off + len == n;
        PMI_CU_TRY(cudaMemsetAsync(tmp, 0, tiles * 8, st->stream),
                   "pm_scan_exclusive_u32: clearing tile states");
        const unsigned long long *cin = chunk_index ? carry + ((chunk_index - 1) & 1) : NULL;
        unsigned long long *cout = last ? total : carry + (chunk_index & 1);
        scan_kernel<<<(unsigned)tiles, SCAN_THREADS, 0, st->stream>>>(in + off, out + off, len, vec,
                                                                      state, cin, cout, tiles);
        PMI_TRY(pmi_cuda_launched("pm_scan_exclusive_u32"));
    }
    return PM_STATUS_OK;
}

/* k scans with one host wait: each its own tile states, its total in the
 * mapped word slot + i. */
static pm_status scan_jobs(pm_context *ctx, int k, pmi_scan_job *jobs, int slot)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    size_t off[PMI_SCAN_MANY], bytes = 0;
    for (int i = 0; i < k; i++) {
        off[i] = bytes;
        bytes += pmi_align256(pmi_cuda_scan_tmp_bytes((size_t)jobs[i].n));
    }
    char *arena;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&arena));
    for (int i = 0; i < k; i++) {
        st->host[slot + i] = 0;
        if (jobs[i].n)
            PMI_TRY(pmi_cuda_scan_launch(ctx, jobs[i].in, jobs[i].out, (size_t)jobs[i].n,
                                         arena + off[i], &st->host_d[slot + i]));
    }
    /* The status needs the totals: this is the one host wait. */
    PMI_TRY(pmi_cuda_wait(ctx, "pm_scan_exclusive_u32"));
    for (int i = 0; i < k; i++) {
        jobs[i].total = st->host[slot + i];
        if (jobs[i].total > UINT32_MAX)
            return pmi_error(PM_STATUS_OVERFLOW,
                             "pm_scan_exclusive_u32: total %llu does not fit 32 bits",
                             (unsigned long long)jobs[i].total);
    }
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n,
                                                 uint32_t *out, uint64_t *total)
{
    pmi_scan_job job = {in, out, n, 0};
    const pm_status s = scan_jobs(ctx, 1, &job, PMI_HOST_RESULT);
    if (total) *total = job.total;
    return s;
}

/* The scan queued on the context's stream, its tile states in the call's
 * scratch; no total, no wait. */
extern "C" pm_status pmi_cuda_scan_queued_u32(pm_context *ctx, const uint32_t *in, size_t n,
                                              uint32_t *out)
{
    if (n == 0) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_begin(ctx));
    void *tmp;
    PMI_TRY(pmi_cuda_scratch(ctx, pmi_cuda_scan_tmp_bytes(n), &tmp));
    return pmi_cuda_scan_launch(ctx, in, out, n, tmp, NULL);
}

/* The totals in PMI_HOST_COUNTS + i (4 words). */
extern "C" pm_status pmi_cuda_scan_many_u32(pm_context *ctx, int k, pmi_scan_job *jobs)
{
    if (k < 0 || k > PMI_SCAN_MANY)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_scan_exclusive_u32: %d scans at once", k);
    return scan_jobs(ctx, k, jobs, PMI_HOST_COUNTS);
}
