/* Inputs and the CGAL reference shared by bench/bench_collide.cpp and
 * tests/test_collide_cgal.cpp: reconstructed fluid surfaces (the dam-break
 * scene of `pyramesh demo`, made with pm_field_compute + pm_isosurface),
 * subdivided icosahedra, B's vertices mapped into A's frame exactly as
 * pm_collide does (include/pyramesh.h), and the intersecting pairs as CGAL
 * finds them: box_intersection_d over the triangles' boxes, then the exact
 * do_intersect of Exact_predicates_inexact_constructions_kernel; or, for
 * one mesh, Polygon_mesh_processing::self_intersections. C++17. */
#ifndef PM_BENCH_COLLIDE_INPUTS_H
#define PM_BENCH_COLLIDE_INPUTS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include <CGAL/Exact_predicates_inexact_constructions_kernel.h>
#include <CGAL/Polygon_mesh_processing/self_intersections.h>
#include <CGAL/Surface_mesh.h>
#include <CGAL/box_intersection_d.h>
#include <CGAL/intersections.h>

#include "pyramesh.h"
#include "../tools/demo_scene.h"

namespace pmb
{

/* An indexed mesh (idx empty: a soup, triangle t = vertices 3t..3t+2). */
struct Mesh {
    std::vector<float> pos;
    std::vector<uint32_t> idx;
    size_t nv() const { return pos.size() / 3; }
    size_t nt() const { return idx.empty() ? nv() / 3 : idx.size() / 3; }
    uint32_t vert(size_t t, int k) const
    {
        return idx.empty() ? (uint32_t)(3 * t + k) : idx[3 * t + k];
    }
    pm_mesh as_pm() const
    {
        pm_mesh m;
        std::memset(&m, 0, sizeof m);
        m.num_vertices = nv();
        m.num_triangles = nt();
        m.positions = const_cast<float *>(pos.data());
        m.indices = idx.empty() ? nullptr : const_cast<uint32_t *>(idx.data());
        return m;
    }
};

[[noreturn]] inline void die(const char *what, pm_status s)
{
    std::fprintf(stderr, "%s: %s: %s\n", what, pm_status_string(s), pm_last_error());
    std::exit(1);
}

/* ---- the dam-break scene of tools/cmd_demo.c ---------------------------- */

/* What the scene looks like: the block of m x m x 2m lattice points of
 * spacing s (x, y in [0, (m-1)s], z in [0, (2m-1)s]). */
struct Scene {
    std::vector<float> xyz;
    size_t m = 0;
    double s = 0;
};

/* About `target` particles (radius 0.025): the scene of `pyramesh demo
 * --particles` (tools/demo_scene.h). */
inline Scene dam_break(size_t target, uint64_t seed = DEMO_SEED)
{
    Scene sc;
    sc.s = 2 * DEMO_RADIUS;
    sc.xyz.resize(3 * demo_scene(target, seed, nullptr, nullptr));
    demo_scene(target, seed, sc.xyz.data(), &sc.m);
    return sc;
}

/* The SPH surface of the scene's particles (-r 0.025 -l 2 -t 0.6, grid
 * cell `cube` * r), an indexed mesh, computed on ctx (any backend: the
 * mesh is the same). */
inline Mesh reconstruct(pm_context *ctx, const std::vector<float> &xyz, double cube)
{
    pm_field_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.radius = 0.025;
    p.smoothing_length = 2.0;
    p.cube_size = cube;
    p.iso = 0.6;
    p.rest_density = 1000.0;
    p.method = PM_FIELD_SPH;
    const float *in = xyz.data();
    float *dev = nullptr;
    size_t n = xyz.size() / 3, bytes = xyz.size() * sizeof(float);
    pm_status s;
    if (pm_context_device(ctx) == PM_DEVICE_CUDA) {
        if ((s = pm_alloc(ctx, bytes, (void **)&dev)) != PM_STATUS_OK) die("pm_alloc", s);
        if ((s = pm_upload(ctx, dev, in, bytes)) != PM_STATUS_OK) die("pm_upload", s);
        in = dev;
    }
    pm_field f;
    std::memset(&f, 0, sizeof f);
    if ((s = pm_field_compute(ctx, in, n, &p, &f)) != PM_STATUS_OK) die("pm_field_compute", s);
    pm_free(ctx, dev);
    pm_isosurface_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.normals = PM_NORMALS_NONE;
    o.mode = PM_MESH_INDEXED;
    o.inside = f.inside;
    pm_mesh m;
    if ((s = pm_isosurface(ctx, &f.volume, f.iso, &o, &m)) != PM_STATUS_OK) die("pm_isosurface", s);
    Mesh out;
    out.pos.assign(m.positions, m.positions + 3 * m.num_vertices);
    out.idx.assign(m.indices, m.indices + 3 * m.num_triangles);
    pm_mesh_free(ctx, &m);
    pm_field_free(ctx, &f);
    return out;
}

/* ---- subdivided icosahedron ------------------------------------------------ */

/* The icosahedron split `levels` times (20 * 4^levels triangles), every
 * vertex projected onto the sphere of `radius` about the origin. */
inline Mesh icosphere(int levels, double radius)
{
    const double t = (1.0 + std::sqrt(5.0)) / 2.0;
    std::vector<double> v = {-1, t,  0,  1, t, 0,  -1, -t, 0,  1, -t, 0, 0,  -1, t,  0,  1, t,
                             0,  -1, -t, 0, 1, -t, t,  0,  -1, t, 0,  1, -t, 0,  -1, -t, 0, 1};
    std::vector<uint32_t> f = {0, 11, 5,  0, 5,  1, 0, 1, 7, 0, 7,  10, 0, 10, 11, 1, 5, 9, 5, 11,
                               4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3,  9,  4, 3,  4,  2, 3, 2, 6, 3,
                               6, 8,  3,  8, 9,  4, 9, 5, 2, 4, 11, 6,  2, 10, 8,  6, 7, 9, 8, 1};
    for (int l = 0; l < levels; l++) {
        std::map<std::pair<uint32_t, uint32_t>, uint32_t> mid;
        auto midpoint = [&](uint32_t a, uint32_t b) {
            auto key = std::make_pair(std::min(a, b), std::max(a, b));
            auto it = mid.find(key);
            if (it != mid.end()) return it->second;
            uint32_t id = (uint32_t)(v.size() / 3);
            for (int k = 0; k < 3; k++)
                v.push_back(0.5 * (v[3 * a + k] + v[3 * b + k]));
            mid.emplace(key, id);
            return id;
        };
        std::vector<uint32_t> g;
        g.reserve(4 * f.size());
        for (size_t i = 0; i < f.size(); i += 3) {
            uint32_t a = f[i], b = f[i + 1], c = f[i + 2];
            uint32_t ab = midpoint(a, b), bc = midpoint(b, c), ca = midpoint(c, a);
            uint32_t q[12] = {a, ab, ca, b, bc, ab, c, ca, bc, ab, bc, ca};
            g.insert(g.end(), q, q + 12);
        }
        f.swap(g);
    }
    Mesh m;
    m.idx = f;
    m.pos.resize(v.size());
    for (size_t i = 0; i < v.size(); i += 3) {
        double n = std::sqrt(v[i] * v[i] + v[i + 1] * v[i + 1] + v[i + 2] * v[i + 2]);
        for (int k = 0; k < 3; k++)
            m.pos[i + k] = (float)(v[i + k] / n * radius);
    }
    return m;
}

/* ---- transforms ------------------------------------------------------------ */

/* Row-major 3x4 [R | t], as pm_collide takes it. */
inline void translation(double x, double y, double z, double *m)
{
    const double id[12] = {1, 0, 0, x, 0, 1, 0, y, 0, 0, 1, z};
    std::memcpy(m, id, sizeof id);
}

/* Rotation by `deg` degrees about coordinate axis `axis`, then t. */
inline void rotation(double deg, int axis, double tx, double ty, double tz, double *m)
{
    double a = deg * M_PI / 180, c = std::cos(a), s = std::sin(a);
    int i = (axis + 1) % 3, j = (axis + 2) % 3;
    std::memset(m, 0, 12 * sizeof *m);
    m[4 * axis + axis] = 1;
    m[4 * i + i] = c, m[4 * i + j] = -s, m[4 * j + i] = s, m[4 * j + j] = c;
    m[3] = tx, m[7] = ty, m[11] = tz;
}

/* B's vertices in A's frame as pm_collide sees them: x_a = R x_b + t in
 * double, each row summed left to right, rounded to float once
 * (include/pyramesh.h, docs/collide.md). NULL: unchanged. */
inline std::vector<float> map_vertices(const std::vector<float> &pos, const double *m)
{
    if (!m) return pos;
    std::vector<float> out(pos.size());
    for (size_t i = 0; i < pos.size(); i += 3)
        for (int k = 0; k < 3; k++)
            out[i + k] = (float)(((m[4 * k] * (double)pos[i] + m[4 * k + 1] * (double)pos[i + 1]) +
                                  m[4 * k + 2] * (double)pos[i + 2]) +
                                 m[4 * k + 3]);
    return out;
}

/* ---- pairs ----------------------------------------------------------------- */

/* A pair list as sorted (a << 32) | b keys. */
using Pairs = std::vector<uint64_t>;

inline Pairs to_keys(const uint32_t *pairs, size_t n)
{
    Pairs k(n);
    for (size_t i = 0; i < n; i++)
        k[i] = ((uint64_t)pairs[2 * i] << 32) | pairs[2 * i + 1];
    return k;
}

/* Pairs in x missing from y (both sorted). */
inline size_t missing_from(const Pairs &x, const Pairs &y)
{
    size_t n = 0, j = 0;
    for (uint64_t v : x) {
        while (j < y.size() && y[j] < v)
            j++;
        n += !(j < y.size() && y[j] == v);
    }
    return n;
}

/* Whether triangles a and b of m share a vertex index. */
inline bool shares_vertex(const Mesh &m, uint32_t a, uint32_t b)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (m.vert(a, i) == m.vert(b, j)) return true;
    return false;
}

/* pm_collide's self-collision rule applied to the pairs of m against
 * itself: a < b, sharing no vertex (for indexed meshes). */
inline Pairs self_rule(const Mesh &m, const Pairs &all)
{
    Pairs out;
    for (uint64_t k : all)
        if ((k >> 32) < (uint32_t)k && !shares_vertex(m, (uint32_t)(k >> 32), (uint32_t)k))
            out.push_back(k);
    return out;
}

/* ---- the CGAL reference ---------------------------------------------------- */

using K = CGAL::Exact_predicates_inexact_constructions_kernel;
using Point = K::Point_3;
using Box = CGAL::Box_intersection_d::Box_with_info_d<double, 3, uint32_t>;

/* A closed triangle as CGAL's do_intersect takes it: a proper triangle,
 * or, when its vertices are collinear, the segment (or point) they span. */
struct Tri {
    int kind; /* 0 triangle, 1 segment, 2 point */
    Point p[3];
};

inline Tri make_tri(const float *v)
{
    Tri t;
    for (int k = 0; k < 3; k++)
        t.p[k] = Point(v[3 * k], v[3 * k + 1], v[3 * k + 2]);
    t.kind = 0;
    if (CGAL::collinear(t.p[0], t.p[1], t.p[2])) {
        Point lo = std::min({t.p[0], t.p[1], t.p[2]}), hi = std::max({t.p[0], t.p[1], t.p[2]});
        t.kind = lo == hi ? 2 : 1;
        t.p[0] = lo, t.p[1] = hi;
    }
    return t;
}

inline bool tri_intersect(const Tri &a, const Tri &b)
{
    if (a.kind > b.kind) return tri_intersect(b, a);
    K::Triangle_3 ta(a.p[0], a.p[1], a.p[2]);
    K::Segment_3 sa(a.p[0], a.p[1]), sb(b.p[0], b.p[1]);
    switch (a.kind * 3 + b.kind) {
    case 0: return CGAL::do_intersect(ta, K::Triangle_3(b.p[0], b.p[1], b.p[2]));
    case 1: return CGAL::do_intersect(ta, sb);
    case 2: return ta.has_on(b.p[0]);
    case 4: return CGAL::do_intersect(sa, sb);
    case 5: return sa.has_on(b.p[0]);
    default: return a.p[0] == b.p[0];
    }
}

/* Mesh triangles with vertices `pos` (the mesh's own or mapped ones). */
inline std::vector<Tri> cgal_tris(const Mesh &m, const std::vector<float> &pos)
{
    std::vector<Tri> t(m.nt());
    for (size_t i = 0; i < t.size(); i++) {
        float v[9];
        for (int k = 0; k < 3; k++)
            std::memcpy(v + 3 * k, &pos[3 * (size_t)m.vert(i, k)], 3 * sizeof(float));
        t[i] = make_tri(v);
    }
    return t;
}

inline std::vector<Box> cgal_boxes(const Mesh &m, const std::vector<float> &pos)
{
    std::vector<Box> b;
    b.reserve(m.nt());
    for (size_t i = 0; i < m.nt(); i++) {
        double lo[3], hi[3];
        for (int k = 0; k < 3; k++) {
            float x = pos[3 * (size_t)m.vert(i, 0) + k], y = pos[3 * (size_t)m.vert(i, 1) + k],
                  z = pos[3 * (size_t)m.vert(i, 2) + k];
            lo[k] = std::min({x, y, z}), hi[k] = std::max({x, y, z});
        }
        b.emplace_back(lo, hi, (uint32_t)i);
    }
    return b;
}

/* Every intersecting pair (a, b), CGAL's way: boxes (closed) by
 * box_intersection_d, then the exact predicate; in CGAL's order unless
 * `sort`. The box vectors are reordered by the call. */
inline Pairs cgal_pairs(std::vector<Box> &ba, const std::vector<Tri> &ta, std::vector<Box> &bb,
                        const std::vector<Tri> &tb, bool sort = true)
{
    Pairs out;
    CGAL::box_intersection_d(ba.begin(), ba.end(), bb.begin(), bb.end(),
                             [&](const Box &x, const Box &y) {
                                 if (tri_intersect(ta[x.info()], tb[y.info()]))
                                     out.push_back(((uint64_t)x.info() << 32) | y.info());
                             });
    if (sort) std::sort(out.begin(), out.end());
    return out;
}

/* A against B moved by m (NULL: unchanged), from scratch. */
inline Pairs cgal_pairs(const Mesh &a, const Mesh &b, const double *m, bool sort = true)
{
    std::vector<float> pb = map_vertices(b.pos, m);
    std::vector<Box> ba = cgal_boxes(a, a.pos), bb = cgal_boxes(b, pb);
    return cgal_pairs(ba, cgal_tris(a, a.pos), bb, cgal_tris(b, pb), sort);
}

/* PMP::self_intersections on the mesh as a Surface_mesh (faces in the
 * mesh's order). It leaves out neighbours that meet only in their shared
 * vertex or edge, but reports neighbours that overlap beyond it (folds);
 * pm_collide leaves out every pair sharing a vertex. *folds receives the
 * number of such neighbour pairs CGAL reported, *degenerate the faces it
 * skipped as degenerate (reported as (f, f); those are dropped from the
 * list). Returns false when the mesh is not a valid halfedge mesh. */
inline bool cgal_self_pairs(const Mesh &m, Pairs *out, size_t *folds, size_t *degenerate)
{
    using SM = CGAL::Surface_mesh<Point>;
    SM sm;
    std::vector<SM::Vertex_index> vi(m.nv());
    for (size_t i = 0; i < m.nv(); i++)
        vi[i] = sm.add_vertex(Point(m.pos[3 * i], m.pos[3 * i + 1], m.pos[3 * i + 2]));
    for (size_t t = 0; t < m.nt(); t++) {
        SM::Face_index f = sm.add_face(vi[m.vert(t, 0)], vi[m.vert(t, 1)], vi[m.vert(t, 2)]);
        if (f == SM::null_face() || (size_t)f != t) return false;
    }
    std::vector<std::pair<SM::Face_index, SM::Face_index>> fp;
    CGAL::Polygon_mesh_processing::self_intersections(sm, std::back_inserter(fp));
    out->clear();
    *folds = *degenerate = 0;
    for (auto &p : fp) {
        uint32_t a = (uint32_t)(size_t)p.first, b = (uint32_t)(size_t)p.second;
        if (a == b) {
            ++*degenerate;
            continue;
        }
        if (a > b) std::swap(a, b);
        *folds += shares_vertex(m, a, b);
        out->push_back(((uint64_t)a << 32) | b);
    }
    std::sort(out->begin(), out->end());
    return true;
}

} // namespace pmb

#endif
