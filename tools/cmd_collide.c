/* pyramesh collide: the intersecting triangle pairs of two meshes (B moved
 * into A's frame by a rigid transformation), or of one mesh with itself
 * (--self); prints the count and writes the pairs as CSV. Also the
 * self-intersection count behind `pyramesh info --self-intersections`. */
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
    "usage: pyramesh collide A B [options]\n"
    "       pyramesh collide MESH --self [options]\n"
    "\n"
    "Finds every pair of intersecting triangles (a of A, b of B), with B moved\n"
    "into A's frame by x_a = R x_b + t. Triangles are closed: touching counts.\n"
    "The test is exact on the float coordinates (docs/collide.md). --self finds\n"
    "the pairs a < b of one mesh that intersect, neighbours sharing a vertex\n"
    "left out. Prints the number of pairs; exit status 0 also when there are none.\n"
    "\n"
    "options:\n"
    "  --transform R00,R01,R02,R10,R11,R12,R20,R21,R22,TX,TY,TZ\n"
    "                           B's transformation (row-major rotation, then t)\n"
    "  --translate X,Y,Z        translation t (after --rotate-deg)\n"
    "  --rotate-deg AXIS,ANGLE  rotation about x, y or z, in degrees\n"
    "  --self                   one mesh against itself\n"
    "  -o, --output FILE.csv    write the pairs as 'a,b' lines (0-based) with a header\n"
    "  --json                   print the result as JSON\n"
    "  --device auto|cpu|cuda   where to compute (default auto)\n"
    "  --threads N              CPU threads (default: all cores)\n"
    "  --stats FILE             write the result and timings as JSON to FILE\n"
    "  --max-memory SIZE        refuse mesh files needing more than SIZE\n"
    "  -q, --quiet              print nothing but errors\n";

enum { C_TRANSFORM = 1, C_TRANSLATE, C_ROTATE, C_SELF, C_JSON };
static const cli_option options[] = {
    {"transform", 0, 1, C_TRANSFORM},
    {"translate", 0, 1, C_TRANSLATE},
    {"rotate-deg", 0, 1, C_ROTATE},
    {"self", 0, 0, C_SELF},
    {"json", 0, 0, C_JSON},
    {"output", 'o', 1, OPT_OUTPUT},
    {"device", 0, 1, OPT_DEVICE},
    {"threads", 0, 1, OPT_THREADS},
    {"stats", 0, 1, OPT_STATS},
    {"max-memory", 0, 1, OPT_MAX_MEMORY},
    {"quiet", 'q', 0, OPT_QUIET},
    {"help", 'h', 0, OPT_HELP},
    {NULL, 0, 0, 0},
};

/* All pairs of two BVHs into a fresh host array (2 per pair). */
static pm_status collide_all(pm_context *ctx, pm_bvh *a, pm_bvh *b, const double *xf,
                             uint32_t **out, size_t *count)
{
    *out = NULL;
    size_t cap = (size_t)1 << 16, n = 0;
    for (;;) {
        uint32_t *d = NULL;
        pm_status s = pm_alloc(ctx, cap * 2 * sizeof(uint32_t), (void **)&d);
        if (s != PM_STATUS_OK) return s;
        s = pm_collide(ctx, a, b, xf, NULL, d, cap, &n);
        if (s == PM_STATUS_TRUNCATED) {
            pm_free(ctx, d);
            cap = n;
            continue;
        }
        if (s == PM_STATUS_OK) {
            *out = malloc(n * 2 * sizeof(uint32_t) + 8);
            if (!*out)
                s = PM_STATUS_OUT_OF_MEMORY;
            else
                s = pm_download(ctx, *out, d, n * 2 * sizeof(uint32_t));
        }
        pm_free(ctx, d);
        if (s != PM_STATUS_OK) {
            free(*out);
            *out = NULL;
            return s;
        }
        *count = n;
        return PM_STATUS_OK;
    }
}

pm_status cli_self_intersections(const pm_mesh *mesh, size_t *count)
{
    pm_context *ctx = NULL;
    pm_context_desc d = {sizeof d, PM_DEVICE_AUTO, 0, 0, NULL};
    pm_status s = pm_context_create(&d, &ctx);
    if (s != PM_STATUS_OK) return s;
    pm_bvh *b = NULL;
    s = pm_bvh_build(ctx, mesh, NULL, &b);
    if (s == PM_STATUS_OK) {
        uint32_t *pairs = NULL;
        s = collide_all(ctx, b, b, NULL, &pairs, count);
        free(pairs);
    }
    pm_bvh_destroy(ctx, b);
    pm_context_destroy(ctx);
    return s;
}

/* x_a = R x_b + t from --rotate-deg AXIS,ANGLE. */
static int parse_rotation(const char *v, double *m)
{
    int axis = v[0] == 'x' ? 0 : v[0] == 'y' ? 1 : v[0] == 'z' ? 2 : -1;
    if (axis < 0 || v[1] != ',') {
        cli_usage_error("collide", "--rotate-deg wants AXIS,ANGLE (axis x, y or z), got '%s'", v);
        return 0;
    }
    double deg;
    if (!cli_parse_double("collide", "--rotate-deg", v + 2, &deg)) return 0;
    double a = deg * 3.14159265358979323846 / 180.0, c = cos(a), s = sin(a);
    int i = (axis + 1) % 3, j = (axis + 2) % 3;
    for (int k = 0; k < 3; k++)
        for (int l = 0; l < 3; l++)
            m[4 * k + l] = k == l;
    m[4 * i + i] = c;
    m[4 * i + j] = -s;
    m[4 * j + i] = s;
    m[4 * j + j] = c;
    return 1;
}

static int parse_transform(const char *v, double *m)
{
    double x[12];
    const char *p = v;
    for (int k = 0; k < 12; k++) {
        char *end;
        x[k] = strtod(p, &end);
        if (end == p || !isfinite(x[k]) || (k < 11 && *end != ',') || (k == 11 && *end)) {
            cli_usage_error("collide", "--transform wants 12 comma-separated numbers, got '%s'", v);
            return 0;
        }
        p = end + 1;
    }
    for (int k = 0; k < 3; k++) {
        for (int l = 0; l < 3; l++)
            m[4 * k + l] = x[3 * k + l];
        m[4 * k + 3] = x[9 + k];
    }
    return 1;
}

static int write_csv(const char *path, const uint32_t *pairs, size_t n)
{
    cli_buf b = {0};
    cli_buf_printf(&b, "a,b\n");
    for (size_t i = 0; i < n; i++)
        cli_buf_printf(&b, "%u,%u\n", pairs[2 * i], pairs[2 * i + 1]);
    if (b.failed) {
        cli_buf_free(&b);
        cli_error("%s: out of memory formatting %zu pairs", path, n);
        return 0;
    }
    int ok = cli_write_file_atomic(path, b.data ? b.data : "", b.len);
    cli_buf_free(&b);
    return ok;
}

typedef struct run {
    const char *a, *b, *output;
    int self, json, have_xf;
    double xf[12];
    size_t ta, tb, pairs;
    double read_ms, build_ms, collide_ms;
    char device[128];
} run;

static void result_json(cli_buf *b, const run *r)
{
    cli_buf_printf(b, "{\"command\": \"collide\", \"a\": ");
    cli_buf_json_string(b, r->a);
    if (!r->self) {
        cli_buf_printf(b, ", \"b\": ");
        cli_buf_json_string(b, r->b);
    }
    cli_buf_printf(b, ", \"self\": %s, \"triangles_a\": %zu, \"triangles_b\": %zu",
                   r->self ? "true" : "false", r->ta, r->tb);
    cli_buf_printf(b, ", \"pairs\": %zu, \"device\": ", r->pairs);
    cli_buf_json_string(b, r->device);
    cli_buf_printf(b, ", \"read_ms\": %.3f, \"build_ms\": %.3f, \"collide_ms\": %.3f}\n",
                   r->read_ms, r->build_ms, r->collide_ms);
}

static int do_collide(const cli_common *c, run *r)
{
    pm_mesh ma, mb;
    memset(&ma, 0, sizeof ma);
    memset(&mb, 0, sizeof mb);
    double t0 = cli_now_ms();
    pm_status s = pm_mesh_read(r->a, (size_t)c->max_memory, &ma);
    if (s != PM_STATUS_OK) return cli_error_status(s, r->a), CLI_FAIL;
    if (!r->self) {
        s = pm_mesh_read(r->b, (size_t)c->max_memory, &mb);
        if (s != PM_STATUS_OK) {
            pm_mesh_free(NULL, &ma);
            return cli_error_status(s, r->b), CLI_FAIL;
        }
    }
    r->read_ms = cli_now_ms() - t0;
    r->ta = ma.num_triangles;
    r->tb = r->self ? ma.num_triangles : mb.num_triangles;
    int rc = CLI_FAIL;
    pm_context *ctx = NULL;
    pm_bvh *ba = NULL, *bb = NULL;
    uint32_t *pairs = NULL;
    if (!cli_context_create(c, &ctx)) goto done;
    snprintf(r->device, sizeof r->device, "%s", pm_context_device_name(ctx));
    t0 = cli_now_ms();
    s = pm_bvh_build(ctx, &ma, NULL, &ba);
    if (s == PM_STATUS_OK && !r->self) s = pm_bvh_build(ctx, &mb, NULL, &bb);
    if (s != PM_STATUS_OK) {
        cli_error_status(s, ba ? r->b : r->a);
        goto done;
    }
    r->build_ms = cli_now_ms() - t0;
    if (cli_check_interrupt()) {
        rc = CLI_INTERRUPTED;
        goto done;
    }
    t0 = cli_now_ms();
    s = collide_all(ctx, ba, r->self ? ba : bb, r->have_xf ? r->xf : NULL, &pairs, &r->pairs);
    r->collide_ms = cli_now_ms() - t0;
    if (s != PM_STATUS_OK) {
        cli_error_status(s, "collide");
        goto done;
    }
    if (r->output && !write_csv(r->output, pairs, r->pairs)) goto done;
    rc = CLI_OK;
done:
    free(pairs);
    pm_bvh_destroy(ctx, bb);
    pm_bvh_destroy(ctx, ba);
    pm_context_destroy(ctx);
    pm_mesh_free(NULL, &ma);
    pm_mesh_free(NULL, &mb);
    return rc;
}

int cmd_collide(int argc, char **argv)
{
    cli_args a;
    cli_args_init(&a, "collide", argc, argv);
    cli_common c;
    memset(&c, 0, sizeof c);
    run r;
    memset(&r, 0, sizeof r);
    double rot[12] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, tr[3] = {0, 0, 0};
    int have_full = 0, have_parts = 0, npos = 0;
    const char *v;
    int id;
    while ((id = cli_args_next(&a, options, &v)) != CLI_ARG_END) {
        if (id == CLI_ARG_BAD) return CLI_USAGE;
        if (id == OPT_HELP) {
            fputs(help, stdout);
            return CLI_OK;
        } else if (id == CLI_ARG_POSITIONAL) {
            if (npos == 0)
                r.a = v;
            else if (npos == 1)
                r.b = v;
            else
                return cli_usage_error("collide", "too many inputs ('%s')", v);
            npos++;
        } else if (id == C_TRANSFORM) {
            if (!parse_transform(v, r.xf)) return CLI_USAGE;
            have_full = 1;
        } else if (id == C_TRANSLATE) {
            if (!cli_parse_triple("collide", a.name, v, tr)) return CLI_USAGE;
            have_parts = 1;
        } else if (id == C_ROTATE) {
            if (!parse_rotation(v, rot)) return CLI_USAGE;
            have_parts = 1;
        } else if (id == C_SELF) {
            r.self = 1;
        } else if (id == C_JSON) {
            r.json = 1;
        } else if (cli_common_option("collide", &a, id, v, &c) < 0) {
            return CLI_USAGE;
        }
    }
    if (npos == 0) return cli_usage_error("collide", "no input mesh");
    if (r.self && npos != 1) return cli_usage_error("collide", "--self takes one mesh");
    if (!r.self && npos != 2) return cli_usage_error("collide", "two meshes needed (or --self)");
    if (have_full && have_parts)
        return cli_usage_error("collide", "--transform excludes --translate / --rotate-deg");
    if (r.self && (have_full || have_parts))
        return cli_usage_error("collide", "--self takes no transformation");
    if (have_parts) {
        memcpy(r.xf, rot, sizeof rot);
        for (int k = 0; k < 3; k++)
            r.xf[4 * k + 3] = tr[k];
    }
    r.have_xf = have_full || have_parts;
    r.output = c.output;
    if (!cli_check_input(r.a) || (r.b && !cli_check_input(r.b))) return CLI_FAIL;
    if (r.output && !cli_check_output_dir(r.output)) return CLI_FAIL;
    int rc = do_collide(&c, &r);
    if (rc != CLI_OK) return rc;
    cli_buf b = {0};
    result_json(&b, &r);
    if (c.stats_path && !cli_write_file_atomic(c.stats_path, b.data, b.len)) rc = CLI_FAIL;
    if (r.json)
        fputs(b.data, stdout);
    else if (!c.quiet)
        printf("%zu intersecting triangle pairs (%zu x %zu triangles, %s, %.1f ms)\n", r.pairs,
               r.ta, r.tb, r.device, r.collide_ms);
    cli_buf_free(&b);
    return rc;
}
