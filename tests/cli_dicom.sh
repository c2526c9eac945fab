#!/bin/bash
# `pyramesh isosurface DIR` on a DICOM series end to end: a sphere phantom
# in CT numbers (i16 stored, rescale intercept -1024, 0.7 x 0.8 x 2.5 mm,
# origin (10,-20,100), files named out of order) written by
# tests/bad_inputs/dicom_series.py. The mesh must be byte for byte the one
# from the same samples given as an f32 NRRD with that spacing and origin,
# closed, around the sphere's centre, enclosing 4/3 pi r^3 within 2%.
# Skips (77) when pyramesh was built without GDCM.
# Usage: cli_dicom.sh PYRAMESH WORKDIR.
set -u
PM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W"
cd "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

python3 - "$HERE/bad_inputs" <<'PY' || { echo "cannot write the phantom"; exit 1; }
import math, struct, sys
sys.path.insert(0, sys.argv[1])
import dicom_series as dcm
nx, ny, nz, r = 48, 44, 16, 12.0
sp, org = (0.7, 0.8, 2.5), (10.0, -20.0, 100.0)
c = [org[a] + 0.5 * ((nx, ny, nz)[a] - 1) * sp[a] for a in range(3)]
hu = []
slices = {}
for k in range(nz):
    s = []
    for j in range(ny):
        for i in range(nx):
            p = (org[0] + i * sp[0] - c[0], org[1] + j * sp[1] - c[1], org[2] + k * sp[2] - c[2])
            h = max(-1024.0, float(round(100 * (r - math.sqrt(sum(x * x for x in p))))))
            s.append(int(h) + 1024)
            hu.append(h)
    name = "IM%04d" % ((k * 7) % nz)
    slices[name] = dcm.slice_bytes(ny, nx, ipp=(org[0], org[1], org[2] + k * sp[2]),
                                   pixels=struct.pack("<%dh" % len(s), *s), signed=True,
                                   spacing=(sp[1], sp[0]), rescale=(1, -1024), instance=k + 1)
dcm.write_series("ct", slices)
hdr = ("NRRD0004\ntype: float\ndimension: 3\nsizes: %d %d %d\nspacings: %g %g %g\n"
       "space origin: (%g,%g,%g)\nendian: little\nencoding: raw\n\n"
       % (nx, ny, nz, sp[0], sp[1], sp[2], org[0], org[1], org[2]))
open("ct.nrrd", "wb").write(hdr.encode() + struct.pack("<%df" % len(hu), *hu))
open("centre", "w").write("%.17g %.17g %.17g %g\n" % (c[0], c[1], c[2], r))
PY

"$PM" isosurface ct -o ct.ply --iso 0 --device cpu --stats ct.json >stdout 2>stderr
rc=$?
if [ $rc -ne 0 ] && grep -q "need GDCM" stderr; then
  echo "skipped: pyramesh was built without GDCM"; exit 77
fi
[ $rc -eq 0 ] || { bad "isosurface on the series exited $rc: $(cat stderr)"; exit 1; }
grep -q "48 x 44 x 16" stdout || bad "summary lacks the series' dims 48 x 44 x 16: $(cat stdout)"
"$PM" isosurface ct.nrrd -o ref.ply --iso 0 --device cpu --stats ref.json >stdout 2>stderr ||
  { bad "isosurface on the NRRD failed: $(cat stderr)"; exit 1; }
cmp -s ct.ply ref.ply || bad "the mesh from the series differs from the one from the NRRD"
python3 - <<'PY' || fail=1
import json, math, struct
a, b = json.load(open("ct.json")), json.load(open("ref.json"))
assert a["triangles"] == b["triangles"] > 1000, (a["triangles"], b["triangles"])
cx, cy, cz, r = map(float, open("centre").read().split())
data = open("ct.ply", "rb").read()
head, body = data.split(b"end_header\n", 1)
nv = int(head.split(b"element vertex ")[1].split()[0])
nf = int(head.split(b"element face ")[1].split()[0])
stride = 24 if b"property float nx" in head else 12
v = [struct.unpack_from("<3f", body, i * stride) for i in range(nv)]
vol, off = 0.0, nv * stride
for f in range(nf):
    n, i, j, k = struct.unpack_from("<B3i", body, off + f * 13)
    p, q, s = v[i], v[j], v[k]
    vol += (p[0] * (q[1] * s[2] - q[2] * s[1]) - p[1] * (q[0] * s[2] - q[2] * s[0])
            + p[2] * (q[0] * s[1] - q[1] * s[0])) / 6
want = 4 / 3 * math.pi * r ** 3
assert abs(vol - want) < 0.02 * want, "volume %g, want %g" % (vol, want)
for axis, centre, step in ((0, cx, 0.7), (1, cy, 0.8), (2, cz, 2.5)):
    lo, hi = min(p[axis] for p in v), max(p[axis] for p in v)
    assert abs((lo + hi) / 2 - centre) < 0.05, "axis %d: [%g, %g], centre %g" % (axis, lo, hi, centre)
    assert abs(hi - lo - 2 * r) < 0.6 * step, "axis %d: extent %g, want %g" % (axis, hi - lo, 2 * r)
print("cli_dicom: %d triangles, volume %.1f (4/3 pi r^3 = %.1f)" % (nf, vol, want))
PY
[ $fail -eq 0 ] && echo "cli_dicom: all passed"
exit $fail
