#!/bin/sh
# Writes a seed corpus of small valid files for every fuzz target into
# DIR/<target>/ (python3 generates them; no files are checked in).
DIR=${1:-build-fuzz/seeds}
mkdir -p "$DIR"
python3 - "$DIR" <<'PY'
import gzip, os, struct, sys
d = sys.argv[1]
def put(target, name, data):
    os.makedirs(os.path.join(d, target), exist_ok=True)
    with open(os.path.join(d, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
vals = [((x * 7 + y * 3 + z * 5) % 11) / 10.0 for z in range(3) for y in range(4) for x in range(5)]
raw = struct.pack("<60f", *vals)
hdr = "NRRD0004\n# comment\ntype: float\ndimension: 3\nsizes: 5 4 3\nspacings: 1 0.5 2\nspace origin: (0,0,0)\nendian: little\nencoding: %s\n\n"
put("fuzz_volume_nrrd", "raw.nrrd", (hdr % "raw").encode() + raw)
put("fuzz_volume_nrrd", "gz.nrrd", (hdr % "gzip").encode() + gzip.compress(raw))
put("fuzz_volume_nrrd", "u8.nrrd", "NRRD0004\ntype: uchar\ndimension: 3\nsizes: 3 3 3\nencoding: raw\n\n".encode() + bytes(range(27)))
put("fuzz_volume_nrrd", "dirs.nrrd", ("NRRD0005\ntype: short\ndimension: 3\nspace: left-posterior-superior\nsizes: 2 2 2\nspace directions: (1,0,0) (0,1,0) (0,0,2)\nendian: big\nencoding: raw\n\n").encode() + struct.pack(">8h", *range(-4, 4)))
vtk = "# vtk DataFile Version 3.0\nfield\n%s\nDATASET STRUCTURED_POINTS\nDIMENSIONS 5 4 3\nSPACING 1 1 1\nORIGIN 0 0 0\nPOINT_DATA 60\nSCALARS v float 1\nLOOKUP_TABLE default\n"
put("fuzz_volume_vtk", "ascii.vtk", (vtk % "ASCII") + " ".join("%g" % v for v in vals) + "\n")
put("fuzz_volume_vtk", "binary.vtk", (vtk % "BINARY").encode() + struct.pack(">60f", *vals) + b"\n")
pts = [(0.1 * i, 0.2 * i, -0.05 * i) for i in range(8)]
put("fuzz_points_ply", "ascii.ply", "ply\nformat ascii 1.0\nelement vertex 8\nproperty float x\nproperty float y\nproperty float z\nproperty uchar red\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n" + "".join("%g %g %g 5\n" % p for p in pts) + "3 0 1 2\n")
put("fuzz_points_ply", "le.ply", b"ply\nformat binary_little_endian 1.0\nelement vertex 8\nproperty double z\nproperty float x\nproperty float y\nend_header\n" + b"".join(struct.pack("<dff", p[2], p[0], p[1]) for p in pts))
put("fuzz_points_ply", "be.ply", b"ply\nformat binary_big_endian 1.0\nelement vertex 8\nproperty float x\nproperty float y\nproperty float z\nend_header\n" + b"".join(struct.pack(">fff", *p) for p in pts))
put("fuzz_points_xyz", "text.xyz", "# points\n" + "".join("%g, %g, %g, 1\n" % p for p in pts))
put("fuzz_points_xyz", "binary.xyz", b"".join(struct.pack("<fff", *p) for p in pts))
put("fuzz_points_vtk", "poly_ascii.vtk", "# vtk DataFile Version 2.0\npts\nASCII\nDATASET POLYDATA\nPOINTS 8 float\n" + " ".join("%g %g %g" % p for p in pts) + "\nVERTICES 1 9\n8 0 1 2 3 4 5 6 7\n")
put("fuzz_points_vtk", "ug_binary.vtk", b"# vtk DataFile Version 4.2\npts\nBINARY\nDATASET UNSTRUCTURED_GRID\nPOINTS 8 double\n" + b"".join(struct.pack(">ddd", *p) for p in pts) + b"\nCELLS 0 0\nCELL_TYPES 0\n")
opts = struct.pack("<HHIBBHBB2x", 5, 4, 3, 3, 0, 0, 16, 0)
put("fuzz_volume_raw", "f32.bin", opts + raw)
put("fuzz_volume_raw", "u16be.bin", struct.pack("<HHIBBHBB2x", 3, 3, 3, 1, 1, 4, 0, 0) + b"\0" * 4 + struct.pack(">27H", *range(27)))
PY
