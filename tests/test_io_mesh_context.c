/* pm_mesh_write_context: a mesh in context memory is written with the same
 * bytes as pm_mesh_write writes for its host copy, in every format (on
 * CUDA, a binary PLY streamed from the device in chunks; the others from a
 * downloaded copy; on the CPU, context memory is host memory). Meshes
 * larger than the stream's 8 MiB chunks cover the chunk edges;
 * pm_mesh_write_route names the way each took. A bad index is refused
 * before anything is written, naming the file and the first bad triangle,
 * as pm_mesh_write does; host arrays flagged as context memory are
 * refused on a GPU. */
#define _XOPEN_SOURCE 700

#include "test_common.h"
#include "test_files.h"

/* nv random vertices (normals when asked), nt triangles: indexed with
 * random valid indices, or a soup (nv = 3 nt). */
static pm_mesh host_mesh(size_t nv, size_t nt, int normals, int soup)
{
    pm_mesh m;
    memset(&m, 0, sizeof m);
    if (soup) nv = 3 * nt;
    m.num_vertices = nv;
    m.num_triangles = nt;
    m.positions = malloc(12 * nv + 1);
    for (size_t i = 0; i < 3 * nv; i++)
        m.positions[i] = (float)(pmt_uniform() * 200.0 - 100.0);
    if (normals) {
        m.normals = malloc(12 * nv + 1);
        for (size_t i = 0; i < 3 * nv; i++)
            m.normals[i] = (float)(pmt_uniform() * 2.0 - 1.0);
    }
    if (!soup) {
        m.indices = malloc(12 * nt + 1);
        for (size_t i = 0; i < 3 * nt; i++)
            m.indices[i] = (uint32_t)(pmt_rand() % nv);
    }
    m.owns_arrays = 1;
    return m;
}

static void ctx_mesh_free(pm_context *ctx, pm_mesh *d)
{
    pm_free(ctx, d->positions);
    pm_free(ctx, d->normals);
    pm_free(ctx, d->indices);
}

static void host_mesh_free(pm_mesh *m)
{
    free(m->positions);
    free(m->normals);
    free(m->indices);
}

static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

/* Writes m from host memory and from ctx's memory as ext (ascii: PLY's
 * ASCII form) and compares the files; route: the way expected. */
static void compare(pm_context *ctx, const pm_mesh *h, const pm_mesh *d, const char *tag,
                    const char *ext, int ascii, const char *route)
{
    char na[96], nb[96];
    snprintf(na, sizeof na, "%s_%s_host.%s", tag, ascii ? "a" : "b", ext);
    snprintf(nb, sizeof nb, "%s_%s_ctx.%s", tag, ascii ? "a" : "b", ext);
    const char *pa = path_in(na), *pb = path_in(nb);
    pm_write_options w;
    memset(&w, 0, sizeof w);
    w.struct_size = sizeof w;
    w.ascii = ascii;
    PMT_OK(pm_mesh_write(pa, h, &w));
    const char *got = pm_mesh_write_route(ctx, pb, d, &w);
    PMT_CHECK(got && !strcmp(got, route), "%s: %s written by way of %s, expected %s", tag, nb,
              got ? got : pm_last_error(), route);
    PMT_OK(pm_mesh_write_context(ctx, pb, d, &w));
    PMT_CHECK(same_file(pa, pb), "%s: %s differs from the host mesh's file", tag, nb);
    remove(pa);
    remove(pb);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    make_tmpdir("pm_io_mesh_context");
    const int gpu = dev == PM_DEVICE_CUDA;

    /* Empty, one triangle, a few, and meshes over several 8 MiB chunks
     * (vertex records of 24 bytes, face records of 13). */
    const size_t sizes[][2] = {{0, 0}, {3, 1}, {7, 11}, {1000003, 2000001}};
    for (size_t k = 0; k < 4; k++)
        for (int normals = 0; normals < 2; normals++)
            for (int soup = 0; soup < 2; soup++) {
                const size_t nt = soup && k == 3 ? 700001 : sizes[k][1];
                pm_mesh h = host_mesh(sizes[k][0], nt, normals, soup);
                pm_mesh d = pmt_mesh_to_ctx(ctx, &h);
                char tag[32];
                snprintf(tag, sizeof tag, "m%zu_%d_%d", k, normals, soup);
                compare(ctx, &h, &d, tag, "ply", 0, gpu ? "device-stream" : "host");
                if (k < 3) {
                    /* The formats written from a downloaded copy. */
                    compare(ctx, &h, &d, tag, "ply", 1, gpu ? "device-download" : "host");
                    compare(ctx, &h, &d, tag, "obj", 0, gpu ? "device-download" : "host");
                    compare(ctx, &h, &d, tag, "stl", 0, gpu ? "device-download" : "host");
                }
                /* A host mesh given to pm_mesh_write_context. */
                compare(ctx, &h, &h, tag, "ply", 0, "host");
                ctx_mesh_free(ctx, &d);
                host_mesh_free(&h);
            }

    /* Bad indices: INVALID_ARGUMENT naming the file and the same (first)
     * triangle as pm_mesh_write, nothing written. */
    pm_mesh h = host_mesh(5000, 400000, 1, 0);
    const size_t t = (size_t)(pmt_rand() % 399000);
    h.indices[3 * t + 1] = 5000;
    h.indices[3 * (t + 1 + pmt_rand() % 999) + 2] = 4000000000u;
    h.indices[3 * 399999] = 5001;
    pm_mesh d = pmt_mesh_to_ctx(ctx, &h);
    const char *pa = path_in("bad_host.ply"), *pb = path_in("bad_ctx.ply");
    pm_status sa = pm_mesh_write(pa, &h, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pm_last_error());
    pm_status sb = pm_mesh_write_context(ctx, pb, &d, NULL);
    PMT_CHECK(sa == PM_STATUS_INVALID_ARGUMENT && sb == PM_STATUS_INVALID_ARGUMENT,
              "bad index: %s / %s", pm_status_string(sa), pm_status_string(sb));
    PMT_CHECK(strstr(pm_last_error(), pb) != NULL, "message '%s' does not name %s", pm_last_error(),
              pb);
    char want[64];
    snprintf(want, sizeof want, "triangle %zu refers to vertex 5000 of 5000", t);
    PMT_CHECK(strstr(msg, want) && strstr(pm_last_error(), want), "messages '%s' / '%s', want '%s'",
              msg, pm_last_error(), want);
    PMT_CHECK(access(pa, F_OK) != 0 && access(pb, F_OK) != 0, "a file was written");
    /* Checked before the file is made: into a missing directory, the bad
     * index is the error, as pm_mesh_write's. */
    const char *nodir = path_in("no/such/dir/bad.ply");
    PMT_CHECK(pm_mesh_write_context(ctx, nodir, &d, NULL) == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), want),
              "bad index into a missing directory: '%s'", pm_last_error());
    ctx_mesh_free(ctx, &d);
    /* Host arrays flagged as context memory: on a GPU refused, naming
     * them; on the CPU, context memory is host memory. */
    h.indices[3 * t + 1] = 0;
    h.indices[3 * 399999] = 0;
    for (size_t i = 0; i < 3 * 400000; i++)
        h.indices[i] %= 5000;
    pm_mesh flagged = h;
    flagged.in_context_memory = 1;
    const char *pf = path_in("flagged.ply");
    pm_status sf = pm_mesh_write_context(ctx, pf, &flagged, NULL);
    if (gpu)
        PMT_CHECK(sf == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "positions") &&
                      access(pf, F_OK) != 0,
                  "host arrays flagged as device memory: %s (%s)", pm_status_string(sf),
                  pm_last_error());
    else
        PMT_CHECK(sf == PM_STATUS_OK, "flagged mesh on the CPU: %s", pm_last_error());
    host_mesh_free(&h);

    /* NULL arguments. */
    PMT_CHECK(pm_mesh_write_context(NULL, pb, &h, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "NULL context accepted");
    PMT_CHECK(count_temps(tmpdir) == 0, "temporary files left behind");
    remove_tmpdir();
    pm_context_destroy(ctx);
    return pmt_finish("pm_mesh_write_context");
}
