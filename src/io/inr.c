/* INRIA volumes (.inr, .inr.gz; the Inrimage format CGAL's Image_3 reads):
 * a text header of 256-byte blocks from "#INRIMAGE-4#{" to "##}", then
 * the samples, x fastest; gzip-compressed files are told by their magic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

#define INR_BLOCK 256
#define INR_MAX_BLOCKS 64 /* a 16 KiB header is far beyond any real one */

typedef struct inr_header {
    int64_t dim[4]; /* XDIM YDIM ZDIM VDIM */
    int type;       /* 0 unknown, 1 unsigned fixed, 2 signed fixed, 3 float */
    int bits;
    int big_endian;
    double spacing[3], origin[3];
} inr_header;

static pm_status field(const char *path, inr_header *h, const char *key, const char *value,
                       size_t offset)
{
    static const char *dims[] = {"XDIM", "YDIM", "ZDIM", "VDIM"};
    static const char *vox[] = {"VX", "VY", "VZ"};
    static const char *org[] = {"XO", "YO", "ZO"}, *org2[] = {"TX", "TY", "TZ"};
    for (int a = 0; a < 4; a++)
        if (!strcmp(key, dims[a])) {
            if (!pmi_parse_i64(value, &h->dim[a]) || h->dim[a] < 1) goto bad_number;
            return PM_STATUS_OK;
        }
    for (int a = 0; a < 3; a++) {
        if (!strcmp(key, vox[a])) {
            if (!pmi_parse_double(value, &h->spacing[a]) || !(h->spacing[a] > 0) ||
                !isfinite(h->spacing[a]))
                goto bad_number;
            return PM_STATUS_OK;
        }
        if (!strcmp(key, org[a]) || !strcmp(key, org2[a])) {
            if (!pmi_parse_double(value, &h->origin[a]) || !isfinite(h->origin[a])) goto bad_number;
            return PM_STATUS_OK;
        }
    }
    if (!strcmp(key, "TYPE")) {
        h->type = !strcmp(value, "unsigned fixed") ? 1
                  : !strcmp(value, "signed fixed") ? 2
                  : !strcmp(value, "float")        ? 3
                                                   : 0;
        if (!h->type)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: byte %zu: TYPE=%.40s, expected 'unsigned fixed', 'signed "
                             "fixed' or 'float'",
                             path, offset, value);
    } else if (!strcmp(key, "PIXSIZE")) {
        int64_t b;
        char num[32];
        if (sscanf(value, "%31s", num) != 1 || !pmi_parse_i64(num, &b) ||
            !(b == 8 || b == 16 || b == 32 || b == 64) || !strstr(value, "bits"))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %zu: PIXSIZE=%.40s, expected '8 bits', '16 bits', '32 "
                             "bits' or '64 bits'",
                             path, offset, value);
        h->bits = (int)b;
    } else if (!strcmp(key, "CPU")) {
        if (!strcmp(value, "decm") || !strcmp(value, "alpha") || !strcmp(value, "pc"))
            h->big_endian = 0;
        else if (!strcmp(value, "sun") || !strcmp(value, "sgi"))
            h->big_endian = 1;
        else
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %zu: CPU=%.40s, expected decm, alpha or pc (little-endian) "
                             "or sun or sgi (big-endian)",
                             path, offset, value);
    }
    /* SCALE (fixed-point scaling) and other keys do not change the grid. */
    return PM_STATUS_OK;
bad_number:
    return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %zu: %s=%.40s, expected a %s number", path,
                     offset, key, value, key[0] == 'V' && key[1] != 'D' ? "positive" : "valid");
}

/* Reads 256-byte blocks until the one that holds "##}" and parses the
 * KEY=VALUE lines between the magic and it. */
static pm_status read_header(pmi_source *src, inr_header *h)
{
    const char *path = src->r.path;
    static const char magic[] = "#INRIMAGE-4#{";
    char text[INR_BLOCK * INR_MAX_BLOCKS + 1];
    size_t n = 0;
    char *end = NULL;
    while (!end) {
        if (n == sizeof text - 1)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: no '##}' in the first %d bytes, expected the end of the INRIA "
                             "header",
                             path, INR_BLOCK * INR_MAX_BLOCKS);
        pm_status s =
            pmi_source_read(src, text + n, INR_BLOCK, "the INRIA header (256-byte blocks)");
        if (s != PM_STATUS_OK) return s;
        if (n == 0 && memcmp(text, magic, sizeof magic - 1) != 0)
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte 0: expected the magic '%s'", path,
                             magic);
        n += INR_BLOCK;
        text[n] = '\0';
        for (size_t i = n - INR_BLOCK; i < n; i++)
            if (text[i] == '\0')
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: byte %zu: a NUL byte in the header, expected text", path, i);
        end = strstr(text, "##}");
    }
    *end = '\0';
    char *line = strchr(text, '\n');
    while (line) {
        line++;
        char *next = strchr(line, '\n');
        if (next) *next = '\0';
        char *eq = strchr(line, '=');
        if (line[0] != '#' && eq) {
            *eq = '\0';
            pm_status s = field(path, h, line, eq + 1, (size_t)(line - text));
            if (s != PM_STATUS_OK) return s;
        }
        line = next;
    }
    return PM_STATUS_OK;
}

static pm_status sample_kind(const char *path, const inr_header *h, pmi_kind *k)
{
    if (h->type == 1 && h->bits <= 32) {
        *k = h->bits == 8 ? PMI_U8 : h->bits == 16 ? PMI_U16 : PMI_U32;
        return PM_STATUS_OK;
    }
    if (h->type == 2 && h->bits <= 32) {
        *k = h->bits == 8 ? PMI_I8 : h->bits == 16 ? PMI_I16 : PMI_I32;
        return PM_STATUS_OK;
    }
    if (h->type == 3 && (h->bits == 32 || h->bits == 64)) {
        *k = h->bits == 32 ? PMI_F32 : PMI_F64;
        return PM_STATUS_OK;
    }
    if (!h->type || !h->bits)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: the header lacks %s", path,
                         !h->type ? "TYPE" : "PIXSIZE");
    return pmi_error(PM_STATUS_UNSUPPORTED, "%s: %s samples of %d bits are not supported", path,
                     h->type == 3 ? "float" : "64-bit integer", h->bits);
}

pm_status pmi_inr_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    pmi_source src;
    inr_header h;
    memset(&h, 0, sizeof h);
    h.dim[3] = 1;
    for (int a = 0; a < 3; a++)
        h.spacing[a] = 1;
    void *data = NULL;
    size_t bytes;
    pmi_kind kind = PMI_U8;
    pm_status s = pmi_source_open(&src, path);
    if (s != PM_STATUS_OK) return s;
    if ((s = read_header(&src, &h)) != PM_STATUS_OK) goto done;
    for (int a = 0; a < 3; a++)
        if (h.dim[a] < 1 || (uint64_t)h.dim[a] > SIZE_MAX) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: the header lacks a valid %cDIM", path,
                          "XYZ"[a]);
            goto done;
        }
    if (h.dim[3] != 1) {
        s = pmi_error(PM_STATUS_UNSUPPORTED,
                      "%s: VDIM=%lld: vector samples, expected a scalar volume (VDIM=1)", path,
                      (long long)h.dim[3]);
        goto done;
    }
    if ((s = sample_kind(path, &h, &kind)) != PM_STATUS_OK) goto done;
    s = pmi_volume_alloc_kind(path, "XDIM/YDIM/ZDIM", (size_t)h.dim[0], (size_t)h.dim[1],
                              (size_t)h.dim[2], kind, 0, max_memory_bytes, pmi_source_bound(&src),
                              &data, &bytes);
    if (s == PM_STATUS_OK) s = pmi_source_read(&src, data, bytes, "the sample data");
    if (s == PM_STATUS_OK) s = pmi_source_finish(&src);
    if (s != PM_STATUS_OK) goto done;
    size_t count = bytes / pmi_kind_size(kind);
    if (h.big_endian != pmi_host_big_endian()) pmi_swap_bytes(data, count, pmi_kind_size(kind));
    pm_sample_type type;
    if ((s = pmi_samples_convert(path, &data, count, kind, 0, 1, 0, &type)) != PM_STATUS_OK)
        goto done;
    out->data = data;
    data = NULL;
    out->type = type;
    out->nx = (size_t)h.dim[0];
    out->ny = (size_t)h.dim[1];
    out->nz = (size_t)h.dim[2];
    out->row_stride = out->nx;
    out->slice_stride = out->nx * out->ny;
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = h.spacing[a];
        out->origin[a] = h.origin[a];
    }
done:
    free(data);
    pmi_source_close(&src);
    return s;
}
