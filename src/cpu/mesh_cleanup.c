/* splashsurf's marching-cubes mesh cleanup and barnacle decimation
 * (docs/splashsurf.md).
 *
 * The cleanup (Moore and Warren's mesh displacement) is data-parallel: the
 * rule and its steps are core/cleanup_rules.h, run here as OpenMP loops
 * (src/cuda/mesh_cleanup.cu runs them as kernels): clusters of vertices on
 * one lattice point collapse in rounds of non-adjacent clusters, in an
 * order that gives the sequential rule's mesh for every thread count.
 *
 * The barnacle decimation is sequential on a half-edge mesh whose
 * structure and collapse follow splashsurf_lib's HalfEdgeTriMesh (itself
 * after the PMP library's collapse test): every vertex keeps the list of
 * its outgoing half-edges in creation order, a collapse of the half-edge
 * from -> to removes `from` and the two triangles of the edge; every
 * collapse changes what the next one sees. Where splashsurf iterates hash
 * sets and maps (an order that differs from run to run) we visit
 * candidates in ascending vertex index, so the result is one mesh, the
 * same for every thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/cleanup_rules.h"
#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

#define NONE 0xFFFFFFFFu

enum { COLLAPSE_OK = 0, COLLAPSE_BOUNDARY, COLLAPSE_ONE_RING, COLLAPSE_FACELESS };

/* A vertex's outgoing half-edges: pool[off .. off + n), room for cap. */
typedef struct vlist {
    uint32_t off, n, cap;
} vlist;

typedef struct hemesh {
    size_t nv, nt, nhe;
    float *pos;    /* the mesh's positions (moved in place) */
    uint32_t *tri; /* the mesh's triangles (indices rewritten in place) */
    uint32_t *to, *face, *next, *opp;
    vlist *out;
    uint32_t *pool;
    size_t pool_len, pool_cap;
    uint8_t *dead_v, *dead_t;
    int oom;
} hemesh;

static void he_free(hemesh *h)
{
    free(h->to);
    free(h->face);
    free(h->next);
    free(h->opp);
    free(h->out);
    free(h->pool);
    free(h->dead_v);
    free(h->dead_t);
}

/* Appends half-edge e to vertex v's list, moving the list to the pool's
 * end (twice the room) when it is full. */
static void list_push(hemesh *h, uint32_t v, uint32_t e)
{
    vlist *l = &h->out[v];
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 8;
        if (h->pool_len + cap > h->pool_cap) {
            size_t nc = h->pool_cap * 2 > h->pool_len + cap ? h->pool_cap * 2 : h->pool_len + cap;
            uint32_t *p = realloc(h->pool, nc * sizeof *p);
            if (!p) {
                h->oom = 1;
                return;
            }
            h->pool = p;
            h->pool_cap = nc;
        }
        memcpy(h->pool + h->pool_len, h->pool + l->off, l->n * sizeof *h->pool);
        l->off = (uint32_t)h->pool_len;
        l->cap = cap;
        h->pool_len += cap;
    }
    h->pool[l->off + l->n++] = e;
}

static uint32_t *list_of(const hemesh *h, uint32_t v) { return h->pool + h->out[v].off; }

/* Removes the first occurrence of e from v's list, keeping the order. */
static void list_remove(hemesh *h, uint32_t v, uint32_t e)
{
    vlist *l = &h->out[v];
    uint32_t *a = h->pool + l->off;
    for (uint32_t i = 0; i < l->n; i++)
        if (a[i] == e) {
            memmove(a + i, a + i + 1, (l->n - i - 1) * sizeof *a);
            l->n--;
            return;
        }
}

/* The half-edge from -> to, or NONE. */
static uint32_t half_edge(const hemesh *h, uint32_t from, uint32_t to)
{
    const uint32_t *a = list_of(h, from);
    for (uint32_t i = 0; i < h->out[from].n; i++)
        if (h->to[a[i]] == to) return a[i];
    return NONE;
}

/* Builds the half-edge mesh of m (splashsurf's construction: per triangle
 * and edge, the existing half-edge from -> to or a new pair, inner then
 * outer). An edge used twice in the same direction or a triangle with a
 * repeated vertex is INVALID_ARGUMENT. */
static pm_status he_build(hemesh *h, pmi_hmesh *m, const char *fn)
{
    memset(h, 0, sizeof *h);
    h->nv = m->nv;
    h->nt = m->nt;
    h->pos = m->pos;
    h->tri = m->tri;
    size_t cap;
    if (!pmi_mul_size(m->nt, 6, &cap) || cap >= NONE)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu triangles are too many", fn, m->nt);
    h->to = malloc((cap ? cap : 1) * sizeof *h->to);
    h->face = malloc((cap ? cap : 1) * sizeof *h->face);
    h->next = malloc((cap ? cap : 1) * sizeof *h->next);
    h->opp = malloc((cap ? cap : 1) * sizeof *h->opp);
    h->out = calloc(m->nv ? m->nv : 1, sizeof *h->out);
    h->dead_v = calloc(m->nv ? m->nv : 1, 1);
    h->dead_t = calloc(m->nt ? m->nt : 1, 1);
    h->pool_cap = 8 * m->nv + 64;
    h->pool = malloc(h->pool_cap * sizeof *h->pool);
    if (!h->to || !h->face || !h->next || !h->opp || !h->out || !h->dead_v || !h->dead_t ||
        !h->pool) {
        he_free(h);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: no memory for the half-edges of %zu "
                         "triangles",
                         fn, m->nt);
    }
    /* Room for 6 outgoing half-edges per vertex to start with. */
    for (size_t v = 0; v < m->nv; v++) {
        h->out[v].off = (uint32_t)(6 * v);
        h->out[v].cap = 6;
    }
    h->pool_len = 6 * m->nv;
    for (size_t t = 0; t < m->nt; t++) {
        const uint32_t *tr = m->tri + 3 * t;
        uint32_t inner[3];
        if (tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2]) {
            he_free(h);
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: triangle %zu (%u %u %u) repeats a vertex", fn, t, tr[0], tr[1],
                             tr[2]);
        }
        for (int k = 0; k < 3; k++) {
            uint32_t from = tr[k], to = tr[(k + 1) % 3];
            uint32_t e = half_edge(h, from, to);
            if (e != NONE) {
                if (h->face[e] != NONE) {
                    he_free(h);
                    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                     "%s: edge (%u, %u) is used in the same direction by "
                                     "triangles %u and %zu (not a consistently oriented "
                                     "manifold)",
                                     fn, from, to, h->face[e], t);
                }
                h->face[e] = (uint32_t)t;
            } else {
                e = (uint32_t)h->nhe;
                h->to[e] = to;
                h->face[e] = (uint32_t)t;
                h->next[e] = NONE;
                h->opp[e] = e + 1;
                h->to[e + 1] = from;
                h->face[e + 1] = NONE;
                h->next[e + 1] = NONE;
                h->opp[e + 1] = e;
                h->nhe += 2;
                list_push(h, from, e);
                list_push(h, to, e + 1);
                if (h->oom) {
                    he_free(h);
                    return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
                }
            }
            inner[k] = e;
        }
        for (int k = 0; k < 3; k++)
            h->next[inner[k]] = inner[(k + 1) % 3];
    }
    return PM_STATUS_OK;
}

/* The vertex opposite to half-edge e in its face, NONE for a boundary
 * half-edge; *err = COLLAPSE_BOUNDARY when both other edges of the face
 * are on the boundary. */
static uint32_t opposite_vertex(const hemesh *h, uint32_t e, int *err)
{
    if (h->face[e] == NONE) return NONE;
    uint32_t h1 = h->next[e], h2 = h->next[h1];
    if (h->face[h->opp[h1]] == NONE && h->face[h->opp[h2]] == NONE) *err = COLLAPSE_BOUNDARY;
    return h->to[h1];
}

/* Whether collapsing half-edge e (v0 -> v1) keeps a manifold (the PMP
 * test splashsurf uses). */
static int collapse_ok(const hemesh *h, uint32_t e)
{
    const uint32_t eo = h->opp[e];
    const uint32_t v0 = h->to[eo], v1 = h->to[e];
    int err = COLLAPSE_OK;
    uint32_t vpos = opposite_vertex(h, e, &err);
    if (err) return err;
    uint32_t vneg = opposite_vertex(h, eo, &err);
    if (err) return err;
    if (vpos == NONE || vneg == NONE) return COLLAPSE_FACELESS;
    const uint32_t *a = list_of(h, v0);
    for (uint32_t i = 0; i < h->out[v0].n; i++) {
        uint32_t vv = h->to[a[i]];
        if (vv != v1 && vv != vpos && vv != vneg && half_edge(h, vv, v1) != NONE)
            return COLLAPSE_ONE_RING;
    }
    return COLLAPSE_OK;
}

/* Collapses half-edge e (from -> to): `from` and the edge's two triangles
 * go, the triangles of `from` take `to`, the half-edges around the removed
 * triangles pair up. */
static void collapse(hemesh *h, uint32_t e)
{
    const uint32_t eo = h->opp[e];
    const uint32_t vfrom = h->to[eo], vto = h->to[e];
    const uint32_t en = h->next[e], enn = h->next[en];
    const uint32_t eon = h->next[eo], eonn = h->next[eon];
    const uint32_t vpos = h->to[en], vneg = h->to[eon];
    if (h->face[e] != NONE) h->dead_t[h->face[e]] = 1;
    if (h->face[eo] != NONE) h->dead_t[h->face[eo]] = 1;
    h->dead_v[vfrom] = 1;
    if (vpos == vneg) { /* two opposite faces on the same three vertices */
        h->dead_v[vto] = 1;
        h->dead_v[vpos] = 1;
        h->out[vfrom].n = h->out[vto].n = h->out[vpos].n = 0;
        return;
    }
    /* The triangles around `from` now use `to`. */
    {
        const uint32_t *a = list_of(h, vfrom);
        for (uint32_t i = 0; i < h->out[vfrom].n; i++) {
            uint32_t f = h->face[a[i]];
            if (f == NONE) continue;
            for (int k = 0; k < 3; k++)
                if (h->tri[3 * (size_t)f + k] == vfrom) h->tri[3 * (size_t)f + k] = vto;
        }
    }
    /* The outer half-edges of the removed triangles become opposites. */
    {
        uint32_t a = h->opp[en], b = h->opp[enn];
        h->opp[a] = b;
        h->opp[b] = a;
        a = h->opp[eon];
        b = h->opp[eonn];
        h->opp[a] = b;
        h->opp[b] = a;
    }
    /* `to` loses en and eo and takes the half-edges of `from` but e and eon. */
    list_remove(h, vto, en);
    list_remove(h, vto, eo);
    {
        uint32_t n = h->out[vfrom].n;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t x = list_of(h, vfrom)[i]; /* re-read: a push may move lists */
            if (x != e && x != eon) list_push(h, vto, x);
        }
    }
    {
        const uint32_t *a = list_of(h, vto);
        for (uint32_t i = 0; i < h->out[vto].n; i++) {
            uint32_t o = h->opp[a[i]];
            if (h->to[o] == vfrom) h->to[o] = vto;
        }
    }
    h->out[vfrom].n = 0;
    list_remove(h, vpos, enn);
    list_remove(h, vneg, eonn);
}

static int try_collapse(hemesh *h, uint32_t e)
{
    int r = collapse_ok(h, e);
    if (r == COLLAPSE_OK) collapse(h, e);
    return r;
}

/* Back to an indexed mesh: live triangles in order; unless keep_vertices,
 * live vertices in order (the removed ones dropped). */
static pm_status he_finish(hemesh *h, pmi_hmesh *m, int keep_vertices, const char *fn)
{
    uint8_t *keep = malloc(h->nt ? h->nt : 1);
    if (!keep) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (size_t t = 0; t < h->nt; t++)
        keep[t] = !h->dead_t[t];
    pm_status s = PM_STATUS_OK;
    if (keep_vertices) {
        s = pmi_cpu_keep_triangles(1, m, keep, 1, NULL);
    } else {
        /* Drop the removed vertices (not other unused ones, as splashsurf):
         * renumber the live ones first, then compact the triangles. */
        uint32_t *map = malloc((h->nv ? h->nv : 1) * sizeof *map);
        if (!map) {
            free(keep);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        size_t nv = 0;
        for (size_t v = 0; v < h->nv; v++)
            map[v] = h->dead_v[v] ? NONE : (uint32_t)nv++;
        size_t nt = 0;
        for (size_t t = 0; t < h->nt; t++) {
            if (!keep[t]) continue;
            for (int k = 0; k < 3; k++)
                m->tri[3 * nt + k] = map[m->tri[3 * t + k]];
            nt++;
        }
        for (size_t v = 0; v < h->nv; v++)
            if (map[v] != NONE) {
                memmove(m->pos + 3 * (size_t)map[v], m->pos + 3 * v, 3 * sizeof *m->pos);
                if (m->nrm)
                    memmove(m->nrm + 3 * (size_t)map[v], m->nrm + 3 * v, 3 * sizeof *m->nrm);
            }
        m->nv = nv;
        m->nt = nt;
        free(map);
    }
    free(keep);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Marching-cubes cleanup (the rule and its steps: core/cleanup_rules.h)     */
/* ------------------------------------------------------------------------ */

/* The first invalid triangle as splashsurf's half-edge construction
 * reports it: key from pmi_clean_check, c its three vertices. */
pm_status pmi_clean_invalid(const uint32_t c[3], unsigned long long key, const char *fn)
{
    const size_t t = (size_t)(key >> 34);
    const unsigned code = (unsigned)(key >> 32) & 3u;
    const uint32_t s = (uint32_t)key;
    if (code == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: triangle %zu (%u %u %u) repeats a vertex",
                         fn, t, c[0], c[1], c[2]);
    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                     "%s: edge (%u, %u) is used in the same direction by triangles %u and %zu (not "
                     "a consistently oriented manifold)",
                     fn, c[code - 1], c[code % 3], s, t);
}

/* The arrays of one run (freed together). */
typedef struct clean_bufs {
    void *p[24];
    int n;
} clean_bufs;

static void *cb_alloc(clean_bufs *b, size_t count, size_t elem)
{
    size_t bytes;
    if (!pmi_mul_size(count ? count : 1, elem, &bytes)) return NULL;
    void *p = pmi_alloc_huge(bytes);
    if (p) b->p[b->n++] = p;
    return p;
}

static void cb_free(clean_bufs *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->p[i]);
    b->n = 0;
}

/* Exclusive scan of n flags into off; returns the total. */
static size_t scan_flags(const uint32_t *flag, size_t n, uint32_t *off)
{
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = (uint32_t)run;
        run += flag[i];
    }
    return run;
}

pm_status pmi_cpu_mc_cleanup(int threads, pmi_hmesh *m, const pm_mc_cleanup_options *o)
{
    const char *fn = "pm_mesh_mc_cleanup";
    if (m->nt == 0) return PM_STATUS_OK;
    const size_t nv = m->nv, nt = m->nt;
    if (nv >= PMI_CLEAN_NONE || nt > (size_t)(UINT32_MAX / 3))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu vertices, %zu triangles: indices are 32-bit",
                         fn, nv, nt);
    pmi_clean_args a;
    const int max_iter = pmi_clean_args_init(&a, nv, nt, m->pos, m->nrm, o);
    unsigned long long err = ~0ull, counter[2] = {0, 0};
    a.error = &err;
    a.counter = counter;

    clean_bufs b;
    memset(&b, 0, sizeof b);
    const size_t nmax = nv > nt ? nv : nt;
    a.tri = cb_alloc(&b, 3 * nt, 4);
    a.g = cb_alloc(&b, 3 * nv, 8);
    a.label = cb_alloc(&b, nv, 4);
    a.rep = cb_alloc(&b, nv, 4);
    a.cnt = cb_alloc(&b, nv + 1, 4);
    a.cursor = cb_alloc(&b, nv, 4);
    a.moff = cb_alloc(&b, nv + 1, 4);
    a.mlist = cb_alloc(&b, nv, 4);
    a.cl = cb_alloc(&b, nv, 4);
    a.pend = cb_alloc(&b, nv, 1);
    a.go = cb_alloc(&b, nv, 1);
    a.flag = cb_alloc(&b, nmax, 4);
    a.off = cb_alloc(&b, nmax, 4);
    a.vmap = cb_alloc(&b, nv, 4);
    uint32_t *todo = cb_alloc(&b, nv, 4);
    if (!a.tri || !a.g || !a.label || !a.rep || !a.cnt || !a.cursor || !a.moff || !a.mlist ||
        !a.cl || !a.pend || !a.go || !a.flag || !a.off || !a.vmap || !todo) {
        cb_free(&b);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for the cleanup of %zu triangles",
                         fn, nt);
    }
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, nt, nv, &vt);
    if (s != PM_STATUS_OK) {
        cb_free(&b);
        return s;
    }
    a.vt_off = vt.off;
    a.vt_list = vt.list;
    memcpy(a.tri, m->tri, 3 * nt * sizeof *a.tri);
    memset(a.pend, 0, nv);
    const long long snt = (long long)nt, snv = (long long)nv;

    /* Lattice points; the input checked (an oriented manifold's
     * triangles: splashsurf's half-edge construction refuses the rest) and
     * the clusters joined in one pass over the rows; roots; members. */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_vertex(&a, (size_t)v);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++) {
        pmi_clean_check(&a, (size_t)v);
        pmi_clean_union(&a, (size_t)v);
    }
    if (err != ~0ull) {
        s = pmi_clean_invalid(m->tri + 3 * (size_t)(err >> 34), err, fn);
        pmi_adj_free(&vt);
        cb_free(&b);
        return s;
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_root(&a, (size_t)v);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_root_set(&a, (size_t)v);
    memset(a.cnt, 0, (nv + 1) * sizeof *a.cnt);
    memset(a.cursor, 0, nv * sizeof *a.cursor);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_member_count(&a, (size_t)v);
    scan_flags(a.cnt, nv + 1, a.moff);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_member_fill(&a, (size_t)v);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++) {
        pmi_clean_member_sort(&a, (size_t)v);
        pmi_clean_cluster_flag(&a, (size_t)v);
    }
    const size_t ncl = scan_flags(a.flag, nv, a.off);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_cluster_list(&a, (size_t)v);

    /* Sweeps of rounds (see core/cleanup_rules.h). */
    const long long sncl = (long long)ncl;
    a.nb = cb_alloc(&b, 16 * ncl, 4);
    if (!a.nb) {
        pmi_adj_free(&vt);
        cb_free(&b);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu clusters", fn, ncl);
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long i = 0; i < sncl; i++)
        pmi_clean_neighbours(&a, (size_t)i);
    for (int it = 0; it < max_iter; it++) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long long i = 0; i < sncl; i++)
            pmi_clean_sweep(&a, (size_t)i);
        size_t n = 0;
        for (size_t i = 0; i < ncl; i++)
            if (a.pend[a.cl[i]]) todo[n++] = (uint32_t)i;
        if (n == 0) break;
        counter[0] = 0;
        while (n > 0) {
            const long long sn = (long long)n;
#pragma omp parallel for num_threads(threads) schedule(static)
            for (long long j = 0; j < sn; j++)
                pmi_clean_select(&a, todo[j]);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 256)
            for (long long j = 0; j < sn; j++)
                pmi_clean_process(&a, todo[j]);
            size_t u = 0;
            for (size_t j = 0; j < n; j++)
                if (a.pend[a.cl[todo[j]]]) todo[u++] = todo[j];
            n = u;
        }
        if (counter[0] == 0) break;
    }

    /* The result: live triangles in order, kept vertices in order. */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_vert_flag(&a, (size_t)v);
    const size_t nv2 = scan_flags(a.flag, nv, a.vmap);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long t = 0; t < snt; t++)
        pmi_clean_tri_flag(&a, (size_t)t);
    const size_t nt2 = scan_flags(a.flag, nt, a.off);
    a.pos_out = pmi_alloc_huge((nv2 ? nv2 : 1) * 3 * sizeof *a.pos_out);
    a.tri_out = pmi_alloc_huge((nt2 ? nt2 : 1) * 3 * sizeof *a.tri_out);
    a.nrm_out = m->nrm ? pmi_alloc_huge((nv2 ? nv2 : 1) * 3 * sizeof *a.nrm_out) : NULL;
    if (!a.pos_out || !a.tri_out || (m->nrm && !a.nrm_out)) {
        free(a.pos_out);
        free(a.tri_out);
        free(a.nrm_out);
        pmi_adj_free(&vt);
        cb_free(&b);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for the result", fn);
    }
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_clean_vert_out(&a, (size_t)v);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long t = 0; t < snt; t++)
        pmi_clean_tri_out(&a, (size_t)t);
    pmi_adj_free(&vt);
    cb_free(&b);
    free(m->pos);
    free(m->tri);
    free(m->nrm);
    m->pos = a.pos_out;
    m->tri = a.tri_out;
    m->nrm = a.nrm_out;
    m->nv = nv2;
    m->nt = nt2;
    return PM_STATUS_OK;
}

pm_status pmi_cpu_mc_cleanup_entry(pm_context *ctx, pmi_hmesh *m, const pm_mc_cleanup_options *o)
{
    return pmi_cpu_mc_cleanup(ctx->num_threads, m, o);
}

/* ------------------------------------------------------------------------ */
/* Barnacle decimation                                                       */
/* ------------------------------------------------------------------------ */

static uint32_t valence(const hemesh *h, uint32_t v) { return h->out[v].n; }
static uint32_t ring(const hemesh *h, uint32_t v, uint32_t i) { return h->to[list_of(h, v)[i]]; }

/* A collapse from -> to (processed in the order given). */
typedef struct collapse_job {
    uint32_t from, to;
} collapse_job;

/* splashsurf's process_collapse_queue_iterative: up to 5 passes; a
 * collapse refused for the one-ring test is retried in the next pass,
 * others (missing half-edge, boundary) are dropped. */
static void run_collapses(hemesh *h, collapse_job *jobs, size_t n)
{
    for (int pass = 0; pass < 5 && n > 0 && !h->oom; pass++) {
        size_t keep = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t e = half_edge(h, jobs[i].from, jobs[i].to);
            if (e == NONE) continue;
            if (try_collapse(h, e) == COLLAPSE_ONE_RING) jobs[keep++] = jobs[i];
        }
        n = keep;
    }
}

/* A map vertex -> target in which later insertions win, read out in
 * ascending vertex order. */
static size_t map_jobs(const uint32_t *target, size_t nv, collapse_job *jobs)
{
    size_t n = 0;
    for (size_t v = 0; v < nv; v++)
        if (target[v] != NONE) {
            jobs[n].from = (uint32_t)v;
            jobs[n].to = target[v];
            n++;
        }
    return n;
}

/* The lattice edge each vertex lies on (marching-cubes vertices lie on
 * lattice edges): axis and lower end, axis -1 when the vertex is not on an
 * edge (moved by a cleanup, or at a lattice point). */
typedef struct edge_info {
    int8_t *axis;
    int64_t *lo; /* 3 per vertex */
} edge_info;

static void vertex_edge(const float *p, const pm_mc_cleanup_options *o, int8_t *axis, int64_t lo[3])
{
    double u[3], r[3];
    int on = 0, off = -1;
    for (int a = 0; a < 3; a++) {
        u[a] = ((double)p[a] - o->origin[a]) / o->spacing[a];
        r[a] = floor(u[a] + 0.5);
        if (fabs(u[a] - r[a]) <= 0.01)
            on++;
        else
            off = a;
    }
    *axis = -1;
    if (on != 2 || !(fabs(u[0]) < 1e15 && fabs(u[1]) < 1e15 && fabs(u[2]) < 1e15)) return;
    for (int a = 0; a < 3; a++)
        lo[a] = (int64_t)(a == off ? floor(u[a]) : r[a]);
    *axis = (int8_t)off;
}

/* Whether every ring neighbour of t but `skip` lies on a lattice edge
 * across axis a that touches P1 or P2 (NULL): the cap of a lattice point
 * poking through the surface (one point: a single barnacle, two adjacent:
 * a double one), whatever the marching-cubes table. */
static int lattice_cap(const hemesh *h, const edge_info *E, uint32_t t, uint32_t skip,
                       const int64_t P1[3], const int64_t *P2, int a)
{
    for (uint32_t i = 0; i < h->out[t].n; i++) {
        uint32_t k = h->to[list_of(h, t)[i]];
        if (k == skip) continue;
        int b = E->axis[k];
        if (b < 0 || b == a) return 0;
        const int64_t *L = E->lo + 3 * (size_t)k;
        int touches = 0;
        for (int side = 0; side < 2 && !touches; side++) {
            const int64_t *P = side ? P2 : P1;
            if (!P) continue;
            int lo_eq = 1, hi_eq = 1;
            for (int c = 0; c < 3; c++) {
                lo_eq &= L[c] == P[c];
                hi_eq &= L[c] + (c == b) == P[c];
            }
            touches = lo_eq || hi_eq;
        }
        if (!touches) return 0;
    }
    return 1;
}

static int lattice_single(const hemesh *h, const edge_info *E, uint32_t t)
{
    const int a = E->axis[t];
    if (a < 0 || h->out[t].n != 4) return 0;
    uint32_t sum = 0;
    for (uint32_t i = 0; i < 4; i++)
        sum += h->out[h->to[list_of(h, t)[i]]].n;
    if (sum <= 16) return 0; /* an isolated blob of one lattice point, not a barnacle */
    for (int off = 0; off < 2; off++) {
        int64_t P[3];
        for (int c = 0; c < 3; c++)
            P[c] = E->lo[3 * (size_t)t + c] + (c == a ? off : 0);
        if (lattice_cap(h, E, t, NONE, P, NULL, a)) return 1;
    }
    return 0;
}

static int lattice_double(const hemesh *h, const edge_info *E, uint32_t i, uint32_t j)
{
    const int a = E->axis[i];
    if (a < 0 || E->axis[j] != a) return 0;
    const int64_t *Li = E->lo + 3 * (size_t)i, *Lj = E->lo + 3 * (size_t)j;
    int diff = 0;
    for (int c = 0; c < 3; c++) {
        int64_t d = Lj[c] - Li[c];
        if (d == 0) continue;
        if (c == a || (d != 1 && d != -1)) return 0;
        diff++;
    }
    if (diff != 1) return 0;
    for (int off = 0; off < 2; off++) {
        int64_t Pi[3], Pj[3];
        for (int c = 0; c < 3; c++) {
            Pi[c] = Li[c] + (c == a ? off : 0);
            Pj[c] = Lj[c] + (c == a ? off : 0);
        }
        if (lattice_cap(h, E, i, j, Pi, Pj, a) && lattice_cap(h, E, j, i, Pi, Pj, a)) return 1;
    }
    return 0;
}

static void single_barnacles(hemesh *h, uint32_t *target, collapse_job *jobs, uint8_t *cand,
                             int threads, const edge_info *E)
{
    const long long snv = (long long)h->nv;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++) {
        cand[v] = 0;
        if (E) {
            cand[v] = (uint8_t)lattice_single(h, E, (uint32_t)v);
            continue;
        }
        if (valence(h, (uint32_t)v) != 4) continue;
        uint32_t sum = 0;
        int ok = 1;
        for (uint32_t i = 0; i < 4; i++) {
            uint32_t l = valence(h, ring(h, (uint32_t)v, i));
            ok &= l >= 4 && l <= 6;
            sum += l;
        }
        cand[v] = ok && sum == 20;
    }
    /* Candidates next to another candidate are left out (against the
     * full candidate set). */
    for (size_t v = 0; v < h->nv; v++)
        target[v] = NONE;
    uint8_t *drop = cand; /* bit 1: dropped */
    for (size_t v = 0; v < h->nv; v++) {
        if (!(cand[v] & 1)) continue;
        for (uint32_t i = 0; i < valence(h, (uint32_t)v); i++)
            if (cand[ring(h, (uint32_t)v, i)] & 1) drop[v] |= 2;
    }
    for (size_t c = 0; c < h->nv; c++) {
        if (cand[c] != 1) continue;
        for (uint32_t i = 0; i < valence(h, (uint32_t)c); i++)
            target[ring(h, (uint32_t)c, i)] = (uint32_t)c;
    }
    run_collapses(h, jobs, map_jobs(target, h->nv, jobs));
}

typedef struct vpair {
    uint32_t a, b; /* a < b */
} vpair;

static int pair_less(vpair x, vpair y) { return x.a < y.a || (x.a == y.a && x.b < y.b); }

static int cmp_pair(const void *p, const void *q)
{
    vpair x = *(const vpair *)p, y = *(const vpair *)q;
    return pair_less(x, y) ? -1 : pair_less(y, x) ? 1 : 0;
}

static vpair sorted_pair(uint32_t i, uint32_t j)
{
    vpair p;
    p.a = i < j ? i : j;
    p.b = i < j ? j : i;
    return p;
}

static int pair_in(const vpair *set, const uint8_t *gone, size_t n, vpair p)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pair_less(set[mid], p))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && set[lo].a == p.a && set[lo].b == p.b && !gone[lo];
}

static int center_candidate(const hemesh *h, uint32_t v)
{
    if (valence(h, v) != 5) return 0;
    uint32_t l[5];
    for (uint32_t i = 0; i < 5; i++)
        l[i] = valence(h, ring(h, v, i));
    for (int i = 1; i < 5; i++) { /* sort the five valences */
        uint32_t x = l[i];
        int j = i;
        while (j > 0 && l[j - 1] > x) {
            l[j] = l[j - 1];
            j--;
        }
        l[j] = x;
    }
    return l[0] == 5 && l[1] == 5 && l[2] == 5 && l[3] == 6 && l[4] == 6;
}

static int ring_has(const hemesh *h, uint32_t v, uint32_t x)
{
    for (uint32_t i = 0; i < valence(h, v); i++)
        if (ring(h, v, i) == x) return 1;
    return 0;
}

static double dist(const hemesh *h, uint32_t a, uint32_t b)
{
    const float *p = h->pos + 3 * (size_t)a, *q = h->pos + 3 * (size_t)b;
    double d2 = 0;
    for (int k = 0; k < 3; k++)
        d2 += ((double)p[k] - (double)q[k]) * ((double)p[k] - (double)q[k]);
    return sqrt(d2);
}

static pm_status double_barnacles(hemesh *h, uint32_t *target, collapse_job *jobs, uint8_t *cand,
                                  int threads, const edge_info *E)
{
    const long long snv = (long long)h->nv;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++) {
        if (!E) {
            cand[v] = (uint8_t)center_candidate(h, (uint32_t)v);
            continue;
        }
        /* The lattice rule: tips with exactly one partner tip. */
        uint32_t partners = 0;
        if (E->axis[v] >= 0)
            for (uint32_t i = 0; i < valence(h, (uint32_t)v); i++)
                partners += (uint32_t)lattice_double(h, E, (uint32_t)v, ring(h, (uint32_t)v, i));
        cand[v] = partners == 1;
    }
    size_t np = 0;
    for (size_t v = 0; v < h->nv; v++)
        np += cand[v];
    vpair *pairs = malloc((np ? np : 1) * sizeof *pairs);
    uint8_t *gone = calloc(np ? np : 1, 1), *gone2 = calloc(np ? np : 1, 1);
    if (!pairs || !gone || !gone2) {
        free(pairs);
        free(gone);
        free(gone2);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_decimate_barnacles: out of memory");
    }
    /* Pairs of centre candidates with exactly one candidate neighbour. */
    np = 0;
    for (size_t v = 0; v < h->nv; v++) {
        if (!cand[v]) continue;
        uint32_t count = 0, other = 0;
        for (uint32_t i = 0; i < valence(h, (uint32_t)v); i++) {
            uint32_t j = ring(h, (uint32_t)v, i);
            if (cand[j]) {
                count++;
                other = j;
            }
        }
        if (E) { /* the one partner tip, itself with one partner */
            count = 0;
            for (uint32_t i = 0; i < valence(h, (uint32_t)v); i++) {
                uint32_t j = ring(h, (uint32_t)v, i);
                if (cand[j] && lattice_double(h, E, (uint32_t)v, j)) {
                    count++;
                    other = j;
                }
            }
        }
        if (count == 1) pairs[np++] = sorted_pair((uint32_t)v, other);
    }
    qsort(pairs, np, sizeof *pairs, cmp_pair);
    size_t u = 0;
    for (size_t k = 0; k < np; k++)
        if (u == 0 || cmp_pair(&pairs[u - 1], &pairs[k]) != 0) pairs[u++] = pairs[k];
    np = u;
    /* Overlapping pairs: one vertex in a smaller pair too. */
    for (size_t k = 0; k < np; k++) {
        vpair p = pairs[k];
        for (int side = 0; side < 2 && !gone2[k]; side++) {
            uint32_t i = side ? p.b : p.a, j = side ? p.a : p.b;
            for (uint32_t r = 0; r < valence(h, i); r++) {
                uint32_t x = ring(h, i, r);
                vpair q = sorted_pair(i, x);
                if (x != j && pair_less(q, p) && pair_in(pairs, gone, np, q)) {
                    gone2[k] = 1;
                    break;
                }
            }
        }
    }
    memcpy(gone, gone2, np);
    /* Pairs next to a smaller pair (a neighbour's neighbour in it). */
    uint32_t *pair_of = target; /* vertex -> pair index + 1 (0: none) */
    for (size_t v = 0; v < h->nv; v++)
        pair_of[v] = 0;
    for (size_t k = 0; k < np; k++)
        if (!gone[k]) pair_of[pairs[k].a] = pair_of[pairs[k].b] = (uint32_t)(k + 1);
    for (size_t k = 0; k < np; k++) {
        if (gone[k]) continue;
        vpair p = pairs[k];
        int adjacent = 0;
        for (int side = 0; side < 2 && !adjacent; side++) {
            uint32_t i = side ? p.b : p.a, j = side ? p.a : p.b;
            for (uint32_t r = 0; r < valence(h, i) && !adjacent; r++) {
                uint32_t x = ring(h, i, r);
                if (x == j) continue;
                for (uint32_t s2 = 0; s2 < valence(h, x) && !adjacent; s2++) {
                    uint32_t l = ring(h, x, s2);
                    if (l == i || l == j || !pair_of[l]) continue;
                    if (pair_less(pairs[pair_of[l] - 1], p)) adjacent = 1;
                }
            }
        }
        gone2[k] = (uint8_t)adjacent;
    }
    for (size_t k = 0; k < np; k++)
        gone[k] |= gone2[k];
    /* The collapses: each neighbour of the pair to the nearer centre (to
     * the own centre when it does not touch the other). */
    for (size_t v = 0; v < h->nv; v++)
        target[v] = NONE;
    for (size_t k = 0; k < np; k++) {
        if (gone[k]) continue;
        for (int side = 0; side < 2; side++) {
            uint32_t i = side ? pairs[k].b : pairs[k].a, j = side ? pairs[k].a : pairs[k].b;
            for (uint32_t r = 0; r < valence(h, i); r++) {
                uint32_t x = ring(h, i, r);
                if (x == j) continue;
                if (!ring_has(h, x, j) || dist(h, x, i) <= dist(h, x, j))
                    target[x] = i;
                else
                    target[x] = j;
            }
        }
    }
    free(pairs);
    free(gone);
    free(gone2);
    run_collapses(h, jobs, map_jobs(target, h->nv, jobs));
    return PM_STATUS_OK;
}

pm_status pmi_cpu_decimate_barnacles(int threads, pmi_hmesh *m,
                                     const pm_mc_cleanup_options *lattice, int keep_vertices)
{
    const char *fn = "pm_mesh_decimate_barnacles";
    if (m->nt == 0) return PM_STATUS_OK;
    edge_info E = {NULL, NULL};
    if (lattice) {
        E.axis = malloc(m->nv);
        E.lo = malloc(m->nv * 3 * sizeof *E.lo);
        if (!E.axis || !E.lo) {
            free(E.axis);
            free(E.lo);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        const long long snv = (long long)m->nv;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long long v = 0; v < snv; v++)
            vertex_edge(m->pos + 3 * v, lattice, &E.axis[v], E.lo + 3 * v);
    }
    hemesh h;
    pm_status s = he_build(&h, m, fn);
    const int built = s == PM_STATUS_OK;
    uint32_t *target = NULL;
    collapse_job *jobs = NULL;
    uint8_t *cand = NULL;
    if (s == PM_STATUS_OK) {
        target = malloc(m->nv * sizeof *target);
        jobs = malloc(m->nv * sizeof *jobs);
        cand = malloc(m->nv);
        if (!target || !jobs || !cand)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    if (s != PM_STATUS_OK && built) he_free(&h);
    if (s == PM_STATUS_OK) {
        single_barnacles(&h, target, jobs, cand, threads, lattice ? &E : NULL);
        s = h.oom ? pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn)
                  : double_barnacles(&h, target, jobs, cand, threads, lattice ? &E : NULL);
        if (s == PM_STATUS_OK && h.oom)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
        if (s == PM_STATUS_OK) s = he_finish(&h, m, keep_vertices, fn);
        he_free(&h);
    }
    free(target);
    free(jobs);
    free(cand);
    free(E.axis);
    free(E.lo);
    return s;
}
