/* Status names and the thread-local "last error" message that gives every
 * failure its context (file, offset, what was expected). */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"

static _Thread_local char pmi_message[1024];

pm_status pmi_error(pm_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pmi_message, sizeof pmi_message, fmt, ap);
    va_end(ap);
    return s;
}

void pmi_clear_error(void) { pmi_message[0] = '\0'; }

const char *pm_last_error(void) { return pmi_message; }

const char *pm_status_string(pm_status s)
{
    switch (s) {
    case PM_STATUS_OK: return "ok";
    case PM_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case PM_STATUS_OUT_OF_MEMORY: return "out of memory";
    case PM_STATUS_OVERFLOW: return "size overflow";
    case PM_STATUS_TRUNCATED: return "output truncated to capacity";
    case PM_STATUS_UNSUPPORTED: return "unsupported";
    case PM_STATUS_DEVICE_ERROR: return "device error";
    case PM_STATUS_IO_ERROR: return "i/o error";
    case PM_STATUS_PARSE_ERROR: return "parse error";
    }
    return "unknown status";
}

const char *pm_device_string(pm_device d)
{
    switch (d) {
    case PM_DEVICE_AUTO: return "auto";
    case PM_DEVICE_CPU: return "cpu";
    case PM_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

double pmi_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

uint64_t pmi_total_ram_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return 0;
    return (uint64_t)pages * (uint64_t)page;
}
