/* Raw volumes: samples of a caller-given type and dims, x fastest, after an
 * optional byte offset or as the file's last bytes, in either byte order,
 * plain or gzip-compressed (--raw-dims and friends). Bytes beyond the
 * samples are an error unless allowed: they mean a header left in, dims
 * too small or the wrong sample type. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

/* The options with their defaults, checked. */
static pm_status raw_resolve(const char *path, const pm_raw_options *raw, pm_raw_options *o)
{
    memset(o, 0, sizeof *o);
    size_t n = raw->struct_size ? raw->struct_size : sizeof *o;
    memcpy(o, raw, n < sizeof *o ? n : sizeof *o);
    if (pm_sample_size(o->type) == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: raw options: unknown sample type %d, expected u8, u16, i16, f32 or "
                         "f64",
                         path, (int)o->type);
    for (int a = 0; a < 3; a++) {
        if (o->spacing[a] == 0.0) o->spacing[a] = 1.0;
        if (!(o->spacing[a] > 0) || !isfinite(o->spacing[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: raw options: spacing %g, expected a positive finite number", path,
                             o->spacing[a]);
    }
    return PM_STATUS_OK;
}

/* Bytes after the samples: a header left in, dims too small or the wrong
 * sample type, unless allowed. */
static pm_status raw_extra(const char *path, const pm_raw_options *o, uint64_t avail,
                           uint64_t bytes)
{
    if (avail <= bytes || o->allow_extra) return PM_STATUS_OK;
    const uint64_t extra = avail - bytes;
    return pmi_error(PM_STATUS_PARSE_ERROR,
                     "%s: %llu bytes more than %zu x %zu x %zu %s samples (%llu bytes) after "
                     "offset %llu: a "
                     "header? try --raw-offset %llu (it comes first) or --raw-offset -1 (it "
                     "comes last); "
                     "else the dims or the type are wrong (--raw-allow-extra reads the first "
                     "bytes anyway)",
                     path, (unsigned long long)extra, o->nx, o->ny, o->nz,
                     pm_sample_type_string(o->type), (unsigned long long)bytes,
                     (unsigned long long)o->offset_bytes,
                     (unsigned long long)(o->offset_bytes + extra));
}

pm_status pmi_raw_read(const char *path, const pm_raw_options *raw, size_t max_memory_bytes,
                       pm_volume *out)
{
    pm_raw_options o;
    pm_status s = raw_resolve(path, raw, &o);
    if (s != PM_STATUS_OK) return s;
    pmi_reader r;
    s = pmi_reader_open(&r, path);
    if (s != PM_STATUS_OK) return s;
    void *data = NULL;
    size_t bytes = 0;
    const size_t peeked = pmi_reader_peek(&r, 2);
    const int gz = peeked >= 2 && r.buf[r.pos] == 0x1f && r.buf[r.pos + 1] == 0x8b;
    if (gz) {
        /* Uncompressed size unknown up front: the dims alone bound it. */
        if (o.data_at_end)
            s = pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "%s: gzip data: the samples cannot be placed from the end (offset -1); give the "
                "offset from the start",
                path);
        if (s == PM_STATUS_OK)
            s = pmi_volume_alloc(path, "raw dims", o.nx, o.ny, o.nz, o.type, max_memory_bytes,
                                 UINT64_MAX, &data, &bytes);
        if (s == PM_STATUS_OK)
            s = pmi_inflate_exact(
                &r, o.offset_bytes, data, bytes,
                "--raw-dims and --raw-type declare (or the "
                "type or dims are wrong; --raw-allow-extra reads the first bytes only)",
                o.allow_extra);
    } else {
        const size_t esize = pm_sample_size(o.type);
        size_t want;
        if (!pmi_mul3_size(o.nx, o.ny, o.nz, &want) || !pmi_mul_size(want, esize, &want))
            want = SIZE_MAX;
        if (o.data_at_end) o.offset_bytes = r.size >= want ? r.size - want : 0;
        if (o.offset_bytes > r.size)
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: raw offset %llu is beyond the end of the file (%llu bytes)", path,
                          (unsigned long long)o.offset_bytes, (unsigned long long)r.size);
        if (s == PM_STATUS_OK) s = pmi_skip_bytes(&r, o.offset_bytes, "raw offset");
        if (s == PM_STATUS_OK)
            s = pmi_volume_alloc(path, "raw dims", o.nx, o.ny, o.nz, o.type, max_memory_bytes,
                                 pmi_reader_remaining(&r), &data, &bytes);
        /* Checked once the dims are known to be valid (pmi_volume_alloc). */
        const uint64_t avail = s == PM_STATUS_OK ? r.size - o.offset_bytes : 0;
        if (s == PM_STATUS_OK) s = raw_extra(path, &o, avail, bytes);
        if (s == PM_STATUS_OK) s = pmi_read_bytes(&r, data, bytes, "raw sample data");
    }
    pmi_reader_close(&r);
    if (s != PM_STATUS_OK) {
        free(data);
        return s;
    }
    size_t esize = pm_sample_size(o.type);
    if ((o.big_endian != 0) != pmi_host_big_endian()) pmi_swap_bytes(data, bytes / esize, esize);
    out->data = data;
    out->type = o.type;
    out->nx = o.nx;
    out->ny = o.ny;
    out->nz = o.nz;
    out->row_stride = o.nx;
    out->slice_stride = o.nx * o.ny;
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = o.spacing[a];
        out->origin[a] = 0.0;
    }
    return PM_STATUS_OK;
}

/* The same checks as pmi_raw_read, without reading the samples: dims,
 * overflow, the file's size against the offset and the samples. */
pm_status pmi_raw_layout(const char *path, const pm_raw_options *raw, pmi_volume_layout *L)
{
    memset(L, 0, sizeof *L);
    pm_raw_options o;
    pm_status s = raw_resolve(path, raw, &o);
    if (s != PM_STATUS_OK) return s;
    const size_t esize = pm_sample_size(o.type);
    if (o.nx < 2 || o.ny < 2 || o.nz < 2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: raw dims: dims %zu x %zu x %zu, each must be at least 2 "
                         "(marching cubes needs one cell)",
                         path, o.nx, o.ny, o.nz);
    size_t bytes;
    if (!pmi_mul3_size(o.nx, o.ny, o.nz, &bytes) || !pmi_mul_size(bytes, esize, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: raw dims: %zu x %zu x %zu %s samples overflow size_t", path, o.nx,
                         o.ny, o.nz, pm_sample_type_string(o.type));
    pmi_reader r;
    if ((s = pmi_reader_open(&r, path)) != PM_STATUS_OK) return s;
    const size_t peeked = pmi_reader_peek(&r, 2);
    L->gz = peeked >= 2 && r.buf[r.pos] == 0x1f && r.buf[r.pos + 1] == 0x8b;
    const uint64_t size = r.size;
    pmi_reader_close(&r);
    if (L->gz) {
        if (o.data_at_end)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: gzip data: the samples cannot be placed from the end (offset "
                             "-1); give the offset from the start",
                             path);
        L->offset = 0;
        L->skip = o.offset_bytes;
    } else {
        if (o.data_at_end) o.offset_bytes = size >= bytes ? size - bytes : 0;
        if (o.offset_bytes > size)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: raw offset %llu is beyond the end of the file (%llu bytes)", path,
                             (unsigned long long)o.offset_bytes, (unsigned long long)size);
        const uint64_t avail = size - o.offset_bytes;
        if ((uint64_t)bytes > avail)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: raw dims: %zu x %zu x %zu %s samples need %zu bytes, but only "
                             "%llu bytes of data are in the file",
                             path, o.nx, o.ny, o.nz, pm_sample_type_string(o.type), bytes,
                             (unsigned long long)avail);
        if ((s = raw_extra(path, &o, avail, bytes)) != PM_STATUS_OK) return s;
        L->offset = o.offset_bytes;
    }
    L->data_path = malloc(strlen(path) + 1);
    if (!L->data_path) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    strcpy(L->data_path, path);
    L->allow_more = o.allow_extra;
    L->big_endian = o.big_endian != 0;
    L->type = o.type;
    L->dims[0] = o.nx;
    L->dims[1] = o.ny;
    L->dims[2] = o.nz;
    for (int a = 0; a < 3; a++) {
        L->spacing[a] = o.spacing[a];
        L->origin[a] = 0.0;
    }
    L->declared_by = "--raw-dims and --raw-type declare (or the type or dims are wrong; "
                     "--raw-allow-extra reads the first bytes only)";
    return PM_STATUS_OK;
}
