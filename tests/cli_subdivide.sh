#!/bin/bash
# `pyramesh subdivide` on generated meshes: uniform levels give the exact
# counts (V + E vertices, 4F triangles per level) in OBJ, PLY and from an
# STL soup (welded first); adaptive output (--max-edge/--max-angle and
# --max-deviation) stays closed, manifold and oriented (by `pyramesh info
# --json`) with fewer triangles than uniform, the same bytes on 1 and 2
# threads; --stats JSON; the errors for a non-manifold input and bad options.
# Usage: cli_subdivide.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

python3 - "$W" <<'PY' || { echo "python3 failed"; exit 1; }
import math, struct, sys
w = sys.argv[1]
# An octahedron (6 vertices, 12 edges, 8 triangles) as OBJ and binary STL.
p = [(1,0,0),(-1,0,0),(0,1,0),(0,-1,0),(0,0,1),(0,0,-1)]
f = [(0,2,4),(2,1,4),(1,3,4),(3,0,4),(2,0,5),(1,2,5),(3,1,5),(0,3,5)]
with open(w + "/octa.obj", "w") as o:
    for v in p: o.write("v %g %g %g\n" % v)
    for t in f: o.write("f %d %d %d\n" % tuple(i + 1 for i in t))
with open(w + "/octa.stl", "wb") as o:
    o.write(b"\0" * 80 + struct.pack("<I", len(f)))
    for t in f:
        o.write(struct.pack("<3f", 0, 0, 0))
        for i in t: o.write(struct.pack("<3f", *p[i]))
        o.write(b"\0\0")
# A torus grid 40 x 12 (480 vertices, 960 triangles).
nu, nv = 40, 12
with open(w + "/torus.obj", "w") as o:
    for i in range(nu):
        for j in range(nv):
            u, v = 2 * math.pi * i / nu, 2 * math.pi * j / nv
            o.write("v %.6f %.6f %.6f\n" % ((2 + math.cos(v)) * math.cos(u), (2 + math.cos(v)) * math.sin(u), math.sin(v)))
    for i in range(nu):
        for j in range(nv):
            a = i * nv + j; b = ((i + 1) % nu) * nv + j; c = ((i + 1) % nu) * nv + (j + 1) % nv; d = i * nv + (j + 1) % nv
            o.write("f %d %d %d\nf %d %d %d\n" % (a + 1, b + 1, c + 1, a + 1, c + 1, d + 1))
# Three triangles on one edge.
with open(w + "/fin.obj", "w") as o:
    o.write("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\nf 1 2 3\nf 2 1 4\nf 1 2 5\n")
PY

info() { "$PM" info --json "$1" >"$W/info.json" 2>&1; }
field() { python3 -c "import json,sys; print(json.load(open('$W/info.json'))['$1'])"; }

# Uniform: 2 levels of the octahedron: V 6 -> 18 -> 66, F 8 -> 32 -> 128.
for ext in obj ply vtk; do
  "$PM" subdivide "$W/octa.obj" -o "$W/octa2.$ext" --levels 2 -q --device cpu \
    || bad "uniform to .$ext failed"
  info "$W/octa2.$ext"
  [ "$(field vertices)" = 66 ] && [ "$(field triangles)" = 128 ] \
    || bad "octahedron level 2 .$ext: $(cat "$W/info.json")"
  [ "$(field closed)" = True ] || bad "octahedron level 2 .$ext not closed"
done
"$PM" subdivide "$W/octa.stl" -o "$W/octa_stl.ply" --levels 1 -q || bad "STL soup failed"
info "$W/octa_stl.ply"
[ "$(field vertices)" = 18 ] && [ "$(field triangles)" = 32 ] \
  || bad "welded STL level 1: $(cat "$W/info.json")"

# Adaptive: closed, manifold, fewer triangles than uniform.
"$PM" subdivide "$W/torus.obj" -o "$W/t_uni.ply" --levels 3 -q || bad "uniform torus failed"
"$PM" subdivide "$W/torus.obj" -o "$W/t_ada.ply" --levels 3 --max-edge 0.2 --max-angle 10 \
  --stats "$W/stats.json" -q || bad "adaptive torus failed"
info "$W/t_uni.ply"; tu=$(field triangles)
info "$W/t_ada.ply"; ta=$(field triangles)
[ "$(field closed)" = True ] && [ "$(field manifold)" = True ] && [ "$(field oriented)" = True ] \
  || bad "adaptive torus not closed/manifold/oriented: $(cat "$W/info.json")"
[ "$tu" = 61440 ] || bad "uniform torus level 3: $tu triangles"
[ "$ta" -gt 960 ] && [ "$ta" -lt "$tu" ] || bad "adaptive torus: $ta triangles (uniform $tu)"
python3 -c "
import json; s = json.load(open('$W/stats.json'))
assert s['command'] == 'subdivide' and s['triangles'] == $ta and s['input_triangles'] == 960
assert sum(l['finished'] for l in s['levels']) == $ta
assert s['host_waits'] == 2 + sum(1 for i, l in enumerate(s['levels']) if l['stream'] > 0 and i < 3)
" || bad "stats: $(cat "$W/stats.json")"
"$PM" subdivide "$W/torus.obj" -o "$W/t_t1.ply" --levels 2 --max-edge 0.3 --threads 1 -q
"$PM" subdivide "$W/torus.obj" -o "$W/t_t2.ply" --levels 2 --max-edge 0.3 --threads 2 -q
cmp -s "$W/t_t1.ply" "$W/t_t2.ply" || bad "1 and 2 threads differ"

# Adaptive by deviation: the torus's level 2 edges move the surface by less
# than 0.002, so part of level 2 is written unsplit.
"$PM" subdivide "$W/torus.obj" -o "$W/t_dev.ply" --levels 3 --max-deviation 0.002 \
  --stats "$W/stats_dev.json" -q || bad "deviation torus failed"
info "$W/t_dev.ply"; td=$(field triangles)
[ "$(field closed)" = True ] && [ "$(field manifold)" = True ] && [ "$(field oriented)" = True ] \
  || bad "deviation torus not closed/manifold/oriented: $(cat "$W/info.json")"
[ "$td" -gt 15360 ] && [ "$td" -lt "$tu" ] || bad "deviation torus: $td triangles (uniform $tu)"
python3 -c "
import json; s = json.load(open('$W/stats_dev.json'))
assert s['triangles'] == $td and s['levels'][2]['finished'] > 0
" || bad "deviation stats: $(cat "$W/stats_dev.json")"
"$PM" subdivide "$W/torus.obj" -o "$W/t_d1.ply" --levels 3 --max-deviation 0.002 --threads 1 -q
"$PM" subdivide "$W/torus.obj" -o "$W/t_d2.ply" --levels 3 --max-deviation 0.002 --threads 2 -q
cmp -s "$W/t_d1.ply" "$W/t_d2.ply" || bad "deviation: 1 and 2 threads differ"

# Errors.
"$PM" subdivide "$W/fin.obj" -o "$W/fin2.ply" 2>"$W/err"; rc=$?
[ $rc -eq 1 ] && grep -q "non-manifold edge (0, 1)" "$W/err" || bad "non-manifold: rc $rc $(cat "$W/err")"
[ ! -e "$W/fin2.ply" ] || bad "output written for a refused input"
"$PM" subdivide "$W/octa.obj" -o "$W/x.ply" --levels 17 2>/dev/null; rc=$?
[ $rc -eq 2 ] || bad "--levels 17 exited $rc"
"$PM" subdivide "$W/octa.obj" -o "$W/x.ply" --max-angle 190 2>/dev/null; rc=$?
[ $rc -eq 2 ] || bad "--max-angle 190 exited $rc"
"$PM" subdivide "$W/octa.obj" -o "$W/x.ply" --max-deviation -1 2>/dev/null; rc=$?
[ $rc -eq 2 ] || bad "--max-deviation -1 exited $rc"
"$PM" subdivide "$W/missing.obj" -o "$W/x.ply" 2>/dev/null; rc=$?
[ $rc -eq 1 ] || bad "missing input exited $rc"
"$PM" subdivide --help | grep -q "max-deviation" || bad "--help"

[ $fail -eq 0 ] && echo "cli_subdivide: all passed"
exit $fail
