#!/bin/bash
# `pyramesh reconstruct` end to end on a generated ball of particles (XYZ
# text): closed manifold output, --stats JSON with the per-stage timings and
# particle counts, the particle box dropping particles, determinism, --quiet,
# and a frame sequence with a missing and a broken frame.
# Usage: cli_reconstruct.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W/frames" "$W/out"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Particles of radius 0.05 on a lattice of spacing 2r = 0.1, jittered by at
# most 0.01, filling a ball of radius 0.5 around the origin (about 500).
ball() { # path seed
  python3 - "$1" "$2" <<'PY'
import random, sys
random.seed(int(sys.argv[2]))
with open(sys.argv[1], "w") as f:
    f.write("# a ball of particles\n")
    for i in range(-5, 6):
        for j in range(-5, 6):
            for k in range(-5, 6):
                if i * i + j * j + k * k <= 25:
                    f.write("%.6f %.6f %.6f\n" % tuple(0.1 * a + random.uniform(-0.01, 0.01) for a in (i, j, k)))
PY
}
ball "$W/ball.xyz" 1 || { echo "python3 failed"; exit 1; }
N=$(grep -c -v '^#' "$W/ball.xyz")

"$PM" reconstruct "$W/ball.xyz" -o "$W/out/ball.ply" -r 0.05 -l 2 -c 0.5 -t 0.6 --ascii \
  --device cpu --stats "$W/out/ball.json" >"$W/stdout" 2>"$W/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "reconstruct exited $rc"; cat "$W/stderr"; exit 1; }
for w in particles grid neighbours density field extract write triangles "$N read"; do
  grep -q -F "$w" "$W/stdout" || bad "summary lacks '$w'"
done
python3 - "$W/out/ball.json" "$W/out/ball.ply" "$N" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("vertices", "triangles", "active_cells", "cells", "device", "particles_read",
          "particles_dropped", "grid_dims", "timings_ms"):
    assert k in d, "missing key " + k
for k in ("read", "neighbours", "density", "field", "extract", "write"):
    assert k in d["timings_ms"], "missing timings_ms." + k
assert d["particles_read"] == int(sys.argv[3]), d["particles_read"]
assert d["particles_dropped"] == 0
assert d["triangles"] > 0 and len(d["grid_dims"]) == 3
# The ASCII PLY: one closed, consistently oriented surface of genus 0.
lines = open(sys.argv[2]).read().splitlines()
end = lines.index("end_header")
nv = nf = 0
for l in lines[:end]:
    p = l.split()
    if p[:2] == ["element", "vertex"]: nv = int(p[2])
    if p[:2] == ["element", "face"]: nf = int(p[2])
assert nv == d["vertices"] and nf == d["triangles"], (nv, nf, d["vertices"], d["triangles"])
directed = {}
for l in lines[end + 1 + nv:end + 1 + nv + nf]:
    p = [int(x) for x in l.split()]
    assert p[0] == 3, l
    a, b, c = p[1:4]
    for e in ((a, b), (b, c), (c, a)):
        directed[e] = directed.get(e, 0) + 1
assert all(n == 1 for n in directed.values()), "an edge is used twice in one direction"
assert all((b, a) in directed for (a, b) in directed), "an edge has one triangle only (open)"
edges = len(directed) // 2
chi = nv - edges + nf
assert chi == 2, "Euler characteristic %d, expected 2" % chi
PY

# The particle box: particles with x > 0.05 are dropped and counted.
DROP=$(python3 -c 'import sys; print(sum(1 for l in open(sys.argv[1]) if not l.startswith("#") and float(l.split()[0]) > 0.05))' "$W/ball.xyz")
"$PM" reconstruct "$W/ball.xyz" -o "$W/out/half.ply" -r 0.05 --particle-aabb-min -1,-1,-1 \
  --particle-aabb-max 0.05,1,1 --stats "$W/out/half.json" --quiet || bad "aabb run failed"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["particles_dropped"]==int(sys.argv[2]), d["particles_dropped"]' \
  "$W/out/half.json" "$DROP" || bad "particles dropped != $DROP"

# --quiet prints nothing; the same input twice gives the same bytes.
"$PM" reconstruct "$W/ball.xyz" -o "$W/out/q1.ply" -r 0.05 --quiet >"$W/stdout" 2>"$W/stderr" ||
  bad "--quiet run failed"
[ -s "$W/stdout" ] || [ -s "$W/stderr" ] && bad "--quiet printed: $(cat "$W/stdout" "$W/stderr")"
"$PM" reconstruct "$W/ball.xyz" -o "$W/out/q2.ply" -r 0.05 --quiet || bad "second run failed"
cmp -s "$W/out/q1.ply" "$W/out/q2.ply" || bad "two runs gave different files"
# The blur method and the long option names.
"$PM" reconstruct "$W/ball.xyz" -o "$W/out/blur.obj" --particle-radius 0.05 --cube-size 0.75 \
  --smoothing-length 2 --surface-threshold 0.5 --method blur --blur-steps 2 --quiet ||
  bad "blur run failed"
[ -s "$W/out/blur.obj" ] || bad "blur mesh missing"

# A sequence: frames 1 and 4 good, 2 has a NaN coordinate, 3 is missing.
ball "$W/frames/fluid_1.xyz" 1; ball "$W/frames/fluid_4.xyz" 4
printf '0 0 0\n0.1 nan 0\n0.2 0 0\n' > "$W/frames/fluid_2.xyz"
"$PM" reconstruct "$W/frames/fluid_{}.xyz" -o "$W/out/surface_{}.ply" -r 0.05 \
  >"$W/stdout" 2>"$W/stderr"
rc=$?
[ $rc -eq 1 ] || bad "sequence with a broken frame exited $rc, expected 1"
grep -q "frame 3 not found" "$W/stderr" || bad "no note for missing frame 3: $(cat "$W/stderr")"
grep -q "pyramesh: error:.*fluid_2.xyz" "$W/stderr" || bad "no error naming fluid_2.xyz"
grep -q "^2 frames done, 1 failed$" "$W/stdout" || bad "final line: $(tail -1 "$W/stdout")"
[ -s "$W/out/surface_1.ply" ] && [ -s "$W/out/surface_4.ply" ] || bad "good frames not written"
[ -e "$W/out/surface_2.ply" ] && bad "broken frame left an output"
# -s/-e select frames.
"$PM" reconstruct "$W/frames/fluid_{}.xyz" -o "$W/out/sel_{}.ply" -r 0.05 -s 4 -e 9 --quiet ||
  bad "-s 4 -e 9 failed"
[ -s "$W/out/sel_4.ply" ] && [ ! -e "$W/out/sel_1.ply" ] || bad "-s/-e selection"

# A sequence writes frame k while frame k + 1 is meshed: the same bytes as
# single runs, the stages' rates, and a write that fails (a file size limit,
# SIGXFSZ ignored) fails its frame only, leaving no file.
"$PM" reconstruct "$W/frames/fluid_1.xyz" -o "$W/out/single_1.ply" -r 0.05 --quiet ||
  bad "single run of frame 1 failed"
cmp -s "$W/out/single_1.ply" "$W/out/surface_1.ply" || bad "the sequence's frame 1 differs from a single run"
grep -q "frames/s" "$W/stdout" || bad "no rate line in: $(cat "$W/stdout")"
mkdir -p "$W/big" "$W/bigout"
printf '0 0 0\n0.5 0 0\n' > "$W/big/f_1.xyz"
cp "$W/ball.xyz" "$W/big/f_2.xyz"
printf '0 0 0\n0 0.5 0\n' > "$W/big/f_3.xyz"
(trap '' XFSZ; ulimit -f 512; "$PM" reconstruct "$W/big/f_{}.xyz" -o "$W/bigout/o_{}.ply" -r 0.05 -c 0.2 \
  --stats "$W/bigout/s_{}.json" >"$W/stdout" 2>"$W/stderr")
rc=$?
[ $rc -eq 1 ] || bad "a failed deferred write: exit $rc, expected 1"
grep -q "^2 frames done, 1 failed$" "$W/stdout" || bad "failed write: final line: $(tail -1 "$W/stdout")"
grep -q "pyramesh: error:.*o_2.ply" "$W/stderr" || bad "no error naming o_2.ply: $(cat "$W/stderr")"
[ -s "$W/bigout/o_1.ply" ] && [ -s "$W/bigout/o_3.ply" ] && [ -s "$W/bigout/s_3.json" ] ||
  bad "the frames around the failed write were not written"
[ -e "$W/bigout/o_2.ply" ] || [ -e "$W/bigout/s_2.json" ] && bad "the failed write left a file"
ls "$W/bigout" | grep -q tmp && bad "temporary files left: $(ls "$W/bigout" | grep tmp)"
ls "$W/out" | grep -q tmp && bad "temporary files left: $(ls "$W/out" | grep tmp)"

[ $fail -eq 0 ] && echo "cli_reconstruct: all passed"
exit $fail
