/* A volume meshed as z slabs on one or several contexts (docs/scale.md,
 * "Slabs on devices"): streaming through a GPU whose memory cannot hold
 * the volume (pm_isosurface_stream and pm_isosurface on a CUDA context),
 * and several devices in one process (pm_isosurface_multi).
 *
 * Slab i owns lattice slices [k0, k1) = [i T, min(nz, (i + 1) T)) and is
 * meshed from its window, the slices [k0 - glo, k1 + ghi) of the ghost
 * rule (glo = 1; ghi = 2 with normals or, on a GPU, for an indexed mesh;
 * else 1), clipped to the volume.
 * On a GPU the backend's own extraction meshes the window and keeps the
 * slab's part of pm_isosurface's mesh (isosurface_window: its crossings
 * and its cells' triangles, indices counted from its first vertex); the
 * parts are appended in slab order, indices shifted by the vertices
 * before them. A window over the GPU's budget is meshed as two halves of
 * its slab, recursively. On the CPU the slab is the mesh piece of its box
 * (pm_isosurface_piece), and the pieces of z slabs come in key order, so
 * pm_mesh_pieces_merge appends them (no sort). Either way the mesh is
 * pm_isosurface's, byte for byte, whatever T and however many workers
 * made it.
 *
 * Workers: one host thread per context, slab i on worker i mod n. A
 * worker whose backend cannot read host memory uploads the window into
 * its own device buffer first; PMI_SLAB_GPU_WORKERS workers on one GPU
 * (contexts of their own, streams of their own) overlap one slab's upload
 * with the others' extraction and download. A
 * volume in memory is uploaded from where it is (no host copy) when its
 * slices are packed; a source is read in slice order under a lock, each
 * slice once: the ghost slices a window shares with the previous one are
 * carried over in host memory. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/mesh_out.h"
#include "core/slab_pieces.h"
#include "core/util.h"

typedef struct slab_run slab_run;

typedef struct slab_worker {
    slab_run *run;
    int w;
    pm_context *ctx;
    unsigned char *host; /* window staging in host memory (source or strided volume) */
    void *dev;           /* window in device memory (backends that cannot read host memory) */
    size_t dev_cap;
    pm_status st;
    char msg[512];
    int device; /* copies windows into its device buffer */
    double read_ms, upload_ms, piece_ms;
    size_t splits; /* windows meshed as halves */
    double append_ms;
} slab_worker;

/* A slab's parts from the window extraction, in slice order (more than
 * one where its window was split). */
typedef struct slab_parts {
    pmi_slab_mesh *m;
    size_t n, cap;
} slab_parts;

struct slab_run {
    pm_context *const *ctxs;
    int n;
    pm_volume v; /* geometry and strides; data: the volume in memory, or NULL (source) */
    const pm_volume_source *src;
    pm_lattice lat;
    double iso;
    pm_isosurface_options opt; /* indexed pieces */
    pm_isosurface_options wopt; /* the caller's mode and normals, for windows */
    size_t T, nslabs, glo, ghi, es, sb;
    int window;      /* every worker has isosurface_window: slab parts, not pieces */
    uint64_t budget; /* device bytes a window extraction may use (0: no limit) */
    /* Parts appended by an appender thread as their slabs finish, in slab
     * order, into arrays that become the mesh (window slabs, the mesh in
     * new host arrays): ready[i] once slab i's parts are complete; vb, tb,
     * act the counts so far. */
    int append;
    unsigned char *ready;
    uint64_t vb, tb, act;
    float *pos, *nrm;
    uint32_t *idx;
    pm_mesh_piece *pieces;
    slab_parts *parts;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next_read;      /* the slab whose window is read next */
    size_t read_to;        /* slices [0, read_to) delivered by the source */
    unsigned char *carry;  /* the last glo + ghi slices read */
    size_t carry_k0, carry_n;
    int failed; /* atomic: set by worker_fail, read by every thread */
    /* The appender's own lock and signal (ready[], failed): a worker that
     * finished a slab never waits for the reader's lock. */
    pthread_mutex_t amu;
    pthread_cond_t acv;
    uint64_t bytes_read;
};

static void slab_window(const slab_run *R, size_t i, size_t *k0, size_t *k1, size_t *w0,
                        size_t *w1)
{
    *k0 = i * R->T;
    *k1 = R->v.nz - *k0 > R->T ? *k0 + R->T : R->v.nz;
    *w0 = *k0 >= R->glo ? *k0 - R->glo : 0;
    *w1 = R->v.nz - *k1 > R->ghi ? *k1 + R->ghi : R->v.nz;
}

static pm_status parts_push(slab_parts *P, pmi_slab_mesh *m)
{
    if (P->n == P->cap) {
        size_t cap = P->cap ? 2 * P->cap : 2;
        pmi_slab_mesh *q = realloc(P->m, cap * sizeof *q);
        if (!q) {
            free(m->positions), free(m->normals), free(m->indices);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: no memory for a slab part");
        }
        P->m = q;
        P->cap = cap;
    }
    P->m[P->n++] = *m;
    return PM_STATUS_OK;
}

/* Frees a slab's parts, their arrays given back to ctx (the worker's). */
static void parts_free(pm_context *ctx, slab_parts *P)
{
    for (size_t i = 0; i < P->n; i++) {
        pmi_host_array_put(ctx, P->m[i].positions), pmi_host_array_put(ctx, P->m[i].normals);
        pmi_host_array_put(ctx, P->m[i].indices);
    }
    free(P->m);
    memset(P, 0, sizeof *P);
}

/* The owned slices [a, b) of window `win` (whose slice 0 is global slice
 * w0) meshed by the backend into slab i's parts: the view of the ghost
 * rule around them; over the budget, the two halves in turn. */
static pm_status window_part(slab_worker *W, const pm_volume *win, size_t w0, size_t a, size_t b,
                             size_t i)
{
    slab_run *R = W->run;
    const size_t lo = a >= R->glo ? a - R->glo : 0;
    const size_t hi = b + R->ghi < win->nz ? b + R->ghi : win->nz;
    pm_volume v = *win;
    v.data = (const unsigned char *)win->data + lo * win->slice_stride * R->es;
    v.nz = hi - lo;
    pmi_slab_mesh m;
    pm_status s = W->ctx->backend->isosurface_window(W->ctx, &v, w0 + lo, a - lo, b - lo, R->iso,
                                                     &R->wopt, R->budget, &m);
    if (s == PM_STATUS_OUT_OF_MEMORY && b - a > 1) {
        W->splits++;
        pmi_clear_error();
        const size_t mid = a + (b - a) / 2;
        s = window_part(W, win, w0, a, mid, i);
        return s != PM_STATUS_OK ? s : window_part(W, win, w0, mid, b, i);
    }
    return s != PM_STATUS_OK ? s : parts_push(&R->parts[i], &m);
}

/* n elements of `size` bytes in *p, grown with realloc (large blocks are
 * remapped, not copied). */
static int grow(void *p, uint64_t n, size_t size)
{
    size_t bytes;
    if (!pmi_mul_size((size_t)n, size, &bytes) || (uint64_t)(size_t)n != n) return 0;
    void *q = realloc(*(void **)p, bytes ? bytes : 1);
    if (!q) return 0;
    *(void **)p = q;
    return 1;
}

/* Slab i's parts appended to the mesh's arrays (by the appender, slabs in
 * order), their arrays given back to the context that made them. */
static pm_status append_slab(slab_worker *W, size_t i)
{
    slab_run *R = W->run;
    const double t0 = pmi_now_ms();
    const int indexed = R->wopt.mode == PM_MESH_INDEXED, normals = R->wopt.normals != PM_NORMALS_NONE;
    const int threads = W->ctx->num_threads > 0 ? W->ctx->num_threads : 1;
    slab_parts *P = &R->parts[i];
    uint64_t nv = R->vb, nt = R->tb;
    for (size_t p = 0; p < P->n; p++)
        nv += P->m[p].num_vertices, nt += P->m[p].num_triangles;
    if (!grow(&R->pos, 3 * nv, sizeof(float)) || (normals && !grow(&R->nrm, 3 * nv, sizeof(float))) ||
        (indexed && !grow(&R->idx, 3 * nt, sizeof(uint32_t))))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface: no host memory for a mesh of %llu vertices and %llu "
                         "triangles",
                         (unsigned long long)nv, (unsigned long long)nt);
    for (size_t p = 0; p < P->n; p++) {
        pmi_slab_mesh *m = &P->m[p];
        pmi_memcpy_threads(R->pos + 3 * R->vb, m->positions, (size_t)m->num_vertices * 12);
        if (normals) pmi_memcpy_threads(R->nrm + 3 * R->vb, m->normals, (size_t)m->num_vertices * 12);
        if (indexed) {
            const size_t k = (size_t)m->num_triangles * 3;
            const uint32_t base = (uint32_t)R->vb; /* the index rule is checked at the end */
            uint32_t *dst = R->idx + 3 * R->tb;
            const uint32_t *src = m->indices;
#pragma omp parallel for num_threads(threads) schedule(static) if (k > 262144)
            for (size_t c = 0; c < k; c++)
                dst[c] = src[c] + base;
        }
        R->vb += m->num_vertices;
        R->tb += m->num_triangles;
        R->act += m->active_cells;
    }
    parts_free(R->ctxs[i % (size_t)R->n], P);
    W->append_ms += pmi_now_ms() - t0;
    return PM_STATUS_OK;
}

static void worker_fail(slab_worker *W, pm_status s)
{
    W->st = s;
    snprintf(W->msg, sizeof W->msg, "%s", pm_last_error());
    pthread_mutex_lock(&W->run->mu);
    __atomic_store_n(&W->run->failed, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&W->run->cv);
    pthread_mutex_unlock(&W->run->mu);
    pthread_mutex_lock(&W->run->amu);
    pthread_cond_broadcast(&W->run->acv);
    pthread_mutex_unlock(&W->run->amu);
}

/* Slab i's window from the source into W->host, in slice order. */
static pm_status read_window(slab_worker *W, size_t i, size_t w0, size_t w1, int *stopped)
{
    slab_run *R = W->run;
    pm_status s = PM_STATUS_OK;
    pthread_mutex_lock(&R->mu);
    while (R->next_read != i && !__atomic_load_n(&R->failed, __ATOMIC_SEQ_CST))
        pthread_cond_wait(&R->cv, &R->mu);
    if (__atomic_load_n(&R->failed, __ATOMIC_SEQ_CST)) {
        /* Another worker failed: stop without a status of one's own (the
         * call reports the failing worker's). */
        pthread_mutex_unlock(&R->mu);
        *stopped = 1;
        return PM_STATUS_OK;
    }
    const double t0 = pmi_now_ms();
    /* Slices already delivered come from the carry, the rest from the source. */
    for (size_t k = w0; k < R->read_to && k < w1; k++)
        memcpy(W->host + (k - w0) * R->sb, R->carry + (k - R->carry_k0) * R->sb, R->sb);
    const size_t from = R->read_to > w0 ? R->read_to : w0;
    if (from < w1) {
        s = R->src->read(R->src->user, from, w1, W->host + (from - w0) * R->sb);
        if (s != PM_STATUS_OK && !pm_last_error()[0])
            pmi_error(s, "pm_isosurface_stream: the source failed reading slices [%zu, %zu)", from,
                      w1);
        R->bytes_read += (uint64_t)(w1 - from) * R->sb;
    }
    if (s == PM_STATUS_OK) {
        const size_t keep = R->glo + R->ghi, c0 = w1 - w0 > keep ? w1 - keep : w0;
        memcpy(R->carry, W->host + (c0 - w0) * R->sb, (w1 - c0) * R->sb);
        R->carry_k0 = c0;
        R->carry_n = w1 - c0;
        R->read_to = w1;
        R->next_read = i + 1;
        pthread_cond_broadcast(&R->cv);
    }
    W->read_ms += pmi_now_ms() - t0;
    pthread_mutex_unlock(&R->mu);
    return s;
}

static void *worker_main(void *arg)
{
    slab_worker *W = arg;
    slab_run *R = W->run;
    pm_context *ctx = W->ctx;
    for (size_t i = (size_t)W->w; i < R->nslabs; i += (size_t)R->n) {
        if (__atomic_load_n(&R->failed, __ATOMIC_SEQ_CST)) break;
        size_t k0, k1, w0, w1;
        slab_window(R, i, &k0, &k1, &w0, &w1);
        pm_volume win = R->v;
        win.nz = w1 - w0;
        pm_status s = PM_STATUS_OK;
        if (R->src) {
            int stopped = 0;
            if ((s = read_window(W, i, w0, w1, &stopped)) != PM_STATUS_OK) {
                worker_fail(W, s);
                break;
            }
            if (stopped) break;
            win.data = W->host;
        } else {
            win.data = (const unsigned char *)R->v.data + w0 * R->v.slice_stride * R->es;
        }
        if (W->device) {
            /* Upload: packed slices in one copy; otherwise packed first. */
            const double t0 = pmi_now_ms();
            const size_t bytes = win.nz * R->sb;
            const int packed =
                win.row_stride == win.nx && win.slice_stride == win.nx * win.ny;
            if (!packed) {
                for (size_t k = 0; k < win.nz; k++)
                    for (size_t j = 0; j < win.ny; j++)
                        memcpy(W->host + (k * win.ny + j) * win.nx * R->es,
                               (const unsigned char *)win.data +
                                   (k * win.slice_stride + j * win.row_stride) * R->es,
                               win.nx * R->es);
                win.data = W->host;
                win.row_stride = win.nx;
                win.slice_stride = win.nx * win.ny;
            }
            s = ctx->backend->upload(ctx, W->dev, win.data, bytes);
            if (s != PM_STATUS_OK) {
                worker_fail(W, s);
                break;
            }
            win.data = W->dev;
            W->upload_ms += pmi_now_ms() - t0;
        }
        const double t1 = pmi_now_ms();
        if (R->window) {
            s = window_part(W, &win, w0, k0 - w0, k1 - w0, i);
        } else {
            const uint64_t wlo[3] = {0, 0, w0};
            const pm_lattice_box own = {{0, 0, k0}, {R->v.nx, R->v.ny, k1 - k0}};
            s = pm_isosurface_piece(ctx, &win, wlo, &R->lat, &own, R->iso, &R->opt,
                                    &R->pieces[i]);
        }
        W->piece_ms += pmi_now_ms() - t1;
        if (s != PM_STATUS_OK) {
            worker_fail(W, s);
            break;
        }
        if (R->append) {
            pthread_mutex_lock(&R->amu);
            R->ready[i] = 1;
            pthread_cond_signal(&R->acv);
            pthread_mutex_unlock(&R->amu);
        }
    }
    return NULL;
}

/* The appender: slab after slab as they become ready, so the copies into
 * the mesh overlap the workers' uploads and no worker waits for them. */
static void *appender_main(void *arg)
{
    slab_worker *W = arg;
    slab_run *R = W->run;
    for (size_t i = 0; i < R->nslabs; i++) {
        pthread_mutex_lock(&R->amu);
        while (!R->ready[i] && !__atomic_load_n(&R->failed, __ATOMIC_SEQ_CST))
            pthread_cond_wait(&R->acv, &R->amu);
        const int failed = __atomic_load_n(&R->failed, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&R->amu);
        if (failed) break;
        pm_status s = append_slab(W, i);
        if (s != PM_STATUS_OK) {
            worker_fail(W, s);
            break;
        }
    }
    return NULL;
}

/* The slabs' parts appended into the mesh (opt: the caller's options):
 * counts summed, arrays placed at their offsets, every part's indices
 * shifted by the vertices before it. */
static pm_status assemble(pm_context *ctx, slab_run *R, const pm_isosurface_options *opt,
                          pm_mesh *mesh)
{
    const int indexed = opt->mode == PM_MESH_INDEXED;
    uint64_t nv = 0, nt = 0, act = 0;
    for (size_t i = 0; i < R->nslabs; i++)
        for (size_t p = 0; p < R->parts[i].n; p++) {
            const pmi_slab_mesh *m = &R->parts[i].m[p];
            nv += m->num_vertices;
            nt += m->num_triangles;
            act += m->active_cells;
        }
    pmi_mesh_dest D;
    pm_status st = pmi_mesh_prepare(ctx, opt, indexed, nv, nt, act, mesh, &D);
    if (st != PM_STATUS_OK && st != PM_STATUS_TRUNCATED) return st;
    const int device = opt->output_in_context_memory && ctx->backend != pmi_cpu_backend();
    const int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    uint64_t vb = 0, tb = 0;
    pm_status s2 = PM_STATUS_OK;
    for (size_t i = 0; i < R->nslabs && s2 == PM_STATUS_OK; i++)
        for (size_t p = 0; p < R->parts[i].n && s2 == PM_STATUS_OK; p++) {
            pmi_slab_mesh *m = &R->parts[i].m[p];
            const uint64_t v = vb >= D.vertex_limit ? 0
                               : D.vertex_limit - vb < m->num_vertices ? D.vertex_limit - vb
                                                                       : m->num_vertices;
            s2 = pmi_place(ctx, device, D.positions + 3 * vb, m->positions, (size_t)v * 12);
            if (s2 == PM_STATUS_OK && D.normals)
                s2 = pmi_place(ctx, device, D.normals + 3 * vb, m->normals, (size_t)v * 12);
            if (s2 == PM_STATUS_OK && D.indices) {
                const uint64_t t = tb >= D.tri_limit ? 0
                                   : D.tri_limit - tb < m->num_triangles ? D.tri_limit - tb
                                                                         : m->num_triangles;
                const size_t k = (size_t)t * 3;
                const uint32_t base = (uint32_t)vb; /* nv passed the index rule */
                uint32_t *src = m->indices, *dst = device ? src : D.indices + 3 * tb;
#pragma omp parallel for num_threads(threads) schedule(static) if (k > 262144)
                for (size_t c = 0; c < k; c++)
                    dst[c] = src[c] + base;
                if (device) s2 = pmi_place(ctx, 1, D.indices + 3 * tb, src, k * 4);
            }
            vb += m->num_vertices;
            tb += m->num_triangles;
        }
    if (s2 != PM_STATUS_OK) {
        pm_mesh_free(ctx, mesh);
        return s2;
    }
    return st;
}

pm_status pmi_slab_pieces(pm_context *const *ctxs, int n, const pm_volume *volume,
                          const pm_volume_source *source, double iso,
                          const pm_isosurface_options *opt, size_t T, uint64_t budget,
                          pm_mesh *mesh, pmi_slab_report *rep)
{
    static const char fn[] = "pm_isosurface";
    slab_run R;
    memset(&R, 0, sizeof R);
    R.ctxs = ctxs;
    R.n = n;
    R.v = *volume;
    R.src = source;
    R.iso = iso;
    R.opt = *opt;
    R.opt.mode = PM_MESH_INDEXED;
    R.opt.out_positions = NULL;
    R.opt.out_normals = NULL;
    R.opt.out_indices = NULL;
    R.opt.output_in_context_memory = 0;
    R.opt.report = NULL;
    R.wopt = *opt;
    R.wopt.out_positions = NULL;
    R.wopt.out_normals = NULL;
    R.wopt.out_indices = NULL;
    R.wopt.output_in_context_memory = 0;
    R.wopt.report = NULL;
    R.window = 1;
    for (int w = 0; w < n; w++)
        R.window &= ctxs[w]->backend->isosurface_window != NULL;
    R.budget = budget;
    R.append = R.window && !opt->out_positions && !opt->output_in_context_memory;
    R.es = pm_sample_size(R.v.type);
    R.sb = R.v.nx * R.v.ny * R.es;
    const int normals = opt->normals != PM_NORMALS_NONE;
    /* One slice below even without normals: a window then has two slices
     * at least (the last slab may own one). */
    R.glo = 1;
    /* An indexed window also holds slice k1 + 1: the crossings of slice
     * k1 along z, which precede in mesh order some that the slab's
     * triangles name. */
    R.ghi = normals || (R.window && opt->mode == PM_MESH_INDEXED) ? 2 : 1;
    R.T = T ? T : 1;
    R.nslabs = (R.v.nz + R.T - 1) / R.T;
    const size_t dims[3] = {R.v.nx, R.v.ny, R.v.nz};
    for (int a = 0; a < 3; a++) {
        R.lat.origin[a] = R.v.origin[a];
        R.lat.spacing[a] = R.v.spacing[a];
        R.lat.dims[a] = dims[a];
    }
    const size_t held = R.T + R.glo + R.ghi < R.v.nz ? R.T + R.glo + R.ghi : R.v.nz;
    R.pieces = calloc(R.nslabs, sizeof *R.pieces);
    R.parts = calloc(R.nslabs, sizeof *R.parts);
    R.ready = calloc(R.nslabs + 1, 1);
    /* W[n]: the appender. */
    slab_worker *W = calloc((size_t)n + 1, sizeof *W);
    pthread_t *th = calloc((size_t)n + 1, sizeof *th);
    if (source) R.carry = malloc((R.glo + R.ghi) * R.sb + 1);
    if (!R.pieces || !R.parts || !R.ready || !W || !th || (source && !R.carry)) {
        free(R.pieces), free(R.parts), free(R.ready), free(W), free(th), free(R.carry);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu slabs", fn, R.nslabs);
    }
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cv, NULL);
    pthread_mutex_init(&R.amu, NULL);
    pthread_cond_init(&R.acv, NULL);
    pm_status st = PM_STATUS_OK;
    const int packed = R.v.row_stride == R.v.nx && R.v.slice_stride == R.v.nx * R.v.ny;
    for (int w = 0; w < n && st == PM_STATUS_OK; w++) {
        W[w].run = &R;
        W[w].w = w;
        W[w].ctx = ctxs[w];
        /* A GPU copies every window into its memory (pinned or mapped host
         * memory included: read over the bus, the kernels would crawl). */
        const int device = ctxs[w]->backend->free_bytes != NULL;
        W[w].device = device;
        if (source || (device && !packed)) {
            W[w].host = pmi_alloc_huge(held * R.sb);
            if (!W[w].host)
                st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                               "%s: no host memory for a slab window of %zu slices", fn, held);
        }
        if (st == PM_STATUS_OK && device) {
            st = ctxs[w]->backend->alloc(ctxs[w], held * R.sb, &W[w].dev);
            if (st != PM_STATUS_OK)
                st = pmi_error(st, "%s: no %s memory for a slab window of %zu slices (%zu bytes)",
                               fn, ctxs[w]->backend->name, held, held * R.sb);
        }
    }
    const double t0 = pmi_now_ms();
    int started = 0, appender = 0;
    if (st == PM_STATUS_OK && R.append) {
        W[n].run = &R;
        W[n].w = n;
        W[n].ctx = ctxs[0];
        if (pthread_create(&th[n], NULL, appender_main, &W[n]) == 0)
            appender = 1;
        else
            st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot start the appender thread", fn);
    }
    if (st == PM_STATUS_OK) {
        if (n == 1) {
            worker_main(&W[0]);
            started = 0;
        } else {
            for (int w = 0; w < n; w++) {
                if (pthread_create(&th[w], NULL, worker_main, &W[w]) != 0) {
                    worker_fail(&W[w], pmi_error(PM_STATUS_OUT_OF_MEMORY,
                                                 "%s: cannot start worker thread %d", fn, w));
                    break;
                }
                started++;
            }
            for (int w = 0; w < started; w++)
                pthread_join(th[w], NULL);
        }
    }
    if (appender) pthread_join(th[n], NULL);
    if (st == PM_STATUS_OK) {
        /* The first failing worker's (or the appender's) status and message. */
        for (int w = 0; w <= n; w++)
            if (W[w].st != PM_STATUS_OK) {
                st = pmi_error(W[w].st, "%s", W[w].msg);
                break;
            }
    }
    const double t1 = pmi_now_ms();
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->slabs = R.nslabs;
        rep->slab_slices = R.T;
        rep->ghost_below = R.glo;
        rep->ghost_above = R.ghi;
        rep->workers = n;
        rep->bytes_read = source ? R.bytes_read : (uint64_t)R.v.nz * R.sb;
        rep->window_bytes = (uint64_t)held * R.sb;
        rep->pieces_ms = t1 - t0;
        rep->windows = R.window;
        for (int w = 0; w < n; w++) {
            rep->read_ms += W[w].read_ms;
            rep->upload_ms += W[w].upload_ms;
            rep->piece_ms += W[w].piece_ms;
            rep->splits += W[w].splits;
        }
        rep->append_ms = W[n].append_ms;
    }
    for (int w = 0; w < n; w++) {
        if (W[w].dev) W[w].ctx->backend->free(W[w].ctx, W[w].dev);
        free(W[w].host);
    }
    if (st == PM_STATUS_OK && R.append && (R.vb || R.tb)) {
        /* The appended arrays become the mesh. */
        const int indexed = opt->mode == PM_MESH_INDEXED;
        if (indexed && !pmi_mesh_indices_fit(R.vb)) {
            st = pmi_mesh_index_overflow(R.vb);
        } else {
            memset(mesh, 0, sizeof *mesh);
            mesh->num_vertices = (size_t)(indexed ? R.vb : 3 * R.tb);
            mesh->num_triangles = (size_t)R.tb;
            mesh->positions = R.pos;
            mesh->normals = R.nrm;
            mesh->indices = R.idx;
            mesh->active_cells = R.act;
            mesh->owns_arrays = 1;
            R.pos = R.nrm = NULL;
            R.idx = NULL;
        }
    } else if (st == PM_STATUS_OK) {
        st = R.window ? assemble(ctxs[0], &R, opt, mesh)
                      : pm_mesh_pieces_merge(ctxs[0], R.pieces, R.nslabs, opt, mesh);
    }
    if (rep) rep->merge_ms = pmi_now_ms() - t1;
    free(R.pos), free(R.nrm), free(R.idx);
    for (size_t i = 0; i < R.nslabs; i++) {
        pm_mesh_piece_free(&R.pieces[i]);
        parts_free(ctxs[0], &R.parts[i]);
    }
    free(R.pieces);
    free(R.parts);
    free(R.ready);
    free(R.carry);
    free(W);
    free(th);
    pthread_mutex_destroy(&R.mu);
    pthread_cond_destroy(&R.cv);
    pthread_mutex_destroy(&R.amu);
    pthread_cond_destroy(&R.acv);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Workers and slab thickness                                                 */
/* ------------------------------------------------------------------------ */

pm_status pmi_slab_run(pm_context *const *ctxs, int n, const pm_volume *volume,
                       const pm_volume_source *source, double iso,
                       const pm_isosurface_options *opt, size_t limit, size_t T_want,
                       size_t min_slabs, pm_mesh *mesh, pmi_slab_report *rep)
{
    static const char fn[] = "pm_isosurface";
    /* glo + ghi of a window (pmi_slab_pieces) */
    const size_t g = opt->normals != PM_NORMALS_NONE || opt->mode == PM_MESH_INDEXED ? 3 : 2;
    const size_t sb = volume->nx * volume->ny * pm_sample_size(volume->type);
    /* PMI_SLAB_GPU_WORKERS workers per GPU; one per CPU context. */
    if (n < 1) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no contexts", fn);
    if (T_want > volume->nz) T_want = volume->nz; /* one slab: the volume */
    /* The largest slab every GPU's workers hold (limit: per GPU; 0: 70% of
     * what the GPU has free): the window and its extraction, per worker. */
    size_t Tmax = volume->nz;
    uint64_t least = 0; /* the smallest GPU budget */
    pm_status st = PM_STATUS_OK;
    const uint64_t plane = (uint64_t)volume->nx * volume->ny;
    for (int i = 0; i < n && st == PM_STATUS_OK; i++) {
        if (!ctxs[i]->backend->free_bytes) continue;
        uint64_t budget = limit ? limit : ctxs[i]->backend->free_bytes(ctxs[i]) / 10 * 7;
        if (!least || budget < least) least = budget;
        uint64_t lo = 0, hi = volume->nz; /* the largest T with W need(T) <= budget */
        while (lo < hi) {
            uint64_t mid = lo + (hi - lo + 1) / 2;
            if (PMI_SLAB_GPU_WORKERS * pmi_slab_device_bytes(mid, g, sb, plane) <= budget)
                lo = mid;
            else
                hi = mid - 1;
        }
        const uint64_t most = lo;
        if (most == 0 || (T_want && T_want > most)) {
            size_t t = T_want ? T_want : 1;
            st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                           "%s: a slab of %zu slice%s with %zu ghost slices (%zu bytes each) and "
                           "the extraction's scratch, for each of %d workers (they overlap copies and "
                           "extraction), needs %llu bytes of %s memory; the limit is %llu",
                           fn, t, t == 1 ? "" : "s", g, sb,
                           PMI_SLAB_GPU_WORKERS,
                           (unsigned long long)(PMI_SLAB_GPU_WORKERS *
                                                pmi_slab_device_bytes(t, g, sb, plane)),
                           ctxs[i]->backend->name, (unsigned long long)budget);
        }
        if (most < Tmax) Tmax = (size_t)most;
    }
    size_t T = T_want;
    if (!T) {
        const size_t even = (volume->nz + min_slabs - 1) / (min_slabs ? min_slabs : 1);
        T = even < Tmax ? even : Tmax;
        if (T < 1) T = 1;
    }
    pm_context **w = NULL;
    int k = 0;
    if (st == PM_STATUS_OK) st = pmi_context_workers(ctxs, n, PMI_SLAB_GPU_WORKERS, &w, &k);
    /* A worker's window extraction: its share of its GPU's budget less
     * its window. */
    uint64_t wb = 0;
    if (least) {
        const size_t held = T + g < volume->nz ? T + g : volume->nz;
        const uint64_t half = least / PMI_SLAB_GPU_WORKERS, win = (uint64_t)held * sb;
        wb = half > win ? half - win : 1;
    }
    if (st == PM_STATUS_OK)
        st = pmi_slab_pieces(w, k, volume, source, iso, opt, T, wb, mesh, rep);
    free(w);
    return st;
}

/* ------------------------------------------------------------------------ */
/* A source over a volume in memory                                           */
/* ------------------------------------------------------------------------ */

static pm_status memory_read(void *user, size_t z0, size_t z1, void *dst)
{
    const pm_volume *v = user;
    const size_t es = pm_sample_size(v->type), row = v->nx * es;
    unsigned char *o = dst;
    for (size_t k = z0; k < z1; k++)
        for (size_t j = 0; j < v->ny; j++, o += row)
            memcpy(o, (const unsigned char *)v->data + (k * v->slice_stride + j * v->row_stride) * es,
                   row);
    return PM_STATUS_OK;
}

static void memory_close(void *user) { free(user); }

pm_status pm_volume_source_memory(const pm_volume *volume, pm_volume_source *out)
{
    pmi_clear_error();
    if (!volume || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_volume_source_memory: NULL argument");
    memset(out, 0, sizeof *out);
    pm_volume v;
    pm_status st = pmi_volume_resolve(volume, &v);
    if (st != PM_STATUS_OK) return st;
    pm_volume *copy = malloc(sizeof *copy);
    if (!copy) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_volume_source_memory: no memory");
    *copy = v;
    out->struct_size = sizeof *out;
    out->type = v.type;
    out->nx = v.nx;
    out->ny = v.ny;
    out->nz = v.nz;
    for (int a = 0; a < 3; a++) {
        out->spacing[a] = v.spacing[a];
        out->origin[a] = v.origin[a];
    }
    out->read = memory_read;
    out->close = memory_close;
    out->user = copy;
    return PM_STATUS_OK;
}

const pm_volume *pmi_memory_source_volume(const pm_volume_source *source)
{
    return source && source->read == memory_read ? (const pm_volume *)source->user : NULL;
}

void pmi_slab_report_words(pm_isosurface_report *r, const char *backend, const char *key,
                           const char *value, const pmi_slab_report *S)
{
    if (!r) return;
    char w[32];
    pmi_report_path(r, "backend", backend);
    pmi_report_path(r, key, value);
    snprintf(w, sizeof w, "%zu", S->slabs);
    pmi_report_path(r, "slabs", w);
    snprintf(w, sizeof w, "%zu", S->slab_slices);
    pmi_report_path(r, "thickness", w);
    snprintf(w, sizeof w, "%d", S->workers);
    pmi_report_path(r, "workers", w);
    snprintf(w, sizeof w, "%llu", (unsigned long long)S->bytes_read);
    pmi_report_path(r, "read_bytes", w);
    pmi_report_path(r, "slab", S->windows ? "window" : "piece");
    if (S->splits) {
        snprintf(w, sizeof w, "%zu", S->splits);
        pmi_report_path(r, "splits", w);
    }
    pmi_report_stage(r, 0, "read", S->read_ms);
    pmi_report_stage(r, 1, "upload", S->upload_ms);
    pmi_report_stage(r, 2, "pieces", S->piece_ms);
    pmi_report_stage(r, 3, "merge", S->merge_ms);
}
