/* The neighbour grid of the CUDA density fields: particle checks, the
 * bounding box (exact float min/max by atomics on order-preserving integer
 * keys), the lattice layout (the CPU's formulas, docs/reconstruct.md), and
 * the particles sorted by cell: per-cell counts and their exclusive scan
 * give the cell starts, a stable radix sort of (cell, input index) gives
 * the order inside cells (input order, as the CPU's counting sort after its
 * per-cell sort), so every sum sees its terms in the CPU's order. */
#include <math.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>

#include "cuda/density_internal.cuh"

/* Order-preserving map of floats to unsigned keys (for min/max atomics). */
static __device__ __forceinline__ unsigned dn_key(float f)
{
    unsigned b = __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
static float dn_unkey(unsigned k)
{
    unsigned b = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* res: [0] first bad index (u64), [1] kept (u64), then 6 u32 keys: min x y z, max x y z. */
static __global__ void dn_scan_kernel(const float *xyz, long long n, int aabb, double3 amin,
                                      double3 amax, unsigned long long *res)
{
    unsigned *key = (unsigned *)(res + 2);
    unsigned mn[3] = {0xffffffffu, 0xffffffffu, 0xffffffffu}, mx[3] = {0, 0, 0};
    unsigned long long kept = 0, bad = ~0ull;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float q0 = xyz[3 * i], q1 = xyz[3 * i + 1], q2 = xyz[3 * i + 2];
        if (!isfinite(q0) || !isfinite(q1) || !isfinite(q2)) {
            if ((unsigned long long)i < bad) bad = (unsigned long long)i;
            continue;
        }
        if (aabb && !(q0 >= amin.x && q0 <= amax.x && q1 >= amin.y && q1 <= amax.y &&
                      q2 >= amin.z && q2 <= amax.z))
            continue;
        kept++;
        const float q[3] = {q0, q1, q2};
        for (int a = 0; a < 3; a++) {
            unsigned k = dn_key(q[a]);
            mn[a] = min(mn[a], k);
            mx[a] = max(mx[a], k);
        }
    }
    for (int off = 16; off; off >>= 1) {
        kept += __shfl_xor_sync(0xffffffffu, kept, off);
        bad = min(bad, __shfl_xor_sync(0xffffffffu, bad, off));
        for (int a = 0; a < 3; a++) {
            mn[a] = min(mn[a], __shfl_xor_sync(0xffffffffu, mn[a], off));
            mx[a] = max(mx[a], __shfl_xor_sync(0xffffffffu, mx[a], off));
        }
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad != ~0ull) atomicMin(&res[0], bad);
        if (kept) atomicAdd(&res[1], kept);
        for (int a = 0; a < 3; a++) {
            atomicMin(&key[a], mn[a]);
            atomicMax(&key[3 + a], mx[a]);
        }
    }
}

/* Cell key per particle (dropped ones get ncells: sorted last), value = input
 * index, and the per-cell counts. */
static __global__ void dn_cells_kernel(const float *xyz, long long n, int aabb, double3 amin,
                                       double3 amax, double3 origin, double edge, long long cx,
                                       long long cy, long long cz, uint32_t *keys, uint32_t *vals,
                                       uint32_t *counts, unsigned long long *bad)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float q0 = xyz[3 * i], q1 = xyz[3 * i + 1], q2 = xyz[3 * i + 2];
        uint32_t c = (uint32_t)(cx * cy * cz);
        /* bad (the fixed lattice, no checks before): non-finite particles
         * are dropped and the first one's index kept. */
        const bool fin = !bad || (isfinite(q0) && isfinite(q1) && isfinite(q2));
        if (!fin) atomicMin(bad, (unsigned long long)i);
        if (fin && (!aabb || (q0 >= amin.x && q0 <= amax.x && q1 >= amin.y && q1 <= amax.y &&
                              q2 >= amin.z && q2 <= amax.z))) {
            c = (uint32_t)((pmi_cell_of(q2, origin.z, edge, cz) * cy +
                            pmi_cell_of(q1, origin.y, edge, cy)) *
                               cx +
                           pmi_cell_of(q0, origin.x, edge, cx));
            atomicAdd(&counts[c], 1u);
        }
        keys[i] = c;
        vals[i] = (uint32_t)i;
    }
}

static __global__ void dn_gather_kernel(const float *xyz, const uint32_t *order, long long n,
                                        float *out)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        size_t i = order[k];
        out[3 * k] = xyz[3 * i];
        out[3 * k + 1] = xyz[3 * i + 1];
        out[3 * k + 2] = xyz[3 * i + 2];
    }
}

static pm_status dn_alloc(pmi_dn_scratch *sc, size_t bytes, void **p, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY
                                                        : PM_STATUS_DEVICE_ERROR,
                         "pm_field_compute: cannot allocate %zu bytes of device memory for %s (%s)",
                         bytes, what, cudaGetErrorString(e));
    }
    sc->buf[sc->nbuf++] = *p;
    return PM_STATUS_OK;
}

void pmi_dn_scratch_free(pmi_dn_scratch *sc)
{
    for (int b = 0; b < sc->nbuf; b++)
        cudaFree(sc->buf[b]);
    sc->nbuf = 0;
    cudaGetLastError();
}

static unsigned dn_grid_blocks(long long n)
{
    long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

pm_status pmi_cuda_particle_box(pm_context *ctx, const float *xyz, size_t n, int aabb,
                                double3 amin, double3 amax, unsigned long long *res,
                                const char *what, pmi_particle_box *out)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    unsigned long long init[8];
    memset(init, 0, sizeof init);
    init[0] = ~0ull;
    unsigned *ikey = (unsigned *)(init + 2);
    for (int a = 0; a < 3; a++)
        ikey[a] = 0xffffffffu;
    PMI_CU_TRY(cudaMemcpyAsync(res, init, sizeof init, cudaMemcpyHostToDevice, st), what);
    dn_scan_kernel<<<dn_grid_blocks((long long)n), 256, 0, st>>>(xyz, (long long)n, aabb, amin,
                                                                 amax, res);
    PMI_TRY(pmi_cuda_launched(what));
    unsigned long long got[8];
    PMI_CU_TRY(cudaMemcpyAsync(got, res, sizeof got, cudaMemcpyDeviceToHost, st), what);
    PMI_TRY(pmi_cuda_wait(ctx, what));
    out->first_bad = got[0];
    out->kept = (size_t)got[1];
    const unsigned *gk = (const unsigned *)(got + 2);
    for (int a = 0; a < 3; a++) {
        out->bmin[a] = (double)dn_unkey(gk[a]);
        out->bmax[a] = (double)dn_unkey(gk[3 + a]);
    }
    return PM_STATUS_OK;
}

pm_status pmi_cuda_gather_xyz(pm_context *ctx, const float *xyz, const uint32_t *order, long long n,
                              float *out, const char *what)
{
    dn_gather_kernel<<<dn_grid_blocks(n), 256, 0, pmi_cuda(ctx)->stream>>>(xyz, order, n, out);
    return pmi_cuda_launched(what);
}

pm_status pmi_dn_grid_build(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                            pmi_dn_grid *g, pmi_dn_scratch *sc)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    memset(g, 0, sizeof *g);
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute: no particles");
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_field_compute: %zu particles, at most 4294967294 per call", n);
    const int aabb = p->use_aabb;
    const double3 amin = make_double3(p->aabb_min[0], p->aabb_min[1], p->aabb_min[2]);
    const double3 amax = make_double3(p->aabb_max[0], p->aabb_max[1], p->aabb_max[2]);

    /* Checks, kept count and bounding box. */
    unsigned long long *res;
    PMI_TRY(dn_alloc(sc, 64, (void **)&res, "the particle checks"));
    pmi_particle_box box;
    PMI_TRY(pmi_cuda_particle_box(ctx, xyz, n, aabb, amin, amax, res, "pm_field_compute", &box));
    if (box.first_bad != ~0ull) {
        float q[3] = {0, 0, 0};
        cudaMemcpy(q, xyz + 3 * box.first_bad, sizeof q, cudaMemcpyDeviceToHost);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute: particle %llu has a non-finite coordinate (%g, %g, %g)",
                         box.first_bad, q[0], q[1], q[2]);
    }
    const size_t kept = box.kept;
    if (kept == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute: all %zu particles lie outside the aabb "
                         "(%g, %g, %g) .. (%g, %g, %g)",
                         n, amin.x, amin.y, amin.z, amax.x, amax.y, amax.z);
    const double *bmin = box.bmin, *bmax = box.bmax;

    /* Layout: the CPU's formulas (layout() in src/cpu/density.c). */
    const int sph = p->method == PM_FIELD_SPH;
    const pmi_field_rule f = pmi_field_rule_of(p);
    const double s = f.s, B = f.B;
    double lo[3], dims[3], cdims[3];
    pm_status es = pmi_field_extent("pm_field_compute", &f, bmin, bmax, lo, dims);
    if (es != PM_STATUS_OK) return es;
    for (int a = 0; a < 3; a++) {
        g->lo[a] = (long long)lo[a];
        cdims[a] = ceil(dims[a] / B);
    }
    /* Device memory: the field (twice for blur), cells, and per particle
     * keys, values (twice, for the sort), sorted positions and volumes. */
    double points = dims[0] * dims[1] * dims[2], cells = cdims[0] * cdims[1] * cdims[2];
    double need =
        (sph ? 4.0 : 8.0) * points + 8.0 * cells + 28.0 * (double)n + (12.0 + 12.0) * (double)kept;
    if (!(need <= (double)p->max_memory_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: grid %.0f x %.0f x %.0f (cell %g) needs %.4g GB, more "
                         "than the memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                         dims[0], dims[1], dims[2], s, need / 1e9,
                         (double)p->max_memory_bytes / 1e9);
    if (!(cells < 4294967295.0))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_field_compute: %.0f neighbour cells exceed 2^32 - 1", cells);
    for (int a = 0; a < 3; a++) {
        g->dims[a] = (long long)dims[a];
        g->cd[a] = (long long)cdims[a];
    }
    g->block = (long long)B;
    g->s = s;
    g->ncells = g->cd[0] * g->cd[1] * g->cd[2];
    g->points = g->dims[0] * g->dims[1] * g->dims[2];
    g->n = (long long)kept;

    /* Keys, counts, scan, stable sort, gather. */
    uint32_t *keys, *vals, *skeys, *svals, *counts, *start;
    float *sxyz;
    PMI_TRY(dn_alloc(sc, n * 4, (void **)&keys, "cell keys"));
    PMI_TRY(dn_alloc(sc, n * 4, (void **)&vals, "particle indices"));
    PMI_TRY(dn_alloc(sc, n * 4, (void **)&skeys, "sorted cell keys"));
    PMI_TRY(dn_alloc(sc, n * 4, (void **)&svals, "sorted particle indices"));
    PMI_TRY(dn_alloc(sc, ((size_t)g->ncells + 1) * 4, (void **)&counts, "cell counts"));
    PMI_TRY(dn_alloc(sc, ((size_t)g->ncells + 1) * 4, (void **)&start, "cell starts"));
    PMI_TRY(dn_alloc(sc, kept * 12, (void **)&sxyz, "sorted positions"));
    PMI_CU_TRY(cudaMemsetAsync(counts, 0, ((size_t)g->ncells + 1) * 4, st),
               "pm_field_compute: clear counts");
    const double edge = (double)g->block * s;
    const double3 origin =
        make_double3((double)g->lo[0] * s, (double)g->lo[1] * s, (double)g->lo[2] * s);
    dn_cells_kernel<<<dn_grid_blocks((long long)n), 256, 0, st>>>(
        xyz, (long long)n, aabb, amin, amax, origin, edge, g->cd[0], g->cd[1], g->cd[2], keys, vals,
        counts, NULL);
    PMI_TRY(pmi_cuda_launched("pm_field_compute: cell keys"));
    size_t tb_sort = 0;
    int end_bit = 1;
    while (end_bit < 32 && (1ull << end_bit) <= (unsigned long long)g->ncells)
        end_bit++;
    /* Cell starts: the project's own look-back scan over the counts. The
     * order inside each cell comes from a stable radix sort of (cell, index)
     * pairs (CUB, shipped with the CUDA toolkit), so cells list their
     * particles in input order as the CPU's counting sort does. */
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, counts, (size_t)g->ncells + 1, start, NULL));
    cub::DeviceRadixSort::SortPairs(NULL, tb_sort, keys, skeys, vals, svals, (int)n, 0, end_bit,
                                    st);
    void *tmp;
    PMI_TRY(dn_alloc(sc, tb_sort, &tmp, "sort scratch"));
    size_t tb = tb_sort;
    PMI_CU_TRY(
        cub::DeviceRadixSort::SortPairs(tmp, tb, keys, skeys, vals, svals, (int)n, 0, end_bit, st),
        "pm_field_compute: cell sort");
    PMI_TRY(pmi_cuda_gather_xyz(ctx, xyz, svals, (long long)kept, sxyz, "pm_field_compute: gather"));
    if (sph) PMI_TRY(dn_alloc(sc, kept * 8, (void **)&sc->vol, "particle volumes"));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_field_compute: neighbour grid"));
    g->cell = skeys;
    g->start = start;
    g->xyz = sxyz;
    return PM_STATUS_OK;
}

/* The neighbour grid on the caller's lattice (pm_field_compute_async):
 * nothing is read back. Every particle gets a cell key (dropped ones,
 * outside the aabb or non-finite, the key ncells, sorted last; others
 * clamped into the lattice's cells, which keeps every neighbour within one
 * cell: clamping does not move two particles further apart in cells), so
 * the kernels run over all n sorted slots and the kept count is the cell
 * scan's total, written to status->particles_used; status->first_nonfinite
 * gets the first non-finite particle. One scratch block from the context's arena: keys,
 * values, sorted keys and values, counts, starts, sorted positions,
 * volumes (SPH), the sort's and the scan's scratch, then extra_b bytes for
 * the caller (*extra). */
pm_status pmi_dn_grid_build_fixed(pm_context *ctx, const float *xyz, size_t n,
                                  const pm_field_params *p, const pm_field_grid *grid,
                                  size_t extra_b, pmi_dn_grid *g, double **vol, void **extra,
                                  pm_field_status *status)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    memset(g, 0, sizeof *g);
    if (n == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute_async: no particles");
    if (n > 0x7fffffffull)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_field_compute_async: %zu particles, at most 2^31 - 1 per call", n);
    const int sph = p->method == PM_FIELD_SPH;
    const pmi_field_rule f = pmi_field_rule_of(p);
    double cells = 1.0;
    for (int a = 0; a < 3; a++) {
        const double lo = (double)grid->lo[a], hi = lo + (double)grid->dims[a];
        if (grid->dims[a] < 2 || !(fabs(lo) < PMI_MAX_LATTICE_INDEX) ||
            !(fabs(hi) < PMI_MAX_LATTICE_INDEX))
            return pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "pm_field_compute_async: grid axis %d: lo %lld, %zu points (at least 2, indices "
                "below 2^52)",
                a, (long long)grid->lo[a], grid->dims[a]);
        g->lo[a] = (long long)grid->lo[a];
        g->dims[a] = (long long)grid->dims[a];
        g->cd[a] = (long long)ceil((double)grid->dims[a] / f.B);
        cells *= (double)g->cd[a];
    }
    if (!(cells < 4294967295.0))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_field_compute_async: %.0f neighbour cells exceed 2^32 - 1", cells);
    size_t points;
    if (!pmi_mul3_size(grid->dims[0], grid->dims[1], grid->dims[2], &points) ||
        points > ((size_t)1 << 62))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute_async: grid size overflows");
    g->block = (long long)f.B;
    g->s = f.s;
    g->ncells = g->cd[0] * g->cd[1] * g->cd[2];
    g->points = (long long)points;
    g->n = (long long)n;

    int end_bit = 1;
    while (end_bit < 32 && (1ull << end_bit) <= (unsigned long long)g->ncells)
        end_bit++;
    size_t tb_sort = 0;
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(NULL, tb_sort, (uint32_t *)NULL, (uint32_t *)NULL,
                                               (uint32_t *)NULL, (uint32_t *)NULL, (int)n, 0,
                                               end_bit, st),
               "pm_field_compute_async: sort size");
    const size_t nc1 = (size_t)g->ncells + 1, tb_scan = pmi_cuda_scan_tmp_bytes(nc1);
    const size_t b4 = pmi_align256(n * 4), bc = pmi_align256(nc1 * 4);
    const size_t bytes = 4 * b4 + 2 * bc + pmi_align256(n * 12) + (sph ? pmi_align256(n * 8) : 0) +
                         pmi_align256(tb_sort) + pmi_align256(tb_scan) + pmi_align256(extra_b);
    const double need = (double)bytes + 4.0 * (double)points;
    if (!(need <= (double)p->max_memory_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute_async: grid %zu x %zu x %zu and %zu particles need %.4g "
                         "GB, more than "
                         "the memory limit of %.4g GB (max_memory_bytes)",
                         grid->dims[0], grid->dims[1], grid->dims[2], n, need / 1e9,
                         (double)p->max_memory_bytes / 1e9);
    char *q;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&q));
    uint32_t *keys = (uint32_t *)q, *vals = (uint32_t *)(q + b4), *skeys = (uint32_t *)(q + 2 * b4),
             *svals = (uint32_t *)(q + 3 * b4);
    q += 4 * b4;
    uint32_t *counts = (uint32_t *)q, *start = (uint32_t *)(q + bc);
    q += 2 * bc;
    float *sxyz = (float *)q;
    q += pmi_align256(n * 12);
    *vol = NULL;
    if (sph) {
        *vol = (double *)q;
        q += pmi_align256(n * 8);
    }
    void *sort_tmp = q;
    q += pmi_align256(tb_sort);
    void *scan_tmp = q;
    q += pmi_align256(tb_scan);
    *extra = q;

    PMI_CU_TRY(cudaMemsetAsync(counts, 0, nc1 * 4, st), "pm_field_compute_async: clear counts");
    /* The status words are uint64_t; the scan's total and atomicMin take
     * unsigned long long, the same 64-bit integer. */
    static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit status words");
    unsigned long long *used = (unsigned long long *)&status->particles_used;
    unsigned long long *first_bad = (unsigned long long *)&status->first_nonfinite;
    PMI_CU_TRY(cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, st),
               "pm_field_compute_async: status");
    const double3 amin = make_double3(p->aabb_min[0], p->aabb_min[1], p->aabb_min[2]);
    const double3 amax = make_double3(p->aabb_max[0], p->aabb_max[1], p->aabb_max[2]);
    const double edge = (double)g->block * f.s;
    const double3 origin =
        make_double3((double)g->lo[0] * f.s, (double)g->lo[1] * f.s, (double)g->lo[2] * f.s);
    dn_cells_kernel<<<dn_grid_blocks((long long)n), 256, 0, st>>>(
        xyz, (long long)n, p->use_aabb, amin, amax, origin, edge, g->cd[0], g->cd[1], g->cd[2],
        keys, vals, counts, first_bad);
    PMI_TRY(pmi_cuda_launched("pm_field_compute_async: cell keys"));
    PMI_TRY(pmi_cuda_scan_launch(ctx, counts, start, nc1, scan_tmp, used));
    size_t tb = tb_sort;
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(sort_tmp, tb, keys, skeys, vals, svals, (int)n, 0,
                                               end_bit, st),
               "pm_field_compute_async: cell sort");
    PMI_TRY(pmi_cuda_gather_xyz(ctx, xyz, svals, (long long)n, sxyz,
                                "pm_field_compute_async: gather"));
    g->cell = skeys;
    g->start = start;
    g->xyz = sxyz;
    return PM_STATUS_OK;
}

/* Kernel preloading (preload.cu): the particle pass's own kernels (CUB's
 * sort loads its kernels at its first call). */
void pmi_neighbours_preload(pmi_preload *p, int tier)
{
    if (tier != 0) return;
    const void *const k[] = {(const void *)dn_scan_kernel, (const void *)dn_cells_kernel,
                             (const void *)dn_gather_kernel};
    pmi_preload_all(p, k);
}
