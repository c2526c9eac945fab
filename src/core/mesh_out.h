/* Where an extraction writes its mesh and how much of it: the one capacity
 * rule and the one mesh allocator of every backend. Internal header. */
#ifndef PM_CORE_MESH_OUT_H
#define PM_CORE_MESH_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The mesh's arrays (caller's buffers or freshly allocated) and the part of
 * the mesh to write: vertices [0, vertex_limit), and for an indexed mesh
 * triangles [0, tri_limit). normals is NULL when not wanted, indices NULL
 * for a soup or when the caller gave no index buffer. */
typedef struct pmi_mesh_dest {
    float *positions;
    float *normals;
    uint32_t *indices;
    uint64_t vertex_limit;
    uint64_t tri_limit;
} pmi_mesh_dest;

/* The capacity rule: with caller buffers of vcap vertices and tcap
 * triangles, an indexed mesh writes min(nv, vcap) vertices and min(nt,
 * tcap) triangles; a soup writes whole triangles only, min(nt, tcap,
 * vcap / 3) of them and their 3 vertices each. */
void pmi_mesh_limits(int indexed, uint64_t nv, uint64_t nt, uint64_t vcap, uint64_t tcap,
                     uint64_t *vertex_limit, uint64_t *tri_limit);

/* The index rule: an indexed mesh's vertex indices are 32-bit, so it may
 * have at most UINT32_MAX vertices. */
static inline int pmi_mesh_indices_fit(uint64_t nv) { return nv <= UINT32_MAX; }
/* PM_STATUS_OVERFLOW with the message of every backend. */
pm_status pmi_mesh_index_overflow(uint64_t nv);

/* Sets the mesh's counts and arrays for an extraction of nv vertices and
 * nt triangles (opt resolved): the caller's buffers when
 * opt->out_positions is set (PM_STATUS_TRUNCATED, with the message set, when the
 * mesh does not fit them: the counts stay the full ones and dest says
 * what to write), else arrays allocated in host memory or, with
 * output_in_context_memory, in context memory through the backend's
 * alloc (owned by the mesh; PM_STATUS_OUT_OF_MEMORY or
 * PM_STATUS_OVERFLOW leave the mesh zeroed). Indexed meshes past the
 * index rule are PM_STATUS_OVERFLOW. */
pm_status pmi_mesh_prepare(pm_context *ctx, const pm_isosurface_options *opt, int indexed,
                           uint64_t nv, uint64_t nt, uint64_t active_cells, pm_mesh *mesh,
                           pmi_mesh_dest *dest);

/* Writes the path word list of a report (NULL is fine): appends "key=value"
 * to report->path, space-separated, truncating at its size. */
void pmi_report_path(pm_isosurface_report *report, const char *key, const char *value);
/* Sets stage i's name and time (ms) of a timed report (NULL is fine). */
void pmi_report_stage(pm_isosurface_report *report, int i, const char *name, double ms);

#ifdef __cplusplus
}
#endif
#endif
