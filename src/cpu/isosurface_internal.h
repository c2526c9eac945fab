/* What the files of the CPU marching cubes share: isosurface.c (entry, path
 * choice, the soup gathered from the indexed mesh, the per-type kernels),
 * isosurface_slab.c (the default extraction), isosurface_twopass.c (its
 * fallback) and isosurface_avx2.c (the slab walk's AVX2 kernels). Internal
 * header. */
#ifndef PM_CPU_ISOSURFACE_INTERNAL_H
#define PM_CPU_ISOSURFACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/hooks.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define MC_AVX2 1
#else
#define MC_AVX2 0
#endif

/* Whether a call may use the AVX2 kernels: compiled in, the CPU has
 * them, and the test hooks (PMI_HOOK_SCALAR) do not ask for the scalar
 * ones. */
static inline int pmi_cpu_mc_avx2(unsigned hooks)
{
#if MC_AVX2
    return !(hooks & PMI_HOOK_SCALAR) && __builtin_cpu_supports("avx2");
#else
    (void)hooks;
    return 0;
#endif
}

/* The corner ids of the triangles of cells x + b, b the bits of act in
 * order, with case bytes cs[b], into out: corner v of cell i is
 * ids[off[e] + i] for its edge e = pmi_mc_tri_table[case][v]. Returns the
 * number of ids; out holds MC_TRIS64_STAGE (it may be written past the
 * ids returned). */
#define MC_TRIS64_STAGE (64 * 15 + 16)
typedef size_t (*mc_tris64_fn)(const uint32_t *ids, const int32_t off[16], uint64_t act,
                               const uint8_t cs[64], size_t x, uint32_t *out);

/* The ids of the crossings of 64 lattice points, m[0..2] their x, y and
 * z edges' masks, numbered by point, then x, y, z edge from id: o[b],
 * o[row + b] and o[2 row + b] for every b < 64 (those without a crossing
 * get values nobody reads). */
typedef void (*mc_ids64_fn)(const uint64_t m[3], uint32_t id, uint32_t *o, size_t row);

/* The case bytes (mc_case) of 64 cells from their 8 corner words. */
typedef void (*mc_cases64_fn)(const uint64_t w[8], uint8_t cs[64]);

/* One extraction: the volume, the iso value and the rules of the call. */
typedef struct mc_job {
    const void *data;
    size_t nx, ny, nz, rs, ss; /* dims, row and slice strides (elements) */
    size_t P;                  /* lattice points nx * ny * nz */
    size_t es;                 /* bytes per sample */
    double h[3], origin[3];
    double gw[3][3];      /* gradient weights pmi_mc_diff_weight(span, h[a]), [span][a] */
    double iso, sg, siso; /* sg = -1 for PM_INSIDE_ABOVE; siso = sg * iso */
    float fthr;           /* siso rounded up to float (the float threshold rule) */
    pm_normals normals;
    pm_sample_type type;
    const uint64_t *bits;  /* two-pass: inside bit of every lattice point, logical order */
    mc_cases64_fn cases64; /* mc_cases64 or the AVX2 one */
} mc_job;

/* A vertex waiting for a vertex8 kernel: its edge and where it goes. */
typedef struct mc_pending {
    size_t i, j, k;
    int axis;
    float *pos, *nrm;
} mc_pending;

/* The ids of point bit b's x, y and z edges (masks m[0..2]) into o[0],
 * o[row], o[2 row], branch-free: a slot without a crossing gets a value
 * nobody reads. *id: the next id. */
static inline void mc_id_slots(uint32_t *o, size_t row, const uint64_t m[3], unsigned b,
                               uint64_t *id)
{
    o[0] = (uint32_t)*id;
    *id += m[0] >> b & 1;
    o[row] = (uint32_t)*id;
    *id += m[1] >> b & 1;
    o[2 * row] = (uint32_t)*id;
    *id += m[2] >> b & 1;
}

/* Queues vertex (i, j, k, axis) for a vertex8 kernel, which computes the
 * queue when it holds 8; *np counts the queued ones. */
static inline void mc_pend(const mc_job *J, void (*vertex8)(const mc_job *, const mc_pending *),
                           mc_pending *pend, int *np, size_t i, size_t j, size_t k, int axis,
                           float *pos, float *nrm)
{
    mc_pending *v = &pend[(*np)++];
    v->i = i;
    v->j = j;
    v->k = k;
    v->axis = axis;
    v->pos = pos;
    v->nrm = nrm;
    if (*np == 8) {
        vertex8(J, pend);
        *np = 0;
    }
}

/* The per-type kernels of isosurface_kernel.h, indexed by pm_sample_type.
 * vertex8_central: vertex() with central normals for 8 vertices. */
typedef void (*mc_vertex_fn)(const mc_job *, size_t, size_t, size_t, int, float *, float *);
typedef void (*mc_vertex8_fn)(const mc_job *, const mc_pending *);
/* vertex8 for the n vertices (a multiple of 8) of lattice row (j,k), e[l]
 * = i << 2 | axis, into consecutive slots from pos and nrm. */
typedef void (*mc_vertex_row_fn)(const mc_job *, size_t j, size_t k, const uint64_t *e, size_t n,
                                 float *pos, float *nrm);
typedef void (*mc_bits_row_fn)(const mc_job *, size_t, uint64_t *);
/* The crossings of 64 points of a lattice row (masks m[0..2] of its x, y
 * and z edges, first point x) queued to out as (x + i) << 2 | axis, by
 * point, then axis; returns their count. */
typedef size_t (*mc_queue64_fn)(const uint64_t m[3], size_t x, uint64_t *out);
typedef struct mc_kernels {
    void (*bits_words)(const mc_job *, uint64_t *, size_t, size_t);
    mc_bits_row_fn bits_row;
    mc_vertex_fn vertex;
    mc_vertex8_fn vertex8_central;
    mc_vertex_row_fn vertex_row_central;
} mc_kernels;
extern const mc_kernels pmi_mc_kernels[5];

void pmi_mc_job_init(mc_job *J, const pm_volume *vol, double iso, const pm_isosurface_options *opt);

/* Edge e of cell (i,j,k) is owned by lattice point (i + dx, j + dy, k + dz):
 * pmi_mc_edge_dx[e] = dx, pmi_mc_edge_row[e] = dy + 2 dz. */
extern const uint8_t pmi_mc_edge_dx[12], pmi_mc_edge_row[12];

/* Sample idx (an element offset from the volume's start) as a double, as
 * the per-type kernels read it. */
static inline double mc_sample(const mc_job *J, size_t idx)
{
    switch (J->type) {
    case PM_SAMPLE_U8: return (double)((const uint8_t *)J->data)[idx];
    case PM_SAMPLE_U16: return (double)((const uint16_t *)J->data)[idx];
    case PM_SAMPLE_I16: return (double)((const int16_t *)J->data)[idx];
    case PM_SAMPLE_F32: return (double)((const float *)J->data)[idx];
    default: return ((const double *)J->data)[idx];
    }
}

/* Population count. The baseline x86-64 target has no popcnt instruction
 * (the builtin becomes a library call), so the functions that count bits
 * are cloned for CPUs with popcnt and picked at load time (MC_POPCNT). */
#define mc_popc(x) ((unsigned)__builtin_popcountll(x))
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__POPCNT__)
#define MC_POPCNT __attribute__((target_clones("popcnt", "default")))
#else
#define MC_POPCNT
#endif

/* Low n bits set (n may be >= 64). */
static inline uint64_t mc_low(size_t n) { return n >= 64 ? ~0ull : ((1ull << n) - 1); }

/* Case index of the cell at bit b of 8 corner words: w[0] row (j,k), w[1]
 * row (j+1,k), w[2] row (j,k+1), w[3] row (j+1,k+1), w[4..7] the same
 * shifted by one point (corner c's bit set when inside). */
static inline unsigned mc_case(const uint64_t w[8], unsigned b)
{
    return (unsigned)((w[0] >> b & 1) | (w[4] >> b & 1) << 1 | (w[5] >> b & 1) << 2 |
                      (w[1] >> b & 1) << 3 | (w[2] >> b & 1) << 4 | (w[6] >> b & 1) << 5 |
                      (w[7] >> b & 1) << 6 | (w[3] >> b & 1) << 7);
}

/* mc_cases64_fn, a cell at a time. */
static inline void mc_cases64(const uint64_t w[8], uint8_t cs[64])
{
    for (unsigned b = 0; b < 64; b++)
        cs[b] = (uint8_t)mc_case(w, b);
}

/* The active cells `act` of 8 corner words whose case bytes are worth
 * computing 64 at a time (into cs, returns 1) rather than one by one. */
static inline int mc_cases_wide(const mc_job *J, const uint64_t w[8], uint64_t act, uint8_t cs[64])
{
    if (mc_popc(act) < 8) return 0;
    J->cases64(w, cs);
    return 1;
}

/* The indexed mesh by the slab walk (isosurface_slab.c), with the AVX2
 * kernels when avx2 is set. Returns PM_STATUS_UNSUPPORTED, with nothing
 * set, when it declines: its slab arrays would pass its memory budget
 * (volumes with far more crossings than smooth fields have, such as
 * noise) or could not be allocated. With `sample` set it first estimates
 * the mesh from a sample of rows and declines at once (*sampled = 1) when
 * the estimate is twice the budget. */
pm_status pmi_mc_slab(pm_context *ctx, const pm_volume *vol, double iso,
                      const pm_isosurface_options *opt, int avx2, int sample, pm_mesh *mesh,
                      int *sampled);
/* The indexed mesh by the two-pass extraction (isosurface_twopass.c), with
 * the AVX2 kernels when avx2 is set, and streaming stores for large
 * meshes or when `stream` is set. */
pm_status pmi_mc_twopass(pm_context *ctx, const pm_volume *vol, double iso,
                         const pm_isosurface_options *opt, int avx2, int stream, pm_mesh *mesh);

#if MC_AVX2
/* isosurface_avx2.c: bits_row of each sample type with 8 to 32 compares at
 * a time (the same bits as the kernels'), for CPUs with AVX2. */
extern const mc_bits_row_fn pmi_mc_bits_row_avx2[5];

/* mc_queue64_fn with the three masks interleaved into one 192-bit stream
 * by bit deposits, so that each crossing costs a bit scan and a store.
 * Needs BMI2 (__builtin_cpu_supports("bmi2")). */
size_t pmi_mc_queue64_bmi2(const uint64_t m[3], size_t x, uint64_t *out);

/* mc_cases64 of 64 cells at a time (every cell's byte, 2 x 32 lanes). */
void pmi_mc_cases64_avx2(const uint64_t w[8], uint8_t cs[64]);

/* mc_ids64_fn by a byte-wide prefix sum of the crossings per point. */
void pmi_mc_ids64_avx2(const uint64_t m[3], uint32_t id, uint32_t *o, size_t row);

/* mc_tris64_fn, 8 ids at a time: groups of 8 cells with 4 or more active
 * by transposing the ids of their 12 edges (8-wide loads that may read one
 * id past the end of the last id row: the array has that padding), the
 * others by gathers. */
size_t pmi_mc_tris64_avx2(const uint32_t *ids, const int32_t off[16], uint64_t act,
                          const uint8_t cs[64], size_t x, uint32_t *out);

/* vertex() with central normals for the 8 vertices V[0..7], bit for bit
 * as 4 calls of the kernel's vertex() (both extractions). */
void pmi_mc_vertex8_central(const mc_job *J, const mc_pending *V);
/* The same as mc_vertex_row_fn (the two-pass extraction's rows): lanes
 * of interior rows gathered without per-lane bounds in y and z. */
void pmi_mc_vertex_row_central(const mc_job *J, size_t j, size_t k, const uint64_t *e, size_t n,
                               float *pos, float *nrm);
#endif

#endif
