#!/bin/bash
# Outputs never destroy inputs: an output that is the input file (by name,
# through a symbolic link or a hard link) is refused before any work and the
# input is unchanged; an output that is a directory is refused naming the
# directory; -o on a symbolic link writes through to the link's target (the
# link stays a link, the write stays atomic).
# Usage: cli_outputs.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W/somedir"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1

"$PM" demo --particles 3000 -o cloud.ply -q --device cpu >/dev/null || { echo "demo failed"; exit 1; }
before=$(cksum < cloud.ply)
ln -s cloud.ply alias.ply
ln cloud.ply hard.ply

for out in cloud.ply ./cloud.ply alias.ply hard.ply; do
  "$PM" reconstruct cloud.ply -o "$out" -r 0.025 -q 2>err
  rc=$?
  [ $rc -ne 0 ] || bad "-o $out (the input) exited 0"
  grep -q "is the input file" err || bad "-o $out: no 'is the input file' message: $(cat err)"
  [ "$(cksum < cloud.ply)" = "$before" ] || bad "-o $out changed the input"
done
"$PM" isosurface cloud.ply -o cloud.ply --iso 0 -q 2>err
[ $? -ne 0 ] || bad "isosurface onto its input exited 0"

"$PM" reconstruct cloud.ply -o somedir -r 0.025 -q 2>err
[ $? -ne 0 ] || bad "-o somedir exited 0"
grep -q "'somedir': it is a directory" err || bad "-o somedir: $(cat err)"

touch target.ply
ln -s target.ply link.ply
"$PM" reconstruct cloud.ply -o link.ply -r 0.025 -q 2>err || bad "-o link.ply failed: $(cat err)"
[ -L link.ply ] || bad "link.ply is no longer a symbolic link"
[ -s target.ply ] || bad "the link's target was not written"
head -c 3 target.ply | grep -q ply || bad "target.ply is not a PLY file"
ls ./*.tmp.* >/dev/null 2>&1 && bad "temporary files left behind"

[ $fail -eq 0 ] && echo "cli_outputs: all checks passed"
exit $fail
