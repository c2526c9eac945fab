#!/bin/bash
# SIGINT during a frame sequence: pyramesh stops at the next
# stage boundary, prints "pyramesh: interrupted", exits 130, leaves the
# outputs it completed intact (each identical to a normal run's), writes no
# --stats file and leaves no temporary file.
# Usage: cli_sigint.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W/frames" "$W/out"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# One 40^3 f32 volume; 400 frames are symbolic links to it, so the run is
# long enough to be interrupted whatever the machine's speed.
python3 - "$W/base.raw" <<'PY' || { echo "python3 failed"; exit 1; }
import math, struct, sys
n = 40
v = [math.sqrt((i - 19.5) ** 2 + (j - 19.5) ** 2 + (k - 19.5) ** 2) for k in range(n) for j in range(n) for i in range(n)]
open(sys.argv[1], "wb").write(struct.pack("<%df" % len(v), *v))
PY
RAW=(--raw-dims 40,40,40 --raw-type f32)
"$PM" isosurface "$W/base.raw" "${RAW[@]}" --iso 12 -o "$W/reference.ply" --quiet 2>"$W/stderr"
rc=$?
[ $rc -eq 0 ] || { bad "reference run exited $rc"; exit 1; }
for i in $(seq 1 400); do ln -s ../base.raw "$W/frames/f$i.raw"; done
# Job control on: a background job of a script would otherwise start with
# SIGINT ignored (and pyramesh keeps an ignored SIGINT ignored).
set -m

"$PM" isosurface "$W/frames/f{}.raw" "${RAW[@]}" --iso 12 -o "$W/out/m{}.ply" \
  --stats "$W/out/stats.json" >"$W/stdout" 2>"$W/stderr" &
pid=$!
# Wait for the first completed output, then interrupt.
for _ in $(seq 1 600); do
  [ -e "$W/out/m1.ply" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || bad "exit status $rc, expected 130"
grep -q "^pyramesh: interrupted$" "$W/stderr" || bad "no 'pyramesh: interrupted': $(tail -3 "$W/stderr")"
[ -e "$W/out/stats.json" ] && bad "--stats written by an interrupted run"
ls -A "$W/out" | grep -v '^m[0-9]*\.ply$' && bad "files other than complete outputs left (above)"
done_n=$(ls "$W/out" | grep -c '^m[0-9]*\.ply$')
[ "$done_n" -ge 1 ] && [ "$done_n" -lt 400 ] || bad "$done_n outputs: the run was not stopped part way"
for f in "$W"/out/m*.ply; do
  cmp -s "$f" "$W/reference.ply" || bad "$f differs from a normal run's output"
done
[ $fail -eq 0 ] && echo "cli_sigint: all passed ($done_n of 400 frames done before the interrupt)"
exit $fail
