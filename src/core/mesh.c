/* Public entry points for volumes, meshes and fields: option resolution
 * (zeroed structs mean defaults), volume validation with checked sizes,
 * then dispatch to the context's backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
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

pm_status pm_field_compute(pm_context *ctx, const float *xyz, size_t n,
                           const pm_field_params *params, pm_field *out)
{
    pmi_clear_error();
    if (!ctx || !out || !params)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute: NULL argument");
    memset(out, 0, sizeof *out);
    size_t b;
    if (!pmi_mul3_size(n, 3, sizeof(float), &b))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_field_compute: %zu points overflow", n);
    if (n && !xyz) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_field_compute: xyz is NULL");
    pm_field_params p;
    memset(&p, 0, sizeof p);
    size_t sz = params->struct_size ? params->struct_size : sizeof p;
    memcpy(&p, params, sz < sizeof p ? sz : sizeof p);
    p.struct_size = sizeof p;
    if (p.smoothing_length == 0) p.smoothing_length = 2.0;
    if (p.cube_size == 0) p.cube_size = 0.5;
    if (p.iso == 0) p.iso = 0.6;
    if (p.rest_density == 0) p.rest_density = 1000.0;
    if (p.blur_steps == 0) p.blur_steps = 2;
    if (p.blur_steps < 0) p.blur_steps = 0;
    if (p.max_memory_bytes == 0) p.max_memory_bytes = (size_t)(pmi_total_ram_bytes() / 2);
    if (!(p.radius > 0) || !isfinite(p.radius) || !(p.smoothing_length > 0) || !(p.cube_size > 0) ||
        !isfinite(p.iso) || !(p.rest_density > 0) ||
        (p.method != PM_FIELD_SPH && p.method != PM_FIELD_BLUR))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_field_compute: radius, smoothing length, cube size and rest "
                         "density must be positive and finite");
    if (p.use_aabb)
        for (int a = 0; a < 3; a++)
            if (!(p.aabb_min[a] < p.aabb_max[a]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "pm_field_compute: aabb min must be below max on every axis");
    if (!ctx->backend->field_compute)
        return pmi_error(PM_STATUS_UNSUPPORTED, "pm_field_compute: not supported on the %s backend",
                         ctx->backend->name);
    return ctx->backend->field_compute(ctx, xyz, n, &p, out);
}

void pm_field_free(pm_context *ctx, pm_field *field)
{
    if (!field) return;
    pm_free(ctx, (void *)field->volume.data);
    memset(field, 0, sizeof *field);
}
