/* Mesh post-processing, the public entry points (pyramesh.h, "Mesh
 * post-processing"; docs/splashsurf.md): argument checks, the mesh
 * brought to the host (in place when the mesh owns host arrays, else a
 * copy; a CUDA context downloads it), the CPU runner (src/cpu/smooth.c,
 * mesh_cleanup.c, components.c, decimate.c, mesh_check.c, quads.c,
 * sph_interp.c), and the result handed back in the mesh's own memory.
 * There are no CUDA runners yet: on a CUDA context the CPU code runs on a
 * host copy, so both backends give the same bytes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/util.h"
#include "cpu/post_cpu.h"

/* Whether the mesh's arrays are device memory (context memory of a
 * non-CPU context). */
static int on_device(const pm_context *ctx, const pm_mesh *mesh)
{
    return mesh->in_context_memory && ctx->device != PM_DEVICE_CPU;
}

/* The host view of a mesh. Read-only views of host meshes use the arrays
 * as they are; a writable view takes the arrays of a mesh that owns them
 * and copies otherwise. */
typedef struct view {
    pmi_hmesh h;
    int borrowed; /* h's arrays are the mesh's own */
} view;

static void view_drop(view *v)
{
    if (!v->borrowed) {
        free(v->h.pos);
        free(v->h.nrm);
        free(v->h.tri);
    }
    memset(v, 0, sizeof *v);
}

static pm_status begin(pm_context *ctx, const pm_mesh *mesh, const char *fn, int writable,
                       int need_normals, view *v)
{
    memset(v, 0, sizeof *v);
    if (!ctx || !mesh) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    if (!mesh->indices)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: needs an indexed mesh (a soup has no shared vertices)", fn);
    if ((mesh->num_vertices && !mesh->positions) || (need_normals && !mesh->normals))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the mesh has no %s", fn,
                         need_normals && !mesh->normals ? "normals" : "positions");
    if (mesh->num_vertices >= UINT32_MAX)
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %zu vertices: indices are 32-bit", fn,
                         mesh->num_vertices);
    size_t pb, tb;
    if (!pmi_mul3_size(mesh->num_vertices, 3, sizeof(float), &pb) ||
        !pmi_mul3_size(mesh->num_triangles, 3, sizeof(uint32_t), &tb))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: mesh size overflows", fn);
    v->h.nv = mesh->num_vertices;
    v->h.nt = mesh->num_triangles;
    const int dev = on_device(ctx, mesh);
    if (!dev && (!writable || mesh->owns_arrays)) {
        v->h.pos = mesh->positions;
        v->h.nrm = mesh->normals;
        v->h.tri = mesh->indices;
        v->borrowed = 1;
    } else {
        v->h.pos = malloc(pb ? pb : 1);
        v->h.tri = malloc(tb ? tb : 1);
        v->h.nrm = mesh->normals ? malloc(pb ? pb : 1) : NULL;
        if (!v->h.pos || !v->h.tri || (mesh->normals && !v->h.nrm)) {
            view_drop(v);
            return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for a copy of the mesh",
                             fn);
        }
        pm_status s = PM_STATUS_OK;
        if (dev) {
            s = ctx->backend->download(ctx, v->h.pos, mesh->positions, pb);
            if (s == PM_STATUS_OK) s = ctx->backend->download(ctx, v->h.tri, mesh->indices, tb);
            if (s == PM_STATUS_OK && mesh->normals)
                s = ctx->backend->download(ctx, v->h.nrm, mesh->normals, pb);
        } else {
            memcpy(v->h.pos, mesh->positions, pb);
            memcpy(v->h.tri, mesh->indices, tb);
            if (mesh->normals) memcpy(v->h.nrm, mesh->normals, pb);
        }
        if (s != PM_STATUS_OK) {
            view_drop(v);
            return s;
        }
    }
    /* Every index in range; the first offending triangle is named. */
    size_t bad = SIZE_MAX;
    const long long sc = (long long)(3 * v->h.nt);
    const uint32_t nv = (uint32_t)v->h.nv;
#pragma omp parallel for num_threads(ctx->num_threads) schedule(static) reduction(min : bad)
    for (long long c = 0; c < sc; c++)
        if (v->h.tri[c] >= nv && (size_t)c / 3 < bad) bad = (size_t)c / 3;
    if (bad != SIZE_MAX) {
        const uint32_t *t = v->h.tri + 3 * bad;
        pm_status s = pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                "%s: triangle %zu (%u %u %u) has a vertex index out of range "
                                "(%zu vertices)",
                                fn, bad, t[0], t[1], t[2], v->h.nv);
        view_drop(v);
        return s;
    }
    return PM_STATUS_OK;
}

/* Hands the processed view back to the mesh (see pyramesh.h). */
static pm_status finish(pm_context *ctx, pm_mesh *mesh, view *v, const char *fn)
{
    if (!on_device(ctx, mesh)) {
        if (!v->borrowed && mesh->owns_arrays) { /* cannot happen: owned host arrays are borrowed */
            free(mesh->positions);
            free(mesh->normals);
            free(mesh->indices);
        }
        mesh->positions = v->h.pos;
        mesh->normals = v->h.nrm;
        mesh->indices = v->h.tri;
        mesh->num_vertices = v->h.nv;
        mesh->num_triangles = v->h.nt;
        mesh->owns_arrays = 1;
        memset(v, 0, sizeof *v);
        return PM_STATUS_OK;
    }
    size_t pb = v->h.nv * 3 * sizeof(float), tb = v->h.nt * 3 * sizeof(uint32_t);
    void *pos = NULL, *nrm = NULL, *tri = NULL;
    pm_status s = ctx->backend->alloc(ctx, pb, &pos);
    if (s == PM_STATUS_OK) s = ctx->backend->alloc(ctx, tb, &tri);
    if (s == PM_STATUS_OK && v->h.nrm) s = ctx->backend->alloc(ctx, pb, &nrm);
    if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, pos, v->h.pos, pb);
    if (s == PM_STATUS_OK) s = ctx->backend->upload(ctx, tri, v->h.tri, tb);
    if (s == PM_STATUS_OK && nrm) s = ctx->backend->upload(ctx, nrm, v->h.nrm, pb);
    if (s != PM_STATUS_OK) {
        if (pos) ctx->backend->free(ctx, pos);
        if (tri) ctx->backend->free(ctx, tri);
        if (nrm) ctx->backend->free(ctx, nrm);
        view_drop(v);
        return pmi_error(s, "%s: could not copy the result back to the device: %s", fn,
                         pm_last_error());
    }
    if (mesh->owns_arrays) {
        if (mesh->positions) ctx->backend->free(ctx, mesh->positions);
        if (mesh->normals) ctx->backend->free(ctx, mesh->normals);
        if (mesh->indices) ctx->backend->free(ctx, mesh->indices);
    }
    mesh->positions = pos;
    mesh->normals = nrm;
    mesh->indices = tri;
    mesh->num_vertices = v->h.nv;
    mesh->num_triangles = v->h.nt;
    mesh->owns_arrays = 1;
    view_drop(v);
    return PM_STATUS_OK;
}

/* After a runner that moved or merged vertices: normals the mesh had are
 * recomputed from the new geometry. */
static pm_status refresh_normals(pm_context *ctx, view *v)
{
    return v->h.nrm ? pmi_cpu_vertex_normals(ctx->num_threads, &v->h) : PM_STATUS_OK;
}

static pm_status done(pm_context *ctx, pm_mesh *mesh, view *v, pm_status s, const char *fn)
{
    if (s != PM_STATUS_OK) {
        /* A borrowed view may have shrunk the arrays in place: keep the
         * counts consistent with them. */
        if (v->borrowed) {
            mesh->num_vertices = v->h.nv;
            mesh->num_triangles = v->h.nt;
            mesh->normals = v->h.nrm;
        }
        if (!v->borrowed) view_drop(v);
        return s;
    }
    return finish(ctx, mesh, v, fn);
}

pm_status pm_mesh_compute_normals(pm_context *ctx, pm_mesh *mesh)
{
    const char *fn = "pm_mesh_compute_normals";
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_vertex_normals(ctx->num_threads, &v.h);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_smooth_normals(pm_context *ctx, pm_mesh *mesh, int iterations)
{
    const char *fn = "pm_mesh_smooth_normals";
    if (iterations < 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: %d iterations", fn, iterations);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 1, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_smooth_normals(ctx->num_threads, &v.h, iterations);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_smooth_laplacian(pm_context *ctx, pm_mesh *mesh, int iterations, double beta,
                                   const float *weights)
{
    const char *fn = "pm_mesh_smooth_laplacian";
    if (iterations < 0 || !(beta >= 0.0 && beta <= 1.0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: iterations %d and beta %g (expected >= 0 and in [0, 1])", fn,
                         iterations, beta);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    float *w = NULL;
    if (weights && on_device(ctx, mesh)) {
        w = malloc((v.h.nv ? v.h.nv : 1) * sizeof *w);
        s = w ? ctx->backend->download(ctx, w, weights, v.h.nv * sizeof *w)
              : pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory", fn);
        weights = w;
    }
    const double f = beta;
    if (s == PM_STATUS_OK) s = pmi_cpu_smooth(ctx->num_threads, &v.h, iterations, &f, 1, weights);
    free(w);
    if (s == PM_STATUS_OK && iterations > 0) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_smooth_taubin(pm_context *ctx, pm_mesh *mesh, int iterations, double lambda,
                                double mu)
{
    const char *fn = "pm_mesh_smooth_taubin";
    if (lambda == 0) lambda = 0.5;
    if (mu == 0) mu = -0.53;
    if (iterations < 0 || !(lambda > 0 && lambda < 1) || !(mu < -lambda && mu > -1))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: iterations %d, lambda %g, mu %g (expected 0 < lambda < -mu < 1)", fn,
                         iterations, lambda, mu);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    const double f[2] = {lambda, mu};
    s = pmi_cpu_smooth(ctx->num_threads, &v.h, iterations, f, 2, NULL);
    if (s == PM_STATUS_OK && iterations > 0) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

/* Options copied with their struct_size and checked (the lattice). */
static pm_status cleanup_options(const char *fn, const pm_mc_cleanup_options *options,
                                 pm_mc_cleanup_options *o)
{
    memset(o, 0, sizeof *o);
    size_t sz = options->struct_size ? options->struct_size : sizeof *o;
    memcpy(o, options, sz < sizeof *o ? sz : sizeof *o);
    for (int a = 0; a < 3; a++)
        if (!(o->spacing[a] > 0) || !isfinite(o->spacing[a]) || !isfinite(o->origin[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the lattice needs a positive spacing and a finite origin "
                             "(axis %d: spacing %g, origin %g)",
                             fn, a, o->spacing[a], o->origin[a]);
    if (!(o->snap_distance >= 0) || o->max_iterations < 0)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: snap distance %g and max_iterations %d must not be negative", fn,
                         o->snap_distance, o->max_iterations);
    return PM_STATUS_OK;
}

pm_status pm_mesh_mc_cleanup(pm_context *ctx, pm_mesh *mesh, const pm_mc_cleanup_options *options)
{
    const char *fn = "pm_mesh_mc_cleanup";
    if (!options) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: options are required", fn);
    pm_mc_cleanup_options o;
    pm_status cs = cleanup_options(fn, options, &o);
    if (cs != PM_STATUS_OK) return cs;
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_mc_cleanup(ctx->num_threads, &v.h, &o);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_decimate_barnacles(pm_context *ctx, pm_mesh *mesh,
                                     const pm_mc_cleanup_options *options)
{
    const char *fn = "pm_mesh_decimate_barnacles";
    pm_mc_cleanup_options o;
    pm_status s;
    if (options && (s = cleanup_options(fn, options, &o)) != PM_STATUS_OK) return s;
    view v;
    s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_decimate_barnacles(ctx->num_threads, &v.h, options ? &o : NULL,
                                   options ? o.keep_vertices : 0);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_clip_aabb(pm_context *ctx, pm_mesh *mesh, const double min[3],
                            const double max[3], int clamp_vertices, int keep_vertices,
                            uint32_t *vertex_map)
{
    const char *fn = "pm_mesh_clip_aabb";
    if (!min || !max) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL box", fn);
    for (int a = 0; a < 3; a++)
        if (!(min[a] < max[a]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the box's min must be below its max on every axis (axis %d: "
                             "%g, %g)",
                             fn, a, min[a], max[a]);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_clip_aabb(ctx->num_threads, &v.h, min, max, clamp_vertices, keep_vertices,
                          vertex_map);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_remove_components(pm_context *ctx, pm_mesh *mesh, size_t min_triangles,
                                    int keep_largest, size_t *removed)
{
    const char *fn = "pm_mesh_remove_components";
    if (removed) *removed = 0;
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_remove_components(ctx->num_threads, &v.h, min_triangles, keep_largest, removed);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_simplify(pm_context *ctx, pm_mesh *mesh, size_t target_triangles,
                           double target_error, double *result_error)
{
    const char *fn = "pm_mesh_simplify";
    if (result_error) *result_error = 0;
    if (!pmi_have_meshoptimizer()) return pmi_cpu_simplify(1, NULL, 0, 0, NULL);
    if (!(target_error >= 0) || (target_triangles == 0 && target_error == 0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: give a triangle target, an error bound (>= 0) or both", fn);
    view v;
    pm_status s = begin(ctx, mesh, fn, 1, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_simplify(ctx->num_threads, &v.h, target_triangles, target_error, result_error);
    if (s == PM_STATUS_OK) s = refresh_normals(ctx, &v);
    return done(ctx, mesh, &v, s, fn);
}

pm_status pm_mesh_to_quads(pm_context *ctx, const pm_mesh *mesh, double max_edge_diag_ratio,
                           double max_normal_angle_deg, double max_interior_angle_deg,
                           pm_quads *out)
{
    const char *fn = "pm_mesh_to_quads";
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL output", fn);
    memset(out, 0, sizeof *out);
    if (max_edge_diag_ratio == 0) max_edge_diag_ratio = 1.75;
    if (max_normal_angle_deg == 0) max_normal_angle_deg = 10;
    if (max_interior_angle_deg == 0) max_interior_angle_deg = 135;
    if (!(max_edge_diag_ratio > 0) || !(max_normal_angle_deg > 0) || !(max_interior_angle_deg > 0))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the thresholds must be positive", fn);
    view v;
    pm_status s = begin(ctx, mesh, fn, 0, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_to_quads(ctx->num_threads, &v.h, max_edge_diag_ratio, max_normal_angle_deg,
                         max_interior_angle_deg, out);
    if (!v.borrowed) view_drop(&v);
    return s;
}

void pm_quads_free(pm_quads *quads)
{
    if (!quads) return;
    free(quads->triangles);
    free(quads->quads);
    memset(quads, 0, sizeof *quads);
}

pm_status pm_mesh_check(const pm_mesh *mesh, unsigned what, pm_mesh_check_report *report)
{
    const char *fn = "pm_mesh_check";
    if (!mesh || !report) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    memset(report, 0, sizeof *report);
    if (mesh->in_context_memory)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: the mesh must be in host memory", fn);
    pm_context host;
    memset(&host, 0, sizeof host);
    host.device = PM_DEVICE_CPU;
    host.backend = pmi_cpu_backend();
    host.num_threads = 1;
    view v;
    pm_status s = begin(&host, mesh, fn, 0, 0, &v);
    if (s != PM_STATUS_OK) return s;
    s = pmi_cpu_mesh_check(1, &v.h, what, report);
    return s;
}

/* ---- SPH interpolation ---------------------------------------------- */

pm_status pm_sph_interpolator_create(pm_context *ctx, const float *xyz, size_t n,
                                     const pm_field_params *params, pm_sph_interpolator **out)
{
    const char *fn = "pm_sph_interpolator_create";
    if (!out) return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL output", fn);
    *out = NULL;
    if (!ctx || !params || (!xyz && n))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: NULL argument", fn);
    pm_field_params p;
    memset(&p, 0, sizeof p);
    size_t sz = params->struct_size ? params->struct_size : sizeof p;
    memcpy(&p, params, sz < sizeof p ? sz : sizeof p);
    if (p.smoothing_length == 0) p.smoothing_length = 2.0;
    if (p.rest_density == 0) p.rest_density = 1000.0;
    if (!(p.radius > 0) || !(p.smoothing_length > 0) || !(p.rest_density > 0) ||
        !isfinite(p.radius) || !isfinite(p.smoothing_length))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: radius %g, smoothing length %g and rest density %g must be "
                         "positive",
                         fn, p.radius, p.smoothing_length, p.rest_density);
    return pmi_cpu_sph_create(ctx->num_threads, xyz, n, &p, out);
}

void pm_sph_interpolator_destroy(pm_sph_interpolator *ip) { pmi_cpu_sph_destroy(ip); }

pm_status pm_sph_normals(pm_context *ctx, const pm_sph_interpolator *ip, const float *points,
                         size_t num_points, float *normals)
{
    if (!ctx || !ip || ((!points || !normals) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_normals: NULL argument");
    return pmi_cpu_sph_normals(ip, ctx->num_threads, points, num_points, normals);
}

pm_status pm_sph_interpolate(pm_context *ctx, const pm_sph_interpolator *ip, const float *values,
                             int components, const float *points, size_t num_points, float *out)
{
    if (!ctx || !ip || !values || ((!points || !out) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_interpolate: NULL argument");
    if (components < 1 || components > 16)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_interpolate: %d components (1 to 16)",
                         components);
    return pmi_cpu_sph_interpolate(ip, ctx->num_threads, values, components, points, num_points,
                                   out);
}

pm_status pm_sph_smoothing_weights(pm_context *ctx, const pm_sph_interpolator *ip,
                                   const float *points, size_t num_points, double normalization,
                                   float *weights, float *wnn)
{
    if (!ctx || !ip || ((!points || !weights) && num_points))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_sph_smoothing_weights: NULL argument");
    if (normalization == 0) normalization = 13.0;
    if (!(normalization > 0) || !isfinite(normalization))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_sph_smoothing_weights: normalization %g must be positive",
                         normalization);
    return pmi_cpu_sph_weights(ip, ctx->num_threads, points, num_points, normalization, weights,
                               wnn);
}
