#!/bin/bash
# Mesh post-processing on the command line beyond splashsurf's fixtures
# (docs/splashsurf.md; tests/cli_splashsurf.sh covers reconstruct's
# splashsurf options): `isosurface` takes the same post-processing options
# (cleanup, Laplacian and Taubin smoothing, area-weighted normals and their
# smoothing, components, the mesh AABB, quads, checks, raw mesh) with their
# effect checked on a generated volume; the options that need particles
# are usage errors there; --stats reports every step's time, place and
# counts; 1 and 2 threads give the same bytes; and where a GPU is usable,
# --device cuda gives the CPU's bytes for isosurface and reconstruct
# (the data-parallel steps on the device), else that part is skipped.
# Usage: cli_postprocess.sh PYRAMESH WORKDIR
set -u
PM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
rm -rf "$W"; mkdir -p "$W"
cd "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run() { # NAME args...: runs pyramesh; a non-zero exit fails the test
  local name=$1; shift
  "$PM" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ $rc -eq 0 ] || { bad "$name: exit $rc: $*"; sed 's/^/  /' "$name.err" | head -5; return 1; }
}
# info FILE KEY...: the values of `pyramesh info --json` keys, space-separated.
info() { local f=$1; shift; "$PM" info "$f" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(" ".join(str(int(d[k]) if isinstance(d[k], bool) else d[k]) for k in sys.argv[1:]))' "$@"; }

# A bumpy ball (radius 8) and a small ball (radius 1.6) apart, as a signed
# distance-like field, 48^3 f32 samples of spacing 0.5 (origin 0).
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import math, struct
n = 48
v = []
for k in range(n):
    for j in range(n):
        for i in range(n):
            x, y, z = (i - 20) * 0.5, (j - 22) * 0.5, (k - 23) * 0.5
            d = 8.0 - math.sqrt(x * x + y * y + z * z) + 0.6 * math.sin(1.7 * x) * math.cos(1.3 * y)
            x2, y2, z2 = (i - 40) * 0.5, (j - 40) * 0.5, (k - 8) * 0.5
            v.append(max(d, 1.6 - math.sqrt(x2 * x2 + y2 * y2 + z2 * z2)))
open("vol.raw", "wb").write(struct.pack("<%df" % len(v), *v))
PY
ISO=(isosurface vol.raw --raw-dims 48,48,48 --raw-type f32 --raw-spacing 0.5,0.5,0.5 --iso 0)

run plain "${ISO[@]}" -o plain.vtk --device cpu
read -r V0 T0 C0 K0 VOL0 <<<"$(info plain.vtk vertices triangles closed components volume)"
[ "$C0$K0" = 12 ] || bad "plain: closed $C0, $K0 components (expected a closed mesh of 2)"

# --mesh-cleanup: fewer triangles, same topology, closed manifold oriented.
run cleanup "${ISO[@]}" -o cleanup.vtk --device cpu --mesh-cleanup=on
read -r v t c m o k <<<"$(info cleanup.vtk vertices triangles closed manifold oriented components)"
[ "$c$m$o" = 111 ] && [ "$k" = 2 ] || bad "cleanup: closed $c manifold $m oriented $o, $k components"
[ "$t" -lt $((T0 * 8 / 10)) ] && [ "$t" -gt $((T0 * 3 / 10)) ] || bad "cleanup: $T0 -> $t triangles"

# --mesh-smoothing-iters turns the cleanup on (splashsurf's rule) and
# smooths; Taubin keeps the volume closer than the Laplacian does.
run lap "${ISO[@]}" -o lap.vtk --device cpu --mesh-smoothing-iters=10 --stats lap.json
run lapoff "${ISO[@]}" -o lapoff.vtk --device cpu --mesh-smoothing-iters=10 --mesh-cleanup=off
run tau "${ISO[@]}" -o tau.vtk --device cpu --mesh-cleanup=on --taubin-iters 10
read -r tl cl vl <<<"$(info lap.vtk triangles closed volume)"
read -r tt ct vt <<<"$(info tau.vtk triangles closed volume)"
read -r to <<<"$(info lapoff.vtk triangles)"
[ "$tl" = "$t" ] || bad "--mesh-smoothing-iters: $tl triangles, the cleanup gives $t"
[ "$to" = "$T0" ] || bad "--mesh-cleanup=off: $to triangles, expected the raw $T0"
[ "$cl$ct" = 11 ] || bad "smoothing: closed $cl (Laplacian) $ct (Taubin)"
python3 -c 'import sys; v0, vl, vt = map(float, sys.argv[1:]); sys.exit(0 if abs(vt - v0) < 0.5 * abs(vl - v0) and vl < v0 else 1)' "$VOL0" "$vl" "$vt" \
  || bad "volume: raw $VOL0, Laplacian $vl, Taubin $vt (Taubin should keep it closer)"

# --stats: every step with its time, place and counts; the summary says so.
python3 - lap.json <<'PY' || bad "--stats: post_processing"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["post_processing"]
names = [s["step"] for s in p["steps"]]
assert names == ["mesh cleanup", "Laplacian smoothing", "area-weighted normals"], names
for s in p["steps"]:
    assert s["path"] == "host" and s["ms"] >= 0 and s["triangles"] <= s["triangles_in"], s
assert p["steps"][0]["triangles"] == d["triangles"], (p["steps"][0], d["triangles"])
assert abs(sum(s["ms"] for s in p["steps"]) - p["total_ms"]) < 1e-2
assert d["timings_ms"]["post_processing"] == p["total_ms"]
assert d["normals"] == "area-weighted", d["normals"]  # the cleanup moved the vertices
PY
grep -q "post-processing 3 steps (0 on the device)" lap.out || bad "summary: $(grep post lap.out)"
grep -q "area-weighted normals" lap.out || bad "summary: $(grep mesh lap.out)"

# --normals=on: area-weighted normals in the file; their smoothing, with the raw ones kept.
run nrm "${ISO[@]}" -o nrm.vtk --device cpu --normals=on --normals-smoothing-iters 3 \
  --output-raw-normals=on -v
grep -q "^NORMALS" nrm.vtk || bad "--normals=on: no NORMALS in the file"
grep -q "raw_normals" nrm.vtk || bad "--output-raw-normals: no raw_normals array"
grep -q "normal smoothing" nrm.out || bad "-v: no normal smoothing line"

# Components: the small ball goes.
run comp "${ISO[@]}" -o comp.vtk --device cpu --keep-largest-component=on
run comp2 "${ISO[@]}" -o comp2.vtk --device cpu --remove-components-below 2000
read -r k1 <<<"$(info comp.vtk components)"
read -r k2 t2 <<<"$(info comp2.vtk components triangles)"
[ "$k1" = 1 ] && [ "$k2" = 1 ] && [ "$t2" -lt "$T0" ] || bad "components: $k1 / $k2 left ($t2 of $T0 triangles)"

# The mesh AABB: the lower half of the big ball (z < 11.5), vertices clamped.
run box "${ISO[@]}" -o box.vtk --device cpu --mesh-aabb-min -1 -1 -1 --mesh-aabb-max 30 30 11.5 \
  --mesh-aabb-clamp-verts=on
python3 - box.vtk "$PM" <<'PY' || bad "--mesh-aabb: vertices outside the box"
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[2], "info", sys.argv[1], "--json"], capture_output=True).stdout)
assert d["triangles"] > 0 and d["bbox_max"][2] <= 11.5 and not d["closed"], d
PY

# Checks: a closed mesh passes; the open one (after the box) fails naming an edge.
run chk "${ISO[@]}" -o chk.vtk --device cpu --check-mesh=on
"$PM" "${ISO[@]}" -o chkbad.vtk --device cpu --mesh-aabb-min -1 -1 -1 --mesh-aabb-max 30 30 11.5 \
  --check-mesh-closed=on >chkbad.out 2>chkbad.err
rc=$?
[ $rc -eq 1 ] && grep -q "not closed" chkbad.err && [ ! -e chkbad.vtk ] \
  || bad "--check-mesh-closed on an open mesh: exit $rc, $(cat chkbad.err)"

# Quads, the raw mesh.
run quads "${ISO[@]}" -o quads.vtk --device cpu --mesh-cleanup=on --generate-quads=on \
  --output-raw-mesh=on -v
grep -q "quads" quads.out || bad "--generate-quads: no quads line"
read -r tr <<<"$(info raw_quads.vtk triangles)"
[ "$tr" = "$T0" ] || bad "--output-raw-mesh: $tr triangles, expected $T0"

# The options that need particles are usage errors; a bad --normals names it.
for o in "--mesh-smoothing-weights=on" "--sph-normals=on" "-a velocity" "--normals=sph"; do
  "$PM" "${ISO[@]}" -o x.vtk $o >x.out 2>x.err
  rc=$?
  [ $rc -eq 2 ] && grep -q "need" x.err || bad "isosurface $o: exit $rc: $(head -1 x.err)"
done
"$PM" "${ISO[@]}" -o x.vtk --normals fancy >x.out 2>x.err
[ $? -eq 2 ] && grep -q -- "--normals" x.err || bad "--normals fancy: $(head -1 x.err)"

# 1 and 2 threads: the same bytes.
ALL=(--mesh-cleanup=on --mesh-smoothing-iters=5 --taubin-iters 2 --normals=on
     --normals-smoothing-iters 2 --keep-largest-component=on --mesh-aabb-min -1 -1 -1
     --mesh-aabb-max 30 30 14)
run t1 "${ISO[@]}" -o t1.vtk --device cpu --threads 1 "${ALL[@]}"
run t2 "${ISO[@]}" -o t2.vtk --device cpu --threads 2 "${ALL[@]}"
cmp -s t1.vtk t2.vtk || bad "1 and 2 threads differ"

# Particles for reconstruct: a jittered ball of radius 0.5, r = 0.025.
python3 - <<'PY'
import random
random.seed(7)
with open("ball.xyz", "w") as f:
    for i in range(-10, 11):
        for j in range(-10, 11):
            for k in range(-10, 11):
                if i * i + j * j + k * k <= 100:
                    f.write("%.6f %.6f %.6f\n" % tuple(0.05 * c + random.uniform(-0.01, 0.01) for c in (i, j, k)))
PY
REC=(reconstruct ball.xyz -r=0.025 -l=2.0 -c=0.5 -t=0.6 --mesh-smoothing-weights=on
     --mesh-smoothing-iters=15 --normals=on --normals-smoothing-iters=10 --output-smoothing-weights=on)
run rec "${REC[@]}" -o rec.vtk --device cpu --stats rec.json
python3 - rec.json <<'PY' || bad "reconstruct --stats: post_processing"
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["step"] for s in d["post_processing"]["steps"]]
want = ["mesh cleanup", "SPH interpolator", "smoothing weights", "Laplacian smoothing",
        "area-weighted normals", "normal smoothing"]
assert names == want, names
PY

# The GPU: the same bytes as the CPU, the data-parallel steps on the device.
if "$PM" "${ISO[@]}" -o gpu_probe.vtk --device cuda -q 2>/dev/null; then
  run gi "${ISO[@]}" -o gi.vtk --device cuda "${ALL[@]}" --stats gi.json
  cmp -s t1.vtk gi.vtk || bad "isosurface: --device cuda and cpu differ"
  run gr "${REC[@]}" -o gr.vtk --device cuda --stats gr.json
  cmp -s rec.vtk gr.vtk || bad "reconstruct: --device cuda and cpu differ"
  python3 - gi.json gr.json <<'PY' || bad "--device cuda: steps not on the device"
import json, sys
dev = {"Laplacian smoothing", "Taubin smoothing", "area-weighted normals", "normal smoothing",
       "mesh AABB", "SPH interpolator", "smoothing weights", "mesh to host memory",
       "mesh cleanup"}
for f in sys.argv[1:]:
    for s in json.load(open(f))["post_processing"]["steps"]:
        assert (s["path"] == "device") == (s["step"] in dev), (f, s)
PY
  echo "cuda: isosurface and reconstruct match the CPU"
else
  echo "cuda: no usable GPU, the device comparison skipped"
fi

[ $fail -eq 0 ] && echo "cli_postprocess: all checks passed"
exit $fail
