/* The sparse decomposition of particle reconstruction (docs/scale.md),
 * shared by the core driver (src/core/sparse.c) and the backends'
 * entries (src/cpu/sparse.c, src/cuda/sparse.cu): the global lattice, its
 * neighbour cells and bricks, their 64-bit keys, and a brick's owned
 * points, field window and source cells. Internal header. */
#ifndef PM_CORE_SPARSE_H
#define PM_CORE_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "core/field_rule.h"
#include "pyramesh.h"

/* Default lattice points per brick edge (before rounding up to whole
 * neighbour cells): measured in bench/RESULTS-sparse.md. */
#define PMI_BRICK_DEFAULT 32
/* On the GPU a brick is a few device calls: larger bricks, fewer calls
 * (bench/RESULTS-sparse.md). */
#define PMI_BRICK_DEFAULT_GPU 128
/* Host threads (contexts, streams) per GPU in the sparse reconstruction:
 * one brick's gather and copies on the host overlap the other's kernels
 * (3 and 4 were no faster on the canyon: bench/RESULTS-sparse.md). */
#define PMI_SPARSE_GPU_WORKERS 2

/* The virtual lattice of a sparse reconstruction: pm_field_compute's grid
 * (g0, dims), its neighbour cells of B points (anchored at g0, so they
 * group the particles exactly as the dense path does) and its bricks of
 * `brick` points (bc whole cells) per edge. Cell and brick keys pack
 * (z, y, x) into 64 bits, x lowest, so ascending keys are ascending
 * linear ids (z outer). */
typedef struct pmi_sparse_geom {
    pmi_field_rule rule;
    int64_t g0[3];                 /* global lattice index of point 0 */
    uint64_t dims[3];              /* points per axis */
    double origin[3];              /* g0 * s */
    uint64_t B;                    /* points per cell edge */
    uint64_t cdims[3];             /* cells per axis = ceil(dims / B) */
    uint64_t brick;                /* points per brick edge, a multiple of B */
    uint64_t bc;                   /* cells per brick edge */
    uint64_t bdims[3];             /* bricks per axis */
    unsigned cshift[3], bshift[3]; /* key field offsets */
    int ghost_lo, ghost_hi;        /* field window beyond the owned points */
} pmi_sparse_geom;

/* The key helpers below run on the host and, in src/cuda/sparse.cu, on
 * the device (the GPU's plan computes the same keys). */
#ifdef __CUDACC__
#define PMI_GEOM_FN static __host__ __device__ __forceinline__
#else
#define PMI_GEOM_FN static inline
#endif

static inline unsigned pmi_bits_for(uint64_t n)
{
    unsigned b = 0;
    while (b < 64 && (n - 1) >> b)
        b++;
    return b;
}

PMI_GEOM_FN uint64_t pmi_cell_key(const pmi_sparse_geom *G, uint64_t cx, uint64_t cy, uint64_t cz)
{
    return cz << G->cshift[2] | cy << G->cshift[1] | cx;
}
PMI_GEOM_FN void pmi_cell_unkey(const pmi_sparse_geom *G, uint64_t key, uint64_t c[3])
{
    c[0] = key & ((1ull << G->cshift[1]) - 1);
    c[1] = (key >> G->cshift[1]) & ((1ull << (G->cshift[2] - G->cshift[1])) - 1);
    c[2] = key >> G->cshift[2];
}
PMI_GEOM_FN uint64_t pmi_brick_key(const pmi_sparse_geom *G, const uint64_t b[3])
{
    return b[2] << G->bshift[2] | b[1] << G->bshift[1] | b[0];
}
PMI_GEOM_FN void pmi_brick_unkey(const pmi_sparse_geom *G, uint64_t key, uint64_t b[3])
{
    b[0] = key & ((1ull << G->bshift[1]) - 1);
    b[1] = (key >> G->bshift[1]) & ((1ull << (G->bshift[2] - G->bshift[1])) - 1);
    b[2] = key >> G->bshift[2];
}

/* The global lattice of the geometry (pm_isosurface_piece's lattice). */
static inline pm_lattice pmi_sparse_lattice(const pmi_sparse_geom *G)
{
    pm_lattice lat;
    for (int a = 0; a < 3; a++) {
        lat.origin[a] = G->origin[a];
        lat.spacing[a] = G->rule.s;
        lat.dims[a] = G->dims[a];
    }
    return lat;
}

/* The points a brick owns: [lo, hi) per axis. */
static inline void pmi_brick_owned(const pmi_sparse_geom *G, const uint64_t b[3], uint64_t lo[3],
                                   uint64_t hi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = b[a] * G->brick;
        hi[a] = lo[a] + G->brick < G->dims[a] ? lo[a] + G->brick : G->dims[a];
    }
}

/* The brick's field window: its owned points, ghost_lo points below and
 * ghost_hi above (clipped to the lattice): the ghost rule of
 * pm_isosurface_piece. */
static inline void pmi_brick_window(const pmi_sparse_geom *G, const uint64_t b[3], uint64_t w0[3],
                                    uint64_t w1[3])
{
    uint64_t lo[3], hi[3];
    pmi_brick_owned(G, b, lo, hi);
    for (int a = 0; a < 3; a++) {
        w0[a] = lo[a] >= (uint64_t)G->ghost_lo ? lo[a] - (uint64_t)G->ghost_lo : 0;
        w1[a] =
            hi[a] + (uint64_t)G->ghost_hi < G->dims[a] ? hi[a] + (uint64_t)G->ghost_hi : G->dims[a];
    }
}

/* The neighbour cells whose particles reach the points [w0, w1): the cells
 * holding them and one more on each side, [c0, c1) (clipped). */
static inline void pmi_source_cells(const pmi_sparse_geom *G, const uint64_t w0[3],
                                    const uint64_t w1[3], uint64_t c0[3], uint64_t c1[3])
{
    for (int a = 0; a < 3; a++) {
        uint64_t a0 = w0[a] / G->B, a1 = (w1[a] - 1) / G->B + 1;
        c0[a] = a0 > 0 ? a0 - 1 : 0;
        c1[a] = a1 < G->cdims[a] ? a1 + 1 : G->cdims[a];
    }
}

/* The bricks a particle in cell c (one axis) can make non-zero: brick b's
 * cells' corners are the points of cells [b bc, (b+1) bc] (the last one
 * through its first point), and the particle reaches the points of cells
 * c-1 .. c+1, so b bc <= c + 1 and c - 1 <= (b+1) bc: [lo, hi], clipped. */
PMI_GEOM_FN void pmi_cell_bricks(const pmi_sparse_geom *G, int a, uint64_t c, uint64_t *lo,
                                   uint64_t *hi)
{
    const uint64_t bc = G->bc;
    uint64_t h = (c + 1) / bc;
    *lo = c >= bc + 2 ? (c - 2) / bc : 0;
    *hi = h < G->bdims[a] ? h : G->bdims[a] - 1;
}

/* What the backend's sparse_plan gives the driver. */
typedef struct pmi_sparse_plan {
    pmi_sparse_geom G;
    size_t kept, dropped;
    size_t nbricks;
    uint64_t *bricks; /* brick keys, ascending (host memory, owned by the plan) */
    size_t occupied_cells;
    double h, mass; /* the SPH kernel's radius and the particle mass */
    size_t bytes;   /* what the plan holds */
    double neighbours_ms, density_ms;
    void *state;  /* the backend's */
    void *device; /* the backend's device copies of state (CUDA: per GPU), or NULL */
    /* Set by the backend: the pieces of sparse_pieces have their arrays in
     * blocks the plan holds (freed with it): zero them, do not free them;
     * pieces that outlive the plan get their own copies (pmi_pieces_own). */
    int pieces_in_blocks;
    /* Set by the backend: its sparse_pieces can share a batch with other
     * contexts' calls. The driver then gives every context the whole
     * batch [first, first + count) and sets `cursor`: each call takes the
     * next brick (an atomic add on *cursor, from 0) until none is left, so
     * no context waits while another still holds a long share; a piece is
     * the same whichever context makes it. NULL: the call makes them all. */
    int shares_batches;
    size_t *cursor;
    /* in (set by the caller before sparse_plan, else 0): lay the lattice
     * over this box instead of the particles' own, as the box of all the
     * particles of a set split over MPI ranks (src/mpi/). */
    int have_box;
    double box_min[3], box_max[3];
} pmi_sparse_plan;

/* Lattice points per brick edge when the caller gives none: by the
 * context's device (PMI_BRICK_DEFAULT, PMI_BRICK_DEFAULT_GPU). */
size_t pmi_sparse_brick_default(const pm_context *ctx);

/* The geometry for params (resolved) and the particles' box; brick_points
 * 0 = default; ghosts for the normals mode. INVALID_ARGUMENT / OVERFLOW
 * as pm_field_compute's lattice, or when keys would not fit 64 bits. */
pm_status pmi_sparse_geom_init(const pm_field_params *p, const double bmin[3], const double bmax[3],
                               size_t brick_points, pm_normals normals, pmi_sparse_geom *G);

/* LSD radix sort (11 bits per pass, stable) of keys and their vals (may
 * be NULL) by the low `bits` bits of the keys, on up to `threads` threads
 * (the same result for any count); tk, tv: scratch of n (tv NULL when
 * vals is). src/core/piece_merge.c. */
void pmi_radix_sort_u64(uint64_t *keys, uint32_t *vals, size_t n, unsigned bits, uint64_t *tk,
                        uint32_t *tv, int threads);

/* The sparse reconstruction's merge (src/core/piece_merge.c): pieces[q] is
 * the piece of bricks[q] (ascending brick keys of G, each piece owning its
 * brick's points); the mesh is pm_mesh_pieces_merge's of the same pieces,
 * made without sorting (the order follows from the bricks). Extra memory:
 * 8 bytes per owned row of points of every brick (2 * count * brick^2 at
 * most) and 8 per vertex, besides the mesh. */
pm_status pmi_pieces_merge_bricks(pm_context *ctx, const pmi_sparse_geom *G,
                                  const uint64_t *bricks, const pm_mesh_piece *pieces,
                                  size_t count, const pm_isosurface_options *options,
                                  pm_mesh *mesh);

/* For the MPI layer (src/mpi/mpi_reconstruct.c): params with
 * pm_reconstruct's defaults, and the pieces of the bricks with brick z in
 * [bz0, bz1) of the sparse reconstruction whose lattice is laid over the
 * box [bmin, bmax] (of every particle of the whole set), computed from xyz,
 * which must hold every particle within reach of those bricks (and of
 * their particles' densities) in the whole set's order. The pieces (host
 * memory, *count of them) are the ones pm_reconstruct's sparse path makes
 * for those bricks, byte for byte. */
pm_status pmi_reconstruct_params(const pm_field_params *in, pm_field_params *p);
pm_status pmi_reconstruct_pieces(pm_context *ctx, const float *xyz, size_t n,
                                 const pm_field_params *params, size_t brick_points,
                                 const pm_isosurface_options *iso_options, const double bmin[3],
                                 const double bmax[3], uint64_t bz0, uint64_t bz1,
                                 pm_mesh_piece **pieces, size_t *count);

#endif
