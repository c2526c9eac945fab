/* The CPU backend's algorithms, one file each (reduce.c, scan.c, ...).
 * Arguments have been checked by src/core; these trust them. Parallel with
 * OpenMP over ctx->num_threads threads. Internal header. */
#ifndef PM_CPU_CPU_H
#define PM_CPU_CPU_H

#include "core/backend.h"

pm_status pmi_cpu_reduce_f32(pm_context *ctx, const float *in, size_t n, pm_reduce_op op,
                             double *result);
pm_status pmi_cpu_reduce_image_f32(pm_context *ctx, const float *image, size_t width, size_t height,
                                   size_t row_stride, pm_reduce_op op, double *result);
pm_status pmi_cpu_scan_exclusive_u32(pm_context *ctx, const uint32_t *in, size_t n, uint32_t *out,
                                     uint64_t *total);
pm_status pmi_cpu_filter_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                             float threshold, float *out, size_t capacity, size_t *count);
pm_status pmi_cpu_filter_horn_f32(pm_context *ctx, const float *in, size_t n, pm_compare cmp,
                                  float threshold, float *out, size_t capacity, size_t *count);
pm_status pmi_cpu_compact(pm_context *ctx, const uint8_t *flags, size_t n, uint64_t *out_index,
                          size_t capacity, size_t *count);
pm_status pmi_cpu_expand(pm_context *ctx, const uint32_t *counts, size_t n, uint64_t *out_source,
                         uint32_t *out_local, size_t capacity, size_t *count);
pm_status pmi_cpu_histopyramid_build(pm_context *ctx, const uint32_t *counts, size_t n,
                                     pm_histopyramid **out);
pm_status pmi_cpu_histopyramid_total(pm_context *ctx, const pm_histopyramid *hp, uint64_t *total);
pm_status pmi_cpu_histopyramid_traverse(pm_context *ctx, const pm_histopyramid *hp,
                                        uint64_t first_key, size_t num_keys, uint64_t *out_source,
                                        uint32_t *out_local);
void pmi_cpu_histopyramid_destroy(pm_context *ctx, pm_histopyramid *hp);
pm_status pmi_cpu_isosurface(pm_context *ctx, const pm_volume *volume, double iso,
                             const pm_isosurface_options *options, pm_mesh *mesh);
/* Frees what pm_isosurface keeps in a CPU context between calls. */
void pmi_cpu_isosurface_release(pm_context *ctx);
pm_status pmi_cpu_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                const pm_field_params *params, pm_field *out);
/* The per-frame entry points, synchronous on the CPU (async.c). */
pm_status pmi_cpu_isosurface_async(pm_context *ctx, const pm_volume *volume, double iso,
                                   const pm_isosurface_options *options,
                                   pm_isosurface_counts *counts);
pm_status pmi_cpu_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                      const pm_field_params *params, const pm_field_grid *grid,
                                      float *field, pm_field_status *status);
/* Collision detection (bvh.c, collide.c). */
pm_status pmi_cpu_bvh_build(pm_context *ctx, const pm_mesh *mesh, struct pm_bvh *out);
void pmi_cpu_bvh_destroy(pm_context *ctx, struct pm_bvh *bvh);
pm_status pmi_cpu_collide(pm_context *ctx, const struct pm_bvh *a, const struct pm_bvh *b,
                          const struct pmi_xform *x, const pm_collide_options *options,
                          uint32_t *pairs, size_t capacity, size_t *count);
/* Loop subdivision: one step of src/core/loop_rules.h over n elements. */
pm_status pmi_cpu_subdivide_step(pm_context *ctx, int step, size_t n,
                                 const struct pmi_loop_args *args);

#endif
