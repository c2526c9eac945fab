/* SPH density and colour field as splashsurf defines them (Loeschner et al.,
 * splashsurf_lib density_map.rs): rho_j = m sum_k W(|x_j - x_k|, h) with the
 * cubic spline kernel, phi(x) = sum_j (m / rho_j) W(|x - x_j|, h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/density.h"


pm_status pmi_sph_volumes(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                          double h, double mass, double *vol)
{
    const double h2 = h * h, inv_h = 1.0 / h;
    const double sigma = 8.0 / (PMI_PI * h * h * h), sigma2 = 2.0 * sigma;
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1], cdz = lay->cdims[2];
    const long long snc = (long long)lay->ncells;
    const float *X = cells->xyz;

#pragma omp parallel for num_threads(ctx->num_threads) schedule(dynamic, 64)
    for (long long lc = 0; lc < snc; lc++) {
        size_t c = (size_t)lc;
        uint32_t b0 = cells->start[c], e0 = cells->start[c + 1];
        if (b0 == e0) continue;
        size_t cx = c % cdx, cy = (c / cdx) % cdy, cz = c / (cdx * cdy);
        for (uint32_t k = b0; k < e0; k++) {
            const double xk = X[3 * (size_t)k], yk = X[3 * (size_t)k + 1],
                         zk = X[3 * (size_t)k + 2];
            double sum = 0.0;
            /* Neighbour cells in z, y, x order; particles in sorted order. */
            for (int dz = -1; dz <= 1; dz++) {
                if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= cdz)) continue;
                for (int dy = -1; dy <= 1; dy++) {
                    if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= cdy)) continue;
                    uint32_t b, e;
                    pmi_row_range(lay, cells, cx, ((cz + dz) * cdy + (cy + dy)) * cdx, &b, &e);
                    for (uint32_t j = b; j < e; j++) {
                        double ddx = (double)X[3 * (size_t)j] - xk;
                        double ddy = (double)X[3 * (size_t)j + 1] - yk;
                        double ddz = (double)X[3 * (size_t)j + 2] - zk;
                        double d2 = ddx * ddx + (ddy * ddy + ddz * ddz);
                        if (d2 < h2) sum += pmi_cubic_spline(pmi_sqrt(d2) * inv_h, sigma, sigma2);
                    }
                }
            }
            /* The particle itself is one of the terms (d = 0), so sum > 0. */
            double rho = mass * sum;
            vol[k] = mass / rho;
        }
    }
    return PM_STATUS_OK;
}

pm_status pmi_sph_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                        double h, const double *vol, float *out)
{
    const double h2 = h * h, inv_h = 1.0 / h, s = lay->spacing;
    const double sigma = 8.0 / (PMI_PI * h * h * h), sigma2 = 2.0 * sigma;
    const size_t B = lay->block, nx = lay->dims[0], ny = lay->dims[1], nz = lay->dims[2];
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1], cdz = lay->cdims[2];
    size_t slab = B;
    if (B * B * B > PMI_ACC_CAP) slab = PMI_ACC_CAP / (B * B) ? PMI_ACC_CAP / (B * B) : 1;
    const long long snc = (long long)lay->ncells;
    const float *X = cells->xyz;
    int failed = 0;

#pragma omp parallel num_threads(ctx->num_threads)
    {
        double *acc = malloc(B * B * slab * sizeof *acc);
        double *lc3 = malloc(3 * B * sizeof *lc3);
        if (!acc || !lc3) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long long lc = 0; lc < snc; lc++) {
            if (!acc || !lc3) continue;
            size_t c = (size_t)lc;
            size_t cx = c % cdx, cy = (c / cdx) % cdy, cz = c / (cdx * cdy);
            size_t i0 = cx * B, j0 = cy * B, k0 = cz * B;
            size_t i1 = i0 + B < nx ? i0 + B : nx, j1 = j0 + B < ny ? j0 + B : ny;
            size_t k1 = k0 + B < nz ? k0 + B : nz;
            size_t ni = i1 - i0, nj = j1 - j0;
            double *lx = lc3, *ly = lc3 + B, *lz = lc3 + 2 * B;
            for (size_t i = 0; i < ni; i++) lx[i] = pmi_lattice_coord(lay->lo[0] + (int64_t)(i0 + i), s);
            for (size_t j = 0; j < nj; j++) ly[j] = pmi_lattice_coord(lay->lo[1] + (int64_t)(j0 + j), s);
            for (size_t k = 0; k < k1 - k0; k++)
                lz[k] = pmi_lattice_coord(lay->lo[2] + (int64_t)(k0 + k), s);

            /* Blocks with no particle in reach: zeros, no gather. */
            int any = 0;
            for (int dz = -1; dz <= 1 && !any; dz++) {
                if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= cdz)) continue;
                for (int dy = -1; dy <= 1; dy++) {
                    if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= cdy)) continue;
                    uint32_t b, e;
                    pmi_row_range(lay, cells, cx, ((cz + dz) * cdy + (cy + dy)) * cdx, &b, &e);
                    if (b != e) any = 1;
                }
            }
            if (!any) {
                for (size_t k = k0; k < k1; k++)
                    for (size_t j = j0; j < j1; j++)
                        memset(out + (k * ny + j) * nx + i0, 0, ni * sizeof *out);
                continue;
            }
            for (size_t ks = k0; ks < k1; ks += slab) {
                size_t ke = ks + slab < k1 ? ks + slab : k1;
                size_t nk = ke - ks;
                memset(acc, 0, ni * nj * nk * sizeof *acc);
                /* Neighbour cells in z, y, x order; particles in sorted order:
                 * every lattice point sums its terms in this order. */
                for (int dz = -1; dz <= 1; dz++) {
                    if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= cdz)) continue;
                    for (int dy = -1; dy <= 1; dy++) {
                        if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= cdy)) continue;
                        uint32_t b, e;
                        pmi_row_range(lay, cells, cx, ((cz + dz) * cdy + (cy + dy)) * cdx, &b, &e);
                        for (uint32_t p = b; p < e; p++) {
                            const double px = X[3 * (size_t)p], py = X[3 * (size_t)p + 1],
                                         pz = X[3 * (size_t)p + 2], v = vol[p];
                            size_t ia, ib, ja, jb, ka, kb;
                            if (!pmi_index_range(pz, h, s, lay->lo[2], ks, ke, &ka, &kb) ||
                                !pmi_index_range(py, h, s, lay->lo[1], j0, j1, &ja, &jb) ||
                                !pmi_index_range(px, h, s, lay->lo[0], i0, i1, &ia, &ib))
                                continue;
                            for (size_t k = ka; k <= kb; k++) {
                                double ddz = pz - lz[k - k0], dz2 = ddz * ddz;
                                if (dz2 >= h2) continue;
                                for (size_t j = ja; j <= jb; j++) {
                                    double ddy = py - ly[j - j0], dyz = ddy * ddy + dz2;
                                    if (dyz >= h2) continue;
                                    double *row = acc + ((k - ks) * nj + (j - j0)) * ni - i0;
                                    const double *lxr = lx - i0;
                                    for (size_t i = ia; i <= ib; i++) {
                                        double ddx = px - lxr[i];
                                        double d2 = ddx * ddx + dyz;
                                        if (d2 < h2)
                                            row[i] += v * pmi_cubic_spline(pmi_sqrt(d2) * inv_h,
                                                                           sigma, sigma2);
                                    }
                                }
                            }
                        }
                    }
                }
                for (size_t k = ks; k < ke; k++)
                    for (size_t j = j0; j < j1; j++) {
                        float *o = out + (k * ny + j) * nx + i0;
                        const double *a = acc + ((k - ks) * nj + (j - j0)) * ni;
                        for (size_t i = 0; i < ni; i++) o[i] = (float)a[i];
                    }
            }
        }
        free(acc);
        free(lc3);
    }
    if (failed)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: could not allocate the per-thread field buffers");
    return PM_STATUS_OK;
}
