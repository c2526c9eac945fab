/* Vertex normals and smoothing on the CPU: area-weighted vertex normals,
 * splashsurf's normal smoothing, Laplacian smoothing with per-vertex
 * weights (Loeschner et al. 2023) and Taubin's lambda|mu smoothing (Taubin
 * 1995). One thread per range of vertices; each vertex sums its triangles
 * or neighbours in ascending index (the rules are in core/post_rules.h), so
 * the result does not depend on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

pm_status pmi_cpu_vertex_normals(int threads, pmi_hmesh *m)
{
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, m->nt, m->nv, &vt);
    if (s != PM_STATUS_OK) return s;
    float *nrm = m->nrm;
    if (!nrm) {
        nrm = malloc((m->nv ? m->nv : 1) * 3 * sizeof *nrm);
        if (!nrm) {
            pmi_adj_free(&vt);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_mesh_compute_normals: no memory for "
                             "%zu normals",
                             m->nv);
        }
    }
    const long long snv = (long long)m->nv;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++) {
        double sum[3] = {0.0, 0.0, 0.0};
        for (uint32_t i = vt.off[v]; i < vt.off[v + 1]; i++) {
            const uint32_t *t = m->tri + 3 * (size_t)vt.list[i];
            double n[3];
            pmi_post_face_normal(m->pos + 3 * (size_t)t[0], m->pos + 3 * (size_t)t[1],
                                 m->pos + 3 * (size_t)t[2], n);
            sum[0] += n[0];
            sum[1] += n[1];
            sum[2] += n[2];
        }
        float *o = nrm + 3 * (size_t)v;
        if (!pmi_post_normalize(sum, o)) o[0] = o[1] = o[2] = 0.0f;
    }
    pmi_adj_free(&vt);
    m->nrm = nrm;
    return PM_STATUS_OK;
}

/* The neighbour rows of the mesh. */
static pm_status neighbours(int threads, const pmi_hmesh *m, pmi_adj *nb)
{
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, m->nt, m->nv, &vt);
    if (s != PM_STATUS_OK) return s;
    s = pmi_vertex_neighbours(threads, m->tri, &vt, nb);
    pmi_adj_free(&vt);
    return s;
}

pm_status pmi_cpu_smooth_normals(int threads, pmi_hmesh *m, int iterations)
{
    if (iterations <= 0 || m->nv == 0) return PM_STATUS_OK;
    pmi_adj nb;
    pm_status s = neighbours(threads, m, &nb);
    if (s != PM_STATUS_OK) return s;
    float *tmp = malloc(m->nv * 3 * sizeof *tmp);
    if (!tmp) {
        pmi_adj_free(&nb);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_smooth_normals: out of memory");
    }
    float *cur = m->nrm, *next = tmp;
    const long long snv = (long long)m->nv;
    for (int it = 0; it < iterations; it++) {
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long long v = 0; v < snv; v++) {
            double sum[3] = {0.0, 0.0, 0.0};
            for (uint32_t i = nb.off[v]; i < nb.off[v + 1]; i++) {
                const float *n = cur + 3 * (size_t)nb.list[i];
                sum[0] += (double)n[0];
                sum[1] += (double)n[1];
                sum[2] += (double)n[2];
            }
            float *o = next + 3 * (size_t)v;
            if (!pmi_post_normalize(sum, o)) memcpy(o, cur + 3 * (size_t)v, 3 * sizeof *o);
        }
        float *t = cur;
        cur = next;
        next = t;
    }
    if (cur != m->nrm) memcpy(m->nrm, cur, m->nv * 3 * sizeof *cur);
    free(tmp);
    pmi_adj_free(&nb);
    return PM_STATUS_OK;
}

pm_status pmi_cpu_smooth(int threads, pmi_hmesh *m, int iterations, const double *factors,
                         int steps_per_iteration, const float *weights)
{
    if (iterations <= 0 || m->nv == 0) return PM_STATUS_OK;
    pmi_adj nb;
    pm_status s = neighbours(threads, m, &nb);
    if (s != PM_STATUS_OK) return s;
    float *tmp = malloc(m->nv * 3 * sizeof *tmp);
    if (!tmp) {
        pmi_adj_free(&nb);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "mesh smoothing: out of memory");
    }
    float *cur = m->pos, *next = tmp;
    const long long snv = (long long)m->nv;
    for (int it = 0; it < iterations; it++)
        for (int step = 0; step < steps_per_iteration; step++) {
            const double factor = factors[step];
#pragma omp parallel for num_threads(threads) schedule(static)
            for (long long v = 0; v < snv; v++) {
                const float *x = cur + 3 * (size_t)v;
                float *o = next + 3 * (size_t)v;
                const uint32_t k = nb.off[v + 1] - nb.off[v];
                if (k == 0) { /* no neighbours: stays */
                    memcpy(o, x, 3 * sizeof *o);
                    continue;
                }
                double sum[3] = {0.0, 0.0, 0.0};
                for (uint32_t i = nb.off[v]; i < nb.off[v + 1]; i++) {
                    const float *y = cur + 3 * (size_t)nb.list[i];
                    sum[0] += (double)y[0];
                    sum[1] += (double)y[1];
                    sum[2] += (double)y[2];
                }
                const double f = weights ? factor * (double)weights[v] : factor;
                for (int c = 0; c < 3; c++)
                    o[c] = pmi_post_laplace(x[c], sum[c], k, f);
            }
            float *t = cur;
            cur = next;
            next = t;
        }
    if (cur != m->pos) memcpy(m->pos, cur, m->nv * 3 * sizeof *cur);
    free(tmp);
    pmi_adj_free(&nb);
    return PM_STATUS_OK;
}
