/* Marching cubes (Lorensen and Cline 1987) on one piece of a global
 * lattice: the vertices of the edges a box of points owns and the
 * triangles of the cells it owns, named by global keys, so that pieces
 * computed anywhere merge into pm_isosurface's mesh (docs/scale.md). The
 * arithmetic is core/mc_math.h's, evaluated at global lattice indices with
 * the global border rules, so every byte equals the whole-volume
 * extraction's (docs/isosurface.md). */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/mc_math.h"
#include "core/mc_tables.h"
#include "core/sparse.h"
#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/isosurface_internal.h"
#include "cpu/sparse.h"

#define ALWAYS static inline __attribute__((always_inline))

/* Growable arrays of the piece being built. */
typedef struct piece_buf {
    pm_mesh_piece *P;
    uint64_t vcap, tcap;
    int normals, failed;
} piece_buf;

static int grow_vertices(piece_buf *b)
{
    pm_mesh_piece *P = b->P;
    uint64_t cap = b->vcap ? 2 * b->vcap : 256;
    uint64_t *k = realloc(P->vertex_keys, cap * sizeof *k);
    if (k) P->vertex_keys = k;
    float *p = k ? realloc(P->positions, cap * 3 * sizeof *p) : NULL;
    if (p) P->positions = p;
    float *n = NULL;
    if (p && b->normals && (n = realloc(P->normals, cap * 3 * sizeof *n))) P->normals = n;
    if (!k || !p || (b->normals && !n)) return 0;
    b->vcap = cap;
    return 1;
}

static int grow_triangles(piece_buf *b)
{
    pm_mesh_piece *P = b->P;
    uint64_t cap = b->tcap ? 2 * b->tcap : 512;
    uint64_t *t = realloc(P->triangles, cap * 3 * sizeof *t);
    if (t) P->triangles = t;
    uint64_t *c = t ? realloc(P->cell_keys, cap * sizeof *c) : NULL;
    if (c) P->cell_keys = c;
    if (!t || !c) return 0;
    b->tcap = cap;
    return 1;
}

/* A sample of the window as a double (t folds to one load when inlined). */
ALWAYS double ld(const pmi_piece_job *J, pm_sample_type t, size_t idx)
{
    switch (t) {
    case PM_SAMPLE_U8: return (double)((const uint8_t *)J->data)[idx];
    case PM_SAMPLE_U16: return (double)((const uint16_t *)J->data)[idx];
    case PM_SAMPLE_I16: return (double)((const int16_t *)J->data)[idx];
    case PM_SAMPLE_F32: return (double)((const float *)J->data)[idx];
    default: return ((const double *)J->data)[idx];
    }
}

/* Window offset of global point g. */
ALWAYS size_t at(const pmi_piece_job *J, const uint64_t g[3])
{
    return (size_t)(g[0] - J->wlo[0]) + (size_t)(g[1] - J->wlo[1]) * J->rs +
           (size_t)(g[2] - J->wlo[2]) * J->ss;
}

/* The gradient at global point p: isosurface_kernel.h's gradient with the
 * lattice's dims as the border (the ghost rule puts every point it reads
 * in the window). */
ALWAYS void gradient(const pmi_piece_job *J, pm_sample_type ty, const uint64_t p[3], double g[3])
{
    const uint64_t *n = J->N;
    for (int a = 0; a < 3; a++) {
        uint64_t ip = PMI_MC_DIFF_HI(p[a], n[a]);
        uint64_t im = J->normals == PM_NORMALS_FORWARD ? PMI_MC_DIFF_LO_FORWARD(p[a], n[a])
                                                       : PMI_MC_DIFF_LO_CENTRAL(p[a]);
        if (J->normals != PM_NORMALS_SOBEL) {
            uint64_t qp[3] = {p[0], p[1], p[2]}, qm[3] = {p[0], p[1], p[2]};
            qp[a] = ip;
            qm[a] = im;
            g[a] =
                pmi_mc_diff(ld(J, ty, at(J, qp)), ld(J, ty, at(J, qm)), (double)(ip - im), J->h[a]);
            continue;
        }
        int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
        double s = 0.0;
        for (int dc = -1; dc <= 1; dc++) {
            uint64_t qc = PMI_MC_SOBEL_STEP(p[c], dc, n[c]);
            for (int db = -1; db <= 1; db++) {
                uint64_t qb = PMI_MC_SOBEL_STEP(p[b], db, n[b]);
                uint64_t qp[3], qm[3];
                qp[a] = ip;
                qm[a] = im;
                qp[b] = qm[b] = qb;
                qp[c] = qm[c] = qc;
                s = pmi_mc_sobel_add(s, db, dc, ld(J, ty, at(J, qp)), ld(J, ty, at(J, qm)));
            }
        }
        g[a] = pmi_mc_sobel_grad(s, (double)(ip - im), J->h[a]);
    }
}

/* The vertex on the edge from global point p along axis. */
ALWAYS void vertex(const pmi_piece_job *J, pm_sample_type ty, const uint64_t p[3], int axis,
                   float *pos, float *nrm)
{
    uint64_t q[3] = {p[0], p[1], p[2]};
    q[axis]++;
    double vlo = ld(J, ty, at(J, p)), vhi = ld(J, ty, at(J, q));
    double t = pmi_mc_edge_t(J->iso, vlo, vhi);
    pmi_mc_position(J->origin, J->h, (long long)p[0], (long long)p[1], (long long)p[2], axis, t,
                    pos);
    if (!nrm) return;
    double g0[3], g1[3];
    gradient(J, ty, p, g0);
    gradient(J, ty, q, g1);
    pmi_mc_normal(t, J->sg, J->siso, vlo, axis, g0, g1, nrm);
}

/* The inside bits of the cnt <= 64 samples from window offset idx (bit t
 * for sample idx + t). f32 compares four floats at a time against
 * pmi_mc_float_threshold, the predicate of pmi_mc_inside for floats
 * (docs/isosurface.md), as the whole-volume kernels do. */
ALWAYS uint64_t inside_bits(const pmi_piece_job *J, pm_sample_type ty, size_t idx, size_t cnt)
{
    uint64_t w = 0;
    size_t t = 0;
#if defined(__SSE2__)
    if (ty == PM_SAMPLE_F32) {
        const float *s = (const float *)J->data + idx;
        const __m128 vt = _mm_set1_ps(J->sg < 0 ? -J->fthr : J->fthr);
        if (J->sg < 0)
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_loadu_ps(s + t), vt)) << t;
        else
            for (; t + 4 <= cnt; t += 4)
                w |= (uint64_t)_mm_movemask_ps(_mm_cmplt_ps(_mm_loadu_ps(s + t), vt)) << t;
    }
#endif
    for (; t < cnt; t++)
        w |= (uint64_t)pmi_mc_inside(J->sg, J->siso, ld(J, ty, idx + t)) << t;
    return w;
}

/* The walk, for one sample type: inside bits of the points [o0, e1)
 * (owned points and the +1 layer where the lattice has it), then per
 * owned slice the vertices of its points and the triangles of its cells,
 * both in ascending key. */
ALWAYS int extract(const pmi_piece_job *J, pm_sample_type ty, piece_buf *pb, uint64_t *bits)
{
    pm_mesh_piece *P = pb->P;
    const uint64_t *o0 = J->olo, *N = J->N;
    uint64_t own[3], ext[3];
    for (int a = 0; a < 3; a++) {
        own[a] = J->odims[a];
        ext[a] = own[a] + (o0[a] + own[a] < N[a] ? 1 : 0);
    }
    const size_t rw = (size_t)(ext[0] + 63) / 64, sw = rw * (size_t)ext[1];
    /* Inside bits: bit i of row (j, k) = point o0 + (i, j, k). */
    for (uint64_t k = 0; k < ext[2]; k++)
        for (uint64_t j = 0; j < ext[1]; j++) {
            uint64_t *row = bits + k * sw + j * rw;
            uint64_t g[3] = {o0[0], o0[1] + j, o0[2] + k};
            size_t base = at(J, g);
            for (size_t w = 0; w < rw; w++) {
                size_t i0 = 64 * w, i1 = i0 + 64 < ext[0] ? i0 + 64 : (size_t)ext[0];
                row[w] = inside_bits(J, ty, base + i0, i1 - i0);
            }
        }
    const uint64_t N0 = N[0], N1 = N[1];
    for (uint64_t k = 0; k < own[2]; k++) {
        const uint64_t gk = o0[2] + k;
        /* Vertices of slice k: point (i, j) owns its +x, +y, +z edges. */
        for (uint64_t j = 0; j < own[1]; j++) {
            const uint64_t *r = bits + k * sw + j * rw;
            const uint64_t *ry = j + 1 < ext[1] ? r + rw : NULL;
            const uint64_t *rz = k + 1 < ext[2] ? r + sw : NULL;
            for (size_t w = 0; w < rw; w++) {
                uint64_t right = r[w] >> 1 | (w + 1 < rw ? r[w + 1] << 63 : 0);
                uint64_t m[3];
                m[0] = (r[w] ^ right) & mc_low((size_t)(ext[0] - 1 - 64 * w));
                m[1] = ry ? r[w] ^ ry[w] : 0;
                m[2] = rz ? r[w] ^ rz[w] : 0;
                uint64_t mine = mc_low((size_t)(own[0] - 64 * w));
                if (64 * w >= own[0]) mine = 0;
                uint64_t any = (m[0] | m[1] | m[2]) & mine;
                while (any) {
                    unsigned b = (unsigned)__builtin_ctzll(any);
                    any &= any - 1;
                    const uint64_t p[3] = {o0[0] + 64 * w + b, o0[1] + j, gk};
                    for (int a = 0; a < 3; a++) {
                        if (!(m[a] >> b & 1)) continue;
                        if (P->num_vertices == pb->vcap && !grow_vertices(pb)) return 0;
                        uint64_t v = P->num_vertices++;
                        P->vertex_keys[v] = 3 * (p[0] + N0 * (p[1] + N1 * p[2])) + (uint64_t)a;
                        vertex(J, ty, p, a, P->positions + 3 * v,
                               pb->normals ? P->normals + 3 * v : NULL);
                    }
                }
            }
        }
        /* Triangles of cell slice k. */
        if (k + 1 >= ext[2]) continue;
        for (uint64_t j = 0; j < own[1] && j + 1 < ext[1]; j++) {
            const uint64_t *r4[4] = {bits + k * sw + j * rw, bits + k * sw + (j + 1) * rw,
                                     bits + (k + 1) * sw + j * rw,
                                     bits + (k + 1) * sw + (j + 1) * rw};
            for (size_t w = 0; w < rw; w++) {
                if (64 * w >= own[0]) break;
                uint64_t c[8];
                for (int q = 0; q < 4; q++) {
                    c[q] = r4[q][w];
                    c[q + 4] = r4[q][w] >> 1 | (w + 1 < rw ? r4[q][w + 1] << 63 : 0);
                }
                uint64_t all_in = c[0] & c[1] & c[2] & c[3] & c[4] & c[5] & c[6] & c[7];
                uint64_t any_in = c[0] | c[1] | c[2] | c[3] | c[4] | c[5] | c[6] | c[7];
                /* Cells i with i + 1 inside the extent, owned. */
                uint64_t act = ~all_in & any_in & mc_low((size_t)(ext[0] - 1 - 64 * w)) &
                               mc_low((size_t)(own[0] - 64 * w));
                while (act) {
                    unsigned bit = (unsigned)__builtin_ctzll(act);
                    act &= act - 1;
                    P->active_cells++;
                    unsigned cs = mc_case(c, bit), n = pmi_mc_tri_count[cs];
                    const int8_t *tab = pmi_mc_tri_table[cs];
                    const uint64_t gi = o0[0] + 64 * w + bit, gj = o0[1] + j;
                    const uint64_t ckey = gi + (N0 - 1) * (gj + (N1 - 1) * gk);
                    for (unsigned t = 0; t < n; t++) {
                        if (P->num_triangles == pb->tcap && !grow_triangles(pb)) return 0;
                        uint64_t tt = P->num_triangles++;
                        P->cell_keys[tt] = ckey;
                        for (int v = 0; v < 3; v++) {
                            int e = tab[3 * t + (unsigned)v], row = pmi_mc_edge_row[e];
                            uint64_t pi = gi + pmi_mc_edge_dx[e], pj = gj + (uint64_t)(row & 1),
                                     pk = gk + (uint64_t)(row >> 1);
                            P->triangles[3 * tt + (uint64_t)v] =
                                3 * (pi + N0 * (pj + N1 * pk)) + pmi_mc_edge_axis[e];
                        }
                    }
                }
            }
        }
    }
    return 1;
}

static int extract_u8(const pmi_piece_job *J, piece_buf *b, uint64_t *bits)
{
    return extract(J, PM_SAMPLE_U8, b, bits);
}
static int extract_u16(const pmi_piece_job *J, piece_buf *b, uint64_t *bits)
{
    return extract(J, PM_SAMPLE_U16, b, bits);
}
static int extract_i16(const pmi_piece_job *J, piece_buf *b, uint64_t *bits)
{
    return extract(J, PM_SAMPLE_I16, b, bits);
}
static int extract_f32(const pmi_piece_job *J, piece_buf *b, uint64_t *bits)
{
    return extract(J, PM_SAMPLE_F32, b, bits);
}
static int extract_f64(const pmi_piece_job *J, piece_buf *b, uint64_t *bits)
{
    return extract(J, PM_SAMPLE_F64, b, bits);
}

size_t pmi_piece_bits_words(const pmi_piece_job *J)
{
    size_t w = 1;
    for (int a = 0; a < 3; a++) {
        uint64_t e = J->odims[a] + (J->olo[a] + J->odims[a] < J->N[a] ? 1 : 0);
        w *= a == 0 ? (size_t)(e + 63) / 64 : (size_t)e;
    }
    return w ? w : 1;
}

pm_status pmi_piece_extract(const pmi_piece_job *J, uint64_t *bits, pm_mesh_piece *out)
{
    memset(out, 0, sizeof *out);
    for (int a = 0; a < 3; a++) {
        out->lattice_dims[a] = J->N[a];
        out->owned.lo[a] = J->olo[a];
        out->owned.dims[a] = J->odims[a];
    }
    if (!J->odims[0] || !J->odims[1] || !J->odims[2]) return PM_STATUS_OK;
    piece_buf b = {out, 0, 0, J->normals != PM_NORMALS_NONE, 0};
    static int (*const fn[5])(const pmi_piece_job *, piece_buf *, uint64_t *) = {
        extract_u8, extract_u16, extract_i16, extract_f32, extract_f64};
    if (!fn[J->type](J, &b, bits)) {
        pm_mesh_piece_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface_piece: no memory for the piece of the box at (%llu, %llu, "
                         "%llu)",
                         (unsigned long long)J->olo[0], (unsigned long long)J->olo[1],
                         (unsigned long long)J->olo[2]);
    }
    return PM_STATUS_OK;
}

pm_status pmi_cpu_isosurface_piece(pm_context *ctx, const pm_volume *window,
                                   const uint64_t window_lo[3], const pm_lattice *lattice,
                                   const pm_lattice_box *owned, double iso,
                                   const pm_isosurface_options *options, pm_mesh_piece *piece)
{
    (void)ctx;
    pmi_piece_job J;
    pmi_piece_job_init(&J, window, window_lo, lattice, owned, iso, options);
    size_t words = pmi_piece_bits_words(&J);
    uint64_t *bits = malloc(words * sizeof *bits);
    if (!bits)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface_piece: no memory (%zu words)",
                         words);
    pm_status st = pmi_piece_extract(&J, bits, piece);
    free(bits);
    return st;
}

void pmi_piece_job_init(pmi_piece_job *J, const pm_volume *window, const uint64_t window_lo[3],
                        const pm_lattice *lattice, const pm_lattice_box *owned, double iso,
                        const pm_isosurface_options *options)
{
    memset(J, 0, sizeof *J);
    J->data = window->data;
    J->type = window->type;
    J->rs = window->row_stride;
    J->ss = window->slice_stride;
    for (int a = 0; a < 3; a++) {
        J->wlo[a] = window_lo[a];
        J->origin[a] = lattice->origin[a];
        J->h[a] = lattice->spacing[a];
        J->N[a] = lattice->dims[a];
        J->olo[a] = owned->lo[a];
        J->odims[a] = owned->dims[a];
    }
    J->iso = iso;
    J->sg = options->inside == PM_INSIDE_BELOW ? 1.0 : -1.0;
    J->siso = J->sg * iso;
    J->fthr = pmi_mc_float_threshold(J->siso);
    J->normals = options->normals;
}
