#!/bin/bash
# splashsurf's command lines run unchanged (docs/splashsurf.md): the README's
# two examples verbatim through `pyramesh splashsurf` and `pyramesh
# reconstruct`, pysplashsurf's CLI test line, splashsurf's own test
# parameter sets on its fixtures (tests/data/splashsurf, MIT) with the
# triangle ranges and the closed/manifold checks those tests assert, every
# option's syntax (--opt=value, --opt value, =on|off, X Y Z and X,Y,Z) and
# effect, the implementation-detail switches changing nothing, sequences
# with default names, and 1 vs 2 threads giving the same bytes.
# Usage: cli_splashsurf.sh PYRAMESH WORKDIR
set -u
PM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
DATA=$(cd "$(dirname "$0")" && pwd)/data/splashsurf
rm -rf "$W"; mkdir -p "$W"
cd "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run NAME args...: runs pyramesh, failing the test on a non-zero exit.
run() {
  local name=$1; shift
  "$PM" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ $rc -eq 0 ] || { bad "$name: exit $rc: $*"; sed 's/^/  /' "$name.err" | head -5; return 1; }
}
# mesh FILE: "vertices triangles closed manifold oriented components" of a mesh file.
mesh() { "$PM" info "$1" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["vertices"], d["triangles"], int(d["closed"]), int(d["manifold"]), int(d["oriented"]), d["components"])'; }
# expect_mesh NAME FILE TRI_MIN TRI_MAX [VERT_MIN VERT_MAX]: range (half-open, as
# splashsurf's assert_range) and closed, manifold, oriented.
expect_mesh() {
  local name=$1 f=$2
  [ -s "$f" ] || { bad "$name: no output $f"; return; }
  read -r v t c m o k <<<"$(mesh "$f")"
  [ "$c$m$o" = 111 ] || bad "$name: closed $c manifold $m oriented $o"
  [ "$t" -ge "$3" ] && [ "$t" -lt "$4" ] || bad "$name: $t triangles, splashsurf expects [$3, $4)"
  if [ $# -ge 6 ]; then
    [ "$v" -ge "$5" ] && [ "$v" -lt "$6" ] || bad "$name: $v vertices, splashsurf expects [$5, $6)"
  fi
  echo "$name: $v vertices, $t triangles, closed manifold oriented"
}
# attrs FILE: the POINT_DATA arrays of a legacy VTK file, space-separated.
attrs() { python3 - "$1" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
names = re.findall(rb"\n(?:SCALARS|VECTORS|NORMALS) (\w+) float", data)
print(" ".join(n.decode() for n in names))
PY
}

# ---- inputs: a dam-break-like block of particles (legacy VTK, binary, with
# a velocity FIELD array as SPlisHSPlasH writes it) and raw f32 XYZ ----------
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import random, struct
random.seed(7)
r = 0.025
pts = []
for i in range(14):
    for j in range(10):
        for k in range(8):
            pts.append((2*r*i + random.uniform(-0.004, 0.004), 2*r*j + random.uniform(-0.004, 0.004),
                        2*r*k + random.uniform(-0.004, 0.004)))
# a few droplets above the block
for d in range(5):
    pts.append((0.1 + 0.12 * d, 0.3, 0.7))
n = len(pts)
with open("particles.vtk", "wb") as f:
    f.write(b"# vtk DataFile Version 4.2\nparticles\nBINARY\nDATASET UNSTRUCTURED_GRID\n")
    f.write(b"POINTS %d float\n" % n)
    f.write(b"".join(struct.pack(">3f", *p) for p in pts))
    f.write(b"\nCELLS %d %d\n" % (n, 2 * n))
    f.write(b"".join(struct.pack(">2i", 1, i) for i in range(n)))
    f.write(b"\nCELL_TYPES %d\n" % n)
    f.write(b"".join(struct.pack(">i", 1) for i in range(n)))
    f.write(b"\nPOINT_DATA %d\nSCALARS id unsigned_int 1\nLOOKUP_TABLE default\n" % n)
    f.write(b"".join(struct.pack(">I", i) for i in range(n)))
    f.write(b"\nFIELD FieldData 1\nvelocity 3 %d float\n" % n)
    f.write(b"".join(struct.pack(">3f", 1.0, -p[2], p[0]) for p in pts))
    f.write(b"\n")
# the README's canyon example: raw native f32 triplets, r = 0.011
with open("canyon_5000_particles.xyz", "wb") as f:
    for i in range(25):
        for j in range(20):
            for k in range(10):
                f.write(struct.pack("<3f", 0.022*i + random.uniform(-0.002, 0.002),
                                    0.022*j + random.uniform(-0.002, 0.002), 0.022*k))
for fr in (3, 4, 12):
    with open("fluid_%02d.xyz" % fr, "wb") as f:
        for i in range(6):
            for j in range(6):
                for k in range(6):
                    f.write(struct.pack("<3f", 0.05*i + 0.01*fr, 0.05*j, 0.05*k))
PY

# ---- the README's examples, verbatim ------------------------------------
run readme1 splashsurf reconstruct particles.vtk -r=0.025 -l=2.0 -c=0.5 -t=0.6 --mesh-smoothing-weights=on --mesh-smoothing-iters=15 --normals=on --normals-smoothing-iters=10
expect_mesh readme1 particles_surface.vtk 1000 1000000
[ "$(attrs particles_surface.vtk | tr A-Z a-z)" = "normals" ] || bad "readme1: point data '$(attrs particles_surface.vtk)', expected normals"
mv particles_surface.vtk readme1.vtk
# the same command line given to `pyramesh reconstruct`: the same file
run readme1r reconstruct particles.vtk -r=0.025 -l=2.0 -c=0.5 -t=0.6 --mesh-smoothing-weights=on --mesh-smoothing-iters=15 --normals=on --normals-smoothing-iters=10
cmp -s readme1.vtk particles_surface.vtk || bad "readme1: reconstruct and splashsurf reconstruct differ"
rm -f particles_surface.vtk
run readme2 splashsurf reconstruct canyon_5000_particles.xyz -r=0.011 -c=1.5 -l=2.0 -t=0.6
expect_mesh readme2 canyon_5000_particles_surface.vtk 500 1000000
# as in the README's log: with --output-dir=out (created)
run readme2dir splashsurf reconstruct canyon_5000_particles.xyz -r=0.011 -c=1.5 -l=2.0 -t=0.6 --output-dir=out
cmp -s canyon_5000_particles_surface.vtk out/canyon_5000_particles_surface.vtk || bad "readme2: --output-dir=out"
# global flags before the subcommand, as `splashsurf -q reconstruct ...`
"$PM" splashsurf -q reconstruct canyon_5000_particles.xyz -r=0.011 -c=1.5 -l=2.0 -o q.vtk >q.out 2>&1 || bad "splashsurf -q reconstruct failed"
[ -s q.out ] && bad "splashsurf -q printed: $(head -2 q.out)"
"$PM" splashsurf -vv reconstruct canyon_5000_particles.xyz -r=0.011 -c=1.5 -l=2.0 -o v.vtk --mesh-cleanup=on >v.out 2>&1 || bad "splashsurf -vv failed"
grep -q "mesh cleanup" v.out || bad "-v printed no post-processing step"

# ---- pysplashsurf's CLI test line (test_calling.py), on its fixture ------
run pysplash splashsurf reconstruct "$DATA/ParticleData_Fluid_5.vtk" -o test_bin.vtk -r=0.025 -l=2.0 -c=0.5 -t=0.6 -d=on --subdomain-grid=on --interpolate_attribute velocity --decimate-barnacles=on --mesh-cleanup=on --mesh-smoothing-weights=on --mesh-smoothing-iters=25 --normals=on --normals-smoothing-iters=10 --output-smoothing-weights=on --generate-quads=off
expect_mesh pysplash test_bin.vtk 10000 1000000
[ "$(attrs test_bin.vtk | tr A-Z a-z)" = "normals wnn sw velocity" ] || bad "pysplash: point data '$(attrs test_bin.vtk)'"

# ---- splashsurf's test parameter sets on its fixtures --------------------
B=$DATA/bunny_frame_14_7705_particles.vtk
# splashsurf/tests/test_pipeline.rs (Parameters::new_relative(0.025, 4.0, 1.0): -l 2 -c 1)
run basic splashsurf reconstruct "$B" -o basic.vtk -r=0.025 -l=2.0 -c=1.0 --subdomain-grid=off --output-raw-mesh=on
expect_mesh test_basic_pipeline basic.vtk 35000 40000 15000 20000
cmp -s basic.vtk raw_basic.vtk || bad "test_basic_pipeline: without post-processing the raw mesh must equal the mesh"
run aabb splashsurf reconstruct "$B" -o aabb.vtk -r=0.025 -l=2.0 -c=1.0 --particle-aabb-min -0.7 0.6 -0.2 --particle-aabb-max 0.8 2.1 0.7
expect_mesh test_basic_pipeline_particle_aabb aabb.vtk 19000 23000 9500 11500
run post splashsurf reconstruct "$B" -o post.vtk -r=0.025 -l=2.0 -c=1.0 --mesh-cleanup=on --mesh-smoothing-weights=on --mesh-smoothing-iters=5 --output-smoothing-weights=on --output-raw-mesh=on
expect_mesh test_basic_pipeline_postprocessing post.vtk 18000 22000 8000 12000
[ "$(attrs post.vtk)" = "wnn sw" ] || bad "postprocessing: two point attributes expected, got '$(attrs post.vtk)'"
read -r rv rt _ <<<"$(mesh raw_post.vtk)"; read -r pv pt _ <<<"$(mesh post.vtk)"
[ "$rt" != "$pt" ] && [ "$rv" != "$pv" ] || bad "postprocessing: raw and final mesh have the same counts"
run postaabb splashsurf reconstruct "$B" -o postaabb.vtk -r=0.025 -l=2.0 -c=1.0 --mesh-cleanup=on --mesh-smoothing-weights=on --mesh-smoothing-iters=5 --output-smoothing-weights=on --output-raw-mesh=on --particle-aabb-min=-0.7,0.6,-0.2 --particle-aabb-max=0.8,2.1,0.7
expect_mesh test_basic_pipeline_postprocessing_with_aabb postaabb.vtk 11000 13000 5000 7000
# splashsurf_lib/tests/integration_tests/test_full.rs: (r, 2*l, c, t) -> (min, max) exclusive
full() { # name file r c t min max [extra]
  local name=$1 f=$2 r=$3 c=$4 t=$5 lo=$6 hi=$7; shift 7
  [ -f "$f" ] || { echo "$name: skipped ($f not present; set PYRAMESH_SPLASHSURF_DATA)"; return; }
  run "$name" splashsurf reconstruct "$f" -o "$name.vtk" -r=$r -l=2.0 -c=$c -t=$t "$@" || return
  expect_mesh "$name" "$name.vtk" $((lo + 1)) "$hi"
}
full bunny_global "$B" 0.025 0.75 0.6 60000 80000 --subdomain-grid=off
full bunny_grid "$B" 0.025 0.75 0.6 60000 80000 --subdomain-grid=on --subdomain-cubes 64
full hilbert2_grid "$DATA/hilbert2_7954_particles.vtk" 0.025 1.1 0.6 90000 100000
full free_particles_01 "$DATA/free_particles_1000_particles.vtk" 0.5 1.5 0.45 21000 25000
full free_particles_02 "$DATA/free_particles_125_particles.vtk" 0.5 1.5 0.45 1500 1600 --particle-aabb-min -10 -10 -10 --particle-aabb-max 210 210 210
X=${PYRAMESH_SPLASHSURF_DATA:-/nonexistent}
full hexecontahedron_grid "$X/pentagonal_hexecontahedron_32286_particles.bgeo" 0.025 0.75 0.6 550000 650000
full hilbert_grid "$X/hilbert_46843_particles.bgeo" 0.025 0.75 0.6 360000 400000
full octocat_grid "$X/octocat_32614_particles.bgeo" 0.025 0.75 0.6 140000 180000
full knot_global "$X/sailors_knot_19539_particles.vtk" 0.025 1.1 0.6 40000 70000
# a VTU fixture with its attributes
run vtu splashsurf reconstruct "$DATA/fluid_250_particles.vtu" -o vtu.vtk -r=0.025 -l=2.0 -c=0.5 -a velocity -a pressure --normals=on --sph-normals=on
[ "$(attrs vtu.vtk | tr A-Z a-z)" = "normals velocity pressure" ] || bad "vtu: point data '$(attrs vtu.vtk)'"

# ---- syntax: every form gives the same result ----------------------------
run s0 reconstruct particles.vtk -o s0.vtk -r 0.025 --normals=on --particle-aabb-min -1,-1,-1 --particle-aabb-max 1,1,1
run s1 reconstruct particles.vtk -o s1.vtk -r=0.025 --normals on --particle-aabb-min -1 -1 -1 --particle-aabb-max=1 1 1
run s2 reconstruct particles.vtk --output-file=s2.vtk --particle-radius=0.025 --normals=ON --particle-aabb-min=-1,-1,-1 --particle-aabb-max 1 1 1 -l 2 -c=0.5 -t0.6
cmp -s s0.vtk s1.vtk && cmp -s s0.vtk s2.vtk || bad "the option syntaxes give different meshes"
# implementation details: accepted, the same bytes
run s3 reconstruct particles.vtk -o s3.vtk -r 0.025 --normals=on --particle-aabb-min -1,-1,-1 --particle-aabb-max 1,1,1 -d=on --double-precision=off --simd=off --mt-files=on --mt-particles=off --subdomain-grid=off --subdomain-grid-auto-disable=off --subdomain-cubes 32
cmp -s s0.vtk s3.vtk || bad "implementation-detail switches changed the mesh"
# threads: 1 and 2 give the same bytes, through the whole post-processing
ALL="--mesh-cleanup=on --decimate-barnacles=on --mesh-smoothing-weights=on --mesh-smoothing-iters=10 --normals=on --sph-normals=on --normals-smoothing-iters=3 -a velocity --taubin-iters 2"
run t1 splashsurf reconstruct particles.vtk -o t1.vtk -r=0.025 -n 1 $ALL
run t2 splashsurf reconstruct particles.vtk -o t2.vtk -r=0.025 --num-threads=2 $ALL
cmp -s t1.vtk t2.vtk || bad "1 and 2 threads give different bytes"
expect_mesh all-options t1.vtk 1000 1000000

# ---- each option's effect ----------------------------------------------
run raw splashsurf reconstruct particles.vtk -o raw.vtk -r=0.025
read -r V0 T0 _ _ _ K0 <<<"$(mesh raw.vtk)"
[ -z "$(attrs raw.vtk)" ] || bad "splashsurf defaults wrote point data: $(attrs raw.vtk)"
run cleanup splashsurf reconstruct particles.vtk -o cleanup.vtk -r=0.025 --mesh-cleanup=on
read -r v t c m o k <<<"$(mesh cleanup.vtk)"
[ "$t" -lt $((T0 * 8 / 10)) ] && [ "$c$m$o" = 111 ] || bad "--mesh-cleanup: $T0 -> $t triangles, closed $c manifold $m oriented $o"
run snap splashsurf reconstruct particles.vtk -o snap.vtk -r=0.025 --mesh-cleanup=on --mesh-cleanup-snap-dist 0.1
read -r v t2 _ <<<"$(mesh snap.vtk)"
[ "$t2" -gt "$t" ] && [ "$t2" -lt "$T0" ] || bad "--mesh-cleanup-snap-dist 0.1: $t2 triangles (no limit $t, raw $T0)"
run keep splashsurf reconstruct particles.vtk -o keep.vtk -r=0.025 --mesh-cleanup=on --keep-verts=on
"$PM" info keep.vtk --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["file_vertices"] == '"$V0"' and d["vertices"] < d["file_vertices"] else 1)' || bad "--keep-verts=on: the vertices were not kept"
# smoothing: Laplacian shrinks the volume, the weights keep more of it
vol() { "$PM" info "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["volume"])'; }
run lap splashsurf reconstruct particles.vtk -o lap.vtk -r=0.025 --mesh-smoothing-iters=20
run wlap splashsurf reconstruct particles.vtk -o wlap.vtk -r=0.025 --mesh-smoothing-iters=20 --mesh-smoothing-weights=on
run tau reconstruct particles.vtk -o tau.vtk -r=0.025 --mesh-cleanup=on --taubin-iters 20
python3 - "$(vol raw.vtk)" "$(vol lap.vtk)" "$(vol wlap.vtk)" "$(vol tau.vtk)" <<'PY' || bad "smoothing volumes: raw, laplacian, weighted, taubin = $(vol raw.vtk) $(vol lap.vtk) $(vol wlap.vtk) $(vol tau.vtk)"
import sys
v0, lap, wlap, tau = map(float, sys.argv[1:])
assert lap < v0 and wlap < v0, "smoothing did not shrink"
assert abs(v0 - wlap) < abs(v0 - lap), "weights did not preserve volume"
assert abs(v0 - tau) < abs(v0 - lap), "Taubin did not preserve volume"
PY
# --mesh-smoothing-iters alone turns the cleanup on (splashsurf's default);
# =off keeps it off
run lapoff splashsurf reconstruct particles.vtk -o lapoff.vtk -r=0.025 --mesh-smoothing-iters=20 --mesh-cleanup=off
read -r v tl _ <<<"$(mesh lap.vtk)"; read -r v to _ <<<"$(mesh lapoff.vtk)"
[ "$tl" -lt "$T0" ] && [ "$to" -eq "$T0" ] || bad "mesh-cleanup default with smoothing: $tl / $to triangles (raw $T0)"
run zero splashsurf reconstruct particles.vtk -o zero.vtk -r=0.025 --mesh-smoothing-iters=0
cmp -s zero.vtk raw.vtk || bad "--mesh-smoothing-iters=0 changed the mesh"
# normals: area-weighted, SPH, smoothed with the raw ones kept
run nsm splashsurf reconstruct particles.vtk -o nsm.vtk -r=0.025 --normals=on --normals-smoothing-iters=5 --output-raw-normals=on
[ "$(attrs nsm.vtk | tr A-Z a-z)" = "normals raw_normals" ] || bad "--output-raw-normals: '$(attrs nsm.vtk)'"
run sphn splashsurf reconstruct particles.vtk -o sphn.vtk -r=0.025 --normals=on --sph-normals=on
cmp -s sphn.vtk nsm.vtk && bad "SPH and area-weighted normals are the same bytes"
# the mesh AABB: triangles outside removed, vertices clamped
run mbox splashsurf reconstruct particles.vtk -o mbox.vtk -r=0.025 --mesh-aabb-min 0.1 0.1 0.2 --mesh-aabb-max 0.3 0.3 0.6 --mesh-aabb-clamp-verts=on
"$PM" info mbox.vtk --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
lo, hi = d["bbox_min"], d["bbox_max"]
ok = all(lo[a] >= m - 1e-6 for a, m in enumerate((0.1, 0.1, 0.2))) and all(hi[a] <= m + 1e-6 for a, m in enumerate((0.3, 0.3, 0.6)))
sys.exit(0 if ok and d["boundary_edges"] > 0 and d["triangles"] > 0 else 1)' || bad "--mesh-aabb-min/max with clamping"
# check-mesh: passes on a closed mesh, fails on the clipped one naming an edge
run chk splashsurf reconstruct particles.vtk -o chk.vtk -r=0.025 --check-mesh=on
"$PM" splashsurf reconstruct particles.vtk -o chkbad.vtk -r=0.025 --mesh-aabb-min 0.1 0.1 0.2 --mesh-aabb-max 0.3 0.3 0.6 --check-mesh-closed=on >chkbad.out 2>chkbad.err
rc=$?
[ $rc -eq 1 ] && grep -q "not closed" chkbad.err && grep -q "edge (" chkbad.err && [ ! -e chkbad.vtk ] || bad "--check-mesh-closed on an open mesh: exit $rc, $(cat chkbad.err)"
run chkman splashsurf reconstruct particles.vtk -o chkman.vtk -r=0.025 --mesh-aabb-min 0.1 0.1 0.2 --mesh-aabb-max 0.3 0.3 0.6 --check-mesh-manifold=on --check-mesh-orientation=on
# quads
run quads splashsurf reconstruct particles.vtk -o quads.vtk -r=0.025 --mesh-cleanup=on --generate-quads=on --quad-max-edge-diag-ratio 1.75 --quad-max-normal-angle 10 --quad-max-interior-angle 135
python3 - quads.vtk <<'PY' || bad "--generate-quads: no quads in the file"
import re, struct, sys
data = open(sys.argv[1], "rb").read()
m = re.search(rb"POLYGONS (\d+) (\d+)\n", data)
cells, ints = int(m.group(1)), int(m.group(2))
quads = ints - 4 * cells
assert quads > cells // 10, (cells, quads)
PY
expect_mesh quads quads.vtk 1 1000000
# beyond splashsurf: components, decimation
run comp reconstruct particles.vtk -o comp.vtk -r=0.025 --keep-largest-component=on
read -r v t c m o k <<<"$(mesh comp.vtk)"
[ "$K0" -gt 1 ] && [ "$k" -eq 1 ] || bad "--keep-largest-component: $K0 -> $k components"
run comp2 reconstruct particles.vtk -o comp2.vtk -r=0.025 --remove-components-below 2000
read -r v t c m o k2 <<<"$(mesh comp2.vtk)"
[ "$k2" -eq 1 ] || bad "--remove-components-below 2000: $k2 components"
if "$PM" --version | grep -q .; then
  "$PM" reconstruct particles.vtk -o dec.vtk -r=0.025 --decimate-target 2000 -q 2>dec.err
  rc=$?
  if [ $rc -eq 0 ]; then
    read -r v t c m o k <<<"$(mesh dec.vtk)"
    [ "$t" -le 2000 ] && [ "$t" -gt 1000 ] && [ "$c$m$o" = 111 ] || bad "--decimate-target 2000: $t triangles, closed $c manifold $m oriented $o"
  elif ! grep -q "meshoptimizer" dec.err; then
    bad "--decimate-target: exit $rc: $(cat dec.err)"
  fi
fi

# ---- sequences: default output names, -s/-e ------------------------------
run seq splashsurf reconstruct "fluid_{}.xyz" -r=0.025 -s 4 -e=12
[ -s fluid_surface_04.vtk ] && [ -s fluid_surface_12.vtk ] && [ ! -e fluid_surface_03.vtk ] || bad "sequence: outputs $(ls fluid_surface_* 2>/dev/null | tr '\n' ' ')"
run seqdir reconstruct "fluid_{}.xyz" -r=0.025 --output-dir seq/out -o "m_{}.ply" --start-index 3 --end-index 3
[ -s seq/out/m_03.ply ] && [ ! -e seq/out/m_04.ply ] || bad "sequence with --output-dir"

# ---- usage errors name the option ----------------------------------------
err() { local want=$1 words=$2; shift 2
  "$PM" "$@" >e.out 2>e.err; local rc=$?
  [ $rc -eq "$want" ] && grep -q -F -- "$words" e.err || bad "'$*': exit $rc, expected $want with '$words': $(head -2 e.err)"; }
err 2 "--normals expects one of" splashsurf reconstruct particles.vtk -r=0.025 --normals=maybe
err 2 "--mesh-cleanup expects on or off" splashsurf reconstruct particles.vtk -r=0.025 --mesh-cleanup=yes
err 2 "three numbers" reconstruct particles.vtk -r=0.025 --particle-aabb-min 0 0 --particle-aabb-max 1 1 1
err 2 "go together" splashsurf reconstruct particles.vtk -r=0.025 --mesh-aabb-min 0 0 0
err 2 "'convert' is not provided" splashsurf convert --particles particles.vtk -o x.vtk
err 2 "missing -r" splashsurf reconstruct particles.vtk
err 2 ".vtk or .ply only" splashsurf reconstruct particles.vtk -r=0.025 -a velocity -o a.obj
run plyattr splashsurf reconstruct particles.vtk -r=0.025 -o a.ply -a velocity
grep -a -q "property float velocity_x" a.ply || bad "-a velocity: no velocity_x property in the PLY"
err 1 "no point attribute 'speed'" splashsurf reconstruct particles.vtk -r=0.025 -a speed -o b.vtk
grep -q "velocity" e.err || bad "the missing attribute's message does not list 'velocity'"

[ $fail -eq 0 ] && echo "cli_splashsurf: all checks passed"
exit $fail
