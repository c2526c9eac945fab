/* The CPU runner of the data-parallel post-processing steps
 * (core/post_rules.h: adjacency, vertex normals, normal smoothing,
 * Laplacian and Taubin steps, the AABB clip, SPH interpolation), one
 * OpenMP loop per step, and the area-weighted vertex normals the
 * sequential CPU runners use (cleanup, checks). Each element's result
 * depends only on sorted lists, so any thread count gives the same bytes,
 * and the CUDA runner (src/cuda/postprocess.cu) the same bytes too. */
#include <stdlib.h>
#include <string.h>

#include "core/post_rules.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

pm_status pmi_cpu_post_step(int threads, int step, size_t n, const pmi_post_args *args)
{
    const pmi_post_args a = *args;
    const long long count = (long long)n;
    /* Short steps on one thread: a parallel region costs more than them
     * (the result is the same for any thread count). */
    if (n < 8192) threads = 1;
    switch (step) {
    case PMI_POST_VT_SORT:
    case PMI_POST_NB_FILL:
    case PMI_POST_SPH_NORMAL:
    case PMI_POST_SPH_INTERP:
    case PMI_POST_SPH_WNN:
    case PMI_POST_SPH_WEIGHT:
    case PMI_POST_SPH_VOLUME:
        /* Costs vary per element: dynamic chunks. */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1024)
        for (long long i = 0; i < count; i++)
            pmi_post_step(step, (size_t)i, &a);
        break;
    default:
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long long i = 0; i < count; i++)
            pmi_post_step(step, (size_t)i, &a);
    }
    return PM_STATUS_OK;
}

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
                             "pm_mesh_compute_normals: no memory for %zu normals", m->nv);
        }
    }
    const long long snv = (long long)m->nv;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long v = 0; v < snv; v++)
        pmi_post_vertex_normal(m->pos, m->tri, vt.off, vt.list, (size_t)v, nrm + 3 * (size_t)v);
    pmi_adj_free(&vt);
    m->nrm = nrm;
    return PM_STATUS_OK;
}
