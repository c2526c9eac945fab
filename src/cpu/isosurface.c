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
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MC_AVX2 1
#else
#define MC_AVX2 0
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
    pm_sample_type type;
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
    void (*bits_row)(const mc_job *, size_t, uint64_t *);
    mc_vertex_fn vertex;
} mc_kernels;

#define MC_KERNELS(s)                                                                              \
    {                                                                                              \
        bits_words_##s, bits_row_##s, vertex_##s                                                               \
    }
static const mc_kernels mc_kernel_table[5] = {MC_KERNELS(u8), MC_KERNELS(u16), MC_KERNELS(i16),
                                              MC_KERNELS(f32), MC_KERNELS(f64)};

/* Sample idx (an element offset from the volume's start) as a double, as
 * the per-type kernels read it. */
static inline double mc_sample(const mc_job *J, size_t idx)
{
    switch (J->type) {
    case PM_SAMPLE_U8: return (double)((const uint8_t *)J->data)[idx];
    case PM_SAMPLE_U16: return (double)((const uint16_t *)J->data)[idx];
    case PM_SAMPLE_I16: return (double)((const int16_t *)J->data)[idx];
    case PM_SAMPLE_F32: return (double)((const float *)J->data)[idx];
    default: return ((const double *)J->data)[idx];
    }
}

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
    if (bytes >= huge / 2) {
        size_t rounded = (bytes + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, rounded);
        if (p) madvise(p, rounded, MADV_HUGEPAGE); /* a hint; failure is harmless */
        return p;
    }
#endif
    return malloc(bytes ? bytes : 1);
}

/* The status of a mesh that does not fit the caller's buffers. */
static pm_status mc_truncated(uint64_t nvert, uint64_t ntri, const pm_isosurface_options *opt)
{
    return pmi_error(PM_STATUS_TRUNCATED,
                     "pm_isosurface: %llu vertices / %llu triangles exceed the capacity %zu / %zu",
                     (unsigned long long)nvert, (unsigned long long)ntri, opt->vertex_capacity,
                     opt->triangle_capacity);
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

static void mc_job_init(mc_job *J, const pm_volume *vol, double iso,
                        const pm_isosurface_options *opt)
{
    memset(J, 0, sizeof *J);
    J->data = vol->data;
    J->nx = vol->nx;
    J->ny = vol->ny;
    J->nz = vol->nz;
    J->rs = vol->row_stride;
    J->ss = vol->slice_stride;
    for (int a = 0; a < 3; a++) {
        J->h[a] = vol->spacing[a];
        J->origin[a] = vol->origin[a];
    }
    J->iso = iso;
    J->sg = opt->inside_above ? -1.0 : 1.0;
    J->siso = J->sg * iso;
    J->normals = opt->normals;
    J->type = vol->type;
    /* The volume's size already fits size_t, so this product does too. */
    J->P = J->nx * J->ny * J->nz;
    J->es = pm_sample_size(vol->type);
    J->fthr = mc_float_threshold(J->siso);
}

static pm_status mc_extract(pm_context *ctx, const pm_volume *vol, double iso,
                            const pm_isosurface_options *opt, pm_mesh *mesh)
{
    mc_job J;
    mc_job_init(&J, vol, iso, opt);
    const mc_kernels *K = &mc_kernel_table[vol->type];
    int indexed = opt->mode == PM_MESH_INDEXED;
    int want_normals = opt->normals != PM_NORMALS_NONE;
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;

    size_t lattice_rows = J.ny * J.nz, cell_rows = (J.ny - 1) * (J.nz - 1);
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
    if (opt->out_positions) {
        /* Caller's buffers: write what fits, report the full counts. */
        D.positions = opt->out_positions;
        D.normals = want_normals ? opt->out_normals : NULL;
        D.indices = indexed ? opt->out_indices : NULL;
        D.vertex_limit = nvert < opt->vertex_capacity ? nvert : opt->vertex_capacity;
        D.tri_limit = ntri < opt->triangle_capacity ? ntri : opt->triangle_capacity;
        if (!indexed && D.tri_limit > D.vertex_limit / 3) D.tri_limit = D.vertex_limit / 3;
        mesh->owns_arrays = 0;
        if (nvert > opt->vertex_capacity || ntri > opt->triangle_capacity)
            st = mc_truncated(nvert, ntri, opt);
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
    if (opt->out_positions) {
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

/* ---- Indexed extraction in one streaming pass over slabs -----------------
 * The two-pass extraction above reads the volume twice: the bit pass streams
 * all of it, and the write pass reads the samples around every crossing
 * again, long after they left the caches. Here each task takes a slab of
 * lattice slices and walks it once, slice by slice: the inside bits of
 * slice k + 2 (row-aligned, in a ring of three slices), the crossing masks
 * and slab-local vertex ids of slice k + 1, the vertices of slice k (their
 * samples, slices k - 1 .. k + 2, are still in cache) and the triangles of
 * cell slice k. Vertices and triangles go to the slab's own arrays with
 * slab-local ids; slice k1 (the next slab's first) is numbered after the
 * slab's own vertices, in the next slab's order. Once every slab is done,
 * an exclusive scan of the slab counts places each slab's arrays in the
 * mesh and adds the vertex base to its indices. The output is the same,
 * bit for bit and in the same order, as mc_extract's. The slab arrays hold
 * the mesh a second time: when they would pass MC_FUSED_BYTES_PER_CELL the
 * call falls back to mc_extract (noise-like volumes). */

#define MC_FUSED_BYTES_PER_CELL 0.75

/* Slab output goes to per-thread pools of chunks (2 MiB, huge pages where
 * the system has them; 64 KiB for volumes under 2^22 cells); a slab's
 * output is a list of segments of its thread's chunks. Growing never
 * copies, and a 2 MiB chunk costs one page fault instead of 512. */
/* Pools and slabs are written at every vertex and triangle by one thread
 * each: aligned to 128 bytes so that two threads never share a line. */
typedef struct mc_pool {
    _Alignas(128) void **chunks;
    size_t nc, cap_c;
    size_t used; /* items used in the last chunk */
} mc_pool;

typedef struct mc_seg {
    void *p;       /* chunk */
    size_t off, n; /* items [off, off + n) of the chunk */
} mc_seg;

typedef struct mc_store {
    mc_seg *s;
    size_t ns, cap_s;
} mc_store;

typedef struct mc_slab {
    _Alignas(128) size_t k0, k1; /* lattice slices [k0, k1) */
    mc_store v, t;  /* vertices (a chunk holds cap positions, then cap normals); triangles */
    uint64_t nv, nt, nact; /* vertices, triangles, active cells */
    int fail; /* 1: no memory or over the budget; 2: ids past 32 bits */
} mc_slab;

/* The context keeps the chunks of its last slab walk (as many as that call
 * used, and one more per pool) for the next call (ctx->backend_state of a CPU context): in a loop
 * over frames they are
 * already mapped and faulted in, where fresh memory would cost a page fault
 * and the zeroing of every page each time. pm_context_destroy frees them. */
typedef struct mc_cache {
    void **chunks;
    size_t n, cap;
    size_t bytes; /* size of every chunk held */
} mc_cache;

/* The cache, on CPU contexts only (backend_state is the CUDA backend's own
 * on CUDA contexts). */
static mc_cache *mc_cache_of(pm_context *ctx)
{
    return ctx->backend == pmi_cpu_backend() ? ctx->backend_state : NULL;
}

static void *mc_chunk_get(pm_context *ctx, size_t bytes)
{
    void *p = NULL;
#pragma omp critical(pm_mc_cache)
    {
        mc_cache *C = mc_cache_of(ctx);
        if (C && C->n && C->bytes == bytes) p = C->chunks[--C->n];
    }
    return p ? p : mc_alloc(bytes);
}

/* Gives the chunks of P back to the context's cache (or frees them). */
static void mc_pool_release(pm_context *ctx, mc_pool *P, size_t bytes)
{
    int cpu = ctx->backend == pmi_cpu_backend();
    mc_cache *C = mc_cache_of(ctx);
    if (!C && cpu) {
        C = calloc(1, sizeof *C);
        ctx->backend_state = C;
    }
    if (C && C->bytes != bytes) {
        for (size_t i = 0; i < C->n; i++)
            free(C->chunks[i]);
        C->n = 0;
        C->bytes = bytes;
    }
    for (size_t i = 0; i < P->nc; i++) {
        if (C && C->n == C->cap) {
            size_t nc = C->cap ? 2 * C->cap : 16;
            void **q = realloc(C->chunks, nc * sizeof *q);
            if (q) {
                C->chunks = q;
                C->cap = nc;
            }
        }
        if (C && C->n < C->cap)
            C->chunks[C->n++] = P->chunks[i];
        else
            free(P->chunks[i]);
    }
    free(P->chunks);
}

void pmi_cpu_isosurface_release(pm_context *ctx)
{
    mc_cache *C = mc_cache_of(ctx);
    if (!C) return;
    for (size_t i = 0; i < C->n; i++)
        free(C->chunks[i]);
    free(C->chunks);
    free(C);
    ctx->backend_state = NULL;
}

/* Per-thread scratch of the slab walk: a ring of 3 slices of inside bits,
 * and for 2 lattice slices the X, Y, Z crossing masks and the slab-local id
 * of the first vertex of every word. */
typedef struct mc_ring {
    uint64_t *bits[3];
    uint64_t *m[2], *pre[2];
    uint64_t end[2]; /* id after the slice's last vertex */
} mc_ring;

typedef struct mc_fused {
    pm_context *ctx;
    const mc_job *J;
    const mc_kernels *K;
    void (*bits_row)(const mc_job *, size_t, uint64_t *);
    int vertex4;     /* use mc_vertex4_central */
    size_t rw, sw;   /* words per row, per slice */
    int normals;     /* compute normals */
    size_t chunk;    /* bytes per output chunk */
    size_t vcap, tcap; /* vertices, triangles per chunk */
    double budget;   /* bytes all slab arrays may hold */
    double used;     /* bytes they hold (atomic) */
} mc_fused;

/* `need` items (of `cap` per chunk) at the end of pool P for store S:
 * returns the chunk and sets *off, or NULL (no memory, over the budget). */
static void *mc_take_slow(mc_fused *F, mc_pool *P, mc_store *S, size_t cap, size_t need,
                          size_t *off)
{
    if (!P->nc || P->used + need > cap) {
        double now;
#pragma omp atomic capture
        now = F->used += (double)F->chunk;
        if (now > F->budget) return NULL;
        if (P->nc == P->cap_c) {
            size_t nc = P->cap_c ? 2 * P->cap_c : 16;
            void **c = realloc(P->chunks, nc * sizeof *c);
            if (!c) return NULL;
            P->chunks = c;
            P->cap_c = nc;
        }
        void *p = mc_chunk_get(F->ctx, F->chunk);
        if (!p) return NULL;
        P->chunks[P->nc++] = p;
        P->used = 0;
    }
    void *c = P->chunks[P->nc - 1];
    mc_seg *g = S->ns ? &S->s[S->ns - 1] : NULL;
    if (!g || g->p != c || g->off + g->n != P->used) {
        if (S->ns == S->cap_s) {
            size_t ns = S->cap_s ? 2 * S->cap_s : 8;
            mc_seg *q = realloc(S->s, ns * sizeof *q);
            if (!q) return NULL;
            S->s = q;
            S->cap_s = ns;
        }
        g = &S->s[S->ns++];
        g->p = c;
        g->off = P->used;
        g->n = 0;
    }
    *off = P->used;
    P->used += need;
    g->n += need;
    return c;
}

/* The common case inline: room in the chunk that the slab's last segment
 * ends in. */
static inline void *mc_take(mc_fused *F, mc_pool *P, mc_store *S, size_t cap, size_t need,
                            size_t *off)
{
    if (S->ns && P->nc && P->used + need <= cap) {
        mc_seg *g = &S->s[S->ns - 1];
        void *c = P->chunks[P->nc - 1];
        if (g->p == c && g->off + g->n == P->used) {
            *off = P->used;
            P->used += need;
            g->n += need;
            return c;
        }
    }
    return mc_take_slow(F, P, S, cap, need, off);
}

#if MC_AVX2
/* bits_row_f32 with 8 compares at a time, for CPUs with AVX2 (picked at
 * run time): the same ordered compares, so the same bits. */
__attribute__((target("avx2"))) static void mc_bits_row_f32_avx2(const mc_job *J, size_t L,
                                                                  uint64_t *out)
{
    const float thr = J->fthr;
    const float *row = (const float *)J->data + (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const __m256 vt = _mm256_set1_ps(J->sg < 0 ? -thr : thr);
    const int above = J->sg < 0;
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        const float *s = row + x;
        uint64_t w = 0;
        if (above)
            for (; t + 8 <= cnt; t += 8)
                w |= (uint64_t)(unsigned)_mm256_movemask_ps(
                         _mm256_cmp_ps(_mm256_loadu_ps(s + t), vt, _CMP_GT_OQ))
                     << t;
        else
            for (; t + 8 <= cnt; t += 8)
                w |= (uint64_t)(unsigned)_mm256_movemask_ps(
                         _mm256_cmp_ps(_mm256_loadu_ps(s + t), vt, _CMP_LT_OQ))
                     << t;
        for (; t < cnt; t++)
            w |= (uint64_t)((float)J->sg * s[t] < thr) << t;
        out[x >> 6] = w;
    }
}

/* Integer samples: sg * v < siso in double is v <= A (inside below iso,
 * A = ceil(iso) - 1) or v >= B (inside above, B = floor(iso) + 1), exact
 * for integers; *none / *all when the bound is outside the type's range. */
static void mc_int_bounds(const mc_job *J, double lo, double hi, int *bound, int *none, int *all)
{
    double b = J->sg > 0 ? ceil(J->iso) - 1.0 : floor(J->iso) + 1.0;
    *none = J->sg > 0 ? b < lo : b > hi;
    *all = J->sg > 0 ? b >= hi : b <= lo;
    *bound = *none || *all ? 0 : (int)b;
}

/* The tail of a row (fewer than a vector): the scalar rule. */
static inline uint64_t mc_bits_tail(const mc_job *J, size_t row, size_t x, size_t t, size_t cnt)
{
    uint64_t w = 0;
    for (; t < cnt; t++)
        w |= (uint64_t)(J->sg * mc_sample(J, row + x + t) < J->siso) << t;
    return w;
}

__attribute__((target("avx2"))) static void mc_bits_row_u8_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const uint8_t *d = (const uint8_t *)J->data + row;
    int bound, none, all;
    mc_int_bounds(J, 0, 255, &bound, &none, &all);
    const __m256i vb = _mm256_set1_epi8((char)(unsigned char)bound);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (none || all) {
            out[x >> 6] = all ? mc_low(cnt) : 0;
            continue;
        }
        for (; t + 32 <= cnt; t += 32) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(d + x + t));
            __m256i m = J->sg > 0 ? _mm256_cmpeq_epi8(_mm256_min_epu8(v, vb), v)
                                  : _mm256_cmpeq_epi8(_mm256_max_epu8(v, vb), v);
            w |= (uint64_t)(uint32_t)_mm256_movemask_epi8(m) << t;
        }
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}

/* 16 compare results (0 / 0xffff per lane) of a and b into 32 bits, in order. */
__attribute__((target("avx2"))) static inline uint32_t mc_mask16x2(__m256i a, __m256i b)
{
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, b), 0xd8);
    return (uint32_t)_mm256_movemask_epi8(p);
}

/* 16-bit samples; i16 is compared as u16 after flipping the sign bit
 * (flip = 0x8000), which keeps the order. */
__attribute__((target("avx2"))) static void mc_bits_row_16_avx2(const mc_job *J, size_t L,
                                                                 uint64_t *out, int is_signed)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const uint16_t *d = (const uint16_t *)J->data + row;
    const unsigned short flip = is_signed ? 0x8000 : 0;
    int bound, none, all;
    mc_int_bounds(J, is_signed ? -32768 : 0, is_signed ? 32767 : 65535, &bound, &none, &all);
    const __m256i vb = _mm256_set1_epi16((short)((unsigned short)bound ^ flip));
    const __m256i vf = _mm256_set1_epi16((short)flip);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (none || all) {
            out[x >> 6] = all ? mc_low(cnt) : 0;
            continue;
        }
        for (; t + 32 <= cnt; t += 32) {
            __m256i m[2];
            for (int h = 0; h < 2; h++) {
                __m256i v = _mm256_xor_si256(
                    _mm256_loadu_si256((const __m256i *)(d + x + t + 16 * h)), vf);
                m[h] = J->sg > 0 ? _mm256_cmpeq_epi16(_mm256_min_epu16(v, vb), v)
                                 : _mm256_cmpeq_epi16(_mm256_max_epu16(v, vb), v);
            }
            w |= (uint64_t)mc_mask16x2(m[0], m[1]) << t;
        }
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}

__attribute__((target("avx2"))) static void mc_bits_row_u16_avx2(const mc_job *J, size_t L,
                                                                  uint64_t *out)
{
    mc_bits_row_16_avx2(J, L, out, 0);
}

__attribute__((target("avx2"))) static void mc_bits_row_i16_avx2(const mc_job *J, size_t L,
                                                                  uint64_t *out)
{
    mc_bits_row_16_avx2(J, L, out, 1);
}

/* f64: sg * v < siso as v < siso or v > -siso (exact negation). */
__attribute__((target("avx2"))) static void mc_bits_row_f64_avx2(const mc_job *J, size_t L,
                                                                  uint64_t *out)
{
    size_t row = (L % J->ny) * J->rs + (L / J->ny) * J->ss;
    const double *d = (const double *)J->data + row;
    const __m256d vt = _mm256_set1_pd(J->sg < 0 ? -J->siso : J->siso);
    for (size_t x = 0; x < J->nx; x += 64) {
        size_t cnt = J->nx - x < 64 ? J->nx - x : 64, t = 0;
        uint64_t w = 0;
        if (J->sg < 0)
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)(unsigned)_mm256_movemask_pd(
                         _mm256_cmp_pd(_mm256_loadu_pd(d + x + t), vt, _CMP_GT_OQ))
                     << t;
        else
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)(unsigned)_mm256_movemask_pd(
                         _mm256_cmp_pd(_mm256_loadu_pd(d + x + t), vt, _CMP_LT_OQ))
                     << t;
        out[x >> 6] = w | mc_bits_tail(J, row, x, t, cnt);
    }
}
#endif

/* Inside bits of lattice slice k into the ring. */
static void mc_ring_bits(const mc_fused *F, mc_ring *R, size_t k)
{
    uint64_t *b = R->bits[k % 3];
    for (size_t j = 0; j < F->J->ny; j++)
        F->bits_row(F->J, k * F->J->ny + j, b + j * F->rw);
}

/* The right neighbours' bits of word w of a row-aligned row. */
static inline uint64_t mc_right(const uint64_t *row, size_t w, size_t rw)
{
    return row[w] >> 1 | (w + 1 < rw ? row[w + 1] << 63 : 0);
}

/* Crossing masks and slab-local first ids of lattice slice k, numbered from
 * *next on; *next is advanced past the slice. 0 when ids pass 32 bits. */
MC_POPCNT static int mc_ring_info(const mc_fused *F, mc_ring *R, size_t k, uint64_t *next)
{
    const mc_job *J = F->J;
    const size_t rw = F->rw;
    const uint64_t *b = R->bits[k % 3], *bz = k + 1 < J->nz ? R->bits[(k + 1) % 3] : NULL;
    uint64_t *m = R->m[k & 1], *pre = R->pre[k & 1], id = *next;
    for (size_t j = 0; j < J->ny; j++) {
        const uint64_t *r = b + j * rw, *ry = j + 1 < J->ny ? r + rw : NULL;
        const uint64_t *rz = bz ? bz + j * rw : NULL;
        for (size_t w = 0; w < rw; w++) {
            uint64_t *mw = m + 3 * (j * rw + w);
            mw[0] = (r[w] ^ mc_right(r, w, rw)) & mc_low(J->nx - 1 - 64 * w);
            mw[1] = ry ? r[w] ^ ry[w] : 0;
            mw[2] = rz ? r[w] ^ rz[w] : 0;
            pre[j * rw + w] = id;
            id += (uint64_t)(mc_popc(mw[0]) + mc_popc(mw[1]) + mc_popc(mw[2]));
        }
    }
    R->end[k & 1] = id;
    *next = id;
    return id <= (uint64_t)UINT32_MAX + 1;
}

/* Whether row j of info slice s has no crossing edge. */
static inline int mc_row_empty(const mc_ring *R, size_t rw, size_t ny, int s, size_t j)
{
    uint64_t end = j + 1 < ny ? R->pre[s][(j + 1) * rw] : R->end[s];
    return end == R->pre[s][j * rw];
}

/* A vertex waiting for the batched kernel: its edge and where it goes. */
typedef struct mc_pending {
    size_t i, j, k;
    int axis;
    float *pos, *nrm;
} mc_pending;

#if MC_AVX2
/* Central-difference samples of the point at element offset c along axis
 * a: the two samples and (ip - im) * h[a], as gradient_central reads and
 * computes them. */
static inline void mc_central_taps(const mc_job *J, size_t c, const size_t p[3], int a, double *hi,
                                   double *lo, double *div)
{
    const size_t n[3] = {J->nx, J->ny, J->nz}, st[3] = {1, J->rs, J->ss};
    size_t ip = p[a] + 1 < n[a] ? p[a] + 1 : p[a];
    size_t im = p[a] > 0 ? p[a] - 1 : 0;
    *hi = mc_sample(J, c + (ip - p[a]) * st[a]);
    *lo = mc_sample(J, c - (p[a] - im) * st[a]);
    *div = (double)(ip - im) * J->h[a];
}

/* vertex() with central normals for 4 vertices at once, any sample type:
 * the same IEEE operations in the same order, 4 lanes wide (division and
 * square root are correctly rounded in both; no fused multiply-add in this
 * target), so the same bits as 4 calls of vertex_<type>. */
__attribute__((target("avx2"))) static void mc_vertex4_central(const mc_job *J,
                                                                const mc_pending *V)
{
    /* 32-byte aligned: whole vectors, whatever the caller's stack. */
    _Alignas(32) double vlo[4], vhi[4], q[3][4], g0h[3][4], g0l[3][4], g0d[3][4], g1h[3][4],
        g1l[3][4], g1d[3][4], tl[4];
    for (int l = 0; l < 4; l++) {
        const mc_pending *v = &V[l];
        size_t st = v->axis == 0 ? 1 : v->axis == 1 ? J->rs : J->ss;
        size_t idx = v->i + v->j * J->rs + v->k * J->ss;
        vlo[l] = mc_sample(J, idx);
        vhi[l] = mc_sample(J, idx + st);
        size_t p0[3] = {v->i, v->j, v->k}, p1[3] = {v->i, v->j, v->k};
        p1[v->axis]++;
        for (int a = 0; a < 3; a++) {
            q[a][l] = (double)p0[a];
            mc_central_taps(J, idx, p0, a, &g0h[a][l], &g0l[a][l], &g0d[a][l]);
            mc_central_taps(J, idx + st, p1, a, &g1h[a][l], &g1l[a][l], &g1d[a][l]);
        }
    }
    const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
    __m256d lo = _mm256_loadu_pd(vlo), hi = _mm256_loadu_pd(vhi);
    __m256d t = _mm256_div_pd(_mm256_sub_pd(_mm256_set1_pd(J->iso), lo), _mm256_sub_pd(hi, lo));
    __m256d ok_t = _mm256_and_pd(_mm256_cmp_pd(t, zero, _CMP_GE_OQ),
                                 _mm256_cmp_pd(t, one, _CMP_LE_OQ));
    t = _mm256_blendv_pd(_mm256_set1_pd(0.5), t, ok_t);
    _mm256_store_pd(tl, t);
    for (int l = 0; l < 4; l++)
        q[V[l].axis][l] = q[V[l].axis][l] + tl[l];
    _Alignas(16) float pf[3][4], nf[3][4];
    __m256d n[3];
    for (int a = 0; a < 3; a++) {
        __m256d qa = _mm256_loadu_pd(q[a]);
        __m256d pa = _mm256_add_pd(_mm256_set1_pd(J->origin[a]),
                                   _mm256_mul_pd(_mm256_set1_pd(J->h[a]), qa));
        _mm_storeu_ps(pf[a], _mm256_cvtpd_ps(pa));
        __m256d g0 = _mm256_div_pd(_mm256_sub_pd(_mm256_loadu_pd(g0h[a]), _mm256_loadu_pd(g0l[a])),
                                   _mm256_loadu_pd(g0d[a]));
        __m256d g1 = _mm256_div_pd(_mm256_sub_pd(_mm256_loadu_pd(g1h[a]), _mm256_loadu_pd(g1l[a])),
                                   _mm256_loadu_pd(g1d[a]));
        __m256d na = _mm256_add_pd(_mm256_mul_pd(_mm256_sub_pd(one, t), g0), _mm256_mul_pd(t, g1));
        n[a] = _mm256_mul_pd(_mm256_set1_pd(J->sg), na);
    }
    __m256d l2 = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(n[0], n[0]), _mm256_mul_pd(n[1], n[1])),
                               _mm256_mul_pd(n[2], n[2]));
    __m256d ok = _mm256_and_pd(_mm256_cmp_pd(l2, zero, _CMP_GT_OQ),
                               _mm256_cmp_pd(l2, _mm256_set1_pd(DBL_MAX), _CMP_LE_OQ));
    __m256d inv = _mm256_div_pd(one, _mm256_sqrt_pd(l2));
    for (int a = 0; a < 3; a++) {
        __m256d m = _mm256_mul_pd(n[a], inv);
        ok = _mm256_and_pd(ok, _mm256_cmp_pd(_mm256_sub_pd(m, m), zero, _CMP_EQ_OQ));
        _mm_storeu_ps(nf[a], _mm256_cvtpd_ps(m));
    }
    int okm = _mm256_movemask_pd(ok);
    for (int l = 0; l < 4; l++) {
        const mc_pending *v = &V[l];
        for (int a = 0; a < 3; a++)
            v->pos[a] = pf[a][l];
        if (okm >> l & 1) {
            for (int a = 0; a < 3; a++)
                v->nrm[a] = nf[a][l];
        } else {
            /* vertex()'s fallback: the edge direction, inside to outside. */
            float sgn = J->sg * vlo[l] < J->siso ? 1.0f : -1.0f;
            v->nrm[0] = v->nrm[1] = v->nrm[2] = 0.0f;
            v->nrm[v->axis] = sgn;
        }
    }
}
#endif

/* The vertices of lattice slice k (in mc_write_row's order). Central
 * normals on AVX2 CPUs go through mc_vertex4_central four at a time. */
static int mc_slab_vertices(mc_fused *F, mc_ring *R, mc_pool *P, mc_slab *S, size_t k)
{
    const mc_job *J = F->J;
    const size_t rw = F->rw;
    const uint64_t *m = R->m[k & 1];
    mc_pending pend[4];
    int np = 0;
    for (size_t j = 0; j < J->ny; j++)
        for (size_t w = 0; w < rw; w++) {
            const uint64_t *mw = m + 3 * (j * rw + w);
            uint64_t any = mw[0] | mw[1] | mw[2];
            while (any) {
                unsigned b = (unsigned)__builtin_ctzll(any);
                any &= any - 1;
                for (int a = 0; a < 3; a++) {
                    if (!(mw[a] >> b & 1)) continue;
                    size_t q;
                    float *p = mc_take(F, P, &S->v, F->vcap, 1, &q);
                    if (!p) return 0;
                    float *pos = p + 3 * q, *nrm = F->normals ? p + 3 * (F->vcap + q) : NULL;
                    S->nv++;
#if MC_AVX2
                    if (F->vertex4) {
                        mc_pending *v = &pend[np++];
                        v->i = 64 * w + b;
                        v->j = j;
                        v->k = k;
                        v->axis = a;
                        v->pos = pos;
                        v->nrm = nrm;
                        if (np == 4) {
                            mc_vertex4_central(J, pend);
                            np = 0;
                        }
                        continue;
                    }
#endif
                    F->K->vertex(J, 64 * w + b, j, k, a, pos, nrm);
                }
            }
        }
    for (int l = 0; l < np; l++)
        F->K->vertex(J, pend[l].i, pend[l].j, pend[l].k, pend[l].axis, pend[l].pos, pend[l].nrm);
    return 1;
}

/* The triangles of cell slice k (k + 1 < nz), in mc_write_cells's order. */
MC_POPCNT static int mc_slab_triangles(mc_fused *F, mc_ring *R, mc_pool *P, mc_slab *S,
                                       size_t k)
{
    const mc_job *J = F->J;
    const size_t rw = F->rw;
    const uint64_t *b0 = R->bits[k % 3], *b1 = R->bits[(k + 1) % 3];
    const int s0 = (int)(k & 1), s1 = (int)((k + 1) & 1);
    for (size_t j = 0; j + 1 < J->ny; j++) {
        /* A mixed cell has a crossing edge, owned by one of its 4 rows. */
        if (mc_row_empty(R, rw, J->ny, s0, j) && mc_row_empty(R, rw, J->ny, s0, j + 1) &&
            mc_row_empty(R, rw, J->ny, s1, j) && mc_row_empty(R, rw, J->ny, s1, j + 1))
            continue;
        const uint64_t *r[4] = {b0 + j * rw, b0 + (j + 1) * rw, b1 + j * rw, b1 + (j + 1) * rw};
        for (size_t w = 0; w < rw; w++) {
            uint64_t c[8];
            for (int q = 0; q < 4; q++) {
                c[q] = r[q][w];
                c[q + 4] = mc_right(r[q], w, rw);
            }
            uint64_t all_in = c[0] & c[1] & c[2] & c[3] & c[4] & c[5] & c[6] & c[7];
            uint64_t any_in = c[0] | c[1] | c[2] | c[3] | c[4] | c[5] | c[6] | c[7];
            uint64_t act = ~all_in & any_in & mc_low(J->nx - 1 - 64 * w);
            S->nact += (uint64_t)mc_popc(act);
            while (act) {
                unsigned bit = (unsigned)__builtin_ctzll(act);
                act &= act - 1;
                unsigned cs = mc_case(c, bit), n = pmi_mc_tri_count[cs];
                const int8_t *tab = pmi_mc_tri_table[cs];
                size_t q;
                uint32_t *out = mc_take(F, P, &S->t, F->tcap, n, &q);
                if (!out) return 0;
                out += 3 * q;
                /* Per lattice row around the cell: the id of the first
                 * vertex of point i and the crossing bits (x, y, z) of
                 * points i and i + 1 (mc_ring_id's rule, once per row
                 * instead of once per corner). */
                uint64_t first[4];
                unsigned at0[4], at1[4];
                uint64_t below = (1ull << bit) - 1;
                for (int r4 = 0; r4 < 4; r4++) {
                    size_t qw = (j + (r4 & 1)) * rw + w;
                    const uint64_t *m = R->m[r4 >> 1 ? s1 : s0] + 3 * qw;
                    first[r4] = R->pre[r4 >> 1 ? s1 : s0][qw] +
                                (uint64_t)(mc_popc(m[0] & below) + mc_popc(m[1] & below) +
                                           mc_popc(m[2] & below));
                    at0[r4] = (unsigned)((m[0] >> bit & 1) | (m[1] >> bit & 1) << 1 |
                                         (m[2] >> bit & 1) << 2);
                    const uint64_t *m1 = bit < 63 ? m : m + 3; /* i + 1 in word w + 1 */
                    unsigned b1 = (bit + 1) & 63;
                    at1[r4] = (unsigned)((m1[0] >> b1 & 1) | (m1[1] >> b1 & 1) << 1 |
                                         (m1[2] >> b1 & 1) << 2);
                }
                for (unsigned v = 0; v < 3 * n; v++) {
                    int e = tab[v], row = mc_edge_row[e];
                    unsigned a = pmi_mc_edge_axis[e], pb = mc_edge_dx[e] ? at1[row] : at0[row];
                    uint64_t id = first[row] + (mc_edge_dx[e] ? mc_popc(at0[row]) : 0) +
                                  mc_popc(pb & ((1u << a) - 1));
                    out[v] = (uint32_t)id;
                }
                S->nt += n;
            }
        }
    }
    return 1;
}

/* Walks slab S: see the comment at the top of this section. */
static void mc_slab_walk(mc_fused *F, mc_ring *R, mc_pool *P, mc_slab *S)
{
    const size_t nz = F->J->nz;
    uint64_t next = 0;
    mc_ring_bits(F, R, S->k0);
    if (S->k0 + 1 < nz) mc_ring_bits(F, R, S->k0 + 1);
    if (!mc_ring_info(F, R, S->k0, &next)) {
        S->fail = 2;
        return;
    }
    for (size_t k = S->k0; k < S->k1; k++) {
        if (k + 2 < nz) mc_ring_bits(F, R, k + 2);
        if (k + 1 < nz && !mc_ring_info(F, R, k + 1, &next)) {
            S->fail = 2;
            return;
        }
        if (!mc_slab_vertices(F, R, &P[0], S, k) ||
            (k + 1 < nz && !mc_slab_triangles(F, R, &P[1], S, k))) {
            S->fail = 1;
            return;
        }
    }
}

/* What the slab walk's placement step hands to the copy step. */
typedef struct mc_place {
    pm_status st;
    int copy; /* 1: copy the slabs into the mesh */
    float *pos, *nrm;
    uint32_t *idx;
    uint64_t vlim, tlim; /* vertices, triangles written below these */
    uint64_t *bases;     /* per slab: first vertex, first triangle */
} mc_place;

/* Totals, the mesh arrays (or the caller's), each slab's bases. Returns
 * PM_STATUS_UNSUPPORTED when a slab passed the memory budget (the caller
 * then runs the two-pass extraction). */
static pm_status mc_fused_place(const mc_fused *F, const mc_slab *S,
                                size_t nslab, const pm_isosurface_options *opt, pm_mesh *mesh,
                                mc_place *PL)
{
    uint64_t nvert = 0, ntri = 0, nact = 0;
    int fail = 0;
    for (size_t s = 0; s < nslab; s++) {
        if (S[s].fail > fail) fail = S[s].fail;
        nvert += S[s].nv;
        ntri += S[s].nt;
        nact += S[s].nact;
    }
    if (fail == 1) return PM_STATUS_UNSUPPORTED;
    if (fail == 2 || nvert > UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: more than 2^32 vertices do not fit "
                                             "32-bit indices");
    PL->bases = malloc(2 * nslab * sizeof(uint64_t));
    if (!PL->bases) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: no memory");
    uint64_t vb = 0, tb = 0;
    for (size_t s = 0; s < nslab; s++) {
        PL->bases[2 * s] = vb;
        PL->bases[2 * s + 1] = tb;
        vb += S[s].nv;
        tb += S[s].nt;
    }
    pm_status st = PM_STATUS_OK;
    if (opt->out_positions) {
        PL->pos = opt->out_positions;
        PL->nrm = F->normals ? opt->out_normals : NULL;
        PL->idx = opt->out_indices;
        PL->vlim = nvert < opt->vertex_capacity ? nvert : opt->vertex_capacity;
        PL->tlim = ntri < opt->triangle_capacity ? ntri : opt->triangle_capacity;
        mesh->owns_arrays = 0;
        if (nvert > opt->vertex_capacity || ntri > opt->triangle_capacity)
            st = mc_truncated(nvert, ntri, opt);
    } else {
        size_t pb, ib;
        if (!pmi_mul3_size((size_t)nvert, 3, sizeof(float), &pb) ||
            !pmi_mul3_size((size_t)ntri, 3, sizeof(uint32_t), &ib))
            return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: mesh size overflows");
        PL->pos = mc_alloc(pb);
        PL->nrm = F->normals ? mc_alloc(pb) : NULL;
        PL->idx = mc_alloc(ib);
        if (!PL->pos || (F->normals && !PL->nrm) || !PL->idx) {
            free(PL->pos);
            free(PL->nrm);
            free(PL->idx);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_isosurface: no memory for %llu vertices / %llu triangles",
                             (unsigned long long)nvert, (unsigned long long)ntri);
        }
        PL->vlim = nvert;
        PL->tlim = ntri;
        mesh->owns_arrays = 1;
    }
    mesh->positions = PL->pos;
    mesh->normals = PL->nrm;
    mesh->indices = PL->idx;
    mesh->num_vertices = (size_t)nvert;
    mesh->num_triangles = (size_t)ntri;
    mesh->active_cells = nact;
    mesh->in_context_memory = opt->output_in_context_memory ? 1 : 0;
    PL->copy = 1;
    return st;
}

/* Slab s into the mesh: vertices at its base, indices plus its base. */
static void mc_fused_copy(const mc_fused *F, const mc_slab *S, const mc_place *PL, size_t s)
{
    uint64_t v0 = PL->bases[2 * s], t0 = PL->bases[2 * s + 1];
    const uint32_t add = (uint32_t)v0;
    for (size_t c = 0; c < S->v.ns && v0 < PL->vlim; c++) {
        const mc_seg *g = &S->v.s[c];
        const float *in = (const float *)g->p + 3 * g->off;
        uint64_t n = g->n < PL->vlim - v0 ? g->n : PL->vlim - v0;
        memcpy(PL->pos + 3 * v0, in, (size_t)n * 3 * sizeof(float));
        if (PL->nrm) memcpy(PL->nrm + 3 * v0, in + 3 * F->vcap, (size_t)n * 3 * sizeof(float));
        v0 += n;
    }
    for (size_t c = 0; PL->idx && c < S->t.ns && t0 < PL->tlim; c++) {
        const mc_seg *g = &S->t.s[c];
        const uint32_t *in = (const uint32_t *)g->p + 3 * g->off;
        uint64_t n = g->n < PL->tlim - t0 ? g->n : PL->tlim - t0;
        uint32_t *o = PL->idx + 3 * t0;
        for (size_t q = 0; q < 3 * (size_t)n; q++)
            o[q] = in[q] + add;
        t0 += n;
    }
}

/* PM_STATUS_UNSUPPORTED: declined (over the memory budget), nothing set;
 * the caller runs mc_extract. */
static pm_status mc_extract_fused(pm_context *ctx, const pm_volume *vol, double iso,
                                  const pm_isosurface_options *opt, pm_mesh *mesh)
{
    mc_job J;
    mc_job_init(&J, vol, iso, opt);
    mc_fused F;
    memset(&F, 0, sizeof F);
    F.ctx = ctx;
    F.J = &J;
    F.K = &mc_kernel_table[vol->type];
    F.bits_row = F.K->bits_row;
#if MC_AVX2
    if (__builtin_cpu_supports("avx2") && !getenv("PYRAMESH_CPU_SCALAR")) {
        static void (*const avx2_bits[5])(const mc_job *, size_t, uint64_t *) = {
            mc_bits_row_u8_avx2, mc_bits_row_u16_avx2, mc_bits_row_i16_avx2,
            mc_bits_row_f32_avx2, mc_bits_row_f64_avx2};
        F.bits_row = avx2_bits[vol->type];
        F.vertex4 = opt->normals == PM_NORMALS_CENTRAL;
    }
#endif
    F.rw = (J.nx + 63) / 64;
    F.sw = F.rw * J.ny;
    F.normals = opt->normals != PM_NORMALS_NONE;
    double cells = (double)(J.nx - 1) * (double)(J.ny - 1) * (double)(J.nz - 1);
    F.chunk = cells >= 4194304.0 ? (size_t)2 << 20 : (size_t)64 << 10;
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    int par = J.P >= 32768 && threads > 1;
    /* Slabs of at least 16 slices (each slab computes the bits of its two
     * following slices again), 4 per thread for balance. */
    size_t nslab = par ? 4 * (size_t)threads : 1;
    if (nslab > J.nz / 16) nslab = J.nz / 16;
    if (nslab < 1) nslab = 1;
    F.budget = MC_FUSED_BYTES_PER_CELL * cells;
    if (F.budget < (double)(4 * nslab * F.chunk)) F.budget = (double)(4 * nslab * F.chunk);
    mc_slab *S = aligned_alloc(128, nslab * sizeof *S);
    if (S) memset(S, 0, nslab * sizeof *S);
    /* Ring scratch per thread: 3 bit slices, 2 x (3 mask + 1 id) slices. */
    size_t per_thread = 11 * F.sw;
    uint64_t *scratch = S ? malloc(sizeof(uint64_t) * per_thread * (size_t)threads) : NULL;
    mc_pool *pools = aligned_alloc(128, 2 * (size_t)threads * sizeof(mc_pool));
    if (pools) memset(pools, 0, 2 * (size_t)threads * sizeof(mc_pool));
    if (!S || !scratch || !pools) {
        free(S);
        free(scratch);
        free(pools);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: no memory for the slab walk");
    }
    for (size_t s = 0; s < nslab; s++) {
        S[s].k0 = J.nz * s / nslab;
        S[s].k1 = J.nz * (s + 1) / nslab;
    }
    F.vcap = F.chunk / ((F.normals ? 6 : 3) * sizeof(float));
    F.tcap = F.chunk / (3 * sizeof(uint32_t));

    mc_place PL;
    memset(&PL, 0, sizeof PL);

#pragma omp parallel num_threads(threads) if (par)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        mc_ring R;
        uint64_t *base = scratch + (size_t)tid * per_thread;
        for (int q = 0; q < 3; q++)
            R.bits[q] = base + (size_t)q * F.sw;
        for (int q = 0; q < 2; q++) {
            R.m[q] = base + (3 + 4 * (size_t)q) * F.sw;
            R.pre[q] = R.m[q] + 3 * F.sw;
        }
#pragma omp for schedule(dynamic, 1)
        for (size_t s = 0; s < nslab; s++)
            mc_slab_walk(&F, &R, pools + 2 * tid, &S[s]);
        /* The calling thread (it owns pm_last_error) sizes the mesh while
         * the others wait at the barrier, spinning: a second parallel
         * region would have to wake them again, which costs milliseconds in
         * a virtual machine. */
#pragma omp master
        PL.st = mc_fused_place(&F, S, nslab, opt, mesh, &PL);
#pragma omp barrier
        if (PL.copy) {
#pragma omp for schedule(dynamic, 1)
            for (size_t s = 0; s < nslab; s++)
                mc_fused_copy(&F, &S[s], &PL, s);
        }
    }
    free(scratch);
    free(PL.bases);
    for (size_t s = 0; s < nslab; s++) {
        free(S[s].v.s);
        free(S[s].t.s);
    }
    size_t used_chunks = 0;
    for (int q = 0; q < 2 * threads; q++) {
        used_chunks += pools[q].nc;
        mc_pool_release(ctx, &pools[q], F.chunk);
    }
    free(pools);
    /* Keep about what this call used: the split of the slabs over the
     * threads changes from call to call, so each pool may need one chunk
     * more next time. */
    mc_cache *C = mc_cache_of(ctx);
    while (C && C->n > used_chunks + 2 * (size_t)threads)
        free(C->chunks[--C->n]);
    free(S);
    return PL.st;
}

/* Indexed meshes: the slab walk, or the two-pass extraction when the walk
 * declines or PYRAMESH_CPU_MC=twopass asks for it (tests compare both). */
static pm_status mc_indexed(pm_context *ctx, const pm_volume *vol, double iso,
                            const pm_isosurface_options *opt, pm_mesh *mesh)
{
    const char *e = getenv("PYRAMESH_CPU_MC");
    if (!(e && strcmp(e, "twopass") == 0)) {
        pm_status st = mc_extract_fused(ctx, vol, iso, opt, mesh);
        if (st != PM_STATUS_UNSUPPORTED) return st;
        pmi_clear_error();
    }
    return mc_extract(ctx, vol, iso, opt, mesh);
}

/* A soup is the indexed mesh expanded: the vertex of a triangle corner is
 * the vertex of its edge, computed by the same rule (bit for bit, tested in
 * test_isosurface). Extracting indexed and then gathering computes each edge
 * once instead of in up to four cells, which makes soups with normals about
 * as cheap as indexed meshes. Extra memory: the indexed mesh, well under the
 * soup itself. */
static pm_status mc_soup_from_indexed(pm_context *ctx, const pm_volume *vol, double iso,
                                      const pm_isosurface_options *opt, pm_mesh *mesh)
{
    pm_isosurface_options io = *opt;
    io.mode = PM_MESH_INDEXED;
    io.out_positions = io.out_normals = NULL;
    io.out_indices = NULL;
    io.vertex_capacity = io.triangle_capacity = 0;
    pm_mesh im;
    memset(&im, 0, sizeof im);
    pm_status st = mc_indexed(ctx, vol, iso, &io, &im);
    if (st != PM_STATUS_OK) {
        pm_mesh_free(ctx, &im);
        return st;
    }
    uint64_t ntri = im.num_triangles, nvert = 3 * ntri;
    int want_normals = opt->normals != PM_NORMALS_NONE;
    float *pos, *nrm;
    uint64_t tri_limit = ntri;
    if (opt->out_positions) {
        pos = opt->out_positions;
        nrm = want_normals ? opt->out_normals : NULL;
        if (tri_limit > opt->triangle_capacity) tri_limit = opt->triangle_capacity;
        if (tri_limit > opt->vertex_capacity / 3) tri_limit = opt->vertex_capacity / 3;
        mesh->owns_arrays = 0;
        if (nvert > opt->vertex_capacity || ntri > opt->triangle_capacity)
            st = mc_truncated(nvert, ntri, opt);
    } else {
        size_t pb;
        if (!pmi_mul3_size((size_t)nvert, 3, sizeof(float), &pb)) {
            pm_mesh_free(ctx, &im);
            return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: mesh size overflows");
        }
        pos = mc_alloc(pb);
        nrm = want_normals ? mc_alloc(pb) : NULL;
        if (!pos || (want_normals && !nrm)) {
            free(pos);
            free(nrm);
            pm_mesh_free(ctx, &im);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_isosurface: no memory for %llu soup vertices",
                             (unsigned long long)nvert);
        }
        mesh->owns_arrays = 1;
    }
    const uint32_t *idx = im.indices;
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (tri_limit > 65536)
    for (size_t c = 0; c < 3 * (size_t)tri_limit; c++) {
        size_t v = idx[c];
        memcpy(pos + 3 * c, im.positions + 3 * v, 3 * sizeof(float));
        if (nrm) memcpy(nrm + 3 * c, im.normals + 3 * v, 3 * sizeof(float));
    }
    mesh->positions = pos;
    mesh->normals = nrm;
    mesh->indices = NULL;
    mesh->num_vertices = (size_t)nvert;
    mesh->num_triangles = (size_t)ntri;
    mesh->active_cells = im.active_cells;
    mesh->in_context_memory = opt->output_in_context_memory ? 1 : 0;
    pm_mesh_free(ctx, &im);
    return st;
}

pm_status pmi_cpu_isosurface(pm_context *ctx, const pm_volume *vol, double iso,
                             const pm_isosurface_options *opt, pm_mesh *mesh)
{
    /* The direct soup writer stays for PYRAMESH_CPU_SOUP=direct (a check of
     * the equivalence, and the lower-memory path). */
    const char *e = getenv("PYRAMESH_CPU_SOUP");
    if (opt->mode == PM_MESH_SOUP && !(e && strcmp(e, "direct") == 0))
        return mc_soup_from_indexed(ctx, vol, iso, opt, mesh);
    if (opt->mode == PM_MESH_INDEXED) return mc_indexed(ctx, vol, iso, opt, mesh);
    return mc_extract(ctx, vol, iso, opt, mesh);
}
