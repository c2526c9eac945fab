// pyramesh's CUDA primitives beside CUB (from the CUDA toolkit) on the same
// buffers in one run: CUDA events, warm-up, median of >= 20 runs, fresh
// random data per case, L2 flushed before each run for inputs under 200 MB.
// Every case is checked (against CUB's output or a host reference) first.
// Usage: bench_cuda_primitives [--quick] [--only reduce,image,scan,filter,compact,expand]
//                              [--sizes 24,28] [--reps N] [--keeps 1,10,50]
// (--keeps: the filter's kept percentages at every size instead of the default set)
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "pyramesh.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define PK(x)                                                                                      \
    do {                                                                                           \
        pm_status s_ = (x);                                                                        \
        if (s_ != PM_STATUS_OK && s_ != PM_STATUS_TRUNCATED) {                                     \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #x, pm_status_string(s_),   \
                    pm_last_error());                                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static cudaStream_t g_stream;
static pm_context *g_ctx;
static void *g_flush;
static size_t g_flush_bytes;
static int g_reps = 25;
static int g_failures;
static unsigned long long *g_pinned; // CUB's host-visible results

static __device__ unsigned hash32(unsigned long long x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (unsigned)x;
}
static __global__ void fill_unit(float *p, size_t n, unsigned long long seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = (hash32(i ^ (seed << 40)) >> 8) * (1.0f / 16777216.0f);
}
static __global__ void fill_u32(unsigned *p, size_t n, unsigned long long seed, unsigned mod)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash32(i ^ (seed << 40)) % mod;
}
static __global__ void fill_flags(unsigned char *p, size_t n, unsigned long long seed,
                                  unsigned per1000)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = hash32(i ^ (seed << 40)) % 1000 < per1000 ? (unsigned char)(1 + (i & 7)) : 0;
}
static unsigned long long g_seed = 12345;

struct LessThan {
    float t;
    __host__ __device__ bool operator()(float x) const { return x < t; }
};

// Median time in ms of fn() between events on g_stream; L2 flushed first
// when the working set is under 200 MB.
template <class F> static double time_ms(size_t bytes, F fn)
{
    for (int i = 0; i < 3; i++)
        fn();
    CK(cudaStreamSynchronize(g_stream));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < g_reps; r++) {
        if (bytes < 200u << 20) CK(cudaMemsetAsync(g_flush, r & 0xff, g_flush_bytes, g_stream));
        CK(cudaEventRecord(a, g_stream));
        fn();
        CK(cudaEventRecord(b, g_stream));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void row(const char *op, const char *size, double bytes, double ours, double cub)
{
    printf("| %-22s | %-14s | %9.4f | %7.0f | %9.4f | %7.0f | %5.2fx |\n", op, size, cub,
           cub > 0 ? bytes / cub / 1e6 : 0, ours, bytes / ours / 1e6, cub / ours);
    fflush(stdout);
}
static void check(bool ok, const char *what)
{
    if (!ok) {
        printf("CHECK FAILED: %s\n", what);
        g_failures++;
    }
}

static void *cub_temp;
static size_t cub_temp_bytes;
static void ensure_temp(size_t b)
{
    if (b > cub_temp_bytes) {
        if (cub_temp) CK(cudaFree(cub_temp));
        CK(cudaMalloc(&cub_temp, b));
        cub_temp_bytes = b;
    }
}

static void bench_reduce(const char *label, size_t n)
{
    float *in;
    CK(cudaMalloc(&in, n * 4));
    float *out;
    CK(cudaMalloc(&out, 8));
    fill_unit<<<1024, 256, 0, g_stream>>>(in, n, g_seed++);
    size_t tb = 0;
    CK(cub::DeviceReduce::Sum(nullptr, tb, in, out, (int64_t)n, g_stream));
    ensure_temp(tb);
    // Host reference in double.
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), in, n * 4, cudaMemcpyDeviceToHost));
    double ref = 0, abs = 0;
    for (size_t i = 0; i < n; i++)
        ref += h[i], abs += fabs(h[i]);
    double r = 0;
    PK(pm_reduce_f32(g_ctx, in, n, PM_REDUCE_SUM, &r));
    check(fabs(r - ref) <= 1e-12 * abs, "reduce vs host double");
    double ours = time_ms(n * 4, [&] { PK(pm_reduce_f32(g_ctx, in, n, PM_REDUCE_SUM, &r)); });
    double cub = time_ms(n * 4, [&] {
        CK(cub::DeviceReduce::Sum(cub_temp, tb, in, out, (int64_t)n, g_stream));
        CK(cudaMemcpyAsync(g_pinned, out, 4, cudaMemcpyDeviceToHost, g_stream));
        CK(cudaStreamSynchronize(g_stream));
    });
    row("reduce_f32 sum", label, n * 4.0, ours, cub);
    CK(cudaFree(in));
    CK(cudaFree(out));
}

static void bench_image(size_t w, size_t hgt)
{
    size_t n = w * hgt;
    float *in, *out;
    CK(cudaMalloc(&in, n * 4));
    CK(cudaMalloc(&out, 8));
    fill_unit<<<1024, 256, 0, g_stream>>>(in, n, g_seed++);
    size_t tb = 0;
    CK(cub::DeviceReduce::Sum(nullptr, tb, in, out, (int64_t)n, g_stream));
    ensure_temp(tb);
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), in, n * 4, cudaMemcpyDeviceToHost));
    double ref = 0, abs = 0, r = 0;
    for (size_t i = 0; i < n; i++)
        ref += h[i], abs += fabs(h[i]);
    PK(pm_reduce_image_f32(g_ctx, in, w, hgt, w, PM_REDUCE_SUM, &r));
    check(fabs(r - ref) <= 1e-12 * abs, "image reduce vs host");
    double ours =
        time_ms(n * 4, [&] { PK(pm_reduce_image_f32(g_ctx, in, w, hgt, w, PM_REDUCE_SUM, &r)); });
    double cub = time_ms(n * 4, [&] {
        CK(cub::DeviceReduce::Sum(cub_temp, tb, in, out, (int64_t)n, g_stream));
        CK(cudaMemcpyAsync(g_pinned, out, 4, cudaMemcpyDeviceToHost, g_stream));
        CK(cudaStreamSynchronize(g_stream));
    });
    char label[64];
    snprintf(label, sizeof label, "%zux%zu", w, hgt);
    row("reduce_image_f32 sum", label, n * 4.0, ours, cub);
    // Padded rows (stride = width + 4): ours only, the strided kernel.
    CK(cudaFree(in));
    size_t s = w + 4;
    CK(cudaMalloc(&in, s * hgt * 4));
    fill_unit<<<1024, 256, 0, g_stream>>>(in, s * hgt, g_seed++);
    double ours2 =
        time_ms(n * 4, [&] { PK(pm_reduce_image_f32(g_ctx, in, w, hgt, s, PM_REDUCE_SUM, &r)); });
    snprintf(label, sizeof label, "%zux%zu/%zu", w, hgt, s);
    row("reduce_image_f32 (pad)", label, n * 4.0, ours2, cub);
    CK(cudaFree(in));
    CK(cudaFree(out));
}

static void bench_scan(const char *label, size_t n)
{
    unsigned *in, *out, *out2;
    CK(cudaMalloc(&in, n * 4));
    CK(cudaMalloc(&out, n * 4));
    CK(cudaMalloc(&out2, n * 4));
    fill_u32<<<1024, 256, 0, g_stream>>>(in, n, g_seed++, 4);
    size_t tb = 0;
    CK(cub::DeviceScan::ExclusiveSum(nullptr, tb, in, out2, (int64_t)n, g_stream));
    ensure_temp(tb);
    uint64_t total = 0;
    PK(pm_scan_exclusive_u32(g_ctx, in, n, out, &total));
    CK(cub::DeviceScan::ExclusiveSum(cub_temp, tb, in, out2, (int64_t)n, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    std::vector<unsigned> a(n), b(n);
    CK(cudaMemcpy(a.data(), out, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), out2, n * 4, cudaMemcpyDeviceToHost));
    check(a == b, "scan vs CUB");
    double ours = time_ms(n * 8, [&] { PK(pm_scan_exclusive_u32(g_ctx, in, n, out, &total)); });
    double cub = time_ms(n * 8, [&] {
        CK(cub::DeviceScan::ExclusiveSum(cub_temp, tb, in, out2, (int64_t)n, g_stream));
    });
    row("scan_exclusive_u32", label, n * 8.0, ours, cub);
    CK(cudaFree(in));
    CK(cudaFree(out));
    CK(cudaFree(out2));
}

static void bench_filter(const char *label, size_t n, float keep)
{
    float *in, *out, *out2;
    CK(cudaMalloc(&in, n * 4));
    CK(cudaMalloc(&out, n * 4));
    CK(cudaMalloc(&out2, n * 4));
    unsigned long long *nsel;
    CK(cudaMalloc(&nsel, 8));
    fill_unit<<<1024, 256, 0, g_stream>>>(in, n, g_seed++);
    LessThan op{keep};
    size_t tb = 0;
    CK(cub::DeviceSelect::If(nullptr, tb, in, out2, nsel, (int64_t)n, op, g_stream));
    ensure_temp(tb);
    size_t cnt = 0;
    PK(pm_filter_f32(g_ctx, in, n, PM_LESS, keep, out, n, &cnt));
    CK(cub::DeviceSelect::If(cub_temp, tb, in, out2, nsel, (int64_t)n, op, g_stream));
    CK(cudaMemcpyAsync(g_pinned, nsel, 8, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    size_t cub_cnt = (size_t)g_pinned[0];
    std::vector<float> a(cnt), b(cub_cnt);
    CK(cudaMemcpy(a.data(), out, cnt * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), out2, cub_cnt * 4, cudaMemcpyDeviceToHost));
    check(cnt == cub_cnt && a == b, "filter vs CUB");
    double ours =
        time_ms(n * 4, [&] { PK(pm_filter_f32(g_ctx, in, n, PM_LESS, keep, out, n, &cnt)); });
    double cub = time_ms(n * 4, [&] {
        CK(cub::DeviceSelect::If(cub_temp, tb, in, out2, nsel, (int64_t)n, op, g_stream));
        CK(cudaMemcpyAsync(g_pinned, nsel, 8, cudaMemcpyDeviceToHost, g_stream));
        CK(cudaStreamSynchronize(g_stream));
    });
    char name[64];
    snprintf(name, sizeof name, "filter_f32 %g%% kept", keep * 100);
    row(name, label, n * 4.0 + cnt * 4.0, ours, cub);
    CK(cudaFree(in));
    CK(cudaFree(out));
    CK(cudaFree(out2));
    CK(cudaFree(nsel));
}

static void bench_compact(const char *label, size_t n, unsigned per1000)
{
    unsigned char *flags;
    unsigned long long *out, *out2, *nsel;
    CK(cudaMalloc(&flags, n));
    CK(cudaMalloc(&out, n * 8));
    CK(cudaMalloc(&out2, n * 8));
    CK(cudaMalloc(&nsel, 8));
    fill_flags<<<1024, 256, 0, g_stream>>>(flags, n, g_seed++, per1000);
    thrust::counting_iterator<unsigned long long> idx(0);
    size_t tb = 0;
    CK(cub::DeviceSelect::Flagged(nullptr, tb, idx, flags, out2, nsel, (int64_t)n, g_stream));
    ensure_temp(tb);
    size_t cnt = 0;
    PK(pm_compact(g_ctx, flags, n, (uint64_t *)out, n, &cnt));
    CK(cub::DeviceSelect::Flagged(cub_temp, tb, idx, flags, out2, nsel, (int64_t)n, g_stream));
    CK(cudaMemcpyAsync(g_pinned, nsel, 8, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    size_t cub_cnt = (size_t)g_pinned[0];
    std::vector<unsigned long long> a(cnt), b(cub_cnt);
    CK(cudaMemcpy(a.data(), out, cnt * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), out2, cub_cnt * 8, cudaMemcpyDeviceToHost));
    check(cnt == cub_cnt && a == b, "compact vs CUB");
    double ours = time_ms(n, [&] { PK(pm_compact(g_ctx, flags, n, (uint64_t *)out, n, &cnt)); });
    double cub = time_ms(n, [&] {
        CK(cub::DeviceSelect::Flagged(cub_temp, tb, idx, flags, out2, nsel, (int64_t)n, g_stream));
        CK(cudaMemcpyAsync(g_pinned, nsel, 8, cudaMemcpyDeviceToHost, g_stream));
        CK(cudaStreamSynchronize(g_stream));
    });
    char name[64];
    snprintf(name, sizeof name, "compact %g%% kept", per1000 / 10.0);
    row(name, label, n + cnt * 8.0, ours, cub);
    CK(cudaFree(flags));
    CK(cudaFree(out));
    CK(cudaFree(out2));
    CK(cudaFree(nsel));
}

static void bench_expand(const char *label, size_t n)
{
    unsigned *counts, *loc;
    unsigned long long *src;
    CK(cudaMalloc(&counts, n * 4));
    fill_u32<<<1024, 256, 0, g_stream>>>(counts, n, g_seed++, 5);
    std::vector<unsigned> h(n);
    CK(cudaMemcpy(h.data(), counts, n * 4, cudaMemcpyDeviceToHost));
    size_t total = 0;
    for (unsigned c : h)
        total += c;
    CK(cudaMalloc(&src, total * 8 + 8));
    CK(cudaMalloc(&loc, total * 4 + 4));
    size_t cnt = 0;
    PK(pm_expand(g_ctx, counts, n, (uint64_t *)src, loc, total, &cnt));
    std::vector<unsigned long long> s(total);
    std::vector<unsigned> l(total);
    CK(cudaMemcpy(s.data(), src, total * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(l.data(), loc, total * 4, cudaMemcpyDeviceToHost));
    bool ok = cnt == total;
    size_t k = 0;
    for (size_t i = 0; i < n && ok; i++)
        for (unsigned j = 0; j < h[i] && ok; j++, k++)
            ok = s[k] == i && l[k] == j;
    check(ok, "expand vs host");
    double ours =
        time_ms(n * 4, [&] { PK(pm_expand(g_ctx, counts, n, (uint64_t *)src, loc, total, &cnt)); });
    double bytes = n * 4.0 + total * 12.0;
    printf("| %-22s | %-14s | %9s | %7s | %9.4f | %7.0f | %6s |\n", "expand (no CUB peer)", label,
           "-", "-", ours, bytes / ours / 1e6, "-");
    CK(cudaFree(counts));
    CK(cudaFree(src));
    CK(cudaFree(loc));
}

static void bench_copy(size_t bytes)
{
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemsetAsync(a, 1, bytes, g_stream));
    double ms = time_ms(
        bytes, [&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, g_stream)); });
    printf("device-to-device copy %zu MiB: %.4f ms = %.0f GB/s (read + write)\n\n", bytes >> 20, ms,
           2.0 * bytes / ms / 1e6);
    CK(cudaFree(a));
    CK(cudaFree(b));
}

static bool has(const char *list, const char *word)
{
    if (!list) return true;
    size_t k = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != nullptr; p += k)
        if ((p == list || p[-1] == ',') && (p[k] == 0 || p[k] == ',')) return true;
    return false;
}
static std::vector<int> ints(const char *list)
{
    std::vector<int> v;
    for (const char *p = list; *p;) {
        v.push_back(atoi(p));
        while (*p && *p != ',')
            p++;
        if (*p) p++;
    }
    return v;
}

int main(int argc, char **argv)
{
    bool quick = false;
    const char *only = nullptr, *sizes = nullptr, *keeps = nullptr;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            sizes = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            g_reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--keeps") == 0 && i + 1 < argc)
            keeps = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--only ops] [--sizes logs] [--reps n] [--keeps pcts]\n",
                    argv[0]);
            return 2;
        }
    }
    int dev = 0, drv = 0, rt = 0;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    printf("device: %s, %d SMs, L2 %d MB; driver %d.%d, runtime %d.%d; CUB %d.%d.%d\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, drv / 1000, (drv % 1000) / 10,
           rt / 1000, (rt % 1000) / 10, CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION);
    CK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, g_stream};
    PK(pm_context_create(&d, &g_ctx));
    g_flush_bytes = 2 * (size_t)prop.l2CacheSize;
    CK(cudaMalloc(&g_flush, g_flush_bytes));
    CK(cudaMallocHost(&g_pinned, 64));
    printf("median of %d runs after 3 warm-ups; times in ms include delivering the host result "
           "(count/total/sum) for both sides except CUB's scan (no host value)\n",
           g_reps);
    if (has(only, "copy")) bench_copy((size_t)1 << 30);
    printf("| op | size | CUB ms | CUB GB/s | ours ms | ours GB/s | CUB/ours |\n");
    printf("|---|---|---|---|---|---|---|\n");
    std::vector<int> logs = sizes   ? ints(sizes)
                            : quick ? std::vector<int>{16, 20, 24, 28}
                                    : std::vector<int>{16, 18, 20, 22, 24, 26, 28, 30};
    char label[32];
    if (has(only, "reduce"))
        for (int l : logs) {
            snprintf(label, sizeof label, "2^%d", l);
            bench_reduce(label, (size_t)1 << l);
        }
    if (has(only, "image")) {
        bench_image(7680, 4320);
        bench_image(1920, 1080);
    }
    if (has(only, "scan"))
        for (int l : logs) {
            snprintf(label, sizeof label, "2^%d", l);
            bench_scan(label, (size_t)1 << l);
        }
    if (has(only, "filter"))
        for (int l : logs) {
            if (l > 28) continue;
            snprintf(label, sizeof label, "2^%d", l);
            if (keeps) {
                for (int kp : ints(keeps))
                    bench_filter(label, (size_t)1 << l, kp / 100.0f);
                continue;
            }
            if (l == 28) {
                bench_filter(label, (size_t)1 << l, 0.01f);
                bench_filter(label, (size_t)1 << l, 0.5f);
                bench_filter(label, (size_t)1 << l, 0.25f);
            }
            bench_filter(label, (size_t)1 << l, 0.1f);
        }
    if (has(only, "compact"))
        for (int l : logs) {
            snprintf(label, sizeof label, "2^%d", l);
            bench_compact(label, (size_t)1 << l, 10);
            bench_compact(label, (size_t)1 << l, 500);
        }
    if (has(only, "expand")) {
        bench_expand("2^24", (size_t)1 << 24);
        if (!quick) bench_expand("2^26", (size_t)1 << 26);
    }
    pm_context_destroy(g_ctx);
    printf(g_failures ? "\n%d CHECKS FAILED\n" : "\nall result checks passed\n", g_failures);
    return g_failures ? 1 : 0;
}
