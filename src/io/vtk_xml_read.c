/* VTK XML datasets read: ImageData volumes (.vti), the points of
 * UnstructuredGrid and PolyData (.vtu, .vtp; every piece), and PolyData
 * meshes (.vtp: Polys and Strips, point Normals). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/mesh_read.h"
#include "io/vtk_xml.h"

/* The <PointData> array to read: the one its Scalars attribute names,
 * else the first DataArray. */
static pm_status point_scalars(const vtx_file *f, const vtx_tag *piece, vtx_tag *arr)
{
    vtx_tag pd;
    char want[256] = "";
    if (!pmi_vtx_find(f, piece->body, piece->body_end, "PointData", &pd)) {
        vtx_tag cd;
        int cells = pmi_vtx_find(f, piece->body, piece->body_end, "CellData", &cd);
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: no <PointData>%s", f->path,
                         pmi_vtx_offset(f, piece->start),
                         cells ? " (only cell data, which marching cubes cannot use)" : "");
    }
    pmi_vtx_attr(&pd, "Scalars", want, sizeof want);
    const char *p = pd.body;
    while (pmi_vtx_find(f, p, pd.body_end, "DataArray", arr)) {
        char name[256];
        if (!want[0] || (pmi_vtx_attr(arr, "Name", name, sizeof name) && !strcmp(name, want)))
            return PM_STATUS_OK;
        p = arr->body_end;
    }
    return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: no point data array%s%s", f->path,
                     pmi_vtx_offset(f, pd.start), want[0] ? " named " : "", want);
}

static pm_status image_grid(const vtx_file *f, const vtx_tag *img, size_t dims[3],
                            double axes[3][3], double origin[3])
{
    double ext[6], o[3] = {0, 0, 0}, sp[3] = {1, 1, 1}, dir[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    if (pmi_vtx_numbers(img, "WholeExtent", ext, 6) != 1)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: expected <ImageData WholeExtent=\"x0 x1 y0 y1 z0 z1\">",
                         f->path, pmi_vtx_offset(f, img->start));
    if (pmi_vtx_numbers(img, "Origin", o, 3) < 0 || pmi_vtx_numbers(img, "Spacing", sp, 3) < 0 ||
        pmi_vtx_numbers(img, "Direction", dir, 9) < 0)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: Origin and Spacing need 3 finite numbers, Direction 9",
                         f->path, pmi_vtx_offset(f, img->start));
    for (int a = 0; a < 3; a++) {
        double n = ext[2 * a + 1] - ext[2 * a] + 1;
        if (ext[2 * a] != floor(ext[2 * a]) || ext[2 * a + 1] != floor(ext[2 * a + 1]) || n < 1 ||
            n > 1e15)
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: byte %llu: WholeExtent axis %d is %g..%g, expected whole "
                             "numbers with x0 <= x1",
                             f->path, pmi_vtx_offset(f, img->start), a, ext[2 * a], ext[2 * a + 1]);
        dims[a] = (size_t)n;
        if (!(sp[a] != 0))
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: Spacing %g on axis %d, expected non-zero",
                             f->path, sp[a], a);
    }
    /* World position of index (i,j,k): Origin + Direction (ijk * Spacing),
     * the extent's first index included. */
    for (int c = 0; c < 3; c++) {
        origin[c] = o[c];
        for (int a = 0; a < 3; a++) {
            axes[a][c] = dir[3 * c + a] * sp[a];
            origin[c] += axes[a][c] * ext[2 * a];
        }
    }
    return PM_STATUS_OK;
}

pm_status pmi_vti_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    vtx_file f;
    vtx_tag img, piece, arr, piece2;
    size_t dims[3], count;
    double axes[3][3], origin[3];
    void *data = NULL;
    pm_sample_type type;
    pm_status s = pmi_vtx_open(&f, path, "ImageData", max_memory_bytes);
    const char *end = f.text + f.xml_end;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_vtx_find(&f, f.text, end, "ImageData", &img) ||
        !pmi_vtx_find(&f, img.body, end, "Piece", &piece)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: expected <ImageData> with a <Piece>", path);
        goto done;
    }
    if (pmi_vtx_find(&f, piece.body_end, end, "Piece", &piece2)) {
        s = pmi_error(PM_STATUS_UNSUPPORTED,
                      "%s: byte %llu: a second <Piece>; expected one piece covering the "
                      "WholeExtent",
                      path, pmi_vtx_offset(&f, piece2.start));
        goto done;
    }
    if ((s = image_grid(&f, &img, dims, axes, origin)) != PM_STATUS_OK) goto done;
    if (dims[0] < 2 || dims[1] < 2 || dims[2] < 2 ||
        !pmi_mul3_size(dims[0], dims[1], dims[2], &count)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: WholeExtent gives %zu x %zu x %zu points, each must be at least 2 "
                      "(marching cubes needs one cell)",
                      path, dims[0], dims[1], dims[2]);
        goto done;
    }
    if ((s = point_scalars(&f, &piece, &arr)) != PM_STATUS_OK) goto done;
    if ((s = pmi_vtx_array(&f, &arr, count, 1, VTX_SAMPLES, max_memory_bytes, "the point data",
                           &data, &type)) != PM_STATUS_OK)
        goto done;
    pm_volume v = {data, type, dims[0], dims[1], dims[2], 0, 0, {1, 1, 1}, {0, 0, 0}};
    data = NULL;
    if ((s = pmi_volume_orient(path, "Direction and Spacing", axes, origin, &v)) != PM_STATUS_OK) {
        free((void *)v.data);
        goto done;
    }
    *out = v;
done:
    free(data);
    pmi_vtx_close(&f);
    return s;
}

/* NumberOf<what> of a piece as a count. */
static pm_status piece_count(const vtx_file *f, const vtx_tag *piece, const char *attr, uint64_t *n,
                             int required)
{
    char v[64];
    *n = 0;
    if (!pmi_vtx_attr(piece, attr, v, sizeof v)) {
        if (!required) return PM_STATUS_OK;
    } else if (pmi_parse_u64(v, n)) {
        return PM_STATUS_OK;
    }
    return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: expected <Piece %s=\"<count>\">",
                     f->path, pmi_vtx_offset(f, piece->start), attr);
}

/* The <Points> array of a piece as floats. */
static pm_status piece_points(const vtx_file *f, const vtx_tag *piece, uint64_t n,
                              size_t max_memory_bytes, float **xyz)
{
    vtx_tag pts, arr;
    if (!pmi_vtx_find(f, piece->body, piece->body_end, "Points", &pts) ||
        !pmi_vtx_find(f, pts.body, pts.body_end, "DataArray", &arr)) {
        if (n == 0) {
            *xyz = malloc(1);
            return *xyz ? PM_STATUS_OK
                        : pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", f->path);
        }
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: a piece of %llu points without <Points><DataArray>",
                         f->path, pmi_vtx_offset(f, piece->start), (unsigned long long)n);
    }
    return pmi_vtx_array(f, &arr, n, 3, VTX_FLOAT, max_memory_bytes, "Points", (void **)xyz, NULL);
}

pm_status pmi_vtu_read_points(const char *path, size_t max_memory_bytes, pm_points *out)
{
    vtx_file f;
    vtx_tag ds, piece;
    float *xyz = NULL, *part = NULL;
    size_t total = 0;
    pm_status s = pmi_vtx_open(&f, path, "UnstructuredGrid|PolyData", max_memory_bytes);
    const char *end = f.text + f.xml_end;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_vtx_find(&f, f.text, end, f.dataset, &ds)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: no <%s> element", path, f.dataset);
        goto done;
    }
    /* Every piece's points, in file order. */
    for (const char *p = ds.body; pmi_vtx_find(&f, p, end, "Piece", &piece); p = piece.body_end) {
        uint64_t n;
        size_t bytes;
        if ((s = piece_count(&f, &piece, "NumberOfPoints", &n, 1)) != PM_STATUS_OK) goto done;
        if ((s = piece_points(&f, &piece, n, max_memory_bytes, &part)) != PM_STATUS_OK) goto done;
        if (!pmi_add_size(total, (size_t)n, &total) || !pmi_mul_size(total, 12, &bytes) ||
            (max_memory_bytes && bytes > max_memory_bytes)) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: %zu points exceed the memory limit", path,
                          total);
            goto done;
        }
        float *grown = realloc(xyz, bytes ? bytes : 1);
        if (!grown) {
            s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu points", path, total);
            goto done;
        }
        xyz = grown;
        memcpy(xyz + 3 * (total - (size_t)n), part, (size_t)n * 12);
        free(part);
        part = NULL;
    }
    if (!xyz && !(xyz = malloc(1))) {
        s = pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", path);
        goto done;
    }
    if ((s = pmi_points_check_finite(path, xyz, total)) != PM_STATUS_OK) goto done;
    out->xyz = xyz;
    out->count = total;
    xyz = NULL;
done:
    free(part);
    free(xyz);
    pmi_vtx_close(&f);
    return s;
}

/* The cells of <Polys> (kind 1) or <Strips> (kind 2) into the builder. */
static pm_status read_cells(const vtx_file *f, const vtx_tag *piece, const char *name,
                            uint64_t ncells, pmi_mesh_builder *b, size_t max_memory_bytes)
{
    vtx_tag cells, arr;
    int64_t *conn = NULL, *offs = NULL;
    if (ncells == 0) return PM_STATUS_OK;
    if (!pmi_vtx_find(f, piece->body, piece->body_end, name, &cells))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %llu: %llu cells declared but no <%s>",
                         f->path, pmi_vtx_offset(f, piece->start), (unsigned long long)ncells,
                         name);
    pm_status s = PM_STATUS_OK;
    const vtx_tag *found[2] = {NULL, NULL};
    vtx_tag tags[2];
    for (const char *p = cells.body; pmi_vtx_find(f, p, cells.body_end, "DataArray", &arr);
         p = arr.body_end) {
        char v[64];
        if (!pmi_vtx_attr(&arr, "Name", v, sizeof v)) continue;
        int k = !strcmp(v, "connectivity") ? 0 : !strcmp(v, "offsets") ? 1 : -1;
        if (k >= 0) {
            tags[k] = arr;
            found[k] = &tags[k];
        }
    }
    if (!found[0] || !found[1])
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte %llu: <%s> needs DataArrays named connectivity and offsets",
                         f->path, pmi_vtx_offset(f, cells.start), name);
    s = pmi_vtx_array(f, found[1], ncells, 1, VTX_INT64, max_memory_bytes, "offsets",
                      (void **)&offs, NULL);
    int64_t nconn = s == PM_STATUS_OK ? offs[ncells - 1] : 0;
    for (uint64_t c = 0; s == PM_STATUS_OK && c < ncells; c++)
        if (offs[c] < (c ? offs[c - 1] : 0))
            s = pmi_error(PM_STATUS_PARSE_ERROR,
                          "%s: %s offsets[%llu] = %lld: offsets must not decrease", f->path, name,
                          (unsigned long long)c, (long long)offs[c]);
    if (s == PM_STATUS_OK)
        s = pmi_vtx_array(f, found[0], (uint64_t)nconn, 1, VTX_INT64, max_memory_bytes,
                          "connectivity", (void **)&conn, NULL);
    int strip = !strcmp(name, "Strips");
    for (uint64_t c = 0; s == PM_STATUS_OK && c < ncells; c++) {
        pmi_mb_poly_begin(b, c, strip);
        for (int64_t i = c ? offs[c - 1] : 0; i < offs[c] && s == PM_STATUS_OK; i++)
            s = pmi_mb_poly_corner(b, conn[i] < 0 ? UINT64_MAX : (uint64_t)conn[i], name);
    }
    free(conn);
    free(offs);
    return s;
}

pm_status pmi_vtp_read_mesh(const char *path, size_t max_memory_bytes, pm_mesh *out)
{
    vtx_file f;
    vtx_tag ds, piece, other, pd, arr;
    pmi_mesh_builder b;
    pmi_mb_init(&b, path, max_memory_bytes);
    float *xyz = NULL, *nrm = NULL;
    uint64_t n, npolys, nstrips;
    pm_status s = pmi_vtx_open(&f, path, "PolyData", max_memory_bytes);
    const char *end = f.text + f.xml_end;
    if (s != PM_STATUS_OK) goto done;
    if (!pmi_vtx_find(&f, f.text, end, "PolyData", &ds) ||
        !pmi_vtx_find(&f, ds.body, end, "Piece", &piece)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR, "%s: expected <PolyData> with a <Piece>", path);
        goto done;
    }
    if (pmi_vtx_find(&f, piece.body_end, end, "Piece", &other)) {
        s = pmi_error(PM_STATUS_UNSUPPORTED, "%s: byte %llu: a second <Piece>, expected one", path,
                      pmi_vtx_offset(&f, other.start));
        goto done;
    }
    if ((s = piece_count(&f, &piece, "NumberOfPoints", &n, 1)) != PM_STATUS_OK ||
        (s = piece_count(&f, &piece, "NumberOfPolys", &npolys, 0)) != PM_STATUS_OK ||
        (s = piece_count(&f, &piece, "NumberOfStrips", &nstrips, 0)) != PM_STATUS_OK)
        goto done;
    if (n > (uint64_t)UINT32_MAX + 1) {
        s = pmi_error(PM_STATUS_OVERFLOW, "%s: %llu points exceed the mesh's 32-bit indices", path,
                      (unsigned long long)n);
        goto done;
    }
    if ((s = piece_points(&f, &piece, n, max_memory_bytes, &xyz)) != PM_STATUS_OK) goto done;
    /* Point normals: the array PointData's Normals attribute names, else
     * one named "Normals". */
    char want[128] = "Normals";
    if (pmi_vtx_find(&f, piece.body, piece.body_end, "PointData", &pd)) {
        pmi_vtx_attr(&pd, "Normals", want, sizeof want);
        for (const char *p = pd.body; pmi_vtx_find(&f, p, pd.body_end, "DataArray", &arr);
             p = arr.body_end) {
            char name[128];
            if (pmi_vtx_attr(&arr, "Name", name, sizeof name) && !strcmp(name, want)) {
                s = pmi_vtx_array(&f, &arr, n, 3, VTX_FLOAT, max_memory_bytes, "Normals",
                                  (void **)&nrm, NULL);
                break;
            }
        }
        if (s != PM_STATUS_OK) goto done;
    }
    if ((s = pmi_mb_vertices_exact(&b, n, 0, 0, nrm != NULL, "Points")) != PM_STATUS_OK) goto done;
    memcpy(b.positions, xyz, (size_t)n * 12);
    if (nrm) memcpy(b.normals, nrm, (size_t)n * 12);
    if ((s = read_cells(&f, &piece, "Polys", npolys, &b, max_memory_bytes)) != PM_STATUS_OK ||
        (s = read_cells(&f, &piece, "Strips", nstrips, &b, max_memory_bytes)) != PM_STATUS_OK)
        goto done;
    s = pmi_mb_finish(&b, out);
done:
    free(xyz);
    free(nrm);
    pmi_mb_free(&b);
    pmi_vtx_close(&f);
    return s;
}
