/* Vertex adjacency of an indexed triangle mesh as compressed rows: the
 * triangles of each vertex and its neighbour vertices, both ascending, so
 * every sum over them has one order whatever the thread count (counts by
 * integer atomics, a serial scan, scatter, then each row sorted). */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "cpu/post_cpu.h"

void pmi_adj_free(pmi_adj *a)
{
    if (!a) return;
    free(a->off);
    free(a->list);
    memset(a, 0, sizeof *a);
}

static void sort_u32(uint32_t *v, size_t k)
{
    for (size_t i = 1; i < k; i++) { /* rows are short: insertion sort */
        uint32_t x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

pm_status pmi_vertex_triangles(int threads, const uint32_t *tri, size_t nt, size_t nv, pmi_adj *out)
{
    memset(out, 0, sizeof *out);
    size_t corners;
    if (!pmi_mul_size(nt, 3, &corners) || corners > UINT32_MAX || nv >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "mesh post-processing: %zu triangles: more than 2^32 "
                         "corners",
                         nt);
    out->n = nv;
    out->off = calloc(nv + 1, sizeof *out->off);
    out->list = malloc((corners ? corners : 1) * sizeof *out->list);
    uint32_t *cursor = malloc((nv ? nv : 1) * sizeof *cursor);
    if (!out->off || !out->list || !cursor) {
        free(cursor);
        pmi_adj_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "mesh post-processing: no memory for the "
                         "adjacency of %zu triangles",
                         nt);
    }
    const long long sc = (long long)corners;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long c = 0; c < sc; c++) {
#pragma omp atomic update
        out->off[tri[c] + 1]++;
    }
    for (size_t v = 0; v < nv; v++)
        out->off[v + 1] += out->off[v];
    memcpy(cursor, out->off, nv * sizeof *cursor);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long c = 0; c < sc; c++) {
        uint32_t slot;
#pragma omp atomic capture
        slot = cursor[tri[c]]++;
        out->list[slot] = (uint32_t)(c / 3);
    }
    free(cursor);
    const long long snv = (long long)nv;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4096)
    for (long long v = 0; v < snv; v++)
        sort_u32(out->list + out->off[v], out->off[v + 1] - out->off[v]);
    return PM_STATUS_OK;
}

/* The sorted distinct neighbours of v into buf (room for 2 * degree);
 * returns their count. */
static size_t row_neighbours(const uint32_t *tri, const pmi_adj *vt, uint32_t v, uint32_t *buf)
{
    size_t k = 0;
    for (uint32_t i = vt->off[v]; i < vt->off[v + 1]; i++) {
        const uint32_t *t = tri + 3 * (size_t)vt->list[i];
        for (int c = 0; c < 3; c++)
            if (t[c] != v) buf[k++] = t[c];
    }
    sort_u32(buf, k);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || buf[u - 1] != buf[i]) buf[u++] = buf[i];
    return u;
}

/* One pass over the vertices of pmi_vertex_neighbours: each vertex's
 * count to out->off[v + 1] (fill 0) or its row to out->list (fill 1).
 * Returns 0 when a thread found no memory for a long row. */
static int neighbour_pass(int threads, const uint32_t *tri, const pmi_adj *vt, pmi_adj *out,
                          int fill)
{
    const long long snv = (long long)vt->n;
    int failed = 0;
#pragma omp parallel num_threads(threads)
    {
        uint32_t stack[128];
        uint32_t *heap = NULL;
        size_t heap_cap = 0;
#pragma omp for schedule(dynamic, 4096)
        for (long long v = 0; v < snv; v++) {
            size_t need = 2 * (size_t)(vt->off[v + 1] - vt->off[v]);
            uint32_t *buf = stack;
            if (need > 128) {
                if (need > heap_cap) {
                    free(heap);
                    heap = malloc(need * sizeof *heap);
                    heap_cap = heap ? need : 0;
                }
                if (!heap) {
#pragma omp atomic write
                    failed = 1;
                    continue;
                }
                buf = heap;
            }
            const size_t k = row_neighbours(tri, vt, (uint32_t)v, buf);
            if (fill)
                memcpy(out->list + out->off[v], buf, k * sizeof *buf);
            else
                out->off[v + 1] = (uint32_t)k;
        }
        free(heap);
    }
    return !failed;
}

pm_status pmi_vertex_neighbours(int threads, const uint32_t *tri, const pmi_adj *vt, pmi_adj *out)
{
    memset(out, 0, sizeof *out);
    const size_t nv = vt->n;
    out->n = nv;
    out->off = calloc(nv + 1, sizeof *out->off);
    if (!out->off)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "mesh post-processing: no memory for the "
                         "neighbours of %zu vertices",
                         nv);
    /* Pass 1: counts. */
    if (!neighbour_pass(threads, tri, vt, out, 0)) {
        pmi_adj_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "mesh post-processing: out of memory");
    }
    for (size_t v = 0; v < nv; v++)
        out->off[v + 1] += out->off[v];
    out->list = malloc((out->off[nv] ? out->off[nv] : 1) * sizeof *out->list);
    if (!out->list) {
        pmi_adj_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "mesh post-processing: no memory for the "
                         "neighbours of %zu vertices",
                         nv);
    }
    /* Pass 2: the rows. */
    if (!neighbour_pass(threads, tri, vt, out, 1)) {
        pmi_adj_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "mesh post-processing: out of memory");
    }
    return PM_STATUS_OK;
}
