/* GPU marching cubes benchmark: the cayley field of ANCHORS.md (the HP5
 * test field) at N = 128..1024, iso 0, central normals (PM_BENCH_NORMALS:
 * central, forward, sobel or none), positions and normals written to
 * caller buffers in device memory. Per size and mode:
 * median of 30 extractions timed with CUDA events on the context's stream
 * (the whole pm_isosurface call, the count read-back included; "async":
 * the whole pm_isosurface_async call, no host wait, its mesh checked
 * byte for byte against pm_isosurface's; "async host ms": the host's time
 * inside that call, the GPU still working when it returns), the stages of
 * a timed call (pm_isosurface_report: pass 1 "classify", the count
 * "readback" with the mesh's allocation, pass 2 "expand"), the floor (read
 * the field once + write the mesh once at the device-copy bandwidth
 * measured in this run), and the ratios to HP5's blocking (sync) and
 * dynamic-parallelism (async) medians from the peers' run in the same
 * device call (PM_BENCH_HP5=file: the output of ../shared/peers/gpu/run.sh;
 * bench/gpu_side_by_side.sh runs both). N <= checkN (128) is checked byte for
 * byte against the CPU backend. Rows per size: the default paths
 * ("default", twice, the second as a noise check) and, in a build with
 * test hooks, the fallbacks that PYRAMESH_TEST_HOOKS forces (PM_BENCH_HOOKS
 * lists them, default "nopdl"; "none" for none); the path
 * column is the hook, the "pass 1" column the report's pass1 (and
 * classify) words. At the end, a table of measured floors: floor_kernel
 * reads each default row's volume once and writes its mesh's bytes, with
 * nothing computed, against the computed floor and the async time; then
 * each u8/u16 default row against the f32 async time of its size and mode
 * scaled by the bytes read + written of each (issue 23 item 3).
 * Usage: bench_cuda_isosurface [maxN [checkN [N,N,...]]] (the list picks sizes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "bench/bench_cuda.h"
#include "pyramesh.h"

/* PM_BENCH_NORMALS: central (default), forward, sobel or none. */
static pm_normals bench_normals = PM_NORMALS_CENTRAL;

/* The field in double, rounded once to the sample type (u8/u16: the range
 * [-27, 17] of the cayley cubic mapped linearly onto the type's range). */
template <typename T>
__global__ void cayley_kernel(T *out, long long n, double scale, double offset)
{
    long long total = n * n * n;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        long long i = p % n, j = (p / n) % n, k = p / (n * n);
        double x = 2.0 * (double)i / (double)(n - 1) - 1.0,
               y = 2.0 * (double)j / (double)(n - 1) - 1.0,
               z = 2.0 * (double)k / (double)(n - 1) - 1.0;
        double v = 1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z);
        out[p] = (T)(scale == 0.0 ? v : rint((v + offset) * scale));
    }
}

/* HP5's medians from the peers' run in the same device call
 * (../shared/peers/gpu/run.sh, its output file named by PM_BENCH_HP5):
 * rows "| N | soup|indexed | blocking|dynpar | vertices | indices | median
 * | min | max |". Nothing is hard-coded: without the file the columns say
 * "-". */
struct hp5_row {
    int n, indexed, dynpar;
    double ms;
};
static std::vector<hp5_row> hp5_rows;

static void hp5_load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "PM_BENCH_HP5: cannot open %s\n", path);
        exit(1);
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        int n;
        char mode[16], ext[16];
        unsigned nv, ni;
        double med;
        if (sscanf(line, " | %d | %15s | %15s | %u | %u | %lf |", &n, mode, ext, &nv, &ni, &med) ==
            6)
            hp5_rows.push_back({n, strcmp(mode, "indexed") == 0, strcmp(ext, "dynpar") == 0, med});
    }
    fclose(f);
    printf("HP5 figures: %zu rows from %s (same device call)\n", hp5_rows.size(), path);
}

static double hp5(int n, int indexed, int dynpar)
{
    for (const hp5_row &r : hp5_rows)
        if (r.n == n && r.indexed == indexed && r.dynpar == dynpar) return r.ms;
    return 0;
}

static std::vector<std::string> floors; /* rows of the measured floors' table */
/* The default rows' traffic and async time, for the table of u8/u16
 * against the f32 time scaled by bytes (issue 23 item 3). */
struct scaled_row {
    int n, mode;
    pm_sample_type type;
    double read, written, async_ms;
};
static std::vector<scaled_row> scaled_rows;

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* Median D2D copy time of `bytes` (read + write = 2 * bytes of traffic). */
static double copy_gbs(size_t bytes, cudaStream_t s)
{
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<double> t;
    for (int r = 0; r < 12; r++) {
        cudaEventRecord(e0, s);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 2) t.push_back(ms);
    }
    cudaFree(a);
    cudaFree(b);
    return 2.0 * (double)bytes / (median(t) * 1e6);
}

/* The measured floor: one kernel that reads `in` once (16-byte loads, four
 * in flight per thread) and then writes `ob` bytes, as an extraction must
 * at least; the best median over a few grid sizes. */
__global__ void floor_kernel(const uint4 *in, size_t n16, uint4 *out, size_t o16, unsigned *sink)
{
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x,
                 st = gridDim.x * (size_t)blockDim.x;
    unsigned acc = 0;
    size_t i = t;
    for (; i + 3 * st < n16; i += 4 * st) {
        const uint4 a = __ldg(in + i), b = __ldg(in + i + st), c = __ldg(in + i + 2 * st),
                    d = __ldg(in + i + 3 * st);
        acc ^= a.x ^ b.y ^ c.z ^ d.w;
    }
    for (; i < n16; i += st)
        acc ^= __ldg(in + i).x;
    for (size_t j = t; j < o16; j += st)
        out[j] = make_uint4(acc, (unsigned)j, 0u, 0u);
    if (acc == 0x9e3779b9u) *sink = acc;
}

static double measured_floor_ms(const void *in, size_t bytes, size_t ob, cudaStream_t s)
{
    uint4 *out;
    unsigned *sink;
    CK(cudaMalloc(&out, ob + 16));
    CK(cudaMalloc(&sink, 4));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    int nsm = 0;
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0);
    double best = 1e30;
    for (int bps = 2; bps <= 16; bps *= 2) {
        std::vector<double> t;
        for (int r = 0; r < 33; r++) {
            cudaEventRecord(e0, s);
            floor_kernel<<<nsm * bps, 256, 0, s>>>((const uint4 *)in, bytes / 16, out, ob / 16,
                                                   sink);
            cudaEventRecord(e1, s);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            if (r >= 3) t.push_back(ms);
        }
        best = std::min(best, median(t));
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(out);
    cudaFree(sink);
    return best;
}

static void compare_cpu(pm_context *gpu, const pm_volume *dv, double iso, size_t bytes, int mode)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *cpu;
    PK(pm_context_create(&d, &cpu));
    pm_volume hv = *dv;
    void *h = malloc(bytes);
    PK(pm_download(gpu, h, dv->data, bytes));
    hv.data = h;
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.mode = (pm_mesh_mode)mode;
    o.normals = bench_normals;
    pm_mesh a, b;
    PK(pm_isosurface(cpu, &hv, iso, &o, &a));
    PK(pm_isosurface(gpu, dv, iso, &o, &b));
    int same = a.num_vertices == b.num_vertices && a.num_triangles == b.num_triangles &&
               !memcmp(a.positions, b.positions, 12 * a.num_vertices) &&
               !memcmp(a.normals, b.normals, 12 * a.num_vertices) &&
               (!a.indices || !memcmp(a.indices, b.indices, 12 * a.num_triangles));
    if (!same && a.num_triangles && b.num_triangles) {
        size_t nv = a.num_vertices < b.num_vertices ? a.num_vertices : b.num_vertices, f = 0;
        while (f < nv && !memcmp(a.positions + 3 * f, b.positions + 3 * f, 12))
            f++;
        if (f < nv)
            printf("first differing vertex %zu: cpu (%g %g %g) gpu (%g %g %g)\n", f,
                   a.positions[3 * f], a.positions[3 * f + 1], a.positions[3 * f + 2],
                   b.positions[3 * f], b.positions[3 * f + 1], b.positions[3 * f + 2]);
        printf("cpu %zu/%zu gpu %zu/%zu active %llu/%llu\n", a.num_vertices, a.num_triangles,
               b.num_vertices, b.num_triangles, (unsigned long long)a.active_cells,
               (unsigned long long)b.active_cells);
    }
    printf("check N=%zu %s %s: GPU mesh %s the CPU mesh (%zu vertices, %zu triangles)\n", dv->nx,
           pm_sample_type_string(dv->type), mode ? "soup" : "indexed",
           same ? "is byte-identical to" : "DIFFERS from", b.num_vertices, b.num_triangles);
    pm_mesh_free(cpu, &a);
    pm_mesh_free(gpu, &b);
    pm_context_destroy(cpu);
    free(h);
}

static int check_n = 128;
/* PM_BENCH_QUICK set: one call per row and no timing (for ncu), f32 only. */
static int quick;
static int async_differs;

/* The word `key`=... of a report's path (its value, up to the next space),
 * or "-". */
static std::string path_word(const pm_isosurface_report &r, const char *key)
{
    const std::string p = r.path, k = std::string(key) + "=";
    size_t at = p.find(k);
    if (at == std::string::npos || (at > 0 && p[at - 1] != ' ')) return "-";
    at += k.size();
    return p.substr(at, p.find(' ', at) - at);
}

/* Calls for at least 20 ms before a row's timed calls: the first row of
 * a process otherwise met a GPU still at idle clocks (an H200 whose first
 * 128^3 soup took 0.121 ms a synchronous call against 0.028 in the same
 * row's repeat; HP5's driver warms up too), and the CPU check before
 * each row of N <= checkN idles the GPU. */
static void warm_up(pm_context *ctx, const pm_volume *v, double iso, const pm_isosurface_options *o,
                    cudaStream_t s)
{
    pm_mesh m;
    const auto t0 = std::chrono::steady_clock::now();
    do {
        PK(pm_isosurface(ctx, v, iso, o, &m));
        CK(cudaStreamSynchronize(s));
    } while (
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() <
        20.0);
}

/* hook: the PYRAMESH_TEST_HOOKS value of the row, NULL for the default
 * paths. */
static void run(pm_context *ctx, cudaStream_t s, int n, pm_sample_type type, int mode, double gbs,
                const char *hook)
{
    if (hook)
        setenv("PYRAMESH_TEST_HOOKS", hook, 1);
    else
        unsetenv("PYRAMESH_TEST_HOOKS");
    size_t es = pm_sample_size(type), cells = (size_t)n * n * n, bytes = es * cells;
    void *vol;
    CK(cudaMalloc(&vol, bytes));
    if (type == PM_SAMPLE_F32)
        cayley_kernel<float><<<4096, 256, 0, s>>>((float *)vol, n, 0.0, 0.0);
    else if (type == PM_SAMPLE_U16)
        cayley_kernel<uint16_t><<<4096, 256, 0, s>>>((uint16_t *)vol, n, 65535.0 / 44.0, 27.0);
    else
        cayley_kernel<uint8_t><<<4096, 256, 0, s>>>((uint8_t *)vol, n, 255.0 / 44.0, 27.0);
    CK(cudaStreamSynchronize(s));
    double iso = type == PM_SAMPLE_F32
                     ? 0.0
                     : (type == PM_SAMPLE_U16 ? 27.0 * 65535.0 / 44.0 : 27.0 * 255.0 / 44.0);
    pm_volume v = {vol, type, (size_t)n, (size_t)n, (size_t)n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    if (n <= check_n) compare_cpu(ctx, &v, iso, bytes, mode);

    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.mode = (pm_mesh_mode)mode;
    o.normals = bench_normals;
    o.output_in_context_memory = 1;
    pm_mesh m;
    PK(pm_isosurface(ctx, &v, iso, &o, &m));
    size_t nv = m.num_vertices, nt = m.num_triangles;
    pm_mesh_free(ctx, &m);
    if (quick) {
        cudaFree(vol);
        return;
    }
    float *pos, *nrm;
    uint32_t *idx = NULL;
    CK(cudaMalloc(&pos, 12 * nv + 16));
    CK(cudaMalloc(&nrm, 12 * nv + 16));
    if (mode == PM_MESH_INDEXED) CK(cudaMalloc(&idx, 12 * nt + 16));
    o.out_positions = pos;
    o.out_normals = nrm;
    o.out_indices = idx;
    o.vertex_capacity = nv;
    o.triangle_capacity = nt;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    std::vector<double> tt, t1, t2, t3;
    warm_up(ctx, &v, iso, &o, s);
    for (int r = 0; r < 33; r++) {
        cudaEventRecord(e0, s);
        PK(pm_isosurface(ctx, &v, iso, &o, &m));
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 3) tt.push_back(ms);
    }
    /* pm_isosurface_async into the same buffers (no host wait inside the
     * extraction): its mesh must be the synchronous call's, byte for byte. */
    std::vector<char> ref(24 * nv + 12 * nt), got(24 * nv + 12 * nt);
    CK(cudaMemcpy(ref.data(), pos, 12 * nv, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref.data() + 12 * nv, nrm, 12 * nv, cudaMemcpyDeviceToHost));
    if (idx) CK(cudaMemcpy(ref.data() + 24 * nv, idx, 12 * nt, cudaMemcpyDeviceToHost));
    CK(cudaMemset(pos, 0, 12 * nv));
    CK(cudaMemset(nrm, 0, 12 * nv));
    if (idx) CK(cudaMemset(idx, 0, 12 * nt));
    uint64_t *cnt;
    CK(cudaMalloc(&cnt, 4 * sizeof(uint64_t)));
    std::vector<double> ta, th;
    for (int r = 0; r < 33; r++) {
        cudaEventRecord(e0, s);
        const auto h0 = std::chrono::steady_clock::now();
        PK(pm_isosurface_async(ctx, &v, iso, &o, (pm_isosurface_counts *)cnt));
        const auto h1 = std::chrono::steady_clock::now();
        if (r >= 3) th.push_back(std::chrono::duration<double, std::milli>(h1 - h0).count());
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r >= 3) ta.push_back(ms);
    }
    uint64_t hc[4];
    CK(cudaMemcpy(hc, cnt, sizeof hc, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data(), pos, 12 * nv, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data() + 12 * nv, nrm, 12 * nv, cudaMemcpyDeviceToHost));
    if (idx) CK(cudaMemcpy(got.data() + 24 * nv, idx, 12 * nt, cudaMemcpyDeviceToHost));
    const int async_same = hc[0] == nv && hc[1] == nt && hc[3] == 0 && got == ref;
    if (!async_same) {
        printf("ASYNC MESH DIFFERS: N %d mode %d counts %llu/%llu flags %llu\n", n, mode,
               (unsigned long long)hc[0], (unsigned long long)hc[1], (unsigned long long)hc[3]);
        async_differs++;
    }
    cudaFree(cnt);
    const double async_host_ms = median(th); /* host time inside the call */
    /* The stages of timed calls (classify, readback, expand, copy). */
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep);
    rep.timed = 1;
    o.report = &rep;
    for (int r = 0; r < 11; r++) {
        PK(pm_isosurface(ctx, &v, iso, &o, &m));
        if (r >= 1) {
            t1.push_back(rep.stage_ms[0]);
            t2.push_back(rep.stage_ms[1]);
            t3.push_back(rep.stage_ms[2]);
        }
    }
    o.report = NULL;
    std::string pass1 = path_word(rep, "pass1");
    if (pass1 == "bitmask") pass1 += "/" + path_word(rep, "classify");
    double out_b = 24.0 * nv + (mode == PM_MESH_INDEXED ? 12.0 * nt : 0.0);
    double floor_ms = ((double)bytes + out_b) / (gbs * 1e6);
    const int f32 = type == PM_SAMPLE_F32;
    double med = median(tt), h = f32 ? hp5(n, mode == PM_MESH_INDEXED, 0) : 0;
    double hd = f32 ? hp5(n, mode == PM_MESH_INDEXED, 1) : 0;
    char hs[32] = "-";
    if (h > 0) snprintf(hs, sizeof hs, "%.3f (%.2fx)", h, med / h);
    const char *vs = hook ? hook : "default";
    const double mea = median(ta);
    char ha[32] = "-";
    if (hd > 0) snprintf(ha, sizeof ha, "%.3f (%.2fx)", hd, mea / hd);
    printf("| %4d | %-7s | %-7s | %-3s | %-15s | %10zu | %10zu | %8.3f | %8.3f | %7.3f | %7.3f | "
           "%7.3f | %7.3f | "
           "%5.2fx | %-15s | %-15s | %6.3f |\n",
           n, mode ? "soup" : "indexed", vs, pm_sample_type_string(type), pass1.c_str(), nv, nt,
           med, mea, median(t1), median(t2), median(t3), floor_ms, med / floor_ms, hs, ha,
           async_host_ms);
    fflush(stdout);
    if (!hook) {
        /* The measured floor of this extraction's traffic, for the table
         * printed at the end. */
        char line[256];
        const double mf = measured_floor_ms(vol, bytes, (size_t)out_b, s);
        snprintf(line, sizeof line,
                 "| %4d | %-7s | %-3s | %9.1f | %9.1f | %7.3f | %7.3f | %7.3f | %5.2fx |\n", n,
                 mode ? "soup" : "indexed", pm_sample_type_string(type), bytes / 1e6, out_b / 1e6,
                 floor_ms, mf, mea, mea / mf);
        floors.push_back(line);
        scaled_rows.push_back({n, mode, type, (double)bytes, out_b, mea});
    }
    cudaFree(pos);
    cudaFree(nrm);
    cudaFree(idx);
    cudaFree(vol);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

/* A mesh to host memory (issue 23's "the CLI gets the GPU's speed"): the
 * whole pm_isosurface call with the library allocating the mesh in host
 * memory, against the floor of moving its bytes: a cudaMemcpy of the same
 * bytes into pinned memory; and the plain pageable cudaMemcpy the library
 * used before its pinned staging, and pm_download into pageable memory. */
static void host_output(pm_context *ctx, cudaStream_t s, int n, int mode)
{
    const size_t bytes = (size_t)n * n * n * 4;
    float *vol;
    CK(cudaMalloc(&vol, bytes));
    cayley_kernel<float><<<4096, 256, 0, s>>>(vol, n, 0.0, 0.0);
    CK(cudaStreamSynchronize(s));
    pm_volume v = {vol, PM_SAMPLE_F32, (size_t)n, (size_t)n, (size_t)n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.mode = (pm_mesh_mode)mode;
    o.normals = bench_normals;
    std::vector<double> tc;
    size_t mb = 0;
    for (int r = 0; r < 11; r++) {
        pm_mesh m;
        const auto h0 = std::chrono::steady_clock::now();
        PK(pm_isosurface(ctx, &v, 0.0, &o, &m));
        const auto h1 = std::chrono::steady_clock::now();
        if (r) tc.push_back(std::chrono::duration<double, std::milli>(h1 - h0).count());
        mb = 24 * m.num_vertices + (mode == PM_MESH_INDEXED ? 12 * m.num_triangles : 0);
        pm_mesh_free(ctx, &m);
    }
    void *dsrc, *pin;
    CK(cudaMalloc(&dsrc, mb));
    CK(cudaMemset(dsrc, 1, mb));
    CK(cudaHostAlloc(&pin, mb, cudaHostAllocDefault));
    std::vector<double> tp, tg, td;
    for (int r = 0; r < 11; r++) {
        char *page = (char *)malloc(mb); /* fresh, as a new mesh is */
        auto h0 = std::chrono::steady_clock::now();
        CK(cudaMemcpy(pin, dsrc, mb, cudaMemcpyDeviceToHost));
        auto h1 = std::chrono::steady_clock::now();
        CK(cudaMemcpy(page, dsrc, mb, cudaMemcpyDeviceToHost));
        auto h2 = std::chrono::steady_clock::now();
        free(page);
        page = (char *)malloc(mb);
        auto h3 = std::chrono::steady_clock::now();
        PK(pm_download(ctx, page, dsrc, mb));
        auto h4 = std::chrono::steady_clock::now();
        free(page);
        if (r) {
            tp.push_back(std::chrono::duration<double, std::milli>(h1 - h0).count());
            tg.push_back(std::chrono::duration<double, std::milli>(h2 - h1).count());
            td.push_back(std::chrono::duration<double, std::milli>(h4 - h3).count());
        }
    }
    const double c = median(tc), p = median(tp);
    printf("| %4d | %-7s | %8.1f | %8.3f | %8.3f | %8.3f | %8.3f | %5.2fx |\n", n,
           mode ? "soup" : "indexed", mb / 1e6, c, p, median(tg), median(td), c / p);
    cudaFreeHost(pin);
    cudaFree(dsrc);
    cudaFree(vol);
}

int main(int argc, char **argv)
{
    int maxn = argc > 1 ? atoi(argv[1]) : 1024;
    if (argc > 2) check_n = atoi(argv[2]);
    quick = getenv("PM_BENCH_QUICK") != NULL;
    if (const char *nm = getenv("PM_BENCH_NORMALS")) {
        if (!strcmp(nm, "sobel"))
            bench_normals = PM_NORMALS_SOBEL;
        else if (!strcmp(nm, "forward"))
            bench_normals = PM_NORMALS_FORWARD;
        else if (!strcmp(nm, "none"))
            bench_normals = PM_NORMALS_NONE;
        else if (strcmp(nm, "central") != 0) {
            fprintf(stderr,
                    "PM_BENCH_NORMALS: expected central, forward, sobel or none, got \"%s\"\n", nm);
            return 2;
        }
    }
    if (getenv("PM_BENCH_HP5")) hp5_load(getenv("PM_BENCH_HP5"));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, (void *)s};
    pm_context *ctx;
    PK(pm_context_create(&d, &ctx));
    double gbs = copy_gbs((size_t)1 << 30, s);
    printf("device %s; device-to-device copy of 1 GiB: %.0f GB/s (read + write)\n",
           pm_context_device_name(ctx), gbs);
    printf("| N | mode | path | type | pass 1 | vertices | triangles | median ms | async ms | "
           "classify ms | "
           "readback ms | expand ms | floor ms | / floor | HP5 blocking ms (sync / HP5) | "
           "HP5 dynpar ms (async / HP5) | "
           "async host ms |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int ns[16] = {128, 256, 384, 512, 640, 768, 1024}, nn = 7;
    if (argc > 3) nn = bench_sizes(argv[3], ns, 16);
    /* PM_BENCH_HOOKS=h,h,...: the fallback rows (hook names of
     * PYRAMESH_TEST_HOOKS), "none" for none; PM_BENCH_F32=1: no u8/u16
     * rows (tuning runs). */
    const char *hl = getenv("PM_BENCH_HOOKS");
    std::vector<std::string> hooks;
    if (!hl) hl = "nopdl";
    if (strcmp(hl, "none") != 0)
        for (const char *p = hl; *p;) {
            const size_t len = strcspn(p, ",");
            if (len) hooks.push_back(std::string(p, len));
            p += len + (p[len] == ',');
        }
    const int f32_only = getenv("PM_BENCH_F32") != NULL;
    for (int q = 0; q < nn; q++) {
        if (ns[q] > maxn) break;
        /* The default paths, the fallbacks, the default again as a noise
         * check. */
        run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_SOUP, gbs, NULL);
        run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_INDEXED, gbs, NULL);
        if (!quick)
            for (const std::string &h : hooks) {
                run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_SOUP, gbs, h.c_str());
                run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_INDEXED, gbs, h.c_str());
            }
        if (!quick) {
            run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_SOUP, gbs, NULL);
            run(ctx, s, ns[q], PM_SAMPLE_F32, PM_MESH_INDEXED, gbs, NULL);
        }
        if (quick || f32_only) continue;
        /* u16 and u8 up to 768^3. */
        if (ns[q] <= 768)
            for (int mode = 1; mode >= 0; mode--) {
                run(ctx, s, ns[q], PM_SAMPLE_U16, mode, gbs, NULL);
                run(ctx, s, ns[q], PM_SAMPLE_U8, mode, gbs, NULL);
                for (const std::string &h : hooks) {
                    run(ctx, s, ns[q], PM_SAMPLE_U16, mode, gbs, h.c_str());
                    run(ctx, s, ns[q], PM_SAMPLE_U8, mode, gbs, h.c_str());
                }
            }
    }
    if (!floors.empty()) {
        printf("\nMeasured floors (floor_kernel: reads the volume once, then writes the mesh's "
               "bytes; best median "
               "of 30 over grids of 2-16 blocks per SM) against the computed floor (bytes at the "
               "copy bandwidth):\n");
        printf("| N | mode | type | MB read | MB written | computed floor ms | measured floor ms | "
               "async ms | async / "
               "measured floor |\n|---|---|---|---|---|---|---|---|---|\n");
        for (const std::string &l : floors)
            fputs(l.c_str(), stdout);
    }
    /* Each u8/u16 default row against the first f32 default row of its
     * size and mode, scaled by (bytes read + written) of each. */
    bool scaled_header = false;
    for (const scaled_row &r : scaled_rows) {
        if (r.type == PM_SAMPLE_F32) continue;
        const scaled_row *f = NULL;
        for (const scaled_row &q : scaled_rows)
            if (q.type == PM_SAMPLE_F32 && q.n == r.n && q.mode == r.mode) {
                f = &q;
                break;
            }
        if (!f) continue;
        if (!scaled_header) {
            printf("\nu8/u16 against the f32 async time of the same run scaled by bytes read + "
                   "written (issue 23 item 3: at most 1.00x):\n");
            printf(
                "| N | mode | type | MB read + written | f32 MB | f32 async ms | scaled f32 ms | "
                "async ms | async / scaled f32 |\n|---|---|---|---|---|---|---|---|---|\n");
            scaled_header = true;
        }
        const double sc = f->async_ms * (r.read + r.written) / (f->read + f->written);
        printf("| %4d | %-7s | %-3s | %9.1f | %9.1f | %7.3f | %7.3f | %7.3f | %5.2fx |\n", r.n,
               r.mode ? "soup" : "indexed", pm_sample_type_string(r.type),
               (r.read + r.written) / 1e6, (f->read + f->written) / 1e6, f->async_ms, sc,
               r.async_ms, r.async_ms / sc);
    }
    if (!quick) {
        printf("\nMeshes to host memory (pm_isosurface allocating the mesh in host memory, host "
               "wall time, median of 10) against a pinned cudaMemcpy of the mesh's bytes; a "
               "pageable cudaMemcpy and pm_download into fresh malloc'd memory:\n");
        printf("| N | mode | MB | pm_isosurface to host ms | pinned copy ms | pageable cudaMemcpy "
               "ms | pm_download ms | call / pinned |\n|---|---|---|---|---|---|---|---|\n");
        for (int q = 0; q < nn; q++)
            if (ns[q] <= maxn && (ns[q] == 256 || ns[q] == 512 || ns[q] == 768))
                for (int mode = 1; mode >= 0; mode--)
                    host_output(ctx, s, ns[q], mode);
    }
    pm_context_destroy(ctx);
    cudaStreamDestroy(s);
    if (async_differs)
        printf("%d pm_isosurface_async meshes differed from pm_isosurface\n", async_differs);
    return async_differs ? 1 : 0;
}
