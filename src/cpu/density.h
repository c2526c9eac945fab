/* Shared pieces of the CPU density fields (pm_field_compute): the lattice
 * and neighbour-cell layout, the counting-sort cell list (neighbours.c),
 * the SPH sums (sph.c) and the blur method (blur.c). Internal header. The
 * per-term arithmetic is shared with the CUDA backend through
 * core/sph_kernel.h; the summation order is documented in
 * docs/reconstruct.md because the CUDA backend must reproduce it. */
#ifndef PM_CPU_DENSITY_H
#define PM_CPU_DENSITY_H

#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/field_rule.h"
#include "core/sph_kernel.h"

/* The output lattice and the neighbour cells laid over it. Lattice point
 * (i,j,k) is at ((i0+i)*s, (j0+j)*s, (k0+k)*s) with the global integer
 * offsets lo[] (so lattices of different frames line up). Neighbour cell
 * (cx,cy,cz) holds the lattice points with i in [cx*block, cx*block+block)
 * etc. and has edge block*s >= reach, so a particle affects only lattice
 * points of its own cell and the 26 around it. */
typedef struct pmi_field_layout {
    double spacing;  /* s = c*r */
    int64_t lo[3];   /* global lattice index of point 0 on each axis */
    size_t dims[3];  /* lattice points per axis */
    size_t points;   /* dims[0]*dims[1]*dims[2] */
    size_t block;    /* lattice points per cell edge */
    size_t cdims[3]; /* cells per axis = ceil(dims/block) */
    size_t ncells;
    double reach; /* a particle affects points closer than this (per axis for blur) */
} pmi_field_layout;

/* Particles sorted by cell (counting sort, stable: particle order inside
 * a cell). Cell c holds sorted slots start[c] .. start[c+1]-1. */
typedef struct pmi_cell_list {
    size_t n;
    uint32_t *start; /* ncells + 1 */
    uint32_t *order; /* sorted slot -> input index */
    float *xyz;      /* positions in sorted order, 3 per slot */
} pmi_cell_list;

/* Lattice points accumulated at once per thread (doubles): a whole cell
 * block for every sane -l/-c ratio, z-slabs of a block beyond that. */
#define PMI_ACC_CAP ((size_t)1 << 18)
/* SPH field superblocks: the field is accumulated per box of whole
 * neighbour cells, about PMI_SB_X x PMI_SB_YZ x PMI_SB_YZ lattice points (at
 * least one cell; 128 KB of doubles, cache-resident), z-sliced into slabs
 * when a single cell exceeds PMI_ACC_CAP points. With -c 1.5 (cells of 3
 * points) a particle is then visited by ~2 boxes instead of 27 cells, and
 * long boxes in x split fewer of a particle's rows. */
#define PMI_SB_X 64
#define PMI_SB_YZ 16

/* Cells per superblock edge (sbc), its lattice points per axis at most
 * (pts, z before slicing) and the slab depth, for cells of B points. */
static inline void pmi_sph_superblock(size_t B, size_t sbc[3], size_t pts[3], size_t *slab)
{
    sbc[0] = PMI_SB_X / B ? PMI_SB_X / B : 1;
    sbc[1] = sbc[2] = PMI_SB_YZ / B ? PMI_SB_YZ / B : 1;
    for (int a = 0; a < 3; a++)
        pts[a] = sbc[a] * B;
    size_t plane = pts[0] * pts[1];
    *slab = pts[2];
    if (plane * pts[2] > PMI_ACC_CAP) *slab = PMI_ACC_CAP / plane ? PMI_ACC_CAP / plane : 1;
}

/* The range of sorted slots of the (up to) three cells x-1..x+1 in one
 * row of cells: cells along x are adjacent in linear order, so the three
 * cells are one contiguous run of slots, already in the documented order
 * (cell x ascending, then particle order). */
static inline void pmi_row_range(const pmi_field_layout *lay, const pmi_cell_list *cells, size_t cx,
                                 size_t rowbase, uint32_t *b, uint32_t *e)
{
    size_t x0 = cx > 0 ? cx - 1 : 0;
    size_t x1 = cx + 1 < lay->cdims[0] ? cx + 1 : lay->cdims[0] - 1;
    *b = cells->start[rowbase + x0];
    *e = cells->start[rowbase + x1 + 1];
}

/* Global lattice index range [lo, hi] that can hold points within `reach`
 * of coordinate p, as local indices clipped to [a, b); returns 0 if empty.
 * The range is a superset; the distance test decides. */
static inline int pmi_index_range(double p, double reach, double s, int64_t lo, size_t a, size_t b,
                                  size_t *ra, size_t *rb)
{
    double g0 = floor((p - reach) / s) - (double)lo, g1 = ceil((p + reach) / s) - (double)lo;
    if (g1 < (double)a || g0 >= (double)b) return 0;
    *ra = g0 > (double)a ? (size_t)g0 : a;
    *rb = g1 < (double)(b - 1) ? (size_t)g1 : b - 1;
    return *ra <= *rb;
}

/* The checks and first pass of the density fields: n > 0 and < 2^32 - 1,
 * finite coordinates, the aabb filter (p->use_aabb) and the kept
 * particles' box. Messages start with fn. */
pm_status pmi_particles_box(pm_context *ctx, const char *fn, const float *xyz, size_t n,
                            const pm_field_params *p, double bmin[3], double bmax[3],
                            size_t *kept);

/* Builds the cell list of n points (host memory). */
pm_status pmi_cells_build(pm_context *ctx, const pmi_field_layout *lay, const float *xyz, size_t n,
                          pmi_cell_list *cells);
void pmi_cells_free(pmi_cell_list *cells);

/* SPH (splashsurf's definitions): per-particle volume m / rho_j in sorted
 * order (vol, n doubles), then the colour field into out (lay->points f32). */
pm_status pmi_sph_volumes(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                          double h, double mass, double *vol);
pm_status pmi_sph_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                        double h, const double *vol, float *out);
/* The sparse path (src/cpu/sparse.c) runs the same sums per brick, one
 * thread per brick: the field of the points [w0, w1) of lay only (out
 * holds that box, x fastest; bit-identical to pmi_sph_field's values
 * there), with `scratch` of pmi_sph_field_scratch(lay->block) doubles,
 * and the volumes of the particles of the cells [c0, c1) only. */
size_t pmi_sph_field_scratch(size_t block);
void pmi_sph_field_window(const pmi_field_layout *lay, const pmi_cell_list *cells, double h,
                          const double *vol, const size_t w0[3], const size_t w1[3], float *out,
                          double *scratch);
void pmi_sph_volumes_box(const pmi_field_layout *lay, const pmi_cell_list *cells, double h,
                         double mass, const size_t c0[3], const size_t c1[3], double *vol);
/* The two SPH stages, so that tests can run pm_field_compute with their
 * reference loops in place of the vectorised ones. */
typedef struct pmi_sph_stages {
    pm_status (*volumes)(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                         double h, double mass, double *vol);
    pm_status (*field)(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                       double h, const double *vol, float *out);
} pmi_sph_stages;

/* Blur: box splat of each particle's cube (edge 2r) then `steps` binomial
 * [1 2 1]/4 passes along x, y and z (zero outside the grid). */
pm_status pmi_blur_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                         double r, int steps, float *out);

/* For tests: pm_field_compute on the CPU (p resolved) with the given SPH
 * stages (the result must be bit-identical to pm_field_compute's). */
pm_status pmi_cpu_field_compute_with(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *p, const pmi_sph_stages *stages,
                                     pm_field *out);

/* For tests: the SPH densities rho_j in input order (method sph, no aabb;
 * p resolved as pm_field_compute resolves it). */
pm_status pmi_cpu_particle_densities(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *p, double *rho);

#endif
