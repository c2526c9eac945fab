/* The streamed CPU marching cubes (isosurface_stream.c): a volume read
 * slab by slab, each slab walked by the slab walk of isosurface_slab.c and
 * appended to one output mesh. Internal header. */
#ifndef PM_CPU_ISOSURFACE_STREAM_H
#define PM_CPU_ISOSURFACE_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"

/* The output of a streamed extraction: the indexed mesh so far. Either
 * host arrays that grow (grow = 1; capacities in vertex_limit /
 * tri_limit) or the caller's buffers (grow = 0; limits are their
 * capacities, what lies beyond is counted and not written). */
typedef struct pmi_mc_append {
    int grow;
    int want_normals;
    float *positions, *normals; /* normals NULL when not wanted */
    uint32_t *indices;          /* NULL when not wanted (caller buffers) */
    uint64_t vertex_limit, tri_limit;
    uint64_t nv, nt, nact; /* totals so far */
    uint64_t staging_peak_bytes; /* the largest slab output held before its copy */
} pmi_mc_append;

/* Makes room for nv vertices and nt triangles (grow: realloc; otherwise
 * nothing to do). PM_STATUS_OUT_OF_MEMORY names the sizes. */
pm_status pmi_mc_append_reserve(pmi_mc_append *A, uint64_t nv, uint64_t nt);

/* One step of the streamed extraction (isosurface_slab.c): the vertices
 * of lattice slices [k0, k1) and the triangles of cell slices [k0, k1)
 * (those below nz - 1), numbered after what `out` holds, appended to it.
 * vol describes the whole volume (its nz is the whole volume's); its data
 * pointer is where slice 0 would be, and only slices k0 - 1 .. k1 + 1
 * (those inside the volume; k0 - 1 only with normals) are read. walk_ms and
 * copy_ms are increased by the time of the walk and of the copy. */
pm_status pmi_mc_slab_append(pm_context *ctx, const pm_volume *vol, double iso,
                             const pm_isosurface_options *opt, int avx2, size_t k0, size_t k1,
                             pmi_mc_append *out, double *walk_ms, double *copy_ms);

#endif
