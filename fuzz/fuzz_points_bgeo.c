/* libFuzzer target: the .bgeo points reader. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return pm_fuzz_points(data, size, ".bgeo");
}
