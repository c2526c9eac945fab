/* The progress line: one \r-updated line on stderr with the stage being run
 * and, for frame sequences, frames done and left, elapsed time and an
 * estimate of the time left. Only on a terminal and without --quiet, so
 * logs and pipes never see carriage returns. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

void cli_progress_init(cli_progress *p, int quiet, size_t total_frames)
{
    p->enabled = !quiet && isatty(STDERR_FILENO);
    p->shown = 0;
    p->t0 = cli_now_ms();
    p->total = total_frames;
    p->done = p->failed = 0;
    p->frame = NULL;
}

static void format_time(char *buf, size_t n, double ms)
{
    double s = ms / 1000.0;
    if (s < 60)
        snprintf(buf, n, "%.1fs", s);
    else if (s < 3600)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

void cli_progress_stage(cli_progress *p, const char *stage)
{
    if (!p || !p->enabled) return;
    double elapsed = cli_now_ms() - p->t0;
    char el[32], eta[64] = "";
    format_time(el, sizeof el, elapsed);
    /* "\033[K" clears what a longer previous line left on the right. */
    if (p->total > 1) {
        size_t finished = p->done + p->failed;
        if (finished > 0) {
            double left = elapsed / (double)finished * (double)(p->total - finished);
            char t[32];
            format_time(t, sizeof t, left);
            snprintf(eta, sizeof eta, ", about %s left", t);
        }
        char failed[40] = "";
        if (p->failed) snprintf(failed, sizeof failed, ", %zu failed", p->failed);
        fprintf(stderr, "\r\033[K[%zu/%zu done, %zu left%s] frame %s: %s, %s elapsed%s", p->done,
                p->total, p->total - finished, failed, p->frame ? p->frame : "?", stage, el, eta);
    } else {
        fprintf(stderr, "\r\033[K%s... (%s elapsed)", stage, el);
    }
    fflush(stderr);
    p->shown = 1;
}

void cli_progress_frame_done(cli_progress *p, int failed)
{
    if (!p) return;
    if (failed)
        p->failed++;
    else
        p->done++;
}

void cli_progress_clear(cli_progress *p)
{
    if (!p || !p->enabled || !p->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = 0;
}
