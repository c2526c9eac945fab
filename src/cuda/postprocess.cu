/* Mesh post-processing on the GPU: each data-parallel step of
 * src/core/post_rules.h as a kernel, one thread per element, queued on the
 * context's stream (src/core/postprocess.c drives them: adjacency rows,
 * vertex normals, normal smoothing, Laplacian and Taubin steps, the AABB
 * clip, SPH normals, interpolation and smoothing weights), and the SPH
 * interpolator's particle grid: the particles checked and their box found
 * (exact float min/max by atomics on order-preserving keys), the cells of
 * edge h laid out by the CPU's rule (pmi_post_grid_layout), the particles
 * sorted by cell with a stable radix sort of (cell, input index) pairs
 * (CUB), so that cells list their particles in input order as the CPU's
 * counting sort does, and their volumes by the per-slot rule. Every sum
 * has the CPU's terms in the CPU's order (--fmad=false): the same bytes.
 * The step is a template parameter, so each kernel holds only its step. */
#include <math.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "cuda/cuda_internal.h"
#include "cuda/density_internal.cuh"

extern "C" {
#include "core/post_rules.h"
}

template <int STEP> static __global__ void post_step_kernel(size_t n, pmi_post_args a)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pmi_post_step(STEP, i, &a);
}

template <int STEP> static pm_status post_launch(pm_context *ctx, size_t n, const pmi_post_args *a)
{
    const unsigned threads = 128;
    const size_t blocks = (n + threads - 1) / threads;
    if (blocks > 0x7fffffffull)
        return pmi_error(PM_STATUS_OVERFLOW, "mesh post-processing: %zu elements in one step", n);
    post_step_kernel<STEP><<<(unsigned)blocks, threads, 0, pmi_cuda(ctx)->stream>>>(n, *a);
    return pmi_cuda_launched("mesh post-processing");
}

extern "C" pm_status pmi_cuda_post_step(pm_context *ctx, int step, size_t n, const pmi_post_args *a)
{
    if (n == 0) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_begin(ctx));
    switch (step) {
    case PMI_POST_ZERO_U32: return post_launch<PMI_POST_ZERO_U32>(ctx, n, a);
    case PMI_POST_COPY_U32: return post_launch<PMI_POST_COPY_U32>(ctx, n, a);
    case PMI_POST_CHECK_INDEX: return post_launch<PMI_POST_CHECK_INDEX>(ctx, n, a);
    case PMI_POST_VT_COUNT: return post_launch<PMI_POST_VT_COUNT>(ctx, n, a);
    case PMI_POST_VT_FILL: return post_launch<PMI_POST_VT_FILL>(ctx, n, a);
    case PMI_POST_VT_SORT: return post_launch<PMI_POST_VT_SORT>(ctx, n, a);
    case PMI_POST_NB_FILL: return post_launch<PMI_POST_NB_FILL>(ctx, n, a);
    case PMI_POST_NB_COMPACT: return post_launch<PMI_POST_NB_COMPACT>(ctx, n, a);
    case PMI_POST_NORMAL: return post_launch<PMI_POST_NORMAL>(ctx, n, a);
    case PMI_POST_SMOOTH_NORMAL: return post_launch<PMI_POST_SMOOTH_NORMAL>(ctx, n, a);
    case PMI_POST_LAPLACE: return post_launch<PMI_POST_LAPLACE>(ctx, n, a);
    case PMI_POST_CLIP_KEEP: return post_launch<PMI_POST_CLIP_KEEP>(ctx, n, a);
    case PMI_POST_CLIP_MARK: return post_launch<PMI_POST_CLIP_MARK>(ctx, n, a);
    case PMI_POST_CLIP_TRI: return post_launch<PMI_POST_CLIP_TRI>(ctx, n, a);
    case PMI_POST_CLIP_VERT: return post_launch<PMI_POST_CLIP_VERT>(ctx, n, a);
    case PMI_POST_SPH_NORMAL: return post_launch<PMI_POST_SPH_NORMAL>(ctx, n, a);
    case PMI_POST_SPH_INTERP: return post_launch<PMI_POST_SPH_INTERP>(ctx, n, a);
    case PMI_POST_SPH_NEED: return post_launch<PMI_POST_SPH_NEED>(ctx, n, a);
    case PMI_POST_SPH_WNN: return post_launch<PMI_POST_SPH_WNN>(ctx, n, a);
    case PMI_POST_SPH_WEIGHT: return post_launch<PMI_POST_SPH_WEIGHT>(ctx, n, a);
    case PMI_POST_SPH_VOLUME: return post_launch<PMI_POST_SPH_VOLUME>(ctx, n, a);
    default: break;
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "mesh post-processing: unknown step %d", step);
}

/* ---- the SPH interpolator's grid ----------------------------------------- */

static __device__ __forceinline__ bool sg_in(const float *q, int aabb, double3 mn, double3 mx)
{
    return !aabb || (q[0] >= mn.x && q[0] <= mx.x && q[1] >= mn.y && q[1] <= mx.y && q[2] >= mn.z &&
                     q[2] <= mx.z);
}

/* Cell key per particle (dropped ones: ncells, sorted last), value = its
 * index, and the per-cell counts. */
static __global__ void sg_cells_kernel(const float *xyz, long long n, int aabb, double3 mn,
                                       double3 mx, pmi_post_grid g, uint32_t *keys, uint32_t *vals,
                                       uint32_t *counts)
{
    const long long ncells = g.cd[0] * g.cd[1] * g.cd[2];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float *q = xyz + 3 * i;
        uint32_t c = (uint32_t)ncells;
        if (sg_in(q, aabb, mn, mx)) {
            long long cc[3];
            pmi_post_cell(&g, q, cc);
            c = (uint32_t)((cc[2] * g.cd[1] + cc[1]) * g.cd[0] + cc[0]);
            atomicAdd(&counts[c], 1u);
        }
        keys[i] = c;
        vals[i] = (uint32_t)i;
    }
}

static unsigned sg_blocks(long long n)
{
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

/* Device buffers of one build, freed together unless handed over. */
typedef struct sg_bufs {
    void *p[10];
    int n;
} sg_bufs;

static pm_status sg_alloc(sg_bufs *b, size_t bytes, void *out, const char *what)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY
                                                        : PM_STATUS_DEVICE_ERROR,
                         "pm_sph_interpolator_create: cannot allocate %zu bytes of device memory "
                         "for %s (%s)",
                         bytes, what, cudaGetErrorString(e));
    }
    b->p[b->n++] = p;
    *(void **)out = p;
    return PM_STATUS_OK;
}

static void sg_keep(sg_bufs *b, void *p)
{
    for (int i = 0; i < b->n; i++)
        if (b->p[i] == p) b->p[i] = NULL;
}

static void sg_free(sg_bufs *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->p[i]) cudaFree(b->p[i]);
    b->n = 0;
    cudaGetLastError();
}

static pm_status sg_build(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                          pm_sph_interpolator *ip, sg_bufs *bufs)
{
    const char *fn = "pm_sph_interpolator_create";
    cudaStream_t st = pmi_cuda(ctx)->stream;
    const int aabb = p->use_aabb;
    const double3 mn = make_double3(p->aabb_min[0], p->aabb_min[1], p->aabb_min[2]);
    const double3 mx = make_double3(p->aabb_max[0], p->aabb_max[1], p->aabb_max[2]);
    const double h = 2.0 * p->smoothing_length * p->radius;
    if (n > 0x7fffffffull) /* CUB's item counts are int */
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles, at most 2^31 - 1 on the GPU", fn,
                         n);

    /* Checks, kept count and box (shared with the density grid). */
    unsigned long long *res = NULL;
    PMI_TRY(sg_alloc(bufs, 64, &res, "the particle checks"));
    pmi_particle_box box;
    PMI_TRY(pmi_cuda_particle_box(ctx, xyz, n, aabb, mn, mx, res,
                                  "pm_sph_interpolator_create: particle checks", &box));
    if (box.first_bad != ~0ull)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: particle %llu has a non-finite coordinate", fn, box.first_bad);
    const size_t kept = box.kept;
    if (kept == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: every particle lies outside the aabb",
                         fn);
    const double *bmin = box.bmin, *bmax = box.bmax;

    /* The CPU's layout (src/cpu/sph_interp.c). */
    pmi_post_grid *g = &ip->g;
    long long lo[3];
    if (!pmi_post_grid_layout(bmin, bmax, h, lo, g->cd, g->origin))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: coordinates too large for the kernel radius %g", fn, h);
    const double ncells_d = (double)g->cd[0] * (double)g->cd[1] * (double)g->cd[2];
    if (ncells_d >= (double)UINT32_MAX)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %.0f neighbour cells of edge %g over the particles' box are too "
                         "many",
                         fn, ncells_d, h);
    const size_t ncells = (size_t)ncells_d;
    g->h = h;
    g->mass = pmi_sph_mass(p->radius, p->rest_density);
    g->n = n;
    g->kept = kept;

    uint32_t *keys = NULL, *vals = NULL, *skeys = NULL, *svals = NULL, *counts = NULL,
             *start = NULL;
    float *sxyz = NULL;
    double *vol = NULL;
    PMI_TRY(sg_alloc(bufs, n * 4, &keys, "cell keys"));
    PMI_TRY(sg_alloc(bufs, n * 4, &vals, "particle indices"));
    PMI_TRY(sg_alloc(bufs, n * 4, &skeys, "sorted cell keys"));
    PMI_TRY(sg_alloc(bufs, n * 4, &svals, "sorted particle indices"));
    PMI_TRY(sg_alloc(bufs, (ncells + 1) * 4, &counts, "cell counts"));
    PMI_TRY(sg_alloc(bufs, (ncells + 1) * 4, &start, "cell starts"));
    PMI_TRY(sg_alloc(bufs, kept * 12, &sxyz, "sorted positions"));
    PMI_TRY(sg_alloc(bufs, kept * 8, &vol, "particle volumes"));
    PMI_CU_TRY(cudaMemsetAsync(counts, 0, (ncells + 1) * 4, st), fn);
    sg_cells_kernel<<<sg_blocks((long long)n), 256, 0, st>>>(xyz, (long long)n, aabb, mn, mx, *g,
                                                             keys, vals, counts);
    PMI_TRY(pmi_cuda_launched("pm_sph_interpolator_create: cell keys"));
    /* Cell starts: the project's scan over the counts (counts[ncells] = 0,
     * so start[ncells] is the kept count); the order inside cells from a
     * stable radix sort of (cell, index) pairs. */
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, counts, ncells + 1, start, NULL));
    int end_bit = 1;
    while (end_bit < 32 && (1ull << end_bit) <= (unsigned long long)ncells)
        end_bit++;
    size_t tb = 0;
    PMI_CU_TRY(
        cub::DeviceRadixSort::SortPairs(NULL, tb, keys, skeys, vals, svals, (int)n, 0, end_bit, st),
        "pm_sph_interpolator_create: sort size");
    void *tmp = NULL;
    PMI_TRY(sg_alloc(bufs, tb, &tmp, "sort scratch"));
    PMI_CU_TRY(
        cub::DeviceRadixSort::SortPairs(tmp, tb, keys, skeys, vals, svals, (int)n, 0, end_bit, st),
        "pm_sph_interpolator_create: cell sort");
    PMI_TRY(pmi_cuda_gather_xyz(ctx, xyz, svals, (long long)kept, sxyz,
                                "pm_sph_interpolator_create: gather"));
    g->start = start;
    g->xyz = sxyz;
    g->input = svals;
    pmi_post_args a;
    memset(&a, 0, sizeof a);
    a.g = *g;
    a.slot_d = vol;
    PMI_TRY(pmi_cuda_post_step(ctx, PMI_POST_SPH_VOLUME, kept, &a));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_sph_interpolator_create"));
    g->vol = vol;
    ip->own[0] = start;
    ip->own[1] = sxyz;
    ip->own[2] = vol;
    ip->own[3] = svals;
    for (int k = 0; k < 4; k++)
        sg_keep(bufs, ip->own[k]);
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_sph_build(pm_context *ctx, const float *xyz, size_t n,
                                        const pm_field_params *p, pm_sph_interpolator *ip)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    sg_bufs bufs;
    memset(&bufs, 0, sizeof bufs);
    pm_status s = sg_build(ctx, xyz, n, p, ip, &bufs);
    if (s != PM_STATUS_OK) pmi_cuda_wait(ctx, "pm_sph_interpolator_create");
    sg_free(&bufs);
    return s;
}
