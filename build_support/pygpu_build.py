"""PyGPU's build backend: setuptools' own (setuptools.build_meta), plus the
one decision it cannot make from a static list -- where the CUDA runtime
comes from.

    a CUDA toolkit   found through CUDA_HOME / CUDA_PATH, nvcc on PATH or
                     /usr/local/cuda: its headers, libcudart_static.a and nvcc
                     (which compiles PyGPU's copy kernels to machine code)
    PyPI's runtime   where no toolkit is found: the headers and
                     libcudart_static.a of NVIDIA's runtime wheels, asked of
                     pip as build requirements (so nothing of them is needed
                     at run time); the copy kernels come from the PTX kept in
                     src/kernels/generated/copy_kernels.ptx

PYGPU_CUDA_FROM=toolkit|pypi chooses instead of looking (pypi hides any
toolkit from the build, as CI does to build what users get); PYGPU_CUDA_MAJOR=12|13
chooses the runtime wheels' major, which is otherwise the one the driver
supports where one is visible at build time, else 13.  setup.py imports
this module for the same answers.
"""
import ctypes
import os
import platform
import shutil
import sys

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517 hooks we do not change)

NEWEST_MAJOR = 13
# The runtime wheels of each major: what pip installs for the build, and
# where their files lie (under site-packages).
PYPI_RUNTIME = {
    13: (["nvidia-cuda-runtime>=13.0,<14", "nvidia-cuda-crt>=13.0,<14"], "nvidia/cu13"),
    12: (["nvidia-cuda-runtime-cu12>=12.0,<13"], "nvidia/cuda_runtime"),
}


def wanted_backends():
    return {b.strip() for b in os.environ.get("PYGPU_BUILD", "host,cuda,hip").split(",") if b.strip()}


def cuda_from():
    """'toolkit', 'pypi' or 'auto' (PYGPU_CUDA_FROM); anything else is an error."""
    value = os.environ.get("PYGPU_CUDA_FROM", "auto").strip().lower() or "auto"
    if value not in ("auto", "toolkit", "pypi"):
        sys.exit(f"PYGPU_CUDA_FROM={value!r}: use toolkit, pypi, or leave it unset")
    return value


def toolkit_root():
    """The root of a CUDA toolkit with headers, or None."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")
    for root in roots:
        if root and os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h")):
            return root
    return None


def driver_major():
    """The CUDA major the installed driver supports (12 for 12.x), or None
    where no driver can be asked (none installed, or not Linux)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        version = ctypes.c_int(0)
        if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value <= 0:
            return None
        return version.value // 1000
    except (OSError, AttributeError):
        return None


def runtime_major():
    """(major, why): the major of PyPI's runtime wheels this build takes."""
    chosen = os.environ.get("PYGPU_CUDA_MAJOR", "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) not in PYPI_RUNTIME:
            sys.exit(f"PYGPU_CUDA_MAJOR={chosen!r}: use one of {sorted(PYPI_RUNTIME)}")
        return int(chosen), "PYGPU_CUDA_MAJOR"
    driver = driver_major()
    if driver in PYPI_RUNTIME:
        return driver, f"the installed driver supports CUDA {driver}"
    if driver is not None and driver > NEWEST_MAJOR:
        return NEWEST_MAJOR, f"the newest PyGPU knows (the driver supports CUDA {driver})"
    return NEWEST_MAJOR, "the newest (no driver visible at build time)"


def pypi_runtime_wanted():
    """Whether this build takes the CUDA runtime from PyPI's wheels."""
    if "cuda" not in wanted_backends():
        return False
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return False                # (NVIDIA's runtime wheels are for Linux on these)
    source = cuda_from()
    return source == "pypi" or (source == "auto" and toolkit_root() is None)


def pypi_runtime_dir(major):
    """The folder (holding include/ and lib/) of an installed runtime wheel
    of `major`, or None."""
    sub = PYPI_RUNTIME[major][1]
    for entry in sys.path:
        root = os.path.join(entry or ".", sub)
        if (os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h"))
                and os.path.exists(os.path.join(root, "lib", "libcudart_static.a"))):
            return os.path.abspath(root)
    return None


def _with_runtime(requires):
    if pypi_runtime_wanted():
        requires = list(requires) + PYPI_RUNTIME[runtime_major()[0]][0]
    return requires


def get_requires_for_build_wheel(config_settings=None):
    return _with_runtime(_setuptools.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return _with_runtime(_setuptools.get_requires_for_build_editable(config_settings))


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """setuptools' editable wheel in its "compat" mode unless asked otherwise:
    a .pth file puts the checkout on sys.path, so that `import pygpu` finds
    the package from any directory.  In the default mode setuptools' own
    finder is asked only after Python's path finder, which takes a folder
    named pygpu in the current directory (the clone, run from its parent) as
    an empty namespace package first."""
    settings = dict(config_settings or {})
    settings.setdefault("editable_mode", "compat")
    return _setuptools.build_editable(wheel_directory, settings, metadata_directory)
