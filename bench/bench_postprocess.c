/* Times the whole reconstruct pipeline with splashsurf's post-processing
 * (issue 24 item 5): splashsurf's README command line
 *   -r=0.025 -l=2.0 -c=0.5 -t=0.6 --mesh-smoothing-weights=on
 *   --mesh-smoothing-iters=15 --normals=on --normals-smoothing-iters=10
 * (the cleanup on, as splashsurf turns it on with smoothing) on the demo's
 * dam-break scene (tools/cmd_demo.c: a jittered block of particles at rest
 * spacing 2r plus a sphere beside it, fixed seed), per stage: the
 * reconstruction (upload on CUDA, field, extraction) and each
 * post-processing step (cleanup, SPH interpolator, smoothing weights, 15
 * Laplacian iterations, area-weighted normals, 10 normal-smoothing
 * iterations, and on CUDA the final copy of the mesh to host memory). The
 * mesh stays in the context's memory as the CLI keeps it. Each size runs
 * on the CPU and, when a CUDA context can be created, on the GPU (every
 * step there, the cleanup's rounds included: src/cuda/mesh_cleanup.cu); the
 * median of the repetitions is printed per stage, with the check that
 * post-processing costs no more than the reconstruction, and an FNV-1a hash
 * of the final mesh (equal hashes: CPU and GPU gave the same bytes).
 *
 * Usage: bench_postprocess [N ...]        (default 1e6 1e7)
 *   PM_BENCH_REPS repetitions (default 3; the median is printed),
 *   PM_BENCH_THREADS the CPU threads (default all), PM_BENCH_DEVICES
 *   "cpu", "cuda" or "cpu,cuda" (default both), PM_BENCH_C the cube size
 *   (default 0.5, splashsurf's README). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyramesh.h"
#include "../tools/demo_scene.h"

#define RADIUS DEMO_RADIUS

/* ---- the pipeline --------------------------------------------------- */

enum {
    S_UPLOAD,
    S_FIELD,
    S_EXTRACT,
    S_CLEANUP,
    S_INTERP,
    S_WEIGHTS,
    S_LAPLACE,
    S_NORMALS,
    S_NSMOOTH,
    S_DOWNLOAD,
    NSTAGE
};
static const char *const stage_name[NSTAGE] = {
    "upload particles",  "density field", "extraction", "mesh cleanup",         "SPH interpolator",
    "smoothing weights", "Laplacian x15", "normals",    "normal smoothing x10", "mesh to host"};
static const int stage_post[NSTAGE] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
static const char *const stage_where[NSTAGE] = {"-",   "dev", "dev", "dev", "dev",
                                                "dev", "dev", "dev", "dev", "-"};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static uint64_t fnv(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ c[i]) * 0x100000001b3ULL;
    return h;
}

typedef struct result {
    double t[NSTAGE];
    size_t tris_raw, tris, verts;
    uint64_t hash;
} result;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        pm_status s_ = (call);                                                                     \
        if (s_ != PM_STATUS_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                     \
                    pm_status_string(s_), pm_last_error());                                        \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

static int run_once(pm_context *ctx, const float *xyz, size_t n, double cube, result *r)
{
    memset(r, 0, sizeof *r);
    const int dev = pm_context_device(ctx) == PM_DEVICE_CUDA;
    double t0 = now_ms();
    float *xyz_ctx = (float *)xyz;
    if (dev) {
        CHECK(pm_alloc(ctx, n * 12, (void **)&xyz_ctx));
        CHECK(pm_upload(ctx, xyz_ctx, xyz, n * 12));
    }
    r->t[S_UPLOAD] = now_ms() - t0;
    pm_field_params fp;
    memset(&fp, 0, sizeof fp);
    fp.struct_size = sizeof fp;
    fp.radius = RADIUS;
    fp.smoothing_length = 2.0;
    fp.cube_size = cube;
    fp.iso = 0.6;
    pm_field field;
    t0 = now_ms();
    CHECK(pm_field_compute(ctx, xyz_ctx, n, &fp, &field));
    r->t[S_FIELD] = now_ms() - t0;
    pm_isosurface_options io;
    memset(&io, 0, sizeof io);
    io.struct_size = sizeof io;
    io.normals = PM_NORMALS_NONE;
    io.inside = field.inside;
    io.output_in_context_memory = dev;
    pm_mesh mesh;
    t0 = now_ms();
    CHECK(pm_isosurface(ctx, &field.volume, field.iso, &io, &mesh));
    r->t[S_EXTRACT] = now_ms() - t0;
    r->tris_raw = mesh.num_triangles;
    pm_mc_cleanup_options co;
    memset(&co, 0, sizeof co);
    co.struct_size = sizeof co;
    for (int a = 0; a < 3; a++) {
        co.origin[a] = field.volume.origin[a];
        co.spacing[a] = field.volume.spacing[a] != 0 ? field.volume.spacing[a] : 1.0;
    }
    pm_field_free(ctx, &field);

    t0 = now_ms();
    CHECK(pm_mesh_mc_cleanup(ctx, &mesh, &co));
    r->t[S_CLEANUP] = now_ms() - t0;
    pm_sph_interpolator *ip;
    t0 = now_ms();
    CHECK(pm_sph_interpolator_create(ctx, xyz_ctx, n, &fp, &ip));
    r->t[S_INTERP] = now_ms() - t0;
    float *sw, *wnn;
    const size_t nv = mesh.num_vertices;
    CHECK(pm_alloc(ctx, nv * 4, (void **)&sw));
    CHECK(pm_alloc(ctx, nv * 4, (void **)&wnn));
    t0 = now_ms();
    CHECK(pm_sph_smoothing_weights(ctx, ip, mesh.positions, nv, 13.0, sw, wnn));
    r->t[S_WEIGHTS] = now_ms() - t0;
    t0 = now_ms();
    CHECK(pm_mesh_smooth_laplacian(ctx, &mesh, 15, 1.0, sw));
    r->t[S_LAPLACE] = now_ms() - t0;
    t0 = now_ms();
    CHECK(pm_mesh_compute_normals(ctx, &mesh));
    r->t[S_NORMALS] = now_ms() - t0;
    t0 = now_ms();
    CHECK(pm_mesh_smooth_normals(ctx, &mesh, 10));
    r->t[S_NSMOOTH] = now_ms() - t0;
    /* the final mesh in host memory (the file's source) */
    t0 = now_ms();
    const size_t pb = mesh.num_vertices * 12, tb = mesh.num_triangles * 12;
    float *pos = malloc(pb + 1), *nrm = malloc(pb + 1);
    uint32_t *tri = malloc(tb + 1);
    if (!pos || !nrm || !tri) {
        fprintf(stderr, "out of host memory\n");
        return 0;
    }
    if (dev) {
        CHECK(pm_download(ctx, pos, mesh.positions, pb));
        CHECK(pm_download(ctx, tri, mesh.indices, tb));
        CHECK(pm_download(ctx, nrm, mesh.normals, pb));
        r->t[S_DOWNLOAD] = now_ms() - t0;
    } else {
        memcpy(pos, mesh.positions, pb);
        memcpy(tri, mesh.indices, tb);
        memcpy(nrm, mesh.normals, pb);
    }
    r->tris = mesh.num_triangles;
    r->verts = mesh.num_vertices;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv(h, pos, pb);
    h = fnv(h, tri, tb);
    r->hash = fnv(h, nrm, pb);
    free(pos), free(nrm), free(tri);
    pm_free(ctx, sw);
    pm_free(ctx, wnn);
    pm_sph_interpolator_destroy(ip);
    pm_mesh_free(ctx, &mesh);
    if (dev) pm_free(ctx, xyz_ctx);
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `reps` times; the median per stage into *med. */
static int bench(pm_context *ctx, const float *xyz, size_t n, double cube, int reps, result *med)
{
    result *all = calloc((size_t)reps, sizeof *all);
    if (!all) return 0;
    for (int k = 0; k < reps; k++)
        if (!run_once(ctx, xyz, n, cube, &all[k])) {
            free(all);
            return 0;
        }
    *med = all[0];
    double v[64];
    for (int s = 0; s < NSTAGE; s++) {
        for (int k = 0; k < reps; k++)
            v[k] = all[k].t[s];
        qsort(v, (size_t)reps, sizeof *v, cmp_double);
        med->t[s] = reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
    }
    for (int k = 1; k < reps; k++)
        if (all[k].hash != all[0].hash) fprintf(stderr, "warning: run %d gave other bytes\n", k);
    free(all);
    return 1;
}

int main(int argc, char **argv)
{
    size_t sizes[16];
    int ns = 0;
    for (int i = 1; i < argc && ns < 16; i++)
        sizes[ns++] = (size_t)strtod(argv[i], NULL);
    if (!ns) {
        sizes[ns++] = 1000000;
        sizes[ns++] = 10000000;
    }
    int reps = getenv("PM_BENCH_REPS") ? atoi(getenv("PM_BENCH_REPS")) : 3;
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    int threads = getenv("PM_BENCH_THREADS") ? atoi(getenv("PM_BENCH_THREADS")) : 0;
    const char *devs = getenv("PM_BENCH_DEVICES") ? getenv("PM_BENCH_DEVICES") : "cpu,cuda";
    double cube = getenv("PM_BENCH_C") ? atof(getenv("PM_BENCH_C")) : 0.5;
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = -1;
        fclose(f);
    }
    printf("bench_postprocess: splashsurf's README pipeline (-r 0.025 -l 2 -c %g -t 0.6, cleanup,\n"
           "smoothing weights, 15 Laplacian iterations, normals, 10 normal-smoothing iterations)\n"
           "on the demo's dam break; median of %d run%s; %s; load average %.2f\n",
           cube, reps, reps == 1 ? "" : "s", pm_build_info(), load);
    for (int si = 0; si < ns; si++) {
        const size_t target = sizes[si];
        const size_t n = demo_scene(target, DEMO_SEED, NULL, NULL);
        float *xyz = malloc(n * 12);
        if (!xyz) {
            fprintf(stderr, "%zu particles: out of host memory\n", n);
            return 1;
        }
        demo_scene(target, DEMO_SEED, xyz, NULL);
        uint64_t hashes[2] = {0, 0};
        for (int d = 0; d < 2; d++) {
            const pm_device want = d ? PM_DEVICE_CUDA : PM_DEVICE_CPU;
            if (!strstr(devs, d ? "cuda" : "cpu")) continue;
            pm_context_desc desc = {sizeof desc, want, 0, threads, NULL};
            pm_context *ctx;
            if (d && !pm_cuda_available()) {
                printf("\n%zu particles, cuda: no usable GPU (skipped)\n", n);
                continue;
            }
            if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) {
                printf("\n%zu particles, %s: no context (%s)\n", n, d ? "cuda" : "cpu",
                       pm_last_error());
                continue;
            }
            result r;
            if (!bench(ctx, xyz, n, cube, reps, &r)) {
                pm_context_destroy(ctx);
                printf("\n%zu particles, %s: failed\n", n, d ? "cuda" : "cpu");
                continue;
            }
            hashes[d] = r.hash;
            printf("\n%zu particles, %s (%s, %d threads): %zu triangles extracted, %zu after the "
                   "cleanup, %zu vertices; mesh hash %016llx\n",
                   n, d ? "cuda" : "cpu", pm_context_device_name(ctx), pm_context_num_threads(ctx),
                   r.tris_raw, r.tris, r.verts, (unsigned long long)r.hash);
            printf("  %-22s %-5s %12s\n", "stage", "where", "median ms");
            double rec = 0, post = 0;
            for (int s = 0; s < NSTAGE; s++) {
                if ((s == S_UPLOAD || s == S_DOWNLOAD) && !d) continue;
                printf("  %-22s %-5s %12.1f\n", stage_name[s],
                       d ? stage_where[s] : (s == S_UPLOAD || s == S_DOWNLOAD ? "-" : "host"),
                       r.t[s]);
                if (stage_post[s])
                    post += r.t[s];
                else
                    rec += r.t[s];
            }
            printf("  %-22s %-5s %12.1f\n", "reconstruction", "", rec);
            printf("  %-22s %-5s %12.1f\n", "post-processing", "", post);
            printf("  post-processing %s the reconstruction (%.2fx)\n",
                   post <= rec ? "costs no more than" : "costs MORE than", post / rec);
            pm_context_destroy(ctx);
        }
        if (hashes[0] && hashes[1])
            printf("  CPU and CUDA meshes: %s\n",
                   hashes[0] == hashes[1] ? "the same bytes" : "DIFFERENT BYTES");
        free(xyz);
    }
    return 0;
}
