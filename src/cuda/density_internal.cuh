/* Shared declarations of the CUDA density fields (density.cu) and their
 * neighbour grid (neighbours.cu). */
#ifndef PM_CUDA_DENSITY_INTERNAL_CUH
#define PM_CUDA_DENSITY_INTERNAL_CUH

#include "cuda/cuda_internal.h"

#define DN_PI 3.14159265358979323846

/* The lattice and the particles sorted by neighbour cell (device pointers).
 * Lattice point (i,j,k) is at ((lo[0]+i)*s, ...); cell c holds lattice
 * points [cx*block, cx*block+block) etc. and sorted slots start[c] ..
 * start[c+1]-1, particles in input order inside a cell. */
typedef struct dn_grid {
    long long n;        /* sorted slots: the particles kept (all of them, the
                         * dropped ones with cell ncells, on a fixed lattice) */
    long long lo[3], dims[3], cd[3];
    long long block, ncells, points;
    double s;
    const uint32_t *cell;  /* cell of each sorted slot */
    const uint32_t *start; /* ncells + 1 */
    const float *xyz;      /* sorted positions, 3 per slot */
} dn_grid;

/* Device buffers of one pm_field_compute call. */
typedef struct dn_scratch {
    void *buf[16];
    int nbuf;
    double *vol; /* SPH volumes m / rho per sorted slot */
} dn_scratch;

pm_status dn_grid_build(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p, dn_grid *g,
                        dn_scratch *sc);
void dn_scratch_free(dn_scratch *sc);
/* The grid on a lattice the caller fixes, queued without waiting
 * (pm_field_compute_async; neighbours.cu): g->n is every particle (the
 * dropped ones sorted last, cell key ncells), *vol the SPH volumes
 * (NULL for blur), *extra extra_b bytes of scratch; status[0] the kept
 * count, status[1] the first non-finite particle or ~0. */
pm_status dn_grid_build_fixed(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                              const pm_field_grid *grid, size_t extra_b, dn_grid *g, double **vol, void **extra,
                              unsigned long long *status);

#endif
