/* libFuzzer target: the .ply point reader. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = pm_fuzz_write(data, size, ".ply");
    pm_points pts;
    if (pm_points_read(path, PM_POINTS_AUTO, PM_FUZZ_MAX_MEMORY, &pts) == PM_STATUS_OK) {
        for (size_t i = 0; i < 3 * pts.count; i++)
            if (pts.xyz[i] != pts.xyz[i]) abort(); /* NaN must be rejected */
        pm_points_free(&pts);
    } else if (pm_last_error()[0] == '\0') {
        abort();
    }
    unlink(path);
    return 0;
}
