"""Builds pyramesh._pyramesh with the project's CMake (the library and the
extension, one build) and installs it with the package's Python files.

    pip install ./python --no-build-isolation

Environment: PYRAMESH_CMAKE_ARGS (extra CMake arguments, e.g.
"-DPM_ENABLE_CUDA=OFF" or "-DCMAKE_CUDA_ARCHITECTURES=90"),
PYRAMESH_BUILD_DIR (reuse a CMake build directory), PYRAMESH_BUILD_JOBS
(parallel jobs), PYRAMESH_SOURCE_DIR (the repository, default the
directory above this one). The extension is built for the Python running
pip (its path is passed as Python3_EXECUTABLE)."""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("PYRAMESH_SOURCE_DIR") or os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not os.path.exists(os.path.join(ROOT, "include", "pyramesh.h")):
            raise RuntimeError("pyramesh sources not found at %s (set PYRAMESH_SOURCE_DIR)" % ROOT)
        build_dir = os.environ.get("PYRAMESH_BUILD_DIR") or os.path.join(
            os.path.abspath(self.build_temp), "cmake")
        args = ["-DCMAKE_BUILD_TYPE=Release", "-DPM_BUILD_TESTS=OFF", "-DPM_BUILD_BENCH=OFF",
                "-DPM_BUILD_PYTHON=ON", "-DPython3_EXECUTABLE=" + sys.executable]
        args += shlex.split(os.environ.get("PYRAMESH_CMAKE_ARGS", ""))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir] + args)
        jobs = os.environ.get("PYRAMESH_BUILD_JOBS") or str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "pyramesh_python",
                               "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "pyramesh", "_pyramesh*"))
        built = [b for b in built if b.endswith((".so", ".pyd"))]
        if len(built) != 1:
            raise RuntimeError("the CMake build did not make one _pyramesh module: %s" % built)
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(ext_modules=[Extension("pyramesh._pyramesh", sources=[])], cmdclass={"build_ext": CMakeBuild})
