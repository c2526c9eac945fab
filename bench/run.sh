#!/bin/sh
# make bench: runs every benchmark program that was built. GPU benchmarks
# (bench_cuda_*) run only when a GPU is usable; they print a note otherwise.
BUILD=${1:-build}
status=0
for b in "$BUILD"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  case "$b" in
  *bench_cuda_*)
    if ! nvidia-smi -L >/dev/null 2>&1; then echo "skipped: no GPU"; continue; fi ;;
  esac
  "$b" || status=1
done
# CPU peers (VTK Flying Edges, vtkMarchingCubes, scikit-image) beside ours,
# when Debian's python3-vtk9 and python3-skimage are installed.
if /usr/bin/python3 -c "import vtkmodules, skimage" 2>/dev/null; then
  echo "== peers_cpu.py"
  /usr/bin/python3 "$(dirname "$0")/peers_cpu.py" "$BUILD/bench/bench_cpu_isosurface" 256 512 || status=1
fi
exit $status
