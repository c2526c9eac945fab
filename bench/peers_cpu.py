#!/usr/bin/python3
"""pyramesh's CPU marching cubes beside VTK's vtkFlyingEdges3D, run by run.

Four sides per case, each a process holding the volume: two VTK ones
(this script's --vtk-serve) and two pyramesh ones (bench_cpu_isosurface
--serve, one context kept across calls, as an application would).
"VTK" and "pyramesh" run with glibc's malloc as it comes. In the "keep"
sides neither library pays for faulting in fresh pages, which in a
virtual machine can outweigh the extraction: "VTK keep" runs with malloc
keeping freed memory (KEEP_ENV below), so each Update() reuses the heap of
the one before; "pyramesh keep" writes into buffers of its own
(options.out_positions ...), allocated once and reused (and runs with
KEEP_ENV too, for its scratch arrays). The keep pair runs first, then the
plain pair; within a pair the runs alternate (the order flipped every
round), one warm-up round, then R timed rounds, 50 ms between runs so
that the idle threads of the side before have stopped spinning. Both
libraries use the same number of threads (vtkSMPTools.Initialize(T);
pyramesh's context threads) and compute normals: vtkFlyingEdges3D with
ComputeNormalsOn (scalars and gradients off), pyramesh an indexed mesh
with central-difference normals. A VTK run is Update() on a fresh filter;
a pyramesh run one pm_isosurface call (output allocation included, freeing
excluded on both sides). Prints the median and the min-max spread of each
side, the ratios of the medians, both meshes' counts and the load average.

Cases (fields written by bench_cpu_isosurface --write-field):
  cayley256, cayley512  the cayley field of ANCHORS.md, f32, iso 0
  gyroid384             sin x cos y + sin y cos z + sin z cos x,
                        x = 2 pi i / 8 (a period of 8 cells), f32, iso 0
  ct512                 a CT-like u8 phantom, 512 x 512 x 300 (see
                        bench_ct in bench_cpu_isosurface.c), iso 180 (bone)
  any raw file:         --raw PATH --dims NX,NY,NZ --type u8|u16|i16|f32
                        --iso V (little-endian, x fastest; e.g. a CT scan
                        exported as raw), named by the file

usage: /usr/bin/python3 bench/peers_cpu.py BUILD/bench/bench_cpu_isosurface
           [CASE ...] [--raw PATH --dims NX,NY,NZ --type T --iso V]
           [--reps R] [--threads T] [--prime] [--others]
  default cases: cayley256 cayley512 gyroid384 ct512; R default 9
  (env PM_BENCH_REPS too); T default 2.
  --prime   each run right after an untimed one of the same side, as in
            a frame loop: on a virtual machine a vCPU that has idled
            (the 50 ms gaps) runs slower for tens of milliseconds after
            it wakes (bench/RESULTS-mc.md), which falls on short runs.
  --others  afterwards, the slower peers on the same volumes, not
            interleaved: vtkFlyingEdges3D on 1 thread, vtkMarchingCubes
            (serial) and scikit-image's marching_cubes (lorensen, serial),
            and pyramesh on 1 thread, median of max(3, R // 3) runs.
Needs Debian's python3-vtk9 (and python3-skimage for --others); run with
/usr/bin/python3."""
import os
import subprocess
import sys
import tempfile
import time

from vtkmodules.vtkCommonCore import vtkSMPTools, vtkVersion
from vtkmodules.vtkFiltersCore import vtkFlyingEdges3D, vtkMarchingCubes
from vtkmodules.vtkIOImage import vtkImageReader2

CASES = {
    # name: (field, N, dims, type, iso)
    "cayley256": ("cayley", 256, (256, 256, 256), "f32", 0.0),
    "cayley512": ("cayley", 512, (512, 512, 512), "f32", 0.0),
    "gyroid384": ("gyroid", 384, (384, 384, 384), "f32", 0.0),
    "ct512": ("ct", 512, (512, 512, 300), "u8", 180.0),
}
VTK_TYPES = {"u8": "UnsignedChar", "u16": "UnsignedShort", "i16": "Short", "f32": "Float",
             "f64": "Double"}
NUMPY_TYPES = {"u8": "u1", "u16": "<u2", "i16": "<i2", "f32": "<f4", "f64": "<f8"}


def read_volume(path, dims, stype):
    r = vtkImageReader2()
    r.SetFileName(path)
    r.SetFileDimensionality(3)
    getattr(r, "SetDataScalarTypeTo" + VTK_TYPES[stype])()
    r.SetDataByteOrderToLittleEndian()
    r.SetNumberOfScalarComponents(1)
    r.SetDataExtent(0, dims[0] - 1, 0, dims[1] - 1, 0, dims[2] - 1)
    r.SetDataSpacing(1, 1, 1)
    r.SetDataOrigin(0, 0, 0)
    r.Update()
    return r.GetOutput()


def vtk_run(cls, image, iso):
    """One Update() of a fresh filter with normals: ms, points, triangles."""
    f = cls()
    f.ComputeNormalsOn()
    f.ComputeGradientsOff()
    f.ComputeScalarsOff()
    f.SetInputData(image)
    f.SetValue(0, iso)
    t0 = time.perf_counter()
    f.Update()
    t1 = time.perf_counter()
    out = f.GetOutput()
    return (t1 - t0) * 1e3, out.GetNumberOfPoints(), out.GetNumberOfCells()


def vtk_serve(path, dims, stype, iso, threads):
    """The VTK side's process (--vtk-serve): like bench_cpu_isosurface
    --serve, one timed vtkFlyingEdges3D Update() per line "run"."""
    image = read_volume(path, dims, stype)
    vtkSMPTools.Initialize(threads)
    for line in sys.stdin:
        if not line.startswith("run"):
            break
        ms, npts, ntri = vtk_run(vtkFlyingEdges3D, image, iso)
        print("%.3f %d %d vtk" % (ms, npts, ntri), flush=True)
    return 0


# glibc's malloc returns blocks over 32 MiB to the system when they are
# freed, so each call maps fresh pages and faults every one of them in,
# which a virtual machine can make the largest part of a call (4 KiB pages
# cost 6 s per GiB on the machine of bench/RESULTS-mc.md). With these
# settings freed memory stays in the heap and the next call reuses it: the
# "keep" sides run both libraries so.
KEEP_ENV = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736"


class Server:
    """A process timing one extraction per request: bench_cpu_isosurface
    --serve (pyramesh) or this script's --vtk-serve."""

    def __init__(self, bench, path, dims, stype, iso, threads, vtk, keep):
        args = [path, stype] + [str(d) for d in dims] + [repr(iso), str(threads)]
        if vtk:
            cmd = [sys.executable, os.path.abspath(__file__), "--vtk-serve"] + args
        else:
            cmd = [bench, "--serve"] + args
        env = dict(os.environ)
        env.pop("GLIBC_TUNABLES", None)
        if keep:
            env["GLIBC_TUNABLES"] = KEEP_ENV
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env)

    def run(self, what="run"):
        self.p.stdin.write(what + "\n")
        self.p.stdin.flush()
        f = self.p.stdout.readline().split()
        if len(f) < 3:
            raise RuntimeError("bench_cpu_isosurface --serve failed")
        return float(f[0]), int(f[1]), int(f[2]), " ".join(f[3:])

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def stats(times):
    t = sorted(times)
    return t[len(t) // 2], t[0], t[-1]


def fmt(times):
    med, lo, hi = stats(times)
    return "%.2f [%.2f-%.2f]" % (med, lo, hi)


def load():
    return "%.2f" % os.getloadavg()[0]


SIDES = ("vtk_keep", "pm_keep", "vtk", "pm")


def run_case(bench, name, path, dims, stype, iso, reps, threads, prime=False):
    """Two phases, the keep pair first: in each, R rounds after a warm-up
    round, each round running both sides, the order flipped every round.
    (The pairs run apart because the plain sides free hundreds of MB per
    call, and the system's work on freed memory would fall on whichever
    side runs next.)"""
    load0 = load()
    times = {side: [] for side in SIDES}
    counts = {}
    for pair in (SIDES[:2], SIDES[2:]):
        srv = {side: Server(bench, path, dims, stype, iso, threads, side.startswith("vtk"),
                            side.endswith("keep")) for side in pair}
        for rnd in range(reps + 1):
            for q in range(2):
                side = pair[(q + rnd) % 2]
                # Let the previous side's idle threads stop spinning
                # (OpenMP's and TBB's workers spin a while after a
                # parallel region).
                time.sleep(0.05)
                what = "keep" if side == "pm_keep" else "run"
                if prime:
                    srv[side].run(what)
                ms, npts, ntri, path_words = srv[side].run(what)
                counts[side] = (npts, ntri, path_words)
                if rnd:
                    times[side].append(ms)
        for side in pair:
            srv[side].close()
    return {"name": name, "times": times, "counts": counts,
            "load": "%s -> %s" % (load0, load())}


def others(bench, name, path, dims, stype, iso, reps):
    """The slower peers, each run back to back (not interleaved)."""
    import numpy
    from skimage.measure import marching_cubes as skimage_mc
    image = read_volume(path, dims, stype)
    rows = []
    n = max(3, reps // 3)
    vtkSMPTools.Initialize(1)
    for label, cls in (("vtkFlyingEdges3D normals", vtkFlyingEdges3D),
                       ("vtkMarchingCubes normals", vtkMarchingCubes)):
        times = []
        for rep in range(n + 1):
            ms, npts, ntri = vtk_run(cls, image, iso)
            if rep:
                times.append(ms)
        rows.append((label, 1, times, npts, ntri))
    vol = numpy.fromfile(path, dtype=NUMPY_TYPES[stype]).reshape(dims[2], dims[1], dims[0])
    times = []
    for rep in range(n + 1):
        t0 = time.perf_counter()
        verts, faces, _, _ = skimage_mc(vol, iso, method="lorensen")
        t1 = time.perf_counter()
        if rep:
            times.append((t1 - t0) * 1e3)
    rows.append(("skimage marching_cubes lorensen", 1, times, len(verts), len(faces)))
    srv = Server(bench, path, dims, stype, iso, 1, False, False)
    times = []
    for rep in range(n + 1):
        ms, nv, nt, _ = srv.run()
        if rep:
            times.append(ms)
    srv.close()
    rows.append(("pyramesh indexed central", 1, times, nv, nt))
    del image
    return rows


def ratio(r, num, den):
    return stats(r["times"][num])[0] / stats(r["times"][den])[0]


def main(argv):
    if len(argv) == 9 and argv[1] == "--vtk-serve":
        dims = tuple(int(d) for d in argv[4:7])
        return vtk_serve(argv[2], dims, argv[3], float(argv[7]), int(argv[8]))
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__)
        return 2
    bench = argv[1]
    reps = int(os.environ.get("PM_BENCH_REPS", "9"))
    threads, want_others, prime = 2, False, False
    names, raw = [], {}
    a = argv[2:]
    while a:
        x = a.pop(0)
        if x == "--reps":
            reps = int(a.pop(0))
        elif x == "--threads":
            threads = int(a.pop(0))
        elif x == "--others":
            want_others = True
        elif x == "--prime":
            prime = True
        elif x in ("--raw", "--dims", "--type", "--iso"):
            raw[x[2:]] = a.pop(0)
        elif x in CASES:
            names.append(x)
        else:
            print("unknown argument %s\n%s" % (x, __doc__))
            return 2
    if not names and not raw:
        names = list(CASES)
    print("VTK %s, SMP backend %s; %d threads each side; %d timed rounds after 1 warm-up%s; "
          "load average %s at start" % (vtkVersion.GetVTKVersion(), vtkSMPTools.GetBackend(),
                                        threads, reps,
                                        ", each timed run right after an untimed one of its side"
                                        if prime else "", load()), flush=True)
    results, other_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for name in names:
            field, n, dims, stype, iso = CASES[name]
            path = os.path.join(tmp, name + ".raw")
            subprocess.run([bench, "--write-field", field, str(n), path], check=True)
            jobs.append((name, path, dims, stype, iso))
        if raw:
            dims = tuple(int(d) for d in raw["dims"].split(","))
            jobs.append((os.path.basename(raw["raw"]), raw["raw"], dims, raw["type"],
                         float(raw["iso"])))
        for name, path, dims, stype, iso in jobs:
            r = run_case(bench, name, path, dims, stype, iso, reps, threads, prime)
            results.append(r)
            t = r["times"]
            print("%s: VTK %s, pyramesh %s, VTK keep %s, pyramesh keep %s ms; %.2fx / %.2fx; "
                  "load %s" % (name, fmt(t["vtk"]), fmt(t["pm"]), fmt(t["vtk_keep"]),
                               fmt(t["pm_keep"]), ratio(r, "vtk", "pm"),
                               ratio(r, "vtk_keep", "pm_keep"), r["load"]), flush=True)
            if want_others:
                other_rows += [(name,) + row for row in
                               others(bench, name, path, dims, stype, iso, reps)]
    print()
    print("Times in ms, median [min-max] of %d rounds. VTK: vtkFlyingEdges3D, normals on; "
          "pyramesh: indexed, central normals, one context kept across calls. keep: both "
          "processes run with GLIBC_TUNABLES=%s (malloc keeps freed memory), pyramesh keep "
          "writes into the caller's buffers, reused from call to call." % (reps, KEEP_ENV))
    print()
    print("| case | VTK | pyramesh | ratio | VTK keep | pyramesh keep | ratio | "
          "VTK points / triangles | pyramesh vertices / triangles | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        t, c = r["times"], r["counts"]
        print("| %s | %s | %s | **%.2fx** | %s | %s | **%.2fx** | %d / %d | %d / %d | %s |" %
              (r["name"], fmt(t["vtk"]), fmt(t["pm"]), ratio(r, "vtk", "pm"),
               fmt(t["vtk_keep"]), fmt(t["pm_keep"]), ratio(r, "vtk_keep", "pm_keep"),
               c["vtk"][0], c["vtk"][1], c["pm"][0], c["pm"][1], r["load"]))
    print()
    for r in results:
        print("%s: pyramesh path %s" % (r["name"], r["counts"]["pm"][2]))
        for side in SIDES:
            print("  %-8s %s" % (side, " ".join("%.2f" % x for x in r["times"][side])))
    if other_rows:
        print()
        print("| case | peer | threads | median ms [min-max] | points | triangles |")
        print("|---|---|---|---|---|---|")
        for name, label, thr, times, npts, ntri in other_rows:
            print("| %s | %s | %d | %s | %d | %d |" % (name, label, thr, fmt(times), npts, ntri))
    print("\nload average at end %s" % load())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
