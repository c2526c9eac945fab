/* Inputs and measurements shared by bench/bench_subdivide.cpp and
 * tests/test_subdivide_osd.cpp (C++, header-only): small closed and open
 * control meshes, a reconstructed surface (SPH field of synthetic particles
 * through pm_field_compute + pm_isosurface, the scene of `pyramesh demo`),
 * an analytic surface (a superellipsoid through pm_isosurface), the
 * largest distance of a mesh to a reference mesh (a uniform grid of
 * triangles, exact point-triangle distances), and, with PM_HAVE_OSD,
 * OpenSubdiv's Loop refiner with the options pyramesh matches. */
#ifndef PM_BENCH_SUBDIVIDE_INPUTS_H
#define PM_BENCH_SUBDIVIDE_INPUTS_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pyramesh.h"
#include "../tools/demo_scene.h"

#ifdef PM_HAVE_OSD
#include <opensubdiv/far/topologyDescriptor.h>
#include <opensubdiv/far/topologyRefinerFactory.h>
#endif

/* A host triangle mesh. */
struct sdi_mesh {
    std::vector<float> p;
    std::vector<uint32_t> t;
    size_t nv() const { return p.size() / 3; }
    size_t nt() const { return t.size() / 3; }
    pm_mesh view() const
    {
        pm_mesh m;
        std::memset(&m, 0, sizeof m);
        m.num_vertices = nv();
        m.num_triangles = nt();
        m.positions = const_cast<float *>(p.data());
        m.indices = const_cast<uint32_t *>(t.data());
        return m;
    }
    void add_v(double x, double y, double z)
    {
        p.push_back((float)x), p.push_back((float)y), p.push_back((float)z);
    }
    void add_t(uint32_t a, uint32_t b, uint32_t c)
    {
        t.push_back(a), t.push_back(b), t.push_back(c);
    }
};

/* The length of the bounding box's diagonal (1e-30 when empty). */
static inline double sdi_diagonal(const float *p, size_t nv)
{
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    for (size_t v = 0; v < nv; v++)
        for (int i = 0; i < 3; i++)
            lo[i] = std::min(lo[i], (double)p[3 * v + i]),
            hi[i] = std::max(hi[i], (double)p[3 * v + i]);
    if (nv == 0) return 1e-30;
    return std::max(1e-30, std::sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) +
                                     (hi[1] - lo[1]) * (hi[1] - lo[1]) +
                                     (hi[2] - lo[2]) * (hi[2] - lo[2])));
}

/* ---- small control meshes -------------------------------------------- */

static inline sdi_mesh sdi_icosahedron()
{
    const double g = 1.6180339887498949;
    const double p[] = {-1, g,  0,  1, g, 0,  -1, -g, 0,  1, -g, 0, 0,  -1, g,  0,  1, g,
                        0,  -1, -g, 0, 1, -g, g,  0,  -1, g, 0,  1, -g, 0,  -1, -g, 0, 1};
    static const uint32_t t[] = {0, 11, 5,  0, 5,  1, 0, 1, 7, 0, 7,  10, 0, 10, 11, 1, 5, 9, 5, 11,
                                 4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3,  9,  4, 3,  4,  2, 3, 2, 6, 3,
                                 6, 8,  3,  8, 9,  4, 9, 5, 2, 4, 11, 6,  2, 10, 8,  6, 7, 9, 8, 1};
    sdi_mesh m;
    for (int i = 0; i < 12; i++)
        m.add_v(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    m.t.assign(t, t + 60);
    return m;
}

/* A torus of nu x nv quads split in two (every vertex of valence 6). */
static inline sdi_mesh sdi_torus(unsigned nu, unsigned nv, double R, double r)
{
    sdi_mesh m;
    for (unsigned i = 0; i < nu; i++)
        for (unsigned j = 0; j < nv; j++) {
            double u = 2 * M_PI * i / nu, v = 2 * M_PI * j / nv;
            m.add_v((R + r * std::cos(v)) * std::cos(u), (R + r * std::cos(v)) * std::sin(u),
                    r * std::sin(v));
        }
    for (unsigned i = 0; i < nu; i++)
        for (unsigned j = 0; j < nv; j++) {
            uint32_t a = i * nv + j, b = ((i + 1) % nu) * nv + j;
            uint32_t c = ((i + 1) % nu) * nv + (j + 1) % nv, d = i * nv + (j + 1) % nv;
            m.add_t(a, b, c), m.add_t(a, c, d);
        }
    return m;
}

/* An open, wavy grid patch of nx x ny quads (corners of valence 2 and 3). */
static inline sdi_mesh sdi_grid(unsigned nx, unsigned ny)
{
    sdi_mesh m;
    for (unsigned j = 0; j <= ny; j++)
        for (unsigned i = 0; i <= nx; i++)
            m.add_v(i, j, 0.3 * std::sin(0.7 * i) * std::cos(0.5 * j));
    for (unsigned j = 0; j < ny; j++)
        for (unsigned i = 0; i < nx; i++) {
            uint32_t a = j * (nx + 1) + i, b = a + 1, d = a + nx + 1, c = d + 1;
            /* alternate the diagonal so interior valences are 4, 6 and 8 */
            if ((i + j) % 2)
                m.add_t(a, b, c), m.add_t(a, c, d);
            else
                m.add_t(a, b, d), m.add_t(b, c, d);
        }
    return m;
}

/* An open hemisphere: a pole of valence nseg, nring rings (the first of
 * valence 5, the others 6), the last one on the equator is the boundary. */
static inline sdi_mesh sdi_hemisphere(unsigned nseg, unsigned nring)
{
    sdi_mesh m;
    m.add_v(0, 0, 1);
    for (unsigned r = 1; r <= nring; r++) {
        double th = 0.5 * M_PI * r / nring;
        for (unsigned s = 0; s < nseg; s++) {
            double ph = 2 * M_PI * s / nseg;
            m.add_v(std::sin(th) * std::cos(ph), std::sin(th) * std::sin(ph), std::cos(th));
        }
    }
    for (unsigned s = 0; s < nseg; s++)
        m.add_t(0, 1 + s, 1 + (s + 1) % nseg);
    for (unsigned r = 1; r < nring; r++)
        for (unsigned s = 0; s < nseg; s++) {
            uint32_t a = 1 + (r - 1) * nseg + s, a1 = 1 + (r - 1) * nseg + (s + 1) % nseg;
            uint32_t b = a + nseg, b1 = a1 + nseg;
            m.add_t(a, b, b1), m.add_t(a, b1, a1);
        }
    return m;
}

/* A closed bipyramid over a k-gon (poles of valence k), or with open set only
 * its upper fan (a disc whose centre has valence k). */
static inline sdi_mesh sdi_bipyramid(unsigned k, bool open)
{
    sdi_mesh m;
    for (unsigned i = 0; i < k; i++)
        m.add_v(std::cos(2 * M_PI * i / k), std::sin(2 * M_PI * i / k), 0.1 * (i % 3));
    m.add_v(0, 0, 1);
    m.add_v(0, 0, -1);
    for (unsigned i = 0; i < k; i++) {
        m.add_t(i, (i + 1) % k, k);
        if (!open) m.add_t((i + 1) % k, i, k + 1);
    }
    if (open) m.p.resize(3 * (k + 1)); /* drop the unused lower pole */
    return m;
}

/* ---- reconstructed and analytic surfaces -------------------------------- */

/* The scene of `pyramesh demo` (tools/demo_scene.h), about `target`
 * particles, deterministic. */
static inline std::vector<float> sdi_particles(size_t target, uint64_t seed = DEMO_SEED)
{
    std::vector<float> xyz(3 * demo_scene(target, seed, nullptr, nullptr));
    demo_scene(target, seed, xyz.data(), nullptr);
    return xyz;
}

/* Copies a host pm_mesh (indexed) into an sdi_mesh. */
static inline sdi_mesh sdi_from_pm(const pm_mesh &m)
{
    sdi_mesh o;
    o.p.assign(m.positions, m.positions + 3 * m.num_vertices);
    o.t.assign(m.indices, m.indices + 3 * m.num_triangles);
    return o;
}

/* The SPH surface of the particles (radius 0.025, -l 2, -t 0.6, cube size
 * `cube` in multiples of r), indexed, on ctx. */
static inline pm_status sdi_reconstruct(pm_context *ctx, const std::vector<float> &xyz, double cube,
                                        sdi_mesh *out)
{
    pm_field_params fp;
    std::memset(&fp, 0, sizeof fp);
    fp.struct_size = sizeof fp;
    fp.radius = 0.025;
    fp.smoothing_length = 2.0;
    fp.cube_size = cube;
    fp.iso = 0.6;
    fp.rest_density = 1000.0;
    pm_field f;
    pm_status s = pm_field_compute(ctx, xyz.data(), xyz.size() / 3, &fp, &f);
    if (s != PM_STATUS_OK) return s;
    pm_isosurface_options io;
    std::memset(&io, 0, sizeof io);
    io.struct_size = sizeof io;
    io.normals = PM_NORMALS_NONE;
    io.mode = PM_MESH_INDEXED;
    io.inside = f.inside;
    pm_mesh m;
    s = pm_isosurface(ctx, &f.volume, f.iso, &io, &m);
    pm_field_free(ctx, &f);
    if (s != PM_STATUS_OK) return s;
    *out = sdi_from_pm(m);
    pm_mesh_free(ctx, &m);
    return PM_STATUS_OK;
}

/* A superellipsoid |x/2|^4 + |y|^4 + |z/0.7|^4 = 1 (flat sides, rounded
 * edges) sampled on an n^3 lattice over [-2.2, 2.2] x [-1.1, 1.1] x
 * [-0.8, 0.8], through pm_isosurface (host volume), indexed. */
static inline pm_status sdi_superellipsoid(pm_context *ctx, size_t n, sdi_mesh *out)
{
    const double ext[3] = {2.2, 1.1, 0.8}, ax[3] = {2.0, 1.0, 0.7};
    std::vector<float> f(n * n * n);
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double q[3] = {(double)i, (double)j, (double)k}, s = 0;
                for (int a = 0; a < 3; a++) {
                    double x = (-ext[a] + 2 * ext[a] * q[a] / (double)(n - 1)) / ax[a];
                    s += x * x * x * x;
                }
                f[(k * n + j) * n + i] = (float)(std::pow(s, 0.25) - 1.0);
            }
    pm_volume v;
    std::memset(&v, 0, sizeof v);
    v.data = f.data();
    v.type = PM_SAMPLE_F32;
    v.nx = v.ny = v.nz = n;
    for (int a = 0; a < 3; a++) {
        v.spacing[a] = 2 * ext[a] / (double)(n - 1);
        v.origin[a] = -ext[a];
    }
    pm_isosurface_options io;
    std::memset(&io, 0, sizeof io);
    io.struct_size = sizeof io;
    io.normals = PM_NORMALS_NONE;
    io.mode = PM_MESH_INDEXED;
    io.inside = PM_INSIDE_BELOW;
    pm_mesh m;
    pm_status s = pm_isosurface(ctx, &v, 0.0, &io, &m);
    if (s != PM_STATUS_OK) return s;
    *out = sdi_from_pm(m);
    pm_mesh_free(ctx, &m);
    return PM_STATUS_OK;
}

/* ---- distance to a reference mesh --------------------------------------- */

/* Squared distance from p to triangle (a, b, c) (Ericson, Real-Time
 * Collision Detection 5.1.5), in double. */
static inline double sdi_point_tri2(const double p[3], const double a[3], const double b[3],
                                    const double c[3])
{
    double ab[3], ac[3], ap[3], q[3];
    for (int i = 0; i < 3; i++)
        ab[i] = b[i] - a[i], ac[i] = c[i] - a[i], ap[i] = p[i] - a[i];
    auto dot = [](const double *x, const double *y) {
        return x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
    };
    double d1 = dot(ab, ap), d2 = dot(ac, ap);
    if (d1 <= 0 && d2 <= 0) {
        for (int i = 0; i < 3; i++)
            q[i] = a[i];
    } else {
        double bp[3], cp[3];
        for (int i = 0; i < 3; i++)
            bp[i] = p[i] - b[i], cp[i] = p[i] - c[i];
        double d3 = dot(ab, bp), d4 = dot(ac, bp), d5 = dot(ab, cp), d6 = dot(ac, cp);
        double vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
        if (d3 >= 0 && d4 <= d3) {
            for (int i = 0; i < 3; i++)
                q[i] = b[i];
        } else if (vc <= 0 && d1 >= 0 && d3 <= 0) {
            double v = d1 / (d1 - d3);
            for (int i = 0; i < 3; i++)
                q[i] = a[i] + v * ab[i];
        } else if (d6 >= 0 && d5 <= d6) {
            for (int i = 0; i < 3; i++)
                q[i] = c[i];
        } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
            double w = d2 / (d2 - d6);
            for (int i = 0; i < 3; i++)
                q[i] = a[i] + w * ac[i];
        } else if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
            double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
            for (int i = 0; i < 3; i++)
                q[i] = b[i] + w * (c[i] - b[i]);
        } else {
            double den = va + vb + vc;
            if (!(den > 0)) { /* degenerate: nearest of the vertices */
                double best = 1e300;
                const double *vs[3] = {a, b, c};
                for (const double *x : vs) {
                    double d[3] = {p[0] - x[0], p[1] - x[1], p[2] - x[2]};
                    best = std::min(best, dot(d, d));
                }
                return best;
            }
            double v = vb / den, w = vc / den;
            for (int i = 0; i < 3; i++)
                q[i] = a[i] + ab[i] * v + ac[i] * w;
        }
    }
    double d[3] = {p[0] - q[0], p[1] - q[1], p[2] - q[2]};
    return dot(d, d);
}

/* Triangles of a reference mesh binned into a uniform grid of cubic cells
 * (each triangle in every cell its bounding box touches); a query searches
 * rings of cells outwards and stops when the next ring is farther than the
 * best distance so far. */
struct sdi_tri_grid {
    const float *p = nullptr;
    const uint32_t *t = nullptr;
    double lo[3] = {0, 0, 0}, cell = 1;
    long dim[3] = {1, 1, 1};
    std::vector<uint32_t> start, items;

    void build(const float *pos, size_t nv, const uint32_t *tri, size_t nt)
    {
        p = pos, t = tri;
        double hi[3] = {-1e300, -1e300, -1e300}, elen = 0;
        for (int i = 0; i < 3; i++)
            lo[i] = 1e300;
        for (size_t v = 0; v < nv; v++)
            for (int i = 0; i < 3; i++)
                lo[i] = std::min(lo[i], (double)pos[3 * v + i]),
                hi[i] = std::max(hi[i], (double)pos[3 * v + i]);
        for (size_t f = 0; f < nt; f++) {
            const float *a = pos + 3 * (size_t)tri[3 * f], *b = pos + 3 * (size_t)tri[3 * f + 1];
            elen += std::sqrt((double)(a[0] - b[0]) * (a[0] - b[0]) +
                              (double)(a[1] - b[1]) * (a[1] - b[1]) +
                              (double)(a[2] - b[2]) * (a[2] - b[2]));
        }
        elen = nt ? elen / (double)nt : 1.0;
        double size = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2], 1e-30});
        cell = std::max(2.0 * elen, size / 1024.0);
        for (int i = 0; i < 3; i++)
            dim[i] = std::max(1L, (long)std::ceil((hi[i] - lo[i]) / cell) + 1);
        size_t ncell = (size_t)(dim[0] * dim[1] * dim[2]);
        std::vector<uint32_t> cnt(ncell + 1, 0);
        for (int pass = 0; pass < 2; pass++) {
            for (size_t f = 0; f < nt; f++) {
                long b0[3], b1[3];
                box(f, b0, b1);
                for (long z = b0[2]; z <= b1[2]; z++)
                    for (long y = b0[1]; y <= b1[1]; y++)
                        for (long x = b0[0]; x <= b1[0]; x++) {
                            size_t c = (size_t)((z * dim[1] + y) * dim[0] + x);
                            if (pass == 0)
                                cnt[c]++;
                            else
                                items[start[c] + cnt[c]++] = (uint32_t)f;
                        }
            }
            if (pass == 0) {
                start.assign(ncell + 1, 0);
                for (size_t c = 0; c < ncell; c++)
                    start[c + 1] = start[c] + cnt[c];
                items.assign(start[ncell], 0);
                std::fill(cnt.begin(), cnt.end(), 0);
            }
        }
    }
    long clampi(double x, int i) const
    {
        long c = (long)std::floor((x - lo[i]) / cell);
        return std::min(std::max(c, 0L), dim[i] - 1);
    }
    void box(size_t f, long b0[3], long b1[3]) const
    {
        for (int i = 0; i < 3; i++) {
            double mn = 1e300, mx = -1e300;
            for (int k = 0; k < 3; k++) {
                double x = p[3 * (size_t)t[3 * f + k] + i];
                mn = std::min(mn, x), mx = std::max(mx, x);
            }
            b0[i] = clampi(mn, i), b1[i] = clampi(mx, i);
        }
    }
    /* Distance from q to the nearest triangle. */
    double distance(const double q[3]) const
    {
        long c[3];
        for (int i = 0; i < 3; i++)
            c[i] = clampi(q[i], i);
        double best2 = 1e300;
        long maxr = std::max({dim[0], dim[1], dim[2]});
        for (long r = 0; r <= maxr; r++) {
            for (long z = c[2] - r; z <= c[2] + r; z++) {
                if (z < 0 || z >= dim[2]) continue;
                for (long y = c[1] - r; y <= c[1] + r; y++) {
                    if (y < 0 || y >= dim[1]) continue;
                    for (long x = c[0] - r; x <= c[0] + r; x++) {
                        if (x < 0 || x >= dim[0]) continue;
                        if (std::max({std::labs(x - c[0]), std::labs(y - c[1]),
                                      std::labs(z - c[2])}) != r)
                            continue;
                        /* distance from q to this cell's box */
                        long cc[3] = {x, y, z};
                        double d2 = 0;
                        for (int i = 0; i < 3; i++) {
                            double a = lo[i] + cc[i] * cell, b = a + cell;
                            double d = q[i] < a ? a - q[i] : (q[i] > b ? q[i] - b : 0);
                            d2 += d * d;
                        }
                        if (d2 >= best2) continue;
                        size_t ci = (size_t)((z * dim[1] + y) * dim[0] + x);
                        for (uint32_t k = start[ci]; k < start[ci + 1]; k++) {
                            uint32_t f = items[k];
                            double v[3][3];
                            for (int j = 0; j < 3; j++)
                                for (int i = 0; i < 3; i++)
                                    v[j][i] = p[3 * (size_t)t[3 * f + j] + i];
                            best2 = std::min(best2, sdi_point_tri2(q, v[0], v[1], v[2]));
                        }
                    }
                }
            }
            /* every cell of ring r + 1 is at least r cells from q (q may lie
             * outside the grid: then keep going until something is found) */
            double ring = (double)r * cell;
            if (best2 < 1e300 && best2 <= ring * ring) break;
        }
        return std::sqrt(best2);
    }
};

/* The largest distance of the mesh's vertices (those used by a triangle) and
 * triangle centroids to the reference grid's mesh. */
static inline double sdi_max_deviation(const sdi_tri_grid &g, const float *p, size_t nv,
                                       const uint32_t *t, size_t nt)
{
    std::vector<char> used(nv, 0);
    for (size_t i = 0; i < 3 * nt; i++)
        used[t[i]] = 1;
    double worst = 0;
    const long long nq = (long long)(nv + nt);
#pragma omp parallel for schedule(dynamic, 1024) reduction(max : worst)
    for (long long i = 0; i < nq; i++) {
        double q[3] = {0, 0, 0};
        if (i < (long long)nv) {
            if (!used[(size_t)i]) continue;
            for (int a = 0; a < 3; a++)
                q[a] = p[3 * (size_t)i + a];
        } else {
            size_t f = (size_t)i - nv;
            for (int k = 0; k < 3; k++)
                for (int a = 0; a < 3; a++)
                    q[a] += p[3 * (size_t)t[3 * f + k] + a] / 3.0;
        }
        worst = std::max(worst, g.distance(q));
    }
    return worst;
}

/* ---- OpenSubdiv ---------------------------------------------------------- */

#ifdef PM_HAVE_OSD
namespace sdi_osd = OpenSubdiv::Far;

/* OpenSubdiv's refiner for the mesh: Loop, boundary edges sharp
 * (VTX_BOUNDARY_EDGE_ONLY), the options docs/subdivide.md says pyramesh
 * matches. The caller deletes it. */
static inline sdi_osd::TopologyRefiner *sdi_osd_refiner(const sdi_mesh &m)
{
    using namespace OpenSubdiv;
    std::vector<int> counts(m.nt(), 3);
    Far::TopologyDescriptor desc;
    desc.numVertices = (int)m.nv();
    desc.numFaces = (int)m.nt();
    desc.numVertsPerFace = counts.data();
    desc.vertIndicesPerFace = reinterpret_cast<const Far::Index *>(m.t.data());
    Sdc::Options so;
    so.SetVtxBoundaryInterpolation(Sdc::Options::VTX_BOUNDARY_EDGE_ONLY);
    typedef Far::TopologyRefinerFactory<Far::TopologyDescriptor> Factory;
    return Factory::Create(desc, Factory::Options(Sdc::SCHEME_LOOP, so));
}
#endif

#endif
