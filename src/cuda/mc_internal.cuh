/* Shared declarations of the CUDA marching cubes files (mc_classify.cu,
 * mc_stream.cu, isosurface.cu): tiling, the compacted records, launch
 * helpers. */
#ifndef PM_CUDA_MC_INTERNAL_CUH
#define PM_CUDA_MC_INTERNAL_CUH

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/mc_tables.h"
}

#include "cuda/mc_device.cuh"

#define MC_THREADS 256
/* Pass 1 works on a bitmask of inside bits: row r = j + ny*k of the
 * lattice is `words` 32-bit words (bit i % 32 of word i / 32 is point i),
 * rows back to back. A classification tile is MC_ROUNDS rounds of
 * MC_TILE_WORDS consecutive words, so tile order is lattice order, which the
 * look-back relies on; large tiles keep the look-back chain short. */
#define MC_WPT 4 /* bitmask words per classification thread and round */
#define MC_TILE_WORDS (MC_THREADS * MC_WPT)
#define MC_ROUNDS 4

typedef struct mc_tiling {
    long long words;  /* words per row: ceil(nx / 32) */
    long long nwords; /* words in the bitmask: words * ny * nz */
    long long ntiles; /* classification tiles */
} mc_tiling;

/* One record per active lattice point, in lattice order: the point's
 * linear index i + nx*(j + ny*k), its info (case | crossings << 8 |
 * triangles << 11 | 1 << 14), and the exclusive prefixes of triangles and
 * of owned-edge crossings over all points before it. */
typedef struct mc_records {
    unsigned long long *point;
    uint16_t *info;
    unsigned long long *tri;
    unsigned long long *cross;
} mc_records;

/* Start tables of the expansion kernels, written by the classification:
 * t[b] = the record whose triangles hold key floor(b * 256 / tdiv) (the
 * first record of block b of the soup kernels, tdiv = 3, or of the
 * triangle kernel, tdiv = 1); c[b] = the record whose crossings hold key
 * b * 256 (vertex kernel). Exactly mc_starts_kernel's last record with
 * prefix <= key: the records after it start past the key. NULL: not
 * wanted. */
typedef struct mc_tables {
    long long *t, *c;
    unsigned long long nt, nc; /* entries */
    unsigned tdiv;
} mc_tables;

/* Bytes of one record. */
#define MC_RECORD_BYTES (8 + 2 + 8 + 8)

mc_tiling mc_make_tiling(const pm_volume *vol);
/* Pass 1: (a) the inside bits, (b) classification + compaction. pdl: the
 * kernels are launched with programmatic dependent launch (pmi_launch). */
pm_status mc_inside_bits(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, pm_sample_type type,
                         unsigned int *bits, int pdl);
/* indexed: records for every point that owns a crossing edge too, with the
 * crossing prefixes. rows (indexed only, else NULL): rows[r] = the records
 * before lattice row r (j + ny*k), i.e. its first record. kernel: 2
 * mc_classify2_kernel, 1 the older mc_classify_kernel (the caller picks by
 * bitmask size; same output; minb
 * its blocks per SM bound: 4; 2 and 5 are experiments). reload: the
 * default kernel's record pass loads each active word's neighbours (as the
 * older kernel) instead of the round's words at once (an experiment, rows
 * of whole 16-byte groups only). tab (NULL: none):
 * the start tables to write (tab->c only when indexed). */
pm_status mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int indexed,
                      const unsigned int *bits, unsigned int *ticket, unsigned long long *state,
                      mc_records rec, unsigned long long rec_cap, unsigned long long *rows,
                      unsigned long long *totals, int kernel, int minb, int reload, const mc_tables *tab, int pdl);

/* Streaming classification (mc_stream.cu, the default for all sample types
 * but f64): the same records, row table, start tables and totals as
 * mc_classify, from the volume directly. A segment is one MS_CHUNK-point
 * chunk of one lattice row; segments are numbered in lattice order. */
#define MS_CHUNK 256
typedef struct mc_stream_grid {
    long long nchunks; /* segments per row */
    long long nbands;  /* bands of rows per slice */
    long long nzr, S;  /* slice ranges, slices per range */
    long long nseg;    /* nchunks * ny * nz */
    long long ntiles;  /* tiles of the segment scan */
} mc_stream_grid;
/* Scratch of the streaming classification: segment counts (nseg words),
 * segment bases (3 * nseg), the record pool (pool_cap entries of 16 bytes)
 * and its counter; the segment scan's ticket and tile states (3 * ntiles),
 * all zeroed by the caller (counter, ticket, states). */
typedef struct mc_stream_mem {
    unsigned *segc;
    unsigned long long *segbase;
    uint4 *pool;
    unsigned long long pool_cap;
    unsigned long long *pool_ctr;
    unsigned int *ticket;
    unsigned long long *state;
} mc_stream_mem;
int mc_stream_supported(const pm_volume *vol);
/* slices: slices per block (<= 0: chosen for nsm multiprocessors). */
mc_stream_grid mc_stream_make_grid(const pm_volume *vol, int nsm, long long slices);
/* after_stream (may be NULL): recorded after the streaming kernel. */
pm_status mc_stream_classify(pm_context *ctx, const mcd_volume &v, pm_sample_type type, const mc_stream_grid &g,
                             int indexed, const mc_stream_mem &m, mc_records rec, unsigned long long rec_cap,
                             unsigned long long *rows, unsigned long long *totals, const mc_tables *tab,
                             cudaEvent_t after_stream, int pdl);

#endif
