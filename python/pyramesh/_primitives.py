"""The data-parallel primitives on NumPy and device arrays."""
import numpy as np

from . import _pyramesh
from ._common import _enum, _is_device_array, _pick_context

# ---------------------------------------------------------------------------
# Primitives
# ---------------------------------------------------------------------------


def _prim_input(x, dtype, rows=False):
    """A host input as a C-contiguous array of `dtype` (copied only when
    needed; bool counts as uint8); device arrays as they are. rows: a 2-d
    array with unit-stride rows is kept (reduce reads it in place)."""
    if _is_device_array(x):
        return x
    a = np.asarray(x)
    if a.dtype != dtype and not (dtype == np.uint8 and a.dtype == np.bool_):
        a = a.astype(dtype)
    if rows and a.ndim == 2 and a.strides[1] == a.itemsize and a.strides[0] > 0:
        return a
    return np.ascontiguousarray(a)


def reduce(x, op="sum", *, context=None, device=None):
    """Reduces float32 values: ``op`` is 'sum', 'mean', 'min', 'max' or
    'geomean'. Accumulates in double; 'min'/'max' ignore NaN. A 2-d array
    with padded rows (unit-stride rows, any row stride) is read in place.

    >>> pyramesh.reduce(np.arange(1, 5, dtype=np.float32))
    10.0
    >>> pyramesh.reduce([1.0, 4.0, np.nan, -2.0], 'min')
    -2.0
    """
    a = _prim_input(x, np.float32, rows=True)
    return _pyramesh.reduce(_pick_context(context, device, a), a, op)


def scan(x, *, output=None, context=None, device=None):
    """Exclusive prefix sums of uint32 counts: ``(out, total)`` with
    ``out[i] = x[0] + ... + x[i-1]``. Raises :class:`SizeOverflowError`
    when a prefix does not fit 32 bits.

    >>> out, total = pyramesh.scan(np.array([3, 0, 2, 5], dtype=np.uint32))
    >>> out.tolist(), total
    ([0, 3, 3, 5], 10)
    """
    a = _prim_input(x, np.uint32)
    return _pyramesh.scan(_pick_context(context, device, a), a, output)


_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "less": "<", "less_equal": "<=",
        "greater": ">", "greater_equal": ">="}


def filter(x, cmp, threshold, *, method="histopyramid", output=None, context=None, device=None):
    """The float32 values with ``x cmp threshold`` (cmp: '<', '<=', '>',
    '>='), in input order (order-preserving stream compaction). NaN never
    passes. ``method='horn'`` computes the same by Horn's scan-and-search.

    >>> pyramesh.filter(np.array([0.5, 2.0, -1.0, 3.5], dtype=np.float32), '>', 1.0).tolist()
    [2.0, 3.5]
    """
    if method not in ("histopyramid", "horn"):
        raise ValueError("method must be 'histopyramid' or 'horn'")
    a = _prim_input(x, np.float32)
    return _pyramesh.filter(
        _pick_context(context, device, a), a, _enum(_CMP, cmp, "cmp"), float(threshold),
        method == "horn", output,
    )


def compact(flags, *, output=None, context=None, device=None):
    """The indices i with ``flags[i] != 0``, increasing (uint64); flags are
    uint8 or bool.

    >>> pyramesh.compact(np.array([0, 1, 1, 0, 1], dtype=bool)).tolist()
    [1, 2, 4]
    """
    a = _prim_input(flags, np.uint8)
    return _pyramesh.compact(_pick_context(context, device, a), a, output)


def expand(counts, *, output=None, context=None, device=None):
    """Order-preserving expansion: input i produces ``counts[i]`` outputs;
    returns ``(source, local)``: output k comes from input ``source[k]``
    (uint64) as its ``local[k]``-th output (uint32).

    >>> src, loc = pyramesh.expand(np.array([2, 0, 3], dtype=np.uint32))
    >>> src.tolist(), loc.tolist()
    ([0, 0, 2, 2, 2], [0, 1, 0, 1, 2])
    """
    a = _prim_input(counts, np.uint32)
    return _pyramesh.expand(_pick_context(context, device, a), a, output)


def histopyramid(counts, *, context=None, device=None):
    """Builds a :class:`HistoPyramid` over uint32 counts (Ziegler et al.
    2006): ``total`` outputs, any range of them traversed later
    (``traverse(first_key, num_keys)``) without rebuilding.

    >>> hp = pyramesh.histopyramid(np.array([1, 0, 2, 1], dtype=np.uint32))
    >>> hp.total
    4
    >>> [a.tolist() for a in hp.traverse(1, 3)]
    [[2, 2, 3], [0, 1, 0]]
    """
    a = _prim_input(counts, np.uint32)
    return _pyramesh.histopyramid(_pick_context(context, device, a), a)
