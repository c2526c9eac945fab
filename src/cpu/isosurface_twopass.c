/* The two-pass marching cubes of the CPU (Lorensen and Cline 1987), the
 * fallback of the slab walk: a 1-bit-per-sample inside mask of the whole
 * volume (word-parallel skipping of uniform runs, in the spirit of Flying
 * Edges, Schroeder, Maynard and Geveci 2015), then over blocks of cell rows
 * count, scan, write. It needs memory only for the mask, the counts and the
 * mesh, so it takes the volumes whose slab arrays would pass the slab
 * walk's budget. The output is the same as the slab walk's, bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/mc_tables.h"
#include "core/mesh_out.h"
#include "core/util.h"
#include "cpu/isosurface_internal.h"
#include "cpu/stream_store.h"

/* 64 inside bits starting at logical point p (the array has a zero word of
 * padding at the end). */
static inline uint64_t mc_win(const uint64_t *B, size_t p)
{
    size_t q = p >> 6;
    unsigned s = (unsigned)(p & 63);
    uint64_t w = B[q] >> s;
    if (s) w |= B[q + 1] << (64 - s);
    return w;
}

/* The 8 corner words of cells x..x+63 of cell row (j,k): w[0] row (j,k),
 * w[1] row (j+1,k), w[2] row (j,k+1), w[3] row (j+1,k+1); w[4..7] the same
 * shifted by one point (the cells' right corners). Returns the mask of
 * cells that are neither all inside nor all outside. */
static inline uint64_t mc_cell_words(const mc_job *J, size_t j, size_t k, size_t x, uint64_t w[8])
{
    size_t p = (j + k * J->ny) * J->nx + x, nxy = J->nx * J->ny;
    size_t base[4] = {p, p + J->nx, p + nxy, p + nxy + J->nx};
    for (int r = 0; r < 4; r++) {
        w[r] = mc_win(J->bits, base[r]);
        w[r + 4] = mc_win(J->bits, base[r] + 1);
    }
    uint64_t all_in = w[0] & w[1] & w[2] & w[3] & w[4] & w[5] & w[6] & w[7];
    uint64_t any_in = w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7];
    return ~all_in & any_in & mc_low(J->nx - 1 - x);
}

/* Owned crossings of points x..x+63 of lattice row L = (j,k): X (+x edge),
 * Y (+y edge), Z (+z edge), as bit masks. */
static inline void mc_row_words(const mc_job *J, size_t L, size_t x, uint64_t *X, uint64_t *Y,
                                uint64_t *Z)
{
    size_t p = L * J->nx + x;
    uint64_t r = mc_win(J->bits, p), pm = mc_low(J->nx - x);
    *X = (r ^ mc_win(J->bits, p + 1)) & mc_low(J->nx - 1 - x);
    *Y = (L % J->ny) + 1 < J->ny ? (r ^ mc_win(J->bits, p + J->nx)) & pm : 0;
    *Z = (L / J->ny) + 1 < J->nz ? (r ^ mc_win(J->bits, p + J->nx * J->ny)) & pm : 0;
}

/* Pass 2: triangles and active cells of cell rows [r0, r1). */
MC_POPCNT static void mc_count_cells(const mc_job *J, size_t r0, size_t r1, uint64_t *tris,
                                     uint64_t *active)
{
    uint64_t nt = 0, na = 0;
    for (size_t r = r0; r < r1; r++) {
        size_t j = r % (J->ny - 1), k = r / (J->ny - 1);
        for (size_t x = 0; x + 1 < J->nx; x += 64) {
            uint64_t w[8], act = mc_cell_words(J, j, k, x, w);
            if (!act) continue;
            na += (uint64_t)mc_popc(act);
            uint8_t cs[64];
            const int wide = mc_cases_wide(J, w, act, cs);
            while (act) {
                unsigned b = (unsigned)__builtin_ctzll(act);
                act &= act - 1;
                nt += pmi_mc_tri_count[wide ? cs[b] : mc_case(w, b)];
            }
        }
    }
    *tris = nt;
    *active = na;
}

/* Owned crossings of lattice row L. */
MC_POPCNT static uint64_t mc_count_row(const mc_job *J, size_t L)
{
    uint64_t n = 0;
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t X, Y, Z;
        mc_row_words(J, L, x, &X, &Y, &Z);
        n += (uint64_t)(mc_popc(X) + mc_popc(Y) + mc_popc(Z));
    }
    return n;
}

/* Vertices read samples around both ends of an edge (gradients), lines
 * that pass 1 streamed through long ago: prefetching them for a row ahead
 * turns one dependent cache miss after another into overlapping ones.
 * A word of 64 points with crossings prefetches its span in each row that
 * its gradients read. */
MC_POPCNT static void mc_prefetch_row(const mc_job *J, size_t L)
{
    if (L >= J->ny * J->nz) return;
    size_t j = L % J->ny, k = L / J->ny;
    const char *base = (const char *)J->data + (j * J->rs + k * J->ss) * J->es;
    ptrdiff_t rs = (ptrdiff_t)(J->rs * J->es), ss = (ptrdiff_t)(J->ss * J->es);
    ptrdiff_t lo_y = j ? -rs : 0, lo_z = k ? -ss : 0;
    ptrdiff_t hi_y = j + 1 < J->ny ? rs : 0, hi_z = k + 1 < J->nz ? ss : 0;
    ptrdiff_t hi2_y = j + 2 < J->ny ? 2 * rs : hi_y, hi2_z = k + 2 < J->nz ? 2 * ss : hi_z;
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t m[3];
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        uint64_t any = m[0] | m[1] | m[2];
        /* Dense words come one after another: the hardware streams them. */
        if (!any || __builtin_popcountll(any) > 16) continue;
        /* Bytes from the first to the last point with a crossing. */
        const char *c0 = base + (x + (size_t)__builtin_ctzll(any)) * J->es;
        const char *c1 = base + (x + 63 - (size_t)__builtin_clzll(any)) * J->es;
        ptrdiff_t off[10] = {lo_y, lo_z, hi_y, hi_z};
        int n = 4;
        if (m[1]) {
            off[n++] = hi2_y;
            off[n++] = hi_y + lo_z;
            off[n++] = hi_y + hi_z;
        }
        if (m[2]) {
            off[n++] = hi2_z;
            off[n++] = hi_z + lo_y;
        }
        if (m[1] | m[2]) off[n++] = hi_z + hi_y;
        for (int r = 0; r < n; r++)
            for (const char *c = c0; c < c1 + 64; c += 64)
                __builtin_prefetch(c + off[r]);
    }
}

/* Crossings queued before the vertex kernel takes them (a few words'
 * worth: one call per row in most rows). */
#define MC_ROW_QUEUE 256

/* mc_write_row's loop when the whole row fits the caller's capacity and
 * normals are central: each crossing queued as i << 2 | axis (by
 * queue64, or branch-free: a point's x, y and z entries are written at
 * np, np + X, np + X + Y, so the ones without a crossing are
 * overwritten), the queue's groups of 8 through vertex_row (their slots
 * are consecutive), the last 1-7 through it padded. */
static void mc_write_row8(const mc_job *J, size_t L, uint64_t id, const pmi_mesh_dest *D,
                          mc_vertex_row_fn vertex_row, mc_queue64_fn queue64)
{
    const size_t j = L % J->ny, k = L / J->ny;
    float *const P = D->positions, *const N = D->normals;
    /* Queued crossings: fewer than MC_ROW_QUEUE before a word, 3 per
     * point of the word, 3 slots written past the count. */
    uint64_t pend[MC_ROW_QUEUE + 3 * 64 + 3];
    size_t np = 0;
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t m[3];
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        if (queue64) {
            np += queue64(m, x, pend + np);
        } else {
            uint64_t any = m[0] | m[1] | m[2];
            while (any) {
                const unsigned b = (unsigned)__builtin_ctzll(any);
                any &= any - 1;
                const uint64_t e = (uint64_t)(x + b) << 2;
                pend[np] = e;
                np += m[0] >> b & 1;
                pend[np] = e | 1;
                np += m[1] >> b & 1;
                pend[np] = e | 2;
                np += m[2] >> b & 1;
            }
        }
        /* The queue's whole groups of 8 once it holds a few words' worth,
         * and at the row's end. */
        if (np >= MC_ROW_QUEUE || x + 64 >= J->nx) {
            const size_t n8 = np & ~(size_t)7;
            if (n8) vertex_row(J, j, k, pend, n8, P + 3 * id, N + 3 * id);
            id += n8;
            np -= n8;
            for (size_t l = 0; l < np; l++)
                pend[l] = pend[n8 + l];
        }
    }
    if (!np) return;
    /* The last 1-7 through the kernel too, the queue padded with copies of
     * its last crossing and the 8 results staged: each lane's bits are
     * vertex()'s whatever its neighbours. */
    float sp[24], sn[24];
    for (size_t l = np; l < 8; l++)
        pend[l] = pend[np - 1];
    vertex_row(J, j, k, pend, 8, sp, sn);
    memcpy(P + 3 * id, sp, 12 * np);
    memcpy(N + 3 * id, sn, 12 * np);
}

/* Pass 3: the vertices of lattice row L, slots voff[L] to vend, by point,
 * then x, y, z edge; central normals eight at a time (vertex8). Slots past
 * the caller's capacity are skipped. */
static void mc_write_row(const mc_job *J, size_t L, const uint64_t *voff, uint64_t vend,
                         const pmi_mesh_dest *D, mc_vertex_fn vertex, mc_vertex8_fn vertex8,
                         mc_vertex_row_fn vertex_row, mc_queue64_fn queue64)
{
    uint64_t id = voff[L];
    size_t j = L % J->ny, k = L / J->ny;
    mc_prefetch_row(J, L + 2);
    if (vertex8 && vend <= D->vertex_limit) {
        mc_write_row8(J, L, id, D, vertex_row, queue64);
        return;
    }
    mc_pending pend[8];
    int np = 0;
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t m[3];
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        uint64_t any = m[0] | m[1] | m[2];
        while (any) {
            unsigned b = (unsigned)__builtin_ctzll(any);
            any &= any - 1;
            for (int a = 0; a < 3; a++) {
                if (!(m[a] >> b & 1)) continue;
                if (id >= D->vertex_limit) goto flush; /* ids only grow */
                float *pos = D->positions + 3 * id, *nrm = D->normals ? D->normals + 3 * id : NULL;
                id++;
                if (vertex8) {
                    mc_pend(J, vertex8, pend, &np, x + b, j, k, a, pos, nrm);
                    continue;
                }
                vertex(J, x + b, j, k, a, pos, nrm);
            }
        }
    }
flush:
    for (int l = 0; l < np; l++)
        vertex(J, pend[l].i, pend[l].j, pend[l].k, pend[l].axis, pend[l].pos, pend[l].nrm);
}

/* Per-thread scratch of the indexed triangle pass: the vertex ids of the
 * 4 lattice rows around a cell row, in 4 slots of 3 axes of `row` ids
 * (slot (j + dy) % 2 + 2 dz for row (j + dy, k + dz)); a cell row's rows
 * j + 1 are the next cell row's rows j. */
typedef struct mc_rowids {
    uint32_t *ids;
    size_t row;        /* ids per axis and slot: nx rounded up to 64 */
    size_t filled[4];  /* lattice row in each slot, SIZE_MAX: none */
    mc_ids64_fn ids64; /* NULL, or the AVX2 one */
} mc_rowids;

/* Slot q := the ids of the crossing edges of lattice row L (by point,
 * then x, y, z edge, from voff[L]); slots of edges without a crossing get
 * values nobody reads. */
MC_POPCNT static void mc_fill_rowids(const mc_job *J, size_t L, const uint64_t *voff, mc_rowids *R,
                                     int q)
{
    if (R->filled[q] == L) return;
    R->filled[q] = L;
    uint32_t *ids = R->ids + 3 * (size_t)q * R->row;
    uint64_t id = voff[L];
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t m[3];
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        uint64_t any = m[0] | m[1] | m[2];
        if (R->ids64 && any) {
            R->ids64(m, (uint32_t)id, ids + x, R->row);
            id += (uint64_t)(__builtin_popcountll(m[0]) + __builtin_popcountll(m[1]) +
                             __builtin_popcountll(m[2]));
            continue;
        }
        while (any) {
            unsigned b = (unsigned)__builtin_ctzll(any);
            any &= any - 1;
            mc_id_slots(ids + x + b, R->row, m, b, &id);
        }
    }
}

/* Pass 3: the triangles of cell rows [r0, r1), the first being number t0;
 * a corner on edge e of cell i is the id of edge (axis, i + dx) of one of
 * the 4 lattice rows (R: this thread's scratch). A word's triangles are
 * gathered in a stage (by tris64 when given) and copied out, streaming
 * when `stream` is set. Stops at the caller's capacity. */
MC_POPCNT static void mc_write_cells(const mc_job *J, size_t r0, size_t r1, uint64_t t0,
                                     const uint64_t *voff, const pmi_mesh_dest *D, mc_rowids *R,
                                     mc_tris64_fn tris64, int stream)
{
    uint64_t t = t0;
    for (int q = 0; q < 4; q++)
        R->filled[q] = SIZE_MAX;
    for (size_t r = r0; r < r1; r++) {
        size_t j = r % (J->ny - 1), k = r / (J->ny - 1);
        /* Edge e's ids at ids + offp[e] (+ the cell); tris64's gathers
         * take them as 32-bit offsets (off), which pmi_mc_twopass allows
         * only for rows short enough. */
        ptrdiff_t offp[12] = {0};
        int32_t off[16] = {0};
        int filled = 0;
        for (size_t x = 0; x + 1 < J->nx; x += 64) {
            uint64_t w[8], act = mc_cell_words(J, j, k, x, w);
            if (!act) continue;
            uint8_t cs64[64];
            if (!mc_cases_wide(J, w, act, cs64))
                for (uint64_t a = act; a; a &= a - 1)
                    cs64[__builtin_ctzll(a)] = (uint8_t)mc_case(w, (unsigned)__builtin_ctzll(a));
            if (!filled) {
                for (int r4 = 0; r4 < 4; r4++) {
                    size_t jj = j + (r4 & 1);
                    mc_fill_rowids(J, jj + (k + (r4 >> 1)) * J->ny, voff, R,
                                   (int)(jj & 1) + 2 * (r4 >> 1));
                }
                for (int e = 0; e < 12; e++) {
                    int row = pmi_mc_edge_row[e];
                    size_t q = ((j + (row & 1)) & 1) + 2 * (size_t)(row >> 1);
                    offp[e] =
                        (ptrdiff_t)((3 * q + pmi_mc_edge_axis[e]) * R->row) + pmi_mc_edge_dx[e];
                    off[e] = tris64 ? (int32_t)offp[e] : 0;
                }
                filled = 1;
            }
            uint32_t stage[MC_TRIS64_STAGE];
            size_t nv = 0;
            if (tris64)
                nv = tris64(R->ids, off, act, cs64, x, stage);
            else
                for (; act; act &= act - 1) {
                    unsigned b = (unsigned)__builtin_ctzll(act), cs = cs64[b];
                    const int8_t *tab = pmi_mc_tri_table[cs];
                    for (unsigned v = 0; v < 3u * pmi_mc_tri_count[cs]; v++)
                        stage[nv++] = R->ids[offp[tab[v]] + (ptrdiff_t)(x + b)];
                }
            /* The caller's capacity: the triangles that fit, then stop. */
            uint64_t n = nv / 3, room = t < D->tri_limit ? D->tri_limit - t : 0;
            uint64_t m = n < room ? n : room;
            if (stream)
                pmi_stream_copy32(D->indices + 3 * t, stage, 3 * m);
            else
                memcpy(D->indices + 3 * t, stage, 12 * m);
            if (n > room) return;
            t += n;
        }
    }
}

/* Blocks of cell rows: big enough to amortise scheduling, enough of them
 * to balance the threads. Only the speed depends on the blocking. */
static size_t mc_block_rows(size_t cell_rows, size_t nx, int threads)
{
    size_t b = 16384 / (nx - 1);
    if (b < 1) b = 1;
    size_t per_thread = (cell_rows + 8 * (size_t)threads - 1) / (8 * (size_t)threads);
    if (per_thread >= 1 && b > per_thread) b = per_thread;
    return b;
}

/* Scratch of one two-pass extraction. */
typedef struct mc_twopass {
    mc_job J;
    const mc_kernels *K;
    mc_vertex8_fn vertex8_central;       /* K's, or the AVX2 one */
    mc_vertex_row_fn vertex_row_central; /* K's, or the AVX2 one */
    mc_queue64_fn queue64;               /* NULL, or the BMI2 one */
    mc_tris64_fn tris64;                 /* NULL, or the AVX2 one */
    mc_ids64_fn ids64;                   /* NULL, or the AVX2 one */
    size_t id_row;                       /* ids per axis and row of mc_rowids */
    int threads, par;
    int stream; /* the mesh is written with streaming stores */
    size_t lattice_rows, cell_rows, brows, nblocks;
    uint64_t *bits;    /* inside mask */
    uint64_t *btri;    /* per block: triangles, then the first triangle */
    uint64_t *bact;    /* per block: active cells */
    uint64_t *voff;    /* per lattice row: owned crossings, then the first vertex */
    uint64_t nvert;    /* vertices of the mesh */
    uint32_t *scratch; /* per thread: the ids of mc_rowids */
} mc_twopass;

/* Passes 1 (inside bits) and 2 (triangles and active cells per block of
 * cell rows, owned edge crossings per lattice row), then their exclusive
 * scans. */
static void mc_twopass_count(mc_twopass *T, uint64_t *nvert, uint64_t *ntri, uint64_t *nact)
{
    const mc_job *J = &T->J;
    const size_t data_words = (J->P + 63) / 64, brows = T->brows, cell_rows = T->cell_rows;
#pragma omp parallel num_threads(T->threads) if (T->par)
    {
#pragma omp for schedule(static)
        for (size_t q = 0; q < data_words; q += 64) {
            size_t q1 = q + 64 < data_words ? q + 64 : data_words;
            T->K->bits_words(J, T->bits, q, q1);
        }
#pragma omp for schedule(dynamic, 1) nowait
        for (size_t b = 0; b < T->nblocks; b++) {
            size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
            mc_count_cells(J, b * brows, r1, &T->btri[b], &T->bact[b]);
        }
#pragma omp for schedule(dynamic, 256)
        for (size_t L = 0; L < T->lattice_rows; L++)
            T->voff[L] = mc_count_row(J, L);
    }
    /* Serial: one entry per block or row. */
    uint64_t nt = 0, na = 0, nv = 0;
    for (size_t b = 0; b < T->nblocks; b++) {
        uint64_t c = T->btri[b];
        T->btri[b] = nt;
        nt += c;
        na += T->bact[b];
    }
    for (size_t L = 0; L < T->lattice_rows; L++) {
        uint64_t c = T->voff[L];
        T->voff[L] = nv;
        nv += c;
    }
    *nvert = nv;
    *ntri = nt;
    *nact = na;
}

/* Pass 3: the vertices per lattice row, the triangles per block. */
static void mc_twopass_write(const mc_twopass *T, const pmi_mesh_dest *D)
{
    const mc_job *J = &T->J;
    const size_t brows = T->brows, cell_rows = T->cell_rows;
#pragma omp parallel num_threads(T->threads) if (T->par)
    {
        /* Without normals (D->normals NULL) vertex() writes positions only. */
        mc_vertex8_fn v4 =
            D->normals && J->normals == PM_NORMALS_CENTRAL ? T->vertex8_central : NULL;
#pragma omp for schedule(dynamic, 64) nowait
        for (size_t L = 0; L < T->lattice_rows; L++)
            mc_write_row(J, L, T->voff, L + 1 < T->lattice_rows ? T->voff[L + 1] : T->nvert, D,
                         T->K->vertex, v4, T->vertex_row_central, T->queue64);
        if (D->indices) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            mc_rowids R;
            R.row = T->id_row;
            R.ids = T->scratch + (size_t)tid * (12 * R.row + 16);
            R.ids64 = T->ids64;
#pragma omp for schedule(dynamic, 1)
            for (size_t b = 0; b < T->nblocks; b++) {
                size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
                mc_write_cells(J, b * brows, r1, T->btri[b], T->voff, D, &R, T->tris64, T->stream);
            }
        }
        pmi_stream_fence();
    }
}

pm_status pmi_mc_twopass(pm_context *ctx, const pm_volume *vol, double iso,
                         const pm_isosurface_options *opt, int avx2, int stream, pm_mesh *mesh)
{
    mc_twopass T;
    memset(&T, 0, sizeof T);
    pmi_mc_job_init(&T.J, vol, iso, opt);
    T.K = &pmi_mc_kernels[vol->type];
    T.vertex8_central = T.K->vertex8_central;
    T.vertex_row_central = T.K->vertex_row_central;
#if MC_AVX2
    if (avx2) {
        T.vertex8_central = pmi_mc_vertex8_central;
        T.vertex_row_central = pmi_mc_vertex_row_central;
        if (__builtin_cpu_supports("bmi2")) T.queue64 = pmi_mc_queue64_bmi2;
        T.J.cases64 = pmi_mc_cases64_avx2;
        /* Its gathers take 32-bit offsets into the 12 rows of ids. */
        if (T.J.nx <= INT32_MAX / 16) T.tris64 = pmi_mc_tris64_avx2;
        T.ids64 = pmi_mc_ids64_avx2;
    }
#else
    (void)avx2;
#endif
    T.threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    /* Small volumes run on the calling thread (same blocks, same output):
     * waking a team costs more than the work. */
    T.par = T.J.P >= 32768;
    T.lattice_rows = T.J.ny * T.J.nz;
    T.cell_rows = (T.J.ny - 1) * (T.J.nz - 1);
    T.brows = mc_block_rows(T.cell_rows, T.J.nx, T.threads);
    T.nblocks = (T.cell_rows + T.brows - 1) / T.brows;
    const size_t nwords = T.J.P / 64 + 2;
    const int timed = opt->report && opt->report->timed;
    double t0 = timed ? pmi_now_ms() : 0.0;
    T.bits = pmi_alloc_huge(sizeof(uint64_t) * nwords);
    T.btri = calloc(T.nblocks + 1, sizeof(uint64_t));
    T.bact = calloc(T.nblocks + 1, sizeof(uint64_t));
    T.voff = malloc(sizeof(uint64_t) * T.lattice_rows);
    T.id_row = (T.J.nx + 63) & ~(size_t)63; /* ids64 writes whole words */
    /* 16 ids of padding per thread: tris64 loads the ids of 8 cells at a
     * time, and for the last group of a row, one id past the row's end. */
    T.scratch = malloc(sizeof(uint32_t) * (12 * T.id_row + 16) * (size_t)T.threads);
    pm_status st;
    if (!T.bits || !T.btri || !T.bact || !T.voff || !T.scratch) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                       "pm_isosurface: no memory for the %zu-word inside mask", nwords);
        goto done;
    }
    T.bits[nwords - 1] = T.bits[nwords - 2] = 0;
    T.J.bits = T.bits;
    uint64_t nvert, ntri, nact;
    mc_twopass_count(&T, &nvert, &ntri, &nact);
    T.nvert = nvert;
    pmi_mesh_dest D;
    st = pmi_mesh_prepare(ctx, opt, 1, nvert, ntri, nact, mesh, &D);
    if (st != PM_STATUS_OK && st != PM_STATUS_TRUNCATED) goto done;
    T.stream = PMI_STREAM_STORES && (stream || pmi_stream_wanted(nvert, ntri, D.normals != NULL));
    pmi_report_path(opt->report, "stores", T.stream ? "stream" : "cached");
    double t1 = timed ? pmi_now_ms() : 0.0;
    mc_twopass_write(&T, &D);
    pmi_report_stage(opt->report, 0, "count", t1 - t0);
    pmi_report_stage(opt->report, 1, "write", timed ? pmi_now_ms() - t1 : 0.0);
done:
    free(T.bits);
    free(T.btri);
    free(T.bact);
    free(T.voff);
    free(T.scratch);
    return st;
}
