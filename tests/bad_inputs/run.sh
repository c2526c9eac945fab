#!/bin/bash
# The bad-inputs suite: every hostile file must make pyramesh exit
# with status 1, print one "pyramesh: error:" message naming the file, and
# leave no output (nor temporary) file behind. Also: a directory, a missing
# file and unwritable output locations. Usage: run.sh PYRAMESH WORKDIR
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W/in" "$W/out"
python3 "$(dirname "$0")/make_inputs.py" "$W/in" >/dev/null || { echo "cannot generate inputs"; exit 1; }
fail=0; n=0
check() { # name expected_words... ; runs "$@" after --
  local name=$1 expect=$2; shift 2
  n=$((n + 1))
  "$@" >"$W/stdout" 2>"$W/stderr"
  local rc=$?
  local msg; msg=$(cat "$W/stderr")
  local lines; lines=$(grep -c "pyramesh: error:" "$W/stderr")
  local why=""
  [ $rc -eq 1 ] || why="exit status $rc, expected 1"
  [ -z "$why" ] && [ "$lines" -ge 1 ] || why="${why:-no 'pyramesh: error:' message}"
  [ -z "$why" ] && ! grep -q -F "$name" "$W/stderr" && why="message does not name $name"
  if [ -z "$why" ] && [ -n "$expect" ] && ! grep -q -i -F -- "$expect" "$W/stderr"; then why="message lacks '$expect'"; fi
  if [ -z "$why" ] && grep -q -E "AddressSanitizer|runtime error|LeakSanitizer" "$W/stderr"; then why="sanitizer report"; fi
  if [ -z "$why" ] && [ -n "$(ls -A "$W/out")" ]; then why="left files: $(ls -A "$W/out" | tr '\n' ' ')"; rm -f "$W/out"/* "$W/out"/.[!.]* 2>/dev/null; fi
  if [ -n "$why" ]; then
    fail=$((fail + 1)); echo "FAIL $name: $why"; echo "  stderr: $(head -c 400 "$W/stderr")"
  fi
}
# A pyramesh without GDCM refuses every DICOM directory, saying how to get it.
mkdir -p "$W/gdcm_probe"
nogdcm=$("$PM" isosurface "$W/gdcm_probe" -o "$W/out/mesh.ply" --iso 0.5 --quiet 2>&1 | grep -c "need GDCM")
while IFS=$'\t' read -r name cmd expect; do
  [ "$nogdcm" != 0 ] && [ -d "$W/in/$name" ] && expect="GDCM"
  if [ "$cmd" = isosurface ]; then
    check "$name" "$expect" "$PM" isosurface "$W/in/$name" -o "$W/out/mesh.ply" --iso 0.5 --quiet --device cpu
  else
    check "$name" "$expect" "$PM" reconstruct "$W/in/$name" -o "$W/out/mesh.ply" -r 0.1 --quiet --device cpu
  fi
done < "$W/in/cases.tsv"
# Raw volume smaller than its declared dims.
check nrrd_trunc_40.nrrd "raw" "$PM" isosurface "$W/in/nrrd_trunc_40.nrrd" --raw-dims 64,64,64 --raw-type f32 -o "$W/out/mesh.ply" --iso 0.5 --quiet
mkdir -p "$W/in/a_directory.nrrd"
check a_directory.nrrd "" "$PM" isosurface "$W/in/a_directory.nrrd" -o "$W/out/mesh.ply" --iso 0.5 --quiet
check does_not_exist.nrrd "" "$PM" isosurface "$W/in/does_not_exist.nrrd" -o "$W/out/mesh.ply" --iso 0.5 --quiet
if [ "$(id -u)" != 0 ]; then
  cp "$W/in/nrrd_trunc_0.nrrd" "$W/in/unreadable.nrrd"; chmod 000 "$W/in/unreadable.nrrd"
  check unreadable.nrrd "" "$PM" isosurface "$W/in/unreadable.nrrd" -o "$W/out/mesh.ply" --iso 0.5 --quiet
fi
# A valid input written to places that cannot take it.
python3 - "$W/in/good.nrrd" <<'PY'
import struct, sys
v = [((x * 7 + y * 3 + z * 5) % 11) / 10.0 for z in range(4) for y in range(4) for x in range(4)]
open(sys.argv[1], "wb").write(b"NRRD0004\ntype: float\ndimension: 3\nsizes: 4 4 4\nendian: little\nencoding: raw\n\n" + struct.pack("<64f", *v))
PY
check missing_dir "" "$PM" isosurface "$W/in/good.nrrd" -o "$W/out/missing_dir/mesh.ply" --iso 0.5 --quiet
check /proc/pm_mesh.ply "" "$PM" isosurface "$W/in/good.nrrd" -o /proc/pm_mesh.ply --iso 0.5 --quiet
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$W/ro"; chmod 555 "$W/ro"
  check "$W/ro" "" "$PM" isosurface "$W/in/good.nrrd" -o "$W/ro/mesh.ply" --iso 0.5 --quiet
fi
echo "bad inputs: $((n - fail)) passed, $fail failed"
[ $fail -eq 0 ]
