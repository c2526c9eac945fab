/* pyramesh: the command-line tool. Dispatches to the subcommands, and holds
 * what they share: error printing, exit statuses, the SIGINT flag and the
 * checks done before any work (input readable, output directory writable). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *synopsis;
    const char *what;
} commands[] = {
    {"isosurface", cmd_isosurface, "pyramesh isosurface VOLUME -o MESH --iso V [options]",
     "extract the iso surface of a volume (NRRD, VTK, raw)"},
    {"reconstruct", cmd_reconstruct, "pyramesh reconstruct POINTS [-o MESH] -r RADIUS [options]",
     "reconstruct the surface of particles / a point cloud (SPH or blur)"},
    {"info", cmd_info, "pyramesh info FILE [--raw-* options]",
     "describe a volume, point set or mesh (closed? manifold? volume)"},
    {"collide", cmd_collide, "pyramesh collide A B [--translate X,Y,Z] [--self] [-o pairs.csv]",
     "find the intersecting triangle pairs of two meshes, or of one (--self)"},
    {"demo", cmd_demo, "pyramesh demo [-o demo.ply] [--particles N] [--device D] [--quiet]",
     "reconstruct a synthetic dam-break scene (no input needed)"},
    {"subdivide", cmd_subdivide, "pyramesh subdivide MESH -o OUT [--levels N] [options]",
     "Loop subdivision of a mesh, uniform or adaptive (--max-edge, --max-angle)"},
    {"splashsurf", cmd_splashsurf,
     "pyramesh splashsurf reconstruct INPUT -r=R [splashsurf options]",
     "run splashsurf 0.14's reconstruct command line unchanged"},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void print_main_help(FILE *f)
{
    fprintf(f, "pyramesh %s: volumes and point clouds to triangle meshes (CPU and CUDA)\n\n",
            PM_VERSION_STRING);
    fprintf(f, "usage: pyramesh <command> [options]\n       pyramesh --help | --version\n\n");
    fprintf(f, "commands:\n");
    for (size_t k = 0; k < NUM_COMMANDS; k++)
        fprintf(f, "  %-12s %s\n", commands[k].name, commands[k].what);
    fprintf(f, "\nRun 'pyramesh <command> --help' for a command's options.\n"
               "Exit status: 0 success, 1 input or runtime error, 2 usage error, "
               "130 interrupted.\n");
}

const char *cli_synopsis(const char *cmd)
{
    /* "splashsurf reconstruct": the command is the first word */
    size_t len = cmd ? strcspn(cmd, " ") : 0;
    for (size_t k = 0; k < NUM_COMMANDS; k++)
        if (cmd && strlen(commands[k].name) == len && strncmp(cmd, commands[k].name, len) == 0)
            return commands[k].synopsis;
    return "pyramesh <command> [options]";
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("pyramesh: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void cli_error_status(pm_status s, const char *what)
{
    const char *msg = pm_last_error();
    const char *name = pm_status_string(s);
    if (!msg || !*msg) msg = name;
    int mentions = what && *what && strstr(msg, what) != NULL;
    /* The status name adds nothing when the message already carries it. */
    int has_name = strstr(msg, name) != NULL;
    fprintf(stderr, "pyramesh: error: %s%s%s%s%s%s\n", what && !mentions ? what : "",
            what && !mentions ? ": " : "", msg, has_name ? "" : " (", has_name ? "" : name,
            has_name ? "" : ")");
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "pyramesh%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s\nTry 'pyramesh %s%s--help' for more information.\n",
            cli_synopsis(cmd), cmd ? cmd : "", cmd ? " " : "");
    return CLI_USAGE;
}

/* ---- SIGINT -------------------------------------------------------------- */

volatile sig_atomic_t cli_interrupted = 0;
static char *temp_file = NULL;

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

static void install_sigint(void)
{
    struct sigaction old;
    /* A SIGINT the caller chose to ignore (nohup, a background job of a
     * script) stays ignored. */
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: the library's reads and writes carry on undisturbed; we
     * stop at the next stage boundary. SA_RESETHAND: a second Ctrl-C kills
     * the process at once for a user who does not want to wait. */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
}

void cli_set_temp_file(const char *path)
{
    free(temp_file);
    temp_file = NULL;
    if (path) {
        size_t n = strlen(path) + 1;
        temp_file = malloc(n);
        if (temp_file) memcpy(temp_file, path, n);
    }
}

int cli_check_interrupt(void)
{
    static int reported = 0;
    if (!cli_interrupted) return 0;
    if (temp_file) {
        unlink(temp_file);
        cli_set_temp_file(NULL);
    }
    if (!reported) {
        fflush(stdout);
        fputs("pyramesh: interrupted\n", stderr);
        reported = 1;
    }
    return 1;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- checks shared by the commands --------------------------------------- */

int cli_check_input(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        cli_error("cannot open '%s': %s", path, strerror(errno));
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        cli_error("'%s' is a directory, not a file", path);
        return 0;
    }
    if (access(path, R_OK) != 0) {
        cli_error("cannot read '%s': %s", path, strerror(errno));
        return 0;
    }
    return 1;
}

int cli_check_io(const char *input, const char *output, int allow_dir)
{
    struct stat si, so;
    if (!(allow_dir && stat(input, &si) == 0 && S_ISDIR(si.st_mode)) && !cli_check_input(input)) return 0;
    if (stat(output, &so) == 0) {
        if (S_ISDIR(so.st_mode)) {
            cli_error("cannot write '%s': it is a directory", output);
            return 0;
        }
        /* The same file under another name (or through a link): writing it
         * would replace the input. */
        if (stat(input, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            cli_error("the output '%s' is the input file '%s': refusing to overwrite the input",
                      output, input);
            return 0;
        }
    }
    return cli_check_output_dir(output);
}

int cli_check_output_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t len = (size_t)(slash - path);
        if (len == 0) len = 1; /* "/file" */
        if (len >= sizeof dir) {
            cli_error("output path '%s' is too long", path);
            return 0;
        }
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    struct stat st;
    if (stat(dir, &st) != 0) {
        cli_error("cannot write '%s': directory '%s': %s", path, dir, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_error("cannot write '%s': '%s' is not a directory", path, dir);
        return 0;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_error("cannot write '%s': directory '%s': %s", path, dir, strerror(errno));
        return 0;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("cannot write '%s': it is a directory", path);
        return 0;
    }
    return 1;
}

const char *cli_extension(const char *path, char *buf, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t k = 0;
    if (dot && size)
        for (dot++; *dot && k + 1 < size; dot++)
            buf[k++] = (char)tolower((unsigned char)*dot);
    if (size) buf[k] = '\0';
    return buf;
}

int cli_mesh_extension_ok(const char *path)
{
    char ext[16];
    cli_extension(path, ext, sizeof ext);
    return strcmp(ext, "ply") == 0 || strcmp(ext, "obj") == 0 || strcmp(ext, "stl") == 0 ||
           strcmp(ext, "vtk") == 0;
}

/* The last context cli_context_create made, and how (cli_context_twin). */
static pm_context *made_ctx;
static pm_context_desc made_desc;

int cli_context_twin(pm_context *ctx, pm_context **out)
{
    if (!ctx || ctx != made_ctx) return 0;
    return pm_context_create(&made_desc, out) == PM_STATUS_OK;
}

int cli_context_create(const cli_common *c, pm_context **out)
{
    pm_context_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.device = c->device;
    desc.num_threads = c->threads;
    /* Under mpirun, the ranks of a node take its GPUs in turn. */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!local) local = getenv("MPI_LOCALRANKID");
    if (!local) local = getenv("SLURM_LOCALID");
    int gpus = c->device != PM_DEVICE_CPU && cli_mpi_rank >= 0 && local ? pm_cuda_device_count() : 0;
    if (gpus > 0)
        desc.cuda_device = atoi(local) % gpus;
    else if (c->gpu_count > 0)
        desc.cuda_device = c->gpus[0];
    pm_status s = pm_context_create(&desc, out);
    if (s != PM_STATUS_OK) {
        cli_error_status(s, c->device == PM_DEVICE_CUDA ? "--device cuda" : "creating a context");
        return 0;
    }
    made_ctx = *out;
    made_desc = desc;
    /* Not AUTO again: the twin is on the device this one chose. */
    made_desc.device = pm_context_device(*out);
    /* --device auto on a GPU this build cannot run on: say why the CPU. */
    if (*pm_context_note(*out) && !c->quiet) fprintf(stderr, "pyramesh: note: %s\n", pm_context_note(*out));
    return 1;
}

int cli_context_group(const cli_common *c, pm_context *first, pm_context **group, int *count)
{
    group[0] = first;
    *count = 1;
    if (cli_mpi_rank >= 0 || (!c->all_gpus && c->gpu_count < 2)) return 1;
    int want[CLI_MAX_GPUS], n = 0;
    if (c->all_gpus) {
        int total = pm_cuda_device_count();
        for (int g = 0; g < total && n < CLI_MAX_GPUS; g++)
            want[n++] = g;
    } else {
        for (int i = 0; i < c->gpu_count; i++)
            want[n++] = c->gpus[i];
    }
    for (int i = 1; i < n; i++) {
        pm_context_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.struct_size = sizeof desc;
        desc.device = PM_DEVICE_CUDA;
        desc.cuda_device = want[i];
        desc.num_threads = c->threads;
        pm_status s = pm_context_create(&desc, &group[i]);
        if (s != PM_STATUS_OK) {
            char what[48];
            snprintf(what, sizeof what, "--device: GPU %d", want[i]);
            cli_error_status(s, what);
            cli_context_group_free(group, i);
            *count = 1;
            return 0;
        }
    }
    *count = n > 0 ? n : 1;
    return 1;
}

void cli_context_group_free(pm_context **group, int count)
{
    for (int i = 1; i < count; i++)
        pm_context_destroy(group[i]);
}

void cli_group_name(pm_context *const *group, int count, char *out, size_t size)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; i < count && len < size; i++) {
        int w = snprintf(out + len, size - len, "%s%s", i ? " + " : "",
                         pm_context_device_name(group[i]));
        if (w < 0) break;
        len += (size_t)w;
    }
}

int main(int argc, char **argv)
{
    install_sigint();
    if (argc < 2) {
        fprintf(stderr, "pyramesh: missing command\n");
        print_main_help(stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (argc >= 3 && strcmp(cmd, "help") == 0) {
            char *sub[] = {argv[2], "--help", NULL};
            for (size_t k = 0; k < NUM_COMMANDS; k++)
                if (strcmp(argv[2], commands[k].name) == 0) return commands[k].fn(2, sub);
        }
        print_main_help(stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("pyramesh %s\nbackends: %s\n", PM_VERSION_STRING, pm_build_info());
#ifdef PM_HAVE_MPI
        printf("mpi: yes (mpirun -n N pyramesh isosurface ...)\n");
#else
        printf("mpi: no (built without MPI: libopenmpi-dev)\n");
#endif
        pm_context *ctx = NULL;
        if (pm_context_create(NULL, &ctx) == PM_STATUS_OK) {
            printf("default device: %s", pm_context_device_name(ctx));
            if (*pm_context_note(ctx)) printf(" (%s)", pm_context_note(ctx));
            printf("\n");
            pm_context_destroy(ctx);
        } else {
            printf("default device: none (%s)\n", pm_last_error());
        }
        return CLI_OK;
    }
    for (size_t k = 0; k < NUM_COMMANDS; k++)
        if (strcmp(cmd, commands[k].name) == 0) {
            fflush(stdout);
            int rc = commands[k].fn(argc - 1, argv + 1);
            fflush(stdout);
            return rc;
        }
    fprintf(stderr, "pyramesh: unknown command '%s'\n", cmd);
    fprintf(stderr, "usage: pyramesh <command> [options]  (commands: isosurface, reconstruct, subdivide, collide, "
                    "info, demo, splashsurf)\nTry 'pyramesh --help' for more information.\n");
    return CLI_USAGE;
}
