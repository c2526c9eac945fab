/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_reduce_f32(pm_context *c, pm_reduce_op o, const float *i, size_t n, double *r) { (void)c; (void)o; (void)i; (void)n; (void)r; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
pm_status pmi_cpu_reduce_image_f32(pm_context *c, pm_reduce_op o, const float *i, size_t w, size_t h, size_t s, double *r) { (void)c; (void)o; (void)i; (void)w; (void)h; (void)s; (void)r; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
