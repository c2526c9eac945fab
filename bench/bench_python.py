#!/usr/bin/python3
"""pyramesh from Python against scikit-image's marching_cubes, Python
overhead included: the cayley field of ANCHORS.md (f32, [-1,1]^3, level 0)
at N^3, median of R runs. pyramesh runs on a CPU context of T threads
(marching_cubes: the scikit-image drop-in, values and all; isosurface: the
library's own call); with a GPU, also CUDA device input to device output
(isosurface on a __cuda_array_interface__ array, ctypes and libcudart, no
CuPy) and marching_cubes(device='cuda') on the NumPy volume.

usage: PYTHONPATH=build/python /usr/bin/python3 bench/bench_python.py [N ...]
env: PM_BENCH_REPS (7), PM_BENCH_SK_REPS (3), PM_BENCH_THREADS (2).

The last column of every row is the 1-minute load average when the row
finished: on a shared machine (load above the core count) the OpenMP
threads' spin-waiting (libgomp's GOMP_SPINCOUNT / OMP_WAIT_POLICY, printed
in the header) decides more of the time than the code does; see
bench/RESULTS-python.md."""
import ctypes
import ctypes.util
import os
import sys
import time

import numpy as np

import pyramesh

try:
    from skimage.measure import marching_cubes as skimage_mc
except ImportError:  # the pyramesh rows are still measured
    skimage_mc = None


def cayley(n):
    u = np.arange(n, dtype=np.float64) * 2.0 / (n - 1) - 1.0
    z, y, x = np.meshgrid(u, u, u, indexing="ij")
    return (1.0 - 16.0 * x * y * z - 4.0 * (x * x + y * y + z * z)).astype(np.float32)


def timed(fn, reps):
    """(median ms, min ms, last result) of reps runs after one warm-up run."""
    out = fn()
    times = []
    for _ in range(reps):
        out = None  # the previous result is freed before the next run
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0], out


class CudaVolume:
    """Device memory from libcudart, exposed through __cuda_array_interface__."""

    def __init__(self, cudart, host):
        self.cudart, self.shape, self.dtype = cudart, host.shape, host.dtype
        self.ptr = ctypes.c_void_p()
        if cudart.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(host.nbytes)) != 0:
            raise MemoryError("cudaMalloc")
        cudart.cudaMemcpy(self.ptr, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes), 1)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr.value, False),
                "version": 3, "strides": None, "stream": None}

    def __del__(self):
        self.cudart.cudaFree(self.ptr)


def load_cudart():
    for name in (ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12",
                 "/usr/local/cuda/lib64/libcudart.so"):
        if name:
            try:
                return ctypes.CDLL(name)
            except OSError:
                pass
    return None


def main():
    sizes = [int(a) for a in sys.argv[1:]] or [256, 512]
    reps = int(os.environ.get("PM_BENCH_REPS", "7"))
    sk_reps = int(os.environ.get("PM_BENCH_SK_REPS", "3"))
    threads = int(os.environ.get("PM_BENCH_THREADS", "2"))
    cpu = pyramesh.Context("cpu", threads=threads)
    cuda = pyramesh.Context("cuda") if pyramesh.cuda_available() else None
    cudart = load_cudart() if cuda else None
    print("pyramesh %s (%s); CPU context: %d threads on %d cores; %s" % (
        pyramesh.__version__, pyramesh.build_info(), cpu.threads, os.cpu_count(),
        cuda.device_name if cuda else "no GPU"))
    print("load average at start: %.2f %.2f %.2f; OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s" % (
        os.getloadavg() + (os.environ.get("OMP_WAIT_POLICY", "(unset)"),
                           os.environ.get("GOMP_SPINCOUNT", "(unset)"))))
    print("| N | call | median ms | min ms | vertices | triangles | skimage / this (median) | (min) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        vol = cayley(n)
        sk = {}
        if skimage_mc is not None:
            for key, name, fn in (("level", "skimage.measure.marching_cubes(vol, 0.0)", lambda: skimage_mc(vol, 0.0)),
                                  ("none", "skimage.measure.marching_cubes(vol) (level=None)", lambda: skimage_mc(vol))):
                r = timed(fn, sk_reps)
                print("| %d | %s | %.2f | %.2f | %d | %d | 1 | 1 | %.2f |" % (
                    n, name, r[0], r[1], len(r[2][0]), len(r[2][1]), os.getloadavg()[0]))
                sk[key] = r[:2]
        rows = [
            ("level", "pyramesh.marching_cubes(vol, 0.0)", lambda: pyramesh.marching_cubes(vol, 0.0, context=cpu)),
            ("none", "pyramesh.marching_cubes(vol) (level=None)", lambda: pyramesh.marching_cubes(vol, context=cpu)),
            ("level", "pyramesh.isosurface(vol, 0.0)", lambda: pyramesh.isosurface(vol, 0.0, context=cpu)),
        ]
        if cuda is not None:
            rows.append(("level", "pyramesh.marching_cubes(vol, 0.0, device='cuda') (NumPy in and out)",
                         lambda: pyramesh.marching_cubes(vol, 0.0, context=cuda)))
            if cudart is not None:
                dvol = CudaVolume(cudart, vol)
                rows.append(("level", "pyramesh.isosurface(cuda_array, 0.0) (device in, device out)",
                             lambda: pyramesh.isosurface(dvol, 0.0, context=cuda)))
        for key, name, fn in rows:
            med, lo, out = timed(fn, reps)
            v, f = out[0], out[1]
            ratio = "%.1fx | %.1fx" % (sk[key][0] / med, sk[key][1] / lo) if key in sk else "- | -"
            print("| %d | %s | %.2f | %.2f | %d | %d | %s | %.2f |" % (
                n, name, med, lo, len(v), len(f), ratio, os.getloadavg()[0]))
            del out
    print("load average at end: %.2f %.2f %.2f" % os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
