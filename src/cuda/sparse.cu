/* Sparse SPH reconstruction on the GPU (docs/scale.md): the plan of the
 * CPU backend (src/cpu/sparse.c: particles sorted by 64-bit neighbour-cell
 * key, the occupied cells and bricks) made on the host, its sorted
 * particles and occupied cells copied once to every GPU that meshes
 * bricks, then brick by brick on the device: the brick's particles
 * gathered from those copies, the dense path's kernels (density.cu) over a
 * small dense grid of the brick's cells, and the brick's piece (piece.cu).
 *
 * A brick's grid is the neighbour cells holding its field window and two
 * more on each side, anchored at whole cells of the global lattice. Its
 * particles are those cells', by cell, then input index (the dense path's
 * slot order, as pmi_sparse_local_build lays them out on the CPU), and
 * the cells are numbered from the global keys, never recomputed from
 * coordinates, so every particle sits in the cell the dense path gives it.
 * A window point sums the particles of its cell and the next (one ring),
 * whose volumes sum theirs (a second ring): every term of every window
 * point is the dense path's, in the same order, so the field there is the
 * same bits (the particles of the outer ring get incomplete volumes, which
 * no window point reads). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/density_internal.cuh"
extern "C" {
#include "cpu/sparse.h"
}

/* The plan's sorted particles and occupied cells on one GPU. */
typedef struct sp_gpu {
    int ready;
    float *xyz;
    unsigned long long *ckey;
    uint32_t *cstart;
} sp_gpu;

/* plan->device: a copy per GPU, made by the first worker on it, and the
 * host blocks that hold the pieces' arrays (freed with the plan). */
typedef struct sp_shared {
    pthread_mutex_t mu;
    void **blocks;
    size_t nblocks, cap_blocks;
    int ndev;
    sp_gpu gpu[1]; /* ndev of them */
} sp_shared;

/* Device buffers reused from brick to brick (grown as needed). */
typedef struct sp_dev {
    float *xyz;
    uint32_t *cell, *start, *count, *first;
    double *vol;
    float *field;
    void *tmp;
    size_t cap_n, cap_cells, cap_points, cap_tmp;
} sp_dev;

static void sp_dev_free(pm_context *ctx, sp_dev *D)
{
    void *const p[] = {D->xyz, D->cell, D->start, D->count, D->first, D->vol, D->field, D->tmp};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        ctx->backend->free(ctx, p[i]);
    memset(D, 0, sizeof *D);
}

/* Frees *p and allocates `bytes` (reserve's step). */
static pm_status sp_realloc(pm_context *ctx, void **p, size_t bytes)
{
    ctx->backend->free(ctx, *p);
    *p = NULL;
    return ctx->backend->alloc(ctx, bytes, p);
}

/* Room for n slots, ncells cells and points lattice points. */
static pm_status sp_dev_reserve(pm_context *ctx, sp_dev *D, size_t n, size_t ncells, size_t points)
{
    if (n < 1) n = 1;
    if (n > D->cap_n) {
        size_t c = n + n / 4;
        D->cap_n = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->xyz, c * 3 * sizeof(float)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->cell, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->vol, c * sizeof(double)));
        D->cap_n = c;
    }
    if (ncells + 1 > D->cap_cells) {
        size_t c = ncells + 1;
        D->cap_cells = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->start, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->count, c * sizeof(uint32_t)));
        PMI_TRY(sp_realloc(ctx, (void **)&D->first, c * sizeof(uint32_t)));
        D->cap_cells = c;
    }
    const size_t tb = pmi_cuda_scan_tmp_bytes(ncells + 1) + 256;
    if (tb > D->cap_tmp) {
        D->cap_tmp = 0;
        PMI_TRY(sp_realloc(ctx, &D->tmp, tb));
        D->cap_tmp = tb;
    }
    if (points > D->cap_points) {
        D->cap_points = 0;
        PMI_TRY(sp_realloc(ctx, (void **)&D->field, points * sizeof(float)));
        D->cap_points = points;
    }
    return PM_STATUS_OK;
}

/* The plan's arrays on the context's GPU, copied by the first worker on
 * it (the others wait for it). */
static pm_status sp_gpu_get(pm_context *ctx, pmi_sparse_plan *plan, const sp_gpu **out)
{
    static const char fn[] = "pm_reconstruct: the sorted particles to the GPU";
    sp_shared *S = (sp_shared *)plan->device;
    const int d = pmi_cuda(ctx)->device;
    if (!S || d < 0 || d >= S->ndev)
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_reconstruct: device %d has no plan copy", d);
    pthread_mutex_lock(&S->mu);
    sp_gpu *g = &S->gpu[d];
    pm_status s = PM_STATUS_OK;
    if (!g->ready) {
        pmi_sparse_cells C;
        pmi_sparse_plan_cells(plan, &C);
        const size_t nb = (C.n ? C.n : 1) * 3 * sizeof(float), kb = (C.m ? C.m : 1) * 8,
                     sb = (C.m + 1) * 4;
        if (cudaMalloc((void **)&g->xyz, nb) != cudaSuccess ||
            cudaMalloc((void **)&g->ckey, kb) != cudaSuccess ||
            cudaMalloc((void **)&g->cstart, sb) != cudaSuccess) {
            cudaGetLastError();
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "%s: no device memory for %zu particles and %zu cells", fn, C.n, C.m);
        }
        if (s == PM_STATUS_OK && C.n)
            s = pmi_cuda_copy_host(ctx, g->xyz, C.xyz, C.n * 3 * sizeof(float), 0, fn);
        if (s == PM_STATUS_OK && C.m) s = pmi_cuda_copy_host(ctx, g->ckey, C.ckey, kb, 0, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_copy_host(ctx, g->cstart, C.cstart, sb, 0, fn);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, fn);
        g->ready = s == PM_STATUS_OK;
        if (!g->ready) { /* a later worker tries again from nothing */
            cudaFree(g->xyz), cudaFree(g->ckey), cudaFree(g->cstart);
            cudaGetLastError();
            g->xyz = NULL, g->ckey = NULL, g->cstart = NULL;
        }
    }
    pthread_mutex_unlock(&S->mu);
    *out = g;
    return s;
}

/* A brick's cell box [c0, c0 + cd) in the global cells, and the key
 * shifts (pmi_cell_key). */
typedef struct sp_box {
    unsigned long long c0[3], cd[3];
    unsigned sh1, sh2;
} sp_box;

/* Each local cell's particle count and first sorted slot, from the
 * occupied cells' keys (0 for an empty cell). One thread per cell. */
static __global__ void sp_cells_kernel(const unsigned long long *ckey, unsigned long long m,
                                       const uint32_t *cstart, sp_box b, unsigned long long ncells,
                                       uint32_t *count, uint32_t *first)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= ncells) return;
    const unsigned long long x = i % b.cd[0], y = i / b.cd[0] % b.cd[1], z = i / (b.cd[0] * b.cd[1]);
    const unsigned long long key =
        (b.c0[2] + z) << b.sh2 | (b.c0[1] + y) << b.sh1 | (b.c0[0] + x);
    unsigned long long lo = 0, len = m;
    while (len > 0) {
        const unsigned long long half = len / 2;
        if (ckey[lo + half] < key) {
            lo += half + 1;
            len -= half + 1;
        } else {
            len = half;
        }
    }
    const int hit = lo < m && ckey[lo] == key;
    count[i] = hit ? cstart[lo + 1] - cstart[lo] : 0;
    first[i] = hit ? cstart[lo] : 0;
}

/* The local slots: each cell's particles (from start[i], its exclusive
 * scan) and their cell; start[ncells] = n. One thread per cell. */
static __global__ void sp_gather_kernel(const float *gxyz, const uint32_t *count,
                                        const uint32_t *first, unsigned long long ncells,
                                        uint32_t n, uint32_t *start, float *xyz, uint32_t *cell)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i == 0) start[ncells] = n;
    if (i >= ncells) return;
    const uint32_t c = count[i], f = first[i], s = start[i];
    for (uint32_t k = 0; k < c; k++) {
        xyz[3 * (size_t)(s + k)] = gxyz[3 * (size_t)(f + k)];
        xyz[3 * (size_t)(s + k) + 1] = gxyz[3 * (size_t)(f + k) + 1];
        xyz[3 * (size_t)(s + k) + 2] = gxyz[3 * (size_t)(f + k) + 2];
        cell[s + k] = (uint32_t)i;
    }
}

extern "C" pm_status pmi_cuda_sparse_plan(pm_context *ctx, const float *xyz, size_t n,
                                          const pm_field_params *p, size_t brick_points,
                                          pm_normals normals, pmi_sparse_plan *plan)
{
    PMI_TRY(pmi_cuda_begin(ctx));
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return pmi_error(PM_STATUS_DEVICE_ERROR, "pm_reconstruct: no CUDA device");
    }
    sp_shared *S = (sp_shared *)calloc(1, sizeof *S + (size_t)ndev * sizeof(sp_gpu));
    if (!S) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory");
    pthread_mutex_init(&S->mu, NULL);
    S->ndev = ndev;
    size_t bytes;
    pm_status s = PM_STATUS_OK;
    /* Host particles are read where they are; device ones copied first. */
    cudaPointerAttributes a;
    const int on_device = n && cudaPointerGetAttributes(&a, xyz) == cudaSuccess &&
                          (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged);
    cudaGetLastError();
    if (!on_device) {
        s = pmi_sparse_plan_host(ctx, xyz, n, p, brick_points, normals, plan);
    } else if (!pmi_mul3_size(n, 3, sizeof(float), &bytes)) {
        s = pmi_error(PM_STATUS_OVERFLOW, "pm_reconstruct: %zu particles overflow", n);
    } else {
        float *h = (float *)malloc(bytes);
        s = h ? pmi_cuda_copy_host(ctx, h, xyz, bytes, 1, "pm_reconstruct: particles to the host")
              : pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "pm_reconstruct: no host memory for %zu particles", n);
        if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, "pm_reconstruct: particles to the host");
        if (s == PM_STATUS_OK) s = pmi_sparse_plan_host(ctx, h, n, p, brick_points, normals, plan);
        free(h);
    }
    if (s != PM_STATUS_OK) {
        pthread_mutex_destroy(&S->mu);
        free(S);
        return s;
    }
    plan->device = S;
    plan->pieces_in_blocks = 1;
    return s;
}

extern "C" void pmi_cuda_sparse_plan_free(pm_context *ctx, pmi_sparse_plan *plan)
{
    sp_shared *S = (sp_shared *)plan->device;
    if (S) {
        int cur = 0;
        cudaGetDevice(&cur);
        for (int d = 0; d < S->ndev; d++) {
            sp_gpu *g = &S->gpu[d];
            if (!g->xyz && !g->ckey && !g->cstart) continue;
            cudaSetDevice(d);
            cudaFree(g->xyz);
            cudaFree(g->ckey);
            cudaFree(g->cstart);
        }
        cudaSetDevice(cur);
        cudaGetLastError();
        for (size_t i = 0; i < S->nblocks; i++)
            free(S->blocks[i]);
        free(S->blocks);
        pthread_mutex_destroy(&S->mu);
        free(S);
        plan->device = NULL;
    }
    pmi_cpu_sparse_plan_free(ctx, plan);
}

/* Particles of the cells [c0, c1): per row of cells, a range of sorted
 * slots (the occupied cells' keys are ascending, x lowest). */
static size_t sp_box_particles(const pmi_sparse_plan *plan, const pmi_sparse_cells *C,
                               const uint64_t c0[3], const uint64_t c1[3])
{
    const pmi_sparse_geom *G = &plan->G;
    size_t n = 0;
    for (uint64_t cz = c0[2]; cz < c1[2]; cz++)
        for (uint64_t cy = c0[1]; cy < c1[1]; cy++) {
            /* Summed, not or-ed: c1 may be one past the last cell of
             * the row, whose key is then the next row's first. */
            const uint64_t row = (cz << G->cshift[2]) + (cy << G->cshift[1]);
            const size_t u0 = pmi_lower_bound_u64(C->ckey, C->m, row + c0[0]);
            const size_t u1 = pmi_lower_bound_u64(C->ckey + u0, C->m - u0, row + c1[0]) + u0;
            n += C->cstart[u1] - C->cstart[u0];
        }
    return n;
}

/* The stored pieces [0, count) (their first vertex and triangle in the
 * store: v0[q], t0[q]) downloaded into one host block, kept by the plan;
 * each piece's arrays point into it. */
static pm_status sp_download(pm_context *ctx, pmi_sparse_plan *plan, const pmi_piece_store *T,
                             int with_n, const size_t *v0, const size_t *t0, size_t count,
                             pm_mesh_piece *pieces)
{
    static const char fn[] = "pm_reconstruct: the pieces to the host";
    const size_t nv = T->nv, nt = T->nt;
    const size_t bk = nv * 8, bp = nv * 12, bn = with_n ? nv * 12 : 0, bt = nt * 24, bc = nt * 8;
    char *h = (char *)malloc(bk + bp + bn + bt + bc + 1);
    if (!h)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for %zu vertices", fn, nv);
    sp_shared *S = (sp_shared *)plan->device;
    pthread_mutex_lock(&S->mu);
    int kept = 1;
    if (S->nblocks == S->cap_blocks) {
        const size_t c = 2 * S->cap_blocks + 8;
        void **b = (void **)realloc(S->blocks, c * sizeof *b);
        if (b) S->blocks = b, S->cap_blocks = c;
        else kept = 0;
    }
    if (kept) S->blocks[S->nblocks++] = h;
    pthread_mutex_unlock(&S->mu);
    if (!kept) {
        free(h);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    }
    uint64_t *hk = (uint64_t *)h, *ht = (uint64_t *)(h + bk + bp + bn),
             *hc = (uint64_t *)(h + bk + bp + bn + bt);
    float *hp = (float *)(h + bk), *hn = with_n ? (float *)(h + bk + bp) : NULL;
    pm_status s = PM_STATUS_OK;
    if (nv) s = pmi_cuda_copy_host(ctx, hk, T->keys, bk, 1, fn);
    if (s == PM_STATUS_OK && nv) s = pmi_cuda_copy_host(ctx, hp, T->pos, bp, 1, fn);
    if (s == PM_STATUS_OK && nv && with_n) s = pmi_cuda_copy_host(ctx, hn, T->nrm, bn, 1, fn);
    if (s == PM_STATUS_OK && nt) s = pmi_cuda_copy_host(ctx, ht, T->tri, bt, 1, fn);
    if (s == PM_STATUS_OK && nt) s = pmi_cuda_copy_host(ctx, hc, T->ckey, bc, 1, fn);
    if (s == PM_STATUS_OK) s = pmi_cuda_wait(ctx, fn);
    for (size_t q = 0; q < count && s == PM_STATUS_OK; q++) {
        pm_mesh_piece *P = &pieces[q];
        if (P->num_vertices) {
            P->vertex_keys = hk + v0[q];
            P->positions = hp + 3 * v0[q];
            P->normals = hn ? hn + 3 * v0[q] : NULL;
        }
        if (P->num_triangles) {
            P->triangles = ht + 3 * t0[q];
            P->cell_keys = hc + t0[q];
        }
    }
    return s;
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
    pmi_sparse_cells C;
    pmi_sparse_plan_cells(plan, &C);
    const sp_gpu *gp = NULL;
    PMI_TRY(sp_gpu_get(ctx, plan, &gp));
    cudaStream_t st = pmi_cuda(ctx)->stream;
    sp_dev D;
    memset(&D, 0, sizeof D);
    pmi_piece_store T;
    memset(&T, 0, sizeof T);
    size_t *pv0 = (size_t *)malloc((count + 1) * sizeof *pv0),
           *pt0 = (size_t *)malloc((count + 1) * sizeof *pt0);
    if (!pv0 || !pt0) {
        free(pv0), free(pt0);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    }
    double fms = 0.0, ems = 0.0;
    pm_status s = PM_STATUS_OK;
    for (size_t q = 0; q < count && s == PM_STATUS_OK; q++) {
        const double t0 = pmi_now_ms();
        uint64_t b[3], o0[3], o1[3], w0[3], w1[3], c0[3], c1[3];
        pmi_brick_unkey(G, plan->bricks[first + q], b);
        pmi_brick_owned(G, b, o0, o1);
        pmi_brick_window(G, b, w0, w1);
        pmi_field_layout lay;
        memset(&lay, 0, sizeof lay);
        for (int a = 0; a < 3; a++) {
            const uint64_t wc0 = w0[a] / G->B, wc1 = (w1[a] - 1) / G->B + 1;
            c0[a] = wc0 >= 2 ? wc0 - 2 : 0;
            c1[a] = wc1 + 2 < G->cdims[a] ? wc1 + 2 : G->cdims[a];
            lay.lo[a] = G->g0[a] + (int64_t)(c0[a] * G->B);
            const uint64_t hi = c1[a] * G->B < G->dims[a] ? c1[a] * G->B : G->dims[a];
            lay.dims[a] = (size_t)(hi - c0[a] * G->B);
            lay.cdims[a] = (size_t)(c1[a] - c0[a]);
        }
        const size_t ncells = lay.cdims[0] * lay.cdims[1] * lay.cdims[2];
        const size_t points = lay.dims[0] * lay.dims[1] * lay.dims[2];
        const size_t n = sp_box_particles(plan, &C, c0, c1);
        if (n > UINT32_MAX) {
            s = pmi_error(PM_STATUS_OVERFLOW, "%s: %zu particles reach one brick (at most 2^32 - 1)",
                          fn, n);
            break;
        }
        s = sp_dev_reserve(ctx, &D, n, ncells, points);
        if (s != PM_STATUS_OK) break;
        sp_box bx;
        for (int a = 0; a < 3; a++) {
            bx.c0[a] = c0[a];
            bx.cd[a] = lay.cdims[a];
        }
        bx.sh1 = G->cshift[1];
        bx.sh2 = G->cshift[2];
        const unsigned blocks = (unsigned)((ncells + 255) / 256);
        sp_cells_kernel<<<blocks, 256, 0, st>>>(gp->ckey, (unsigned long long)C.m, gp->cstart, bx,
                                                (unsigned long long)ncells, D.count, D.first);
        s = pmi_cuda_launched("pm_reconstruct: a brick's cells");
        if (s == PM_STATUS_OK)
            s = pmi_cuda_scan_launch(ctx, D.count, D.start, ncells, (char *)D.tmp + 256,
                                     (unsigned long long *)D.tmp);
        if (s != PM_STATUS_OK) break;
        sp_gather_kernel<<<blocks, 256, 0, st>>>(gp->xyz, D.count, D.first,
                                                 (unsigned long long)ncells, (uint32_t)n, D.start,
                                                 D.xyz, D.cell);
        s = pmi_cuda_launched("pm_reconstruct: a brick's particles");
        if (s != PM_STATUS_OK) break;
        pmi_dn_grid g;
        memset(&g, 0, sizeof g);
        g.n = (long long)n;
        for (int a = 0; a < 3; a++) {
            g.lo[a] = (long long)lay.lo[a];
            g.dims[a] = (long long)lay.dims[a];
            g.cd[a] = (long long)lay.cdims[a];
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
        win.data = D.field + (off[2] * lay.dims[1] + off[1]) * lay.dims[0] + off[0];
        win.type = PM_SAMPLE_F32;
        win.nx = (size_t)(w1[0] - w0[0]);
        win.ny = (size_t)(w1[1] - w0[1]);
        win.nz = (size_t)(w1[2] - w0[2]);
        win.row_stride = lay.dims[0];
        win.slice_stride = lay.dims[0] * lay.dims[1];
        pm_lattice_box own;
        for (int a = 0; a < 3; a++) {
            own.lo[a] = o0[a];
            own.dims[a] = o1[a] - o0[a];
        }
        pv0[q] = T.nv;
        pt0[q] = T.nt;
        s = pmi_cuda_piece_stored(ctx, &win, w0, &lat, &own, iso, options, &pieces[q], &T);
        fms += t1 - t0;
        ems += pmi_now_ms() - t1;
    }
    if (s == PM_STATUS_OK) {
        const double t2 = pmi_now_ms();
        s = sp_download(ctx, plan, &T, options->normals != PM_NORMALS_NONE, pv0, pt0, count, pieces);
        ems += pmi_now_ms() - t2;
    }
    if (s != PM_STATUS_OK) cudaStreamSynchronize(st); /* queued work may use D */
    pmi_piece_store_free(&T);
    free(pv0), free(pt0);
    sp_dev_free(ctx, &D);
    *field_ms = fms;
    *extract_ms = ems;
    return s;
}
