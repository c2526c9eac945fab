/* pm_bvh_build + pm_collide beside FCL and CGAL (issue 20): the pairs of
 * intersecting triangles of reconstructed fluid surfaces against a
 * translated copy, of a surface with itself, and of a sphere sliding
 * through a surface over many frames (BVHs built once, one collision call
 * per frame: a simulation's loop). Peers: FCL 0.7 (BVHModel<OBBRSS>,
 * fcl::collide with every contact kept, no contact geometry) and CGAL
 * (box_intersection_d + the exact do_intersect; PMP::self_intersections for
 * one mesh). Every input is made by pyramesh (bench/collide_inputs.h).
 * Times: one warm-up, then the median of --runs runs (wall clock; one run
 * where the warm-up took over 5 s); BVH builds separately; converting and
 * sorting the peers' results is left out of their times (pyramesh's sort
 * is part of pm_collide). pyramesh's pair list is checked against CGAL's
 * and FCL's difference is counted. Prints a table and one JSON line per
 * case.
 *
 * Usage: bench_collide [--threads N] [--sizes small|full] [--runs R]
 *                      [--frames F] [--no-cgal] [--only SUBSTRING] */
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <fcl/config.h>
#include <fcl/geometry/bvh/BVH_model.h>
#include <fcl/math/bv/OBBRSS.h>
#include <fcl/narrowphase/collision.h>

#include "collide_inputs.h"

using pmb::Mesh;
using pmb::Pairs;
using Model = fcl::BVHModel<fcl::OBBRSSd>;

namespace
{

struct Options {
    int threads = 2, runs = 5, frames = 100;
    bool full = true, cgal = true;
    std::string only; /* run the cases whose name holds this */
};

double now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/* One warm-up call, then the median of `runs` timed calls; a call whose
 * warm-up took over 5 s is timed once. */
double median_ms(int runs, const std::function<void()> &f)
{
    double t0 = now_ms();
    f();
    if (now_ms() - t0 > 5000.0) runs = 1;
    std::vector<double> t;
    for (int r = 0; r < runs; r++) {
        double t1 = now_ms();
        f();
        t.push_back(now_ms() - t1);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* ---- pyramesh ------------------------------------------------------------- */

struct Pm {
    pm_context *ctx = nullptr;
    uint32_t *buf = nullptr; /* pairs, context memory */
    size_t cap = 0;
};

/* Builds m's BVH on pm's context; with runs > 0, a warm-up build and the
 * median of `runs` timed builds go to *ms. */
pm_bvh *bvh_build(Pm &pm, const Mesh &m, int runs, double *ms)
{
    pm_mesh pmm = m.as_pm();
    pm_bvh *b = nullptr;
    std::vector<double> t;
    for (int r = 0; r <= runs; r++) {
        pm_bvh_destroy(pm.ctx, b);
        double t0 = now_ms();
        pm_status s = pm_bvh_build(pm.ctx, &pmm, nullptr, &b);
        if (s == PM_STATUS_OK) s = pm_context_synchronize(pm.ctx);
        if (s != PM_STATUS_OK) pmb::die("pm_bvh_build", s);
        if (r) t.push_back(now_ms() - t0);
    }
    if (runs) {
        std::sort(t.begin(), t.end());
        *ms = t[t.size() / 2];
    }
    return b;
}

/* pm_collide into the context's pair buffer (grown when too small). */
size_t collide(Pm &pm, const pm_bvh *a, const pm_bvh *b, const double *xf)
{
    size_t n = 0;
    pm_status s = pm_collide(pm.ctx, a, b, xf, nullptr, pm.buf, pm.cap, &n);
    if (s == PM_STATUS_TRUNCATED) {
        pm_free(pm.ctx, pm.buf);
        pm.cap = n + n / 4;
        if ((s = pm_alloc(pm.ctx, 2 * pm.cap * sizeof(uint32_t), (void **)&pm.buf)) != 0)
            pmb::die("pm_alloc", s);
        s = pm_collide(pm.ctx, a, b, xf, nullptr, pm.buf, pm.cap, &n);
    }
    if (s != PM_STATUS_OK) pmb::die("pm_collide", s);
    return n;
}

Pairs download(Pm &pm, size_t n)
{
    std::vector<uint32_t> h(2 * n + 2);
    pm_status s = pm_download(pm.ctx, h.data(), pm.buf, 2 * n * sizeof(uint32_t));
    if (s != PM_STATUS_OK) pmb::die("pm_download", s);
    return pmb::to_keys(h.data(), n);
}

/* ---- FCL ------------------------------------------------------------------ */

std::shared_ptr<Model> fcl_model(const Mesh &m, int runs, double *ms)
{
    std::vector<fcl::Vector3d> v(m.nv());
    for (size_t i = 0; i < m.nv(); i++)
        v[i] = fcl::Vector3d(m.pos[3 * i], m.pos[3 * i + 1], m.pos[3 * i + 2]);
    std::vector<fcl::Triangle> t(m.nt());
    for (size_t i = 0; i < m.nt(); i++)
        t[i] = fcl::Triangle(m.vert(i, 0), m.vert(i, 1), m.vert(i, 2));
    std::shared_ptr<Model> model;
    std::vector<double> tm;
    for (int r = 0; r <= runs; r++) {
        double t0 = now_ms();
        model = std::make_shared<Model>();
        model->beginModel((int)t.size(), (int)v.size());
        model->addSubModel(v, t);
        model->endModel();
        if (r) tm.push_back(now_ms() - t0);
    }
    if (runs) {
        std::sort(tm.begin(), tm.end());
        *ms = tm[tm.size() / 2];
    }
    return model;
}

fcl::Transform3d fcl_xf(const double *m)
{
    fcl::Transform3d x = fcl::Transform3d::Identity();
    if (!m) return x;
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++)
            x.linear()(r, c) = m[4 * r + c];
        x.translation()(r) = m[4 * r + 3];
    }
    return x;
}

/* fcl::collide keeping every contact, without contact geometry. */
void fcl_collide(const fcl::CollisionObjectd &o1, const fcl::CollisionObjectd &o2,
                 fcl::CollisionResultd &res)
{
    fcl::CollisionRequestd req((size_t)1 << 40, false);
    res.clear();
    fcl::collide(&o1, &o2, req, res);
}

/* The contacts as pairs (b1 of o1, b2 of o2), sorted; outside the timing. */
Pairs fcl_pairs(fcl::CollisionResultd &res)
{
    std::vector<fcl::Contactd> c;
    res.getContacts(c);
    Pairs p(c.size());
    for (size_t i = 0; i < c.size(); i++)
        p[i] = ((uint64_t)c[i].b1 << 32) | (uint64_t)c[i].b2;
    std::sort(p.begin(), p.end());
    return p;
}

/* ---- results ---------------------------------------------------------------- */

struct Result {
    std::string name;
    size_t ta = 0, tb = 0, pairs = 0, frames = 0;
    double ms[4] = {-1, -1, -1, -1};       /* pyramesh cpu, cuda, fcl, cgal */
    double build[3] = {-1, -1, -1};        /* per BVH: pyramesh cpu, cuda, fcl */
    long cgal_equal = -1, cuda_equal = -1; /* -1: not checked */
    size_t fcl_pairs = 0, fcl_missing = 0, fcl_extra = 0;
    std::string note;
};
const char *const col[4] = {"pyramesh_cpu", "pyramesh_cuda", "fcl", "cgal"};

std::string num(double v, int prec = 1)
{
    if (v < 0) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", prec, v);
    return b;
}

void print_json(const Result &r, int threads)
{
    std::printf("{\"case\":\"%s\",\"triangles_a\":%zu,\"triangles_b\":%zu,\"pairs\":%zu,",
                r.name.c_str(), r.ta, r.tb, r.pairs);
    if (r.frames) std::printf("\"frames\":%zu,", r.frames);
    std::printf("\"threads\":%d,\"ms\":{", threads);
    for (int k = 0; k < 4; k++)
        std::printf("%s\"%s\":%s", k ? "," : "", col[k], num(r.ms[k], 2).c_str());
    std::printf("},\"bvh_build_ms\":{\"pyramesh_cpu\":%s,\"pyramesh_cuda\":%s,\"fcl\":%s},",
                num(r.build[0], 2).c_str(), num(r.build[1], 2).c_str(), num(r.build[2], 2).c_str());
    auto ratio = [&](int x, int y) {
        return r.ms[x] > 0 && r.ms[y] > 0 ? num(r.ms[x] / r.ms[y], 2) : std::string("null");
    };
    std::printf("\"ratios\":{\"fcl_over_cpu\":%s,\"cgal_over_cpu\":%s,\"fcl_over_cuda\":%s,"
                "\"cgal_over_cuda\":%s},",
                ratio(2, 0).c_str(), ratio(3, 0).c_str(), ratio(2, 1).c_str(), ratio(3, 1).c_str());
    if (r.frames && r.ms[0] > 0)
        std::printf("\"frames_per_s\":{\"pyramesh_cpu\":%s,\"pyramesh_cuda\":%s,\"fcl\":%s,"
                    "\"cgal\":%s},",
                    num(1000.0 * r.frames / r.ms[0]).c_str(),
                    r.ms[1] > 0 ? num(1000.0 * r.frames / r.ms[1]).c_str() : "null",
                    num(1000.0 * r.frames / r.ms[2]).c_str(),
                    r.ms[3] > 0 ? num(1000.0 * r.frames / r.ms[3]).c_str() : "null");
    auto tri = [](long v) { return v < 0 ? "null" : v ? "true" : "false"; };
    std::printf("\"equal_cgal\":%s,\"equal_cuda_cpu\":%s,\"fcl_pairs\":%zu,\"fcl_missing\":%zu,"
                "\"fcl_extra\":%zu,\"note\":\"%s\"}\n",
                tri(r.cgal_equal), tri(r.cuda_equal), r.fcl_pairs, r.fcl_missing, r.fcl_extra,
                r.note.c_str());
    std::fflush(stdout);
}

void print_table(const std::vector<Result> &rs)
{
    std::printf("\n%-16s %8s %8s %9s | %9s %9s %9s %9s | %8s %8s %8s | %s\n", "case", "tris A",
                "tris B", "pairs", "pm-cpu", "pm-cuda", "fcl", "cgal", "fcl/cpu", "cgal/cpu",
                "fcl/cuda", "check");
    for (const Result &r : rs) {
        auto ms = [&](int k) { return r.ms[k] < 0 ? std::string("-") : num(r.ms[k]); };
        auto ratio = [&](int x, int y) {
            return r.ms[x] > 0 && r.ms[y] > 0 ? num(r.ms[x] / r.ms[y], 2) : std::string("-");
        };
        char check[160];
        std::snprintf(check, sizeof check, "cgal %s, fcl %zu (-%zu +%zu)",
                      r.cgal_equal < 0 ? "n/a"
                      : r.cgal_equal   ? "equal"
                                       : "DIFFERS",
                      r.fcl_pairs, r.fcl_missing, r.fcl_extra);
        std::printf("%-16s %8zu %8zu %9zu | %9s %9s %9s %9s | %8s %8s %8s | %s\n", r.name.c_str(),
                    r.ta, r.tb, r.pairs, ms(0).c_str(), ms(1).c_str(), ms(2).c_str(), ms(3).c_str(),
                    ratio(2, 0).c_str(), ratio(3, 0).c_str(), ratio(2, 1).c_str(), check);
    }
    std::printf("\nBVH builds (ms per mesh): ");
    for (const Result &r : rs)
        std::printf("%s: cpu %s, cuda %s, fcl %s; ", r.name.c_str(), num(r.build[0]).c_str(),
                    num(r.build[1]).c_str(), num(r.build[2]).c_str());
    std::printf("\n(times in ms, median; the frames case: all frames together)\n");
}

/* ---- the cases ---------------------------------------------------------------- */

struct Bench {
    Options o;
    Pm cpu, cuda;
    bool have_cuda = false;
    std::vector<Result> results;

    void finish(Result &r)
    {
        std::printf("# %s: %zu pairs; fcl %zu (missing %zu, extra %zu); cgal %s%s%s\n",
                    r.name.c_str(), r.pairs, r.fcl_pairs, r.fcl_missing, r.fcl_extra,
                    r.cgal_equal < 0 ? "not run"
                    : r.cgal_equal   ? "equal"
                                     : "DIFFERS",
                    r.note.empty() ? "" : "; ", r.note.c_str());
        print_json(r, o.threads);
        results.push_back(r);
    }

    void fcl_diff(Result &r, const Pairs &ours, const Pairs &f)
    {
        r.fcl_pairs = f.size();
        r.fcl_missing = pmb::missing_from(ours, f);
        r.fcl_extra = pmb::missing_from(f, ours);
    }

    /* A against a copy of itself moved by xf. */
    void overlap(const char *name, const Mesh &m, const double *xf)
    {
        Result r;
        r.name = name;
        r.ta = r.tb = m.nt();
        pm_bvh *a = bvh_build(cpu, m, o.runs, &r.build[0]), *b = bvh_build(cpu, m, 0, &r.build[0]);
        Pairs ours;
        r.ms[0] = median_ms(o.runs, [&] { r.pairs = collide(cpu, a, b, xf); });
        ours = download(cpu, r.pairs);
        if (have_cuda) {
            pm_bvh *ca = bvh_build(cuda, m, o.runs, &r.build[1]),
                   *cb = bvh_build(cuda, m, 0, &r.build[1]);
            size_t n = 0;
            r.ms[1] = median_ms(o.runs, [&] { n = collide(cuda, ca, cb, xf); });
            r.cuda_equal = download(cuda, n) == ours;
            pm_bvh_destroy(cuda.ctx, cb);
            pm_bvh_destroy(cuda.ctx, ca);
        }
        pm_bvh_destroy(cpu.ctx, b);
        pm_bvh_destroy(cpu.ctx, a);

        auto model = fcl_model(m, o.runs, &r.build[2]);
        fcl::CollisionObjectd oa(model, fcl_xf(nullptr)), ob(model, fcl_xf(xf));
        fcl::CollisionResultd res;
        r.ms[2] = median_ms(o.runs, [&] { fcl_collide(oa, ob, res); });
        fcl_diff(r, ours, fcl_pairs(res));

        if (o.cgal) {
            Pairs c;
            r.ms[3] = median_ms(o.runs, [&] { c = pmb::cgal_pairs(m, m, xf, false); });
            std::sort(c.begin(), c.end());
            r.cgal_equal = c == ours;
        }
        finish(r);
    }

    /* The mesh with itself. */
    void self(const char *name, const Mesh &m)
    {
        Result r;
        r.name = name;
        r.ta = r.tb = m.nt();
        pm_bvh *a = bvh_build(cpu, m, o.runs, &r.build[0]);
        r.ms[0] = median_ms(o.runs, [&] { r.pairs = collide(cpu, a, a, nullptr); });
        Pairs ours = download(cpu, r.pairs);
        if (have_cuda) {
            pm_bvh *ca = bvh_build(cuda, m, o.runs, &r.build[1]);
            size_t n = 0;
            r.ms[1] = median_ms(o.runs, [&] { n = collide(cuda, ca, ca, nullptr); });
            r.cuda_equal = download(cuda, n) == ours;
            pm_bvh_destroy(cuda.ctx, ca);
        }
        pm_bvh_destroy(cpu.ctx, a);

        auto model = fcl_model(m, o.runs, &r.build[2]);
        fcl::CollisionObjectd oa(model, fcl_xf(nullptr)), ob(model, fcl_xf(nullptr));
        fcl::CollisionResultd res;
        r.ms[2] = median_ms(o.runs, [&] { fcl_collide(oa, ob, res); });
        fcl_diff(r, ours, pmb::self_rule(m, fcl_pairs(res)));
        r.note = "fcl has no self mode: mesh against itself (" + std::to_string(res.numContacts()) +
                 " contacts), then a<b sharing no vertex";

        if (o.cgal) {
            Pairs c;
            size_t folds = 0, degenerate = 0;
            bool ok = true;
            r.ms[3] =
                median_ms(o.runs, [&] { ok = pmb::cgal_self_pairs(m, &c, &folds, &degenerate); });
            if (!ok) {
                r.note += "; cgal: not a valid halfedge mesh";
            } else {
                /* The documented differences (docs/collide.md): CGAL reports
                 * neighbours touching beyond their shared vertex, and skips
                 * degenerate faces, which pm_collide tests as segments. */
                Pairs cn, on;
                for (uint64_t k : c)
                    if (!pmb::shares_vertex(m, (uint32_t)(k >> 32), (uint32_t)k)) cn.push_back(k);
                std::vector<char> deg(m.nt(), 0);
                if (degenerate) {
                    auto t = pmb::cgal_tris(m, m.pos);
                    for (size_t i = 0; i < m.nt(); i++)
                        deg[i] = t[i].kind != 0;
                }
                for (uint64_t k : ours)
                    if (!deg[k >> 32] && !deg[(uint32_t)k]) on.push_back(k);
                r.cgal_equal = cn == on;
                r.note += "; cgal " + std::to_string(c.size()) + " pairs, " +
                          std::to_string(folds) + " of them neighbours, " +
                          std::to_string(degenerate) + " degenerate faces skipped; compared " +
                          "without those and without pyramesh's pairs of degenerate faces (" +
                          std::to_string(ours.size() - on.size()) + ")";
            }
        }
        finish(r);
    }

    /* A sphere (20 * 4^level triangles) moved through the surface over
     * o.frames frames. */
    void frames(const char *name, const Mesh &m, int level, const pmb::Scene &sc)
    {
        /* Along x through the top of the block, half under the surface. */
        double width = (double)(sc.m - 1) * sc.s, top = (double)(2 * sc.m - 1) * sc.s;
        double rad = 0.3 * width;
        Mesh sphere = pmb::icosphere(level, rad);
        Result r;
        r.name = name;
        r.ta = m.nt();
        r.tb = sphere.nt();
        r.frames = (size_t)o.frames;
        std::vector<double> xf(12 * r.frames);
        for (size_t f = 0; f < r.frames; f++) {
            double u = r.frames > 1 ? (double)f / (double)(r.frames - 1) : 0.5;
            pmb::translation(-0.5 * rad + u * (width + rad), 0.5 * width, top, &xf[12 * f]);
        }
        std::vector<Pairs> ours(r.frames);
        pm_bvh *a = bvh_build(cpu, m, o.runs, &r.build[0]),
               *b = bvh_build(cpu, sphere, 0, &r.build[0]);
        for (size_t f = 0; f < r.frames; f++) {
            size_t n = collide(cpu, a, b, &xf[12 * f]);
            ours[f] = download(cpu, n);
            r.pairs += n;
        }
        r.ms[0] = median_ms(o.runs, [&] {
            for (size_t f = 0; f < r.frames; f++)
                collide(cpu, a, b, &xf[12 * f]);
        });
        if (have_cuda) {
            pm_bvh *ca = bvh_build(cuda, m, o.runs, &r.build[1]),
                   *cb = bvh_build(cuda, sphere, 0, &r.build[1]);
            r.cuda_equal = 1;
            for (size_t f = 0; f < r.frames; f++)
                r.cuda_equal &= download(cuda, collide(cuda, ca, cb, &xf[12 * f])) == ours[f];
            r.ms[1] = median_ms(o.runs, [&] {
                for (size_t f = 0; f < r.frames; f++)
                    collide(cuda, ca, cb, &xf[12 * f]);
            });
            pm_bvh_destroy(cuda.ctx, cb);
            pm_bvh_destroy(cuda.ctx, ca);
        }
        pm_bvh_destroy(cpu.ctx, b);
        pm_bvh_destroy(cpu.ctx, a);

        double bms = 0;
        auto ma = fcl_model(m, o.runs, &r.build[2]), mb = fcl_model(sphere, 0, &bms);
        fcl::CollisionObjectd oa(ma, fcl_xf(nullptr)), ob(mb, fcl_xf(nullptr));
        std::vector<fcl::CollisionResultd> res(r.frames);
        r.ms[2] = median_ms(o.runs, [&] {
            for (size_t f = 0; f < r.frames; f++) {
                ob.setTransform(fcl_xf(&xf[12 * f]));
                ob.computeAABB();
                fcl_collide(oa, ob, res[f]);
            }
        });
        std::vector<Pairs> fp(r.frames);
        for (size_t f = 0; f < r.frames; f++)
            fp[f] = fcl_pairs(res[f]);
        for (size_t f = 0; f < r.frames; f++) {
            r.fcl_pairs += fp[f].size();
            r.fcl_missing += pmb::missing_from(ours[f], fp[f]);
            r.fcl_extra += pmb::missing_from(fp[f], ours[f]);
        }

        if (o.cgal) {
            /* CGAL keeps nothing between calls: per frame, the moved
             * sphere's vertices, boxes and triangles, then the search. A's
             * boxes and triangles are made once. */
            std::vector<pmb::Box> ba = pmb::cgal_boxes(m, m.pos);
            std::vector<pmb::Tri> ta = pmb::cgal_tris(m, m.pos);
            std::vector<Pairs> cp(r.frames);
            r.ms[3] = median_ms(o.runs, [&] {
                for (size_t f = 0; f < r.frames; f++) {
                    std::vector<float> p = pmb::map_vertices(sphere.pos, &xf[12 * f]);
                    std::vector<pmb::Box> bb = pmb::cgal_boxes(sphere, p);
                    cp[f] = pmb::cgal_pairs(ba, ta, bb, pmb::cgal_tris(sphere, p), false);
                }
            });
            for (Pairs &p : cp)
                std::sort(p.begin(), p.end());
            r.cgal_equal = cp == ours;
        }
        char note[96];
        std::snprintf(note, sizeof note, "sphere radius %.3f along x at z %.3f; pairs summed", rad,
                      top);
        r.note = note;
        finish(r);
    }
};

pm_context *make_context(pm_device dev, int threads)
{
    pm_context_desc d;
    std::memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.device = dev;
    d.num_threads = threads;
    pm_context *ctx = nullptr;
    if (pm_context_create(&d, &ctx) != PM_STATUS_OK) return nullptr;
    return ctx;
}

int usage()
{
    std::fprintf(stderr, "usage: bench_collide [--threads N] [--sizes small|full] [--runs R] "
                         "[--frames F] [--no-cgal] [--only SUBSTRING]\n");
    return 2;
}

} // namespace

int main(int argc, char **argv)
{
    Bench B;
    Options &o = B.o;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--no-cgal") {
            o.cgal = false;
            continue;
        }
        if (!v) return usage();
        if (a == "--threads")
            o.threads = std::atoi(v);
        else if (a == "--runs")
            o.runs = std::atoi(v);
        else if (a == "--frames")
            o.frames = std::atoi(v);
        else if (a == "--only")
            o.only = v;
        else if (a == "--sizes" && (!std::strcmp(v, "small") || !std::strcmp(v, "full")))
            o.full = !std::strcmp(v, "full");
        else
            return usage();
        i++;
    }
    if (o.threads < 1 || o.runs < 1 || o.frames < 1) return usage();

    B.cpu.ctx = make_context(PM_DEVICE_CPU, o.threads);
    if (!B.cpu.ctx) pmb::die("CPU context", PM_STATUS_DEVICE_ERROR);
    if (pm_cuda_available()) B.cuda.ctx = make_context(PM_DEVICE_CUDA, 0);
    B.have_cuda = B.cuda.ctx != nullptr;
    std::printf("# bench_collide: pyramesh %s (%s), cpu %d threads%s%s; FCL %s; CGAL %s; runs %d "
                "(median after a warm-up), sizes %s\n",
                PM_VERSION_STRING, pm_build_info(), o.threads,
                B.have_cuda ? ", cuda: " : ", no cuda",
                B.have_cuda ? pm_context_device_name(B.cuda.ctx) : "", FCL_VERSION,
                CGAL_VERSION_STR, o.runs, o.full ? "full" : "small");

    /* The surfaces: (particles, grid cell in multiples of r) picked for
     * about 1e5 and 1e6 triangles (full) or 2e4 and 1e5 (small). */
    struct Size {
        const char *tag;
        size_t particles;
        double cube;
    };
    const Size sizes[2] = {o.full ? Size{"1e5", 220000, 1.5} : Size{"2e4", 20000, 1.5},
                           o.full ? Size{"1e6", 1000000, 0.8} : Size{"1e5", 220000, 1.5}};
    double shift[12];
    pmb::translation(0.05, 0.0, 0.0, shift);
    auto want = [&](const std::string &name) {
        return o.only.empty() || name.find(o.only) != std::string::npos;
    };
    for (int k = 0; k < 2; k++) {
        std::string tag = sizes[k].tag;
        if (!want("overlap-" + tag) && !want("self-" + tag) && !(k == 0 && want("frames-" + tag)))
            continue;
        double t0 = now_ms();
        pmb::Scene sc = pmb::dam_break(sizes[k].particles);
        Mesh m = pmb::reconstruct(B.cpu.ctx, sc.xyz, sizes[k].cube);
        std::printf("# surface %s: %zu particles, c = %g: %zu triangles, %zu vertices (%.0f ms)\n",
                    sizes[k].tag, sc.xyz.size() / 3, sizes[k].cube, m.nt(), m.nv(), now_ms() - t0);
        if (want("overlap-" + tag)) B.overlap(("overlap-" + tag).c_str(), m, shift);
        if (want("self-" + tag)) B.self(("self-" + tag).c_str(), m);
        if (k == 0 && want("frames-" + tag))
            B.frames(("frames-" + tag).c_str(), m, o.full ? 6 : 5, sc);
    }
    print_table(B.results);
    pm_free(B.cpu.ctx, B.cpu.buf);
    if (B.have_cuda) pm_free(B.cuda.ctx, B.cuda.buf);
    pm_context_destroy(B.cuda.ctx);
    pm_context_destroy(B.cpu.ctx);
    return 0;
}
