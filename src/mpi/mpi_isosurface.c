/* Marching cubes over MPI ranks (include/pyramesh_mpi.h, docs/distributed.md):
 * slab decomposition along z, ghost slices exchanged point to point, one
 * pm_isosurface_piece per rank, pieces gathered and merged by
 * pm_mesh_pieces_merge (or kept as self-contained local meshes). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pyramesh_mpi.h"

#include "mpi/mpi_internal.h"

/* The slabs of every rank, checked to tile [0, nz) in rank order. */
static pm_status gather_slabs(MPI_Comm comm, int ranks, uint64_t z0, uint64_t nz, uint64_t nz_global,
                              uint64_t **out)
{
    uint64_t mine[2] = {z0, nz};
    uint64_t *all = malloc(2 * (size_t)ranks * sizeof *all);
    if (!all) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for %d slabs", ranks);
    if (MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, comm) != MPI_SUCCESS) {
        free(all);
        return pmi_error(PM_STATUS_IO_ERROR, "pm_mpi: MPI_Allgather of the slabs failed");
    }
    uint64_t next = 0;
    for (int r = 0; r < ranks; r++) {
        if (all[2 * r + 1] == 0) continue;
        if (all[2 * r] != next || all[2 * r + 1] > nz_global - next) {
            pm_status s = pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "pm_mpi: rank %d holds slices [%llu, %llu), expected slabs in rank order tiling "
                "[0, %llu): the next slab starts at %llu",
                r, (unsigned long long)all[2 * r],
                (unsigned long long)(all[2 * r] + all[2 * r + 1]), (unsigned long long)nz_global,
                (unsigned long long)next);
            free(all);
            return s;
        }
        next += all[2 * r + 1];
    }
    if (next != nz_global) {
        free(all);
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mpi: the slabs cover slices [0, %llu) of %llu",
                         (unsigned long long)next, (unsigned long long)nz_global);
    }
    *out = all;
    return PM_STATUS_OK;
}

/* The slices rank r's window needs: [lo, hi), empty when it holds none. */
static void window_of(const uint64_t *slabs, int r, uint64_t nz_global, uint64_t below,
                      uint64_t above, uint64_t *lo, uint64_t *hi)
{
    uint64_t a = slabs[2 * r], n = slabs[2 * r + 1];
    if (n == 0) {
        *lo = *hi = 0;
        return;
    }
    *lo = a > below ? a - below : 0;
    *hi = a + n + above < nz_global ? a + n + above : nz_global;
}

/* A rank's slices and its ghosts without a copy of its slab: its own
 * slices [z0, z1) (the caller's array when packed, else a packed copy),
 * the ghost slices [wlo, z0) and [z1, whi) received from other ranks. */
typedef struct slab_view {
    const unsigned char *own;
    unsigned char *own_copy, *lo_ghosts, *hi_ghosts;
    uint64_t z0, z1, wlo, whi;
    size_t slice_bytes;
} slab_view;

static void view_free(slab_view *v)
{
    free(v->own_copy);
    free(v->lo_ghosts);
    free(v->hi_ghosts);
    memset(v, 0, sizeof *v);
}

static const unsigned char *view_slice(const slab_view *v, uint64_t k)
{
    if (k < v->z0) return v->lo_ghosts + (size_t)(k - v->wlo) * v->slice_bytes;
    if (k < v->z1) return v->own + (size_t)(k - v->z0) * v->slice_bytes;
    return v->hi_ghosts + (size_t)(k - v->z1) * v->slice_bytes;
}

/* Receives this rank's ghost slices from the ranks holding them and sends
 * its own to the ranks whose windows need them. */
static pm_status exchange(MPI_Comm comm, int rank, int ranks, const uint64_t *slabs,
                          uint64_t nz_global, uint64_t below, uint64_t above, const pm_volume *slab,
                          size_t nx, size_t ny, slab_view *v, pm_mpi_report *rep)
{
    const size_t ss = pm_sample_size(slab->type);
    memset(v, 0, sizeof *v);
    uint64_t lo, hi;
    window_of(slabs, rank, nz_global, below, above, &lo, &hi);
    const uint64_t a = slabs[2 * rank], n = slabs[2 * rank + 1];
    v->z0 = a;
    v->z1 = a + n;
    v->wlo = n ? lo : a;
    v->whi = n ? hi : a;
    size_t row_bytes, slice_bytes, own_bytes;
    if (!pmi_mul_size(nx, ss, &row_bytes) || !pmi_mul_size(row_bytes, ny, &slice_bytes) ||
        !pmi_mul_size(slice_bytes, (size_t)n, &own_bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_mpi: the slab of %llu slices overflows size_t",
                         (unsigned long long)n);
    v->slice_bytes = slice_bytes;
    /* A message is at most 3 slices (ghosts): 3 ny rows of row_bytes. */
    pm_status s = PM_STATUS_OK;
    if (row_bytes > INT_MAX || ny > INT_MAX / 4)
        s = pmi_error(PM_STATUS_UNSUPPORTED,
                      "pm_mpi: rows of %zu bytes or %zu rows exceed MPI's int counts", row_bytes,
                      ny);
    const size_t rs = slab->row_stride ? slab->row_stride : nx;
    const size_t zs = slab->slice_stride ? slab->slice_stride : rs * ny;
    v->lo_ghosts = malloc((size_t)(v->z0 - v->wlo) * slice_bytes + 1);
    v->hi_ghosts = malloc((size_t)(v->whi - v->z1) * slice_bytes + 1);
    if (rs == nx && zs == nx * ny) {
        v->own = slab->data; /* packed: used in place */
    } else if ((v->own_copy = malloc(own_bytes + 1)) != NULL) {
        for (uint64_t k = 0; k < n; k++)
            for (size_t j = 0; j < ny; j++)
                memcpy(v->own_copy + (size_t)k * slice_bytes + j * row_bytes,
                       (const unsigned char *)slab->data + ((size_t)k * zs + j * rs) * ss,
                       row_bytes);
        v->own = v->own_copy;
    }
    MPI_Request *req = malloc(4 * (size_t)ranks * sizeof *req);
    if (s == PM_STATUS_OK && !(v->lo_ghosts && v->hi_ghosts && (v->own || n == 0) && req))
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for the ghost slices");
    /* Every rank posts its messages only when all of them can. */
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        free(req);
        view_free(v);
        return s;
    }
    MPI_Datatype row;
    MPI_Type_contiguous((int)row_bytes, MPI_BYTE, &row);
    MPI_Type_commit(&row);
    int nreq = 0;
    for (int q = 0; q < ranks; q++) {
        if (q == rank) continue;
        /* What q holds of my ghost slices: receive it. */
        uint64_t qa = slabs[2 * q], qb = qa + slabs[2 * q + 1];
        for (int side = 0; side < 2; side++) {
            uint64_t g0 = side ? v->z1 : v->wlo, g1 = side ? v->whi : v->z0;
            uint64_t r0 = qa > g0 ? qa : g0, r1 = qb < g1 ? qb : g1;
            if (r1 <= r0) continue;
            unsigned char *dst = (side ? v->hi_ghosts : v->lo_ghosts) + (size_t)(r0 - g0) * slice_bytes;
            MPI_Irecv(dst, (int)((r1 - r0) * ny), row, q, 71, comm, &req[nreq++]);
            rep->ghost_slices += r1 - r0;
            rep->ghost_bytes += (r1 - r0) * slice_bytes;
        }
        /* What I hold of q's window: send it. */
        uint64_t qlo, qhi;
        window_of(slabs, q, nz_global, below, above, &qlo, &qhi);
        uint64_t s0 = a > qlo ? a : qlo, s1 = a + n < qhi ? a + n : qhi;
        if (s1 > s0 && slabs[2 * q + 1])
            MPI_Isend((void *)(v->own + (size_t)(s0 - a) * slice_bytes), (int)((s1 - s0) * ny), row,
                      q, 71, comm, &req[nreq++]);
    }
    int rc = nreq ? MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    free(req);
    MPI_Type_free(&row);
    if (rc != MPI_SUCCESS) {
        view_free(v);
        return pmi_error(PM_STATUS_IO_ERROR, "pm_mpi: the ghost exchange failed");
    }
    return PM_STATUS_OK;
}

/* Checks the arguments every rank can check alone. */
static pm_status check_args(const pm_lattice *lattice, const pm_volume *slab, uint64_t z0)
{
    if (!lattice || !slab)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: NULL lattice or slab");
    if (pm_sample_size(slab->type) == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: invalid sample type %d",
                         (int)slab->type);
    if (slab->nx != lattice->dims[0] || slab->ny != lattice->dims[1])
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mpi: the slab is %zu x %zu, the lattice %llu x %llu", slab->nx,
                         slab->ny, (unsigned long long)lattice->dims[0],
                         (unsigned long long)lattice->dims[1]);
    if (slab->nz && !slab->data)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: the slab has %zu slices and no data",
                         slab->nz);
    if (z0 > lattice->dims[2] || slab->nz > lattice->dims[2] - z0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_mpi: slices [%llu, %llu) leave the lattice's %llu",
                         (unsigned long long)z0, (unsigned long long)(z0 + slab->nz),
                         (unsigned long long)lattice->dims[2]);
    return PM_STATUS_OK;
}

/* The piece of the points in global slices [k0, k1): from the rank's own
 * slices in place when its window (the ghost rule) lies inside them, else
 * from a window assembled from the view (a few slices at the slab's ends). */
static pm_status piece_of(pm_context *ctx, const pm_volume *slab, const slab_view *v,
                          const pm_lattice *lattice, uint64_t below, uint64_t above, uint64_t k0,
                          uint64_t k1, double iso, const pm_isosurface_options *options,
                          pm_mesh_piece *piece)
{
    const uint64_t nz = lattice->dims[2];
    uint64_t w0 = k0 > below ? k0 - below : 0, w1 = k1 + above < nz ? k1 + above : nz;
    if (w0 < v->wlo) w0 = v->wlo;
    if (w1 > v->whi) w1 = v->whi;
    pm_volume wv;
    memset(&wv, 0, sizeof wv);
    wv.type = slab->type;
    wv.nx = (size_t)lattice->dims[0];
    wv.ny = (size_t)lattice->dims[1];
    wv.nz = (size_t)(w1 - w0);
    const size_t bytes = wv.nz * v->slice_bytes;
    unsigned char *copy = NULL;
    if (w0 >= v->z0 && w1 <= v->z1) {
        wv.data = v->own + (size_t)(w0 - v->z0) * v->slice_bytes;
    } else {
        if (!(copy = malloc(bytes + 1)))
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for a window");
        for (uint64_t k = w0; k < w1; k++)
            memcpy(copy + (size_t)(k - w0) * v->slice_bytes, view_slice(v, k), v->slice_bytes);
        wv.data = copy;
    }
    uint64_t wl[3] = {0, 0, w0};
    pm_lattice_box owned = {{0, 0, k0}, {lattice->dims[0], lattice->dims[1], k1 - k0}};
    pm_status s;
    if (pm_context_device(ctx) != PM_DEVICE_CUDA) {
        s = pm_isosurface_piece(ctx, &wv, wl, lattice, &owned, iso, options, piece);
    } else {
        /* A rank on a GPU: the window goes to its device first. */
        void *dev = NULL;
        s = pm_alloc(ctx, bytes ? bytes : 1, &dev);
        if (s == PM_STATUS_OK) s = pm_upload(ctx, dev, wv.data, bytes);
        if (s == PM_STATUS_OK) {
            wv.data = dev;
            s = pm_isosurface_piece(ctx, &wv, wl, lattice, &owned, iso, options, piece);
        }
        pm_free(ctx, dev);
    }
    free(copy);
    return s;
}

/* Appends piece b to a (b's keys all above a's: later slices). */
static pm_status append_piece(pm_mesh_piece *a, pm_mesh_piece *b)
{
    if (b->num_vertices == 0 && b->num_triangles == 0) {
        if (!a->owned.dims[2]) a->owned = b->owned;
        else a->owned.dims[2] += b->owned.dims[2];
        for (int k = 0; k < 3; k++) a->lattice_dims[k] = b->lattice_dims[k];
        pm_mesh_piece_free(b);
        return PM_STATUS_OK;
    }
    if (a->num_vertices == 0 && a->num_triangles == 0) {
        pm_lattice_box owned = a->owned;
        pm_mesh_piece_free(a);
        *a = *b;
        memset(b, 0, sizeof *b);
        if (owned.dims[2]) {
            a->owned.lo[2] = owned.lo[2];
            a->owned.dims[2] += owned.dims[2];
        }
        return PM_STATUS_OK;
    }
    uint64_t nv = a->num_vertices + b->num_vertices, nt = a->num_triangles + b->num_triangles;
    uint64_t *vk = realloc(a->vertex_keys, (size_t)(nv + 1) * 8);
    if (vk) a->vertex_keys = vk;
    float *pos = vk ? realloc(a->positions, (size_t)(3 * nv + 1) * 4) : NULL;
    if (pos) a->positions = pos;
    float *nrm = pos && a->normals ? realloc(a->normals, (size_t)(3 * nv + 1) * 4) : NULL;
    if (nrm) a->normals = nrm;
    uint64_t *tri = pos && (!a->normals || nrm) ? realloc(a->triangles, (size_t)(3 * nt + 1) * 8) : NULL;
    if (tri) a->triangles = tri;
    uint64_t *ck = tri ? realloc(a->cell_keys, (size_t)(nt + 1) * 8) : NULL;
    if (ck) a->cell_keys = ck;
    if (!ck) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory to join pieces");
    if (b->num_vertices) {
        memcpy(a->vertex_keys + a->num_vertices, b->vertex_keys, (size_t)b->num_vertices * 8);
        memcpy(a->positions + 3 * a->num_vertices, b->positions, (size_t)b->num_vertices * 12);
        if (a->normals) memcpy(a->normals + 3 * a->num_vertices, b->normals, (size_t)b->num_vertices * 12);
    }
    if (b->num_triangles) {
        memcpy(a->triangles + 3 * a->num_triangles, b->triangles, (size_t)b->num_triangles * 24);
        memcpy(a->cell_keys + a->num_triangles, b->cell_keys, (size_t)b->num_triangles * 8);
    }
    a->num_vertices = nv;
    a->num_triangles = nt;
    a->active_cells += b->active_cells;
    a->owned.dims[2] += b->owned.dims[2];
    pm_mesh_piece_free(b);
    return PM_STATUS_OK;
}

/* The piece of the rank's own slices [z0, z1): the slices whose windows
 * lie inside the slab straight from it, the few at its ends (which need
 * ghost slices) from small assembled windows, joined. */
static pm_status own_piece(pm_context *ctx, const pm_volume *slab, const slab_view *v,
                           const pm_lattice *lattice, uint64_t below, uint64_t above, double iso,
                           const pm_isosurface_options *options, pm_mesh_piece *out)
{
    memset(out, 0, sizeof *out);
    const uint64_t z0 = v->z0, z1 = v->z1;
    uint64_t ia = v->wlo < z0 ? z0 + below : z0, ib = v->whi > z1 ? z1 - (above < z1 ? above : z1) : z1;
    if (ia > z1) ia = z1;
    if (ib < ia) ib = ia;
    const uint64_t cut[4] = {z0, ia, ib, z1};
    pm_status s = PM_STATUS_OK;
    for (int i = 0; i < 3 && s == PM_STATUS_OK; i++) {
        if (cut[i + 1] <= cut[i]) continue;
        pm_mesh_piece p;
        memset(&p, 0, sizeof p);
        s = piece_of(ctx, slab, v, lattice, below, above, cut[i], cut[i + 1], iso, options, &p);
        if (s == PM_STATUS_OK) s = append_piece(out, &p);
        pm_mesh_piece_free(&p);
    }
    if (s != PM_STATUS_OK) pm_mesh_piece_free(out);
    return s;
}

/* Ghost slices below and above a slab for the piece of its own points
 * (docs/scale.md: [lo - 1, hi + 2), [lo, hi + 1) without normals). */
static void ghosts(const pm_isosurface_options *o, uint64_t *below, uint64_t *above)
{
    int none = o && o->normals == PM_NORMALS_NONE;
    *below = none ? 0 : 1;
    *above = none ? 1 : 2;
}

/* The steps both forms share: the caller's own argument checks (first),
 * the slab's, the slab table, the ghost exchange (extra_above slices more
 * than the ghost rule asks). Returns an agreed status: on failure every
 * rank returns it at once. */
static pm_status slab_window(MPI_Comm comm, const pm_lattice *lattice, const pm_volume *slab,
                             uint64_t z0, const pm_isosurface_options *options,
                             uint64_t extra_above, pm_status first, pm_mpi_report *rep,
                             slab_view *v, uint64_t *below, uint64_t *above)
{
    int rank, ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    rep->ranks = ranks;
    memset(v, 0, sizeof *v);
    pm_status s = first == PM_STATUS_OK ? check_args(lattice, slab, z0) : first;
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) return s;
    rep->slab_lo = z0;
    rep->slab_nz = slab->nz;
    uint64_t *slabs = NULL;
    s = gather_slabs(comm, ranks, z0, slab->nz, lattice->dims[2], &slabs);
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        free(slabs);
        return s;
    }
    ghosts(options, below, above);
    double t = MPI_Wtime();
    s = exchange(comm, rank, ranks, slabs, lattice->dims[2], *below, *above + extra_above, slab,
                 slab->nx, slab->ny, v, rep);
    rep->exchange_ms = 1e3 * (MPI_Wtime() - t);
    free(slabs);
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) view_free(v);
    return s;
}

pm_status pm_mpi_isosurface(pm_context *ctx, MPI_Comm comm, const pm_lattice *lattice,
                            const pm_volume *slab, uint64_t z0, double iso,
                            const pm_isosurface_options *options, int root, pm_mesh *mesh,
                            pm_mpi_report *report)
{
    pm_mpi_report rep;
    memset(&rep, 0, sizeof rep);
    int rank, ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    if (mesh) memset(mesh, 0, sizeof *mesh);
    pm_status s = PM_STATUS_OK;
    if (root < 0 || root >= ranks)
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: root %d of %d ranks", root, ranks);
    else if (rank == root && !mesh)
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: NULL mesh on the root");
    slab_view v;
    uint64_t below, above;
    s = slab_window(comm, lattice, slab, z0, options, 0, s, &rep, &v, &below, &above);
    if (s != PM_STATUS_OK) return s;
    pm_mesh_piece piece;
    memset(&piece, 0, sizeof piece);
    double t = MPI_Wtime();
    if (slab->nz) s = own_piece(ctx, slab, &v, lattice, below, above, iso, options, &piece);
    rep.extract_ms = 1e3 * (MPI_Wtime() - t);
    view_free(&v);
    rep.piece_vertices = piece.num_vertices;
    rep.piece_triangles = piece.num_triangles;
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        pm_mesh_piece_free(&piece);
        return s;
    }

    t = MPI_Wtime();
    pm_mesh_piece *all = NULL;
    size_t count = 0;
    s = pmi_mpi_gather_pieces(comm, rank, ranks, root, &piece, slab->nz != 0, &all, &count);
    rep.gather_ms = 1e3 * (MPI_Wtime() - t);
    if (rank != root) pm_mesh_piece_free(&piece);
    t = MPI_Wtime();
    if (s == PM_STATUS_OK && rank == root) s = pm_mesh_pieces_merge(ctx, all, count, options, mesh);
    rep.merge_ms = 1e3 * (MPI_Wtime() - t);
    if (rank == root) {
        /* all[] holds the root's own piece by value: free each once. */
        for (size_t i = 0; i < count; i++) pm_mesh_piece_free(&all[i]);
        free(all);
    }
    s = pmi_mpi_agree(comm, s);
    if (s != PM_STATUS_OK && mesh && rank == root) pm_mesh_free(ctx, mesh);
    if (report) *report = rep;
    return s;
}

/* Index of key in the ascending keys[0, n), or n. */
static uint64_t find_key(const uint64_t *keys, uint64_t n, uint64_t key)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo] == key ? lo : n;
}

/* The local mesh of a rank: piece a (its own points) plus the vertices of
 * piece b (the next slab's first slice) that a's triangles use. */
static pm_status local_mesh(const pm_mesh_piece *a, const pm_mesh_piece *b, pm_mesh *m,
                            uint64_t **ids_out)
{
    uint64_t nb = b ? b->num_vertices : 0;
    uint8_t *used = calloc(nb ? nb : 1, 1);
    if (!used) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory");
    for (uint64_t t = 0; t < 3 * a->num_triangles; t++) {
        uint64_t key = a->triangles[t];
        if (find_key(a->vertex_keys, a->num_vertices, key) < a->num_vertices) continue;
        uint64_t i = b ? find_key(b->vertex_keys, nb, key) : nb;
        if (i == nb) {
            free(used);
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_mpi: triangle %llu names vertex key %llu that neither this slab "
                             "nor the next one's first slice has",
                             (unsigned long long)(t / 3), (unsigned long long)key);
        }
        used[i] = 1;
    }
    uint64_t extra = 0;
    for (uint64_t i = 0; i < nb; i++) extra += used[i];
    uint64_t nv = a->num_vertices + extra;
    if (nv > UINT32_MAX || a->num_triangles > UINT32_MAX) {
        free(used);
        return pmi_error(PM_STATUS_OVERFLOW, "pm_mpi: %llu local vertices, at most 2^32 - 1",
                         (unsigned long long)nv);
    }
    memset(m, 0, sizeof *m);
    m->positions = malloc((size_t)(3 * nv + 1) * sizeof(float));
    m->normals = a->normals ? malloc((size_t)(3 * nv + 1) * sizeof(float)) : NULL;
    m->indices = malloc((size_t)(3 * a->num_triangles + 1) * sizeof(uint32_t));
    uint64_t *ids = malloc((size_t)(nv + 1) * sizeof *ids);
    if (!m->positions || (a->normals && !m->normals) || !m->indices || !ids) {
        free(m->positions);
        free(m->normals);
        free(m->indices);
        free(ids);
        free(used);
        memset(m, 0, sizeof *m);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for %llu local vertices",
                         (unsigned long long)nv);
    }
    if (a->num_vertices) {
        memcpy(m->positions, a->positions, (size_t)(3 * a->num_vertices) * sizeof(float));
        if (m->normals)
            memcpy(m->normals, a->normals, (size_t)(3 * a->num_vertices) * sizeof(float));
        memcpy(ids, a->vertex_keys, (size_t)a->num_vertices * sizeof *ids);
    }
    uint64_t v = a->num_vertices;
    for (uint64_t i = 0; i < nb; i++) {
        if (!used[i]) continue;
        memcpy(m->positions + 3 * v, b->positions + 3 * i, 3 * sizeof(float));
        if (m->normals) memcpy(m->normals + 3 * v, b->normals + 3 * i, 3 * sizeof(float));
        ids[v++] = b->vertex_keys[i];
    }
    free(used);
    for (uint64_t t = 0; t < 3 * a->num_triangles; t++)
        m->indices[t] = (uint32_t)find_key(ids, nv, a->triangles[t]);
    m->num_vertices = (size_t)nv;
    m->num_triangles = (size_t)a->num_triangles;
    m->active_cells = a->active_cells;
    m->owns_arrays = 1;
    *ids_out = ids;
    return PM_STATUS_OK;
}

pm_status pm_mpi_isosurface_local(pm_context *ctx, MPI_Comm comm, const pm_lattice *lattice,
                                  const pm_volume *slab, uint64_t z0, double iso,
                                  const pm_isosurface_options *options, pm_mesh *mesh,
                                  uint64_t **global_ids, pm_mpi_report *report)
{
    pm_mpi_report rep;
    memset(&rep, 0, sizeof rep);
    if (mesh) memset(mesh, 0, sizeof *mesh);
    if (global_ids) *global_ids = NULL;
    pm_status s = PM_STATUS_OK;
    if (!mesh || !global_ids)
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi: NULL mesh or global_ids");
    /* One slice more above: the next slab's first slice is meshed here too. */
    slab_view v;
    uint64_t below, above;
    s = slab_window(comm, lattice, slab, z0, options, 1, s, &rep, &v, &below, &above);
    if (s != PM_STATUS_OK) return s;
    pm_mesh_piece a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    double t = MPI_Wtime();
    const uint64_t z1 = z0 + slab->nz;
    int have_b = 0;
    if (slab->nz) {
        s = own_piece(ctx, slab, &v, lattice, below, above, iso, options, &a);
        if (s == PM_STATUS_OK && z1 < lattice->dims[2]) {
            s = piece_of(ctx, slab, &v, lattice, below, above, z1, z1 + 1, iso, options, &b);
            have_b = 1;
        }
        if (s == PM_STATUS_OK) s = local_mesh(&a, have_b ? &b : NULL, mesh, global_ids);
    }
    rep.extract_ms = 1e3 * (MPI_Wtime() - t);
    view_free(&v);
    pm_mesh_piece_free(&a);
    pm_mesh_piece_free(&b);
    rep.piece_vertices = mesh->num_vertices;
    rep.piece_triangles = mesh->num_triangles;
    s = pmi_mpi_agree(comm, s);
    if (s != PM_STATUS_OK) {
        pm_mesh_free(ctx, mesh);
        free(*global_ids);
        *global_ids = NULL;
    }
    if (report) *report = rep;
    return s;
}
