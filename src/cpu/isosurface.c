/* Marching cubes on the CPU (Lorensen and Cline 1987; seed 003), as a
 * blocked two-pass row scan with Flying Edges row trimming (Schroeder,
 * Maynard and Geveci 2015): count per block of cell rows, scan, write. The
 * output is the reference every backend reproduces bit for bit. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/mc_tables.h"
#include "core/util.h"
#include "cpu/cpu.h"

typedef struct mc_job {
    const void *data;
    size_t nx, ny, nz, rs, ss; /* dims, row and slice strides (elements) */
    double h[3], origin[3];
    double iso, sg, siso; /* sg = -1 for inside_above; siso = sg * iso */
    pm_normals normals;
    const uint32_t *trims; /* per lattice row: lo | in0 << 31, hi | inl << 31 */
} mc_job;

typedef struct mc_dest {
    int indexed;
    float *positions, *normals; /* normals NULL when not wanted */
    uint32_t *indices;          /* indexed: NULL when not wanted */
    const uint64_t *voff;       /* indexed: first vertex of each lattice row */
    uint64_t vertex_limit;      /* vertices (indexed) written below this */
    uint64_t tri_limit;         /* triangles written below this */
} mc_dest;

/* Column bits of a cell row (bit 0 row (j,k), 1 (j+1,k), 2 (j,k+1),
 * 3 (j+1,k+1)) as corner bits of the cell on their left (corners 0, 3, 4,
 * 7) and on their right (corners 1, 2, 5, 6). */
static const uint8_t mc_left_bits[16] = {0, 1, 8, 9, 16, 17, 24, 25, 128, 129, 136, 137, 144, 145, 152, 153};
static const uint8_t mc_right_bits[16] = {0, 2, 4, 6, 32, 34, 36, 38, 64, 66, 68, 70, 96, 98, 100, 102};
/* Edge e of cell (i,j,k) is owned by lattice point (i + dx, j + dy, k + dz):
 * mc_edge_dx[e] = dx, mc_edge_row[e] = dy + 2 dz. */
static const uint8_t mc_edge_dx[12] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0};
static const uint8_t mc_edge_row[12] = {0, 0, 1, 0, 2, 2, 3, 2, 0, 0, 1, 1};

#define MC_LO(w) ((size_t)((w) & 0x7fffffffu))

/* Positions [a, b) out of n along rows whose states can differ, given the
 * trims of nr lattice rows: outside [a, b) every row is constant and equal
 * to its first (left) or last (right) sample state, so nothing there can
 * cross unless the rows disagree, in which case the range extends to the
 * end. Returns 0 when nothing can cross. */
static int mc_range(const uint32_t *const *tr, int nr, size_t n, size_t *a, size_t *b)
{
    size_t pa = SIZE_MAX, pb = 0;
    unsigned and0 = 1, or0 = 0, andl = 1, orl = 0;
    int any = 0;
    for (int r = 0; r < nr; r++) {
        size_t lo = MC_LO(tr[r][0]), hi = MC_LO(tr[r][1]);
        unsigned f0 = tr[r][0] >> 31, fl = tr[r][1] >> 31;
        and0 &= f0;
        or0 |= f0;
        andl &= fl;
        orl |= fl;
        if (lo != hi) {
            any = 1;
            if (lo < pa) pa = lo;
            if (hi > pb) pb = hi;
        }
    }
    if (!any) {
        if (and0 == or0) return 0;
        *a = 0;
        *b = n;
        return 1;
    }
    *a = and0 == or0 ? pa : 0;
    *b = andl == orl ? pb : n;
    return 1;
}

/* Cells of cell row (j,k) that can be active. */
static inline int mc_cell_range(const mc_job *J, size_t j, size_t k, size_t *a, size_t *b)
{
    size_t L = j + k * J->ny;
    const uint32_t *tr[4] = {J->trims + 2 * L, J->trims + 2 * (L + 1),
                             J->trims + 2 * (L + J->ny), J->trims + 2 * (L + J->ny + 1)};
    return mc_range(tr, 4, J->nx - 1, a, b);
}

/* Points of lattice row (j,k) whose owned edges can cross. */
static inline int mc_point_range(const mc_job *J, size_t j, size_t k, size_t *a, size_t *b)
{
    size_t L = j + k * J->ny;
    const uint32_t *tr[3];
    int nr = 0;
    tr[nr++] = J->trims + 2 * L;
    if (j + 1 < J->ny) tr[nr++] = J->trims + 2 * (L + 1);
    if (k + 1 < J->nz) tr[nr++] = J->trims + 2 * (L + J->ny);
    return mc_range(tr, nr, J->nx, a, b);
}

#define MC_T uint8_t
#define MC_SUF u8
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
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T double
#define MC_SUF f64
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF

typedef struct mc_kernels {
    void (*trim_row)(const mc_job *, size_t, uint32_t *);
    void (*count_cells)(const mc_job *, size_t, size_t, uint64_t *, uint64_t *);
    uint64_t (*row_edges)(const mc_job *, size_t, uint64_t, const mc_dest *, uint32_t *,
                          size_t);
    void (*write_cells)(const mc_job *, size_t, size_t, uint64_t, const mc_dest *, uint32_t *);
} mc_kernels;

#define MC_KERNELS(s) {trim_row_##s, count_cells_##s, row_edges_##s, write_cells_##s}
static const mc_kernels mc_kernel_table[5] = {MC_KERNELS(u8), MC_KERNELS(u16), MC_KERNELS(i16),
                                              MC_KERNELS(f32), MC_KERNELS(f64)};

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
    if (vol->nx - 1 > 0x7fffffffu)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface: nx %zu exceeds 2^31 samples per row (CPU backend)",
                         vol->nx);
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
    size_t brows = mc_block_rows(cell_rows, J.nx, threads);
    size_t nblocks = (cell_rows + brows - 1) / brows;
    uint32_t *trims = malloc(2 * sizeof(uint32_t) * lattice_rows);
    uint64_t *btri = calloc(nblocks + 1, sizeof(uint64_t));
    uint64_t *bact = calloc(nblocks + 1, sizeof(uint64_t));
    uint64_t *voff = indexed ? malloc(sizeof(uint64_t) * lattice_rows) : NULL;
    uint32_t *scratch = NULL;
    size_t scratch_per = 0;
    if (indexed && !pmi_mul3_size(J.nx, 12, (size_t)threads, &scratch_per)) scratch_per = 0;
    if (indexed && scratch_per) scratch = malloc(scratch_per * sizeof(uint32_t));
    pm_status st = PM_STATUS_OK;
    if (!trims || !btri || !bact || (indexed && (!voff || !scratch))) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: no memory for %zu row records",
                       lattice_rows);
        goto done;
    }
    J.trims = trims;

    /* Small volumes run on the calling thread (same blocks, same output):
     * waking a team costs more than the work. */
    int par = (J.nx - 1) * cell_rows >= 32768;

    /* Pass 1 (trim every lattice row), pass 2 (count per block of cell rows
     * and, indexed, owned edge crossings per lattice row). */
#pragma omp parallel num_threads(threads) if (par)
    {
#pragma omp for schedule(dynamic, 64)
        for (size_t L = 0; L < lattice_rows; L++) K->trim_row(&J, L, trims + 2 * L);
#pragma omp for schedule(dynamic, 1) nowait
        for (size_t b = 0; b < nblocks; b++) {
            size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
            K->count_cells(&J, b * brows, r1, &btri[b], &bact[b]);
        }
        if (indexed) {
#pragma omp for schedule(dynamic, 64)
            for (size_t L = 0; L < lattice_rows; L++)
                voff[L] = K->row_edges(&J, L, 0, NULL, NULL, 0);
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
        D.positions = malloc(pb ? pb : 1);
        D.normals = want_normals ? malloc(pb ? pb : 1) : NULL;
        D.indices = indexed ? malloc(ib ? ib : 1) : NULL;
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
            for (size_t L = 0; L < lattice_rows; L++) K->row_edges(&J, L, voff[L], &D, NULL, 0);
        }
        if (write_tris) {
            int tid = 0;
#ifdef _OPENMP
            tid = omp_get_thread_num();
#endif
            uint32_t *mine = scratch ? scratch + (size_t)tid * 12 * J.nx : NULL;
#pragma omp for schedule(dynamic, 1)
            for (size_t b = 0; b < nblocks; b++) {
                size_t r1 = (b + 1) * brows < cell_rows ? (b + 1) * brows : cell_rows;
                K->write_cells(&J, b * brows, r1, btri[b], &D, mine);
            }
        }
    }

done:
    free(trims);
    free(btri);
    free(bact);
    free(voff);
    free(scratch);
    return st;
}
