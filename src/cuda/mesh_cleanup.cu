/* The marching-cubes cleanup on the GPU (the backend table's mc_cleanup):
 * the steps of src/core/cleanup_rules.h, each a kernel of one thread per
 * vertex, triangle or cluster, in the order the CPU runner
 * (src/cpu/mesh_cleanup.c) runs its loops: the vertex -> triangle rows
 * (the post-processing steps of src/core/post_rules.h and the project's
 * scan), lattice points, the input check with the clusters' union-find,
 * their roots and members, the lower-priority neighbours, then sweeps of rounds (select,
 * process) until the sweep's clusters are done, and the result compacted
 * by scans of keep flags. The host waits once per round for the count of
 * processed clusters. Every value is the CPU's (the same rule on the same
 * data; sums in the rule's order, --fmad=false): the same bytes. */
#include <string.h>

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/cleanup_rules.h"
#include "cpu/post_cpu.h"
}

/* A post-processing step on device memory (postprocess.cu). */
extern "C" pm_status pmi_cuda_post_step(pm_context *ctx, int step, size_t n,
                                        const struct pmi_post_args *args);

enum {
    CL_VERTEX,
    CL_CHECK_UNION,
    CL_ROOT,
    CL_ROOT_SET,
    CL_MEMBER_COUNT,
    CL_MEMBER_FILL,
    CL_MEMBER_SORT,
    CL_CLUSTER_LIST,
    CL_NEIGHBOURS,
    CL_SWEEP,
    CL_SELECT,
    CL_PROCESS,
    CL_VERT_FLAG,
    CL_TRI_FLAG,
    CL_VERT_OUT,
    CL_TRI_OUT
};

template <int STEP> static __global__ void clean_kernel(size_t n, pmi_clean_args a)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    switch (STEP) {
    case CL_VERTEX: pmi_clean_vertex(&a, i); break;
    case CL_CHECK_UNION:
        pmi_clean_check(&a, i);
        pmi_clean_union(&a, i);
        break;
    case CL_ROOT: pmi_clean_root(&a, i); break;
    case CL_ROOT_SET: pmi_clean_root_set(&a, i); break;
    case CL_MEMBER_COUNT: pmi_clean_member_count(&a, i); break;
    case CL_MEMBER_FILL: pmi_clean_member_fill(&a, i); break;
    case CL_MEMBER_SORT:
        pmi_clean_member_sort(&a, i);
        pmi_clean_cluster_flag(&a, i);
        break;
    case CL_CLUSTER_LIST: pmi_clean_cluster_list(&a, i); break;
    case CL_NEIGHBOURS: pmi_clean_neighbours(&a, i); break;
    case CL_SWEEP:
        if (pmi_clean_sweep(&a, i)) atomicAdd(a.counter + 2, 1ull);
        break;
    case CL_SELECT: pmi_clean_select(&a, i); break;
    case CL_PROCESS: pmi_clean_process(&a, i); break;
    case CL_VERT_FLAG: pmi_clean_vert_flag(&a, i); break;
    case CL_TRI_FLAG: pmi_clean_tri_flag(&a, i); break;
    case CL_VERT_OUT: pmi_clean_vert_out(&a, i); break;
    case CL_TRI_OUT: pmi_clean_tri_out(&a, i); break;
    default: break;
    }
}

template <int STEP>
static pm_status clean_launch(pm_context *ctx, size_t n, const pmi_clean_args *a)
{
    if (n == 0) return PM_STATUS_OK;
    const unsigned threads = 128;
    const size_t blocks = (n + threads - 1) / threads;
    if (blocks > 0x7fffffffull)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_mesh_mc_cleanup: %zu elements in one step", n);
    clean_kernel<STEP><<<(unsigned)blocks, threads, 0, pmi_cuda(ctx)->stream>>>(n, *a);
    return pmi_cuda_launched("pm_mesh_mc_cleanup");
}

/* Device buffers of one run, freed together unless handed over. */
typedef struct cl_bufs {
    void *p[32];
    int n;
} cl_bufs;

static pm_status cl_alloc(cl_bufs *b, size_t count, size_t elem, void *out)
{
    size_t bytes;
    *(void **)out = NULL;
    if (!pmi_mul_size(count ? count : 1, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_mesh_mc_cleanup: %zu elements overflow", count);
    if (b->n == (int)(sizeof b->p / sizeof b->p[0]))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_mc_cleanup: too many buffers");
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY
                                                        : PM_STATUS_DEVICE_ERROR,
                         "pm_mesh_mc_cleanup: cannot allocate %zu bytes of device memory (%s)",
                         bytes, cudaGetErrorString(e));
    }
    b->p[b->n++] = p;
    *(void **)out = p;
    return PM_STATUS_OK;
}

static void cl_keep(cl_bufs *b, const void *p)
{
    for (int i = 0; i < b->n; i++)
        if (b->p[i] == p) b->p[i] = NULL;
}

static void cl_free(cl_bufs *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->p[i]) cudaFree(b->p[i]);
    b->n = 0;
    cudaGetLastError();
}

/* The counters (4 words) to the host. */
static pm_status cl_counters(pm_context *ctx, const unsigned long long *dev,
                             unsigned long long host[4])
{
    PMI_CU_TRY(
        cudaMemcpyAsync(host, dev, 4 * sizeof *host, cudaMemcpyDeviceToHost, pmi_cuda(ctx)->stream),
        "pm_mesh_mc_cleanup: counters");
    return pmi_cuda_wait(ctx, "pm_mesh_mc_cleanup");
}

static pm_status cl_run(pm_context *ctx, pmi_hmesh *m, const pm_mc_cleanup_options *o,
                        cl_bufs *bufs)
{
    const char *fn = "pm_mesh_mc_cleanup";
    cudaStream_t st = pmi_cuda(ctx)->stream;
    const size_t nv = m->nv, nt = m->nt;
    if (nv >= PMI_CLEAN_NONE || nt > (size_t)(UINT32_MAX / 6))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu vertices, %zu triangles: indices are 32-bit",
                         fn, nv, nt);
    pmi_clean_args a;
    const int max_iter = pmi_clean_args_init(&a, nv, nt, m->pos, m->nrm, o);
    const size_t nmax = nv > nt ? nv : nt;

    uint32_t *vt_off = NULL, *vt_list = NULL;
    PMI_TRY(cl_alloc(bufs, 3 * nt, 4, &a.tri));
    PMI_TRY(cl_alloc(bufs, 3 * nv, 8, &a.g));
    PMI_TRY(cl_alloc(bufs, nv, 4, &a.label));
    PMI_TRY(cl_alloc(bufs, nv, 4, &a.rep));
    PMI_TRY(cl_alloc(bufs, nv + 1, 4, &a.cnt));
    PMI_TRY(cl_alloc(bufs, nv + 1, 4, &a.cursor));
    PMI_TRY(cl_alloc(bufs, nv + 1, 4, &a.moff));
    PMI_TRY(cl_alloc(bufs, nv, 4, &a.mlist));
    PMI_TRY(cl_alloc(bufs, nv, 4, &a.cl));
    PMI_TRY(cl_alloc(bufs, nv, 1, &a.pend));
    PMI_TRY(cl_alloc(bufs, nv, 1, &a.go));
    PMI_TRY(cl_alloc(bufs, nmax + 1, 4, &a.flag));
    PMI_TRY(cl_alloc(bufs, nmax + 1, 4, &a.off));
    PMI_TRY(cl_alloc(bufs, nv, 4, &a.vmap));
    PMI_TRY(cl_alloc(bufs, nv + 1, 4, &vt_off));
    PMI_TRY(cl_alloc(bufs, 3 * nt, 4, &vt_list));
    PMI_TRY(cl_alloc(bufs, 4, 8, &a.counter));
    PMI_TRY(cl_alloc(bufs, 1, 8, &a.error));

    /* The vertex -> triangle rows of the input (the post-processing steps,
     * as pm_mesh_compute_normals builds them). */
    {
        pmi_post_args p;
        memset(&p, 0, sizeof p);
        p.nv = nv;
        p.nt = nt;
        p.tri = m->tri;
        p.cnt = a.cnt;
        p.cursor = a.cursor;
        p.vt_off = vt_off;
        p.vt_list = vt_list;
        p.dst = a.cnt;
        PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_ZERO_U32, nv + 1, &p));
        PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_VT_COUNT, 3 * nt, &p));
        PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, a.cnt, nv + 1, vt_off, NULL));
        p.dst = a.cursor;
        PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_ZERO_U32, nv, &p));
        PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_VT_FILL, 3 * nt, &p));
        PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_VT_SORT, nv, &p));
    }
    a.vt_off = vt_off;
    a.vt_list = vt_list;
    PMI_CU_TRY(
        cudaMemcpyAsync(a.tri, m->tri, 3 * nt * sizeof(uint32_t), cudaMemcpyDeviceToDevice, st),
        fn);
    PMI_CU_TRY(cudaMemsetAsync(a.pend, 0, nv, st), fn);
    PMI_CU_TRY(cudaMemsetAsync(a.error, 0xff, 8, st), fn);
    PMI_CU_TRY(cudaMemsetAsync(a.counter, 0, 32, st), fn);

    /* Lattice points; the input checked and the clusters joined (one pass
     * over the rows, as the CPU runner). */
    PMI_TRY(clean_launch<CL_VERTEX>(ctx, nv, &a));
    PMI_TRY(clean_launch<CL_CHECK_UNION>(ctx, nv, &a));
    unsigned long long err = 0;
    PMI_CU_TRY(cudaMemcpyAsync(&err, a.error, 8, cudaMemcpyDeviceToHost, st), fn);
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    if (err != ~0ull) {
        uint32_t c[3];
        PMI_CU_TRY(cudaMemcpyAsync(c, m->tri + 3 * (size_t)(err >> 34), sizeof c,
                                   cudaMemcpyDeviceToHost, st),
                   fn);
        PMI_TRY(pmi_cuda_wait(ctx, fn));
        return pmi_clean_invalid(c, err, fn);
    }

    /* Roots, members, the cluster list. */
    PMI_TRY(clean_launch<CL_ROOT>(ctx, nv, &a));
    PMI_TRY(clean_launch<CL_ROOT_SET>(ctx, nv, &a));
    PMI_CU_TRY(cudaMemsetAsync(a.cnt, 0, (nv + 1) * 4, st), fn);
    PMI_CU_TRY(cudaMemsetAsync(a.cursor, 0, nv * 4, st), fn);
    PMI_TRY(clean_launch<CL_MEMBER_COUNT>(ctx, nv, &a));
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, a.cnt, nv + 1, a.moff, NULL));
    PMI_TRY(clean_launch<CL_MEMBER_FILL>(ctx, nv, &a));
    PMI_TRY(clean_launch<CL_MEMBER_SORT>(ctx, nv, &a));
    uint64_t ncl64 = 0;
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, a.flag, nv, a.off, &ncl64));
    const size_t ncl = (size_t)ncl64;
    PMI_TRY(clean_launch<CL_CLUSTER_LIST>(ctx, nv, &a));
    PMI_TRY(cl_alloc(bufs, 16 * ncl, 4, &a.nb));
    PMI_TRY(clean_launch<CL_NEIGHBOURS>(ctx, ncl, &a));

    /* Sweeps of rounds. */
    for (int it = 0; it < max_iter && ncl > 0; it++) {
        unsigned long long h[4];
        PMI_CU_TRY(cudaMemsetAsync(a.counter, 0, 32, st), fn);
        PMI_TRY(clean_launch<CL_SWEEP>(ctx, ncl, &a));
        PMI_TRY(cl_counters(ctx, a.counter, h));
        const unsigned long long pending = h[2];
        if (pending == 0) break;
        unsigned long long processed = 0;
        while (processed < pending) {
            PMI_TRY(clean_launch<CL_SELECT>(ctx, ncl, &a));
            PMI_TRY(clean_launch<CL_PROCESS>(ctx, ncl, &a));
            PMI_TRY(cl_counters(ctx, a.counter, h));
            if (h[1] <= processed)
                return pmi_error(PM_STATUS_DEVICE_ERROR, "%s: a round processed no cluster", fn);
            processed = h[1];
        }
        if (h[0] == 0) break;
    }

    /* The result. */
    uint64_t nv2 = 0, nt2 = 0;
    PMI_TRY(clean_launch<CL_VERT_FLAG>(ctx, nv, &a));
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, a.flag, nv, a.vmap, &nv2));
    PMI_TRY(clean_launch<CL_TRI_FLAG>(ctx, nt, &a));
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, a.flag, nt, a.off, &nt2));
    PMI_TRY(cl_alloc(bufs, 3 * (size_t)nv2, 4, &a.pos_out));
    PMI_TRY(cl_alloc(bufs, 3 * (size_t)nt2, 4, &a.tri_out));
    if (m->nrm) PMI_TRY(cl_alloc(bufs, 3 * (size_t)nv2, 4, &a.nrm_out));
    PMI_TRY(clean_launch<CL_VERT_OUT>(ctx, nv, &a));
    PMI_TRY(clean_launch<CL_TRI_OUT>(ctx, nt, &a));
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    cl_keep(bufs, a.pos_out);
    cl_keep(bufs, a.tri_out);
    cl_keep(bufs, a.nrm_out);
    ctx->backend->free(ctx, m->pos);
    ctx->backend->free(ctx, m->tri);
    if (m->nrm) ctx->backend->free(ctx, m->nrm);
    m->pos = a.pos_out;
    m->tri = a.tri_out;
    m->nrm = a.nrm_out;
    m->nv = (size_t)nv2;
    m->nt = (size_t)nt2;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_mc_cleanup(pm_context *ctx, pmi_hmesh *m,
                                         const pm_mc_cleanup_options *o)
{
    if (m->nt == 0) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_begin(ctx));
    cl_bufs bufs;
    memset(&bufs, 0, sizeof bufs);
    pm_status s = cl_run(ctx, m, o, &bufs);
    if (s != PM_STATUS_OK) pmi_cuda_wait(ctx, "pm_mesh_mc_cleanup");
    cl_free(&bufs);
    return s;
}
