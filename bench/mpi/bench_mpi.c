/* pm_mpi_isosurface and pm_mpi_reconstruct scaling and the per-message
 * costs of the exchange (docs/distributed.md). Run under mpirun:
 *   mpirun -n R bench_mpi N [threads] [cpu|cuda]
 *   mpirun -n R bench_mpi particles M [threads] [cpu|cuda]
 * meshes an N^3 f32 field (a few blobs, as the CLI's tests) split in R
 * slabs, each rank on `threads` CPU threads (default 1) or, with cuda, on
 * the GPU of its local rank (ranks of a node take its GPUs in turn; the
 * window is uploaded and the piece extracted there), median of 5 runs
 * after a warm-up, and prints the stages of rank 0 and the slowest rank;
 * then (R >= 2) a ping-pong between ranks 0 and 1 for the message sizes
 * of a ghost slice, giving the latency and bandwidth the 1,024-rank model
 * in docs/distributed.md uses. Strong scaling: one N, several R; weak
 * scaling: N^3 per rank (N scaled by cbrt(R)). `particles`: the demo's
 * dam-break scene (tools/demo_scene.h) of about M particles, every rank
 * passing its contiguous share of the set to pm_mpi_reconstruct (the
 * scene's parameters), median of 3 after a warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramesh_mpi.h"
#include "tools/demo_scene.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static pm_context *rank_context(int threads, int cuda)
{
    pm_context *ctx;
    pm_context_desc d;
    memset(&d, 0, sizeof d);
    d.device = cuda ? PM_DEVICE_CUDA : PM_DEVICE_CPU;
    d.num_threads = threads;
    if (cuda) {
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        int gpus = pm_cuda_device_count();
        d.cuda_device = gpus > 0 && local ? atoi(local) % gpus : 0;
    }
    if (pm_context_create(&d, &ctx) != PM_STATUS_OK) MPI_Abort(MPI_COMM_WORLD, 1);
    return ctx;
}

/* One collective call of the benchmark (the mesh on rank 0). */
typedef pm_status (*mpi_call)(void *arg, pm_context *ctx, pm_mesh *mesh, pm_mpi_report *rep);

/* A warm-up then `runs` calls; rank 0 prints the median of the slowest
 * rank's time and that run's stages, after `what`. */
static void timed_runs(int rank, int ranks, pm_context *ctx, int threads, int cuda, int runs,
                       mpi_call call, void *arg, const char *what)
{
    double total[8], st[8][4];
    size_t tris = 0;
    if (runs > 8) runs = 8;
    for (int it = -1; it < runs; it++) {
        pm_mesh m;
        pm_mpi_report rep;
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        pm_status s = call(arg, ctx, &m, &rep);
        double e = MPI_Wtime() - t;
        if (s != PM_STATUS_OK) {
            if (rank == 0) fprintf(stderr, "bench_mpi: %s\n", pm_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        tris = m.num_triangles;
        pm_mesh_free(ctx, &m);
        if (it < 0) continue;
        double mine[5] = {e, rep.exchange_ms, rep.extract_ms, rep.gather_ms, rep.merge_ms}, mx[5];
        MPI_Reduce(mine, mx, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        total[it] = 1e3 * mx[0];
        for (int k = 0; k < 4; k++) st[it][k] = mx[k + 1];
    }
    if (rank != 0) return;
    char where[160];
    if (cuda) snprintf(where, sizeof where, "%s", pm_context_device_name(ctx));
    else snprintf(where, sizeof where, "%d CPU thread%s", threads, threads == 1 ? "" : "s");
    double sorted[8];
    memcpy(sorted, total, (size_t)runs * sizeof *sorted);
    qsort(sorted, (size_t)runs, sizeof *sorted, cmp_double);
    int med = 0;
    for (int i = 0; i < runs; i++)
        if (total[i] == sorted[runs / 2]) med = i;
    printf("bench_mpi: %s, %d ranks x %s: %zu triangles, median %.1f ms "
           "(slowest rank: exchange %.2f, extract %.1f, gather %.1f, merge %.1f ms)\n",
           what, ranks, where, tris, sorted[runs / 2], st[med][0], st[med][1], st[med][2],
           st[med][3]);
}

typedef struct particle_job {
    const float *xyz;
    size_t n;
    pm_field_params p;
} particle_job;

static pm_status particle_call(void *arg, pm_context *ctx, pm_mesh *m, pm_mpi_report *rep)
{
    const particle_job *J = arg;
    return pm_mpi_reconstruct(ctx, MPI_COMM_WORLD, J->xyz, J->n, &J->p, NULL, NULL, 0, m, rep);
}

typedef struct volume_job {
    pm_lattice lat;
    pm_volume slab;
    size_t z0;
    pm_isosurface_options o;
} volume_job;

static pm_status volume_call(void *arg, pm_context *ctx, pm_mesh *m, pm_mpi_report *rep)
{
    const volume_job *J = arg;
    return pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &J->lat, &J->slab, J->z0, 0.5, &J->o, 0, m, rep);
}

static int particles(int rank, int ranks, size_t target, int threads, int cuda)
{
    size_t n = demo_scene(target, DEMO_SEED, NULL, NULL);
    float *xyz = malloc(n * 3 * sizeof *xyz);
    demo_scene(target, DEMO_SEED, xyz, NULL);
    pm_context *ctx = rank_context(threads, cuda);
    particle_job J;
    memset(&J, 0, sizeof J);
    J.p.struct_size = sizeof J.p;
    J.p.radius = DEMO_RADIUS;
    J.p.smoothing_length = DEMO_SMOOTHING;
    J.p.cube_size = DEMO_CUBE;
    J.p.iso = DEMO_THRESHOLD;
    const size_t a = n * (size_t)rank / (size_t)ranks, b = n * (size_t)(rank + 1) / (size_t)ranks;
    J.xyz = xyz + 3 * a;
    J.n = b - a;
    char what[64];
    snprintf(what, sizeof what, "particles %zu", n);
    timed_runs(rank, ranks, ctx, threads, cuda, 3, particle_call, &J, what);
    pm_context_destroy(ctx);
    free(xyz);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc > 2 && !strcmp(argv[1], "particles")) {
        particles(rank, ranks, (size_t)atof(argv[2]), argc > 3 ? atoi(argv[3]) : 1,
                  argc > 4 && !strcmp(argv[4], "cuda"));
        MPI_Finalize();
        return 0;
    }
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 256;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    size_t z0 = n * (size_t)rank / (size_t)ranks, z1 = n * (size_t)(rank + 1) / (size_t)ranks;
    float *v = malloc(n * n * (z1 - z0) * sizeof *v + 4);
    for (size_t k = z0; k < z1; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = (double)i / (double)n, y = (double)j / (double)n,
                       z = (double)k / (double)n;
                double f = exp(-((x - .3) * (x - .3) + (y - .4) * (y - .4) + (z - .35) * (z - .35)) / .02) +
                           exp(-((x - .7) * (x - .7) + (y - .6) * (y - .6) + (z - .65) * (z - .65)) / .03) +
                           0.3 * sin(20 * x) * sin(17 * y) * sin(23 * z);
                v[(k - z0) * n * n + j * n + i] = (float)f;
            }
    const int cuda = argc > 3 && !strcmp(argv[3], "cuda");
    pm_context *ctx = rank_context(threads, cuda);
    volume_job J;
    memset(&J, 0, sizeof J);
    for (int a = 0; a < 3; a++) {
        J.lat.dims[a] = n;
        J.lat.spacing[a] = 1.0 / (double)n;
    }
    J.slab.data = v;
    J.slab.type = PM_SAMPLE_F32;
    J.slab.nx = J.slab.ny = n;
    J.slab.nz = z1 - z0;
    J.z0 = z0;
    J.o.struct_size = sizeof J.o;
    char what[64];
    snprintf(what, sizeof what, "%zu^3 f32", n);
    timed_runs(rank, ranks, ctx, threads, cuda, 5, volume_call, &J, what);
    /* Ping-pong: latency (8 bytes) and bandwidth (one ghost slice). */
    if (ranks >= 2 && rank < 2) {
        size_t sizes[2] = {8, n * n * 4};
        for (int si = 0; si < 2; si++) {
            char *buf = malloc(sizes[si]);
            memset(buf, 0, sizes[si]);
            int reps = si ? 50 : 1000;
            double t = MPI_Wtime();
            for (int r = 0; r < reps; r++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)sizes[si], MPI_BYTE, 1, 5, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)sizes[si], MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)sizes[si], MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)sizes[si], MPI_BYTE, 0, 5, MPI_COMM_WORLD);
                }
            }
            double one = (MPI_Wtime() - t) / (2.0 * reps);
            if (rank == 0)
                printf("bench_mpi: ping-pong %zu bytes: %.2f us one way (%.2f GB/s)\n", sizes[si],
                       1e6 * one, (double)sizes[si] / one / 1e9);
            free(buf);
        }
    }
    pm_context_destroy(ctx);
    free(v);
    MPI_Finalize();
    return 0;
}
