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

with open(os.path.join(d, "cases.tsv"), "w") as f:
    for c in cases:
        f.write("\t".join(c) + "\n")
print(len(cases), "cases")
