/* Volume readers: NRRD (raw, gzip, zlib, ascii; attached and detached;
 * every type spelling; both byte orders), VTK STRUCTURED_POINTS (ASCII and
 * binary), raw files with offset and byte order, each against the values
 * written here; then malformed inputs: every truncation, random header
 * corruption, bad fields, overflowing and huge dims, gzip bombs, limits.
 * File I/O is host-only: the cuda run skips. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "test_common.h"
#include "test_files.h"

/* Two pieces (a header and its data) as one fresh file. */
static void write_file2(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    buf t = {0};
    put(&t, a, na);
    put(&t, b, nb);
    write_file(path, t.p, t.n);
    free(t.p);
}


static const char *nrrd_type[] = {"uchar", "ushort", "short", "float", "double"};
static const char *vtk_type[] = {"unsigned_char", "unsigned_short", "short", "float", "double"};

/* n random samples of type t, native byte order. */
static void *random_samples(pm_sample_type t, size_t n)
{
    size_t es = pm_sample_size(t);
    unsigned char *d = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = pmt_rand();
        switch (t) {
        case PM_SAMPLE_U8: d[i] = (uint8_t)r; break;
        case PM_SAMPLE_U16: ((uint16_t *)d)[i] = (uint16_t)r; break;
        case PM_SAMPLE_I16: ((int16_t *)d)[i] = (int16_t)(uint16_t)r; break;
        case PM_SAMPLE_F32: ((float *)d)[i] = (float)(pmt_uniform() * 2000 - 1000); break;
        case PM_SAMPLE_F64: ((double *)d)[i] = pmt_uniform() * 2e6 - 1e6; break;
        }
    }
    return d;
}

static void *swapped(const void *d, size_t n, size_t es)
{
    unsigned char *c = malloc(n * es);
    const unsigned char *s = d;
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < es; b++)
            c[i * es + b] = s[i * es + es - 1 - b];
    return c;
}

/* ASCII text of n samples. */
static char *ascii_samples(const void *d, pm_sample_type t, size_t n)
{
    char *s = malloc(n * 32 + 1), *p = s;
    for (size_t i = 0; i < n; i++) {
        switch (t) {
        case PM_SAMPLE_U8: p += sprintf(p, "%u", ((const uint8_t *)d)[i]); break;
        case PM_SAMPLE_U16: p += sprintf(p, "%u", ((const uint16_t *)d)[i]); break;
        case PM_SAMPLE_I16: p += sprintf(p, "%d", ((const int16_t *)d)[i]); break;
        case PM_SAMPLE_F32: p += sprintf(p, "%.9g", ((const float *)d)[i]); break;
        case PM_SAMPLE_F64: p += sprintf(p, "%.17g", ((const double *)d)[i]); break;
        }
        *p++ = i % 7 == 6 ? '\n' : ' ';
    }
    *p = 0;
    return s;
}

static void check_volume(const char *what, const pm_volume *v, pm_sample_type t,
                         const size_t dims[3], const double sp[3], const double org[3],
                         const void *data)
{
    PMT_CHECK(v->type == t, "%s: type %d", what, (int)v->type);
    PMT_CHECK(v->nx == dims[0] && v->ny == dims[1] && v->nz == dims[2], "%s: dims %zu %zu %zu",
              what, v->nx, v->ny, v->nz);
    PMT_CHECK(v->row_stride == dims[0] && v->slice_stride == dims[0] * dims[1], "%s: strides",
              what);
    for (int a = 0; a < 3; a++) {
        PMT_CHECK(fabs(v->spacing[a] - sp[a]) < 1e-12, "%s: spacing[%d] %g != %g", what, a,
                  v->spacing[a], sp[a]);
        PMT_CHECK(v->origin[a] == org[a], "%s: origin[%d] %g != %g", what, a, v->origin[a], org[a]);
    }
    size_t n = dims[0] * dims[1] * dims[2] * pm_sample_size(t);
    PMT_CHECK(v->data && memcmp(v->data, data, n) == 0, "%s: samples differ", what);
}

static void expect_fail(const char *path, const pm_raw_options *raw, size_t maxmem, pm_status want,
                        const char *needle, const char *what)
{
    pm_volume v;
    pm_status s = pm_volume_read(path, raw, maxmem, &v);
    PMT_CHECK(s == want, "%s: got %s, want %s: %s", what, pm_status_string(s),
              pm_status_string(want), pm_last_error());
    if (s == PM_STATUS_OK) pm_volume_free(&v);
    PMT_CHECK(strstr(pm_last_error(), path) != NULL, "%s: message '%s' does not name the file",
              what, pm_last_error());
    if (needle)
        PMT_CHECK(strstr(pm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
                  pm_last_error(), needle);
}

/* Every prefix of a valid file must fail (binary data: strict) or at least
 * not crash and, when failing, name the file (ASCII: the last number may be
 * cut to a shorter valid one). Then random byte corruption: never a crash. */
static void hostile(const char *name, const pm_raw_options *raw, int strict)
{
    size_t n;
    unsigned char *b = slurp(path_in(name), &n);
    if (!b) exit(1);
    char cut[128];
    snprintf(cut, sizeof cut, "cut_%s", name);
    const char *cp = path_in(cut);
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        write_file(cp, b, k);
        pm_volume v;
        pm_status s = pm_volume_read(cp, raw, 0, &v);
        if (s == PM_STATUS_OK) {
            pm_volume_free(&v);
            bad += strict;
        } else if (!strstr(pm_last_error(), cut)) {
            bad++;
            fprintf(stderr, "message without file name: %s\n", pm_last_error());
        }
    }
    PMT_CHECK(bad == 0, "%s: %d truncations were accepted or unnamed", name, bad);
    unsigned char *m = malloc(n);
    for (int it = 0; it < 300; it++) {
        memcpy(m, b, n);
        int flips = 1 + (int)(pmt_rand() % 4);
        for (int j = 0; j < flips; j++) {
            size_t at = (size_t)(pmt_rand() % (n < 200 ? n : 200)); /* mostly the header */
            m[at] = (unsigned char)pmt_rand();
        }
        write_file(cp, m, n);
        pm_volume v;
        if (pm_volume_read(cp, raw, 1 << 24, &v) == PM_STATUS_OK)
            pm_volume_free(&v);
        else
            PMT_CHECK(strstr(pm_last_error(), cut), "unnamed: %s", pm_last_error());
    }
    free(m);
    free(b);
    remove(cp);
}

int main(int argc, char **argv)
{
    pmt_seed_init();
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        printf("skipped: file I/O is host-only (the cpu run covers it)\n");
        return PMT_SKIP;
    }
    make_tmpdir("pm_io_vol");
    printf("seed %" PRIu64 ", dir %s\n", pmt_seed, tmpdir);
    const int host_big = 0; /* checked below */
    {
        const uint16_t one = 1;
        if (*(const unsigned char *)&one != 1) {
            printf("skipped: assumes a little-endian host\n");
            return PMT_SKIP;
        }
    }
    const size_t dims[3] = {5, 4, 3}, n = 60;
    const double sp[3] = {0.5, 1.5, 2}, org[3] = {1, -2, 3.25}, zero[3] = {0, 0, 0};
    char hdr[2048], name[64];
    pm_volume v;

    /* NRRD: every type x byte order x encoding. */
    for (int t = 0; t < 5; t++) {
        size_t es = pm_sample_size((pm_sample_type)t);
        void *d = random_samples((pm_sample_type)t, n);
        for (int big = 0; big < 2; big++) {
            void *fd = big != host_big ? swapped(d, n, es) : NULL;
            const void *bytes = fd ? fd : d;
            for (int enc = 0; enc < 4; enc++) {
                static const char *encs[] = {"raw", "gzip", "gz", "ascii"};
                snprintf(hdr, sizeof hdr,
                         "NRRD0004\n# a comment\ntype: %s\ndimension: 3\nsizes: 5 4 3\n"
                         "spacings: 0.5 1.5 2\nspace origin: (1, -2,3.25)\nkinds: domain domain "
                         "domain\nendian: %s\nencoding: %s\nmy key:=my: value\n\n",
                         nrrd_type[t], big ? "big" : "little", encs[enc]);
                snprintf(name, sizeof name, "v%d_%d_%d.nrrd", t, big, enc);
                size_t cn = n * es;
                unsigned char *c = NULL;
                char *text = NULL;
                if (enc == 1 || enc == 2) c = deflate_bytes(bytes, n * es, enc == 1, &cn);
                if (enc == 3) text = ascii_samples(d, (pm_sample_type)t, n), cn = strlen(text);
                write_file2(path_in(name), hdr, strlen(hdr),
                            c      ? (void *)c
                            : text ? (void *)text
                                   : bytes,
                            cn);
                PMT_OK(pm_volume_read(path_in(name), NULL, 0, &v));
                check_volume(name, &v, (pm_sample_type)t, dims, sp, org, d);
                pm_volume_free(&v);
                if (t == 1 && big == 1 && enc < 3) hostile(name, NULL, 1);
                if (t == 3 && big == 0 && enc == 3) hostile(name, NULL, 0);
                free(c);
                free(text);
            }
            free(fd);
        }
        /* VTK STRUCTURED_POINTS, binary (big-endian) and ASCII. */
        for (int ascii = 0; ascii < 2; ascii++) {
            void *be = swapped(d, n, es);
            char *text = ascii ? ascii_samples(d, (pm_sample_type)t, n) : NULL;
            snprintf(hdr, sizeof hdr,
                     "# vtk DataFile Version 3.0\nvolume %d\n%s\nDATASET STRUCTURED_POINTS\n"
                     "DIMENSIONS 5 4 3\n%s 0.5 1.5 2\nORIGIN 1 -2 3.25\nPOINT_DATA 60\n"
                     "SCALARS density %s%s\n%s",
                     t, ascii ? "ASCII" : "BINARY", t == 2 ? "ASPECT_RATIO" : "SPACING",
                     vtk_type[t], t == 1 ? " 1" : "", t == 4 ? "" : "LOOKUP_TABLE default\n");
            snprintf(name, sizeof name, "v%d_%d.vtk", t, ascii);
            write_file2(path_in(name), hdr, strlen(hdr), ascii ? (void *)text : be,
                        ascii ? strlen(text) : n * es);
            PMT_OK(pm_volume_read(path_in(name), NULL, 0, &v));
            check_volume(name, &v, (pm_sample_type)t, dims, sp, org, d);
            pm_volume_free(&v);
            if (t == 2) hostile(name, NULL, !ascii);
            free(be);
            free(text);
        }
        /* Raw with an offset, both byte orders. */
        for (int big = 0; big < 2; big++) {
            void *fd = big ? swapped(d, n, es) : NULL;
            snprintf(name, sizeof name, "v%d_%d.raw", t, big);
            write_file2(path_in(name), "seventeen bytes..", 17, fd ? fd : d, n * es);
            pm_raw_options ro = {sizeof ro,     5,   4,  3, (pm_sample_type)t,
                                 {0.5, 1.5, 2}, big, 17, 0, 0};
            PMT_OK(pm_volume_read(path_in(name), &ro, 0, &v));
            check_volume(name, &v, (pm_sample_type)t, dims, sp, zero, d);
            pm_volume_free(&v);
            if (t == 4 && big) hostile(name, &ro, 1);
            free(fd);
        }
        free(d);
    }

    /* Type spellings. */
    static const struct {
        const char *name;
        pm_sample_type t;
    } spell[] = {{"unsigned char", PM_SAMPLE_U8},     {"uint8", PM_SAMPLE_U8},
                 {"uint8_t", PM_SAMPLE_U8},           {"unsigned short", PM_SAMPLE_U16},
                 {"uint16", PM_SAMPLE_U16},           {"uint16_t", PM_SAMPLE_U16},
                 {"signed short int", PM_SAMPLE_I16}, {"int16", PM_SAMPLE_I16},
                 {"short int", PM_SAMPLE_I16},        {"FLOAT", PM_SAMPLE_F32}};
    for (size_t k = 0; k < sizeof spell / sizeof spell[0]; k++) {
        void *d = random_samples(spell[k].t, n);
        snprintf(
            hdr, sizeof hdr,
            "NRRD0005\ntype: %s\ndimension: 3\nsizes: 5 4 3\nendian: little\nencoding: raw\n\n",
            spell[k].name);
        write_file2(path_in("spell.nrrd"), hdr, strlen(hdr), d, n * pm_sample_size(spell[k].t));
        const double one[3] = {1, 1, 1};
        PMT_OK(pm_volume_read(path_in("spell.nrrd"), NULL, 0, &v));
        check_volume(spell[k].name, &v, spell[k].t, dims, one, zero, d);
        pm_volume_free(&v);
        free(d);
    }

    /* Space directions (non-diagonal: only the norms are used), a leading
     * axis of size 1, a detached header with line and byte skip, byte skip
     * -1, gzip with byte skip. */
    {
        float *d = random_samples(PM_SAMPLE_F32, n);
        const double sd[3] = {2, 3, 5};
        snprintf(
            hdr, sizeof hdr,
            "NRRD0004\ntype: float\ndimension: 4\nsizes: 1 5 4 3\nspace: right-anterior-superior\n"
            "space directions: none (0,2,0) (3,0,0) (0,0,-5)\nspace origin: (1,-2,3.25)\n"
            "endian: little\nencoding: raw\n\n");
        write_file2(path_in("dirs.nrrd"), hdr, strlen(hdr), d, 4 * n);
        PMT_OK(pm_volume_read(path_in("dirs.nrrd"), NULL, 0, &v));
        check_volume("space directions", &v, PM_SAMPLE_F32, dims, sd, org, d);
        pm_volume_free(&v);

        write_file2(path_in("data.bin"), "line one\nline two\nXYZ", 21, d, 4 * n);
        snprintf(
            hdr, sizeof hdr,
            "NRRD0004\ntype: float\ndimension: 3\nsizes: 5 4 3\nendian: little\nencoding: raw\n"
            "data file: data.bin\nline skip: 2\nbyte skip: 3\n");
        write_file(path_in("det.nhdr"), hdr, strlen(hdr));
        const double one[3] = {1, 1, 1};
        PMT_OK(pm_volume_read(path_in("det.nhdr"), NULL, 0, &v));
        check_volume("detached", &v, PM_SAMPLE_F32, dims, one, zero, d);
        pm_volume_free(&v);

        snprintf(
            hdr, sizeof hdr,
            "NRRD0004\ntype: float\ndimension: 3\nsizes: 5 4 3\nendian: little\nencoding: raw\n"
            "byte skip: -1\n\nsome junk before the data");
        write_file2(path_in("skipm1.nrrd"), hdr, strlen(hdr), d, 4 * n);
        PMT_OK(pm_volume_read(path_in("skipm1.nrrd"), NULL, 0, &v));
        check_volume("byte skip -1", &v, PM_SAMPLE_F32, dims, one, zero, d);
        pm_volume_free(&v);

        unsigned char both[7 + 240];
        memcpy(both, "skipme!", 7);
        memcpy(both + 7, d, 240);
        size_t cn;
        unsigned char *c = deflate_bytes(both, sizeof both, 1, &cn);
        snprintf(
            hdr, sizeof hdr,
            "NRRD0004\ntype: float\ndimension: 3\nsizes: 5 4 3\nendian: little\nencoding: gzip\n"
            "byte skip: 7\n\n");
        write_file2(path_in("gzskip.nrrd"), hdr, strlen(hdr), c, cn);
        PMT_OK(pm_volume_read(path_in("gzskip.nrrd"), NULL, 0, &v));
        check_volume("gzip byte skip", &v, PM_SAMPLE_F32, dims, one, zero, d);
        pm_volume_free(&v);
        free(c);

        /* Gzip bomb: the stream holds far more than sizes declares. */
        unsigned char *zeros = calloc(1, 1 << 20);
        c = deflate_bytes(zeros, 1 << 20, 1, &cn);
        write_file2(path_in("bomb.nrrd"), hdr, strlen(hdr), c, cn);
        expect_fail(path_in("bomb.nrrd"), NULL, 0, PM_STATUS_PARSE_ERROR, "more than", "gzip bomb");
        free(c);
        /* Too short a stream. */
        c = deflate_bytes(zeros, 100, 1, &cn);
        write_file2(path_in("short.nrrd"), hdr, strlen(hdr), c, cn);
        expect_fail(path_in("short.nrrd"), NULL, 0, PM_STATUS_PARSE_ERROR, "gzip", "short gzip");
        /* Corrupt stream. */
        c[cn / 2] ^= 0x55;
        c[cn / 2 + 1] ^= 0xaa;
        write_file2(path_in("corrupt.nrrd"), hdr, strlen(hdr), c, cn);
        expect_fail(path_in("corrupt.nrrd"), NULL, 0, PM_STATUS_PARSE_ERROR, NULL, "corrupt gzip");
        free(c);
        free(zeros);
        free(d);
    }

    /* Malformed headers: status and a message naming file and field. */
    static const struct {
        const char *header;
        pm_status status;
        const char *needle;
    } bad[] = {
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 10 -3 4\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR,
         "line 4: expected 'sizes' to have 3 positive integers, got 'sizes: 10 -3 4'"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 10 3\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "sizes"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 1 4 3\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "at least 2"},
        {"NRRD0004\ntype: ushort\nendian: little\ndimension: 3\nsizes: 4294967296 4294967296 "
         "4294967296\nencoding: raw\n\n",
         PM_STATUS_OVERFLOW, "overflow"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 100000 100000 100\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "bytes"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 100000 100000 100\nencoding: gzip\n\n",
         PM_STATUS_PARSE_ERROR, "gzip"},
        {"NRRD0004\ntype: int\ndimension: 3\nsizes: 2 2 2\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "unsupported type 'int'"},
        {"NRRD0004\ntype: ushort\ndimension: 3\nsizes: 2 2 2\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "endian"},
        {"NRRD0004\ntype: uchar\ndimension: 2\nsizes: 2 2\nencoding: raw\n\n",
         PM_STATUS_PARSE_ERROR, "dimension"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 2 2 2\nencoding: bzip2\n\n",
         PM_STATUS_PARSE_ERROR, "encoding"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 2 2 2\nencoding: raw\nspacings: 1 0 1\n\n",
         PM_STATUS_PARSE_ERROR, "spacing"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 2 2 2\nspace directions: (1,0,0) (0,1,0\n\n",
         PM_STATUS_PARSE_ERROR, "space directions"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 2 2 2\nencoding: raw\n",
         PM_STATUS_PARSE_ERROR, "empty line"},
        {"NRRD0004\ntype: uchar\ndimension: 3\nsizes: 2 2 2\ndata file: nothere.raw\n",
         PM_STATUS_IO_ERROR, "nothere.raw"},
        {"NRRD0004\ntype uchar\n\n", PM_STATUS_PARSE_ERROR, "line 2"},
        {"NRRD0004\ndimension: 3\nsizes: 2 2 2\n\n", PM_STATUS_PARSE_ERROR, "type"},
        {"NRRX0004\n\n", PM_STATUS_PARSE_ERROR, "magic"},
        {"", PM_STATUS_PARSE_ERROR, "empty"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        size_t hl = strlen(bad[k].header);
        int ends_header = hl >= 2 && bad[k].header[hl - 1] == '\n' && bad[k].header[hl - 2] == '\n';
        write_file2(path_in("bad.nrrd"), bad[k].header, hl, "abcdefgh", ends_header ? 8 : 0);
        if (!bad[k].header[0]) write_file(path_in("bad.nrrd"), "", 0);
        char what[32];
        snprintf(what, sizeof what, "bad nrrd %zu", k);
        expect_fail(path_in("bad.nrrd"), NULL, 0, bad[k].status, bad[k].needle, what);
    }
    static const struct {
        const char *body;
        const char *needle;
    } badvtk[] = {
        {"DIMENSIONS 5 4 3\nPOINT_DATA 59\nSCALARS s float\n", "POINT_DATA 59"},
        {"DIMENSIONS 5 -4 3\nPOINT_DATA 60\nSCALARS s float\n", "DIMENSIONS"},
        {"DIMENSIONS 5 4 3\nPOINT_DATA 60\nSCALARS s int\n", "unsupported scalar type 'int'"},
        {"DIMENSIONS 5 4 3\nPOINT_DATA 60\nSCALARS s float 3\n", "components"},
        {"DIMENSIONS 5 4 3\nSPACING 1 1\nPOINT_DATA 60\n", "SPACING"},
        {"DIMENSIONS 5 4 3\nCELL_DATA 24\n", "CELL_DATA"},
        {"DIMENSIONS 100000 100000 1000\nPOINT_DATA 10000000000000\nSCALARS s float\nLOOKUP_TABLE "
         "default\n",
         "bytes"},
        {"DIMENSIONS 5 4 3\nPOINT_DATA 60\nSCALARS s float\nLOOKUP_TABLE default\n1 2 3 x 5 6 7 8 "
         "9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 1 2 3 4 5 6 7 8 9 10 "
         "1 2 3 4 5 6 7 8 9 10\n",
         "line 9: sample 3"},
    };
    for (size_t k = 0; k < sizeof badvtk / sizeof badvtk[0]; k++) {
        snprintf(hdr, sizeof hdr,
                 "# vtk DataFile Version 2.0\nt\n%s\nDATASET STRUCTURED_POINTS\n%s",
                 k < 7 ? "BINARY" : "ASCII", badvtk[k].body);
        write_file2(path_in("bad.vtk"), hdr, strlen(hdr), "0123456789", 10);
        char what[32];
        snprintf(what, sizeof what, "bad vtk %zu", k);
        expect_fail(path_in("bad.vtk"), NULL, 0, PM_STATUS_PARSE_ERROR, badvtk[k].needle, what);
    }
    /* FIELD data before the geometry is skipped (ASCII and binary). */
    for (int ascii = 0; ascii < 2; ascii++) {
        unsigned char *d = random_samples(PM_SAMPLE_U8, n);
        char *text = ascii_samples(d, PM_SAMPLE_U8, n);
        size_t k = 0;
#define APP(ptr, len) (memcpy(hdr + k, (ptr), (len)), k += (len))
#define APPS(str) APP((str), strlen(str))
        APPS("# vtk DataFile Version 4.2\nt\n");
        APPS(ascii ? "ASCII\n" : "BINARY\n");
        APPS("DATASET STRUCTURED_POINTS\nFIELD FieldData 2\nTIME 1 2 double\n");
        if (ascii)
            APPS("0.5 1.5\n");
        else
            APP("\x3f\xe0\0\0\0\0\0\0\x3f\xf8\0\0\0\0\0\0\n", 17);
        APPS("CYCLE 1 1 int\n");
        if (ascii)
            APPS("7\n");
        else
            APP("\0\0\0\7\n", 5);
        APPS("DIMENSIONS 5 4 3\nSPACING 0.5 1.5 2\nORIGIN 1 -2 3.25\n"
             "POINT_DATA 60\nSCALARS s unsigned_char\nLOOKUP_TABLE default\n");
        write_file2(path_in("field.vtk"), hdr, k, ascii ? (void *)text : d,
                    ascii ? strlen(text) : n);
        PMT_OK(pm_volume_read(path_in("field.vtk"), NULL, 0, &v));
        check_volume("FIELD", &v, PM_SAMPLE_U8, dims, sp, org, d);
        pm_volume_free(&v);
        free(text);
        free(d);
    }

    /* Files that are not there, not files, empty; limits; raw errors. */
    expect_fail(path_in("missing.nrrd"), NULL, 0, PM_STATUS_IO_ERROR, "cannot open", "missing");
    mkdir(path_in("dir.nrrd"), 0755);
    expect_fail(path_in("dir.nrrd"), NULL, 0, PM_STATUS_IO_ERROR, "directory", "directory");
    write_file(path_in("empty.vtk"), "", 0);
    expect_fail(path_in("empty.vtk"), NULL, 0, PM_STATUS_PARSE_ERROR, "empty", "empty vtk");
    expect_fail(path_in("v3_0_0.nrrd"), NULL, 100, PM_STATUS_OUT_OF_MEMORY, "240 bytes",
                "max memory");
    expect_fail(path_in("v1_0.vtk"), NULL, 100, PM_STATUS_OUT_OF_MEMORY, "120 bytes",
                "max memory vtk");
    expect_fail(path_in("v0_0_0.nrrd.txt"), NULL, 0, PM_STATUS_INVALID_ARGUMENT, "extension",
                "ext");
    {
        pm_raw_options ro = {sizeof ro, 5, 4, 4, PM_SAMPLE_U16, {0, 0, 0}, 0, 17, 0, 0};
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_PARSE_ERROR, "bytes", "raw too small");
        ro.nz = 3;
        ro.offset_bytes = 1000;
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_PARSE_ERROR, "offset", "raw offset");
        ro.offset_bytes = 0;
        ro.nx = 0;
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_PARSE_ERROR, "at least 2", "raw dims");
        ro.nx = 5;
        ro.type = (pm_sample_type)9;
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_INVALID_ARGUMENT, "type", "raw type");
        ro.type = PM_SAMPLE_U8;
        ro.spacing[1] = -1;
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_INVALID_ARGUMENT, "spacing",
                    "raw spacing");
        ro.spacing[1] = 0;
        ro.nx = ro.ny = ro.nz = (size_t)1 << 22;
        expect_fail(path_in("v1_0.raw"), &ro, 0, PM_STATUS_OVERFLOW, "overflow", "raw overflow");
    }
    PMT_CHECK(pm_volume_read(NULL, NULL, 0, &v) == PM_STATUS_INVALID_ARGUMENT, "NULL path");
    pm_volume_free(NULL);

    remove_tmpdir();
    return pmt_finish("test_io_volume");
}
