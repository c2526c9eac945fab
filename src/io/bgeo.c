/* Houdini's classic binary geometry (.bgeo, .bgeo.gz: magic "Bgeo", 'V',
 * version 5, as Partio and splashsurf read and write it): the point
 * positions P. Big-endian throughout; the point attribute definitions are
 * parsed to learn each point's record size; primitives and everything
 * after the points are not read. Houdini 12's JSON-based .bgeo is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

#define BGEO_MAX_ATTRIBS 4096

static pm_status read_be(pmi_source *s, void *v, size_t n, const char *what)
{
    pm_status st = pmi_source_read(s, v, n, what);
    if (st == PM_STATUS_OK && !pmi_host_big_endian()) pmi_swap_bytes(v, 1, n);
    return st;
}

/* One point attribute definition; *words gets its 32-bit values per point. */
static pm_status read_attribute(pmi_source *s, int i, uint64_t *words)
{
    const char *path = s->r.path;
    uint16_t name_len, size;
    int32_t type;
    char name[256];
    pm_status st = read_be(s, &name_len, 2, "a point attribute's name length");
    if (st != PM_STATUS_OK) return st;
    size_t keep = name_len < sizeof name - 1 ? name_len : sizeof name - 1;
    if ((st = pmi_source_read(s, name, keep, "a point attribute's name")) != PM_STATUS_OK ||
        (st = pmi_source_skip(s, name_len - keep, "a point attribute's name")) != PM_STATUS_OK ||
        (st = read_be(s, &size, 2, "a point attribute's size")) != PM_STATUS_OK ||
        (st = read_be(s, &type, 4, "a point attribute's type")) != PM_STATUS_OK)
        return st;
    name[keep] = '\0';
    int base = type & 0xff;
    if (base == 4) {
        /* An index (string) attribute: its strings, then one int per point. */
        int32_t nstrings;
        if ((st = read_be(s, &nstrings, 4, "an index attribute's string count")) != PM_STATUS_OK)
            return st;
        if (nstrings < 0)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: point attribute %d ('%s'): %d strings", path,
                             (unsigned long long)s->pos, i, name, (int)nstrings);
        for (int32_t k = 0; k < nstrings; k++) {
            uint16_t len;
            if ((st = read_be(s, &len, 2, "an index attribute's string")) != PM_STATUS_OK ||
                (st = pmi_source_skip(s, len, "an index attribute's string")) != PM_STATUS_OK)
                return st;
        }
        *words = size;
        return PM_STATUS_OK;
    }
    if (base != 0 && base != 1 && base != 5)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: byte %llu: point attribute %d ('%s') has type %d, expected float "
                         "(0), int (1), index (4) or vector (5)",
                         path, (unsigned long long)s->pos, i, name, (int)type);
    /* Default values: size 32-bit words. */
    *words = size;
    return pmi_source_skip(s, 4 * (uint64_t)size, "a point attribute's defaults");
}

pm_status pmi_bgeo_read(const char *path, size_t max_memory_bytes, pm_points *out)
{
    pmi_source s;
    float *xyz = NULL;
    unsigned char *rec = NULL;
    pm_status st = pmi_source_open(&s, path);
    if (st != PM_STATUS_OK) return st;
    unsigned char magic[5];
    int32_t version, counts[8];
    if ((st = pmi_source_read(&s, magic, 5, "the bgeo magic")) != PM_STATUS_OK) goto done;
    if (memcmp(magic, "Bgeo", 4) != 0 || magic[4] != 'V') {
        int json = magic[0] == 0x7f || magic[0] == '{' || magic[0] == '[';
        st = pmi_error(json ? PM_STATUS_UNSUPPORTED : PM_STATUS_PARSE_ERROR,
                       "%s: byte 0: %s, expected the classic magic 'BgeoV'", path,
                       json ? "Houdini's JSON-based geometry (Houdini 12 and later) is not "
                              "supported; save as classic .bgeo (Bgeo V5), .ply or .vtk"
                            : "not a Houdini .bgeo file");
        goto done;
    }
    if ((st = read_be(&s, &version, 4, "the bgeo version")) != PM_STATUS_OK) goto done;
    if (version != 5) {
        st = pmi_error(PM_STATUS_UNSUPPORTED, "%s: byte 5: bgeo version %d, expected 5", path,
                       (int)version);
        goto done;
    }
    static const char *names[8] = {
        "points",           "primitives",        "point groups",         "primitive groups",
        "point attributes", "vertex attributes", "primitive attributes", "detail attributes"};
    for (int i = 0; i < 8; i++) {
        if ((st = read_be(&s, &counts[i], 4, names[i])) != PM_STATUS_OK) goto done;
        if (counts[i] < 0) {
            st = pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %d: %d %s, expected a count", path,
                           9 + 4 * i, (int)counts[i], names[i]);
            goto done;
        }
    }
    if (counts[4] > BGEO_MAX_ATTRIBS) {
        st = pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte 25: %d point attributes, at most %d", path,
                       (int)counts[4], BGEO_MAX_ATTRIBS);
        goto done;
    }
    /* Each point is x, y, z, w then its attribute values. */
    uint64_t words = 4;
    for (int i = 0; i < counts[4]; i++) {
        uint64_t k = 0;
        if ((st = read_attribute(&s, i, &k)) != PM_STATUS_OK) goto done;
        words += k;
    }
    uint64_t n = (uint64_t)counts[0];
    if ((st = pmi_points_alloc(path, "the point count", n, 4 * words, pmi_source_bound(&s),
                               max_memory_bytes, &xyz)) != PM_STATUS_OK)
        goto done;
    if (!(rec = malloc(4 * words))) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
        goto done;
    }
    for (uint64_t i = 0; i < n; i++) {
        if ((st = pmi_source_read(&s, rec, 4 * words, "the point data")) != PM_STATUS_OK) goto done;
        if (!pmi_host_big_endian()) pmi_swap_bytes(rec, 3, 4);
        memcpy(xyz + 3 * i, rec, 12);
    }
    if ((st = pmi_points_check_finite(path, xyz, (size_t)n)) != PM_STATUS_OK) goto done;
    out->xyz = xyz;
    out->count = (size_t)n;
    xyz = NULL;
done:
    free(rec);
    free(xyz);
    pmi_source_close(&s);
    return st;
}
