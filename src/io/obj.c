/* Wavefront OBJ (the Wavefront Advanced Visualizer's geometry format):
 * writer ("v" positions, "vn" normals when the mesh has them,
 * "f a//a b//b c//c" faces with 1-based indices) and mesh reader. */
#include <stdlib.h>
#include <string.h>

#include "io/mesh_read.h"

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

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

/* A 1-based or negative (relative) OBJ index against `count` items so far:
 * the 0-based index, or -1 when it is 0 or out of range. */
static int64_t resolve(int64_t i, size_t count)
{
    if (i > 0 && (uint64_t)i <= count) return i - 1;
    if (i < 0 && (uint64_t)(-(i + 1)) < count) return (int64_t)count + i;
    return -1;
}

pm_status pmi_obj_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    pmi_reader r;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    float *vn = NULL;
    size_t num_vn = 0, vn_cap = 0;
    /* Normals become per-vertex only when every face corner names the
     * normal with the vertex's own index (the file is then vertex-normal
     * data, as our writer and most exporters of smooth meshes write). */
    int normals_match = 1;
    uint64_t face = 0;
    char *line, *w[4];
    size_t len;
    int eof;
    for (;;) {
        if ((s = pmi_read_line(&r, &line, &len, &eof)) != PM_STATUS_OK || eof) break;
        while (*line == ' ' || *line == '\t')
            line++;
        if (line[0] == 'v' && (line[1] == ' ' || line[1] == '\t' ||
                               (line[1] == 'n' && (line[2] == ' ' || line[2] == '\t')))) {
            const int is_n = line[1] == 'n';
            int n = pmi_split(line, w, 4);
            float p[3];
            for (int a = 0; a < 3; a++) {
                /* Further words (w, or r g b colours) stay in w[3]'s tail. */
                char *end = a + 1 < n ? w[a + 1] : NULL;
                if (end && a == 2) {
                    char *sp = end;
                    while (*sp && *sp != ' ' && *sp != '\t')
                        sp++;
                    *sp = '\0';
                }
                if (!end || !pmi_parse_float(end, &p[a])) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: expected '%s x y z' with 3 numbers", path,
                                  (unsigned long long)r.line, is_n ? "vn" : "v");
                    break;
                }
            }
            if (s != PM_STATUS_OK) break;
            if (!is_n) {
                s = pmi_mb_add_vertex(&b, p, NULL);
            } else {
                if (num_vn == vn_cap) {
                    size_t cap = vn_cap < 1024 ? 1024 : vn_cap + vn_cap / 2;
                    if ((s = pmi_mb_grow(&b, (void **)&vn, vn_cap, cap, 3 * sizeof(float), "vn")) !=
                        PM_STATUS_OK)
                        break;
                    vn_cap = cap;
                }
                memcpy(vn + 3 * num_vn++, p, sizeof p);
            }
            if (s != PM_STATUS_OK) break;
        } else if (line[0] == 'f' && (line[1] == ' ' || line[1] == '\t')) {
            pmi_mb_poly_begin(&b, face, 0);
            char *c = line + 2;
            for (;;) {
                while (*c == ' ' || *c == '\t')
                    c++;
                if (!*c) break;
                char *tok = c;
                while (*c && *c != ' ' && *c != '\t')
                    c++;
                if (*c) *c++ = '\0';
                /* v, v/vt, v//vn or v/vt/vn */
                char *parts[3] = {tok, NULL, NULL};
                char *slash = strchr(tok, '/');
                if (slash) {
                    *slash = '\0';
                    parts[1] = slash + 1;
                    if ((slash = strchr(parts[1], '/'))) {
                        *slash = '\0';
                        parts[2] = slash + 1;
                    }
                }
                int64_t iv, in = 0, rv, rn = -1;
                if (!pmi_parse_i64(parts[0], &iv) || (parts[2] && !pmi_parse_i64(parts[2], &in))) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: face %llu (0-based): expected 'v', 'v/vt', "
                                  "'v//vn' or 'v/vt/vn' with integer indices",
                                  path, (unsigned long long)r.line, (unsigned long long)face);
                    break;
                }
                if ((rv = resolve(iv, b.num_vertices)) < 0) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: face %llu (0-based): vertex index %lld is out "
                                  "of range (%zu vertices defined so far)",
                                  path, (unsigned long long)r.line, (unsigned long long)face,
                                  (long long)iv, b.num_vertices);
                    break;
                }
                if (parts[2] && (rn = resolve(in, num_vn)) < 0) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: face %llu (0-based): normal index %lld is out "
                                  "of range (%zu normals defined so far)",
                                  path, (unsigned long long)r.line, (unsigned long long)face,
                                  (long long)in, num_vn);
                    break;
                }
                if (rn != rv) normals_match = 0;
                if ((s = pmi_mb_poly_corner(&b, (uint64_t)rv, "face")) != PM_STATUS_OK) break;
            }
            if (s != PM_STATUS_OK) break;
            face++;
        }
        /* Everything else (vt, vp, l, p, o, g, s, usemtl, mtllib, comments)
         * does not change the triangles and is ignored. */
    }
    if (s == PM_STATUS_OK) {
        if (normals_match && num_vn == b.num_vertices && num_vn > 0) {
            b.normals = vn;
            vn = NULL;
        }
        s = pmi_mb_finish(&b, out);
    }
    free(vn);
    pmi_mb_free(&b);
    pmi_reader_close(&r);
    return s;
}
