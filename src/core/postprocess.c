/* Mesh post-processing, the public entry points (pyramesh.h, "Mesh
 * post-processing"; docs/splashsurf.md). Two kinds:
 *  - data-parallel (vertex normals, normal smoothing, Laplacian and Taubin
 *    smoothing, the AABB clip, SPH normals, interpolation and smoothing
 *    weights): the steps of core/post_rules.h run where the data lives, by
 *    the CPU runner (src/cpu/smooth.c) on host memory and by the context's
 *    backend (src/cuda/postprocess.cu) on device memory; the same bytes;
 *  - the marching-cubes cleanup: data-parallel rounds (core/cleanup_rules.h)
 *    run by the backend table's mc_cleanup where the mesh lives (the CPU
 *    runner for host meshes, src/cuda/mesh_cleanup.cu for device memory);
 *  - sequential (barnacles, components, meshoptimizer decimation, quads,
 *    checks): the CPU runners on the host, a mesh in device memory copied
 *    there and back.
 * Arguments are checked here; runners trust them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

/* Whether the mesh's arrays are device memory (context memory of a
 * non-CPU context). */
static int on_device(const pm_context *ctx, const pm_mesh *mesh)
{
    return mesh->in_context_memory && ctx->device != PM_DEVICE_CPU;
}

/* The host view of a mesh. Read-only views of host meshes use the arrays
 * as they are; a writable view takes the arrays of a mesh that owns them
 * and copies otherwise. */
typedef struct view {
    pmi_hmesh h;
    int borrowed; /* h's arrays are the mesh's own */
} view;

static void view_drop(view *v)
{
    if (!v->borrowed) {
        free(v->h.pos);
        free(v->h.nrm);
        free(v->h.tri);
    }
    memset(v, 0, sizeof *v);
}

/* The checks every post-processing call makes first: the arguments are
 * set, the mesh is indexed, has the arrays the call reads, and its
 * vertices fit 32-bit indices. */
static pm_status mesh_check(pm_context *ctx, const pm_mesh *mesh, const char *fn, int need_normals)
{
    if (!ctx || !mesh) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    if (!mesh->indices)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: needs an indexed mesh (a soup has no shared vertices)", fn);
    if ((mesh->num_vertices && !mesh->positions) || (need_normals && !mesh->normals))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the mesh has no %s", fn,
                         need_normals && !mesh->normals ? "normals" : "positions");
    if (mesh->num_vertices >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu vertices: indices are 32-bit", fn,
                         mesh->num_vertices);
    return PM_STATUS_OK;
}

static pm_status begin(pm_context *ctx, const pm_mesh *mesh, const char *fn, int writable,
                       int need_normals, view *v)
{
    memset(v, 0, sizeof *v);
    pm_status s = mesh_check(ctx, mesh, fn, need_normals);
    if (s != PM_STATUS_OK) return s;
    size_t pb, tb;
    if (!pmi_mul3_size(mesh->num_vertices, 3, sizeof(float), &pb) ||
        !pmi_mul3_size(mesh->num_triangles, 3, sizeof(uint32_t), &tb))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: mesh size overflows", fn);
    v->h.nv = mesh->num_vertices;
    v->h.nt = mesh->num_triangles;
    const int dev = on_device(ctx, mesh);
    if (!dev && (!writable || mesh->owns_arrays)) {
        v->h.pos = mesh->positions;
        v->h.nrm = mesh->normals;
        v->h.tri = mesh->indices;
        v->borrowed = 1;
    } else {
        v->h.pos = malloc(pb ? pb : 1);
        v->h.tri = malloc(tb ? tb : 1);
        v->h.nrm = mesh->normals ? malloc(pb ? pb : 1) : NULL;
        if (!v->h.pos || !v->h.tri || (mesh->normals && !v->h.nrm)) {
            view_drop(v);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for a copy of the mesh",
                             fn);
        }
        pm_status s = PM_STATUS_OK;
        if (dev) {
            s = ctx->backend->download(ctx, v->h.pos, mesh->positions, pb);
            if (s == PM_STATUS_OK) s = ctx->backend->download(ctx, v->h.tri, mesh->indices, tb);
            if (s == PM_STATUS_OK && mesh->normals)
                s = ctx->backend->download(ctx, v->h.nrm, mesh->normals, pb);
        } else {
            memcpy(v->h.pos, mesh->positions, pb);
            memcpy(v->h.tri, mesh->indices, tb);
            if (mesh->normals) memcpy(v->h.nrm, mesh->normals, pb);
        }
        if (s != PM_STATUS_OK) {
            view_drop(v);
            return s;
        }
    }
    /* Every index in range; the first offending triangle is named. */
    size_t bad = SIZE_MAX;
    const long long sc = (long long)(3 * v->h.nt);
    const uint32_t nv = (uint32_t)v->h.nv;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) reduction(min : bad)
    for (long long c = 0; c < sc; c++)
        if (v->h.tri[c] >= nv && (size_t)c / 3 < bad) bad = (size_t)c / 3;
    if (bad != SIZE_MAX) {
        const uint32_t *t = v->h.tri + 3 * bad;
        pm_status s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                "%s: triangle %zu (%u %u %u) has a vertex index out of range "
                                "(%zu vertices)",
                                fn, bad, t[0], t[1], t[2], v->h.nv);
        view_drop(v);
        return s;
    }
    return PM_STATUS_OK;
}

/* Hands the processed view back to the mesh (see pyramesh.h). */
static pm_status finish(pm_context *ctx, pm_mesh *mesh, view *v, const char *fn)
{
    if (!on_device(ctx, mesh)) {
        if (!v->borrowed && mesh->owns_arrays) { /* cannot happen: owned host arrays are borrowed */
            free(mesh->positions);
            free(mesh->normals);
            free(mesh->indices);
        }
        mesh->positions = v->h.pos;
        mesh->normals = v->h.nrm;
        mesh->indices = v->h.tri;
        mesh->num_vertices = v->h.nv;
        mesh->num_triangles = v->h.nt;
        mesh->owns_arrays = 1;
        memset(v, 0, sizeof *v);
        return PM_STATUS_OK;
    }
    size_t pb = v->h.nv * 3 * sizeof(float), tb = v->h.nt * 3 * sizeof(uint32_t);
    void *pos = NULL, *nrm = NULL, *tri = NULL;
    pm_status s = ctx->backend->alloc(ctx, pb, &pos);
    if (s == PM_STATUS_OK) s = ctx->backend->alloc(ctx, tb, &tri);
    if (s == PM_STATUS_OK && v->h.nrm) s = ctx->backend->alloc(ctx, pb, &nrm);
    if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, pos, v->h.pos, pb);
    if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, tri, v->h.tri, tb);
    if (s == PM_STATUS_OK && nrm) s = ctx->backend->upload(ctx, nrm, v->h.nrm, pb);
    if (s != PM_STATUS_OK) {
        if (pos) ctx->backend->free(ctx, pos);
        if (tri) ctx->backend->free(ctx, tri);
        if (nrm) ctx->backend->free(ctx, nrm);
        view_drop(v);
        return pmi_error(s, "%s: could not copy the result back to the device: %s", fn,
                         pm_last_error());
    }
    if (mesh->owns_arrays) {
        if (mesh->positions) ctx->backend->free(ctx, mesh->positions);
        if (mesh->normals) ctx->backend->free(ctx, mesh->normals);
        if (mesh->indices) ctx->backend->free(ctx, mesh->indices);
    }
    mesh->positions = pos;
    mesh->normals = nrm;
    mesh->indices = tri;
    mesh->num_vertices = v->h.nv;
    mesh->num_triangles = v->h.nt;
    mesh->owns_arrays = 1;
    view_drop(v);
    return PM_STATUS_OK;
}

/* After a runner that moved or merged vertices: normals the mesh had are
 * recomputed from the new geometry. */
static pm_status refresh_normals(pm_context *ctx, view *v)
{
    return v->h.nrm ? pmi_cpu_vertex_normals(ctx->num_threads, &v->h) : PM_STATUS_OK;
}

static pm_status done(pm_context *ctx, pm_mesh *mesh, view *v, pm_status s, const char *fn)
{
    if (s != PM_STATUS_OK) {
        /* A borrowed view may have shrunk the arrays in place: keep the
         * counts consistent with them. */
        if (v->borrowed) {
            mesh->num_vertices = v->h.nv;
            mesh->num_triangles = v->h.nt;
            mesh->normals = v->h.nrm;
        }
        if (!v->borrowed) view_drop(v);
        return s;
    }
    return finish(ctx, mesh, v, fn);
}

/* ---- the data-parallel functions: steps on the mesh's own memory ------ */

/* Where the steps of one call run and the temporary arrays they use: the
 * CPU runner on host memory, the context's backend on device memory.
 * Buffers are tracked so that every exit frees them. */
typedef struct px {
    pm_context *ctx;
    int dev;
    pm_context host; /* the CPU runner's context (threads, scan) */
    void *bufs[24];
    int nbufs;
} px;

static void px_init(px *x, pm_context *ctx, int dev)
{
    memset(x, 0, sizeof *x);
    x->ctx = ctx;
    x->dev = dev;
    x->host.device = PM_DEVICE_CPU;
    x->host.backend = pmi_cpu_backend();
    x->host.num_threads = ctx->num_threads;
}

/* count elements of elem bytes, tracked (kept = 1: the caller keeps it). */
static pm_status px_alloc(px *x, size_t count, size_t elem, void *out)
{
    *(void **)out = NULL;
    size_t bytes;
    if (!pmi_mul_size(count ? count : 1, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "mesh post-processing: %zu elements overflow", count);
    if (x->nbufs == (int)(sizeof x->bufs / sizeof x->bufs[0]))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "mesh post-processing: too many buffers");
    void *p = NULL;
    if (x->dev) {
        pm_status s = x->ctx->backend->alloc(x->ctx, bytes, &p);
        if (s != PM_STATUS_OK) return s;
    } else if (!(p = malloc(bytes))) {
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "mesh post-processing: could not allocate %zu bytes", bytes);
    }
    x->bufs[x->nbufs++] = p;
    *(void **)out = p;
    return PM_STATUS_OK;
}

static void px_free_now(px *x, void *p)
{
    if (!p) return;
    if (x->dev)
        x->ctx->backend->free(x->ctx, p);
    else
        free(p);
}

/* Frees a tracked buffer (or, keep: stops tracking it). */
static void px_release(px *x, void *p, int keep)
{
    if (!p) return;
    for (int i = 0; i < x->nbufs; i++)
        if (x->bufs[i] == p) {
            x->bufs[i] = x->bufs[--x->nbufs];
            if (!keep) px_free_now(x, p);
            return;
        }
}

static void px_done(px *x)
{
    for (int i = 0; i < x->nbufs; i++)
        px_free_now(x, x->bufs[i]);
    x->nbufs = 0;
}

static pm_status px_step(px *x, int step, size_t n, const pmi_post_args *a)
{
    if (n == 0) return PM_STATUS_OK;
    if (x->dev) return x->ctx->backend->post_step(x->ctx, step, n, a);
    return pmi_cpu_post_step(x->ctx->num_threads, step, n, a);
}

static pm_status px_scan(px *x, const uint32_t *in, size_t n, uint32_t *out, uint64_t *total)
{
    pm_context *c = x->dev ? x->ctx : &x->host;
    pm_status s = c->backend->scan_exclusive_u32(c, in, n, out, total);
    if (s == PM_STATUS_OVERFLOW)
        return pmi_error(PM_STATUS_OVERFLOW, "mesh post-processing: a count passes 32 bits");
    return s;
}

/* Host <-> the runner's memory. */
static pm_status px_get(px *x, void *host, const void *src, size_t bytes)
{
    if (!bytes) return PM_STATUS_OK;
    if (x->dev) return x->ctx->backend->download(x->ctx, host, src, bytes);
    memcpy(host, src, bytes);
    return PM_STATUS_OK;
}
static pm_status px_put(px *x, void *dst, const void *host, size_t bytes)
{
    if (!bytes) return PM_STATUS_OK;
    if (x->dev) return x->ctx->backend->upload(x->ctx, dst, host, bytes);
    memcpy(dst, host, bytes);
    return PM_STATUS_OK;
}

/* A copy of `words` 32-bit words in the runner's memory (tracked). */
static pm_status px_dup(px *x, const void *src, size_t words, void *out)
{
    pm_status s = px_alloc(x, words, 4, out);
    if (s != PM_STATUS_OK) return s;
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.dst = *(uint32_t **)out;
    a.src = (const uint32_t *)src;
    return px_step(x, PMI_POST_COPY_U32, words, &a);
}

/* The checks of a data-parallel call (no copy is made yet): the mesh is
 * indexed, its indices are in range (the first offending triangle named),
 * and its sizes fit the 32-bit rows. */
static pm_status dp_check(pm_context *ctx, const pm_mesh *mesh, const char *fn, int need_normals,
                          px *x)
{
    memset(x, 0, sizeof *x);
    pm_status s = mesh_check(ctx, mesh, fn, need_normals);
    if (s != PM_STATUS_OK) return s;
    if (mesh->num_triangles > (size_t)(UINT32_MAX / 6))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "%s: %zu triangles: more than 2^32 / 6 (the adjacency's 32-bit rows)", fn,
                         mesh->num_triangles);
    const int dev = on_device(ctx, mesh);
    if (dev && !ctx->backend->post_step)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: the %s backend has no post-processing", fn,
                         ctx->backend->name);
    px_init(x, ctx, dev);
    const size_t nt = mesh->num_triangles;
    if (nt == 0) return PM_STATUS_OK;
    unsigned long long *err, bad = ~0ull;
    s = px_alloc(x, 1, sizeof *err, &err);
    if (s == PM_STATUS_OK) s = px_put(x, err, &bad, sizeof bad);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.nv = mesh->num_vertices;
    a.tri = mesh->indices;
    a.error = err;
    if (s == PM_STATUS_OK) s = px_step(x, PMI_POST_CHECK_INDEX, 3 * nt, &a);
    if (s == PM_STATUS_OK) s = px_get(x, &bad, err, sizeof bad);
    uint32_t t[3] = {0, 0, 0};
    if (s == PM_STATUS_OK && bad != ~0ull) {
        s = px_get(x, t, mesh->indices + 3 * (size_t)bad, sizeof t);
        if (s == PM_STATUS_OK)
            s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                          "%s: triangle %llu (%u %u %u) has a vertex index out of range (%zu "
                          "vertices)",
                          fn, bad, t[0], t[1], t[2], mesh->num_vertices);
    }
    px_release(x, err, 0);
    return s;
}

/* Makes the mesh own its arrays (copies in the same memory of those it
 * does not own), so that the steps may replace them. */
static pm_status dp_own(px *x, pm_mesh *mesh)
{
    if (mesh->owns_arrays) return PM_STATUS_OK;
    float *pos = NULL, *nrm = NULL;
    uint32_t *tri = NULL;
    const size_t nv = mesh->num_vertices, nt = mesh->num_triangles;
    pm_status s = px_dup(x, mesh->positions, 3 * nv, &pos);
    if (s == PM_STATUS_OK) s = px_dup(x, mesh->indices, 3 * nt, &tri);
    if (s == PM_STATUS_OK && mesh->normals) s = px_dup(x, mesh->normals, 3 * nv, &nrm);
    if (s != PM_STATUS_OK) return s; /* px_done frees them */
    px_release(x, pos, 1);
    px_release(x, tri, 1);
    px_release(x, nrm, 1);
    mesh->positions = pos;
    mesh->indices = tri;
    mesh->normals = nrm;
    mesh->owns_arrays = 1;
    return PM_STATUS_OK;
}

/* The adjacency of the mesh into a (vt_off/vt_list; with neighbours also
 * nb_off/nb_list), all tracked by x. */
static pm_status dp_adjacency(px *x, const pm_mesh *mesh, int neighbours, pmi_post_args *a)
{
    const size_t nv = mesh->num_vertices, nt = mesh->num_triangles;
    a->nv = nv;
    a->nt = nt;
    a->tri = mesh->indices;
    uint64_t total;
    pm_status s;
    if ((s = px_alloc(x, nv + 1, 4, &a->cnt)) != PM_STATUS_OK ||
        (s = px_alloc(x, nv + 1, 4, &a->cursor)) != PM_STATUS_OK ||
        (s = px_alloc(x, nv + 1, 4, &a->vt_off)) != PM_STATUS_OK ||
        (s = px_alloc(x, 3 * nt, 4, &a->vt_list)) != PM_STATUS_OK)
        return s;
    a->dst = a->cnt;
    if ((s = px_step(x, PMI_POST_ZERO_U32, nv + 1, a)) != PM_STATUS_OK ||
        (s = px_step(x, PMI_POST_VT_COUNT, 3 * nt, a)) != PM_STATUS_OK ||
        (s = px_scan(x, a->cnt, nv + 1, a->vt_off, &total)) != PM_STATUS_OK)
        return s;
    a->dst = a->cursor;
    if ((s = px_step(x, PMI_POST_ZERO_U32, nv, a)) != PM_STATUS_OK ||
        (s = px_step(x, PMI_POST_VT_FILL, 3 * nt, a)) != PM_STATUS_OK ||
        (s = px_step(x, PMI_POST_VT_SORT, nv, a)) != PM_STATUS_OK)
        return s;
    px_release(x, a->cursor, 0);
    a->cursor = NULL;
    if (neighbours) {
        /* cnt[nv] is still 0: the scan's last entry is the total */
        if ((s = px_alloc(x, 6 * nt, 4, &a->raw)) != PM_STATUS_OK ||
            (s = px_step(x, PMI_POST_NB_FILL, nv, a)) != PM_STATUS_OK ||
            (s = px_alloc(x, nv + 1, 4, &a->nb_off)) != PM_STATUS_OK ||
            (s = px_scan(x, a->cnt, nv + 1, a->nb_off, &total)) != PM_STATUS_OK ||
            (s = px_alloc(x, (size_t)total, 4, &a->nb_list)) != PM_STATUS_OK ||
            (s = px_step(x, PMI_POST_NB_COMPACT, nv, a)) != PM_STATUS_OK)
            return s;
        px_release(x, a->raw, 0);
        a->raw = NULL;
    }
    px_release(x, a->cnt, 0);
    a->cnt = NULL;
    return PM_STATUS_OK;
}

/* Area-weighted normals of the mesh's current positions into its normals
 * array (allocated when absent); a holds the triangle rows. */
static pm_status dp_normals(px *x, pm_mesh *mesh, pmi_post_args *a)
{
    if (!mesh->normals) {
        float *n;
        pm_status s = px_alloc(x, 3 * mesh->num_vertices, 4, &n);
        if (s != PM_STATUS_OK) return s;
        px_release(x, n, 1);
        mesh->normals = n;
    }
    a->pos = mesh->positions;
    a->nrm_out = mesh->normals;
    return px_step(x, PMI_POST_NORMAL, mesh->num_vertices, a);
}

/* After a device call: its errors are reported by the backend's calls
 * (the steps are queued; the context waits where it reads a value). */
static pm_status dp_finish(px *x, pm_status s)
{
    if (s == PM_STATUS_OK && x->dev && x->ctx->backend->synchronize)
        s = x->ctx->backend->synchronize(x->ctx);
    px_done(x);
    return s;
}

pm_status pm_mesh_compute_normals(pm_context *ctx, pm_mesh *mesh)
{
    px x;
    pm_status s = dp_check(ctx, mesh, "pm_mesh_compute_normals", 0, &x);
    if (s == PM_STATUS_OK) s = dp_own(&x, mesh);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    if (s == PM_STATUS_OK) s = dp_adjacency(&x, mesh, 0, &a);
    if (s == PM_STATUS_OK) s = dp_normals(&x, mesh, &a);
    return dp_finish(&x, s);
}

pm_status pm_mesh_smooth_normals(pm_context *ctx, pm_mesh *mesh, int iterations)
{
    const char *fn = "pm_mesh_smooth_normals";
    if (iterations < 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: %d iterations", fn, iterations);
    px x;
    pm_status s = dp_check(ctx, mesh, fn, 1, &x);
    if (s == PM_STATUS_OK) s = dp_own(&x, mesh);
    if (s != PM_STATUS_OK || iterations == 0 || mesh->num_vertices == 0) return dp_finish(&x, s);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    float *tmp = NULL;
    s = dp_adjacency(&x, mesh, 1, &a);
    if (s == PM_STATUS_OK) s = px_alloc(&x, 3 * mesh->num_vertices, 4, &tmp);
    float *cur = mesh->normals, *next = tmp;
    for (int it = 0; it < iterations && s == PM_STATUS_OK; it++) {
        a.nrm = cur;
        a.nrm_out = next;
        s = px_step(&x, PMI_POST_SMOOTH_NORMAL, mesh->num_vertices, &a);
        float *t = cur;
        cur = next;
        next = t;
    }
    if (s == PM_STATUS_OK && cur != mesh->normals) { /* the result is in tmp: swap */
        px_release(&x, tmp, 1);
        px_free_now(&x, mesh->normals);
        mesh->normals = cur;
    }
    return dp_finish(&x, s);
}

/* Laplacian steps with the given factors per iteration (Taubin: two),
 * then the normals the mesh had recomputed. */
static pm_status dp_smooth(pm_context *ctx, pm_mesh *mesh, const char *fn, int iterations,
                           const double *factors, int steps, const float *weights)
{
    px x;
    pm_status s = dp_check(ctx, mesh, fn, 0, &x);
    if (s == PM_STATUS_OK) s = dp_own(&x, mesh);
    if (s != PM_STATUS_OK || iterations == 0 || mesh->num_vertices == 0) return dp_finish(&x, s);
    const size_t nv = mesh->num_vertices;
    if (weights && x.dev && !pmi_ctx_accessible(ctx, weights)) { /* host weights: a copy */
        float *w;
        s = px_alloc(&x, nv, 4, &w);
        if (s == PM_STATUS_OK) s = px_put(&x, w, weights, nv * sizeof *w);
        if (s != PM_STATUS_OK) return dp_finish(&x, s);
        weights = w;
    }
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    float *tmp = NULL;
    s = dp_adjacency(&x, mesh, 1, &a);
    if (s == PM_STATUS_OK) s = px_alloc(&x, 3 * nv, 4, &tmp);
    a.weights = weights;
    float *cur = mesh->positions, *next = tmp;
    for (int it = 0; it < iterations && s == PM_STATUS_OK; it++)
        for (int k = 0; k < steps && s == PM_STATUS_OK; k++) {
            a.pos = cur;
            a.pos_out = next;
            a.factor = factors[k];
            s = px_step(&x, PMI_POST_LAPLACE, nv, &a);
            float *t = cur;
            cur = next;
            next = t;
        }
    if (s == PM_STATUS_OK && cur != mesh->positions) {
        px_release(&x, tmp, 1);
        px_free_now(&x, mesh->positions);
        mesh->positions = cur;
    }
    if (s == PM_STATUS_OK && mesh->normals) s = dp_normals(&x, mesh, &a);
    return dp_finish(&x, s);
}

pm_status pm_mesh_smooth_laplacian(pm_context *ctx, pm_mesh *mesh, int iterations, double beta,
                                   const float *weights)
{
    const char *fn = "pm_mesh_smooth_laplacian";
    if (iterations < 0 || !(beta >= 0.0 && beta <= 1.0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: iterations %d and beta %g (expected >= 0 and in [0, 1])", fn,
                         iterations, beta);
    const double f = beta;
    return dp_smooth(ctx, mesh, fn, iterations, &f, 1, weights);
}

pm_status pm_mesh_smooth_taubin(pm_context *ctx, pm_mesh *mesh, int iterations, double lambda,
                                double mu)
{
    const char *fn = "pm_mesh_smooth_taubin";
    if (lambda == 0) lambda = 0.5;
    if (mu == 0) mu = -0.53;
    if (iterations < 0 || !(lambda > 0 && lambda < 1) || !(mu < -lambda && mu > -1))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: iterations %d, lambda %g, mu %g (expected 0 < lambda < -mu < 1)", fn,
                         iterations, lambda, mu);
    const double f[2] = {lambda, mu};
    return dp_smooth(ctx, mesh, fn, iterations, f, 2, NULL);
}

pm_status pm_mesh_clip_aabb(pm_context *ctx, pm_mesh *mesh, const double min[3],
                            const double max[3], int clamp_vertices, int keep_vertices,
                            uint32_t *vertex_map)
{
    const char *fn = "pm_mesh_clip_aabb";
    if (!min || !max) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL box", fn);
    for (int k = 0; k < 3; k++)
        if (!(min[k] < max[k]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the box's min must be below its max on every axis (axis %d: "
                             "%g, %g)",
                             fn, k, min[k], max[k]);
    px x;
    pm_status s = dp_check(ctx, mesh, fn, 0, &x);
    if (s == PM_STATUS_OK) s = dp_own(&x, mesh);
    if (s != PM_STATUS_OK) return dp_finish(&x, s);
    const size_t nv = mesh->num_vertices, nt = mesh->num_triangles;
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.nv = nv;
    a.nt = nt;
    a.tri = mesh->indices;
    a.pos = mesh->positions;
    a.nrm = mesh->normals;
    for (int k = 0; k < 3; k++) {
        a.box_min[k] = min[k];
        a.box_max[k] = max[k];
    }
    a.clamp = clamp_vertices;
    a.keep_vertices = keep_vertices;
    uint64_t nt2 = 0, nv2 = nv;
    if ((s = px_alloc(&x, nt, 4, &a.flag)) != PM_STATUS_OK ||
        (s = px_alloc(&x, nt, 4, &a.toff)) != PM_STATUS_OK ||
        (s = px_step(&x, PMI_POST_CLIP_KEEP, nt, &a)) != PM_STATUS_OK ||
        (s = px_scan(&x, a.flag, nt, a.toff, &nt2)) != PM_STATUS_OK)
        return dp_finish(&x, s);
    if (!keep_vertices) {
        a.dst = NULL;
        if ((s = px_alloc(&x, nv, 4, &a.used)) != PM_STATUS_OK ||
            (s = px_alloc(&x, nv, 4, &a.vmap)) != PM_STATUS_OK)
            return dp_finish(&x, s);
        a.dst = a.used;
        if ((s = px_step(&x, PMI_POST_ZERO_U32, nv, &a)) != PM_STATUS_OK ||
            (s = px_step(&x, PMI_POST_CLIP_MARK, nt, &a)) != PM_STATUS_OK ||
            (s = px_scan(&x, a.used, nv, a.vmap, &nv2)) != PM_STATUS_OK)
            return dp_finish(&x, s);
    }
    if (vertex_map && x.dev) {
        if ((s = px_alloc(&x, nv, 4, &a.map_out)) != PM_STATUS_OK) return dp_finish(&x, s);
    } else {
        a.map_out = vertex_map;
    }
    if ((s = px_alloc(&x, 3 * (size_t)nt2, 4, &a.tri_out)) != PM_STATUS_OK ||
        (s = px_alloc(&x, 3 * (size_t)nv2, 4, &a.pos_out)) != PM_STATUS_OK ||
        (mesh->normals && (s = px_alloc(&x, 3 * (size_t)nv2, 4, &a.nrm_out)) != PM_STATUS_OK) ||
        (s = px_step(&x, PMI_POST_CLIP_TRI, nt, &a)) != PM_STATUS_OK ||
        (s = px_step(&x, PMI_POST_CLIP_VERT, nv, &a)) != PM_STATUS_OK)
        return dp_finish(&x, s);
    if (vertex_map && x.dev && (s = px_get(&x, vertex_map, a.map_out, nv * 4)) != PM_STATUS_OK)
        return dp_finish(&x, s);
    px_release(&x, a.tri_out, 1);
    px_release(&x, a.pos_out, 1);
    px_release(&x, a.nrm_out, 1);
    px_free_now(&x, mesh->positions);
    px_free_now(&x, mesh->indices);
    px_free_now(&x, mesh->normals);
    mesh->positions = a.pos_out;
    mesh->indices = a.tri_out;
    mesh->normals = a.nrm_out;
    mesh->num_vertices = (size_t)nv2;
    mesh->num_triangles = (size_t)nt2;
    return dp_finish(&x, PM_STATUS_OK);
}

/* Options copied with their struct_size and checked (the lattice). */
static pm_status cleanup_options(const char *fn, const pm_mc_cleanup_options *options,
                                 pm_mc_cleanup_options *o)
{
    memset(o, 0, sizeof *o);
    size_t sz = options->struct_size ? options->struct_size : sizeof *o;
    memcpy(o, options, sz < sizeof *o ? sz : sizeof *o);
    for (int a = 0; a < 3; a++)
        if (!(o->spacing[a] > 0) || !isfinite(o->spacing[a]) || !isfinite(o->origin[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the lattice needs a positive spacing and a finite origin "
                             "(axis %d: spacing %g, origin %g)",
                             fn, a, o->spacing[a], o->origin[a]);
    if (!(o->snap_distance >= 0) || o->max_iterations < 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: snap distance %g and max_iterations %d must not be negative", fn,
                         o->snap_distance, o->max_iterations);
    return PM_STATUS_OK;
}

pm_status pm_mesh_mc_cleanup(pm_context *ctx, pm_mesh *mesh, const pm_mc_cleanup_options *options)
{
    const char *fn = "pm_mesh_mc_cleanup";
    if (!options) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: options are required", fn);
    pm_mc_cleanup_options o;
    pm_status cs = cleanup_options(fn, options, &o);
    if (cs != PM_STATUS_OK) return cs;
    if (ctx && mesh && on_device(ctx, mesh) && ctx->backend->mc_cleanup) {
        /* The backend's runner on the mesh's memory (src/cuda/mesh_cleanup.cu),
         * then the normals the mesh had, recomputed there. */
        px x;
        pm_status s = dp_check(ctx, mesh, fn, 0, &x);
        if (s == PM_STATUS_OK) s = dp_own(&x, mesh);
        if (s == PM_STATUS_OK && mesh->num_triangles > 0) {
            pmi_hmesh h;
            h.nv = mesh->num_vertices;
            h.nt = mesh->num_triangles;
            h.pos = mesh->positions;
            h.nrm = mesh->normals;
            h.tri = mesh->indices;
            s = ctx->backend->mc_cleanup(ctx, &h, &o);
            if (s == PM_STATUS_OK) {
                mesh->positions = h.pos;
                mesh->normals = h.nrm;
                mesh->indices = h.tri;
                mesh->num_vertices = h.nv;
                mesh->num_triangles = h.nt;
                if (mesh->normals) {
                    pmi_post_args a;
                    memset(&a, 0, sizeof a);
                    s = dp_adjacency(&x, mesh, 0, &a);
                    if (s == PM_STATUS_OK) s = dp_normals(&x, mesh, &a);
                }
            }
        }
        return dp_finish(&x, s);
    }
    /* A host mesh (or a backend without a runner: a host copy): the CPU
     * backend's runner. */
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_backend()->mc_cleanup(ctx, &v.h, &o);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_decimate_barnacles(pm_context *ctx, pm_mesh *mesh,
                                     const pm_mc_cleanup_options *options)
{
    const char *fn = "pm_mesh_decimate_barnacles";
    pm_mc_cleanup_options o;
    pm_status s;
    if (options && (s = cleanup_options(fn, options, &o)) != PM_STATUS_OK) return s;
    view v;
    s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_decimate_barnacles(ctx->num_threads, &v.h, options ? &o : NULL,
                                   options ? o.keep_vertices : 0);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_remove_components(pm_context *ctx, pm_mesh *mesh, size_t min_triangles,
                                    int keep_largest, size_t *removed)
{
    const char *fn = "pm_mesh_remove_components";
    if (removed) *removed = 0;
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_remove_components(ctx->num_threads, &v.h, min_triangles, keep_largest, removed);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_simplify(pm_context *ctx, pm_mesh *mesh, size_t target_triangles,
                           double target_error, double *result_error)
{
    const char *fn = "pm_mesh_simplify";
    if (result_error) *result_error = 0;
    if (!pmi_have_meshoptimizer()) return pmi_cpu_simplify(1, NULL, 0, 0, NULL);
    if (!(target_error >= 0) || (target_triangles == 0 && target_error == 0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: give a triangle target, an error bound (>= 0) or both", fn);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_simplify(ctx->num_threads, &v.h, target_triangles, target_error, result_error);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_to_quads(pm_context *ctx, const pm_mesh *mesh, double max_edge_diag_ratio,
                           double max_normal_angle_deg, double max_interior_angle_deg,
                           pm_quads *out)
{
    const char *fn = "pm_mesh_to_quads";
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL output", fn);
    memset(out, 0, sizeof *out);
    if (max_edge_diag_ratio == 0) max_edge_diag_ratio = 1.75;
    if (max_normal_angle_deg == 0) max_normal_angle_deg = 10;
    if (max_interior_angle_deg == 0) max_interior_angle_deg = 135;
    if (!(max_edge_diag_ratio > 0) || !(max_normal_angle_deg > 0) || !(max_interior_angle_deg > 0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the thresholds must be positive", fn);
    view v;
    pm_status s = begin(ctx, mesh, fn, 0, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_to_quads(ctx->num_threads, &v.h, max_edge_diag_ratio, max_normal_angle_deg,
                         max_interior_angle_deg, out);
    if (!v.borrowed) view_drop(&v);
    return s;
}

void pm_quads_free(pm_quads *quads)
{
    if (!quads) return;
    free(quads->triangles);
    free(quads->quads);
    memset(quads, 0, sizeof *quads);
}

pm_status pm_mesh_check(const pm_mesh *mesh, unsigned what, pm_mesh_check_report *report)
{
    const char *fn = "pm_mesh_check";
    if (!mesh || !report) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    memset(report, 0, sizeof *report);
    if (mesh->in_context_memory)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the mesh must be in host memory", fn);
    pm_context host;
    memset(&host, 0, sizeof host);
    host.device = PM_DEVICE_CPU;
    host.backend = pmi_cpu_backend();
    host.num_threads = 1;
    view v;
    pm_status s = begin(&host, mesh, fn, 0, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_mesh_check(1, &v.h, what, report);
    return s;
}

/* ---- SPH interpolation ---------------------------------------------- */

pm_status pm_sph_interpolator_create(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *params, pm_sph_interpolator **out)
{
    const char *fn = "pm_sph_interpolator_create";
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL output", fn);
    *out = NULL;
    if (!ctx || !params || (!xyz && n))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    pm_field_params p;
    memset(&p, 0, sizeof p);
    size_t sz = params->struct_size ? params->struct_size : sizeof p;
    memcpy(&p, params, sz < sizeof p ? sz : sizeof p);
    if (p.smoothing_length == 0) p.smoothing_length = 2.0;
    if (p.rest_density == 0) p.rest_density = 1000.0;
    if (!(p.radius > 0) || !(p.smoothing_length > 0) || !(p.rest_density > 0) ||
        !isfinite(p.radius) || !isfinite(p.smoothing_length))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: radius %g, smoothing length %g and rest density %g must be "
                         "positive",
                         fn, p.radius, p.smoothing_length, p.rest_density);
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no particles", fn);
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles, at most 4294967294", fn, n);
    pm_sph_interpolator *ip = calloc(1, sizeof *ip);
    if (!ip) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    pm_status s;
    if (ctx->device != PM_DEVICE_CPU && ctx->backend->sph_build) {
        /* On the device; host particles go through a temporary copy. */
        ip->ctx = ctx;
        void *tmp = NULL;
        const float *in = xyz;
        s = PM_STATUS_OK;
        if (!pmi_ctx_accessible(ctx, xyz)) {
            s = ctx->backend->alloc(ctx, n * 3 * sizeof *xyz, &tmp);
            if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, tmp, xyz, n * 3 * sizeof *xyz);
            in = tmp;
        }
        if (s == PM_STATUS_OK) s = ctx->backend->sph_build(ctx, in, n, &p, ip);
        if (tmp) ctx->backend->free(ctx, tmp);
    } else {
        s = pmi_cpu_sph_build(ctx->num_threads, xyz, n, &p, ip);
    }
    if (s != PM_STATUS_OK) {
        pm_sph_interpolator_destroy(ip);
        return s;
    }
    *out = ip;
    return PM_STATUS_OK;
}

void pm_sph_interpolator_destroy(pm_sph_interpolator *ip)
{
    if (!ip) return;
    for (int k = 0; k < 4; k++) {
        if (!ip->own[k]) continue;
        if (ip->ctx)
            ip->ctx->backend->free(ip->ctx, ip->own[k]);
        else
            free(ip->own[k]);
    }
    free(ip);
}

/* The arrays of an SPH query in the interpolator's memory: on the device,
 * host arrays go through temporary copies (outputs copied back by
 * sph_end). */
typedef struct sph_io {
    px x;
    float *out_host[2];
    float *out_dev[2];
    size_t out_bytes[2];
} sph_io;

static void sph_begin(sph_io *io, pm_context *ctx, const pm_sph_interpolator *ip)
{
    memset(io, 0, sizeof *io);
    px_init(&io->x, ip->ctx ? ip->ctx : ctx, ip->ctx != NULL);
}

static pm_status sph_in(sph_io *io, const float *host, size_t count, const float **out)
{
    *out = host;
    if (!io->x.dev || !count || pmi_ctx_accessible(io->x.ctx, host)) return PM_STATUS_OK;
    float *d;
    pm_status s = px_alloc(&io->x, count, sizeof *d, &d);
    if (s == PM_STATUS_OK) s = px_put(&io->x, d, host, count * sizeof *d);
    *out = d;
    return s;
}

static pm_status sph_out(sph_io *io, int k, float *host, size_t count, float **out)
{
    *out = host;
    if (!io->x.dev || !host || !count || pmi_ctx_accessible(io->x.ctx, host)) return PM_STATUS_OK;
    pm_status s = px_alloc(&io->x, count, sizeof **out, out);
    io->out_host[k] = host;
    io->out_dev[k] = *out;
    io->out_bytes[k] = count * sizeof **out;
    return s;
}

static pm_status sph_end(sph_io *io, pm_status s)
{
    for (int k = 0; k < 2 && s == PM_STATUS_OK; k++)
        if (io->out_host[k]) s = px_get(&io->x, io->out_host[k], io->out_dev[k], io->out_bytes[k]);
    return dp_finish(&io->x, s);
}

pm_status pm_sph_normals(pm_context *ctx, const pm_sph_interpolator *ip, const float *points,
                         size_t num_points, float *normals)
{
    if (!ctx || !ip || ((!points || !normals) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_normals: NULL argument");
    sph_io io;
    sph_begin(&io, ctx, ip);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.g = ip->g;
    pm_status s = sph_in(&io, points, 3 * num_points, &a.points);
    if (s == PM_STATUS_OK) s = sph_out(&io, 0, normals, 3 * num_points, &a.out);
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_SPH_NORMAL, num_points, &a);
    return sph_end(&io, s);
}

pm_status pm_sph_interpolate(pm_context *ctx, const pm_sph_interpolator *ip, const float *values,
                             int components, const float *points, size_t num_points, float *out)
{
    if (!ctx || !ip || !values || ((!points || !out) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_interpolate: NULL argument");
    if (components < 1 || components > 16)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_interpolate: %d components (1 to 16)",
                         components);
    sph_io io;
    sph_begin(&io, ctx, ip);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.g = ip->g;
    a.comps = components;
    pm_status s = sph_in(&io, points, 3 * num_points, &a.points);
    if (s == PM_STATUS_OK) s = sph_in(&io, values, (size_t)components * ip->g.n, &a.values);
    if (s == PM_STATUS_OK) s = sph_out(&io, 0, out, (size_t)components * num_points, &a.out);
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_SPH_INTERP, num_points, &a);
    return sph_end(&io, s);
}

pm_status pm_sph_smoothing_weights(pm_context *ctx, const pm_sph_interpolator *ip,
                                   const float *points, size_t num_points, double normalization,
                                   float *weights, float *wnn)
{
    if (!ctx || !ip || ((!points || !weights) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_smoothing_weights: NULL argument");
    if (normalization == 0) normalization = 13.0;
    if (!(normalization > 0) || !isfinite(normalization))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_sph_smoothing_weights: normalization %g must be positive",
                         normalization);
    sph_io io;
    sph_begin(&io, ctx, ip);
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.g = ip->g;
    a.normalization = normalization;
    const size_t ncells = (size_t)(ip->g.cd[0] * ip->g.cd[1] * ip->g.cd[2]);
    /* Per particle the weighted neighbour count, for those in the 27
     * cells around some point only. */
    pm_status s = sph_in(&io, points, 3 * num_points, &a.points);
    if (s == PM_STATUS_OK) s = sph_out(&io, 0, weights, num_points, &a.out);
    if (s == PM_STATUS_OK) s = sph_out(&io, 1, wnn, num_points, &a.out2);
    if (s == PM_STATUS_OK) s = px_alloc(&io.x, ncells, 4, &a.need);
    if (s == PM_STATUS_OK) s = px_alloc(&io.x, ip->g.kept, sizeof *a.slot_d, &a.slot_d);
    a.dst = a.need;
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_ZERO_U32, ncells, &a);
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_SPH_NEED, num_points, &a);
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_SPH_WNN, ip->g.kept, &a);
    if (s == PM_STATUS_OK) s = px_step(&io.x, PMI_POST_SPH_WEIGHT, num_points, &a);
    return sph_end(&io, s);
}
