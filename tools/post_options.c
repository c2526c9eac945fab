/* Mesh post-processing on the command line (splashsurf's options and ours,
 * docs/splashsurf.md), shared by reconstruct and isosurface: the options
 * (cli_post_init, cli_post_option, cli_post_finish) and the pipeline
 * (cli_postprocess: the library's post-processing calls in splashsurf's
 * order, then the checks and the file). A mesh in device memory (CUDA)
 * stays there through the data-parallel steps; the library copies it to
 * the host for the sequential ones, and it comes to the host for the
 * checks, quads and the file. Each step is timed and reported with the
 * place it ran (--stats, -v). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static int fail(cli_progress *p, pm_status s, const char *what)
{
    cli_progress_clear(p);
    cli_error_status(s, what);
    return CLI_FAIL;
}

/* A per-vertex array that follows the mesh (attributes, weights), in host
 * memory. */
typedef struct vdata {
    const char *name;
    int comps;
    float *v;
} vdata;

/* Keeps the entries of the vertices that stay (map from pm_mesh_clip_aabb). */
static void vdata_remap(vdata *d, const uint32_t *map, size_t nv_old)
{
    if (!d->v) return;
    for (size_t i = 0; i < nv_old; i++)
        if (map[i] != UINT32_MAX)
            memmove(d->v + (size_t)d->comps * map[i], d->v + (size_t)d->comps * i,
                    (size_t)d->comps * sizeof *d->v);
}

/* The state of one run of the pipeline. */
typedef struct post_run {
    pm_context *ctx;
    const cli_post *q;
    cli_result *r;
    cli_progress *p;
    double t0;
    size_t nt0;
} post_run;

static void step_begin(post_run *u, const char *stage, const pm_mesh *m)
{
    cli_progress_stage(u->p, stage);
    u->t0 = cli_now_ms();
    u->nt0 = m->num_triangles;
}

/* Records a finished step (its time, where it ran, the counts) and prints
 * it under -v. */
static void step_end(post_run *u, const char *what, int device, const pm_mesh *m)
{
    const double ms = cli_now_ms() - u->t0;
    cli_result *r = u->r;
    r->post_ms += ms;
    if (r->num_post < CLI_MAX_POST_STEPS) {
        cli_post_step *s = &r->post[r->num_post++];
        s->name = what;
        s->path = device ? "device" : "host";
        s->ms = ms;
        s->triangles_in = u->nt0;
        s->triangles = m->num_triangles;
        s->vertices = m->num_vertices;
    }
    if (u->q->verbose)
        printf("  post-processing  %-22s %zu -> %zu triangles, %zu vertices, %.1f ms (%s)\n", what,
               u->nt0, m->num_triangles, m->num_vertices, ms, device ? "device" : "host");
}

/* The raw mesh's name: "raw_" before the output's file name. */
static char *raw_name(const char *output)
{
    const char *slash = strrchr(output, '/');
    size_t dir = slash ? (size_t)(slash - output + 1) : 0;
    char *s = malloc(strlen(output) + 5);
    if (!s) return NULL;
    memcpy(s, output, dir);
    strcpy(s + dir, "raw_");
    strcpy(s + dir + 4, output + dir);
    return s;
}

int cli_mesh_memory(pm_context *ctx, const cli_post *q, int subdivide)
{
    if (pm_context_device(ctx) != PM_DEVICE_CUDA || subdivide > 0) return 0;
    return q->enabled_any ? 1 : cli_mpi_rank < 0 ? PM_OUTPUT_ANY : 0;
}

int cli_post_moves(const cli_post *q)
{
    return q->mesh_cleanup || q->decimate_barnacles ||
           (q->have_smoothing_iters && q->smoothing_iters > 0) || q->taubin_iters > 0 ||
           q->decimate_target || q->decimate_ratio > 0 || q->decimate_error > 0;
}

/* count floats of context memory (ctx_mem) or host memory. */
static float *floats(pm_context *ctx, int ctx_mem, size_t count)
{
    void *v = NULL;
    if (!count) count = 1;
    if (ctx_mem) return pm_alloc(ctx, count * sizeof(float), &v) == PM_STATUS_OK ? v : NULL;
    return malloc(count * sizeof(float));
}
static void floats_free(pm_context *ctx, int ctx_mem, float *v)
{
    if (ctx_mem)
        pm_free(ctx, v);
    else
        free(v);
}
/* A host copy of count floats from either memory (NULL when out of memory). */
static float *host_copy(pm_context *ctx, int ctx_mem, const float *v, size_t count)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    if (!h) return NULL;
    if (ctx_mem) {
        if (pm_download(ctx, h, v, count * sizeof *h) != PM_STATUS_OK) {
            free(h);
            return NULL;
        }
    } else {
        memcpy(h, v, count * sizeof *h);
    }
    return h;
}

/* Replaces a mesh in context memory by a host copy. */
static pm_status mesh_to_host(pm_context *ctx, pm_mesh *m)
{
    if (!m->in_context_memory) return PM_STATUS_OK;
    pm_mesh h = *m;
    const size_t pb = m->num_vertices * 3 * sizeof(float), tb = m->num_triangles * 3 * 4;
    h.positions = malloc(pb ? pb : 1);
    h.indices = malloc(tb ? tb : 1);
    h.normals = m->normals ? malloc(pb ? pb : 1) : NULL;
    pm_status s = !h.positions || !h.indices || (m->normals && !h.normals)
                      ? PM_STATUS_OUT_OF_MEMORY
                      : pm_download(ctx, h.positions, m->positions, pb);
    if (s == PM_STATUS_OK) s = pm_download(ctx, h.indices, m->indices, tb);
    if (s == PM_STATUS_OK && m->normals) s = pm_download(ctx, h.normals, m->normals, pb);
    if (s != PM_STATUS_OK) {
        free(h.positions);
        free(h.indices);
        free(h.normals);
        return s;
    }
    h.in_context_memory = 0;
    h.owns_arrays = 1;
    pm_mesh_free(ctx, m);
    *m = h;
    return PM_STATUS_OK;
}

/* Writes the mesh before post-processing (no normals), from either memory. */
static pm_status write_raw(pm_context *ctx, const pm_mesh *mesh, const char *path,
                           const pm_write_options *write)
{
    pm_mesh rm = *mesh;
    rm.normals = NULL;
    return pm_mesh_write_context(ctx, path, &rm, write);
}

int cli_postprocess(pm_context *ctx, const cli_post *q, const float *xyz, size_t n,
                    const pm_field_params *fieldp, const char *particle_file,
                    const double origin[3], const double spacing[3], pm_normals extraction_normals,
                    pm_mesh *mesh, const char *output, const pm_write_options *write,
                    cli_progress *p, cli_result *r)
{
    pm_status s = PM_STATUS_OK;
    int rc = CLI_FAIL;
    pm_sph_interpolator *ip = NULL;
    vdata data[40];
    int nd = 0;
    float *sw = NULL, *wnn = NULL;
    uint32_t *map = NULL;
    pm_quads quads;
    memset(&quads, 0, sizeof quads);
    memset(data, 0, sizeof data);
    post_run u = {ctx, q, r, p, 0, 0};
    /* Where the steps run: the data-parallel ones on the device when the
     * mesh is in device memory, the SPH ones on the device of a CUDA
     * context (pyramesh.h, "Mesh post-processing"). */
    const int cuda = pm_context_device(ctx) == PM_DEVICE_CUDA;
    const int dev = mesh->in_context_memory && cuda;
    /* The final normals: 0 the extraction's, 1 area-weighted, 2 SPH. */
    int normals = q->normals;
    if (!normals && extraction_normals != PM_NORMALS_NONE && cli_post_moves(q)) normals = 1;

    if (q->output_raw_mesh) {
        char *raw = raw_name(output);
        if (!raw) {
            cli_error("out of memory");
            goto out;
        }
        s = write_raw(ctx, mesh, raw, write);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, raw);
            free(raw);
            goto out;
        }
        free(raw);
    }
    /* The marching-cubes lattice: the field's (the volume's). */
    pm_mc_cleanup_options co;
    memset(&co, 0, sizeof co);
    co.struct_size = sizeof co;
    for (int a = 0; a < 3; a++) {
        co.origin[a] = origin[a];
        co.spacing[a] = spacing[a];
    }
    co.use_snap_distance = q->have_snap;
    co.snap_distance = q->snap_dist;
    co.keep_vertices = q->keep_verts;
    if (q->mesh_cleanup) {
        step_begin(&u, "mesh cleanup", mesh);
        if ((s = pm_mesh_mc_cleanup(ctx, mesh, &co)) != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-cleanup");
            goto out;
        }
        step_end(&u, "mesh cleanup", dev, mesh);
    }
    if (q->decimate_barnacles) {
        step_begin(&u, "decimating barnacles", mesh);
        if ((s = pm_mesh_decimate_barnacles(ctx, mesh, &co)) != PM_STATUS_OK) {
            rc = fail(p, s, "--decimate-barnacles");
            goto out;
        }
        step_end(&u, "decimate barnacles", 0, mesh);
    }
    if (q->min_component || q->keep_largest) {
        size_t removed = 0;
        step_begin(&u, "components", mesh);
        s = pm_mesh_remove_components(ctx, mesh, q->min_component, q->keep_largest, &removed);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "removing components");
            goto out;
        }
        step_end(&u, "components removed", 0, mesh);
        if (q->verbose) printf("  post-processing  %zu components removed\n", removed);
    }
    if (q->smoothing_weights || normals == 2 || q->num_attributes) {
        step_begin(&u, "SPH interpolator", mesh);
        if ((s = pm_sph_interpolator_create(ctx, xyz, n, fieldp, &ip)) != PM_STATUS_OK) {
            rc = fail(p, s, "the SPH interpolator");
            goto out;
        }
        step_end(&u, "SPH interpolator", cuda, mesh);
    }
    if (q->smoothing_weights) {
        /* In the mesh's memory: the Laplacian reads them there. */
        sw = floats(ctx, dev, mesh->num_vertices);
        wnn = floats(ctx, dev, mesh->num_vertices);
        if (!sw || !wnn) {
            cli_error("out of memory");
            goto out;
        }
        step_begin(&u, "smoothing weights", mesh);
        s = pm_sph_smoothing_weights(ctx, ip, mesh->positions, mesh->num_vertices,
                                     q->weights_normalization, sw, wnn);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-smoothing-weights");
            goto out;
        }
        step_end(&u, "smoothing weights", cuda, mesh);
    }
    if (q->have_smoothing_iters && q->smoothing_iters > 0) {
        step_begin(&u, "smoothing", mesh);
        s = pm_mesh_smooth_laplacian(ctx, mesh, q->smoothing_iters, 1.0, sw);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-smoothing-iters");
            goto out;
        }
        step_end(&u, "Laplacian smoothing", dev, mesh);
    }
    if (q->taubin_iters > 0) {
        step_begin(&u, "Taubin smoothing", mesh);
        s = pm_mesh_smooth_taubin(ctx, mesh, q->taubin_iters, q->taubin_lambda, q->taubin_mu);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--taubin-iters");
            goto out;
        }
        step_end(&u, "Taubin smoothing", dev, mesh);
    }
    if (q->decimate_target || q->decimate_ratio > 0 || q->decimate_error > 0) {
        size_t target = q->decimate_target;
        if (q->decimate_ratio > 0) {
            size_t byratio = (size_t)((double)mesh->num_triangles * q->decimate_ratio);
            if (!target || byratio < target) target = byratio ? byratio : 1;
        }
        double err = 0;
        step_begin(&u, "decimating", mesh);
        s = pm_mesh_simplify(ctx, mesh, target, q->decimate_error, &err);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "decimation");
            goto out;
        }
        step_end(&u, "quadric decimation", 0, mesh);
    }
    /* Normals: computed last on the final geometry, as splashsurf. */
    if (normals == 1 || normals == 2) {
        step_begin(&u, "normals", mesh);
        if (normals == 1) {
            s = pm_mesh_compute_normals(ctx, mesh);
        } else {
            float *nrm = floats(ctx, dev, 3 * mesh->num_vertices);
            s = nrm ? pm_sph_normals(ctx, ip, mesh->positions, mesh->num_vertices, nrm)
                    : PM_STATUS_OUT_OF_MEMORY;
            if (s == PM_STATUS_OK) {
                if (mesh->owns_arrays) floats_free(ctx, dev, mesh->normals);
                mesh->normals = nrm;
            } else {
                floats_free(ctx, dev, nrm);
            }
        }
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "computing normals");
            goto out;
        }
        step_end(&u, normals == 1 ? "area-weighted normals" : "SPH normals",
                 normals == 1 ? dev : cuda, mesh);
    }
    if (q->have_normals_smoothing && q->normals_smoothing_iters > 0 && mesh->normals) {
        if (q->output_raw_normals) {
            float *raw = host_copy(ctx, dev, mesh->normals, 3 * mesh->num_vertices);
            if (!raw) {
                cli_error("out of memory");
                goto out;
            }
            data[nd].name = "raw_normals";
            data[nd].comps = 3;
            data[nd++].v = raw;
        }
        step_begin(&u, "normal smoothing", mesh);
        s = pm_mesh_smooth_normals(ctx, mesh, q->normals_smoothing_iters);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--normals-smoothing-iters");
            goto out;
        }
        step_end(&u, "normal smoothing", dev, mesh);
    }
    if (q->smoothing_weights && q->output_smoothing_weights) {
        float *hw = host_copy(ctx, dev, wnn, mesh->num_vertices);
        float *hs = host_copy(ctx, dev, sw, mesh->num_vertices);
        if (!hw || !hs) {
            free(hw);
            free(hs);
            cli_error("out of memory");
            goto out;
        }
        data[nd].name = "wnn";
        data[nd].comps = 1;
        data[nd++].v = hw;
        data[nd].name = "sw";
        data[nd].comps = 1;
        data[nd++].v = hs;
    }
    /* -a: particle attributes interpolated at the final vertices. */
    for (int k = 0; k < q->num_attributes && nd < 38; k++) {
        pm_point_attribute at;
        step_begin(&u, "interpolating attributes", mesh);
        s = pm_points_read_attribute(particle_file, q->attributes[k], 0, &at);
        if (s == PM_STATUS_OK && at.count != n) {
            cli_progress_clear(p);
            cli_error("%s: attribute '%s' has %zu values for %zu particles", particle_file,
                      q->attributes[k], at.count, n);
            pm_point_attribute_free(&at);
            goto out;
        }
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, particle_file);
            goto out;
        }
        size_t nv = mesh->num_vertices ? mesh->num_vertices : 1;
        float *v = malloc(nv * (size_t)at.components * sizeof *v);
        s = v ? pm_sph_interpolate(ctx, ip, at.values, at.components, mesh->positions,
                                   mesh->num_vertices, v)
              : PM_STATUS_OUT_OF_MEMORY;
        int comps = at.components;
        pm_point_attribute_free(&at);
        if (s != PM_STATUS_OK) {
            free(v);
            rc = fail(p, s, "-a");
            goto out;
        }
        data[nd].name = q->attributes[k];
        data[nd].comps = comps;
        data[nd++].v = v;
        step_end(&u, "attribute (-a)", cuda, mesh);
    }
    if (q->have_mesh_aabb) {
        size_t nv0 = mesh->num_vertices;
        map = malloc((nv0 ? nv0 : 1) * sizeof *map);
        if (!map) {
            cli_error("out of memory");
            goto out;
        }
        step_begin(&u, "mesh AABB", mesh);
        s = pm_mesh_clip_aabb(ctx, mesh, q->mesh_aabb_min, q->mesh_aabb_max, q->mesh_aabb_clamp,
                              q->keep_verts, map);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-aabb-min/max");
            goto out;
        }
        for (int k = 0; k < nd; k++)
            vdata_remap(&data[k], map, nv0);
        step_end(&u, "mesh AABB", dev, mesh);
    }
    /* The rest is on the host. */
    if (mesh->in_context_memory) {
        step_begin(&u, "downloading", mesh);
        if ((s = mesh_to_host(ctx, mesh)) != PM_STATUS_OK) {
            rc = fail(p, s, "copying the mesh to the host");
            goto out;
        }
        step_end(&u, "mesh to host memory", 1, mesh);
    }
    /* Checks on the final triangle mesh (before any quads). */
    if (q->check) {
        pm_mesh_check_report rep;
        step_begin(&u, "checking", mesh);
        s = pm_mesh_check(mesh, q->check, &rep);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--check-mesh");
            goto out;
        }
        step_end(&u, "mesh check", 0, mesh);
        if (q->check_debug || q->verbose)
            printf("  check-mesh       %zu boundary edges, %zu non-manifold edges, %zu "
                   "non-manifold vertices, %zu misoriented edges, %zu flipped faces\n",
                   rep.boundary_edges, rep.nonmanifold_edges, rep.nonmanifold_vertices,
                   rep.misoriented_edges, rep.flipped_faces);
        if (!rep.passed) {
            cli_progress_clear(p);
            cli_error("%s: mesh check failed: %s", output, rep.message);
            goto out;
        }
    }
    pm_mesh_extras extras;
    memset(&extras, 0, sizeof extras);
    extras.struct_size = sizeof extras;
    pm_vertex_attribute attrs[40];
    for (int k = 0; k < nd; k++) {
        attrs[k].name = data[k].name;
        attrs[k].components = data[k].comps;
        attrs[k].values = data[k].v;
    }
    extras.attributes = attrs;
    extras.num_attributes = (size_t)nd;
    pm_mesh written = *mesh;
    if (q->generate_quads) {
        step_begin(&u, "quads", mesh);
        s = pm_mesh_to_quads(ctx, mesh, q->quad_ratio, q->quad_normal_angle, q->quad_interior_angle,
                             &quads);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--generate-quads");
            goto out;
        }
        written.indices = quads.triangles;
        written.num_triangles = quads.num_triangles;
        extras.quads = quads.quads;
        extras.num_quads = quads.num_quads;
        step_end(&u, "quads", 0, &written);
        if (q->verbose) printf("  post-processing  %zu quads\n", quads.num_quads);
    }
    cli_progress_stage(p, "writing");
    double t0 = cli_now_ms();
    s = pm_mesh_write_extras(output, &written, &extras, write);
    r->t.write_ms = cli_now_ms() - t0;
    if (s != PM_STATUS_OK) {
        rc = fail(p, s, output);
        goto out;
    }
    rc = CLI_OK;
out:
    for (int k = 0; k < nd; k++)
        free(data[k].v);
    floats_free(ctx, dev, sw);
    floats_free(ctx, dev, wnn);
    free(map);
    pm_quads_free(&quads);
    pm_sph_interpolator_destroy(ip);
    return rc;
}

void cli_post_init(cli_post *q)
{
    memset(q, 0, sizeof *q);
    q->weights_normalization = 13.0;
    q->quad_ratio = 1.75;
    q->quad_normal_angle = 10;
    q->quad_interior_angle = 135;
    q->attributes = q->attr_names;
}

int cli_post_option(const char *cmd, const cli_args *a, int id, const char *v, cli_post *q,
                    cli_common *c)
{
    long long ll;
    double d;
    int k, sw;
    switch (id) {
    case OPT_P_NORMALS: {
        /* on|off (splashsurf), area|sph, or the extraction's modes */
        static const char *const modes[] = {"on",      "off",     "area",  "sph", "none",
                                            "forward", "central", "sobel", NULL};
        char low[16];
        size_t i = 0;
        for (; v[i] && i + 1 < sizeof low; i++)
            low[i] = (char)(v[i] >= 'A' && v[i] <= 'Z' ? v[i] - 'A' + 'a' : v[i]);
        low[i] = '\0';
        if (!cli_parse_choice(cmd, a->name, low, modes, &k)) return -1;
        q->normals_set = 1;
        q->normals = 0;
        c->normals = PM_NORMALS_NONE;
        if (k == 0 || k == 2) q->normals = 1;
        if (k == 3) q->normals = 2;
        if (k == 5) c->normals = PM_NORMALS_FORWARD;
        if (k == 6) c->normals = PM_NORMALS_CENTRAL;
        if (k == 7) c->normals = PM_NORMALS_SOBEL;
        return 1;
    }
    case OPT_P_SPH_NORMALS: return cli_parse_switch(cmd, a->name, v, &q->sph_normals) ? 1 : -1;
    case OPT_P_NORMALS_ITERS:
        if (!cli_parse_int(cmd, a->name, v, 0, INT_MAX, &ll)) return -1;
        q->have_normals_smoothing = 1;
        q->normals_smoothing_iters = (int)ll;
        return 1;
    case OPT_P_RAW_NORMALS:
        return cli_parse_switch(cmd, a->name, v, &q->output_raw_normals) ? 1 : -1;
    case OPT_P_ATTRIBUTE:
        if (!*v) return cli_usage_error(cmd, "%s needs an attribute name", a->name), -1;
        for (k = 0; k < q->num_attributes; k++)
            if (strcmp(q->attr_names[k], v) == 0) return 1;
        if (q->num_attributes == (int)(sizeof q->attr_names / sizeof q->attr_names[0]))
            return cli_usage_error(cmd, "at most 32 attributes (-a)"), -1;
        q->attr_names[q->num_attributes++] = v;
        return 1;
    case OPT_P_CLEANUP:
        q->have_cleanup = 1;
        return cli_parse_switch(cmd, a->name, v, &q->mesh_cleanup) ? 1 : -1;
    case OPT_P_SNAP:
        if (!cli_parse_double(cmd, a->name, v, &q->snap_dist)) return -1;
        if (q->snap_dist < 0)
            return cli_usage_error(cmd, "%s must not be negative, got '%s'", a->name, v), -1;
        q->have_snap = 1;
        return 1;
    case OPT_P_BARNACLES: return cli_parse_switch(cmd, a->name, v, &q->decimate_barnacles) ? 1 : -1;
    case OPT_P_KEEP_VERTS: return cli_parse_switch(cmd, a->name, v, &q->keep_verts) ? 1 : -1;
    case OPT_P_SMOOTH_ITERS:
        if (!cli_parse_int(cmd, a->name, v, 0, INT_MAX, &ll)) return -1;
        q->have_smoothing_iters = 1;
        q->smoothing_iters = (int)ll;
        return 1;
    case OPT_P_SMOOTH_WEIGHTS:
        return cli_parse_switch(cmd, a->name, v, &q->smoothing_weights) ? 1 : -1;
    case OPT_P_WEIGHTS_NORM:
        return cli_parse_positive(cmd, a->name, v, &q->weights_normalization) ? 1 : -1;
    case OPT_P_OUT_WEIGHTS:
        return cli_parse_switch(cmd, a->name, v, &q->output_smoothing_weights) ? 1 : -1;
    case OPT_P_QUADS: return cli_parse_switch(cmd, a->name, v, &q->generate_quads) ? 1 : -1;
    case OPT_P_QUAD_RATIO: return cli_parse_positive(cmd, a->name, v, &q->quad_ratio) ? 1 : -1;
    case OPT_P_QUAD_NORMAL:
        return cli_parse_positive(cmd, a->name, v, &q->quad_normal_angle) ? 1 : -1;
    case OPT_P_QUAD_INTERIOR:
        return cli_parse_positive(cmd, a->name, v, &q->quad_interior_angle) ? 1 : -1;
    case OPT_P_MESH_MIN:
        q->have_mmin = 1;
        return cli_parse_triple(cmd, a->name, v, q->mesh_aabb_min) ? 1 : -1;
    case OPT_P_MESH_MAX:
        q->have_mmax = 1;
        return cli_parse_triple(cmd, a->name, v, q->mesh_aabb_max) ? 1 : -1;
    case OPT_P_MESH_CLAMP: return cli_parse_switch(cmd, a->name, v, &q->mesh_aabb_clamp) ? 1 : -1;
    case OPT_P_RAW_MESH: return cli_parse_switch(cmd, a->name, v, &q->output_raw_mesh) ? 1 : -1;
    case OPT_P_CHECK:
    case OPT_P_CHECK_CLOSED:
    case OPT_P_CHECK_MANIFOLD:
    case OPT_P_CHECK_ORIENT: {
        static const unsigned bits[] = {PM_CHECK_CLOSED | PM_CHECK_MANIFOLD | PM_CHECK_ORIENTATION,
                                        PM_CHECK_CLOSED, PM_CHECK_MANIFOLD, PM_CHECK_ORIENTATION};
        if (!cli_parse_switch(cmd, a->name, v, &sw)) return -1;
        unsigned b = bits[id - OPT_P_CHECK];
        if (id == OPT_P_CHECK)
            q->check_all = sw;
        else if (sw)
            q->check_parts |= b;
        else
            q->check_parts &= ~b;
        return 1;
    }
    case OPT_P_CHECK_DEBUG: return cli_parse_switch(cmd, a->name, v, &q->check_debug) ? 1 : -1;
    case OPT_P_VERBOSE: q->verbose++; return 1;
    case OPT_P_COMPONENTS:
        if (!cli_parse_int(cmd, a->name, v, 0, LLONG_MAX, &ll)) return -1;
        q->min_component = (size_t)ll;
        return 1;
    case OPT_P_LARGEST: return cli_parse_switch(cmd, a->name, v, &q->keep_largest) ? 1 : -1;
    case OPT_P_TAUBIN:
        if (!cli_parse_int(cmd, a->name, v, 0, INT_MAX, &ll)) return -1;
        q->taubin_iters = (int)ll;
        return 1;
    case OPT_P_TAUBIN_LAMBDA:
        return cli_parse_positive(cmd, a->name, v, &q->taubin_lambda) ? 1 : -1;
    case OPT_P_TAUBIN_MU:
        if (!cli_parse_double(cmd, a->name, v, &q->taubin_mu)) return -1;
        if (!(q->taubin_mu < 0))
            return cli_usage_error(cmd, "%s must be negative, got '%s'", a->name, v), -1;
        return 1;
    case OPT_P_DECIMATE_TARGET:
        if (!cli_parse_int(cmd, a->name, v, 1, LLONG_MAX, &ll)) return -1;
        q->decimate_target = (size_t)ll;
        return 1;
    case OPT_P_DECIMATE_RATIO:
        if (!cli_parse_positive(cmd, a->name, v, &d)) return -1;
        if (d > 1) return cli_usage_error(cmd, "%s must be in (0, 1], got '%s'", a->name, v), -1;
        q->decimate_ratio = d;
        return 1;
    case OPT_P_DECIMATE_ERROR:
        return cli_parse_positive(cmd, a->name, v, &q->decimate_error) ? 1 : -1;
    default: return 0;
    }
}

int cli_post_finish(const char *cmd, cli_post *q, cli_common *c, int splashsurf, int have_particles)
{
    /* splashsurf's rules between options. */
    if (!q->have_cleanup && q->have_smoothing_iters && q->smoothing_iters > 0) q->mesh_cleanup = 1;
    if (q->sph_normals && (!q->normals_set || q->normals == 1)) {
        /* --sph-normals picks how --normals=on computes them; under
         * reconstruct it also replaces the default gradient normals. */
        if (q->normals == 1) q->normals = 2;
        if (!q->normals_set && !splashsurf) q->normals = 2, c->normals = PM_NORMALS_NONE;
    }
    q->check = q->check_all ? (PM_CHECK_CLOSED | PM_CHECK_MANIFOLD | PM_CHECK_ORIENTATION)
                            : q->check_parts;
    q->attributes = q->attr_names;
    if (q->have_mmin != q->have_mmax)
        return cli_usage_error(cmd, "--mesh-aabb-min and --mesh-aabb-max go together"), 0;
    if (q->have_mmin) {
        for (int k = 0; k < 3; k++)
            if (!(q->mesh_aabb_min[k] < q->mesh_aabb_max[k]))
                return cli_usage_error(cmd, "--mesh-aabb-min must be below --mesh-aabb-max on "
                                            "every axis"),
                       0;
        q->have_mesh_aabb = 1;
    }
    if (q->taubin_lambda && q->taubin_mu && !(-q->taubin_mu > q->taubin_lambda))
        return cli_usage_error(cmd, "--taubin-mu must be below -lambda (mu < -lambda < 0)"), 0;
    if (!have_particles && (q->smoothing_weights || q->normals == 2 || q->num_attributes))
        return cli_usage_error(cmd, "--mesh-smoothing-weights, --sph-normals and -a need "
                                    "particles (pyramesh reconstruct)"),
               0;
    q->enabled_any = q->mesh_cleanup || q->decimate_barnacles || q->have_smoothing_iters ||
                     q->smoothing_weights || q->normals || q->have_normals_smoothing ||
                     q->num_attributes || q->generate_quads || q->have_mesh_aabb ||
                     q->output_raw_mesh || q->check || q->taubin_iters || q->min_component ||
                     q->keep_largest || q->decimate_target || q->decimate_ratio > 0 ||
                     q->decimate_error > 0;
    if (q->enabled_any && c->soup)
        return cli_usage_error(cmd, "mesh post-processing needs an indexed mesh: drop --soup"), 0;
    if ((q->decimate_target || q->decimate_ratio > 0 || q->decimate_error > 0) &&
        q->output_smoothing_weights && q->smoothing_weights)
        return cli_usage_error(cmd, "--output-smoothing-weights cannot follow a decimation "
                                    "(the weights belong to the vertices before it)"),
               0;
    if (c->output) {
        char ext[16];
        cli_extension(c->output, ext, sizeof ext);
        if ((q->num_attributes || (q->smoothing_weights && q->output_smoothing_weights) ||
             (q->output_raw_normals && q->have_normals_smoothing)) &&
            strcmp(ext, "vtk") != 0 && strcmp(ext, "ply") != 0)
            return cli_usage_error(cmd, "vertex attributes (-a, --output-smoothing-weights, "
                                        "--output-raw-normals) are written to .vtk or .ply only"),
                   0;
        if (q->generate_quads && strcmp(ext, "stl") == 0)
            return cli_usage_error(cmd, "--generate-quads writes .vtk, .ply or .obj (STL holds "
                                        "triangles only)"),
                   0;
    }
    return 1;
}
