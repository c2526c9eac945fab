#!/usr/bin/python3
"""CTest: pip install of the package, offline, the way a user runs it.

usage: pip_install.py REPO_ROOT WORK_DIR

Copies python/ to WORK_DIR/src (so that setuptools' files stay out of the
source tree), runs `pip install --no-build-isolation --no-deps --target`
with the CMake build kept in WORK_DIR/cmake (incremental after the first
run; CPU only), then imports the installed package in a fresh interpreter
and checks it runs. Exit 77 without pip or setuptools."""
import os
import shutil
import subprocess
import sys

SKIP = 77


def main():
    root, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    import importlib.util

    missing = [m for m in ("pip", "setuptools", "numpy") if importlib.util.find_spec(m) is None]
    if missing:
        print("skipped: no %s (Debian: python3-pip, python3-setuptools, python3-numpy)" % ", ".join(missing))
        return SKIP
    src, target = os.path.join(work, "src"), os.path.join(work, "target")
    for d in (src, target):
        shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(root, "python"), src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
    env = dict(os.environ, PYRAMESH_SOURCE_DIR=root, PYRAMESH_BUILD_DIR=os.path.join(work, "cmake"),
               PYRAMESH_CMAKE_ARGS="-DPM_ENABLE_CUDA=OFF", PIP_NO_INDEX="1")
    env.setdefault("PYRAMESH_BUILD_JOBS", str(os.cpu_count() or 2))
    cmd = [sys.executable, "-m", "pip", "install", src, "--no-build-isolation", "--no-deps",
           "--target", target, "-q"]
    print(" ".join(cmd))
    subprocess.check_call(cmd, env=env, cwd=work)
    check = (
        "import sys, numpy as np, pyramesh, os\n"
        "assert pyramesh.__file__.startswith(%r), pyramesh.__file__\n"
        "d = os.path.dirname(pyramesh.__file__)\n"
        "assert os.path.exists(os.path.join(d, '__init__.pyi')) and os.path.exists(os.path.join(d, 'py.typed'))\n"
        "z, y, x = np.mgrid[:20, :20, :20]\n"
        "v, f, n, val = pyramesh.marching_cubes(8.0 - np.sqrt((x-9.5)**2 + (y-9.5)**2 + (z-9.5)**2), 0.0)\n"
        "r = np.linalg.norm(v - 9.5, axis=1)\n"
        "assert abs(r.mean() - 8.0) < 0.05, r.mean()\n"
        "print('installed pyramesh', pyramesh.__version__, 'OK:', len(v), 'vertices')\n" % target
    )
    subprocess.check_call([sys.executable, "-c", check], env=dict(os.environ, PYTHONPATH=target), cwd=work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
