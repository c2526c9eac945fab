/* STUB: replaced by the real implementation. */
#include "cpu/cpu.h"
#include "core/util.h"
pm_status pmi_cpu_isosurface(pm_context *c, const pm_volume *v, double iso, const pm_isosurface_options *o, pm_mesh *m) { (void)c; (void)v; (void)iso; (void)o; (void)m; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
