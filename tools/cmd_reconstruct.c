/* pyramesh reconstruct: particles / point cloud -> density field
 * (pm_field_compute: splashsurf's SPH colour field, or seed 003's blurred
 * splat) -> marching cubes -> mesh post-processing -> mesh file. Takes
 * splashsurf 0.14's `reconstruct` command line with its meaning
 * (docs/splashsurf.md has the table); `pyramesh splashsurf reconstruct`
 * (cmd_splashsurf.c) runs the same code with splashsurf's defaults. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh reconstruct POINTS [-o MESH] -r RADIUS [options]\n"
    "\n"
    "Reconstructs the surface of a particle set or point cloud: a density field on\n"
    "a grid, marching cubes, then optional post-processing. POINTS: .ply, .xyz (text,\n"
    "or raw f32 triplets), .vtk (POLYDATA or UNSTRUCTURED_GRID), .vtu, .bgeo(.gz),\n"
    ".csv. MESH: .vtk, .ply (--ascii for text), .obj or .stl; default\n"
    "'{input stem}_surface.vtk' in the current directory (or --output-dir), as\n"
    "splashsurf. splashsurf 0.14's command line is accepted unchanged: every option\n"
    "takes --opt=value or --opt value, switches --opt=on|off, boxes X Y Z or X,Y,Z\n"
    "(docs/splashsurf.md). Parameters mean what they mean in splashsurf:\n"
    "\n"
    "  -r, --particle-radius R      particle radius (required)\n"
    "  -l, --smoothing-length L     kernel support radius = 2*L*R (default 2.0)\n"
    "  -c, --cube-size C            grid cell edge = C*R (default 0.5)\n"
    "  -t, --surface-threshold T    iso value of the colour field (default 0.6)\n"
    "  --rest-density D             particle mass = D*(2R)^3 (default 1000)\n"
    "  --method sph|blur            SPH colour field (default) or splat + binomial blur\n"
    "  --blur-steps N               blur passes for --method blur (default 2)\n"
    "  --particle-aabb-min X Y Z    only particles inside this box (with -max);\n"
    "  --particle-aabb-max X Y Z    the others are dropped and counted\n"
    "  --max-memory SIZE            stop with an error when the grid needs more\n"
    "                               (default half the RAM; e.g. 512M, 8G)\n"
    "\n"
    "Output:\n"
    "  -o, --output-file MESH       output file (default {stem}_surface.vtk)\n"
    "  --output-dir DIR             base directory of the output (created if missing)\n"
    "  --normals MODE               on (area-weighted), off, sph, or the field gradient\n"
    "                               at extraction: none|forward|central|sobel (default\n"
    "                               central; area-weighted after steps that move vertices)\n"
    "  --sph-normals=on             normals from the SPH colour-field gradient\n"
    "  --normals-smoothing-iters N  smooth the normals N times\n"
    "  --output-raw-normals=on      also write the unsmoothed normals (raw_normals)\n"
    "  -a, --interpolate_attribute NAME\n"
    "                               interpolate a particle attribute (.vtk/.vtu input)\n"
    "                               to the vertices; repeatable\n"
    "  --output-raw-mesh=on         also write the mesh before post-processing (raw_MESH)\n"
    "  --soup, --ascii, --subdivide N, --stats FILE.json (see docs/cli.md)\n"
    "\n"
    "Post-processing (splashsurf's, in this order):\n"
    "  --mesh-cleanup=on            marching-cubes cleanup (on when smoothing is asked)\n"
    "  --mesh-cleanup-snap-dist D   snap only within D cell edges of a lattice point\n"
    "  --decimate-barnacles=on      remove the configurations smoothing turns to bumps\n"
    "  --keep-verts=on              keep the vertices cleanup removes (unreferenced)\n"
    "  --mesh-smoothing-iters N     Laplacian smoothing iterations\n"
    "  --mesh-smoothing-weights=on  weights from particle counts (Loeschner et al. 2023)\n"
    "  --mesh-smoothing-weights-normalization X   (default 13)\n"
    "  --output-smoothing-weights=on  write the weights (sw) and counts (wnn)\n"
    "  --mesh-aabb-min X Y Z, --mesh-aabb-max X Y Z, --mesh-aabb-clamp-verts=on\n"
    "                               drop triangles outside the box, clamp vertices\n"
    "  --generate-quads=on          merge triangle pairs into quads, with\n"
    "  --quad-max-edge-diag-ratio R (1.75), --quad-max-normal-angle DEG (10),\n"
    "  --quad-max-interior-angle DEG (135)\n"
    "  --check-mesh=on, --check-mesh-closed/-manifold/-orientation=on\n"
    "                               exit 1 naming the first offending element\n"
    "  --check-mesh-debug=on        print every count\n"
    "Beyond splashsurf:\n"
    "  --remove-components-below N  drop connected pieces of fewer than N triangles\n"
    "  --keep-largest-component=on  keep the largest connected piece only\n"
    "  --taubin-iters N             Taubin lambda|mu smoothing (volume-preserving)\n"
    "  --taubin-lambda L, --taubin-mu M   (0.5, -0.53)\n"
    "  --decimate-target N          quadric decimation (meshoptimizer) to N triangles\n"
    "  --decimate-ratio F           ... to F times the triangles\n"
    "  --decimate-error E           ... within E times the mesh extent\n"
    "\n"
    "Run:\n"
    "  --device D                   auto|cpu|cuda (default auto)\n"
    "  -n, --num-threads N          CPU threads (also --threads; default: all cores)\n"
    "  -q, --quiet                  print nothing on success\n"
    "  -v                           also print each post-processing step\n"
    "  -s, --start-index N, -e, --end-index N\n"
    "                               frame range when POINTS holds '{}'\n"
    "  Accepted with no effect on the result (implementation details of splashsurf):\n"
    "  -d, --double-precision=on|off, --mt-files, --mt-particles, --simd,\n"
    "  --subdomain-grid, --subdomain-grid-auto-disable (=on|off), --subdomain-cubes N\n"
    "\n"
    "Sequences: 'frames/fluid_{}.vtk' matches any run of digits in place of '{}';\n"
    "the output needs '{}' too (default fluid_surface_{}.vtk) and gets the same\n"
    "digits. Missing frames are skipped with a note; a bad frame is reported and the\n"
    "rest go on (exit status 1). Exit status: 0 success, 1 error, 2 usage error,\n"
    "130 interrupted.\n";

enum {
    R_RADIUS = 1,
    R_SMOOTHING,
    R_CUBE,
    R_THRESHOLD,
    R_REST_DENSITY,
    R_METHOD,
    R_BLUR_STEPS,
    R_AABB_MIN,
    R_AABB_MAX,
    R_OUTPUT_DIR,
    R_VERSION,
    R_IGNORED_SWITCH, /* implementation details: validated, no effect */
    R_SUBDOMAIN_CUBES
};

static const cli_option options[] = {
    CLI_COMMON_OPTIONS,
    /* splashsurf's long names of the shared options */
    {"output-file", 0, 1, OPT_OUTPUT},
    {"start-index", 0, 1, OPT_START},
    {"end-index", 0, 1, OPT_END},
    {"num-threads", 'n', 1, OPT_THREADS},
    {"particle-radius", 'r', 1, R_RADIUS},
    {"smoothing-length", 'l', 1, R_SMOOTHING},
    {"cube-size", 'c', 1, R_CUBE},
    {"surface-threshold", 't', 1, R_THRESHOLD},
    {"rest-density", 0, 1, R_REST_DENSITY},
    {"method", 0, 1, R_METHOD},
    {"blur-steps", 0, 1, R_BLUR_STEPS},
    {"particle-aabb-min", 0, CLI_TRIPLE, R_AABB_MIN},
    {"particle-aabb-max", 0, CLI_TRIPLE, R_AABB_MAX},
    {"output-dir", 0, 1, R_OUTPUT_DIR},
    {"version", 'V', 0, R_VERSION},
    {"double-precision", 'd', CLI_SWITCH, R_IGNORED_SWITCH},
    {"mt-files", 0, CLI_SWITCH, R_IGNORED_SWITCH},
    {"mt-particles", 0, CLI_SWITCH, R_IGNORED_SWITCH},
    {"simd", 0, CLI_SWITCH, R_IGNORED_SWITCH},
    {"subdomain-grid", 0, CLI_SWITCH, R_IGNORED_SWITCH},
    {"subdomain-grid-auto-disable", 0, CLI_SWITCH, R_IGNORED_SWITCH},
    {"subdomain-cubes", 0, 1, R_SUBDOMAIN_CUBES},
    CLI_POST_OPTIONS,
    {NULL, 0, 0, 0},
};

typedef struct rec_job {
    cli_common c;
    cli_reconstruct_opts o;
    pm_context *ctx;
} rec_job;

static int fail(cli_progress *p, pm_status s, const char *what)
{
    cli_progress_clear(p);
    cli_error_status(s, what);
    return CLI_FAIL;
}

/* ---- post-processing ---------------------------------------------------- */

/* A per-vertex array that follows the mesh (attributes, weights). */
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

static void step_line(const cli_post *q, const char *what, size_t t0, const pm_mesh *m, double ms)
{
    if (!q->verbose) return;
    printf("  post-processing  %-22s %zu -> %zu triangles, %zu vertices, %.1f ms\n", what, t0,
           m->num_triangles, m->num_vertices, ms);
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

/* Whether a post-processing step moves or merges vertices (the extraction's
 * gradient normals would then be stale). */
static int post_moves(const cli_post *q)
{
    return q->mesh_cleanup || q->decimate_barnacles ||
           (q->have_smoothing_iters && q->smoothing_iters > 0) || q->taubin_iters > 0 ||
           q->decimate_target || q->decimate_ratio > 0 || q->decimate_error > 0;
}

/* Every post-processing step on the extracted host mesh, then the checks
 * and the file. xyz/n: the particles (host). */
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
    double t0;
    size_t nt0;
    /* The final normals: 0 the extraction's, 1 area-weighted, 2 SPH. */
    int normals = q->normals;
    if (!normals && extraction_normals != PM_NORMALS_NONE && post_moves(q)) normals = 1;

    if (q->output_raw_mesh) {
        char *raw = raw_name(output);
        if (!raw) {
            cli_error("out of memory");
            goto out;
        }
        pm_mesh rm = *mesh;
        rm.normals = NULL;
        s = pm_mesh_write(raw, &rm, write);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, raw);
            free(raw);
            goto out;
        }
        free(raw);
    }
    /* The marching-cubes lattice: the field's. */
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
        cli_progress_stage(p, "mesh cleanup");
        t0 = cli_now_ms();
        nt0 = mesh->num_triangles;
        if ((s = pm_mesh_mc_cleanup(ctx, mesh, &co)) != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-cleanup");
            goto out;
        }
        step_line(q, "mesh cleanup", nt0, mesh, cli_now_ms() - t0);
    }
    if (q->decimate_barnacles) {
        cli_progress_stage(p, "decimating barnacles");
        t0 = cli_now_ms();
        nt0 = mesh->num_triangles;
        if ((s = pm_mesh_decimate_barnacles(ctx, mesh, &co)) != PM_STATUS_OK) {
            rc = fail(p, s, "--decimate-barnacles");
            goto out;
        }
        step_line(q, "decimate barnacles", nt0, mesh, cli_now_ms() - t0);
    }
    if (q->min_component || q->keep_largest) {
        cli_progress_stage(p, "components");
        size_t removed = 0;
        t0 = cli_now_ms();
        nt0 = mesh->num_triangles;
        s = pm_mesh_remove_components(ctx, mesh, q->min_component, q->keep_largest, &removed);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "removing components");
            goto out;
        }
        step_line(q, "components removed", nt0, mesh, cli_now_ms() - t0);
        if (q->verbose) printf("  post-processing  %zu components removed\n", removed);
    }
    if (q->smoothing_weights || normals == 2 || q->num_attributes) {
        cli_progress_stage(p, "SPH interpolator");
        t0 = cli_now_ms();
        if ((s = pm_sph_interpolator_create(ctx, xyz, n, fieldp, &ip)) != PM_STATUS_OK) {
            rc = fail(p, s, "the SPH interpolator");
            goto out;
        }
        step_line(q, "SPH interpolator", mesh->num_triangles, mesh, cli_now_ms() - t0);
    }
    if (q->smoothing_weights) {
        cli_progress_stage(p, "smoothing weights");
        size_t nv = mesh->num_vertices ? mesh->num_vertices : 1;
        sw = malloc(nv * sizeof *sw);
        wnn = malloc(nv * sizeof *wnn);
        if (!sw || !wnn) {
            cli_error("out of memory");
            goto out;
        }
        t0 = cli_now_ms();
        s = pm_sph_smoothing_weights(ctx, ip, mesh->positions, mesh->num_vertices,
                                     q->weights_normalization, sw, wnn);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-smoothing-weights");
            goto out;
        }
        step_line(q, "smoothing weights", mesh->num_triangles, mesh, cli_now_ms() - t0);
    }
    if (q->have_smoothing_iters && q->smoothing_iters > 0) {
        cli_progress_stage(p, "smoothing");
        t0 = cli_now_ms();
        s = pm_mesh_smooth_laplacian(ctx, mesh, q->smoothing_iters, 1.0, sw);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-smoothing-iters");
            goto out;
        }
        step_line(q, "Laplacian smoothing", mesh->num_triangles, mesh, cli_now_ms() - t0);
    }
    if (q->taubin_iters > 0) {
        cli_progress_stage(p, "Taubin smoothing");
        t0 = cli_now_ms();
        s = pm_mesh_smooth_taubin(ctx, mesh, q->taubin_iters, q->taubin_lambda, q->taubin_mu);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--taubin-iters");
            goto out;
        }
        step_line(q, "Taubin smoothing", mesh->num_triangles, mesh, cli_now_ms() - t0);
    }
    if (q->decimate_target || q->decimate_ratio > 0 || q->decimate_error > 0) {
        cli_progress_stage(p, "decimating");
        size_t target = q->decimate_target;
        if (q->decimate_ratio > 0) {
            size_t byratio = (size_t)((double)mesh->num_triangles * q->decimate_ratio);
            if (!target || byratio < target) target = byratio ? byratio : 1;
        }
        double err = 0;
        t0 = cli_now_ms();
        nt0 = mesh->num_triangles;
        s = pm_mesh_simplify(ctx, mesh, target, q->decimate_error, &err);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "decimation");
            goto out;
        }
        step_line(q, "quadric decimation", nt0, mesh, cli_now_ms() - t0);
    }
    /* Normals: computed last on the final geometry, as splashsurf. */
    if (normals == 1 || normals == 2) {
        cli_progress_stage(p, "normals");
        t0 = cli_now_ms();
        if (normals == 1) {
            s = pm_mesh_compute_normals(ctx, mesh);
        } else {
            float *nrm = malloc((mesh->num_vertices ? mesh->num_vertices : 1) * 3 * sizeof *nrm);
            s = nrm ? pm_sph_normals(ctx, ip, mesh->positions, mesh->num_vertices, nrm)
                    : PM_STATUS_OUT_OF_MEMORY;
            if (s == PM_STATUS_OK) {
                free(mesh->normals);
                mesh->normals = nrm;
            } else {
                free(nrm);
            }
        }
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "computing normals");
            goto out;
        }
        step_line(q, normals == 1 ? "area-weighted normals" : "SPH normals", mesh->num_triangles,
                  mesh, cli_now_ms() - t0);
    }
    if (q->have_normals_smoothing && q->normals_smoothing_iters > 0 && mesh->normals) {
        if (q->output_raw_normals) {
            size_t bytes = mesh->num_vertices * 3 * sizeof(float);
            float *raw = malloc(bytes ? bytes : 1);
            if (!raw) {
                cli_error("out of memory");
                goto out;
            }
            memcpy(raw, mesh->normals, bytes);
            data[nd].name = "raw_normals";
            data[nd].comps = 3;
            data[nd++].v = raw;
        }
        t0 = cli_now_ms();
        s = pm_mesh_smooth_normals(ctx, mesh, q->normals_smoothing_iters);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--normals-smoothing-iters");
            goto out;
        }
        step_line(q, "normal smoothing", mesh->num_triangles, mesh, cli_now_ms() - t0);
    }
    if (q->smoothing_weights && q->output_smoothing_weights) {
        data[nd].name = "wnn";
        data[nd].comps = 1;
        data[nd++].v = wnn;
        data[nd].name = "sw";
        data[nd].comps = 1;
        data[nd++].v = sw;
        sw = wnn = NULL;
    }
    /* -a: particle attributes interpolated at the final vertices. */
    for (int k = 0; k < q->num_attributes && nd < 38; k++) {
        cli_progress_stage(p, "interpolating attributes");
        pm_point_attribute at;
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
    }
    if (q->have_mesh_aabb) {
        size_t nv0 = mesh->num_vertices;
        map = malloc((nv0 ? nv0 : 1) * sizeof *map);
        if (!map) {
            cli_error("out of memory");
            goto out;
        }
        t0 = cli_now_ms();
        nt0 = mesh->num_triangles;
        s = pm_mesh_clip_aabb(ctx, mesh, q->mesh_aabb_min, q->mesh_aabb_max, q->mesh_aabb_clamp,
                              q->keep_verts, map);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--mesh-aabb-min/max");
            goto out;
        }
        for (int k = 0; k < nd; k++)
            vdata_remap(&data[k], map, nv0);
        step_line(q, "mesh AABB", nt0, mesh, cli_now_ms() - t0);
    }
    /* Checks on the final triangle mesh (before any quads). */
    if (q->check) {
        pm_mesh_check_report rep;
        s = pm_mesh_check(mesh, q->check, &rep);
        if (s != PM_STATUS_OK) {
            rc = fail(p, s, "--check-mesh");
            goto out;
        }
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
        cli_progress_stage(p, "quads");
        t0 = cli_now_ms();
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
        if (q->verbose)
            printf("  post-processing  quads                  %zu triangles -> %zu triangles + "
                   "%zu quads, %.1f ms\n",
                   mesh->num_triangles, quads.num_triangles, quads.num_quads, cli_now_ms() - t0);
    }
    cli_progress_stage(p, "writing");
    t0 = cli_now_ms();
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
    free(sw);
    free(wnn);
    free(map);
    pm_quads_free(&quads);
    pm_sph_interpolator_destroy(ip);
    return rc;
}

int cli_reconstruct_points(pm_context *ctx, const float *xyz, size_t n,
                           const cli_reconstruct_opts *o, const char *output, cli_progress *p,
                           cli_result *r)
{
    pm_status s;
    const float *xyz_ctx = xyz;
    float *dev = NULL;
    double t0 = cli_now_ms();
    if (pm_context_device(ctx) == PM_DEVICE_CUDA && n > 0) {
        cli_progress_stage(p, "uploading");
        size_t bytes;
        if (__builtin_mul_overflow(n, 3 * sizeof(float), &bytes)) {
            cli_progress_clear(p);
            cli_error("%zu points: size overflows", n);
            return CLI_FAIL;
        }
        s = pm_alloc(ctx, bytes, (void **)&dev);
        if (s == PM_STATUS_OK) s = pm_upload(ctx, dev, xyz, bytes);
        if (s != PM_STATUS_OK) {
            pm_free(ctx, dev);
            return fail(p, s, "uploading the points");
        }
        xyz_ctx = dev;
    }
    r->upload_ms = cli_now_ms() - t0;

    cli_progress_stage(p, "density field");
    pm_field field;
    memset(&field, 0, sizeof field);
    s = pm_field_compute(ctx, xyz_ctx, n, &o->field, &field);
    pm_free(ctx, dev);
    if (s != PM_STATUS_OK) return fail(p, s, "computing the density field");
    r->t.neighbours_ms = field.timings.neighbours_ms;
    r->t.density_ms = field.timings.density_ms;
    r->t.field_ms = field.timings.field_ms;
    if (cli_interrupted) {
        pm_field_free(ctx, &field);
        return CLI_INTERRUPTED;
    }

    cli_progress_stage(p, "extracting");
    pm_isosurface_options iso = o->iso;
    iso.inside = field.inside;
    iso.output_in_context_memory = 0;
    /* Normals that post-processing replaces are not computed here. */
    if (o->post.normals || post_moves(&o->post)) iso.normals = PM_NORMALS_NONE;
    pm_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    t0 = cli_now_ms();
    r->report.timed = 1;
    iso.report = &r->report;
    s = pm_isosurface(ctx, &field.volume, field.iso, &iso, &mesh);
    r->t.extract_ms = cli_now_ms() - t0;
    if (s != PM_STATUS_OK) {
        pm_mesh_free(ctx, &mesh);
        pm_field_free(ctx, &field);
        return fail(p, s, "extracting the surface");
    }
    if (cli_interrupted) {
        pm_mesh_free(ctx, &mesh);
        pm_field_free(ctx, &field);
        return CLI_INTERRUPTED;
    }
    if (o->subdivide > 0) {
        cli_progress_stage(p, "subdividing");
        s = cli_subdivide_mesh(ctx, o->subdivide, iso.normals, &mesh, &r->subdivide_ms);
        if (s != PM_STATUS_OK) {
            pm_mesh_free(ctx, &mesh);
            pm_field_free(ctx, &field);
            return fail(p, s, "subdividing the surface");
        }
    }
    r->active_cells = mesh.active_cells;

    int rc;
    if (o->post.enabled_any) {
        double spacing[3];
        for (int a = 0; a < 3; a++)
            spacing[a] = field.volume.spacing[a] != 0 ? field.volume.spacing[a] : 1.0;
        rc = cli_postprocess(ctx, &o->post, xyz, n, &o->field, o->input, field.volume.origin,
                             spacing, o->iso.normals, &mesh, output, &o->write, p, r);
    } else {
        cli_progress_stage(p, "writing");
        t0 = cli_now_ms();
        s = pm_mesh_write(output, &mesh, &o->write);
        r->t.write_ms = cli_now_ms() - t0;
        rc = s == PM_STATUS_OK ? CLI_OK : fail(p, s, output);
    }
    if (rc != CLI_OK) {
        pm_mesh_free(ctx, &mesh);
        pm_field_free(ctx, &field);
        return rc;
    }

    r->command = "reconstruct";
    r->output = output;
    r->device = pm_device_string(pm_context_device(ctx));
    snprintf(r->device_name, sizeof r->device_name, "%s", pm_context_device_name(ctx));
    r->threads = pm_context_num_threads(ctx);
    r->subdivide = o->subdivide;
    r->have_points = 1;
    r->particles_read = n;
    r->particles_used = field.particles_used;
    r->particles_dropped = field.particles_dropped;
    r->nx = field.volume.nx;
    r->ny = field.volume.ny;
    r->nz = field.volume.nz;
    r->sample_type = pm_sample_type_string(field.volume.type);
    for (int k = 0; k < 3; k++)
        r->spacing[k] = field.volume.spacing[k] != 0 ? field.volume.spacing[k] : 1.0;
    r->iso = field.iso;
    r->cells =
        field.volume.nx < 2 || field.volume.ny < 2 || field.volume.nz < 2
            ? 0
            : (uint64_t)(field.volume.nx - 1) * (field.volume.ny - 1) * (field.volume.nz - 1);
    r->vertices = mesh.num_vertices;
    r->triangles = mesh.num_triangles;
    r->soup = o->iso.mode == PM_MESH_SOUP;
    r->normals = mesh.normals ? o->iso.normals : PM_NORMALS_NONE;
    r->normals_name = !mesh.normals          ? NULL
                      : o->post.normals == 2 ? "sph"
                      : o->iso.normals == PM_NORMALS_NONE || post_moves(&o->post) || o->post.normals
                          ? "area-weighted"
                          : NULL;
    pm_mesh_free(ctx, &mesh);
    pm_field_free(ctx, &field);
    return CLI_OK;
}

static int rec_frame(void *user, const cli_frame *f, cli_progress *p, cli_result *r)
{
    rec_job *job = user;
    if (!cli_check_io(f->input, f->output, 0)) return CLI_FAIL;
    double t_start = cli_now_ms();
    cli_progress_stage(p, "reading");
    pm_points pts;
    memset(&pts, 0, sizeof pts);
    double t0 = cli_now_ms();
    pm_status s = pm_points_read(f->input, PM_POINTS_AUTO, (size_t)job->c.max_memory, &pts);
    if (s != PM_STATUS_OK) return fail(p, s, f->input);
    r->t.read_ms = cli_now_ms() - t0;
    if (pts.count == 0) {
        pm_points_free(&pts);
        cli_progress_clear(p);
        cli_error("'%s' holds no points", f->input);
        return CLI_FAIL;
    }
    if (cli_interrupted) {
        pm_points_free(&pts);
        return CLI_INTERRUPTED;
    }
    cli_reconstruct_opts o = job->o;
    o.input = f->input;
    int rc = cli_reconstruct_points(job->ctx, pts.xyz, pts.count, &o, f->output, p, r);
    pm_points_free(&pts);
    r->input = f->input;
    r->total_ms = cli_now_ms() - t_start;
    return rc;
}

/* mkdir -p of the directory part of path. */
static int make_parent_dirs(const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof buf) {
        cli_error("output path '%s' is too long", path);
        return 0;
    }
    memcpy(buf, path, len + 1);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf) return 1;
    *slash = '\0';
    for (char *c = buf + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char keep = *c;
            *c = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                cli_error("cannot create directory '%s': %s", buf, strerror(errno));
                return 0;
            }
            *c = keep;
            if (!keep) break;
        }
    }
    return 1;
}

/* splashsurf's default output name: the input's stem (its file name up to
 * the last '.') + "_surface.vtk"; a sequence's "{}" becomes "surface_{}". */
static char *default_output(const char *input)
{
    const char *base = strrchr(input, '/');
    base = base ? base + 1 : input;
    const char *dot = strrchr(base, '.');
    size_t stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char *s = malloc(stem + 32);
    if (!s) return NULL;
    const char *ph = strstr(base, "{}");
    if (ph && (size_t)(ph - base) < stem) {
        size_t pre = (size_t)(ph - base);
        memcpy(s, base, pre);
        strcpy(s + pre, "surface_{}");
        memcpy(s + pre + 10, ph + 2, stem - pre - 2);
        strcpy(s + pre + 10 + (stem - pre - 2), ".vtk");
    } else {
        memcpy(s, base, stem);
        strcpy(s + stem, "_surface.vtk");
    }
    return s;
}

static char *join_dir(const char *dir, const char *file)
{
    if (file[0] == '/' || !dir) {
        char *s = malloc(strlen(file) + 1);
        if (s) strcpy(s, file);
        return s;
    }
    size_t a = strlen(dir), b = strlen(file);
    char *s = malloc(a + b + 2);
    if (!s) return NULL;
    memcpy(s, dir, a);
    size_t k = a;
    if (k && s[k - 1] != '/') s[k++] = '/';
    memcpy(s + k, file, b + 1);
    return s;
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

int cli_reconstruct_main(int argc, char **argv, int splashsurf)
{
    static const char *const methods[] = {"sph", "blur", NULL};
    const char *cmd = splashsurf ? "splashsurf reconstruct" : "reconstruct";
    rec_job job;
    memset(&job, 0, sizeof job);
    job.c.normals = splashsurf ? PM_NORMALS_NONE : PM_NORMALS_CENTRAL;
    pm_field_params *fp = &job.o.field;
    cli_post *q = &job.o.post;
    cli_post_init(q);
    fp->struct_size = sizeof *fp;
    fp->smoothing_length = 2.0;
    fp->cube_size = 0.5;
    fp->iso = 0.6;
    fp->rest_density = 1000.0;
    fp->blur_steps = 2;
    int have_min = 0, have_max = 0, have_blur_steps = 0;
    const char *input = NULL, *output_dir = NULL;
    cli_args a;
    cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, k, sw;
    long long ll;
    while ((id = cli_args_next(&a, options, &v)) != CLI_ARG_END) {
        if (id == CLI_ARG_BAD) return CLI_USAGE;
        if (id == OPT_HELP) {
            fputs(help, stdout);
            return CLI_OK;
        }
        switch (id) {
        case CLI_ARG_POSITIONAL:
            if (input) return cli_usage_error(cmd, "more than one input ('%s', '%s')", input, v);
            input = v;
            break;
        case R_RADIUS:
            if (!cli_parse_positive(cmd, a.name, v, &fp->radius)) return CLI_USAGE;
            break;
        case R_SMOOTHING:
            if (!cli_parse_positive(cmd, a.name, v, &fp->smoothing_length)) return CLI_USAGE;
            break;
        case R_CUBE:
            if (!cli_parse_positive(cmd, a.name, v, &fp->cube_size)) return CLI_USAGE;
            break;
        case R_THRESHOLD:
            /* The colour field is >= 0, so a threshold at or below 0 has no
             * surface (and 0 would read as "default" in pm_field_params). */
            if (!cli_parse_positive(cmd, a.name, v, &fp->iso)) return CLI_USAGE;
            break;
        case R_REST_DENSITY:
            if (!cli_parse_positive(cmd, a.name, v, &fp->rest_density)) return CLI_USAGE;
            break;
        case R_METHOD:
            if (!cli_parse_choice(cmd, a.name, v, methods, &k)) return CLI_USAGE;
            fp->method = k == 0 ? PM_FIELD_SPH : PM_FIELD_BLUR;
            break;
        case R_BLUR_STEPS:
            if (!cli_parse_int(cmd, a.name, v, 0, 1000, &ll)) return CLI_USAGE;
            fp->blur_steps = ll == 0 ? -1 : (int)ll; /* -1 = none in pm_field_params */
            have_blur_steps = 1;
            break;
        case R_AABB_MIN:
            if (!cli_parse_triple(cmd, a.name, v, fp->aabb_min)) return CLI_USAGE;
            have_min = 1;
            break;
        case R_AABB_MAX:
            if (!cli_parse_triple(cmd, a.name, v, fp->aabb_max)) return CLI_USAGE;
            have_max = 1;
            break;
        case R_OUTPUT_DIR:
            if (!*v) return cli_usage_error(cmd, "%s needs a directory", a.name);
            output_dir = v;
            break;
        case R_VERSION:
            printf("pyramesh %s (splashsurf 0.14 command line)\n", PM_VERSION_STRING);
            return CLI_OK;
        case R_IGNORED_SWITCH:
            /* -d, --mt-files, --mt-particles, --simd, --subdomain-grid(-auto-disable):
             * checked, no effect on our result (docs/splashsurf.md). */
            if (!cli_parse_switch(cmd, a.name, v, &sw)) return CLI_USAGE;
            break;
        case R_SUBDOMAIN_CUBES:
            if (!cli_parse_int(cmd, a.name, v, 1, UINT32_MAX, &ll)) return CLI_USAGE;
            break;
        default:
            k = cli_post_option(cmd, &a, id, v, q, &job.c);
            if (k == 0) k = cli_common_option(cmd, &a, id, v, &job.c);
            if (k < 0) return CLI_USAGE;
        }
    }
    if (!input) return cli_usage_error(cmd, "missing the input POINTS");
    if (!(fp->radius > 0)) return cli_usage_error(cmd, "missing -r RADIUS (the particle radius)");

    /* The output: splashsurf's default name, under --output-dir. */
    char *out_default = NULL, *out_joined = NULL;
    if (!job.c.output) {
        out_default = default_output(input);
        if (!out_default) {
            cli_error("out of memory");
            return CLI_FAIL;
        }
        job.c.output = out_default;
    }
    if (output_dir) {
        out_joined = join_dir(output_dir, job.c.output);
        if (!out_joined || !make_parent_dirs(out_joined)) {
            free(out_default);
            free(out_joined);
            return CLI_FAIL;
        }
        job.c.output = out_joined;
    }
    if (splashsurf && !strstr(input, "{}")) job.c.have_start = job.c.have_end = 0;
    int rc = CLI_USAGE;
    if (!cli_post_finish(cmd, q, &job.c, splashsurf, 1)) goto done;
    if (!cli_common_finish(cmd, &job.c)) goto done;
    if (have_min != have_max) {
        rc = cli_usage_error(cmd, "--particle-aabb-min and --particle-aabb-max go together");
        goto done;
    }
    if (have_min) {
        for (k = 0; k < 3; k++)
            if (!(fp->aabb_min[k] < fp->aabb_max[k])) {
                rc = cli_usage_error(cmd, "--particle-aabb-min must be below "
                                          "--particle-aabb-max on every axis");
                goto done;
            }
        fp->use_aabb = 1;
    }
    if (have_blur_steps && fp->method != PM_FIELD_BLUR) {
        rc = cli_usage_error(cmd, "--blur-steps applies to --method blur only");
        goto done;
    }
    fp->max_memory_bytes = (size_t)job.c.max_memory;
    job.o.iso.struct_size = sizeof job.o.iso;
    job.o.iso.normals = job.c.normals;
    job.o.iso.mode = job.c.soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
    job.o.write.struct_size = sizeof job.o.write;
    job.o.write.ascii = job.c.ascii;
    job.o.subdivide = job.c.subdivide;

    rc = CLI_FAIL;
    if (!cli_context_create(&job.c, &job.ctx)) goto done;
    rc = cli_run_frames(cmd, input, &job.c, rec_frame, &job);
    pm_context_destroy(job.ctx);
    if (rc == CLI_INTERRUPTED || cli_check_interrupt()) rc = CLI_INTERRUPTED;
done:
    free(out_default);
    free(out_joined);
    return rc;
}

int cmd_reconstruct(int argc, char **argv) { return cli_reconstruct_main(argc, argv, 0); }
