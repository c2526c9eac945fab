/* pm_mesh_write_extras: meshes with quads (splashsurf's --generate-quads)
 * and named per-vertex attributes (normals, interpolated particle
 * attributes, smoothing weights). VTK legacy (binary big-endian POLYDATA,
 * POINT_DATA NORMALS / SCALARS / VECTORS) and PLY (extra float vertex
 * properties, faces of 3 or 4) hold everything; OBJ holds quads and
 * normals. Without quads and attributes the call is pm_mesh_write. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

static void put_be32(pmi_writer *w, const void *v)
{
    unsigned char *p = pmi_writer_reserve(w, 4);
    if (!p) return;
    memcpy(p, v, 4);
    if (!pmi_host_big_endian()) pmi_swap_bytes(p, 1, 4);
    pmi_writer_advance(w, 4);
}

static void put_floats_be(pmi_writer *w, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_be32(w, &v[i]);
}

static void put_cell_be(pmi_writer *w, int k, const uint32_t *idx)
{
    int32_t c = k;
    put_be32(w, &c);
    for (int j = 0; j < k; j++) {
        int32_t v = (int32_t)idx[j];
        put_be32(w, &v);
    }
}

static pm_status write_vtk(const char *path, const pm_mesh *m, const pm_mesh_extras *x)
{
    const size_t cells = m->num_triangles + x->num_quads;
    const size_t ints = 4 * m->num_triangles + 5 * x->num_quads;
    if (ints > INT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: %zu cells exceed the VTK legacy format's 32-bit cell array", path,
                         cells);
    pmi_writer w;
    pm_status s = pmi_writer_open(&w, path);
    if (s != PM_STATUS_OK) return s;
    pmi_writer_printf(&w,
                      "# vtk DataFile Version 3.0\npyramesh %s mesh\nBINARY\nDATASET POLYDATA\n"
                      "POINTS %zu float\n",
                      PM_VERSION_STRING, m->num_vertices);
    put_floats_be(&w, m->positions, 3 * m->num_vertices);
    pmi_writer_printf(&w, "\nPOLYGONS %zu %zu\n", cells, ints);
    for (size_t t = 0; t < m->num_triangles; t++)
        put_cell_be(&w, 3, m->indices + 3 * t);
    for (size_t q = 0; q < x->num_quads; q++)
        put_cell_be(&w, 4, x->quads + 4 * q);
    pmi_writer_printf(&w, "\n");
    if (m->normals || x->num_attributes) {
        pmi_writer_printf(&w, "POINT_DATA %zu\n", m->num_vertices);
        if (m->normals) {
            pmi_writer_printf(&w, "NORMALS normals float\n");
            put_floats_be(&w, m->normals, 3 * m->num_vertices);
            pmi_writer_printf(&w, "\n");
        }
        for (size_t a = 0; a < x->num_attributes; a++) {
            const pm_vertex_attribute *at = &x->attributes[a];
            if (at->components == 1)
                pmi_writer_printf(&w, "SCALARS %s float 1\nLOOKUP_TABLE default\n", at->name);
            else
                pmi_writer_printf(&w, "VECTORS %s float\n", at->name);
            put_floats_be(&w, at->values, (size_t)at->components * m->num_vertices);
            pmi_writer_printf(&w, "\n");
        }
    }
    return pmi_writer_commit(&w);
}

static void ply_float(pmi_writer *w, float v, int ascii, int last)
{
    if (ascii)
        pmi_writer_printf(w, "%.9g%c", (double)v, last ? '\n' : ' ');
    else
        pmi_writer_f32(w, v, 0);
}

static void ply_face(pmi_writer *w, int k, const uint32_t *idx, int ascii)
{
    if (ascii) {
        pmi_writer_printf(w, "%d", k);
        for (int j = 0; j < k; j++)
            pmi_writer_printf(w, " %u", idx[j]);
        pmi_writer_printf(w, "\n");
        return;
    }
    unsigned char c = (unsigned char)k;
    pmi_writer_put(w, &c, 1);
    for (int j = 0; j < k; j++)
        pmi_writer_i32(w, (int32_t)idx[j], 0);
}

static pm_status write_ply(const char *path, const pm_mesh *m, const pm_mesh_extras *x, int ascii)
{
    pmi_writer w;
    pm_status s = pmi_writer_open(&w, path);
    if (s != PM_STATUS_OK) return s;
    pmi_writer_printf(&w, "ply\nformat %s 1.0\ncomment pyramesh %s\nelement vertex %zu\n",
                      ascii ? "ascii" : "binary_little_endian", PM_VERSION_STRING, m->num_vertices);
    pmi_writer_printf(&w, "property float x\nproperty float y\nproperty float z\n");
    if (m->normals)
        pmi_writer_printf(&w, "property float nx\nproperty float ny\nproperty float nz\n");
    for (size_t a = 0; a < x->num_attributes; a++) {
        const pm_vertex_attribute *at = &x->attributes[a];
        if (at->components == 1)
            pmi_writer_printf(&w, "property float %s\n", at->name);
        else
            pmi_writer_printf(&w, "property float %s_x\nproperty float %s_y\nproperty float %s_z\n",
                              at->name, at->name, at->name);
    }
    pmi_writer_printf(&w, "element face %zu\nproperty list uchar uint vertex_indices\nend_header\n",
                      m->num_triangles + x->num_quads);
    for (size_t v = 0; v < m->num_vertices; v++) {
        int more = m->normals || x->num_attributes;
        for (int c = 0; c < 3; c++)
            ply_float(&w, m->positions[3 * v + c], ascii, !more && c == 2);
        if (m->normals) {
            more = x->num_attributes > 0;
            for (int c = 0; c < 3; c++)
                ply_float(&w, m->normals[3 * v + c], ascii, !more && c == 2);
        }
        for (size_t a = 0; a < x->num_attributes; a++) {
            const pm_vertex_attribute *at = &x->attributes[a];
            for (int c = 0; c < at->components; c++)
                ply_float(&w, at->values[(size_t)at->components * v + (size_t)c], ascii,
                          a + 1 == x->num_attributes && c + 1 == at->components);
        }
    }
    for (size_t t = 0; t < m->num_triangles; t++)
        ply_face(&w, 3, m->indices + 3 * t, ascii);
    for (size_t q = 0; q < x->num_quads; q++)
        ply_face(&w, 4, x->quads + 4 * q, ascii);
    return pmi_writer_commit(&w);
}

static void obj_face(pmi_writer *w, int k, const uint32_t *idx, int normals)
{
    pmi_writer_printf(w, "f");
    for (int j = 0; j < k; j++) {
        unsigned long long i = (unsigned long long)idx[j] + 1;
        if (normals)
            pmi_writer_printf(w, " %llu//%llu", i, i);
        else
            pmi_writer_printf(w, " %llu", i);
    }
    pmi_writer_printf(w, "\n");
}

static pm_status write_obj(const char *path, const pm_mesh *m, const pm_mesh_extras *x)
{
    pmi_writer w;
    pm_status s = pmi_writer_open(&w, path);
    if (s != PM_STATUS_OK) return s;
    pmi_writer_printf(&w, "# pyramesh %s\n", PM_VERSION_STRING);
    for (size_t v = 0; v < m->num_vertices; v++)
        pmi_writer_printf(&w, "v %.9g %.9g %.9g\n", (double)m->positions[3 * v],
                          (double)m->positions[3 * v + 1], (double)m->positions[3 * v + 2]);
    if (m->normals)
        for (size_t v = 0; v < m->num_vertices; v++)
            pmi_writer_printf(&w, "vn %.9g %.9g %.9g\n", (double)m->normals[3 * v],
                              (double)m->normals[3 * v + 1], (double)m->normals[3 * v + 2]);
    for (size_t t = 0; t < m->num_triangles; t++)
        obj_face(&w, 3, m->indices + 3 * t, m->normals != NULL);
    for (size_t q = 0; q < x->num_quads; q++)
        obj_face(&w, 4, x->quads + 4 * q, m->normals != NULL);
    return pmi_writer_commit(&w);
}

pm_status pm_mesh_write_extras(const char *path, const pm_mesh *mesh, const pm_mesh_extras *extras,
                               const pm_write_options *options)
{
    pmi_clear_error();
    if (!path || !mesh)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_write_extras: NULL argument");
    pm_mesh_extras x;
    memset(&x, 0, sizeof x);
    if (extras) {
        size_t n = extras->struct_size ? extras->struct_size : sizeof x;
        memcpy(&x, extras, n < sizeof x ? n : sizeof x);
    }
    if (!x.quads) x.num_quads = 0;
    if (!x.attributes) x.num_attributes = 0;
    if (x.num_quads == 0 && x.num_attributes == 0) return pm_mesh_write(path, mesh, options);
    pm_write_options o;
    memset(&o, 0, sizeof o);
    if (options) {
        size_t n = options->struct_size ? options->struct_size : sizeof o;
        memcpy(&o, options, n < sizeof o ? n : sizeof o);
    }
    if (!mesh->indices)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: quads and attributes need an indexed mesh", path);
    pm_status s = pmi_mesh_check(path, mesh, INT32_MAX);
    if (s != PM_STATUS_OK) return s;
    for (size_t q = 0; q < 4 * x.num_quads; q++)
        if (x.quads[q] >= mesh->num_vertices)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: quad %zu has a vertex index out of range (%u, %zu vertices)",
                             path, q / 4, x.quads[q], mesh->num_vertices);
    for (size_t a = 0; a < x.num_attributes; a++) {
        const pm_vertex_attribute *at = &x.attributes[a];
        int ok = at->name && at->name[0] && (at->components == 1 || at->components == 3) &&
                 (at->values || mesh->num_vertices == 0);
        for (const char *c = at->name; ok && *c; c++)
            ok = isalnum((unsigned char)*c) || *c == '_';
        if (!ok)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: attribute %zu ('%s'): needs a name of letters, digits and '_', "
                             "1 or 3 components and values",
                             path, a, at->name ? at->name : "(null)");
    }
    pm_mesh_format f = o.format;
    const char *ext = pmi_extension(path);
    if (f == PM_MESH_FORMAT_AUTO)
        f = pmi_streq(ext, "vtk")   ? PM_MESH_FORMAT_VTK
            : pmi_streq(ext, "ply") ? PM_MESH_FORMAT_PLY
            : pmi_streq(ext, "obj") ? PM_MESH_FORMAT_OBJ
                                    : PM_MESH_FORMAT_AUTO;
    switch (f) {
    case PM_MESH_FORMAT_VTK: return write_vtk(path, mesh, &x);
    case PM_MESH_FORMAT_PLY: return write_ply(path, mesh, &x, o.ascii);
    case PM_MESH_FORMAT_OBJ:
        if (x.num_attributes)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: OBJ holds no vertex attribute such as '%s': write .vtk or .ply",
                             path, x.attributes[0].name);
        return write_obj(path, mesh, &x);
    default:
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: quads and vertex attributes are written to .vtk, .ply or .obj "
                         "(attributes: .vtk or .ply only)",
                         path);
    }
}
