/* pm_bvh_build and pm_collide against references: the exact predicate
 * against an independent separating-axis test on integer coordinates
 * (touching, coplanar and degenerate configurations are common on a small
 * grid), the traversal against all pairs tested one by one on random
 * meshes, self-collision of closed and self-intersecting meshes,
 * transforms, truncation, chunked levels, empty and one-triangle meshes.
 * `test_collide cpu` compares every list with CPU contexts of 1 and 3
 * threads, `test_collide cuda` with the CPU backend's; both check the path
 * each call reports (pmi_collide_last_path). */
#include <math.h>

#include "core/collide_math.h"
#include "core/hooks.h"
#include "core/tri_tri.h"
#include "test_common.h"

#define PMT_PI 3.14159265358979323846

/* ---- independent reference for the predicate ------------------------------ */

typedef struct v3 {
    int64_t x, y, z;
} v3;
static v3 vsub(v3 a, v3 b) { return (v3){a.x - b.x, a.y - b.y, a.z - b.z}; }
static v3 vcross(v3 a, v3 b)
{
    return (v3){a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
static int64_t vdot(v3 a, v3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

/* Closed triangles with integer vertices are disjoint iff some axis
 * separates them strictly. Candidates: the vectors of E (edges of both,
 * vertex differences, coordinate axes), their cross products and the cross
 * products of those with E again; this covers the facet normals of the
 * Minkowski difference in its 3D, 2D and 1D cases. */
static int sat_intersect(const int *t, const int *u)
{
    v3 P[3], Q[3], E[18];
    for (int k = 0; k < 3; k++) {
        P[k] = (v3){t[3 * k], t[3 * k + 1], t[3 * k + 2]};
        Q[k] = (v3){u[3 * k], u[3 * k + 1], u[3 * k + 2]};
    }
    int ne = 0;
    for (int k = 0; k < 3; k++) {
        E[ne++] = vsub(P[(k + 1) % 3], P[k]);
        E[ne++] = vsub(Q[(k + 1) % 3], Q[k]);
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            E[ne++] = vsub(P[i], Q[j]);
    E[ne++] = (v3){1, 0, 0};
    E[ne++] = (v3){0, 1, 0};
    E[ne++] = (v3){0, 0, 1};
    for (int a = 0; a < ne; a++)
        for (int b = -1; b < ne; b++)
            for (int c = -1; c < ne; c++) {
                v3 ax = E[a];
                if (b >= 0) ax = vcross(ax, E[b]);
                if (c >= 0) ax = vcross(ax, E[c]);
                if (!ax.x && !ax.y && !ax.z) continue;
                int64_t p0 = INT64_MAX, p1 = INT64_MIN, q0 = INT64_MAX, q1 = INT64_MIN;
                for (int k = 0; k < 3; k++) {
                    int64_t p = vdot(ax, P[k]), q = vdot(ax, Q[k]);
                    p0 = p < p0 ? p : p0;
                    p1 = p > p1 ? p : p1;
                    q0 = q < q0 ? q : q0;
                    q1 = q > q1 ? q : q1;
                }
                if (p1 < q0 || q1 < p0) return 0;
                if (b < 0) break; /* the vector alone: once */
            }
    return 1;
}

static void check_predicate(void)
{
    /* Hand cases, each (t, u, expected). */
    static const struct {
        float t[9], u[9];
        int hit;
        const char *what;
    } cases[] = {
        {{0, 0, 0, 1, 0, 0, 0, 1, 0}, {0, 0, 1, 1, 0, 1, 0, 1, 1}, 0, "parallel planes"},
        {{0, 0, 0, 1, 0, 0, 0, 1, 0}, {1, 0, 0, 2, 0, 0, 1, 0, 1}, 1, "shared vertex only"},
        {{0, 0, 0, 1, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0, 0, 0, 1}, 1, "shared edge, fold"},
        {{0, 0, 0, 2, 0, 0, 0, 2, 0}, {1, 1, 0, 3, 1, 0, 1, 3, 0}, 1, "coplanar, touching vertex"},
        {{0, 0, 0, 2, 0, 0, 0, 2, 0}, {1.01f, 1.01f, 0, 3, 1, 0, 1, 3, 0}, 0, "coplanar, apart"},
        {{0, 0, 0, 4, 0, 0, 0, 4, 0}, {1, 1, 0, 2, 1, 0, 1, 2, 0}, 1, "coplanar, contained"},
        {{0, 0, 0, 1, 0, 0, 0, 1, 0},
         {0.25f, 0.25f, -1, 0.25f, 0.25f, 1, 0.3f, 0.3f, 1},
         1,
         "piercing"},
        {{0, 0, 0, 1, 0, 0, 0, 1, 0}, {2, 2, -1, 2, 2, 1, 2.5f, 2, 1}, 0, "beside"},
        {{0, 0, 0, 1, 0, 0, 2, 0, 0}, {1, -1, 0, 1, 1, 0, 1, 0, 5}, 1, "degenerate crosses"},
        {{0, 0, 0, 1, 0, 0, 2, 0, 0}, {3, 0, 0, 3, 0, 0, 3, 0, 0}, 0, "segment and point apart"},
        {{0, 0, 0, 1, 0, 0, 2, 0, 0}, {2, 0, 0, 2, 0, 0, 2, 0, 0}, 1, "segment end = point"},
        /* 1 + 2^-23 vs 1: a rounding filter alone would call this touching. */
        {{0, 0, 0, 1, 0, 0, 0, 1, 0},
         {0.5f, 0.50000006f, -1, 0.5f, 0.50000006f, 1, 1, 1, 1},
         0,
         "just past the hypotenuse"},
        {{0, 0, 0, 1, 0, 0, 0, 1, 0},
         {0.5f, 0.5f, -1, 0.5f, 0.5f, 1, 1, 1, 1},
         1,
         "through the hypotenuse"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int h = pmi_tri_tri(cases[c].t, cases[c].u), g = pmi_tri_tri(cases[c].u, cases[c].t);
        PMT_CHECK(h == cases[c].hit && g == h, "%s: %d/%d, expected %d", cases[c].what, h, g,
                  cases[c].hit);
    }
    /* Random integer triangles on small grids: many touching, coplanar and
     * degenerate pairs. */
    int mismatches = 0, hits = 0;
    for (int r = 0; r < 30000; r++) {
        int range = r < 15000 ? 3 : 8;
        int ti[9], ui[9];
        float tf[9], uf[9];
        for (int k = 0; k < 9; k++) {
            ti[k] = (int)(pmt_rand() % (uint64_t)(range + 1));
            ui[k] = (int)(pmt_rand() % (uint64_t)(range + 1));
            tf[k] = (float)ti[k];
            uf[k] = (float)ui[k];
        }
        int ref = sat_intersect(ti, ui);
        hits += ref;
        int got = pmi_tri_tri(tf, uf);
        /* Permuting the vertices or swapping the triangles must not matter. */
        float tp[9] = {tf[3], tf[4], tf[5], tf[6], tf[7], tf[8], tf[0], tf[1], tf[2]};
        int got2 = pmi_tri_tri(uf, tp);
        if (got != ref || got2 != ref) {
            if (mismatches++ < 5)
                PMT_CHECK(0, "pair %d: predicate %d/%d, separating-axis reference %d", r, got, got2,
                          ref);
        }
    }
    PMT_CHECK(mismatches == 0, "%d predicate mismatches", mismatches);
    PMT_CHECK(hits > 1000 && hits < 29000, "reference hits %d: the grid test lost its point", hits);
}

/* ---- meshes --------------------------------------------------------------- */

typedef struct mesh {
    size_t nv, nt;
    float *pos;
    uint32_t *idx; /* NULL: soup */
} mesh;

static pm_mesh as_pm(const mesh *m)
{
    pm_mesh p;
    memset(&p, 0, sizeof p);
    p.num_vertices = m->nv;
    p.num_triangles = m->nt;
    p.positions = m->pos;
    p.indices = m->idx;
    return p;
}

/* n small random triangles (a soup) in the cube [0, extent]^3. */
static mesh random_soup(size_t n, double extent, double size)
{
    mesh m = {3 * n, n, malloc((3 * n + 1) * 3 * sizeof(float)), NULL};
    for (size_t t = 0; t < n; t++) {
        double c[3] = {pmt_uniform() * extent, pmt_uniform() * extent, pmt_uniform() * extent};
        for (int k = 0; k < 9; k++)
            m.pos[9 * t + k] = (float)(c[k % 3] + (pmt_uniform() - 0.5) * size);
    }
    return m;
}

/* A closed torus (indexed), major radius R, minor r, nu x nv quads. */
static mesh torus(int nu, int nv, double R, double r, double cx)
{
    mesh m = {(size_t)nu * nv, 2 * (size_t)nu * nv, malloc((size_t)nu * nv * 3 * sizeof(float)),
              malloc(6 * (size_t)nu * nv * sizeof(uint32_t))};
    for (int i = 0; i < nu; i++)
        for (int j = 0; j < nv; j++) {
            double u = 2 * PMT_PI * i / nu, v = 2 * PMT_PI * j / nv;
            float *p = m.pos + 3 * ((size_t)i * nv + j);
            p[0] = (float)(cx + (R + r * cos(v)) * cos(u));
            p[1] = (float)((R + r * cos(v)) * sin(u));
            p[2] = (float)(r * sin(v));
            uint32_t a = (uint32_t)(i * nv + j), b = (uint32_t)(((i + 1) % nu) * nv + j);
            uint32_t c = (uint32_t)(((i + 1) % nu) * nv + (j + 1) % nv);
            uint32_t d = (uint32_t)(i * nv + (j + 1) % nv);
            uint32_t *q = m.idx + 6 * ((size_t)i * nv + j);
            q[0] = a, q[1] = b, q[2] = c, q[3] = a, q[4] = c, q[5] = d;
        }
    return m;
}

static void mesh_free(mesh *m)
{
    free(m->pos);
    free(m->idx);
}

static void get_tri(const mesh *m, size_t t, float *out)
{
    for (int k = 0; k < 3; k++) {
        size_t v = m->idx ? m->idx[3 * t + k] : 3 * t + k;
        memcpy(out + 3 * k, m->pos + 3 * v, 3 * sizeof(float));
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* All pairs, one by one: the reference list (sorted (a << 32) | b). */
static uint64_t *brute_force(const mesh *A, const mesh *B, const double *xf, int self, size_t *n)
{
    pmi_xform x;
    memset(&x, 0, sizeof x);
    x.identity = xf == NULL;
    if (xf)
        for (int k = 0; k < 3; k++) {
            for (int j = 0; j < 3; j++)
                x.r[3 * k + j] = xf[4 * k + j];
            x.t[k] = xf[4 * k + 3];
        }
    size_t cap = 1024, k = 0;
    uint64_t *out = malloc(cap * sizeof *out);
    for (size_t a = 0; a < A->nt; a++)
        for (size_t b = self ? a + 1 : 0; b < B->nt; b++) {
            float ta[9], tb[9], tx[9];
            get_tri(A, a, ta);
            get_tri(B, b, tb);
            if (self) {
                uint32_t va[3], vb[3];
                for (int i = 0; i < 3; i++) {
                    va[i] = A->idx ? A->idx[3 * a + i] : (uint32_t)(3 * a + i);
                    vb[i] = A->idx ? A->idx[3 * b + i] : (uint32_t)(3 * b + i);
                }
                if (pmi_tris_adjacent(va, vb, ta, tb, A->idx == NULL)) continue;
            }
            if (!x.identity) {
                for (int i = 0; i < 3; i++)
                    pmi_xform_point(&x, tb + 3 * i, tx + 3 * i);
                memcpy(tb, tx, sizeof tb);
            }
            if (!pmi_tri_tri(ta, tb)) continue;
            if (k == cap) out = realloc(out, (cap *= 2) * sizeof *out);
            out[k++] = ((uint64_t)a << 32) | b;
        }
    qsort(out, k, sizeof *out, cmp_u64);
    *n = k;
    return out;
}

/* ---- the transformed box ------------------------------------------------- */

/* pmi_xform_box: every point of a box, mapped by pmi_xform_point, lies in
 * the float box it gives (the box test's claim of exactness), and the box
 * is reached (its bounds are images of corners). Random boxes, rotations
 * about random axes (negative entries), shears and scalings, translations,
 * with points on the faces, edges and corners and one float step inside. */
static void check_xform_box(void)
{
    int bad = 0, unreached = 0;
    for (int r = 0; r < 20000; r++) {
        pmi_xform x;
        memset(&x, 0, sizeof x);
        double ax[3] = {pmt_uniform() - 0.5, pmt_uniform() - 0.5, pmt_uniform() - 0.5};
        double len = sqrt(ax[0] * ax[0] + ax[1] * ax[1] + ax[2] * ax[2]) + 1e-300;
        for (int k = 0; k < 3; k++)
            ax[k] /= len;
        double ang = 2 * PMT_PI * pmt_uniform(), c = cos(ang), sn = sin(ang);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double v = (1 - c) * ax[i] * ax[j] + (i == j ? c : 0);
                if ((i + 1) % 3 == j) v -= sn * ax[3 - i - j];
                if ((j + 1) % 3 == i) v += sn * ax[3 - i - j];
                x.r[3 * i + j] = v;
            }
        if (r % 4 == 1) /* a shear and a scaling: not orthonormal */
            for (int k = 0; k < 9; k++)
                x.r[k] *= 0.5 + 2 * pmt_uniform() + (k == 1 ? 0.7 : 0);
        x.translation = r % 4 == 2;
        if (x.translation)
            for (int k = 0; k < 9; k++)
                x.r[k] = k % 4 == 0;
        double scale = r % 3 == 0 ? 1e-3 : r % 3 == 1 ? 1.0 : 1e4;
        for (int k = 0; k < 3; k++)
            x.t[k] = (pmt_uniform() - 0.5) * 3 * scale;
        float b[6];
        for (int k = 0; k < 3; k++) {
            float u = (float)((pmt_uniform() - 0.5) * 2 * scale),
                  v = (float)((pmt_uniform() - 0.5) * 2 * scale);
            if (r % 5 == 0) v = u; /* flat */
            b[k] = u < v ? u : v;
            b[3 + k] = u < v ? v : u;
        }
        float out[6];
        pmi_xform_box(&x, b, out);
        float reach[6] = {INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int q = 0; q < 64; q++) {
            float p[3], m[3];
            for (int k = 0; k < 3; k++) {
                int sel = q < 27 ? (q / (k == 0 ? 1 : k == 1 ? 3 : 9)) % 3 : (int)(pmt_rand() % 5);
                float lo = b[k], hi = b[3 + k];
                p[k] = sel == 0   ? lo
                       : sel == 1 ? hi
                       : sel == 2 ? lo + (hi - lo) * (float)pmt_uniform()
                       : sel == 3 ? nextafterf(lo, hi)
                                  : nextafterf(hi, lo);
            }
            pmi_xform_point(&x, p, m);
            for (int k = 0; k < 3; k++) {
                if (m[k] < out[k] || m[k] > out[3 + k]) bad++;
                reach[k] = m[k] < reach[k] ? m[k] : reach[k];
                reach[3 + k] = m[k] > reach[3 + k] ? m[k] : reach[3 + k];
            }
        }
        for (int k = 0; k < 6; k++)
            unreached += reach[k] != out[k];
    }
    PMT_CHECK(bad == 0, "%d mapped points outside pmi_xform_box", bad);
    PMT_CHECK(unreached == 0, "%d bounds of pmi_xform_box not reached by a corner", unreached);
}

/* ---- pm_collide against the references ------------------------------------ */

/* Under test; the references: for `cuda` the CPU backend, for `cpu` CPU
 * contexts of 1 and 3 threads. */
static pm_context *g_ctx, *g_ref[2];
static pm_device g_dev;
static uint64_t g_parts_seen; /* levels split on g_ctx */
/* Paths seen on g_ctx: sort=block, sort=cub, traversal=levels (cuda). */
static unsigned g_block_sorts, g_cub_sorts, g_level_runs;
static int g_want_levels; /* the test hook "levels" is set: expect that path */

/* The path of the call just made on ctx must name its backend and, on
 * CUDA, the persistent traversal (or the level-by-level one under the
 * hook); sort=none exactly when nothing was found. */
static void check_path(pm_context *ctx, size_t count)
{
    const char *p = pmi_collide_last_path();
    int cuda = ctx == g_ctx && g_dev == PM_DEVICE_CUDA;
    if (strcmp(p, "traversal=none sort=none") == 0) { /* an empty mesh */
        PMT_CHECK(count == 0, "path \"%s\" with %zu pairs", p, count);
        return;
    }
    if (cuda) {
        const char *want = g_want_levels ? "traversal=levels" : "traversal=persistent";
        PMT_CHECK(strstr(p, "backend=cuda") && strstr(p, want), "path \"%s\", expected %s", p,
                  want);
        g_block_sorts += strstr(p, "sort=block") != NULL;
        g_cub_sorts += strstr(p, "sort=cub") != NULL;
        g_level_runs += strstr(p, "traversal=levels") != NULL;
    } else {
        PMT_CHECK(strstr(p, "backend=cpu traversal=tasks") != NULL, "path \"%s\"", p);
    }
    PMT_CHECK((strstr(p, "sort=none") != NULL) == (count == 0), "path \"%s\" with %zu pairs", p,
              count);
}

/* pm_collide on context ctx; returns the sorted list as (a << 32) | b. */
static uint64_t *collide_list(pm_context *ctx, const mesh *A, const mesh *B, const double *xf,
                              int self, size_t max_candidates, size_t *n, unsigned *levels)
{
    pm_mesh pa = as_pm(A), pb = as_pm(B);
    pm_bvh *ba = NULL, *bb = NULL;
    PMT_OK(pm_bvh_build(ctx, &pa, NULL, &ba));
    if (self)
        bb = ba;
    else
        PMT_OK(pm_bvh_build(ctx, &pb, NULL, &bb));
    uint64_t lv = 0, boxes = 0, leaves = 0, parts = 0;
    pm_collide_options o = {sizeof o, max_candidates, &lv, &boxes, &leaves, &parts};
    size_t count = 0;
    pm_status s = pm_collide(ctx, ba, bb, xf, &o, NULL, 0, &count);
    PMT_CHECK(s == (count ? PM_STATUS_TRUNCATED : PM_STATUS_OK), "capacity 0: %s, count %zu",
              pm_status_string(s), count);
    check_path(ctx, count);
    uint32_t *pairs_d = NULL;
    PMT_OK(pm_alloc(ctx, 2 * count * sizeof(uint32_t), (void **)&pairs_d));
    size_t count2 = 0;
    PMT_OK(pm_collide(ctx, ba, bb, xf, &o, pairs_d, count, &count2));
    PMT_CHECK(count2 == count, "count %zu then %zu", count, count2);
    check_path(ctx, count);
    uint32_t *pairs = pmt_to_host(ctx, pairs_d, 2 * count * sizeof(uint32_t));
    uint64_t *out = malloc((count + 1) * sizeof *out);
    for (size_t i = 0; i < count; i++)
        out[i] = ((uint64_t)pairs[2 * i] << 32) | pairs[2 * i + 1];
    /* Truncation: the first count-1 pairs and the full count. */
    if (count > 1) {
        size_t c3 = 0;
        s = pm_collide(ctx, ba, bb, xf, &o, pairs_d, count - 1, &c3);
        uint32_t *p3 = pmt_to_host(ctx, pairs_d, 2 * (count - 1) * sizeof(uint32_t));
        PMT_CHECK(s == PM_STATUS_TRUNCATED && c3 == count, "truncated: %s, %zu of %zu",
                  pm_status_string(s), c3, count);
        PMT_CHECK(memcmp(p3, pairs, 2 * (count - 1) * sizeof(uint32_t)) == 0,
                  "truncated list differs from the full list's start");
        free(p3);
    }
    /* Only a bound set below a level's size splits it; main() checks that
     * the small bounds did split (the path under test ran). */
    PMT_CHECK(max_candidates || parts == 0, "default bound: %llu levels split",
              (unsigned long long)parts);
    if (ctx == g_ctx) g_parts_seen += parts;
    if (levels) *levels = (unsigned)lv;
    free(pairs);
    pm_free(ctx, pairs_d);
    if (!self) pm_bvh_destroy(ctx, bb);
    pm_bvh_destroy(ctx, ba);
    *n = count;
    return out;
}

static void compare(const char *what, const uint64_t *got, size_t ng, const uint64_t *ref,
                    size_t nr)
{
    int same = ng == nr && (nr == 0 || memcmp(got, ref, nr * sizeof *ref) == 0);
    PMT_CHECK(same, "%s: %zu pairs, reference %zu", what, ng, nr);
    if (!same)
        for (size_t i = 0; i < ng || i < nr; i++) {
            uint64_t g = i < ng ? got[i] : 0, r = i < nr ? ref[i] : 0;
            if (g != r) {
                fprintf(stderr, "  first difference at %zu: (%u,%u) vs reference (%u,%u)\n", i,
                        (unsigned)(g >> 32), (unsigned)g, (unsigned)(r >> 32), (unsigned)r);
                break;
            }
        }
}

/* One case on the context under test, against the brute force and (for
 * cuda) against the CPU backend. Returns the number of pairs. */
static size_t run_case(const char *what, const mesh *A, const mesh *B, const double *xf, int self,
                       size_t max_candidates)
{
    size_t nr, ng;
    uint64_t *ref = brute_force(A, self ? A : B, xf, self, &nr);
    uint64_t *got = collide_list(g_ctx, A, B, xf, self, max_candidates, &ng, NULL);
    compare(what, got, ng, ref, nr);
    for (int r = 0; r < 2 && g_ref[r]; r++) {
        size_t nc;
        uint64_t *cpu = collide_list(g_ref[r], A, B, xf, self, max_candidates, &nc, NULL);
        compare(what, got, ng, cpu, nc);
        free(cpu);
    }
    free(ref);
    free(got);
    return nr;
}

static void rotation(double axis_angle_deg, int axis, const double t[3], double *m)
{
    double a = axis_angle_deg * PMT_PI / 180, c = cos(a), s = sin(a);
    int i = (axis + 1) % 3, j = (axis + 2) % 3;
    memset(m, 0, 12 * sizeof *m);
    m[4 * axis + axis] = 1;
    m[4 * i + i] = c;
    m[4 * i + j] = -s;
    m[4 * j + i] = s;
    m[4 * j + j] = c;
    for (int k = 0; k < 3; k++)
        m[4 * k + 3] = t[k];
}

static void check_random_meshes(void)
{
    static const size_t sizes[] = {1, 2, 31, 33, 257, 1000};
    char what[160];
    size_t total = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t s2 = 0; s2 < sizeof sizes / sizeof sizes[0]; s2 += 2) {
            size_t na = sizes[s], nb = sizes[s2];
            double ext = 2.0 + cbrt((double)(na + nb)) * 0.5;
            mesh A = random_soup(na, ext, 1.0), B = random_soup(nb, ext, 1.0);
            snprintf(what, sizeof what, "random %zu x %zu", na, nb);
            total += run_case(what, &A, &B, NULL, 0, 0);
            double m[12], t[3] = {0.3, -0.2, 0.1};
            rotation(37.0, (int)(s % 3), t, m);
            snprintf(what, sizeof what, "random %zu x %zu rotated", na, nb);
            total += run_case(what, &A, &B, m, 0, 0);
            double tr[12] = {1, 0, 0, 0.25, 0, 1, 0, -0.5, 0, 0, 1, 0.125};
            snprintf(what, sizeof what, "random %zu x %zu translated", na, nb);
            total += run_case(what, &A, &B, tr, 0, 0);
            snprintf(what, sizeof what, "random %zu self", na);
            total += run_case(what, &A, &A, NULL, 1, 0);
            if (na >= 257) {
                snprintf(what, sizeof what, "random %zu x %zu, 64 candidates a level", na, nb);
                run_case(what, &A, &B, NULL, 0, 64);
                snprintf(what, sizeof what, "random %zu self, 64 candidates a level", na);
                run_case(what, &A, &A, NULL, 1, 64);
            }
            mesh_free(&A);
            mesh_free(&B);
        }
    PMT_CHECK(total > 100, "only %zu pairs in all random cases: they test little", total);
}

/* Meshes on an integer grid: touching and coplanar pairs everywhere. */
static void check_grid_meshes(void)
{
    for (int r = 0; r < 6; r++) {
        size_t n = r < 3 ? 40 : 300;
        mesh A = {3 * n, n, malloc(9 * n * sizeof(float)), NULL};
        mesh B = {3 * n, n, malloc(9 * n * sizeof(float)), NULL};
        int range = r < 3 ? 3 : 6;
        for (size_t k = 0; k < 9 * n; k++) {
            A.pos[k] = (float)(pmt_rand() % (uint64_t)(range + 1));
            B.pos[k] = (float)(pmt_rand() % (uint64_t)(range + 1));
        }
        run_case("grid soup", &A, &B, NULL, 0, 0);
        run_case("grid soup self (adjacency by position)", &A, &A, NULL, 1, 0);
        double tr[12] = {1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, -1};
        run_case("grid soup translated by integers", &A, &B, tr, 0, 0);
        mesh_free(&A);
        mesh_free(&B);
    }
}

static void check_closed_meshes(void)
{
    mesh T = torus(48, 24, 1.0, 0.3, 0.0);
    size_t n = run_case("closed torus self", &T, &T, NULL, 1, 0);
    PMT_CHECK(n == 0, "a closed torus has %zu self-intersections", n);
    /* Tube radius above the major radius: the inner side passes through
     * itself. */
    mesh S = torus(40, 20, 0.5, 0.8, 0.0);
    n = run_case("self-intersecting torus", &S, &S, NULL, 1, 0);
    PMT_CHECK(n > 0, "a self-intersecting torus shows no pair");
    /* Two tori, the second moved through the first. */
    mesh U = torus(32, 16, 1.0, 0.3, 0.0);
    double tr[12] = {1, 0, 0, 1.0, 0, 1, 0, 0, 0, 0, 1, 0};
    n = run_case("torus through torus", &T, &U, tr, 0, 0);
    PMT_CHECK(n > 0, "overlapping tori show no pair");
    double m[12], t[3] = {1.0, 0.0, 0.0};
    rotation(90.0, 0, t, m);
    /* Linked like chain links: the centre lines stay 1 apart, the tubes
     * (0.3 each) never meet. */
    n = run_case("chain links", &T, &U, m, 0, 0);
    PMT_CHECK(n == 0, "linked tori apart show %zu pairs", n);
    t[0] = 0.5;
    rotation(90.0, 0, t, m);
    n = run_case("chain links pulled together", &T, &U, m, 0, 0);
    PMT_CHECK(n > 0, "linked tori pulled into each other show no pair");
    /* The same mesh as A and B (two BVHs): every triangle meets itself. */
    n = run_case("torus against a copy", &T, &T, NULL, 0, 0);
    PMT_CHECK(n >= T.nt, "a copy meets itself in %zu pairs, expected >= %zu", n, T.nt);
    /* More pairs than one CUDA block sorts (4096): cub sorts them. */
    mesh F = torus(64, 36, 1.0, 0.3, 0.0);
    n = run_case("fine torus against a copy", &F, &F, NULL, 0, 0);
    PMT_CHECK(n > 4096, "a fine torus meets its copy in %zu pairs, expected > 4096", n);
    mesh_free(&F);
    mesh_free(&T);
    mesh_free(&S);
    mesh_free(&U);
}

static void check_edges(void)
{
    /* Empty meshes. */
    mesh E = {0, 0, NULL, NULL}, O = random_soup(1, 1.0, 1.0);
    size_t n;
    uint64_t *l = collide_list(g_ctx, &E, &O, NULL, 0, 0, &n, NULL);
    PMT_CHECK(n == 0, "empty against one: %zu", n);
    free(l);
    l = collide_list(g_ctx, &E, &E, NULL, 1, 0, &n, NULL);
    PMT_CHECK(n == 0, "empty self: %zu", n);
    free(l);
    l = collide_list(g_ctx, &O, &O, NULL, 0, 0, &n, NULL);
    PMT_CHECK(n == 1, "a triangle against a copy: %zu", n);
    free(l);
    l = collide_list(g_ctx, &O, &O, NULL, 1, 0, &n, NULL);
    PMT_CHECK(n == 0, "one triangle self: %zu", n);
    free(l);
    /* Bad inputs. */
    pm_bvh *b = NULL;
    mesh T = torus(8, 6, 1.0, 0.3, 0.0);
    T.idx[7] = (uint32_t)T.nv;
    pm_mesh p = as_pm(&T);
    pm_status s = pm_bvh_build(g_ctx, &p, NULL, &b);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "triangle 2"),
              "bad index: %s %s", pm_status_string(s), pm_last_error());
    T.idx[7] = 0;
    T.pos[4] = NAN;
    p = as_pm(&T);
    s = pm_bvh_build(g_ctx, &p, NULL, &b);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT && strstr(pm_last_error(), "non-finite"),
              "NaN vertex: %s %s", pm_status_string(s), pm_last_error());
    T.pos[4] = 0;
    p = as_pm(&T);
    PMT_OK(pm_bvh_build(g_ctx, &p, NULL, &b));
    double m[12] = {1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0};
    s = pm_collide(g_ctx, b, b, m, NULL, NULL, 0, &n);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "self with a transform: %s", pm_status_string(s));
    m[3] = NAN;
    s = pm_collide(g_ctx, b, b, m, NULL, NULL, 0, &n);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "NaN transform: %s", pm_status_string(s));
    pm_collide_options o = {sizeof o, 10, NULL, NULL, NULL, NULL};
    s = pm_collide(g_ctx, b, b, NULL, &o, NULL, 0, &n);
    PMT_CHECK(s == PM_STATUS_INVALID_ARGUMENT, "10 candidates: %s", pm_status_string(s));
    PMT_CHECK(pm_bvh_num_triangles(b) == T.nt && pm_bvh_depth(b) >= 6, "bvh of %zu, depth %u",
              pm_bvh_num_triangles(b), pm_bvh_depth(b));
    pm_bvh_destroy(g_ctx, b);
    mesh_free(&T);
    mesh_free(&O);
}

/* CUDA: the level-by-level traversal (devices that cannot launch the
 * persistent kernel) under the test hook "levels", on the cases that reach
 * its retries and splits. */
static void check_level_path(void)
{
#ifdef PMI_HOOK_LEVELS
    setenv("PYRAMESH_TEST_HOOKS", "levels", 1);
    g_want_levels = 1;
    unsigned before = g_level_runs;
    uint64_t parts = g_parts_seen;
    mesh A = random_soup(1000, 7.0, 1.0), B = random_soup(257, 7.0, 1.0);
    double m[12], t[3] = {0.3, -0.2, 0.1};
    rotation(37.0, 1, t, m);
    run_case("levels: random 1000 x 257 rotated", &A, &B, m, 0, 0);
    run_case("levels: random 1000 self", &A, &A, NULL, 1, 0);
    run_case("levels: random 1000 x 257, 64 candidates a level", &A, &B, NULL, 0, 64);
    mesh T = torus(64, 36, 1.0, 0.3, 0.0);
    run_case("levels: torus against a copy", &T, &T, NULL, 0, 0);
    PMT_CHECK(g_level_runs > before && g_parts_seen > parts,
              "the level-by-level path ran %u calls, split %llu levels", g_level_runs - before,
              (unsigned long long)(g_parts_seen - parts));
    mesh_free(&A);
    mesh_free(&B);
    mesh_free(&T);
    g_want_levels = 0;
    unsetenv("PYRAMESH_TEST_HOOKS");
#else
    printf("level-by-level CUDA path: not tested (this build has no test hook \"levels\")\n");
#endif
}

/* A large case: two dense tori, 10^5 triangles each, overlapping. */
static void check_large(void)
{
    mesh A = torus(400, 125, 1.0, 0.35, 0.0), B = torus(300, 170, 1.0, 0.35, 0.9);
    size_t ng;
    unsigned levels = 0;
    uint64_t *got = collide_list(g_ctx, &A, &B, NULL, 0, 0, &ng, &levels);
    PMT_CHECK(ng > 1000, "large overlap: %zu pairs", ng);
    /* Spot check: every reported pair really intersects, and a band of A's
     * triangles matches the brute force exactly. */
    size_t bad = 0;
    for (size_t i = 0; i < ng; i++) {
        float ta[9], tb[9];
        get_tri(&A, (size_t)(got[i] >> 32), ta);
        get_tri(&B, (size_t)(uint32_t)got[i], tb);
        bad += !pmi_tri_tri(ta, tb);
    }
    PMT_CHECK(bad == 0, "%zu reported pairs do not intersect", bad);
    size_t lo = 50000, hi = 50400, want = 0, have = 0;
    for (size_t a = lo; a < hi; a++)
        for (size_t b = 0; b < B.nt; b++) {
            float ta[9], tb[9];
            get_tri(&A, a, ta);
            get_tri(&B, b, tb);
            want += pmi_tri_tri(ta, tb);
        }
    for (size_t i = 0; i < ng; i++)
        have += (got[i] >> 32) >= lo && (got[i] >> 32) < hi;
    PMT_CHECK(have == want, "triangles %zu..%zu: %zu pairs, brute force %zu", lo, hi, have, want);
    for (int r = 0; r < 2 && g_ref[r]; r++) {
        size_t nc;
        uint64_t *cpu = collide_list(g_ref[r], &A, &B, NULL, 0, 0, &nc, NULL);
        compare("large, against a reference context", got, ng, cpu, nc);
        free(cpu);
    }
    printf("large: %zu x %zu triangles, %zu pairs, %u levels\n", A.nt, B.nt, ng, levels);
    free(got);
    mesh_free(&A);
    mesh_free(&B);
}

int main(int argc, char **argv)
{
    if (!pmt_init(argc, argv, &g_ctx, &g_dev)) return PMT_SKIP;
    if (g_dev == PM_DEVICE_CUDA) {
        pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 0, NULL};
        PMT_OK(pm_context_create(&d, &g_ref[0]));
    } else {
        pm_context_desc d1 = {sizeof d1, PM_DEVICE_CPU, 0, 1, NULL},
                        d3 = {sizeof d3, PM_DEVICE_CPU, 0, 3, NULL};
        PMT_OK(pm_context_create(&d1, &g_ref[0]));
        PMT_OK(pm_context_create(&d3, &g_ref[1]));
    }
    check_predicate();
    check_xform_box();
    check_edges();
    check_grid_meshes();
    check_random_meshes();
    PMT_CHECK(g_parts_seen > 0, "no case with max_candidates 64 split a level");
    check_closed_meshes();
    check_large();
    if (g_dev == PM_DEVICE_CUDA) {
        PMT_CHECK(g_block_sorts > 0 && g_cub_sorts > 0,
                  "pairs sorted by one block in %u calls, by cub in %u: both must run",
                  g_block_sorts, g_cub_sorts);
        check_level_path();
    }
    for (int r = 0; r < 2; r++)
        pm_context_destroy(g_ref[r]);
    pm_context_destroy(g_ctx);
    return pmt_finish("test_collide");
}
