/* VTK legacy format ("# vtk DataFile Version 2.0" to 5.1, as described in
 * VTK's file-formats document): POLYDATA mesh writer (binary big-endian),
 * STRUCTURED_POINTS volume reader, POINTS reader for POLYDATA,
 * UNSTRUCTURED_GRID and STRUCTURED_GRID, and POLYDATA mesh reader
 * (POLYGONS, TRIANGLE_STRIPS, legacy and 5.x OFFSETS/CONNECTIVITY cell
 * arrays, POINT_DATA NORMALS), ASCII and BINARY. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/vtk_legacy.h"

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

static void put_be(unsigned char *p, const void *v)
{
    memcpy(p, v, 4);
    if (!pmi_host_big_endian()) pmi_swap_bytes(p, 1, 4);
}

static void put_floats_be(pmi_writer *w, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        unsigned char *p = pmi_writer_reserve(w, 4 * k);
        if (!p) return;
        for (size_t j = 0; j < k; j++)
            put_be(p + 4 * j, &v[i + j]);
        pmi_writer_advance(w, 4 * k);
    }
}

pm_status pmi_vtk_write(const char *path, const pm_mesh *m)
{
    /* Version 3.0 cell arrays are 32-bit ints: "3 a b c" per triangle. */
    pm_status s = pmi_mesh_check(path, m, INT32_MAX);
    if (s != PM_STATUS_OK) return s;
    if (m->num_triangles > INT32_MAX / 4)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: %zu triangles exceed the VTK legacy format's 32-bit cell array", path,
                         m->num_triangles);
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    pmi_writer_printf(&w,
                      "# vtk DataFile Version 3.0\npyramesh %s mesh\nBINARY\nDATASET POLYDATA\n"
                      "POINTS %zu float\n",
                      PM_VERSION_STRING, m->num_vertices);
    put_floats_be(&w, m->positions, 3 * m->num_vertices);
    pmi_writer_printf(&w, "\nPOLYGONS %zu %zu\n", m->num_triangles, 4 * m->num_triangles);
    for (size_t t = 0; t < m->num_triangles; t++) {
        unsigned char *p = pmi_writer_reserve(&w, 16);
        if (!p) break;
        int32_t v[4] = {3, (int32_t)pmi_mesh_index(m, t, 0), (int32_t)pmi_mesh_index(m, t, 1),
                        (int32_t)pmi_mesh_index(m, t, 2)};
        for (int c = 0; c < 4; c++)
            put_be(p + 4 * c, &v[c]);
        pmi_writer_advance(&w, 16);
    }
    pmi_writer_printf(&w, "\n");
    if (m->normals) {
        pmi_writer_printf(&w, "POINT_DATA %zu\nNORMALS Normals float\n", m->num_vertices);
        put_floats_be(&w, m->normals, 3 * m->num_vertices);
        pmi_writer_printf(&w, "\n");
    }
    return pmi_writer_commit(&w);
}

/* ------------------------------------------------------------------------ */
/* Reader: header, FIELD blocks                                              */
/* ------------------------------------------------------------------------ */

pm_status pmi_vtk_open(vtk_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    pm_status s = pmi_reader_open(&f->r, path);
    if (s != PM_STATUS_OK) return s;
    pmi_reader *r = &f->r;
    char *line, *w[4];
    size_t len;
    int eof;
    if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
    if (eof) return pmi_error(PM_STATUS_PARSE_ERROR, "%s: empty file, expected a VTK header", path);
    if (!pmi_starts_with(line, "# vtk DataFile Version"))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line 1: expected '# vtk DataFile Version x.y', got '%.60s'", path,
                         line);
    if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s; /* title */
    if (!eof && (s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
    if (eof || pmi_split(line, w, 2) != 1 ||
        (!pmi_streq(w[0], "ASCII") && !pmi_streq(w[0], "BINARY")))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected ASCII or BINARY", path,
                         (unsigned long long)r->line);
    f->binary = pmi_streq(w[0], "BINARY");
    if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
    if (eof || pmi_split(line, w, 3) != 2 || !pmi_streq(w[0], "DATASET"))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected 'DATASET <type>'", path,
                         (unsigned long long)r->line);
    snprintf(f->dataset, sizeof f->dataset, "%s", w[1]);
    return PM_STATUS_OK;
}

/* Bytes per value of a VTK data type; 0 if unknown. The legacy writer
 * stores vtkIdType as 32-bit int. */
int pmi_vtk_type_size(const char *t)
{
    static const struct {
        const char *name;
        int size;
    } types[] = {
        {"unsigned_char", 1}, {"char", 1},          {"signed_char", 1}, {"unsigned_short", 2},
        {"short", 2},         {"unsigned_int", 4},  {"int", 4},         {"vtkidtype", 4},
        {"float", 4},         {"unsigned_long", 8}, {"long", 8},        {"vtktypeint64", 8},
        {"vtktypeuint64", 8}, {"double", 8}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (pmi_streq(t, types[i].name)) return types[i].size;
    return 0;
}

/* Whether the next non-blank text starts with keyword (nothing consumed). */
int pmi_vtk_next_is(pmi_reader *r, const char *keyword)
{
    size_t n = pmi_reader_peek(r, 4096);
    const char *p = (const char *)r->buf + r->pos, *end = p + n;
    while (p < end && (*p == ' ' || (*p >= '\t' && *p <= '\r')))
        p++;
    size_t k = strlen(keyword);
    if ((size_t)(end - p) < k) return 0;
    char tmp[32];
    memcpy(tmp, p, k);
    tmp[k] = '\0';
    return pmi_streq(tmp, keyword);
}

/* Skips n values of `size` bytes (binary) or n tokens (ASCII). */
pm_status pmi_vtk_skip_values(vtk_file *f, uint64_t n, int size, const char *what)
{
    if (f->binary) {
        uint64_t b;
        if (__builtin_mul_overflow(n, (uint64_t)size, &b))
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: %s: size overflows", f->r.path, what);
        return pmi_skip_bytes(&f->r, b, what);
    }
    char tok[256];
    for (uint64_t i = 0; i < n; i++) {
        pm_status s = pmi_read_token(&f->r, tok, sizeof tok, what);
        if (s != PM_STATUS_OK) return s;
    }
    return PM_STATUS_OK;
}

/* A 5.x METADATA block after an array: lines up to the next empty one. */
pm_status pmi_vtk_skip_metadata(vtk_file *f)
{
    if (!pmi_vtk_next_is(&f->r, "METADATA")) return PM_STATUS_OK;
    char *line;
    size_t len;
    int eof;
    pm_status s = pmi_read_nonblank_line(&f->r, &line, &len, &eof);
    while (s == PM_STATUS_OK && !eof) {
        if ((s = pmi_read_line(&f->r, &line, &len, &eof)) != PM_STATUS_OK || eof) break;
        char *w[1];
        if (pmi_split(line, w, 1) == 0) break;
    }
    return s;
}

/* "FIELD name n" followed by n arrays "name ncomp ntuples type" + data. */
pm_status pmi_vtk_skip_field(vtk_file *f, char **w, int nw)
{
    pmi_reader *r = &f->r;
    uint64_t narrays;
    if (nw != 3 || !pmi_parse_u64(w[2], &narrays))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: expected 'FIELD <name> <number of arrays>'", r->path,
                         (unsigned long long)r->line);
    for (uint64_t i = 0; i < narrays; i++) {
        char *line, *a[5];
        size_t len;
        int eof;
        pm_status s = pmi_read_nonblank_line(r, &line, &len, &eof);
        if (s != PM_STATUS_OK) return s;
        uint64_t nc, nt, n;
        int size;
        if (eof || pmi_split(line, a, 5) != 4 || !pmi_parse_u64(a[1], &nc) ||
            !pmi_parse_u64(a[2], &nt) || __builtin_mul_overflow(nc, nt, &n))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: expected '<array name> <components> <tuples> "
                             "<type>' for FIELD array %llu",
                             r->path, (unsigned long long)r->line, (unsigned long long)i);
        if (pmi_streq(a[3], "bit") && f->binary) {
            s = pmi_skip_bytes(r, (n + 7) / 8, "FIELD array");
        } else {
            if (!(size = pmi_vtk_type_size(a[3])) && !pmi_streq(a[3], "bit"))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: FIELD array '%s' has unsupported type '%s'",
                                 r->path, (unsigned long long)r->line, a[0], a[3]);
            s = pmi_vtk_skip_values(f, n, size, "FIELD array");
        }
        if (s != PM_STATUS_OK || (s = pmi_vtk_skip_metadata(f)) != PM_STATUS_OK) return s;
    }
    return PM_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* STRUCTURED_POINTS volumes                                                 */
/* ------------------------------------------------------------------------ */

static pm_status read_triple(pmi_reader *r, char **w, int nw, double v[3], const char *what)
{
    for (int a = 0; a < 3; a++)
        if (nw != 4 || !pmi_parse_double(w[a + 1], &v[a]) || !isfinite(v[a]))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: expected '%s' followed by 3 finite numbers", r->path,
                             (unsigned long long)r->line, what);
    return PM_STATUS_OK;
}

/* One ASCII sample of the volume's type into dst[i]. */
static int parse_sample(const char *tok, pm_sample_type t, void *dst, size_t i)
{
    int64_t v;
    switch (t) {
    case PM_SAMPLE_U8:
        if (!pmi_parse_i64(tok, &v) || v < 0 || v > 255) return 0;
        ((uint8_t *)dst)[i] = (uint8_t)v;
        return 1;
    case PM_SAMPLE_U16:
        if (!pmi_parse_i64(tok, &v) || v < 0 || v > 65535) return 0;
        ((uint16_t *)dst)[i] = (uint16_t)v;
        return 1;
    case PM_SAMPLE_I16:
        if (!pmi_parse_i64(tok, &v) || v < -32768 || v > 32767) return 0;
        ((int16_t *)dst)[i] = (int16_t)v;
        return 1;
    case PM_SAMPLE_F32: return pmi_parse_float(tok, (float *)dst + i);
    case PM_SAMPLE_F64: return pmi_parse_double(tok, (double *)dst + i);
    }
    return 0;
}

pm_status pmi_read_ascii_samples(pmi_reader *r, pm_sample_type t, void *dst, size_t n)
{
    char tok[256];
    for (size_t i = 0; i < n; i++) {
        pm_status s = pmi_read_token(r, tok, sizeof tok, "sample data");
        if (s != PM_STATUS_OK) return s;
        if (!parse_sample(tok, t, dst, i))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: sample %zu: expected a %s value, got '%.40s'", r->path,
                             (unsigned long long)r->line, i, pm_sample_type_string(t), tok);
    }
    return PM_STATUS_OK;
}

/* The lines of a STRUCTURED_POINTS dataset up to and including
 * "POINT_DATA n", checked against DIMENSIONS. */
static pm_status read_grid(vtk_file *f, int64_t dims[3], double spacing[3], double origin[3],
                           uint64_t *npoints_out)
{
    pmi_reader *r = &f->r;
    const char *path = r->path;
    char *line, *w[6];
    size_t len;
    int eof, nw, have_dims = 0;
    uint64_t npoints = 0;
    pm_status s;
    for (;;) {
        if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
        if (eof) {
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: end of file, expected POINT_DATA", path,
                             (unsigned long long)r->line);
        }
        /* A line of only "\r" or control blanks has no words. */
        if ((nw = pmi_split(line, w, 6)) == 0) continue;
        if (pmi_streq(w[0], "DIMENSIONS")) {
            for (int a = 0; a < 3; a++)
                if (nw != 4 || !pmi_parse_i64(w[a + 1], &dims[a]) || dims[a] < 2) {
                    return pmi_error(
                        PM_STATUS_PARSE_ERROR,
                        "%s: line %llu: expected 'DIMENSIONS nx ny nz' with each at least "
                        "2 (marching cubes needs one cell)",
                        path, (unsigned long long)r->line);
                }
            have_dims = 1;
        } else if (pmi_streq(w[0], "SPACING") || pmi_streq(w[0], "ASPECT_RATIO")) {
            if ((s = read_triple(r, w, nw, spacing, w[0])) != PM_STATUS_OK) return s;
            for (int a = 0; a < 3; a++)
                if (!(spacing[a] > 0)) {
                    return pmi_error(PM_STATUS_PARSE_ERROR,
                                     "%s: line %llu: spacing must be positive, got %g", path,
                                     (unsigned long long)r->line, spacing[a]);
                }
        } else if (pmi_streq(w[0], "ORIGIN")) {
            if ((s = read_triple(r, w, nw, origin, "ORIGIN")) != PM_STATUS_OK) return s;
        } else if (pmi_streq(w[0], "FIELD")) {
            if ((s = pmi_vtk_skip_field(f, w, nw)) != PM_STATUS_OK) return s;
        } else if (pmi_streq(w[0], "POINT_DATA")) {
            if (nw != 2 || !pmi_parse_u64(w[1], &npoints)) {
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'POINT_DATA <count>'", path,
                                 (unsigned long long)r->line);
            }
            break;
        } else {
            return pmi_error(
                PM_STATUS_PARSE_ERROR,
                "%s: line %llu: unexpected '%.40s', expected DIMENSIONS, SPACING, ORIGIN "
                "or POINT_DATA",
                path, (unsigned long long)r->line, w[0]);
        }
    }
    uint64_t product;
    if (!have_dims) {
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: POINT_DATA before DIMENSIONS", path,
                         (unsigned long long)r->line);
    }
    if (__builtin_mul_overflow((uint64_t)dims[0], (uint64_t)dims[1], &product) ||
        __builtin_mul_overflow(product, (uint64_t)dims[2], &product) || product != npoints) {
        return pmi_error(
            PM_STATUS_PARSE_ERROR,
            "%s: line %llu: POINT_DATA %llu does not match DIMENSIONS %lld x %lld x %lld", path,
            (unsigned long long)r->line, (unsigned long long)npoints, (long long)dims[0],
            (long long)dims[1], (long long)dims[2]);
    }
    *npoints_out = npoints;
    return PM_STATUS_OK;
}

/* "SCALARS <name> <type> [1]" and an optional LOOKUP_TABLE line. */
static pm_status read_scalars_line(vtk_file *f, pm_sample_type *type_out)
{
    pmi_reader *r = &f->r;
    const char *path = r->path;
    char *line, *w[6];
    size_t len;
    int eof, nw;
    pm_status s;
    if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
    nw = eof ? 0 : pmi_split(line, w, 6);
    if (nw < 3 || nw > 4 || !pmi_streq(w[0], "SCALARS")) {
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: expected 'SCALARS <name> <type> [1]' after POINT_DATA",
                         path, (unsigned long long)r->line);
    }
    pm_sample_type type;
    if (pmi_streq(w[2], "unsigned_char"))
        type = PM_SAMPLE_U8;
    else if (pmi_streq(w[2], "unsigned_short"))
        type = PM_SAMPLE_U16;
    else if (pmi_streq(w[2], "short"))
        type = PM_SAMPLE_I16;
    else if (pmi_streq(w[2], "float"))
        type = PM_SAMPLE_F32;
    else if (pmi_streq(w[2], "double"))
        type = PM_SAMPLE_F64;
    else {
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: unsupported scalar type '%.40s', expected unsigned_char, "
                         "unsigned_short, short, float or double",
                         path, (unsigned long long)r->line, w[2]);
    }
    if (nw == 4 && strcmp(w[3], "1") != 0) {
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: SCALARS with %.20s components, expected 1", path,
                         (unsigned long long)r->line, w[3]);
    }
    /* LOOKUP_TABLE is optional in practice; its line holds no data. */
    if (pmi_vtk_next_is(r, "LOOKUP_TABLE") &&
        (s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK)
        return s;
    *type_out = type;
    return PM_STATUS_OK;
}

pm_status pmi_vtk_read_volume(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    vtk_file f;
    pm_status s = pmi_vtk_open(&f, path);
    pmi_reader *r = &f.r;
    int64_t dims[3] = {0, 0, 0};
    double spacing[3] = {1, 1, 1}, origin[3] = {0, 0, 0};
    uint64_t npoints = 0;
    pm_sample_type type = PM_SAMPLE_F32;
    void *data = NULL;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_streq(f.dataset, "STRUCTURED_POINTS")) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: DATASET %s: expected STRUCTURED_POINTS for a volume", path, f.dataset);
        goto done;
    }
    if ((s = read_grid(&f, dims, spacing, origin, &npoints)) != PM_STATUS_OK) goto done;
    if ((s = read_scalars_line(&f, &type)) != PM_STATUS_OK) goto done;
    if (f.binary) {
        /* Binary data starts right after the newline of the header line. */
        size_t bytes;
        s = pmi_volume_alloc(path, "DIMENSIONS", (size_t)dims[0], (size_t)dims[1], (size_t)dims[2],
                             type, max_memory_bytes, pmi_reader_remaining(r), &data, &bytes);
        if (s == PM_STATUS_OK) s = pmi_read_bytes(r, data, bytes, "SCALARS data");
        if (s == PM_STATUS_OK && !pmi_host_big_endian())
            pmi_swap_bytes(data, npoints, pm_sample_size(type));
    } else {
        /* Each ASCII value needs a character and a separator. */
        uint64_t rem = pmi_reader_remaining(r);
        size_t bytes;
        if (npoints > rem / 2 + 1)
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: line %llu: %llu ASCII samples cannot fit in the %llu bytes left",
                          path, (unsigned long long)r->line, (unsigned long long)npoints,
                          (unsigned long long)rem);
        else
            s = pmi_volume_alloc(path, "DIMENSIONS", (size_t)dims[0], (size_t)dims[1],
                                 (size_t)dims[2], type, max_memory_bytes, UINT64_MAX, &data,
                                 &bytes);
        if (s == PM_STATUS_OK) s = pmi_read_ascii_samples(r, type, data, (size_t)npoints);
    }
    if (s != PM_STATUS_OK) goto done;
    out->data = data;
    data = NULL;
    out->type = type;
    out->nx = (size_t)dims[0];
    out->ny = (size_t)dims[1];
    out->nz = (size_t)dims[2];
    out->row_stride = out->nx;
    out->slice_stride = out->nx * out->ny;
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = spacing[a];
        out->origin[a] = origin[a];
    }
done:
    free(data);
    pmi_reader_close(r);
    return s;
}

/* count float or double (size 4 or 8) triples into dst as floats; `what`
 * names the block and `item` one triple in messages. */
pm_status pmi_vtk_read_triples(vtk_file *f, size_t count, int size, float *dst, const char *what,
                               const char *item)
{
    pmi_reader *r = &f->r;
    pm_status s = PM_STATUS_OK;
    if (f->binary && size == 4) {
        s = pmi_read_bytes(r, dst, count * 12, what);
        if (s == PM_STATUS_OK && !pmi_host_big_endian()) pmi_swap_bytes(dst, 3 * count, 4);
    } else if (f->binary) {
        double block[3 * 1024];
        for (size_t i = 0; i < count && s == PM_STATUS_OK; i += 1024) {
            size_t k = count - i < 1024 ? count - i : 1024;
            if ((s = pmi_read_bytes(r, block, 24 * k, what)) != PM_STATUS_OK) break;
            if (!pmi_host_big_endian()) pmi_swap_bytes(block, 3 * k, 8);
            for (size_t j = 0; j < 3 * k; j++)
                dst[3 * i + j] = (float)block[j];
        }
    } else {
        char tok[256];
        for (size_t i = 0; i < 3 * count && s == PM_STATUS_OK; i++) {
            if ((s = pmi_read_token(r, tok, sizeof tok, what)) != PM_STATUS_OK) break;
            double d;
            int ok = size == 4 ? pmi_parse_float(tok, &dst[i]) : pmi_parse_double(tok, &d);
            if (ok && size == 8) dst[i] = (float)d;
            if (!ok)
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: line %llu: %s %zu: expected a number for %c, got '%.40s'",
                              r->path, (unsigned long long)r->line, item, i / 3, "xyz"[i % 3], tok);
        }
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* POINTS of POLYDATA / UNSTRUCTURED_GRID / STRUCTURED_GRID                  */
/* ------------------------------------------------------------------------ */

pm_status pmi_vtk_read_points(const char *path, size_t max_memory_bytes, pm_points *out)
{
    vtk_file f;
    pm_status s = pmi_vtk_open(&f, path);
    pmi_reader *r = &f.r;
    char *line, *w[6];
    size_t len;
    int eof, nw;
    float *xyz = NULL;
    uint64_t n = 0;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_streq(f.dataset, "POLYDATA") && !pmi_streq(f.dataset, "UNSTRUCTURED_GRID") &&
        !pmi_streq(f.dataset, "STRUCTURED_GRID")) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: DATASET %s: expected POLYDATA or UNSTRUCTURED_GRID for points", path,
                      f.dataset);
        goto done;
    }
    for (;;) {
        if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) goto done;
        if (eof) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: end of file, expected POINTS",
                          path, (unsigned long long)r->line);
            goto done;
        }
        if ((nw = pmi_split(line, w, 6)) == 0) continue; /* only "\r" or control blanks */
        if (pmi_streq(w[0], "FIELD")) {
            if ((s = pmi_vtk_skip_field(&f, w, nw)) != PM_STATUS_OK) goto done;
        } else if (pmi_streq(w[0], "DIMENSIONS") && pmi_streq(f.dataset, "STRUCTURED_GRID")) {
            continue;
        } else if (pmi_streq(w[0], "POINTS")) {
            break;
        } else {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: line %llu: unexpected '%.40s', expected POINTS", path,
                          (unsigned long long)r->line, w[0]);
            goto done;
        }
    }
    if (nw != 3 || !pmi_parse_u64(w[1], &n)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: expected 'POINTS <count> float|double' with a "
                      "non-negative count",
                      path, (unsigned long long)r->line);
        goto done;
    }
    int size = pmi_streq(w[2], "float") ? 4 : pmi_streq(w[2], "double") ? 8 : 0;
    if (!size) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: unsupported POINTS type '%.40s', expected float or double",
                      path, (unsigned long long)r->line, w[2]);
        goto done;
    }
    s = pmi_points_alloc(path, "POINTS", n, f.binary ? 3 * (uint64_t)size : 6,
                         pmi_reader_remaining(r) + !f.binary, max_memory_bytes, &xyz);
    if (s != PM_STATUS_OK) goto done;
    size_t count = (size_t)n;
    s = pmi_vtk_read_triples(&f, count, size, xyz, "POINTS data", "point");
    if (s == PM_STATUS_OK) s = pmi_points_check_finite(path, xyz, count);
    if (s != PM_STATUS_OK) goto done;
    out->count = count;
    out->xyz = xyz;
    xyz = NULL;
done:
    free(xyz);
    pmi_reader_close(r);
    return s;
}
