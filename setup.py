"""Build PyGPU: one C extension per backend whose toolkit is found.

    pygpu._host  always: device memory is host memory
    pygpu._cuda  the CUDA runtime, found through CUDA_HOME / CUDA_PATH, nvcc on
                 PATH, or /usr/local/cuda (libcudart linked statically, so only
                 the driver is needed at run time)
    pygpu._hip   the HIP runtime, found through ROCM_PATH, hipconfig, /opt/rocm
                 or the system's hip/hip_runtime_api.h (Debian's libamdhip64-dev)

All three compile the same sources with -DPYGPU_BACKEND_<NAME>.  A GPU backend
whose toolkit is missing is skipped with one line saying so, and one that
fails to compile or link is skipped too: the install never fails for that.
PYGPU_BUILD=host,cuda (a comma-separated list) limits what is tried.
"""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = sorted(glob.glob("src/*.c"))
HEADERS = sorted(glob.glob("src/*.h") + glob.glob("src/backend/*.h") + glob.glob("include/pygpu/*.h"))
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]


def say(msg):
    print(f"pygpu: {msg}", file=sys.stderr)


def first_dir(candidates, marker):
    """The first candidate directory that holds `marker`, or None."""
    for d in candidates:
        if d and os.path.exists(os.path.join(d, marker)):
            return d
    return None


def find_cuda():
    """(include_dir, lib_dir) of a CUDA toolkit, or a string saying why not."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    roots.append("/usr/local/cuda")
    root = first_dir(roots, "include/cuda_runtime_api.h")
    if not root:
        return "no cuda_runtime_api.h under CUDA_HOME, CUDA_PATH, nvcc's prefix or /usr/local/cuda"
    libs = [os.path.join(root, d) for d in ("lib64", "lib", "targets/x86_64-linux/lib", "lib/x64")]
    lib = first_dir(libs, "libcudart_static.a")
    if not lib:
        return f"no libcudart_static.a under {root}"
    return os.path.join(root, "include"), lib


def hipconfig_path():
    try:
        out = subprocess.run(["hipconfig", "--path"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def find_hip():
    """(include_dirs, lib_dirs) of a HIP runtime, or a string saying why not."""
    roots = [os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), hipconfig_path(), "/opt/rocm"]
    root = first_dir(roots, "include/hip/hip_runtime_api.h")
    if root:
        lib = first_dir([os.path.join(root, "lib"), os.path.join(root, "lib64")], "libamdhip64.so")
        if lib:
            return [os.path.join(root, "include")], [lib]
    if os.path.exists("/usr/include/hip/hip_runtime_api.h"):
        for lib in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if os.path.exists(os.path.join(lib, "libamdhip64.so")):
                return [], []
        return "hip/hip_runtime_api.h is there but libamdhip64.so is not"
    return "no hip/hip_runtime_api.h under ROCM_PATH, hipconfig's path, /opt/rocm or /usr/include"


def numpy_include():
    import numpy
    return numpy.get_include()


def backend_extension(name, backend_src, macros=(), **kw):
    return Extension(
        f"pygpu._{name}",
        sources=COMMON + [backend_src],
        depends=HEADERS,
        include_dirs=["src", "include", numpy_include()] + kw.pop("include_dirs", []),
        define_macros=[(f"PYGPU_BACKEND_{name.upper()}", "1"), ("PYGPU_MODULE_NAME", f"_{name}")]
        + list(macros),
        extra_compile_args=CFLAGS,
        **kw,
    )


def extensions():
    wanted = {b.strip() for b in os.environ.get("PYGPU_BUILD", "host,cuda,hip").split(",") if b.strip()}
    exts = [backend_extension("host", "src/backend/rt_host.c", libraries=["pthread"])]
    if "cuda" in wanted:
        found = find_cuda()
        if isinstance(found, str):
            say(f"skipping the cuda backend: {found}")
        else:
            inc, lib = found
            exts.append(backend_extension(
                "cuda", "src/backend/rt_gpu.c", include_dirs=[inc], library_dirs=[lib],
                libraries=["cudart_static", "dl", "rt", "pthread"], optional=True))
    if "hip" in wanted:
        found = find_hip()
        if isinstance(found, str):
            say(f"skipping the hip backend: {found}")
        else:
            inc, libs = found
            exts.append(backend_extension(
                "hip", "src/backend/rt_gpu.c", macros=[("__HIP_PLATFORM_AMD__", "1")],
                include_dirs=inc, library_dirs=libs, runtime_library_dirs=libs,
                libraries=["amdhip64"], optional=True))
    return exts


class BuildExt(build_ext):
    """Builds the backends in parallel, each into its own temporary folder
    (they compile the same sources with different macros)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        tmp = os.path.join(self.build_temp, ext.name.replace(".", "_"))
        objects = self.compiler.compile(
            ext.sources, output_dir=tmp, macros=ext.define_macros, include_dirs=ext.include_dirs,
            extra_postargs=ext.extra_compile_args, depends=ext.depends)
        self.compiler.link_shared_object(
            objects, self.get_ext_fullpath(ext.name), libraries=self.get_libraries(ext),
            library_dirs=ext.library_dirs, runtime_library_dirs=ext.runtime_library_dirs,
            extra_postargs=ext.extra_link_args, export_symbols=self.get_export_symbols(ext),
            build_temp=tmp, target_lang="c")


class BuildPy(build_py):
    """Also ships the public C headers (include/pygpu/*.h) inside the
    package, where pygpu.get_include() finds them after an install."""

    def run(self):
        super().run()
        dest = os.path.join(self.build_lib, "pygpu", "include", "pygpu")
        self.mkpath(dest)
        for header in glob.glob("include/pygpu/*.h"):
            self.copy_file(header, dest)


setup(
    ext_modules=extensions(),
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
