/* The MPI layer's shared parts: errors agreed by every rank, mesh pieces
 * sent to one rank, and the distributed mesh written as .vtp pieces with a
 * .pvtp index (include/pyramesh_mpi.h, docs/distributed.md). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi/mpi_internal.h"

#include "io/io.h"

pm_status pm_mpi_agree(MPI_Comm comm, pm_status mine) { return pmi_mpi_agree(comm, mine); }

pm_status pmi_mpi_agree(MPI_Comm comm, pm_status mine)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int me = mine != PM_STATUS_OK ? rank : INT_MAX, first = INT_MAX;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == INT_MAX) return PM_STATUS_OK;
    struct {
        int status;
        char text[900];
    } msg;
    memset(&msg, 0, sizeof msg);
    if (rank == first) {
        msg.status = (int)mine;
        snprintf(msg.text, sizeof msg.text, "%s", pm_last_error());
    }
    MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, first, comm);
    msg.text[sizeof msg.text - 1] = 0;
    /* An error agreed before keeps its "rank R: " prefix once. */
    int r = -1, used = 0;
    if (sscanf(msg.text, "rank %d: %n", &r, &used) == 1 && used > 0)
        return pmi_error((pm_status)msg.status, "%s", msg.text);
    return pmi_error((pm_status)msg.status, "rank %d: %s", first, msg.text);
}

/* Large messages go in pieces of at most 1 GiB (MPI counts are int). */
#define CHUNK ((size_t)1 << 30)

static int send_bytes(const void *p, size_t n, int to, MPI_Comm comm)
{
    const unsigned char *b = p;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        if (MPI_Send(b + off, (int)k, MPI_BYTE, to, 72, comm) != MPI_SUCCESS) return 0;
    }
    return 1;
}

static int recv_bytes(void *p, size_t n, int from, MPI_Comm comm)
{
    unsigned char *b = p;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        if (MPI_Recv(b + off, (int)k, MPI_BYTE, from, 72, comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return 0;
    }
    return 1;
}

enum { H_HAS, H_NV, H_NT, H_ACTIVE, H_NORMALS, H_LO0, H_LO1, H_LO2, H_D0, H_D1, H_D2, H_L0, H_L1,
       H_L2, H_COUNT };

pm_status pmi_mpi_gather_pieces(MPI_Comm comm, int rank, int ranks, int root,
                                const pm_mesh_piece *mine, int has_piece, pm_mesh_piece **all,
                                size_t *count)
{
    *all = NULL;
    *count = 0;
    uint64_t h[H_COUNT];
    memset(h, 0, sizeof h);
    if (has_piece) {
        h[H_HAS] = 1;
        h[H_NV] = mine->num_vertices;
        h[H_NT] = mine->num_triangles;
        h[H_ACTIVE] = mine->active_cells;
        h[H_NORMALS] = mine->normals != NULL;
        for (int a = 0; a < 3; a++) {
            h[H_LO0 + a] = mine->owned.lo[a];
            h[H_D0 + a] = mine->owned.dims[a];
            h[H_L0 + a] = mine->lattice_dims[a];
        }
    }
    uint64_t *hs = NULL;
    if (rank == root && !(hs = malloc((size_t)ranks * sizeof h)))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory for %d headers", ranks);
    if (MPI_Gather(h, H_COUNT, MPI_UINT64_T, hs, H_COUNT, MPI_UINT64_T, root, comm) !=
        MPI_SUCCESS) {
        free(hs);
        return pmi_error(PM_STATUS_IO_ERROR, "pm_mpi: MPI_Gather of the pieces failed");
    }
    if (rank != root) {
        if (!has_piece) return PM_STATUS_OK;
        size_t nv = (size_t)mine->num_vertices, nt = (size_t)mine->num_triangles;
        int ok = send_bytes(mine->vertex_keys, nv * 8, root, comm) &&
                 send_bytes(mine->positions, nv * 12, root, comm) &&
                 (!mine->normals || send_bytes(mine->normals, nv * 12, root, comm)) &&
                 send_bytes(mine->triangles, nt * 24, root, comm) &&
                 send_bytes(mine->cell_keys, nt * 8, root, comm);
        return ok ? PM_STATUS_OK
                  : pmi_error(PM_STATUS_IO_ERROR, "pm_mpi: sending the piece failed");
    }
    pm_mesh_piece *out = calloc((size_t)ranks, sizeof *out);
    if (!out) {
        free(hs);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_mpi: no memory");
    }
    size_t n = 0;
    pm_status s = PM_STATUS_OK;
    /* Receive from every rank that has a piece, even after a failure, so
     * that no sender is left waiting. */
    for (int r = 0; r < ranks; r++) {
        const uint64_t *hr = hs + (size_t)r * H_COUNT;
        if (!hr[H_HAS]) continue;
        pm_mesh_piece *p = &out[n++];
        if (r == root) {
            *p = *mine; /* moved: the caller no longer frees its piece */
            continue;
        }
        size_t nv = (size_t)hr[H_NV], nt = (size_t)hr[H_NT];
        p->num_vertices = nv;
        p->num_triangles = nt;
        p->active_cells = hr[H_ACTIVE];
        for (int a = 0; a < 3; a++) {
            p->owned.lo[a] = hr[H_LO0 + a];
            p->owned.dims[a] = hr[H_D0 + a];
            p->lattice_dims[a] = hr[H_L0 + a];
        }
        p->vertex_keys = malloc(nv * 8 + 1);
        p->positions = malloc(nv * 12 + 1);
        p->normals = hr[H_NORMALS] ? malloc(nv * 12 + 1) : NULL;
        p->triangles = malloc(nt * 24 + 1);
        p->cell_keys = malloc(nt * 8 + 1);
        int have = p->vertex_keys && p->positions && (!hr[H_NORMALS] || p->normals) &&
                   p->triangles && p->cell_keys;
        /* Without memory the bytes still have to be taken off the wire. */
        unsigned char *sink = have ? NULL : malloc(CHUNK);
        if (!have && !sink) {
            /* Nothing left to receive into: give up (the senders block). */
            MPI_Abort(comm, 1);
        }
        size_t sizes[5] = {nv * 8, nv * 12, hr[H_NORMALS] ? nv * 12 : 0, nt * 24, nt * 8};
        void *dst[5] = {p->vertex_keys, p->positions, p->normals, p->triangles, p->cell_keys};
        for (int a = 0; a < 5; a++) {
            if (!sizes[a]) continue;
            if (have) {
                if (!recv_bytes(dst[a], sizes[a], r, comm) && s == PM_STATUS_OK)
                    s = pmi_error(PM_STATUS_IO_ERROR,
                                  "pm_mpi: receiving rank %d's piece failed", r);
            } else {
                for (size_t off = 0; off < sizes[a]; off += CHUNK) {
                    size_t k = sizes[a] - off < CHUNK ? sizes[a] - off : CHUNK;
                    MPI_Recv(sink, (int)k, MPI_BYTE, r, 72, comm, MPI_STATUS_IGNORE);
                }
            }
        }
        free(sink);
        if (!have && s == PM_STATUS_OK)
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY,
                          "pm_mpi: no memory for rank %d's piece (%zu vertices, %zu triangles)", r,
                          nv, nt);
    }
    free(hs);
    if (s != PM_STATUS_OK) {
        for (size_t i = 0; i < n; i++) pm_mesh_piece_free(&out[i]);
        free(out);
        return s;
    }
    *all = out;
    *count = n;
    return PM_STATUS_OK;
}

/* "dir/stem.pvtp" -> "dir/stem_<rank>.vtp" (written) and "stem_<rank>.vtp"
 * (as the index names it, relative to the index). */
static pm_status piece_names(const char *path, int rank, char *full, size_t cap, char *rel,
                             size_t rcap)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    if (blen < 6 || strcmp(base + blen - 5, ".pvtp") != 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi_write_pvtp: '%s' does not end in .pvtp",
                         path);
    int n1 = snprintf(rel, rcap, "%.*s_%d.vtp", (int)(blen - 5), base, rank);
    int n2 = snprintf(full, cap, "%.*s%s", (int)(base - path), path, rel);
    if (n1 < 0 || (size_t)n1 >= rcap || n2 < 0 || (size_t)n2 >= cap)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi_write_pvtp: path too long: '%s'", path);
    return PM_STATUS_OK;
}

pm_status pm_mpi_write_pvtp(MPI_Comm comm, const char *path_pvtp, const pm_mesh *mesh,
                            const uint64_t *global_ids)
{
    int rank, ranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    char full[4096], rel[1024];
    pm_status s = path_pvtp ? piece_names(path_pvtp, rank, full, sizeof full, rel, sizeof rel)
                            : pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi_write_pvtp: NULL path");
    if (s == PM_STATUS_OK && (!mesh || (mesh->num_vertices && !global_ids)))
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mpi_write_pvtp: NULL mesh or global ids");
    if (s == PM_STATUS_OK && mesh->in_context_memory)
        s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                      "pm_mpi_write_pvtp: the mesh must be in host memory");
    if (s == PM_STATUS_OK) s = pmi_vtp_write_ids(full, mesh, 0, global_ids);
    int wrote = s == PM_STATUS_OK;
    /* The index lists normals when the parts have them (ranks without a
     * slab have an empty part without). */
    int mine = mesh && mesh->normals, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
    s = pmi_mpi_agree(comm, s);
    if (s == PM_STATUS_OK && rank == 0) {
        pmi_writer w;
        s = pmi_writer_open(&w, path_pvtp);
        if (s == PM_STATUS_OK) {
            pmi_writer_printf(&w,
                              "<?xml version=\"1.0\"?>\n<VTKFile type=\"PPolyData\" version=\"1.0\" "
                              "byte_order=\"%s\" header_type=\"UInt64\">\n  <PPolyData "
                              "GhostLevel=\"0\">\n    <PPointData%s GlobalIds=\"GlobalIds\">\n",
                              pmi_host_big_endian() ? "BigEndian" : "LittleEndian",
                              any ? " Normals=\"Normals\"" : "");
            if (any)
                pmi_writer_printf(&w, "      <PDataArray type=\"Float32\" Name=\"Normals\" "
                                      "NumberOfComponents=\"3\"/>\n");
            pmi_writer_printf(&w, "      <PDataArray type=\"Int64\" Name=\"GlobalIds\"/>\n"
                                  "    </PPointData>\n    <PPoints>\n      <PDataArray "
                                  "type=\"Float32\" NumberOfComponents=\"3\"/>\n    </PPoints>\n");
            for (int r = 0; r < ranks; r++) {
                char f2[4096], r2[1024];
                piece_names(path_pvtp, r, f2, sizeof f2, r2, sizeof r2);
                pmi_writer_printf(&w, "    <Piece Source=\"%s\"/>\n", r2);
            }
            pmi_writer_printf(&w, "  </PPolyData>\n</VTKFile>\n");
            s = pmi_writer_commit(&w);
        }
    }
    s = pmi_mpi_agree(comm, s);
    if (s != PM_STATUS_OK && wrote) unlink(full);
    return s;
}
