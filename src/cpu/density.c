/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_field_compute(pm_context *c, const float *x, size_t n, const pm_field_params *p, pm_field *o) { (void)c; (void)x; (void)n; (void)p; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
