/* Sample conversion and reorientation shared by the medical-image readers
 * (NIfTI, MetaImage, INRIA, DICOM): file sample kinds mapped to the
 * project's sample types (with a linear rescale where the file asks for
 * one), and index axes that are permutations or flips of the world axes
 * turned into pm_volume's axis-aligned, positive-spacing grid. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

size_t pmi_kind_size(pmi_kind k)
{
    static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 8};
    return (unsigned)k < sizeof size / sizeof size[0] ? size[k] : 0;
}

const char *pmi_kind_string(pmi_kind k)
{
    static const char *name[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "f64"};
    return (unsigned)k < sizeof name / sizeof name[0] ? name[k] : "?";
}

pm_sample_type pmi_kind_target(pmi_kind k, int scaled)
{
    if (k == PMI_F64) return PM_SAMPLE_F64;
    if (scaled) return PM_SAMPLE_F32;
    switch (k) {
    case PMI_U8: return PM_SAMPLE_U8;
    case PMI_U16: return PM_SAMPLE_U16;
    case PMI_I16: return PM_SAMPLE_I16;
    default: return PM_SAMPLE_F32; /* i8, u32, i32 and f32 */
    }
}

pm_status pmi_volume_alloc_kind(const char *path, const char *where, size_t nx, size_t ny,
                                size_t nz, pmi_kind kind, int scaled, size_t max_memory_bytes,
                                uint64_t available, void **data, size_t *bytes)
{
    *data = NULL;
    if (nx < 2 || ny < 2 || nz < 2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: dims %zu x %zu x %zu, each must be at least 2 "
                         "(marching cubes needs one cell)",
                         path, where, nx, ny, nz);
    size_t n, b, tb;
    pm_sample_type t = pmi_kind_target(kind, scaled);
    if (!pmi_mul3_size(nx, ny, nz, &n) || !pmi_mul_size(n, pmi_kind_size(kind), &b) ||
        !pmi_mul_size(n, pm_sample_size(t), &tb))
        return pmi_error(PM_STATUS_OVERFLOW, "%s: %s: %zu x %zu x %zu %s samples overflow size_t",
                         path, where, nx, ny, nz, pmi_kind_string(kind));
    if (available != UINT64_MAX && (uint64_t)b > available)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %s: %zu x %zu x %zu %s samples need %zu bytes, but only %llu "
                         "bytes of data can be in the file",
                         path, where, nx, ny, nz, pmi_kind_string(kind), b,
                         (unsigned long long)available);
    /* A converted volume lives beside its source for a moment. */
    int converted = scaled || kind == PMI_I8 || kind == PMI_U32 || kind == PMI_I32;
    size_t peak = converted ? b + tb : b;
    if (converted && peak < b) peak = SIZE_MAX;
    if (max_memory_bytes && peak > max_memory_bytes)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: %s: the volume needs %zu bytes, more than the limit of %zu bytes",
                         path, where, peak, max_memory_bytes);
    *data = malloc(b ? b : 1);
    if (!*data)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes for the volume",
                         path, b);
    *bytes = b;
    return PM_STATUS_OK;
}

static double kind_value(const void *p, pmi_kind k, size_t i)
{
    switch (k) {
    case PMI_U8: return ((const uint8_t *)p)[i];
    case PMI_I8: return ((const int8_t *)p)[i];
    case PMI_U16: return ((const uint16_t *)p)[i];
    case PMI_I16: return ((const int16_t *)p)[i];
    case PMI_U32: return ((const uint32_t *)p)[i];
    case PMI_I32: return ((const int32_t *)p)[i];
    case PMI_F32: return ((const float *)p)[i];
    case PMI_F64: return ((const double *)p)[i];
    }
    return 0;
}

pm_status pmi_samples_convert(const char *path, void **data, size_t n, pmi_kind kind, int scaled,
                              double slope, double inter, pm_sample_type *type)
{
    pm_sample_type t = pmi_kind_target(kind, scaled);
    *type = t;
    int same = (kind == PMI_U8 && t == PM_SAMPLE_U8) || (kind == PMI_U16 && t == PM_SAMPLE_U16) ||
               (kind == PMI_I16 && t == PM_SAMPLE_I16) || (kind == PMI_F32 && t == PM_SAMPLE_F32) ||
               (kind == PMI_F64 && t == PM_SAMPLE_F64);
    if (same && !scaled) return PM_STATUS_OK;
    void *out = malloc(n * pm_sample_size(t) + 1);
    if (!out)
        return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                         "%s: cannot allocate %zu bytes for the converted samples", path,
                         n * pm_sample_size(t));
    const void *src = *data;
    if (!scaled) {
        slope = 1;
        inter = 0;
    }
    /* The rescale is computed in double and rounded once to the target. */
    if (t == PM_SAMPLE_F64) {
        double *o = out;
        for (size_t i = 0; i < n; i++)
            o[i] = kind_value(src, kind, i) * slope + inter;
    } else {
        float *o = out;
        for (size_t i = 0; i < n; i++)
            o[i] = (float)(kind_value(src, kind, i) * slope + inter);
    }
    free(*data);
    *data = out;
    return PM_STATUS_OK;
}

/* Reorders n0 x n1 x n2 samples of esize bytes: output axis w walks source
 * axis perm[w], backwards when flip[w]. */
static void reorder(const unsigned char *src, unsigned char *dst, const size_t n[3],
                    const int perm[3], const int flip[3], size_t esize)
{
    size_t sstride[3] = {1, n[0], n[0] * n[1]};
    size_t on[3];
    ptrdiff_t step[3];
    size_t start = 0;
    for (int w = 0; w < 3; w++) {
        int a = perm[w];
        on[w] = n[a];
        step[w] = flip[w] ? -(ptrdiff_t)sstride[a] : (ptrdiff_t)sstride[a];
        if (flip[w]) start += (n[a] - 1) * sstride[a];
    }
    size_t o = 0;
    for (size_t z = 0; z < on[2]; z++)
        for (size_t y = 0; y < on[1]; y++) {
            ptrdiff_t s = (ptrdiff_t)start + (ptrdiff_t)z * step[2] + (ptrdiff_t)y * step[1];
            for (size_t x = 0; x < on[0]; x++, o++, s += step[0])
                memcpy(dst + o * esize, src + (size_t)s * esize, esize);
        }
}

pm_status pmi_volume_orient(const char *path, const char *what, const double axes[3][3],
                            const double origin[3], pm_volume *v)
{
    int perm[3] = {-1, -1, -1}, flip[3] = {0, 0, 0}, used[3] = {0, 0, 0};
    double spacing[3];
    for (int a = 0; a < 3; a++) {
        const double *d = axes[a];
        double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        int big = 0;
        for (int c = 1; c < 3; c++)
            if (fabs(d[c]) > fabs(d[big])) big = c;
        /* Within 1e-4 of an axis: rounding in the file, not a rotation. */
        int aligned = len > 0 && isfinite(len) && !used[big];
        for (int c = 0; c < 3; c++)
            if (c != big && !(fabs(d[c]) <= 1e-4 * len)) aligned = 0;
        if (!aligned)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: %s: the index axes [%g %g %g] [%g %g %g] [%g %g %g] are "
                             "oblique (not a permutation or flip of the world axes); resample "
                             "to an axis-aligned grid first",
                             path, what, axes[0][0], axes[0][1], axes[0][2], axes[1][0], axes[1][1],
                             axes[1][2], axes[2][0], axes[2][1], axes[2][2]);
        used[big] = 1;
        perm[big] = a;
        flip[big] = d[big] < 0;
        spacing[big] = len;
    }
    size_t n[3] = {v->nx, v->ny, v->nz};
    double o[3];
    for (int w = 0; w < 3; w++) {
        int a = perm[w];
        /* The first output sample is the source's last along a flipped axis. */
        o[w] = origin[w];
        if (flip[w])
            for (int c = 0; c < 3; c++)
                if (c == w) o[w] += (double)(n[a] - 1) * axes[a][c];
    }
    if (perm[0] != 0 || perm[1] != 1 || perm[2] != 2 || flip[0] || flip[1] || flip[2]) {
        size_t esize = pm_sample_size(v->type), bytes = n[0] * n[1] * n[2] * esize;
        unsigned char *dst = malloc(bytes ? bytes : 1);
        if (!dst)
            return pmi_error(PM_STATUS_OUT_OF_MEMORY,
                             "%s: cannot allocate %zu bytes to reorder the axes", path, bytes);
        reorder(v->data, dst, n, perm, flip, esize);
        free((void *)v->data);
        v->data = dst;
        v->nx = n[perm[0]];
        v->ny = n[perm[1]];
        v->nz = n[perm[2]];
    }
    v->row_stride = v->nx;
    v->slice_stride = v->nx * v->ny;
    for (int w = 0; w < 3; w++) {
        v->spacing[w] = spacing[w];
        v->origin[w] = o[w];
    }
    return PM_STATUS_OK;
}
