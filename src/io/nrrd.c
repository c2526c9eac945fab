/* NRRD volumes (teem's "Nearly Raw Raster Data", format spec NRRD0001-5):
 * attached (.nrrd) and detached (.nhdr + "data file") headers, raw, gzip
 * (zlib inflate, gzip or zlib wrapper) and ascii encodings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

typedef struct nrrd_header {
    pm_sample_type type;
    int have_type, dimension, big_endian, have_endian;
    int encoding; /* 0 raw, 1 gzip, 2 ascii */
    uint64_t sizes[4];
    double spacings[4];
    int have_spacings, have_directions, have_origin;
    double directions[4][3];
    int direction_none[4];
    double origin[3];
    int64_t line_skip, byte_skip;
    char *data_file; /* malloc'd, or NULL when attached */
    uint64_t sizes_line, type_line;
} nrrd_header;

static int parse_type(const char *v, pm_sample_type *t)
{
    static const struct {
        const char *name;
        pm_sample_type type;
    } names[] = {
        {"uchar", PM_SAMPLE_U8},
        {"unsigned char", PM_SAMPLE_U8},
        {"uint8", PM_SAMPLE_U8},
        {"uint8_t", PM_SAMPLE_U8},
        {"ushort", PM_SAMPLE_U16},
        {"unsigned short", PM_SAMPLE_U16},
        {"unsigned short int", PM_SAMPLE_U16},
        {"uint16", PM_SAMPLE_U16},
        {"uint16_t", PM_SAMPLE_U16},
        {"short", PM_SAMPLE_I16},
        {"short int", PM_SAMPLE_I16},
        {"signed short", PM_SAMPLE_I16},
        {"signed short int", PM_SAMPLE_I16},
        {"int16", PM_SAMPLE_I16},
        {"int16_t", PM_SAMPLE_I16},
        {"float", PM_SAMPLE_F32},
        {"double", PM_SAMPLE_F64},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (pmi_streq(v, names[i].name)) {
            *t = names[i].type;
            return 1;
        }
    return 0;
}

/* "(a,b,c)" with optional blanks; returns the end or NULL. */
static const char *parse_vector(const char *p, double v[3])
{
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p++ != '(') return NULL;
    for (int a = 0; a < 3; a++) {
        char *end;
        v[a] = strtod(p, &end);
        if (end == p || !isfinite(v[a])) return NULL;
        p = end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p++ != (a < 2 ? ',' : ')')) return NULL;
    }
    return p;
}

static pm_status field_error(pmi_reader *r, const char *field, const char *expected,
                             const char *value)
{
    return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected '%s' to %s, got '%s: %.80s'",
                     r->path, (unsigned long long)r->line, field, expected, field, value);
}

static pm_status parse_field(pmi_reader *r, nrrd_header *h, const char *key, char *value)
{
    char *w[5];
    if (!h->dimension && (pmi_streq(key, "sizes") || pmi_streq(key, "spacings") ||
                          pmi_streq(key, "space directions")))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: '%s' before 'dimension'", r->path,
                         (unsigned long long)r->line, key);
    if (pmi_streq(key, "type")) {
        if (!parse_type(value, &h->type))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: unsupported type '%.40s', expected uchar, ushort, "
                             "short, float or double (or uint8, uint16, int16 spellings)",
                             r->path, (unsigned long long)r->line, value);
        h->have_type = 1;
        h->type_line = r->line;
    } else if (pmi_streq(key, "dimension")) {
        int64_t d;
        if (!pmi_parse_i64(value, &d) || d < 1 || d > 16)
            return field_error(r, key, "be a positive integer", value);
        if (d != 3 && d != 4)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: dimension %lld, expected 3 (or 4 with a leading axis "
                             "of size 1)",
                             r->path, (unsigned long long)r->line, (long long)d);
        h->dimension = (int)d;
    } else if (pmi_streq(key, "sizes")) {
        char copy[128];
        snprintf(copy, sizeof copy, "%s", value);
        int n = pmi_split(value, w, 5);
        for (int a = 0; a < h->dimension; a++)
            if (n != h->dimension || !pmi_parse_u64(w[a], &h->sizes[a]) || h->sizes[a] == 0) {
                char want[64];
                snprintf(want, sizeof want, "have %d positive integers", h->dimension);
                return field_error(r, key, want, copy);
            }
        h->sizes_line = r->line;
    } else if (pmi_streq(key, "spacings")) {
        char copy[128];
        snprintf(copy, sizeof copy, "%s", value);
        int n = pmi_split(value, w, 5);
        for (int a = 0; a < h->dimension; a++)
            if (n != h->dimension || !pmi_parse_double(w[a], &h->spacings[a])) {
                char want[64];
                snprintf(want, sizeof want, "have %d numbers (nan for none)", h->dimension);
                return field_error(r, key, want, copy);
            }
        h->have_spacings = 1;
    } else if (pmi_streq(key, "space directions")) {
        const char *p = value;
        for (int a = 0; a < h->dimension; a++) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (pmi_starts_with(p, "none")) {
                h->direction_none[a] = 1;
                p += 4;
            } else if (!(p = parse_vector(p, h->directions[a]))) {
                char want[96];
                snprintf(want, sizeof want, "have %d vectors '(x,y,z)' or 'none'", h->dimension);
                return field_error(r, key, want, value);
            }
        }
        h->have_directions = 1;
    } else if (pmi_streq(key, "space origin")) {
        if (!parse_vector(value, h->origin))
            return field_error(r, key, "be a vector '(x,y,z)' of 3 finite numbers", value);
        h->have_origin = 1;
    } else if (pmi_streq(key, "endian")) {
        if (pmi_streq(value, "little"))
            h->big_endian = 0;
        else if (pmi_streq(value, "big"))
            h->big_endian = 1;
        else
            return field_error(r, key, "be 'little' or 'big'", value);
        h->have_endian = 1;
    } else if (pmi_streq(key, "encoding")) {
        if (pmi_streq(value, "raw"))
            h->encoding = 0;
        else if (pmi_streq(value, "gzip") || pmi_streq(value, "gz"))
            h->encoding = 1;
        else if (pmi_streq(value, "ascii") || pmi_streq(value, "text") || pmi_streq(value, "txt"))
            h->encoding = 2;
        else
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: unsupported encoding '%.40s', expected raw, gzip or "
                             "ascii",
                             r->path, (unsigned long long)r->line, value);
    } else if (pmi_streq(key, "data file") || pmi_streq(key, "datafile")) {
        /* One detached file only; "LIST" and "fmt min max step" forms name
         * several and are not supported. */
        char copy[512];
        snprintf(copy, sizeof copy, "%s", value);
        if (pmi_starts_with(value, "LIST") || (strchr(value, '%') && pmi_split(copy, w, 5) > 1))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: multi-file 'data file' forms are not supported, "
                             "expected one file name",
                             r->path, (unsigned long long)r->line);
        free(h->data_file);
        h->data_file = malloc(strlen(value) + 1);
        if (!h->data_file)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
        strcpy(h->data_file, value);
    } else if (pmi_streq(key, "line skip") || pmi_streq(key, "lineskip")) {
        if (!pmi_parse_i64(value, &h->line_skip) || h->line_skip < 0)
            return field_error(r, key, "be a non-negative integer", value);
    } else if (pmi_streq(key, "byte skip") || pmi_streq(key, "byteskip")) {
        if (!pmi_parse_i64(value, &h->byte_skip) || h->byte_skip < -1)
            return field_error(r, key, "be a non-negative integer or -1", value);
    }
    /* Every other field (kinds, centers, units, space, min, max, ...)
     * does not change the samples or their grid and is ignored. */
    return PM_STATUS_OK;
}

static pm_status parse_header(pmi_reader *r, nrrd_header *h, int *attached)
{
    char *line;
    size_t len;
    int eof;
    pm_status s = pmi_read_line(r, &line, &len, &eof);
    if (s != PM_STATUS_OK) return s;
    if (eof)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: empty file, expected an NRRD header", r->path);
    if (len != 8 || strncmp(line, "NRRD000", 7) != 0 || line[7] < '1' || line[7] > '9')
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line 1: expected the magic 'NRRD0001' to 'NRRD0005', got '%.20s'",
                         r->path, line);
    for (;;) {
        if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
        if (eof) {
            *attached = 0;
            return PM_STATUS_OK;
        }
        if (len == 0) {
            *attached = 1; /* an empty line ends the header; data follow */
            return PM_STATUS_OK;
        }
        if (line[0] == '#') continue;
        char *colon = strstr(line, ": ");
        char *kv = strstr(line, ":=");
        if (kv && (!colon || kv < colon)) continue; /* key/value pair */
        if (!colon)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: expected '<field>: <value>', got '%.60s'", r->path,
                             (unsigned long long)r->line, line);
        *colon = '\0';
        char *value = colon + 2;
        while (*value == ' ' || *value == '\t')
            value++;
        size_t vl = strlen(value);
        while (vl > 0 && (value[vl - 1] == ' ' || value[vl - 1] == '\t'))
            value[--vl] = '\0';
        if ((s = parse_field(r, h, line, value)) != PM_STATUS_OK) return s;
    }
}

/* The samples after the header (and any line skip), in the header's
 * encoding, into *data (allocated here). */
static pm_status read_data(pmi_reader *r, const nrrd_header *h, const size_t dims[3],
                           size_t max_memory_bytes, void **data, size_t *bytes)
{
    const char *path = r->path;
    size_t esize = pm_sample_size(h->type);
    pm_status s = PM_STATUS_OK;
    if (h->encoding == 0) {
        if (h->byte_skip == -1) {
            /* The data are the last bytes of the file. */
            size_t need;
            if (!pmi_mul3_size(dims[0], dims[1], dims[2], &need) ||
                !pmi_mul_size(need, esize, &need) || need > pmi_reader_remaining(r)) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: byte skip -1: the data of %zu x %zu x %zu %s samples do not fit "
                              "in the %llu bytes of the file",
                              r->path, dims[0], dims[1], dims[2], pm_sample_type_string(h->type),
                              (unsigned long long)pmi_reader_remaining(r));
                return s;
            }
            s = pmi_skip_bytes(r, pmi_reader_remaining(r) - need, "byte skip");
        } else {
            s = pmi_skip_bytes(r, (uint64_t)h->byte_skip, "byte skip");
        }
        if (s == PM_STATUS_OK)
            s = pmi_volume_alloc(r->path, "sizes", dims[0], dims[1], dims[2], h->type,
                                 max_memory_bytes, pmi_reader_remaining(r), data, bytes);
        if (s == PM_STATUS_OK) s = pmi_read_bytes(r, *data, *bytes, "raw sample data");
    } else if (h->encoding == 1) {
        if (h->byte_skip < 0) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: 'byte skip: -1' is only defined for raw encoding", path);
            return s;
        }
        /* Deflate expands at most about 1032:1, which bounds what a small
         * file can honestly declare before anything is allocated. */
        uint64_t rem = pmi_reader_remaining(r), limit;
        if (__builtin_mul_overflow(rem, (uint64_t)1032, &limit)) limit = UINT64_MAX;
        limit = limit > UINT64_MAX - 4096 ? UINT64_MAX : limit + 4096;
        if (limit >= (uint64_t)h->byte_skip)
            limit -= (uint64_t)h->byte_skip;
        else
            limit = 0;
        size_t need;
        if (pmi_mul3_size(dims[0], dims[1], dims[2], &need) && pmi_mul_size(need, esize, &need) &&
            need > limit) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: sizes: %zu x %zu x %zu %s samples need %zu bytes, but %llu bytes "
                          "of gzip data cannot expand to that (deflate expands at most 1032:1)",
                          r->path, dims[0], dims[1], dims[2], pm_sample_type_string(h->type), need,
                          (unsigned long long)rem);
            return s;
        }
        s = pmi_volume_alloc(r->path, "sizes", dims[0], dims[1], dims[2], h->type, max_memory_bytes,
                             UINT64_MAX, data, bytes);
        if (s == PM_STATUS_OK)
            s = pmi_inflate_exact(r, (uint64_t)h->byte_skip, *data, *bytes,
                                  "'sizes' and 'type' declare", 0);
    } else {
        if (h->byte_skip > 0) s = pmi_skip_bytes(r, (uint64_t)h->byte_skip, "byte skip");
        uint64_t rem = pmi_reader_remaining(r);
        size_t cells;
        if (s == PM_STATUS_OK && pmi_mul3_size(dims[0], dims[1], dims[2], &cells) &&
            cells > rem / 2 + 1)
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: %zu x %zu x %zu ascii samples cannot fit in the %llu bytes left",
                          r->path, dims[0], dims[1], dims[2], (unsigned long long)rem);
        if (s == PM_STATUS_OK)
            s = pmi_volume_alloc(r->path, "sizes", dims[0], dims[1], dims[2], h->type,
                                 max_memory_bytes, UINT64_MAX, data, bytes);
        if (s == PM_STATUS_OK) s = pmi_read_ascii_samples(r, h->type, *data, *bytes / esize);
    }
    return s;
}

static pm_status nrrd_layout(pmi_reader *r, const nrrd_header *h, const size_t dims[3],
                             const double spacing[3], const char *dpath, pmi_volume_layout *L);

/* Reads the volume into *out, or with L set, only its layout. */
static pm_status nrrd_run(const char *path, size_t max_memory_bytes, pm_volume *out,
                          pmi_volume_layout *L)
{
    nrrd_header h;
    memset(&h, 0, sizeof h);
    pmi_reader hr, dr;
    pmi_reader *r = &hr;
    int attached = 0, have_data_reader = 0;
    void *data = NULL;
    char *dpath = NULL;
    pm_status s = pmi_reader_open(&hr, path);
    if (s != PM_STATUS_OK) return s;
    if ((s = parse_header(&hr, &h, &attached)) != PM_STATUS_OK) goto done;
    if (!h.have_type || !h.dimension || !h.sizes_line) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: header lacks required field '%s'", path,
                      !h.have_type   ? "type"
                      : !h.dimension ? "dimension"
                                     : "sizes");
        goto done;
    }
    int first = 0; /* index of the x axis */
    if (h.dimension == 4) {
        if (h.sizes[0] != 1) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: line %llu: 4-dimensional data with %llu components per sample, "
                          "expected a scalar volume (dimension 3, or a leading axis of size 1)",
                          path, (unsigned long long)h.sizes_line, (unsigned long long)h.sizes[0]);
            goto done;
        }
        first = 1;
    }
    size_t dims[3];
    double spacing[3];
    for (int a = 0; a < 3; a++) {
        int ax = first + a;
        if (h.sizes[ax] > SIZE_MAX) {
            s = pmi_error(PM_STATUS_OVERFLOW, "%s: line %llu: size %llu overflows", path,
                          (unsigned long long)h.sizes_line, (unsigned long long)h.sizes[ax]);
            goto done;
        }
        dims[a] = (size_t)h.sizes[ax];
        /* Only lengths are used: pm_volume is axis-aligned, so rotated or
         * flipped space directions keep their norms (docs/formats.md). */
        spacing[a] = 1.0;
        if (h.have_directions && !h.direction_none[ax]) {
            const double *d = h.directions[ax];
            spacing[a] = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        } else if (h.have_spacings && !isnan(h.spacings[ax])) {
            spacing[a] = fabs(h.spacings[ax]);
        }
        if (!(spacing[a] > 0) || !isfinite(spacing[a])) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: axis %d has spacing %g, expected a positive finite spacing", path,
                          ax, spacing[a]);
            goto done;
        }
    }
    if (pm_sample_size(h.type) > 1 && h.encoding != 2 && !h.have_endian) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: header lacks 'endian', required for %s samples in %s encoding", path,
                      pm_sample_type_string(h.type), h.encoding ? "gzip" : "raw");
        goto done;
    }
    if (h.data_file) {
        if (!(dpath = pmi_sibling_path(path, h.data_file))) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
            goto done;
        }
        if ((s = pmi_reader_open(&dr, dpath)) != PM_STATUS_OK) {
            /* Say which header pointed at the missing file. */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", pm_last_error());
            s = pmi_error(s, "%s: 'data file': %s", path, msg);
            goto done;
        }
        have_data_reader = 1;
        r = &dr;
    } else if (!attached) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: line %llu: end of file in the header: no empty line before the data "
                      "and no 'data file' field",
                      path, (unsigned long long)hr.line);
        goto done;
    }
    for (int64_t i = 0; i < h.line_skip; i++) {
        char *line;
        size_t len;
        int eof;
        if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK) goto done;
        if (eof) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: end of file while skipping %lld lines ('line skip')", r->path,
                          (long long)h.line_skip);
            goto done;
        }
    }
    if (L) {
        s = nrrd_layout(r, &h, dims, spacing, dpath ? dpath : path, L);
        goto done;
    }
    size_t bytes = 0, esize = pm_sample_size(h.type);
    s = read_data(r, &h, dims, max_memory_bytes, &data, &bytes);
    if (s != PM_STATUS_OK) goto done;
    if (h.encoding != 2 && esize > 1 && h.big_endian != pmi_host_big_endian())
        pmi_swap_bytes(data, bytes / esize, esize);
    out->data = data;
    data = NULL;
    out->type = h.type;
    out->nx = dims[0];
    out->ny = dims[1];
    out->nz = dims[2];
    out->row_stride = dims[0];
    out->slice_stride = dims[0] * dims[1];
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = spacing[a];
        out->origin[a] = h.have_origin ? h.origin[a] : 0.0;
    }
done:
    free(data);
    free(dpath);
    free(h.data_file);
    if (have_data_reader) pmi_reader_close(&dr);
    pmi_reader_close(&hr);
    return s;
}

pm_status pmi_nrrd_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    return nrrd_run(path, max_memory_bytes, out, NULL);
}

/* Where the samples start (r is after the header and any line skip), with
 * read_data's checks of the file's size. */
static pm_status nrrd_layout(pmi_reader *r, const nrrd_header *h, const size_t dims[3],
                             const double spacing[3], const char *dpath, pmi_volume_layout *L)
{
    const size_t esize = pm_sample_size(h->type);
    if (dims[0] < 2 || dims[1] < 2 || dims[2] < 2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: sizes: dims %zu x %zu x %zu, each must be at least 2 "
                         "(marching cubes needs one cell)",
                         r->path, dims[0], dims[1], dims[2]);
    size_t need;
    if (!pmi_mul3_size(dims[0], dims[1], dims[2], &need) || !pmi_mul_size(need, esize, &need))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: sizes: %zu x %zu x %zu %s samples overflow size_t",
                         r->path, dims[0], dims[1], dims[2], pm_sample_type_string(h->type));
    const uint64_t rem = pmi_reader_remaining(r);
    if (h->encoding == 2)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: ascii encoding cannot be streamed; read the volume into memory "
                         "(raw and gzip encodings stream)",
                         r->path);
    if (h->encoding == 0) {
        uint64_t skip = h->byte_skip == -1 ? (need <= rem ? rem - need : 0) : (uint64_t)h->byte_skip;
        if (h->byte_skip == -1 && need > rem)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte skip -1: the data of %zu x %zu x %zu %s samples do not "
                             "fit in the %llu bytes of the file",
                             r->path, dims[0], dims[1], dims[2], pm_sample_type_string(h->type),
                             (unsigned long long)rem);
        if (skip > rem)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: the file ends in byte skip (expected %llu more "
                             "bytes, got %llu)",
                             r->path, (unsigned long long)pmi_reader_tell(r),
                             (unsigned long long)skip, (unsigned long long)rem);
        if ((uint64_t)need > rem - skip)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: sizes: %zu x %zu x %zu %s samples need %zu bytes, but only %llu "
                             "bytes of data are in the file",
                             r->path, dims[0], dims[1], dims[2], pm_sample_type_string(h->type),
                             need, (unsigned long long)(rem - skip));
        L->offset = pmi_reader_tell(r) + skip;
    } else {
        if (h->byte_skip < 0)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: 'byte skip: -1' is only defined for raw encoding", r->path);
        L->gz = 1;
        L->offset = pmi_reader_tell(r);
        L->skip = (uint64_t)h->byte_skip;
    }
    L->data_path = malloc(strlen(dpath) + 1);
    if (!L->data_path) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
    strcpy(L->data_path, dpath);
    L->big_endian = h->big_endian;
    L->type = h->type;
    for (int a = 0; a < 3; a++) {
        L->dims[a] = dims[a];
        L->spacing[a] = spacing[a];
        L->origin[a] = h->have_origin ? h->origin[a] : 0.0;
    }
    L->declared_by = "'sizes' and 'type' declare";
    return PM_STATUS_OK;
}

pm_status pmi_nrrd_layout(const char *path, pmi_volume_layout *L)
{
    memset(L, 0, sizeof *L);
    return nrrd_run(path, 0, NULL, L);
}
