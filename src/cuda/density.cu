/* Density fields on the GPU (pm_field_compute, CUDA backend): splashsurf's
 * SPH colour field and seed 003's splat-and-blur, with exactly the
 * definitions and summation order of docs/reconstruct.md (the CPU code in
 * src/cpu/density.c, sph.c, blur.c), so the f32 field is bit-identical to
 * the CPU's: every term is the same double expression (--fmad=false), added
 * in the same order (neighbour cells z, y, x; particles by cell, then input
 * index). The neighbour grid is in neighbours.cu. */
#include <math.h>
#include <string.h>

#include "cuda/cuda_mc.h"
#include "cuda/density_internal.cuh"

#define DN_THREADS 256
#define DN_WARPS (DN_THREADS / 32)
#define DN_CAP 64 /* particles staged per warp: up to 31 left + 32 new */

/* splashsurf's cubic spline, as pmi_cubic_spline (src/cpu/density.h). */
static __device__ __forceinline__ double dn_spline(double q, double sigma, double sigma2)
{
    if (q <= 0.5) {
        double q2 = q * q;
        return sigma * ((6.0 * q2) * (q - 1.0) + 1.0);
    }
    double v = 1.0 - q;
    if (v <= 0.0) return 0.0;
    return sigma2 * ((v * v) * v);
}

/* Sorted slots of cells cx-1..cx+1 of one row of cells: one contiguous run. */
static __device__ __forceinline__ void dn_row_range(const dn_grid &g, long long cx, long long rowbase,
                                                    uint32_t *b, uint32_t *e)
{
    long long x0 = cx > 0 ? cx - 1 : 0, x1 = cx + 1 < g.cd[0] ? cx + 1 : g.cd[0] - 1;
    *b = g.start[rowbase + x0];
    *e = g.start[rowbase + x1 + 1];
}

/* rho_j and vol_j = m / rho_j for every sorted slot. */
__global__ void __launch_bounds__(DN_THREADS)
dn_volumes_kernel(dn_grid g, double h, double mass, double *vol)
{
    const long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= g.n) return;
    const double h2 = h * h, inv_h = 1.0 / h;
    const double sigma = 8.0 / (DN_PI * h * h * h), sigma2 = 2.0 * sigma;
    const long long c = g.cell[k];
    if (c >= g.ncells) return; /* dropped (fixed lattice) */
    const long long cx = c % g.cd[0], cy = (c / g.cd[0]) % g.cd[1], cz = c / (g.cd[0] * g.cd[1]);
    const double xk = g.xyz[3 * k], yk = g.xyz[3 * k + 1], zk = g.xyz[3 * k + 2];
    double sum = 0.0;
    for (int dz = -1; dz <= 1; dz++) {
        if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= g.cd[2])) continue;
        for (int dy = -1; dy <= 1; dy++) {
            if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= g.cd[1])) continue;
            uint32_t b, e;
            dn_row_range(g, cx, ((cz + dz) * g.cd[1] + (cy + dy)) * g.cd[0], &b, &e);
            for (uint32_t j = b; j < e; j++) {
                double ddx = (double)g.xyz[3 * (size_t)j] - xk;
                double ddy = (double)g.xyz[3 * (size_t)j + 1] - yk;
                double ddz = (double)g.xyz[3 * (size_t)j + 2] - zk;
                double d2 = ddx * ddx + (ddy * ddy + ddz * ddz);
                if (d2 < h2) sum += dn_spline(sqrt(d2) * inv_h, sigma, sigma2);
            }
        }
    }
    double rho = mass * sum;
    vol[k] = mass / rho;
}

/* Fraction of the lattice point's box covered by the particle's cube along
 * one axis, as box_weight in src/cpu/blur.c. */
static __device__ __forceinline__ double dn_box(double p, double r, double l, double s)
{
    double hs = 0.5 * s;
    double a = p - r > l - hs ? p - r : l - hs;
    double b = p + r < l + hs ? p + r : l + hs;
    return b > a ? (b - a) / s : 0.0;
}

/* Can the particle at p reach some lattice point of the warp's box (lo, hi:
 * the box's extreme point coordinates, by the points' own expression)? A
 * "no" is exact, so dropping the particle leaves every sum's bits alone.
 * SPH: per axis the box distance d = max(0, lo - p, p - hi) (by
 * comparisons, lo <= hi: nvcc's NaN- and signed-zero-aware fmax made the
 * whole test ~60 instructions); rounding is
 * monotone, so |fl(p - l)| >= d for every l in [lo, hi], and with the
 * point test's expression shape d2box = dx*dx + (dy*dy + dz*dz) <= d2 of
 * every point: d2box >= h2 means d2 >= h2 for all of them, terms the point
 * loop skips anyway. Blur: fl(p - r) >= fl(hi + hs) gives b <= a in dn_box
 * for every l <= hi (and the mirror case), a zero weight on that axis for
 * every point, a term the point loop skips. */
static __device__ __forceinline__ bool dn_reaches(const double3 &p, const double3 &lo, const double3 &hi, double h2,
                                                  double r, double s, bool sph)
{
    if (sph) {
        double dx = p.x < lo.x ? lo.x - p.x : p.x > hi.x ? p.x - hi.x : 0.0;
        double dy = p.y < lo.y ? lo.y - p.y : p.y > hi.y ? p.y - hi.y : 0.0;
        double dz = p.z < lo.z ? lo.z - p.z : p.z > hi.z ? p.z - hi.z : 0.0;
        return dx * dx + (dy * dy + dz * dz) < h2;
    }
    double hs = 0.5 * s;
    return !(p.x - r >= hi.x + hs || p.x + r <= lo.x - hs || p.y - r >= hi.y + hs || p.y + r <= lo.y - hs ||
             p.z - r >= hi.z + hs || p.z + r <= lo.z - hs);
}

/* The terms of the warp's staged particles e = 0 .. cnt-1 (in neighbour
 * order) for this lane's point, added to acc. SPH: vol * W; blur: the box
 * splat (wx * wy) * wz. */
static __device__ __forceinline__ double dn_terms(const double2 *sxy, const double2 *szv, int cnt, double lx,
                                                  double ly, double lz, double h2, double inv_h, double sigma,
                                                  double sigma2, double r, double s, bool sph, double acc)
{
    if (sph) {
        /* Branch-free: every lane evaluates both spline pieces and adds the
         * term or +0.0. acc starts at +0.0 and every term is >= +0 (vol > 0,
         * W >= 0), so acc is never -0.0 and acc + 0.0 == acc: the same bits
         * as skipping. */
        for (int e = 0; e < cnt; e++) {
            const double2 a = sxy[e], b = szv[e];
            double ddx = a.x - lx, ddy = a.y - ly, ddz = b.x - lz;
            double d2 = ddx * ddx + (ddy * ddy + ddz * ddz);
            double q = sqrt(d2) * inv_h;
            double q2 = q * q;
            double wa = sigma * ((6.0 * q2) * (q - 1.0) + 1.0);
            double v = 1.0 - q;
            double wb = sigma2 * ((v * v) * v);
            double w = q <= 0.5 ? wa : v <= 0.0 ? 0.0 : wb;
            double t = b.y * w;
            acc += d2 < h2 ? t : 0.0;
        }
    } else {
        for (int e = 0; e < cnt; e++) {
            const double2 a = sxy[e];
            double wx = dn_box(a.x, r, lx, s);
            if (wx == 0.0) continue;
            double wy = dn_box(a.y, r, ly, s);
            if (wy == 0.0) continue;
            double wz = dn_box(szv[e].x, r, lz, s);
            if (wz == 0.0) continue;
            acc += (wx * wy) * wz;
        }
    }
    return acc;
}

/* One block per neighbour cell; each warp owns bricks of br.x * br.y * br.z
 * lattice points of the cell (one point per lane; a compact brick keeps its
 * bounding box small). Per brick, the warp reads the particles of the 27
 * cells around the cell in neighbour order, 32 at a time, keeps those that
 * can reach some point of the brick (dn_reaches, exact) and compacts them
 * in order (ballot, popc) into its shared-memory list; each lane then adds
 * the terms of the list to its point's sum. Every point therefore sees
 * exactly the particles the plain loop would add, in the same order. SPH
 * (sph, vol: the volumes) or blur (r: the particle radius). */
static __device__ __forceinline__ void dn_field(const dn_grid &g, double h, const double *vol, double r, int3 br,
                                                float *out, bool sph)
{
    __shared__ double2 sxy[DN_WARPS][DN_CAP], szv[DN_WARPS][DN_CAP];
    __shared__ uint32_t run_b[9], run_e[9];
    __shared__ int nrun;
    const long long c = blockIdx.x;
    const long long cx = c % g.cd[0], cy = (c / g.cd[0]) % g.cd[1], cz = c / (g.cd[0] * g.cd[1]);
    const long long B = g.block;
    const long long i0 = cx * B, j0 = cy * B, k0 = cz * B;
    const long long ni = min(B, g.dims[0] - i0), nj = min(B, g.dims[1] - j0), nk = min(B, g.dims[2] - k0);
    const double s = g.s, h2 = h * h, inv_h = 1.0 / h;
    const double sigma = 8.0 / (DN_PI * h * h * h), sigma2 = 2.0 * sigma;
    if (threadIdx.x == 0) {
        int q = 0;
        for (int dz = -1; dz <= 1; dz++) {
            if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= g.cd[2])) continue;
            for (int dy = -1; dy <= 1; dy++) {
                if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= g.cd[1])) continue;
                uint32_t b, e;
                dn_row_range(g, cx, ((cz + dz) * g.cd[1] + (cy + dy)) * g.cd[0], &b, &e);
                if (b != e) {
                    run_b[q] = b;
                    run_e[q] = e;
                    q++;
                }
            }
        }
        nrun = q;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    double2 *wxy = sxy[warp], *wzv = szv[warp];
    const int oi = lane % br.x, oj = (lane / br.x) % br.y, ok = lane / (br.x * br.y);
    const long long nbx = (ni + br.x - 1) / br.x, nby = (nj + br.y - 1) / br.y, nbz = (nk + br.z - 1) / br.z;
    const long long nbricks = nbx * nby * nbz;
    for (long long w = warp; w < nbricks; w += DN_WARPS) {
        const long long bi = (w % nbx) * br.x, bj = ((w / nbx) % nby) * br.y, bk = (w / (nbx * nby)) * br.z;
        const long long li = bi + oi, lj = bj + oj, lk = bk + ok;
        const bool live = ok < br.z && li < ni && lj < nj && lk < nk;
        /* The point and the brick's extreme points, by the same expression. */
        const double lx = (double)(g.lo[0] + i0 + li) * s, ly = (double)(g.lo[1] + j0 + lj) * s,
                     lz = (double)(g.lo[2] + k0 + lk) * s;
        const double3 lo = make_double3((double)(g.lo[0] + i0 + bi) * s, (double)(g.lo[1] + j0 + bj) * s,
                                        (double)(g.lo[2] + k0 + bk) * s);
        const double3 hi = make_double3((double)(g.lo[0] + i0 + min(bi + br.x, ni) - 1) * s,
                                        (double)(g.lo[1] + j0 + min(bj + br.y, nj) - 1) * s,
                                        (double)(g.lo[2] + k0 + min(bk + br.z, nk) - 1) * s);
        double acc = 0.0;
        int cnt = 0, q = 0;
        uint32_t cb = nrun > 0 ? run_b[0] : 0;
        /* Chunks of 32 slots over the runs; one place adds the terms (when
         * 32 are staged, and at the end), to keep the code small. */
        while (q < nrun) {
            const uint32_t left = run_e[q] - cb, t = cb + lane;
            bool keep = false;
            double3 p = make_double3(0.0, 0.0, 0.0);
            if ((uint32_t)lane < left) {
                p = make_double3(g.xyz[3 * (size_t)t], g.xyz[3 * (size_t)t + 1], g.xyz[3 * (size_t)t + 2]);
                keep = dn_reaches(p, lo, hi, h2, r, s, sph);
            }
            const unsigned m = __ballot_sync(0xffffffffu, keep);
            if (keep) {
                const int e = cnt + __popc(m & below);
                wxy[e] = make_double2(p.x, p.y);
                wzv[e] = make_double2(p.z, sph ? vol[t] : 0.0);
            }
            cnt += __popc(m);
            if (left > 32)
                cb += 32;
            else if (++q < nrun)
                cb = run_b[q];
            if (cnt >= 32 || (q == nrun && cnt > 0)) {
                __syncwarp();
                acc = dn_terms(wxy, wzv, cnt, lx, ly, lz, h2, inv_h, sigma, sigma2, r, s, sph, acc);
                __syncwarp();
                cnt = 0;
            }
        }
        if (live) out[((k0 + lk) * g.dims[1] + (j0 + lj)) * g.dims[0] + (i0 + li)] = (float)acc;
    }
}

/* 5 blocks of 256 per multiprocessor (48 registers, ~230 bytes of spills,
 * nvcc 13 for sm_90): occupancy hides the double-precision latency better
 * than the spill-free 104 registers (2 blocks) do. Measured on the H100 at
 * 10^7 particles (bench_cuda_reconstruct), before the branch-free terms:
 * 135.1 ms with 5 blocks, 135.9 with 4, 135.6 with 6, 138.1 with 8, 153.3
 * with 3, 190.6 with no bound; now 126.4 ms with 5 (issue-bound: Nsight
 * Compute, bench/RESULTS-density.md). */
__global__ void __launch_bounds__(DN_THREADS, 5) dn_sph_field_kernel(dn_grid g, double h, const double *vol, int3 br,
                                                                     float *out)
{
    dn_field(g, h, vol, 0.0, br, out, true);
}

/* Not measured for speed (the benchmark times SPH); spill-free, 106 registers. */
__global__ void __launch_bounds__(DN_THREADS) dn_splat_kernel(dn_grid g, double r, int3 br, float *out)
{
    dn_field(g, 1.0, NULL, r, br, out, false);
}

/* One binomial pass along `axis`, out of place: ((a + 2b) + c) * 0.25f with
 * zeros outside the grid, as tap() in src/cpu/blur.c. */
__global__ void dn_blur_kernel(const float *in, float *out, long long nx, long long ny, long long nz, int axis)
{
    const long long total = nx * ny * nz;
    const long long st = axis == 0 ? 1 : axis == 1 ? nx : nx * ny;
    const long long len = axis == 0 ? nx : axis == 1 ? ny : nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        long long t = axis == 0 ? p % nx : axis == 1 ? (p / nx) % ny : p / (nx * ny);
        float a = t > 0 ? in[p - st] : 0.0f, b = in[p], c = t + 1 < len ? in[p + st] : 0.0f;
        out[p] = ((a + 2.0f * b) + c) * 0.25f;
    }
}

/* The brick of lattice points per warp for cells of B^3 points: fewest
 * warps per cell (lanes used), then the most compact brick (smallest
 * bounding box, fewest particles in reach). B = 8 (SPH at c = 0.5): 4x4x2. */
static int3 dn_brick(long long B)
{
    int3 best = make_int3(1, 1, 1);
    long long best_n = -1, best_e = 0;
    for (int x = (int)(B < 32 ? B : 32); x >= 1; x--) /* ties: the widest rows (coalesced stores) */
        for (int y = (int)(B < 32 ? B : 32); y >= 1; y--)
            for (int z = 1; x * y * z <= 32 && z <= B; z++) {
                long long n = ((B + x - 1) / x) * ((B + y - 1) / y) * ((B + z - 1) / z), e = x + y + z;
                if (best_n < 0 || n < best_n || (n == best_n && e < best_e)) {
                    best = make_int3(x, y, z);
                    best_n = n;
                    best_e = e;
                }
            }
    return best;
}

static unsigned dn_blocks(long long n, long long cap)
{
    long long b = (n + DN_THREADS - 1) / DN_THREADS;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

extern "C" pm_status pmi_cuda_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                            const pm_field_params *p, pm_field *out)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    cudaStream_t st = pmi_cuda(ctx)->stream;
    double t0 = pmi_now_ms();
    dn_grid g;
    dn_scratch sc;
    memset(&sc, 0, sizeof sc);
    pm_status s = dn_grid_build(ctx, xyz, n, p, &g, &sc);
    if (s != PM_STATUS_OK) {
        dn_scratch_free(&sc);
        return s;
    }
    const int sph = p->method == PM_FIELD_SPH;
    const double r = p->radius, h = 2.0 * p->smoothing_length * r;
    double t1 = pmi_now_ms(), t2 = t1;

    float *field = NULL, *tmp = NULL;
    size_t fb = (size_t)g.points * sizeof(float);
    s = ctx->backend->alloc(ctx, fb, (void **)&field);
    if (s == PM_STATUS_OK && sph) {
        const double d = 2.0 * r, mass = p->rest_density * (d * d * d);
        dn_volumes_kernel<<<dn_blocks(g.n, 1ll << 31), DN_THREADS, 0, st>>>(g, h, mass, sc.vol);
        s = pmi_cuda_launched("pm_field_compute: particle densities");
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_field_compute: particle densities");
        t2 = pmi_now_ms();
        if (s == PM_STATUS_OK) {
            dn_sph_field_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, h, sc.vol, dn_brick(g.block), field);
            s = pmi_cuda_launched("pm_field_compute: colour field");
        }
    } else if (s == PM_STATUS_OK) {
        dn_splat_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, r, dn_brick(g.block), field);
        s = pmi_cuda_launched("pm_field_compute: splat");
        if (s == PM_STATUS_OK && p->blur_steps > 0) s = ctx->backend->alloc(ctx, fb, (void **)&tmp);
        for (int step = 0; s == PM_STATUS_OK && step < p->blur_steps; step++)
            for (int axis = 0; axis < 3 && s == PM_STATUS_OK; axis++) {
                dn_blur_kernel<<<dn_blocks(g.points, 65536), DN_THREADS, 0, st>>>(field, tmp, g.dims[0], g.dims[1],
                                                                               g.dims[2], axis);
                s = pmi_cuda_launched("pm_field_compute: blur");
                float *x = field;
                field = tmp;
                tmp = x;
            }
    }
    if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_field_compute: field");
    double t3 = pmi_now_ms();
    if (tmp) ctx->backend->free(ctx, tmp);
    dn_scratch_free(&sc);
    if (s != PM_STATUS_OK) {
        if (field) ctx->backend->free(ctx, field);
        return s;
    }
    pm_volume *v = &out->volume;
    v->data = field;
    v->type = PM_SAMPLE_F32;
    v->nx = (size_t)g.dims[0];
    v->ny = (size_t)g.dims[1];
    v->nz = (size_t)g.dims[2];
    v->row_stride = v->nx;
    v->slice_stride = v->nx * v->ny;
    for (int a = 0; a < 3; a++) {
        v->spacing[a] = g.s;
        v->origin[a] = (double)g.lo[a] * g.s;
    }
    out->iso = p->iso;
    out->inside_above = 1;
    out->particles_used = (size_t)g.n;
    out->particles_dropped = n - (size_t)g.n;
    out->timings.neighbours_ms = t1 - t0;
    out->timings.density_ms = t2 - t1;
    out->timings.field_ms = t3 - t2;
    return PM_STATUS_OK;
}

/* pm_field_compute on the caller's lattice, queued without waiting: the
 * same kernels as pmi_cuda_field_compute over the fixed-lattice neighbour
 * grid (neighbours.cu), the field written into the caller's buffer (blur:
 * the splat goes to whichever buffer makes the last pass land there). */
extern "C" pm_status pmi_cuda_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                                  const pm_field_params *p, const pm_field_grid *grid, float *field,
                                                  pm_field_status *status)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    cudaStream_t st = pmi_cuda(ctx)->stream;
    const int sph = p->method == PM_FIELD_SPH;
    const int passes = sph ? 0 : 3 * p->blur_steps;
    size_t points;
    if (!pmi_mul3_size(grid->dims[0], grid->dims[1], grid->dims[2], &points))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute_async: grid size overflows");
    dn_grid g;
    double *vol;
    void *extra;
    PMI_TRY(dn_grid_build_fixed(ctx, xyz, n, p, grid, passes ? points * sizeof(float) : 0, &g, &vol, &extra,
                                (unsigned long long *)status));
    const double r = p->radius, h = 2.0 * p->smoothing_length * r;
    if (sph) {
        const double d = 2.0 * r, mass = p->rest_density * (d * d * d);
        dn_volumes_kernel<<<dn_blocks(g.n, 1ll << 31), DN_THREADS, 0, st>>>(g, h, mass, vol);
        PMI_TRY(pmi_cuda_launched("pm_field_compute_async: particle densities"));
        dn_sph_field_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, h, vol, dn_brick(g.block), field);
        return pmi_cuda_launched("pm_field_compute_async: colour field");
    }
    float *a = (passes & 1) ? (float *)extra : field, *b = (passes & 1) ? field : (float *)extra;
    dn_splat_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, r, dn_brick(g.block), a);
    PMI_TRY(pmi_cuda_launched("pm_field_compute_async: splat"));
    for (int q = 0; q < passes; q++) {
        dn_blur_kernel<<<dn_blocks(g.points, 65536), DN_THREADS, 0, st>>>(a, b, g.dims[0], g.dims[1], g.dims[2],
                                                                        q % 3);
        PMI_TRY(pmi_cuda_launched("pm_field_compute_async: blur"));
        float *x = a;
        a = b;
        b = x;
    }
    return PM_STATUS_OK;
}
