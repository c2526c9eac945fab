/* Hostile numerics: volumes full of NaN, NaN islands,
 * infinities, denormals around the iso value, constant volumes, iso equal
 * to every sample; particles all at one point, duplicated, or spread over
 * 1e9 radii. Nothing may crash and no vertex or normal may be NaN. Runs on
 * the device under test (cuda: compared with the CPU mesh byte for byte). */
#include <math.h>

#include "test_common.h"

static int mesh_finite(const pm_mesh *m)
{
    for (size_t i = 0; i < 3 * m->num_vertices; i++) {
        if (!isfinite(m->positions[i])) return 0;
        if (m->normals && !isfinite(m->normals[i])) return 0;
    }
    return 1;
}

/* Extracts on ctx (host output) and, on a CUDA context, compares with the
 * CPU context's mesh. Returns the triangle count. */
static size_t extract(pm_context *ctx, pm_context *cpu, const float *host, size_t n, double iso,
                      pm_mesh_mode mode, pm_normals normals, const char *what)
{
    size_t bytes = n * n * n * sizeof(float);
    void *d = pmt_to_ctx(ctx, host, bytes);
    pm_volume v = {d, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_isosurface_options o = {sizeof o, normals, mode, 0, 0, NULL, NULL, NULL, 0, 0, NULL};
    pm_mesh m;
    PMT_OK(pm_isosurface(ctx, &v, iso, &o, &m));
    PMT_CHECK(mesh_finite(&m), "%s: non-finite vertex or normal", what);
    if (cpu != ctx) {
        pm_volume hv = v;
        hv.data = host;
        pm_mesh r;
        PMT_OK(pm_isosurface(cpu, &hv, iso, &o, &r));
        PMT_CHECK(r.num_vertices == m.num_vertices && r.num_triangles == m.num_triangles &&
                      memcmp(r.positions, m.positions, 12 * r.num_vertices) == 0,
                  "%s: CUDA mesh differs from the CPU mesh", what);
        pm_mesh_free(cpu, &r);
    }
    size_t t = m.num_triangles;
    pm_mesh_free(ctx, &m);
    pm_free(ctx, d);
    return t;
}

int main(int argc, char **argv)
{
    pm_context *ctx, *cpu;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    pm_context_desc cd = {sizeof cd, PM_DEVICE_CPU, 0, 0, NULL};
    PMT_OK(pm_context_create(&cd, &cpu));
    const size_t n = 24, cells = n * n * n;
    float *v = malloc(cells * sizeof(float));
    static const pm_normals modes[] = {PM_NORMALS_NONE, PM_NORMALS_FORWARD, PM_NORMALS_CENTRAL,
                                       PM_NORMALS_SOBEL};

    /* All NaN: nothing is inside, so no triangle. */
    for (size_t i = 0; i < cells; i++)
        v[i] = NAN;
    PMT_CHECK(extract(ctx, cpu, v, n, 0.0, PM_MESH_INDEXED, PM_NORMALS_CENTRAL, "all NaN") == 0,
              "NaN volume gave triangles");
    /* Constant volume, and iso equal to every sample. */
    for (size_t i = 0; i < cells; i++)
        v[i] = 3.0f;
    PMT_CHECK(extract(ctx, cpu, v, n, 3.0, PM_MESH_SOUP, PM_NORMALS_SOBEL, "iso == samples") == 0,
              "constant volume gave triangles");

    /* A sphere with NaN islands, infinities and denormal values near iso 0,
     * for every normal mode and both mesh modes. */
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = i - 11.5, y = j - 11.5, z = k - 11.5;
                float s = (float)(sqrt(x * x + y * y + z * z) - 8.0);
                uint64_t r = pmt_rand() % 100;
                if (r < 3)
                    s = NAN;
                else if (r < 5)
                    s = (r & 1) ? INFINITY : -INFINITY;
                else if (r < 15)
                    s = (r & 1) ? 1e-40f : -1e-40f; /* denormals */
                v[i + n * (j + n * k)] = s;
            }
    for (int m = 0; m < 4; m++) {
        extract(ctx, cpu, v, n, 0.0, PM_MESH_INDEXED, modes[m], "noisy sphere indexed");
        extract(ctx, cpu, v, n, 0.0, PM_MESH_SOUP, modes[m], "noisy sphere soup");
        extract(ctx, cpu, v, n, 1e-41, PM_MESH_INDEXED, modes[m], "denormal iso");
    }
    free(v);

    /* Particles: all at one point, duplicated, spread over 1e9 radii. */
    const size_t np = 500;
    float *p = malloc(np * 3 * sizeof(float));
    for (size_t i = 0; i < 3 * np; i++)
        p[i] = 1.25f;
    void *pd = pmt_to_ctx(ctx, p, np * 3 * sizeof(float));
    pm_field_params fp = {0};
    fp.struct_size = sizeof fp;
    fp.radius = 0.1;
    fp.max_memory_bytes = (size_t)1 << 30;
    for (int method = 0; method < 2; method++) {
        fp.method = (pm_field_method)method;
        pm_field f;
        pm_status s = pm_field_compute(ctx, pd, np, &fp, &f);
        PMT_OK(s);
        pm_isosurface_options o = {0};
        o.inside = f.inside;
        pm_mesh m;
        PMT_OK(pm_isosurface(ctx, &f.volume, f.iso, &o, &m));
        PMT_CHECK(m.num_triangles > 0 && mesh_finite(&m), "one-point particles: %zu triangles",
                  m.num_triangles);
        pm_mesh_free(ctx, &m);
        pm_field_free(ctx, &f);
    }
    pm_free(ctx, pd);
    for (size_t i = 0; i < np; i++) {
        p[3 * i] = (float)(i * 1e8); /* 1e9 radii apart in x */
        p[3 * i + 1] = (float)(i % 7);
        p[3 * i + 2] = 0.0f;
    }
    pd = pmt_to_ctx(ctx, p, np * 3 * sizeof(float));
    fp.method = PM_FIELD_SPH;
    pm_field f;
    pm_status s = pm_field_compute(ctx, pd, np, &fp, &f);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY, "spread particles: %s", pm_status_string(s));
    if (s == PM_STATUS_OUT_OF_MEMORY)
        PMT_CHECK(strstr(pm_last_error(), "GB") != NULL, "message lacks the figure: %s",
                  pm_last_error());
    pm_free(ctx, pd);
    free(p);
    pm_context_destroy(cpu);
    pm_context_destroy(ctx);
    return pmt_finish("test_robust");
}
