/* VTK XML files (VTK's "VTK File Formats" document, XML section): the file
 * in memory, a minimal tag and attribute scanner, base64, and DataArray
 * decoding (ascii; binary = base64 inline; appended raw or base64; blocks
 * compressed by vtkZLibDataCompressor; UInt32 or UInt64 headers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/vtk_xml.h"

static const char *find_str(const char *from, const char *to, const char *s)
{
    size_t k = strlen(s);
    for (const char *p = from; p + k <= to; p++) {
        p = memchr(p, s[0], (size_t)(to - p));
        if (!p || p + k > to) return NULL;
        if (memcmp(p, s, k) == 0) return p;
    }
    return NULL;
}

static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The '>' closing the tag that starts at p, skipping quoted values. */
static const char *tag_close(const char *p, const char *to)
{
    char quote = 0;
    for (; p < to; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if (*p == '>') {
            return p;
        }
    }
    return NULL;
}

int pmi_vtx_find(const vtx_file *f, const char *from, const char *to, const char *name,
                 vtx_tag *tag)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s", name);
    snprintf(close, sizeof close, "</%s", name);
    size_t k = strlen(open);
    const char *limit = f->text + f->xml_end;
    for (const char *p = from; (p = find_str(p, to, open)) != NULL; p += k) {
        if (p + k >= to || !(is_ws(p[k]) || p[k] == '>' || p[k] == '/')) continue;
        const char *end = tag_close(p + k, limit);
        if (!end) return 0;
        tag->start = p;
        tag->end = end;
        tag->body = end + 1;
        if (end[-1] == '/') {
            tag->body_end = end + 1;
        } else {
            const char *c = find_str(end + 1, limit, close);
            tag->body_end = c ? c : end + 1;
        }
        return 1;
    }
    return 0;
}

int pmi_vtx_attr(const vtx_tag *tag, const char *name, char *out, size_t cap)
{
    size_t k = strlen(name);
    const char *p = tag->start + 1;
    while (p < tag->end && !is_ws(*p))
        p++; /* the tag's name */
    while (p < tag->end) {
        while (p < tag->end && is_ws(*p))
            p++;
        const char *key = p;
        while (p < tag->end && *p != '=' && !is_ws(*p) && *p != '/' && *p != '>')
            p++;
        size_t klen = (size_t)(p - key);
        while (p < tag->end && is_ws(*p))
            p++;
        if (p >= tag->end || *p != '=') {
            if (klen == 0) return 0;
            continue;
        }
        p++;
        while (p < tag->end && is_ws(*p))
            p++;
        if (p >= tag->end || (*p != '"' && *p != '\'')) return 0;
        char q = *p++;
        const char *v = p;
        while (p < tag->end && *p != q)
            p++;
        if (p >= tag->end) return 0;
        if (klen == k && memcmp(key, name, k) == 0) {
            size_t n = (size_t)(p - v) < cap - 1 ? (size_t)(p - v) : cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return 1;
        }
        p++;
    }
    return 0;
}

int pmi_vtx_numbers(const vtx_tag *tag, const char *name, double *v, int n)
{
    char buf[512], *w[17];
    if (!pmi_vtx_attr(tag, name, buf, sizeof buf)) return 0;
    if (n > 16 || pmi_split(buf, w, 17) != n) return -1;
    for (int i = 0; i < n; i++)
        if (!pmi_parse_double(w[i], &v[i]) || !isfinite(v[i])) return -1;
    return 1;
}

static pm_status load(vtx_file *f, const char *path, size_t max_memory_bytes)
{
    pmi_reader r;
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    if (max_memory_bytes && r.size > max_memory_bytes) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                      "%s: the file's %llu bytes are read into memory, more than the limit of "
                      "%zu bytes",
                      path, (unsigned long long)r.size, max_memory_bytes);
    } else if (r.size > SIZE_MAX - 1 || !(f->text = malloc((size_t)r.size + 1))) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %llu bytes for the file", path,
                      (unsigned long long)r.size);
    } else {
        f->size = (size_t)r.size;
        s = pmi_read_bytes(&r, f->text, f->size, "the file");
        f->text[f->size] = '\0';
    }
    pmi_reader_close(&r);
    return s;
}

static pm_status read_vtkfile(vtx_file *f, const char *type)
{
    vtx_tag t;
    char v[64] = "";
    const char *end = f->text + f->xml_end;
    if (!pmi_vtx_find(f, f->text, end, "VTKFile", &t))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: no <VTKFile> tag, expected a VTK XML file",
                         f->path);
    /* type is one name or several separated by '|'. */
    int ok = 0;
    if (pmi_vtx_attr(&t, "type", v, sizeof v) && v[0] && !strchr(v, '|')) {
        const char *m = strstr(type, v);
        size_t k = strlen(v);
        ok = m && (m == type || m[-1] == '|') && (m[k] == '\0' || m[k] == '|');
    }
    if (!ok)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: <VTKFile type=\"%s\">, expected type \"%s\"", f->path,
                         pmi_vtx_offset(f, t.start), v, type);
    snprintf(f->dataset, sizeof f->dataset, "%s", v);
    int big = pmi_vtx_attr(&t, "byte_order", v, sizeof v) && !strcmp(v, "BigEndian");
    f->swap = big != pmi_host_big_endian();
    if (pmi_vtx_attr(&t, "header_type", v, sizeof v)) {
        if (strcmp(v, "UInt32") && strcmp(v, "UInt64"))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: header_type=\"%s\", expected UInt32 or UInt64", f->path, v);
        f->header64 = !strcmp(v, "UInt64");
    }
    if (pmi_vtx_attr(&t, "compressor", v, sizeof v) && v[0]) {
        if (strcmp(v, "vtkZLibDataCompressor"))
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: compressor=\"%s\" is not supported, expected "
                             "vtkZLibDataCompressor or none",
                             f->path, v);
        f->zlib = 1;
    }
    return PM_STATUS_OK;
}

pm_status pmi_vtx_open(vtx_file *f, const char *path, const char *type, size_t max_memory_bytes)
{
    memset(f, 0, sizeof *f);
    f->path = path;
    pm_status s = load(f, path, max_memory_bytes);
    if (s != PM_STATUS_OK) return s;
    const char *end = f->text + f->size;
    const char *ad = find_str(f->text, end, "<AppendedData");
    f->xml_end = ad ? (size_t)(ad - f->text) : f->size;
    if ((s = read_vtkfile(f, type)) != PM_STATUS_OK) return s;
    /* A file cut short loses its last line first: that tells truncation
     * even where the arrays before the cut are complete. */
    size_t tail = f->size < 64 ? f->size : 64;
    if (!find_str(end - tail, end, "</VTKFile>"))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %zu: no closing </VTKFile> at the end (truncated file?)", path,
                         f->size);
    if (ad) {
        const char *close = tag_close(ad, end);
        vtx_tag t = {ad, close, NULL, NULL};
        char enc[32];
        if (!close || !pmi_vtx_attr(&t, "encoding", enc, sizeof enc) ||
            (strcmp(enc, "raw") && strcmp(enc, "base64")))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: expected <AppendedData encoding=\"raw\"> or "
                             "encoding=\"base64\"",
                             path, pmi_vtx_offset(f, ad));
        const char *p = close + 1;
        while (p < end && is_ws(*p))
            p++;
        if (p >= end || *p != '_')
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: expected '_' before the appended data", path,
                             pmi_vtx_offset(f, p));
        f->appended = (const unsigned char *)p + 1;
        f->appended_size = (size_t)(end - (p + 1));
        f->appended_base64 = !strcmp(enc, "base64");
    }
    return PM_STATUS_OK;
}

void pmi_vtx_close(vtx_file *f)
{
    free(f->text);
    f->text = NULL;
}

/* ------------------------------------------------------------------------ */
/* base64 (RFC 4648), quad by quad so that concatenated padded streams (a   */
/* compressed array's header and its blocks) decode as VTK wrote them        */
/* ------------------------------------------------------------------------ */

static int b64_value(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes [s, e) into out (room for 3/4 of the length); *n gets the byte
 * count. Returns the offending character's pointer, or NULL when valid. */
static const char *b64_decode(const char *s, const char *e, unsigned char *out, size_t *n)
{
    size_t o = 0;
    int q[4], k = 0;
    for (const char *p = s; p < e; p++) {
        if (is_ws(*p)) continue;
        if (*p == '=') {
            q[k++] = -2;
        } else {
            if (k > 0 && q[k - 1] == -2) return p; /* data after padding in one quad */
            if ((q[k++] = b64_value((unsigned char)*p)) < 0) return p;
        }
        if (k < 4) continue;
        if (q[0] < 0 || q[1] < 0) return p;
        out[o++] = (unsigned char)(q[0] << 2 | q[1] >> 4);
        if (q[2] >= 0) out[o++] = (unsigned char)((q[1] & 15) << 4 | q[2] >> 2);
        if (q[2] >= 0 && q[3] >= 0) out[o++] = (unsigned char)((q[2] & 3) << 6 | q[3]);
        if (q[2] < 0 && q[3] >= 0) return p;
        k = 0;
    }
    *n = o;
    return k ? e : NULL;
}

/* ------------------------------------------------------------------------ */
/* DataArray                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct vtx_type {
    const char *name;
    int size;
    pmi_kind kind; /* for volumes; 64-bit integers have none */
    int is_float, is_signed;
} vtx_type;

static const vtx_type vtx_types[] = {
    {"Int8", 1, PMI_I8, 0, 1},     {"UInt8", 1, PMI_U8, 0, 0},   {"Int16", 2, PMI_I16, 0, 1},
    {"UInt16", 2, PMI_U16, 0, 0},  {"Int32", 4, PMI_I32, 0, 1},  {"UInt32", 4, PMI_U32, 0, 0},
    {"Int64", 8, PMI_F64, 0, 1},   {"UInt64", 8, PMI_F64, 0, 0}, {"Float32", 4, PMI_F32, 1, 1},
    {"Float64", 8, PMI_F64, 1, 1}, {"Char", 1, PMI_I8, 0, 1},    {"UChar", 1, PMI_U8, 0, 0}};

/* Value i of a block of the file's type (host byte order already). */
static double raw_value(const unsigned char *p, const vtx_type *t, size_t i)
{
    p += i * (size_t)t->size;
    if (t->is_float) {
        if (t->size == 4) {
            float v;
            memcpy(&v, p, 4);
            return v;
        }
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    uint64_t u = 0;
    memcpy(&u, p, (size_t)t->size); /* little-endian hosts; see the swap below */
    if (pmi_host_big_endian()) u >>= 8 * (8 - t->size);
    if (t->is_signed && t->size < 8 && (u >> (8 * t->size - 1)) & 1) u |= ~0ull << (8 * t->size);
    return t->is_signed ? (double)(int64_t)u : (double)u;
}

static uint64_t header_int(const vtx_file *f, const unsigned char *p)
{
    unsigned char b[8];
    size_t h = f->header64 ? 8 : 4;
    memcpy(b, p, h);
    if (f->swap) pmi_swap_bytes(b, 1, h);
    if (h == 4) {
        uint32_t v;
        memcpy(&v, b, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

/* The uncompressed bytes of an array from its binary layout at [p, p+len):
 * a header (byte count; or block count, block size, last block size and
 * compressed sizes) then the data. *data points into p or into *owned. */
static pm_status unpack(const vtx_file *f, const char *what, const unsigned char *p, size_t len,
                        size_t nbytes, const unsigned char **data, unsigned char **owned)
{
    size_t h = f->header64 ? 8 : 4;
    *owned = NULL;
    if (!f->zlib) {
        if (len < h || header_int(f, p) != nbytes || nbytes > len - h)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: %s: the binary header declares %llu bytes (%zu available), "
                             "expected %zu",
                             f->path, what, len < h ? 0ull : (unsigned long long)header_int(f, p),
                             len < h ? 0 : len - h, nbytes);
        *data = p + h;
        return PM_STATUS_OK;
    }
    if (len < 3 * h)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: %s: truncated compression header", f->path,
                         what);
    uint64_t nb = header_int(f, p), bs = header_int(f, p + h), last = header_int(f, p + 2 * h);
    uint64_t total = nb == 0 ? 0 : (nb - 1) * bs + (last ? last : bs);
    if (nb > (len - 3 * h) / h || (nb && (bs == 0 || (nb - 1) > UINT64_MAX / bs)) ||
        total != nbytes)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: the compression header declares %llu blocks of %llu bytes "
                         "(last %llu), expected %zu bytes in all",
                         f->path, what, (unsigned long long)nb, (unsigned long long)bs,
                         (unsigned long long)last, nbytes);
    const unsigned char *c = p + 3 * h + nb * h;
    size_t left = len - 3 * h - (size_t)nb * h;
    if (!(*owned = malloc(nbytes ? nbytes : 1)))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: %s: cannot allocate %zu bytes", f->path,
                         what, nbytes);
    size_t out = 0;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t cs = header_int(f, p + 3 * h + b * h);
        size_t us = b + 1 == nb && last ? (size_t)last : (size_t)bs;
        if (cs > left)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: %s: block %llu declares %llu compressed bytes, %zu are left",
                             f->path, what, (unsigned long long)b, (unsigned long long)cs, left);
        pm_status s = pmi_inflate_block(f->path, what, c, (size_t)cs, *owned + out, us);
        if (s != PM_STATUS_OK) return s;
        c += cs;
        left -= (size_t)cs;
        out += us;
    }
    *data = *owned;
    return PM_STATUS_OK;
}

/* Parses nvals ASCII numbers of the body into dst (doubles). */
static pm_status ascii_values(const vtx_file *f, const vtx_tag *tag, const char *what, double *dst,
                              size_t nvals)
{
    const char *p = tag->body;
    for (size_t i = 0; i < nvals; i++) {
        while (p < tag->body_end && is_ws(*p))
            p++;
        char *end;
        dst[i] = p < tag->body_end ? strtod(p, &end) : 0;
        if (p >= tag->body_end || end == p || end > tag->body_end || (!is_ws(*end) && *end != '<'))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: %s: value %zu: expected %zu ASCII numbers", f->path,
                             pmi_vtx_offset(f, p), what, i, nvals);
        p = end;
    }
    return PM_STATUS_OK;
}

/* The array's bytes as the file stores them (format binary or appended):
 * decoded base64 in *owned, or a pointer into the appended raw data. */
static pm_status array_region(const vtx_file *f, const vtx_tag *tag, const char *what,
                              const char *format, const unsigned char **p, size_t *len,
                              unsigned char **owned)
{
    *owned = NULL;
    const char *b64 = NULL, *b64_end = NULL;
    if (!strcmp(format, "binary")) {
        b64 = tag->body;
        b64_end = tag->body_end;
    } else {
        char v[32];
        uint64_t off;
        if (!f->appended)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: %s: format=\"appended\" but no <AppendedData>",
                             f->path, pmi_vtx_offset(f, tag->start), what);
        if (!pmi_vtx_attr(tag, "offset", v, sizeof v) || !pmi_parse_u64(v, &off) ||
            off > f->appended_size)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: %s: expected an offset within the %zu appended "
                             "bytes",
                             f->path, pmi_vtx_offset(f, tag->start), what, f->appended_size);
        if (!f->appended_base64) {
            *p = f->appended + off;
            *len = f->appended_size - (size_t)off;
            return PM_STATUS_OK;
        }
        b64 = (const char *)f->appended + off;
        b64_end = (const char *)f->appended + f->appended_size;
        const char *lt = memchr(b64, '<', (size_t)(b64_end - b64));
        if (lt) b64_end = lt;
    }
    size_t n = (size_t)(b64_end - b64);
    if (!(*owned = malloc(n / 4 * 3 + 3)))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: %s: cannot allocate", f->path, what);
    const char *bad = b64_decode(b64, b64_end, *owned, len);
    if (bad)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: %s: invalid base64 data", f->path,
                         pmi_vtx_offset(f, bad), what);
    *p = *owned;
    return PM_STATUS_OK;
}

static pm_status array_type(const vtx_file *f, const vtx_tag *tag, const char *what, int ncomp,
                            const vtx_type **type, char *format)
{
    char v[64];
    if (!pmi_vtx_attr(tag, "type", v, sizeof v))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: %s: DataArray without a type",
                         f->path, pmi_vtx_offset(f, tag->start), what);
    *type = NULL;
    for (size_t i = 0; i < sizeof vtx_types / sizeof vtx_types[0]; i++)
        if (!strcmp(v, vtx_types[i].name)) *type = &vtx_types[i];
    if (!*type)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: byte %llu: %s: DataArray type \"%s\" is not supported, expected "
                         "an (U)Int8/16/32/64 or Float32/64 type",
                         f->path, pmi_vtx_offset(f, tag->start), what, v);
    int64_t nc = 1;
    if (pmi_vtx_attr(tag, "NumberOfComponents", v, sizeof v) && (!pmi_parse_i64(v, &nc) || nc < 1))
        nc = -1;
    if (nc != ncomp)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: %s: NumberOfComponents %lld, expected %d", f->path,
                         pmi_vtx_offset(f, tag->start), what, (long long)nc, ncomp);
    if (!pmi_vtx_attr(tag, "format", format, 32) ||
        (strcmp(format, "ascii") && strcmp(format, "binary") && strcmp(format, "appended")))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: %s: expected format=\"ascii\", \"binary\" or "
                         "\"appended\"",
                         f->path, pmi_vtx_offset(f, tag->start), what);
    return PM_STATUS_OK;
}

/* The output block for nvals values of the requested kind. */
static pm_status out_alloc(const vtx_file *f, const char *what, size_t nvals, size_t out_size,
                           size_t extra, size_t max_memory_bytes, void **out)
{
    size_t b;
    if (!pmi_mul_size(nvals, out_size, &b) || b > SIZE_MAX - extra)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %zu values overflow size_t", f->path, what,
                         nvals);
    if (max_memory_bytes && b + extra > max_memory_bytes)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %s: %zu values need %zu bytes, more than the limit of %zu bytes",
                         f->path, what, nvals, b + extra, max_memory_bytes);
    if (!(*out = malloc(b ? b : 1)))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: %s: cannot allocate %zu bytes", f->path,
                         what, b);
    return PM_STATUS_OK;
}

static void store(void *out, vtx_out kind, size_t i, double v)
{
    if (kind == VTX_FLOAT)
        ((float *)out)[i] = (float)v;
    else if (kind == VTX_INT64)
        ((int64_t *)out)[i] = v >= -9.2e18 && v <= 9.2e18 ? (int64_t)v : INT64_MIN;
    else
        ((double *)out)[i] = v;
}

pm_status pmi_vtx_array(const vtx_file *f, const vtx_tag *tag, uint64_t count, int ncomp,
                        vtx_out kind, size_t max_memory_bytes, const char *what, void **out,
                        pm_sample_type *type)
{
    const vtx_type *t = NULL;
    char format[32];
    *out = NULL;
    pm_status s = array_type(f, tag, what, ncomp, &t, format);
    if (s != PM_STATUS_OK) return s;
    size_t nvals, nbytes;
    if (count > SIZE_MAX / (size_t)ncomp ||
        !pmi_mul_size((size_t)count * (size_t)ncomp, (size_t)t->size, &nbytes))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %llu tuples overflow size_t", f->path, what,
                         (unsigned long long)count);
    nvals = (size_t)count * (size_t)ncomp;
    if (kind == VTX_SAMPLES && t->size == 8 && !t->is_float)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: %s: 64-bit integer samples, expected 8 to "
                         "32-bit integers or floats",
                         f->path, what);
    size_t out_size = kind == VTX_FLOAT ? 4 : 8;
    if (!strcmp(format, "ascii")) {
        /* Each ASCII value needs a character and a separator. */
        if (nvals / 2 > (size_t)(tag->body_end - tag->body))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: %s: %zu ASCII values cannot fit in %zu bytes", f->path,
                             pmi_vtx_offset(f, tag->body), what, nvals,
                             (size_t)(tag->body_end - tag->body));
        double *tmp;
        if ((s = out_alloc(f, what, nvals, 8, 0, max_memory_bytes, (void **)&tmp)) != PM_STATUS_OK)
            return s;
        s = ascii_values(f, tag, what, tmp, nvals);
        if (s == PM_STATUS_OK && kind == VTX_SAMPLES) {
            /* Back to the file's type, then as for binary data. */
            unsigned char *raw = malloc(nbytes ? nbytes : 1);
            if (!raw) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", f->path);
            for (size_t i = 0; s == PM_STATUS_OK && i < nvals; i++) {
                double v = tmp[i];
                switch (t->kind) {
                case PMI_U8: raw[i] = (uint8_t)v; break;
                case PMI_I8: ((int8_t *)raw)[i] = (int8_t)v; break;
                case PMI_U16: ((uint16_t *)raw)[i] = (uint16_t)v; break;
                case PMI_I16: ((int16_t *)raw)[i] = (int16_t)v; break;
                case PMI_U32: ((uint32_t *)raw)[i] = (uint32_t)v; break;
                case PMI_I32: ((int32_t *)raw)[i] = (int32_t)v; break;
                case PMI_F32: ((float *)raw)[i] = (float)v; break;
                case PMI_F64: ((double *)raw)[i] = v; break;
                }
            }
            free(tmp);
            tmp = NULL;
            if (s == PM_STATUS_OK)
                s = pmi_samples_convert(f->path, (void **)&raw, nvals, t->kind, 0, 1, 0, type);
            if (s == PM_STATUS_OK)
                *out = raw;
            else
                free(raw);
            return s;
        }
        /* In place, front to back: a float or int64 never overtakes the
         * double it comes from. */
        if (s == PM_STATUS_OK)
            for (size_t i = 0; i < nvals; i++)
                store(tmp, kind, i, tmp[i]);
        if (s == PM_STATUS_OK)
            *out = tmp;
        else
            free(tmp);
        return s;
    }
    const unsigned char *region = NULL, *data = NULL;
    unsigned char *decoded = NULL, *inflated = NULL;
    size_t len = 0;
    s = array_region(f, tag, what, format, &region, &len, &decoded);
    if (s == PM_STATUS_OK) s = unpack(f, what, region, len, nbytes, &data, &inflated);
    if (s == PM_STATUS_OK && kind == VTX_SAMPLES) {
        unsigned char *raw;
        s = out_alloc(f, what, nvals, (size_t)t->size,
                      nvals * pm_sample_size(pmi_kind_target(t->kind, 0)), max_memory_bytes,
                      (void **)&raw);
        if (s == PM_STATUS_OK) {
            memcpy(raw, data, nbytes);
            if (f->swap) pmi_swap_bytes(raw, nvals, (size_t)t->size);
            s = pmi_samples_convert(f->path, (void **)&raw, nvals, t->kind, 0, 1, 0, type);
            if (s == PM_STATUS_OK)
                *out = raw;
            else
                free(raw);
        }
    } else if (s == PM_STATUS_OK) {
        s = out_alloc(f, what, nvals, out_size, 0, max_memory_bytes, out);
        unsigned char block[8 * 512];
        for (size_t i = 0; s == PM_STATUS_OK && i < nvals; i += 512) {
            size_t k = nvals - i < 512 ? nvals - i : 512;
            memcpy(block, data + i * (size_t)t->size, k * (size_t)t->size);
            if (f->swap) pmi_swap_bytes(block, k, (size_t)t->size);
            for (size_t j = 0; j < k; j++)
                store(*out, kind, i + j, raw_value(block, t, j));
        }
    }
    free(decoded);
    free(inflated);
    if (s != PM_STATUS_OK) {
        free(*out);
        *out = NULL;
    }
    return s;
}
