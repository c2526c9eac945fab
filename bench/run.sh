#!/bin/sh
# make bench: runs every benchmark program that was built. GPU benchmarks
# (bench_cuda_*) run only when a GPU is usable; they print a note otherwise.
BUILD=${1:-build}
status=0
for b in "$BUILD"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
done
exit $status
