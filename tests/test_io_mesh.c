/* Mesh writers: every format (PLY binary/ASCII, OBJ, STL, VTK) written and
 * parsed back by small independent parsers here, exact values and counts;
 * atomic writes (failures leave no file and no temporary behind, and an
 * existing target untouched). File I/O is host-only: the cuda run skips. */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_common.h"
#include "test_files.h"

static float rd_f32(const unsigned char *p, int big)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = big ? p[3 - i] : p[i];
    float f;
    memcpy(&f, b, 4); /* the test machine is little-endian (checked in main) */
    return f;
}
static int32_t rd_i32(const unsigned char *p, int big)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = big ? p[3 - i] : p[i];
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}

/* The mesh under test: n random vertices, t random triangles (or a soup). */
static pm_mesh make_mesh(size_t nv, size_t nt, int normals, int soup)
{
    pm_mesh m;
    memset(&m, 0, sizeof m);
    if (soup) nv = 3 * nt;
    m.num_vertices = nv;
    m.num_triangles = nt;
    m.positions = malloc(3 * nv * sizeof(float) + 4);
    for (size_t i = 0; i < 3 * nv; i++)
        m.positions[i] = (float)(pmt_uniform() * 200 - 100);
    if (normals) {
        m.normals = malloc(3 * nv * sizeof(float) + 4);
        for (size_t i = 0; i < 3 * nv; i++)
            m.normals[i] = (float)(pmt_uniform() * 2 - 1);
    }
    if (!soup) {
        m.indices = malloc(3 * nt * sizeof(uint32_t) + 4);
        for (size_t i = 0; i < 3 * nt; i++)
            m.indices[i] = (uint32_t)(pmt_rand() % nv);
    }
    return m;
}

static void free_mesh(pm_mesh *m)
{
    free(m->positions);
    free(m->normals);
    free(m->indices);
}

static uint32_t idx(const pm_mesh *m, size_t t, int c)
{
    return m->indices ? m->indices[3 * t + c] : (uint32_t)(3 * t + c);
}

/* ---- independent parsers ---- */

static void check_ply(const char *path, const pm_mesh *m, int ascii)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    PMT_CHECK(b != NULL, "%s not written", path);
    if (!b) return;
    char *end = strstr((char *)b, "end_header\n");
    PMT_CHECK(end != NULL, "no end_header");
    if (!end) return;
    *end = 0;
    char *hdr = (char *)b;
    unsigned char *p = (unsigned char *)end + strlen("end_header\n");
    char expect[256];
    snprintf(expect, sizeof expect, "format %s 1.0\n", ascii ? "ascii" : "binary_little_endian");
    PMT_CHECK(strstr(hdr, expect) != NULL, "format line");
    snprintf(expect, sizeof expect, "element vertex %zu\n", m->num_vertices);
    PMT_CHECK(strstr(hdr, expect) != NULL, "vertex count");
    snprintf(expect, sizeof expect, "element face %zu\nproperty list uchar int vertex_indices\n",
             m->num_triangles);
    PMT_CHECK(strstr(hdr, expect) != NULL, "face element");
    PMT_CHECK((strstr(hdr, "property float nx\nproperty float ny\nproperty float nz\n") != NULL) ==
                  (m->normals != NULL),
              "normal properties");
    int nf = m->normals ? 6 : 3, bad = 0;
    char *s = (char *)p;
    for (size_t i = 0; i < m->num_vertices; i++)
        for (int a = 0; a < nf; a++) {
            float want = a < 3 ? m->positions[3 * i + a] : m->normals[3 * i + a - 3];
            float got;
            if (ascii)
                got = strtof(s, &s);
            else
                got = rd_f32(p + (i * nf + a) * 4, 0);
            bad += got != want;
        }
    PMT_CHECK(bad == 0, "%d vertex values differ", bad);
    p += m->num_vertices * nf * 4;
    bad = 0;
    for (size_t t = 0; t < m->num_triangles; t++) {
        if (ascii) {
            bad += strtol(s, &s, 10) != 3;
            for (int c = 0; c < 3; c++)
                bad += strtol(s, &s, 10) != (long)idx(m, t, c);
        } else {
            bad += p[13 * t] != 3;
            for (int c = 0; c < 3; c++)
                bad += rd_i32(p + 13 * t + 1 + 4 * c, 0) != (int32_t)idx(m, t, c);
        }
    }
    PMT_CHECK(bad == 0, "%d face values differ", bad);
    if (!ascii)
        PMT_CHECK((size_t)(p + 13 * m->num_triangles - b) == n, "binary PLY size %zu", n);
    else {
        while (*s == ' ' || *s == '\n')
            s++;
        PMT_CHECK(*s == 0, "trailing text in ASCII PLY");
    }
    free(b);
}

static void check_obj(const char *path, const pm_mesh *m)
{
    size_t n, v = 0, vn = 0, f = 0;
    unsigned char *b = slurp(path, &n);
    PMT_CHECK(b != NULL, "%s not written", path);
    if (!b) return;
    int bad = 0;
    for (char *line = strtok((char *)b, "\n"); line; line = strtok(NULL, "\n")) {
        char *s = line + 2;
        if (strncmp(line, "v ", 2) == 0) {
            for (int a = 0; a < 3; a++)
                bad += v >= m->num_vertices || strtof(s, &s) != m->positions[3 * v + a];
            v++;
        } else if (strncmp(line, "vn ", 3) == 0) {
            s++;
            for (int a = 0; a < 3; a++)
                bad +=
                    !m->normals || vn >= m->num_vertices || strtof(s, &s) != m->normals[3 * vn + a];
            vn++;
        } else if (strncmp(line, "f ", 2) == 0) {
            for (int c = 0; c < 3; c++) {
                long a = strtol(s, &s, 10);
                bad += f >= m->num_triangles || a != (long)idx(m, f, c) + 1;
                if (m->normals) {
                    bad += s[0] != '/' || s[1] != '/';
                    bad += strtol(s + 2, &s, 10) != a;
                }
            }
            f++;
        } else if (line[0] != '#') {
            bad++;
        }
    }
    PMT_CHECK(bad == 0 && v == m->num_vertices && f == m->num_triangles &&
                  vn == (m->normals ? m->num_vertices : 0),
              "OBJ: %d bad values, %zu v, %zu vn, %zu f", bad, v, vn, f);
    free(b);
}

static void check_stl(const char *path, const pm_mesh *m)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    PMT_CHECK(b != NULL, "%s not written", path);
    if (!b) return;
    PMT_CHECK(n == 84 + 50 * m->num_triangles, "STL size %zu", n);
    PMT_CHECK(strncmp((char *)b, "solid", 5) != 0, "binary STL header starts with 'solid'");
    PMT_CHECK((size_t)rd_i32(b + 80, 0) == m->num_triangles, "STL count");
    int bad = 0;
    for (size_t t = 0; t < m->num_triangles && n == 84 + 50 * m->num_triangles; t++) {
        const unsigned char *p = b + 84 + 50 * t;
        const float *v[3];
        for (int c = 0; c < 3; c++)
            v[c] = m->positions + 3 * idx(m, t, c);
        double e1[3], e2[3], nn[3];
        for (int a = 0; a < 3; a++) {
            e1[a] = (double)v[1][a] - v[0][a];
            e2[a] = (double)v[2][a] - v[0][a];
        }
        nn[0] = e1[1] * e2[2] - e1[2] * e2[1];
        nn[1] = e1[2] * e2[0] - e1[0] * e2[2];
        nn[2] = e1[0] * e2[1] - e1[1] * e2[0];
        double len = sqrt(nn[0] * nn[0] + nn[1] * nn[1] + nn[2] * nn[2]);
        for (int a = 0; a < 3; a++)
            bad += fabs(rd_f32(p + 4 * a, 0) - (len > 0 ? nn[a] / len : 0.0)) > 1e-6;
        for (int c = 0; c < 3; c++)
            for (int a = 0; a < 3; a++)
                bad += rd_f32(p + 12 + 12 * c + 4 * a, 0) != v[c][a];
        bad += p[48] != 0 || p[49] != 0;
    }
    PMT_CHECK(bad == 0, "STL: %d values differ", bad);
    free(b);
}

static void check_vtk(const char *path, const pm_mesh *m)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    PMT_CHECK(b != NULL, "%s not written", path);
    if (!b) return;
    char expect[128];
    snprintf(expect, sizeof expect, "BINARY\nDATASET POLYDATA\nPOINTS %zu float\n",
             m->num_vertices);
    char *p = strstr((char *)b, expect);
    PMT_CHECK(strncmp((char *)b, "# vtk DataFile Version 3.0\n", 27) == 0 && p, "VTK header");
    if (!p) {
        free(b);
        return;
    }
    unsigned char *q = (unsigned char *)p + strlen(expect);
    int bad = 0;
    for (size_t i = 0; i < 3 * m->num_vertices; i++)
        bad += rd_f32(q + 4 * i, 1) != m->positions[i];
    q += 12 * m->num_vertices;
    snprintf(expect, sizeof expect, "\nPOLYGONS %zu %zu\n", m->num_triangles, 4 * m->num_triangles);
    PMT_CHECK(memcmp(q, expect, strlen(expect)) == 0, "POLYGONS line");
    q += strlen(expect);
    for (size_t t = 0; t < m->num_triangles; t++) {
        bad += rd_i32(q + 16 * t, 1) != 3;
        for (int c = 0; c < 3; c++)
            bad += rd_i32(q + 16 * t + 4 + 4 * c, 1) != (int32_t)idx(m, t, c);
    }
    q += 16 * m->num_triangles;
    if (m->normals) {
        snprintf(expect, sizeof expect, "\nPOINT_DATA %zu\nNORMALS Normals float\n",
                 m->num_vertices);
        PMT_CHECK(memcmp(q, expect, strlen(expect)) == 0, "POINT_DATA line");
        q += strlen(expect);
        for (size_t i = 0; i < 3 * m->num_vertices; i++)
            bad += rd_f32(q + 4 * i, 1) != m->normals[i];
        q += 12 * m->num_vertices;
    }
    PMT_CHECK(bad == 0, "VTK: %d values differ", bad);
    PMT_CHECK((size_t)(q - b) + 1 == n && *q == '\n', "VTK size %zu vs %zu", n,
              (size_t)(q - b) + 1);
    free(b);
}

static void roundtrip(const pm_mesh *m, const char *tag)
{
    char name[128];
    pm_write_options ascii = {sizeof ascii, PM_MESH_FORMAT_AUTO, 1};
    snprintf(name, sizeof name, "%s.ply", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, NULL));
    check_ply(path_in(name), m, 0);
    snprintf(name, sizeof name, "%s_ascii.ply", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, &ascii));
    check_ply(path_in(name), m, 1);
    snprintf(name, sizeof name, "%s.obj", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, NULL));
    check_obj(path_in(name), m);
    snprintf(name, sizeof name, "%s.stl", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, NULL));
    check_stl(path_in(name), m);
    snprintf(name, sizeof name, "%s.vtk", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, NULL));
    check_vtk(path_in(name), m);
    /* options->format overrides the extension. */
    pm_write_options force = {sizeof force, PM_MESH_FORMAT_STL, 0};
    snprintf(name, sizeof name, "%s_stl.dat", tag);
    PMT_OK(pm_mesh_write(path_in(name), m, &force));
    check_stl(path_in(name), m);
}

static void expect_fail(pm_status got, pm_status want, const char *path, const char *what)
{
    PMT_CHECK(got == want, "%s: got %s, want %s (%s)", what, pm_status_string(got),
              pm_status_string(want), pm_last_error());
    PMT_CHECK(strstr(pm_last_error(), path) != NULL, "%s: message '%s' does not name %s", what,
              pm_last_error(), path);
}

int main(int argc, char **argv)
{
    if (!pmt_files_start(argc, argv, "pm_io_mesh", 1)) return PMT_SKIP;

    /* Awkward sizes: empty, one triangle, a few, and one larger than the
     * writers' 1 MiB staging buffer. */
    const size_t sizes[][2] = {{0, 0}, {3, 1}, {7, 11}, {25000, 60000}};
    for (size_t k = 0; k < 4; k++)
        for (int normals = 0; normals < 2; normals++)
            for (int soup = 0; soup < 2; soup++) {
                pm_mesh m = make_mesh(sizes[k][0], sizes[k][1], normals, soup);
                char tag[32];
                snprintf(tag, sizeof tag, "m%zu_%d_%d", k, normals, soup);
                roundtrip(&m, tag);
                free_mesh(&m);
            }
    PMT_CHECK(count_temps(tmpdir) == 0, "temporary files left behind");

    pm_mesh m = make_mesh(10, 12, 1, 0);
    /* Overwriting an existing file replaces it. */
    PMT_OK(pm_mesh_write(path_in("over.obj"), &m, NULL));
    PMT_OK(pm_mesh_write(path_in("over.obj"), &m, NULL));
    check_obj(path_in("over.obj"), &m);

    /* A missing directory: IO_ERROR naming the file, nothing created. */
    const char *missing = path_in("no/such/dir/out.ply");
    expect_fail(pm_mesh_write(missing, &m, NULL), PM_STATUS_IO_ERROR, missing, "missing dir");
    PMT_CHECK(access(missing, F_OK) != 0, "file created in a missing directory");

    /* Unknown extension, soup with wrong vertex count, bad index, context
     * memory: INVALID_ARGUMENT and no file. */
    const char *bad = path_in("mesh.xyz");
    expect_fail(pm_mesh_write(bad, &m, NULL), PM_STATUS_INVALID_ARGUMENT, bad, "extension");
    const char *p2 = path_in("badindex.ply");
    m.indices[5] = 10;
    expect_fail(pm_mesh_write(p2, &m, NULL), PM_STATUS_INVALID_ARGUMENT, p2, "index range");
    PMT_CHECK(access(p2, F_OK) != 0, "file created for an invalid mesh");
    m.indices[5] = 9;
    pm_mesh soup = m;
    soup.indices = NULL;
    expect_fail(pm_mesh_write(p2, &soup, NULL), PM_STATUS_INVALID_ARGUMENT, p2, "soup count");
    pm_mesh dev = m;
    dev.in_context_memory = 1;
    expect_fail(pm_mesh_write(p2, &dev, NULL), PM_STATUS_INVALID_ARGUMENT, p2, "context memory");
    PMT_CHECK(pm_mesh_write(NULL, &m, NULL) == PM_STATUS_INVALID_ARGUMENT, "NULL path");

    /* A read-only directory (not meaningful as root, who may write anyway). */
    if (geteuid() != 0) {
        char *ro = path_in("ro");
        mkdir(ro, 0755);
        char target[800];
        snprintf(target, sizeof target, "%s/out.stl", ro);
        chmod(ro, 0555);
        expect_fail(pm_mesh_write(target, &m, NULL), PM_STATUS_IO_ERROR, target, "read-only dir");
        PMT_CHECK(access(target, F_OK) != 0 && count_temps(ro) == 0, "file left in read-only dir");
        chmod(ro, 0755);
    }

    /* A write that fails midway (file size limit -> EFBIG, as ENOSPC
     * would): IO_ERROR, the existing target untouched, no temporary left. */
    {
        const char *target = path_in("keep.ply");
        pm_mesh small = make_mesh(3, 1, 0, 0);
        PMT_OK(pm_mesh_write(target, &small, NULL));
        size_t n0;
        unsigned char *before = slurp(target, &n0);
        pm_mesh big = make_mesh(200000, 10, 1, 0);
        struct rlimit old, lim;
        getrlimit(RLIMIT_FSIZE, &old);
        lim = old;
        lim.rlim_cur = 1 << 20;
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &lim);
        pm_status s = pm_mesh_write(target, &big, NULL);
        setrlimit(RLIMIT_FSIZE, &old);
        expect_fail(s, PM_STATUS_IO_ERROR, target, "write failure");
        size_t n1;
        unsigned char *after = slurp(target, &n1);
        PMT_CHECK(after && n0 == n1 && memcmp(before, after, n0) == 0, "target changed on failure");
        PMT_CHECK(count_temps(tmpdir) == 0, "temporary file left after a failed write");
        free(before);
        free(after);
        free_mesh(&small);
        free_mesh(&big);
    }
    free_mesh(&m);
    remove_tmpdir();
    return pmt_finish("test_io_mesh");
}
