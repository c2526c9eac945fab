/* libFuzzer target: the .stl mesh reader, then pm_mesh_analyze on what it accepts. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return pm_fuzz_mesh(data, size, ".stl");
}
