/* Connected components of an indexed mesh (triangles connected through
 * shared vertices; union-find, Tarjan 1975, the smaller root winning so the
 * roots do not depend on the order of the unions) and the removal of small
 * ones, plus the triangle filter every removing step shares. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/post_cpu.h"

pm_status pmi_cpu_keep_triangles(int threads, pmi_hmesh *m, const uint8_t *keep, int keep_vertices,
                                 uint32_t *vertex_map)
{
    uint32_t *map = NULL;
    if (!keep_vertices) {
        map = calloc(m->nv ? m->nv : 1, sizeof *map);
        if (!map) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "mesh post-processing: out of memory");
    }
    size_t nt = 0;
    for (size_t t = 0; t < m->nt; t++) {
        if (!keep[t]) continue;
        if (nt != t) memmove(m->tri + 3 * nt, m->tri + 3 * t, 3 * sizeof *m->tri);
        nt++;
    }
    m->nt = nt;
    if (keep_vertices) {
        if (vertex_map)
            for (size_t v = 0; v < m->nv; v++)
                vertex_map[v] = (uint32_t)v;
        return PM_STATUS_OK;
    }
    for (size_t c = 0; c < 3 * nt; c++)
        map[m->tri[c]] = 1;
    size_t nv = 0;
    for (size_t v = 0; v < m->nv; v++) {
        if (!map[v]) {
            if (vertex_map) vertex_map[v] = UINT32_MAX;
            continue;
        }
        if (vertex_map) vertex_map[v] = (uint32_t)nv;
        map[v] = (uint32_t)nv;
        if (nv != v) {
            memmove(m->pos + 3 * nv, m->pos + 3 * v, 3 * sizeof *m->pos);
            if (m->nrm) memmove(m->nrm + 3 * nv, m->nrm + 3 * v, 3 * sizeof *m->nrm);
        }
        nv++;
    }
    const long long sc = (long long)(3 * nt);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long c = 0; c < sc; c++)
        m->tri[c] = map[m->tri[c]];
    m->nv = nv;
    free(map);
    return PM_STATUS_OK;
}

static uint32_t find(uint32_t *p, uint32_t x)
{
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

static void unite(uint32_t *p, uint32_t a, uint32_t b)
{
    a = find(p, a);
    b = find(p, b);
    if (a < b)
        p[b] = a;
    else if (b < a)
        p[a] = b;
}

pm_status pmi_cpu_remove_components(int threads, pmi_hmesh *m, size_t min_triangles,
                                    int keep_largest, size_t *removed)
{
    if (removed) *removed = 0;
    if (m->nt == 0) return PM_STATUS_OK;
    uint32_t *parent = malloc(m->nv * sizeof *parent);
    uint32_t *tris = calloc(m->nv, sizeof *tris);
    uint32_t *first = malloc(m->nv * sizeof *first);
    uint8_t *keep = malloc(m->nt);
    if (!parent || !tris || !first || !keep) {
        free(parent);
        free(tris);
        free(first);
        free(keep);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_remove_components: out of memory");
    }
    for (size_t v = 0; v < m->nv; v++) {
        parent[v] = (uint32_t)v;
        first[v] = UINT32_MAX;
    }
    for (size_t t = 0; t < m->nt; t++) {
        const uint32_t *tr = m->tri + 3 * t;
        unite(parent, tr[0], tr[1]);
        unite(parent, tr[0], tr[2]);
    }
    for (size_t t = 0; t < m->nt; t++) {
        uint32_t r = find(parent, m->tri[3 * t]);
        tris[r]++;
        if (first[r] == UINT32_MAX) first[r] = (uint32_t)t;
    }
    /* The largest component: most triangles, then the earliest. */
    uint32_t best = UINT32_MAX;
    for (size_t v = 0; v < m->nv; v++) {
        if (!tris[v]) continue;
        if (best == UINT32_MAX || tris[v] > tris[best] ||
            (tris[v] == tris[best] && first[v] < first[best]))
            best = (uint32_t)v;
    }
    size_t gone = 0;
    for (size_t v = 0; v < m->nv; v++) {
        if (!tris[v]) continue;
        int drop = tris[v] < min_triangles || (keep_largest && v != best);
        if (drop) {
            gone++;
            tris[v] = 0; /* 0 triangles kept */
        }
    }
    for (size_t t = 0; t < m->nt; t++)
        keep[t] = tris[find(parent, m->tri[3 * t])] != 0;
    free(parent);
    free(tris);
    free(first);
    pm_status s = PM_STATUS_OK;
    if (gone) s = pmi_cpu_keep_triangles(threads, m, keep, 0, NULL);
    free(keep);
    if (s == PM_STATUS_OK && removed) *removed = gone;
    return s;
}

/* Fans of one vertex: its triangles joined where they share an edge (v, x)
 * that exactly two of them use, in opposite directions. Writes each
 * triangle's fan number (0 = the fan of the lowest triangle) to
 * corner_fan at the triangle's corner that is v; returns the fan count. */
static uint32_t vertex_fans(const uint32_t *tri, const pmi_adj *vt, uint32_t v, uint32_t *p,
                            uint32_t *corner_fan)
{
    const uint32_t b = vt->off[v], deg = vt->off[v + 1] - b;
    for (uint32_t i = 0; i < deg; i++)
        p[i] = i;
    for (uint32_t i = 0; i < deg; i++) {
        const uint32_t *ti = tri + 3 * (size_t)vt->list[b + i];
        for (int e = 0; e < 3; e++) {
            if (ti[e] != v) continue;
            /* the two edges of ti at v: (v, next) forward, (prev, v) backward */
            const uint32_t nx = ti[(e + 1) % 3], pv = ti[(e + 2) % 3];
            for (int side = 0; side < 2; side++) {
                const uint32_t x = side ? pv : nx;
                uint32_t users = 0, other = 0, opposite = 0;
                for (uint32_t j = 0; j < deg; j++) {
                    const uint32_t *tj = tri + 3 * (size_t)vt->list[b + j];
                    for (int f = 0; f < 3; f++)
                        if (tj[f] == v) {
                            const uint32_t jn = tj[(f + 1) % 3], jp = tj[(f + 2) % 3];
                            if (jn == x || jp == x) {
                                users++;
                                if (j != i) other = j;
                                /* ti has v->x when !side; tj must have x->v */
                                if (j != i) opposite = side ? jn == x : jp == x;
                            }
                        }
                }
                if (users == 2 && opposite) {
                    uint32_t ri = i, rj = other;
                    while (p[ri] != ri)
                        ri = p[ri];
                    while (p[rj] != rj)
                        rj = p[rj];
                    if (ri != rj) p[ri > rj ? ri : rj] = ri < rj ? ri : rj;
                }
            }
        }
    }
    /* Number the fans in order of their first triangle. */
    uint32_t fans = 0;
    for (uint32_t i = 0; i < deg; i++)
        if (p[i] == i) p[i] = (fans++) | 0x80000000u; /* root: its fan number, flagged */
    for (uint32_t i = 0; i < deg; i++) {
        uint32_t r = i;
        while (!(p[r] & 0x80000000u))
            r = p[r];
        const uint32_t t = vt->list[b + i];
        for (int e = 0; e < 3; e++)
            if (tri[3 * (size_t)t + e] == v) corner_fan[3 * (size_t)t + e] = p[r] & 0x7FFFFFFFu;
    }
    return fans;
}

pm_status pmi_cpu_split_fans(int threads, pmi_hmesh *m, size_t drop_below, size_t *split)
{
    if (split) *split = 0;
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, m->nt, m->nv, &vt);
    if (s != PM_STATUS_OK) return s;
    uint32_t *corner_fan = malloc((3 * m->nt + 1) * sizeof *corner_fan);
    uint32_t *base = malloc((m->nv + 1) * sizeof *base);
    int failed = 0;
    if (!corner_fan || !base) failed = 1;
    const long long snv = (long long)m->nv;
    if (!failed) {
#pragma omp parallel num_threads(threads)
        {
            uint32_t stack[256], *heap = NULL;
            size_t cap = 0;
#pragma omp for schedule(dynamic, 4096)
            for (long long v = 0; v < snv; v++) {
                size_t deg = vt.off[v + 1] - vt.off[v];
                uint32_t *p = stack;
                if (deg > 256) {
                    if (deg > cap) {
                        free(heap);
                        heap = malloc(deg * sizeof *heap);
                        cap = heap ? deg : 0;
                    }
                    if (!heap) {
#pragma omp atomic write
                        failed = 1;
                        continue;
                    }
                    p = heap;
                }
                uint32_t fans = vertex_fans(m->tri, &vt, (uint32_t)v, p, corner_fan);
                base[v] = fans > 1 ? fans - 1 : 0; /* extra vertices */
            }
            free(heap);
        }
    }
    size_t extra = 0;
    if (!failed)
        for (size_t v = 0; v < m->nv; v++) {
            uint32_t k = base[v];
            base[v] = (uint32_t)(m->nv + extra);
            extra += k;
        }
    if (!failed && extra && m->nv + extra >= UINT32_MAX) failed = 2;
    float *pos = NULL, *nrm = NULL;
    if (!failed && extra) {
        pos = realloc(m->pos, (m->nv + extra) * 3 * sizeof *pos);
        if (pos) m->pos = pos;
        if (pos && m->nrm) {
            nrm = realloc(m->nrm, (m->nv + extra) * 3 * sizeof *nrm);
            if (nrm) m->nrm = nrm;
        }
        if (!pos || (m->nrm && !nrm)) failed = 1;
    }
    if (!failed && extra) {
        /* new vertices: copies of their originals, in vertex then fan order */
        for (size_t v = 0; v < m->nv; v++) {
            size_t k = (v + 1 < m->nv ? base[v + 1] : m->nv + extra) - base[v];
            for (size_t f = 0; f < k; f++) {
                memcpy(m->pos + 3 * ((size_t)base[v] + f), m->pos + 3 * v, 3 * sizeof *m->pos);
                if (m->nrm)
                    memcpy(m->nrm + 3 * ((size_t)base[v] + f), m->nrm + 3 * v, 3 * sizeof *m->nrm);
            }
        }
        const long long sc = (long long)(3 * m->nt);
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long long c = 0; c < sc; c++)
            if (corner_fan[c]) m->tri[c] = base[m->tri[c]] + corner_fan[c] - 1;
        m->nv += extra;
    }
    /* The pieces split off at a pinch that are smaller than drop_below
     * triangles (a pinch between two sheets leaves zero-volume slivers of
     * two or four triangles): removed. */
    uint8_t *pinched = NULL, *keep = NULL;
    uint32_t *parent = NULL, *tris = NULL;
    if (!failed && extra && drop_below) {
        const size_t nv0 = m->nv - extra;
        pinched = calloc(m->nv, 1);
        parent = malloc(m->nv * sizeof *parent);
        tris = calloc(m->nv, sizeof *tris);
        keep = malloc(m->nt ? m->nt : 1);
        if (!pinched || !parent || !tris || !keep) failed = 1;
        if (!failed) {
            for (size_t v = 0; v < nv0; v++) {
                size_t k = (v + 1 < nv0 ? base[v + 1] : m->nv) - base[v];
                if (!k) continue;
                pinched[v] = 1;
                memset(pinched + base[v], 1, k);
            }
            for (size_t v = 0; v < m->nv; v++)
                parent[v] = (uint32_t)v;
            for (size_t t = 0; t < m->nt; t++) {
                unite(parent, m->tri[3 * t], m->tri[3 * t + 1]);
                unite(parent, m->tri[3 * t], m->tri[3 * t + 2]);
            }
            for (size_t t = 0; t < m->nt; t++)
                tris[find(parent, m->tri[3 * t])]++;
            /* a component's root is flagged when one of its vertices was split */
            for (size_t v = 0; v < m->nv; v++)
                if (pinched[v]) pinched[find(parent, (uint32_t)v)] |= 2;
            size_t drop = 0;
            for (size_t t = 0; t < m->nt; t++) {
                uint32_t r = find(parent, m->tri[3 * t]);
                keep[t] = !((pinched[r] & 2) && tris[r] < drop_below);
                drop += !keep[t];
            }
            if (drop) {
                pm_status ks = pmi_cpu_keep_triangles(threads, m, keep, 0, NULL);
                if (ks != PM_STATUS_OK) failed = 1;
            }
        }
    }
    free(pinched);
    free(parent);
    free(tris);
    free(keep);
    free(corner_fan);
    free(base);
    pmi_adj_free(&vt);
    if (failed == 2) return pmi_error(PM_STATUS_OVERFLOW, "splitting fans: too many vertices");
    if (failed) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "splitting fans: out of memory");
    if (split) *split = extra;
    return PM_STATUS_OK;
}
