/* Debug images of seeds 000 and 003 (libpng): the active-cell map of the
 * middle z slice coloured by marching cubes triangles per cell (Lorensen and
 * Cline 1987 tables), and the levels of a 2D 2x2 HistoPyramid (Ziegler et
 * al. 2006) built over that slice's counts. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/mc_tables.h"
#include "core/util.h"

/* Slices larger than this (8192^2 cells) would give images of gigabytes. */
#define PMI_DEBUG_MAX_SIDE 8192u
/* Small images are scaled up (nearest neighbour) to at least this size. */
#define PMI_DEBUG_MIN_PIXELS 256u

static double sample(const pm_volume *v, size_t i, size_t j, size_t k, size_t row, size_t slice)
{
    size_t at = i + j * row + k * slice;
    switch (v->type) {
    case PM_SAMPLE_U8: return ((const uint8_t *)v->data)[at];
    case PM_SAMPLE_U16: return ((const uint16_t *)v->data)[at];
    case PM_SAMPLE_I16: return ((const int16_t *)v->data)[at];
    case PM_SAMPLE_F32: return ((const float *)v->data)[at];
    case PM_SAMPLE_F64: return ((const double *)v->data)[at];
    }
    return 0;
}

#ifdef PM_HAVE_PNG
typedef struct png_job {
    const char *path;
    jmp_buf jmp;
    char msg[200];
} png_job;

static void on_png_error(png_structp png, png_const_charp msg)
{
    png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jmp, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* the library never prints */
}

/* Writes a w x h image given as RGB per source pixel (src_w x src_h, row 0
 * at the top), each source pixel repeated `scale` times in x and y. */
static pm_status write_png(const char *path, const uint8_t *rgb, size_t src_w, size_t src_h,
                           size_t scale)
{
    size_t w = src_w * scale, h = src_h * scale;
    FILE *f = fopen(path, "wb");
    if (!f) return pmi_error(PM_STATUS_IO_ERROR, "%s: cannot create: %s", path, strerror(errno));
    /* volatile: these are read after a longjmp from libpng. */
    png_job job;
    job.path = path;
    job.msg[0] = '\0';
    uint8_t *volatile line = malloc(3 * w);
    png_structp volatile png =
        line ? png_create_write_struct(PNG_LIBPNG_VER_STRING, &job, on_png_error, on_png_warning)
             : NULL;
    png_infop volatile info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        if (png) png_destroy_write_struct((png_structpp)&png, NULL);
        free(line);
        fclose(f);
        remove(path);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot set up the PNG writer", path);
    }
    if (setjmp(job.jmp)) {
        png_destroy_write_struct((png_structpp)&png, (png_infopp)&info);
        free(line);
        fclose(f);
        remove(path);
        return pmi_error(PM_STATUS_IO_ERROR, "%s: writing the PNG failed: %s", path, job.msg);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (size_t y = 0; y < src_h; y++) {
        for (size_t x = 0; x < src_w; x++)
            for (size_t r = 0; r < scale; r++)
                memcpy(line + 3 * (x * scale + r), rgb + 3 * (y * src_w + x), 3);
        for (size_t r = 0; r < scale; r++)
            png_write_row(png, line);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct((png_structpp)&png, (png_infopp)&info);
    free(line);
    if (fclose(f) != 0)
        return pmi_error(PM_STATUS_IO_ERROR, "%s: write failed: %s", path, strerror(errno));
    return PM_STATUS_OK;
}
#else
/* A build without libpng: the images cannot be written. */
static pm_status write_png(const char *path, const uint8_t *rgb, size_t src_w, size_t src_h,
                           size_t scale)
{
    (void)rgb;
    (void)src_w;
    (void)src_h;
    (void)scale;
    return pmi_error(PM_STATUS_UNSUPPORTED,
                     "%s: this build of pyramesh has no libpng (debug images unavailable)", path);
}
#endif

static size_t upscale(size_t w, size_t h)
{
    size_t m = w > h ? w : h;
    return m >= PMI_DEBUG_MIN_PIXELS ? 1 : (PMI_DEBUG_MIN_PIXELS + m - 1) / m;
}

pm_status pm_debug_images(const pm_volume *volume, double iso, pm_inside inside, const char *dir)
{
    pmi_clear_error();
    if (!volume || !dir || !volume->data)
        return pmi_error(PM_STATUS_INVALID_ARGUMENT, "pm_debug_images: NULL argument");
    if (volume->nx < 2 || volume->ny < 2 || volume->nz < 2 || !pm_sample_size(volume->type))
        return pmi_error(PM_STATUS_INVALID_ARGUMENT,
                         "pm_debug_images: volume %zu x %zu x %zu of type %d: each dim must be "
                         "at least 2 and the type valid",
                         volume->nx, volume->ny, volume->nz, (int)volume->type);
    const size_t w = volume->nx - 1, h = volume->ny - 1, k = (volume->nz - 2) / 2;
    if (w > PMI_DEBUG_MAX_SIDE || h > PMI_DEBUG_MAX_SIDE)
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "pm_debug_images: a slice of %zu x %zu cells exceeds the %u x %u the "
                         "debug images support",
                         w, h, PMI_DEBUG_MAX_SIDE, PMI_DEBUG_MAX_SIDE);
    if (mkdir(dir, 0777) != 0) {
        struct stat st;
        if (errno != EEXIST || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return pmi_error(PM_STATUS_IO_ERROR, "%s: cannot create the directory: %s", dir,
                             errno == EEXIST ? "exists and is not a directory" : strerror(errno));
    }
    const size_t row = volume->row_stride ? volume->row_stride : volume->nx;
    const size_t slice = volume->slice_stride ? volume->slice_stride : row * volume->ny;
    /* The base of the pyramid: a square power of two, padded with zeros. */
    size_t side = 1, levels = 1;
    while (side < w || side < h) {
        side *= 2;
        levels++;
    }
    uint32_t *level = calloc(side * side, sizeof *level);
    uint8_t *rgb = malloc(3 * side * side);
    if (!level || !rgb) {
        free(level);
        free(rgb);
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_debug_images: cannot allocate");
    }
    /* Triangles per cell (the case rule of pm_isosurface: a corner is
     * inside when above iso, or below it with PM_INSIDE_BELOW; NaN never). */
    const double sg = inside == PM_INSIDE_BELOW ? 1.0 : -1.0;
    for (size_t j = 0; j < h; j++)
        for (size_t i = 0; i < w; i++) {
            unsigned c = 0;
            for (int q = 0; q < 8; q++) {
                double x = sample(volume, i + pmi_mc_corner[q][0], j + pmi_mc_corner[q][1],
                                  k + pmi_mc_corner[q][2], row, slice);
                if (sg * x < sg * iso) c |= 1u << q;
            }
            level[j * side + i] = pmi_mc_tri_count[c];
        }
    static const uint8_t colour[6][3] = {{0, 0, 0},   {0, 0, 255},   {0, 255, 0},
                                         {255, 0, 0}, {0, 255, 255}, {255, 0, 255}};
    /* Row 0 of an image is the top: the highest j (y up). */
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++)
            memcpy(rgb + 3 * (y * w + x), colour[level[(h - 1 - y) * side + x]], 3);
    char *path = malloc(strlen(dir) + 40);
    pm_status s = path ? PM_STATUS_OK
                       : pmi_error(PM_STATUS_OUT_OF_MEMORY, "pm_debug_images: cannot allocate");
    if (s == PM_STATUS_OK) {
        sprintf(path, "%s/active_cells.png", dir);
        s = write_png(path, rgb, w, h, upscale(w, h));
    }
    /* Level L is side >> L square; each texel the sum of its 2x2 children
     * (seed 000's reduction), computed in place from level L-1. */
    for (size_t L = 0, n = side; L < levels && s == PM_STATUS_OK; L++, n /= 2) {
        if (L > 0)
            for (size_t y = 0; y < n; y++)
                for (size_t x = 0; x < n; x++) {
                    const uint32_t *c = level + (2 * y) * (2 * n) + 2 * x;
                    uint32_t sum = c[0] + c[1] + c[2 * n] + c[2 * n + 1];
                    level[y * n + x] = sum; /* rows y < current are already consumed */
                }
        uint32_t mx = 0;
        for (size_t q = 0; q < n * n; q++)
            if (level[q] > mx) mx = level[q];
        for (size_t y = 0; y < n; y++)
            for (size_t x = 0; x < n; x++) {
                uint32_t v = level[(n - 1 - y) * n + x];
                uint8_t g = mx ? (uint8_t)((255.0 * v) / mx + 0.5) : 0;
                memset(rgb + 3 * (y * n + x), g, 3);
            }
        sprintf(path, "%s/hp_level_%zu.png", dir, L);
        s = write_png(path, rgb, n, n, upscale(n, n));
    }
    free(path);
    free(level);
    free(rgb);
    return s;
}
