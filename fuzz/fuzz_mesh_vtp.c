/* libFuzzer target: the .vtp mesh reader. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return pm_fuzz_mesh(data, size, ".vtp");
}
