/* STL (3D Systems' stereolithography format). Binary writer: 80-byte
 * header, uint32 triangle count, then per triangle the unit face normal,
 * three corners (little-endian float32) and a zero attribute word. Reader:
 * binary and ASCII, as a soup. STL has no shared vertices and no vertex
 * normals; the facet normals are ignored (they are often wrong or zero). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mesh_read.h"

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

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

static pm_status read_binary(pmi_reader *r, pmi_mesh_builder *b, uint32_t count)
{
    /* The caller checked that exactly 84 + 50 * count bytes are there. */
    pm_status s = pmi_mb_vertices_exact(b, 3 * (uint64_t)count, 0, 0, 0, "triangle count");
    if (s != PM_STATUS_OK) return s;
    b->num_triangles = count;
    enum { BLOCK = 4096 };
    unsigned char *buf = malloc(50 * BLOCK);
    if (!buf) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
    const int swap = pmi_host_big_endian();
    for (size_t t = 0; t < count && s == PM_STATUS_OK; t += BLOCK) {
        size_t k = count - t < BLOCK ? count - t : BLOCK;
        if ((s = pmi_read_bytes(r, buf, 50 * k, "facets")) != PM_STATUS_OK) break;
        for (size_t j = 0; j < k; j++) {
            float *dst = b->positions + 9 * (t + j);
            memcpy(dst, buf + 50 * j + 12, 36);
            if (swap) pmi_swap_bytes(dst, 9, 4);
        }
    }
    free(buf);
    return s;
}

static pm_status read_ascii(pmi_reader *r, pmi_mesh_builder *b)
{
    /* solid [name] { facet normal n n n  outer loop  vertex x y z (3+)
     * endloop  endfacet } endsolid [name], possibly several solids. A loop
     * of more than three vertices is fan-triangulated. */
    char *line, *w[5];
    size_t len;
    int eof, in_loop = 0, in_solid = 0;
    size_t loop_n = 0;
    float first[3], prev[3];
    uint64_t facet = 0;
    for (;;) {
        pm_status s = pmi_read_nonblank_line(r, &line, &len, &eof);
        if (s != PM_STATUS_OK) return s;
        if (eof) break;
        int n = pmi_split(line, w, 5);
        if (n == 0) continue; /* only "\r" or control blanks */
        if (pmi_streq(w[0], "vertex")) {
            float p[3];
            if (!in_loop || n != 4 || !pmi_parse_float(w[1], &p[0]) ||
                !pmi_parse_float(w[2], &p[1]) || !pmi_parse_float(w[3], &p[2]))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: facet %llu (0-based): expected 'vertex x y z' "
                                 "inside 'outer loop'",
                                 r->path, (unsigned long long)r->line, (unsigned long long)facet);
            if (loop_n >= 2) {
                float t[9];
                memcpy(t, first, sizeof first);
                memcpy(t + 3, prev, sizeof prev);
                memcpy(t + 6, p, sizeof p);
                if ((s = pmi_mb_add_soup_triangle(b, t)) != PM_STATUS_OK) return s;
            }
            if (loop_n == 0) memcpy(first, p, sizeof p);
            memcpy(prev, p, sizeof p);
            loop_n++;
        } else if (pmi_streq(w[0], "facet") && in_solid && !in_loop) {
            continue;
        } else if (pmi_streq(w[0], "outer") && in_solid && !in_loop) {
            in_loop = 1;
            loop_n = 0;
        } else if (pmi_streq(w[0], "endloop") && in_loop) {
            if (loop_n < 3)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: facet %llu (0-based) has %zu vertices, expected "
                                 "at least 3",
                                 r->path, (unsigned long long)r->line, (unsigned long long)facet,
                                 loop_n);
            in_loop = 0;
        } else if (pmi_streq(w[0], "endfacet") && in_solid && !in_loop) {
            facet++;
        } else if (pmi_streq(w[0], "solid") && !in_solid) {
            in_solid = 1;
        } else if (pmi_streq(w[0], "endsolid") && in_solid && !in_loop) {
            in_solid = 0;
        } else {
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: unexpected '%.40s' in ASCII STL (facet %llu)", r->path,
                             (unsigned long long)r->line, w[0], (unsigned long long)facet);
        }
    }
    if (in_solid || in_loop)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: end of file inside %s, expected '%s'", r->path,
                         (unsigned long long)r->line, in_loop ? "a facet" : "a solid",
                         in_loop ? "endloop" : "endsolid");
    return PM_STATUS_OK;
}

pm_status pmi_stl_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    pmi_reader r;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    b.soup = 1;
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    /* Binary when the size matches the header's count exactly (binary
     * files may start with "solid" too); otherwise ASCII when the file
     * starts with "solid"; otherwise a binary file of the wrong size. */
    size_t n = pmi_reader_peek(&r, 84);
    const unsigned char *h = r.buf + r.pos;
    uint32_t count = 0;
    int binary = 0;
    if (n >= 84) {
        memcpy(&count, h + 80, 4);
        if (pmi_host_big_endian()) pmi_swap_bytes(&count, 1, 4);
        binary = r.size == 84 + 50 * (uint64_t)count;
    }
    int ascii = !binary && n >= 5 && pmi_starts_with((const char *)h, "solid") &&
                (n == 5 || h[5] == ' ' || h[5] == '\t' || h[5] == '\r' || h[5] == '\n');
    if (binary) {
        if ((s = pmi_skip_bytes(&r, 84, "header")) == PM_STATUS_OK) s = read_binary(&r, &b, count);
    } else if (ascii) {
        s = read_ascii(&r, &b);
    } else if (n < 84) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: %llu bytes: too short for a binary STL (84-byte header) and does not "
                      "start with 'solid'",
                      path, (unsigned long long)r.size);
    } else {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: binary STL header says %u triangles (%llu bytes), but the file has "
                      "%llu bytes",
                      path, count, (unsigned long long)(84 + 50 * (uint64_t)count),
                      (unsigned long long)r.size);
    }
    if (s == PM_STATUS_OK) s = pmi_mb_finish(&b, out);
    pmi_mb_free(&b);
    pmi_reader_close(&r);
    return s;
}
