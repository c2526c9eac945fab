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

#define DN_MAX_LATTICE_INDEX 4503599627370496.0
#define DN_BLUR_MIN_BLOCK 6

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
__global__ void dn_scan_kernel(const float *xyz, long long n, int aabb, double3 amin, double3 amax,
                               unsigned long long *res)
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
        if (aabb && !(q0 >= amin.x && q0 <= amax.x && q1 >= amin.y && q1 <= amax.y && q2 >= amin.z &&
                      q2 <= amax.z))
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

/* The cell of one coordinate, as cell_of in src/cpu/neighbours.c. */
static __device__ __forceinline__ long long dn_cell_of(float x, double origin, double edge, long long cells)
{
    double c = floor(((double)x - origin) / edge);
    if (!(c >= 0.0)) return 0;
    if (c >= (double)(cells - 1)) return cells - 1;
    return (long long)c;
}

/* Cell key per particle (dropped ones get ncells: sorted last), value = input
 * index, and the per-cell counts. */
__global__ void dn_cells_kernel(const float *xyz, long long n, int aabb, double3 amin, double3 amax,
                                double3 origin, double edge, long long cx, long long cy, long long cz,
                                uint32_t *keys, uint32_t *vals, uint32_t *counts)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float q0 = xyz[3 * i], q1 = xyz[3 * i + 1], q2 = xyz[3 * i + 2];
        uint32_t c = (uint32_t)(cx * cy * cz);
        if (!aabb || (q0 >= amin.x && q0 <= amax.x && q1 >= amin.y && q1 <= amax.y && q2 >= amin.z &&
                      q2 <= amax.z)) {
            c = (uint32_t)((dn_cell_of(q2, origin.z, edge, cz) * cy + dn_cell_of(q1, origin.y, edge, cy)) * cx +
                           dn_cell_of(q0, origin.x, edge, cx));
            atomicAdd(&counts[c], 1u);
        }
        keys[i] = c;
        vals[i] = (uint32_t)i;
    }
}

__global__ void dn_gather_kernel(const float *xyz, const uint32_t *order, long long n, float *out)
{
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        size_t i = order[k];
        out[3 * k] = xyz[3 * i];
        out[3 * k + 1] = xyz[3 * i + 1];
        out[3 * k + 2] = xyz[3 * i + 2];
    }
}

static pm_status dn_alloc(dn_scratch *sc, size_t bytes, void **p, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY : PM_STATUS_DEVICE_ERROR,
                         "pm_field_compute: cannot allocate %zu bytes of device memory for %s (%s)", bytes, what,
                         cudaGetErrorString(e));
    }
    sc->buf[sc->nbuf++] = *p;
    return PM_STATUS_OK;
}

void dn_scratch_free(dn_scratch *sc)
{
    for (int b = 0; b < sc->nbuf; b++) cudaFree(sc->buf[b]);
    sc->nbuf = 0;
    cudaGetLastError();
}

static unsigned dn_grid_blocks(long long n)
{
    long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : (b > 65536 ? 65536 : b));
}

pm_status dn_grid_build(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p, dn_grid *g,
                        dn_scratch *sc)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    memset(g, 0, sizeof *g);
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute: no particles");
    if (n >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute: %zu particles, at most 4294967294 per call", n);
    const int aabb = p->use_aabb;
    const double3 amin = make_double3(p->aabb_min[0], p->aabb_min[1], p->aabb_min[2]);
    const double3 amax = make_double3(p->aabb_max[0], p->aabb_max[1], p->aabb_max[2]);

    /* Checks, kept count and bounding box. */
    unsigned long long *res;
    PMI_TRY(dn_alloc(sc, 64, (void **)&res, "the particle checks"));
    unsigned long long init[8];
    memset(init, 0, sizeof init);
    init[0] = ~0ull;
    unsigned *ikey = (unsigned *)(init + 2);
    for (int a = 0; a < 3; a++) ikey[a] = 0xffffffffu;
    PMI_CU_TRY(cudaMemcpyAsync(res, init, sizeof init, cudaMemcpyHostToDevice, st), "pm_field_compute: upload");
    dn_scan_kernel<<<dn_grid_blocks((long long)n), 256, 0, st>>>(xyz, (long long)n, aabb, amin, amax, res);
    PMI_TRY(pmi_cuda_launched("pm_field_compute: particle checks"));
    unsigned long long got[8];
    PMI_CU_TRY(cudaMemcpyAsync(got, res, sizeof got, cudaMemcpyDeviceToHost, st), "pm_field_compute: readback");
    PMI_TRY(pmi_cuda_wait(ctx, "pm_field_compute: particle checks"));
    if (got[0] != ~0ull) {
        float q[3] = {0, 0, 0};
        cudaMemcpy(q, xyz + 3 * got[0], sizeof q, cudaMemcpyDeviceToHost);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute: particle %llu has a non-finite coordinate (%g, %g, %g)", got[0],
                         q[0], q[1], q[2]);
    }
    const size_t kept = (size_t)got[1];
    if (kept == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute: all %zu particles lie outside the aabb "
                         "(%g, %g, %g) .. (%g, %g, %g)",
                         n, amin.x, amin.y, amin.z, amax.x, amax.y, amax.z);
    const unsigned *gk = (const unsigned *)(got + 2);
    double bmin[3], bmax[3];
    for (int a = 0; a < 3; a++) {
        bmin[a] = (double)dn_unkey(gk[a]);
        bmax[a] = (double)dn_unkey(gk[3 + a]);
    }

    /* Layout: the CPU's formulas (layout() in src/cpu/density.c). */
    const int sph = p->method == PM_FIELD_SPH;
    const double r = p->radius, s = p->cube_size * r, h = 2.0 * p->smoothing_length * r;
    const int steps = sph ? 0 : p->blur_steps;
    const double reach = sph ? h : r + 0.5 * s;
    const double margin = sph ? h : reach + steps * s;
    const double cell_reach = sph ? h : fmax(reach, DN_BLUR_MIN_BLOCK * s);
    double B = ceil(cell_reach / s * (1.0 - 1e-12));
    if (B < 1) B = 1;
    double dims[3], cdims[3];
    for (int a = 0; a < 3; a++) {
        double g0 = floor((bmin[a] - margin) / s) - 1.0;
        double g1 = ceil((bmax[a] + margin) / s) + 1.0;
        if (!(fabs(g0) < DN_MAX_LATTICE_INDEX) || !(fabs(g1) < DN_MAX_LATTICE_INDEX))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_field_compute: coordinates up to %g are too large for the cell "
                             "size %g (more than 2^52 cells from the origin)",
                             fmax(fabs(bmin[a]), fabs(bmax[a])), s);
        g->lo[a] = (long long)g0;
        dims[a] = g1 - g0 + 1.0;
        cdims[a] = ceil(dims[a] / B);
    }
    /* Device memory: the field (twice for blur), cells, and per particle
     * keys, values (twice, for the sort), sorted positions and volumes. */
    double points = dims[0] * dims[1] * dims[2], cells = cdims[0] * cdims[1] * cdims[2];
    double need = (sph ? 4.0 : 8.0) * points + 8.0 * cells + 28.0 * (double)n + (12.0 + 12.0) * (double)kept;
    if (!(need <= (double)p->max_memory_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: grid %.0f x %.0f x %.0f (cell %g) needs %.4g GB, more "
                         "than the memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                         dims[0], dims[1], dims[2], s, need / 1e9, (double)p->max_memory_bytes / 1e9);
    if (!(cells < 4294967295.0))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute: %.0f neighbour cells exceed 2^32 - 1", cells);
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
    PMI_CU_TRY(cudaMemsetAsync(counts, 0, ((size_t)g->ncells + 1) * 4, st), "pm_field_compute: clear counts");
    const double edge = (double)g->block * s;
    const double3 origin = make_double3((double)g->lo[0] * s, (double)g->lo[1] * s, (double)g->lo[2] * s);
    dn_cells_kernel<<<dn_grid_blocks((long long)n), 256, 0, st>>>(xyz, (long long)n, aabb, amin, amax, origin, edge,
                                                                   g->cd[0], g->cd[1], g->cd[2], keys, vals, counts);
    PMI_TRY(pmi_cuda_launched("pm_field_compute: cell keys"));
    size_t tb_sort = 0;
    int end_bit = 1;
    while (end_bit < 32 && (1ull << end_bit) <= (unsigned long long)g->ncells) end_bit++;
    /* Cell starts: the project's own look-back scan over the counts. The
     * order inside each cell comes from a stable radix sort of (cell, index)
     * pairs (CUB, shipped with the CUDA toolkit), so cells list their
     * particles in input order as the CPU's counting sort does. */
    PMI_TRY(pmi_cuda_scan_exclusive_u32(ctx, counts, start, (size_t)g->ncells + 1, NULL));
    cub::DeviceRadixSort::SortPairs(NULL, tb_sort, keys, skeys, vals, svals, (int)n, 0, end_bit, st);
    void *tmp;
    PMI_TRY(dn_alloc(sc, tb_sort, &tmp, "sort scratch"));
    size_t tb = tb_sort;
    PMI_CU_TRY(cub::DeviceRadixSort::SortPairs(tmp, tb, keys, skeys, vals, svals, (int)n, 0, end_bit, st),
               "pm_field_compute: cell sort");
    dn_gather_kernel<<<dn_grid_blocks((long long)kept), 256, 0, st>>>(xyz, svals, (long long)kept, sxyz);
    PMI_TRY(pmi_cuda_launched("pm_field_compute: gather"));
    if (sph) PMI_TRY(dn_alloc(sc, kept * 8, (void **)&sc->vol, "particle volumes"));
    PMI_TRY(pmi_cuda_wait(ctx, "pm_field_compute: neighbour grid"));
    g->cell = skeys;
    g->start = start;
    g->xyz = sxyz;
    return PM_STATUS_OK;
}
