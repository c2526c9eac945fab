/* DICOM series (src/io/dicom.cpp, through GDCM): directories of slices
 * written by tests/dicom_writer.h, read with pm_volume_read. The reference
 * for every sample is the writer's own geometry: the output voxel's world
 * position (origin + index * spacing) is projected back onto the slice
 * that was written there and the pixel it came from, so sorting, spacing,
 * origin, flips and axis permutations are all checked against what was
 * written, not against the reader's own arithmetic. Then the errors each
 * name the file or directory, truncations never pass, and a sphere phantom
 * read from DICOM gives the same surface as the same samples in memory.
 * Built with GDCM only (PM_HAVE_GDCM); otherwise it skips (77). File I/O is
 * host-only: the cuda run skips too. */
#define _XOPEN_SOURCE 700
#include "test_common.h"

#ifndef PM_HAVE_GDCM
int main(void)
{
    printf("skipped: pyramesh was built without GDCM (libgdcm-dev), no DICOM reader\n");
    return PMT_SKIP;
}
#else

#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_files.h"
#include "dicom_writer.h"

/* A series as written: slice k at first + k * step * normal, where normal
 * is row direction x column direction (ImageOrientationPatient). */
typedef struct series {
    unsigned rows, cols, n;
    unsigned bits, stored, is_signed;
    int garbage_high_bits; /* random bits above bits_stored */
    double iop[6], ps[2];  /* as written: ps[0] between rows, ps[1] between columns */
    double first[3], step;
    int rescale; /* 0 none, 1 slope/intercept on every slice, 2 slope per slice */
    double slope, intercept;
    const char *series_uid;
    int32_t *raw; /* rows*cols*n stored values, slice k after slice k-1 */
} series;

static double slice_slope(const series *s, unsigned k)
{
    return s->rescale == 2 ? s->slope + 0.25 * k : s->slope;
}

static void cross(const double a[3], const double b[3], double c[3])
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

/* Random stored values in the range of the stored bits. */
static void fill_random(series *s)
{
    size_t n = (size_t)s->rows * s->cols * s->n;
    s->raw = malloc(n * sizeof *s->raw);
    unsigned bits = s->stored ? s->stored : s->bits;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = (uint32_t)pmt_rand() & ((1u << bits) - 1);
        s->raw[i] = s->is_signed && r >= (1u << (bits - 1)) ? (int32_t)r - (1 << bits) : (int32_t)r;
    }
}

static dcmw_slice slice_of(const series *s, unsigned k, void *pixels)
{
    dcmw_slice d = dcmw_axial(s->rows, s->cols, 0, pixels);
    double nrm[3];
    cross(s->iop, s->iop + 3, nrm);
    for (int c = 0; c < 3; c++)
        d.ipp[c] = s->first[c] + k * s->step * nrm[c];
    memcpy(d.iop, s->iop, sizeof d.iop);
    memcpy(d.pixel_spacing, s->ps, sizeof d.pixel_spacing);
    d.bits_allocated = s->bits;
    d.bits_stored = s->stored;
    d.pixel_representation = s->is_signed;
    d.rescale = s->rescale != 0;
    d.slope = slice_slope(s, k);
    d.intercept = s->intercept;
    d.series_uid = s->series_uid;
    return d;
}

/* Slice k's pixels in the file's layout (caller frees). */
static void *pixels_of(const series *s, unsigned k)
{
    size_t m = (size_t)s->rows * s->cols;
    unsigned stored = s->stored ? s->stored : s->bits;
    uint32_t mask = (1u << stored) - 1;
    unsigned char *p = malloc(m * 2);
    for (size_t i = 0; i < m; i++) {
        uint32_t v = (uint32_t)s->raw[k * m + i] & mask;
        if (s->garbage_high_bits) v |= (uint32_t)pmt_rand() & ~mask;
        if (s->bits == 8)
            p[i] = (unsigned char)v;
        else
            ((uint16_t *)p)[i] = (uint16_t)v;
    }
    return p;
}

/* Writes the series into directory dir (created) under random file names,
 * in a random order, with shuffled instance numbers. */
static void write_series(const char *dir, const series *s)
{
    mkdir(dir, 0755);
    unsigned perm[512];
    for (unsigned k = 0; k < s->n; k++)
        perm[k] = k;
    for (unsigned k = s->n; k > 1; k--) {
        unsigned j = (unsigned)(pmt_rand() % k), t = perm[k - 1];
        perm[k - 1] = perm[j];
        perm[j] = t;
    }
    for (unsigned w = 0; w < s->n; w++) {
        unsigned k = perm[w];
        void *px = pixels_of(s, k);
        dcmw_slice d = slice_of(s, k, px);
        d.instance = perm[(k + 1) % s->n];
        char path[900];
        snprintf(path, sizeof path, "%s/%08x_%u%s", dir, (unsigned)pmt_rand(), w,
                 w % 3 ? ".dcm" : "");
        if (dcmw_write(path, &d) != 0) {
            perror(path);
            exit(1);
        }
        free(px);
    }
}

static double sample_at(const pm_volume *v, size_t i)
{
    switch (v->type) {
    case PM_SAMPLE_U8: return ((const uint8_t *)v->data)[i];
    case PM_SAMPLE_U16: return ((const uint16_t *)v->data)[i];
    case PM_SAMPLE_I16: return ((const int16_t *)v->data)[i];
    case PM_SAMPLE_F32: return ((const float *)v->data)[i];
    case PM_SAMPLE_F64: return ((const double *)v->data)[i];
    }
    return NAN;
}

/* Reads dir and checks it against the series: the type, dims, spacing and
 * origin the written geometry implies, and every sample through the
 * world-position reference (see the top of the file). */
static void check_series(const char *what, const char *dir, const series *s, pm_sample_type want)
{
    pm_volume v;
    pm_status st = pm_volume_read(dir, NULL, 0, &v);
    PMT_CHECK(st == PM_STATUS_OK, "%s: %s: %s", what, pm_status_string(st), pm_last_error());
    if (st != PM_STATUS_OK) return;
    /* The world step of each written index axis: column, row, slice. */
    double ax[3][3], nrm[3];
    cross(s->iop, s->iop + 3, nrm);
    size_t count[3] = {s->cols, s->rows, s->n};
    for (int c = 0; c < 3; c++) {
        ax[0][c] = s->iop[c] * s->ps[1];
        ax[1][c] = s->iop[3 + c] * s->ps[0];
        ax[2][c] = nrm[c] * s->step;
    }
    size_t dims[3] = {0, 0, 0};
    double sp[3] = {0, 0, 0}, org[3];
    memcpy(org, s->first, sizeof org);
    for (int a = 0; a < 3; a++)
        for (int w = 0; w < 3; w++)
            if (fabs(ax[a][w]) > 1e-9) {
                dims[w] = count[a];
                sp[w] = fabs(ax[a][w]);
                if (ax[a][w] < 0) org[w] += (double)(count[a] - 1) * ax[a][w];
            }
    PMT_CHECK(v.type == want, "%s: type %s, want %s", what, pm_sample_type_string(v.type),
              pm_sample_type_string(want));
    PMT_CHECK(v.nx == dims[0] && v.ny == dims[1] && v.nz == dims[2],
              "%s: dims %zu %zu %zu, want %zu %zu %zu", what, v.nx, v.ny, v.nz, dims[0], dims[1],
              dims[2]);
    for (int w = 0; w < 3; w++) {
        PMT_CHECK(fabs(v.spacing[w] - sp[w]) <= 1e-9 * sp[w], "%s: spacing[%d] %.17g, want %.17g",
                  what, w, v.spacing[w], sp[w]);
        PMT_CHECK(fabs(v.origin[w] - org[w]) <= 1e-9 * (1 + fabs(org[w])),
                  "%s: origin[%d] %.17g, want %.17g", what, w, v.origin[w], org[w]);
    }
    if (v.type != want || v.nx != dims[0] || v.ny != dims[1] || v.nz != dims[2]) {
        pm_volume_free(&v);
        return;
    }
    size_t rs = v.row_stride ? v.row_stride : v.nx;
    size_t ss = v.slice_stride ? v.slice_stride : rs * v.ny;
    size_t bad = 0;
    for (size_t l = 0; l < v.nz; l++)
        for (size_t j = 0; j < v.ny; j++)
            for (size_t i = 0; i < v.nx; i++) {
                double p[3] = {org[0] + i * sp[0] - s->first[0], org[1] + j * sp[1] - s->first[1],
                               org[2] + l * sp[2] - s->first[2]};
                long idx[3];
                for (int a = 0; a < 3; a++) {
                    double len2 = ax[a][0] * ax[a][0] + ax[a][1] * ax[a][1] + ax[a][2] * ax[a][2];
                    double t = (p[0] * ax[a][0] + p[1] * ax[a][1] + p[2] * ax[a][2]) / len2;
                    idx[a] = lround(t);
                    if (fabs(t - idx[a]) > 1e-6 || idx[a] < 0 || idx[a] >= (long)count[a]) {
                        PMT_CHECK(0, "%s: voxel %zu %zu %zu is at written index %g on axis %d",
                                  what, i, j, l, t, a);
                        pm_volume_free(&v);
                        return;
                    }
                }
                unsigned k = (unsigned)idx[2];
                double raw = s->raw[((size_t)k * s->rows + idx[1]) * s->cols + idx[0]];
                double want_v = raw;
                if (s->rescale) want_v = (float)(raw * slice_slope(s, k) + s->intercept);
                double got = sample_at(&v, i + j * rs + l * ss);
                if (!(fabs(got - want_v) <= 1e-6 * (1 + fabs(want_v)))) {
                    if (bad++ < 3)
                        fprintf(stderr, "%s: voxel %zu %zu %zu = %.9g, want %.9g (raw %g)\n", what,
                                i, j, l, got, want_v, raw);
                }
            }
    PMT_CHECK(bad == 0, "%s: %zu samples differ", what, bad);
    pm_volume_free(&v);
}

static series axial(unsigned rows, unsigned cols, unsigned n)
{
    series s;
    memset(&s, 0, sizeof s);
    s.rows = rows;
    s.cols = cols;
    s.n = n;
    s.bits = 16;
    s.iop[0] = s.iop[4] = 1;
    s.ps[0] = 0.8; /* between rows: y */
    s.ps[1] = 0.7; /* between columns: x */
    s.first[0] = -120.5;
    s.first[1] = 33.25;
    s.first[2] = -40;
    s.step = 2.5;
    s.slope = 1;
    return s;
}

/* pm_volume_read(dir) must fail with `want`, a message naming `name` (the
 * directory or the file at fault) and containing `needle`. */
static void expect_fail(const char *dir, const char *name, pm_status want, const char *needle,
                        const char *what)
{
    pm_volume v;
    pm_status s = pm_volume_read(dir, NULL, 0, &v);
    PMT_CHECK(s == want, "%s: got %s, want %s: %s", what, pm_status_string(s),
              pm_status_string(want), pm_last_error());
    if (s == PM_STATUS_OK) pm_volume_free(&v);
    PMT_CHECK(strstr(pm_last_error(), name) != NULL, "%s: message '%s' does not name '%s'", what,
              pm_last_error(), name);
    if (needle)
        PMT_CHECK(strstr(pm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
                  pm_last_error(), needle);
}

/* One slice written alone into dir/name. */
static void write_one(const char *dir, const char *name, const dcmw_slice *d)
{
    char path[900];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (dcmw_write(path, d) != 0) {
        perror(path);
        exit(1);
    }
}

/* n axial 5 x 4 u16 slices z = 0, 2.5, ... as s0.dcm ... into a fresh dir. */
static const char *plain_series(const char *name, unsigned n, const uint16_t *px)
{
    const char *dir = path_in(name);
    mkdir(dir, 0755);
    for (unsigned k = 0; k < n; k++) {
        dcmw_slice d = dcmw_axial(4, 5, 2.5 * k, px);
        d.instance = k;
        char f[32];
        snprintf(f, sizeof f, "s%u.dcm", k);
        write_one(dir, f, &d);
    }
    return dir;
}

static void test_values(void)
{
    /* Shuffled names, shuffled writing order, 0.7 x 0.8 x 2.5: the
     * hand-written expectations first, then the reference check. */
    series s = axial(4, 5, 6);
    fill_random(&s);
    write_series(path_in("axial"), &s);
    pm_volume v;
    PMT_OK(pm_volume_read(path_in("axial"), NULL, 0, &v));
    PMT_CHECK(v.type == PM_SAMPLE_U16 && v.nx == 5 && v.ny == 4 && v.nz == 6,
              "axial: %s %zu %zu %zu", pm_sample_type_string(v.type), v.nx, v.ny, v.nz);
    PMT_CHECK(fabs(v.spacing[0] - 0.7) < 1e-12 && fabs(v.spacing[1] - 0.8) < 1e-12 &&
                  fabs(v.spacing[2] - 2.5) < 1e-12,
              "axial: spacing %g %g %g, want 0.7 0.8 2.5", v.spacing[0], v.spacing[1],
              v.spacing[2]);
    PMT_CHECK(v.origin[0] == -120.5 && v.origin[1] == 33.25 && v.origin[2] == -40,
              "axial: origin %g %g %g, want the first slice's -120.5 33.25 -40", v.origin[0],
              v.origin[1], v.origin[2]);
    if (v.nx == 5 && v.ny == 4 && v.nz == 6 && v.type == PM_SAMPLE_U16)
        for (unsigned k = 0; k < 6; k++) /* slice k of the volume is the k-th along z */
            PMT_CHECK(((const uint16_t *)v.data)[k * 20 + 7] == (uint16_t)s.raw[k * 20 + 7],
                      "axial: slice %u not in place", k);
    pm_volume_free(&v);
    check_series("axial", path_in("axial"), &s, PM_SAMPLE_U16);

    /* Files that are not DICOM (docs/formats.md: only files GDCM recognises
     * are slices), a subdirectory holding another series: ignored. */
    write_file(path_in("axial/README.txt"), "slices of a phantom\n", 20);
    unsigned char junk[300];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)pmt_rand();
    write_file(path_in("axial/junk.dcm"), junk, sizeof junk);
    write_file(path_in("axial/empty.dcm"), "", 0);
    {
        series o = axial(3, 3, 2);
        o.series_uid = "1.2.3.4.5";
        fill_random(&o);
        write_series(path_in("axial/sub"), &o);
        free(o.raw);
    }
    check_series("axial with non-DICOM files", path_in("axial"), &s, PM_SAMPLE_U16);
    free(s.raw);

    /* Positions decreasing along the normal in instance order; orientations
     * whose normal is -z, and coronal and sagittal slices (permuted and
     * flipped axes): each comes back axis-aligned with positive spacing. */
    static const double iops[][6] = {{1, 0, 0, 0, 1, 0},
                                     {0, 1, 0, 1, 0, 0},
                                     {1, 0, 0, 0, 0, -1},
                                     {0, 1, 0, 0, 0, -1},
                                     {-1, 0, 0, 0, -1, 0}};
    static const char *iop_names[] = {"axial", "normal -z", "coronal", "sagittal", "flipped"};
    for (int o = 0; o < 5; o++)
        for (int rev = 0; rev < 2; rev++) {
            series r = axial(3 + o, 6 - o, 4 + rev);
            memcpy(r.iop, iops[o], sizeof r.iop);
            r.step = rev ? -1.25 : 3;
            r.is_signed = (unsigned)(o & 1);
            fill_random(&r);
            char name[64], what[96];
            snprintf(name, sizeof name, "orient_%d_%d", o, rev);
            snprintf(what, sizeof what, "%s%s", iop_names[o], rev ? ", positions decreasing" : "");
            write_series(path_in(name), &r);
            check_series(what, path_in(name), &r, r.is_signed ? PM_SAMPLE_I16 : PM_SAMPLE_U16);
            free(r.raw);
        }

    /* Sample types and rescales: the type docs/formats.md promises. */
    struct {
        const char *name;
        unsigned bits, stored, is_signed;
        int garbage, rescale;
        double slope, intercept;
        pm_sample_type want;
    } cases[] = {
        {"u16", 16, 0, 0, 0, 0, 1, 0, PM_SAMPLE_U16},
        {"i16", 16, 0, 1, 0, 0, 1, 0, PM_SAMPLE_I16},
        {"u8", 8, 0, 0, 0, 0, 1, 0, PM_SAMPLE_U8},
        {"i8 (to f32)", 8, 0, 1, 0, 0, 1, 0, PM_SAMPLE_F32},
        {"identity rescale written", 16, 0, 1, 0, 1, 1, 0, PM_SAMPLE_I16},
        {"CT HU: 12 bits stored, intercept -1024", 16, 12, 0, 0, 1, 1, -1024, PM_SAMPLE_F32},
        {"i16 slope 0.37 intercept -10.25", 16, 0, 1, 0, 1, 0.37, -10.25, PM_SAMPLE_F32},
        {"u8 slope 2.5", 8, 0, 0, 0, 1, 2.5, 0, PM_SAMPLE_F32},
        {"a slope per slice (PET)", 16, 0, 0, 0, 2, 0.5, 3, PM_SAMPLE_F32},
        {"12 bits signed, upper bits zero", 16, 12, 1, 0, 0, 1, 0, PM_SAMPLE_I16},
        {"12 bits unsigned, garbage above", 16, 12, 0, 1, 0, 1, 0, PM_SAMPLE_U16},
        {"12 bits signed, garbage above, HU", 16, 12, 1, 1, 1, 1, -1024, PM_SAMPLE_F32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        series t = axial(7, 9, 5);
        t.bits = cases[c].bits;
        t.stored = cases[c].stored;
        t.is_signed = cases[c].is_signed;
        t.garbage_high_bits = cases[c].garbage;
        t.rescale = cases[c].rescale;
        t.slope = cases[c].slope;
        t.intercept = cases[c].intercept;
        fill_random(&t);
        char name[32];
        snprintf(name, sizeof name, "type_%zu", c);
        write_series(path_in(name), &t);
        check_series(cases[c].name, path_in(name), &t, cases[c].want);
        free(t.raw);
    }

    /* Awkward sizes: the smallest volume (2 x 2 x 2), odd sizes, a larger one. */
    unsigned sizes[][3] = {{2, 2, 2}, {3, 2, 2}, {2, 31, 3}, {33, 17, 9}, {130, 97, 40}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        series t = axial(sizes[c][0], sizes[c][1], sizes[c][2]);
        t.is_signed = 1;
        fill_random(&t);
        char name[32], what[64];
        snprintf(name, sizeof name, "size_%zu", c);
        snprintf(what, sizeof what, "%u x %u x %u", sizes[c][1], sizes[c][0], sizes[c][2]);
        write_series(path_in(name), &t);
        check_series(what, path_in(name), &t, PM_SAMPLE_I16);
        free(t.raw);
    }
}

static void test_errors(void)
{
    uint16_t px[30] = {0}, px6[30] = {0};
    char f[1000];

    /* A slice of another size, of another pixel type (not the first slice). */
    const char *dir = plain_series("sizes", 5, px);
    dcmw_slice d = dcmw_axial(4, 6, 2.5 * 3, px6);
    write_one(dir, "s3.dcm", &d);
    snprintf(f, sizeof f, "%s/s3.dcm", dir);
    expect_fail(dir, f, PM_STATUS_UNSUPPORTED, "6 x 4 u16 pixels, expected 5 x 4 u16",
                "a slice of another size");
    d = dcmw_axial(4, 5, 2.5 * 3, px);
    d.bits_allocated = 8;
    write_one(dir, "s3.dcm", &d);
    expect_fail(dir, f, PM_STATUS_UNSUPPORTED, "expected 5 x 4 u16", "a slice of another type");

    /* A missing slice, a repeated one: the spacing is uneven; the message
     * says so and names the two files around the gap. */
    dir = plain_series("gap", 5, px);
    snprintf(f, sizeof f, "%s/s2.dcm", dir);
    remove(f);
    expect_fail(dir, dir, PM_STATUS_UNSUPPORTED, "missing or repeated slices", "a missing slice");
    snprintf(f, sizeof f, "%s/s", dir); /* and names two of its slices */
    PMT_CHECK(strstr(pm_last_error(), f) && strstr(strstr(pm_last_error(), f) + 1, f),
              "a missing slice: '%s' names no two slices", pm_last_error());
    dir = plain_series("repeat", 4, px);
    d = dcmw_axial(4, 5, 2.5, px);
    d.instance = 9;
    write_one(dir, "again.dcm", &d);
    expect_fail(dir, dir, PM_STATUS_UNSUPPORTED, "missing or repeated slices", "a repeated slice");

    /* Two series in one folder: refused, naming both UIDs. */
    dir = plain_series("two_series", 3, px);
    for (unsigned k = 0; k < 3; k++) {
        d = dcmw_axial(4, 5, 2.5 * k, px);
        d.series_uid = "1.2.3.99";
        d.instance = k;
        char name[16];
        snprintf(name, sizeof name, "t%u.dcm", k);
        write_one(dir, name, &d);
    }
    expect_fail(dir, dir, PM_STATUS_UNSUPPORTED, "more than one series", "two series");
    PMT_CHECK(strstr(pm_last_error(), "1.2.3.99") != NULL, "two series: '%s' lacks the UID",
              pm_last_error());

    /* An orientation that differs, an oblique one, bad numbers. */
    dir = plain_series("orientation", 3, px);
    d = dcmw_axial(4, 5, 2.5, px);
    d.iop[1] = 0.5;
    write_one(dir, "s1.dcm", &d);
    snprintf(f, sizeof f, "%s/s1.dcm", dir);
    expect_fail(dir, f, PM_STATUS_UNSUPPORTED, "ImageOrientationPatient differs",
                "one orientation differs");
    dir = path_in("oblique");
    mkdir(dir, 0755);
    for (unsigned k = 0; k < 3; k++) {
        d = dcmw_axial(4, 5, 0, px);
        const double c = 0.8, sn = 0.6; /* a rotation about z */
        double iop[6] = {c, sn, 0, -sn, c, 0};
        memcpy(d.iop, iop, sizeof iop);
        d.ipp[2] = 2.5 * k;
        d.instance = k;
        char name[16];
        snprintf(name, sizeof name, "s%u.dcm", k);
        write_one(dir, name, &d);
    }
    expect_fail(dir, dir, PM_STATUS_UNSUPPORTED, "oblique", "oblique");
    dir = plain_series("bad_ipp", 3, px);
    d = dcmw_axial(4, 5, 2.5, px);
    d.ipp_text = "0\\zero\\2.5";
    write_one(dir, "s1.dcm", &d);
    snprintf(f, sizeof f, "%s/s1.dcm", dir);
    expect_fail(dir, f, PM_STATUS_PARSE_ERROR, "ImagePositionPatient", "a bad position");
    d.ipp_text = NULL;
    d.rescale = 1;
    d.slope_text = "one";
    write_one(dir, "s1.dcm", &d);
    expect_fail(dir, f, PM_STATUS_PARSE_ERROR, "RescaleSlope", "a bad slope");

    /* Pixel formats the reader refuses, pixel data that is too short. */
    dir = plain_series("rgb", 3, px);
    d = dcmw_axial(4, 5, 2.5, NULL);
    d.bits_allocated = 8;
    d.samples_per_pixel = 3;
    write_one(dir, "s1.dcm", &d);
    snprintf(f, sizeof f, "%s/s1.dcm", dir);
    expect_fail(dir, f, PM_STATUS_UNSUPPORTED, "3 samples per pixel", "RGB");
    d = dcmw_axial(4, 5, 2.5, NULL);
    d.frames = 2;
    write_one(dir, "s1.dcm", &d);
    expect_fail(dir, f, PM_STATUS_UNSUPPORTED, "multi-frame", "multi-frame");
    d = dcmw_axial(4, 5, 2.5, px);
    d.pixel_bytes = 20;
    write_one(dir, "s1.dcm", &d);
    expect_fail(dir, f, PM_STATUS_PARSE_ERROR, NULL, "short pixel data");

    /* Too few slices, slices of one row, nothing DICOM, an empty folder. */
    dir = plain_series("one_slice", 1, px);
    expect_fail(dir, dir, PM_STATUS_PARSE_ERROR, "1 DICOM image slices found, expected at least 2",
                "one slice");
    dir = path_in("one_row");
    mkdir(dir, 0755);
    for (unsigned k = 0; k < 3; k++) {
        d = dcmw_axial(1, 5, 2.5 * k, px);
        snprintf(f, sizeof f, "s%u.dcm", k);
        write_one(dir, f, &d);
    }
    expect_fail(dir, dir, PM_STATUS_PARSE_ERROR, "at least 2", "one row");
    dir = path_in("not_dicom");
    mkdir(dir, 0755);
    write_file(path_in("not_dicom/a.txt"), "hello\n", 6);
    write_file(path_in("not_dicom/b.nrrd"), "NRRD0004\n", 9);
    expect_fail(dir, dir, PM_STATUS_PARSE_ERROR, "0 DICOM image slices found", "nothing DICOM");
    dir = path_in("empty");
    mkdir(dir, 0755);
    expect_fail(dir, dir, PM_STATUS_IO_ERROR, "without DICOM files", "empty folder");

    /* The memory limit covers the volume. */
    dir = plain_series("limit", 4, px);
    {
        pm_volume v;
        pm_status s = pm_volume_read(dir, NULL, 100, &v);
        PMT_CHECK(s == PM_STATUS_OUT_OF_MEMORY && strstr(pm_last_error(), "160 bytes"),
                  "memory limit: %s: %s", pm_status_string(s), pm_last_error());
        if (s == PM_STATUS_OK) pm_volume_free(&v);
    }
}

/* pm_volume_read(dir) in a child process, so that an abort inside GDCM
 * (Debian's GDCM 3.0 keeps its assert()s) is counted rather than ending
 * the test. Returns 0 refused (the message in msg), 1 accepted, 2 the
 * child died (its stderr, the assertion, in errpath). Called before this
 * process has started OpenMP, which is not fork-safe. */
static int read_in_child(const char *dir, char *msg, size_t cap, const char *errpath)
{
    int fd[2];
    if (pipe(fd) != 0) exit(1);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) exit(1);
    if (pid == 0) {
        close(fd[0]);
        if (!freopen(errpath, "w", stderr)) _exit(3);
        pm_volume v;
        pm_status s = pm_volume_read(dir, NULL, 0, &v);
        const char *m = s == PM_STATUS_OK ? "" : pm_last_error();
        ssize_t w = write(fd[1], m, strlen(m));
        (void)w;
        _exit(s == PM_STATUS_OK ? 1 : 0);
    }
    close(fd[1]);
    size_t k = 0;
    ssize_t r;
    while (k + 1 < cap && (r = read(fd[0], msg + k, cap - 1 - k)) > 0)
        k += (size_t)r;
    msg[k] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) return 2;
    return WIFEXITED(st) && WEXITSTATUS(st) <= 1 ? WEXITSTATUS(st) : 2;
}

/* Every truncation of the middle slice of five: never read as a volume,
 * never a crash, always a message naming the folder; cut inside the pixel
 * data (its 12-byte element header and 4 x 5 u16 samples), a message
 * naming the file. */
static void test_truncation(void)
{
    static const uint16_t px[20] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                    11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    const char *dir = plain_series("truncated", 5, px);
    char f[1000], msg[2048], errpath[1000], first_abort[512] = "";
    snprintf(f, sizeof f, "%s/s2.dcm", dir);
    snprintf(errpath, sizeof errpath, "%s/child.err", tmpdir);
    size_t n = 0;
    unsigned char *whole = slurp(f, &n);
    if (!whole) exit(1);
    int died = 0, accepted = 0, unnamed = 0, pixel_cuts = 0, pixel_named = 0;
    size_t first_died = 0, first_accepted = 0;
    for (size_t cut = 0; cut < n; cut++) {
        write_file(f, whole, cut);
        int r = read_in_child(dir, msg, sizeof msg, errpath);
        if (r == 2 && died++ == 0) {
            first_died = cut;
            size_t en = 0;
            unsigned char *e = slurp(errpath, &en);
            if (e)
                snprintf(first_abort, sizeof first_abort, "%.*s", (int)strcspn((char *)e, "\n"), e);
            free(e);
        }
        if (r == 1 && accepted++ == 0) first_accepted = cut;
        if (r == 0 && !strstr(msg, dir)) unnamed++;
        if (cut >= n - 52) {
            pixel_cuts++;
            pixel_named += r == 0 && strstr(msg, f) != NULL;
        }
    }
    remove(errpath);
    PMT_CHECK(died == 0,
              "truncations: %d of %zu cuts killed the process (the first at byte %zu: %s)", died, n,
              first_died, first_abort);
    PMT_CHECK(accepted == 0,
              "truncations: %d of %zu cuts were read as a volume (the first at byte %zu)", accepted,
              n, first_accepted);
    PMT_CHECK(unnamed == 0, "truncations: %d messages without the folder", unnamed);
    PMT_CHECK(pixel_named == pixel_cuts,
              "truncations inside the pixel data: %d of %d name the file", pixel_named, pixel_cuts);
    write_file(f, whole, n);
    free(whole);
}

/* A sphere of radius 12 in CT numbers (i16, intercept -1024: 100 HU per
 * mm inside, negative outside), 0.7 x 0.8 x 2.5 mm, read from DICOM and
 * extracted at 0 HU: the same mesh as the same f32 samples given in
 * memory, at the series' world position, enclosing 4/3 pi r^3 closely. */
static void test_sphere(void)
{
    const unsigned nx = 48, ny = 44, nz = 16;
    const double sp[3] = {0.7, 0.8, 2.5}, org[3] = {10, -20, 100}, r = 12;
    const double c[3] = {org[0] + 0.5 * (nx - 1) * sp[0], org[1] + 0.5 * (ny - 1) * sp[1],
                         org[2] + 0.5 * (nz - 1) * sp[2]};
    float *ref = malloc(sizeof(float) * nx * ny * nz);
    int16_t *slice = malloc(sizeof(int16_t) * nx * ny);
    const char *dir = path_in("sphere");
    mkdir(dir, 0755);
    for (unsigned k = 0; k < nz; k++) {
        for (unsigned j = 0; j < ny; j++)
            for (unsigned i = 0; i < nx; i++) {
                double p[3] = {org[0] + i * sp[0] - c[0], org[1] + j * sp[1] - c[1],
                               org[2] + k * sp[2] - c[2]};
                double hu = lround(100 * (r - sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2])));
                if (hu < -1024) hu = -1024;
                slice[j * nx + i] = (int16_t)(hu + 1024);
                ref[(k * ny + j) * nx + i] = (float)hu;
            }
        dcmw_slice d = dcmw_axial(ny, nx, org[2] + k * sp[2], slice);
        d.ipp[0] = org[0];
        d.ipp[1] = org[1];
        d.pixel_spacing[0] = sp[1];
        d.pixel_spacing[1] = sp[0];
        d.pixel_representation = 1;
        d.rescale = 1;
        d.slope = 1;
        d.intercept = -1024;
        d.instance = k;
        char name[32];
        snprintf(name, sizeof name, "IM%04u", (k * 7) % nz);
        write_one(dir, name, &d);
    }
    pm_volume v;
    PMT_OK(pm_volume_read(dir, NULL, 0, &v));
    pm_volume mem = {
        ref, PM_SAMPLE_F32, nx, ny, nz, 0, 0, {sp[0], sp[1], sp[2]}, {org[0], org[1], org[2]}};
    pm_context_desc cd = {sizeof cd, PM_DEVICE_CPU, 0, 0, NULL};
    pm_context *ctx;
    PMT_OK(pm_context_create(&cd, &ctx));
    pm_mesh a, b; /* default options: indexed, central-difference normals */
    PMT_OK(pm_isosurface(ctx, &v, 0, NULL, &a));
    PMT_OK(pm_isosurface(ctx, &mem, 0, NULL, &b));
    PMT_CHECK(a.num_triangles == b.num_triangles && a.num_vertices == b.num_vertices &&
                  a.num_triangles > 1000,
              "sphere: %zu triangles, %zu vertices from DICOM; %zu, %zu from memory",
              a.num_triangles, a.num_vertices, b.num_triangles, b.num_vertices);
    if (a.num_vertices == b.num_vertices && a.num_triangles == b.num_triangles) {
        PMT_CHECK(memcmp(a.positions, b.positions, 12 * a.num_vertices) == 0 &&
                      memcmp(a.indices, b.indices, 12 * a.num_triangles) == 0,
                  "sphere: the DICOM mesh differs from the in-memory one");
    }
    pm_mesh_report rep;
    PMT_OK(pm_mesh_analyze(&a, &rep));
    double want = 4.0 / 3.0 * M_PI * r * r * r;
    PMT_CHECK(rep.closed && fabs(rep.volume - want) < 0.02 * want,
              "sphere: closed %d, volume %g, want %g within 2%%", rep.closed, rep.volume, want);
    for (int w = 0; w < 3; w++)
        PMT_CHECK(fabs(0.5 * (rep.bbox_min[w] + rep.bbox_max[w]) - c[w]) < 0.05 &&
                      fabs(rep.bbox_max[w] - rep.bbox_min[w] - 2 * r) < 0.6 * sp[w],
                  "sphere: bbox [%g, %g] on axis %d, want centre %g radius %g", rep.bbox_min[w],
                  rep.bbox_max[w], w, c[w], r);
    printf("sphere: %zu triangles, volume %.1f (4/3 pi r^3 = %.1f)\n", a.num_triangles, rep.volume,
           want);
    pm_mesh_free(ctx, &a);
    pm_mesh_free(ctx, &b);
    pm_context_destroy(ctx);
    pm_volume_free(&v);
    free(ref);
    free(slice);
}

int main(int argc, char **argv)
{
    if (!pmt_files_start(argc, argv, "pm_io_dicom", 1)) return PMT_SKIP;
    test_truncation(); /* first: it forks, before OpenMP starts */
    test_values();
    test_errors();
    test_sphere();
    remove_tmpdir();
    return pmt_finish("test_io_dicom");
}

#endif
