/* Loop subdivision (Loop 1987) of indexed meshes, uniform or adaptive: the
 * public entry point, its checks, and the level loop shared by every
 * backend. Each level filters the working stream of triangles (Horn 2005):
 * finished and green (red-green closure, Seeger et al. 2001) triangles go
 * to the output, red ones make the next stream. The per-element steps are
 * in src/core/loop_rules.h and run through the backend's subdivide_step;
 * the stream stays in context memory, and per level the host reads only
 * the totals of three scans (one wait; the last level's stream, all
 * finished, is written into the output by the level before, and the last
 * level does not run); red promotion runs to its closure
 * on the device (a GPU that cannot launch a cooperative grid: a word read
 * per pass), and the error word is read once at the end. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/hooks.h"
#include "core/loop_rules.h"
#include "core/mesh_out.h"
#include "core/util.h"

#define FN "pm_subdivide_loop"

/* Context-memory buffers of one call; freed together. */
typedef struct sd_state {
    pm_context *ctx;
    unsigned hooks; /* PYRAMESH_TEST_HOOKS (core/hooks.h) */
    void *bufs[64];
    int nbufs;
    int waits; /* host waits for counts or flags (pm_subdivide_report) */
} sd_state;

static void sd_free(sd_state *st, void *p)
{
    const pmi_backend *be = st->ctx->backend;
    if (be->scratch_free)
        be->scratch_free(st->ctx, p);
    else
        be->free(st->ctx, p);
}

static pm_status sd_alloc(sd_state *st, uint64_t count, size_t elem, void *out)
{
    size_t bytes;
    if (count > SIZE_MAX || !pmi_mul_size((size_t)count, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, FN ": %llu elements overflow",
                         (unsigned long long)count);
    void *p = NULL;
    const pmi_backend *be = st->ctx->backend;
    pm_status s =
        be->scratch_alloc ? be->scratch_alloc(st->ctx, bytes, &p) : be->alloc(st->ctx, bytes, &p);
    if (s != PM_STATUS_OK) return s;
    int i = 0;
    while (i < st->nbufs && st->bufs[i])
        i++;
    if (i == (int)(sizeof st->bufs / sizeof st->bufs[0])) {
        sd_free(st, p);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, FN ": too many buffers");
    }
    st->bufs[i] = p;
    if (i == st->nbufs) st->nbufs++;
    *(void **)out = p;
    return PM_STATUS_OK;
}

static void sd_release(sd_state *st, void *p)
{
    if (!p) return;
    for (int i = 0; i < st->nbufs; i++)
        if (st->bufs[i] == p) {
            sd_free(st, p);
            st->bufs[i] = NULL;
            return;
        }
}

static void sd_release_all(sd_state *st)
{
    for (int i = 0; i < st->nbufs; i++)
        if (st->bufs[i]) sd_free(st, st->bufs[i]);
    st->nbufs = 0;
}

static pm_status sd_step(sd_state *st, int step, uint64_t n, const pmi_loop_args *a)
{
    if (n == 0) return PM_STATUS_OK;
    return st->ctx->backend->subdivide_step(st->ctx, step, (size_t)n, a);
}

static pm_status sd_copy(sd_state *st, void *dst, const void *src, uint64_t words)
{
    pmi_loop_args a;
    memset(&a, 0, sizeof a);
    a.dst = (uint32_t *)dst;
    a.src = (const uint32_t *)src;
    return sd_step(st, PMI_LOOP_COPY_U32, words, &a);
}

/* An exclusive scan and its total; with total NULL (the caller knows it
 * fits 32 bits), queued with no host wait where the backend offers it. */
static pm_status sd_scan(sd_state *st, uint32_t *in, uint32_t *out, uint64_t n, uint64_t *total)
{
    const pmi_backend *be = st->ctx->backend;
    if (total) *total = 0;
    if (n == 0) return PM_STATUS_OK;
    if (!total && be->scan_queued_u32) return be->scan_queued_u32(st->ctx, in, (size_t)n, out);
    pm_status s = be->scan_exclusive_u32(st->ctx, in, (size_t)n, out, total);
    if (s == PM_STATUS_OVERFLOW)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": a level's count passes 32 bits");
    return s;
}

/* k scans (at most PMI_SCAN_MANY) with one host wait for their totals
 * (the CPU's scans return them). */
static pm_status sd_scans(sd_state *st, int k, pmi_scan_job *jobs)
{
    const pmi_backend *be = st->ctx->backend;
    st->waits++;
    if (!be->scan_many_u32) {
        for (int i = 0; i < k; i++) {
            pm_status s =
                sd_scan(st, (uint32_t *)jobs[i].in, jobs[i].out, jobs[i].n, &jobs[i].total);
            if (s != PM_STATUS_OK) return s;
        }
        return PM_STATUS_OK;
    }
    pm_status s = be->scan_many_u32(st->ctx, k, jobs);
    if (s == PM_STATUS_OVERFLOW)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": a level's count passes 32 bits");
    return s;
}

/* Reads the error word and turns a recorded failure into its message. */
static pm_status sd_check(sd_state *st, unsigned long long *err_ctx, const uint32_t *tri_ctx)
{
    unsigned long long e;
    st->waits++;
    pm_status s = st->ctx->backend->download(st->ctx, &e, err_ctx, sizeof e);
    if (s != PM_STATUS_OK || e == PMI_LOOP_ERR_NONE) return s;
    const unsigned long long kind = e >> 56, idx = e & 0xFFFFFFFFFFFFFFull;
    uint32_t t3[3] = {0, 0, 0};
    size_t t = kind == PMI_LOOP_ERR_NONMANIFOLD ? (size_t)idx / 3 : (size_t)idx;
    if (kind != PMI_LOOP_ERR_WALK)
        st->ctx->backend->download(st->ctx, t3, tri_ctx + 3 * t, sizeof t3);
    switch (kind) {
    case PMI_LOOP_ERR_INDEX:
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         FN ": triangle %zu (%u %u %u) has a vertex index out of range", t, t3[0],
                         t3[1], t3[2]);
    case PMI_LOOP_ERR_REPEAT:
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         FN ": triangle %zu (%u %u %u) repeats a vertex", t, t3[0], t3[1], t3[2]);
    case PMI_LOOP_ERR_NONMANIFOLD: {
        unsigned k = (unsigned)(idx % 3);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         FN ": non-manifold edge (%u, %u): three or more triangles share it, "
                            "the first is triangle %zu",
                         t3[k], t3[(k + 1) % 3], t);
    }
    default:
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         FN ": corrupt fan at corner %llu (internal error)", idx);
    }
}

/* The vertex -> corner lists of `ntri` (3 * nt corners, nv vertices),
 * sorted by corner: into a->count, a->offset, a->list; with `twins`,
 * a->tri's twins too (PMI_LOOP_TWIN sorts each vertex's list and sets the
 * twins of the half-edges leaving it). The counts' scan needs no host wait:
 * its total is 3 * nt. */
static pm_status sd_csr(sd_state *st, pmi_loop_args *a, const uint32_t *ntri, uint64_t nt,
                        uint64_t nv, int twins)
{
    pm_status s;
    if ((s = sd_alloc(st, nv + 1, 4, &a->count)) != PM_STATUS_OK ||
        (s = sd_alloc(st, nv + 1, 4, &a->offset)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 3 * nt + 1, 4, &a->list)) != PM_STATUS_OK)
        return s;
    a->ntri = ntri;
    a->dst = a->count;
    if ((s = sd_step(st, PMI_LOOP_ZERO_U32, nv, a)) != PM_STATUS_OK ||
        (s = sd_step(st, PMI_LOOP_CSR_COUNT, nt, a)) != PM_STATUS_OK ||
        (s = sd_scan(st, a->count, a->offset, nv, NULL)) != PM_STATUS_OK ||
        (s = sd_step(st, PMI_LOOP_ZERO_U32, nv, a)) != PM_STATUS_OK ||
        (s = sd_step(st, PMI_LOOP_CSR_FILL, 3 * nt, a)) != PM_STATUS_OK)
        return s;
    return sd_step(st, twins ? PMI_LOOP_TWIN : PMI_LOOP_CSR_SORT, nv, a);
}

static void sd_free_csr(sd_state *st, pmi_loop_args *a)
{
    sd_release(st, a->count);
    sd_release(st, a->offset);
    sd_release(st, a->list);
    a->count = a->offset = a->list = NULL;
}

/* Grows a per-vertex array of `per` words from nv to nv2 vertices. */
static pm_status sd_grow(sd_state *st, void *pp, uint64_t nv, uint64_t nv2, int per)
{
    void **p = (void **)pp;
    if (!*p) return PM_STATUS_OK;
    void *q = NULL;
    pm_status s = sd_alloc(st, nv2 * (uint64_t)per, 4, &q);
    if (s == PM_STATUS_OK) s = sd_copy(st, q, *p, nv * (uint64_t)per);
    if (s != PM_STATUS_OK) return s;
    sd_release(st, *p);
    *p = q;
    return PM_STATUS_OK;
}

/* The working mesh at the start: topology checked, twins, start corners
 * and (for the angle test) the vertices' normals. */
static pm_status sd_topology(sd_state *st, pmi_loop_args *a, unsigned long long *err)
{
    pm_status s;
    /* the checks' verdict is read after the twins (sd_uniform says why
     * that is safe), before the walks */
    if ((s = sd_step(st, PMI_LOOP_CHECK_TRI, a->n, a)) != PM_STATUS_OK) return s;
    if ((s = sd_csr(st, a, a->tri, a->n, a->nv, 1)) != PM_STATUS_OK ||
        (s = sd_check(st, err, a->tri)) != PM_STATUS_OK ||
        (s = sd_step(st, PMI_LOOP_VSTART, a->nv, a)) != PM_STATUS_OK)
        return s;
    if (a->nrm) {
        a->npos = a->pos;
        a->nout = a->nrm;
        if ((s = sd_step(st, PMI_LOOP_CSR_NORMAL, a->nv, a)) != PM_STATUS_OK) return s;
    }
    sd_free_csr(st, a);
    return PM_STATUS_OK;
}

/* The split flags of a level that is not the last: the per-vertex walk
 * (criterion normals from level 1 on, the input's came from its corner
 * lists; even moves for the deviation test), the criterion per half-edge
 * (a triangle's three at once), then in adaptive mode red promotion to its
 * closure (the backend repeats its passes until one changes no edge, with
 * no host wait; on a GPU that cannot launch a cooperative grid the host
 * reads a word per pass). */
static pm_status sd_split(sd_state *st, pmi_loop_args *a, int level)
{
    pm_status s;
    const uint64_t n = a->n;
    if (a->max_dev > 0.0 && (s = sd_alloc(st, a->nv, sizeof(double), &a->evdev)) != PM_STATUS_OK)
        return s;
    if (a->evdev || (a->nrm && level > 0)) {
        pmi_loop_args w = *a;
        if (level == 0) w.nrm = NULL;
        if ((s = sd_step(st, PMI_LOOP_WALK_VERTEX, a->nv, &w)) != PM_STATUS_OK) return s;
    }
    if ((s = sd_step(st, PMI_LOOP_SPLIT, n, a)) != PM_STATUS_OK) return s;
    sd_release(st, a->evdev);
    a->evdev = NULL;
    if (!a->adaptive) return PM_STATUS_OK;
    if ((s = sd_step(st, PMI_LOOP_PROMOTE, n, a)) != PM_STATUS_UNSUPPORTED) return s;
    /* a GPU that cannot launch the cooperative grid: a pass at a time, the
     * host reading whether it split an edge */
    pmi_loop_args z;
    memset(&z, 0, sizeof z);
    z.dst = a->changed;
    for (uint32_t changed = 1; changed;) {
        if ((s = sd_step(st, PMI_LOOP_ZERO_U32, 1, &z)) != PM_STATUS_OK ||
            (s = sd_step(st, PMI_LOOP_PROMOTE_PASS, n, a)) != PM_STATUS_OK)
            return s;
        st->waits++;
        if ((s = st->ctx->backend->download(st->ctx, &changed, a->changed, 4)) != PM_STATUS_OK)
            return s;
    }
    return PM_STATUS_OK;
}

/* The output mesh, prepared as soon as its sizes are known (at the level
 * before the last, at the only level with levels 0, or at one whose
 * stream ends): from then on the levels write their triangles, and that
 * level's new vertices, in place, and the level before the last writes
 * the last stream (its red children) after its own triangles; only the
 * earlier levels' triangles are copied at the end. */
typedef struct sd_out {
    int ready;  /* prepared */
    int direct; /* the output arrays are context memory */
    pmi_mesh_dest dest;
    uint32_t *all; /* every output triangle, in context memory */
    uint64_t nt;   /* triangles in all */
    uint64_t at;   /* triangles of the levels so far */
} sd_out;

static pm_status sd_out_prepare(sd_state *st, const pm_subdivide_options *o, uint64_t nv,
                                uint64_t nt, sd_out *d, pm_mesh *out)
{
    if (nt > PMI_LOOP_MAX_TRIANGLES)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": %llu output triangles", (unsigned long long)nt);
    pm_isosurface_options io;
    memset(&io, 0, sizeof io);
    io.struct_size = sizeof io;
    io.normals = o->normals == PM_NORMALS_NONE ? PM_NORMALS_NONE : PM_NORMALS_CENTRAL;
    io.output_in_context_memory = o->output_in_context_memory;
    pm_status s = pmi_mesh_prepare(st->ctx, &io, 1, nv, nt, 0, out, &d->dest);
    if (s != PM_STATUS_OK) return s;
    /* On the CPU context memory is host memory: write the arrays directly. */
    d->direct = o->output_in_context_memory || pm_context_device(st->ctx) == PM_DEVICE_CPU;
    if (d->direct)
        d->all = d->dest.indices;
    else if ((s = sd_alloc(st, 3 * nt, 4, &d->all)) != PM_STATUS_OK)
        return s;
    d->nt = nt;
    d->ready = 1;
    return PM_STATUS_OK;
}

/* One level: split decisions, scans, new vertices, emitted triangles and
 * the next stream. *emitted receives this level's count of output
 * triangles, *chunk their scratch array (NULL: written into d's output);
 * before_last: the next level is the last, so the next stream goes into
 * the output after this level's triangles (sd_run then stops). */
static pm_status sd_level(sd_state *st, pmi_loop_args *a, int level, int last, int before_last,
                          uint32_t **chunk, uint64_t *emitted, const pm_subdivide_options *o,
                          sd_out *d, pm_mesh *out)
{
    pm_subdivide_report *rep = o->report;
    pm_status s;
    const uint64_t n = a->n, nv = a->nv;
    uint64_t edges = 0, reds = 0;
    a->last = last;
    if (!last && (s = sd_split(st, a, level)) != PM_STATUS_OK) return s;
    /* the emitted and red counts, and (not last) the split edges' owner
     * flags, scanned with one host wait */
    pmi_scan_job job[3] = {{a->emit, a->emit, n, 0},
                           {a->red, a->red, n, 0},
                           {a->owner, a->owner, last ? 0 : 3 * n, 0}};
    if ((s = sd_step(st, PMI_LOOP_CLASSIFY, n, a)) != PM_STATUS_OK ||
        (s = sd_scans(st, 3, job)) != PM_STATUS_OK)
        return s;
    *emitted = job[0].total;
    reds = job[1].total;
    edges = job[2].total;
    if (nv + edges > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": level %d would make %llu vertices", level + 1,
                         (unsigned long long)(nv + edges));
    if (4 * reds > PMI_LOOP_MAX_TRIANGLES)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": level %d would make %llu triangles", level + 1,
                         (unsigned long long)(4 * reds));
    if (rep && level <= PM_SUBDIVIDE_MAX_LEVELS) {
        rep->stream[level] = n;
        rep->split_edges[level] = edges;
        rep->finished[level] = *emitted;
        if (edges) rep->levels = level + 1;
    }
    /* the output's sizes are known once this level's or the next one's
     * stream is the last */
    if (!d->ready && (last || before_last || reds == 0) &&
        (s = sd_out_prepare(st, o, last ? nv : nv + edges, d->at + *emitted + 4 * reds, d, out)) !=
            PM_STATUS_OK)
        return s;
    const float *pos_old = a->pos;
    a->pos_new = (float *)a->pos;
    a->vstart_new = NULL;
    if (!last) {
        if (d->ready && d->direct)
            a->pos_new = d->dest.positions; /* the output's vertices */
        else if ((s = sd_alloc(st, 3 * (nv + edges), 4, &a->pos_new)) != PM_STATUS_OK)
            return s;
        /* EVEN writes every old vertex's position and start corner, ODD the
         * new ones' */
        if ((s = sd_alloc(st, nv + edges, 4, &a->vstart_new)) != PM_STATUS_OK ||
            (s = sd_grow(st, &a->nrm, nv, nv + edges, 3)) != PM_STATUS_OK ||
            (s = sd_grow(st, &a->weight, nv, nv + edges, 1)) != PM_STATUS_OK)
            return s;
    }
    /* The level before the last writes its red triangles' children, the
     * last stream, straight into the output after its own triangles: the
     * last level emits that stream unchanged and in order, so it is not
     * run (sd_run) and their twins are not stored. */
    *chunk = NULL;
    if ((!d->ready && (s = sd_alloc(st, 3 * *emitted, 4, chunk)) != PM_STATUS_OK) ||
        (!before_last && ((s = sd_alloc(st, 12 * reds, 4, &a->tri_next)) != PM_STATUS_OK ||
                          (s = sd_alloc(st, 12 * reds, 4, &a->twin_next)) != PM_STATUS_OK)))
        return s;
    if (before_last) a->tri_next = d->all + 3 * (d->at + *emitted);
    a->out_tri = d->ready ? d->all + 3 * d->at : *chunk;
    /* When few edges split (fewer than 3/8 of the triangle count: a
     * quarter of a closed mesh's edges), the vertices with a split edge
     * are marked first and EVEN walks only their fans; else every fan is
     * walked (marking would cost more than the walks it saves). */
    if (!last && 8 * edges < 3 * n && !(st->hooks & PMI_HOOK_WALKALL)) {
        pmi_loop_args zv;
        memset(&zv, 0, sizeof zv);
        if ((s = sd_alloc(st, (nv + 3) / 4, 4, &zv.dst)) != PM_STATUS_OK ||
            (s = sd_step(st, PMI_LOOP_ZERO_U32, (nv + 3) / 4, &zv)) != PM_STATUS_OK)
            return s;
        a->vsplit = (uint8_t *)zv.dst;
        if ((s = sd_step(st, PMI_LOOP_MARK_ENDS, 3 * n, a)) != PM_STATUS_OK) return s;
    }
    if (!last && ((s = sd_step(st, PMI_LOOP_EVEN, nv, a)) != PM_STATUS_OK ||
                  (s = sd_step(st, PMI_LOOP_ODD, 3 * n, a)) != PM_STATUS_OK))
        return s;
    sd_release(st, a->vsplit);
    a->vsplit = NULL;
    if ((s = sd_step(st, PMI_LOOP_EMIT, n, a)) != PM_STATUS_OK) return s;
    /* the next level's stream and vertices */
    sd_release(st, a->tri);
    sd_release(st, a->twin);
    a->tri = a->tri_next;
    a->twin = a->twin_next;
    a->tri_next = a->twin_next = NULL;
    a->n = (uint32_t)(4 * reds);
    if (!last) {
        sd_release(st, (void *)pos_old);
        sd_release(st, a->vstart);
        a->pos = a->pos_new;
        a->vstart = a->vstart_new;
        a->nv = (uint32_t)(nv + edges);
    }
    return PM_STATUS_OK;
}

/* The options resolved and checked. */
static pm_status sd_options(const pm_subdivide_options *in, pm_subdivide_options *o, int levels)
{
    memset(o, 0, sizeof *o);
    if (in) {
        size_t sz = in->struct_size ? in->struct_size : sizeof *o;
        memcpy(o, in, sz < sizeof *o ? sz : sizeof *o);
    }
    o->struct_size = sizeof *o;
    if (levels < 0 || levels > PM_SUBDIVIDE_MAX_LEVELS)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": levels %d, expected 0 to %d", levels,
                         PM_SUBDIVIDE_MAX_LEVELS);
    if (!(o->max_edge >= 0.0) || !isfinite(o->max_edge))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": max_edge %g, expected >= 0",
                         o->max_edge);
    if (!(o->max_deviation >= 0.0) || !isfinite(o->max_deviation))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": max_deviation %g, expected >= 0",
                         o->max_deviation);
    if (!(o->max_angle_deg >= 0.0 && o->max_angle_deg <= 180.0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": max_angle_deg %g, expected 0 to 180",
                         o->max_angle_deg);
    if (o->normals < PM_NORMALS_DEFAULT || o->normals > PM_NORMALS_SOBEL)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": bad normals value %d", (int)o->normals);
    return PM_STATUS_OK;
}

/* Copies an input array into fresh context memory. */
static pm_status sd_input(sd_state *st, const void *src, int in_ctx, uint64_t words, void *out)
{
    pm_status s = sd_alloc(st, words, 4, out);
    if (s != PM_STATUS_OK || words == 0) return s;
    void *dst = *(void **)out;
    if (in_ctx) return sd_copy(st, dst, src, words);
    return st->ctx->backend->upload(st->ctx, dst, src, (size_t)words * 4);
}

/* The input level's triangles and positions: read in place when the
 * kernels can read them (context memory, or the CPU; no step writes the
 * stream's triangles or positions, each level writes new arrays), else
 * uploaded into context memory. */
static pm_status sd_input_level(sd_state *st, const pm_mesh *mesh, uint32_t **tri, float **pos)
{
    *tri = (uint32_t *)mesh->indices;
    *pos = (float *)mesh->positions;
    if (mesh->in_context_memory || pm_context_device(st->ctx) == PM_DEVICE_CPU) return PM_STATUS_OK;
    pm_status s = sd_input(st, mesh->indices, 0, 3 * (uint64_t)mesh->num_triangles, tri);
    if (s == PM_STATUS_OK)
        s = sd_input(st, mesh->positions, 0, 3 * (uint64_t)mesh->num_vertices, pos);
    return s;
}

/* Writes the result into *out: the levels' triangles in order (those
 * not written in place copied), positions and (wanted) the normals over
 * the whole output. */
static pm_status sd_output(sd_state *st, pmi_loop_args *a, const pm_subdivide_options *o,
                           uint32_t **chunks, const uint64_t *counts, int nchunks, sd_out *d,
                           pm_mesh *out)
{
    pm_status s;
    if (!d->ready && (s = sd_out_prepare(st, o, a->nv, d->at, d, out)) != PM_STATUS_OK) return s;
    const uint64_t nt = d->nt;
    uint64_t at = 0;
    for (int i = 0; i < nchunks; i++) {
        if (chunks[i] &&
            (s = sd_copy(st, d->all + 3 * at, chunks[i], 3 * counts[i])) != PM_STATUS_OK)
            return s;
        at += counts[i];
    }
    float *nrm = NULL;
    if (d->dest.normals) {
        if (d->direct)
            nrm = d->dest.normals;
        else if ((s = sd_alloc(st, 3 * (uint64_t)a->nv, 4, &nrm)) != PM_STATUS_OK)
            return s;
        if ((s = sd_csr(st, a, d->all, nt, a->nv, 0)) != PM_STATUS_OK) return s;
        a->npos = a->pos;
        a->nout = nrm;
        if ((s = sd_step(st, PMI_LOOP_CSR_NORMAL, a->nv, a)) != PM_STATUS_OK) return s;
        sd_free_csr(st, a);
    }
    const size_t vb = (size_t)a->nv * 3 * sizeof(float);
    if (d->direct)
        return a->pos == d->dest.positions
                   ? PM_STATUS_OK
                   : sd_copy(st, d->dest.positions, a->pos, 3 * (uint64_t)a->nv);
    if ((s = st->ctx->backend->download(st->ctx, d->dest.positions, a->pos, vb)) != PM_STATUS_OK ||
        (nrm &&
         (s = st->ctx->backend->download(st->ctx, d->dest.normals, nrm, vb)) != PM_STATUS_OK))
        return s;
    return st->ctx->backend->download(st->ctx, d->dest.indices, d->all, (size_t)nt * 3 * 4);
}

/* ---- uniform subdivision -------------------------------------------------
 * Every edge splits, so all sizes follow from the input's: F_l = 4^l F_0
 * triangles, E_{l+1} = 2 E_l + 3 F_l edges, V_{l+1} = V_l + E_l vertices.
 * The input level is checked and numbered as in the general loop (corner
 * lists, twins, start corners, one scan of the owner flags); then each
 * level is two steps, EVEN_UNIFORM per vertex and RED_UNIFORM per triangle,
 * on ping-pong buffers allocated once, the last level writing the output
 * arrays themselves; normals come from the output patches of the stream
 * two levels before the output (NORMAL_PATCH), the input's corner lists
 * and that stream's fans (NORMAL_OLD), and the edges of the stream three
 * levels up (NORMAL_NEW; with one level, the input's edges), without
 * corner lists of the output. The host waits
 * for the input's checks and its edge count, and once at the end for the
 * error word; never per level. */

/* The larger of a buffer's sizes over the levels in [lo, hi] of one parity. */
static uint64_t sd_parity_max(const uint64_t *size, int lo, int hi, int parity)
{
    uint64_t m = 0;
    for (int l = lo; l <= hi; l++)
        if ((l & 1) == parity && size[l] > m) m = size[l];
    return m;
}

/* Returns PM_STATUS_OK with *fallback set when the general loop must run
 * instead (a level past the size limits: it reports the error). */
static pm_status sd_uniform(sd_state *st, const pm_mesh *mesh, int L, const pm_subdivide_options *o,
                            pm_mesh *out, int *fallback)
{
    pm_context *ctx = st->ctx;
    const uint64_t nv0 = mesh->num_vertices, nt0 = mesh->num_triangles;
    uint64_t F[PM_SUBDIVIDE_MAX_LEVELS + 1], E[PM_SUBDIVIDE_MAX_LEVELS + 1],
        V[PM_SUBDIVIDE_MAX_LEVELS + 1];
    *fallback = 0;
    F[0] = nt0;
    for (int l = 1; l <= L; l++) {
        F[l] = 4 * F[l - 1];
        if (F[l] > PMI_LOOP_MAX_TRIANGLES) {
            *fallback = 1;
            return PM_STATUS_OK;
        }
    }
    pmi_loop_args a;
    memset(&a, 0, sizeof a);
    a.n = (uint32_t)nt0;
    a.nv = (uint32_t)nv0;
    unsigned long long *err = NULL;
    const unsigned long long none = PMI_LOOP_ERR_NONE;
    pm_status s;
    uint32_t *tri0;
    float *pos0;
    if ((s = sd_input_level(st, mesh, &tri0, &pos0)) != PM_STATUS_OK) return s;
    /* From two levels the last two splits run at once (RED_LAST2), from
     * the stream two levels up: level L-1's triangles, twins and owner
     * numbers are never stored. */
    const int fused = L >= 2;
    const int top = fused ? L - 2 : L - 1; /* the last stream stored */
    /* per-stream buffers by level parity: twin, owner for levels 0..top,
     * start corners (below); triangles for 1..top and positions for
     * 1..L-1 (0 is the input, L the output) */
    uint64_t tw_size[PM_SUBDIVIDE_MAX_LEVELS + 1];
    for (int l = 0; l <= L; l++)
        tw_size[l] = 3 * F[l];
    uint32_t *twin[2] = {NULL, NULL}, *owner[2] = {NULL, NULL}, *tri[2] = {NULL, NULL};
    uint32_t *vstart[2] = {NULL, NULL};
    float *pos[2] = {NULL, NULL};
    for (int p = 0; p < 2; p++) {
        const uint64_t w = sd_parity_max(tw_size, 0, top, p);
        const uint64_t t = sd_parity_max(tw_size, 1, top, p);
        if ((s = sd_alloc(st, w, 4, &twin[p])) != PM_STATUS_OK ||
            (s = sd_alloc(st, w, 4, &owner[p])) != PM_STATUS_OK ||
            (s = sd_alloc(st, t, 4, &tri[p])) != PM_STATUS_OK)
            return s;
    }
    if ((s = sd_alloc(st, 1, sizeof none, &err)) != PM_STATUS_OK ||
        (s = ctx->backend->upload(ctx, err, &none, sizeof none)) != PM_STATUS_OK)
        return s;
    a.tri = tri0;
    a.pos = pos0;
    a.twin = twin[0];
    a.owner = owner[0];
    a.error = err;
    /* checks, corner lists (kept for the normals and the first level's
     * start corners), twins with the input's owner flags (every edge
     * splits), and the flags' scan; the host reads the checks' verdict
     * with the scan's total. Until then a bad index is harmless: the lists
     * leave its corner out, the twins are matched within the lists, and
     * CHECK_TRI sets no twin and a 0 flag for a half-edge leaving a bad
     * index. A bad index (or a repeated vertex) is reported before a
     * non-manifold edge that TWIN may also find: the error word keeps the
     * least kind. */
    uint64_t edges0 = 0;
    if ((s = sd_step(st, PMI_LOOP_CHECK_TRI, a.n, &a)) != PM_STATUS_OK ||
        (s = sd_csr(st, &a, a.tri, a.n, a.nv, 1)) != PM_STATUS_OK ||
        (st->waits++, s = sd_scan(st, a.owner, a.owner, 3 * (uint64_t)a.n, &edges0)) !=
            PM_STATUS_OK ||
        (s = sd_check(st, err, a.tri)) != PM_STATUS_OK)
        return s;
    /* sizes */
    E[0] = edges0;
    V[0] = nv0;
    for (int l = 0; l < L; l++) {
        V[l + 1] = V[l] + E[l];
        E[l + 1] = 2 * E[l] + 3 * F[l];
        if (V[l + 1] > UINT32_MAX) {
            *fallback = 1;
            return PM_STATUS_OK;
        }
    }
    uint64_t v_size[PM_SUBDIVIDE_MAX_LEVELS + 1];
    for (int l = 0; l <= L; l++)
        v_size[l] = V[l];
    /* positions of levels 1..L-1 and start corners of the levels that
     * walk (0..L-1, RED_LAST2's level L-1 excepted) by parity (the first
     * level's start corners are written by its EVEN_UNIFORM) */
    for (int p = 0; p < 2; p++) {
        const uint64_t npos = sd_parity_max(v_size, 1, L - 1, p);
        const uint64_t nvs = sd_parity_max(v_size, 0, fused ? L - 2 : L - 1, p);
        if ((s = sd_alloc(st, 3 * npos, 4, &pos[p])) != PM_STATUS_OK ||
            (s = sd_alloc(st, nvs, 4, &vstart[p])) != PM_STATUS_OK)
            return s;
    }
    if (o->report) {
        for (int l = 0; l <= L; l++) {
            o->report->stream[l] = F[l];
            o->report->split_edges[l] = l < L ? E[l] : 0;
            o->report->finished[l] = l < L ? 0 : F[L];
        }
        o->report->levels = L;
    }
    /* the output, written in place when the host can read context memory
     * or the caller wants it there */
    sd_out d;
    memset(&d, 0, sizeof d);
    if ((s = sd_out_prepare(st, o, V[L], F[L], &d, out)) != PM_STATUS_OK) return s;
    const pmi_mesh_dest dest = d.dest;
    const int out_direct = d.direct;
    uint32_t *tri_out = d.all;
    float *pos_out = dest.positions, *nrm_out = dest.normals;
    if (!out_direct &&
        ((s = sd_alloc(st, 3 * V[L], 4, &pos_out)) != PM_STATUS_OK ||
         (dest.normals && (s = sd_alloc(st, 3 * V[L], 4, &nrm_out)) != PM_STATUS_OK)))
        return s;
    /* the levels */
    for (int l = 0; l < L; l++) {
        const int last = l == L - 1, p = l & 1, q = p ^ 1;
        const int stored = l + 1 <= top; /* the next stream's topology */
        a.n = (uint32_t)F[l];
        a.nv = (uint32_t)V[l];
        a.tri = l == 0 ? tri0 : (l <= top ? tri[p] : NULL);
        a.pos = l == 0 ? pos0 : pos[p];
        a.twin = l <= top ? twin[p] : NULL;
        a.owner = l <= top ? owner[p] : NULL;
        a.vstart = vstart[p];
        a.vstart_lists = l == 0;
        a.tri_next = last ? tri_out : (stored ? tri[q] : NULL);
        a.out_tri = tri_out;
        a.pos_new = last ? pos_out : pos[q];
        a.twin_next = stored && !last ? twin[q] : NULL;
        a.owner_next = stored && !last ? owner[q] : NULL;
        /* the next level's start corners: none for RED_LAST2's (it walks no fan) */
        a.vstart_new = last || (fused && l == L - 2) ? NULL : vstart[q];
        /* the even rule: vertices the previous level created from its
         * stream (still in the buffers of parity q until this level's
         * RED_UNIFORM), the older ones by walks. On the level before
         * RED_LAST2's both also put the positions two levels on into the
         * output (pos_out2), which no step touches in between, so
         * RED_LAST2's level moves only the vertices its level before
         * created (from the positions it reads anyway) */
        if (l > 0) {
            a.ptri = l == 1 ? tri0 : tri[q];
            a.ptwin = twin[q];
            a.powner = owner[q];
            a.pnv = (uint32_t)V[l - 1];
        }
        if (fused && last && l >= 2) { /* the stream three levels before the output */
            a.pptwin = twin[p];
            a.ppowner = owner[p];
            a.ppnv = (uint32_t)V[l - 2];
        }
        a.pos_out2 = fused && l == L - 2 ? pos_out : NULL;
        const uint64_t walked = l > 0 ? V[l - 1] : a.nv;
        if (!(fused && last) &&
            ((s = sd_step(st, PMI_LOOP_EVEN_UNIFORM, walked, &a)) != PM_STATUS_OK ||
             (l > 0 && (s = sd_step(st, PMI_LOOP_EVEN_NEW, 3 * F[l - 1], &a)) != PM_STATUS_OK)))
            return s;
        if (fused && last)
            s = sd_step(st, PMI_LOOP_RED_LAST2, F[l - 1], &a);
        else
            s = sd_step(st, PMI_LOOP_RED_UNIFORM, a.n, &a);
        if (s != PM_STATUS_OK) return s;
    }
    /* normals over the output, from the output, the input's corner lists,
     * the stream two levels before the output (a still describes it:
     * ptri, ptwin, and from four levels pvstart) and the one three levels
     * before it (pptwin, ppowner); with one level, from the input (tri,
     * twin, owner) */
    if (dest.normals) {
        uint64_t mul = 1;
        for (int l = 0; l < L; l++)
            mul *= 4;
        a.npos = pos_out;
        a.ntri = tri_out;
        a.nout = nrm_out;
        a.nv0 = (uint32_t)nv0;
        a.tmul = mul;
        a.tadd = (mul - 1) / 3;
        a.nmul = 1;
        a.nadd = 0;
        /* First the vertices the last two levels created, by the triangles
         * of the stream two levels up (NORMAL_PATCH, which also stores its
         * patches' corner triangles' normals for the steps after it; one
         * level: NORMAL_NEW by the input's edges, after NORMAL_OLD). Then
         * the vertices of the stream three levels up (NORMAL_OLD: the
         * input's by their corner lists, those of later levels by their
         * fans in the stream two levels up). Then, from three levels, those
         * the level before created, by the edges of the stream three
         * levels up (NORMAL_NEW; a still describes that stream: pptwin,
         * ppowner, ppnv). */
        const uint64_t old = V[L >= 3 ? L - 3 : 0];
        a.pvstart = L >= 4 ? vstart[L & 1] : NULL;
        if (L >= 2 && ((s = sd_alloc(st, 9 * F[L - 2], sizeof(double), &a.cnorm)) != PM_STATUS_OK ||
                       (s = sd_step(st, PMI_LOOP_NORMAL_PATCH, F[L - 2], &a)) != PM_STATUS_OK))
            return s;
        if ((s = sd_step(st, PMI_LOOP_NORMAL_OLD, old, &a)) != PM_STATUS_OK ||
            (L == 1 &&
             (s = sd_step(st, PMI_LOOP_NORMAL_NEW, 3 * (uint64_t)a.n, &a)) != PM_STATUS_OK))
            return s;
        if (L >= 3) {
            pmi_loop_args b = a;
            b.twin = (uint32_t *)a.pptwin;
            b.owner = (uint32_t *)a.ppowner;
            b.nv = a.ppnv;
            b.nmul = 16;
            b.nadd = 5;
            if ((s = sd_step(st, PMI_LOOP_NORMAL_NEW, 3 * F[L - 3], &b)) != PM_STATUS_OK) return s;
        }
    }
    if ((s = sd_check(st, err, tri0)) != PM_STATUS_OK) return s;
    if (out_direct) return PM_STATUS_OK;
    const size_t vb = (size_t)V[L] * 3 * sizeof(float);
    if ((s = ctx->backend->download(ctx, dest.positions, pos_out, vb)) != PM_STATUS_OK ||
        (dest.normals &&
         (s = ctx->backend->download(ctx, dest.normals, nrm_out, vb)) != PM_STATUS_OK))
        return s;
    return ctx->backend->download(ctx, dest.indices, tri_out, (size_t)F[L] * 3 * 4);
}

static pm_status sd_run(sd_state *st, const pm_mesh *mesh, int levels,
                        const pm_subdivide_options *o, pm_mesh *out)
{
    pmi_loop_args a;
    memset(&a, 0, sizeof a);
    const int in_ctx = mesh->in_context_memory != 0;
    const uint64_t nv = mesh->num_vertices, nt = mesh->num_triangles;
    a.n = (uint32_t)nt;
    a.nv = (uint32_t)nv;
    a.adaptive =
        o->max_edge > 0.0 || o->max_angle_deg > 0.0 || o->max_deviation > 0.0 || o->vertex_weights;
    a.max_edge2 = o->max_edge * o->max_edge;
    a.max_angle = o->max_angle_deg * (3.141592653589793 / 180.0);
    a.max_dev = o->max_deviation;
    unsigned long long *err = NULL;
    const unsigned long long none = PMI_LOOP_ERR_NONE;
    float *pos = NULL;
    pm_status s;
    if ((s = sd_input_level(st, mesh, &a.tri, &pos)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 3 * nt, 4, &a.twin)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 3 * nt, 1, &a.split)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 3 * nt, 4, &a.owner)) != PM_STATUS_OK ||
        (s = sd_alloc(st, nt, 4, &a.emit)) != PM_STATUS_OK ||
        (s = sd_alloc(st, nt, 4, &a.red)) != PM_STATUS_OK ||
        (s = sd_alloc(st, nv, 4, &a.vstart)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 1, sizeof none, &err)) != PM_STATUS_OK ||
        (s = sd_alloc(st, 2, 4, &a.changed)) != PM_STATUS_OK ||
        (s = st->ctx->backend->upload(st->ctx, err, &none, sizeof none)) != PM_STATUS_OK)
        return s;
    a.pos = pos;
    a.error = err;
    if (o->vertex_weights &&
        (s = sd_input(st, o->vertex_weights, in_ctx, nv, &a.weight)) != PM_STATUS_OK)
        return s;
    if (a.adaptive && o->max_angle_deg > 0.0 &&
        (s = sd_alloc(st, 3 * nv, 4, &a.nrm)) != PM_STATUS_OK)
        return s;
    if ((s = sd_topology(st, &a, err)) != PM_STATUS_OK) return s;

    uint32_t *chunks[PM_SUBDIVIDE_MAX_LEVELS + 1];
    uint64_t counts[PM_SUBDIVIDE_MAX_LEVELS + 1];
    int nchunks = 0;
    sd_out d;
    memset(&d, 0, sizeof d);
    for (int level = 0; level <= levels && a.n > 0; level++) {
        /* per-level scratch sized for this stream */
        if (level > 0) {
            sd_release(st, a.split);
            sd_release(st, a.owner);
            sd_release(st, a.emit);
            sd_release(st, a.red);
            a.split = NULL;
            a.owner = a.emit = a.red = NULL;
            if ((s = sd_alloc(st, 3 * (uint64_t)a.n, 1, &a.split)) != PM_STATUS_OK ||
                (s = sd_alloc(st, 3 * (uint64_t)a.n, 4, &a.owner)) != PM_STATUS_OK ||
                (s = sd_alloc(st, a.n, 4, &a.emit)) != PM_STATUS_OK ||
                (s = sd_alloc(st, a.n, 4, &a.red)) != PM_STATUS_OK)
                return s;
        }
        s = sd_level(st, &a, level, level == levels, level + 1 == levels, &chunks[nchunks],
                     &counts[nchunks], o, &d, out);
        if (s != PM_STATUS_OK) return s;
        d.at += counts[nchunks++];
        if (level + 1 == levels && a.n > 0) {
            /* the last stream, already in the output (sd_level), all
             * finished */
            chunks[nchunks] = NULL;
            counts[nchunks++] = a.n;
            d.at += a.n;
            if (o->report) o->report->stream[levels] = o->report->finished[levels] = a.n;
            break;
        }
    }
    /* the levels' errors (a fan walk that failed) once, at the end: the
     * input's were checked before the first level */
    if ((s = sd_check(st, err, a.tri)) != PM_STATUS_OK) return s;
    return sd_output(st, &a, o, chunks, counts, nchunks, &d, out);
}

pm_status pm_subdivide_loop(pm_context *ctx, const pm_mesh *mesh, int levels,
                            const pm_subdivide_options *options, pm_mesh *out)
{
    pmi_clear_error();
    if (!ctx || !mesh || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": NULL context, mesh or output");
    memset(out, 0, sizeof *out);
    pm_subdivide_options o;
    pm_status s = sd_options(options, &o, levels);
    if (s != PM_STATUS_OK) return s;
    if (mesh->num_triangles && !mesh->indices)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         FN ": the mesh is a soup (no indices); an indexed mesh is needed");
    if (mesh->num_vertices && !mesh->positions)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, FN ": positions are NULL");
    if (mesh->num_vertices > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": %zu vertices do not fit 32-bit indices",
                         mesh->num_vertices);
    if (mesh->num_triangles > PMI_LOOP_MAX_TRIANGLES)
        return pmi_error(PM_STATUS_OVERFLOW, FN ": %zu triangles, at most %u", mesh->num_triangles,
                         PMI_LOOP_MAX_TRIANGLES);
    if (!ctx->backend->subdivide_step)
        return pmi_error(PM_STATUS_UNSUPPORTED, FN ": not supported on the %s backend",
                         ctx->backend->name);
    if (o.report) memset(o.report, 0, sizeof *o.report);
    sd_state st;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    if ((s = pmi_hooks(&st.hooks)) != PM_STATUS_OK) return s;
    const int adaptive =
        o.max_edge > 0.0 || o.max_angle_deg > 0.0 || o.max_deviation > 0.0 || o.vertex_weights;
    int fallback = 1;
    s = PM_STATUS_OK;
    if (!adaptive && levels > 0 && mesh->num_triangles > 0)
        s = sd_uniform(&st, mesh, levels, &o, out, &fallback);
    if (s == PM_STATUS_OK && fallback) {
        sd_release_all(&st);
        pm_mesh_free(ctx, out);
        if (o.report) memset(o.report, 0, sizeof *o.report);
        st.waits = 0;
        s = sd_run(&st, mesh, levels, &o, out);
    }
    if (s == PM_STATUS_OK && o.report) o.report->host_waits = st.waits;
    sd_release_all(&st);
    if (s != PM_STATUS_OK) pm_mesh_free(ctx, out);
    return s;
}
