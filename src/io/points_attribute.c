/* pm_points_read_attribute: a named per-point array of a particle file,
 * for splashsurf's -a/--interpolate_attribute. VTK legacy (POINT_DATA
 * SCALARS, VECTORS, NORMALS and FIELD arrays; ASCII or BINARY, any numeric
 * type; the blocks before it skipped with vtk.c's helpers) and VTK XML
 * (.vtu/.vtp PointData DataArrays, decoded by vtk_xml.c). Other formats
 * are PM_STATUS_UNSUPPORTED. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/vtk_legacy.h"
#include "io/vtk_xml.h"

/* n values of VTK type `type` into dst as floats. */
static pm_status read_values(vtk_file *f, uint64_t n, const char *type, float *dst,
                             const char *what)
{
    pmi_reader *r = &f->r;
    const int size = pmi_vtk_type_size(type);
    if (!size)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: %s has unsupported type '%s'",
                         r->path, (unsigned long long)r->line, what, type);
    const int is_float = pmi_streq(type, "float") || pmi_streq(type, "double");
    const int is_unsigned = pmi_starts_with(type, "unsigned") || pmi_streq(type, "vtktypeuint64");
    if (!f->binary) {
        char tok[256];
        for (uint64_t i = 0; i < n; i++) {
            double v;
            pm_status s = pmi_read_token(r, tok, sizeof tok, what);
            if (s != PM_STATUS_OK) return s;
            if (!pmi_parse_double(tok, &v))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: %s: expected a number, "
                                 "got '%.40s'",
                                 r->path, (unsigned long long)r->line, what, tok);
            dst[i] = (float)v;
        }
        return PM_STATUS_OK;
    }
    unsigned char buf[8 * 1024];
    const uint64_t per = sizeof buf / (unsigned)size;
    for (uint64_t i = 0; i < n; i += per) {
        uint64_t k = n - i < per ? n - i : per;
        pm_status s = pmi_read_bytes(r, buf, (size_t)k * (size_t)size, what);
        if (s != PM_STATUS_OK) return s;
        if (!pmi_host_big_endian() && size > 1) pmi_swap_bytes(buf, (size_t)k, (size_t)size);
        for (uint64_t j = 0; j < k; j++) {
            const unsigned char *p = buf + j * (unsigned)size;
            double v = 0;
            if (is_float && size == 4) {
                float x;
                memcpy(&x, p, 4);
                v = x;
            } else if (is_float) {
                memcpy(&v, p, 8);
            } else if (is_unsigned) {
                uint64_t u = 0;
                if (size == 1) u = p[0];
                if (size == 2) {
                    uint16_t x;
                    memcpy(&x, p, 2);
                    u = x;
                }
                if (size == 4) {
                    uint32_t x;
                    memcpy(&x, p, 4);
                    u = x;
                }
                if (size == 8) memcpy(&u, p, 8);
                v = (double)u;
            } else {
                int64_t u = 0;
                if (size == 1) u = (int8_t)p[0];
                if (size == 2) {
                    int16_t x;
                    memcpy(&x, p, 2);
                    u = x;
                }
                if (size == 4) {
                    int32_t x;
                    memcpy(&x, p, 4);
                    u = x;
                }
                if (size == 8) memcpy(&u, p, 8);
                v = (double)u;
            }
            dst[i + j] = (float)v;
        }
    }
    return PM_STATUS_OK;
}

/* Skips a cell block "KEY a b": legacy (b ints) or 5.x OFFSETS/CONNECTIVITY. */
static pm_status skip_cells(vtk_file *f, char **w, int nw)
{
    pmi_reader *r = &f->r;
    uint64_t a, b;
    char kw[32];
    snprintf(kw, sizeof kw, "%s", w[0]);
    if (nw != 3 || !pmi_parse_u64(w[1], &a) || !pmi_parse_u64(w[2], &b))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected '%s <n> <size>'", r->path,
                         (unsigned long long)r->line, kw);
    if (!pmi_vtk_next_is(r, "OFFSETS")) return pmi_vtk_skip_values(f, b, 4, kw);
    for (int k = 0; k < 2; k++) {
        char *line, *x[3];
        size_t len;
        int eof;
        pm_status s = pmi_read_nonblank_line(r, &line, &len, &eof);
        if (s != PM_STATUS_OK) return s;
        int size = 0;
        if (eof || pmi_split(line, x, 3) != 2 || !(size = pmi_vtk_type_size(x[1])))
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected '%s <type>'", r->path,
                             (unsigned long long)r->line, k ? "CONNECTIVITY" : "OFFSETS");
        if ((s = pmi_vtk_skip_values(f, k ? b : a, size, kw)) != PM_STATUS_OK ||
            (s = pmi_vtk_skip_metadata(f)) != PM_STATUS_OK)
            return s;
    }
    return PM_STATUS_OK;
}

/* Appends a name to the list of names seen (for the message). */
static void seen(char *list, size_t cap, const char *name)
{
    size_t l = strlen(list);
    if (l + strlen(name) + 3 < cap) snprintf(list + l, cap - l, "%s%s", l ? ", " : "", name);
}

/* The attribute asked for, nt tuples of nc components of VTK type
 * `type` (1 or 3 components are interpolated): into *values (allocated
 * here), its count and components into out. */
static pm_status read_match(vtk_file *f, const char *path, const char *name, uint64_t nt,
                            uint64_t nc, const char *type, size_t max_memory_bytes, float **values,
                            pm_point_attribute *out)
{
    if (nc != 1 && nc != 3)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: attribute '%s' has %llu components (1 or 3 are interpolated)", path,
                         name, (unsigned long long)nc);
    pm_status s = pmi_points_alloc(path, name, nt * nc / (nc == 3 ? 3 : 1), 0, UINT64_MAX,
                                   max_memory_bytes, values);
    if (s == PM_STATUS_OK) s = read_values(f, nt * nc, type, *values, name);
    if (s == PM_STATUS_OK) {
        out->count = (size_t)nt;
        out->components = (int)nc;
    }
    return s;
}

static pm_status read_legacy(const char *path, const char *name, size_t max_memory_bytes,
                             pm_point_attribute *out)
{
    vtk_file f;
    pm_status s = pmi_vtk_open(&f, path);
    if (s != PM_STATUS_OK) return s;
    pmi_reader *r = &f.r;
    uint64_t npoints = 0, nmode = 0;
    int have_points = 0, point_mode = 0;
    char names[256] = "";
    float *values = NULL;
    for (;;) {
        char *line, *w[6];
        size_t len;
        int eof, nw;
        if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) break;
        if (eof) {
            s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                          "%s: no point attribute '%s' (point attributes: %s)", path, name,
                          names[0] ? names : "none");
            break;
        }
        if ((nw = pmi_split(line, w, 6)) == 0) continue;
        uint64_t a;
        if (pmi_streq(w[0], "POINTS")) {
            int size = nw == 3 ? pmi_vtk_type_size(w[2]) : 0;
            if (!size || !pmi_parse_u64(w[1], &npoints)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected 'POINTS <n> <type>'",
                              path, (unsigned long long)r->line);
                break;
            }
            have_points = 1;
            if ((s = pmi_vtk_skip_values(&f, 3 * npoints, size, "POINTS")) != PM_STATUS_OK ||
                (s = pmi_vtk_skip_metadata(&f)) != PM_STATUS_OK)
                break;
        } else if (pmi_streq(w[0], "CELLS") || pmi_streq(w[0], "VERTICES") ||
                   pmi_streq(w[0], "LINES") || pmi_streq(w[0], "POLYGONS") ||
                   pmi_streq(w[0], "TRIANGLE_STRIPS")) {
            if ((s = skip_cells(&f, w, nw)) != PM_STATUS_OK) break;
        } else if (pmi_streq(w[0], "CELL_TYPES") && nw == 2 && pmi_parse_u64(w[1], &a)) {
            if ((s = pmi_vtk_skip_values(&f, a, 4, "CELL_TYPES")) != PM_STATUS_OK) break;
        } else if ((pmi_streq(w[0], "POINT_DATA") || pmi_streq(w[0], "CELL_DATA")) && nw == 2 &&
                   pmi_parse_u64(w[1], &nmode)) {
            point_mode = pmi_streq(w[0], "POINT_DATA");
        } else if (pmi_streq(w[0], "DIMENSIONS") || pmi_streq(w[0], "ORIGIN") ||
                   pmi_streq(w[0], "SPACING") || pmi_streq(w[0], "ASPECT_RATIO")) {
            continue;
        } else if (pmi_streq(w[0], "FIELD")) {
            uint64_t narrays;
            if (nw != 3 || !pmi_parse_u64(w[2], &narrays)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected 'FIELD <name> <n>'",
                              path, (unsigned long long)r->line);
                break;
            }
            for (uint64_t i = 0; i < narrays && s == PM_STATUS_OK && !values; i++) {
                char *x[5];
                uint64_t nc, nt;
                if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) break;
                if (eof || pmi_split(line, x, 5) != 4 || !pmi_parse_u64(x[1], &nc) ||
                    !pmi_parse_u64(x[2], &nt) || nc == 0 || nc > 1000000) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: expected '<name> <components> <tuples> <type>'",
                                  path, (unsigned long long)r->line);
                    break;
                }
                char atype[64], aname[256];
                snprintf(atype, sizeof atype, "%s", x[3]);
                snprintf(aname, sizeof aname, "%s", x[0]);
                int size = pmi_vtk_type_size(atype);
                const int match = point_mode && strcmp(aname, name) == 0 && nt == npoints;
                if (point_mode && nt == npoints) seen(names, sizeof names, aname);
                if (match) {
                    s = read_match(&f, path, name, nt, nc, atype, max_memory_bytes, &values, out);
                } else if (pmi_streq(atype, "bit") && f.binary) {
                    s = pmi_skip_bytes(r, (nt * nc + 7) / 8, "FIELD array");
                } else if (!size && !pmi_streq(atype, "bit")) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: unsupported type '%s'",
                                  path, (unsigned long long)r->line, atype);
                } else {
                    s = pmi_vtk_skip_values(&f, nt * nc, size ? size : 1, "FIELD array");
                }
                if (s == PM_STATUS_OK) s = pmi_vtk_skip_metadata(&f);
            }
            if (s != PM_STATUS_OK || values) break;
        } else if (pmi_streq(w[0], "SCALARS") || pmi_streq(w[0], "VECTORS") ||
                   pmi_streq(w[0], "NORMALS") || pmi_streq(w[0], "TENSORS") ||
                   pmi_streq(w[0], "TEXTURE_COORDINATES") || pmi_streq(w[0], "COLOR_SCALARS") ||
                   pmi_streq(w[0], "LOOKUP_TABLE")) {
            uint64_t nc = 1;
            char type[64];
            snprintf(type, sizeof type, "%s", nw >= 3 ? w[2] : "");
            if (pmi_streq(w[0], "SCALARS")) {
                if (nw == 4 && !pmi_parse_u64(w[3], &nc)) nc = 0;
            } else if (pmi_streq(w[0], "VECTORS") || pmi_streq(w[0], "NORMALS")) {
                nc = 3;
            } else if (pmi_streq(w[0], "TENSORS")) {
                nc = 9;
            } else if (pmi_streq(w[0], "TEXTURE_COORDINATES")) {
                if (nw != 4 || !pmi_parse_u64(w[2], &nc)) nc = 0;
                snprintf(type, sizeof type, "%s", nw == 4 ? w[3] : "");
            } else if (pmi_streq(w[0], "COLOR_SCALARS")) {
                if (nw != 3 || !pmi_parse_u64(w[2], &nc)) nc = 0;
                snprintf(type, sizeof type, "%s", f.binary ? "unsigned_char" : "float");
            } else { /* LOOKUP_TABLE name size: size RGBA entries */
                uint64_t sz;
                if (nw != 3 || !pmi_parse_u64(w[2], &sz)) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: bad LOOKUP_TABLE", path,
                                  (unsigned long long)r->line);
                    break;
                }
                s = pmi_vtk_skip_values(&f, 4 * sz, 1, "LOOKUP_TABLE");
                if (s != PM_STATUS_OK) break;
                continue;
            }
            if (nc == 0 || nc > 1000000 || !pmi_vtk_type_size(type)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: cannot read '%s' (type '%s')",
                              path, (unsigned long long)r->line, w[0], type);
                break;
            }
            char aname[256], kw[32];
            snprintf(aname, sizeof aname, "%s", nw >= 2 ? w[1] : "");
            snprintf(kw, sizeof kw, "%s", w[0]);
            if (pmi_streq(w[0], "SCALARS") && pmi_vtk_next_is(r, "LOOKUP_TABLE")) {
                if ((s = pmi_read_nonblank_line(r, &line, &len, &eof)) != PM_STATUS_OK) break;
            }
            const int match = point_mode && strcmp(aname, name) == 0 && nmode == npoints &&
                              !pmi_streq(kw, "TENSORS");
            if (point_mode) seen(names, sizeof names, aname);
            if (match) {
                s = read_match(&f, path, name, nmode, nc, type, max_memory_bytes, &values, out);
                break;
            }
            if ((s = pmi_vtk_skip_values(&f, nmode * nc, pmi_vtk_type_size(type), kw)) !=
                    PM_STATUS_OK ||
                (s = pmi_vtk_skip_metadata(&f)) != PM_STATUS_OK)
                break;
        } else if (pmi_streq(w[0], "METADATA")) {
            continue;
        } else {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: unexpected '%.40s'", path,
                          (unsigned long long)r->line, w[0]);
            break;
        }
    }
    pmi_reader_close(r);
    if (s == PM_STATUS_OK && !have_points)
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: no POINTS", path);
    if (s != PM_STATUS_OK) {
        free(values);
        out->count = 0;
        out->components = 0;
        return s;
    }
    out->values = values;
    return PM_STATUS_OK;
}

static pm_status read_xml(const char *path, const char *name, size_t max_memory_bytes,
                          pm_point_attribute *out)
{
    vtx_file f;
    vtx_tag ds, piece, pd, arr;
    pm_status s = pmi_vtx_open(&f, path, "UnstructuredGrid|PolyData", max_memory_bytes);
    if (s != PM_STATUS_OK) return s;
    const char *end = f.text + f.xml_end;
    char names[256] = "";
    float *values = NULL;
    size_t total = 0;
    int comps = 0;
    if (!pmi_vtx_find(&f, f.text, end, f.dataset, &ds)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: no <%s> element", path, f.dataset);
        goto done;
    }
    for (const char *p = ds.body; pmi_vtx_find(&f, p, end, "Piece", &piece); p = piece.body_end) {
        char v[64];
        uint64_t n = 0;
        if (!pmi_vtx_attr(&piece, "NumberOfPoints", v, sizeof v) || !pmi_parse_u64(v, &n)) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: a <Piece> without NumberOfPoints", path);
            goto done;
        }
        int found = 0;
        if (pmi_vtx_find(&f, piece.body, piece.body_end, "PointData", &pd))
            for (const char *q = pd.body; pmi_vtx_find(&f, q, pd.body_end, "DataArray", &arr);
                 q = arr.body_end > arr.end ? arr.body_end : arr.end + 1) {
                char an[256], nc[32];
                if (!pmi_vtx_attr(&arr, "Name", an, sizeof an)) continue;
                if (strcmp(an, name) != 0) {
                    seen(names, sizeof names, an);
                    continue;
                }
                uint64_t c = 1;
                if (pmi_vtx_attr(&arr, "NumberOfComponents", nc, sizeof nc) &&
                    !pmi_parse_u64(nc, &c))
                    c = 0;
                if (c != 1 && c != 3) {
                    s = pmi_error(PM_STATUS_UNSUPPORTED,
                                  "%s: attribute '%s' has %s components (1 or 3 are "
                                  "interpolated)",
                                  path, name, nc);
                    goto done;
                }
                if (comps && comps != (int)c) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: attribute '%s' changes its components between pieces", path,
                                  name);
                    goto done;
                }
                comps = (int)c;
                float *part = NULL;
                s = pmi_vtx_array(&f, &arr, n, (int)c, VTX_FLOAT, max_memory_bytes, name,
                                  (void **)&part, NULL);
                if (s != PM_STATUS_OK) goto done;
                float *grown = realloc(values, (total + (size_t)n) * c * sizeof *grown + 1);
                if (!grown) {
                    free(part);
                    s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
                    goto done;
                }
                values = grown;
                memcpy(values + total * c, part, (size_t)n * c * sizeof *part);
                free(part);
                total += (size_t)n;
                found = 1;
                break;
            }
        if (!found) {
            s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                          "%s: no point attribute '%s' (point attributes: %s)", path, name,
                          names[0] ? names : "none");
            goto done;
        }
    }
    if (!comps) {
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no point attribute '%s'", path, name);
        goto done;
    }
    out->values = values;
    out->count = total;
    out->components = comps;
    values = NULL;
done:
    free(values);
    pmi_vtx_close(&f);
    return s;
}

pm_status pm_points_read_attribute(const char *path, const char *name, size_t max_memory_bytes,
                                   pm_point_attribute *out)
{
    pmi_clear_error();
    if (!path || !name || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_points_read_attribute: NULL argument");
    memset(out, 0, sizeof *out);
    const char *ext = pmi_extension(path);
    if (pmi_streq(ext, "vtk")) return read_legacy(path, name, max_memory_bytes, out);
    if (pmi_streq(ext, "vtu") || pmi_streq(ext, "vtp"))
        return read_xml(path, name, max_memory_bytes, out);
    return pmi_error(PM_STATUS_UNSUPPORTED,
                     "%s: point attributes are read from .vtk and .vtu files only (not '.%s')",
                     path, ext);
}

void pm_point_attribute_free(pm_point_attribute *a)
{
    if (!a) return;
    free(a->values);
    memset(a, 0, sizeof *a);
}
