/* pyramesh info: describes a volume (dims, type, spacing, origin, value
 * range, memory), a triangle mesh (counts, bounds, topology, area, volume)
 * or a point set (count, bounding box). The kind comes from the extension
 * and the content: a .ply or .vtk file with faces is a mesh, one with only
 * vertices a point set; a .vtk file is tried as a volume first. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "cli.h"

static const char help[] =
    "usage: pyramesh info FILE [options]\n"
    "\n"
    "Describes a volume (.nrrd, .nhdr, .vtk STRUCTURED_POINTS, .vti, .inr(.gz), .mha,\n"
    ".mhd, .nii(.gz), raw with --raw-dims):\n"
    "dims, sample type, spacing, origin, value range, memory; a triangle mesh\n"
    "(.obj, .stl, .ply with faces, .vtk POLYDATA with polygons, .vtp): counts, bounding\n"
    "box, closed / manifold / oriented, components, Euler characteristic, genus,\n"
    "surface area, enclosed volume; or a point set (.ply, .xyz, .vtk\n"
    "POLYDATA/UNSTRUCTURED_GRID without polygons, .vtu, .bgeo(.gz), .csv): count and\n"
    "bounding box.\n"
    "\n"
    "options:\n"
    "  --json                   print the description as JSON (meshes, volumes, points)\n"
    "  --raw-dims NX,NY,NZ --raw-type T [--raw-spacing SX,SY,SZ]\n"
    "      [--raw-endian little|big] [--raw-offset BYTES|-1] [--raw-allow-extra]\n"
    "                           read FILE as a raw volume (see isosurface --help)\n"
    "  --max-memory SIZE        refuse files needing more than SIZE (e.g. 512M, 8G)\n"
    "  --self-intersections     also count the mesh's intersecting triangle pairs\n"
    "                           (text output; see pyramesh collide --self)\n";

enum {
    I_HELP = 1,
    I_MAXMEM,
    I_RAW_DIMS,
    I_RAW_TYPE,
    I_RAW_SPACING,
    I_RAW_ENDIAN,
    I_RAW_OFFSET,
    I_RAW_ALLOW_EXTRA,
    I_JSON,
    I_SELF
};
/* --self-intersections: describe_mesh also counts them. */
static int want_self;
static const cli_option options[] = {
    {"help", 'h', 0, I_HELP},
    {"json", 0, 0, I_JSON},
    {"self-intersections", 0, 0, I_SELF},
    {"max-memory", 0, 1, I_MAXMEM},
    {"raw-dims", 0, 1, I_RAW_DIMS},
    {"raw-type", 0, 1, I_RAW_TYPE},
    {"raw-spacing", 0, 1, I_RAW_SPACING},
    {"raw-endian", 0, 1, I_RAW_ENDIAN},
    {"raw-offset", 0, 1, I_RAW_OFFSET},
    {"raw-allow-extra", 0, 0, I_RAW_ALLOW_EXTRA},
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

/* Prints a JSON description and frees its buffer. */
static void emit_json(cli_buf *b)
{
    if (b->failed)
        cli_error("out of memory formatting the JSON");
    else
        fputs(b->data, stdout);
    cli_buf_free(b);
}

/* A volume's description, as text or as JSON (--json). */
static void print_volume(const char *path, const pm_volume *v, int json)
{
    double sp[3];
    for (int k = 0; k < 3; k++)
        sp[k] = v->spacing[k] != 0 ? v->spacing[k] : 1.0;
    uint64_t samples = (uint64_t)v->nx * v->ny * v->nz;
    uint64_t cells = (uint64_t)(v->nx - 1) * (v->ny - 1) * (v->nz - 1);
    double mn = NAN, mx = NAN;
    size_t nans = 0;
    pm_volume_range(v, &mn, &mx, &nans);
    const uint64_t bytes = samples * pm_sample_size(v->type);
    if (json) {
        cli_buf b = {0};
        cli_buf_printf(&b, "{\n  \"kind\": \"volume\",\n  \"file\": ");
        cli_buf_json_string(&b, path);
        cli_buf_printf(&b,
                       ",\n  \"dims\": [%zu, %zu, %zu],\n  \"samples\": %llu,\n  \"cells\": %llu,\n"
                       "  \"type\": \"%s\",\n  \"spacing\": [%.17g, %.17g, %.17g],\n"
                       "  \"origin\": [%.17g, %.17g, %.17g],\n",
                       v->nx, v->ny, v->nz, (unsigned long long)samples, (unsigned long long)cells,
                       pm_sample_type_string(v->type), sp[0], sp[1], sp[2], v->origin[0],
                       v->origin[1], v->origin[2]);
        if (mn <= mx)
            cli_buf_printf(&b, "  \"min\": %.17g,\n  \"max\": %.17g,\n", mn, mx);
        else
            cli_buf_printf(&b, "  \"min\": null,\n  \"max\": null,\n");
        cli_buf_printf(&b, "  \"nan_samples\": %zu,\n  \"bytes\": %llu\n}\n", nans,
                       (unsigned long long)bytes);
        emit_json(&b);
        return;
    }
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
    if (nans) printf("  NaN samples  %zu\n", nans);
    printf("  memory       ");
    print_bytes(bytes);
    printf("\n");
}

/* A point set's description, as text or as JSON (--json). */
static void print_points(const char *path, const pm_points *p, int json)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < p->count; i++)
        for (int k = 0; k < 3; k++) {
            double x = p->xyz[3 * i + k];
            if (x < lo[k]) lo[k] = x;
            if (x > hi[k]) hi[k] = x;
        }
    if (json) {
        cli_buf b = {0};
        cli_buf_printf(&b, "{\n  \"kind\": \"points\",\n  \"file\": ");
        cli_buf_json_string(&b, path);
        cli_buf_printf(&b, ",\n  \"count\": %zu,\n", p->count);
        if (p->count)
            cli_buf_printf(
                &b,
                "  \"bounds_min\": [%.9g, %.9g, %.9g],\n  \"bounds_max\": [%.9g, %.9g, %.9g],\n",
                lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]);
        else
            cli_buf_printf(&b, "  \"bounds_min\": null,\n  \"bounds_max\": null,\n");
        cli_buf_printf(&b, "  \"bytes\": %llu\n}\n",
                       (unsigned long long)p->count * 3 * sizeof(float));
        emit_json(&b);
        return;
    }
    printf("points %s\n", path);
    printf("  count        %zu\n", p->count);
    if (p->count == 0) return;
    printf("  bounds min   %.9g, %.9g, %.9g\n", lo[0], lo[1], lo[2]);
    printf("  bounds max   %.9g, %.9g, %.9g\n", hi[0], hi[1], hi[2]);
    printf("  extent       %g x %g x %g\n", hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]);
    printf("  memory       ");
    print_bytes((uint64_t)p->count * 3 * sizeof(float));
    printf("\n");
}

/* Genus of a closed, manifold, oriented mesh: each component contributes
 * (2 - chi_i) / 2, and the chi_i sum to chi, so g = (2 c - chi) / 2.
 * -1 when it does not apply. */
static long long genus(const pm_mesh_report *r)
{
    if (!r->closed || !r->manifold || !r->oriented) return -1;
    long long twice = 2 * (long long)r->components - r->euler;
    return twice >= 0 && twice % 2 == 0 ? twice / 2 : -1;
}

static const char *yes_no(int b) { return b ? "yes" : "no"; }

static void print_mesh(const char *path, const pm_mesh *m, const pm_mesh_report *r)
{
    printf("mesh %s\n", path);
    printf("  vertices     %zu in the file%s, %zu used%s\n", m->num_vertices,
           m->indices ? "" : " (a soup)", r->num_vertices, m->indices ? "" : " after welding");
    printf("  triangles    %zu (%zu degenerate)\n", r->num_triangles, r->degenerate_triangles);
    printf("  edges        %zu (%zu boundary, %zu non-manifold, %zu misoriented)\n", r->num_edges,
           r->boundary_edges, r->nonmanifold_edges, r->misoriented_edges);
    printf("  normals      %s\n", m->normals ? "per vertex" : "none");
    printf("  bounds min   %.9g, %.9g, %.9g\n", r->bbox_min[0], r->bbox_min[1], r->bbox_min[2]);
    printf("  bounds max   %.9g, %.9g, %.9g\n", r->bbox_max[0], r->bbox_max[1], r->bbox_max[2]);
    printf("  extent       %g x %g x %g\n", r->bbox_max[0] - r->bbox_min[0],
           r->bbox_max[1] - r->bbox_min[1], r->bbox_max[2] - r->bbox_min[2]);
    printf("  closed       %s\n", yes_no(r->closed));
    printf("  manifold     %s", yes_no(r->manifold));
    if (!r->manifold) printf(" (%zu non-manifold vertices)", r->nonmanifold_vertices);
    printf("\n  oriented     %s\n", yes_no(r->oriented));
    printf("  components   %zu\n", r->components);
    printf("  euler        %lld\n", r->euler);
    long long g = genus(r);
    if (g >= 0) printf("  genus        %lld\n", g);
    printf("  area         %.9g\n", r->area);
    if (r->closed)
        printf("  volume       %.9g%s\n", r->volume,
               r->oriented ? "" : " (not oriented: meaningless)");
}

static void print_mesh_json(const char *path, const pm_mesh *m, const pm_mesh_report *r)
{
    cli_buf b = {0};
    cli_buf_printf(&b, "{\n  \"kind\": \"mesh\",\n  \"file\": ");
    cli_buf_json_string(&b, path);
    cli_buf_printf(&b,
                   ",\n  \"file_vertices\": %zu,\n  \"soup\": %s,\n  \"vertices\": %zu,\n"
                   "  \"triangles\": %zu,\n  \"degenerate_triangles\": %zu,\n  \"edges\": %zu,\n"
                   "  \"boundary_edges\": %zu,\n  \"nonmanifold_edges\": %zu,\n"
                   "  \"misoriented_edges\": %zu,\n  \"nonmanifold_vertices\": %zu,\n"
                   "  \"normals\": %s,\n",
                   m->num_vertices, m->indices ? "false" : "true", r->num_vertices,
                   r->num_triangles, r->degenerate_triangles, r->num_edges, r->boundary_edges,
                   r->nonmanifold_edges, r->misoriented_edges, r->nonmanifold_vertices,
                   m->normals ? "true" : "false");
    cli_buf_printf(&b, "  \"bbox_min\": [%.9g, %.9g, %.9g],\n  \"bbox_max\": [%.9g, %.9g, %.9g],\n",
                   r->bbox_min[0], r->bbox_min[1], r->bbox_min[2], r->bbox_max[0], r->bbox_max[1],
                   r->bbox_max[2]);
    long long g = genus(r);
    cli_buf_printf(&b,
                   "  \"closed\": %s,\n  \"manifold\": %s,\n  \"oriented\": %s,\n"
                   "  \"components\": %zu,\n  \"euler\": %lld,\n",
                   r->closed ? "true" : "false", r->manifold ? "true" : "false",
                   r->oriented ? "true" : "false", r->components, r->euler);
    if (g >= 0)
        cli_buf_printf(&b, "  \"genus\": %lld,\n", g);
    else
        cli_buf_printf(&b, "  \"genus\": null,\n");
    cli_buf_printf(&b, "  \"area\": %.17g,\n", r->area);
    if (r->closed)
        cli_buf_printf(&b, "  \"volume\": %.17g\n}\n", r->volume);
    else
        cli_buf_printf(&b, "  \"volume\": null\n}\n");
    emit_json(&b);
}

/* Reads and describes a mesh; returns CLI_OK / CLI_FAIL, or -1 when the
 * file holds no faces (the caller then tries it as points). */
static int describe_mesh(const char *path, uint64_t max_memory, int json, int allow_points)
{
    pm_mesh m;
    pm_status s = pm_mesh_read(path, (size_t)max_memory, &m);
    if (s != PM_STATUS_OK) {
        if (allow_points) return -1;
        cli_error_status(s, path);
        return CLI_FAIL;
    }
    if (m.num_triangles == 0) {
        pm_mesh_free(NULL, &m);
        if (allow_points) return -1;
        cli_error("'%s': the mesh has no faces", path);
        return CLI_FAIL;
    }
    pm_mesh_report r;
    s = pm_mesh_analyze(&m, &r);
    if (s != PM_STATUS_OK) {
        cli_error_status(s, path);
        pm_mesh_free(NULL, &m);
        return CLI_FAIL;
    }
    if (json)
        print_mesh_json(path, &m, &r);
    else
        print_mesh(path, &m, &r);
    if (want_self && !json) {
        size_t pairs = 0;
        s = cli_self_intersections(&m, &pairs);
        if (s != PM_STATUS_OK) {
            cli_error_status(s, path);
            pm_mesh_free(NULL, &m);
            return CLI_FAIL;
        }
        printf("  self-intersections: %zu triangle pairs\n", pairs);
    }
    pm_mesh_free(NULL, &m);
    return CLI_OK;
}

int cmd_info(int argc, char **argv)
{
    const char *cmd = "info";
    const char *path = NULL;
    pm_raw_options raw;
    memset(&raw, 0, sizeof raw);
    raw.struct_size = sizeof raw;
    int have_dims = 0, have_type = 0, have_other = 0, json = 0;
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
        } else if (id == I_JSON) {
            json = 1;
        } else if (id == I_SELF) {
            want_self = 1;
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
    struct stat dst;
    const int is_dir = !have_dims && stat(path, &dst) == 0 && S_ISDIR(dst.st_mode);
    if (!is_dir && !cli_check_input(path)) return CLI_FAIL;

    char ext[16];
    cli_extension(path, ext, sizeof ext);
    size_t plen = strlen(path);
    int gz_volume =
        plen > 7 && (!strcmp(path + plen - 7, ".nii.gz") || !strcmp(path + plen - 7, ".inr.gz"));
    int is_volume = have_dims || is_dir || !strcmp(ext, "nrrd") || !strcmp(ext, "nhdr") ||
                    !strcmp(ext, "vti") || !strcmp(ext, "inr") || !strcmp(ext, "mha") ||
                    !strcmp(ext, "mhd") || !strcmp(ext, "nii") || gz_volume;
    int is_points = !have_dims && (!strcmp(ext, "ply") || !strcmp(ext, "xyz") ||
                                   !strcmp(ext, "vtu") || !strcmp(ext, "bgeo") ||
                                   !strcmp(ext, "csv") || (!strcmp(ext, "gz") && !gz_volume));
    int is_vtk = !have_dims && !strcmp(ext, "vtk");
    int is_mesh = !have_dims && (!strcmp(ext, "obj") || !strcmp(ext, "stl") || !strcmp(ext, "vtp"));
    if (is_mesh) return describe_mesh(path, max_memory, json, 0);
    if (!is_volume && !is_points && !is_vtk) {
        cli_error("'%s': unknown file type '.%s' (volumes: .nrrd .nhdr .vtk .vti .inr .mha .mhd "
                  ".nii or --raw-dims; meshes: .ply .obj .stl .vtk .vtp; points: .ply .xyz .vtk "
                  ".vtu .bgeo .csv)",
                  path, ext);
        return CLI_FAIL;
    }
    if (!strcmp(ext, "ply")) {
        /* A .ply with faces is a mesh; one with only vertices, points. A
         * file the mesh reader refuses goes to the point reader, whose
         * message is the one shown. */
        int rc = describe_mesh(path, max_memory, json, 1);
        if (rc >= 0) return rc;
    }
    char volume_msg[1024] = "";
    pm_status s;
    if (is_volume || is_vtk) {
        pm_volume vol;
        memset(&vol, 0, sizeof vol);
        s = pm_volume_read(path, have_dims ? &raw : NULL, (size_t)max_memory, &vol);
        if (s == PM_STATUS_OK) {
            print_volume(path, &vol, json);
            pm_volume_free(&vol);
            return CLI_OK;
        }
        if (is_volume) {
            cli_error_status(s, path);
            return CLI_FAIL;
        }
        snprintf(volume_msg, sizeof volume_msg, "%s (%s)", pm_last_error(), pm_status_string(s));
        int rc = describe_mesh(path, max_memory, json, 1);
        if (rc >= 0) return rc;
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
    print_points(path, &pts, json);
    pm_points_free(&pts);
    return CLI_OK;
}
