/* Times pm_isosurface on the CPU backend on the cayley field of ANCHORS.md
 * (f32, N^3 over [-1,1]^3, iso 0): indexed and soup, with and without
 * central-difference normals, 1 and 2 threads. Median of R runs, each a full
 * call (output allocation included). Usage: bench_cpu_isosurface [N...]
 * (default 128 256 384); env PM_BENCH_REPS (default 7). Prints markdown,
 * with the path each call took (pm_isosurface_report.path).
 * `bench_cpu_isosurface --write-field N PATH` writes the f32 field as raw
 * little-endian samples (x fastest) for bench/peers_cpu.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/test_volumes.h"
#include "pyramesh.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--write-field") == 0) {
        size_t n = (size_t)atol(argv[2]);
        float *d = pmt_cayley_f32(n);
        FILE *f = fopen(argv[3], "wb");
        if (!f || fwrite(d, sizeof(float), n * n * n, f) != n * n * n || fclose(f)) {
            fprintf(stderr, "cannot write %s\n", argv[3]);
            return 1;
        }
        free(d);
        return 0;
    }
    size_t sizes[8] = {128, 256, 384};
    int nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int a = 1; a < argc && nsizes < 8; a++)
            sizes[nsizes++] = (size_t)atol(argv[a]);
    }
    int reps = getenv("PM_BENCH_REPS") ? atoi(getenv("PM_BENCH_REPS")) : 7;
    if (reps < 1) reps = 1;
    printf("| N | mode | normals | threads | median ms | min ms | vertices | triangles | "
           "Mcells/s | path |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        float *d = pmt_cayley_f32(n);
        pm_volume v = {d, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
        for (int threads = 1; threads <= 2; threads++) {
            pm_context *ctx;
            pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, threads, NULL};
            if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) return 1;
            for (int mode = 0; mode < 2; mode++)
                for (int nm = 0; nm < 2; nm++) {
                    pm_isosurface_options o;
                    pm_isosurface_report rep;
                    memset(&rep, 0, sizeof rep); /* timed is an input */
                    memset(&o, 0, sizeof o);
                    o.report = &rep;
                    o.mode = mode ? PM_MESH_SOUP : PM_MESH_INDEXED;
                    o.normals = nm ? PM_NORMALS_CENTRAL : PM_NORMALS_NONE;
                    double t[64];
                    pm_mesh m;
                    size_t nv = 0, nt = 0;
                    for (int r = 0; r < reps + 1 && r < 64; r++) {
                        double t0 = now_ms();
                        pm_status st = pm_isosurface(ctx, &v, 0.0, &o, &m);
                        double t1 = now_ms();
                        if (st != PM_STATUS_OK) {
                            fprintf(stderr, "pm_isosurface: %s\n", pm_last_error());
                            return 1;
                        }
                        nv = m.num_vertices;
                        nt = m.num_triangles;
                        pm_mesh_free(ctx, &m);
                        if (r) t[r - 1] = t1 - t0; /* first run warms up */
                    }
                    int k = reps < 63 ? reps : 63;
                    qsort(t, (size_t)k, sizeof t[0], cmp_d);
                    double cells = (double)(n - 1) * (n - 1) * (n - 1);
                    printf("| %zu | %s | %s | %d | %.2f | %.2f | %zu | %zu | %.0f | %s |\n", n,
                           mode ? "soup" : "indexed", nm ? "central" : "none", threads, t[k / 2],
                           t[0], nv, nt, cells / (t[k / 2] * 1e3), rep.path);
                    fflush(stdout);
                }
            pm_context_destroy(ctx);
        }
        free(d);
    }
    return 0;
}
