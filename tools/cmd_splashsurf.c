/* pyramesh splashsurf: splashsurf 0.14's command line run unchanged.
 * `pyramesh splashsurf reconstruct ARGS` is `pyramesh reconstruct ARGS`
 * with splashsurf's defaults (no normals unless --normals=on); its global
 * options -q/--quiet and -v may come before the subcommand, as in
 * `splashsurf -v reconstruct ...`. docs/splashsurf.md lists every option. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char help[] =
    "usage: pyramesh splashsurf [-q] [-v...] reconstruct INPUT [splashsurf options]\n"
    "\n"
    "Runs splashsurf 0.14's `reconstruct` command line unchanged, e.g.\n"
    "  pyramesh splashsurf reconstruct particles.vtk -r=0.025 -l=2.0 -c=0.5 -t=0.6 \\\n"
    "      --mesh-smoothing-weights=on --mesh-smoothing-iters=15 --normals=on \\\n"
    "      --normals-smoothing-iters=10\n"
    "with splashsurf's defaults: output {input stem}_surface.vtk in the current\n"
    "directory (or --output-dir), no normals unless --normals=on. Every option of\n"
    "'pyramesh reconstruct --help' is accepted too. splashsurf's `convert`\n"
    "subcommand is not provided (pyramesh info / reconstruct read its formats).\n";

int cmd_splashsurf(int argc, char **argv)
{
    /* argv[0] is "splashsurf": global flags, then the subcommand. */
    int quiet = 0, verbose = 0, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0)
            quiet = 1;
        else if (a[0] == '-' && a[1] == 'v' && strspn(a + 1, "v") == strlen(a + 1))
            verbose += (int)strlen(a + 1);
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("pyramesh %s (splashsurf 0.14 command line)\n", PM_VERSION_STRING);
            return CLI_OK;
        } else
            break;
    }
    if (i >= argc) return cli_usage_error("splashsurf", "missing the subcommand 'reconstruct'");
    if (strcmp(argv[i], "convert") == 0)
        return cli_usage_error("splashsurf", "'convert' is not provided: pyramesh reads "
                                             "splashsurf's particle formats directly");
    if (strcmp(argv[i], "reconstruct") != 0)
        return cli_usage_error("splashsurf", "unknown subcommand '%s' (expected 'reconstruct')",
                               argv[i]);
    /* The subcommand's arguments with the global flags put back after it. */
    int n = argc - i;
    char **args = malloc((size_t)(n + 3) * sizeof *args);
    if (!args) {
        cli_error("out of memory");
        return CLI_FAIL;
    }
    int k = 0;
    args[k++] = argv[i];
    for (int j = i + 1; j < argc; j++)
        args[k++] = argv[j];
    static char q[] = "-q", v[] = "-v";
    if (quiet) args[k++] = q;
    for (int j = 0; j < verbose && j < 1; j++)
        args[k++] = v;
    args[k] = NULL;
    int rc = cli_reconstruct_main(k, args, 1);
    free(args);
    return rc;
}
