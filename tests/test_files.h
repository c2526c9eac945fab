/* File scaffolding shared by the file-format tests: a private temporary
 * directory (removed with everything in it, read-only entries too), paths
 * inside it, whole-file write and read, and a growable byte buffer for
 * building files by hand. Include after test_common.h, with _XOPEN_SOURCE
 * 700 defined first (nftw). */
#ifndef PM_TEST_FILES_H
#define PM_TEST_FILES_H

#include <dirent.h>
#include <ftw.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "test_common.h"

static char tmpdir[512];

/* Creates $TMPDIR/<tag>_XXXXXX (or under /tmp); exits on failure. */
static inline void make_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/%s_XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* The start of a file-format test: the seed, a skip for the cuda run (file
 * I/O is host-only; the cpu run covers it) and, for tests that build files
 * by memcpy, for big-endian hosts; then a fresh temporary directory.
 * Returns 1 to run, 0 to return PMT_SKIP. */
static inline int pmt_files_start(int argc, char **argv, const char *tag, int little_endian_only)
{
    pmt_seed_init();
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        printf("skipped: file I/O is host-only (the cpu run covers it)\n");
        return 0;
    }
    const uint16_t one = 1;
    if (little_endian_only && *(const unsigned char *)&one != 1) {
        printf("skipped: the test builds little-endian files by memcpy\n");
        return 0;
    }
    make_tmpdir(tag);
    printf("seed %" PRIu64 ", dir %s\n", pmt_seed, tmpdir);
    return 1;
}

static inline int pmt_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    chmod(p, 0700); /* tests make read-only directories */
    return remove(p);
}

static inline void remove_tmpdir(void) { nftw(tmpdir, pmt_rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Temporary files of the atomic writer ("*.tmp.*") left in dir. */
static inline int count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* tmpdir/name; the 8 most recent results stay valid. */
static inline char *path_in(const char *name)
{
    static char p[8][768];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

/* Writes a fresh file (removed first rather than truncated: ext4 flushes
 * truncated files on close, which made the tests wait on the disk). */
static inline void write_file(const char *path, const void *a, size_t na)
{
    remove(path);
    FILE *f = fopen(path, "wb");
    if (!f || (na && fwrite(a, 1, na, f) != na)) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* The whole file, NUL-terminated (caller frees); NULL if it cannot be opened. */
static inline unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static inline void put(buf *b, const void *d, size_t n)
{
    if (!n) return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static inline void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void putf(buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, k < (int)sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* zlib (wrapper 0) or gzip (wrapper 1) compression of n bytes. */
static inline unsigned char *deflate_bytes(const void *src, size_t n, int gzip, size_t *out_n)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit2(&z, 6, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    z.next_in = (unsigned char *)src;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
        fprintf(stderr, "deflate failed\n");
        exit(1);
    }
    *out_n = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

#endif
