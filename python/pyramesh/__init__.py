"""pyramesh: triangle meshes from volumes and point clouds, on multi-core
CPUs and NVIDIA GPUs.

* :func:`marching_cubes` is a drop-in for ``skimage.measure.marching_cubes``
  (same arguments, conventions and errors; docs/python.md lists every
  difference).
* :func:`isosurface` exposes every option of the library's extraction
  (indexed or soup meshes, normal modes, the inside side, device output).
* :func:`reconstruct` turns particles into a surface with pysplashsurf's
  parameter names; :func:`density_field` returns the grid only.
* :func:`reduce`, :func:`scan`, :func:`filter`, :func:`compact`,
  :func:`expand` and :func:`histopyramid` are the data-parallel primitives.

NumPy inputs are read in place. On a CUDA context (``device='cuda'``),
arrays exposing ``__cuda_array_interface__`` or DLPack (CuPy, PyTorch,
Numba, JAX...) are read on the device and results can stay there
(:class:`ContextArray`). The GIL is released while the library works and
Ctrl-C interrupts a long call.

>>> import numpy as np, pyramesh
>>> z, y, x = np.mgrid[:32, :32, :32]
>>> ball = 10.0 - np.sqrt((z - 16) ** 2 + (y - 16) ** 2 + (x - 16) ** 2)
>>> verts, faces, normals, values = pyramesh.marching_cubes(ball, 0.0)
>>> verts.shape[1], faces.dtype, bool(abs(np.linalg.norm(verts - 16, axis=1) - 10).max() < 0.1)
(3, dtype('int32'), True)
"""

from . import _pyramesh
from ._common import Mesh, default_context
from ._particles import DensityField, Reconstruction, density_field, field_grid_for_box, reconstruct
from ._primitives import compact, expand, filter, histopyramid, reduce, scan
from ._pyramesh import (
    Context,
    ContextArray,
    DeviceError,
    FileError,
    HistoPyramid,
    InvalidArgumentError,
    OutOfMemoryError,
    ParseError,
    PyrameshError,
    SizeOverflowError,
    UnsupportedError,
    build_info,
    cuda_available,
)
from ._volumes import isosurface, marching_cubes

__version__ = _pyramesh.version

__all__ = [
    "Context",
    "ContextArray",
    "DensityField",
    "DeviceError",
    "FileError",
    "HistoPyramid",
    "InvalidArgumentError",
    "Mesh",
    "OutOfMemoryError",
    "ParseError",
    "PyrameshError",
    "Reconstruction",
    "SizeOverflowError",
    "UnsupportedError",
    "build_info",
    "compact",
    "cuda_available",
    "default_context",
    "density_field",
    "expand",
    "field_grid_for_box",
    "filter",
    "histopyramid",
    "isosurface",
    "marching_cubes",
    "reconstruct",
    "reduce",
    "scan",
]

# The public objects say they are pyramesh's (help(), doctest, pickling).
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("pyramesh._") and not _name.endswith("Error"):
        try:
            _obj.__module__ = "pyramesh"
        except (AttributeError, TypeError):  # extension types keep theirs
            pass
del _name, _obj
