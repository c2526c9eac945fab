#!/bin/bash
# CLI argument handling that needs no working reader: exit statuses (0 help,
# 2 usage, 1 input/runtime errors), messages naming the option or file, and
# nothing created when the output directory is missing.
# Usage: cli_usage.sh PYRAMESH WORKDIR
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
# expect STATUS "words on stderr" -- command...
expect() {
  local want=$1 words=$2; shift 2
  "$@" >"$W/out" 2>"$W/err"
  local rc=$?
  if [ $rc -ne "$want" ]; then
    echo "FAIL: '$*' exited $rc, expected $want"; sed 's/^/  /' "$W/err" | head -5; fail=1; return
  fi
  if grep -q -E "AddressSanitizer|LeakSanitizer|runtime error: " "$W/err"; then
    echo "FAIL: '$*': sanitizer report"; head -5 "$W/err"; fail=1; return
  fi
  if [ -n "$words" ] && ! grep -q -F -- "$words" "$W/err" "$W/out"; then
    echo "FAIL: '$*': output lacks '$words'"; sed 's/^/  /' "$W/err" | head -5; fail=1
  fi
}
printf 'abc' > "$W/in.raw"
printf '0 0 0\n' > "$W/in.xyz"

expect 0 "usage: pyramesh <command>" "$PM" --help
expect 0 "pyramesh 0." "$PM" --version
expect 0 "--raw-dims" "$PM" isosurface --help
expect 0 "--surface-threshold" "$PM" reconstruct --help
expect 0 "usage: pyramesh info" "$PM" info --help
expect 0 "--particles" "$PM" demo --help
expect 2 "missing command" "$PM"
expect 2 "unknown command 'frobnicate'" "$PM" frobnicate
# Usage errors name the option and show the usage line.
expect 2 "--iso" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso abc
expect 2 "usage: pyramesh isosurface" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1x
expect 2 "missing --iso" "$PM" isosurface "$W/in.raw" -o "$W/m.ply"
expect 2 "missing -o" "$PM" isosurface "$W/in.raw" --iso 1
expect 2 "missing the input" "$PM" isosurface -o "$W/m.ply" --iso 1
expect 2 "unknown option '--bogus'" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --bogus
expect 2 "--normals" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --normals fancy
expect 2 "--device" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --device tpu
expect 2 "--threads" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --threads 0
expect 2 "--raw-dims" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --raw-dims 4,4 --raw-type u8
expect 2 "--raw-type" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --raw-dims 4,4,4 --raw-type u32
expect 2 "both --raw-dims and --raw-type" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --raw-dims 4,4,4
expect 2 "--max-memory" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --max-memory 12Q
expect 2 ".ply, .obj, .stl or .vtk" "$PM" isosurface "$W/in.raw" -o "$W/m.xyz" --iso 1
expect 2 "--ascii applies to .ply" "$PM" isosurface "$W/in.raw" -o "$W/m.obj" --iso 1 --ascii
expect 2 "needs '{}' too" "$PM" isosurface "$W/in_{}.raw" -o "$W/m.ply" --iso 1
expect 2 "has '{}' but the input" "$PM" isosurface "$W/in.raw" -o "$W/m_{}.ply" --iso 1
expect 2 "-s/-e select frames" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 -s 3
expect 2 "missing -r" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply"
expect 2 "-r" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r abc
expect 2 "must be positive" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r -1
expect 2 "--smoothing-length" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 --smoothing-length=two
expect 2 "-c" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 -c0.5x
expect 2 "--method" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 --method mls
expect 2 "go together" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 --particle-aabb-min 0,0,0
expect 2 "below" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 --particle-aabb-min 0,0,0 --particle-aabb-max 1,0,1
expect 2 "--blur-steps applies" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 1 --blur-steps 3
expect 2 "-s 5 is after -e 2" "$PM" reconstruct "$W/in_{}.xyz" -o "$W/m_{}.ply" -r 1 -s 5 -e 2
expect 2 "unexpected argument" "$PM" demo extra
expect 2 "--particles" "$PM" demo --particles lots
expect 2 "missing FILE" "$PM" info

# Input errors: exit 1, "pyramesh: error:" and the file's name.
expect 1 "pyramesh: error:" "$PM" isosurface "$W/missing.nrrd" -o "$W/m.ply" --iso 1
expect 1 "missing.nrrd" "$PM" isosurface "$W/missing.nrrd" -o "$W/m.ply" --iso 1
expect 1 "missing.xyz" "$PM" reconstruct "$W/missing.xyz" -o "$W/m.ply" -r 0.1
expect 1 "missing.vtk" "$PM" info "$W/missing.vtk"
mkdir -p "$W/adir.nrrd"
expect 1 "is a directory" "$PM" isosurface "$W/adir.nrrd" -o "$W/m.ply" --iso 1
expect 1 "no file matches" "$PM" reconstruct "$W/none_{}.xyz" -o "$W/m_{}.ply" -r 0.1
# Output into a missing directory: exit 1, names it, creates nothing.
expect 1 "nodir" "$PM" isosurface "$W/in.raw" -o "$W/nodir/m.ply" --iso 1 --raw-dims 2,2,2 --raw-type u8
expect 1 "nodir" "$PM" reconstruct "$W/in.xyz" -o "$W/nodir/m.ply" -r 0.1
expect 1 "nodir" "$PM" reconstruct "$W/in.xyz" -o "$W/m.ply" -r 0.1 --stats "$W/nodir/s.json"
expect 1 "nodir" "$PM" demo -o "$W/nodir/demo.ply" --quiet
[ -e "$W/nodir" ] && { echo "FAIL: $W/nodir was created"; fail=1; }
[ -e "$W/m.ply" ] && { echo "FAIL: $W/m.ply was created"; fail=1; }
# CUDA asked for where there is none: a clear error, exit 1.
if ! "$PM" --version | grep -q "default device: cuda"; then
  expect 1 "CUDA" "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 --raw-dims 2,2,2 --raw-type u8 --device cuda
fi
# --version names the backends built in and the device a default context takes.
expect 0 "backends: cpu (OpenMP)" "$PM" --version
expect 0 "default device: " "$PM" --version
# A misspelt PYRAMESH_DEVICE is an error naming it, not a silent "auto".
expect 1 "PYRAMESH_DEVICE=\"gpu\"" env PYRAMESH_DEVICE=gpu "$PM" isosurface "$W/in.raw" -o "$W/m.ply" --iso 1 \
  --raw-dims 2,2,2 --raw-type u8
[ $fail -eq 0 ] && echo "cli_usage: all passed"
exit $fail
