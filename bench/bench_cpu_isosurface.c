/* Times pm_isosurface on the CPU backend on the cayley field of ANCHORS.md
 * (f32, N^3 over [-1,1]^3, iso 0): indexed and soup, with and without
 * central-difference normals, 1 and 2 threads. Median of R runs, each a full
 * call (output allocation included). Usage: bench_cpu_isosurface [N...]
 * (default 128 256 384); env PM_BENCH_REPS (default 7). Prints markdown,
 * with the path each call took (pm_isosurface_report.path).
 *
 * The fields of the side-by-side benchmark (bench/peers_cpu.py), written as
 * raw little-endian samples, x fastest:
 *   bench_cpu_isosurface --write-field cayley N PATH   f32 N^3, iso 0
 *   bench_cpu_isosurface --write-field gyroid N PATH   f32 N^3, iso 0
 *   bench_cpu_isosurface --write-field ct N PATH       u8 N x N x (N*300/512)
 * (`--write-field N PATH` is the cayley field.) The gyroid and the CT-like
 * phantom are defined at bench_gyroid and bench_ct below.
 *
 *   bench_cpu_isosurface --serve PATH TYPE NX NY NZ ISO THREADS
 * reads a raw volume (TYPE u8|u16|i16|f32|f64, little-endian, x fastest),
 * then for each line "run" on stdin times one pm_isosurface call (indexed,
 * central normals, THREADS threads, one context kept across calls as an
 * application would) and prints "ms vertices triangles path" (freeing the
 * mesh is not timed); "keep" does the same into the caller's buffers
 * (options.out_positions ...), allocated and touched before the first
 * such call and reused by every later one, as an application meshing
 * frames of the same size would. With PM_BENCH_STAGES set, the stage times
 * of pm_isosurface_report follow the path (timing them adds waits). A peer process can interleave
 * its own runs with these. */
#include <math.h>
#include <stdint.h>
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

/* The gyroid sin x cos y + sin y cos z + sin z cos x with x = 2 pi i / 8
 * (i the lattice index; a period of 8 cells on every axis), in double,
 * rounded to f32. At iso 0 more than half of the cells are active and a
 * cell row of 383 cells (N = 384) holds about 480 triangles. */
#define BENCH_GYROID_PERIOD 8.0
static float *bench_gyroid(size_t n)
{
    float *v = malloc(sizeof(float) * n * n * n);
    double *s = malloc(sizeof(double) * n), *c = malloc(sizeof(double) * n);
    if (!v || !s || !c) return NULL;
    const double pi = 3.14159265358979323846;
    for (size_t i = 0; i < n; i++) {
        s[i] = sin(2.0 * pi * (double)i / BENCH_GYROID_PERIOD);
        c[i] = cos(2.0 * pi * (double)i / BENCH_GYROID_PERIOD);
    }
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                v[i + n * (j + n * k)] = (float)(s[i] * c[j] + s[j] * c[k] + s[k] * c[i]);
    free(s);
    free(c);
    return v;
}

/* splitmix64: the deterministic noise source of the phantom. */
static uint64_t bench_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Roughly normal noise of mean 0 and deviation 1 for sample p: the sum of
 * four uniforms of 16 bits, centred and scaled. */
static double bench_noise(uint64_t p)
{
    uint64_t h = bench_mix(p);
    double s = 0.0;
    for (int q = 0; q < 4; q++)
        s += (double)((h >> (16 * q)) & 0xffff) / 65535.0;
    return (s - 2.0) * 1.7320508075688772; /* sqrt(12 / 4) */
}

/* Partial-volume weight of an object at signed distance d (negative
 * inside, in voxels): a linear ramp over 1.5 voxels, as the averaging of
 * a voxel's footprint blurs an edge. */
static double bench_cover(double d)
{
    double w = 0.5 - d / 1.5;
    return w < 0.0 ? 0.0 : w > 1.0 ? 1.0 : w;
}

/* A CT-like u8 phantom of nx = ny = n, nz = n * 300 / 512 slices (1 voxel
 * = 1 unit; samples are HU / 8 + 125: air 0, water 125, bone 250): a
 * trunk (elliptic cylinder, radii 0.39 n and 0.29 n, varying slowly along
 * z) of soft tissue 125 with a fat layer of 110 under the skin, two lungs
 * (ellipsoids of 20) in the upper part, a spine of vertebral bodies
 * (cylinders of radius 0.05 n, 22-slice bodies and 6-slice discs) with a
 * cortical shell of 235 around trabecular bone of 195, ribs (tubes of
 * radius 0.012 n on ellipses inside the trunk, one every 24 slices, rising
 * towards the front) of cortical bone, and a sternum; every boundary
 * smoothed over 1.5 voxels (bench_cover), then noise of deviation 12 in the
 * body and 4 in air (25 in trabecular bone), rounded and clamped to 0..255.
 * Deterministic (no random state). The bench meshes it at iso 180: the
 * bones, with the noisy trabecular interior a real scan shows. */
static uint8_t *bench_ct(size_t n, size_t *nz_out)
{
    size_t nx = n, ny = n, nz = n * 300 / 512;
    uint8_t *v = malloc(nx * ny * nz);
    if (!v) return NULL;
    const double cx = 0.5 * (double)n, cy = 0.53 * (double)n;
    const double pi = 3.14159265358979323846;
    for (size_t k = 0; k < nz; k++) {
        double z = (double)k, zf = z / (double)nz;
        double ax = 0.39 * (double)n * (1.0 + 0.04 * sin(2.0 * pi * zf));
        double ay = 0.29 * (double)n * (1.0 + 0.03 * cos(3.0 * pi * zf));
        /* Vertebra or disc: bodies of 22 slices, discs of 6. */
        double zm = fmod(z, 28.0);
        double d_body_z = zm < 22.0 ? -fmin(zm, 22.0 - zm) : fmin(zm - 22.0, 28.0 - zm);
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = (double)i - cx, y = (double)j - cy;
                /* Trunk: the ellipse's distance, approximated by scaling. */
                double re = sqrt((x / ax) * (x / ax) + (y / ay) * (y / ay));
                double d_trunk = (re - 1.0) * fmin(ax, ay);
                double val = 0.0, sigma = 4.0;
                double w = bench_cover(d_trunk);
                val = (1.0 - w) * val + w * 110.0;
                w = bench_cover(d_trunk + 0.025 * (double)n); /* under the fat layer */
                val = (1.0 - w) * val + w * 125.0;
                if (d_trunk < 2.0) sigma = 12.0;
                /* Lungs: two ellipsoids in the upper 55% of the slices. */
                for (int s = -1; s <= 1; s += 2) {
                    double lx = (x - s * 0.17 * (double)n) / (0.12 * (double)n);
                    double ly = (y + 0.03 * (double)n) / (0.17 * (double)n);
                    double lz = (z - 0.78 * (double)nz) / (0.33 * (double)nz);
                    double d = (sqrt(lx * lx + ly * ly + lz * lz) - 1.0) * 0.12 * (double)n;
                    w = bench_cover(d);
                    val = (1.0 - w) * val + w * 20.0;
                }
                /* Spine: vertebral bodies behind the centre. */
                double sx = x, sy = y - 0.17 * (double)n, rs = 0.05 * (double)n;
                double d_rad = sqrt(sx * sx + sy * sy) - rs;
                double d_vert = fmax(d_rad, d_body_z);
                w = bench_cover(d_vert);
                val = (1.0 - w) * val + w * 235.0;
                w = bench_cover(d_vert + 3.0); /* trabecular core */
                val = (1.0 - w) * val + w * 195.0;
                if (d_vert < -2.0) sigma = 25.0;
                /* Ribs: a tube on an ellipse inside the trunk every 24
                 * slices, rising by 10 slices towards the front. */
                double ang = atan2(y, x);
                double ex = 0.86 * ax * cos(ang), ey = 0.84 * ay * sin(ang);
                double dr = sqrt(x * x + y * y) - sqrt(ex * ex + ey * ey);
                double rise = 10.0 * (0.5 - 0.5 * sin(ang));
                double zr = fmod(z + 1000.0 - rise, 24.0) - 12.0;
                double rr = 0.012 * (double)n;
                double d_rib = sqrt(dr * dr + zr * zr) - rr;
                if (fabs(sin(ang)) > 0.92 && y < 0) d_rib = 1e9; /* no rib at the sternum gap */
                if (zf < 0.3) d_rib = 1e9;                       /* ribs in the upper 70% */
                w = bench_cover(d_rib);
                val = (1.0 - w) * val + w * 235.0;
                /* Sternum: a flat bar at the front. */
                double d_st =
                    fmax(fabs(x) - 0.03 * (double)n, fabs(y + 0.82 * ay) - 0.012 * (double)n);
                if (zf < 0.4) d_st = 1e9;
                w = bench_cover(d_st);
                val = (1.0 - w) * val + w * 235.0;
                size_t p = i + nx * (j + ny * k);
                val += sigma * bench_noise(p);
                val = floor(val + 0.5);
                v[p] = (uint8_t)(val < 0.0 ? 0.0 : val > 255.0 ? 255.0 : val);
            }
    }
    *nz_out = nz;
    return v;
}

static int write_field(const char *name, size_t n, const char *path)
{
    void *d = NULL;
    size_t bytes = 0;
    if (strcmp(name, "cayley") == 0) {
        d = pmt_cayley_f32(n);
        bytes = sizeof(float) * n * n * n;
    } else if (strcmp(name, "gyroid") == 0) {
        d = bench_gyroid(n);
        bytes = sizeof(float) * n * n * n;
    } else if (strcmp(name, "ct") == 0) {
        size_t nz;
        d = bench_ct(n, &nz);
        bytes = n * n * nz;
    } else {
        fprintf(stderr, "unknown field %s (cayley, gyroid, ct)\n", name);
        return 1;
    }
    FILE *f = d ? fopen(path, "wb") : NULL;
    if (!f || fwrite(d, 1, bytes, f) != bytes || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    free(d);
    return 0;
}

/* --serve: see the comment at the top. */
static int serve(char **a)
{
    static const char *names[] = {"u8", "u16", "i16", "f32", "f64"};
    static const pm_sample_type types[] = {PM_SAMPLE_U8, PM_SAMPLE_U16, PM_SAMPLE_I16,
                                           PM_SAMPLE_F32, PM_SAMPLE_F64};
    int ti = -1;
    for (int q = 0; q < 5; q++)
        if (strcmp(a[1], names[q]) == 0) ti = q;
    if (ti < 0) {
        fprintf(stderr, "unknown sample type %s\n", a[1]);
        return 1;
    }
    size_t nx = (size_t)atol(a[2]), ny = (size_t)atol(a[3]), nz = (size_t)atol(a[4]);
    double iso = atof(a[5]);
    int threads = atoi(a[6]);
    size_t bytes = nx * ny * nz * pm_sample_size(types[ti]);
    void *d = malloc(bytes ? bytes : 1);
    FILE *f = fopen(a[0], "rb");
    if (!d || !f || fread(d, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, a[0]);
        return 1;
    }
    fclose(f);
    pm_volume v = {d, types[ti], nx, ny, nz, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_context_desc desc = {sizeof desc, PM_DEVICE_CPU, 0, threads, NULL};
    pm_context *ctx;
    if (pm_context_create(&desc, &ctx) != PM_STATUS_OK) return 1;
    /* "keep": the caller's buffers, allocated (and touched) once. */
    float *kp = NULL, *kn = NULL;
    uint32_t *ki = NULL;
    size_t kv = 0, kt = 0;
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        int keep = strncmp(line, "keep", 4) == 0;
        if (!keep && strncmp(line, "run", 3) != 0) break;
        pm_isosurface_options o;
        pm_isosurface_report rep;
        memset(&rep, 0, sizeof rep);
        memset(&o, 0, sizeof o);
        rep.timed = getenv("PM_BENCH_STAGES") != NULL;
        o.report = &rep;
        o.mode = PM_MESH_INDEXED;
        o.normals = PM_NORMALS_CENTRAL;
        pm_mesh m;
        if (keep && !kp) {
            /* The counts, then buffers of that size, touched. */
            if (pm_isosurface(ctx, &v, iso, &o, &m) != PM_STATUS_OK) {
                fprintf(stderr, "pm_isosurface: %s\n", pm_last_error());
                return 1;
            }
            kv = m.num_vertices;
            kt = m.num_triangles;
            pm_mesh_free(ctx, &m);
            kp = malloc(12 * kv + 1);
            kn = malloc(12 * kv + 1);
            ki = malloc(12 * kt + 1);
            if (!kp || !kn || !ki) return 1;
            memset(kp, 0, 12 * kv);
            memset(kn, 0, 12 * kv);
            memset(ki, 0, 12 * kt);
        }
        if (keep) {
            o.out_positions = kp;
            o.out_normals = kn;
            o.out_indices = ki;
            o.vertex_capacity = kv;
            o.triangle_capacity = kt;
        }
        double t0 = now_ms();
        pm_status st = pm_isosurface(ctx, &v, iso, &o, &m);
        double t1 = now_ms(); /* the peer's time leaves out freeing its output too */
        if (st != PM_STATUS_OK) {
            fprintf(stderr, "pm_isosurface: %s\n", pm_last_error());
            return 1;
        }
        printf("%.3f %zu %zu %s", t1 - t0, m.num_vertices, m.num_triangles, rep.path);
        for (int q = 0; q < 4 && rep.timed && rep.stage_names[q]; q++)
            printf(" %s=%.2f", rep.stage_names[q], rep.stage_ms[q]);
        printf("\n");
        fflush(stdout);
        pm_mesh_free(ctx, &m);
    }
    free(kp);
    free(kn);
    free(ki);
    pm_context_destroy(ctx);
    free(d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--write-field") == 0)
        return write_field("cayley", (size_t)atol(argv[2]), argv[3]);
    if (argc == 5 && strcmp(argv[1], "--write-field") == 0)
        return write_field(argv[2], (size_t)atol(argv[3]), argv[4]);
    if (argc == 9 && strcmp(argv[1], "--serve") == 0) return serve(argv + 2);
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
