/* Shared declarations of the CUDA marching cubes files (mc_classify.cu,
 * isosurface.cu): tiling, the compacted records, launch helpers. */
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

/* One warp chains a tile's aggregate a of one quantity to its predecessors'
 * (decoupled look-back on that quantity's states st, with the primitives'
 * tile states of cuda_internal.h): *base gets the exclusive prefix, and the
 * last tile writes the total. */
static __device__ __forceinline__ void mc_chain(unsigned long long *st, long long tile,
                                                long long ntiles, unsigned long long a,
                                                unsigned long long *base,
                                                unsigned long long *total)
{
    const unsigned lane = threadIdx.x & 31;
    if (lane == 0) pmi_tile_publish(st + tile, (tile == 0 ? PMI_FLAG_P : PMI_FLAG_A) | a);
    const unsigned long long b = tile ? pmi_lookback(st, (unsigned long long)tile) : 0;
    if (lane == 0) {
        if (tile) pmi_tile_publish(st + tile, PMI_FLAG_P | (b + a));
        *base = b;
        if (tile == ntiles - 1) *total = b + a;
    }
}

/* (b) The masks of one bitmask word (32 points of row r = j + ny*k,
 * starting at i = 32 * wi): a, b, c, d are the inside bits of rows (j, k),
 * (j+1, k), (j, k+1), (j+1, k+1); a1.. the same shifted to point i + 1. */
typedef struct mc_word {
    unsigned a, a1, b, b1, c, c1, d, d1;
    unsigned cell;       /* points whose cell exists */
    unsigned xc, yc, zc; /* owned edges +x, +y, +z that cross */
} mc_word;

static __device__ __forceinline__ void mc_make_word(unsigned a, unsigned an, unsigned b, unsigned bn, unsigned c,
                                                    unsigned cn, unsigned d, unsigned dn, long long nx, long long wi,
                                                    int jy, int kz, mc_word &m)
{
    const long long left = nx - 32 * wi; /* points of the row from this word on */
    const unsigned pv = left >= 32 ? 0xffffffffu : (1u << left) - 1u;
    const unsigned xv = left > 32 ? 0xffffffffu : (1u << (left - 1)) - 1u;
    m.a = a;
    m.b = b;
    m.c = c;
    m.d = d;
    m.a1 = a >> 1 | an << 31;
    m.b1 = b >> 1 | bn << 31;
    m.c1 = c >> 1 | cn << 31;
    m.d1 = d >> 1 | dn << 31;
    m.cell = jy && kz ? xv : 0u;
    m.xc = (a ^ m.a1) & xv;
    m.yc = jy ? (a ^ b) & pv : 0u;
    m.zc = kz ? (a ^ c) & pv : 0u;
}

static __device__ __forceinline__ unsigned mc_case(const mc_word &m, int q)
{
    return (m.a >> q & 1) | (m.a1 >> q & 1) << 1 | (m.b1 >> q & 1) << 2 | (m.b >> q & 1) << 3 |
           (m.c >> q & 1) << 4 | (m.c1 >> q & 1) << 5 | (m.d1 >> q & 1) << 6 | (m.d >> q & 1) << 7;
}

/* Points of the word whose cell has corners on both sides (the others
 * have case 0 or 255). */
static __device__ __forceinline__ unsigned mc_mixed(const mc_word &m)
{
    const unsigned any = m.a | m.a1 | m.b | m.b1 | m.c | m.c1 | m.d | m.d1;
    const unsigned all = m.a & m.a1 & m.b & m.b1 & m.c & m.c1 & m.d & m.d1;
    return any & ~all & m.cell;
}

/* Position (and normal) of output vertex o. */
static __device__ __forceinline__ void mc_store(float *pos, float *nrm, unsigned long long o, const float p[3],
                                                const float n[3])
{
    pos[3 * o] = p[0];
    pos[3 * o + 1] = p[1];
    pos[3 * o + 2] = p[2];
    if (nrm) {
        nrm[3 * o] = n[0];
        nrm[3 * o + 1] = n[1];
        nrm[3 * o + 2] = n[2];
    }
}

/* Bytes of one record. */
#define MC_RECORD_BYTES (8 + 2 + 8 + 8)

mc_tiling mc_make_tiling(const pm_volume *vol);
/* Pass 1: (a) the inside bits, (b) classification + compaction. */
pm_status mc_inside_bits(pm_context *ctx, const mcd_volume &v, const mc_tiling &tl, pm_sample_type type,
                         unsigned int *bits);
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
                      unsigned long long *totals, int kernel, int minb, int reload, const mc_tables *tab);

/* The single-pass extraction (mc_single_pass.cu): rows of at most 16384
 * points (512 bitmask words). Writes at most vcap vertices (soup: a
 * multiple of 3) and tcap triangles to device memory (pos NULL: counts
 * only); tot gets the full counts: soup triangles or indexed vertices,
 * indexed triangles, active cells. Waits for the stream. */
int mc_single_pass_fits(const pm_volume *vol);
pm_status mc_single_pass(pm_context *ctx, const mcd_volume &v, pm_sample_type type, pm_normals normals, int indexed,
                         float *pos, float *nrm, uint32_t *idx, unsigned long long vcap, unsigned long long tcap,
                         unsigned long long tot[3]);

#endif
