/* The medical and VTK XML formats: NIfTI-1/2 (both byte orders, gzip,
 * sform/qform/pixdim, axis permutations and flips, scl_slope), MetaImage
 * (.mha/.mhd, raw, zlib, big-endian, TransformMatrix), INRIA (.inr,
 * .inr.gz, both byte orders), VTK XML ImageData (ascii, base64, appended
 * raw and base64, zlib), points from .vtu (every encoding, several
 * pieces), .bgeo (.gz) and .csv, and the .vtp and .glb writers read back.
 * Each file is written here with known values; every world position of
 * every sample is checked. Then malformed variants: each prefix of each
 * file, bad fields, oblique orientations: a status and a message naming
 * the file. File I/O is host-only: the cuda run skips. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <zlib.h>

#include "test_common.h"
#include "test_files.h"

static void write_gz(const char *path, const void *d, size_t n)
{
    size_t zn;
    unsigned char *z = deflate_bytes(d, n, 1, &zn);
    write_file(path, z, zn);
    free(z);
}

static void b64(buf *b, const unsigned char *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {a[v >> 18], a[(v >> 12) & 63], i + 1 < n ? a[(v >> 6) & 63] : '=',
                     i + 2 < n ? a[v & 63] : '='};
        put(b, q, 4);
    }
}

static void swap_n(void *d, size_t n, size_t es)
{
    unsigned char *p = d;
    for (size_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, z = es - 1; a < z; a++, z--) {
            unsigned char t = p[a];
            p[a] = p[z];
            p[z] = t;
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

/* Every source sample (values vals[], x fastest, dims n) at world position
 * origin + sum_a idx[a] * axes[a] must be in v at that position. */
static void check_world(const char *what, const pm_volume *v, pm_sample_type type,
                        const size_t n[3], const double axes[3][3], const double origin[3],
                        const double *vals)
{
    PMT_CHECK(v->type == type, "%s: type %s, expected %s", what, pm_sample_type_string(v->type),
              pm_sample_type_string(type));
    PMT_CHECK(v->nx * v->ny * v->nz == n[0] * n[1] * n[2], "%s: %zu x %zu x %zu samples", what,
              v->nx, v->ny, v->nz);
    if (v->type != type || v->nx * v->ny * v->nz != n[0] * n[1] * n[2]) return;
    size_t bad = 0;
    for (size_t k = 0; k < n[2]; k++)
        for (size_t j = 0; j < n[1]; j++)
            for (size_t i = 0; i < n[0]; i++) {
                double idx[3] = {(double)i, (double)j, (double)k}, out[3];
                for (int c = 0; c < 3; c++) {
                    double w = origin[c];
                    for (int a = 0; a < 3; a++)
                        w += idx[a] * axes[a][c];
                    out[c] = (w - v->origin[c]) / v->spacing[c];
                }
                size_t o[3], lim[3] = {v->nx, v->ny, v->nz};
                int ok = 1;
                for (int c = 0; c < 3; c++) {
                    double r = floor(out[c] + 0.5);
                    ok &= fabs(out[c] - r) < 1e-6 && r >= 0 && r < (double)lim[c];
                    o[c] = ok ? (size_t)r : 0;
                }
                double want = vals[i + n[0] * (j + n[1] * k)];
                if (!ok || sample_at(v, o[0] + v->nx * (o[1] + v->ny * o[2])) != want) bad++;
            }
    PMT_CHECK(bad == 0, "%s: %zu samples not at their world positions", what, bad);
}

static void expect_fail(const char *path, pm_status want, const char *needle, const char *what)
{
    pm_volume v;
    pm_status s = pm_volume_read(path, NULL, 0, &v);
    PMT_CHECK(s == want, "%s: got %s, want %s: %s", what, pm_status_string(s),
              pm_status_string(want), pm_last_error());
    if (s == PM_STATUS_OK) pm_volume_free(&v);
    PMT_CHECK(strstr(pm_last_error(), path) != NULL, "%s: message '%s' does not name the file",
              what, pm_last_error());
    if (needle)
        PMT_CHECK(strstr(pm_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what,
                  pm_last_error(), needle);
}

/* Every proper prefix of the file at path must fail (when strict) with a
 * message naming it (kind 0 volume, 1 points, 2 mesh); then byte
 * corruption: no crash, and a failure names the file. */
static void prefixes(const char *path, int kind, size_t step, int strict)
{
    size_t n = 0;
    unsigned char *orig = slurp(path, &n), *all = malloc(n + 1);
    memcpy(all, orig, n);
    char cut[768];
    snprintf(cut, sizeof cut, "%s", path);
    char *slash = strrchr(cut, '/');
    memmove(slash + 2, slash + 1, strlen(slash + 1) + 1); /* same extension, another name */
    slash[1] = 'c';
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = 0; k < n; k += pass ? 1 + n / 97 : step) {
            if (pass) {
                all[k] ^= (unsigned char)(1 + pmt_rand() % 255);
                write_file(cut, all, n);
                all[k] = orig[k];
            } else {
                write_file(cut, all, k);
            }
            pm_status s;
            if (kind == 0) {
                pm_volume v;
                if ((s = pm_volume_read(cut, NULL, 1 << 26, &v)) == PM_STATUS_OK)
                    pm_volume_free(&v);
            } else if (kind == 1) {
                pm_points p;
                if ((s = pm_points_read(cut, PM_POINTS_AUTO, 1 << 26, &p)) == PM_STATUS_OK)
                    pm_points_free(&p);
            } else {
                pm_mesh m;
                if ((s = pm_mesh_read(cut, 1 << 26, &m)) == PM_STATUS_OK) pm_mesh_free(NULL, &m);
            }
            /* Only trailing blanks cut: still a whole file. */
            int blanks = 1;
            for (size_t i = k; i < n; i++)
                blanks &= orig[i] == '\n' || orig[i] == ' ' || orig[i] == '\r';
            if (!pass && strict && !blanks)
                PMT_CHECK(s != PM_STATUS_OK, "%s: prefix of %zu bytes accepted", path, k);
            if (s != PM_STATUS_OK)
                PMT_CHECK(strstr(pm_last_error(), cut) != NULL, "%s: %s %zu: message '%s'", path,
                          pass ? "corrupt byte" : "prefix", k, pm_last_error());
        }
    free(orig);
    free(all);
}

/* ------------------------------------------------------------------------ */
/* NIfTI                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct nii_spec {
    int version, big, datatype, bitpix, qform, sform;
    int64_t dim[8];
    double pixdim[8], slope, inter, quatern[3], qoffset[3], srow[3][4];
} nii_spec;

static void put_at(unsigned char *h, size_t off, const void *v, size_t n, int big)
{
    memcpy(h + off, v, n);
    if (big) swap_n(h + off, 1, n);
}
static void put_i16(unsigned char *h, size_t off, int v, int big)
{
    int16_t x = (int16_t)v;
    put_at(h, off, &x, 2, big);
}
static void put_i32(unsigned char *h, size_t off, int64_t v, int big)
{
    int32_t x = (int32_t)v;
    put_at(h, off, &x, 4, big);
}
static void put_f32(unsigned char *h, size_t off, double v, int big)
{
    float x = (float)v;
    put_at(h, off, &x, 4, big);
}
static void put_f64(unsigned char *h, size_t off, double v, int big) { put_at(h, off, &v, 8, big); }

/* Header, 4 bytes of extension flags, then the data (already in the
 * file's byte order). */
static void write_nii(const char *path, const nii_spec *s, const void *data, size_t bytes, int gz)
{
    unsigned char h[544];
    memset(h, 0, sizeof h);
    int b = s->big;
    size_t hs = s->version == 1 ? 348 : 540;
    put_i32(h, 0, (int64_t)hs, b);
    if (s->version == 1) {
        for (int i = 0; i < 8; i++) {
            put_i16(h, 40 + 2 * (size_t)i, (int)s->dim[i], b);
            put_f32(h, 76 + 4 * (size_t)i, s->pixdim[i], b);
        }
        put_i16(h, 70, s->datatype, b);
        put_i16(h, 72, s->bitpix, b);
        put_f32(h, 108, 352, b);
        put_f32(h, 112, s->slope, b);
        put_f32(h, 116, s->inter, b);
        put_i16(h, 252, s->qform, b);
        put_i16(h, 254, s->sform, b);
        for (int i = 0; i < 3; i++) {
            put_f32(h, 256 + 4 * (size_t)i, s->quatern[i], b);
            put_f32(h, 268 + 4 * (size_t)i, s->qoffset[i], b);
            for (int j = 0; j < 4; j++)
                put_f32(h, 280 + 16 * (size_t)i + 4 * (size_t)j, s->srow[i][j], b);
        }
        memcpy(h + 344, "n+1", 4);
    } else {
        memcpy(h + 4, "n+2\0\r\n\032\n", 8);
        put_i16(h, 12, s->datatype, b);
        put_i16(h, 14, s->bitpix, b);
        for (int i = 0; i < 8; i++) {
            int64_t d = s->dim[i];
            put_at(h, 16 + 8 * (size_t)i, &d, 8, b);
            put_f64(h, 104 + 8 * (size_t)i, s->pixdim[i], b);
        }
        int64_t off = 544;
        put_at(h, 168, &off, 8, b);
        put_f64(h, 176, s->slope, b);
        put_f64(h, 184, s->inter, b);
        put_i32(h, 344, s->qform, b);
        put_i32(h, 348, s->sform, b);
        for (int i = 0; i < 3; i++) {
            put_f64(h, 352 + 8 * (size_t)i, s->quatern[i], b);
            put_f64(h, 376 + 8 * (size_t)i, s->qoffset[i], b);
            for (int j = 0; j < 4; j++)
                put_f64(h, 400 + 32 * (size_t)i + 8 * (size_t)j, s->srow[i][j], b);
        }
    }
    buf f = {0};
    put(&f, h, hs + 4);
    put(&f, data, bytes);
    if (gz)
        write_gz(path, f.p, f.n);
    else
        write_file(path, f.p, f.n);
    free(f.p);
}

/* n random values that every sample kind can hold exactly. */
static double *values(size_t n, int is_signed)
{
    double *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(pmt_rand() % 200) - (is_signed ? 100 : 0);
    return v;
}

/* The values stored as the given NIfTI datatype (2 u8, 4 i16, 8 i32, 16
 * f32, 64 f64, 256 i8, 512 u16, 768 u32), in big-endian when big. */
static void *encode(const double *v, size_t n, int datatype, int big, size_t *es)
{
    size_t s = datatype == 2 || datatype == 256   ? 1
               : datatype == 4 || datatype == 512 ? 2
               : datatype == 64                   ? 8
                                                  : 4;
    unsigned char *d = malloc(n * s);
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = d + i * s;
        switch (datatype) {
        case 2: *p = (uint8_t)v[i]; break;
        case 256: *(int8_t *)p = (int8_t)v[i]; break;
        case 4: {
            int16_t x = (int16_t)v[i];
            memcpy(p, &x, 2);
        } break;
        case 512: {
            uint16_t x = (uint16_t)v[i];
            memcpy(p, &x, 2);
        } break;
        case 8: {
            int32_t x = (int32_t)v[i];
            memcpy(p, &x, 4);
        } break;
        case 768: {
            uint32_t x = (uint32_t)v[i];
            memcpy(p, &x, 4);
        } break;
        case 16: {
            float x = (float)v[i];
            memcpy(p, &x, 4);
        } break;
        default: memcpy(p, &v[i], 8);
        }
    }
    if (big) swap_n(d, n, s);
    *es = s;
    return d;
}

static void nifti_case(const char *name, nii_spec *s, int gz, pm_sample_type want,
                       const double axes[3][3], const double origin[3], double slope, double inter)
{
    size_t n[3] = {(size_t)s->dim[1], (size_t)s->dim[2], (size_t)s->dim[3]},
           cnt = n[0] * n[1] * n[2], es;
    int sig = s->datatype == 4 || s->datatype == 8 || s->datatype == 256 || s->datatype >= 16;
    if (s->datatype == 512 || s->datatype == 768) sig = 0;
    double *v = values(cnt, sig);
    void *d = encode(v, cnt, s->datatype, s->big, &es);
    s->bitpix = (int)(8 * es);
    char *path = path_in(name);
    write_nii(path, s, d, cnt * es, gz);
    for (size_t i = 0; i < cnt; i++)
        v[i] = want == PM_SAMPLE_F32 ? (double)(float)(v[i] * slope + inter) : v[i] * slope + inter;
    pm_volume vol;
    pm_status st = pm_volume_read(path, NULL, 0, &vol);
    PMT_CHECK(st == PM_STATUS_OK, "%s: %s", name, pm_last_error());
    if (st == PM_STATUS_OK) {
        check_world(name, &vol, want, n, axes, origin, v);
        pm_volume_free(&vol);
    }
    prefixes(path, 0, 7, 1);
    free(v);
    free(d);
}

static void test_nifti(void)
{
    nii_spec s;
    /* NIfTI-1, little-endian i16, an sform that permutes and flips. */
    memset(&s, 0, sizeof s);
    s.version = 1;
    s.datatype = 4;
    int64_t dim[8] = {3, 5, 4, 3, 1, 1, 1, 1};
    memcpy(s.dim, dim, sizeof dim);
    for (int i = 0; i < 8; i++)
        s.pixdim[i] = 1;
    s.sform = 2;
    double sr[3][4] = {{0, 0, -2, 10}, {1, 0, 0, -3}, {0, 3, 0, 0.5}};
    memcpy(s.srow, sr, sizeof sr);
    double ax1[3][3] = {{0, 1, 0}, {0, 0, 3}, {-2, 0, 0}}, org1[3] = {10, -3, 0.5};
    nifti_case("sform.nii", &s, 0, PM_SAMPLE_I16, ax1, org1, 1, 0);
    /* The same, big-endian and gzip. */
    s.big = 1;
    nifti_case("sform_be.nii.gz", &s, 1, PM_SAMPLE_I16, ax1, org1, 1, 0);
    /* qform: 90 degrees about z (b = c = 0, d = sin 45), qfac -1. */
    memset(&s, 0, sizeof s);
    s.version = 1;
    s.big = 1;
    s.datatype = 16;
    memcpy(s.dim, dim, sizeof dim);
    double pd[8] = {-1, 0.5, 2, 4, 1, 1, 1, 1};
    memcpy(s.pixdim, pd, sizeof pd);
    s.qform = 1;
    s.quatern[2] = sqrt(0.5);
    s.qoffset[0] = 1;
    s.qoffset[1] = 2;
    s.qoffset[2] = 3;
    double ax2[3][3] = {{0, 0.5, 0}, {-2, 0, 0}, {0, 0, -4}}, org2[3] = {1, 2, 3};
    nifti_case("qform_be.nii", &s, 0, PM_SAMPLE_F32, ax2, org2, 1, 0);
    /* pixdim only, u8 with scl_slope/scl_inter: f32 samples. */
    memset(&s, 0, sizeof s);
    s.version = 1;
    s.datatype = 2;
    memcpy(s.dim, dim, sizeof dim);
    double pd3[8] = {1, 0.75, 1.25, 2, 1, 1, 1, 1};
    memcpy(s.pixdim, pd3, sizeof pd3);
    s.slope = 2;
    s.inter = -1.5;
    double ax3[3][3] = {{0.75, 0, 0}, {0, 1.25, 0}, {0, 0, 2}}, org3[3] = {0, 0, 0};
    nifti_case("scaled.nii.gz", &s, 1, PM_SAMPLE_F32, ax3, org3, 2, -1.5);
    /* NIfTI-2: f64 little-endian, i32 big-endian (to f32), u16, i8. */
    memset(&s, 0, sizeof s);
    s.version = 2;
    s.datatype = 64;
    int64_t dim2[8] = {4, 2, 3, 33, 1, 1, 1, 1};
    memcpy(s.dim, dim2, sizeof dim2);
    s.sform = 1;
    double sr2[3][4] = {{1.5, 0, 0, -1}, {0, -1, 0, 4}, {0, 0, 0.25, 0}};
    memcpy(s.srow, sr2, sizeof sr2);
    double ax4[3][3] = {{1.5, 0, 0}, {0, -1, 0}, {0, 0, 0.25}}, org4[3] = {-1, 4, 0};
    nifti_case("v2.nii", &s, 0, PM_SAMPLE_F64, ax4, org4, 1, 0);
    s.big = 1;
    s.datatype = 8;
    nifti_case("v2_i32_be.nii", &s, 0, PM_SAMPLE_F32, ax4, org4, 1, 0);
    s.datatype = 512;
    nifti_case("v2_u16_be.nii.gz", &s, 1, PM_SAMPLE_U16, ax4, org4, 1, 0);
    s.big = 0;
    s.datatype = 256;
    nifti_case("v2_i8.nii", &s, 0, PM_SAMPLE_F32, ax4, org4, 1, 0);
    /* Refusals: oblique sform, a time series, RGB, bad magic, bitpix. */
    size_t es;
    double *v = values(60, 0);
    void *d = encode(v, 60, 4, 0, &es);
    memset(&s, 0, sizeof s);
    s.version = 1;
    s.datatype = 4;
    s.bitpix = 16;
    memcpy(s.dim, dim, sizeof dim);
    s.sform = 1;
    double ob[3][4] = {{0.9, 0.1, 0, 0}, {-0.1, 0.9, 0, 0}, {0, 0, 1, 0}};
    memcpy(s.srow, ob, sizeof ob);
    write_nii(path_in("oblique.nii"), &s, d, 120, 0);
    expect_fail(path_in("oblique.nii"), PM_STATUS_UNSUPPORTED, "oblique", "oblique sform");
    s.sform = 0;
    s.dim[0] = 4;
    s.dim[4] = 2;
    write_nii(path_in("time.nii"), &s, d, 120, 0);
    expect_fail(path_in("time.nii"), PM_STATUS_UNSUPPORTED, "dim[4]", "time series");
    s.dim[0] = 3;
    s.datatype = 128;
    write_nii(path_in("rgb.nii"), &s, d, 120, 0);
    expect_fail(path_in("rgb.nii"), PM_STATUS_UNSUPPORTED, "datatype 128", "RGB");
    s.datatype = 4;
    s.bitpix = 8;
    write_nii(path_in("bitpix.nii"), &s, d, 120, 0);
    expect_fail(path_in("bitpix.nii"), PM_STATUS_PARSE_ERROR, "bitpix", "bitpix");
    write_file(path_in("short.nii"), "\x5c\x01\0\0", 4);
    expect_fail(path_in("short.nii"), PM_STATUS_PARSE_ERROR, "NIfTI header", "4-byte file");
    free(v);
    free(d);
}

/* ------------------------------------------------------------------------ */
/* MetaImage and INRIA                                                       */
/* ------------------------------------------------------------------------ */

static void volume_case(const char *name, const char *path, pm_sample_type want, const size_t n[3],
                        const double axes[3][3], const double origin[3], const double *v,
                        int strict_prefixes)
{
    pm_volume vol;
    pm_status st = pm_volume_read(path, NULL, 0, &vol);
    PMT_CHECK(st == PM_STATUS_OK, "%s: %s", name, pm_last_error());
    if (st == PM_STATUS_OK) {
        check_world(name, &vol, want, n, axes, origin, v);
        pm_volume_free(&vol);
    }
    prefixes(path, 0, 5, strict_prefixes);
}

static void test_metaimage(void)
{
    const size_t n[3] = {5, 4, 3}, cnt = 60;
    double *v = values(cnt, 1);
    size_t es, zn;
    char hdr[1024];
    /* Attached, little-endian short, spacing and offset. */
    void *d = encode(v, cnt, 4, 0, &es);
    const char *common = "ObjectType = Image\nNDims = 3\nBinaryData = True\n"
                         "DimSize = 5 4 3\nElementSpacing = 0.5 1 2\nOffset = 1 -2 3\n";
    double ax[3][3] = {{0.5, 0, 0}, {0, 1, 0}, {0, 0, 2}}, org[3] = {1, -2, 3};
    buf f = {0};
    snprintf(hdr, sizeof hdr,
             "%sBinaryDataByteOrderMSB = False\nElementType = MET_SHORT\n"
             "ElementDataFile = LOCAL\n",
             common);
    puts_(&f, hdr);
    put(&f, d, cnt * es);
    write_file(path_in("le.mha"), f.p, f.n);
    volume_case("le.mha", path_in("le.mha"), PM_SAMPLE_I16, n, ax, org, v, 1);
    free(d);
    /* Attached, big-endian float, zlib-compressed, with a TransformMatrix
     * that swaps x and y and flips z. */
    d = encode(v, cnt, 16, 1, &es);
    unsigned char *z = deflate_bytes(d, cnt * es, 0, &zn);
    f.n = 0;
    snprintf(hdr, sizeof hdr,
             "%sTransformMatrix = 0 1 0 1 0 0 0 0 -1\nCompressedData = True\n"
             "CompressedDataSize = %zu\nElementByteOrderMSB = True\nElementType = MET_FLOAT\n"
             "ElementDataFile = LOCAL\n",
             common, zn);
    puts_(&f, hdr);
    put(&f, z, zn);
    write_file(path_in("zbe.mha"), f.p, f.n);
    double axp[3][3] = {{0, 0.5, 0}, {1, 0, 0}, {0, 0, -2}};
    volume_case("zbe.mha", path_in("zbe.mha"), PM_SAMPLE_F32, n, axp, org, v, 1);
    free(z);
    free(d);
    /* Detached (.mhd + .raw with a 16-byte HeaderSize), unsigned int -> f32. */
    double *u = values(cnt, 0);
    d = encode(u, cnt, 768, 0, &es);
    buf r = {0};
    puts_(&r, "sixteen bytes...");
    put(&r, d, cnt * es);
    write_file(path_in("detached.raw"), r.p, r.n);
    snprintf(hdr, sizeof hdr,
             "%sHeaderSize = 16\nElementType = MET_UINT\n"
             "ElementDataFile = detached.raw\n",
             common);
    write_file(path_in("detached.mhd"), hdr, strlen(hdr));
    volume_case("detached.mhd", path_in("detached.mhd"), PM_SAMPLE_F32, n, ax, org, u, 0);
    /* Refusals. */
    snprintf(hdr, sizeof hdr, "%sElementType = MET_SHORT\nElementDataFile = missing.raw\n", common);
    write_file(path_in("missing.mhd"), hdr, strlen(hdr));
    expect_fail(path_in("missing.mhd"), PM_STATUS_IO_ERROR, "ElementDataFile", "missing data");
    /* A HeaderSize past the end of the detached file: the message names
     * that file (the reader's path outlives the open). */
    snprintf(hdr, sizeof hdr,
             "%sHeaderSize = 100000\nElementType = MET_UINT\nElementDataFile = detached.raw\n",
             common);
    write_file(path_in("skip.mhd"), hdr, strlen(hdr));
    expect_fail(path_in("skip.mhd"), PM_STATUS_PARSE_ERROR, "detached.raw",
                "HeaderSize past the data");
    snprintf(hdr, sizeof hdr,
             "%sTransformMatrix = 0.8 0.6 0 -0.6 0.8 0 0 0 1\n"
             "ElementType = MET_UCHAR\nElementDataFile = LOCAL\n",
             common);
    f.n = 0;
    puts_(&f, hdr);
    put(&f, u, 60);
    write_file(path_in("oblique.mha"), f.p, f.n);
    expect_fail(path_in("oblique.mha"), PM_STATUS_UNSUPPORTED, "TransformMatrix", "oblique");
    snprintf(hdr, sizeof hdr, "%sElementType = MET_COMPLEX\nElementDataFile = LOCAL\n", common);
    write_file(path_in("complex.mha"), hdr, strlen(hdr));
    expect_fail(path_in("complex.mha"), PM_STATUS_UNSUPPORTED, "MET_COMPLEX", "element type");
    snprintf(hdr, sizeof hdr, "%sElementType = MET_UCHAR\nElementDataFile = LIST\n", common);
    write_file(path_in("list.mha"), hdr, strlen(hdr));
    expect_fail(path_in("list.mha"), PM_STATUS_UNSUPPORTED, "LIST", "LIST");
    free(d);
    free(u);
    free(r.p);
    free(f.p);
    free(v);
}

static void write_inr(const char *path, const char *type, int bits, const char *cpu, const void *d,
                      size_t bytes, int gz)
{
    char h[257];
    int k = snprintf(h, sizeof h,
                     "#INRIMAGE-4#{\nXDIM=5\nYDIM=4\nZDIM=3\nVDIM=1\nTYPE=%s\nPIXSIZE=%d bits\n"
                     "SCALE=2**0\nCPU=%s\nVX=0.25\nVY=0.5\nVZ=1.5\n",
                     type, bits, cpu);
    memset(h + k, '\n', 256 - (size_t)k);
    memcpy(h + 252, "##}\n", 4);
    buf f = {0};
    put(&f, h, 256);
    put(&f, d, bytes);
    if (gz)
        write_gz(path, f.p, f.n);
    else
        write_file(path, f.p, f.n);
    free(f.p);
}

static void test_inr(void)
{
    const size_t n[3] = {5, 4, 3}, cnt = 60;
    double ax[3][3] = {{0.25, 0, 0}, {0, 0.5, 0}, {0, 0, 1.5}}, org[3] = {0, 0, 0};
    double *v = values(cnt, 0), *sv = values(cnt, 1);
    size_t es;
    void *d = encode(v, cnt, 2, 0, &es);
    write_inr(path_in("u8.inr"), "unsigned fixed", 8, "decm", d, cnt, 0);
    volume_case("u8.inr", path_in("u8.inr"), PM_SAMPLE_U8, n, ax, org, v, 1);
    free(d);
    d = encode(sv, cnt, 4, 1, &es);
    write_inr(path_in("i16.inr.gz"), "signed fixed", 16, "sun", d, cnt * es, 1);
    volume_case("i16.inr.gz", path_in("i16.inr.gz"), PM_SAMPLE_I16, n, ax, org, sv, 1);
    free(d);
    d = encode(sv, cnt, 64, 1, &es);
    write_inr(path_in("f64.inr"), "float", 64, "sgi", d, cnt * es, 0);
    volume_case("f64.inr", path_in("f64.inr"), PM_SAMPLE_F64, n, ax, org, sv, 1);
    write_inr(path_in("cpu.inr"), "float", 64, "vax", d, cnt * es, 0);
    expect_fail(path_in("cpu.inr"), PM_STATUS_PARSE_ERROR, "CPU", "unknown CPU");
    write_inr(path_in("f16.inr"), "float", 16, "pc", d, cnt * es, 0);
    expect_fail(path_in("f16.inr"), PM_STATUS_UNSUPPORTED, "16 bits", "16-bit float");
    free(d);
    free(v);
    free(sv);
}

/* ------------------------------------------------------------------------ */
/* VTK XML                                                                   */
/* ------------------------------------------------------------------------ */

/* One DataArray's binary block: UInt32/UInt64 header then data, or zlib
 * blocks of at most `block` bytes behind their header. */
static void vtk_block(buf *b, const void *d, size_t n, int h64, int zlib, size_t block)
{
    unsigned char hdr[8 * 64];
    size_t hs = h64 ? 8 : 4, nh = 0;
#define HPUT(v)                                                                                    \
    do {                                                                                           \
        uint64_t v_ = (v);                                                                         \
        uint32_t w_ = (uint32_t)v_;                                                                \
        memcpy(hdr + nh, h64 ? (void *)&v_ : (void *)&w_, hs);                                     \
        nh += hs;                                                                                  \
    } while (0)
    if (!zlib) {
        HPUT(n);
        put(b, hdr, nh);
        put(b, d, n);
        return;
    }
    size_t nb = (n + block - 1) / block;
    HPUT(nb);
    HPUT(block);
    HPUT(n % block);
    buf z = {0};
    for (size_t i = 0; i < nb; i++) {
        size_t k = i + 1 == nb && n % block ? n % block : block, zn;
        unsigned char *c = deflate_bytes((const unsigned char *)d + i * block, k, 0, &zn);
        HPUT(zn);
        put(&z, c, zn);
        free(c);
    }
#undef HPUT
    put(b, hdr, nh);
    put(b, z.p, z.n);
    free(z.p);
}

/* A whole file with one or more DataArrays (enc 0 ascii, 1 binary base64,
 * 2 appended raw, 3 appended base64); the arrays are given as
 * (attributes, data, bytes, ascii text). */
typedef struct vtk_arr {
    const char *open, *close; /* XML around the DataArray */
    const char *attrs;        /* type, Name, NumberOfComponents */
    const void *data;
    size_t bytes;
    const char *ascii;
} vtk_arr;

static void write_vtk_xml(const char *path, const char *type, const char *head, const char *tail,
                          const vtk_arr *a, int na, int enc, int h64, int zlib)
{
    buf f = {0}, app = {0};
    putf(&f,
         "<?xml version=\"1.0\"?>\n<VTKFile type=\"%s\" version=\"1.0\" "
         "byte_order=\"LittleEndian\" header_type=\"%s\"%s>\n%s",
         type, h64 ? "UInt64" : "UInt32", zlib ? " compressor=\"vtkZLibDataCompressor\"" : "",
         head);
    for (int i = 0; i < na; i++) {
        puts_(&f, a[i].open);
        putf(&f, "<DataArray %s format=\"%s\"", a[i].attrs,
             enc == 0   ? "ascii"
             : enc == 1 ? "binary"
                        : "appended");
        if (enc >= 2) {
            putf(&f, " offset=\"%zu\"/>\n", app.n);
            buf blk = {0};
            vtk_block(&blk, a[i].data, a[i].bytes, h64, zlib, 40);
            if (enc == 2) {
                put(&app, blk.p, blk.n);
            } else if (zlib) {
                /* VTK encodes the header and the blocks as two streams. */
                size_t hs = (h64 ? 8 : 4) * (3 + (a[i].bytes + 39) / 40);
                b64(&app, blk.p, hs);
                b64(&app, blk.p + hs, blk.n - hs);
            } else {
                b64(&app, blk.p, blk.n);
            }
            free(blk.p);
        } else {
            puts_(&f, ">\n");
            if (enc == 0) {
                puts_(&f, a[i].ascii);
            } else {
                buf blk = {0};
                vtk_block(&blk, a[i].data, a[i].bytes, h64, zlib, 40);
                size_t hs = zlib ? (h64 ? 8 : 4) * (3 + (a[i].bytes + 39) / 40) : blk.n;
                b64(&f, blk.p, hs);
                b64(&f, blk.p + hs, blk.n - hs);
                free(blk.p);
            }
            puts_(&f, "\n</DataArray>\n");
        }
        puts_(&f, a[i].close);
    }
    puts_(&f, tail);
    if (enc >= 2) {
        putf(&f, "<AppendedData encoding=\"%s\">\n_", enc == 2 ? "raw" : "base64");
        put(&f, app.p, app.n);
        puts_(&f, "\n</AppendedData>\n");
    }
    puts_(&f, "</VTKFile>\n");
    write_file(path, f.p, f.n);
    free(f.p);
    free(app.p);
}

static char *ascii_text(const double *v, size_t n)
{
    buf b = {0};
    for (size_t i = 0; i < n; i++)
        putf(&b, "%.17g%c", v[i], i % 8 == 7 ? '\n' : ' ');
    put(&b, "", 1);
    return (char *)b.p;
}

static void test_vti(void)
{
    const size_t n[3] = {5, 4, 3}, cnt = 60;
    double *v = values(cnt, 1);
    float *f32 = malloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++)
        f32[i] = (float)v[i];
    char *txt = ascii_text(v, cnt);
    /* Extent starts at (1, 0, 2): the first sample sits one spacing in. */
    const char *head = "<ImageData WholeExtent=\"1 5 0 3 2 4\" Origin=\"10 20 30\" "
                       "Spacing=\"0.5 2 1\">\n<Piece Extent=\"1 5 0 3 2 4\">\n";
    const char *tail = "</Piece>\n</ImageData>\n";
    vtk_arr a[2] = {{"<PointData Scalars=\"density\">\n", "", "type=\"Int32\" Name=\"other\"", f32,
                     cnt * 4, txt},
                    {"", "</PointData>\n", "type=\"Float32\" Name=\"density\"", f32, cnt * 4, txt}};
    double ax[3][3] = {{0.5, 0, 0}, {0, 2, 0}, {0, 0, 1}}, org[3] = {10.5, 20, 32};
    for (int enc = 0; enc < 4; enc++)
        for (int z = 0; z < 2; z++) {
            if (enc == 0 && z) continue;
            char name[64];
            snprintf(name, sizeof name, "enc%d_z%d.vti", enc, z);
            write_vtk_xml(path_in(name), "ImageData", head, tail, a, 2, enc, z, z);
            volume_case(name, path_in(name), PM_SAMPLE_F32, n, ax, org, v, enc != 0);
        }
    /* u8 and a Direction that flips y. */
    unsigned char u8[60];
    double *uv = values(cnt, 0);
    for (size_t i = 0; i < cnt; i++)
        u8[i] = (unsigned char)uv[i];
    vtk_arr b = {"<PointData>\n", "</PointData>\n", "type=\"UInt8\" Name=\"s\"", u8, cnt, ""};
    write_vtk_xml(path_in("dir.vti"), "ImageData",
                  "<ImageData WholeExtent=\"0 4 0 3 0 2\" Origin=\"0 0 0\" Spacing=\"1 1 1\" "
                  "Direction=\"1 0 0 0 -1 0 0 0 1\">\n<Piece Extent=\"0 4 0 3 0 2\">\n",
                  tail, &b, 1, 2, 0, 0);
    double axd[3][3] = {{1, 0, 0}, {0, -1, 0}, {0, 0, 1}}, orgd[3] = {0, 0, 0};
    volume_case("dir.vti", path_in("dir.vti"), PM_SAMPLE_U8, n, axd, orgd, uv, 1);
    /* Refusals: cell data only, LZ4. */
    vtk_arr c = {"<CellData>\n", "</CellData>\n", "type=\"UInt8\" Name=\"s\"", u8, 24, ""};
    write_vtk_xml(path_in("cells.vti"), "ImageData", head, tail, &c, 1, 2, 0, 0);
    expect_fail(path_in("cells.vti"), PM_STATUS_PARSE_ERROR, "cell data", "cell data");
    const char *lz4 =
        "<VTKFile type=\"ImageData\" compressor=\"vtkLZ4DataCompressor\">\n</VTKFile>\n";
    write_file(path_in("lz4.vti"), lz4, strlen(lz4));
    expect_fail(path_in("lz4.vti"), PM_STATUS_UNSUPPORTED, "vtkLZ4DataCompressor", "LZ4");
    free(uv);
    free(txt);
    free(f32);
    free(v);
}

/* ------------------------------------------------------------------------ */
/* Points: .vtu, .bgeo, .csv                                                 */
/* ------------------------------------------------------------------------ */

static void check_points(const char *name, const char *path, const float *xyz, size_t n,
                         int strict_prefixes)
{
    pm_points p;
    pm_status s = pm_points_read(path, PM_POINTS_AUTO, 0, &p);
    PMT_CHECK(s == PM_STATUS_OK, "%s: %s", name, pm_last_error());
    if (s != PM_STATUS_OK) return;
    PMT_CHECK(p.count == n, "%s: %zu points, expected %zu", name, p.count, n);
    if (p.count == n) PMT_CHECK(memcmp(p.xyz, xyz, 12 * n) == 0, "%s: coordinates differ", name);
    pm_points_free(&p);
    prefixes(path, 1, 3, strict_prefixes);
}

static void test_points(void)
{
    enum { N = 33 };
    float xyz[3 * N];
    double dv[3 * N];
    for (size_t i = 0; i < 3 * N; i++)
        dv[i] = xyz[i] = (float)((double)(pmt_rand() % 20001) / 1000.0 - 10.0);
    char *txt = ascii_text(dv, 3 * N);
    /* .vtu: two pieces (20 + 13 points), Float32 or Float64. */
    char head[256];
    double d64[3 * N];
    memcpy(d64, dv, sizeof d64);
    for (int prec = 0; prec < 2; prec++)
        for (int enc = 0; enc < 4; enc++)
            for (int z = 0; z < 2; z++) {
                if (enc == 0 && z) continue;
                const char *attr = prec ? "type=\"Float64\" NumberOfComponents=\"3\""
                                        : "type=\"Float32\" NumberOfComponents=\"3\"";
                size_t es = prec ? 8 : 4;
                const unsigned char *base = prec ? (const void *)d64 : (const void *)xyz;
                char *t1 = ascii_text(dv, 60), *t2 = ascii_text(dv + 60, 3 * N - 60);
                vtk_arr a[2] = {{"<Piece NumberOfPoints=\"20\" NumberOfCells=\"0\">\n<Points>\n",
                                 "</Points>\n</Piece>\n", attr, base, 60 * es, t1},
                                {"<Piece NumberOfPoints=\"13\" NumberOfCells=\"0\">\n<Points>\n",
                                 "</Points>\n</Piece>\n", attr, base + 60 * es, 39 * es, t2}};
                char name[64];
                snprintf(name, sizeof name, "p%d_enc%d_z%d.vtu", prec, enc, z);
                snprintf(head, sizeof head, "<UnstructuredGrid>\n");
                write_vtk_xml(path_in(name), "UnstructuredGrid", head, "</UnstructuredGrid>\n", a,
                              2, enc, z, z);
                check_points(name, path_in(name), xyz, N, 1);
                free(t1);
                free(t2);
            }
    /* .bgeo: V5, one float attribute of 3 and one index attribute. */
    buf b = {0};
    puts_(&b, "BgeoV");
    int32_t hdr[9] = {5, N, 0, 0, 0, 2, 0, 0, 0};
    swap_n(hdr, 9, 4);
    put(&b, hdr, sizeof hdr);
    const unsigned char attr1[] = {0, 1, 'v', 0, 3, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const unsigned char attr2[] = {0, 4, 'n', 'a', 'm', 'e', 0,   1, 0, 0,   0,  4,
                                   0, 0, 0,   2,   0,   1,   'a', 0, 2, 'b', 'c'};
    put(&b, attr1, sizeof attr1);
    put(&b, attr2, sizeof attr2);
    for (size_t i = 0; i < N; i++) {
        float rec[8] = {xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2], 1, 0.5f, 0.25f, 0.125f, 0};
        swap_n(rec, 8, 4);
        put(&b, rec, sizeof rec);
    }
    puts_(&b, "PRIMITIVES AND DETAIL FOLLOW"); /* not read */
    write_file(path_in("pts.bgeo"), b.p, b.n);
    check_points("pts.bgeo", path_in("pts.bgeo"), xyz, N, 0);
    write_gz(path_in("pts.bgeo.gz"), b.p, b.n);
    check_points("pts.bgeo.gz", path_in("pts.bgeo.gz"), xyz, N, 0);
    write_file(path_in("json.bgeo"), "\x7fNSJb", 5);
    pm_points p;
    PMT_CHECK(pm_points_read(path_in("json.bgeo"), PM_POINTS_AUTO, 0, &p) ==
                      PM_STATUS_UNSUPPORTED &&
                  strstr(pm_last_error(), "JSON"),
              "JSON bgeo: %s", pm_last_error());
    /* .csv: a header naming the columns out of order, quoted; none; Points:0. */
    buf c = {0};
    puts_(&c, "# exported\nid,\"Z\",mass,X,Y\n");
    for (size_t i = 0; i < N; i++)
        putf(&c, "%zu,%.9g,1.5,%.9g,%.9g\n", i, (double)xyz[3 * i + 2], (double)xyz[3 * i],
             (double)xyz[3 * i + 1]);
    write_file(path_in("named.csv"), c.p, c.n);
    check_points("named.csv", path_in("named.csv"), xyz, N, 0);
    c.n = 0;
    for (size_t i = 0; i < N; i++)
        putf(&c, "%.9g;%.9g;%.9g;7\r\n", (double)xyz[3 * i], (double)xyz[3 * i + 1],
             (double)xyz[3 * i + 2]);
    write_file(path_in("plain.csv"), c.p, c.n);
    check_points("plain.csv", path_in("plain.csv"), xyz, N, 0);
    c.n = 0;
    puts_(&c, "\"Points:0\",\"Points:1\",\"Points:2\"\n1,2\n");
    write_file(path_in("short.csv"), c.p, c.n);
    PMT_CHECK(pm_points_read(path_in("short.csv"), PM_POINTS_AUTO, 0, &p) ==
                      PM_STATUS_PARSE_ERROR &&
                  strstr(pm_last_error(), "line 2"),
              "short row: %s", pm_last_error());
    free(c.p);
    free(b.p);
    free(txt);
}

/* ------------------------------------------------------------------------ */
/* Writers: .vtp read back, .glb validated                                   */
/* ------------------------------------------------------------------------ */

static uint32_t le32(const unsigned char *p)
{
    return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A number after "key": in the JSON, searching from *from. */
static double json_num(const char *key, const char **from)
{
    const char *p = strstr(*from, key);
    if (!p) return NAN;
    *from = p + strlen(key);
    return strtod(*from, NULL);
}

static void check_glb(const char *path, const pm_mesh *m)
{
    size_t n = 0;
    unsigned char *g = slurp(path, &n);
    PMT_CHECK(n >= 20 && !memcmp(g, "glTF", 4) && le32(g + 4) == 2 && le32(g + 8) == n,
              "%s: header", path);
    uint32_t jn = le32(g + 12);
    PMT_CHECK(le32(g + 16) == 0x4E4F534A && jn % 4 == 0 && 20 + jn <= n, "%s: JSON chunk", path);
    char *j = malloc(jn + 1);
    memcpy(j, g + 20, jn);
    j[jn] = 0;
    size_t bin = 20 + jn;
    int empty = m->num_triangles == 0;
    PMT_CHECK(empty ? bin == n
                    : (bin + 8 <= n && le32(g + bin + 4) == 0x004E4942 &&
                       le32(g + bin) == n - bin - 8 && le32(g + bin) % 4 == 0),
              "%s: BIN chunk", path);
    if (!empty) {
        const char *p = j;
        PMT_CHECK(json_num("\"byteLength\":", &p) == (double)(n - bin - 8), "%s: buffer", path);
        float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
        for (size_t i = 0; i < m->num_vertices; i++)
            for (int a = 0; a < 3; a++) {
                lo[a] = fminf(lo[a], m->positions[3 * i + (size_t)a]);
                hi[a] = fmaxf(hi[a], m->positions[3 * i + (size_t)a]);
            }
        p = strstr(j, "\"min\":[");
        PMT_CHECK(p != NULL, "%s: no min", path);
        for (int a = 0; p && a < 3; a++) {
            char *e;
            double v = strtod(p + (a ? 1 : 7), &e);
            PMT_CHECK((float)v == lo[a], "%s: min[%d] %g != %g", path, a, v, (double)lo[a]);
            p = e;
        }
        p = strstr(j, "\"max\":[");
        for (int a = 0; p && a < 3; a++) {
            char *e;
            double v = strtod(p + (a ? 1 : 7), &e);
            PMT_CHECK((float)v == hi[a], "%s: max[%d] %g != %g", path, a, v, (double)hi[a]);
            p = e;
        }
        PMT_CHECK(!memcmp(g + bin + 8, m->positions, 12 * m->num_vertices), "%s: positions", path);
        size_t off = bin + 8 + 12 * m->num_vertices;
        if (m->normals) {
            PMT_CHECK(!memcmp(g + off, m->normals, 12 * m->num_vertices), "%s: normals", path);
            off += 12 * m->num_vertices;
        }
        PMT_CHECK(!m->indices || !memcmp(g + off, m->indices, 12 * m->num_triangles), "%s: indices",
                  path);
        PMT_CHECK((strstr(j, "\"indices\"") != NULL) == (m->indices != NULL), "%s: indices key",
                  path);
    }
    free(j);
    free(g);
}

static void test_writers(void)
{
    enum { NV = 31, NT = 33 };
    float pos[3 * NV], nrm[3 * NV];
    uint32_t idx[3 * NT];
    for (size_t i = 0; i < 3 * NV; i++) {
        pos[i] = (float)pmt_uniform() * 4 - 2;
        nrm[i] = (float)pmt_uniform();
    }
    for (size_t i = 0; i < 3 * NT; i++)
        idx[i] = (uint32_t)(pmt_rand() % NV);
    pm_mesh m = {0};
    m.positions = pos;
    m.normals = nrm;
    m.indices = idx;
    m.num_vertices = NV;
    m.num_triangles = NT;
    for (int variant = 0; variant < 4; variant++) {
        pm_mesh w = m;
        if (variant & 1) w.normals = NULL;
        pm_write_options o = {sizeof o, PM_MESH_FORMAT_AUTO, variant >> 1};
        char *path = path_in("mesh.vtp");
        PMT_OK(pm_mesh_write(path, &w, &o));
        pm_mesh r;
        pm_status s = pm_mesh_read(path, 0, &r);
        PMT_CHECK(s == PM_STATUS_OK, "vtp variant %d: %s", variant, pm_last_error());
        if (s != PM_STATUS_OK) continue;
        PMT_CHECK(r.num_vertices == NV && r.num_triangles == NT &&
                      !memcmp(r.positions, pos, sizeof pos) && !memcmp(r.indices, idx, sizeof idx),
                  "vtp variant %d: mesh differs", variant);
        PMT_CHECK((r.normals != NULL) == (w.normals != NULL) &&
                      (!r.normals || !memcmp(r.normals, nrm, sizeof nrm)),
                  "vtp variant %d: normals", variant);
        pm_mesh_free(NULL, &r);
        if (variant == 0) prefixes(path, 2, 11, 1);
        PMT_OK(pm_mesh_write(path_in("mesh.glb"), &w, NULL));
        check_glb(path_in("mesh.glb"), &w);
    }
    /* A soup: non-indexed glTF; an empty mesh. */
    pm_mesh soup = {0};
    soup.positions = pos;
    soup.num_vertices = 30;
    soup.num_triangles = 10;
    PMT_OK(pm_mesh_write(path_in("soup.glb"), &soup, NULL));
    check_glb(path_in("soup.glb"), &soup);
    PMT_OK(pm_mesh_write(path_in("soup.vtp"), &soup, NULL));
    pm_mesh r;
    PMT_OK(pm_mesh_read(path_in("soup.vtp"), 0, &r));
    PMT_CHECK(r.num_triangles == 10 && !memcmp(r.positions, pos, 360), "soup.vtp");
    pm_mesh_free(NULL, &r);
    pm_mesh empty = {0};
    PMT_OK(pm_mesh_write(path_in("empty.glb"), &empty, NULL));
    check_glb(path_in("empty.glb"), &empty);
    PMT_OK(pm_mesh_write(path_in("empty.vtp"), &empty, NULL));
    PMT_OK(pm_mesh_read(path_in("empty.vtp"), 0, &r));
    PMT_CHECK(r.num_vertices == 0 && r.num_triangles == 0, "empty.vtp");
    pm_mesh_free(NULL, &r);
}

int main(int argc, char **argv)
{
    if (!pmt_files_start(argc, argv, "pm_io_formats", 1)) return PMT_SKIP;
    test_nifti();
    test_metaimage();
    test_inr();
    test_vti();
    test_points();
    test_writers();
    if (!getenv("PM_KEEP")) remove_tmpdir();
    return pmt_finish("test_io_formats");
}
