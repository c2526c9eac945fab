/* Particle surfaces over MPI ranks (include/pyramesh_mpi.h,
 * docs/distributed.md): the sparse bricks of docs/scale.md split by brick
 * layers along z, particles sent to the ranks whose layers they reach
 * (with their index in the whole set, which orders every sum), each rank's
 * bricks meshed into pieces, and the pieces merged on the root. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pyramesh_mpi.h"

#include "core/sparse.h"
#include "core/util.h"
#include "mpi/mpi_internal.h"

typedef struct particle {
    float x, y, z;
    uint32_t pad;
    uint64_t gid; /* index in the whole set: rank order, then local order */
} particle;

static int cmp_gid(const void *a, const void *b)
{
    uint64_t x = ((const particle *)a)->gid, y = ((const particle *)b)->gid;
    return x < y ? -1 : x > y;
}

/* The neighbour-cell layers (z) whose particles rank q's bricks need: the
 * cells around its field windows, one ring more for those particles'
 * densities, and one more for rounding: [c0, c1). */
static void needed_cells(const pmi_sparse_geom *G, uint64_t bz0, uint64_t bz1, int64_t *c0,
                         int64_t *c1)
{
    if (bz1 <= bz0) {
        *c0 = *c1 = 0;
        return;
    }
    uint64_t lo = bz0 * G->brick, hi = bz1 * G->brick < G->dims[2] ? bz1 * G->brick : G->dims[2];
    uint64_t w0 = lo >= (uint64_t)G->ghost_lo ? lo - (uint64_t)G->ghost_lo : 0;
    uint64_t w1 = hi + (uint64_t)G->ghost_hi;
    *c0 = (int64_t)(w0 / G->B) - 3;
    *c1 = (int64_t)((w1 - 1) / G->B) + 4;
}

/* One piece from a rank's brick pieces: vertices by key, triangles by cell
 * key (bricks own disjoint points and cells, so keys do not repeat and a
 * cell's triangles stay in their order). */
typedef struct ref {
    uint64_t key;
    uint32_t piece;
    uint32_t index;
} ref;

static int cmp_ref(const void *a, const void *b)
{
    const ref *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static pm_status combine(const pm_mesh_piece *pc, size_t count, const pmi_sparse_geom *G,
                         uint64_t z_lo, uint64_t z_hi, pm_mesh_piece *out)
{
    memset(out, 0, sizeof *out);
    uint64_t nv = 0, nt = 0;
    int normals = 0;
    for (size_t q = 0; q < count; q++) {
        nv += pc[q].num_vertices;
        nt += pc[q].num_triangles;
        normals |= pc[q].normals != NULL;
    }
    for (int a = 0; a < 3; a++) out->lattice_dims[a] = G->dims[a];
    out->owned.lo[2] = z_lo;
    out->owned.dims[0] = G->dims[0];
    out->owned.dims[1] = G->dims[1];
    out->owned.dims[2] = z_hi - z_lo;
    ref *rv = malloc((size_t)(nv + 1) * sizeof *rv), *rt = malloc((size_t)(nt + 1) * sizeof *rt);
    out->vertex_keys = malloc((size_t)(nv + 1) * 8);
    out->positions = malloc((size_t)(3 * nv + 1) * 4);
    out->normals = normals ? malloc((size_t)(3 * nv + 1) * 4) : NULL;
    out->triangles = malloc((size_t)(3 * nt + 1) * 8);
    out->cell_keys = malloc((size_t)(nt + 1) * 8);
    if (!rv || !rt || !out->vertex_keys || !out->positions || (normals && !out->normals) ||
        !out->triangles || !out->cell_keys) {
        free(rv);
        free(rt);
        pm_mesh_piece_free(out);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi_reconstruct: no memory for a piece of "
                                                  "%llu vertices",
                         (unsigned long long)nv);
    }
    uint64_t v = 0, t = 0;
    for (size_t q = 0; q < count; q++) {
        for (uint64_t i = 0; i < pc[q].num_vertices; i++)
            rv[v++] = (ref){pc[q].vertex_keys[i], (uint32_t)q, (uint32_t)i};
        for (uint64_t i = 0; i < pc[q].num_triangles; i++)
            rt[t++] = (ref){pc[q].cell_keys[i], (uint32_t)q, (uint32_t)i};
        out->active_cells += pc[q].active_cells;
    }
    qsort(rv, (size_t)nv, sizeof *rv, cmp_ref);
    qsort(rt, (size_t)nt, sizeof *rt, cmp_ref);
    for (uint64_t i = 0; i < nv; i++) {
        const pm_mesh_piece *P = &pc[rv[i].piece];
        out->vertex_keys[i] = rv[i].key;
        memcpy(out->positions + 3 * i, P->positions + 3 * (size_t)rv[i].index, 12);
        if (normals) memcpy(out->normals + 3 * i, P->normals + 3 * (size_t)rv[i].index, 12);
    }
    for (uint64_t i = 0; i < nt; i++) {
        const pm_mesh_piece *P = &pc[rt[i].piece];
        out->cell_keys[i] = rt[i].key;
        memcpy(out->triangles + 3 * i, P->triangles + 3 * (size_t)rt[i].index, 24);
    }
    out->num_vertices = nv;
    out->num_triangles = nt;
    free(rv);
    free(rt);
    return PM_STATUS_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The rank whose brick layers hold lattice slice z (layers split as in
 * pm_mpi_reconstruct: rank q has [L q / ranks, L (q + 1) / ranks)). */
static int owner_of(uint64_t z, const pmi_sparse_geom *G, uint64_t L, int ranks)
{
    const uint64_t b = z / G->brick;
    int q = 0;
    while (q + 1 < ranks && L * (uint64_t)(q + 1) / (uint64_t)ranks <= b)
        q++;
    return q;
}

/* The distributed form of a rank's piece (pm_mpi_reconstruct_local): its
 * own vertices, then those of other ranks its triangles use (asked of their
 * owners: one all-to-all of keys, one of positions and normals), ascending
 * keys; the keys are the global ids. Collective; errors agreed. */
static pm_status local_mesh(MPI_Comm comm, int ranks, const pmi_sparse_geom *G, uint64_t L,
                            const pm_mesh_piece *P, int normals, pm_mesh *mesh, uint64_t **ids)
{
    static const char fn[] = "pm_mpi_reconstruct_local";
    pm_status s = PM_STATUS_OK;
    const uint64_t nv = P->num_vertices, nt = P->num_triangles;
    const int stride = normals ? 6 : 3;
    /* The keys the triangles use that other ranks own, ascending, once. */
    uint64_t *need = malloc((size_t)(3 * nt + 1) * 8);
    uint64_t nn = 0;
    if (!need) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    for (uint64_t i = 0; need && i < 3 * nt; i++) {
        const uint64_t k = P->triangles[i];
        const uint64_t at = pmi_lower_bound_u64(P->vertex_keys, nv, k);
        if (at == nv || P->vertex_keys[at] != k) need[nn++] = k;
    }
    if (need) qsort(need, (size_t)nn, 8, cmp_u64);
    uint64_t u = 0;
    for (uint64_t i = 0; i < nn; i++)
        if (!u || need[u - 1] != need[i]) need[u++] = need[i];
    nn = u;
    if (s == PM_STATUS_OK && nv + nn >= UINT32_MAX)
        s = pmi_error(PM_STATUS_OVERFLOW, "%s: %llu vertices on one rank, more than 32-bit indices",
                      fn, (unsigned long long)(nv + nn));
    int *sc = calloc((size_t)ranks, sizeof(int)), *rc = calloc((size_t)ranks, sizeof(int));
    int *sd = calloc((size_t)ranks + 1, sizeof(int)), *rd = calloc((size_t)ranks + 1, sizeof(int));
    if (!sc || !rc || !sd || !rd) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    const uint64_t plane = G->dims[0] * G->dims[1];
    for (uint64_t i = 0; s == PM_STATUS_OK && i < nn; i++)
        sc[owner_of(need[i] / 3 / plane, G, L, ranks)]++;
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) goto out;
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, comm);
    for (int q = 0; q < ranks; q++) {
        sd[q + 1] = sd[q] + sc[q];
        rd[q + 1] = rd[q] + rc[q];
    }
    /* need is ascending and owners ascend with z: need is already grouped
     * by destination, in rank order. */
    uint64_t *asked = malloc(((size_t)rd[ranks] + 1) * 8);
    float *answer = malloc(((size_t)rd[ranks] + 1) * (size_t)stride * 4);
    float *got = malloc(((size_t)nn + 1) * (size_t)stride * 4);
    if (!asked || !answer || !got) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    s = pmi_mpi_agree(comm, s);
    if (s == PM_STATUS_OK) {
        MPI_Alltoallv(need, sc, sd, MPI_UINT64_T, asked, rc, rd, MPI_UINT64_T, comm);
        for (int i = 0; i < rd[ranks]; i++) {
            const uint64_t at = pmi_lower_bound_u64(P->vertex_keys, nv, asked[i]);
            if (at == nv || P->vertex_keys[at] != asked[i]) {
                s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                              "%s: vertex key %llu asked of the rank that should own it, which "
                              "has no such vertex",
                              fn, (unsigned long long)asked[i]);
                break;
            }
            memcpy(answer + (size_t)i * (size_t)stride, P->positions + 3 * at, 12);
            if (normals) memcpy(answer + (size_t)i * 6 + 3, P->normals + 3 * at, 12);
        }
        s = pmi_mpi_agree(comm, s);
    }
    if (s == PM_STATUS_OK) {
        for (int q = 0; q <= ranks; q++) {
            if (q < ranks) {
                sc[q] *= stride;
                rc[q] *= stride;
            }
            sd[q] *= stride;
            rd[q] *= stride;
        }
        /* Answers travel back: what this rank was asked goes out (rc),
         * what it asked comes in (sc). */
        MPI_Alltoallv(answer, rc, rd, MPI_FLOAT, got, sc, sd, MPI_FLOAT, comm);
        memset(mesh, 0, sizeof *mesh);
        const uint64_t V = nv + nn;
        mesh->positions = malloc((size_t)(3 * V + 1) * 4);
        mesh->normals = normals ? malloc((size_t)(3 * V + 1) * 4) : NULL;
        mesh->indices = malloc((size_t)(3 * nt + 1) * 4);
        *ids = malloc((size_t)(V + 1) * 8);
        if (!mesh->positions || (normals && !mesh->normals) || !mesh->indices || !*ids) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for the part", fn);
        } else {
            if (nv) { /* an empty piece's arrays may be NULL */
                memcpy(mesh->positions, P->positions, (size_t)(3 * nv) * 4);
                if (normals) memcpy(mesh->normals, P->normals, (size_t)(3 * nv) * 4);
                memcpy(*ids, P->vertex_keys, (size_t)nv * 8);
            }
            for (uint64_t i = 0; i < nn; i++) {
                memcpy(mesh->positions + 3 * (nv + i), got + i * (uint64_t)stride, 12);
                if (normals) memcpy(mesh->normals + 3 * (nv + i), got + i * 6 + 3, 12);
                (*ids)[nv + i] = need[i];
            }
            for (uint64_t i = 0; i < 3 * nt; i++) {
                const uint64_t k = P->triangles[i];
                uint64_t at = pmi_lower_bound_u64(P->vertex_keys, nv, k);
                if (at == nv || P->vertex_keys[at] != k) at = nv + pmi_lower_bound_u64(need, nn, k);
                mesh->indices[i] = (uint32_t)at;
            }
            mesh->num_vertices = (size_t)V;
            mesh->num_triangles = (size_t)nt;
            mesh->active_cells = P->active_cells;
            mesh->owns_arrays = 1;
        }
        if (s != PM_STATUS_OK) {
            free(mesh->positions);
            free(mesh->normals);
            free(mesh->indices);
            free(*ids);
            *ids = NULL;
            memset(mesh, 0, sizeof *mesh);
        }
        s = pmi_mpi_agree(comm, s);
    }
    free(asked);
    free(answer);
    free(got);
out:
    free(need);
    free(sc);
    free(rc);
    free(sd);
    free(rd);
    return s;
}

/* pm_mpi_reconstruct (local NULL: gathered on root into mesh) and
 * pm_mpi_reconstruct_local (local, ids: this rank's part). */
static pm_status reconstruct(pm_context *ctx, MPI_Comm comm, const float *xyz, size_t n,
                             const pm_field_params *params, const pm_reconstruct_options *options,
                             const pm_isosurface_options *iso_options, int root, pm_mesh *mesh,
                             pm_mesh *local, uint64_t **ids, pm_mpi_report *report)
{
    static const char fn[] = "pm_mpi_reconstruct";
    pm_mpi_report rep;
    memset(&rep, 0, sizeof rep);
    int rank, ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    rep.ranks = ranks;
    if (mesh) memset(mesh, 0, sizeof *mesh);
    pm_field_params p;
    pm_status s = PM_STATUS_OK;
    if (local) {
        memset(local, 0, sizeof *local);
        root = 0;
    }
    if (ids) *ids = NULL;
    if (!ctx || !params || (n && !xyz) || (!local && rank == root && !mesh) ||
        (local && !ids))
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    else if (root < 0 || root >= ranks)
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: root %d of %d ranks", fn, root, ranks);
    else
        s = pmi_reconstruct_params(params, &p);
    size_t brick_points = options ? options->brick_points : 0;
    /* The whole set's order: rank order, then local order. */
    uint64_t my_n = n, base = 0;
    MPI_Exscan(&my_n, &base, 1, MPI_UINT64_T, MPI_SUM, comm);
    if (rank == 0) base = 0;
    /* Kept particles (the aabb filter) and their box. */
    double bmin[3] = {INFINITY, INFINITY, INFINITY}, bmax[3] = {-INFINITY, -INFINITY, -INFINITY};
    uint8_t *keep = s == PM_STATUS_OK ? malloc(n ? n : 1) : NULL;
    if (s == PM_STATUS_OK && !keep) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    uint64_t kept = 0;
    for (size_t i = 0; s == PM_STATUS_OK && i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                          "%s: particle %llu (local %zu) has a non-finite coordinate", fn,
                          (unsigned long long)(base + i), i);
            break;
        }
        int in = 1;
        for (int a = 0; a < 3 && p.use_aabb; a++)
            in &= q[a] >= p.aabb_min[a] && q[a] <= p.aabb_max[a];
        keep[i] = (uint8_t)in;
        if (!in) continue;
        kept++;
        for (int a = 0; a < 3; a++) {
            if ((double)q[a] < bmin[a]) bmin[a] = q[a];
            if ((double)q[a] > bmax[a]) bmax[a] = q[a];
        }
    }
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        free(keep);
        return s;
    }
    double gmin[3], gmax[3];
    uint64_t total = 0;
    MPI_Allreduce(bmin, gmin, 3, MPI_DOUBLE, MPI_MIN, comm);
    MPI_Allreduce(bmax, gmax, 3, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(&kept, &total, 1, MPI_UINT64_T, MPI_SUM, comm);
    uint64_t all_n = 0;
    MPI_Allreduce(&my_n, &all_n, 1, MPI_UINT64_T, MPI_SUM, comm);
    rep.particles_used = total;
    rep.particles_dropped = all_n - total;
    if (total == 0) {
        free(keep);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: no particles%s", fn,
                         p.use_aabb ? " inside the aabb" : "");
    }
    /* The lattice and bricks of the whole set; brick layers by rank. */
    pm_isosurface_options opt;
    memset(&opt, 0, sizeof opt);
    if (iso_options) {
        size_t sz = iso_options->struct_size ? iso_options->struct_size : sizeof opt;
        memcpy(&opt, iso_options, sz < sizeof opt ? sz : sizeof opt);
    }
    opt.struct_size = sizeof opt;
    if (opt.normals == PM_NORMALS_DEFAULT) opt.normals = PM_NORMALS_CENTRAL;
    if (!brick_points) {
        /* The default by device (larger on GPUs), the same on every rank. */
        uint64_t mine = pmi_sparse_brick_default(ctx), all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_MAX, comm);
        brick_points = (size_t)all;
    }
    pmi_sparse_geom G;
    s = pmi_sparse_geom_init(&p, gmin, gmax, brick_points, opt.normals, &G);
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        free(keep);
        return s;
    }
    rep.lattice = pmi_sparse_lattice(&G);
    const uint64_t L = G.bdims[2];
    uint64_t bz0 = L * (uint64_t)rank / (uint64_t)ranks, bz1 = L * (uint64_t)(rank + 1) / (uint64_t)ranks;
    rep.slab_lo = bz0 * G.brick;
    rep.slab_nz = (bz1 * G.brick < G.dims[2] ? bz1 * G.brick : G.dims[2]) - rep.slab_lo;

    /* Route every kept particle to the ranks whose cell layers it is in. */
    double t = MPI_Wtime();
    int64_t *c0 = malloc((size_t)ranks * 8), *c1 = malloc((size_t)ranks * 8);
    int *scount = calloc((size_t)ranks, sizeof(int)), *rcount = calloc((size_t)ranks, sizeof(int));
    int *sdisp = calloc((size_t)ranks + 1, sizeof(int)), *rdisp = calloc((size_t)ranks + 1, sizeof(int));
    if (!c0 || !c1 || !scount || !rcount || !sdisp || !rdisp)
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
    const double cell = (double)G.B * G.rule.s;
    for (int q = 0; s == PM_STATUS_OK && q < ranks; q++)
        needed_cells(&G, L * (uint64_t)q / (uint64_t)ranks, L * (uint64_t)(q + 1) / (uint64_t)ranks,
                     &c0[q], &c1[q]);
    /* Count, agree, fill: every rank reaches every collective. */
    particle *buf = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int q = 0; q < ranks; q++) sdisp[q + 1] = sdisp[q] + scount[q];
            buf = malloc(((size_t)sdisp[ranks] + 1) * sizeof *buf);
            if (!buf) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory to send particles", fn);
            memset(scount, 0, (size_t)ranks * sizeof(int));
        }
        for (size_t i = 0; s == PM_STATUS_OK && i < n; i++) {
            if (!keep[i]) continue;
            double cz = floor(((double)xyz[3 * i + 2] - G.origin[2]) / cell);
            if (cz < 0) cz = 0;
            if (cz > (double)(G.cdims[2] - 1)) cz = (double)(G.cdims[2] - 1);
            for (int q = 0; q < ranks; q++) {
                if (cz < (double)c0[q] || cz >= (double)c1[q]) continue;
                if (pass == 1) {
                    particle *r = &buf[sdisp[q] + scount[q]];
                    r->x = xyz[3 * i];
                    r->y = xyz[3 * i + 1];
                    r->z = xyz[3 * i + 2];
                    r->pad = 0;
                    r->gid = base + i;
                } else if (scount[q] == 0x7fffffff) {
                    s = pmi_error(PM_STATUS_OVERFLOW, "%s: more than 2^31 particles for rank %d", fn,
                                  q);
                    break;
                }
                scount[q]++;
            }
        }
        if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) break;
    }
    particle *mine = NULL;
    uint64_t m = 0;
    if (s == PM_STATUS_OK) {
        MPI_Datatype rec;
        MPI_Type_contiguous((int)sizeof(particle), MPI_BYTE, &rec);
        MPI_Type_commit(&rec);
        MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, comm);
        for (int q = 0; q < ranks; q++) m += (uint64_t)rcount[q];
        if (m >= 0x7fffffff)
            s = pmi_error(PM_STATUS_OVERFLOW, "%s: %llu particles for one rank, at most 2^31 - 1",
                          fn, (unsigned long long)m);
        else if (!(mine = malloc(((size_t)m + 1) * sizeof *mine)))
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory for %llu particles", fn,
                          (unsigned long long)m);
        s = pmi_mpi_agree(comm, s);
        if (s == PM_STATUS_OK) {
            for (int q = 0; q < ranks; q++) rdisp[q + 1] = rdisp[q] + rcount[q];
            MPI_Alltoallv(buf, scount, sdisp, rec, mine, rcount, rdisp, rec, comm);
        }
        MPI_Type_free(&rec);
    }
    free(buf);
    rep.ghost_slices = m; /* particles received, its own included */
    rep.ghost_bytes = m * sizeof(particle);
    rep.exchange_ms = 1e3 * (MPI_Wtime() - t);
    /* The rank's bricks from its particles, in the whole set's order. */
    pm_mesh_piece *pcs = NULL, piece;
    size_t count = 0;
    memset(&piece, 0, sizeof piece);
    float *sorted = NULL;
    t = MPI_Wtime();
    if (s == PM_STATUS_OK && m > 0) {
        qsort(mine, (size_t)m, sizeof *mine, cmp_gid);
        sorted = malloc((size_t)m * 12);
        if (!sorted) s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no memory", fn);
        for (uint64_t i = 0; sorted && i < m; i++) {
            sorted[3 * i] = mine[i].x;
            sorted[3 * i + 1] = mine[i].y;
            sorted[3 * i + 2] = mine[i].z;
        }
        if (s == PM_STATUS_OK)
            s = pmi_reconstruct_pieces(ctx, sorted, (size_t)m, &p, brick_points, &opt, gmin, gmax,
                                       bz0, bz1, &pcs, &count);
        if (s == PM_STATUS_OK)
            s = combine(pcs, count, &G, rep.slab_lo, rep.slab_lo + rep.slab_nz, &piece);
        for (size_t q = 0; q < count; q++) pm_mesh_piece_free(&pcs[q]);
        free(pcs);
    }
    free(sorted);
    free(mine);
    rep.extract_ms = 1e3 * (MPI_Wtime() - t);
    rep.piece_vertices = piece.num_vertices;
    rep.piece_triangles = piece.num_triangles;
    s = pmi_mpi_agree(comm, s);
    if (local) {
        t = MPI_Wtime();
        if (s == PM_STATUS_OK)
            s = local_mesh(comm, ranks, &G, L, &piece, opt.normals != PM_NORMALS_NONE, local, ids);
        rep.gather_ms = 1e3 * (MPI_Wtime() - t);
        pm_mesh_piece_free(&piece);
    } else if (s == PM_STATUS_OK) {
        pm_mesh_piece *all = NULL;
        size_t np = 0;
        const int has = piece.num_vertices > 0 || piece.num_triangles > 0;
        t = MPI_Wtime();
        s = pmi_mpi_gather_pieces(comm, rank, ranks, root, &piece, has, &all, &np);
        rep.gather_ms = 1e3 * (MPI_Wtime() - t);
        if (!(rank == root && has)) pm_mesh_piece_free(&piece); /* else moved into all */
        t = MPI_Wtime();
        if (s == PM_STATUS_OK && rank == root && np) {
            pm_isosurface_options mo = opt;
            mo.inside = PM_INSIDE_ABOVE;
            s = pm_mesh_pieces_merge(ctx, all, np, &mo, mesh);
        }
        rep.merge_ms = 1e3 * (MPI_Wtime() - t);
        for (size_t i = 0; i < np; i++) pm_mesh_piece_free(&all[i]);
        free(all);
        s = pmi_mpi_agree(comm, s);
    } else {
        pm_mesh_piece_free(&piece);
    }
    free(c0);
    free(c1);
    free(scount);
    free(rcount);
    free(sdisp);
    free(rdisp);
    free(keep);
    if (s != PM_STATUS_OK && !local && mesh && rank == root) pm_mesh_free(ctx, mesh);
    if (report) *report = rep;
    return s;
}

pm_status pm_mpi_reconstruct(pm_context *ctx, MPI_Comm comm, const float *xyz, size_t n,
                             const pm_field_params *params, const pm_reconstruct_options *options,
                             const pm_isosurface_options *iso_options, int root, pm_mesh *mesh,
                             pm_mpi_report *report)
{
    return reconstruct(ctx, comm, xyz, n, params, options, iso_options, root, mesh, NULL, NULL,
                       report);
}

pm_status pm_mpi_reconstruct_local(pm_context *ctx, MPI_Comm comm, const float *xyz, size_t n,
                                   const pm_field_params *params,
                                   const pm_reconstruct_options *options,
                                   const pm_isosurface_options *iso_options, pm_mesh *mesh,
                                   uint64_t **global_ids, pm_mpi_report *report)
{
    return reconstruct(ctx, comm, xyz, n, params, options, iso_options, 0, NULL, mesh, global_ids,
                       report);
}
