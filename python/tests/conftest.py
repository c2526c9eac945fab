"""Shared fixtures: a random generator whose seed is printed when a test
fails (PYRAMESH_TEST_SEED=N replays it), the CUDA marker, volumes."""
import os

import numpy as np
import pytest

import pyramesh


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU and a CUDA build")


def pytest_collection_modifyitems(config, items):
    if pyramesh.cuda_available():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU in this build/machine")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("PYRAMESH_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    request.node.pm_seed = seed
    return np.random.default_rng(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    seed = getattr(item, "pm_seed", None)
    if rep.failed and seed is not None:
        rep.sections.append(("random seed", "PYRAMESH_TEST_SEED=%d" % seed))


def smooth_noise(rng, shape, sigma=2.0):
    """Gaussian-smoothed noise: blobs with many ambiguous-free smooth
    patches, like a real scan's texture."""
    from scipy import ndimage

    return ndimage.gaussian_filter(rng.standard_normal(shape), sigma).astype(np.float32)


def ct_phantom(rng, n=64):
    """A CT-like head phantom in Hounsfield-like units (float64): air, a
    skull shell, soft tissue, two dense inclusions, blurred and noisy."""
    from scipy import ndimage

    z, y, x = np.mgrid[:n, :n, :n].astype(np.float64) / (n - 1) * 2 - 1
    r = np.sqrt((x / 0.8) ** 2 + (y / 0.9) ** 2 + (z / 0.85) ** 2)
    vol = np.full((n, n, n), -1000.0)
    vol[r < 1.0] = 1200.0
    vol[r < 0.88] = 40.0
    for c, rad, hu in (((0.3, -0.2, 0.1), 0.15, 900.0), ((-0.35, 0.25, -0.2), 0.1, 600.0)):
        d = np.sqrt((x - c[0]) ** 2 + (y - c[1]) ** 2 + (z - c[2]) ** 2)
        vol[d < rad] = hu
    return ndimage.gaussian_filter(vol, 1.0) + rng.normal(0.0, 20.0, vol.shape)


def to_dtype(vol, dtype):
    """vol (float64) in `dtype`: floats as they are, bool above the middle,
    integers scaled onto most of the type's range (at most +-1e6) and
    rounded."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return vol.astype(dt)
    lo, hi = float(vol.min()), float(vol.max())
    if dt == np.bool_:
        return vol > 0.5 * (lo + hi)
    info = np.iinfo(dt)
    a, b = max(float(info.min), -1e6), min(float(info.max), 1e6)
    return np.round(a + (vol - lo) * ((b - a) / (hi - lo))).astype(dt)
