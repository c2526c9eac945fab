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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
    for (long k = 0; k < n; k++) {
        if (cli_interrupted) break;
        memset(&r, 0, sizeof r);
        frame.digits = frames[k].digits;
        frame.number = frames[k].number;
        frame.input = substitute(input, frames[k].digits);
        frame.output = substitute(c->output, frames[k].digits);
        frame.stats = stats_ph ? substitute(c->stats_path, frames[k].digits) : NULL;
        progress.frame = frames[k].digits;
        int frc;
        if (!frame.input || !frame.output || (stats_ph && !frame.stats)) {
            cli_progress_clear(&progress);
            cli_error("out of memory");
            frc = CLI_FAIL;
        } else {
            frc = fn(user, &frame, &progress, &r);
        }
        cli_progress_clear(&progress);
        if (frc == CLI_OK && frame.stats && !write_single_stats(frame.stats, &r)) frc = CLI_FAIL;
        if (frc == CLI_OK && c->stats_path && !stats_ph) {
            cli_buf_printf(&json, "%s\n  ", json_items++ ? "," : "");
            cli_result_json(&json, &r, 1);
        }
        /* r points into frame's strings: print before freeing them. */
        if (frc == CLI_OK && !c->quiet) cli_print_frame_line(frames[k].digits, &r);
        free(frame.input);
        free(frame.output);
        free(frame.stats);
        if (frc == CLI_INTERRUPTED) break;
        if (frc == CLI_OK)
            done++;
        else
            failed++;
        cli_progress_frame_done(&progress, frc != CLI_OK);
        fflush(stdout);
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
