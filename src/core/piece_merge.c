/* Mesh pieces with global identities joined into one mesh
 * (pm_mesh_pieces_merge, docs/scale.md): vertices ordered by vertex key,
 * triangles by cell key then each piece's order, which is pm_isosurface's
 * order, so pieces of a tiled lattice give its mesh byte for byte. The
 * orders come from LSD radix sorts (stable), the indices from each
 * triangle's keys: a binary search in its own piece first (most
 * triangles' vertices are their piece's), the merged key array else.
 * Host memory; the result is copied into context memory when asked. */
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <string.h>

#include "core/backend.h"
#include "core/mesh_out.h"
#include "core/sparse.h"
#include "core/util.h"

void pmi_radix_sort_u64(uint64_t *keys, uint32_t *vals, size_t n, unsigned bits, uint64_t *tk,
                        uint32_t *tv, int threads)
{
    enum { D = 11, R = 1 << D };
    const unsigned passes = (bits + D - 1) / D;
    /* Threads take contiguous blocks; a digit's slots go to the blocks in
     * order (digit-major offsets), so every pass stays stable. */
    if (threads < 1 || n < ((size_t)1 << 16)) threads = 1;
    if (threads > 64) threads = 64;
    size_t *count = malloc((size_t)threads * R * sizeof *count);
    if (!count) threads = 1, count = malloc(R * sizeof *count);
    uint64_t *sk = keys, *dk = tk;
    uint32_t *sv = vals, *dv = tv;
    for (unsigned p = 0; p < passes; p++) {
        const unsigned sh = p * D;
        int skip = 0;
#pragma omp parallel num_threads(threads)
        {
            int t = 0, nt = 1;
#ifdef _OPENMP
            t = omp_get_thread_num();
            nt = omp_get_num_threads();
#endif
            const size_t b = n * (size_t)t / (size_t)nt, e = n * (size_t)(t + 1) / (size_t)nt;
            size_t *c = count + (size_t)t * R;
            memset(c, 0, R * sizeof *c);
            for (size_t i = b; i < e; i++)
                c[(sk[i] >> sh) & (R - 1)]++;
#pragma omp barrier
#pragma omp single
            {
                /* A digit every key shares moves nothing: skip the pass. */
                const size_t d0 = n ? (sk[0] >> sh) & (R - 1) : 0;
                size_t same = 0, sum = 0;
                for (int u = 0; u < nt; u++)
                    same += count[(size_t)u * R + d0];
                skip = n && same == n;
                for (size_t d = 0; d < R && !skip; d++)
                    for (int u = 0; u < nt; u++) {
                        size_t x = count[(size_t)u * R + d];
                        count[(size_t)u * R + d] = sum;
                        sum += x;
                    }
            }
            if (!skip)
                for (size_t i = b; i < e; i++) {
                    size_t at = c[(sk[i] >> sh) & (R - 1)]++;
                    dk[at] = sk[i];
                    if (sv) dv[at] = sv[i];
                }
        }
        if (skip) continue;
        uint64_t *xk = sk;
        sk = dk, dk = xk;
        uint32_t *xv = sv;
        sv = dv, dv = xv;
    }
    free(count);
    if (sk != keys) {
        memcpy(keys, sk, n * sizeof *keys);
        if (vals) memcpy(vals, sv, n * sizeof *vals);
    }
}

/* Index of key in a[0..n) (ascending), or n. Branch-free halving (the
 * compare becomes a conditional move): the merge looks up every triangle
 * corner, and a mispredicted branch per step would dominate it. */
static size_t find_key(const uint64_t *a, size_t n, uint64_t key)
{
    if (!n) return 0;
    const uint64_t *base = a;
    size_t len = n;
    while (len > 1) {
        size_t half = len / 2;
        base += (size_t)(base[half - 1] < key) * half;
        len -= half;
    }
    size_t i = (size_t)(base - a) + (*base < key);
    return i < n && a[i] == key ? i : n;
}

/* Which piece holds global triangle (or vertex) g, from the offsets. */
/* The first index r >= 0 with a[r] >= key in a[0..n) (ascending), found
 * from `from` by doubling steps, then halving: O(log distance). */
static size_t gallop(const uint64_t *a, size_t n, size_t from, uint64_t key)
{
    if (from >= n) from = n ? n - 1 : 0;
    if (!n) return 0;
    size_t lo, hi; /* a[lo] < key <= a[hi], with lo = -1 / hi = n as sentinels */
    if (a[from] < key) {
        size_t step = 1;
        lo = from;
        while (lo + step < n && a[lo + step] < key) {
            lo += step;
            step *= 2;
        }
        hi = lo + step < n ? lo + step : n;
        lo++;
    } else {
        size_t step = 1;
        hi = from;
        while (hi >= step && a[hi - step] >= key) {
            hi -= step;
            step *= 2;
        }
        lo = hi >= step ? hi - step + 1 : 0;
    }
    return lo + pmi_lower_bound_u64(a + lo, hi - lo, key); /* the first >= key, else hi */
}

static size_t piece_of(const uint64_t *base, size_t count, uint64_t g)
{
    size_t lo = 0, hi = count; /* base[lo] <= g < base[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (base[mid] <= g)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* The checks of the pieces: one lattice, keys ascending and inside it,
 * normals everywhere or nowhere. */
static pm_status check_pieces(const pm_mesh_piece *pieces, size_t count, int normals,
                              unsigned *vbits, unsigned *cbits)
{
    const uint64_t *N = pieces[0].lattice_dims;
    uint64_t nvk, ncells;
    if (N[0] < 2 || N[1] < 2 || N[2] < 2 || __builtin_mul_overflow(N[0], N[1], &nvk) ||
        __builtin_mul_overflow(nvk, N[2], &nvk) || __builtin_mul_overflow(nvk, 3, &nvk))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mesh_pieces_merge: piece 0's lattice %llu x %llu x %llu is not >= 2 "
                         "per axis with 3 * points < 2^64",
                         (unsigned long long)N[0], (unsigned long long)N[1],
                         (unsigned long long)N[2]);
    ncells = (N[0] - 1) * (N[1] - 1) * (N[2] - 1);
    *vbits = pmi_bits_for(nvk);
    *cbits = pmi_bits_for(ncells);
    for (size_t p = 0; p < count; p++) {
        const pm_mesh_piece *P = &pieces[p];
        if (memcmp(P->lattice_dims, N, sizeof P->lattice_dims) != 0)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_mesh_pieces_merge: piece %zu's lattice differs from piece 0's", p);
        if ((P->num_vertices && (!P->vertex_keys || !P->positions)) ||
            (P->num_triangles && (!P->triangles || !P->cell_keys)))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_mesh_pieces_merge: piece %zu has NULL arrays", p);
        if (P->num_vertices && normals != (P->normals != NULL))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_mesh_pieces_merge: piece %zu %s normals, options->normals %s", p,
                             normals ? "has no" : "has", normals ? "asks for them" : "is NONE");
        for (uint64_t v = 0; v < P->num_vertices; v++)
            if (P->vertex_keys[v] >= nvk || (v && P->vertex_keys[v] <= P->vertex_keys[v - 1]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "pm_mesh_pieces_merge: piece %zu, vertex %llu: key %llu is not "
                                 "ascending or not in the lattice",
                                 p, (unsigned long long)v, (unsigned long long)P->vertex_keys[v]);
        for (uint64_t t = 0; t < P->num_triangles; t++)
            if (P->cell_keys[t] >= ncells || (t && P->cell_keys[t] < P->cell_keys[t - 1]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "pm_mesh_pieces_merge: piece %zu, triangle %llu: cell key %llu is "
                                 "not ascending or not in the lattice",
                                 p, (unsigned long long)t, (unsigned long long)P->cell_keys[t]);
    }
    return PM_STATUS_OK;
}

/* The merged indexed mesh in host arrays (pos, nrm or NULL, idx). */
typedef struct merged {
    uint64_t nv, nt, active;
    float *pos, *nrm;
    uint32_t *idx;
} merged;

static pm_status merge_host(pm_context *ctx, const pm_mesh_piece *pieces, size_t count, int normals,
                            unsigned vbits, unsigned cbits, merged *M)
{
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    uint64_t nv = 0, nt = 0, act = 0;
    uint64_t *vbase = malloc((count + 1) * sizeof *vbase),
             *tbase = malloc((count + 1) * sizeof *tbase);
    if (!vbase || !tbase) {
        free(vbase), free(tbase);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_pieces_merge: no memory");
    }
    for (size_t p = 0; p < count; p++) {
        vbase[p] = nv;
        tbase[p] = nt;
        nv += pieces[p].num_vertices;
        nt += pieces[p].num_triangles;
        act += pieces[p].active_cells;
    }
    vbase[count] = nv;
    tbase[count] = nt;
    if (nv > UINT32_MAX || nt > UINT32_MAX) {
        free(vbase), free(tbase);
        return nv > UINT32_MAX ? pmi_mesh_index_overflow(nv)
                               : pmi_error(PM_STATUS_OVERFLOW,
                                           "pm_mesh_pieces_merge: %llu triangles, at most 2^32 - 1",
                                           (unsigned long long)nt);
    }
    M->nv = nv;
    M->nt = nt;
    M->active = act;
    /* Pieces already in key order (z slabs of a volume, in order: each
     * piece's keys above the previous pieces'): the concatenation is the
     * merged order, and neither the sorts nor their arrays are needed. */
    int ordered = 1;
    {
        uint64_t lastv = 0, lastc = 0;
        int anyv = 0, anyc = 0;
        for (size_t p = 0; p < count && ordered; p++) {
            const pm_mesh_piece *P = &pieces[p];
            if (P->num_vertices) {
                if (anyv && P->vertex_keys[0] <= lastv) ordered = 0;
                lastv = P->vertex_keys[P->num_vertices - 1];
                anyv = 1;
            }
            if (P->num_triangles) {
                if (anyc && P->cell_keys[0] <= lastc) ordered = 0;
                lastc = P->cell_keys[P->num_triangles - 1];
                anyc = 1;
            }
        }
    }
    const size_t big = ordered ? 0 : nv > nt ? (size_t)nv : (size_t)nt;
    uint64_t *keys = NULL, *tk = NULL;
    uint32_t *src = NULL, *tv = NULL, *vrank = NULL, *trank = NULL;
    if (!ordered) {
        keys = malloc((big ? big : 1) * sizeof *keys);
        tk = malloc((big ? big : 1) * sizeof *tk);
        src = malloc((big ? big : 1) * sizeof *src);
        tv = malloc((big ? big : 1) * sizeof *tv);
        vrank = malloc((nv ? nv : 1) * sizeof *vrank);
        trank = malloc((nt ? nt : 1) * sizeof *trank);
    }
    uint64_t *vkeys = malloc((nv ? nv : 1) * sizeof *vkeys);
    /* The arrays become the mesh's: the context's recycled ones where it
     * has them (host_arrays.c). */
    M->pos = pmi_host_array_get(ctx, (size_t)(nv ? nv : 1) * 3 * sizeof(float));
    M->nrm = normals ? pmi_host_array_get(ctx, (size_t)(nv ? nv : 1) * 3 * sizeof(float)) : NULL;
    M->idx = pmi_host_array_get(ctx, (size_t)(nt ? nt : 1) * 3 * sizeof(uint32_t));
    pm_status st = PM_STATUS_OK;
    if ((!ordered && (!keys || !tk || !src || !tv || !vrank || !trank)) || !vkeys || !M->pos ||
        (normals && !M->nrm) || !M->idx) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                       "pm_mesh_pieces_merge: no memory for %llu vertices, %llu triangles",
                       (unsigned long long)nv, (unsigned long long)nt);
        goto done;
    }

    if (ordered) {
        /* Concatenation: the arrays in bulk, each corner's index by a
         * galloping search in the merged keys from the last one found
         * (a triangle's corners are near its predecessor's). */
        for (size_t p = 0; p < count; p++) {
            const pm_mesh_piece *P = &pieces[p];
            const size_t nvp = (size_t)P->num_vertices;
            if (!nvp) continue; /* its arrays may be NULL */
            memcpy(vkeys + vbase[p], P->vertex_keys, nvp * sizeof *vkeys);
            pmi_memcpy_threads(M->pos + 3 * vbase[p], P->positions, nvp * 3 * sizeof(float));
            if (M->nrm)
                pmi_memcpy_threads(M->nrm + 3 * vbase[p], P->normals, nvp * 3 * sizeof(float));
        }
        int missing = 0;
        size_t miss_piece = 0;
        uint64_t miss_key = 0;
        for (size_t p = 0; p < count; p++) {
            const pm_mesh_piece *P = &pieces[p];
            const long long nc = (long long)(3 * P->num_triangles);
            uint32_t *out = M->idx + 3 * tbase[p];
#pragma omp parallel num_threads(threads) if (nc > 196608)
            {
                size_t cur = (size_t)vbase[p];
#pragma omp for schedule(static)
                for (long long c = 0; c < nc; c++) {
                    const uint64_t key = P->triangles[c];
                    cur = gallop(vkeys, (size_t)nv, cur, key);
                    if (cur >= nv || vkeys[cur] != key) {
#pragma omp critical
                        {
                            if (!missing) miss_piece = p, miss_key = key;
                            missing = 1;
                        }
                        cur = (size_t)vbase[p];
                        out[c] = 0;
                        continue;
                    }
                    out[c] = (uint32_t)cur;
                }
            }
        }
        if (missing)
            st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                           "pm_mesh_pieces_merge: a triangle of piece %zu names vertex key %llu, "
                           "which no piece has (a neighbouring piece is missing)",
                           miss_piece, (unsigned long long)miss_key);
        goto done;
    }

    /* Vertex order: ascending key; each key once. */
    for (size_t p = 0; p < count; p++)
        for (uint64_t v = 0; v < pieces[p].num_vertices; v++) {
            keys[vbase[p] + v] = pieces[p].vertex_keys[v];
            src[vbase[p] + v] = (uint32_t)(vbase[p] + v);
        }
    pmi_radix_sort_u64(keys, src, (size_t)nv, vbits, tk, tv, threads);
    for (uint64_t r = 0; r < nv; r++) {
        if (r && keys[r] == keys[r - 1]) {
            st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                           "pm_mesh_pieces_merge: vertex key %llu is in pieces %zu and %zu",
                           (unsigned long long)keys[r], piece_of(vbase, count, src[r - 1]),
                           piece_of(vbase, count, src[r]));
            goto done;
        }
        vrank[src[r]] = (uint32_t)r;
        vkeys[r] = keys[r];
    }

    /* Triangle order: ascending cell key, stable (a cell's triangles keep
     * their piece's order); a cell in one piece only. */
    for (size_t p = 0; p < count; p++)
        for (uint64_t t = 0; t < pieces[p].num_triangles; t++) {
            keys[tbase[p] + t] = pieces[p].cell_keys[t];
            src[tbase[p] + t] = (uint32_t)(tbase[p] + t);
        }
    pmi_radix_sort_u64(keys, src, (size_t)nt, cbits, tk, tv, threads);
    for (uint64_t t = 0; t < nt; t++) {
        if (t && keys[t] == keys[t - 1] &&
            (src[t] != src[t - 1] + 1 ||
             piece_of(tbase, count, src[t]) != piece_of(tbase, count, src[t - 1]))) {
            st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                           "pm_mesh_pieces_merge: cell key %llu is in pieces %zu and %zu",
                           (unsigned long long)keys[t], piece_of(tbase, count, src[t - 1]),
                           piece_of(tbase, count, src[t]));
            goto done;
        }
        trank[src[t]] = (uint32_t)t;
    }

    /* A bucket index over the merged keys for the vertices a triangle
     * takes from another piece: the key's bucket, then a short search. */
    uint64_t kmin = nv ? vkeys[0] : 0, span = nv ? vkeys[nv - 1] - kmin : 0;
    unsigned shift = 0;
    while ((span >> shift) >= ((uint64_t)1 << 20))
        shift++;
    const size_t nbk = (size_t)(span >> shift) + 2;
    uint32_t *bucket = malloc(nbk * sizeof *bucket);
    if (!bucket) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_pieces_merge: no memory");
        goto done;
    }
    for (size_t b = 0, r = 0; b < nbk; b++) {
        while (r < nv && ((vkeys[r] - kmin) >> shift) < b)
            r++;
        bucket[b] = (uint32_t)r;
    }

    /* Each piece's vertices to their place, its triangles' keys to indices. */
    int missing = 0;
    size_t miss_piece = 0;
    uint64_t miss_key = 0;
    const long long sc = (long long)count;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16) if (nt > 65536)
    for (long long lp = 0; lp < sc; lp++) {
        const size_t p = (size_t)lp;
        const pm_mesh_piece *P = &pieces[p];
        for (uint64_t v = 0; v < P->num_vertices; v++) {
            uint32_t r = vrank[vbase[p] + v];
            memcpy(M->pos + 3 * (size_t)r, P->positions + 3 * v, 3 * sizeof(float));
            if (M->nrm) memcpy(M->nrm + 3 * (size_t)r, P->normals + 3 * v, 3 * sizeof(float));
        }
        for (uint64_t t = 0; t < P->num_triangles; t++) {
            uint32_t *o = M->idx + 3 * (size_t)trank[tbase[p] + t];
            for (int q = 0; q < 3; q++) {
                uint64_t key = P->triangles[3 * t + (uint64_t)q];
                size_t at = find_key(P->vertex_keys, (size_t)P->num_vertices, key);
                if (at < P->num_vertices) {
                    o[q] = vrank[vbase[p] + at];
                    continue;
                }
                at = nv;
                if (key >= kmin && ((key - kmin) >> shift) + 1 < nbk) {
                    size_t b = (size_t)((key - kmin) >> shift), b0 = bucket[b];
                    size_t f = find_key(vkeys + b0, bucket[b + 1] - b0, key);
                    if (f < bucket[b + 1] - b0) at = b0 + f;
                }
                if (at == nv) {
#pragma omp critical
                    {
                        if (!missing) miss_piece = p, miss_key = key;
                        missing = 1;
                    }
                    o[q] = 0;
                    continue;
                }
                o[q] = (uint32_t)at;
            }
        }
    }
    free(bucket);
    if (missing)
        st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                       "pm_mesh_pieces_merge: a triangle of piece %zu names vertex key %llu, "
                       "which no piece has (a neighbouring piece is missing)",
                       miss_piece, (unsigned long long)miss_key);
done:
    free(keys), free(tk), free(src), free(tv), free(vrank), free(trank), free(vkeys);
    free(vbase), free(tbase);
    if (st != PM_STATUS_OK) {
        pmi_host_array_put(ctx, M->pos), pmi_host_array_put(ctx, M->nrm);
        pmi_host_array_put(ctx, M->idx);
        memset(M, 0, sizeof *M);
    }
    return st;
}

/* The merge of a sparse reconstruction's pieces: one per occupied brick of
 * the geometry G, pieces[q] the piece of bricks[q] (ascending keys), each
 * owning its brick's points. No sort: the merged order is known from the
 * bricks. Ascending keys run through the lattice's rows of points (k, j),
 * and row (j, k) lies in the bricks (bx, j / brick, k / brick), ascending
 * bx; a piece's vertices (and its triangles, by cell row) are in row
 * order. So every piece counts its vertices and triangles per owned row,
 * one pass over the layers of bricks (same bz) turns the counts into the
 * rows' first global indices, and each piece writes its rows' runs there.
 * A triangle corner's index is its row's first index in the owning
 * piece (its own, or the neighbour brick's found among the bricks), then
 * a galloping search in the merged keys. Memory: 8 bytes per owned row of
 * every brick, besides the mesh and the merged keys. */
typedef struct brick_rows {
    const pmi_sparse_geom *G;
    const uint64_t *bricks;
    size_t count;
    uint64_t *rbase;  /* count + 1: piece q's rows start at rbase[q] */
    uint32_t *vfirst; /* per row: its vertices' first global index */
    uint32_t *tfirst; /* per row: its triangles' first global index */
} brick_rows;

/* Brick q's owned box and its row of point (j, k) (inside the box). */
static void brick_box(const brick_rows *B, size_t q, uint64_t lo[3], uint64_t hi[3])
{
    uint64_t b[3];
    pmi_brick_unkey(B->G, B->bricks[q], b);
    pmi_brick_owned(B->G, b, lo, hi);
}

/* The piece holding the brick of point (i, j, k): q itself, or a search
 * of the bricks (count when none). */
static size_t brick_of(const brick_rows *B, size_t q, const uint64_t lo[3], const uint64_t hi[3],
                       uint64_t i, uint64_t j, uint64_t k)
{
    if (i >= lo[0] && i < hi[0] && j >= lo[1] && j < hi[1] && k >= lo[2] && k < hi[2]) return q;
    const uint64_t R = B->G->brick, b[3] = {i / R, j / R, k / R};
    const uint64_t key = pmi_brick_key(B->G, b);
    size_t at = pmi_lower_bound_u64(B->bricks, B->count, key);
    return at < B->count && B->bricks[at] == key ? at : B->count;
}

/* Counts per row (in first[]) into first global indices, layer by layer:
 * the order of the rows is slice k, then brick row by, then j, then bx.
 * tot[q]: the piece's own count (vertices or triangles). */
static int rows_to_firsts(const brick_rows *B, uint32_t *first, const uint64_t *tot, int threads)
{
    const pmi_sparse_geom *G = B->G;
    const size_t nq = B->count;
    /* Layers: the runs of bricks with one bz; their totals, scanned. */
    size_t nl = 0;
    for (size_t q = 0; q < nq; q++)
        if (!q || B->bricks[q] >> G->bshift[2] != B->bricks[q - 1] >> G->bshift[2]) nl++;
    size_t *lq = malloc((nl + 1) * sizeof *lq);
    uint64_t *lbase = malloc((nl + 1) * sizeof *lbase);
    if (!lq || !lbase) {
        free(lq), free(lbase);
        return 0;
    }
    nl = 0;
    uint64_t sum = 0;
    for (size_t q = 0; q < nq; q++) {
        if (!q || B->bricks[q] >> G->bshift[2] != B->bricks[q - 1] >> G->bshift[2]) {
            lq[nl] = q;
            lbase[nl++] = sum;
        }
        sum += tot[q];
    }
    lq[nl] = nq;
    lbase[nl] = sum;
    const long long snl = (long long)nl;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long long l = 0; l < snl; l++) {
        const size_t q0 = lq[l], q1 = lq[l + 1];
        uint64_t lo[3], hi[3];
        brick_box(B, q0, lo, hi);
        const uint64_t k0 = lo[2], k1 = hi[2];
        uint64_t run = lbase[l];
        for (uint64_t k = k0; k < k1; k++)
            for (size_t g0 = q0; g0 < q1;) {
                /* The group of bricks with one by: [g0, g1), ascending bx. */
                size_t g1 = g0 + 1;
                while (g1 < q1 && B->bricks[g1] >> G->bshift[1] == B->bricks[g0] >> G->bshift[1])
                    g1++;
                uint64_t glo[3], ghi[3];
                brick_box(B, g0, glo, ghi);
                const uint64_t d1 = ghi[1] - glo[1];
                for (uint64_t j = glo[1]; j < ghi[1]; j++)
                    for (size_t q = g0; q < g1; q++) {
                        uint32_t *f = first + B->rbase[q] + (j - glo[1]) + d1 * (k - k0);
                        const uint32_t c = *f;
                        *f = (uint32_t)run;
                        run += c;
                    }
                g0 = g1;
            }
    }
    free(lq), free(lbase);
    return 1;
}

/* A run of the merge's passes: part `part` of piece q. */
#define MERGE_RUN 16384
typedef struct merge_run {
    size_t q, part;
} merge_run;

static size_t merge_parts(const pm_mesh_piece *P)
{
    const uint64_t n = P->num_vertices > P->num_triangles ? P->num_vertices : P->num_triangles;
    return n > MERGE_RUN ? (size_t)((n + MERGE_RUN - 1) / MERGE_RUN) : 1;
}

/* Cut point x of n sorted keys moved on to the next row's start (the row
 * of a key: key / div), so that every row lies in one part. */
static uint64_t row_cut(const uint64_t *keys, uint64_t n, uint64_t x, uint64_t div)
{
    if (x >= n) return n;
    if (x == 0) return 0;
    const uint64_t r = keys[x - 1] / div;
    while (x < n && keys[x] / div == r)
        x++;
    return x;
}

/* Part `part` of n sorted keys: [*a, *e). */
static void merge_span(size_t part, uint64_t n, const uint64_t *keys, uint64_t div, uint64_t *a,
                       uint64_t *e)
{
    *a = row_cut(keys, n, (uint64_t)part * MERGE_RUN, div);
    *e = row_cut(keys, n, ((uint64_t)part + 1) * MERGE_RUN, div);
}

static pm_status merge_bricks_host(pm_context *ctx, const pmi_sparse_geom *G,
                                   const uint64_t *bricks, const pm_mesh_piece *pieces,
                                   size_t count, int normals, merged *M)
{
    static const char fn[] = "pm_reconstruct (merge)";
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    const uint64_t N0 = G->dims[0], N1 = G->dims[1], N01 = N0 * N1;
    const uint64_t C0 = N0 - 1, C1 = N1 - 1;
    brick_rows B = {G, bricks, count, NULL, NULL, NULL};
    uint64_t *vtot = malloc((count + 1) * sizeof *vtot), *ttot = malloc((count + 1) * sizeof *ttot);
    B.rbase = malloc((count + 1) * sizeof *B.rbase);
    uint64_t nv = 0, nt = 0, act = 0, rows = 0;
    if (!vtot || !ttot || !B.rbase) {
        free(vtot), free(ttot), free(B.rbase);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    }
    for (size_t q = 0; q < count; q++) {
        uint64_t lo[3], hi[3];
        brick_box(&B, q, lo, hi);
        B.rbase[q] = rows;
        rows += (hi[1] - lo[1]) * (hi[2] - lo[2]);
        vtot[q] = pieces[q].num_vertices;
        ttot[q] = pieces[q].num_triangles;
        nv += vtot[q];
        nt += ttot[q];
        act += pieces[q].active_cells;
    }
    B.rbase[count] = rows;
    if (nv > UINT32_MAX || nt > UINT32_MAX) {
        free(vtot), free(ttot), free(B.rbase);
        return nv > UINT32_MAX ? pmi_mesh_index_overflow(nv)
                               : pmi_error(PM_STATUS_OVERFLOW, "%s: %llu triangles, at most 2^32 - 1",
                                           fn, (unsigned long long)nt);
    }
    M->nv = nv;
    M->nt = nt;
    M->active = act;
    merge_run *run = NULL;
    B.vfirst = calloc(rows ? rows : 1, sizeof *B.vfirst);
    B.tfirst = calloc(rows ? rows : 1, sizeof *B.tfirst);
    uint64_t *vkeys = pmi_host_array_get(ctx, (size_t)(nv ? nv : 1) * sizeof *vkeys);
    M->pos = pmi_host_array_get(ctx, (size_t)(nv ? nv : 1) * 3 * sizeof(float));
    M->nrm = normals ? pmi_host_array_get(ctx, (size_t)(nv ? nv : 1) * 3 * sizeof(float)) : NULL;
    M->idx = pmi_host_array_get(ctx, (size_t)(nt ? nt : 1) * 3 * sizeof(uint32_t));
    pm_status st = PM_STATUS_OK;
    if (!B.vfirst || !B.tfirst || !vkeys || !M->pos || (normals && !M->nrm) || !M->idx) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for %llu vertices, %llu triangles",
                       fn, (unsigned long long)nv, (unsigned long long)nt);
        goto done;
    }

    /* The passes' work: each piece's vertices and triangles in runs of
     * about MERGE_RUN (a few large bricks would otherwise keep most
     * threads idle), every run from a row's start to a row's start, so a
     * row is counted and placed by one run. */
    size_t nrun = 0;
    for (size_t q = 0; q < count; q++)
        nrun += merge_parts(&pieces[q]);
    run = malloc((nrun ? nrun : 1) * sizeof *run);
    if (!run) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
        goto done;
    }
    nrun = 0;
    for (size_t q = 0; q < count; q++)
        for (size_t i = 0, np = merge_parts(&pieces[q]); i < np; i++)
            run[nrun++] = (merge_run){q, i};
    const long long sr = (long long)nrun;
    /* Rows: of points (key / 3 / N0) for vertices, of cells (key / C0)
     * for triangles. */
    const uint64_t VROW = 3 * N0, CROW = C0;

    /* Counts per row, each vertex and cell checked to lie in its brick
     * (the first offence by piece, then position, is the one named). */
    int bad = 0;
    size_t bad_q = 0;
    uint64_t bad_at = 0, bad_key = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long long lr = 0; lr < sr; lr++) {
        const size_t q = run[lr].q;
        const pm_mesh_piece *P = &pieces[q];
        uint64_t lo[3], hi[3];
        brick_box(&B, q, lo, hi);
        const uint64_t d1 = hi[1] - lo[1];
        uint32_t *vf = B.vfirst + B.rbase[q], *tf = B.tfirst + B.rbase[q];
        int ok = run[lr].part || !P->num_vertices || !normals == !P->normals;
        uint64_t key = 0, at = 0;
        const uint64_t *vk = P->vertex_keys, *ck = P->cell_keys;
        uint64_t v0, v1, t0, t1;
        merge_span(run[lr].part, P->num_vertices, vk, VROW, &v0, &v1);
        merge_span(run[lr].part, P->num_triangles, ck, CROW, &t0, &t1);
        for (uint64_t v = v0; v < v1 && ok; v++) {
            key = vk[v], at = v;
            const uint64_t p = key / 3, i = p % N0, j = p / N0 % N1, k = p / N01;
            ok = i >= lo[0] && i < hi[0] && j >= lo[1] && j < hi[1] && k >= lo[2] && k < hi[2] &&
                 (!v || key > vk[v - 1]);
            if (ok) vf[(j - lo[1]) + d1 * (k - lo[2])]++;
        }
        for (uint64_t t = t0; t < t1 && ok; t++) {
            key = ck[t], at = P->num_vertices + t;
            const uint64_t i = key % C0, j = key / C0 % C1, k = key / (C0 * C1);
            ok = i >= lo[0] && i < hi[0] && j >= lo[1] && j < hi[1] && k >= lo[2] && k < hi[2] &&
                 (!t || key >= ck[t - 1]);
            if (ok) tf[(j - lo[1]) + d1 * (k - lo[2])]++;
        }
        if (!ok) {
#pragma omp critical
            if (!bad || q < bad_q || (q == bad_q && at < bad_at))
                bad = 1, bad_q = q, bad_at = at, bad_key = key;
        }
    }
    if (bad) {
        st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                       "%s: piece %zu: key %llu is not ascending, not in its brick, or its normals "
                       "do not match",
                       fn, bad_q, (unsigned long long)bad_key);
        goto done;
    }
    if (!rows_to_firsts(&B, B.vfirst, vtot, threads) || !rows_to_firsts(&B, B.tfirst, ttot, threads)) {
        st = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
        goto done;
    }

    /* Vertices: each row's run to its place. */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long long lr = 0; lr < sr; lr++) {
        const size_t q = run[lr].q;
        const pm_mesh_piece *P = &pieces[q];
        uint64_t lo[3], hi[3];
        brick_box(&B, q, lo, hi);
        const uint64_t d1 = hi[1] - lo[1];
        const uint32_t *vf = B.vfirst + B.rbase[q];
        const uint64_t *vk = P->vertex_keys;
        uint64_t v0, v1;
        merge_span(run[lr].part, P->num_vertices, vk, VROW, &v0, &v1);
        uint64_t row = UINT64_MAX, at = 0;
        for (uint64_t v = v0; v < v1; v++) {
            const uint64_t key = vk[v], p = key / 3;
            const uint64_t r = (p / N0 % N1 - lo[1]) + d1 * (p / N01 - lo[2]);
            if (r != row) row = r, at = vf[r];
            vkeys[at] = key;
            memcpy(M->pos + 3 * at, P->positions + 3 * v, 3 * sizeof(float));
            if (M->nrm) memcpy(M->nrm + 3 * at, P->normals + 3 * v, 3 * sizeof(float));
            at++;
        }
    }

    /* Triangles: each row's run to its place, its corners' keys to
     * indices. A corner is a point of the triangle's cell (offsets 0 or 1
     * per axis from it). */
    int missing = 0;
    size_t miss_q = 0;
    uint64_t miss_t = 0, miss_key = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (long long lr = 0; lr < sr; lr++) {
        const size_t q = run[lr].q;
        const pm_mesh_piece *P = &pieces[q];
        uint64_t lo[3], hi[3];
        brick_box(&B, q, lo, hi);
        const uint64_t d1 = hi[1] - lo[1];
        const uint32_t *tf = B.tfirst + B.rbase[q];
        const uint64_t *ck = P->cell_keys;
        uint64_t t0, t1;
        merge_span(run[lr].part, P->num_triangles, ck, CROW, &t0, &t1);
        uint64_t row = UINT64_MAX, at = 0;
        for (uint64_t t = t0; t < t1; t++) {
            const uint64_t c = ck[t];
            const uint64_t ci = c % C0, cj = c / C0 % C1, ck_ = c / (C0 * C1);
            const uint64_t r = (cj - lo[1]) + d1 * (ck_ - lo[2]);
            if (r != row) row = r, at = tf[r];
            const uint64_t cp = ci + N0 * (cj + N1 * ck_);
            uint32_t *o = M->idx + 3 * at;
            for (int e = 0; e < 3; e++) {
                const uint64_t key = P->triangles[3 * t + (uint64_t)e];
                uint64_t d = key / 3 - cp; /* wraps when below: caught as missing */
                const uint64_t dz = d >= N01;
                d -= dz * N01;
                const uint64_t dy = d >= N0, dx = d - dy * N0;
                size_t g = nv;
                if (key / 3 >= cp && dx <= 1 && dz <= 1) {
                    const uint64_t i = ci + dx, j = cj + dy, k = ck_ + dz;
                    const size_t w = brick_of(&B, q, lo, hi, i, j, k);
                    if (w < count) {
                        uint64_t wlo[3], whi[3];
                        if (w == q)
                            memcpy(wlo, lo, sizeof wlo), memcpy(whi, hi, sizeof whi);
                        else
                            brick_box(&B, w, wlo, whi);
                        const size_t f = B.vfirst[B.rbase[w] + (j - wlo[1]) +
                                                  (whi[1] - wlo[1]) * (k - wlo[2])];
                        g = gallop(vkeys, (size_t)nv, f, key);
                        if (g < nv && vkeys[g] != key) g = nv;
                    }
                }
                if (g >= nv) {
#pragma omp critical
                    if (!missing || q < miss_q || (q == miss_q && t < miss_t))
                        missing = 1, miss_q = q, miss_t = t, miss_key = key;
                    g = 0;
                }
                o[e] = (uint32_t)g;
            }
            at++;
        }
    }
    if (missing)
        st = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                       "%s: a triangle of piece %zu names vertex key %llu, which no piece has",
                       fn, miss_q, (unsigned long long)miss_key);
done:
    free(run);
    pmi_host_array_put(ctx, vkeys);
    free(B.vfirst), free(B.tfirst), free(B.rbase);
    free(vtot), free(ttot);
    if (st != PM_STATUS_OK) {
        pmi_host_array_put(ctx, M->pos), pmi_host_array_put(ctx, M->nrm);
        pmi_host_array_put(ctx, M->idx);
        memset(M, 0, sizeof *M);
    }
    return st;
}

/* pm_mesh_pieces_merge's options: a copy with PM_OUTPUT_ANY resolved (the
 * merged mesh stays where it is made, on the host) and the mode checked. */
static pm_status merge_options(const char *fn, const pm_isosurface_options *options,
                               pm_isosurface_options *opt)
{
    memset(opt, 0, sizeof *opt);
    if (options) {
        size_t sz = options->struct_size ? options->struct_size : sizeof *opt;
        memcpy(opt, options, sz < sizeof *opt ? sz : sizeof *opt);
    }
    opt->struct_size = sizeof *opt;
    if (opt->output_in_context_memory == PM_OUTPUT_ANY)
        opt->output_in_context_memory = opt->out_positions ? 1 : 0;
    if (opt->mode != PM_MESH_INDEXED && opt->mode != PM_MESH_SOUP)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: bad mode %d", fn, (int)opt->mode);
    return PM_STATUS_OK;
}

/* The merged indexed mesh M (whose host arrays it takes) as the mesh the
 * options ask for: M's arrays themselves, or copied into the caller's
 * buffers or context memory, or expanded to a soup. */
static pm_status merged_to_mesh(pm_context *ctx, const pm_isosurface_options *o, merged *Mp,
                                pm_mesh *mesh)
{
    pm_isosurface_options opt = *o;
    merged M = *Mp;
    memset(Mp, 0, sizeof *Mp);
    pm_status st = PM_STATUS_OK;
    const int indexed = opt.mode == PM_MESH_INDEXED;
    const int device = opt.output_in_context_memory && ctx->backend != pmi_cpu_backend();
    if (indexed && !opt.out_positions && !device) {
        /* The merged arrays become the mesh. */
        mesh->num_vertices = (size_t)M.nv;
        mesh->num_triangles = (size_t)M.nt;
        mesh->positions = M.pos;
        mesh->normals = M.nrm;
        mesh->indices = M.idx;
        mesh->active_cells = M.active;
        mesh->owns_arrays = 1;
        mesh->in_context_memory = opt.output_in_context_memory != 0;
        return PM_STATUS_OK;
    }
    pmi_mesh_dest D;
    uint64_t nv = indexed ? M.nv : 3 * M.nt;
    st = pmi_mesh_prepare(ctx, &opt, indexed, nv, M.nt, M.active, mesh, &D);
    if (st == PM_STATUS_OK || st == PM_STATUS_TRUNCATED) {
        pm_status s2 = PM_STATUS_OK;
        if (indexed) {
            s2 = pmi_place(ctx, device, D.positions, M.pos, (size_t)D.vertex_limit * 3 * sizeof(float));
            if (s2 == PM_STATUS_OK && D.normals)
                s2 = pmi_place(ctx, device, D.normals, M.nrm, (size_t)D.vertex_limit * 3 * sizeof(float));
            if (s2 == PM_STATUS_OK && D.indices)
                s2 = pmi_place(ctx, device, D.indices, M.idx, (size_t)D.tri_limit * 3 * sizeof(uint32_t));
        } else {
            /* Soup: every triangle corner copies its vertex. */
            size_t corners = (size_t)D.vertex_limit;
            float *gp = device ? malloc(corners * 3 * sizeof(float) + 1) : D.positions;
            float *gn = device && D.normals ? malloc(corners * 3 * sizeof(float) + 1) : D.normals;
            if (!gp || (D.normals && !gn)) {
                s2 = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mesh_pieces_merge: no memory");
            } else {
                for (size_t c = 0; c < corners; c++) {
                    size_t v = M.idx[c];
                    memcpy(gp + 3 * c, M.pos + 3 * v, 3 * sizeof(float));
                    if (gn) memcpy(gn + 3 * c, M.nrm + 3 * v, 3 * sizeof(float));
                }
                if (device) {
                    s2 = pmi_place(ctx, 1, D.positions, gp, corners * 3 * sizeof(float));
                    if (s2 == PM_STATUS_OK && gn)
                        s2 = pmi_place(ctx, 1, D.normals, gn, corners * 3 * sizeof(float));
                }
            }
            if (device) {
                free(gp);
                if (gn != D.normals) free(gn);
            }
        }
        if (s2 != PM_STATUS_OK) {
            pm_mesh_free(ctx, mesh);
            st = s2;
        }
    }
    pmi_host_array_put(ctx, M.pos), pmi_host_array_put(ctx, M.nrm);
    pmi_host_array_put(ctx, M.idx);
    return st;
}

pm_status pm_mesh_pieces_merge(pm_context *ctx, const pm_mesh_piece *pieces, size_t count,
                               const pm_isosurface_options *options, pm_mesh *mesh)
{
    pmi_clear_error();
    if (!ctx || !mesh || (count && !pieces))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_pieces_merge: NULL argument");
    memset(mesh, 0, sizeof *mesh);
    pm_isosurface_options opt;
    pm_status st = merge_options("pm_mesh_pieces_merge", options, &opt);
    if (st != PM_STATUS_OK) return st;
    const int normals = opt.normals != PM_NORMALS_NONE;
    unsigned vbits = 0, cbits = 0;
    if (count) st = check_pieces(pieces, count, normals, &vbits, &cbits);
    if (st != PM_STATUS_OK) return st;
    merged M;
    memset(&M, 0, sizeof M);
    st = merge_host(ctx, pieces, count, normals, vbits, cbits, &M);
    if (st != PM_STATUS_OK) return st;
    return merged_to_mesh(ctx, &opt, &M, mesh);
}

pm_status pmi_pieces_merge_bricks(pm_context *ctx, const pmi_sparse_geom *G,
                                  const uint64_t *bricks, const pm_mesh_piece *pieces,
                                  size_t count, const pm_isosurface_options *options,
                                  pm_mesh *mesh)
{
    memset(mesh, 0, sizeof *mesh);
    pm_isosurface_options opt;
    pm_status st = merge_options("pm_reconstruct (merge)", options, &opt);
    if (st != PM_STATUS_OK) return st;
    merged M;
    memset(&M, 0, sizeof M);
    st = merge_bricks_host(ctx, G, bricks, pieces, count, opt.normals != PM_NORMALS_NONE, &M);
    if (st != PM_STATUS_OK) return st;
    return merged_to_mesh(ctx, &opt, &M, mesh);
}

void pm_mesh_piece_free(pm_mesh_piece *piece)
{
    if (!piece) return;
    free(piece->vertex_keys);
    free(piece->positions);
    free(piece->normals);
    free(piece->triangles);
    free(piece->cell_keys);
    memset(piece, 0, sizeof *piece);
}
