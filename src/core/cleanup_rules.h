/* The marching-cubes cleanup (splashsurf's --mesh-cleanup, after Moore and
 * Warren 1991; docs/splashsurf.md "Marching-cubes cleanup"): the rule and
 * its data-parallel steps, compiled by gcc (src/cpu/mesh_cleanup.c, OpenMP
 * loops) and nvcc (src/cuda/mesh_cleanup.cu, one thread per element), so
 * both backends compute the same bytes.
 *
 * The rule. Each vertex within the snap distance of its nearest lattice
 * point (pmi_post_nearest_point) takes part; a cluster is a connected set
 * of such vertices joined by edges whose ends share the lattice point,
 * named by its smallest vertex index (its root). Only vertices of one
 * cluster are ever merged. Up to max_iterations sweeps (5); a sweep
 * processes every cluster with two or more live vertices once, in
 * ascending priority (a hash of the root, then the root): for each live
 * member `to` in ascending index, for each other live member `from` in
 * ascending index, the half-edge collapse from -> to is made when PMP's
 * collapse test (the edge has a triangle on each side, whose other two
 * edges are not both on the boundary, the two opposite vertices differ,
 * `from` and `to` are not both boundary vertices, and no other common
 * neighbour: the link condition) passes on the mesh as it is. A collapse
 * removes `from` and the edge's two triangles, the other triangles of
 * `from` take `to`. A sweep without a collapse ends the cleanup. Each
 * surviving vertex moves to the mean (in double, members ascending) of
 * the input positions of the vertices merged into it.
 *
 * Why the parallel run gives the sequential result: clusters never
 * change their adjacency (a collapse inside a cluster keeps every edge to
 * another cluster, since the test refuses the two cases that would drop
 * one), and a cluster reads and writes only the triangles around its own
 * vertices and its own members' entries, so two clusters with no edge
 * between them commute. A round processes every pending cluster none of
 * whose adjacent pending clusters has a lower priority: no two of them are
 * adjacent, and every adjacent pair is processed in priority order, as
 * the sequential order does. Rounds repeat until the sweep's clusters are
 * done.
 *
 * The mesh is a triangle list (tri, rewritten by the collapses; a removed
 * triangle becomes (o, o, to), o its third vertex: c[0] == c[1] marks it,
 * and its vertices still name the clusters it joined) with the input's
 * vertex -> triangle rows (ascending, never updated): the live triangles
 * around a live vertex x (its star) are the live triangles in the rows of
 * the members merged into x (rep[m] == x), which all hold x. Internal
 * header, C and CUDA C++. */
#ifndef PM_CORE_CLEANUP_RULES_H
#define PM_CORE_CLEANUP_RULES_H

#include <string.h>

#include "core/post_rules.h"

#define PMI_CLEAN_NONE 0xFFFFFFFFu

typedef struct pmi_clean_args {
    size_t nv, nt;
    const float *pos;         /* input positions */
    const float *nrm;         /* input normals or NULL */
    uint32_t *tri;            /* the working triangles (a copy of the input's) */
    const uint32_t *vt_off;   /* nv + 1: vertex -> triangle rows of the input */
    const uint32_t *vt_list;  /* 3 nt, each row ascending */
    int64_t *g;               /* 3 nv: nearest lattice point */
    uint32_t *label;          /* nv: cluster root, NONE where the vertex does not snap */
    uint32_t *rep;            /* nv: the live vertex it was merged into (itself when live) */
    uint32_t *cnt, *cursor;   /* nv + 1 counts (cnt[nv] = 0), nv cursors */
    uint32_t *moff, *mlist;   /* members of root r: mlist[moff[r] .. moff[r + 1]) ascending */
    uint32_t *cl;             /* the roots of clusters with two or more members, ascending */
    uint8_t *pend;            /* nv (at roots): pending in this sweep */
    uint8_t *go;              /* per cluster: processed in this round */
    uint32_t *nb;             /* 16 per cluster: pmi_clean_neighbours */
    uint32_t *flag, *off;     /* keep flags and their exclusive scan (triangles or vertices) */
    uint32_t *vmap;           /* nv: new vertex index (scan of the vertex keep flags) */
    float *pos_out, *nrm_out; /* kept vertices */
    uint32_t *tri_out;        /* kept triangles */
    double origin[3], spacing[3];
    double max2; /* squared snap distance (limit) */
    int limit, keep_vertices;
    unsigned long long *error;   /* first invalid triangle (see pmi_clean_check) */
    unsigned long long *counter; /* [0] collapses, [1] clusters processed (a sweep's) */
} pmi_clean_args;

/* The arguments' part both backends fill alike (the others, zeroed here,
 * are their buffers): the input's sizes, positions and normals, the
 * lattice, the squared snap distance (snap_distance times the smallest
 * spacing) and whether it applies. Returns the number of sweeps. */
static inline int pmi_clean_args_init(pmi_clean_args *a, size_t nv, size_t nt, const float *pos,
                                      const float *nrm, const pm_mc_cleanup_options *o)
{
    memset(a, 0, sizeof *a);
    a->nv = nv;
    a->nt = nt;
    a->pos = pos;
    a->nrm = nrm;
    for (int c = 0; c < 3; c++) {
        a->origin[c] = o->origin[c];
        a->spacing[c] = o->spacing[c];
    }
    double cell = o->spacing[0];
    if (o->spacing[1] < cell) cell = o->spacing[1];
    if (o->spacing[2] < cell) cell = o->spacing[2];
    a->limit = o->use_snap_distance || o->snap_distance > 0;
    a->max2 = (o->snap_distance * cell) * (o->snap_distance * cell);
    a->keep_vertices = o->keep_vertices;
    return o->max_iterations > 0 ? o->max_iterations : 5;
}

PMI_PHD uint32_t pmi_clean_load(const uint32_t *p)
{
#ifdef __CUDA_ARCH__
    return *(const volatile uint32_t *)p;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

PMI_PHD void pmi_clean_add_u64(unsigned long long *p, unsigned long long v)
{
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#else
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

/* A cluster's priority: a hash of its root (lowbias32), then the root, so
 * that neighbouring clusters rarely wait on each other in long chains. */
PMI_PHD uint64_t pmi_clean_priority(uint32_t r)
{
    uint32_t h = r;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return ((uint64_t)h << 32) | r;
}

/* Per vertex: its nearest lattice point, whether it snaps (finite, within
 * 2^50 lattice steps, within the snap distance when limited), rep = itself. */
PMI_PHD void pmi_clean_vertex(const pmi_clean_args *a, size_t v)
{
    const float *p = a->pos + 3 * v;
    int ok = 1;
    for (int c = 0; c < 3; c++) {
        const double u = ((double)p[c] - a->origin[c]) / a->spacing[c];
        if (!(u > -1.125899906842624e15 && u < 1.125899906842624e15)) ok = 0;
    }
    double d2 = 0.0;
    for (int c = 0; c < 3; c++) {
        const int64_t gc = ok ? pmi_post_nearest_point(p[c], a->origin[c], a->spacing[c]) : 0;
        a->g[3 * v + (size_t)c] = gc;
        const double gp = a->origin[c] + (double)gc * a->spacing[c];
        d2 += ((double)p[c] - gp) * ((double)p[c] - gp);
    }
    if (a->limit && !(d2 <= a->max2)) ok = 0;
    a->label[v] = ok ? (uint32_t)v : PMI_CLEAN_NONE;
    a->rep[v] = (uint32_t)v;
}

PMI_PHD int pmi_clean_in(const uint32_t *A, uint32_t d, uint32_t v)
{
    for (uint32_t j = 0; j < d; j++)
        if (A[j] == v) return 1;
    return 0;
}

PMI_PHD int pmi_clean_has_edge(const uint32_t *c, uint32_t u, uint32_t w)
{
    return (c[0] == u && c[1] == w) || (c[1] == u && c[2] == w) || (c[2] == u && c[0] == w);
}

/* Per vertex x: the input's invalid triangles around it, as splashsurf's
 * half-edge construction finds them: a triangle t repeating x, or two
 * triangles s < t of x's row with the same directed edge x -> y, put
 * (t << 34 | code << 32 | s) into *error (min over all: the first bad
 * triangle, its first bad corner, the first earlier triangle): code 0 a
 * repeated vertex, k + 1 the edge from corner k of t. */
PMI_PHD void pmi_clean_check(const pmi_clean_args *a, size_t x)
{
    const uint32_t b = a->vt_off[x], e = a->vt_off[x + 1];
    uint32_t next[32]; /* the vertex after x in each triangle of a short row */
    for (uint32_t j = b; j < e; j++) {
        const uint32_t t = a->vt_list[j];
        const uint32_t *c = a->tri + 3 * (size_t)t;
        if (c[0] == c[1] || c[1] == c[2] || c[0] == c[2]) {
            pmi_atomic_min(a->error, (unsigned long long)t << 34);
            if (j - b < 32) next[j - b] = PMI_CLEAN_NONE;
            continue;
        }
        const int k = c[0] == (uint32_t)x ? 0 : c[1] == (uint32_t)x ? 1 : 2;
        const uint32_t y = c[(k + 1) % 3];
        if (e - b <= 32) {
            /* earlier triangles of the row with x -> y: the same next vertex
             * (one with a repeated vertex has reported a smaller key) */
            next[j - b] = y;
            for (uint32_t i = 0; i < j - b; i++)
                if (next[i] == y) {
                    pmi_atomic_min(a->error, ((unsigned long long)t << 34) |
                                                 ((unsigned long long)(k + 1) << 32) |
                                                 a->vt_list[b + i]);
                    break;
                }
            continue;
        }
        for (uint32_t i = b; i < j; i++) {
            const uint32_t s = a->vt_list[i];
            if (s != t && pmi_clean_has_edge(a->tri + 3 * (size_t)s, (uint32_t)x, y)) {
                pmi_atomic_min(a->error, ((unsigned long long)t << 34) |
                                             ((unsigned long long)(k + 1) << 32) | s);
                break;
            }
        }
    }
}

PMI_PHD int pmi_clean_same_point(const int64_t *g, uint32_t u, uint32_t v)
{
    const int64_t *p = g + 3 * (size_t)u, *q = g + 3 * (size_t)v;
    return p[0] == q[0] && p[1] == q[1] && p[2] == q[2];
}

PMI_PHD void pmi_clean_store(uint32_t *p, uint32_t v)
{
#ifdef __CUDA_ARCH__
    *(volatile uint32_t *)p = v;
#else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

PMI_PHD int pmi_clean_cas(uint32_t *p, uint32_t expect, uint32_t v)
{
#ifdef __CUDA_ARCH__
    return atomicCAS((unsigned int *)p, expect, v) == expect;
#else
    return __atomic_compare_exchange_n(p, &expect, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
#endif
}

/* The clusters by a lock-free union-find on label[] (each vertex's
 * parent): a root is only ever hooked under a smaller root, and path
 * halving only moves a parent to an ancestor, so every tree's root is the
 * smallest index of its cluster, whatever the schedule. */
PMI_PHD uint32_t pmi_clean_find(uint32_t *parent, uint32_t x)
{
    for (;;) {
        const uint32_t p = pmi_clean_load(parent + x);
        if (p == x) return x;
        const uint32_t gp = pmi_clean_load(parent + p);
        if (gp != p) pmi_clean_store(parent + x, gp);
        x = gp;
    }
}

/* Per vertex v that snaps: joins it with every later neighbour on the same
 * lattice point. */
PMI_PHD void pmi_clean_union(const pmi_clean_args *a, size_t v)
{
    if (pmi_clean_load(a->label + v) == PMI_CLEAN_NONE) return;
    for (uint32_t j = a->vt_off[v]; j < a->vt_off[v + 1]; j++) {
        const uint32_t *c = a->tri + 3 * (size_t)a->vt_list[j];
        for (int k = 0; k < 3; k++) {
            uint32_t x = c[k], y = (uint32_t)v;
            if (x <= y || pmi_clean_load(a->label + x) == PMI_CLEAN_NONE ||
                !pmi_clean_same_point(a->g, x, y))
                continue;
            for (;;) {
                x = pmi_clean_find(a->label, x);
                y = pmi_clean_find(a->label, y);
                if (x == y) break;
                const uint32_t hi = x > y ? x : y, lo = x > y ? y : x;
                if (pmi_clean_cas(a->label + hi, hi, lo)) break;
            }
        }
    }
}

/* Per vertex after every union: its root (read only, into rep, NONE
 * where it does not snap); then label = rep, rep = itself. */
PMI_PHD void pmi_clean_root(const pmi_clean_args *a, size_t v)
{
    uint32_t x = a->label[v];
    if (x != PMI_CLEAN_NONE)
        while (a->label[x] != x)
            x = a->label[x];
    a->rep[v] = x;
}
PMI_PHD void pmi_clean_root_set(const pmi_clean_args *a, size_t v)
{
    a->label[v] = a->rep[v];
    a->rep[v] = (uint32_t)v;
}

/* Members: count per root, fill (cursor), sort each root's row. */
PMI_PHD void pmi_clean_member_count(const pmi_clean_args *a, size_t v)
{
    const uint32_t l = a->label[v];
    if (l != PMI_CLEAN_NONE) pmi_atomic_inc(a->cnt + l);
}
PMI_PHD void pmi_clean_member_fill(const pmi_clean_args *a, size_t v)
{
    const uint32_t l = a->label[v];
    if (l != PMI_CLEAN_NONE) a->mlist[a->moff[l] + pmi_atomic_inc(a->cursor + l)] = (uint32_t)v;
}
PMI_PHD void pmi_clean_member_sort(const pmi_clean_args *a, size_t r)
{
    pmi_post_sort(a->mlist + a->moff[r], a->moff[r + 1] - a->moff[r]);
}
/* flag[r] = root of a cluster of two or more; then cl[off[r]] = r. */
PMI_PHD void pmi_clean_cluster_flag(const pmi_clean_args *a, size_t r)
{
    a->flag[r] = a->moff[r + 1] - a->moff[r] >= 2;
}
PMI_PHD void pmi_clean_cluster_list(const pmi_clean_args *a, size_t r)
{
    if (a->flag[r]) a->cl[a->off[r]] = (uint32_t)r;
}

/* Per cluster i at the start of a sweep: pending when two or more of its
 * members are live; returns that. */
PMI_PHD int pmi_clean_sweep(const pmi_clean_args *a, size_t i)
{
    const uint32_t r = a->cl[i];
    uint32_t live = 0;
    for (uint32_t j = a->moff[r]; j < a->moff[r + 1]; j++)
        live += a->rep[a->mlist[j]] == a->mlist[j];
    a->pend[r] = live >= 2;
    return live >= 2;
}

/* Per cluster i: whether cluster l (a label, NONE where the vertex does
 * not snap) is another cluster of two or more members with a lower
 * priority (pr: cluster r's). */
PMI_PHD int pmi_clean_lower(const pmi_clean_args *a, uint32_t l, uint32_t r, uint64_t pr)
{
    return l != PMI_CLEAN_NONE && l != r && a->moff[l + 1] - a->moff[l] >= 2 &&
           pmi_clean_priority(l) < pr;
}

#define PMI_CLEAN_NB 15

/* Per cluster i, once: the adjacent clusters of lower priority (distinct,
 * in the order met: members, their rows, corners) into nb[16 i ..], their
 * count into nb[16 i + 15], or PMI_CLEAN_NONE there when more than 15
 * (pmi_clean_select then looks at the triangles). Clusters never change
 * their adjacency. */
PMI_PHD void pmi_clean_neighbours(const pmi_clean_args *a, size_t i)
{
    const uint32_t r = a->cl[i];
    const uint64_t pr = pmi_clean_priority(r);
    uint32_t *o = a->nb + 16 * i, n = 0, last = r;
    for (uint32_t j = a->moff[r]; j < a->moff[r + 1]; j++) {
        const uint32_t m = a->mlist[j];
        for (uint32_t q = a->vt_off[m]; q < a->vt_off[m + 1]; q++) {
            const uint32_t *c = a->tri + 3 * (size_t)a->vt_list[q];
            for (int k = 0; k < 3; k++) {
                const uint32_t l = a->label[c[k]];
                if (l == last) continue;
                last = l;
                if (!pmi_clean_lower(a, l, r, pr) || pmi_clean_in(o, n, l)) continue;
                if (n == PMI_CLEAN_NB) {
                    o[PMI_CLEAN_NB] = PMI_CLEAN_NONE;
                    return;
                }
                o[n++] = l;
            }
        }
    }
    o[PMI_CLEAN_NB] = n;
}

/* Per cluster i in a round: go when pending and no adjacent pending
 * cluster (a vertex of a triangle around a member) has a lower priority. */
PMI_PHD void pmi_clean_select(const pmi_clean_args *a, size_t i)
{
    const uint32_t r = a->cl[i];
    int go = a->pend[r];
    const uint32_t *o = a->nb + 16 * i;
    if (go && o[PMI_CLEAN_NB] != PMI_CLEAN_NONE) {
        for (uint32_t j = 0; j < o[PMI_CLEAN_NB]; j++)
            if (a->pend[o[j]]) go = 0;
        a->go[i] = (uint8_t)go;
        return;
    }
    const uint64_t pr = pmi_clean_priority(r);
    for (uint32_t j = a->moff[r]; j < a->moff[r + 1] && go; j++) {
        const uint32_t m = a->mlist[j];
        for (uint32_t q = a->vt_off[m]; q < a->vt_off[m + 1] && go; q++) {
            const uint32_t *c = a->tri + 3 * (size_t)a->vt_list[q];
            for (int k = 0; k < 3; k++) {
                const uint32_t l = a->label[c[k]];
                if (pmi_clean_lower(a, l, r, pr) && a->pend[l]) go = 0;
            }
        }
    }
    a->go[i] = (uint8_t)go;
}

/* ---- one cluster: members M[0 .. k) ------------------------------------ */

/* The third vertex of the first live triangle around x (its members'
 * rows in order) that has the directed edge u -> w; NONE when none. */
PMI_PHD uint32_t pmi_clean_third(const pmi_clean_args *a, const uint32_t *M, uint32_t k, uint32_t x,
                                 uint32_t u, uint32_t w)
{
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != x) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t t = a->vt_list[j];
            const uint32_t *c = a->tri + 3 * (size_t)t;
            if (c[0] == c[1]) continue; /* removed */
            for (int q = 0; q < 3; q++)
                if (c[q] == u && c[(q + 1) % 3] == w) return c[(q + 2) % 3];
        }
    }
    return PMI_CLEAN_NONE;
}

/* Whether y is a vertex of a live triangle around x. */
PMI_PHD int pmi_clean_adjacent(const pmi_clean_args *a, const uint32_t *M, uint32_t k, uint32_t x,
                               uint32_t y)
{
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != x) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t t = a->vt_list[j];
            const uint32_t *c = a->tri + 3 * (size_t)t;
            if (c[0] == c[1]) continue; /* removed */
            if (c[0] == y || c[1] == y || c[2] == y) return 1;
        }
    }
    return 0;
}

/* Whether x is a boundary vertex: an edge at x with a triangle on one
 * side only. */
PMI_PHD int pmi_clean_boundary(const pmi_clean_args *a, const uint32_t *M, uint32_t k, uint32_t x)
{
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != x) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t t = a->vt_list[j];
            const uint32_t *c = a->tri + 3 * (size_t)t;
            if (c[0] == c[1]) continue; /* removed */
            int q = c[0] == x ? 0 : c[1] == x ? 1 : 2;
            const uint32_t y = c[(q + 1) % 3], z = c[(q + 2) % 3];
            if (pmi_clean_third(a, M, k, x, y, x) == PMI_CLEAN_NONE ||
                pmi_clean_third(a, M, k, x, x, z) == PMI_CLEAN_NONE)
                return 1;
        }
    }
    return 0;
}

/* PMP's collapse test of the half-edge from -> to (both live members). */
PMI_PHD int pmi_clean_collapse_ok(const pmi_clean_args *a, const uint32_t *M, uint32_t k,
                                  uint32_t from, uint32_t to)
{
    const uint32_t vpos = pmi_clean_third(a, M, k, from, from, to); /* (from, to, vpos) */
    const uint32_t vneg = pmi_clean_third(a, M, k, from, to, from); /* (to, from, vneg) */
    if (vpos == PMI_CLEAN_NONE || vneg == PMI_CLEAN_NONE) return 0; /* no edge, or a boundary one */
    /* the other two edges of either triangle not both on the boundary */
    if (pmi_clean_third(a, M, k, to, vpos, to) == PMI_CLEAN_NONE &&
        pmi_clean_third(a, M, k, from, from, vpos) == PMI_CLEAN_NONE)
        return 0;
    if (pmi_clean_third(a, M, k, from, vneg, from) == PMI_CLEAN_NONE &&
        pmi_clean_third(a, M, k, to, to, vneg) == PMI_CLEAN_NONE)
        return 0;
    if (vpos == vneg) return 0;
    if (pmi_clean_boundary(a, M, k, from) && pmi_clean_boundary(a, M, k, to)) return 0;
    /* the link condition: no common neighbour but vpos and vneg */
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != from) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t t = a->vt_list[j];
            const uint32_t *c = a->tri + 3 * (size_t)t;
            if (c[0] == c[1]) continue; /* removed */
            for (int q = 0; q < 3; q++) {
                const uint32_t vv = c[q];
                if (vv == from || vv == to || vv == vpos || vv == vneg) continue;
                if (pmi_clean_adjacent(a, M, k, to, vv)) return 0;
            }
        }
    }
    return 1;
}

/* The collapse from -> to: the triangles holding both go, the others
 * around `from` take `to`, the members merged into `from` now are `to`'s. */
PMI_PHD void pmi_clean_collapse(const pmi_clean_args *a, const uint32_t *M, uint32_t k,
                                uint32_t from, uint32_t to)
{
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != from) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t t = a->vt_list[j];
            uint32_t *c = a->tri + 3 * (size_t)t;
            if (c[0] == c[1]) continue; /* removed */
            if (c[0] == to || c[1] == to || c[2] == to) {
                /* removed: marked by c[0] == c[1], keeping its clusters */
                const uint32_t o = c[0] != from && c[0] != to   ? c[0]
                                   : c[1] != from && c[1] != to ? c[1]
                                                                : c[2];
                c[0] = o;
                c[1] = o;
                c[2] = to;
                continue;
            }
            for (int q = 0; q < 3; q++)
                if (c[q] == from) c[q] = to;
        }
    }
    for (uint32_t i = 0; i < k; i++)
        if (a->rep[M[i]] == from) a->rep[M[i]] = to;
}

/* ---- the same test on local copies of the two stars -------------------- */

#ifndef PMI_CLEAN_CAP
#define PMI_CLEAN_CAP 40
#endif

/* The star of x as, per live triangle around x (its members' rows in
 * order), the vertex after x (Y) and the one before it (Z); the count, or
 * PMI_CLEAN_CAP + 1 when there are more. */
PMI_PHD uint32_t pmi_clean_star(const pmi_clean_args *a, const uint32_t *M, uint32_t k, uint32_t x,
                                uint32_t *Y, uint32_t *Z)
{
    uint32_t d = 0;
    for (uint32_t i = 0; i < k; i++) {
        const uint32_t m = M[i];
        if (a->rep[m] != x) continue;
        for (uint32_t j = a->vt_off[m]; j < a->vt_off[m + 1]; j++) {
            const uint32_t *c = a->tri + 3 * (size_t)a->vt_list[j];
            if (c[0] == c[1]) continue; /* removed */
            if (d == PMI_CLEAN_CAP) return PMI_CLEAN_CAP + 1;
            const int q = c[0] == x ? 0 : c[1] == x ? 1 : 2;
            Y[d] = c[(q + 1) % 3];
            Z[d] = c[(q + 2) % 3];
            d++;
        }
    }
    return d;
}

/* B[j] for the first j with A[j] == v, NONE when none. */
PMI_PHD uint32_t pmi_clean_at(const uint32_t *A, const uint32_t *B, uint32_t d, uint32_t v)
{
    for (uint32_t j = 0; j < d; j++)
        if (A[j] == v) return B[j];
    return PMI_CLEAN_NONE;
}

PMI_PHD int pmi_clean_star_boundary(const uint32_t *Y, const uint32_t *Z, uint32_t d)
{
    for (uint32_t j = 0; j < d; j++)
        if (!pmi_clean_in(Z, d, Y[j]) || !pmi_clean_in(Y, d, Z[j])) return 1;
    return 0;
}

/* pmi_clean_collapse_ok on the stars of from (Yf, Zf, df) and to (Yt, Zt,
 * dt): the same test, term by term. */
PMI_PHD int pmi_clean_collapse_ok_star(const uint32_t *Yf, const uint32_t *Zf, uint32_t df,
                                       const uint32_t *Yt, const uint32_t *Zt, uint32_t dt,
                                       uint32_t to, uint32_t vpos, uint32_t vneg)
{
    if (!pmi_clean_in(Zt, dt, vpos) && !pmi_clean_in(Yf, df, vpos)) return 0;
    if (!pmi_clean_in(Zf, df, vneg) && !pmi_clean_in(Yt, dt, vneg)) return 0;
    if (vpos == vneg) return 0;
    if (pmi_clean_star_boundary(Yf, Zf, df) && pmi_clean_star_boundary(Yt, Zt, dt)) return 0;
    for (uint32_t j = 0; j < df; j++)
        for (int h = 0; h < 2; h++) {
            const uint32_t vv = h ? Zf[j] : Yf[j];
            if (vv == to || vv == vpos || vv == vneg) continue;
            if (pmi_clean_in(Yt, dt, vv) || pmi_clean_in(Zt, dt, vv)) return 0;
        }
    return 1;
}

/* Per cluster i in a round, when go: the cluster's collapses (the rule
 * above; the test on local copies of the stars, or on the arrays when a
 * star is larger); counts them and the cluster into counter[0] and
 * counter[1]. */
PMI_PHD void pmi_clean_process(const pmi_clean_args *a, size_t i)
{
    if (!a->go[i]) return;
    const uint32_t r = a->cl[i];
    const uint32_t *M = a->mlist + a->moff[r];
    const uint32_t k = a->moff[r + 1] - a->moff[r];
    uint32_t Yf[PMI_CLEAN_CAP], Zf[PMI_CLEAN_CAP], Yt[PMI_CLEAN_CAP], Zt[PMI_CLEAN_CAP];
    unsigned long long n = 0;
    for (uint32_t ti = 0; ti < k; ti++) {
        const uint32_t to = M[ti];
        if (a->rep[to] != to) continue;
        for (uint32_t fi = 0; fi < k; fi++) {
            const uint32_t from = M[fi];
            if (fi == ti || a->rep[from] != from) continue;
            int ok;
            const uint32_t df = pmi_clean_star(a, M, k, from, Yf, Zf);
            if (df <= PMI_CLEAN_CAP) {
                const uint32_t vpos = pmi_clean_at(Yf, Zf, df, to); /* (from, to, vpos) */
                const uint32_t vneg = pmi_clean_at(Zf, Yf, df, to); /* (to, from, vneg) */
                if (vpos == PMI_CLEAN_NONE || vneg == PMI_CLEAN_NONE) continue;
                const uint32_t dt = pmi_clean_star(a, M, k, to, Yt, Zt);
                ok = dt <= PMI_CLEAN_CAP
                         ? pmi_clean_collapse_ok_star(Yf, Zf, df, Yt, Zt, dt, to, vpos, vneg)
                         : pmi_clean_collapse_ok(a, M, k, from, to);
            } else {
                ok = pmi_clean_collapse_ok(a, M, k, from, to);
            }
            if (!ok) continue;
            pmi_clean_collapse(a, M, k, from, to);
            n++;
        }
    }
    a->pend[r] = 0;
    if (n) pmi_clean_add_u64(a->counter, n);
    pmi_clean_add_u64(a->counter + 1, 1);
}

/* ---- the result ---------------------------------------------------------- */

/* Keep flags: per triangle live; per vertex kept (keep_vertices, or live). */
PMI_PHD void pmi_clean_tri_flag(const pmi_clean_args *a, size_t t)
{
    a->flag[t] = a->tri[3 * t] != a->tri[3 * t + 1];
}
PMI_PHD void pmi_clean_vert_flag(const pmi_clean_args *a, size_t v)
{
    a->flag[v] = a->keep_vertices || a->rep[v] == (uint32_t)v;
}

/* Per kept triangle: its vertices, renumbered (off: the triangle scan). */
PMI_PHD void pmi_clean_tri_out(const pmi_clean_args *a, size_t t)
{
    const uint32_t *c = a->tri + 3 * t;
    if (c[0] == c[1]) return;
    uint32_t *o = a->tri_out + 3 * (size_t)a->off[t];
    for (int k = 0; k < 3; k++)
        o[k] = a->keep_vertices ? c[k] : a->vmap[c[k]];
}

/* Per kept vertex: its position, the mean of the input positions of the
 * vertices merged into it (members ascending, in double) for a live
 * member of a cluster, the input position otherwise; its normal copied. */
PMI_PHD void pmi_clean_vert_out(const pmi_clean_args *a, size_t v)
{
    if (!a->keep_vertices && a->rep[v] != (uint32_t)v) return;
    const size_t o = a->keep_vertices ? v : (size_t)a->vmap[v];
    const uint32_t l = a->label[v];
    const float *p = a->pos + 3 * v;
    float out[3] = {p[0], p[1], p[2]};
    if (l != PMI_CLEAN_NONE && a->rep[v] == (uint32_t)v && a->moff[l + 1] - a->moff[l] >= 2) {
        double s[3] = {0.0, 0.0, 0.0};
        uint32_t n = 0;
        for (uint32_t j = a->moff[l]; j < a->moff[l + 1]; j++) {
            const uint32_t m = a->mlist[j];
            if (a->rep[m] != (uint32_t)v) continue;
            for (int c = 0; c < 3; c++)
                s[c] += (double)a->pos[3 * (size_t)m + (size_t)c];
            n++;
        }
        for (int c = 0; c < 3; c++)
            out[c] = (float)(s[c] / (double)n);
    }
    for (int c = 0; c < 3; c++) {
        a->pos_out[3 * o + (size_t)c] = out[c];
        if (a->nrm) a->nrm_out[3 * o + (size_t)c] = a->nrm[3 * v + (size_t)c];
    }
}

#endif
