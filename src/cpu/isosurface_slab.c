/* Marching cubes (Lorensen and Cline 1987) on the CPU in one streaming
 * pass over slabs of lattice slices: the default extraction of indexed
 * meshes (soups are gathered from them, see isosurface.c).
 *
 * The two-pass extraction (isosurface_twopass.c) reads the volume twice:
 * the bit pass streams all of it, and the write pass reads the samples
 * around every crossing again, long after they left the caches. Here each
 * task takes a slab of lattice slices and walks it once, slice by slice:
 * the inside bits of slice k + 2 (row-aligned, in a ring of three slices),
 * the crossing masks and slab-local vertex ids of slice k + 1, the vertices
 * of slice k (their samples, slices k - 1 .. k + 2, are still in cache) and
 * the triangles of cell slice k. Vertices and triangles go to the slab's
 * own arrays with slab-local ids; slice k1 (the next slab's first) is
 * numbered after the slab's own vertices, in the next slab's order. Once
 * every slab is done, an exclusive scan of the slab counts places each
 * slab's arrays in the mesh and adds the vertex base to its indices. The
 * output is the same, bit for bit and in the same order, as the two-pass
 * extraction's. The slab arrays hold the mesh a second time: when they
 * would pass MC_SLAB_BYTES_PER_CELL bytes per cell (noise-like volumes,
 * with far more crossings than a surface has) or cannot be allocated, the
 * walk declines and the caller runs the two-pass extraction.
 * pmi_mc_slab_append runs the same walk on slices [k0, k1) of a volume
 * streamed from a file (isosurface_stream.c), numbered after what the
 * output already holds. */
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/mc_tables.h"
#include "core/mesh_out.h"
#include "core/util.h"
#include "cpu/isosurface_internal.h"
#include "cpu/isosurface_stream.h"

#define MC_SLAB_BYTES_PER_CELL 0.75

/* Slab output goes to per-thread pools of chunks (2 MiB, huge pages where
 * the system has them; 64 KiB for volumes under 2^22 cells); a slab's
 * output is a list of segments of its thread's chunks. Growing never
 * copies, and a 2 MiB chunk costs one page fault instead of 512. Pools and
 * slabs are written at every vertex and triangle by one thread each:
 * aligned to 128 bytes so that two threads never share a line. */
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

/* How a slab's walk ended, from the best to the worst (ordered). */
typedef enum mc_slab_end {
    MC_SLAB_DONE,
    MC_SLAB_NO_ROOM,       /* no memory, or over the budget: the walk declines */
    MC_SLAB_INDEX_OVERFLOW /* vertex ids past 32 bits: the call fails */
} mc_slab_end;

typedef struct mc_slab {
    _Alignas(128) size_t k0, k1; /* lattice slices [k0, k1) */
    mc_store v, t;         /* vertices (a chunk holds cap positions, then cap normals); triangles */
    uint64_t nv, nt, nact; /* vertices, triangles, active cells */
    mc_slab_end end;
} mc_slab;

/* The context keeps the chunks of its last slab walk (as many as that call
 * used, and one more per pool) for the next call, in the CPU backend's
 * ctx->backend_state: in a loop over frames they are already mapped and
 * faulted in, where fresh memory would cost a page fault and the zeroing
 * of every page each time. pm_context_destroy frees them. */
typedef struct mc_cache {
    void **chunks;
    size_t n, cap;
    size_t bytes; /* size of every chunk held */
} mc_cache;

static void *mc_chunk_get(pm_context *ctx, size_t bytes)
{
    void *p = NULL;
    /* Unnamed: a named critical section is an exported symbol. */
#pragma omp critical
    {
        mc_cache *C = ctx->backend_state;
        if (C && C->n && C->bytes == bytes) p = C->chunks[--C->n];
    }
    return p ? p : pmi_alloc_huge(bytes);
}

/* Gives the chunks of P back to the context's cache (or frees them). */
static void mc_pool_release(pm_context *ctx, mc_pool *P, size_t bytes)
{
    mc_cache *C = ctx->backend_state;
    if (!C) {
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
    mc_cache *C = ctx->backend_state;
    if (!C) return;
    for (size_t i = 0; i < C->n; i++)
        free(C->chunks[i]);
    free(C->chunks);
    free(C);
    ctx->backend_state = NULL;
}

/* Per-thread scratch of the slab walk: a ring of 3 slices of inside bits,
 * and for 2 lattice slices the X, Y, Z crossing masks and the slab-local id
 * of the first vertex of every word; and for the triangles, the vertex ids
 * of the 4 lattice rows around a cell row (mc_edge_ids). */
typedef struct mc_ring {
    uint64_t *bits[3];
    uint64_t *m[2], *pre[2];
    uint64_t end[2];                   /* id after the slice's last vertex */
    uint32_t *ids;                     /* 4 slots of 3 axes of ids_row ids */
    size_t ids_row;                    /* ids per axis and slot: nx */
    size_t slot_row[4], slot_slice[4]; /* what each slot holds (SIZE_MAX: nothing) */
} mc_ring;

/* One slab walk: the job, its kernels and its memory budget. */
typedef struct mc_walk {
    pm_context *ctx;
    mc_job J;
    const mc_kernels *K;
    mc_bits_row_fn bits_row;
    mc_vertex8_fn vertex8; /* central normals: 8 vertices at a time */
    size_t rw, sw;         /* words per row, per slice */
    int normals;           /* compute normals */
    size_t chunk;          /* bytes per output chunk */
    size_t vcap, tcap;     /* vertices, triangles per chunk */
    double budget;         /* bytes all slab arrays may hold */
    double used;           /* bytes they hold (atomic) */
    int threads, par;
    size_t nslab;
} mc_walk;

/* `need` items (of `cap` per chunk) at the end of pool P for store S:
 * returns the chunk and sets *off, or NULL (no memory, over the budget). */
static void *mc_take_slow(mc_walk *F, mc_pool *P, mc_store *S, size_t cap, size_t need, size_t *off)
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
static inline void *mc_take(mc_walk *F, mc_pool *P, mc_store *S, size_t cap, size_t need,
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

/* Inside bits of lattice slice k into the ring. */
static void mc_ring_bits(const mc_walk *F, mc_ring *R, size_t k)
{
    uint64_t *b = R->bits[k % 3];
    for (size_t j = 0; j < F->J.ny; j++)
        F->bits_row(&F->J, k * F->J.ny + j, b + j * F->rw);
}

/* The right neighbours' bits of word w of a row-aligned row. */
static inline uint64_t mc_right(const uint64_t *row, size_t w, size_t rw)
{
    return row[w] >> 1 | (w + 1 < rw ? row[w + 1] << 63 : 0);
}

/* Crossing masks and slab-local first ids of lattice slice k, numbered from
 * *next on; *next is advanced past the slice. 0 when ids pass 32 bits. */
MC_POPCNT static int mc_ring_info(const mc_walk *F, mc_ring *R, size_t k, uint64_t *next)
{
    const mc_job *J = &F->J;
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

/* The vertices of lattice slice k (in the two-pass extraction's order).
 * Central normals go through a vertex8 kernel eight at a time. */
static int mc_slab_vertices(mc_walk *F, mc_ring *R, mc_pool *P, mc_slab *S, size_t k)
{
    const mc_job *J = &F->J;
    const size_t rw = F->rw;
    const uint64_t *m = R->m[k & 1];
    mc_pending pend[8];
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
                    if (F->vertex8) {
                        mc_pend(J, F->vertex8, pend, &np, 64 * w + b, j, k, a, pos, nrm);
                        continue;
                    }
                    F->K->vertex(J, 64 * w + b, j, k, a, pos, nrm);
                }
            }
        }
    for (int l = 0; l < np; l++)
        F->K->vertex(J, pend[l].i, pend[l].j, pend[l].k, pend[l].axis, pend[l].pos, pend[l].nrm);
    return 1;
}

/* The vertex ids of lattice row j of slice k (info slice s) into slot q:
 * ids[(3 q + a) ids_row + i] is the id of the `axis a` edge of point i,
 * written for the crossing edges only (the only ones a triangle uses), in
 * the order the ids were counted (by point, then x, y, z edge). */
static void mc_edge_ids(const mc_walk *F, mc_ring *R, int s, size_t j, size_t k, int q)
{
    const size_t rw = F->rw;
    if (R->slot_row[q] == j && R->slot_slice[q] == k) return;
    R->slot_row[q] = j;
    R->slot_slice[q] = k;
    uint32_t *ids = R->ids + 3 * (size_t)q * R->ids_row;
    uint64_t id = R->pre[s][j * rw];
    for (size_t w = 0; w < rw; w++) {
        const uint64_t *m = R->m[s] + 3 * (j * rw + w);
        uint64_t any = m[0] | m[1] | m[2];
        while (any) {
            unsigned b = (unsigned)__builtin_ctzll(any);
            any &= any - 1;
            mc_id_slots(ids + 64 * w + b, R->ids_row, m, b, &id);
        }
    }
}

/* The triangles of cell slice k (k + 1 < nz), in the two-pass extraction's
 * order. A triangle corner on edge e of cell i is the id of edge
 * (axis, i + dx) of one of the cell row's 4 lattice rows: one load from
 * the rows' id arrays (mc_edge_ids), which rows j + 1 hand on to the next
 * cell row as its rows j. */
MC_POPCNT static int mc_slab_triangles(mc_walk *F, mc_ring *R, mc_pool *P, mc_slab *S, size_t k)
{
    const mc_job *J = &F->J;
    const size_t rw = F->rw;
    const uint64_t *b0 = R->bits[k % 3], *b1 = R->bits[(k + 1) % 3];
    const int s0 = (int)(k & 1), s1 = (int)((k + 1) & 1);
    for (size_t j = 0; j + 1 < J->ny; j++) {
        /* A mixed cell has a crossing edge, owned by one of its 4 rows. */
        if (mc_row_empty(R, rw, J->ny, s0, j) && mc_row_empty(R, rw, J->ny, s0, j + 1) &&
            mc_row_empty(R, rw, J->ny, s1, j) && mc_row_empty(R, rw, J->ny, s1, j + 1))
            continue;
        const uint64_t *r[4] = {b0 + j * rw, b0 + (j + 1) * rw, b1 + j * rw, b1 + (j + 1) * rw};
        /* Edge e's ids: row pmi_mc_edge_row[e] = dy + 2 dz sits in slot
         * (j + dy) % 2 + 2 dz, shifted by dx. */
        const uint32_t *base[12];
        int filled = 0;
        for (size_t w = 0; w < rw; w++) {
            uint64_t c[8];
            for (int q = 0; q < 4; q++) {
                c[q] = r[q][w];
                c[q + 4] = mc_right(r[q], w, rw);
            }
            uint64_t all_in = c[0] & c[1] & c[2] & c[3] & c[4] & c[5] & c[6] & c[7];
            uint64_t any_in = c[0] | c[1] | c[2] | c[3] | c[4] | c[5] | c[6] | c[7];
            uint64_t act = ~all_in & any_in & mc_low(J->nx - 1 - 64 * w);
            if (!act) continue;
            S->nact += (uint64_t)mc_popc(act);
            uint8_t cs64[64];
            const int wide = mc_cases_wide(J, c, act, cs64);
            if (!filled) {
                for (int r4 = 0; r4 < 4; r4++) {
                    size_t jj = j + (r4 & 1);
                    int q = (int)(jj & 1) + 2 * (r4 >> 1);
                    mc_edge_ids(F, R, r4 >> 1 ? s1 : s0, jj, k + (r4 >> 1), q);
                }
                for (int e = 0; e < 12; e++) {
                    int row = pmi_mc_edge_row[e];
                    size_t q = ((j + (row & 1)) & 1) + 2 * (size_t)(row >> 1);
                    base[e] =
                        R->ids + (3 * q + pmi_mc_edge_axis[e]) * R->ids_row + pmi_mc_edge_dx[e];
                }
                filled = 1;
            }
            while (act) {
                unsigned bit = (unsigned)__builtin_ctzll(act);
                act &= act - 1;
                unsigned cs = wide ? cs64[bit] : mc_case(c, bit), n = pmi_mc_tri_count[cs];
                const int8_t *tab = pmi_mc_tri_table[cs];
                size_t q;
                uint32_t *out = mc_take(F, P, &S->t, F->tcap, n, &q);
                if (!out) return 0;
                out += 3 * q;
                const size_t i = 64 * w + bit;
                for (unsigned v = 0; v < 3 * n; v++)
                    out[v] = base[tab[v]][i];
                S->nt += n;
            }
        }
    }
    return 1;
}

/* Walks slab S: see the comment at the top of this file. */
static void mc_slab_walk(mc_walk *F, mc_ring *R, mc_pool *P, mc_slab *S)
{
    const size_t nz = F->J.nz;
    uint64_t next = 0;
    for (int q = 0; q < 4; q++)
        R->slot_row[q] = R->slot_slice[q] = SIZE_MAX; /* ids are slab-local */
    mc_ring_bits(F, R, S->k0);
    if (S->k0 + 1 < nz) mc_ring_bits(F, R, S->k0 + 1);
    if (!mc_ring_info(F, R, S->k0, &next)) {
        S->end = MC_SLAB_INDEX_OVERFLOW;
        return;
    }
    for (size_t k = S->k0; k < S->k1; k++) {
        if (k + 2 < nz) mc_ring_bits(F, R, k + 2);
        if (k + 1 < nz && !mc_ring_info(F, R, k + 1, &next)) {
            S->end = MC_SLAB_INDEX_OVERFLOW;
            return;
        }
        if (!mc_slab_vertices(F, R, &P[0], S, k) ||
            (k + 1 < nz && !mc_slab_triangles(F, R, &P[1], S, k))) {
            S->end = MC_SLAB_NO_ROOM;
            return;
        }
    }
}

/* What the slab walk's placement step hands to the copy step. */
typedef struct mc_place {
    pm_status st;
    int copy;        /* 1: copy the slabs into the mesh */
    pmi_mesh_dest D; /* the mesh's arrays and the part of it to write */
    uint64_t *bases; /* per slab: first vertex, first triangle (mesh-wide) */
} mc_place;

/* The placement step: sees every slab's counts, sets PL->D and
 * PL->bases, returns the call's status (PL->copy set when the slabs are
 * to be copied). Runs on the calling thread. */
typedef pm_status (*mc_place_fn)(void *arg, pm_context *ctx, const mc_slab *S, size_t nslab,
                                 mc_place *PL);

/* The worst end of the slabs' walks and their totals. */
static mc_slab_end mc_slab_totals(const mc_slab *S, size_t nslab, uint64_t *nv, uint64_t *nt,
                                  uint64_t *nact)
{
    mc_slab_end end = MC_SLAB_DONE; /* the worst: index overflow, then no room */
    *nv = *nt = *nact = 0;
    for (size_t s = 0; s < nslab; s++) {
        if (S[s].end > end) end = S[s].end;
        *nv += S[s].nv;
        *nt += S[s].nt;
        *nact += S[s].nact;
    }
    return end;
}

/* Each slab's bases: an exclusive scan of the counts from (v0, t0). */
static pm_status mc_slab_bases(const mc_slab *S, size_t nslab, uint64_t v0, uint64_t t0,
                               mc_place *PL)
{
    PL->bases = malloc(2 * nslab * sizeof(uint64_t));
    if (!PL->bases) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_isosurface: no memory");
    for (size_t s = 0; s < nslab; s++) {
        PL->bases[2 * s] = v0;
        PL->bases[2 * s + 1] = t0;
        v0 += S[s].nv;
        t0 += S[s].nt;
    }
    return PM_STATUS_OK;
}

/* In-memory placement: totals, the mesh (pmi_mesh_prepare), each slab's
 * bases. Returns PM_STATUS_UNSUPPORTED, with the mesh untouched, when a
 * slab ran out of room (the walk declines). */
typedef struct mc_whole {
    const pm_isosurface_options *opt;
    pm_mesh *mesh;
} mc_whole;

static pm_status mc_slab_place(void *arg, pm_context *ctx, const mc_slab *S, size_t nslab,
                               mc_place *PL)
{
    const mc_whole *W = arg;
    uint64_t nvert, ntri, nact;
    mc_slab_end end = mc_slab_totals(S, nslab, &nvert, &ntri, &nact);
    if (end == MC_SLAB_NO_ROOM) return PM_STATUS_UNSUPPORTED;
    if (end == MC_SLAB_INDEX_OVERFLOW)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface: more than %llu vertices do not fit "
                         "the 32-bit indices of an indexed mesh",
                         (unsigned long long)UINT32_MAX);
    pm_status st = mc_slab_bases(S, nslab, 0, 0, PL);
    if (st != PM_STATUS_OK) return st;
    st = pmi_mesh_prepare(ctx, W->opt, 1, nvert, ntri, nact, W->mesh, &PL->D);
    PL->copy = st == PM_STATUS_OK || st == PM_STATUS_TRUNCATED;
    return st;
}

/* Slab s into the mesh: vertices at its base, indices plus its base. */
static void mc_slab_copy(const mc_walk *F, const mc_slab *S, const mc_place *PL, size_t s)
{
    const pmi_mesh_dest *D = &PL->D;
    uint64_t v0 = PL->bases[2 * s], t0 = PL->bases[2 * s + 1];
    const uint32_t add = (uint32_t)v0;
    for (size_t c = 0; c < S->v.ns && v0 < D->vertex_limit; c++) {
        const mc_seg *g = &S->v.s[c];
        const float *in = (const float *)g->p + 3 * g->off;
        uint64_t n = g->n < D->vertex_limit - v0 ? g->n : D->vertex_limit - v0;
        memcpy(D->positions + 3 * v0, in, (size_t)n * 3 * sizeof(float));
        if (D->normals)
            memcpy(D->normals + 3 * v0, in + 3 * F->vcap, (size_t)n * 3 * sizeof(float));
        v0 += n;
    }
    for (size_t c = 0; D->indices && c < S->t.ns && t0 < D->tri_limit; c++) {
        const mc_seg *g = &S->t.s[c];
        const uint32_t *in = (const uint32_t *)g->p + 3 * g->off;
        uint64_t n = g->n < D->tri_limit - t0 ? g->n : D->tri_limit - t0;
        uint32_t *o = D->indices + 3 * t0;
        for (size_t q = 0; q < 3 * (size_t)n; q++)
            o[q] = in[q] + add;
        t0 += n;
    }
}

/* The walk's settings: kernels, slabs of lattice slices [k0, k1), chunk
 * size and memory budget. `stream` (the streamed extraction) allows
 * thinner slabs, since its slices come a few at a time, and an unlimited
 * budget, since it has no other extraction to fall back on. */
static void mc_walk_init(mc_walk *F, pm_context *ctx, const pm_volume *vol, double iso,
                         const pm_isosurface_options *opt, int avx2, size_t k0, size_t k1,
                         int stream)
{
    memset(F, 0, sizeof *F);
    F->ctx = ctx;
    pmi_mc_job_init(&F->J, vol, iso, opt);
    F->K = &pmi_mc_kernels[vol->type];
    F->bits_row = F->K->bits_row;
    if (opt->normals == PM_NORMALS_CENTRAL) F->vertex8 = F->K->vertex8_central;
#if MC_AVX2
    if (avx2) {
        F->bits_row = pmi_mc_bits_row_avx2[vol->type];
        F->J.cases64 = pmi_mc_cases64_avx2;
        if (F->vertex8) F->vertex8 = pmi_mc_vertex8_central;
    }
#else
    (void)avx2;
#endif
    F->rw = (F->J.nx + 63) / 64;
    F->sw = F->rw * F->J.ny;
    F->normals = opt->normals != PM_NORMALS_NONE;
    /* Streamed slabs use 256 KiB chunks whatever the volume: their
     * output is held only until it is appended, so small chunks keep the
     * memory beside the slab buffer small (4 per thread at least). */
    double cells = (double)(F->J.nx - 1) * (double)(F->J.ny - 1) * (double)(F->J.nz - 1);
    F->chunk = stream ? (size_t)256 << 10 : cells >= 4194304.0 ? (size_t)2 << 20 : (size_t)64 << 10;
    F->vcap = F->chunk / ((F->normals ? 6 : 3) * sizeof(float));
    F->tcap = F->chunk / (3 * sizeof(uint32_t));
    F->threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    const size_t slices = k1 - k0, min_slices = stream ? 8 : 16;
    F->par = slices * F->J.nx * F->J.ny >= 32768 && F->threads > 1;
    /* Slabs of at least 16 slices (each slab computes the bits of its two
     * following slices again), 4 per thread for balance. */
    F->nslab = F->par ? 4 * (size_t)F->threads : 1;
    if (F->nslab > slices / min_slices) F->nslab = slices / min_slices;
    if (F->nslab < 1) F->nslab = 1;
    F->budget = MC_SLAB_BYTES_PER_CELL * cells;
    if (F->budget < (double)(4 * F->nslab * F->chunk))
        F->budget = (double)(4 * F->nslab * F->chunk);
    if (stream) F->budget = 1e300;
}

/* Frees the walk's slabs and gives its chunks to the context's cache,
 * keeping about what this call used: the split of the slabs over the
 * threads changes from call to call, so each pool may need one chunk more
 * next time. */
static void mc_walk_release(const mc_walk *F, mc_slab *S, mc_pool *pools)
{
    for (size_t s = 0; s < F->nslab; s++) {
        free(S[s].v.s);
        free(S[s].t.s);
    }
    size_t used_chunks = 0;
    for (int q = 0; q < 2 * F->threads; q++) {
        used_chunks += pools[q].nc;
        mc_pool_release(F->ctx, &pools[q], F->chunk);
    }
    mc_cache *C = F->ctx->backend_state;
    while (C && C->n > used_chunks + 2 * (size_t)F->threads)
        free(C->chunks[--C->n]);
}

/* Walks slices [k0, k1) in F->nslab slabs, places them (place), copies
 * them. t[0..2] receive the times at the start, after the walk and after
 * the copy when `timed`. */
static pm_status mc_walk_run(mc_walk *F, size_t k0, size_t k1, mc_place_fn place, void *arg,
                             int timed, double t[3])
{
    pm_context *ctx = F->ctx;
    const size_t nslab = F->nslab;
    const int threads = F->threads;
    mc_slab *S = aligned_alloc(128, nslab * sizeof *S);
    if (S) memset(S, 0, nslab * sizeof *S);
    /* Ring scratch per thread: 3 bit slices, 2 x (3 mask + 1 id) slices,
     * then 12 rows of nx 32-bit ids. */
    const size_t ids_row = F->J.nx;
    size_t per_thread = 11 * F->sw + 6 * ids_row;
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
        S[s].k0 = k0 + (k1 - k0) * s / nslab;
        S[s].k1 = k0 + (k1 - k0) * (s + 1) / nslab;
    }
    mc_place PL;
    memset(&PL, 0, sizeof PL);
    t[0] = timed ? pmi_now_ms() : 0.0;
    t[1] = t[2] = t[0];

#pragma omp parallel num_threads(threads) if (F->par)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        mc_ring R;
        uint64_t *base = scratch + (size_t)tid * per_thread;
        for (int q = 0; q < 3; q++)
            R.bits[q] = base + (size_t)q * F->sw;
        for (int q = 0; q < 2; q++) {
            R.m[q] = base + (3 + 4 * (size_t)q) * F->sw;
            R.pre[q] = R.m[q] + 3 * F->sw;
        }
        R.ids = (uint32_t *)(base + 11 * F->sw);
        R.ids_row = ids_row;
#pragma omp for schedule(dynamic, 1)
        for (size_t s = 0; s < nslab; s++)
            mc_slab_walk(F, &R, pools + 2 * tid, &S[s]);
            /* The calling thread (it owns pm_last_error) places the mesh while
             * the others wait at the barrier, spinning: a second parallel
             * region would have to wake them again, which costs milliseconds in
             * a virtual machine. */
#pragma omp master
        {
            if (timed) t[1] = pmi_now_ms();
            PL.st = place(arg, ctx, S, nslab, &PL);
        }
#pragma omp barrier
        if (PL.copy) {
#pragma omp for schedule(dynamic, 1)
            for (size_t s = 0; s < nslab; s++)
                mc_slab_copy(F, &S[s], &PL, s);
        }
    }
    if (timed) t[2] = pmi_now_ms();
    free(scratch);
    free(PL.bases);
    mc_walk_release(F, S, pools);
    free(pools);
    free(S);
    return PL.st;
}

/* Whether a sample of the volume predicts slab arrays of more than twice
 * the budget, so that the walk declines before it starts rather than once
 * it has filled its budget (a dense gyroid spent 7% of its call there).
 * The sample: the x edges that cross in every 8th row of 8 slices spread
 * over the volume, taken as a third of all crossings, each crossing a
 * vertex and two triangles. Only the path, and so the speed, depends on
 * it: both extractions give the same bytes. */
MC_POPCNT static int mc_slab_predicts_over(const mc_walk *F)
{
    const mc_job *J = &F->J;
    if (J->nx < 2 || J->ny < 2 || J->nz < 2) return 0;
    uint64_t *b = malloc(F->rw * sizeof *b);
    if (!b) return 0;
    uint64_t cross = 0, rows = 0;
    for (size_t s = 0; s < 8; s++) {
        const size_t k = (J->nz - 1) * (2 * s + 1) / 16;
        for (size_t j = 0; j < J->ny; j += 8, rows++) {
            F->bits_row(J, k * J->ny + j, b);
            for (size_t w = 0; w < F->rw; w++)
                cross += mc_popc((b[w] ^ mc_right(b, w, F->rw)) & mc_low(J->nx - 1 - 64 * w));
        }
    }
    free(b);
    const double vertices = 3.0 * (double)cross / (double)rows * (double)J->ny * (double)J->nz;
    const double bytes = vertices * (F->normals ? 24.0 : 12.0) + 2.0 * vertices * 12.0;
    return bytes > 2.0 * F->budget;
}

pm_status pmi_mc_slab(pm_context *ctx, const pm_volume *vol, double iso,
                      const pm_isosurface_options *opt, int avx2, int sample, pm_mesh *mesh,
                      int *sampled)
{
    mc_walk F;
    mc_walk_init(&F, ctx, vol, iso, opt, avx2, 0, vol->nz, 0);
    *sampled = sample && mc_slab_predicts_over(&F);
    if (*sampled) return PM_STATUS_UNSUPPORTED;
    const int timed = opt->report && opt->report->timed;
    mc_whole W = {opt, mesh};
    double t[3];
    pm_status st = mc_walk_run(&F, 0, vol->nz, mc_slab_place, &W, timed, t);
    if (st == PM_STATUS_OK || st == PM_STATUS_TRUNCATED) {
        pmi_report_stage(opt->report, 0, "walk", t[1] - t[0]);
        pmi_report_stage(opt->report, 1, "copy", t[2] - t[1]);
    }
    return st;
}

/* ------------------------------------------------------------------------ */
/* The streamed extraction's step (isosurface_stream.c)                      */
/* ------------------------------------------------------------------------ */

/* Streamed placement: the slabs go after the vertices and triangles
 * already in the output, whose host arrays grow (or, for the caller's
 * buffers, whose limits are checked). */
static pm_status mc_append_place(void *arg, pm_context *ctx, const mc_slab *S, size_t nslab,
                                 mc_place *PL)
{
    (void)ctx;
    pmi_mc_append *A = arg;
    uint64_t nv, nt, nact;
    mc_slab_end end = mc_slab_totals(S, nslab, &nv, &nt, &nact);
    if (end == MC_SLAB_INDEX_OVERFLOW || A->nv + nv > (uint64_t)UINT32_MAX)
        return pmi_mesh_index_overflow(A->nv + nv);
    if (end == MC_SLAB_NO_ROOM)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface_stream: no memory to hold the mesh of lattice slices "
                         "%zu to %zu",
                         S[0].k0, S[nslab - 1].k1 - 1);
    pm_status st = pmi_mc_append_reserve(A, A->nv + nv, A->nt + nt);
    if (st != PM_STATUS_OK) return st;
    if ((st = mc_slab_bases(S, nslab, A->nv, A->nt, PL)) != PM_STATUS_OK) return st;
    PL->D.positions = A->positions;
    PL->D.normals = A->normals;
    PL->D.indices = A->indices;
    PL->D.vertex_limit = A->vertex_limit;
    PL->D.tri_limit = A->indices ? A->tri_limit : 0;
    A->nv += nv;
    A->nt += nt;
    A->nact += nact;
    PL->copy = 1;
    return PM_STATUS_OK;
}

pm_status pmi_mc_slab_append(pm_context *ctx, const pm_volume *vol, double iso,
                             const pm_isosurface_options *opt, int avx2, size_t k0, size_t k1,
                             pmi_mc_append *out, double *walk_ms, double *copy_ms)
{
    mc_walk F;
    mc_walk_init(&F, ctx, vol, iso, opt, avx2, k0, k1, 1);
    double t[3];
    pm_status st = mc_walk_run(&F, k0, k1, mc_append_place, out, 1, t);
    *walk_ms += t[1] - t[0];
    *copy_ms += t[2] - t[1];
    if (F.used > (double)out->staging_peak_bytes) out->staging_peak_bytes = (uint64_t)F.used;
    return st;
}
