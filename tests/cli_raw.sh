#!/bin/bash
# Raw volumes are read only as the user described them: bytes beyond the
# samples (a header left in, dims too small, the wrong sample type) are an
# error with a hint, unless --raw-allow-extra; --raw-offset -1 takes the
# samples from the end of the file; gzip-compressed raw files are read and
# give the same mesh as the plain file.
# Usage: cli_raw.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1

# A sphere of radius 20 in a 64^3 f32 volume (distance field), plain, with
# a 256-byte header in front, with 256 bytes behind, and gzip-compressed.
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import gzip, struct
n = 64
vals = [((i - 31.5) ** 2 + (j - 31.5) ** 2 + (k - 31.5) ** 2) ** 0.5
        for k in range(n) for j in range(n) for i in range(n)]
data = struct.pack("<%df" % len(vals), *vals)
open("vol.raw", "wb").write(data)
open("head.raw", "wb").write(b"H" * 256 + data)
open("tail.raw", "wb").write(data + b"T" * 256)
open("vol.raw.gz", "wb").write(gzip.compress(data))
PY
R="--raw-dims 64,64,64 --raw-type f32 --iso 20"

"$PM" isosurface vol.raw $R -o plain.ply -q 2>err || bad "plain raw failed: $(cat err)"

"$PM" isosurface head.raw $R -o x.ply -q 2>err
[ $? -ne 0 ] || bad "a 256-byte header left in was accepted"
grep -q "256 bytes more than 64 x 64 x 64 f32" err || bad "no byte count in: $(cat err)"
grep -q -- "--raw-offset 256" err || bad "no --raw-offset hint in: $(cat err)"
[ -e x.ply ] && bad "an output was written for a refused input"

"$PM" isosurface head.raw $R --raw-offset 256 -o head.ply -q 2>err || bad "--raw-offset 256 failed: $(cat err)"
cmp -s plain.ply head.ply || bad "--raw-offset 256 gave another mesh"
"$PM" isosurface head.raw $R --raw-offset -1 -o end.ply -q 2>err || bad "--raw-offset -1 failed: $(cat err)"
cmp -s plain.ply end.ply || bad "--raw-offset -1 gave another mesh"
"$PM" isosurface tail.raw $R -o x.ply -q 2>/dev/null && bad "trailing bytes were accepted"
"$PM" isosurface tail.raw $R --raw-allow-extra -o tail.ply -q 2>err || bad "--raw-allow-extra failed: $(cat err)"
cmp -s plain.ply tail.ply || bad "--raw-allow-extra gave another mesh"

# Dims too small, and u8 read from f32 data: both leave bytes over.
"$PM" isosurface vol.raw --raw-dims 64,64,32 --raw-type f32 --iso 20 -o x.ply -q 2>/dev/null &&
  bad "dims too small were accepted"
"$PM" isosurface vol.raw --raw-dims 64,64,64 --raw-type u8 --iso 20 -o x.ply -q 2>/dev/null &&
  bad "the wrong sample type (u8 for f32) was accepted"

"$PM" isosurface vol.raw.gz $R -o gz.ply -q 2>err || bad "gzip raw failed: $(cat err)"
cmp -s plain.ply gz.ply || bad "gzip raw gave another mesh"
"$PM" isosurface vol.raw.gz --raw-dims 64,64,32 --raw-type f32 --iso 20 -o x.ply -q 2>err &&
  bad "gzip raw with dims too small was accepted"
"$PM" isosurface vol.raw.gz $R --raw-offset -1 -o x.ply -q 2>/dev/null && bad "gzip with offset -1 was accepted"
"$PM" info head.raw --raw-dims 64,64,64 --raw-type f32 --raw-offset -1 >/dev/null 2>err ||
  bad "info with --raw-offset -1 failed: $(cat err)"

# Words where a result is empty: an iso value outside the data's range.
"$PM" isosurface vol.raw --raw-dims 64,64,64 --raw-type f32 --iso 500 -o empty.ply -q 2>err ||
  bad "iso outside the range failed: $(cat err)"
grep -q "iso value 500 is outside the data range \[" err || bad "no range warning: $(cat err)"
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import struct
open("nan.raw", "wb").write(struct.pack("<8f", 0, 1, float("nan"), 1, 0, 1, float("nan"), 1))
PY
"$PM" isosurface nan.raw --raw-dims 2,2,2 --raw-type f32 --iso 0.5 -o nan.ply -q 2>err || bad "NaN volume failed: $(cat err)"
grep -q "2 NaN samples" err || bad "no NaN warning: $(cat err)"

[ $fail -eq 0 ] && echo "cli_raw: all checks passed"
exit $fail
