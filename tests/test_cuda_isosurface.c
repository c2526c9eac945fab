/* CUDA-specific contracts of pm_isosurface (the CPU/CUDA byte comparison of
 * every mode lives in test_isosurface.c): caller buffers in context memory
 * with a capacity (prefix written, nothing past it, TRUNCATED with full
 * counts), every sample type against the CPU backend (also on strided
 * volumes shaped for the streaming classification's chunks and bands and
 * at the direct classification's bounds, with either inside side),
 * volumes large enough to take each path that
 * the CUDA backend picks by size and type (the bitmask classification of
 * 1- and 2-byte samples, soups from the cells of streamed and bitmask
 * volumes, streaming blocks of several slices), a device allocation refused as
 * PM_STATUS_OUT_OF_MEMORY with the amount, a volume whose records exceed
 * pass 1's first guess of their room, and a volume of more than 2^32
 * cells (skipped when the GPU or host lacks the memory);
 * pm_isosurface_async against pm_isosurface. Every CUDA extraction's
 * pm_isosurface_report.path is checked against the path its volume should
 * take, and the paths that PYRAMESH_TEST_HOOKS forces must run. In `cpu`
 * mode the capacity and async contracts are checked on the CPU backend. */
#include <math.h>

#ifdef PM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "test_common.h"
#include "test_volumes.h"

/* The path a CUDA extraction of v must take (docs/cuda_isosurface.md):
 * pass 1 by the direct classification up to 3 * 2^24 points (f32: 3 * 2^23;
 * rows of at most 2048 points, every type but f64, not under the stream
 * hook), else
 * streamed for f32 and for other types but f64 up to 2^24 points,
 * else by the bitmask kernels (the batched classification while the
 * bitmask is small, checked below 4 MB; the per-word one above 512 MB,
 * beyond any L2); a soup from the cells at every size; under the hooks,
 * the forced paths (counted, and main() asserts that they ran). */
#define PMT_DIRECT_MAX ((size_t)3 << 24)
#define PMT_DIRECT_MAX_F32 ((size_t)3 << 23)
#define PMT_CHUNKS_MIN ((size_t)1 << 22)
static size_t long_runs, chunks_runs, ordered_runs, pool_runs, nopdl_runs, direct_runs, stream_runs,
    zeroed_runs, chunk128_runs, scalar_runs, svec_runs, sscalar_runs, bulk_runs;

/* The streaming classification's chunk width: 128 points (bands of 63
 * rows) where that takes at least 10% fewer lanes per slice than 256
 * points (bands of 31 rows). */
static int stream_chunk(const pm_volume *v)
{
    const double lanes8 =
                     (double)((v->nx + 255) / 256) * 256.0 * (double)((v->ny + 30) / 31) * 32.0,
                 lanes4 =
                     (double)((v->nx + 127) / 128) * 128.0 * (double)((v->ny + 62) / 63) * 64.0;
    return lanes4 < 0.9 * lanes8 ? 128 : 256;
}
static void check_path(pm_context *ctx, const pm_isosurface_report *r, const pm_volume *v, int soup,
                       const char *what)
{
    if (pm_context_device(ctx) != PM_DEVICE_CUDA) return;
    const size_t points = v->nx * v->ny * v->nz, mask_bytes = points / 8;
    const int direct = v->type != PM_SAMPLE_F64 && (v->nx + 31) / 32 <= 64 &&
                       points <= (v->type == PM_SAMPLE_F32 ? PMT_DIRECT_MAX_F32 : PMT_DIRECT_MAX) &&
                       !hook_set("stream");
    const size_t es = pm_sample_size(v->type), rs = v->row_stride ? v->row_stride : v->nx,
                 ss = v->slice_stride ? v->slice_stride : rs * v->ny;
    const int vec = (uintptr_t)v->data % 16 == 0 && (rs * es) % 16 == 0 && (ss * es) % 16 == 0 &&
                    (v->nx * es) % 16 == 0;
    /* Streamed: f32, 1- and 2-byte samples in rows of whole 16-byte parts,
     * the others up to 2^24 points, and under the stream hook all but f64. */
    const int stream = !direct && v->type != PM_SAMPLE_F64 &&
                       (v->type == PM_SAMPLE_F32 || points <= ((size_t)1 << 24) ||
                        (vec && es < 4) || hook_set("stream"));
    PMT_CHECK(path_has(r, "backend=cuda"), "%s: path \"%s\"", what, r->path);
    PMT_CHECK(path_has(r, direct   ? "pass1=direct"
                          : stream ? "pass1=stream"
                                   : "pass1=bitmask"),
              "%s: path \"%s\"", what, r->path);
    /* The direct classification says whether its tile states were zeroed
     * before the call or kept from the last one. */
    if (direct)
        PMT_CHECK(path_has(r, "states=zeroed") || path_has(r, "states=kept"), "%s: path \"%s\"",
                  what, r->path);
    else
        PMT_CHECK(!strstr(r->path, "states="), "%s: path \"%s\"", what, r->path);
    /* Its loads: 16 bytes a lane where every row starts 16-byte aligned
     * (the test's device buffers are) and holds whole 16-byte parts, else
     * one sample a load. */
    /* The streaming one's likewise for 1- and 2-byte samples; f32 always
     * one sample a lane. */
    if (direct || stream)
        PMT_CHECK(path_has(r, vec && (direct || es < 4) ? "loads=vector" : "loads=scalar"),
                  "%s: path \"%s\"", what, r->path);
    else
        PMT_CHECK(!strstr(r->path, "loads="), "%s: path \"%s\"", what, r->path);
    if (direct) scalar_runs += path_has(r, "loads=scalar");
    if (stream && es < 4) {
        svec_runs += path_has(r, "loads=vector");
        sscalar_runs += path_has(r, "loads=scalar");
    }
    zeroed_runs += path_has(r, "states=zeroed");
    if (stream)
        PMT_CHECK(path_has(r, stream_chunk(v) == 128 ? "chunk=128" : "chunk=256"),
                  "%s: %zu x %zu rows, path \"%s\"", what, v->nx, v->ny, r->path);
    else
        PMT_CHECK(!strstr(r->path, "chunk="), "%s: path \"%s\"", what, r->path);
    chunk128_runs += path_has(r, "chunk=128");
    /* The slices a streaming block walks: 1 to 8, or "16/s" with a bulk
     * of ranges of 16 slices before those of s. */
    if (stream) {
        const char *sl = strstr(r->path, "slices=");
        const char *end = sl ? strchr(sl, ' ') : NULL, *tail = sl ? strchr(sl, '/') : NULL;
        if (tail && end && tail > end) tail = NULL; /* a '/' in a later word */
        const int nb = tail ? atoi(sl + 7) : 0, ns = sl ? atoi(tail ? tail + 1 : sl + 7) : 0;
        PMT_CHECK(ns >= 1 && ns <= 8 && (!tail || nb == 16), "%s: path \"%s\"", what, r->path);
        long_runs += ns > 4;
        bulk_runs += nb > 0;
    } else {
        PMT_CHECK(!strstr(r->path, "slices="), "%s: path \"%s\"", what, r->path);
    }
    if (!stream && !direct && mask_bytes < ((size_t)4 << 20))
        PMT_CHECK(path_has(r, "classify=batched"), "%s: path \"%s\"", what, r->path);
    if (!stream && !direct && mask_bytes > ((size_t)512 << 20))
        PMT_CHECK(path_has(r, "classify=perword"), "%s: path \"%s\"", what, r->path);
    /* A direct classification's soup: its records chunked per tile above
     * 2^22 points, else in lattice order; a streamed soup's left in the
     * streaming classification's pool. */
    if (direct && soup)
        PMT_CHECK(path_has(r, points > PMT_CHUNKS_MIN ? "records=chunks" : "records=ordered"),
                  "%s: path \"%s\"", what, r->path);
    else if (stream && soup)
        PMT_CHECK(path_has(r, "records=pool"), "%s: path \"%s\"", what, r->path);
    else
        PMT_CHECK(!strstr(r->path, "records="), "%s: path \"%s\"", what, r->path);
    chunks_runs += path_has(r, "records=chunks");
    ordered_runs += path_has(r, "records=ordered");
    pool_runs += path_has(r, "records=pool");
    if (!soup)
        PMT_CHECK(path_has(r, "pass2=blocks") && !strstr(r->path, "soup="), "%s: path \"%s\"", what,
                  r->path);
    else
        PMT_CHECK(path_has(r, "pass2=cells") && path_has(r, "soup=cells"), "%s: path \"%s\"", what,
                  r->path);
    if (hook_set("nopdl"))
        PMT_CHECK(path_has(r, "launch=plain"), "%s: hook nopdl, path \"%s\"", what, r->path);
    nopdl_runs += path_has(r, "launch=plain");
    direct_runs += path_has(r, "pass1=direct");
    stream_runs += path_has(r, "pass1=stream");
}

static pm_context *cpu_ctx(void)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *c;
    PMT_OK(pm_context_create(&d, &c));
    return c;
}

/* Caller buffers of capacity vcap/tcap, poisoned: the first part of the full
 * mesh is written and nothing after it. */
static void check_capacity(pm_context *ctx, const pm_volume *dv, int mode, size_t vcap, size_t tcap)
{
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.mode = (pm_mesh_mode)mode;
    o.normals = PM_NORMALS_CENTRAL;
    o.output_in_context_memory = 1;
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep); /* timed is an input */
    o.report = &rep;
    pm_mesh full;
    PMT_OK(pm_isosurface(ctx, dv, 0.0, &o, &full));
    check_path(ctx, &rep, dv, mode, "capacity, full mesh");
    size_t nv = full.num_vertices, nt = full.num_triangles;
    float *fp = pmt_to_host(ctx, full.positions, 12 * nv);
    float *fn = pmt_to_host(ctx, full.normals, 12 * nv);
    uint32_t *fi = mode == PM_MESH_INDEXED ? pmt_to_host(ctx, full.indices, 12 * nt) : NULL;

    size_t vb = 12 * (vcap + 1), ib = 12 * (tcap + 1);
    unsigned char *poison = malloc(vb > ib ? vb : ib);
    memset(poison, 0xA5, vb > ib ? vb : ib);
    float *bp = pmt_to_ctx(ctx, poison, vb), *bn = pmt_to_ctx(ctx, poison, vb);
    uint32_t *bi = pmt_to_ctx(ctx, poison, ib);
    o.out_positions = bp;
    o.out_normals = bn;
    o.out_indices = bi;
    o.vertex_capacity = vcap;
    o.triangle_capacity = tcap;
    pm_mesh m;
    pm_status s = pm_isosurface(ctx, dv, 0.0, &o, &m);
    int over = nv > vcap || nt > tcap;
    PMT_CHECK(s == (over ? PM_STATUS_TRUNCATED : PM_STATUS_OK), "%s cap %zu/%zu of %zu/%zu: %s",
              mode ? "soup" : "indexed", vcap, tcap, nv, nt, pm_status_string(s));
    PMT_CHECK(m.num_vertices == nv && m.num_triangles == nt && !m.owns_arrays && m.positions == bp,
              "capacity run must report the full counts in the caller's buffers");
    check_path(ctx, &rep, dv, mode, "capacity");
    /* Caller's buffers that fit: one wait (the async passes); a mesh that
     * does not fit: the two passes. */
    if (pm_context_device(ctx) == PM_DEVICE_CUDA) {
        const char *w = !over ? "wait=one" : "wait=two";
        PMT_CHECK(path_has(&rep, w), "capacity %zu/%zu: path \"%s\", want %s", vcap, tcap, rep.path,
                  w);
    }
    size_t wv = nv < vcap ? nv : vcap, wt = nt < tcap ? nt : tcap;
    if (mode == PM_MESH_SOUP) {
        if (wt > wv / 3) wt = wv / 3;
        wv = 3 * wt;
    }
    float *hp = pmt_to_host(ctx, bp, vb), *hn = pmt_to_host(ctx, bn, vb);
    PMT_CHECK(!memcmp(hp, fp, 12 * wv) && !memcmp(hn, fn, 12 * wv),
              "first %zu vertices differ from the full mesh", wv);
    PMT_CHECK(!memcmp((char *)hp + 12 * wv, poison, vb - 12 * wv) &&
                  !memcmp((char *)hn + 12 * wv, poison, vb - 12 * wv),
              "vertices written past %zu", wv);
    if (fi) {
        uint32_t *hi = pmt_to_host(ctx, bi, ib);
        PMT_CHECK(!memcmp(hi, fi, 12 * wt), "first %zu triangles differ", wt);
        PMT_CHECK(!memcmp((char *)hi + 12 * wt, poison, ib - 12 * wt), "triangles written past %zu",
                  wt);
        free(hi);
    }
    free(hp);
    free(hn);
    pm_free(ctx, bp);
    pm_free(ctx, bn);
    pm_free(ctx, bi);
    free(poison);
    free(fp);
    free(fn);
    free(fi);
    pm_mesh_free(ctx, &full);
}

static void test_capacity(pm_context *ctx)
{
    size_t n = 40;
    float *cy = pmt_cayley_f32(n);
    pm_volume v = {NULL, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    v.data = pmt_to_ctx(ctx, cy, 4 * n * n * n);
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        pm_mesh m;
        PMT_OK(pm_isosurface(ctx, &v, 0.0, &o, &m));
        size_t nv = m.num_vertices, nt = m.num_triangles;
        pm_mesh_free(ctx, &m);
        PMT_CHECK(nv > 100 && nt > 100, "cayley %zu: too small a mesh", n);
        check_capacity(ctx, &v, mode, nv, nt);         /* exact: OK */
        check_capacity(ctx, &v, mode, nv / 2, nt);     /* vertices short */
        check_capacity(ctx, &v, mode, nv, nt / 3);     /* triangles short */
        check_capacity(ctx, &v, mode, nv + 7, nt + 5); /* room to spare */
        check_capacity(ctx, &v, mode, 0, 0);
    }
    pm_free(ctx, (void *)v.data);
    free(cy);
}

/* got (host copy of a caller buffer of cap bytes): its first n bytes are
 * want's (context memory), the rest still the poison. */
static void same_then_poison(pm_context *ctx, const void *got, const void *want, size_t n,
                             const void *poison, size_t cap, const char *what, const char *array)
{
    void *w = pmt_to_host(ctx, want, n);
    PMT_CHECK(!memcmp(got, w, n), "%s: async %s differ from pm_isosurface's", what, array);
    PMT_CHECK(!memcmp((const char *)got + n, poison, cap - n), "%s: %s written past %zu bytes",
              what, array, n);
    free(w);
}

/* pm_isosurface_async into poisoned caller buffers of capacity vcap/tcap
 * (vertices/triangles; indices and normals only where wanted): the counts
 * in context memory are the full mesh's with flag DOES_NOT_FIT exactly when
 * it exceeds a capacity; a mesh that fits is byte for byte pm_isosurface's
 * and nothing is written past it; on the CUDA backend a mesh that does not
 * fit writes nothing at all. */
static void check_async(pm_context *ctx, const pm_volume *dv, double iso,
                        const pm_isosurface_options *base, const pm_mesh *full, size_t vcap,
                        size_t tcap, const char *what)
{
    const int want_n = base->normals != PM_NORMALS_NONE, want_i = base->mode == PM_MESH_INDEXED;
    size_t nv = full->num_vertices, nt = full->num_triangles;
    size_t vb = 12 * (vcap + 1), ib = 12 * (tcap + 1), pb = vb > ib ? vb : ib;
    unsigned char *poison = malloc(pb);
    memset(poison, 0x5A, pb);
    float *bp = pmt_to_ctx(ctx, poison, vb), *bn = want_n ? pmt_to_ctx(ctx, poison, vb) : NULL;
    uint32_t *bi = want_i ? pmt_to_ctx(ctx, poison, ib) : NULL;
    pm_isosurface_counts *cnt;
    PMT_OK(pm_alloc(ctx, sizeof *cnt, (void **)&cnt));
    pm_isosurface_options o = *base;
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep); /* timed is an input */
    o.report = &rep;
    o.out_positions = bp;
    o.out_normals = bn;
    o.out_indices = bi;
    o.vertex_capacity = vcap;
    o.triangle_capacity = tcap;
    PMT_OK(pm_isosurface_async(ctx, dv, iso, &o, cnt));
    check_path(ctx, &rep, dv, base->mode == PM_MESH_SOUP, what);
    PMT_OK(pm_context_synchronize(ctx));
    pm_isosurface_counts c;
    PMT_OK(pm_download(ctx, &c, cnt, sizeof c));
    const int over = nv > vcap || nt > tcap;
    PMT_CHECK(
        c.num_vertices == nv && c.num_triangles == nt && c.active_cells == full->active_cells &&
            c.flags == (over ? PM_ISOSURFACE_DOES_NOT_FIT : 0u),
        "%s cap %zu/%zu: async counts %llu/%llu/%llu flags %llu, expected %zu/%zu/%llu over %d",
        what, vcap, tcap, (unsigned long long)c.num_vertices, (unsigned long long)c.num_triangles,
        (unsigned long long)c.active_cells, (unsigned long long)c.flags, nv, nt,
        (unsigned long long)full->active_cells, over);
    float *hp = pmt_to_host(ctx, bp, vb), *hn = want_n ? pmt_to_host(ctx, bn, vb) : NULL;
    uint32_t *hi = want_i ? pmt_to_host(ctx, bi, ib) : NULL;
    if (!over) {
        char wc[160];
        snprintf(wc, sizeof wc, "%s cap %zu/%zu", what, vcap, tcap);
        same_then_poison(ctx, hp, full->positions, 12 * nv, poison, vb, wc, "positions");
        if (want_n) same_then_poison(ctx, hn, full->normals, 12 * nv, poison, vb, wc, "normals");
        if (want_i) same_then_poison(ctx, hi, full->indices, 12 * nt, poison, ib, wc, "indices");
    } else if (pm_context_device(ctx) == PM_DEVICE_CUDA) {
        PMT_CHECK(!memcmp(hp, poison, vb) && (!hn || !memcmp(hn, poison, vb)) &&
                      (!hi || !memcmp(hi, poison, ib)),
                  "%s cap %zu/%zu: a mesh that does not fit was written", what, vcap, tcap);
    }
    free(hp);
    free(hn);
    free(hi);
    pm_free(ctx, bp);
    pm_free(ctx, bn);
    pm_free(ctx, bi);
    pm_free(ctx, cnt);
    free(poison);
}

/* pm_isosurface_async against pm_isosurface on the same context: both
 * modes, normals on and off, indices not wanted, capacities exact, to
 * spare, far to spare, short of vertices, of triangles, zero; a random u8
 * volume nearly all active; then a per-frame loop of several extractions
 * queued back to back (one scratch arena, one stream) and checked after a
 * single synchronisation. */
static void test_async(pm_context *ctx)
{
    size_t n = 45;
    float *cy = pmt_cayley_f32(n);
    pm_volume v = {NULL, PM_SAMPLE_F32, n, n, n, 0, 0, {0.5, 1, 0.25}, {1, -2, 3}};
    v.data = pmt_to_ctx(ctx, cy, 4 * n * n * n);
    size_t nr = 60;
    uint8_t *rnd = malloc(nr * nr * nr);
    for (size_t p = 0; p < nr * nr * nr; p++)
        rnd[p] = (uint8_t)(pmt_uniform() * 2.0);
    pm_volume vr = {NULL, PM_SAMPLE_U8, nr, nr, nr, 0, 0, {0, 0, 0}, {0, 0, 0}};
    vr.data = pmt_to_ctx(ctx, rnd, nr * nr * nr);
    /* 168^3 (over 2^22 points): a soup's records chunked per tile on CUDA. */
    size_t nb = 168;
    float *cb = pmt_cayley_f32(nb);
    pm_volume vb = {NULL, PM_SAMPLE_F32, nb, nb, nb, 0, 0, {0.5, 1, 0.25}, {1, -2, 3}};
    vb.data = pmt_to_ctx(ctx, cb, 4 * nb * nb * nb);
    for (int vi = 0; vi < 3; vi++)
        for (int mode = 0; mode < 2; mode++)
            for (int nm = 0; nm < 3; nm++) {
                const pm_volume *dv = vi == 1 ? &vr : vi == 2 ? &vb : &v;
                const double iso = vi == 1 ? 0.5 : 0.0;
                pm_isosurface_options o;
                memset(&o, 0, sizeof o);
                o.mode = (pm_mesh_mode)mode;
                o.normals = nm == 1   ? PM_NORMALS_NONE
                            : nm == 2 ? PM_NORMALS_SOBEL
                                      : PM_NORMALS_CENTRAL;
                o.inside = vi == 1 ? PM_INSIDE_ABOVE : PM_INSIDE_BELOW;
                o.output_in_context_memory = 1;
                pm_isosurface_report rep;
                memset(&rep, 0, sizeof rep); /* timed is an input */
                o.report = &rep;
                pm_mesh full;
                PMT_OK(pm_isosurface(ctx, dv, iso, &o, &full));
                o.report = NULL;
                char what[96];
                snprintf(what, sizeof what, "async %s %s normals %d",
                         vi == 1   ? "random u8"
                         : vi == 2 ? "cayley f32 168^3"
                                   : "cayley f32",
                         mode ? "soup" : "indexed", (int)o.normals);
                check_path(ctx, &rep, dv, mode, what);
                size_t nv = full.num_vertices, nt = full.num_triangles;
                PMT_CHECK(nv > 100 && nt > 100, "%s: too small a mesh", what);
                check_async(ctx, dv, iso, &o, &full, nv, nt, what);
                check_async(ctx, dv, iso, &o, &full, nv + 9, nt + 4, what);
                if (nm == 0) {
                    check_async(ctx, dv, iso, &o, &full, 3 * nv + 1000, 3 * nt + 1000, what);
                    check_async(ctx, dv, iso, &o, &full, nv - 1, nt, what);
                    check_async(ctx, dv, iso, &o, &full, nv, nt - 1, what);
                    check_async(ctx, dv, iso, &o, &full, nv / 3, nt / 3, what);
                    check_async(ctx, dv, iso, &o, &full, 0, 0, what);
                }
                pm_mesh_free(ctx, &full);
            }

    /* A per-frame loop: several iso values queued, then one wait (on the
     * 45^3 volume, and on the 168^3 one, whose chunked soups queued back to
     * back share the context's chunk counter). The second frame's iso is
     * above the field: no records, and the frame after it must still find
     * the counter reset. */
    for (int fi = 0; fi < 2; fi++) {
        const pm_volume *fv = fi ? &vb : &v;
        enum { FRAMES = 5 };
        const double isos[FRAMES] = {0.0, 100.0, 0.3, -0.4, 0.1};
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = PM_MESH_SOUP;
        o.output_in_context_memory = 1;
        pm_mesh ref[FRAMES];
        size_t cap = 0;
        for (int f = 0; f < FRAMES; f++) {
            PMT_OK(pm_isosurface(ctx, fv, isos[f], &o, &ref[f]));
            if (ref[f].num_vertices > cap) cap = ref[f].num_vertices;
        }
        float *pos[FRAMES], *nrm[FRAMES];
        pm_isosurface_counts *cnt;
        PMT_OK(pm_alloc(ctx, FRAMES * sizeof *cnt, (void **)&cnt));
        for (int f = 0; f < FRAMES; f++) {
            PMT_OK(pm_alloc(ctx, 12 * cap, (void **)&pos[f]));
            PMT_OK(pm_alloc(ctx, 12 * cap, (void **)&nrm[f]));
            pm_isosurface_options a = o;
            a.out_positions = pos[f];
            a.out_normals = nrm[f];
            a.vertex_capacity = cap;
            a.triangle_capacity = cap / 3;
            PMT_OK(pm_isosurface_async(ctx, fv, isos[f], &a, cnt + f));
        }
        PMT_OK(pm_context_synchronize(ctx));
        pm_isosurface_counts c[FRAMES];
        PMT_OK(pm_download(ctx, c, cnt, sizeof c));
        for (int f = 0; f < FRAMES; f++) {
            size_t nv = ref[f].num_vertices;
            PMT_CHECK(c[f].num_vertices == nv && c[f].num_triangles == ref[f].num_triangles &&
                          c[f].flags == 0,
                      "frame %d: counts %llu/%llu flags %llu, expected %zu/%zu", f,
                      (unsigned long long)c[f].num_vertices, (unsigned long long)c[f].num_triangles,
                      (unsigned long long)c[f].flags, nv, ref[f].num_triangles);
            PMT_CHECK(nv > 0 || f == 1, "frame %d: no mesh", f);
            if (nv) {
                float *a = pmt_to_host(ctx, pos[f], 12 * nv),
                      *b = pmt_to_host(ctx, ref[f].positions, 12 * nv);
                float *an = pmt_to_host(ctx, nrm[f], 12 * nv),
                      *bn = pmt_to_host(ctx, ref[f].normals, 12 * nv);
                PMT_CHECK(!memcmp(a, b, 12 * nv) && !memcmp(an, bn, 12 * nv),
                          "frame %d: async mesh differs", f);
                free(a);
                free(b);
                free(an);
                free(bn);
            }
            PMT_CHECK(f != 1 || nv == 0, "frame 1 (iso above the field): %zu vertices", nv);
            pm_free(ctx, pos[f]);
            pm_free(ctx, nrm[f]);
            pm_mesh_free(ctx, &ref[f]);
        }
        pm_free(ctx, cnt);
    }

    /* Arguments. */
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.mode = PM_MESH_SOUP;
    o.output_in_context_memory = 1;
    pm_isosurface_counts *one;
    PMT_OK(pm_alloc(ctx, sizeof *one, (void **)&one));
    PMT_CHECK(pm_isosurface_async(ctx, &v, 0.0, &o, one) == PM_STATUS_INVALID_ARGUMENT,
              "async without positions must be refused");
    PMT_CHECK(pm_isosurface_async(ctx, &v, 0.0, &o, NULL) == PM_STATUS_INVALID_ARGUMENT,
              "async without counts must be refused");
    pm_free(ctx, one);
    pm_free(ctx, (void *)v.data);
    pm_free(ctx, (void *)vr.data);
    pm_free(ctx, (void *)vb.data);
    free(cy);
    free(rnd);
    free(cb);
}

/* The mesh of hv on the CPU and of dv (the same samples in context memory)
 * on the GPU: same counts, positions, normals and indices byte for byte.
 * *out gets the CPU mesh's counts (its arrays are freed). */
static void gpu_matches_cpu(pm_context *cpu, pm_context *gpu, const pm_volume *hv,
                            const pm_volume *dv, double iso, const pm_isosurface_options *o,
                            const char *what, pm_mesh *out)
{
    pm_mesh a, b;
    PMT_OK(pm_isosurface(cpu, hv, iso, o, &a));
    pm_isosurface_options og = *o;
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep); /* timed is an input */
    og.report = &rep;
    PMT_OK(pm_isosurface(gpu, dv, iso, &og, &b));
    check_path(gpu, &rep, dv, o->mode == PM_MESH_SOUP, what);
    PMT_CHECK(a.num_vertices == b.num_vertices && a.num_triangles == b.num_triangles,
              "%s: counts %zu/%zu vs cpu %zu/%zu", what, b.num_vertices, b.num_triangles,
              a.num_vertices, a.num_triangles);
    if (a.num_vertices == b.num_vertices && a.num_triangles == b.num_triangles) {
        size_t vb = 12 * a.num_vertices;
        PMT_CHECK(!memcmp(a.positions, b.positions, vb) &&
                      (!a.normals || !memcmp(a.normals, b.normals, vb)),
                  "%s: vertices differ", what);
        PMT_CHECK(!a.indices || !memcmp(a.indices, b.indices, 12 * a.num_triangles),
                  "%s: indices differ", what);
    }
    pm_mesh_free(gpu, &b);
    memset(out, 0, sizeof *out);
    out->num_vertices = a.num_vertices;
    out->num_triangles = a.num_triangles;
    out->active_cells = a.active_cells;
    pm_mesh_free(cpu, &a);
}

/* Field f (nx x ny x nz doubles) with row and slice strides rs, ss
 * (samples), in every sample type from u8 to last (u8/u16 clamp negative
 * values to 0): the GPU mesh equals the CPU mesh, indexed and soup, at
 * iso with normals `normals`; above: inside is above iso (the soup only
 * when above is 2). */
static void field_types_match(pm_context *cpu, pm_context *gpu, const double *f, size_t nx,
                              size_t ny, size_t nz, size_t rs, size_t ss, int last,
                              pm_normals normals, int above, double iso)
{
    for (int type = PM_SAMPLE_U8; type <= last; type++) {
        void *h = pmt_convert(f, nx, ny, nz, (pm_sample_type)type, rs, ss);
        size_t bytes = pm_sample_size((pm_sample_type)type) * ss * nz;
        pm_volume hv = {h, (pm_sample_type)type, nx, ny, nz, rs, ss, {0.7, 1.1, 1.3}, {1, 2, 3}};
        pm_volume dv = hv;
        dv.data = pmt_to_ctx(gpu, h, bytes);
        for (int mode = 0; mode < 2; mode++) {
            pm_isosurface_options o;
            memset(&o, 0, sizeof o);
            o.mode = (pm_mesh_mode)mode;
            o.normals = normals;
            o.inside = (above == 1 || (above == 2 && mode)) ? PM_INSIDE_ABOVE : PM_INSIDE_BELOW;
            char what[128];
            snprintf(what, sizeof what, "%zux%zux%zu (strides %zu, %zu) %s %s iso %g%s", nx, ny, nz,
                     rs, ss, pm_sample_type_string((pm_sample_type)type), mode ? "soup" : "indexed",
                     iso, (o.inside != PM_INSIDE_BELOW) ? " above" : "");
            pm_mesh a;
            gpu_matches_cpu(cpu, gpu, &hv, &dv, iso, &o, what, &a);
            /* An iso value past a type's range leaves its clamped samples
             * flat. */
            const int flat = (type == PM_SAMPLE_U8 && (iso < 0 || iso > 255)) ||
                             (type == PM_SAMPLE_U16 && (iso < 0 || iso > 65535)) ||
                             (type == PM_SAMPLE_I16 && (iso < -32768 || iso > 32767));
            PMT_CHECK(flat || a.num_triangles > 0, "%s: no triangles", what);
        }
        pm_free(gpu, (void *)dv.data);
        free(h);
    }
}

/* A torus field rounded to integers (0..200, plus offset) through
 * field_types_match. */
static void types_match(pm_context *cpu, pm_context *gpu, size_t nx, size_t ny, size_t nz,
                        size_t rs, size_t ss, int last, pm_normals normals, int above,
                        double offset, double iso)
{
    size_t n = nx * ny * nz;
    double *f = pmt_field_f64(PMT_FIELD_TORUS, nx, ny, nz, 0.6, 0.25);
    for (size_t p = 0; p < n; p++)
        f[p] = floor(100.0 * f[p] + 100.5) + offset;
    field_types_match(cpu, gpu, f, nx, ny, nz, rs, ss, last, normals, above, iso);
    free(f);
}

/* The same field in every sample type: the GPU mesh equals the CPU mesh. */
static void test_types(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    types_match(cpu, gpu, 37, 29, 23, 37, 37 * 29, PM_SAMPLE_F64, PM_NORMALS_SOBEL, 0, 0.0, 100.25);
    /* Integer iso (the integer threshold's ceil and floor agree), negative
     * samples and iso (i16 and the floats), both inside sides. */
    types_match(cpu, gpu, 37, 29, 23, 37, 37 * 29, PM_SAMPLE_F64, PM_NORMALS_CENTRAL, 1, 0.0,
                100.0);
    types_match(cpu, gpu, 37, 29, 23, 37, 37 * 29, PM_SAMPLE_F64, PM_NORMALS_CENTRAL, 1, -100.0,
                -3.5);
    types_match(cpu, gpu, 37, 29, 23, 37, 37 * 29, PM_SAMPLE_F64, PM_NORMALS_FORWARD, 0, -100.0,
                -3.0);
    pm_context_destroy(cpu);
}

/* Shapes for the streaming classification (256-point chunks of rows and
 * bands of 31 rows, or 128-point chunks and bands of 63 rows: the chunk
 * widths in brackets): a last chunk of 16 points [128], bands cut after 2
 * rows or none [128, 256], a last band of 7 rows or 1 row [128], padded
 * rows and slices, both inside sides, every type but f64. */
static void test_stream_shapes(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    static const size_t shapes[][5] = {
        /* nx, ny, nz, extra row stride, extra slice stride (samples) */
        {272, 33, 11, 0, 0}, {48, 62, 9, 0, 0},  {16, 31, 7, 16, 32},
        {528, 5, 6, 32, 16}, {40, 70, 8, 8, 16}, {100, 127, 5, 0, 0}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        size_t rs = shapes[c][0] + shapes[c][3], ss = rs * shapes[c][1] + shapes[c][4];
        types_match(cpu, gpu, shapes[c][0], shapes[c][1], shapes[c][2], rs, ss, PM_SAMPLE_F32,
                    PM_NORMALS_CENTRAL, 2, 0.0, 100.25);
    }
    /* Thresholds at and past the ends of each type's range, both inside
     * sides, in rows of whole 16-byte parts (shapes in 128- and 256-point
     * chunks, one padded): u8 flat at 300.5, crossed at 254.5; u16 crossed
     * above 2^15 and near 65535, flat at 65535.5; i16 crossed near -32768,
     * flat past 32767; the unsigned types flat below 0. These volumes take
     * the streaming classification's 16-byte loads under the stream hook
     * (by default the direct classification's). */
    static const double isos[][2] = {/* offset, iso */
                                     {200.0, 300.5},     {155.0, 254.5},     {40000.0, 40100.5},
                                     {65400.0, 65500.5}, {65400.0, 65535.5}, {-32700.0, -32600.5},
                                     {-100.0, -3.5},     {-100.0, -0.5}};
    for (int above = 0; above < 2; above++)
        for (size_t c = 0; c < sizeof isos / sizeof isos[0]; c++) {
            const size_t nx = c % 3 == 0   ? 272
                              : c % 3 == 1 ? 48
                                           : 16,
                         ny = c % 3 == 1 ? 62 : 31, rs = c % 3 == 2 ? 32 : nx,
                         ss = rs * ny + (c % 3 == 2 ? 32 : 0);
            types_match(cpu, gpu, nx, ny, 7, rs, ss, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, above,
                        isos[c][0], isos[c][1]);
        }
    pm_context_destroy(cpu);
}

/* A field of samples 0 and 200 in unpadded rows through field_types_match
 * at iso 100.5, both inside sides. */
static void sides_match(pm_context *cpu, pm_context *gpu, const double *f, size_t nx, size_t ny,
                        size_t nz)
{
    for (int above = 0; above < 2; above++)
        field_types_match(cpu, gpu, f, nx, ny, nz, nx, nx * ny, PM_SAMPLE_F32, PM_NORMALS_CENTRAL,
                          above, 100.5);
}

/* The streaming classification's quiet steps (a warp's slice step whose
 * words have their corners all outside or all inside skips its masks):
 * rows of 2304 points (streamed in every type, 16 bytes a lane for 1- and
 * 2-byte samples), the first half inside and the rest outside (or the
 * reverse, inside below), so the plane x = 1152 falls on a word's end
 * in 256-point chunks (40 rows: the next lane's first bit) and on a
 * chunk's end in 128-point chunks (63 rows: the halo). Single samples of
 * the other side at chunks' first points (x = 128, 256, 384, 1280, 1408,
 * 1536), each in a slice where no other sample of the chunk before
 * differs, make steps whose only mixed cells come from the halo; more at
 * a word's first point, the plane, the row's ends and the first and last
 * slices, in rows 0, 30, 31 (a band's end) and 62. Every type but f64,
 * both inside sides: the GPU mesh equals the CPU's. */
static void test_quiet_edges(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    /* {column, slice} of the flipped samples */
    static const size_t flips[][2] = {{96, 0},   {128, 4},  {256, 2},   {384, 6},  {1151, 9},
                                      {1248, 0}, {1280, 8}, {1408, 10}, {1536, 5}, {2303, 11}};
    static const size_t rows[] = {0, 30, 31, 62};
    const size_t nx = 2304, nz = 12;
    for (int shape = 0; shape < 2; shape++) {
        const size_t ny = shape ? 63 : 40, n = nx * ny * nz;
        double *f = malloc(n * sizeof *f);
        PMT_CHECK(f != NULL, "quiet steps: out of memory");
        if (!f) break;
        for (size_t p = 0; p < n; p++)
            f[p] = p % nx < nx / 2 ? 200.0 : 0.0;
        for (size_t c = 0; c < sizeof flips / sizeof flips[0]; c++)
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
                if (rows[r] < ny) {
                    double *v = &f[flips[c][0] + nx * (rows[r] + ny * flips[c][1])];
                    *v = 200.0 - *v;
                }
        sides_match(cpu, gpu, f, nx, ny, nz);
        free(f);
    }
    pm_context_destroy(cpu);
}

/* The streaming classification's busy words classified 32 at a time (the
 * 16-byte instances in 256-point chunks queue a step's busy words in a
 * ring per warp): rows of 2304 points in 40 rows (256-point chunks),
 * alternating samples in x < 512, so every cell of those words is mixed
 * (a segment's 256 records, the most it holds; a round of 32 words with
 * up to 1024 records, past the warp's stage); beyond it single samples
 * flipped at scattered points, one in 29 up to x = 1408 (nearly every
 * word busy) and one in 389 after it (about a third), so a step queues a
 * varying number of words and segments span two rounds or two steps'
 * rounds.
 * Every type but f64, both inside sides: the GPU mesh equals the CPU's. */
static void test_busy_rounds(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    const size_t nx = 2304, ny = 40, nz = 6, n = nx * ny * nz;
    double *f = malloc(n * sizeof *f);
    PMT_CHECK(f != NULL, "busy rounds: out of memory");
    if (f) {
        for (size_t p = 0; p < n; p++) {
            const size_t x = p % nx;
            const unsigned long long h = (unsigned long long)p * 0x9e3779b97f4a7c15ull >> 40;
            if (x < 512)
                f[p] = x % 2 ? 200.0 : 0.0;
            else
                f[p] = h % (x < 1408 ? 29 : 389) == 0 ? 200.0 : 0.0;
        }
        sides_match(cpu, gpu, f, nx, ny, nz);
        free(f);
    }
    pm_context_destroy(cpu);
}

/* Shapes at the direct classification's bounds (check_path asserts the
 * path): rows of 2048 points (64 words, its widest windows) with padded
 * rows and slices, 3 * 2^23 points (its largest f32 volume) and 3 *
 * 2^24 points (its largest of the other types; f32 streamed); rows of 2049
 * and 2064 points, which take the streaming classification (1- and 2-byte
 * samples: one sample a load, and 16 bytes); every type but f64, both
 * inside sides. */
static void test_direct_shapes(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    types_match(cpu, gpu, 2048, 96, 128, 2048 + 16, (2048 + 16) * 96 + 32, PM_SAMPLE_F32,
                PM_NORMALS_CENTRAL, 2, 0.0, 100.25);
    types_match(cpu, gpu, 2048, 128, 192, 2048 + 16, (2048 + 16) * 128 + 32, PM_SAMPLE_F32,
                PM_NORMALS_CENTRAL, 2, 0.0, 100.25);
    types_match(cpu, gpu, 2049, 8, 9, 2049, 2049 * 8, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, 2, 0.0,
                100.25);
    types_match(cpu, gpu, 2064, 8, 9, 2064, 2064 * 8, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, 2, 0.0,
                100.25);
    pm_context_destroy(cpu);
}

/* Volumes that take the paths the CUDA backend picks by size and type
 * (check_path asserts which), against the CPU backend, all past the
 * direct classification's bound: 1- and 2-byte samples in rows of 520
 * bytes (the bitmask classification) and of whole 16-byte parts (the
 * streaming one, 16 bytes a lane); f32 streamed in 256- and 128-point chunks; f64 rows of
 * whole groups; an f32 volume whose streaming blocks walk several slices
 * each (4 on a GPU of 132 multiprocessors), the ranges of odd blocks
 * backwards. */
static void test_size_paths(pm_context *gpu)
{
    pm_context *cpu = cpu_ctx();
    types_match(cpu, gpu, 2048, 124, 200, 2048, 2048 * 124, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, 2,
                0.0, 100.25);
    types_match(cpu, gpu, 260, 255, 760, 260, 260 * 255, PM_SAMPLE_I16, PM_NORMALS_CENTRAL, 1, 0.0,
                100.25);
    types_match(cpu, gpu, 272, 256, 760, 272, 272 * 256, PM_SAMPLE_U16, PM_NORMALS_CENTRAL, 2, 0.0,
                100.25);
    types_match(cpu, gpu, 384, 100, 880, 384, 384 * 100, PM_SAMPLE_F32, PM_NORMALS_CENTRAL, 2, 0.0,
                100.25);
    types_match(cpu, gpu, 128, 40, 30, 128, 128 * 40, PM_SAMPLE_F64, PM_NORMALS_SOBEL, 0, 0.0,
                100.25);
    /* Over 2^24 points, direct in every type up to f32: the soups' chunked
     * records in pass-2 blocks of 256 (mc_chunk_recs), Sobel normals. */
    types_match(cpu, gpu, 256, 256, 260, 256, 256 * 256, PM_SAMPLE_F32, PM_NORMALS_SOBEL, 2, 0.0,
                100.25);
    pm_context_destroy(cpu);
}

/* A request the device cannot hold: a clear OUT_OF_MEMORY naming the bytes,
 * nothing launched, and the context still works afterwards. The volume
 * claims 16384^3 f32 samples over a small buffer: the scratch for its
 * tile states and records (about 1.8 TB) is asked for, and refused, before
 * any sample is read. (Exhausting the real device memory instead would
 * break the other GPU tests that ctest -j runs at the same time.) */
static void test_oom(pm_context *gpu)
{
    size_t n = 96;
    float *cy = pmt_cayley_f32(n);
    pm_volume v = {NULL, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    v.data = pmt_to_ctx(gpu, cy, 4 * n * n * n);
    pm_volume huge = v;
    huge.nx = huge.ny = huge.nz = 16384;
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.output_in_context_memory = 1;
    pm_mesh m;
    for (int mode = 0; mode < 2; mode++) {
        o.mode = (pm_mesh_mode)mode;
        pm_status s = pm_isosurface(gpu, &huge, 0.0, &o, &m);
        PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY, "16384^3: got %s", pm_status_string(s));
        PMT_CHECK(strstr(pm_last_error(), "bytes") != NULL, "message without the amount: %s",
                  pm_last_error());
        PMT_CHECK(m.num_vertices == 0 && m.positions == NULL, "failed call left a mesh");
        printf("16384^3 volume: %s: %s\n", pm_status_string(s), pm_last_error());
        if (s == PM_STATUS_OK) pm_mesh_free(gpu, &m);
    }
    PMT_OK(pm_isosurface(gpu, &v, 0.0, &o, &m));
    PMT_CHECK(m.num_triangles > 0, "no mesh after the refused request");
    pm_mesh_free(gpu, &m);
    pm_free(gpu, (void *)v.data);
    free(cy);
}

/* More than 2^32 cells (u8, 4.3 GB): a ball near the far corner, so every
 * active cell index is above 2^32; the mesh equals the CPU backend's. Rows
 * of nx = 2049 points take the bitmask kernels, of 2048 the streaming
 * classification with 16-byte loads (check_path asserts which). */
static void test_huge(pm_context *gpu, size_t nx)
{
    size_t ny = 2049, nz = 1056, n = nx * ny * nz;
    uint8_t *h = malloc(n);
    void *d = NULL;
    if (!h || pm_alloc(gpu, n, &d) != PM_STATUS_OK) {
        printf("skipped > 2^32 cells (rows of %zu): not enough memory\n", nx);
        free(h);
        return;
    }
    memset(h, 0, n);
    /* The ball (radius 12.5 at iso 100) in slices 1029 to 1053: every point
     * index past (nx ny) 1024 > 2^32. */
    double cx = nx - 40.0, cy = ny - 50.0, cz = nz - 15.0;
    for (size_t k = nz - 30; k < nz; k++)
        for (size_t j = ny - 80; j < ny; j++)
            for (size_t i = nx - 70; i < nx; i++) {
                double r = sqrt((i - cx) * (i - cx) + (j - cy) * (j - cy) + (k - cz) * (k - cz));
                double val = 200.0 - 8.0 * r;
                h[i + nx * (j + ny * k)] = (uint8_t)(val < 0 ? 0 : val);
            }
    PMT_OK(pm_upload(gpu, d, h, n));
    pm_context *cpu = cpu_ctx();
    const size_t long0 = long_runs, bulk0 = bulk_runs;
    pm_volume hv = {h, PM_SAMPLE_U8, nx, ny, nz, 0, 0, {0, 0, 0}, {0, 0, 0}};
    pm_volume dv = hv;
    dv.data = d;
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        o.inside = PM_INSIDE_ABOVE;
        pm_mesh a;
        gpu_matches_cpu(cpu, gpu, &hv, &dv, 100.0, &o,
                        mode ? "> 2^32 cells, soup" : "> 2^32 cells, indexed", &a);
        PMT_CHECK(a.num_triangles > 1000, "> 2^32 cells: only %zu triangles", a.num_triangles);
        printf("> 2^32 cells (%zu): %zu triangles, %s\n", (nx - 1) * (ny - 1) * (nz - 1),
               a.num_triangles, mode ? "soup" : "indexed");
    }
    /* Streamed, it walks 8 slices a block (536 x 132 blocks: at least 16
     * waves of 3 blocks an SM up to 1474 multiprocessors) after a bulk of
     * ranges of 16 (at 132 multiprocessors slices 0 to 1008: the six waves
     * of 8-slice blocks that u8 keeps for the end leave a bulk up to about
     * 3870 multiprocessors), and the ball crosses the 8-slice ranges'
     * shared slices 1032, 1040 and 1048.
     * The smaller volumes of test_size_paths (f32 384 x 100 x 880, u16 272
     * x 256 x 760) have bulks too at 132 multiprocessors, their surfaces
     * across the bulk's ranges. */
    if (nx == 2048 && pm_context_device(gpu) == PM_DEVICE_CUDA) {
        PMT_CHECK(long_runs == long0 + 2, "> 2^32 cells streamed: %zu runs of more than 4 slices",
                  long_runs - long0);
        PMT_CHECK(bulk_runs == bulk0 + 2, "> 2^32 cells streamed: %zu runs with a bulk",
                  bulk_runs - bulk0);
    }
    pm_context_destroy(cpu);
    pm_free(gpu, d);
    free(h);
}

/* More active points than pass 1's first guess of the records' room
 * (points / 64 + 2^20): random u8 samples, 128^3 and 168^3 points nearly
 * all active, so pass 1 runs again with the exact room; the mesh equals
 * the CPU's. */
static void test_rerun_n(pm_context *gpu, size_t nx)
{
    size_t ny = nx, nz = nx, n = nx * ny * nz;
    uint8_t *h = malloc(n);
    for (size_t p = 0; p < n; p++)
        h[p] = (uint8_t)(pmt_uniform() * 2.0);
    pm_context *cpu = cpu_ctx();
    pm_volume hv = {h, PM_SAMPLE_U8, nx, ny, nz, 0, 0, {0, 0, 0}, {0, 0, 0}};
    pm_volume dv = hv;
    dv.data = pmt_to_ctx(gpu, h, n);
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        o.normals = PM_NORMALS_CENTRAL;
        pm_mesh a;
        gpu_matches_cpu(cpu, gpu, &hv, &dv, 0.5, &o, mode ? "rerun, soup" : "rerun, indexed", &a);
        PMT_CHECK(a.active_cells > n / 64 + (1u << 20), "rerun: only %llu active cells",
                  (unsigned long long)a.active_cells);
        printf("rerun %zu^3 (%llu active cells): %zu triangles, %s\n", nx,
               (unsigned long long)a.active_cells, a.num_triangles, mode ? "soup" : "indexed");
    }
    pm_free(gpu, (void *)dv.data);
    pm_context_destroy(cpu);
    free(h);
}
/* 128^3, and 168^3, whose soup's records are chunked per tile on CUDA. */
static void test_rerun(pm_context *gpu)
{
    test_rerun_n(gpu, 128);
    test_rerun_n(gpu, 168);
}

/* Frames of a simulation on an n^3 lattice, f32: a cayley, a sphere and a
 * torus field, by turns (m of them). */
static void frame_fields(size_t n, int m, float **h)
{
    for (int k = 0; k < m; k++) {
        double *f = pmt_field_f64(k % 3 == 0   ? PMT_FIELD_CAYLEY
                                  : k % 3 == 1 ? PMT_FIELD_SPHERE
                                               : PMT_FIELD_TORUS,
                                  n, n, n, 0.4 + 0.1 * k, 0.2);
        h[k] = pmt_convert(f, n, n, n, PM_SAMPLE_F32, 0, 0);
        free(f);
    }
}

/* The mesh that a call wrote into the caller buffers of a (counts hc)
 * equals r, the reference: counts, then positions, normals and indices
 * byte for byte. */
static void buffers_match(pm_context *c, const pm_isosurface_options *a,
                          const pm_isosurface_counts *hc, const pm_mesh *r, const char *what)
{
    PMT_CHECK(hc->flags == 0 && hc->num_vertices == r->num_vertices &&
                  hc->num_triangles == r->num_triangles && hc->active_cells == r->active_cells,
              "%s: counts %llu/%llu, want %zu/%zu", what, (unsigned long long)hc->num_vertices,
              (unsigned long long)hc->num_triangles, r->num_vertices, r->num_triangles);
    if (hc->num_vertices != r->num_vertices || hc->num_triangles != r->num_triangles) return;
    float *gp = pmt_to_host(c, a->out_positions, 12 * r->num_vertices);
    float *gn = pmt_to_host(c, a->out_normals, 12 * r->num_vertices);
    PMT_CHECK(!memcmp(gp, r->positions, 12 * r->num_vertices) &&
                  !memcmp(gn, r->normals, 12 * r->num_vertices),
              "%s: vertices differ", what);
    free(gp);
    free(gn);
    if (a->mode == PM_MESH_INDEXED) {
        uint32_t *gi = pmt_to_host(c, a->out_indices, 12 * r->num_triangles);
        PMT_CHECK(!memcmp(gi, r->indices, 12 * r->num_triangles), "%s: indices differ", what);
        free(gi);
    }
}

#ifdef PM_HAVE_CUDA
/* pm_isosurface_async captured into a CUDA graph on the context's stream
 * (a simulation's per-frame graph), then the graph replayed on other
 * volumes in the same buffer, with uncaptured calls in between: the
 * direct classification takes the call's cleared tile states under
 * capture (states=cleared), since a replay repeats the launch parameters;
 * every replay's mesh and counts equal pm_isosurface's of that volume.
 * Copies go through pm_upload / pm_download, ordered on the context's
 * stream: a cudaMemcpy from pageable memory on the legacy stream can
 * still be in flight when a graph starts on a non-blocking stream. */
static void test_capture(size_t n)
{
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        PMT_CHECK(0, "capture: cannot create a stream");
        return;
    }
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, (void *)s};
    pm_context *c;
    PMT_OK(pm_context_create(&d, &c));
    enum { N = 3 };
    const size_t np = n * n * n;
    float *h[N];
    frame_fields(n, N, h);
    float *dvol = pmt_to_ctx(c, h[0], 4 * np);
    pm_volume v = {dvol, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    const size_t vcap = 3u << 20, tcap = 1u << 20;
    void *pos, *nrm, *idx, *cnt;
    PMT_OK(pm_alloc(c, 12 * vcap, &pos));
    PMT_OK(pm_alloc(c, 12 * vcap, &nrm));
    PMT_OK(pm_alloc(c, 12 * tcap, &idx));
    PMT_OK(pm_alloc(c, sizeof(pm_isosurface_counts), &cnt));
    for (int mode = 0; mode < 2; mode++) {
        pm_isosurface_options o;
        memset(&o, 0, sizeof o);
        o.mode = (pm_mesh_mode)mode;
        o.normals = PM_NORMALS_CENTRAL;
        o.output_in_context_memory = 1;
        /* References, and a warm-up of the async call (tables, scratch). */
        pm_mesh ref[N];
        for (int k = 0; k < N; k++) {
            PMT_OK(pm_upload(c, dvol, h[k], 4 * np));
            pm_mesh m;
            PMT_OK(pm_isosurface(c, &v, 0.0, &o, &m));
            ref[k] = pmt_mesh_to_host(c, &m);
            pm_mesh_free(c, &m);
        }
        pm_isosurface_options a = o;
        a.out_positions = pos;
        a.out_normals = nrm;
        a.out_indices = mode == PM_MESH_INDEXED ? idx : NULL;
        a.vertex_capacity = vcap;
        a.triangle_capacity = tcap;
        PMT_OK(pm_isosurface_async(c, &v, 0.0, &a, cnt));
        PMT_OK(pm_context_synchronize(c));
        pm_isosurface_report rep;
        memset(&rep, 0, sizeof rep);
        a.report = &rep;
        cudaGraph_t g = NULL;
        cudaGraphExec_t ge = NULL;
        int ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess;
        pm_status cs = ok ? pm_isosurface_async(c, &v, 0.0, &a, cnt) : PM_STATUS_DEVICE_ERROR;
        ok = cudaStreamEndCapture(s, &g) == cudaSuccess && ok;
        ok = ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
        PMT_CHECK(ok && cs == PM_STATUS_OK, "capture: %s, %s", pm_status_string(cs),
                  cudaGetErrorString(cudaGetLastError()));
        a.report = NULL;
        if (!ok || cs != PM_STATUS_OK) break;
        /* The stream hook takes the streaming classification, which
         * clears its states in every call anyway. */
        if (hook_set("stream"))
            PMT_CHECK(path_has(&rep, "pass1=stream") && !strstr(rep.path, "states="),
                      "capture: hook stream, path \"%s\"", rep.path);
        else
            PMT_CHECK(
                path_has(&rep, "pass1=direct") && path_has(&rep, "states=cleared") &&
                    (mode == PM_MESH_INDEXED ||
                     path_has(&rep, np > ((size_t)1 << 22) ? "records=chunks" : "records=ordered")),
                "capture: path \"%s\"", rep.path);
        for (int round = 0; round < 2; round++)
            for (int k = N - 1; k >= 0; k--) {
                /* An uncaptured call on another volume first: the
                 * context's epoch and tickets move on between replays. */
                PMT_OK(pm_upload(c, dvol, h[(k + 1) % N], 4 * np));
                PMT_OK(pm_isosurface_async(c, &v, 0.0, &a, cnt));
                PMT_OK(pm_context_synchronize(c));
                PMT_OK(pm_upload(c, dvol, h[k], 4 * np));
                PMT_OK(cudaGraphLaunch(ge, s) == cudaSuccess ? PM_STATUS_OK
                                                             : PM_STATUS_DEVICE_ERROR);
                PMT_OK(pm_context_synchronize(c));
                pm_isosurface_counts hc;
                PMT_OK(pm_download(c, &hc, cnt, sizeof hc));
                char what[96];
                snprintf(what, sizeof what, "capture replay %d of volume %d (%s)", round, k,
                         mode ? "soup" : "indexed");
                buffers_match(c, &a, &hc, &ref[k], what);
            }
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        for (int k = 0; k < N; k++) {
            free(ref[k].positions);
            free(ref[k].normals);
            free(ref[k].indices);
        }
    }
    pm_free(c, pos);
    pm_free(c, nrm);
    pm_free(c, idx);
    pm_free(c, cnt);
    pm_free(c, dvol);
    pm_context_destroy(c);
    cudaStreamDestroy(s);
    for (int k = 0; k < N; k++)
        free(h[k]);
}
#endif

/* One frame of test_graph: pm_isosurface into the caller buffers of a
 * (its one-wait path) or pm_isosurface_async (as), checked against the
 * CPU backend's mesh ref: counts, bytes, and the launch word want (NULL:
 * neither capture nor graph). Under the nograph hook every capture fails,
 * so the frames that would capture or replay run their launches and say
 * launch=nograph. */
static void graph_call(pm_context *c, const pm_volume *v, double iso, pm_isosurface_options a,
                       int as, void *cnt, const pm_mesh *r, const char *want, const char *what)
{
    if (want && hook_set("nograph")) want = "launch=nograph";
    pm_isosurface_report rep;
    memset(&rep, 0, sizeof rep);
    a.report = &rep;
    pm_isosurface_counts hc;
    if (as) {
        PMT_OK(pm_isosurface_async(c, v, iso, &a, cnt));
        PMT_OK(pm_context_synchronize(c));
        PMT_OK(pm_download(c, &hc, cnt, sizeof hc));
    } else {
        pm_mesh m;
        PMT_OK(pm_isosurface(c, v, iso, &a, &m));
        hc.num_vertices = m.num_vertices;
        hc.num_triangles = m.num_triangles;
        hc.active_cells = m.active_cells;
        hc.flags = 0;
        PMT_CHECK(path_has(&rep, "wait=one"), "%s: path \"%s\"", what, rep.path);
        pm_mesh_free(c, &m);
    }
    /* Under the stream hook pass 1 has no tile states to report; the
     * launches after a failed capture keep the context's. A graph takes
     * its own cleared states, but for chunked records, which take the
     * context's chunk counter and no states. */
    if (want)
        PMT_CHECK(path_has(&rep, want) &&
                      (hook_set("stream") || hook_set("nograph") ||
                       path_has(&rep, path_has(&rep, "records=chunks") ? "states=kept"
                                                                       : "states=cleared")),
                  "%s: path \"%s\", want %s", what, rep.path, want);
    else
        PMT_CHECK(!strstr(rep.path, "launch=graph") && !strstr(rep.path, "launch=capture"),
                  "%s: path \"%s\", want no graph", what, rep.path);
    buffers_match(c, &a, &hc, r, what);
}

/* A repeated call as a CUDA graph (docs/cuda_isosurface.md, "Repeated
 * calls as a CUDA graph"), on a context of its own (its scratch starts
 * empty): pm_isosurface into caller buffers (its one-wait path) and
 * pm_isosurface_async, called frame after frame on new samples in the same
 * volume buffer. The first call of a shape runs its launches, the second
 * is captured and launched (launch=capture), the later ones replay it
 * (launch=graph), on cleared tile states (chunked records: on the
 * context's chunk counter, states=kept); another iso value is another
 * shape, and two shapes by turns replay a graph each (the context
 * remembers its last four shapes). A call that moves
 * the scratch (a larger volume, not a repeated shape) makes the next
 * repeat capture again. Every frame's mesh equals the CPU backend's of
 * that frame's samples, byte for byte. */
static void test_graph(size_t n)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CUDA, 0, 0, NULL};
    pm_context *c, *cpu = cpu_ctx();
    PMT_OK(pm_context_create(&d, &c));
    enum { N = 3, FRAMES = 8 };
    const size_t np = n * n * n;
    float *h[N];
    frame_fields(n, N, h);
    float *dvol = pmt_to_ctx(c, h[0], 4 * np);
    pm_volume v = {dvol, PM_SAMPLE_F32, n, n, n, 0, 0, {0, 0, 0}, {0, 0, 0}};
    /* Frame f: volume f % N at iso[f] and the launch word its report
     * must carry; then, after a call that moves the scratch, two frames
     * more of the last shape. */
    static const double iso[FRAMES] = {0, 0, 0, 0.05, 0, 0.05, 0, 0.05};
    static const char *const word[FRAMES + 2] = {NULL,           "launch=capture", "launch=graph",
                                                 NULL,           "launch=graph",   "launch=capture",
                                                 "launch=graph", "launch=graph",   "launch=capture",
                                                 "launch=graph"};
    void *cnt;
    PMT_OK(pm_alloc(c, sizeof(pm_isosurface_counts), &cnt));
    for (int mode = 0; mode < 2; mode++)
        for (int as = 0; as < 2; as++) {
            pm_isosurface_options o;
            memset(&o, 0, sizeof o);
            o.mode = (pm_mesh_mode)mode;
            o.normals = PM_NORMALS_CENTRAL;
            o.output_in_context_memory = 1;
            pm_mesh ref[FRAMES];
            size_t vcap = 0, tcap = 0;
            for (int f = 0; f < FRAMES; f++) {
                pm_volume hv = v;
                hv.data = h[f % N];
                PMT_OK(pm_isosurface(cpu, &hv, iso[f], &o, &ref[f]));
                if (ref[f].num_vertices > vcap) vcap = ref[f].num_vertices;
                if (ref[f].num_triangles > tcap) tcap = ref[f].num_triangles;
            }
            void *pos, *nrm, *idx;
            PMT_OK(pm_alloc(c, 12 * vcap, &pos));
            PMT_OK(pm_alloc(c, 12 * vcap, &nrm));
            PMT_OK(pm_alloc(c, 12 * tcap, &idx));
            pm_isosurface_options a = o;
            a.out_positions = pos;
            a.out_normals = nrm;
            a.out_indices = mode == PM_MESH_INDEXED ? idx : NULL;
            a.vertex_capacity = vcap;
            a.triangle_capacity = tcap;
            char what[96];
            for (int f = 0; f < FRAMES; f++) {
                snprintf(what, sizeof what, "graph %zu^3 %s %s frame %d", n,
                         mode ? "soup" : "indexed", as ? "async" : "sync", f);
                PMT_OK(pm_upload(c, dvol, h[f % N], 4 * np));
                graph_call(c, &v, iso[f], a, as, cnt, &ref[f], word[f], what);
            }
            if (mode == PM_MESH_SOUP && as) {
                /* A 320^3 volume meshed into the context's memory: its
                 * records' room (about 40 MB) moves the scratch, and the
                 * shape of the frames is captured again. */
                const size_t nb = 320, nbp = nb * nb * nb;
                float *zero = calloc(nbp, sizeof *zero);
                float *dbig = pmt_to_ctx(c, zero, 4 * nbp);
                pm_volume vb = {dbig, PM_SAMPLE_F32, nb, nb, nb, 0, 0, {0, 0, 0}, {0, 0, 0}};
                pm_mesh m;
                PMT_OK(pm_isosurface(c, &vb, 0.5, &o, &m));
                pm_mesh_free(c, &m);
                pm_free(c, dbig);
                free(zero);
                for (int f = FRAMES; f < FRAMES + 2; f++) {
                    snprintf(what, sizeof what, "graph %zu^3 soup async frame %d (scratch moved)",
                             n, f);
                    PMT_OK(pm_upload(c, dvol, h[(FRAMES - 1) % N], 4 * np));
                    graph_call(c, &v, iso[FRAMES - 1], a, as, cnt, &ref[FRAMES - 1], word[f], what);
                }
            }
            for (int f = 0; f < FRAMES; f++)
                pm_mesh_free(cpu, &ref[f]);
            pm_free(c, pos);
            pm_free(c, nrm);
            pm_free(c, idx);
        }
    pm_free(c, cnt);
    pm_free(c, dvol);
    pm_context_destroy(c);
    pm_context_destroy(cpu);
    for (int k = 0; k < N; k++)
        free(h[k]);
}

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    test_capacity(ctx);
    test_async(ctx);
    if (dev == PM_DEVICE_CUDA) {
        test_types(ctx);
        test_stream_shapes(ctx);
        test_quiet_edges(ctx);
        test_busy_rounds(ctx);
        test_direct_shapes(ctx);
        test_size_paths(ctx);
        test_oom(ctx);
        test_rerun(ctx);
        test_huge(ctx, 2049);
        test_huge(ctx, 2048);
#ifdef PM_HAVE_CUDA
        test_capture(72);
        test_capture(168); /* a soup's records chunked per tile */
#endif
        test_graph(72);
        test_graph(168); /* a soup's records chunked per tile */
        printf("forced paths: %zu launch=plain; "
               "pass 1: %zu direct (%zu with its states zeroed first; soups: %zu with chunked "
               "records, %zu ordered), %zu stream (%zu soups with pooled records)\n",
               nopdl_runs, direct_runs, zeroed_runs, chunks_runs, ordered_runs, stream_runs,
               pool_runs);
        /* Both soup record layouts of the direct classification. */
        if (!hook_set("stream"))
            PMT_CHECK(chunks_runs > 0 && ordered_runs > 0,
                      "direct soups: %zu with chunked records, %zu ordered", chunks_runs,
                      ordered_runs);
        /* Both classifications by default (small volumes direct, the
         * larger ones of test_size_paths streamed); the stream hook takes
         * every volume that the direct one would to the streaming one. */
        PMT_CHECK(stream_runs > 0, "pass1=stream never ran");
        PMT_CHECK(pool_runs > 0, "no streamed soup (records=pool) ran");
        /* Both chunk widths: the f32 volumes of test_size_paths take 256
         * (2048-point rows) and 128 points (384-point rows). */
        PMT_CHECK(chunk128_runs > 0 && chunk128_runs < stream_runs,
                  "streamed %zu times, %zu of them in 128-point chunks", stream_runs,
                  chunk128_runs);
        if (hook_set("stream"))
            PMT_CHECK(direct_runs == 0, "hook stream: pass1=direct ran %zu times", direct_runs);
        else
            PMT_CHECK(direct_runs > 0, "pass1=direct never ran");
        /* Both load widths of the direct classification: the volumes of
         * odd row lengths (test_types) load one sample at a time. */
        if (!hook_set("stream"))
            PMT_CHECK(scalar_runs > 0 && scalar_runs < direct_runs,
                      "direct %zu times, %zu of them with scalar loads", direct_runs, scalar_runs);
        /* Both load widths of the streaming one for 1- and 2-byte samples
         * (test_direct_shapes' rows of 2049 and 2064 points; under the
         * stream hook also test_stream_shapes' and test_size_paths'). */
        PMT_CHECK(svec_runs > 0 && sscalar_runs > 0,
                  "1- and 2-byte samples streamed %zu times with vector loads, %zu with scalar "
                  "ones",
                  svec_runs, sscalar_runs);
        /* States zeroed once per context and per larger volume, the rest
         * kept (no clearing kernel); under the epochs hook the epochs wrap
         * every 3 launches of the chained tiles, so about every third of
         * those checked calls zeroes them (the meshes compared with the
         * CPU's all the same; chunked tiles take no epochs). */
        if (hook_set("epochs"))
            PMT_CHECK(direct_runs > chunks_runs && 8 * zeroed_runs >= direct_runs - chunks_runs,
                      "hook epochs: %zu of %zu chained direct runs zeroed the states", zeroed_runs,
                      direct_runs - chunks_runs);
        else if (direct_runs > 0)
            PMT_CHECK(zeroed_runs < direct_runs / 2, "%zu of %zu direct runs zeroed the states",
                      zeroed_runs, direct_runs);
        if (hook_set("nopdl")) PMT_CHECK(nopdl_runs > 0, "hook nopdl: never launch=plain");
    }
    pm_context_destroy(ctx);
    return pmt_finish("test_cuda_isosurface");
}
