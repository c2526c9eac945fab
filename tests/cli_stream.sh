#!/bin/bash
# Volumes larger than --max-memory are streamed slab by slab (raw and NRRD
# files, plain and gzip) and give byte for byte the mesh of the in-memory
# run, for every sample type, soup and indexed, each normals mode; --stats
# reports stream=slabs; a truncated file is an error naming the byte and
# leaves no output; formats that cannot stream are refused as before.
# Usage: cli_stream.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1
if ! "$PM" isosurface --help | grep -q "streamed"; then
  echo "FAIL: --help does not describe streaming"; exit 1
fi

# A blob (sphere plus ripples) in a 48 x 40 x 200 volume of each type, raw
# little- and big-endian with a header, raw gzip, NRRD raw and gzip.
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import gzip, math, struct
nx, ny, nz = 48, 40, 200
codes = {"u8": "B", "u16": "H", "i16": "h", "f32": "f", "f64": "d"}
names = {"u8": "uchar", "u16": "ushort", "i16": "short", "f32": "float", "f64": "double"}
base = []
for k in range(nz):
    for j in range(ny):
        for i in range(nx):
            r = math.sqrt((i - 23.5) ** 2 + (j - 19.5) ** 2 + ((k - 99.5) * 0.25) ** 2)
            base.append(100 + 6 * (14 - r) + 5 * math.sin(i * 0.7) * math.cos(j * 0.5 + k))
for t, c in codes.items():
    if t in ("u8", "u16", "i16"):
        vals = [min(255, max(0, int(round(v)))) - (100 if t == "i16" else 0) for v in base]
    else:
        vals = base
    le = struct.pack("<%d%s" % (len(vals), c), *vals)
    be = struct.pack(">%d%s" % (len(vals), c), *vals)
    open("%s.raw" % t, "wb").write(le)
    open("%s_be.raw" % t, "wb").write(b"H" * 100 + be)
    open("%s.raw.gz" % t, "wb").write(gzip.compress(le))
    head = ("NRRD0004\ntype: %s\ndimension: 3\nsizes: %d %d %d\nspacings: 0.5 1 1.5\n"
            "endian: big\nencoding: %%s\n\n" % (names[t], nx, ny, nz))
    open("%s.nrrd" % t, "wb").write((head % "raw").encode() + be)
    open("%s_gz.nrrd" % t, "wb").write((head % "gzip").encode() + gzip.compress(be))
PY

# --max-memory: 8 slices and the scratch; gzip files add the reader's
# buffer (the compressed file's size, at most 1 MiB) and zlib's 48 KiB. Each limit is
# well below the volume's size, so every run below streams (--stats says so).
es() { case $1 in u8) echo 1;; u16|i16) echo 2;; f32) echo 4;; f64) echo 8;; esac; }
C="--device cpu --threads 2"
for t in u8 u16 i16 f32 f64; do
  iso=100; [ $t = i16 ] && iso=0
  slice=$((48 * 40 $(printf '* %s' "$(es $t)")))
  L=$((8 * slice + 16384))
  cap() { local n; n=$(stat -c %s "$1"); [ "$n" -gt 1048576 ] && n=1048576; echo "$n"; }
  G=$((L + $(cap $t.raw.gz) + 65536))
  GN=$((L + $(cap ${t}_gz.nrrd) + 65536))
  vol=$((slice * 200))
  [ $G -lt $vol ] && [ $GN -lt $vol ] || bad "$t: the gzip limits $G/$GN are not below the volume's $vol bytes"
  R="--raw-dims 48,40,200 --raw-type $t --iso $iso"
  for opt in "" "--soup" "--normals sobel" "--normals forward --inside below" "--normals none --soup"; do
    tag="$t ${opt:-default}"
    "$PM" isosurface $t.raw $R $opt $C -o mem.ply -q 2>err || { bad "$tag in memory: $(cat err)"; continue; }
    "$PM" isosurface $t.raw $R $opt $C --max-memory $L -o s.ply -q --stats st.json 2>err || bad "$tag streamed: $(cat err)"
    cmp -s mem.ply s.ply || bad "$tag: the streamed raw mesh differs"
    grep -q "stream=slabs" st.json || bad "$tag: --stats does not say stream=slabs: $(grep path st.json)"
    "$PM" isosurface ${t}_be.raw $R --raw-endian big --raw-offset 100 $opt $C --max-memory $L -o s.ply -q 2>err ||
      bad "$tag big-endian streamed: $(cat err)"
    cmp -s mem.ply s.ply || bad "$tag: the streamed big-endian raw mesh differs"
    "$PM" isosurface $t.raw.gz $R $opt $C --max-memory $G -o s.ply -q --stats st.json 2>err || bad "$tag gzip streamed: $(cat err)"
    cmp -s mem.ply s.ply || bad "$tag: the streamed gzip raw mesh differs"
    grep -q "stream=slabs" st.json || bad "$tag gzip: --stats does not say stream=slabs"
  done
  "$PM" isosurface $t.nrrd --iso $iso $C -o mem.ply -q 2>err || bad "$t nrrd in memory: $(cat err)"
  "$PM" isosurface $t.nrrd --iso $iso $C --max-memory $L -o s.ply -q 2>err || bad "$t nrrd streamed: $(cat err)"
  cmp -s mem.ply s.ply || bad "$t: the streamed NRRD raw mesh differs"
  "$PM" isosurface ${t}_gz.nrrd --iso $iso $C --max-memory $GN -o s.ply -q --stats st.json 2>err || bad "$t nrrd gzip streamed: $(cat err)"
  cmp -s mem.ply s.ply || bad "$t: the streamed NRRD gzip mesh differs"
  grep -q "stream=slabs" st.json || bad "$t nrrd gzip: --stats does not say stream=slabs"
done
M="--max-memory 80K $C"

# The stats: slab count, thickness, bytes read; read and walk stages.
"$PM" isosurface f32.nrrd --iso 100 $M -o s.ply -q --stats st.json 2>err || bad "stats run: $(cat err)"
for w in "slabs=" "thickness=" "read_bytes=1536000" '"read"' '"walk"'; do
  grep -q -- "$w" st.json || bad "--stats lacks $w: $(cat st.json)"
done

# Errors: nothing is written. A truncated gzip NRRD (found while streaming),
# a truncated raw file (found at the open), a limit below one slab.
head -c 200000 f32_gz.nrrd > cut.nrrd
rm -f x.ply
"$PM" isosurface cut.nrrd --iso 100 --max-memory 400K $C -o x.ply -q 2>err && bad "a truncated gzip NRRD was accepted"
grep -q "byte" err || bad "no byte offset in: $(cat err)"
[ -e x.ply ] && bad "an output was written for a truncated stream"
ls .x.ply* 2>/dev/null | grep -q . && bad "a temporary output was left behind"
head -c 100000 f32.raw > cut.raw
"$PM" isosurface cut.raw --raw-dims 48,40,200 --raw-type f32 --iso 100 $M -o x.ply -q 2>err &&
  bad "a truncated raw file was accepted"
[ -e x.ply ] && bad "an output was written for a truncated raw file"
"$PM" isosurface f64.raw --raw-dims 48,40,200 --raw-type f64 --iso 100 --max-memory 50K --device cpu \
  -o x.ply -q 2>err && bad "a limit below one slab was accepted"
grep -q "memory limit" err || bad "no memory figure in: $(cat err)"
[ -e x.ply ] && bad "an output was written when the limit was too small"
# --debug-dir needs the whole volume.
"$PM" isosurface f32.nrrd --iso 100 $M --debug-dir dbg -o x.ply -q 2>err &&
  bad "--debug-dir was accepted with a streamed volume"

# On a GPU: --max-memory bounds its memory and the slabs stream through it
# as slab windows (slab=window), the same bytes; --device cuda:all meshes the
# volume on every GPU (z slabs), the same bytes.
if "$PM" --version | grep -q "^default device: cuda"; then
  for t in u8 u16 f32 f64; do
    iso=100
    R="--raw-dims 48,40,200 --raw-type $t --iso $iso"
    for opt in "" "--soup" "--normals sobel" "--normals none"; do
      tag="cuda $t ${opt:-default}"
      "$PM" isosurface $t.raw $R $opt $C -o mem.ply -q 2>err || { bad "$tag in memory: $(cat err)"; continue; }
      # A GPU's slab window needs about 42 bytes per point of scratch at
      # this size (pass 1 sized for every point): of these volumes only
      # the f64 one is larger than three workers' windows (every sample
      # type streams through the GPU in test_stream).
      if [ $t = f64 ]; then
        "$PM" isosurface $t.raw $R $opt --device cuda --max-memory 2500K -o g.ply -q --stats st.json 2>err ||
          bad "$tag streamed: $(cat err)"
        cmp -s mem.ply g.ply || bad "$tag: the mesh streamed through the GPU differs"
        grep -q "slab=window" st.json || bad "$tag: --stats does not say slab=window: $(grep path st.json)"
        "$PM" isosurface $t.raw.gz $R $opt --device cuda --max-memory 2500K -o g.ply -q 2>err ||
          bad "$tag gzip streamed: $(cat err)"
        cmp -s mem.ply g.ply || bad "$tag: the gzip mesh streamed through the GPU differs"
      fi
      "$PM" isosurface $t.raw $R $opt --device cuda:all -o g.ply -q 2>err || bad "$tag cuda:all: $(cat err)"
      cmp -s mem.ply g.ply || bad "$tag: the cuda:all mesh differs"
    done
  done
  "$PM" isosurface f32.raw --raw-dims 48,40,200 --raw-type f32 --iso 100 --device cuda --max-memory 20K \
    -o x.ply -q 2>err && bad "a GPU limit below one slab was accepted"
  grep -q "limit" err || bad "no memory figure for the GPU limit in: $(cat err)"
  [ -e x.ply ] && bad "an output was written when the GPU limit was too small"
fi
"$PM" isosurface f32.raw --raw-dims 48,40,200 --raw-type f32 --iso 100 --device cuda:x -o x.ply -q 2>err &&
  bad "--device cuda:x was accepted"
grep -q "cuda:all" err || bad "no usage message for --device cuda:x: $(cat err)"

[ $fail -eq 0 ] && echo "cli_stream: all checks passed"
exit $fail
