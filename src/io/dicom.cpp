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

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Debian's GDCM 3.0 keeps its assert()s, and a file that ends inside an
// element (a truncated copy, an interrupted transfer) or has an unknown VR
// reaches one of them: the process aborts (GDCM >= 3.2 throws instead).
// So each file's elements are walked first, headers only: a file goes to
// GDCM only when every element lies inside it. Part 10 files (preamble
// and "DICM") that fail are errors naming the file; other files that fail
// are not DICOM and are skipped, as GDCM would.
class structure_walk
{
  public:
    structure_walk(int fd, uint64_t size) : fd_(fd), size_(size) {}

    // Whether every element lies inside the file, read the way GDCM reads
    // it (if not, bad_at is where the walk stopped); *part10: the file has
    // the preamble and "DICM".
    bool complete(bool *part10)
    {
        unsigned char b[12];
        uint64_t pos = 0;
        *part10 = size_ >= 132 && get(128, b, 4) && std::memcmp(b, "DICM", 4) == 0;
        if (*part10) pos = 132;
        bad_at = pos;
        if (get(pos, b, 2) && u16(b) == 0x0002) {
            // The file meta information (after the preamble, or first in a
            // file without one): explicit VR little endian, group 2.
            std::string ts;
            while (get(pos, b, 8) && u16(b) == 0x0002) {
                bad_at = pos;
                if (!vr_known(b + 4) || (b[4] == 'S' && b[5] == 'Q')) return false;
                uint64_t hl = long_vr(b + 4) ? 12 : 8;
                if (hl == 12 && !get(pos, b, 12)) return false;
                uint32_t len = hl == 12 ? u32(b + 8) : u16(b + 6);
                if (len == undef || len > size_ - pos - hl) return false;
                if (u16(b + 2) == 0x0010 && len < 128) {
                    char v[128];
                    if (!get(pos + hl, (unsigned char *)v, len)) return false;
                    ts.assign(v, len);
                    while (!ts.empty() && (ts.back() == ' ' || ts.back() == '\0'))
                        ts.pop_back();
                }
                pos += hl + len;
            }
            bad_at = pos;
            if (size_ - pos < 8) return false; // GDCM asserts on nothing after the meta
            if (ts == "1.2.840.10008.1.2") explicit_vr_ = false;
            if (ts == "1.2.840.10008.1.2.2") big_ = true;
            if (ts == "1.2.840.10008.1.2.1.99") return true; // deflated: not walked
        } else if (!guess(pos)) {
            return false;
        }
        return dataset(pos, size_, false, 0);
    }
    uint64_t bad_at = 0;

  private:
    static const uint32_t undef = 0xffffffffu;
    int fd_;
    uint64_t size_;
    bool explicit_vr_ = true, big_ = false;

    // How GDCM reads a data set without file meta information
    // (FileMetaInformation::ReadCompat): from its first tag and whether a
    // known VR follows. False when GDCM gives up on it (or reads it as
    // implicit big endian, which it then refuses).
    bool guess(uint64_t pos)
    {
        unsigned char b[6];
        if (!get(pos, b, 6)) return false;
        unsigned g = (unsigned)(b[1] << 8 | b[0]), e = (unsigned)(b[3] << 8 | b[2]);
        bool vr = vr_known(b + 4);
        explicit_vr_ = vr;
        big_ = false;
        if (g == 0x0008 || (g != 0x0800 && e == 0x0010)) return true;
        if (g == 0x0800) return big_ = true, vr;
        if (!vr) return false;
        big_ = g > 0xff || e > 0xff;
        return true;
    }
    bool get(uint64_t at, unsigned char *b, size_t n) const
    {
        return at <= size_ && n <= size_ - at && pread(fd_, b, n, (off_t)at) == (ssize_t)n;
    }
    unsigned u16(const unsigned char *b) const
    {
        return big_ ? (unsigned)(b[0] << 8 | b[1]) : (unsigned)(b[1] << 8 | b[0]);
    }
    uint32_t u32(const unsigned char *b) const
    {
        return big_ ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]
                    : (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
    }
    static bool vr_known(const unsigned char *vr)
    {
        static const char known[] =
            "AEASATCSDADSDTFDFLISLOLTOBODOFOLOVOWPNSHSLSQSSSTSVTMUCUIULUNURUSUTUV";
        for (size_t i = 0; i + 1 < sizeof known; i += 2)
            if (vr[0] == known[i] && vr[1] == known[i + 1]) return true;
        return false;
    }
    static bool long_vr(const unsigned char *vr)
    {
        static const char longs[] = "OBODOFOLOVOWSQSVUCUNURUTUV";
        for (size_t i = 0; i + 1 < sizeof longs; i += 2)
            if (vr[0] == longs[i] && vr[1] == longs[i + 1]) return true;
        return false;
    }

    // The items of a sequence (or the fragments of encapsulated pixel data,
    // whose values are not data sets) up to end, or up to the sequence
    // delimiter when undefined.
    bool items(uint64_t &pos, uint64_t end, bool undefined, bool fragments, int depth)
    {
        unsigned char b[8];
        if (depth > 16) return false;
        while (undefined || pos < end) {
            bad_at = pos;
            if (end - pos < 8 || !get(pos, b, 8)) return false;
            unsigned g = u16(b), e = u16(b + 2);
            uint32_t len = u32(b + 4);
            pos += 8;
            if (g != 0xfffe) return false;
            if (e == 0xe0dd) return undefined;
            if (e != 0xe000) return false;
            if (len == undef) {
                if (fragments || !dataset(pos, end, true, depth + 1)) return false;
            } else {
                if (len > end - pos) return false;
                uint64_t p = pos;
                if (!fragments && !dataset(p, pos + len, false, depth + 1)) return false;
                pos += len;
            }
        }
        return pos == end;
    }

    // The elements of a data set up to end, or up to an item delimiter
    // when undefined.
    bool dataset(uint64_t &pos, uint64_t end, bool undefined, int depth)
    {
        unsigned char b[12];
        if (depth > 16) return false;
        while (undefined || pos < end) {
            uint64_t at = pos;
            bad_at = at;
            if (end - at < 8 || !get(at, b, 8)) return false;
            unsigned g = u16(b), e = u16(b + 2);
            if (g == 0xfffe) { // item delimiter
                pos = at + 8;
                return undefined && e == 0xe00d;
            }
            uint32_t len;
            bool sq = false, un = false;
            if (explicit_vr_) {
                if (!vr_known(b + 4)) return false;
                sq = b[4] == 'S' && b[5] == 'Q';
                un = b[4] == 'U' && b[5] == 'N';
                if (long_vr(b + 4)) {
                    if (end - at < 12 || !get(at, b, 12)) return false;
                    len = u32(b + 8);
                    pos = at + 12;
                } else {
                    len = u16(b + 6);
                    pos = at + 8;
                }
            } else {
                len = u32(b + 4);
                pos = at + 8;
            }
            if (len == undef) {
                // A sequence, encapsulated pixel data, or UN holding an
                // implicit VR sequence (CP-246).
                bool saved = explicit_vr_;
                if (un) explicit_vr_ = false;
                bool ok = items(pos, end, true, g == 0x7fe0 && e == 0x0010, depth + 1);
                explicit_vr_ = saved;
                if (!ok) return false;
            } else {
                if (len > end - pos) return false;
                uint64_t p = pos;
                if (sq && !items(p, pos + len, false, false, depth + 1)) return false;
                pos += len;
            }
        }
        return pos == end;
    }
};

// Whether file f may go to GDCM (*ok), or the error that it is a damaged
// DICOM file. Files that cannot be opened or are not regular files are
// left to GDCM's own judgement (it skips them).
pm_status check_structure(const std::string &f, bool *ok)
{
    *ok = true;
    int fd = open(f.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); // a FIFO must not block
    if (fd < 0) return PM_STATUS_OK;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *ok = false;
        return PM_STATUS_OK;
    }
    structure_walk w(fd, (uint64_t)st.st_size);
    bool part10;
    *ok = w.complete(&part10);
    close(fd);
    if (*ok || !part10) return PM_STATUS_OK;
    return pmi_error(PM_STATUS_PARSE_ERROR,
                     "%s: a damaged DICOM file: the element at byte %llu does not fit in its "
                     "%llu bytes (a truncated file?)",
                     f.c_str(), (unsigned long long)w.bad_at, (unsigned long long)st.st_size);
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
    gdcm::Directory::FilenamesType checked;
    for (const std::string &f : files) {
        bool ok;
        pm_status st = check_structure(f, &ok);
        if (st != PM_STATUS_OK) return st;
        if (ok) checked.push_back(f);
    }
    if (files.empty() || (!checked.empty() && !scanner.Scan(checked)))
        return pmi_error(PM_STATUS_IO_ERROR,
                         "%s: is a directory without DICOM files, expected a volume file or "
                         "the slices of one DICOM series",
                         path);
    std::string series;
    bool first = true;
    for (const std::string &f : checked) {
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
    // Native (unencapsulated) pixel data shorter than the image: GDCM
    // copies what there is and reports success, leaving the rest of the
    // buffer unwritten (or reads past its own copy when it converts), so
    // it is refused here, before a hostile Rows x Columns sizes the volume.
    const gdcm::ByteValue *bv = img.GetDataElement().GetByteValue();
    size_t need = (size_t)dims[0] * dims[1] * pmi_kind_size(kind);
    if (bv && (size_t)bv->GetLength() < need)
        return pmi_error(PM_STATUS_PARSE_ERROR, "%s: %zu bytes of pixel data, expected %zu",
                         s.file.c_str(), (size_t)bv->GetLength(), need);
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
