#!/bin/bash
# The CLI's frame sequence on a GPU (issue 23 item 6): a ball of 31,000
# sparse particles (each its own blob at -r 0.35 -c 0.5: about 7 M
# triangles, a 177 MB binary PLY) meshed as one run (3 times) and as a
# sequence of FRAMES copies, each frame's file written while the next is
# meshed. Prints each run's stages, the sequence's rate line, and the
# page cache's write speed for the same bytes (dd) beside the writer's.
# With BENCH_DOWNLOAD (build/bench/bench_download), also the pinned
# device-to-host copy of the mesh's bytes in the same run: the figure the
# extract stage is held to (issue 23 item 6).
# Usage: bench_cli_sequence.sh PYRAMESH [FRAMES] [DEVICE] [BENCH_DOWNLOAD]
#        (default 100, cuda)
set -u
PM=$1
FRAMES=${2:-100}
DEV=${3:-cuda}
DL=${4:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W/ball.xyz" <<'PY'
import random, sys
random.seed(5)
pts = []
while len(pts) < 31000:
    p = [random.uniform(-67, 67) for _ in range(3)]
    if sum(c * c for c in p) < 67 * 67:
        pts.append(p)
open(sys.argv[1], "w").write("".join("%.5f %.5f %.5f\n" % tuple(p) for p in pts))
PY
for k in 1 2 3; do
  "$PM" reconstruct "$W/ball.xyz" -r 0.35 -c 0.5 --device "$DEV" -o "$W/one.ply" -q --stats "$W/one.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('single run', sys.argv[2], d['triangles'], 'triangles', d['timings_ms'], d.get('extract_stages_ms'))" "$W/one.json" $k
done
BYTES=$(stat -c %s "$W/one.ply")
if [ -n "$DL" ]; then
  # The mesh's bytes in device memory: positions and normals, 3 indices.
  MB=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['vertices'] * (24 if d['normals'] != 'none' else 12) + d['triangles'] * 12)" "$W/one.json")
  "$DL" "$MB"
fi
dd if="$W/one.ply" of="$W/dd.bin" bs=8M 2>&1 | tail -1 | sed 's/^/dd of the same bytes (page cache, no sync): /'
mkdir -p "$W/seq" "$W/out"
for i in $(seq -w 1 "$FRAMES"); do ln -s "$W/ball.xyz" "$W/seq/f_$i.xyz"; done
"$PM" reconstruct "$W/seq/f_{}.xyz" -r 0.35 -c 0.5 --device "$DEV" -o "$W/out/o_{}.ply" \
  --stats "$W/out/s_{}.json" | tail -2
python3 - "$W/out" <<'PY'
import glob, json, sys
t = [json.load(open(f))["timings_ms"] for f in sorted(glob.glob(sys.argv[1] + "/s_*.json"))]
n = len(t)
for k in ("read", "field", "extract", "write", "total"):
    v = sorted(x.get(k, 0) for x in t)
    print("  %-8s median %.1f ms, max %.1f ms over %d frames" % (k, v[n // 2], v[-1], n))
PY
echo "file: $BYTES bytes"
