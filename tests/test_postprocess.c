/* Mesh post-processing (pyramesh.h "Mesh post-processing", docs/splashsurf.md):
 * each function against a plain reference loop (byte for byte where the
 * rule fixes the order: normals, Laplacian and normal smoothing), its
 * effect (roughness down, Taubin keeping the volume, cleanup and
 * decimation reaching their counts, components removed, the AABB clip,
 * quads, every barnacle configuration removed), closed / manifold /
 * oriented results, 1 vs 4 threads identical bytes, every function on a
 * mesh in context memory giving a CPU context's bytes step by step (run
 * as "cuda" that is device memory: the GPU runners), the SPH functions
 * likewise with host and context-memory arrays, and the attribute file
 * round trip. Meshes come from jittered
 * particle balls reconstructed on the context under test. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_common.h"

static pm_context *g_ctx;

/* n^3-ish particles on a lattice of spacing 2r inside a ball, jittered. */
static float *ball(double cx, double cy, double cz, int rad, double r, size_t *n)
{
    size_t cap = (size_t)(2 * rad + 1) * (2 * rad + 1) * (2 * rad + 1), k = 0;
    float *xyz = malloc(cap * 3 * sizeof *xyz);
    for (int i = -rad; i <= rad; i++)
        for (int j = -rad; j <= rad; j++)
            for (int l = -rad; l <= rad; l++) {
                if (i * i + j * j + l * l > rad * rad) continue;
                xyz[3 * k] = (float)(cx + 2 * r * i + (pmt_uniform() - 0.5) * 0.4 * r);
                xyz[3 * k + 1] = (float)(cy + 2 * r * j + (pmt_uniform() - 0.5) * 0.4 * r);
                xyz[3 * k + 2] = (float)(cz + 2 * r * l + (pmt_uniform() - 0.5) * 0.4 * r);
                k++;
            }
    *n = k;
    return xyz;
}

static pm_field_params params(double r, double c)
{
    pm_field_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.radius = r;
    p.cube_size = c;
    return p;
}

/* The marching-cubes mesh of particles (host memory, no normals), and the
 * field's lattice as cleanup options. */
static pm_mesh reconstruct(const float *xyz, size_t n, const pm_field_params *p,
                           pm_mc_cleanup_options *lat)
{
    pm_field f;
    PMT_OK(pm_field_compute(g_ctx, xyz, n, p, &f));
    pm_isosurface_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.normals = PM_NORMALS_NONE;
    o.inside = f.inside;
    pm_mesh m;
    PMT_OK(pm_isosurface(g_ctx, &f.volume, f.iso, &o, &m));
    if (lat) {
        memset(lat, 0, sizeof *lat);
        lat->struct_size = sizeof *lat;
        for (int a = 0; a < 3; a++) {
            lat->origin[a] = f.volume.origin[a];
            lat->spacing[a] = f.volume.spacing[a];
        }
    }
    pm_field_free(g_ctx, &f);
    return m;
}

/* A deep copy in host memory, owning its arrays. */
static pm_mesh copy(const pm_mesh *m)
{
    pm_mesh c = *m;
    c.positions = malloc(12 * m->num_vertices + 1);
    memcpy(c.positions, m->positions, 12 * m->num_vertices);
    c.indices = malloc(12 * m->num_triangles + 1);
    memcpy(c.indices, m->indices, 12 * m->num_triangles);
    c.normals = NULL;
    if (m->normals) {
        c.normals = malloc(12 * m->num_vertices + 1);
        memcpy(c.normals, m->normals, 12 * m->num_vertices);
    }
    c.owns_arrays = 1;
    c.in_context_memory = 0;
    return c;
}

static void drop(pm_mesh *m)
{
    free(m->positions);
    free(m->normals);
    free(m->indices);
    memset(m, 0, sizeof *m);
}

static int same(const pm_mesh *a, const pm_mesh *b)
{
    return a->num_vertices == b->num_vertices && a->num_triangles == b->num_triangles &&
           !memcmp(a->positions, b->positions, 12 * a->num_vertices) &&
           !memcmp(a->indices, b->indices, 12 * a->num_triangles) &&
           (!a->normals) == (!b->normals) &&
           (!a->normals || !memcmp(a->normals, b->normals, 12 * a->num_vertices));
}

static pm_mesh_report analyze(const pm_mesh *m)
{
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(m, &r));
    return r;
}

static int closed_manifold(const pm_mesh *m)
{
    pm_mesh_report r = analyze(m);
    return r.closed && r.manifold && r.oriented;
}

/* Mean distance of a vertex from the mean of its neighbours. */
static double roughness(const pm_mesh *m)
{
    size_t nv = m->num_vertices;
    double *sum = calloc(nv * 3, sizeof *sum);
    unsigned *cnt = calloc(nv, sizeof *cnt);
    for (size_t t = 0; t < m->num_triangles; t++)
        for (int a = 0; a < 3; a++) {
            uint32_t v = m->indices[3 * t + a], w = m->indices[3 * t + (a + 1) % 3];
            for (int c = 0; c < 3; c++) {
                sum[3 * v + c] += m->positions[3 * w + c];
                sum[3 * w + c] += m->positions[3 * v + c];
            }
            cnt[v]++, cnt[w]++;
        }
    double total = 0;
    for (size_t v = 0; v < nv; v++) {
        if (!cnt[v]) continue;
        double d2 = 0;
        for (int c = 0; c < 3; c++) {
            double e = m->positions[3 * v + c] - sum[3 * v + c] / cnt[v];
            d2 += e * e;
        }
        total += sqrt(d2);
    }
    free(sum), free(cnt);
    return total / (double)nv;
}

/* ---- references: the documented order, one term at a time ------------ */

/* Sorted distinct neighbours of every vertex (brute force). */
static uint32_t **ref_neighbours(const pm_mesh *m, uint32_t **count)
{
    size_t nv = m->num_vertices;
    uint32_t **nb = calloc(nv, sizeof *nb);
    *count = calloc(nv, sizeof **count);
    for (size_t t = 0; t < m->num_triangles; t++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                uint32_t v = m->indices[3 * t + a], w = m->indices[3 * t + b];
                if (v == w) continue;
                uint32_t k = 0;
                while (k < (*count)[v] && nb[v][k] < w)
                    k++;
                if (k < (*count)[v] && nb[v][k] == w) continue;
                nb[v] = realloc(nb[v], ((*count)[v] + 1) * sizeof **nb);
                memmove(nb[v] + k + 1, nb[v] + k, ((*count)[v] - k) * sizeof **nb);
                nb[v][k] = w;
                (*count)[v]++;
            }
    return nb;
}

static void ref_normals(const pm_mesh *m, float *out)
{
    size_t nv = m->num_vertices;
    double *s = calloc(3 * nv, sizeof *s);
    for (size_t t = 0; t < m->num_triangles; t++) { /* triangle order = ascending per vertex */
        const uint32_t *x = m->indices + 3 * t;
        const float *a = m->positions + 3 * x[0], *b = m->positions + 3 * x[1],
                    *c = m->positions + 3 * x[2];
        double e0[3], e1[3];
        for (int k = 0; k < 3; k++) {
            e0[k] = (double)b[k] - (double)a[k];
            e1[k] = (double)c[k] - (double)b[k];
        }
        double n[3] = {e0[1] * e1[2] - e0[2] * e1[1], e0[2] * e1[0] - e0[0] * e1[2],
                       e0[0] * e1[1] - e0[1] * e1[0]};
        for (int k = 0; k < 3; k++)
            for (int c2 = 0; c2 < 3; c2++)
                s[3 * x[k] + c2] += n[c2];
    }
    for (size_t v = 0; v < nv; v++) {
        double *q = s + 3 * v;
        double len = sqrt(q[0] * q[0] + (q[1] * q[1] + q[2] * q[2]));
        for (int c = 0; c < 3; c++)
            out[3 * v + c] = len > 0 ? (float)(q[c] / len) : 0.0f;
    }
    free(s);
}

static void ref_laplacian(const pm_mesh *m, int iters, double beta, const float *w, float *out)
{
    uint32_t *cnt, **nb = ref_neighbours(m, &cnt);
    size_t nv = m->num_vertices;
    float *cur = malloc(12 * nv + 1), *next = malloc(12 * nv + 1);
    memcpy(cur, m->positions, 12 * nv);
    for (int it = 0; it < iters; it++) {
        for (size_t v = 0; v < nv; v++)
            for (int c = 0; c < 3; c++) {
                if (!cnt[v]) {
                    next[3 * v + c] = cur[3 * v + c];
                    continue;
                }
                double s = 0;
                for (uint32_t k = 0; k < cnt[v]; k++)
                    s += (double)cur[3 * nb[v][k] + c];
                double f = w ? beta * (double)w[v] : beta;
                next[3 * v + c] =
                    (float)((1.0 - f) * (double)cur[3 * v + c] + f * (s / (double)cnt[v]));
            }
        float *t = cur;
        cur = next, next = t;
    }
    memcpy(out, cur, 12 * nv);
    free(cur), free(next);
    for (size_t v = 0; v < nv; v++)
        free(nb[v]);
    free(nb), free(cnt);
}

static void ref_smooth_normals(const pm_mesh *m, const float *in, int iters, float *out)
{
    uint32_t *cnt, **nb = ref_neighbours(m, &cnt);
    size_t nv = m->num_vertices;
    float *cur = malloc(12 * nv + 1), *next = malloc(12 * nv + 1);
    memcpy(cur, in, 12 * nv);
    for (int it = 0; it < iters; it++) {
        for (size_t v = 0; v < nv; v++) {
            double s[3] = {0, 0, 0};
            for (uint32_t k = 0; k < cnt[v]; k++)
                for (int c = 0; c < 3; c++)
                    s[c] += (double)cur[3 * nb[v][k] + c];
            double len = sqrt(s[0] * s[0] + (s[1] * s[1] + s[2] * s[2]));
            for (int c = 0; c < 3; c++)
                next[3 * v + c] = len > 0 ? (float)(s[c] / len) : cur[3 * v + c];
        }
        float *t = cur;
        cur = next, next = t;
    }
    memcpy(out, cur, 12 * nv);
    free(cur), free(next);
    for (size_t v = 0; v < nv; v++)
        free(nb[v]);
    free(nb), free(cnt);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_normals_and_smoothing(const pm_mesh *m0)
{
    pm_mesh m = copy(m0);
    float *ref = malloc(12 * m.num_vertices);
    ref_normals(&m, ref);
    PMT_OK(pm_mesh_compute_normals(g_ctx, &m));
    PMT_CHECK(!memcmp(m.normals, ref, 12 * m.num_vertices), "area-weighted normals differ from "
                                                            "the reference");
    /* outward: the normals of a ball point away from its centre */
    double c[3] = {0, 0, 0};
    for (size_t v = 0; v < m.num_vertices; v++)
        for (int k = 0; k < 3; k++)
            c[k] += m.positions[3 * v + k] / (double)m.num_vertices;
    size_t out = 0;
    for (size_t v = 0; v < m.num_vertices; v++) {
        double d = 0;
        for (int k = 0; k < 3; k++)
            d += (m.positions[3 * v + k] - c[k]) * m.normals[3 * v + k];
        out += d > 0;
    }
    PMT_CHECK(out > 0.95 * m.num_vertices, "%zu of %zu normals point outward", out, m.num_vertices);
    float *sm = malloc(12 * m.num_vertices);
    ref_smooth_normals(&m, m.normals, 7, sm);
    PMT_OK(pm_mesh_smooth_normals(g_ctx, &m, 7));
    PMT_CHECK(!memcmp(m.normals, sm, 12 * m.num_vertices), "smoothed normals differ from the "
                                                           "reference");
    drop(&m);

    /* Laplacian with weights, against the reference; roughness goes down */
    m = copy(m0);
    float *w = malloc(4 * m.num_vertices), *pos = malloc(12 * m.num_vertices);
    for (size_t v = 0; v < m.num_vertices; v++)
        w[v] = (float)pmt_uniform();
    ref_laplacian(&m, 5, 1.0, w, pos);
    double r0 = roughness(&m);
    PMT_OK(pm_mesh_smooth_laplacian(g_ctx, &m, 5, 1.0, w));
    PMT_CHECK(!memcmp(m.positions, pos, 12 * m.num_vertices), "weighted Laplacian differs from "
                                                              "the reference");
    double r1 = roughness(&m);
    PMT_CHECK(r1 < 0.8 * r0, "Laplacian smoothing: roughness %g -> %g", r0, r1);
    PMT_CHECK(closed_manifold(&m), "Laplacian smoothing broke the topology");
    drop(&m);
    /* weights 0 leave the mesh alone */
    m = copy(m0);
    memset(w, 0, 4 * m.num_vertices);
    PMT_OK(pm_mesh_smooth_laplacian(g_ctx, &m, 3, 1.0, w));
    PMT_CHECK(!memcmp(m.positions, m0->positions, 12 * m.num_vertices), "weight 0 moved vertices");
    drop(&m);

    /* Taubin keeps the volume better than plain Laplacian, and smooths */
    pm_mesh a = copy(m0), b = copy(m0);
    double v0 = analyze(m0).volume;
    PMT_OK(pm_mesh_smooth_laplacian(g_ctx, &a, 10, 0.5, NULL));
    PMT_OK(pm_mesh_smooth_taubin(g_ctx, &b, 10, 0.5, -0.53));
    double va = analyze(&a).volume, vb = analyze(&b).volume;
    PMT_CHECK(fabs(vb - v0) < 0.25 * fabs(va - v0), "Taubin volume change %g vs Laplacian %g",
              vb - v0, va - v0);
    PMT_CHECK(roughness(&b) < 0.9 * r0, "Taubin smoothing: roughness %g -> %g", r0, roughness(&b));
    PMT_CHECK(closed_manifold(&b), "Taubin smoothing broke the topology");
    drop(&a), drop(&b);
    free(ref), free(sm), free(w), free(pos);
}

/* ---- the marching-cubes cleanup's rule, sequentially (docs/splashsurf.md
 * "Marching-cubes cleanup"): clusters in priority order, each cluster's
 * collapses in member order, PMP's test written out on per-vertex
 * triangle lists that grow as vertices merge. An independent reading of
 * the rule for the byte-for-byte comparison. */

typedef struct rc_list {
    uint32_t *t;
    size_t n, cap;
} rc_list;

static void rc_push(rc_list *l, uint32_t t)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->t = realloc(l->t, l->cap * sizeof *l->t);
    }
    l->t[l->n++] = t;
}

typedef struct rc_mesh {
    size_t nv, nt;
    uint32_t *tri;
    uint8_t *tdead, *vdead;
    rc_list *vt; /* triangles that held the vertex (dead or alive; filter) */
} rc_mesh;

static int rc_holds(const uint32_t *c, uint32_t v) { return c[0] == v || c[1] == v || c[2] == v; }

/* The live triangles around x: entries of vt[x] alive and holding x. */
#define RC_STAR(R, x, c)                                                                           \
    for (size_t i_ = 0; i_ < (R)->vt[x].n; i_++)                                                   \
        for (const uint32_t *c = (R)->tri + 3 * (size_t)(R)->vt[x].t[i_];                          \
             c && !(R)->tdead[(R)->vt[x].t[i_]] && rc_holds(c, x); c = NULL)

/* The third vertex of a live triangle around x with the directed edge u -> w. */
static uint32_t rc_third(const rc_mesh *R, uint32_t x, uint32_t u, uint32_t w)
{
    RC_STAR(R, x, c)
    for (int q = 0; q < 3; q++)
        if (c[q] == u && c[(q + 1) % 3] == w) return c[(q + 2) % 3];
    return UINT32_MAX;
}

static int rc_adjacent(const rc_mesh *R, uint32_t x, uint32_t y)
{
    RC_STAR(R, x, c)
    if (rc_holds(c, y)) return 1;
    return 0;
}

static int rc_boundary(const rc_mesh *R, uint32_t x)
{
    RC_STAR(R, x, c)
    {
        int q = c[0] == x ? 0 : c[1] == x ? 1 : 2;
        if (rc_third(R, x, c[(q + 1) % 3], x) == UINT32_MAX ||
            rc_third(R, x, x, c[(q + 2) % 3]) == UINT32_MAX)
            return 1;
    }
    return 0;
}

static int rc_legal(const rc_mesh *R, uint32_t from, uint32_t to)
{
    uint32_t vpos = rc_third(R, from, from, to), vneg = rc_third(R, from, to, from);
    if (vpos == UINT32_MAX || vneg == UINT32_MAX) return 0;
    if (rc_third(R, to, vpos, to) == UINT32_MAX && rc_third(R, from, from, vpos) == UINT32_MAX)
        return 0;
    if (rc_third(R, from, vneg, from) == UINT32_MAX && rc_third(R, to, to, vneg) == UINT32_MAX)
        return 0;
    if (vpos == vneg) return 0;
    if (rc_boundary(R, from) && rc_boundary(R, to)) return 0;
    RC_STAR(R, from, c)
    for (int q = 0; q < 3; q++) {
        uint32_t vv = c[q];
        if (vv != from && vv != to && vv != vpos && vv != vneg && rc_adjacent(R, to, vv)) return 0;
    }
    return 1;
}

static void rc_collapse(rc_mesh *R, uint32_t from, uint32_t to)
{
    for (size_t i = 0; i < R->vt[from].n; i++) {
        uint32_t t = R->vt[from].t[i];
        uint32_t *c = R->tri + 3 * (size_t)t;
        if (R->tdead[t] || !rc_holds(c, from)) continue;
        if (rc_holds(c, to)) {
            R->tdead[t] = 1;
            continue;
        }
        for (int q = 0; q < 3; q++)
            if (c[q] == from) c[q] = to;
        rc_push(&R->vt[to], t);
    }
    R->vdead[from] = 1;
}

static uint64_t rc_priority(uint32_t r)
{
    uint32_t h = r;
    h = (h ^ (h >> 16)) * 0x7feb352du;
    h = (h ^ (h >> 15)) * 0x846ca68bu;
    h ^= h >> 16;
    return ((uint64_t)h << 32) | r;
}

static int rc_cmp_prio(const void *p, const void *q)
{
    uint64_t a = rc_priority(*(const uint32_t *)p), b = rc_priority(*(const uint32_t *)q);
    return (a > b) - (a < b);
}

static uint32_t rc_find(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x)
        x = parent[x];
    return x;
}

/* The result of the rule on m (host) into out (host, owned); *legal_left:
 * same-cluster edges of the result whose collapse the test allows (0 when
 * the sweeps converged); *sweeps: sweeps with a collapse. */
static void ref_cleanup(const pm_mesh *m, const pm_mc_cleanup_options *o, pm_mesh *out,
                        size_t *legal_left, int *sweeps)
{
    const size_t nv = m->num_vertices, nt = m->num_triangles;
    int64_t *g = malloc(24 * nv + 24);
    uint32_t *parent = malloc(4 * nv + 4);
    uint8_t *snaps = calloc(nv + 1, 1);
    double cell = fmin(o->spacing[0], fmin(o->spacing[1], o->spacing[2]));
    int limit = o->use_snap_distance || o->snap_distance > 0;
    for (size_t v = 0; v < nv; v++) {
        const float *p = m->positions + 3 * v;
        int ok = 1;
        double d2 = 0;
        for (int a = 0; a < 3; a++) {
            double u = ((double)p[a] - o->origin[a]) / o->spacing[a];
            if (!(fabs(u) < 1125899906842624.0)) ok = 0;
        }
        for (int a = 0; a < 3; a++) {
            int64_t k = 0;
            if (ok) {
                double f = floor(((double)p[a] - o->origin[a]) / o->spacing[a]);
                double above = (double)p[a] - (o->origin[a] + f * o->spacing[a]);
                k = (int64_t)f + (above > 0.5 * o->spacing[a]);
            }
            g[3 * v + a] = k;
            double gp = o->origin[a] + (double)k * o->spacing[a];
            d2 += ((double)p[a] - gp) * ((double)p[a] - gp);
        }
        if (limit && !(d2 <= (o->snap_distance * cell) * (o->snap_distance * cell))) ok = 0;
        snaps[v] = (uint8_t)ok;
        parent[v] = (uint32_t)v;
    }
    for (size_t t = 0; t < nt; t++)
        for (int k = 0; k < 3; k++) {
            uint32_t u = m->indices[3 * t + k], w = m->indices[3 * t + (k + 1) % 3];
            if (!snaps[u] || !snaps[w] || memcmp(g + 3 * (size_t)u, g + 3 * (size_t)w, 24))
                continue;
            u = rc_find(parent, u);
            w = rc_find(parent, w);
            if (u < w) parent[w] = u;
            if (w < u) parent[u] = w;
        }
    /* members of each root (ascending), roots of clusters of 2 or more */
    uint32_t *root = malloc(4 * nv + 4), *count = calloc(nv + 1, 4), *start = calloc(nv + 2, 4);
    uint32_t *members = malloc(4 * nv + 4), *fill = calloc(nv + 1, 4), *roots = malloc(4 * nv + 4);
    for (size_t v = 0; v < nv; v++) {
        root[v] = snaps[v] ? rc_find(parent, (uint32_t)v) : UINT32_MAX;
        if (snaps[v]) count[root[v]]++;
    }
    for (size_t v = 0; v < nv; v++)
        start[v + 1] = start[v] + count[v];
    for (size_t v = 0; v < nv; v++)
        if (snaps[v]) members[start[root[v]] + fill[root[v]]++] = (uint32_t)v;
    size_t nr = 0;
    for (size_t v = 0; v < nv; v++)
        if (count[v] >= 2) roots[nr++] = (uint32_t)v;
    qsort(roots, nr, 4, rc_cmp_prio);

    rc_mesh R;
    R.nv = nv;
    R.nt = nt;
    R.tri = malloc(12 * nt + 12);
    memcpy(R.tri, m->indices, 12 * nt);
    R.tdead = calloc(nt + 1, 1);
    R.vdead = calloc(nv + 1, 1);
    R.vt = calloc(nv + 1, sizeof *R.vt);
    for (size_t t = 0; t < nt; t++)
        for (int k = 0; k < 3; k++)
            rc_push(&R.vt[m->indices[3 * t + k]], (uint32_t)t);
    uint32_t *into = malloc(4 * nv + 4); /* the live vertex each was merged into */
    for (size_t v = 0; v < nv; v++)
        into[v] = (uint32_t)v;
    int max_iter = o->max_iterations > 0 ? o->max_iterations : 5;
    *sweeps = 0;
    for (int it = 0; it < max_iter; it++) {
        size_t collapses = 0;
        for (size_t i = 0; i < nr; i++) {
            const uint32_t *M = members + start[roots[i]], k = count[roots[i]];
            uint32_t live = 0;
            for (uint32_t j = 0; j < k; j++)
                live += !R.vdead[M[j]];
            if (live < 2) continue;
            for (uint32_t a = 0; a < k; a++) {
                if (R.vdead[M[a]]) continue;
                for (uint32_t b = 0; b < k; b++) {
                    if (b == a || R.vdead[M[b]] || !rc_legal(&R, M[b], M[a])) continue;
                    rc_collapse(&R, M[b], M[a]);
                    for (uint32_t j = 0; j < k; j++)
                        if (into[M[j]] == M[b]) into[M[j]] = M[a];
                    collapses++;
                }
            }
        }
        if (!collapses) break;
        ++*sweeps;
    }
    /* same-cluster edges whose collapse is still legal */
    *legal_left = 0;
    for (size_t t = 0; t < nt; t++) {
        if (R.tdead[t]) continue;
        for (int k = 0; k < 3; k++) {
            uint32_t u = R.tri[3 * t + k], w = R.tri[3 * t + (k + 1) % 3];
            if (root[u] != UINT32_MAX && root[u] == root[w] &&
                (rc_legal(&R, u, w) || rc_legal(&R, w, u)))
                ++*legal_left;
        }
    }
    /* the result */
    uint32_t *map = malloc(4 * nv + 4);
    size_t nv2 = 0, nt2 = 0;
    for (size_t v = 0; v < nv; v++)
        map[v] = (o->keep_vertices || !R.vdead[v]) ? (uint32_t)nv2++ : UINT32_MAX;
    memset(out, 0, sizeof *out);
    out->positions = malloc(12 * nv2 + 12);
    out->indices = malloc(12 * nt + 12);
    out->owns_arrays = 1;
    for (size_t v = 0; v < nv; v++) {
        if (map[v] == UINT32_MAX) continue;
        float *q = out->positions + 3 * (size_t)map[v];
        memcpy(q, m->positions + 3 * v, 12);
        if (R.vdead[v]) continue;
        double s[3] = {0, 0, 0};
        uint32_t n = 0;
        const uint32_t self = (uint32_t)v;
        const uint32_t *M = root[v] == UINT32_MAX ? &self : members + start[root[v]];
        const uint32_t k = root[v] == UINT32_MAX ? 1 : count[root[v]];
        for (uint32_t j = 0; j < k; j++) {
            if (into[M[j]] != v) continue;
            for (int a = 0; a < 3; a++)
                s[a] += (double)m->positions[3 * (size_t)M[j] + a];
            n++;
        }
        for (int a = 0; a < 3; a++)
            q[a] = (float)(s[a] / (double)n);
    }
    for (size_t t = 0; t < nt; t++) {
        if (R.tdead[t]) continue;
        for (int k = 0; k < 3; k++)
            out->indices[3 * nt2 + k] = map[R.tri[3 * t + k]];
        nt2++;
    }
    out->num_vertices = nv2;
    out->num_triangles = nt2;
    for (size_t v = 0; v < nv; v++)
        free(R.vt[v].t);
    free(R.vt), free(R.tri), free(R.tdead), free(R.vdead), free(into), free(map);
    free(g), free(parent), free(snaps), free(root), free(count), free(start), free(members);
    free(fill), free(roots);
}

static void test_cleanup(const pm_mesh *m0, const pm_mc_cleanup_options *lat)
{
    pm_mesh m = copy(m0);
    pm_mesh_report r0 = analyze(m0);
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &m, lat));
    pm_mesh_report r1 = analyze(&m);
    PMT_CHECK(r1.closed && r1.manifold && r1.oriented, "cleanup: closed %d manifold %d oriented %d",
              r1.closed, r1.manifold, r1.oriented);
    PMT_CHECK(r1.euler == r0.euler && r1.components == r0.components,
              "cleanup changed the topology (euler %lld -> %lld)", r0.euler, r1.euler);
    PMT_CHECK(m.num_triangles < 0.8 * m0->num_triangles &&
                  m.num_triangles > 0.3 * m0->num_triangles,
              "cleanup: %zu -> %zu triangles", m0->num_triangles, m.num_triangles);
    PMT_CHECK(m.num_vertices == r1.num_vertices, "cleanup left unused vertices");
    PMT_CHECK(fabs(r1.volume - r0.volume) < 0.02 * fabs(r0.volume), "cleanup volume %g -> %g",
              r0.volume, r1.volume);
    /* keep_vertices: same triangles count, vertices kept */
    pm_mesh k = copy(m0);
    pm_mc_cleanup_options o = *lat;
    o.keep_vertices = 1;
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &k, &o));
    PMT_CHECK(k.num_vertices == m0->num_vertices && k.num_triangles == m.num_triangles,
              "keep_vertices: %zu vertices %zu triangles (want %zu, %zu)", k.num_vertices,
              k.num_triangles, m0->num_vertices, m.num_triangles);
    /* a snap distance limit of 0 snaps (almost) nothing, 0.5 less than no limit */
    pm_mesh z = copy(m0), h = copy(m0);
    o = *lat;
    o.use_snap_distance = 1;
    o.snap_distance = 0;
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &z, &o));
    o.snap_distance = 0.2;
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &h, &o));
    PMT_CHECK(z.num_triangles >= h.num_triangles && h.num_triangles >= m.num_triangles &&
                  z.num_triangles > 0.95 * m0->num_triangles,
              "snap distance: 0 -> %zu, 0.2 -> %zu, none -> %zu triangles", z.num_triangles,
              h.num_triangles, m.num_triangles);
    PMT_CHECK(closed_manifold(&h), "cleanup with a snap limit broke the topology");
    drop(&m), drop(&k), drop(&z), drop(&h);
}

/* A flat surface across axis `ax` with one or two lattice points poking
 * through (bump) or dented in: every barnacle configuration, all six
 * orientations; after the decimation the triangles are the flat surface's. */
static void test_barnacles(void)
{
    enum { N = 10 };
    static float f[N * N * N];
    int done = 0;
    for (int two = 0; two < 2; two++)
        for (int dent = 0; dent < 2; dent++)
            for (int ax = 0; ax < 3; ax++)
                for (int sg = -1; sg <= 1; sg += 2) {
                    for (int k = 0; k < N; k++)
                        for (int j = 0; j < N; j++)
                            for (int i = 0; i < N; i++) {
                                int c[3] = {i, j, k};
                                double h = (c[ax] - 4.5) * sg;
                                f[i + N * (j + N * k)] = (float)(-h);
                            }
                    pm_volume v;
                    memset(&v, 0, sizeof v);
                    v.data = f;
                    v.type = PM_SAMPLE_F32;
                    v.nx = v.ny = v.nz = N;
                    pm_isosurface_options o;
                    memset(&o, 0, sizeof o);
                    o.struct_size = sizeof o;
                    o.normals = PM_NORMALS_NONE;
                    pm_mesh flat;
                    PMT_OK(pm_isosurface(g_ctx, &v, 0.0, &o, &flat));
                    int p[3] = {4, 4, 4};
                    p[ax] = dent ? (sg > 0 ? 4 : 5) : (sg > 0 ? 5 : 4);
                    f[p[0] + N * (p[1] + N * p[2])] = dent ? -0.5f : 0.5f;
                    if (two) {
                        p[(ax + 1) % 3]++;
                        f[p[0] + N * (p[1] + N * p[2])] = dent ? -0.5f : 0.5f;
                    }
                    pm_mesh m;
                    PMT_OK(pm_isosurface(g_ctx, &v, 0.0, &o, &m));
                    pm_mesh c = copy(&m);
                    pm_mc_cleanup_options lat;
                    memset(&lat, 0, sizeof lat);
                    lat.struct_size = sizeof lat;
                    lat.spacing[0] = lat.spacing[1] = lat.spacing[2] = 1;
                    PMT_OK(pm_mesh_decimate_barnacles(g_ctx, &c, &lat));
                    pm_mesh_report r = analyze(&c), rf = analyze(&flat);
                    PMT_CHECK(c.num_triangles == flat.num_triangles && r.manifold && r.oriented &&
                                  r.boundary_edges == rf.boundary_edges,
                              "%s %s across axis %d (%+d): %zu -> %zu triangles, flat %zu",
                              two ? "double" : "single", dent ? "dent" : "bump", ax, sg,
                              m.num_triangles, c.num_triangles, flat.num_triangles);
                    done += m.num_triangles > flat.num_triangles;
                    drop(&c);
                    pm_mesh_free(g_ctx, &m);
                    pm_mesh_free(g_ctx, &flat);
                }
    PMT_CHECK(done == 24, "%d of 24 configurations had a barnacle to remove", done);
}

static void test_components(double r)
{
    /* three balls far apart: 5, 3 and 2 lattice radii */
    size_t n1, n2, n3;
    float *a = ball(0, 0, 0, 5, r, &n1), *b = ball(2, 0, 0, 3, r, &n2),
          *c = ball(0, 2, 0, 2, r, &n3);
    size_t n = n1 + n2 + n3;
    float *xyz = malloc(12 * n);
    memcpy(xyz, a, 12 * n1);
    memcpy(xyz + 3 * n1, b, 12 * n2);
    memcpy(xyz + 3 * (n1 + n2), c, 12 * n3);
    pm_field_params p = params(r, 0.5);
    pm_mesh m0 = reconstruct(xyz, n, &p, NULL);
    pm_mesh_report r0 = analyze(&m0);
    PMT_CHECK(r0.components == 3, "three balls: %zu components", r0.components);
    /* the triangles of the smallest and the largest ball */
    pm_mesh ms = reconstruct(c, n3, &p, NULL), ml = reconstruct(a, n1, &p, NULL);
    size_t removed = 9;
    pm_mesh m = copy(&m0);
    PMT_OK(pm_mesh_remove_components(g_ctx, &m, ms.num_triangles + 1, 0, &removed));
    pm_mesh_report r1 = analyze(&m);
    PMT_CHECK(removed == 1 && r1.components == 2 &&
                  m.num_triangles == m0.num_triangles - ms.num_triangles &&
                  m.num_vertices == r1.num_vertices,
              "below %zu: removed %zu, %zu components, %zu triangles", ms.num_triangles + 1,
              removed, r1.components, m.num_triangles);
    drop(&m);
    m = copy(&m0);
    PMT_OK(pm_mesh_remove_components(g_ctx, &m, 0, 1, &removed));
    r1 = analyze(&m);
    PMT_CHECK(removed == 2 && r1.components == 1 && m.num_triangles == ml.num_triangles &&
                  r1.closed,
              "largest: removed %zu, %zu components, %zu triangles (want %zu)", removed,
              r1.components, m.num_triangles, ml.num_triangles);
    drop(&m);
    pm_mesh_free(g_ctx, &m0), pm_mesh_free(g_ctx, &ms), pm_mesh_free(g_ctx, &ml);
    free(a), free(b), free(c), free(xyz);
}

static void test_simplify(const pm_mesh *m0)
{
    pm_mesh m = copy(m0);
    size_t target = m0->num_triangles / 4;
    double err = -1;
    pm_status s = pm_mesh_simplify(g_ctx, &m, target, 0, &err);
    if (s == PM_STATUS_UNSUPPORTED) {
        printf("pm_mesh_simplify: no meshoptimizer in this build (skipped)\n");
        drop(&m);
        return;
    }
    PMT_OK(s);
    pm_mesh_report r = analyze(&m);
    PMT_CHECK(m.num_triangles <= target && m.num_triangles > target / 2,
              "simplify to %zu: got %zu triangles", target, m.num_triangles);
    PMT_CHECK(m.num_vertices == r.num_vertices, "simplify left unused vertices");
    PMT_CHECK(r.closed && r.manifold,
              "simplify: closed %d manifold %d (%zu boundary, %zu non-manifold edges, %zu "
              "non-manifold vertices, %zu degenerate)",
              r.closed, r.manifold, r.boundary_edges, r.nonmanifold_edges, r.nonmanifold_vertices,
              r.degenerate_triangles);
    PMT_CHECK(fabs(r.volume - analyze(m0).volume) < 0.05 * fabs(analyze(m0).volume),
              "simplify volume %g -> %g", analyze(m0).volume, r.volume);
    PMT_CHECK(err >= 0 && err < 0.05, "simplify error %g", err);
    drop(&m);
    /* an error bound alone */
    m = copy(m0);
    PMT_OK(pm_mesh_simplify(g_ctx, &m, 0, 1e-3, &err));
    PMT_CHECK(m.num_triangles < m0->num_triangles && err <= 1e-3,
              "error bound 1e-3: %zu -> %zu, "
              "error %g",
              m0->num_triangles, m.num_triangles, err);
    drop(&m);
}

static void test_clip(const pm_mesh *m0)
{
    pm_mesh_report r0 = analyze(m0);
    double mn[3], mx[3];
    for (int a = 0; a < 3; a++) {
        mn[a] = r0.bbox_min[a] - 1;
        mx[a] = 0.5 * (r0.bbox_min[a] + r0.bbox_max[a]);
    }
    pm_mesh m = copy(m0);
    uint32_t *map = malloc(4 * m0->num_vertices);
    PMT_OK(pm_mesh_clip_aabb(g_ctx, &m, mn, mx, 0, 0, map));
    size_t inside = 0, outside = 0;
    for (size_t t = 0; t < m.num_triangles; t++) {
        int in = 0;
        for (int k = 0; k < 3; k++) {
            const float *p = m.positions + 3 * m.indices[3 * t + k];
            in |= p[0] >= mn[0] && p[0] < mx[0] && p[1] >= mn[1] && p[1] < mx[1] && p[2] >= mn[2] &&
                  p[2] < mx[2];
        }
        inside += in;
    }
    for (size_t t = 0; t < m0->num_triangles; t++) {
        int in = 0;
        for (int k = 0; k < 3; k++) {
            const float *p = m0->positions + 3 * m0->indices[3 * t + k];
            in |= p[0] >= mn[0] && p[0] < mx[0] && p[1] >= mn[1] && p[1] < mx[1] && p[2] >= mn[2] &&
                  p[2] < mx[2];
        }
        outside += !in;
    }
    PMT_CHECK(inside == m.num_triangles && m.num_triangles + outside == m0->num_triangles &&
                  m.num_triangles > 0,
              "clip: %zu kept, %zu inside, %zu outside of %zu", m.num_triangles, inside, outside,
              m0->num_triangles);
    size_t mapped = 0;
    int map_ok = 1;
    for (size_t v = 0; v < m0->num_vertices; v++)
        if (map[v] != UINT32_MAX) {
            mapped++;
            map_ok &= map[v] < m.num_vertices &&
                      !memcmp(m.positions + 3 * map[v], m0->positions + 3 * v, 12);
        }
    PMT_CHECK(map_ok && mapped == m.num_vertices && analyze(&m).num_vertices == m.num_vertices,
              "clip: vertex map");
    drop(&m);
    m = copy(m0);
    PMT_OK(pm_mesh_clip_aabb(g_ctx, &m, mn, mx, 1, 0, NULL));
    int clamped = 1;
    for (size_t v = 0; v < m.num_vertices; v++)
        for (int a = 0; a < 3; a++)
            clamped &=
                m.positions[3 * v + a] >= (float)mn[a] && m.positions[3 * v + a] <= (float)mx[a];
    PMT_CHECK(clamped, "clip: a vertex outside the box after clamping");
    drop(&m);
    free(map);
}

static void test_quads(const pm_mesh *m0)
{
    pm_quads q;
    PMT_OK(pm_mesh_to_quads(g_ctx, m0, 0, 0, 0, &q));
    PMT_CHECK(q.num_triangles + 2 * q.num_quads == m0->num_triangles && q.num_quads > 0,
              "quads: %zu triangles + %zu quads from %zu", q.num_triangles, q.num_quads,
              m0->num_triangles);
    /* every quad is two input triangles sharing an edge, in their orientation */
    int ok = 1;
    for (size_t k = 0; k < q.num_quads && ok; k++) {
        const uint32_t *x = q.quads + 4 * k;
        int halves = 0;
        for (size_t t = 0; t < m0->num_triangles; t++) {
            const uint32_t *y = m0->indices + 3 * t;
            for (int s = 0; s < 4; s++) /* triangle (x[s], x[s+1], x[s+2]) rotated */
                for (int r = 0; r < 3; r++)
                    if (y[r] == x[s] && y[(r + 1) % 3] == x[(s + 1) % 4] &&
                        y[(r + 2) % 3] == x[(s + 2) % 4])
                        halves++;
        }
        ok = halves >= 2;
    }
    PMT_CHECK(ok, "a quad is not two oriented input triangles");
    pm_quads none;
    PMT_OK(pm_mesh_to_quads(g_ctx, m0, 1.0001, 0.001, 90.0001, &none));
    PMT_CHECK(none.num_quads < q.num_quads / 10, "strict thresholds still gave %zu quads of %zu",
              none.num_quads, q.num_quads);
    pm_quads_free(&q), pm_quads_free(&none);
}

static void test_check(const pm_mesh *m0)
{
    pm_mesh_check_report r;
    const unsigned all = PM_CHECK_CLOSED | PM_CHECK_MANIFOLD | PM_CHECK_ORIENTATION;
    PMT_OK(pm_mesh_check(m0, all, &r));
    PMT_CHECK(r.passed && !r.message[0], "a closed ball fails the check: %s", r.message);
    /* a hole */
    pm_mesh m = copy(m0);
    m.num_triangles--;
    PMT_OK(pm_mesh_check(&m, all, &r));
    PMT_CHECK(!r.passed && r.boundary_edges == 3 && strstr(r.message, "not closed"), "hole: %s",
              r.message);
    PMT_OK(pm_mesh_check(&m, PM_CHECK_MANIFOLD, &r));
    PMT_CHECK(r.passed, "a hole is not a manifold error: %s", r.message);
    drop(&m);
    /* a flipped triangle (number 5): named */
    m = copy(m0);
    uint32_t t = m.indices[15];
    m.indices[15] = m.indices[16];
    m.indices[16] = t;
    PMT_OK(pm_mesh_check(&m, PM_CHECK_ORIENTATION, &r));
    PMT_CHECK(!r.passed && r.misoriented_edges == 3 && strstr(r.message, "triangles") &&
                  strstr(r.message, " 5"),
              "flipped triangle: %s", r.message);
    drop(&m);
    /* a duplicated triangle: non-manifold edges */
    m = copy(m0);
    m.indices = realloc(m.indices, 12 * (m.num_triangles + 1));
    memcpy(m.indices + 3 * m.num_triangles, m.indices + 3 * 7, 12);
    m.num_triangles++;
    PMT_OK(pm_mesh_check(&m, PM_CHECK_MANIFOLD, &r));
    PMT_CHECK(!r.passed && r.nonmanifold_edges == 3 && strstr(r.message, "three or more"),
              "duplicate triangle: %s", r.message);
    drop(&m);
}

static void test_sph(const float *xyz, size_t n, const pm_field_params *p, const pm_mesh *m0)
{
    pm_sph_interpolator *ip;
    PMT_OK(pm_sph_interpolator_create(g_ctx, xyz, n, p, &ip));
    size_t nv = m0->num_vertices;
    float *nrm = malloc(12 * nv), *vals = malloc(12 * n), *out = malloc(12 * nv);
    PMT_OK(pm_sph_normals(g_ctx, ip, m0->positions, nv, nrm));
    /* the SPH normals agree with the area-weighted ones */
    pm_mesh m = copy(m0);
    PMT_OK(pm_mesh_compute_normals(g_ctx, &m));
    size_t agree = 0;
    for (size_t v = 0; v < nv; v++) {
        double d = 0;
        for (int k = 0; k < 3; k++)
            d += nrm[3 * v + k] * m.normals[3 * v + k];
        agree += d > 0.8;
    }
    PMT_CHECK(agree > 0.95 * nv, "SPH normals: %zu of %zu within 37 degrees of the mesh normals",
              agree, nv);
    /* a constant is interpolated exactly (first-order correction); a linear
     * field closely */
    for (size_t i = 0; i < n; i++) {
        vals[3 * i] = 2.5f;
        vals[3 * i + 1] = xyz[3 * i];
        vals[3 * i + 2] = -xyz[3 * i + 2];
    }
    PMT_OK(pm_sph_interpolate(g_ctx, ip, vals, 3, m0->positions, nv, out));
    double worst_c = 0, worst_l = 0;
    for (size_t v = 0; v < nv; v++) {
        worst_c = fmax(worst_c, fabs(out[3 * v] - 2.5));
        worst_l = fmax(worst_l, fabs(out[3 * v + 1] - m0->positions[3 * v]));
    }
    PMT_CHECK(worst_c < 1e-5, "constant attribute: error %g", worst_c);
    PMT_CHECK(worst_l < 4 * p->radius, "linear attribute: error %g (radius %g)", worst_l,
              p->radius);
    /* smoothing weights: in [0, 1], the raw count positive on the surface */
    float *w = malloc(4 * nv), *wnn = malloc(4 * nv);
    PMT_OK(pm_sph_smoothing_weights(g_ctx, ip, m0->positions, nv, 13.0, w, wnn));
    int range = 1;
    double mean = 0;
    for (size_t v = 0; v < nv; v++) {
        range &= w[v] >= 0 && w[v] <= 1 && wnn[v] > 0;
        mean += w[v] / (double)nv;
    }
    PMT_CHECK(range && mean > 0.05 && mean < 1, "smoothing weights: range %d, mean %g", range,
              mean);
    pm_sph_interpolator_destroy(ip);
    /* a lone particle far away: weight 0 at its surface */
    {
        float one[3] = {50, 50, 50};
        pm_sph_interpolator *ip1;
        PMT_OK(pm_sph_interpolator_create(g_ctx, one, 1, p, &ip1));
        float pt[3] = {50.0f + (float)p->radius, 50, 50}, w1, n1;
        PMT_OK(pm_sph_smoothing_weights(g_ctx, ip1, pt, 1, 13.0, &w1, &n1));
        PMT_CHECK(w1 == 0 && n1 == 0, "lone particle: weight %g count %g", w1, n1);
        pm_sph_interpolator_destroy(ip1);
    }
    drop(&m);
    free(nrm), free(vals), free(out), free(w), free(wnn);
}

/* Every function on 1 and 4 threads, and on a mesh in context memory:
 * the same bytes. */
static void run_all(pm_context *ctx, const pm_mesh *m0, const pm_mc_cleanup_options *lat,
                    int in_ctx, pm_mesh *out)
{
    pm_mesh m = copy(m0);
    if (in_ctx) {
        pm_mesh d = m;
        d.positions = pmt_to_ctx(ctx, m.positions, 12 * m.num_vertices);
        d.indices = pmt_to_ctx(ctx, m.indices, 12 * m.num_triangles);
        d.normals = NULL;
        d.in_context_memory = 1;
        d.owns_arrays = 1;
        drop(&m);
        m = d;
    }
    PMT_OK(pm_mesh_mc_cleanup(ctx, &m, lat));
    PMT_OK(pm_mesh_decimate_barnacles(ctx, &m, NULL));
    PMT_OK(pm_mesh_smooth_laplacian(ctx, &m, 4, 1.0, NULL));
    PMT_OK(pm_mesh_smooth_taubin(ctx, &m, 3, 0, 0));
    pm_status st = pm_mesh_simplify(ctx, &m, m.num_triangles * 3 / 4, 0, NULL);
    PMT_CHECK(st == PM_STATUS_OK || st == PM_STATUS_UNSUPPORTED, "simplify: %s", pm_last_error());
    PMT_OK(pm_mesh_remove_components(ctx, &m, 10, 0, NULL));
    PMT_OK(pm_mesh_compute_normals(ctx, &m));
    PMT_OK(pm_mesh_smooth_normals(ctx, &m, 3));
    const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 0.1};
    PMT_OK(pm_mesh_clip_aabb(ctx, &m, lo, hi, 1, 0, NULL));
    PMT_CHECK(m.in_context_memory == in_ctx, "the mesh left its memory");
    if (in_ctx) {
        pm_mesh h = m;
        h.positions = pmt_to_host(ctx, m.positions, 12 * m.num_vertices);
        h.indices = pmt_to_host(ctx, m.indices, 12 * m.num_triangles);
        h.normals = pmt_to_host(ctx, m.normals, 12 * m.num_vertices);
        h.in_context_memory = 0;
        h.owns_arrays = 1;
        pm_mesh_free(ctx, &m);
        m = h;
    }
    *out = m;
}

static void test_determinism(const pm_mesh *m0, const pm_mc_cleanup_options *lat, pm_device dev)
{
    pm_context *c1, *c4;
    pm_context_desc d1 = {sizeof d1, PM_DEVICE_CPU, 0, 1, NULL},
                    d4 = {sizeof d4, PM_DEVICE_CPU, 0, 4, NULL};
    PMT_OK(pm_context_create(&d1, &c1));
    PMT_OK(pm_context_create(&d4, &c4));
    pm_mesh a, b, c;
    run_all(c1, m0, lat, 0, &a);
    run_all(c4, m0, lat, 0, &b);
    PMT_CHECK(same(&a, &b), "1 and 4 threads differ");
    run_all(g_ctx, m0, lat, 1, &c);
    PMT_CHECK(same(&a, &c), "a mesh in %s context memory gives other bytes", pm_device_string(dev));
    /* quads, SPH normals, interpolation and weights: 1 and 4 threads */
    pm_quads q1, q4;
    PMT_OK(pm_mesh_to_quads(c1, &a, 0, 0, 0, &q1));
    PMT_OK(pm_mesh_to_quads(c4, &a, 0, 0, 0, &q4));
    PMT_CHECK(q1.num_quads == q4.num_quads && q1.num_triangles == q4.num_triangles &&
                  !memcmp(q1.quads, q4.quads, 16 * q1.num_quads) &&
                  !memcmp(q1.triangles, q4.triangles, 12 * q1.num_triangles),
              "quads: 1 and 4 threads differ");
    pm_quads_free(&q1), pm_quads_free(&q4);
    size_t np;
    float *xyz = ball(0.013, -0.021, 0.007, 7, 0.05, &np);
    pm_field_params p = params(0.05, 0.5);
    pm_sph_interpolator *i1, *i4;
    PMT_OK(pm_sph_interpolator_create(c1, xyz, np, &p, &i1));
    PMT_OK(pm_sph_interpolator_create(c4, xyz, np, &p, &i4));
    size_t nv = a.num_vertices;
    float *o1 = malloc(28 * nv + 4), *o4 = malloc(28 * nv + 4);
    PMT_OK(pm_sph_normals(c1, i1, a.positions, nv, o1));
    PMT_OK(pm_sph_normals(c4, i4, a.positions, nv, o4));
    PMT_OK(pm_sph_interpolate(c1, i1, xyz, 3, a.positions, nv, o1 + 3 * nv));
    PMT_OK(pm_sph_interpolate(c4, i4, xyz, 3, a.positions, nv, o4 + 3 * nv));
    PMT_OK(pm_sph_smoothing_weights(c1, i1, a.positions, nv, 0, o1 + 6 * nv, NULL));
    PMT_OK(pm_sph_smoothing_weights(c4, i4, a.positions, nv, 0, o4 + 6 * nv, NULL));
    PMT_CHECK(!memcmp(o1, o4, 28 * nv), "SPH interpolation: 1 and 4 threads differ");
    pm_sph_interpolator_destroy(i1), pm_sph_interpolator_destroy(i4);
    free(o1), free(o4), free(xyz);
    drop(&a), drop(&b), drop(&c);
    pm_context_destroy(c1);
    pm_context_destroy(c4);
}

/* A mesh in ctx's memory (device memory on a CUDA context), owning its
 * arrays; and a host copy of one. */
static pm_mesh to_ctx(pm_context *ctx, const pm_mesh *m)
{
    pm_mesh d = *m;
    d.positions = pmt_to_ctx(ctx, m->positions, 12 * m->num_vertices);
    d.indices = pmt_to_ctx(ctx, m->indices, 12 * m->num_triangles);
    d.normals = m->normals ? pmt_to_ctx(ctx, m->normals, 12 * m->num_vertices) : NULL;
    d.in_context_memory = 1;
    d.owns_arrays = 1;
    return d;
}

static pm_mesh to_host(pm_context *ctx, pm_mesh *d)
{
    pm_mesh h = *d;
    h.positions = pmt_to_host(ctx, d->positions, 12 * d->num_vertices);
    h.indices = pmt_to_host(ctx, d->indices, 12 * d->num_triangles);
    h.normals = d->normals ? pmt_to_host(ctx, d->normals, 12 * d->num_vertices) : NULL;
    h.in_context_memory = 0;
    h.owns_arrays = 1;
    return h;
}

/* The library's cleanup of m0 with options o, run on the test context
 * with a host mesh and with a mesh in context memory (the GPU runner when
 * run as "cuda") and on a 3-thread CPU context, against ref_cleanup: the
 * same bytes; the topology the input had kept; no legal collapse left
 * between vertices of one cluster when the sweeps converged. */
static void cleanup_vs_ref(const char *what, const pm_mesh *m0, const pm_mc_cleanup_options *o)
{
    pm_mesh ref;
    size_t left;
    int sweeps;
    ref_cleanup(m0, o, &ref, &left, &sweeps);
    pm_context *c3;
    pm_context_desc d3 = {sizeof d3, PM_DEVICE_CPU, 0, 3, NULL};
    PMT_OK(pm_context_create(&d3, &c3));
    pm_mesh h = copy(m0), t3 = copy(m0), d = to_ctx(g_ctx, m0);
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &h, o));
    PMT_OK(pm_mesh_mc_cleanup(c3, &t3, o));
    PMT_OK(pm_mesh_mc_cleanup(g_ctx, &d, o));
    pm_mesh back = to_host(g_ctx, &d);
    PMT_CHECK(same(&h, &ref),
              "%s: the cleanup and the sequential rule differ: %zu/%zu vertices, "
              "%zu/%zu triangles",
              what, h.num_vertices, ref.num_vertices, h.num_triangles, ref.num_triangles);
    PMT_CHECK(same(&t3, &ref), "%s: 3 threads differ from the sequential rule", what);
    PMT_CHECK(same(&back, &ref), "%s: a mesh in context memory differs from the sequential rule",
              what);
    const int max_iter = o->max_iterations > 0 ? o->max_iterations : 5;
    PMT_CHECK(sweeps == max_iter || left == 0,
              "%s: %zu edges inside clusters still collapse legally after %d sweeps", what, left,
              sweeps);
    pm_mesh_report r0 = analyze(m0), r1 = analyze(&h);
    PMT_CHECK(r1.manifold == r0.manifold && r1.oriented == r0.oriented && r1.closed == r0.closed &&
                  r1.boundary_edges == r0.boundary_edges && r1.euler == r0.euler &&
                  r1.components == r0.components && r1.degenerate_triangles == 0,
              "%s: topology changed: closed %d->%d manifold %d->%d oriented %d->%d boundary "
              "%zu->%zu euler %lld->%lld components %zu->%zu degenerate %zu",
              what, r0.closed, r1.closed, r0.manifold, r1.manifold, r0.oriented, r1.oriented,
              r0.boundary_edges, r1.boundary_edges, r0.euler, r1.euler, r0.components,
              r1.components, r1.degenerate_triangles);
    printf("cleanup %-26s %zu -> %zu triangles, %d sweep%s, %zu legal collapses left\n", what,
           m0->num_triangles, h.num_triangles, sweeps, sweeps == 1 ? "" : "s", left);
    drop(&h), drop(&t3), drop(&back), drop(&ref);
    pm_mesh_free(g_ctx, &d);
    pm_context_destroy(c3);
}

/* The cleanup's rule on marching-cubes meshes and on variants that give
 * other clusters and orders: renumbered vertices, coarser and shifted
 * lattices (larger clusters: illegal collapses, stars above the local
 * copies' size), an open mesh (boundary tests), snap limits, kept
 * vertices, one sweep; and invalid inputs refused. */
static void test_cleanup_rule(const pm_mesh *m0, const pm_mc_cleanup_options *lat, double r)
{
    pm_mc_cleanup_options o = *lat;
    cleanup_vs_ref("ball", m0, &o);
    o.use_snap_distance = 1;
    o.snap_distance = 0.2;
    cleanup_vs_ref("ball, snap 0.2", m0, &o);
    o = *lat;
    o.keep_vertices = 1;
    cleanup_vs_ref("ball, keep vertices", m0, &o);
    o = *lat;
    o.max_iterations = 1;
    cleanup_vs_ref("ball, 1 sweep", m0, &o);
    /* vertices renumbered at random */
    {
        const size_t nv = m0->num_vertices, nt = m0->num_triangles;
        uint32_t *perm = malloc(4 * nv);
        for (size_t v = 0; v < nv; v++)
            perm[v] = (uint32_t)v;
        for (size_t v = nv; v > 1; v--) {
            size_t j = (size_t)(pmt_rand() % v);
            uint32_t t = perm[v - 1];
            perm[v - 1] = perm[j];
            perm[j] = t;
        }
        pm_mesh p = copy(m0);
        for (size_t v = 0; v < nv; v++)
            memcpy(p.positions + 3 * (size_t)perm[v], m0->positions + 3 * v, 12);
        for (size_t k = 0; k < 3 * nt; k++)
            p.indices[k] = perm[m0->indices[k]];
        cleanup_vs_ref("ball, renumbered", &p, lat);
        drop(&p);
        free(perm);
    }
    /* a smaller ball on coarser, shifted lattices */
    {
        size_t n;
        float *xyz = ball(0.2, -0.1, 0.05, 4, r, &n);
        pm_field_params p = params(r, 0.5);
        pm_mc_cleanup_options l2;
        pm_mesh s = reconstruct(xyz, n, &p, &l2);
        pm_mesh sh = copy(&s);
        pm_mesh_free(g_ctx, &s);
        const double scale[3] = {1.0, 2.5, 3.7};
        for (int k = 0; k < 3; k++) {
            o = l2;
            for (int a = 0; a < 3; a++) {
                o.spacing[a] = l2.spacing[a] * scale[k];
                o.origin[a] = l2.origin[a] + (k ? pmt_uniform() : 0.0) * o.spacing[a];
            }
            char name[64];
            snprintf(name, sizeof name, "small ball, lattice x%.1f", scale[k]);
            cleanup_vs_ref(name, &sh, &o);
        }
        /* open: the half below a plane */
        pm_mesh half = copy(&sh);
        const double lo[3] = {-10, -10, -10}, hi[3] = {10, 10, 0.05};
        PMT_OK(pm_mesh_clip_aabb(g_ctx, &half, lo, hi, 0, 0, NULL));
        PMT_CHECK(analyze(&half).boundary_edges > 0, "the clipped ball has no boundary");
        cleanup_vs_ref("small ball, open", &half, &l2);
        o = l2;
        for (int a = 0; a < 3; a++)
            o.spacing[a] *= 2.5;
        cleanup_vs_ref("small ball, open, x2.5", &half, &o);
        drop(&half), drop(&sh);
        free(xyz);
    }
    /* invalid inputs: refused, the mesh unchanged */
    {
        float pos[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
        uint32_t rep[6] = {0, 1, 2, 0, 3, 3}, dup[6] = {0, 1, 2, 3, 0, 1};
        for (int k = 0; k < 2; k++) {
            pm_mesh bad;
            memset(&bad, 0, sizeof bad);
            bad.positions = pos;
            bad.indices = k ? dup : rep;
            bad.num_vertices = 4;
            bad.num_triangles = 2;
            pm_mesh c = copy(&bad);
            pm_status s = pm_mesh_mc_cleanup(g_ctx, &c, lat);
            const char *want = k ? "edge (0, 1) is used in the same direction by triangles 0 and 1"
                                 : "triangle 1 (0 3 3) repeats a vertex";
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), want),
                      "invalid input %d: %s: %s", k, pm_status_string(s), pm_last_error());
            PMT_CHECK(same(&c, &bad), "invalid input %d: the mesh changed", k);
            drop(&c);
            pm_mesh d = to_ctx(g_ctx, &bad);
            s = pm_mesh_mc_cleanup(g_ctx, &d, lat);
            PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), want),
                      "invalid input %d in context memory: %s: %s", k, pm_status_string(s),
                      pm_last_error());
            pm_mesh_free(g_ctx, &d);
        }
    }
}

enum {
    B_NORMALS,
    B_NEW_NORMALS,
    B_SMOOTH_NORMALS,
    B_LAPLACE_W,
    B_LAPLACE_HOST_W,
    B_LAPLACE,
    B_TAUBIN,
    B_CLIP,
    B_CLIP_KEEP,
    B_CLEANUP,
    B_BARNACLES,
    B_COMPONENTS,
    B_SIMPLIFY,
    B_STEPS
};
static const char *const b_names[B_STEPS] = {"vertex normals",
                                             "vertex normals (new array)",
                                             "normal smoothing",
                                             "weighted Laplacian",
                                             "weighted Laplacian (host weights)",
                                             "Laplacian",
                                             "Taubin",
                                             "AABB clip",
                                             "AABB clip (keep vertices)",
                                             "MC cleanup",
                                             "barnacles",
                                             "components",
                                             "decimation"};

/* One step on mesh m (in ctx's memory when in_ctx); map gets the clip's
 * vertex map. Returns the status. */
static pm_status b_step(pm_context *ctx, int step, pm_mesh *m, const pm_mc_cleanup_options *lat,
                        const float *w_host, const float *w_mem, uint32_t *map)
{
    const double lo[3] = {-1, -1, -1}, hi[3] = {1, 1, 0.02};
    switch (step) {
    case B_NORMALS: return pm_mesh_compute_normals(ctx, m);
    case B_NEW_NORMALS:
        if (m->normals) pm_free(m->in_context_memory ? ctx : NULL, m->normals);
        if (!m->in_context_memory) free(m->normals);
        m->normals = NULL;
        return pm_mesh_compute_normals(ctx, m);
    case B_SMOOTH_NORMALS: return pm_mesh_smooth_normals(ctx, m, 5);
    case B_LAPLACE_W: return pm_mesh_smooth_laplacian(ctx, m, 5, 1.0, w_mem);
    case B_LAPLACE_HOST_W: return pm_mesh_smooth_laplacian(ctx, m, 5, 0.7, w_host);
    case B_LAPLACE: return pm_mesh_smooth_laplacian(ctx, m, 4, 0.5, NULL);
    case B_TAUBIN: return pm_mesh_smooth_taubin(ctx, m, 4, 0, 0);
    case B_CLIP: return pm_mesh_clip_aabb(ctx, m, lo, hi, 1, 0, map);
    case B_CLIP_KEEP: return pm_mesh_clip_aabb(ctx, m, lo, hi, 1, 1, map);
    case B_CLEANUP: return pm_mesh_mc_cleanup(ctx, m, lat);
    case B_BARNACLES: return pm_mesh_decimate_barnacles(ctx, m, lat);
    case B_COMPONENTS: return pm_mesh_remove_components(ctx, m, 0, 1, NULL);
    case B_SIMPLIFY: return pm_mesh_simplify(ctx, m, m->num_triangles / 2, 0, NULL);
    }
    return PM_STATUS_INVALID_ARGUMENT;
}

/* Every function on a mesh in the test context's memory (device memory
 * when run as "cuda": the GPU runners for the data-parallel steps, host
 * copies for the sequential ones) against the same function on a host
 * mesh with a CPU context: the same bytes, step by step. Then the SPH
 * functions with the particles, points and outputs in host or context
 * memory, with and without an aabb filter. */
static void test_backends(const pm_mesh *m0, const pm_mc_cleanup_options *lat, const float *xyz,
                          size_t n, const pm_field_params *p, pm_device dev)
{
    pm_context *cpu;
    pm_context_desc d2 = {sizeof d2, PM_DEVICE_CPU, 0, 2, NULL};
    PMT_OK(pm_context_create(&d2, &cpu));
    const char *name = pm_device_string(dev);
    pm_mesh base = copy(m0);
    PMT_OK(pm_mesh_compute_normals(cpu, &base));
    const size_t nv = base.num_vertices;
    float *w = malloc(4 * nv);
    for (size_t v = 0; v < nv; v++)
        w[v] = (float)pmt_uniform();
    float *w_ctx = pmt_to_ctx(g_ctx, w, 4 * nv);
    uint32_t *map_h = malloc(4 * nv), *map_d = malloc(4 * nv);
    for (int step = 0; step < B_STEPS; step++) {
        pm_mesh h = copy(&base), d = to_ctx(g_ctx, &base);
        memset(map_h, 0xab, 4 * nv);
        memset(map_d, 0xcd, 4 * nv);
        pm_status sh = b_step(cpu, step, &h, lat, w, w, map_h);
        pm_status sd = b_step(g_ctx, step, &d, lat, w, w_ctx, map_d);
        if (step == B_SIMPLIFY && sh == PM_STATUS_UNSUPPORTED && sd == sh) {
            drop(&h);
            pm_mesh_free(g_ctx, &d);
            continue;
        }
        PMT_CHECK(sh == PM_STATUS_OK && sd == PM_STATUS_OK, "%s: %s / %s: %s", b_names[step],
                  pm_status_string(sh), pm_status_string(sd), pm_last_error());
        PMT_CHECK(d.in_context_memory && d.owns_arrays, "%s: the mesh left context memory",
                  b_names[step]);
        pm_mesh back = to_host(g_ctx, &d);
        PMT_CHECK(same(&h, &back),
                  "%s: CPU and %s (mesh in context memory) differ: %zu/%zu "
                  "vertices, %zu/%zu triangles",
                  b_names[step], name, h.num_vertices, back.num_vertices, h.num_triangles,
                  back.num_triangles);
        if (step == B_CLIP || step == B_CLIP_KEEP)
            PMT_CHECK(!memcmp(map_h, map_d, 4 * nv), "%s: vertex maps differ", b_names[step]);
        if (step != B_NORMALS && step != B_NEW_NORMALS && step != B_CLIP && step != B_CLIP_KEEP &&
            step != B_SMOOTH_NORMALS && step != B_COMPONENTS && step != B_BARNACLES)
            PMT_CHECK(h.num_vertices != nv || memcmp(h.positions, base.positions, 12 * nv),
                      "%s changed nothing", b_names[step]);
        drop(&h), drop(&back);
        pm_mesh_free(g_ctx, &d);
    }
    /* a mesh that does not own its arrays: they stay as they were */
    {
        pm_mesh d = to_ctx(g_ctx, &base);
        pm_mesh borrowed = d;
        borrowed.owns_arrays = 0;
        PMT_OK(pm_mesh_smooth_laplacian(g_ctx, &borrowed, 2, 1.0, NULL));
        PMT_CHECK(borrowed.owns_arrays && borrowed.positions != d.positions,
                  "a borrowed mesh was not copied");
        float *pos = pmt_to_host(g_ctx, d.positions, 12 * nv);
        PMT_CHECK(!memcmp(pos, base.positions, 12 * nv), "a borrowed mesh's arrays changed");
        free(pos);
        pm_mesh_free(g_ctx, &borrowed);
        pm_mesh_free(g_ctx, &d);
    }
    /* quads of a mesh in context memory */
    {
        pm_mesh d = to_ctx(g_ctx, &base);
        pm_quads qh, qd;
        PMT_OK(pm_mesh_to_quads(cpu, &base, 0, 0, 0, &qh));
        PMT_OK(pm_mesh_to_quads(g_ctx, &d, 0, 0, 0, &qd));
        PMT_CHECK(qh.num_quads == qd.num_quads && qh.num_triangles == qd.num_triangles &&
                      !memcmp(qh.quads, qd.quads, 16 * qh.num_quads) &&
                      !memcmp(qh.triangles, qd.triangles, 12 * qh.num_triangles),
                  "quads: CPU and %s differ", name);
        pm_quads_free(&qh), pm_quads_free(&qd);
        pm_mesh_free(g_ctx, &d);
    }
    /* SPH: the interpolator from host particles and from particles in
     * context memory; queries with host and context-memory arrays; with
     * and without an aabb that drops part of the particles */
    for (int box = 0; box < 2; box++) {
        pm_field_params q = *p;
        if (box) {
            q.use_aabb = 1;
            for (int a = 0; a < 3; a++) {
                q.aabb_min[a] = -1;
                q.aabb_max[a] = 1;
            }
            q.aabb_max[2] = 0.05;
        }
        pm_sph_interpolator *ic, *ig, *ig2;
        float *xyz_ctx = pmt_to_ctx(g_ctx, xyz, 12 * n);
        PMT_OK(pm_sph_interpolator_create(cpu, xyz, n, &q, &ic));
        PMT_OK(pm_sph_interpolator_create(g_ctx, xyz, n, &q, &ig));
        PMT_OK(pm_sph_interpolator_create(g_ctx, xyz_ctx, n, &q, &ig2));
        const size_t out_n = 3 * nv + 3 * nv + nv + nv; /* normals, interp, weights, wnn */
        float *oc = malloc(4 * out_n), *og = malloc(4 * out_n), *og2 = malloc(4 * out_n);
        float *vals = malloc(12 * n);
        for (size_t i = 0; i < n; i++) {
            vals[3 * i] = (float)i;
            vals[3 * i + 1] = xyz[3 * i + 1];
            vals[3 * i + 2] = 1.0f;
        }
        float *vals_ctx = pmt_to_ctx(g_ctx, vals, 12 * n);
        float *pts_ctx = pmt_to_ctx(g_ctx, base.positions, 12 * nv);
        float *out_ctx;
        PMT_OK(pm_alloc(g_ctx, 4 * out_n, (void **)&out_ctx));
        /* CPU */
        PMT_OK(pm_sph_normals(cpu, ic, base.positions, nv, oc));
        PMT_OK(pm_sph_interpolate(cpu, ic, vals, 3, base.positions, nv, oc + 3 * nv));
        PMT_OK(pm_sph_smoothing_weights(cpu, ic, base.positions, nv, 0, oc + 6 * nv, oc + 7 * nv));
        /* the test context, host arrays */
        PMT_OK(pm_sph_normals(g_ctx, ig, base.positions, nv, og));
        PMT_OK(pm_sph_interpolate(g_ctx, ig, vals, 3, base.positions, nv, og + 3 * nv));
        PMT_OK(
            pm_sph_smoothing_weights(g_ctx, ig, base.positions, nv, 0, og + 6 * nv, og + 7 * nv));
        /* the test context, context-memory arrays */
        PMT_OK(pm_sph_normals(g_ctx, ig2, pts_ctx, nv, out_ctx));
        PMT_OK(pm_sph_interpolate(g_ctx, ig2, vals_ctx, 3, pts_ctx, nv, out_ctx + 3 * nv));
        PMT_OK(pm_sph_smoothing_weights(g_ctx, ig2, pts_ctx, nv, 0, out_ctx + 6 * nv,
                                        out_ctx + 7 * nv));
        PMT_OK(pm_download(g_ctx, og2, out_ctx, 4 * out_n));
        static const char *const part[4] = {"SPH normals", "SPH interpolation", "smoothing weights",
                                            "weighted neighbour counts"};
        const size_t off[5] = {0, 3 * nv, 6 * nv, 7 * nv, 8 * nv};
        for (int k = 0; k < 4; k++) {
            PMT_CHECK(!memcmp(oc + off[k], og + off[k], 4 * (off[k + 1] - off[k])),
                      "%s%s: CPU and %s (host arrays) differ", part[k], box ? " (aabb)" : "", name);
            PMT_CHECK(!memcmp(oc + off[k], og2 + off[k], 4 * (off[k + 1] - off[k])),
                      "%s%s: CPU and %s (context memory) differ", part[k], box ? " (aabb)" : "",
                      name);
        }
        /* the interpolation is not trivial: the constant component is 1 near the surface */
        size_t ones = 0;
        for (size_t v = 0; v < nv; v++)
            ones += fabsf(oc[3 * nv + 3 * v + 2] - 1.0f) < 1e-5f;
        PMT_CHECK(ones > (box ? nv / 4 : nv * 9 / 10), "interpolated constant: %zu of %zu", ones,
                  nv);
        pm_sph_interpolator_destroy(ic), pm_sph_interpolator_destroy(ig);
        pm_sph_interpolator_destroy(ig2);
        pm_free(g_ctx, xyz_ctx), pm_free(g_ctx, vals_ctx), pm_free(g_ctx, pts_ctx);
        pm_free(g_ctx, out_ctx);
        free(oc), free(og), free(og2), free(vals);
    }
    pm_free(g_ctx, w_ctx);
    free(w), free(map_h), free(map_d);
    drop(&base);
    pm_context_destroy(cpu);
}

/* Writes quads and attributes and reads the files back. */
static void test_files(const pm_mesh *m0)
{
    char dir[] = "/tmp/pm_test_postprocess_XXXXXX";
    if (!mkdtemp(dir)) {
        PMT_CHECK(0, "mkdtemp");
        return;
    }
    pm_mesh m = copy(m0);
    PMT_OK(pm_mesh_compute_normals(g_ctx, &m));
    pm_quads q;
    PMT_OK(pm_mesh_to_quads(g_ctx, &m, 0, 0, 0, &q));
    float *s = malloc(4 * m.num_vertices);
    for (size_t v = 0; v < m.num_vertices; v++)
        s[v] = (float)v;
    pm_vertex_attribute at[2] = {{"index", 1, s}, {"velocity", 3, m.normals}};
    pm_mesh_extras x;
    memset(&x, 0, sizeof x);
    x.struct_size = sizeof x;
    x.quads = q.quads;
    x.num_quads = q.num_quads;
    x.attributes = at;
    x.num_attributes = 2;
    pm_mesh w = m;
    w.indices = q.triangles;
    w.num_triangles = q.num_triangles;
    const char *ext[] = {"vtk", "ply", "obj"};
    for (int e = 0; e < 3; e++) {
        char path[128];
        snprintf(path, sizeof path, "%s/m.%s", dir, ext[e]);
        pm_mesh_extras xe = x;
        if (e == 2) xe.num_attributes = 0;
        PMT_OK(pm_mesh_write_extras(path, &w, &xe, NULL));
        pm_mesh back;
        pm_status st = pm_mesh_read(path, 0, &back);
        PMT_CHECK(st == PM_STATUS_OK, "%s: read back: %s", path, pm_last_error());
        if (st != PM_STATUS_OK) continue;
        /* quads come back as two triangles each */
        PMT_CHECK(back.num_vertices == m.num_vertices && back.num_triangles == m.num_triangles &&
                      closed_manifold(&back),
                  "%s: %zu vertices %zu triangles", path, back.num_vertices, back.num_triangles);
        PMT_CHECK(!memcmp(back.positions, m.positions, 12 * m.num_vertices), "%s: positions", path);
        pm_mesh_free(NULL, &back);
        if (e == 0) {
            pm_point_attribute pa;
            PMT_OK(pm_points_read_attribute(path, "index", 0, &pa));
            PMT_CHECK(pa.components == 1 && pa.count == m.num_vertices &&
                          !memcmp(pa.values, s, 4 * m.num_vertices),
                      "%s: attribute 'index' read back", path);
            pm_point_attribute_free(&pa);
            PMT_OK(pm_points_read_attribute(path, "velocity", 0, &pa));
            PMT_CHECK(pa.components == 3 && !memcmp(pa.values, m.normals, 12 * m.num_vertices),
                      "%s: attribute 'velocity' read back", path);
            pm_point_attribute_free(&pa);
            PMT_CHECK(pm_points_read_attribute(path, "nope", 0, &pa) ==
                              PM_STATUS_INVALID_ARGUMENT &&
                          strstr(pm_last_error(), "velocity"),
                      "a missing attribute: %s", pm_last_error());
        }
        unlink(path);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/m.obj", dir);
    PMT_CHECK(pm_mesh_write_extras(path, &w, &x, NULL) == PM_STATUS_UNSUPPORTED,
              "OBJ took vertex attributes");
    /* a legacy ASCII particle file with FIELD data and SCALARS */
    snprintf(path, sizeof path, "%s/p.vtk", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "# vtk DataFile Version 3.0\nparticles\nASCII\nDATASET UNSTRUCTURED_GRID\n"
               "POINTS 3 float\n0 0 0 1 0 0 0 1 0\nCELLS 3 6\n1 0\n1 1\n1 2\nCELL_TYPES 3\n1 1 1\n"
               "POINT_DATA 3\nSCALARS id int 1\nLOOKUP_TABLE default\n7 8 9\n"
               "SCALARS pair float 2\nLOOKUP_TABLE default\n1 2 3 4 5 6\n"
               "FIELD FieldData 3\nmass 1 3 double\n1.5 2.5 3.5\nuv 2 3 float\n0 0 1 1 2 2\n"
               "velocity 3 3 float\n1 2 3 4 5 6 7 8 9\n");
    fclose(f);
    pm_point_attribute pa;
    PMT_OK(pm_points_read_attribute(path, "velocity", 0, &pa));
    PMT_CHECK(pa.count == 3 && pa.components == 3 && pa.values[4] == 5.0f, "FIELD velocity");
    pm_point_attribute_free(&pa);
    PMT_OK(pm_points_read_attribute(path, "id", 0, &pa));
    PMT_CHECK(pa.count == 3 && pa.components == 1 && pa.values[2] == 9.0f, "SCALARS id");
    pm_point_attribute_free(&pa);
    PMT_OK(pm_points_read_attribute(path, "mass", 0, &pa));
    PMT_CHECK(pa.count == 3 && pa.values[1] == 2.5f, "FIELD mass");
    pm_point_attribute_free(&pa);
    /* 2 components (SCALARS and FIELD): refused, naming the count */
    const char *two[] = {"pair", "uv"};
    for (int i = 0; i < 2; i++)
        PMT_CHECK(pm_points_read_attribute(path, two[i], 0, &pa) == PM_STATUS_UNSUPPORTED &&
                      strstr(pm_last_error(), "has 2 components"),
                  "attribute '%s' of 2 components: %s", two[i], pm_last_error());
    unlink(path);
    rmdir(dir);
    pm_quads_free(&q);
    free(s);
    drop(&m);
}

int main(int argc, char **argv)
{
    pm_device dev;
    if (!pmt_init(argc, argv, &g_ctx, &dev)) return PMT_SKIP;
    const double r = 0.05;
    size_t n;
    float *xyz = ball(0.013, -0.021, 0.007, 7, r, &n);
    pm_field_params p = params(r, 0.5);
    pm_mc_cleanup_options lat;
    pm_mesh m = reconstruct(xyz, n, &p, &lat);
    pm_mesh host = copy(&m);
    pm_mesh_free(g_ctx, &m);
    printf("ball: %zu particles, %zu vertices, %zu triangles\n", n, host.num_vertices,
           host.num_triangles);
    PMT_CHECK(closed_manifold(&host), "the test mesh is not a closed manifold");

    test_normals_and_smoothing(&host);
    test_cleanup(&host, &lat);
    test_cleanup_rule(&host, &lat, r);
    test_barnacles();
    test_components(r);
    test_simplify(&host);
    test_clip(&host);
    test_quads(&host);
    test_check(&host);
    test_sph(xyz, n, &p, &host);
    test_determinism(&host, &lat, dev);
    test_backends(&host, &lat, xyz, n, &p, dev);
    test_files(&host);

    drop(&host);
    free(xyz);
    pm_context_destroy(g_ctx);
    return pmt_finish("test_postprocess");
}
