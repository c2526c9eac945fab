/* libFuzzer target: the .ply mesh reader, then pm_mesh_analyze on what it
 * accepts (indices in range, no NaN positions). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = pm_fuzz_write(data, size, ".ply");
    pm_mesh m;
    if (pm_mesh_read(path, PM_FUZZ_MAX_MEMORY, &m) == PM_STATUS_OK) {
        for (size_t i = 0; i < 3 * m.num_vertices; i++)
            if (m.positions[i] != m.positions[i]) abort(); /* NaN must be rejected */
        if (m.indices)
            for (size_t i = 0; i < 3 * m.num_triangles; i++)
                if (m.indices[i] >= m.num_vertices) abort();
        pm_mesh_report r;
        if (pm_mesh_analyze(&m, &r) != PM_STATUS_OK) abort();
        pm_mesh_free(NULL, &m);
    } else if (pm_last_error()[0] == '\0') {
        abort();
    }
    unlink(path);
    return 0;
}
