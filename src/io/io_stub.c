/* STUB: replaced by the real readers and writers in src/io/. */
#include <string.h>
#include "core/util.h"
pm_status pm_volume_read(const char *p, const pm_raw_options *r, size_t m, pm_volume *o) { (void)p; (void)r; (void)m; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
void pm_volume_free(pm_volume *v) { (void)v; }
pm_status pm_points_read(const char *p, pm_points_format f, size_t m, pm_points *o) { (void)p; (void)f; (void)m; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
void pm_points_free(pm_points *p) { (void)p; }
pm_status pm_mesh_write(const char *p, const pm_mesh *m, const pm_write_options *o) { (void)p; (void)m; (void)o; return pmi_error(PM_STATUS_UNSUPPORTED, "stub"); }
