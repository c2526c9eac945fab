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

pm_status pmi_raw_read(const char *path, const pm_raw_options *raw, size_t max_memory_bytes,
                       pm_volume *out)
{
    pm_raw_options o;
    memset(&o, 0, sizeof o);
    size_t n = raw->struct_size ? raw->struct_size : sizeof o;
    memcpy(&o, raw, n < sizeof o ? n : sizeof o);
    if (pm_sample_size(o.type) == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: raw options: unknown sample type %d, expected u8, u16, i16, f32 or "
                         "f64",
                         path, (int)o.type);
    for (int a = 0; a < 3; a++) {
        if (o.spacing[a] == 0.0) o.spacing[a] = 1.0;
        if (!(o.spacing[a] > 0) || !isfinite(o.spacing[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: raw options: spacing %g, expected a positive finite number", path,
                             o.spacing[a]);
    }
    pmi_reader r;
    pm_status s = pmi_reader_open(&r, path);
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
        if (s == PM_STATUS_OK && avail > bytes && !o.allow_extra) {
            const uint64_t extra = avail - bytes;
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: %llu bytes more than %zu x %zu x %zu %s samples (%llu bytes) after "
                          "offset %llu: a "
                          "header? try --raw-offset %llu (it comes first) or --raw-offset -1 (it "
                          "comes last); "
                          "else the dims or the type are wrong (--raw-allow-extra reads the first "
                          "bytes anyway)",
                          path, (unsigned long long)extra, o.nx, o.ny, o.nz,
                          pm_sample_type_string(o.type), (unsigned long long)bytes,
                          (unsigned long long)o.offset_bytes,
                          (unsigned long long)(o.offset_bytes + extra));
        }
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
