"""The primitives against NumPy references, on sizes around block and
power-of-two boundaries, with NaN, empty inputs, 2-d padded images,
truncation-free outputs, context-memory output and errors."""
import numpy as np
import pytest

import pyramesh

SIZES = [0, 1, 2, 31, 33, 1023, 1025, 65535, 65537, 300001]


@pytest.mark.parametrize("n", SIZES)
def test_reduce(rng, n):
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    d = x.astype(np.float64)
    assert pyramesh.reduce(x) == pytest.approx(d.sum(), rel=1e-9)
    if n == 0:
        with pytest.raises(pyramesh.InvalidArgumentError):
            pyramesh.reduce(x, "max")
        return
    assert pyramesh.reduce(x, "mean") == pytest.approx(d.mean(), rel=1e-9)
    assert pyramesh.reduce(x, "min") == d.min()
    assert pyramesh.reduce(x, "max") == d.max()
    assert pyramesh.reduce(x, "geomean") == pytest.approx(np.exp(np.log(d).mean()), rel=1e-9)


def test_reduce_nan_and_image(rng):
    x = rng.standard_normal(5000).astype(np.float32)
    x[17] = np.nan
    assert np.isnan(pyramesh.reduce(x))
    assert pyramesh.reduce(x, "min") == np.nanmin(x)
    img = rng.standard_normal((37, 53)).astype(np.float32)
    padded = np.full((37, 64), np.nan, np.float32)
    padded[:, :53] = img
    view = padded[:, :53]  # rows 64 apart, padding never read
    assert pyramesh.reduce(view) == pytest.approx(img.astype(np.float64).sum(), rel=1e-9, abs=1e-9)
    assert pyramesh.reduce(view, "max") == img.max()
    with pytest.raises(ValueError):
        pyramesh.reduce(x, "median")


@pytest.mark.parametrize("n", SIZES)
def test_scan(rng, n):
    x = rng.integers(0, 1000, n).astype(np.uint32)
    out, total = pyramesh.scan(x)
    ref = np.concatenate([[0], np.cumsum(x, dtype=np.uint64)[:-1]]) if n else np.zeros(0)
    assert out.dtype == np.uint32
    np.testing.assert_array_equal(out, ref)
    assert total == int(x.sum(dtype=np.uint64))


def test_scan_overflow():
    x = np.full(5, 2 ** 31, np.uint32)
    with pytest.raises(pyramesh.SizeOverflowError) as e:
        pyramesh.scan(x)
    assert isinstance(e.value, OverflowError) and str(e.value)


@pytest.mark.parametrize("cmp,op", [("<", np.less), ("<=", np.less_equal), (">", np.greater),
                                    (">=", np.greater_equal)])
@pytest.mark.parametrize("method", ["histopyramid", "horn"])
def test_filter(rng, cmp, op, method):
    x = rng.integers(-5, 5, 70001).astype(np.float32)
    x[::97] = np.nan
    got = pyramesh.filter(x, cmp, 1.0, method=method)
    np.testing.assert_array_equal(got, x[op(x, 1.0)])
    assert got.dtype == np.float32


@pytest.mark.parametrize("n", SIZES)
def test_compact(rng, n):
    flags = rng.random(n) < 0.3
    got = pyramesh.compact(flags)
    assert got.dtype == np.uint64
    np.testing.assert_array_equal(got, np.flatnonzero(flags))
    np.testing.assert_array_equal(pyramesh.compact(flags.astype(np.uint8) * 7), np.flatnonzero(flags))


@pytest.mark.parametrize("n", SIZES)
def test_expand(rng, n):
    counts = rng.integers(0, 4, n).astype(np.uint32)
    src, loc = pyramesh.expand(counts)
    ref_src = np.repeat(np.arange(n), counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if n else np.zeros(0, int)
    ref_loc = np.arange(len(ref_src)) - np.repeat(starts, counts)
    np.testing.assert_array_equal(src, ref_src)
    np.testing.assert_array_equal(loc, ref_loc)
    assert src.dtype == np.uint64 and loc.dtype == np.uint32


def test_histopyramid(rng):
    counts = rng.integers(0, 5, 10007).astype(np.uint32)
    hp = pyramesh.histopyramid(counts)
    assert hp.total == int(counts.sum()) and len(hp) == len(counts)
    ref_src, ref_loc = pyramesh.expand(counts)
    src, loc = hp.traverse()
    np.testing.assert_array_equal(src, ref_src)
    np.testing.assert_array_equal(loc, ref_loc)
    a, b = 123, 4567
    s2, l2 = hp.traverse(a, b)
    np.testing.assert_array_equal(s2, ref_src[a:a + b])
    np.testing.assert_array_equal(l2, ref_loc[a:a + b])
    with pytest.raises(pyramesh.InvalidArgumentError):
        hp.traverse(hp.total - 1, 2)


def test_conversions_and_output_kinds(rng):
    x = rng.integers(0, 9, 1000)  # int64: converted to uint32 for scan
    out, total = pyramesh.scan(x)
    assert total == int(x.sum())
    d = pyramesh.compact(x > 4, output="device")  # context memory of the CPU context
    assert isinstance(d, pyramesh.ContextArray) and d.device == "cpu"
    np.testing.assert_array_equal(np.from_dlpack(d), np.flatnonzero(x > 4))
    with pytest.raises(ValueError):
        pyramesh.scan(x, output="gpu")
    strided = (rng.random((10, 20)) < 0.5)[:, ::2]  # host arrays are copied when needed
    np.testing.assert_array_equal(pyramesh.compact(strided), np.flatnonzero(strided))
