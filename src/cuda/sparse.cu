/* Sparse SPH reconstruction on the GPU (docs/scale.md). The plan is made
 * on the context's GPU: the particles' checks and box, their 64-bit
 * neighbour-cell keys (src/core/sparse.h), a stable radix sort of (key,
 * input index), the sorted positions, the occupied cells (runs of equal
 * keys) and the bricks their particles reach (sorted, unique): the CPU
 * plan's arrays (src/cpu/sparse.c), element for element. The sorted
 * particles and occupied cells stay on that GPU, are copied once to every
 * other GPU that meshes bricks, and the host keeps the occupied cells and
 * the brick keys. Then brick by brick on the device: the brick's
 * particles gathered from those arrays, the dense path's kernels
 * (density.cu) over a small dense grid of the brick's cells, and the
 * brick's piece (piece.cu).
 *
 * A brick's grid is the neighbour cells holding its field window and two
 * more on each side, anchored at whole cells of the global lattice. Its
 * particles are those cells', by cell, then input index (the dense path's
 * slot order, as pmi_sparse_local_build lays them out on the CPU), and
 * the cells are numbered from the global keys, never recomputed from
 * coordinates, so every particle sits in the cell the dense path gives it.
 * A window point sums the particles of its cell and the next (one ring),
 * whose volumes sum theirs (a second ring): every term of every window
 * point is the dense path's, in the same order, so the field there is the
 * same bits (the particles of the outer ring get incomplete volumes, which
 * no window point reads). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "cuda/density_internal.cuh"
extern "C" {
#include "cpu/sparse.h"
}

/* The plan's sorted particles and occupied cells on one GPU. */
typedef struct sp_gpu {
    int ready;
    float *xyz;
    unsigned long long *ckey;
    uint32_t *cstart;
} sp_gpu;

/* plan->device: the plan's arrays on the GPU that made it (home), a copy
 * per other GPU, made by the first worker on it, the occupied cells on the
 * host (each brick's particle count is found there), and the host blocks
 * that hold the pieces' arrays (freed with the plan). */
typedef struct sp_shared {
    pthread_mutex_t mu;
    void **blocks;
    size_t nblocks, cap_blocks;
    size_t n, m;      /* sorted particles, occupied cells */
    uint64_t *ckey;   /* host: the occupied cells' keys, ascending */
    uint32_t *cstart; /* host: their first slots, m + 1 */
    int home, ndev;
    sp_gpu gpu[1]; /* ndev of them */
} sp_shared;

/* Device buffers reused from brick to brick (grown as needed; the
 * context's stream-ordered scratch). */
typedef struct sp_dev {
    float *xyz;
    uint32_t *cell, *start, *count, *first;
    double *vol;
    float *field;
    void *tmp;
    size_t cap_n, cap_cells, cap_points, cap_tmp;
} sp_dev;

static void sp_dev_free(pm_context *ctx, sp_dev *D)
{
    void *const p[] = {D->xyz, D->cell, D->start, D->count, D->first, D->vol, D->field, D->tmp};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ctx->backend->scratch_free(ctx, p[i]);
    memset(D, 0, sizeof *D);
}

/* Frees *p and allocates `bytes` (reserve's step). */
static pm_status sp_realloc(pm_context *ctx, void **p, size_t bytes)
{
    ctx->backend->scratch_free(ctx, *p);
    *p = NULL;
    return ctx->backend->scratch_alloc(ctx, bytes, p);
}

/* Room for n slots, ncells cells and points lattice points. */
static pm_status sp_dev_reserve(pm_context *ctx, sp_dev *D, size_t n, size_t ncells, size_t points)
{
    if (n < 1) n = 1;
    if (n > D->cap_n) {
        size_t c = n + n / 4;
        D->cap_n = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->xyz, c * 3 * sizeof(float)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->cell, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->vol, c * sizeof(double)));
        D->cap_n = c;
    }
    if (ncells + 1 > D->cap_cells) {
        size_t c = ncells + 1;
        D->cap_cells = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->start, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->count, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->first, c * sizeof(uint32_t)));
        D->cap_cells = c;
    }
    const size_t tb = pmi_cuda_scan_tmp_bytes(ncells + 1) + 256;
    if (tb > D->cap_tmp) {
        D->cap_tmp = 0;
        PMI_TRY(sp_realloc(ctx, &D->tmp, tb));
        D->cap_tmp = tb;
    }
    if (points > D->cap_points) {
        D->cap_points = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->field, points * sizeof(float)));
        D->cap_points = points;
    }
    return PM_STATUS_OK;
}

/* The plan's arrays on the context's GPU: on the home GPU those the plan
 * made, elsewhere copied from them by the first worker on the GPU (the
 * others wait for it). */
static pm_status sp_gpu_get(pm_context *ctx, pmi_sparse_plan *plan, const sp_gpu **out)
{
    static const char fn[] = "pm_reconstruct: the sorted particles to another GPU";
    sp_shared *S = (sp_shared *)plan->device;
    const int d = pmi_cuda(ctx)->device;
    if (!S || d < 0 || d >= S->ndev)
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_reconstruct: device %d has no plan copy", d);
    pthread_mutex_lock(&S->mu);
    sp_gpu *g = &S->gpu[d];
    const sp_gpu *h = &S->gpu[S->home];
    pm_status s = PM_STATUS_OK;
    if (!g->ready) {
        cudaStream_t st = pmi_cuda(ctx)->stream;
        const size_t nb = (S->n ? S->n : 1) * 3 * sizeof(float), kb = (S->m ? S->m : 1) * 8,
                     sb = (S->m + 1) * 4;
        /* Direct copies over NVLink or PCIe where the GPUs allow it. */
        int peer = 0;
        if (cudaDeviceCanAccessPeer(&peer, d, S->home) == cudaSuccess && peer) {
            cudaError_t e = cudaDeviceEnablePeerAccess(S->home, 0);
            if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
                s = pmi_cuda_status(e, fn);
        }
        cudaGetLastError();
        if (s == PM_STATUS_OK && (cudaMalloc((void **)&g->xyz, nb) != cudaSuccess ||
                                  cudaMalloc((void **)&g->ckey, kb) != cudaSuccess ||
                                  cudaMalloc((void **)&g->cstart, sb) != cudaSuccess)) {
            cudaGetLastError();
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "%s: no device memory for %zu particles and %zu cells", fn, S->n, S->m);
        }
        cudaError_t e = cudaSuccess;
        if (s == PM_STATUS_OK) e = cudaMemcpyPeerAsync(g->xyz, d, h->xyz, S->home, nb, st);
        if (s == PM_STATUS_OK && e == cudaSuccess)
            e = cudaMemcpyPeerAsync(g->ckey, d, h->ckey, S->home, kb, st);
        if (s == PM_STATUS_OK && e == cudaSuccess)
            e = cudaMemcpyPeerAsync(g->cstart, d, h->cstart, S->home, sb, st);
        if (s == PM_STATUS_OK && e != cudaSuccess) s = pmi_cuda_status(e, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, fn);
        g->ready = s == PM_STATUS_OK;
        if (!g->ready) { /* a later worker tries again from nothing */
            cudaStreamSynchronize(st);
            cudaFree(g->xyz), cudaFree(g->ckey), cudaFree(g->cstart);
            cudaGetLastError();
            g->xyz = NULL, g->ckey = NULL, g->cstart = NULL;
        }
    }
    pthread_mutex_unlock(&S->mu);
    *out = g;
    return s;
}

/* A brick's cell box [c0, c0 + cd) in the global cells, and the key
 * shifts (pmi_cell_key). */
typedef struct sp_box {
    unsigned long long c0[3], cd[3];
    unsigned sh1, sh2;
} sp_box;

/* Each local cell's particle count and first sorted slot, from the
 * occupied cells' keys (0 for an empty cell). One thread per cell. */
static __global__ void sp_cells_kernel(const unsigned long long *ckey, unsigned long long m,
                                       const uint32_t *cstart, sp_box b, unsigned long long ncells,
                                       uint32_t *count, uint32_t *first)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= ncells) return;
    const unsigned long long x = i % b.cd[0], y = i / b.cd[0] % b.cd[1], z = i / (b.cd[0] * b.cd[1]);
    const unsigned long long key =
        (b.c0[2] + z) << b.sh2 | (b.c0[1] + y) << b.sh1 | (b.c0[0] + x);
    unsigned long long lo = 0, len = m;
    while (len > 0) {
        const unsigned long long half = len / 2;
        if (ckey[lo + half] < key) {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    const int hit = lo < m && ckey[lo] == key;
    count[i] = hit ? cstart[lo + 1] - cstart[lo] : 0;
    first[i] = hit ? cstart[lo] : 0;
}

/* The local slots: each cell's particles (from start[i], its exclusive
 * scan) and their cell; start[ncells] = n. One thread per cell. */
static __global__ void sp_gather_kernel(const float *gxyz, const uint32_t *count,
                                        const uint32_t *first, unsigned long long ncells,
                                        uint32_t n, uint32_t *start, float *xyz, uint32_t *cell)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i == 0) start[ncells] = n;
    if (i >= ncells) return;
    const uint32_t c = count[i], f = first[i], s = start[i];
    for (uint32_t k = 0; k < c; k++) {
        xyz[3 * (size_t)(s + k)] = gxyz[3 * (size_t)(f + k)];
        xyz[3 * (size_t)(s + k) + 1] = gxyz[3 * (size_t)(f + k) + 1];
        xyz[3 * (size_t)(s + k) + 2] = gxyz[3 * (size_t)(f + k) + 2];
        cell[s + k] = (uint32_t)i;
    }
}

/* ---- the plan ---------------------------------------------------------- */

/* Device arrays of the plan's making, from the context's stream-ordered
 * scratch (a frame's plan reuses the last one's memory without mapping
 * it again), freed at its end. */
typedef struct sp_tmp {
    pm_context *ctx;
    void *p[16];
    int n;
} sp_tmp;

static pm_status sp_tmp_alloc(sp_tmp *T, size_t bytes, void **out, const char *what)
{
    *out = NULL;
    if (T->n == (int)(sizeof T->p / sizeof T->p[0]) ||
        T->ctx->backend->scratch_alloc(T->ctx, bytes, out) != PM_STATUS_OK) {
        *out = NULL;
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: no device memory for %s (%zu bytes)", what, bytes);
    }
    T->p[T->n++] = *out;
    return PM_STATUS_OK;
}

/* Device memory of the plan's own (kept with it): freed with the plan. */
static pm_status sp_keep_alloc(void **out, size_t bytes, const char *what)
{
    if (cudaMalloc(out, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        *out = NULL;
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: no device memory for %s (%zu bytes)", what, bytes);
    }
    return PM_STATUS_OK;
}

static unsigned sp_blocks(unsigned long long n)
{
    const unsigned long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

/* Each particle's cell key (`drop`, above every key, for one outside the
 * aabb) and its input index: the CPU plan's keys (pmi_cell_of per axis). */
static __global__ void sp_keys_kernel(const float *xyz, unsigned long long n, int aabb,
                                      double3 amin, double3 amax, pmi_sparse_geom G, double edge,
                                      unsigned long long drop, unsigned long long *key,
                                      uint32_t *val)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const float q0 = xyz[3 * i], q1 = xyz[3 * i + 1], q2 = xyz[3 * i + 2];
        unsigned long long k = drop;
        if (!aabb || (q0 >= amin.x && q0 <= amax.x && q1 >= amin.y && q1 <= amax.y &&
                      q2 >= amin.z && q2 <= amax.z))
            k = pmi_cell_key(&G,
                             (uint64_t)pmi_cell_of(q0, G.origin[0], edge, (long long)G.cdims[0]),
                             (uint64_t)pmi_cell_of(q1, G.origin[1], edge, (long long)G.cdims[1]),
                             (uint64_t)pmi_cell_of(q2, G.origin[2], edge, (long long)G.cdims[2]));
        key[i] = k;
        val[i] = (uint32_t)i;
    }
}

/* The bricks an occupied cell's particles reach (pmi_cell_bricks): their
 * number (count, with emit NULL) or their keys from out[off[i]]. */
static __global__ void sp_bricks_kernel(const unsigned long long *ckey, unsigned long long m,
                                        pmi_sparse_geom G, unsigned long long *count,
                                        const unsigned long long *off, unsigned long long *out)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < m;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        uint64_t c[3], lo[3], hi[3], b[3];
        pmi_cell_unkey(&G, ckey[i], c);
        for (int a = 0; a < 3; a++)
            pmi_cell_bricks(&G, a, c[a], &lo[a], &hi[a]);
        if (!out) {
            count[i] = (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1);
            continue;
        }
        unsigned long long o = off[i];
        for (b[2] = lo[2]; b[2] <= hi[2]; b[2]++)
            for (b[1] = lo[1]; b[1] <= hi[1]; b[1]++)
                for (b[0] = lo[0]; b[0] <= hi[0]; b[0]++)
                    out[o++] = pmi_brick_key(&G, b);
    }
}

/* CUB's scratch for a call: the `tmp` block, grown when it is short. */
static pm_status sp_cub_tmp(sp_tmp *T, void **tmp, size_t *have, size_t need)
{
    if (need <= *have) return PM_STATUS_OK;
    PMI_TRY(sp_tmp_alloc(T, need, tmp, "the sort's scratch"));
    *have = need;
    return PM_STATUS_OK;
}

/* A device word read back (waits). */
static pm_status sp_read_word(pm_context *ctx, const unsigned long long *d, unsigned long long *h,
                              const char *what)
{
    PMI_CU_TRY(cudaMemcpyAsync(h, d, sizeof *h, cudaMemcpyDeviceToHost, pmi_cuda(ctx)->stream),
               what);
    return pmi_cuda_wait(ctx, what);
}

static pm_status sp_plan_build(pm_context *ctx, const float *xyz, size_t n,
                               const pm_field_params *p, size_t brick_points, pm_normals normals,
                               pmi_sparse_plan *plan, sp_shared *S, sp_tmp *T)
{
    static const char fn[] = "pm_reconstruct";
    cudaStream_t st = pmi_cuda(ctx)->stream;
    const double t0 = pmi_now_ms();
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no particles", fn);
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles, at most 4294967294 per call", fn,
                         n);
    size_t bytes;
    if (!pmi_mul3_size(n, 3, sizeof(float), &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles overflow", fn, n);

    /* The particles on this GPU: read where they are when they are here,
     * copied from the host (pinned staging) or another GPU otherwise. */
    cudaPointerAttributes pa;
    memset(&pa, 0, sizeof pa);
    if (cudaPointerGetAttributes(&pa, xyz) != cudaSuccess) pa.type = cudaMemoryTypeUnregistered;
    cudaGetLastError();
    const int here = (pa.type == cudaMemoryTypeDevice && pa.device == S->home) ||
                     pa.type == cudaMemoryTypeManaged;
    const float *dx = xyz;
    if (!here) {
        float *c;
        PMI_TRY(sp_tmp_alloc(T, bytes, (void **)&c, "the particles"));
        if (pa.type == cudaMemoryTypeDevice)
            PMI_CU_TRY(cudaMemcpyAsync(c, xyz, bytes, cudaMemcpyDefault, st),
                       "pm_reconstruct: the particles from another GPU");
        else
            PMI_TRY(pmi_cuda_copy_host(ctx, c, xyz, bytes, 0, "pm_reconstruct: the particles"));
        dx = c;
    }

    /* Checks, kept count and box (the CPU's pmi_particles_box). */
    unsigned long long *res;
    PMI_TRY(sp_tmp_alloc(T, 64, (void **)&res, "the particle checks"));
    const int aabb = p->use_aabb;
    const double3 amin = make_double3(p->aabb_min[0], p->aabb_min[1], p->aabb_min[2]);
    const double3 amax = make_double3(p->aabb_max[0], p->aabb_max[1], p->aabb_max[2]);
    pmi_particle_box box;
    PMI_TRY(pmi_cuda_particle_box(ctx, dx, n, aabb, amin, amax, res, fn, &box));
    if (box.first_bad != ~0ull) {
        float q[3] = {0, 0, 0};
        cudaMemcpy(q, dx + 3 * box.first_bad, sizeof q, cudaMemcpyDeviceToHost);
        cudaGetLastError();
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: particle %llu has a non-finite coordinate (%g, %g, %g)", fn,
                         box.first_bad, q[0], q[1], q[2]);
    }
    const size_t kept = box.kept;
    if (kept == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: all %zu particles lie outside the aabb (%g, %g, %g) .. (%g, %g, %g)",
                         fn, n, amin.x, amin.y, amin.z, amax.x, amax.y, amax.z);
    double bmin[3], bmax[3];
    for (int a = 0; a < 3; a++) {
        bmin[a] = plan->have_box ? plan->box_min[a] : box.bmin[a];
        bmax[a] = plan->have_box ? plan->box_max[a] : box.bmax[a];
    }
    pmi_sparse_geom *G = &plan->G;
    PMI_TRY(pmi_sparse_geom_init(p, bmin, bmax, brick_points, normals, G));
    plan->kept = kept;
    plan->dropped = n - kept;
    plan->h = G->rule.h;
    plan->mass = pmi_sph_mass(p->radius, p->rest_density);

    /* Keys sorted with their input indices (stable: ties in input order,
     * as the CPU's radix sort leaves them); the dropped ones sort last. */
    const unsigned cb = G->cshift[2] + pmi_bits_for(G->cdims[2]);
    int end_bit = (int)cb + (kept < n ? 1 : 0);
    if (end_bit < 1) end_bit = 1;
    const long long ln = (long long)n;
    size_t tmp_have = 0, need_b = 0;
    void *tmp = NULL;
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, need_b, (const unsigned long long *)NULL,
                                               (unsigned long long *)NULL, (const uint32_t *)NULL,
                                               (uint32_t *)NULL, ln, 0, end_bit, st),
               "pm_reconstruct: the sort's scratch");
    const double need = (here ? 0.0 : (double)bytes) + 24.0 * (double)n + (double)need_b +
                        24.0 * (double)kept;
    if (!(need <= (double)p->max_memory_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %zu particles need %.4g GB of device memory to sort, more than the "
                         "memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                         fn, n, need / 1e9, (double)p->max_memory_bytes / 1e9);
    unsigned long long *key, *skey;
    uint32_t *val, *sval;
    PMI_TRY(sp_tmp_alloc(T, n * 8, (void **)&key, "the cell keys"));
    PMI_TRY(sp_tmp_alloc(T, n * 8, (void **)&skey, "the sorted cell keys"));
    PMI_TRY(sp_tmp_alloc(T, (n + 1) * 4, (void **)&val, "the particle indices"));
    PMI_TRY(sp_tmp_alloc(T, n * 4, (void **)&sval, "the sorted particle indices"));
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    const unsigned long long drop = 1ull << cb;
    sp_keys_kernel<<<sp_blocks(n), 256, 0, st>>>(dx, n, aabb, amin, amax, *G,
                                                 (double)G->B * G->rule.s, drop, key, val);
    PMI_TRY(pmi_cuda_launched("pm_reconstruct: cell keys"));
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(tmp, need_b, key, skey, val, sval, ln, 0, end_bit,
                                               st),
               "pm_reconstruct: the particle sort");
    sp_gpu *g = &S->gpu[S->home];
    PMI_TRY(sp_keep_alloc((void **)&g->xyz, kept * 12, "the sorted particles"));
    PMI_TRY(pmi_cuda_gather_xyz(ctx, dx, sval, (long long)kept, g->xyz, fn));

    /* Occupied cells: the runs of equal keys (into key, their lengths into
     * val), their first slots by an exclusive scan. */
    const long long lk = (long long)kept;
    need_b = 0;
    PMI_CU_TRY(cub::DeviceRunLengthEncode::Encode(NULL, need_b, skey, key, val, res, lk, st),
               "pm_reconstruct: the cells' scratch");
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    PMI_CU_TRY(cub::DeviceRunLengthEncode::Encode(tmp, need_b, skey, key, val, res, lk, st),
               "pm_reconstruct: the occupied cells");
    unsigned long long m = 0;
    PMI_TRY(sp_read_word(ctx, res, &m, "pm_reconstruct: the occupied cells"));
    S->n = kept;
    S->m = (size_t)m;
    PMI_TRY(sp_keep_alloc((void **)&g->ckey, m * 8, "the occupied cells"));
    PMI_TRY(sp_keep_alloc((void **)&g->cstart, (m + 1) * 4, "the occupied cells' starts"));
    PMI_CU_TRY(cudaMemcpyAsync(g->ckey, key, m * 8, cudaMemcpyDeviceToDevice, st),
               "pm_reconstruct: the occupied cells");
    PMI_CU_TRY(cudaMemsetAsync(val + m, 0, 4, st), "pm_reconstruct: the occupied cells");
    need_b = 0;
    PMI_CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, need_b, val, g->cstart, (long long)m + 1, st),
               "pm_reconstruct: the cells' scratch");
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    PMI_CU_TRY(cub::DeviceScan::ExclusiveSum(tmp, need_b, val, g->cstart, (long long)m + 1, st),
               "pm_reconstruct: the occupied cells' starts");

    /* The bricks the particles reach: per cell, counted, placed by a scan,
     * written, sorted and made unique. */
    unsigned long long *bcount, *boff;
    PMI_TRY(sp_tmp_alloc(T, (m + 1) * 8, (void **)&bcount, "the bricks' counts"));
    PMI_TRY(sp_tmp_alloc(T, (m + 1) * 8, (void **)&boff, "the bricks' offsets"));
    PMI_CU_TRY(cudaMemsetAsync(bcount + m, 0, 8, st), "pm_reconstruct: the bricks");
    sp_bricks_kernel<<<sp_blocks(m), 256, 0, st>>>(g->ckey, m, *G, bcount, NULL, NULL);
    PMI_TRY(pmi_cuda_launched("pm_reconstruct: the bricks"));
    need_b = 0;
    PMI_CU_TRY(cub::DeviceScan::ExclusiveSum(NULL, need_b, bcount, boff, (long long)m + 1, st),
               "pm_reconstruct: the bricks' scratch");
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    PMI_CU_TRY(cub::DeviceScan::ExclusiveSum(tmp, need_b, bcount, boff, (long long)m + 1, st),
               "pm_reconstruct: the bricks");
    unsigned long long nb = 0;
    PMI_TRY(sp_read_word(ctx, boff + m, &nb, "pm_reconstruct: the bricks"));
    unsigned long long *bk, *bk2;
    PMI_TRY(sp_tmp_alloc(T, nb * 8, (void **)&bk, "the brick keys"));
    PMI_TRY(sp_tmp_alloc(T, nb * 8, (void **)&bk2, "the sorted brick keys"));
    sp_bricks_kernel<<<sp_blocks(m), 256, 0, st>>>(g->ckey, m, *G, NULL, boff, bk);
    PMI_TRY(pmi_cuda_launched("pm_reconstruct: the brick keys"));
    int bbit = (int)(G->bshift[2] + pmi_bits_for(G->bdims[2]));
    if (bbit < 1) bbit = 1;
    const long long lnb = (long long)nb;
    need_b = 0;
    PMI_CU_TRY(cub::DeviceRadixSort::SortKeys(NULL, need_b, (const unsigned long long *)NULL,
                                              (unsigned long long *)NULL, lnb, 0, bbit, st),
               "pm_reconstruct: the bricks' scratch");
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    PMI_CU_TRY(cub::DeviceRadixSort::SortKeys(tmp, need_b, bk, bk2, lnb, 0, bbit, st),
               "pm_reconstruct: the brick sort");
    need_b = 0;
    PMI_CU_TRY(cub::DeviceSelect::Unique(NULL, need_b, bk2, bk, res, lnb, st),
               "pm_reconstruct: the bricks' scratch");
    PMI_TRY(sp_cub_tmp(T, &tmp, &tmp_have, need_b));
    PMI_CU_TRY(cub::DeviceSelect::Unique(tmp, need_b, bk2, bk, res, lnb, st),
               "pm_reconstruct: the distinct bricks");
    unsigned long long u = 0;
    PMI_TRY(sp_read_word(ctx, res, &u, "pm_reconstruct: the distinct bricks"));

    /* To the host: the brick keys and the occupied cells. */
    plan->bricks = (uint64_t *)malloc((u ? u : 1) * 8);
    S->ckey = (uint64_t *)malloc((m ? m : 1) * 8);
    S->cstart = (uint32_t *)malloc((m + 1) * 4);
    if (!plan->bricks || !S->ckey || !S->cstart)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: no host memory for %llu bricks and %llu cells", fn, u, m);
    if (u) PMI_TRY(pmi_cuda_copy_host(ctx, plan->bricks, bk, u * 8, 1, fn));
    if (m) PMI_TRY(pmi_cuda_copy_host(ctx, S->ckey, g->ckey, m * 8, 1, fn));
    PMI_TRY(pmi_cuda_copy_host(ctx, S->cstart, g->cstart, (m + 1) * 4, 1, fn));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_reconstruct: the plan to the host"));
    g->ready = 1;
    plan->nbricks = (size_t)u;
    plan->occupied_cells = (size_t)m;
    plan->bytes = kept * 12 + (size_t)m * 12 + (size_t)u * 8;
    plan->neighbours_ms = pmi_now_ms() - t0;
    plan->density_ms = 0.0;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_sparse_plan(pm_context *ctx, const float *xyz, size_t n,
                                          const pm_field_params *p, size_t brick_points,
                                          pm_normals normals, pmi_sparse_plan *plan)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_reconstruct: no CUDA device");
    }
    const int home = pmi_cuda(ctx)->device;
    if (home < 0 || home >= ndev)
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_reconstruct: no CUDA device %d", home);
    sp_shared *S = (sp_shared *)calloc(1, sizeof *S + (size_t)ndev * sizeof(sp_gpu));
    if (!S) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory");
    pthread_mutex_init(&S->mu, NULL);
    S->ndev = ndev;
    S->home = home;
    plan->device = S;
    plan->pieces_in_blocks = 1;
    plan->shares_batches = 1;
    sp_tmp T;
    memset(&T, 0, sizeof T);
    T.ctx = ctx;
    pm_status s = sp_plan_build(ctx, xyz, n, p, brick_points, normals, plan, S, &T);
    for (int i = 0; i < T.n; i++) /* stream-ordered: after the queued work */
        ctx->backend->scratch_free(ctx, T.p[i]);
    cudaGetLastError();
    if (s != PM_STATUS_OK) pmi_cuda_sparse_plan_free(ctx, plan);
    return s;
}

extern "C" void pmi_cuda_sparse_plan_free(pm_context *ctx, pmi_sparse_plan *plan)
{
    sp_shared *S = (sp_shared *)plan->device;
    if (S) {
        int cur = 0;
        cudaGetDevice(&cur);
        for (int d = 0; d < S->ndev; d++) {
            sp_gpu *g = &S->gpu[d];
            if (!g->xyz && !g->ckey && !g->cstart) continue;
            cudaSetDevice(d);
            cudaFree(g->xyz);
            cudaFree(g->ckey);
            cudaFree(g->cstart);
        }
        cudaSetDevice(cur);
        cudaGetLastError();
        for (size_t i = 0; i < S->nblocks; i++)
            pmi_host_array_put(ctx, S->blocks[i]);
        free(S->blocks);
        free(S->ckey);
        free(S->cstart);
        pthread_mutex_destroy(&S->mu);
        free(S);
        plan->device = NULL;
    }
    free(plan->bricks);
    plan->bricks = NULL;
    plan->state = NULL;
}

/* Particles of the cells [c0, c1): per row of cells, a range of sorted
 * slots (the occupied cells' keys are ascending, x lowest). */
static size_t sp_box_particles(const pmi_sparse_plan *plan, const sp_shared *C,
                               const uint64_t c0[3], const uint64_t c1[3])
{
    const pmi_sparse_geom *G = &plan->G;
    size_t n = 0;
    for (uint64_t cz = c0[2]; cz < c1[2]; cz++)
        for (uint64_t cy = c0[1]; cy < c1[1]; cy++) {
            /* Summed, not or-ed: c1 may be one past the last cell of
             * the row, whose key is then the next row's first. */
            const uint64_t row = (cz << G->cshift[2]) + (cy << G->cshift[1]);
            const size_t u0 = pmi_lower_bound_u64(C->ckey, C->m, row + c0[0]);
            const size_t u1 = pmi_lower_bound_u64(C->ckey + u0, C->m - u0, row + c1[0]) + u0;
            n += C->cstart[u1] - C->cstart[u0];
        }
    return n;
}

/* The stored pieces (the i-th of `count` is pieces[took[i]], its first
 * vertex and triangle in the store v0[i], t0[i]) downloaded into one host
 * block, kept by the plan; each piece's arrays point into it. */
static pm_status sp_download(pm_context *ctx, pmi_sparse_plan *plan, const pmi_piece_store *T,
                             int with_n, const size_t *v0, const size_t *t0, const size_t *took,
                             size_t count, pm_mesh_piece *pieces)
{
    static const char fn[] = "pm_reconstruct: the pieces to the host";
    const size_t nv = T->nv, nt = T->nt;
    const size_t bk = nv * 8, bp = nv * 12, bn = with_n ? nv * 12 : 0, bt = nt * 24, bc = nt * 8;
    /* A recycled array (src/core/host_arrays.c): its pages are mapped
     * already when a frame's plan follows the last one's. */
    char *h = (char *)pmi_host_array_get(ctx, bk + bp + bn + bt + bc + 1);
    if (!h)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for %zu vertices", fn, nv);
    sp_shared *S = (sp_shared *)plan->device;
    pthread_mutex_lock(&S->mu);
    int kept = 1;
    if (S->nblocks == S->cap_blocks) {
        const size_t c = 2 * S->cap_blocks + 8;
        void **b = (void **)realloc(S->blocks, c * sizeof *b);
        if (b) S->blocks = b, S->cap_blocks = c;
        else kept = 0;
    }
    if (kept) S->blocks[S->nblocks++] = h;
    pthread_mutex_unlock(&S->mu);
    if (!kept) {
        pmi_host_array_put(ctx, h);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    }
    uint64_t *hk = (uint64_t *)h, *ht = (uint64_t *)(h + bk + bp + bn),
             *hc = (uint64_t *)(h + bk + bp + bn + bt);
    float *hp = (float *)(h + bk), *hn = with_n ? (float *)(h + bk + bp) : NULL;
    pm_status s = PM_STATUS_OK;
    if (nv) s = pmi_cuda_copy_host(ctx, hk, T->keys, bk, 1, fn);
    if (s == PM_STATUS_OK && nv) s = pmi_cuda_copy_host(ctx, hp, T->pos, bp, 1, fn);
    if (s == PM_STATUS_OK && nv && with_n) s = pmi_cuda_copy_host(ctx, hn, T->nrm, bn, 1, fn);
    if (s == PM_STATUS_OK && nt) s = pmi_cuda_copy_host(ctx, ht, T->tri, bt, 1, fn);
    if (s == PM_STATUS_OK && nt) s = pmi_cuda_copy_host(ctx, hc, T->ckey, bc, 1, fn);
    if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, fn);
    for (size_t i = 0; i < count && s == PM_STATUS_OK; i++) {
        pm_mesh_piece *P = &pieces[took[i]];
        if (P->num_vertices) {
            P->vertex_keys = hk + v0[i];
            P->positions = hp + 3 * v0[i];
            P->normals = hn ? hn + 3 * v0[i] : NULL;
        }
        if (P->num_triangles) {
            P->triangles = ht + 3 * t0[i];
            P->cell_keys = hc + t0[i];
        }
    }
    return s;
}

extern "C" pm_status pmi_cuda_sparse_pieces(pm_context *ctx, pmi_sparse_plan *plan, size_t first,
                                            size_t count, double iso,
                                            const pm_isosurface_options *options,
                                            pm_mesh_piece *pieces, double *field_ms,
                                            double *extract_ms)
{
    static const char fn[] = "pm_reconstruct";
    PMI_TRY(pmi_cuda_begin(ctx));
    const pmi_sparse_geom *G = &plan->G;
    const pm_lattice lat = pmi_sparse_lattice(G);
    const sp_shared *C = (const sp_shared *)plan->device;
    const sp_gpu *gp = NULL;
    PMI_TRY(sp_gpu_get(ctx, plan, &gp));
    cudaStream_t st = pmi_cuda(ctx)->stream;
    sp_dev D;
    memset(&D, 0, sizeof D);
    pmi_piece_store T;
    memset(&T, 0, sizeof T);
    size_t *pv0 = (size_t *)malloc((count + 1) * sizeof *pv0),
           *pt0 = (size_t *)malloc((count + 1) * sizeof *pt0),
           *took = (size_t *)malloc((count + 1) * sizeof *took);
    if (!pv0 || !pt0 || !took) {
        free(pv0), free(pt0), free(took);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    }
    double fms = 0.0, ems = 0.0;
    pm_status s = PM_STATUS_OK;
    /* The bricks: all of [first, first + count), or those this call takes
     * from the cursor the driver shares among its contexts. */
    size_t *cursor = plan->cursor, made = 0;
    for (size_t k = 0; s == PM_STATUS_OK; k++) {
        const size_t q = cursor ? __atomic_fetch_add(cursor, (size_t)1, __ATOMIC_RELAXED) : k;
        if (q >= count) break;
        const double t0 = pmi_now_ms();
        uint64_t b[3], o0[3], o1[3], w0[3], w1[3], c0[3], c1[3];
        pmi_brick_unkey(G, plan->bricks[first + q], b);
        pmi_brick_owned(G, b, o0, o1);
        pmi_brick_window(G, b, w0, w1);
        pmi_field_layout lay;
        memset(&lay, 0, sizeof lay);
        for (int a = 0; a < 3; a++) {
            const uint64_t wc0 = w0[a] / G->B, wc1 = (w1[a] - 1) / G->B + 1;
            c0[a] = wc0 >= 2 ? wc0 - 2 : 0;
            c1[a] = wc1 + 2 < G->cdims[a] ? wc1 + 2 : G->cdims[a];
            lay.lo[a] = G->g0[a] + (int64_t)(c0[a] * G->B);
            const uint64_t hi = c1[a] * G->B < G->dims[a] ? c1[a] * G->B : G->dims[a];
            lay.dims[a] = (size_t)(hi - c0[a] * G->B);
            lay.cdims[a] = (size_t)(c1[a] - c0[a]);
        }
        const size_t ncells = lay.cdims[0] * lay.cdims[1] * lay.cdims[2];
        const size_t points = lay.dims[0] * lay.dims[1] * lay.dims[2];
        const size_t n = sp_box_particles(plan, C, c0, c1);
        if (n > UINT32_MAX) {
            s = pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles reach one brick (at most 2^32 - 1)",
                          fn, n);
            break;
        }
        s = sp_dev_reserve(ctx, &D, n, ncells, points);
        if (s != PM_STATUS_OK) break;
        sp_box bx;
        for (int a = 0; a < 3; a++) {
            bx.c0[a] = c0[a];
            bx.cd[a] = lay.cdims[a];
        }
        bx.sh1 = G->cshift[1];
        bx.sh2 = G->cshift[2];
        const unsigned blocks = (unsigned)((ncells + 255) / 256);
        sp_cells_kernel<<<blocks, 256, 0, st>>>(gp->ckey, (unsigned long long)C->m, gp->cstart, bx,
                                                (unsigned long long)ncells, D.count, D.first);
        s = pmi_cuda_launched("pm_reconstruct: a brick's cells");
        if (s == PM_STATUS_OK)
            s = pmi_cuda_scan_launch(ctx, D.count, D.start, ncells, (char *)D.tmp + 256,
                                     (unsigned long long *)D.tmp);
        if (s != PM_STATUS_OK) break;
        sp_gather_kernel<<<blocks, 256, 0, st>>>(gp->xyz, D.count, D.first,
                                                 (unsigned long long)ncells, (uint32_t)n, D.start,
                                                 D.xyz, D.cell);
        s = pmi_cuda_launched("pm_reconstruct: a brick's particles");
        if (s != PM_STATUS_OK) break;
        pmi_dn_grid g;
        memset(&g, 0, sizeof g);
        g.n = (long long)n;
        for (int a = 0; a < 3; a++) {
            g.lo[a] = (long long)lay.lo[a];
            g.dims[a] = (long long)lay.dims[a];
            g.cd[a] = (long long)lay.cdims[a];
        }
        g.block = (long long)G->B;
        g.ncells = (long long)ncells;
        g.points = (long long)points;
        g.s = G->rule.s;
        g.cell = D.cell;
        g.start = D.start;
        g.xyz = D.xyz;
        s = pmi_dn_queue_sph(ctx, &g, plan->h, plan->mass, D.vol, D.field, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_reconstruct: a brick's field");
        const double t1 = pmi_now_ms();
        if (s != PM_STATUS_OK) break;
        /* The window inside the grid (its point 0 is cell c0's first). */
        uint64_t off[3];
        for (int a = 0; a < 3; a++)
            off[a] = w0[a] - c0[a] * G->B;
        pm_volume win;
        memset(&win, 0, sizeof win);
        win.data = D.field + (off[2] * lay.dims[1] + off[1]) * lay.dims[0] + off[0];
        win.type = PM_SAMPLE_F32;
        win.nx = (size_t)(w1[0] - w0[0]);
        win.ny = (size_t)(w1[1] - w0[1]);
        win.nz = (size_t)(w1[2] - w0[2]);
        win.row_stride = lay.dims[0];
        win.slice_stride = lay.dims[0] * lay.dims[1];
        pm_lattice_box own;
        for (int a = 0; a < 3; a++) {
            own.lo[a] = o0[a];
            own.dims[a] = o1[a] - o0[a];
        }
        pv0[made] = T.nv;
        pt0[made] = T.nt;
        took[made++] = q;
        s = pmi_cuda_piece_stored(ctx, &win, w0, &lat, &own, iso, options, &pieces[q], &T);
        fms += t1 - t0;
        ems += pmi_now_ms() - t1;
    }
    if (s == PM_STATUS_OK) {
        const double t2 = pmi_now_ms();
        s = sp_download(ctx, plan, &T, options->normals != PM_NORMALS_NONE, pv0, pt0, took, made,
                        pieces);
        ems += pmi_now_ms() - t2;
    }
    if (s != PM_STATUS_OK) cudaStreamSynchronize(st); /* queued work may use D */
    pmi_piece_store_free(&T);
    free(pv0), free(pt0), free(took);
    sp_dev_free(ctx, &D);
    *field_ms = fms;
    *extract_ms = ems;
    return s;
}
