/* pyramesh: volumes and point clouds to triangle meshes, on multi-core CPUs
 * and NVIDIA GPUs, built around the HistoPyramid (order-preserving,
 * deterministic stream compaction and expansion).
 *
 * This is the one public header. Conventions used by every function:
 *  - Every call that can fail returns a pm_status. On failure a message that
 *    says what went wrong (which file, which byte or line, what was expected)
 *    is available from pm_last_error() on the same thread.
 *  - Sizes are size_t element counts; a name ending in _bytes is bytes.
 *  - "Context memory" is host memory on a CPU context and device memory on a
 *    CUDA context. Primitives take pointers in context memory.
 *  - Option structs start with struct_size; a zero-initialised struct (or a
 *    NULL pointer) means "all defaults". struct_size 0 means the full struct
 *    of the header the caller compiled against.
 *  - The library never exits, aborts or prints. */
#ifndef PYRAMESH_H
#define PYRAMESH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PM_VERSION_MAJOR 0
#define PM_VERSION_MINOR 1
#define PM_VERSION_PATCH 0
#define PM_VERSION_STRING "0.1.0"

#if defined(_WIN32) && defined(PM_BUILDING_SHARED)
#define PM_API __declspec(dllexport)
#elif defined(__GNUC__)
#define PM_API __attribute__((visibility("default")))
#else
#define PM_API
#endif

/* ------------------------------------------------------------------------ */
/* Status, devices, contexts                                                 */
/* ------------------------------------------------------------------------ */

typedef enum pm_status {
    PM_STATUS_OK = 0,
    PM_STATUS_INVALID_ARGUMENT, /* NULL pointer, bad enum, impossible size */
    PM_STATUS_OUT_OF_MEMORY,    /* host or device allocation failed */
    PM_STATUS_OVERFLOW,         /* a size or a 32-bit result does not fit */
    PM_STATUS_TRUNCATED,        /* more outputs than capacity; *count is full */
    PM_STATUS_UNSUPPORTED,      /* not available on this backend or build */
    PM_STATUS_DEVICE_ERROR,     /* a CUDA call failed */
    PM_STATUS_IO_ERROR,         /* a file could not be opened/read/written */
    PM_STATUS_PARSE_ERROR       /* a file is malformed */
    /* append only */
} pm_status;

typedef enum pm_device { PM_DEVICE_AUTO = 0, PM_DEVICE_CPU = 1, PM_DEVICE_CUDA = 2 } pm_device;

/* Zero fields mean defaults. num_threads 0 = all cores (CPU backend).
 * cuda_stream: a cudaStream_t the CUDA backend issues its work on (NULL =
 * a stream the context creates). PM_DEVICE_AUTO picks CUDA when a GPU is
 * usable and CPU otherwise; the environment variable PYRAMESH_DEVICE
 * (cpu|cuda|auto) overrides a desc's AUTO choice. */
typedef struct pm_context_desc {
    size_t struct_size;
    pm_device device;
    int cuda_device;
    int num_threads;
    void *cuda_stream; /* appended after the first release; see struct_size */
} pm_context_desc;

typedef struct pm_context pm_context;

/* Creates a context. desc may be NULL (all defaults). A context keeps
 * scratch memory between calls (the CUDA arena; on the CPU, the output
 * chunks of the last pm_isosurface), so it is used by one thread at a time:
 * give each thread its own. Returns
 * PM_STATUS_UNSUPPORTED when CUDA is asked for explicitly and this build or
 * machine has none, PM_STATUS_DEVICE_ERROR when the GPU cannot be set up. */
PM_API pm_status pm_context_create(const pm_context_desc *desc, pm_context **out);
/* Destroys a context and its scratch memory. NULL is fine. */
PM_API void pm_context_destroy(pm_context *ctx);
/* The device actually chosen (never PM_DEVICE_AUTO). */
PM_API pm_device pm_context_device(const pm_context *ctx);
/* Blocks until all work issued on the context is finished. */
PM_API pm_status pm_context_synchronize(pm_context *ctx);
/* Whether this build has the CUDA backend and a usable GPU is present. */
PM_API int pm_cuda_available(void);
/* How many GPUs the CUDA backend can use (0 without CUDA): the range of
 * pm_context_desc.cuda_device, e.g. to bind MPI ranks one per GPU. */
PM_API int pm_cuda_device_count(void);
/* Human-readable name of a status; never NULL. */
PM_API const char *pm_status_string(pm_status s);
/* The message of the last failure on this thread ("" when none). */
PM_API const char *pm_last_error(void);
/* Human-readable name of a device ("cpu", "cuda", "auto"). */
PM_API const char *pm_device_string(pm_device d);
/* A one-line description of the context's device, e.g. the GPU name. */
PM_API const char *pm_context_device_name(const pm_context *ctx);
/* The CPU threads the context's host work uses (>= 1). */
PM_API int pm_context_num_threads(const pm_context *ctx);
/* Why a PM_DEVICE_AUTO context runs on the CPU although a GPU is present
 * (e.g. this build has no kernel image for the GPU's architecture), or "".
 * PM_DEVICE_CUDA fails with PM_STATUS_UNSUPPORTED and that message instead. */
PM_API const char *pm_context_note(const pm_context *ctx);
/* What this build has: its backends and, for CUDA, the GPU architectures it
 * was compiled for, and whether meshoptimizer (pm_mesh_simplify) is in,
 * e.g. "cpu (OpenMP); cuda (sm_70 ... sm_90, PTX 90); meshoptimizer
 * (pm_mesh_simplify)". */
PM_API const char *pm_build_info(void);

/* ------------------------------------------------------------------------ */
/* Memory in the context's space                                             */
/* ------------------------------------------------------------------------ */

/* Allocates `bytes` (0 gives a unique non-NULL pointer) in context memory. */
PM_API pm_status pm_alloc(pm_context *ctx, size_t bytes, void **out);
/* Frees memory from pm_alloc. NULL is fine. */
PM_API void pm_free(pm_context *ctx, void *p);
/* Host -> context memory and back; synchronous. */
PM_API pm_status pm_upload(pm_context *ctx, void *dst, const void *src_host, size_t bytes);
PM_API pm_status pm_download(pm_context *ctx, void *dst_host, const void *src, size_t bytes);

/* ------------------------------------------------------------------------ */
/* Data-parallel primitives: reductions, scan, filtering, compaction,       */
/* expansion and the HistoPyramid (Ziegler et al. 2006; Horn 2005)         */
/* All pointers are in context memory unless marked _host.                   */
/* ------------------------------------------------------------------------ */

typedef enum pm_reduce_op {
    PM_REDUCE_SUM,
    PM_REDUCE_MEAN,
    PM_REDUCE_MIN,
    PM_REDUCE_MAX,
    PM_REDUCE_GEOMEAN /* exp(mean(log(x))); inputs must be > 0 */
} pm_reduce_op;

/* The primitives' pointers must be memory the backend can read and write:
 * a host pointer on a CUDA context is PM_STATUS_INVALID_ARGUMENT naming the
 * argument, found before any kernel runs (device, managed and mapped pinned
 * memory are fine). The per-frame async calls refuse host memory likewise.
 * A device fault that still happens (e.g. a freed device pointer) is
 * PM_STATUS_DEVICE_ERROR on that call; CUDA then fails every later call in
 * the process, so do not pass memory you did not allocate for the GPU.
 *
 * Argument order of every primitive: context, inputs, their count,
 * parameters (operator, comparison, threshold), outputs, capacity, then the
 * count or result written back. */

/* Reduces n floats into *result (host). Accumulation is in double per
 * block, so SUM/MEAN have relative error <= 1e-6 even for 1e8 elements.
 * n == 0: SUM gives 0, others PM_STATUS_INVALID_ARGUMENT. NaNs propagate
 * for SUM/MEAN/GEOMEAN; MIN/MAX ignore NaN unless all elements are NaN. */
PM_API pm_status pm_reduce_f32(pm_context *ctx, const float *in, size_t n, pm_reduce_op op,
                               double *result);
/* Reduces a width x height image whose rows are row_stride elements apart
 * (row_stride >= width). Seed 001: large fan-in, never reads outside the
 * valid width x height region, exact for non-power-of-two sizes. */
PM_API pm_status pm_reduce_image_f32(pm_context *ctx, const float *image, size_t width,
                                     size_t height, size_t row_stride, pm_reduce_op op,
                                     double *result);

/* Exclusive scan: out[i] = in[0] + ... + in[i-1]; *total (host, may be NULL)
 * = sum of all n. Returns PM_STATUS_OVERFLOW if a prefix or the total does
 * not fit 32 bits (out is then unspecified, *total still exact). out may
 * alias in. */
PM_API pm_status pm_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                       uint64_t *total);

typedef enum pm_compare { PM_LESS, PM_LESS_EQUAL, PM_GREATER, PM_GREATER_EQUAL } pm_compare;

/* Order-preserving filter: copies the in[i] with (in[i] cmp threshold) to
 * out, in input order. NaN never passes. If more than capacity qualify, the
 * first capacity are written, *count (host) receives the full number and
 * PM_STATUS_TRUNCATED is returned. out must not overlap in. */
PM_API pm_status pm_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                               float threshold, float *out, size_t capacity, size_t *count);
/* The same contract computed by Horn's method (GPU Gems 2, ch. 36, 2005): Hillis-Steele scan of the
 * keep flags, then a parallel binary search and gather per output. O(n log n); kept for comparison.
 */
PM_API pm_status pm_filter_horn_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                    float threshold, float *out, size_t capacity, size_t *count);

/* Order-preserving compaction: writes the indices i with flags[i] != 0, in
 * increasing order, to out_index. Truncation contract as pm_filter_f32. */
PM_API pm_status pm_compact(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                            size_t capacity, size_t *count);
/* Order-preserving expansion: input i produces counts[i] outputs; output k
 * (in order of i, then of local index) gets out_source[k] = i and
 * out_local[k] = its local index 0..counts[i]-1. Either output array may be
 * NULL. Truncation contract as pm_filter_f32. */
PM_API pm_status pm_expand(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                           uint32_t *out_local, size_t capacity, size_t *count);

/* Variants that never wait for the device: the full count is written to
 * *count_ctx, a uint64_t in CONTEXT memory, so a caller can chain calls
 * (size the next launch from a device-side count, the "expected count"
 * of HistoPyramid compaction) without a host round trip. Outputs past capacity are dropped as
 * above; PM_STATUS_TRUNCATED cannot be reported without waiting, so these
 * return PM_STATUS_OK and the caller compares *count_ctx with capacity. On
 * the CPU backend they are synchronous. */
PM_API pm_status pm_filter_f32_async(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                     float threshold, float *out, size_t capacity,
                                     uint64_t *count_ctx);
PM_API pm_status pm_compact_async(pm_context *ctx, const uint8_t *flags, size_t n,
                                  uint64_t *out_index, size_t capacity, uint64_t *count_ctx);
PM_API pm_status pm_expand_async(pm_context *ctx, const uint32_t *counts, size_t n,
                                 uint64_t *out_source, uint32_t *out_local, size_t capacity,
                                 uint64_t *count_ctx);

/* The HistoPyramid itself (Ziegler et al. 2006: build, then traverse), for users who build once
 * and traverse many times. The pyramid lives in context memory and owns a
 * copy of nothing but its levels: counts may be freed after build. */
typedef struct pm_histopyramid pm_histopyramid;
/* Returns PM_STATUS_OVERFLOW if the sum of the counts exceeds 2^64 - 1. */
PM_API pm_status pm_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                       pm_histopyramid **out);
/* Total number of outputs (host, 64-bit). */
PM_API pm_status pm_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total);
/* Traverses keys first_key .. first_key + num_keys - 1 (each must be below
 * the total: PM_STATUS_INVALID_ARGUMENT otherwise), writing for each the
 * source index and local index as pm_expand does. Either output may be NULL. */
PM_API pm_status pm_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp,
                                          uint64_t first_key, size_t num_keys, uint64_t *out_source,
                                          uint32_t *out_local);
PM_API void pm_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp);

/* ------------------------------------------------------------------------ */
/* Float packing into RGBA8 bytes (GPGPU readback): host memory, cannot fail */
/* ------------------------------------------------------------------------ */

/* Exact IEEE-754 float <-> RGBA8: r = mantissa bits 0-7, g = bits 8-15,
 * b = bit 0 of the exponent in bit 7 plus mantissa bits 16-22, a = sign in
 * bit 7 plus exponent bits 1-7. Endian-independent, bit-exact for every
 * value including NaN payloads, infinities, denormals and -0. */
PM_API void pm_pack_f32_rgba8(const float *in, size_t n, uint8_t *out_rgba);
PM_API void pm_unpack_rgba8_f32(const uint8_t *in_rgba, size_t n, float *out);
/* Fixed-point v in [0,1] <-> RGBA8 (a count read back through an 8-bit texture): N =
 * round(v * 255^4), ties up, stored as base-255 digits with r most
 * significant (every byte 0..254). NaN and values <= 0 encode as 0, values
 * >= 1 as the largest code, which decodes to 1.0f, so decoded values lie in
 * [0, 1]. */
PM_API void pm_pack_unorm_rgba8(const float *in, size_t n, uint8_t *out_rgba);
PM_API void pm_unpack_unorm_rgba8(const uint8_t *in_rgba, size_t n, float *out);

/* ------------------------------------------------------------------------ */
/* Volumes and isosurfaces: marching cubes (Lorensen and Cline 1987) by     */
/* HistoPyramid expansion (Dyken et al. 2008)                               */
/* ------------------------------------------------------------------------ */

typedef enum pm_sample_type {
    PM_SAMPLE_U8 = 0,
    PM_SAMPLE_U16,
    PM_SAMPLE_I16,
    PM_SAMPLE_F32,
    PM_SAMPLE_F64
} pm_sample_type;

/* Size in bytes of one sample of the type (0 for an invalid type). */
PM_API size_t pm_sample_size(pm_sample_type t);
/* "u8", "u16", "i16", "f32", "f64". */
PM_API const char *pm_sample_type_string(pm_sample_type t);

/* A volume of nx * ny * nz samples, x fastest. Sample (i,j,k) is at
 * data[i + j*row_stride + k*slice_stride] (in elements) and at position
 * origin + (i*spacing[0], j*spacing[1], k*spacing[2]). row_stride 0 means
 * nx, slice_stride 0 means row_stride*ny. spacing 0 means 1. The data is in
 * context memory (or host memory where a function says so). */
typedef struct pm_volume {
    const void *data;
    pm_sample_type type;
    size_t nx, ny, nz;
    size_t row_stride, slice_stride;
    double spacing[3];
    double origin[3];
} pm_volume;

typedef enum pm_normals {
    PM_NORMALS_DEFAULT = 0, /* = PM_NORMALS_CENTRAL */
    PM_NORMALS_NONE,
    PM_NORMALS_FORWARD, /* forward differences (fast) */
    PM_NORMALS_CENTRAL, /* central differences (one-sided at the border) */
    PM_NORMALS_SOBEL    /* 3x3x3 Sobel kernel */
} pm_normals;

typedef enum pm_mesh_mode {
    PM_MESH_INDEXED = 0, /* shared vertices: each lattice point owns its edges 0, 3, 8 */
    PM_MESH_SOUP         /* 3 vertices per triangle */
} pm_mesh_mode;

/* Which side of the iso value is the object. Triangles (counter-clockwise
 * seen from outside) and normals face out of the inside region either way. */
typedef enum pm_inside {
    PM_INSIDE_DEFAULT = 0, /* = PM_INSIDE_ABOVE, as VTK and scikit-image */
    PM_INSIDE_ABOVE,       /* above iso is inside: bright objects (CT bone),
                              densities, pm_field; normals point to
                              decreasing values, closed surfaces of bright
                              objects have a positive signed volume */
    PM_INSIDE_BELOW        /* below iso is inside: signed distance fields
                              (negative inside); exactly the mesh of the
                              negated field at -iso with PM_INSIDE_ABOVE */
} pm_inside;

/* output_in_context_memory = PM_OUTPUT_ANY: no copy between memories for
 * the output. A mesh made on the device stays in context memory; one
 * assembled on the host stays there: a sparse pm_reconstruct's merge, a
 * host volume streamed through a GPU in slabs, pm_isosurface_multi,
 * pm_isosurface_stream and pm_mesh_pieces_merge. pm_mesh.in_context_memory
 * says which; pm_mesh_write_context writes either. With caller buffers,
 * as 1. */
#define PM_OUTPUT_ANY 2

typedef struct pm_isosurface_options {
    size_t struct_size;
    pm_normals normals;
    pm_mesh_mode mode;
    pm_inside inside;
    /* Where the output arrays live: 0 = host memory (malloc), 1 = context
     * memory (device memory on a CUDA context, no host copy),
     * PM_OUTPUT_ANY = where the call makes the mesh (below). */
    int output_in_context_memory;
    /* Optional caller-provided output buffers (in the memory chosen above);
     * when out_positions is non-NULL the mesh is written there, at most
     * vertex_capacity vertices and triangle_capacity triangles, and
     * PM_STATUS_TRUNCATED is returned when they do not fit (the mesh's
     * counts are still the full ones). out_normals/out_indices may be NULL
     * when not wanted. */
    float *out_positions;
    float *out_normals;
    uint32_t *out_indices;
    size_t vertex_capacity;
    size_t triangle_capacity;
    /* Optional: filled with what the call did (see pm_isosurface_report). */
    struct pm_isosurface_report *report;
} pm_isosurface_options;

/* What one extraction did, for --stats, benchmarks and tests: the path
 * the backend took and, when `timed` is set by the caller before the call,
 * the time of each stage. `path` is a space-separated list of key=value
 * words, e.g. "backend=cuda pass1=stream pass2=cells launch=chained"
 * (docs/isosurface.md and docs/cuda_isosurface.md list every key and
 * value). Timing a CUDA extraction records events between its stages and
 * waits for them, so leave `timed` at 0 in a timed loop; the async call
 * fills the path and never the timings. */
typedef struct pm_isosurface_report {
    int timed;                  /* in: fill stage_ms */
    char path[256];             /* out: the path taken */
    double stage_ms[4];         /* out: stage times (ms) when timed, else 0 */
    const char *stage_names[4]; /* out: static names of the stages, NULL past the last */
} pm_isosurface_report;

/* Timings of one pipeline, in milliseconds (0 where a stage did not run). */
typedef struct pm_timings {
    double read_ms, neighbours_ms, density_ms, field_ms, extract_ms, write_ms;
} pm_timings;

/* A triangle mesh. positions: 3 floats per vertex; normals: 3 floats per
 * vertex or NULL; indices: 3 per triangle, or NULL for a soup (then
 * triangle t is vertices 3t, 3t+1, 3t+2). Triangles are counter-clockwise
 * seen from outside the "inside" region (pm_inside). */
typedef struct pm_mesh {
    size_t num_vertices;
    size_t num_triangles;
    float *positions;
    float *normals;
    uint32_t *indices;
    uint64_t active_cells; /* cells the surface passes through */
    int in_context_memory; /* arrays are in context memory */
    int owns_arrays;       /* pm_mesh_free frees the arrays */
    pm_timings timings;    /* extract_ms filled by pm_isosurface */
} pm_mesh;

/* Extracts the iso surface of `volume` at `iso` (marching cubes):
 * a corner is inside when its value is above iso (or below iso with
 * options->inside = PM_INSIDE_BELOW); values equal to iso and NaN are
 * outside (see
 * docs/isosurface.md). Normals come from the field gradient; where it
 * vanishes, a vertex takes the direction of its edge from the inside end to
 * the outside end. Output order is the cell
 * linear index, then triangle order in the case table, so every backend
 * produces the same mesh. Indexed meshes of closed surfaces are watertight
 * and consistently oriented. The volume data is in context memory, or in
 * host memory, which the call then copies in itself (on a CUDA context;
 * device, managed and mapped pinned memory are used in place). Caller
 * buffers with output_in_context_memory must be memory the backend can
 * write (PM_STATUS_INVALID_ARGUMENT otherwise). The mesh is
 * zero-initialised first and must be freed with pm_mesh_free. */
PM_API pm_status pm_isosurface(pm_context *ctx, const pm_volume *volume, double iso,
                               const pm_isosurface_options *options, pm_mesh *mesh);
/* The counts pm_isosurface_async writes in context memory when its work
 * is done. flags: 0 when the mesh was written, else
 * PM_ISOSURFACE_DOES_NOT_FIT (it exceeds a capacity: the buffers' contents
 * are then unspecified; call again with at least the counts) or
 * PM_ISOSURFACE_INDEX_OVERFLOW (an indexed mesh of more than UINT32_MAX
 * vertices), on every backend. */
typedef struct pm_isosurface_counts {
    uint64_t num_vertices;
    uint64_t num_triangles;
    uint64_t active_cells;
    uint64_t flags;
} pm_isosurface_counts;

/* pm_isosurface for a per-frame loop: queues the whole extraction on the
 * context's stream and returns without waiting for the device (on the CPU
 * backend it runs synchronously). The volume and the output buffers are in
 * context memory: options->out_positions (required; out_normals and
 * out_indices as for pm_isosurface) with vertex_capacity /
 * triangle_capacity, and output_in_context_memory is ignored. counts_ctx
 * (in context memory) receives the counts when the work is done. Read them
 * after pm_context_synchronize, or use them on the device. Errors found on
 * the host (arguments, scratch memory, launch failures) are returned; the
 * counts are then not written. The CUDA backend sizes its scratch and its
 * launches from the capacities, so generous capacities cost memory (about
 * 40 bytes per triangle of capacity, plus 24 per soup vertex) and a little
 * time. Same mesh, byte for byte, as pm_isosurface. It may be captured
 * into a CUDA graph on the context's stream and replayed, on whatever
 * the buffers hold at each replay; the CUDA backend itself replays a
 * graph of a call repeated with the same volume buffer, iso value,
 * options, buffers and capacities (one of the last four such shapes;
 * docs/cuda_isosurface.md). */
#define PM_ISOSURFACE_DOES_NOT_FIT 1u
#define PM_ISOSURFACE_INDEX_OVERFLOW 2u
PM_API pm_status pm_isosurface_async(pm_context *ctx, const pm_volume *volume, double iso,
                                     const pm_isosurface_options *options,
                                     pm_isosurface_counts *counts_ctx);
/* Frees the arrays a mesh owns (in host or context memory) and zeroes it. */
PM_API void pm_mesh_free(pm_context *ctx, pm_mesh *mesh);

/* ------------------------------------------------------------------------ */
/* Points and density fields (SPH colour field as splashsurf; splatting)    */
/* ------------------------------------------------------------------------ */

/* A point set in host memory: xyz has 3 floats per point. */
typedef struct pm_points {
    size_t count;
    float *xyz;
} pm_points;

typedef enum pm_field_method { PM_FIELD_SPH = 0, PM_FIELD_BLUR } pm_field_method;

/* Parameters with splashsurf's meaning. Zero fields take the defaults
 * shown; radius has no default and must be > 0. */
typedef struct pm_field_params {
    size_t struct_size;
    double radius;           /* -r: particle radius */
    double smoothing_length; /* -l: in multiples of r (2.0); support = 2*l*r */
    double cube_size;        /* -c: grid cell size in multiples of r (0.5) */
    double iso;              /* -t: iso threshold on the colour field (0.6) */
    double rest_density;     /* 1000; particle mass = rest_density*(2r)^3 */
    pm_field_method method;  /* sph (default) or blur */
    int blur_steps;          /* blur: binomial passes (2); -1 means none */
    int use_aabb;            /* restrict to aabb_min..aabb_max */
    double aabb_min[3], aabb_max[3];
    size_t max_memory_bytes; /* 0 = half the machine's RAM */
} pm_field_params;

/* A scalar field on a grid: an f32 volume in context memory, owned. */
typedef struct pm_field {
    pm_volume volume; /* type PM_SAMPLE_F32, packed */
    double iso;       /* the value to extract at */
    pm_inside inside; /* PM_INSIDE_ABOVE: the fluid is where the field is above iso */
    size_t particles_used;
    size_t particles_dropped; /* outside the aabb */
    pm_timings timings;       /* neighbours_ms, density_ms, field_ms */
} pm_field;

/* Computes the density field of n points (xyz in context memory, 3 floats
 * each; host memory is copied in by the call, as in pm_isosurface). The grid covers the bounding box of the points kept (those inside
 * the aabb when use_aabb is set) plus the kernel support, on a global
 * lattice of spacing cube_size*radius (docs/reconstruct.md). n == 0 and
 * non-finite coordinates are PM_STATUS_INVALID_ARGUMENT. Its memory is
 * computed first and PM_STATUS_OUT_OF_MEMORY
 * is returned, with the figure in pm_last_error(), when it exceeds
 * max_memory_bytes. */
PM_API pm_status pm_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                  const pm_field_params *params, pm_field *out);
PM_API void pm_field_free(pm_context *ctx, pm_field *field);

/* A density field's lattice fixed by the caller: point (i,j,k) at
 * ((lo[0]+i)*s, (lo[1]+j)*s, (lo[2]+k)*s), s = cube_size * radius, dims
 * points per axis (each at least 2). */
typedef struct pm_field_grid {
    int64_t lo[3];
    size_t dims[3];
} pm_field_grid;

/* The lattice pm_field_compute picks for particles whose bounding box is
 * exactly [bmin, bmax] (the box, the kernel's reach and one point more on
 * every side; docs/reconstruct.md): for a simulation in a fixed domain,
 * the grid of every frame. Host only, no context. */
PM_API pm_status pm_field_grid_for_box(const pm_field_params *params, const double bmin[3],
                                       const double bmax[3], pm_field_grid *grid);

/* pm_field_compute on a lattice the caller fixes, for a per-frame loop:
 * queued on the context's stream without waiting for the device (on the
 * CPU backend it runs synchronously). xyz, field_ctx (dims[0] * dims[1] *
 * dims[2] floats, every one written, x fastest) and status_ctx are in
 * context memory. status_ctx receives, when the work is done, the
 * particles used (those inside the aabb when use_aabb is set) and the
 * index of the first particle with a non-finite coordinate, or UINT64_MAX
 * (otherwise the field is unspecified). Particles outside the lattice
 * still count at the points they reach. The field has pm_field_compute's
 * conventions (inside above params->iso: extract with PM_INSIDE_ABOVE).
 * On pm_field_compute's own lattice, or on one grown by whole neighbour
 * cells on each side, the values are byte for byte pm_field_compute's on
 * the CUDA backend; elsewhere the neighbour cells are anchored differently
 * and sums may round differently (docs/reconstruct.md). The CPU backend
 * computes pm_field_compute's field and copies it into the lattice.
 * Host-side errors (arguments, memory, launches) are returned. */
typedef struct pm_field_status {
    uint64_t particles_used;
    uint64_t first_nonfinite; /* UINT64_MAX when every coordinate is finite */
} pm_field_status;
PM_API pm_status pm_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                        const pm_field_params *params, const pm_field_grid *grid,
                                        float *field_ctx, pm_field_status *status_ctx);

/* ------------------------------------------------------------------------ */
/* Collision detection: bounding volume hierarchies and the breadth-first   */
/* filtered traversal (Gottschalk et al. 1996; Horn 2005, GPU Gems 2 ch. 36) */
/* ------------------------------------------------------------------------ */

/* A binary tree of axis-aligned boxes over a mesh's triangles (a linear
 * BVH over Morton codes, Karras 2012), in context memory, with a copy of
 * the triangles' vertices: the mesh may be freed after the build. Every
 * backend builds the same tree (docs/collide.md). */
typedef struct pm_bvh pm_bvh;

typedef struct pm_bvh_options {
    size_t struct_size; /* no options yet: NULL or zeroed */
} pm_bvh_options;

/* Builds the BVH of `mesh` (indexed or soup; arrays in host memory, or in
 * context memory when mesh->in_context_memory). Triangles may be
 * degenerate. A mesh with no triangles gives an empty BVH. Returns
 * PM_STATUS_INVALID_ARGUMENT for a vertex index >= num_vertices or a
 * non-finite coordinate of a vertex a triangle uses (the message names the
 * triangle / vertex), PM_STATUS_OVERFLOW beyond 2^30 triangles. */
PM_API pm_status pm_bvh_build(pm_context *ctx, const pm_mesh *mesh, const pm_bvh_options *options,
                              pm_bvh **out);
/* Frees a BVH (built on the same context). NULL is fine. */
PM_API void pm_bvh_destroy(pm_context *ctx, pm_bvh *bvh);
/* Triangles and tree depth (edges root to deepest leaf) of a BVH. */
PM_API size_t pm_bvh_num_triangles(const pm_bvh *bvh);
PM_API unsigned pm_bvh_depth(const pm_bvh *bvh);

typedef struct pm_collide_options {
    size_t struct_size;
    /* The traversal's memory bound: candidate node pairs held per level
     * (each 8 bytes, twice: the level read and the level written). A level
     * that would exceed it is processed in parts (docs/collide.md).
     * 0 = 2^22 pairs (64 MiB); at least 64. */
    size_t max_candidates;
    /* Optional, out: levels run, box tests done, leaf pairs tested (summed
     * over parts), levels split into parts to stay within max_candidates. */
    uint64_t *stats_levels, *stats_box_tests, *stats_leaf_tests, *stats_parts;
} pm_collide_options;

/* Finds every pair of intersecting triangles (a of bvh_a, b of bvh_b) with
 * B's vertices mapped into A's frame by transform_b_to_a (row-major 3x4
 * [R | t]: x_a = R x_b + t, rotation or any affine map; NULL = identity,
 * B's coordinates used unchanged). Triangles are closed: touching at a
 * point or along an edge, or overlapping in a plane, counts. The predicate
 * is exact on float coordinates; with a transform, B's vertices are mapped
 * in double and rounded to float once, and the predicate decides on those
 * floats (docs/collide.md).
 * Self-collision: bvh_b == bvh_a (transform must be NULL) reports each
 * pair once with a < b, leaving out a triangle with itself and neighbours
 * that share a vertex (an index; in a soup, a position).
 * pairs (context memory) receives 2 uint32 per pair (a, b) as indices of
 * the meshes' triangles, sorted by a then b: the same list on every backend
 * and thread count. If more than capacity pairs intersect, the first
 * capacity (in that order) are written, *count (host) gets the full number
 * and PM_STATUS_TRUNCATED is returned. pairs may be NULL when capacity is
 * 0. Both BVHs must come from ctx. */
PM_API pm_status pm_collide(pm_context *ctx, const pm_bvh *bvh_a, const pm_bvh *bvh_b,
                            const double *transform_b_to_a, const pm_collide_options *options,
                            uint32_t *pairs, size_t capacity, size_t *count);

/* ------------------------------------------------------------------------ */
/* Subdivision: Loop's scheme (Loop 1987), adaptive by filtering finished   */
/* triangles out of the stream (Horn 2005), closed red-green                 */
/* ------------------------------------------------------------------------ */

#define PM_SUBDIVIDE_MAX_LEVELS 16

/* What one subdivision did, per level l (0 = the input mesh's level). */
typedef struct pm_subdivide_report {
    int levels;                                        /* levels that split an edge */
    uint64_t stream[PM_SUBDIVIDE_MAX_LEVELS + 1];      /* triangles in the working stream */
    uint64_t split_edges[PM_SUBDIVIDE_MAX_LEVELS + 1]; /* edges split (new vertices) */
    uint64_t finished[PM_SUBDIVIDE_MAX_LEVELS + 1];    /* triangles filtered out to the output */
    /* Times the call waited for counts or flags from the context, the
     * output's transfer not counted: uniform subdivision 3 (the input's
     * edge count and checks, the error word at the end); adaptive (and an
     * empty mesh, or levels 0) 2 plus one per level before the last whose
     * stream was not empty (its scans' totals; with levels 0, the one
     * level), and on a GPU that cannot launch a
     * cooperative grid one more per pass of red promotion (their number
     * varies from run to run). */
    int host_waits;
} pm_subdivide_report;

/* Zero fields mean defaults: uniform subdivision, normals computed, output
 * in host memory. Setting max_edge, max_angle_deg, max_deviation or
 * vertex_weights makes the subdivision adaptive (docs/subdivide.md): an
 * edge splits when its weight w (the larger of its ends' vertex weights, 1
 * without weights) is > 0 and, where limits are set, when its length * w >
 * max_edge, the angle between its ends' normals * w > max_angle_deg, or
 * the distance Loop's masks would move the surface there along the normal
 * (the edge's odd vertex from its midpoint, either end by its even rule)
 * * w > max_deviation; with weights and no limit every edge of positive
 * weight splits. Then, repeatedly, a triangle with two split edges splits
 * its third unless its neighbour there has left the stream (red
 * promotion). */
typedef struct pm_subdivide_options {
    size_t struct_size;
    double max_edge;      /* 0 = no length test */
    double max_angle_deg; /* 0 = no angle test; in (0, 180] */
    /* One weight per input vertex, in the same memory as the mesh's arrays,
     * or NULL. New vertices take the mean of their edge's ends. */
    const float *vertex_weights;
    pm_normals normals; /* PM_NORMALS_NONE: none; anything else: computed */
    /* 0 = output arrays in host memory, 1 = in context memory. */
    int output_in_context_memory;
    pm_subdivide_report *report; /* optional */
    double max_deviation;        /* 0 = no deviation test; length units */
} pm_subdivide_options;

/* Loop subdivision of an indexed triangle mesh, `levels` times (0 to
 * PM_SUBDIVIDE_MAX_LEVELS). The mesh's arrays are in context memory when
 * mesh->in_context_memory is set, else in host memory; it is not modified.
 * Rules (as OpenSubdiv's Loop scheme with boundary edges sharp):
 * interior odd vertices 3/8 (a + b) + 1/8 (c + d), boundary odd (a + b) / 2;
 * interior even (1 - n beta) v + beta sum, Loop's beta(n) = (5/8 - (3/8 +
 * cos(2 pi / n) / 4)^2) / n; boundary even 3/4 v + 1/8 (b0 + b1); a vertex
 * where two or more fans meet (non-manifold vertex) and unused vertices
 * keep their position. Output: vertices in creation order (the input's,
 * moved in place, then per level one per split edge in the order of the
 * edges' first half-edge in the working stream); uniform triangles 4 per
 * triangle of the previous level, (v0 m0 m2) (m0 v1 m1) (m2 m1 v2)
 * (m0 m1 m2) with m_k on edge (v_k, v_k+1); adaptive output is each
 * level's finished triangles in stream order, level after level. Normals:
 * the normalised sum of the area-weighted normals of each vertex's
 * triangles (not limit normals). The same bytes on every backend and
 * thread count. *out is zeroed first; free it with pm_mesh_free.
 * Errors: PM_STATUS_INVALID_ARGUMENT for a soup (no indices), an index out
 * of range, a triangle with a repeated vertex or a non-manifold edge (three
 * or more triangles; the message names the first in triangle order),
 * PM_STATUS_OVERFLOW when a level would pass UINT32_MAX vertices or
 * 1,431,655,764 triangles in the stream or the output. */
PM_API pm_status pm_subdivide_loop(pm_context *ctx, const pm_mesh *mesh, int levels,
                                   const pm_subdivide_options *options, pm_mesh *out);

/* ------------------------------------------------------------------------ */
/* Files (host memory)                                                       */
/* ------------------------------------------------------------------------ */

typedef struct pm_raw_options {
    size_t struct_size;
    size_t nx, ny, nz;
    pm_sample_type type;
    double spacing[3]; /* 0 = 1 */
    int big_endian;
    uint64_t offset_bytes; /* bytes before the samples (a header) */
    /* The samples are the file's last bytes (NRRD's "byte skip: -1");
     * offset_bytes is then ignored. Not for gzip files. */
    int data_at_end;
    /* Bytes after the samples are allowed. By default they are an error
     * (a header left in, dims too small or the wrong sample type). */
    int allow_extra;
} pm_raw_options;

/* Reads a volume into host memory: NRRD (.nrrd/.nhdr, raw or gzip), VTK
 * legacy STRUCTURED_POINTS (.vtk), VTK XML ImageData (.vti), INRIA
 * (.inr, .inr.gz), MetaImage (.mha, .mhd), NIfTI-1/2 (.nii, .nii.gz), a
 * directory of DICOM slices (with GDCM at build time, else
 * PM_STATUS_UNSUPPORTED), or raw samples when raw != NULL (the
 * file plain or gzip-compressed, told by its first bytes; the offset then
 * counts uncompressed bytes). An unknown extension is told by the file's
 * first bytes. Index axes that are permutations or flips of the world
 * axes (NIfTI sform/qform, MetaImage TransformMatrix) are applied by
 * reordering the samples; oblique ones are PM_STATUS_UNSUPPORTED. NIfTI's
 * scl_slope/scl_inter and DICOM's rescale are applied (f32 samples, f64
 * for f64 data); i8, u32 and i32 samples become f32 (docs/formats.md).
 * Fills
 * *out (data owned: free with pm_volume_free). max_memory_bytes 0 = no
 * limit beyond the file's own size checks. */
PM_API pm_status pm_volume_read(const char *path, const pm_raw_options *raw,
                                size_t max_memory_bytes, pm_volume *out);
/* The smallest and largest sample of a volume in host memory, NaN left
 * out (both NaN when every sample is NaN), and the number of NaN samples.
 * An iso value outside [min, max] gives an empty surface. */
PM_API pm_status pm_volume_range(const pm_volume *volume, double *min, double *max,
                                 size_t *nan_count);
PM_API void pm_volume_free(pm_volume *volume);

/* ------------------------------------------------------------------------ */
/* Volumes larger than memory: marching cubes streamed slab by slab         */
/* ------------------------------------------------------------------------ */

/* A volume delivered a few lattice slices at a time: a file (see
 * pm_volume_source_open), a simulation, a network stream. read() writes
 * slices [z0, z1) to dst: (z1 - z0) * nx * ny samples of `type`, x
 * fastest, packed, in host byte order. pm_isosurface_stream calls it with
 * consecutive ranges from z = 0 to nz, each slice exactly once, so
 * sequential sources (a gzip stream, a solver's time step) work. A
 * failure status from read() ends the extraction with that status (the
 * message the source set with the library's readers, or one naming the
 * slices). close() (may be NULL) releases `user` in
 * pm_volume_source_close. buffer_bytes: memory the source itself holds
 * while reading, counted against the memory limit. */
typedef struct pm_volume_source {
    size_t struct_size;
    pm_sample_type type;
    size_t nx, ny, nz;
    double spacing[3]; /* 0 = 1 */
    double origin[3];
    pm_status (*read)(void *user, size_t z0, size_t z1, void *dst);
    void (*close)(void *user);
    void *user;
    size_t buffer_bytes;
} pm_volume_source;

/* A source over a volume file: raw samples (raw != NULL, as in
 * pm_volume_read: plain files by positioned reads, gzip by streaming
 * inflate) or NRRD (.nrrd/.nhdr, raw encoding by positioned reads, gzip by
 * streaming inflate). The header is read and every size checked against
 * the file now, so a file too short for its samples fails here; a file
 * that changes while it is read fails in read() naming the byte offset.
 * Other formats and NRRD ascii encoding are PM_STATUS_UNSUPPORTED (read
 * them with pm_volume_read). Free with pm_volume_source_close. */
PM_API pm_status pm_volume_source_open(const char *path, const pm_raw_options *raw,
                                       pm_volume_source *out);
/* Calls source->close(source->user) and zeroes the source. NULL is fine. */
PM_API void pm_volume_source_close(pm_volume_source *source);
/* A source over a volume in host memory (kept by the caller while the
 * source is used): to stream a volume through a GPU whose memory cannot
 * hold it, with pm_isosurface_stream's memory limit. On a CUDA context the
 * slabs are uploaded straight from the volume (no copy when its slices are
 * packed). Free with pm_volume_source_close. */
PM_API pm_status pm_volume_source_memory(const pm_volume *volume, pm_volume_source *out);

/* What a streamed extraction did (all zero before it starts). */
typedef struct pm_stream_report {
    size_t slabs;              /* slabs walked */
    size_t slab_slices;        /* lattice slices per slab (the last may have fewer) */
    size_t ghost_below, ghost_above; /* slices read around each slab */
    uint64_t bytes_read;       /* sample bytes delivered by the source */
    uint64_t working_set_bytes; /* slab buffer + scratch + source buffer: <= the limit */
    uint64_t staging_bytes;    /* largest slab output held before its copy */
    uint64_t mesh_bytes;       /* the output mesh's arrays */
    double read_ms, walk_ms, copy_ms, gather_ms;
} pm_stream_report;

typedef struct pm_stream_options {
    size_t struct_size;
    /* Bound of the volume working set: the slab buffer (its slices plus
     * the ghost slices), the walk's per-thread scratch and the source's
     * buffer_bytes. The mesh is the output and is not counted (see
     * docs/isosurface.md). 0 = no limit (one slab holds the volume). A
     * limit too small for a slab of one slice is PM_STATUS_OUT_OF_MEMORY
     * with the figures. */
    size_t max_memory_bytes;
    /* Lattice slices per slab; 0 = as many as the limit allows. A value
     * the limit cannot hold is PM_STATUS_OUT_OF_MEMORY. */
    size_t slab_slices;
    pm_stream_report *report; /* optional, out */
} pm_stream_options;

/* pm_isosurface over a volume that need not fit in memory: the slices
 * come from `source` slab by slab, each slab is walked with its ghost
 * slices (one below when normals are computed, two above) and appended to
 * the mesh. The mesh is the same, byte for byte, as pm_isosurface's on
 * the whole volume (same options), for every slab thickness. The mesh
 * itself is built in host memory. stream may be NULL (no limit).
 * options->report's path gets "stream=slabs slabs=N thickness=T
 * read_bytes=B" and stages read, walk, copy (and gather for soups).
 * On a CUDA context the limit bounds the device memory: the slabs are
 * meshed as pieces on the GPU (docs/scale.md, "Slabs on devices"), two at
 * a time so that copies overlap extraction, and joined in host memory;
 * the path says "stream=pieces" and the stages are read, upload, pieces,
 * merge. Returns what pm_isosurface returns or the source's failure. On
 * failure the mesh is freed and zeroed. */
PM_API pm_status pm_isosurface_stream(pm_context *ctx, const pm_volume_source *source, double iso,
                                      const pm_isosurface_options *options,
                                      const pm_stream_options *stream, pm_mesh *mesh);

/* Several devices in one process (docs/scale.md, "Slabs on devices"): the
 * volume (host memory) cut into z slabs, each meshed as a mesh piece on
 * one of the `count` contexts (a host thread each; a GPU also gets a
 * second stream, so that one slab's upload overlaps another's
 * extraction), the pieces joined in order on contexts[0]: pm_isosurface's
 * mesh, byte for byte, for any count and any mix of devices. The output
 * options are those of pm_isosurface on contexts[0]. */
PM_API pm_status pm_isosurface_multi(pm_context *const *contexts, int count,
                                     const pm_volume *volume, double iso,
                                     const pm_isosurface_options *options, pm_mesh *mesh);
/* pm_volume_source_open + pm_isosurface_stream + pm_volume_source_close. */
PM_API pm_status pm_isosurface_file(pm_context *ctx, const char *path, const pm_raw_options *raw,
                                    double iso, const pm_isosurface_options *options,
                                    const pm_stream_options *stream, pm_mesh *mesh);

/* Point file formats; AUTO chooses from the extension (.ply, .xyz, .vtk,
 * .vtu, .bgeo, .bgeo.gz, .csv). */
typedef enum pm_points_format {
    PM_POINTS_AUTO = 0,
    PM_POINTS_PLY,
    PM_POINTS_XYZ_TEXT,
    PM_POINTS_XYZ_BINARY,
    PM_POINTS_VTK,
    PM_POINTS_VTU,  /* VTK XML UnstructuredGrid/PolyData points */
    PM_POINTS_BGEO, /* Houdini classic binary geometry (Bgeo V5), plain or gzip */
    PM_POINTS_CSV   /* columns x,y,z by header name, else the first three */
} pm_points_format;

/* Reads points into host memory. A .xyz file is binary (little-endian
 * float32 triplets, as splashsurf reads it) unless its first 4096 bytes are
 * text (docs/formats.md gives the exact rule). NaN/Inf coordinates are a PARSE_ERROR
 * naming the point index. */
PM_API pm_status pm_points_read(const char *path, pm_points_format format, size_t max_memory_bytes,
                                pm_points *out);
PM_API void pm_points_free(pm_points *points);

typedef enum pm_mesh_format {
    PM_MESH_FORMAT_AUTO = 0, /* from the extension: .ply .obj .stl .vtk .vtp .glb */
    PM_MESH_FORMAT_PLY,
    PM_MESH_FORMAT_OBJ,
    PM_MESH_FORMAT_STL,
    PM_MESH_FORMAT_VTK,
    PM_MESH_FORMAT_VTP, /* VTK XML PolyData, appended raw binary */
    PM_MESH_FORMAT_GLB  /* binary glTF 2.0: POSITION, NORMAL, uint32 indices */
} pm_mesh_format;

typedef struct pm_write_options {
    size_t struct_size;
    pm_mesh_format format;
    int ascii; /* PLY: ASCII instead of binary little-endian; VTP: base64
                * data inline instead of appended raw bytes */
} pm_write_options;

/* Writes a host-memory mesh. The file is written to a temporary name in the
 * same directory and renamed, so a failure never leaves a partial file. */
PM_API pm_status pm_mesh_write(const char *path, const pm_mesh *mesh,
                               const pm_write_options *options);
/* pm_mesh_write for a mesh in host or in ctx's memory. A binary PLY of a
 * mesh in CUDA device memory is packed on the GPU and streamed into the
 * file through pinned buffers, a chunk at a time: the download overlaps
 * the writing and no host copy of the mesh is made. Other formats copy
 * the mesh into host memory first. The indices are checked as by
 * pm_mesh_write, before anything is written. Like every call on ctx, from
 * one thread at a time: a program that writes on one thread while it
 * meshes on another gives the writer its own context (device memory is
 * shared by the contexts of one GPU). */
PM_API pm_status pm_mesh_write_context(pm_context *ctx, const char *path, const pm_mesh *mesh,
                                       const pm_write_options *options);
/* How pm_mesh_write_context would write mesh to path: "host" (from host
 * memory), "device-stream" (a binary PLY packed on the GPU and streamed)
 * or "device-download" (copied to the host first); NULL, with the message
 * set, for a NULL argument or an unknown extension. */
PM_API const char *pm_mesh_write_route(pm_context *ctx, const char *path, const pm_mesh *mesh,
                                       const pm_write_options *options);

/* Reads a triangle mesh into host memory: PLY (ascii/binary, faces as
 * lists; polygons are fan-triangulated), OBJ (v/vn/f, negative indices),
 * STL (binary and ASCII; read as a soup, indices NULL), VTK legacy
 * POLYDATA (POLYGONS/TRIANGLE_STRIPS) and VTK XML PolyData (.vtp, Polys). Normals are read when the file has
 * per-vertex normals. Free with pm_mesh_free(NULL, mesh). */
PM_API pm_status pm_mesh_read(const char *path, size_t max_memory_bytes, pm_mesh *out);

/* Topology and geometry of a host-memory mesh (soups are welded by exact
 * position first). */
typedef struct pm_mesh_report {
    size_t num_vertices; /* after welding; used by non-degenerate triangles */
    size_t num_triangles;
    size_t num_edges;            /* undirected */
    size_t boundary_edges;       /* used by one triangle */
    size_t nonmanifold_edges;    /* used by three or more triangles */
    size_t misoriented_edges;    /* used twice in the same direction */
    size_t nonmanifold_vertices; /* whose triangle fan is not one disc/half-disc */
    size_t degenerate_triangles; /* repeated vertex or zero area */
    size_t components;           /* connected through shared vertices */
    int closed;                  /* no boundary and no non-manifold edge */
    int manifold;                /* no non-manifold edge or vertex */
    int oriented;                /* no misoriented edge */
    long long euler;             /* V - E + F */
    double bbox_min[3], bbox_max[3];
    double area;
    double volume; /* signed (divergence theorem); meaningful when closed */
} pm_mesh_report;
/* Triangles with a repeated vertex count as degenerate and are left out of
 * V, E, F, the components and the vertex fans; the bbox covers every vertex
 * of the mesh. */
PM_API pm_status pm_mesh_analyze(const pm_mesh *mesh, pm_mesh_report *report);

/* Debug images: writes PNGs into directory `dir`:
 * active_cells.png, the middle z slice's cells coloured by triangles per
 * cell (blue 1, green 2, red 3, aqua 4, purple 5), and hp_level_<L>.png,
 * the levels of a 2x2 HistoPyramid built over that slice's triangle counts.
 * The volume is in host memory. */
PM_API pm_status pm_debug_images(const pm_volume *volume, double iso, pm_inside inside,
                                 const char *dir);

/* ------------------------------------------------------------------------ */
/* Large domains: mesh pieces with global identities, sparse particle       */
/* reconstruction (docs/scale.md)                                           */
/* ------------------------------------------------------------------------ */

/* A global lattice: point (i,j,k) at origin + (i*spacing[0], j*spacing[1],
 * k*spacing[2]), dims points per axis (each >= 2, 3 * dims[0] * dims[1] *
 * dims[2] < 2^64). The lattice of a dense volume is its origin, spacing
 * and nx, ny, nz; the lattice of a sparse reconstruction is in its report. */
typedef struct pm_lattice {
    double origin[3];
    double spacing[3];
    uint64_t dims[3];
} pm_lattice;

/* A box of lattice points: lo (global indices) and dims points per axis. */
typedef struct pm_lattice_box {
    uint64_t lo[3];
    uint64_t dims[3];
} pm_lattice_box;

/* The global identities of a lattice (dims N): the crossing on the edge
 * from point (i,j,k) along axis a (0 x, 1 y, 2 z; the lower end owns the
 * edge) has vertex key 3 * (i + N0 * (j + N1 * k)) + a; cell (i,j,k) has
 * cell key i + (N0 - 1) * (j + (N1 - 1) * k). Ascending keys are the order
 * of pm_isosurface's indexed vertices and of its triangles' cells. */
PM_API uint64_t pm_vertex_key(const uint64_t dims[3], uint64_t i, uint64_t j, uint64_t k,
                              int axis);
PM_API uint64_t pm_cell_key(const uint64_t dims[3], uint64_t i, uint64_t j, uint64_t k);

/* The part of a global mesh that one box of lattice points owns: the
 * vertices of the edges its points own (ascending vertex key) and the
 * triangles of the cells its points own (cell (i,j,k) belongs to point
 * (i,j,k); ascending cell key, then case-table order), each triangle
 * naming its 3 vertices by vertex key (some owned by neighbouring boxes).
 * Host memory, owned by the piece: pm_mesh_piece_free. */
typedef struct pm_mesh_piece {
    uint64_t lattice_dims[3];
    pm_lattice_box owned;
    uint64_t num_vertices, num_triangles;
    uint64_t active_cells;  /* owned cells the surface passes through */
    uint64_t *vertex_keys;  /* num_vertices, ascending */
    float *positions;       /* 3 per vertex */
    float *normals;         /* 3 per vertex, or NULL (PM_NORMALS_NONE) */
    uint64_t *triangles;    /* 3 vertex keys per triangle */
    uint64_t *cell_keys;    /* one per triangle, ascending */
} pm_mesh_piece;

/* The piece of pm_isosurface's mesh of a global volume on `lattice` that
 * the points of `owned` own, computed from `window`, a sub-volume whose
 * point 0 is global point window_lo (window's own origin and spacing are
 * not used). The piece's bytes are those pm_isosurface (indexed, same
 * iso, normals and inside) gives those vertices and triangles on the whole
 * volume: positions come from the lattice's origin and spacing and the
 * global indices, gradients are one-sided at the lattice's border only.
 * Ghost rule: the window must hold the lattice points [lo - 1, lo + dims +
 * 2) of owned on every axis (clipped to the lattice), or [lo, lo + dims +
 * 1) with PM_NORMALS_NONE; INVALID_ARGUMENT otherwise, and when owned
 * leaves the lattice (it may be empty). options: normals and inside as for
 * pm_isosurface; mode, buffers and report are ignored. The window is in
 * context memory (host memory on the CPU, device memory on CUDA: a host
 * window is PM_STATUS_INVALID_ARGUMENT there). */
PM_API pm_status pm_isosurface_piece(pm_context *ctx, const pm_volume *window,
                                     const uint64_t window_lo[3], const pm_lattice *lattice,
                                     const pm_lattice_box *owned, double iso,
                                     const pm_isosurface_options *options, pm_mesh_piece *piece);
PM_API void pm_mesh_piece_free(pm_mesh_piece *piece);

/* Joins pieces of one lattice, given in any order, into the mesh
 * pm_isosurface would give for the whole lattice: vertices in ascending
 * vertex key, triangles in ascending cell key then each piece's order,
 * indices into those vertices (mode PM_MESH_INDEXED), or the triangles'
 * corners (PM_MESH_SOUP). Byte for byte pm_isosurface's mesh when the
 * pieces' boxes tile the lattice (boxes where the surface does not pass
 * may be left out). options: mode, output memory, caller buffers and
 * capacities as for pm_isosurface; normals as the pieces were extracted
 * with (PM_NORMALS_NONE: none; any other mode: the pieces' normals).
 * PM_STATUS_INVALID_ARGUMENT, naming the piece and key, when pieces
 * disagree on the lattice or with options->normals, two pieces own one vertex or cell, keys
 * are not ascending, or a triangle names a vertex no piece has;
 * PM_STATUS_OVERFLOW for more than UINT32_MAX vertices in an indexed
 * mesh. Runs on the host (pieces are host memory). */
PM_API pm_status pm_mesh_pieces_merge(pm_context *ctx, const pm_mesh_piece *pieces, size_t count,
                                      const pm_isosurface_options *options, pm_mesh *mesh);

/* How pm_reconstruct lays out the field. */
typedef enum pm_grid_mode {
    PM_GRID_AUTO = 0, /* dense when it fits max_memory_bytes and the particles
                         fill enough of their box (docs/scale.md), else sparse */
    PM_GRID_DENSE,    /* pm_field_compute + pm_isosurface */
    PM_GRID_SPARSE    /* bricks around the particles only */
} pm_grid_mode;

typedef struct pm_reconstruct_options {
    size_t struct_size;
    pm_grid_mode grid;
    /* Lattice points per brick edge (sparse), rounded up to a multiple of
     * the neighbour-cell edge; 0 = 32 (rounded up likewise). */
    size_t brick_points;
} pm_reconstruct_options;

/* What pm_reconstruct did. */
typedef struct pm_reconstruct_report {
    int sparse;            /* 1: the sparse path ran */
    pm_lattice lattice;    /* the global lattice (pm_field_compute's grid) */
    int64_t lattice_lo[3]; /* its point 0 as global lattice index (origin = lo * s) */
    double iso;
    size_t particles_used, particles_dropped;
    uint64_t brick_points;    /* sparse: points per brick edge */
    uint64_t bricks_total;    /* sparse: bricks of the lattice */
    uint64_t bricks_occupied; /* sparse: bricks computed */
    uint64_t occupied_cells;  /* sparse: neighbour cells holding particles */
    size_t peak_bytes;        /* the largest memory the call held at once (its own arrays) */
    /* Stage times, ms: neighbour cells and bricks, particle densities,
     * fields (summed over threads for sparse, wall time for dense),
     * extraction (likewise), merge (wall), and the whole call. */
    double neighbours_ms, density_ms, field_ms, extract_ms, merge_ms, total_ms;
} pm_reconstruct_report;

/* Particles to surface: pm_field_compute + pm_isosurface (dense), or the
 * same mesh, byte for byte, computed brick by brick over the bricks that
 * particles can influence (sparse; SPH only): memory grows with the
 * occupied bricks, not with the bounding box. xyz, n and params as
 * pm_field_compute (host or context memory); iso_options as pm_isosurface
 * (inside is PM_INSIDE_ABOVE); options and report may be NULL. The memory
 * estimate of the chosen path is checked against params->max_memory_bytes
 * first (PM_STATUS_OUT_OF_MEMORY naming the figure), and the pieces' bytes
 * as they grow. A sparse request with the blur method is
 * PM_STATUS_UNSUPPORTED. On a GPU the sparse path computes each brick's
 * field and piece on the device (docs/scale.md); brick_points 0 takes the
 * device's default (32 on the CPU, 128 on a GPU). */
PM_API pm_status pm_reconstruct(pm_context *ctx, const float *xyz, size_t n,
                                const pm_field_params *params,
                                const pm_reconstruct_options *options,
                                const pm_isosurface_options *iso_options, pm_mesh *mesh,
                                pm_reconstruct_report *report);
/* pm_reconstruct over several contexts of one kind (several GPUs in one
 * process, docs/scale.md): one plan, the occupied bricks split in
 * contiguous shares over the contexts (a host thread each), the pieces
 * merged on contexts[0]: the same mesh, byte for byte, for any count.
 * The sparse path always runs unless options->grid is PM_GRID_DENSE
 * (then contexts[0] alone meshes the dense grid). */
PM_API pm_status pm_reconstruct_multi(pm_context *const *contexts, int count, const float *xyz,
                                      size_t n, const pm_field_params *params,
                                      const pm_reconstruct_options *options,
                                      const pm_isosurface_options *iso_options, pm_mesh *mesh,
                                      pm_reconstruct_report *report);

/* ------------------------------------------------------------------------ */
/* Mesh post-processing: splashsurf's (Loeschner et al. 2023) and general   */
/* ------------------------------------------------------------------------ */

/* The functions below take an indexed triangle mesh (a soup is
 * PM_STATUS_INVALID_ARGUMENT, and so is an index out of range) whose
 * arrays are in host memory, or in context memory when
 * mesh->in_context_memory, and replace it in place: arrays the mesh owns
 * are reused or freed, arrays it does not own are left untouched (the
 * result then lives in new arrays the mesh owns, in the same memory).
 * Where they run:
 *  - data-parallel (pm_mesh_compute_normals, pm_mesh_smooth_normals,
 *    pm_mesh_smooth_laplacian, pm_mesh_smooth_taubin, pm_mesh_clip_aabb):
 *    where the mesh is: on the GPU for a mesh in device memory (context
 *    memory of a CUDA context), on the CPU for a host mesh, whatever the
 *    context; the SPH functions (pm_sph_*) on the GPU of a CUDA context
 *    (the interpolator lives in device memory), on the CPU otherwise;
 *    pm_mesh_mc_cleanup likewise where the mesh is (rounds of clusters);
 *  - sequential, on the CPU always (a mesh in device memory is copied to
 *    the host and the result back): pm_mesh_decimate_barnacles,
 *    pm_mesh_remove_components,
 *    pm_mesh_simplify, pm_mesh_to_quads; pm_mesh_check takes host meshes.
 * Results are the same bytes for every thread count and on both backends
 * (the GPU sums the same terms in the same order, in double). A mesh's
 * counts must fit the 32-bit adjacency rows (fewer than 2^32 / 6
 * triangles). docs/splashsurf.md gives every rule. A function that moves
 * or merges vertices replaces normals the mesh had by area-weighted
 * normals of the result (pm_mesh_compute_normals); one that only removes
 * triangles keeps the normals of the vertices left. Argument errors leave
 * the mesh untouched; after another failure (out of memory) it may be
 * partly processed, and is still freed as usual. */

/* Area-weighted vertex normals (splashsurf's --normals=on): each vertex
 * gets the normalised sum, over its triangles (a, b, c) in triangle order,
 * of (b - a) x (c - b), in double; (0,0,0) where that sum is zero.
 * Allocates mesh->normals when NULL. */
PM_API pm_status pm_mesh_compute_normals(pm_context *ctx, pm_mesh *mesh);

/* splashsurf's normal smoothing (--normals-smoothing-iters): `iterations`
 * times, every vertex's normal becomes the normalised sum of its
 * neighbours' normals (itself left out; unchanged where the sum is zero).
 * Needs mesh->normals. */
PM_API pm_status pm_mesh_smooth_normals(pm_context *ctx, pm_mesh *mesh, int iterations);

/* Laplacian smoothing with per-vertex weights (splashsurf's
 * --mesh-smoothing-iters): `iterations` times, every vertex moves to
 * (1 - beta w_i) x_i + beta w_i mean(x_j over its neighbours j), all
 * vertices from the previous iteration's positions (Jacobi), in double,
 * rounded to float per iteration. weights: one per vertex (in the mesh's
 * memory, or host memory: then copied), or NULL for 1. beta in [0, 1]
 * (splashsurf: 1). Vertices without neighbours stay. */
PM_API pm_status pm_mesh_smooth_laplacian(pm_context *ctx, pm_mesh *mesh, int iterations,
                                          double beta, const float *weights);
/* Taubin's volume-preserving lambda|mu smoothing (Taubin 1995): each
 * iteration is a Laplacian step with factor lambda, then one with mu
 * (mu < -lambda < 0). lambda 0 = 0.5, mu 0 = -0.53. */
PM_API pm_status pm_mesh_smooth_taubin(pm_context *ctx, pm_mesh *mesh, int iterations,
                                       double lambda, double mu);

/* splashsurf's marching-cubes cleanup (--mesh-cleanup; Moore and Warren's
 * mesh displacement, 1991): every vertex is assigned its nearest lattice
 * point; clusters (vertices joined by edges whose ends share that point)
 * are processed in a fixed priority order, each collapsing its vertices
 * into one another where PMP's half-edge collapse test allows (the mesh
 * stays a manifold with the same topology), every kept vertex moving to
 * the mean of the input positions merged into it; up to max_iterations
 * sweeps while something collapses. Clusters with no edge between them
 * run in parallel (docs/splashsurf.md gives the rule and why the result
 * is the sequential order's). */
typedef struct pm_mc_cleanup_options {
    size_t struct_size;
    /* The marching-cubes lattice: point (i,j,k) at origin + (i,j,k) *
     * spacing (pm_field's volume.origin and volume.spacing). Required. */
    double origin[3], spacing[3];
    /* Snap only vertices within snap_distance * (smallest spacing) of their
     * lattice point (--mesh-cleanup-snap-dist, in [0, 0.5]); when 0 no
     * limit unless use_snap_distance is set. */
    int use_snap_distance;
    double snap_distance;
    int max_iterations; /* 0 = 5 (splashsurf's) */
    int keep_vertices;  /* keep merged-away vertices, unreferenced (--keep-verts) */
} pm_mc_cleanup_options;
PM_API pm_status pm_mesh_mc_cleanup(pm_context *ctx, pm_mesh *mesh,
                                    const pm_mc_cleanup_options *options);

/* splashsurf's --decimate-barnacles: collapses the vertices around the
 * small caps marching cubes makes where one lattice point (a single
 * barnacle) or two adjacent ones (a double barnacle) poke through the
 * surface, which Laplacian smoothing turns into bumps: each cap's ring
 * collapses into its tip (for a double one, into the nearer tip). With
 * options (the lattice's origin and spacing, keep_vertices) a cap is found
 * from the lattice edges its vertices lie on: a valence-4 tip whose four
 * neighbours lie on the four edges across the tip's axis at its lattice
 * point, or two adjacent valence-5 tips on parallel edges of adjacent
 * points, whatever the marching-cubes table. Without options (NULL) it is
 * splashsurf's own test on its table's valences: a valence-4 vertex whose
 * neighbours' valences are 4..6 summing to 20, valence-5 pairs with
 * neighbour valences {5,5,5,6,6} (pyramesh's table triangulates the cases
 * around a cap differently, so that test rarely fires on pyramesh's
 * meshes). Candidates next to another are left out, then the collapses run
 * in vertex order, each retried up to 5 passes. Boundaries are fine
 * (boundary edges never collapse), but no edge may be used twice in the
 * same direction (three triangles on an edge, or a flipped triangle) and
 * no triangle may repeat a vertex: PM_STATUS_INVALID_ARGUMENT naming the
 * first such edge or triangle; the same holds for pm_mesh_mc_cleanup. */
PM_API pm_status pm_mesh_decimate_barnacles(pm_context *ctx, pm_mesh *mesh,
                                            const pm_mc_cleanup_options *options);

/* splashsurf's --mesh-aabb-min/max: keeps the triangles with at least one
 * vertex p with min <= p < max on every axis; clamp_vertices then clamps
 * every vertex into [min, max] (--mesh-aabb-clamp-verts). Unless
 * keep_vertices, vertices no kept triangle uses are dropped (the others
 * keep their order). vertex_map (optional, host memory, one entry per
 * input vertex, also for a mesh in device memory) receives each vertex's
 * new index or UINT32_MAX, to carry per-vertex data along. */
PM_API pm_status pm_mesh_clip_aabb(pm_context *ctx, pm_mesh *mesh, const double min[3],
                                   const double max[3], int clamp_vertices, int keep_vertices,
                                   uint32_t *vertex_map);

/* Removes the connected components (triangles connected through shared
 * vertices) of fewer than min_triangles triangles, and with keep_largest
 * every component but the largest (ties: the one whose first triangle
 * comes first). When a component goes, the vertices no remaining triangle
 * uses are dropped; the rest keep their order. *removed (optional)
 * receives the number of components removed. */
PM_API pm_status pm_mesh_remove_components(pm_context *ctx, pm_mesh *mesh, size_t min_triangles,
                                           int keep_largest, size_t *removed);

/* Quadric edge-collapse decimation by meshoptimizer (meshopt_simplify) to
 * at most target_triangles triangles (0: no count target) within
 * target_error, relative to the mesh's extent (0: no error bound);
 * *result_error (optional) gets the relative error reached. Unused
 * vertices are dropped. meshoptimizer keeps the topology but may pinch a
 * surface (two sheets meeting on an edge or at a vertex); such vertices
 * are then split per triangle fan (copies appended) and the slivers of
 * fewer than 5 triangles a pinch leaves are removed, so a closed manifold
 * stays one. PM_STATUS_UNSUPPORTED when the build has no meshoptimizer. */
PM_API pm_status pm_mesh_simplify(pm_context *ctx, pm_mesh *mesh, size_t target_triangles,
                                  double target_error, double *result_error);

/* splashsurf's --generate-quads: a triangle i merges with the first
 * triangle j > i sharing an edge (its vertices in order, their triangles in
 * order) when every edge of the quad has a length within [d / (sqrt2 r),
 * d r / sqrt2] (d the shared edge, r = max_edge_diag_ratio), every
 * interior angle is at most max_interior_angle_deg and the triangles'
 * normals differ by at most max_normal_angle_deg; pairs are then accepted
 * in order of i while neither triangle is taken. Output (host memory, free
 * with pm_quads_free): the triangles left, in order, then the quads. Zero
 * parameters take splashsurf's defaults 1.75, 10 and 135. */
typedef struct pm_quads {
    size_t num_triangles, num_quads;
    uint32_t *triangles; /* 3 per triangle */
    uint32_t *quads;     /* 4 per quad, in the triangles' orientation */
} pm_quads;
PM_API pm_status pm_mesh_to_quads(pm_context *ctx, const pm_mesh *mesh, double max_edge_diag_ratio,
                                  double max_normal_angle_deg, double max_interior_angle_deg,
                                  pm_quads *out);
PM_API void pm_quads_free(pm_quads *quads);

/* Checks a host-memory indexed mesh (splashsurf's --check-mesh-*). what:
 * PM_CHECK_CLOSED (every edge has two triangles), PM_CHECK_MANIFOLD (no
 * edge with three or more triangles, every vertex one fan),
 * PM_CHECK_ORIENTATION (no edge used twice in the same direction, and no
 * face whose normal is more than 0.99 pi from one of its vertices'
 * area-weighted normals, splashsurf's test). Returns PM_STATUS_OK with
 * report->passed 0 and report->message naming the first offending edge,
 * vertex or triangle (in triangle order) when a check fails. */
#define PM_CHECK_CLOSED 1u
#define PM_CHECK_MANIFOLD 2u
#define PM_CHECK_ORIENTATION 4u
typedef struct pm_mesh_check_report {
    int passed;
    size_t boundary_edges, nonmanifold_edges, nonmanifold_vertices;
    size_t misoriented_edges, flipped_faces;
    char message[256]; /* "" when passed */
} pm_mesh_check_report;
PM_API pm_status pm_mesh_check(const pm_mesh *mesh, unsigned what, pm_mesh_check_report *report);

/* SPH interpolation at arbitrary points from particles (splashsurf's
 * SphInterpolator): the particles pm_field_compute would use (params as
 * there, the aabb filter included), their densities rho_j as
 * pm_field_compute defines them, volumes V_j = m / rho_j and the cubic
 * spline W of support h = 2 l r; sums over the particles with |x - x_j| <
 * h, in double, in a fixed order. On a CUDA context the interpolator is
 * built and queried on the GPU (same bytes as the CPU): the particles,
 * points, values and outputs may each be in device or host memory (host
 * arrays are copied); destroy it before its context. Elsewhere host
 * memory throughout. */
typedef struct pm_sph_interpolator pm_sph_interpolator;
PM_API pm_status pm_sph_interpolator_create(pm_context *ctx, const float *xyz, size_t n,
                                            const pm_field_params *params,
                                            pm_sph_interpolator **out);
PM_API void pm_sph_interpolator_destroy(pm_sph_interpolator *ip);
/* Normals (--sph-normals): normalise(-sum_j V_j grad W(x - x_j)), the
 * outward direction of the colour field's decrease; (0,0,0) where no
 * particle is within h. */
PM_API pm_status pm_sph_normals(pm_context *ctx, const pm_sph_interpolator *ip,
                                const float *points, size_t num_points, float *normals);
/* Particle values (components per particle, for all n particles given to
 * the create call, dropped ones included) interpolated with the
 * first-order correction: sum_j A_j V_j W_j / sum_j V_j W_j (splashsurf's
 * -a); 0 where no particle is within h. */
PM_API pm_status pm_sph_interpolate(pm_context *ctx, const pm_sph_interpolator *ip,
                                    const float *values, int components, const float *points,
                                    size_t num_points, float *out);
/* splashsurf's smoothing weights (--mesh-smoothing-weights, Loeschner et
 * al. 2023): per particle the weighted neighbour count n_i = sum over j !=
 * i with d2 < h2 of (1 - d2 / h2); per point n interpolated as above,
 * x = min(max(n, 0) / normalization, 1) and w = 6x^5 - 15x^4 + 10x^3.
 * normalization 0 = 13. wnn (optional) gets the interpolated n. */
PM_API pm_status pm_sph_smoothing_weights(pm_context *ctx, const pm_sph_interpolator *ip,
                                          const float *points, size_t num_points,
                                          double normalization, float *weights, float *wnn);

/* A named per-point array of a particle file (splashsurf's -a): VTK legacy
 * (POINT_DATA SCALARS, VECTORS, NORMALS or FIELD arrays; ASCII or BINARY;
 * any numeric type) and VTK XML .vtu/.vtp (PointData DataArray, every
 * piece). 1 or 3 components (others PM_STATUS_UNSUPPORTED), converted to
 * float, one tuple per point in file order. A missing name is
 * PM_STATUS_INVALID_ARGUMENT listing the names present; other formats
 * are PM_STATUS_UNSUPPORTED. Free with pm_point_attribute_free. */
typedef struct pm_point_attribute {
    size_t count;
    int components;
    float *values;
} pm_point_attribute;
PM_API pm_status pm_points_read_attribute(const char *path, const char *name,
                                          size_t max_memory_bytes, pm_point_attribute *out);
PM_API void pm_point_attribute_free(pm_point_attribute *attribute);

/* A mesh file with more than pm_mesh_write writes: quads (after the mesh's
 * triangles) and named per-vertex attributes (1 or 3 floats per vertex).
 * .vtk (legacy binary POLYDATA, attributes as POINT_DATA SCALARS /
 * VECTORS, the mesh's normals as NORMALS) and .ply (extra float vertex
 * properties name, or name_x/_y/_z; faces of 3 or 4) hold everything;
 * .obj holds quads and normals and refuses attributes
 * (PM_STATUS_UNSUPPORTED). Written atomically as pm_mesh_write. */
typedef struct pm_vertex_attribute {
    const char *name; /* letters, digits, '_' */
    int components;   /* 1 or 3 */
    const float *values;
} pm_vertex_attribute;
typedef struct pm_mesh_extras {
    size_t struct_size;
    const uint32_t *quads; /* 4 per quad, or NULL */
    size_t num_quads;
    const pm_vertex_attribute *attributes;
    size_t num_attributes;
} pm_mesh_extras;
PM_API pm_status pm_mesh_write_extras(const char *path, const pm_mesh *mesh,
                                      const pm_mesh_extras *extras,
                                      const pm_write_options *options);

#ifdef __cplusplus
}
#endif
#endif /* PYRAMESH_H */
