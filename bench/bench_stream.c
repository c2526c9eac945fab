/* Streamed marching cubes (pm_isosurface_file) against the in-memory path
 * (pm_volume_read + pm_isosurface) on a raw volume file: wall time, the
 * source's read time and MB/s, the walk time, and the identity of the two
 * meshes. The file (a sphere-and-ripples field) is written once to DIR.
 *
 *   bench_stream [N [TYPE [LIMIT_MIB [DIR]]]]   (defaults 512 u16 256 /tmp)
 *
 * The first pass over the file may come from the disk; later passes from
 * the page cache (both are printed: run 1 and the best of 3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pyramesh.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int write_volume(const char *path, size_t n, pm_sample_type type)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t es = pm_sample_size(type);
    unsigned char *row = malloc(n * n * es);
    for (size_t k = 0; k < n; k++) {
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = (double)i / (double)n - 0.5, y = (double)j / (double)n - 0.5,
                       z = (double)k / (double)n - 0.5;
                double v = 0.35 - sqrt(x * x + y * y + z * z) + 0.02 * sin(40 * x) * cos(30 * y);
                double s = 1000.0 + 2000.0 * v; /* iso 1000 */
                size_t p = i + n * j;
                if (type == PM_SAMPLE_U8)
                    ((unsigned char *)row)[p] = (unsigned char)(s < 0 ? 0 : s / 10 > 255 ? 255 : s / 10);
                else if (type == PM_SAMPLE_U16)
                    ((unsigned short *)row)[p] = (unsigned short)(s < 0 ? 0 : s);
                else if (type == PM_SAMPLE_F32)
                    ((float *)row)[p] = (float)s;
                else
                    ((double *)row)[p] = s;
            }
        if (fwrite(row, es, n * n, f) != n * n) {
            fclose(f);
            free(row);
            return 0;
        }
    }
    free(row);
    return fclose(f) == 0;
}

static int same(const pm_mesh *a, const pm_mesh *b)
{
    return a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
           !memcmp(a->positions, b->positions, a->num_vertices * 12) &&
           !memcmp(a->normals, b->normals, a->num_vertices * 12) &&
           !memcmp(a->indices, b->indices, a->num_triangles * 12);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 512;
    const char *tn = argc > 2 ? argv[2] : "u16";
    size_t limit_mib = argc > 3 ? (size_t)atol(argv[3]) : 256;
    const char *dir = argc > 4 ? argv[4] : "/tmp";
    pm_sample_type type = !strcmp(tn, "u8")    ? PM_SAMPLE_U8
                          : !strcmp(tn, "f32") ? PM_SAMPLE_F32
                          : !strcmp(tn, "f64") ? PM_SAMPLE_F64
                                               : PM_SAMPLE_U16;
    const double iso = type == PM_SAMPLE_U8 ? 100.0 : 1000.0;
    char path[512];
    snprintf(path, sizeof path, "%s/pm_bench_stream_%zu_%s.raw", dir, n, pm_sample_type_string(type));
    FILE *probe = fopen(path, "rb");
    if (probe) {
        fclose(probe);
    } else if (!write_volume(path, n, type)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    const double mib = (double)(n * n * n * pm_sample_size(type)) / 1048576.0;
    pm_context *ctx;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    if (pm_context_create(&d, &ctx) != PM_STATUS_OK) return 1;
    printf("volume %zu^3 %s (%.0f MiB) in %s, %d threads, stream limit %zu MiB\n", n,
           pm_sample_type_string(type), mib, path, pm_context_num_threads(ctx), limit_mib);
    pm_raw_options raw;
    memset(&raw, 0, sizeof raw);
    raw.struct_size = sizeof raw;
    raw.nx = raw.ny = raw.nz = n;
    raw.type = type;
    pm_mesh ref, got;
    memset(&ref, 0, sizeof ref);
    for (int run = 0; run < 4; run++) {
        /* Streamed. */
        pm_stream_report R;
        pm_stream_options so = {sizeof so, limit_mib << 20, 0, &R};
        double t0 = now_ms();
        pm_status s = pm_isosurface_file(ctx, path, &raw, iso, NULL, &so, &got);
        double ts = now_ms() - t0;
        if (s != PM_STATUS_OK) {
            fprintf(stderr, "stream: %s\n", pm_last_error());
            return 1;
        }
        /* In memory. */
        t0 = now_ms();
        pm_volume v;
        if (pm_volume_read(path, &raw, 0, &v) != PM_STATUS_OK) return 1;
        double tr = now_ms() - t0;
        pm_mesh m;
        s = pm_isosurface(ctx, &v, iso, NULL, &m);
        double tm = now_ms() - t0;
        pm_volume_free(&v);
        int ok = s == PM_STATUS_OK && same(&got, &m);
        printf("run %d: stream %.0f ms (read %.0f ms = %.0f MB/s, walk %.0f ms, copy %.0f ms; %zu "
               "slabs of %zu, working set %.1f MiB) | in memory %.0f ms (read %.0f ms = %.0f "
               "MB/s, extract %.0f ms) | %zu triangles, %s\n",
               run, ts, R.read_ms, (double)R.bytes_read / 1e3 / R.read_ms, R.walk_ms, R.copy_ms,
               R.slabs, R.slab_slices, (double)R.working_set_bytes / 1048576.0, tm, tr,
               mib * 1.048576 / tr * 1e3, tm - tr, got.num_triangles, ok ? "identical" : "DIFFERENT");
        pm_mesh_free(ctx, &m);
        pm_mesh_free(ctx, &got);
        if (!ok) return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak RSS of the process (includes the in-memory runs): %.0f MiB\n",
           (double)ru.ru_maxrss / 1024.0);
    pm_context_destroy(ctx);
    return 0;
}
