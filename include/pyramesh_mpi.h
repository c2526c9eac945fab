/* pyramesh over MPI: ranks mesh one volume together (docs/distributed.md).
 *
 * Optional layer (libpyramesh_mpi, built when CMake finds MPI; include
 * this header and link pyramesh::pyramesh_mpi). The core library has no
 * MPI dependency. Every function here is collective over `comm`: all
 * ranks call it with the same lattice, iso and options.
 *
 * Decomposition: the global volume's slices are split in slabs, rank r
 * holding slices [z0_r, z0_r + nz_r) with the slabs in rank order and
 * tiling [0, lattice->dims[2]) (a rank may hold none). Each rank gets the
 * ghost slices it needs from the ranks that hold them (point to point),
 * meshes the cells and vertex edges its slices own with
 * pm_isosurface_piece, and the pieces are either gathered on one rank and
 * merged by pm_mesh_pieces_merge (the mesh is then byte for byte
 * pm_isosurface's mesh of the whole volume, for every rank count and
 * decomposition), or kept distributed as self-contained local meshes
 * carrying global vertex ids (for per-rank files). */
#ifndef PYRAMESH_MPI_H
#define PYRAMESH_MPI_H

#include <mpi.h>

#include "pyramesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective: every rank passes its own status; all return the status of
 * the lowest-numbered failing rank (PM_STATUS_OK when none failed), and
 * pm_last_error() reads "rank R: <that rank's message>" on every rank.
 * The functions below agree on their errors this way; a caller uses it
 * for its own steps (reading its part of an input, writing). */
PM_API pm_status pm_mpi_agree(MPI_Comm comm, pm_status mine);

typedef struct pm_mpi_report {
    int ranks;                /* size of comm */
    uint64_t slab_lo, slab_nz; /* this rank's slices */
    uint64_t ghost_slices;    /* slices received from other ranks */
    uint64_t ghost_bytes;     /* their bytes */
    uint64_t piece_vertices, piece_triangles; /* this rank's piece */
    double exchange_ms, extract_ms, gather_ms, merge_ms; /* this rank's stages */
    /* pm_mpi_reconstruct: the lattice laid over all kept particles (the
     * one pm_reconstruct reports) and the particles kept and dropped by
     * the aabb filter, over all ranks. */
    pm_lattice lattice;
    uint64_t particles_used, particles_dropped;
} pm_mpi_report;

/* The iso surface of a volume split over the ranks of comm, gathered on
 * `root`: there `mesh` is pm_isosurface(lattice's volume, iso, options)
 * byte for byte (host memory; mode, normals, inside and caller buffers of
 * options as for pm_isosurface); on the other ranks mesh is left empty.
 * `slab` is this rank's slices (type, nx, ny as the lattice, nz its slice
 * count, strides as pm_volume; origin and spacing unused: positions come
 * from the lattice) in host memory; z0 is its first global slice.
 * Errors are agreed: when any rank fails (bad slab, memory, a backend
 * without pm_isosurface_piece), every rank returns the failing rank's
 * status, and pm_last_error() reads "rank R: <its message>". report may
 * be NULL. */
PM_API pm_status pm_mpi_isosurface(pm_context *ctx, MPI_Comm comm, const pm_lattice *lattice,
                                   const pm_volume *slab, uint64_t z0, double iso,
                                   const pm_isosurface_options *options, int root, pm_mesh *mesh,
                                   pm_mpi_report *report);

/* The distributed form: each rank gets its own part as a self-contained
 * indexed mesh in host memory: the vertices its slices own plus the
 * vertices of the next slab's first slice that its triangles use, and the
 * triangles of its cells, in pm_isosurface's order. global_ids (allocated,
 * free with free()) receives each vertex's key (pm_vertex_key): equal keys
 * on two ranks are one vertex. Concatenating the parts and merging equal
 * keys gives the gathered mesh. */
PM_API pm_status pm_mpi_isosurface_local(pm_context *ctx, MPI_Comm comm, const pm_lattice *lattice,
                                         const pm_volume *slab, uint64_t z0, double iso,
                                         const pm_isosurface_options *options, pm_mesh *mesh,
                                         uint64_t **global_ids, pm_mpi_report *report);

/* The particle surface of a set split over the ranks of comm, gathered
 * on `root`: there `mesh` is pm_reconstruct(ctx, all particles, params,
 * options, iso_options) byte for byte, where "all particles" is the ranks'
 * xyz arrays concatenated in rank order (that order decides the order of
 * every sum: docs/reconstruct.md). Each rank passes the particles it owns
 * (host memory, any spatial split, n may be 0). The lattice is laid over
 * the box of all kept particles (one allreduce), its bricks (docs/scale.md)
 * are split by layers along z, one range per rank, and every particle is
 * sent to the ranks whose bricks it reaches, with the neighbours its
 * density needs (one all-to-all of 24 bytes per copy); each rank meshes
 * its bricks into one piece and the root merges them. SPH method only (the
 * sparse grid); options->grid is ignored, brick_points is used (0: the
 * largest of the ranks' devices' defaults, docs/scale.md). Each rank
 * meshes on its own context (CPU or its GPU); the mesh does not depend on
 * the rank count, the split or the devices. Errors are agreed as in
 * pm_mpi_agree. */
PM_API pm_status pm_mpi_reconstruct(pm_context *ctx, MPI_Comm comm, const float *xyz, size_t n,
                                    const pm_field_params *params,
                                    const pm_reconstruct_options *options,
                                    const pm_isosurface_options *iso_options, int root,
                                    pm_mesh *mesh, pm_mpi_report *report);

/* The distributed form of pm_mpi_reconstruct: each rank gets its part as a
 * self-contained indexed mesh in host memory (free with pm_mesh_free):
 * the vertices of its brick layers, then the vertices of the next ranks'
 * layers that its triangles use (fetched from their owners), ascending
 * vertex key, and the triangles of its cells in pm_reconstruct's order.
 * global_ids (allocated, free with free()) receives each vertex's key
 * (pm_vertex_key on the report's lattice): equal keys on two ranks are one
 * vertex with the same bytes, and merging the parts by key gives the
 * gathered mesh. iso_options->mode is ignored (indexed). */
PM_API pm_status pm_mpi_reconstruct_local(pm_context *ctx, MPI_Comm comm, const float *xyz,
                                          size_t n, const pm_field_params *params,
                                          const pm_reconstruct_options *options,
                                          const pm_isosurface_options *iso_options, pm_mesh *mesh,
                                          uint64_t **global_ids, pm_mpi_report *report);

/* Writes the distributed mesh: every rank writes its part as
 * `<stem>_<rank>.vtp` (VTK XML PolyData with a point array "GlobalIds"
 * (Int64, VTK's id type) and, when the mesh has them, "Normals") next to `path_pvtp`,
 * and rank 0 writes `path_pvtp` (VTK's parallel PolyData index naming the
 * pieces), which ParaView and VTK's XMLPPolyDataReader open as one mesh.
 * Each file goes to a temporary name and is renamed once every rank has
 * written its part; on any failure no file is left. */
PM_API pm_status pm_mpi_write_pvtp(MPI_Comm comm, const char *path_pvtp, const pm_mesh *mesh,
                                   const uint64_t *global_ids);

#ifdef __cplusplus
}
#endif

#endif
