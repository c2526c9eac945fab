/* A volume meshed as z-slab pieces on one or several contexts
 * (slab_pieces.c, docs/scale.md "Slabs on devices"). Internal header. */
#ifndef PM_CORE_SLAB_PIECES_H
#define PM_CORE_SLAB_PIECES_H

#include <stddef.h>
#include <stdint.h>

#include "pyramesh.h"

typedef struct pmi_slab_report {
    size_t slabs, slab_slices, ghost_below, ghost_above;
    int workers;
    uint64_t bytes_read;   /* sample bytes taken from the volume or the source */
    uint64_t window_bytes; /* one worker's window buffer */
    double read_ms, upload_ms, piece_ms; /* summed over workers */
    double pieces_ms, merge_ms;          /* wall: all pieces, then the merge */
    int windows;      /* slabs meshed by the backend's window extraction (else pieces) */
    double append_ms; /* parts appended to the mesh as slabs finished (summed) */
    size_t splits; /* windows over their budget, meshed as halves */
} pmi_slab_report;

/* Workers (host threads, contexts, streams) per GPU: while one uploads its
 * slab's window, the others extract and download theirs. */
#define PMI_SLAB_GPU_WORKERS 3

/* Device bytes of one GPU worker with slabs of T slices (g ghost slices,
 * sb bytes and `plane` points a slice): its window, and the window
 * extraction's pass 1 scratch and mesh (src/cuda/isosurface.cu): about 72
 * bytes per record of its first guess (min(points, points / 64 + 2^20)):
 * 42 of scratch and 30 of mesh, and a quarter byte per point (bitmask or
 * segments). A denser surface goes over it: the window is then meshed as
 * halves. */
static inline uint64_t pmi_slab_device_bytes(uint64_t T, uint64_t g, uint64_t sb, uint64_t plane)
{
    const uint64_t np = (T + g) * plane, guess = np / 64 + ((uint64_t)1 << 20);
    return (T + g) * sb + 72 * (np < guess ? np : guess) + np / 4;
}

/* The mesh of `volume` (resolved: strides set; data in host memory, or
 * NULL with `source`, which is then read in slice order) at iso with the
 * resolved options, as z slabs of T slices meshed by n workers (ctxs[w],
 * one host thread each) and merged on ctxs[0]: pm_isosurface's mesh. */
pm_status pmi_slab_pieces(pm_context *const *ctxs, int n, const pm_volume *volume,
                          const pm_volume_source *source, double iso,
                          const pm_isosurface_options *opt, size_t T, uint64_t budget,
                          pm_mesh *mesh, pmi_slab_report *rep);

/* pmi_slab_pieces with the workers and the thickness chosen: every GPU
 * context gets PMI_SLAB_GPU_WORKERS - 1 more contexts on its device (the workers overlap copies
 * and extraction); T = T_want, or the volume cut into min_slabs slabs,
 * thinner where a GPU's memory needs it: its workers' windows and scratch
 * within `limit` bytes per GPU (0: 70% of its free memory);
 * PM_STATUS_OUT_OF_MEMORY, with the figures, when one slice does not fit. */
pm_status pmi_slab_run(pm_context *const *ctxs, int n, const pm_volume *volume,
                       const pm_volume_source *source, double iso,
                       const pm_isosurface_options *opt, size_t limit, size_t T_want,
                       size_t min_slabs, pm_mesh *mesh, pmi_slab_report *rep);

/* The report's words for a slab run: backend, key=value (how it ran),
 * slabs, thickness, workers, read_bytes; stages read, upload, pieces,
 * merge (docs/scale.md). r may be NULL. */
void pmi_slab_report_words(pm_isosurface_report *r, const char *backend, const char *key,
                           const char *value, const pmi_slab_report *S);

/* The volume a source from pm_volume_source_memory reads, or NULL. */
const pm_volume *pmi_memory_source_volume(const pm_volume_source *source);

#endif
