/* splashsurf's --generate-quads: pairs of triangles sharing an edge merged
 * into quads when the quad is nearly square, convex enough and flat
 * (criteria in core/post_rules.h). Candidates are found per triangle in
 * parallel (each triangle's first partner, read-only), then accepted in
 * triangle order, so the output is one mesh for every thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

pm_status pmi_cpu_to_quads(int threads, const pmi_hmesh *m, double ratio, double normal_deg,
                           double interior_deg, pm_quads *out)
{
    memset(out, 0, sizeof *out);
    const char *fn = "pm_mesh_to_quads";
    pmi_adj vt;
    pm_status s = pmi_vertex_triangles(threads, m->tri, m->nt, m->nv, &vt);
    if (s != PM_STATUS_OK) return s;
    double *tn = malloc((m->nt ? m->nt : 1) * 3 * sizeof *tn);
    uint32_t *partner = malloc((m->nt ? m->nt : 1) * sizeof *partner);
    uint8_t *taken = calloc(m->nt ? m->nt : 1, 1);
    if (!tn || !partner || !taken) {
        free(tn);
        free(partner);
        free(taken);
        pmi_adj_free(&vt);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    const double pi = 3.14159265358979323846;
    const double min_dot = cos(normal_deg * pi / 180.0), max_angle = interior_deg * pi / 180.0;
    const long long snt = (long long)m->nt;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long t = 0; t < snt; t++) {
        const uint32_t *x = m->tri + 3 * t;
        double n[3];
        pmi_post_face_normal(m->pos + 3 * (size_t)x[0], m->pos + 3 * (size_t)x[1],
                             m->pos + 3 * (size_t)x[2], n);
        const double l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        for (int k = 0; k < 3; k++)
            tn[3 * t + k] = n[k] / l; /* NaN for a zero-area triangle: never merges */
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1024)
    for (long long i = 0; i < snt; i++) {
        const uint32_t *ti = m->tri + 3 * i;
        partner[i] = UINT32_MAX;
        for (int c = 0; c < 3 && partner[i] == UINT32_MAX; c++) {
            const uint32_t vert = ti[c];
            for (uint32_t r = vt.off[vert]; r < vt.off[vert + 1]; r++) {
                const uint32_t j = vt.list[r];
                if (j <= (uint32_t)i) continue;
                const uint32_t *tj = m->tri + 3 * (size_t)j;
                int shared = 0;
                uint32_t other = 0;
                for (int k = 0; k < 3; k++)
                    if (tj[k] == ti[0] || tj[k] == ti[1] || tj[k] == ti[2]) {
                        shared++;
                        if (tj[k] != vert) other = tj[k];
                    }
                if (shared != 2) continue;
                uint32_t q[4];
                pmi_post_quad_of(ti, tj, q);
                if (pmi_post_quad_ok(m->pos, q, vert, other, tn + 3 * i, tn + 3 * (size_t)j, ratio,
                                     max_angle, min_dot)) {
                    partner[i] = j;
                    break;
                }
            }
        }
    }
    size_t nq = 0;
    for (size_t i = 0; i < m->nt; i++) {
        uint32_t j = partner[i];
        if (j == UINT32_MAX || taken[i] || taken[j]) {
            partner[i] = UINT32_MAX;
            continue;
        }
        taken[i] = taken[j] = 1;
        nq++;
    }
    out->num_quads = nq;
    out->num_triangles = m->nt - 2 * nq;
    out->quads = malloc((nq ? nq : 1) * 4 * sizeof *out->quads);
    out->triangles =
        malloc((out->num_triangles ? out->num_triangles : 1) * 3 * sizeof *out->triangles);
    if (!out->quads || !out->triangles) {
        free(out->quads);
        free(out->triangles);
        memset(out, 0, sizeof *out);
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
    } else {
        size_t a = 0, b = 0;
        for (size_t i = 0; i < m->nt; i++) {
            if (partner[i] != UINT32_MAX)
                pmi_post_quad_of(m->tri + 3 * i, m->tri + 3 * (size_t)partner[i],
                                 out->quads + 4 * b++);
            if (!taken[i]) memcpy(out->triangles + 3 * a++, m->tri + 3 * i, 3 * sizeof(uint32_t));
        }
    }
    free(tn);
    free(partner);
    free(taken);
    pmi_adj_free(&vt);
    return s;
}
