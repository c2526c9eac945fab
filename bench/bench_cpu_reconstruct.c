/* Times the whole particle reconstruction on the CPU (issue 4 item 8):
 * pm_field_compute per stage (neighbour grid, SPH densities, colour field;
 * or splat + blur) and pm_isosurface (extract), for synthetic particle sets
 * already in memory: a dam-break block of jittered particles at rest
 * spacing 2r plus a ball above it. Prints wall and CPU time (getrusage),
 * particles per second, the load average, and an FNV-1a hash of the field
 * bytes (equal hashes = bit-identical fields across code versions).
 *
 * Usage: bench_cpu_reconstruct [N ...]   (default 1e5 1e6 1e7)
 *   c (cube size) = 0.5 (the default) below 10^7 particles, 1.5 (splashsurf's
 *   "canyon" setting) from 10^7 on; PM_BENCH_C overrides it for all sizes.
 *   PM_BENCH_THREADS fixes the thread count, PM_BENCH_METHOD=sph|blur runs
 *   one method (default sph), PM_BENCH_REPS the repetitions (default 3, 1
 *   from 10^7 on; the median is printed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

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
    if (!xyz) return NULL;
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
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* User + system CPU seconds of the process (all threads). */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static void loadavg(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)n, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
}

static uint64_t fnv(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#define MAXREP 9

int main(int argc, char **argv)
{
    size_t sizes[8] = {100000, 1000000, 10000000};
    int nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 8; i++)
            sizes[nsizes++] = (size_t)atof(argv[i]);
    }
    const char *te = getenv("PM_BENCH_THREADS"), *ce = getenv("PM_BENCH_C");
    const char *me = getenv("PM_BENCH_METHOD"), *re = getenv("PM_BENCH_REPS");
    const int method = me && strcmp(me, "blur") == 0;
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, te ? atoi(te) : 0, NULL};
    pm_context *ctx;
    if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) {
        fprintf(stderr, "context: %s\n", pm_last_error());
        return 1;
    }
    char la[128];
    loadavg(la, sizeof la);
    printf("device: %s; /proc/loadavg at start: %s\n", pm_context_device_name(ctx), la);
    printf("wall ms per stage (median); cpu s = user+sys CPU of all threads for the field "
           "(neighbours+density+field) and for extract\n");
    printf("| particles | method | c | grid | neighbours | density | field | extract | total ms "
           "| particles/s | field cpu s | extract cpu s | triangles | field hash | load |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    const double r = 0.025;
    for (int si = 0; si < nsizes; si++) {
        size_t n;
        float *xyz = scene(sizes[si], r, &n);
        if (!xyz) {
            fprintf(stderr, "out of memory for %zu particles\n", sizes[si]);
            return 1;
        }
        int reps = re ? atoi(re) : (sizes[si] >= 10000000 ? 1 : 3);
        if (reps < 1) reps = 1;
        if (reps > MAXREP) reps = MAXREP;
        pm_field_params p;
        memset(&p, 0, sizeof p);
        p.struct_size = sizeof p;
        p.radius = r;
        p.method = (pm_field_method)method;
        p.cube_size = ce ? atof(ce) : (sizes[si] >= 10000000 ? 1.5 : 0.5);
        double tn[MAXREP], td[MAXREP], tf[MAXREP], tx[MAXREP], tt[MAXREP], cf[MAXREP], cx[MAXREP];
        size_t tris = 0;
        uint64_t hash = 0;
        pm_field f;
        memset(&f, 0, sizeof f);
        for (int rep = 0; rep < reps; rep++) {
            double c0 = cpu_s();
            if (pm_field_compute(ctx, xyz, n, &p, &f) != PM_STATUS_OK) {
                fprintf(stderr, "pm_field_compute: %s\n", pm_last_error());
                return 1;
            }
            double c1 = cpu_s();
            tn[rep] = f.timings.neighbours_ms;
            td[rep] = f.timings.density_ms;
            tf[rep] = f.timings.field_ms;
            cf[rep] = c1 - c0;
            if (rep == 0) hash = fnv(f.volume.data, f.volume.nx * f.volume.ny * f.volume.nz * 4);
            pm_isosurface_options o;
            memset(&o, 0, sizeof o);
            o.struct_size = sizeof o;
            o.inside = PM_INSIDE_ABOVE;
            pm_mesh mesh;
            tx[rep] = NAN;
            cx[rep] = NAN;
            if (pm_isosurface(ctx, &f.volume, f.iso, &o, &mesh) == PM_STATUS_OK) {
                tx[rep] = mesh.timings.extract_ms;
                cx[rep] = cpu_s() - c1;
                tris = mesh.num_triangles;
                pm_mesh_free(ctx, &mesh);
            }
            tt[rep] = tn[rep] + td[rep] + tf[rep] + (isnan(tx[rep]) ? 0 : tx[rep]);
            if (rep + 1 < reps) pm_field_free(ctx, &f);
        }
        loadavg(la, sizeof la);
        la[14] = 0; /* the three averages */
        double total = median(tt, reps);
        printf("| %zu | %s | %g | %zu x %zu x %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.3g | %.2f "
               "| %.2f | %zu | %016llx | %s |\n",
               n, method ? "blur" : "sph", p.cube_size, f.volume.nx, f.volume.ny, f.volume.nz,
               median(tn, reps), median(td, reps), median(tf, reps), median(tx, reps), total,
               (double)n / (total * 1e-3), median(cf, reps), median(cx, reps), tris,
               (unsigned long long)hash, la);
        fflush(stdout);
        pm_field_free(ctx, &f);
        free(xyz);
    }
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    printf("peak resident memory: %.2f GB\n", (double)u.ru_maxrss * 1024.0 / 1e9);
    pm_context_destroy(ctx);
    return 0;
}
