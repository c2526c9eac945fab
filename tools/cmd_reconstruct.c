/* pyramesh reconstruct: particles / point cloud -> density field
 * (pm_field_compute: splashsurf's SPH colour field, or seed 003's blurred
 * splat) -> marching cubes -> mesh file, with splashsurf's -r -l -c -t. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh reconstruct POINTS -o MESH -r RADIUS [options]\n"
    "\n"
    "Reconstructs the surface of a particle set or point cloud: a density field on\n"
    "a grid, then marching cubes. POINTS: .ply, .xyz (text, or raw f32 triplets),\n"
    ".vtk (POLYDATA or UNSTRUCTURED_GRID), .vtu, .bgeo(.gz) (Houdini), .csv. MESH:\n"
    ".ply (--ascii for text), .obj, .stl, .vtk, .vtp or .glb. Parameters mean what\n"
    "they mean in splashsurf:\n"
    "\n"
    "  -r, --particle-radius R      particle radius (required)\n"
    "  -l, --smoothing-length L     kernel support radius = 2*L*R (default 2.0)\n"
    "  -c, --cube-size C            grid cell edge = C*R (default 0.5)\n"
    "  -t, --surface-threshold T    iso value of the colour field (default 0.6)\n"
    "  --rest-density D             particle mass = D*(2R)^3 (default 1000)\n"
    "  --method sph|blur            SPH colour field (default) or splat + binomial blur\n"
    "  --blur-steps N               blur passes for --method blur (default 2)\n"
    "  --particle-aabb-min X,Y,Z    only particles inside this box (with -max);\n"
    "  --particle-aabb-max X,Y,Z    the others are dropped and counted\n"
    "  --max-memory SIZE            stop with an error when the grid needs more\n"
    "                               (default half the RAM; e.g. 512M, 8G)\n"
    "\n"
    "  -o, --output MESH        output file (required)\n"
    "  --normals MODE           none|forward|central|sobel (default central)\n"
    "  --soup                   3 vertices per triangle instead of an indexed mesh\n"
    "  --subdivide N            refine the mesh by N levels of Loop subdivision\n"
    "  --ascii                  ASCII PLY\n"
    "  --device D               auto|cpu|cuda (default auto)\n"
    "  --threads N              CPU threads (default: all cores)\n"
    "  --stats FILE.json        write counts and timings per stage as JSON\n"
    "  -q, --quiet              print nothing on success\n"
    "  -s, --start N, -e, --end N\n"
    "                           frame range when POINTS holds '{}'\n"
    "\n"
    "Sequences: 'frames/fluid_{}.vtk' matches any run of digits in place of '{}';\n"
    "the output needs '{}' too (-o out/surface_{}.ply) and gets the same digits.\n"
    "Missing frames are skipped with a note; a bad frame is reported and the rest\n"
    "go on (exit status 1). Exit status: 0 success, 1 error, 2 usage error,\n"
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
    R_AABB_MAX
};

static const cli_option options[] = {
    CLI_COMMON_OPTIONS,
    {"particle-radius", 'r', 1, R_RADIUS},
    {"smoothing-length", 'l', 1, R_SMOOTHING},
    {"cube-size", 'c', 1, R_CUBE},
    {"surface-threshold", 't', 1, R_THRESHOLD},
    {"rest-density", 0, 1, R_REST_DENSITY},
    {"method", 0, 1, R_METHOD},
    {"blur-steps", 0, 1, R_BLUR_STEPS},
    {"particle-aabb-min", 0, 1, R_AABB_MIN},
    {"particle-aabb-max", 0, 1, R_AABB_MAX},
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

    cli_progress_stage(p, "writing");
    t0 = cli_now_ms();
    s = pm_mesh_write(output, &mesh, &o->write);
    r->t.write_ms = cli_now_ms() - t0;
    if (s != PM_STATUS_OK) {
        pm_mesh_free(ctx, &mesh);
        pm_field_free(ctx, &field);
        return fail(p, s, output);
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
    r->active_cells = mesh.active_cells;
    r->vertices = mesh.num_vertices;
    r->triangles = mesh.num_triangles;
    r->soup = o->iso.mode == PM_MESH_SOUP;
    r->normals = o->iso.normals;
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
    int rc = cli_reconstruct_points(job->ctx, pts.xyz, pts.count, &job->o, f->output, p, r);
    pm_points_free(&pts);
    r->input = f->input;
    r->total_ms = cli_now_ms() - t_start;
    return rc;
}

int cmd_reconstruct(int argc, char **argv)
{
    static const char *const methods[] = {"sph", "blur", NULL};
    const char *cmd = "reconstruct";
    rec_job job;
    memset(&job, 0, sizeof job);
    job.c.normals = PM_NORMALS_CENTRAL;
    pm_field_params *fp = &job.o.field;
    fp->struct_size = sizeof *fp;
    fp->smoothing_length = 2.0;
    fp->cube_size = 0.5;
    fp->iso = 0.6;
    fp->rest_density = 1000.0;
    fp->blur_steps = 2;
    int have_min = 0, have_max = 0, have_blur_steps = 0;
    const char *input = NULL;
    cli_args a;
    cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id, k;
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
        default:
            if (cli_common_option(cmd, &a, id, v, &job.c) < 0) return CLI_USAGE;
        }
    }
    if (!input) return cli_usage_error(cmd, "missing the input POINTS");
    if (!(fp->radius > 0)) return cli_usage_error(cmd, "missing -r RADIUS (the particle radius)");
    if (!cli_common_finish(cmd, &job.c)) return CLI_USAGE;
    if (have_min != have_max)
        return cli_usage_error(cmd, "--particle-aabb-min and --particle-aabb-max go together");
    if (have_min) {
        for (k = 0; k < 3; k++)
            if (!(fp->aabb_min[k] < fp->aabb_max[k]))
                return cli_usage_error(cmd, "--particle-aabb-min must be below "
                                            "--particle-aabb-max on every axis");
        fp->use_aabb = 1;
    }
    if (have_blur_steps && fp->method != PM_FIELD_BLUR)
        return cli_usage_error(cmd, "--blur-steps applies to --method blur only");
    fp->max_memory_bytes = (size_t)job.c.max_memory;
    job.o.iso.struct_size = sizeof job.o.iso;
    job.o.iso.normals = job.c.normals;
    job.o.iso.mode = job.c.soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
    job.o.write.struct_size = sizeof job.o.write;
    job.o.write.ascii = job.c.ascii;
    job.o.subdivide = job.c.subdivide;

    if (!cli_context_create(&job.c, &job.ctx)) return CLI_FAIL;
    int rc = cli_run_frames(cmd, input, &job.c, rec_frame, &job);
    pm_context_destroy(job.ctx);
    if (rc == CLI_INTERRUPTED || cli_check_interrupt()) return CLI_INTERRUPTED;
    return rc;
}
