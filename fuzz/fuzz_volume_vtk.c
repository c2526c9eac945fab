/* libFuzzer target: the .vtk volume reader, then marching cubes on what it read. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = pm_fuzz_write(data, size, ".vtk");
    pm_volume vol;
    if (pm_volume_read(path, NULL, PM_FUZZ_MAX_MEMORY, &vol) == PM_STATUS_OK) {
        pm_fuzz_extract(&vol);
        pm_volume_free(&vol);
    } else if (pm_last_error()[0] == '\0') {
        abort(); /* every failure must say why */
    }
    unlink(path);
    return 0;
}
