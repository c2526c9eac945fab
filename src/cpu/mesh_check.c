/* splashsurf's mesh checks (--check-mesh-closed/-manifold/-orientation)
 * naming the first offending element (its mesh AABB clip is a set of
 * data-parallel steps in core/post_rules.h). Edges are found per
 * lower vertex from the vertex -> triangle rows (no global sort), so the
 * work is parallel over vertices and the counts and the first offender
 * do not depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

/* What one vertex found as the lower end of its edges, and as a vertex. */
typedef struct vcheck {
    uint32_t boundary, nonmanifold, misoriented; /* edges (v, w), w > v */
    uint32_t first_b, first_n, first_m;          /* lowest triangle of such an edge */
    uint32_t bw, nw, mw;                         /* its other end */
    uint32_t mt2;                                /* misoriented: the second triangle */
    uint8_t fans_bad;                            /* more than one fan */
} vcheck;

/* Union-find on a vertex's few triangles. */
static uint32_t lfind(uint32_t *p, uint32_t x)
{
    while (p[x] != x)
        x = p[x] = p[p[x]];
    return x;
}

static void check_vertex(const pmi_hmesh *m, const pmi_adj *vt, uint32_t v, vcheck *c,
                         uint32_t *buf)
{
    memset(c, 0, sizeof *c);
    c->first_b = c->first_n = c->first_m = UINT32_MAX;
    const uint32_t b = vt->off[v], deg = vt->off[v + 1] - b;
    /* edges (v, w) with w > v: buf holds w, direction and triangle */
    uint32_t *w = buf, *dir = buf + 2 * deg, *tr = buf + 4 * deg;
    uint32_t k = 0;
    for (uint32_t i = 0; i < deg; i++) {
        const uint32_t t = vt->list[b + i];
        const uint32_t *x = m->tri + 3 * (size_t)t;
        for (int e = 0; e < 3; e++) {
            uint32_t a0 = x[e], a1 = x[(e + 1) % 3];
            if (a0 == v && a1 > v) {
                w[k] = a1;
                dir[k] = 0;
                tr[k++] = t;
            } else if (a1 == v && a0 > v) {
                w[k] = a0;
                dir[k] = 1;
                tr[k++] = t;
            }
        }
    }
    /* sort by (w, triangle): insertion sort, rows are short */
    for (uint32_t i = 1; i < k; i++) {
        uint32_t xw = w[i], xd = dir[i], xt = tr[i];
        uint32_t j = i;
        while (j > 0 && (w[j - 1] > xw || (w[j - 1] == xw && tr[j - 1] > xt))) {
            w[j] = w[j - 1];
            dir[j] = dir[j - 1];
            tr[j] = tr[j - 1];
            j--;
        }
        w[j] = xw;
        dir[j] = xd;
        tr[j] = xt;
    }
    for (uint32_t i = 0; i < k;) {
        uint32_t j = i, fwd = 0, bwd = 0;
        while (j < k && w[j] == w[i]) {
            if (dir[j])
                bwd++;
            else
                fwd++;
            j++;
        }
        const uint32_t n = j - i;
        if (n == 1) {
            c->boundary++;
            if (tr[i] < c->first_b) {
                c->first_b = tr[i];
                c->bw = w[i];
            }
        } else if (n > 2) {
            c->nonmanifold++;
            if (tr[i] < c->first_n) {
                c->first_n = tr[i];
                c->nw = w[i];
            }
        }
        if (n == 2 && (fwd == 2 || bwd == 2)) {
            c->misoriented++;
            if (tr[i] < c->first_m) {
                c->first_m = tr[i];
                c->mw = w[i];
                c->mt2 = tr[i + 1];
            }
        }
        i = j;
    }
    /* fans: triangles of v joined when they share a second vertex */
    uint32_t *p = buf, *o1 = buf + deg, *o2 = buf + 2 * deg;
    for (uint32_t i = 0; i < deg; i++) {
        const uint32_t *x = m->tri + 3 * (size_t)vt->list[b + i];
        p[i] = i;
        int q = 0;
        uint32_t other[2] = {UINT32_MAX, UINT32_MAX};
        for (int e = 0; e < 3; e++)
            if (x[e] != v && q < 2) other[q++] = x[e];
        o1[i] = other[0];
        o2[i] = other[1];
    }
    for (uint32_t i = 0; i < deg; i++)
        for (uint32_t j = i + 1; j < deg; j++)
            if (o1[i] == o1[j] || o1[i] == o2[j] || o2[i] == o1[j] || o2[i] == o2[j]) {
                uint32_t ri = lfind(p, i), rj = lfind(p, j);
                if (ri != rj) p[ri < rj ? rj : ri] = ri < rj ? ri : rj;
            }
    uint32_t roots = 0;
    for (uint32_t i = 0; i < deg; i++)
        roots += lfind(p, i) == i;
    c->fans_bad = roots > 1;
}

pm_status pmi_cpu_mesh_check(int threads, const pmi_hmesh *m, unsigned what,
                             pm_mesh_check_report *r)
{
    memset(r, 0, sizeof *r);
    r->passed = 1;
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, m->nt, m->nv, &vt);
    if (s != PM_STATUS_OK) return s;
    vcheck *vc = malloc((m->nv ? m->nv : 1) * sizeof *vc);
    float *vn = NULL;
    if (vc && (what & PM_CHECK_ORIENTATION)) {
        pmi_hmesh copy = *m;
        copy.nrm = NULL;
        s = pmi_cpu_vertex_normals(threads, &copy);
        vn = copy.nrm;
    }
    if (!vc || s != PM_STATUS_OK) {
        free(vc);
        pmi_adj_free(&vt);
        return s != PM_STATUS_OK ? s
                                 : pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_check: out of "
                                                                      "memory");
    }
    int failed = 0;
    const long long snv = (long long)m->nv;
#pragma omp parallel num_threads(threads)
    {
        uint32_t stack[6 * 64];
        uint32_t *heap = NULL;
        size_t cap = 0;
#pragma omp for schedule(dynamic, 4096)
        for (long long v = 0; v < snv; v++) {
            size_t need = 6 * (size_t)(vt.off[v + 1] - vt.off[v]);
            uint32_t *buf = stack;
            if (need > 6 * 64) {
                if (need > cap) {
                    free(heap);
                    heap = malloc(need * sizeof *heap);
                    cap = heap ? need : 0;
                }
                if (!heap) {
#pragma omp atomic write
                    failed = 1;
                    continue;
                }
                buf = heap;
            }
            check_vertex(m, &vt, (uint32_t)v, &vc[v], buf);
        }
        free(heap);
    }
    if (failed) {
        free(vc);
        free(vn);
        pmi_adj_free(&vt);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_check: out of memory");
    }
    /* Totals and the first offenders (lowest triangle; lowest vertex). */
    uint32_t fb = UINT32_MAX, fn = UINT32_MAX, fm = UINT32_MAX, vb = 0, vn_ = 0, vm = 0;
    size_t first_fan = SIZE_MAX;
    for (size_t v = 0; v < m->nv; v++) {
        const vcheck *c = &vc[v];
        r->boundary_edges += c->boundary;
        r->nonmanifold_edges += c->nonmanifold;
        r->misoriented_edges += c->misoriented;
        if (c->fans_bad) {
            r->nonmanifold_vertices++;
            if (first_fan == SIZE_MAX) first_fan = v;
        }
        if (c->first_b < fb) {
            fb = c->first_b;
            vb = (uint32_t)v;
        }
        if (c->first_n < fn) {
            fn = c->first_n;
            vn_ = (uint32_t)v;
        }
        if (c->first_m < fm) {
            fm = c->first_m;
            vm = (uint32_t)v;
        }
    }
    /* splashsurf's flipped faces: a face normal more than 0.99 pi from the
     * area-weighted normal of one of its vertices. */
    size_t first_flip = SIZE_MAX, flip_vertex = 0;
    double flip_angle = 0;
    if (what & PM_CHECK_ORIENTATION) {
        size_t flips = 0;
        const double limit = 0.99 * 3.14159265358979323846;
        for (size_t t = 0; t < m->nt; t++) {
            const uint32_t *x = m->tri + 3 * t;
            const float *a = m->pos + 3 * (size_t)x[0], *b = m->pos + 3 * (size_t)x[1],
                        *c = m->pos + 3 * (size_t)x[2];
            double e0[3], e1[3], n[3];
            for (int k = 0; k < 3; k++) {
                e0[k] = (double)b[k] - (double)a[k];
                e1[k] = (double)c[k] - (double)a[k];
            }
            n[0] = e0[1] * e1[2] - e0[2] * e1[1];
            n[1] = e0[2] * e1[0] - e0[0] * e1[2];
            n[2] = e0[0] * e1[1] - e0[1] * e1[0];
            const double ln = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
            if (!(ln > 0)) continue;
            for (int k = 0; k < 3; k++) {
                const float *q = vn + 3 * (size_t)x[k];
                const double lq =
                    sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]);
                if (!(lq > 0)) continue;
                double d = (n[0] * q[0] + n[1] * q[1] + n[2] * q[2]) / (ln * lq);
                d = d > 1 ? 1 : d < -1 ? -1 : d;
                const double ang = acos(d);
                if (ang > limit) {
                    flips++;
                    if (first_flip == SIZE_MAX) {
                        first_flip = t;
                        flip_vertex = x[k];
                        flip_angle = ang * 180.0 / 3.14159265358979323846;
                    }
                    break;
                }
            }
        }
        r->flipped_faces = flips;
    }
    /* The message of the first failing check. */
    char *msg = r->message;
    const size_t ms = sizeof r->message;
    if ((what & PM_CHECK_CLOSED) && r->boundary_edges) {
        r->passed = 0;
        snprintf(msg, ms,
                 "not closed: %zu boundary edge%s (edges of one triangle); the first is edge "
                 "(%u, %u) of triangle %u",
                 r->boundary_edges, r->boundary_edges == 1 ? "" : "s", vb, vc[vb].bw, fb);
    } else if ((what & PM_CHECK_MANIFOLD) && r->nonmanifold_edges) {
        r->passed = 0;
        snprintf(msg, ms,
                 "not manifold: %zu edge%s with three or more triangles; the first is edge "
                 "(%u, %u) of triangle %u",
                 r->nonmanifold_edges, r->nonmanifold_edges == 1 ? "" : "s", vn_, vc[vn_].nw, fn);
    } else if ((what & PM_CHECK_MANIFOLD) && r->nonmanifold_vertices) {
        r->passed = 0;
        snprintf(msg, ms,
                 "not manifold: %zu vert%s with more than one triangle fan; the first is vertex "
                 "%zu",
                 r->nonmanifold_vertices, r->nonmanifold_vertices == 1 ? "ex" : "ices", first_fan);
    } else if ((what & PM_CHECK_ORIENTATION) && r->misoriented_edges) {
        r->passed = 0;
        snprintf(msg, ms,
                 "not consistently oriented: %zu edge%s used twice in the same direction; the "
                 "first is edge (%u, %u) of triangles %u and %u",
                 r->misoriented_edges, r->misoriented_edges == 1 ? "" : "s", vm, vc[vm].mw, fm,
                 vc[vm].mt2);
    } else if ((what & PM_CHECK_ORIENTATION) && r->flipped_faces) {
        r->passed = 0;
        snprintf(msg, ms,
                 "not consistently oriented: %zu face%s flipped against their vertices' normals; "
                 "the first is triangle %zu, %.2f degrees from vertex %zu's normal",
                 r->flipped_faces, r->flipped_faces == 1 ? "" : "s", first_flip, flip_angle,
                 flip_vertex);
    }
    free(vc);
    free(vn);
    pmi_adj_free(&vt);
    return PM_STATUS_OK;
}
