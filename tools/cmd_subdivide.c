/* pyramesh subdivide: mesh file -> Loop subdivision (pm_subdivide_loop),
 * uniform or adaptive -> mesh file. A soup (STL) is welded by exact
 * position first. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh subdivide MESH -o OUT [options]\n"
    "\n"
    "Loop subdivision (Loop's masks, OpenSubdiv's beta, sharp boundaries). Uniform\n"
    "by default; --max-deviation, --max-edge and --max-angle make it adaptive: only\n"
    "edges where Loop's masks would move the surface by more than D along the\n"
    "normal, edges longer than L, or edges whose ends' normals differ by more than\n"
    "DEG degrees split (a triangle with two split edges splits its third too); the\n"
    "output is closed red-green, watertight when the input is. MESH and OUT: .ply,\n"
    ".obj, .stl or .vtk (a soup such as STL is welded by exact position first).\n"
    "\n"
    "options:\n"
    "  -o, --output OUT         output file (required)\n"
    "  --levels N               subdivision levels, 0 to 16 (default 1)\n"
    "  --max-deviation D        adaptive: split edges where Loop's masks would move the\n"
    "                           surface by more than D along the normal (length units)\n"
    "  --max-edge L             adaptive: split edges longer than L\n"
    "  --max-angle DEG          adaptive: split edges whose end normals differ by > DEG\n"
    "  --normals MODE           none, or any other value for computed normals (default)\n"
    "  --ascii                  ASCII PLY\n"
    "  --device D               auto|cpu|cuda (default auto: CUDA when a GPU is usable)\n"
    "  --threads N              CPU threads (default: all cores)\n"
    "  --stats FILE.json        write counts per level and timings as JSON\n"
    "  -q, --quiet              print nothing on success\n"
    "  --max-memory SIZE        refuse input meshes larger than SIZE (e.g. 512M, 8G)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage error.\n";

enum { OPT_LEVELS = 1, OPT_MAX_EDGE, OPT_MAX_ANGLE, OPT_MAX_DEVIATION };

static const cli_option options[] = {
    CLI_COMMON_OPTIONS,
    {"levels", 0, 1, OPT_LEVELS},
    {"max-edge", 0, 1, OPT_MAX_EDGE},
    {"max-angle", 0, 1, OPT_MAX_ANGLE},
    {"max-deviation", 0, 1, OPT_MAX_DEVIATION},
    {NULL, 0, 0, 0},
};

static const float *weld_pos;

static int weld_cmp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    int c = memcmp(weld_pos + 3 * (size_t)a, weld_pos + 3 * (size_t)b, 12);
    return c ? c : (a < b ? -1 : a > b);
}

/* Welds a soup by exact position (first occurrence keeps its place). */
static int weld(pm_mesh *m)
{
    size_t n = m->num_vertices;
    uint32_t *order = malloc(n * 4 + 4), *map = malloc(n * 4 + 4), *idx = malloc(n * 4 + 4);
    float *pos = malloc(n * 12 + 12);
    if (!order || !map || !idx || !pos || n > UINT32_MAX) {
        free(order), free(map), free(idx), free(pos);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    weld_pos = m->positions;
    qsort(order, n, 4, weld_cmp);
    for (size_t i = 0; i < n; i++) /* the first vertex of each run of equal positions */
        map[order[i]] = (i > 0 && !memcmp(m->positions + 3 * (size_t)order[i - 1],
                                          m->positions + 3 * (size_t)order[i], 12))
                            ? map[order[i - 1]]
                            : order[i];
    size_t nv = 0;
    for (size_t i = 0; i < n; i++)
        if (map[i] == i) {
            memcpy(pos + 3 * nv, m->positions + 3 * i, 12);
            order[i] = (uint32_t)nv++;
        }
    for (size_t i = 0; i < n; i++)
        idx[i] = order[map[i]];
    free(m->positions);
    free(m->normals);
    m->positions = pos;
    m->normals = NULL;
    m->indices = idx;
    m->num_vertices = nv;
    free(order), free(map);
    return 1;
}

static void write_stats(const char *path, const char *in, const char *out, const pm_mesh *a,
                        const pm_mesh *b, const pm_subdivide_report *r, double ms[3],
                        pm_context *ctx)
{
    cli_buf j = {0};
    cli_buf_printf(&j, "{\n  \"command\": \"subdivide\",\n  \"input\": ");
    cli_buf_json_string(&j, in);
    cli_buf_printf(&j, ",\n  \"output\": ");
    cli_buf_json_string(&j, out);
    cli_buf_printf(&j, ",\n  \"device\": \"%s\",\n  \"threads\": %d,\n",
                   pm_device_string(pm_context_device(ctx)), pm_context_num_threads(ctx));
    cli_buf_printf(&j, "  \"input_vertices\": %zu,\n  \"input_triangles\": %zu,\n", a->num_vertices,
                   a->num_triangles);
    cli_buf_printf(&j, "  \"vertices\": %zu,\n  \"triangles\": %zu,\n  \"levels\": [",
                   b->num_vertices, b->num_triangles);
    for (int l = 0; l <= r->levels && l <= PM_SUBDIVIDE_MAX_LEVELS; l++)
        cli_buf_printf(&j, "%s\n    {\"stream\": %llu, \"split_edges\": %llu, \"finished\": %llu}",
                       l ? "," : "", (unsigned long long)r->stream[l],
                       (unsigned long long)r->split_edges[l], (unsigned long long)r->finished[l]);
    cli_buf_printf(&j,
                   "\n  ],\n  \"host_waits\": %d,\n  \"read_ms\": %.3f,\n"
                   "  \"subdivide_ms\": %.3f,\n  \"write_ms\": %.3f\n}\n",
                   r->host_waits, ms[0], ms[1], ms[2]);
    if (!j.failed) cli_write_file_atomic(path, j.data, j.len);
    cli_buf_free(&j);
}

int cmd_subdivide(int argc, char **argv)
{
    const char *cmd = "subdivide";
    cli_common c;
    memset(&c, 0, sizeof c);
    c.normals = PM_NORMALS_CENTRAL;
    pm_subdivide_options o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    long long levels = 1;
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
        if (id == OPT_LEVELS) {
            if (!cli_parse_int(cmd, a.name, v, 0, PM_SUBDIVIDE_MAX_LEVELS, &levels))
                return CLI_USAGE;
            continue;
        }
        if (id == OPT_MAX_EDGE) {
            if (!cli_parse_positive(cmd, a.name, v, &o.max_edge)) return CLI_USAGE;
            continue;
        }
        if (id == OPT_MAX_DEVIATION) {
            if (!cli_parse_positive(cmd, a.name, v, &o.max_deviation)) return CLI_USAGE;
            continue;
        }
        if (id == OPT_MAX_ANGLE) {
            if (!cli_parse_positive(cmd, a.name, v, &o.max_angle_deg)) return CLI_USAGE;
            if (o.max_angle_deg > 180)
                return cli_usage_error(cmd, "%s must be at most 180, got '%s'", a.name, v);
            continue;
        }
        if (id == OPT_SOUP || id == OPT_START || id == OPT_END)
            return cli_usage_error(cmd, "%s does not apply to subdivide", a.name);
        if (cli_common_option(cmd, &a, id, v, &c) < 0) return CLI_USAGE;
    }
    if (!input) return cli_usage_error(cmd, "missing the input MESH");
    if (!cli_common_finish(cmd, &c)) return CLI_USAGE;
    if (!cli_check_io(input, c.output, 0)) return CLI_FAIL;
    o.normals = c.normals == PM_NORMALS_NONE ? PM_NORMALS_NONE : PM_NORMALS_DEFAULT;
    pm_subdivide_report rep;
    o.report = &rep;

    double ms[3], t0 = cli_now_ms();
    pm_mesh in, out;
    memset(&out, 0, sizeof out);
    pm_status s = pm_mesh_read(input, (size_t)c.max_memory, &in);
    if (s != PM_STATUS_OK) {
        cli_error_status(s, input);
        return CLI_FAIL;
    }
    if (!in.indices && in.num_triangles && !weld(&in)) {
        pm_mesh_free(NULL, &in);
        cli_error("%s: out of memory welding the soup", input);
        return CLI_FAIL;
    }
    ms[0] = cli_now_ms() - t0;
    pm_context *ctx;
    if (!cli_context_create(&c, &ctx)) {
        pm_mesh_free(NULL, &in);
        return CLI_FAIL;
    }
    t0 = cli_now_ms();
    s = pm_subdivide_loop(ctx, &in, (int)levels, &o, &out);
    ms[1] = cli_now_ms() - t0;
    int rc = CLI_OK;
    if (s != PM_STATUS_OK) {
        cli_error_status(s, input);
        rc = CLI_FAIL;
    } else {
        t0 = cli_now_ms();
        pm_write_options w = {sizeof w, PM_MESH_FORMAT_AUTO, c.ascii};
        s = pm_mesh_write(c.output, &out, &w);
        ms[2] = cli_now_ms() - t0;
        if (s != PM_STATUS_OK) {
            cli_error_status(s, c.output);
            rc = CLI_FAIL;
        } else {
            if (!c.quiet)
                printf("subdivide: %zu vertices / %zu triangles -> %zu / %zu (%s, %d level%s "
                       "split), %.1f ms on %s\n",
                       in.num_vertices, in.num_triangles, out.num_vertices, out.num_triangles,
                       (o.max_edge > 0 || o.max_angle_deg > 0 || o.max_deviation > 0) ? "adaptive"
                                                                                      : "uniform",
                       rep.levels, rep.levels == 1 ? "" : "s", ms[1], pm_context_device_name(ctx));
            if (c.stats_path) write_stats(c.stats_path, input, c.output, &in, &out, &rep, ms, ctx);
        }
    }
    pm_mesh_free(ctx, &out);
    pm_mesh_free(NULL, &in);
    pm_context_destroy(ctx);
    return rc;
}
