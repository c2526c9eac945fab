/* pm_isosurface_stream and the file sources against pm_isosurface on the
 * whole volume: the same mesh, byte for byte, for every sample type,
 * normals mode, mesh mode, inside side, slab thickness (1, 2, 3, odd,
 * all) and thread count; raw and NRRD files (plain with header offsets,
 * big-endian, gzip); errors (truncated files, a failing source, a limit
 * too small) leave no mesh; the working set stays within the limit (the
 * report's accounting and getrusage). Slabs as mesh pieces on several
 * contexts (core/slab_pieces.c: pm_isosurface_multi, and a source read in
 * order by concurrent workers): the same mesh. The cuda run: the same on
 * the GPU: pm_isosurface_stream through the device (a source, a memory
 * source, a limit that forces thin slabs, a limit too small, a failing
 * source), pm_isosurface's slab path (hook "slabs"), pm_isosurface_multi
 * on the GPU alone and beside a CPU context. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <sys/resource.h>
#include <unistd.h>

#include "test_files.h"
#include "test_volumes.h"
#include "core/slab_pieces.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int same_mesh(const pm_mesh *a, const pm_mesh *b, const char *what)
{
    int ok = a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
             a->active_cells == b->active_cells && !a->normals == !b->normals &&
             !a->indices == !b->indices;
    if (ok && a->num_vertices)
        ok = !memcmp(a->positions, b->positions, a->num_vertices * 3 * sizeof(float)) &&
             (!a->normals || !memcmp(a->normals, b->normals, a->num_vertices * 3 * sizeof(float)));
    if (ok && a->indices && a->num_triangles)
        ok = !memcmp(a->indices, b->indices, a->num_triangles * 3 * sizeof(uint32_t));
    PMT_CHECK(ok, "%s: streamed mesh (%zu v, %zu t) differs from the in-memory one (%zu v, %zu t)",
              what, a->num_vertices, a->num_triangles, b->num_vertices, b->num_triangles);
    return ok;
}

/* A volume in memory delivered as a source; checks the read contract. */
typedef struct mem_src {
    const unsigned char *data;
    size_t slice_bytes, nz, next;
    size_t fail_at; /* a slice whose read fails (SIZE_MAX: none) */
    int contract_broken;
    size_t most_slices; /* the largest read */
} mem_src;

static pm_status mem_read(void *user, size_t z0, size_t z1, void *dst)
{
    mem_src *m = user;
    if (z0 != m->next || z1 <= z0 || z1 > m->nz) m->contract_broken = 1;
    if (z1 - z0 > m->most_slices) m->most_slices = z1 - z0;
    if (m->fail_at >= z0 && m->fail_at < z1) return PM_STATUS_IO_ERROR;
    memcpy(dst, m->data + z0 * m->slice_bytes, (z1 - z0) * m->slice_bytes);
    m->next = z1;
    return PM_STATUS_OK;
}

static pm_volume_source mem_source(const pm_volume *v, mem_src *m)
{
    memset(m, 0, sizeof *m);
    m->data = v->data;
    m->slice_bytes = v->nx * v->ny * pm_sample_size(v->type);
    m->nz = v->nz;
    m->fail_at = SIZE_MAX;
    pm_volume_source s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    s.type = v->type;
    s.nx = v->nx;
    s.ny = v->ny;
    s.nz = v->nz;
    for (int a = 0; a < 3; a++) {
        s.spacing[a] = v->spacing[a];
        s.origin[a] = v->origin[a];
    }
    s.read = mem_read;
    s.user = m;
    return s;
}

/* A random volume around iso: a smooth blob plus noise, some samples
 * exactly iso and, for floats, NaN and infinities. */
static void *random_volume(pm_sample_type t, size_t nx, size_t ny, size_t nz, double iso)
{
    size_t n = nx * ny * nz;
    double *d = calloc(n, sizeof *d);
    double r = 0.3 + 0.6 * pmt_uniform(), noise = 40.0 * pmt_uniform();
    for (size_t k = 0; k < nz; k++)
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = pmt_unit(i, nx), y = pmt_unit(j, ny), z = pmt_unit(k, nz);
                double w =
                    iso + 80.0 * (r - sqrt(x * x + y * y + z * z)) + noise * (pmt_uniform() - 0.5);
                if (pmt_uniform() < 0.05) w = iso;
                d[i + nx * (j + ny * k)] = w;
            }
    void *v = pmt_convert(d, nx, ny, nz, t, 0, 0);
    free(d);
    for (size_t p = 0; p < n && (t == PM_SAMPLE_F32 || t == PM_SAMPLE_F64); p++) {
        double u = pmt_uniform(), w = u < 0.01    ? NAN
                                      : u < 0.015 ? INFINITY
                                      : u < 0.02  ? -INFINITY
                                                  : 0;
        if (w == 0) continue;
        if (t == PM_SAMPLE_F32)
            ((float *)v)[p] = (float)w;
        else
            ((double *)v)[p] = w;
    }
    return v;
}

/* A volume of the option matrices: random_volume with anisotropic
 * spacing and an offset origin (free with free((void *)v.data)). */
static pm_volume matrix_volume(const size_t dims[3], pm_sample_type t, double iso)
{
    pm_volume v;
    memset(&v, 0, sizeof v);
    v.type = t;
    v.nx = dims[0];
    v.ny = dims[1];
    v.nz = dims[2];
    v.spacing[0] = 0.5;
    v.spacing[1] = 1.25;
    v.spacing[2] = 0.75 + pmt_uniform();
    v.origin[0] = -3.0;
    v.origin[1] = 0.1;
    v.origin[2] = 7.0 * pmt_uniform();
    v.data = random_volume(v.type, v.nx, v.ny, v.nz, iso);
    return v;
}

/* ------------------------------------------------------------------------ */
/* Library: every option against pm_isosurface                              */
/* ------------------------------------------------------------------------ */

static void test_matrix(pm_context *ctx, const char *tag)
{
    static const size_t dims[][3] = {{2, 2, 2},    {3, 5, 7}, {31, 33, 17},
                                     {67, 45, 21}, {5, 4, 2}, {2, 9, 33}};
    static const pm_normals normals[] = {PM_NORMALS_NONE, PM_NORMALS_FORWARD, PM_NORMALS_CENTRAL,
                                         PM_NORMALS_SOBEL};
    static const size_t thick[] = {1, 2, 3, 5, 0};
    size_t runs = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int t = 0; t < 5; t++) {
            const double iso = t == PM_SAMPLE_I16 ? 0.0 : 100.0;
            pm_volume v = matrix_volume(dims[d], (pm_sample_type)t, iso);
            for (int nm = 0; nm < 4; nm++)
                for (int mode = 0; mode < 2; mode++)
                    for (int in = 0; in < 2; in++) {
                        pm_isosurface_options o;
                        memset(&o, 0, sizeof o);
                        o.struct_size = sizeof o;
                        o.normals = normals[nm];
                        o.mode = mode ? PM_MESH_SOUP : PM_MESH_INDEXED;
                        o.inside = in ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE;
                        pm_mesh ref;
                        PMT_OK(pm_isosurface(ctx, &v, iso, &o, &ref));
                        for (size_t th = 0; th < sizeof thick / sizeof thick[0]; th++) {
                            mem_src m;
                            pm_volume_source src = mem_source(&v, &m);
                            pm_stream_report R;
                            pm_stream_options so = {sizeof so, 0, thick[th], &R};
                            pm_isosurface_report rep;
                            memset(&rep, 0, sizeof rep);
                            o.report = &rep;
                            pm_mesh got;
                            PMT_OK(pm_isosurface_stream(ctx, &src, iso, &o, &so, &got));
                            o.report = NULL;
                            char what[160];
                            snprintf(what, sizeof what,
                                     "%s %zux%zux%zu %s normals %d %s inside %d thickness %zu", tag,
                                     v.nx, v.ny, v.nz, pm_sample_type_string(v.type), nm,
                                     mode ? "soup" : "indexed", in, thick[th]);
                            same_mesh(&got, &ref, what);
                            size_t want_t = thick[th] && thick[th] < v.nz ? thick[th] : v.nz;
                            PMT_CHECK(!m.contract_broken && m.next == v.nz,
                                      "%s: reads not consecutive or incomplete", what);
                            PMT_CHECK(R.slab_slices == want_t &&
                                          R.slabs == (v.nz + want_t - 1) / want_t,
                                      "%s: %zu slabs of %zu", what, R.slabs, R.slab_slices);
                            PMT_CHECK(R.bytes_read ==
                                          (uint64_t)v.nx * v.ny * v.nz * pm_sample_size(v.type),
                                      "%s: %llu bytes read", what,
                                      (unsigned long long)R.bytes_read);
                            PMT_CHECK(R.ghost_below == (nm ? 1u : 0u) && R.ghost_above == 2,
                                      "%s: ghosts %zu/%zu", what, R.ghost_below, R.ghost_above);
                            PMT_CHECK(m.most_slices <= want_t + 3, "%s: a read of %zu slices", what,
                                      m.most_slices);
                            PMT_CHECK(path_has(&rep, "stream=slabs") &&
                                          path_has(&rep, "backend=cpu"),
                                      "%s: path '%s'", what, rep.path);
                            pm_mesh_free(ctx, &got);
                            runs++;
                        }
                        pm_mesh_free(ctx, &ref);
                    }
            free((void *)v.data);
        }
    printf("%s: %zu streamed extractions identical to pm_isosurface\n", tag, runs);
}

/* An n^3 f32 torus field (the caller frees v.data). */
static pm_volume torus_f32(size_t n)
{
    double *d = pmt_field_f64(PMT_FIELD_TORUS, n, n, n, 0.6, 0.25);
    pm_volume v;
    memset(&v, 0, sizeof v);
    v.type = PM_SAMPLE_F32;
    v.nx = v.ny = v.nz = n;
    v.data = pmt_convert(d, n, n, n, v.type, 0, 0);
    free(d);
    return v;
}

/* A volume large enough for several threads' slabs inside each buffer
 * load, and the caller's buffers (with truncation) as pm_isosurface. */
static void test_larger(pm_context *ctx)
{
    const size_t n = 64;
    pm_volume v = torus_f32(n);
    for (int th = 0; th < 3; th++) {
        const size_t t[3] = {16, 23, 7};
        pm_mesh ref, got;
        PMT_OK(pm_isosurface(ctx, &v, 0.0, NULL, &ref));
        mem_src m;
        pm_volume_source src = mem_source(&v, &m);
        pm_stream_options so = {sizeof so, 0, t[th], NULL};
        PMT_OK(pm_isosurface_stream(ctx, &src, 0.0, NULL, &so, &got));
        same_mesh(&got, &ref, "torus 64^3 f32");
        /* Caller buffers half the size: truncated the same way. */
        for (int soup = 0; soup < 2; soup++) {
            pm_isosurface_options o;
            memset(&o, 0, sizeof o);
            o.struct_size = sizeof o;
            o.mode = soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
            size_t vc = ref.num_vertices / 2 + 1, tc = ref.num_triangles / 2 + 1;
            if (soup) vc = 3 * ref.num_triangles / 2 + 2;
            float *p[2], *nr[2];
            uint32_t *ix[2];
            pm_status st[2];
            pm_mesh mm[2];
            for (int k = 0; k < 2; k++) {
                p[k] = calloc(vc * 3, sizeof(float));
                nr[k] = calloc(vc * 3, sizeof(float));
                ix[k] = calloc(tc * 3, sizeof(uint32_t));
                o.out_positions = p[k];
                o.out_normals = nr[k];
                o.out_indices = ix[k];
                o.vertex_capacity = vc;
                o.triangle_capacity = tc;
                mem_src m2;
                pm_volume_source s2 = mem_source(&v, &m2);
                st[k] = k ? pm_isosurface_stream(ctx, &s2, 0.0, &o, &so, &mm[k])
                          : pm_isosurface(ctx, &v, 0.0, &o, &mm[k]);
            }
            PMT_CHECK(st[0] == PM_STATUS_TRUNCATED && st[1] == PM_STATUS_TRUNCATED,
                      "caller buffers: %s / %s", pm_status_string(st[0]), pm_status_string(st[1]));
            PMT_CHECK(mm[0].num_vertices == mm[1].num_vertices &&
                          mm[0].num_triangles == mm[1].num_triangles &&
                          !memcmp(p[0], p[1], vc * 3 * sizeof(float)) &&
                          !memcmp(nr[0], nr[1], vc * 3 * sizeof(float)) &&
                          !memcmp(ix[0], ix[1], tc * 3 * sizeof(uint32_t)),
                      "caller buffers (%s): streamed output differs", soup ? "soup" : "indexed");
            for (int k = 0; k < 2; k++) {
                pm_mesh_free(ctx, &mm[k]);
                free(p[k]);
                free(nr[k]);
                free(ix[k]);
            }
        }
        pm_mesh_free(ctx, &ref);
        pm_mesh_free(ctx, &got);
    }
    free((void *)v.data);
}

/* A failing source, a limit too small, bad arguments: an error and a zeroed mesh. */
static void test_errors(pm_context *ctx)
{
    pm_volume v;
    memset(&v, 0, sizeof v);
    v.type = PM_SAMPLE_U16;
    v.nx = 40;
    v.ny = 30;
    v.nz = 20;
    v.data = random_volume(v.type, v.nx, v.ny, v.nz, 100.0);
    mem_src m;
    pm_volume_source src = mem_source(&v, &m);
    m.fail_at = 11;
    pm_stream_options so = {sizeof so, 0, 4, NULL};
    pm_mesh got;
    pm_status s = pm_isosurface_stream(ctx, &src, 100.0, NULL, &so, &got);
    PMT_CHECK(s == PM_STATUS_IO_ERROR &&
                  strstr(pm_last_error(), "failed to deliver slices 10 to") &&
                  got.positions == NULL && got.num_vertices == 0,
              "failing source: %s: %s", pm_status_string(s), pm_last_error());
    /* A limit below one slice and its ghosts. */
    src = mem_source(&v, &m);
    pm_stream_options tiny = {sizeof tiny, 3 * 40 * 30 * 2, 0, NULL};
    s = pm_isosurface_stream(ctx, &src, 100.0, NULL, &tiny, &got);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "memory limit") &&
                  got.num_vertices == 0,
              "tiny limit: %s: %s", pm_status_string(s), pm_last_error());
    /* A thickness the limit cannot hold. */
    pm_stream_options thick = {sizeof thick, (size_t)1 << 20, 1000, NULL};
    s = pm_isosurface_stream(ctx, &src, 100.0, NULL, &thick, &got);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY, "thick slabs: %s", pm_status_string(s));
    src.nz = 1;
    s = pm_isosurface_stream(ctx, &src, 100.0, NULL, NULL, &got);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "nz 1: %s", pm_status_string(s));
    src.nz = v.nz;
    src.read = NULL;
    s = pm_isosurface_stream(ctx, &src, 100.0, NULL, NULL, &got);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "no read: %s", pm_status_string(s));
    /* pm_isosurface's option rules, named as this call's */
    src = mem_source(&v, &m);
    pm_isosurface_options bo;
    memset(&bo, 0, sizeof bo);
    bo.struct_size = sizeof bo;
    bo.inside = (pm_inside)7;
    s = pm_isosurface_stream(ctx, &src, 100.0, &bo, NULL, &got);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "pm_isosurface_stream: bad inside 7"),
              "inside 7: %s: %s", pm_status_string(s), pm_last_error());
    bo.inside = PM_INSIDE_DEFAULT;
    bo.mode = (pm_mesh_mode)9;
    s = pm_isosurface_stream(ctx, &src, 100.0, &bo, NULL, &got);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "pm_isosurface_stream: bad normals or mode"),
              "mode 9: %s: %s", pm_status_string(s), pm_last_error());
    free((void *)v.data);
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

static void swap_copy(unsigned char *dst, const unsigned char *src, size_t n, size_t es)
{
    for (size_t i = 0; i < n; i++)
        for (size_t b = 0; b < es; b++)
            dst[i * es + b] = src[i * es + es - 1 - b];
}

/* pm_isosurface_file on `path` against pm_volume_read + pm_isosurface. */
static void file_identity(pm_context *ctx, const char *path, const pm_raw_options *raw, double iso,
                          size_t limit, const char *what)
{
    pm_volume v;
    PMT_OK(pm_volume_read(path, raw, 0, &v));
    for (int nm = 0; nm < 2; nm++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.normals = nm ? PM_NORMALS_SOBEL : PM_NORMALS_NONE;
        pm_mesh ref, got;
        PMT_OK(pm_isosurface(ctx, &v, iso, &o, &ref));
        pm_stream_report R;
        pm_stream_options so = {sizeof so, limit, 0, &R};
        PMT_OK(pm_isosurface_file(ctx, path, raw, iso, &o, &so, &got));
        same_mesh(&got, &ref, what);
        PMT_CHECK(R.slabs > 1 && R.working_set_bytes <= limit,
                  "%s: %zu slabs, working set %llu of %zu", what, R.slabs,
                  (unsigned long long)R.working_set_bytes, limit);
        pm_mesh_free(ctx, &ref);
        pm_mesh_free(ctx, &got);
    }
    pm_volume_free(&v);
}

/* The limit plus what a gzip source holds: its reader's buffer (the
 * file's size, at most 1 MiB) and zlib's 48 KiB. */
static size_t gz_limit(size_t limit, size_t file_bytes)
{
    return limit + (file_bytes < (1u << 20) ? file_bytes : (1u << 20)) + (48u << 10);
}

static void test_files(pm_context *ctx)
{
    const size_t nx = 37, ny = 29, nz = 23;
    for (int t = 0; t < 5; t++) {
        const pm_sample_type type = (pm_sample_type)t;
        const size_t es = pm_sample_size(type), n = nx * ny * nz, bytes = n * es;
        const double iso = t == PM_SAMPLE_I16 ? 0.0 : 100.0;
        unsigned char *d = random_volume(type, nx, ny, nz, iso);
        unsigned char *be = malloc(bytes);
        swap_copy(be, d, n, es);
        /* Slices of nx * ny samples, 4 per slab: a limit that holds the
         * ring, one slab and its ghosts. */
        const size_t slice = nx * ny * es, limit = 8 * slice + 88 * ny * 2 + 100;
        char what[96];

        /* Raw, big-endian, after a 123-byte header. */
        buf b = {0};
        for (int i = 0; i < 123; i++)
            put(&b, "H", 1);
        put(&b, be, bytes);
        const char *raw_path = path_in("v.raw");
        write_file(raw_path, b.p, b.n);
        pm_raw_options raw;
        memset(&raw, 0, sizeof raw);
        raw.struct_size = sizeof raw;
        raw.nx = nx;
        raw.ny = ny;
        raw.nz = nz;
        raw.type = type;
        raw.big_endian = es > 1;
        raw.offset_bytes = 123;
        raw.spacing[2] = 2.5;
        snprintf(what, sizeof what, "raw %s big-endian offset 123", pm_sample_type_string(type));
        file_identity(ctx, raw_path, &raw, iso, limit, what);
        /* The samples as the file's last bytes. */
        raw.offset_bytes = 0;
        raw.data_at_end = 1;
        snprintf(what, sizeof what, "raw %s at the end", pm_sample_type_string(type));
        file_identity(ctx, raw_path, &raw, iso, limit, what);

        /* Raw gzip, little-endian, 10 uncompressed bytes before. */
        buf u = {0};
        put(&u, "0123456789", 10);
        put(&u, d, bytes);
        size_t zn;
        unsigned char *z = deflate_bytes(u.p, u.n, 1, &zn);
        const char *gz_path = path_in("v.raw.gz");
        write_file(gz_path, z, zn);
        raw.data_at_end = 0;
        raw.big_endian = 0;
        raw.offset_bytes = 10;
        snprintf(what, sizeof what, "raw gzip %s", pm_sample_type_string(type));
        file_identity(ctx, gz_path, &raw, iso, gz_limit(limit, zn), what);
        free(z);
        free(u.p);

        /* NRRD: attached raw with a byte skip; attached gzip; detached. */
        static const char *const names[] = {"uchar", "ushort", "short", "float", "double"};
        buf h = {0};
        putf(&h,
             "NRRD0004\ntype: %s\ndimension: 3\nsizes: %zu %zu %zu\nspacings: 0.5 1 2\n"
             "space origin: (1,2,3)\nendian: big\nencoding: raw\nbyte skip: 7\n\n",
             names[t], nx, ny, nz);
        put(&h, "SKIPPED", 7);
        put(&h, be, bytes);
        const char *nrrd = path_in("v.nrrd");
        write_file(nrrd, h.p, h.n);
        snprintf(what, sizeof what, "nrrd raw %s", pm_sample_type_string(type));
        file_identity(ctx, nrrd, NULL, iso, limit, what);
        h.n = 0;
        putf(&h,
             "NRRD0004\ntype: %s\ndimension: 3\nsizes: %zu %zu %zu\nendian: little\n"
             "encoding: gzip\n\n",
             names[t], nx, ny, nz);
        z = deflate_bytes(d, bytes, t & 1, &zn); /* gzip and zlib wrappers */
        put(&h, z, zn);
        const char *nrrd_gz = path_in("vgz.nrrd");
        write_file(nrrd_gz, h.p, h.n);
        snprintf(what, sizeof what, "nrrd gzip %s", pm_sample_type_string(type));
        const size_t glimit = gz_limit(limit, h.n);
        file_identity(ctx, nrrd_gz, NULL, iso, glimit, what);

        /* Truncated gzip: the open succeeds, the stream fails with the
         * byte, and no mesh is left. */
        write_file(nrrd_gz, h.p, h.n - zn / 2);
        pm_mesh got;
        pm_stream_options so = {sizeof so, glimit, 0, NULL};
        pm_status s = pm_isosurface_file(ctx, nrrd_gz, NULL, iso, NULL, &so, &got);
        PMT_CHECK(s == PM_STATUS_PARSE_ERROR && strstr(pm_last_error(), "byte") &&
                      got.num_vertices == 0 && !got.positions,
                  "truncated gzip nrrd: %s: %s", pm_status_string(s), pm_last_error());
        /* gzip data with more than declared. */
        h.n = 0;
        putf(&h,
             "NRRD0004\ntype: %s\ndimension: 3\nsizes: %zu %zu %zu\nendian: little\n"
             "encoding: gzip\n\n",
             names[t], nx, ny, nz - 1);
        put(&h, z, zn);
        write_file(nrrd_gz, h.p, h.n);
        s = pm_isosurface_file(ctx, nrrd_gz, NULL, iso, NULL, &so, &got);
        PMT_CHECK(s == PM_STATUS_PARSE_ERROR && strstr(pm_last_error(), "more than"),
                  "long gzip nrrd: %s: %s", pm_status_string(s), pm_last_error());
        free(z);

        /* Detached header. */
        h.n = 0;
        putf(&h,
             "NRRD0005\ntype: %s\ndimension: 3\nsizes: %zu %zu %zu\nendian: big\n"
             "encoding: raw\ndata file: v.raw\nbyte skip: 123\n",
             names[t], nx, ny, nz);
        const char *nhdr = path_in("v.nhdr");
        write_file(nhdr, h.p, h.n);
        snprintf(what, sizeof what, "nhdr %s", pm_sample_type_string(type));
        file_identity(ctx, nhdr, NULL, iso, limit, what);

        /* Truncated raw: refused at open, naming the sizes. */
        write_file(raw_path, b.p, b.n - slice);
        raw.offset_bytes = 123;
        raw.big_endian = es > 1;
        s = pm_isosurface_file(ctx, raw_path, &raw, iso, NULL, &so, &got);
        PMT_CHECK(s == PM_STATUS_PARSE_ERROR && strstr(pm_last_error(), "bytes of data are in"),
                  "truncated raw: %s: %s", pm_status_string(s), pm_last_error());
        /* A file cut after the open: the read names the byte. */
        write_file(raw_path, b.p, b.n);
        pm_volume_source src;
        PMT_OK(pm_volume_source_open(raw_path, &raw, &src));
        PMT_CHECK(truncate(raw_path, (off_t)(b.n / 2)) == 0, "truncate");
        pm_stream_options so2 = {sizeof so2, limit, 0, NULL};
        s = pm_isosurface_stream(ctx, &src, iso, NULL, &so2, &got);
        pm_volume_source_close(&src);
        PMT_CHECK(s == PM_STATUS_PARSE_ERROR && strstr(pm_last_error(), "byte ") &&
                      got.num_vertices == 0,
                  "raw cut while streaming: %s: %s", pm_status_string(s), pm_last_error());
        free(b.p);
        free(h.p);
        free(be);
        free(d);
    }
    /* Formats that do not stream say so. */
    pm_volume_source src;
    pm_status s = pm_volume_source_open(path_in("x.mha"), NULL, &src);
    PMT_CHECK(s == PM_STATUS_UNSUPPORTED, "mha: %s", pm_status_string(s));
}

/* A volume file 6 times the limit: the working set (the report's
 * accounting and the process's peak resident memory) stays bounded. */
static void test_bounded(pm_context *ctx)
{
    const size_t nx = 256, ny = 256, nz = 768, limit = (size_t)8 << 20;
    const char *path = path_in("big.raw");
    FILE *f = fopen(path, "wb");
    unsigned char *slice = malloc(nx * ny);
    for (size_t k = 0; k < nz; k++) {
        for (size_t j = 0; j < ny; j++)
            for (size_t i = 0; i < nx; i++) {
                double x = (double)i - 128, y = (double)j - 128, z = (double)k - 384;
                double r = sqrt(x * x + y * y + z * z);
                ((unsigned char *)slice)[i + nx * j] = r < 60 ? 200 : r < 70 ? 120 : 20;
            }
        fwrite(slice, 1, nx * ny, f);
    }
    fclose(f);
    free(slice);
    pm_raw_options raw;
    memset(&raw, 0, sizeof raw);
    raw.struct_size = sizeof raw;
    raw.nx = nx;
    raw.ny = ny;
    raw.nz = nz;
    raw.type = PM_SAMPLE_U8;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    pm_stream_report R;
    pm_stream_options so = {sizeof so, limit, 0, &R};
    pm_mesh got;
    PMT_OK(pm_isosurface_file(ctx, path, &raw, 100.0, NULL, &so, &got));
    getrusage(RUSAGE_SELF, &ru1);
    const double grew = (double)(ru1.ru_maxrss - ru0.ru_maxrss) * 1024.0;
    printf("bounded: %zu MiB volume, limit %zu MiB: %zu slabs of %zu slices, working set %.2f "
           "MiB, staging %.2f MiB, mesh %.2f MiB, peak RSS grew %.2f MiB\n",
           nx * ny * nz >> 20, limit >> 20, R.slabs, R.slab_slices,
           (double)R.working_set_bytes / 1048576.0, (double)R.staging_bytes / 1048576.0,
           (double)R.mesh_bytes / 1048576.0, grew / 1048576.0);
    PMT_CHECK(R.working_set_bytes <= limit && R.slabs > 6, "working set %llu, %zu slabs",
              (unsigned long long)R.working_set_bytes, R.slabs);
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer's shadow memory and quarantine add to the resident
     * size: there only "less than the volume" is a fair bound. */
    const double slack = 24.0 * 1048576.0, part = 1.0;
#else
    const double slack = 6.0 * 1048576.0, part = 0.5;
#endif
    PMT_CHECK(grew < (double)(limit + R.staging_bytes + R.mesh_bytes) + slack &&
                  grew < (double)(nx * ny * nz) * part,
              "peak resident memory grew by %.0f bytes", grew);
    pm_volume v;
    PMT_OK(pm_volume_read(path, &raw, 0, &v));
    pm_mesh ref;
    PMT_OK(pm_isosurface(ctx, &v, 100.0, NULL, &ref));
    same_mesh(&got, &ref, "bounded u8 256x256x768");
    pm_mesh_free(ctx, &ref);
    pm_mesh_free(ctx, &got);
    pm_volume_free(&v);
}

/* ------------------------------------------------------------------------ */
/* Slabs as mesh pieces on several contexts                                   */
/* ------------------------------------------------------------------------ */

/* pm_isosurface_multi on ctxs, and (internal) the slab pieces of a source
 * read by concurrent workers, against pm_isosurface on ref; on a GPU also
 * pm_isosurface_stream through it (cuda set). */
static void test_slab_pieces(pm_context *ref, pm_context *const *ctxs, int n, int cuda,
                             const char *tag)
{
    static const size_t dims[][3] = {{2, 2, 2}, {3, 5, 7}, {31, 33, 17}, {67, 45, 21}, {2, 9, 33}};
    static const pm_normals normals[] = {PM_NORMALS_NONE, PM_NORMALS_FORWARD, PM_NORMALS_CENTRAL,
                                         PM_NORMALS_SOBEL};
    size_t runs = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int t = 0; t < 5; t++) {
            const double iso = t == PM_SAMPLE_I16 ? 0.0 : 100.0;
            pm_volume v = matrix_volume(dims[d], (pm_sample_type)t, iso);
            for (int nm = 0; nm < 4; nm++)
                for (int mode = 0; mode < 2; mode++) {
                    pm_isosurface_options o;
                    memset(&o, 0, sizeof o);
                    o.struct_size = sizeof o;
                    o.normals = normals[nm];
                    o.mode = mode ? PM_MESH_SOUP : PM_MESH_INDEXED;
                    o.inside = (nm + t) % 2 ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE;
                    char what[160];
                    snprintf(what, sizeof what, "%s %zux%zux%zu %s normals %d %s", tag, v.nx, v.ny,
                             v.nz, pm_sample_type_string(v.type), nm, mode ? "soup" : "indexed");
                    pm_mesh want, got;
                    PMT_OK(pm_isosurface(ref, &v, iso, &o, &want));
                    pm_isosurface_report rep;
                    memset(&rep, 0, sizeof rep);
                    o.report = &rep;
                    PMT_OK(pm_isosurface_multi(ctxs, n, &v, iso, &o, &got));
                    o.report = NULL;
                    same_mesh(&got, &want, what);
                    PMT_CHECK(path_has(&rep, "extract=slabs"), "%s: multi path '%s'", what,
                              rep.path);
                    pm_mesh_free(ctxs[0], &got);
                    runs++;
                    /* A source, read in slice order by the workers. */
                    for (size_t T = 1; T <= 3; T += 2) {
                        mem_src m;
                        pm_volume_source src = mem_source(&v, &m);
                        pm_volume geo = v;
                        geo.data = NULL;
                        geo.row_stride = v.nx;
                        geo.slice_stride = v.nx * v.ny;
                        pmi_slab_report S;
                        PMT_OK(pmi_slab_run(ctxs, n, &geo, &src, iso, &o, 0, T, 1, &got, &S));
                        char w2[200];
                        snprintf(w2, sizeof w2, "%s source thickness %zu", what, T);
                        same_mesh(&got, &want, w2);
                        PMT_CHECK(!m.contract_broken && m.next == v.nz,
                                  "%s: reads not consecutive or incomplete", w2);
                        PMT_CHECK(S.slabs == (v.nz + T - 1) / T, "%s: %zu slabs", w2, S.slabs);
                        pm_mesh_free(ctxs[0], &got);
                        runs++;
                    }
                    if (cuda) {
                        /* pm_isosurface_stream through the GPU: a source
                         * and a memory source, thin slabs. */
                        for (int kind = 0; kind < 2; kind++) {
                            mem_src m;
                            pm_volume_source src;
                            if (kind)
                                PMT_OK(pm_volume_source_memory(&v, &src));
                            else
                                src = mem_source(&v, &m);
                            pm_stream_report R;
                            pm_stream_options so = {sizeof so, 0, 2, &R};
                            memset(&rep, 0, sizeof rep);
                            o.report = &rep;
                            PMT_OK(pm_isosurface_stream(ctxs[0], &src, iso, &o, &so, &got));
                            o.report = NULL;
                            char w2[200];
                            snprintf(w2, sizeof w2, "%s stream %s", what,
                                     kind ? "memory source" : "source");
                            same_mesh(&got, &want, w2);
                            PMT_CHECK(path_has(&rep, "stream=slabs") &&
                                          path_has(&rep, "slab=window") &&
                                          R.slabs == (v.nz + 1) / 2,
                                      "%s: path '%s', %zu slabs", w2, rep.path, R.slabs);
                            if (!kind)
                                PMT_CHECK(!m.contract_broken && m.next == v.nz,
                                          "%s: reads not consecutive", w2);
                            if (kind) pm_volume_source_close(&src);
                            pm_mesh_free(ctxs[0], &got);
                            runs++;
                        }
                        /* pm_isosurface's slab path (volumes larger than
                         * the GPU), forced. */
                        setenv("PYRAMESH_TEST_HOOKS", "slabs", 1);
                        memset(&rep, 0, sizeof rep);
                        o.report = &rep;
                        PMT_OK(pm_isosurface(ctxs[0], &v, iso, &o, &got));
                        o.report = NULL;
                        unsetenv("PYRAMESH_TEST_HOOKS");
                        char w3[200];
                        snprintf(w3, sizeof w3, "%s pm_isosurface slabs", what);
                        same_mesh(&got, &want, w3);
                        PMT_CHECK(path_has(&rep, "extract=slabs"), "%s: path '%s'", w3, rep.path);
                        pm_mesh_free(ctxs[0], &got);
                        runs++;
                        /* Windows over their budget meshed as halves down
                         * to single slices (forced), thick slabs. */
                        setenv("PYRAMESH_TEST_HOOKS", "split", 1);
                        {
                            mem_src m;
                            pm_volume_source src = mem_source(&v, &m);
                            pm_stream_options so = {sizeof so, 0, 4, NULL};
                            memset(&rep, 0, sizeof rep);
                            o.report = &rep;
                            PMT_OK(pm_isosurface_stream(ctxs[0], &src, iso, &o, &so, &got));
                            o.report = NULL;
                        }
                        unsetenv("PYRAMESH_TEST_HOOKS");
                        snprintf(w3, sizeof w3, "%s split windows", what);
                        same_mesh(&got, &want, w3);
                        PMT_CHECK(path_has(&rep, "slab=window") && strstr(rep.path, " splits="),
                                  "%s: path '%s'", w3, rep.path);
                        pm_mesh_free(ctxs[0], &got);
                        runs++;
                    }
                    pm_mesh_free(ref, &want);
                }
            free((void *)v.data);
        }
    printf("%s: %zu slab-piece extractions identical to pm_isosurface\n", tag, runs);
}

/* On the GPU: a limit too small for one slice, and a failing source. */
static void test_gpu_errors(pm_context *ctx)
{
    pm_volume v;
    memset(&v, 0, sizeof v);
    v.type = PM_SAMPLE_U16;
    v.nx = 64, v.ny = 48, v.nz = 40;
    v.data = random_volume(v.type, v.nx, v.ny, v.nz, 100.0);
    mem_src m;
    pm_volume_source src = mem_source(&v, &m);
    pm_stream_options so = {sizeof so, 100 << 10, 0, NULL}; /* below two slabs of one slice */
    pm_mesh got;
    pm_status s = pm_isosurface_stream(ctx, &src, 100.0, NULL, &so, &got);
    PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "limit") &&
                  got.num_triangles == 0 && !got.positions,
              "a limit too small on the GPU: %s: %s", pm_status_string(s), pm_last_error());
    src = mem_source(&v, &m);
    m.fail_at = 23;
    so.max_memory_bytes = 0;
    so.slab_slices = 4;
    s = pm_isosurface_stream(ctx, &src, 100.0, NULL, &so, &got);
    PMT_CHECK(s == PM_STATUS_IO_ERROR && got.num_triangles == 0 && !got.positions,
              "a failing source on the GPU: %s: %s", pm_status_string(s), pm_last_error());
    free((void *)v.data);
}

/* On the GPU: the stream's mesh left in device memory (the slab parts
 * uploaded after the last slab), downloaded and compared. */
static void test_gpu_device_output(pm_context *ctx)
{
    const size_t n = 48;
    pm_volume v = torus_f32(n);
    for (int soup = 0; soup < 2; soup++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.mode = soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
        pm_mesh ref, got;
        PMT_OK(pm_isosurface(ctx, &v, 0.0, &o, &ref));
        o.output_in_context_memory = 1;
        mem_src m;
        pm_volume_source src = mem_source(&v, &m);
        pm_stream_options so = {sizeof so, 0, 7, NULL};
        PMT_OK(pm_isosurface_stream(ctx, &src, 0.0, &o, &so, &got));
        PMT_CHECK(got.in_context_memory && got.num_vertices == ref.num_vertices &&
                      got.num_triangles == ref.num_triangles,
                  "device output (%s): %zu v %zu t in context memory %d, want %zu v %zu t",
                  soup ? "soup" : "indexed", got.num_vertices, got.num_triangles,
                  got.in_context_memory, ref.num_vertices, ref.num_triangles);
        if (got.num_vertices == ref.num_vertices && got.num_triangles == ref.num_triangles) {
            const size_t vb = got.num_vertices * 12, ib = got.num_triangles * 12;
            float *pos = malloc(vb + 1), *nrm = malloc(vb + 1);
            uint32_t *idx = malloc(ib + 1);
            PMT_OK(pm_download(ctx, pos, got.positions, vb));
            PMT_OK(pm_download(ctx, nrm, got.normals, vb));
            if (!soup) PMT_OK(pm_download(ctx, idx, got.indices, ib));
            PMT_CHECK(!memcmp(pos, ref.positions, vb) && !memcmp(nrm, ref.normals, vb) &&
                          (soup || !memcmp(idx, ref.indices, ib)),
                      "device output (%s): bytes differ", soup ? "soup" : "indexed");
            free(pos), free(nrm), free(idx);
        }
        pm_mesh_free(ctx, &got);
        pm_mesh_free(ctx, &ref);
    }
    free((void *)v.data);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "cuda") == 0) {
        pm_context *ctx;
        pm_device dev;
        if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
        pm_context *cpu;
        pm_context_desc dc = {sizeof dc, PM_DEVICE_CPU, 0, 2, NULL};
        PMT_OK(pm_context_create(&dc, &cpu));
        pm_context *gpu_only[1] = {ctx}, *mixed[2] = {ctx, cpu};
        test_slab_pieces(cpu, gpu_only, 1, 1, "cuda");
        test_slab_pieces(cpu, mixed, 2, 0, "cuda + cpu");
        test_gpu_errors(ctx);
        test_larger(ctx);
        test_gpu_device_output(ctx);
        pm_context_destroy(cpu);
        pm_context_destroy(ctx);
        return pmt_finish("test_stream cuda");
    }
    if (!pmt_files_start(argc, argv, "pm_stream", 1)) return PMT_SKIP;
    pm_context *ctx1, *ctx2;
    pm_context_desc d1 = {sizeof d1, PM_DEVICE_CPU, 0, 1, NULL};
    pm_context_desc d2 = {sizeof d2, PM_DEVICE_CPU, 0, 2, NULL};
    PMT_OK(pm_context_create(&d1, &ctx1));
    PMT_OK(pm_context_create(&d2, &ctx2));
    test_bounded(ctx2);
    test_matrix(ctx1, "1 thread");
    test_larger(ctx2);
    test_larger(ctx1);
    test_errors(ctx2);
    test_files(ctx2);
    {
        pm_context *two[2] = {ctx1, ctx2};
        test_slab_pieces(ctx1, two, 2, 0, "slabs on 2 cpu contexts");
        test_slab_pieces(ctx1, two, 1, 0, "slabs on 1 cpu context");
    }
    pm_context_destroy(ctx1);
    pm_context_destroy(ctx2);
    remove_tmpdir();
    return pmt_finish("test_stream");
}
