"""Shared by the pyramesh modules: contexts, input handling, Mesh."""
import threading

import numpy as np

from ._pyramesh import Context

_NORMALS = {"central": 3, "forward": 2, "sobel": 4, "none": 1, None: 1}
_MODES = {"indexed": 0, "soup": 1}
_INSIDE = {"above": 1, "below": 2}
_FIELD_METHODS = {"sph": 0, "blur": 1}

# ---------------------------------------------------------------------------
# Contexts
# ---------------------------------------------------------------------------

_local = threading.local()


def default_context(device="cpu", threads=0, cuda_device=0):
    """The calling thread's shared context for a device, created on first use.

    Functions called without ``context=`` use it: ``'cpu'`` for host
    arrays, ``'cuda'`` for CUDA arrays. ``threads=0`` uses every core.

    >>> ctx = pyramesh.default_context('cpu')
    >>> ctx.device, ctx is pyramesh.default_context('cpu')
    ('cpu', True)
    """
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    key = (device, int(threads), int(cuda_device))
    ctx = cache.get(key)
    if ctx is None or ctx.closed:
        ctx = cache[key] = Context(device, threads=threads, cuda_device=cuda_device)
    return ctx


def _on_cuda(a):
    if hasattr(a, "__cuda_array_interface__"):
        return True
    if not isinstance(a, np.ndarray) and hasattr(a, "__dlpack_device__"):
        try:
            return a.__dlpack_device__()[0] in (2, 13)
        except Exception:  # a producer that cannot say: treat it as host memory
            return False
    return False


def _pick_context(context, device, *arrays):
    if context is not None:
        if device is not None and device != "auto" and context.device != device:
            raise ValueError("context is on %r, device=%r" % (context.device, device))
        return context
    if device is None:
        device = "cuda" if any(_on_cuda(a) for a in arrays if a is not None) else "cpu"
    return default_context(device)


def _is_device_array(a):
    return not isinstance(a, np.ndarray) and (
        hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__")
    )


_VOLUME_TYPES = (np.uint8, np.uint16, np.int16, np.float32, np.float64, np.bool_)


def _as_volume(a):
    """The volume as one of the library's sample types: read in place when
    it is one, else converted exactly where possible (int8 to int16, wider
    integers to float64, float16 to float32); other types become float32
    as in scikit-image."""
    if _is_device_array(a):
        return a
    a = np.asarray(a)
    dt = a.dtype
    if not dt.isnative:
        a = a.astype(dt.newbyteorder("="))
        dt = a.dtype
    if dt.type in _VOLUME_TYPES:
        return a
    if dt == np.int8:
        return a.astype(np.int16)
    if dt.kind in "iu":
        return a.astype(np.float64)
    if dt == np.float16:
        return a.astype(np.float32)
    if dt.kind == "f":
        return a.astype(np.float64)
    return np.asarray(a, dtype=np.float32)


def _device_out(output, volume_on_cuda):
    if output is None:
        return volume_on_cuda
    if output not in ("host", "device"):
        raise ValueError("output must be None, 'host' or 'device'")
    return output == "device"


def _enum(table, value, what):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError("%s must be one of %s, not %r" % (what, sorted(k for k in table if k), value))


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


class Mesh:
    """A triangle mesh: ``vertices`` (V, 3) float32, ``faces`` (F, 3) uint32
    (``None`` for a soup, where triangle t is vertices 3t, 3t+1, 3t+2) and
    ``normals`` (V, 3) float32 or ``None``. NumPy arrays, or
    :class:`ContextArray` for device output. Unpacks as
    ``vertices, faces, normals``. ``active_cells`` counts the cells the
    surface crosses; ``path`` and ``stage_ms`` say what the library did."""

    __slots__ = ("vertices", "faces", "normals", "active_cells", "path", "stage_ms")

    def __init__(self, vertices, faces, normals, active_cells=0, path="", stage_ms=None):
        self.vertices = vertices
        self.faces = faces
        self.normals = normals
        self.active_cells = active_cells
        self.path = path
        self.stage_ms = stage_ms or {}

    def __iter__(self):
        return iter((self.vertices, self.faces, self.normals))

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return (self.vertices, self.faces, self.normals)[i]

    def __repr__(self):
        nf = len(self.faces) if self.faces is not None else len(self.vertices) // 3
        return "<pyramesh.Mesh %d vertices, %d triangles>" % (len(self.vertices), nf)
