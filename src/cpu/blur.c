/* The blur density (docs/reconstruct.md): particles splatted into a 3D
 * texture, then blurred: cloud-in-cell splatting (Hockney and Eastwood,
 * "Computer Simulation Using Particles", 1981) of each particle's cube
 * (edge 2r) into the lattice, then separable binomial [1 2 1]/4 passes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/density.h"

/* Splat: each lattice point gets the fraction of its box (edge s) that
 * particle cubes cover, so particles packed at rest (one per (2r)^3, cubes
 * tiling space) give exactly 1. Gathered per cell block like the SPH field,
 * so each point sums its terms in a fixed order (cells z, y, x; particles
 * in sorted order) and the result does not depend on the thread count. */
static pm_status splat(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                       double r, float *out)
{
    const double s = lay->spacing, reach = r + 0.5 * s;
    const size_t B = lay->block, nx = lay->dims[0], ny = lay->dims[1], nz = lay->dims[2];
    const size_t cdx = lay->cdims[0], cdy = lay->cdims[1], cdz = lay->cdims[2];
    const long long snc = (long long)lay->ncells;
    const float *X = cells->xyz;
    int failed = 0;

    size_t slab = B;
    if (B * B * B > PMI_ACC_CAP) slab = PMI_ACC_CAP / (B * B) ? PMI_ACC_CAP / (B * B) : 1;
#pragma omp parallel num_threads(ctx->num_threads)
    {
        double *acc = malloc(B * B * slab * sizeof *acc);
        double *w = malloc(3 * B * sizeof *w);
        if (!acc || !w) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long long lc = 0; lc < snc; lc++) {
            if (!acc || !w) continue;
            size_t c = (size_t)lc;
            size_t cx = c % cdx, cy = (c / cdx) % cdy, cz = c / (cdx * cdy);
            size_t i0 = cx * B, j0 = cy * B, k0 = cz * B;
            size_t i1 = i0 + B < nx ? i0 + B : nx, j1 = j0 + B < ny ? j0 + B : ny;
            size_t k1 = k0 + B < nz ? k0 + B : nz;
            size_t ni = i1 - i0, nj = j1 - j0;
            /* z-slabs of the block keep the buffer small for any block
             * size; the order of terms per point is unchanged. */
            for (size_t ks = k0; ks < k1; ks += slab) {
                size_t ke = ks + slab < k1 ? ks + slab : k1;
                memset(acc, 0, ni * nj * (ke - ks) * sizeof *acc);
                for (int dz = -1; dz <= 1; dz++) {
                    if ((dz < 0 && cz == 0) || (dz > 0 && cz + 1 >= cdz)) continue;
                    for (int dy = -1; dy <= 1; dy++) {
                        if ((dy < 0 && cy == 0) || (dy > 0 && cy + 1 >= cdy)) continue;
                        uint32_t b, e;
                        pmi_row_range(lay, cells, cx, ((cz + dz) * cdy + (cy + dy)) * cdx, &b, &e);
                        for (uint32_t p = b; p < e; p++) {
                            const double px = X[3 * (size_t)p], py = X[3 * (size_t)p + 1],
                                         pz = X[3 * (size_t)p + 2];
                            size_t ia, ib, ja, jb, ka, kb;
                            if (!pmi_index_range(pz, reach, s, lay->lo[2], ks, ke, &ka, &kb) ||
                                !pmi_index_range(py, reach, s, lay->lo[1], j0, j1, &ja, &jb) ||
                                !pmi_index_range(px, reach, s, lay->lo[0], i0, i1, &ia, &ib))
                                continue;
                            double *wx = w, *wy = w + B, *wz = w + 2 * B;
                            for (size_t i = ia; i <= ib; i++)
                                wx[i - ia] = pmi_box_weight(
                                    px, r, pmi_lattice_coord(lay->lo[0] + (int64_t)i, s), s);
                            for (size_t j = ja; j <= jb; j++)
                                wy[j - ja] = pmi_box_weight(
                                    py, r, pmi_lattice_coord(lay->lo[1] + (int64_t)j, s), s);
                            for (size_t k = ka; k <= kb; k++)
                                wz[k - ka] = pmi_box_weight(
                                    pz, r, pmi_lattice_coord(lay->lo[2] + (int64_t)k, s), s);
                            for (size_t k = ka; k <= kb; k++) {
                                if (wz[k - ka] == 0.0) continue;
                                for (size_t j = ja; j <= jb; j++) {
                                    if (wy[j - ja] == 0.0) continue;
                                    double *row = acc + ((k - ks) * nj + (j - j0)) * ni - i0;
                                    for (size_t i = ia; i <= ib; i++)
                                        if (wx[i - ia] != 0.0)
                                            row[i] += (wx[i - ia] * wy[j - ja]) * wz[k - ka];
                                }
                            }
                        }
                    }
                }
                for (size_t k = ks; k < ke; k++)
                    for (size_t j = j0; j < j1; j++) {
                        float *o = out + (k * ny + j) * nx + i0;
                        const double *a = acc + ((k - ks) * nj + (j - j0)) * ni;
                        for (size_t i = 0; i < ni; i++)
                            o[i] = (float)a[i];
                    }
            }
        }
        free(acc);
        free(w);
    }
    if (failed)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: could not allocate the per-thread splat buffers");
    return PM_STATUS_OK;
}

/* Passes along x, y and z. Values outside the grid count as zero; the grid
 * margin covers the blur's spread, so the border holds zeros anyway and a
 * clamped border would give the same field. Each pass reads the original
 * neighbours through a saved previous line, so it works in place. */
static pm_status blur_passes(pm_context *ctx, const pmi_field_layout *lay, int steps, float *f)
{
    const size_t nx = lay->dims[0], ny = lay->dims[1], nz = lay->dims[2];
    const long long snyz = (long long)(ny * nz), sny = (long long)ny, snz = (long long)nz;
    int failed = 0;
    for (int step = 0; step < steps; step++) {
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static)
        for (long long row = 0; row < snyz; row++) {
            float *v = f + (size_t)row * nx, prev = 0.0f;
            for (size_t i = 0; i < nx; i++) {
                float cur = v[i], next = i + 1 < nx ? v[i + 1] : 0.0f;
                v[i] = pmi_blur_tap(prev, cur, next);
                prev = cur;
            }
        }
        /* y: per slice; z: per row index j across slices. */
        for (int axis = 1; axis <= 2; axis++) {
            size_t len = axis == 1 ? ny : nz, stride = axis == 1 ? nx : nx * ny;
            long long outer = axis == 1 ? snz : sny;
#pragma omp parallel num_threads(ctx->num_threads)
            {
                float *prev = malloc(nx * sizeof *prev);
                if (!prev) {
#pragma omp atomic write
                    failed = 1;
                }
#pragma omp for schedule(static)
                for (long long o = 0; o < outer; o++) {
                    if (!prev) continue;
                    float *base = f + (axis == 1 ? (size_t)o * nx * ny : (size_t)o * nx);
                    memset(prev, 0, nx * sizeof *prev);
                    for (size_t t = 0; t < len; t++) {
                        float *cur = base + t * stride;
                        const float *next = t + 1 < len ? cur + stride : NULL;
                        for (size_t i = 0; i < nx; i++) {
                            float c = cur[i];
                            cur[i] = pmi_blur_tap(prev[i], c, next ? next[i] : 0.0f);
                            prev[i] = c;
                        }
                    }
                }
                free(prev);
            }
        }
        if (failed)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_field_compute: could not allocate the blur line buffers");
    }
    return PM_STATUS_OK;
}

pm_status pmi_blur_field(pm_context *ctx, const pmi_field_layout *lay, const pmi_cell_list *cells,
                         double r, int steps, float *out)
{
    pm_status s = splat(ctx, lay, cells, r, out);
    if (s != PM_STATUS_OK) return s;
    return blur_passes(ctx, lay, steps, out);
}
