/* Binary STL writer: 80-byte header, uint32 triangle count, then per
 * triangle the unit face normal, three corners (little-endian float32) and
 * a zero attribute word. STL has no shared vertices and no vertex normals. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"

static void put_f32le(unsigned char *p, float v)
{
    memcpy(p, &v, 4);
    if (pmi_host_big_endian()) pmi_swap_bytes(p, 1, 4);
}

pm_status pmi_stl_write(const char *path, const pm_mesh *m)
{
    pm_status s = pmi_mesh_check(path, m, UINT64_MAX - 1);
    if (s != PM_STATUS_OK) return s;
    if (m->num_triangles > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu triangles exceed binary STL's 32-bit count",
                         path, m->num_triangles);
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    unsigned char head[84];
    memset(head, 0, sizeof head);
    /* The header must not start with "solid", or readers take it for ASCII. */
    snprintf((char *)head, 80, "pyramesh %s binary STL", PM_VERSION_STRING);
    uint32_t count = (uint32_t)m->num_triangles;
    memcpy(head + 80, &count, 4);
    if (pmi_host_big_endian()) pmi_swap_bytes(head + 80, 1, 4);
    pmi_writer_put(&w, head, sizeof head);
    for (size_t t = 0; t < m->num_triangles; t++) {
        const float *v[3];
        for (int c = 0; c < 3; c++)
            v[c] = m->positions + 3 * pmi_mesh_index(m, t, c);
        /* Face normal in double so thin triangles keep a direction. */
        double e1[3], e2[3], n[3];
        for (int a = 0; a < 3; a++) {
            e1[a] = (double)v[1][a] - v[0][a];
            e2[a] = (double)v[2][a] - v[0][a];
        }
        n[0] = e1[1] * e2[2] - e1[2] * e2[1];
        n[1] = e1[2] * e2[0] - e1[0] * e2[2];
        n[2] = e1[0] * e2[1] - e1[1] * e2[0];
        double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        unsigned char *p = pmi_writer_reserve(&w, 50);
        if (!p) break;
        for (int a = 0; a < 3; a++)
            put_f32le(p + 4 * a, len > 0 && isfinite(len) ? (float)(n[a] / len) : 0.0f);
        for (int c = 0; c < 3; c++)
            for (int a = 0; a < 3; a++)
                put_f32le(p + 12 + 12 * c + 4 * a, v[c][a]);
        p[48] = p[49] = 0;
        pmi_writer_advance(&w, 50);
    }
    return pmi_writer_commit(&w);
}
