/* The CPU runners of mesh post-processing (src/core/postprocess.c calls
 * them): the runner of the data-parallel steps of core/post_rules.h and
 * the vertex normals of the sequential runners (smooth.c); adjacency
 * (mesh_adjacency.c); the sequential runners, on host copies of the mesh:
 * the barnacle decimation (mesh_cleanup.c, also the data-parallel
 * marching-cubes cleanup), components (components.c), meshoptimizer decimation
 * (decimate.c), the checks (mesh_check.c), quads (quads.c); the SPH
 * interpolator's particle grid (sph_interp.c). Every runner is
 * deterministic: the same bytes for any thread count. Internal header. */
#ifndef PM_CPU_POST_CPU_H
#define PM_CPU_POST_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"

/* A mesh in host memory whose arrays the runner may replace: each array is
 * malloc'ed (or pmi_alloc_huge) and owned. A runner that fails leaves it
 * as it was. */
typedef struct pmi_hmesh {
    size_t nv, nt;
    float *pos;    /* 3 nv */
    float *nrm;    /* 3 nv or NULL */
    uint32_t *tri; /* 3 nt */
} pmi_hmesh;

/* Compressed rows: row v is list[off[v] .. off[v+1]). */
typedef struct pmi_adj {
    size_t n;
    uint32_t *off; /* n + 1 */
    uint32_t *list;
} pmi_adj;
void pmi_adj_free(pmi_adj *a);
/* The triangles of every vertex, ascending. */
pm_status pmi_vertex_triangles(int threads, const uint32_t *tri, size_t nt, size_t nv,
                               pmi_adj *out);
/* The neighbours of every vertex (vertices sharing a triangle), ascending,
 * each once; vt from pmi_vertex_triangles. */
pm_status pmi_vertex_neighbours(int threads, const uint32_t *tri, const pmi_adj *vt, pmi_adj *out);

/* smooth.c: step `step` of core/post_rules.h over elements 0 .. n-1 (host
 * memory); area-weighted vertex normals (allocated when m->nrm is NULL). */
struct pmi_post_args;
pm_status pmi_cpu_post_step(int threads, int step, size_t n, const struct pmi_post_args *args);
pm_status pmi_cpu_vertex_normals(int threads, pmi_hmesh *m);

/* mesh_cleanup.c. The marching-cubes cleanup, data-parallel (the rule and
 * its steps in core/cleanup_rules.h; src/cuda/mesh_cleanup.cu runs the same
 * steps on device memory): options checked; m's arrays replaced (normals
 * follow their vertices, the caller recomputes them); m unchanged on
 * failure. The barnacle decimation is sequential (each collapse depends on
 * the previous). */
pm_status pmi_cpu_mc_cleanup(int threads, pmi_hmesh *m, const pm_mc_cleanup_options *o);
/* The backend table's entry (core/backend.h mc_cleanup): a host mesh. */
pm_status pmi_cpu_mc_cleanup_entry(pm_context *ctx, pmi_hmesh *m, const pm_mc_cleanup_options *o);
/* The error for the first invalid triangle found by pmi_clean_check (key),
 * c its three vertices. */
pm_status pmi_clean_invalid(const uint32_t c[3], unsigned long long key, const char *fn);
/* lattice: origin and spacing of the marching-cubes lattice (the
 * table-independent rule), or NULL for splashsurf's valence rule. */
pm_status pmi_cpu_decimate_barnacles(int threads, pmi_hmesh *m,
                                     const pm_mc_cleanup_options *lattice, int keep_vertices);

/* components.c */
pm_status pmi_cpu_remove_components(int threads, pmi_hmesh *m, size_t min_triangles,
                                    int keep_largest, size_t *removed);
/* Keeps the triangles with keep[t] != 0 (in order); drops the vertices no
 * kept triangle uses unless keep_vertices (order kept), normals follow;
 * vertex_map (optional, nv entries) gets each vertex's new index or
 * UINT32_MAX. */
pm_status pmi_cpu_keep_triangles(int threads, pmi_hmesh *m, const uint8_t *keep, int keep_vertices,
                                 uint32_t *vertex_map);

/* Splits every vertex where several triangle fans meet (fans joined only
 * through edges two triangles use in opposite directions): each fan past
 * the first gets a copy of the vertex, appended. Turns the pinches of a
 * closed surface (two sheets on one edge or one vertex) into a closed
 * manifold. Then the connected pieces that hold a split vertex and have
 * fewer than drop_below triangles (zero-volume slivers) are removed (0:
 * none). *split: the vertices added. */
pm_status pmi_cpu_split_fans(int threads, pmi_hmesh *m, size_t drop_below, size_t *split);

/* decimate.c */
int pmi_have_meshoptimizer(void);
pm_status pmi_cpu_simplify(int threads, pmi_hmesh *m, size_t target_triangles, double target_error,
                           double *result_error);

/* mesh_check.c */
pm_status pmi_cpu_mesh_check(int threads, const pmi_hmesh *m, unsigned what,
                             pm_mesh_check_report *report);

/* sph_interp.c: the interpolator's grid in host memory (ip zeroed; p
 * resolved; 0 < n < 2^32 - 1): ip->g and ip->own (malloc'ed). */
pm_status pmi_cpu_sph_build(int threads, const float *xyz, size_t n, const pm_field_params *p,
                            pm_sph_interpolator *ip);

/* quads.c */
pm_status pmi_cpu_to_quads(int threads, const pmi_hmesh *m, double ratio, double normal_deg,
                           double interior_deg, pm_quads *out);

#endif
