/* What the CLI reports about a run: the one-screen summary on stdout, and the
 * --stats JSON, written atomically (temporary file, then rename) so that a
 * reader never sees half a file. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

void cli_buf_printf(cli_buf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->data && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
}

void cli_buf_json_string(cli_buf *b, const char *s)
{
    cli_buf_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            cli_buf_printf(b, "\\%c", *p);
        else if (*p < 0x20)
            cli_buf_printf(b, "\\u%04x", *p);
        else
            cli_buf_printf(b, "%c", *p);
    }
    cli_buf_printf(b, "\"");
}

void cli_buf_free(cli_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int cli_write_file_atomic(const char *path, const char *content, size_t len)
{
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) {
        cli_error("writing '%s': out of memory", path);
        return 0;
    }
    snprintf(tmp, n, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0) {
        cli_error("cannot write '%s': %s", tmp, strerror(errno));
        free(tmp);
        return 0;
    }
    cli_set_temp_file(tmp);
    int ok = 1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, content + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            cli_error("writing '%s': %s", tmp, strerror(errno));
            ok = 0;
            break;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0 && ok) {
        cli_error("writing '%s': %s", tmp, strerror(errno));
        ok = 0;
    }
    /* An interrupt must not leave the temporary file behind, nor replace
     * an earlier complete file with a new one the user asked us to drop. */
    if (ok && cli_interrupted) ok = 0;
    if (ok && rename(tmp, path) != 0) {
        cli_error("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        ok = 0;
    }
    if (!ok) unlink(tmp);
    cli_set_temp_file(NULL);
    free(tmp);
    return ok;
}

const char *cli_normals_string(pm_normals n)
{
    switch (n) {
    case PM_NORMALS_NONE: return "none";
    case PM_NORMALS_FORWARD: return "forward";
    case PM_NORMALS_SOBEL: return "sobel";
    case PM_NORMALS_DEFAULT:
    case PM_NORMALS_CENTRAL: return "central";
    }
    return "central";
}

static void print_ms(const char *name, double ms, int *first)
{
    printf("%s%s %.1f ms", *first ? "" : ", ", name, ms);
    *first = 0;
}

void cli_print_summary(const cli_result *r)
{
    printf("pyramesh %s\n", r->command);
    printf("  input          %s\n", r->input);
    if (r->have_points) {
        printf("  particles      %zu read", r->particles_read);
        if (r->particles_dropped) printf(", %zu dropped (outside the box)", r->particles_dropped);
        printf("\n");
        printf("  grid           %zu x %zu x %zu, cell %g\n", r->nx, r->ny, r->nz, r->spacing[0]);
    } else {
        printf("  volume         %zu x %zu x %zu %s, spacing %g x %g x %g\n", r->nx, r->ny, r->nz,
               r->sample_type ? r->sample_type : "?", r->spacing[0], r->spacing[1], r->spacing[2]);
    }
    printf("  iso value      %g\n", r->iso);
    printf("  cells          %llu\n", (unsigned long long)r->cells);
    printf("  active cells   %llu\n", (unsigned long long)r->active_cells);
    printf("  vertices       %zu\n", r->vertices);
    printf("  triangles      %zu\n", r->triangles);
    printf("  mesh           %s, %s normals\n", r->soup ? "triangle soup" : "indexed",
           r->normals_name ? r->normals_name : cli_normals_string(r->normals));
    printf("  device         %s", r->device);
    if (r->device_name[0] && strcmp(r->device_name, r->device) != 0)
        printf(" (%s)", r->device_name);
    printf(", %d thread%s\n", r->threads, r->threads == 1 ? "" : "s");
    if (r->report.path[0]) printf("  path           %s\n", r->report.path);
    if (r->num_post) {
        int on_dev = 0;
        for (int i = 0; i < r->num_post; i++)
            on_dev += strcmp(r->post[i].path, "device") == 0;
        printf("  post-processing %d step%s (%d on the device), %.1f ms\n", r->num_post,
               r->num_post == 1 ? "" : "s", on_dev, r->post_ms);
    }
    printf("  output         %s\n", r->output);
    printf("  time           ");
    int first = 1;
    print_ms("read", r->t.read_ms, &first);
    if (r->have_points) {
        print_ms("neighbours", r->t.neighbours_ms, &first);
        print_ms("density", r->t.density_ms, &first);
        print_ms("field", r->t.field_ms, &first);
    }
    print_ms("extract", r->t.extract_ms, &first);
    if (r->subdivide) print_ms("subdivide", r->subdivide_ms, &first);
    if (r->num_post) print_ms("post-processing", r->post_ms, &first);
    print_ms("write", r->t.write_ms, &first);
    printf("\n  total          %.1f ms\n", r->total_ms);
}

void cli_print_frame_line(const char *frame, const cli_result *r)
{
    printf("frame %s: %s -> %s: %zu vertices, %zu triangles, %.1f ms\n", frame, r->input, r->output,
           r->vertices, r->triangles, r->total_ms);
}

void cli_result_json(cli_buf *b, const cli_result *r, int indent)
{
    const char *in = indent ? "    " : "  ";
    const char *close = indent ? "  " : "";
    cli_buf_printf(b, "{\n%s\"command\": \"%s\",\n%s\"input\": ", in, r->command, in);
    cli_buf_json_string(b, r->input);
    cli_buf_printf(b, ",\n%s\"output\": ", in);
    cli_buf_json_string(b, r->output);
    cli_buf_printf(b, ",\n%s\"device\": ", in);
    cli_buf_json_string(b, r->device);
    cli_buf_printf(b, ",\n%s\"device_name\": ", in);
    cli_buf_json_string(b, r->device_name);
    cli_buf_printf(b, ",\n%s\"threads\": %d,\n%s\"ranks\": %d,\n%s\"path\": ", in, r->threads, in,
                   r->ranks ? r->ranks : 1, in);
    cli_buf_json_string(b, r->report.path);
    cli_buf_printf(b, ",\n%s\"extract_stages_ms\": {", in);
    for (int i = 0; i < 4 && r->report.stage_names[i]; i++) {
        cli_buf_printf(b, "%s", i ? ", " : "");
        cli_buf_json_string(b, r->report.stage_names[i]);
        cli_buf_printf(b, ": %.3f", r->report.stage_ms[i]);
    }
    cli_buf_printf(b, "}");
    if (r->subdivide)
        cli_buf_printf(b, ",\n%s\"subdivide\": {\"levels\": %d, \"ms\": %.3f}", in, r->subdivide, r->subdivide_ms);
    cli_buf_printf(b, ",\n%s\"dims\": [%zu, %zu, %zu],\n", in, r->nx, r->ny, r->nz);
    if (r->sample_type) cli_buf_printf(b, "%s\"sample_type\": \"%s\",\n", in, r->sample_type);
    cli_buf_printf(b, "%s\"spacing\": [%.17g, %.17g, %.17g],\n", in, r->spacing[0], r->spacing[1],
                   r->spacing[2]);
    cli_buf_printf(b, "%s\"iso\": %.17g,\n", in, r->iso);
    if (r->have_points) {
        cli_buf_printf(b, "%s\"particles_read\": %zu,\n", in, r->particles_read);
        cli_buf_printf(b, "%s\"particles_used\": %zu,\n", in, r->particles_used);
        cli_buf_printf(b, "%s\"particles_dropped\": %zu,\n", in, r->particles_dropped);
        cli_buf_printf(b, "%s\"grid_dims\": [%zu, %zu, %zu],\n", in, r->nx, r->ny, r->nz);
    }
    cli_buf_printf(b, "%s\"cells\": %llu,\n", in, (unsigned long long)r->cells);
    cli_buf_printf(b, "%s\"active_cells\": %llu,\n", in, (unsigned long long)r->active_cells);
    cli_buf_printf(b, "%s\"vertices\": %zu,\n", in, r->vertices);
    cli_buf_printf(b, "%s\"triangles\": %zu,\n", in, r->triangles);
    cli_buf_printf(b, "%s\"mesh\": \"%s\",\n", in, r->soup ? "soup" : "indexed");
    if (r->write_path) cli_buf_printf(b, "%s\"write_path\": \"%s\",\n", in, r->write_path);
    cli_buf_printf(b, "%s\"normals\": \"%s\",\n", in,
                   r->normals_name ? r->normals_name : cli_normals_string(r->normals));
    if (r->num_post) {
        cli_buf_printf(b, "%s\"post_processing\": {\"total_ms\": %.3f, \"steps\": [", in,
                       r->post_ms);
        for (int i = 0; i < r->num_post; i++) {
            const cli_post_step *t = &r->post[i];
            cli_buf_printf(b, "%s\n%s  {\"step\": ", i ? "," : "", in);
            cli_buf_json_string(b, t->name);
            cli_buf_printf(b,
                           ", \"path\": \"%s\", \"ms\": %.3f, \"triangles_in\": %zu, "
                           "\"triangles\": %zu, \"vertices\": %zu}",
                           t->path, t->ms, t->triangles_in, t->triangles, t->vertices);
        }
        cli_buf_printf(b, "\n%s]},\n", in);
    }
    cli_buf_printf(b, "%s\"timings_ms\": {\"read\": %.3f, ", in, r->t.read_ms);
    if (r->have_points)
        cli_buf_printf(b,
                       "\"upload\": %.3f, \"neighbours\": %.3f, \"density\": %.3f, "
                       "\"field\": %.3f, ",
                       r->upload_ms, r->t.neighbours_ms, r->t.density_ms, r->t.field_ms);
    if (r->num_post) cli_buf_printf(b, "\"post_processing\": %.3f, ", r->post_ms);
    cli_buf_printf(b, "\"extract\": %.3f, \"write\": %.3f, \"total\": %.3f}\n%s}", r->t.extract_ms,
                   r->t.write_ms, r->total_ms, close);
}
