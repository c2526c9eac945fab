/* NIfTI-1 and NIfTI-2 single-file volumes (.nii, .nii.gz; the NIfTI
 * Data Format Working Group's nifti1.h and nifti2.h): either byte order,
 * world coordinates from the sform (preferred), else the qform, else the
 * voxel sizes; scl_slope/scl_inter applied. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

typedef struct nifti_header {
    int version, swap; /* 1 or 2; the file's byte order differs from the host's */
    int64_t dim[8];
    int datatype, bitpix;
    double pixdim[8], vox_offset, slope, inter;
    int qform_code, sform_code;
    double quatern[3], qoffset[3], srow[3][4];
} nifti_header;

static uint64_t get(const unsigned char *h, size_t off, size_t n, int swap)
{
    unsigned char b[8];
    memcpy(b, h + off, n);
    if (swap) pmi_swap_bytes(b, 1, n);
    uint64_t v = 0;
    if (n == 2) {
        uint16_t x;
        memcpy(&x, b, 2);
        v = x;
    } else if (n == 4) {
        uint32_t x;
        memcpy(&x, b, 4);
        v = x;
    } else {
        memcpy(&v, b, 8);
    }
    return v;
}

static int64_t get_i16(const unsigned char *h, size_t off, int swap)
{
    return (int16_t)(uint16_t)get(h, off, 2, swap);
}
static int64_t get_i32(const unsigned char *h, size_t off, int swap)
{
    return (int32_t)(uint32_t)get(h, off, 4, swap);
}
static double get_f32(const unsigned char *h, size_t off, int swap)
{
    uint32_t u = (uint32_t)get(h, off, 4, swap);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double get_f64(const unsigned char *h, size_t off, int swap)
{
    uint64_t u = get(h, off, 8, swap);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

/* Field offsets of NIfTI-1 (348-byte header). */
static void parse_v1(const unsigned char *h, nifti_header *n)
{
    int s = n->swap;
    for (int i = 0; i < 8; i++) {
        n->dim[i] = get_i16(h, 40 + 2 * (size_t)i, s);
        n->pixdim[i] = get_f32(h, 76 + 4 * (size_t)i, s);
    }
    n->datatype = (int)get_i16(h, 70, s);
    n->bitpix = (int)get_i16(h, 72, s);
    n->vox_offset = get_f32(h, 108, s);
    n->slope = get_f32(h, 112, s);
    n->inter = get_f32(h, 116, s);
    n->qform_code = (int)get_i16(h, 252, s);
    n->sform_code = (int)get_i16(h, 254, s);
    for (int i = 0; i < 3; i++) {
        n->quatern[i] = get_f32(h, 256 + 4 * (size_t)i, s);
        n->qoffset[i] = get_f32(h, 268 + 4 * (size_t)i, s);
        for (int j = 0; j < 4; j++)
            n->srow[i][j] = get_f32(h, 280 + 16 * (size_t)i + 4 * (size_t)j, s);
    }
}

/* Field offsets of NIfTI-2 (540-byte header). */
static void parse_v2(const unsigned char *h, nifti_header *n)
{
    int s = n->swap;
    n->datatype = (int)get_i16(h, 12, s);
    n->bitpix = (int)get_i16(h, 14, s);
    for (int i = 0; i < 8; i++) {
        n->dim[i] = (int64_t)get(h, 16 + 8 * (size_t)i, 8, s);
        n->pixdim[i] = get_f64(h, 104 + 8 * (size_t)i, s);
    }
    n->vox_offset = (double)(int64_t)get(h, 168, 8, s);
    n->slope = get_f64(h, 176, s);
    n->inter = get_f64(h, 184, s);
    n->qform_code = (int)get_i32(h, 344, s);
    n->sform_code = (int)get_i32(h, 348, s);
    for (int i = 0; i < 3; i++) {
        n->quatern[i] = get_f64(h, 352 + 8 * (size_t)i, s);
        n->qoffset[i] = get_f64(h, 376 + 8 * (size_t)i, s);
        for (int j = 0; j < 4; j++)
            n->srow[i][j] = get_f64(h, 400 + 32 * (size_t)i + 8 * (size_t)j, s);
    }
}

static pm_status read_header(pmi_source *src, nifti_header *n, unsigned char *h)
{
    const char *path = src->r.path;
    pm_status s = pmi_source_read(src, h, 348, "the NIfTI header (348 bytes at least)");
    if (s != PM_STATUS_OK) return s;
    int64_t size = get_i32(h, 0, 0);
    n->swap = 0;
    if (size != 348 && size != 540) {
        n->swap = 1;
        size = get_i32(h, 0, 1);
    }
    if (size != 348 && size != 540)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: byte 0: sizeof_hdr is %lld (or %lld byte-swapped), expected 348 "
                         "(NIfTI-1) or 540 (NIfTI-2)",
                         path, (long long)get_i32(h, 0, 0), (long long)size);
    if (size == 348) {
        n->version = 1;
        if (memcmp(h + 344, "ni1", 4) == 0)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: byte 344: magic 'ni1': a two-file NIfTI (.hdr + .img) header; "
                             "expected a single-file .nii ('n+1')",
                             path);
        if (memcmp(h + 344, "n+1", 4) != 0)
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte 344: expected the magic 'n+1'", path);
        parse_v1(h, n);
    } else {
        n->version = 2;
        if ((s = pmi_source_read(src, h + 348, 540 - 348, "the NIfTI-2 header")) != PM_STATUS_OK)
            return s;
        if (memcmp(h + 4, "ni2", 4) == 0)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: byte 4: magic 'ni2': a two-file NIfTI-2 header; expected a "
                             "single-file .nii ('n+2')",
                             path);
        if (memcmp(h + 4, "n+2\0\r\n\032\n", 8) != 0)
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte 4: expected the magic 'n+2'", path);
        parse_v2(h, n);
    }
    return PM_STATUS_OK;
}

static pm_status sample_kind(const char *path, const nifti_header *n, pmi_kind *kind)
{
    static const struct {
        int code;
        pmi_kind kind;
    } kinds[] = {{2, PMI_U8},   {4, PMI_I16},  {8, PMI_I32},   {16, PMI_F32},
                 {64, PMI_F64}, {256, PMI_I8}, {512, PMI_U16}, {768, PMI_U32}};
    size_t off = n->version == 1 ? 70 : 12;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].code == n->datatype) {
            *kind = kinds[i].kind;
            if ((size_t)n->bitpix != 8 * pmi_kind_size(*kind))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: byte %zu: bitpix %d does not match datatype %d (%s), "
                                 "expected %zu",
                                 path, off + 2, n->bitpix, n->datatype, pmi_kind_string(*kind),
                                 8 * pmi_kind_size(*kind));
            return PM_STATUS_OK;
        }
    return pmi_error(PM_STATUS_UNSUPPORTED,
                     "%s: byte %zu: datatype %d is not supported (complex, RGB, 64-bit integer "
                     "or 128-bit), expected uint8 (2), int8 (256), uint16 (512), int16 (4), "
                     "uint32 (768), int32 (8), float32 (16) or float64 (64)",
                     path, off, n->datatype);
}

/* The index-to-world axes and origin: sform, else qform, else pixdim. */
static pm_status world_axes(const char *path, const nifti_header *n, double axes[3][3],
                            double origin[3], const char **what)
{
    memset(axes, 0, 9 * sizeof(double));
    if (n->sform_code > 0) {
        *what = "sform";
        for (int a = 0; a < 3; a++) {
            for (int r = 0; r < 3; r++)
                axes[a][r] = n->srow[r][a];
            origin[a] = n->srow[a][3];
        }
        return PM_STATUS_OK;
    }
    if (n->qform_code > 0) {
        *what = "qform";
        double b = n->quatern[0], c = n->quatern[1], d = n->quatern[2];
        double a2 = 1.0 - (b * b + c * c + d * d);
        /* nifti1_io clamps a slightly negative a^2 from float rounding. */
        double a = a2 > 0 ? sqrt(a2) : 0;
        double R[3][3] = {
            {a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)},
            {2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)},
            {2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b}};
        double qfac = n->pixdim[0] < 0 ? -1.0 : 1.0;
        for (int k = 0; k < 3; k++) {
            double step = n->pixdim[k + 1];
            if (!(step > 0) || !isfinite(step))
                return pmi_error(PM_STATUS_PARSE_ERROR,
                                 "%s: pixdim[%d] = %g, expected a positive voxel size", path, k + 1,
                                 step);
            if (k == 2) step *= qfac;
            for (int r = 0; r < 3; r++)
                axes[k][r] = R[r][k] * step;
            origin[k] = n->qoffset[k];
        }
        return PM_STATUS_OK;
    }
    /* Method 1 of nifti1.h: voxel sizes only, the origin at 0. */
    *what = "pixdim";
    for (int k = 0; k < 3; k++) {
        double step = fabs(n->pixdim[k + 1]);
        axes[k][k] = step > 0 && isfinite(step) ? step : 1.0;
        origin[k] = 0;
    }
    return PM_STATUS_OK;
}

static pm_status check_dims(const char *path, const nifti_header *n, size_t dims[3])
{
    size_t off = n->version == 1 ? 40 : 16;
    if (n->dim[0] < 1 || n->dim[0] > 7)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: byte %zu: dim[0] = %lld, expected 1 to 7",
                         path, off, (long long)n->dim[0]);
    for (int i = 1; i <= 3; i++) {
        int64_t d = i <= n->dim[0] ? n->dim[i] : 1;
        if (d < 1 || (uint64_t)d > SIZE_MAX)
            return pmi_error(PM_STATUS_PARSE_ERROR, "%s: dim[%d] = %lld, expected a positive size",
                             path, i, (long long)d);
        dims[i - 1] = (size_t)d;
    }
    for (int i = 4; i <= n->dim[0]; i++)
        if (n->dim[i] != 1)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: dim[%d] = %lld: a %lld-dimensional image (time series or "
                             "vectors); expected one 3-D volume (extract it first, e.g. "
                             "fslroi)",
                             path, i, (long long)n->dim[i], (long long)n->dim[0]);
    return PM_STATUS_OK;
}

pm_status pmi_nifti_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    pmi_source src;
    nifti_header n;
    unsigned char h[540];
    void *data = NULL;
    size_t dims[3], bytes = 0;
    pmi_kind kind = PMI_U8;
    memset(&n, 0, sizeof n);
    pm_status s = pmi_source_open(&src, path);
    if (s != PM_STATUS_OK) return s;
    if ((s = read_header(&src, &n, h)) != PM_STATUS_OK) goto done;
    if ((s = check_dims(path, &n, dims)) != PM_STATUS_OK) goto done;
    if ((s = sample_kind(path, &n, &kind)) != PM_STATUS_OK) goto done;
    double hsize = n.version == 1 ? 348 : 540;
    if (!(n.vox_offset >= hsize) || n.vox_offset > 1e15 || n.vox_offset != floor(n.vox_offset)) {
        s = pmi_error(PM_STATUS_PARSE_ERROR,
                      "%s: byte %d: vox_offset %g, expected a whole number of at least %g", path,
                      n.version == 1 ? 108 : 168, n.vox_offset, hsize);
        goto done;
    }
    if ((s = pmi_source_skip(&src, (uint64_t)(n.vox_offset - hsize), "the header extensions")) !=
        PM_STATUS_OK)
        goto done;
    /* scl_slope 0 means "no scaling" (nifti1.h). */
    int scaled =
        n.slope != 0 && isfinite(n.slope) && isfinite(n.inter) && (n.slope != 1 || n.inter != 0);
    s = pmi_volume_alloc_kind(path, "dim", dims[0], dims[1], dims[2], kind, scaled,
                              max_memory_bytes, pmi_source_bound(&src), &data, &bytes);
    if (s == PM_STATUS_OK) s = pmi_source_read(&src, data, bytes, "the voxel data");
    if (s == PM_STATUS_OK) s = pmi_source_finish(&src);
    if (s != PM_STATUS_OK) goto done;
    size_t count = bytes / pmi_kind_size(kind);
    if (n.swap) pmi_swap_bytes(data, count, pmi_kind_size(kind));
    pm_sample_type type;
    if ((s = pmi_samples_convert(path, &data, count, kind, scaled, n.slope, n.inter, &type)) !=
        PM_STATUS_OK)
        goto done;
    double axes[3][3], origin[3];
    const char *what;
    if ((s = world_axes(path, &n, axes, origin, &what)) != PM_STATUS_OK) goto done;
    pm_volume v = {data, type, dims[0], dims[1], dims[2], 0, 0, {1, 1, 1}, {0, 0, 0}};
    data = NULL;
    if ((s = pmi_volume_orient(path, what, axes, origin, &v)) != PM_STATUS_OK) {
        free((void *)v.data);
        goto done;
    }
    *out = v;
done:
    free(data);
    pmi_source_close(&src);
    return s;
}
