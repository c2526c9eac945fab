/* STUB: replaced by src/io mesh readers, src/core/mesh_analysis.c and
 * src/core/debug_images.c. */
#include "core/util.h"
pm_status pm_mesh_read(const char *p, size_t m, pm_mesh *o) { (void)p; (void)m; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "pm_mesh_read: not implemented yet"); }
pm_status pm_mesh_analyze(const pm_mesh *m, pm_mesh_report *r) { (void)m; (void)r; return pmi_error(PM_STATUS_UNSUPPORTED, "pm_mesh_analyze: not implemented yet"); }
pm_status pm_debug_images(const pm_volume *v, double iso, int ia, const char *d) { (void)v; (void)iso; (void)ia; (void)d; return pmi_error(PM_STATUS_UNSUPPORTED, "pm_debug_images: not implemented yet"); }
