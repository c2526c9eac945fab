/* Internals shared by the mesh readers (ply.c, obj.c, stl.c, vtk.c): a
 * mesh builder whose every allocation is checked against the file size and
 * max_memory_bytes, streaming polygon fan triangulation with index checks,
 * and the per-format entry points that pm_mesh_read (mesh_read.c) picks. */
#ifndef PM_IO_MESH_READ_H
#define PM_IO_MESH_READ_H

#include "io/io.h"

typedef struct pmi_mesh_builder {
    const char *path;
    size_t max_memory_bytes; /* 0 = no limit */
    size_t used_bytes;       /* bytes of the arrays below, for the limit */
    float *positions, *normals;
    size_t num_vertices, vertex_cap;
    uint32_t *indices; /* NULL for a soup */
    size_t num_triangles, tri_cap;
    /* The polygon being fan-triangulated. */
    uint64_t face;     /* 0-based number of the file's face/cell, for messages */
    size_t poly_count; /* corners seen so far */
    uint32_t first, prev, prev2;
    int strip; /* the polygon is a triangle strip */
    int soup;  /* STL: no indices; set before finishing */
} pmi_mesh_builder;

void pmi_mb_init(pmi_mesh_builder *b, const char *path, size_t max_memory_bytes);
/* Frees everything the builder holds. */
void pmi_mb_free(pmi_mesh_builder *b);
/* Grows capacities (geometrically past the request) under the memory
 * limit; `where` names the file part for messages. */
pm_status pmi_mb_reserve_vertices(pmi_mesh_builder *b, size_t n, int with_normals,
                                  const char *where);
pm_status pmi_mb_reserve_triangles(pmi_mesh_builder *b, size_t n, const char *where);
/* Reallocates *p from old_n to new_n elements of `elem` bytes, counting
 * the bytes against the builder's memory limit (for side arrays). */
pm_status pmi_mb_grow(pmi_mesh_builder *b, void **p, size_t old_n, size_t new_n, size_t elem,
                      const char *where);
/* Allocates exactly n vertices after checking n * min_file_bytes_each
 * against the `available` file bytes (a header's count must be backed by
 * data before memory is taken). */
pm_status pmi_mb_vertices_exact(pmi_mesh_builder *b, uint64_t n, uint64_t min_file_bytes_each,
                                uint64_t available, int with_normals, const char *where);
/* Appends one vertex (grows); normal may be NULL when there are none. */
pm_status pmi_mb_add_vertex(pmi_mesh_builder *b, const float p[3], const float *normal);
/* Appends a soup triangle's three corners (STL). */
pm_status pmi_mb_add_soup_triangle(pmi_mesh_builder *b, const float v[9]);
/* Streaming polygon: begin, one call per corner index (0-based, checked
 * against num_vertices: out of range is a PARSE_ERROR naming the face and
 * `where`), end. Polygons are fan-triangulated (v0, vi, vi+1); strips give
 * (vi, vi+1, vi+2) with every odd triangle's first two swapped so all keep
 * the strip's orientation. Polygons of fewer than 3 corners add nothing. */
void pmi_mb_poly_begin(pmi_mesh_builder *b, uint64_t face, int strip);
pm_status pmi_mb_poly_corner(pmi_mesh_builder *b, uint64_t index, const char *where);
/* Checks every position is finite (PARSE_ERROR naming the vertex), trims
 * the arrays and moves them into *out (owned, host memory). */
pm_status pmi_mb_finish(pmi_mesh_builder *b, pm_mesh *out);

pm_status pmi_ply_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out);
pm_status pmi_obj_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out);
pm_status pmi_stl_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out);
pm_status pmi_vtk_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out);
pm_status pmi_vtp_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out);

#endif
