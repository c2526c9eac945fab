"""Particles: density fields and surfaces with pysplashsurf's parameters."""
import numpy as np

from . import _pyramesh
from ._common import (
    _FIELD_METHODS,
    _MODES,
    _NORMALS,
    Mesh,
    _device_out,
    _enum,
    _is_device_array,
    _on_cuda,
    _pick_context,
    default_context,
)
from ._volumes import isosurface

class Reconstruction(Mesh):
    """A reconstructed particle surface (:func:`reconstruct`):
    ``vertices``, ``triangles`` (= ``faces``) and ``normals``, unpacking as
    ``vertices, triangles, normals``; ``field`` is the
    :class:`DensityField` when ``keep_field=True``, else ``None``."""

    __slots__ = ("field", "particles_used", "particles_dropped", "timings")

    @property
    def triangles(self):
        return self.faces


class DensityField:
    """A density (colour) field on a lattice (:func:`density_field`).

    ``values`` has shape (nz, ny, nx) (x fastest); lattice point (i, j, k)
    lies at ``origin + spacing * (i, j, k)`` with ``origin`` and
    ``spacing`` given as (x, y, z). The fluid is where ``values > iso``.
    """

    __slots__ = (
        "values",
        "origin",
        "spacing",
        "iso",
        "particles_used",
        "particles_dropped",
        "timings",
        "context",
    )

    def isosurface(self, *, normals="central", mode="indexed", output=None):
        """The surface of the field at ``iso`` (:func:`isosurface` with
        the field's lattice), in the particles' coordinates."""
        return isosurface(
            self.values,
            self.iso,
            spacing=self.spacing,
            origin=self.origin,
            normals=normals,
            mode=mode,
            output=output,
            context=self.context,
        )

    def __repr__(self):
        return "<pyramesh.DensityField %s, iso %g>" % ("x".join(map(str, self.values.shape)), self.iso)


# ---------------------------------------------------------------------------
# Particles (pysplashsurf's names and defaults)
# ---------------------------------------------------------------------------


def _particles(particles):
    if _is_device_array(particles):
        return particles
    p = np.ascontiguousarray(particles, dtype=np.float32)
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError("particles must have shape (n, 3)")
    return p


def _aabb(aabb_min, aabb_max):
    if (aabb_min is None) != (aabb_max is None):
        raise ValueError("aabb_min and aabb_max go together")
    if aabb_min is None:
        return None, None
    return tuple(map(float, aabb_min)), tuple(map(float, aabb_max))


def _field_call(
    particles,
    particle_radius,
    rest_density,
    smoothing_length,
    cube_size,
    iso_surface_threshold,
    method,
    blur_steps,
    aabb_min,
    aabb_max,
    max_memory,
    grid,
    output,
    extract,
    keep_field,
    normals,
    mode,
    context,
    device,
):
    if not particle_radius or particle_radius <= 0:
        raise ValueError("particle_radius must be > 0")
    p = _particles(particles)
    ctx = _pick_context(context, device, p)
    amin, amax = _aabb(aabb_min, aabb_max)
    glo = gdims = None
    if grid is not None:
        glo, gdims = grid
        glo, gdims = tuple(int(v) for v in glo), tuple(int(v) for v in gdims)
    r = _pyramesh.field_compute(
        ctx,
        p,
        float(particle_radius),
        float(smoothing_length),
        float(cube_size),
        float(iso_surface_threshold),
        float(rest_density),
        _enum(_FIELD_METHODS, method, "method"),
        int(blur_steps),
        amin,
        amax,
        int(max_memory or 0),
        glo,
        gdims,
        _device_out(output, _on_cuda(p)),
        extract,
        keep_field,
        _NORMALS[normals],
        _enum(_MODES, mode, "mode"),
    )
    field = None
    if r[0] is not None:
        field = DensityField()
        field.values, field.origin, field.spacing, field.iso = r[0], r[1], r[2], r[3]
        field.particles_used, field.particles_dropped, field.timings = r[4], r[5], r[6]
        field.context = ctx
    return r, field


def density_field(
    particles,
    particle_radius,
    *,
    rest_density=1000.0,
    smoothing_length=2.0,
    cube_size=0.5,
    iso_surface_threshold=0.6,
    method="sph",
    blur_steps=2,
    aabb_min=None,
    aabb_max=None,
    grid=None,
    max_memory=0,
    output=None,
    context=None,
    device=None,
):
    """The density field of particles on a lattice, without extracting it.

    The parameters are :func:`reconstruct`'s. ``grid=(lo, dims)`` fixes the
    lattice (point (i, j, k) at ``(lo + (i, j, k)) * cube_size *
    particle_radius``, (x, y, z) order; see :func:`field_grid_for_box`),
    so that every frame of a simulation shares it; by default the lattice
    covers the particles' bounding box plus the kernel's reach.

    Returns
    -------
    DensityField

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> pts = rng.uniform(0.0, 1.0, (2000, 3)).astype(np.float32)
    >>> f = pyramesh.density_field(pts, 0.025)
    >>> f.values.dtype, f.values.ndim, f.spacing == (0.0125, 0.0125, 0.0125)
    (dtype('float32'), 3, True)
    """
    _, field = _field_call(
        particles,
        particle_radius,
        rest_density,
        smoothing_length,
        cube_size,
        iso_surface_threshold,
        method,
        blur_steps,
        aabb_min,
        aabb_max,
        max_memory,
        grid,
        output,
        False,
        True,
        "none",
        "indexed",
        context,
        device,
    )
    return field


def field_grid_for_box(
    bmin,
    bmax,
    particle_radius,
    *,
    smoothing_length=2.0,
    cube_size=0.5,
    method="sph",
    blur_steps=2,
):
    """The lattice :func:`density_field` picks for particles whose bounding
    box is exactly [bmin, bmax]: ``(lo, dims)``, both (x, y, z). Pass it
    as ``grid=`` to give every frame of a simulation in a fixed domain the
    same lattice.

    >>> lo, dims = pyramesh.field_grid_for_box((0, 0, 0), (1, 1, 1), 0.025)
    >>> lo, dims
    ((-9, -9, -9), (99, 99, 99))
    """
    return _pyramesh.field_grid_for_box(
        tuple(map(float, bmin)),
        tuple(map(float, bmax)),
        float(particle_radius),
        float(smoothing_length),
        float(cube_size),
        _enum(_FIELD_METHODS, method, "method"),
        int(blur_steps),
    )


def reconstruct(
    particles,
    particle_radius,
    rest_density=1000.0,
    smoothing_length=2.0,
    cube_size=0.5,
    iso_surface_threshold=0.6,
    *,
    aabb_min=None,
    aabb_max=None,
    normals="central",
    mode="indexed",
    method="sph",
    blur_steps=2,
    grid=None,
    max_memory=0,
    keep_field=False,
    output=None,
    context=None,
    device=None,
    multi_threading=True,
    global_neighborhood_list=False,
    subdomain_grid=True,
    subdomain_grid_auto_disable=True,
    subdomain_num_cubes_per_dim=64,
):
    """Reconstructs the surface of a particle fluid (SPH colour field as
    splashsurf, then marching cubes).

    Parameters follow pysplashsurf's ``reconstruct_surface`` and
    ``reconstruction_pipeline``: ``smoothing_length`` (the kernel's
    support is ``2 * smoothing_length * particle_radius``) and
    ``cube_size`` (the lattice spacing) are multiples of
    ``particle_radius``, as splashsurf's CLI and
    ``reconstruction_pipeline`` take them; ``iso_surface_threshold`` is on
    the colour field (fraction of the rest density). ``aabb_min`` /
    ``aabb_max`` keep only the particles inside the box.
    ``multi_threading=False`` runs on one thread; the other pysplashsurf
    switches (neighbourhood lists, subdomain grid) are accepted and have no
    effect. ``method='blur'`` splats and blurs instead of SPH.

    Parameters
    ----------
    particles : (n, 3) array
        float32 C-contiguous arrays are read in place (others converted);
        CUDA arrays on a CUDA context.

    Returns
    -------
    Reconstruction
        ``vertices, triangles, normals = result`` (float32, uint32,
        float32; triangles counter-clockwise seen from outside the fluid,
        normals pointing out of it).

    Examples
    --------
    >>> g = np.arange(-0.5, 0.5, 0.04, dtype=np.float32)    # particles 2r apart
    >>> pts = np.stack(np.meshgrid(g, g, g), -1).reshape(-1, 3)
    >>> pts = pts[np.linalg.norm(pts, axis=1) < 0.4]         # a ball of fluid
    >>> vertices, triangles, normals = pyramesh.reconstruct(pts, 0.02)
    >>> r = np.linalg.norm(vertices, axis=1)
    >>> bool(0.37 < r.min() and r.max() < 0.45), triangles.dtype
    (True, dtype('uint32'))
    >>> bool((np.sum(normals * vertices, axis=1) > 0).all())  # normals point out
    True
    """
    del global_neighborhood_list, subdomain_grid, subdomain_grid_auto_disable
    del subdomain_num_cubes_per_dim
    if context is None and not multi_threading:
        dev = device or ("cuda" if _on_cuda(particles) else "cpu")
        context = default_context(dev, threads=1 if dev == "cpu" else 0)
    r, field = _field_call(
        particles,
        particle_radius,
        rest_density,
        smoothing_length,
        cube_size,
        iso_surface_threshold,
        method,
        blur_steps,
        aabb_min,
        aabb_max,
        max_memory,
        grid,
        output,
        True,
        keep_field,
        normals,
        mode,
        context,
        device,
    )
    v, f, n, active = r[7]
    rec = Reconstruction(v, f, n, active, "", {})
    rec.field = field
    rec.particles_used, rec.particles_dropped, rec.timings = r[4], r[5], r[6]
    return rec
