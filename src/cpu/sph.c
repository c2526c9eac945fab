/* SPH density and colour field as splashsurf defines them (Loeschner et al.,
 * splashsurf_lib density_map.rs): rho_j = m sum_k W(|x_j - x_k|, h) with the
 * cubic spline kernel, phi(x) = sum_j (m / rho_j) W(|x - x_j|, h).
 * Vectorised ACROSS sums only: four lattice points (field) or four particles
 * (densities) in the lanes, each lane adding its own terms in the documented
 * order with the scalar operations of core/sph_kernel.h, so every value is
 * bit-identical to the one-term-at-a-time definition (docs/reconstruct.md;
 * test_density holds it as the reference). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/density.h"

/* An AVX2 copy of the hot loops, chosen at run time, beside the x86-64
 * baseline (SSE2) one. Same operations in both (no FMA: -ffp-contract=off,
 * and the avx2 target does not enable FMA), so the same bits. */
#if defined(__GNUC__) && defined(__x86_64__)
#define PMI_SPH_AVX2 1
#endif

#define VW 4
typedef double v4d __attribute__((vector_size(32)));
typedef long long v4l __attribute__((vector_size(32)));
#define ALWAYS static inline __attribute__((always_inline))

/* The vector helpers below are always inlined, so no 32-byte vector crosses
 * a call boundary and the SSE2 build's ABI for them never matters. GCC and
 * clang still warn about returning one without AVX (-Wpsabi, silenced
 * here), and GCC prints a note about passing one as a parameter that no
 * pragma silences: hence the vectors go into helpers by pointer. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

ALWAYS v4d splat4(double x) { return (v4d){x, x, x, x}; }
ALWAYS v4d load4(const double *p)
{
    v4d v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Lane-wise IEEE sqrt; GCC turns it into one sqrtpd (x2) / vsqrtpd. */
ALWAYS v4d sqrt4(const v4d *x)
{
    return (v4d){__builtin_sqrt((*x)[0]), __builtin_sqrt((*x)[1]), __builtin_sqrt((*x)[2]),
                 __builtin_sqrt((*x)[3])};
}

/* pmi_sph_w(d2) per lane: pmi_cubic_spline_select (core/sph_kernel.h)
 * lane-wise, each piece by the scalar operations; lanes where !(live &&
 * d2 < h2) give exactly +0.0. Adding +0.0 to a sum >= +0.0 leaves its bits
 * alone (every term is >= 0 and sums start at +0.0), so a masked lane is
 * the same as the scalar code's skipped term. */
ALWAYS v4d spline4(const v4d *d2p, const v4l *live, const pmi_sph_kernel *k)
{
    const v4d one = splat4(1.0), d2 = *d2p;
    v4l m = *live & (d2 < splat4(k->h2));
    v4d q = sqrt4(&d2) * splat4(k->inv_h);
    v4d q2 = q * q;
    v4d w1 = splat4(k->sigma) * ((splat4(6.0) * q2) * (q - one) + one);
    v4d v = one - q;
    v4d w2 = splat4(k->sigma2) * ((v * v) * v);
    v4l inner = q <= splat4(0.5), pos = v > splat4(0.0);
    v4l w = ((v4l)w1 & inner) | ((v4l)w2 & ~inner & pos);
    return (v4d)(w & m);
}

ALWAYS v4l lanes_below(long long n)
{
    const v4l iota = {0, 1, 2, 3};
    return iota < (v4l){n, n, n, n};
}

/* ---- densities: lanes are four particles of one cell ---- */

ALWAYS void volumes_cell(const pmi_field_layout *lay, const pmi_cell_list *cells, size_t c,
                         const pmi_sph_kernel *k, double mass, double *vol)
{
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1], cdz = lay->cdims[2];
    const float *X = cells->xyz;
    uint32_t b0 = cells->start[c], e0 = cells->start[c + 1];
    size_t cx = c % cdx, cy = (c / cdx) % cdy, cz = c / (cdx * cdy);
    for (uint32_t g = b0; g < e0; g += VW) {
        long long live = e0 - g;
        v4l lv = lanes_below(live);
        v4d xk, yk, zk;
        for (int l = 0; l < VW; l++) {
            uint32_t q = l < live ? g + (uint32_t)l : g; /* dead lanes: a copy */
            xk[l] = X[3 * (size_t)q], yk[l] = X[3 * (size_t)q + 1], zk[l] = X[3 * (size_t)q + 2];
        }
        v4d sum = splat4(0.0);
        /* Neighbour cells in z, y, x order; particles in sorted order. */
        for (int dz = -1; dz <= 1; dz++) {
            if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= cdz)) continue;
            for (int dy = -1; dy <= 1; dy++) {
                if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= cdy)) continue;
                uint32_t b, e;
                pmi_row_range(lay, cells, cx, ((cz + dz) * cdy + (cy + dy)) * cdx, &b, &e);
                for (uint32_t j = b; j < e; j++) {
                    v4d ddx = splat4(X[3 * (size_t)j]) - xk;
                    v4d ddy = splat4(X[3 * (size_t)j + 1]) - yk;
                    v4d ddz = splat4(X[3 * (size_t)j + 2]) - zk;
                    v4d d2 = ddx * ddx + (ddy * ddy + ddz * ddz); /* pmi_dist2 */
                    sum += spline4(&d2, &lv, k);
                }
            }
        }
        for (int l = 0; l < VW && l < live; l++)
            vol[g + (uint32_t)l] = pmi_sph_volume(mass, sum[l]);
    }
}

static void volumes_cell_base(const pmi_field_layout *lay, const pmi_cell_list *cells, size_t c,
                              const pmi_sph_kernel *k, double mass, double *vol)
{
    volumes_cell(lay, cells, c, k, mass, vol);
}
#ifdef PMI_SPH_AVX2
__attribute__((target("avx2"))) static void volumes_cell_avx2(const pmi_field_layout *lay,
                                                              const pmi_cell_list *cells, size_t c,
                                                              const pmi_sph_kernel *k, double mass,
                                                              double *vol)
{
    volumes_cell(lay, cells, c, k, mass, vol);
}
#endif

static int use_avx2(void)
{
#ifdef PMI_SPH_AVX2
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

pm_status pmi_sph_volumes(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                          double h, double mass, double *vol)
{
    const pmi_sph_kernel k = pmi_sph_kernel_of(h);
    void (*fn)(const pmi_field_layout *, const pmi_cell_list *, size_t, const pmi_sph_kernel *,
               double, double *) = volumes_cell_base;
#ifdef PMI_SPH_AVX2
    if (use_avx2()) fn = volumes_cell_avx2;
#endif
    const long long snc = (long long)lay->ncells;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(dynamic, 64)
    for (long long lc = 0; lc < snc; lc++) {
        size_t c = (size_t)lc;
        if (cells->start[c] != cells->start[c + 1]) fn(lay, cells, c, &k, mass, vol);
    }
    return PM_STATUS_OK;
}

/* ---- colour field: lanes are four consecutive lattice points of a row ---- */

typedef struct field_job {
    const pmi_field_layout *lay;
    const pmi_cell_list *cells;
    const double *vol;
    float *out;
    pmi_sph_kernel k;
    double s;      /* lattice spacing */
    size_t sbc[3]; /* neighbour cells per superblock edge */
    size_t nsb[3]; /* superblocks per axis */
    size_t w0[3], w1[3]; /* the window of lattice points computed (out's box) */
    size_t cw0[3], cw1[3]; /* the cells that hold the window's points */
    size_t slab;   /* lattice points per z slab of a superblock */
    int chord;     /* x ranges may be narrowed to the sphere's chord */
} field_job;

/* row[i] += v * W(|(px, ., .) - (lx[i], ., .)|) for i in [ia, ib], dyz the
 * row's dy^2 + dz^2: four points at once. Lanes past ib add +0.0 to
 * row[] (padded), which leaves it unchanged. */
ALWAYS void field_row(double *row, const double *lx, size_t ia, size_t ib, double px, double dyz,
                      double v, const pmi_sph_kernel *k)
{
    const v4d pxv = splat4(px), dyzv = splat4(dyz), vv = splat4(v);
    for (size_t i = ia; i <= ib; i += VW) {
        v4d ddx = pxv - load4(lx + i);
        v4d d2 = ddx * ddx + dyzv;
        v4l live = lanes_below((long long)(ib - i) + 1);
        v4d t = vv * spline4(&d2, &live, k), r = load4(row + i) + t;
        memcpy(row + i, &r, sizeof r);
    }
}

/* The lattice points of one superblock (whole cells c0..c1-1 per axis)
 * receive the terms of the particles of cells c0-1..c1, visited in
 * ascending cell id and sorted order. Each particle adds only to points of
 * the cells within one cell of its own (its 27-cell neighbourhood, as in
 * the per-point definition) and only where d2 < h2: every point gets
 * exactly the documented terms, in ascending sorted-slot order, which is
 * the documented neighbour order (dz, dy, then x-1..x+1 of a row is
 * ascending cell id). */
ALWAYS void field_superblock(const field_job *J, size_t sb, double *acc, double *lxyz)
{
    const pmi_field_layout *lay = J->lay;
    const pmi_cell_list *cells = J->cells;
    const pmi_sph_kernel *k = &J->k;
    const float *X = cells->xyz;
    const double h = k->h, h2 = k->h2, s = J->s, inv_s = 1.0 / s;
    const size_t B = lay->block;
    /* out holds the window, x fastest. */
    const size_t nx = J->w1[0] - J->w0[0], ny = J->w1[1] - J->w0[1];
    const size_t *w0 = J->w0;
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1];
    size_t sbi[3] = {sb % J->nsb[0], (sb / J->nsb[0]) % J->nsb[1], sb / (J->nsb[0] * J->nsb[1])};
    size_t c0[3], c1[3], p0[3], p1[3], q0[3], q1[3];
    for (int a = 0; a < 3; a++) {
        c0[a] = J->cw0[a] + sbi[a] * J->sbc[a];
        c1[a] = c0[a] + J->sbc[a] < J->cw1[a] ? c0[a] + J->sbc[a] : J->cw1[a];
        p0[a] = c0[a] * B > J->w0[a] ? c0[a] * B : J->w0[a];
        p1[a] = c1[a] * B < J->w1[a] ? c1[a] * B : J->w1[a];
        q0[a] = c0[a] > 0 ? c0[a] - 1 : 0;
        q1[a] = c1[a] < lay->cdims[a] ? c1[a] + 1 : lay->cdims[a];
    }
    const size_t ni = p1[0] - p0[0], nj = p1[1] - p0[1];
    double *lx = lxyz, *ly = lx + ni + VW, *lz = ly + nj;
    for (size_t i = 0; i < ni; i++)
        lx[i] = pmi_lattice_coord(lay->lo[0] + (int64_t)(p0[0] + i), s);
    for (size_t i = ni; i < ni + VW; i++)
        lx[i] = lx[ni - 1]; /* finite padding */
    for (size_t j = 0; j < nj; j++)
        ly[j] = pmi_lattice_coord(lay->lo[1] + (int64_t)(p0[1] + j), s);
    for (size_t z = p0[2]; z < p1[2]; z++)
        lz[z - p0[2]] = pmi_lattice_coord(lay->lo[2] + (int64_t)z, s);

    /* No particle in reach: zeros, no gather. */
    int any = 0;
    for (size_t qz = q0[2]; qz < q1[2] && !any; qz++)
        for (size_t qy = q0[1]; qy < q1[1]; qy++) {
            size_t row = (qz * cdy + qy) * cdx;
            if (cells->start[row + q0[0]] != cells->start[row + q1[0]]) any = 1;
        }
    if (!any) {
        for (size_t z = p0[2]; z < p1[2]; z++)
            for (size_t j = p0[1]; j < p1[1]; j++)
                memset(J->out + ((z - w0[2]) * ny + (j - w0[1])) * nx + (p0[0] - w0[0]), 0,
                       ni * sizeof *J->out);
        return;
    }

    for (size_t ks = p0[2]; ks < p1[2]; ks += J->slab) {
        size_t ke = ks + J->slab < p1[2] ? ks + J->slab : p1[2];
        memset(acc, 0, ni * nj * (ke - ks) * sizeof *acc);
        for (size_t qz = q0[2]; qz < q1[2]; qz++) {
            /* Points of the cells within one of the particle's cell. */
            size_t za = qz > 0 ? (qz - 1) * B : 0, zb = (qz + 2) * B;
            if (za < ks) za = ks;
            if (zb > ke) zb = ke;
            if (za >= zb) continue;
            for (size_t qy = q0[1]; qy < q1[1]; qy++) {
                size_t ya = qy > 0 ? (qy - 1) * B : 0, yb = (qy + 2) * B;
                if (ya < p0[1]) ya = p0[1];
                if (yb > p1[1]) yb = p1[1];
                if (ya >= yb) continue;
                for (size_t qx = q0[0]; qx < q1[0]; qx++) {
                    size_t xa = qx > 0 ? (qx - 1) * B : 0, xb = (qx + 2) * B;
                    if (xa < p0[0]) xa = p0[0];
                    if (xb > p1[0]) xb = p1[0];
                    if (xa >= xb) continue;
                    size_t q = (qz * cdy + qy) * cdx + qx;
                    for (uint32_t p = cells->start[q]; p < cells->start[q + 1]; p++) {
                        const double px = X[3 * (size_t)p], py = X[3 * (size_t)p + 1],
                                     pz = X[3 * (size_t)p + 2], v = J->vol[p];
                        size_t ia, ib, ja, jb, ka, kb;
                        if (!pmi_index_range(pz, h, s, lay->lo[2], za, zb, &ka, &kb) ||
                            !pmi_index_range(py, h, s, lay->lo[1], ya, yb, &ja, &jb) ||
                            !pmi_index_range(px, h, s, lay->lo[0], xa, xb, &ia, &ib))
                            continue;
                        for (size_t z = ka; z <= kb; z++) {
                            double ddz = pz - lz[z - p0[2]], dz2 = ddz * ddz;
                            if (dz2 >= h2) continue;
                            size_t ra = ia, rb = ib, ya_ = ja, yb_ = jb;
                            if (J->chord) {
                                /* This plane's points with d2 < h2 lie
                                 * within its chord +-half in x (dyz >= dz2
                                 * for every row, also rounded). The 1e-3
                                 * (lattice units) covers the rounding,
                                 * far below it while chord is set
                                 * (pmi_sph_field). A superset only: d2 <
                                 * h2 still decides per lane. */
                                double half = pmi_sqrt(h2 - dz2);
                                double t0 = ceil((px - half) * inv_s - (double)lay->lo[0] - 1e-3);
                                double t1 = floor((px + half) * inv_s - (double)lay->lo[0] + 1e-3);
                                if (t0 > (double)rb || t1 < (double)ra) continue;
                                if (t0 > (double)ra) ra = (size_t)t0;
                                if (t1 < (double)rb) rb = (size_t)t1;
                                if (ra > rb) continue;
                                /* The same for the rows (y). */
                                t0 = ceil((py - half) * inv_s - (double)lay->lo[1] - 1e-3);
                                t1 = floor((py + half) * inv_s - (double)lay->lo[1] + 1e-3);
                                if (t0 > (double)jb || t1 < (double)ja) continue;
                                if (t0 > (double)ja) ya_ = (size_t)t0;
                                if (t1 < (double)jb) yb_ = (size_t)t1;
                                if (ya_ > yb_) continue;
                            }
                            for (size_t j = ya_; j <= yb_; j++) {
                                double ddy = py - ly[j - p0[1]], dyz = ddy * ddy + dz2;
                                if (dyz >= h2) continue;
                                double *row = acc + ((z - ks) * nj + (j - p0[1])) * ni;
                                field_row(row, lx, ra - p0[0], rb - p0[0], px, dyz, v, k);
                            }
                        }
                    }
                }
            }
        }
        for (size_t z = ks; z < ke; z++)
            for (size_t j = p0[1]; j < p1[1]; j++) {
                float *o = J->out + ((z - w0[2]) * ny + (j - w0[1])) * nx + (p0[0] - w0[0]);
                const double *a = acc + ((z - ks) * nj + (j - p0[1])) * ni;
                for (size_t i = 0; i < ni; i++)
                    o[i] = (float)a[i];
            }
    }
}

static void field_superblock_base(const field_job *J, size_t sb, double *acc, double *lxyz)
{
    field_superblock(J, sb, acc, lxyz);
}
#ifdef PMI_SPH_AVX2
__attribute__((target("avx2"))) static void field_superblock_avx2(const field_job *J, size_t sb,
                                                                  double *acc, double *lxyz)
{
    field_superblock(J, sb, acc, lxyz);
}
#endif

/* The job of the points [w0, w1) of lay (J.out = out, x fastest) and
 * the doubles per thread its superblocks need (accumulator, coordinates). */
static void field_job_init(field_job *J, const pmi_field_layout *lay, const pmi_cell_list *cells,
                           double h, const double *vol, const size_t w0[3], const size_t w1[3],
                           float *out, size_t *acc_n, size_t *lxyz_n)
{
    memset(J, 0, sizeof *J);
    J->lay = lay;
    J->cells = cells;
    J->vol = vol;
    J->out = out;
    const double s = lay->spacing;
    J->k = pmi_sph_kernel_of(h);
    J->s = s;
    size_t pts[3];
    pmi_sph_superblock(lay->block, J->sbc, pts, &J->slab);
    for (int a = 0; a < 3; a++) {
        J->w0[a] = w0[a];
        J->w1[a] = w1[a];
        /* Superblocks tile the cells that hold the window's points. */
        J->cw0[a] = w0[a] / lay->block;
        J->cw1[a] = (w1[a] + lay->block - 1) / lay->block;
        J->nsb[a] = w1[a] > w0[a] ? (J->cw1[a] - J->cw0[a] + J->sbc[a] - 1) / J->sbc[a] : 0;
    }
    /* Chord ranges: one sqrt per plane of a particle's box, worth it when
     * the box is at least 9 points wide (h/s >= 4; at -c 1.5 it is not).
     * They need the rounding of coordinates (|global index| * 2^-52
     * lattice units) and of the distance test ((h/s) * 2^-26) far below
     * their 1e-3 margin. */
    double gmax = fmax(fabs((double)lay->lo[0]), fabs((double)lay->lo[0] + (double)lay->dims[0]));
    for (int a = 1; a < 3; a++)
        gmax = fmax(
            gmax, fmax(fabs((double)lay->lo[a]), fabs((double)lay->lo[a] + (double)lay->dims[a])));
    J->chord = gmax < 68719476736.0 /* 2^36 */ && h / s >= 4.0 && h / s < 1e4;
    *acc_n = pts[0] * pts[1] * J->slab + VW;
    *lxyz_n = pts[0] + VW + pts[1] + pts[2];
}

static void (*field_fn(void))(const field_job *, size_t, double *, double *)
{
#ifdef PMI_SPH_AVX2
    if (use_avx2()) return field_superblock_avx2;
#endif
    return field_superblock_base;
}

pm_status pmi_sph_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                        double h, const double *vol, float *out)
{
    field_job J;
    size_t acc_n, lxyz_n;
    const size_t w0[3] = {0, 0, 0};
    field_job_init(&J, lay, cells, h, vol, w0, lay->dims, out, &acc_n, &lxyz_n);
    const size_t nsb = J.nsb[0] * J.nsb[1] * J.nsb[2];
    void (*fn)(const field_job *, size_t, double *, double *) = field_fn();
    int failed = 0;
    const long long snsb = (long long)nsb;

#pragma omp parallel num_threads(ctx->num_threads)
    {
        double *acc = malloc(acc_n * sizeof *acc);
        double *lxyz = malloc(lxyz_n * sizeof *lxyz);
        if (!acc || !lxyz) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long long sb = 0; sb < snsb; sb++)
            if (acc && lxyz) fn(&J, (size_t)sb, acc, lxyz);
        free(acc);
        free(lxyz);
    }
    if (failed)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: could not allocate the per-thread field buffers");
    return PM_STATUS_OK;
}

size_t pmi_sph_field_scratch(size_t block)
{
    size_t sbc[3], pts[3], slab;
    pmi_sph_superblock(block, sbc, pts, &slab);
    return pts[0] * pts[1] * slab + VW + pts[0] + VW + pts[1] + pts[2];
}

void pmi_sph_field_window(const pmi_field_layout *lay, const pmi_cell_list *cells, double h,
                          const double *vol, const size_t w0[3], const size_t w1[3], float *out,
                          double *scratch)
{
    field_job J;
    size_t acc_n, lxyz_n;
    field_job_init(&J, lay, cells, h, vol, w0, w1, out, &acc_n, &lxyz_n);
    void (*fn)(const field_job *, size_t, double *, double *) = field_fn();
    const size_t nsb = J.nsb[0] * J.nsb[1] * J.nsb[2];
    for (size_t sb = 0; sb < nsb; sb++)
        fn(&J, sb, scratch, scratch + acc_n);
}

void pmi_sph_volumes_box(const pmi_field_layout *lay, const pmi_cell_list *cells, double h,
                         double mass, const size_t c0[3], const size_t c1[3], double *vol)
{
    const pmi_sph_kernel k = pmi_sph_kernel_of(h);
    void (*fn)(const pmi_field_layout *, const pmi_cell_list *, size_t, const pmi_sph_kernel *,
               double, double *) = volumes_cell_base;
#ifdef PMI_SPH_AVX2
    if (use_avx2()) fn = volumes_cell_avx2;
#endif
    for (size_t cz = c0[2]; cz < c1[2]; cz++)
        for (size_t cy = c0[1]; cy < c1[1]; cy++)
            for (size_t cx = c0[0]; cx < c1[0]; cx++) {
                size_t c = (cz * lay->cdims[1] + cy) * lay->cdims[0] + cx;
                if (cells->start[c] != cells->start[c + 1]) fn(lay, cells, c, &k, mass, vol);
            }
}
