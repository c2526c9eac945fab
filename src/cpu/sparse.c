/* Sparse SPH reconstruction on the CPU (docs/scale.md): the particles
 * sorted by 64-bit neighbour-cell key (LSD radix sort, stable, so ties
 * keep input order: the dense path's slot order), the bricks they can
 * reach, then per brick a dense cell list of its source cells, the SPH
 * sums of sph.c over its window and the piece of sparse_mc.c. Every value
 * is the dense path's: same cells, same terms, same order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/density.h"
#include "cpu/sparse.h"

/* What the plan keeps (plan->state). */
typedef struct cpu_plan {
    size_t n;         /* kept particles */
    float *xyz;       /* positions by sorted slot */
    double *vol;      /* SPH volumes by sorted slot */
    size_t m;         /* occupied cells */
    uint64_t *ckey;   /* their keys, ascending */
    uint32_t *cstart; /* first slot of each, m + 1 */
    double h, mass;
} cpu_plan;

void pmi_sparse_local_free(pmi_sparse_local *L)
{
    free(L->cells.start);
    free(L->cells.xyz);
    free(L->vol);
    free(L->found);
    memset(L, 0, sizeof *L);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 1;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

/* Room for `parts` particles (positions and volumes) and `found` cells. */
static int local_reserve(pmi_sparse_local *L, size_t parts, size_t found)
{
    if (parts > L->cap_parts) {
        size_t c = L->cap_parts ? L->cap_parts : 256;
        while (c < parts)
            c *= 2;
        float *x = realloc(L->cells.xyz, c * 3 * sizeof *x);
        if (x) L->cells.xyz = x;
        double *v = x ? realloc(L->vol, c * sizeof *v) : NULL;
        if (v) L->vol = v;
        if (!x || !v) return 0;
        L->cap_parts = c;
    }
    return grow((void **)&L->found, &L->cap_found, found, sizeof *L->found);
}

int pmi_sparse_local_build(const pmi_sparse_plan *plan, const uint64_t c0[3], const uint64_t c1[3],
                           int with_vol, pmi_sparse_local *L)
{
    const pmi_sparse_geom *G = &plan->G;
    const cpu_plan *P = plan->state;
    pmi_field_layout *lay = &L->lay;
    memset(lay, 0, sizeof *lay);
    lay->spacing = G->rule.s;
    lay->block = (size_t)G->B;
    lay->reach = G->rule.cell_reach;
    for (int a = 0; a < 3; a++) {
        L->c0[a] = c0[a];
        lay->lo[a] = G->g0[a] + (int64_t)(c0[a] * G->B);
        uint64_t hi = c1[a] * G->B < G->dims[a] ? c1[a] * G->B : G->dims[a];
        lay->dims[a] = (size_t)(hi - c0[a] * G->B);
        lay->cdims[a] = (size_t)(c1[a] - c0[a]);
    }
    lay->points = lay->dims[0] * lay->dims[1] * lay->dims[2];
    lay->ncells = lay->cdims[0] * lay->cdims[1] * lay->cdims[2];
    size_t cap = L->cap_cells;
    if (!grow((void **)&L->cells.start, &cap, lay->ncells + 1, sizeof(uint32_t))) return 0;
    L->cap_cells = cap;
    L->nfound = 0;
    uint32_t cur = 0;
    size_t lid = 0;
    const size_t ncx = lay->cdims[0];
    for (uint64_t cz = c0[2]; cz < c1[2]; cz++)
        for (uint64_t cy = c0[1]; cy < c1[1]; cy++) {
            size_t u = pmi_lower_bound_u64(P->ckey, P->m, pmi_cell_key(G, c0[0], cy, cz));
            for (size_t lx = 0; lx < ncx; lx++, lid++) {
                L->cells.start[lid] = cur;
                if (u >= P->m || P->ckey[u] != pmi_cell_key(G, c0[0] + lx, cy, cz)) continue;
                uint32_t g = P->cstart[u], cnt = P->cstart[u + 1] - g;
                if (!local_reserve(L, (size_t)cur + cnt, L->nfound + 1)) return 0;
                L->found[L->nfound].local = lid;
                L->found[L->nfound++].global = g;
                memcpy(L->cells.xyz + 3 * (size_t)cur, P->xyz + 3 * (size_t)g,
                       3 * (size_t)cnt * sizeof(float));
                if (with_vol) memcpy(L->vol + cur, P->vol + g, (size_t)cnt * sizeof(double));
                cur += cnt;
                u++;
            }
        }
    L->cells.start[lid] = cur;
    L->cells.n = cur;
    return 1;
}

void pmi_cpu_sparse_plan_free(pm_context *ctx, pmi_sparse_plan *plan)
{
    (void)ctx;
    cpu_plan *P = plan->state;
    if (P) {
        free(P->xyz);
        free(P->vol);
        free(P->ckey);
        free(P->cstart);
        free(P);
    }
    free(plan->bricks);
    plan->bricks = NULL;
    plan->state = NULL;
}

/* The particles' volumes, brick by brick: each brick's own cells, with
 * their neighbours as sources, written to the global slots. */
static pm_status plan_volumes(pm_context *ctx, pmi_sparse_plan *plan, cpu_plan *P)
{
    const pmi_sparse_geom *G = &plan->G;
    int failed = 0;
    const long long nb = (long long)plan->nbricks;
#pragma omp parallel num_threads(ctx->num_threads)
    {
        pmi_sparse_local L;
        memset(&L, 0, sizeof L);
        double *lvol = NULL;
        size_t lcap = 0;
#pragma omp for schedule(dynamic, 4)
        for (long long q = 0; q < nb; q++) {
            if (failed) continue;
            uint64_t b[3], o0[3], o1[3], s0[3], s1[3];
            pmi_brick_unkey(G, plan->bricks[q], b);
            for (int a = 0; a < 3; a++) {
                o0[a] = b[a] * G->bc;
                o1[a] = o0[a] + G->bc < G->cdims[a] ? o0[a] + G->bc : G->cdims[a];
                s0[a] = o0[a] > 0 ? o0[a] - 1 : 0;
                s1[a] = o1[a] < G->cdims[a] ? o1[a] + 1 : G->cdims[a];
            }
            if (!pmi_sparse_local_build(plan, s0, s1, 0, &L) ||
                !grow((void **)&lvol, &lcap, L.cells.n + 1, sizeof(double))) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            size_t lc0[3], lc1[3];
            for (int a = 0; a < 3; a++) {
                lc0[a] = (size_t)(o0[a] - s0[a]);
                lc1[a] = (size_t)(o1[a] - s0[a]);
            }
            pmi_sph_volumes_box(&L.lay, &L.cells, P->h, P->mass, lc0, lc1, lvol);
            const size_t *cd = L.lay.cdims;
            for (size_t f = 0; f < L.nfound; f++) {
                size_t lid = L.found[f].local;
                size_t lx = lid % cd[0], ly = (lid / cd[0]) % cd[1], lz = lid / (cd[0] * cd[1]);
                if (lx < lc0[0] || lx >= lc1[0] || ly < lc0[1] || ly >= lc1[1] || lz < lc0[2] ||
                    lz >= lc1[2])
                    continue;
                uint32_t s = L.cells.start[lid], e = L.cells.start[lid + 1];
                memcpy(P->vol + L.found[f].global, lvol + s, (size_t)(e - s) * sizeof(double));
            }
        }
        free(lvol);
        pmi_sparse_local_free(&L);
    }
    if (failed)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: no memory for the bricks' cell lists");
    return PM_STATUS_OK;
}

pm_status pmi_cpu_sparse_plan(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                              size_t brick_points, pm_normals normals, pmi_sparse_plan *plan)
{
    const double t0 = pmi_now_ms();
    double bmin[3], bmax[3];
    size_t kept;
    pm_status st = pmi_particles_box(ctx, "pm_reconstruct", xyz, n, p, bmin, bmax, &kept);
    if (st != PM_STATUS_OK) return st;
    if (plan->have_box) {
        memcpy(bmin, plan->box_min, sizeof bmin);
        memcpy(bmax, plan->box_max, sizeof bmax);
    }
    pmi_sparse_geom *G = &plan->G;
    st = pmi_sparse_geom_init(p, bmin, bmax, brick_points, normals, G);
    if (st != PM_STATUS_OK) return st;
    plan->kept = kept;
    plan->dropped = n - kept;

    /* Sorted arrays: 12 + 8 bytes per particle kept, the sort's 24. */
    double need = (double)kept * (12.0 + 8.0 + 24.0 + 24.0) + 16.0 * (double)ctx->num_threads;
    if (!(need <= (double)p->max_memory_bytes))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: %zu particles need %.4g GB to sort, more than the "
                         "memory limit of %.4g GB (max_memory_bytes, --max-memory)",
                         kept, need / 1e9, (double)p->max_memory_bytes / 1e9);
    cpu_plan *P = calloc(1, sizeof *P);
    uint64_t *keys = malloc(kept * sizeof *keys), *tk = malloc(kept * sizeof *tk);
    uint32_t *idx = malloc(kept * sizeof *idx), *tv = malloc(kept * sizeof *tv);
    if (P) {
        P->xyz = malloc(kept * 3 * sizeof *P->xyz);
        P->vol = malloc(kept * sizeof *P->vol);
    }
    plan->state = P;
    if (!P || !keys || !tk || !idx || !tv || !P->xyz || !P->vol) {
        free(keys), free(tk), free(idx), free(tv);
        pmi_cpu_sparse_plan_free(ctx, plan);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory to sort %zu particles",
                         kept);
    }
    P->n = kept;
    P->h = plan->h = G->rule.h;
    P->mass = plan->mass = pmi_sph_mass(p->radius, p->rest_density);

    /* Cell keys of the kept particles, in input order. */
    const double edge = (double)G->B * G->rule.s;
    const int aabb = p->use_aabb;
    const double *amin = p->aabb_min, *amax = p->aabb_max;
    size_t k = 0;
    if (!aabb) {
        /* Every particle kept: keys in parallel, slot = input index. */
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) if (n > 65536)
        for (long long li = 0; li < (long long)n; li++) {
            const size_t i = (size_t)li;
            const float *q = xyz + 3 * i;
            uint64_t c[3];
            for (int a = 0; a < 3; a++)
                c[a] = (uint64_t)pmi_cell_of(q[a], G->origin[a], edge, (long long)G->cdims[a]);
            keys[i] = pmi_cell_key(G, c[0], c[1], c[2]);
            idx[i] = (uint32_t)i;
        }
        k = n;
    }
    for (size_t i = 0; aabb && i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!(q[0] >= amin[0] && q[0] <= amax[0] && q[1] >= amin[1] && q[1] <= amax[1] &&
              q[2] >= amin[2] && q[2] <= amax[2]))
            continue;
        uint64_t c[3];
        for (int a = 0; a < 3; a++)
            c[a] = (uint64_t)pmi_cell_of(q[a], G->origin[a], edge, (long long)G->cdims[a]);
        keys[k] = pmi_cell_key(G, c[0], c[1], c[2]);
        idx[k++] = (uint32_t)i;
    }
    unsigned bits = G->cshift[2] + pmi_bits_for(G->cdims[2]);
    pmi_radix_sort_u64(keys, idx, kept, bits, tk, tv, ctx->num_threads);
    free(tk);
    free(tv);
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) if (kept > 65536)
    for (long long ls = 0; ls < (long long)kept; ls++)
        memcpy(P->xyz + 3 * (size_t)ls, xyz + 3 * (size_t)idx[ls], 3 * sizeof(float));
    free(idx);

    /* Occupied cells (the runs of equal keys) and the bricks they reach:
     * counted per block of threads, placed by a scan, written in order. */
    const int nth = ctx->num_threads > 0 && kept > 65536 ? ctx->num_threads : 1;
    size_t *part = calloc((size_t)nth + 1, sizeof *part);
    if (!part) {
        free(keys);
        pmi_cpu_sparse_plan_free(ctx, plan);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory");
    }
    size_t m = 0;
#pragma omp parallel num_threads(nth)
    {
        int t = 0, nt = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        nt = omp_get_num_threads();
#endif
        const size_t b = kept * (size_t)t / (size_t)nt, e = kept * (size_t)(t + 1) / (size_t)nt;
        size_t c = 0;
        for (size_t q = b; q < e; q++)
            c += q == 0 || keys[q] != keys[q - 1];
        part[t + 1] = c;
#pragma omp barrier
#pragma omp single
        {
            for (int u = 0; u < nt; u++)
                part[u + 1] += part[u];
            m = part[nt];
            P->ckey = malloc((m ? m : 1) * sizeof *P->ckey);
            P->cstart = malloc((m + 1) * sizeof *P->cstart);
        }
        if (P->ckey && P->cstart) {
            size_t o = part[t];
            for (size_t q = b; q < e; q++)
                if (q == 0 || keys[q] != keys[q - 1]) {
                    P->ckey[o] = keys[q];
                    P->cstart[o++] = (uint32_t)q;
                }
        }
    }
    free(part);
    if (!P->ckey || !P->cstart) {
        free(keys);
        pmi_cpu_sparse_plan_free(ctx, plan);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory for %zu cells", m);
    }
    P->cstart[m] = (uint32_t)kept;
    P->m = m;
    free(keys);

    /* The bricks the particles reach, each once, ascending. */
    size_t *bcount = malloc((m + 1) * sizeof *bcount);
    if (!bcount) {
        pmi_cpu_sparse_plan_free(ctx, plan);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory");
    }
    bcount[0] = 0;
#pragma omp parallel for num_threads(nth) schedule(static)
    for (long long lc = 0; lc < (long long)m; lc++) {
        uint64_t cc[3], lo, hi;
        size_t cnt = 1;
        pmi_cell_unkey(G, P->ckey[lc], cc);
        for (int a = 0; a < 3; a++) {
            pmi_cell_bricks(G, a, cc[a], &lo, &hi);
            cnt *= (size_t)(hi - lo + 1);
        }
        bcount[lc + 1] = cnt;
    }
    for (size_t c = 0; c < m; c++)
        bcount[c + 1] += bcount[c];
    size_t nb = bcount[m];
    uint64_t *bk = malloc((nb ? nb : 1) * sizeof *bk), *bt = malloc((nb ? nb : 1) * sizeof *bt);
    if (!bk || !bt) {
        free(bk), free(bt), free(bcount);
        pmi_cpu_sparse_plan_free(ctx, plan);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_reconstruct: no memory for %zu brick keys",
                         nb);
    }
#pragma omp parallel for num_threads(nth) schedule(static)
    for (long long lc = 0; lc < (long long)m; lc++) {
        uint64_t cc[3], lo[3], hi[3], b[3];
        size_t o = bcount[lc];
        pmi_cell_unkey(G, P->ckey[lc], cc);
        for (int a = 0; a < 3; a++)
            pmi_cell_bricks(G, a, cc[a], &lo[a], &hi[a]);
        for (b[2] = lo[2]; b[2] <= hi[2]; b[2]++)
            for (b[1] = lo[1]; b[1] <= hi[1]; b[1]++)
                for (b[0] = lo[0]; b[0] <= hi[0]; b[0]++)
                    bk[o++] = pmi_brick_key(G, b);
    }
    free(bcount);
    pmi_radix_sort_u64(bk, NULL, nb, G->bshift[2] + pmi_bits_for(G->bdims[2]), bt, NULL,
                       ctx->num_threads);
    free(bt);
    size_t u = 0;
    for (size_t i = 0; i < nb; i++)
        if (i == 0 || bk[i] != bk[i - 1]) bk[u++] = bk[i];
    /* Shrink to the distinct bricks (keep the block if that fails). */
    uint64_t *shrunk = realloc(bk, (u ? u : 1) * sizeof *bk);
    plan->bricks = shrunk ? shrunk : bk;
    plan->nbricks = u;
    plan->occupied_cells = m;
    plan->bytes = kept * (12 + 8) + m * 12 + u * 8;
    plan->neighbours_ms = pmi_now_ms() - t0;

    const double t1 = pmi_now_ms();
    st = plan_volumes(ctx, plan, P);
    plan->density_ms = pmi_now_ms() - t1;
    if (st != PM_STATUS_OK) pmi_cpu_sparse_plan_free(ctx, plan);
    return st;
}


/* The field of brick b over its window [w0, w1) into field (x fastest). */
static int brick_field(const pmi_sparse_plan *plan, pmi_sparse_local *L, const uint64_t b[3],
                       float *field, double *scratch, uint64_t w0[3], uint64_t w1[3])
{
    const pmi_sparse_geom *G = &plan->G;
    const cpu_plan *P = plan->state;
    uint64_t c0[3], c1[3];
    pmi_brick_window(G, b, w0, w1);
    pmi_source_cells(G, w0, w1, c0, c1);
    if (!pmi_sparse_local_build(plan, c0, c1, 1, L)) return 0;
    size_t lw0[3], lw1[3];
    for (int a = 0; a < 3; a++) {
        lw0[a] = (size_t)(w0[a] - c0[a] * G->B);
        lw1[a] = (size_t)(w1[a] - c0[a] * G->B);
    }
    pmi_sph_field_window(&L->lay, &L->cells, P->h, L->vol, lw0, lw1, field, scratch);
    return 1;
}

pm_status pmi_cpu_sparse_brick_field(pm_context *ctx, const pmi_sparse_plan *plan, size_t q,
                                     float *field, uint64_t w0[3], uint64_t w1[3])
{
    (void)ctx;
    pmi_sparse_local L;
    memset(&L, 0, sizeof L);
    double *scratch = malloc(pmi_sph_field_scratch((size_t)plan->G.B) * sizeof *scratch);
    uint64_t b[3];
    pmi_brick_unkey(&plan->G, plan->bricks[q], b);
    int ok = scratch && brick_field(plan, &L, b, field, scratch, w0, w1);
    free(scratch);
    pmi_sparse_local_free(&L);
    return ok ? PM_STATUS_OK : pmi_error(PM_STATUS_OUT_OF_MEMORY, "brick field: no memory");
}

pm_status pmi_cpu_sparse_pieces(pm_context *ctx, pmi_sparse_plan *plan, size_t first, size_t count,
                                double iso, const pm_isosurface_options *options,
                                pm_mesh_piece *pieces, double *field_ms, double *extract_ms)
{
    const pmi_sparse_geom *G = &plan->G;
    const pm_lattice lat = pmi_sparse_lattice(G);
    const size_t wmax = (size_t)(G->brick + (uint64_t)G->ghost_lo + (uint64_t)G->ghost_hi);
    const size_t field_n = wmax * wmax * wmax;
    const size_t scratch_n = pmi_sph_field_scratch((size_t)G->B);
    const size_t bits_n = ((wmax + 63) / 64) * wmax * wmax;
    int failed = 0;
    double fms = 0.0, ems = 0.0;
    const long long cnt = (long long)count;
#pragma omp parallel num_threads(ctx->num_threads) reduction(+ : fms, ems)
    {
        pmi_sparse_local L;
        memset(&L, 0, sizeof L);
        float *field = malloc(field_n * sizeof *field);
        double *scratch = malloc(scratch_n * sizeof *scratch);
        uint64_t *bits = malloc(bits_n * sizeof *bits);
        if (!field || !scratch || !bits) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long long q = 0; q < cnt; q++) {
            if (failed) continue;
            const double ta = pmi_now_ms();
            uint64_t b[3], o0[3], o1[3], w0[3], w1[3];
            pmi_brick_unkey(G, plan->bricks[first + (size_t)q], b);
            pmi_brick_owned(G, b, o0, o1);
            if (!brick_field(plan, &L, b, field, scratch, w0, w1)) {
#pragma omp atomic write
                failed = 1;
                continue;
            }
            const double tb = pmi_now_ms();
            pm_volume win;
            memset(&win, 0, sizeof win);
            win.data = field;
            win.type = PM_SAMPLE_F32;
            win.nx = (size_t)(w1[0] - w0[0]);
            win.ny = (size_t)(w1[1] - w0[1]);
            win.nz = (size_t)(w1[2] - w0[2]);
            win.row_stride = win.nx;
            win.slice_stride = win.nx * win.ny;
            pm_lattice_box own;
            for (int a = 0; a < 3; a++) {
                own.lo[a] = o0[a];
                own.dims[a] = o1[a] - o0[a];
            }
            pmi_piece_job J;
            pmi_piece_job_init(&J, &win, w0, &lat, &own, iso, options);
            if (pmi_piece_extract(&J, bits, &pieces[q]) != PM_STATUS_OK) {
#pragma omp atomic write
                failed = 1;
            }
            const double tc = pmi_now_ms();
            fms += tb - ta;
            ems += tc - tb;
        }
        free(field);
        free(scratch);
        free(bits);
        pmi_sparse_local_free(&L);
    }
    *field_ms = fms;
    *extract_ms = ems;
    if (failed)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_reconstruct: no memory for the bricks' fields or pieces");
    return PM_STATUS_OK;
}
