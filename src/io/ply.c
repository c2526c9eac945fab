/* PLY (Turk, 1994; the Stanford polygon format as read by MeshLab, Open3D
 * and splashsurf): mesh writer (binary little-endian or ASCII), point and
 * mesh readers (ASCII, binary little- and big-endian; every other element
 * and property, lists included, is skipped by its declared types). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "io/mesh_read.h"

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

static void put_f32le(unsigned char *p, float v)
{
    memcpy(p, &v, 4);
    if (pmi_host_big_endian()) pmi_swap_bytes(p, 1, 4);
}

static void put_i32le(unsigned char *p, int32_t v)
{
    memcpy(p, &v, 4);
    if (pmi_host_big_endian()) pmi_swap_bytes(p, 1, 4);
}

/* Records per reserved block of the binary writer (its reserve takes at
 * most 64 KiB: 2048 vertices of 24 bytes). */
#define PLY_BATCH 2048

/* The binary body on a little-endian host: the file's bytes are the
 * arrays' own, interleaved a block at a time (vertex: position then
 * normal; face: the count 3, then the three indices, which pmi_mesh_check
 * held to int's range). */
static void ply_binary_le(pmi_writer *w, const pm_mesh *m)
{
    const int has_n = m->normals != NULL;
    const size_t vb = has_n ? 24 : 12;
    for (size_t i = 0; i < m->num_vertices;) {
        const size_t k = m->num_vertices - i < PLY_BATCH ? m->num_vertices - i : PLY_BATCH;
        unsigned char *b = pmi_writer_reserve(w, k * vb);
        if (!b) return;
        if (!has_n) {
            memcpy(b, m->positions + 3 * i, k * 12);
        } else {
            for (size_t j = 0; j < k; j++) {
                memcpy(b + 24 * j, m->positions + 3 * (i + j), 12);
                memcpy(b + 24 * j + 12, m->normals + 3 * (i + j), 12);
            }
        }
        pmi_writer_advance(w, k * vb);
        i += k;
    }
    for (size_t t = 0; t < m->num_triangles;) {
        const size_t k = m->num_triangles - t < PLY_BATCH ? m->num_triangles - t : PLY_BATCH;
        unsigned char *b = pmi_writer_reserve(w, k * 13);
        if (!b) return;
        for (size_t j = 0; j < k; j++) {
            unsigned char *p = b + 13 * j;
            p[0] = 3;
            if (m->indices) {
                memcpy(p + 1, m->indices + 3 * (t + j), 12);
            } else {
                const int32_t c[3] = {(int32_t)(3 * (t + j)), (int32_t)(3 * (t + j) + 1),
                                      (int32_t)(3 * (t + j) + 2)};
                memcpy(p + 1, c, 12);
            }
        }
        pmi_writer_advance(w, k * 13);
        t += k;
    }
}

static void ply_write_header(pmi_writer *w, const pm_mesh *m, int ascii)
{
    pmi_writer_printf(w, "ply\nformat %s 1.0\ncomment pyramesh %s\nelement vertex %zu\n",
                      ascii ? "ascii" : "binary_little_endian", PM_VERSION_STRING, m->num_vertices);
    pmi_writer_printf(w, "property float x\nproperty float y\nproperty float z\n");
    if (m->normals)
        pmi_writer_printf(w, "property float nx\nproperty float ny\nproperty float nz\n");
    pmi_writer_printf(w, "element face %zu\nproperty list uchar int vertex_indices\nend_header\n",
                      m->num_triangles);
}

static pm_status ply_put(void *user, const void *bytes, size_t n)
{
    pmi_writer *w = user;
    pmi_writer_put(w, bytes, n);
    return w->status;
}

pm_status pmi_ply_write_context(pm_context *ctx, const char *path, const pm_mesh *m)
{
    pm_status s = pmi_mesh_check_counts(path, m, INT32_MAX);
    if (s == PM_STATUS_OK) s = ctx->backend->mesh_indices_check(ctx, m, path);
    if (s != PM_STATUS_OK) return s;
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    ply_write_header(&w, m, 0);
    s = ctx->backend->ply_body(ctx, m, path, ply_put, &w);
    if (s != PM_STATUS_OK) {
        pmi_writer_abort(&w);
        return s;
    }
    return pmi_writer_commit(&w);
}

pm_status pmi_ply_write(const char *path, const pm_mesh *m, int ascii)
{
    /* Face indices are declared "int" (signed 32-bit), as most readers
     * expect. */
    pm_status s = pmi_mesh_check(path, m, INT32_MAX);
    if (s != PM_STATUS_OK) return s;
    pmi_writer w;
    if ((s = pmi_writer_open(&w, path)) != PM_STATUS_OK) return s;
    const int has_n = m->normals != NULL;
    ply_write_header(&w, m, ascii);
    if (!ascii && !pmi_host_big_endian()) {
        ply_binary_le(&w, m);
        return pmi_writer_commit(&w);
    }
    for (size_t i = 0; i < m->num_vertices; i++) {
        const float *p = m->positions + 3 * i;
        const float *n = has_n ? m->normals + 3 * i : NULL;
        if (ascii) {
            if (n)
                pmi_writer_printf(&w, "%.9g %.9g %.9g %.9g %.9g %.9g\n", p[0], p[1], p[2], n[0],
                                  n[1], n[2]);
            else
                pmi_writer_printf(&w, "%.9g %.9g %.9g\n", p[0], p[1], p[2]);
            continue;
        }
        unsigned char *b = pmi_writer_reserve(&w, 24);
        if (!b) break;
        for (int a = 0; a < 3; a++)
            put_f32le(b + 4 * a, p[a]);
        if (n)
            for (int a = 0; a < 3; a++)
                put_f32le(b + 12 + 4 * a, n[a]);
        pmi_writer_advance(&w, has_n ? 24 : 12);
    }
    for (size_t t = 0; t < m->num_triangles && w.status == PM_STATUS_OK; t++) {
        uint64_t a = pmi_mesh_index(m, t, 0), b = pmi_mesh_index(m, t, 1),
                 c = pmi_mesh_index(m, t, 2);
        if (ascii) {
            pmi_writer_printf(&w, "3 %llu %llu %llu\n", (unsigned long long)a,
                              (unsigned long long)b, (unsigned long long)c);
            continue;
        }
        unsigned char *p = pmi_writer_reserve(&w, 13);
        if (!p) break;
        p[0] = 3;
        put_i32le(p + 1, (int32_t)a);
        put_i32le(p + 5, (int32_t)b);
        put_i32le(p + 9, (int32_t)c);
        pmi_writer_advance(&w, 13);
    }
    return pmi_writer_commit(&w);
}

/* ------------------------------------------------------------------------ */
/* Point reader                                                              */
/* ------------------------------------------------------------------------ */

enum { PLY_MAX_ELEMENTS = 64, PLY_MAX_PROPS = 1024, PLY_NAME = 64 };

typedef struct ply_type {
    const char *name;
    int size;
    int is_float, is_signed;
} ply_type;

static const ply_type ply_types[] = {
    {"char", 1, 0, 1},  {"int8", 1, 0, 1},    {"uchar", 1, 0, 0},  {"uint8", 1, 0, 0},
    {"short", 2, 0, 1}, {"int16", 2, 0, 1},   {"ushort", 2, 0, 0}, {"uint16", 2, 0, 0},
    {"int", 4, 0, 1},   {"int32", 4, 0, 1},   {"uint", 4, 0, 0},   {"uint32", 4, 0, 0},
    {"float", 4, 1, 1}, {"float32", 4, 1, 1}, {"double", 8, 1, 1}, {"float64", 8, 1, 1},
};

typedef struct ply_prop {
    char name[PLY_NAME];
    const ply_type *type;       /* scalar type, or the list's item type */
    const ply_type *count_type; /* non-NULL for a list */
} ply_prop;

typedef struct ply_element {
    char name[PLY_NAME];
    uint64_t count;
    size_t first_prop, num_props;
} ply_element;

typedef struct ply_header {
    int format; /* 0 ascii, 1 binary little-endian, 2 binary big-endian */
    ply_element elements[PLY_MAX_ELEMENTS];
    size_t num_elements;
    ply_prop *props; /* PLY_MAX_PROPS */
    size_t num_props;
} ply_header;

static const ply_type *find_type(const char *name)
{
    for (size_t i = 0; i < sizeof ply_types / sizeof ply_types[0]; i++)
        if (strcmp(name, ply_types[i].name) == 0) return &ply_types[i];
    return NULL;
}

static pm_status bad_type(pmi_reader *r, const char *t)
{
    return pmi_error(PM_STATUS_PARSE_ERROR,
                     "%s: line %llu: unknown property type '%s', expected char, uchar, short, "
                     "ushort, int, uint, float, double (or int8 ... float64)",
                     r->path, (unsigned long long)r->line, t);
}

static pm_status parse_header(pmi_reader *r, ply_header *h)
{
    char *line, *w[8];
    size_t len;
    int eof, have_format = 0;
    pm_status s = pmi_read_line(r, &line, &len, &eof);
    if (s != PM_STATUS_OK) return s;
    if (eof)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: empty file, expected a PLY header", r->path);
    if (strcmp(line, "ply") != 0)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line 1: expected the magic 'ply', got '%.40s'",
                         r->path, line);
    for (;;) {
        if ((s = pmi_read_line(r, &line, &len, &eof)) != PM_STATUS_OK) return s;
        if (eof)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: end of file inside the header, expected 'end_header'",
                             r->path, (unsigned long long)r->line);
        char copy[256];
        snprintf(copy, sizeof copy, "%s", line);
        int n = pmi_split(line, w, 8);
        if (n == 0 || strcmp(w[0], "comment") == 0 || strcmp(w[0], "obj_info") == 0) continue;
        if (strcmp(w[0], "end_header") == 0) break;
        if (strcmp(w[0], "format") == 0) {
            if (n < 3 || strcmp(w[2], "1.0") != 0)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'format <type> 1.0', got '%s'", r->path,
                                 (unsigned long long)r->line, copy);
            if (strcmp(w[1], "ascii") == 0)
                h->format = 0;
            else if (strcmp(w[1], "binary_little_endian") == 0)
                h->format = 1;
            else if (strcmp(w[1], "binary_big_endian") == 0)
                h->format = 2;
            else
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: unknown format '%s', expected ascii, "
                                 "binary_little_endian or binary_big_endian",
                                 r->path, (unsigned long long)r->line, w[1]);
            have_format = 1;
        } else if (strcmp(w[0], "element") == 0) {
            uint64_t count;
            if (n != 3 || !pmi_parse_u64(w[2], &count))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'element <name> <count>' with a "
                                 "non-negative count, got '%s'",
                                 r->path, (unsigned long long)r->line, copy);
            if (h->num_elements == PLY_MAX_ELEMENTS)
                return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: more than %d elements",
                                 r->path, (unsigned long long)r->line, PLY_MAX_ELEMENTS);
            ply_element *e = &h->elements[h->num_elements++];
            snprintf(e->name, PLY_NAME, "%s", w[1]);
            e->count = count;
            e->first_prop = h->num_props;
            e->num_props = 0;
        } else if (strcmp(w[0], "property") == 0) {
            if (h->num_elements == 0)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: 'property' before any 'element'", r->path,
                                 (unsigned long long)r->line);
            if (h->num_props == PLY_MAX_PROPS)
                return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: more than %d properties",
                                 r->path, (unsigned long long)r->line, PLY_MAX_PROPS);
            ply_prop *p = &h->props[h->num_props];
            memset(p, 0, sizeof *p);
            if (n == 5 && strcmp(w[1], "list") == 0) {
                if (!(p->count_type = find_type(w[2]))) return bad_type(r, w[2]);
                if (!(p->type = find_type(w[3]))) return bad_type(r, w[3]);
                if (p->count_type->is_float)
                    return pmi_error(PM_STATUS_PARSE_ERROR,
                                     "%s: line %llu: list count type '%s' must be an integer type",
                                     r->path, (unsigned long long)r->line, w[2]);
                snprintf(p->name, PLY_NAME, "%s", w[4]);
            } else if (n == 3) {
                if (!(p->type = find_type(w[1]))) return bad_type(r, w[1]);
                snprintf(p->name, PLY_NAME, "%s", w[2]);
            } else {
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: line %llu: expected 'property <type> <name>' or 'property "
                                 "list <count type> <item type> <name>', got '%s'",
                                 r->path, (unsigned long long)r->line, copy);
            }
            h->num_props++;
            h->elements[h->num_elements - 1].num_props++;
        } else {
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: unknown header keyword '%.40s', expected format, "
                             "element, property, comment or end_header",
                             r->path, (unsigned long long)r->line, w[0]);
        }
    }
    if (!have_format)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: header has no 'format' line", r->path);
    return PM_STATUS_OK;
}

/* One binary value as a double (counts and coordinates). */
static double decode(const unsigned char *p, const ply_type *t, int swap)
{
    unsigned char b[8];
    memcpy(b, p, (size_t)t->size);
    if (swap) pmi_swap_bytes(b, 1, (size_t)t->size);
    if (t->is_float) {
        if (t->size == 4) {
            float f;
            memcpy(&f, b, 4);
            return f;
        }
        double d;
        memcpy(&d, b, 8);
        return d;
    }
    switch (t->size) {
    case 1: return t->is_signed ? (double)(int8_t)b[0] : (double)b[0];
    case 2: {
        uint16_t u;
        memcpy(&u, b, 2);
        return t->is_signed ? (double)(int16_t)u : (double)u;
    }
    default: {
        uint32_t u;
        memcpy(&u, b, 4);
        return t->is_signed ? (double)(int32_t)u : (double)u;
    }
    }
}

/* Reads (or skips) one binary record of element e; when xyz is non-NULL
 * the properties listed in which[] (index of x, y, z) are stored. */
static pm_status binary_record(pmi_reader *r, const ply_header *h, const ply_element *e, int swap,
                               const size_t *which, int nwhich, float *xyz, uint64_t rec)
{
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        unsigned char b[8];
        pm_status s;
        if (!p->count_type) {
            if ((s = pmi_read_bytes(r, b, (size_t)p->type->size, e->name)) != PM_STATUS_OK)
                return s;
            if (xyz)
                for (int a = 0; a < nwhich; a++)
                    if (which[a] == k) xyz[a] = (float)decode(b, p->type, swap);
            continue;
        }
        uint64_t at = pmi_reader_tell(r);
        if ((s = pmi_read_bytes(r, b, (size_t)p->count_type->size, e->name)) != PM_STATUS_OK)
            return s;
        double c = decode(b, p->count_type, swap);
        if (c < 0)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: %s %llu: list '%s' has negative length %.0f", r->path,
                             (unsigned long long)at, e->name, (unsigned long long)rec, p->name, c);
        if ((s = pmi_skip_bytes(r, (uint64_t)c * (uint64_t)p->type->size, e->name)) != PM_STATUS_OK)
            return s;
    }
    return PM_STATUS_OK;
}

static pm_status ascii_record(pmi_reader *r, const ply_header *h, const ply_element *e,
                              const size_t *which, int nwhich, float *xyz, uint64_t rec)
{
    char tok[256];
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        pm_status s = pmi_read_token(r, tok, sizeof tok, e->name);
        if (s != PM_STATUS_OK) return s;
        if (!p->count_type) {
            if (!xyz) continue;
            for (int a = 0; a < nwhich; a++) {
                if (which[a] != k) continue;
                double d;
                float f;
                int ok = p->type->is_float && p->type->size == 4 ? pmi_parse_float(tok, &f)
                                                                 : pmi_parse_double(tok, &d);
                if (!ok)
                    return pmi_error(PM_STATUS_PARSE_ERROR,
                                     "%s: line %llu: vertex %llu: expected a number for '%s', "
                                     "got '%s'",
                                     r->path, (unsigned long long)r->line, (unsigned long long)rec,
                                     p->name, tok);
                xyz[a] = p->type->is_float && p->type->size == 4 ? f : (float)d;
            }
            continue;
        }
        uint64_t c;
        if (!pmi_parse_u64(tok, &c))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: %s %llu: expected a list length for '%s', got '%s'",
                             r->path, (unsigned long long)r->line, e->name, (unsigned long long)rec,
                             p->name, tok);
        for (uint64_t i = 0; i < c; i++)
            if ((s = pmi_read_token(r, tok, sizeof tok, p->name)) != PM_STATUS_OK) return s;
    }
    return PM_STATUS_OK;
}

/* Skips a whole element that comes before the vertices. */
static pm_status skip_element(pmi_reader *r, const ply_header *h, const ply_element *e, int swap)
{
    uint64_t fixed = 0;
    int has_list = 0;
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        has_list |= p->count_type != NULL;
        fixed += (uint64_t)p->type->size;
    }
    /* An element without properties occupies no bytes, whatever its count
     * (and must not cost a loop over that count). */
    if (e->num_props == 0) return PM_STATUS_OK;
    if (h->format != 0 && !has_list) {
        uint64_t total;
        if (__builtin_mul_overflow(fixed, e->count, &total))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: element '%s': %llu records of %llu bytes overflow", r->path,
                             e->name, (unsigned long long)e->count, (unsigned long long)fixed);
        return pmi_skip_bytes(r, total, e->name);
    }
    for (uint64_t i = 0; i < e->count; i++) {
        pm_status s = h->format == 0 ? ascii_record(r, h, e, NULL, 0, NULL, i)
                                     : binary_record(r, h, e, swap, NULL, 0, NULL, i);
        if (s != PM_STATUS_OK) return s;
    }
    return PM_STATUS_OK;
}

static pm_status read_vertices(pmi_reader *r, const ply_header *h, const ply_element *e,
                               const size_t which[3], size_t max_memory_bytes, pm_points *out)
{
    const int swap = h->format != 0 && (h->format == 2) != pmi_host_big_endian();
    uint64_t rec_min = 0;
    int has_list = 0;
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        has_list |= p->count_type != NULL;
        /* ASCII: at least one digit and one separator per value. */
        rec_min += h->format == 0 ? 2 : (uint64_t)(p->count_type ? p->count_type : p->type)->size;
    }
    float *xyz;
    pm_status s =
        pmi_points_alloc(r->path, "element vertex", e->count, rec_min,
                         pmi_reader_remaining(r) + (h->format == 0), max_memory_bytes, &xyz);
    if (s != PM_STATUS_OK) return s;
    size_t n = (size_t)e->count;
    if (h->format != 0 && !has_list) {
        /* Fixed-size records: read blocks of them at once. */
        size_t offs[3];
        for (int a = 0; a < 3; a++) {
            offs[a] = 0;
            for (size_t k = 0; k < which[a]; k++)
                offs[a] += (size_t)h->props[e->first_prop + k].type->size;
        }
        size_t rec = (size_t)rec_min, block = (1u << 20) / rec + 1;
        unsigned char *buf = malloc(block * rec);
        if (!buf) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
        for (size_t i = 0; i < n && s == PM_STATUS_OK; i += block) {
            size_t k = n - i < block ? n - i : block;
            if ((s = pmi_read_bytes(r, buf, k * rec, "element vertex")) != PM_STATUS_OK) break;
            for (size_t j = 0; j < k; j++)
                for (int a = 0; a < 3; a++)
                    xyz[3 * (i + j) + (size_t)a] = (float)decode(
                        buf + j * rec + offs[a], h->props[e->first_prop + which[a]].type, swap);
        }
        free(buf);
    } else {
        for (size_t i = 0; i < n && s == PM_STATUS_OK; i++)
            s = h->format == 0 ? ascii_record(r, h, e, which, 3, xyz + 3 * i, i)
                               : binary_record(r, h, e, swap, which, 3, xyz + 3 * i, i);
    }
    if (s == PM_STATUS_OK) s = pmi_points_check_finite(r->path, xyz, n);
    if (s != PM_STATUS_OK) {
        free(xyz);
        return s;
    }
    out->count = n;
    out->xyz = xyz;
    return PM_STATUS_OK;
}

/* The header of the open file r into a new *hp, NULL when it could not be
 * allocated; the caller frees it with free_header whatever the status. */
static pm_status read_header(pmi_reader *r, const char *path, ply_header **hp)
{
    ply_header *h = calloc(1, sizeof *h);
    if (h) h->props = calloc(PLY_MAX_PROPS, sizeof *h->props);
    *hp = h;
    if (!h || !h->props) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    return parse_header(r, h);
}

static void free_header(ply_header *h)
{
    if (h) free(h->props);
    free(h);
}

pm_status pmi_ply_read_points(const char *path, size_t max_memory_bytes, pm_points *out)
{
    pmi_reader r;
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    ply_header *h;
    if ((s = read_header(&r, path, &h)) != PM_STATUS_OK) goto done;
    const ply_element *v = NULL;
    for (size_t i = 0; i < h->num_elements && !v; i++)
        if (strcmp(h->elements[i].name, "vertex") == 0) v = &h->elements[i];
    if (!v) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: header: no 'element vertex', expected one", path);
        goto done;
    }
    size_t which[3];
    for (int a = 0; a < 3; a++) {
        const char name[2] = {"xyz"[a], '\0'};
        which[a] = SIZE_MAX;
        for (size_t k = 0; k < v->num_props; k++)
            if (strcmp(h->props[v->first_prop + k].name, name) == 0) which[a] = k;
        if (which[a] == SIZE_MAX || h->props[v->first_prop + which[a]].count_type) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: header: element vertex has no scalar property '%s', expected x, "
                          "y and z",
                          path, name);
            goto done;
        }
    }
    const int swap = h->format != 0 && (h->format == 2) != pmi_host_big_endian();
    /* Elements before the vertices are skipped; those after are not read. */
    for (const ply_element *e = h->elements; e < v && s == PM_STATUS_OK; e++)
        s = skip_element(&r, h, e, swap);
    if (s == PM_STATUS_OK) s = read_vertices(&r, h, v, which, max_memory_bytes, out);
done:
    free_header(h);
    pmi_reader_close(&r);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Mesh reader                                                               */
/* ------------------------------------------------------------------------ */

/* Index of the scalar property `name` of element e, or SIZE_MAX. */
static size_t find_scalar(const ply_header *h, const ply_element *e, const char *name)
{
    for (size_t k = 0; k < e->num_props; k++)
        if (!h->props[e->first_prop + k].count_type &&
            strcmp(h->props[e->first_prop + k].name, name) == 0)
            return k;
    return SIZE_MAX;
}

/* Smallest number of file bytes one record of e can occupy. */
static uint64_t record_min(const ply_header *h, const ply_element *e)
{
    uint64_t m = 0;
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        m += h->format == 0 ? 2 : (uint64_t)(p->count_type ? p->count_type : p->type)->size;
    }
    return m;
}

static pm_status mesh_vertices(pmi_reader *r, const ply_header *h, const ply_element *e,
                               pmi_mesh_builder *b)
{
    const int swap = h->format != 0 && (h->format == 2) != pmi_host_big_endian();
    size_t which[6];
    static const char *names[6] = {"x", "y", "z", "nx", "ny", "nz"};
    for (int a = 0; a < 6; a++)
        which[a] = find_scalar(h, e, names[a]);
    const int nw = which[3] != SIZE_MAX && which[4] != SIZE_MAX && which[5] != SIZE_MAX ? 6 : 3;
    if (e->count > (uint64_t)UINT32_MAX + 1)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: element vertex: %llu vertices exceed the mesh's 32-bit indices",
                         r->path, (unsigned long long)e->count);
    pm_status s = pmi_mb_vertices_exact(b, e->count, record_min(h, e),
                                        pmi_reader_remaining(r) + (h->format == 0), nw == 6,
                                        "element vertex");
    if (s != PM_STATUS_OK) return s;
    int has_list = 0;
    size_t rec = 0, offs[6] = {0};
    for (size_t k = 0; k < e->num_props; k++) {
        const ply_prop *p = &h->props[e->first_prop + k];
        has_list |= p->count_type != NULL;
        for (int a = 0; a < nw; a++)
            if (which[a] == k) offs[a] = rec;
        rec += (size_t)p->type->size;
    }
    const size_t n = b->num_vertices;
    if (h->format != 0 && !has_list) {
        /* Fixed-size records: blocks of them at once. */
        size_t block = (1u << 20) / rec + 1;
        unsigned char *buf = malloc(block * rec);
        if (!buf) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", r->path);
        for (size_t i = 0; i < n && s == PM_STATUS_OK; i += block) {
            size_t k = n - i < block ? n - i : block;
            if ((s = pmi_read_bytes(r, buf, k * rec, "element vertex")) != PM_STATUS_OK) break;
            for (size_t j = 0; j < k; j++)
                for (int a = 0; a < nw; a++) {
                    float v = (float)decode(buf + j * rec + offs[a],
                                            h->props[e->first_prop + which[a]].type, swap);
                    if (a < 3)
                        b->positions[3 * (i + j) + (size_t)a] = v;
                    else
                        b->normals[3 * (i + j) + (size_t)a - 3] = v;
                }
        }
        free(buf);
        return s;
    }
    for (size_t i = 0; i < n && s == PM_STATUS_OK; i++) {
        float v[6];
        s = h->format == 0 ? ascii_record(r, h, e, which, nw, v, i)
                           : binary_record(r, h, e, swap, which, nw, v, i);
        memcpy(b->positions + 3 * i, v, 3 * sizeof(float));
        if (nw == 6) memcpy(b->normals + 3 * i, v + 3, 3 * sizeof(float));
    }
    return s;
}

/* One vertex index of a face list, from a decoded value. */
static pm_status face_index(pmi_reader *r, pmi_mesh_builder *b, double d)
{
    if (!(d >= 0) || d != floor(d))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: face %llu (0-based): vertex index %g is not a "
                         "non-negative integer",
                         r->path, (unsigned long long)pmi_reader_tell(r),
                         (unsigned long long)b->face, d);
    return pmi_mb_poly_corner(b, d > (double)UINT64_MAX / 2 ? UINT64_MAX : (uint64_t)d, "face");
}

static pm_status mesh_faces(pmi_reader *r, const ply_header *h, const ply_element *e, size_t list,
                            pmi_mesh_builder *b)
{
    const int swap = h->format != 0 && (h->format == 2) != pmi_host_big_endian();
    uint64_t fmin = record_min(h, e), avail = pmi_reader_remaining(r) + (h->format == 0), need;
    if (__builtin_mul_overflow(e->count, fmin, &need) || need > avail)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: element face: %llu faces need at least %llu bytes each, but only "
                         "%llu bytes follow in the file",
                         r->path, (unsigned long long)e->count, (unsigned long long)fmin,
                         (unsigned long long)avail);
    /* Most files hold triangles: reserve one triangle per face, as far as
     * the bytes left could hold triangle records. */
    const ply_prop *lp = &h->props[e->first_prop + list];
    uint64_t tri_min = fmin + (h->format == 0 ? 6 : 3 * (uint64_t)lp->type->size);
    uint64_t reserve = e->count < avail / tri_min ? e->count : avail / tri_min;
    pm_status s = pmi_mb_reserve_triangles(b, (size_t)reserve, "element face");
    char tok[256];
    for (uint64_t f = 0; f < e->count && s == PM_STATUS_OK; f++) {
        for (size_t k = 0; k < e->num_props && s == PM_STATUS_OK; k++) {
            const ply_prop *p = &h->props[e->first_prop + k];
            if (k != list) {
                /* Another property of the face: skipped by its type. */
                if (h->format == 0) {
                    ply_element one = {"face", 1, e->first_prop + k, 1};
                    s = ascii_record(r, h, &one, NULL, 0, NULL, f);
                } else {
                    ply_element one = {"face", 1, e->first_prop + k, 1};
                    s = binary_record(r, h, &one, swap, NULL, 0, NULL, f);
                }
                continue;
            }
            uint64_t count;
            pmi_mb_poly_begin(b, f, 0);
            if (h->format == 0) {
                if ((s = pmi_read_token(r, tok, sizeof tok, "element face")) != PM_STATUS_OK) break;
                if (!pmi_parse_u64(tok, &count)) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: line %llu: face %llu (0-based): expected a list length, "
                                  "got '%.40s'",
                                  r->path, (unsigned long long)r->line, (unsigned long long)f, tok);
                    break;
                }
                for (uint64_t i = 0; i < count && s == PM_STATUS_OK; i++) {
                    if ((s = pmi_read_token(r, tok, sizeof tok, "element face")) != PM_STATUS_OK)
                        break;
                    double d;
                    if (!pmi_parse_double(tok, &d)) {
                        s = pmi_error(PM_STATUS_PARSE_ERROR,
                                      "%s: line %llu: face %llu (0-based): expected a vertex "
                                      "index, got '%.40s'",
                                      r->path, (unsigned long long)r->line, (unsigned long long)f,
                                      tok);
                        break;
                    }
                    s = face_index(r, b, d);
                }
            } else {
                unsigned char v[8];
                if ((s = pmi_read_bytes(r, v, (size_t)p->count_type->size, "element face")) !=
                    PM_STATUS_OK)
                    break;
                double c = decode(v, p->count_type, swap);
                if (c < 0) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: byte %llu: face %llu (0-based): negative list length %.0f",
                                  r->path, (unsigned long long)pmi_reader_tell(r),
                                  (unsigned long long)f, c);
                    break;
                }
                count = (uint64_t)c;
                if (count * (uint64_t)p->type->size > pmi_reader_remaining(r)) {
                    s = pmi_error(PM_STATUS_PARSE_ERROR,
                                  "%s: byte %llu: face %llu (0-based): unexpected end of file in "
                                  "a list of %llu indices (%llu bytes left)",
                                  r->path, (unsigned long long)pmi_reader_tell(r),
                                  (unsigned long long)f, (unsigned long long)count,
                                  (unsigned long long)pmi_reader_remaining(r));
                    break;
                }
                for (uint64_t i = 0; i < count && s == PM_STATUS_OK; i++) {
                    if ((s = pmi_read_bytes(r, v, (size_t)p->type->size, "element face")) !=
                        PM_STATUS_OK)
                        break;
                    s = face_index(r, b, decode(v, p->type, swap));
                }
            }
        }
    }
    return s;
}

pm_status pmi_ply_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    pmi_reader r;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    pm_status s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    ply_header *h;
    if ((s = read_header(&r, path, &h)) != PM_STATUS_OK) goto done;
    const ply_element *v = NULL, *fe = NULL;
    size_t list = SIZE_MAX;
    for (size_t i = 0; i < h->num_elements; i++) {
        if (!v && strcmp(h->elements[i].name, "vertex") == 0) v = &h->elements[i];
        if (!fe && strcmp(h->elements[i].name, "face") == 0) fe = &h->elements[i];
    }
    if (!v) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: header: no 'element vertex', expected one", path);
        goto done;
    }
    for (int a = 0; a < 3; a++)
        if (find_scalar(h, v, (const char *[]){"x", "y", "z"}[a]) == SIZE_MAX) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: header: element vertex has no scalar property '%c', expected x, y "
                          "and z",
                          path, "xyz"[a]);
            goto done;
        }
    if (fe) {
        /* vertex_indices (the standard name) or vertex_index (older files);
         * failing both, the face's only list. */
        size_t lists = 0, any = SIZE_MAX;
        for (size_t k = 0; k < fe->num_props; k++) {
            const ply_prop *p = &h->props[fe->first_prop + k];
            if (!p->count_type) continue;
            lists++;
            any = k;
            if (strcmp(p->name, "vertex_indices") == 0 || strcmp(p->name, "vertex_index") == 0)
                list = k;
        }
        if (list == SIZE_MAX && lists == 1) list = any;
        if (list == SIZE_MAX) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: header: element face has no list property 'vertex_indices'", path);
            goto done;
        }
        if (h->props[fe->first_prop + list].type->is_float) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: header: face list '%s' has a floating-point item type, expected "
                          "an integer type",
                          path, h->props[fe->first_prop + list].name);
            goto done;
        }
    }
    const int swap = h->format != 0 && (h->format == 2) != pmi_host_big_endian();
    /* Elements are read in file order: the faces' indices are checked
     * against the vertex count, so the vertices must come first. */
    int have_vertices = 0;
    for (const ply_element *e = h->elements; e < h->elements + h->num_elements; e++) {
        if (e == v) {
            s = mesh_vertices(&r, h, e, &b);
            have_vertices = 1;
        } else if (e == fe) {
            if (!have_vertices) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: header: element face comes before element vertex, expected "
                              "the vertices first",
                              path);
                break;
            }
            s = mesh_faces(&r, h, e, list, &b);
            break; /* what follows the faces is not needed */
        } else {
            s = skip_element(&r, h, e, swap);
        }
        if (s != PM_STATUS_OK) break;
    }
    if (s == PM_STATUS_OK) s = pmi_mb_finish(&b, out);
done:
    pmi_mb_free(&b);
    free_header(h);
    pmi_reader_close(&r);
    return s;
}
