"""Particles: density_field against a plain NumPy evaluation of
splashsurf's SPH colour field (docs/reconstruct.md), the lattice rule,
reconstruct with pysplashsurf's parameter names, aabb, fixed lattices,
errors."""
import numpy as np
import pytest

import pyramesh


def cubic_spline(d, h):
    sigma = 8.0 / (np.pi * h ** 3)
    q = d / h
    w = np.where(q <= 0.5, sigma * (6 * q ** 3 - 6 * q ** 2 + 1), 2 * sigma * np.clip(1 - q, 0, None) ** 3)
    return np.where(d < h, w, 0.0)


def reference_field(xyz, r, l=2.0, c=0.5, rho0=1000.0):
    """The colour field by brute force in double: lattice, origin, values."""
    x = xyz.astype(np.float64)
    s, h = c * r, 2.0 * l * r
    m = rho0 * (2.0 * r) ** 3
    d = np.linalg.norm(x[:, None, :] - x[None, :, :], axis=2)
    rho = m * cubic_spline(d, h).sum(axis=1)
    vol = m / rho
    bmin, bmax = x.min(axis=0), x.max(axis=0)
    g0 = np.floor((bmin - h) / s) - 1
    g1 = np.ceil((bmax + h) / s) + 1
    dims = (g1 - g0 + 1).astype(int)
    axes = [(g0[a] + np.arange(dims[a])) * s for a in range(3)]
    gz, gy, gx = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    pts = np.stack([gx, gy, gz], axis=-1).reshape(-1, 3)
    phi = np.zeros(len(pts))
    for p in range(len(x)):
        phi += vol[p] * cubic_spline(np.linalg.norm(pts - x[p], axis=1), h)
    return phi.reshape(dims[2], dims[1], dims[0]), g0 * s, s


def fluid_ball(radius=0.4, r=0.02, jitter=0.0, rng=None):
    g = np.arange(-0.6, 0.6, 2 * r)
    pts = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    pts = pts[np.linalg.norm(pts, axis=1) < radius]
    if jitter:
        pts = pts + rng.uniform(-jitter, jitter, pts.shape)
    return pts.astype(np.float32)


def test_field_matches_reference(rng):
    r = 0.05
    xyz = rng.normal(0.0, 0.08, (150, 3)).astype(np.float32)
    f = pyramesh.density_field(xyz, r)
    ref, origin, s = reference_field(xyz, r)
    assert f.values.shape == ref.shape
    np.testing.assert_allclose(f.origin, origin, rtol=0, atol=1e-12)
    assert f.spacing == (s, s, s) and f.iso == pytest.approx(0.6)
    np.testing.assert_allclose(f.values, ref, rtol=2e-6, atol=1e-7)
    assert f.particles_used == 150 and f.particles_dropped == 0


def test_reconstruct_ball(rng):
    pts = fluid_ball(jitter=0.002, rng=rng)
    v, t, n = pyramesh.reconstruct(pts, 0.02)
    assert v.dtype == np.float32 and t.dtype == np.uint32 and n.dtype == np.float32
    rad = np.linalg.norm(v, axis=1)
    assert 0.37 < rad.min() and rad.max() < 0.45
    assert (np.sum(n * v, axis=1) > 0).mean() > 0.999
    # closed and consistently oriented
    e = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]]).astype(np.int64)
    key, rev = e[:, 0] * (1 << 32) + e[:, 1], e[:, 1] * (1 << 32) + e[:, 0]
    assert len(np.unique(key)) == len(key) and np.array_equal(np.sort(key), np.sort(rev))


def test_pysplashsurf_style_call(rng):
    pts = fluid_ball(r=0.025, jitter=0.002, rng=rng).astype(np.float64)
    rec = pyramesh.reconstruct(
        pts,
        particle_radius=0.025,
        rest_density=1000.0,
        smoothing_length=2.0,
        cube_size=0.5,
        iso_surface_threshold=0.6,
        multi_threading=False,
        global_neighborhood_list=False,
        subdomain_grid=True,
        subdomain_num_cubes_per_dim=64,
        aabb_min=None,
        aabb_max=None,
    )
    ref = pyramesh.reconstruct(pts.astype(np.float32), 0.025)
    np.testing.assert_array_equal(rec.vertices, ref.vertices)
    np.testing.assert_array_equal(rec.triangles, ref.triangles)
    vertices, triangles, normals = rec
    assert vertices is rec.vertices and triangles is rec.faces


def test_keep_field_and_field_surface(rng):
    pts = fluid_ball(r=0.03, radius=0.3, jitter=0.003, rng=rng)
    rec = pyramesh.reconstruct(pts, 0.03, keep_field=True, cube_size=0.75)
    f = rec.field
    assert isinstance(f, pyramesh.DensityField) and f.values.ndim == 3
    m = f.isosurface()
    np.testing.assert_array_equal(m.vertices, rec.vertices)
    np.testing.assert_array_equal(m.faces, rec.faces)
    assert rec.particles_used == len(pts)


def test_aabb_filters_particles(rng):
    pts = fluid_ball(r=0.03, radius=0.3, jitter=0.003, rng=rng)
    lo, hi = (-1.0, -1.0, 0.0), (1.0, 1.0, 1.0)
    f = pyramesh.density_field(pts, 0.03, aabb_min=lo, aabb_max=hi)
    keep = (pts >= lo).all(axis=1) & (pts <= hi).all(axis=1)
    g = pyramesh.density_field(pts[keep], 0.03)
    assert f.particles_used == keep.sum() and f.particles_dropped == (~keep).sum()
    np.testing.assert_array_equal(f.values, g.values)
    with pytest.raises(ValueError):
        pyramesh.density_field(pts, 0.03, aabb_min=lo)


def test_fixed_lattice(rng):
    pts = fluid_ball(r=0.03, radius=0.25, jitter=0.003, rng=rng)
    f = pyramesh.density_field(pts, 0.03)
    grid = pyramesh.field_grid_for_box(pts.min(axis=0), pts.max(axis=0), 0.03)
    g = pyramesh.density_field(pts, 0.03, grid=grid)
    assert g.values.shape == tuple(grid[1][::-1])
    np.testing.assert_array_equal(g.values, f.values)
    np.testing.assert_allclose(g.origin, f.origin)
    # A larger lattice: zeros around the same field.
    lo, dims = grid
    big = pyramesh.density_field(pts, 0.03, grid=(tuple(x - 2 for x in lo), tuple(d + 4 for d in dims)))
    np.testing.assert_array_equal(big.values[2:-2, 2:-2, 2:-2], f.values)
    assert not big.values[:2].any()


def test_blur_method(rng):
    pts = fluid_ball(r=0.03, radius=0.3, jitter=0.003, rng=rng)
    v, t, n = pyramesh.reconstruct(pts, 0.03, method="blur")
    rad = np.linalg.norm(v, axis=1)
    assert 0.25 < np.median(rad) < 0.36


def test_errors():
    with pytest.raises(ValueError):
        pyramesh.reconstruct(np.zeros((5, 3), np.float32), 0.0)
    with pytest.raises(ValueError):
        pyramesh.reconstruct(np.zeros((5, 2), np.float32), 0.1)
    bad = np.zeros((5, 3), np.float32)
    bad[3, 1] = np.nan
    with pytest.raises(pyramesh.InvalidArgumentError, match="3"):
        pyramesh.reconstruct(bad, 0.1)
    with pytest.raises(pyramesh.InvalidArgumentError, match="no particles"):
        pyramesh.density_field(np.zeros((0, 3), np.float32), 0.1)
    with pytest.raises(pyramesh.OutOfMemoryError, match="memory limit"):
        pyramesh.density_field(np.array([[0, 0, 0], [1e3, 1e3, 1e3]], np.float32), 0.001,
                               max_memory=1 << 20)
