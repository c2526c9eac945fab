"""pyramesh.marching_cubes against scikit-image's marching_cubes (Debian
python3-skimage): vertex positions, orientation, normals, values, dtypes
and errors, on random and CT-like volumes, with spacing, step_size, mask,
gradient_direction, allow_degenerate and every input dtype."""
import tracemalloc

import numpy as np
import pytest

import pyramesh
from conftest import ct_phantom, smooth_noise, to_dtype

skimage_measure = pytest.importorskip("skimage.measure")
cKDTree = pytest.importorskip("scipy.spatial").cKDTree
sk_mc = skimage_measure.marching_cubes

DTYPES = [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32, np.int64, np.uint64,
          np.float16, np.float32, np.float64, np.bool_]


def canonical(faces):
    """Each triangle rotated to start at its smallest index (orientation kept)."""
    f = np.asarray(faces, dtype=np.int64)
    r = np.argmin(f, axis=1)
    rows = np.arange(len(f))
    return np.stack([f[rows, (r + k) % 3] for k in range(3)], axis=1)


def face_set(faces):
    return set(map(tuple, canonical(faces)))


def compare(vol, level, tol=1e-5, smooth=True, **kw):
    """Runs both; returns the match statistics after asserting what must
    hold on any volume."""
    ours = pyramesh.marching_cubes(vol, level, **kw)
    theirs = sk_mc(vol, level, **kw)
    v1, f1, n1, val1 = ours
    v2, f2, n2, val2 = theirs
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape[1:] == b.shape[1:]
    # Every vertex of ours is one of scikit-image's (which adds Lewiner's
    # cell-centre vertices in some ambiguous cells).
    scale = max(1.0, float(np.abs(v2).max()))
    d, idx = cKDTree(v2).query(v1)
    assert d.max() <= tol * scale, "vertex off by %g" % d.max()
    assert len(v1) <= len(v2)
    # Where the two meshes have the same triangle, the same orientation.
    # A triangle lying in a lattice plane (on an ambiguous face, its three
    # vertices on that face's edges) is shared by the two cells of the face
    # and can be one cell's in pyramesh and the other's, turned, in
    # Lewiner's tiling: those are left out.
    ours_f = face_set(idx[f1])
    same = ours_f & face_set(f2)
    reversed_ = ours_f & face_set(np.asarray(f2)[:, ::-1])
    step = kw.get("step_size", 1) * np.ones(3)
    sp = np.asarray(kw.get("spacing", (1.0, 1.0, 1.0)), dtype=np.float64)
    in_plane = [t for t in reversed_
                if any(len(set(c)) == 1 and float(c[0]) / (sp[a] * step[a]) == round(float(c[0]) / (sp[a] * step[a]))
                       for a, c in enumerate(np.asarray(v2)[list(t)].T))]
    assert len(reversed_) == len(in_plane), "%d triangles with the opposite orientation" % (
        len(reversed_) - len(in_plane))
    assert len(in_plane) <= max(2, len(f1) // 1000)
    # Per-vertex values: scikit-image's definition, exactly. Several edges'
    # vertices can share a position (a sample equal to the level): there
    # the multisets of values must agree.
    groups1, groups2 = {}, {}
    for k, row in enumerate(map(tuple, v2[idx])):
        groups1.setdefault(row, []).append(float(val1[k]))
    for k, row in enumerate(map(tuple, v2)):
        if row in groups1:
            groups2.setdefault(row, []).append(float(val2[k]))
    for row, vals in groups1.items():
        np.testing.assert_allclose(sorted(vals), sorted(groups2[row]), rtol=1e-6, atol=0,
                                   err_msg="values at %s" % (row,))
    dots = np.sum(n1 * n2[idx], axis=1)
    return dict(ours=ours, theirs=theirs, matched=len(same) / max(1, len(f1)), dots=dots, idx=idx)


def winding_vs_normals(verts, faces, normals):
    """Fraction of triangles whose geometric normal points like the vertex
    normals (counter-clockwise seen from where the normals point)."""
    t = verts[faces]
    fn = np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0])
    vn = normals[faces].sum(axis=1)
    ok = np.linalg.norm(fn, axis=1) > 0
    return float(np.mean(np.sum(fn * vn, axis=1)[ok] > 0))


def test_smooth_volume_matches_skimage(rng):
    vol = smooth_noise(rng, (40, 47, 53), sigma=3.0)
    r = compare(vol, float(np.median(vol)) + 0.01)
    assert r["matched"] > 0.3  # the rest differ by a quad's diagonal
    dots = r["dots"]
    # Where the gradient nearly vanishes (saddles) the two estimators part.
    assert dots.mean() > 0.99 and np.percentile(dots, 1) > 0.9 and (dots > 0).mean() > 0.999
    v, f, n, _ = r["ours"]
    # 'descent': clockwise seen from where the normals point, as skimage.
    assert winding_vs_normals(v, f, n) < 0.01
    sv, sf, sn, _ = r["theirs"]
    assert winding_vs_normals(sv, sf, sn) < 0.01


def test_random_volume_matches_skimage(rng):
    vol = rng.random((17, 23, 31)).astype(np.float32)
    r = compare(vol, 0.5)
    assert r["matched"] > 0.2
    assert r["dots"].mean() > 0.5  # gradients of noise differ between estimators


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype(rng, dtype):
    vol = to_dtype(ct_phantom(rng, 40), dtype)
    level = None if dtype == np.bool_ else float(vol.min()) + 0.4 * (float(vol.max()) - float(vol.min()))
    if dtype in (np.float16,):
        level = float(np.float16(level))
    r = compare(vol, level)
    assert r["matched"] > 0.3
    # Normals agree where the surface is not flat noise.
    assert np.median(r["dots"]) > 0.9


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.5, 1.25, 2.0), np.array([2.0, 1.0, 0.3])])
def test_spacing(rng, spacing):
    vol = smooth_noise(rng, (30, 36, 28), sigma=2.5)
    r = compare(vol, 0.0, spacing=spacing)
    v = r["ours"][0]
    assert v.dtype == (np.float32 if np.array_equal(spacing, (1, 1, 1)) else np.float64)


@pytest.mark.parametrize("step", [2, 3])
def test_step_size(rng, step):
    vol = smooth_noise(rng, (41, 38, 35), sigma=3.0)
    r = compare(vol, 0.0, step_size=step)
    assert r["matched"] > 0.3
    # Vertices sit on the coarse lattice's edges: two coordinates multiples of step.
    v = r["ours"][0]
    on_lattice = np.isclose(np.mod(v, step), 0) | np.isclose(np.mod(v, step), step)
    assert (on_lattice.sum(axis=1) >= 2).all()


def test_mask(rng):
    vol = smooth_noise(rng, (36, 40, 44), sigma=3.0)
    mask = rng.random(vol.shape) > 0.3
    mask[:10] = False
    r = compare(vol, 0.0, mask=mask)
    ours = r["ours"]
    assert len(ours[0]) > 0
    # The same cells computed: as many vertices and triangles as
    # scikit-image's 'lorensen' (the same case topology; Lewiner adds some).
    lor = sk_mc(vol, 0.0, mask=mask, method="lorensen")
    assert len(ours[1]) == len(lor[1]) and len(ours[0]) == len(lor[0])


def test_mask_all_true_is_no_mask(rng):
    vol = smooth_noise(rng, (20, 22, 24))
    a = pyramesh.marching_cubes(vol, 0.0)
    b = pyramesh.marching_cubes(vol, 0.0, mask=np.ones(vol.shape, bool))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_ascent_reverses_faces(rng):
    vol = smooth_noise(rng, (25, 26, 27))
    d = pyramesh.marching_cubes(vol, 0.0)
    a = pyramesh.marching_cubes(vol, 0.0, gradient_direction="ascent")
    np.testing.assert_array_equal(d[0], a[0])
    assert face_set(d[1]) == face_set(a[1][:, ::-1])
    compare(vol, 0.0, gradient_direction="ascent")


def test_lorensen_counts_as_skimage(rng):
    """'lorensen' in scikit-image resolves ambiguous faces as pyramesh's
    table does: the same vertices and the same number of triangles."""
    vol = rng.random((15, 16, 17)).astype(np.float32)
    ours = pyramesh.marching_cubes(vol, 0.5, method="lorensen")
    theirs = sk_mc(vol, 0.5, method="lorensen")
    assert len(ours[0]) == len(theirs[0]) and len(ours[1]) == len(theirs[1])


def test_allow_degenerate_false(rng):
    # Integer data with the level on sample values: vertices land on
    # lattice points and some triangles collapse.
    vol = rng.integers(0, 4, (18, 19, 20)).astype(np.uint8)
    v, f, n, val = pyramesh.marching_cubes(vol, 1.0, allow_degenerate=False)
    sv, sf, sn, sval = sk_mc(vol, 1.0, allow_degenerate=False)
    assert (v.dtype, f.dtype, n.dtype, val.dtype) == (sv.dtype, sf.dtype, sn.dtype, sval.dtype)
    t = v[f]
    same = (t[:, 0] == t[:, 1]).all(1) | (t[:, 0] == t[:, 2]).all(1) | (t[:, 1] == t[:, 2]).all(1)
    assert not same.any()
    full = pyramesh.marching_cubes(vol, 1.0)
    assert len(f) < len(full[1])  # there were degenerate triangles to remove
    # The surface is the same: equal areas, within the triangulation's play.
    area = skimage_measure.mesh_surface_area
    assert area(v, f) == pytest.approx(area(full[0], full[1]), rel=1e-6)


def test_lorensen_classic_method(rng):
    vol = smooth_noise(rng, (20, 21, 22))
    v, f = pyramesh.marching_cubes(vol, 0.0, method="_lorensen", spacing=(1, 2, 1))
    assert v.dtype == np.float64 and f.dtype == np.int64
    assert len(np.unique(v, axis=0)) == len(v)  # merged by position
    full = pyramesh.marching_cubes(vol, 0.0, spacing=(1, 2, 1))
    area = skimage_measure.mesh_surface_area
    assert area(v, f) == pytest.approx(area(full[0], full[1]), rel=1e-6)


def test_level_default_is_mid_range(rng):
    vol = ct_phantom(rng, 32).astype(np.float32)
    vol[3, 4, 5] = np.nan  # left out of the range (scikit-image would return NaN)
    finite = vol[np.isfinite(vol)]
    level = 0.5 * (float(finite.min()) + float(finite.max()))
    a = pyramesh.marching_cubes(vol)
    b = pyramesh.marching_cubes(vol, level)
    np.testing.assert_array_equal(a[0], b[0])


def test_layouts_read_in_place_same_surface(rng):
    """Fortran-ordered and strided arrays are read through the library's
    strides: the same vertices and values as the C-ordered copy (the
    triangulation of a cell may differ: the library's x is then another
    array axis)."""
    base = smooth_noise(rng, (30, 34, 38))
    ref = pyramesh.marching_cubes(np.ascontiguousarray(base), 0.0)
    for arr in (np.asfortranarray(base), base.transpose(1, 0, 2).copy().transpose(1, 0, 2),
                np.pad(base, ((0, 0), (0, 3), (0, 0)))[:, :34, :]):
        assert not arr.flags.c_contiguous or arr.base is not None
        out = pyramesh.marching_cubes(arr, 0.0)
        order = np.lexsort(out[0].T)
        ref_order = np.lexsort(ref[0].T)
        np.testing.assert_array_equal(out[0][order], ref[0][ref_order])
        np.testing.assert_array_equal(out[3][order], ref[3][ref_order])
        assert len(out[1]) == len(ref[1])
        area = skimage_measure.mesh_surface_area
        assert area(out[0], out[1]) == pytest.approx(area(ref[0], ref[1]), rel=2e-3)
        assert winding_vs_normals(out[0], out[1], out[2]) < 0.01


def test_zero_copy(rng):
    """A C-contiguous float32 volume (and a Fortran one) is read in place:
    no allocation the size of the volume during the call."""
    vol = smooth_noise(rng, (64, 256, 256))  # 16 MiB
    for arr in (vol, np.asfortranarray(vol)):
        pyramesh.marching_cubes(arr, 0.0)  # warm up (default context, tables)
        tracemalloc.start()
        pyramesh.marching_cubes(arr, 0.0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < arr.nbytes // 8, peak
    # A strided view that no axis of unit stride can serve is copied.
    tracemalloc.start()
    pyramesh.marching_cubes(vol[:, :, ::2], 0.0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak >= vol.nbytes // 2


def test_errors_as_skimage():
    with pytest.raises(ValueError, match="3D numpy array"):
        pyramesh.marching_cubes(np.zeros((20, 20)), 0)
    with pytest.raises(ValueError, match="3D numpy array"):
        pyramesh.marching_cubes([[[0.0]]], 0)
    with pytest.raises(ValueError, match="at least 2x2x2"):
        pyramesh.marching_cubes(np.zeros((2, 2, 1)), 0)
    with pytest.raises(ValueError, match="spacing"):
        pyramesh.marching_cubes(np.ones((3, 3, 3)), 1, spacing=(1, 2))
    with pytest.raises(ValueError, match="within volume data range"):
        pyramesh.marching_cubes(np.arange(27.0).reshape(3, 3, 3), 30.0)
    with pytest.raises(RuntimeError, match="No surface found"):
        pyramesh.marching_cubes(np.arange(27.0).reshape(3, 3, 3), 26.0)  # == max: nothing above
    with pytest.raises(RuntimeError, match="No surface found"):
        pyramesh.marching_cubes(np.zeros((3, 3, 3)))
    with pytest.raises(ValueError, match="step_size"):
        pyramesh.marching_cubes(np.zeros((3, 3, 3)), 0, step_size=0)
    with pytest.raises(ValueError, match="same shape"):
        pyramesh.marching_cubes(np.zeros((3, 3, 3)), 0, mask=np.array([]))
    with pytest.raises(ValueError, match="method"):
        pyramesh.marching_cubes(np.zeros((3, 3, 3)), 0, method="flying")
    with pytest.raises(NotImplementedError):
        pyramesh.marching_cubes(np.zeros((3, 3, 3)), 0, method="_lorensen", mask=np.array([]))
    with pytest.raises(ValueError, match="gradient_direction"):
        pyramesh.marching_cubes(np.arange(27.0).reshape(3, 3, 3), 5.0, gradient_direction="up")


@pytest.mark.parametrize("shape", [(20, 24, 28), (104, 104, 104)])  # inline call / worker thread
def test_level_none_is_the_float32_mid_range(rng, shape):
    """level=None: the range is found in the extraction's job (step_size 1)
    or beforehand (step_size > 1); either way the level is scikit-image's
    0.5 * (float32(min) + float32(max)), NaN left out."""
    vol = smooth_noise(rng, shape).astype(np.float32) * np.float32(3.7) + np.float32(0.3)
    vol.flat[rng.integers(0, vol.size, 5)] = np.nan
    finite = vol[np.isfinite(vol)]
    level = 0.5 * float(finite.min() + finite.max())  # float32 sum, as scikit-image
    for step in (1, 2):
        a = pyramesh.marching_cubes(vol, step_size=step)
        b = pyramesh.marching_cubes(vol, level, step_size=step)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    for dtype in (np.uint8, np.int16, np.float64):
        v = (rng.random((12, 13, 14)) * 100).astype(dtype)
        lv = 0.5 * float(np.float32(v.min()) + np.float32(v.max()))
        for x, y in zip(pyramesh.marching_cubes(v), pyramesh.marching_cubes(v, lv)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("n", [8, 104])
def test_level_none_errors(n):
    with pytest.raises(RuntimeError, match="No surface found"):
        pyramesh.marching_cubes(np.full((n, n, n), np.nan, np.float32))
    with pytest.raises(RuntimeError, match="No surface found"):
        pyramesh.marching_cubes(np.full((n, n, n), 2.5, np.float32))
    v = np.zeros((n, n, n), np.float32)
    v[1, 1, 1], v[2, 2, 2] = np.inf, -np.inf  # inf + -inf: a NaN level
    with pytest.raises(RuntimeError, match="No surface found"):
        with np.errstate(invalid="ignore"):
            pyramesh.marching_cubes(v)
    v[2, 2, 2] = 0.0  # an infinite level
    with pytest.raises(ValueError, match="within volume data range"):
        pyramesh.marching_cubes(v)
