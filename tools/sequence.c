/* Frame sequences: an input name holding `{}` matches every file whose name
 * has a run of digits in that place (found by scanning the directory). The
 * frames run in natural (numeric) order, -s/-e select frame numbers, and
 * the output name gets the frame's digits exactly as they appear in the
 * input name. One bad frame is reported and the rest go on. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- the sequence's writer thread ----------------------------------------
 * One write in flight: frame k's file is written while frame k + 1 is
 * read and meshed, so a sequence runs at the rate of its slowest stage. A
 * mesh in GPU memory is written through the writer's own context (a
 * context serves one thread at a time) on the same GPU; the frame's
 * context frees the mesh once the write is joined. */
typedef struct seq_writer {
    int enabled; /* inside a sequence's run */
    int running;
    pthread_t th;
    pm_context *ctx;  /* the frame's */
    pm_context *wctx; /* the writer's, made for the first mesh in GPU memory */
    int no_twin;      /* it could not be made: GPU meshes are written in turn */
    int quiet;
    const char *path;
    pm_mesh mesh;
    pm_write_options w;
    cli_result *r;
    pm_status st;
    char msg[512];
} seq_writer;

static seq_writer writer;

static void *writer_main(void *arg)
{
    seq_writer *W = arg;
    const double t0 = cli_now_ms();
    W->st = W->mesh.in_context_memory ? pm_mesh_write_context(W->wctx, W->path, &W->mesh, &W->w)
                                      : pm_mesh_write(W->path, &W->mesh, &W->w);
    W->r->t.write_ms = cli_now_ms() - t0;
    if (W->st != PM_STATUS_OK) snprintf(W->msg, sizeof W->msg, "%s", pm_last_error());
    return NULL;
}

/* Waits for the write in flight; its frame's result records how it went
 * (the message is printed when the frame is finished). */
static void writer_join(void)
{
    if (!writer.running) return;
    pthread_join(writer.th, NULL);
    writer.running = 0;
    pm_mesh_free(writer.ctx, &writer.mesh);
    if (writer.st != PM_STATUS_OK) {
        /* Printed when its frame is finished (the library's message names
         * the file). */
        writer.r->write_failed = 1;
        snprintf(writer.r->write_error, sizeof writer.r->write_error, "%s",
                 writer.msg[0] ? writer.msg : pm_status_string(writer.st));
    }
}

pm_status cli_write_now(pm_context *ctx, const char *path, const pm_mesh *mesh,
                        const pm_write_options *w, cli_result *r)
{
    r->write_path = pm_mesh_write_route(ctx, path, mesh, w);
    const double t0 = cli_now_ms();
    pm_status s = pm_mesh_write_context(ctx, path, mesh, w);
    r->t.write_ms = cli_now_ms() - t0;
    return s;
}

int cli_write_join(void)
{
    if (!writer.running) return 0;
    writer_join();
    return 1;
}

int cli_write_deferred(pm_context *ctx, const char *path, pm_mesh *mesh,
                       const pm_write_options *w, cli_result *r)
{
    if (!writer.enabled || cli_mpi_rank >= 0) return 0;
    if (mesh->in_context_memory) {
        /* A GPU's mesh: through the writer's own context on that GPU. */
        if (pm_context_device(ctx) != PM_DEVICE_CUDA || writer.no_twin) return 0;
        if (!writer.wctx && !cli_context_twin(ctx, &writer.wctx)) {
            /* Written in the frame's turn from now on; said once. */
            writer.no_twin = 1;
            if (!writer.quiet)
                fprintf(stderr,
                        "pyramesh: note: no second GPU context for the writer thread (%s); "
                        "frames are written in their own turn\n",
                        pm_last_error());
            return 0;
        }
    }
    const double t0 = cli_now_ms();
    writer_join();
    r->write_wait_ms = cli_now_ms() - t0;
    r->write_path = pm_mesh_write_route(ctx, path, mesh, w);
    writer.ctx = ctx;
    writer.path = path;
    writer.mesh = *mesh;
    writer.w = *w;
    writer.r = r;
    writer.st = PM_STATUS_OK;
    writer.msg[0] = '\0';
    if (pthread_create(&writer.th, NULL, writer_main, &writer) != 0) return 0;
    writer.running = 1;
    memset(mesh, 0, sizeof *mesh);
    r->write_deferred = 1;
    return 1;
}

static int count_placeholders(const char *s)
{
    int n = 0;
    for (const char *p = strstr(s, "{}"); p; p = strstr(p + 2, "{}"))
        n++;
    return n;
}

/* pattern with its one "{}" replaced by digits (malloc'd). */
static char *substitute(const char *pattern, const char *digits)
{
    const char *at = strstr(pattern, "{}");
    size_t pre = (size_t)(at - pattern), dl = strlen(digits), post = strlen(at + 2);
    char *s = malloc(pre + dl + post + 1);
    if (!s) return NULL;
    memcpy(s, pattern, pre);
    memcpy(s + pre, digits, dl);
    memcpy(s + pre + dl, at + 2, post + 1);
    return s;
}

typedef struct found_frame {
    char *digits;
    long long number; /* saturated at LLONG_MAX for absurdly long runs */
} found_frame;

static int compare_frames(const void *a, const void *b)
{
    const found_frame *x = a, *y = b;
    if (x->number != y->number) return x->number < y->number ? -1 : 1;
    /* Same number written differently ("7", "07"): shorter first, then by
     * text, so the order never depends on the directory's. */
    size_t lx = strlen(x->digits), ly = strlen(y->digits);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->digits, y->digits);
}

static long long digits_value(const char *d)
{
    long long v = 0;
    for (; *d; d++) {
        int k = *d - '0';
        if (v > (LLONG_MAX - k) / 10) return LLONG_MAX;
        v = v * 10 + k;
    }
    return v;
}

/* Scans the directory of `pattern` for the frames; returns the count, or
 * -1 after printing an error. */
static long find_frames(const char *pattern, const cli_common *c, found_frame **out)
{
    *out = NULL;
    const char *at = strstr(pattern, "{}");
    const char *slash = strrchr(pattern, '/');
    char *dir;
    const char *base;
    if (slash) {
        size_t len = (size_t)(slash - pattern);
        dir = malloc(len + 2);
        if (!dir) return -1;
        if (len == 0)
            strcpy(dir, "/");
        else {
            memcpy(dir, pattern, len);
            dir[len] = '\0';
        }
        base = slash + 1;
    } else {
        dir = malloc(2);
        if (!dir) return -1;
        strcpy(dir, ".");
        base = pattern;
    }
    size_t pre_len = (size_t)(at - base);
    const char *suffix = at + 2;
    size_t suf_len = strlen(suffix);

    DIR *d = opendir(dir);
    if (!d) {
        cli_error("cannot scan directory '%s' for '%s': %s", dir, pattern, strerror(errno));
        free(dir);
        return -1;
    }
    found_frame *frames = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *name = e->d_name;
        size_t len = strlen(name);
        if (len <= pre_len + suf_len || strncmp(name, base, pre_len) != 0 ||
            strcmp(name + len - suf_len, suffix) != 0)
            continue;
        size_t dl = len - pre_len - suf_len;
        int all_digits = 1;
        for (size_t k = 0; k < dl; k++)
            if (!isdigit((unsigned char)name[pre_len + k])) all_digits = 0;
        if (!all_digits) continue;
        char *digits = malloc(dl + 1);
        if (!digits) break;
        memcpy(digits, name + pre_len, dl);
        digits[dl] = '\0';
        long long num = digits_value(digits);
        if ((c->have_start && num < c->start) || (c->have_end && num > c->end)) {
            free(digits);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            found_frame *f = realloc(frames, nc * sizeof *f);
            if (!f) {
                free(digits);
                break;
            }
            frames = f;
            cap = nc;
        }
        frames[n].digits = digits;
        frames[n].number = num;
        n++;
    }
    closedir(d);
    free(dir);
    if (n > 0) qsort(frames, n, sizeof *frames, compare_frames);
    *out = frames;
    return (long)n;
}

/* Notes the frame numbers in the selected range that have no file. */
static void note_missing(const found_frame *f, long n, const cli_common *c)
{
    if (n <= 0) return;
    long long lo = c->have_start ? c->start : f[0].number;
    long long hi = c->have_end ? c->end : f[n - 1].number;
    int notes = 0;
    unsigned long long more = 0;
    long long expect = lo; /* the next number we expect to see */
    for (long k = 0; k <= n; k++) {
        long long next = k < n ? f[k].number : (hi == LLONG_MAX ? hi : hi + 1);
        if (next > expect) {
            long long last = next - 1;
            if (notes < 10) {
                if (last == expect)
                    fprintf(stderr, "pyramesh: note: frame %lld not found, skipped\n", expect);
                else
                    fprintf(stderr, "pyramesh: note: frames %lld to %lld not found, skipped\n",
                            expect, last);
                notes++;
            } else {
                more++;
            }
        }
        if (k < n && next >= expect) expect = next == LLONG_MAX ? next : next + 1;
    }
    if (more) fprintf(stderr, "pyramesh: note: %llu more gaps in the frame numbers\n", more);
}

static int write_single_stats(const char *path, const cli_result *r)
{
    cli_buf b = {0};
    cli_result_json(&b, r, 0);
    cli_buf_printf(&b, "\n");
    int ok = !b.failed && cli_write_file_atomic(path, b.data, b.len);
    if (b.failed) cli_error("writing '%s': out of memory", path);
    cli_buf_free(&b);
    return ok;
}

int cli_run_frames(const char *cmd, const char *input, const cli_common *c, cli_frame_fn fn,
                   void *user)
{
    int in_ph = count_placeholders(input), out_ph = count_placeholders(c->output);
    int stats_ph = c->stats_path ? count_placeholders(c->stats_path) : 0;
    if (in_ph > 1 || out_ph > 1 || stats_ph > 1)
        return cli_usage_error(cmd, "a name may hold at most one '{}'");
    if (in_ph == 0 && (out_ph || stats_ph))
        return cli_usage_error(cmd, "the output name has '{}' but the input '%s' has none", input);
    if (in_ph == 1 && !out_ph)
        return cli_usage_error(cmd,
                               "the input '%s' is a sequence: the output name needs '{}' "
                               "too (e.g. -o out/surface_{}.ply)",
                               input);
    if (in_ph == 1 && strchr(strstr(input, "{}"), '/'))
        return cli_usage_error(cmd, "'{}' must be in the file name, not in a directory name");
    if (in_ph == 0 && (c->have_start || c->have_end))
        return cli_usage_error(cmd, "-s/-e select frames of an input holding '{}'");
    if (c->have_start && c->have_end && c->start > c->end)
        return cli_usage_error(cmd, "-s %lld is after -e %lld", c->start, c->end);
    if (c->stats_path && !stats_ph && !cli_check_output_dir(c->stats_path)) return CLI_FAIL;

    cli_progress progress;
    cli_frame frame;
    cli_result r;
    memset(&frame, 0, sizeof frame);
    memset(&r, 0, sizeof r);

    if (in_ph == 0) {
        cli_progress_init(&progress, c->quiet, 1);
        frame.input = (char *)input;
        frame.output = (char *)c->output;
        int rc = fn(user, &frame, &progress, &r);
        cli_progress_clear(&progress);
        if (rc == CLI_INTERRUPTED) cli_check_interrupt();
        if (rc != CLI_OK) return rc;
        if (!c->quiet) cli_print_summary(&r);
        if (c->stats_path && !write_single_stats(c->stats_path, &r))
            return cli_check_interrupt() ? CLI_INTERRUPTED : CLI_FAIL;
        return CLI_OK;
    }

    found_frame *frames = NULL;
    long n = find_frames(input, c, &frames);
    if (n < 0) return CLI_FAIL;
    if (n == 0) {
        cli_error("no file matches '%s'%s", input,
                  c->have_start || c->have_end ? " in the frame range given by -s/-e" : "");
        free(frames);
        return CLI_FAIL;
    }
    if (!c->quiet) note_missing(frames, n, c);

    cli_progress_init(&progress, c->quiet, (size_t)n);
    cli_buf json = {0};
    if (c->stats_path && !stats_ph) cli_buf_printf(&json, "{\n  \"frames\": [");
    long done = 0, failed = 0, json_items = 0;
    int rc = CLI_OK;
    /* Two slots: frame k is computed in slot k % 2 while the writer may
     * still write frame k - 1 from the other; a frame is finished (stats,
     * line, counts) once its file is written. */
    cli_result *sr = calloc(2, sizeof *sr);
    if (!sr) {
        cli_error("out of memory");
        free(frames);
        cli_buf_free(&json);
        return CLI_FAIL;
    }
    cli_frame sf[2];
    int sfrc[2] = {CLI_OK, CLI_OK}, pending = -1;
    long sk[2] = {0, 0};
    double seq_t0 = cli_now_ms(), sum_read = 0, sum_write = 0, sum_total = 0;
    long deferred = 0;
    memset(sf, 0, sizeof sf);
    writer.enabled = 1;
    writer.quiet = c->quiet;
    for (long k = 0;; k++) {
        const int cur = (int)(k & 1);
        int frc = CLI_OK;
        const int run = k < n && !cli_interrupted;
        if (run) {
            cli_result *rr = &sr[cur];
            cli_frame *fr = &sf[cur];
            memset(rr, 0, sizeof *rr);
            memset(fr, 0, sizeof *fr);
            fr->digits = frames[k].digits;
            fr->number = frames[k].number;
            fr->input = substitute(input, frames[k].digits);
            fr->output = substitute(c->output, frames[k].digits);
            fr->stats = stats_ph ? substitute(c->stats_path, frames[k].digits) : NULL;
            progress.frame = frames[k].digits;
            if (!fr->input || !fr->output || (stats_ph && !fr->stats)) {
                cli_progress_clear(&progress);
                cli_error("out of memory");
                frc = CLI_FAIL;
            } else {
                frc = fn(user, fr, &progress, rr);
            }
            cli_progress_clear(&progress);
            sfrc[cur] = frc;
            sk[cur] = k;
        }
        /* Finish the previous frame (its write is done once joined), then
         * this one unless its file is still being written. */
        for (int pass = 0; pass < 2; pass++) {
            int slot = pass == 0 ? pending : (run ? cur : -1);
            if (slot < 0) continue;
            if (pass == 0) {
                /* Its write, unless this frame's own deferral joined it. */
                if (writer.running && writer.r == &sr[slot]) writer_join();
                pending = -1;
            } else if (sfrc[slot] == CLI_OK && sr[slot].write_deferred && writer.running &&
                       writer.r == &sr[slot]) {
                pending = slot;
                continue;
            }
            cli_result *rr = &sr[slot];
            cli_frame *fr = &sf[slot];
            int f = sfrc[slot];
            if (f == CLI_OK && rr->write_failed) {
                cli_progress_clear(&progress);
                cli_error("%s", rr->write_error);
                f = CLI_FAIL;
            }
            /* Its total: its own stages and its write, not the wait for
             * the previous frame's write. */
            if (f == CLI_OK)
                rr->total_ms += (rr->write_deferred ? rr->t.write_ms : 0.0) - rr->write_wait_ms;
            if (f == CLI_OK && rr->write_deferred) deferred++;
            if (f == CLI_OK && fr->stats && !write_single_stats(fr->stats, rr)) f = CLI_FAIL;
            if (f == CLI_OK && c->stats_path && !stats_ph) {
                cli_buf_printf(&json, "%s\n  ", json_items++ ? "," : "");
                cli_result_json(&json, rr, 1);
            }
            /* rr points into the frame's strings: print before freeing them. */
            if (f == CLI_OK && !c->quiet) cli_print_frame_line(frames[sk[slot]].digits, rr);
            if (f == CLI_OK) {
                sum_read += rr->t.read_ms;
                sum_write += rr->t.write_ms;
                sum_total += rr->total_ms;
            }
            free(fr->input);
            free(fr->output);
            free(fr->stats);
            memset(fr, 0, sizeof *fr);
            if (f == CLI_INTERRUPTED) continue;
            if (f == CLI_OK)
                done++;
            else
                failed++;
            cli_progress_frame_done(&progress, f != CLI_OK);
            fflush(stdout);
        }
        if (!run || frc == CLI_INTERRUPTED) {
            if (pending >= 0) continue; /* finish it on the next turn */
            break;
        }
    }
    writer.enabled = 0;
    pm_context_destroy(writer.wctx);
    writer.wctx = NULL;
    writer.no_twin = 0;
    free(sr);
    if (!c->quiet && done > 0) {
        /* The stages' rates: the sequence runs at the slowest one's. */
        const double wall = cli_now_ms() - seq_t0, rest = (sum_total - sum_read - sum_write) / done;
        printf("%.2f frames/s (%.0f ms); per frame: read %.1f ms, meshing %.1f ms, write %.1f ms%s\n",
               1e3 * (double)done / wall, wall, sum_read / done, rest, sum_write / done,
               deferred == done ? " (overlapped with the next frame)" : "");
    }
    for (long k = 0; k < n; k++)
        free(frames[k].digits);
    free(frames);
    cli_progress_clear(&progress);
    if (cli_check_interrupt()) {
        cli_buf_free(&json);
        fprintf(stderr, "pyramesh: %ld frames done before the interrupt\n", done);
        return CLI_INTERRUPTED;
    }
    if (c->stats_path && !stats_ph) {
        cli_buf_printf(&json, "\n  ],\n  \"frames_done\": %ld,\n  \"frames_failed\": %ld\n}\n",
                       done, failed);
        if (json.failed)
            cli_error("writing '%s': out of memory", c->stats_path);
        else if (!cli_write_file_atomic(c->stats_path, json.data, json.len))
            rc = CLI_FAIL;
        cli_buf_free(&json);
        if (cli_check_interrupt()) return CLI_INTERRUPTED;
    }
    if (!c->quiet)
        printf("%ld frames done, %ld failed\n", done, failed);
    else if (failed)
        fprintf(stderr, "pyramesh: %ld frames done, %ld failed\n", done, failed);
    return failed || rc != CLI_OK ? CLI_FAIL : CLI_OK;
}
