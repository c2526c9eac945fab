#!/bin/bash
# Same-run A/B of the GPU benchmarks: builds the tree at OLD_SRC (a copy of
# an earlier commit, e.g. `git archive <rev> | tar -x -C .baseline`) and this
# tree, then runs each GPU benchmark of both, alternating old/new twice, so
# that a change is judged against figures taken on the same machine in the
# same call (BENCHMARKS.md: no comparison with figures copied from earlier).
# Usage: bench/ab_gpu.sh OLD_SRC OUTDIR [SIZES]   (SIZES: 128,256,512,768)
set -u
OLD=$1
OUT=$2
SIZES=${3:-128,256,512,768}
NEW=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
build() { # src dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build "$2" -j "$(nproc)" --target bench_cuda_isosurface bench_cuda_reconstruct >"$OUT/build_$(basename "$2").log" 2>&1
}
build "$OLD" "$OLD/build-ab" || { echo "old build failed"; tail -20 "$OUT/build_build-ab.log"; exit 1; }
build "$NEW" "$NEW/build-ab" || { echo "new build failed"; tail -20 "$OUT/build_build-ab.log"; exit 1; }
for round in 1 2; do
  for side in old new; do
    if [ $side = old ]; then B="$OLD/build-ab"; else B="$NEW/build-ab"; fi
    echo "== round $round $side: bench_cuda_isosurface"
    "$B/bench/bench_cuda_isosurface" 1024 128 "$SIZES" >"$OUT/iso_${side}_$round.log" 2>&1
    grep -v "^check" "$OUT/iso_${side}_$round.log" | head -60
    echo "== round $round $side: bench_cuda_reconstruct"
    "$B/bench/bench_cuda_reconstruct" >"$OUT/rec_${side}_$round.log" 2>&1
    grep -E "^\| 1|best|async|identical|differ" "$OUT/rec_${side}_$round.log" | tail -6
  done
done
