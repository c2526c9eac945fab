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

#include "io/mesh_read.h"

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

typedef struct vtk_file {
    pmi_reader r;
    int binary;
    char dataset[64];
} vtk_file;

static pm_status vtk_open(vtk_file *f, const char *path)
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
static int vtk_type_size(const char *t)
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
static int next_is(pmi_reader *r, const char *keyword)
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
static pm_status skip_values(vtk_file *f, uint64_t n, int size, const char *what)
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
static pm_status skip_metadata(vtk_file *f)
{
    if (!next_is(&f->r, "METADATA")) return PM_STATUS_OK;
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
static pm_status skip_field(vtk_file *f, char **w, int nw)
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
            if (!(size = vtk_type_size(a[3])) && !pmi_streq(a[3], "bit"))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: FIELD array '%s' has unsupported type '%s'",
                                 r->path, (unsigned long long)r->line, a[0], a[3]);
            s = skip_values(f, n, size, "FIELD array");
        }
        if (s != PM_STATUS_OK || (s = skip_metadata(f)) != PM_STATUS_OK) return s;
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

pm_status pmi_vtk_read_volume(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    vtk_file f;
    pm_status s = vtk_open(&f, path);
    pmi_reader *r = &f.r;
    char *line, *w[6];
    size_t len;
    int eof, nw, have_dims = 0;
    int64_t dims[3] = {0, 0, 0};
    double spacing[3] = {1, 1, 1}, origin[3] = {0, 0, 0};
    uint64_t npoints = 0;
    void *data = NULL;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_streq(f.dataset, "STRUCTURED_POINTS")) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: DATASET %s: expected STRUCTURED_POINTS for a volume", path, f.dataset);
        goto done;
    }
    for (;;) {
        if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) goto done;
        if (eof) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: end of file, expected POINT_DATA",
                          path, (unsigned long long)r->line);
            goto done;
        }
        /* A line of only "\r" or control blanks has no words. */
        if ((nw = pmi_split(line, w, 6)) == 0) continue;
        if (pmi_streq(w[0], "DIMENSIONS")) {
            for (int a = 0; a < 3; a++)
                if (nw != 4 || !pmi_parse_i64(w[a + 1], &dims[a]) || dims[a] < 2) {
                    s = pmi_error(
                        PM_STATUS_PARSE_ERROR,
                        "%s: line %llu: expected 'DIMENSIONS nx ny nz' with each at least "
                        "2 (marching cubes needs one cell)",
                        path, (unsigned long long)r->line);
                    goto done;
                }
            have_dims = 1;
        } else if (pmi_streq(w[0], "SPACING") || pmi_streq(w[0], "ASPECT_RATIO")) {
            if ((s = read_triple(r, w, nw, spacing, w[0])) != PM_STATUS_OK) goto done;
            for (int a = 0; a < 3; a++)
                if (!(spacing[a] > 0)) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: spacing must be positive, got %g", path,
                                  (unsigned long long)r->line, spacing[a]);
                    goto done;
                }
        } else if (pmi_streq(w[0], "ORIGIN")) {
            if ((s = read_triple(r, w, nw, origin, "ORIGIN")) != PM_STATUS_OK) goto done;
        } else if (pmi_streq(w[0], "FIELD")) {
            if ((s = skip_field(&f, w, nw)) != PM_STATUS_OK) goto done;
        } else if (pmi_streq(w[0], "POINT_DATA")) {
            if (nw != 2 || !pmi_parse_u64(w[1], &npoints)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected 'POINT_DATA <count>'",
                              path, (unsigned long long)r->line);
                goto done;
            }
            break;
        } else {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: line %llu: unexpected '%.40s', expected DIMENSIONS, SPACING, ORIGIN "
                          "or POINT_DATA",
                          path, (unsigned long long)r->line, w[0]);
            goto done;
        }
    }
    uint64_t product;
    if (!have_dims) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: POINT_DATA before DIMENSIONS", path,
                      (unsigned long long)r->line);
        goto done;
    }
    if (__builtin_mul_overflow((uint64_t)dims[0], (uint64_t)dims[1], &product) ||
        __builtin_mul_overflow(product, (uint64_t)dims[2], &product) || product != npoints) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: POINT_DATA %llu does not match DIMENSIONS %lld x %lld x %lld",
                      path, (unsigned long long)r->line, (unsigned long long)npoints,
                      (long long)dims[0], (long long)dims[1], (long long)dims[2]);
        goto done;
    }
    if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) goto done;
    nw = eof ? 0 : pmi_split(line, w, 6);
    if (nw < 3 || nw > 4 || !pmi_streq(w[0], "SCALARS")) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: expected 'SCALARS <name> <type> [1]' after POINT_DATA", path,
                      (unsigned long long)r->line);
        goto done;
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
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: unsupported scalar type '%.40s', expected unsigned_char, "
                      "unsigned_short, short, float or double",
                      path, (unsigned long long)r->line, w[2]);
        goto done;
    }
    if (nw == 4 && strcmp(w[3], "1") != 0) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: SCALARS with %.20s components, expected 1", path,
                      (unsigned long long)r->line, w[3]);
        goto done;
    }
    /* LOOKUP_TABLE is optional in practice; its line holds no data. */
    if (next_is(r, "LOOKUP_TABLE") &&
        (s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK)
        goto done;
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
static pm_status read_triples(vtk_file *f, size_t count, int size, float *dst, const char *what,
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
    pm_status s = vtk_open(&f, path);
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
            if ((s = skip_field(&f, w, nw)) != PM_STATUS_OK) goto done;
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
    s = read_triples(&f, count, size, xyz, "POINTS data", "point");
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

/* ------------------------------------------------------------------------ */
/* POLYDATA meshes                                                           */
/* ------------------------------------------------------------------------ */

/* One integer of a cell array: binary big-endian of `size` bytes, or an
 * ASCII token. */
static pm_status read_int(vtk_file *f, int size, int64_t *v, const char *what)
{
    pmi_reader *r = &f->r;
    if (f->binary) {
        unsigned char b[8];
        pm_status s = pmi_read_bytes(r, b, (size_t)size, what);
        if (s != PM_STATUS_OK) return s;
        if (!pmi_host_big_endian()) pmi_swap_bytes(b, 1, (size_t)size);
        if (size == 4) {
            int32_t x;
            memcpy(&x, b, 4);
            *v = x;
        } else {
            memcpy(v, b, 8);
        }
        return PM_STATUS_OK;
    }
    char tok[256];
    pm_status s = pmi_read_token(r, tok, sizeof tok, what);
    if (s != PM_STATUS_OK) return s;
    if (!pmi_parse_i64(tok, v))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: in %s: expected an integer, got '%.40s'", r->path,
                         (unsigned long long)r->line, what, tok);
    return PM_STATUS_OK;
}

/* Checks that n values of `size` bytes (binary) or n ASCII values can
 * still be in the file. */
static pm_status check_fits(vtk_file *f, uint64_t n, int size, const char *what)
{
    uint64_t need, rem = pmi_reader_remaining(&f->r);
    if (__builtin_mul_overflow(n, (uint64_t)(f->binary ? size : 2), &need) ||
        need > rem + !f->binary)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: %s: %llu values cannot fit in the %llu bytes left",
                         f->r.path, (unsigned long long)f->r.line, what, (unsigned long long)n,
                         (unsigned long long)rem);
    return PM_STATUS_OK;
}

/* kind: 0 VERTICES/LINES (read and dropped), 1 POLYGONS, 2 TRIANGLE_STRIPS. */
static pm_status read_cells(vtk_file *f, pmi_mesh_builder *b, char **w, int nw, int kind,
                            uint64_t *cell_base)
{
    pmi_reader *r = &f->r;
    /* w points into the reader's buffer, which the reads below reuse. */
    char what[32];
    snprintf(what, sizeof what, "%s", w[0]);
    uint64_t a1, a2;
    if (nw != 3 || !pmi_parse_u64(w[1], &a1) || !pmi_parse_u64(w[2], &a2))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: expected '%s <cells> <size>' with non-negative counts",
                         r->path, (unsigned long long)r->line, what);
    pm_status s;
    if (next_is(r, "OFFSETS")) {
        /* 5.x: a1 offsets, a2 connectivity entries, each array typed. */
        char *line, *t[3];
        size_t len;
        int eof, size[2];
        int64_t *offs = NULL;
        for (int arr = 0; arr < 2; arr++) {
            if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) break;
            const char *kw = arr ? "CONNECTIVITY" : "OFFSETS";
            if (eof || pmi_split(line, t, 3) != 2 || !pmi_streq(t[0], kw) ||
                !((size[arr] = pmi_streq(t[1], "vtktypeint32") ? 4 : vtk_type_size(t[1])) == 4 ||
                  size[arr] == 8)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: line %llu: expected '%s vtktypeint64' (or another 32/64-bit "
                              "integer type)",
                              r->path, (unsigned long long)r->line, kw);
                break;
            }
            uint64_t n = arr ? a2 : a1;
            if ((s = check_fits(f, n, size[arr], kw)) != PM_STATUS_OK) break;
            if (arr == 0) {
                if (a1 == 0) break;
                if ((s = pmi_mb_grow(b, (void **)&offs, 0, (size_t)a1, sizeof *offs, "OFFSETS")) !=
                    PM_STATUS_OK)
                    break;
                for (uint64_t i = 0; i < a1 && s == PM_STATUS_OK; i++)
                    s = read_int(f, size[0], &offs[i], "OFFSETS");
                if (s != PM_STATUS_OK) break;
                int64_t prev = 0;
                for (uint64_t i = 0; i < a1; i++) {
                    if (offs[i] < prev || (i == 0 && offs[0] != 0) || (uint64_t)offs[i] > a2) {
                        s = pmi_error(PM_STATUS_PARSE_ERROR,
                                      "%s: %s OFFSETS[%llu] = %lld: offsets must start at 0, "
                                      "not decrease and end at the connectivity size %llu",
                                      r->path, what, (unsigned long long)i, (long long)offs[i],
                                      (unsigned long long)a2);
                        break;
                    }
                    prev = offs[i];
                }
                if (s == PM_STATUS_OK && (uint64_t)offs[a1 - 1] != a2)
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: %s: the last offset is %lld, expected the connectivity "
                                  "size %llu",
                                  r->path, what, (long long)offs[a1 - 1], (unsigned long long)a2);
                if (s == PM_STATUS_OK) s = skip_metadata(f);
                if (s != PM_STATUS_OK) break;
            } else {
                uint64_t ncell = a1 ? a1 - 1 : 0;
                if (kind && a2 > 3 * ncell)
                    s = pmi_mb_reserve_triangles(b, b->num_triangles + (size_t)(a2 - 2 * ncell),
                                                 kw);
                for (uint64_t c = 0; c < ncell && s == PM_STATUS_OK; c++) {
                    pmi_mb_poly_begin(b, *cell_base + c, kind == 2);
                    for (int64_t i = offs[c]; i < offs[c + 1] && s == PM_STATUS_OK; i++) {
                        int64_t v;
                        if ((s = read_int(f, size[1], &v, kw)) != PM_STATUS_OK) break;
                        if (kind) s = pmi_mb_poly_corner(b, v < 0 ? UINT64_MAX : (uint64_t)v, what);
                    }
                }
                if (s == PM_STATUS_OK && a1 == 0 && a2 != 0)
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: %s: no offsets but %llu connectivity entries", r->path, what,
                                  (unsigned long long)a2);
                if (s == PM_STATUS_OK) s = skip_metadata(f);
                *cell_base += ncell;
            }
        }
        if (offs) {
            free(offs);
            b->used_bytes -= (size_t)a1 * sizeof *offs;
        }
        return s;
    }
    /* Legacy: a2 integers, each cell its count followed by its indices. */
    if ((s = check_fits(f, a2, 4, what)) != PM_STATUS_OK) return s;
    if (kind && a2 > 3 * a1 &&
        (s = pmi_mb_reserve_triangles(b, b->num_triangles + (size_t)(a2 - 3 * a1), what)) !=
            PM_STATUS_OK)
        return s;
    uint64_t used = 0;
    for (uint64_t c = 0; c < a1; c++) {
        int64_t k;
        if ((s = read_int(f, 4, &k, what)) != PM_STATUS_OK) return s;
        if (k < 0 || (uint64_t)k >= a2 - used)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: %s cell %llu (0-based): %lld points do not fit the declared "
                             "size %llu",
                             r->path, what, (unsigned long long)c, (long long)k,
                             (unsigned long long)a2);
        used += 1 + (uint64_t)k;
        pmi_mb_poly_begin(b, *cell_base + c, kind == 2);
        for (int64_t i = 0; i < k; i++) {
            int64_t v;
            if ((s = read_int(f, 4, &v, what)) != PM_STATUS_OK) return s;
            if (kind &&
                (s = pmi_mb_poly_corner(b, v < 0 ? UINT64_MAX : (uint64_t)v, what)) != PM_STATUS_OK)
                return s;
        }
    }
    if (used != a2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: the cells hold %llu integers, but the header declares %llu",
                         r->path, what, (unsigned long long)used, (unsigned long long)a2);
    *cell_base += a1;
    return skip_metadata(f);
}

/* The attributes after POINT_DATA n or CELL_DATA n, up to the next such
 * line (returned in *next_line / *next_nw, or *eof). Point normals are
 * kept; everything else is skipped by its declared size. */
static pm_status read_attributes(vtk_file *f, pmi_mesh_builder *b, int point_data, uint64_t n,
                                 char **w, int *nw, int *eof)
{
    pmi_reader *r = &f->r;
    for (;;) {
        char *line;
        size_t len;
        pm_status s = pmi_read_nonblank_line(r, &line, &len, eof);
        if (s != PM_STATUS_OK || *eof) return s;
        if ((*nw = pmi_split(line, w, 6)) == 0) continue; /* only "\r" or control blanks */
        /* w points into the reader's buffer, which the reads below reuse. */
        char k[32];
        snprintf(k, sizeof k, "%s", w[0]);
        if (pmi_streq(k, "POINT_DATA") || pmi_streq(k, "CELL_DATA")) return PM_STATUS_OK;
        uint64_t count = 0, nc = 1;
        int size = 4;
        if (pmi_streq(k, "FIELD")) {
            if ((s = skip_field(f, w, *nw)) != PM_STATUS_OK) return s;
            continue;
        } else if (pmi_streq(k, "SCALARS")) {
            if (*nw < 3 || *nw > 4 || !(size = vtk_type_size(w[2])) ||
                (*nw == 4 && (!pmi_parse_u64(w[3], &nc) || nc < 1 || nc > 4)))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'SCALARS <name> <type> [1-4]'", r->path,
                                 (unsigned long long)r->line);
            if (next_is(r, "LOOKUP_TABLE") &&
                (s = pmi_read_nonblank_line(r, &line, &len, eof)) != PM_STATUS_OK)
                return s;
            count = n * nc;
        } else if (pmi_streq(k, "COLOR_SCALARS")) {
            if (*nw != 3 || !pmi_parse_u64(w[2], &nc) || nc > 16)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'COLOR_SCALARS <name> <components>'",
                                 r->path, (unsigned long long)r->line);
            count = n * nc;
            size = 1;
        } else if (pmi_streq(k, "LOOKUP_TABLE")) {
            if (*nw != 3 || !pmi_parse_u64(w[2], &count) || count > ((uint64_t)1 << 40))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'LOOKUP_TABLE <name> <size>'", r->path,
                                 (unsigned long long)r->line);
            count *= 4;
            size = 1;
        } else if (pmi_streq(k, "VECTORS") || pmi_streq(k, "NORMALS") || pmi_streq(k, "TENSORS")) {
            if (*nw != 3 || !((size = vtk_type_size(w[2])) == 4 || size == 8))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected '%s <name> float|double'", r->path,
                                 (unsigned long long)r->line, k);
            if (point_data && pmi_streq(k, "NORMALS") && !b->normals) {
                if ((s = check_fits(f, 3 * n, size, "NORMALS")) != PM_STATUS_OK) return s;
                if ((s = pmi_mb_grow(b, (void **)&b->normals, 0, b->vertex_cap, 3 * sizeof(float),
                                     "NORMALS")) != PM_STATUS_OK)
                    return s;
                if ((s = read_triples(f, (size_t)n, size, b->normals, "NORMALS", "normal")) !=
                    PM_STATUS_OK)
                    return s;
                if ((s = skip_metadata(f)) != PM_STATUS_OK) return s;
                continue;
            }
            count = n * (pmi_streq(k, "TENSORS") ? 9 : 3);
        } else if (pmi_streq(k, "TEXTURE_COORDINATES")) {
            if (*nw != 4 || !pmi_parse_u64(w[2], &nc) || nc < 1 || nc > 3 ||
                !(size = vtk_type_size(w[3])))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'TEXTURE_COORDINATES <name> <dim> "
                                 "<type>'",
                                 r->path, (unsigned long long)r->line);
            count = n * nc;
        } else {
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: unexpected '%.40s' in %s, expected SCALARS, "
                             "NORMALS, VECTORS, ... or FIELD",
                             r->path, (unsigned long long)r->line, k,
                             point_data ? "POINT_DATA" : "CELL_DATA");
        }
        if ((s = check_fits(f, count, size, k)) != PM_STATUS_OK) return s;
        if ((s = skip_values(f, count, size, k)) != PM_STATUS_OK) return s;
        if ((s = skip_metadata(f)) != PM_STATUS_OK) return s;
    }
}

pm_status pmi_vtk_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    vtk_file f;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    pm_status s = vtk_open(&f, path);
    pmi_reader *r = &f.r;
    char *line, *w[6];
    size_t len;
    int eof = 0, nw = 0, have_points = 0, have_line = 0;
    uint64_t cell_base = 0;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_streq(f.dataset, "POLYDATA")) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: DATASET %s: expected POLYDATA for a mesh", path,
                      f.dataset);
        goto done;
    }
    for (;;) {
        if (!have_line) {
            if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) goto done;
            if (eof) break;
            if ((nw = pmi_split(line, w, 6)) == 0) continue; /* only "\r" or control blanks */
        }
        have_line = 0;
        const char *k = w[0];
        if (pmi_streq(k, "FIELD")) {
            s = skip_field(&f, w, nw);
        } else if (pmi_streq(k, "POINTS")) {
            uint64_t n;
            int size = nw == 3 ? (pmi_streq(w[2], "float")    ? 4
                                  : pmi_streq(w[2], "double") ? 8
                                                              : 0)
                               : 0;
            if (have_points || nw != 3 || !pmi_parse_u64(w[1], &n) || !size) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: line %llu: expected one 'POINTS <count> float|double'", path,
                              (unsigned long long)r->line);
                goto done;
            }
            if (n > (uint64_t)UINT32_MAX + 1) {
                s = pmi_error(PM_STATUS_OVERFLOW,
                              "%s: POINTS: %llu points exceed the mesh's 32-bit indices", path,
                              (unsigned long long)n);
                goto done;
            }
            s = pmi_mb_vertices_exact(&b, n, f.binary ? 3 * (uint64_t)size : 6,
                                      pmi_reader_remaining(r) + !f.binary, 0, "POINTS");
            if (s == PM_STATUS_OK)
                s = read_triples(&f, (size_t)n, size, b.positions, "POINTS data", "point");
            if (s == PM_STATUS_OK) s = skip_metadata(&f);
            have_points = 1;
        } else if (pmi_streq(k, "VERTICES") || pmi_streq(k, "LINES") || pmi_streq(k, "POLYGONS") ||
                   pmi_streq(k, "TRIANGLE_STRIPS")) {
            if (!have_points) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: %s before POINTS", path,
                              (unsigned long long)r->line, k);
                goto done;
            }
            int kind = pmi_streq(k, "POLYGONS") ? 1 : pmi_streq(k, "TRIANGLE_STRIPS") ? 2 : 0;
            s = read_cells(&f, &b, w, nw, kind, &cell_base);
        } else if (pmi_streq(k, "POINT_DATA") || pmi_streq(k, "CELL_DATA")) {
            uint64_t n;
            int point_data = pmi_streq(k, "POINT_DATA");
            if (nw != 2 || !pmi_parse_u64(w[1], &n) ||
                n != (point_data ? (uint64_t)b.num_vertices : cell_base)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected '%s <count>'%s", path,
                              (unsigned long long)r->line, k,
                              point_data ? " equal to the number of POINTS"
                                         : " equal to the number of cells");
                goto done;
            }
            s = read_attributes(&f, &b, point_data, n, w, &nw, &eof);
            if (s != PM_STATUS_OK || eof) break;
            have_line = 1;
        } else {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: line %llu: unexpected '%.40s', expected POINTS, POLYGONS, "
                          "TRIANGLE_STRIPS, VERTICES, LINES, POINT_DATA or CELL_DATA",
                          path, (unsigned long long)r->line, k);
        }
        if (s != PM_STATUS_OK) goto done;
    }
    if (s == PM_STATUS_OK && !have_points)
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: end of file, expected POINTS", path);
    if (s == PM_STATUS_OK) s = pmi_mb_finish(&b, out);
done:
    pmi_mb_free(&b);
    pmi_reader_close(r);
    return s;
}
