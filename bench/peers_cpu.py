#!/usr/bin/python3
"""CPU peers on the cayley field (ANCHORS.md), beside bench_cpu_isosurface in
the same run: VTK's vtkFlyingEdges3D (normals on) with 1 and 2 threads,
vtkMarchingCubes (serial) and scikit-image's marching_cubes (lorensen,
serial), median of R runs each, then pyramesh's table and the ratios.
Needs Debian's python3-vtk9 and python3-skimage (run with /usr/bin/python3).

usage: /usr/bin/python3 bench/peers_cpu.py BUILD/bench/bench_cpu_isosurface [N ...]
env: PM_BENCH_REPS (default 7)."""
import os
import subprocess
import sys
import tempfile
import time

import numpy
from skimage.measure import marching_cubes as skimage_mc

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
    peers = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, "cayley%d.raw" % n)
            subprocess.run([bench, "--write-field", str(n), path], check=True)
            image = read_field(path, n)
            for threads in (1, 2):
                vtkSMPTools.Initialize(threads)
                med, mn, npts, ntri = time_filter(flying_edges, image, reps)
                peers[(n, "vtkFlyingEdges3D", threads)] = med
                print("| %d | vtkFlyingEdges3D normals | %d | %.2f | %.2f | %d | %d |"
                      % (n, threads, med, mn, npts, ntri), flush=True)
            med, mn, npts, ntri = time_filter(marching_cubes, image, max(1, reps // 2))
            print("| %d | vtkMarchingCubes normals | 1 | %.2f | %.2f | %d | %d |"
                  % (n, med, mn, npts, ntri), flush=True)
            vol = numpy.fromfile(path, dtype="<f4").reshape(n, n, n)
            times = []
            for rep in range(max(2, reps // 2) + 1):
                t0 = time.perf_counter()
                verts, faces, _, _ = skimage_mc(vol, 0.0, method="lorensen")
                t1 = time.perf_counter()
                if rep:
                    times.append((t1 - t0) * 1e3)
            times.sort()
            peers[(n, "skimage", 1)] = times[len(times) // 2]
            print("| %d | skimage marching_cubes lorensen | 1 | %.2f | %.2f | %d | %d |"
                  % (n, times[len(times) // 2], times[0], len(verts), len(faces)), flush=True)
    print()
    sys.stdout.flush()
    out = subprocess.run([bench] + [str(n) for n in sizes], check=True,
                         capture_output=True, text=True).stdout
    print(out)
    ours = {}
    for line in out.splitlines():
        f = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(f) >= 5 and f[0].isdigit():
            ours[(int(f[0]), f[1], f[2], int(f[3]))] = float(f[4])
    print("| N | pyramesh config | threads | pyramesh ms | peer | peer ms | speedup |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        for mode in ("indexed", "soup"):
            for threads in (1, 2):
                key = (n, mode, "central", threads)
                if key not in ours:
                    continue
                for peer, pt in (("vtkFlyingEdges3D", threads), ("skimage", 1)):
                    if (n, peer, pt) in peers:
                        pm, pp = ours[key], peers[(n, peer, pt)]
                        print("| %d | %s central normals | %d | %.2f | %s (%d thr) | %.2f | %.2fx |"
                              % (n, mode, threads, pm, peer, pt, pp, pp / pm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
