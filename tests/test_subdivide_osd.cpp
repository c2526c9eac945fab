/* pm_subdivide_loop against OpenSubdiv 3.5 (Far::TopologyRefiner with
 * Sdc::SCHEME_LOOP and VTX_BOUNDARY_EDGE_ONLY, positions by
 * Far::PrimvarRefinerReal<double>), uniform levels 1 to 4. Vertices are
 * matched by topology, not by order: an input vertex is itself; at level
 * l a vertex of level l - 1 is OpenSubdiv's child of its match, and a new
 * vertex, whose two neighbours of level l - 1 are its edge's ends (a, b),
 * is the child vertex of OpenSubdiv's edge (match(a), match(b)). Every
 * position must agree within 1e-5 of the bounding box's diagonal, the
 * triangles must be the same vertex triples (up to rotation), and the
 * match must be a bijection. Then issue 21's requirement on the adaptive
 * mode, on the inputs of bench/bench_subdivide.cpp's study: some
 * max_deviation in a small sweep gives fewer triangles than uniform level
 * 2 at an equal or lower largest distance from the uniform level-4 surface
 * (vertices and triangle centroids, bench/subdivide_inputs.h); the ratio
 * is printed. */
#include <opensubdiv/far/primvarRefiner.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <vector>

#include "subdivide_inputs.h"
#include "test_common.h"

using namespace OpenSubdiv;

namespace
{

struct dvert {
    double x[3];
    void Clear(void * = nullptr) { x[0] = x[1] = x[2] = 0; }
    void AddWithWeight(const dvert &s, double w)
    {
        for (int i = 0; i < 3; i++)
            x[i] += w * s.x[i];
    }
};

typedef std::array<uint32_t, 3> tri3;

/* The rotation of (a, b, c) that starts at its smallest index. */
tri3 canonical(uint32_t a, uint32_t b, uint32_t c)
{
    if (a <= b && a <= c) return {a, b, c};
    if (b <= a && b <= c) return {b, c, a};
    return {c, a, b};
}

double g_worst_rel = 0; /* the largest relative difference seen */

void check_case(pm_context *ctx, const char *name, const sdi_mesh &m, int maxlev)
{
    std::unique_ptr<Far::TopologyRefiner> ref(sdi_osd_refiner(m));
    PMT_CHECK(ref != nullptr, "%s: OpenSubdiv refused the mesh", name);
    if (!ref) return;
    Far::TopologyRefiner::UniformOptions uo(maxlev);
    uo.fullTopologyInLastLevel = true;
    ref->RefineUniform(uo);
    /* OpenSubdiv's positions per level */
    std::vector<std::vector<dvert>> osd(maxlev + 1);
    osd[0].resize(m.nv());
    for (size_t v = 0; v < m.nv(); v++)
        for (int i = 0; i < 3; i++)
            osd[0][v].x[i] = m.p[3 * v + i];
    Far::PrimvarRefinerReal<double> pr(*ref);
    for (int l = 1; l <= maxlev; l++) {
        osd[l].resize((size_t)ref->GetLevel(l).GetNumVertices());
        dvert *src = osd[l - 1].data(), *dst = osd[l].data();
        pr.Interpolate(l, src, dst);
    }
    const double tol = 1e-5 * sdi_diagonal(m.p.data(), m.nv());
    std::vector<uint32_t> match(m.nv()); /* ours -> OpenSubdiv's, this level */
    for (size_t v = 0; v < m.nv(); v++)
        match[v] = (uint32_t)v;
    size_t prev_nv = m.nv();
    for (int l = 1; l <= maxlev; l++) {
        pm_subdivide_options o;
        std::memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.normals = PM_NORMALS_NONE;
        pm_mesh in = m.view(), out;
        PMT_OK(pm_subdivide_loop(ctx, &in, l, &o, &out));
        const Far::TopologyLevel &parent = ref->GetLevel(l - 1), &child = ref->GetLevel(l);
        const size_t nv = out.num_vertices, nt = out.num_triangles;
        PMT_CHECK(nv == (size_t)child.GetNumVertices() && nt == (size_t)child.GetNumFaces(),
                  "%s level %d: %zu vertices, %zu triangles; OpenSubdiv %d, %d", name, l, nv, nt,
                  child.GetNumVertices(), child.GetNumFaces());
        if (nv != (size_t)child.GetNumVertices() || nt != (size_t)child.GetNumFaces() ||
            nv < prev_nv) {
            pm_mesh_free(ctx, &out);
            return;
        }
        /* the new vertices' neighbours of the previous level */
        std::vector<std::array<uint32_t, 3>> olds(nv - prev_nv, {0, 0, 0});
        for (size_t f = 0; f < nt; f++)
            for (int k = 0; k < 3; k++) {
                uint32_t v = out.indices[3 * f + k];
                if (v < prev_nv) continue;
                auto &s = olds[v - prev_nv];
                for (int j = 1; j < 3; j++) {
                    uint32_t w = out.indices[3 * f + (k + j) % 3];
                    if (w >= prev_nv) continue;
                    int known = 0;
                    for (uint32_t q = 0; q < s[0] && q < 2; q++)
                        known |= s[1 + q] == w;
                    if (!known) {
                        if (s[0] < 2) s[1 + s[0]] = w;
                        s[0]++;
                    }
                }
            }
        std::vector<uint32_t> next(nv, UINT32_MAX);
        int bad_topology = 0;
        for (size_t v = 0; v < prev_nv; v++)
            next[v] = (uint32_t)parent.GetVertexChildVertex((Far::Index)match[v]);
        for (size_t v = prev_nv; v < nv; v++) {
            const auto &s = olds[v - prev_nv];
            Far::Index e = s[0] == 2
                               ? parent.FindEdge((Far::Index)match[s[1]], (Far::Index)match[s[2]])
                               : Far::INDEX_INVALID;
            if (e == Far::INDEX_INVALID) {
                if (bad_topology++ < 3)
                    PMT_CHECK(0, "%s level %d: new vertex %zu has %u old neighbours / no edge",
                              name, l, v, s[0]);
                continue;
            }
            next[v] = (uint32_t)parent.GetEdgeChildVertex(e);
        }
        /* a bijection onto OpenSubdiv's vertices */
        std::vector<char> hit(nv, 0);
        size_t dup = 0;
        for (size_t v = 0; v < nv; v++)
            if (next[v] < nv) dup += hit[next[v]]++ != 0;
        PMT_CHECK(dup == 0 && !bad_topology, "%s level %d: %zu vertices matched twice", name, l,
                  dup);
        /* docs/subdivide.md: per level, the old vertices come first, then the
         * new ones, as OpenSubdiv's children of vertices, then of edges */
        size_t misplaced = 0;
        for (size_t v = 0; v < nv; v++)
            misplaced += next[v] < nv && (next[v] < prev_nv) != (v < prev_nv);
        PMT_CHECK(misplaced == 0, "%s level %d: %zu vertices in the other block than OpenSubdiv's",
                  name, l, misplaced);
        /* positions */
        double worst = 0;
        size_t wv = 0;
        for (size_t v = 0; v < nv; v++) {
            if (next[v] >= nv) continue;
            for (int i = 0; i < 3; i++) {
                double d = std::fabs((double)out.positions[3 * v + i] - osd[l][next[v]].x[i]);
                if (d > worst) worst = d, wv = v;
            }
        }
        g_worst_rel = std::max(g_worst_rel, worst / (tol * 1e5));
        PMT_CHECK(worst <= tol,
                  "%s level %d: vertex %zu (OpenSubdiv %u, %s) off by %g (%.3g of the diagonal)",
                  name, l, wv, next[wv], wv < prev_nv ? "even" : "odd", worst, worst / (tol * 1e5));
        /* triangles as vertex triples up to rotation */
        std::vector<tri3> a(nt), b(nt);
        for (size_t f = 0; f < nt; f++) {
            const uint32_t *t = out.indices + 3 * f;
            a[f] = canonical(next[t[0]], next[t[1]], next[t[2]]);
            Far::ConstIndexArray fv = child.GetFaceVertices((Far::Index)f);
            b[f] = canonical((uint32_t)fv[0], (uint32_t)fv[1], (uint32_t)fv[2]);
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        PMT_CHECK(a == b, "%s level %d: the triangle sets differ", name, l);
        pm_mesh_free(ctx, &out);
        match.swap(next);
        prev_nv = nv;
    }
}

/* Two closed bipyramids touching at one vertex (a non-manifold vertex:
 * OpenSubdiv makes it an infinitely sharp corner, pyramesh keeps it). */
sdi_mesh two_bipyramids()
{
    /* a's upper pole is vertex 5 (z = 1), b's lower pole vertex 8 (z = -1 + 2) */
    sdi_mesh m = sdi_bipyramid(5, false), b = sdi_bipyramid(7, false);
    std::vector<uint32_t> remap(b.nv());
    for (size_t v = 0; v < b.nv(); v++) {
        if (v == 8) {
            remap[v] = 5;
            continue;
        }
        remap[v] = (uint32_t)m.nv();
        m.add_v(b.p[3 * v], b.p[3 * v + 1], b.p[3 * v + 2] + 2.0);
    }
    for (uint32_t x : b.t)
        m.t.push_back(remap[x]);
    return m;
}

/* Issue 21: adaptive levels 4 with max_deviation = f * (uniform level 2's
 * deviation from level 4), f in a small sweep; the fewest triangles at an
 * equal or lower deviation must be fewer than uniform level 2's, and that
 * output conforming (closed when the input is, manifold, oriented). */
void check_beats_uniform(pm_context *ctx, const char *name, const sdi_mesh &m)
{
    pm_subdivide_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.normals = PM_NORMALS_NONE;
    pm_mesh in = m.view(), l4, u2;
    PMT_OK(pm_subdivide_loop(ctx, &in, 4, &o, &l4));
    PMT_OK(pm_subdivide_loop(ctx, &in, 2, &o, &u2));
    sdi_tri_grid g;
    g.build(l4.positions, l4.num_vertices, l4.indices, l4.num_triangles);
    const double diag = sdi_diagonal(l4.positions, l4.num_vertices);
    const double dev2 =
        sdi_max_deviation(g, u2.positions, u2.num_vertices, u2.indices, u2.num_triangles);
    pm_mesh_report ri;
    PMT_OK(pm_mesh_analyze(&in, &ri));
    printf("%s: %zu triangles; uniform level 2: %zu triangles, deviation from level 4 %.3e of "
           "the diagonal\n",
           name, m.nt(), u2.num_triangles, dev2 / diag);
    size_t best = 0;
    double best_f = 0, best_dev = 0;
    for (double f : {1.0, 0.7, 0.5, 0.35, 0.25}) {
        pm_subdivide_options a = o;
        a.max_deviation = f * dev2;
        pm_mesh out;
        PMT_OK(pm_subdivide_loop(ctx, &in, 4, &a, &out));
        const double dev =
            sdi_max_deviation(g, out.positions, out.num_vertices, out.indices, out.num_triangles);
        printf("  max_deviation %.2f x: %zu triangles, deviation %.3e\n", f, out.num_triangles,
               dev / diag);
        pm_mesh_report r;
        PMT_OK(pm_mesh_analyze(&out, &r));
        PMT_CHECK(r.manifold && r.oriented && r.closed == ri.closed && r.degenerate_triangles == 0,
                  "%s max_deviation %.2f x: manifold %d oriented %d closed %d (input %d)", name, f,
                  r.manifold, r.oriented, r.closed, ri.closed);
        if (dev <= dev2 && (!best || out.num_triangles < best))
            best = out.num_triangles, best_f = f, best_dev = dev;
        pm_mesh_free(ctx, &out);
    }
    PMT_CHECK(best > 0 && best < u2.num_triangles,
              "%s: no max_deviation gives fewer triangles than uniform level 2 (%zu) at its "
              "deviation (best %zu)",
              name, u2.num_triangles, best);
    if (best)
        printf("%s: adaptive / uniform level 2 triangles at equal or lower deviation: %zu / %zu = "
               "%.3f (max_deviation %.2f x, deviation %.3e)\n",
               name, best, u2.num_triangles, (double)best / (double)u2.num_triangles, best_f,
               best_dev / diag);
    pm_mesh_free(ctx, &l4);
    pm_mesh_free(ctx, &u2);
}

void jitter(sdi_mesh &m, double amp)
{
    for (float &x : m.p)
        x += (float)(amp * (pmt_uniform() - 0.5));
}

} // namespace

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;

    sdi_mesh one;
    one.add_v(0, 0, 0), one.add_v(1, 0, 0), one.add_v(0.3, 0.8, 0.1);
    one.add_t(0, 1, 2);
    sdi_mesh torus = sdi_torus(24, 11, 2.0, 1.0), grid = sdi_grid(7, 5);
    jitter(torus, 0.05);
    jitter(grid, 0.2);
    check_case(ctx, "icosahedron", sdi_icosahedron(), 4);
    check_case(ctx, "torus", torus, 4);
    check_case(ctx, "grid", grid, 4);
    check_case(ctx, "hemisphere", sdi_hemisphere(12, 5), 4);
    check_case(ctx, "triangle", one, 4);
    check_case(ctx, "two bipyramids at a vertex", two_bipyramids(), 3);
    for (unsigned k = 3; k <= 12; k++) {
        char nm[48];
        snprintf(nm, sizeof nm, "bipyramid %u", k);
        check_case(ctx, nm, sdi_bipyramid(k, false), 4);
        snprintf(nm, sizeof nm, "fan %u", k);
        check_case(ctx, nm, sdi_bipyramid(k, true), 4);
    }
    sdi_mesh rec, sup;
    PMT_OK(sdi_reconstruct(ctx, sdi_particles(3000), 1.5, &rec));
    PMT_OK(sdi_superellipsoid(ctx, 20, &sup));
    printf("reconstructed surface: %zu triangles; superellipsoid: %zu triangles\n", rec.nt(),
           sup.nt());
    check_case(ctx, "reconstructed surface", rec, 4);
    check_case(ctx, "superellipsoid", sup, 4);
    printf("largest difference to OpenSubdiv: %.3g of the diagonal\n", g_worst_rel);

    /* the adaptive study's inputs (bench_subdivide --what study) */
    sdi_mesh srec, ssup;
    PMT_OK(sdi_reconstruct(ctx, sdi_particles(6000), 1.5, &srec));
    PMT_OK(sdi_superellipsoid(ctx, 24, &ssup));
    check_beats_uniform(ctx, "superellipsoid", ssup);
    check_beats_uniform(ctx, "reconstructed surface", srec);

    pm_context_destroy(ctx);
    return pmt_finish("test_subdivide_osd");
}
