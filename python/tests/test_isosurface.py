"""pyramesh.isosurface: its options against each other and against plain
NumPy references, array layouts, context-memory output and DLPack, errors,
contexts, the GIL and KeyboardInterrupt."""
import _thread
import threading
import time

import numpy as np
import pytest

import pyramesh
from conftest import smooth_noise


def ball(n=48, r=None, dtype=np.float32):
    z, y, x = np.mgrid[:n, :n, :n].astype(np.float64)
    c = (n - 1) / 2.0 + 0.3
    r = r or n / 3.0
    return (r - np.sqrt((x - c) ** 2 + (y - c - 0.2) ** 2 + (z - c + 0.1) ** 2)).astype(dtype)


def edges_of(faces):
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return e


def assert_closed_oriented(faces):
    """Every directed edge once, and its reverse once: a closed,
    consistently oriented surface."""
    e = edges_of(np.asarray(faces, dtype=np.int64))
    key = e[:, 0] * (1 << 32) + e[:, 1]
    rev = e[:, 1] * (1 << 32) + e[:, 0]
    assert len(np.unique(key)) == len(key), "a directed edge used twice"
    assert np.array_equal(np.sort(key), np.sort(rev)), "an edge without its twin"


def signed_volume(v, f):
    t = v[np.asarray(f, dtype=np.int64)].astype(np.float64)
    return float(np.einsum("ij,ij->i", t[:, 0], np.cross(t[:, 1], t[:, 2])).sum() / 6.0)


def test_ball_closed_outward(rng):
    vol = ball(40)
    v, f, n = pyramesh.isosurface(vol, 0.0)
    assert v.dtype == np.float32 and f.dtype == np.uint32 and n.dtype == np.float32
    assert_closed_oriented(f)
    # Counter-clockwise from outside: positive volume close to the ball's.
    assert signed_volume(v, f) == pytest.approx(4 / 3 * np.pi * (40 / 3.0) ** 3, rel=0.01)
    c = v.mean(axis=0)
    assert (np.sum(n * (v - c), axis=1) > 0).all()
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, rtol=1e-5)


def test_spacing_origin_and_axis_order(rng):
    vol = smooth_noise(rng, (20, 24, 28))
    a = pyramesh.isosurface(vol, 0.0)
    b = pyramesh.isosurface(vol, 0.0, spacing=(0.5, 2.0, 3.0), origin=(1.0, -2.0, 5.0))
    np.testing.assert_allclose(b.vertices, a.vertices * [0.5, 2.0, 3.0] + [1.0, -2.0, 5.0], rtol=1e-6,
                               atol=1e-5)
    np.testing.assert_array_equal(a.faces, b.faces)
    # x is the last array axis: its coordinates span shape[2] - 1.
    assert a.vertices[:, 0].max() <= 27 and a.vertices[:, 2].max() <= 19
    z = pyramesh.isosurface(vol, 0.0, axis_order="zyx", spacing=(3.0, 2.0, 0.5), origin=(5.0, -2.0, 1.0))
    np.testing.assert_array_equal(z.vertices[:, ::-1], b.vertices)
    np.testing.assert_array_equal(z.normals[:, ::-1], b.normals)
    # Columns swapped: the winding is swapped to stay counter-clockwise.
    np.testing.assert_array_equal(z.faces, b.faces[:, [0, 2, 1]])


@pytest.mark.parametrize("normals", ["central", "forward", "sobel"])
def test_normals_modes_point_out(normals):
    vol = ball(32)
    v, f, n = pyramesh.isosurface(vol, 0.0, normals=normals)
    radial = (v - v.mean(axis=0)) / np.linalg.norm(v - v.mean(axis=0), axis=1)[:, None]
    assert np.sum(n * radial, axis=1).min() > 0.9


def test_normals_none():
    m = pyramesh.isosurface(ball(16), 0.0, normals="none")
    assert m.normals is None and m.faces is not None


def test_soup_is_indexed_expanded(rng):
    vol = rng.random((12, 13, 14)).astype(np.float32)
    idx = pyramesh.isosurface(vol, 0.5)
    soup = pyramesh.isosurface(vol, 0.5, mode="soup")
    assert soup.faces is None
    np.testing.assert_array_equal(soup.vertices, idx.vertices[idx.faces.reshape(-1)])
    np.testing.assert_array_equal(soup.normals, idx.normals[idx.faces.reshape(-1)])
    # The soup keeps its winding when columns are swapped too.
    sz = pyramesh.isosurface(vol, 0.5, mode="soup", axis_order="zyx")
    iz = pyramesh.isosurface(vol, 0.5, axis_order="zyx")
    np.testing.assert_array_equal(sz.vertices, iz.vertices[iz.faces.reshape(-1)])


def test_inside_below_is_negated_field(rng):
    vol = smooth_noise(rng, (16, 17, 18))
    a = pyramesh.isosurface(vol, 0.1, inside="below")
    b = pyramesh.isosurface(-vol, -0.1)
    np.testing.assert_array_equal(a.vertices, b.vertices)
    np.testing.assert_array_equal(a.faces, b.faces)


def test_ambiguous_join(rng):
    vol = rng.random((14, 15, 16)).astype(np.float32)
    sep = pyramesh.isosurface(vol, 0.5)
    join = pyramesh.isosurface(vol, 0.5, ambiguous="join")
    # The same crossing edges: the same vertex positions.
    np.testing.assert_array_equal(np.unique(sep.vertices, axis=0), np.unique(join.vertices, axis=0))
    # The other cut of the ambiguous faces: other triangles (compared by
    # their corners' positions; the counts may happen to be equal).
    def triangles(m):
        corners = m.vertices[m.faces.astype(np.int64)]
        return {tuple(sorted(map(tuple, t))) for t in corners.tolist()}

    assert triangles(sep) != triangles(join)
    # Same region, the other cut: closed where the ball is interior.
    b = ball(30)
    s, j = pyramesh.isosurface(b, 0.0), pyramesh.isosurface(b, 0.0, ambiguous="join")
    assert_closed_oriented(j.faces)
    assert signed_volume(j.vertices, j.faces) == pytest.approx(signed_volume(s.vertices, s.faces), rel=1e-3)
    c = j.vertices.mean(axis=0)
    assert (np.sum(j.normals * (j.vertices - c), axis=1) > 0).all()


@pytest.mark.parametrize("dtype", [np.uint8, np.bool_, np.uint16, np.int16, np.float32, np.float64,
                                   np.int8, np.int32, np.float16])
def test_dtypes_same_surface(dtype):
    base = np.round(ball(24) * 3 + 60)  # integers 0..~100
    vol = base.astype(dtype) if dtype != np.bool_ else base > 60
    level = 60.5 if dtype != np.bool_ else 0.5
    ref = pyramesh.isosurface(base.astype(np.float64) if dtype != np.bool_ else (base > 60).astype(np.float32), level)
    got = pyramesh.isosurface(vol, level)
    np.testing.assert_array_equal(got.vertices, ref.vertices)
    np.testing.assert_array_equal(got.faces, ref.faces)


def test_strided_layouts_in_place(rng):
    base = smooth_noise(rng, (20, 22, 24))
    ref = pyramesh.isosurface(base, 0.0)
    padded = np.zeros((20, 25, 31), np.float32)
    padded[:, :22, :24] = base
    view = padded[:, :22, :24]
    got = pyramesh.isosurface(view, 0.0)
    np.testing.assert_array_equal(got.vertices, ref.vertices)
    np.testing.assert_array_equal(got.faces, ref.faces)
    # Negative strides are copied; the result is the flipped volume's.
    flipped = base[::-1]
    got = pyramesh.isosurface(flipped, 0.0)
    ref2 = pyramesh.isosurface(np.ascontiguousarray(flipped), 0.0)
    np.testing.assert_array_equal(got.vertices, ref2.vertices)


def test_context_memory_output_cpu(rng):
    """output='device' on a CPU context: ContextArray over host memory,
    readable through __array_interface__ and DLPack without a copy."""
    vol = smooth_noise(rng, (14, 15, 16))
    ref = pyramesh.isosurface(vol, 0.0)
    m = pyramesh.isosurface(vol, 0.0, output="device")
    assert isinstance(m.vertices, pyramesh.ContextArray)
    assert m.vertices.device == "cpu" and m.vertices.shape == ref.vertices.shape
    assert not hasattr(m.vertices, "__cuda_array_interface__")
    view = np.asarray(m.vertices)
    assert view.__array_interface__["data"][0] == m.vertices.ptr  # no copy
    np.testing.assert_array_equal(view, ref.vertices)
    faces = np.from_dlpack(m.faces)
    assert faces.__array_interface__["data"][0] == m.faces.ptr
    np.testing.assert_array_equal(faces, ref.faces)
    np.testing.assert_array_equal(m.normals.get(), ref.normals)
    del m, view
    assert faces.sum() >= 0  # the capsule keeps the memory alive


class DLPackOnly:
    """A producer that offers nothing but DLPack (as many libraries)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_input(rng):
    vol = smooth_noise(rng, (14, 15, 16))
    ref = pyramesh.isosurface(vol, 0.0)
    got = pyramesh.isosurface(DLPackOnly(vol), 0.0)
    np.testing.assert_array_equal(got.vertices, ref.vertices)
    x = rng.random(1000).astype(np.float32)
    assert pyramesh.reduce(DLPackOnly(x)) == pytest.approx(float(x.astype(np.float64).sum()), rel=1e-6)


def test_library_errors_carry_message():
    with pytest.raises(pyramesh.InvalidArgumentError, match="iso value is not finite") as e:
        pyramesh.isosurface(np.zeros((3, 3, 3), np.float32), float("nan"))
    assert isinstance(e.value, ValueError) and isinstance(e.value, pyramesh.PyrameshError)
    assert e.value.status == "invalid argument"
    with pytest.raises(ValueError):
        pyramesh.isosurface(np.zeros((3, 3), np.float32), 0.0)
    with pytest.raises(pyramesh.InvalidArgumentError, match="at least 2"):
        pyramesh.isosurface(np.zeros((3, 3, 1), np.float32), 0.0)
    with pytest.raises(ValueError, match="normals"):
        pyramesh.isosurface(np.zeros((3, 3, 3), np.float32), 0.0, normals="sharp")


def test_empty_surface():
    m = pyramesh.isosurface(np.zeros((4, 4, 4), np.float32), 1.0)
    assert m.vertices.shape == (0, 3) and m.faces.shape == (0, 3) and m.active_cells == 0


def test_report_and_timings():
    m = pyramesh.isosurface(ball(20), 0.0, timed=True)
    assert "backend=cpu" in m.path and m.stage_ms and all(t >= 0 for t in m.stage_ms.values())


def test_context_objects():
    with pyramesh.Context("cpu", threads=1) as ctx:
        assert ctx.device == "cpu" and ctx.threads == 1 and not ctx.closed
        m = pyramesh.isosurface(ball(16), 0.0, context=ctx)
        ctx.synchronize()
    assert ctx.closed
    # Arrays outlive their context.
    assert m.vertices.sum() != 0
    with pytest.raises(ValueError, match="closed"):
        pyramesh.isosurface(ball(16), 0.0, context=ctx)
    with pytest.raises(ValueError):
        pyramesh.Context("tpu")
    if not pyramesh.cuda_available():
        with pytest.raises(pyramesh.UnsupportedError):
            pyramesh.Context("cuda")


def test_same_result_any_thread_count(rng):
    vol = smooth_noise(rng, (40, 41, 42))
    a = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu", threads=1))
    b = pyramesh.isosurface(vol, 0.0, context=pyramesh.Context("cpu", threads=2))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_gil_released(rng):
    """Another Python thread runs while a long extraction works."""
    vol = rng.random((160, 160, 160)).astype(np.float32)  # noise: a slow surface
    ctx = pyramesh.Context("cpu", threads=1)
    pyramesh.isosurface(vol[:20], 0.5, context=ctx)
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    t0 = time.perf_counter()
    pyramesh.isosurface(vol, 0.5, context=ctx)
    t1 = time.perf_counter()
    done.set()
    t.join()
    during = [x for x in ticks if t0 <= x <= t1]
    assert t1 - t0 > 0.05
    # The counter thread kept ticking during the call (with the GIL held by
    # the call it could not tick at all).
    assert len(during) >= 3, (len(during), t1 - t0)


@pytest.mark.parametrize("call", ["isosurface", "marching_cubes"])
def test_keyboard_interrupt_stops_a_long_call(rng, call):
    vol = rng.random((192, 192, 192)).astype(np.float32)  # noise: millions of triangles
    ctx = pyramesh.Context("cpu")
    if call == "isosurface":
        def run():
            return pyramesh.isosurface(vol, 0.5, context=ctx).faces
    else:
        def run():  # level=None: the range pass runs in the same job
            return pyramesh.marching_cubes(vol, context=ctx)[1]
    t0 = time.perf_counter()
    full = run()
    t_full = time.perf_counter() - t0
    if t_full < 0.3:
        pytest.skip("the extraction is too fast here to interrupt (%.3f s)" % t_full)
    timer = threading.Timer(0.05, _thread.interrupt_main)
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run()
    t_int = time.perf_counter() - t0
    timer.join()
    assert t_int < 0.05 + 0.5 * t_full, (t_int, t_full)
    # The context is usable again (it waits for the abandoned work) and right.
    again = run()
    np.testing.assert_array_equal(again, full)
    del full, again
