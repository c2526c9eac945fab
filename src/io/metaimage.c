/* MetaImage volumes (ITK's MetaIO, .mha with the data attached, .mhd with
 * a detached ElementDataFile): raw, zlib-compressed (CompressedData) and
 * ASCII data, either byte order; ElementSpacing, Offset and a
 * TransformMatrix that permutes or flips the axes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

typedef struct mha_header {
    int ndims, have_dims, have_type, binary, msb, compressed, have_matrix;
    uint64_t dims[4];
    pmi_kind kind;
    double spacing[3], size[3], offset[3], matrix[9];
    int have_spacing, have_size;
    int64_t header_size; /* -2: absent; -1: the data are the file's last bytes */
    uint64_t compressed_size;
    char *data_file; /* NULL: LOCAL */
} mha_header;

static pm_status field_error(pmi_reader *r, const char *key, const char *expected,
                             const char *value)
{
    return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: expected '%s' to be %s, got '%.80s'",
                     r->path, (unsigned long long)r->line, key, expected, value);
}

/* n numbers of the value into v; 1 on success. */
static int numbers(char *value, double *v, int n)
{
    char *w[17];
    if (pmi_split(value, w, 17) != n) return 0;
    for (int i = 0; i < n; i++)
        if (!pmi_parse_double(w[i], &v[i]) || !isfinite(v[i])) return 0;
    return 1;
}

static int boolean(const char *v, int *b)
{
    if (pmi_streq(v, "True") || pmi_streq(v, "1")) return *b = 1, 1;
    if (pmi_streq(v, "False") || pmi_streq(v, "0")) return *b = 0, 1;
    return 0;
}

static pm_status element_type(pmi_reader *r, const char *v, pmi_kind *k)
{
    static const struct {
        const char *name;
        pmi_kind kind;
    } types[] = {{"MET_UCHAR", PMI_U8},  {"MET_CHAR", PMI_I8},   {"MET_USHORT", PMI_U16},
                 {"MET_SHORT", PMI_I16}, {"MET_UINT", PMI_U32},  {"MET_INT", PMI_I32},
                 {"MET_FLOAT", PMI_F32}, {"MET_DOUBLE", PMI_F64}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (pmi_streq(v, types[i].name)) {
            *k = types[i].kind;
            return PM_STATUS_OK;
        }
    return pmi_error(PM_STATUS_UNSUPPORTED,
                     "%s: line %llu: ElementType '%.40s' is not supported, expected MET_UCHAR, "
                     "MET_CHAR, MET_USHORT, MET_SHORT, MET_UINT, MET_INT, MET_FLOAT or MET_DOUBLE",
                     r->path, (unsigned long long)r->line, v);
}

static pm_status parse_field(pmi_reader *r, mha_header *h, const char *key, char *value)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", value);
    if (pmi_streq(key, "NDims")) {
        int64_t n;
        if (!pmi_parse_i64(value, &n) || n < 1 || n > 4) return field_error(r, key, "1 to 4", copy);
        if (n < 3)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: line %llu: NDims = %lld, expected a 3-D image", r->path,
                             (unsigned long long)r->line, (long long)n);
        h->ndims = (int)n;
    } else if (pmi_streq(key, "DimSize")) {
        char *w[5];
        int n = pmi_split(value, w, 5);
        if (!h->ndims || n != h->ndims)
            return field_error(r, key, "NDims positive integers after NDims", copy);
        for (int i = 0; i < n; i++)
            if (!pmi_parse_u64(w[i], &h->dims[i]) || h->dims[i] == 0)
                return field_error(r, key, "positive integers", copy);
        if (n == 4 && h->dims[3] != 1)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: line %llu: a 4-D image of %llu volumes, expected one 3-D volume",
                             r->path, (unsigned long long)r->line, (unsigned long long)h->dims[3]);
        h->have_dims = 1;
    } else if (pmi_streq(key, "ElementType")) {
        pm_status s = element_type(r, value, &h->kind);
        if (s != PM_STATUS_OK) return s;
        h->have_type = 1;
    } else if (pmi_streq(key, "ElementNumberOfChannels")) {
        if (strcmp(value, "1") != 0)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: line %llu: ElementNumberOfChannels = %.20s, expected 1 (a "
                             "scalar image)",
                             r->path, (unsigned long long)r->line, value);
    } else if (pmi_streq(key, "ElementSpacing") || pmi_streq(key, "ElementSize")) {
        double v[4] = {1, 1, 1, 1};
        int n = h->ndims ? h->ndims : 3;
        if (!numbers(value, v, n)) return field_error(r, key, "NDims finite numbers", copy);
        for (int i = 0; i < 3; i++)
            if (!(fabs(v[i]) > 0)) return field_error(r, key, "non-zero numbers", copy);
        memcpy(pmi_streq(key, "ElementSize") ? h->size : h->spacing, v, 3 * sizeof(double));
        *(pmi_streq(key, "ElementSize") ? &h->have_size : &h->have_spacing) = 1;
    } else if (pmi_streq(key, "Offset") || pmi_streq(key, "Position") || pmi_streq(key, "Origin")) {
        double v[4];
        if (!numbers(value, v, h->ndims ? h->ndims : 3))
            return field_error(r, key, "NDims finite numbers", copy);
        memcpy(h->offset, v, sizeof h->offset);
    } else if (pmi_streq(key, "TransformMatrix") || pmi_streq(key, "Rotation") ||
               pmi_streq(key, "Orientation")) {
        double v[16];
        int n = h->ndims ? h->ndims : 3;
        if (!numbers(value, v, n * n)) return field_error(r, key, "NDims x NDims numbers", copy);
        for (int a = 0; a < 3; a++)
            for (int c = 0; c < 3; c++)
                h->matrix[3 * a + c] = v[n * a + c];
        h->have_matrix = 1;
    } else if (pmi_streq(key, "BinaryData")) {
        if (!boolean(value, &h->binary)) return field_error(r, key, "True or False", copy);
    } else if (pmi_streq(key, "BinaryDataByteOrderMSB") || pmi_streq(key, "ElementByteOrderMSB")) {
        if (!boolean(value, &h->msb)) return field_error(r, key, "True or False", copy);
    } else if (pmi_streq(key, "CompressedData")) {
        if (!boolean(value, &h->compressed)) return field_error(r, key, "True or False", copy);
    } else if (pmi_streq(key, "CompressedDataSize")) {
        if (!pmi_parse_u64(value, &h->compressed_size))
            return field_error(r, key, "a byte count", copy);
    } else if (pmi_streq(key, "HeaderSize")) {
        if (!pmi_parse_i64(value, &h->header_size) || h->header_size < -1)
            return field_error(r, key, "a byte count or -1", copy);
    }
    /* Other fields (ObjectType, Comment, AnatomicalOrientation, ...) do
     * not change the samples or their grid. */
    return PM_STATUS_OK;
}

/* Header lines up to ElementDataFile, which must come last. */
static pm_status parse_header(pmi_reader *r, mha_header *h)
{
    for (;;) {
        char *line;
        size_t len;
        int eof;
        pm_status s = pmi_read_nonblank_line(r, &line, &len, &eof);
        if (s != PM_STATUS_OK) return s;
        if (eof)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: end of file in the header, expected 'ElementDataFile "
                             "= LOCAL' or a data file name",
                             r->path, (unsigned long long)r->line);
        char *eq = strchr(line, '=');
        if (!eq)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: expected 'Key = Value', got '%.60s'", r->path,
                             (unsigned long long)r->line, line);
        char *key = line, *value = eq + 1, *e = eq;
        while (*key == ' ' || *key == '\t')
            key++;
        while (e > key && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *e = '\0';
        while (*value == ' ' || *value == '\t')
            value++;
        size_t vl = strlen(value);
        while (vl > 0 && (value[vl - 1] == ' ' || value[vl - 1] == '\t'))
            value[--vl] = '\0';
        if (pmi_streq(key, "ElementDataFile")) {
            if (pmi_streq(value, "LOCAL")) return PM_STATUS_OK;
            if (pmi_starts_with(value, "LIST") || strchr(value, '%'))
                return pmi_error(PM_STATUS_UNSUPPORTED,
                                 "%s: line %llu: ElementDataFile '%.60s': multi-file data is not "
                                 "supported, expected LOCAL or one file name",
                                 r->path, (unsigned long long)r->line, value);
            if (!(h->data_file = malloc(vl + 1)))
                return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
            memcpy(h->data_file, value, vl + 1);
            return PM_STATUS_OK;
        }
        if ((s = parse_field(r, h, key, value)) != PM_STATUS_OK) return s;
    }
}

/* Reads the samples from r (positioned at the data) into *data. */
static pm_status read_samples(pmi_reader *r, const mha_header *h, const size_t dims[3],
                              size_t max_memory_bytes, void **data, size_t *bytes)
{
    pm_status s;
    if (!h->binary) {
        pm_sample_type t = pmi_kind_target(h->kind, 0);
        uint64_t rem = pmi_reader_remaining(r);
        size_t cells = 0;
        if (pm_sample_size(t) != pmi_kind_size(h->kind))
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: ASCII data (BinaryData = False) of %s samples, expected "
                             "MET_UCHAR, MET_USHORT, MET_SHORT, MET_FLOAT or MET_DOUBLE",
                             r->path, pmi_kind_string(h->kind));
        if (pmi_mul3_size(dims[0], dims[1], dims[2], &cells) && cells > rem / 2 + 1)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: %zu x %zu x %zu ASCII samples cannot fit in the %llu bytes left",
                             r->path, dims[0], dims[1], dims[2], (unsigned long long)rem);
        s = pmi_volume_alloc(r->path, "DimSize", dims[0], dims[1], dims[2], t, max_memory_bytes,
                             UINT64_MAX, data, bytes);
        if (s == PM_STATUS_OK) s = pmi_read_ascii_samples(r, t, *data, cells);
        return s;
    }
    if (h->compressed) {
        uint64_t rem = pmi_reader_remaining(r), limit;
        if (h->compressed_size && h->compressed_size < rem) rem = h->compressed_size;
        if (__builtin_mul_overflow(rem, (uint64_t)1032, &limit) || limit > UINT64_MAX - 4096)
            limit = UINT64_MAX;
        else
            limit += 4096;
        s = pmi_volume_alloc_kind(r->path, "DimSize", dims[0], dims[1], dims[2], h->kind, 0,
                                  max_memory_bytes, limit, data, bytes);
        if (s == PM_STATUS_OK)
            s = pmi_inflate_exact(r, 0, *data, *bytes, "'DimSize' and 'ElementType' declare", 0);
        return s;
    }
    size_t need;
    if (h->header_size == -1 && pmi_mul3_size(dims[0], dims[1], dims[2], &need) &&
        pmi_mul_size(need, pmi_kind_size(h->kind), &need) && need <= pmi_reader_remaining(r) &&
        (s = pmi_skip_bytes(r, pmi_reader_remaining(r) - need, "HeaderSize")) != PM_STATUS_OK)
        return s;
    s = pmi_volume_alloc_kind(r->path, "DimSize", dims[0], dims[1], dims[2], h->kind, 0,
                              max_memory_bytes, pmi_reader_remaining(r), data, bytes);
    if (s == PM_STATUS_OK) s = pmi_read_bytes(r, *data, *bytes, "the raw sample data");
    return s;
}

/* Opens the detached data file (if any) and positions it at the data. The
 * reader keeps pointing at *dpath for its messages: the caller frees it
 * after closing the reader. */
static pm_status open_data(const char *path, const mha_header *h, pmi_reader *dr, int *opened,
                           char **dpath)
{
    *dpath = pmi_sibling_path(path, h->data_file);
    if (!*dpath) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    pm_status s = pmi_reader_open(dr, *dpath);
    if (s == PM_STATUS_OK) {
        *opened = 1;
        if (h->header_size > 0) s = pmi_skip_bytes(dr, (uint64_t)h->header_size, "HeaderSize");
    }
    if (s != PM_STATUS_OK) {
        /* Name the header too: its HeaderSize may be what is wrong. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pm_last_error());
        return pmi_error(s, "%s: ElementDataFile: %s", path, msg);
    }
    return PM_STATUS_OK;
}

pm_status pmi_mha_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    mha_header h;
    memset(&h, 0, sizeof h);
    h.binary = 1;
    h.header_size = -2;
    for (int a = 0; a < 3; a++) {
        h.spacing[a] = h.size[a] = 1;
        h.matrix[4 * a] = 1;
    }
    pmi_reader hr, dr;
    int opened = 0;
    void *data = NULL;
    char *dpath = NULL;
    size_t bytes = 0, dims[3];
    pm_status s = pmi_reader_open(&hr, path);
    if (s != PM_STATUS_OK) return s;
    if ((s = parse_header(&hr, &h)) != PM_STATUS_OK) goto done;
    if (!h.have_dims || !h.have_type) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: the header lacks '%s'", path,
                      !h.ndims       ? "NDims"
                      : !h.have_dims ? "DimSize"
                                     : "ElementType");
        goto done;
    }
    for (int a = 0; a < 3; a++) {
        if (h.dims[a] > SIZE_MAX) {
            s = pmi_error(PM_STATUS_OVERFLOW, "%s: DimSize %llu overflows", path,
                          (unsigned long long)h.dims[a]);
            goto done;
        }
        dims[a] = (size_t)h.dims[a];
    }
    if (h.data_file && (s = open_data(path, &h, &dr, &opened, &dpath)) != PM_STATUS_OK) goto done;
    if ((s = read_samples(opened ? &dr : &hr, &h, dims, max_memory_bytes, &data, &bytes)) !=
        PM_STATUS_OK) {
        if (opened) {
            /* Errors in the detached data name the header too: its DimSize
             * or ElementType may be what is wrong. */
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", pm_last_error());
            s = pmi_error(s, "%s: ElementDataFile: %s", path, msg);
        }
        goto done;
    }
    size_t esize = pmi_kind_size(h.kind), count = bytes / esize;
    if (!h.binary) count = bytes / pm_sample_size(pmi_kind_target(h.kind, 0));
    if (h.binary && h.msb != pmi_host_big_endian()) pmi_swap_bytes(data, count, esize);
    pm_sample_type type = pmi_kind_target(h.kind, 0);
    if (h.binary &&
        (s = pmi_samples_convert(path, &data, count, h.kind, 0, 1, 0, &type)) != PM_STATUS_OK)
        goto done;
    double axes[3][3];
    for (int a = 0; a < 3; a++) {
        double step = h.have_spacing ? h.spacing[a] : h.size[a];
        for (int c = 0; c < 3; c++)
            axes[a][c] = h.matrix[3 * a + c] * step;
    }
    pm_volume v = {data, type, dims[0], dims[1], dims[2], 0, 0, {1, 1, 1}, {0, 0, 0}};
    data = NULL;
    if ((s = pmi_volume_orient(path, "TransformMatrix", axes, h.offset, &v)) != PM_STATUS_OK) {
        free((void *)v.data);
        goto done;
    }
    *out = v;
done:
    free(data);
    free(h.data_file);
    if (opened) pmi_reader_close(&dr);
    free(dpath);
    pmi_reader_close(&hr);
    return s;
}
