#!/bin/sh
# Installs what pyramesh needs on a fresh Debian machine: a C compiler with
# OpenMP, CMake, make and zlib, and the optional parts its tests use (GDCM,
# FCL, CGAL, OpenSubdiv, meshoptimizer, Python with NumPy). CUDA (nvcc) is optional and not installed
# here. Open MPI (the MPI layer) is installed and optional at build time. With --check-only, only reports (exit 1) when something is missing.
# With --fuzz, also clang, its sanitizer/libFuzzer runtime and libomp, which
# `make fuzz` needs.
set -e
missing=""
if [ "$1" = "--fuzz" ]; then
  command -v clang >/dev/null 2>&1 || missing="$missing clang"
  command -v clang++ >/dev/null 2>&1 || missing="$missing clang"
  ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 || missing="$missing libclang-rt-dev"
  [ -f /usr/lib/llvm-14/include/omp.h ] || ls /usr/lib/llvm-*/lib/clang/*/include/omp.h >/dev/null 2>&1 || missing="$missing libomp-dev"
fi
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v make >/dev/null 2>&1 || missing="$missing make"
[ -f /usr/include/zlib.h ] || missing="$missing zlib1g-dev"
[ -f /usr/include/png.h ] || missing="$missing libpng-dev"
# GDCM reads DICOM series; optional at build time (CMake detects it).
ls /usr/include/gdcm-*/gdcmImageReader.h >/dev/null 2>&1 || missing="$missing libgdcm-dev"
# Peers the tests and benchmarks compare with (optional at build time):
# FCL and CGAL (collision), OpenSubdiv (subdivision), meshoptimizer
# (decimation, pm_mesh_simplify).
[ -f /usr/include/fcl/fcl.h ] || missing="$missing libfcl-dev"
[ -f /usr/include/CGAL/version.h ] || missing="$missing libcgal-dev"
[ -f /usr/include/opensubdiv/far/topologyRefiner.h ] || missing="$missing libosd-dev"
[ -f /usr/include/meshoptimizer.h ] || missing="$missing libmeshoptimizer-dev"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
# Open MPI: the MPI layer (src/mpi/, docs/distributed.md) and its tests
# under mpirun; optional at build time.
command -v mpicc >/dev/null 2>&1 || missing="$missing libopenmpi-dev"
command -v mpirun >/dev/null 2>&1 || missing="$missing openmpi-bin"
# The Python package (python/): Debian's interpreter with its headers,
# NumPy, pytest, and scikit-image for the comparisons.
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
[ -f /usr/include/python3.11/Python.h ] || ls /usr/include/python3*/Python.h >/dev/null 2>&1 || missing="$missing python3-dev"
/usr/bin/python3 -c "import numpy" 2>/dev/null || missing="$missing python3-numpy"
/usr/bin/python3 -c "import pytest" 2>/dev/null || missing="$missing python3-pytest"
/usr/bin/python3 -c "import skimage" 2>/dev/null || missing="$missing python3-skimage"
/usr/bin/python3 -c "import setuptools" 2>/dev/null || missing="$missing python3-setuptools"
# VTK's Python module: the CPU marching-cubes peer (bench/peers_cpu.py) and
# the reader that opens the MPI layer's .pvtp output in tests/cli_mpi.sh.
/usr/bin/python3 -c "import vtk" 2>/dev/null || missing="$missing python3-vtk9"
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
if [ -z "$missing" ]; then exit 0; fi
if [ "$1" = "--check-only" ]; then
  echo "missing:$missing" >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
