/* Option parsing for the pyramesh CLI: a small table-driven parser (long
 * options as "--name value" or "--name=value", short ones as "-x value" or
 * "-xvalue") and strict number parsers that reject trailing junk. */
#ifndef PM_CLI_ARGS_H
#define PM_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_option {
    const char *long_name; /* without the leading "--" */
    char short_name;       /* 0 when none */
    int has_arg;
    int id; /* > 0 */
} cli_option;

enum { CLI_ARG_END = 0, CLI_ARG_POSITIONAL = -1, CLI_ARG_BAD = -2 };

typedef struct cli_args {
    int argc;
    char **argv;
    int i;               /* next argv index */
    int only_positional; /* after "--" */
    const char *cmd;     /* for messages */
    const char *name;    /* the option just parsed, as the user wrote it */
    char name_buf[64];
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
