/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_scan_exclusive_u32(pm_context *c, const uint32_t *i, uint32_t *o, size_t n, uint64_t *t) { (void)c; (void)i; (void)o; (void)n; (void)t; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
