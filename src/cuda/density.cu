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
#define DN_CHUNK 512 /* particles staged in shared memory at a time */

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

/* One block per neighbour cell: the particles of the 27 cells around it are
 * staged in shared memory in neighbour order, chunk by chunk, and each
 * thread sums the terms of its lattice points in that order. SPH: vol * W;
 * blur (vol == NULL): the box splat (wx * wy) * wz. */
__global__ void __launch_bounds__(DN_THREADS)
dn_field_kernel(dn_grid g, double h, const double *vol, double r, float *out)
{
    __shared__ double sx[DN_CHUNK], sy[DN_CHUNK], sz[DN_CHUNK], sv[DN_CHUNK];
    __shared__ uint32_t run_b[9], run_e[9];
    __shared__ int nrun;
    const long long c = blockIdx.x;
    const long long cx = c % g.cd[0], cy = (c / g.cd[0]) % g.cd[1], cz = c / (g.cd[0] * g.cd[1]);
    const long long B = g.block;
    const long long i0 = cx * B, j0 = cy * B, k0 = cz * B;
    const long long ni = min(B, g.dims[0] - i0), nj = min(B, g.dims[1] - j0), nk = min(B, g.dims[2] - k0);
    const long long npts = ni * nj * nk;
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
    /* Points in passes of blockDim; each thread keeps its sum in a register
     * across all chunks, so the order of terms is the neighbour order. */
    for (long long pb = 0; pb < npts; pb += blockDim.x) {
        const long long p = pb + threadIdx.x;
        const int live = p < npts;
        const long long li = live ? p % ni : 0, lj = live ? (p / ni) % nj : 0, lk = live ? p / (ni * nj) : 0;
        const double lx = (double)(g.lo[0] + i0 + li) * s, ly = (double)(g.lo[1] + j0 + lj) * s,
                     lz = (double)(g.lo[2] + k0 + lk) * s;
        double acc = 0.0;
        for (int q = 0; q < nrun; q++) {
            for (uint32_t cb = run_b[q]; cb < run_e[q]; cb += DN_CHUNK) {
                const uint32_t ce = min(run_e[q], cb + DN_CHUNK);
                __syncthreads();
                for (uint32_t t = cb + threadIdx.x; t < ce; t += blockDim.x) {
                    sx[t - cb] = g.xyz[3 * (size_t)t];
                    sy[t - cb] = g.xyz[3 * (size_t)t + 1];
                    sz[t - cb] = g.xyz[3 * (size_t)t + 2];
                    sv[t - cb] = vol ? vol[t] : 0.0;
                }
                __syncthreads();
                if (!live) continue;
                const int m = (int)(ce - cb);
                if (vol) {
                    for (int t = 0; t < m; t++) {
                        double ddx = sx[t] - lx, ddy = sy[t] - ly, ddz = sz[t] - lz;
                        double d2 = ddx * ddx + (ddy * ddy + ddz * ddz);
                        if (d2 < h2) acc += sv[t] * dn_spline(sqrt(d2) * inv_h, sigma, sigma2);
                    }
                } else {
                    for (int t = 0; t < m; t++) {
                        double wx = dn_box(sx[t], r, lx, s);
                        if (wx == 0.0) continue;
                        double wy = dn_box(sy[t], r, ly, s);
                        if (wy == 0.0) continue;
                        double wz = dn_box(sz[t], r, lz, s);
                        if (wz == 0.0) continue;
                        acc += (wx * wy) * wz;
                    }
                }
            }
        }
        if (live)
            out[((k0 + lk) * g.dims[1] + (j0 + lj)) * g.dims[0] + (i0 + li)] = (float)acc;
    }
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
            dn_field_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, h, sc.vol, 0.0, field);
            s = pmi_cuda_launched("pm_field_compute: colour field");
        }
    } else if (s == PM_STATUS_OK) {
        dn_field_kernel<<<(unsigned)g.ncells, DN_THREADS, 0, st>>>(g, 1.0, NULL, r, field);
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
