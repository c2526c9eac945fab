/* Density fields on the GPU (pm_field_compute, CUDA backend): splashsurf's
 * SPH colour field and the splat-and-blur density, with the definitions and
 * summation order of docs/reconstruct.md (the CPU code in src/cpu/density.c,
 * sph.c, blur.c), so the f32 field is bit-identical to the CPU's: every term
 * comes from the same functions (core/sph_kernel.h, --fmad=false), added in
 * the same order (neighbour cells z, y, x; particles by cell, then input
 * index). The neighbour grid is in neighbours.cu. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_mc.h"
#include "cuda/density_internal.cuh"

#define DN_THREADS 256
#define DN_WARPS (DN_THREADS / 32)
#define DN_CAP 64 /* particles staged per warp: up to 31 left + 32 new */

/* Sorted slots of cells cx-1..cx+1 of one row of cells: one contiguous run. */
static __device__ __forceinline__ void dn_row_range(const pmi_dn_grid &g, long long cx,
                                                    long long rowbase, uint32_t *b, uint32_t *e)
{
    long long x0 = cx > 0 ? cx - 1 : 0, x1 = cx + 1 < g.cd[0] ? cx + 1 : g.cd[0] - 1;
    *b = g.start[rowbase + x0];
    *e = g.start[rowbase + x1 + 1];
}

/* rho_j and vol_j = m / rho_j for every sorted slot. */
static __global__ void __launch_bounds__(DN_THREADS)
    dn_volumes_kernel(pmi_dn_grid g, double h, double mass, double *vol)
{
    const long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= g.n) return;
    const pmi_sph_kernel w = pmi_sph_kernel_of(h);
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
                const double d2 = pmi_dist2((double)g.xyz[3 * (size_t)j] - xk,
                                            (double)g.xyz[3 * (size_t)j + 1] - yk,
                                            (double)g.xyz[3 * (size_t)j + 2] - zk);
                if (d2 < w.h2) sum += pmi_sph_w(d2, &w);
            }
        }
    }
    vol[k] = pmi_sph_volume(mass, sum);
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
 * loop skips anyway. Blur: fl(p - r) >= fl(hi + hs) gives b <= a in pmi_box_weight
 * for every l <= hi (and the mirror case), a zero weight on that axis for
 * every point, a term the point loop skips. */
static __device__ __forceinline__ bool dn_reaches(const double3 &p, const double3 &lo,
                                                  const double3 &hi, double h2, double r, double s,
                                                  bool sph)
{
    if (sph) {
        double dx = p.x < lo.x ? lo.x - p.x : p.x > hi.x ? p.x - hi.x : 0.0;
        double dy = p.y < lo.y ? lo.y - p.y : p.y > hi.y ? p.y - hi.y : 0.0;
        double dz = p.z < lo.z ? lo.z - p.z : p.z > hi.z ? p.z - hi.z : 0.0;
        return pmi_dist2(dx, dy, dz) < h2;
    }
    double hs = 0.5 * s;
    return !(p.x - r >= hi.x + hs || p.x + r <= lo.x - hs || p.y - r >= hi.y + hs ||
             p.y + r <= lo.y - hs || p.z - r >= hi.z + hs || p.z + r <= lo.z - hs);
}

/* The terms of the warp's staged particles e = 0 .. cnt-1 (in neighbour
 * order) for this lane's point, added to acc. SPH: vol * W; blur: the box
 * splat (wx * wy) * wz. */
static __device__ __forceinline__ double dn_terms(const double2 *sxy, const double2 *szv, int cnt,
                                                  double lx, double ly, double lz,
                                                  const pmi_sph_kernel *w, double r, double s,
                                                  bool sph, double acc)
{
    if (sph) {
        /* Branch-free: every lane evaluates both spline pieces and adds the
         * term or +0.0. acc starts at +0.0 and every term is >= +0 (vol > 0,
         * W >= 0), so acc is never -0.0 and acc + 0.0 == acc: the same bits
         * as skipping. */
        for (int e = 0; e < cnt; e++) {
            const double2 a = sxy[e], b = szv[e];
            const double d2 = pmi_dist2(a.x - lx, a.y - ly, b.x - lz);
            const double t =
                b.y * pmi_cubic_spline_select(pmi_sqrt(d2) * w->inv_h, w->sigma, w->sigma2);
            acc += d2 < w->h2 ? t : 0.0;
        }
    } else {
        for (int e = 0; e < cnt; e++) {
            const double2 a = sxy[e];
            double wx = pmi_box_weight(a.x, r, lx, s);
            if (wx == 0.0) continue;
            double wy = pmi_box_weight(a.y, r, ly, s);
            if (wy == 0.0) continue;
            double wz = pmi_box_weight(szv[e].x, r, lz, s);
            if (wz == 0.0) continue;
            acc += (wx * wy) * wz;
        }
    }
    return acc;
}

/* One group of warps per neighbour cell (one block, or a part of one for
 * small cells); each warp owns bricks of br.x * br.y * br.z
 * lattice points of the cell (one point per lane; a compact brick keeps its
 * bounding box small). Per brick, the warp reads the particles of the 27
 * cells around the cell in neighbour order, 32 at a time, keeps those that
 * can reach some point of the brick (dn_reaches, exact) and compacts them
 * in order (ballot, popc) into its shared-memory list; each lane then adds
 * the terms of the list to its point's sum. Every point therefore sees
 * exactly the particles the plain loop would add, in the same order. SPH
 * (sph, vol: the volumes) or blur (r: the particle radius). */
static __device__ __forceinline__ void dn_field(const pmi_dn_grid &g, double h, const double *vol,
                                                double r, int3 br, int wpc, float *out, bool sph)
{
    __shared__ double2 sxy[DN_WARPS][DN_CAP], szv[DN_WARPS][DN_CAP];
    __shared__ uint32_t run_b[DN_WARPS][9], run_e[DN_WARPS][9];
    __shared__ int nrun_s[DN_WARPS];
    /* wpc warps per cell (dn_warps_per_cell), DN_WARPS / wpc cells per
     * block: group gr of the block's warps takes cell c, its warp wi of
     * them the cell's bricks wi, wi + wpc, ... */
    const int warp0 = threadIdx.x >> 5, gr = warp0 / wpc, wi = warp0 % wpc;
    const long long c = blockIdx.x * (long long)(DN_WARPS / wpc) + gr;
    const bool cell_live = c < g.ncells;
    const long long cx = c % g.cd[0], cy = (c / g.cd[0]) % g.cd[1], cz = c / (g.cd[0] * g.cd[1]);
    const long long B = g.block;
    const long long i0 = cx * B, j0 = cy * B, k0 = cz * B;
    const long long ni = min(B, g.dims[0] - i0), nj = min(B, g.dims[1] - j0),
                    nk = min(B, g.dims[2] - k0);
    const double s = g.s;
    const pmi_sph_kernel w = pmi_sph_kernel_of(h);
    if (cell_live && wi == 0 && (threadIdx.x & 31) == 0) {
        int q = 0;
        for (int dz = -1; dz <= 1; dz++) {
            if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= g.cd[2])) continue;
            for (int dy = -1; dy <= 1; dy++) {
                if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= g.cd[1])) continue;
                uint32_t b, e;
                dn_row_range(g, cx, ((cz + dz) * g.cd[1] + (cy + dy)) * g.cd[0], &b, &e);
                if (b != e) {
                    run_b[gr][q] = b;
                    run_e[gr][q] = e;
                    q++;
                }
            }
        }
        nrun_s[gr] = q;
    }
    __syncthreads();
    if (!cell_live) return;
    const int nrun = nrun_s[gr];
    const uint32_t *rb = run_b[gr], *re = run_e[gr];
    const int warp = warp0, lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    double2 *wxy = sxy[warp], *wzv = szv[warp];
    const int oi = lane % br.x, oj = (lane / br.x) % br.y, ok = lane / (br.x * br.y);
    const long long nbx = (ni + br.x - 1) / br.x, nby = (nj + br.y - 1) / br.y,
                    nbz = (nk + br.z - 1) / br.z;
    const long long nbricks = nbx * nby * nbz;
    for (long long wb = wi; wb < nbricks; wb += wpc) {
        const long long bi = (wb % nbx) * br.x, bj = ((wb / nbx) % nby) * br.y,
                        bk = (wb / (nbx * nby)) * br.z;
        const long long li = bi + oi, lj = bj + oj, lk = bk + ok;
        const bool live = ok < br.z && li < ni && lj < nj && lk < nk;
        /* The point and the brick's extreme points, by the same expression. */
        const double lx = pmi_lattice_coord(g.lo[0] + i0 + li, s),
                     ly = pmi_lattice_coord(g.lo[1] + j0 + lj, s),
                     lz = pmi_lattice_coord(g.lo[2] + k0 + lk, s);
        const double3 lo = make_double3(pmi_lattice_coord(g.lo[0] + i0 + bi, s),
                                        pmi_lattice_coord(g.lo[1] + j0 + bj, s),
                                        pmi_lattice_coord(g.lo[2] + k0 + bk, s));
        const double3 hi =
            make_double3(pmi_lattice_coord(g.lo[0] + i0 + min(bi + br.x, ni) - 1, s),
                         pmi_lattice_coord(g.lo[1] + j0 + min(bj + br.y, nj) - 1, s),
                         pmi_lattice_coord(g.lo[2] + k0 + min(bk + br.z, nk) - 1, s));
        double acc = 0.0;
        int cnt = 0, q = 0;
        uint32_t cb = nrun > 0 ? rb[0] : 0;
        /* Chunks of 32 slots over the runs; one place adds the terms (when
         * 32 are staged, and at the end), to keep the code small. */
        while (q < nrun) {
            const uint32_t left = re[q] - cb, t = cb + lane;
            bool keep = false;
            double3 p = make_double3(0.0, 0.0, 0.0);
            if ((uint32_t)lane < left) {
                p = make_double3(g.xyz[3 * (size_t)t], g.xyz[3 * (size_t)t + 1],
                                 g.xyz[3 * (size_t)t + 2]);
                keep = dn_reaches(p, lo, hi, w.h2, r, s, sph);
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
                cb = rb[q];
            if (cnt >= 32 || (q == nrun && cnt > 0)) {
                __syncwarp();
                acc = dn_terms(wxy, wzv, cnt, lx, ly, lz, &w, r, s, sph, acc);
                __syncwarp();
                cnt = 0;
            }
        }
        if (live) out[((k0 + lk) * g.dims[1] + (j0 + lj)) * g.dims[0] + (i0 + li)] = (float)acc;
    }
}

/* Five resident blocks of the field kernel per SM (1280 threads), where
 * the SM holds that many: Turing (sm_75) holds 1024 threads, so four. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define DN_FIELD_MIN_BLOCKS 4
#else
#define DN_FIELD_MIN_BLOCKS 5
#endif

/* 5 blocks of 256 per multiprocessor (48 registers, ~230 bytes of spills,
 * nvcc 13 for sm_90): occupancy hides the double-precision latency better
 * than the spill-free 104 registers (2 blocks) do; the fastest bound on the
 * H100 (bench_cuda_reconstruct; the sweep is in bench/RESULTS-density.md). */
static __global__ void __launch_bounds__(DN_THREADS, DN_FIELD_MIN_BLOCKS)
    dn_sph_field_kernel(pmi_dn_grid g, double h, const double *vol, int3 br, int wpc, float *out)
{
    dn_field(g, h, vol, 0.0, br, wpc, out, true);
}

/* Not measured for speed (the benchmark times SPH); spill-free, 106 registers. */
static __global__ void __launch_bounds__(DN_THREADS)
    dn_splat_kernel(pmi_dn_grid g, double r, int3 br, int wpc, float *out)
{
    dn_field(g, 1.0, NULL, r, br, wpc, out, false);
}

/* One binomial pass along `axis`, out of place: pmi_blur_tap with zeros
 * outside the grid, as the CPU's passes in src/cpu/blur.c. */
static __global__ void dn_blur_kernel(const float *in, float *out, long long nx, long long ny,
                                      long long nz, int axis)
{
    const long long total = nx * ny * nz;
    const long long st = axis == 0 ? 1 : axis == 1 ? nx : nx * ny;
    const long long len = axis == 0 ? nx : axis == 1 ? ny : nz;
    for (long long p = blockIdx.x * (long long)blockDim.x + threadIdx.x; p < total;
         p += (long long)gridDim.x * blockDim.x) {
        long long t = axis == 0 ? p % nx : axis == 1 ? (p / nx) % ny : p / (nx * ny);
        float a = t > 0 ? in[p - st] : 0.0f, b = in[p], c = t + 1 < len ? in[p + st] : 0.0f;
        out[p] = pmi_blur_tap(a, b, c);
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
                long long n = ((B + x - 1) / x) * ((B + y - 1) / y) * ((B + z - 1) / z),
                          e = x + y + z;
                if (best_n < 0 || n < best_n || (n == best_n && e < best_e)) {
                    best = make_int3(x, y, z);
                    best_n = n;
                    best_e = e;
                }
            }
    return best;
}

/* Warps per cell of the field kernels: as many as the cell has bricks of
 * br, rounded up to a divisor of DN_WARPS (small cells, B^3 <= 32 at
 * c >= 1, share a block instead of leaving 7 of its 8 warps idle). */
static int dn_warps_per_cell(long long B, int3 br)
{
    const long long nb = ((B + br.x - 1) / br.x) * ((B + br.y - 1) / br.y) * ((B + br.z - 1) / br.z);
    int w = 1;
    while (w < DN_WARPS && w < nb)
        w *= 2;
    return w;
}

/* Blocks of the field kernels over the grid's cells. */
static unsigned dn_cell_blocks(const pmi_dn_grid &g, int wpc)
{
    const long long per = DN_WARPS / wpc;
    return (unsigned)((g.ncells + per - 1) / per);
}

static unsigned dn_blocks(long long n, long long cap)
{
    long long b = (n + DN_THREADS - 1) / DN_THREADS;
    if (b < 1) b = 1;
    if (b > cap) b = cap;
    return (unsigned)b;
}

/* pmi_cuda_launched with the message "fn: stage". */
static pm_status dn_launched(const char *fn, const char *stage)
{
    const cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return PM_STATUS_OK;
    char what[96];
    snprintf(what, sizeof what, "%s: %s", fn, stage);
    return pmi_cuda_status(e, what);
}

/* The plan both drivers queue on the grid g. SPH: the particle volumes
 * (dn_queue_volumes), then the colour field over them; blur: the splat,
 * then 3 * blur_steps passes ping-ponging with tmp (as many points),
 * started in whichever buffer makes the last pass land in field. */
static pm_status dn_queue_volumes(pm_context *ctx, const pmi_dn_grid &g, const pm_field_params *p,
                                  double *vol, const char *fn)
{
    dn_volumes_kernel<<<dn_blocks(g.n, 1ll << 31), DN_THREADS, 0, pmi_cuda(ctx)->stream>>>(
        g, pmi_field_rule_of(p).h, pmi_sph_mass(p->radius, p->rest_density), vol);
    return dn_launched(fn, "particle densities");
}

static pm_status dn_queue_field(pm_context *ctx, const pmi_dn_grid &g, const pm_field_params *p,
                                const double *vol, float *field, float *tmp, const char *fn)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    if (p->method == PM_FIELD_SPH) {
        const int3 br = dn_brick(g.block);
        const int wpc = dn_warps_per_cell(g.block, br);
        dn_sph_field_kernel<<<dn_cell_blocks(g, wpc), DN_THREADS, 0, st>>>(
            g, pmi_field_rule_of(p).h, vol, br, wpc, field);
        return dn_launched(fn, "colour field");
    }
    const int passes = 3 * p->blur_steps;
    float *a = (passes & 1) ? tmp : field, *b = (passes & 1) ? field : tmp;
    const int3 br = dn_brick(g.block);
    const int wpc = dn_warps_per_cell(g.block, br);
    dn_splat_kernel<<<dn_cell_blocks(g, wpc), DN_THREADS, 0, st>>>(g, p->radius, br, wpc, a);
    PMI_TRY(dn_launched(fn, "splat"));
    for (int q = 0; q < passes; q++) {
        dn_blur_kernel<<<dn_blocks(g.points, 65536), DN_THREADS, 0, st>>>(
            a, b, g.dims[0], g.dims[1], g.dims[2], q % 3);
        PMI_TRY(dn_launched(fn, "blur"));
        float *x = a;
        a = b;
        b = x;
    }
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_dn_queue_sph(pm_context *ctx, const pmi_dn_grid *g, double h,
                                      double mass, double *vol, float *field, const char *fn)
{
    cudaStream_t st = pmi_cuda(ctx)->stream;
    dn_volumes_kernel<<<dn_blocks(g->n, 1ll << 31), DN_THREADS, 0, st>>>(*g, h, mass, vol);
    PMI_TRY(dn_launched(fn, "particle densities"));
    const int3 br = dn_brick(g->block);
    const int wpc = dn_warps_per_cell(g->block, br);
    dn_sph_field_kernel<<<dn_cell_blocks(*g, wpc), DN_THREADS, 0, st>>>(*g, h, vol, br, wpc,
                                                                         field);
    return dn_launched(fn, "colour field");
}

extern "C" pm_status pmi_cuda_field_compute(pm_context *ctx, const float *xyz, size_t n,
                                            const pm_field_params *p, pm_field *out)
{
    static const char fn[] = "pm_field_compute";
    PMI_TRY(pmi_cuda_begin(ctx));
    double t0 = pmi_now_ms();
    pmi_dn_grid g;
    pmi_dn_scratch sc;
    memset(&sc, 0, sizeof sc);
    pm_status s = pmi_dn_grid_build(ctx, xyz, n, p, &g, &sc);
    if (s != PM_STATUS_OK) {
        pmi_dn_scratch_free(&sc);
        return s;
    }
    const int sph = p->method == PM_FIELD_SPH;
    double t1 = pmi_now_ms(), t2 = t1;

    float *field = NULL, *tmp = NULL;
    size_t fb = (size_t)g.points * sizeof(float);
    s = ctx->backend->alloc(ctx, fb, (void **)&field);
    if (s == PM_STATUS_OK && sph) {
        /* Waits between the two kernels for the stage timings. */
        s = dn_queue_volumes(ctx, g, p, sc.vol, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_field_compute: particle densities");
        t2 = pmi_now_ms();
    } else if (s == PM_STATUS_OK && p->blur_steps > 0) {
        s = ctx->backend->alloc(ctx, fb, (void **)&tmp);
    }
    if (s == PM_STATUS_OK) s = dn_queue_field(ctx, g, p, sc.vol, field, tmp, fn);
    if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_field_compute: field");
    double t3 = pmi_now_ms();
    if (tmp) ctx->backend->free(ctx, tmp);
    pmi_dn_scratch_free(&sc);
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
        v->origin[a] = pmi_lattice_coord(g.lo[a], g.s);
    }
    out->iso = p->iso;
    out->inside = PM_INSIDE_ABOVE;
    out->particles_used = (size_t)g.n;
    out->particles_dropped = n - (size_t)g.n;
    out->timings.neighbours_ms = t1 - t0;
    out->timings.density_ms = t2 - t1;
    out->timings.field_ms = t3 - t2;
    return PM_STATUS_OK;
}

/* pm_field_compute on the caller's lattice, queued without waiting: the
 * same plan as pmi_cuda_field_compute over the fixed-lattice neighbour
 * grid (neighbours.cu), the field written into the caller's buffer. */
extern "C" pm_status pmi_cuda_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                                  const pm_field_params *p,
                                                  const pm_field_grid *grid, float *field,
                                                  pm_field_status *status)
{
    static const char fn[] = "pm_field_compute_async";
    PMI_TRY(pmi_cuda_begin(ctx));
    const int sph = p->method == PM_FIELD_SPH;
    const int passes = sph ? 0 : 3 * p->blur_steps;
    size_t points;
    if (!pmi_mul3_size(grid->dims[0], grid->dims[1], grid->dims[2], &points))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute_async: grid size overflows");
    pmi_dn_grid g;
    double *vol;
    void *extra;
    PMI_TRY(pmi_dn_grid_build_fixed(ctx, xyz, n, p, grid, passes ? points * sizeof(float) : 0, &g,
                                    &vol, &extra, status));
    if (sph) PMI_TRY(dn_queue_volumes(ctx, g, p, vol, fn));
    return dn_queue_field(ctx, g, p, vol, field, (float *)extra, fn);
}

/* Kernel preloading (preload.cu): the density fields' kernels. */
void pmi_density_preload(pmi_preload *p, int tier)
{
    if (tier != 0) return;
    const void *const k[] = {(const void *)dn_volumes_kernel, (const void *)dn_sph_field_kernel,
                             (const void *)dn_splat_kernel, (const void *)dn_blur_kernel};
    pmi_preload_all(p, k);
}
