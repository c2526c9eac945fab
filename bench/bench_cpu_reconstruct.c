/* Times pm_field_compute on the CPU per stage (neighbour grid, SPH
 * densities, colour field; blur) for synthetic particle sets: a dam-break
 * block of jittered particles at rest spacing 2r plus a ball above it.
 * Median of 3 runs. Usage: bench_cpu_reconstruct [N ...] (default 1e5 1e6),
 * with PM_BENCH_THREADS to fix the thread count and PM_BENCH_METHOD=sph|blur
 * to run one method. Then extracts the surface
 * when pm_isosurface is available. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramesh.h"

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static double uniform(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

/* About n particles: 85% in a block 2:1:1 on a jittered lattice of spacing
 * 2r, 15% in a ball above it. */
static float *scene(size_t n, double r, size_t *count)
{
    size_t nb = (size_t)(0.85 * (double)n), ns = n - nb;
    size_t gy = (size_t)cbrt((double)nb / 2.0), gx = 2 * gy, gz = gy;
    float *xyz = malloc((gx * gy * gz + ns + 16) * 3 * sizeof *xyz);
    size_t q = 0;
    double d = 2 * r;
    for (size_t k = 0; k < gz; k++)
        for (size_t j = 0; j < gy; j++)
            for (size_t i = 0; i < gx; i++, q++) {
                xyz[3 * q] = (float)(d * i + 0.2 * r * (uniform() - 0.5));
                xyz[3 * q + 1] = (float)(d * j + 0.2 * r * (uniform() - 0.5));
                xyz[3 * q + 2] = (float)(d * k + 0.2 * r * (uniform() - 0.5));
            }
    /* The ball: radius so that ns particles at rest density fill it. */
    double R = cbrt((double)ns * d * d * d * 3.0 / (4.0 * 3.14159265358979));
    double cx = d * gx * 0.5, cy = d * gy * 0.5, cz = d * gz + 2.0 * R;
    for (size_t m = 0; m < ns;) {
        double x = 2 * uniform() - 1, y = 2 * uniform() - 1, z = 2 * uniform() - 1;
        if (x * x + y * y + z * z > 1) continue;
        xyz[3 * q] = (float)(cx + R * x), xyz[3 * q + 1] = (float)(cy + R * y);
        xyz[3 * q + 2] = (float)(cz + R * z);
        q++, m++;
    }
    *count = q;
    return xyz;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median3(double *v)
{
    qsort(v, 3, sizeof *v, cmp_d);
    return v[1];
}

int main(int argc, char **argv)
{
    size_t sizes[8] = {100000, 1000000};
    int nsizes = 2;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++) sizes[nsizes++] = (size_t)atof(argv[i]);
    }
    const char *te = getenv("PM_BENCH_THREADS");
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, te ? atoi(te) : 0, NULL};
    pm_context *ctx;
    if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) {
        fprintf(stderr, "context: %s\n", pm_last_error());
        return 1;
    }
    printf("device: %s\n", pm_context_device_name(ctx));
    printf("| particles | method | grid | neighbours ms | density ms | field ms | total ms | "
           "particles/s | extract ms | triangles |\n|---|---|---|---|---|---|---|---|---|---|\n");
    double r = 0.025;
    for (int si = 0; si < nsizes; si++) {
        size_t n;
        float *xyz = scene(sizes[si], r, &n);
        for (int m = 0; m < 2; m++) {
            const char *only = getenv("PM_BENCH_METHOD");
            if (only && strcmp(only, m ? "blur" : "sph") != 0) continue;
            pm_field_params p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            p.radius = r;
            p.method = (pm_field_method)m;
            double tn[3], td[3], tf[3], tt[3];
            pm_field f;
            memset(&f, 0, sizeof f);
            for (int rep = 0; rep < 3; rep++) {
                if (rep) pm_field_free(ctx, &f);
                if (pm_field_compute(ctx, xyz, n, &p, &f) != PM_STATUS_OK) {
                    fprintf(stderr, "pm_field_compute: %s\n", pm_last_error());
                    return 1;
                }
                tn[rep] = f.timings.neighbours_ms;
                td[rep] = f.timings.density_ms;
                tf[rep] = f.timings.field_ms;
                tt[rep] = tn[rep] + td[rep] + tf[rep];
            }
            double total = median3(tt);
            char ext[64] = "n/a", tri[64] = "n/a";
            pm_isosurface_options o;
            memset(&o, 0, sizeof o);
            o.struct_size = sizeof o;
            o.inside_above = 1;
            pm_mesh mesh;
            if (pm_isosurface(ctx, &f.volume, f.iso, &o, &mesh) == PM_STATUS_OK) {
                snprintf(ext, sizeof ext, "%.1f", mesh.timings.extract_ms);
                snprintf(tri, sizeof tri, "%zu", mesh.num_triangles);
                pm_mesh_free(ctx, &mesh);
            }
            printf("| %zu | %s | %zu x %zu x %zu | %.1f | %.1f | %.1f | %.1f | %.3g | %s | %s |\n", n,
                   m ? "blur" : "sph", f.volume.nx, f.volume.ny, f.volume.nz, median3(tn),
                   median3(td), median3(tf), total, (double)n / (total * 1e-3), ext, tri);
            fflush(stdout);
            pm_field_free(ctx, &f);
        }
        free(xyz);
    }
    pm_context_destroy(ctx);
    return 0;
}
