/* libFuzzer target: the .inr volume reader, then marching cubes on what it read. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return pm_fuzz_volume(data, size, ".inr");
}
