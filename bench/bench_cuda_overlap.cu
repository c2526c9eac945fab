/* Does a marching-cubes pass 2 run beside another extraction's pass 1 for
 * less than the two one after the other? (issue 23, the floor bar: pass 2
 * after pass 1 is what separates the streamed extractions from the floor;
 * designs that overlap them on a second stream only pay if the GPU runs
 * the two side by side for less than their sum.)
 *
 * Two contexts on two streams extract two cayley volumes (f32, iso 0,
 * central normals, into caller buffers in device memory) with
 * pm_isosurface_async. Per size and mode, medians of 40:
 * - A alone;
 * - A then B (B's stream waits for A's end);
 * - side by side: B's stream first spins for A's pass-1 time, so that B's
 *   pass 1 meets A's pass 2; with A's stream at high priority (A's pass 2
 *   first), at low priority, and with no delay (both passes 1, then both
 *   passes 2).
 * "saved" is A then B minus side by side. The pass-1 time is the classify
 * stage of a timed pm_isosurface call (report->timed), which takes the
 * two-wait path and counts the host's launch gaps, while the timed calls
 * are pm_isosurface_async replaying a CUDA graph: B's start is aligned
 * with A's pass 2 to within those microseconds, not exactly. Every
 * extraction's counts are checked after the loop (the whole mesh fitted
 * the caller's buffers).
 *
 * Usage: bench_cuda_overlap [sizes, default 384,512,768] */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/bench_cuda.h"
#include "pyramesh.h"

/* The cayley cubic on [-1, 1]^3, shifted by sh in x (two volumes of the
 * same size with different bytes, so neither reads the other's from L2). */
__global__ void cayley_kernel(float *out, long long n, double sh)
{
    const long long total = n * n * n;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        const long long i = p % n, j = (p / n) % n, k = p / (n * n);
        const double x = 2.0 * (double)i / (double)(n - 1) - 1.0 + sh,
                     y = 2.0 * (double)j / (double)(n - 1) - 1.0,
                     z = 2.0 * (double)k / (double)(n - 1) - 1.0;
        out[p] = (float)(1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z));
    }
}

/* Spins one warp for ns nanoseconds of the GPU's global timer. */
__global__ void spin_kernel(long long ns)
{
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

/* One context, its stream, volume and output buffers. */
struct side {
    cudaStream_t s;
    pm_context *ctx;
    float *vol, *pos, *nrm;
    uint32_t *idx;
    uint64_t *cnt;
    pm_volume v;
    pm_isosurface_options o;
};

static void side_open(side &a, int prio, int n, double sh, int mode)
{
    CK(cudaStreamCreateWithPriority(&a.s, cudaStreamNonBlocking, prio));
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, (void *)a.s};
    PK(pm_context_create(&d, &a.ctx));
    const size_t cells = (size_t)n * n * n;
    CK(cudaMalloc(&a.vol, 4 * cells));
    cayley_kernel<<<4096, 256, 0, a.s>>>(a.vol, n, sh);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(a.s));
    a.v = {a.vol, PM_SAMPLE_F32, (size_t)n, (size_t)n, (size_t)n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    memset(&a.o, 0, sizeof a.o);
    a.o.mode = (pm_mesh_mode)mode;
    a.o.normals = PM_NORMALS_CENTRAL;
    a.o.output_in_context_memory = 1;
    pm_mesh m;
    PK(pm_isosurface(a.ctx, &a.v, 0.0, &a.o, &m));
    const size_t nv = m.num_vertices, nt = m.num_triangles;
    pm_mesh_free(a.ctx, &m);
    CK(cudaMalloc(&a.pos, 12 * nv + 16));
    CK(cudaMalloc(&a.nrm, 12 * nv + 16));
    a.idx = NULL;
    if (mode == PM_MESH_INDEXED) CK(cudaMalloc(&a.idx, 12 * nt + 16));
    CK(cudaMalloc(&a.cnt, 4 * sizeof(uint64_t)));
    a.o.out_positions = a.pos;
    a.o.out_normals = a.nrm;
    a.o.out_indices = a.idx;
    a.o.vertex_capacity = nv;
    a.o.triangle_capacity = nt;
}

static void side_close(side &a)
{
    cudaFree(a.vol);
    cudaFree(a.pos);
    cudaFree(a.nrm);
    cudaFree(a.idx);
    cudaFree(a.cnt);
    pm_context_destroy(a.ctx);
    cudaStreamDestroy(a.s);
}

static void extract(side &a)
{
    PK(pm_isosurface_async(a.ctx, &a.v, 0.0, &a.o, (pm_isosurface_counts *)a.cnt));
}

/* Pass 1's time of a timed call (its classify stage), median of 11. */
static double pass1_ms(side &a)
{
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep);
    rep.timed = 1;
    pm_isosurface_options o = a.o;
    o.report = &rep;
    std::vector<double> t;
    for (int r = 0; r < 11; r++) {
        pm_mesh m;
        PK(pm_isosurface(a.ctx, &a.v, 0.0, &o, &m));
        pm_mesh_free(a.ctx, &m);
        t.push_back(rep.stage_ms[0]);
    }
    return median(t);
}

/* Ends a timed span begun by e0: records e1 on stream st, waits, and keeps
 * the span's ms after the warm-up rounds. */
static void lap(cudaEvent_t e0, cudaEvent_t e1, cudaStream_t st, int round, std::vector<double> &t)
{
    float ms;
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (round >= 3) t.push_back(ms);
}

/* The extraction's counts after the loop: the whole mesh fitted. */
static void side_check(side &a)
{
    pm_isosurface_counts c;
    CK(cudaMemcpy(&c, a.cnt, sizeof c, cudaMemcpyDeviceToHost));
    if (c.flags != 0 || c.num_vertices > a.o.vertex_capacity ||
        c.num_triangles > a.o.triangle_capacity) {
        fprintf(stderr, "bench_cuda_overlap: the mesh did not fit (flags %llu)\n",
                (unsigned long long)c.flags);
        exit(1);
    }
}

/* Medians of 40 (after 3 warm-up rounds): A alone, A then B, and side by
 * side with B's start delayed by A's pass-1 time (variants 0 and 1) or
 * not at all (variant 2). */
static void run(int n, int mode, int prio_lo, int prio_hi)
{
    for (int variant = 0; variant < 3; variant++) {
        /* 0: A high priority, delayed B; 1: A low priority, delayed B; 2:
         * no delay, equal priorities. */
        side a, b;
        side_open(a, variant == 0 ? prio_hi : prio_lo, n, 0.0, mode);
        side_open(b, prio_lo, n, 0.001, mode);
        const double p1 = pass1_ms(a), delay = variant == 2 ? 0.0 : p1;
        cudaEvent_t e0, e1, ea, eb;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventCreate(&ea));
        CK(cudaEventCreate(&eb));
        std::vector<double> talone, tseq, tside;
        for (int r = 0; r < 43; r++) {
            CK(cudaEventRecord(e0, a.s));
            extract(a);
            lap(e0, e1, a.s, r, talone);
            /* A then B. */
            CK(cudaEventRecord(e0, a.s));
            extract(a);
            CK(cudaEventRecord(ea, a.s));
            CK(cudaStreamWaitEvent(b.s, ea));
            extract(b);
            lap(e0, e1, b.s, r, tseq);
            /* Side by side: B's stream spins for A's pass 1 first. */
            CK(cudaEventRecord(e0, a.s));
            CK(cudaStreamWaitEvent(b.s, e0));
            if (delay > 0) {
                spin_kernel<<<1, 32, 0, b.s>>>((long long)(delay * 1e6));
                CK(cudaGetLastError());
            }
            extract(a);
            extract(b);
            CK(cudaEventRecord(eb, b.s));
            CK(cudaStreamWaitEvent(a.s, eb));
            lap(e0, e1, a.s, r, tside);
        }
        side_check(a);
        side_check(b);
        const double ta = median(talone), ts = median(tseq), tb = median(tside);
        printf("| %4d | %-7s | %-32s | %7.3f | %7.3f | %7.3f | %7.3f | %7.3f | %6.3f |\n", n,
               mode == PM_MESH_SOUP ? "soup" : "indexed",
               variant == 0   ? "B after A's pass 1, A high prio."
               : variant == 1 ? "B after A's pass 1, equal prio."
                              : "both at once",
               ta, p1, delay, ts, tb, ts - tb);
        fflush(stdout);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaEventDestroy(ea);
        cudaEventDestroy(eb);
        side_close(a);
        side_close(b);
    }
}

int main(int argc, char **argv)
{
    int ns[16] = {384, 512, 768}, nn = 3;
    if (argc > 1) nn = bench_sizes(argv[1], ns, 16);
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
        printf("bench_cuda_overlap: no CUDA device\n");
        return 0;
    }
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s; two pm_isosurface_async extractions A and B (f32 cayley, iso 0, central "
           "normals, caller buffers), medians of 40, ms\n",
           prop.name);
    printf("| N | mode | B starts | A alone | A pass 1 | B delay | A then B | side by side | "
           "saved |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int q = 0; q < nn; q++)
        for (int mode = PM_MESH_SOUP; mode >= PM_MESH_INDEXED; mode--)
            run(ns[q], mode, lo, hi);
    return 0;
}
