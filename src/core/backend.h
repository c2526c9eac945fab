/* The backend table: every device implements the primitives behind these
 * function pointers (a NULL entry means "not supported on this device").
 * The public functions in src/core/ check their arguments once and then
 * dispatch; a backend trusts what it gets. Internal header (pmi_ prefix). */
#ifndef PM_CORE_BACKEND_H
#define PM_CORE_BACKEND_H

#include "pyramesh.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pmi_xform; /* src/core/collide_math.h */
struct pmi_loop_args; /* src/core/loop_rules.h */
struct pmi_post_args; /* src/core/post_rules.h */
struct pmi_hmesh; /* src/cpu/post_cpu.h */
struct pmi_sparse_plan; /* src/core/sparse.h */
struct pmi_slab_mesh;   /* below */

/* One exclusive scan of n words (in place when out == in) and its total. */
#define PMI_SCAN_MANY 4
typedef struct pmi_scan_job {
    const uint32_t *in;
    uint32_t *out;
    uint64_t n;
    uint64_t total;
} pmi_scan_job;

typedef struct pmi_backend {
    const char *name;
    /* Set up / tear down ctx->backend_state. */
    pm_status (*init)(pm_context *ctx);
    void (*shutdown)(pm_context *ctx);
    pm_status (*synchronize)(pm_context *ctx);

    pm_status (*alloc)(pm_context *ctx, size_t bytes, void **out);
    void (*free)(pm_context *ctx, void *p);
    pm_status (*upload)(pm_context *ctx, void *dst, const void *src_host, size_t bytes);
    pm_status (*download)(pm_context *ctx, void *dst_host, const void *src, size_t bytes);
    /* Whether the backend's kernels can read p directly (device, managed or
     * mapped pinned memory on CUDA). NULL: every pointer (host backends). */
    int (*accessible)(pm_context *ctx, const void *p);

    pm_status (*reduce_f32)(pm_context *ctx, const float *in, size_t n, pm_reduce_op op,
                            double *result);
    pm_status (*reduce_image_f32)(pm_context *ctx, const float *image, size_t width, size_t height,
                                  size_t row_stride, pm_reduce_op op, double *result);
    pm_status (*scan_exclusive_u32)(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                    uint64_t *total);
    /* Optional: k (at most PMI_SCAN_MANY) scans as scan_exclusive_u32 with
     * one host wait for their totals. NULL: scan_exclusive_u32 each. */
    pm_status (*scan_many_u32)(pm_context *ctx, int k, struct pmi_scan_job *jobs);
    pm_status (*filter_f32)(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                            float threshold, float *out, size_t capacity, size_t *count);
    pm_status (*filter_horn_f32)(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                 float threshold, float *out, size_t capacity, size_t *count);
    pm_status (*compact)(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                         size_t capacity, size_t *count);
    pm_status (*expand)(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                        uint32_t *out_local, size_t capacity, size_t *count);
    /* Optional: device-count variants (see pm_*_async). When NULL, the
     * synchronous entry is called and the count uploaded. */
    pm_status (*filter_f32_async)(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                  float threshold, float *out, size_t capacity,
                                  uint64_t *count_ctx);
    pm_status (*compact_async)(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                               size_t capacity, uint64_t *count_ctx);
    pm_status (*expand_async)(pm_context *ctx, const uint32_t *counts, size_t n,
                              uint64_t *out_source, uint32_t *out_local, size_t capacity,
                              uint64_t *count_ctx);
    pm_status (*histopyramid_build)(pm_context *ctx, const uint32_t *counts, size_t n,
                                    pm_histopyramid **out);
    pm_status (*histopyramid_total)(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total);
    pm_status (*histopyramid_traverse)(pm_context *ctx, const pm_histopyramid *hp,
                                       uint64_t first_key, size_t num_keys, uint64_t *out_source,
                                       uint32_t *out_local);
    void (*histopyramid_destroy)(pm_context *ctx, pm_histopyramid *hp);

    /* volume->data is in context memory; the options are already resolved
     * (normals and inside never DEFAULT, struct_size full). mesh is zeroed. */
    pm_status (*isosurface)(pm_context *ctx, const pm_volume *volume, double iso,
                            const pm_isosurface_options *options, pm_mesh *mesh);
    /* As isosurface, never waiting for the device: options->out_positions (and
     * the other outputs) in context memory, the counts to counts_ctx (see
     * pm_isosurface_async). */
    pm_status (*isosurface_async)(pm_context *ctx, const pm_volume *volume, double iso,
                                  const pm_isosurface_options *options,
                                  pm_isosurface_counts *counts_ctx);
    /* params resolved to defaults; xyz in context memory. */
    pm_status (*field_compute)(pm_context *ctx, const float *xyz, size_t n,
                               const pm_field_params *params, pm_field *out);
    /* The field on a fixed lattice without waiting (pm_field_compute_async):
     * params resolved, grid checked. */
    pm_status (*field_compute_async)(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *params, const pm_field_grid *grid,
                                     float *field_ctx, pm_field_status *status_ctx);
    /* Collision detection (src/core/collide.c): the mesh checked (indices,
     * finite coordinates when in host memory) and non-empty; *out is a
     * calloc'ed struct pm_bvh whose ctx is set, the backend fills the rest. */
    pm_status (*bvh_build)(pm_context *ctx, const pm_mesh *mesh, struct pm_bvh *out);
    void (*bvh_destroy)(pm_context *ctx, struct pm_bvh *bvh);
    /* Both BVHs non-empty; x resolved (identity flag); max_candidates
     * resolved; self when a == b. */
    pm_status (*collide)(pm_context *ctx, const struct pm_bvh *a, const struct pm_bvh *b,
                         const struct pmi_xform *x, const pm_collide_options *options,
                         uint32_t *pairs, size_t capacity, size_t *count);
    /* Loop subdivision (src/core/subdivide.c): runs step `step` of
     * src/core/loop_rules.h for the elements 0..n-1 (n < 2^32) on the
     * arguments, whose arrays are in context memory. */
    pm_status (*subdivide_step)(pm_context *ctx, int step, size_t n,
                                const struct pmi_loop_args *args);
    /* Mesh post-processing (src/core/postprocess.c) on meshes in device
     * memory: runs step `step` of src/core/post_rules.h for the elements
     * 0..n-1 on the arguments (context memory), queued on the context's
     * stream. NULL on the CPU backend: host memory goes to the CPU runner
     * (src/cpu/smooth.c) directly, whatever the context. */
    pm_status (*post_step)(pm_context *ctx, int step, size_t n, const struct pmi_post_args *args);
    /* The SPH interpolator's particle grid in context memory: xyz (n
     * particles, 0 < n < 2^32 - 1) in context memory, p resolved; fills
     * ip->g and ip->own (ip zeroed, ip->ctx set). */
    pm_status (*sph_build)(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                           struct pm_sph_interpolator *ip);
    /* The marching-cubes cleanup (src/core/cleanup_rules.h) of a mesh whose
     * arrays (pos, tri, nrm or NULL) are this backend's memory and owned:
     * options checked, indices in range; replaces them (normals follow
     * their vertices: the caller recomputes them); unchanged on failure. */
    pm_status (*mc_cleanup)(pm_context *ctx, struct pmi_hmesh *m, const pm_mc_cleanup_options *o);
    /* Mesh pieces and sparse reconstruction (src/core/sparse.c,
     * docs/scale.md). isosurface_piece: pm_isosurface_piece with the
     * window in context memory, checked against the ghost rule, options
     * resolved; the piece's arrays in host memory. sparse_plan: the
     * particles (host or context memory, read during the call only; p resolved,
     * method SPH) filtered, their
     * box, the geometry (pmi_sparse_geom_init), the particles sorted by
     * cell key, the occupied bricks (host array, ascending) and the SPH
     * volumes, kept in plan->state; plan zeroed by the caller.
     * sparse_pieces: the field of each brick plan->bricks[first ..
     * first + count) over its window and its piece (host arrays), and the
     * time spent on fields and on extraction (summed over threads).
     * sparse_plan_free: frees plan->state and plan->bricks. isosurface_piece may come
     * alone; the other three all or none. */
    pm_status (*isosurface_piece)(pm_context *ctx, const pm_volume *window,
                                  const uint64_t window_lo[3], const pm_lattice *lattice,
                                  const pm_lattice_box *owned, double iso,
                                  const pm_isosurface_options *options, pm_mesh_piece *piece);
    pm_status (*sparse_plan)(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                             size_t brick_points, pm_normals normals, struct pmi_sparse_plan *plan);
    pm_status (*sparse_pieces)(pm_context *ctx, struct pmi_sparse_plan *plan, size_t first,
                               size_t count, double iso, const pm_isosurface_options *options,
                               pm_mesh_piece *pieces, double *field_ms, double *extract_ms);
    void (*sparse_plan_free)(pm_context *ctx, struct pmi_sparse_plan *plan);
    /* Free bytes of the context's memory (a GPU's), for sizing slabs
     * (core/slab_pieces.c); NULL when host memory is context memory. */
    uint64_t (*free_bytes)(pm_context *ctx);
    /* A z slab of a volume in context memory meshed by the backend's own
     * extraction (core/slab_pieces.c): `window` holds global slices
     * [zoff, zoff + window->nz) (origin and spacing the volume's), the slab
     * owns its slices [own0, own1) (window-relative; the ghost rule's
     * slices around them in the window where the volume has them);
     * options resolved, mode and normals as wanted. Fills *out with the
     * slab's part of pm_isosurface's mesh (host arrays). budget: device
     * bytes the call may use besides the window (0: no limit); over it,
     * or past 32-bit indices in the window, PM_STATUS_OUT_OF_MEMORY (the
     * caller meshes thinner slabs). NULL: the slabs are mesh pieces. */
    pm_status (*isosurface_window)(pm_context *ctx, const pm_volume *window, uint64_t zoff,
                                   uint64_t own0, uint64_t own1, double iso,
                                   const pm_isosurface_options *options, uint64_t budget,
                                   struct pmi_slab_mesh *out);
    /* Scratch memory used only by work queued on the context's stream
     * (CUDA: stream-ordered, freed memory goes back to the context's pool
     * and the next call's scratch reuses it without a device-wide wait;
     * CPU: the context's recycled host arrays, pages already mapped).
     * Never handed to the caller. NULL: alloc and free. */
    pm_status (*scratch_alloc)(pm_context *ctx, size_t bytes, void **out);
    void (*scratch_free)(pm_context *ctx, void *p);
    /* The arrays of meshes returned in context memory (pmi_mesh_prepare)
     * and given back by pm_mesh_free: the backend may keep a few freed
     * ones for the next mesh of about the same size. They are ordinary
     * alloc memory: free works on them too. NULL: alloc and free. */
    pm_status (*mesh_array_alloc)(pm_context *ctx, size_t bytes, void **out);
    void (*mesh_array_free)(pm_context *ctx, void *p);
    /* For pm_mesh_write_context, a mesh in context memory: whether every
     * index is below the vertex count (else PM_STATUS_INVALID_ARGUMENT
     * naming path and the first triangle out of range, as pm_mesh_write);
     * then the body of its binary little-endian PLY file (vertex
     * records, then face records), handed to put a chunk at a time in
     * file order. NULL: the mesh is copied to host memory and written
     * from there. */
    pm_status (*mesh_indices_check)(pm_context *ctx, const pm_mesh *mesh, const char *path);
    pm_status (*ply_body)(pm_context *ctx, const pm_mesh *mesh, const char *path,
                          pm_status (*put)(void *user, const void *bytes, size_t n), void *user);
    /* Optional: scan_exclusive_u32 queued with no host wait and no total,
     * for a caller that knows the total fits 32 bits. NULL:
     * scan_exclusive_u32. */
    pm_status (*scan_queued_u32)(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out);
} pmi_backend;

/* One z slab's part of pm_isosurface's mesh (isosurface_window): its
 * vertices (indexed: the crossings of its slices, in the mesh's order;
 * soup: its triangles' corners) and triangles; an indexed triangle's
 * indices count from the slab's first vertex, and an index at or past
 * num_vertices is the next slab's vertex (index - num_vertices). Host
 * arrays (malloc), normals NULL without normals. */
typedef struct pmi_slab_mesh {
    uint64_t num_vertices, num_triangles, active_cells;
    float *positions, *normals;
    uint32_t *indices;
} pmi_slab_mesh;

typedef struct pmi_host_arrays pmi_host_arrays;

struct pm_context {
    pm_device device;
    const pmi_backend *backend;
    int num_threads; /* resolved: >= 1 */
    int cuda_device;
    void *cuda_stream;   /* caller's stream or NULL */
    void *backend_state; /* owned by the backend */
    pmi_host_arrays *host_arrays; /* recycled host mesh arrays (host_arrays.c), or NULL */
    struct pm_context *twin;      /* pmi_context_twin's, made on first use, or NULL */
    char device_name[128];
    char note[256]; /* why an AUTO context is not on the GPU, or "" */
};

/* The CPU backend (always present) and the CUDA backend (NULL-returning
 * stub in builds without CUDA). */
const pmi_backend *pmi_cpu_backend(void);
const pmi_backend *pmi_cuda_backend(void);
/* Whether a CUDA device is usable (0 in CPU-only builds). */
int pmi_cuda_device_count(void);

/* Whether the context's backend can read p (see pmi_backend.accessible). */
static inline int pmi_ctx_accessible(pm_context *ctx, const void *p)
{
    return !ctx->backend->accessible || ctx->backend->accessible(ctx, p);
}

/* A second context on ctx's device (its own stream): two host threads
 * then overlap one piece's copies with another's kernels on one GPU.
 * Made on first use and kept (and destroyed) with ctx: not the caller's. */
pm_status pmi_context_twin(pm_context *ctx, pm_context **out);
/* The worker contexts of a run over ctxs: each context, followed on a GPU
 * by per_gpu - 1 more on its device (its twin, the twin's twin...), in
 * *out (malloc'd, *count of them). */
pm_status pmi_context_workers(pm_context *const *ctxs, int n, int per_gpu, pm_context ***out,
                              int *count);
/* The context list of a *_multi call: non-empty, no NULL, none twice,
 * with same_backend all of contexts[0]'s backend. */
pm_status pmi_contexts_check(const char *fn, pm_context *const *ctxs, int count, int same_backend);

/* Recycled host arrays (host_arrays.c): _get returns an array of at least
 * `bytes` (NULL when out of memory), from the context's recycled arrays or
 * pmi_alloc_huge; _put gives one back (or frees it): any malloc'ed array. */
void pmi_host_arrays_init(pm_context *ctx);
void pmi_host_arrays_release(pm_context *ctx);
void *pmi_host_array_get(pm_context *ctx, size_t bytes);
void pmi_host_array_put(pm_context *ctx, void *p);

/* Validates a volume and fills in default strides and spacing (sets the
 * error message on failure). */
pm_status pmi_volume_resolve(const pm_volume *in, pm_volume *out);

/* pm_isosurface_options with their defaults (struct_size honoured,
 * normals central, inside above), inside, normals and mode checked; fn
 * names the call in the message. */
pm_status pmi_isosurface_options_resolve(const char *fn, const pm_isosurface_options *options,
                                         pm_isosurface_options *opt);

#ifdef __cplusplus
}
#endif

#endif
