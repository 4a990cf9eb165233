"""Build PyGPU: one C extension per backend whose toolkit is found.

    pygpu._host  always: device memory is host memory
    pygpu._cuda  the CUDA runtime (libcudart linked statically, so only the
                 driver is needed at run time), from a CUDA toolkit found
                 through CUDA_HOME / CUDA_PATH, nvcc on PATH or /usr/local/cuda,
                 or, where there is none, from NVIDIA's runtime wheels on PyPI,
                 which pip installs for the build (build_support/pygpu_build.py:
                 PYGPU_CUDA_FROM=toolkit|pypi, PYGPU_CUDA_MAJOR=12|13)
    pygpu._hip   the HIP runtime, found through ROCM_PATH, hipconfig, /opt/rocm
                 or the system's hip/hip_runtime_api.h (Debian's libamdhip64-dev)

All three compile the same sources with -DPYGPU_BACKEND_<NAME>.  A GPU backend
whose toolkit is missing is skipped with one line saying so, and one that
fails to compile or link is skipped too: the install never fails for that.
PYGPU_BUILD=host,cuda (a comma-separated list) limits what is tried.

PyGPU's own copy kernels (src/kernels/) go into the GPU backends: for CUDA,
the toolkit's nvcc compiles them into a fatbin (machine code for sm_80 and
sm_90, PTX for the lowest architecture it knows, which the driver compiles
for any other); without nvcc (PyPI's runtime) the PTX kept in the tree
(src/kernels/generated/copy_kernels.ptx, tools/gen-ptx.py) goes in, which the driver
compiles at first use.  Either is linked into pygpu._cuda and loaded at the
first copy that needs it.  For HIP, their source is linked in and hiprtc
compiles it on each device at its first use.  A CUDA build with neither
(a CUDA 12 runtime without nvcc: the tree's PTX needs a CUDA 13 driver) has
no kernels, and its device-to-device layout copies go through the host.
"""
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import setuptools
from setuptools import Extension, setup

# pyproject.toml's license = "MIT" (an SPDX expression) needs setuptools 77;
# older ones refuse the file with a long schema error.  pip's isolated build
# fetches a new one; a build without isolation uses the one installed.
if tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit()) < (77, 0):
    sys.exit(f"PyGPU's build needs setuptools>=77.0.3 (this is {setuptools.__version__}): "
             "python3 -m pip install -U 'setuptools>=77.0.3', or build with pip, whose isolated build fetches it")
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "build_support"))
import pygpu_build  # noqa: E402  (where the CUDA runtime comes from: shared with the build backend)
import pygpu_sources  # noqa: E402  (which files compile the same for every backend)

COMMON = sorted(glob.glob("src/*.c") + glob.glob("src/copy/*.c") + glob.glob("src/transfer/*.c"))
HEADERS = sorted(glob.glob("src/*.h") + glob.glob("src/copy/*.h") + glob.glob("src/transfer/*.h") + glob.glob("src/backend/*.h") + glob.glob("src/kernels/*.h")
                 + glob.glob("include/pygpu/*.h"))
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-fvisibility=hidden"]
KERNEL_SOURCE = "src/kernels/copy_kernels.cu"
KERNEL_HEADER = "src/kernels/kernels.h"
KERNEL_SASS = ("sm_80", "sm_90")     # machine code for these; PTX for the lowest nvcc knows
KERNEL_PTX = "src/kernels/generated/copy_kernels.ptx"   # for builds without nvcc (tools/gen-ptx.py)
KERNEL_PTX_MAJOR = 13                # the CUDA major whose drivers compile that PTX (ISA 9.0)


# What this build did with each backend, written beside the extensions as
# pygpu/_build_report.json, where `python -m pygpu` shows it (pip shows the
# lines said here only with -v).
REPORT_NAME = "_build_report.json"
REPORT = {"built": {}, "skipped": {}}


def say(msg):
    print(f"pygpu: {msg}", file=sys.stderr)


def skip(name, why):
    REPORT["skipped"][name] = why
    say(f"skipping the {name} backend: {why}")


def first_dir(candidates, marker):
    """The first candidate directory that holds `marker`, or None."""
    for d in candidates:
        if d and os.path.exists(os.path.join(d, marker)):
            return d
    return None


def cudart_version(include):
    """CUDART_VERSION of the runtime headers in `include` (13000 for 13.0), or 0."""
    try:
        with open(os.path.join(include, "cuda_runtime_api.h")) as f:
            m = re.search(r"^#define\s+CUDART_VERSION\s+(\d+)", f.read(), re.M)
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


def cuda_version_text(v):
    return f"{v // 1000}.{v % 1000 // 10}"


def find_cuda():
    """(include_dir, lib_dir, nvcc or None, where the runtime came from) of
    a CUDA toolkit or of PyPI's runtime wheels, or a string saying why not."""
    source = pygpu_build.cuda_from()
    if source != "pypi":
        root = pygpu_build.toolkit_root()
        if root:
            libs = [os.path.join(root, d) for d in ("lib64", "lib", "targets/x86_64-linux/lib", "lib/x64")]
            lib = first_dir(libs, "libcudart_static.a")
            if not lib:
                return f"no libcudart_static.a under {root}"
            inc = os.path.join(root, "include")
            return inc, lib, find_nvcc(root), f"the toolkit at {root}"
        if source == "toolkit":
            return "PYGPU_CUDA_FROM=toolkit and no cuda_runtime_api.h under CUDA_HOME, CUDA_PATH, nvcc's prefix or /usr/local/cuda"
    if not pygpu_build.pypi_runtime_wanted():
        return ("no cuda_runtime_api.h under CUDA_HOME, CUDA_PATH, nvcc's prefix or /usr/local/cuda "
                "(and PyPI's CUDA runtime wheels are for Linux on x86_64 and aarch64 only)")
    major, why = pygpu_build.runtime_major()
    root = pygpu_build.pypi_runtime_dir(major)
    if not root:
        wheels = " ".join(f"'{w}'" for w in pygpu_build.PYPI_RUNTIME[major][0])
        return (f"no CUDA toolkit, and PyPI's CUDA {major} runtime is not installed: pip's build installs it "
                f"(without build isolation, pip install {wheels} first)")
    inc = os.path.join(root, "include")
    return inc, os.path.join(root, "lib"), None, f"PyPI's runtime wheel (CUDA {major}: {why})"


def find_nvcc(root):
    """The nvcc of the toolkit at `root` (or on PATH), or None."""
    nvcc = os.path.join(root, "bin", "nvcc")
    return nvcc if os.access(nvcc, os.X_OK) else shutil.which("nvcc")


def kernel_text():
    """The kernels' source with kernels.h put in place of its #include (for
    hiprtc, which is given one text)."""
    with open(os.path.join(HERE, KERNEL_HEADER)) as f:
        header = f.read()
    with open(os.path.join(HERE, KERNEL_SOURCE)) as f:
        source = f.read()
    return source.replace('#include "kernels.h"', header, 1)


def c_bytes(name, data, align=64, ctype="unsigned char"):
    """A C definition of `data` (bytes) as a hidden, aligned const array."""
    rows = ",\n".join(",".join(str(b) for b in data[i:i + 32]) for i in range(0, len(data), 32))
    return (f"__attribute__((visibility(\"hidden\"), aligned({align})))\n"
            f"const {ctype} {name}[{len(data)}] = {{\n{rows}\n}};\n")


def c_text(name, text):
    """A C definition of `text` (ASCII) as a hidden, NUL-terminated const
    array, written as string literals a line each: compiled in 0.06 s where
    the same 490 KB as a list of numbers takes 1.3 s."""
    esc = {"\\": "\\\\", '"': '\\"', "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    lines = ['"' + "".join(esc.get(c, c) for c in line) + '"' for line in text.splitlines(keepends=True)]
    return (f"__attribute__((visibility(\"hidden\"), aligned(64)))\n"
            f"const unsigned char {name}[] =\n" + "\n".join(lines or ['""']) + ";\n")


def nvcc_archs(nvcc):
    """(machine-code targets, the PTX target): KERNEL_SASS where nvcc knows
    them, and the lowest compute_NN it knows."""
    out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout.split()
    compute = sorted((int(a[8:]), a) for a in out if a.startswith("compute_") and a[8:].isdigit())
    known = {f"sm_{n}" for n, _ in compute}
    return [a for a in KERNEL_SASS if a in known], compute[0][1] if compute else "compute_75"


def build_kernel_image(nvcc, tmp):
    """Compile the kernels into a fatbin and write a C file holding it;
    (the C file, a line saying what it holds), or (None, why not)."""
    sass, ptx = nvcc_archs(nvcc)
    fatbin = os.path.join(tmp, "copy_kernels.fatbin")
    cmd = [nvcc, "-fatbin", "-O3", "-Xfatbin", "-compress-all", "-I", os.path.dirname(KERNEL_HEADER)]
    for a in sass:
        cmd += ["-gencode", f"arch=compute_{a[3:]},code={a}"]
    cmd += ["-gencode", f"arch={ptx},code={ptx}", "-o", fatbin, KERNEL_SOURCE]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, f"nvcc failed: {proc.stderr.strip()[-500:]}"
    origin = f"{' '.join(sass)} machine code, PTX for {ptx} (nvcc, at build time)"
    with open(fatbin, "rb") as f:
        data = f.read()
    c_file = os.path.join(tmp, "kernel_image.c")
    with open(c_file, "w") as f:
        f.write(c_bytes("pygpu_kernel_image", data))
        f.write(f'__attribute__((visibility("hidden"))) const char pygpu_kernel_image_origin[] = "{origin}";\n')
    return c_file, origin


def write_kernel_ptx(tmp):
    """A C file holding the tree's PTX of the kernels (NUL-terminated, as
    cudaLibraryLoadData takes PTX); (the C file, a line saying what it holds)."""
    with open(os.path.join(HERE, KERNEL_PTX), "rb") as f:
        data = f.read()
    origin = ("PTX for compute_75 kept in the tree (src/kernels/generated/copy_kernels.ptx), compiled by the driver "
              "at first use (no nvcc at build time)")
    c_file = os.path.join(tmp, "kernel_image.c")
    with open(c_file, "w") as f:
        f.write(c_text("pygpu_kernel_image", data.decode("ascii")))
        f.write(f'__attribute__((visibility("hidden"))) const char pygpu_kernel_image_origin[] = "{origin}";\n')
    return c_file, origin


def write_kernel_source(tmp):
    """A C file holding the kernels' source text, for hiprtc."""
    c_file = os.path.join(tmp, "kernel_source.c")
    with open(c_file, "w") as f:
        f.write(c_bytes("pygpu_kernel_source", kernel_text().encode("ascii") + b"\0", align=1, ctype="char"))
    return c_file


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


def backend_extension(name, backend_src, macros=(), extra_sources=(), **kw):
    kernels_src = backend_src.replace("rt_", "kernels_")
    return Extension(
        f"pygpu._{name}",
        sources=COMMON + [backend_src, *extra_sources, kernels_src],     # (the kernels' last: build_ext's rule)
        depends=HEADERS,
        include_dirs=["src", "include", numpy_include()] + kw.pop("include_dirs", []),
        define_macros=[(f"PYGPU_BACKEND_{name.upper()}", "1"), ("PYGPU_MODULE_NAME", f"_{name}")]
        + list(macros),
        extra_compile_args=CFLAGS,
        **kw,
    )


def extensions():
    wanted = {b.strip() for b in os.environ.get("PYGPU_BUILD", "host,cuda,hip").split(",") if b.strip()}
    for name in sorted({"cuda", "hip"} - wanted):
        REPORT["skipped"][name] = f"not asked for (PYGPU_BUILD={os.environ.get('PYGPU_BUILD')})"
    exts = [backend_extension("host", "src/backend/rt_host.c", extra_sources=["src/backend/ipc_host.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/backend/events_host.c", "src/backend/peer_host.c"],
                              libraries=["pthread"])]
    if "cuda" in wanted:
        found = find_cuda()
        if isinstance(found, str):
            skip("cuda", found)
        else:
            inc, lib, nvcc, origin = found
            ext = backend_extension(
                "cuda", "src/backend/rt_gpu.c", extra_sources=["src/backend/diagnose_gpu.c"],
                include_dirs=[inc], library_dirs=[lib],
                libraries=["cudart_static", "dl", "rt", "pthread"], optional=True)
            ext.nvcc, ext.cudart = nvcc, cudart_version(inc)
            ext.runtime = f"CUDA {cuda_version_text(ext.cudart)} runtime from {origin}"
            say(f"cuda: the {ext.runtime}")
            exts.append(ext)
    if "hip" in wanted:
        found = find_hip()
        if isinstance(found, str):
            skip("hip", found)
        else:
            inc, libs = found
            exts.append(backend_extension(
                "hip", "src/backend/rt_gpu.c", extra_sources=["src/backend/diagnose_gpu.c"],
                macros=[("__HIP_PLATFORM_AMD__", "1")],
                include_dirs=inc, library_dirs=libs, runtime_library_dirs=libs,
                libraries=["amdhip64", "dl"], optional=True))
    return exts


class BuildExt(build_ext):
    """Builds every backend at once.  The files that compile the same for
    every backend (pygpu_sources.backend_neutral: most of them) compile
    once, into their own temporary folder, and go into each backend; the
    rest compile once per backend, into its folder.  Each file, and nvcc's
    kernel image, is a job for one pool of workers (one a core); a backend
    links when its files are done."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def kernel_sources(self, ext, tmp):
        """The generated C files that bring the kernels into `ext`, and the
        macros that say they are there."""
        self.mkpath(tmp)
        if ext.name == "pygpu._hip":
            ext.report = "copy kernels: their source, compiled by hiprtc on each device at first use"
            return [write_kernel_source(tmp)], [("PYGPU_KERNEL_SOURCE", "1")]
        if ext.name != "pygpu._cuda":
            return [], []
        if ext.nvcc:
            c_file, what = build_kernel_image(ext.nvcc, tmp)
        elif ext.cudart // 1000 >= KERNEL_PTX_MAJOR:
            c_file, what = write_kernel_ptx(tmp)
        else:
            c_file, what = None, (f"no nvcc, and the tree's PTX needs a CUDA {KERNEL_PTX_MAJOR} driver, more "
                                  f"than this CUDA {cuda_version_text(ext.cudart)} runtime asks for")
        if not c_file:
            ext.report = (f"{ext.runtime}; without PyGPU's copy kernels ({what}): device-to-device layout "
                          "copies go through the host")
            say(f"cuda: built {ext.report}")
            return [], [("PYGPU_KERNELS_ABSENT", f'"{what}"')]
        ext.report = f"{ext.runtime}; copy kernels: {what}"
        say(f"cuda: {ext.report}")
        return [c_file], [("PYGPU_KERNEL_IMAGE", "1")]

    def run(self):
        super().run()
        report = dict(REPORT, setuptools=__import__("setuptools").__version__,
                      when=time.strftime("%Y-%m-%d %H:%M:%S %z"))
        path = os.path.join(os.path.dirname(self.get_ext_fullpath("pygpu._host")), REPORT_NAME)
        with open(path, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)

    def build_extensions(self):
        self.check_extensions_list(self.extensions)
        neutral = [src for src in COMMON if pygpu_sources.backend_neutral(src, HERE)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.parallel) as pool:
            # The kernel files first: nvcc's image is the longest job.
            kernels = [pool.submit(self.with_kernels, ext, ext.sources[-1]) for ext in self.extensions]
            shared = [pool.submit(self.compile_some, None, [src]) for src in neutral]
            own = [[pool.submit(self.compile_some, ext, [src]) for src in ext.sources[:-1] if src not in neutral]
                   for ext in self.extensions]
            for ext, k, jobs in zip(self.extensions, kernels, own):
                with self._filter_build_errors(ext):     # an optional backend that fails is skipped
                    self.finish(ext, shared + jobs + [k])

    def temp_of(self, ext):
        return os.path.join(self.build_temp, ext.name.replace(".", "_") if ext else "pygpu_common")

    def compile_some(self, ext, sources, macros=()):
        """Compile `sources` for backend `ext`, or for all (None: no
        backend's macros, nor its include folders); the objects."""
        return self.compiler.compile(
            sources, output_dir=self.temp_of(ext), macros=(ext.define_macros if ext else []) + list(macros),
            include_dirs=ext.include_dirs if ext else ["src", "include", numpy_include()],
            extra_postargs=CFLAGS, depends=HEADERS + [KERNEL_SOURCE, KERNEL_HEADER, KERNEL_PTX])

    def with_kernels(self, ext, source):
        """The backend's kernel file (the one file that reads the macros
        saying what kernel image there is), after that image is made."""
        extra, macros = self.kernel_sources(ext, self.temp_of(ext))
        return self.compile_some(ext, [source] + extra, macros)

    def finish(self, ext, jobs):
        name = ext.name.split("._", 1)[1]
        try:
            objects = [o for job in jobs for o in job.result()]
            self.compiler.link_shared_object(
                objects, self.get_ext_fullpath(ext.name), libraries=self.get_libraries(ext),
                library_dirs=ext.library_dirs, runtime_library_dirs=ext.runtime_library_dirs,
                extra_postargs=ext.extra_link_args, export_symbols=self.get_export_symbols(ext),
                build_temp=self.temp_of(ext), target_lang="c")
        except Exception as e:
            REPORT["skipped"][name] = f"failed to build: {str(e).strip()[-300:]}"
            raise
        REPORT["built"][name] = getattr(ext, "report", "")


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
