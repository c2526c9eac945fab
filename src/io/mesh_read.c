/* Mesh reading: the builder the format readers share (checked growth under
 * the memory limit, streaming fan and strip triangulation) and the public
 * pm_mesh_read, which picks the reader from the extension. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/mesh_read.h"

void pmi_mb_init(pmi_mesh_builder *b, const char *path, size_t max_memory_bytes)
{
    memset(b, 0, sizeof *b);
    b->path = path;
    b->max_memory_bytes = max_memory_bytes;
}

void pmi_mb_free(pmi_mesh_builder *b)
{
    free(b->positions);
    free(b->normals);
    free(b->indices);
    b->positions = b->normals = NULL;
    b->indices = NULL;
    b->num_vertices = b->vertex_cap = b->num_triangles = b->tri_cap = b->used_bytes = 0;
}

/* Reallocates *p from old_n to new_n elements of `elem` bytes, keeping
 * used_bytes and the limit. */
pm_status pmi_mb_grow(pmi_mesh_builder *b, void **p, size_t old_n, size_t new_n, size_t elem,
                      const char *where)
{
    size_t old_b = old_n * elem, new_b;
    if (!pmi_mul_size(new_n, elem, &new_b))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %zu elements overflow size_t", b->path, where,
                         new_n);
    size_t total = b->used_bytes - old_b;
    if (!pmi_add_size(total, new_b, &total))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: mesh size overflows", b->path, where);
    if (b->max_memory_bytes && total > b->max_memory_bytes)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %s: the mesh needs %zu bytes, more than the limit of %zu bytes",
                         b->path, where, total, b->max_memory_bytes);
    void *q = realloc(*p, new_b ? new_b : 1);
    if (!q)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: %s: cannot allocate %zu bytes", b->path,
                         where, new_b);
    *p = q;
    b->used_bytes = total;
    return PM_STATUS_OK;
}

/* The capacity to grow to: 1.5x, at least `need`, at least 1024. */
static size_t next_cap(size_t cap, size_t need)
{
    size_t c = cap + cap / 2;
    if (c < cap) c = SIZE_MAX;
    if (c < need) c = need;
    return c < 1024 ? 1024 : c;
}

static pm_status set_vertex_cap(pmi_mesh_builder *b, size_t cap, int with_normals,
                                const char *where)
{
    pm_status s =
        pmi_mb_grow(b, (void **)&b->positions, b->vertex_cap, cap, 3 * sizeof(float), where);
    if (s == PM_STATUS_OK && (with_normals || b->normals))
        s = pmi_mb_grow(b, (void **)&b->normals, b->normals ? b->vertex_cap : 0, cap,
                        3 * sizeof(float), where);
    if (s == PM_STATUS_OK) b->vertex_cap = cap;
    return s;
}

pm_status pmi_mb_reserve_vertices(pmi_mesh_builder *b, size_t n, int with_normals,
                                  const char *where)
{
    if (n <= b->vertex_cap && (!with_normals || b->normals)) return PM_STATUS_OK;
    return set_vertex_cap(b, n > b->vertex_cap ? next_cap(b->vertex_cap, n) : b->vertex_cap,
                          with_normals, where);
}

pm_status pmi_mb_reserve_triangles(pmi_mesh_builder *b, size_t n, const char *where)
{
    if (n <= b->tri_cap) return PM_STATUS_OK;
    size_t cap = next_cap(b->tri_cap, n);
    pm_status s =
        pmi_mb_grow(b, (void **)&b->indices, b->tri_cap, cap, 3 * sizeof(uint32_t), where);
    if (s == PM_STATUS_OK) b->tri_cap = cap;
    return s;
}

pm_status pmi_mb_vertices_exact(pmi_mesh_builder *b, uint64_t n, uint64_t min_file_bytes_each,
                                uint64_t available, int with_normals, const char *where)
{
    uint64_t need;
    if (min_file_bytes_each &&
        (__builtin_mul_overflow(n, min_file_bytes_each, &need) || need > available))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: %llu vertices need at least %llu bytes each, but only %llu "
                         "bytes follow in the file",
                         b->path, where, (unsigned long long)n,
                         (unsigned long long)min_file_bytes_each, (unsigned long long)available);
    if (n > SIZE_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %llu vertices overflow size_t", b->path,
                         where, (unsigned long long)n);
    pm_status s = set_vertex_cap(b, (size_t)n, with_normals, where);
    if (s == PM_STATUS_OK) b->num_vertices = (size_t)n;
    return s;
}

pm_status pmi_mb_add_vertex(pmi_mesh_builder *b, const float p[3], const float *normal)
{
    if (b->num_vertices == b->vertex_cap) {
        pm_status s = set_vertex_cap(b, next_cap(b->vertex_cap, b->num_vertices + 1),
                                     normal != NULL, "vertices");
        if (s != PM_STATUS_OK) return s;
    } else if (normal && !b->normals) {
        pm_status s = set_vertex_cap(b, b->vertex_cap, 1, "vertex normals");
        if (s != PM_STATUS_OK) return s;
    }
    memcpy(b->positions + 3 * b->num_vertices, p, 3 * sizeof(float));
    if (b->normals) {
        static const float zero[3] = {0, 0, 0};
        memcpy(b->normals + 3 * b->num_vertices, normal ? normal : zero, 3 * sizeof(float));
    }
    b->num_vertices++;
    return PM_STATUS_OK;
}

pm_status pmi_mb_add_soup_triangle(pmi_mesh_builder *b, const float v[9])
{
    for (int c = 0; c < 3; c++) {
        pm_status s = pmi_mb_add_vertex(b, v + 3 * c, NULL);
        if (s != PM_STATUS_OK) return s;
    }
    b->num_triangles++;
    return PM_STATUS_OK;
}

void pmi_mb_poly_begin(pmi_mesh_builder *b, uint64_t face, int strip)
{
    b->face = face;
    b->poly_count = 0;
    b->strip = strip;
}

static pm_status add_triangle(pmi_mesh_builder *b, uint32_t x, uint32_t y, uint32_t z)
{
    if (b->num_triangles == b->tri_cap) {
        pm_status s = pmi_mb_reserve_triangles(b, b->num_triangles + 1, "faces");
        if (s != PM_STATUS_OK) return s;
    }
    uint32_t *t = b->indices + 3 * b->num_triangles++;
    t[0] = x;
    t[1] = y;
    t[2] = z;
    return PM_STATUS_OK;
}

pm_status pmi_mb_poly_corner(pmi_mesh_builder *b, uint64_t index, const char *where)
{
    if (index >= b->num_vertices)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s %llu (0-based): corner %zu refers to vertex %llu, but there are "
                         "only %zu vertices",
                         b->path, where, (unsigned long long)b->face, b->poly_count,
                         (unsigned long long)index, b->num_vertices);
    if (index > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: %s %llu (0-based): vertex index %llu does not fit the mesh's 32-bit "
                         "indices",
                         b->path, where, (unsigned long long)b->face, (unsigned long long)index);
    uint32_t v = (uint32_t)index;
    size_t k = b->poly_count++;
    pm_status s = PM_STATUS_OK;
    if (k == 0) {
        b->first = v;
    } else if (k >= 2) {
        if (!b->strip)
            s = add_triangle(b, b->first, b->prev, v);
        else if (k % 2 == 0)
            s = add_triangle(b, b->prev2, b->prev, v);
        else
            s = add_triangle(b, b->prev, b->prev2, v);
    }
    b->prev2 = b->prev;
    b->prev = v;
    return s;
}

pm_status pmi_mb_finish(pmi_mesh_builder *b, pm_mesh *out)
{
    for (size_t i = 0; i < b->num_vertices; i++)
        for (int a = 0; a < 3; a++)
            if (!isfinite(b->positions[3 * i + (size_t)a]))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: vertex %zu (0-based) has a non-finite coordinate %c = %g, "
                                 "expected finite numbers",
                                 b->path, i, "xyz"[a], (double)b -> positions[3 * i + (size_t)a]);
    /* Give back the slack of geometric growth (shrinking cannot fail in
     * practice; if it does, the larger block is kept). */
    if (b->vertex_cap > b->num_vertices) {
        size_t n = 3 * sizeof(float) * (b->num_vertices ? b->num_vertices : 1);
        float *p = realloc(b->positions, n);
        if (p) b->positions = p;
        if (b->normals && (p = realloc(b->normals, n))) b->normals = p;
    }
    if (b->indices && b->tri_cap > b->num_triangles) {
        uint32_t *p =
            realloc(b->indices, 3 * sizeof(uint32_t) * (b->num_triangles ? b->num_triangles : 1));
        if (p) b->indices = p;
    }
    /* An empty mesh still gets valid (freeable) arrays; an indexed mesh
     * without faces keeps an index array (NULL would mean a soup). */
    if (!b->positions && !(b->positions = malloc(3 * sizeof(float))))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", b->path);
    if (!b->soup && !b->indices && !(b->indices = malloc(3 * sizeof(uint32_t))))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", b->path);
    memset(out, 0, sizeof *out);
    out->num_vertices = b->num_vertices;
    out->num_triangles = b->num_triangles;
    out->positions = b->positions;
    out->normals = b->normals;
    out->indices = b->indices;
    out->owns_arrays = 1;
    b->positions = b->normals = NULL;
    b->indices = NULL;
    return PM_STATUS_OK;
}

pm_status pm_mesh_read(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    pmi_clear_error();
    if (!path || !out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_read: NULL argument");
    memset(out, 0, sizeof *out);
    const char *ext = pmi_extension(path);
    if (pmi_streq(ext, "ply")) return pmi_ply_read_mesh(path, max_memory_bytes, out);
    if (pmi_streq(ext, "obj")) return pmi_obj_read_mesh(path, max_memory_bytes, out);
    if (pmi_streq(ext, "stl")) return pmi_stl_read_mesh(path, max_memory_bytes, out);
    if (pmi_streq(ext, "vtk")) return pmi_vtk_read_mesh(path, max_memory_bytes, out);
    if (pmi_streq(ext, "vtp")) return pmi_vtp_read_mesh(path, max_memory_bytes, out);
    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                     "%s: unknown mesh extension '.%s', expected .ply, .obj, .stl, .vtk or .vtp",
                     path, ext);
}
