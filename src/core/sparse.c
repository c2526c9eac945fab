/* Large domains (docs/scale.md): the geometry of the sparse decomposition,
 * pm_isosurface_piece's checks and dispatch, and pm_reconstruct, which
 * picks the dense or the sparse path and drives the latter: the backend's
 * plan (sorted particles, occupied bricks, volumes), its bricks' pieces in
 * batches under the memory limit, then their merge by brick rows
 * (pmi_pieces_merge_bricks). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/mesh_out.h"
#include "core/sparse.h"
#include "core/sph_kernel.h"
#include "core/util.h"

uint64_t pm_vertex_key(const uint64_t dims[3], uint64_t i, uint64_t j, uint64_t k, int axis)
{
    return 3 * (i + dims[0] * (j + dims[1] * k)) + (uint64_t)axis;
}

uint64_t pm_cell_key(const uint64_t dims[3], uint64_t i, uint64_t j, uint64_t k)
{
    return i + (dims[0] - 1) * (j + (dims[1] - 1) * k);
}

/* 3 * points of the lattice fits 64 bits (vertex keys). */
static int keys_fit(const uint64_t N[3])
{
    uint64_t x;
    return !__builtin_mul_overflow(N[0], N[1], &x) && !__builtin_mul_overflow(x, N[2], &x) &&
           !__builtin_mul_overflow(x, 3, &x);
}

pm_status pmi_sparse_geom_init(const pm_field_params *p, const double bmin[3], const double bmax[3],
                               size_t brick_points, pm_normals normals, pmi_sparse_geom *G)
{
    memset(G, 0, sizeof *G);
    G->rule = pmi_field_rule_of(p);
    double lo[3], dims[3];
    pm_status st = pmi_field_extent("pm_reconstruct", &G->rule, bmin, bmax, lo, dims);
    if (st != PM_STATUS_OK) return st;
    G->B = (uint64_t)G->rule.B;
    uint64_t brick = brick_points ? (uint64_t)brick_points : PMI_BRICK_DEFAULT;
    if (brick > ((uint64_t)1 << 20))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_reconstruct: brick_points %zu is too large (at most 2^20)",
                         brick_points);
    brick = (brick + G->B - 1) / G->B * G->B;
    G->brick = brick;
    G->bc = brick / G->B;
    unsigned cb = 0, bb = 0;
    for (int a = 0; a < 3; a++) {
        G->g0[a] = (int64_t)lo[a];
        G->dims[a] = (uint64_t)dims[a];
        G->origin[a] = pmi_lattice_coord(G->g0[a], G->rule.s);
        G->cdims[a] = (G->dims[a] + G->B - 1) / G->B;
        G->bdims[a] = (G->dims[a] + brick - 1) / brick;
        G->cshift[a] = cb;
        G->bshift[a] = bb;
        cb += pmi_bits_for(G->cdims[a]);
        bb += pmi_bits_for(G->bdims[a]);
    }
    if (cb > 63 || !keys_fit(G->dims))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_reconstruct: grid %llu x %llu x %llu (cell %g) is too large for "
                         "64-bit cell and vertex keys",
                         (unsigned long long)G->dims[0], (unsigned long long)G->dims[1],
                         (unsigned long long)G->dims[2], G->rule.s);
    G->ghost_lo = normals == PM_NORMALS_NONE ? 0 : 1;
    G->ghost_hi = normals == PM_NORMALS_NONE ? 1 : 2;
    return PM_STATUS_OK;
}

size_t pmi_sparse_brick_default(const pm_context *ctx)
{
    return ctx->device == PM_DEVICE_CUDA ? PMI_BRICK_DEFAULT_GPU : PMI_BRICK_DEFAULT;
}

/* Options of an extraction with their defaults (pm_isosurface's). */
static pm_status resolve_iso(const char *fn, const pm_isosurface_options *in,
                             pm_isosurface_options *opt)
{
    memset(opt, 0, sizeof *opt);
    if (in) {
        size_t sz = in->struct_size ? in->struct_size : sizeof *opt;
        memcpy(opt, in, sz < sizeof *opt ? sz : sizeof *opt);
    }
    opt->struct_size = sizeof *opt;
    if (opt->normals == PM_NORMALS_DEFAULT) opt->normals = PM_NORMALS_CENTRAL;
    if (opt->inside == PM_INSIDE_DEFAULT) opt->inside = PM_INSIDE_ABOVE;
    if ((opt->inside != PM_INSIDE_ABOVE && opt->inside != PM_INSIDE_BELOW) ||
        opt->normals < PM_NORMALS_DEFAULT || opt->normals > PM_NORMALS_SOBEL ||
        (opt->mode != PM_MESH_INDEXED && opt->mode != PM_MESH_SOUP))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: bad normals, inside or mode", fn);
    return PM_STATUS_OK;
}

pm_status pm_isosurface_piece(pm_context *ctx, const pm_volume *window, const uint64_t window_lo[3],
                              const pm_lattice *lattice, const pm_lattice_box *owned, double iso,
                              const pm_isosurface_options *options, pm_mesh_piece *piece)
{
    static const char fn[] = "pm_isosurface_piece";
    pmi_clear_error();
    if (!ctx || !window || !window_lo || !lattice || !owned || !piece)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    memset(piece, 0, sizeof *piece);
    pm_isosurface_options opt;
    pm_status st = resolve_iso(fn, options, &opt);
    if (st != PM_STATUS_OK) return st;
    if (!isfinite(iso)) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: iso is not finite", fn);
    const uint64_t *N = lattice->dims;
    if (N[0] < 2 || N[1] < 2 || N[2] < 2 || !keys_fit(N))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: lattice %llu x %llu x %llu: at least 2 points per axis and 3 * "
                         "points below 2^64 expected",
                         fn, (unsigned long long)N[0], (unsigned long long)N[1],
                         (unsigned long long)N[2]);
    for (int a = 0; a < 3; a++)
        if (!isfinite(lattice->origin[a]) || !(lattice->spacing[a] > 0) ||
            !isfinite(lattice->spacing[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: lattice origin must be finite, spacing finite and > 0", fn);
    pm_volume w = *window;
    if (pm_sample_size(w.type) == 0 || !w.data || !w.nx || !w.ny || !w.nz)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: window: a sample type, data and at least 1 point per axis expected",
                         fn);
    if (!w.row_stride) w.row_stride = w.nx;
    if (!w.slice_stride && !pmi_mul_size(w.row_stride, w.ny, &w.slice_stride))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: window slice overflows", fn);
    if (w.row_stride < w.nx || w.slice_stride < w.row_stride * (w.ny - 1) + w.nx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: window strides too small", fn);
    const int normals = opt.normals != PM_NORMALS_NONE;
    const size_t wn[3] = {w.nx, w.ny, w.nz};
    int empty = 0;
    for (int a = 0; a < 3; a++) {
        uint64_t lo = owned->lo[a], d = owned->dims[a];
        if (lo > N[a] || d > N[a] - lo)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the owned box leaves the lattice on axis %d (%llu + %llu > %llu)",
                             fn, a, (unsigned long long)lo, (unsigned long long)d,
                             (unsigned long long)N[a]);
        empty |= d == 0;
        uint64_t need0 = normals && lo > 0 ? lo - 1 : lo;
        uint64_t need1 = lo + d + (normals ? 2u : 1u);
        if (need1 > N[a]) need1 = N[a];
        if (d && (window_lo[a] > need0 || window_lo[a] + wn[a] < need1))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the window holds points [%llu, %llu) on axis %d; the ghost rule "
                             "needs [%llu, %llu)",
                             fn, (unsigned long long)window_lo[a],
                             (unsigned long long)(window_lo[a] + wn[a]), a,
                             (unsigned long long)need0, (unsigned long long)need1);
    }
    if (!ctx->backend->isosurface_piece)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: not implemented on the %s backend yet (docs/scale.md)", fn,
                         ctx->backend->name);
    if (empty) {
        for (int a = 0; a < 3; a++) {
            piece->lattice_dims[a] = N[a];
            piece->owned.lo[a] = owned->lo[a];
        }
        return PM_STATUS_OK;
    }
    return ctx->backend->isosurface_piece(ctx, &w, window_lo, lattice, owned, iso, &opt, piece);
}

/* pm_field_params with its defaults, as pm_field_compute resolves them. */
static pm_status field_params(const pm_field_params *in, pm_field_params *p)
{
    return pmi_field_params("pm_reconstruct", in, p);
}

/* The dense path: pm_field_compute + pm_isosurface. */
static pm_status run_dense(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                           const pm_isosurface_options *opt, pm_mesh *mesh,
                           pm_reconstruct_report *R)
{
    pm_field field;
    pm_status st = pm_field_compute(ctx, xyz, n, p, &field);
    if (st != PM_STATUS_OK) return st;
    pm_isosurface_options io = *opt;
    io.inside = field.inside;
    double t0 = pmi_now_ms();
    st = pm_isosurface(ctx, &field.volume, field.iso, &io, mesh);
    R->extract_ms = pmi_now_ms() - t0;
    R->sparse = 0;
    const pm_volume *v = &field.volume;
    const size_t d[3] = {v->nx, v->ny, v->nz};
    const double s = v->spacing[0];
    for (int a = 0; a < 3; a++) {
        R->lattice.origin[a] = v->origin[a];
        R->lattice.spacing[a] = v->spacing[a];
        R->lattice.dims[a] = d[a];
        R->lattice_lo[a] = (int64_t)llround(v->origin[a] / s);
    }
    R->iso = field.iso;
    R->particles_used = field.particles_used;
    R->particles_dropped = field.particles_dropped;
    R->neighbours_ms = field.timings.neighbours_ms;
    R->density_ms = field.timings.density_ms;
    R->field_ms = field.timings.field_ms;
    double bytes = 4.0 * (double)d[0] * (double)d[1] * (double)d[2];
    R->peak_bytes = (size_t)bytes;
    pm_field_free(ctx, &field);
    return st;
}

/* Bytes a piece holds. */
static size_t piece_bytes(const pm_mesh_piece *P)
{
    return (size_t)P->num_vertices * (8 + 12 + (P->normals ? 12 : 0)) +
           (size_t)P->num_triangles * (24 + 8) + sizeof *P;
}

/* One context's share of a batch of bricks (a host thread each). */
typedef struct brick_share {
    pm_context *ctx;
    pmi_sparse_plan *plan;
    size_t first, count;
    double iso;
    const pm_isosurface_options *opt;
    pm_mesh_piece *pieces;
    double fms, ems;
    pm_status st;
    char msg[512];
} brick_share;

static void *brick_share_run(void *arg)
{
    brick_share *b = arg;
    b->fms = b->ems = 0;
    b->st = b->count ? b->ctx->backend->sparse_pieces(b->ctx, b->plan, b->first, b->count, b->iso,
                                                      b->opt, b->pieces, &b->fms, &b->ems)
                     : PM_STATUS_OK;
    if (b->st != PM_STATUS_OK) snprintf(b->msg, sizeof b->msg, "%s", pm_last_error());
    return NULL;
}

/* Bricks [first, first + count) split in contiguous shares over the
 * contexts, one host thread each (the plan is read-only). */
static pm_status pieces_on(pm_context *const *ctxs, int nctx, pmi_sparse_plan *plan, size_t first,
                           size_t count, double iso, const pm_isosurface_options *opt,
                           pm_mesh_piece *pieces, double *fms, double *ems)
{
    *fms = *ems = 0;
    if (nctx == 1)
        return ctxs[0]->backend->sparse_pieces(ctxs[0], plan, first, count, iso, opt, pieces, fms,
                                               ems);
    brick_share *b = calloc((size_t)nctx, sizeof *b);
    pthread_t *th = calloc((size_t)nctx, sizeof *th);
    int *started = calloc((size_t)nctx, sizeof *started);
    if (!b || !th || !started) {
        free(b), free(th), free(started);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory");
    }
    /* The bricks taken one at a time from a shared cursor where the
     * backend can, else in contiguous shares. */
    size_t cursor = 0;
    plan->cursor = plan->shares_batches ? &cursor : NULL;
    for (int w = 0; w < nctx; w++) {
        size_t a = count * (size_t)w / (size_t)nctx, e = count * (size_t)(w + 1) / (size_t)nctx;
        if (plan->cursor) a = 0, e = count;
        b[w] = (brick_share){ctxs[w], plan, first + a, e - a, iso, opt, pieces + a, 0, 0,
                             PM_STATUS_OK, ""};
        started[w] = pthread_create(&th[w], NULL, brick_share_run, &b[w]) == 0;
        if (!started[w]) brick_share_run(&b[w]);
    }
    pm_status st = PM_STATUS_OK;
    for (int w = 0; w < nctx; w++) {
        if (started[w]) pthread_join(th[w], NULL);
        *fms += b[w].fms;
        *ems += b[w].ems;
    }
    plan->cursor = NULL;
    for (int w = 0; w < nctx && st == PM_STATUS_OK; w++)
        if (b[w].st != PM_STATUS_OK) st = pmi_error(b[w].st, "%s", b[w].msg);
    free(b), free(th), free(started);
    return st;
}

/* Pieces of sparse_pieces no longer needed: freed, or zeroed when their
 * arrays are in the plan's blocks. */
static void pieces_drop(const pmi_sparse_plan *plan, pm_mesh_piece *pieces, size_t count)
{
    for (size_t q = 0; q < count; q++) {
        if (plan->pieces_in_blocks)
            memset(&pieces[q], 0, sizeof pieces[q]);
        else
            pm_mesh_piece_free(&pieces[q]);
    }
}

/* Pieces whose arrays are in the plan's blocks given arrays of their own
 * (they outlive the plan). */
static pm_status pieces_own(pm_mesh_piece *pieces, size_t count)
{
    for (size_t q = 0; q < count; q++) {
        pm_mesh_piece *P = &pieces[q];
        const size_t nv = (size_t)P->num_vertices, nt = (size_t)P->num_triangles;
        void *a[5] = {P->vertex_keys, P->positions, P->normals, P->triangles, P->cell_keys};
        const size_t b[5] = {nv * 8, nv * 12, nv * 12, nt * 24, nt * 8};
        void *c[5] = {NULL, NULL, NULL, NULL, NULL};
        int ok = 1;
        for (int i = 0; i < 5 && ok; i++)
            if (a[i]) ok = (c[i] = malloc(b[i] ? b[i] : 1)) != NULL && memcpy(c[i], a[i], b[i]);
        if (!ok) {
            for (int i = 0; i < 5; i++)
                free(c[i]);
            for (size_t r = q; r < count; r++)
                memset(&pieces[r], 0, sizeof pieces[r]);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory for a piece");
        }
        P->vertex_keys = c[0], P->positions = c[1], P->normals = c[2];
        P->triangles = c[3], P->cell_keys = c[4];
    }
    return PM_STATUS_OK;
}

static pm_status run_sparse(pm_context *const *ctxs, int nctx, pmi_sparse_plan *plan,
                            const pm_field_params *p, const pm_isosurface_options *opt,
                            pm_mesh *mesh, pm_reconstruct_report *R)
{
    pm_context *ctx = ctxs[0];
    const pmi_sparse_geom *G = &plan->G;
    const size_t nb = plan->nbricks;
    pm_mesh_piece *pieces = calloc(nb ? nb : 1, sizeof *pieces);
    if (!pieces)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory for %zu pieces", nb);
    /* Per thread: the window's field, the SPH superblock, the bits, the
     * cell list (estimated by its cells). */
    const double w = (double)(G->brick + 3);
    const double per_thread = w * w * w * 4.0 + 300e3 + w * w * (w / 64.0 + 1.0) * 8.0;
    size_t held = plan->bytes + (size_t)(per_thread * ctx->num_threads) + nb * sizeof *pieces;
    size_t peak = held;
    pm_status st = PM_STATUS_OK;
    const size_t batch = 64 * (size_t)(ctx->num_threads > 0 ? ctx->num_threads : 1) * (size_t)nctx;
    for (size_t first = 0; first < nb && st == PM_STATUS_OK; first += batch) {
        size_t count = nb - first < batch ? nb - first : batch;
        double fms = 0, ems = 0;
        st = pieces_on(ctxs, nctx, plan, first, count, p->iso, opt, pieces + first, &fms, &ems);
        R->field_ms += fms;
        R->extract_ms += ems;
        for (size_t q = first; q < first + count; q++)
            held += piece_bytes(&pieces[q]);
        if (held > peak) peak = held;
        if (st == PM_STATUS_OK && held > p->max_memory_bytes)
            st =
                pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "pm_reconstruct: the surface pieces of %zu of %zu bricks already hold "
                          "%.4g GB, more than the memory limit of %.4g GB (max_memory_bytes, "
                          "--max-memory)",
                          first + count, nb, (double)held / 1e9, (double)p->max_memory_bytes / 1e9);
    }
    if (st == PM_STATUS_OK) {
        uint64_t nv = 0, nt = 0;
        for (size_t q = 0; q < nb; q++) {
            nv += pieces[q].num_vertices;
            nt += pieces[q].num_triangles;
        }
        /* The merge's row tables and keys, and the mesh (docs/scale.md). */
        double rows = 0;
        for (size_t q = 0; q < nb; q++) {
            uint64_t b[3], lo[3], hi[3];
            pmi_brick_unkey(G, plan->bricks[q], b);
            pmi_brick_owned(G, b, lo, hi);
            rows += (double)(hi[1] - lo[1]) * (double)(hi[2] - lo[2]);
        }
        double merge = 8.0 * rows + 8.0 * (double)nv +
                       (opt->normals != PM_NORMALS_NONE ? 24.0 : 12.0) * (double)nv +
                       12.0 * (double)nt;
        if ((double)held + merge > (double)peak) peak = held + (size_t)merge;
        if ((double)held + merge > (double)p->max_memory_bytes)
            st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                           "pm_reconstruct: merging %llu vertices and %llu triangles needs %.4g "
                           "GB, more than the memory limit of %.4g GB (max_memory_bytes, "
                           "--max-memory)",
                           (unsigned long long)nv, (unsigned long long)nt,
                           ((double)held + merge) / 1e9, (double)p->max_memory_bytes / 1e9);
    }
    if (st == PM_STATUS_OK) {
        double t0 = pmi_now_ms();
        st = pmi_pieces_merge_bricks(ctx, G, plan->bricks, pieces, nb, opt, mesh);
        R->merge_ms = pmi_now_ms() - t0;
    }
    pieces_drop(plan, pieces, nb);
    free(pieces);
    R->peak_bytes = peak;
    return st;
}

pm_status pmi_reconstruct_params(const pm_field_params *in, pm_field_params *p)
{
    return field_params(in, p);
}

pm_status pmi_reconstruct_pieces(pm_context *ctx, const float *xyz, size_t n,
                                 const pm_field_params *params, size_t brick_points,
                                 const pm_isosurface_options *iso_options, const double bmin[3],
                                 const double bmax[3], uint64_t bz0, uint64_t bz1,
                                 pm_mesh_piece **pieces, size_t *count)
{
    static const char fn[] = "pm_mpi_reconstruct";
    *pieces = NULL;
    *count = 0;
    const pmi_backend *be = ctx->backend;
    if (!(be->sparse_plan && be->sparse_pieces && be->sparse_plan_free))
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: the sparse grid on the %s backend: not implemented on this backend "
                         "yet",
                         fn, be->name);
    pm_field_params p;
    pm_status st = field_params(params, &p);
    if (st != PM_STATUS_OK) return st;
    if (p.method != PM_FIELD_SPH)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: the sparse grid is SPH only", fn);
    pm_isosurface_options opt;
    if ((st = resolve_iso(fn, iso_options, &opt)) != PM_STATUS_OK) return st;
    opt.inside = PM_INSIDE_ABOVE;
    if (n == 0 || bz1 <= bz0) return PM_STATUS_OK;
    pmi_sparse_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.have_box = 1;
    memcpy(plan.box_min, bmin, sizeof plan.box_min);
    memcpy(plan.box_max, bmax, sizeof plan.box_max);
    st = be->sparse_plan(ctx, xyz, n, &p, brick_points, opt.normals, &plan);
    if (st != PM_STATUS_OK) return st;
    /* The bricks of layers [bz0, bz1): a run of the ascending keys. */
    size_t first = 0, last = 0;
    for (size_t q = 0; q < plan.nbricks; q++) {
        uint64_t b[3];
        pmi_brick_unkey(&plan.G, plan.bricks[q], b);
        if (b[2] < bz0) first = q + 1;
        if (b[2] < bz1) last = q + 1;
    }
    size_t nb = last > first ? last - first : 0;
    pm_mesh_piece *out = calloc(nb ? nb : 1, sizeof *out);
    if (!out) st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for %zu pieces", fn, nb);
    const size_t batch = 64 * (size_t)(ctx->num_threads > 0 ? ctx->num_threads : 1);
    for (size_t f = 0; st == PM_STATUS_OK && f < nb; f += batch) {
        size_t c = nb - f < batch ? nb - f : batch;
        double fms = 0, ems = 0;
        st = be->sparse_pieces(ctx, &plan, first + f, c, p.iso, &opt, out + f, &fms, &ems);
    }
    if (st == PM_STATUS_OK && plan.pieces_in_blocks) st = pieces_own(out, nb);
    if (st != PM_STATUS_OK && out) pieces_drop(&plan, out, nb);
    be->sparse_plan_free(ctx, &plan);
    if (st != PM_STATUS_OK) {
        free(out);
        return st;
    }
    *pieces = out;
    *count = nb;
    return PM_STATUS_OK;
}

/* Which path AUTO takes, from the plan: dense when its field fits the
 * memory limit and the occupied bricks' points are at least
 * 1/PMI_SPARSE_RATIO of the grid's (the dense walk is then the faster:
 * docs/scale.md, measured in bench/RESULTS-sparse.md). */
#define PMI_SPARSE_RATIO 4.0
static int auto_dense(const pmi_sparse_plan *plan, const pm_field_params *p)
{
    const pmi_sparse_geom *G = &plan->G;
    double points = (double)G->dims[0] * (double)G->dims[1] * (double)G->dims[2];
    double cells = (double)G->cdims[0] * (double)G->cdims[1] * (double)G->cdims[2];
    double need = 4.0 * points + 8.0 * cells + 40.0 * (double)plan->kept;
    double b = (double)G->brick;
    double occupied = (double)plan->nbricks * b * b * b;
    return need <= (double)p->max_memory_bytes && occupied * PMI_SPARSE_RATIO >= points;
}

static pm_status reconstruct_on(pm_context *const *ctxs, int nctx, const float *xyz, size_t n,
                                const pm_field_params *params,
                                const pm_reconstruct_options *options,
                                const pm_isosurface_options *iso_options, pm_mesh *mesh,
                                pm_reconstruct_report *report)
{
    static const char fn[] = "pm_reconstruct";
    pm_context *ctx = ctxs[0];
    if (!ctx || !params || !mesh)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    memset(mesh, 0, sizeof *mesh);
    const double t_start = pmi_now_ms();
    pm_reconstruct_report R;
    memset(&R, 0, sizeof R);
    pm_reconstruct_options ro;
    memset(&ro, 0, sizeof ro);
    if (options) {
        size_t sz = options->struct_size ? options->struct_size : sizeof ro;
        memcpy(&ro, options, sz < sizeof ro ? sz : sizeof ro);
    }
    if (ro.grid != PM_GRID_AUTO && ro.grid != PM_GRID_DENSE && ro.grid != PM_GRID_SPARSE)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: bad grid mode %d", fn, (int)ro.grid);
    if (!ro.brick_points) ro.brick_points = pmi_sparse_brick_default(ctx);
    pm_field_params p;
    pm_status st = field_params(params, &p);
    if (st != PM_STATUS_OK) return st;
    pm_isosurface_options opt;
    st = resolve_iso(fn, iso_options, &opt);
    if (st != PM_STATUS_OK) return st;
    opt.inside = PM_INSIDE_ABOVE;
    if (n && !xyz) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: xyz is NULL", fn);
    size_t xyz_bytes;
    if (!pmi_mul3_size(n, 3, sizeof(float), &xyz_bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu points overflow", fn, n);

    const pmi_backend *be = ctx->backend;
    const int can_sparse = be->sparse_plan && be->sparse_pieces && be->sparse_plan_free;
    const char *why_not = p.method != PM_FIELD_SPH ? "the blur method has no sparse path"
                          : !(p.iso > 0)           ? "the sparse path needs an iso value above 0"
                          : !can_sparse            ? "not implemented on this backend yet"
                                                   : NULL;
    if (ro.grid == PM_GRID_SPARSE && why_not)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: sparse grid on the %s backend: %s", fn,
                         be->name, why_not);
    if (ro.grid == PM_GRID_DENSE || why_not) {
        st = run_dense(ctx, xyz, n, &p, &opt, mesh, &R);
        if (st == PM_STATUS_OUT_OF_MEMORY && ro.grid == PM_GRID_AUTO && why_not) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", pm_last_error());
            st = pmi_error(st, "%s (and the sparse grid: %s)", msg, why_not);
        }
    } else {
        pmi_sparse_plan plan;
        memset(&plan, 0, sizeof plan);
        /* The plan reads host or context memory (the GPU's is made on
         * the host). */
        st = be->sparse_plan(ctx, xyz, n, &p, ro.brick_points, opt.normals, &plan);
        if (st == PM_STATUS_OK && ro.grid == PM_GRID_AUTO && nctx == 1 && auto_dense(&plan, &p)) {
            be->sparse_plan_free(ctx, &plan);
            st = run_dense(ctx, xyz, n, &p, &opt, mesh, &R);
        } else if (st == PM_STATUS_OK) {
            const pmi_sparse_geom *G = &plan.G;
            R.sparse = 1;
            R.iso = p.iso;
            R.lattice = pmi_sparse_lattice(G);
            for (int a = 0; a < 3; a++)
                R.lattice_lo[a] = G->g0[a];
            R.particles_used = plan.kept;
            R.particles_dropped = plan.dropped;
            R.brick_points = G->brick;
            R.bricks_total = G->bdims[0] * G->bdims[1] * G->bdims[2];
            R.bricks_occupied = plan.nbricks;
            R.occupied_cells = plan.occupied_cells;
            R.neighbours_ms = plan.neighbours_ms;
            R.density_ms = plan.density_ms;
            /* On GPUs more streams each: one brick's gather and copies on
             * the host overlap others' kernels. */
            pm_context **w = NULL;
            int nw = 0;
            if (be->free_bytes &&
                pmi_context_workers(ctxs, nctx, PMI_SPARSE_GPU_WORKERS, &w, &nw) != PM_STATUS_OK)
                w = NULL;
            st = w ? run_sparse(w, nw, &plan, &p, &opt, mesh, &R)
                   : run_sparse(ctxs, nctx, &plan, &p, &opt, mesh, &R);
            free(w);
            be->sparse_plan_free(ctx, &plan);
        }
    }
    R.total_ms = pmi_now_ms() - t_start;
    if (st == PM_STATUS_OK) {
        pm_isosurface_report *ir = opt.report;
        if (R.sparse && ir) {
            char num[32];
            ir->path[0] = 0;
            for (int i = 0; i < 4; i++)
                ir->stage_names[i] = NULL;
            pmi_report_path(ir, "backend", be->name);
            pmi_report_path(ir, "grid", "sparse");
            snprintf(num, sizeof num, "%llu", (unsigned long long)R.brick_points);
            pmi_report_path(ir, "brick", num);
            snprintf(num, sizeof num, "%llu", (unsigned long long)R.bricks_occupied);
            pmi_report_path(ir, "bricks", num);
            if (nctx > 1) {
                snprintf(num, sizeof num, "%d", nctx);
                pmi_report_path(ir, "contexts", num);
            }
            pmi_report_stage(ir, 0, "fields", R.field_ms);
            pmi_report_stage(ir, 1, "pieces", R.extract_ms);
            pmi_report_stage(ir, 2, "merge", R.merge_ms);
        } else if (ir) {
            pmi_report_path(ir, "grid", "dense");
        }
        mesh->timings.neighbours_ms = R.neighbours_ms;
        mesh->timings.density_ms = R.density_ms;
        mesh->timings.field_ms = R.field_ms;
        mesh->timings.extract_ms = R.extract_ms + R.merge_ms;
    } else {
        pm_mesh_free(ctx, mesh);
    }
    if (report) *report = R;
    return st;
}

pm_status pm_reconstruct(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *params,
                         const pm_reconstruct_options *options,
                         const pm_isosurface_options *iso_options, pm_mesh *mesh,
                         pm_reconstruct_report *report)
{
    pmi_clear_error();
    return reconstruct_on(&ctx, 1, xyz, n, params, options, iso_options, mesh, report);
}

pm_status pm_reconstruct_multi(pm_context *const *contexts, int count, const float *xyz, size_t n,
                               const pm_field_params *params,
                               const pm_reconstruct_options *options,
                               const pm_isosurface_options *iso_options, pm_mesh *mesh,
                               pm_reconstruct_report *report)
{
    static const char fn[] = "pm_reconstruct_multi";
    pmi_clear_error();
    if (!mesh) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL mesh", fn);
    /* One plan for all: one backend (a plan's state is its backend's). */
    pm_status s = pmi_contexts_check(fn, contexts, count, 1);
    if (s != PM_STATUS_OK) return s;
    return reconstruct_on(contexts, count, xyz, n, params, options, iso_options, mesh, report);
}