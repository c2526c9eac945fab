/* Beyond one GPU's memory and beyond one GPU (docs/scale.md, "Slabs on
 * devices"), issue 22 items 2 and 3:
 *
 *   bench_slabs stream N LIMIT_GIB   an N^3 u16 volume in host memory
 *       streamed through GPU 0 with its memory held to LIMIT_GIB
 *       (pm_isosurface_stream over pm_volume_source_memory), pageable and
 *       then registered (pinned), against the host-to-device bandwidth
 *       measured in the same run (cudaMemcpy of 1 GiB, pageable and
 *       pinned); the mesh checked against pm_isosurface on the GPU with the
 *       volume in device memory when it fits (--check).
 *   bench_slabs multi N              an N^3 f32 volume in host memory:
 *       pm_isosurface on GPU 0 against pm_isosurface_multi on every GPU
 *       (the speed-up, the same bytes).
 *   bench_slabs particles M          the demo's dam-break scene of about M
 *       particles (tools/demo_scene.h): pm_reconstruct on GPU 0 against
 *       pm_reconstruct_multi on every GPU.
 *
 * Medians of R runs (PM_BENCH_REPS, default 3) after a warm-up; wall
 * clock of the whole call (host memory in, host mesh out). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyramesh.h"
#include "tools/demo_scene.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int reps(void)
{
    const char *e = getenv("PM_BENCH_REPS");
    return e && atoi(e) > 0 ? atoi(e) : 3;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static int same(const pm_mesh *a, const pm_mesh *b)
{
    return a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
           !memcmp(a->positions, b->positions, 12 * a->num_vertices) &&
           (!a->normals || !memcmp(a->normals, b->normals, 12 * a->num_vertices)) &&
           (!a->indices || !memcmp(a->indices, b->indices, 12 * a->num_triangles));
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        pm_status s_ = (x);                                                                        \
        if (s_ != PM_STATUS_OK) {                                                                  \
            fprintf(stderr, "%s: %s: %s\n", #x, pm_status_string(s_), pm_last_error());           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Host-to-device bandwidth, GB/s: 1 GiB, pageable or pinned. */
static double h2d_gbs(int pinned)
{
    const size_t bytes = (size_t)1 << 30;
    void *h = NULL, *d = NULL;
    if (pinned)
        cudaMallocHost(&h, bytes);
    else
        h = malloc(bytes);
    memset(h, 1, bytes);
    cudaMalloc(&d, bytes);
    double t[5];
    for (int i = -1; i < 5; i++) {
        double t0 = now_ms();
        cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
        cudaDeviceSynchronize();
        if (i >= 0) t[i] = now_ms() - t0;
    }
    cudaFree(d);
    if (pinned)
        cudaFreeHost(h);
    else
        free(h);
    return (double)bytes / (median(t, 5) * 1e6);
}

/* A CT-like u16 volume: a few tissue blobs and a shell, values 0..4000. */
static uint16_t *ct_volume(size_t n)
{
    uint16_t *v = (uint16_t *)malloc(n * n * n * sizeof *v);
    if (!v) return NULL;
#pragma omp parallel for schedule(static)
    for (long long k = 0; k < (long long)n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = (double)i / n - 0.5, y = (double)j / n - 0.5, z = (double)k / n - 0.5;
                double r = sqrt(x * x + y * y + z * z);
                double b2 = (x - .1) * (x - .1) + y * y + (z + .1) * (z + .1);
                double f = 1000.0 * (r < 0.45) + 1500.0 * (b2 < 0.01) * (1.0 - 50.0 * b2) +
                           800.0 * (fabs(r - 0.3) < 0.01);
                v[(size_t)k * n * n + j * n + i] = (uint16_t)(f > 4000 ? 4000 : f);
            }
    return v;
}

static void stream_mode(size_t n, double limit_gib, int check)
{
    const double pageable = h2d_gbs(0), pinned = h2d_gbs(1);
    uint16_t *v = ct_volume(n);
    if (!v) {
        fprintf(stderr, "no host memory for %zu^3 u16\n", n);
        exit(1);
    }
    const double gib = (double)n * n * n * 2 / (1 << 30);
    pm_context *ctx;
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, NULL};
    CK(pm_context_create(&d, &ctx));
    pm_volume vol;
    memset(&vol, 0, sizeof vol);
    vol.data = v;
    vol.type = PM_SAMPLE_U16;
    vol.nx = vol.ny = vol.nz = n;
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    printf("stream: %zu^3 u16 (%.2f GiB) in host memory through %s, device limit %.2f GiB; "
           "host-to-device bandwidth, same run: pageable %.1f GB/s, pinned %.1f GB/s\n",
           n, gib, pm_context_device_name(ctx), limit_gib, pageable, pinned);
    pm_mesh ref;
    memset(&ref, 0, sizeof ref);
    for (int reg = 0; reg < 2; reg++) {
        if (reg && cudaHostRegister(v, n * n * n * 2, cudaHostRegisterDefault) != cudaSuccess) {
            printf("  registered: cudaHostRegister failed, skipped\n");
            cudaGetLastError();
            break;
        }
        const int R = reps();
        double t[16];
        pm_mesh m;
        pm_stream_report sr;
        for (int i = -1; i < R && i < 16; i++) {
            pm_volume_source src;
            CK(pm_volume_source_memory(&vol, &src));
            pm_stream_options so = {sizeof so, (size_t)(limit_gib * (1 << 30)), 0, &sr};
            double t0 = now_ms();
            CK(pm_isosurface_stream(ctx, &src, 1000.0, &o, &so, &m));
            double e = now_ms() - t0;
            pm_volume_source_close(&src);
            if (i >= 0) t[i] = e;
            if (i < R - 1) pm_mesh_free(ctx, &m);
        }
        const double ms = median(t, R);
        const double rate = (double)n * n * n * 2 / (ms * 1e6);
        printf("  %s volume: %.1f ms median of %d (%zu slabs of %zu slices; upload %.0f, extraction "
               "%.0f ms summed over workers; merge %.0f ms), %zu vertices, %zu triangles; "
               "%.1f GB/s = %.0f%% of the %s bandwidth\n",
               reg ? "registered (pinned)" : "pageable", ms, R, sr.slabs, sr.slab_slices,
               sr.copy_ms, sr.walk_ms, sr.gather_ms, m.num_vertices, m.num_triangles, rate,
               100.0 * rate / (reg ? pinned : pageable), reg ? "pinned" : "pageable");
        if (check && !ref.positions && reg == 0) {
            /* In device memory whole: the reference (if it fits). */
            void *dv = NULL;
            if (pm_alloc(ctx, n * n * n * 2, &dv) == PM_STATUS_OK &&
                pm_upload(ctx, dv, v, n * n * n * 2) == PM_STATUS_OK) {
                pm_volume dvol = vol;
                dvol.data = dv;
                if (pm_isosurface(ctx, &dvol, 1000.0, &o, &ref) == PM_STATUS_OK)
                    printf("  check: the streamed mesh %s pm_isosurface's in device memory\n",
                           same(&m, &ref) ? "is byte for byte" : "DIFFERS from");
                else
                    printf("  check: pm_isosurface in device memory failed: %s\n", pm_last_error());
            } else {
                printf("  check: the volume does not fit the device whole\n");
            }
            pm_free(ctx, dv);
        } else if (ref.positions) {
            printf("  check: %s\n", same(&m, &ref) ? "byte for byte the same" : "DIFFERS");
        }
        pm_mesh_free(ctx, &m);
        if (reg) cudaHostUnregister(v);
    }
    pm_mesh_free(ctx, &ref);
    pm_context_destroy(ctx);
    free(v);
}

static int gpu_contexts(pm_context **ctxs)
{
    int g = pm_cuda_device_count();
    if (g > 16) g = 16;
    for (int i = 0; i < g; i++) {
        pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, i, 0, NULL};
        CK(pm_context_create(&d, &ctxs[i]));
    }
    return g;
}

static void multi_mode(size_t n)
{
    pm_context *ctxs[16];
    const int g = gpu_contexts(ctxs);
    float *v = (float *)malloc(n * n * n * sizeof *v);
    if (!v) exit(1);
#pragma omp parallel for schedule(static)
    for (long long k = 0; k < (long long)n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = 2.0 * i / (n - 1) - 1, y = 2.0 * j / (n - 1) - 1,
                       z = 2.0 * (double)k / (n - 1) - 1;
                v[(size_t)k * n * n + j * n + i] =
                    (float)(1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z));
            }
    pm_volume vol;
    memset(&vol, 0, sizeof vol);
    vol.data = v;
    vol.type = PM_SAMPLE_F32;
    vol.nx = vol.ny = vol.nz = n;
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    printf("multi: %zu^3 f32 cayley (%.2f GiB) in host memory, %d GPUs (%s)\n", n,
           (double)n * n * n * 4 / (1 << 30), g, pm_context_device_name(ctxs[0]));
    const int R = reps();
    pm_mesh one, all;
    double t1[16], t2[16];
    for (int i = -1; i < R && i < 16; i++) {
        double t0 = now_ms();
        CK(pm_isosurface(ctxs[0], &vol, 0.0, &o, &one));
        if (i >= 0) t1[i] = now_ms() - t0;
        if (i < R - 1) pm_mesh_free(ctxs[0], &one);
    }
    for (int k = 1; k <= g; k *= 2) {
        for (int i = -1; i < R && i < 16; i++) {
            double t0 = now_ms();
            CK(pm_isosurface_multi(ctxs, k, &vol, 0.0, &o, &all));
            if (i >= 0) t2[i] = now_ms() - t0;
            if (i < R - 1) pm_mesh_free(ctxs[0], &all);
        }
        const double a = median(t1, R), b = median(t2, R);
        printf("  pm_isosurface on 1 GPU %.1f ms; pm_isosurface_multi on %d GPU%s %.1f ms: "
               "%.2fx; %zu triangles, %s\n",
               a, k, k == 1 ? "" : "s", b, a / b, all.num_triangles,
               same(&one, &all) ? "byte for byte the same" : "DIFFERENT");
        pm_mesh_free(ctxs[0], &all);
        if (k < g && 2 * k > g) k = g / 2; /* then g */
    }
    pm_mesh_free(ctxs[0], &one);
    for (int i = 0; i < g; i++)
        pm_context_destroy(ctxs[i]);
    free(v);
}

static void particles_mode(size_t target)
{
    pm_context *ctxs[16];
    const int g = gpu_contexts(ctxs);
    const size_t n = demo_scene(target, DEMO_SEED, NULL, NULL);
    float *xyz = (float *)malloc(n * 12);
    demo_scene(target, DEMO_SEED, xyz, NULL);
    pm_field_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.radius = DEMO_RADIUS;
    p.smoothing_length = DEMO_SMOOTHING;
    p.cube_size = DEMO_CUBE;
    p.iso = DEMO_THRESHOLD;
    p.max_memory_bytes = (size_t)64 << 30;
    pm_reconstruct_options ro = {sizeof ro, PM_GRID_SPARSE, 0};
    printf("particles: %zu (dam break), %d GPUs (%s)\n", n, g, pm_context_device_name(ctxs[0]));
    const int R = reps();
    pm_mesh one, all;
    pm_reconstruct_report r1, r2;
    double t1[16], t2[16];
    for (int i = -1; i < R && i < 16; i++) {
        double t0 = now_ms();
        CK(pm_reconstruct(ctxs[0], xyz, n, &p, &ro, NULL, &one, &r1));
        if (i >= 0) t1[i] = now_ms() - t0;
        if (i < R - 1) pm_mesh_free(ctxs[0], &one);
    }
    for (int k = 1; k <= g; k *= 2) {
        for (int i = -1; i < R && i < 16; i++) {
            double t0 = now_ms();
            CK(pm_reconstruct_multi(ctxs, k, xyz, n, &p, &ro, NULL, &all, &r2));
            if (i >= 0) t2[i] = now_ms() - t0;
            if (i < R - 1) pm_mesh_free(ctxs[0], &all);
        }
        const double a = median(t1, R), b = median(t2, R);
        printf("  pm_reconstruct on 1 GPU %.1f ms (plan %.0f, fields %.0f, pieces %.0f, merge "
               "%.0f); on %d GPU%s %.1f ms (fields %.0f, pieces %.0f summed): %.2fx; %zu "
               "triangles, %llu bricks, %s\n",
               a, r1.neighbours_ms, r1.field_ms, r1.extract_ms, r1.merge_ms, k,
               k == 1 ? "" : "s", b, r2.field_ms, r2.extract_ms, a / b, all.num_triangles,
               (unsigned long long)r2.bricks_occupied,
               same(&one, &all) ? "byte for byte the same" : "DIFFERENT");
        pm_mesh_free(ctxs[0], &all);
        if (k < g && 2 * k > g) k = g / 2;
    }
    pm_mesh_free(ctxs[0], &one);
    for (int i = 0; i < g; i++)
        pm_context_destroy(ctxs[i]);
    free(xyz);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_slabs stream N LIMIT_GIB [--check] | multi N | particles M\n");
        return 2;
    }
    if (!pm_cuda_available()) {
        printf("bench_slabs: no GPU\n");
        return 0;
    }
    if (!strcmp(argv[1], "stream") && argc >= 4)
        stream_mode((size_t)atol(argv[2]), atof(argv[3]), argc > 4 && !strcmp(argv[4], "--check"));
    else if (!strcmp(argv[1], "multi"))
        multi_mode((size_t)atol(argv[2]));
    else if (!strcmp(argv[1], "particles"))
        particles_mode((size_t)atof(argv[2]));
    else
        return 2;
    return 0;
}
