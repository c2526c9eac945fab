/* Loop subdivision: pyramesh (CPU with --threads threads, CUDA when
 * available) against OpenSubdiv 3.5 on the CPU (Far::TopologyRefiner
 * RefineUniform + Far::PrimvarRefiner::Interpolate, and Osd::OmpEvaluator
 * over a Far::StencilTable), on reconstructed surfaces (the SPH surface of
 * the `pyramesh demo` scene) of about 1e5 and 1e6 triangles, levels 1-3,
 * uniform and adaptive; medians of --runs runs after one warm-up. Then the
 * adaptive study: the largest deviation from the uniform level-4 surface
 * (vertices and triangle centroids, bench/subdivide_inputs.h) and the
 * triangles of uniform levels 1-3 and of adaptive sweeps (max_deviation,
 * max_angle, max_edge), the ratios at equal or lower deviation, and where
 * the deviation comes from.
 * --sizes: small = 1e5, large = 1e6, full = both. --what gpu: the CUDA
 * rows alone, uniform ones against the floor of writing the output once,
 * then adaptive ones (the stream on the device); gpu-adaptive: only the
 * adaptive ones (for profiling).
 *
 *   bench_subdivide [--threads N] [--sizes small|full|large] [--runs R]
 *                   [--what speed,study,gpu,gpu-adaptive] [--max-level L]
 *                   [--stencil-limit V]
 * Results: bench/RESULTS-subdivide.md. */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
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

pm_subdivide_options options(double max_angle, double max_edge, bool normals, bool in_ctx,
                             double max_dev = 0)
{
    pm_subdivide_options o;
    std::memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_angle_deg = max_angle;
    o.max_edge = max_edge;
    o.max_deviation = max_dev;
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

/* The device's streaming bandwidth as the project's scan sees it: an
 * exclusive scan of 2^26 words (256 MiB read, 256 MiB written), median
 * GB/s. The floor of a subdivision is its output's bytes written once at
 * this rate. */
double device_bandwidth(pm_context *gpu)
{
    const size_t n = (size_t)1 << 26;
    void *in = nullptr, *out = nullptr;
    pm_status s;
    if ((s = pm_alloc(gpu, 4 * n, &in)) != PM_STATUS_OK ||
        (s = pm_alloc(gpu, 4 * n, &out)) != PM_STATUS_OK)
        die(s, "bandwidth buffers");
    std::vector<uint32_t> ones(n, 1u);
    if ((s = pm_upload(gpu, in, ones.data(), 4 * n)) != PM_STATUS_OK) die(s, "upload");
    double ms = timed([&]() {
        uint64_t total = 0;
        pm_status st = pm_scan_exclusive_u32(gpu, (const uint32_t *)in, n, (uint32_t *)out, &total);
        if (st != PM_STATUS_OK) die(st, "scan");
    });
    pm_free(gpu, in);
    pm_free(gpu, out);
    return 8.0 * (double)n / (ms * 1e6); /* GB/s */
}

/* The mean length of the mesh's half-edges (the max_edge criterion's
 * scale). */
static double mean_edge_of(const sdi_mesh &m)
{
    double sum = 0;
    for (size_t f = 0; f < m.nt(); f++)
        for (int k = 0; k < 3; k++) {
            const float *a = &m.p[3 * (size_t)m.t[3 * f + k]],
                        *b = &m.p[3 * (size_t)m.t[3 * f + (k + 1) % 3]];
            sum += std::sqrt((double)(a[0] - b[0]) * (a[0] - b[0]) +
                             (double)(a[1] - b[1]) * (a[1] - b[1]) +
                             (double)(a[2] - b[2]) * (a[2] - b[2]));
        }
    return sum / std::max<double>(1.0, 3.0 * (double)m.nt());
}

/* pm_alloc + pm_free of the output's arrays (positions, indices and with
 * normals the normals): what every call pays before it writes a byte. */
double alloc_ms(pm_context *gpu, size_t nv, size_t nt, bool normals)
{
    return timed([&]() {
        void *p = nullptr, *t = nullptr, *q = nullptr;
        pm_status s;
        if ((s = pm_alloc(gpu, 12 * nv, &p)) != PM_STATUS_OK ||
            (s = pm_alloc(gpu, 12 * nt, &t)) != PM_STATUS_OK ||
            (normals && (s = pm_alloc(gpu, 12 * nv, &q)) != PM_STATUS_OK))
            die(s, "alloc");
        pm_free(gpu, p);
        pm_free(gpu, t);
        pm_free(gpu, q);
    });
}

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
    const double mean_edge = mean_edge_of(m);
    const double dev = 1e-4 * sdi_diagonal(m.p.data(), m.nv()); /* adaptive: max_deviation */
    std::printf("\n== %s: %zu vertices, %zu triangles, mean edge %.4g\n", name, m.nv(), m.nt(),
                mean_edge);
    const double bw = gpu ? device_bandwidth(gpu) : 0;
    if (gpu)
        std::printf("device bandwidth (scan of 2^26 words, read + write): %.0f GB/s; floor = "
                    "output bytes / bandwidth\n",
                    bw);
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
            a = run_pm(cpu, m, level, options(0, 0, false, false, dev));
            std::printf(
                "  pm-cpu   adaptive max_deviation 1e-4 x diagonal %8.1f ms  (%zu v, %zu t)\n",
                a.ms, a.nv, a.nt);
        }
        if (gpu) {
            pm_result g = run_pm(gpu, m, level, options(0, 0, false, false));
            pm_result gc = run_pm(gpu, m, level, options(0, 0, false, true));
            pm_result gn = run_pm(gpu, m, level, options(0, 0, true, true));
            pm_result ga = run_pm(gpu, m, level, options(10, 0, false, true));
            pm_result gd = run_pm(gpu, m, level, options(0, 0, false, true, dev));
            pm_result ge = run_pm(gpu, m, level, options(0, 0.5 * mean_edge, false, true));
            std::printf("  pm-cuda  uniform host in/out %8.2f ms, device in/out %8.2f ms, with "
                        "normals %8.2f ms; adaptive device: 10 deg %8.2f ms (%zu t), "
                        "max_deviation 1e-4 x diagonal %8.2f ms (%zu t), max_edge 0.5 x mean "
                        "edge %8.2f ms (%zu t)\n",
                        g.ms, gc.ms, gn.ms, ga.ms, ga.nt, gd.ms, gd.nt, ge.ms, ge.nt);
            const double f = out_mb(gc.nv, gc.nt, false) / bw, fn = out_mb(gn.nv, gn.nt, true) / bw;
            std::printf("  pm-cuda  floor %.3f ms (%.1f MB at %.0f GB/s): device in/out / floor = "
                        "%.2f; with normals floor %.3f ms, ratio %.2f; output pm_alloc + pm_free "
                        "%.3f ms (%.3f with normals), in the call's time\n",
                        f, out_mb(gc.nv, gc.nt, false), bw, gc.ms / f, fn, gn.ms / fn,
                        alloc_ms(gpu, gc.nv, gc.nt, false), alloc_ms(gpu, gn.nv, gn.nt, true));
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

/* CUDA uniform subdivision alone (--what gpu): input and output in device
 * memory, per level the call (pm_subdivide_loop + synchronize + the
 * output's pm_mesh_free, as a frame loop runs it) against the floor (the
 * output's bytes written once at the measured bandwidth), without and
 * with normals; beside it, what a cudaMalloc + cudaFree of the output's
 * arrays (pm_alloc + pm_free) would add to each call, which the context's
 * recycled mesh arrays save. */
void gpu_speed(const sdi_mesh &m, const char *name, int maxlev, bool uniform)
{
    pm_context_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.device = PM_DEVICE_CUDA;
    pm_context *gpu = nullptr;
    if (!pm_cuda_available() || pm_context_create(&d, &gpu) != PM_STATUS_OK) {
        std::printf("%s: no CUDA device\n", name);
        return;
    }
    const double bw = device_bandwidth(gpu);
    std::printf("\n== %s: %zu vertices, %zu triangles; device bandwidth %.0f GB/s\n", name, m.nv(),
                m.nt(), bw);
    for (int level = 1; uniform && level <= maxlev; level++)
        for (bool normals : {false, true}) {
            pm_result g = run_pm(gpu, m, level, options(0, 0, normals, true));
            const double f = out_mb(g.nv, g.nt, normals) / bw;
            std::printf("  level %d %-12s %9zu t  call+free %8.3f ms  floor %.3f ms (%.1f MB)  "
                        "ratio %.2f  (pm_alloc + pm_free of the output's arrays %.3f ms)\n",
                        level, normals ? "with normals" : "no normals", g.nt, g.ms, f,
                        out_mb(g.nv, g.nt, normals), g.ms / f, alloc_ms(gpu, g.nv, g.nt, normals));
            std::fflush(stdout);
        }
    /* Adaptive, the stream kept on the device: max_edge 0.5 x the mean
     * edge (red promotion spreads along strips) and max_angle 10 degrees. */
    const double mean_edge = mean_edge_of(m);
    for (int level = 1; level <= maxlev; level++) {
        pm_result e = run_pm(gpu, m, level, options(0, 0.5 * mean_edge, false, true));
        pm_result a = run_pm(gpu, m, level, options(10, 0, false, true));
        const double fe = out_mb(e.nv, e.nt, false) / bw, fa = out_mb(a.nv, a.nt, false) / bw;
        std::printf("  level %d adaptive: max_edge 0.5 x mean edge %8.3f ms (%zu t), max_angle 10 "
                    "%8.3f ms (%zu t); floor %.3f / %.3f ms (%.1f / %.1f MB), ratio %.1f / %.1f\n",
                    level, e.ms, e.nt, a.ms, a.nt, fe, fa, out_mb(e.nv, e.nt, false),
                    out_mb(a.nv, a.nt, false), e.ms / fe, a.ms / fa);
        std::fflush(stdout);
    }
    pm_context_destroy(gpu);
}

/* ---- the adaptive study ------------------------------------------------------ */

struct point {
    std::string what;
    size_t tris;
    double dev; /* relative to the diagonal */
};

void attribute(pm_context *ctx, const sdi_mesh &m, const sdi_tri_grid &g, const pm_mesh &l4,
               double diag, int levels, const pm_subdivide_options &oo, const char *what);

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

/* Uniform levels 0-3 and adaptive levels 4 with max_deviation (1e-3 of
 * the diagonal down by sqrt 2, 15 values), max_angle and max_edge sweeps:
 * triangles, deviation from uniform level 4, triangles written per level,
 * and each family's ratios. */
void study(const sdi_mesh &m, const char *name, int threads)
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
    std::vector<point> uni, dev, ang, edg;
    auto one = [&](std::vector<point> &into, const std::string &what, int levels,
                   const pm_subdivide_options &oo) {
        pm_subdivide_options op = oo;
        pm_subdivide_report rep;
        op.report = &rep;
        pm_mesh out;
        double t0 = now_ms();
        pm_status st = pm_subdivide_loop(ctx, &in, levels, &op, &out);
        double ms = now_ms() - t0;
        if (st != PM_STATUS_OK) die(st, "pm_subdivide_loop");
        point p = {
            what, out.num_triangles,
            sdi_max_deviation(g, out.positions, out.num_vertices, out.indices, out.num_triangles) /
                diag};
        into.push_back(p);
        std::printf("  %-44s %9zu triangles  deviation %.3e  %7.1f ms", p.what.c_str(), p.tris,
                    p.dev, ms);
        if (op.max_angle_deg > 0 || op.max_edge > 0 || op.max_deviation > 0) {
            std::printf("  written per level:");
            for (int l = 0; l <= levels; l++)
                std::printf(" %llu", (unsigned long long)rep.finished[l]);
        }
        std::printf("\n");
        pm_mesh_free(ctx, &out);
    };
    char buf[96];
    for (int l = 0; l <= 3; l++)
        one(uni, "uniform level " + std::to_string(l), l, o);
    double best_dev = 0; /* max_deviation of the best run at uniform level 2's deviation */
    size_t best_tris = 0;
    for (int step = 0; step <= 14; step++) {
        const double t = 1e-3 * std::pow(2.0, -0.5 * step);
        std::snprintf(buf, sizeof buf, "levels 4 max_deviation %.3g diag", t);
        one(dev, buf, 4, options(0, 0, false, false, t * diag));
        if (dev.back().dev <= uni[2].dev && (!best_tris || dev.back().tris < best_tris))
            best_tris = dev.back().tris, best_dev = t * diag;
    }
    for (double a : {20.0, 10.0, 5.0, 2.5, 1.25}) {
        std::snprintf(buf, sizeof buf, "levels 4 max_angle %g", a);
        one(ang, buf, 4, options(a, 0, false, false));
    }
    for (double e : {0.02, 0.01, 0.005, 0.0025}) {
        std::snprintf(buf, sizeof buf, "levels 4 max_edge %g diag", e);
        one(edg, buf, 4, options(0, e * diag, false, false));
    }
    ratios("max_deviation", uni, dev);
    ratios("max_angle", uni, ang);
    ratios("max_edge", uni, edg);
    if (best_tris)
        attribute(ctx, m, g, l4, diag, 4, options(0, 0, false, false, best_dev),
                  "the best max_deviation at uniform level 2's deviation");
    attribute(ctx, m, g, l4, diag, 4, options(2.5, 0, false, false), "max_angle 2.5");
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
               double diag, int levels, const pm_subdivide_options &o, const char *what)
{
    pm_subdivide_options oo = o;
    pm_subdivide_report rep;
    oo.report = &rep;
    pm_mesh in = m.view(), out;
    pm_status s = pm_subdivide_loop(ctx, &in, levels, &oo, &out);
    if (s != PM_STATUS_OK) die(s, "pm_subdivide_loop");
    std::printf("  where the deviation is, levels %d, %s (max_deviation %.3g diag; %zu t):\n",
                levels, what, oo.max_deviation / diag, out.num_triangles);
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
                "[--what speed,study,gpu,gpu-adaptive] [--max-level L] [--stencil-limit V]\n");
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
    if (what.find("speed") != std::string::npos || what.find("gpu") != std::string::npos) {
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
            if (what.find("gpu") != std::string::npos)
                gpu_speed(m, inputs[k].name, maxlev,
                          what.find("gpu-adaptive") == std::string::npos);
            else
                speed(m, inputs[k].name, maxlev, threads);
        }
    }
    if (what.find("study") != std::string::npos) {
        sdi_mesh rec, sup;
        if ((s = sdi_reconstruct(ctx, sdi_particles(6000), 1.5, &rec)) != PM_STATUS_OK ||
            (s = sdi_superellipsoid(ctx, 24, &sup)) != PM_STATUS_OK)
            die(s, "study inputs");
        study(sup, "superellipsoid (analytic)", threads);
        study(rec, "reconstructed surface", threads);
    }
    pm_context_destroy(ctx);
    return 0;
}
