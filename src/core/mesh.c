/* Public entry points for volumes, meshes and fields: option resolution
 * (zeroed structs mean defaults), volume validation with checked sizes,
 * then dispatch to the context's backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/field_rule.h"
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

/* The arguments of pm_isosurface and pm_isosurface_async, checked and
 * resolved (volume strides and spacing, options with defaults). */
static pm_status isosurface_args(const char *fn, pm_context *ctx, const pm_volume *volume, double iso,
                                 const pm_isosurface_options *options, pm_volume *vol,
                                 pm_isosurface_options *opt)
{
    pm_status s = pmi_volume_resolve(volume, vol);
    if (s != PM_STATUS_OK) return s;
    if (!isfinite(iso)) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: iso value is not finite", fn);
    memset(opt, 0, sizeof *opt);
    if (options) {
        size_t sz = options->struct_size ? options->struct_size : sizeof *opt;
        memcpy(opt, options, sz < sizeof *opt ? sz : sizeof *opt);
    }
    opt->struct_size = sizeof *opt;
    if (opt->normals == PM_NORMALS_DEFAULT) opt->normals = PM_NORMALS_CENTRAL;
    if (opt->normals < PM_NORMALS_DEFAULT || opt->normals > PM_NORMALS_SOBEL ||
        (opt->mode != PM_MESH_INDEXED && opt->mode != PM_MESH_SOUP))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: bad normals or mode", fn);
    if (!ctx->backend->isosurface)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: not supported on the %s backend", fn,
                         ctx->backend->name);
    return PM_STATUS_OK;
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
    double t0 = pmi_now_ms();
    s = ctx->backend->isosurface(ctx, &vol, iso, &opt, mesh);
    mesh->timings.extract_ms = pmi_now_ms() - t0;
    return s;
}

pm_status pm_isosurface_async(pm_context *ctx, const pm_volume *volume, double iso,
                              const pm_isosurface_options *options, uint64_t *counts_ctx)
{
    pmi_clear_error();
    if (!ctx || !counts_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_isosurface_async: NULL context or counts_ctx");
    pm_volume vol;
    pm_isosurface_options opt;
    pm_status s = isosurface_args("pm_isosurface_async", ctx, volume, iso, options, &vol, &opt);
    if (s != PM_STATUS_OK) return s;
    if (!opt.positions)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_isosurface_async: options->positions (the caller's vertex buffer) is NULL");
    opt.output_in_context_memory = 1;
    if (ctx->backend->isosurface_async) return ctx->backend->isosurface_async(ctx, &vol, iso, &opt, counts_ctx);
    /* Synchronous backends (context memory is host memory): the mesh is
     * written where it fits, as pm_isosurface does. */
    pm_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    s = ctx->backend->isosurface(ctx, &vol, iso, &opt, &mesh);
    if (s != PM_STATUS_OK && s != PM_STATUS_TRUNCATED) return s;
    counts_ctx[0] = mesh.num_vertices;
    counts_ctx[1] = mesh.num_triangles;
    counts_ctx[2] = mesh.active_cells;
    counts_ctx[3] = s == PM_STATUS_TRUNCATED ? PM_ISOSURFACE_DOES_NOT_FIT : 0;
    pm_mesh_free(ctx, &mesh);
    pmi_clear_error();
    return PM_STATUS_OK;
}

void pm_mesh_free(pm_context *ctx, pm_mesh *mesh)
{
    if (!mesh) return;
    if (mesh->owns_arrays) {
        if (mesh->in_context_memory) {
            pm_free(ctx, mesh->positions);
            pm_free(ctx, mesh->normals);
            pm_free(ctx, mesh->indices);
        } else {
            free(mesh->positions);
            free(mesh->normals);
            free(mesh->indices);
        }
    }
    memset(mesh, 0, sizeof *mesh);
}

/* Field parameters with their defaults filled in, checked. */
static pm_status field_params(const char *fn, const pm_field_params *params, pm_field_params *p)
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
    if (!(p->radius > 0) || !isfinite(p->radius) || !(p->smoothing_length > 0) || !(p->cube_size > 0) ||
        !isfinite(p->iso) || !(p->rest_density > 0) ||
        (p->method != PM_FIELD_SPH && p->method != PM_FIELD_BLUR))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: radius, smoothing length, cube size and rest "
                         "density must be positive and finite",
                         fn);
    if (p->use_aabb)
        for (int a = 0; a < 3; a++)
            if (!(p->aabb_min[a] < p->aabb_max[a]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: aabb min must be below max on every axis", fn);
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
    pm_status s = field_params(fn, params, p);
    if (s != PM_STATUS_OK) return s;
    if (!ctx->backend->field_compute)
        return pmi_error(PM_STATUS_UNSUPPORTED, "%s: not supported on the %s backend", fn, ctx->backend->name);
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
    return ctx->backend->field_compute(ctx, xyz, n, &p, out);
}

pm_status pm_field_grid_for_box(const pm_field_params *params, const double bmin[3], const double bmax[3],
                                pm_field_grid *grid)
{
    pmi_clear_error();
    if (!params || !bmin || !bmax || !grid)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_grid_for_box: NULL argument");
    pm_field_params p;
    pm_status s = field_params("pm_field_grid_for_box", params, &p);
    if (s != PM_STATUS_OK) return s;
    for (int a = 0; a < 3; a++)
        if (!isfinite(bmin[a]) || !isfinite(bmax[a]) || !(bmin[a] <= bmax[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_field_grid_for_box: the box must be finite with min <= max on every axis");
    const pmi_field_rule f = pmi_field_rule_of(&p);
    double lo[3], dims[3];
    s = pmi_field_extent("pm_field_grid_for_box", &f, bmin, bmax, lo, dims);
    if (s != PM_STATUS_OK) return s;
    for (int a = 0; a < 3; a++) {
        if (!(dims[a] < (double)SIZE_MAX))
            return pmi_error(PM_STATUS_OVERFLOW, "pm_field_grid_for_box: %.0f points on axis %d", dims[a], a);
        grid->lo[a] = (int64_t)lo[a];
        grid->dims[a] = (size_t)dims[a];
    }
    return PM_STATUS_OK;
}

/* The CPU's pm_field_compute_async: the field of pm_field_compute copied
 * into the caller's lattice (zero where that field has no points; its
 * lattice is the global one, so points line up exactly). */
static pm_status field_into_grid(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *p,
                                 const pm_field_grid *grid, float *out, uint64_t *status)
{
    size_t points;
    if (!pmi_mul3_size(grid->dims[0], grid->dims[1], grid->dims[2], &points))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute_async: grid size overflows");
    status[0] = 0;
    status[1] = UINT64_MAX;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const float *q = xyz + 3 * i;
        if (!isfinite(q[0]) || !isfinite(q[1]) || !isfinite(q[2])) {
            status[1] = i; /* the field is unspecified: left as it is */
            return PM_STATUS_OK;
        }
        kept += !p->use_aabb || (q[0] >= p->aabb_min[0] && q[0] <= p->aabb_max[0] && q[1] >= p->aabb_min[1] &&
                                 q[1] <= p->aabb_max[1] && q[2] >= p->aabb_min[2] && q[2] <= p->aabb_max[2]);
    }
    memset(out, 0, points * sizeof *out);
    if (kept == 0) return PM_STATUS_OK;
    pm_field f;
    pm_status s = ctx->backend->field_compute(ctx, xyz, n, p, &f);
    if (s != PM_STATUS_OK) return s;
    const pm_volume *v = &f.volume;
    const float *src = (const float *)v->data;
    int64_t off[3]; /* the caller's point 0 in the field's lattice */
    const size_t fd[3] = {v->nx, v->ny, v->nz};
    for (int a = 0; a < 3; a++) off[a] = grid->lo[a] - (int64_t)llround(v->origin[a] / v->spacing[a]);
    for (size_t k = 0; k < grid->dims[2]; k++) {
        const int64_t sk = off[2] + (int64_t)k;
        if (sk < 0 || sk >= (int64_t)fd[2]) continue;
        for (size_t j = 0; j < grid->dims[1]; j++) {
            const int64_t sj = off[1] + (int64_t)j;
            if (sj < 0 || sj >= (int64_t)fd[1]) continue;
            /* Columns i with 0 <= off[0] + i < nx. */
            const int64_t i0 = off[0] < 0 ? -off[0] : 0;
            const int64_t nxs = (int64_t)fd[0] - off[0];
            const int64_t i1 = nxs < (int64_t)grid->dims[0] ? nxs : (int64_t)grid->dims[0];
            if (i1 > i0)
                memcpy(out + (k * grid->dims[1] + j) * grid->dims[0] + (size_t)i0,
                       src + ((size_t)sk * fd[1] + (size_t)sj) * fd[0] + (size_t)(off[0] + i0),
                       (size_t)(i1 - i0) * sizeof *out);
        }
    }
    status[0] = f.particles_used;
    pm_field_free(ctx, &f);
    return PM_STATUS_OK;
}

pm_status pm_field_compute_async(pm_context *ctx, const float *xyz, size_t n, const pm_field_params *params,
                                 const pm_field_grid *grid, float *field_ctx, uint64_t *status_ctx)
{
    pmi_clear_error();
    if (!ctx || !params || !grid || !field_ctx || !status_ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute_async: NULL argument");
    pm_field_params p;
    pm_status s = field_args("pm_field_compute_async", ctx, xyz, n, params, &p);
    if (s != PM_STATUS_OK) return s;
    if (n == 0) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute_async: no particles");
    for (int a = 0; a < 3; a++)
        if (grid->dims[a] < 2)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_field_compute_async: the grid has %zu points on axis %d, at least 2 needed",
                             grid->dims[a], a);
    if (ctx->backend->field_compute_async)
        return ctx->backend->field_compute_async(ctx, xyz, n, &p, grid, field_ctx, status_ctx);
    return field_into_grid(ctx, xyz, n, &p, grid, field_ctx, status_ctx);
}

void pm_field_free(pm_context *ctx, pm_field *field)
{
    if (!field) return;
    pm_free(ctx, (void *)field->volume.data);
    memset(field, 0, sizeof *field);
}
