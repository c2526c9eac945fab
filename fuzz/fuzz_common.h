/* Shared by the fuzz targets: the readers take paths, so each input is
 * written to a per-process temporary file with the extension that selects
 * the reader under test. */
#ifndef PM_FUZZ_COMMON_H
#define PM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pyramesh.h"

/* Memory cap handed to the readers: a header may claim anything, the
 * reader must refuse before allocating more than this. */
#define PM_FUZZ_MAX_MEMORY (64u << 20)

static inline const char *pm_fuzz_write(const uint8_t *data, size_t size, const char *ext)
{
    static char path[256];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/pm_fuzz_%ld%s", dir ? dir : "/tmp", (long)getpid(), ext);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}

/* A small volume that was read successfully also goes through marching
 * cubes, so hostile sample values (NaN, inf, denormals) are exercised. */
static inline void pm_fuzz_extract(const pm_volume *vol)
{
    if ((uint64_t)vol->nx * vol->ny * vol->nz > (1u << 16)) return;
    pm_context_desc d = {sizeof d, PM_DEVICE_CPU, 0, 1, NULL};
    pm_context *ctx;
    if (pm_context_create(&d, &ctx) != PM_STATUS_OK) abort();
    pm_isosurface_options opt = {0};
    pm_mesh mesh;
    if (pm_isosurface(ctx, vol, 0.5, &opt, &mesh) == PM_STATUS_OK) {
        for (size_t i = 0; i < 3 * mesh.num_vertices; i++)
            if (mesh.positions[i] != mesh.positions[i]) abort(); /* NaN vertex */
    }
    pm_mesh_free(ctx, &mesh);
    pm_context_destroy(ctx);
}

/* The three kinds of target: read a file of the given extension; what is
 * accepted must be sane (no NaN, indices in range), what is refused must
 * say why. */
static inline int pm_fuzz_volume(const uint8_t *data, size_t size, const char *ext)
{
    const char *path = pm_fuzz_write(data, size, ext);
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

static inline int pm_fuzz_points(const uint8_t *data, size_t size, const char *ext)
{
    const char *path = pm_fuzz_write(data, size, ext);
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

/* Meshes also go through pm_mesh_analyze. */
static inline int pm_fuzz_mesh(const uint8_t *data, size_t size, const char *ext)
{
    const char *path = pm_fuzz_write(data, size, ext);
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

#endif
