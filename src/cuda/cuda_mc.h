/* Entry points of the CUDA marching cubes (src/cuda/isosurface.cu) and the
 * CUDA density fields (src/cuda/density.cu), with C linkage for the backend
 * table in src/cuda/backend.cu. Arguments are checked and resolved by
 * src/core/mesh.c; these trust them. Internal header. */
#ifndef PM_CUDA_MC_H
#define PM_CUDA_MC_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

pm_status pmi_cuda_isosurface(pm_context *ctx, const pm_volume *volume, double iso,
                              const pm_isosurface_options *options, pm_mesh *mesh);
pm_status pmi_cuda_isosurface_async(pm_context *ctx, const pm_volume *volume, double iso,
                                    const pm_isosurface_options *options,
                                    pm_isosurface_counts *counts_ctx);
pm_status pmi_cuda_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                 const pm_field_params *params, pm_field *out);
pm_status pmi_cuda_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                       const pm_field_params *params, const pm_field_grid *grid,
                                       float *field_ctx, pm_field_status *status_ctx);

#ifdef __cplusplus
}
#endif
#endif
