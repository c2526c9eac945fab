/* Shared by the MPI layer's files (src/mpi/): agreeing on errors and
 * moving mesh pieces between ranks. Internal (pmi_ prefix). */
#ifndef PM_MPI_INTERNAL_H
#define PM_MPI_INTERNAL_H

#include "pyramesh_mpi.h"

#include "core/util.h"

/* Collective: every rank passes its status; all return the status of the
 * lowest failing rank (OK when none failed), with pm_last_error() set to
 * "rank R: <its message>" on every rank. */
pm_status pmi_mpi_agree(MPI_Comm comm, pm_status mine);

/* Collective: every rank sends its piece to root (when has_piece); the
 * root receives them, its own included (moved, not copied), in rank
 * order into *all (count of them; host memory, pm_mesh_piece_free each
 * and free the array). Others get *all = NULL. */
pm_status pmi_mpi_gather_pieces(MPI_Comm comm, int rank, int ranks, int root,
                                const pm_mesh_piece *mine, int has_piece, pm_mesh_piece **all,
                                size_t *count);

#endif
