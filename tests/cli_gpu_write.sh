#!/bin/bash
# The CLI on a GPU keeps the mesh in device memory and writes it with
# pm_mesh_write_context: a binary PLY streamed from the device, other
# formats and ASCII PLY from a downloaded copy. Every file equals the CPU
# run's, byte for byte: isosurface (indexed and soup, with and without
# normals) and reconstruct, single runs and `{}` sequences (the writer
# thread's own context), and the extract stage no longer holds a copy.
# Skipped (77) where no GPU is usable.
# Usage: cli_gpu_write.sh PYRAMESH WORKDIR
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

# A wavy ball, 96^3 f32, and points; after the GPU probe, a gyroid of
# 128^3 (period 8 cells: about 1.5 M triangles, so the streamed body spans
# several 8 MiB chunks of vertex and of face records).
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import math, struct, random
n = 96
c = (n - 1) / 2.0
v = []
for k in range(n):
    for j in range(n):
        for i in range(n):
            x, y, z = (i - c) / n, (j - c) / n, (k - c) / n
            v.append(0.4 - math.sqrt(x * x + y * y + z * z) + 0.02 * math.sin(40 * x) * math.cos(37 * y))
open("small.raw", "wb").write(struct.pack("<%df" % len(v), *v))
random.seed(3)
pts = []
while len(pts) < 4000:
    p = [random.uniform(-3, 3) for _ in range(3)]
    if sum(q * q for q in p) < 9:
        pts.append(p)
open("pts.xyz", "w").write("".join("%.5f %.5f %.5f\n" % tuple(p) for p in pts))
PY
SMALL=(isosurface small.raw --raw-dims 96,96,96 --raw-type f32 --iso 0)
LARGE=(isosurface large.raw --raw-dims 128,128,128 --raw-type f32 --iso 0.1)
REC=(reconstruct pts.xyz -r 0.12 -c 0.5)

# The GPU is found by the version line, not by the path under test.
if ! "$PM" --version | grep -q "^default device: cuda"; then
  echo "skipped: no usable GPU"
  exit 77
fi
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import math, struct
n, w = 128, 2 * math.pi / 8
s = [math.sin(w * i) for i in range(n)]
c = [math.cos(w * i) for i in range(n)]
v = [s[i] * c[j] + s[j] * c[k] + s[k] * c[i] for k in range(n) for j in range(n) for i in range(n)]
open("large.raw", "wb").write(struct.pack("<%df" % len(v), *v))
PY

# pair NAME EXT args...: the same run on the CPU and the GPU, files compared.
pair() {
  local name=$1 ext=$2; shift 2
  run "$name.cpu" "$@" -o "$name.cpu.$ext" --device cpu -q || return
  run "$name.gpu" "$@" -o "$name.gpu.$ext" --device cuda -q --stats "$name.json" || return
  cmp -s "$name.cpu.$ext" "$name.gpu.$ext" || bad "$name ($ext): --device cuda wrote other bytes than cpu"
}
pair iso ply "${SMALL[@]}"
pair iso_soup ply "${SMALL[@]}" --soup
pair iso_nonormals ply "${SMALL[@]}" --normals none
pair iso_ascii ply "${SMALL[@]}" --ascii
pair iso_obj obj "${SMALL[@]}"
pair iso_stl stl "${SMALL[@]}"
pair iso_large ply "${LARGE[@]}"
pair iso_large_soup ply "${LARGE[@]}" --soup
pair rec ply "${REC[@]}"
pair rec_obj obj "${REC[@]}"
pair rec_sparse ply "${REC[@]}" --grid sparse

# The extract stage holds no download: the mesh stayed on the device; and
# each file took the write path expected of its format.
python3 - <<'PY' || bad "--stats: extract stage or write path not as expected"
import json
d = json.load(open("iso_large.json"))
st = d.get("extract_stages_ms", {})
assert d["device"] == "cuda", d["device"]
assert st["copy"] < 0.5, st
want = {"iso": "device-stream", "iso_soup": "device-stream", "iso_large": "device-stream",
        "rec": "device-stream", "iso_ascii": "device-download", "iso_obj": "device-download",
        "iso_stl": "device-download", "rec_obj": "device-download",
        "rec_sparse": "host"}  # the sparse grid's merge makes the mesh on the host
for name, path in want.items():
    got = json.load(open(name + ".json")).get("write_path")
    assert got == path, (name, got, path)
PY

# Sequences: frames written by the writer thread through its own context.
mkdir -p seq out_cpu out_gpu
for i in 1 2 3 4 5; do ln -s ../small.raw seq/f_$i.raw; done
run seq_cpu isosurface "seq/f_{}.raw" --raw-dims 96,96,96 --raw-type f32 --iso 0 -o "out_cpu/o_{}.ply" --device cpu -e 2 -q
run seq_gpu isosurface "seq/f_{}.raw" --raw-dims 96,96,96 --raw-type f32 --iso 0 -o "out_gpu/o_{}.ply" --device cuda -e 2 -q
for i in 1 2; do
  cmp -s out_cpu/o_$i.ply out_gpu/o_$i.ply || bad "sequence frame $i: --device cuda wrote other bytes than cpu"
done
mkdir -p rseq rout_cpu rout_gpu
for i in 1 2 3 4; do ln -s ../pts.xyz rseq/p_$i.xyz; done
run rseq_cpu reconstruct "rseq/p_{}.xyz" -r 0.12 -c 0.5 -o "rout_cpu/o_{}.ply" --device cpu -q
run rseq_gpu reconstruct "rseq/p_{}.xyz" -r 0.12 -c 0.5 -o "rout_gpu/o_{}.ply" --device cuda
for i in 1 2 3 4; do
  cmp -s rout_cpu/o_$i.ply rout_gpu/o_$i.ply || bad "reconstruct sequence frame $i: --device cuda wrote other bytes than cpu"
done
grep -q "overlapped with the next frame" rseq_gpu.out || bad "reconstruct sequence: writes not overlapped"
ls rout_gpu | grep -q '\.tmp\.' && bad "temporary files left behind"

[ $fail -eq 0 ] && echo "cli_gpu_write: all checks passed"
exit $fail
