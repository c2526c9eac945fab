/* pm_mesh_analyze on meshes whose topology is known (cube, torus, open
 * square, a "book" of three triangles on one edge, a bow-tie vertex, a
 * flipped triangle, a welded soup, two components), against a brute-force
 * O(n^2) edge count on random meshes; and pm_debug_images writing PNGs whose
 * IHDR sizes are checked. Host-only: the cuda run skips. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_common.h"

static const float cube_pos[] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0,
                                 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1};
/* Counter-clockwise seen from outside. */
static const uint32_t cube_tri[] = {0, 2, 1, 0, 3, 2, 4, 5, 6, 4, 6, 7, 0, 1, 5, 0, 5, 4,
                                    2, 3, 7, 2, 7, 6, 1, 2, 6, 1, 6, 5, 0, 4, 7, 0, 7, 3};

static pm_mesh mesh_of(const float *pos, size_t nv, const uint32_t *tri, size_t nt)
{
    pm_mesh m;
    memset(&m, 0, sizeof m);
    m.num_vertices = nv;
    m.num_triangles = nt;
    m.positions = (float *)pos;
    m.indices = (uint32_t *)tri;
    return m;
}

static pm_mesh_report analyze(const pm_mesh *m)
{
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(m, &r));
    return r;
}

#define EXPECT(what, field, want)                                                                  \
    PMT_CHECK((long long)(r.field) == (long long)(want), "%s: " #field " = %lld, want %lld", what, \
              (long long)(r.field), (long long)(want))

static void known_meshes(void)
{
    pm_mesh_report r;
    /* Cube: closed, manifold, oriented, chi 2, area 6, volume 1. */
    pm_mesh cube = mesh_of(cube_pos, 8, cube_tri, 12);
    r = analyze(&cube);
    EXPECT("cube", num_vertices, 8);
    EXPECT("cube", num_edges, 18);
    EXPECT("cube", euler, 2);
    EXPECT("cube", closed, 1);
    EXPECT("cube", manifold, 1);
    EXPECT("cube", oriented, 1);
    EXPECT("cube", components, 1);
    EXPECT("cube", boundary_edges, 0);
    EXPECT("cube", degenerate_triangles, 0);
    PMT_CHECK(fabs(r.area - 6) < 1e-12 && fabs(r.volume - 1) < 1e-12, "cube: area %g volume %g",
              r.area, r.volume);
    PMT_CHECK(r.bbox_min[0] == 0 && r.bbox_max[2] == 1, "cube: bbox");

    /* The cube as a soup, translated far from the origin: welded, closed. */
    float soup[36 * 3];
    for (int i = 0; i < 36; i++)
        for (int a = 0; a < 3; a++)
            soup[3 * i + a] = cube_pos[3 * cube_tri[i] + (uint32_t)a] + 1000.0f;
    pm_mesh sm = mesh_of(soup, 36, NULL, 12);
    r = analyze(&sm);
    EXPECT("soup", num_vertices, 8);
    EXPECT("soup", euler, 2);
    EXPECT("soup", closed, 1);
    EXPECT("soup", manifold, 1);
    EXPECT("soup", oriented, 1);
    PMT_CHECK(fabs(r.volume - 1) < 1e-9, "soup: volume %g", r.volume);

    /* One triangle flipped: its three edges are misoriented. */
    uint32_t flipped[36];
    memcpy(flipped, cube_tri, sizeof flipped);
    flipped[1] = cube_tri[2];
    flipped[2] = cube_tri[1];
    pm_mesh fm = mesh_of(cube_pos, 8, flipped, 12);
    r = analyze(&fm);
    EXPECT("flipped", misoriented_edges, 3);
    EXPECT("flipped", oriented, 0);
    EXPECT("flipped", closed, 1);
    EXPECT("flipped", manifold, 1);

    /* Two cubes: two components, chi 4, volume 2. */
    float two_pos[48];
    uint32_t two_tri[72];
    for (int i = 0; i < 24; i++) {
        two_pos[i] = cube_pos[i];
        two_pos[24 + i] = cube_pos[i] + (i % 3 == 0 ? 3.0f : 0.0f);
    }
    for (int i = 0; i < 36; i++) {
        two_tri[i] = cube_tri[i];
        two_tri[36 + i] = cube_tri[i] + 8;
    }
    pm_mesh tm = mesh_of(two_pos, 16, two_tri, 24);
    r = analyze(&tm);
    EXPECT("two cubes", components, 2);
    EXPECT("two cubes", euler, 4);
    EXPECT("two cubes", closed, 1);
    PMT_CHECK(fabs(r.volume - 2) < 1e-12, "two cubes: volume %g", r.volume);

    /* Open square: 4 boundary edges, chi 1. */
    static const float sq_pos[] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0};
    static const uint32_t sq_tri[] = {0, 1, 2, 0, 2, 3};
    pm_mesh sq = mesh_of(sq_pos, 4, sq_tri, 2);
    r = analyze(&sq);
    EXPECT("square", boundary_edges, 4);
    EXPECT("square", num_edges, 5);
    EXPECT("square", euler, 1);
    EXPECT("square", closed, 0);
    EXPECT("square", manifold, 1);
    EXPECT("square", oriented, 1);
    PMT_CHECK(fabs(r.area - 1) < 1e-12, "square: area %g", r.area);

    /* Book: three triangles on the edge 0-1. */
    static const float bk_pos[] = {0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, -1, -1, 0};
    static const uint32_t bk_tri[] = {0, 1, 2, 1, 0, 3, 0, 1, 4};
    pm_mesh bk = mesh_of(bk_pos, 5, bk_tri, 3);
    r = analyze(&bk);
    EXPECT("book", nonmanifold_edges, 1);
    EXPECT("book", nonmanifold_vertices, 2);
    EXPECT("book", boundary_edges, 6);
    EXPECT("book", manifold, 0);
    EXPECT("book", closed, 0);
    EXPECT("book", components, 1);

    /* Bow-tie: two triangles sharing only vertex 0. */
    static const float bt_pos[] = {0, 0, 0, 1, 0, 0, 1, 1, 0, -1, 0, 0, -1, -1, 0};
    static const uint32_t bt_tri[] = {0, 1, 2, 0, 3, 4};
    pm_mesh bt = mesh_of(bt_pos, 5, bt_tri, 2);
    r = analyze(&bt);
    EXPECT("bow-tie", nonmanifold_vertices, 1);
    EXPECT("bow-tie", nonmanifold_edges, 0);
    EXPECT("bow-tie", manifold, 0);
    EXPECT("bow-tie", components, 1);
    EXPECT("bow-tie", euler, 1);

    /* Degenerate: a repeated vertex and a zero-area sliver. */
    static const float dg_pos[] = {0, 0, 0, 1, 0, 0, 2, 0, 0, 0, 1, 0};
    static const uint32_t dg_tri[] = {0, 1, 3, 0, 0, 3, 0, 1, 2};
    pm_mesh dg = mesh_of(dg_pos, 4, dg_tri, 3);
    r = analyze(&dg);
    EXPECT("degenerate", degenerate_triangles, 2);
    EXPECT("degenerate", num_triangles, 3);

    /* Empty mesh. */
    pm_mesh em = mesh_of(cube_pos, 0, cube_tri, 0);
    r = analyze(&em);
    EXPECT("empty", num_edges, 0);
    EXPECT("empty", closed, 0);
    EXPECT("empty", components, 0);

    /* Bad arguments. */
    uint32_t oob[3] = {0, 1, 8};
    pm_mesh bad = mesh_of(cube_pos, 8, oob, 1);
    PMT_CHECK(pm_mesh_analyze(&bad, &r) == PM_STATUS_INVALID_ARGUMENT, "out-of-range index");
    pm_mesh badsoup = mesh_of(cube_pos, 8, NULL, 2);
    PMT_CHECK(pm_mesh_analyze(&badsoup, &r) == PM_STATUS_INVALID_ARGUMENT, "soup count");
}

/* A torus of nu x nv quads, each split in two: closed, chi 0. */
static void torus(size_t nu, size_t nv, int as_soup)
{
    size_t V = nu * nv, T = 2 * V;
    float *pos = calloc(3 * V, sizeof *pos);
    uint32_t *tri = calloc(3 * T, sizeof *tri);
    for (size_t i = 0; i < nu; i++)
        for (size_t j = 0; j < nv; j++) {
            double u = 2 * M_PI * (double)i / (double)nu, v = 2 * M_PI * (double)j / (double)nv;
            float *p = pos + 3 * (i * nv + j);
            p[0] = (float)((2 + cos(v)) * cos(u));
            p[1] = (float)((2 + cos(v)) * sin(u));
            p[2] = (float)sin(v);
            uint32_t a = (uint32_t)(i * nv + j), b = (uint32_t)(((i + 1) % nu) * nv + j),
                     c = (uint32_t)(((i + 1) % nu) * nv + (j + 1) % nv),
                     d = (uint32_t)(i * nv + (j + 1) % nv);
            uint32_t *t = tri + 6 * (i * nv + j);
            t[0] = a, t[1] = b, t[2] = c, t[3] = a, t[4] = c, t[5] = d;
        }
    pm_mesh m = mesh_of(pos, V, tri, T);
    float *soup = NULL;
    if (as_soup) {
        soup = malloc(9 * T * sizeof *soup);
        for (size_t k = 0; k < 3 * T; k++)
            memcpy(soup + 3 * k, pos + 3 * tri[k], 12);
        m = mesh_of(soup, 3 * T, NULL, T);
    }
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(&m, &r));
    char what[64];
    snprintf(what, sizeof what, "torus %zux%zu%s", nu, nv, as_soup ? " soup" : "");
    EXPECT(what, euler, 0);
    EXPECT(what, num_vertices, V);
    EXPECT(what, closed, 1);
    EXPECT(what, manifold, 1);
    EXPECT(what, oriented, 1);
    EXPECT(what, components, 1);
    /* Outward orientation gives a positive volume near 2 pi^2 R r^2. */
    double want = 2 * M_PI * M_PI * 2;
    /* The coarse polygon is inscribed: it holds less. */
    double tol = V > 10000 ? 0.002 : 0.25;
    PMT_CHECK(r.volume > 0 && fabs(r.volume - want) < tol * want, "%s: volume %g, want about %g",
              what, r.volume, want);
    free(pos);
    free(tri);
    free(soup);
}

/* Brute force: every pair of half-edges compared. */
static void random_vs_brute(size_t V, size_t T)
{
    float *pos = calloc(3 * V, sizeof *pos);
    uint32_t *tri = calloc(3 * T, sizeof *tri);
    for (size_t i = 0; i < 3 * V; i++)
        pos[i] = (float)pmt_uniform();
    for (size_t t = 0; t < T; t++)
        for (int c = 0; c < 3; c++)
            tri[3 * t + c] = (uint32_t)(pmt_rand() % V);
    pm_mesh m = mesh_of(pos, V, tri, T);
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(&m, &r));
    size_t E = 0, boundary = 0, nonman = 0, mis = 0, F = 0;
    int *ok = calloc(T, sizeof *ok);
    for (size_t t = 0; t < T; t++) {
        uint32_t *v = tri + 3 * t;
        ok[t] = v[0] != v[1] && v[1] != v[2] && v[0] != v[2];
        F += ok[t];
    }
    for (size_t h = 0; h < 3 * T; h++) {
        if (!ok[h / 3]) continue;
        uint32_t a = tri[h], b = tri[h - h % 3 + (h + 1) % 3];
        /* Count each undirected edge at its first half-edge. */
        int first = 1;
        size_t same = 0, opposite = 0;
        for (size_t g = 0; g < 3 * T; g++) {
            if (!ok[g / 3]) continue;
            uint32_t x = tri[g], y = tri[g - g % 3 + (g + 1) % 3];
            if (x == a && y == b) same++;
            if (x == b && y == a) opposite++;
            if (g < h && ((x == a && y == b) || (x == b && y == a))) first = 0;
        }
        if (!first) continue;
        E++;
        size_t k = same + opposite;
        boundary += k == 1;
        nonman += k > 2;
        mis += k == 2 && opposite == 0;
    }
    size_t used = 0;
    for (uint32_t v = 0; v < V; v++) {
        int u = 0;
        for (size_t h = 0; h < 3 * T && !u; h++)
            u = ok[h / 3] && tri[h] == v;
        used += u;
    }
    const char *what = "random";
    EXPECT(what, num_edges, E);
    EXPECT(what, boundary_edges, boundary);
    EXPECT(what, nonmanifold_edges, nonman);
    EXPECT(what, misoriented_edges, mis);
    EXPECT(what, num_vertices, used);
    EXPECT(what, euler, (long long)used - (long long)E + (long long)F);
    free(ok);
    free(pos);
    free(tri);
}

/* ---- debug images ---- */

static int png_size(const char *path, uint32_t *w, uint32_t *h)
{
    unsigned char b[24];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n < 24 || memcmp(b, sig, 8) != 0 || memcmp(b + 12, "IHDR", 4) != 0) return 0;
    *w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 | b[19];
    *h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 | b[23];
    return 1;
}

static void debug_images(void)
{
    const char *base = getenv("TMPDIR");
    char dir[512], sub[600], path[700];
    snprintf(dir, sizeof dir, "%s/pm_dbg_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        PMT_CHECK(0, "mkdtemp failed");
        return;
    }
    snprintf(sub, sizeof sub, "%s/images", dir); /* created by pm_debug_images */
    /* A sphere in a 37 x 21 x 9 volume: slice k = 3, 36 x 20 cells. */
    const size_t nx = 37, ny = 21, nz = 9;
    float *v = malloc(nx * ny * nz * sizeof *v);
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = (double)i - 18, y = (double)j - 10, z = (double)k - 4;
                v[i + nx * (j + ny * k)] = (float)sqrt(x * x + y * y + z * z);
            }
    pm_volume vol = {v, PM_SAMPLE_F32, nx, ny, nz, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_status ds = pm_debug_images(&vol, 7.5, PM_INSIDE_BELOW, sub);
    if (ds == PM_STATUS_UNSUPPORTED) {
        /* A build without libpng: the call says so and writes nothing. */
        PMT_CHECK(strstr(pm_last_error(), "libpng") != NULL, "unsupported without a reason: %s",
                  pm_last_error());
        snprintf(path, sizeof path, "%s/active_cells.png", sub);
        PMT_CHECK(access(path, F_OK) != 0, "%s written without libpng", path);
        printf("debug images: this build has no libpng (checked the refusal)\n");
        free(v);
        return;
    }
    PMT_OK(ds);
    uint32_t w, h;
    snprintf(path, sizeof path, "%s/active_cells.png", sub);
    PMT_CHECK(png_size(path, &w, &h), "%s missing or not a PNG", path);
    /* 36 x 20 cells, upscaled by an integer factor to at least 256. */
    PMT_CHECK(w % 36 == 0 && h % 20 == 0 && w / 36 == h / 20 && w >= 256 && w / 36 > 0,
              "active_cells.png is %u x %u", w, h);
    /* The pyramid: 64 x 64 padded base (level 0) down to 1 x 1 (level 6). */
    for (int L = 0; L <= 6; L++) {
        snprintf(path, sizeof path, "%s/hp_level_%d.png", sub, L);
        int ok = png_size(path, &w, &h);
        PMT_CHECK(ok, "%s missing", path);
        uint32_t side = 64u >> L;
        PMT_CHECK(!ok || (w == h && w % side == 0 && w >= 256), "level %d is %u x %u", L, w, h);
    }
    snprintf(path, sizeof path, "%s/hp_level_7.png", sub);
    PMT_CHECK(access(path, F_OK) != 0, "an extra level 7 was written");
    /* A path under a regular file cannot be created: an IO error naming it. */
    snprintf(path, sizeof path, "%s/active_cells.png/x", sub);
    pm_status s = pm_debug_images(&vol, 7.5, PM_INSIDE_BELOW, path);
    PMT_CHECK(s == PM_STATUS_IO_ERROR && strstr(pm_last_error(), path), "bad dir: %s %s",
              pm_status_string(s), pm_last_error());
    free(v);
    if (pmt_failures == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
}

int main(int argc, char **argv)
{
    pmt_seed_init();
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        printf("skipped: mesh analysis is host-only (the cpu run covers it)\n");
        return PMT_SKIP;
    }
    printf("seed %" PRIu64 "\n", pmt_seed);
    known_meshes();
    torus(12, 7, 0);
    torus(12, 7, 1);
    torus(301, 97, 0);
    static const size_t sizes[][2] = {{3, 1}, {4, 7}, {6, 20}, {30, 40}, {300, 500}};
    for (int it = 0; it < 20; it++)
        random_vs_brute(sizes[it % 5][0], sizes[it % 5][1]);
    debug_images();
    printf("%s (%d failures)\n", pmt_failures ? "FAILED" : "ok", pmt_failures);
    return pmt_failures ? 1 : 0;
}
