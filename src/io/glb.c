/* Binary glTF 2.0 writer (.glb; Khronos glTF 2.0 specification, "GLB File
 * Format"): one mesh of one triangle primitive with POSITION (and its
 * required min/max), NORMAL when the mesh has normals, and uint32 indices;
 * soups are written non-indexed. The JSON chunk is padded with spaces and
 * the binary chunk with zeros to 4-byte boundaries. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

static void put_u32(pmi_writer *w, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    pmi_writer_put(w, b, 4);
}

/* Little-endian copies of n 32-bit values (glTF's byte order). */
static void put_le32(pmi_writer *w, const void *v, size_t n)
{
    if (!pmi_host_big_endian()) {
        pmi_writer_put(w, v, 4 * n);
        return;
    }
    const unsigned char *p = v;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4] = {p[4 * i + 3], p[4 * i + 2], p[4 * i + 1], p[4 * i]};
        pmi_writer_put(w, b, 4);
    }
}

/* The JSON document; returns its length or 0 when it does not fit. */
static size_t make_json(char *j, size_t cap, const pm_mesh *m, const float lo[3], const float hi[3],
                        uint64_t pos_bytes, uint64_t nrm_bytes, uint64_t idx_bytes)
{
    size_t n = 0;
#define J(...)                                                                                     \
    do {                                                                                           \
        int k_ = snprintf(j + n, cap - n, __VA_ARGS__);                                            \
        if (k_ < 0 || (size_t)k_ >= cap - n) return 0;                                             \
        n += (size_t)k_;                                                                           \
    } while (0)
    J("{\"asset\":{\"version\":\"2.0\",\"generator\":\"pyramesh %s\"},\"scene\":0,"
      "\"scenes\":[{\"nodes\":[0]}],",
      PM_VERSION_STRING);
    if (m->num_triangles == 0) {
        /* Accessors may not be empty: an empty mesh is a node without one. */
        J("\"nodes\":[{}]}");
        return n;
    }
    J("\"nodes\":[{\"mesh\":0}],\"meshes\":[{\"primitives\":[{\"attributes\":{\"POSITION\":0");
    int acc = 1;
    if (m->normals) J(",\"NORMAL\":%d", acc++);
    J("}");
    if (m->indices) J(",\"indices\":%d", acc);
    J(",\"mode\":4}]}],\"buffers\":[{\"byteLength\":%llu}],\"bufferViews\":[",
      (unsigned long long)(pos_bytes + nrm_bytes + idx_bytes));
    J("{\"buffer\":0,\"byteOffset\":0,\"byteLength\":%llu,\"target\":34962}",
      (unsigned long long)pos_bytes);
    if (m->normals)
        J(",{\"buffer\":0,\"byteOffset\":%llu,\"byteLength\":%llu,\"target\":34962}",
          (unsigned long long)pos_bytes, (unsigned long long)nrm_bytes);
    if (m->indices)
        J(",{\"buffer\":0,\"byteOffset\":%llu,\"byteLength\":%llu,\"target\":34963}",
          (unsigned long long)(pos_bytes + nrm_bytes), (unsigned long long)idx_bytes);
    /* %.9g prints a float exactly, so min/max equal the stored values. */
    J("],\"accessors\":[{\"bufferView\":0,\"componentType\":5126,\"count\":%zu,\"type\":\"VEC3\","
      "\"min\":[%.9g,%.9g,%.9g],\"max\":[%.9g,%.9g,%.9g]}",
      m->num_vertices, (double)lo[0], (double)lo[1], (double)lo[2], (double)hi[0], (double)hi[1],
      (double)hi[2]);
    int view = 1;
    if (m->normals)
        J(",{\"bufferView\":%d,\"componentType\":5126,\"count\":%zu,\"type\":\"VEC3\"}", view++,
          m->num_vertices);
    if (m->indices)
        J(",{\"bufferView\":%d,\"componentType\":5125,\"count\":%zu,\"type\":\"SCALAR\"}", view,
          3 * m->num_triangles);
    J("]}");
#undef J
    return n;
}

pm_status pmi_glb_write(const char *path, const pm_mesh *m)
{
    pm_status s = pmi_mesh_check(path, m, UINT32_MAX);
    if (s != PM_STATUS_OK) return s;
    float lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    for (size_t i = 0; i < m->num_vertices; i++)
        for (int a = 0; a < 3; a++) {
            float v = m->positions[3 * i + (size_t)a];
            if (!isfinite(v))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "%s: vertex %zu has a non-finite coordinate; glTF needs finite "
                                 "positions",
                                 path, i);
            if (i == 0 || v < lo[a]) lo[a] = v;
            if (i == 0 || v > hi[a]) hi[a] = v;
        }
    int empty = m->num_triangles == 0;
    uint64_t pos = empty ? 0 : 12 * (uint64_t)m->num_vertices;
    uint64_t nrm = empty || !m->normals ? 0 : pos;
    uint64_t idx = empty || !m->indices ? 0 : 12 * (uint64_t)m->num_triangles;
    char *json = malloc(8192);
    if (!json) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    size_t jn = make_json(json, 8192, m, lo, hi, pos, nrm, idx);
    if (!jn) {
        free(json);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: internal: glTF JSON too long", path);
    }
    while (jn % 4)
        json[jn++] = ' ';
    uint64_t bin = pos + nrm + idx; /* multiples of 4 already */
    uint64_t total = 12 + 8 + (uint64_t)jn + (bin ? 8 + bin : 0);
    if (total > UINT32_MAX) {
        free(json);
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %llu bytes exceed the 4 GiB a .glb file can hold",
                         path, (unsigned long long)total);
    }
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) {
        free(json);
        return s;
    }
    pmi_writer_put(&w, "glTF", 4);
    put_u32(&w, 2);
    put_u32(&w, (uint32_t)total);
    put_u32(&w, (uint32_t)jn);
    put_u32(&w, 0x4E4F534Au); /* "JSON" */
    pmi_writer_put(&w, json, jn);
    free(json);
    if (bin) {
        put_u32(&w, (uint32_t)bin);
        put_u32(&w, 0x004E4942u); /* "BIN\0" */
        put_le32(&w, m->positions, 3 * m->num_vertices);
        if (nrm) put_le32(&w, m->normals, 3 * m->num_vertices);
        if (idx) put_le32(&w, m->indices, 3 * m->num_triangles);
    }
    return pmi_writer_commit(&w);
}
