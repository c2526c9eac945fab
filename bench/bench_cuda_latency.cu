/* Where a small pm_isosurface call's time goes (bench/RESULTS-cudamc.md,
 * session 26): the host's cost of a kernel launch (200 launches of an
 * empty kernel queued behind a spinning one, with and without the PDL
 * attribute), and, for the cayley field at 128^3, 192^3, 256^3 and 384^3 (soup and
 * indexed, caller buffers in device memory), the sync and async calls
 * timed by events as bench_cuda_isosurface times them, beside the same
 * calls queued behind a kernel that spins 200 us ("host hidden": the
 * host's work and the launches end while the GPU is busy, so the interval
 * holds the GPU's chain), the async call's host time with the GPU idle
 * and busy, and three empty kernels between two events. Medians of 60.
 * Usage: bench_cuda_latency */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <chrono>
#include <vector>
#include <cuda_runtime.h>
#include "bench/bench_cuda.h"
#include "pyramesh.h"
__global__ void cay(float *out, long long n)
{
    long long total = n * n * n;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        long long i = p % n, j = (p / n) % n, k = p / (n * n);
        double x = 2.0 * i / (n - 1) - 1.0, y = 2.0 * j / (n - 1) - 1.0,
               z = 2.0 * k / (n - 1) - 1.0;
        out[p] = (float)(1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z));
    }
}
__global__ void spin(long long c)
{
    long long t = clock64();
    while (clock64() - t < c) {
    }
}
__global__ void empty() {}
static double med(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
/* The cayley field on n^3 points in device memory and options for its
 * mesh (soup or indexed, central normals) into caller buffers of exactly
 * its size, with a counts word for pm_isosurface_async. */
struct job {
    pm_volume v;
    pm_isosurface_options o;
    unsigned long long *cnt;
};
static job job_make(pm_context *ctx, cudaStream_t s, int n, int indexed)
{
    job j;
    float *vol;
    CK(cudaMalloc(&vol, (size_t)n * n * n * 4));
    cay<<<4096, 256, 0, s>>>(vol, n);
    CK(cudaStreamSynchronize(s));
    j.v = {vol, PM_SAMPLE_F32, (size_t)n, (size_t)n, (size_t)n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    memset(&j.o, 0, sizeof j.o);
    j.o.mode = indexed ? PM_MESH_INDEXED : PM_MESH_SOUP;
    j.o.normals = PM_NORMALS_CENTRAL;
    j.o.output_in_context_memory = 1;
    pm_mesh m;
    PK(pm_isosurface(ctx, &j.v, 0.0, &j.o, &m));
    size_t nv = m.num_vertices, nt = m.num_triangles;
    pm_mesh_free(ctx, &m);
    float *pos, *nrm;
    uint32_t *idx = NULL;
    CK(cudaMalloc(&pos, 12 * nv + 16));
    CK(cudaMalloc(&nrm, 12 * nv + 16));
    if (indexed) CK(cudaMalloc(&idx, 12 * nt + 16));
    j.o.out_positions = pos;
    j.o.out_normals = nrm;
    j.o.out_indices = idx;
    j.o.vertex_capacity = nv;
    j.o.triangle_capacity = nt;
    CK(cudaMalloc(&j.cnt, 64));
    return j;
}
static void job_free(job &j)
{
    cudaFree((void *)j.v.data);
    cudaFree(j.o.out_positions);
    cudaFree(j.o.out_normals);
    if (j.o.out_indices) cudaFree(j.o.out_indices);
    cudaFree(j.cnt);
}
int main(void)
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, (void *)s};
    pm_context *ctx;
    PK(pm_context_create(&d, &ctx));
    for (int rep = 0; rep < 3; rep++) {
        for (int ex = 0; ex < 2; ex++) {
            spin<<<1, 1, 0, s>>>(4000000);
            auto h0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 200; i++) {
                if (!ex)
                    empty<<<1, 32, 0, s>>>();
                else {
                    cudaLaunchConfig_t c = {};
                    cudaLaunchAttribute at[1];
                    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                    at[0].val.programmaticStreamSerializationAllowed = 1;
                    c.gridDim = dim3(1);
                    c.blockDim = dim3(32);
                    c.stream = s;
                    c.attrs = at;
                    c.numAttrs = 1;
                    CK(cudaLaunchKernelEx(&c, empty));
                }
            }
            auto h1 = std::chrono::steady_clock::now();
            CK(cudaStreamSynchronize(s));
            printf("host us per launch (%s): %.2f\n", ex ? "Ex+PDL" : "plain",
                   std::chrono::duration<double, std::micro>(h1 - h0).count() / 200);
        }
    }
    int ns[] = {128, 192, 256, 384};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    printf("| N | mode | sync | sync, host hidden | async | async, host hidden | async host us "
           "(GPU idle) | async host us (GPU busy) | sync host us |\n");
    for (int n : ns)
        for (int mode = 0; mode < 2; mode++) {
            job J = job_make(ctx, s, n, mode);
            const pm_volume &v = J.v;
            pm_isosurface_options &o = J.o;
            unsigned long long *cnt = J.cnt;
            pm_mesh m;
            std::vector<double> a[9];
            for (int r = 0; r < 63; r++) {
                for (int var = 0; var < 4; var++) {
                    int hide = var & 1, as = var >> 1;
                    if (hide) spin<<<1, 1, 0, s>>>(400000); /* about 200 us */
                    cudaEventRecord(e0, s);
                    auto h0 = std::chrono::steady_clock::now();
                    if (as)
                        PK(pm_isosurface_async(ctx, &v, 0.0, &o, (pm_isosurface_counts *)cnt));
                    else
                        PK(pm_isosurface(ctx, &v, 0.0, &o, &m));
                    auto h1 = std::chrono::steady_clock::now();
                    cudaEventRecord(e1, s);
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    double hus = std::chrono::duration<double, std::micro>(h1 - h0).count();
                    if (r >= 3) {
                        a[var].push_back(ms);
                        if (as && !hide) a[4].push_back(hus);
                        if (as && hide) a[5].push_back(hus);
                        if (!as && !hide) a[6].push_back(hus);
                    }
                }
            }
            for (int r = 0; r < 63; r++)
                for (int hide = 0; hide < 2; hide++) {
                    if (hide) spin<<<1, 1, 0, s>>>(400000);
                    cudaEventRecord(e0, s);
                    empty<<<1, 32, 0, s>>>();
                    empty<<<1, 32, 0, s>>>();
                    empty<<<1, 32, 0, s>>>();
                    cudaEventRecord(e1, s);
                    CK(cudaEventSynchronize(e1));
                    float ms;
                    cudaEventElapsedTime(&ms, e0, e1);
                    if (r >= 3) a[7 + hide].push_back(ms);
                }
            printf("3 empty kernels: %.4f ms, host hidden %.4f\n", med(a[7]), med(a[8]));
            printf("| %d | %s | %.4f | %.4f | %.4f | %.4f | %.1f | %.1f | %.1f |\n", n,
                   mode ? "indexed" : "soup", med(a[0]), med(a[1]), med(a[2]), med(a[3]), med(a[4]),
                   med(a[5]), med(a[6]));
            job_free(J);
        }
    /* Session 27: pm_isosurface_async captured into a CUDA graph (with the
     * capture's tile-state clear), launched and waited, beside the call
     * itself; and the host cost of setting a kernel node's parameters on
     * the instantiated graph. */
    printf("| N | sync | async+wait | graph+wait | async+wait, counts in mapped host memory | "
           "graph launch host us (GPU busy) | set params host us a node | kernel nodes |\n");
    unsigned long long *hcnt;
    CK(cudaHostAlloc((void **)&hcnt, 64, cudaHostAllocMapped));
    for (int n : {128, 192, 256}) {
        job J = job_make(ctx, s, n, 0);
        const pm_volume &v = J.v;
        pm_isosurface_options &o = J.o;
        unsigned long long *cnt = J.cnt;
        pm_mesh m;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        PK(pm_isosurface_async(ctx, &v, 0.0, &o, (pm_isosurface_counts *)cnt));
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        size_t nn = 0;
        CK(cudaGraphGetNodes(g, NULL, &nn));
        std::vector<cudaGraphNode_t> nodes(nn);
        CK(cudaGraphGetNodes(g, nodes.data(), &nn));
        std::vector<cudaGraphNode_t> kn;
        for (auto nd : nodes) {
            cudaGraphNodeType ty;
            CK(cudaGraphNodeGetType(nd, &ty));
            if (ty == cudaGraphNodeTypeKernel) kn.push_back(nd);
        }
        std::vector<double> a[6];
        for (int r = 0; r < 63; r++) {
            for (int var = 0; var < 4; var++) {
                cudaEventRecord(e0, s);
                if (var == 0)
                    PK(pm_isosurface(ctx, &v, 0.0, &o, &m));
                else {
                    if (var == 1 || var == 3)
                        PK(pm_isosurface_async(ctx, &v, 0.0, &o,
                                               (pm_isosurface_counts *)(var == 1 ? cnt : hcnt)));
                    else
                        CK(cudaGraphLaunch(ge, s));
                    CK(cudaStreamSynchronize(s));
                }
                cudaEventRecord(e1, s);
                CK(cudaEventSynchronize(e1));
                float ms;
                cudaEventElapsedTime(&ms, e0, e1);
                if (r >= 3) a[var == 3 ? 5 : var].push_back(ms);
            }
            spin<<<1, 1, 0, s>>>(400000);
            auto h0 = std::chrono::steady_clock::now();
            CK(cudaGraphLaunch(ge, s));
            auto h1 = std::chrono::steady_clock::now();
            for (auto nd : kn) {
                cudaKernelNodeParams kp;
                CK(cudaGraphKernelNodeGetParams(nd, &kp));
                CK(cudaGraphExecKernelNodeSetParams(ge, nd, &kp));
            }
            auto h2 = std::chrono::steady_clock::now();
            CK(cudaStreamSynchronize(s));
            if (r >= 3) {
                a[3].push_back(std::chrono::duration<double, std::micro>(h1 - h0).count());
                a[4].push_back(std::chrono::duration<double, std::micro>(h2 - h1).count() /
                               (kn.empty() ? 1 : kn.size()));
            }
        }
        printf("| %d | %.4f | %.4f | %.4f | %.4f | %.1f | %.2f | %zu |\n", n, med(a[0]), med(a[1]),
               med(a[2]), med(a[5]), med(a[3]), med(a[4]), kn.size());
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        job_free(J);
    }
    cudaFreeHost(hcnt);
    pm_context_destroy(ctx);
    return 0;
}
