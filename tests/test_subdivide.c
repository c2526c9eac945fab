/* pm_subdivide_loop against a serial reference of Loop's rules (uniform
 * levels; its own edge table, libm's cos, any summation order, so positions
 * compare within 1e-5 of the mesh size and indices exactly), its refusals,
 * adaptive results checked with pm_mesh_analyze (closed stays closed,
 * manifold, oriented), and bytes across thread counts and backends. */
#include <math.h>
#include <stddef.h>

#include "test_common.h"

typedef struct tmesh {
    size_t nv, nt;
    float *p;
    uint32_t *t;
} tmesh;

static void tm_free(tmesh *m)
{
    free(m->p);
    free(m->t);
    memset(m, 0, sizeof *m);
}

static tmesh tm_alloc(size_t nv, size_t nt)
{
    tmesh m = {nv, nt, calloc(3 * nv + 1, 4), calloc(3 * nt + 1, 4)};
    return m;
}

static pm_mesh tm_view(const tmesh *m)
{
    pm_mesh v;
    memset(&v, 0, sizeof v);
    v.num_vertices = m->nv;
    v.num_triangles = m->nt;
    v.positions = m->p;
    v.indices = m->t;
    return v;
}

static void tm_jitter(tmesh *m, double amp)
{
    for (size_t i = 0; i < 3 * m->nv; i++)
        m->p[i] += (float)(amp * (pmt_uniform() - 0.5));
}

static tmesh make_tetra(void)
{
    static const float p[] = {1, 1, 1, -1, -1, 1, -1, 1, -1, 1, -1, -1};
    static const uint32_t t[] = {0, 1, 2, 0, 3, 1, 0, 2, 3, 1, 3, 2};
    tmesh m = tm_alloc(4, 4);
    memcpy(m.p, p, sizeof p);
    memcpy(m.t, t, sizeof t);
    return m;
}

static tmesh make_icosahedron(void)
{
    const float g = 1.6180339887f;
    const float p[] = {-1, g,  0,  1, g, 0,  -1, -g, 0,  1, -g, 0, 0,  -1, g,  0,  1, g,
                       0,  -1, -g, 0, 1, -g, g,  0,  -1, g, 0,  1, -g, 0,  -1, -g, 0, 1};
    static const uint32_t t[] = {0, 11, 5,  0, 5,  1, 0, 1, 7, 0, 7,  10, 0, 10, 11, 1, 5, 9, 5, 11,
                                 4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3,  9,  4, 3,  4,  2, 3, 2, 6, 3,
                                 6, 8,  3,  8, 9,  4, 9, 5, 2, 4, 11, 6,  2, 10, 8,  6, 7, 9, 8, 1};
    tmesh m = tm_alloc(12, 20);
    memcpy(m.p, p, sizeof p);
    memcpy(m.t, t, sizeof t);
    return m;
}

/* A torus of nu x nv quads, each split in two (every valence 6). */
static tmesh make_torus(size_t nu, size_t nv)
{
    tmesh m = tm_alloc(nu * nv, 2 * nu * nv);
    for (size_t i = 0; i < nu; i++)
        for (size_t j = 0; j < nv; j++) {
            double u = 2 * M_PI * i / nu, v = 2 * M_PI * j / nv;
            float *q = m.p + 3 * (i * nv + j);
            q[0] = (float)((2 + cos(v)) * cos(u));
            q[1] = (float)((2 + cos(v)) * sin(u));
            q[2] = (float)sin(v);
            uint32_t a = (uint32_t)(i * nv + j), b = (uint32_t)(((i + 1) % nu) * nv + j);
            uint32_t c = (uint32_t)(((i + 1) % nu) * nv + (j + 1) % nv);
            uint32_t d = (uint32_t)(i * nv + (j + 1) % nv);
            uint32_t *t = m.t + 6 * (i * nv + j);
            t[0] = a, t[1] = b, t[2] = c, t[3] = a, t[4] = c, t[5] = d;
        }
    return m;
}

/* A Moebius strip of n quads, 2 rows of vertices: manifold with one
 * boundary loop, and not orientable (some twin pair is always
 * misoriented). */
static tmesh make_mobius(size_t n)
{
    tmesh m = tm_alloc(2 * n, 2 * n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 2; j++) {
            double u = 2 * M_PI * i / n, v = (double)j - 0.5;
            float *q = m.p + 3 * (2 * i + j);
            q[0] = (float)((1 + 0.5 * v * cos(u / 2)) * cos(u));
            q[1] = (float)((1 + 0.5 * v * cos(u / 2)) * sin(u));
            q[2] = (float)(0.5 * v * sin(u / 2));
        }
    for (size_t i = 0; i < n; i++) {
        /* the last quad joins the first column with its rows swapped */
        const size_t i1 = (i + 1) % n;
        const uint32_t a = (uint32_t)(2 * i), d = (uint32_t)(2 * i + 1);
        const uint32_t b = (uint32_t)(2 * i1 + (i1 ? 0 : 1)), c = (uint32_t)(2 * i1 + (i1 ? 1 : 0));
        uint32_t *t = m.t + 6 * i;
        t[0] = a, t[1] = b, t[2] = c, t[3] = a, t[4] = c, t[5] = d;
    }
    return m;
}

/* An open grid of nx x ny quads (boundary; corners of valence 2 and 3). */
static tmesh make_grid(size_t nx, size_t ny)
{
    tmesh m = tm_alloc((nx + 1) * (ny + 1), 2 * nx * ny);
    for (size_t j = 0; j <= ny; j++)
        for (size_t i = 0; i <= nx; i++) {
            float *q = m.p + 3 * (j * (nx + 1) + i);
            q[0] = (float)i;
            q[1] = (float)j;
            q[2] = (float)(0.3 * sin(0.7 * i) * cos(0.5 * j));
        }
    for (size_t j = 0; j < ny; j++)
        for (size_t i = 0; i < nx; i++) {
            uint32_t a = (uint32_t)(j * (nx + 1) + i), b = a + 1, d = a + (uint32_t)(nx + 1),
                     c = d + 1;
            uint32_t *t = m.t + 6 * (j * nx + i);
            t[0] = a, t[1] = b, t[2] = c, t[3] = a, t[4] = c, t[5] = d;
        }
    return m;
}

/* A closed bipyramid over a k-gon (poles of valence k), or with open = 1
 * only its upper fan (a disc whose centre has valence k). */
static tmesh make_bipyramid(unsigned k, int open)
{
    tmesh m = tm_alloc(k + 2, open ? k : 2 * k);
    for (unsigned i = 0; i < k; i++) {
        m.p[3 * i] = (float)cos(2 * M_PI * i / k);
        m.p[3 * i + 1] = (float)sin(2 * M_PI * i / k);
        m.p[3 * i + 2] = 0.1f * (float)(i % 3);
    }
    m.p[3 * k + 2] = 1.0f;
    m.p[3 * (k + 1) + 2] = -1.0f;
    for (unsigned i = 0; i < k; i++) {
        uint32_t *t = m.t + 3 * i;
        t[0] = i, t[1] = (i + 1) % k, t[2] = k;
        if (!open) {
            t = m.t + 3 * (k + i);
            t[0] = (i + 1) % k, t[1] = i, t[2] = k + 1;
        }
    }
    return m;
}

/* ---- the serial reference -------------------------------------------- */

typedef struct ref_edge {
    uint64_t key;
    uint32_t h;
} ref_edge;

static int ref_cmp(const void *x, const void *y)
{
    const ref_edge *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->h < b->h ? -1 : (a->h > b->h);
}

/* One uniform level: vertices first (moved), then one per edge numbered by
 * its first half-edge, triangles 4 per triangle. */
static tmesh ref_level(const tmesh *m)
{
    const size_t nh = 3 * m->nt;
    ref_edge *e = malloc((nh + 1) * sizeof *e);
    for (size_t h = 0; h < nh; h++) {
        uint32_t a = m->t[h], b = m->t[3 * (h / 3) + (h % 3 + 1) % 3];
        e[h].key = a < b ? ((uint64_t)a << 32 | b) : ((uint64_t)b << 32 | a);
        e[h].h = (uint32_t)h;
    }
    qsort(e, nh, sizeof *e, ref_cmp);
    uint32_t *first = malloc((nh + 1) * 4), *twin = malloc((nh + 1) * 4);
    for (size_t i = 0; i < nh;) {
        size_t j = i;
        while (j < nh && e[j].key == e[i].key)
            j++;
        for (size_t q = i; q < j; q++) {
            first[e[q].h] = e[i].h;
            twin[e[q].h] = j - i == 2 ? e[i + (q == i)].h : UINT32_MAX;
        }
        i = j;
    }
    uint32_t *id = malloc((nh + 1) * 4);
    size_t ne = 0;
    for (size_t h = 0; h < nh; h++)
        if (first[h] == h) id[h] = (uint32_t)ne++;
    for (size_t h = 0; h < nh; h++)
        id[h] = id[first[h]];
    tmesh o = tm_alloc(m->nv + ne, 4 * m->nt);
    /* even vertices: neighbour sums and boundary neighbours from the edges */
    double *sum = calloc(3 * m->nv + 1, sizeof *sum);
    uint32_t *val = calloc(m->nv + 1, 4), *nb = calloc(m->nv + 1, 4);
    uint32_t *bn = malloc(2 * (m->nv + 1) * 4);
    for (size_t h = 0; h < nh; h++) {
        if (first[h] != h) continue;
        uint32_t a = m->t[h], b = m->t[3 * (h / 3) + (h % 3 + 1) % 3];
        for (int i = 0; i < 3; i++) {
            sum[3 * a + i] += m->p[3 * b + i];
            sum[3 * b + i] += m->p[3 * a + i];
        }
        val[a]++, val[b]++;
        if (twin[h] == UINT32_MAX) {
            if (nb[a] < 2) bn[2 * a + nb[a]] = b;
            if (nb[b] < 2) bn[2 * b + nb[b]] = a;
            nb[a]++, nb[b]++;
        }
    }
    for (size_t v = 0; v < m->nv; v++) {
        const float *p = m->p + 3 * v;
        float *q = o.p + 3 * v;
        for (int i = 0; i < 3; i++)
            q[i] = p[i];
        if (val[v] == 0 || (nb[v] != 0 && nb[v] != 2)) continue;
        if (nb[v] == 2) {
            for (int i = 0; i < 3; i++)
                q[i] = (float)(0.75 * p[i] +
                               0.125 * (m->p[3 * bn[2 * v] + i] + m->p[3 * bn[2 * v + 1] + i]));
        } else {
            double n = val[v], b = 0.375 + 0.25 * cos(2 * M_PI / n), ew = (0.625 - b * b) / n;
            for (int i = 0; i < 3; i++)
                q[i] = (float)((1 - n * ew) * p[i] + ew * sum[3 * v + i]);
        }
    }
    for (size_t h = 0; h < nh; h++) {
        if (first[h] != h) continue;
        size_t t = h / 3, k = h % 3;
        uint32_t a = m->t[h], b = m->t[3 * t + (k + 1) % 3], c = m->t[3 * t + (k + 2) % 3];
        float *q = o.p + 3 * (m->nv + id[h]);
        for (int i = 0; i < 3; i++) {
            if (twin[h] == UINT32_MAX) {
                q[i] = (float)(0.5 * ((double)m->p[3 * a + i] + m->p[3 * b + i]));
            } else {
                uint32_t tw = twin[h], d = m->t[3 * (tw / 3) + (tw % 3 + 2) % 3];
                q[i] = (float)(0.375 * ((double)m->p[3 * a + i] + m->p[3 * b + i]) +
                               0.125 * ((double)m->p[3 * c + i] + m->p[3 * d + i]));
            }
        }
    }
    for (size_t t = 0; t < m->nt; t++) {
        const uint32_t *v = m->t + 3 * t;
        uint32_t m0 = (uint32_t)m->nv + id[3 * t], m1 = (uint32_t)m->nv + id[3 * t + 1],
                 m2 = (uint32_t)m->nv + id[3 * t + 2];
        uint32_t c[12] = {v[0], m0, m2, m0, v[1], m1, m2, m1, v[2], m0, m1, m2};
        memcpy(o.t + 12 * t, c, sizeof c);
    }
    free(e), free(first), free(twin), free(id), free(sum), free(val), free(nb), free(bn);
    return o;
}

static void ref_normals(const tmesh *m, float *out)
{
    double *s = calloc(3 * m->nv + 1, sizeof *s);
    for (size_t t = 0; t < m->nt; t++) {
        const float *a = m->p + 3 * m->t[3 * t], *b = m->p + 3 * m->t[3 * t + 1],
                    *c = m->p + 3 * m->t[3 * t + 2];
        double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
        double e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
        double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                       e1[0] * e2[1] - e1[1] * e2[0]};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 3; i++)
                s[3 * m->t[3 * t + k] + i] += n[i];
    }
    for (size_t v = 0; v < m->nv; v++) {
        double l =
            sqrt(s[3 * v] * s[3 * v] + s[3 * v + 1] * s[3 * v + 1] + s[3 * v + 2] * s[3 * v + 2]);
        for (int i = 0; i < 3; i++)
            out[3 * v + i] = l > 0 ? (float)(s[3 * v + i] / l) : 0.0f;
    }
    free(s);
}

/* ---- checks ---------------------------------------------------------- */

static pm_status run(pm_context *ctx, const tmesh *m, int levels, const pm_subdivide_options *o,
                     pm_mesh *out)
{
    pm_mesh in = tm_view(m);
    return pm_subdivide_loop(ctx, &in, levels, o, out);
}

static double extent(const tmesh *m)
{
    double e = 1e-30;
    for (size_t i = 0; i < 3 * m->nv; i++)
        e = fmax(e, fabs(m->p[i]));
    return e;
}

static void check_uniform(pm_context *ctx, const char *name, const tmesh *m, int maxlev)
{
    tmesh r = {0, 0, NULL, NULL}, cur = tm_alloc(m->nv, m->nt);
    memcpy(cur.p, m->p, 12 * m->nv);
    memcpy(cur.t, m->t, 12 * m->nt);
    for (int l = 1; l <= maxlev; l++) {
        r = ref_level(&cur);
        tm_free(&cur);
        cur = r;
        pm_mesh out;
        PMT_OK(run(ctx, m, l, NULL, &out));
        PMT_CHECK(out.num_vertices == r.nv && out.num_triangles == r.nt,
                  "%s level %d: %zu/%zu vertices/triangles, reference %zu/%zu", name, l,
                  out.num_vertices, out.num_triangles, r.nv, r.nt);
        if (out.num_vertices == r.nv && out.num_triangles == r.nt) {
            PMT_CHECK(memcmp(out.indices, r.t, 12 * r.nt) == 0, "%s level %d: indices differ", name,
                      l);
            double tol = 1e-5 * extent(m), worst = 0;
            size_t wi = 0;
            for (size_t i = 0; i < 3 * r.nv; i++)
                if (fabs(out.positions[i] - r.p[i]) > worst)
                    worst = fabs(out.positions[i] - r.p[i]), wi = i;
            PMT_CHECK(worst <= tol, "%s level %d: vertex %zu off by %g", name, l, wi / 3, worst);
            float *rn = malloc(12 * r.nv + 4);
            tmesh o2 = {r.nv, r.nt, out.positions, out.indices};
            ref_normals(&o2, rn);
            worst = 0;
            for (size_t i = 0; i < 3 * r.nv; i++)
                worst = fmax(worst, fabs(out.normals[i] - rn[i]));
            PMT_CHECK(worst < 1e-5, "%s level %d: normals off by %g", name, l, worst);
            free(rn);
        }
        pm_mesh_free(ctx, &out);
    }
    tm_free(&cur);
}

static int same_mesh(const pm_mesh *a, const pm_mesh *b)
{
    if (a->num_vertices != b->num_vertices || a->num_triangles != b->num_triangles) return 0;
    if (memcmp(a->positions, b->positions, 12 * a->num_vertices)) return 0;
    if (memcmp(a->indices, b->indices, 12 * a->num_triangles)) return 0;
    if (!a->normals != !b->normals) return 0;
    return !a->normals || !memcmp(a->normals, b->normals, 12 * a->num_vertices);
}

static void check_refusals(pm_context *ctx)
{
    /* three triangles on edge (0, 1) */
    tmesh m = tm_alloc(5, 3);
    uint32_t t[] = {0, 1, 2, 1, 0, 3, 0, 1, 4};
    memcpy(m.t, t, sizeof t);
    pm_mesh out;
    pm_status s = run(ctx, &m, 1, NULL, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT &&
                  strstr(pm_last_error(), "non-manifold edge (0, 1)"),
              "non-manifold: %s %s", pm_status_string(s), pm_last_error());
    PMT_CHECK(out.num_vertices == 0 && !out.positions, "failed call leaves a mesh");
    m.t[8] = 5;
    s = run(ctx, &m, 1, NULL, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "triangle 2"),
              "index range: %s %s", pm_status_string(s), pm_last_error());
    m.t[8] = 1;
    s = run(ctx, &m, 1, NULL, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "repeats"),
              "repeated vertex: %s %s", pm_status_string(s), pm_last_error());
    pm_mesh soup = tm_view(&m);
    soup.indices = NULL;
    s = pm_subdivide_loop(ctx, &soup, 1, NULL, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "soup accepted");
    m.t[8] = 4;
    s = run(ctx, &m, PM_SUBDIVIDE_MAX_LEVELS + 1, NULL, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "too many levels accepted");
    pm_subdivide_options o = {0};
    o.max_angle_deg = 200;
    s = run(ctx, &m, 1, &o, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "angle 200 accepted");
    o.max_angle_deg = 0;
    o.max_deviation = -1;
    s = run(ctx, &m, 1, &o, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "max_deviation"),
              "max_deviation -1: %s %s", pm_status_string(s), pm_last_error());
    o.max_deviation = NAN;
    s = run(ctx, &m, 1, &o, &out);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "max_deviation NaN accepted");
    tm_free(&m);
}

/* Adaptive results: the closed input stays closed and manifold, open
 * input keeps a manifold boundary; fewer triangles than uniform. */
static void check_adaptive(pm_context *ctx, const char *name, const tmesh *m, int levels,
                           double max_edge, double max_angle, double max_dev, int closed)
{
    pm_subdivide_options o = {0};
    pm_subdivide_report rep;
    o.max_edge = max_edge;
    o.max_angle_deg = max_angle;
    o.max_deviation = max_dev;
    o.report = &rep;
    pm_mesh out, uni;
    PMT_OK(run(ctx, m, levels, &o, &out));
    PMT_OK(run(ctx, m, levels, NULL, &uni));
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(&out, &r));
    PMT_CHECK(r.manifold && r.oriented && r.nonmanifold_edges == 0 && r.degenerate_triangles == 0,
              "%s adaptive: manifold %d oriented %d nm-edges %zu degenerate %zu", name, r.manifold,
              r.oriented, r.nonmanifold_edges, r.degenerate_triangles);
    PMT_CHECK(!closed || r.closed, "%s adaptive: not closed (%zu boundary edges)", name,
              r.boundary_edges);
    PMT_CHECK(r.num_vertices == out.num_vertices, "%s adaptive: %zu of %zu vertices used", name,
              r.num_vertices, out.num_vertices);
    PMT_CHECK(out.num_triangles < uni.num_triangles && out.num_triangles > m->nt,
              "%s adaptive: %zu triangles (input %zu, uniform %zu)", name, out.num_triangles, m->nt,
              uni.num_triangles);
    uint64_t tot = 0;
    for (int l = 0; l <= PM_SUBDIVIDE_MAX_LEVELS; l++)
        tot += rep.finished[l];
    PMT_CHECK(tot == out.num_triangles, "%s adaptive: report says %llu triangles", name,
              (unsigned long long)tot);
    if (!closed) {
        pm_mesh_report ri;
        pm_mesh in = tm_view(m);
        PMT_OK(pm_mesh_analyze(&in, &ri));
        PMT_CHECK(r.components == ri.components && r.euler == ri.euler,
                  "%s adaptive: topology changed (euler %lld vs %lld)", name, r.euler, ri.euler);
    }
    pm_mesh_free(ctx, &out);
    pm_mesh_free(ctx, &uni);
}

/* Every edge split (weights 1, no limit) is exactly uniform subdivision;
 * weights 0 freeze everything. */
static void check_adaptive_extremes(pm_context *ctx, const tmesh *m)
{
    float *w = malloc(4 * m->nv + 4);
    for (size_t i = 0; i < m->nv; i++)
        w[i] = 1.0f;
    pm_subdivide_options o = {0};
    o.vertex_weights = w;
    pm_mesh a, u;
    PMT_OK(run(ctx, m, 2, &o, &a));
    PMT_OK(run(ctx, m, 2, NULL, &u));
    PMT_CHECK(same_mesh(&a, &u), "all-split adaptive differs from uniform");
    pm_mesh_free(ctx, &a);
    /* a caller compiled before max_deviation: the field past struct_size is
     * not read, so this is uniform */
    pm_subdivide_options old = {0};
    old.struct_size = offsetof(pm_subdivide_options, max_deviation);
    old.max_deviation = 1e30;
    PMT_OK(run(ctx, m, 2, &old, &a));
    PMT_CHECK(same_mesh(&a, &u), "max_deviation past struct_size was read");
    pm_mesh_free(ctx, &a);
    for (size_t i = 0; i < m->nv; i++)
        w[i] = 0.0f;
    PMT_OK(run(ctx, m, 2, &o, &a));
    PMT_CHECK(a.num_triangles == m->nt && a.num_vertices == m->nv &&
                  !memcmp(a.positions, m->p, 12 * m->nv) && !memcmp(a.indices, m->t, 12 * m->nt),
              "weight 0 changed the mesh");
    pm_mesh_free(ctx, &a);
    pm_mesh_free(ctx, &u);
    free(w);
}

/* Red promotion a pass at a time, the host reading a word per pass: the
 * hook "levels" on CUDA (a GPU that cannot launch a cooperative grid). */
static int promote_by_passes;

/* Uniform subdivision has its own steps (src/core/subdivide.c: no split
 * flags, scans or corner lists of the output); an all-split adaptive run
 * takes the general ones. Both must give the same bytes at every level,
 * with and without normals, in host and in context memory. */
static void check_uniform_steps(pm_context *ctx, const char *name, const tmesh *m, int maxlev)
{
    float *w = malloc(4 * m->nv + 4);
    for (size_t i = 0; i < m->nv; i++)
        w[i] = 1.0f;
    for (int l = 1; l <= maxlev; l++)
        for (int nrm = 0; nrm < 2; nrm++) {
            pm_subdivide_options g = {0}, u = {0};
            g.vertex_weights = w;
            g.normals = u.normals = nrm ? PM_NORMALS_DEFAULT : PM_NORMALS_NONE;
            pm_subdivide_report rg, ru;
            g.report = &rg;
            u.report = &ru;
            pm_mesh a, b;
            PMT_OK(run(ctx, m, l, &g, &a));
            PMT_OK(run(ctx, m, l, &u, &b));
            PMT_CHECK(same_mesh(&a, &b),
                      "%s level %d normals %d: uniform steps differ from the "
                      "general ones",
                      name, l, nrm);
            /* the counts; the host waits: 3 for the uniform steps (the
             * input's edge count and checks, the end), 2 and one per level
             * before the last for the general ones (the last stream goes
             * to the output unread; by passes, one pass per level that
             * splits: every edge splits, none is promoted) */
            PMT_CHECK(!memcmp(&rg, &ru, offsetof(pm_subdivide_report, host_waits)),
                      "%s level %d: reports differ", name, l);
            PMT_CHECK(ru.host_waits == 3 && rg.host_waits == 2 + l + (promote_by_passes ? l : 0),
                      "%s level %d: %d and %d host waits", name, l, ru.host_waits, rg.host_waits);
            /* input and output in context memory */
            pm_mesh in = tm_view(m), c;
            in.positions = pmt_to_ctx(ctx, m->p, 12 * m->nv);
            in.indices = pmt_to_ctx(ctx, m->t, 12 * m->nt);
            in.in_context_memory = 1;
            u.output_in_context_memory = 1;
            u.report = NULL;
            PMT_OK(pm_subdivide_loop(ctx, &in, l, &u, &c));
            if (c.num_vertices == b.num_vertices && c.num_triangles == b.num_triangles) {
                pm_mesh h = c;
                h.positions = pmt_to_host(ctx, c.positions, 12 * c.num_vertices);
                h.normals = c.normals ? pmt_to_host(ctx, c.normals, 12 * c.num_vertices) : NULL;
                h.indices = pmt_to_host(ctx, c.indices, 12 * c.num_triangles);
                PMT_CHECK(same_mesh(&h, &b), "%s level %d normals %d: context memory differs", name,
                          l, nrm);
                free(h.positions), free(h.normals), free(h.indices);
            } else {
                PMT_CHECK(0, "%s level %d: context memory counts", name, l);
            }
            pm_mesh_free(ctx, &c);
            pm_free(ctx, in.positions);
            pm_free(ctx, in.indices);
            pm_mesh_free(ctx, &a);
            pm_mesh_free(ctx, &b);
        }
    free(w);
}

/* Random meshes through the uniform and the general steps: a grid or a
 * torus with triangles removed (holes, pinched vertices where two fans
 * meet), some triangles reversed (misoriented pairs), the triangles
 * shuffled and the vertices renumbered, with unused vertices among them. */
static void check_random_meshes(pm_context *ctx, int count)
{
    for (int r = 0; r < count; r++) {
        const size_t nx = 2 + (size_t)(6 * pmt_uniform()), ny = 3 + (size_t)(5 * pmt_uniform());
        tmesh base = r % 2 ? make_torus(nx + 2, ny) : make_grid(nx, ny);
        const size_t extra = 3; /* unused vertices */
        tmesh m = tm_alloc(base.nv + extra, base.nt);
        uint32_t *perm = malloc(4 * (base.nv + extra));
        for (size_t v = 0; v < base.nv + extra; v++)
            perm[v] = (uint32_t)v;
        for (size_t v = base.nv + extra - 1; v > 0; v--) {
            size_t w = (size_t)(pmt_uniform() * (double)(v + 1));
            if (w > v) w = v;
            uint32_t x = perm[v];
            perm[v] = perm[w], perm[w] = x;
        }
        for (size_t v = 0; v < base.nv + extra; v++)
            for (int i = 0; i < 3; i++)
                m.p[3 * perm[v] + i] =
                    v < base.nv ? base.p[3 * v + i] : (float)(10 + v + i); /* unused */
        m.nt = 0;
        for (size_t f = 0; f < base.nt; f++) {
            if (pmt_uniform() < 0.12) continue; /* a hole */
            uint32_t *t = m.t + 3 * m.nt++;
            for (int k = 0; k < 3; k++)
                t[k] = perm[base.t[3 * f + k]];
            if (pmt_uniform() < 0.25) { /* reversed */
                uint32_t x = t[1];
                t[1] = t[2], t[2] = x;
            }
        }
        for (size_t f = m.nt; f > 1; f--) { /* shuffled */
            size_t g = (size_t)(pmt_uniform() * (double)f);
            if (g >= f) g = f - 1;
            for (int k = 0; k < 3; k++) {
                uint32_t x = m.t[3 * (f - 1) + k];
                m.t[3 * (f - 1) + k] = m.t[3 * g + k], m.t[3 * g + k] = x;
            }
        }
        tm_jitter(&m, 0.05);
        char name[48];
        snprintf(name, sizeof name, "random %s %d", r % 2 ? "torus" : "grid", r);
        if (m.nt) /* levels 4 and 5: NORMAL_OLD's walks in both parities */
            check_uniform_steps(ctx, name, &m, r < 4 ? 5 : 3);
        free(perm);
        tm_free(&m), tm_free(&base);
    }
}

/* ---- the first adaptive level, serially ------------------------------- */

static void face_normal(const tmesh *m, size_t t, double n[3])
{
    const float *a = m->p + 3 * m->t[3 * t], *b = m->p + 3 * m->t[3 * t + 1],
                *c = m->p + 3 * m->t[3 * t + 2];
    double e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    double e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
}

/* |d . n| / |n|, |d| when n vanishes */
static double along(const double d[3], const double n[3])
{
    double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (!(l > 0)) return sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    return fabs(d[0] * n[0] + d[1] * n[1] + d[2] * n[2]) / l;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* One adaptive level of a manifold mesh from its own edge table (as
 * ref_level): each edge's deviation (docs/subdivide.md: the odd vertex from
 * the midpoint along the two faces' normal, each end's even move along its
 * fan's normal, the largest); the split set from the weights (w > 0) and,
 * with `quantile` in (0, 1), a max_deviation between two distinct edge
 * deviations near that quantile (no edge within 1e-6 of it); then red
 * promotion until no triangle has exactly two split edges (level 0 has no
 * frozen edge). pm_subdivide_loop with 1 level must make nv + |S|
 * vertices, and per triangle 1, 2 or 4 output triangles for 0, 1 or 3
 * split edges. */
static void check_first_level(pm_context *ctx, const char *name, const tmesh *m, const float *w,
                              double quantile)
{
    const size_t nh = 3 * m->nt;
    ref_edge *e = malloc((nh + 1) * sizeof *e);
    for (size_t h = 0; h < nh; h++) {
        uint32_t a = m->t[h], b = m->t[3 * (h / 3) + (h % 3 + 1) % 3];
        e[h].key = a < b ? ((uint64_t)a << 32 | b) : ((uint64_t)b << 32 | a);
        e[h].h = (uint32_t)h;
    }
    qsort(e, nh, sizeof *e, ref_cmp);
    uint32_t *eid = malloc((nh + 1) * 4), *twin = malloc((nh + 1) * 4);
    size_t ne = 0;
    for (size_t i = 0; i < nh; ne++) {
        size_t j = i;
        while (j < nh && e[j].key == e[i].key)
            j++;
        for (size_t q = i; q < j; q++) {
            eid[e[q].h] = (uint32_t)ne;
            twin[e[q].h] = j - i == 2 ? e[i + (q == i)].h : UINT32_MAX;
        }
        i = j;
    }
    /* vertices: neighbour sums, valences, boundary neighbours, fan normals */
    double *sum = calloc(3 * m->nv + 1, sizeof *sum), *vn = calloc(3 * m->nv + 1, sizeof *vn);
    uint32_t *val = calloc(m->nv + 1, 4), *nb = calloc(m->nv + 1, 4);
    uint32_t *bn = malloc(2 * (m->nv + 1) * 4);
    for (size_t h = 0; h < nh; h++) {
        uint32_t a = m->t[h], b = m->t[3 * (h / 3) + (h % 3 + 1) % 3];
        double fn[3];
        face_normal(m, h / 3, fn);
        for (int i = 0; i < 3; i++)
            vn[3 * a + i] += fn[i];
        if (twin[h] != UINT32_MAX && twin[h] < h) continue;
        for (int i = 0; i < 3; i++) {
            sum[3 * a + i] += m->p[3 * b + i];
            sum[3 * b + i] += m->p[3 * a + i];
        }
        val[a]++, val[b]++;
        if (twin[h] == UINT32_MAX) {
            if (nb[a] < 2) bn[2 * a + nb[a]] = b;
            if (nb[b] < 2) bn[2 * b + nb[b]] = a;
            nb[a]++, nb[b]++;
        }
    }
    double *ev = calloc(m->nv + 1, sizeof *ev), *dev = calloc(ne + 1, sizeof *dev);
    for (size_t v = 0; v < m->nv; v++) {
        double d[3];
        if (val[v] == 0) continue;
        if (nb[v] == 2) {
            for (int i = 0; i < 3; i++)
                d[i] = (m->p[3 * bn[2 * v] + i] + m->p[3 * bn[2 * v + 1] + i] -
                        2.0 * m->p[3 * v + i]) /
                       8;
        } else {
            double n = val[v], b = 0.375 + 0.25 * cos(2 * M_PI / n), beta = (0.625 - b * b) / n;
            for (int i = 0; i < 3; i++)
                d[i] = beta * (sum[3 * v + i] - n * m->p[3 * v + i]);
        }
        ev[v] = along(d, vn + 3 * v);
    }
    for (size_t h = 0; h < nh; h++) {
        uint32_t a = m->t[h], b = m->t[3 * (h / 3) + (h % 3 + 1) % 3];
        double x = fmax(ev[a], ev[b]);
        if (twin[h] != UINT32_MAX) {
            uint32_t tw = twin[h], c = m->t[3 * (h / 3) + (h % 3 + 2) % 3],
                     d = m->t[3 * (tw / 3) + (tw % 3 + 2) % 3];
            double f1[3], f2[3], n[3], q[3];
            face_normal(m, h / 3, f1);
            face_normal(m, tw / 3, f2);
            for (int i = 0; i < 3; i++) {
                n[i] = f1[i] + f2[i];
                q[i] = (m->p[3 * c + i] + m->p[3 * d + i] - m->p[3 * a + i] - m->p[3 * b + i]) / 8;
            }
            x = fmax(x, along(q, n));
        }
        double we = w ? fmax(w[a], w[b]) : 1.0;
        dev[eid[h]] = we > 0 ? x * we : -1.0; /* -1: weight 0, never by the test */
    }
    double max_dev = 0;
    if (quantile > 0) {
        double *sorted = malloc((ne + 1) * sizeof *sorted);
        memcpy(sorted, dev, ne * sizeof *sorted);
        qsort(sorted, ne, sizeof *sorted, cmp_double);
        for (size_t i = (size_t)(quantile * (double)ne); i + 1 < ne && !max_dev; i++)
            if (sorted[i] > 0 && sorted[i + 1] > sorted[i] * (1 + 1e-5))
                max_dev = 0.5 * (sorted[i] + sorted[i + 1]);
        free(sorted);
        PMT_CHECK(max_dev > 0, "%s: no gap between edge deviations", name);
    }
    char *split = calloc(ne + 1, 1);
    size_t nsplit = 0;
    for (size_t k = 0; k < ne; k++) {
        split[k] = dev[k] >= 0 && (quantile > 0 ? dev[k] > max_dev : 1);
        nsplit += split[k];
    }
    for (int changed = 1; changed;) { /* red promotion */
        changed = 0;
        for (size_t t = 0; t < m->nt; t++) {
            uint32_t *q = eid + 3 * t;
            if (split[q[0]] + split[q[1]] + split[q[2]] != 2) continue;
            for (int k = 0; k < 3; k++)
                if (!split[q[k]]) split[q[k]] = 1, nsplit++, changed = 1;
        }
    }
    size_t want_t = 0;
    for (size_t t = 0; t < m->nt; t++) {
        int c = split[eid[3 * t]] + split[eid[3 * t + 1]] + split[eid[3 * t + 2]];
        want_t += c == 0 ? 1 : (c == 1 ? 2 : 4);
    }
    pm_subdivide_options o = {0};
    pm_subdivide_report rep;
    o.vertex_weights = w;
    o.max_deviation = max_dev;
    o.report = &rep;
    pm_mesh out;
    PMT_OK(run(ctx, m, 1, &o, &out));
    PMT_CHECK(out.num_vertices == m->nv + nsplit && out.num_triangles == want_t &&
                  rep.split_edges[0] == nsplit,
              "%s: %zu vertices, %zu triangles; reference %zu, %zu (%zu of %zu edges split, "
              "max_deviation %g)",
              name, out.num_vertices, out.num_triangles, m->nv + nsplit, want_t, nsplit, ne,
              max_dev);
    pm_mesh_report r;
    PMT_OK(pm_mesh_analyze(&out, &r));
    PMT_CHECK(r.manifold && r.oriented && r.nonmanifold_edges == 0, "%s: manifold %d oriented %d",
              name, r.manifold, r.oriented);
    pm_mesh_free(ctx, &out);
    free(e), free(eid), free(twin), free(sum), free(vn), free(val), free(nb), free(bn);
    free(ev), free(dev), free(split);
}

/* Weights (0, 1, 0) split a lone triangle's edges at vertex 1 only: the
 * 2-split triangle is promoted to red, which is uniform level 1. */
static void check_promotion(pm_context *ctx, const tmesh *one)
{
    const float w2[3] = {0, 1, 0};
    pm_subdivide_options o = {0};
    pm_mesh a, u;
    PMT_OK(run(ctx, one, 1, NULL, &u));
    o.vertex_weights = w2;
    PMT_OK(run(ctx, one, 1, &o, &a));
    PMT_CHECK(same_mesh(&a, &u),
              "triangle, weights 0 1 0: the 2-split triangle was not promoted "
              "(%zu triangles)",
              a.num_triangles);
    pm_mesh_free(ctx, &a);
    pm_mesh_free(ctx, &u);
}

/* The same bytes: 1 thread vs the default on the CPU, or CUDA vs CPU, with
 * the input and output in host or context memory. */
/* Levels of the adaptive runs in check_same_bytes by the even rule's path
 * (src/core/subdivide.c): fewer than 3/8 of the triangle count split
 * edges, so the vertices with a split edge were marked first, or not. */
static int levels_marked, levels_walked;

static void check_same_bytes(pm_context *ctx, pm_device dev, const tmesh *m, const char *name)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, dev == PM_DEVICE_CPU ? 1 : 0, NULL};
    pm_context *ref;
    PMT_OK(pm_context_create(&d, &ref));
    /* the input, read in place, is never written */
    float *p0 = malloc(12 * m->nv + 1);
    uint32_t *t0 = malloc(12 * m->nt + 1);
    memcpy(p0, m->p, 12 * m->nv);
    memcpy(t0, m->t, 12 * m->nt);
    pm_subdivide_options opts[4] = {{0}, {0}, {0}, {0}};
    opts[1].max_edge = 0.3 * extent(m);
    opts[2].max_angle_deg = 8;
    opts[2].max_edge = 0.5 * extent(m);
    opts[3].max_deviation = 1e-3 * extent(m);
    for (int L = 1; L <= 3; L += 2) /* one level: the output written by level 0 */
        for (int k = 0; k < 4; k++) {
            pm_mesh a, b;
            pm_subdivide_report rep;
            opts[k].report = k ? &rep : NULL;
            PMT_OK(run(ctx, m, L, &opts[k], &a));
            opts[k].report = NULL;
            int marked = 0, ran = 0;
            for (int l = 0; k && l < L; l++)
                ran += rep.stream[l] > 0;
            /* adaptive: 2 host waits and one per level before the last
             * that ran (the last stream, the level before's red children,
             * goes to the output without one), with more for the passes
             * of red promotion when it runs by passes */
            PMT_CHECK(
                !k || (promote_by_passes ? rep.host_waits > 2 + ran : rep.host_waits == 2 + ran),
                "%s option set %d, %d levels: %d host waits, %d levels ran", name, k, L,
                rep.host_waits, ran);
            for (int l = 0; k && l < L; l++)
                if (rep.split_edges[l]) {
                    if (8 * rep.split_edges[l] < 3 * rep.stream[l])
                        levels_marked++, marked = 1;
                    else
                        levels_walked++;
                }
            if (marked) { /* the same bytes when every fan is walked */
                const char *e = getenv("PYRAMESH_TEST_HOOKS");
                char saved[256], hooks[300];
                snprintf(saved, sizeof saved, "%s", e ? e : "");
                snprintf(hooks, sizeof hooks, "%s%swalkall", saved, *saved ? "," : "");
                setenv("PYRAMESH_TEST_HOOKS", hooks, 1);
                pm_mesh w;
                PMT_OK(run(ctx, m, L, &opts[k], &w));
                PMT_CHECK(same_mesh(&a, &w),
                          "%s option set %d, %d levels: marked and walked fans differ", name, k, L);
                pm_mesh_free(ctx, &w);
                if (e)
                    setenv("PYRAMESH_TEST_HOOKS", saved, 1);
                else
                    unsetenv("PYRAMESH_TEST_HOOKS");
            }
            PMT_OK(run(ref, m, L, &opts[k], &b));
            PMT_CHECK(same_mesh(&a, &b),
                      "%s option set %d, %d levels: bytes differ from the reference context", name,
                      k, L);
            /* input and output in context memory */
            pm_mesh in = tm_view(m), c;
            in.positions = pmt_to_ctx(ctx, m->p, 12 * m->nv);
            in.indices = pmt_to_ctx(ctx, m->t, 12 * m->nt);
            in.in_context_memory = 1;
            pm_subdivide_options oc = opts[k];
            oc.output_in_context_memory = 1;
            PMT_OK(pm_subdivide_loop(ctx, &in, L, &oc, &c));
            PMT_CHECK(c.in_context_memory && c.num_vertices == b.num_vertices &&
                          c.num_triangles == b.num_triangles,
                      "%s context memory, %d levels: counts", name, L);
            if (c.num_vertices == b.num_vertices && c.num_triangles == b.num_triangles) {
                pm_mesh h = c;
                h.positions = pmt_to_host(ctx, c.positions, 12 * c.num_vertices);
                h.normals = pmt_to_host(ctx, c.normals, 12 * c.num_vertices);
                h.indices = pmt_to_host(ctx, c.indices, 12 * c.num_triangles);
                PMT_CHECK(same_mesh(&h, &b), "%s context memory, %d levels: bytes differ", name, L);
                free(h.positions), free(h.normals), free(h.indices);
            }
            float *pi = pmt_to_host(ctx, in.positions, 12 * m->nv);
            uint32_t *ti = pmt_to_host(ctx, in.indices, 12 * m->nt);
            PMT_CHECK(!memcmp(pi, p0, 12 * m->nv) && !memcmp(ti, t0, 12 * m->nt),
                      "%s option set %d, %d levels: the input in context memory changed", name, k,
                      L);
            free(pi), free(ti);
            pm_mesh_free(ctx, &c);
            pm_free(ctx, in.positions);
            pm_free(ctx, in.indices);
            pm_mesh_free(ctx, &a);
            pm_mesh_free(ref, &b);
        }
    PMT_CHECK(!memcmp(m->p, p0, 12 * m->nv) && !memcmp(m->t, t0, 12 * m->nt),
              "%s: the input in host memory changed", name);
    free(p0), free(t0);
    pm_context_destroy(ref);
}

/* CUDA: red promotion over streams of both sizes its kernel tells apart
 * (src/cuda/subdivide.cu, PROMOTE_GROUPS_FROM = 2^20 triangles: groups of
 * 1 triangle below, of 4 from there), with chains in each; the bytes
 * against the CPU's. A jittered torus of 600,000 triangles: level 0 in
 * groups of 1 (every edge splits), level 1's 2.4 M triangles in groups
 * of 4 (measured on the CPU: about 337,000 chain starts, chains of up to
 * some 250 steps), more groups than an H200 holds promotion threads (132
 * SMs x 2048), so threads take several a pass. Then a torus of 1,051,050
 * triangles, 2 more than a multiple of 4, at one level: groups of 4 with
 * chains (up to some 80 steps) and a last group of 2. (The chain cap,
 * the stream's triangles / 8192, is 292 and 128 steps here, so these
 * chains run whole; the suite's 161,336-triangle stream, cap 32, takes
 * the strip rounds after a cut chain, and the hook "strips" runs every
 * mesh through the rounds.) */
static void check_promotion_groups(pm_context *ctx)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *ref;
    PMT_OK(pm_context_create(&d, &ref));
    static const struct {
        unsigned nu, nv, levels;
        double jitter, max_edge;
    } cases[] = {{1000, 300, 2, 0.004, 0.011}, {1001, 525, 1, 0.006, 0.0125}};
    for (int c = 0; c < 2; c++) {
        tmesh m = make_torus(cases[c].nu, cases[c].nv);
        tm_jitter(&m, cases[c].jitter);
        pm_subdivide_options o = {0};
        o.max_edge = cases[c].max_edge;
        pm_subdivide_report rep;
        o.report = &rep;
        pm_mesh a, b;
        PMT_OK(run(ctx, &m, (int)cases[c].levels, &o, &a));
        o.report = NULL;
        PMT_OK(run(ref, &m, (int)cases[c].levels, &o, &b));
        /* the stream promoted in groups of 4 and its split edges */
        const int g = (int)cases[c].levels - 1;
        PMT_CHECK(rep.stream[g] >= (1u << 20) && rep.split_edges[g] > 0 &&
                      (c == 1 ? rep.stream[0] % 4 != 0
                              : rep.stream[0] < (1u << 20) && rep.stream[1] > 4 * 132 * 2048) &&
                      a.num_triangles > m.nt && a.num_triangles < 16 * m.nt,
                  "promotion groups, torus %u x %u: streams %llu / %llu, split edges %llu / %llu, "
                  "%zu triangles out",
                  cases[c].nu, cases[c].nv, (unsigned long long)rep.stream[0],
                  (unsigned long long)rep.stream[1], (unsigned long long)rep.split_edges[0],
                  (unsigned long long)rep.split_edges[1], a.num_triangles);
        PMT_CHECK(same_mesh(&a, &b), "promotion groups, torus %u x %u: bytes differ from the CPU's",
                  cases[c].nu, cases[c].nv);
        pm_mesh_free(ctx, &a);
        pm_mesh_free(ref, &b);
        tm_free(&m);
    }
    pm_context_destroy(ref);
}

/* Red promotion over strips that close on themselves: a torus of 24 x 6
 * quads (major radius 2, minor 1) at max_edge 1.025 splits exactly the
 * quads' diagonals (1.05 and longer; the other edges 1.0 at most), so
 * every triangle has one split edge (a relay) and the relays, linked
 * across their unsplit edges, form gcd(24, 6) = 6 cycles of 48 (a
 * staircase around the torus), none with an end. Weight 1.5 on one
 * vertex splits its other four edges too: its triangles with 2 split
 * edges feed the two cycles through them, which then split whole (48
 * edges each), and the other four stay as they are. CUDA's strip rounds
 * (by default after a cut chain, with the hook "strips" from the start)
 * find that those cycles have no end; the bytes against the CPU's. */
static void check_promotion_cycles(pm_context *ctx)
{
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *ref;
    PMT_OK(pm_context_create(&d, &ref));
    tmesh m = make_torus(24, 6);
    float *w = malloc(4 * m.nv);
    for (size_t i = 0; i < m.nv; i++)
        w[i] = 1.0f;
    w[0] = 1.5f; /* (u, v) = (0, 0), on the outer equator */
    pm_subdivide_options o = {0};
    o.max_edge = 1.025;
    o.vertex_weights = w;
    pm_subdivide_report rep;
    o.report = &rep;
    pm_mesh a, b;
    PMT_OK(run(ctx, &m, 1, &o, &a));
    o.report = NULL;
    PMT_OK(run(ref, &m, 1, &o, &b));
    const uint64_t diag = m.nt / 2;
    PMT_CHECK(rep.split_edges[0] == diag + 2 * 48,
              "promotion cycles: %llu split edges, expected %llu (the diagonals and the two "
              "cycles of 48 through the weighted vertex)",
              (unsigned long long)rep.split_edges[0], (unsigned long long)(diag + 2 * 48));
    PMT_CHECK(same_mesh(&a, &b), "promotion cycles: bytes differ from the CPU's");
    pm_mesh_free(ctx, &a);
    pm_mesh_free(ref, &b);
    free(w);
    tm_free(&m);
    pm_context_destroy(ref);
}

#ifdef PM_HAVE_CUDA
/* Internal (src/cuda/backend.cu): whether ctx's scratch is pool memory. */
int pmi_cuda_scratch_pooled(pm_context *ctx);
#endif

int main(int argc, char **argv)
{
    pm_context *ctx;
    pm_device dev;
    if (!pmt_init(argc, argv, &ctx, &dev)) return PMT_SKIP;
    promote_by_passes = dev == PM_DEVICE_CUDA && hook_set("levels");

    tmesh tetra = make_tetra(), ico = make_icosahedron(), torus = make_torus(24, 11);
    tmesh grid = make_grid(7, 5), one = tm_alloc(3, 1);
    const float tri[] = {0, 0, 0, 1, 0, 0, 0.3f, 0.8f, 0.1f};
    memcpy(one.p, tri, sizeof tri);
    one.t[0] = 0, one.t[1] = 1, one.t[2] = 2;
    tm_jitter(&torus, 0.05);
    tm_jitter(&grid, 0.2);
    check_uniform(ctx, "tetrahedron", &tetra, 4);
    check_uniform(ctx, "icosahedron", &ico, 3);
    check_uniform(ctx, "torus", &torus, 2);
    check_uniform(ctx, "grid", &grid, 3);
    check_uniform(ctx, "triangle", &one, 4);
    /* valences 3 to 12; poles past PMI_LOOP_TWIN_LOCAL (16) corners,
     * whose twins the CPU finds by the per-half-edge search instead of its
     * stack arrays; and poles of 800 corners: the closed bipyramid's two
     * pass the CUDA twin kernel's LIST_CAP (1536 corners a block of 128
     * vertices) in one block, which takes the same search (the open
     * fan's block, 864 corners, stays in shared memory) */
    static const unsigned valence[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 17, 24, 800};
    for (size_t vi = 0; vi < sizeof valence / sizeof valence[0]; vi++) {
        const unsigned k = valence[vi];
        char name[32];
        tmesh b = make_bipyramid(k, 0), f = make_bipyramid(k, 1);
        snprintf(name, sizeof name, "bipyramid %u", k);
        check_uniform(ctx, name, &b, 2);
        /* levels 2 and 3: the level before the last moving the input's
         * vertices two levels at once (PMI_LOOP_WALK_AHEAD) over fans of
         * every valence, closed and open */
        check_uniform_steps(ctx, name, &b, 3);
        snprintf(name, sizeof name, "fan %u", k);
        check_uniform(ctx, name, &f, 2);
        check_uniform_steps(ctx, name, &f, 3);
        tm_free(&b), tm_free(&f);
    }
    check_uniform_steps(ctx, "tetrahedron", &tetra, 4);
    check_uniform_steps(ctx, "icosahedron", &ico, 3);
    check_uniform_steps(ctx, "torus", &torus, 3);
    check_uniform_steps(ctx, "grid", &grid, 3);
    check_uniform_steps(ctx, "triangle", &one, 4);
    {
        /* misoriented pairs (every third triangle reversed): the uniform
         * even rule of new vertices reads the twin's triangle either way
         * round, as the general steps' walks do */
        tmesh mt = tm_alloc(torus.nv, torus.nt), mg = tm_alloc(grid.nv, grid.nt);
        memcpy(mt.p, torus.p, 12 * torus.nv), memcpy(mt.t, torus.t, 12 * torus.nt);
        memcpy(mg.p, grid.p, 12 * grid.nv), memcpy(mg.t, grid.t, 12 * grid.nt);
        for (size_t f = 0; f < mt.nt; f += 3) {
            uint32_t x = mt.t[3 * f + 1];
            mt.t[3 * f + 1] = mt.t[3 * f + 2], mt.t[3 * f + 2] = x;
        }
        for (size_t f = 1; f < mg.nt; f += 3) {
            uint32_t x = mg.t[3 * f + 1];
            mg.t[3 * f + 1] = mg.t[3 * f + 2], mg.t[3 * f + 2] = x;
        }
        check_uniform_steps(ctx, "torus, misoriented", &mt, 3);
        check_uniform_steps(ctx, "grid, misoriented", &mg, 3);
        tm_free(&mt), tm_free(&mg);
        tmesh mb = make_mobius(24);
        tm_jitter(&mb, 0.02);
        check_uniform_steps(ctx, "Moebius strip", &mb, 4);
        tm_free(&mb);
        check_random_meshes(ctx, 16);
    }
    {
        /* unused vertices between used ones keep their place */
        tmesh u = tm_alloc(ico.nv + 2, ico.nt);
        memcpy(u.p + 6, ico.p, 12 * ico.nv);
        for (size_t i = 0; i < 6; i++)
            u.p[i] = (float)(i + 7);
        for (size_t i = 0; i < 3 * ico.nt; i++)
            u.t[i] = ico.t[i] + 2;
        check_uniform_steps(ctx, "icosahedron with unused vertices", &u, 3);
        pm_mesh out;
        PMT_OK(run(ctx, &u, 2, NULL, &out));
        PMT_CHECK(!memcmp(out.positions, u.p, 24) && out.normals[0] == 0.0f &&
                      out.normals[5] == 0.0f,
                  "unused vertices moved or got a normal");
        pm_mesh_free(ctx, &out);
        tm_free(&u);
    }
    /* empty meshes: no vertices; vertices without triangles */
    {
        tmesh e = tm_alloc(0, 0), v = tm_alloc(5, 0);
        pm_mesh out;
        PMT_OK(run(ctx, &e, 2, NULL, &out));
        PMT_CHECK(out.num_vertices == 0 && out.num_triangles == 0, "empty mesh grew");
        pm_mesh_free(ctx, &out);
        for (size_t i = 0; i < 15; i++)
            v.p[i] = (float)i;
        PMT_OK(run(ctx, &v, 2, NULL, &out));
        PMT_CHECK(out.num_vertices == 5 && out.num_triangles == 0 &&
                      !memcmp(out.positions, v.p, 60),
                  "vertices without triangles changed");
        pm_mesh_free(ctx, &out);
        tm_free(&e), tm_free(&v);
    }
    /* level 0: the input with normals */
    {
        pm_mesh out;
        PMT_OK(run(ctx, &ico, 0, NULL, &out));
        PMT_CHECK(out.num_vertices == 12 && out.num_triangles == 20 &&
                      !memcmp(out.positions, ico.p, 144) && !memcmp(out.indices, ico.t, 240),
                  "level 0 is not the input");
        pm_mesh_free(ctx, &out);
    }
    /* a bowtie: the shared vertex keeps its place */
    {
        tmesh b = tm_alloc(5, 2);
        const float p[] = {0, 0, 0, 1, 0, 0, 1, 1, 0, -1, 0, 0, -1, -1, 0.5f};
        const uint32_t t[] = {0, 1, 2, 0, 3, 4};
        memcpy(b.p, p, sizeof p), memcpy(b.t, t, sizeof t);
        pm_mesh out;
        PMT_OK(run(ctx, &b, 1, NULL, &out));
        PMT_CHECK(!memcmp(out.positions, p, 12), "bowtie vertex moved");
        pm_mesh_free(ctx, &out);
        /* and the vertex is not lost by the uniform steps' normals (its
         * triangles come from the input's corner lists) */
        check_uniform_steps(ctx, "bowtie", &b, 3);
        tm_free(&b);
    }
    check_refusals(ctx);

    tmesh big = make_torus(301, 67); /* 40,334 triangles */
    tm_jitter(&big, 0.01);
    check_uniform(ctx, "torus 301x67", &big, 1);
    check_uniform_steps(ctx, "torus 301x67", &big, 2);
    {
        /* misoriented pairs over many GPU blocks (a block of the normals'
         * patch step takes 16 triangles of the stream two levels up, one
         * of the last split's 128): every third triangle reversed, three
         * levels */
        tmesh mb = tm_alloc(big.nv, big.nt);
        memcpy(mb.p, big.p, 12 * big.nv), memcpy(mb.t, big.t, 12 * big.nt);
        for (size_t f = 2; f < mb.nt; f += 3) {
            uint32_t x = mb.t[3 * f + 1];
            mb.t[3 * f + 1] = mb.t[3 * f + 2], mb.t[3 * f + 2] = x;
        }
        check_uniform_steps(ctx, "torus 301x67, misoriented", &mb, 3);
        tm_free(&mb);
    }
    check_adaptive(ctx, "torus length", &torus, 3, 0.25, 0, 0, 1);
    check_adaptive(ctx, "torus angle", &torus, 3, 0, 10, 0, 1);
    check_adaptive(ctx, "torus deviation", &torus, 4, 0, 0, 2e-3, 1);
    check_adaptive(ctx, "icosahedron angle", &ico, 4, 0, 12, 0, 1);
    check_adaptive(ctx, "grid length", &grid, 3, 0.6, 0, 0, 0);
    check_adaptive(ctx, "grid deviation", &grid, 4, 0, 0, 2e-3, 0);
    check_adaptive(ctx, "big torus", &big, 2, 0.05, 15, 0, 1);
    check_adaptive(ctx, "big torus deviation", &big, 2, 0, 0, 2e-4, 1);
    check_adaptive_extremes(ctx, &torus);
    check_adaptive_extremes(ctx, &grid);
    check_promotion(ctx, &one);
    {
        tmesh b7 = make_bipyramid(7, 0);
        tm_jitter(&b7, 0.1);
        check_first_level(ctx, "bipyramid 7, deviation", &b7, NULL, 0.4);
        check_first_level(ctx, "torus, deviation", &torus, NULL, 0.5);
        check_first_level(ctx, "grid, deviation", &grid, NULL, 0.7);
        check_first_level(ctx, "big torus, deviation", &big, NULL, 0.9);
        float *w = malloc(4 * big.nv + 4), *wg = malloc(4 * grid.nv + 4);
        for (size_t i = 0; i < big.nv; i++) /* a few vertices: promotion spreads */
            w[i] = pmt_uniform() < 0.03 ? 1.0f : 0.0f;
        for (size_t i = 0; i < grid.nv; i++)
            wg[i] = pmt_uniform() < 0.4 ? 0.0f : (float)(2 * pmt_uniform());
        check_first_level(ctx, "big torus, sparse weights", &big, w, 0);
        check_first_level(ctx, "grid, weights and deviation", &grid, wg, 0.5);
        free(w), free(wg);
        tm_free(&b7);
    }
    check_same_bytes(ctx, dev, &torus, "torus");
    check_same_bytes(ctx, dev, &grid, "grid");
    check_same_bytes(ctx, dev, &big, "big torus");
    check_promotion_cycles(ctx);
    if (dev == PM_DEVICE_CUDA) check_promotion_groups(ctx);
    PMT_CHECK(levels_marked > 0 && levels_walked > 0,
              "the even rule's two paths: %d levels marked, %d walked", levels_marked,
              levels_walked);

    tm_free(&tetra), tm_free(&ico), tm_free(&torus), tm_free(&grid), tm_free(&one), tm_free(&big);
#ifdef PM_HAVE_CUDA
    /* The nopool variant: the subdivisions above took cudaMalloc scratch. */
    if (dev == PM_DEVICE_CUDA && hook_set("nopool"))
        PMT_CHECK(!pmi_cuda_scratch_pooled(ctx), "nopool hook set, yet the scratch is pooled");
#endif
    pm_context_destroy(ctx);
    return pmt_finish("test_subdivide");
}
