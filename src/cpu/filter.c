/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_filter_f32(pm_context *c, const float *i, size_t n, pm_compare m, float t, float *o, size_t k, size_t *cnt) { (void)c; (void)i; (void)n; (void)m; (void)t; (void)o; (void)k; (void)cnt; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
pm_status pmi_cpu_filter_horn_f32(pm_context *c, const float *i, size_t n, pm_compare m, float t, float *o, size_t k, size_t *cnt) { (void)c; (void)i; (void)n; (void)m; (void)t; (void)o; (void)k; (void)cnt; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
