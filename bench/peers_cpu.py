#!/usr/bin/python3
"""CPU peers on the cayley field (ANCHORS.md), beside bench_cpu_isosurface in
the same run: VTK's vtkFlyingEdges3D (normals on) with 1 and 2 threads and
vtkMarchingCubes (serial), median of R runs each, then pyramesh's table.
Needs Debian's python3-vtk9 (run with /usr/bin/python3).

usage: /usr/bin/python3 bench/peers_cpu.py BUILD/bench/bench_cpu_isosurface [N ...]
env: PM_BENCH_REPS (default 7)."""
import os
import subprocess
import sys
import tempfile
import time

from vtkmodules.vtkCommonCore import vtkSMPTools, vtkVersion
from vtkmodules.vtkFiltersCore import vtkFlyingEdges3D
from vtkmodules.vtkFiltersCore import vtkMarchingCubes
from vtkmodules.vtkIOImage import vtkImageReader2


def read_field(path, n):
    r = vtkImageReader2()
    r.SetFileName(path)
    r.SetFileDimensionality(3)
    r.SetDataScalarTypeToFloat()
    r.SetDataByteOrderToLittleEndian()
    r.SetNumberOfScalarComponents(1)
    r.SetDataExtent(0, n - 1, 0, n - 1, 0, n - 1)
    r.SetDataSpacing(1, 1, 1)
    r.SetDataOrigin(0, 0, 0)
    r.Update()
    return r.GetOutput()


def time_filter(make, image, reps):
    times, out = [], None
    for rep in range(reps + 1):
        f = make()
        f.SetInputData(image)
        f.SetValue(0, 0.0)
        t0 = time.perf_counter()
        f.Update()
        t1 = time.perf_counter()
        out = f.GetOutput()
        if rep:
            times.append((t1 - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0], out.GetNumberOfPoints(), out.GetNumberOfCells()


def flying_edges():
    f = vtkFlyingEdges3D()
    f.ComputeNormalsOn()
    f.ComputeGradientsOff()
    f.ComputeScalarsOff()
    return f


def marching_cubes():
    f = vtkMarchingCubes()
    f.ComputeNormalsOn()
    f.ComputeGradientsOff()
    f.ComputeScalarsOff()
    return f


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bench = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [128, 256]
    reps = int(os.environ.get("PM_BENCH_REPS", "7"))
    print("VTK %s, SMP backend %s" % (vtkVersion.GetVTKVersion(), vtkSMPTools.GetBackend()))
    print("| N | peer | threads | median ms | min ms | points | triangles |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, "cayley%d.raw" % n)
            subprocess.run([bench, "--write-field", str(n), path], check=True)
            image = read_field(path, n)
            for threads in (1, 2):
                vtkSMPTools.Initialize(threads)
                med, mn, npts, ntri = time_filter(flying_edges, image, reps)
                print("| %d | vtkFlyingEdges3D normals | %d | %.2f | %.2f | %d | %d |"
                      % (n, threads, med, mn, npts, ntri), flush=True)
            med, mn, npts, ntri = time_filter(marching_cubes, image, max(1, reps // 2))
            print("| %d | vtkMarchingCubes normals | 1 | %.2f | %.2f | %d | %d |"
                  % (n, med, mn, npts, ntri), flush=True)
    print()
    sys.stdout.flush()
    subprocess.run([bench] + [str(n) for n in sizes], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
