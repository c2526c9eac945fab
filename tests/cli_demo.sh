#!/bin/bash
# `pyramesh demo` with a small particle count: runs without input, writes the
# mesh, prints the summary and the viewer hint, is deterministic (two runs,
# identical bytes) and silent with --quiet.
# Usage: cli_demo.sh PYRAMESH WORKDIR.
set -u
PM=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1
"$PM" demo --particles 20000 --stats d.json >stdout 2>stderr
rc=$?
[ $rc -eq 0 ] || { bad "demo exited $rc: $(cat stderr)"; exit 1; }
[ -s demo.ply ] || bad "demo.ply not written in the current directory"
grep -q "open demo.ply with MeshLab, ParaView or Blender" stdout || bad "no viewer hint"
grep -q "triangles" stdout || bad "no summary"
python3 - <<'PY' || fail=1
import json
d = json.load(open("d.json"))
assert 15000 < d["particles_read"] < 25000, d["particles_read"]
assert d["triangles"] > 0 and d["vertices"] > 0
for k in ("read", "neighbours", "density", "field", "extract", "write"):
    assert k in d["timings_ms"], k
PY
"$PM" demo --particles 20000 -o again.ply --quiet >stdout 2>stderr || bad "second run failed"
[ -s stdout ] || [ -s stderr ] && bad "--quiet printed: $(cat stdout stderr)"
cmp -s demo.ply again.ply || bad "two demo runs gave different files"
[ $fail -eq 0 ] && echo "cli_demo: all passed"
exit $fail
