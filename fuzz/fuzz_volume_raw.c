/* libFuzzer target: the raw volume reader with parsed options. The first
 * 16 bytes of the input choose dims, type, endianness and offset; the rest
 * is the file. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16) return 0;
    pm_raw_options raw = {0};
    raw.struct_size = sizeof raw;
    raw.nx = data[0] | (size_t)data[1] << 8;
    raw.ny = data[2] | (size_t)data[3] << 8;
    raw.nz = data[4] | (size_t)data[5] << 8 | (size_t)data[6] << 16 | (size_t)data[7] << 24;
    raw.type = (pm_sample_type)(data[8] % 6); /* includes one invalid type */
    raw.big_endian = data[9] & 1;
    raw.offset_bytes = data[10] | (uint64_t)data[11] << 8;
    raw.spacing[0] = data[12] ? data[12] / 16.0 : 0.0;
    raw.spacing[1] = 1.0;
    raw.spacing[2] = data[13] & 1 ? -1.0 : 2.0; /* negative spacing must be refused */
    const char *path = pm_fuzz_write(data + 16, size - 16, ".raw");
    pm_volume vol;
    if (pm_volume_read(path, &raw, PM_FUZZ_MAX_MEMORY, &vol) == PM_STATUS_OK) {
        pm_fuzz_extract(&vol);
        pm_volume_free(&vol);
    } else if (pm_last_error()[0] == '\0') {
        abort();
    }
    unlink(path);
    return 0;
}
