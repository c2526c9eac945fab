/* Marching cubes on the CPU (Lorensen and Cline 1987): the entry point,
 * the choice of extraction, the soup gathered from the indexed mesh, and
 * the per-type kernels both extractions use. The output is the reference
 * every backend reproduces bit for bit.
 *
 * Paths (reported in pm_isosurface_report.path):
 *   extract=slab     the slab walk (isosurface_slab.c), the default;
 *   extract=twopass  the two-pass extraction (isosurface_twopass.c), taken
 *                    when the slab walk declines: its slab arrays (the
 *                    mesh, in chunks) would pass the larger of 0.75 bytes
 *                    per cell and 4 chunks per slab (noise-like volumes,
 *                    and small volumes, whose surface is large for their
 *                    cell count), or cannot be allocated; test hook
 *                    "twopass" forces it;
 *   declined=sample  (two-pass) the walk declined before it started: a
 *                    sample of rows predicted twice its budget;
 *   declined=budget  (two-pass) the walk declined once it passed its
 *                    budget (or found no memory); test hook "walkfull"
 *                    skips the sample, so that this is the decline;
 *   stores=stream    (two-pass) the mesh written with streaming stores,
 *                    for meshes of 64 MiB and more, and with test hook
 *                    "twopass"; stores=cached for smaller ones;
 *   simd=avx2        the AVX2 kernels (isosurface_avx2.c): the slab walk's
 *                    inside bits, both extractions' vertices with central
 *                    normals, on x86-64 CPUs that have AVX2; simd=scalar
 *                    elsewhere and with test hook "scalar";
 *   soup=gather      soups: the indexed mesh, expanded. */
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__linux__)
#endif

#include "core/hooks.h"
#include "core/mc_math.h"
#include "core/mesh_out.h"
#include "core/util.h"
#include "cpu/cpu.h"
#include "cpu/isosurface_internal.h"

#ifndef MC_SSE_F32
#define MC_SSE_F32 0
#endif
#define MC_T uint8_t
#define MC_SUF u8
#define MC_CT float
#define MC_THR(J) ((J)->fthr)
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T uint16_t
#define MC_SUF u16
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T int16_t
#define MC_SUF i16
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#define MC_T float
#define MC_SUF f32
#if defined(__SSE2__)
#undef MC_SSE_F32
#define MC_SSE_F32 1
#endif
#include "cpu/isosurface_kernel.h"
#undef MC_SSE_F32
#define MC_SSE_F32 0
#undef MC_T
#undef MC_SUF
#undef MC_CT
#undef MC_THR
#define MC_T double
#define MC_SUF f64
#define MC_CT double
#define MC_THR(J) ((J)->siso)
#include "cpu/isosurface_kernel.h"
#undef MC_T
#undef MC_SUF
#undef MC_CT
#undef MC_THR

#define MC_KERNELS(s)                                                                              \
    {                                                                                              \
        bits_words_##s, bits_row_##s, vertex_##s, vertex8_central_##s, vertex_row_central_##s      \
    }
const mc_kernels pmi_mc_kernels[5] = {MC_KERNELS(u8), MC_KERNELS(u16), MC_KERNELS(i16),
                                      MC_KERNELS(f32), MC_KERNELS(f64)};

const uint8_t pmi_mc_edge_dx[12] = {0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0};
const uint8_t pmi_mc_edge_row[12] = {0, 0, 1, 0, 2, 2, 3, 2, 0, 0, 1, 1};

void pmi_mc_job_init(mc_job *J, const pm_volume *vol, double iso, const pm_isosurface_options *opt)
{
    memset(J, 0, sizeof *J);
    J->data = vol->data;
    J->nx = vol->nx;
    J->ny = vol->ny;
    J->nz = vol->nz;
    J->rs = vol->row_stride;
    J->ss = vol->slice_stride;
    for (int a = 0; a < 3; a++) {
        J->h[a] = vol->spacing[a];
        J->origin[a] = vol->origin[a];
        for (int span = 0; span < 3; span++)
            J->gw[span][a] = pmi_mc_diff_weight((double)span, J->h[a]);
    }
    J->iso = iso;
    J->sg = opt->inside == PM_INSIDE_ABOVE ? -1.0 : 1.0;
    J->siso = J->sg * iso;
    J->normals = opt->normals;
    J->type = vol->type;
    /* The volume's size already fits size_t, so this product does too. */
    J->P = J->nx * J->ny * J->nz;
    J->es = pm_sample_size(vol->type);
    J->fthr = pmi_mc_float_threshold(J->siso);
    J->cases64 = mc_cases64;
}

/* Which extraction made the indexed mesh. */
typedef enum mc_extraction {
    MC_EXTRACT_SLAB,
    MC_EXTRACT_TWOPASS,         /* asked for (test hook twopass) */
    MC_EXTRACT_DECLINED_SAMPLE, /* the walk's sample predicted too large a mesh */
    MC_EXTRACT_DECLINED_BUDGET  /* the walk passed its budget */
} mc_extraction;

/* The indexed mesh: the slab walk, or the two-pass extraction when the
 * walk declines or hook twopass asks for it (hook walkfull: the walk
 * takes no sample first). */
static pm_status mc_indexed(pm_context *ctx, const pm_volume *vol, double iso,
                            const pm_isosurface_options *opt, int avx2, unsigned hooks,
                            pm_mesh *mesh, mc_extraction *ran)
{
    const int twopass = (hooks & PMI_HOOK_TWOPASS) != 0;
    *ran = MC_EXTRACT_TWOPASS;
    if (!twopass) {
        int sampled = 0;
        pm_status st =
            pmi_mc_slab(ctx, vol, iso, opt, avx2, !(hooks & PMI_HOOK_WALKFULL), mesh, &sampled);
        *ran = MC_EXTRACT_SLAB;
        if (st != PM_STATUS_UNSUPPORTED) return st;
        *ran = sampled ? MC_EXTRACT_DECLINED_SAMPLE : MC_EXTRACT_DECLINED_BUDGET;
    }
    return pmi_mc_twopass(ctx, vol, iso, opt, avx2, twopass, mesh);
}

/* A soup is the indexed mesh expanded: the vertex of a triangle corner is
 * the vertex of its edge, computed by the same rule. Extracting indexed and
 * then gathering computes each edge once instead of in up to four cells,
 * which makes soups with normals about as cheap as indexed meshes. Extra
 * memory: the indexed mesh, well under the soup itself. */
static pm_status mc_soup(pm_context *ctx, const pm_volume *vol, double iso,
                         const pm_isosurface_options *opt, int avx2, unsigned hooks, pm_mesh *mesh,
                         mc_extraction *ran)
{
    pm_isosurface_options io = *opt;
    io.mode = PM_MESH_INDEXED;
    io.out_positions = io.out_normals = NULL;
    io.out_indices = NULL;
    io.vertex_capacity = io.triangle_capacity = 0;
    io.output_in_context_memory = 0;
    pm_mesh im;
    memset(&im, 0, sizeof im);
    pm_status st = mc_indexed(ctx, vol, iso, &io, avx2, hooks, &im, ran);
    if (st != PM_STATUS_OK) {
        pm_mesh_free(ctx, &im);
        return st;
    }
    const int timed = opt->report && opt->report->timed;
    double t0 = timed ? pmi_now_ms() : 0.0;
    pmi_mesh_dest D;
    uint64_t ntri = im.num_triangles;
    st = pmi_mesh_prepare(ctx, opt, 0, 3 * ntri, ntri, im.active_cells, mesh, &D);
    if (st == PM_STATUS_OK || st == PM_STATUS_TRUNCATED) {
        const uint32_t *idx = im.indices;
        const size_t corners = (size_t)D.vertex_limit; /* whole triangles */
        const int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (corners > 3 * 65536)
        for (size_t c = 0; c < corners; c++) {
            size_t v = idx[c];
            memcpy(D.positions + 3 * c, im.positions + 3 * v, 3 * sizeof(float));
            if (D.normals) memcpy(D.normals + 3 * c, im.normals + 3 * v, 3 * sizeof(float));
        }
        pmi_report_stage(opt->report, 2, "gather", timed ? pmi_now_ms() - t0 : 0.0);
    }
    pm_mesh_free(ctx, &im);
    return st;
}

pm_status pmi_cpu_isosurface(pm_context *ctx, const pm_volume *vol, double iso,
                             const pm_isosurface_options *opt, pm_mesh *mesh)
{
    unsigned hooks;
    pm_status st = pmi_hooks(&hooks);
    if (st != PM_STATUS_OK) return st;
    const int avx2 = pmi_cpu_mc_avx2(hooks);
    const int soup = opt->mode == PM_MESH_SOUP;
    mc_extraction ran;
    st = soup ? mc_soup(ctx, vol, iso, opt, avx2, hooks, mesh, &ran)
              : mc_indexed(ctx, vol, iso, opt, avx2, hooks, mesh, &ran);
    pmi_report_path(opt->report, "backend", "cpu");
    pmi_report_path(opt->report, "extract", ran == MC_EXTRACT_SLAB ? "slab" : "twopass");
    if (ran == MC_EXTRACT_DECLINED_SAMPLE || ran == MC_EXTRACT_DECLINED_BUDGET)
        pmi_report_path(opt->report, "declined",
                        ran == MC_EXTRACT_DECLINED_SAMPLE ? "sample" : "budget");
    pmi_report_path(opt->report, "simd", avx2 ? "avx2" : "scalar");
    if (soup) pmi_report_path(opt->report, "soup", "gather");
    return st;
}
