/* Public entry points for volumes, meshes and fields: option resolution
 * (zeroed structs mean defaults), volume validation with checked sizes,
 * then dispatch to the context's backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/backend.h"
#include "core/hooks.h"
#include "core/slab_pieces.h"
#include "core/field_rule.h"
#include "core/mesh_out.h"
#include "core/util.h"

size_t pm_sample_size(pm_sample_type t)
{
    switch (t) {
    case PM_SAMPLE_U8: return 1;
    case PM_SAMPLE_U16: return 2;
    case PM_SAMPLE_I16: return 2;
    case PM_SAMPLE_F32: return 4;
    case PM_SAMPLE_F64: return 8;
    }
    return 0;
}

const char *pm_sample_type_string(pm_sample_type t)
{
    switch (t) {
    case PM_SAMPLE_U8: return "u8";
    case PM_SAMPLE_U16: return "u16";
    case PM_SAMPLE_I16: return "i16";
    case PM_SAMPLE_F32: return "f32";
    case PM_SAMPLE_F64: return "f64";
    }
    return "unknown";
}

pm_status pmi_volume_resolve(const pm_volume *in, pm_volume *out)
{
    if (!in) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "volume is NULL");
    *out = *in;
    if (pm_sample_size(in->type) == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "volume: unknown sample type %d",
                         (int)in->type);
    if (in->nx < 2 || in->ny < 2 || in->nz < 2)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "volume: dims %zu x %zu x %zu, each must be at least 2", in->nx, in->ny,
                         in->nz);
    if (!in->data) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "volume: data is NULL");
    if (out->row_stride == 0) out->row_stride = in->nx;
    if (out->row_stride < in->nx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "volume: row_stride %zu < nx %zu",
                         out->row_stride, in->nx);
    if (out->slice_stride == 0 && !pmi_mul_size(out->row_stride, in->ny, &out->slice_stride))
        return pmi_error(PM_STATUS_OVERFLOW, "volume: slice size overflows");
    if (out->slice_stride < out->row_stride * (in->ny - 1) + in->nx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "volume: slice_stride %zu too small",
                         out->slice_stride);
    size_t span, bytes;
    if (!pmi_mul_size(in->nz - 1, out->slice_stride, &span) ||
        !pmi_add_size(span, out->row_stride * (in->ny - 1) + in->nx, &span) ||
        !pmi_mul_size(span, pm_sample_size(in->type), &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "volume: %zu x %zu x %zu samples overflow size_t",
                         in->nx, in->ny, in->nz);
    for (int a = 0; a < 3; a++) {
        if (out->spacing[a] == 0.0) out->spacing[a] = 1.0;
        if (!isfinite(out->spacing[a]) || out->spacing[a] < 0.0 || !isfinite(out->origin[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "volume: spacing and origin must be finite, spacing > 0");
    }
    return PM_STATUS_OK;
}

/* A report before a call: nothing taken, no stage. */
static void report_reset(pm_isosurface_report *r)
{
    if (!r) return;
    r->path[0] = 0;
    for (int i = 0; i < 4; i++) {
        r->stage_ms[i] = 0.0;
        r->stage_names[i] = NULL;
    }
}

pm_status pmi_isosurface_options_resolve(const char *fn, const pm_isosurface_options *options,
                                         pm_isosurface_options *opt)
{
    memset(opt, 0, sizeof *opt);
    if (options) {
        size_t sz = options->struct_size ? options->struct_size : sizeof *opt;
        memcpy(opt, options, sz < sizeof *opt ? sz : sizeof *opt);
    }
    opt->struct_size = sizeof *opt;
    if (opt->normals == PM_NORMALS_DEFAULT) opt->normals = PM_NORMALS_CENTRAL;
    if (opt->inside == PM_INSIDE_DEFAULT) opt->inside = PM_INSIDE_ABOVE;
    if (opt->inside != PM_INSIDE_ABOVE && opt->inside != PM_INSIDE_BELOW)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: bad inside %d (expected PM_INSIDE_ABOVE or BELOW)", fn,
                         (int)opt->inside);
    if (opt->normals < PM_NORMALS_DEFAULT || opt->normals > PM_NORMALS_SOBEL ||
        (opt->mode != PM_MESH_INDEXED && opt->mode != PM_MESH_SOUP))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: bad normals or mode", fn);
    return PM_STATUS_OK;
}

/* The arguments of pm_isosurface and pm_isosurface_async, checked and
 * resolved (volume strides and spacing, options with defaults). */
static pm_status isosurface_args(const char *fn, pm_context *ctx, const pm_volume *volume,
                                 double iso, const pm_isosurface_options *options, pm_volume *vol,
                                 pm_isosurface_options *opt)
{
    pm_status s = pmi_volume_resolve(volume, vol);
    if (s != PM_STATUS_OK) return s;
    if (!isfinite(iso))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: iso value is not finite", fn);
    if ((s = pmi_isosurface_options_resolve(fn, options, opt)) != PM_STATUS_OK) return s;
    if (!ctx->backend->isosurface)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: not supported on the %s backend", fn,
                         ctx->backend->name);
    /* PM_OUTPUT_ANY: caller buffers as 1; a CPU context's memory is the
     * host's. The paths that assemble the mesh on the host make it 0. */
    if (opt->output_in_context_memory == PM_OUTPUT_ANY)
        opt->output_in_context_memory = opt->out_positions         ? 1
                                        : ctx->backend->free_bytes ? PM_OUTPUT_ANY
                                                                   : 0;
    return PM_STATUS_OK;
}

/* Host memory given to a backend that cannot read it (a CUDA context):
 * copied into context memory for the call (*staged, freed by the caller
 * through the backend), so that a program written for the CPU works
 * unchanged on a GPU machine. Memory the backend can read is used in place. */
static pm_status stage_input(pm_context *ctx, const char *fn, const void *p, size_t bytes, void **staged)
{
    *staged = NULL;
    if (!p || !bytes || pmi_ctx_accessible(ctx, p)) return PM_STATUS_OK;
    pm_status s = ctx->backend->alloc(ctx, bytes, staged);
    if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, *staged, p, bytes);
    if (s != PM_STATUS_OK) {
        if (*staged) ctx->backend->free(ctx, *staged);
        *staged = NULL;
        return pmi_error(s, "%s: copying %zu bytes of host input into %s memory failed: %s", fn, bytes,
                         ctx->backend->name, pm_last_error());
    }
    return PM_STATUS_OK;
}

/* Bytes a resolved volume's samples span (strides included). */
static size_t volume_span_bytes(const pm_volume *v)
{
    return ((v->nz - 1) * v->slice_stride + (v->ny - 1) * v->row_stride + v->nx) * pm_sample_size(v->type);
}

/* Caller buffers in context memory must be readable by the backend. */
static pm_status check_buffers(pm_context *ctx, const char *fn, const pm_isosurface_options *opt)
{
    const void *b[3] = {opt->out_positions, opt->out_normals, opt->out_indices};
    static const char *const names[3] = {"out_positions", "out_normals", "out_indices"};
    for (int i = 0; i < 3; i++)
        if (b[i] && !pmi_ctx_accessible(ctx, b[i]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: options->%s is host memory, which the %s backend cannot write (give "
                             "device, managed or mapped pinned memory, or output_in_context_memory = 0)",
                             fn, names[i], ctx->backend->name);
    return PM_STATUS_OK;
}

/* The volume (host memory) as z-slab pieces on the contexts
 * (core/slab_pieces.c), reported as such. */
static pm_status isosurface_slabs(pm_context *const *ctxs, int n, const pm_volume *vol,
                                  double iso, const pm_isosurface_options *opt, size_t min_slabs,
                                  pm_mesh *mesh, double t0)
{
    pmi_slab_report S;
    pm_status s = pmi_slab_run(ctxs, n, vol, NULL, iso, opt, 0, 0, min_slabs, mesh, &S);
    if (s != PM_STATUS_OK && s != PM_STATUS_TRUNCATED) return s;
    mesh->timings.extract_ms = pmi_now_ms() - t0;
    pmi_slab_report_words(opt->report, ctxs[0]->backend->name, "extract", "slabs", &S);
    if (opt->report) {
        char w[16];
        snprintf(w, sizeof w, "%d", n);
        pmi_report_path(opt->report, "contexts", w);
    }
    return s;
}

pm_status pm_isosurface(pm_context *ctx, const pm_volume *volume, double iso,
                        const pm_isosurface_options *options, pm_mesh *mesh)
{
    pmi_clear_error();
    if (!ctx || !mesh)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_isosurface: NULL context or mesh");
    memset(mesh, 0, sizeof *mesh);
    pm_volume vol;
    pm_isosurface_options opt;
    pm_status s = isosurface_args("pm_isosurface", ctx, volume, iso, options, &vol, &opt);
    if (s != PM_STATUS_OK) return s;
    if (opt.output_in_context_memory && (s = check_buffers(ctx, "pm_isosurface", &opt)) != PM_STATUS_OK)
        return s;
    report_reset(opt.report);
    double t0 = pmi_now_ms();
    void *staged;
    /* Only a host volume on a GPU may take the slab path (or its hook). */
    const int host_on_gpu = ctx->backend->free_bytes && !pmi_ctx_accessible(ctx, vol.data);
    unsigned hooks = 0;
    if (host_on_gpu && (s = pmi_hooks(&hooks)) != PM_STATUS_OK) return s;
    if (host_on_gpu && (hooks & PMI_HOOK_SLABS)) {
        s = PM_STATUS_OUT_OF_MEMORY; /* as if the volume did not fit */
    } else {
        s = stage_input(ctx, "pm_isosurface", vol.data, volume_span_bytes(&vol), &staged);
        if (s != PM_STATUS_OK && !(s == PM_STATUS_OUT_OF_MEMORY && host_on_gpu)) return s;
    }
    if (s == PM_STATUS_OUT_OF_MEMORY) {
        /* A host volume larger than the GPU's memory: streamed through it
         * in slabs (docs/scale.md, "Slabs on devices"); the hook cuts five. */
        pmi_clear_error();
        if (opt.output_in_context_memory == PM_OUTPUT_ANY) opt.output_in_context_memory = 0;
        return isosurface_slabs(&ctx, 1, &vol, iso, &opt, (hooks & PMI_HOOK_SLABS) ? 5 : 1, mesh,
                                t0);
    }
    if (opt.output_in_context_memory == PM_OUTPUT_ANY) opt.output_in_context_memory = 1;
    if (staged) vol.data = staged;
    s = ctx->backend->isosurface(ctx, &vol, iso, &opt, mesh);
    if (staged) ctx->backend->free(ctx, staged);
    mesh->timings.extract_ms = pmi_now_ms() - t0;
    return s;
}

pm_status pm_isosurface_multi(pm_context *const *contexts, int count, const pm_volume *volume,
                              double iso, const pm_isosurface_options *options, pm_mesh *mesh)
{
    static const char fn[] = "pm_isosurface_multi";
    pmi_clear_error();
    if (!mesh) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL mesh", fn);
    memset(mesh, 0, sizeof *mesh);
    pm_status s = pmi_contexts_check(fn, contexts, count, 0);
    if (s != PM_STATUS_OK) return s;
    pm_volume vol;
    pm_isosurface_options opt;
    s = isosurface_args(fn, contexts[0], volume, iso, options, &vol, &opt);
    if (s != PM_STATUS_OK) return s;
    if (opt.output_in_context_memory && (s = check_buffers(contexts[0], fn, &opt)) != PM_STATUS_OK)
        return s;
    for (int i = 0; i < count; i++)
        if (!contexts[i]->backend->isosurface_piece)
            return pmi_error(PM_STATUS_UNSUPPORTED, "%s: context %d: no mesh pieces on the %s backend",
                             fn, i, contexts[i]->backend->name);
    if (opt.output_in_context_memory == PM_OUTPUT_ANY)
        opt.output_in_context_memory = 0; /* the slabs are merged on the host */
    report_reset(opt.report);
    /* Two slabs per worker (a GPU has PMI_SLAB_GPU_WORKERS), so that
     * copies overlap. */
    int workers = 0;
    for (int i = 0; i < count; i++)
        workers += contexts[i]->backend->free_bytes ? PMI_SLAB_GPU_WORKERS : 1;
    return isosurface_slabs(contexts, count, &vol, iso, &opt, (size_t)(2 * workers), mesh,
                            pmi_now_ms());
}

pm_status pm_isosurface_async(pm_context *ctx, const pm_volume *volume, double iso,
                              const pm_isosurface_options *options,
                              pm_isosurface_counts *counts_ctx)
{
    pmi_clear_error();
    if (!ctx || !counts_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_async: NULL context or counts_ctx");
    pm_volume vol;
    pm_isosurface_options opt;
    pm_status s = isosurface_args("pm_isosurface_async", ctx, volume, iso, options, &vol, &opt);
    if (s != PM_STATUS_OK) return s;
    if (!opt.out_positions)
        return pmi_error(
            PM_STATUS_INVALID_ARGUMENT,
            "pm_isosurface_async: options->out_positions (the caller's vertex buffer) is NULL");
    opt.output_in_context_memory = 1;
    if ((s = check_buffers(ctx, "pm_isosurface_async", &opt)) != PM_STATUS_OK) return s;
    if (!pmi_ctx_accessible(ctx, vol.data) || !pmi_ctx_accessible(ctx, counts_ctx))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_async: the volume or counts_ctx is host memory, which the %s "
                         "backend cannot read without waiting (pm_isosurface copies host volumes itself)",
                         ctx->backend->name);
    if (!ctx->backend->isosurface_async)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "pm_isosurface_async: not supported on the %s backend",
                         ctx->backend->name);
    report_reset(opt.report);
    return ctx->backend->isosurface_async(ctx, &vol, iso, &opt, counts_ctx);
}

void pmi_mesh_limits(int indexed, uint64_t nv, uint64_t nt, uint64_t vcap, uint64_t tcap,
                     uint64_t *vertex_limit, uint64_t *tri_limit)
{
    uint64_t t = nt < tcap ? nt : tcap;
    if (indexed) {
        *vertex_limit = nv < vcap ? nv : vcap;
        *tri_limit = t;
    } else {
        if (t > vcap / 3) t = vcap / 3;
        *vertex_limit = 3 * t;
        *tri_limit = t;
    }
}

pm_status pmi_mesh_index_overflow(uint64_t nv)
{
    return pmi_error(
        PM_STATUS_OVERFLOW,
        "pm_isosurface: %llu vertices do not fit the 32-bit indices of an indexed mesh",
        (unsigned long long)nv);
}

void *pmi_alloc_huge(size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= huge / 2) {
        size_t rounded = (bytes + huge - 1) & ~(huge - 1);
        void *p = aligned_alloc(huge, rounded);
        if (p) madvise(p, rounded, MADV_HUGEPAGE); /* a hint; failure is harmless */
        return p;
    }
#endif
    return malloc(bytes ? bytes : 1);
}

/* One array of the mesh: host memory or context memory. */
static pm_status mesh_array(pm_context *ctx, int in_context, uint64_t count, size_t elem,
                            void **out)
{
    size_t bytes;
    if (count > SIZE_MAX || !pmi_mul_size((size_t)count, elem, &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: mesh size overflows");
    if (in_context)
        return ctx->backend->mesh_array_alloc ? ctx->backend->mesh_array_alloc(ctx, bytes, out)
                                              : ctx->backend->alloc(ctx, bytes, out);
    *out = pmi_host_array_get(ctx, bytes);
    if (!*out)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "pm_isosurface: no memory for a mesh array of %zu bytes", bytes);
    return PM_STATUS_OK;
}

pm_status pmi_mesh_prepare(pm_context *ctx, const pm_isosurface_options *opt, int indexed,
                           uint64_t nv, uint64_t nt, uint64_t active_cells, pm_mesh *mesh,
                           pmi_mesh_dest *dest)
{
    memset(dest, 0, sizeof *dest);
    if (indexed && !pmi_mesh_indices_fit(nv)) return pmi_mesh_index_overflow(nv);
    if (nv > SIZE_MAX || nt > SIZE_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_isosurface: mesh size overflows");
    const int want_normals = opt->normals != PM_NORMALS_NONE;
    const int in_context = opt->output_in_context_memory != 0;
    pm_status s = PM_STATUS_OK;
    if (opt->out_positions) {
        /* The caller's buffers: write what fits, report the full counts. */
        dest->positions = opt->out_positions;
        dest->normals = want_normals ? opt->out_normals : NULL;
        dest->indices = indexed ? opt->out_indices : NULL;
        pmi_mesh_limits(indexed, nv, nt, opt->vertex_capacity, opt->triangle_capacity,
                        &dest->vertex_limit, &dest->tri_limit);
        if (indexed && !dest->indices) dest->tri_limit = 0;
        if (nv > opt->vertex_capacity || nt > opt->triangle_capacity)
            s = pmi_error(
                PM_STATUS_TRUNCATED,
                "pm_isosurface: %llu vertices / %llu triangles exceed the capacity %zu / %zu",
                (unsigned long long)nv, (unsigned long long)nt, opt->vertex_capacity,
                opt->triangle_capacity);
        mesh->owns_arrays = 0;
    } else {
        void *p = NULL, *n = NULL, *i = NULL;
        s = mesh_array(ctx, in_context, nv, 3 * sizeof(float), &p);
        if (s == PM_STATUS_OK && want_normals)
            s = mesh_array(ctx, in_context, nv, 3 * sizeof(float), &n);
        if (s == PM_STATUS_OK && indexed)
            s = mesh_array(ctx, in_context, nt, 3 * sizeof(uint32_t), &i);
        if (s != PM_STATUS_OK) {
            if (in_context) {
                pm_free(ctx, p);
                pm_free(ctx, n);
            } else {
                free(p);
                free(n);
            }
            memset(dest, 0, sizeof *dest);
            return s;
        }
        dest->positions = (float *)p;
        dest->normals = (float *)n;
        dest->indices = (uint32_t *)i;
        dest->vertex_limit = nv;
        dest->tri_limit = indexed ? nt : 0;
        mesh->owns_arrays = 1;
    }
    mesh->positions = dest->positions;
    mesh->normals = dest->normals;
    mesh->indices = dest->indices;
    mesh->num_vertices = (size_t)nv;
    mesh->num_triangles = (size_t)nt;
    mesh->active_cells = active_cells;
    mesh->in_context_memory = in_context;
    return s;
}

void pmi_report_path(pm_isosurface_report *report, const char *key, const char *value)
{
    if (!report) return;
    size_t len = strlen(report->path), room = sizeof report->path - len;
    snprintf(report->path + len, room, "%s%s=%s", len ? " " : "", key, value);
}

void pmi_report_stage(pm_isosurface_report *report, int i, const char *name, double ms)
{
    if (!report || i < 0 || i >= 4) return;
    report->stage_names[i] = name;
    report->stage_ms[i] = report->timed ? ms : 0.0;
}

void pm_mesh_free(pm_context *ctx, pm_mesh *mesh)
{
    if (!mesh) return;
    if (mesh->owns_arrays) {
        if (mesh->in_context_memory && ctx && ctx->backend->mesh_array_free) {
            ctx->backend->mesh_array_free(ctx, mesh->positions);
            ctx->backend->mesh_array_free(ctx, mesh->normals);
            ctx->backend->mesh_array_free(ctx, mesh->indices);
        } else if (mesh->in_context_memory) {
            pm_free(ctx, mesh->positions);
            pm_free(ctx, mesh->normals);
            pm_free(ctx, mesh->indices);
        } else {
            pmi_host_array_put(ctx, mesh->positions);
            pmi_host_array_put(ctx, mesh->normals);
            pmi_host_array_put(ctx, mesh->indices);
        }
    }
    memset(mesh, 0, sizeof *mesh);
}

/* Field parameters with their defaults filled in, checked (field_rule.h). */
pm_status pmi_field_params(const char *fn, const pm_field_params *params, pm_field_params *p)
{
    memset(p, 0, sizeof *p);
    size_t sz = params->struct_size ? params->struct_size : sizeof *p;
    memcpy(p, params, sz < sizeof *p ? sz : sizeof *p);
    p->struct_size = sizeof *p;
    if (p->smoothing_length == 0) p->smoothing_length = 2.0;
    if (p->cube_size == 0) p->cube_size = 0.5;
    if (p->iso == 0) p->iso = 0.6;
    if (p->rest_density == 0) p->rest_density = 1000.0;
    if (p->blur_steps == 0) p->blur_steps = 2;
    if (p->blur_steps < 0) p->blur_steps = 0;
    if (p->max_memory_bytes == 0) p->max_memory_bytes = (size_t)(pmi_total_ram_bytes() / 2);
    if (!(p->radius > 0) || !isfinite(p->radius) || !(p->smoothing_length > 0) ||
        !(p->cube_size > 0) || !isfinite(p->iso) || !(p->rest_density > 0) ||
        (p->method != PM_FIELD_SPH && p->method != PM_FIELD_BLUR))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: radius, smoothing length, cube size and rest "
                         "density must be positive and finite",
                         fn);
    if (p->use_aabb)
        for (int a = 0; a < 3; a++)
            if (!(p->aabb_min[a] < p->aabb_max[a]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "%s: aabb min must be below max on every axis", fn);
    return PM_STATUS_OK;
}

/* The arguments every field function shares. */
static pm_status field_args(const char *fn, pm_context *ctx, const float *xyz, size_t n,
                            const pm_field_params *params, pm_field_params *p)
{
    size_t b;
    if (!pmi_mul3_size(n, 3, sizeof(float), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu points overflow", fn, n);
    if (n && !xyz) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: xyz is NULL", fn);
    pm_status s = pmi_field_params(fn, params, p);
    if (s != PM_STATUS_OK) return s;
    if (!ctx->backend->field_compute)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: not supported on the %s backend", fn,
                         ctx->backend->name);
    return PM_STATUS_OK;
}

pm_status pm_field_compute(pm_context *ctx, const float *xyz, size_t n,
                           const pm_field_params *params, pm_field *out)
{
    pmi_clear_error();
    if (!ctx || !out || !params)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute: NULL argument");
    memset(out, 0, sizeof *out);
    pm_field_params p;
    pm_status s = field_args("pm_field_compute", ctx, xyz, n, params, &p);
    if (s != PM_STATUS_OK) return s;
    void *staged;
    s = stage_input(ctx, "pm_field_compute", xyz, n * 3 * sizeof(float), &staged);
    if (s != PM_STATUS_OK) return s;
    s = ctx->backend->field_compute(ctx, staged ? (const float *)staged : xyz, n, &p, out);
    if (staged) ctx->backend->free(ctx, staged);
    return s;
}

pm_status pm_field_grid_for_box(const pm_field_params *params, const double bmin[3],
                                const double bmax[3], pm_field_grid *grid)
{
    pmi_clear_error();
    if (!params || !bmin || !bmax || !grid)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_grid_for_box: NULL argument");
    pm_field_params p;
    pm_status s = pmi_field_params("pm_field_grid_for_box", params, &p);
    if (s != PM_STATUS_OK) return s;
    for (int a = 0; a < 3; a++)
        if (!isfinite(bmin[a]) || !isfinite(bmax[a]) || !(bmin[a] <= bmax[a]))
            return pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "pm_field_grid_for_box: the box must be finite with min <= max on every axis");
    const pmi_field_rule f = pmi_field_rule_of(&p);
    double lo[3], dims[3];
    s = pmi_field_extent("pm_field_grid_for_box", &f, bmin, bmax, lo, dims);
    if (s != PM_STATUS_OK) return s;
    for (int a = 0; a < 3; a++) {
        if (!(dims[a] < (double)SIZE_MAX))
            return pmi_error(PM_STATUS_OVERFLOW, "pm_field_grid_for_box: %.0f points on axis %d",
                             dims[a], a);
        grid->lo[a] = (int64_t)lo[a];
        grid->dims[a] = (size_t)dims[a];
    }
    return PM_STATUS_OK;
}

pm_status pm_field_compute_async(pm_context *ctx, const float *xyz, size_t n,
                                 const pm_field_params *params, const pm_field_grid *grid,
                                 float *field_ctx, pm_field_status *status_ctx)
{
    pmi_clear_error();
    if (!ctx || !params || !grid || !field_ctx || !status_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute_async: NULL argument");
    pm_field_params p;
    pm_status s = field_args("pm_field_compute_async", ctx, xyz, n, params, &p);
    if (s != PM_STATUS_OK) return s;
    if (n == 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute_async: no particles");
    for (int a = 0; a < 3; a++)
        if (grid->dims[a] < 2)
            return pmi_error(
                PM_STATUS_INVALID_ARGUMENT,
                "pm_field_compute_async: the grid has %zu points on axis %d, at least 2 needed",
                grid->dims[a], a);
    if (!ctx->backend->field_compute_async)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "pm_field_compute_async: not supported on the %s backend",
                         ctx->backend->name);
    if (!pmi_ctx_accessible(ctx, xyz) || !pmi_ctx_accessible(ctx, field_ctx) ||
        !pmi_ctx_accessible(ctx, status_ctx))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute_async: xyz, field_ctx or status_ctx is host memory, which the %s "
                         "backend cannot use without waiting (pm_field_compute copies host points itself)",
                         ctx->backend->name);
    return ctx->backend->field_compute_async(ctx, xyz, n, &p, grid, field_ctx, status_ctx);
}

void pm_field_free(pm_context *ctx, pm_field *field)
{
    if (!field) return;
    pm_free(ctx, (void *)field->volume.data);
    memset(field, 0, sizeof *field);
}
