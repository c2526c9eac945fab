/* Sparse SPH reconstruction on the GPU (docs/scale.md): the plan of the
 * CPU backend (src/cpu/sparse.c: particles sorted by 64-bit neighbour-cell
 * key, the occupied bricks) made on the host, then brick by brick on the
 * device: the dense path's kernels (density.cu) over a small dense grid of
 * the brick's cells, and the brick's piece (piece.cu).
 *
 * A brick's grid is the neighbour cells holding its field window and two
 * more on each side, anchored at whole cells of the global lattice. Its
 * particles are those cells' (pmi_sparse_local_build: by cell, then input
 * index, the dense path's slot order), and the cells are numbered from the
 * global keys, never recomputed from coordinates, so every particle sits
 * in the cell the dense path gives it. A window point sums the particles
 * of its cell and the next (one ring), whose volumes sum theirs (a second
 * ring): every term of every window point is the dense path's, in the
 * same order, so the field there is the same bits (the particles of the
 * outer ring get incomplete volumes, which no window point reads). */
#include <string.h>

#include "cuda/density_internal.cuh"
extern "C" {
#include "cpu/sparse.h"
}

/* Device buffers reused from brick to brick (grown as needed). */
typedef struct sp_dev {
    float *xyz;
    uint32_t *cell, *start;
    double *vol;
    float *field;
    size_t cap_n, cap_cells, cap_points;
} sp_dev;

static void sp_dev_free(pm_context *ctx, sp_dev *D)
{
    ctx->backend->free(ctx, D->xyz);
    ctx->backend->free(ctx, D->cell);
    ctx->backend->free(ctx, D->start);
    ctx->backend->free(ctx, D->vol);
    ctx->backend->free(ctx, D->field);
    memset(D, 0, sizeof *D);
}

/* Room for n slots, ncells cells and points lattice points. */
static pm_status sp_dev_reserve(pm_context *ctx, sp_dev *D, size_t n, size_t ncells, size_t points)
{
    if (n < 1) n = 1;
    if (n > D->cap_n) {
        size_t c = n + n / 4;
        ctx->backend->free(ctx, D->xyz);
        ctx->backend->free(ctx, D->cell);
        ctx->backend->free(ctx, D->vol);
        D->xyz = NULL, D->cell = NULL, D->vol = NULL, D->cap_n = 0;
        PMI_TRY(ctx->backend->alloc(ctx, c * 3 * sizeof(float), (void **)&D->xyz));
        PMI_TRY(ctx->backend->alloc(ctx, c * sizeof(uint32_t), (void **)&D->cell));
        PMI_TRY(ctx->backend->alloc(ctx, c * sizeof(double), (void **)&D->vol));
        D->cap_n = c;
    }
    if (ncells + 1 > D->cap_cells) {
        ctx->backend->free(ctx, D->start);
        D->start = NULL, D->cap_cells = 0;
        PMI_TRY(ctx->backend->alloc(ctx, (ncells + 1) * sizeof(uint32_t), (void **)&D->start));
        D->cap_cells = ncells + 1;
    }
    if (points > D->cap_points) {
        ctx->backend->free(ctx, D->field);
        D->field = NULL, D->cap_points = 0;
        PMI_TRY(ctx->backend->alloc(ctx, points * sizeof(float), (void **)&D->field));
        D->cap_points = points;
    }
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_sparse_plan(pm_context *ctx, const float *xyz, size_t n,
                                          const pm_field_params *p, size_t brick_points,
                                          pm_normals normals, pmi_sparse_plan *plan)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    size_t bytes;
    if (!pmi_mul3_size(n ? n : 1, 3, sizeof(float), &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_reconstruct: %zu particles overflow", n);
    float *h = (float *)malloc(bytes);
    if (!h)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: no host memory for %zu particles", n);
    pm_status s = n ? pmi_cuda_copy_host(ctx, h, xyz, n * 3 * sizeof(float), 1,
                                         "pm_reconstruct: particles to the host")
                    : PM_STATUS_OK;
    if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_reconstruct: particles to the host");
    if (s == PM_STATUS_OK) s = pmi_sparse_plan_host(ctx, h, n, p, brick_points, normals, plan);
    free(h);
    return s;
}

extern "C" void pmi_cuda_sparse_plan_free(pm_context *ctx, pmi_sparse_plan *plan)
{
    pmi_cpu_sparse_plan_free(ctx, plan);
}

extern "C" pm_status pmi_cuda_sparse_pieces(pm_context *ctx, pmi_sparse_plan *plan, size_t first,
                                            size_t count, double iso,
                                            const pm_isosurface_options *options,
                                            pm_mesh_piece *pieces, double *field_ms,
                                            double *extract_ms)
{
    static const char fn[] = "pm_reconstruct";
    PMI_TRY(pmi_cuda_begin(ctx));
    const pmi_sparse_geom *G = &plan->G;
    const pm_lattice lat = pmi_sparse_lattice(G);
    pmi_sparse_local L;
    memset(&L, 0, sizeof L);
    sp_dev D;
    memset(&D, 0, sizeof D);
    uint32_t *hcell = NULL;
    size_t hcap = 0;
    double fms = 0.0, ems = 0.0;
    pm_status s = PM_STATUS_OK;
    for (size_t q = 0; q < count && s == PM_STATUS_OK; q++) {
        const double t0 = pmi_now_ms();
        uint64_t b[3], o0[3], o1[3], w0[3], w1[3], c0[3], c1[3];
        pmi_brick_unkey(G, plan->bricks[first + q], b);
        pmi_brick_owned(G, b, o0, o1);
        pmi_brick_window(G, b, w0, w1);
        for (int a = 0; a < 3; a++) {
            const uint64_t wc0 = w0[a] / G->B, wc1 = (w1[a] - 1) / G->B + 1;
            c0[a] = wc0 >= 2 ? wc0 - 2 : 0;
            c1[a] = wc1 + 2 < G->cdims[a] ? wc1 + 2 : G->cdims[a];
        }
        if (!pmi_sparse_local_build(plan, c0, c1, 0, &L)) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for a brick's cell list", fn);
            break;
        }
        const pmi_field_layout *lay = &L.lay;
        const size_t n = L.cells.n, ncells = lay->ncells, points = lay->points;
        if (n > hcap) {
            uint32_t *x = (uint32_t *)realloc(hcell, (n + n / 4) * sizeof *hcell);
            if (!x) {
                s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for a brick's cells", fn);
                break;
            }
            hcell = x;
            hcap = n + n / 4;
        }
        for (size_t c = 0; c < ncells; c++)
            for (uint32_t k = L.cells.start[c]; k < L.cells.start[c + 1]; k++)
                hcell[k] = (uint32_t)c;
        s = sp_dev_reserve(ctx, &D, n, ncells, points);
        if (s == PM_STATUS_OK && n)
            s = pmi_cuda_copy_host(ctx, D.xyz, L.cells.xyz, n * 3 * sizeof(float), 0, fn);
        if (s == PM_STATUS_OK && n)
            s = pmi_cuda_copy_host(ctx, D.cell, hcell, n * sizeof(uint32_t), 0, fn);
        if (s == PM_STATUS_OK)
            s = pmi_cuda_copy_host(ctx, D.start, L.cells.start, (ncells + 1) * sizeof(uint32_t),
                                   0, fn);
        if (s != PM_STATUS_OK) break;
        pmi_dn_grid g;
        memset(&g, 0, sizeof g);
        g.n = (long long)n;
        for (int a = 0; a < 3; a++) {
            g.lo[a] = (long long)lay->lo[a];
            g.dims[a] = (long long)lay->dims[a];
            g.cd[a] = (long long)lay->cdims[a];
        }
        g.block = (long long)G->B;
        g.ncells = (long long)ncells;
        g.points = (long long)points;
        g.s = G->rule.s;
        g.cell = D.cell;
        g.start = D.start;
        g.xyz = D.xyz;
        s = pmi_dn_queue_sph(ctx, &g, plan->h, plan->mass, D.vol, D.field, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_reconstruct: a brick's field");
        const double t1 = pmi_now_ms();
        if (s != PM_STATUS_OK) break;
        /* The window inside the grid (its point 0 is cell c0's first). */
        uint64_t off[3];
        for (int a = 0; a < 3; a++)
            off[a] = w0[a] - c0[a] * G->B;
        pm_volume win;
        memset(&win, 0, sizeof win);
        win.data = D.field + (off[2] * lay->dims[1] + off[1]) * lay->dims[0] + off[0];
        win.type = PM_SAMPLE_F32;
        win.nx = (size_t)(w1[0] - w0[0]);
        win.ny = (size_t)(w1[1] - w0[1]);
        win.nz = (size_t)(w1[2] - w0[2]);
        win.row_stride = lay->dims[0];
        win.slice_stride = lay->dims[0] * lay->dims[1];
        pm_lattice_box own;
        for (int a = 0; a < 3; a++) {
            own.lo[a] = o0[a];
            own.dims[a] = o1[a] - o0[a];
        }
        s = pmi_cuda_isosurface_piece(ctx, &win, w0, &lat, &own, iso, options, &pieces[q]);
        fms += t1 - t0;
        ems += pmi_now_ms() - t1;
    }
    sp_dev_free(ctx, &D);
    pmi_sparse_local_free(&L);
    free(hcell);
    *field_ms = fms;
    *extract_ms = ems;
    return s;
}
