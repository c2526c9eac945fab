/* Density fields (pm_field_compute): the SPH colour field against a
 * brute-force O(n * grid) reference, analytic cases (one particle, packed
 * lattices, coincident and duplicate particles), thread-count independence,
 * the aabb filter, the memory limit, bad input, the blur method, and (when
 * pm_isosurface is real) a closed manifold surface of a ball,
 * pm_field_compute_async against pm_field_compute (both modes). In cuda
 * mode the CUDA field is compared with the CPU one. */
#include <math.h>

#include "test_common.h"
#include "cpu/density.h"

#define PI 3.14159265358979323846

static pm_field_params params(double r)
{
    pm_field_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.radius = r;
    return p;
}

/* The same defaults pm_field_compute resolves, for the internal call. */
static pm_field_params resolved(double r)
{
    pm_field_params p = params(r);
    p.smoothing_length = 2.0;
    p.cube_size = 0.5;
    p.iso = 0.6;
    p.rest_density = 1000.0;
    p.blur_steps = 2;
    p.max_memory_bytes = (size_t)1 << 32;
    return p;
}

/* splashsurf's cubic spline written straight from the textbook form. */
static double ref_kernel(double d, double h)
{
    double q = d / h, sigma = 8.0 / (PI * h * h * h);
    if (q <= 0.5) return sigma * (6.0 * q * q * q - 6.0 * q * q + 1.0);
    if (q <= 1.0) return sigma * 2.0 * (1.0 - q) * (1.0 - q) * (1.0 - q);
    return 0.0;
}

static double dist(const float *a, const double b[3])
{
    double x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
    return sqrt(x * x + y * y + z * z);
}

static float *field_host(pm_context *ctx, const pm_field *f)
{
    return pmt_to_host(ctx, f->volume.data, f->volume.nx * f->volume.ny * f->volume.nz * 4);
}

static float *upload(pm_context *ctx, const float *xyz, size_t n)
{
    return pmt_to_ctx(ctx, xyz, n * 3 * sizeof(float));
}

static float sample(const pm_field *f, const float *v, size_t i, size_t j, size_t k)
{
    return v[(k * f->volume.ny + j) * f->volume.nx + i];
}

/* Index of the lattice point at world coordinate x on axis a (rounded). */
static size_t lattice_index(const pm_field *f, int a, double x)
{
    return (size_t)llround((x - f->volume.origin[a]) / f->volume.spacing[a]);
}

/* Brute-force reference: rho for every particle, phi at every lattice
 * point, compared with the fast path to 1e-6 relative (the fast path sums
 * in another order and stores f32). */
static void test_brute_force(pm_context *ctx, size_t n, double r, double box)
{
    float *xyz = malloc(n * 3 * sizeof *xyz);
    for (size_t i = 0; i < 3 * n; i++)
        xyz[i] = (float)(box * pmt_uniform() - 0.3 * box);
    pm_field_params p = params(r);
    pm_field f;
    float *d = upload(ctx, xyz, n);
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    float *v = field_host(ctx, &f);
    double h = 4.0 * r, m = 1000.0 * (2 * r) * (2 * r) * (2 * r);
    double *rho = malloc(n * sizeof *rho), *rho_fast = malloc(n * sizeof *rho_fast);
    for (size_t j = 0; j < n; j++) {
        double x[3] = {xyz[3 * j], xyz[3 * j + 1], xyz[3 * j + 2]}, sum = 0;
        for (size_t k = 0; k < n; k++)
            sum += ref_kernel(dist(xyz + 3 * k, x), h);
        rho[j] = m * sum;
    }
    pm_field_params rp = resolved(r);
    PMT_OK(pmi_cpu_particle_densities(ctx, xyz, n, &rp, rho_fast));
    size_t bad = 0;
    for (size_t j = 0; j < n; j++)
        if (!(fabs(rho_fast[j] - rho[j]) <= 1e-9 * rho[j])) bad++;
    PMT_CHECK(bad == 0, "%zu of %zu densities differ from the reference", bad, n);

    double vmax = 0, worst = 0;
    size_t nonzero = 0, nbad = 0;
    for (size_t k = 0; k < f.volume.nz; k++)
        for (size_t j = 0; j < f.volume.ny; j++)
            for (size_t i = 0; i < f.volume.nx; i++) {
                double x[3] = {f.volume.origin[0] + i * f.volume.spacing[0],
                               f.volume.origin[1] + j * f.volume.spacing[1],
                               f.volume.origin[2] + k * f.volume.spacing[2]};
                double phi = 0;
                for (size_t q = 0; q < n; q++)
                    phi += m / rho[q] * ref_kernel(dist(xyz + 3 * q, x), h);
                double got = sample(&f, v, i, j, k), err = fabs(got - phi);
                if (phi > vmax) vmax = phi;
                if (phi > 0) nonzero++;
                /* 1e-6 relative, with a floor for terms at the very edge of
                 * the support where d == h is decided by the last bit. */
                if (!(err <= 1e-6 * phi + 1e-12)) {
                    if (nbad++ < 5)
                        fprintf(stderr, "  phi(%zu,%zu,%zu) = %.9g, reference %.9g\n", i, j, k, got,
                                phi);
                }
                if (phi > 0 && err / phi > worst) worst = err / phi;
            }
    PMT_CHECK(nbad == 0, "%zu lattice points differ from the brute-force field", nbad);
    PMT_CHECK(nonzero > 0 && vmax > 0.1, "field is empty (max %g)", vmax);
    /* The lattice must cover every point within h of a particle, plus one. */
    for (size_t q = 0; q < n; q++)
        for (int a = 0; a < 3; a++) {
            double lo = f.volume.origin[a],
                   hi = lo + (double)((&f.volume.nx)[a] - 1) * f.volume.spacing[a];
            PMT_CHECK(xyz[3 * q + a] - h > lo && xyz[3 * q + a] + h < hi,
                      "grid misses particle %zu", q);
        }
    printf("brute force: %zu particles, grid %zu x %zu x %zu, %zu non-zero points, worst relative "
           "error %.3g\n",
           n, f.volume.nx, f.volume.ny, f.volume.nz, nonzero, worst);
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
    free(v);
    free(xyz);
    free(rho);
    free(rho_fast);
}

/* One particle on a lattice point: rho = m W(0), so phi there is
 * (m / (m W(0))) W(0) = 1, and the field integrates to m / rho = 1 / W(0). */
static void test_single(pm_context *ctx)
{
    double r = 0.5, h = 2.0, s = 0.25;
    float xyz[3] = {1.0f, 2.0f, -3.0f};
    pm_field_params p = params(r);
    pm_field f;
    float *d = upload(ctx, xyz, 1);
    PMT_OK(pm_field_compute(ctx, d, 1, &p, &f));
    float *v = field_host(ctx, &f);
    size_t i = lattice_index(&f, 0, 1.0), j = lattice_index(&f, 1, 2.0),
           k = lattice_index(&f, 2, -3.0);
    double peak = sample(&f, v, i, j, k), sum = 0, vmax = 0;
    size_t np = f.volume.nx * f.volume.ny * f.volume.nz;
    for (size_t q = 0; q < np; q++) {
        sum += v[q];
        if (v[q] > vmax) vmax = v[q];
    }
    double w0 = 8.0 / (PI * h * h * h);
    PMT_CHECK(fabs(peak - 1.0) < 1e-6 && vmax == peak, "peak %.9g, max %.9g", peak, vmax);
    PMT_CHECK(fabs(sum * s * s * s * w0 - 1.0) < 0.01, "integral %g, expected 1/W(0) = %g",
              sum * s * s * s, 1.0 / w0);
    PMT_CHECK(f.particles_used == 1 && f.particles_dropped == 0 && (f.inside != PM_INSIDE_BELOW) == 1 &&
                  f.iso == 0.6 && f.volume.type == PM_SAMPLE_F32 && f.volume.spacing[0] == s,
              "metadata");
    double rho;
    pm_field_params rp = resolved(r);
    PMT_OK(pmi_cpu_particle_densities(ctx, xyz, 1, &rp, &rho));
    double m = 1000.0 * 1.0;
    PMT_CHECK(fabs(rho - m * w0) <= 1e-12 * rho, "rho %.12g, m W(0) = %.12g", rho, m * w0);
    printf("single particle: rho %.6g = m W(0), phi at the particle %.9g, integral * W(0) %.5f\n",
           rho, peak, sum * s * s * s * w0);
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
    free(v);
}

/* Particles on a lattice of spacing 2r (one per (2r)^3): interior rho near
 * rest density, interior phi near 1, for sph and blur. */
static float *block_lattice(size_t g, double r, size_t *n)
{
    *n = g * g * g;
    float *xyz = malloc(*n * 3 * sizeof *xyz);
    size_t q = 0;
    for (size_t k = 0; k < g; k++)
        for (size_t j = 0; j < g; j++)
            for (size_t i = 0; i < g; i++, q++) {
                xyz[3 * q] = (float)(2 * r * i + r);
                xyz[3 * q + 1] = (float)(2 * r * j + r);
                xyz[3 * q + 2] = (float)(2 * r * k + r);
            }
    return xyz;
}

static void interior_range(pm_context *ctx, const pm_field *f, double lo, double hi, double *vmin,
                           double *vmax)
{
    float *v = field_host(ctx, f);
    *vmin = INFINITY;
    *vmax = -INFINITY;
    for (size_t k = lattice_index(f, 2, lo); k <= lattice_index(f, 2, hi); k++)
        for (size_t j = lattice_index(f, 1, lo); j <= lattice_index(f, 1, hi); j++)
            for (size_t i = lattice_index(f, 0, lo); i <= lattice_index(f, 0, hi); i++) {
                double x = sample(f, v, i, j, k);
                if (x < *vmin) *vmin = x;
                if (x > *vmax) *vmax = x;
            }
    free(v);
}

static void test_packed(pm_context *ctx)
{
    double r = 0.25;
    size_t g = 12, n;
    float *xyz = block_lattice(g, r, &n);
    pm_field_params rp = resolved(r);
    double *rho = malloc(n * sizeof *rho);
    PMT_OK(pmi_cpu_particle_densities(ctx, xyz, n, &rp, rho));
    size_t centre = ((g / 2) * g + g / 2) * g + g / 2;
    printf("packed lattice: interior rho %.2f (rest density 1000)\n", rho[centre]);
    PMT_CHECK(fabs(rho[centre] - 1000.0) < 50.0, "interior rho %g", rho[centre]);

    float *d = upload(ctx, xyz, n);
    pm_field f;
    pm_field_params p = params(r);
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    double lo = 2 * r * 4, hi = 2 * r * (g - 4), vmin, vmax;
    interior_range(ctx, &f, lo, hi, &vmin, &vmax);
    printf("packed lattice: interior phi in [%.4f, %.4f]\n", vmin, vmax);
    PMT_CHECK(vmin > 0.97 && vmax < 1.03, "interior phi in [%g, %g]", vmin, vmax);
    pm_field_free(ctx, &f);

    /* Blur: the particles' cubes tile space, so the interior is exactly 1
     * up to rounding, also after blurring. */
    p.method = PM_FIELD_BLUR;
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    interior_range(ctx, &f, lo, hi, &vmin, &vmax);
    printf("blur, packed lattice: interior in [%.6f, %.6f]\n", vmin, vmax);
    PMT_CHECK(vmin > 0.999 && vmax < 1.001, "blur interior in [%g, %g]", vmin, vmax);
    PMT_CHECK(f.iso == 0.6 && (f.inside != PM_INSIDE_BELOW) == 1, "blur metadata");
    /* Far outside the block the blurred field is zero; at the border
     * lattice points too (the margin covers splat and blur). */
    float *v = field_host(ctx, &f);
    double border = 0;
    for (size_t j = 0; j < f.volume.ny; j++)
        for (size_t i = 0; i < f.volume.nx; i++)
            border = fmax(border, sample(&f, v, i, j, 0));
    PMT_CHECK(border == 0, "blur border holds %g", border);
    free(v);
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
    free(xyz);
    free(rho);
}

/* Random clustered particles with the given thread count. */
static void field_with_threads(int threads, const float *xyz, size_t n, pm_field_method method,
                               float **out, size_t *count)
{
    pm_context *c;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, threads, NULL};
    PMT_OK(pm_context_create(&d, &c));
    pm_field_params p = params(0.05);
    p.method = method;
    pm_field f;
    PMT_OK(pm_field_compute(c, xyz, n, &p, &f));
    *count = f.volume.nx * f.volume.ny * f.volume.nz;
    *out = field_host(c, &f);
    pm_field_free(c, &f);
    pm_context_destroy(c);
}

static void test_threads(void)
{
    size_t n = 10000;
    float *xyz = malloc(n * 3 * sizeof *xyz);
    for (size_t i = 0; i < n; i++) { /* a ball, denser in the middle */
        double u = pmt_uniform(), a = 2 * PI * pmt_uniform(), z = 2 * pmt_uniform() - 1;
        double rr = 2.0 * cbrt(u) * u, s = sqrt(1 - z * z);
        xyz[3 * i] = (float)(rr * s * cos(a));
        xyz[3 * i + 1] = (float)(rr * s * sin(a));
        xyz[3 * i + 2] = (float)(rr * z);
    }
    for (int m = 0; m < 2; m++) {
        float *a, *b, *c;
        size_t na, nb, nc;
        field_with_threads(1, xyz, n, (pm_field_method)m, &a, &na);
        field_with_threads(2, xyz, n, (pm_field_method)m, &b, &nb);
        field_with_threads(3, xyz, n, (pm_field_method)m, &c, &nc);
        PMT_CHECK(na == nb && na == nc && memcmp(a, b, na * 4) == 0 && memcmp(a, c, na * 4) == 0,
                  "%s field depends on the thread count", m ? "blur" : "sph");
        free(a);
        free(b);
        free(c);
    }
    printf("threads: sph and blur fields bit-identical with 1, 2 and 3 threads\n");
    free(xyz);
}

/* aabb: the dropped particles are counted and the field equals the field
 * of the kept particles alone (same global lattice, same extents). */
static void test_aabb(pm_context *ctx)
{
    size_t n = 3000, inside = 0;
    float *xyz = malloc(n * 3 * sizeof *xyz), *kept = malloc(n * 3 * sizeof *kept);
    for (size_t i = 0; i < n; i++) {
        for (int a = 0; a < 3; a++)
            xyz[3 * i + a] = (float)(2.0 * pmt_uniform() - 1.0);
        if (xyz[3 * i] <= 0.25f) memcpy(kept + 3 * inside++, xyz + 3 * i, 12);
    }
    pm_field_params p = params(0.04);
    p.use_aabb = 1;
    for (int a = 0; a < 3; a++) {
        p.aabb_min[a] = -2;
        p.aabb_max[a] = 2;
    }
    p.aabb_max[0] = 0.25;
    float *d = upload(ctx, xyz, n), *dk = upload(ctx, kept, inside);
    pm_field f, g;
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    pm_field_params q = params(0.04);
    PMT_OK(pm_field_compute(ctx, dk, inside, &q, &g));
    PMT_CHECK(f.particles_used == inside && f.particles_dropped == n - inside,
              "used %zu dropped %zu, expected %zu and %zu", f.particles_used, f.particles_dropped,
              inside, n - inside);
    size_t np = f.volume.nx * f.volume.ny * f.volume.nz;
    int same = f.volume.nx == g.volume.nx && f.volume.ny == g.volume.ny &&
               f.volume.nz == g.volume.nz && f.volume.origin[0] == g.volume.origin[0];
    float *a = field_host(ctx, &f), *b = same ? field_host(ctx, &g) : NULL;
    PMT_CHECK(same && memcmp(a, b, np * 4) == 0, "aabb field differs from the kept particles'");
    printf("aabb: %zu used, %zu dropped\n", f.particles_used, f.particles_dropped);
    /* Nothing inside: a clear error. */
    p.aabb_min[0] = 5;
    p.aabb_max[0] = 6;
    pm_field e;
    PMT_CHECK(pm_field_compute(ctx, d, n, &p, &e) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "outside the aabb"),
              "all dropped: %s", pm_last_error());
    pm_field_free(ctx, &f);
    pm_field_free(ctx, &g);
    pm_free(ctx, d);
    pm_free(ctx, dk);
    free(a);
    free(b);
    free(xyz);
    free(kept);
}

static void test_memory_limit(pm_context *ctx)
{
    /* Two particles 1e9 radii apart: the grid would need ~1e20 GB. */
    float xyz[6] = {0, 0, 0, 1e9f * 0.01f, 1e9f * 0.01f, 1e9f * 0.01f};
    float *d = upload(ctx, xyz, 2);
    pm_field_params p = params(0.01);
    pm_field f;
    pm_status s = pm_field_compute(ctx, d, 2, &p, &f);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "needs") &&
                  strstr(pm_last_error(), "GB"),
              "spread particles: %s: %s", pm_status_string(s), pm_last_error());
    PMT_CHECK(f.volume.data == NULL, "output set on failure");
    printf("memory limit: \"%s\"\n", pm_last_error());
    /* A moderate grid (about 60^3 points = 0.9 MB) under a 0.5 MB limit;
     * fits under a 64 MB limit. */
    xyz[3] = xyz[4] = xyz[5] = 0.25f;
    pm_upload(ctx, d, xyz, sizeof xyz);
    p.max_memory_bytes = 500000;
    s = pm_field_compute(ctx, d, 2, &p, &f);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "0.0005 GB"),
              "small limit: %s: %s", pm_status_string(s), pm_last_error());
    p.max_memory_bytes = 64u << 20;
    PMT_OK(pm_field_compute(ctx, d, 2, &p, &f));
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
}

/* Coincident particles: k at one point have rho = k m W(0) each, so the
 * field at the point is k (m / (k m W(0))) W(0) = 1. Duplicating every
 * particle of a random set leaves the field unchanged (rho doubles, each
 * term halves, each term appears twice). */
static void test_coincident_and_duplicates(pm_context *ctx)
{
    size_t k = 1000;
    float *xyz = malloc(k * 3 * sizeof *xyz);
    for (size_t i = 0; i < k; i++)
        xyz[3 * i] = 0.5f, xyz[3 * i + 1] = -0.25f, xyz[3 * i + 2] = 0;
    float *d = upload(ctx, xyz, k);
    pm_field_params p = params(0.5);
    pm_field f;
    PMT_OK(pm_field_compute(ctx, d, k, &p, &f));
    float *v = field_host(ctx, &f);
    double at = sample(&f, v, lattice_index(&f, 0, 0.5), lattice_index(&f, 1, -0.25),
                       lattice_index(&f, 2, 0));
    PMT_CHECK(fabs(at - 1.0) < 1e-5, "%zu coincident particles: phi %.9g", k, at);
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
    free(v);
    free(xyz);

    size_t n = 500;
    xyz = malloc(2 * n * 3 * sizeof *xyz);
    for (size_t i = 0; i < 3 * n; i++)
        xyz[i] = (float)pmt_uniform();
    memcpy(xyz + 3 * n, xyz, n * 3 * sizeof *xyz);
    d = upload(ctx, xyz, 2 * n);
    pm_field g;
    p = params(0.03);
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    PMT_OK(pm_field_compute(ctx, d, 2 * n, &p, &g));
    float *a = field_host(ctx, &f), *b = field_host(ctx, &g);
    size_t np = f.volume.nx * f.volume.ny * f.volume.nz, bad = 0;
    for (size_t i = 0; i < np; i++)
        if (!(fabs(a[i] - b[i]) <= 1e-5 * fabs(a[i]) + 1e-9)) bad++;
    PMT_CHECK(g.volume.nx * g.volume.ny * g.volume.nz == np && bad == 0,
              "duplicated particles change %zu field values", bad);
    pm_field_free(ctx, &f);
    pm_field_free(ctx, &g);
    pm_free(ctx, d);
    free(a);
    free(b);
    free(xyz);
}

static void test_bad_input(pm_context *ctx)
{
    pm_field_params p = params(0.1);
    pm_field f;
    float xyz[6] = {0, 0, 0, 1, NAN, 0};
    float *d = upload(ctx, xyz, 2);
    PMT_CHECK(pm_field_compute(ctx, d, 0, &p, &f) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "no particles"),
              "n = 0: %s", pm_last_error());
    PMT_CHECK(pm_field_compute(ctx, d, 2, &p, &f) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "particle 1 "),
              "NaN: %s", pm_last_error());
    PMT_CHECK(f.volume.data == NULL, "output set on failure");
    pm_free(ctx, d);
}

/* A jittered ball, extracted: closed and manifold (every undirected edge
 * in exactly two triangles). Needs a real pm_isosurface. */
static int cmp_edge(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return (*x > *y) - (*x < *y);
}

static void test_ball_surface(pm_context *ctx, pm_field_method method)
{
    double r = 0.05, R = 0.5;
    size_t n = 0, cap = 40000;
    float *xyz = malloc(cap * 3 * sizeof *xyz);
    int g = (int)(R / (2 * r)) + 1;
    for (int k = -g; k <= g; k++)
        for (int j = -g; j <= g; j++)
            for (int i = -g; i <= g; i++) {
                double x = 2 * r * i + 0.3 * r * (pmt_uniform() - 0.5);
                double y = 2 * r * j + 0.3 * r * (pmt_uniform() - 0.5);
                double z = 2 * r * k + 0.3 * r * (pmt_uniform() - 0.5);
                if (x * x + y * y + z * z > R * R || n == cap) continue;
                xyz[3 * n] = (float)x, xyz[3 * n + 1] = (float)y, xyz[3 * n + 2] = (float)z, n++;
            }
    float *d = upload(ctx, xyz, n);
    pm_field_params p = params(r);
    p.method = method;
    pm_field f;
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.inside = f.inside;
    pm_mesh mesh;
    pm_status s = pm_isosurface(ctx, &f.volume, f.iso, &o, &mesh);
    {
        PMT_CHECK(s == PM_STATUS_OK, "pm_isosurface: %s", pm_last_error());
        size_t t = mesh.num_triangles, bad = 0;
        uint64_t *e = malloc((3 * t + 1) * sizeof *e);
        for (size_t q = 0; s == PM_STATUS_OK && q < t; q++)
            for (int c = 0; c < 3; c++) {
                uint64_t a = mesh.indices[3 * q + c], b = mesh.indices[3 * q + (c + 1) % 3];
                e[3 * q + c] = a < b ? (a << 32) | b : (b << 32) | a;
            }
        qsort(e, 3 * t, sizeof *e, cmp_edge);
        for (size_t q = 0; q < 3 * t;) {
            size_t z = q;
            while (z < 3 * t && e[z] == e[q])
                z++;
            if (z - q != 2) bad++;
            q = z;
        }
        PMT_CHECK(t > 100 && bad == 0, "%s ball: %zu triangles, %zu edges not shared by two",
                  method ? "blur" : "sph", t, bad);
        printf("%s ball: %zu particles, %zu triangles, closed and manifold\n",
               method ? "blur" : "sph", n, t);
        free(e);
        pm_mesh_free(ctx, &mesh);
    }
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
    free(xyz);
}

/* cuda mode: the CUDA field against the CPU field (1e-6 relative). */
/* Bit-exactness fingerprints: FNV-1a 64 over the f32 field bytes and the
 * grid (dims, origin) of fixed, self-generated particle sets, and over the
 * SPH densities, for several c / l ratios (cell edges of 1 to 80 lattice
 * points, the slab path included), offset coordinates, an aabb and
 * duplicates. The expected values were recorded from the first (scalar)
 * implementation at commit 836ebed, before the field and density loops were
 * vectorised and re-blocked: any change of a single output bit fails here.
 * The CUDA port must give the same bytes. PM_TEST_PRINT_GOLDEN=1 prints
 * the values instead of checking them. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t golden_state;
static double golden_uniform(void)
{
    golden_state ^= golden_state << 13;
    golden_state ^= golden_state >> 7;
    golden_state ^= golden_state << 17;
    return (double)(golden_state >> 11) * (1.0 / 9007199254740992.0);
}

/* A jittered block of g^3 particles at spacing 2r plus `loose` random ones
 * around it, shifted by `off`. */
static float *golden_scene(size_t g, size_t loose, double r, double off, size_t *n)
{
    golden_state = 0x243F6A8885A308D3ULL ^ (g * 131 + loose);
    *n = g * g * g + loose;
    float *xyz = malloc(*n * 3 * sizeof *xyz);
    size_t q = 0;
    for (size_t k = 0; k < g; k++)
        for (size_t j = 0; j < g; j++)
            for (size_t i = 0; i < g; i++, q++) {
                size_t ijk[3] = {i, j, k};
                for (int a = 0; a < 3; a++)
                    xyz[3 * q + a] =
                        (float)(off + 2 * r * ijk[a] + 0.3 * r * (golden_uniform() - 0.5));
            }
    for (; q < *n; q++)
        for (int a = 0; a < 3; a++)
            xyz[3 * q + a] = (float)(off + (2 * r * g + 6 * r) * golden_uniform() - 3 * r);
    return xyz;
}

static void test_golden(void)
{
    struct {
        size_t g, loose;
        double r, off, c, l;
        int threads, aabb, dup;
        uint64_t field, rho;
    } cases[] = {
        /* g, loose, r, offset, c, l, threads, aabb, dup, field hash, rho hash */
        {12, 300, 0.05, 0.0, 0.5, 2.0, 2, 0, 0, 0xbb334bf91d6a76ddULL, 0x070dc4a125db82f3ULL},
        {12, 300, 0.05, 0.0, 0.5, 2.0, 1, 0, 0, 0xbb334bf91d6a76ddULL, 0x070dc4a125db82f3ULL},
        {14, 400, 0.05, -3.7, 1.5, 2.0, 2, 0, 0, 0x899b107b387fcf4bULL, 0x660290055d5e73c9ULL},
        {10, 200, 0.05, 0.0, 1.0, 2.0, 2, 0, 0, 0x76dbdbb814126994ULL,
         0x505e51546e703610ULL}, /* h/s = 4 exactly */
        {10, 200, 0.05, 0.0, 0.3, 1.5, 2, 0, 0, 0x5ecf7a33447a9efdULL,
         0xdb123c73b8c48ce7ULL}, /* B = 10 */
        {10, 200, 0.05, 0.0, 2.5, 2.0, 2, 0, 0, 0x38ce408190c35d88ULL,
         0xa869c5513c896988ULL}, /* B = 2 */
        {10, 200, 0.05, 0.0, 5.0, 2.0, 2, 0, 0, 0x021b4a76cdf77970ULL,
         0xa869c5513c896988ULL}, /* B = 1 */
        {10, 100, 0.05, 1000.25, 0.5, 2.0, 2, 0, 0, 0x32a05398a11ac1bcULL, 0xecaad158f0fb9796ULL},
        {2, 0, 0.05, 0.0, 0.05, 2.0, 2, 0, 0, 0x347d5815c8340852ULL,
         0x85a31a90694f4df9ULL}, /* B = 80: slabs */
        {3, 20, 0.05, -0.5, 0.1, 1.2, 2, 0, 0, 0x392d1a4681069043ULL,
         0xdfd0444a491eafcbULL}, /* B = 24 */
        {12, 300, 0.05, 0.0, 0.5, 2.0, 2, 1, 0, 0x8e27048e421eac0aULL, 0x0000000000000000ULL},
        {8, 50, 0.05, 0.0, 0.7, 2.0, 3, 0, 1, 0xe935835172fc0a24ULL, 0xca6b5113f81f35baULL},
    };
    const int print = getenv("PM_TEST_PRINT_GOLDEN") != NULL;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        size_t n;
        float *xyz = golden_scene(cases[ci].g, cases[ci].loose, cases[ci].r, cases[ci].off, &n);
        if (cases[ci].dup) /* every 7th particle repeats the one before it */
            for (size_t q = 7; q < n; q += 7)
                memcpy(xyz + 3 * q, xyz + 3 * (q - 1), 12);
        pm_context *c;
        pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, cases[ci].threads, NULL};
        PMT_OK(pm_context_create(&d, &c));
        pm_field_params p = resolved(cases[ci].r);
        p.cube_size = cases[ci].c;
        p.smoothing_length = cases[ci].l;
        if (cases[ci].aabb) {
            p.use_aabb = 1;
            for (int a = 0; a < 3; a++) {
                p.aabb_min[a] = cases[ci].off + 0.2;
                p.aabb_max[a] = cases[ci].off + 0.9;
            }
        }
        pm_field f;
        PMT_OK(pm_field_compute(c, xyz, n, &p, &f));
        size_t np = f.volume.nx * f.volume.ny * f.volume.nz;
        uint64_t hf = fnv(0xcbf29ce484222325ULL, f.volume.data, np * 4);
        size_t dims[3] = {f.volume.nx, f.volume.ny, f.volume.nz};
        hf = fnv(hf, dims, sizeof dims);
        hf = fnv(hf, f.volume.origin, sizeof f.volume.origin);
        uint64_t hr = 0;
        if (!cases[ci].aabb) {
            double *rho = malloc(n * sizeof *rho);
            PMT_OK(pmi_cpu_particle_densities(c, xyz, n, &p, rho));
            hr = fnv(0xcbf29ce484222325ULL, rho, n * sizeof *rho);
            free(rho);
        }
        if (print)
            printf("        {%zu, %zu, %g, %g, %g, %g, %d, %d, %d, 0x%016" PRIx64
                   "ULL, 0x%016" PRIx64 "ULL}, /* %zu x %zu x %zu */\n",
                   cases[ci].g, cases[ci].loose, cases[ci].r, cases[ci].off, cases[ci].c,
                   cases[ci].l, cases[ci].threads, cases[ci].aabb, cases[ci].dup, hf, hr, dims[0],
                   dims[1], dims[2]);
        else
            PMT_CHECK(hf == cases[ci].field && hr == cases[ci].rho,
                      "case %zu (c %g, l %g): field hash %016" PRIx64 " rho hash %016" PRIx64
                      ", recorded %016" PRIx64 " %016" PRIx64,
                      ci, cases[ci].c, cases[ci].l, hf, hr, cases[ci].field, cases[ci].rho);
        pm_field_free(c, &f);
        pm_context_destroy(c);
        free(xyz);
    }
    if (!print)
        printf("golden: %zu fields and densities bit-identical to the recorded scalar ones\n",
               sizeof cases / sizeof cases[0]);
}

/* The sorted-slot runs [b, e) of the (up to 9) rows of neighbour cells
 * around cell (cx, cy, cz), in the documented order (cells z, y, x). */
static int neighbour_runs(const pmi_field_layout *lay, const pmi_cell_list *cells, size_t cx,
                          size_t cy, size_t cz, uint32_t b[9], uint32_t e[9])
{
    int q = 0;
    for (int dz = -1; dz <= 1; dz++)
        for (int dy = -1; dy <= 1; dy++) {
            if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= lay->cdims[2]) || (dy < 0 && cy == 0) ||
                (dy > 0 && cy + 1 >= lay->cdims[1]))
                continue;
            pmi_row_range(lay, cells, cx, ((cz + dz) * lay->cdims[1] + (cy + dy)) * lay->cdims[0],
                          &b[q], &e[q]);
            q++;
        }
    return q;
}

/* The SPH definition (docs/reconstruct.md), one term at a time: rho_j sums
 * W(|x_j - x_k|) over the particles k of the 27 cells around j's cell, in
 * sorted order; phi at a lattice point sums vol_j W over the particles of
 * the 27 cells around the point's cell, in the same order. sph.c's
 * vectorised stages and the CUDA kernels must give the same bits. */
static pm_status ref_volumes(pm_context *ctx, const pmi_field_layout *lay,
                             const pmi_cell_list *cells, double h, double mass, double *vol)
{
    (void)ctx;
    const pmi_sph_kernel w = pmi_sph_kernel_of(h);
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1];
    const float *X = cells->xyz;
    for (size_t c = 0; c < lay->ncells; c++) {
        const size_t cx = c % cdx, cy = (c / cdx) % cdy, cz = c / (cdx * cdy);
        for (uint32_t t = cells->start[c]; t < cells->start[c + 1]; t++) {
            double sum = 0.0;
            uint32_t b[9], e[9];
            const int runs = neighbour_runs(lay, cells, cx, cy, cz, b, e);
            for (int r = 0; r < runs; r++)
                for (uint32_t j = b[r]; j < e[r]; j++) {
                    const double d2 =
                        pmi_dist2((double)X[3 * (size_t)j] - X[3 * (size_t)t],
                                  (double)X[3 * (size_t)j + 1] - X[3 * (size_t)t + 1],
                                  (double)X[3 * (size_t)j + 2] - X[3 * (size_t)t + 2]);
                    if (d2 < w.h2) sum += pmi_sph_w(d2, &w);
                }
            vol[t] = pmi_sph_volume(mass, sum);
        }
    }
    return PM_STATUS_OK;
}

static pm_status ref_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                           double h, const double *vol, float *out)
{
    (void)ctx;
    const pmi_sph_kernel w = pmi_sph_kernel_of(h);
    const size_t B = lay->block, nx = lay->dims[0], ny = lay->dims[1], nz = lay->dims[2];
    const double s = lay->spacing;
    const float *X = cells->xyz;
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                const double lx = pmi_lattice_coord(lay->lo[0] + (int64_t)i, s),
                             ly = pmi_lattice_coord(lay->lo[1] + (int64_t)j, s),
                             lz = pmi_lattice_coord(lay->lo[2] + (int64_t)k, s);
                const size_t cx = i / B, cy = j / B, cz = k / B;
                double acc = 0.0;
                uint32_t b[9], e[9];
                const int runs = neighbour_runs(lay, cells, cx, cy, cz, b, e);
                for (int r = 0; r < runs; r++)
                    for (uint32_t p = b[r]; p < e[r]; p++) {
                        const double d2 =
                            pmi_dist2(X[3 * (size_t)p] - lx, X[3 * (size_t)p + 1] - ly,
                                      X[3 * (size_t)p + 2] - lz);
                        if (d2 < w.h2) acc += vol[p] * pmi_sph_w(d2, &w);
                    }
                out[(k * ny + j) * nx + i] = (float)acc;
            }
    return PM_STATUS_OK;
}

/* The vectorised field against the one-term-at-a-time definition above,
 * byte for byte, on random particle sets, cell sizes, smoothing lengths,
 * offsets and thread counts (the seed is printed on failure). */
static void test_vs_reference(void)
{
    static const pmi_sph_stages reference = {ref_volumes, ref_field};
    const int rounds = 10;
    for (int round = 0; round < rounds; round++) {
        double r = 0.01 + 0.09 * pmt_uniform(), c = 0.25 + 2.75 * pmt_uniform();
        double l = 1.0 + 1.5 * pmt_uniform(), off = 200.0 * pmt_uniform() - 100.0;
        double hs = 2.0 * l / c; /* h in lattice spacings */
        /* About 2e7 kernel evaluations for the scalar reference. */
        size_t budget = (size_t)(2e7 / pow(2.0 * hs + 1.0, 3.0)) + 1, g = 1;
        while ((g + 1) * (g + 1) * (g + 1) * 5 / 4 < budget && g < 14)
            g++;
        size_t n = g * g * g + g * g / 4 + 1;
        float *xyz = malloc(n * 3 * sizeof *xyz);
        for (size_t q = 0; q < n; q++)
            for (int a = 0; a < 3; a++) {
                size_t ijk[3] = {q % g, (q / g) % g, q / (g * g) % g};
                double x = q < g * g * g ? 2 * r * ijk[a] + 0.4 * r * (pmt_uniform() - 0.5)
                                         : (2 * r * g + 4 * r) * pmt_uniform() - 2 * r;
                xyz[3 * q + a] = (float)(off + x);
            }
        if (n > 3) memcpy(xyz + 3 * (n - 1), xyz + 3, 12); /* a duplicate */
        int threads = 1 + (int)(pmt_rand() % 3);
        pm_context *ctx;
        pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, threads, NULL};
        PMT_OK(pm_context_create(&d, &ctx));
        pm_field_params p = resolved(r);
        p.cube_size = c;
        p.smoothing_length = l;
        pm_field fa, fb;
        PMT_OK(pm_field_compute(ctx, xyz, n, &p, &fa));
        PMT_OK(pmi_cpu_field_compute_with(ctx, xyz, n, &p, &reference, &fb));
        size_t np = fa.volume.nx * fa.volume.ny * fa.volume.nz, diff = 0;
        PMT_CHECK(fb.volume.nx * fb.volume.ny * fb.volume.nz == np, "grids differ");
        const float *a = fa.volume.data, *b = fb.volume.data;
        for (size_t i = 0; i < np; i++)
            diff += memcmp(a + i, b + i, 4) != 0;
        PMT_CHECK(diff == 0,
                  "round %d (n %zu, r %g, c %g, l %g, offset %g, %d threads): %zu of %zu values "
                  "differ from the scalar reference",
                  round, n, r, c, l, off, threads, diff, np);
        pm_field_free(ctx, &fa);
        pm_field_free(ctx, &fb);
        pm_context_destroy(ctx);
        free(xyz);
    }
    printf("reference: %d random fields bit-identical to the one-term-at-a-time definition\n",
           rounds);
}

static int compare_with_cpu(pm_context *ctx)
{
    pm_context *cpu;
    pm_context_desc dc = {sizeof dc, PM_DEVICE_CPU, 0, 0, NULL};
    PMT_OK(pm_context_create(&dc, &cpu));
    size_t n = 20000;
    float *xyz = malloc(n * 3 * sizeof *xyz);
    for (size_t i = 0; i < 3 * n; i++)
        xyz[i] = (float)pmt_uniform();
    float *d = upload(ctx, xyz, n);
    for (int m = 0; m < 2; m++) {
        pm_field_params p = params(0.01);
        p.method = (pm_field_method)m;
        pm_field fc, fg;
        pm_status s = pm_field_compute(ctx, d, n, &p, &fg);
        PMT_OK(s);
        PMT_OK(pm_field_compute(cpu, xyz, n, &p, &fc));
        size_t np = fc.volume.nx * fc.volume.ny * fc.volume.nz, bad = 0;
        PMT_CHECK(fg.volume.nx == fc.volume.nx && fg.volume.ny == fc.volume.ny &&
                      fg.volume.nz == fc.volume.nz && fg.volume.origin[2] == fc.volume.origin[2],
                  "grids differ");
        float *a = field_host(cpu, &fc), *b = field_host(ctx, &fg);
        for (size_t i = 0; i < np; i++)
            if (!(fabs(a[i] - b[i]) <= 1e-6 * fabs(a[i]) + 1e-12)) bad++;
        PMT_CHECK(bad == 0, "%s: %zu of %zu values differ from the CPU", m ? "blur" : "sph", bad,
                  np);
        free(a);
        free(b);
        pm_field_free(cpu, &fc);
        pm_field_free(ctx, &fg);
    }
    pm_free(ctx, d);
    free(xyz);
    pm_context_destroy(cpu);
    return 1;
}

/* pm_field_compute_async on one lattice against pm_field_compute: on the
 * field's own lattice (also as pm_field_grid_for_box gives it for the
 * particles' box) byte for byte; on the lattice grown by two neighbour
 * cells on every side byte for byte inside and zero outside; on a window
 * cut 3 points in on every side (particles outside it) within 1e-6
 * relative; the status words (particles used with and without the aabb,
 * the first non-finite particle); then the field's mesh by
 * pm_isosurface_async queued right behind it, against pm_isosurface on the
 * synchronous field (both backends; nothing waits before the end). */
static void async_case(pm_context *ctx, pm_field_method m, int aabb, int nonfinite)
{
    size_t n = 3000;
    float *xyz = malloc(n * 3 * sizeof *xyz);
    for (size_t i = 0; i < 3 * n; i++)
        xyz[i] = (float)(0.2 + 0.6 * pmt_uniform());
    if (nonfinite) {
        xyz[3 * 1234 + 1] = NAN;
        xyz[3 * 2345] = INFINITY;
    }
    float *d = upload(ctx, xyz, n);
    pm_field_params p = params(0.03);
    p.method = m;
    if (aabb) {
        p.use_aabb = 1;
        for (int a = 0; a < 3; a++) {
            p.aabb_min[a] = 0.3;
            p.aabb_max[a] = 0.75;
        }
    }
    pm_field_status *st;
    PMT_OK(pm_alloc(ctx, sizeof *st, (void **)&st));
    pm_field_grid g0 = {{0, 0, 0}, {40, 40, 40}};
    if (nonfinite) {
        float *out;
        PMT_OK(pm_alloc(ctx, 4 * 40 * 40 * 40, (void **)&out));
        PMT_OK(pm_field_compute_async(ctx, d, n, &p, &g0, out, st));
        pm_field_status h;
        PMT_OK(pm_download(ctx, &h, st, sizeof h));
        PMT_CHECK(h.first_nonfinite == 1234,
                  "async field: first non-finite particle %llu, expected 1234",
                  (unsigned long long)h.first_nonfinite);
        pm_free(ctx, out);
        pm_free(ctx, st);
        pm_free(ctx, d);
        free(xyz);
        return;
    }
    pm_field f;
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    const pm_volume *v = &f.volume;
    double bmin[3] = {INFINITY, INFINITY, INFINITY}, bmax[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        const float *q = xyz + 3 * i;
        if (aabb && !(q[0] >= 0.3 && q[0] <= 0.75 && q[1] >= 0.3 && q[1] <= 0.75 && q[2] >= 0.3 &&
                      q[2] <= 0.75))
            continue;
        for (int a = 0; a < 3; a++) {
            bmin[a] = fmin(bmin[a], q[a]);
            bmax[a] = fmax(bmax[a], q[a]);
        }
    }
    PMT_OK(pm_field_grid_for_box(&p, bmin, bmax, &g0));
    const size_t fd[3] = {v->nx, v->ny, v->nz};
    for (int a = 0; a < 3; a++)
        PMT_CHECK(g0.dims[a] == fd[a] && (double)g0.lo[a] * v->spacing[a] == v->origin[a],
                  "pm_field_grid_for_box axis %d: lo %lld dims %zu, the field's %g / %zu", a,
                  (long long)g0.lo[a], g0.dims[a], v->origin[a], fd[a]);
    pm_field_params rp = resolved(0.03);
    rp.method = m;
    const int64_t B = (int64_t)pmi_field_rule_of(&rp).B;
    float *ref = field_host(ctx, &f);
    const char *what =
        m == PM_FIELD_SPH ? (aabb ? "sph, aabb" : "sph") : (aabb ? "blur, aabb" : "blur");
    for (int c = 0; c < 3; c++) {
        /* 0: the field's lattice, 1: grown by 2 cells, 2: cut by 3 points. */
        pm_field_grid g = g0;
        const int64_t grow = c == 0 ? 0 : c == 1 ? 2 * B : -3;
        for (int a = 0; a < 3; a++) {
            g.lo[a] -= grow;
            g.dims[a] = (size_t)((int64_t)g.dims[a] + 2 * grow);
        }
        const size_t np = g.dims[0] * g.dims[1] * g.dims[2];
        float *out;
        PMT_OK(pm_alloc(ctx, 4 * np, (void **)&out));
        PMT_OK(pm_field_compute_async(ctx, d, n, &p, &g, out, st));
        /* The mesh, queued right behind the field. */
        pm_volume fv = {out, PM_SAMPLE_F32, g.dims[0], g.dims[1], g.dims[2], 0,
                        0,   {0, 0, 0},     {0, 0, 0}};
        for (int a = 0; a < 3; a++) {
            fv.spacing[a] = v->spacing[a];
            fv.origin[a] = (double)g.lo[a] * v->spacing[a];
        }
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = PM_MESH_INDEXED;
        o.inside = PM_INSIDE_ABOVE;
        o.output_in_context_memory = 1;
        pm_mesh ms;
        PMT_OK(pm_isosurface(ctx, v, f.iso, &o, &ms));
        float *mp, *mn;
        uint32_t *mi;
        pm_isosurface_counts *mc;
        const size_t vc = ms.num_vertices + 10, tc = ms.num_triangles + 10;
        PMT_OK(pm_alloc(ctx, 12 * vc, (void **)&mp));
        PMT_OK(pm_alloc(ctx, 12 * vc, (void **)&mn));
        PMT_OK(pm_alloc(ctx, 12 * tc, (void **)&mi));
        PMT_OK(pm_alloc(ctx, sizeof *mc, (void **)&mc));
        o.out_positions = mp;
        o.out_normals = mn;
        o.out_indices = mi;
        o.vertex_capacity = vc;
        o.triangle_capacity = tc;
        if (c < 2) PMT_OK(pm_isosurface_async(ctx, &fv, f.iso, &o, mc));
        PMT_OK(pm_context_synchronize(ctx));

        pm_field_status h;
        PMT_OK(pm_download(ctx, &h, st, sizeof h));
        PMT_CHECK(h.particles_used == f.particles_used && h.first_nonfinite == UINT64_MAX,
                  "%s lattice %d: status %llu %llu, expected %zu", what, c,
                  (unsigned long long)h.particles_used, (unsigned long long)h.first_nonfinite,
                  f.particles_used);
        float *got = pmt_to_host(ctx, out, 4 * np);
        size_t differ = 0, far = 0;
        for (size_t k = 0; k < g.dims[2]; k++)
            for (size_t j = 0; j < g.dims[1]; j++)
                for (size_t i = 0; i < g.dims[0]; i++) {
                    const int64_t si = (int64_t)i - grow, sj = (int64_t)j - grow,
                                  sk = (int64_t)k - grow;
                    const int in = si >= 0 && sj >= 0 && sk >= 0 && si < (int64_t)fd[0] &&
                                   sj < (int64_t)fd[1] && sk < (int64_t)fd[2];
                    const float a =
                        in ? ref[((size_t)sk * fd[1] + (size_t)sj) * fd[0] + (size_t)si] : 0.0f;
                    const float b = got[(k * g.dims[1] + j) * g.dims[0] + i];
                    if (memcmp(&a, &b, sizeof a)) differ++;
                    if (!(fabs(a - b) <= 1e-6 * fabs(a) + 1e-12)) far++;
                }
        if (c < 2)
            PMT_CHECK(differ == 0, "%s lattice %d: %zu of %zu values differ from pm_field_compute",
                      what, c, differ, np);
        PMT_CHECK(far == 0, "%s lattice %d: %zu of %zu values differ by more than 1e-6", what, c,
                  far, np);
        if (c < 2) {
            /* Same field values: the same mesh, moved by whole points in
             * index only (positions are absolute). */
            pm_isosurface_counts hc;
            PMT_OK(pm_download(ctx, &hc, mc, sizeof hc));
            PMT_CHECK(hc.num_vertices == ms.num_vertices && hc.num_triangles == ms.num_triangles &&
                          hc.flags == 0,
                      "%s lattice %d: async mesh %llu/%llu flags %llu, expected %zu/%zu", what, c,
                      (unsigned long long)hc.num_vertices, (unsigned long long)hc.num_triangles,
                      (unsigned long long)hc.flags, ms.num_vertices, ms.num_triangles);
            if (c == 0 && hc.num_vertices == ms.num_vertices &&
                hc.num_triangles == ms.num_triangles) {
                float *a = pmt_to_host(ctx, mp, 12 * ms.num_vertices),
                      *b = pmt_to_host(ctx, ms.positions, 12 * ms.num_vertices);
                uint32_t *ia = pmt_to_host(ctx, mi, 12 * ms.num_triangles),
                         *ib = pmt_to_host(ctx, ms.indices, 12 * ms.num_triangles);
                PMT_CHECK(
                    !memcmp(a, b, 12 * ms.num_vertices) && !memcmp(ia, ib, 12 * ms.num_triangles),
                    "%s: the async field's async mesh differs from the synchronous one", what);
                free(a);
                free(b);
                free(ia);
                free(ib);
            }
        }
        free(got);
        pm_free(ctx, out);
        pm_free(ctx, mp);
        pm_free(ctx, mn);
        pm_free(ctx, mi);
        pm_free(ctx, mc);
        pm_mesh_free(ctx, &ms);
    }
    free(ref);
    pm_field_free(ctx, &f);
    pm_free(ctx, st);
    pm_free(ctx, d);
    free(xyz);
}

static void test_async(pm_context *ctx)
{
    for (int m = 0; m < 2; m++)
        for (int aabb = 0; aabb < 2; aabb++)
            async_case(ctx, (pm_field_method)m, aabb, 0);
    async_case(ctx, PM_FIELD_SPH, 0, 1);
    pm_field_grid g = {{0, 0, 0}, {1, 40, 40}};
    pm_field_params p = params(0.03);
    float one[3] = {0.5f, 0.5f, 0.5f}, *d = upload(ctx, one, 1), *out;
    pm_field_status *st;
    PMT_OK(pm_alloc(ctx, 4 * 40 * 40 * 2, (void **)&out));
    PMT_OK(pm_alloc(ctx, sizeof *st, (void **)&st));
    PMT_CHECK(pm_field_compute_async(ctx, d, 1, &p, &g, out, st) == PM_STATUS_INVALID_ARGUMENT,
              "a lattice of one point per row must be refused");
    PMT_CHECK(pm_field_compute_async(ctx, d, 1, &p, &g, out, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "a NULL status must be refused");
    pm_free(ctx, out);
    pm_free(ctx, st);
    pm_free(ctx, d);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    test_async(ctx);
    if (dev == PM_DEVICE_CUDA) {
        int ran = compare_with_cpu(ctx);
        pm_context_destroy(ctx);
        if (!ran) return PMT_SKIP;
        return pmt_finish("test_density cuda");
    }
    test_golden();
    test_vs_reference();
    test_brute_force(ctx, 1, 0.1, 1.0);
    test_brute_force(ctx, 2, 0.1, 0.3);
    test_brute_force(ctx, 250, 0.05, 0.6);
    test_single(ctx);
    test_packed(ctx);
    test_threads();
    test_aabb(ctx);
    test_memory_limit(ctx);
    test_coincident_and_duplicates(ctx);
    test_bad_input(ctx);
    test_ball_surface(ctx, PM_FIELD_SPH);
    test_ball_surface(ctx, PM_FIELD_BLUR);
    pm_context_destroy(ctx);
    return pmt_finish("test_density");
}
