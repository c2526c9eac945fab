// DICOM series (a directory of slices of one series) through GDCM
// (Grassroots DICOM, Debian's libgdcm-dev): slices sorted by
// ImagePositionPatient along the slice normal, the slice spacing taken from
// the positions, the rescale slope/intercept applied. Compiled only when
// CMake finds GDCM; dicom_stub.c answers otherwise.
#include <gdcmDirectory.h>
#include <gdcmImage.h>
#include <gdcmImageReader.h>
#include <gdcmScanner.h>
#include <gdcmTag.h>
#include <gdcmTrace.h>

#include <algorithm>
#include <exception>
#include <new>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "io/io.h"
}

namespace
{

struct slice {
    std::string file;
    double pos[3];
    double dist;         // along the slice normal
    double slope, inter; // the rescale to the modality's values
};

const gdcm::Tag tag_ipp(0x0020, 0x0032), tag_iop(0x0020, 0x0037), tag_series(0x0020, 0x000e),
    tag_inter(0x0028, 0x1052), tag_slope(0x0028, 0x1053);

bool parse_doubles(const char *s, double *v, int n)
{
    if (!s) return false;
    for (int i = 0; i < n; i++) {
        char *end;
        v[i] = std::strtod(s, &end);
        if (end == s || !std::isfinite(v[i])) return false;
        s = end;
        while (*s == ' ')
            s++;
        if (i + 1 < n) {
            if (*s != '\\') return false;
            s++;
        }
    }
    return true;
}

bool kind_of(const gdcm::PixelFormat &pf, pmi_kind *k)
{
    switch (pf.GetScalarType()) {
    case gdcm::PixelFormat::UINT8: *k = PMI_U8; return true;
    case gdcm::PixelFormat::INT8: *k = PMI_I8; return true;
    case gdcm::PixelFormat::UINT16: *k = PMI_U16; return true;
    case gdcm::PixelFormat::INT16: *k = PMI_I16; return true;
    case gdcm::PixelFormat::UINT32: *k = PMI_U32; return true;
    case gdcm::PixelFormat::INT32: *k = PMI_I32; return true;
    case gdcm::PixelFormat::FLOAT32: *k = PMI_F32; return true;
    case gdcm::PixelFormat::FLOAT64: *k = PMI_F64; return true;
    default: return false;
    }
}

// The slices of the directory's one series, sorted along the normal.
pm_status collect(const char *path, std::vector<slice> &slices, double iop[6])
{
    gdcm::Directory dir;
    dir.Load(path, false);
    const gdcm::Directory::FilenamesType &files = dir.GetFilenames();
    gdcm::Scanner scanner;
    scanner.AddTag(tag_ipp);
    scanner.AddTag(tag_iop);
    scanner.AddTag(tag_series);
    scanner.AddTag(tag_inter);
    scanner.AddTag(tag_slope);
    if (files.empty() || !scanner.Scan(files))
        return pmi_error(PM_STATUS_IO_ERROR,
                         "%s: is a directory without DICOM files, expected a volume file or "
                         "the slices of one DICOM series",
                         path);
    std::string series;
    bool first = true;
    for (const std::string &f : files) {
        if (!scanner.IsKey(f.c_str())) continue; // not DICOM
        const char *uid = scanner.GetValue(f.c_str(), tag_series);
        const char *ipp = scanner.GetValue(f.c_str(), tag_ipp);
        const char *o = scanner.GetValue(f.c_str(), tag_iop);
        if (!ipp && !o) continue; // DICOMDIR and other non-image objects
        slice s;
        s.file = f;
        s.slope = 1;
        s.inter = 0;
        const char *sl = scanner.GetValue(f.c_str(), tag_slope);
        const char *in = scanner.GetValue(f.c_str(), tag_inter);
        if ((sl && !parse_doubles(sl, &s.slope, 1)) || (in && !parse_doubles(in, &s.inter, 1)))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: RescaleSlope (0028,1053) or RescaleIntercept (0028,1052) is "
                             "not a number",
                             f.c_str());
        double this_iop[6];
        if (!parse_doubles(ipp, s.pos, 3) || !parse_doubles(o, this_iop, 6))
            return pmi_error(PM_STATUS_PARSE_ERROR,
                             "%s: lacks a valid ImagePositionPatient (0020,0032) or "
                             "ImageOrientationPatient (0020,0037), expected 3 and 6 numbers",
                             f.c_str());
        std::string u = uid ? uid : "";
        if (first) {
            series = u;
            std::memcpy(iop, this_iop, sizeof this_iop);
            first = false;
        } else if (u != series) {
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: holds more than one series (SeriesInstanceUID '%s' and '%s'), "
                             "expected the slices of one series",
                             path, series.c_str(), u.c_str());
        } else {
            for (int i = 0; i < 6; i++)
                if (std::fabs(this_iop[i] - iop[i]) > 1e-4)
                    return pmi_error(PM_STATUS_UNSUPPORTED,
                                     "%s: its ImageOrientationPatient differs from the other "
                                     "slices', expected one orientation",
                                     f.c_str());
        }
        slices.push_back(s);
    }
    if (slices.size() < 2)
        return pmi_error(PM_STATUS_PARSE_ERROR,
                         "%s: %zu DICOM image slices found, expected at least 2", path,
                         slices.size());
    double n[3] = {iop[1] * iop[5] - iop[2] * iop[4], iop[2] * iop[3] - iop[0] * iop[5],
                   iop[0] * iop[4] - iop[1] * iop[3]};
    for (slice &s : slices)
        s.dist = s.pos[0] * n[0] + s.pos[1] * n[1] + s.pos[2] * n[2];
    std::sort(slices.begin(), slices.end(),
              [](const slice &a, const slice &b) { return a.dist < b.dist; });
    return PM_STATUS_OK;
}

// The slice spacing, checked to be even along the series.
pm_status slice_spacing(const char *path, const std::vector<slice> &slices, double *dz)
{
    size_t n = slices.size();
    *dz = (slices[n - 1].dist - slices[0].dist) / (double)(n - 1);
    for (size_t i = 0; i + 1 < n; i++) {
        double d = slices[i + 1].dist - slices[i].dist;
        if (!(d > 0) || std::fabs(d - *dz) > 0.01 * *dz)
            return pmi_error(PM_STATUS_UNSUPPORTED,
                             "%s: slices %s and %s are %g apart along the normal, expected an "
                             "even spacing of %g (missing or repeated slices?)",
                             path, slices[i].file.c_str(), slices[i + 1].file.c_str(), d, *dz);
    }
    return PM_STATUS_OK;
}

struct series_reader {
    const char *path;
    size_t max_memory_bytes;
    size_t nx = 0, ny = 0, nz = 0;
    pmi_kind kind = PMI_U8;
    bool scaled = false;
    double spacing[2] = {1, 1};
    void *data = nullptr;
};

// Copies slice k's pixels into the volume (raw, or rescaled to f32).
pm_status read_slice(series_reader &sr, const slice &s, size_t k)
{
    gdcm::ImageReader reader;
    reader.SetFileName(s.file.c_str());
    if (!reader.Read())
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: GDCM cannot read this DICOM image",
                         s.file.c_str());
    const gdcm::Image &img = reader.GetImage();
    const unsigned *dims = img.GetDimensions();
    pmi_kind kind;
    if (img.GetNumberOfDimensions() != 2 && !(img.GetNumberOfDimensions() == 3 && dims[2] == 1))
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: a multi-frame image, expected one slice per file", s.file.c_str());
    if (img.GetPixelFormat().GetSamplesPerPixel() != 1 || !kind_of(img.GetPixelFormat(), &kind))
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: pixel format %s with %u samples per pixel, expected one 8, 16 or "
                         "32-bit integer or float sample",
                         s.file.c_str(), img.GetPixelFormat().GetScalarTypeAsString(),
                         (unsigned)img.GetPixelFormat().GetSamplesPerPixel());
    if (k == 0) {
        sr.nx = dims[0];
        sr.ny = dims[1];
        sr.kind = kind;
        sr.spacing[0] = img.GetSpacing(0);
        sr.spacing[1] = img.GetSpacing(1);
        void *data;
        size_t bytes;
        // Rescaled slices are converted one by one into an f32 volume.
        pm_status st = pmi_volume_alloc_kind(sr.path, "the series", sr.nx, sr.ny, sr.nz,
                                             sr.scaled ? PMI_F32 : kind, 0, sr.max_memory_bytes,
                                             UINT64_MAX, &data, &bytes);
        if (st != PM_STATUS_OK) return st;
        sr.data = data;
    } else if (dims[0] != sr.nx || dims[1] != sr.ny || kind != sr.kind) {
        return pmi_error(PM_STATUS_UNSUPPORTED,
                         "%s: %u x %u %s pixels, expected %zu x %zu %s like the first slice",
                         s.file.c_str(), dims[0], dims[1], pmi_kind_string(kind), sr.nx, sr.ny,
                         pmi_kind_string(sr.kind));
    }
    size_t n = sr.nx * sr.ny, esize = pmi_kind_size(kind);
    if (img.GetBufferLength() != n * esize)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: %lu bytes of pixel data, expected %zu",
                         s.file.c_str(), img.GetBufferLength(), n * esize);
    if (!sr.scaled)
        return img.GetBuffer((char *)sr.data + k * n * esize)
                   ? PM_STATUS_OK
                   : pmi_error(PM_STATUS_PARSE_ERROR, "%s: GDCM cannot decode the pixel data",
                               s.file.c_str());
    std::vector<char> buf(n * esize);
    if (!img.GetBuffer(buf.data()))
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: GDCM cannot decode the pixel data",
                         s.file.c_str());
    void *tmp = malloc(n * esize);
    if (!tmp) return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: cannot allocate", sr.path);
    std::memcpy(tmp, buf.data(), n * esize);
    pm_sample_type t;
    pm_status st = pmi_samples_convert(sr.path, &tmp, n, kind, 1, s.slope, s.inter, &t);
    if (st == PM_STATUS_OK) std::memcpy((float *)sr.data + k * n, tmp, n * sizeof(float));
    free(tmp);
    return st;
}

pm_status read_series(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    std::vector<slice> slices;
    double iop[6], dz;
    pm_status st = collect(path, slices, iop);
    if (st == PM_STATUS_OK) st = slice_spacing(path, slices, &dz);
    if (st != PM_STATUS_OK) return st;
    series_reader sr;
    sr.path = path;
    sr.max_memory_bytes = max_memory_bytes;
    sr.nz = slices.size();
    // f32 samples when any slice's rescale is not the identity (slices
    // may each have their own, as in PET).
    for (const slice &s : slices)
        if (s.slope != 1.0 || s.inter != 0.0) sr.scaled = true;
    for (size_t k = 0; k < slices.size() && st == PM_STATUS_OK; k++)
        st = read_slice(sr, slices[k], k);
    pm_sample_type type = PM_SAMPLE_F32;
    size_t count = sr.nx * sr.ny * sr.nz;
    if (st == PM_STATUS_OK && !sr.scaled)
        st = pmi_samples_convert(path, &sr.data, count, sr.kind, 0, 1, 0, &type);
    if (st != PM_STATUS_OK) {
        free(sr.data);
        return st;
    }
    // Index axes: along a row (IOP's first vector), down a column (its
    // second) and along the sorted slices (the normal).
    double n[3] = {iop[1] * iop[5] - iop[2] * iop[4], iop[2] * iop[3] - iop[0] * iop[5],
                   iop[0] * iop[4] - iop[1] * iop[3]};
    double axes[3][3];
    for (int c = 0; c < 3; c++) {
        axes[0][c] = iop[c] * sr.spacing[0];
        axes[1][c] = iop[3 + c] * sr.spacing[1];
        axes[2][c] = n[c] * dz;
    }
    pm_volume v = {sr.data, type, sr.nx, sr.ny, sr.nz, 0, 0, {1, 1, 1}, {0, 0, 0}};
    st = pmi_volume_orient(path, "ImageOrientationPatient", axes, slices[0].pos, &v);
    if (st != PM_STATUS_OK) {
        free((void *)v.data);
        return st;
    }
    *out = v;
    return PM_STATUS_OK;
}

} // namespace

extern "C" pm_status pmi_dicom_read(const char *path, size_t max_memory_bytes, pm_volume *out)
{
    // The library never prints: GDCM's warnings and errors to stderr are
    // switched off (what matters comes back as a status).
    gdcm::Trace::WarningOff();
    gdcm::Trace::ErrorOff();
    gdcm::Trace::DebugOff();
    try {
        return read_series(path, max_memory_bytes, out);
    } catch (const std::bad_alloc &) {
        return pmi_error(PM_STATUS_OUT_OF_MEMORY, "%s: out of memory reading the series", path);
    } catch (const std::exception &e) {
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: GDCM: %s", path, e.what());
    } catch (...) {
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: GDCM failed reading the series", path);
    }
}
