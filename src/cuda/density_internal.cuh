/* Shared declarations of the CUDA density fields (density.cu) and their
 * neighbour grid (neighbours.cu). */
#ifndef PM_CUDA_DENSITY_INTERNAL_CUH
#define PM_CUDA_DENSITY_INTERNAL_CUH

#include "cuda/cuda_internal.h"
#include "core/sph_kernel.h"
extern "C" {
#include "core/field_rule.h"
}

/* The lattice and the particles sorted by neighbour cell (device pointers).
 * Lattice point (i,j,k) is at ((lo[0]+i)*s, ...); cell c holds lattice
 * points [cx*block, cx*block+block) etc. and sorted slots start[c] ..
 * start[c+1]-1, particles in input order inside a cell. */
typedef struct pmi_dn_grid {
    long long n; /* sorted slots: the particles kept (all of them, the
                  * dropped ones with cell ncells, on a fixed lattice) */
    long long lo[3], dims[3], cd[3];
    long long block, ncells, points;
    double s;
    const uint32_t *cell;  /* cell of each sorted slot */
    const uint32_t *start; /* ncells + 1 */
    const float *xyz;      /* sorted positions, 3 per slot */
} pmi_dn_grid;

/* Device buffers of one pm_field_compute call. */
typedef struct pmi_dn_scratch {
    void *buf[16];
    int nbuf;
    double *vol; /* SPH volumes m / rho per sorted slot */
} pmi_dn_scratch;

extern "C" {
/* The grid over the kept particles' bounding box (pm_field_compute): checks
 * the particles, sizes the lattice by the CPU's rule (core/field_rule.h)
 * and waits for the sort. Buffers go to sc (sc->vol for SPH). */
pm_status pmi_dn_grid_build(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                            pmi_dn_grid *g, pmi_dn_scratch *sc);
void pmi_dn_scratch_free(pmi_dn_scratch *sc);
/* The grid on a lattice the caller fixes, queued without waiting
 * (pm_field_compute_async): g->n is every particle (the dropped ones
 * sorted last, cell key ncells), *vol the SPH volumes (NULL for blur),
 * *extra extra_b bytes of scratch; status (context memory) receives the
 * kept count and the first non-finite particle (or UINT64_MAX). */
/* The checks and box of n particles, shared by the density grid and the
 * SPH interpolator's grid (postprocess.cu): res is 64 bytes of device
 * scratch; waits. first_bad: the first particle with a non-finite
 * coordinate (~0ull: none); kept: those inside the aabb (all without
 * aabb); the box of the kept ones, exact (float min/max by atomics on
 * order-preserving integer keys). what names the call in errors. */
typedef struct pmi_particle_box {
    unsigned long long first_bad;
    size_t kept;
    double bmin[3], bmax[3];
} pmi_particle_box;
pm_status pmi_cuda_particle_box(pm_context *ctx, const float *xyz, size_t n, int aabb,
                                double3 amin, double3 amax, unsigned long long *res,
                                const char *what, pmi_particle_box *out);
/* out[k] = the particle order[k]'s position, k < n (queued). */
pm_status pmi_cuda_gather_xyz(pm_context *ctx, const float *xyz, const uint32_t *order, long long n,
                              float *out, const char *what);
/* Queues the SPH volumes of every slot of g (into vol, g->n doubles) and
 * the colour field over g's points (into field, x fastest), kernel radius
 * h and particle mass `mass`: the field of a grid the caller built
 * (src/cuda/sparse.cu), with the dense path's kernels. */
pm_status pmi_dn_queue_sph(pm_context *ctx, const pmi_dn_grid *g, double h, double mass,
                           double *vol, float *field, const char *fn);
pm_status pmi_dn_grid_build_fixed(pm_context *ctx, const float *xyz, size_t n,
                                  const pm_field_params *p, const pm_field_grid *grid,
                                  size_t extra_b, pmi_dn_grid *g, double **vol, void **extra,
                                  pm_field_status *status);
}

#endif
