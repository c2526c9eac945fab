#!/bin/bash
# The library installed into a fresh prefix (cmake --install) and used from
# a new project as a user would: the README example built out of tree
# through pkg-config (shared, and static with --static) and through CMake's
# find_package (pyramesh::pyramesh and pyramesh::pyramesh_static), each run
# on a small volume and giving the same mesh as the CLI; the CLI and its man
# page installed; nothing but the pm_ API exported by the shared library.
# Usage: cli_install.sh BUILD_DIR SOURCE_DIR WORKDIR.
set -u
B=$1
S=$2
W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
P="$W/prefix"
cmake --install "$B" --prefix "$P" >"$W/install.log" 2>&1 || { cat "$W/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in include/pyramesh.h bin/pyramesh share/man/man1/pyramesh.1; do
  [ -e "$P/$f" ] || bad "$f not installed"
done
LIBDIR=$(dirname "$(find "$P" -name pyramesh.pc | head -1)")/..
[ -e "$LIBDIR/libpyramesh.a" ] || bad "libpyramesh.a not installed"
ls "$LIBDIR"/libpyramesh.so* >/dev/null 2>&1 || bad "libpyramesh.so not installed"
grep -q "isosurface" "$P/share/man/man1/pyramesh.1" || bad "the man page lacks the isosurface command"
# Only the pm_ API is exported: other symbols of the shared library are
# those the toolchain exports by itself (OpenMP's named critical sections,
# libstdc++ template instantiations of the C++ readers).
if command -v nm >/dev/null 2>&1; then
  SO=$(ls "$LIBDIR"/libpyramesh.so.*.*.* 2>/dev/null | head -1)
  if [ -n "$SO" ]; then
    extra=$(nm -D --defined-only "$SO" | awk '{print $3}' |
      grep -v -E '^(pm_|\.gomp_critical_user_pm_|_ZNSt|_ZNKSt|_ZSt|_init$|_fini$)' | head -5)
    [ -z "$extra" ] || bad "the shared library exports more than the pm_ API: $extra"
  fi
fi
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# A small volume: a sphere of radius 6 in 16^3 f32, as NRRD.
python3 - "$W/ball.nrrd" <<'PY' || { echo "python3 failed"; exit 1; }
import struct, sys
n = 16
vals = [((i - 7.5) ** 2 + (j - 7.5) ** 2 + (k - 7.5) ** 2) ** 0.5 for k in range(n) for j in range(n) for i in range(n)]
with open(sys.argv[1], "wb") as f:
    f.write(b"NRRD0004\ntype: float\ndimension: 3\nsizes: 16 16 16\nendian: little\nencoding: raw\n\n")
    f.write(struct.pack("<%df" % len(vals), *vals))
PY
"$P/bin/pyramesh" isosurface "$W/ball.nrrd" --iso 6 -o "$W/cli.ply" -q --device cpu || bad "the installed CLI failed"

run() { # name binary
  PYRAMESH_DEVICE=cpu "$2" "$W/ball.nrrd" 6 "$W/$1.ply" >"$W/$1.out" 2>&1 || { bad "$1 failed: $(cat "$W/$1.out")"; return; }
  cmp -s "$W/cli.ply" "$W/$1.ply" || bad "$1 gave another mesh than the CLI"
}
if command -v pkg-config >/dev/null 2>&1; then
  cc -o "$W/ex_pc" "$S/tests/install_example/example.c" $(pkg-config --cflags --libs pyramesh) 2>"$W/pc.log" ||
    bad "pkg-config build failed: $(cat "$W/pc.log")"
  [ -x "$W/ex_pc" ] && run pkgconfig "$W/ex_pc"
  cc -o "$W/ex_pc_static" "$S/tests/install_example/example.c" -Wl,-Bstatic $(pkg-config --static --cflags --libs-only-L pyramesh) \
    -lpyramesh -Wl,-Bdynamic $(pkg-config --static --libs-only-other --libs-only-l pyramesh | sed 's/-lpyramesh//') \
    2>"$W/pcs.log" || bad "pkg-config --static build failed: $(cat "$W/pcs.log")"
  [ -x "$W/ex_pc_static" ] && run pkgconfig_static "$W/ex_pc_static"
else
  echo "note: pkg-config not installed, its build skipped"
fi
cmake -S "$S/tests/install_example" -B "$W/cmake" -DCMAKE_PREFIX_PATH="$P" >"$W/cmake.log" 2>&1 &&
  cmake --build "$W/cmake" >>"$W/cmake.log" 2>&1 || bad "find_package build failed: $(tail -20 "$W/cmake.log")"
[ -x "$W/cmake/example" ] && run cmake_shared "$W/cmake/example"
[ -x "$W/cmake/example_static" ] && run cmake_static "$W/cmake/example_static"

[ $fail -eq 0 ] && echo "cli_install: all checks passed"
exit $fail
