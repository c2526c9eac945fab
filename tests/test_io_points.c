/* Point readers: PLY (ASCII, binary little- and big-endian, float and
 * double, properties in any order, lists and other elements before and
 * after the vertices), XYZ text (blanks, commas, comments, CRLF, extra
 * columns) and binary (auto-detected or forced), VTK legacy POINTS
 * (POLYDATA, UNSTRUCTURED_GRID; ASCII and binary; float and double;
 * versions 2.0 to 5.1; FIELD blocks), each against the values written here;
 * then malformed inputs: truncations, corruption, NaN, huge counts, limits.
 * File I/O is host-only: the cuda run skips. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_common.h"
#include "test_files.h"

/* A growing byte buffer for building files. */

/* A binary value of PLY type code: 'b' int8 'B' uint8 'h' int16 'H'
 * uint16 'i' int32 'f' float 'd' double; big-endian when big. */
static void putv(buf *b, char type, double v, int big)
{
    unsigned char raw[8];
    size_t n = 0;
    switch (type) {
    case 'b': {
        int8_t x = (int8_t)v;
        memcpy(raw, &x, n = 1);
        break;
    }
    case 'B': {
        uint8_t x = (uint8_t)v;
        memcpy(raw, &x, n = 1);
        break;
    }
    case 'h': {
        int16_t x = (int16_t)v;
        memcpy(raw, &x, n = 2);
        break;
    }
    case 'H': {
        uint16_t x = (uint16_t)v;
        memcpy(raw, &x, n = 2);
        break;
    }
    case 'i': {
        int32_t x = (int32_t)v;
        memcpy(raw, &x, n = 4);
        break;
    }
    case 'f': {
        float x = (float)v;
        memcpy(raw, &x, n = 4);
        break;
    }
    case 'd': memcpy(raw, &v, n = 8); break;
    }
    if (big)
        for (size_t i = 0; i < n / 2; i++) {
            unsigned char t = raw[i];
            raw[i] = raw[n - 1 - i];
            raw[n - 1 - i] = t;
        }
    put(b, raw, n);
}

static double *random_points(size_t n)
{
    double *p = malloc(3 * n * sizeof(double) + 8);
    for (size_t i = 0; i < 3 * n; i++)
        p[i] = pmt_uniform() * 2000.0 - 1000.0;
    return p;
}

static void check_points(const char *what, const pm_points *pts, const double *want, size_t n,
                         int as_float)
{
    PMT_CHECK(pts->count == n, "%s: count %zu, want %zu", what, pts->count, n);
    if (pts->count != n) return;
    size_t bad = 0;
    for (size_t i = 0; i < 3 * n; i++) {
        /* Values written as float text or float binary come back exactly;
         * doubles come back as the nearest float. */
        float w = as_float ? (float)want[i] : (float)want[i];
        bad += pts->xyz[i] != w;
    }
    PMT_CHECK(bad == 0, "%s: %zu coordinates differ", what, bad);
}

static void expect_fail(const char *path, pm_points_format fmt, size_t maxmem, pm_status want,
                        const char *needle, const char *what)
{
    pm_points p;
    pm_status s = pm_points_read(path, fmt, maxmem, &p);
    PMT_CHECK(s == want, "%s: got %s, want %s: %s", what, pm_status_string(s),
              pm_status_string(want), pm_last_error());
    if (s == PM_STATUS_OK) pm_points_free(&p);
    PMT_CHECK(strstr(pm_last_error(), path) != NULL, "%s: message '%s' does not name the file",
              what, pm_last_error());
    if (needle)
        PMT_CHECK(strstr(pm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
                  pm_last_error(), needle);
}

/* Every prefix must fail (strict; except cuts in the last `tail` bytes,
 * which hold elements after the points that are never read) or at least
 * not crash and name the file;
 * random corruption must never crash. */
static void hostile(const char *name, int strict, size_t tail)
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
        pm_points p;
        pm_status s = pm_points_read(cp, PM_POINTS_AUTO, 0, &p);
        if (s == PM_STATUS_OK) {
            pm_points_free(&p);
            bad += strict && k < n - tail;
        } else if (!strstr(pm_last_error(), cut)) {
            bad++;
        }
    }
    PMT_CHECK(bad == 0, "%s: %d truncations accepted or unnamed", name, bad);
    unsigned char *m = malloc(n);
    for (int it = 0; it < 300; it++) {
        memcpy(m, b, n);
        for (int j = 0, flips = 1 + (int)(pmt_rand() % 4); j < flips; j++)
            m[pmt_rand() % (n < 300 ? n : 300)] = (unsigned char)pmt_rand();
        write_file(cp, m, n);
        pm_points p;
        if (pm_points_read(cp, PM_POINTS_AUTO, 1 << 24, &p) == PM_STATUS_OK)
            pm_points_free(&p);
        else
            PMT_CHECK(strstr(pm_last_error(), cut), "unnamed: %s", pm_last_error());
    }
    free(m);
    free(b);
    remove(cp);
}

/* PLY with a camera element (scalar + list) before the vertices, vertex
 * properties in the order red z [list] x s y, and faces after. */
static void make_ply(buf *b, int format, char ct, const double *p, size_t n, int vertex_list,
                     size_t nan_at)
{
    static const char *fmts[] = {"ascii", "binary_little_endian", "binary_big_endian"};
    const char *tn = ct == 'f' ? "float" : "double";
    putf(b, "ply\nformat %s 1.0\ncomment test file\nobj_info nothing\n", fmts[format]);
    puts_(b, "element camera 2\nproperty float view_px\nproperty list uchar int junk\n");
    putf(b, "element vertex %zu\nproperty uchar red\nproperty %s z\n", n, tn);
    if (vertex_list) puts_(b, "property list ushort float extra\n");
    putf(b, "property %s x\nproperty short s\nproperty %s y\n", tn, tn);
    puts_(b, "element face 2\nproperty list uchar int vertex_indices\nend_header\n");
    int big = format == 2;
    for (int c = 0; c < 2; c++) {
        if (format == 0)
            putf(b, "1.5 2 %d %d\n", c, c + 1);
        else {
            putv(b, 'f', 1.5, big);
            putv(b, 'B', 2, big);
            putv(b, 'i', c, big);
            putv(b, 'i', c + 1, big);
        }
    }
    for (size_t i = 0; i < n; i++) {
        double x = p[3 * i], y = p[3 * i + 1], z = p[3 * i + 2];
        if (i == nan_at) y = NAN;
        unsigned nl = vertex_list ? (unsigned)(i % 3) : 0;
        if (format == 0) {
            putf(b, "%u %.17g", (unsigned)(i % 256), z);
            if (vertex_list) {
                putf(b, " %u", nl);
                for (unsigned k = 0; k < nl; k++)
                    putf(b, " %u.5", k);
            }
            putf(b, " %.17g %d %.17g\n", x, -(int)i, y);
        } else {
            putv(b, 'B', (double)(i % 256), big);
            putv(b, ct, z, big);
            if (vertex_list) {
                putv(b, 'H', nl, big);
                for (unsigned k = 0; k < nl; k++)
                    putv(b, 'f', k + 0.5, big);
            }
            putv(b, ct, x, big);
            putv(b, 'h', -(double)(i % 30000), big);
            putv(b, ct, y, big);
        }
    }
    for (int c = 0; c < 2; c++) {
        if (format == 0)
            puts_(b, "3 0 1 2\n");
        else {
            putv(b, 'B', 3, big);
            for (int k = 0; k < 3; k++)
                putv(b, 'i', k, big);
        }
    }
}

static void make_vtk(buf *b, const char *version, const char *dataset, int binary, char ct,
                     const double *p, size_t n, int field, size_t nan_at)
{
    putf(b, "# vtk DataFile Version %s\nparticles\n%s\nDATASET %s\n", version,
         binary ? "BINARY" : "ASCII", dataset);
    if (field) {
        puts_(b, "FIELD FieldData 1\nTIME 1 1 double\n");
        if (binary) {
            putv(b, 'd', 0.25, 1);
            puts_(b, "\n");
        } else {
            puts_(b, "0.25\n");
        }
    }
    putf(b, "POINTS %zu %s\n", n, ct == 'f' ? "float" : "double");
    for (size_t i = 0; i < 3 * n; i++) {
        double v = i / 3 == nan_at && i % 3 == 2 ? NAN : p[i];
        if (binary)
            putv(b, ct, v, 1);
        else
            putf(b, "%.17g%s", v, i % 9 == 8 ? "\n" : " ");
    }
    puts_(b, "\n");
    /* Cells after the points: the reader stops before them. */
    if (strcmp(version, "5.1") == 0)
        puts_(b, "CELLS 2 1\nOFFSETS vtktypeint64\n0 1\nCONNECTIVITY vtktypeint64\n0\n");
    else
        puts_(b, "VERTICES 1 2\n1 0\n");
}

int main(int argc, char **argv)
{
    if (!pmt_files_start(argc, argv, "pm_io_pts", 1)) return PMT_SKIP;
    char name[128];
    pm_points pts;

    /* PLY: 3 formats x float/double x with/without a list in the vertex,
     * a small and a large (> 1 MiB of records) point count. */
    const size_t counts[] = {0, 1, 37, 60000};
    for (int c = 0; c < 4; c++) {
        size_t n = counts[c];
        double *p = random_points(n);
        for (int format = 0; format < 3; format++)
            for (int d = 0; d < 2; d++)
                for (int vl = 0; vl < 2; vl++) {
                    if (n > 1000 && (format == 0 || vl)) continue; /* keep the test fast */
                    buf b = {0};
                    make_ply(&b, format, d ? 'd' : 'f', p, n, vl, SIZE_MAX);
                    snprintf(name, sizeof name, "p%d_%d_%d_%d.ply", c, format, d, vl);
                    write_file(path_in(name), b.p, b.n);
                    PMT_OK(pm_points_read(path_in(name), PM_POINTS_AUTO, 0, &pts));
                    check_points(name, &pts, p, n, !d);
                    pm_points_free(&pts);
                    if (c == 2 && format > 0 && d == (format == 2)) hostile(name, 1, 26);
                    if (c == 2 && format == 0 && d == 0 && vl) hostile(name, 0, 0);
                    free(b.p);
                }
        /* VTK: versions x datasets x binary/ascii x float/double. */
        static const char *versions[] = {"2.0", "3.0", "4.2", "5.1"};
        for (int v = 0; v < 4; v++)
            for (int ds = 0; ds < 2; ds++)
                for (int bin = 0; bin < 2; bin++)
                    for (int d = 0; d < 2; d++) {
                        if (n > 1000 && (!bin || v < 3)) continue;
                        buf b = {0};
                        make_vtk(&b, versions[v], ds ? "UNSTRUCTURED_GRID" : "POLYDATA", bin,
                                 d ? 'd' : 'f', p, n, v == 2, SIZE_MAX);
                        snprintf(name, sizeof name, "p%d_%d_%d_%d_%d.vtk", c, v, ds, bin, d);
                        write_file(path_in(name), b.p, b.n);
                        PMT_OK(pm_points_read(path_in(name), PM_POINTS_AUTO, 0, &pts));
                        check_points(name, &pts, p, n, !d);
                        pm_points_free(&pts);
                        if (c == 2 && v == 2 && ds == 1 && d == bin) hostile(name, bin, 18);
                        free(b.p);
                    }
        /* XYZ binary: little-endian float triplets, detected and forced. */
        if (n > 0) {
            buf b = {0};
            for (size_t i = 0; i < 3 * n; i++)
                putv(&b, 'f', p[i], 0);
            snprintf(name, sizeof name, "p%d_bin.xyz", c);
            write_file(path_in(name), b.p, b.n);
            PMT_OK(pm_points_read(path_in(name), PM_POINTS_AUTO, 0, &pts));
            check_points(name, &pts, p, n, 1);
            pm_points_free(&pts);
            snprintf(name, sizeof name, "p%d_bin.dat", c);
            write_file(path_in(name), b.p, b.n);
            PMT_OK(pm_points_read(path_in(name), PM_POINTS_XYZ_BINARY, 0, &pts));
            check_points(name, &pts, p, n, 1);
            pm_points_free(&pts);
            free(b.p);
        }
        /* XYZ text in several dialects. */
        for (int dialect = 0; dialect < 4; dialect++) {
            if (n > 1000 && dialect) continue;
            buf b = {0};
            if (dialect == 1) puts_(&b, "# x y z r g b\n// exported\n\n");
            if (dialect == 3) puts_(&b, "\xEF\xBB\xBF");
            for (size_t i = 0; i < n; i++) {
                float x = (float)p[3 * i], y = (float)p[3 * i + 1], z = (float)p[3 * i + 2];
                switch (dialect) {
                case 0: putf(&b, "%.9g %.9g %.9g\n", x, y, z); break;
                case 1:
                    putf(&b, "  %.9g\t%.9g  %.9g 1 2 3\r\n%s", x, y, z, i % 5 ? "" : "   \n# c\n");
                    break;
                case 2:
                    putf(&b, "%.9g,%.9g, %.9g,0.5", x, y, z);
                    puts_(&b, i + 1 < n ? "\n" : "");
                    break;
                case 3: putf(&b, "%.9e , %.9e , %.9e\n", x, y, z); break;
                }
            }
            snprintf(name, sizeof name, "p%d_t%d.xyz", c, dialect);
            write_file(path_in(name), b.p, b.n);
            if (n == 0 && (dialect == 0 || dialect == 2)) {
                expect_fail(path_in(name), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "empty",
                            "empty xyz");
            } else {
                PMT_OK(pm_points_read(path_in(name), PM_POINTS_AUTO, 0, &pts));
                check_points(name, &pts, p, n, 1);
                pm_points_free(&pts);
                PMT_OK(pm_points_read(path_in(name), PM_POINTS_XYZ_TEXT, 0, &pts));
                check_points(name, &pts, p, n, 1);
                pm_points_free(&pts);
            }
            if (c == 2 && dialect == 1) hostile(name, 0, 0);
            free(b.p);
        }
        free(p);
    }

    /* NaN and infinite coordinates name the point. */
    {
        double *p = random_points(5);
        buf b = {0};
        make_ply(&b, 1, 'f', p, 5, 0, 2);
        write_file(path_in("nan.ply"), b.p, b.n);
        expect_fail(path_in("nan.ply"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 2",
                    "nan ply");
        b.n = 0;
        make_ply(&b, 0, 'd', p, 5, 1, 3);
        write_file(path_in("nan_ascii.ply"), b.p, b.n);
        expect_fail(path_in("nan_ascii.ply"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 3",
                    "nan ply ascii");
        b.n = 0;
        make_vtk(&b, "4.2", "POLYDATA", 0, 'f', p, 5, 0, 4);
        write_file(path_in("nan.vtk"), b.p, b.n);
        expect_fail(path_in("nan.vtk"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 4",
                    "nan vtk");
        b.n = 0;
        make_vtk(&b, "4.2", "POLYDATA", 1, 'd', p, 5, 0, 1);
        write_file(path_in("nan_bin.vtk"), b.p, b.n);
        expect_fail(path_in("nan_bin.vtk"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 1",
                    "nan vtk bin");
        const char *txt = "1 2 3\n4 5 6\n7 inf 9\n";
        write_file(path_in("inf.xyz"), txt, strlen(txt));
        expect_fail(path_in("inf.xyz"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 2",
                    "inf xyz");
        txt = "1 2 3\n4 5 6\n7 1e39 9\n";
        write_file(path_in("big.xyz"), txt, strlen(txt));
        expect_fail(path_in("big.xyz"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 2",
                    "1e39 xyz");
        b.n = 0;
        for (int i = 0; i < 9; i++)
            putv(&b, 'f', i == 4 ? NAN : i, 0);
        write_file(path_in("nan_bin.xyz"), b.p, b.n);
        expect_fail(path_in("nan_bin.xyz"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR, "point 1",
                    "nan xyz bin");
        free(b.p);
        free(p);
    }

    /* Malformed files. */
    static const struct {
        const char *file, *text, *needle;
        pm_status status;
    } bad[] = {
        {"huge.ply",
         "ply\nformat binary_little_endian 1.0\nelement vertex 1000000000000\nproperty float "
         "x\nproperty float y\nproperty float z\nend_header\n0123456789ab",
         "1000000000000 points", PM_STATUS_PARSE_ERROR},
        {"hugea.ply",
         "ply\nformat ascii 1.0\nelement vertex 1000000000000\nproperty float x\nproperty float "
         "y\nproperty float z\nend_header\n1 2 3\n",
         "1000000000000 points", PM_STATUS_PARSE_ERROR},
        {"type.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty int128 x\nend_header\n",
         "line 4: unknown property type 'int128'", PM_STATUS_PARSE_ERROR},
        {"noy.ply",
         "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float "
         "z\nend_header\n1 2\n",
         "'y'", PM_STATUS_PARSE_ERROR},
        {"novert.ply",
         "ply\nformat ascii 1.0\nelement face 0\nproperty list uchar int "
         "vertex_indices\nend_header\n",
         "vertex", PM_STATUS_PARSE_ERROR},
        {"fmt.ply", "ply\nformat binary_middle_endian 1.0\nend_header\n", "binary_middle_endian",
         PM_STATUS_PARSE_ERROR},
        {"magic.ply", "plx\nformat ascii 1.0\nend_header\n", "line 1", PM_STATUS_PARSE_ERROR},
        {"nohdr.ply", "ply\nformat ascii 1.0\nelement vertex 1\n", "end_header",
         PM_STATUS_PARSE_ERROR},
        {"neg.ply",
         "ply\nformat binary_little_endian 1.0\nelement junk 1\nproperty list char int a\nelement "
         "vertex 1\nproperty float x\nproperty float y\nproperty float z\nend_header\n\xff",
         "negative", PM_STATUS_PARSE_ERROR},
        {"word.ply",
         "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty "
         "float z\nend_header\n1 2 3\n4 five 6\n",
         "line 9", PM_STATUS_PARSE_ERROR},
        {"count.ply",
         "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\nproperty "
         "float z\nend_header\n1 2 3          \n4 5 6          \n",
         "end of file", PM_STATUS_PARSE_ERROR},
        {"empty_elem.ply",
         "ply\nformat ascii 1.0\nelement nothing 1000000000000000\nelement vertex 1\nproperty "
         "float x\nproperty float y\nproperty float z\nend_header\n1 2 nan\n",
         "point 0", PM_STATUS_PARSE_ERROR},
        {"short.xyz", "1 2 3\n4 5 6\n7 8\n", "line 3", PM_STATUS_PARSE_ERROR},
        {"junk.xyz", "1 2 3\n4 5 6x 7\n", "line 2", PM_STATUS_PARSE_ERROR},
        {"hdr.xyz", "x y z\n1 2 3\n", "line 1", PM_STATUS_PARSE_ERROR},
        {"odd.xyz", "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d", "multiple of 12",
         PM_STATUS_PARSE_ERROR},
        {"type.vtk",
         "# vtk DataFile Version 3.0\nx\nASCII\nDATASET POLYDATA\nPOINTS 2 int\n1 2 3 4 5 6\n",
         "line 5: unsupported POINTS type 'int'", PM_STATUS_PARSE_ERROR},
        {"many.vtk",
         "# vtk DataFile Version 3.0\nx\nBINARY\nDATASET POLYDATA\nPOINTS 1000000000000 "
         "float\n0123456789ab",
         "1000000000000 points", PM_STATUS_PARSE_ERROR},
        {"sp.vtk", "# vtk DataFile Version 3.0\nx\nBINARY\nDATASET STRUCTURED_POINTS\n",
         "STRUCTURED_POINTS", PM_STATUS_PARSE_ERROR},
        {"nopts.vtk", "# vtk DataFile Version 3.0\nx\nASCII\nDATASET POLYDATA\nPOLYGONS 0 0\n",
         "line 5", PM_STATUS_PARSE_ERROR},
        {"ver.vtk", "# vtk DataFile\nx\nASCII\n", "line 1", PM_STATUS_PARSE_ERROR},
        {"fewer.vtk",
         "# vtk DataFile Version 3.0\nx\nASCII\nDATASET POLYDATA\nPOINTS 3 float\n1 2 3 4 5 6 7 8  "
         "               \n",
         "end of file", PM_STATUS_PARSE_ERROR},
        {"empty.ply", "", "empty", PM_STATUS_PARSE_ERROR},
        {"empty.vtk", "", "empty", PM_STATUS_PARSE_ERROR},
        {"empty.xyz", "", "empty", PM_STATUS_PARSE_ERROR},
        {"points.txt", "1 2 3\n", "extension", PM_STATUS_INVALID_ARGUMENT},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        write_file(path_in(bad[k].file), bad[k].text, strlen(bad[k].text));
        char what[64];
        snprintf(what, sizeof what, "bad %s", bad[k].file);
        expect_fail(path_in(bad[k].file), PM_POINTS_AUTO, 0, bad[k].status, bad[k].needle, what);
    }
    {
        /* A line longer than the reader's 1 MiB line limit. */
        size_t n = (1u << 20) + 100;
        char *t = malloc(n + 1);
        memset(t, ' ', n);
        memcpy(t, "1 2 3", 5);
        memcpy(t + n - 8, "\n4 5 6\n", 8);
        write_file(path_in("long.xyz"), t, n);
        expect_fail(path_in("long.xyz"), PM_POINTS_AUTO, 0, PM_STATUS_PARSE_ERROR,
                    "line 1: longer than", "long line");
        free(t);
    }
    expect_fail(path_in("missing.ply"), PM_POINTS_AUTO, 0, PM_STATUS_IO_ERROR, "cannot open",
                "missing");
    mkdir(path_in("dir.xyz"), 0755);
    expect_fail(path_in("dir.xyz"), PM_POINTS_AUTO, 0, PM_STATUS_IO_ERROR, "directory",
                "directory");
    expect_fail(path_in("p2_1_0_0.ply"), PM_POINTS_AUTO, 100, PM_STATUS_OUT_OF_MEMORY, "limit",
                "limit ply");
    expect_fail(path_in("p2_t0.xyz"), PM_POINTS_AUTO, 100, PM_STATUS_OUT_OF_MEMORY, "limit",
                "limit xyz");
    expect_fail(path_in("p2_0_0_1_0.vtk"), PM_POINTS_AUTO, 100, PM_STATUS_OUT_OF_MEMORY, "limit",
                "limit vtk");
    PMT_CHECK(pm_points_read(NULL, PM_POINTS_AUTO, 0, &pts) == PM_STATUS_INVALID_ARGUMENT, "NULL");
    pm_points_free(NULL);

    remove_tmpdir();
    return pmt_finish("test_io_points");
}
