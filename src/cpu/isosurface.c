/* Marching cubes on the CPU (Lorensen and Cline 1987; seed 003), as a
 * two-pass scan over blocks of cell rows on a 1-bit-per-sample inside mask
 * (word-parallel skipping of uniform runs, in the spirit of Flying Edges,
 * Schroeder, Maynard and Geveci 2015): count, scan, write. The output is
 * the reference every backend reproduces bit for bit. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/mc_tables.h"
#include "core/util.h"
#include "cpu/cpu.h"

typedef struct mc_job {
    const void *data;
    size_t nx, ny, nz, rs, ss; /* dims, row and slice strides (elements) */
    size_t P;                  /* lattice points nx * ny * nz */
    size_t es;                 /* bytes per sample */
    double h[3], origin[3];
    double iso, sg, siso; /* sg = -1 for inside_above; siso = sg * iso */
    float fthr;           /* siso rounded up to float: see mc_float_threshold */
    pm_normals normals;
    const uint64_t *bits; /* inside bit of every lattice point, logical order */
} mc_job;

typedef struct mc_dest {
    int indexed;
    float *positions, *normals; /* normals NULL when not wanted */
    uint32_t *indices;          /* indexed: NULL when not wanted */
    const uint64_t *voff;       /* indexed: first vertex of each lattice row */
    uint64_t vertex_limit;      /* vertices (indexed) written below this */
    uint64_t tri_limit;         /* triangles written below this */
} mc_dest;

/* The smallest float >= x. For a float (or u8/u16/i16, exact in float)
 * sample v, v < x in double exactly when v < mc_float_threshold(x) in
 * float: no float lies in [x, threshold). So the bit pass compares in float
 * and still implements the double rule. */
static float mc_float_threshold(double x)
{
    float f = (float)x;
    if ((double)f < x) f = nextafterf(f, INFINITY);
    return f;
}

#ifndef MC_SSE_F32
#define MC_SSE_F32 0
#endif
#define MC_T uint8_t
#define MC_SUF u8
#define MC_CT float
#define MC_THR(J) ((J)->fthr)
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T uint16_t
#define MC_SUF u16
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T int16_t
#define MC_SUF i16
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T float
#define MC_SUF f32
#if defined(__SSE2__)
#undef MC_SSE_F32
#define MC_SSE_F32 1
#endif
#include "cpu/isosurface_kernel.h"
#undef MC_SSE_F32
#define MC_SSE_F32 0
#undef MC_T
#undef MC_SUF
#undef MC_CT
#undef MC_THR
#define MC_T double
#define MC_SUF f64
#define MC_CT double
#define MC_THR(J) ((J)->siso)
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#undef MC_CT
#undef MC_THR

typedef void (*mc_vertex_fn)(const mc_job *, size_t, size_t, size_t, int, float *, float *);
typedef struct mc_kernels {
    void (*bits_words)(const mc_job *, uint64_t *, size_t, size_t);
    mc_vertex_fn vertex;
} mc_kernels;

#define MC_KERNELS(s)                                                                              \
    {                                                                                              \
        bits_words_##s, vertex_##s                                                                 \
    }
static const mc_kernels mc_kernel_table[5] = {MC_KERNELS(u8), MC_KERNELS(u16), MC_KERNELS(i16),
                                              MC_KERNELS(f32), MC_KERNELS(f64)};

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

/* Population count. The baseline x86-64 target has no popcnt instruction
 * (the builtin becomes a library call), so the functions that count bits
 * are cloned for CPUs with popcnt and picked at load time (MC_POPCNT). */
#define mc_popc(x) ((unsigned)__builtin_popcountll(x))
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__POPCNT__)
#define MC_POPCNT __attribute__((target_clones("popcnt", "default")))
#else
#define MC_POPCNT
#endif

/* Low n bits set (n may be >= 64). */
static inline uint64_t mc_low(size_t n) { return n >= 64 ? ~0ull : ((1ull << n) - 1); }

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

/* Case index of the cell at bit b (corner c bit set when inside). */
static inline unsigned mc_case(const uint64_t w[8], unsigned b)
{
    return (unsigned)((w[0] >> b & 1) | (w[4] >> b & 1) << 1 | (w[5] >> b & 1) << 2 |
                      (w[1] >> b & 1) << 3 | (w[2] >> b & 1) << 4 | (w[6] >> b & 1) << 5 |
                      (w[7] >> b & 1) << 6 | (w[3] >> b & 1) << 7);
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
            na += (uint64_t)mc_popc(act);
            while (act) {
                unsigned b = (unsigned)__builtin_ctzll(act);
                act &= act - 1;
                nt += pmi_mc_tri_count[mc_case(w, b)];
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
 * turns one dependent cache miss after another into overlapping ones. */
static void mc_prefetch_row(const mc_job *J, size_t L)
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
        while (any) {
            unsigned b = (unsigned)__builtin_ctzll(any);
            any &= any - 1;
            const char *c = base + (x + b) * J->es;
            __builtin_prefetch(c + lo_y);
            __builtin_prefetch(c + lo_z);
            __builtin_prefetch(c + hi_y);
            __builtin_prefetch(c + hi_z);
            if (m[1] >> b & 1) {
                __builtin_prefetch(c + hi2_y);
                __builtin_prefetch(c + hi_y + lo_z);
                __builtin_prefetch(c + hi_y + hi_z);
            }
            if (m[2] >> b & 1) {
                __builtin_prefetch(c + hi2_z);
                __builtin_prefetch(c + hi_z + lo_y);
                __builtin_prefetch(c + hi_z + hi_y);
            }
        }
    }
}

/* Pass 3, indexed: the vertices of lattice row L from slot voff[L] on, by
 * point, then x, y, z edge. Slots past the caller's capacity are skipped. */
static void mc_write_row(const mc_job *J, size_t L, const mc_dest *D, mc_vertex_fn vertex)
{
    uint64_t id = D->voff[L];
    size_t j = L % J->ny, k = L / J->ny;
    mc_prefetch_row(J, L + 2);
    for (size_t x = 0; x < J->nx; x += 64) {
        uint64_t m[3];
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        uint64_t any = m[0] | m[1] | m[2];
        while (any) {
            unsigned b = (unsigned)__builtin_ctzll(any);
            any &= any - 1;
            for (int a = 0; a < 3; a++) {
                if (!(m[a] >> b & 1)) continue;
                if (id < D->vertex_limit)
                    vertex(J, x + b, j, k, a, D->positions + 3 * id,
                           D->normals ? D->normals + 3 * id : NULL);
                id++;
            }
        }
    }
}

/* Per-thread scratch of the indexed triangle pass: for the 4 lattice rows
 * around a cell row, per 64-point word the id of its first vertex and the
 * X, Y, Z crossing masks. */
typedef struct mc_rowids {
    uint64_t *pre, *m; /* pre[w]; m[3 w + axis] */
} mc_rowids;

static void mc_fill_rowids(const mc_job *J, size_t L, const uint64_t *voff, mc_rowids *R)
{
    uint64_t id = voff[L];
    for (size_t x = 0, w = 0; x < J->nx; x += 64, w++) {
        uint64_t *m = R->m + 3 * w;
        mc_row_words(J, L, x, &m[0], &m[1], &m[2]);
        R->pre[w] = id;
        id += (uint64_t)(mc_popc(m[0]) + mc_popc(m[1]) + mc_popc(m[2]));
    }
}

/* Vertex id of the `axis` edge of point p in a row filled above. */
static inline uint32_t mc_rowid(const mc_rowids *R, size_t p, int axis)
{
    size_t w = p >> 6;
    unsigned b = (unsigned)(p & 63);
    const uint64_t *m = R->m + 3 * w;
    uint64_t below = (1ull << b) - 1;
    uint64_t id = R->pre[w] +
                  (uint64_t)(mc_popc(m[0] & below) + mc_popc(m[1] & below) + mc_popc(m[2] & below));
    if (axis >= 1) id += m[0] >> b & 1;
    if (axis >= 2) id += m[1] >> b & 1;
    return (uint32_t)id;
}

/* Edge e of cell (i,j,k) is owned by lattice point (i + dx, j + dy, k + dz):
 * mc_edge_dx[e] = dx, mc_edge_row[e] = dy + 2 dz. */
static const uint8_t mc_edge_dx[12] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0};
static const uint8_t mc_edge_row[12] = {0, 0, 1, 0, 2, 2, 3, 2, 0, 0, 1, 1};

/* Pass 3: the triangles of cell rows [r0, r1), the first being number t0.
 * Soup: each crossing edge's vertex computed once per cell, then copied to
 * 3t..3t+2. Indexed: indices into the vertices of the 4 lattice rows. */
MC_POPCNT static void mc_write_cells(const mc_job *J, size_t r0, size_t r1, uint64_t t0,
                                     const mc_dest *D, mc_vertex_fn vertex, mc_rowids *R)
{
    uint64_t t = t0;
    float cp[12][3], cn[12][3];
    for (size_t r = r0; r < r1; r++) {
        size_t j = r % (J->ny - 1), k = r / (J->ny - 1), prev_cell = SIZE_MAX;
        int filled = 0;
        if (!D->indexed && D->normals) {
            /* Soup computes vertices here: prefetch around the rows that
             * the cell row 2 further on will read (see mc_prefetch_row). */
            mc_prefetch_row(J, (j + 3) + k * J->ny);
            mc_prefetch_row(J, (j + 3) + (k + 1) * J->ny);
        }
        for (size_t x = 0; x + 1 < J->nx; x += 64) {
            uint64_t w[8], act = mc_cell_words(J, j, k, x, w);
            if (act && D->indexed && !filled) {
                for (int q = 0; q < 4; q++)
                    mc_fill_rowids(J, (j + (q & 1)) + (k + (q >> 1)) * J->ny, D->voff, &R[q]);
                filled = 1;
            }
            while (act) {
                unsigned b = (unsigned)__builtin_ctzll(act);
                act &= act - 1;
                unsigned cs = mc_case(w, b), n = pmi_mc_tri_count[cs];
                const int8_t *tab = pmi_mc_tri_table[cs];
                size_t i = x + b;
                /* The caller's capacity: the triangles that fit, then stop. */
                if (t >= D->tri_limit) return;
                int last = t + n > D->tri_limit;
                if (last) n = (unsigned)(D->tri_limit - t);
                if (D->indexed) {
                    for (unsigned v = 0; v < 3 * n; v++) {
                        int e = tab[v];
                        D->indices[3 * t + v] =
                            mc_rowid(&R[mc_edge_row[e]], i + mc_edge_dx[e], pmi_mc_edge_axis[e]);
                    }
                    t += n;
                    if (last) return;
                    continue;
                }
                /* The left face of this cell is the right face of the
                 * previous one when that was cell i - 1: its edges 3, 7, 8,
                 * 11 are that cell's 1, 5, 9, 10 (same bits, computed by the
                 * same rule), so copy instead of recomputing. */
                unsigned have = 0;
                if (prev_cell == i - 1 && i > 0) {
                    static const uint8_t to[4] = {3, 7, 8, 11}, from[4] = {1, 5, 9, 10};
                    for (int q = 0; q < 4; q++) {
                        memcpy(cp[to[q]], cp[from[q]], sizeof cp[0]);
                        if (D->normals) memcpy(cn[to[q]], cn[from[q]], sizeof cn[0]);
                    }
                    have = 1u << 3 | 1u << 7 | 1u << 8 | 1u << 11;
                }
                prev_cell = i;
                for (int e = 0; e < 12; e++) {
                    unsigned c0 = pmi_mc_edge_corner[e][0], c1 = pmi_mc_edge_corner[e][1];
                    if (((cs >> c0) & 1) == ((cs >> c1) & 1) || (have >> e & 1)) continue;
                    vertex(J, i + pmi_mc_corner[c0][0], j + pmi_mc_corner[c0][1],
                           k + pmi_mc_corner[c0][2], pmi_mc_edge_axis[e], cp[e],
                           D->normals ? cn[e] : NULL);
                }
                for (unsigned v = 0; v < 3 * n; v++) {
                    int e = tab[v];
                    memcpy(D->positions + 3 * (3 * t + v), cp[e], sizeof cp[e]);
                    if (D->normals) memcpy(D->normals + 3 * (3 * t + v), cn[e], sizeof cn[e]);
                }
                t += n;
                if (last) return;
            }
        }
    }
}

/* Big arrays (the inside mask, the mesh) are touched once, page by page:
 * in a VM every first touch of a 4 KiB page is an expensive fault, so on
 * Linux ask for transparent huge pages. Freed with free() like malloc. */
static void *mc_alloc(size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= huge) {
        size_t rounded = (bytes + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, rounded);
        if (p) madvise(p, rounded, MADV_HUGEPAGE); /* a hint; failure is harmless */
        return p;
    }
#endif
    return malloc(bytes ? bytes : 1);
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

pm_status pmi_cpu_isosurface(pm_context *ctx, const pm_volume *vol, double iso,
                             const pm_isosurface_options *opt, pm_mesh *mesh)
{
    mc_job J;
    memset(&J, 0, sizeof J);
    J.data = vol->data;
    J.nx = vol->nx;
    J.ny = vol->ny;
    J.nz = vol->nz;
    J.rs = vol->row_stride;
    J.ss = vol->slice_stride;
    for (int a = 0; a < 3; a++) {
        J.h[a] = vol->spacing[a];
        J.origin[a] = vol->origin[a];
    }
    J.iso = iso;
    J.sg = opt->inside_above ? -1.0 : 1.0;
    J.siso = J.sg * iso;
    J.normals = opt->normals;
    const mc_kernels *K = &mc_kernel_table[vol->type];
    int indexed = opt->mode == PM_MESH_INDEXED;
    int want_normals = opt->normals != PM_NORMALS_NONE;
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;

    /* The volume's size already fits size_t, so these products do too. */
    size_t lattice_rows = J.ny * J.nz, cell_rows = (J.ny - 1) * (J.nz - 1);
    J.P = J.nx * lattice_rows;
    J.es = pm_sample_size(vol->type);
    J.fthr = mc_float_threshold(J.siso);
    size_t brows = mc_block_rows(cell_rows, J.nx, threads);
    size_t nblocks = (cell_rows + brows - 1) / brows;
    size_t nwords = J.P / 64 + 2, row_words = (J.nx + 63) / 64;
    uint64_t *bits = mc_alloc(sizeof(uint64_t) * nwords);
    uint64_t *btri = calloc(nblocks + 1, sizeof(uint64_t));
    uint64_t *bact = calloc(nblocks + 1, sizeof(uint64_t));
    uint64_t *voff = indexed ? malloc(sizeof(uint64_t) * lattice_rows) : NULL;
    /* Indexed: per thread 4 rows of (first id + 3 masks) per word. */
    uint64_t *scratch =
        indexed ? malloc(sizeof(uint64_t) * 16 * row_words * (size_t)threads) : NULL;
    pm_status st = PM_STATUS_OK;
    if (!bits || !btri || !bact || (indexed && (!voff || !scratch))) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                       "pm_isosurface: no memory for the %zu-word inside mask", nwords);
        goto done;
    }
    bits[nwords - 1] = bits[nwords - 2] = 0;
    J.bits = bits;
    size_t data_words = (J.P + 63) / 64;

    /* Small volumes run on the calling thread (same blocks, same output):
     * waking a team costs more than the work. */
    int par = J.P >= 32768;

    /* Pass 1 (inside bits), pass 2 (count per block of cell rows and,
     * indexed, owned edge crossings per lattice row). */
#pragma omp parallel num_threads(threads) if (par)
    {
#pragma omp for schedule(static)
        for (size_t q = 0; q < data_words; q += 64) {
            size_t q1 = q + 64 < data_words ? q + 64 : data_words;
            K->bits_words(&J, bits, q, q1);
        }
#pragma omp for schedule(dynamic, 1) nowait
        for (size_t b = 0; b < nblocks; b++) {
            size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
            mc_count_cells(&J, b * brows, r1, &btri[b], &bact[b]);
        }
        if (indexed) {
#pragma omp for schedule(dynamic, 256)
            for (size_t L = 0; L < lattice_rows; L++)
                voff[L] = mc_count_row(&J, L);
        }
    }
    /* Exclusive scans (serial: one entry per block or row). */
    uint64_t ntri = 0, nact = 0, nvert = 0;
    for (size_t b = 0; b < nblocks; b++) {
        uint64_t c = btri[b];
        btri[b] = ntri;
        ntri += c;
        nact += bact[b];
    }
    if (indexed) {
        for (size_t L = 0; L < lattice_rows; L++) {
            uint64_t c = voff[L];
            voff[L] = nvert;
            nvert += c;
        }
        if (nvert > UINT32_MAX) {
            st = pmi_error(PM_STATUS_OVERFLOW,
                           "pm_isosurface: %llu vertices do not fit 32-bit indices",
                           (unsigned long long)nvert);
            goto done;
        }
    } else {
        nvert = 3 * ntri; /* ntri <= 5 * cells, far below 2^64 / 3 */
    }
    mesh->num_vertices = (size_t)nvert;
    mesh->num_triangles = (size_t)ntri;
    mesh->active_cells = nact;
    mesh->in_context_memory = opt->output_in_context_memory ? 1 : 0;

    mc_dest D;
    memset(&D, 0, sizeof D);
    D.indexed = indexed;
    D.voff = voff;
    if (opt->positions) {
        /* Caller's buffers: write what fits, report the full counts. */
        D.positions = opt->positions;
        D.normals = want_normals ? opt->normals_out : NULL;
        D.indices = indexed ? opt->indices : NULL;
        D.vertex_limit = nvert < opt->vertex_capacity ? nvert : opt->vertex_capacity;
        D.tri_limit = ntri < opt->triangle_capacity ? ntri : opt->triangle_capacity;
        if (!indexed && D.tri_limit > D.vertex_limit / 3) D.tri_limit = D.vertex_limit / 3;
        mesh->owns_arrays = 0;
        if (nvert > opt->vertex_capacity || ntri > opt->triangle_capacity)
            st = pmi_error(PM_STATUS_TRUNCATED,
                           "pm_isosurface: %llu vertices / %llu triangles exceed the capacity "
                           "%zu / %zu",
                           (unsigned long long)nvert, (unsigned long long)ntri,
                           opt->vertex_capacity, opt->triangle_capacity);
    } else {
        size_t pb, ib = 0;
        if (!pmi_mul3_size((size_t)nvert, 3, sizeof(float), &pb) ||
            (indexed && !pmi_mul3_size((size_t)ntri, 3, sizeof(uint32_t), &ib))) {
            st = pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: mesh size overflows");
            goto done;
        }
        D.positions = mc_alloc(pb);
        D.normals = want_normals ? mc_alloc(pb) : NULL;
        D.indices = indexed ? mc_alloc(ib) : NULL;
        mesh->owns_arrays = 1;
        mesh->positions = D.positions;
        mesh->normals = D.normals;
        mesh->indices = D.indices;
        if (!D.positions || (want_normals && !D.normals) || (indexed && !D.indices)) {
            pm_mesh_free(ctx, mesh);
            st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                           "pm_isosurface: no memory for %llu vertices / %llu triangles",
                           (unsigned long long)nvert, (unsigned long long)ntri);
            goto done;
        }
        mesh->num_vertices = (size_t)nvert;
        mesh->num_triangles = (size_t)ntri;
        mesh->active_cells = nact;
        mesh->in_context_memory = opt->output_in_context_memory ? 1 : 0;
        D.vertex_limit = nvert;
        D.tri_limit = ntri;
    }
    if (opt->positions) {
        mesh->positions = D.positions;
        mesh->normals = D.normals;
        mesh->indices = D.indices;
    }

    /* Pass 3: vertices (indexed: per lattice row) and triangles. */
    int write_tris = !indexed || D.indices;
#pragma omp parallel num_threads(threads) if (par)
    {
        if (indexed) {
#pragma omp for schedule(dynamic, 64) nowait
            for (size_t L = 0; L < lattice_rows; L++)
                mc_write_row(&J, L, &D, K->vertex);
        }
        if (write_tris) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            mc_rowids R[4];
            for (int q = 0; q < 4 && scratch; q++) {
                R[q].pre = scratch + ((size_t)tid * 16 + 4 * (size_t)q) * row_words;
                R[q].m = R[q].pre + row_words;
            }
#pragma omp for schedule(dynamic, 1)
            for (size_t b = 0; b < nblocks; b++) {
                size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
                mc_write_cells(&J, b * brows, r1, btri[b], &D, K->vertex, R);
            }
        }
    }

done:
    free(bits);
    free(btri);
    free(bact);
    free(voff);
    free(scratch);
    return st;
}
