/* Shared declarations of the CUDA marching cubes files (mc_classify.cu and
 * mc_stream.cu: pass 1; mc_expand.cu: pass 2; isosurface.cu: the host
 * drivers): tiling, the compacted records, the entry points of each
 * file. */
#ifndef PM_CUDA_MC_INTERNAL_CUH
#define PM_CUDA_MC_INTERNAL_CUH

#include "cuda/cuda_internal.h"

extern "C" {
#include "core/mc_tables.h"
}

#include "cuda/mc_device.cuh"

#define MC_THREADS 256

/* Blocks of MC_THREADS for one thread per output, at least one (n <= 2^32
 * * 3 keeps the grid below 2^31). */
static inline unsigned mc_blocks(unsigned long long n)
{
    unsigned long long b = (n + MC_THREADS - 1) / MC_THREADS;
    return (unsigned)(b < 1 ? 1 : b);
}
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
    int vec;          /* the direct classification's 16-byte loads */
    /* The direct classification's divisions by words and ny as
     * multiplications (md_div): 0 for a divisor of 1. */
    unsigned long long mw, mny;
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

/* The classification kernel of the bitmask path: mc_classify2_kernel
 * (a round's words in a few batched loads; the default while the bitmask
 * fits in half the L2) or mc_classify_kernel (each active word's
 * neighbours loaded again in the record pass; larger bitmasks). */
typedef enum mc_cls_kernel { MC_CLS_BATCHED, MC_CLS_PERWORD } mc_cls_kernel;

extern "C" {
mc_tiling pmi_mc_make_tiling(const pm_volume *vol);
/* Every row starts 16-byte aligned and holds whole 16-byte parts (data,
 * row and slice strides and row length in bytes multiples of 16), so a
 * lane's 16-byte part is all in its row or all past it: the direct and
 * streaming classifications' 16-byte loads. */
int pmi_mc_rows16(const pm_volume *vol);
/* Pass 1 by the bitmask kernels (mc_classify.cu): (a) the inside bits,
 * (b) classification + compaction. pdl: the kernels are launched with
 * programmatic dependent launch (pmi_launch). */
pm_status pmi_mc_inside_bits(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl,
                             pm_sample_type type, unsigned int *bits, int pdl);
/* edges: records for every point that owns a crossing edge too, with the
 * crossing prefixes, and the row table rows[r] = the records before
 * lattice row r (j + ny*k), i.e. its first record (else rows unused). */
pm_status pmi_mc_classify(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, int edges,
                          const unsigned int *bits, unsigned int *ticket, unsigned long long *state,
                          mc_records rec, unsigned long long rec_cap, unsigned long long *rows,
                          unsigned long long *totals, mc_cls_kernel kernel, int pdl);
}

/* Streaming classification (mc_stream.cu, the default for all sample types
 * but f64 up to a size, see mc_plan_make): the same records, row table
 * and totals as pmi_mc_classify, from the volume directly. A
 * segment is one chunk of one lattice row, of 256 or 128 points (the
 * grid's chunk width); segments are numbered in lattice order. */
typedef struct mc_stream_grid {
    int cshift;        /* log2 of the chunk's points: 8 (256) or 7 (128) */
    long long nchunks; /* segments per row */
    long long nbands;  /* bands of rows per slice */
    long long nzr, S;  /* slice ranges, slices per range */
    long long nzl, SL; /* the first nzl ranges' slices (SL) */
    long long nseg;    /* nchunks * ny * nz */
    long long ntiles;  /* tiles of the segment scan */
    int vec;           /* 16-byte loads (1- and 2-byte samples, aligned rows) */
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
struct mc_final_args;
extern "C" {
int pmi_mc_stream_supported(const pm_volume *vol);
/* The grid for nsm multiprocessors. */
/* 1- and 2-byte samples in rows that start 16-byte aligned and hold whole
 * 16-byte parts: the streaming classification loads 16 bytes a lane. */
int pmi_mc_stream_vec(const pm_volume *vol);
mc_stream_grid pmi_mc_stream_make_grid(const pm_volume *vol, int nsm);
pm_status pmi_mc_stream_classify(pm_context *ctx, const mcd_volume &v, pm_sample_type type,
                                 const mc_stream_grid &g, int edges, const mc_stream_mem &m,
                                 mc_records rec, unsigned long long rec_cap,
                                 unsigned long long *rows, unsigned long long *totals,
                                 const mc_final_args *fin, int pooled, int pdl);
}

/* Counts of pm_isosurface_async's pass 2, written on the device at the
 * end of pass 1 (mc_final_args): records, crossings, triangles, and whether the
 * mesh is written at all (0 when it does not fit the caller's
 * capacities). Its kernels are launched for the capacities: a block past
 * the outputs returns at once (block-uniform, before any barrier), as does
 * every block when ok is 0 (the chunked soup kernel's first wave finds
 * its records before it reads these, mc_expand.cu). NULL in
 * pm_isosurface, whose counts come from the host. */
typedef struct mc_dcounts {
    unsigned long long nrec, ncross, ntri, ok;
} mc_dcounts;

/* pm_isosurface_async's end of pass 1, from pass 1's totals (records,
 * triangles, crossings, active cells): the counts for the caller and for
 * pass 2 (dc). The mesh fits when it fits the capacities whole; otherwise
 * the flag PM_ISOSURFACE_DOES_NOT_FIT is set and nothing is written
 * (indexed meshes past 32-bit indices: PM_ISOSURFACE_INDEX_OVERFLOW).
 * Written by the direct classification's last tile (or its chunks'
 * scan), the streaming classification's segment scan, or mc_final_kernel
 * after the bitmask kernels (isosurface.cu). */
typedef struct mc_final_args {
    mc_dcounts *dc; /* NULL: pm_isosurface, counts read by the host */
    pm_isosurface_counts *counts;
    int indexed;
    unsigned long long rec_cap, vcap, tcap, vroom;
} mc_final_args;
static __device__ __forceinline__ void mc_final_counts(const unsigned long long *totals,
                                                       const mc_final_args &f)
{
    const unsigned long long nrec = totals[0], ntri = totals[1], ncross = totals[2];
    const unsigned long long nv = f.indexed ? ncross : 3 * ntri;
    unsigned long long flags = 0;
    if (nv > f.vcap || ntri > f.tcap || nrec > f.rec_cap || ncross > f.vroom)
        flags |= PM_ISOSURFACE_DOES_NOT_FIT;
    if (f.indexed && ncross > 0xffffffffull) flags |= PM_ISOSURFACE_INDEX_OVERFLOW;
    f.counts->num_vertices = nv;
    f.counts->num_triangles = ntri;
    f.counts->active_cells = totals[3];
    f.counts->flags = flags;
    f.dc->nrec = nrec;
    f.dc->ncross = ncross;
    f.dc->ntri = ntri;
    f.dc->ok = flags == 0;
}

/* Direct classification (mc_direct.cu, the default for small volumes):
 * the records, row table and totals of pmi_mc_classify in one
 * kernel from the volume, no bitmask stored; tiles of MC_THREADS words
 * (pmi_mc_direct_tiling). Its tile states and ticket are the context's
 * (ticket and state NULL), so nothing needs clearing before it, or the
 * caller's, zeroed (MD_CHAINS_MAX * ntiles states; under stream capture);
 * with fin (pm_isosurface_async) its
 * last tile also writes the counts as mc_final_kernel does (with chunks,
 * md_chunks_scan_kernel after it). With chunks
 * (soups only, edges 0) the records are chunked: each tile stores its
 * records at a chunk it takes from a counter, in lattice order within the
 * tile, with tile-local triangle prefixes, and no tile waits for another
 * (the ticket's header word 2 is the counter; the context's when
 * ticket is NULL, left at zero by every call). Rows of at most 32 *
 * MC_DIRECT_WMAX points, all types but f64. */
#define MC_DIRECT_WMAX 64
/* A soup's chunked records: tile[t] = {first record of tile t's chunk,
 * its records, its triangles, its active cells}, written by the direct
 * classification; pre[t] = the triangles of the tiles before t, written
 * by md_chunks_scan_kernel after it. tile NULL: records in lattice order. */
typedef struct mc_chunks {
    uint4 *tile;
    unsigned *pre;
    unsigned ntiles;
} mc_chunks;
#define MD_CHAINS_MAX 4 /* the direct classification's chains (tile states per tile) */
extern "C" {
int pmi_mc_direct_supported(const pm_volume *vol);
mc_tiling pmi_mc_direct_tiling(const pm_volume *vol);
pm_status pmi_mc_direct_classify(pm_context *ctx, const mcd_volume &v, pm_sample_type type,
                                 const mc_tiling &tl, int edges, unsigned int *ticket,
                                 unsigned long long *state, mc_records rec,
                                 unsigned long long rec_cap, unsigned long long *rows,
                                 unsigned long long *totals, const mc_final_args *fin,
                                 const mc_chunks &ch, unsigned hooks, int pdl);
int pmi_mc_direct_counter_ready(const pmi_cuda_state *st);
pm_status pmi_mc_direct_prepare(pmi_cuda_state *st, unsigned hooks);
}

/* How pass 2 makes the mesh: an indexed mesh (MC_SOUP_NONE: vertices by
 * blocks of records, triangles one thread each), or a soup from the cells
 * (mc_soup_cell_kernel). */
typedef enum mc_soup { MC_SOUP_NONE, MC_SOUP_CELLS } mc_soup;

/* A soup's records left in the streaming classification's pool, in
 * arrival order (pmi_mc_stream_classify without its scatter): entry r <
 * min(*ctr, cap) = {point (two words), info | the record's number in its
 * segment << 16, its first triangle in its segment | crossing << 16};
 * segtri[s] = segment s's first triangle (the segment scan's). A point's
 * segment: its lattice row times nchunks plus its x >> cshift. pool NULL:
 * none. */
typedef struct mc_pool_recs {
    const uint4 *pool;
    const unsigned long long *ctr;
    unsigned long long cap;
    const unsigned long long *segtri;
    long long nchunks;
    int cshift;
} mc_pool_recs;

/* One pass 2 (mc_expand.cu): nrec records (the room when dc is set);
 * nvert the crossings to compute (an indexed mesh's vertices, into
 * pos/nrm); ntri the triangles to write (indices, or soup triangles). */
typedef struct mc_expand_job {
    mc_soup soup;
    long long nrec;
    unsigned long long nvert, ntri;
    float *pos, *nrm;
    uint32_t *idx;
    const mc_dcounts *dc;
    mc_chunks ch;      /* a soup's chunked records (pmi_mc_direct_classify), or tile NULL */
    mc_pool_recs pool; /* a soup's pooled records (pmi_mc_stream_classify), or pool NULL */
} mc_expand_job;
extern "C" {
/* Queues pass 2 (no wait). */
pm_status pmi_mc_expand(pm_context *ctx, int pdl, pm_sample_type type, pm_normals mode,
                        const mcd_volume &v, const mc_records &rec, const unsigned long long *rows,
                        const mc_expand_job &job);
}

#endif
