/* Marching cubes on analytic fields, checked with the independent mesh
 * analysis (pm_mesh_analyze): sphere and torus at 128^3 are closed,
 * manifold and oriented with Euler characteristic 2 and 0, and their area
 * and enclosed volume are within 1% of the analytic values; a gyroid cut by
 * a ball is closed and manifold; the cayley surface is manifold and
 * oriented (it meets the volume's boundary); one volume of non-power-of-two
 * dims (97x65x33) with anisotropic spacing gives the same mesh from every
 * sample type holding the same values; one-cell-thick volumes work; an iso
 * outside the value range gives an empty mesh without error. On a CUDA
 * context every mesh is also compared with the CPU's byte for byte. */
#include <math.h>

#include "test_common.h"
#include "test_volumes.h"

#define PI 3.14159265358979323846

static pm_context *cpu;

/* Extracts (indexed, central normals) on ctx from host samples; on CUDA
 * also compares with the CPU mesh. Caller frees with pm_mesh_free(cpu,...). */
static void extract_side(pm_context *ctx, const pm_volume *hv, double iso, pm_inside inside,
                         pm_mesh *out)
{
    pm_isosurface_options o = {0};
    o.inside = inside;
    size_t cells = hv->nx * hv->ny * hv->nz, bytes = cells * pm_sample_size(hv->type);
    PMT_OK(pm_isosurface(cpu, hv, iso, &o, out));
    if (pm_context_device(ctx) == PM_DEVICE_CUDA) {
        pm_volume dv = *hv;
        dv.data = pmt_to_ctx(ctx, hv->data, bytes);
        pm_mesh g;
        PMT_OK(pm_isosurface(ctx, &dv, iso, &o, &g));
        PMT_CHECK(g.num_vertices == out->num_vertices && g.num_triangles == out->num_triangles &&
                      memcmp(g.positions, out->positions, 12 * g.num_vertices) == 0 &&
                      memcmp(g.normals, out->normals, 12 * g.num_vertices) == 0 &&
                      memcmp(g.indices, out->indices, 12 * g.num_triangles) == 0,
                  "CUDA mesh differs from the CPU mesh");
        pm_mesh_free(ctx, &g);
        pm_free(ctx, (void *)dv.data);
    }
}

/* The fields below are signed distances (negative inside). */
static void extract(pm_context *ctx, const pm_volume *hv, double iso, pm_mesh *out)
{
    extract_side(ctx, hv, iso, PM_INSIDE_BELOW, out);
}

/* CT-like data, as a user meshes a bone or contrast: a bright ball (u16
 * 1000 inside, 0 outside, a linear ramp over two voxels, a little noise) in
 * a dark volume. By default (PM_INSIDE_DEFAULT = above) the surface faces
 * out of the bright region: a positive signed volume close to the ball's,
 * normals pointing away from the centre (to decreasing values), as VTK's
 * flying edges and scikit-image give; PM_INSIDE_BELOW is the same surface
 * turned inside out. */
static void bright_object(pm_context *ctx)
{
    const size_t n = 72;
    const double c = 35.5, R = 24.0;
    uint16_t *v = malloc(n * n * n * sizeof *v);
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double d = sqrt((i - c) * (i - c) + (j - c) * (j - c) + (k - c) * (k - c));
                double t = (R + 1.0 - d) / 2.0; /* 1 inside, 0 outside */
                t = t < 0 ? 0 : t > 1 ? 1 : t;
                v[i + n * (j + n * k)] = (uint16_t)(1000.0 * t + (double)(pmt_rand() % 20));
            }
    pm_volume hv = {v, PM_SAMPLE_U16, n, n, n, 0, 0, {0.5, 0.5, 0.5}, {0, 0, 0}};
    const double ball = 4.0 / 3.0 * M_PI * pow(R * 0.5, 3);
    for (int side = 0; side < 3; side++) {
        const pm_inside in = side == 0 ? PM_INSIDE_DEFAULT : side == 1 ? PM_INSIDE_ABOVE : PM_INSIDE_BELOW;
        pm_mesh m;
        extract_side(ctx, &hv, 510.0, in, &m);
        pm_mesh_report rep;
        PMT_OK(pm_mesh_analyze(&m, &rep));
        const double want = in == PM_INSIDE_BELOW ? -ball : ball;
        PMT_CHECK(rep.closed && fabs(rep.volume / want - 1) < 0.03,
                  "bright ball, inside %d: signed volume %.1f, expected about %.1f (closed %d)", (int)in,
                  rep.volume, want, rep.closed);
        size_t outward = 0;
        for (size_t q = 0; q < m.num_vertices; q++) {
            const float *p = m.positions + 3 * q, *nr = m.normals + 3 * q;
            double dot = 0;
            for (int a = 0; a < 3; a++) dot += (p[a] - c * 0.5) * nr[a];
            outward += dot > 0;
        }
        const int want_out = in != PM_INSIDE_BELOW;
        PMT_CHECK(want_out ? outward > 0.99 * m.num_vertices : outward < 0.01 * m.num_vertices,
                  "bright ball, inside %d: %zu of %zu normals point away from the centre", (int)in, outward,
                  m.num_vertices);
        pm_mesh_free(cpu, &m);
    }
    free(v);
}

static void analytic(pm_context *ctx, int torus)
{
    const size_t n = 128;
    const double R = 0.55, r = 0.25, a = 0.7; /* torus radii, sphere radius */
    double *f =
        pmt_field_f64(torus ? PMT_FIELD_TORUS : PMT_FIELD_SPHERE, n, n, n, torus ? R : a, r);
    float *v = pmt_convert(f, n, n, n, PM_SAMPLE_F32, 0, 0);
    double h = 2.0 / (double)(n - 1);
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {h, h, h}, {-1, -1, -1}};
    pm_mesh m;
    extract(ctx, &vol, 0.0, &m);
    pm_mesh_report rep;
    PMT_OK(pm_mesh_analyze(&m, &rep));
    double area = torus ? 4 * PI * PI * R * r : 4 * PI * a * a;
    double volume = torus ? 2 * PI * PI * R * r * r : 4.0 / 3.0 * PI * a * a * a;
    const char *what = torus ? "torus" : "sphere";
    PMT_CHECK(rep.closed && rep.manifold && rep.oriented, "%s: closed %d manifold %d oriented %d",
              what, rep.closed, rep.manifold, rep.oriented);
    PMT_CHECK(rep.euler == (torus ? 0 : 2) && rep.components == 1, "%s: euler %lld, %zu components",
              what, rep.euler, rep.components);
    PMT_CHECK(fabs(rep.area / area - 1) < 0.01, "%s: area %.6f vs %.6f", what, rep.area, area);
    PMT_CHECK(fabs(rep.volume / volume - 1) < 0.01, "%s: volume %.6f vs %.6f", what, rep.volume,
              volume);
    printf("%s 128^3: %zu vertices, area %.4f (%.4f), volume %.4f (%.4f)\n", what, m.num_vertices,
           rep.area, area, rep.volume, volume);
    pm_mesh_free(cpu, &m);
    free(v);
    free(f);
}

/* Gyroid sin x cos y + sin y cos z + sin z cos x, kept inside a ball:
 * max(gyroid, ball distance) is a closed surface. */
static void gyroid(pm_context *ctx)
{
    const size_t n = 96;
    float *v = malloc(n * n * n * sizeof(float));
    for (size_t k = 0; k < n; k++)
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                double x = pmt_unit(i, n), y = pmt_unit(j, n), z = pmt_unit(k, n), s = 2 * PI;
                double g =
                    sin(s * x) * cos(s * y) + sin(s * y) * cos(s * z) + sin(s * z) * cos(s * x);
                double b = sqrt(x * x + y * y + z * z) - 0.85;
                v[i + n * (j + n * k)] = (float)(g > b ? g : b);
            }
    pm_volume vol = {v, PM_SAMPLE_F32, n, n, n, 0, 0, {1, 1, 1}, {0, 0, 0}};
    pm_mesh m;
    extract(ctx, &vol, 0.0, &m);
    pm_mesh_report rep;
    PMT_OK(pm_mesh_analyze(&m, &rep));
    PMT_CHECK(m.num_triangles > 1000 && rep.closed && rep.manifold && rep.oriented,
              "gyroid: %zu triangles, closed %d manifold %d oriented %d", m.num_triangles,
              rep.closed, rep.manifold, rep.oriented);
    pm_mesh_free(cpu, &m);
    /* The cayley surface meets the boundary: manifold with boundary. */
    float *cy = pmt_cayley_f32(64);
    pm_volume cv = {cy, PM_SAMPLE_F32, 64, 64, 64, 0, 0, {1, 1, 1}, {0, 0, 0}};
    extract(ctx, &cv, 0.0, &m);
    PMT_OK(pm_mesh_analyze(&m, &rep));
    PMT_CHECK(rep.manifold && rep.oriented && rep.boundary_edges > 0 && rep.nonmanifold_edges == 0,
              "cayley: manifold %d oriented %d boundary %zu", rep.manifold, rep.oriented,
              rep.boundary_edges);
    pm_mesh_free(cpu, &m);
    free(cy);
    free(v);
}

/* 97x65x33, anisotropic spacing, integer values 0..255 stored in every
 * sample type: identical meshes. Also one-cell-thick volumes and an iso
 * outside the range. */
static void types_and_shapes(pm_context *ctx)
{
    const size_t nx = 97, ny = 65, nz = 33, cells = nx * ny * nz;
    double *f = malloc(cells * sizeof(double));
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = (i - 48.0) / 40, y = (j - 32.0) / 28, z = (k - 16.0) / 14;
                f[i + nx * (j + ny * k)] = floor(255 * fmin(1.0, sqrt(x * x + y * y + z * z)));
            }
    pm_mesh ref;
    memset(&ref, 0, sizeof ref);
    for (int t = PM_SAMPLE_U8; t <= PM_SAMPLE_F64; t++) {
        void *v = pmt_convert(f, nx, ny, nz, (pm_sample_type)t, 0, 0);
        pm_volume vol = {v, (pm_sample_type)t, nx, ny, nz, 0, 0, {0.5, 1.25, 2.0}, {3, -2, 1}};
        pm_mesh m;
        extract(ctx, &vol, 127.5, &m);
        if (t == PM_SAMPLE_U8) {
            ref = m;
            PMT_CHECK(m.num_triangles > 0, "97x65x33: empty mesh");
        } else {
            PMT_CHECK(m.num_vertices == ref.num_vertices && m.num_triangles == ref.num_triangles &&
                          memcmp(m.positions, ref.positions, 12 * m.num_vertices) == 0 &&
                          memcmp(m.indices, ref.indices, 12 * m.num_triangles) == 0,
                      "type %s gives another mesh than u8",
                      pm_sample_type_string((pm_sample_type)t));
            pm_mesh_free(cpu, &m);
        }
        /* Iso outside the value range: empty, no error. */
        pm_mesh e;
        for (int side = 0; side < 2; side++) {
            extract(ctx, &vol, side ? -1000.0 : 1000.0, &e);
            PMT_CHECK(e.num_triangles == 0 && e.num_vertices == 0,
                      "iso %s the range gave %zu triangles", side ? "below" : "above",
                      e.num_triangles);
            pm_mesh_free(cpu, &e);
        }
        free(v);
    }
    pm_mesh_free(cpu, &ref);
    free(f);
    /* One cell thick along each axis, and plain noise (ambiguous faces
     * everywhere): no edge may be shared by more than two triangles. */
    for (int trial = 0; trial < 12; trial++) {
        int axis = trial % 4;
        size_t d[3] = {17, 13, 11};
        if (axis < 3)
            d[axis] = 2;
        else
            d[0] = d[1] = d[2] = 24;
        size_t c = d[0] * d[1] * d[2];
        float *v = malloc(c * sizeof(float));
        for (size_t p = 0; p < c; p++)
            v[p] = (float)(pmt_uniform() - 0.5);
        pm_volume vol = {v, PM_SAMPLE_F32, d[0], d[1], d[2], 0, 0, {1, 1, 1}, {0, 0, 0}};
        pm_mesh m;
        extract(ctx, &vol, 0.0, &m);
        PMT_CHECK(m.num_triangles > 0, "one cell thick along %d: empty", axis);
        pm_mesh_report rep;
        PMT_OK(pm_mesh_analyze(&m, &rep));
        PMT_CHECK(rep.nonmanifold_edges == 0 && rep.oriented,
                  "thin volume along %d: %zu non-manifold, %zu misoriented edges, %zu degenerate",
                  axis, rep.nonmanifold_edges, rep.misoriented_edges, rep.degenerate_triangles);
        pm_mesh_free(cpu, &m);
        free(v);
    }
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    PMT_OK(pm_context_create(&d, &cpu));
    bright_object(ctx);
    analytic(ctx, 0);
    analytic(ctx, 1);
    gyroid(ctx);
    types_and_shapes(ctx);
    pm_context_destroy(cpu);
    pm_context_destroy(ctx);
    return pmt_finish("test_isosurface_analytic");
}
