/* Volume files as pm_volume_source (the streamed marching cubes): the
 * header is read and checked once (pmi_raw_layout, pmi_nrrd_layout), then
 * slices are delivered on demand: plain samples by positioned reads
 * (pread) at computed offsets, in any order; gzip samples by inflating the
 * stream in order (zlib), which is how pm_isosurface_stream asks for
 * them. Both swap bytes to the host's order. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

typedef struct file_source {
    pmi_volume_layout L;
    int fd;           /* plain samples */
    pmi_source gz;    /* gzip samples */
    int gz_open;
    size_t slice_bytes;
    size_t next_z;    /* gzip: the next slice the stream holds */
    uint64_t total;   /* sample bytes */
} file_source;

static void file_source_close(void *user)
{
    file_source *F = user;
    if (!F) return;
    if (F->fd >= 0) close(F->fd);
    if (F->gz_open) pmi_source_close(&F->gz);
    free(F->L.data_path);
    free(F);
}

/* n bytes at `offset` of the data file; a short read names the byte. */
static pm_status pread_full(file_source *F, unsigned char *dst, size_t n, uint64_t offset)
{
    size_t got = 0;
    while (got < n) {
        size_t chunk = n - got < (1u << 30) ? n - got : (1u << 30);
        ssize_t k = pread(F->fd, dst + got, chunk, (off_t)(offset + got));
        if (k < 0) {
            if (errno == EINTR) continue;
            return pmi_error(PM_STATUS_IO_ERROR, "%s: byte %llu: read error: %s", F->L.data_path,
                             (unsigned long long)(offset + got), strerror(errno));
        }
        if (k == 0)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: unexpected end of file in the samples (expected %zu "
                             "more bytes; the file shrank while it was read?)",
                             F->L.data_path, (unsigned long long)(offset + got), n - got);
        got += (size_t)k;
    }
    return PM_STATUS_OK;
}

static pm_status file_source_read(void *user, size_t z0, size_t z1, void *dst)
{
    file_source *F = user;
    if (z0 > z1 || z1 > F->L.dims[2])
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: slices %zu to %zu of %zu asked for",
                         F->L.data_path, z0, z1, F->L.dims[2]);
    const size_t n = (z1 - z0) * F->slice_bytes;
    pm_status s;
    if (!F->L.gz) {
        s = pread_full(F, dst, n, F->L.offset + (uint64_t)z0 * F->slice_bytes);
    } else {
        if (z0 != F->next_z)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: gzip samples are read in order: slice %zu asked for, the "
                             "stream is at slice %zu",
                             F->L.data_path, z0, F->next_z);
        s = pmi_source_read(&F->gz, dst, n, "the samples");
        if (s == PM_STATUS_OK) F->next_z = z1;
        if (s == PM_STATUS_OK && z1 == F->L.dims[2])
            s = pmi_source_end_exact(&F->gz, F->total, F->L.declared_by, F->L.allow_more);
    }
    if (s != PM_STATUS_OK) return s;
    const size_t es = pm_sample_size(F->L.type);
    if (es > 1 && F->L.big_endian != pmi_host_big_endian()) pmi_swap_bytes(dst, n / es, es);
    return PM_STATUS_OK;
}

pm_status pm_volume_source_open(const char *path, const pm_raw_options *raw,
                                pm_volume_source *out)
{
    pmi_clear_error();
    if (!path || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_volume_source_open: NULL argument");
    memset(out, 0, sizeof *out);
    file_source *F = calloc(1, sizeof *F);
    if (!F) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    F->fd = -1;
    pm_status s;
    if (raw) {
        s = pmi_raw_layout(path, raw, &F->L);
    } else {
        const char *ext = pmi_extension(path);
        if (pmi_streq(ext, "nrrd") || pmi_streq(ext, "nhdr"))
            s = pmi_nrrd_layout(path, &F->L);
        else
            s = pmi_error(PM_STATUS_UNSUPPORTED,
                          "%s: '.%s' files cannot be streamed; raw samples (--raw-dims) and NRRD "
                          "(.nrrd, .nhdr) can; read this one into memory",
                          path, ext);
    }
    if (s != PM_STATUS_OK) {
        file_source_close(F);
        return s;
    }
    const size_t es = pm_sample_size(F->L.type);
    F->slice_bytes = F->L.dims[0] * F->L.dims[1] * es; /* checked by the layout */
    F->total = (uint64_t)F->slice_bytes * F->L.dims[2];
    if (F->L.gz) {
        s = pmi_source_open_at(&F->gz, F->L.data_path, F->L.offset);
        if (s == PM_STATUS_OK) {
            F->gz_open = 1;
            s = pmi_source_skip(&F->gz, F->L.skip, "the bytes before the samples");
        }
        /* The reader's buffer (up to 1 MiB, the file's size when smaller)
         * and zlib's state with its 32 KiB window. */
        out->buffer_bytes = F->gz.r.cap + (48u << 10);
    } else {
        F->fd = open(F->L.data_path, O_RDONLY);
        if (F->fd < 0)
            s = pmi_error(PM_STATUS_IO_ERROR, "%s: cannot open: %s", F->L.data_path,
                          strerror(errno));
    }
    if (s != PM_STATUS_OK) {
        file_source_close(F);
        return s;
    }
    out->struct_size = sizeof *out;
    out->type = F->L.type;
    out->nx = F->L.dims[0];
    out->ny = F->L.dims[1];
    out->nz = F->L.dims[2];
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = F->L.spacing[a];
        out->origin[a] = F->L.origin[a];
    }
    out->read = file_source_read;
    out->close = file_source_close;
    out->user = F;
    return PM_STATUS_OK;
}

void pm_volume_source_close(pm_volume_source *source)
{
    if (!source) return;
    if (source->close) source->close(source->user);
    memset(source, 0, sizeof *source);
}

pm_status pm_isosurface_file(pm_context *ctx, const char *path, const pm_raw_options *raw,
                             double iso, const pm_isosurface_options *options,
                             const pm_stream_options *stream, pm_mesh *mesh)
{
    if (mesh) memset(mesh, 0, sizeof *mesh);
    pm_volume_source src;
    pm_status s = pm_volume_source_open(path, raw, &src);
    if (s != PM_STATUS_OK) return s;
    s = pm_isosurface_stream(ctx, &src, iso, options, stream, mesh);
    pm_volume_source_close(&src);
    return s;
}
