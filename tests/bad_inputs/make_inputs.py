#!/usr/bin/env python3
"""Writes the hostile inputs of the bad-inputs suite into DIR, one file per
case, and a manifest DIR/cases.tsv: name, subcommand, expected words in the
error message. Every case must make pyramesh exit 1 with one clear message
naming the file, and create no output."""
import gzip, os, struct, sys

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
cases = []

def case(name, data, cmd, expect=""):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    cases.append((name, cmd, expect))

vals = [((x * 7 + y * 3 + z * 5) % 11) / 10.0 for z in range(4) for y in range(4) for x in range(4)]
raw = struct.pack("<64f", *vals)
def nrrd(sizes="4 4 4", typ="float", enc="raw", extra=""):
    return ("NRRD0004\ntype: %s\ndimension: 3\nsizes: %s\nendian: little\nencoding: %s\n%s\n"
            % (typ, sizes, enc, extra)).encode()
good_nrrd = nrrd() + raw
# Truncated at many offsets: inside the header and inside the data.
for cut in [0, 1, 4, 9, 20, 40, len(nrrd()) - 1, len(nrrd()) + 1, len(good_nrrd) // 2, len(good_nrrd) - 1]:
    case("nrrd_trunc_%d.nrrd" % cut, good_nrrd[:cut], "isosurface")
case("nrrd_negative_dims.nrrd", nrrd("4 -4 4") + raw, "isosurface", "sizes")
case("nrrd_zero_dims.nrrd", nrrd("4 0 4") + raw, "isosurface", "sizes")
case("nrrd_huge_dims.nrrd", nrrd("100000000 100000000 100000000") + raw, "isosurface")
case("nrrd_overflow_dims.nrrd", nrrd("18446744073709551615 2 2") + raw, "isosurface")
case("nrrd_flat.nrrd", nrrd("4 4 1") + raw[:64], "isosurface")
case("nrrd_unknown_type.nrrd", nrrd(typ="complex128") + raw, "isosurface", "type")
case("nrrd_unknown_encoding.nrrd", nrrd(enc="bzip3") + raw, "isosurface", "encoding")
case("nrrd_gzip_truncated.nrrd", nrrd(enc="gzip") + gzip.compress(raw)[:40], "isosurface")
case("nrrd_gzip_garbage.nrrd", nrrd(enc="gzip") + b"\x1f\x8b" + bytes(range(200)), "isosurface")
case("nrrd_gzip_too_long.nrrd", nrrd(enc="gzip") + gzip.compress(raw * 50), "isosurface")
case("nrrd_no_magic.nrrd", b"NOTNRRD\n" + raw, "isosurface")
vtk = ("# vtk DataFile Version 3.0\nv\nBINARY\nDATASET STRUCTURED_POINTS\nDIMENSIONS %s\n"
       "SPACING 1 1 1\nORIGIN 0 0 0\nPOINT_DATA %d\nSCALARS v float 1\nLOOKUP_TABLE default\n")
good_vtk = (vtk % ("4 4 4", 64)).encode() + struct.pack(">64f", *vals)
for cut in [5, 30, 90, len(good_vtk) - 100, len(good_vtk) - 1]:
    case("vtk_trunc_%d.vtk" % cut, good_vtk[:cut], "isosurface")
case("vtk_wrong_count.vtk", (vtk % ("4 4 4", 65)).encode() + struct.pack(">64f", *vals), "isosurface")
case("vtk_negative_dims.vtk", (vtk % ("4 -4 4", 64)).encode() + struct.pack(">64f", *vals), "isosurface")
case("vtk_unknown_type.vtk", (vtk % ("4 4 4", 64)).replace("float", "quaternion").encode() + raw, "isosurface")
case("empty.nrrd", b"", "isosurface")
case("empty.vtk", b"", "isosurface")

pts = [(0.1 * i, 0.2 * i, -0.05 * i) for i in range(20)]
def ply_bin(n, body):
    return ("ply\nformat binary_little_endian 1.0\nelement vertex %d\nproperty float x\n"
            "property float y\nproperty float z\nend_header\n" % n).encode() + body
good_ply = ply_bin(20, b"".join(struct.pack("<fff", *p) for p in pts))
for cut in [0, 3, 30, 80, len(good_ply) - 13, len(good_ply) - 1]:
    case("ply_trunc_%d.ply" % cut, good_ply[:cut], "reconstruct")
case("ply_count_too_big.ply", ply_bin(10**12, b"".join(struct.pack("<fff", *p) for p in pts)), "reconstruct")
case("ply_negative_count.ply", ply_bin(-5, b""), "reconstruct")
case("ply_nan.ply", ply_bin(3, struct.pack("<fff", 0, 0, 0) + struct.pack("<fff", float("nan"), 0, 0) + struct.pack("<fff", 1, 1, 1)), "reconstruct", "1")
case("ply_inf.ply", ply_bin(2, struct.pack("<fff", 0, 0, 0) + struct.pack("<fff", 0, float("inf"), 0)), "reconstruct", "1")
case("ply_ascii_junk.ply", "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\nend_header\n0 0 0\n1 abc 1\n", "reconstruct")
case("ply_unknown_format.ply", "ply\nformat binary_middle_endian 1.0\nelement vertex 1\nproperty float x\nend_header\n", "reconstruct")
case("ply_no_xyz.ply", "ply\nformat ascii 1.0\nelement vertex 1\nproperty float a\nend_header\n1\n", "reconstruct")
case("xyz_nan.xyz", "0 0 0\n1 1 1\nnan 0 0\n", "reconstruct", "2")
case("xyz_inf.xyz", "0 0 0\ninf 0 0\n", "reconstruct", "1")
case("xyz_junk_line.xyz", "0 0 0\n1 1 1\n2 two 2\n", "reconstruct", "3")
case("xyz_two_columns.xyz", "0 0\n1 1\n", "reconstruct")
case("xyz_binary_bad_size.xyz", b"\x00\x01\x02\xff" * 4 + b"\x00", "reconstruct")
case("empty.xyz", b"", "reconstruct")
case("empty.ply", b"", "reconstruct")
vtkp = "# vtk DataFile Version 2.0\np\nBINARY\nDATASET POLYDATA\nPOINTS %d float\n"
case("vtk_points_trunc.vtk", (vtkp % 20).encode() + b"".join(struct.pack(">fff", *p) for p in pts)[:100], "reconstruct")
case("vtk_points_huge.vtk", (vtkp % 4000000000).encode() + b"\0" * 24, "reconstruct")
case("vtk_points_nan.vtk", (vtkp % 2).encode() + struct.pack(">fff", 0, 0, 0) + struct.pack(">fff", 0, 0, float("nan")), "reconstruct", "1")

# The medical and VTK XML formats: truncations, hostile headers, refusals.
import zlib
def nii1(dims=(3, 4, 4, 4, 1, 1, 1, 1), datatype=16, bitpix=32, vox=352.0, magic=b"n+1\0", sform=None):
    h = bytearray(352)
    struct.pack_into("<i", h, 0, 348)
    struct.pack_into("<8h", h, 40, *dims)
    struct.pack_into("<hh", h, 70, datatype, bitpix)
    struct.pack_into("<8f", h, 76, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into("<f", h, 108, vox)
    if sform:
        struct.pack_into("<h", h, 254, 1)
        struct.pack_into("<12f", h, 280, *sform)
    h[344:348] = magic
    return bytes(h)
good_nii = nii1() + raw
for cut in [0, 3, 100, 347, 351, len(good_nii) - 1]:
    case("nii_trunc_%d.nii" % cut, good_nii[:cut], "isosurface")
case("nii_gz_trunc.nii.gz", gzip.compress(good_nii)[:-6], "isosurface", "gzip")
case("nii_huge_dims.nii", nii1(dims=(3, 32767, 32767, 32767, 1, 1, 1, 1)) + raw, "isosurface")
case("nii_negative_dims.nii", nii1(dims=(3, 4, -4, 4, 1, 1, 1, 1)) + raw, "isosurface", "dim[2]")
case("nii_time_series.nii", nii1(dims=(4, 4, 4, 2, 2, 1, 1, 1)) + raw, "isosurface", "dim[4]")
case("nii_complex.nii", nii1(datatype=32, bitpix=64) + raw, "isosurface", "datatype 32")
case("nii_bad_vox_offset.nii", nii1(vox=-5.0) + raw, "isosurface", "vox_offset")
case("nii_bad_magic.nii", nii1(magic=b"xyz\0") + raw, "isosurface", "magic")
case("nii_oblique.nii", nii1(sform=(0.8, 0.6, 0, 0, -0.6, 0.8, 0, 0, 0, 0, 1, 0)) + raw, "isosurface", "oblique")
mha = "ObjectType = Image\nNDims = 3\nDimSize = %s\nElementType = %s\n%sElementDataFile = %s\n"
case("mha_trunc.mha", (mha % ("4 4 4", "MET_FLOAT", "", "LOCAL")).encode() + raw[:100], "isosurface")
case("mha_huge.mha", (mha % ("100000 100000 100000", "MET_FLOAT", "", "LOCAL")).encode() + raw, "isosurface")
case("mha_type.mha", (mha % ("4 4 4", "MET_QUATERNION", "", "LOCAL")).encode() + raw, "isosurface", "ElementType")
case("mha_no_data_line.mha", "ObjectType = Image\nNDims = 3\nDimSize = 4 4 4\n", "isosurface", "ElementDataFile")
case("mha_missing_file.mhd", mha % ("4 4 4", "MET_FLOAT", "", "nowhere.raw"), "isosurface", "ElementDataFile")
case("mha_zlib_garbage.mha", (mha % ("4 4 4", "MET_FLOAT", "CompressedData = True\n", "LOCAL")).encode() + b"\x78\x9c" + bytes(range(100)), "isosurface")
case("mha_zlib_bomb.mha", (mha % ("4 4 4", "MET_FLOAT", "CompressedData = True\n", "LOCAL")).encode() + zlib.compress(raw * 100), "isosurface")
case("mha_oblique.mha", (mha % ("4 4 4", "MET_FLOAT", "TransformMatrix = 0.8 0.6 0 -0.6 0.8 0 0 0 1\n", "LOCAL")).encode() + raw, "isosurface", "oblique")
def inr(fields, data=b""):
    h = ("#INRIMAGE-4#{\n" + fields).encode()
    return h + b"\n" * (252 - len(h)) + b"##}\n" + data
inr_ok = "XDIM=4\nYDIM=4\nZDIM=4\nVDIM=1\nTYPE=float\nPIXSIZE=32 bits\nCPU=decm\n"
case("inr_trunc.inr", inr(inr_ok, raw[:200]), "isosurface")
case("inr_no_end.inr", b"#INRIMAGE-4#{\n" + b"XDIM=4\n" * 3000, "isosurface", "##}")
case("inr_huge.inr", inr(inr_ok.replace("XDIM=4", "XDIM=99999999999"), raw), "isosurface")
case("inr_vector.inr", inr(inr_ok.replace("VDIM=1", "VDIM=3"), raw * 3), "isosurface", "VDIM")
case("inr_gz_trunc.inr.gz", gzip.compress(inr(inr_ok, raw))[:-10], "isosurface")
def vti(body, tail=b"</VTKFile>\n"):
    return ('<?xml version="1.0"?>\n<VTKFile type="ImageData" byte_order="LittleEndian">\n<ImageData WholeExtent="0 3 0 3 0 3" Origin="0 0 0" Spacing="1 1 1">\n<Piece Extent="0 3 0 3 0 3">\n<PointData>\n%s\n</PointData>\n</Piece>\n</ImageData>\n' % body).encode() + tail
case("vti_trunc.vti", vti('<DataArray type="Float32" Name="s" format="ascii">1 2 3</DataArray>', b""), "isosurface", "VTKFile")
case("vti_short_ascii.vti", vti('<DataArray type="Float32" Name="s" format="ascii">1 2 3</DataArray>'), "isosurface", "ASCII")
case("vti_bad_base64.vti", vti('<DataArray type="Float32" Name="s" format="binary">QUJD$$$$</DataArray>'), "isosurface")
case("vti_bad_offset.vti", vti('<DataArray type="Float32" Name="s" format="appended" offset="99999"/>').replace(b"</VTKFile>", b'<AppendedData encoding="raw">\n_AAAA\n</AppendedData>\n</VTKFile>'), "isosurface", "offset")
case("vti_lz4.vti", vti('<DataArray type="Float32" Name="s" format="binary">AAAA</DataArray>').replace(b'byte_order', b'compressor="vtkLZ4DataCompressor" byte_order'), "isosurface", "vtkLZ4DataCompressor")
vtu = '<?xml version="1.0"?>\n<VTKFile type="UnstructuredGrid" byte_order="LittleEndian">\n<UnstructuredGrid>\n<Piece NumberOfPoints="%s" NumberOfCells="0">\n<Points>\n<DataArray type="Float32" NumberOfComponents="3" format="ascii">%s</DataArray>\n</Points>\n</Piece>\n</UnstructuredGrid>\n</VTKFile>\n'
case("vtu_count.vtu", vtu % ("1000000000000", "0 0 0"), "reconstruct")
case("vtu_nan.vtu", vtu % ("2", "0 0 0 nan 1 1"), "reconstruct", "1")
case("vtu_junk.vtu", vtu % ("2", "0 0 0 1 x 1"), "reconstruct")
bgeo_h = b"BgeoV" + struct.pack(">9i", 5, 20, 0, 0, 0, 0, 0, 0, 0)
case("bgeo_trunc.bgeo", bgeo_h + b"\0" * 100, "reconstruct")
case("bgeo_huge.bgeo", b"BgeoV" + struct.pack(">9i", 5, 2000000000, 0, 0, 0, 0, 0, 0, 0), "reconstruct")
case("bgeo_negative.bgeo", b"BgeoV" + struct.pack(">9i", 5, -1, 0, 0, 0, 0, 0, 0, 0), "reconstruct")
case("bgeo_json.bgeo", b"\x7fNSJb" + b"\0" * 32, "reconstruct", "JSON")
case("bgeo_version.bgeo", b"BgeoV" + struct.pack(">9i", 4, 1, 0, 0, 0, 0, 0, 0, 0), "reconstruct", "version")
case("bgeo_attr_type.bgeo", b"BgeoV" + struct.pack(">9i", 5, 1, 0, 0, 0, 1, 0, 0, 0) + struct.pack(">H1sHi", 1, b"v", 1, 9), "reconstruct", "type 9")
case("csv_junk.csv", "x,y,z\n0,0,0\n1,one,1\n", "reconstruct", "line 3")
case("csv_two_columns.csv", "1,2\n3,4\n", "reconstruct", "3")
case("csv_nan.csv", "0,0,0\nnan,1,1\n", "reconstruct", "1")

# DICOM series: each case is a directory of slices (dicom_series.py writes
# them); the message must name the directory, and the file at fault where
# the expected words say so. Without GDCM run.sh expects "GDCM" instead.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dicom_series as dcm
def dcase(name, slices, expect=""):
    dcm.write_series(os.path.join(d, name), slices)
    cases.append((name, "isosurface", expect))
dcase("dcm_empty", {}, "without DICOM files")
dcase("dcm_not_dicom", {"a.txt": b"slices\n", "b.nrrd": good_nrrd}, "0 DICOM image slices")
dcase("dcm_one_slice", dcm.axial(1), "at least 2")
dcase("dcm_one_row", dcm.axial(3, rows=1), "at least 2")
dcase("dcm_sizes", dict(dcm.axial(4), **{"s2.dcm": dcm.slice_bytes(4, 6, z=5)}), "dcm_sizes/s2.dcm: 6 x 4")
dcase("dcm_types", dict(dcm.axial(4), **{"s2.dcm": dcm.slice_bytes(4, 5, z=5, bits=8)}), "dcm_types/s2.dcm: 5 x 4 u8")
dcase("dcm_gap", {k: v for k, v in dcm.axial(5).items() if k != "s2.dcm"}, "missing or repeated")
dcase("dcm_repeated", dict(dcm.axial(4), **{"again.dcm": dcm.slice_bytes(4, 5, z=2.5)}), "missing or repeated")
dcase("dcm_two_series", dict(dcm.axial(3), **{"t%d.dcm" % k: v for k, v in enumerate(dcm.axial(3, series="1.2.3.99").values())}), "more than one series")
dcase("dcm_orientation", dict(dcm.axial(3), **{"s1.dcm": dcm.slice_bytes(4, 5, z=2.5, iop=(1, 0.5, 0, 0, 1, 0))}), "dcm_orientation/s1.dcm: its ImageOrientationPatient differs")
dcase("dcm_oblique", dcm.axial(3, iop=(0.8, 0.6, 0, -0.6, 0.8, 0)), "oblique")
dcase("dcm_bad_position", dict(dcm.axial(3), **{"s1.dcm": dcm.slice_bytes(4, 5, ipp="0\\zero\\2.5")}), "dcm_bad_position/s1.dcm: lacks a valid ImagePositionPatient")
dcase("dcm_bad_slope", dict(dcm.axial(3), **{"s1.dcm": dcm.slice_bytes(4, 5, z=2.5, rescale=("one", 0))}), "dcm_bad_slope/s1.dcm: RescaleSlope")
dcase("dcm_rgb", dcm.axial(3, bits=8, spp=3), "3 samples per pixel")
dcase("dcm_multiframe", dcm.axial(3, frames=2), "multi-frame")
dcase("dcm_short_pixels", dict(dcm.axial(3), **{"s1.dcm": dcm.slice_bytes(4, 5, z=2.5, pixel_bytes=20)}), "dcm_short_pixels/s1.dcm: 20 bytes of pixel data")
dcase("dcm_huge_dims", dcm.axial(3, rows=65535, cols=65535, pixel_bytes=40), "bytes of pixel data")
# Truncated slices: in the meta header, in the image elements, in the
# pixel data (each the middle slice of five).
for cut in (140, 300, 600, -10):
    s = dcm.axial(5)
    s["s2.dcm"] = s["s2.dcm"][:cut]
    dcase("dcm_trunc_%d" % cut if cut > 0 else "dcm_trunc_pixels", s, "")

with open(os.path.join(d, "cases.tsv"), "w") as f:
    for c in cases:
        f.write("\t".join(c) + "\n")
print(len(cases), "cases")
