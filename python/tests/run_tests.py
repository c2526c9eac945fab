#!/usr/bin/python3
"""CTest driver of the Python suite: run_tests.py BUILD_PYTHON_DIR cpu|cuda.

Imports pyramesh from BUILD_PYTHON_DIR (the module CMake built) and runs
pytest on this directory: 'cpu' runs everything but the CUDA tests,
'cuda' only those. Exit 77 (CTest: skipped) without NumPy or pytest, or
for 'cuda' without a usable GPU."""
import os
import sys

SKIP = 77


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("cpu", "cuda"):
        print(__doc__)
        return 2
    build, kind = sys.argv[1], sys.argv[2]
    try:
        import numpy  # noqa: F401
        import pytest
    except ImportError as e:
        print("skipped: %s (Debian: python3-numpy, python3-pytest)" % e)
        return SKIP
    sys.path.insert(0, os.path.abspath(build))
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import pyramesh

    print("pyramesh %s from %s; %s" % (pyramesh.__version__, pyramesh.__file__, pyramesh.build_info()))
    if kind == "cuda" and not pyramesh.cuda_available():
        print("skipped: no usable CUDA GPU (or a build without CUDA)")
        return SKIP
    args = [here, "-q", "-p", "no:cacheprovider", "-m", "cuda" if kind == "cuda" else "not cuda",
            "-rs", "--durations=5"]
    rc = pytest.main(args)
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
