/* XYZ point files: text (one point per line, whitespace- or comma-separated,
 * extra columns ignored) or binary (little-endian float32 triplets, as
 * splashsurf reads .xyz). The rule telling them apart is in docs/formats.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* How many leading bytes decide between text and binary. */
#define XYZ_SNIFF_BYTES 4096

static int text_byte(unsigned char c)
{
    return (c >= 0x20 && c <= 0x7e) || (c >= 0x09 && c <= 0x0d);
}

static int is_sep(char c) { return c == ' ' || c == '\t' || c == ',' || c == '\v' || c == '\f'; }

static pm_status read_binary(pmi_reader *r, size_t max_memory_bytes, pm_points *out)
{
    uint64_t rem = pmi_reader_remaining(r);
    if (rem % 12 != 0)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: binary XYZ of %llu bytes: expected a multiple of 12 (3 float32 per "
                         "point)",
                         r->path, (unsigned long long)rem);
    float *xyz;
    pm_status s =
        pmi_points_alloc(r->path, "binary XYZ", rem / 12, 12, rem, max_memory_bytes, &xyz);
    if (s != PM_STATUS_OK) return s;
    size_t n = (size_t)(rem / 12);
    s = pmi_read_bytes(r, xyz, n * 12, "binary XYZ data");
    if (s == PM_STATUS_OK && pmi_host_big_endian()) pmi_swap_bytes(xyz, 3 * n, 4);
    if (s == PM_STATUS_OK) s = pmi_points_check_finite(r->path, xyz, n);
    if (s != PM_STATUS_OK) {
        free(xyz);
        return s;
    }
    out->count = n;
    out->xyz = xyz;
    return PM_STATUS_OK;
}

static pm_status read_text(pmi_reader *r, size_t max_memory_bytes, pm_points *out)
{
    size_t n = 0, cap = 0;
    float *xyz = NULL;
    pm_status s = PM_STATUS_OK;
    for (;;) {
        char *line;
        size_t len;
        int eof;
        if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK || eof) break;
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\v' || *p == '\f')
            p++;
        if (!*p || *p == '#' || (p[0] == '/' && p[1] == '/')) continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 4096, bytes;
            if (!pmi_mul_size(ncap, 12, &bytes)) {
                s = pmi_error(PM_STATUS_OVERFLOW, "%s: too many points", r->path);
                break;
            }
            if (max_memory_bytes && bytes > max_memory_bytes) {
                /* Grow to the limit exactly before giving up. */
                ncap = max_memory_bytes / 12;
                bytes = ncap * 12;
                if (ncap <= n) {
                    s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                                  "%s: line %llu: more than %zu points do not fit the limit of "
                                  "%zu bytes",
                                  r->path, (unsigned long long)r->line, n, max_memory_bytes);
                    break;
                }
            }
            float *grown = realloc(xyz, bytes);
            if (!grown) {
                s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for points",
                              r->path, bytes);
                break;
            }
            xyz = grown;
            cap = ncap;
        }
        for (int a = 0; a < 3 && s == PM_STATUS_OK; a++) {
            char *end;
            float v = strtof(p, &end);
            if (end == p || (*end && !is_sep(*end))) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: line %llu: expected at least 3 numbers 'x y z' (blank- or "
                              "comma-separated), got '%.60s'",
                              r->path, (unsigned long long)r->line, line);
                break;
            }
            xyz[3 * n + (size_t)a] = v;
            p = end;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == ',') p++;
            while (*p == ' ' || *p == '\t')
                p++;
        }
        if (s != PM_STATUS_OK) break;
        n++;
    }
    if (s == PM_STATUS_OK) s = pmi_points_check_finite(r->path, xyz, n);
    if (s != PM_STATUS_OK) {
        free(xyz);
        return s;
    }
    out->count = n;
    out->xyz = xyz ? xyz : malloc(1);
    if (!out->xyz) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
    return PM_STATUS_OK;
}

pm_status pmi_xyz_read(const char *path, pm_points_format format, size_t max_memory_bytes,
                       pm_points *out)
{
    pmi_reader r;
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    if (r.size == 0) {
        pmi_reader_close(&r);
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: empty file, expected XYZ points", path);
    }
    /* A UTF-8 byte order mark is not part of the text. */
    size_t k = pmi_reader_peek(&r, XYZ_SNIFF_BYTES);
    size_t bom = k >= 3 && memcmp(r.buf + r.pos, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    if (format == PM_POINTS_AUTO) {
        format = PM_POINTS_XYZ_TEXT;
        for (size_t i = bom; i < k; i++)
            if (!text_byte(r.buf[r.pos + i])) {
                format = PM_POINTS_XYZ_BINARY;
                break;
            }
    }
    if (format == PM_POINTS_XYZ_TEXT) r.pos += bom;
    s = format == PM_POINTS_XYZ_BINARY ? read_binary(&r, max_memory_bytes, out)
                                       : read_text(&r, max_memory_bytes, out);
    pmi_reader_close(&r);
    return s;
}
