/* A small DICOM Part 10 writer for the tests, the fuzz target and its seed
 * corpus: one CT image slice per file, explicit VR little endian
 * (1.2.840.10008.1.2.1). The file is the 128-byte preamble, "DICM", the
 * group 0002 file meta information, then the image's elements in
 * ascending tag order, each as tag (group, element: u16 LE each), the two
 * VR letters, then a u16 length (or, for OB/OW/SQ/UN/UT, two reserved zero
 * bytes and a u32 length), then the value padded to an even length (text
 * with a space, UIDs with a NUL). Self-contained: C11 and libc only. */
#ifndef PM_DICOM_WRITER_H
#define PM_DICOM_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DCMW_CT_IMAGE_STORAGE "1.2.840.10008.5.1.4.1.1.2"
#define DCMW_EXPLICIT_VR_LE "1.2.840.10008.1.2.1"

/* One slice. The pixels are rows*cols samples, row by row (a row runs
 * along iop[0..2], successive rows along iop[3..5]), of bits_allocated
 * (8 or 16) bits, host order (little endian on every machine we run).
 * pixel_spacing is DICOM's order: [0] between rows (along the column
 * direction), [1] between columns (along the row direction). */
typedef struct dcmw_slice {
    unsigned rows, cols;
    unsigned bits_allocated, bits_stored; /* bits_stored 0 = bits_allocated */
    unsigned pixel_representation;        /* 0 unsigned, 1 two's complement */
    unsigned samples_per_pixel;           /* 0 = 1 */
    unsigned frames;                      /* > 1 writes NumberOfFrames */
    double ipp[3];                        /* ImagePositionPatient */
    double iop[6];                        /* ImageOrientationPatient */
    double pixel_spacing[2];
    int rescale; /* write RescaleIntercept/Slope */
    double slope, intercept;
    const char *series_uid; /* NULL = "1.2.826.0.1.3680043.2.1125.1" */
    const char *ipp_text;   /* overrides ipp (hostile values) */
    const char *slope_text; /* overrides slope */
    unsigned instance;      /* InstanceNumber and SOP instance UID suffix */
    const void *pixels;     /* NULL = zeros */
    size_t pixel_bytes;     /* 0 = rows*cols*spp*frames*bits_allocated/8 */
} dcmw_slice;

/* The slice as it would be for an axial CT: rows x cols, orientation
 * 1\0\0\0\1\0, unit spacing, 16-bit unsigned, at z. */
static inline dcmw_slice dcmw_axial(unsigned rows, unsigned cols, double z, const void *pixels)
{
    dcmw_slice s;
    memset(&s, 0, sizeof s);
    s.rows = rows;
    s.cols = cols;
    s.bits_allocated = 16;
    s.ipp[2] = z;
    s.iop[0] = 1;
    s.iop[4] = 1;
    s.pixel_spacing[0] = s.pixel_spacing[1] = 1;
    s.pixels = pixels;
    return s;
}

typedef struct dcmw_buf {
    unsigned char *p;
    size_t n, cap;
} dcmw_buf;

static inline void dcmw_put(dcmw_buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = (unsigned char *)realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void dcmw_u16(dcmw_buf *b, unsigned v)
{
    unsigned char c[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    dcmw_put(b, c, 2);
}

static inline void dcmw_u32(dcmw_buf *b, uint32_t v)
{
    unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    dcmw_put(b, c, 4);
}

/* One element; a NULL value of n bytes writes zeros. */
static inline void dcmw_elem(dcmw_buf *b, unsigned group, unsigned elem, const char vr[2],
                             const void *value, size_t n)
{
    static const unsigned char zero[64];
    int long_form = !memcmp(vr, "OB", 2) || !memcmp(vr, "OW", 2) || !memcmp(vr, "SQ", 2) ||
                    !memcmp(vr, "UN", 2) || !memcmp(vr, "UT", 2);
    size_t padded = n + (n & 1);
    dcmw_u16(b, group);
    dcmw_u16(b, elem);
    dcmw_put(b, vr, 2);
    if (long_form) {
        dcmw_u16(b, 0);
        dcmw_u32(b, (uint32_t)padded);
    } else {
        dcmw_u16(b, (unsigned)padded);
    }
    if (value) {
        dcmw_put(b, value, n);
    } else {
        for (size_t k = 0; k < n; k += sizeof zero)
            dcmw_put(b, zero, n - k < sizeof zero ? n - k : sizeof zero);
    }
    if (n & 1) dcmw_put(b, memcmp(vr, "UI", 2) && memcmp(vr, "OB", 2) ? " " : "", 1);
}

static inline void dcmw_text(dcmw_buf *b, unsigned group, unsigned elem, const char vr[2],
                             const char *s)
{
    dcmw_elem(b, group, elem, vr, s, strlen(s));
}

static inline void dcmw_us(dcmw_buf *b, unsigned group, unsigned elem, unsigned v)
{
    unsigned char c[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    dcmw_elem(b, group, elem, "US", c, 2);
}

/* Decimal strings (DS): at most 16 characters a value; %.10g keeps every
 * value the tests use exact (they have few significant digits). */
static inline void dcmw_ds(dcmw_buf *b, unsigned group, unsigned elem, const double *v, int n)
{
    char s[256];
    size_t k = 0;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(s + k, sizeof s - k, "%s%.10g", i ? "\\" : "", v[i]);
    dcmw_text(b, group, elem, "DS", s);
}

/* The whole file in memory (caller frees *out). */
static inline unsigned char *dcmw_encode(const dcmw_slice *s, size_t *out_n)
{
    const char *series = s->series_uid ? s->series_uid : "1.2.826.0.1.3680043.2.1125.1";
    char sop[80], num[16];
    snprintf(sop, sizeof sop, "%s.%u", series, s->instance + 1);
    snprintf(num, sizeof num, "%u", s->instance + 1);
    dcmw_buf meta = {0}, b = {0};
    static const unsigned char version[2] = {0, 1};
    dcmw_elem(&meta, 0x0002, 0x0001, "OB", version, 2);
    dcmw_text(&meta, 0x0002, 0x0002, "UI", DCMW_CT_IMAGE_STORAGE);
    dcmw_text(&meta, 0x0002, 0x0003, "UI", sop);
    dcmw_text(&meta, 0x0002, 0x0010, "UI", DCMW_EXPLICIT_VR_LE);
    dcmw_text(&meta, 0x0002, 0x0012, "UI", "1.2.826.0.1.3680043.2.1125.99");
    unsigned char pre[128] = {0};
    dcmw_put(&b, pre, sizeof pre);
    dcmw_put(&b, "DICM", 4);
    unsigned char gl[4] = {(unsigned char)meta.n, (unsigned char)(meta.n >> 8),
                           (unsigned char)(meta.n >> 16), (unsigned char)(meta.n >> 24)};
    dcmw_elem(&b, 0x0002, 0x0000, "UL", gl, 4);
    dcmw_put(&b, meta.p, meta.n);
    free(meta.p);

    unsigned spp = s->samples_per_pixel ? s->samples_per_pixel : 1;
    unsigned stored = s->bits_stored ? s->bits_stored : s->bits_allocated;
    dcmw_text(&b, 0x0008, 0x0016, "UI", DCMW_CT_IMAGE_STORAGE);
    dcmw_text(&b, 0x0008, 0x0018, "UI", sop);
    dcmw_text(&b, 0x0008, 0x0060, "CS", "CT");
    dcmw_text(&b, 0x0010, 0x0010, "PN", "Phantom^Sphere");
    dcmw_text(&b, 0x0020, 0x000d, "UI", "1.2.826.0.1.3680043.2.1125.2");
    dcmw_text(&b, 0x0020, 0x000e, "UI", series);
    dcmw_text(&b, 0x0020, 0x0013, "IS", num);
    if (s->ipp_text)
        dcmw_text(&b, 0x0020, 0x0032, "DS", s->ipp_text);
    else
        dcmw_ds(&b, 0x0020, 0x0032, s->ipp, 3);
    dcmw_ds(&b, 0x0020, 0x0037, s->iop, 6);
    dcmw_us(&b, 0x0028, 0x0002, spp);
    dcmw_text(&b, 0x0028, 0x0004, "CS", spp == 3 ? "RGB" : "MONOCHROME2");
    if (spp > 1) dcmw_us(&b, 0x0028, 0x0006, 0); /* PlanarConfiguration */
    if (s->frames > 1) {
        snprintf(num, sizeof num, "%u", s->frames);
        dcmw_text(&b, 0x0028, 0x0008, "IS", num);
    }
    dcmw_us(&b, 0x0028, 0x0010, s->rows);
    dcmw_us(&b, 0x0028, 0x0011, s->cols);
    dcmw_ds(&b, 0x0028, 0x0030, s->pixel_spacing, 2);
    dcmw_us(&b, 0x0028, 0x0100, s->bits_allocated);
    dcmw_us(&b, 0x0028, 0x0101, stored);
    dcmw_us(&b, 0x0028, 0x0102, stored - 1);
    dcmw_us(&b, 0x0028, 0x0103, s->pixel_representation);
    if (s->rescale) {
        dcmw_ds(&b, 0x0028, 0x1052, &s->intercept, 1);
        if (s->slope_text)
            dcmw_text(&b, 0x0028, 0x1053, "DS", s->slope_text);
        else
            dcmw_ds(&b, 0x0028, 0x1053, &s->slope, 1);
        dcmw_text(&b, 0x0028, 0x1054, "LO", "HU");
    }
    size_t frames = s->frames > 1 ? s->frames : 1;
    size_t n = s->pixel_bytes ? s->pixel_bytes
                              : (size_t)s->rows * s->cols * spp * frames * s->bits_allocated / 8;
    dcmw_elem(&b, 0x7fe0, 0x0010, s->bits_allocated > 8 ? "OW" : "OB", s->pixels, n);
    *out_n = b.n;
    return b.p;
}

/* Writes the slice to path; 0 on success. */
static inline int dcmw_write(const char *path, const dcmw_slice *s)
{
    size_t n;
    unsigned char *d = dcmw_encode(s, &n);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(d, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    free(d);
    return ok ? 0 : -1;
}

#endif
