/* Quadric edge-collapse decimation by meshoptimizer (meshopt_simplify,
 * Debian libmeshoptimizer-dev; optional, PM_HAVE_MESHOPTIMIZER). The
 * simplifier runs on one thread and is deterministic; unused vertices are
 * then dropped in their order. */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/post_cpu.h"

#ifdef PM_HAVE_MESHOPTIMIZER
#include <meshoptimizer.h>

int pmi_have_meshoptimizer(void) { return 1; }

pm_status pmi_cpu_simplify(int threads, pmi_hmesh *m, size_t target_triangles, double target_error,
                           double *result_error)
{
    if (result_error) *result_error = 0;
    if (m->nt == 0) return PM_STATUS_OK;
    size_t nidx = 3 * m->nt;
    size_t target_idx = target_triangles ? 3 * target_triangles : 0;
    if (target_idx > nidx) target_idx = nidx;
    /* No error bound: any error; no count target: as few as the bound allows. */
    float err = target_error > 0 ? (float)target_error : 1e30f;
    unsigned int *dst = malloc(nidx * sizeof *dst);
    if (!dst) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_simplify: out of memory");
    float reached = 0;
    size_t n = meshopt_simplify(dst, m->tri, nidx, m->pos, m->nv, 3 * sizeof(float), target_idx,
                                err, 0, &reached);
    memcpy(m->tri, dst, n * sizeof *dst);
    free(dst);
    m->nt = n / 3;
    if (result_error) *result_error = reached;
    uint8_t *keep = malloc(m->nt ? m->nt : 1);
    if (!keep) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_simplify: out of memory");
    memset(keep, 1, m->nt ? m->nt : 1);
    pm_status s = pmi_cpu_keep_triangles(threads, m, keep, 0, NULL);
    free(keep);
    /* meshoptimizer may pinch the surface (two sheets meeting on an edge
     * or at a vertex): split those vertices per fan, and drop the slivers
     * of fewer than 5 triangles such a split leaves. */
    if (s == PM_STATUS_OK) s = pmi_cpu_split_fans(threads, m, 5, NULL);
    return s;
}

#else

int pmi_have_meshoptimizer(void) { return 0; }

pm_status pmi_cpu_simplify(int threads, pmi_hmesh *m, size_t target_triangles, double target_error,
                           double *result_error)
{
    (void)threads;
    (void)m;
    (void)target_triangles;
    (void)target_error;
    (void)result_error;
    return pmi_error(PM_STATUS_UNSUPPORTED, "pm_mesh_simplify: this build has no meshoptimizer "
                                            "(install libmeshoptimizer-dev and rebuild)");
}

#endif
