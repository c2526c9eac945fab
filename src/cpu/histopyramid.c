/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_histopyramid_build(pm_context *c, const uint32_t *f, size_t n, pm_histopyramid **o) { (void)c; (void)f; (void)n; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
pm_status pmi_cpu_histopyramid_total(pm_context *c, const pm_histopyramid *h, uint64_t *t) { (void)c; (void)h; (void)t; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
pm_status pmi_cpu_histopyramid_traverse(pm_context *c, const pm_histopyramid *h, uint64_t f, size_t n, uint64_t *s, uint32_t *l) { (void)c; (void)h; (void)f; (void)n; (void)s; (void)l; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
void pmi_cpu_histopyramid_destroy(pm_context *c, pm_histopyramid *h) { (void)c; (void)h; }
