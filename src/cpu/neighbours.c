/* Uniform-grid neighbour search built by counting sort (count particles per
 * cell, exclusive scan of the counts, scatter), the structure splashsurf and
 * most SPH codes use; the scan is the project's own pmi_cpu_scan_exclusive_u32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/density.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The cell of one coordinate (pmi_cell_of, shared with the CUDA grid). */
static size_t cell_of(float x, double origin, double edge, size_t cells)
{
    return (size_t)pmi_cell_of(x, origin, edge, (long long)cells);
}

pm_status pmi_cells_build(pm_context *ctx, const pmi_field_layout *lay, const float *xyz, size_t n,
                          pmi_cell_list *cells)
{
    memset(cells, 0, sizeof *cells);
    cells->n = n;
    size_t nc = lay->ncells;
    uint64_t *cell = malloc((n ? n : 1) * sizeof *cell);
    uint32_t *cursor = calloc(nc, sizeof *cursor);
    cells->start = malloc((nc + 1) * sizeof *cells->start);
    cells->order = malloc((n ? n : 1) * sizeof *cells->order);
    cells->xyz = malloc((n ? n : 1) * 3 * sizeof *cells->xyz);
    if (!cell || !cursor || !cells->start || !cells->order || !cells->xyz) {
        free(cell);
        free(cursor);
        pmi_cells_free(cells);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_field_compute: could not allocate the neighbour grid (%zu cells, "
                         "%zu particles)",
                         nc, n);
    }
    double origin[3], edge = (double)lay->block * lay->spacing;
    for (int a = 0; a < 3; a++)
        origin[a] = pmi_lattice_coord(lay->lo[a], lay->spacing);
    const size_t cx = lay->cdims[0], cy = lay->cdims[1], cz = lay->cdims[2];
    const long long sn = (long long)n;

    /* Count. Integer atomics: the counts do not depend on the schedule. */
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static)
    for (long long p = 0; p < sn; p++) {
        const float *q = xyz + 3 * (size_t)p;
        size_t c =
            (cell_of(q[2], origin[2], edge, cz) * cy + cell_of(q[1], origin[1], edge, cy)) * cx +
            cell_of(q[0], origin[0], edge, cx);
        cell[p] = c;
#pragma omp atomic update
        cursor[c]++;
    }

    /* Exclusive scan of the counts into start[] (n < 2^32 was checked by
     * the caller, so no prefix overflows). */
    uint64_t total = 0;
    pm_status s = pmi_cpu_scan_exclusive_u32(ctx, cursor, nc, cells->start, &total);
    if (s != PM_STATUS_OK) {
        free(cell);
        free(cursor);
        pmi_cells_free(cells);
        return s;
    }
    cells->start[nc] = (uint32_t)total;
    memcpy(cursor, cells->start, nc * sizeof *cursor);

    /* Scatter with atomic cursors, then sort each cell's indices so that
     * particles sit in input order inside their cell whatever the schedule
     * was: the sorted order (and every sum over it) is deterministic. */
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static)
    for (long long p = 0; p < sn; p++) {
        uint32_t slot;
#pragma omp atomic capture
        slot = cursor[cell[p]]++;
        cells->order[slot] = (uint32_t)p;
    }
    free(cursor);
    free(cell);

    const long long snc = (long long)nc;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(dynamic, 1024)
    for (long long c = 0; c < snc; c++) {
        uint32_t *v = cells->order + cells->start[c];
        size_t k = cells->start[c + 1] - cells->start[c];
        if (k > 24) {
            qsort(v, k, sizeof *v, cmp_u32);
            continue;
        }
        for (size_t i = 1; i < k; i++) { /* insertion sort: cells are small */
            uint32_t x = v[i];
            size_t j = i;
            while (j > 0 && v[j - 1] > x) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    }

#pragma omp parallel for num_threads(ctx->num_threads) schedule(static)
    for (long long k = 0; k < sn; k++) {
        const float *q = xyz + 3 * (size_t)cells->order[k];
        float *d = cells->xyz + 3 * (size_t)k;
        d[0] = q[0];
        d[1] = q[1];
        d[2] = q[2];
    }
    return PM_STATUS_OK;
}

void pmi_cells_free(pmi_cell_list *cells)
{
    free(cells->start);
    free(cells->order);
    free(cells->xyz);
    memset(cells, 0, sizeof *cells);
}
