"""Volumes: scikit-image's marching_cubes and the library's isosurface."""
import math

import numpy as np

from . import _pyramesh
from ._common import (
    _INSIDE,
    _MODES,
    _NORMALS,
    Mesh,
    _as_volume,
    _device_out,
    _enum,
    _on_cuda,
    _pick_context,
)

# ---------------------------------------------------------------------------
# scikit-image's marching_cubes
# ---------------------------------------------------------------------------


def marching_cubes(
    volume,
    level=None,
    *,
    spacing=(1.0, 1.0, 1.0),
    gradient_direction="descent",
    step_size=1,
    allow_degenerate=True,
    method="lewiner",
    mask=None,
    context=None,
    device=None,
):
    """Marching cubes on a 3-d NumPy array, as ``skimage.measure.marching_cubes``.

    Parameters
    ----------
    volume : (M, N, P) ndarray
        Any dtype; uint8, bool, uint16, int16, float32 and float64 are read
        in place (C- or Fortran-ordered, or any layout with one unit-stride
        axis); other types are converted (int8 to int16, wider integers to
        float64, float16 to float32).
    level : float, optional
        Iso value; default the middle of the data range (NaN left out).
    spacing : length-3 sequence of float
        Voxel spacing per array axis.
    gradient_direction : {'descent', 'ascent'}
        'descent' (default): the object is brighter than its surroundings
        and, as in scikit-image, triangles are clockwise seen from outside
        it; 'ascent' reverses the winding.
    step_size : int
        Sample every step_size-th voxel (coarser, faster).
    allow_degenerate : bool
        False removes zero-area triangles (scikit-image's rule, faces int64).
    method : {'lewiner', 'lorensen', '_lorensen'}
        All run pyramesh's case table (see Notes). '_lorensen' returns only
        ``(verts, faces)`` with vertices merged by position, as
        scikit-image's classic implementation.
    mask : (M, N, P) bool array, optional
        Cells are computed only where the mask is True at their far corner
        (scikit-image's rule).
    context, device : optional
        pyramesh extensions: the :class:`Context` to run on, or its device
        ('cpu' default, 'cuda').

    Returns
    -------
    verts : (V, 3) float32 (float64 when ``spacing`` is not all ones, as
        scikit-image) in array axis order.
    faces : (F, 3) int32 (int64 with ``allow_degenerate=False``).
    normals : (V, 3) float32, unit, pointing to decreasing values.
    values : (V,) float32, scikit-image's per-vertex measure (the largest
        range of the data, from the level, in the cells around the vertex).

    Raises
    ------
    ValueError
        For a volume that is not a 3-d array of at least 2x2x2, a level
        outside the data range, bad spacing, step_size, mask shape, method
        or gradient_direction.
    RuntimeError
        When no surface is found at the level.

    Notes
    -----
    Vertex positions, normals' direction, values, winding, dtypes and
    errors follow scikit-image. The triangles differ where a cell is
    ambiguous: pyramesh's table always separates the corners above the
    level on an ambiguous face, which is the topology of scikit-image's
    'lorensen' method; Lewiner's topology tests (the default in
    scikit-image) are not implemented, so 'lewiner' gives the same mesh as
    'lorensen'. Normals are central differences of the data interpolated
    along the edge (scikit-image averages cell-corner differences).

    Examples
    --------
    >>> z, y, x = np.mgrid[:24, :24, :24]
    >>> vol = (z - 11.5) ** 2 + (y - 11.5) ** 2 + (x - 11.5) ** 2
    >>> v, f, n, val = pyramesh.marching_cubes(-vol, -64.0, spacing=(1, 1, 2))
    >>> v.dtype, round(float(v[:, 2].max() - v[:, 2].min()) / 2, 1)
    (dtype('float64'), 15.9)
    """
    if method not in ("lewiner", "lorensen", "_lorensen"):
        raise ValueError("method should be one of 'lewiner', 'lorensen' or '_lorensen'.")
    if method == "_lorensen" and mask is not None:
        raise NotImplementedError(
            'Parameter `mask` is not implemented for method "_lorensen" and will be ignored.'
        )
    if not isinstance(volume, np.ndarray) or volume.ndim != 3:
        raise ValueError("Input volume should be a 3D numpy array.")
    if volume.shape[0] < 2 or volume.shape[1] < 2 or volume.shape[2] < 2:
        raise ValueError("Input array must be at least 2x2x2.")
    if len(spacing) != 3:
        raise ValueError("`spacing` must consist of three floats.")
    step_size = int(step_size)
    if step_size < 1:
        raise ValueError("step_size must be at least one.")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != volume.shape:
            raise ValueError("volume and mask must have the same shape.")
        if mask.dtype != np.bool_:
            mask = mask.astype(bool)
    if gradient_direction not in ("descent", "ascent"):
        raise ValueError(
            "Incorrect input %s in `gradient_direction`, see docstring." % (gradient_direction,)
        )
    ctx = _pick_context(context, device)
    vol = _as_volume(volume)
    data_range = None
    # level=None: the level is scikit-image's 0.5 * (min + max) of the
    # float32 volume. With step_size 1 the C side finds the range in the
    # same job as the extraction (on the context's threads); with a step,
    # here, over the whole volume as scikit-image does.
    auto_level = level is None and step_size == 1
    if level is None and not auto_level:
        data_range = _pyramesh.volume_range(vol, ctx.threads)
        if data_range[0] > data_range[1]:
            raise RuntimeError("No surface found at the given iso value.")
        level = _mid_level(data_range)
    elif auto_level:
        level = 0.0  # replaced in the job
    else:
        level = float(level)
    _check_level(level)
    if step_size > 1:
        vol = np.ascontiguousarray(vol[::step_size, ::step_size, ::step_size])
    r = _pyramesh.isosurface(
        ctx,
        vol,
        level,
        (1.0, 1.0, 1.0),
        (0.0, 0.0, 0.0),
        3,
        0,
        1,
        False,
        True,
        False,
        sk_step=step_size,
        sk_mask=mask,
        sk_ascent=gradient_direction == "ascent",
        sk_auto_level=auto_level,
    )
    verts, faces, normals, values = r[0], r[1], r[2], r[3]
    if auto_level:
        level, data_range = r[9], (r[10], r[11])
        if data_range[0] > data_range[1]:
            raise RuntimeError("No surface found at the given iso value.")
        _check_level(level)
    if len(verts) == 0:
        if data_range is None:
            data_range = _pyramesh.volume_range(_as_volume(volume), ctx.threads)
        lo, hi = np.float32(data_range[0]), np.float32(data_range[1])
        if level < lo or level > hi:
            raise ValueError("Surface level must be within volume data range.")
        raise RuntimeError("No surface found at the given iso value.")
    if not np.array_equal(spacing, (1, 1, 1)):
        verts = verts * np.r_[spacing]
    if method == "_lorensen":
        uv, uf = _pyramesh.merge_unique(np.asarray(verts, dtype=np.float32), faces)
        return uv.astype(np.float64), uf
    if allow_degenerate:
        return verts, faces, normals, values
    return _remove_degenerate_faces(verts.astype(np.float32), faces, normals, values)


def _mid_level(data_range):
    # scikit-image: 0.5 * (min + max), the sum of float32 scalars.
    return 0.5 * float(np.float32(data_range[0]) + np.float32(data_range[1]))


def _check_level(level):
    if math.isnan(level):
        raise RuntimeError("No surface found at the given iso value.")
    if math.isinf(level):
        raise ValueError("Surface level must be within volume data range.")


def _remove_degenerate_faces(vertices, faces, *arrays):
    """scikit-image's remove_degenerate_faces (the merge loop in C)."""
    vertices_map1, faces_ok = _pyramesh.remove_degenerate(vertices, faces)
    vertices_ok = vertices_map1 == np.arange(len(vertices), dtype=np.int32)
    vertices_map2 = np.cumsum(vertices_ok) - 1
    faces2 = vertices_map2[vertices_map1[faces[faces_ok]]]
    return (vertices[vertices_ok], faces2) + tuple(a[vertices_ok] for a in arrays)


# ---------------------------------------------------------------------------
# The library's extraction
# ---------------------------------------------------------------------------


def isosurface(
    volume,
    level,
    *,
    spacing=(1.0, 1.0, 1.0),
    origin=(0.0, 0.0, 0.0),
    axis_order="xyz",
    normals="central",
    mode="indexed",
    inside="above",
    ambiguous="separate",
    output=None,
    context=None,
    device=None,
    timed=False,
):
    """The iso surface of a volume at ``level`` (marching cubes, with every
    option of ``pm_isosurface``).

    Parameters
    ----------
    volume : 3-d array
        NumPy (read in place when its dtype is uint8, bool, uint16, int16,
        float32 or float64 and one axis has unit stride), or a CUDA array
        (``__cuda_array_interface__`` or DLPack) on a CUDA context.
    level : float
        The iso value. A sample equal to it counts as outside.
    spacing, origin : 3 floats
        In the order of ``axis_order``.
    axis_order : {'xyz', 'zyx'}
        'xyz' (default): vertex columns are (x, y, z) with x along the
        array's last axis, the library's own order; 'zyx': columns in the
        array's axis order, as scikit-image.
    normals : {'central', 'forward', 'sobel', 'none'}
        Gradient estimate for the vertex normals (unit, out of the inside).
    mode : {'indexed', 'soup'}
        Shared vertices with faces, or 3 vertices per triangle (faces None).
    inside : {'above', 'below'}
        Which side of the level is the object: 'above' for bright objects
        and densities, 'below' for signed distance fields.
    ambiguous : {'separate', 'join'}
        How an ambiguous face (diagonal corners inside) is cut: the
        library's table separates the inside corners; 'join' connects
        them (computed by extracting the complementary side; the same
        vertices, the mesh turned around).
    output : {None, 'host', 'device'}
        Where the arrays go: None = where the volume is. 'device' returns
        :class:`ContextArray` (device memory on a CUDA context).
    context, device : optional
        The :class:`Context`, or a device for the thread's default one
        (default: 'cuda' for CUDA arrays, else 'cpu').
    timed : bool
        Fill ``stage_ms`` with the time of each stage.

    Returns
    -------
    Mesh
        ``vertices, faces, normals = mesh``; triangles counter-clockwise
        seen from outside the inside region; output order by cell, the same
        on every backend and thread count.

    Examples
    --------
    >>> z, y, x = np.mgrid[:16, :16, :16].astype(np.float32)
    >>> vol = 6.0 - np.sqrt((x - 7.5) ** 2 + (y - 7.5) ** 2 + (z - 7.5) ** 2)
    >>> mesh = pyramesh.isosurface(vol, 0.0, spacing=(0.5, 0.5, 0.5))
    >>> v, f, n = mesh
    >>> v.dtype, f.dtype, round(float(np.linalg.norm(v - 3.75, axis=1).mean()), 2)
    (dtype('float32'), dtype('uint32'), 3.0)
    >>> soup = pyramesh.isosurface(vol, 0.0, mode='soup', normals='none')
    >>> soup.faces is None, len(soup.vertices) == 3 * len(f)
    (True, True)
    """
    if axis_order not in ("xyz", "zyx"):
        raise ValueError("axis_order must be 'xyz' or 'zyx'")
    if ambiguous not in ("separate", "join"):
        raise ValueError("ambiguous must be 'separate' or 'join'")
    nmode = _enum(_NORMALS, normals, "normals")
    mmode = _enum(_MODES, mode, "mode")
    imode = _enum(_INSIDE, inside, "inside")
    if len(spacing) != 3 or len(origin) != 3:
        raise ValueError("spacing and origin must have 3 values")
    ctx = _pick_context(context, device, volume)
    vol = _as_volume(volume)
    on_cuda = _on_cuda(vol)
    sp, org = tuple(map(float, spacing)), tuple(map(float, origin))
    if axis_order == "xyz":  # the C side takes them per array axis
        sp, org = sp[::-1], org[::-1]
    r = _pyramesh.isosurface(
        ctx,
        vol,
        float(level),
        sp,
        org,
        nmode,
        mmode,
        imode,
        _device_out(output, on_cuda),
        axis_order == "zyx",
        bool(timed),
        join=ambiguous == "join",
    )
    stages = dict(zip(r[6], r[7]))
    return Mesh(r[0], r[1], r[2], r[4], r[5], stages)
