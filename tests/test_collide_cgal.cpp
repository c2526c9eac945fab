/* pm_collide's pair lists, bit for bit, against CGAL's (issue 20):
 * box_intersection_d over the triangles' boxes + the exact do_intersect of
 * Exact_predicates_inexact_constructions_kernel (bench/collide_inputs.h),
 * on random meshes, touching configurations (shared vertices and edges
 * across the meshes, edges on faces, vertices on faces), coplanar
 * overlapping meshes, grid soups (touching, coplanar and degenerate pairs
 * everywhere), and reconstructed surfaces against a translated and a
 * rotated copy (B's vertices mapped as pm_collide maps them: in double,
 * rounded to float once); self mode against CGAL's pairs under
 * pm_collide's rule and against PMP::self_intersections (exactly on
 * fold-free meshes; on reconstructed surfaces, which may hold degenerate
 * triangles and coincident vertices, up to the documented differences).
 * `test_collide_cgal cpu` runs on the CPU
 * backend, `test_collide_cgal cuda` on CUDA (77 = skipped without a GPU). */
#include "collide_inputs.h"
#include "test_common.h"

using pmb::Mesh;
using pmb::Pairs;

static pm_context *g_ctx;
static int g_cases;

/* pm_collide on the context under test (bvh_b = bvh_a for self mode). */
static Pairs pm_pairs(const Mesh &a, const Mesh *b, const double *xf)
{
    pm_mesh pa = a.as_pm();
    pm_bvh *ba = nullptr, *bb = nullptr;
    PMT_OK(pm_bvh_build(g_ctx, &pa, nullptr, &ba));
    if (b) {
        pm_mesh pb = b->as_pm();
        PMT_OK(pm_bvh_build(g_ctx, &pb, nullptr, &bb));
    }
    const pm_bvh *other = b ? bb : ba;
    size_t n = 0;
    pm_status s = pm_collide(g_ctx, ba, other, xf, nullptr, nullptr, 0, &n);
    PMT_CHECK(s == (n ? PM_STATUS_TRUNCATED : PM_STATUS_OK), "count call: %s", pm_status_string(s));
    uint32_t *d = nullptr;
    PMT_OK(pm_alloc(g_ctx, 2 * n * sizeof(uint32_t), (void **)&d));
    size_t n2 = 0;
    PMT_OK(pm_collide(g_ctx, ba, other, xf, nullptr, d, n, &n2));
    PMT_CHECK(n2 == n, "count %zu, then %zu", n, n2);
    uint32_t *h = (uint32_t *)pmt_to_host(g_ctx, d, 2 * n * sizeof(uint32_t));
    Pairs out = pmb::to_keys(h, n);
    free(h);
    pm_free(g_ctx, d);
    pm_bvh_destroy(g_ctx, bb);
    pm_bvh_destroy(g_ctx, ba);
    return out;
}

static void report_difference(const char *what, const Pairs &got, const Pairs &ref)
{
    PMT_CHECK(got == ref,
              "%s: pm_collide %zu pairs, CGAL %zu (%zu only in pm_collide, %zu only in CGAL)", what,
              got.size(), ref.size(), pmb::missing_from(got, ref), pmb::missing_from(ref, got));
    if (got == ref) return;
    for (size_t i = 0; i < got.size() || i < ref.size(); i++) {
        uint64_t g = i < got.size() ? got[i] : 0, r = i < ref.size() ? ref[i] : 0;
        if (g != r) {
            std::fprintf(stderr, "  first difference at %zu: (%u,%u), CGAL (%u,%u)\n", i,
                         (unsigned)(g >> 32), (unsigned)g, (unsigned)(r >> 32), (unsigned)r);
            break;
        }
    }
}

/* A against B moved by xf: pm_collide's list must be CGAL's. */
static size_t two_meshes(const char *what, const Mesh &a, const Mesh &b, const double *xf)
{
    Pairs ref = pmb::cgal_pairs(a, b, xf), got = pm_pairs(a, &b, xf);
    report_difference(what, got, ref);
    std::printf("%-48s %6zu x %6zu triangles: %7zu pairs\n", what, a.nt(), b.nt(), ref.size());
    g_cases++;
    return ref.size();
}

/* One mesh with itself, against two references. (1) CGAL's pairs of the
 * mesh against itself (box_intersection_d + do_intersect) under
 * pm_collide's rule (a < b, no shared vertex): always equal. (2)
 * PMP::self_intersections: equal on fold-free meshes without degenerate
 * faces; otherwise (`exact` false) equal once CGAL's pairs of neighbours
 * meeting beyond their shared vertex or edge (folds; pm_collide leaves
 * every neighbour out) and pm_collide's pairs of degenerate triangles
 * (which CGAL skips) are set aside (docs/collide.md). */
static size_t self_mesh(const char *what, const Mesh &m, bool exact)
{
    Pairs got = pm_pairs(m, nullptr, nullptr);
    report_difference(what, got, pmb::self_rule(m, pmb::cgal_pairs(m, m, nullptr)));
    Pairs ref;
    size_t folds = 0, degenerate = 0;
    bool ok = pmb::cgal_self_pairs(m, &ref, &folds, &degenerate);
    PMT_CHECK(ok, "%s: not a valid halfedge mesh for CGAL", what);
    if (exact) {
        PMT_CHECK(folds == 0 && degenerate == 0,
                  "%s: CGAL finds %zu folds, %zu degenerate faces in a mesh made without", what,
                  folds, degenerate);
        report_difference(what, got, ref);
    } else {
        std::vector<pmb::Tri> t = pmb::cgal_tris(m, m.pos);
        Pairs on;
        for (uint64_t k : got)
            if (t[k >> 32].kind == 0 && t[(uint32_t)k].kind == 0) on.push_back(k);
        report_difference(what, on, pmb::self_rule(m, ref));
    }
    std::printf("%-48s %6zu triangles, self: %7zu pairs (PMP: %zu, %zu of them folds, %zu "
                "degenerate faces)\n",
                what, m.nt(), got.size(), ref.size(), folds, degenerate);
    g_cases++;
    return got.size();
}

/* ---- meshes ------------------------------------------------------------------ */

/* n random triangles (a soup) of about `size` in [0, extent]^3, none
 * degenerate or nearly so. */
static Mesh random_soup(size_t n, double extent, double size)
{
    Mesh m;
    while (m.nt() < n) {
        double c[3] = {pmt_uniform() * extent, pmt_uniform() * extent, pmt_uniform() * extent};
        float v[9];
        for (int k = 0; k < 9; k++)
            v[k] = (float)(c[k % 3] + (pmt_uniform() - 0.5) * size);
        double e1[3], e2[3];
        for (int k = 0; k < 3; k++)
            e1[k] = (double)v[3 + k] - v[k], e2[k] = (double)v[6 + k] - v[k];
        double cx = e1[1] * e2[2] - e1[2] * e2[1], cy = e1[2] * e2[0] - e1[0] * e2[2],
               cz = e1[0] * e2[1] - e1[1] * e2[0];
        if (std::sqrt(cx * cx + cy * cy + cz * cz) < 0.01 * size * size) continue;
        m.pos.insert(m.pos.end(), v, v + 9);
    }
    return m;
}

/* An indexed grid of nu x nv squares, two triangles each, point (i, j) at
 * o + i u + j v. */
static Mesh grid(int nu, int nv, const double *o, const double *u, const double *v)
{
    Mesh m;
    for (int j = 0; j <= nv; j++)
        for (int i = 0; i <= nu; i++)
            for (int k = 0; k < 3; k++)
                m.pos.push_back((float)(o[k] + i * u[k] + j * v[k]));
    for (int j = 0; j < nv; j++)
        for (int i = 0; i < nu; i++) {
            uint32_t a = (uint32_t)(j * (nu + 1) + i), b = a + 1, c = a + (uint32_t)nu + 2,
                     d = a + (uint32_t)nu + 1;
            uint32_t t[6] = {a, b, c, a, c, d};
            m.idx.insert(m.idx.end(), t, t + 6);
        }
    return m;
}

static Mesh torus(int nu, int nv, double R, double r, double cx)
{
    Mesh m;
    for (int i = 0; i < nu; i++)
        for (int j = 0; j < nv; j++) {
            double u = 2 * M_PI * i / nu, v = 2 * M_PI * j / nv;
            m.pos.push_back((float)(cx + (R + r * std::cos(v)) * std::cos(u)));
            m.pos.push_back((float)((R + r * std::cos(v)) * std::sin(u)));
            m.pos.push_back((float)(r * std::sin(v)));
            uint32_t a = (uint32_t)(i * nv + j), b = (uint32_t)(((i + 1) % nu) * nv + j);
            uint32_t c = (uint32_t)(((i + 1) % nu) * nv + (j + 1) % nv);
            uint32_t d = (uint32_t)(i * nv + (j + 1) % nv);
            uint32_t t[6] = {a, b, c, a, c, d};
            m.idx.insert(m.idx.end(), t, t + 6);
        }
    return m;
}

/* Two meshes as one (B's indices shifted), B's vertices mapped by xf. */
static Mesh merge(const Mesh &a, const Mesh &b, const double *xf)
{
    Mesh m = a;
    std::vector<float> pb = pmb::map_vertices(b.pos, xf);
    m.pos.insert(m.pos.end(), pb.begin(), pb.end());
    for (uint32_t i : b.idx)
        m.idx.push_back(i + (uint32_t)a.nv());
    return m;
}

/* Rotation by `deg` about the unit axis (x, y, z) through point c. */
static void axis_rotation(double deg, double x, double y, double z, const double *c, double *m)
{
    double n = std::sqrt(x * x + y * y + z * z), a = deg * M_PI / 180;
    x /= n, y /= n, z /= n;
    double co = std::cos(a), s = std::sin(a), t = 1 - co;
    double r[9] = {t * x * x + co,    t * x * y - s * z, t * x * z + s * y,
                   t * x * y + s * z, t * y * y + co,    t * y * z - s * x,
                   t * x * z - s * y, t * y * z + s * x, t * z * z + co};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            m[4 * i + j] = r[3 * i + j];
        m[4 * i + 3] = c[i] - (r[3 * i] * c[0] + r[3 * i + 1] * c[1] + r[3 * i + 2] * c[2]);
    }
}

/* ---- the cases ---------------------------------------------------------------- */

static void check_random(void)
{
    static const size_t sizes[] = {1, 2, 31, 33, 257, 1000};
    char what[128];
    size_t total = 0;
    for (size_t na : sizes)
        for (size_t nb : sizes) {
            if (nb < na && nb != 1) continue;
            double ext = 2.0 + std::cbrt((double)(na + nb)) * 0.5;
            Mesh a = random_soup(na, ext, 1.0), b = random_soup(nb, ext, 1.0);
            std::snprintf(what, sizeof what, "random %zu x %zu", na, nb);
            total += two_meshes(what, a, b, nullptr);
            double m[12];
            pmb::rotation(37.0, (int)(na % 3), 0.3, -0.2, 0.1, m);
            std::snprintf(what, sizeof what, "random %zu x %zu rotated", na, nb);
            total += two_meshes(what, a, b, m);
            pmb::translation(0.25, -0.5, 0.125, m);
            std::snprintf(what, sizeof what, "random %zu x %zu translated", na, nb);
            total += two_meshes(what, a, b, m);
        }
    PMT_CHECK(total > 500, "only %zu pairs in the random cases (about 1000 expected)", total);
}

static void check_touching(void)
{
    const double o[3] = {0, 0, 0}, ex[3] = {1, 0, 0}, ey[3] = {0, 1, 0}, ez[3] = {0, 0, 1};
    Mesh floor = grid(8, 8, o, ex, ey);
    /* Walls standing on the floor's grid lines: edges on edges, shared
     * vertices (the same coordinates, in another mesh). */
    for (int y = 0; y <= 8; y += 4) {
        const double w[3] = {0, (double)y, 0};
        size_t n = two_meshes("wall on a grid line", floor, grid(8, 3, w, ex, ez), nullptr);
        PMT_CHECK(n > 0, "a wall on the floor touches nothing");
    }
    /* A wall on the floor's diagonals' line x = y and one across the
     * squares at y = 2.5: edges on faces. */
    const double d[3] = {1, 1, 0}, w25[3] = {0, 2.5, 0};
    two_meshes("wall along the diagonals", floor, grid(6, 2, o, d, ez), nullptr);
    two_meshes("wall across the faces", floor, grid(8, 2, w25, ex, ez), nullptr);
    /* The same walls placed by transforms: a translation by integers
     * keeps every coordinate exact. */
    double m[12];
    Mesh wall = grid(8, 3, o, ex, ez);
    pmb::translation(0, 3, 0, m);
    two_meshes("wall moved onto a grid line", floor, wall, m);
    pmb::translation(0.5, 3.5, 0, m);
    two_meshes("wall moved across the faces", floor, wall, m);
    /* Vertices on faces and on edges: tetrahedra standing on the floor
     * with their apex down. */
    Mesh tets;
    for (int i = 0; i < 16; i++) {
        double px = 0.5 + (i % 4) * 2 + (i / 4) * 0.25, py = 0.5 + (i / 4) * 2;
        if (i % 3 == 0) px = std::floor(px); /* apex on a grid line */
        float t[12] = {
            (float)px,         (float)py,         0, (float)(px - 0.4), (float)(py - 0.4), 1,
            (float)(px + 0.4), (float)(py - 0.4), 1, (float)px,         (float)(py + 0.5), 1};
        uint32_t base = (uint32_t)tets.nv();
        tets.pos.insert(tets.pos.end(), t, t + 12);
        uint32_t f[12] = {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3};
        for (uint32_t k : f)
            tets.idx.push_back(base + k);
    }
    size_t n = two_meshes("apexes on the floor", floor, tets, nullptr);
    PMT_CHECK(n >= 16 * 3, "apexes on the floor: %zu pairs", n);
    pmb::translation(0, 0, 1e-6, m);
    n = two_meshes("apexes just above the floor", floor, tets, m);
    PMT_CHECK(n == 0, "apexes above the floor: %zu pairs", n);
    /* Coplanar overlapping: the floor against copies in its own plane,
     * shifted by half a square and rotated about z (z stays exactly 0). */
    pmb::translation(0.5, 0.25, 0, m);
    n = two_meshes("coplanar, shifted", floor, floor, m);
    PMT_CHECK(n > floor.nt(), "coplanar shifted: %zu pairs", n);
    pmb::rotation(30.0, 2, 4.0, -1.0, 0.0, m);
    two_meshes("coplanar, rotated", floor, floor, m);
    two_meshes("coplanar, the same", floor, floor, nullptr);
    /* Grid soups: integer coordinates 0..3 and 0..6 (touching, coplanar,
     * degenerate triangles tested as segments and points). */
    for (int r = 0; r < 6; r++) {
        size_t n2 = r < 3 ? 60 : 400;
        int range = r < 3 ? 3 : 6;
        Mesh a, b;
        for (size_t k = 0; k < 9 * n2; k++) {
            a.pos.push_back((float)(pmt_rand() % (uint64_t)(range + 1)));
            b.pos.push_back((float)(pmt_rand() % (uint64_t)(range + 1)));
        }
        two_meshes("grid soup", a, b, nullptr);
        pmb::translation(1, 0, -1, m);
        two_meshes("grid soup translated by integers", a, b, m);
        /* About axis r % 3, moved back over the grid (cos 90 degrees is
         * not 0 in double: some coordinates become tiny, not 0). */
        double t[3] = {0, 0, 0};
        t[(r + 1) % 3] = range;
        pmb::rotation(90.0, r % 3, t[0], t[1], t[2], m);
        two_meshes("grid soup rotated by 90 degrees", a, b, m);
    }
}

static void check_surfaces(void)
{
    /* The reconstruction runs on the CPU whatever the context under test:
     * the mesh is an input here. */
    pm_context_desc dd = {sizeof dd, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *cpu = nullptr;
    PMT_OK(pm_context_create(&dd, &cpu));
    pmb::Scene sc = pmb::dam_break(12000 + (size_t)(pmt_rand() % 8000), pmt_rand());
    Mesh s = pmb::reconstruct(cpu, sc.xyz, 1.5);
    pm_context_destroy(cpu);
    double m[12];
    pmb::translation(0.05, 0.0, 0.0, m);
    size_t n = two_meshes("surface against a translated copy", s, s, m);
    PMT_CHECK(n > 1000, "surface against a translated copy: %zu pairs", n);
    /* By a multiple of the grid cell (1.5 r): vertices land on vertices. */
    pmb::translation(0.0375, 0.075, 0.0, m);
    two_meshes("surface against a copy moved by grid cells", s, s, m);
    double c[3] = {0.5, 0.5, 0.8};
    axis_rotation(7.0, 0.2, 0.3, 1.0, c, m);
    n = two_meshes("surface against a rotated copy", s, s, m);
    PMT_CHECK(n > 1000, "surface against a rotated copy: %zu pairs", n);
    axis_rotation(90.0, 0, 0, 1, c, m);
    two_meshes("surface against a copy rotated by 90 degrees", s, s, m);
    two_meshes("surface against an unmoved copy", s, s, nullptr);
    /* Self mode: the closed surface, and the surface with a moved copy as
     * one mesh (the copies' pairs are never neighbours). */
    self_mesh("surface self", s, false);
    pmb::translation(0.05, 0.02, 0.01, m);
    n = self_mesh("surface and a moved copy as one mesh, self", merge(s, s, m), false);
    PMT_CHECK(n > 1000, "surface and a moved copy, self: %zu pairs", n);
}

static void check_self(void)
{
    Mesh t = torus(48, 24, 1.0, 0.3, 0.0);
    size_t n = self_mesh("closed torus self", t, true);
    PMT_CHECK(n == 0, "closed torus: %zu pairs", n);
    Mesh u = torus(32, 16, 1.0, 0.3, 0.0);
    double m[12];
    pmb::translation(1.0, 0.0, 0.0, m);
    n = self_mesh("two tori as one mesh", merge(t, u, m), true);
    PMT_CHECK(n > 0, "two overlapping tori: no pair");
    pmb::rotation(90.0, 0, 0.5, 0, 0, m);
    n = self_mesh("chain links pulled together, one mesh", merge(t, u, m), true);
    PMT_CHECK(n > 0, "linked tori pulled together: no pair");
    Mesh s = pmb::icosphere(3, 1.0);
    pmb::translation(0.6, 0.3, 0.1, m);
    self_mesh("two spheres as one mesh", merge(s, s, m), true);
    self_mesh("a sphere and an exact copy as one mesh", merge(s, s, nullptr), true);
}

int main(int argc, char **argv)
{
    pm_device dev;
    if (!pmt_init(argc, argv, &g_ctx, &dev)) return PMT_SKIP;
    check_random();
    check_touching();
    check_surfaces();
    check_self();
    std::printf("%d cases compared with CGAL %s\n", g_cases, CGAL_VERSION_STR);
    pm_context_destroy(g_ctx);
    return pmt_finish("test_collide_cgal");
}
