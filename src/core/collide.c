/* Public entry points of collision detection (pm_bvh_build, pm_collide):
 * arguments are checked once here, host-memory meshes are validated, the
 * transformation is resolved, then the call goes to the context's backend.
 * Method: breadth-first filtering of candidate node pairs (Horn, GPU Gems 2
 * ch. 36, 2005) over bounding volume trees (Gottschalk, Lin and Manocha,
 * "OBBTree", 1996); docs/collide.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/collide_math.h"
#include "core/util.h"

/* Checks indices and coordinates of a mesh in host memory. */
static pm_status check_host_mesh(const pm_mesh *m)
{
    const size_t nt = m->num_triangles;
    if (m->indices) {
        for (size_t t = 0; t < nt; t++)
            for (int k = 0; k < 3; k++) {
                uint32_t v = m->indices[3 * t + k];
                if (v >= m->num_vertices)
                    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                     "pm_bvh_build: triangle %zu uses vertex %u but the mesh has "
                                     "%zu vertices",
                                     t, v, m->num_vertices);
            }
    } else {
        size_t need;
        if (!pmi_mul_size(nt, 3, &need) || need > m->num_vertices)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_bvh_build: a soup of %zu triangles needs %zu vertices, the mesh "
                             "has %zu",
                             nt, 3 * nt, m->num_vertices);
    }
    /* Every vertex a triangle uses must be finite; checking all vertices
     * would also reject unused NaN vertices, which the mesh may well carry. */
    for (size_t t = 0; t < nt; t++)
        for (int k = 0; k < 3; k++) {
            size_t v = m->indices ? m->indices[3 * t + k] : 3 * t + k;
            const float *p = m->positions + 3 * v;
            if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]))
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "pm_bvh_build: vertex %zu (of triangle %zu) has a non-finite "
                                 "coordinate",
                                 v, t);
        }
    return PM_STATUS_OK;
}

static _Thread_local const char *g_path = "";

void pmi_collide_set_path(const char *path) { g_path = path; }

const char *pmi_collide_last_path(void) { return g_path; }

pm_status pm_bvh_build(pm_context *ctx, const pm_mesh *mesh, const pm_bvh_options *options,
                       pm_bvh **out)
{
    pmi_clear_error();
    if (!ctx || !mesh || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_bvh_build: NULL context, mesh or out");
    *out = NULL;
    if (options && options->struct_size > sizeof *options)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_bvh_build: options->struct_size %zu is larger than this library's "
                         "%zu",
                         options->struct_size, sizeof *options);
    if (mesh->num_triangles > PMI_BVH_MAX_TRIANGLES)
        return pmi_error(PM_STATUS_OVERFLOW,
                         "pm_bvh_build: %zu triangles; at most 2^30 are supported",
                         mesh->num_triangles);
    if (mesh->num_vertices > ((size_t)1 << 32) && mesh->indices)
        return pmi_error(PM_STATUS_OVERFLOW, "pm_bvh_build: %zu vertices exceed 32-bit indices",
                         mesh->num_vertices);
    if (mesh->num_triangles && (!mesh->positions))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_bvh_build: mesh positions are NULL");
    int host = !mesh->in_context_memory || ctx->device == PM_DEVICE_CPU;
    if (host) {
        pm_status s = check_host_mesh(mesh);
        if (s != PM_STATUS_OK) return s;
    } else if (!mesh->indices && mesh->num_vertices < 3 * mesh->num_triangles) {
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_bvh_build: a soup of %zu triangles needs %zu vertices, the mesh has "
                         "%zu",
                         mesh->num_triangles, 3 * mesh->num_triangles, mesh->num_vertices);
    }
    if (!ctx->backend->bvh_build)
        return pmi_error(PM_STATUS_UNSUPPORTED, "pm_bvh_build: not supported on the %s backend",
                         ctx->backend->name);
    struct pm_bvh *b = calloc(1, sizeof *b);
    if (!b) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_bvh_build: out of host memory");
    b->ctx = ctx;
    b->num_triangles = mesh->num_triangles;
    b->soup = mesh->indices == NULL;
    if (mesh->num_triangles) {
        pm_status s = ctx->backend->bvh_build(ctx, mesh, b);
        if (s != PM_STATUS_OK) {
            ctx->backend->bvh_destroy(ctx, b);
            free(b);
            return s;
        }
    }
    *out = b;
    return PM_STATUS_OK;
}

void pm_bvh_destroy(pm_context *ctx, pm_bvh *bvh)
{
    if (!bvh) return;
    if (!ctx) ctx = bvh->ctx;
    if (ctx && ctx->backend->bvh_destroy) ctx->backend->bvh_destroy(ctx, bvh);
    free(bvh);
}

size_t pm_bvh_num_triangles(const pm_bvh *bvh) { return bvh ? bvh->num_triangles : 0; }
unsigned pm_bvh_depth(const pm_bvh *bvh) { return bvh ? bvh->depth : 0; }

/* Resolves transform_b_to_a: NULL is the identity (and so is an exact
 * identity matrix); finite entries required. */
static pm_status resolve_xform(const double *m, pmi_xform *x)
{
    memset(x, 0, sizeof *x);
    static const double id[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    if (!m) m = id;
    for (int k = 0; k < 12; k++)
        if (!isfinite(m[k]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_collide: transform_b_to_a[%d] is not finite", k);
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < 3; j++)
            x->r[3 * k + j] = m[4 * k + j];
        x->t[k] = m[4 * k + 3];
    }
    x->identity = memcmp(m, id, sizeof id) == 0 ||
                  (m[0] == 1 && m[5] == 1 && m[10] == 1 && m[1] == 0 && m[2] == 0 && m[3] == 0 &&
                   m[4] == 0 && m[6] == 0 && m[7] == 0 && m[8] == 0 && m[9] == 0 && m[11] == 0);
    x->translation = !x->identity && m[0] == 1 && m[5] == 1 && m[10] == 1 && m[1] == 0 &&
                     m[2] == 0 && m[4] == 0 && m[6] == 0 && m[8] == 0 && m[9] == 0;
    double worst = 0.0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double d = 0.0;
            for (int k = 0; k < 3; k++)
                d += x->r[3 * k + i] * x->r[3 * k + j];
            d = fabs(d - (i == j ? 1.0 : 0.0));
            worst = d > worst ? d : worst;
        }
    x->orthonormal = worst <= 1e-12;
    return PM_STATUS_OK;
}

pm_status pm_collide(pm_context *ctx, const pm_bvh *a, const pm_bvh *b, const double *transform,
                     const pm_collide_options *options, uint32_t *pairs, size_t capacity,
                     size_t *count)
{
    pmi_clear_error();
    g_path = "";
    if (!ctx || !a || !b || !count)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_collide: NULL context, bvh or count");
    *count = 0;
    if (a->ctx != ctx || b->ctx != ctx)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_collide: a BVH was built on another context");
    if (capacity && !pairs)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_collide: pairs is NULL, capacity %zu",
                         capacity);
    size_t bytes;
    if (!pmi_mul_size(capacity, 2 * sizeof(uint32_t), &bytes))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_collide: capacity %zu overflows a byte count",
                         capacity);
    pm_collide_options o;
    memset(&o, 0, sizeof o);
    if (options) {
        size_t sz = options->struct_size ? options->struct_size : sizeof o;
        if (sz > sizeof o)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "pm_collide: options->struct_size %zu is larger than this library's "
                             "%zu",
                             sz, sizeof o);
        memcpy(&o, options, sz);
    }
    o.struct_size = sizeof o;
    if (o.max_candidates == 0) o.max_candidates = (size_t)1 << 22;
    if (o.max_candidates < 64)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_collide: max_candidates %zu is below the minimum of 64",
                         o.max_candidates);
    if (o.max_candidates > ((size_t)1 << 40))
        return pmi_error(PM_STATUS_OVERFLOW, "pm_collide: max_candidates %zu is too large",
                         o.max_candidates);
    if (o.stats_levels) *o.stats_levels = 0;
    if (o.stats_box_tests) *o.stats_box_tests = 0;
    if (o.stats_leaf_tests) *o.stats_leaf_tests = 0;
    if (o.stats_parts) *o.stats_parts = 0;
    pmi_xform x;
    pm_status s = resolve_xform(transform, &x);
    if (s != PM_STATUS_OK) return s;
    if (a == b && !x.identity)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_collide: self-collision (bvh_b == bvh_a) takes no transform; build a "
                         "second BVH to test a mesh against a moved copy");
    if (a->num_triangles == 0 || b->num_triangles == 0) {
        pmi_collide_set_path("traversal=none sort=none"); /* an empty mesh */
        return PM_STATUS_OK;
    }
    if (!ctx->backend->collide)
        return pmi_error(PM_STATUS_UNSUPPORTED, "pm_collide: not supported on the %s backend",
                         ctx->backend->name);
    return ctx->backend->collide(ctx, a, b, &x, &o, pairs, capacity, count);
}
