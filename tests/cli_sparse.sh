#!/bin/bash
# Sparse particle reconstruction from the command line (docs/scale.md):
# splashsurf's free_particles_1000 fixture at -r 0.025, whose dense grid
# (12196 x 7913 x 16001 points) needs 6 TB, meshes through the bricks
# within a small --max-memory into a closed, manifold, oriented surface
# (one sphere per free particle); --grid dense says why it cannot;
# --grid sparse and dense give the same bytes where both fit (splashsurf's
# free_particles_01 parameters, the bunny with post-processing), so do 1
# and 2 threads and every brick size; splashsurf's --subdomain-* switches
# choose the path; --stats reports it.
# Usage: cli_sparse.sh PYRAMESH WORKDIR
set -u
PM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
DATA=$(cd "$(dirname "$0")" && pwd)/data/splashsurf
rm -rf "$W"; mkdir -p "$W"
cd "$W" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
run() {
  local name=$1; shift
  "$PM" "$@" >"$name.out" 2>"$name.err"
  local rc=$?
  [ $rc -eq 0 ] || { bad "$name: exit $rc: $*"; sed 's/^/  /' "$name.err" | head -5; return 1; }
}
mesh() { "$PM" info "$1" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["vertices"], d["triangles"], int(d["closed"]), int(d["manifold"]), int(d["oriented"]), d["components"])'; }
# json_path FILE: the "path" of a --stats file.
json_path() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["path"])' "$1"; }
same() { cmp -s "$1" "$2" || bad "$3: $1 and $2 differ"; }

FREE=$DATA/free_particles_1000_particles.vtk
[ -f "$FREE" ] || { echo "skipped: $FREE not present"; exit 77; }

# ---- the fixture at -r 0.025: only the sparse path can mesh it ----------------
run free reconstruct "$FREE" -r 0.025 -o free.ply --max-memory 1G --stats free.json
read -r v t c m o k <<<"$(mesh free.ply)"
[ "$c$m$o" = 111 ] || bad "free -r 0.025: closed $c manifold $m oriented $o"
[ "$k" -ge 900 ] && [ "$k" -le 1000 ] || bad "free -r 0.025: $k components, expected about one per particle (<= 1000)"
[ "$t" -gt 100000 ] || bad "free -r 0.025: only $t triangles"
p=$(json_path free.json)
case "$p" in *grid=sparse*brick=*bricks=*peak_mb=*) ;; *) bad "free: --stats path '$p' lacks the sparse words" ;; esac
python3 - free.json <<'PY' || bad "free: --stats figures"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["grid_dims"][0] * d["grid_dims"][1] * d["grid_dims"][2] > 10**12, d["grid_dims"]
st = d["extract_stages_ms"]
assert set(st) == {"fields", "pieces", "merge"}, st
words = dict(w.split("=") for w in d["path"].split())
occ, total = map(int, words["occupied"].split("/"))
assert 0 < occ < total, words
assert int(words["peak_mb"]) < 1024, words
PY
echo "free_particles_1000 -r 0.025: $v vertices, $t triangles, $k components, path $p"

# The dense grid does not fit: a clear error naming the size, no output.
"$PM" reconstruct "$FREE" -r 0.025 -o dense.ply --grid dense --max-memory 1G >dense.out 2>dense.err
rc=$?
[ $rc -eq 1 ] || bad "--grid dense: exit $rc, expected 1"
grep -q "needs .* GB, more than the memory limit" dense.err || bad "--grid dense: message: $(cat dense.err)"
[ ! -e dense.ply ] || bad "--grid dense: an output file was written"
# Pieces that do not fit the limit: a clear error too.
"$PM" reconstruct "$FREE" -r 0.025 -o tiny.ply --grid sparse --max-memory 8M >tiny.out 2>tiny.err
rc=$?
[ $rc -eq 1 ] && grep -q "memory limit" tiny.err || bad "--max-memory 8M: exit $rc: $(cat tiny.err)"
[ ! -e tiny.ply ] || bad "--max-memory 8M: an output file was written"

# 1 and 2 threads, brick sizes: the same bytes.
run free1 reconstruct "$FREE" -r 0.025 -o free1.ply -n 1 --max-memory 1G
same free.ply free1.ply "threads 1 vs 2"
run free16 reconstruct "$FREE" -r 0.025 -o free16.ply --brick 16 --max-memory 1G
same free.ply free16.ply "--brick 16"
run freesub splashsurf reconstruct "$FREE" -r=0.025 -o freesub.ply --normals=central --subdomain-grid=on --subdomain-cubes 64 --max-memory 1G --stats freesub.json
same free.ply freesub.ply "splashsurf --subdomain-cubes 64"
case "$(json_path freesub.json)" in *grid=sparse*brick=64*) ;; *) bad "--subdomain-cubes 64: path $(json_path freesub.json)" ;; esac

# ---- splashsurf's free_particles_01 parameters: sparse == dense ------------------
for g in dense sparse auto; do
  run fp01_$g splashsurf reconstruct "$FREE" -o fp01_$g.vtk -r=0.5 -l=2.0 -c=1.5 -t=0.45 --grid $g --stats fp01_$g.json
done
same fp01_dense.vtk fp01_sparse.vtk "free_particles_01 sparse vs dense"
same fp01_dense.vtk fp01_auto.vtk "free_particles_01 auto vs dense"
case "$(json_path fp01_sparse.json)" in *grid=sparse*) ;; *) bad "fp01 --grid sparse: path $(json_path fp01_sparse.json)" ;; esac
case "$(json_path fp01_dense.json)" in *grid=dense*) ;; *) bad "fp01 --grid dense: path $(json_path fp01_dense.json)" ;; esac
read -r v t c m o k <<<"$(mesh fp01_sparse.vtk)"
[ "$c$m$o" = 111 ] || bad "free_particles_01: closed $c manifold $m oriented $o"
[ "$t" -gt 21000 ] && [ "$t" -lt 25000 ] || bad "free_particles_01: $t triangles, splashsurf expects (21000, 25000)"
echo "free_particles_01: $t triangles, sparse == dense"

# splashsurf's switches: --subdomain-grid=off is dense, on without auto-disable sparse.
run sg_off splashsurf reconstruct "$FREE" -o sg_off.vtk -r=0.5 -c=1.5 -t=0.45 --subdomain-grid=off --stats sg_off.json
run sg_on splashsurf reconstruct "$FREE" -o sg_on.vtk -r=0.5 -c=1.5 -t=0.45 --subdomain-grid=on --subdomain-grid-auto-disable=off --stats sg_on.json
case "$(json_path sg_off.json)" in *grid=dense*) ;; *) bad "--subdomain-grid=off: path $(json_path sg_off.json)" ;; esac
case "$(json_path sg_on.json)" in *grid=sparse*) ;; *) bad "--subdomain-grid=on auto-disable=off: path $(json_path sg_on.json)" ;; esac
same sg_off.vtk sg_on.vtk "--subdomain-grid on vs off"

# ---- the other fixtures and the post-processing on a sparse mesh -----------------
B=$DATA/bunny_frame_14_7705_particles.vtk
H=$DATA/hilbert2_7954_particles.vtk
for g in dense sparse; do
  run bunny_$g splashsurf reconstruct "$B" -o bunny_$g.vtk -r=0.025 -l=2.0 -c=0.75 -t=0.6 --grid $g --brick 24
  run hilbert_$g splashsurf reconstruct "$H" -o hilbert_$g.vtk -r=0.025 -l=2.0 -c=1.1 -t=0.6 --grid $g -n 1
  run post_$g splashsurf reconstruct "$B" -o post_$g.vtk -r=0.025 -l=2.0 -c=1.0 --mesh-cleanup=on --mesh-smoothing-weights=on --mesh-smoothing-iters=5 --normals=on --output-smoothing-weights=on --grid $g
  run soup_$g reconstruct "$B" -o soup_$g.ply -r 0.025 --normals sobel --soup --grid $g
done
same bunny_dense.vtk bunny_sparse.vtk "bunny sparse vs dense"
same hilbert_dense.vtk hilbert_sparse.vtk "hilbert2 sparse vs dense"
same post_dense.vtk post_sparse.vtk "bunny post-processed sparse vs dense"
same soup_dense.ply soup_sparse.ply "bunny soup with Sobel normals sparse vs dense"
read -r v t c m o k <<<"$(mesh bunny_sparse.vtk)"
[ "$c$m$o" = 111 ] && [ "$t" -gt 60000 ] && [ "$t" -lt 80000 ] || bad "bunny sparse: $t triangles, closed $c manifold $m oriented $o"

# Usage errors.
"$PM" reconstruct "$FREE" -r 0.025 --grid sideways >u.out 2>u.err; [ $? -eq 2 ] || bad "--grid sideways: not a usage error"
"$PM" reconstruct "$FREE" -r 0.025 --method blur --grid sparse -o blur.ply >b.out 2>b.err
[ $? -eq 1 ] && grep -q "blur" b.err || bad "--method blur --grid sparse: $(cat b.err)"

[ $fail -eq 0 ] && echo "cli_sparse: all checks passed"
exit $fail
