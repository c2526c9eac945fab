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
    "  --grid auto|dense|sparse     dense: one field over the particles' whole box;\n"
    "                               sparse: only the bricks particles reach (SPH, CPU);\n"
    "                               auto (default): dense when it fits --max-memory and\n"
    "                               the particles fill their box, else sparse; the mesh\n"
    "                               is the same bytes either way (docs/scale.md)\n"
    "  --brick N                    sparse: lattice points per brick edge (default 32,\n"
    "                               128 on a GPU; rounded up to whole neighbour cells)\n"
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
    "  --device D                   auto|cpu|cuda (default auto), cuda:N (GPU N),\n"
    "                               cuda:A,B,... or cuda:all (the bricks shared out\n"
    "                               over the GPUs; the same mesh)\n"
    "  -n, --num-threads N          CPU threads (also --threads; default: all cores)\n"
    "  -q, --quiet                  print nothing on success\n"
    "  -v                           also print each post-processing step\n"
    "  -s, --start-index N, -e, --end-index N\n"
    "                               frame range when POINTS holds '{}'\n"
    "  Accepted with no effect on the result (implementation details of splashsurf):\n"
    "  -d, --double-precision=on|off, --mt-files, --mt-particles, --simd;\n"
    "  --subdomain-grid=on|off, --subdomain-grid-auto-disable=on|off, --subdomain-cubes N\n"
    "                               choose the grid unless --grid is given: off is\n"
    "                               dense, on is sparse (auto while auto-disable is on),\n"
    "                               N is --brick N\n"
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
    R_SUBDOMAIN_GRID,
    R_SUBDOMAIN_AUTO,
    R_SUBDOMAIN_CUBES,
    R_GRID,
    R_BRICK
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
    {"subdomain-grid", 0, CLI_SWITCH, R_SUBDOMAIN_GRID},
    {"subdomain-grid-auto-disable", 0, CLI_SWITCH, R_SUBDOMAIN_AUTO},
    {"subdomain-cubes", 0, 1, R_SUBDOMAIN_CUBES},
    {"grid", 0, 1, R_GRID},
    {"brick", 0, 1, R_BRICK},
    CLI_POST_OPTIONS,
    {NULL, 0, 0, 0},
};

/* The grid of reconstruct (--grid, --brick and splashsurf's subdomain
 * switches); zero (auto) for the other callers of cli_reconstruct_points. */
static pm_reconstruct_options rec_grid;
/* Under mpirun with a .pvtp output: every rank writes its part. */
static int rec_distributed;

typedef struct rec_job {
    cli_common c;
    cli_reconstruct_opts o;
    pm_context *ctx;
} rec_job;

/* --device cuda:all|A,B: the contexts (group[0] is the job's). */
static pm_context *rec_group[CLI_MAX_GPUS];
static int rec_ngroup = 1;

/* Appends "key=value" to a report's path words (truncating). */
static void path_word(pm_isosurface_report *r, const char *key, const char *value)
{
    size_t len = strlen(r->path);
    snprintf(r->path + len, sizeof r->path - len, "%s%s=%s", len ? " " : "", key, value);
}

static int fail(cli_progress *p, pm_status s, const char *what)
{
    cli_progress_clear(p);
    cli_error_status(s, what);
    return CLI_FAIL;
}

/* The field, the extraction, the post-processing and the file. *dev: the
 * particles' device copy (CUDA) or NULL, freed once no step needs it. */
static int reconstruct(pm_context *ctx, const float *xyz, float **dev, size_t n,
                       const cli_reconstruct_opts *o, const char *output, cli_progress *p,
                       cli_result *r)
{
    pm_status s;
    double t0;
    const float *xyz_ctx = *dev ? *dev : xyz;
    const cli_post *q = &o->post;
    cli_progress_stage(p, "reconstructing");
    pm_isosurface_options iso = o->iso;
    iso.output_in_context_memory = cli_mesh_memory(ctx, q, o->subdivide);
    /* Normals that post-processing replaces are not computed here. */
    if (q->normals || cli_post_moves(q)) iso.normals = PM_NORMALS_NONE;
    r->report.timed = 1;
    iso.report = &r->report;
    pm_mesh mesh;
    pm_reconstruct_report rep;
    memset(&rep, 0, sizeof rep);
    rec_grid.struct_size = sizeof rec_grid;
    int written = 0;
    if (cli_mpi_rank >= 0) {
        /* Under mpirun: the ranks mesh the particles together (each takes
         * its share of the file's order); rank 0 goes on with the mesh,
         * or every rank writes its part of a distributed (.pvtp) output. */
        uint64_t *ids = NULL;
        s = cli_mpi_reconstruct(ctx, xyz, n, &o->field, &rec_grid, &iso, &mesh,
                                rec_distributed ? &ids : NULL, &rep);
        path_word(&r->report, "mpi", rec_distributed ? "distributed" : "gather");
        char num[16];
        snprintf(num, sizeof num, "%d", cli_mpi_ranks);
        path_word(&r->report, "ranks", num);
        r->ranks = cli_mpi_ranks;
        if (s != PM_STATUS_OK) return cli_mpi_rank > 0 ? CLI_FAIL : fail(p, s, "reconstructing the surface");
        if (rec_distributed) {
            cli_progress_stage(p, "writing");
            t0 = cli_now_ms();
            s = cli_mpi_write_pvtp(output, &mesh, ids);
            r->t.write_ms = cli_now_ms() - t0;
            free(ids);
            written = 1;
            if (s != PM_STATUS_OK) {
                pm_mesh_free(ctx, &mesh);
                return cli_mpi_rank > 0 ? CLI_FAIL : fail(p, s, output);
            }
        }
        if (cli_mpi_rank > 0) {
            pm_mesh_free(ctx, &mesh);
            return CLI_OK;
        }
    } else if (rec_ngroup > 1 && rec_group[0] == ctx) {
        /* Several GPUs: the bricks shared out (pm_reconstruct_multi). */
        iso.output_in_context_memory = 0;
        s = pm_reconstruct_multi(rec_group, rec_ngroup, xyz, n, &o->field, &rec_grid, &iso, &mesh,
                                 &rep);
    } else {
        s = pm_reconstruct(ctx, xyz_ctx, n, &o->field, &rec_grid, &iso, &mesh, &rep);
        /* The last frame's mesh, still being written, may hold the memory. */
        if (s == PM_STATUS_OUT_OF_MEMORY && iso.output_in_context_memory && cli_write_join())
            s = pm_reconstruct(ctx, xyz_ctx, n, &o->field, &rec_grid, &iso, &mesh, &rep);
    }
    /* The SPH steps of the post-processing use the particles' device copy. */
    if (!(q->smoothing_weights || q->normals == 2 || q->num_attributes) && *dev) {
        pm_free(ctx, *dev);
        *dev = NULL;
        xyz_ctx = xyz;
    }
    if (s != PM_STATUS_OK) return fail(p, s, "reconstructing the surface");
    r->t.neighbours_ms = rep.neighbours_ms;
    r->t.density_ms = rep.density_ms;
    r->t.field_ms = rep.field_ms;
    r->t.extract_ms = rep.extract_ms + rep.merge_ms;
    if (rep.sparse) {
        /* The sparse figures go into --stats with the path words. */
        char num[48];
        snprintf(num, sizeof num, "%llu/%llu", (unsigned long long)rep.bricks_occupied,
                 (unsigned long long)rep.bricks_total);
        path_word(&r->report, "occupied", num);
        snprintf(num, sizeof num, "%.0f", (double)rep.peak_bytes / 1048576.0);
        path_word(&r->report, "peak_mb", num);
    }
    if (cli_interrupted) {
        pm_mesh_free(ctx, &mesh);
        return CLI_INTERRUPTED;
    }
    if (o->subdivide > 0) {
        cli_progress_stage(p, "subdividing");
        s = cli_subdivide_mesh(ctx, o->subdivide, iso.normals, &mesh, &r->subdivide_ms);
        if (s != PM_STATUS_OK) {
            pm_mesh_free(ctx, &mesh);
            return fail(p, s, "subdividing the surface");
        }
    }
    r->active_cells = mesh.active_cells;

    int rc;
    pm_mesh shown = mesh; /* what the result reports (a deferred write takes the mesh) */
    if (written) {
        rc = CLI_OK;
    } else if (q->enabled_any) {
        rc = cli_postprocess(ctx, q, xyz_ctx, n, &o->field, o->input, rep.lattice.origin,
                             rep.lattice.spacing, o->iso.normals, &mesh, output, &o->write, p, r);
    } else {
        cli_progress_stage(p, "writing");
        shown = mesh;
        if (cli_write_deferred(ctx, output, &mesh, &o->write, r)) {
            rc = CLI_OK; /* written while the next frame is meshed */
        } else {
            s = cli_write_now(ctx, output, &mesh, &o->write, r);
            rc = s == PM_STATUS_OK ? CLI_OK : fail(p, s, output);
        }
    }
    if (rc != CLI_OK) {
        pm_mesh_free(ctx, &mesh);
        return rc;
    }
    if (!r->write_deferred) shown = mesh;

    r->command = "reconstruct";
    r->output = output;
    r->device = pm_device_string(pm_context_device(ctx));
    if (rec_ngroup > 1 && rec_group[0] == ctx)
        cli_group_name(rec_group, rec_ngroup, r->device_name, sizeof r->device_name);
    else
        snprintf(r->device_name, sizeof r->device_name, "%s", pm_context_device_name(ctx));
    r->threads = pm_context_num_threads(ctx);
    r->subdivide = o->subdivide;
    r->have_points = 1;
    r->particles_read = n;
    r->particles_used = rep.particles_used;
    r->particles_dropped = rep.particles_dropped;
    r->nx = (size_t)rep.lattice.dims[0];
    r->ny = (size_t)rep.lattice.dims[1];
    r->nz = (size_t)rep.lattice.dims[2];
    r->sample_type = pm_sample_type_string(PM_SAMPLE_F32);
    for (int k = 0; k < 3; k++)
        r->spacing[k] = rep.lattice.spacing[k];
    r->iso = rep.iso;
    r->cells = r->nx < 2 || r->ny < 2 || r->nz < 2
                   ? 0
                   : (uint64_t)(r->nx - 1) * (r->ny - 1) * (r->nz - 1);
    r->vertices = shown.num_vertices;
    r->triangles = shown.num_triangles;
    r->soup = o->iso.mode == PM_MESH_SOUP;
    r->normals = shown.normals ? o->iso.normals : PM_NORMALS_NONE;
    r->normals_name = !shown.normals    ? NULL
                      : q->normals == 2 ? "sph"
                      : o->iso.normals == PM_NORMALS_NONE || cli_post_moves(q) || q->normals
                          ? "area-weighted"
                          : NULL;
    pm_mesh_free(ctx, &mesh);
    return CLI_OK;
}

int cli_reconstruct_points(pm_context *ctx, const float *xyz, size_t n,
                           const cli_reconstruct_opts *o, const char *output, cli_progress *p,
                           cli_result *r)
{
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
        pm_status s = pm_alloc(ctx, bytes, (void **)&dev);
        if (s == PM_STATUS_OK) s = pm_upload(ctx, dev, xyz, bytes);
        if (s != PM_STATUS_OK) {
            pm_free(ctx, dev);
            return fail(p, s, "uploading the points");
        }
    }
    r->upload_ms = cli_now_ms() - t0;
    int rc = reconstruct(ctx, xyz, &dev, n, o, output, p, r);
    pm_free(ctx, dev);
    return rc;
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
    static const char *const grids[] = {"auto", "dense", "sparse", NULL};
    int grid = -1, subdomain_grid = -1, subdomain_auto = -1;
    size_t brick = 0, subdomain_cubes = 0;
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
            /* -d, --mt-files, --mt-particles, --simd: checked, no effect on
             * our result (docs/splashsurf.md). */
            if (!cli_parse_switch(cmd, a.name, v, &sw)) return CLI_USAGE;
            break;
        case R_SUBDOMAIN_GRID:
            if (!cli_parse_switch(cmd, a.name, v, &sw)) return CLI_USAGE;
            subdomain_grid = sw;
            break;
        case R_SUBDOMAIN_AUTO:
            if (!cli_parse_switch(cmd, a.name, v, &sw)) return CLI_USAGE;
            subdomain_auto = sw;
            break;
        case R_SUBDOMAIN_CUBES:
            if (!cli_parse_int(cmd, a.name, v, 1, UINT32_MAX, &ll)) return CLI_USAGE;
            subdomain_cubes = (size_t)ll;
            break;
        case R_GRID:
            if (!cli_parse_choice(cmd, a.name, v, grids, &k)) return CLI_USAGE;
            grid = k;
            break;
        case R_BRICK:
            if (!cli_parse_int(cmd, a.name, v, 1, 1 << 20, &ll)) return CLI_USAGE;
            brick = (size_t)ll;
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
    /* --grid wins; else splashsurf's subdomain switches: off is one dense
     * grid, on is subdomains (sparse bricks), which auto-disable (on by
     * default) may turn back into one grid: our auto rule. */
    memset(&rec_grid, 0, sizeof rec_grid);
    rec_grid.struct_size = sizeof rec_grid;
    if (grid >= 0)
        rec_grid.grid = grid == 1 ? PM_GRID_DENSE : grid == 2 ? PM_GRID_SPARSE : PM_GRID_AUTO;
    else if (subdomain_grid == 0)
        rec_grid.grid = PM_GRID_DENSE;
    else if (subdomain_grid == 1 && subdomain_auto == 0)
        rec_grid.grid = PM_GRID_SPARSE;
    rec_grid.brick_points = brick ? brick : subdomain_cubes > (1u << 20) ? 0 : subdomain_cubes;
    job.o.iso.struct_size = sizeof job.o.iso;
    job.o.iso.normals = job.c.normals;
    job.o.iso.mode = job.c.soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
    job.o.write.struct_size = sizeof job.o.write;
    job.o.write.ascii = job.c.ascii;
    job.o.subdivide = job.c.subdivide;

    rc = CLI_FAIL;
    if (!cli_mpi_start(&argc, &argv)) goto done;
    {
        const char *out = job.c.output;
        size_t olen = strlen(out);
        rec_distributed = olen > 5 && strcmp(out + olen - 5, ".pvtp") == 0;
        if (rec_distributed && cli_mpi_rank < 0) {
            rc = cli_mpi_finish(cli_usage_error(
                cmd, "a .pvtp output is the distributed mesh of an mpirun run (docs/distributed.md)"));
            goto done;
        }
        if (rec_distributed && (q->enabled_any || job.c.subdivide > 0 || job.c.soup)) {
            rc = cli_mpi_finish(cli_usage_error(
                cmd, "a distributed (.pvtp) output is written as meshed: no post-processing, "
                     "--subdivide or --soup"));
            goto done;
        }
    }
    if (cli_mpi_rank > 0) {
        /* Rank 0 reports; the other ranks only work. */
        job.c.quiet = 1;
        job.c.stats_path = NULL;
    }
    if (!cli_context_create(&job.c, &job.ctx)) {
        rc = cli_mpi_finish(CLI_FAIL);
        goto done;
    }
    if (!cli_context_group(&job.c, job.ctx, rec_group, &rec_ngroup)) {
        pm_context_destroy(job.ctx);
        rc = cli_mpi_finish(CLI_FAIL);
        goto done;
    }
    rc = cli_run_frames(cmd, input, &job.c, rec_frame, &job);
    cli_context_group_free(rec_group, rec_ngroup);
    rec_ngroup = 1;
    pm_context_destroy(job.ctx);
    rc = cli_mpi_finish(rc);
    if (rc == CLI_INTERRUPTED || cli_check_interrupt()) rc = CLI_INTERRUPTED;
done:
    free(out_default);
    free(out_joined);
    return rc;
}

int cmd_reconstruct(int argc, char **argv) { return cli_reconstruct_main(argc, argv, 0); }
