/* Option parsing for the pyramesh CLI: a small table-driven parser and
 * strict number parsers that reject trailing junk. Every option takes its
 * value as "--name value" or "--name=value", short ones also as "-x value",
 * "-xvalue" or "-x=value" (clap's forms, so splashsurf's command lines
 * parse unchanged). Short options without a value group: "-vv", "-qv". */
#ifndef PM_CLI_ARGS_H
#define PM_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_option {
    const char *long_name; /* without the leading "--" */
    char short_name;       /* 0 when none */
    int has_arg;           /* 0, 1, or one of the kinds below */
    int id;                /* > 0 */
} cli_option;

/* has_arg kinds beyond 0 (no value) and 1 (one value):
 * CLI_SWITCH: an on/off switch: "--name=on", "--name on", "--name=off",
 *   or "--name" alone (= on). The next argument is taken as its value only
 *   when it is one of the switch words (on, off, and the --normals modes
 *   none, forward, central, sobel, area, sph; case-insensitive); check it
 *   with cli_parse_switch.
 * CLI_TRIPLE: three numbers, "--name X,Y,Z", "--name=X,Y,Z" or as three
 *   arguments "--name X Y Z" / "--name=X Y Z" (splashsurf's form; negative
 *   numbers allowed). The value is handed over as "X,Y,Z". */
enum { CLI_SWITCH = 2, CLI_TRIPLE = 3 };

enum { CLI_ARG_END = 0, CLI_ARG_POSITIONAL = -1, CLI_ARG_BAD = -2 };

typedef struct cli_args {
    int argc;
    char **argv;
    int i;               /* next argv index */
    int only_positional; /* after "--" */
    const char *cmd;     /* for messages */
    const char *name;    /* the option just parsed, as the user wrote it */
    char name_buf[64];
    const char *pending; /* the rest of a group of short flags ("-vv") */
    char value_buf[256]; /* a CLI_TRIPLE value joined with commas */
} cli_args;

void cli_args_init(cli_args *a, const char *cmd, int argc, char **argv);
/* Returns an option id, CLI_ARG_POSITIONAL (*value = the argument),
 * CLI_ARG_END, or CLI_ARG_BAD after printing a usage error. */
int cli_args_next(cli_args *a, const cli_option *opts, const char **value);

/* Strict parsers: on failure they print a usage error naming `opt` and
 * return 0. */
int cli_parse_double(const char *cmd, const char *opt, const char *s, double *out);
int cli_parse_positive(const char *cmd, const char *opt, const char *s, double *out);
int cli_parse_int(const char *cmd, const char *opt, const char *s, long long min, long long max,
                  long long *out);
/* "on" or "off" (any case) into 1 / 0. */
int cli_parse_switch(const char *cmd, const char *opt, const char *s, int *out);
/* "X,Y,Z" */
int cli_parse_triple(const char *cmd, const char *opt, const char *s, double out[3]);
int cli_parse_dims(const char *cmd, const char *opt, const char *s, size_t out[3]);
/* Bytes with an optional binary suffix: 4096, 512K, 512M, 8G, 1T (also
 * "8GB", "8GiB"); fractional values like 1.5G are accepted. */
int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t *out);
/* One of a NULL-terminated list of words; *out is its index. */
int cli_parse_choice(const char *cmd, const char *opt, const char *s, const char *const *words,
                     int *out);

/* Options shared by isosurface and reconstruct (ids from 100 on, so the
 * commands' own ids stay below). */
enum {
    OPT_OUTPUT = 100,
    OPT_NORMALS,
    OPT_SOUP,
    OPT_ASCII,
    OPT_DEVICE,
    OPT_THREADS,
    OPT_STATS,
    OPT_QUIET,
    OPT_MAX_MEMORY,
    OPT_START,
    OPT_END,
    OPT_SUBDIVIDE,
    OPT_HELP
};
#define CLI_COMMON_OPTIONS                                                                         \
    {"output", 'o', 1, OPT_OUTPUT}, {"normals", 0, 1, OPT_NORMALS}, {"soup", 0, 0, OPT_SOUP},      \
        {"ascii", 0, 0, OPT_ASCII}, {"device", 0, 1, OPT_DEVICE}, {"threads", 0, 1, OPT_THREADS},  \
        {"stats", 0, 1, OPT_STATS}, {"quiet", 'q', 0, OPT_QUIET},                                  \
        {"max-memory", 0, 1, OPT_MAX_MEMORY}, {"start", 's', 1, OPT_START},                        \
        {"end", 'e', 1, OPT_END}, {"subdivide", 0, 1, OPT_SUBDIVIDE},                              \
    {                                                                                              \
        "help", 'h', 0, OPT_HELP                                                                   \
    }

/* The mesh post-processing options (splashsurf's and ours; cmd_reconstruct.c
 * parses them with cli_post_option, docs/splashsurf.md), ids from 200 on.
 * A command puts CLI_POST_OPTIONS after CLI_COMMON_OPTIONS: its --normals
 * entry then takes on|off|area|sph too (later entries win). */
enum {
    OPT_P_NORMALS = 200,
    OPT_P_SPH_NORMALS,
    OPT_P_NORMALS_ITERS,
    OPT_P_RAW_NORMALS,
    OPT_P_ATTRIBUTE,
    OPT_P_CLEANUP,
    OPT_P_SNAP,
    OPT_P_BARNACLES,
    OPT_P_KEEP_VERTS,
    OPT_P_SMOOTH_ITERS,
    OPT_P_SMOOTH_WEIGHTS,
    OPT_P_WEIGHTS_NORM,
    OPT_P_OUT_WEIGHTS,
    OPT_P_QUADS,
    OPT_P_QUAD_RATIO,
    OPT_P_QUAD_NORMAL,
    OPT_P_QUAD_INTERIOR,
    OPT_P_MESH_MIN,
    OPT_P_MESH_MAX,
    OPT_P_MESH_CLAMP,
    OPT_P_RAW_MESH,
    OPT_P_CHECK,
    OPT_P_CHECK_CLOSED,
    OPT_P_CHECK_MANIFOLD,
    OPT_P_CHECK_ORIENT,
    OPT_P_CHECK_DEBUG,
    OPT_P_VERBOSE,
    OPT_P_COMPONENTS,
    OPT_P_LARGEST,
    OPT_P_TAUBIN,
    OPT_P_TAUBIN_LAMBDA,
    OPT_P_TAUBIN_MU,
    OPT_P_DECIMATE_TARGET,
    OPT_P_DECIMATE_RATIO,
    OPT_P_DECIMATE_ERROR,
    OPT_P_END
};
#define CLI_POST_OPTIONS                                                                           \
    {"normals", 0, CLI_SWITCH, OPT_P_NORMALS}, {"sph-normals", 0, CLI_SWITCH, OPT_P_SPH_NORMALS},  \
        {"normals-smoothing-iters", 0, 1, OPT_P_NORMALS_ITERS},                                    \
        {"output-raw-normals", 0, CLI_SWITCH, OPT_P_RAW_NORMALS},                                  \
        {"interpolate_attribute", 'a', 1, OPT_P_ATTRIBUTE},                                        \
        {"interpolate-attribute", 0, 1, OPT_P_ATTRIBUTE},                                          \
        {"mesh-cleanup", 0, CLI_SWITCH, OPT_P_CLEANUP},                                            \
        {"mesh-cleanup-snap-dist", 0, 1, OPT_P_SNAP},                                              \
        {"decimate-barnacles", 0, CLI_SWITCH, OPT_P_BARNACLES},                                    \
        {"keep-verts", 0, CLI_SWITCH, OPT_P_KEEP_VERTS},                                           \
        {"mesh-smoothing-iters", 0, 1, OPT_P_SMOOTH_ITERS},                                        \
        {"mesh-smoothing-weights", 0, CLI_SWITCH, OPT_P_SMOOTH_WEIGHTS},                           \
        {"mesh-smoothing-weights-normalization", 0, 1, OPT_P_WEIGHTS_NORM},                        \
        {"output-smoothing-weights", 0, CLI_SWITCH, OPT_P_OUT_WEIGHTS},                            \
        {"generate-quads", 0, CLI_SWITCH, OPT_P_QUADS},                                            \
        {"quad-max-edge-diag-ratio", 0, 1, OPT_P_QUAD_RATIO},                                      \
        {"quad-max-normal-angle", 0, 1, OPT_P_QUAD_NORMAL},                                        \
        {"quad-max-interior-angle", 0, 1, OPT_P_QUAD_INTERIOR},                                    \
        {"mesh-aabb-min", 0, CLI_TRIPLE, OPT_P_MESH_MIN},                                          \
        {"mesh-aabb-max", 0, CLI_TRIPLE, OPT_P_MESH_MAX},                                          \
        {"mesh-aabb-clamp-verts", 0, CLI_SWITCH, OPT_P_MESH_CLAMP},                                \
        {"output-raw-mesh", 0, CLI_SWITCH, OPT_P_RAW_MESH},                                        \
        {"check-mesh", 0, CLI_SWITCH, OPT_P_CHECK},                                                \
        {"check-mesh-closed", 0, CLI_SWITCH, OPT_P_CHECK_CLOSED},                                  \
        {"check-mesh-manifold", 0, CLI_SWITCH, OPT_P_CHECK_MANIFOLD},                              \
        {"check-mesh-orientation", 0, CLI_SWITCH, OPT_P_CHECK_ORIENT},                             \
        {"check-mesh-debug", 0, CLI_SWITCH, OPT_P_CHECK_DEBUG},                                    \
        {"verbose", 'v', 0, OPT_P_VERBOSE}, {"remove-components-below", 0, 1, OPT_P_COMPONENTS},   \
        {"keep-largest-component", 0, CLI_SWITCH, OPT_P_LARGEST},                                  \
        {"taubin-iters", 0, 1, OPT_P_TAUBIN}, {"taubin-lambda", 0, 1, OPT_P_TAUBIN_LAMBDA},        \
        {"taubin-mu", 0, 1, OPT_P_TAUBIN_MU}, {"decimate-target", 0, 1, OPT_P_DECIMATE_TARGET},    \
        {"decimate-ratio", 0, 1, OPT_P_DECIMATE_RATIO},                                            \
    {                                                                                              \
        "decimate-error", 0, 1, OPT_P_DECIMATE_ERROR                                               \
    }

struct cli_common;
/* Applies a shared option; returns 1 when handled, 0 when `id` is not a
 * shared option, -1 after a usage error. */
int cli_common_option(const char *cmd, const cli_args *a, int id, const char *value,
                      struct cli_common *c);
/* Checks the shared options once all are parsed (output given, extension
 * known, --ascii only with .ply); returns 0 after a usage error. */
int cli_common_finish(const char *cmd, struct cli_common *c);

/* The --raw-dims/--raw-type/--raw-spacing/--raw-endian/--raw-offset options
 * (cmd_isosurface.c), also taken by `info`: `long_name` without "--".
 * Returns 1 handled, 0 not a raw option, -1 after a usage error. */
struct pm_raw_options;
int cli_raw_option(const char *cmd, const cli_args *a, const char *long_name, const char *v,
                   struct pm_raw_options *raw, int *have_dims, int *have_type, int *have_other);

#endif
