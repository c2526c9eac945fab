/* The CPU side of mesh pieces and sparse reconstruction: the piece
 * extraction (sparse_mc.c), shared by pm_isosurface_piece and the sparse
 * bricks (sparse.c). Internal header. */
#ifndef PM_CPU_SPARSE_H
#define PM_CPU_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/sparse.h"
#include "cpu/density.h"

/* One piece: the window's samples (strides in elements; its point 0 is
 * global point wlo), the global lattice, the owned box and the rules. */
typedef struct pmi_piece_job {
    const void *data;
    pm_sample_type type;
    size_t rs, ss;
    uint64_t wlo[3];
    double origin[3], h[3];
    uint64_t N[3];
    uint64_t olo[3], odims[3];
    double iso, sg, siso; /* sg = -1 for PM_INSIDE_ABOVE, siso = sg * iso */
    float fthr;           /* siso rounded up to float (pmi_mc_float_threshold) */
    pm_normals normals;
} pmi_piece_job;

/* window resolved (strides set), options resolved, arguments checked. */
void pmi_piece_job_init(pmi_piece_job *J, const pm_volume *window, const uint64_t window_lo[3],
                        const pm_lattice *lattice, const pm_lattice_box *owned, double iso,
                        const pm_isosurface_options *options);
/* Scratch words of the inside bits of J's owned box and its +1 layer. */
size_t pmi_piece_bits_words(const pmi_piece_job *J);
/* The piece (host arrays, owned by it), with `bits` of
 * pmi_piece_bits_words words as scratch. */
pm_status pmi_piece_extract(const pmi_piece_job *J, uint64_t *bits, pm_mesh_piece *out);

/* Backend entries (src/core/backend.h). */
pm_status pmi_cpu_isosurface_piece(pm_context *ctx, const pm_volume *window,
                                   const uint64_t window_lo[3], const pm_lattice *lattice,
                                   const pm_lattice_box *owned, double iso,
                                   const pm_isosurface_options *options, pm_mesh_piece *piece);
pm_status pmi_cpu_sparse_plan(pm_context *ctx, const float *xyz, size_t n,
                              const pm_field_params *params, size_t brick_points,
                              pm_normals normals, pmi_sparse_plan *plan);
pm_status pmi_cpu_sparse_pieces(pm_context *ctx, pmi_sparse_plan *plan, size_t first, size_t count,
                                double iso, const pm_isosurface_options *options,
                                pm_mesh_piece *pieces, double *field_ms, double *extract_ms);
void pmi_cpu_sparse_plan_free(pm_context *ctx, pmi_sparse_plan *plan);
/* A dense cell list over the neighbour cells [c0, c1) of a plan's lattice,
 * as density.c builds it for a whole grid: the same particles in the same
 * slot order (by cell, then input index), so the SPH sums add the same
 * terms in the same order. Buffers grow and are reused from call to call;
 * zero the struct before the first, pmi_sparse_local_free after the last. */
typedef struct pmi_sparse_local {
    pmi_field_layout lay; /* lo = the global lattice index of point 0 of cell c0 */
    pmi_cell_list cells;  /* start (ncells + 1), xyz by slot, n */
    double *vol;          /* volumes by slot (with_vol) */
    size_t cap_cells, cap_parts;
    uint64_t c0[3];
    /* Occupied cells met: local cell id and first global slot. */
    struct pmi_sparse_found {
        size_t local;
        uint32_t global;
    } * found;
    size_t nfound, cap_found;
} pmi_sparse_local;

/* Returns 0 when out of memory. with_vol needs a plan with volumes. */
int pmi_sparse_local_build(const pmi_sparse_plan *plan, const uint64_t c0[3], const uint64_t c1[3],
                           int with_vol, pmi_sparse_local *L);
void pmi_sparse_local_free(pmi_sparse_local *L);

/* For tests: the field of brick plan->bricks[q] over its window [w0, w1)
 * (pmi_brick_window) into field, x fastest. */
pm_status pmi_cpu_sparse_brick_field(pm_context *ctx, const pmi_sparse_plan *plan, size_t q,
                                     float *field, uint64_t w0[3], uint64_t w1[3]);

#endif
