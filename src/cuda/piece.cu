/* Marching cubes (Lorensen and Cline 1987) on one piece of a global
 * lattice, on the GPU: the CUDA side of pm_isosurface_piece
 * (docs/scale.md), the same bytes as src/cpu/sparse_mc.c. Data-parallel
 * over the owned points in chunks: classify (crossing edges, case), two
 * exclusive scans (scan.cu), scatter (vertex sources, triangles by key),
 * then one thread per vertex for its position and normal with
 * core/mc_math.h's arithmetic at global lattice indices. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/mc_tables.h"
}

#include "cuda/mc_device.cuh"

MCD_TABLES_UPLOAD

#define PC_THREADS 256
/* Owned points per chunk: the u32 prefixes of its vertex (3 per point)
 * and triangle (5 per point) counts stay below 2^32, a vertex's source
 * (point << 2 | axis) fits 32 bits, and the count arrays stay small
 * (18 bytes per point: 75 MB). */
#define PC_CHUNK ((unsigned long long)1 << 22)

/* One chunk of a piece as the kernels see it: the window (its point 0 is
 * global point wlo; strides in elements), the lattice, the owned box, the
 * inside rule (as pmi_piece_job), and the chunk's owned points [p0, p0 +
 * n) in owned-box order (x fastest, then y, then z: ascending keys). */
typedef struct pc_job {
    const void *data;
    unsigned long long rs, ss;
    unsigned long long wlo[3], N[3], olo[3], od[3];
    double origin[3], h[3];
    double gw[3][3]; /* gradient weights pmi_mc_diff_weight(span, h[a]), [span][a] */
    double iso, sg, siso;
    unsigned long long p0, n;
} pc_job;

/* Global point of chunk point t. */
static __device__ __forceinline__ void pc_point(const pc_job &J, unsigned long long t,
                                                unsigned long long g[3])
{
    const unsigned long long q = J.p0 + t, r = q / J.od[0];
    g[0] = J.olo[0] + q % J.od[0];
    g[1] = J.olo[1] + r % J.od[1];
    g[2] = J.olo[2] + r / J.od[1];
}

/* The sample at global point (i, j, k) as a double. */
template <typename T>
static __device__ __forceinline__ double pc_ld(const pc_job &J, unsigned long long i,
                                               unsigned long long j, unsigned long long k)
{
    const unsigned long long o = (i - J.wlo[0]) + (j - J.wlo[1]) * J.rs + (k - J.wlo[2]) * J.ss;
    return (double)__ldg((const T *)J.data + o);
}

template <typename T>
static __device__ __forceinline__ unsigned pc_in(const pc_job &J, unsigned long long i,
                                                 unsigned long long j, unsigned long long k)
{
    return (unsigned)pmi_mc_inside(J.sg, J.siso, pc_ld<T>(J, i, j, k));
}

/* Per chunk point: the crossing edges it owns (+x, +y, +z where the other
 * end is in the lattice: bits 0..2) and the case of its cell (where the
 * cell is in the lattice, else 0) into info (bits 0..2 and 3..10), their
 * counts, and the active cells (cases other than 0 and 255) added to
 * *active. */
template <typename T>
static __global__ void __launch_bounds__(PC_THREADS)
    pc_classify(pc_job J, uint32_t *vcount, uint32_t *tcount, uint16_t *info,
                unsigned long long *active)
{
    const unsigned long long t = blockIdx.x * (unsigned long long)PC_THREADS + threadIdx.x;
    unsigned act = 0;
    if (t < J.n) {
        unsigned long long g[3];
        pc_point(J, t, g);
        const unsigned long long i = g[0], j = g[1], k = g[2];
        const bool hx = i + 1 < J.N[0], hy = j + 1 < J.N[1], hz = k + 1 < J.N[2];
        /* Corners in mc_tables' numbering: 0 (0,0,0), 1 (1,0,0), 2 (1,1,0),
         * 3 (0,1,0), 4..7 the same at z + 1. */
        const unsigned c0 = pc_in<T>(J, i, j, k);
        const unsigned c1 = hx ? pc_in<T>(J, i + 1, j, k) : c0;
        const unsigned c3 = hy ? pc_in<T>(J, i, j + 1, k) : c0;
        const unsigned c4 = hz ? pc_in<T>(J, i, j, k + 1) : c0;
        const unsigned vm = (c0 ^ c1) | (c0 ^ c3) << 1 | (c0 ^ c4) << 2;
        unsigned cs = 0;
        if (hx && hy && hz) {
            const unsigned c2 = pc_in<T>(J, i + 1, j + 1, k), c5 = pc_in<T>(J, i + 1, j, k + 1),
                           c6 = pc_in<T>(J, i + 1, j + 1, k + 1), c7 = pc_in<T>(J, i, j + 1, k + 1);
            cs = c0 | c1 << 1 | c2 << 2 | c3 << 3 | c4 << 4 | c5 << 5 | c6 << 6 | c7 << 7;
        }
        vcount[t] = (uint32_t)__popc(vm);
        tcount[t] = mcd_tri_count[cs];
        info[t] = (uint16_t)(vm | cs << 3);
        act = cs != 0 && cs != 255;
    }
    const unsigned b = __ballot_sync(0xffffffffu, act);
    if ((threadIdx.x & 31) == 0 && b) atomicAdd(active, (unsigned long long)__popc(b));
}

/* Per chunk point: its vertices' sources (t << 2 | axis, axes ascending)
 * from voff[t], its cell's triangles (3 vertex keys each, in the case
 * table's order, the edges named as sparse_mc.c names them: the edge's
 * lower corner and axis) and cell keys from toff[t]. */
static __global__ void __launch_bounds__(PC_THREADS)
    pc_scatter(pc_job J, const uint16_t *info, const uint32_t *voff, const uint32_t *toff,
               uint32_t *vsrc, unsigned long long *tri, unsigned long long *ckey)
{
    const unsigned long long t = blockIdx.x * (unsigned long long)PC_THREADS + threadIdx.x;
    if (t >= J.n) return;
    const unsigned inf = info[t];
    if (!inf) return;
    const unsigned vm = inf & 7, cs = inf >> 3;
    uint32_t v = voff[t];
    for (unsigned a = 0; a < 3; a++)
        if (vm >> a & 1) vsrc[v++] = (uint32_t)t << 2 | a;
    const unsigned nt = mcd_tri_count[cs];
    if (!nt) return;
    unsigned long long g[3];
    pc_point(J, t, g);
    const unsigned long long N0 = J.N[0], N1 = J.N[1];
    const unsigned long long key = g[0] + (N0 - 1) * (g[1] + (N1 - 1) * g[2]);
    const unsigned long long o = toff[t];
    const int8_t *tab = mcd_tri_table[cs];
    for (unsigned s = 0; s < nt; s++) {
        ckey[o + s] = key;
        for (unsigned c = 0; c < 3; c++) {
            const int e = tab[3 * s + c];
            const uint8_t *lo = mcd_corner[mcd_edge_corner[e][0]];
            const unsigned long long pi = g[0] + lo[0], pj = g[1] + lo[1], pk = g[2] + lo[2];
            tri[3 * (o + s) + c] = 3 * (pi + N0 * (pj + N1 * pk)) + mcd_edge_axis[e];
        }
    }
}

/* The gradient at global point p: sparse_mc.c's gradient() (the
 * differences of core/mc_math.h with the lattice's dims as the border;
 * the ghost rule puts every point it reads in the window). */
template <typename T, int MODE>
static __device__ __forceinline__ void pc_gradient(const pc_job &J, const unsigned long long p[3],
                                                   double g[3])
{
#pragma unroll
    for (int a = 0; a < 3; a++) {
        const unsigned long long n = J.N[a];
        const unsigned long long ip = PMI_MC_DIFF_HI(p[a], n);
        const unsigned long long im = MODE == PM_NORMALS_FORWARD ? PMI_MC_DIFF_LO_FORWARD(p[a], n)
                                                                 : PMI_MC_DIFF_LO_CENTRAL(p[a]);
        if constexpr (MODE != PM_NORMALS_SOBEL) {
            unsigned long long qp[3] = {p[0], p[1], p[2]}, qm[3] = {p[0], p[1], p[2]};
            qp[a] = ip;
            qm[a] = im;
            g[a] = pmi_mc_diff_w(pc_ld<T>(J, qp[0], qp[1], qp[2]), pc_ld<T>(J, qm[0], qm[1], qm[2]),
                                 pmi_mc_diff_pick(J.gw[0][a], J.gw[1][a], J.gw[2][a],
                                                  (long long)(ip - im)));
        } else {
            const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
            double s = 0.0;
#pragma unroll
            for (int dc = -1; dc <= 1; dc++) {
                const unsigned long long qc = PMI_MC_SOBEL_STEP(p[c], dc, J.N[c]);
#pragma unroll
                for (int db = -1; db <= 1; db++) {
                    const unsigned long long qb = PMI_MC_SOBEL_STEP(p[b], db, J.N[b]);
                    unsigned long long qp[3], qm[3];
                    qp[a] = ip;
                    qm[a] = im;
                    qp[b] = qm[b] = qb;
                    qp[c] = qm[c] = qc;
                    s = pmi_mc_sobel_add(s, db, dc, pc_ld<T>(J, qp[0], qp[1], qp[2]),
                                         pc_ld<T>(J, qm[0], qm[1], qm[2]));
                }
            }
            g[a] = pmi_mc_sobel_grad(s, (double)(ip - im), J.h[a]);
        }
    }
}

/* Per vertex: its key, position and normal (sparse_mc.c's vertex()). */
template <typename T, int MODE>
static __global__ void __launch_bounds__(PC_THREADS)
    pc_vertices(pc_job J, const uint32_t *vsrc, unsigned long long nv, unsigned long long *keys,
                float *pos, float *nrm)
{
    const unsigned long long v = blockIdx.x * (unsigned long long)PC_THREADS + threadIdx.x;
    if (v >= nv) return;
    const uint32_t s = vsrc[v];
    const int axis = (int)(s & 3);
    unsigned long long p[3];
    pc_point(J, s >> 2, p);
    keys[v] = 3 * (p[0] + J.N[0] * (p[1] + J.N[1] * p[2])) + (unsigned long long)axis;
    const unsigned long long q[3] = {p[0] + (axis == 0), p[1] + (axis == 1), p[2] + (axis == 2)};
    const double vlo = pc_ld<T>(J, p[0], p[1], p[2]), vhi = pc_ld<T>(J, q[0], q[1], q[2]);
    const double t = pmi_mc_edge_t(J.iso, vlo, vhi);
    float ps[3];
    pmi_mc_position(J.origin, J.h, (long long)p[0], (long long)p[1], (long long)p[2], axis, t, ps);
    pos[3 * v] = ps[0];
    pos[3 * v + 1] = ps[1];
    pos[3 * v + 2] = ps[2];
    if constexpr (MODE != PM_NORMALS_NONE) {
        double g0[3], g1[3];
        float ns[3];
        pc_gradient<T, MODE>(J, p, g0);
        pc_gradient<T, MODE>(J, q, g1);
        pmi_mc_normal(t, J.sg, J.siso, vlo, axis, g0, g1, ns);
        nrm[3 * v] = ns[0];
        nrm[3 * v + 1] = ns[1];
        nrm[3 * v + 2] = ns[2];
    }
}

typedef void (*pc_classify_fn)(pc_job, uint32_t *, uint32_t *, uint16_t *, unsigned long long *);
typedef void (*pc_vertices_fn)(pc_job, const uint32_t *, unsigned long long, unsigned long long *,
                               float *, float *);

static pc_classify_fn pc_classify_of(pm_sample_type t)
{
    switch (t) {
    case PM_SAMPLE_U8: return pc_classify<uint8_t>;
    case PM_SAMPLE_U16: return pc_classify<uint16_t>;
    case PM_SAMPLE_I16: return pc_classify<int16_t>;
    case PM_SAMPLE_F32: return pc_classify<float>;
    default: return pc_classify<double>;
    }
}

template <typename T> static pc_vertices_fn pc_vertices_mode(pm_normals m)
{
    switch (m) {
    case PM_NORMALS_NONE: return pc_vertices<T, PM_NORMALS_NONE>;
    case PM_NORMALS_FORWARD: return pc_vertices<T, PM_NORMALS_FORWARD>;
    case PM_NORMALS_SOBEL: return pc_vertices<T, PM_NORMALS_SOBEL>;
    default: return pc_vertices<T, PM_NORMALS_CENTRAL>;
    }
}

static pc_vertices_fn pc_vertices_of(pm_sample_type t, pm_normals m)
{
    switch (t) {
    case PM_SAMPLE_U8: return pc_vertices_mode<uint8_t>(m);
    case PM_SAMPLE_U16: return pc_vertices_mode<uint16_t>(m);
    case PM_SAMPLE_I16: return pc_vertices_mode<int16_t>(m);
    case PM_SAMPLE_F32: return pc_vertices_mode<float>(m);
    default: return pc_vertices_mode<double>(m);
    }
}

static unsigned pc_blocks(unsigned long long n)
{
    const unsigned long long b = (n + PC_THREADS - 1) / PC_THREADS;
    return (unsigned)(b < 1 ? 1 : b);
}

/* Grows host array *p to `count` elements of `size` bytes. */
static int pc_grow(void **p, size_t count, size_t size)
{
    size_t bytes;
    if (!pmi_mul_size(count, size, &bytes)) return 0;
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q) return 0;
    *p = q;
    return 1;
}

/* The per-chunk device buffers: counts and offsets (scratch arena), and
 * the chunk's outputs (the context's output room, pmi_cuda_out_room). */
typedef struct pc_bufs {
    uint32_t *vcount, *voff, *tcount, *toff;
    uint16_t *info;
    void *scan_tmp[2];
    unsigned long long *totals; /* vertices, triangles, active cells */
} pc_bufs;

/* Room in the store for nv more vertices and nt more triangles: each
 * array grown to twice what it needs, its contents copied over, the old
 * one freed after the copy (all stream-ordered on the context's stream). */
static pm_status pc_store_grow(pmi_piece_store *S, void **arr, size_t held, size_t cap,
                               size_t elem, cudaStream_t s)
{
    pm_context *ctx = S->ctx;
    void *q = NULL;
    if (ctx->backend->scratch_alloc(ctx, cap * elem, &q) != PM_STATUS_OK)
        return PM_STATUS_OUT_OF_MEMORY;
    if (held && *arr)
        PMI_CU_TRY(cudaMemcpyAsync(q, *arr, held * elem, cudaMemcpyDeviceToDevice, s),
                   "pm_reconstruct: the pieces on the device");
    ctx->backend->scratch_free(ctx, *arr);
    *arr = q;
    return PM_STATUS_OK;
}

static pm_status pc_store_reserve(pmi_piece_store *S, int with_n, unsigned long long nv,
                                  unsigned long long nt, cudaStream_t s)
{
    static const char fn[] = "pm_reconstruct: the pieces on the device";
    if (S->nv + nv > S->cap_v) {
        const size_t cap = 2 * (S->nv + nv);
        if (pc_store_grow(S, (void **)&S->keys, S->nv, cap, 8, s) != PM_STATUS_OK ||
            pc_store_grow(S, (void **)&S->pos, S->nv, cap, 12, s) != PM_STATUS_OK ||
            (with_n && pc_store_grow(S, (void **)&S->nrm, S->nv, cap, 12, s) != PM_STATUS_OK))
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no device memory for %zu vertices",
                             fn, cap);
        S->cap_v = cap;
    }
    if (S->nt + nt > S->cap_t) {
        const size_t cap = 2 * (S->nt + nt);
        if (pc_store_grow(S, (void **)&S->tri, S->nt, cap, 24, s) != PM_STATUS_OK ||
            pc_store_grow(S, (void **)&S->ckey, S->nt, cap, 8, s) != PM_STATUS_OK)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no device memory for %zu triangles",
                             fn, cap);
        S->cap_t = cap;
    }
    return PM_STATUS_OK;
}

void pmi_piece_store_free(pmi_piece_store *S)
{
    if (S->ctx) {
        void *const a[] = {S->keys, S->pos, S->nrm, S->tri, S->ckey};
        for (int i = 0; i < 5; i++)
            S->ctx->backend->scratch_free(S->ctx, a[i]);
    }
    cudaGetLastError();
    memset(S, 0, sizeof *S);
}

/* One chunk: classified, scanned, scattered, its vertices computed and
 * everything appended to the host piece P, or to the store S (P counts
 * them). */
static pm_status pc_chunk(pm_context *ctx, const pc_job &J, pm_sample_type type, pm_normals normals,
                          pc_bufs *B, pm_mesh_piece *P, pmi_piece_store *S)
{
    static const char fn[] = "pm_isosurface_piece";
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    PMI_CU_TRY(cudaMemsetAsync(B->totals, 0, 3 * sizeof *B->totals, s), fn);
    pc_classify_of(type)<<<pc_blocks(J.n), PC_THREADS, 0, s>>>(J, B->vcount, B->tcount, B->info,
                                                               B->totals + 2);
    PMI_TRY(pmi_cuda_launched(fn));
    PMI_TRY(pmi_cuda_scan_launch(ctx, B->vcount, B->voff, (size_t)J.n, B->scan_tmp[0], B->totals));
    PMI_TRY(
        pmi_cuda_scan_launch(ctx, B->tcount, B->toff, (size_t)J.n, B->scan_tmp[1], B->totals + 1));
    unsigned long long *tot = &st->host[PMI_HOST_COUNTS];
    PMI_CU_TRY(cudaMemcpyAsync(tot, B->totals, 3 * sizeof *tot, cudaMemcpyDeviceToHost, s), fn);
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    const unsigned long long nv = tot[0], nt = tot[1], act = tot[2];
    P->active_cells += act;
    if (!nv && !nt) return PM_STATUS_OK;

    /* Outputs: vertex sources, keys, positions, normals; triangles, cell
     * keys (each 256-byte aligned). Counts are below 8 * PC_CHUNK. */
    const int with_n = normals != PM_NORMALS_NONE;
    const size_t b_src = pmi_align256(nv * 4), b_key = pmi_align256(nv * 8),
                 b_pos = pmi_align256(nv * 12), b_nrm = with_n ? pmi_align256(nv * 12) : 0,
                 b_tri = pmi_align256(nt * 24), b_ck = pmi_align256(nt * 8);
    char *q;
    PMI_TRY(pmi_cuda_out_room(
        st, S ? b_src + 256 : b_src + b_key + b_pos + b_nrm + b_tri + b_ck + 256, &q));
    uint32_t *vsrc = (uint32_t *)q;
    unsigned long long *keys = (unsigned long long *)(q += b_src);
    float *pos = (float *)(q += b_key);
    float *nrm = (float *)(q += b_pos);
    unsigned long long *tri = (unsigned long long *)(q += b_nrm);
    unsigned long long *ckey = (unsigned long long *)(q += b_tri);
    if (S) {
        S->ctx = ctx;
        PMI_TRY(pc_store_reserve(S, with_n, nv, nt, s));
        keys = S->keys + S->nv, pos = S->pos + 3 * S->nv, nrm = with_n ? S->nrm + 3 * S->nv : NULL;
        tri = S->tri + 3 * S->nt, ckey = S->ckey + S->nt;
    }

    pc_scatter<<<pc_blocks(J.n), PC_THREADS, 0, s>>>(J, B->info, B->voff, B->toff, vsrc, tri, ckey);
    PMI_TRY(pmi_cuda_launched(fn));
    if (nv) {
        pc_vertices_of(type, normals)<<<pc_blocks(nv), PC_THREADS, 0, s>>>(J, vsrc, nv, keys, pos,
                                                                           with_n ? nrm : NULL);
        PMI_TRY(pmi_cuda_launched(fn));
    }

    if (S) {
        S->nv += nv;
        S->nt += nt;
        P->num_vertices += nv;
        P->num_triangles += nt;
        return PM_STATUS_OK;
    }
    /* Host arrays grown to the new totals (the piece keeps what it had on
     * failure; the caller frees it). */
    const size_t v0 = (size_t)P->num_vertices, t0 = (size_t)P->num_triangles;
    const size_t v1 = v0 + (size_t)nv, t1 = t0 + (size_t)nt;
    if (nv) {
        if (!pc_grow((void **)&P->vertex_keys, v1, 8) || !pc_grow((void **)&P->positions, v1, 12) ||
            (with_n && !pc_grow((void **)&P->normals, v1, 12)))
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "%s: no host memory for %zu vertices of the box at (%llu, %llu, %llu)",
                             fn, v1, J.olo[0], J.olo[1], J.olo[2]);
    }
    if (nt) {
        if (!pc_grow((void **)&P->triangles, t1, 24) || !pc_grow((void **)&P->cell_keys, t1, 8))
            return pmi_error(
                PM_STATUS_OUT_OF_MEMORY,
                "%s: no host memory for %zu triangles of the box at (%llu, %llu, %llu)", fn, t1,
                J.olo[0], J.olo[1], J.olo[2]);
    }
    if (nv) {
        PMI_TRY(pmi_cuda_copy_host(ctx, P->vertex_keys + v0, keys, nv * 8, 1, fn));
        PMI_TRY(pmi_cuda_copy_host(ctx, P->positions + 3 * v0, pos, nv * 12, 1, fn));
        if (with_n) PMI_TRY(pmi_cuda_copy_host(ctx, P->normals + 3 * v0, nrm, nv * 12, 1, fn));
    }
    if (nt) {
        PMI_TRY(pmi_cuda_copy_host(ctx, P->triangles + 3 * t0, tri, nt * 24, 1, fn));
        PMI_TRY(pmi_cuda_copy_host(ctx, P->cell_keys + t0, ckey, nt * 8, 1, fn));
    }
    PMI_TRY(pmi_cuda_wait(ctx, fn));
    P->num_vertices = v1;
    P->num_triangles = t1;
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_piece_stored(pm_context *ctx, const pm_volume *window,
                                           const uint64_t window_lo[3], const pm_lattice *lattice,
                                           const pm_lattice_box *owned, double iso,
                                           const pm_isosurface_options *options,
                                           pm_mesh_piece *piece, pmi_piece_store *store)
{
    static const char fn[] = "pm_isosurface_piece";
    memset(piece, 0, sizeof *piece);
    for (int a = 0; a < 3; a++) {
        piece->lattice_dims[a] = lattice->dims[a];
        piece->owned.lo[a] = owned->lo[a];
        piece->owned.dims[a] = owned->dims[a];
    }
    if (!owned->dims[0] || !owned->dims[1] || !owned->dims[2]) return PM_STATUS_OK;
    PMI_TRY(pmi_cuda_begin(ctx));
    if (!ctx->backend->accessible(ctx, window->data))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: the window is host memory, which the cuda backend cannot read "
                         "(pm_alloc and pm_upload it, or pass device, managed or mapped pinned "
                         "memory)",
                         fn);
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_TRY(mcd_tables_upload(st->device));

    pc_job J;
    memset(&J, 0, sizeof J);
    J.data = window->data;
    J.rs = window->row_stride;
    J.ss = window->slice_stride;
    for (int a = 0; a < 3; a++) {
        J.wlo[a] = window_lo[a];
        J.N[a] = lattice->dims[a];
        J.olo[a] = owned->lo[a];
        J.od[a] = owned->dims[a];
        J.origin[a] = lattice->origin[a];
        J.h[a] = lattice->spacing[a];
        for (int span = 0; span < 3; span++)
            J.gw[span][a] = pmi_mc_diff_weight((double)span, J.h[a]);
    }
    J.iso = iso;
    J.sg = options->inside == PM_INSIDE_BELOW ? 1.0 : -1.0;
    J.siso = J.sg * iso;
    /* The owned box lies in the lattice, whose 3 * points fit 64 bits
     * (checked by pm_isosurface_piece): no overflow. */
    const unsigned long long npts = J.od[0] * J.od[1] * J.od[2];
    const unsigned long long chunk = npts < PC_CHUNK ? npts : PC_CHUNK;

    pc_bufs B;
    memset(&B, 0, sizeof B);
    const size_t c = (size_t)chunk, tmp_b = pmi_align256(pmi_cuda_scan_tmp_bytes(c));
    const size_t bytes = 256 + 4 * pmi_align256(c * 4) + pmi_align256(c * 2) + 2 * tmp_b;
    char *base = NULL;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&base));
    char *q = base;
    B.totals = (unsigned long long *)q;
    q += 256;
    B.vcount = (uint32_t *)q;
    q += pmi_align256(c * 4);
    B.voff = (uint32_t *)q;
    q += pmi_align256(c * 4);
    B.tcount = (uint32_t *)q;
    q += pmi_align256(c * 4);
    B.toff = (uint32_t *)q;
    q += pmi_align256(c * 4);
    B.info = (uint16_t *)q;
    q += pmi_align256(c * 2);
    B.scan_tmp[0] = q;
    B.scan_tmp[1] = q + tmp_b;

    pm_status s = PM_STATUS_OK;
    for (unsigned long long p0 = 0; p0 < npts && s == PM_STATUS_OK; p0 += chunk) {
        J.p0 = p0;
        J.n = npts - p0 < chunk ? npts - p0 : chunk;
        s = pc_chunk(ctx, J, window->type, options->normals, &B, piece, store);
    }
    if (s != PM_STATUS_OK) {
        cudaStreamSynchronize(st->stream); /* a failed chunk may have left work queued */
        cudaGetLastError();
    }
    if (s != PM_STATUS_OK) pm_mesh_piece_free(piece); /* zeroed, as the CPU leaves it */
    return s;
}

extern "C" pm_status
pmi_cuda_isosurface_piece(pm_context *ctx, const pm_volume *window, const uint64_t window_lo[3],
                          const pm_lattice *lattice, const pm_lattice_box *owned, double iso,
                          const pm_isosurface_options *options, pm_mesh_piece *piece)
{
    return pmi_cuda_piece_stored(ctx, window, window_lo, lattice, owned, iso, options, piece, NULL);
}

/* Kernel preloading (preload.cu): the bricks' pieces of f32 fields (the
 * sparse reconstruction), central normals and none. */
void pmi_piece_preload(pmi_preload *p, int tier)
{
    if (tier != 0) return;
    const void *const k[] = {(const void *)pc_classify<float>, (const void *)pc_scatter,
                             (const void *)pc_vertices<float, PM_NORMALS_CENTRAL>,
                             (const void *)pc_vertices<float, PM_NORMALS_NONE>};
    pmi_preload_all(p, k);
}
