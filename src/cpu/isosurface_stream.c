/* Marching cubes (Lorensen and Cline 1987) over a volume larger than
 * memory: the slices come from a pm_volume_source a slab at a time into
 * one bounded buffer, and each slab is walked by the slab walk of
 * isosurface_slab.c and appended to the mesh.
 *
 * Why the output is the in-memory mesh, byte for byte: the slab walk
 * already cuts the volume into slabs of lattice slices, numbers each
 * slab's vertices from 0 with slice k1 (the next slab's first) after its
 * own in the next slab's order, and places slabs by an exclusive scan of
 * their counts. Streaming runs the same walk with the scan carried from
 * one buffer load to the next. The kernels read samples at their global
 * lattice index, so positions, the global border's one-sided differences
 * and the output order are those of the whole volume; the buffer only has
 * to hold what a slab's walk reads: its slices [k0, k1), one ghost slice
 * below (k0 - 1: the normals' differences at slice k0) and two above (k1:
 * the crossings and vertex ids of the next slab's first slice, whose
 * triangles' corners this slab's last cell slice uses; k1 + 1: the z
 * crossings of slice k1 and the normals at k1). Every slice is read once:
 * the ghost slices stay in the buffer for the next slab. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/hooks.h"
#include "core/mesh_out.h"
#include "core/slab_pieces.h"
#include "core/util.h"
#include "cpu/isosurface_internal.h"
#include "cpu/isosurface_stream.h"

#define MC_GHOST_ABOVE 2

/* Grows one host array to hold n elements of `elem` bytes. */
static pm_status grow_array(void **p, uint64_t n, size_t elem, const char *what)
{
    size_t bytes;
    if (n > SIZE_MAX || !pmi_mul_size((size_t)n, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface_stream: mesh size overflows");
    void *q = realloc(*p, bytes ? bytes : 1);
    if (!q)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface_stream: no memory to grow the mesh's %s to %llu bytes",
                         what, (unsigned long long)bytes);
    *p = q;
    return PM_STATUS_OK;
}

pm_status pmi_mc_append_reserve(pmi_mc_append *A, uint64_t nv, uint64_t nt)
{
    if (!A->grow) return PM_STATUS_OK;
    pm_status s = PM_STATUS_OK;
    if (nv > A->vertex_limit || !A->positions) {
        /* Doubling: realloc of a large block moves pages, not bytes. */
        uint64_t cap = A->vertex_limit * 2 > nv ? A->vertex_limit * 2 : nv;
        if (cap < 4096) cap = 4096;
        s = grow_array((void **)&A->positions, cap, 3 * sizeof(float), "positions");
        if (s == PM_STATUS_OK && A->want_normals)
            s = grow_array((void **)&A->normals, cap, 3 * sizeof(float), "normals");
        if (s != PM_STATUS_OK) return s;
        A->vertex_limit = cap;
    }
    if (nt > A->tri_limit || !A->indices) {
        uint64_t cap = A->tri_limit * 2 > nt ? A->tri_limit * 2 : nt;
        if (cap < 4096) cap = 4096;
        s = grow_array((void **)&A->indices, cap, 3 * sizeof(uint32_t), "indices");
        if (s != PM_STATUS_OK) return s;
        A->tri_limit = cap;
    }
    return PM_STATUS_OK;
}

static void append_free(pmi_mc_append *A)
{
    if (!A->grow) return;
    free(A->positions);
    free(A->normals);
    free(A->indices);
    A->positions = A->normals = NULL;
    A->indices = NULL;
}

/* The options with their defaults, checked (pm_isosurface's rules). */
static pm_status stream_options(const pm_isosurface_options *options, const pm_stream_options *so,
                                pm_isosurface_options *opt, pm_stream_options *sopt)
{
    memset(sopt, 0, sizeof *sopt);
    pm_status s = pmi_isosurface_options_resolve("pm_isosurface_stream", options, opt);
    if (s != PM_STATUS_OK) return s;
    /* PM_OUTPUT_ANY: the slabs are assembled on the host. */
    if (opt->output_in_context_memory == PM_OUTPUT_ANY)
        opt->output_in_context_memory = opt->out_positions ? 1 : 0;
    if (so) {
        size_t sz = so->struct_size ? so->struct_size : sizeof *sopt;
        memcpy(sopt, so, sz < sizeof *sopt ? sz : sizeof *sopt);
    }
    return PM_STATUS_OK;
}

/* The source's geometry as a volume view (data set per slab). */
static pm_status stream_volume(const pm_volume_source *src, pm_volume *v)
{
    memset(v, 0, sizeof *v);
    if (!src->read)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_isosurface_stream: source->read is NULL");
    if (pm_sample_size(src->type) == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_stream: source: unknown sample type %d", (int)src->type);
    if (src->nx < 2 || src->ny < 2 || src->nz < 2)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_stream: source dims %zu x %zu x %zu, each must be at "
                         "least 2",
                         src->nx, src->ny, src->nz);
    size_t slice, bytes;
    if (!pmi_mul_size(src->nx, src->ny, &slice) ||
        !pmi_mul_size(slice, pm_sample_size(src->type), &bytes) ||
        !pmi_mul_size(src->nz, bytes, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_isosurface_stream: source: %zu x %zu x %zu samples overflow size_t",
                         src->nx, src->ny, src->nz);
    v->type = src->type;
    v->nx = src->nx;
    v->ny = src->ny;
    v->nz = src->nz;
    v->row_stride = src->nx;
    v->slice_stride = slice;
    for (int a = 0; a < 3; a++) {
        v->spacing[a] = src->spacing[a] == 0.0 ? 1.0 : src->spacing[a];
        v->origin[a] = src->origin[a];
        if (!(v->spacing[a] > 0) || v->spacing[a] > 1e308 || !(v->origin[a] == v->origin[a]) ||
            v->origin[a] > 1e308 || v->origin[a] < -1e308)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_isosurface_stream: source spacing and origin must be finite, "
                             "spacing > 0");
    }
    return PM_STATUS_OK;
}

/* Slices [z0, z1) from the source into dst, timed; a failure without a
 * message of its own gets one naming the slices. */
static pm_status stream_read(const pm_volume_source *src, size_t z0, size_t z1, void *dst,
                             pm_stream_report *R, size_t slice_bytes)
{
    double t0 = pmi_now_ms();
    pmi_clear_error();
    pm_status s = src->read(src->user, z0, z1, dst);
    R->read_ms += pmi_now_ms() - t0;
    if (s != PM_STATUS_OK) {
        if (!pm_last_error()[0])
            pmi_error(s, "pm_isosurface_stream: the source failed to deliver slices %zu to %zu: %s",
                      z0, z1 - 1, pm_status_string(s));
        return s;
    }
    R->bytes_read += (uint64_t)(z1 - z0) * slice_bytes;
    return PM_STATUS_OK;
}

/* The slab thickness the limit allows (or the caller asked for), and the
 * working set it implies. */
static pm_status stream_plan(const pm_volume *v, const pm_stream_options *so, size_t fixed,
                             size_t glo, size_t *thick, uint64_t *working)
{
    const size_t sb = v->slice_stride * pm_sample_size(v->type);
    const size_t ghosts = glo + MC_GHOST_ABOVE;
    size_t t = so->slab_slices;
    if (!so->max_memory_bytes) {
        if (!t) t = v->nz;
    } else {
        uint64_t lim = so->max_memory_bytes;
        uint64_t room = lim > fixed ? (lim - fixed) / sb : 0;
        uint64_t most = room > ghosts ? room - ghosts : 0;
        if (most == 0 || (t && t > most)) {
            size_t want = t ? t : 1;
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "pm_isosurface_stream: a slab of %zu slice%s with its %zu ghost "
                             "slices (%zu bytes each) and %zu bytes of scratch needs %llu bytes, "
                             "more than the memory limit of %zu bytes",
                             want, want == 1 ? "" : "s", ghosts, sb, fixed,
                             (unsigned long long)((uint64_t)(want + ghosts) * sb + fixed),
                             so->max_memory_bytes);
        }
        if (!t) t = most > v->nz ? v->nz : (size_t)most;
    }
    if (t > v->nz) t = v->nz;
    size_t held = t + ghosts < v->nz ? t + ghosts : v->nz;
    *thick = t;
    *working = (uint64_t)held * sb + fixed;
    return PM_STATUS_OK;
}

/* The soup of the indexed mesh A: each corner copies its vertex. */
static pm_status stream_gather(pm_context *ctx, const pm_isosurface_options *opt,
                               const pmi_mc_append *A, pm_mesh *mesh)
{
    pmi_mesh_dest D;
    pm_status st = pmi_mesh_prepare(ctx, opt, 0, 3 * A->nt, A->nt, A->nact, mesh, &D);
    if (st != PM_STATUS_OK && st != PM_STATUS_TRUNCATED) return st;
    const uint32_t *idx = A->indices;
    const size_t corners = (size_t)D.vertex_limit;
    const int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
#pragma omp parallel for num_threads(threads) schedule(static) if (corners > 3 * 65536)
    for (size_t c = 0; c < corners; c++) {
        size_t v = idx[c];
        memcpy(D.positions + 3 * c, A->positions + 3 * v, 3 * sizeof(float));
        if (D.normals) memcpy(D.normals + 3 * c, A->normals + 3 * v, 3 * sizeof(float));
    }
    return st;
}

/* The indexed mesh A (grown) handed to the mesh, trimmed to its size. */
static void stream_hand_over(pmi_mc_append *A, const pm_isosurface_options *opt, pm_mesh *mesh)
{
    float *p = realloc(A->positions, A->nv ? (size_t)A->nv * 3 * sizeof(float) : 1);
    if (p) A->positions = p;
    if (A->normals) {
        p = realloc(A->normals, A->nv ? (size_t)A->nv * 3 * sizeof(float) : 1);
        if (p) A->normals = p;
    }
    uint32_t *q = realloc(A->indices, A->nt ? (size_t)A->nt * 3 * sizeof(uint32_t) : 1);
    if (q) A->indices = q;
    mesh->positions = A->positions;
    mesh->normals = A->normals;
    mesh->indices = A->indices;
    mesh->num_vertices = (size_t)A->nv;
    mesh->num_triangles = (size_t)A->nt;
    mesh->active_cells = A->nact;
    /* Context memory is host memory on the CPU backend, freed by free(). */
    mesh->in_context_memory = opt->output_in_context_memory != 0;
    mesh->owns_arrays = 1;
    A->positions = A->normals = NULL;
    A->indices = NULL;
}

/* On a GPU: the slab run of core/slab_pieces.c, the limit bounding
 * the device memory; a source over memory is read in place. */
static pm_status stream_pieces(pm_context *ctx, const pm_volume_source *source,
                               const pm_volume *view, double iso, const pm_isosurface_options *opt,
                               const pm_stream_options *so, pm_mesh *mesh)
{
    const double t0 = pmi_now_ms();
    const pm_volume *mem = pmi_memory_source_volume(source);
    pm_volume v = mem ? *mem : *view;
    pmi_slab_report S;
    pm_status st = pmi_slab_run(&ctx, 1, &v, mem ? NULL : source, iso, opt, so->max_memory_bytes,
                                so->slab_slices, 1, mesh, &S);
    if (st != PM_STATUS_OK && st != PM_STATUS_TRUNCATED) {
        pm_mesh_free(ctx, mesh);
        return st;
    }
    mesh->timings.extract_ms = pmi_now_ms() - t0;
    if (so->report) {
        pm_stream_report *R = so->report;
        memset(R, 0, sizeof *R);
        R->slabs = S.slabs;
        R->slab_slices = S.slab_slices;
        R->ghost_below = S.ghost_below;
        R->ghost_above = S.ghost_above;
        R->bytes_read = S.bytes_read;
        R->working_set_bytes =
            PMI_SLAB_GPU_WORKERS *
            pmi_slab_device_bytes(S.slab_slices, S.ghost_below + S.ghost_above,
                                  v.nx * v.ny * pm_sample_size(v.type), (uint64_t)v.nx * v.ny);
        R->read_ms = S.read_ms;
        R->walk_ms = S.piece_ms;
        R->copy_ms = S.upload_ms;
        R->gather_ms = S.merge_ms;
        R->mesh_bytes = (uint64_t)mesh->num_vertices * (mesh->normals ? 24u : 12u) +
                        (mesh->indices ? (uint64_t)mesh->num_triangles * 12u : 0u);
    }
    pmi_slab_report_words(opt->report, ctx->backend->name, "stream", "slabs", &S);
    return st;
}

pm_status pm_isosurface_stream(pm_context *ctx, const pm_volume_source *source, double iso,
                               const pm_isosurface_options *options,
                               const pm_stream_options *stream, pm_mesh *mesh)
{
    pmi_clear_error();
    if (!ctx || !mesh || !source)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_stream: NULL context, source or mesh");
    memset(mesh, 0, sizeof *mesh);
    pm_isosurface_options opt;
    pm_stream_options so;
    pm_status st = stream_options(options, stream, &opt, &so);
    if (st != PM_STATUS_OK) return st;
    pm_stream_report R;
    memset(&R, 0, sizeof R);
    if (so.report) memset(so.report, 0, sizeof *so.report);
    if (opt.report) {
        opt.report->path[0] = 0;
        for (int i = 0; i < 4; i++) {
            opt.report->stage_ms[i] = 0.0;
            opt.report->stage_names[i] = NULL;
        }
    }
    if (!(iso == iso) || iso > 1.7976931348623157e308 || iso < -1.7976931348623157e308)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_stream: iso value is not finite");
    pm_volume view;
    if ((st = stream_volume(source, &view)) != PM_STATUS_OK) return st;
    if (ctx->backend->free_bytes) return stream_pieces(ctx, source, &view, iso, &opt, &so, mesh);
    unsigned hooks;
    if ((st = pmi_hooks(&hooks)) != PM_STATUS_OK) return st;
    const int avx2 = pmi_cpu_mc_avx2(hooks);
    const double t_start = pmi_now_ms();

    /* The plan: slab thickness from the limit; the fixed part of the
     * working set is the walk's ring per thread (88 bytes per 64 points of
     * a slice row: 3 bit slices, 2 x (3 masks + 1 id); and 12 rows of nx
     * 32-bit vertex ids, 48 bytes per point of a row) and the source's. */
    const size_t es = pm_sample_size(view.type), sb = view.slice_stride * es;
    const size_t glo = opt.normals != PM_NORMALS_NONE ? 1 : 0;
    const size_t threads = (size_t)(ctx->num_threads > 0 ? ctx->num_threads : 1);
    const size_t ring =
        (11 * sizeof(uint64_t) * ((view.nx + 63) / 64) * view.ny + 48 * view.nx) * threads;
    size_t fixed = ring + source->buffer_bytes, T = 0;
    uint64_t working = 0;
    if ((st = stream_plan(&view, &so, fixed, glo, &T, &working)) != PM_STATUS_OK) return st;
    const size_t cap = T + glo + MC_GHOST_ABOVE < view.nz ? T + glo + MC_GHOST_ABOVE : view.nz;
    unsigned char *buf = pmi_alloc_huge(cap * sb);
    if (!buf)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface_stream: no memory for the slab buffer (%zu slices of %zu "
                         "bytes)",
                         cap, sb);
    R.slab_slices = T;
    R.ghost_below = glo;
    R.ghost_above = MC_GHOST_ABOVE;
    R.working_set_bytes = working;

    /* The walk builds the indexed mesh; a soup is gathered from it at the
     * end (as in memory), so it grows in host memory then. */
    const int soup = opt.mode == PM_MESH_SOUP;
    pm_isosurface_options wopt = opt;
    wopt.mode = PM_MESH_INDEXED;
    pmi_mc_append A;
    memset(&A, 0, sizeof A);
    A.want_normals = opt.normals != PM_NORMALS_NONE;
    A.grow = soup || !opt.out_positions;
    if (!A.grow) {
        A.positions = opt.out_positions;
        A.normals = A.want_normals ? opt.out_normals : NULL;
        A.indices = opt.out_indices;
        A.vertex_limit = opt.vertex_capacity;
        A.tri_limit = opt.out_indices ? opt.triangle_capacity : 0;
    }

    size_t wlo = 0, whi = 0; /* slices in the buffer: [wlo, whi) */
    for (size_t k0 = 0; k0 < view.nz && st == PM_STATUS_OK;) {
        const size_t k1 = view.nz - k0 > T ? k0 + T : view.nz;
        const size_t lo = k0 > glo ? k0 - glo : 0;
        const size_t hi = view.nz - k1 > MC_GHOST_ABOVE ? k1 + MC_GHOST_ABOVE : view.nz;
        /* Keep the slices already read (the ghosts), read the rest. */
        size_t keep = whi > lo ? whi - lo : 0;
        if (keep && lo != wlo) memmove(buf, buf + (lo - wlo) * sb, keep * sb);
        const size_t from = lo + keep;
        if (from < hi) st = stream_read(source, from, hi, buf + keep * sb, &R, sb);
        if (st != PM_STATUS_OK) break;
        wlo = lo;
        whi = hi;
        /* Where slice 0 would be: the kernels index samples globally and
         * read only slices [lo, hi). Computed on integers: the pointer
         * itself lies outside the buffer. */
        view.data = (const void *)((uintptr_t)buf - (uintptr_t)lo * sb);
        st = pmi_mc_slab_append(ctx, &view, iso, &wopt, avx2, k0, k1, &A, &R.walk_ms, &R.copy_ms);
        R.slabs++;
        k0 = k1;
    }
    free(buf);
    R.staging_bytes = A.staging_peak_bytes;

    if (st == PM_STATUS_OK) {
        if (soup) {
            double t0 = pmi_now_ms();
            st = stream_gather(ctx, &opt, &A, mesh);
            R.gather_ms = pmi_now_ms() - t0;
        } else if (A.grow) {
            stream_hand_over(&A, &opt, mesh);
        } else {
            pmi_mesh_dest D;
            st = pmi_mesh_prepare(ctx, &opt, 1, A.nv, A.nt, A.nact, mesh, &D);
        }
    }
    append_free(&A);
    if (st != PM_STATUS_OK && st != PM_STATUS_TRUNCATED) {
        pm_mesh_free(ctx, mesh);
        return st;
    }
    R.mesh_bytes = (uint64_t)mesh->num_vertices * (mesh->normals ? 24u : 12u) +
                   (mesh->indices ? (uint64_t)mesh->num_triangles * 12u : 0u);
    mesh->timings.extract_ms = pmi_now_ms() - t_start;
    if (so.report) *so.report = R;
    if (opt.report) {
        char w[32];
        pmi_report_path(opt.report, "backend", "cpu");
        pmi_report_path(opt.report, "extract", "slab");
        pmi_report_path(opt.report, "simd", avx2 ? "avx2" : "scalar");
        pmi_report_path(opt.report, "stream", "slabs");
        snprintf(w, sizeof w, "%zu", R.slabs);
        pmi_report_path(opt.report, "slabs", w);
        snprintf(w, sizeof w, "%zu", R.slab_slices);
        pmi_report_path(opt.report, "thickness", w);
        snprintf(w, sizeof w, "%llu", (unsigned long long)R.bytes_read);
        pmi_report_path(opt.report, "read_bytes", w);
        if (soup) pmi_report_path(opt.report, "soup", "gather");
        pmi_report_stage(opt.report, 0, "read", R.read_ms);
        pmi_report_stage(opt.report, 1, "walk", R.walk_ms);
        pmi_report_stage(opt.report, 2, "copy", R.copy_ms);
        if (soup) pmi_report_stage(opt.report, 3, "gather", R.gather_ms);
    }
    return st;
}
