/* pyramesh isosurface: volume file -> marching cubes (pm_isosurface) ->
 * optional mesh post-processing (post_options.c) -> mesh file. A volume
 * larger than --max-memory is streamed slab by slab (pm_isosurface_stream)
 * where its format allows. Otherwise reads on the host, uploads to the
 * device when the context is CUDA, extracts (into device memory on one
 * GPU without --subdivide) and writes (pm_mesh_write_context); each stage
 * is timed. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh isosurface VOLUME -o MESH --iso V [options]\n"
    "\n"
    "Extracts the surface where the volume crosses V (marching cubes over a\n"
    "HistoPyramid). A sample is inside when it is above V (--inside below for\n"
    "distance fields), and the triangles face out of the inside. VOLUME is NRRD\n"
    "(.nrrd/.nhdr), VTK legacy STRUCTURED_POINTS (.vtk), VTK XML ImageData (.vti),\n"
    "INRIA (.inr, .inr.gz), MetaImage (.mha/.mhd), NIfTI (.nii, .nii.gz), or raw\n"
    "with --raw-dims. MESH: .ply (binary; --ascii for text), .obj, .stl, .vtk, .vtp\n"
    "(VTK XML) or .glb (binary glTF).\n"
    "\n"
    "options:\n"
    "  -o, --output MESH        output file (required)\n"
    "  --iso V                  iso value (required)\n"
    "  --inside SIDE            above|below: which side of V is the object (default\n"
    "                           above: bright objects, as VTK and scikit-image)\n"
    "  --normals MODE           none|forward|central|sobel (default central), or\n"
    "                           on|area: area-weighted normals of the final mesh\n"
    "  --soup                   3 vertices per triangle instead of an indexed mesh\n"
    "  --subdivide N            refine the mesh by N levels of Loop subdivision\n"
    "  --ascii                  ASCII PLY\n"
    "  --device D               auto|cpu|cuda (default auto: CUDA when a GPU is usable),\n"
    "                           cuda:N (GPU N), cuda:A,B,... or cuda:all (z slabs\n"
    "                           meshed on the GPUs together; the same mesh)\n"
    "  --threads N              CPU threads (default: all cores)\n"
    "  --stats FILE.json        write counts and timings as JSON\n"
    "  -q, --quiet              print nothing on success\n"
    "  --max-memory SIZE        volumes larger than SIZE (e.g. 512M, 8G) are streamed\n"
    "                           slab by slab within SIZE (raw and NRRD files; on a\n"
    "                           GPU SIZE bounds its memory; the same mesh); other\n"
    "                           formats are refused\n"
    "  --debug-dir DIR          write debug PNGs there (created if missing): the\n"
    "                           middle z slice's cells coloured by triangle count\n"
    "                           and the HistoPyramid levels over them (a sequence\n"
    "                           overwrites them with each frame)\n"
    "  --raw-dims NX,NY,NZ      read VOLUME as raw samples (x fastest)\n"
    "  --raw-type T             u8|u16|i16|f32|f64 (required with --raw-dims)\n"
    "  --raw-spacing SX,SY,SZ   sample spacing (default 1,1,1)\n"
    "  --raw-endian E           little|big (default little)\n"
    "  --raw-offset BYTES       bytes to skip at the start (a header); -1: the samples\n"
    "                           are the file's last bytes\n"
    "  --raw-allow-extra        accept bytes after the samples (an error by default:\n"
    "                           a header left in, dims too small or the wrong type)\n"
    "\n"
    "Post-processing (as reconstruct's, docs/splashsurf.md; the lattice is the\n"
    "volume's samples):\n"
    "  --normals-smoothing-iters N, --output-raw-normals=on\n"
    "  --mesh-cleanup=on, --mesh-cleanup-snap-dist D, --decimate-barnacles=on,\n"
    "  --keep-verts=on          marching-cubes cleanup (Moore and Warren)\n"
    "  --mesh-smoothing-iters N Laplacian smoothing (turns --mesh-cleanup on)\n"
    "  --taubin-iters N, --taubin-lambda L, --taubin-mu M   Taubin smoothing\n"
    "  --remove-components-below N, --keep-largest-component=on\n"
    "  --decimate-target N, --decimate-ratio F, --decimate-error E  (meshoptimizer)\n"
    "  --mesh-aabb-min X Y Z, --mesh-aabb-max X Y Z, --mesh-aabb-clamp-verts=on\n"
    "  --generate-quads=on (--quad-max-edge-diag-ratio, --quad-max-normal-angle,\n"
    "                           --quad-max-interior-angle), --output-raw-mesh=on\n"
    "  --check-mesh=on, --check-mesh-closed/-manifold/-orientation=on, -v\n"
    "  (--mesh-smoothing-weights, --sph-normals and -a need particles: reconstruct)\n"
    "  -s, --start N / -e, --end N\n"
    "                           frame range when VOLUME holds '{}' (frames/ct_{}.nrrd)\n"
    "\n"
    "Sequences: an input holding '{}' matches any run of digits there; the output\n"
    "needs '{}' too and gets the same digits. Exit status: 0 success, 1 error,\n"
    "2 usage error, 130 interrupted.\n";

enum {
    OPT_ISO = 1,
    OPT_RAW_DIMS,
    OPT_RAW_TYPE,
    OPT_RAW_SPACING,
    OPT_RAW_ENDIAN,
    OPT_RAW_OFFSET,
    OPT_RAW_ALLOW_EXTRA,
    OPT_DEBUG_DIR,
    OPT_INSIDE
};

static const cli_option options[] = {
    CLI_COMMON_OPTIONS,
    {"iso", 0, 1, OPT_ISO},
    {"raw-dims", 0, 1, OPT_RAW_DIMS},
    {"raw-type", 0, 1, OPT_RAW_TYPE},
    {"raw-spacing", 0, 1, OPT_RAW_SPACING},
    {"raw-endian", 0, 1, OPT_RAW_ENDIAN},
    {"raw-offset", 0, 1, OPT_RAW_OFFSET},
    {"raw-allow-extra", 0, 0, OPT_RAW_ALLOW_EXTRA},
    {"debug-dir", 0, 1, OPT_DEBUG_DIR},
    {"inside", 0, 1, OPT_INSIDE},
    CLI_POST_OPTIONS,
    /* --normals keeps taking a value here (none|forward|central|sobel, or
     * on|off|area), so a bad one is an error naming it (later entries win) */
    {"normals", 0, 1, OPT_P_NORMALS},
    {NULL, 0, 0, 0},
};

typedef struct iso_job {
    cli_common c;
    double iso;
    int have_raw;
    pm_raw_options raw;
    pm_context *ctx;
    pm_context *group[CLI_MAX_GPUS]; /* --device cuda:all|A,B: group[0] = ctx */
    int ngroup;
    const char *debug_dir; /* --debug-dir, or NULL */
    pm_inside inside;      /* --inside */
    cli_post post;         /* mesh post-processing (zeroed: none) */
    int mpi_distributed;   /* under mpirun, output .pvtp: every rank writes its part */
    uint64_t *mpi_ids;     /* the part's global vertex ids (distributed) */
} iso_job;

/* Parses the --raw-* options shared with `info`; returns 1 handled, 0 not
 * a raw option, -1 usage error. */
static int raw_option(const char *cmd, const cli_args *a, int id, const char *v,
                      pm_raw_options *raw, int *have_dims, int *have_type, int *have_other)
{
    static const char *const types[] = {"u8", "u16", "i16", "f32", "f64", NULL};
    static const pm_sample_type types_enum[] = {PM_SAMPLE_U8, PM_SAMPLE_U16, PM_SAMPLE_I16,
                                                PM_SAMPLE_F32, PM_SAMPLE_F64};
    static const char *const endians[] = {"little", "big", NULL};
    int k;
    uint64_t off;
    switch (id) {
    case OPT_RAW_DIMS: {
        size_t dims[3];
        if (!cli_parse_dims(cmd, a->name, v, dims)) return -1;
        raw->nx = dims[0];
        raw->ny = dims[1];
        raw->nz = dims[2];
        *have_dims = 1;
        return 1;
    }
    case OPT_RAW_TYPE:
        if (!cli_parse_choice(cmd, a->name, v, types, &k)) return -1;
        raw->type = types_enum[k];
        *have_type = 1;
        return 1;
    case OPT_RAW_SPACING:
        if (!cli_parse_triple(cmd, a->name, v, raw->spacing)) return -1;
        for (k = 0; k < 3; k++)
            if (!(raw->spacing[k] > 0))
                return cli_usage_error(cmd, "%s must be positive, got '%s'", a->name, v), -1;
        *have_other = 1;
        return 1;
    case OPT_RAW_ENDIAN:
        if (!cli_parse_choice(cmd, a->name, v, endians, &k)) return -1;
        raw->big_endian = k;
        *have_other = 1;
        return 1;
    case OPT_RAW_OFFSET:
        if (strcmp(v, "-1") == 0) {
            raw->data_at_end = 1;
        } else {
            if (!cli_parse_size(cmd, a->name, v, &off)) return -1;
            raw->offset_bytes = off;
        }
        *have_other = 1;
        return 1;
    case OPT_RAW_ALLOW_EXTRA:
        raw->allow_extra = 1;
        *have_other = 1;
        return 1;
    default: return 0;
    }
}

/* The raw-volume options as `info` uses them: same table entries. */
int cli_raw_option(const char *cmd, const cli_args *a, const char *long_name, const char *v,
                   pm_raw_options *raw, int *have_dims, int *have_type, int *have_other)
{
    for (const cli_option *o = options; o->id; o++)
        if (o->long_name && strcmp(o->long_name, long_name) == 0 && o->id >= OPT_RAW_DIMS &&
            o->id <= OPT_RAW_ALLOW_EXTRA)
            return raw_option(cmd, a, o->id, v, raw, have_dims, have_type, have_other);
    return 0;
}

/* Bytes spanned by a volume's samples, with its strides. */
static int volume_bytes(const pm_volume *v, size_t *out)
{
    size_t row = v->row_stride ? v->row_stride : v->nx;
    size_t slice = v->slice_stride;
    if (!slice && __builtin_mul_overflow(row, v->ny, &slice)) return 0;
    size_t span, last;
    if (__builtin_mul_overflow(v->nz - 1, slice, &span)) return 0;
    if (__builtin_mul_overflow(v->ny - 1, row, &last)) return 0;
    if (__builtin_add_overflow(span, last, &span)) return 0;
    if (__builtin_add_overflow(span, v->nx, &span)) return 0;
    return !__builtin_mul_overflow(span, pm_sample_size(v->type), out);
}

static int fail(cli_progress *p, pm_status s, const char *what)
{
    cli_progress_clear(p);
    cli_error_status(s, what);
    return CLI_FAIL;
}

/* Words where the result would be empty or partial without saying why: an
 * iso value outside the data's range, NaN samples. */
static void warn_range(cli_progress *p, const char *input, const pm_volume *vol, double iso)
{
    double lo, hi;
    size_t nan;
    if (pm_volume_range(vol, &lo, &hi, &nan) != PM_STATUS_OK) return;
    if (nan) {
        cli_progress_clear(p);
        fprintf(stderr,
                "pyramesh: warning: %s: %zu NaN sample%s (counted as outside the surface)\n", input,
                nan, nan == 1 ? "" : "s");
    }
    if (!(iso >= lo && iso <= hi)) {
        cli_progress_clear(p);
        fprintf(stderr,
                "pyramesh: warning: %s: iso value %g is outside the data range [%g, %g]: the "
                "surface is "
                "empty\n",
                input, iso, lo, hi);
    }
}

/* After the extraction: subdivision, post-processing or writing, debug
 * images and the result's counts. Frees mesh and vol. */
static int iso_finish(iso_job *job, const cli_frame *f, cli_progress *p, cli_result *r,
                      pm_volume *volp, pm_mesh *meshp, const pm_isosurface_options *optp,
                      double t_start)
{
    const cli_common *c = &job->c;
    const cli_post *q = &job->post;
    pm_volume vol = *volp;
    pm_mesh mesh = *meshp;
    pm_isosurface_options opt = *optp;
    pm_status s;
    double t0;
    if (job->mpi_ids || (cli_mpi_rank > 0 && !job->mpi_ids)) {
        /* Under mpirun: the distributed parts are written by every rank;
         * a gathered mesh only by rank 0. */
        if (job->mpi_ids) {
            cli_progress_stage(p, "writing");
            t0 = cli_now_ms();
            s = cli_mpi_write_pvtp(f->output, &mesh, job->mpi_ids);
            r->t.write_ms = cli_now_ms() - t0;
            free(job->mpi_ids);
            job->mpi_ids = NULL;
            if (s != PM_STATUS_OK) {
                pm_mesh_free(job->ctx, &mesh);
                return fail(p, s, f->output);
            }
        }
        if (cli_mpi_rank > 0) {
            pm_mesh_free(job->ctx, &mesh);
            pm_volume_free(&vol);
            return CLI_OK;
        }
    } else if (c->subdivide > 0) {
        cli_progress_stage(p, "subdividing");
        s = cli_subdivide_mesh(job->ctx, c->subdivide, opt.normals, &mesh, &r->subdivide_ms);
        if (s != PM_STATUS_OK) {
            pm_mesh_free(job->ctx, &mesh);
            pm_volume_free(&vol);
            return fail(p, s, "subdividing the surface");
        }
    }
    if (cli_interrupted) {
        pm_mesh_free(job->ctx, &mesh);
        pm_volume_free(&vol);
        return CLI_INTERRUPTED;
    }

    r->active_cells = mesh.active_cells;
    pm_write_options wopt;
    memset(&wopt, 0, sizeof wopt);
    wopt.struct_size = sizeof wopt;
    wopt.ascii = c->ascii;
    pm_mesh shown = mesh; /* what the result reports (a deferred write takes the mesh) */
    if (q->enabled_any) {
        /* The lattice of marching cubes: the samples. */
        double spacing[3];
        for (int k = 0; k < 3; k++)
            spacing[k] = vol.spacing[k] != 0 ? vol.spacing[k] : 1.0;
        int rc = cli_postprocess(job->ctx, q, NULL, 0, NULL, NULL, vol.origin, spacing, c->normals,
                                 &mesh, f->output, &wopt, p, r);
        if (rc != CLI_OK) {
            pm_mesh_free(job->ctx, &mesh);
            pm_volume_free(&vol);
            return rc;
        }
    } else if (!job->mpi_distributed) {
        cli_progress_stage(p, "writing");
        shown = mesh;
        if (!job->debug_dir && cli_write_deferred(job->ctx, f->output, &mesh, &wopt, r)) {
            /* written while the next frame is meshed */
        } else {
            s = cli_write_now(job->ctx, f->output, &mesh, &wopt, r);
            if (s != PM_STATUS_OK) {
                pm_mesh_free(job->ctx, &mesh);
                pm_volume_free(&vol);
                return fail(p, s, f->output);
            }
        }
    }
    if (!r->write_deferred) shown = mesh;

    if (job->debug_dir) {
        /* On the host volume, after the mesh: not part of any timing. */
        cli_progress_stage(p, "debug images");
        s = pm_debug_images(&vol, job->iso, job->inside, job->debug_dir);
        if (s != PM_STATUS_OK) {
            pm_mesh_free(job->ctx, &mesh);
            pm_volume_free(&vol);
            return fail(p, s, job->debug_dir);
        }
    }

    r->command = "isosurface";
    r->input = f->input;
    r->output = f->output;
    r->device = pm_device_string(pm_context_device(job->ctx));
    cli_group_name(job->group, job->ngroup, r->device_name, sizeof r->device_name);
    r->ranks = cli_mpi_ranks;
    r->threads = pm_context_num_threads(job->ctx);
    r->subdivide = c->subdivide;
    r->nx = vol.nx;
    r->ny = vol.ny;
    r->nz = vol.nz;
    r->sample_type = pm_sample_type_string(vol.type);
    for (int k = 0; k < 3; k++)
        r->spacing[k] = vol.spacing[k] != 0 ? vol.spacing[k] : 1.0;
    r->iso = job->iso;
    r->cells = (uint64_t)(vol.nx - 1) * (uint64_t)(vol.ny - 1) * (uint64_t)(vol.nz - 1);
    r->vertices = shown.num_vertices;
    r->triangles = shown.num_triangles;
    r->soup = c->soup;
    r->normals = shown.normals ? c->normals : PM_NORMALS_NONE;
    r->normals_name = !shown.normals ? NULL
                      : opt.normals == PM_NORMALS_NONE || cli_post_moves(q) || q->normals
                          ? "area-weighted"
                          : NULL;
    r->total_ms = cli_now_ms() - t_start;
    pm_mesh_free(job->ctx, &mesh);
    pm_volume_free(&vol);
    return CLI_OK;
}

/* Under mpirun: each rank reads its slab, the ranks mesh the volume
 * together (tools/cli_mpi.c); rank 0 goes on with the gathered mesh, or
 * every rank writes its part of a distributed (.pvtp) output. */
static int iso_frame_mpi(iso_job *job, const cli_frame *f, cli_progress *p, cli_result *r,
                         double t_start)
{
    const cli_common *c = &job->c;
    cli_progress_stage(p, "meshing over MPI ranks");
    pm_isosurface_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.normals = c->normals;
    opt.mode = c->soup && !job->mpi_distributed ? PM_MESH_SOUP : PM_MESH_INDEXED;
    opt.inside = job->inside;
    const cli_post *q = &job->post;
    if (q->normals || cli_post_moves(q)) opt.normals = PM_NORMALS_NONE;
    pm_volume vol;
    pm_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    double t0 = cli_now_ms();
    pm_status s = cli_mpi_isosurface(job->ctx, f->input, job->have_raw ? &job->raw : NULL,
                                     (size_t)c->max_memory, job->iso, &opt, job->mpi_distributed,
                                     &mesh, &job->mpi_ids, &vol, &r->t.read_ms);
    r->t.extract_ms = cli_now_ms() - t0 - r->t.read_ms;
    snprintf(r->report.path, sizeof r->report.path, "backend=%s mpi=%s ranks=%d decomposition=slabs",
             pm_device_string(pm_context_device(job->ctx)),
             job->mpi_distributed ? "distributed" : "gather", cli_mpi_ranks);
    if (s != PM_STATUS_OK) {
        pm_mesh_free(job->ctx, &mesh);
        free(job->mpi_ids);
        job->mpi_ids = NULL;
        if (cli_mpi_rank > 0) return CLI_FAIL; /* rank 0 prints the agreed message */
        return fail(p, s, f->input);
    }
    return iso_finish(job, f, p, r, &vol, &mesh, &opt, t_start);
}

static int iso_frame(void *user, const cli_frame *f, cli_progress *p, cli_result *r)
{
    iso_job *job = user;
    const cli_common *c = &job->c;
    if (!cli_check_io(f->input, f->output, !job->have_raw)) return CLI_FAIL;
    double t_start = cli_now_ms();
    if (cli_mpi_rank >= 0) return iso_frame_mpi(job, f, p, r, t_start);

    cli_progress_stage(p, "reading");
    pm_volume vol;
    memset(&vol, 0, sizeof vol);
    double t0 = cli_now_ms();
    /* A volume larger than --max-memory is streamed slab by slab where
     * its format allows (raw, NRRD): the same mesh, the volume never whole
     * in memory. vol then holds the geometry only (data NULL). */
    pm_volume_source src;
    int streamed = 0;
    pm_status s = PM_STATUS_OK;
    if (c->max_memory &&
        pm_volume_source_open(f->input, job->have_raw ? &job->raw : NULL, &src) == PM_STATUS_OK) {
        const uint64_t bytes =
            (uint64_t)src.nx * src.ny * src.nz * (uint64_t)pm_sample_size(src.type);
        if (bytes > c->max_memory) {
            streamed = 1;
            vol.type = src.type;
            vol.nx = src.nx;
            vol.ny = src.ny;
            vol.nz = src.nz;
            for (int k = 0; k < 3; k++) {
                vol.spacing[k] = src.spacing[k];
                vol.origin[k] = src.origin[k];
            }
        } else {
            pm_volume_source_close(&src);
        }
    }
    if (streamed && job->debug_dir) {
        pm_volume_source_close(&src);
        cli_progress_clear(p);
        cli_error("%s: --debug-dir needs the volume in memory, and it is larger than "
                  "--max-memory (it is streamed)",
                  f->input);
        return CLI_FAIL;
    }
    if (!streamed) {
        s = pm_volume_read(f->input, job->have_raw ? &job->raw : NULL, (size_t)c->max_memory,
                           &vol);
        if (s != PM_STATUS_OK) return fail(p, s, f->input);
        r->t.read_ms = cli_now_ms() - t0;
    }
    if (cli_interrupted) {
        if (streamed) pm_volume_source_close(&src);
        pm_volume_free(&vol);
        return CLI_INTERRUPTED;
    }
    if (!streamed) warn_range(p, f->input, &vol, job->iso);

    /* Extract: upload (CUDA only) plus all of pm_isosurface; no file I/O. */
    cli_progress_stage(p, "extracting");
    pm_mesh mesh;
    memset(&mesh, 0, sizeof mesh);
    pm_isosurface_options opt;
    memset(&opt, 0, sizeof opt);
    opt.struct_size = sizeof opt;
    opt.normals = c->normals;
    opt.mode = c->soup ? PM_MESH_SOUP : PM_MESH_INDEXED;
    opt.inside = job->inside;
    /* Normals that post-processing replaces are not computed here. */
    const cli_post *q = &job->post;
    if (q->normals || cli_post_moves(q)) opt.normals = PM_NORMALS_NONE;
    opt.output_in_context_memory = cli_mesh_memory(job->ctx, q, c->subdivide);
    t0 = cli_now_ms();
    pm_volume in = vol;
    void *dev = NULL;
    /* Streaming and several GPUs build the mesh on the host. */
    const int multi = job->ngroup > 1 && !streamed;
    if (streamed || multi) opt.output_in_context_memory = 0;
    if (!streamed && !multi && pm_context_device(job->ctx) == PM_DEVICE_CUDA) {
        size_t bytes;
        if (!volume_bytes(&vol, &bytes)) {
            pm_volume_free(&vol);
            cli_progress_clear(p);
            cli_error("%s: volume size overflows", f->input);
            return CLI_FAIL;
        }
        s = pm_alloc(job->ctx, bytes, &dev);
        /* The last frame's mesh, still being written, may hold the memory. */
        if (s == PM_STATUS_OUT_OF_MEMORY && cli_write_join()) s = pm_alloc(job->ctx, bytes, &dev);
        if (s == PM_STATUS_OK) s = pm_upload(job->ctx, dev, vol.data, bytes);
        if (s != PM_STATUS_OK) {
            pm_free(job->ctx, dev);
            pm_volume_free(&vol);
            return fail(p, s, "uploading the volume");
        }
        in.data = dev;
    }
    r->report.timed = 1;
    opt.report = &r->report;
    if (streamed) {
        pm_stream_report sr;
        pm_stream_options so;
        memset(&so, 0, sizeof so);
        so.struct_size = sizeof so;
        so.max_memory_bytes = (size_t)c->max_memory;
        so.report = &sr;
        s = pm_isosurface_stream(job->ctx, &src, job->iso, &opt, &so, &mesh);
        pm_volume_source_close(&src);
        /* Reading and extracting alternate: the read time is the source's. */
        r->t.read_ms = s == PM_STATUS_OK || s == PM_STATUS_TRUNCATED ? sr.read_ms : 0.0;
        r->t.extract_ms = cli_now_ms() - t0 - r->t.read_ms;
    } else if (multi) {
        /* --device cuda:all|A,B: slabs over the GPUs (pm_isosurface_multi). */
        s = pm_isosurface_multi(job->group, job->ngroup, &in, job->iso, &opt, &mesh);
        r->t.extract_ms = cli_now_ms() - t0;
    } else {
        s = pm_isosurface(job->ctx, &in, job->iso, &opt, &mesh);
        if (s == PM_STATUS_OUT_OF_MEMORY && opt.output_in_context_memory && cli_write_join())
            s = pm_isosurface(job->ctx, &in, job->iso, &opt, &mesh);
        r->t.extract_ms = cli_now_ms() - t0;
    }
    pm_free(job->ctx, dev);
    if (s != PM_STATUS_OK) {
        pm_mesh_free(job->ctx, &mesh);
        pm_volume_free(&vol);
        return fail(p, s, f->input);
    }
    return iso_finish(job, f, p, r, &vol, &mesh, &opt, t_start);
}

int cmd_isosurface(int argc, char **argv)
{
    const char *cmd = "isosurface";
    iso_job job;
    memset(&job, 0, sizeof job);
    job.c.normals = PM_NORMALS_CENTRAL;
    cli_post_init(&job.post);
    job.raw.struct_size = sizeof job.raw;
    int have_iso = 0, have_dims = 0, have_type = 0, have_other = 0;
    const char *input = NULL;
    cli_args a;
    cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = cli_args_next(&a, options, &v)) != CLI_ARG_END) {
        if (id == CLI_ARG_BAD) return CLI_USAGE;
        if (id == OPT_HELP) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if (id == CLI_ARG_POSITIONAL) {
            if (input) return cli_usage_error(cmd, "more than one input ('%s', '%s')", input, v);
            input = v;
            continue;
        }
        if (id == OPT_ISO) {
            if (!cli_parse_double(cmd, a.name, v, &job.iso)) return CLI_USAGE;
            have_iso = 1;
            continue;
        }
        if (id == OPT_INSIDE) {
            static const char *const sides[] = {"above", "below", NULL};
            int k;
            if (!cli_parse_choice(cmd, a.name, v, sides, &k)) return CLI_USAGE;
            job.inside = k ? PM_INSIDE_BELOW : PM_INSIDE_ABOVE;
            continue;
        }
        if (id == OPT_DEBUG_DIR) {
            if (!*v) return cli_usage_error(cmd, "--debug-dir needs a directory");
            job.debug_dir = v;
            continue;
        }
        int h = cli_post_option(cmd, &a, id, v, &job.post, &job.c);
        if (h == 0) h = cli_common_option(cmd, &a, id, v, &job.c);
        if (h == 0) h = raw_option(cmd, &a, id, v, &job.raw, &have_dims, &have_type, &have_other);
        if (h < 0) return CLI_USAGE;
    }
    if (!input) return cli_usage_error(cmd, "missing the input VOLUME");
    if (!have_iso) return cli_usage_error(cmd, "missing --iso V");
    if (!cli_common_finish(cmd, &job.c)) return CLI_USAGE;
    if (!cli_post_finish(cmd, &job.post, &job.c, 0, 0)) return CLI_USAGE;
    if (have_dims != have_type || (have_other && !have_dims))
        return cli_usage_error(cmd, "raw volumes need both --raw-dims and --raw-type");
    job.have_raw = have_dims;
    const char *out = job.c.output ? job.c.output : "";
    size_t olen = strlen(out);
    int pvtp = olen > 5 && strcmp(out + olen - 5, ".pvtp") == 0;

    if (!cli_mpi_start(&argc, &argv)) return CLI_FAIL;
    if (pvtp && cli_mpi_rank < 0)
        return cli_mpi_finish(cli_usage_error(
            cmd, "a .pvtp output is the distributed mesh of an mpirun run (docs/distributed.md)"));
    if (pvtp && (job.post.enabled_any || job.c.subdivide > 0 || job.debug_dir || job.c.soup))
        return cli_mpi_finish(cli_usage_error(
            cmd, "a distributed (.pvtp) output is written as meshed: no post-processing, "
                 "--subdivide, --soup or --debug-dir"));
    job.mpi_distributed = pvtp;
    if (cli_mpi_rank > 0) {
        /* Rank 0 reports; the other ranks only work. */
        job.c.quiet = 1;
        job.c.stats_path = NULL;
    }
    if (!cli_context_create(&job.c, &job.ctx)) return cli_mpi_finish(CLI_FAIL);
    if (!cli_context_group(&job.c, job.ctx, job.group, &job.ngroup)) {
        pm_context_destroy(job.ctx);
        return cli_mpi_finish(CLI_FAIL);
    }
    int rc = cli_run_frames(cmd, input, &job.c, iso_frame, &job);
    cli_context_group_free(job.group, job.ngroup);
    pm_context_destroy(job.ctx);
    rc = cli_mpi_finish(rc);
    if (rc == CLI_INTERRUPTED || cli_check_interrupt()) return CLI_INTERRUPTED;
    return rc;
}
