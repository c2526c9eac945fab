/* Shared file machinery: a bounded buffered reader (every read checked
 * against the file size, positions kept for messages), number parsing,
 * endian swaps, checked allocation, the atomic temporary-file writer, and
 * the public entry points that pick a format. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

pm_status pmi_reader_open(pmi_reader *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->path = path;
    r->next_line = 1;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return pmi_error(PM_STATUS_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return pmi_error(PM_STATUS_IO_ERROR, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return pmi_error(PM_STATUS_IO_ERROR, "%s: is a directory, expected a file", path);
    }
    /* Sizes from headers are checked against the file size before anything
     * is allocated, so the size must be known: regular files only. */
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pmi_error(PM_STATUS_IO_ERROR, "%s: not a regular file", path);
    }
    r->cap = (uint64_t)st.st_size < PMI_READ_BUFFER ? (size_t)st.st_size : PMI_READ_BUFFER;
    if (r->cap < 64) r->cap = 64;
    r->buf = malloc(r->cap + 1);
    if (!r->buf) {
        close(fd);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate the read buffer", path);
    }
    r->fd = fd;
    r->size = (uint64_t)st.st_size;
    return PM_STATUS_OK;
}

void pmi_reader_close(pmi_reader *r)
{
    if (r->fd >= 0) close(r->fd);
    free(r->buf);
    r->fd = -1;
    r->buf = NULL;
}

uint64_t pmi_reader_tell(const pmi_reader *r) { return r->buf_offset + r->pos; }

uint64_t pmi_reader_remaining(const pmi_reader *r)
{
    uint64_t t = pmi_reader_tell(r);
    return t < r->size ? r->size - t : 0;
}

/* read() until n bytes or the end; returns bytes read or -1 with errno. */
static ptrdiff_t read_full(int fd, void *dst, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t chunk = n - got < (1u << 30) ? n - got : (1u << 30);
        ssize_t k = read(fd, (char *)dst + got, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    return (ptrdiff_t)got;
}

size_t pmi_reader_peek(pmi_reader *r, size_t want)
{
    if (want > r->cap) want = r->cap;
    if (r->len - r->pos >= want) return want;
    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->buf_offset += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    ptrdiff_t k = read_full(r->fd, r->buf + r->len, r->cap - r->len);
    if (k > 0) r->len += (size_t)k;
    return r->len - r->pos < want ? r->len - r->pos : want;
}

pm_status pmi_read_line(pmi_reader *r, char **line, size_t *len, int *eof)
{
    *eof = 0;
    size_t scanned = 0; /* bytes after pos already searched for '\n' */
    for (;;) {
        size_t avail = r->len - r->pos;
        unsigned char *start = r->buf + r->pos;
        unsigned char *nl = avail > scanned ? memchr(start + scanned, '\n', avail - scanned) : NULL;
        size_t n, consumed;
        if (nl) {
            n = (size_t)(nl - start);
            consumed = n + 1;
        } else {
            scanned = avail;
            if (avail < r->cap && pmi_reader_peek(r, avail + 1) > avail) continue;
            if (avail >= r->cap && r->buf_offset + r->len < r->size)
                return pmi_error(PM_STATUS_PARSE_ERROR, "%s: line %llu: longer than %zu bytes",
                                 r->path, (unsigned long long)r->next_line, r->cap);
            if (avail == 0) {
                *eof = 1;
                r->line = r->next_line;
                return PM_STATUS_OK;
            }
            /* The last line of the file, without a final '\n'. */
            start = r->buf + r->pos;
            n = consumed = avail;
        }
        r->pos += consumed;
        if (n > 0 && start[n - 1] == '\r') n--;
        start[n] = '\0';
        *line = (char *)start;
        *len = n;
        r->line = r->next_line++;
        return PM_STATUS_OK;
    }
}

static int is_blank(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\v' && *s != '\f') return 0;
    return 1;
}

pm_status pmi_read_nonblank_line(pmi_reader *r, char **line, size_t *len, int *eof)
{
    for (;;) {
        pm_status s = pmi_read_line(r, line, len, eof);
        if (s != PM_STATUS_OK || *eof || !is_blank(*line)) return s;
    }
}

static pm_status short_read(pmi_reader *r, uint64_t need, const char *what)
{
    return pmi_error(PM_STATUS_PARSE_ERROR,
                     "%s: byte %llu: unexpected end of file in %s (expected %llu more bytes, "
                     "%llu left)",
                     r->path, (unsigned long long)pmi_reader_tell(r), what,
                     (unsigned long long)need, (unsigned long long)pmi_reader_remaining(r));
}

pm_status pmi_read_bytes(pmi_reader *r, void *dst, size_t n, const char *what)
{
    size_t avail = r->len - r->pos;
    if (avail >= n) {
        memcpy(dst, r->buf + r->pos, n);
        r->pos += n;
        return PM_STATUS_OK;
    }
    if ((uint64_t)n > pmi_reader_remaining(r)) return short_read(r, n, what);
    /* Small reads refill the buffer: one read() per buffer, not per value. */
    if (n < r->cap && pmi_reader_peek(r, n) >= n) {
        memcpy(dst, r->buf + r->pos, n);
        r->pos += n;
        return PM_STATUS_OK;
    }
    avail = r->len - r->pos;
    memcpy(dst, r->buf + r->pos, avail);
    r->pos += avail;
    size_t rest = n - avail;
    /* Large reads bypass the buffer; the buffer is empty at this point. */
    r->buf_offset += r->len;
    r->pos = r->len = 0;
    ptrdiff_t k = read_full(r->fd, (char *)dst + avail, rest);
    if (k < 0)
        return pmi_error(PM_STATUS_IO_ERROR, "%s: read failed at byte %llu: %s", r->path,
                         (unsigned long long)r->buf_offset, strerror(errno));
    r->buf_offset += (uint64_t)k;
    if ((size_t)k < rest) return short_read(r, rest - (size_t)k, what);
    return PM_STATUS_OK;
}

pm_status pmi_skip_bytes(pmi_reader *r, uint64_t n, const char *what)
{
    if (n <= r->len - r->pos) {
        r->pos += (size_t)n;
        return PM_STATUS_OK;
    }
    if (n > pmi_reader_remaining(r)) return short_read(r, n, what);
    uint64_t target = pmi_reader_tell(r) + n;
    if (lseek(r->fd, (off_t)target, SEEK_SET) < 0)
        return pmi_error(PM_STATUS_IO_ERROR, "%s: seek to byte %llu failed: %s", r->path,
                         (unsigned long long)target, strerror(errno));
    r->buf_offset = target;
    r->pos = r->len = 0;
    return PM_STATUS_OK;
}

static int is_space(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

pm_status pmi_read_token(pmi_reader *r, char *tok, size_t cap, const char *what)
{
    size_t n = 0;
    int in_token = 0;
    for (;;) {
        if (r->pos == r->len && pmi_reader_peek(r, 1) == 0) break;
        int c = r->buf[r->pos];
        if (is_space(c)) {
            if (in_token) break;
            r->pos++;
            if (c == '\n') r->next_line++;
            continue;
        }
        if (!in_token) {
            in_token = 1;
            r->line = r->next_line;
        }
        if (n + 1 >= cap) {
            tok[n] = '\0';
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: line %llu: in %s: token '%.40s...' longer than %zu characters",
                             r->path, (unsigned long long)r->line, what, tok, cap - 1);
        }
        tok[n++] = (char)c;
        r->pos++;
    }
    tok[n] = '\0';
    if (!in_token)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: line %llu: unexpected end of file, expected %s", r->path,
                         (unsigned long long)r->next_line, what);
    return PM_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* Small string and number helpers                                           */
/* ------------------------------------------------------------------------ */

int pmi_parse_double(const char *s, double *v)
{
    char *end;
    if (!*s || is_space((unsigned char)*s)) return 0;
    errno = 0;
    double d = strtod(s, &end);
    if (*end != '\0') return 0;
    /* Underflow to a denormal or zero is fine; overflow becomes inf and is
     * left to the caller (points reject it, volumes may hold it). */
    *v = d;
    return 1;
}

int pmi_parse_float(const char *s, float *v)
{
    char *end;
    if (!*s || is_space((unsigned char)*s)) return 0;
    float f = strtof(s, &end);
    if (*end != '\0') return 0;
    *v = f;
    return 1;
}

int pmi_parse_i64(const char *s, int64_t *v)
{
    char *end;
    if (!*s || is_space((unsigned char)*s)) return 0;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) return 0;
    *v = (int64_t)x;
    return 1;
}

int pmi_parse_u64(const char *s, uint64_t *v)
{
    int64_t x;
    if (*s == '-' || !pmi_parse_i64(s, &x) || x < 0) {
        /* Values above INT64_MAX: strtoull, still refusing a sign. */
        char *end;
        if (*s == '-' || *s == '+' || !*s || is_space((unsigned char)*s)) return 0;
        errno = 0;
        unsigned long long u = strtoull(s, &end, 10);
        if (*end != '\0' || errno == ERANGE) return 0;
        *v = (uint64_t)u;
        return 1;
    }
    *v = (uint64_t)x;
    return 1;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

int pmi_streq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (lower((unsigned char)*a) != lower((unsigned char)*b)) return 0;
    return *a == *b;
}

int pmi_starts_with(const char *s, const char *prefix)
{
    for (; *prefix; s++, prefix++)
        if (!*s || lower((unsigned char)*s) != lower((unsigned char)*prefix)) return 0;
    return 1;
}

const char *pmi_extension(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot + 1 : "";
}

int pmi_split(char *s, char **words, int max)
{
    int n = 0;
    while (n < max) {
        while (*s && is_space((unsigned char)*s))
            s++;
        if (!*s) break;
        words[n++] = s;
        if (n == max) break;
        while (*s && !is_space((unsigned char)*s))
            s++;
        if (*s) *s++ = '\0';
    }
    return n;
}

char *pmi_sibling_path(const char *header, const char *name)
{
    const char *slash = strrchr(header, '/');
    size_t dir = name[0] == '/' || !slash ? 0 : (size_t)(slash - header) + 1;
    char *p = malloc(dir + strlen(name) + 1);
    if (!p) return NULL;
    memcpy(p, header, dir);
    strcpy(p + dir, name);
    return p;
}

int pmi_host_big_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 0;
}

void pmi_swap_bytes(void *data, size_t n, size_t elem_size)
{
    unsigned char *p = data;
    if (elem_size < 2) return;
    for (size_t i = 0; i < n; i++, p += elem_size)
        for (size_t a = 0, b = elem_size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ------------------------------------------------------------------------ */
/* Checked allocation                                                        */
/* ------------------------------------------------------------------------ */

pm_status pmi_volume_alloc(const char *path, const char *where, size_t nx, size_t ny, size_t nz,
                           pm_sample_type type, size_t max_memory_bytes, uint64_t available,
                           void **data, size_t *bytes)
{
    *data = NULL;
    if (nx < 2 || ny < 2 || nz < 2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: dims %zu x %zu x %zu, each must be at least 2 "
                         "(marching cubes needs one cell)",
                         path, where, nx, ny, nz);
    size_t cells, b;
    if (!pmi_mul3_size(nx, ny, nz, &cells) || !pmi_mul_size(cells, pm_sample_size(type), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %zu x %zu x %zu %s samples overflow size_t",
                         path, where, nx, ny, nz, pm_sample_type_string(type));
    if (available != UINT64_MAX && (uint64_t)b > available)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: %zu x %zu x %zu %s samples need %zu bytes, but only %llu "
                         "bytes of data are in the file",
                         path, where, nx, ny, nz, pm_sample_type_string(type), b,
                         (unsigned long long)available);
    if (max_memory_bytes && b > max_memory_bytes)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %s: the volume needs %zu bytes, more than the limit of %zu bytes",
                         path, where, b, max_memory_bytes);
    *data = malloc(b ? b : 1);
    if (!*data)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for the volume",
                         path, b);
    *bytes = b;
    return PM_STATUS_OK;
}

pm_status pmi_points_alloc(const char *path, const char *where, uint64_t n, uint64_t min_bytes_each,
                           uint64_t available, size_t max_memory_bytes, float **xyz)
{
    *xyz = NULL;
    uint64_t need;
    if (min_bytes_each && (__builtin_mul_overflow(n, min_bytes_each, &need) || need > available))
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: %llu points need at least %llu bytes each, but only %llu bytes "
                         "follow in the file",
                         path, where, (unsigned long long)n, (unsigned long long)min_bytes_each,
                         (unsigned long long)available);
    size_t b;
    if (n > SIZE_MAX || !pmi_mul_size((size_t)n, 3 * sizeof(float), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %llu points overflow size_t", path, where,
                         (unsigned long long)n);
    if (max_memory_bytes && b > max_memory_bytes)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %s: %llu points need %zu bytes, more than the limit of %zu bytes",
                         path, where, (unsigned long long)n, b, max_memory_bytes);
    *xyz = malloc(b ? b : 1);
    if (!*xyz)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for %llu points",
                         path, b, (unsigned long long)n);
    return PM_STATUS_OK;
}

pm_status pmi_points_check_finite(const char *path, const float *xyz, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            if (!isfinite(xyz[3 * i + (size_t)a]))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: point %zu (0-based) has a non-finite coordinate %c = %g, "
                                 "expected finite numbers",
                                 path, i, "xyz"[a], (double)xyz[3 * i + (size_t)a]);
    return PM_STATUS_OK;
}

/* ------------------------------------------------------------------------ */
/* Atomic writer                                                             */
/* ------------------------------------------------------------------------ */

#define PMI_WRITE_BUFFER (1u << 20)
#define PMI_RESERVE_MAX (1u << 16)

pm_status pmi_writer_open(pmi_writer *w, const char *path)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->path = path;
    /* A directory is refused by name; a symbolic link is written through
     * to its target (as cp does), the temporary file beside the target so
     * the rename stays atomic and the link stays a link. */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return w->status =
                   pmi_error(PM_STATUS_IO_ERROR, "%s: is a directory, expected a file name", path);
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        w->target = realpath(path, NULL);
        if (!w->target)
            return w->status = pmi_error(PM_STATUS_IO_ERROR,
                                         "%s: a symbolic link whose target cannot be resolved: %s",
                                         path, strerror(errno));
    } else {
        w->target = strdup(path);
        if (!w->target)
            return w->status = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    }
    const char *dest = w->target;
    size_t n = strlen(dest) + 48;
    w->tmp_path = malloc(n);
    w->buf = malloc(PMI_WRITE_BUFFER);
    if (!w->tmp_path || !w->buf) {
        pmi_writer_abort(w);
        return w->status = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
    }
    /* A fresh name in the target's directory so the final rename() is
     * atomic; O_EXCL makes it ours, and mode 0666 lets the umask decide the
     * permissions as for any new file (mkstemp would force 0600). */
    static unsigned counter;
    unsigned long long salt = (unsigned long long)getpid() * 1000003ull;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        salt = salt * 6364136223846793005ull + 1442695040888963407ull + c;
        snprintf(w->tmp_path, n, "%s.tmp.%06llx", dest, (salt >> 20) & 0xffffffull);
        w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (w->fd >= 0 || errno != EEXIST) break;
    }
    if (w->fd < 0) {
        int e = errno;
        free(w->tmp_path);
        w->tmp_path = NULL;
        pmi_writer_abort(w);
        return w->status = pmi_error(PM_STATUS_IO_ERROR, "%s: cannot create the output file: %s",
                                     path, strerror(e));
    }
    return PM_STATUS_OK;
}

/* n bytes at p to the file (the status records a failure). */
static void writer_write(pmi_writer *w, const unsigned char *p, size_t n)
{
    size_t done = 0;
    while (w->status == PM_STATUS_OK && done < n) {
        ssize_t k = write(w->fd, p + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            w->status = pmi_error(PM_STATUS_IO_ERROR, "%s: write failed: %s", w->path,
                                  k < 0 ? strerror(errno) : "no progress");
            break;
        }
        done += (size_t)k;
    }
}

static void writer_flush(pmi_writer *w)
{
    writer_write(w, w->buf, w->len);
    w->len = 0;
}

unsigned char *pmi_writer_reserve(pmi_writer *w, size_t n)
{
    if (w->status != PM_STATUS_OK || n > PMI_RESERVE_MAX) return NULL;
    if (PMI_WRITE_BUFFER - w->len < n) writer_flush(w);
    return w->status == PM_STATUS_OK ? w->buf + w->len : NULL;
}

void pmi_writer_advance(pmi_writer *w, size_t used)
{
    if (w->status == PM_STATUS_OK) w->len += used;
}

void pmi_writer_put(pmi_writer *w, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (n >= PMI_WRITE_BUFFER) {
        /* A large block goes to the file from where it is. */
        writer_flush(w);
        writer_write(w, p, n);
        return;
    }
    while (n > 0 && w->status == PM_STATUS_OK) {
        if (w->len == PMI_WRITE_BUFFER) writer_flush(w);
        size_t k = PMI_WRITE_BUFFER - w->len < n ? PMI_WRITE_BUFFER - w->len : n;
        memcpy(w->buf + w->len, p, k);
        w->len += k;
        p += k;
        n -= k;
    }
}

void pmi_writer_printf(pmi_writer *w, const char *fmt, ...)
{
    unsigned char *p = pmi_writer_reserve(w, 1024);
    if (!p) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf((char *)p, 1024, fmt, ap);
    va_end(ap);
    if (k < 0 || k >= 1024) {
        w->status = pmi_error(PM_STATUS_IO_ERROR, "%s: internal: formatted line too long", w->path);
        return;
    }
    w->len += (size_t)k;
}

void pmi_writer_f32(pmi_writer *w, float v, int big_endian)
{
    unsigned char b[4];
    memcpy(b, &v, 4);
    if (big_endian != pmi_host_big_endian()) pmi_swap_bytes(b, 1, 4);
    pmi_writer_put(w, b, 4);
}

void pmi_writer_i32(pmi_writer *w, int32_t v, int big_endian)
{
    unsigned char b[4];
    memcpy(b, &v, 4);
    if (big_endian != pmi_host_big_endian()) pmi_swap_bytes(b, 1, 4);
    pmi_writer_put(w, b, 4);
}

void pmi_writer_abort(pmi_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    if (w->tmp_path) unlink(w->tmp_path);
    free(w->tmp_path);
    free(w->buf);
    free(w->target);
    w->fd = -1;
    w->tmp_path = NULL;
    w->buf = NULL;
    w->target = NULL;
}

pm_status pmi_writer_commit(pmi_writer *w)
{
    if (w->status == PM_STATUS_OK) writer_flush(w);
    if (w->status == PM_STATUS_OK) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0)
            w->status =
                pmi_error(PM_STATUS_IO_ERROR, "%s: write failed: %s", w->path, strerror(errno));
    }
    if (w->status == PM_STATUS_OK && rename(w->tmp_path, w->target) != 0)
        w->status = pmi_error(PM_STATUS_IO_ERROR, "%s: cannot rename the temporary file '%s': %s",
                              w->path, w->tmp_path, strerror(errno));
    pm_status s = w->status;
    if (s == PM_STATUS_OK) {
        free(w->tmp_path);
        w->tmp_path = NULL;
    }
    pmi_writer_abort(w);
    return s;
}
