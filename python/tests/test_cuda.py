"""CUDA: device arrays in and out. No CuPy is needed: device memory comes
from libcudart through ctypes, wrapped in a small class that exposes
__cuda_array_interface__ (what CuPy, Numba and PyTorch expose). Every
result is compared with the CPU context's (the library gives the same
mesh, byte for byte, on every backend). Skipped without a GPU."""
import ctypes
import ctypes.util
import os

import numpy as np
import pytest

import pyramesh

pytestmark = pytest.mark.cuda


def _load_cudart():
    names = [ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12", "libcudart.so.13",
             "libcudart.so.11.0"]
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    names += [os.path.join(home, "lib64", "libcudart.so")]
    for n in names:
        if not n:
            continue
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    return None


CUDART = _load_cudart()
H2D, D2H = 1, 2


def check(e):
    assert e == 0, "CUDA runtime error %d" % e


class DeviceArray:
    """Device memory with __cuda_array_interface__ (version 3)."""

    def __init__(self, host, stream=None):
        if CUDART is None:
            pytest.skip("libcudart not found")
        host = np.ascontiguousarray(host)
        self.shape, self.dtype = host.shape, host.dtype
        self.ptr = ctypes.c_void_p()
        check(CUDART.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(max(1, host.nbytes))))
        check(CUDART.cudaMemcpy(self.ptr, host.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(host.nbytes), H2D))
        self.stream = stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr.value or 0, False),
                "version": 3, "strides": None, "stream": self.stream}

    def __del__(self):
        if CUDART is not None and getattr(self, "ptr", None) is not None:
            CUDART.cudaFree(self.ptr)


class StridedDeviceVolume(DeviceArray):
    """A (nz, ny, nx) view into a device array with padded rows."""

    def __init__(self, host, pad):
        padded = np.zeros(host.shape[:2] + (host.shape[2] + pad,), host.dtype)
        padded[:, :, : host.shape[2]] = host
        super().__init__(padded)
        self.view_shape, self.strides = host.shape, padded.strides

    @property
    def __cuda_array_interface__(self):
        d = super().__cuda_array_interface__
        d["shape"], d["strides"] = self.view_shape, self.strides
        return d


def read_device(cai_obj):
    """A NumPy copy of anything with __cuda_array_interface__ (C order)."""
    cai = cai_obj.__cuda_array_interface__
    out = np.empty(cai["shape"], np.dtype(cai["typestr"]))
    check(CUDART.cudaMemcpy(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_void_p(cai["data"][0]),
                            ctypes.c_size_t(out.nbytes), D2H))
    return out


def volume(rng, shape=(40, 44, 48)):
    from scipy import ndimage

    return ndimage.gaussian_filter(rng.standard_normal(shape), 2.0).astype(np.float32)


def test_isosurface_device_in_device_out(rng):
    vol = volume(rng)
    ref = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu"))
    m = pyramesh.isosurface(DeviceArray(vol), 0.0)  # CUDA input: a CUDA context, device output
    assert isinstance(m.vertices, pyramesh.ContextArray) and m.vertices.device == "cuda"
    assert m.vertices.__cuda_array_interface__["version"] == 3
    np.testing.assert_array_equal(read_device(m.vertices), ref.vertices)
    np.testing.assert_array_equal(m.faces.get(), ref.faces)
    np.testing.assert_array_equal(np.asarray(m.normals), ref.normals)
    with pytest.raises(AttributeError):
        m.vertices.__array_interface__


def test_isosurface_host_output_and_host_input(rng):
    vol = volume(rng)
    ref = pyramesh.isosurface(vol, 0.0, mode="soup", context=pyramesh.Context("cpu"))
    a = pyramesh.isosurface(DeviceArray(vol), 0.0, mode="soup", output="host")
    b = pyramesh.isosurface(vol, 0.0, mode="soup", device="cuda")  # copied in by the library
    for x in (a, b):
        assert isinstance(x.vertices, np.ndarray)
        np.testing.assert_array_equal(x.vertices, ref.vertices)
        np.testing.assert_array_equal(x.normals, ref.normals)


def test_strided_device_volume(rng):
    vol = volume(rng, (20, 22, 24))
    ref = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu"))
    m = pyramesh.isosurface(StridedDeviceVolume(vol, 8), 0.0, output="host")
    np.testing.assert_array_equal(m.vertices, ref.vertices)
    np.testing.assert_array_equal(m.faces, ref.faces)


def test_stream_in_interface(rng):
    vol = volume(rng, (16, 17, 18))
    ref = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu"))
    m = pyramesh.isosurface(DeviceArray(vol, stream=1), 0.0, output="host")  # legacy stream: waited for
    np.testing.assert_array_equal(m.vertices, ref.vertices)


def test_marching_cubes_on_cuda(rng):
    vol = volume(rng)
    ref = pyramesh.marching_cubes(vol, 0.0, spacing=(1, 2, 3))
    got = pyramesh.marching_cubes(vol, 0.0, spacing=(1, 2, 3), device="cuda")
    for x, y in zip(ref, got):
        np.testing.assert_array_equal(x, y)


def test_device_output_is_dlpack_input(rng):
    vol = volume(rng, (16, 17, 18))
    field = pyramesh.isosurface(DeviceArray(vol), 0.0)
    assert field.vertices.__dlpack_device__()[0] == 2

    class DLPackOnly:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    # The vertices, read back through DLPack as an (n, 3) "particle" set.
    s = pyramesh.reduce(DLPackOnly(field.normals))
    assert s == pytest.approx(float(field.normals.get().astype(np.float64).sum()), rel=1e-6, abs=1e-3)


def test_primitives_on_device(rng):
    x = rng.uniform(0.5, 2.0, 100003).astype(np.float32)
    d = DeviceArray(x)
    assert pyramesh.reduce(d) == pytest.approx(x.astype(np.float64).sum(), rel=1e-9)
    assert pyramesh.reduce(d, "max") == x.max()
    kept = pyramesh.filter(d, ">", 1.0)
    assert isinstance(kept, pyramesh.ContextArray)
    np.testing.assert_array_equal(kept.get(), x[x > 1.0])
    counts = rng.integers(0, 4, 50001).astype(np.uint32)
    dc = DeviceArray(counts)
    out, total = pyramesh.scan(dc)
    np.testing.assert_array_equal(read_device(out), np.concatenate([[0], np.cumsum(counts)[:-1]]))
    assert total == counts.sum()
    src, loc = pyramesh.expand(dc)
    np.testing.assert_array_equal(src.get(), np.repeat(np.arange(len(counts)), counts))
    hp = pyramesh.histopyramid(dc)
    s2, l2 = hp.traverse(10, 1000)
    np.testing.assert_array_equal(s2.get(), src.get()[10:1010])
    np.testing.assert_array_equal(l2.get(), loc.get()[10:1010])
    flags = DeviceArray((counts > 1).astype(np.uint8))
    np.testing.assert_array_equal(pyramesh.compact(flags).get(), np.flatnonzero(counts > 1))
    # host inputs on a CUDA context are copied in; host output
    np.testing.assert_array_equal(pyramesh.compact(counts > 1, device="cuda"), np.flatnonzero(counts > 1))
    # chaining on the device: a result feeds the next call
    again, _ = pyramesh.scan(out)
    assert isinstance(again, pyramesh.ContextArray)


def test_reconstruct_on_device(rng):
    g = np.arange(-0.4, 0.4, 0.04)
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    pts = (pts[np.linalg.norm(pts, axis=1) < 0.3] + rng.uniform(-0.004, 0.004, (1, 3))).astype(np.float32)
    ref = pyramesh.reconstruct(pts, 0.02, context=pyramesh.Context("cpu"), keep_field=True)
    rec = pyramesh.reconstruct(DeviceArray(pts), 0.02, keep_field=True)
    assert isinstance(rec.vertices, pyramesh.ContextArray)
    np.testing.assert_array_equal(rec.vertices.get(), ref.vertices)
    np.testing.assert_array_equal(rec.triangles.get(), ref.triangles)
    np.testing.assert_array_equal(rec.field.values.get(), ref.field.values)
    host = pyramesh.reconstruct(pts, 0.02, device="cuda")
    np.testing.assert_array_equal(host.vertices, ref.vertices)
    f = pyramesh.density_field(DeviceArray(pts), 0.02, output="host")
    np.testing.assert_array_equal(f.values, ref.field.values)
    # A fixed lattice (pm_field_compute_async), from host particles copied in.
    grid = pyramesh.field_grid_for_box(pts.min(axis=0), pts.max(axis=0), 0.02)
    g = pyramesh.density_field(pts, 0.02, grid=grid, device="cuda")
    assert isinstance(g.values, np.ndarray)
    np.testing.assert_array_equal(g.values, ref.field.values)
    gd = pyramesh.density_field(DeviceArray(pts), 0.02, grid=grid)
    assert isinstance(gd.values, pyramesh.ContextArray)
    np.testing.assert_array_equal(gd.values.get(), ref.field.values)
    m = gd.isosurface(output="host")  # the field read in place on the device
    np.testing.assert_array_equal(m.vertices, ref.vertices)


def test_cuda_array_on_cpu_context_is_refused(rng):
    d = DeviceArray(np.zeros((4, 4, 4), np.float32))
    with pytest.raises(ValueError, match="CUDA"):
        pyramesh.isosurface(d, 0.0, context=pyramesh.Context("cpu"))


def test_cupy_arrays(rng):
    cp = pytest.importorskip("cupy")
    vol = volume(rng)
    ref = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu"))
    m = pyramesh.isosurface(cp.asarray(vol), 0.0)
    v = cp.asarray(m.vertices)  # zero copy through __cuda_array_interface__
    assert v.data.ptr == m.vertices.ptr
    np.testing.assert_array_equal(cp.asnumpy(v), ref.vertices)
    f = cp.from_dlpack(m.faces)  # zero copy through DLPack
    assert f.data.ptr == m.faces.ptr
    np.testing.assert_array_equal(cp.asnumpy(f), ref.faces)
    # Work queued on another stream is waited for (the interface's stream).
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        doubled = cp.asarray(vol) * 2.0
        m2 = pyramesh.isosurface(doubled, 0.0, output="host")
    ref2 = pyramesh.isosurface(vol * 2.0, 0.0, context=pyramesh.Context("cpu"))
    np.testing.assert_array_equal(m2.vertices, ref2.vertices)
    x = cp.asarray(rng.random(100000).astype(np.float32))
    assert pyramesh.reduce(x) == pytest.approx(float(cp.asnumpy(x).astype(np.float64).sum()), rel=1e-9)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(pyramesh.compact(x > 0.5))),
                                  np.flatnonzero(cp.asnumpy(x) > 0.5))


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    vol = volume(rng)
    ref = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu"))
    m = pyramesh.isosurface(torch.from_numpy(vol).cuda(), 0.0)
    tv = torch.from_dlpack(m.vertices)
    assert tv.data_ptr() == m.vertices.ptr and tv.is_cuda
    np.testing.assert_array_equal(tv.cpu().numpy(), ref.vertices)
    pts = torch.rand(5000, 3, device="cuda")
    f = pyramesh.density_field(pts, 0.02, output="host")
    g = pyramesh.density_field(pts.cpu().numpy(), 0.02, context=pyramesh.Context("cpu"))
    np.testing.assert_array_equal(f.values, g.values)
