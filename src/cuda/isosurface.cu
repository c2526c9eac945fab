/* CUDA marching cubes (Lorensen and Cline 1987), the host side: one plan
 * for both entry points, pass 1 (the streaming classification of
 * mc_stream.cu, or the bitmask kernels of mc_classify.cu) leaves the active
 * lattice points compacted in lattice order with exact prefixes of their
 * triangles and owned-edge crossings, pass 2 (mc_expand.cu) expands them
 * into the mesh. pm_isosurface waits for pass 1's counts, then allocates
 * the mesh (pmi_mesh_prepare); pm_isosurface_async sizes everything from
 * the caller's capacities and hands the counts to pass 2 on the device.
 * All kernels are chained by programmatic dependent launch where the
 * device has it (pmi_launch). The output is the CPU backend's, bit for
 * bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hooks.h"
#include "core/mesh_out.h"
#include "cuda/cuda_mc.h"
#include "cuda/mc_internal.cuh"

MCD_TABLES_UPLOAD

/* Zeroes n 16-byte words: pass 1's tile states and counters (a kernel
 * rather than a memset, so that it chains with the kernels after it by
 * programmatic dependent launch). */
static __global__ void __launch_bounds__(MC_THREADS) mc_clear_kernel(uint4 *p, unsigned long long n)
{
    pmi_pdl_enter();
    for (unsigned long long i = blockIdx.x * (unsigned long long)MC_THREADS + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * MC_THREADS)
        p[i] = make_uint4(0, 0, 0, 0);
}

/* The streaming classification for 1- and 2-byte samples in rows that
 * are not whole 16-byte parts up to 2^24 points (f32 and the others at
 * every size, f64 never). */
#define MC_STREAM_MAX ((size_t)1 << 24)

/* The direct classification (one kernel) up to MC_DIRECT_MAX points
 * (f32: MC_DIRECT_MAX_F32), the streaming one or the bitmask above
 * (measured on the H100, bench/RESULTS-cudamc.md). */
#define MC_DIRECT_MAX ((size_t)3 << 24)
#define MC_DIRECT_MAX_F32 ((size_t)3 << 23)

/* Soups of the direct classification with their records in per-tile
 * chunks above 2^22 points: below, the chunked path (the scan kernel, the
 * soup kernel's check of its slots and its wait for the prefixes) costs
 * more than the tiles' wait it removes (measured on the H100 at 128^3,
 * and with a 2^19 bound, bench/RESULTS-cudamc.md). */
#define MC_CHUNKS_MIN ((size_t)1 << 22)

typedef enum mc_pass1 { MC_PASS1_DIRECT, MC_PASS1_STREAM, MC_PASS1_BITMASK } mc_pass1;

/* What an extraction does, decided on the host before any launch, the same
 * for both entry points. */
typedef struct mc_plan {
    mcd_volume v;
    mc_tiling tl;      /* the bitmask or direct path's tiling */
    mc_stream_grid sg; /* the streaming path's grid */
    size_t npoints;
    int indexed;    /* the mesh is indexed */
    int edges;      /* records with crossings and the row table (all but the soup from the cells) */
    mc_pass1 pass1; /* direct or streaming classification, or the bitmask kernels */
    mc_cls_kernel cls; /* the bitmask path's classification kernel */
    mc_soup soup;      /* how pass 2 makes a soup (MC_SOUP_NONE: indexed) */
    int chunks;        /* a direct classification's soup records chunked per tile */
    int pool;          /* a streaming classification's soup records left in its pool */
    int pdl;           /* kernels chained by programmatic dependent launch */
    unsigned hooks;    /* PYRAMESH_TEST_HOOKS */
} mc_plan;

static pm_status mc_plan_make(pm_context *ctx, const pm_volume *vol, double iso,
                              const pm_isosurface_options *opt, mc_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    PMI_TRY(pmi_hooks(&pl->hooks));
    PMI_TRY(pmi_cuda_begin(ctx));
    pmi_cuda_state *st = pmi_cuda(ctx);
    PMI_TRY(mcd_tables_upload(st->device));
    mcd_volume &v = pl->v;
    v.data = vol->data;
    v.nx = (long long)vol->nx;
    v.ny = (long long)vol->ny;
    v.nz = (long long)vol->nz;
    v.rs = (long long)vol->row_stride;
    v.ss = (long long)vol->slice_stride;
    {
        /* The largest offset, (nx-1) + (ny-1) rs + (nz-1) ss, in double
         * (no wrap-around; exact well past 2^31). */
        const double last = (double)(vol->nx - 1) +
                            (double)(vol->ny - 1) * (double)vol->row_stride +
                            (double)(vol->nz - 1) * (double)vol->slice_stride;
        v.i32 = vol->nx > 0 && vol->ny > 0 && vol->nz > 0 && last < 2147483647.0 &&
                vol->row_stride < ((size_t)1 << 31) && vol->slice_stride < ((size_t)1 << 31);
    }
    v.iso = iso;
    v.sg = opt->inside == PM_INSIDE_ABOVE ? -1.0 : 1.0;
    v.siso = v.sg * iso;
    /* sg > 0: the smallest float >= iso; sg < 0: the largest float <= iso
     * (the negated threshold of siso = -iso). */
    const float thr = pmi_mc_float_threshold(v.siso);
    v.fthr = v.sg > 0 ? thr : -thr;
    for (int a = 0; a < 3; a++) {
        v.org[a] = vol->origin[a];
        v.sp[a] = vol->spacing[a];
        for (int span = 0; span < 3; span++)
            v.gw[span][a] = pmi_mc_diff_weight((double)span, v.sp[a]);
    }
    if (!pmi_mul3_size(vol->nx, vol->ny, vol->nz, &pl->npoints))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: lattice size overflows");
    pl->indexed = opt->mode == PM_MESH_INDEXED;
    /* A soup is computed from the cells (one kernel for pass 2, a
     * classification without edges), at every size: faster than computing
     * the indexed vertices and gathering them (measured on the H100 from
     * 128^3 to 1024^3, bench/RESULTS-cudamc.md), and no
     * vertex scratch. An indexed mesh needs the crossings' prefixes and
     * the row table (edges). */
    pl->soup = pl->indexed ? MC_SOUP_NONE : MC_SOUP_CELLS;
    pl->edges = pl->indexed;
    pl->pdl = st->pdl && !(pl->hooks & PMI_HOOK_NOPDL);
    /* Pass 1 by the streaming classification for f32 volumes, for 1- and
     * 2-byte samples in rows of whole 16-byte parts (loaded 16 bytes a
     * lane), and for other 1- and 2-byte samples up to MC_STREAM_MAX
     * points; else by the bitmask kernels (measured on the H100,
     * bench/RESULTS-cudamc.md: f32 streamed is faster at every size from
     * 64^3 to 1024^3, also with rows filling 59% of their 256-point chunks
     * (300^3); a sample a lane, the streaming kernel costs about the same
     * per point whatever the sample size while the bits kernel scales with
     * the bytes, so u8/u16 are faster streamed up to 256^3 and through the
     * bitmask from 384^3; 16 bytes a lane, level with the bitmask or faster
     * from 384^3 to 768^3). */
    const int stream = pmi_mc_stream_supported(vol) &&
                       (vol->type == PM_SAMPLE_F32 || pl->npoints <= MC_STREAM_MAX ||
                        pmi_mc_stream_vec(vol) || (pl->hooks & PMI_HOOK_STREAM));
    /* Up to MC_DIRECT_MAX points the direct classification (one kernel)
     * instead, for every type but f64 and rows of at most 2048 points,
     * unless the stream hook asks for the streaming one (measured on the
     * H100, bench/RESULTS-cudamc.md: f32 faster than the streaming
     * classification from 64^3 to 288^3, slower at 320^3 since the
     * streaming kernel writes its records one per lane, so f32 stops at
     * 3 * 2^23 points, about 293^3; u8/u16 faster than the bitmask kernels
     * at 320^3 and 352^3 (352^3 soup u16 0.17 against 0.21 ms), slower
     * at 384^3, so they stop at 3 * 2^24, about 369^3). */
    const size_t direct_max = vol->type == PM_SAMPLE_F32 ? MC_DIRECT_MAX_F32 : MC_DIRECT_MAX;
    const int direct =
        pmi_mc_direct_supported(vol) && pl->npoints <= direct_max && !(pl->hooks & PMI_HOOK_STREAM);
    pl->pass1 = direct ? MC_PASS1_DIRECT : stream ? MC_PASS1_STREAM : MC_PASS1_BITMASK;
    /* A soup's records in per-tile chunks: no tile of the direct
     * classification waits for the tiles before it (pmi_mc_direct_classify;
     * above MC_CHUNKS_MIN points, where that wait costs more than the
     * chunked path adds). */
    pl->chunks = direct && !pl->indexed && pl->npoints > MC_CHUNKS_MIN;
    /* A soup's records left where the streaming classification pooled
     * them, in arrival order: pass 2 reads them there (no scatter). */
    pl->pool = pl->pass1 == MC_PASS1_STREAM && !pl->indexed;
    if (direct) {
        pl->tl = pmi_mc_direct_tiling(vol);
    } else if (stream) {
        pl->sg = pmi_mc_stream_make_grid(vol, st->num_sms);
    } else {
        pl->tl = pmi_mc_make_tiling(vol);
        /* Classification kernel: mc_classify2_kernel while the bitmask fits
         * in half the L2 (measured on the H100: 256^3 and 512^3, 2 and 17
         * MB, faster than mc_classify_kernel, 512^3 by about 0.012 ms),
         * else mc_classify_kernel (768^3, 57 MB: faster by about 0.02 ms). */
        int l2 = 0;
        if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, st->device) != cudaSuccess) {
            cudaGetLastError();
            l2 = 0;
        }
        pl->cls = (double)pl->tl.nwords * 4.0 > (double)l2 / 2.0 ? MC_CLS_PERWORD : MC_CLS_BATCHED;
    }
    return PM_STATUS_OK;
}

/* The report's path words (docs/cuda_isosurface.md); graph: the call's
 * launches captured into a graph and launched (1), replayed from it (2),
 * or launched after its shape's capture failed (3) (mc_queue). */
static void mc_report_path(pm_isosurface_report *r, const mc_plan &pl, const pmi_cuda_state *st,
                           int graph = 0)
{
    if (!r) return;
    pmi_report_path(r, "backend", "cuda");
    pmi_report_path(r, "pass1",
                    pl.pass1 == MC_PASS1_DIRECT   ? "direct"
                    : pl.pass1 == MC_PASS1_STREAM ? "stream"
                                                  : "bitmask");
    if (pl.pass1 == MC_PASS1_BITMASK)
        pmi_report_path(r, "classify", pl.cls == MC_CLS_BATCHED ? "batched" : "perword");
    /* The streaming classification's chunk width (points per segment). */
    if (pl.pass1 == MC_PASS1_STREAM) pmi_report_path(r, "chunk", pl.sg.cshift == 7 ? "128" : "256");
    /* And the slices a streaming block walks (pmi_mc_stream_make_grid):
     * S, or SL/S with a bulk of ranges of SL before the ranges of S. */
    if (pl.pass1 == MC_PASS1_STREAM) {
        char sl[48];
        if (pl.sg.nzl > 0)
            snprintf(sl, sizeof sl, "%lld/%lld", pl.sg.SL, pl.sg.S);
        else
            snprintf(sl, sizeof sl, "%lld", pl.sg.S);
        pmi_report_path(r, "slices", sl);
    }
    /* The direct classification's tile states: the call's own, cleared
     * (under stream capture), or the context's, zeroed before this call (a
     * context's first, a larger volume, or the epochs wrapped) or kept
     * from the last call. */
    if (pl.pass1 == MC_PASS1_DIRECT)
        pmi_report_path(r, "states",
                        st->md_cleared  ? "cleared"
                        : st->md_zeroed ? "zeroed"
                                        : "kept");
    /* The direct classification's loads: 16 bytes a lane where the rows
     * are aligned and their bytes a multiple of 16, else one sample a
     * load. */
    if (pl.pass1 == MC_PASS1_DIRECT) pmi_report_path(r, "loads", pl.tl.vec ? "vector" : "scalar");
    /* The streaming classification's: 16 bytes a lane for 1- and 2-byte
     * samples in such rows, else one sample a lane per load. */
    if (pl.pass1 == MC_PASS1_STREAM) pmi_report_path(r, "loads", pl.sg.vec ? "vector" : "scalar");
    /* A soup's records: chunked per tile (no tile waits for another) or in
     * lattice order. */
    if (pl.pass1 == MC_PASS1_DIRECT && pl.soup == MC_SOUP_CELLS)
        pmi_report_path(r, "records", pl.chunks ? "chunks" : "ordered");
    if (pl.pass1 == MC_PASS1_STREAM && pl.soup == MC_SOUP_CELLS)
        pmi_report_path(r, "records", pl.pool ? "pool" : "ordered");
    pmi_report_path(r, "pass2", pl.soup == MC_SOUP_CELLS ? "cells" : "blocks");
    pmi_report_path(r, "launch",
                    graph == 1   ? "capture"
                    : graph == 2 ? "graph"
                    : graph == 3 ? "nograph"
                    : pl.pdl     ? "chained"
                                 : "plain");
    if (pl.soup == MC_SOUP_CELLS) pmi_report_path(r, "soup", "cells");
}

/* Pass 1's scratch (in the context's arena) and results. */
typedef struct mc_scratch {
    char *base, *end;
    mc_records rec;
    unsigned long long *rows;   /* row table, or NULL */
    unsigned long long *totals; /* records, triangles, crossings, active cells */
    mc_chunks ch;               /* the chunked records (pl.chunks), or tile NULL */
    mc_pool_recs pool;          /* the pooled records (pl.pool), or pool NULL */
    char *extra;                /* extra_b bytes of the caller's */
} mc_scratch;

/* Pass 1's scratch for rec_cap records: its parts' bytes. kept: the
 * direct classification's tile states are the context's (not under stream
 * capture). */
typedef struct mc_layout {
    size_t head_b, segc_b, segb_b, bits_b, rows_b, tinfo_b, extra_b, bytes;
    size_t rec8_b, rec2_b; /* each 8- and 2-byte record array (none: pooled records) */
} mc_layout;
static mc_layout mc_pass1_layout(const pm_volume *vol, const mc_plan &pl, size_t rec_cap,
                                 size_t extra_b, int kept)
{
    mc_layout L;
    const int stream = pl.pass1 == MC_PASS1_STREAM;
    const mc_tiling &tl = pl.tl;
    const mc_stream_grid &sg = pl.sg;
    const size_t nrows = (size_t)vol->ny * vol->nz;
    const size_t nstates = pl.pass1 == MC_PASS1_DIRECT ? (size_t)tl.ntiles * MD_CHAINS_MAX
                           : stream                    ? (size_t)sg.ntiles * 3
                                                       : (size_t)tl.ntiles * 3;
    const size_t state_b = kept ? 0 : pmi_align256(nstates * sizeof(unsigned long long));
    L.head_b = 256 + state_b;
    /* Last: the bitmask (none for the direct classification, which
     * stores no bits), or the streaming classification's segment counts,
     * segment bases and record pool. */
    L.segc_b = stream ? pmi_align256((size_t)sg.nseg * 4 + 16) : 0;
    L.segb_b = stream ? pmi_align256((size_t)sg.nseg * 24) : 0;
    L.bits_b = stream                        ? L.segc_b + L.segb_b + pmi_align256(rec_cap * 16)
               : pl.pass1 == MC_PASS1_DIRECT ? 0
                                             : pmi_align256((size_t)tl.nwords * 4 + 16);
    L.rows_b = pl.edges ? pmi_align256(nrows * 8) : 0;
    L.tinfo_b = pl.chunks ? pmi_align256((size_t)tl.ntiles * sizeof(uint4)) +
                                pmi_align256((size_t)tl.ntiles * sizeof(unsigned))
                          : 0;
    L.extra_b = pmi_align256(extra_b);
    L.rec8_b = pl.pool ? 0 : pmi_align256(rec_cap * 8);
    L.rec2_b = pl.pool ? 0 : pmi_align256(rec_cap * 2);
    L.bytes = L.head_b + L.rec8_b * 3 + L.rec2_b + L.rows_b + L.tinfo_b + L.extra_b + L.bits_b;
    return L;
}

/* Whether the context's stream is being captured into a CUDA graph (an
 * unknown state counts as captured). */
static int mc_capturing(cudaStream_t s)
{
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cap) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    return cap != cudaStreamCaptureStatusNone;
}

/* Lays out the scratch for rec_cap records and launches pass 1 (no wait).
 * Scratch: ticket, totals and tile states (the direct classification's
 * are the context's), records (point, triangle prefix, info, row table,
 * chunked tiles, extra, crossing prefix), then the bitmask last. */
static pm_status mc_pass1_launch(pm_context *ctx, const pm_volume *vol, const mc_plan &pl,
                                 size_t rec_cap, size_t extra_b, mc_scratch *p,
                                 const mc_final_args *fin = NULL)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const int stream = pl.pass1 == MC_PASS1_STREAM;
    const mc_tiling &tl = pl.tl;
    const mc_stream_grid &sg = pl.sg;
    /* A stream being captured into a CUDA graph replays the launches with
     * the parameters of the capture, so the direct classification then
     * takes cleared states of the call's scratch (epoch 0) instead of the
     * context's (whose epoch and ticket count change from call to call).
     * Chunked records take no states, only the chunk counter, which every
     * call leaves at zero: the library's own graph (mc_graph_capture)
     * takes the context's and clears nothing. */
    const int kept = pl.pass1 == MC_PASS1_DIRECT &&
                     (!mc_capturing(s) ||
                      (pl.chunks && st->mc_graph_capturing && pmi_mc_direct_counter_ready(st)));
    const mc_layout L = mc_pass1_layout(vol, pl, rec_cap, extra_b, kept);
    const size_t head_b = L.head_b, segc_b = L.segc_b, segb_b = L.segb_b, rows_b = L.rows_b,
                 tinfo_b = L.tinfo_b, bytes = L.bytes;
    extra_b = L.extra_b;
    char *base = NULL;
    PMI_TRY(pmi_cuda_scratch(ctx, bytes, (void **)&base));
    p->base = base;
    p->end = base + bytes;
    memset(&p->pool, 0, sizeof p->pool);
    unsigned int *ticket = (unsigned int *)base;
    p->totals = (unsigned long long *)(base + 64);
    unsigned long long *state = (unsigned long long *)(base + 256);
    char *q = base + head_b;
    /* Pooled soups have no record arrays (NULL: nothing may write them). */
    p->rec.point = pl.pool ? NULL : (unsigned long long *)q;
    q += L.rec8_b;
    p->rec.tri = pl.pool ? NULL : (unsigned long long *)q;
    q += L.rec8_b;
    p->rec.info = pl.pool ? NULL : (uint16_t *)q;
    q += L.rec2_b;
    p->rows = pl.edges ? (unsigned long long *)q : NULL;
    q += rows_b;
    p->ch.tile = tinfo_b ? (uint4 *)q : NULL;
    p->ch.pre = tinfo_b ? (unsigned *)(q + pmi_align256((size_t)tl.ntiles * sizeof(uint4))) : NULL;
    p->ch.ntiles = tinfo_b ? (unsigned)tl.ntiles : 0u;
    q += tinfo_b;
    p->extra = q;
    q += extra_b;
    p->rec.cross = pl.pool ? NULL : (unsigned long long *)q;
    q += L.rec8_b;
    unsigned int *bits = (unsigned int *)q;
    /* The direct classification keeps its tile states in the context and
     * writes every total: nothing to clear (but under stream capture).
     * With fin its last tile (chunked records: the chunks' scan; the
     * streaming classification: its segment scan's last tile) writes the
     * async counts too, pass 2's at the start of the extra room. */
    mc_final_args f;
    if (fin) {
        f = *fin;
        f.dc = (mc_dcounts *)p->extra;
    }
    if (kept)
        return pmi_mc_direct_classify(ctx, pl.v, vol->type, tl, pl.edges, NULL, NULL, p->rec,
                                      rec_cap, p->rows, p->totals, fin ? &f : NULL, p->ch, pl.hooks,
                                      pl.pdl);
    /* head_b is a multiple of 256 bytes. */
    pmi_launch(pl.pdl, mc_clear_kernel, mc_blocks(head_b / 16), MC_THREADS, s, (uint4 *)base,
               (unsigned long long)(head_b / 16));
    PMI_TRY(pmi_cuda_launched("pm_isosurface: clearing tile states"));
    if (pl.pass1 == MC_PASS1_DIRECT)
        return pmi_mc_direct_classify(ctx, pl.v, vol->type, tl, pl.edges, ticket, state, p->rec,
                                      rec_cap, p->rows, p->totals, fin ? &f : NULL, p->ch, pl.hooks,
                                      pl.pdl);
    if (stream) {
        mc_stream_mem sm;
        sm.segc = bits;
        sm.segbase = (unsigned long long *)(q + segc_b);
        sm.pool = (uint4 *)(q + segc_b + segb_b);
        sm.pool_cap = rec_cap;
        sm.pool_ctr = (unsigned long long *)(base + 128);
        sm.ticket = ticket;
        sm.state = state;
        if (pl.pool)
            p->pool = {sm.pool, sm.pool_ctr, rec_cap, sm.segbase + sg.nseg, sg.nchunks, sg.cshift};
        return pmi_mc_stream_classify(ctx, pl.v, vol->type, sg, pl.edges, sm, p->rec, rec_cap,
                                      p->rows, p->totals, fin ? &f : NULL, pl.pool, pl.pdl);
    }
    PMI_TRY(pmi_mc_inside_bits(ctx, pl.v, tl, vol->type, bits, pl.pdl));
    return pmi_mc_classify(ctx, pl.v, tl, pl.edges, bits, ticket, state, p->rec, rec_cap, p->rows,
                           p->totals, pl.cls, pl.pdl);
}

/* The stages of a timed pm_isosurface, bracketed by events: pass 1 on the
 * device, the wait for its counts and the mesh's allocation, pass 2, and
 * the copy to host memory (when the mesh goes there). */
enum { MC_EV_START, MC_EV_PASS1, MC_EV_PASS2, MC_EV_EXPANDED, MC_EV_END, MC_EV_COUNT };
static const char *const mc_stage_names[MC_EV_COUNT - 1] = {"classify", "readback", "expand",
                                                            "copy"};

static void mc_event(cudaEvent_t *ev, int e, cudaStream_t s)
{
    if (ev[e]) cudaEventRecord(ev[e], s);
}

/* Fills the report's stage times from the events (after the wait), then
 * destroys them. */
static void mc_events_report(cudaEvent_t *ev, pm_isosurface_report *r)
{
    if (!ev[0]) return;
    for (int i = 0; i + 1 < MC_EV_COUNT; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, ev[i], ev[i + 1]) != cudaSuccess) ms = 0;
        pmi_report_stage(r, i, mc_stage_names[i], ms);
    }
    for (int i = 0; i < MC_EV_COUNT; i++)
        cudaEventDestroy(ev[i]);
    cudaGetLastError();
}

static pm_status mc_device_alloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
        return pmi_error(e == cudaErrorMemoryAllocation ? PM_STATUS_OUT_OF_MEMORY
                                                        : PM_STATUS_DEVICE_ERROR,
                         "pm_isosurface: cannot allocate %zu bytes of device memory for %s (%s)",
                         bytes, what, cudaGetErrorString(e));
    }
    return PM_STATUS_OK;
}

/* Pass 2 of pm_isosurface and the copy to host memory, once the mesh is
 * allocated (dest, of nv vertices), the counts known (tot) and pass 1's
 * scratch still in place (p1). */
static pm_status mc_sync_pass2(pm_context *ctx, const pm_volume *vol,
                               const pm_isosurface_options *opt, const mc_plan &pl,
                               const mc_scratch &p1, const unsigned long long tot[4],
                               const pmi_mesh_dest &dest, cudaEvent_t *ev)
{
    cudaStream_t s = pmi_cuda(ctx)->stream;
    const long long nrec = (long long)tot[0];
    const int to_ctx = opt->output_in_context_memory != 0;
    const unsigned long long nv_w = dest.vertex_limit, nt_w = dest.indices ? dest.tri_limit : 0;

    /* Device targets: the final arrays, or staging for host outputs. */
    mc_expand_job j;
    memset(&j, 0, sizeof j);
    float *tmp = NULL;
    if (to_ctx) {
        j.pos = dest.positions;
        j.nrm = dest.normals;
        j.idx = dest.indices;
    } else {
        size_t vb = (size_t)nv_w * 3 * sizeof(float), ib = (size_t)nt_w * 3 * sizeof(uint32_t);
        PMI_TRY(mc_device_alloc((void **)&tmp, vb + (dest.normals ? vb : 0) + ib, "the mesh"));
        j.pos = tmp;
        j.nrm = dest.normals ? tmp + (size_t)nv_w * 3 : NULL;
        j.idx = dest.indices ? (uint32_t *)(tmp + (size_t)nv_w * 3 * (dest.normals ? 2 : 1)) : NULL;
    }
    j.soup = pl.soup;
    j.nrec = nrec;
    j.ch = p1.ch;
    j.pool = p1.pool;
    if (pl.soup == MC_SOUP_NONE) {
        j.nvert = nv_w;
        j.ntri = nt_w;
    } else {
        j.ntri = nv_w / 3;
    }
    mc_event(ev, MC_EV_PASS2, s);
    pm_status ls = pmi_mc_expand(ctx, pl.pdl, vol->type, opt->normals, pl.v, p1.rec, p1.rows, j);
    mc_event(ev, MC_EV_EXPANDED, s);
    mc_report_path(opt->report, pl, pmi_cuda(ctx));
    if (ls == PM_STATUS_OK && !to_ctx) {
        /* Through the pinned staging buffers (host_copy.cu). */
        const char *what = "pm_isosurface: copying the mesh to the host";
        ls = pmi_cuda_copy_host(ctx, dest.positions, j.pos, (size_t)nv_w * 3 * sizeof(float), 1,
                                what);
        if (ls == PM_STATUS_OK && dest.normals)
            ls = pmi_cuda_copy_host(ctx, dest.normals, j.nrm, (size_t)nv_w * 3 * sizeof(float), 1,
                                    what);
        if (ls == PM_STATUS_OK && nt_w)
            ls = pmi_cuda_copy_host(ctx, dest.indices, j.idx, (size_t)nt_w * 3 * sizeof(uint32_t),
                                    1, what);
    }
    mc_event(ev, MC_EV_END, s);
    /* The records live in the scratch arena, which the next call may
     * reuse: wait here (the caller gets a finished mesh either way). */
    pm_status ws = pmi_cuda_wait(ctx, "pm_isosurface: expansion");
    if (tmp) cudaFree(tmp);
    return ls != PM_STATUS_OK ? ls : ws;
}

static unsigned long long mc_min(unsigned long long a, unsigned long long b)
{
    return a < b ? a : b;
}

/* Pass 1's first record room in the two-pass path: surfaces cross few
 * cells; a volume with more records runs pass 1 again with the exact room. */
static unsigned long long mc_rec_guess(unsigned long long npoints)
{
    return mc_min(npoints, npoints / 64 + (1ull << 20));
}

/* Records pm_isosurface_async reserves for the caller's capacities: one
 * per triangle that can be written, plus the lattice's border points. */
static unsigned long long mc_async_records(const pm_volume *vol, const mc_plan &pl,
                                           const pm_isosurface_options *opt)
{
    const unsigned long long np = pl.npoints;
    const unsigned long long inner =
        (unsigned long long)(vol->nx - 1) * (vol->ny - 1) * (vol->nz - 1);
    const unsigned long long tcap = opt->triangle_capacity, vcap = opt->vertex_capacity;
    const unsigned long long tfit = pl.indexed ? tcap : mc_min(tcap, vcap / 3);
    return tfit >= np ? np : mc_min(np, tfit + (np - inner));
}

/* Whether pm_isosurface takes the one-wait path: the caller's buffers in
 * context memory, no stage timing (which needs the passes apart), and
 * capacities whose record room is no larger than the two-pass guess (a
 * generous capacity would otherwise reserve room for records that the
 * mesh does not have). */
static int mc_one_wait(const pm_volume *vol, const mc_plan &pl, const pm_isosurface_options *opt)
{
    if (!opt->out_positions || !opt->output_in_context_memory) return 0;
    if (opt->report && opt->report->timed) return 0;
    return mc_async_records(vol, pl, opt) <= mc_rec_guess(pl.npoints);
}

static pm_status mc_queue(pm_context *ctx, const pm_volume *vol, const mc_plan &pl,
                          const pm_isosurface_options *opt, pm_isosurface_counts *counts_ctx);

extern "C" pm_status pmi_cuda_isosurface(pm_context *ctx, const pm_volume *vol, double iso,
                                         const pm_isosurface_options *opt, pm_mesh *mesh)
{
    mc_plan pl;
    PMI_TRY(mc_plan_make(ctx, vol, iso, opt, &pl));
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    if (mc_one_wait(vol, pl, opt)) {
        /* The caller's buffers in device memory: both passes queued as
         * pm_isosurface_async does (the fit decided on the device), the
         * counts into the context's mapped pinned words, one wait. A mesh
         * that does not fit wrote nothing: the two passes below then write
         * what fits (PM_STATUS_TRUNCATED). */
        const size_t plen = opt->report ? strlen(opt->report->path) : 0;
        pm_isosurface_counts *c_d = (pm_isosurface_counts *)&st->host_d[PMI_HOST_COUNTS];
        PMI_TRY(mc_queue(ctx, vol, pl, opt, c_d));
        PMI_TRY(pmi_cuda_wait(ctx, "pm_isosurface"));
        pm_isosurface_counts c;
        memcpy(&c, (const void *)&st->host[PMI_HOST_COUNTS], sizeof c);
        if (c.flags == 0) {
            pmi_mesh_dest dest;
            pm_status ps = pmi_mesh_prepare(ctx, opt, pl.indexed, c.num_vertices, c.num_triangles,
                                            c.active_cells, mesh, &dest);
            pmi_report_path(opt->report, "wait", "one");
            return ps;
        }
        if (opt->report) opt->report->path[plen] = '\0';
    }
    pmi_report_path(opt->report, "wait", "two");
    cudaEvent_t ev[MC_EV_COUNT] = {NULL, NULL, NULL, NULL, NULL};
    if (opt->report && opt->report->timed)
        for (int e = 0; e < MC_EV_COUNT; e++)
            cudaEventCreate(&ev[e]);

    /* Pass 1. The records' room is a guess (surfaces cross few cells); a
     * volume with more active points runs pass 1 again with the exact
     * room. */
    size_t rec_cap = (size_t)mc_rec_guess(pl.npoints);
    unsigned long long tot[4];
    mc_scratch p1;
    pm_status s1 = PM_STATUS_OK;
    for (;;) {
        mc_event(ev, MC_EV_START, s);
        s1 = mc_pass1_launch(ctx, vol, pl, rec_cap, 0, &p1);
        mc_event(ev, MC_EV_PASS1, s);
        /* Into the context's pinned words: an asynchronous copy (a
         * pageable destination would make it a staged, blocking one). */
        if (s1 == PM_STATUS_OK) {
            cudaError_t e = cudaMemcpyAsync(&st->host[PMI_HOST_COUNTS], p1.totals, sizeof tot,
                                            cudaMemcpyDeviceToHost, s);
            if (e != cudaSuccess) s1 = pmi_cuda_status(e, "pm_isosurface: reading counts");
        }
        if (s1 == PM_STATUS_OK) s1 = pmi_cuda_wait(ctx, "pm_isosurface: classification");
        if (s1 != PM_STATUS_OK) break;
        memcpy(tot, &st->host[PMI_HOST_COUNTS], sizeof tot);
        if (tot[0] <= rec_cap) break;
        rec_cap = (size_t)tot[0];
    }
    pm_status result = s1;
    if (result == PM_STATUS_OK) {
        const unsigned long long nv = pl.indexed ? tot[2] : 3 * tot[1];
        pmi_mesh_dest dest;
        result = pmi_mesh_prepare(ctx, opt, pl.indexed, nv, tot[1], tot[3], mesh, &dest);
        if (result == PM_STATUS_OK || result == PM_STATUS_TRUNCATED) {
            pm_status s2 = mc_sync_pass2(ctx, vol, opt, pl, p1, tot, dest, ev);
            if (s2 != PM_STATUS_OK) {
                pm_mesh_free(ctx, mesh);
                result = s2;
            }
        }
    }
    if (result == PM_STATUS_OK || result == PM_STATUS_TRUNCATED)
        mc_events_report(ev, opt->report);
    else if (ev[0])
        for (int e = 0; e < MC_EV_COUNT; e++)
            cudaEventDestroy(ev[e]);
    return result;
}

/* A slab window's owned part after pass 1 (pmi_cuda_isosurface_window):
 * out[0..1] the triangle prefixes and out[2..3] the crossing prefixes at
 * the first records of points p0 and p1 (the owned slices' first point
 * and the first point after them), out[4] the active cells of the records
 * outside [p0, p1), out[5..8] pass 1's totals. One block. */
#define MC_WIN_THREADS 256
static __global__ void __launch_bounds__(MC_WIN_THREADS)
    mc_window_kernel(mc_records rec, const unsigned long long *totals, unsigned long long cap,
                     unsigned long long p0, unsigned long long p1, int edges,
                     unsigned long long *out)
{
    __shared__ unsigned long long r[2];
    __shared__ unsigned long long part[MC_WIN_THREADS / 32];
    const unsigned long long n = totals[0] < cap ? totals[0] : cap;
    if (threadIdx.x < 2) {
        const unsigned long long key = threadIdx.x ? p1 : p0;
        unsigned long long lo = 0, hi = n;
        while (lo < hi) {
            const unsigned long long mid = lo + (hi - lo) / 2;
            if (rec.point[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        r[threadIdx.x] = lo;
        out[threadIdx.x] = lo < n ? rec.tri[lo] : totals[1];
        out[2 + threadIdx.x] = !edges ? 0 : lo < n ? rec.cross[lo] : totals[2];
    }
    __syncthreads();
    const unsigned long long r0 = r[0], r1 = r[1];
    unsigned long long c = 0;
    for (unsigned long long i = threadIdx.x; i < r0; i += MC_WIN_THREADS)
        c += (rec.info[i] >> 11 & 7) != 0;
    for (unsigned long long i = r1 + threadIdx.x; i < n; i += MC_WIN_THREADS)
        c += (rec.info[i] >> 11 & 7) != 0;
    for (int o = 16; o; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long a = 0;
        for (int w = 0; w < MC_WIN_THREADS / 32; w++)
            a += part[w];
        out[4] = a;
        for (int k = 0; k < 4; k++)
            out[5 + k] = totals[k];
    }
}

/* Indices of the owned triangles counted from the slab's first vertex. */
static __global__ void __launch_bounds__(MC_THREADS)
    mc_rebase_kernel(uint32_t *idx, unsigned long long n, uint32_t first)
{
    const unsigned long long i = blockIdx.x * (unsigned long long)MC_THREADS + threadIdx.x;
    if (i < n) idx[i] -= first;
}

/* Output room in the context's growing buffer (a slab window's mesh, a
 * piece's chunk): kept for the next call, grown by a quarter beyond the
 * request when it must grow. */
extern "C" pm_status pmi_cuda_out_room(pmi_cuda_state *st, size_t bytes, char **out)
{
    if (bytes > st->win_out_bytes) {
        if (st->win_out) cudaFree(st->win_out); /* waits for the device */
        st->win_out = NULL;
        st->win_out_bytes = 0;
        size_t want = bytes + bytes / 4;
        PMI_TRY(mc_device_alloc(&st->win_out, want, "an output buffer"));
        st->win_out_bytes = want;
    }
    *out = (char *)st->win_out;
    return PM_STATUS_OK;
}

/* A slab window (src/core/backend.h, isosurface_window): pass 1 and pass 2
 * of pm_isosurface over the whole window (positions at global slices
 * through v.kz; the ghost slices make every owned vertex's samples and
 * gradients the volume's), then the owned records' ranges cut out of the
 * mesh on the device and only they downloaded. The owned cells' triangles
 * and the owned points' crossings are contiguous (records in lattice
 * order), so the slab's part is pm_isosurface's mesh between two prefixes. */
extern "C" pm_status pmi_cuda_isosurface_window(pm_context *ctx, const pm_volume *win,
                                                uint64_t zoff, uint64_t own0, uint64_t own1,
                                                double iso, const pm_isosurface_options *options,
                                                uint64_t budget, pmi_slab_mesh *out)
{
    static const char fn[] = "pm_isosurface (slab window)";
    memset(out, 0, sizeof *out);
    pm_isosurface_options opt = *options;
    opt.report = NULL;
    opt.out_positions = NULL;
    opt.out_normals = NULL;
    opt.out_indices = NULL;
    opt.output_in_context_memory = 1;
    mc_plan pl;
    PMI_TRY(mc_plan_make(ctx, win, iso, &opt, &pl));
    pl.v.kz = (long long)zoff;
    pl.chunks = 0; /* the owned ranges below need the records in lattice order */
    pl.pool = 0;
    if ((pl.hooks & PMI_HOOK_SPLIT) && own1 - own0 > 1)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: split (test hook)", fn);
    pmi_cuda_state *st = pmi_cuda(ctx);
    cudaStream_t s = st->stream;
    const unsigned long long plane = (unsigned long long)win->nx * win->ny;
    size_t rec_cap = (size_t)mc_rec_guess(pl.npoints);
    mc_scratch p1;
    unsigned long long w[9];
    for (;;) {
        PMI_TRY(mc_pass1_launch(ctx, win, pl, rec_cap, sizeof w, &p1));
        unsigned long long *wd = (unsigned long long *)p1.extra;
        mc_window_kernel<<<1, MC_WIN_THREADS, 0, s>>>(p1.rec, p1.totals, rec_cap, own0 * plane,
                                                      own1 * plane, pl.edges, wd);
        PMI_TRY(pmi_cuda_launched(fn));
        PMI_CU_TRY(cudaMemcpyAsync(w, wd, sizeof w, cudaMemcpyDeviceToHost, s), fn);
        PMI_TRY(pmi_cuda_wait(ctx, fn));
        if (w[5] <= rec_cap) break;
        /* Pass 1 again with room for every record: refused before it is
         * taken when that alone passes the budget (42 bytes a record). */
        const size_t more = (size_t)(p1.end - p1.base) + ((size_t)w[5] - rec_cap) * 42;
        if (budget && more > budget)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "%s: a window of %zu slices with %llu records needs about %zu bytes "
                             "of device memory for its scratch, over its budget of %llu",
                             fn, win->nz, w[5], more, (unsigned long long)budget);
        rec_cap = (size_t)w[5];
    }
    const unsigned long long *tot = w + 5;
    const int indexed = pl.indexed, nrm = opt.normals != PM_NORMALS_NONE;
    const unsigned long long nt_own = w[1] - w[0];
    const unsigned long long v_lo = indexed ? w[2] : 3 * w[0];
    const unsigned long long nv_own = indexed ? w[3] - w[2] : 3 * nt_own;
    const unsigned long long nv_w = indexed ? tot[2] : 3 * tot[1], nt_w = indexed ? tot[1] : 0;
    const size_t vb = pmi_align256((size_t)nv_w * 12), ib = pmi_align256((size_t)nt_w * 12);
    const size_t room = vb * (nrm ? 2 : 1) + ib;
    const size_t used = (size_t)(p1.end - p1.base) + room;
    if (indexed && !pmi_mesh_indices_fit(nv_w))
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %llu vertices in a window of %zu slices pass 32-bit indices", fn,
                         nv_w, win->nz);
    if (budget && used > budget)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: a window of %zu slices needs %zu bytes of device memory for its "
                         "scratch and mesh, over its budget of %llu",
                         fn, win->nz, used, (unsigned long long)budget);
    if (!nt_own && !nv_own) {
        out->active_cells = tot[3] - w[4];
        return PM_STATUS_OK;
    }
    char *q;
    PMI_TRY(pmi_cuda_out_room(st, room, &q));
    pmi_mesh_dest dest;
    memset(&dest, 0, sizeof dest);
    dest.positions = (float *)q;
    dest.normals = nrm ? (float *)(q + vb) : NULL;
    dest.indices = indexed ? (uint32_t *)(q + vb * (nrm ? 2 : 1)) : NULL;
    dest.vertex_limit = nv_w;
    dest.tri_limit = nt_w;
    cudaEvent_t ev[MC_EV_COUNT] = {NULL, NULL, NULL, NULL, NULL};
    PMI_TRY(mc_sync_pass2(ctx, win, &opt, pl, p1, tot, dest, ev));
    if (indexed && nt_own) {
        mc_rebase_kernel<<<mc_blocks(3 * nt_own), MC_THREADS, 0, s>>>(dest.indices + 3 * w[0],
                                                                      3 * nt_own, (uint32_t)w[2]);
        PMI_TRY(pmi_cuda_launched(fn));
    }
    out->num_vertices = nv_own;
    out->num_triangles = nt_own;
    out->active_cells = tot[3] - w[4];
    pm_status r = PM_STATUS_OK;
    /* Host arrays from the context's recycled ones: a worker's slabs are
     * about the same size, and fresh pages would fault at every slab. */
    out->positions = (float *)pmi_host_array_get(ctx, (size_t)nv_own * 12 + 1);
    if (nrm) out->normals = (float *)pmi_host_array_get(ctx, (size_t)nv_own * 12 + 1);
    if (indexed) out->indices = (uint32_t *)pmi_host_array_get(ctx, (size_t)nt_own * 12 + 1);
    if (!out->positions || (nrm && !out->normals) || (indexed && !out->indices))
        r = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for %llu vertices", fn, nv_own);
    if (r == PM_STATUS_OK)
        r = pmi_cuda_copy_host(ctx, out->positions, dest.positions + 3 * v_lo, nv_own * 12, 1, fn);
    if (r == PM_STATUS_OK && nrm)
        r = pmi_cuda_copy_host(ctx, out->normals, dest.normals + 3 * v_lo, nv_own * 12, 1, fn);
    if (r == PM_STATUS_OK && indexed)
        r = pmi_cuda_copy_host(ctx, out->indices, dest.indices + 3 * w[0], nt_own * 12, 1, fn);
    pm_status ws = pmi_cuda_wait(ctx, fn);
    if (r == PM_STATUS_OK) r = ws;
    if (r != PM_STATUS_OK) {
        pmi_host_array_put(ctx, out->positions), pmi_host_array_put(ctx, out->normals);
        pmi_host_array_put(ctx, out->indices);
        memset(out, 0, sizeof *out);
    }
    return r;
}

/* pm_isosurface_async's end of pass 1 after the bitmask classification
 * (mc_final_counts; the direct one's last tile or its chunks' scan, and
 * the streaming one's segment scan, write the same counts themselves).
 * One thread. */
static __global__ void mc_final_kernel(const unsigned long long *totals, mc_final_args f)
{
    pmi_pdl_enter();
    mc_final_counts(totals, f);
}

/* Both passes queued on the context's stream, no host wait: pass 1 with a
 * record room that holds any mesh fitting the caller's capacities (a
 * record is a point whose cell has triangles, or a point on the last
 * row, column or slice of the lattice, which owns edges but no cell), pass
 * 2 launched for the capacities and told the counts on the device. The
 * scratch stays in use until the queued work ends; the next call on the
 * context comes after it in stream order. */
static pm_status mc_queue_launches(pm_context *ctx, const pm_volume *vol, const mc_plan &pl,
                                   const pm_isosurface_options *opt,
                                   pm_isosurface_counts *counts_ctx, int graph = 0)
{
    cudaStream_t s = pmi_cuda(ctx)->stream;
    const int indexed = pl.indexed;
    const unsigned long long vcap = opt->vertex_capacity, tcap = opt->triangle_capacity;
    /* Triangles that can be written, records they need (at most one per
     * triangle, plus the border points). */
    const unsigned long long tfit = indexed ? tcap : mc_min(tcap, vcap / 3);
    const unsigned long long rec_cap = mc_async_records(vol, pl, opt);
    /* Outputs of each kernel, at most: an indexed mesh's vertices
     * (crossings, 3 per record), triangles (5 per record). */
    const unsigned long long nvk = mc_min(vcap, 3 * rec_cap), ntk = mc_min(tfit, 5 * rec_cap);
    if ((nvk + MC_THREADS - 1) / MC_THREADS > 0x7fffffffull ||
        (ntk + MC_THREADS - 1) / MC_THREADS > 0x7fffffffull)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface_async: the capacities are too large for one launch");
    float *pnrm = opt->normals != PM_NORMALS_NONE ? opt->out_normals : NULL;
    /* The counts, for the caller and for pass 2 (dc, at the start of the
     * extra room): written by the direct classification's last tile (or
     * its chunks' scan), the streaming classification's segment scan, or
     * mc_final_kernel after the bitmask kernels. */
    mc_final_args fin;
    fin.dc = NULL;
    fin.counts = counts_ctx;
    fin.indexed = indexed;
    fin.rec_cap = rec_cap;
    fin.vcap = vcap;
    fin.tcap = tcap;
    fin.vroom = indexed ? vcap : ~0ull;
    mc_scratch p1;
    PMI_TRY(mc_pass1_launch(ctx, vol, pl, (size_t)rec_cap, 256, &p1, &fin));
    mc_dcounts *dc = (mc_dcounts *)p1.extra;
    if (pl.pass1 == MC_PASS1_BITMASK) {
        fin.dc = dc;
        pmi_launch(pl.pdl, mc_final_kernel, 1, 1, s, (const unsigned long long *)p1.totals, fin);
        PMI_TRY(pmi_cuda_launched("pm_isosurface_async: counts"));
    }
    /* Pass 2 for the capacities; the counts come from dc. */
    mc_expand_job j;
    memset(&j, 0, sizeof j);
    j.soup = pl.soup;
    j.nrec = (long long)rec_cap;
    j.pos = opt->out_positions;
    j.nrm = pnrm;
    j.ch = p1.ch;
    j.pool = p1.pool;
    j.dc = dc;
    if (indexed) {
        j.idx = opt->out_indices;
        j.nvert = nvk;
        j.ntri = ntk;
    } else {
        j.ntri = ntk;
    }
    pm_status ls = pmi_mc_expand(ctx, pl.pdl, vol->type, opt->normals, pl.v, p1.rec, p1.rows, j);
    mc_report_path(opt->report, pl, pmi_cuda(ctx), graph);
    return ls;
}

/* A repeated call as a CUDA graph. A kernel launch costs the host 3-6 us
 * on the H100 machines measured, and the first one of a call delays the
 * GPU's start by as much; one graph launch starts the whole chain
 * (bench/RESULTS-cudamc.md). The context remembers the shapes of its last
 * calls (mc_graph_key: the volume's pointer, size, strides and placement,
 * the iso value and options, the caller's buffers, capacities and counts;
 * MC_GRAPHS of them, the least recently used replaced). A shape's first
 * call runs its launches, its second captures them into a graph, its
 * later calls replay it. A failed capture leaves that shape's calls on
 * their launches (hook nograph). Captured launches take the call's own
 * tile states, cleared by the graph (pmi_mc_direct_classify; report
 * states=cleared), so every replay starts from cleared states; chunked
 * records take the context's chunk counter, zero between calls (states=
 * kept; a graph whose counter another call moved or left unknown is
 * captured again). */
typedef struct mc_graph_key {
    const void *data;
    unsigned long long nx, ny, nz, rs, ss;
    double org[3], sp[3], iso;
    int type, inside, mode, normals, pdl;
    unsigned hooks;
    const void *pos, *nrm, *idx, *counts;
    unsigned long long vcap, tcap;
} mc_graph_key;
/* A shape's entry. */
typedef struct mc_graph {
    mc_graph_key key;     /* the shape */
    int failed;           /* its capture failed: its calls run the launches */
    cudaGraphExec_t exec; /* its graph, or NULL */
    void *arena;          /* the scratch the graph uses */
    size_t arena_bytes;
    void *md;               /* the context's chunk counter's buffer the graph uses, or NULL */
    unsigned long long use; /* the call that last used it (least recent: replaced) */
} mc_graph;
/* The shapes of the context's last calls (MC_GRAPHS: a frame may take
 * a few iso values, or both entry points). */
#define MC_GRAPHS 4
typedef struct mc_graphs {
    mc_graph e[MC_GRAPHS];
    int n;
    unsigned long long calls;
    /* The stream the launches are captured on: the library's own, so that
     * a caller's stream (which other threads may use) is never captured. */
    cudaStream_t cap;
} mc_graphs;

static void mc_graph_drop(mc_graph *g)
{
    if (g->exec) cudaGraphExecDestroy(g->exec);
    g->exec = NULL;
    g->md = NULL;
    g->failed = 0;
}

void pmi_isosurface_graph_free(pmi_cuda_state *st)
{
    mc_graphs *G = (mc_graphs *)st->mc_graph;
    if (!G) return;
    for (int i = 0; i < G->n; i++)
        mc_graph_drop(&G->e[i]);
    if (G->cap) cudaStreamDestroy(G->cap);
    free(G);
    st->mc_graph = NULL;
}

/* Captures the call's launches into g->exec: the scratch grown to the
 * captured layout first, then the launches captured on G->cap (nothing
 * runs) and instantiated. 0 if anything failed, with no error left
 * behind (the call then runs its launches). */
static int mc_graph_capture(pm_context *ctx, const pm_volume *vol, const mc_plan &pl,
                            const pm_isosurface_options *opt, pm_isosurface_counts *counts_ctx,
                            mc_graphs *G, mc_graph *g)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    const mc_layout L = mc_pass1_layout(vol, pl, (size_t)mc_async_records(vol, pl, opt), 256, 0);
    void *scratch;
    if (pmi_cuda_scratch(ctx, L.bytes, &scratch) != PM_STATUS_OK) {
        pmi_clear_error();
        return 0;
    }
    if (!G->cap && cudaStreamCreateWithFlags(&G->cap, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        G->cap = NULL;
        return 0;
    }
    if (pl.chunks && pmi_mc_direct_prepare(st, pl.hooks) != PM_STATUS_OK) {
        pmi_clear_error();
        return 0;
    }
    if (cudaStreamBeginCapture(G->cap, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    pm_isosurface_options o = *opt;
    o.report = NULL; /* reported at the launch */
    const cudaStream_t s = st->stream;
    st->stream = G->cap;
    st->mc_graph_capturing = 1;
    const pm_status ls = mc_queue_launches(ctx, vol, pl, &o, counts_ctx);
    st->mc_graph_capturing = 0;
    st->stream = s;
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(G->cap, &graph);
    const int ok = e == cudaSuccess && ls == PM_STATUS_OK && !(pl.hooks & PMI_HOOK_NOGRAPH) &&
                   cudaGraphInstantiate(&g->exec, graph, 0) == cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    if (!ok) {
        cudaGetLastError();
        pmi_clear_error();
        g->exec = NULL;
        return 0;
    }
    g->arena = st->arena;
    g->arena_bytes = st->arena_bytes;
    g->md = pl.pass1 == MC_PASS1_DIRECT && !st->md_cleared ? st->md_buf : NULL;
    return 1;
}

/* pm_isosurface_async's launches, and pm_isosurface's on its one-wait
 * path: replayed from the graph of a repeated shape, else launched. */
static pm_status mc_queue(pm_context *ctx, const pm_volume *vol, const mc_plan &pl,
                          const pm_isosurface_options *opt, pm_isosurface_counts *counts_ctx)
{
    pmi_cuda_state *st = pmi_cuda(ctx);
    if (mc_capturing(st->stream)) return mc_queue_launches(ctx, vol, pl, opt, counts_ctx);
    if (!st->mc_graph) st->mc_graph = calloc(1, sizeof(mc_graphs));
    mc_graphs *G = (mc_graphs *)st->mc_graph;
    if (!G) return mc_queue_launches(ctx, vol, pl, opt, counts_ctx);
    /* The plan is a function of these (and of the device): a key of
     * scalars, its padding zeroed, compared by memcmp. */
    mc_graph_key k;
    memset(&k, 0, sizeof k);
    k.data = vol->data;
    k.nx = vol->nx;
    k.ny = vol->ny;
    k.nz = vol->nz;
    k.rs = vol->row_stride;
    k.ss = vol->slice_stride;
    for (int a = 0; a < 3; a++) {
        k.org[a] = vol->origin[a];
        k.sp[a] = vol->spacing[a];
    }
    k.iso = pl.v.iso;
    k.type = (int)vol->type;
    k.inside = (int)opt->inside;
    k.mode = (int)opt->mode;
    k.pdl = pl.pdl;
    k.hooks = pl.hooks;
    k.normals = (int)opt->normals;
    k.pos = opt->out_positions;
    k.nrm = opt->normals != PM_NORMALS_NONE ? opt->out_normals : NULL;
    k.idx = pl.indexed ? opt->out_indices : NULL;
    k.counts = counts_ctx;
    k.vcap = opt->vertex_capacity;
    k.tcap = opt->triangle_capacity;
    mc_graph *g = NULL;
    for (int i = 0; i < G->n && !g; i++)
        if (!memcmp(&k, &G->e[i].key, sizeof k)) g = &G->e[i];
    if (!g) {
        /* A new shape: launched, and remembered in a free entry or in
         * the least recently used one's place. */
        g = &G->e[0];
        if (G->n < MC_GRAPHS)
            g = &G->e[G->n++];
        else
            for (int i = 1; i < MC_GRAPHS; i++)
                if (G->e[i].use < g->use) g = &G->e[i];
        mc_graph_drop(g);
        memcpy(&g->key, &k, sizeof k);
        g->use = ++G->calls;
        return mc_queue_launches(ctx, vol, pl, opt, counts_ctx);
    }
    g->use = ++G->calls;
    if (g->failed) return mc_queue_launches(ctx, vol, pl, opt, counts_ctx, 3);
    int how = 2;
    /* Another call moved the scratch or the chunk counter, or left the
     * counter unknown (a failed launch). */
    if (g->exec && (g->arena != st->arena || g->arena_bytes != st->arena_bytes ||
                    (g->md && (g->md != st->md_buf || !pmi_mc_direct_counter_ready(st)))))
        mc_graph_drop(g);
    if (!g->exec) {
        if (!mc_graph_capture(ctx, vol, pl, opt, counts_ctx, G, g)) {
            g->failed = 1;
            return mc_queue_launches(ctx, vol, pl, opt, counts_ctx, 3);
        }
        how = 1;
    }
    PMI_CU_TRY(cudaGraphLaunch(g->exec, st->stream), "pm_isosurface_async: graph launch");
    st->md_cleared = pl.pass1 == MC_PASS1_DIRECT && !g->md;
    st->md_zeroed = 0;
    mc_report_path(opt->report, pl, st, how);
    return PM_STATUS_OK;
}

extern "C" pm_status pmi_cuda_isosurface_async(pm_context *ctx, const pm_volume *vol, double iso,
                                               const pm_isosurface_options *opt,
                                               pm_isosurface_counts *counts_ctx)
{
    mc_plan pl;
    PMI_TRY(mc_plan_make(ctx, vol, iso, opt, &pl));
    return mc_queue(ctx, vol, pl, opt, counts_ctx);
}

/* Kernel preloading (preload.cu): the clear and count kernels of every
 * call, then the slab windows'. */
void pmi_isosurface_preload(pmi_preload *p, int tier)
{
    const void *const k0[] = {(const void *)mc_clear_kernel, (const void *)mc_final_kernel};
    const void *const k1[] = {(const void *)mc_window_kernel, (const void *)mc_rebase_kernel};
    if (tier == 0)
        pmi_preload_all(p, k0);
    else
        pmi_preload_all(p, k1);
}
