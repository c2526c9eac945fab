/* Loop subdivision: pyramesh (CPU with --threads threads, CUDA when
 * available) against OpenSubdiv 3.5 on the CPU (Far::TopologyRefiner
 * RefineUniform + Far::PrimvarRefiner::Interpolate, and Osd::OmpEvaluator
 * over a Far::StencilTable), on reconstructed surfaces (the SPH surface of
 * the `pyramesh demo` scene) of about 1e5 and 1e6 triangles, levels 1-3,
 * uniform and adaptive; medians of --runs runs after one warm-up. Then the
 * adaptive study: the largest deviation from the uniform level-4 surface
 * (vertices and triangle centroids, bench/subdivide_inputs.h) and the
 * triangles of uniform levels 1-3 and of adaptive sweeps, where the
 * deviation comes from, and (--what model) a serial model of the adaptive
 * rules with switches for changes to them (emulate()).
 * --sizes: small = 1e5, large = 1e6, full = both.
 *
 *   bench_subdivide [--threads N] [--sizes small|full|large] [--runs R]
 *                   [--what speed,study,model] [--max-level L] [--stencil-limit V]
 * Results: bench/RESULTS-subdivide.md. */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <array>
#include <string>
#include <vector>

#include "subdivide_inputs.h"

#ifdef PM_HAVE_OSD
#include <opensubdiv/far/primvarRefiner.h>
#include <opensubdiv/far/stencilTableFactory.h>
#include <opensubdiv/osd/bufferDescriptor.h>
#include <opensubdiv/osd/ompEvaluator.h>
#include <opensubdiv/version.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace
{

double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int g_runs = 5;
size_t g_stencil_limit = 8000000; /* vertices */

/* Median of g_runs runs of f after one warm-up. */
double timed(const std::function<void()> &f)
{
    f();
    std::vector<double> t;
    for (int i = 0; i < g_runs; i++) {
        double t0 = now_ms();
        f();
        t.push_back(now_ms() - t0);
    }
    return median(t);
}

void die(pm_status s, const char *what)
{
    std::fprintf(stderr, "bench_subdivide: %s: %s: %s\n", what, pm_status_string(s),
                 pm_last_error());
    std::exit(1);
}

pm_subdivide_options options(double max_angle, double max_edge, bool normals, bool in_ctx)
{
    pm_subdivide_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_angle_deg = max_angle;
    o.max_edge = max_edge;
    o.normals = normals ? PM_NORMALS_DEFAULT : PM_NORMALS_NONE;
    o.output_in_context_memory = in_ctx;
    return o;
}

/* One pyramesh configuration: median ms and the output's size. */
struct pm_result {
    double ms;
    size_t nv, nt;
};

pm_result run_pm(pm_context *ctx, const sdi_mesh &m, int level, const pm_subdivide_options &o)
{
    pm_mesh in = m.view();
    void *dp = nullptr, *dt = nullptr;
    if (o.output_in_context_memory) { /* input in context memory too: device-side time */
        pm_status s;
        if ((s = pm_alloc(ctx, 4 * m.p.size(), &dp)) != PM_STATUS_OK ||
            (s = pm_upload(ctx, dp, m.p.data(), 4 * m.p.size())) != PM_STATUS_OK ||
            (s = pm_alloc(ctx, 4 * m.t.size(), &dt)) != PM_STATUS_OK ||
            (s = pm_upload(ctx, dt, m.t.data(), 4 * m.t.size())) != PM_STATUS_OK)
            die(s, "upload");
        in.positions = (float *)dp;
        in.indices = (uint32_t *)dt;
        in.in_context_memory = 1;
    }
    pm_result r = {0, 0, 0};
    r.ms = timed([&]() {
        pm_mesh out;
        pm_status s = pm_subdivide_loop(ctx, &in, level, &o, &out);
        if (s == PM_STATUS_OK) s = pm_context_synchronize(ctx);
        if (s != PM_STATUS_OK) die(s, "pm_subdivide_loop");
        r.nv = out.num_vertices, r.nt = out.num_triangles;
        pm_mesh_free(ctx, &out);
    });
    pm_free(ctx, dp);
    pm_free(ctx, dt);
    return r;
}

double out_mb(size_t nv, size_t nt, bool normals)
{
    return (12.0 * (double)nv * (normals ? 2 : 1) + 12.0 * (double)nt) / 1e6;
}

#ifdef PM_HAVE_OSD
using namespace OpenSubdiv;

struct fvert {
    float x[3];
    void Clear(void * = nullptr) { x[0] = x[1] = x[2] = 0; }
    void AddWithWeight(const fvert &s, float w)
    {
        x[0] += w * s.x[0], x[1] += w * s.x[1], x[2] += w * s.x[2];
    }
};

/* OpenSubdiv on the CPU, uniform to `level`: the refiner's creation, the
 * topology (RefineUniform), the positions (PrimvarRefiner, level by level)
 * and the last level's triangles copied out; then the stencil route:
 * the table's creation (once per topology) and its evaluation with the
 * OpenMP evaluator. Positions are checked against pyramesh's. */
void run_osd(const sdi_mesh &m, int level, int threads, const pm_mesh &ours)
{
    double t_create = 0, t_refine = 0, t_interp = 0, t_copy = 0;
    std::vector<double> tc, tr, ti, tcp, tall;
    size_t nv = 0, nt = 0;
    std::vector<fvert> last;
    for (int run = 0; run <= g_runs; run++) {
        double t0 = now_ms();
        std::unique_ptr<Far::TopologyRefiner> ref(sdi_osd_refiner(m));
        double t1 = now_ms();
        Far::TopologyRefiner::UniformOptions uo(level);
        ref->RefineUniform(uo);
        double t2 = now_ms();
        std::vector<fvert> buf((size_t)ref->GetNumVerticesTotal());
        std::memcpy(buf.data(), m.p.data(), 4 * m.p.size());
        Far::PrimvarRefiner pr(*ref);
        fvert *src = buf.data();
        for (int l = 1; l <= level; l++) {
            fvert *dst = src + ref->GetLevel(l - 1).GetNumVertices();
            pr.Interpolate(l, src, dst);
            src = dst;
        }
        double t3 = now_ms();
        const Far::TopologyLevel &fin = ref->GetLevel(level);
        nv = (size_t)fin.GetNumVertices(), nt = (size_t)fin.GetNumFaces();
        std::vector<uint32_t> tri(3 * nt);
        for (size_t f = 0; f < nt; f++) {
            Far::ConstIndexArray fv = fin.GetFaceVertices((Far::Index)f);
            tri[3 * f] = (uint32_t)fv[0], tri[3 * f + 1] = (uint32_t)fv[1],
                    tri[3 * f + 2] = (uint32_t)fv[2];
        }
        std::vector<fvert> pos(src, src + nv);
        double t4 = now_ms();
        if (run == 0) {
            last.swap(pos);
            continue;
        }
        tc.push_back(t1 - t0), tr.push_back(t2 - t1), ti.push_back(t3 - t2), tcp.push_back(t4 - t3);
        tall.push_back(t4 - t0);
    }
    t_create = median(tc), t_refine = median(tr), t_interp = median(ti), t_copy = median(tcp);
    /* the same positions as pyramesh (up to OpenSubdiv's vertex order: compare sorted x) */
    std::vector<float> a(nv), b(nv);
    for (size_t v = 0; v < nv; v++)
        a[v] = last[v].x[0], b[v] = v < ours.num_vertices ? ours.positions[3 * v] : 0.f;
    std::sort(a.begin(), a.end()), std::sort(b.begin(), b.end());
    double worst = 0;
    for (size_t v = 0; v < nv; v++)
        worst = std::max(worst, (double)std::fabs(a[v] - b[v]));
    std::printf("  osd      create %8.1f  refine %8.1f  interpolate %8.1f  copy-out %6.1f  "
                "total %8.1f ms  (%zu v, %zu t; sorted-x diff to pyramesh %.2g)\n",
                t_create, t_refine, t_interp, t_copy, median(tall), nv, nt, worst);

    /* stencils: the last level's vertices from the control vertices (factorized:
     * unfactorized per-level tables, evaluated level by level over [control |
     * level 1 | level 2 ...], did not reproduce PrimvarRefiner from level 2 on),
     * built once per topology, evaluated with the OpenMP evaluator; skipped
     * above --stencil-limit vertices (memory). */
    if (nv > g_stencil_limit) {
        std::printf("  osd-omp  skipped: %zu vertices, above --stencil-limit %zu (the factorized "
                    "table holds about 10 entries per vertex at level 3)\n",
                    nv, g_stencil_limit);
        return;
    }
    std::unique_ptr<Far::TopologyRefiner> ref(sdi_osd_refiner(m));
    ref->RefineUniform(Far::TopologyRefiner::UniformOptions(level));
    Far::StencilTableFactory::Options so;
    so.generateIntermediateLevels = false;
    so.factorizeIntermediateLevels = true;
    so.generateOffsets = true;
    so.maxLevel = (unsigned)level;
    double s0 = now_ms();
    std::unique_ptr<const Far::StencilTable> st(Far::StencilTableFactory::Create(*ref, so));
    double t_table = now_ms() - s0;
    std::vector<float> vb(3 * (size_t)st->GetNumStencils());
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    double t_eval = timed([&]() {
        Osd::BufferDescriptor sd(0, 3, 3), dd(0, 3, 3);
        Osd::OmpEvaluator::EvalStencils(m.p.data(), sd, vb.data(), dd, &st->GetSizes()[0],
                                        &st->GetOffsets()[0], &st->GetControlIndices()[0],
                                        &st->GetWeights()[0], 0, st->GetNumStencils());
    });
    double sw = 0;
    for (size_t v = 0; v < nv && v < (size_t)st->GetNumStencils(); v++)
        for (int i = 0; i < 3; i++)
            sw = std::max(sw, (double)std::fabs(vb[3 * v + i] - last[v].x[i]));
    std::printf("  osd-omp  stencil table %8.1f ms (%zu stencils, %zu entries)  evaluate (%d "
                "threads) %8.1f ms  (diff to PrimvarRefiner %.2g)\n",
                t_table, (size_t)st->GetNumStencils(), st->GetControlIndices().size(), threads,
                t_eval, sw);
}
#endif

/* ---- speed ------------------------------------------------------------------- */

void speed(const sdi_mesh &m, const char *name, int maxlev, int threads)
{
    pm_context_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.device = PM_DEVICE_CPU;
    d.num_threads = threads;
    pm_context *cpu = nullptr, *gpu = nullptr;
    pm_status s = pm_context_create(&d, &cpu);
    if (s != PM_STATUS_OK) die(s, "cpu context");
    if (pm_cuda_available()) {
        d.device = PM_DEVICE_CUDA;
        if (pm_context_create(&d, &gpu) != PM_STATUS_OK) gpu = nullptr;
    }
    double mean_edge = 0;
    for (size_t f = 0; f < m.nt(); f++)
        for (int k = 0; k < 3; k++) {
            const float *a = &m.p[3 * (size_t)m.t[3 * f + k]],
                        *b = &m.p[3 * (size_t)m.t[3 * f + (k + 1) % 3]];
            mean_edge += std::sqrt((double)(a[0] - b[0]) * (a[0] - b[0]) +
                                   (double)(a[1] - b[1]) * (a[1] - b[1]) +
                                   (double)(a[2] - b[2]) * (a[2] - b[2]));
        }
    mean_edge /= std::max<double>(1.0, 3.0 * (double)m.nt());
    std::printf("\n== %s: %zu vertices, %zu triangles, mean edge %.4g\n", name, m.nv(), m.nt(),
                mean_edge);
    for (int level = 1; level <= maxlev; level++) {
        std::printf("level %d\n", level);
        pm_result u = run_pm(cpu, m, level, options(0, 0, false, false));
        pm_result un = run_pm(cpu, m, level, options(0, 0, true, false));
        std::printf(
            "  pm-cpu   uniform %8.1f ms, with normals %8.1f ms  (%zu v, %zu t; output %.1f MB, "
            "%.1f MB with normals)\n",
            u.ms, un.ms, u.nv, u.nt, out_mb(u.nv, u.nt, false), out_mb(u.nv, u.nt, true));
        for (double ang : {10.0}) {
            pm_result a = run_pm(cpu, m, level, options(ang, 0, false, false));
            std::printf("  pm-cpu   adaptive max_angle %4.1f %8.1f ms  (%zu v, %zu t)\n", ang, a.ms,
                        a.nv, a.nt);
        }
        {
            pm_result a = run_pm(cpu, m, level, options(0, 0.5 * mean_edge, false, false));
            std::printf("  pm-cpu   adaptive max_edge 0.5 x mean edge %8.1f ms  (%zu v, %zu t)\n",
                        a.ms, a.nv, a.nt);
        }
        if (gpu) {
            pm_result g = run_pm(gpu, m, level, options(0, 0, false, false));
            pm_result gc = run_pm(gpu, m, level, options(0, 0, false, true));
            pm_result gn = run_pm(gpu, m, level, options(0, 0, true, true));
            pm_result ga = run_pm(gpu, m, level, options(10, 0, false, true));
            std::printf("  pm-cuda  uniform host in/out %8.2f ms, device in/out %8.2f ms, with "
                        "normals %8.2f ms; adaptive 10 deg device %8.2f ms (%zu t)\n",
                        g.ms, gc.ms, gn.ms, ga.ms, ga.nt);
        }
#ifdef PM_HAVE_OSD
        {
            pm_subdivide_options o = options(0, 0, false, false);
            pm_mesh in = m.view(), ours;
            if ((s = pm_subdivide_loop(cpu, &in, level, &o, &ours)) != PM_STATUS_OK)
                die(s, "pm_subdivide_loop");
            run_osd(m, level, threads, ours);
            pm_mesh_free(cpu, &ours);
        }
#endif
        std::fflush(stdout);
    }
    pm_context_destroy(gpu);
    pm_context_destroy(cpu);
}

/* ---- a serial model of the adaptive rules, to try changes to them ---------------
 * The rules of docs/subdivide.md (stream, split test, red / green / finished,
 * frozen vertices and edges, even and odd masks), written plainly over hash
 * maps, with switches for three changes:
 *   limit: a vertex that leaves the stream (a corner of a written triangle)
 *          is put at its Loop limit position (OpenSubdiv's limit masks:
 *          interior 1 - n e, e = 1 / (n + 3 / (8 beta(n))) per neighbour;
 *          boundary 2/3 v + 1/6 (b0 + b1)) from its ring at that level,
 *          instead of staying where it is;
 *   dev:   the split test in length units: an edge splits when the Loop
 *          masks would move the surface by more than `tol` there (the odd
 *          vertex from the edge's midpoint, either end by its even rule);
 *   red:   a triangle with two split edges splits the third too (repeated
 *          until nothing changes), so green closure is only for one.
 * With every switch off it must give pyramesh's triangle counts. */
struct emu_rules {
    double max_angle = 0; /* degrees; 0 = off */
    double tol = 0;       /* dev: length; 0 = off */
    bool limit = false, red = false;
};

struct emu_result {
    std::vector<float> p;
    std::vector<uint32_t> t;
    std::vector<uint64_t> finished;
};

uint64_t ekey(uint32_t a, uint32_t b)
{
    return a < b ? ((uint64_t)a << 32 | b) : ((uint64_t)b << 32 | a);
}

emu_result emulate(const sdi_mesh &m, int levels, const emu_rules &r)
{
    const double PI = 3.141592653589793;
    emu_result res;
    std::vector<float> pos = m.p, nrm;
    std::vector<uint32_t> tri = m.t;
    std::vector<uint8_t> frozen(m.nv(), 0);
    std::unordered_set<uint64_t> out_edges;
    const double cos_lim = std::cos(r.max_angle * PI / 180.0);
    for (int level = 0; level <= levels && !tri.empty(); level++) {
        const bool last = level == levels;
        const size_t n = tri.size() / 3, nv = pos.size() / 3;
        frozen.resize(nv, 0);
        /* edges of the stream: their triangles (1 or 2) */
        std::unordered_map<uint64_t, std::array<uint32_t, 3>> edges; /* count, t0, t1 */
        edges.reserve(3 * n);
        for (size_t t = 0; t < n; t++)
            for (int k = 0; k < 3; k++) {
                auto &e = edges[ekey(tri[3 * t + k], tri[3 * t + (k + 1) % 3])];
                if (e[0] < 2) e[1 + e[0]] = (uint32_t)t;
                e[0]++;
            }
        auto is_frozen_edge = [&](uint64_t k) {
            const auto &e = edges[k];
            return e[0] == 1 && out_edges.count(k) != 0;
        };
        /* vertices: incident triangles of the stream */
        std::vector<std::vector<uint32_t>> inc(nv);
        for (size_t t = 0; t < n; t++)
            for (int k = 0; k < 3; k++)
                inc[tri[3 * t + k]].push_back((uint32_t)t);
        /* a vertex's ring: neighbours, boundary neighbours, whether a fan */
        struct ring {
            bool ok = false, boundary = false;
            std::vector<uint32_t> nb;
            uint32_t b[2] = {0, 0};
        };
        std::vector<ring> rings(nv);
        for (size_t v = 0; v < nv; v++) {
            ring &g = rings[v];
            if (frozen[v] || inc[v].empty()) continue;
            std::unordered_map<uint32_t, int> cnt;
            for (uint32_t t : inc[v])
                for (int k = 0; k < 3; k++)
                    if (tri[3 * t + k] != v) cnt[tri[3 * t + k]]++;
            int nb1 = 0;
            for (auto &kv : cnt) {
                g.nb.push_back(kv.first);
                if (kv.second == 1) {
                    if (nb1 < 2) g.b[nb1] = kv.first;
                    nb1++;
                }
            }
            std::sort(g.nb.begin(), g.nb.end());
            /* a disc: as many neighbours as triangles (closed) or one more (open, two
             * boundary neighbours) */
            bool closed = nb1 == 0 && g.nb.size() == inc[v].size();
            bool open = nb1 == 2 && g.nb.size() == inc[v].size() + 1;
            g.ok = closed || open;
            g.boundary = open;
            if (!g.ok) frozen[v] = 2; /* non-manifold: never moves */
        }
        auto even_of = [&](uint32_t v, double q[3]) {
            const ring &g = rings[v];
            const float *p = &pos[3 * (size_t)v];
            if (g.boundary) {
                for (int i = 0; i < 3; i++)
                    q[i] =
                        0.75 * p[i] + 0.125 * ((double)pos[3 * g.b[0] + i] + pos[3 * g.b[1] + i]);
                return;
            }
            double nn = (double)g.nb.size(), b = 0.375 + 0.25 * std::cos(2 * PI / nn);
            double ew = (0.625 - b * b) / nn, s[3] = {0, 0, 0};
            for (uint32_t x : g.nb)
                for (int i = 0; i < 3; i++)
                    s[i] += pos[3 * (size_t)x + i];
            for (int i = 0; i < 3; i++)
                q[i] = (1 - nn * ew) * p[i] + ew * s[i];
        };
        auto limit_of = [&](uint32_t v, double q[3]) {
            const ring &g = rings[v];
            const float *p = &pos[3 * (size_t)v];
            if (g.boundary) {
                for (int i = 0; i < 3; i++)
                    q[i] = (2.0 / 3.0) * p[i] +
                           (1.0 / 6.0) * ((double)pos[3 * g.b[0] + i] + pos[3 * g.b[1] + i]);
                return;
            }
            double nn = (double)g.nb.size(), b = 0.375 + 0.25 * std::cos(2 * PI / nn);
            double gam = (0.625 - b * b) / nn, ew = 1.0 / (nn + 3.0 / (8.0 * gam)),
                   s[3] = {0, 0, 0};
            for (uint32_t x : g.nb)
                for (int i = 0; i < 3; i++)
                    s[i] += pos[3 * (size_t)x + i];
            for (int i = 0; i < 3; i++)
                q[i] = (1 - nn * ew) * p[i] + ew * s[i];
        };
        auto odd_of = [&](uint64_t key, double q[3]) {
            const auto &e = edges[key];
            uint32_t u = (uint32_t)(key >> 32), w = (uint32_t)key;
            if (e[0] != 2) {
                for (int i = 0; i < 3; i++)
                    q[i] = 0.5 * ((double)pos[3 * u + i] + pos[3 * w + i]);
                return;
            }
            uint32_t o[2];
            for (int j = 0; j < 2; j++) {
                const uint32_t *t = &tri[3 * (size_t)e[1 + j]];
                o[j] = t[0] != u && t[0] != w ? t[0] : (t[1] != u && t[1] != w ? t[1] : t[2]);
            }
            for (int i = 0; i < 3; i++)
                q[i] = 0.375 * ((double)pos[3 * u + i] + pos[3 * w + i]) +
                       0.125 * ((double)pos[3 * o[0] + i] + pos[3 * o[1] + i]);
        };
        auto face_normal = [&](uint32_t t, double n3[3]) {
            const float *a = &pos[3 * (size_t)tri[3 * t]], *b = &pos[3 * (size_t)tri[3 * t + 1]],
                        *c = &pos[3 * (size_t)tri[3 * t + 2]];
            double e1[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
            double e2[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
            n3[0] = e1[1] * e2[2] - e1[2] * e2[1];
            n3[1] = e1[2] * e2[0] - e1[0] * e2[2];
            n3[2] = e1[0] * e2[1] - e1[1] * e2[0];
        };
        /* |d . n| / |n| (|d| when n vanishes) */
        auto along = [](const double d[3], const double n3[3]) {
            double l = std::sqrt(n3[0] * n3[0] + n3[1] * n3[1] + n3[2] * n3[2]);
            if (!(l > 0)) return std::sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            return std::fabs(d[0] * n3[0] + d[1] * n3[1] + d[2] * n3[2]) / l;
        };
        /* criterion normals */
        if (r.max_angle > 0) {
            nrm.resize(3 * nv, 0.f);
            for (size_t v = 0; v < nv; v++) {
                if (level > 0 && (frozen[v] || !rings[v].ok)) continue;
                double s[3] = {0, 0, 0};
                for (uint32_t t : inc[v]) {
                    const float *a = &pos[3 * (size_t)tri[3 * t]],
                                *b = &pos[3 * (size_t)tri[3 * t + 1]],
                                *c = &pos[3 * (size_t)tri[3 * t + 2]];
                    double e1[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
                    double e2[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
                    s[0] += e1[1] * e2[2] - e1[2] * e2[1];
                    s[1] += e1[2] * e2[0] - e1[0] * e2[2];
                    s[2] += e1[0] * e2[1] - e1[1] * e2[0];
                }
                double l = std::sqrt(s[0] * s[0] + s[1] * s[1] + s[2] * s[2]);
                for (int i = 0; i < 3; i++)
                    nrm[3 * v + i] = l > 0 ? (float)(s[i] / l) : 0.f;
            }
        }
        /* split decisions per edge */
        std::unordered_map<uint64_t, uint32_t> split; /* edge -> new vertex (0 = pending) */
        if (!last)
            for (auto &kv : edges) {
                uint64_t k = kv.first;
                if (is_frozen_edge(k)) continue;
                uint32_t u = (uint32_t)(k >> 32), w = (uint32_t)k;
                bool s = false;
                if (r.max_angle > 0) {
                    double dot = 0;
                    for (int i = 0; i < 3; i++)
                        dot += (double)nrm[3 * u + i] * nrm[3 * w + i];
                    s = dot < cos_lim;
                }
                if (r.tol > 0) {
                    /* the masks' move along the normal: the odd vertex from the
                     * edge's midpoint (normal: the two faces'), each end by its
                     * even rule (normal: its ring's) */
                    double q[3], mid[3], nv3[3] = {0, 0, 0};
                    odd_of(k, q);
                    const auto &e = edges[k];
                    for (uint32_t j = 0; j < e[0] && j < 2; j++) {
                        double fn[3];
                        face_normal(e[1 + j], fn);
                        for (int i = 0; i < 3; i++)
                            nv3[i] += fn[i];
                    }
                    for (int i = 0; i < 3; i++)
                        mid[i] = q[i] - 0.5 * ((double)pos[3 * u + i] + pos[3 * w + i]);
                    s = s || along(mid, nv3) > r.tol;
                    for (uint32_t x : {u, w})
                        if (!frozen[x] && rings[x].ok) {
                            even_of(x, q);
                            double vn[3] = {0, 0, 0};
                            for (uint32_t t : inc[x]) {
                                double fn[3];
                                face_normal(t, fn);
                                for (int i = 0; i < 3; i++)
                                    vn[i] += fn[i];
                            }
                            for (int i = 0; i < 3; i++)
                                q[i] -= pos[3 * (size_t)x + i];
                            s = s || along(q, vn) > r.tol;
                        }
                }
                if (s) split[k] = 0;
            }
        auto is_split = [&](uint32_t a, uint32_t b) { return split.count(ekey(a, b)) != 0; };
        auto nsplit = [&](size_t t) {
            int c = 0;
            for (int k = 0; k < 3; k++)
                c += is_split(tri[3 * t + k], tri[3 * t + (k + 1) % 3]);
            return c;
        };
        if (r.red && !last)
            for (bool changed = true; changed;) {
                changed = false;
                for (size_t t = 0; t < n; t++)
                    if (nsplit(t) == 2)
                        for (int k = 0; k < 3; k++) {
                            uint64_t key = ekey(tri[3 * t + k], tri[3 * t + (k + 1) % 3]);
                            if (!split.count(key) && !is_frozen_edge(key))
                                split[key] = 0, changed = true;
                        }
            }
        /* which vertices leave the stream now */
        std::vector<uint8_t> leaving(nv, 0);
        for (size_t t = 0; t < n; t++)
            if (last || nsplit(t) != 3)
                for (int k = 0; k < 3; k++)
                    leaving[tri[3 * t + k]] = 1;
        /* even vertices */
        std::vector<float> pn = pos;
        for (size_t v = 0; v < nv; v++) {
            if (frozen[v] || !rings[v].ok) continue;
            bool any = false;
            for (uint32_t x : rings[v].nb)
                any = any || is_split((uint32_t)v, x);
            double q[3];
            if (r.limit && leaving[v] && !last)
                limit_of((uint32_t)v, q);
            else if (any)
                even_of((uint32_t)v, q);
            else
                continue;
            for (int i = 0; i < 3; i++)
                pn[3 * v + i] = (float)q[i];
        }
        /* odd vertices, numbered in a fixed order (sorted keys) */
        std::vector<uint64_t> keys;
        for (auto &kv : split)
            keys.push_back(kv.first);
        std::sort(keys.begin(), keys.end());
        for (uint64_t k : keys) {
            double q[3];
            odd_of(k, q);
            split[k] = (uint32_t)(pn.size() / 3);
            for (int i = 0; i < 3; i++)
                pn.push_back((float)q[i]);
            if (r.max_angle > 0) {
                uint32_t u = (uint32_t)(k >> 32), w = (uint32_t)k;
                double s[3], l = 0;
                for (int i = 0; i < 3; i++)
                    s[i] = (double)nrm[3 * u + i] + nrm[3 * w + i], l += s[i] * s[i];
                l = std::sqrt(l);
                for (int i = 0; i < 3; i++)
                    nrm.push_back(l > 0 ? (float)(s[i] / l) : 0.f);
            }
        }
        frozen.resize(pn.size() / 3, 0);
        /* emission */
        std::vector<uint32_t> next;
        uint64_t written = 0;
        auto put = [&](uint32_t a, uint32_t b, uint32_t c) {
            res.t.push_back(a), res.t.push_back(b), res.t.push_back(c);
            out_edges.insert(ekey(a, b)), out_edges.insert(ekey(b, c)),
                out_edges.insert(ekey(c, a));
            for (uint32_t x : {a, b, c})
                if (!frozen[x]) frozen[x] = 1;
            written++;
        };
        auto d2 = [&](uint32_t a, uint32_t b) {
            double s = 0;
            for (int i = 0; i < 3; i++)
                s += ((double)pn[3 * a + i] - pn[3 * b + i]) *
                     ((double)pn[3 * a + i] - pn[3 * b + i]);
            return s;
        };
        for (size_t t = 0; t < n; t++) {
            const uint32_t *v = &tri[3 * t];
            uint32_t mid[3];
            int ns = 0;
            for (int k = 0; k < 3; k++) {
                auto it = split.find(ekey(v[k], v[(k + 1) % 3]));
                mid[k] = it == split.end() ? UINT32_MAX : it->second;
                ns += mid[k] != UINT32_MAX;
            }
            if (last) ns = 0;
            if (ns == 3) {
                uint32_t c[12] = {v[0],   mid[0], mid[2], mid[0], v[1],   mid[1],
                                  mid[2], mid[1], v[2],   mid[0], mid[1], mid[2]};
                next.insert(next.end(), c, c + 12);
            } else if (ns == 0) {
                put(v[0], v[1], v[2]);
            } else if (ns == 1) {
                int k = mid[0] != UINT32_MAX ? 0 : (mid[1] != UINT32_MAX ? 1 : 2);
                put(v[k], mid[k], v[(k + 2) % 3]);
                put(mid[k], v[(k + 1) % 3], v[(k + 2) % 3]);
            } else {
                int j = mid[0] == UINT32_MAX ? 0 : (mid[1] == UINT32_MAX ? 1 : 2);
                uint32_t pa = v[j], pb = v[(j + 1) % 3], c = v[(j + 2) % 3];
                uint32_t m1 = mid[(j + 1) % 3], m2 = mid[(j + 2) % 3];
                put(m1, c, m2);
                if (d2(pb, m2) < d2(pa, m1))
                    put(pb, m1, m2), put(pa, pb, m2);
                else
                    put(pa, pb, m1), put(pa, m1, m2);
            }
        }
        res.finished.push_back(written);
        pos.swap(pn);
        tri.swap(next);
    }
    res.p = pos;
    return res;
}

/* ---- the adaptive study ------------------------------------------------------ */

struct point {
    std::string what;
    size_t tris;
    double dev; /* relative to the diagonal */
};

void attribute(pm_context *ctx, const sdi_mesh &m, const sdi_tri_grid &g, const pm_mesh &l4,
               double diag, int levels, double ang, double edge);

/* The family's fewest triangles at or below each uniform level's deviation. */
void ratios(const char *family, const std::vector<point> &uni, const std::vector<point> &ada)
{
    std::printf("  %s, at equal or lower deviation than uniform level 1 / 2 / 3:", family);
    for (size_t l = 1; l < uni.size(); l++) {
        const point *best = nullptr;
        for (const point &a : ada)
            if (a.dev <= uni[l].dev && (!best || a.tris < best->tris)) best = &a;
        if (best)
            std::printf("  %.3f (%s)", (double)best->tris / (double)uni[l].tris,
                        best->what.c_str());
        else
            std::printf("  none");
    }
    std::printf("\n");
}

void study(const sdi_mesh &m, const char *name, int threads, bool model)
{
    pm_context_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.device = PM_DEVICE_CPU;
    d.num_threads = threads;
    pm_context *ctx = nullptr;
    pm_status s = pm_context_create(&d, &ctx);
    if (s != PM_STATUS_OK) die(s, "cpu context");
    pm_mesh in = m.view(), l4;
    pm_subdivide_options o = options(0, 0, false, false);
    if ((s = pm_subdivide_loop(ctx, &in, 4, &o, &l4)) != PM_STATUS_OK) die(s, "level 4");
    sdi_tri_grid g;
    g.build(l4.positions, l4.num_vertices, l4.indices, l4.num_triangles);
    const double diag = sdi_diagonal(l4.positions, l4.num_vertices);
    std::printf(
        "\n== adaptive study, %s: %zu triangles in, uniform level 4 %zu triangles; "
        "deviation = largest distance of a vertex or centroid to level 4 / diagonal (%.4g)\n",
        name, m.nt(), l4.num_triangles, diag);
    std::vector<point> uni, ang, edg;
    auto show = [&](const point &p, const std::vector<uint64_t> &fin) {
        std::printf("  %-40s %9zu triangles  deviation %.3e", p.what.c_str(), p.tris, p.dev);
        if (!fin.empty()) {
            std::printf("  written per level:");
            for (uint64_t x : fin)
                std::printf(" %llu", (unsigned long long)x);
        }
        std::printf("\n");
    };
    auto one = [&](std::vector<point> &into, const std::string &what, int levels, double a,
                   double edge) {
        pm_subdivide_options oo = options(a, edge, false, false);
        pm_subdivide_report rep;
        oo.report = &rep;
        pm_mesh out;
        pm_status st = pm_subdivide_loop(ctx, &in, levels, &oo, &out);
        if (st != PM_STATUS_OK) die(st, "pm_subdivide_loop");
        point p = {
            what, out.num_triangles,
            sdi_max_deviation(g, out.positions, out.num_vertices, out.indices, out.num_triangles) /
                diag};
        into.push_back(p);
        std::vector<uint64_t> fin;
        if (a > 0 || edge > 0)
            for (int l = 0; l <= levels; l++)
                fin.push_back(rep.finished[l]);
        show(p, fin);
        pm_mesh_free(ctx, &out);
    };
    char buf[96];
    for (int l = 0; l <= 3; l++)
        one(uni, "uniform level " + std::to_string(l), l, 0, 0);
    const double angles[] = {20.0, 10.0, 5.0, 2.5, 1.25};
    for (double a : angles) {
        std::snprintf(buf, sizeof buf, "pyramesh levels 4 max_angle %g", a);
        one(ang, buf, 4, a, 0);
    }
    for (double e : {0.02, 0.01, 0.005, 0.0025}) {
        std::snprintf(buf, sizeof buf, "pyramesh levels 4 max_edge %g diag", e);
        one(edg, buf, 4, 0, e * diag);
    }
    ratios("pyramesh max_angle", uni, ang);
    ratios("pyramesh max_edge", uni, edg);
    attribute(ctx, m, g, l4, diag, 4, 2.5, 0);
    attribute(ctx, m, g, l4, diag, 4, 0, 0.0025 * diag);
    if (model) {
        /* the model of the rules: unchanged (checked against pyramesh's counts),
         * then with each change */
        auto emu = [&](std::vector<point> &into, const std::string &what, const emu_rules &r) {
            emu_result e = emulate(m, 4, r);
            point p = {
                what, e.t.size() / 3,
                sdi_max_deviation(g, e.p.data(), e.p.size() / 3, e.t.data(), e.t.size() / 3) /
                    diag};
            into.push_back(p);
            show(p, e.finished);
        };
        struct family {
            const char *name;
            bool limit, red, dev;
        } fams[] = {{"model, rules as now", false, false, false},
                    {"model + limit", true, false, false},
                    {"model + limit + red", true, true, false},
                    {"model + dev", false, false, true},
                    {"model + dev + limit", true, false, true},
                    {"model + dev + limit + red", true, true, true},
                    {"model + dev + red", false, true, true}};
        for (const family &f : fams) {
            std::vector<point> pts;
            if (!f.dev) {
                for (double a : angles) {
                    emu_rules r;
                    r.max_angle = a, r.limit = f.limit, r.red = f.red;
                    std::snprintf(buf, sizeof buf, "%s, max_angle %g", f.name, a);
                    emu(pts, buf, r);
                }
            } else {
                for (int step = 0; step <= 14; step++) { /* 1e-3 diag down by sqrt(2) */
                    const double t = 1e-3 * std::pow(2.0, -0.5 * step);
                    emu_rules r;
                    r.tol = t * diag, r.limit = f.limit, r.red = f.red;
                    std::snprintf(buf, sizeof buf, "%s, tol %.3g diag", f.name, t);
                    emu(pts, buf, r);
                }
            }
            ratios(f.name, uni, pts);
        }
    }
    pm_mesh_free(ctx, &l4);
    pm_context_destroy(ctx);
}

/* Where an adaptive result's deviation comes from: its triangles grouped by
 * the level that wrote them and by kind (finished: no split edge; green:
 * closed around this level's new vertices), the largest deviation of their
 * vertices and of their centroids; then the input vertices that never
 * moved (triangles finished at level 0) against their place in the uniform
 * level-4 mesh, and those triangles' centroids with their corners moved to
 * that place (what a limit-position rule would leave: the chord error). */
void attribute(pm_context *ctx, const sdi_mesh &m, const sdi_tri_grid &g, const pm_mesh &l4,
               double diag, int levels, double ang, double edge)
{
    pm_subdivide_options oo = options(ang, edge, false, false);
    pm_subdivide_report rep;
    oo.report = &rep;
    pm_mesh in = m.view(), out;
    pm_status s = pm_subdivide_loop(ctx, &in, levels, &oo, &out);
    if (s != PM_STATUS_OK) die(s, "pm_subdivide_loop");
    std::printf("  where the deviation is, levels %d max_angle %g max_edge %.3g diag (%zu t):\n",
                levels, ang, edge / diag, out.num_triangles);
    uint64_t first = 0, nvl = m.nv();
    auto dv = [&](const float *q) {
        double x[3] = {q[0], q[1], q[2]};
        return g.distance(x) / diag;
    };
    for (int l = 0; l <= levels; l++) {
        double worst[2][2] = {{0, 0}, {0, 0}};
        size_t cnt[2] = {0, 0};
        for (uint64_t f = first; f < first + rep.finished[l]; f++) {
            const uint32_t *t = out.indices + 3 * f;
            int green = t[0] >= nvl || t[1] >= nvl || t[2] >= nvl;
            cnt[green]++;
            float c[3] = {0, 0, 0};
            for (int k = 0; k < 3; k++) {
                const float *q = out.positions + 3 * (size_t)t[k];
                worst[green][0] = std::max(worst[green][0], dv(q));
                for (int i = 0; i < 3; i++)
                    c[i] += q[i] / 3.0f;
            }
            worst[green][1] = std::max(worst[green][1], dv(c));
        }
        std::printf("    level %d: finished %7zu (vertices %.2e, centroids %.2e)  green %7zu "
                    "(vertices %.2e, centroids %.2e)\n",
                    l, cnt[0], worst[0][0], worst[0][1], cnt[1], worst[1][0], worst[1][1]);
        first += rep.finished[l];
        nvl += rep.split_edges[l];
    }
    /* the worst vertex: the level that created it and the first level that
     * wrote a triangle around it (it never moved after that) */
    std::vector<int> created(out.num_vertices, 0), frozen(out.num_vertices, 99);
    {
        uint64_t lo = m.nv();
        for (int l = 0; l <= levels; l++) {
            for (uint64_t v = lo; v < lo + rep.split_edges[l] && v < out.num_vertices; v++)
                created[v] = l + 1;
            lo += rep.split_edges[l];
        }
        uint64_t f0 = 0;
        for (int l = 0; l <= levels; l++) {
            for (uint64_t f = f0; f < f0 + rep.finished[l]; f++)
                for (int k = 0; k < 3; k++) {
                    int &z = frozen[out.indices[3 * f + k]];
                    z = std::min(z, l);
                }
            f0 += rep.finished[l];
        }
    }
    double wv = 0;
    size_t wi = 0;
    std::vector<double> by_gap(8, 0.0);
    for (size_t v = 0; v < out.num_vertices; v++) {
        if (frozen[v] == 99) continue;
        double d = dv(out.positions + 3 * v);
        if (d > wv) wv = d, wi = v;
        int gap = std::min(7, std::max(0, levels - frozen[v]));
        by_gap[gap] = std::max(by_gap[gap], d);
    }
    std::printf("    worst vertex %zu: %.2e, created at level %d, frozen at level %d (levels left "
                "%d)\n",
                wi, wv, created[wi], frozen[wi], levels - frozen[wi]);
    std::printf("    largest vertex deviation by levels left after freezing (0..%d):", levels);
    for (int gap = 0; gap <= levels; gap++)
        std::printf(" %.2e", by_gap[gap]);
    std::printf("\n");
    /* input vertices: as written, and where uniform subdivision puts them */
    double w_ctrl = 0, w_chord = 0, w_fix = 0;
    for (size_t v = 0; v < m.nv(); v++)
        if (frozen[v] != 99) w_ctrl = std::max(w_ctrl, dv(out.positions + 3 * v));
    std::vector<float> fixed(out.positions, out.positions + 3 * out.num_vertices);
    for (size_t v = 0; v < m.nv(); v++)
        for (int i = 0; i < 3; i++)
            fixed[3 * v + i] = l4.positions[3 * v + i];
    for (uint64_t f = 0; f < rep.finished[0]; f++) {
        const uint32_t *t = out.indices + 3 * f;
        if (t[0] >= m.nv() || t[1] >= m.nv() || t[2] >= m.nv()) continue;
        float c[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 3; i++)
                c[i] += fixed[3 * (size_t)t[k] + i] / 3.0f;
        w_chord = std::max(w_chord, dv(c));
    }
    w_fix =
        sdi_max_deviation(g, fixed.data(), out.num_vertices, out.indices, out.num_triangles) / diag;
    std::printf(
        "    input vertices as written %.2e; moved to their level-4 place: level-0 finished "
        "centroids %.2e, whole mesh %.2e\n",
        w_ctrl, w_chord, w_fix);
    pm_mesh_free(ctx, &out);
}

} // namespace

int main(int argc, char **argv)
{
    int threads = 2, maxlev = 3;
    std::string sizes = "small", what = "speed,study";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> const char * {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_subdivide: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--threads")
            threads = std::atoi(next());
        else if (a == "--sizes")
            sizes = next();
        else if (a == "--runs")
            g_runs = std::max(1, std::atoi(next()));
        else if (a == "--what")
            what = next();
        else if (a == "--stencil-limit")
            g_stencil_limit = (size_t)std::atof(next());
        else if (a == "--max-level")
            maxlev = std::max(1, std::min(4, std::atoi(next())));
        else {
            std::fprintf(
                stderr,
                "usage: bench_subdivide [--threads N] [--sizes small|full|large] [--runs R] "
                "[--what speed,study,model] [--max-level L] [--stencil-limit V]\n");
            return 2;
        }
    }
    if (sizes != "small" && sizes != "full" && sizes != "large") {
        std::fprintf(stderr, "bench_subdivide: --sizes small|full|large\n");
        return 2;
    }
#ifdef PM_HAVE_OSD
    const int osd_version = OPENSUBDIV_VERSION_NUMBER;
#else
    const int osd_version = 0;
#endif
    std::printf("bench_subdivide: %s; threads %d, runs %d (median after a warm-up); OpenSubdiv %d "
                "(0 = not built)\n",
                pm_build_info(), threads, g_runs, osd_version);
    pm_context *ctx = nullptr;
    pm_context_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.device = PM_DEVICE_CPU;
    d.num_threads = threads;
    pm_status s = pm_context_create(&d, &ctx);
    if (s != PM_STATUS_OK) die(s, "context");
    if (what.find("speed") != std::string::npos) {
        /* particles and cube size for about 1e5 and 1e6 triangles */
        struct {
            size_t particles;
            double cube;
            const char *name;
        } inputs[] = {{175000, 1.5, "reconstructed ~1e5"}, {1650000, 1.0, "reconstructed ~1e6"}};
        for (int k = sizes == "large" ? 1 : 0; k < (sizes == "small" ? 1 : 2); k++) {
            sdi_mesh m;
            if ((s = sdi_reconstruct(ctx, sdi_particles(inputs[k].particles), inputs[k].cube,
                                     &m)) != PM_STATUS_OK)
                die(s, "reconstruct");
            speed(m, inputs[k].name, maxlev, threads);
        }
    }
    const bool model = what.find("model") != std::string::npos;
    if (what.find("study") != std::string::npos || model) {
        sdi_mesh rec, sup;
        if ((s = sdi_reconstruct(ctx, sdi_particles(6000), 1.5, &rec)) != PM_STATUS_OK ||
            (s = sdi_superellipsoid(ctx, 24, &sup)) != PM_STATUS_OK)
            die(s, "study inputs");
        study(sup, "superellipsoid (analytic)", threads, model);
        study(rec, "reconstructed surface", threads, model);
    }
    pm_context_destroy(ctx);
    return 0;
}
