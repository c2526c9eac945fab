/* Shared declarations of the pyramesh command-line tool. The CLI only parses
 * arguments, calls the public API (include/pyramesh.h) and prints; it never
 * reaches into the library's internals. */
#ifndef PM_CLI_H
#define PM_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyramesh.h"

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* Exit statuses: 0 success, 1 input or runtime error, 2 usage error,
 * 130 interrupted by SIGINT (128 + signal number, as shells report it). */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_INTERRUPTED = 130 };

/* ---- main.c: errors, signals, clock ---------------------------------- */

/* Prints "pyramesh: error: <message>" on stderr. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* Prints the error of a failed library call: the library's own message
 * (which names the file where one is involved), prefixed by `what` when
 * the message does not already mention it, and the status name. */
void cli_error_status(pm_status s, const char *what);
/* Prints "pyramesh <cmd>: <message>", the command's usage line and a hint
 * to --help, on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* The one-line synopsis of a command (for usage errors). */
const char *cli_synopsis(const char *cmd);

/* Set by the SIGINT handler; checked between stages and frames. */
extern volatile sig_atomic_t cli_interrupted;
/* A temporary file the CLI itself is writing (NULL when none): removed when
 * the run is interrupted. */
void cli_set_temp_file(const char *path);
/* When interrupted: removes the temp file, prints "pyramesh: interrupted"
 * and returns 1 (the caller then exits 130). Returns 0 otherwise. */
int cli_check_interrupt(void);

/* Monotonic wall clock in milliseconds. */
double cli_now_ms(void);

/* ---- shared pieces of isosurface/reconstruct ------------------------- */

#define CLI_MAX_GPUS 16

/* Options both mesh-producing commands take. */
typedef struct cli_common {
    const char *output;     /* -o */
    const char *stats_path; /* --stats */
    pm_normals normals;
    int soup, ascii, quiet;
    pm_device device;
    int gpus[CLI_MAX_GPUS]; /* --device cuda:0,1: the GPUs (gpu_count of them) */
    int gpu_count;
    int all_gpus; /* --device cuda:all */
    int threads;
    uint64_t max_memory; /* 0 = library default */
    int have_start, have_end;
    long long start, end; /* -s/-e frame numbers, inclusive */
    int subdivide;        /* --subdivide N: Loop levels after the extraction */
} cli_common;

/* --subdivide: replaces *mesh (host memory) by its uniform Loop
 * subdivision of `levels` levels, normals as `normals`; *ms gets the time. */
pm_status cli_subdivide_mesh(pm_context *ctx, int levels, pm_normals normals, pm_mesh *mesh, double *ms);

/* Checks that `path` exists, is a regular file and is readable; prints the
 * error and returns 0 when not. */
int cli_check_input(const char *path);
/* Checks that the directory `path` would be written into exists and is
 * writable, before any work is done; prints the error and returns 0. */
int cli_check_output_dir(const char *path);
/* cli_check_input (allow_dir: or a directory, a DICOM series), then the
 * output: not a directory, not the input file itself (by device and inode,
 * so links and other spellings count), in a writable directory. */
int cli_check_io(const char *input, const char *output, int allow_dir);
/* Whether the extension of `path` names a mesh format we write. */
int cli_mesh_extension_ok(const char *path);
/* Lower-case extension of `path` without the dot ("" when none), in buf. */
const char *cli_extension(const char *path, char *buf, size_t size);

/* Creates the context the options ask for; prints the error on failure. */
int cli_context_create(const cli_common *c, pm_context **out);
/* A second context on the device of ctx, the last one cli_context_create
 * made (for a thread of its own); 0 when ctx is not that one or it fails. */
int cli_context_twin(pm_context *ctx, pm_context **out);
/* The contexts of --device cuda:all or cuda:A,B,...: group[0] = first (from
 * cli_context_create), one more per further GPU; *count = 1 otherwise (and
 * under mpirun, where ranks take the GPUs). Prints the error and returns 0
 * on failure; cli_context_group_free destroys group[1..]. */
int cli_context_group(const cli_common *c, pm_context *first, pm_context **group, int *count);
void cli_context_group_free(pm_context **group, int count);
/* "cuda:0 NAME + cuda:1 NAME ..." for --stats. */
void cli_group_name(pm_context *const *group, int count, char *out, size_t size);

/* ---- stats.c: JSON ---------------------------------------------------- */

/* A growing string buffer (for the --stats JSON). */
typedef struct cli_buf {
    char *data;
    size_t len, cap;
    int failed; /* an allocation failed: the content is incomplete */
} cli_buf;
void cli_buf_printf(cli_buf *b, const char *fmt, ...) CLI_PRINTF(2, 3);
void cli_buf_json_string(cli_buf *b, const char *s);
void cli_buf_free(cli_buf *b);
/* Writes `content` to `path` atomically (temporary file in the same
 * directory, then rename); prints the error and returns 0 on failure. */
int cli_write_file_atomic(const char *path, const char *content, size_t len);

/* One mesh post-processing step of a run (post_options.c): its name, where
 * it ran ("host" or "device"), its time and the counts after it. */
typedef struct cli_post_step {
    const char *name;
    const char *path;
    double ms;
    size_t triangles_in, triangles, vertices;
} cli_post_step;
#define CLI_MAX_POST_STEPS 48

/* What one run of isosurface or reconstruct produced, for the summary and
 * the JSON. Fields that do not apply stay zero / NULL. */
typedef struct cli_result {
    const char *command; /* "isosurface" or "reconstruct" */
    const char *input, *output;
    const char *device;    /* a static string */
    char device_name[128]; /* a copy: the context may be gone when it is printed */
    /* volume / grid */
    size_t nx, ny, nz;
    const char *sample_type;
    double spacing[3];
    double iso;
    uint64_t cells, active_cells;
    /* points */
    int have_points;
    size_t particles_read, particles_used, particles_dropped;
    /* mesh */
    size_t vertices, triangles;
    int soup;
    pm_normals normals;
    const char *normals_name; /* when set, the normals' kind instead of
                               * cli_normals_string(normals): "area-weighted", "sph" */
    /* timings in ms */
    pm_timings t;
    double upload_ms, total_ms;
    int threads;
    int ranks; /* MPI ranks under mpirun, else 0 */
    pm_isosurface_report report; /* the extraction's path and stages */
    int subdivide;               /* --subdivide levels */
    double subdivide_ms;
    /* mesh post-processing, in order (none: num_post 0) */
    cli_post_step post[CLI_MAX_POST_STEPS];
    int num_post;
    double post_ms; /* their sum */
    /* The mesh went to the sequence's writer thread (cli_write_deferred):
     * t.write_ms and the write's outcome are filled when it is done. */
    int write_deferred;
    int write_failed;
    double write_wait_ms; /* waited for the previous frame's write (not this frame's work) */
    char write_error[512]; /* the deferred write's message when it failed */
    const char *write_path; /* pm_mesh_write_route's word; NULL: not written by the command */
} cli_result;

/* The one-screen summary on stdout. */
void cli_print_summary(const cli_result *r);
/* One line per frame of a sequence. */
void cli_print_frame_line(const char *frame, const cli_result *r);
/* Appends the JSON object of one run to b. */
void cli_result_json(cli_buf *b, const cli_result *r, int indent);
/* Name of a normals mode for output ("central", ...). */
const char *cli_normals_string(pm_normals n);

/* ---- progress.c ----------------------------------------------------------- */

/* A \r-updated status line on stderr, shown only when stderr is a terminal
 * and --quiet is not given. */
typedef struct cli_progress {
    int enabled;
    int shown; /* a line is on the screen */
    double t0;
    size_t total, done, failed;
    const char *frame; /* the frame being worked on, or NULL */
} cli_progress;
void cli_progress_init(cli_progress *p, int quiet, size_t total_frames);
/* Shows the current stage ("reading", "density", ...). */
void cli_progress_stage(cli_progress *p, const char *stage);
/* Records a finished frame. */
void cli_progress_frame_done(cli_progress *p, int failed);
/* Removes the line so that other output starts on a clean line. */
void cli_progress_clear(cli_progress *p);

/* ---- sequence.c ----------------------------------------------------------- */

/* One frame of a run: input and output names (substituted), the frame's
 * digits as they appear in the input name (NULL for a single run). */
typedef struct cli_frame {
    char *input, *output, *stats, *digits;
    long long number;
} cli_frame;

/* Processes one frame; returns CLI_OK, CLI_FAIL or CLI_INTERRUPTED. */
typedef int (*cli_frame_fn)(void *user, const cli_frame *frame, cli_progress *progress,
                            cli_result *result);

/* Runs fn over the input (a single file, or every frame matched by a `{}`
 * pattern), reports progress, writes --stats, and returns the exit status.
 * In a sequence a frame's mesh may be written by a writer thread while the
 * next frame is computed (cli_write_deferred); the frame is counted, its
 * line printed and its stats written once its file is. */
int cli_run_frames(const char *cmd, const char *input, const cli_common *c, cli_frame_fn fn,
                   void *user);

/* In a sequence (outside mpirun): waits for the previous frame's write,
 * then hands `mesh` (host or context memory; it becomes the writer's,
 * *mesh is zeroed) to the writer thread, which writes `path` with *w (the
 * mesh is freed on ctx when the write is joined), and returns 1. Else
 * returns 0 and the caller writes.
 * path and r stay valid until the frame is finished (cli_run_frames). */
int cli_write_deferred(pm_context *ctx, const char *path, pm_mesh *mesh,
                       const pm_write_options *w, cli_result *r);
/* In a sequence: waits for the write in flight, which frees its mesh
 * (in GPU memory it is one more mesh there); returns 1 if there was one.
 * A frame whose device memory ran out retries once after it. */
int cli_write_join(void);
/* Writes the mesh in the frame's turn (pm_mesh_write_context), recording
 * its route and time in r. */
pm_status cli_write_now(pm_context *ctx, const char *path, const pm_mesh *mesh,
                        const pm_write_options *w, cli_result *r);

/* ---- cli_mpi.c: runs under mpirun (docs/distributed.md) -------------------- */

/* This process's rank and the rank count under mpirun, else -1 and 0. */
extern int cli_mpi_rank, cli_mpi_ranks;
/* Initialises MPI when mpirun started the process; 0 (error printed) when
 * it cannot, or when this build has no MPI and mpirun asked for ranks. */
int cli_mpi_start(int *argc, char ***argv);
/* Finalises MPI; returns the largest exit status of all ranks. */
int cli_mpi_finish(int rc);
/* Reads this rank's slab of `input` and meshes the volume over the ranks:
 * the mesh on rank 0 (others: empty), or with `distributed` each rank's
 * part and its global vertex ids. geometry: the volume's size, type,
 * origin and spacing (no data). */
pm_status cli_mpi_isosurface(pm_context *ctx, const char *input, const pm_raw_options *raw,
                             size_t max_memory, double iso, const pm_isosurface_options *opt,
                             int distributed, pm_mesh *mesh, uint64_t **ids, pm_volume *geometry,
                             double *read_ms);
/* The particle surface over the ranks (pm_mpi_reconstruct): every rank
 * holds all n particles (read from the file) and passes its contiguous
 * share; the mesh on rank 0, where rep gets the lattice, the particle
 * counts and the stage times. With ids: the distributed form
 * (pm_mpi_reconstruct_local), every rank's part in mesh and its ids. */
pm_status cli_mpi_reconstruct(pm_context *ctx, const float *xyz, size_t n,
                              const pm_field_params *fp, const pm_reconstruct_options *ro,
                              const pm_isosurface_options *iso, pm_mesh *mesh, uint64_t **ids,
                              pm_reconstruct_report *rep);
/* Writes the distributed mesh: parts <stem>_<rank>.vtp and the .pvtp index. */
pm_status cli_mpi_write_pvtp(const char *path, const pm_mesh *mesh, const uint64_t *ids);

/* ---- commands ------------------------------------------------------------- */
int cmd_isosurface(int argc, char **argv);
int cmd_reconstruct(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_collide(int argc, char **argv);
/* The number of self-intersecting triangle pairs of a host mesh (pm_collide
 * with bvh_b == bvh_a, on an AUTO context); for `info --self-intersections`. */
pm_status cli_self_intersections(const pm_mesh *mesh, size_t *count);
int cmd_subdivide(int argc, char **argv);
/* `pyramesh splashsurf reconstruct ...` (cmd_splashsurf.c): splashsurf's
 * command line, run by reconstruct with splashsurf's defaults. */
int cmd_splashsurf(int argc, char **argv);
/* reconstruct's option parsing and run; splashsurf = 1 takes splashsurf's
 * defaults (no normals unless --normals=on). */
int cli_reconstruct_main(int argc, char **argv, int splashsurf);

/* Mesh post-processing asked for on the command line (splashsurf's
 * options and ours; post_options.c, docs/splashsurf.md). Zeroed: none. */
typedef struct cli_post {
    int mesh_cleanup, have_snap, decimate_barnacles, keep_verts;
    double snap_dist;
    int have_smoothing_iters, smoothing_iters, smoothing_weights, output_smoothing_weights;
    double weights_normalization;
    /* final normals: 0 = the extraction's (iso.normals), 1 = area-weighted,
     * 2 = SPH; none when iso.normals is NONE and this is 0 */
    int normals;
    int have_normals_smoothing, normals_smoothing_iters, output_raw_normals;
    const char **attributes; /* -a names */
    int num_attributes;
    int generate_quads;
    double quad_ratio, quad_normal_angle, quad_interior_angle;
    int have_mesh_aabb, mesh_aabb_clamp;
    double mesh_aabb_min[3], mesh_aabb_max[3];
    int output_raw_mesh;
    unsigned check; /* PM_CHECK_* */
    int check_debug;
    int taubin_iters;
    double taubin_lambda, taubin_mu;
    size_t min_component;
    int keep_largest;
    size_t decimate_target;
    double decimate_ratio, decimate_error;
    int verbose;
    int enabled_any; /* any of the above: the mesh goes through cli_postprocess */
    /* parse state (cli_post_option, cli_post_finish) */
    int have_cleanup, sph_normals, normals_set, check_all, have_mmin, have_mmax;
    unsigned check_parts;
    const char *attr_names[32];
} cli_post;

/* The post-processing options (CLI_POST_OPTIONS in args.h), for any
 * command that makes a mesh (post_options.c; reconstruct and isosurface): defaults; one option
 * (1 handled, 0 not a post-processing option, -1 after a usage error; c
 * receives --normals' extraction mode); the rules between them once all
 * are parsed and c->output is known (0 after a usage error;
 * have_particles 0 refuses the options that need particles). */
struct cli_args;
void cli_post_init(cli_post *q);
int cli_post_option(const char *cmd, const struct cli_args *a, int id, const char *v, cli_post *q,
                    cli_common *c);
int cli_post_finish(const char *cmd, cli_post *q, cli_common *c, int splashsurf,
                    int have_particles);
/* Whether a post-processing step moves or merges vertices (the
 * extraction's gradient normals would then be stale). */
int cli_post_moves(const cli_post *q);
/* output_in_context_memory for the extraction of a command on ctx: on one
 * GPU (not under mpirun, no --subdivide) the mesh stays where it is made
 * (PM_OUTPUT_ANY: the GPU's memory for a dense grid, the host's for a
 * sparse grid's merge), or in the GPU's memory when post-processing
 * follows (its data-parallel steps run there); the host's otherwise.
 * pm_mesh_write_context writes it from either (a binary PLY from the GPU
 * streamed, the download overlapping the writing). */
int cli_mesh_memory(pm_context *ctx, const cli_post *q, int subdivide);
/* Runs the post-processing of `q` on a mesh from marching cubes on the
 * lattice origin/spacing (in host memory, or in context memory: then the
 * data-parallel steps run on the device and the mesh comes to the host
 * for the checks, quads and the file; it is left in host memory), then
 * the checks and writes `output` (with quads and point data). xyz/n, field
 * and particle_file: the particles, in host or context memory (for the SPH
 * steps and -a), or NULL/0. extraction_normals: the normals mode the mesh
 * was extracted with. Each step goes to r->post. Returns CLI_OK or
 * CLI_FAIL (error printed). */
struct pm_field_params;
int cli_postprocess(pm_context *ctx, const cli_post *q, const float *xyz, size_t n,
                    const pm_field_params *field, const char *particle_file,
                    const double origin[3], const double spacing[3],
                    pm_normals extraction_normals, pm_mesh *mesh, const char *output,
                    const pm_write_options *write, cli_progress *p, cli_result *r);

/* The reconstruction of points already in host memory, shared by
 * reconstruct and demo. `xyz` holds n points. */
typedef struct cli_reconstruct_opts {
    pm_field_params field;
    pm_isosurface_options iso;
    pm_write_options write;
    int subdivide;     /* Loop levels after the extraction (0: none) */
    cli_post post;     /* zeroed: none */
    const char *input; /* the particle file, for -a attributes (or NULL) */
} cli_reconstruct_opts;
int cli_reconstruct_points(pm_context *ctx, const float *xyz, size_t n,
                           const cli_reconstruct_opts *o, const char *output,
                           cli_progress *progress, cli_result *r);

#endif
