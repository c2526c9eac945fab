/* Options shared by the mesh-producing commands (isosurface, reconstruct):
 * output, normals, mesh mode, device, threads, stats, memory limit and the
 * frame range. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"

int cli_common_option(const char *cmd, const cli_args *a, int id, const char *value, cli_common *c)
{
    static const char *const normals[] = {"none", "forward", "central", "sobel", NULL};
    static const pm_normals normals_enum[] = {PM_NORMALS_NONE, PM_NORMALS_FORWARD,
                                              PM_NORMALS_CENTRAL, PM_NORMALS_SOBEL};
    static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
    static const pm_device devices_enum[] = {PM_DEVICE_AUTO, PM_DEVICE_CPU, PM_DEVICE_CUDA};
    const char *opt = a->name;
    int k;
    long long v;
    switch (id) {
    case OPT_OUTPUT:
        if (!*value) return cli_usage_error(cmd, "%s needs a file name", opt), -1;
        c->output = value;
        return 1;
    case OPT_NORMALS:
        if (!cli_parse_choice(cmd, opt, value, normals, &k)) return -1;
        c->normals = normals_enum[k];
        return 1;
    case OPT_SOUP: c->soup = 1; return 1;
    case OPT_ASCII: c->ascii = 1; return 1;
    case OPT_DEVICE:
        if (strncmp(value, "cuda:", 5) == 0) {
            /* cuda:all, cuda:N or cuda:A,B,... */
            const char *q = value + 5;
            c->device = PM_DEVICE_CUDA;
            c->gpu_count = 0;
            c->all_gpus = strcmp(q, "all") == 0;
            while (!c->all_gpus) {
                char *end;
                long g = strtol(q, &end, 10);
                if (end == q || g < 0 || g > 1023 || (*end && *end != ',') ||
                    c->gpu_count == CLI_MAX_GPUS)
                    return cli_usage_error(cmd,
                                           "%s %s: expected cuda:all, cuda:N or cuda:A,B,... (at "
                                           "most %d GPUs)",
                                           opt, value, CLI_MAX_GPUS),
                           -1;
                for (int i = 0; i < c->gpu_count; i++)
                    if (c->gpus[i] == (int)g)
                        return cli_usage_error(cmd, "%s %s: GPU %ld twice", opt, value, g), -1;
                c->gpus[c->gpu_count++] = (int)g;
                if (!*end) break;
                q = end + 1;
            }
            return 1;
        }
        if (!cli_parse_choice(cmd, opt, value, devices, &k)) return -1;
        c->device = devices_enum[k];
        return 1;
    case OPT_SUBDIVIDE:
        if (!cli_parse_int(cmd, opt, value, 0, PM_SUBDIVIDE_MAX_LEVELS, &v)) return -1;
        c->subdivide = (int)v;
        return 1;
    case OPT_THREADS:
        if (!cli_parse_int(cmd, opt, value, 1, 4096, &v)) return -1;
        c->threads = (int)v;
        return 1;
    case OPT_STATS:
        if (!*value) return cli_usage_error(cmd, "%s needs a file name", opt), -1;
        c->stats_path = value;
        return 1;
    case OPT_QUIET: c->quiet = 1; return 1;
    case OPT_MAX_MEMORY:
        if (!cli_parse_size(cmd, opt, value, &c->max_memory)) return -1;
        if (c->max_memory == 0) return cli_usage_error(cmd, "%s must be above 0", opt), -1;
        if (c->max_memory > (uint64_t)SIZE_MAX) c->max_memory = SIZE_MAX;
        return 1;
    case OPT_START:
        if (!cli_parse_int(cmd, opt, value, 0, LLONG_MAX, &c->start)) return -1;
        c->have_start = 1;
        return 1;
    case OPT_END:
        if (!cli_parse_int(cmd, opt, value, 0, LLONG_MAX, &c->end)) return -1;
        c->have_end = 1;
        return 1;
    default: return 0;
    }
}

int cli_common_finish(const char *cmd, cli_common *c)
{
    if (!c->output) return cli_usage_error(cmd, "missing -o OUTPUT"), 0;
    if (c->subdivide && c->soup)
        return cli_usage_error(cmd, "--subdivide refines an indexed mesh: drop --soup"), 0;
    struct stat st;
    if (stat(c->output, &st) == 0 && S_ISDIR(st.st_mode)) {
        cli_error("cannot write '%s': it is a directory (give a file name, e.g. %s/mesh.ply)",
                  c->output, c->output);
        return 0;
    }
    char pext[16];
    /* .pvtp: the distributed mesh of an mpirun run (checked by the command). */
    if (!cli_mesh_extension_ok(c->output) &&
        strcmp(cli_extension(c->output, pext, sizeof pext), "pvtp") != 0)
        return cli_usage_error(cmd,
                               "cannot tell the mesh format of '%s': use .ply, .obj, .stl or .vtk",
                               c->output),
               0;
    char ext[16];
    if (c->ascii && strcmp(cli_extension(c->output, ext, sizeof ext), "ply") != 0)
        return cli_usage_error(cmd, "--ascii applies to .ply output only"), 0;
    return 1;
}

pm_status cli_subdivide_mesh(pm_context *ctx, int levels, pm_normals normals, pm_mesh *mesh, double *ms)
{
    *ms = 0;
    if (levels <= 0) return PM_STATUS_OK;
    double t0 = cli_now_ms();
    pm_subdivide_options so;
    memset(&so, 0, sizeof so);
    so.struct_size = sizeof so;
    so.normals = normals;
    pm_mesh out;
    pm_status s = pm_subdivide_loop(ctx, mesh, levels, &so, &out);
    *ms = cli_now_ms() - t0;
    if (s != PM_STATUS_OK) return s;
    pm_mesh_free(ctx, mesh);
    *mesh = out;
    return PM_STATUS_OK;
}
