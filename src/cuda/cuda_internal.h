/* Internals of the CUDA backend: the per-context state (device, stream,
 * scratch arena, mapped host words for results), error conversion, and the
 * decoupled look-back tile states of the single-pass scans (Merrill and
 * Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016).
 * Only src/cuda/ includes this header (and CUDA's headers). */
#ifndef PM_CUDA_INTERNAL_H
#define PM_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "core/backend.h"
#include "core/util.h"
}

/* Slots of the mapped, pinned host block that kernels write results into,
 * so a primitive that must return a host value waits for one stream
 * synchronisation and no extra copy. */
enum {
    PMI_HOST_RESULT = 0,
    PMI_HOST_FLAG = 1,
    PMI_HOST_COUNTS = 4 /* 4 words: pm_isosurface's totals */,
    PMI_HOST_SLOTS = 8
};

#define PMI_CUDA_OUT 64
#define PMI_CUDA_KEPT 8
typedef struct pmi_cuda_state {
    int device;
    int num_sms;
    cudaStream_t stream;
    int own_stream;
    void *arena; /* scratch reused across calls (stream-ordered) */
    size_t arena_bytes;
    unsigned long long *host;   /* mapped pinned words (PMI_HOST_SLOTS) */
    unsigned long long *host_d; /* the same words as a device pointer */
    unsigned int *ticket_d;     /* zeroed once; last-block reductions reset it */
    int pdl;                    /* programmatic dependent launch (9.0+) */
    /* Pointers found readable by the kernels (cuda_accessible), so that a
     * per-frame loop passing the same buffers asks the driver once; cleared
     * when the context frees memory. */
    const void *seen[8];
    unsigned seen_next;
    /* Pinned staging for copies with pageable host memory (host_copy.cu):
     * two buffers, each with the event of its last copy. */
    void *pin[2];
    cudaEvent_t pin_ev[2];
    int pin_busy[2];
    /* Output room kept for the next call (pmi_cuda_out_room): a slab
     * window's mesh before its owned part is downloaded, a piece's chunk. */
    void *win_out;
    size_t win_out_bytes;
    /* The direct classification's tile states and ticket (mc_direct.cu,
     * md_sync_get): kept across calls, told apart by the call's epoch, so
     * no kernel clears them; md_tickets counts the tickets taken. */
    void *md_buf;
    size_t md_bytes;
    unsigned md_epoch, md_tickets;
    int md_reset;  /* zero them before the next launch */
    int md_zeroed;  /* the last launch zeroed them first (report: states) */
    int md_cleared; /* the last launch took the call's cleared states */
    /* The marching cubes' CUDA graphs of repeated calls
     * (isosurface.cu, mc_graphs), or NULL; mc_graph_capturing while the
     * library captures one. */
    void *mc_graph;
    int mc_graph_capturing;
    /* The pool of stream-ordered scratch (cuda_scratch_alloc), made at its
     * first use; it keeps freed memory for the next call. */
    cudaMemPool_t pool;
    int no_pool; /* the device refused a pool: scratch is cudaMalloc memory */
    /* Recycled mesh arrays (cuda_mesh_array_alloc): the sizes of the
     * arrays handed out (the newest PMI_CUDA_OUT of them), and the freed
     * ones kept, oldest first. */
    struct {
        void *p;
        size_t size;
    } out[PMI_CUDA_OUT], kept[PMI_CUDA_KEPT];
    unsigned out_next, nkept;
    size_t kept_bytes, kept_budget;
    /* The thread loading the kernels (preload.cu), its place in the list
     * of running ones, and what it did. */
    pthread_t preload_thread;
    struct pmi_cuda_state *preload_next;
    int preload_stop, preload_listed, preload_loaded;
    double preload_ms;
} pmi_cuda_state;

static inline pmi_cuda_state *pmi_cuda(pm_context *ctx)
{
    return (pmi_cuda_state *)ctx->backend_state;
}

/* The backend's helpers (backend.cu), with C linkage like every pmi_
 * symbol. */
extern "C" {
/* Converts a CUDA error into a status with a message naming the step. */
pm_status pmi_cuda_status(cudaError_t e, const char *what);
/* Makes the context's device current (cheap) and clears stale launch errors. */
pm_status pmi_cuda_begin(pm_context *ctx);
/* Scratch memory of at least `bytes`, valid until the next call on ctx. Work
 * already queued on the stream may still use the old arena: growing it frees
 * the old one with cudaFree, which waits for the device first. */
pm_status pmi_cuda_scratch(pm_context *ctx, size_t bytes, void **out);
/* Output room of `bytes` in the context's kept buffer (st->win_out),
 * grown when needed (a grow waits for the device); valid until the next
 * call. src/cuda/isosurface.cu. */
pm_status pmi_cuda_out_room(pmi_cuda_state *st, size_t bytes, char **out);
/* Checks the launch just made. */
pm_status pmi_cuda_launched(const char *what);
/* Waits, then reads the full count kernels left in the mapped host word:
 * TRUNCATED when it exceeds capacity. */
pm_status pmi_cuda_host_count(pm_context *ctx, size_t capacity, size_t *count, const char *fn);
/* Waits for the stream (used only where a host value is required). */
pm_status pmi_cuda_wait(pm_context *ctx, const char *what);
/* Queues a copy between device memory and host memory (to_host: dst is
 * the host side), staged through the context's pinned buffers when the
 * host side is pageable and large; returns with the download complete or
 * the upload queued (stream-ordered). The caller still waits as before. */
pm_status pmi_cuda_copy_host(pm_context *ctx, void *dst, const void *src, size_t bytes,
                             int to_host, const char *what);
/* The context's two pinned staging buffers (PMI_PIN_CHUNK bytes each),
 * made at first use; returns with no copy in flight on either. */
pm_status pmi_cuda_pin_buffers(pmi_cuda_state *st);
/* A mesh in device memory: its indices checked, and the body of its
 * binary PLY file (ply_body.cu). */
pm_status pmi_cuda_mesh_indices_check(pm_context *ctx, const pm_mesh *mesh, const char *path);
pm_status pmi_cuda_ply_body(pm_context *ctx, const pm_mesh *mesh, const char *path,
                            pm_status (*put)(void *user, const void *bytes, size_t n), void *user);
}
#define PMI_PIN_CHUNK ((size_t)8 << 20)

/* Kernel preloading (preload.cu): a thread started with the context loads
 * the kernels each module lists, tier 0 (f32 paths) before tier 1 (the
 * rest); the stop (pm_context_destroy, or the process's exit) lets it
 * finish only the kernel it is loading. pmi_preload_fn loads one kernel
 * and returns 0 once stopped. The thread only loads kernels: no copy or
 * other stream work, so that it cannot disturb a caller's stream capture. */
struct pmi_preload;
typedef struct pmi_preload pmi_preload;
extern "C" {
int pmi_preload_fn(pmi_preload *p, const void *fn);
void pmi_cuda_preload_start(pmi_cuda_state *st);
void pmi_cuda_preload_stop(pmi_cuda_state *st);
void pmi_neighbours_preload(pmi_preload *p, int tier);
void pmi_density_preload(pmi_preload *p, int tier);
void pmi_isosurface_preload(pmi_preload *p, int tier);
/* Frees the marching cubes' graph of a repeated call (context shutdown). */
void pmi_isosurface_graph_free(pmi_cuda_state *st);
void pmi_mc_stream_preload(pmi_preload *p, int tier);
void pmi_mc_direct_preload(pmi_preload *p, int tier);
void pmi_mc_expand_preload(pmi_preload *p, int tier);
void pmi_mc_classify_preload(pmi_preload *p, int tier);
void pmi_ply_body_preload(pmi_preload *p, int tier);
void pmi_piece_preload(pmi_preload *p, int tier);
/* Tests: waits for the thread (not started: at once); the kernels it
 * loaded, those listed and its time. */
int pmi_cuda_preload_wait(pm_context *ctx, int *listed, double *ms);
}
/* pmi_preload_fn on each of a module's kernels in turn; 0 once stopped. */
template <size_t N> static inline int pmi_preload_all(pmi_preload *p, const void *const (&k)[N])
{
    for (size_t i = 0; i < N; i++)
        if (!pmi_preload_fn(p, k[i])) return 0;
    return 1;
}

static inline size_t pmi_align256(size_t b) { return (b + 255) & ~(size_t)255; }

#define PMI_CU_TRY(expr, what)                                                                     \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess) return pmi_cuda_status(e_, what);                                   \
    } while (0)
#define PMI_TRY(expr)                                                                              \
    do {                                                                                           \
        pm_status s_ = (expr);                                                                     \
        if (s_ != PM_STATUS_OK) return s_;                                                         \
    } while (0)

/* ---- programmatic dependent launch --------------------------------------
 * On compute capability 9.0 and later a kernel launched by pmi_launch with
 * pdl set may be scheduled while the kernel before it on the stream is
 * still running its last blocks, so its launch and the start of its blocks
 * overlap that tail. Such a kernel must call pmi_pdl_enter() before it
 * touches global memory: it waits for the previous kernel to complete (its
 * writes visible), then lets the next kernel be scheduled. Waiting before
 * letting the next one go keeps the chain transitive: when a kernel starts,
 * every kernel before its predecessor has completed. So a kernel may read,
 * before its pmi_pdl_enter(), what the kernels before its predecessor
 * wrote, provided its predecessor writes none of it (the chunked soup
 * kernel does, mc_expand.cu); every block must still call pmi_pdl_enter()
 * before it ends, or the chain's order would not hold for the kernel after
 * it. Without pdl (older devices, the test hook nopdl) the launch is an
 * ordinary one and pmi_pdl_enter() returns at once. */
static __device__ __forceinline__ void pmi_pdl_enter(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename... P, typename... A>
static inline void pmi_launch(int pdl, void (*kernel)(P...), unsigned grid, unsigned block,
                              cudaStream_t s, A... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.stream = s;
    cfg.attrs = pdl ? at : NULL;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kernel, args...); /* errors: pmi_cuda_launched */
}

/* ---- decoupled look-back -------------------------------------------------
 * A tile's state is one 64-bit word: 2 flag bits and a 62-bit value, written
 * and read whole, so a reader never sees a flag without its value. */
#define PMI_FLAG_A (1ull << 62) /* aggregate of this tile only */
#define PMI_FLAG_P (2ull << 62) /* inclusive prefix through this tile */
#define PMI_VALUE_MASK ((1ull << 62) - 1)

static __device__ __forceinline__ void pmi_tile_publish(unsigned long long *state,
                                                        unsigned long long word)
{
    *(volatile unsigned long long *)state = word;
}

/* One poll of a look-back (all 32 lanes of one warp): lane l's state of
 * tile end - l (an inclusive prefix of 0 before tile 0), once every lane's
 * is published; a warp that finds a predecessor without a state naps
 * `spin_ns` before looking again. States that carry a tag (the bits
 * tag_mask, e.g. a call's epoch) count as published only with the bits
 * `tag`. */
static __device__ __forceinline__ unsigned long long
pmi_lookback_window(unsigned long long *state, long long end, unsigned spin_ns,
                    unsigned long long tag_mask, unsigned long long tag)
{
    const long long idx = end - (long long)(threadIdx.x & 31);
    for (;;) {
        const unsigned long long s =
            idx >= 0 ? *(volatile unsigned long long *)(state + idx) : PMI_FLAG_P | tag;
        if (!__any_sync(0xffffffffu, (s >> 62) == 0 || (s & tag_mask) != tag)) return s;
        /* Back off: a tight spin of hundreds of warps steals L2
         * bandwidth from the tiles that are still loading. */
        __nanosleep(spin_ns);
    }
}

/* Called by all 32 lanes of one warp of tile `tile` (> 0): the exclusive
 * prefix of the tile, looking back 32 predecessors at a time. */
static __device__ __forceinline__ unsigned long long
pmi_lookback_ns(unsigned long long *state, unsigned long long tile, unsigned spin_ns)
{
    const unsigned lane = threadIdx.x & 31;
    unsigned long long excl = 0;
    long long end = (long long)tile - 1;
    for (;;) {
        const unsigned long long s = pmi_lookback_window(state, end, spin_ns, 0, 0);
        unsigned pmask = __ballot_sync(0xffffffffu, (s >> 62) == 2);
        unsigned long long v = s & PMI_VALUE_MASK;
        if (pmask && (int)lane > __ffs(pmask) - 1) v = 0;
        for (int off = 16; off; off >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, off);
        excl += v;
        if (pmask) break;
        end -= 32;
    }
    return excl;
}

static __device__ __forceinline__ unsigned long long pmi_lookback(unsigned long long *state,
                                                                  unsigned long long tile)
{
    return pmi_lookback_ns(state, tile, 64);
}

/* The same with a back-off like CUB's sm90 scan tuning (a fixed delay
 * before the first look and between looks) in grids of at least
 * PMI_LB_DELAY_GRID blocks (CUB's threshold too): there a tile's near
 * predecessors are rarely done when it publishes its aggregate, and warps
 * that spin on their states take issue slots and L2 bandwidth from the
 * loads of the resident tiles. Measured on the H100 at 2^28
 * (bench/RESULTS-cudaprims.md): the scan (128x24 tiles) went from 0.97 to
 * 0.86 ms, the filter at 10% kept from 0.54 to 0.47 ms; shorter naps
 * (0/64/350 ns, or no first nap) were slower. */
#define PMI_LB_DELAY_GRID 500
#define PMI_LB_FIRST_NS 1250
#define PMI_LB_RETRY_NS 650
static __device__ __forceinline__ unsigned long long pmi_lookback_naps(unsigned long long *state,
                                                                       unsigned long long tile,
                                                                       unsigned first_ns,
                                                                       unsigned retry_ns)
{
    if (gridDim.x < PMI_LB_DELAY_GRID) return pmi_lookback_ns(state, tile, 64);
    __nanosleep(first_ns);
    return pmi_lookback_ns(state, tile, retry_ns);
}

static __device__ __forceinline__ unsigned long long pmi_lookback_backoff(unsigned long long *state,
                                                                          unsigned long long tile)
{
    return pmi_lookback_naps(state, tile, PMI_LB_FIRST_NS, PMI_LB_RETRY_NS);
}

/* Entry points of the algorithm files (C linkage for the table). */
extern "C" {
pm_status pmi_cuda_reduce_f32(pm_context *ctx, const float *in, size_t n, pm_reduce_op op,
                              double *result);
pm_status pmi_cuda_reduce_image_f32(pm_context *ctx, const float *image, size_t width,
                                    size_t height, size_t row_stride, pm_reduce_op op,
                                    double *result);
pm_status pmi_cuda_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                      uint64_t *total);
pm_status pmi_cuda_scan_many_u32(pm_context *ctx, int k, pmi_scan_job *jobs);
pm_status pmi_cuda_scan_queued_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out);
/* The scan queued without waiting: scratch tmp of pmi_cuda_scan_tmp_bytes(n)
 * bytes (device), the total (sum of all n inputs) to *total (device or
 * mapped memory; NULL: not written). */
size_t pmi_cuda_scan_tmp_bytes(size_t n);
pm_status pmi_cuda_scan_launch(pm_context *ctx, const uint32_t *in, uint32_t *out, size_t n,
                               void *tmp, unsigned long long *total);
pm_status pmi_cuda_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                              float threshold, float *out, size_t capacity, size_t *count);
pm_status pmi_cuda_filter_f32_async(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                    float threshold, float *out, size_t capacity,
                                    uint64_t *count_ctx);
pm_status pmi_cuda_filter_horn_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                   float threshold, float *out, size_t capacity, size_t *count);
pm_status pmi_cuda_compact(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                           size_t capacity, size_t *count);
pm_status pmi_cuda_compact_async(pm_context *ctx, const uint8_t *flags, size_t n,
                                 uint64_t *out_index, size_t capacity, uint64_t *count_ctx);
pm_status pmi_cuda_expand(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                          uint32_t *out_local, size_t capacity, size_t *count);
pm_status pmi_cuda_expand_async(pm_context *ctx, const uint32_t *counts, size_t n,
                                uint64_t *out_source, uint32_t *out_local, size_t capacity,
                                uint64_t *count_ctx);
pm_status pmi_cuda_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                      pm_histopyramid **out);
pm_status pmi_cuda_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total);
pm_status pmi_cuda_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp,
                                         uint64_t first_key, size_t num_keys, uint64_t *out_source,
                                         uint32_t *out_local);
void pmi_cuda_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp);
/* Collision detection (bvh.cu, collide.cu). */
pm_status pmi_cuda_bvh_build(pm_context *ctx, const pm_mesh *mesh, struct pm_bvh *out);
void pmi_cuda_bvh_destroy(pm_context *ctx, struct pm_bvh *bvh);
pm_status pmi_cuda_collide(pm_context *ctx, const struct pm_bvh *a, const struct pm_bvh *b,
                           const struct pmi_xform *x, const pm_collide_options *options,
                           uint32_t *pairs, size_t capacity, size_t *count);
/* Loop subdivision (subdivide.cu): one step of src/core/loop_rules.h. */
pm_status pmi_cuda_subdivide_step(pm_context *ctx, int step, size_t n,
                                  const struct pmi_loop_args *args);
/* A mesh piece of a window in device memory (piece.cu; src/core/backend.h). */
pm_status pmi_cuda_isosurface_piece(pm_context *ctx, const pm_volume *window,
                                    const uint64_t window_lo[3], const pm_lattice *lattice,
                                    const pm_lattice_box *owned, double iso,
                                    const pm_isosurface_options *options, pm_mesh_piece *piece);
/* Pieces kept on the device (the sparse reconstruction's bricks): every
 * kind of array appended to its own buffer, grown as needed, in the
 * stream-ordered scratch of the context that fills it (ctx, set at the
 * first piece); nv, nt the vertices and triangles held. */
typedef struct pmi_piece_store {
    pm_context *ctx;
    unsigned long long *keys, *tri, *ckey;
    float *pos, *nrm;
    size_t nv, nt, cap_v, cap_t;
} pmi_piece_store;
/* pmi_cuda_isosurface_piece with the piece's arrays appended to store
 * (the piece gets their counts, no arrays). */
pm_status pmi_cuda_piece_stored(pm_context *ctx, const pm_volume *window,
                                const uint64_t window_lo[3], const pm_lattice *lattice,
                                const pm_lattice_box *owned, double iso,
                                const pm_isosurface_options *options, pm_mesh_piece *piece,
                                pmi_piece_store *store);
void pmi_piece_store_free(pmi_piece_store *store);
/* A slab window's part of the mesh (isosurface.cu; src/core/backend.h). */
pm_status pmi_cuda_isosurface_window(pm_context *ctx, const pm_volume *window, uint64_t zoff,
                                     uint64_t own0, uint64_t own1, double iso,
                                     const pm_isosurface_options *options, uint64_t budget,
                                     struct pmi_slab_mesh *out);
pm_status pmi_cuda_sparse_plan(pm_context *ctx, const float *xyz, size_t n,
                               const pm_field_params *p, size_t brick_points, pm_normals normals,
                               struct pmi_sparse_plan *plan);
pm_status pmi_cuda_sparse_pieces(pm_context *ctx, struct pmi_sparse_plan *plan, size_t first,
                                 size_t count, double iso, const pm_isosurface_options *options,
                                 pm_mesh_piece *pieces, double *field_ms, double *extract_ms);
void pmi_cuda_sparse_plan_free(pm_context *ctx, struct pmi_sparse_plan *plan);
}

#endif
