/* Sparse particle reconstruction (docs/scale.md) on a synthetic "canyon"
 * modelled on splashsurf's README benchmark (13.35 M particles, r = 0.011,
 * l = 2, c = 1.5, t = 0.6, a virtual grid of about 2 x 10^10 cells): a
 * river 1 unit deep meandering across a 48 x 44 x 44 box (y = 24 + 18
 * sin(x / 5), its bed falling from z = 42 to z = 2), particles on a
 * jittered lattice of spacing 2r. Prints the time of each stage of
 * pm_reconstruct, the brick figures, the library's peak estimate and the
 * process's peak resident memory (getrusage ru_maxrss), and optionally
 * checks the mesh (closed, manifold, oriented) and, for small scenes,
 * that the dense path gives the same bytes.
 *
 * Usage: bench_sparse [--particles N] [--brick B] [--threads T]
 *                     [--grid auto|sparse|dense] [--normals none|central]
 *                     [--device cpu|cuda] [--check] [--compare-dense]
 *                     [--compare-cpu]
 * (default 13350000 particles, brick 0 = default, all threads, sparse,
 * normals none as splashsurf's default output, the CPU). --compare-cpu
 * (with --device cuda): the CPU's sparse mesh of the same scene, timed,
 * and whether the bytes are the same. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pyramesh.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double uniform(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The river: for each x column of the lattice, the points within w/2 of
 * the centre line in y and within the depth above the bed in z. w is set
 * so that about n particles result. */
static float *canyon(size_t n, double r, size_t *count)
{
    const double d = 2.0 * r, X = 48.0, depth = 1.0;
    const size_t nx = (size_t)(X / d);
    double w = (double)n * d * d / ((double)nx * depth);
    size_t ny = (size_t)(w / d), nz = (size_t)(depth / d);
    size_t cap = nx * ny * nz;
    float *xyz = malloc(cap * 3 * sizeof *xyz);
    if (!xyz) return NULL;
    size_t q = 0;
    for (size_t i = 0; i < nx; i++) {
        double x = (double)i * d;
        double yc = 24.0 + 18.0 * sin(x / 5.0), bed = 42.0 - 40.0 * x / X;
        for (size_t k = 0; k < nz; k++)
            for (size_t j = 0; j < ny; j++, q++) {
                xyz[3 * q] = (float)(x + 0.1 * d * (uniform() - 0.5));
                xyz[3 * q + 1] =
                    (float)(yc - 0.5 * w + (double)j * d + 0.1 * d * (uniform() - 0.5));
                xyz[3 * q + 2] = (float)(bed + (double)k * d + 0.1 * d * (uniform() - 0.5));
            }
    }
    *count = q;
    return xyz;
}

int main(int argc, char **argv)
{
    size_t n = 13350000, brick = 0;
    int threads = 0, check = 0, compare = 0, compare_cpu = 0;
    pm_device device = PM_DEVICE_CPU;
    pm_grid_mode grid = PM_GRID_SPARSE;
    pm_normals normals = PM_NORMALS_NONE;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--particles") && i + 1 < argc)
            n = (size_t)atof(argv[++i]);
        else if (!strcmp(argv[i], "--brick") && i + 1 < argc)
            brick = (size_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--grid") && i + 1 < argc) {
            i++;
            grid = !strcmp(argv[i], "dense")  ? PM_GRID_DENSE
                   : !strcmp(argv[i], "auto") ? PM_GRID_AUTO
                                              : PM_GRID_SPARSE;
        } else if (!strcmp(argv[i], "--normals") && i + 1 < argc)
            normals = !strcmp(argv[++i], "central") ? PM_NORMALS_CENTRAL : PM_NORMALS_NONE;
        else if (!strcmp(argv[i], "--check"))
            check = 1;
        else if (!strcmp(argv[i], "--compare-dense"))
            compare = 1;
        else if (!strcmp(argv[i], "--compare-cpu"))
            compare_cpu = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = !strcmp(argv[++i], "cuda") ? PM_DEVICE_CUDA : PM_DEVICE_CPU;
        else {
            fprintf(stderr, "usage: bench_sparse [--particles N] [--brick B] [--threads T] "
                            "[--grid auto|sparse|dense] [--normals none|central] "
                            "[--device cpu|cuda] [--check] [--compare-dense] [--compare-cpu]\n");
            return 2;
        }
    }
    const double r = 0.011;
    size_t count = 0;
    double t0 = now_ms();
    float *xyz = canyon(n, r, &count);
    if (!xyz) {
        fprintf(stderr, "out of memory for %zu particles\n", n);
        return 1;
    }
    double t_scene = now_ms() - t0;
    pm_context_desc desc = {sizeof desc, device, 0, threads, NULL};
    pm_context *ctx;
    if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) {
        fprintf(stderr, "%s\n", pm_last_error());
        return 1;
    }
    pm_field_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.radius = r;
    p.smoothing_length = 2.0;
    p.cube_size = 1.5;
    p.iso = 0.6;
    pm_reconstruct_options ro = {sizeof ro, grid, brick};
    pm_isosurface_options io;
    memset(&io, 0, sizeof io);
    io.struct_size = sizeof io;
    io.normals = normals;
    pm_mesh mesh;
    pm_reconstruct_report rep;
    t0 = now_ms();
    pm_status s = pm_reconstruct(ctx, xyz, count, &p, &ro, &io, &mesh, &rep);
    double wall = now_ms() - t0;
    if (s != PM_STATUS_OK) {
        fprintf(stderr, "pm_reconstruct: %s: %s\n", pm_status_string(s), pm_last_error());
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const pm_lattice *L = &rep.lattice;
    double cells = (double)(L->dims[0] - 1) * (double)(L->dims[1] - 1) * (double)(L->dims[2] - 1);
    printf("canyon: %zu particles (scene %.0f ms), r %g, l 2, c 1.5, t 0.6, %s, %d host threads\n",
           count, t_scene, r, pm_context_device_name(ctx), pm_context_num_threads(ctx));
    printf("grid %llu x %llu x %llu = %.3g cells, path %s", (unsigned long long)L->dims[0],
           (unsigned long long)L->dims[1], (unsigned long long)L->dims[2], cells,
           rep.sparse ? "sparse" : "dense");
    if (rep.sparse)
        printf(", brick %llu, %llu of %.3g bricks occupied (%.3g%%), %llu cells with particles",
               (unsigned long long)rep.brick_points, (unsigned long long)rep.bricks_occupied,
               (double)rep.bricks_total,
               100.0 * (double)rep.bricks_occupied / (double)rep.bricks_total,
               (unsigned long long)rep.occupied_cells);
    printf("\nmesh %zu vertices, %zu triangles\n", mesh.num_vertices, mesh.num_triangles);
    printf("stages (ms; sparse fields and pieces: summed over threads): neighbours+bricks %.0f, "
           "densities %.0f, fields %.0f, pieces %.0f, merge %.0f\n",
           rep.neighbours_ms, rep.density_ms, rep.field_ms, rep.extract_ms, rep.merge_ms);
    printf("wall %.0f ms; peak: library estimate %.0f MB, process maxrss %.0f MB (particles %.0f "
           "MB)\n",
           wall, (double)rep.peak_bytes / 1048576.0, (double)ru.ru_maxrss / 1024.0,
           (double)count * 12.0 / 1048576.0);
    int rc = 0;
    if (check) {
        pm_mesh_check_report cr;
        s = pm_mesh_check(&mesh, PM_CHECK_CLOSED | PM_CHECK_MANIFOLD | PM_CHECK_ORIENTATION, &cr);
        printf("check: %s\n", s == PM_STATUS_OK ? "closed, manifold, oriented" : pm_last_error());
        rc |= s != PM_STATUS_OK;
    }
    if (compare) {
        ro.grid = PM_GRID_DENSE;
        pm_mesh dense;
        pm_reconstruct_report rd;
        t0 = now_ms();
        s = pm_reconstruct(ctx, xyz, count, &p, &ro, &io, &dense, &rd);
        double wd = now_ms() - t0;
        if (s != PM_STATUS_OK) {
            printf("dense: %s: %s\n", pm_status_string(s), pm_last_error());
        } else {
            int same = dense.num_vertices == mesh.num_vertices &&
                       dense.num_triangles == mesh.num_triangles &&
                       !memcmp(dense.positions, mesh.positions, 12 * mesh.num_vertices) &&
                       !memcmp(dense.indices, mesh.indices, 12 * mesh.num_triangles);
            printf("dense: wall %.0f ms (neighbours %.0f, densities %.0f, field %.0f, extract "
                   "%.0f), mesh %s\n",
                   wd, rd.neighbours_ms, rd.density_ms, rd.field_ms, rd.extract_ms,
                   same ? "byte-identical" : "DIFFERENT");
            rc |= !same;
            pm_mesh_free(ctx, &dense);
        }
    }
    if (compare_cpu) {
        pm_context_desc dc = {sizeof dc, PM_DEVICE_CPU, 0, threads, NULL};
        pm_context *cpu;
        pm_mesh other;
        pm_reconstruct_report rc2;
        if (pm_context_create(&dc, &cpu) != PM_STATUS_OK) return 1;
        t0 = now_ms();
        s = pm_reconstruct(cpu, xyz, count, &p, &ro, &io, &other, &rc2);
        double wc = now_ms() - t0;
        if (s != PM_STATUS_OK) {
            printf("cpu: %s: %s\n", pm_status_string(s), pm_last_error());
            rc = 1;
        } else {
            int same = other.num_vertices == mesh.num_vertices &&
                       other.num_triangles == mesh.num_triangles &&
                       !memcmp(other.positions, mesh.positions, 12 * mesh.num_vertices) &&
                       (!mesh.normals ||
                        !memcmp(other.normals, mesh.normals, 12 * mesh.num_vertices)) &&
                       !memcmp(other.indices, mesh.indices, 12 * mesh.num_triangles);
            printf("cpu (%d threads, brick %llu): wall %.0f ms, mesh %s\n",
                   pm_context_num_threads(cpu), (unsigned long long)rc2.brick_points, wc,
                   same ? "byte-identical" : "DIFFERENT");
            rc |= !same;
            pm_mesh_free(cpu, &other);
        }
        pm_context_destroy(cpu);
    }
    pm_mesh_free(ctx, &mesh);
    pm_context_destroy(ctx);
    free(xyz);
    return rc;
}
