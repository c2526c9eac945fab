/* pyramesh info: describes a volume (dims, type, spacing, origin, value
 * range, memory) or a point set (count, bounding box). The kind comes from
 * the extension; a .vtk file is tried as a volume first, then as points. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh info FILE [options]\n"
    "\n"
    "Describes a volume (.nrrd, .nhdr, .vtk STRUCTURED_POINTS, raw with --raw-dims):\n"
    "dims, sample type, spacing, origin, value range, memory; or a point set\n"
    "(.ply, .xyz, .vtk POLYDATA/UNSTRUCTURED_GRID): count and bounding box.\n"
    "\n"
    "options:\n"
    "  --raw-dims NX,NY,NZ --raw-type T [--raw-spacing SX,SY,SZ]\n"
    "      [--raw-endian little|big] [--raw-offset BYTES]   read FILE as a raw volume\n"
    "  --max-memory SIZE        refuse files needing more than SIZE (e.g. 512M, 8G)\n";

enum { I_HELP = 1, I_MAXMEM, I_RAW_DIMS, I_RAW_TYPE, I_RAW_SPACING, I_RAW_ENDIAN, I_RAW_OFFSET };
static const cli_option options[] = {
    {"help", 'h', 0, I_HELP},
    {"max-memory", 0, 1, I_MAXMEM},
    {"raw-dims", 0, 1, I_RAW_DIMS},
    {"raw-type", 0, 1, I_RAW_TYPE},
    {"raw-spacing", 0, 1, I_RAW_SPACING},
    {"raw-endian", 0, 1, I_RAW_ENDIAN},
    {"raw-offset", 0, 1, I_RAW_OFFSET},
    {NULL, 0, 0, 0},
};

static void print_bytes(uint64_t b)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    printf("%llu bytes (%.1f %s)", (unsigned long long)b, v, unit[u]);
}

/* Min/max over the samples (NaN skipped and counted), honouring strides. */
static void value_range(const pm_volume *v, double *mn, double *mx, uint64_t *nans)
{
    size_t row = v->row_stride ? v->row_stride : v->nx;
    size_t slice = v->slice_stride ? v->slice_stride : row * v->ny;
    double lo = INFINITY, hi = -INFINITY;
    uint64_t bad = 0;
#define RANGE_LOOP(T)                                                                              \
    do {                                                                                           \
        const T *d = (const T *)v->data;                                                           \
        for (size_t k = 0; k < v->nz; k++)                                                         \
            for (size_t j = 0; j < v->ny; j++) {                                                   \
                const T *line = d + k * slice + j * row;                                           \
                for (size_t i = 0; i < v->nx; i++) {                                               \
                    double x = (double)line[i];                                                    \
                    if (x != x) {                                                                  \
                        bad++;                                                                     \
                        continue;                                                                  \
                    }                                                                              \
                    if (x < lo) lo = x;                                                            \
                    if (x > hi) hi = x;                                                            \
                }                                                                                  \
            }                                                                                      \
    } while (0)
    switch (v->type) {
    case PM_SAMPLE_U8: RANGE_LOOP(uint8_t); break;
    case PM_SAMPLE_U16: RANGE_LOOP(uint16_t); break;
    case PM_SAMPLE_I16: RANGE_LOOP(int16_t); break;
    case PM_SAMPLE_F32: RANGE_LOOP(float); break;
    case PM_SAMPLE_F64: RANGE_LOOP(double); break;
    }
#undef RANGE_LOOP
    *mn = lo;
    *mx = hi;
    *nans = bad;
}

static void print_volume(const char *path, const pm_volume *v)
{
    double sp[3];
    for (int k = 0; k < 3; k++)
        sp[k] = v->spacing[k] != 0 ? v->spacing[k] : 1.0;
    uint64_t samples = (uint64_t)v->nx * v->ny * v->nz;
    uint64_t cells = (uint64_t)(v->nx - 1) * (v->ny - 1) * (v->nz - 1);
    double mn, mx;
    uint64_t nans;
    value_range(v, &mn, &mx, &nans);
    printf("volume %s\n", path);
    printf("  dims         %zu x %zu x %zu (%llu samples, %llu cells)\n", v->nx, v->ny, v->nz,
           (unsigned long long)samples, (unsigned long long)cells);
    printf("  type         %s\n", pm_sample_type_string(v->type));
    printf("  spacing      %g x %g x %g\n", sp[0], sp[1], sp[2]);
    printf("  origin       %g, %g, %g\n", v->origin[0], v->origin[1], v->origin[2]);
    printf("  extent       %g x %g x %g\n", sp[0] * (double)(v->nx - 1),
           sp[1] * (double)(v->ny - 1), sp[2] * (double)(v->nz - 1));
    if (mn <= mx)
        printf("  value range  %.9g .. %.9g\n", mn, mx);
    else
        printf("  value range  none (every sample is NaN)\n");
    if (nans) printf("  NaN samples  %llu\n", (unsigned long long)nans);
    printf("  memory       ");
    print_bytes(samples * pm_sample_size(v->type));
    printf("\n");
}

static void print_points(const char *path, const pm_points *p)
{
    printf("points %s\n", path);
    printf("  count        %zu\n", p->count);
    if (p->count == 0) return;
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < p->count; i++)
        for (int k = 0; k < 3; k++) {
            double x = p->xyz[3 * i + k];
            if (x < lo[k]) lo[k] = x;
            if (x > hi[k]) hi[k] = x;
        }
    printf("  bounds min   %.9g, %.9g, %.9g\n", lo[0], lo[1], lo[2]);
    printf("  bounds max   %.9g, %.9g, %.9g\n", hi[0], hi[1], hi[2]);
    printf("  extent       %g x %g x %g\n", hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
    printf("  memory       ");
    print_bytes((uint64_t)p->count * 3 * sizeof(float));
    printf("\n");
}

int cmd_info(int argc, char **argv)
{
    const char *cmd = "info";
    const char *path = NULL;
    pm_raw_options raw;
    memset(&raw, 0, sizeof raw);
    raw.struct_size = sizeof raw;
    int have_dims = 0, have_type = 0, have_other = 0;
    uint64_t max_memory = 0;
    cli_args a;
    cli_args_init(&a, cmd, argc, argv);
    const char *v;
    int id;
    while ((id = cli_args_next(&a, options, &v)) != CLI_ARG_END) {
        if (id == CLI_ARG_BAD) return CLI_USAGE;
        if (id == I_HELP) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if (id == CLI_ARG_POSITIONAL) {
            if (path) return cli_usage_error(cmd, "more than one file ('%s', '%s')", path, v);
            path = v;
        } else if (id == I_MAXMEM) {
            if (!cli_parse_size(cmd, a.name, v, &max_memory)) return CLI_USAGE;
            if (max_memory > (uint64_t)SIZE_MAX) max_memory = SIZE_MAX;
        } else {
            if (cli_raw_option(cmd, &a, a.name + 2, v, &raw, &have_dims, &have_type, &have_other) <
                0)
                return CLI_USAGE;
        }
    }
    if (!path) return cli_usage_error(cmd, "missing FILE");
    if (have_dims != have_type || (have_other && !have_dims))
        return cli_usage_error(cmd, "raw volumes need both --raw-dims and --raw-type");
    if (!cli_check_input(path)) return CLI_FAIL;

    char ext[16];
    cli_extension(path, ext, sizeof ext);
    int is_volume = have_dims || !strcmp(ext, "nrrd") || !strcmp(ext, "nhdr");
    int is_points = !have_dims && (!strcmp(ext, "ply") || !strcmp(ext, "xyz"));
    int is_vtk = !have_dims && !strcmp(ext, "vtk");
    if (!is_volume && !is_points && !is_vtk) {
        if (!strcmp(ext, "obj") || !strcmp(ext, "stl"))
            cli_error("'%s': info reads volumes and point sets; .%s meshes are not read", path,
                      ext);
        else
            cli_error("'%s': unknown file type '.%s' (volumes: .nrrd .nhdr .vtk or --raw-dims; "
                      "points: .ply .xyz .vtk)",
                      path, ext);
        return CLI_FAIL;
    }

    char volume_msg[1024] = "";
    pm_status s;
    if (is_volume || is_vtk) {
        pm_volume vol;
        memset(&vol, 0, sizeof vol);
        s = pm_volume_read(path, have_dims ? &raw : NULL, (size_t)max_memory, &vol);
        if (s == PM_STATUS_OK) {
            print_volume(path, &vol);
            pm_volume_free(&vol);
            return CLI_OK;
        }
        if (is_volume) {
            cli_error_status(s, path);
            return CLI_FAIL;
        }
        snprintf(volume_msg, sizeof volume_msg, "%s (%s)", pm_last_error(), pm_status_string(s));
    }
    pm_points pts;
    memset(&pts, 0, sizeof pts);
    s = pm_points_read(path, PM_POINTS_AUTO, (size_t)max_memory, &pts);
    if (s != PM_STATUS_OK) {
        if (is_vtk) {
            cli_error("'%s' is neither a readable volume nor a point set:", path);
            fprintf(stderr, "  as a volume: %s\n  as points: %s (%s)\n", volume_msg,
                    pm_last_error(), pm_status_string(s));
        } else {
            cli_error_status(s, path);
        }
        return CLI_FAIL;
    }
    print_points(path, &pts);
    pm_points_free(&pts);
    return CLI_OK;
}
