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

/* Builds this rank's window: its own slices packed, the ghost slices
 * received from the ranks holding them. */
static pm_status exchange(MPI_Comm comm, int rank, int ranks, const uint64_t *slabs,
                          uint64_t nz_global, uint64_t below, uint64_t above, const pm_volume *slab,
                          size_t nx, size_t ny, unsigned char **window, uint64_t *wlo,
                          uint64_t *whi, pm_mpi_report *rep)
{
    const size_t ss = pm_sample_size(slab->type);
    uint64_t lo, hi;
    window_of(slabs, rank, nz_global, below, above, &lo, &hi);
    *wlo = lo;
    *whi = hi;
    *window = NULL;
    size_t row_bytes, slice_bytes, bytes;
    if (!pmi_mul_size(nx, ss, &row_bytes) || !pmi_mul_size(row_bytes, ny, &slice_bytes) ||
        !pmi_mul_size(slice_bytes, (size_t)(hi - lo), &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_mpi: the window of %llu slices overflows size_t",
                         (unsigned long long)(hi - lo));
    if (row_bytes > INT_MAX || ny > INT_MAX)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "pm_mpi: rows of %zu bytes or %zu rows exceed MPI's int counts",
                         row_bytes, ny);
    unsigned char *w = malloc(bytes ? bytes : 1);
    if (!w)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for a window of %zu bytes",
                         bytes);
    /* Own slices, packed. */
    const uint64_t a = slabs[2 * rank], n = slabs[2 * rank + 1];
    const size_t rs = slab->row_stride ? slab->row_stride : nx;
    const size_t zs = slab->slice_stride ? slab->slice_stride : rs * ny;
    for (uint64_t k = 0; k < n; k++)
        for (size_t j = 0; j < ny; j++)
            memcpy(w + (size_t)(a + k - lo) * slice_bytes + j * row_bytes,
                   (const unsigned char *)slab->data + ((size_t)k * zs + j * rs) * ss, row_bytes);
    MPI_Datatype row;
    MPI_Type_contiguous((int)row_bytes, MPI_BYTE, &row);
    MPI_Type_commit(&row);
    MPI_Request *req = malloc(2 * (size_t)ranks * sizeof *req);
    if (!req) {
        MPI_Type_free(&row);
        free(w);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory");
    }
    int nreq = 0, bad = 0;
    for (int q = 0; q < ranks && !bad; q++) {
        if (q == rank) continue;
        /* What q holds of my window: receive it. */
        uint64_t qa = slabs[2 * q], qb = qa + slabs[2 * q + 1];
        uint64_t r0 = qa > lo ? qa : lo, r1 = qb < hi ? qb : hi;
        if (r1 > r0) {
            if ((r1 - r0) * ny > INT_MAX) bad = 1;
            else {
                MPI_Irecv(w + (size_t)(r0 - lo) * slice_bytes, (int)((r1 - r0) * ny), row, q, 71,
                          comm, &req[nreq++]);
                rep->ghost_slices += r1 - r0;
                rep->ghost_bytes += (r1 - r0) * slice_bytes;
            }
        }
        /* What I hold of q's window: send it. */
        uint64_t qlo, qhi;
        window_of(slabs, q, nz_global, below, above, &qlo, &qhi);
        uint64_t s0 = a > qlo ? a : qlo, s1 = a + n < qhi ? a + n : qhi;
        if (s1 > s0) {
            if ((s1 - s0) * ny > INT_MAX) bad = 1;
            else
                MPI_Isend(w + (size_t)(s0 - lo) * slice_bytes, (int)((s1 - s0) * ny), row, q, 71,
                          comm, &req[nreq++]);
        }
    }
    int rc = MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    free(req);
    MPI_Type_free(&row);
    if (bad || rc != MPI_SUCCESS) {
        free(w);
        return pmi_error(bad ? PM_STATUS_UNSUPPORTED : PM_STATUS_IO_ERROR,
                         bad ? "pm_mpi: a ghost message exceeds MPI's int counts"
                             : "pm_mpi: the ghost exchange failed");
    }
    *window = w;
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

/* The piece of the points in global slices [k0, k1) from the window. */
static pm_status piece_of(pm_context *ctx, const pm_volume *slab, const unsigned char *window,
                          uint64_t wlo, uint64_t whi, const pm_lattice *lattice, uint64_t k0,
                          uint64_t k1, double iso, const pm_isosurface_options *options,
                          pm_mesh_piece *piece)
{
    pm_volume wv;
    memset(&wv, 0, sizeof wv);
    wv.data = window;
    wv.type = slab->type;
    wv.nx = (size_t)lattice->dims[0];
    wv.ny = (size_t)lattice->dims[1];
    wv.nz = (size_t)(whi - wlo);
    uint64_t wl[3] = {0, 0, wlo};
    pm_lattice_box owned = {{0, 0, k0}, {lattice->dims[0], lattice->dims[1], k1 - k0}};
    if (pm_context_device(ctx) != PM_DEVICE_CUDA)
        return pm_isosurface_piece(ctx, &wv, wl, lattice, &owned, iso, options, piece);
    /* A rank on a GPU: the window goes to its device first. */
    size_t bytes = wv.nx * wv.ny * wv.nz * pm_sample_size(wv.type);
    void *dev = NULL;
    pm_status s = pm_alloc(ctx, bytes ? bytes : 1, &dev);
    if (s == PM_STATUS_OK) s = pm_upload(ctx, dev, window, bytes);
    if (s == PM_STATUS_OK) {
        wv.data = dev;
        s = pm_isosurface_piece(ctx, &wv, wl, lattice, &owned, iso, options, piece);
    }
    pm_free(ctx, dev);
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
                             unsigned char **window, uint64_t *wlo, uint64_t *whi)
{
    int rank, ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    rep->ranks = ranks;
    *window = NULL;
    *wlo = *whi = 0;
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
    uint64_t below, above;
    ghosts(options, &below, &above);
    double t = MPI_Wtime();
    s = exchange(comm, rank, ranks, slabs, lattice->dims[2], below, above + extra_above, slab,
                 slab->nx, slab->ny, window, wlo, whi, rep);
    rep->exchange_ms = 1e3 * (MPI_Wtime() - t);
    free(slabs);
    if ((s = pmi_mpi_agree(comm, s)) != PM_STATUS_OK) {
        free(*window);
        *window = NULL;
    }
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
    unsigned char *window = NULL;
    uint64_t wlo, whi;
    s = slab_window(comm, lattice, slab, z0, options, 0, s, &rep, &window, &wlo, &whi);
    if (s != PM_STATUS_OK) return s;
    pm_mesh_piece piece;
    memset(&piece, 0, sizeof piece);
    double t = MPI_Wtime();
    if (s == PM_STATUS_OK && slab->nz)
        s = piece_of(ctx, slab, window, wlo, whi, lattice, z0, z0 + slab->nz, iso, options, &piece);
    rep.extract_ms = 1e3 * (MPI_Wtime() - t);
    free(window);
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
    unsigned char *window = NULL;
    uint64_t wlo, whi;
    s = slab_window(comm, lattice, slab, z0, options, 1, s, &rep, &window, &wlo, &whi);
    if (s != PM_STATUS_OK) return s;
    pm_mesh_piece a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    double t = MPI_Wtime();
    const uint64_t z1 = z0 + slab->nz;
    int have_b = 0;
    if (s == PM_STATUS_OK && slab->nz) {
        s = piece_of(ctx, slab, window, wlo, whi, lattice, z0, z1, iso, options, &a);
        if (s == PM_STATUS_OK && z1 < lattice->dims[2]) {
            s = piece_of(ctx, slab, window, wlo, whi, lattice, z1, z1 + 1, iso, options, &b);
            have_b = 1;
        }
        if (s == PM_STATUS_OK) s = local_mesh(&a, have_b ? &b : NULL, mesh, global_ids);
    }
    rep.extract_ms = 1e3 * (MPI_Wtime() - t);
    free(window);
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
