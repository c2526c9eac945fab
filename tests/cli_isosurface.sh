#!/bin/bash
# `pyramesh isosurface` end to end on generated raw volumes: summary, --stats
# JSON, --quiet, determinism, PLY counts matching the stats, and frame
# sequences (natural order, -s/-e, a missing and a broken frame).
# Usage: cli_isosurface.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W/frames" "$W/out" "$W/nat"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# A sphere's distance field, 23 x 17 x 13 f32 samples, spacing 0.5,0.5,1:
# non-power-of-two and anisotropic. `scale` shifts the values so that
# frames differ.
gen() { # path scale
  python3 - "$1" "$2" <<'PY'
import math, struct, sys
nx, ny, nz, s = 23, 17, 13, float(sys.argv[2])
v = []
for k in range(nz):
    for j in range(ny):
        for i in range(nx):
            x, y, z = i * 0.5 - 5.5, j * 0.5 - 4.0, k * 1.0 - 6.0
            v.append(s * math.sqrt(x * x + y * y + z * z))
open(sys.argv[1], "wb").write(struct.pack("<%df" % len(v), *v))
PY
}
RAW=(--raw-dims 23,17,13 --raw-type f32 --raw-spacing 0.5,0.5,1)
gen "$W/sphere.raw" 1.0 || { echo "python3 failed"; exit 1; }

"$PM" isosurface "$W/sphere.raw" "${RAW[@]}" --iso 3 -o "$W/out/a.ply" --device cpu \
  --stats "$W/out/a.json" >"$W/stdout" 2>"$W/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "isosurface exited $rc"; cat "$W/stderr"; exit 1; }
for w in "active cells" vertices triangles "23 x 17 x 13" f32 read extract write cpu; do
  grep -q -F "$w" "$W/stdout" || bad "summary lacks '$w'"
done
[ -s "$W/out/a.ply" ] || bad "no mesh written"
ls "$W/out" | grep -q tmp && bad "temporary file left: $(ls "$W/out")"
# The JSON has the required keys; its counts match the PLY header.
python3 - "$W/out/a.json" "$W/out/a.ply" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("vertices", "triangles", "active_cells", "cells", "device", "timings_ms"):
    assert k in d, "missing key " + k
for k in ("read", "extract", "write"):
    assert k in d["timings_ms"], "missing timings_ms." + k
assert d["cells"] == 22 * 16 * 12, d["cells"]
assert d["device"] == "cpu", d["device"]
assert 0 < d["active_cells"] < d["cells"], d["active_cells"]
assert d["vertices"] > 0 and d["triangles"] > 0
head = open(sys.argv[2], "rb").read(4096).split(b"end_header")[0].decode("ascii", "replace")
counts = {l.split()[1]: int(l.split()[2]) for l in head.splitlines() if l.startswith("element")}
assert counts.get("vertex") == d["vertices"], (counts, d["vertices"])
assert counts.get("face") == d["triangles"], (counts, d["triangles"])
PY

# --quiet prints nothing on success; the same input gives the same bytes.
"$PM" isosurface "$W/sphere.raw" "${RAW[@]}" --iso 3 -o "$W/out/b.ply" --device cpu --quiet \
  >"$W/stdout" 2>"$W/stderr" || bad "--quiet run failed"
[ -s "$W/stdout" ] || [ -s "$W/stderr" ] && bad "--quiet printed: $(cat "$W/stdout" "$W/stderr")"
cmp -s "$W/out/a.ply" "$W/out/b.ply" || bad "two runs gave different files"
# Other formats and modes.
for o in c.obj d.stl e.vtk; do
  "$PM" isosurface "$W/sphere.raw" "${RAW[@]}" --iso 3 -o "$W/out/$o" --soup --normals sobel \
    --quiet || bad "writing $o failed"
  [ -s "$W/out/$o" ] || bad "$o missing"
done
"$PM" isosurface "$W/sphere.raw" "${RAW[@]}" --iso 3 -o "$W/out/f.ply" --ascii --quiet || bad "--ascii"
head -c 20 "$W/out/f.ply" | grep -q "format ascii" || head -3 "$W/out/f.ply" | grep -q ascii || bad "not ASCII PLY"
# An iso value outside the range: an empty mesh, no error.
"$PM" isosurface "$W/sphere.raw" "${RAW[@]}" --iso -5 -o "$W/out/empty.ply" \
  --stats "$W/out/empty.json" --quiet || bad "iso outside the range failed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["triangles"]==0' \
  "$W/out/empty.json" || bad "empty mesh has triangles"

# A sequence: frames 001, 004 good, 002 truncated, 003 missing, 010 outside -e.
gen "$W/frames/vol_001.raw" 1.0; gen "$W/frames/vol_004.raw" 0.9; gen "$W/frames/vol_010.raw" 0.8
head -c 1000 "$W/frames/vol_001.raw" > "$W/frames/vol_002.raw"
"$PM" isosurface "$W/frames/vol_{}.raw" "${RAW[@]}" --iso 3 -o "$W/out/mesh_{}.ply" -s 1 -e 4 \
  --stats "$W/out/seq.json" >"$W/stdout" 2>"$W/stderr"
rc=$?
[ $rc -eq 1 ] || bad "sequence with a broken frame exited $rc, expected 1"
grep -q "frame 3 not found" "$W/stderr" || bad "no note for missing frame 3: $(cat "$W/stderr")"
grep -q "pyramesh: error:.*vol_002.raw" "$W/stderr" || bad "no error naming vol_002.raw"
grep -q "^2 frames done, 1 failed$" "$W/stdout" || bad "final line: $(tail -1 "$W/stdout")"
[ -s "$W/out/mesh_001.ply" ] && [ -s "$W/out/mesh_004.ply" ] || bad "good frames not written"
[ -e "$W/out/mesh_002.ply" ] && bad "broken frame left an output"
[ -e "$W/out/mesh_010.ply" ] && bad "frame 10 is outside -e 4 but was written"
grep -q "^frame 001: $W/frames/vol_001.raw -> $W/out/mesh_001.ply: " "$W/stdout" || bad "frame line names"
[ "$(grep -o '^frame [0-9]*' "$W/stdout" | tr '\n' ' ')" = "frame 001 frame 004 " ] ||
  bad "frame lines: $(grep '^frame' "$W/stdout")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["frames_done"]==2 and d["frames_failed"]==1 and len(d["frames"])==2' \
  "$W/out/seq.json" || bad "sequence stats"
# Natural order: 2, 9, 10 (not 10, 2, 9); per-frame stats with '{}'.
for f in 2 9 10; do gen "$W/nat/v$f.raw" 1.0; done
"$PM" isosurface "$W/nat/v{}.raw" "${RAW[@]}" --iso 3 -o "$W/out/n{}.stl" --stats "$W/out/n{}.json" \
  >"$W/stdout" 2>"$W/stderr" || bad "natural-order sequence failed: $(cat "$W/stderr")"
[ "$(grep -o '^frame [0-9]*' "$W/stdout" | tr '\n' ' ')" = "frame 2 frame 9 frame 10 " ] ||
  bad "not in natural order: $(grep '^frame' "$W/stdout")"
for f in 2 9 10; do [ -s "$W/out/n$f.stl" ] && [ -s "$W/out/n$f.json" ] || bad "frame $f outputs"; done
grep -q "^3 frames done, 0 failed$" "$W/stdout" || bad "final line: $(tail -1 "$W/stdout")"
ls "$W/out" | grep -q tmp && bad "temporary files left: $(ls "$W/out" | grep tmp)"
# Progress: no carriage returns when stderr is not a terminal; a progress
# line when it is (a pseudo-terminal from util-linux `script`, if present).
grep -q $'\r' "$W/stderr" && bad "progress line written to a non-terminal"
if command -v script >/dev/null 2>&1; then
  script -qec "'$PM' isosurface '$W/nat/v{}.raw' ${RAW[*]} --iso 3 -o '$W/out/t{}.ply'" /dev/null \
    >"$W/tty" 2>&1 </dev/null
  grep -q "done, .* left\] frame" "$W/tty" || bad "no progress line on a terminal: $(head -c 300 "$W/tty")"
  script -qec "'$PM' isosurface '$W/nat/v{}.raw' ${RAW[*]} --iso 3 -o '$W/out/u{}.ply' --quiet" \
    /dev/null >"$W/tty" 2>&1 </dev/null
  [ -s "$W/tty" ] && bad "--quiet on a terminal printed: $(head -c 300 "$W/tty")"
fi

# Orientation as VTK and scikit-image: a bright ball (CT-like u8) gives a
# positive signed volume by default, a negative one with --inside below.
python3 - "$W/bright.raw" <<'PY' || { echo "python3 failed"; exit 1; }
import sys
n = 32
with open(sys.argv[1], "wb") as f:
    f.write(bytes(200 if (i - 15.5) ** 2 + (j - 15.5) ** 2 + (k - 15.5) ** 2 < 100 else 10
                  for k in range(n) for j in range(n) for i in range(n)))
PY
for side in default below; do
  extra=(); [ $side = below ] && extra=(--inside below)
  "$PM" isosurface "$W/bright.raw" --raw-dims 32,32,32 --raw-type u8 --iso 100 "${extra[@]}" \
    -o "$W/bright_$side.ply" -q || bad "bright ball ($side) failed"
  "$PM" info "$W/bright_$side.ply" --json > "$W/bright_$side.json" || bad "info on bright ball ($side)"
done
python3 - "$W/bright_default.json" "$W/bright_below.json" <<'PY' || bad "orientation of the bright ball"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["closed"] and a["volume"] > 3000, a["volume"]   # about 4/3 pi 10^3
# the same surface turned inside out (ambiguous cells may resolve the other way)
assert b["closed"] and abs(b["volume"] + a["volume"]) < 0.01 * a["volume"], (a["volume"], b["volume"])
PY
"$PM" isosurface "$W/bright.raw" --raw-dims 32,32,32 --raw-type u8 --iso 100 --inside sideways \
  -o "$W/x.ply" -q 2>/dev/null && bad "--inside sideways accepted"

# --subdivide N: the extracted mesh refined by Loop subdivision, 4^N times
# the triangles, still closed; refused with --soup.
"$PM" isosurface "$W/bright.raw" --raw-dims 32,32,32 --raw-type u8 --iso 100 --subdivide 2 \
  -o "$W/smooth.ply" -q --stats "$W/smooth.json" || bad "--subdivide 2 failed"
"$PM" info "$W/smooth.ply" --json > "$W/smooth_info.json" || bad "info on the subdivided mesh"
python3 - "$W/bright_default.json" "$W/smooth_info.json" "$W/smooth.json" <<'PY' || bad "--subdivide result"
import json, sys
a, b, st = (json.load(open(p)) for p in sys.argv[1:4])
assert b["triangles"] == 16 * a["triangles"] and b["closed"] and b["manifold"], (a["triangles"], b["triangles"])
assert st["subdivide"]["levels"] == 2, st
PY
"$PM" isosurface "$W/bright.raw" --raw-dims 32,32,32 --raw-type u8 --iso 100 --subdivide 1 --soup \
  -o "$W/x.ply" -q 2>/dev/null && bad "--subdivide with --soup accepted"

[ $fail -eq 0 ] && echo "cli_isosurface: all passed"
exit $fail
