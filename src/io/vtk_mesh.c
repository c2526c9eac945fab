/* VTK legacy POLYDATA meshes (VTK's file-formats document): POLYGONS and
 * TRIANGLE_STRIPS, legacy and 5.x OFFSETS/CONNECTIVITY cell arrays,
 * POINT_DATA NORMALS, ASCII and BINARY (big-endian). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mesh_read.h"
#include "io/vtk_legacy.h"

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
    if (pmi_vtk_next_is(r, "OFFSETS")) {
        /* 5.x: a1 offsets, a2 connectivity entries, each array typed. */
        char *line, *t[3];
        size_t len;
        int eof, size[2];
        int64_t *offs = NULL;
        for (int arr = 0; arr < 2; arr++) {
            if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) break;
            const char *kw = arr ? "CONNECTIVITY" : "OFFSETS";
            if (eof || pmi_split(line, t, 3) != 2 || !pmi_streq(t[0], kw) ||
                !((size[arr] = pmi_streq(t[1], "vtktypeint32") ? 4 : pmi_vtk_type_size(t[1])) ==
                      4 ||
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
                if (s == PM_STATUS_OK) s = pmi_vtk_skip_metadata(f);
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
                if (s == PM_STATUS_OK) s = pmi_vtk_skip_metadata(f);
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
    return pmi_vtk_skip_metadata(f);
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
            if ((s = pmi_vtk_skip_field(f, w, *nw)) != PM_STATUS_OK) return s;
            continue;
        } else if (pmi_streq(k, "SCALARS")) {
            if (*nw < 3 || *nw > 4 || !(size = pmi_vtk_type_size(w[2])) ||
                (*nw == 4 && (!pmi_parse_u64(w[3], &nc) || nc < 1 || nc > 4)))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'SCALARS <name> <type> [1-4]'", r->path,
                                 (unsigned long long)r->line);
            if (pmi_vtk_next_is(r, "LOOKUP_TABLE") &&
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
            if (*nw != 3 || !((size = pmi_vtk_type_size(w[2])) == 4 || size == 8))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected '%s <name> float|double'", r->path,
                                 (unsigned long long)r->line, k);
            if (point_data && pmi_streq(k, "NORMALS") && !b->normals) {
                if ((s = check_fits(f, 3 * n, size, "NORMALS")) != PM_STATUS_OK) return s;
                if ((s = pmi_mb_grow(b, (void **)&b->normals, 0, b->vertex_cap, 3 * sizeof(float),
                                     "NORMALS")) != PM_STATUS_OK)
                    return s;
                if ((s = pmi_vtk_read_triples(f, (size_t)n, size, b->normals, "NORMALS",
                                              "normal")) != PM_STATUS_OK)
                    return s;
                if ((s = pmi_vtk_skip_metadata(f)) != PM_STATUS_OK) return s;
                continue;
            }
            count = n * (pmi_streq(k, "TENSORS") ? 9 : 3);
        } else if (pmi_streq(k, "TEXTURE_COORDINATES")) {
            if (*nw != 4 || !pmi_parse_u64(w[2], &nc) || nc < 1 || nc > 3 ||
                !(size = pmi_vtk_type_size(w[3])))
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
        if ((s = pmi_vtk_skip_values(f, count, size, k)) != PM_STATUS_OK) return s;
        if ((s = pmi_vtk_skip_metadata(f)) != PM_STATUS_OK) return s;
    }
}

pm_status pmi_vtk_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    vtk_file f;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    pm_status s = pmi_vtk_open(&f, path);
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
            s = pmi_vtk_skip_field(&f, w, nw);
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
                s = pmi_vtk_read_triples(&f, (size_t)n, size, b.positions, "POINTS data", "point");
            if (s == PM_STATUS_OK) s = pmi_vtk_skip_metadata(&f);
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
