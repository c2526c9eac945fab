/* The README's library example, built out of tree against an installed
 * pyramesh (tests/cli_install.sh, through pkg-config and through CMake's
 * find_package). Usage: example VOLUME ISO OUT.ply */
#include <pyramesh.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: example VOLUME ISO OUT.ply\n");
        return 2;
    }
    pm_context *ctx;
    if (pm_context_create(NULL, &ctx) != PM_STATUS_OK) { /* CUDA if present, else CPU */
        fprintf(stderr, "%s\n", pm_last_error());
        return 1;
    }
    pm_volume vol; /* host memory */
    if (pm_volume_read(argv[1], NULL, 0, &vol) != PM_STATUS_OK) {
        fprintf(stderr, "%s\n", pm_last_error());
        return 1;
    }
    void *data; /* the volume in context memory */
    size_t bytes = vol.nx * vol.ny * vol.nz * pm_sample_size(vol.type);
    pm_alloc(ctx, bytes, &data);
    pm_upload(ctx, data, vol.data, bytes);
    pm_volume dvol = vol;
    dvol.data = data;

    pm_isosurface_options opt = {0}; /* zero = defaults: indexed, central normals */
    pm_mesh mesh;
    pm_status s = pm_isosurface(ctx, &dvol, atof(argv[2]), &opt, &mesh);
    if (s == PM_STATUS_OK) s = pm_mesh_write(argv[3], &mesh, NULL); /* temp file + rename */
    if (s != PM_STATUS_OK) fprintf(stderr, "%s\n", pm_last_error());
    else printf("%zu vertices, %zu triangles\n", mesh.num_vertices, mesh.num_triangles);

    pm_mesh_free(ctx, &mesh);
    pm_free(ctx, data);
    pm_volume_free(&vol);
    pm_context_destroy(ctx);
    return s == PM_STATUS_OK ? 0 : 1;
}
