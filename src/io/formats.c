/* The public file entry points: each picks a format from the path's
 * extension (and, where extensions are ambiguous, the first bytes) and
 * hands over to the format's file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/backend.h"
#include "io/io.h"

/* Whether path ends in suffix (ASCII, case-insensitive): ".nii.gz". */
static int ends_with(const char *path, const char *suffix)
{
    size_t n = strlen(path), k = strlen(suffix);
    return n > k && pmi_streq(path + n - k, suffix);
}

pm_status pmi_mesh_check_counts(const char *path, const pm_mesh *m, uint64_t max_index)
{
    if (m->num_vertices && !m->positions)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: mesh positions are NULL", path);
    size_t n3;
    if (!pmi_mul_size(m->num_triangles, 3, &n3))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: triangle count overflows", path);
    if (m->indices) {
        if (m->num_vertices > 0 && m->num_vertices - 1 > max_index)
            return pmi_error(PM_STATUS_OVERFLOW,
                             "%s: %zu vertices: indices do not fit this format's %llu limit", path,
                             m->num_vertices, (unsigned long long)max_index);
    } else {
        if (n3 != m->num_vertices)
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: a soup (indices NULL) needs 3 vertices per triangle, got %zu "
                             "vertices for %zu triangles",
                             path, m->num_vertices, m->num_triangles);
        if (n3 > 0 && n3 - 1 > max_index)
            return pmi_error(PM_STATUS_OVERFLOW,
                             "%s: %zu vertices: indices do not fit this format's %llu limit", path,
                             n3, (unsigned long long)max_index);
    }
    return PM_STATUS_OK;
}

pm_status pmi_mesh_check(const char *path, const pm_mesh *m, uint64_t max_index)
{
    if (m->in_context_memory)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "%s: the mesh is in context memory; writers need host memory "
                         "(pm_mesh_write_context writes it)",
                         path);
    pm_status s = pmi_mesh_check_counts(path, m, max_index);
    if (s != PM_STATUS_OK) return s;
    if (m->indices) {
        const size_t n3 = 3 * m->num_triangles;
        for (size_t i = 0; i < n3; i++)
            if (m->indices[i] >= m->num_vertices)
                return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                                 "%s: triangle %zu refers to vertex %u of %zu", path, i / 3,
                                 m->indices[i], m->num_vertices);
    }
    return PM_STATUS_OK;
}

/* The options (defaults where not given) and the format they or the
 * path's extension name. */
static pm_status write_format(const char *path, const pm_write_options *options,
                              pm_write_options *o, pm_mesh_format *format)
{
    memset(o, 0, sizeof *o);
    if (options) {
        size_t n = options->struct_size ? options->struct_size : sizeof *o;
        memcpy(o, options, n < sizeof *o ? n : sizeof *o);
    }
    pm_mesh_format f = o->format;
    if (f == PM_MESH_FORMAT_AUTO) {
        const char *ext = pmi_extension(path);
        if (pmi_streq(ext, "ply"))
            f = PM_MESH_FORMAT_PLY;
        else if (pmi_streq(ext, "obj"))
            f = PM_MESH_FORMAT_OBJ;
        else if (pmi_streq(ext, "stl"))
            f = PM_MESH_FORMAT_STL;
        else if (pmi_streq(ext, "vtk"))
            f = PM_MESH_FORMAT_VTK;
        else if (pmi_streq(ext, "vtp"))
            f = PM_MESH_FORMAT_VTP;
        else if (pmi_streq(ext, "glb"))
            f = PM_MESH_FORMAT_GLB;
        else
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: unknown mesh extension '.%s', expected .ply, .obj, .stl, .vtk, "
                             ".vtp or .glb",
                             path, ext);
    }
    *format = f;
    return PM_STATUS_OK;
}

pm_status pm_mesh_write(const char *path, const pm_mesh *mesh, const pm_write_options *options)
{
    pmi_clear_error();
    if (!path || !mesh)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_write: NULL argument");
    pm_write_options o;
    pm_mesh_format f = PM_MESH_FORMAT_AUTO;
    pm_status s = write_format(path, options, &o, &f);
    if (s != PM_STATUS_OK) return s;
    switch (f) {
    case PM_MESH_FORMAT_PLY: return pmi_ply_write(path, mesh, o.ascii);
    case PM_MESH_FORMAT_OBJ: return pmi_obj_write(path, mesh);
    case PM_MESH_FORMAT_STL: return pmi_stl_write(path, mesh);
    case PM_MESH_FORMAT_VTK: return pmi_vtk_write(path, mesh);
    case PM_MESH_FORMAT_VTP: return pmi_vtp_write(path, mesh, o.ascii);
    case PM_MESH_FORMAT_GLB: return pmi_glb_write(path, mesh);
    default: break;
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: unknown mesh format %d", path, (int)f);
}

/* A device mesh's arrays copied into host memory, then written. */
static pm_status write_downloaded(pm_context *ctx, const char *path, const pm_mesh *mesh,
                                  const pm_write_options *options)
{
    pm_status s = pmi_mesh_check_counts(path, mesh, UINT64_MAX);
    if (s != PM_STATUS_OK) return s;
    pm_mesh h = *mesh;
    h.in_context_memory = 0;
    h.positions = h.normals = NULL;
    h.indices = NULL;
    size_t vb, ib = 0;
    if (!pmi_mul_size(mesh->num_vertices, 3 * sizeof(float), &vb) ||
        (mesh->indices && !pmi_mul_size(mesh->num_triangles, 3 * sizeof(uint32_t), &ib)))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: mesh size overflows", path);
    h.positions = malloc(vb ? vb : 1);
    if (mesh->normals) h.normals = malloc(vb ? vb : 1);
    if (mesh->indices) h.indices = malloc(ib ? ib : 1);
    if (!h.positions || (mesh->normals && !h.normals) || (mesh->indices && !h.indices))
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: no host memory for the mesh (%zu bytes)", path,
                      (mesh->normals ? 2 : 1) * vb + ib);
    if (s == PM_STATUS_OK && vb) s = pm_download(ctx, h.positions, mesh->positions, vb);
    if (s == PM_STATUS_OK && vb && mesh->normals)
        s = pm_download(ctx, h.normals, mesh->normals, vb);
    if (s == PM_STATUS_OK && ib) s = pm_download(ctx, h.indices, mesh->indices, ib);
    if (s == PM_STATUS_OK) s = pm_mesh_write(path, &h, options);
    free(h.positions);
    free(h.normals);
    free(h.indices);
    return s;
}

/* How pm_mesh_write_context writes a mesh (pm_mesh_write_route). */
typedef enum write_route { ROUTE_HOST, ROUTE_STREAM, ROUTE_DOWNLOAD } write_route;

static pm_status route_of(pm_context *ctx, const char *path, const pm_mesh *mesh,
                          const pm_write_options *options, pm_write_options *o, write_route *r)
{
    *r = ROUTE_HOST;
    pm_mesh_format f = PM_MESH_FORMAT_AUTO;
    pm_status s = write_format(path, options, o, &f);
    if (s != PM_STATUS_OK) return s;
    /* A CPU context's memory is host memory. */
    if (!mesh->in_context_memory || pm_context_device(ctx) == PM_DEVICE_CPU) return s;
    const pmi_backend *be = ctx->backend;
    *r = f == PM_MESH_FORMAT_PLY && !o->ascii && !pmi_host_big_endian() && be->ply_body &&
                 be->mesh_indices_check
             ? ROUTE_STREAM
             : ROUTE_DOWNLOAD;
    return s;
}

const char *pm_mesh_write_route(pm_context *ctx, const char *path, const pm_mesh *mesh,
                                const pm_write_options *options)
{
    pmi_clear_error();
    if (!ctx || !path || !mesh) {
        pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_write_route: NULL argument");
        return NULL;
    }
    pm_write_options o;
    write_route r;
    if (route_of(ctx, path, mesh, options, &o, &r) != PM_STATUS_OK) return NULL;
    return r == ROUTE_STREAM ? "device-stream" : r == ROUTE_DOWNLOAD ? "device-download" : "host";
}

pm_status pm_mesh_write_context(pm_context *ctx, const char *path, const pm_mesh *mesh,
                                const pm_write_options *options)
{
    pmi_clear_error();
    if (!ctx || !path || !mesh)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_mesh_write_context: NULL argument");
    pm_write_options o;
    write_route r;
    pm_status s = route_of(ctx, path, mesh, options, &o, &r);
    if (s != PM_STATUS_OK) return s;
    if (r == ROUTE_HOST) {
        pm_mesh h = *mesh;
        h.in_context_memory = 0;
        return pm_mesh_write(path, &h, &o);
    }
    /* Arrays the device cannot read would fault its kernels. */
    const void *a[3] = {mesh->positions, mesh->normals, mesh->indices};
    static const char *const names[3] = {"positions", "normals", "indices"};
    for (int i = 0; i < 3; i++)
        if (a[i] && !pmi_ctx_accessible(ctx, a[i]))
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: the mesh's %s are not in the context's memory, though "
                             "in_context_memory is set",
                             path, names[i]);
    if (r == ROUTE_STREAM) return pmi_ply_write_context(ctx, path, mesh);
    return write_downloaded(ctx, path, mesh, &o);
}

typedef pm_status (*volume_reader)(const char *, size_t, pm_volume *);

/* A reader from the first bytes, for files whose extension says nothing;
 * NULL when none matches. */
static volume_reader sniff_volume(const char *path)
{
    pmi_reader r;
    if (pmi_reader_open(&r, path) != PM_STATUS_OK) return NULL;
    size_t n = pmi_reader_peek(&r, 64);
    char head[65];
    memcpy(head, r.buf + r.pos, n);
    head[n] = '\0';
    int32_t size = 0;
    if (n >= 4) memcpy(&size, head, 4);
    int swapped = (int32_t)__builtin_bswap32((uint32_t)size);
    pmi_reader_close(&r);
    if (pmi_starts_with(head, "NRRD000")) return pmi_nrrd_read;
    if (pmi_starts_with(head, "# vtk DataFile")) return pmi_vtk_read_volume;
    if (pmi_starts_with(head, "#INRIMAGE")) return pmi_inr_read;
    if (pmi_starts_with(head, "<?xml") || pmi_starts_with(head, "<VTKFile")) return pmi_vti_read;
    if (pmi_starts_with(head, "ObjectType") || pmi_starts_with(head, "NDims")) return pmi_mha_read;
    if (size == 348 || size == 540 || swapped == 348 || swapped == 540) return pmi_nifti_read;
    return NULL;
}

pm_status pm_volume_read(const char *path, const pm_raw_options *raw, size_t max_memory_bytes,
                         pm_volume *out)
{
    pmi_clear_error();
    if (!path || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_volume_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (raw) return pmi_raw_read(path, raw, max_memory_bytes, out);
    const char *ext = pmi_extension(path);
    if (pmi_streq(ext, "nrrd") || pmi_streq(ext, "nhdr"))
        return pmi_nrrd_read(path, max_memory_bytes, out);
    if (pmi_streq(ext, "vtk")) return pmi_vtk_read_volume(path, max_memory_bytes, out);
    if (pmi_streq(ext, "vti")) return pmi_vti_read(path, max_memory_bytes, out);
    if (pmi_streq(ext, "inr") || ends_with(path, ".inr.gz"))
        return pmi_inr_read(path, max_memory_bytes, out);
    if (pmi_streq(ext, "mha") || pmi_streq(ext, "mhd"))
        return pmi_mha_read(path, max_memory_bytes, out);
    if (pmi_streq(ext, "nii") || ends_with(path, ".nii.gz"))
        return pmi_nifti_read(path, max_memory_bytes, out);
    /* A directory with another name: a DICOM series (a directory named
     * like a file format went to that reader, which said "directory"). */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return pmi_dicom_read(path, max_memory_bytes, out);
    volume_reader reader = sniff_volume(path);
    if (reader) return reader(path, max_memory_bytes, out);
    return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                     "%s: unknown volume extension '.%s', expected .nrrd, .nhdr, .vtk, .vti, .inr, "
                     ".inr.gz, .mha, .mhd, .nii, .nii.gz or a DICOM directory (or raw options)",
                     path, ext);
}

void pm_volume_free(pm_volume *volume)
{
    if (!volume) return;
    free((void *)volume->data);
    memset(volume, 0, sizeof *volume);
}

pm_status pm_points_read(const char *path, pm_points_format format, size_t max_memory_bytes,
                         pm_points *out)
{
    pmi_clear_error();
    if (!path || !out)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_points_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (format == PM_POINTS_AUTO) {
        const char *ext = pmi_extension(path);
        if (pmi_streq(ext, "ply"))
            format = PM_POINTS_PLY;
        else if (pmi_streq(ext, "xyz"))
            format = PM_POINTS_AUTO; /* text or binary: xyz.c */
        else if (pmi_streq(ext, "vtk"))
            format = PM_POINTS_VTK;
        else if (pmi_streq(ext, "vtu") || pmi_streq(ext, "vtp"))
            format = PM_POINTS_VTU;
        else if (pmi_streq(ext, "bgeo") || ends_with(path, ".bgeo.gz"))
            format = PM_POINTS_BGEO;
        else if (pmi_streq(ext, "csv"))
            format = PM_POINTS_CSV;
        else
            return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                             "%s: unknown point extension '.%s', expected .ply, .xyz, .vtk, .vtu, "
                             ".vtp, .bgeo, .bgeo.gz or .csv",
                             path, ext);
    }
    switch (format) {
    case PM_POINTS_PLY: return pmi_ply_read_points(path, max_memory_bytes, out);
    case PM_POINTS_VTK: return pmi_vtk_read_points(path, max_memory_bytes, out);
    case PM_POINTS_VTU: return pmi_vtu_read_points(path, max_memory_bytes, out);
    case PM_POINTS_BGEO: return pmi_bgeo_read(path, max_memory_bytes, out);
    case PM_POINTS_CSV: return pmi_csv_read(path, max_memory_bytes, out);
    case PM_POINTS_AUTO:
    case PM_POINTS_XYZ_TEXT:
    case PM_POINTS_XYZ_BINARY: return pmi_xyz_read(path, format, max_memory_bytes, out);
    }
    return pmi_error(PM_STATUS_INVALID_ARGUMENT, "%s: unknown point format %d", path, (int)format);
}

void pm_points_free(pm_points *points)
{
    if (!points) return;
    free(points->xyz);
    memset(points, 0, sizeof *points);
}
