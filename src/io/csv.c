/* Points from CSV text (RFC 4180 without quoted separators): comma,
 * semicolon or tab separated; '#' lines are comments. The columns are
 * those named x, y, z (any case; ParaView's "Points:0..2" too) when the
 * first row is a header, else the first three numeric columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

#define CSV_MAX_COLUMNS 256

/* Splits a line in place at sep (any blank run when sep is ' '); quotes
 * around a field are dropped. Returns the field count. */
static int split(char *s, char sep, char **f, int max)
{
    int n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t')
            if (sep == '\t' && *s == '\t')
                break;
            else
                s++;
        if (n == max) return n + 1; /* too many */
        char *start = s;
        while (*s && *s != sep && !(sep == ' ' && *s == '\t'))
            s++;
        char *end = s;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end - start >= 2 && start[0] == '"' && end[-1] == '"') {
            start++;
            end--;
        }
        int more = *s != '\0';
        *end = '\0';
        f[n++] = start;
        if (!more) return n;
        s++;
        if (sep == ' ')
            while (*s == ' ' || *s == '\t')
                s++;
        if (sep == ' ' && !*s) return n;
    }
}

static int axis_of(const char *name)
{
    static const char *names[3][4] = {{"x", "Points:0", "Points_0", "pos_x"},
                                      {"y", "Points:1", "Points_1", "pos_y"},
                                      {"z", "Points:2", "Points_2", "pos_z"}};
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 4; k++)
            if (pmi_streq(name, names[a][k])) return a;
    return -1;
}

typedef struct csv_state {
    char sep;
    int col[3];  /* the columns of x, y, z; -1 until known */
    int started; /* the first row has been seen */
    float *xyz;
    size_t count, cap, max_memory_bytes;
} csv_state;

static pm_status add_point(pmi_reader *r, csv_state *c, const float p[3])
{
    if (c->count == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        if (c->max_memory_bytes && cap * 12 > c->max_memory_bytes)
            cap = c->max_memory_bytes / 12 > c->count ? c->max_memory_bytes / 12 : c->count + 1;
        if (c->max_memory_bytes && cap * 12 > c->max_memory_bytes)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "%s: line %llu: more than %zu points exceed the limit of %zu bytes",
                             r->path, (unsigned long long)r->line, c->count, c->max_memory_bytes);
        float *g = realloc(c->xyz, cap * 12);
        if (!g) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate points", r->path);
        c->xyz = g;
        c->cap = cap;
    }
    memcpy(c->xyz + 3 * c->count++, p, 12);
    return PM_STATUS_OK;
}

/* The first row (allow_header) or the first data row after a header that
 * named no columns: the columns of x, y, z. */
static pm_status first_row(pmi_reader *r, csv_state *c, char **f, int n, int allow_header,
                           int *is_header)
{
    double v;
    *is_header = 0;
    for (int i = 0; i < n && allow_header; i++)
        if (!pmi_parse_double(f[i], &v)) *is_header = 1;
    int k = 0;
    for (int i = 0; i < n && *is_header; i++) {
        int a = axis_of(f[i]);
        if (a >= 0 && c->col[a] < 0) c->col[a] = i;
    }
    if (c->col[0] >= 0 && c->col[1] >= 0 && c->col[2] >= 0) return PM_STATUS_OK;
    if (*is_header && (c->col[0] >= 0 || c->col[1] >= 0 || c->col[2] >= 0))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: the header names only some of x, y, z", r->path,
                         (unsigned long long)r->line);
    c->col[0] = c->col[1] = c->col[2] = -1;
    if (*is_header) return PM_STATUS_OK; /* columns from the first data row */
    for (int i = 0; i < n && k < 3; i++)
        if (pmi_parse_double(f[i], &v)) c->col[k++] = i;
    if (k < 3)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: %d numeric columns, expected at least 3 (x, y, z)",
                         r->path, (unsigned long long)r->line, k);
    return PM_STATUS_OK;
}

static pm_status data_row(pmi_reader *r, csv_state *c, char **f, int n)
{
    if (c->col[0] < 0) {
        int dummy;
        pm_status s = first_row(r, c, f, n, 0, &dummy);
        if (s != PM_STATUS_OK) return s;
    }
    float p[3];
    for (int a = 0; a < 3; a++) {
        int k = c->col[a];
        if (k >= n || !pmi_parse_float(f[k], &p[a]))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: column %d (%c): expected a number, got '%.40s'",
                             r->path, (unsigned long long)r->line, k + 1, "xyz"[a],
                             k < n ? f[k] : "(missing)");
    }
    return add_point(r, c, p);
}

pm_status pmi_csv_read(const char *path, size_t max_memory_bytes, pm_points *out)
{
    pmi_reader r;
    csv_state c = {0, {-1, -1, -1}, 0, NULL, 0, 0, max_memory_bytes};
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    char *f[CSV_MAX_COLUMNS + 1];
    for (;;) {
        char *line;
        size_t len;
        int eof;
        if ((s = pmi_read_nonblank_line(&r, &line, &len, &eof)) != PM_STATUS_OK) break;
        if (eof) break;
        if (line[0] == '#') continue;
        if (!c.sep)
            c.sep = strchr(line, ',')    ? ','
                    : strchr(line, ';')  ? ';'
                    : strchr(line, '\t') ? '\t'
                                         : ' ';
        int n = split(line, c.sep, f, CSV_MAX_COLUMNS);
        if (n > CSV_MAX_COLUMNS) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: more than %d columns", path,
                          (unsigned long long)r.line, CSV_MAX_COLUMNS);
            break;
        }
        if (!c.started) {
            int header;
            c.started = 1;
            if ((s = first_row(&r, &c, f, n, 1, &header)) != PM_STATUS_OK) break;
            if (header) continue;
        }
        if ((s = data_row(&r, &c, f, n)) != PM_STATUS_OK) break;
    }
    if (s == PM_STATUS_OK) s = pmi_points_check_finite(path, c.xyz, c.count);
    if (s == PM_STATUS_OK && !c.xyz && !(c.xyz = malloc(1)))
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    if (s == PM_STATUS_OK) {
        out->xyz = c.xyz;
        out->count = c.count;
    } else {
        free(c.xyz);
    }
    pmi_reader_close(&r);
    return s;
}
