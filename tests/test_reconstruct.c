/* Particles to meshes (issue 4 item 7), through the public API as the CLI
 * does it: a jittered lattice of particles filling a sphere gives a closed,
 * manifold, one-piece mesh whose enclosed volume is within 5% of the
 * sphere's, with the SPH and the blur method; a single particle gives one
 * small closed blob; the same input twice gives identical meshes. On a
 * CUDA context the mesh is also compared with the CPU's byte for byte. */
#include <math.h>

#include "test_common.h"

#define PI 3.14159265358979323846

static pm_context *cpu;

/* Field + indexed mesh on ctx from host points. */
static void reconstruct(pm_context *ctx, const float *xyz, size_t n, pm_field_method method,
                        double c, pm_mesh *mesh)
{
    void *d = pmt_to_ctx(ctx, xyz, n * 3 * sizeof(float));
    pm_field_params p = {0};
    p.struct_size = sizeof p;
    p.radius = 0.025;
    p.cube_size = c;
    p.method = method;
    pm_field f;
    PMT_OK(pm_field_compute(ctx, d, n, &p, &f));
    pm_isosurface_options o = {0};
    o.inside = f.inside;
    PMT_OK(pm_isosurface(ctx, &f.volume, f.iso, &o, mesh));
    pm_field_free(ctx, &f);
    pm_free(ctx, d);
}

static void check_same(pm_context *ctx, const float *xyz, size_t n, pm_field_method method,
                       double c, const pm_mesh *m, const char *what)
{
    pm_mesh r;
    (void)ctx;
    reconstruct(cpu, xyz, n, method, c, &r); /* the CPU reference, a second run */
    PMT_CHECK(r.num_vertices == m->num_vertices && r.num_triangles == m->num_triangles &&
                  memcmp(r.positions, m->positions, 12 * r.num_vertices) == 0 &&
                  memcmp(r.normals, m->normals, 12 * r.num_vertices) == 0 &&
                  memcmp(r.indices, m->indices, 12 * r.num_triangles) == 0,
              "%s: mesh differs from the reference run", what);
    pm_mesh_free(cpu, &r);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    PMT_OK(pm_context_create(&d, &cpu));

    /* A sphere of radius R = 12 * 2r filled with particles on a lattice of
     * spacing 2r, each jittered by up to 0.1 r. */
    const double r = 0.025, R = 24 * r;
    size_t cap = 20000, n = 0;
    float *xyz = malloc(cap * 3 * sizeof(float));
    for (int k = -12; k <= 12; k++)
        for (int j = -12; j <= 12; j++)
            for (int i = -12; i <= 12; i++) {
                double x = (i + 0.5) * 2 * r, y = (j + 0.5) * 2 * r, z = (k + 0.5) * 2 * r;
                if (x * x + y * y + z * z > R * R || n == cap) continue;
                xyz[3 * n] = (float)(x + (pmt_uniform() - 0.5) * 0.2 * r + 1.0);
                xyz[3 * n + 1] = (float)(y + (pmt_uniform() - 0.5) * 0.2 * r - 2.0);
                xyz[3 * n + 2] = (float)(z + (pmt_uniform() - 0.5) * 0.2 * r + 0.5);
                n++;
            }
    double sphere = 4.0 / 3.0 * PI * R * R * R;
    for (int method = 0; method < 2; method++) {
        pm_field_method fm = method ? PM_FIELD_BLUR : PM_FIELD_SPH;
        const char *name = method ? "blur" : "sph";
        pm_mesh m;
        reconstruct(ctx, xyz, n, fm, 0.5, &m);
        pm_mesh_report rep;
        PMT_OK(pm_mesh_analyze(&m, &rep));
        PMT_CHECK(rep.closed && rep.manifold && rep.oriented && rep.components == 1 &&
                      rep.euler == 2,
                  "%s sphere: closed %d manifold %d oriented %d components %zu euler %lld", name,
                  rep.closed, rep.manifold, rep.oriented, rep.components, rep.euler);
        PMT_CHECK(fabs(rep.volume / sphere - 1) < 0.05, "%s sphere: volume %.6f vs %.6f", name,
                  rep.volume, sphere);
        printf("%s: %zu particles, %zu triangles, volume %.5f = %.3f of the sphere's\n", name, n,
               m.num_triangles, rep.volume, rep.volume / sphere);
        /* Same input again (and the CPU on a CUDA context): identical. */
        check_same(ctx, xyz, n, fm, 0.5, &m, name);
        pm_mesh_free(ctx, &m);
    }
    /* One particle: one small closed blob. */
    for (int method = 0; method < 2; method++) {
        float one[3] = {0.3f, -0.2f, 7.0f};
        pm_mesh m;
        reconstruct(ctx, one, 1, method ? PM_FIELD_BLUR : PM_FIELD_SPH, 0.25, &m);
        pm_mesh_report rep;
        PMT_OK(pm_mesh_analyze(&m, &rep));
        PMT_CHECK(m.num_triangles > 0 && rep.closed && rep.manifold && rep.components == 1,
                  "single particle (%d): %zu triangles, closed %d, %zu components", method,
                  m.num_triangles, rep.closed, rep.components);
        double ext = rep.bbox_max[0] - rep.bbox_min[0];
        PMT_CHECK(ext > 0 && ext < 8 * r, "single particle blob extent %g", ext);
        pm_mesh_free(ctx, &m);
    }
    free(xyz);
    pm_context_destroy(cpu);
    pm_context_destroy(ctx);
    return pmt_finish("test_reconstruct");
}
