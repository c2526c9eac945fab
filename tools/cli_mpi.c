/* `mpirun -n N pyramesh isosurface|reconstruct ...`: the CLI's MPI mode
 * (docs/distributed.md). `reconstruct`: every rank reads the particle
 * file and passes its contiguous share to pm_mpi_reconstruct; rank 0
 * post-processes and writes the mesh, the same bytes as a 1-rank run.
 * Started by mpirun (its environment says so), the command initialises
 * MPI; every rank reads only its slab of the volume where the format
 * allows (raw, NRRD: positioned reads; gzip: inflated from the start and
 * skipped up to the slab), the ranks mesh it together with
 * pm_mpi_isosurface, and rank 0 post-processes and writes the mesh, the
 * same bytes as a 1-rank run. An output ending in .pvtp is written
 * distributed instead (pm_mpi_isosurface_local or pm_mpi_reconstruct_local,
 * then pm_mpi_write_pvtp).
 * Built without MPI, a run under mpirun with more than one rank stops with
 * an error rather than meshing the volume N times. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef PM_HAVE_MPI
#include "pyramesh_mpi.h"
#endif

/* The rank count mpirun (Open MPI, MPICH/Hydra, Slurm's PMI) announces, or 0. */
static int launched_ranks(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                                 NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int cli_mpi_rank = -1, cli_mpi_ranks = 0;

int cli_mpi_start(int *argc, char ***argv)
{
    int n = launched_ranks();
    if (n <= 0) return 1;
#ifdef PM_HAVE_MPI
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        cli_error("MPI_Init failed");
        return 0;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &cli_mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &cli_mpi_ranks);
    return 1;
#else
    (void)argc;
    (void)argv;
    if (n > 1) {
        cli_error("started by mpirun with %d ranks, but this pyramesh was built without MPI "
                  "(install libopenmpi-dev and rebuild; docs/distributed.md)",
                  n);
        return 0;
    }
    return 1;
#endif
}

int cli_mpi_finish(int rc)
{
#ifdef PM_HAVE_MPI
    if (cli_mpi_rank >= 0) {
        /* Every rank exits non-zero when one failed. */
        int all = rc;
        MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        MPI_Finalize();
        return all;
    }
#endif
    return rc;
}

#ifdef PM_HAVE_MPI
/* Reads slices [z0, z1) of the source into dst: positioned where the
 * source allows it, else from the start (a gzip stream), skipping. */
static pm_status read_slab(const char *input, const pm_raw_options *raw, pm_volume_source *src,
                           size_t z0, size_t z1, unsigned char *dst)
{
    if (z1 == z0) return PM_STATUS_OK;
    pm_status s = src->read(src->user, z0, z1, dst);
    if (s == PM_STATUS_OK || z0 == 0) return s;
    /* A sequential source: open it again and read from slice 0. */
    pm_volume_source_close(src);
    if ((s = pm_volume_source_open(input, raw, src)) != PM_STATUS_OK) return s;
    for (size_t z = 0; z < z0 && s == PM_STATUS_OK; z++) s = src->read(src->user, z, z + 1, dst);
    return s == PM_STATUS_OK ? src->read(src->user, z0, z1, dst) : s;
}
#endif

pm_status cli_mpi_isosurface(pm_context *ctx, const char *input, const pm_raw_options *raw,
                             size_t max_memory, double iso, const pm_isosurface_options *opt,
                             int distributed, pm_mesh *mesh, uint64_t **ids, pm_volume *geometry,
                             double *read_ms)
{
#ifdef PM_HAVE_MPI
    memset(geometry, 0, sizeof *geometry);
    double t0 = cli_now_ms();
    pm_volume_source src;
    memset(&src, 0, sizeof src);
    pm_volume whole;
    memset(&whole, 0, sizeof whole);
    int have_src = 0;
    pm_status s = pm_volume_source_open(input, raw, &src);
    if (s == PM_STATUS_OK) {
        have_src = 1;
        geometry->type = src.type;
        geometry->nx = src.nx;
        geometry->ny = src.ny;
        geometry->nz = src.nz;
        for (int a = 0; a < 3; a++) {
            geometry->spacing[a] = src.spacing[a];
            geometry->origin[a] = src.origin[a];
        }
    } else if (s == PM_STATUS_UNSUPPORTED) {
        /* Other formats: every rank reads the file and keeps its slab. */
        s = pm_volume_read(input, raw, max_memory, &whole);
        if (s == PM_STATUS_OK) {
            *geometry = whole;
            geometry->data = NULL;
        }
    }
    const size_t R = (size_t)cli_mpi_ranks, r = (size_t)cli_mpi_rank;
    size_t nz = geometry->nz, z0 = nz * r / R, z1 = nz * (r + 1) / R;
    pm_volume slab = *geometry;
    slab.nz = z1 - z0;
    unsigned char *buf = NULL;
    if (s == PM_STATUS_OK && have_src) {
        size_t bytes = slab.nx * slab.ny * pm_sample_size(slab.type) * slab.nz;
        buf = malloc(bytes ? bytes : 1);
        s = buf ? read_slab(input, raw, &src, z0, z1, buf) : PM_STATUS_OUT_OF_MEMORY;
        slab.data = buf;
    } else if (s == PM_STATUS_OK) {
        size_t rs = whole.row_stride ? whole.row_stride : whole.nx;
        size_t zs = whole.slice_stride ? whole.slice_stride : rs * whole.ny;
        slab = whole;
        slab.nz = z1 - z0;
        slab.data = (const unsigned char *)whole.data + z0 * zs * pm_sample_size(whole.type);
    }
    if (have_src) pm_volume_source_close(&src);
    *read_ms = cli_now_ms() - t0;
    s = pm_mpi_agree(MPI_COMM_WORLD, s);
    if (s == PM_STATUS_OK) {
        pm_lattice lat;
        memset(&lat, 0, sizeof lat);
        lat.dims[0] = geometry->nx;
        lat.dims[1] = geometry->ny;
        lat.dims[2] = geometry->nz;
        for (int a = 0; a < 3; a++) {
            lat.origin[a] = geometry->origin[a];
            lat.spacing[a] = geometry->spacing[a] != 0 ? geometry->spacing[a] : 1.0;
        }
        if (distributed)
            s = pm_mpi_isosurface_local(ctx, MPI_COMM_WORLD, &lat, &slab, z0, iso, opt, mesh, ids,
                                        NULL);
        else
            s = pm_mpi_isosurface(ctx, MPI_COMM_WORLD, &lat, &slab, z0, iso, opt, 0, mesh, NULL);
    }
    free(buf);
    pm_volume_free(&whole);
    return s;
#else
    (void)ctx, (void)input, (void)raw, (void)max_memory, (void)iso, (void)opt, (void)distributed;
    (void)mesh, (void)ids, (void)geometry, (void)read_ms;
    return PM_STATUS_UNSUPPORTED;
#endif
}

pm_status cli_mpi_reconstruct(pm_context *ctx, const float *xyz, size_t n,
                              const pm_field_params *fp, const pm_reconstruct_options *ro,
                              const pm_isosurface_options *iso, pm_mesh *mesh, uint64_t **ids,
                              pm_reconstruct_report *rep)
{
    memset(rep, 0, sizeof *rep);
#ifdef PM_HAVE_MPI
    const size_t R = (size_t)cli_mpi_ranks, r = (size_t)cli_mpi_rank;
    const size_t a = n * r / R, b = n * (r + 1) / R;
    pm_mpi_report mr;
    double t0 = cli_now_ms();
    pm_status s =
        ids ? pm_mpi_reconstruct_local(ctx, MPI_COMM_WORLD, xyz + 3 * a, b - a, fp, ro, iso, mesh,
                                       ids, &mr)
            : pm_mpi_reconstruct(ctx, MPI_COMM_WORLD, xyz + 3 * a, b - a, fp, ro, iso, 0, mesh,
                                 &mr);
    if (s != PM_STATUS_OK || cli_mpi_rank != 0) return s;
    rep->sparse = 1;
    rep->iso = fp->iso > 0 ? fp->iso : 0.6;
    rep->lattice = mr.lattice; /* for the post-processing's snapping */
    for (int k = 0; k < 3; k++)
        rep->lattice_lo[k] = llround(mr.lattice.origin[k] / mr.lattice.spacing[k]);
    rep->particles_used = (size_t)mr.particles_used;
    rep->particles_dropped = (size_t)mr.particles_dropped;
    rep->field_ms = mr.extract_ms;
    rep->merge_ms = mr.merge_ms + mr.gather_ms;
    rep->neighbours_ms = mr.exchange_ms;
    rep->total_ms = cli_now_ms() - t0;
    return PM_STATUS_OK;
#else
    (void)ctx, (void)xyz, (void)n, (void)fp, (void)ro, (void)iso, (void)mesh, (void)ids;
    return PM_STATUS_UNSUPPORTED;
#endif
}

pm_status cli_mpi_write_pvtp(const char *path, const pm_mesh *mesh, const uint64_t *ids)
{
#ifdef PM_HAVE_MPI
    return pm_mpi_write_pvtp(MPI_COMM_WORLD, path, mesh, ids);
#else
    (void)path, (void)mesh, (void)ids;
    return PM_STATUS_UNSUPPORTED;
#endif
}
