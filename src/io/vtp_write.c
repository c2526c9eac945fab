/* VTK XML PolyData writer (.vtp; VTK's "VTK File Formats" document):
 * Points, point Normals (and, for the pieces of a distributed mesh, point
 * GlobalIds, Int64 as VTK's id type) and Polys (connectivity, offsets), the data
 * appended raw after the XML (header_type UInt64) or, on request, inline
 * as base64 so the file is plain text. */
#include <stdio.h>
#include <string.h>

#include "io/io.h"

/* Raw bytes, or a base64 stream whose padding comes only at its end. */
typedef struct sink {
    pmi_writer *w;
    int b64;
    unsigned char carry[3];
    int ncarry;
} sink;

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_quad(pmi_writer *w, const unsigned char *b, int n)
{
    char q[4];
    q[0] = b64_alphabet[b[0] >> 2];
    q[1] = b64_alphabet[((b[0] & 3) << 4) | (n > 1 ? b[1] >> 4 : 0)];
    q[2] = n > 1 ? b64_alphabet[((b[1] & 15) << 2) | (n > 2 ? b[2] >> 6 : 0)] : '=';
    q[3] = n > 2 ? b64_alphabet[b[2] & 63] : '=';
    pmi_writer_put(w, q, 4);
}

static void sink_put(sink *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (!s->b64) {
        pmi_writer_put(s->w, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        s->carry[s->ncarry++] = p[i];
        if (s->ncarry == 3) {
            b64_quad(s->w, s->carry, 3);
            s->ncarry = 0;
        }
    }
}

static void sink_end(sink *s)
{
    if (s->b64 && s->ncarry) b64_quad(s->w, s->carry, s->ncarry);
    s->ncarry = 0;
}

enum { ARR_POINTS, ARR_NORMALS, ARR_CONN, ARR_OFFS, ARR_IDS };

/* One array's bytes: its UInt64 byte count, then the values. */
static void put_array(sink *s, const pm_mesh *m, const uint64_t *ids, int which, int isize)
{
    if (which == ARR_IDS) {
        uint64_t bytes = 8 * (uint64_t)m->num_vertices;
        sink_put(s, &bytes, 8);
        sink_put(s, ids, (size_t)bytes);
        return;
    }
    uint64_t n3 = 3 * (uint64_t)m->num_triangles;
    uint64_t count = which == ARR_POINTS || which == ARR_NORMALS ? 3 * (uint64_t)m->num_vertices
                     : which == ARR_CONN                         ? n3
                                                                 : m->num_triangles;
    uint64_t bytes = count * (which <= ARR_NORMALS ? 4 : (uint64_t)isize);
    sink_put(s, &bytes, 8);
    if (which == ARR_POINTS) {
        sink_put(s, m->positions, (size_t)bytes);
        return;
    }
    if (which == ARR_NORMALS) {
        sink_put(s, m->normals, (size_t)bytes);
        return;
    }
    unsigned char block[8 * 1024];
    for (uint64_t i = 0; i < count; i += 1024) {
        size_t k = count - i < 1024 ? (size_t)(count - i) : 1024;
        for (size_t j = 0; j < k; j++) {
            uint64_t t = i + j;
            int64_t v = which == ARR_CONN
                            ? (int64_t)pmi_mesh_index(m, (size_t)(t / 3), (int)(t % 3))
                            : (int64_t)(3 * (t + 1));
            if (isize == 4) {
                int32_t v32 = (int32_t)v;
                memcpy(block + 4 * j, &v32, 4);
            } else {
                memcpy(block + 8 * j, &v, 8);
            }
        }
        sink_put(s, block, k * (size_t)isize);
    }
}

pm_status pmi_vtp_write(const char *path, const pm_mesh *m, int base64)
{
    return pmi_vtp_write_ids(path, m, base64, NULL);
}

pm_status pmi_vtp_write_ids(const char *path, const pm_mesh *m, int base64, const uint64_t *ids)
{
    pm_status s = pmi_mesh_check(path, m, INT64_MAX);
    if (s != PM_STATUS_OK) return s;
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    /* 32-bit cell arrays when every value fits, as VTK itself writes them. */
    uint64_t n3 = 3 * (uint64_t)m->num_triangles;
    int isize = n3 <= INT32_MAX && m->num_vertices <= INT32_MAX ? 4 : 8;
    const char *itype = isize == 4 ? "Int32" : "Int64";
    const int has[5] = {1, m->normals != NULL, 1, 1, ids != NULL};
    uint64_t size[5] = {12 * (uint64_t)m->num_vertices, 12 * (uint64_t)m->num_vertices,
                        n3 * (uint64_t)isize, m->num_triangles * (uint64_t)isize,
                        8 * (uint64_t)m->num_vertices};
    uint64_t offset[5] = {0, 0, 0, 0, 0};
    for (int a = 1; a < 5; a++) offset[a] = offset[a - 1] + (has[a - 1] ? 8 + size[a - 1] : 0);
    char attr[5][64];
    for (int a = 0; a < 5; a++) {
        if (base64)
            snprintf(attr[a], sizeof attr[a], "format=\"binary\">");
        else
            snprintf(attr[a], sizeof attr[a], "format=\"appended\" offset=\"%llu\"/>",
                     (unsigned long long)offset[a]);
    }
    pmi_writer_printf(&w,
                      "<?xml version=\"1.0\"?>\n<VTKFile type=\"PolyData\" version=\"1.0\" "
                      "byte_order=\"%s\" header_type=\"UInt64\">\n  <PolyData>\n    <Piece "
                      "NumberOfPoints=\"%zu\" NumberOfVerts=\"0\" NumberOfLines=\"0\" "
                      "NumberOfStrips=\"0\" NumberOfPolys=\"%zu\">\n",
                      pmi_host_big_endian() ? "BigEndian" : "LittleEndian", m->num_vertices,
                      m->num_triangles);
    sink sk = {&w, base64, {0, 0, 0}, 0};
    static const char *names[5] = {"Points", "Normals", "connectivity", "offsets", "GlobalIds"};
    /* Point data (normals, ids) first, then points and polygons. */
    static const int order[5] = {ARR_NORMALS, ARR_IDS, ARR_POINTS, ARR_CONN, ARR_OFFS};
    int point_data_open = 0;
    for (int i = 0; i < 5; i++) {
        int a = order[i];
        if (!has[a]) continue;
        if ((a == ARR_NORMALS || a == ARR_IDS) && !point_data_open) {
            pmi_writer_printf(&w, "      <PointData%s%s>\n", has[ARR_NORMALS] ? " Normals=\"Normals\"" : "",
                              has[ARR_IDS] ? " GlobalIds=\"GlobalIds\"" : "");
            point_data_open = 1;
        }
        if (a == ARR_POINTS) {
            if (point_data_open) pmi_writer_printf(&w, "      </PointData>\n");
            pmi_writer_printf(&w, "      <Points>\n");
        }
        if (a == ARR_CONN) pmi_writer_printf(&w, "      <Polys>\n");
        const char *type = a <= ARR_NORMALS ? "Float32" : a == ARR_IDS ? "Int64" : itype;
        pmi_writer_printf(&w, "        <DataArray type=\"%s\" Name=\"%s\"%s %s", type, names[a],
                          a <= ARR_NORMALS ? " NumberOfComponents=\"3\"" : "", attr[a]);
        if (base64) {
            put_array(&sk, m, ids, a, isize);
            sink_end(&sk);
            pmi_writer_printf(&w, "</DataArray>");
        }
        pmi_writer_printf(&w, "\n");
        if (a == ARR_POINTS) pmi_writer_printf(&w, "      </Points>\n");
        if (a == ARR_OFFS) pmi_writer_printf(&w, "      </Polys>\n");
    }
    pmi_writer_printf(&w, "    </Piece>\n  </PolyData>\n");
    if (!base64) {
        pmi_writer_printf(&w, "  <AppendedData encoding=\"raw\">\n   _");
        for (int a = 0; a < 5; a++)
            if (has[a]) put_array(&sk, m, ids, a, isize);
        pmi_writer_printf(&w, "\n  </AppendedData>\n");
    }
    pmi_writer_printf(&w, "</VTKFile>\n");
    return pmi_writer_commit(&w);
}
