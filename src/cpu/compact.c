/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_compact(pm_context *c, const uint8_t *f, size_t n, uint64_t *o, size_t k, size_t *cnt) { (void)c; (void)f; (void)n; (void)o; (void)k; (void)cnt; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
pm_status pmi_cpu_expand(pm_context *c, const uint32_t *f, size_t n, uint64_t *o, uint32_t *l, size_t k, size_t *cnt) { (void)c; (void)f; (void)n; (void)o; (void)l; (void)k; (void)cnt; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
