/* zlib-based inflation for the readers (zlib, RFC 1950-1952): exact-size
 * inflation from a reader (NRRD, MetaImage, raw .gz), a byte source that
 * reads plain or gzip-compressed files alike (INRIA, NIfTI, bgeo) or the
 * gzip data of a streamed volume from its first byte (volume_source.c), and
 * one-shot inflation of a memory block (VTK XML compressed blocks). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io/io.h"

pm_status pmi_inflate_exact(pmi_reader *r, uint64_t skip, unsigned char *dst, size_t bytes,
                            const char *declared_by, int allow_more)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot initialise zlib", r->path);
    unsigned char scratch[4096];
    uint64_t total = skip + (uint64_t)bytes, produced = 0;
    pm_status s = PM_STATUS_OK;
    for (;;) {
        if (z.avail_in == 0) {
            size_t n = pmi_reader_peek(r, PMI_READ_BUFFER);
            if (n == 0) {
                s = pmi_error(PM_STATUS_PARSE_ERROR,
                              "%s: byte %llu: gzip data end after %llu of the %llu bytes that "
                              "%s, or before the gzip trailer (truncated file?)",
                              r->path, (unsigned long long)pmi_reader_tell(r),
                              (unsigned long long)(produced > skip ? produced - skip : 0),
                              (unsigned long long)bytes, declared_by);
                break;
            }
            z.next_in = r->buf + r->pos;
            z.avail_in = (uInt)n;
        }
        unsigned char *out;
        uint64_t room;
        if (produced < skip) {
            out = scratch;
            room = skip - produced < sizeof scratch ? skip - produced : sizeof scratch;
        } else if (produced < total) {
            out = dst + (produced - skip);
            room = total - produced;
        } else if (allow_more) {
            break; /* the rest of the stream is not wanted */
        } else {
            out = scratch; /* probe: any further byte is too many */
            room = 1;
        }
        if (room > (1u << 30)) room = 1u << 30;
        z.next_out = out;
        z.avail_out = (uInt)room;
        uInt in_before = z.avail_in;
        int ret = inflate(&z, Z_NO_FLUSH);
        r->pos += in_before - z.avail_in;
        produced += room - z.avail_out;
        if (produced > total) {
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: gzip data hold more than the %llu bytes that %s", r->path,
                          (unsigned long long)bytes, declared_by);
            break;
        }
        if (ret == Z_STREAM_END) {
            if (produced == total) break;
            /* Another gzip member may follow. */
            if (z.avail_in == 0 && pmi_reader_peek(r, 1) == 0) continue; /* reports truncation */
            inflateReset(&z);
            continue;
        }
        if (ret == Z_BUF_ERROR && z.avail_in == 0) continue;
        if (ret != Z_OK) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: corrupt gzip data: %s", r->path,
                          (unsigned long long)pmi_reader_tell(r), z.msg ? z.msg : "inflate failed");
            break;
        }
    }
    inflateEnd(&z);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Plain or gzip byte source                                                 */
/* ------------------------------------------------------------------------ */

/* After inflate() returned ret on the source's stream: the member's end
 * noted, or corrupt data reported at the compressed byte reached. */
static pm_status inflated(pmi_source *s, int ret)
{
    const z_stream *z = s->z;
    if (ret == Z_STREAM_END)
        s->ended = 1;
    else if (ret != Z_OK && !(ret == Z_BUF_ERROR && z->avail_in == 0))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: compressed byte %llu: corrupt gzip data: %s",
                         s->r.path, (unsigned long long)pmi_reader_tell(&s->r),
                         z->msg ? z->msg : "inflate failed");
    return PM_STATUS_OK;
}

/* The source's reader (open) inflated from here with zlib's window bits
 * `bits`; closes the reader when zlib cannot start. */
static pm_status start_inflate(pmi_source *s, int bits, const char *path)
{
    z_stream *z = calloc(1, sizeof *z);
    if (!z || inflateInit2(z, bits) != Z_OK) {
        free(z);
        pmi_reader_close(&s->r);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot initialise zlib", path);
    }
    s->z = z;
    s->gz = 1;
    return PM_STATUS_OK;
}

pm_status pmi_source_open(pmi_source *s, const char *path)
{
    memset(s, 0, sizeof *s);
    pm_status st = pmi_reader_open(&s->r, path);
    if (st != PM_STATUS_OK) return st;
    size_t n = pmi_reader_peek(&s->r, 2);
    if (n == 2 && s->r.buf[s->r.pos] == 0x1f && s->r.buf[s->r.pos + 1] == 0x8b) {
        return start_inflate(s, 15 + 16, path);
    }
    return PM_STATUS_OK;
}

void pmi_source_close(pmi_source *s)
{
    if (s->z) {
        inflateEnd(s->z);
        free(s->z);
        s->z = NULL;
    }
    pmi_reader_close(&s->r);
}

uint64_t pmi_source_bound(const pmi_source *s)
{
    uint64_t rem = pmi_reader_remaining(&s->r);
    if (!s->gz) return rem;
    /* Deflate expands at most about 1032:1; the inflater may also hold
     * up to 32 KiB of output it has not handed out yet. */
    z_stream *z = s->z;
    rem += z->avail_in;
    if (rem > (UINT64_MAX - 65536) / 1032) return UINT64_MAX;
    return rem * 1032 + 65536;
}

static pm_status source_short(pmi_source *s, size_t need, size_t got, const char *what)
{
    return pmi_error(PM_STATUS_PARSE_ERROR,
                     "%s: uncompressed byte %llu: the gzip data end in %s (expected %zu more "
                     "bytes, got %zu)",
                     s->r.path, (unsigned long long)s->pos, what, need, got);
}

static pm_status gz_read(pmi_source *s, unsigned char *dst, size_t n, const char *what)
{
    z_stream *z = s->z;
    pmi_reader *r = &s->r;
    size_t done = 0;
    while (done < n) {
        if (s->ended) {
            /* Another gzip member may follow the one that ended. */
            if (z->avail_in == 0 && pmi_reader_peek(r, 1) == 0)
                return source_short(s, n - done, done, what);
            inflateReset(z);
            s->ended = 0;
        }
        if (z->avail_in == 0) {
            size_t k = pmi_reader_peek(r, PMI_READ_BUFFER);
            if (k == 0) return source_short(s, n - done, done, what);
            z->next_in = r->buf + r->pos;
            z->avail_in = (uInt)k;
        }
        size_t room = n - done < (1u << 30) ? n - done : (1u << 30);
        z->next_out = dst + done;
        z->avail_out = (uInt)room;
        uInt in_before = z->avail_in;
        int ret = inflate(z, Z_NO_FLUSH);
        r->pos += in_before - z->avail_in;
        done += room - z->avail_out;
        s->pos += room - z->avail_out;
        if (ret == Z_STREAM_END) {
            s->ended = 1;
        } else if (ret == Z_BUF_ERROR && z->avail_in == 0) {
            continue;
        } else if (ret != Z_OK) {
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: compressed byte %llu: corrupt gzip data in %s: %s", r->path,
                             (unsigned long long)pmi_reader_tell(r), what,
                             z->msg ? z->msg : "inflate failed");
        }
    }
    return PM_STATUS_OK;
}

pm_status pmi_source_read(pmi_source *s, void *dst, size_t n, const char *what)
{
    if (s->gz) return gz_read(s, dst, n, what);
    pm_status st = pmi_read_bytes(&s->r, dst, n, what);
    if (st == PM_STATUS_OK) s->pos += n;
    return st;
}

pm_status pmi_source_skip(pmi_source *s, uint64_t n, const char *what)
{
    if (!s->gz) {
        pm_status st = pmi_skip_bytes(&s->r, n, what);
        if (st == PM_STATUS_OK) s->pos += n;
        return st;
    }
    unsigned char scratch[4096];
    while (n > 0) {
        size_t k = n < sizeof scratch ? (size_t)n : sizeof scratch;
        pm_status st = gz_read(s, scratch, k, what);
        if (st != PM_STATUS_OK) return st;
        n -= k;
    }
    return PM_STATUS_OK;
}

pm_status pmi_source_finish(pmi_source *s)
{
    if (!s->gz || s->ended) return PM_STATUS_OK;
    /* Whatever follows the data up to the member's end is read and
     * dropped; a stream cut before its trailer is reported. */
    unsigned char scratch[4096];
    z_stream *z = s->z;
    pmi_reader *r = &s->r;
    while (!s->ended) {
        if (z->avail_in == 0) {
            size_t k = pmi_reader_peek(r, PMI_READ_BUFFER);
            if (k == 0)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: byte %llu: the gzip stream ends before its trailer "
                                 "(truncated file?)",
                                 r->path, (unsigned long long)pmi_reader_tell(r));
            z->next_in = r->buf + r->pos;
            z->avail_in = (uInt)k;
        }
        z->next_out = scratch;
        z->avail_out = sizeof scratch;
        uInt in_before = z->avail_in;
        int ret = inflate(z, Z_NO_FLUSH);
        r->pos += in_before - z->avail_in;
        pm_status st = inflated(s, ret);
        if (st != PM_STATUS_OK) return st;
    }
    return PM_STATUS_OK;
}

pm_status pmi_source_open_at(pmi_source *s, const char *path, uint64_t offset)
{
    memset(s, 0, sizeof *s);
    pm_status st = pmi_reader_open(&s->r, path);
    if (st == PM_STATUS_OK) st = pmi_skip_bytes(&s->r, offset, "the header");
    if (st != PM_STATUS_OK) {
        pmi_reader_close(&s->r);
        return st;
    }
    /* 15 + 32: a gzip or a zlib wrapper, told by the stream's first bytes
     * (as pmi_inflate_exact). */
    return start_inflate(s, 15 + 32, path);
}

pm_status pmi_source_end_exact(pmi_source *s, uint64_t bytes, const char *declared_by,
                               int allow_more)
{
    if (allow_more || s->ended) return PM_STATUS_OK;
    /* One probe byte at a time until the member's end: a byte produced is
     * one too many, an input that ends first is a cut file. */
    z_stream *z = s->z;
    pmi_reader *r = &s->r;
    unsigned char probe;
    while (!s->ended) {
        if (z->avail_in == 0) {
            size_t k = pmi_reader_peek(r, PMI_READ_BUFFER);
            if (k == 0)
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: byte %llu: gzip data end after the %llu bytes that %s, but "
                                 "before the gzip trailer (truncated file?)",
                                 r->path, (unsigned long long)pmi_reader_tell(r),
                                 (unsigned long long)bytes, declared_by);
            z->next_in = r->buf + r->pos;
            z->avail_in = (uInt)k;
        }
        z->next_out = &probe;
        z->avail_out = 1;
        uInt in_before = z->avail_in;
        int ret = inflate(z, Z_NO_FLUSH);
        r->pos += in_before - z->avail_in;
        if (z->avail_out == 0)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: gzip data hold more than the %llu bytes that %s", r->path,
                             (unsigned long long)bytes, declared_by);
        pm_status st = inflated(s, ret);
        if (st != PM_STATUS_OK) return st;
    }
    return PM_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* One memory block                                                          */
/* ------------------------------------------------------------------------ */

pm_status pmi_inflate_block(const char *path, const char *what, const unsigned char *src,
                            size_t src_bytes, unsigned char *dst, size_t dst_bytes)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot initialise zlib", path);
    pm_status s = PM_STATUS_OK;
    size_t in_done = 0, out_done = 0;
    unsigned char probe;
    for (;;) {
        size_t in_k = src_bytes - in_done < (1u << 30) ? src_bytes - in_done : (1u << 30);
        size_t out_k = dst_bytes - out_done < (1u << 30) ? dst_bytes - out_done : (1u << 30);
        z.next_in = (unsigned char *)src + in_done;
        z.avail_in = (uInt)in_k;
        /* With the output full, one probe byte tells a stream that holds
         * more than declared from one that ends exactly. */
        z.next_out = out_k ? dst + out_done : &probe;
        z.avail_out = out_k ? (uInt)out_k : 1;
        int ret = inflate(&z, Z_NO_FLUSH);
        in_done += in_k - z.avail_in;
        size_t produced = (out_k ? out_k : 1) - z.avail_out;
        if (!out_k && produced) {
            s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: %s: zlib data hold more than %zu bytes", path,
                          what, dst_bytes);
            break;
        }
        out_done += produced;
        if (ret == Z_STREAM_END) break;
        if (ret == Z_OK && (produced || in_k != z.avail_in)) continue;
        s = pmi_error(
            PM_STATUS_PARSE_ERROR,
            "%s: %s: corrupt or truncated zlib data after %zu of %zu compressed bytes: %s", path,
            what, in_done, src_bytes, z.msg ? z.msg : "no further progress");
        break;
    }
    if (s == PM_STATUS_OK && out_done != dst_bytes)
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: %s: zlib data hold %zu bytes, expected %zu", path,
                      what, out_done, dst_bytes);
    inflateEnd(&z);
    return s;
}
