#!/bin/bash
# pyramesh collide and info --self-intersections: counts, CSV (header,
# atomic write), exit statuses, usage errors. Usage: cli_collide.sh CLI WORKDIR
set -u
cli=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
fail=0
check() { if ! eval "$1"; then echo "FAILED: $2"; fail=1; fi; }

# Two unit cubes (12 triangles each) as ASCII PLY.
cube() {
    cat <<PLY
ply
format ascii 1.0
element vertex 8
property float x
property float y
property float z
element face 12
property list uchar int vertex_indices
end_header
0 0 0
1 0 0
1 1 0
0 1 0
0 0 1
1 0 1
1 1 1
0 1 1
3 0 2 1
3 0 3 2
3 4 5 6
3 4 6 7
3 0 1 5
3 0 5 4
3 2 3 7
3 2 7 6
3 1 2 6
3 1 6 5
3 0 4 7
3 0 7 3
PLY
}
cube > a.ply
cp a.ply b.ply

out=$("$cli" collide a.ply b.ply --translate 3,0,0 -o none.csv); rc=$?
check "[ $rc -eq 0 ]" "no collision must exit 0 (got $rc)"
check "echo '$out' | grep -q '^0 intersecting'" "apart: count 0 ($out)"
check "[ \"\$(cat none.csv)\" = 'a,b' ]" "apart: CSV holds the header only"

out=$("$cli" collide a.ply b.ply --translate 0.5,0.5,0.5 -o p.csv); rc=$?
check "[ $rc -eq 0 ]" "overlap exits 0"
n=$(echo "$out" | awk '{print $1}')
check "[ \"$n\" -gt 0 ]" "overlapping cubes intersect ($out)"
check "[ \$(($(wc -l < p.csv) - 1)) -eq $n ]" "CSV has one line per pair"
check "head -1 p.csv | grep -qx 'a,b'" "CSV header"
check "sort -t, -k1,1n -k2,2n -c <(tail -n +2 p.csv)" "CSV sorted by a then b"

# The same through --transform and --rotate-deg (a 0-degree rotation).
t=$("$cli" collide a.ply b.ply --transform 1,0,0,0,1,0,0,0,1,0.5,0.5,0.5 | awk '{print $1}')
check "[ \"$t\" = \"$n\" ]" "--transform matches --translate ($t vs $n)"
t=$("$cli" collide a.ply b.ply --rotate-deg z,0 --translate 0.5,0.5,0.5 | awk '{print $1}')
check "[ \"$t\" = \"$n\" ]" "--rotate-deg z,0 changes nothing ($t vs $n)"

# Touching faces count: the cube moved by exactly 1 along x shares a face.
t=$("$cli" collide a.ply b.ply --translate 1,0,0 | awk '{print $1}')
check "[ \"$t\" -gt 0 ]" "touching cubes intersect ($t)"

# Self: a closed cube has none (neighbours excluded).
out=$("$cli" collide a.ply --self --json); rc=$?
check "[ $rc -eq 0 ]" "--self exits 0"
check "echo '$out' | grep -q '\"pairs\": 0'" "closed cube: no self-intersection ($out)"
check "\"$cli\" info a.ply --self-intersections | grep -q 'self-intersections: 0'" \
    "info --self-intersections"

# --stats writes JSON.
"$cli" collide a.ply b.ply --translate 0.5,0,0 --quiet --stats s.json
check "grep -q '\"pairs\"' s.json" "--stats JSON"

# Usage errors: exit 2.
"$cli" collide a.ply >/dev/null 2>&1; check "[ $? -eq 2 ]" "one mesh without --self"
"$cli" collide a.ply b.ply --self >/dev/null 2>&1; check "[ $? -eq 2 ]" "--self with two"
"$cli" collide a.ply b.ply --transform 1,2,3 >/dev/null 2>&1; check "[ $? -eq 2 ]" "short --transform"
"$cli" collide a.ply b.ply --rotate-deg w,3 >/dev/null 2>&1; check "[ $? -eq 2 ]" "bad axis"
"$cli" collide a.ply missing.ply >/dev/null 2>&1; check "[ $? -eq 1 ]" "missing input exits 1"
exit $fail
