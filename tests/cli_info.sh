#!/bin/bash
# `pyramesh info` on generated files: a raw u16 big-endian volume (dims,
# type, spacing, exact value range), an NRRD volume, an XYZ point set
# (count and bounds), and the errors for unknown or missing files.
# Usage: cli_info.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

python3 - "$W" <<'PY' || { echo "python3 failed"; exit 1; }
import struct, sys
w = sys.argv[1]
# 5 x 4 x 3 u16 big-endian after a 16-byte header; values 3 .. 1234.
v = [3 + (i * 37) % 1000 for i in range(60)]
v[17] = 1234
open(w + "/vol.raw", "wb").write(b"H" * 16 + struct.pack(">60H", *v))
# The same as a float NRRD with spacings.
hdr = b"NRRD0004\ntype: float\ndimension: 3\nsizes: 5 4 3\nspacings: 0.5 0.25 2\nendian: little\nencoding: raw\n\n"
open(w + "/vol.nrrd", "wb").write(hdr + struct.pack("<60f", *[x / 2.0 for x in v]))
open(w + "/pts.xyz", "w").write("# x y z\n0 0 0\n1 2 3\n-1.5 0.5 2\n0.25 -4 1\n")
PY

"$PM" info "$W/vol.raw" --raw-dims 5,4,3 --raw-type u16 --raw-endian big --raw-offset 16 \
  --raw-spacing 1,2,3 >"$W/stdout" 2>"$W/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "info on a raw volume exited $rc: $(cat "$W/stderr")"; }
grep -q "5 x 4 x 3 (60 samples, 24 cells)" "$W/stdout" || bad "raw dims: $(cat "$W/stdout")"
grep -q "type *u16" "$W/stdout" || bad "raw type"
grep -q "spacing *1 x 2 x 3" "$W/stdout" || bad "raw spacing"
grep -q "value range *3 \.\. 1234$" "$W/stdout" || bad "raw value range: $(grep range "$W/stdout")"
grep -q "memory *120 bytes" "$W/stdout" || bad "raw memory"

"$PM" info "$W/vol.nrrd" >"$W/stdout" 2>"$W/stderr" || bad "info on NRRD: $(cat "$W/stderr")"
grep -q "type *f32" "$W/stdout" || bad "nrrd type: $(cat "$W/stdout")"
grep -q "spacing *0.5 x 0.25 x 2" "$W/stdout" || bad "nrrd spacing"
grep -q "value range *1.5 \.\. 617$" "$W/stdout" || bad "nrrd value range: $(grep range "$W/stdout")"

"$PM" info "$W/pts.xyz" >"$W/stdout" 2>"$W/stderr" || bad "info on XYZ: $(cat "$W/stderr")"
grep -q "count *4$" "$W/stdout" || bad "point count: $(cat "$W/stdout")"
grep -q "bounds min *-1.5, -4, 0$" "$W/stdout" || bad "bounds min: $(grep min "$W/stdout")"
grep -q "bounds max *1, 2, 3$" "$W/stdout" || bad "bounds max: $(grep max "$W/stdout")"

printf 'v 0 0 0\n' > "$W/m.obj"
"$PM" info "$W/m.obj" >/dev/null 2>"$W/stderr"; rc=$?
[ $rc -eq 1 ] && grep -q "pyramesh: error:.*m.obj" "$W/stderr" || bad ".obj: exit $rc $(cat "$W/stderr")"
"$PM" info "$W/nothere.nrrd" >/dev/null 2>"$W/stderr"; rc=$?
[ $rc -eq 1 ] && grep -q "nothere.nrrd" "$W/stderr" || bad "missing file: exit $rc"
printf 'garbage\n' > "$W/junk.vtk"
"$PM" info "$W/junk.vtk" >/dev/null 2>"$W/stderr"; rc=$?
[ $rc -eq 1 ] && grep -q "junk.vtk" "$W/stderr" || bad "junk .vtk: exit $rc $(cat "$W/stderr")"

# --json for volumes and point sets, parsed as JSON.
"$PM" info "$W/vol.nrrd" --json >"$W/v.json" 2>"$W/stderr" || bad "info --json on NRRD: $(cat "$W/stderr")"
"$PM" info "$W/pts.xyz" --json >"$W/p.json" 2>"$W/stderr" || bad "info --json on XYZ: $(cat "$W/stderr")"
python3 - "$W/v.json" "$W/p.json" <<'PY' || bad "info --json contents"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["kind"] == "volume" and v["dims"] == [5, 4, 3] and v["type"] == "f32", v
assert v["spacing"] == [0.5, 0.25, 2] and v["min"] == 1.5 and v["max"] == 617 and v["nan_samples"] == 0, v
p = json.load(open(sys.argv[2]))
assert p["kind"] == "points" and p["count"] == 4, p
assert p["bounds_min"] == [-1.5, -4, 0] and p["bounds_max"] == [1, 2, 3], p
PY

[ $fail -eq 0 ] && echo "cli_info: all passed"
exit $fail
