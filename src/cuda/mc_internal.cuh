/* Shared declarations of the CUDA marching cubes files (mc_classify.cu,
 * isosurface.cu): tiling, the compacted records, launch helpers. */
#ifndef PM_CUDA_MC_INTERNAL_CUH
#define PM_CUDA_MC_INTERNAL_CUH

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/mc_tables.h"
}

#include "cuda/mc_device.cuh"

#define MC_THREADS 256
#define MC_TILE 8192 /* lattice points per classification tile */
#define MC_PPT (MC_TILE / MC_THREADS)

/* Tiles of whole rows: `rows` rows of `width` points in one slice when a
 * row fits a tile (chunks == 1), else chunks of one row. Tile order is
 * lattice order, which the look-back chain relies on. */
typedef struct mc_tiling {
    long long width, rows, chunks, bands, ntiles;
} mc_tiling;

/* One record per active lattice point, in lattice order: the point's
 * linear index i + nx*(j + ny*k), its info (case | crossings << 8 |
 * triangles << 11 | 1 << 14), and the exclusive prefixes of triangles and
 * of owned-edge crossings over all points before it. */
typedef struct mc_records {
    unsigned long long *point;
    uint16_t *info;
    unsigned long long *tri;
    unsigned long long *cross;
} mc_records;

/* Bytes of one record. */
#define MC_RECORD_BYTES (8 + 2 + 8 + 8)

mc_tiling mc_make_tiling(const pm_volume *vol);
pm_status mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int indexed,
                      pm_sample_type type, unsigned int *ticket, unsigned long long *state,
                      mc_records rec, unsigned long long rec_cap, unsigned long long *totals);

#endif
