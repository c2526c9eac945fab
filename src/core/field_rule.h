/* The lattice rule of the density fields (docs/reconstruct.md), shared by
 * the CPU backend (src/cpu/density.c), the CUDA backend
 * (src/cuda/neighbours.cu) and pm_field_grid_for_box (src/core/mesh.c), so
 * all three pick the same lattice for the same particles. Internal header. */
#ifndef PM_CORE_FIELD_RULE_H
#define PM_CORE_FIELD_RULE_H

#include <math.h>

#include "pyramesh.h"
#include "core/util.h"

/* Blur cells hold at least this many lattice points per edge: its reach
 * (r + s/2) is only 2.5 points at -c 0.5, and tiny blocks cost more in
 * per-block overhead than they save. */
#define PMI_BLUR_MIN_BLOCK 6

/* Lattice indices stay below 2^52 (exact in double). */
#define PMI_MAX_LATTICE_INDEX 4503599627370496.0

/* params with their defaults filled in (smoothing length 2, cube size
 * 0.5, iso 0.6, rest density 1000, blur steps 2, memory half the RAM) and
 * checked; fn names the public function in errors (src/core/mesh.c). */
pm_status pmi_field_params(const char *fn, const pm_field_params *params, pm_field_params *p);

/* The lattice rule of the density fields, shared by the CPU and CUDA
 * backends and pm_field_grid_for_box (docs/reconstruct.md): spacing s =
 * c r, the SPH support h, a particle's reach, the margin around the
 * particles' box, and B, lattice points per neighbour-cell edge (cells at
 * least cell_reach wide; the 1e-12 keeps an exact ratio such as h/s = 8
 * from becoming 9 through a rounding of the division). params resolved. */
typedef struct pmi_field_rule {
    double s, h, reach, margin, cell_reach, B;
} pmi_field_rule;

static inline pmi_field_rule pmi_field_rule_of(const pm_field_params *p)
{
    pmi_field_rule f;
    const int sph = p->method == PM_FIELD_SPH;
    const double r = p->radius;
    f.s = p->cube_size * r;
    f.h = 2.0 * p->smoothing_length * r;
    f.reach = sph ? f.h : r + 0.5 * f.s;
    f.margin = sph ? f.h : f.reach + p->blur_steps * f.s;
    f.cell_reach = sph ? f.h : fmax(f.reach, PMI_BLUR_MIN_BLOCK * f.s);
    f.B = fmax(1.0, ceil(f.cell_reach / f.s * (1.0 - 1e-12)));
    return f;
}

/* The lattice of the particles' box [bmin, bmax]: the global index of
 * point 0 and the points per axis on each axis (doubles).
 * PM_STATUS_INVALID_ARGUMENT (message prefixed by fn) when an index would
 * reach PMI_MAX_LATTICE_INDEX. */
static inline pm_status pmi_field_extent(const char *fn, const pmi_field_rule *f,
                                         const double bmin[3], const double bmax[3], double lo[3],
                                         double dims[3])
{
    for (int a = 0; a < 3; a++) {
        const double g0 = floor((bmin[a] - f->margin) / f->s) - 1.0;
        const double g1 = ceil((bmax[a] + f->margin) / f->s) + 1.0;
        if (!(fabs(g0) < PMI_MAX_LATTICE_INDEX) || !(fabs(g1) < PMI_MAX_LATTICE_INDEX))
            return pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "%s: coordinates up to %g are too large for the cell size %g (more than 2^52 "
                "cells from the origin)",
                fn, fmax(fabs(bmin[a]), fabs(bmax[a])), f->s);
        lo[a] = g0;
        dims[a] = g1 - g0 + 1.0;
    }
    return PM_STATUS_OK;
}

#endif
