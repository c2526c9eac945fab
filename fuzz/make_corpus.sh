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
tri = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0.5, 0.5, 1)]
faces = [(0, 1, 2, 3), (0, 1, 4), (1, 2, 4)]
put("fuzz_mesh_ply", "ascii.ply", "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\nproperty float z\nelement face 3\nproperty list uchar int vertex_indices\nend_header\n" + "".join("%g %g %g\n" % p for p in tri) + "".join("%d %s\n" % (len(f), " ".join(map(str, f))) for f in faces))
put("fuzz_mesh_ply", "le.ply", b"ply\nformat binary_little_endian 1.0\nelement vertex 5\nproperty float x\nproperty float y\nproperty float z\nproperty float nx\nproperty float ny\nproperty float nz\nelement face 3\nproperty list uchar int vertex_indices\nend_header\n" + b"".join(struct.pack("<6f", *p, 0, 0, 1) for p in tri) + b"".join(struct.pack("<B%di" % len(f), len(f), *f) for f in faces))
put("fuzz_mesh_ply", "be16.ply", b"ply\nformat binary_big_endian 1.0\nelement vertex 5\nproperty double x\nproperty double y\nproperty double z\nelement face 3\nproperty uchar flag\nproperty list ushort ushort vertex_indices\nend_header\n" + b"".join(struct.pack(">3d", *p) for p in tri) + b"".join(struct.pack(">BH%dH" % len(f), 7, len(f), *f) for f in faces))
put("fuzz_mesh_obj", "quads.obj", "# o\n" + "".join("v %g %g %g\n" % p for p in tri) + "vt 0 0\nvn 0 0 1\nf 1/1/1 2/1/1 3/1/1 4/1/1\nf -5//1 -4//1 -1//1\nf 2 3 5\n")
put("fuzz_mesh_obj", "vn.obj", "".join("v %g %g %g\n" % p for p in tri) + "".join("vn 0 0 1\n" for p in tri) + "f 1//1 2//2 5//5\nf 2//2 3//3 5//5\n")
put("fuzz_mesh_stl", "ascii.stl", "solid s\n" + "".join("facet normal 0 0 1\nouter loop\n" + "".join("vertex %g %g %g\n" % tri[i] for i in f) + "endloop\nendfacet\n" for f in faces) + "endsolid s\n")
put("fuzz_mesh_stl", "binary.stl", b"pyramesh".ljust(80, b"\0") + struct.pack("<I", 2) + b"".join(struct.pack("<12fH", 0, 0, 1, *tri[f[0]], *tri[f[1]], *tri[f[2]], 0) for f in faces[1:]))
put("fuzz_mesh_vtk", "ascii.vtk", "# vtk DataFile Version 3.0\nm\nASCII\nDATASET POLYDATA\nPOINTS 5 float\n" + " ".join("%g %g %g" % p for p in tri) + "\nPOLYGONS 2 9\n4 0 1 2 3\n3 0 1 4\nTRIANGLE_STRIPS 1 5\n4 0 1 4 2\nPOINT_DATA 5\nSCALARS s float 1\nLOOKUP_TABLE default\n1 2 3 4 5\nNORMALS n float\n" + " ".join("0 0 1" for p in tri) + "\n")
put("fuzz_mesh_vtk", "v5.vtk", b"# vtk DataFile Version 5.1\nm\nBINARY\nDATASET POLYDATA\nPOINTS 5 float\n" + b"".join(struct.pack(">3f", *p) for p in tri) + b"\nPOLYGONS 3 7\nOFFSETS vtktypeint64\n" + struct.pack(">3q", 0, 4, 7) + b"\nCONNECTIVITY vtktypeint64\n" + struct.pack(">7q", 0, 1, 2, 3, 0, 1, 4) + b"\n")
# The medical and VTK XML formats (tests/test_io_formats.c checks them in full).
def nii(version, big, datatype, bitpix, data, sform=True):
    e = ">" if big else "<"
    if version == 1:
        h = bytearray(352)
        struct.pack_into(e + "i", h, 0, 348)
        struct.pack_into(e + "8h", h, 40, 3, 5, 4, 3, 1, 1, 1, 1)
        struct.pack_into(e + "hh", h, 70, datatype, bitpix)
        struct.pack_into(e + "8f", h, 76, 1, 0.5, 1, 2, 1, 1, 1, 1)
        struct.pack_into(e + "fff", h, 108, 352, 2, -1)
        struct.pack_into(e + "hh", h, 252, 0, 1 if sform else 0)
        struct.pack_into(e + "12f", h, 280, 0, 0, -2, 1, 1, 0, 0, 2, 0, 3, 0, 3)
        h[344:348] = b"n+1\0"
    else:
        h = bytearray(544)
        struct.pack_into(e + "i", h, 0, 540)
        h[4:12] = b"n+2\0\r\n\x1a\n"
        struct.pack_into(e + "hh", h, 12, datatype, bitpix)
        struct.pack_into(e + "8q", h, 16, 3, 5, 4, 3, 1, 1, 1, 1)
        struct.pack_into(e + "8d", h, 104, -1, 0.5, 1, 2, 1, 1, 1, 1)
        struct.pack_into(e + "q", h, 168, 544)
        struct.pack_into(e + "ii", h, 344, 1, 0)
        struct.pack_into(e + "3d", h, 352, 0, 0, 0.7071067811865476)
    return bytes(h) + data
put("fuzz_volume_nifti", "v1.nii", nii(1, False, 16, 32, raw))
put("fuzz_volume_nifti", "v1_be_i16.nii", nii(1, True, 4, 16, struct.pack(">60h", *range(60))))
put("fuzz_volume_nifti", "v2_qform.nii", nii(2, False, 16, 32, raw, False))
put("fuzz_volume_nifti", "v1.nii.gz", gzip.compress(nii(1, False, 2, 8, bytes(range(60)))))
mha = "ObjectType = Image\nNDims = 3\nDimSize = 5 4 3\nElementSpacing = 1 0.5 2\nOffset = 1 2 3\nTransformMatrix = 0 1 0 1 0 0 0 0 -1\n%sElementType = MET_FLOAT\nElementDataFile = LOCAL\n"
put("fuzz_volume_mha", "raw.mha", (mha % "ElementByteOrderMSB = False\n").encode() + raw)
import zlib
put("fuzz_volume_mha", "zlib.mha", (mha % "CompressedData = True\n").encode() + zlib.compress(raw))
put("fuzz_volume_mha", "ascii.mha", (mha % "BinaryData = False\n") + " ".join("%g" % v for v in vals) + "\n")
def inr(typ, bits, cpu, data):
    h = ("#INRIMAGE-4#{\nXDIM=5\nYDIM=4\nZDIM=3\nVDIM=1\nTYPE=%s\nPIXSIZE=%d bits\nCPU=%s\nVX=1\nVY=0.5\nVZ=2\n" % (typ, bits, cpu)).encode()
    h = h + b"\n" * (252 - len(h)) + b"##}\n"
    return h + data
put("fuzz_volume_inr", "f32.inr", inr("float", 32, "decm", raw))
put("fuzz_volume_inr", "i16be.inr", inr("signed fixed", 16, "sun", struct.pack(">60h", *range(-30, 30))))
put("fuzz_volume_inr", "u8.inr.gz", gzip.compress(inr("unsigned fixed", 8, "pc", bytes(range(60)))))
import base64
def vtk_xml(typ, head, tail, arrays, enc, compress):
    app = b""
    s = '<?xml version="1.0"?>\n<VTKFile type="%s" version="1.0" byte_order="LittleEndian" header_type="UInt32"%s>\n%s' % (typ, ' compressor="vtkZLibDataCompressor"' if compress else "", head)
    for (open_, close, attrs, data, text) in arrays:
        if compress:
            c = zlib.compress(data)
            blk = struct.pack("<4I", 1, len(data), len(data), len(c)) + c
        else:
            blk = struct.pack("<I", len(data)) + data
        if enc == "ascii":
            s += open_ + '<DataArray %s format="ascii">\n%s\n</DataArray>\n' % (attrs, text) + close
        elif enc == "binary":
            s += open_ + '<DataArray %s format="binary">\n%s\n</DataArray>\n' % (attrs, base64.b64encode(blk).decode()) + close
        else:
            s += open_ + '<DataArray %s format="appended" offset="%d"/>\n' % (attrs, len(app)) + close
            app += blk
    s += tail
    out = s.encode()
    if enc == "appended":
        out += b'<AppendedData encoding="raw">\n_' + app + b"\n</AppendedData>\n"
    return out + b"</VTKFile>\n"
vti_head = '<ImageData WholeExtent="0 4 0 3 0 2" Origin="0 0 0" Spacing="1 0.5 2">\n<Piece Extent="0 4 0 3 0 2">\n'
vti_arr = [("<PointData Scalars=\"s\">\n", "</PointData>\n", 'type="Float32" Name="s"', raw, " ".join("%g" % v for v in vals))]
for enc in ["ascii", "binary", "appended"]:
    put("fuzz_volume_vti", enc + ".vti", vtk_xml("ImageData", vti_head, "</Piece>\n</ImageData>\n", vti_arr, enc, False))
put("fuzz_volume_vti", "zlib.vti", vtk_xml("ImageData", vti_head, "</Piece>\n</ImageData>\n", vti_arr, "binary", True))
pts_bytes = b"".join(struct.pack("<fff", *p) for p in pts)
pts_arr = [("<Points>\n", "</Points>\n", 'type="Float32" NumberOfComponents="3"', pts_bytes, " ".join("%g %g %g" % p for p in pts))]
for enc in ["ascii", "binary", "appended"]:
    put("fuzz_points_vtu", enc + ".vtu", vtk_xml("UnstructuredGrid", '<UnstructuredGrid>\n<Piece NumberOfPoints="8" NumberOfCells="0">\n', "</Piece>\n</UnstructuredGrid>\n", pts_arr, enc, enc == "binary"))
bgeo = b"BgeoV" + struct.pack(">9i", 5, 8, 0, 0, 0, 1, 0, 0, 0) + struct.pack(">H1sHi3f", 1, b"v", 3, 5, 0, 0, 0) + b"".join(struct.pack(">7f", *p, 1, 0, 0, 0) for p in pts)
put("fuzz_points_bgeo", "v5.bgeo", bgeo)
put("fuzz_points_bgeo", "v5.bgeo.gz", gzip.compress(bgeo))
put("fuzz_points_csv", "header.csv", "id,x,y,z\n" + "".join("%d,%g,%g,%g\n" % ((i,) + p) for i, p in enumerate(pts)))
put("fuzz_points_csv", "plain.csv", "".join("%g;%g;%g;1\n" % p for p in pts))
mesh_pts = b"".join(struct.pack("<3f", *p) for p in tri)
conn = struct.pack("<10i", 0, 1, 2, 0, 2, 3, 0, 1, 4, 2)
offs = struct.pack("<3i", 3, 6, 9)
vtp = [("<Points>\n", "</Points>\n", 'type="Float32" NumberOfComponents="3"', mesh_pts, " ".join("%g %g %g" % p for p in tri)),
       ("<Polys>\n", "", 'type="Int32" Name="connectivity"', conn[:36], "0 1 2 0 2 3 0 1 4"),
       ("", "</Polys>\n", 'type="Int32" Name="offsets"', offs, "3 6 9")]
for enc in ["ascii", "binary", "appended"]:
    put("fuzz_mesh_vtp", enc + ".vtp", vtk_xml("PolyData", '<PolyData>\n<Piece NumberOfPoints="5" NumberOfPolys="3">\n', "</Piece>\n</PolyData>\n", vtp, enc, enc == "binary"))
PY
# DICOM slices come from the C writer the tests use (tests/dicom_writer.h):
# fuzz_volume_dicom.c built as a small program that writes its seeds.
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR/fuzz_volume_dicom"
SEEDER=$(mktemp "${TMPDIR:-/tmp}/pm_dicom_seeds_XXXXXX") || exit 1
if ${CC:-cc} -std=c11 -O1 -DPM_FUZZ_DICOM_SEEDS -I"$HERE/../include" \
     "$HERE/fuzz_volume_dicom.c" -o "$SEEDER" && "$SEEDER" "$DIR/fuzz_volume_dicom"; then
  rm -f "$SEEDER"
else
  rm -f "$SEEDER"; echo "make_corpus.sh: cannot write the DICOM seeds" >&2; exit 1
fi
