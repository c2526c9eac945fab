#!/bin/bash
# `mpirun -n N pyramesh isosurface|reconstruct` (docs/distributed.md): for 1 to 4 ranks
# the mesh written by rank 0 is the same bytes as the run without mpirun,
# for plain raw, gzip NRRD (read from the start and skipped by each rank)
# and MetaImage (every rank reads the file), soup and indexed, central and
# Sobel normals; a .pvtp output writes one .vtp part per rank that VTK's
# parallel reader opens as the same surface (when python3-vtk9 is there);
# an input error on every rank exits non-zero with the message and
# writes nothing. Skipped (77) when the CLI has no MPI layer.
# Usage: cli_mpi.sh PYRAMESH WORKDIR.
set -u
PM=$1
W=$2
"$PM" --version | grep -q "^mpi: yes" || { echo "skipped: built without MPI"; exit 77; }
command -v mpirun > /dev/null || { echo "skipped: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
cd "$W" || exit 1
MPI="mpirun --oversubscribe -n"

# Two blobs and a wavy plane in a 40 x 36 x 45 u16 volume: the surface
# crosses every slab boundary of every rank count.
python3 - <<'PY' || { echo "python3 failed"; exit 1; }
import gzip, math, struct
nx, ny, nz = 40, 36, 45
v = []
for k in range(nz):
    for j in range(ny):
        for i in range(nx):
            f = math.exp(-((i - 12) ** 2 + (j - 15) ** 2 + (k - 14) ** 2) / 60.0)
            f += math.exp(-((i - 27) ** 2 + (j - 20) ** 2 + (k - 30) ** 2) / 90.0)
            f += 0.5 if k > 38 + 3 * math.sin(i / 5.0) else 0.0
            v.append(min(65535, int(f * 40000)))
data = struct.pack("<%dH" % len(v), *v)
open("vol.raw", "wb").write(data)
hdr = ("NRRD0004\ntype: uint16\ndimension: 3\nsizes: %d %d %d\nspacings: 0.5 0.6 0.7\n"
       "endian: little\nencoding: gzip\n\n" % (nx, ny, nz))
open("vol.nrrd", "wb").write(hdr.encode() + gzip.compress(data))
open("vol.mhd", "w").write("ObjectType = Image\nNDims = 3\nDimSize = %d %d %d\n"
                           "ElementSpacing = 0.5 0.6 0.7\nElementType = MET_USHORT\n"
                           "ElementDataFile = vol.raw\n" % (nx, ny, nz))
PY
RAW="--raw-dims 40,36,45 --raw-type u16"
for input in "vol.raw $RAW" "vol.nrrd" "vol.mhd"; do
    for opts in "" "--soup" "--normals sobel"; do
        # shellcheck disable=SC2086
        "$PM" isosurface $input --iso 20000 $opts -o ref.ply -q 2> err || bad "serial run of $input $opts: $(cat err)"
        for n in 1 2 3 4; do
            # shellcheck disable=SC2086
            $MPI $n "$PM" isosurface $input --iso 20000 $opts -o mpi$n.ply -q > out 2>&1 ||
                bad "mpirun -n $n, $input $opts: $(tail -5 out)"
            cmp -s ref.ply mpi$n.ply || bad "mpirun -n $n, $input $opts: another mesh than the serial run"
        done
    done
done

# --stats from rank 0 names the ranks and the path.
$MPI 3 "$PM" isosurface vol.raw $RAW --iso 20000 -o s.ply --stats s.json -q > out 2>&1 || bad "stats run: $(tail -3 out)"
grep -q '"ranks": 3' s.json || bad "--stats has no \"ranks\": 3"
grep -q 'mpi=gather' s.json || bad "--stats path does not say mpi=gather"

# Distributed output: one part per rank and the index.
$MPI 3 "$PM" isosurface vol.raw $RAW --iso 20000 -o dist.pvtp -q > out 2>&1 || bad "pvtp run: $(tail -5 out)"
for r in 0 1 2; do [ -s dist_$r.vtp ] || bad "no part dist_$r.vtp"; done
[ -s dist.pvtp ] || bad "no dist.pvtp"
if python3 -c "import vtk" 2> /dev/null; then
    python3 - <<'PY' || bad "VTK's reader disagrees with the gathered mesh"
import vtk
r = vtk.vtkXMLPPolyDataReader(); r.SetFileName("dist.pvtp"); r.Update()
m = vtk.vtkPLYReader(); m.SetFileName("mpi3.ply"); m.Update()
d, g = r.GetOutput(), m.GetOutput()
ids = d.GetPointData().GetArray("GlobalIds")
assert ids is not None, "no GlobalIds"
uniq = len(set(int(ids.GetTuple1(i)) for i in range(ids.GetNumberOfTuples())))
print("pvtp: %d points (%d distinct ids), %d triangles; gathered %d points, %d triangles"
      % (d.GetNumberOfPoints(), uniq, d.GetNumberOfCells(), g.GetNumberOfPoints(), g.GetNumberOfCells()))
assert d.GetNumberOfCells() == g.GetNumberOfCells()
assert uniq == g.GetNumberOfPoints()
PY
fi

# An input error: every rank fails, the message comes out, nothing is written.
head -c 1000 vol.raw > short.raw
$MPI 3 "$PM" isosurface short.raw $RAW --iso 20000 -o bad.ply > out 2>&1
[ $? -ne 0 ] || bad "a short raw file was accepted under mpirun"
grep -q "short.raw" out || bad "no message naming the file: $(tail -3 out)"
[ -e bad.ply ] && bad "an output was written after an error"

# Particles: every rank reads the file and passes its share; rank 0
# writes the same bytes as the serial run (also with post-processing), on
# CPU ranks and, where the machine has a GPU, on GPU ranks.
BUNNY=$(dirname "$0")/data/splashsurf/bunny_frame_14_7705_particles.vtk
case "$BUNNY" in /*) ;; *) BUNNY="$OLDPWD/$BUNNY" ;; esac
devices=cpu
"$PM" --version | grep -q "^default device: cuda" && devices="cpu cuda"
for opts in "" "--mesh-cleanup=on --normals=on --mesh-smoothing-iters=5"; do
    # shellcheck disable=SC2086
    "$PM" reconstruct "$BUNNY" -r 0.025 -c 0.5 --device cpu $opts -o pref.ply -q 2> err || bad "serial reconstruct $opts: $(cat err)"
    for dev in $devices; do
        for n in 1 2 3; do
            # shellcheck disable=SC2086
            $MPI $n "$PM" reconstruct "$BUNNY" -r 0.025 -c 0.5 --device $dev $opts -o pmpi$n.ply -q > out 2>&1 ||
                bad "mpirun -n $n reconstruct --device $dev $opts: $(tail -5 out)"
            cmp -s pref.ply pmpi$n.ply || bad "mpirun -n $n reconstruct --device $dev $opts: another mesh than the serial CPU run"
        done
    done
done

# Particles, distributed: one part per rank (on each device) that VTK's
# reader opens as the serial mesh (same triangles; distinct ids = its
# vertices); with post-processing a .pvtp is refused.
"$PM" reconstruct "$BUNNY" -r 0.025 -c 0.5 --device cpu -o pref.ply -q 2> err || bad "serial reconstruct: $(cat err)"
for dev in $devices; do
    rm -f pdist*.vtp pdist.pvtp
    $MPI 3 "$PM" reconstruct "$BUNNY" -r 0.025 -c 0.5 --device $dev -o pdist.pvtp -q > out 2>&1 ||
        bad "mpirun reconstruct -o .pvtp --device $dev: $(tail -5 out)"
    for r in 0 1 2; do [ -s pdist_$r.vtp ] || bad "no part pdist_$r.vtp ($dev)"; done
    if python3 -c "import vtk" 2> /dev/null; then
        python3 - <<'PY' || bad "particles ($dev): VTK's reader disagrees with the serial mesh"
import vtk
r = vtk.vtkXMLPPolyDataReader(); r.SetFileName("pdist.pvtp"); r.Update()
m = vtk.vtkPLYReader(); m.SetFileName("pref.ply"); m.Update()
d, g = r.GetOutput(), m.GetOutput()
ids = d.GetPointData().GetArray("GlobalIds")
assert ids is not None, "no GlobalIds"
uniq = len(set(int(ids.GetTuple1(i)) for i in range(ids.GetNumberOfTuples())))
print("particles pvtp: %d points (%d distinct ids), %d triangles; serial %d points, %d triangles"
      % (d.GetNumberOfPoints(), uniq, d.GetNumberOfCells(), g.GetNumberOfPoints(), g.GetNumberOfCells()))
assert d.GetNumberOfCells() == g.GetNumberOfCells()
assert uniq == g.GetNumberOfPoints()
PY
    fi
done
$MPI 2 "$PM" reconstruct "$BUNNY" -r 0.025 -c 0.5 --device cpu --normals=on -o bad.pvtp -q > out 2>&1 &&
    bad "a .pvtp output with post-processing was accepted"
grep -q "written as meshed" out || bad "no message for .pvtp with post-processing: $(tail -3 out)"

# A .pvtp without mpirun is refused.
"$PM" isosurface vol.raw $RAW --iso 20000 -o x.pvtp -q 2> err && bad "a .pvtp output without mpirun was accepted"

[ $fail -eq 0 ] && echo "cli_mpi: ok"
exit $fail
