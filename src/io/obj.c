/* Wavefront OBJ writer: "v" positions, "vn" normals when the mesh has them,
 * "f a//a b//b c//c" faces with 1-based indices. */
#include "io/io.h"

pm_status pmi_obj_write(const char *path, const pm_mesh *m)
{
    pm_status s = pmi_mesh_check(path, m, UINT64_MAX - 1);
    if (s != PM_STATUS_OK) return s;
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    pmi_writer_printf(&w, "# pyramesh %s: %zu vertices, %zu triangles\n", PM_VERSION_STRING,
                      m->num_vertices, m->num_triangles);
    /* %.9g round-trips every float exactly. */
    for (size_t i = 0; i < m->num_vertices && w.status == PM_STATUS_OK; i++) {
        const float *p = m->positions + 3 * i;
        pmi_writer_printf(&w, "v %.9g %.9g %.9g\n", p[0], p[1], p[2]);
    }
    if (m->normals)
        for (size_t i = 0; i < m->num_vertices && w.status == PM_STATUS_OK; i++) {
            const float *n = m->normals + 3 * i;
            pmi_writer_printf(&w, "vn %.9g %.9g %.9g\n", n[0], n[1], n[2]);
        }
    for (size_t t = 0; t < m->num_triangles && w.status == PM_STATUS_OK; t++) {
        unsigned long long a = pmi_mesh_index(m, t, 0) + 1, b = pmi_mesh_index(m, t, 1) + 1,
                           c = pmi_mesh_index(m, t, 2) + 1;
        if (m->normals)
            pmi_writer_printf(&w, "f %llu//%llu %llu//%llu %llu//%llu\n", a, a, b, b, c, c);
        else
            pmi_writer_printf(&w, "f %llu %llu %llu\n", a, b, c);
    }
    return pmi_writer_commit(&w);
}
