"""The C unit tests (tests/c/) of PyGPU's pure-C code: the layout arithmetic
(src/shape.c), the DLPack tensor checks (src/dlpack_check.c), and PyGPU's
own kernels as the host backend runs them (src/copy/devcopy.c,
src/backend/kernels_host.c, src/kernels/kernels.h), and the worker pool
with many callers at once (src/transfer/workers.c; also under
ThreadSanitizer), the pool of page-locked blocks over the host runtime
(src/transfer/pinned_pool.c), the staging lanes and their count of
transfers at work per device (src/transfer/lanes.c), and the uploads that
complete in the background, from twelve threads (src/transfer/background*.c;
these three also under ThreadSanitizer), and the host backend's rule for
the legacy stream while a blocking stream is captured
(src/backend/rt_host.c, captured_host.c), and the leaf locks that a forked
child finds free (src/forklock.c, with captured_host.c's table forked
beside two threads that use it), and the host's NUMA nodes and the blocks
PyGPU page-locks on them (src/numa.c, src/pages.c: a sysfs tree made
there, pages placed on node 0); and, where a CUDA toolkit is
installed, the page-locked blocks as the GPU backends make them
(src/backend/rt_gpu.c: refused, or made, read by a forked child, and
unpinned, with no mapping left behind).

Each is built with the system's C compiler (-Wall -Wextra -Werror) and run
three ways: plainly, under valgrind memcheck (--error-exitcode=1
--leak-check=full; skipped when valgrind is not installed), and built with
-fsanitize=address,undefined (skipped when the compiler cannot).  The plain
runs are in the default run; valgrind and the sanitizers (ThreadSanitizer's
too) are long runs, marked slow (`python3 -m pytest -m slow`).
"""
import os
import shutil
import subprocess
import sysconfig

import pytest

import pygpu

HERE = os.path.dirname(os.path.realpath(__file__))   # (the repository, also from a linked build folder)
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
UNITS = {
    "test_shape": ["src/shape.c"],
    "test_dlpack_check": ["src/dlpack_check.c", "src/shape.c"],
    "test_devcopy": ["src/copy/devcopy.c", "src/backend/kernels_host.c", "src/shape.c", "src/env.c"],
    "test_workers": ["src/transfer/workers.c"],
    "test_forklock": ["src/forklock.c", "src/backend/captured_host.c"],
    "test_numa": ["src/numa.c", "src/pages.c"],
    "test_capture_host": ["src/backend/rt_host.c", "src/pages.c", "src/numa.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/forklock.c", "src/backend/events_host.c",
                          "src/env.c"],
    "test_pinned_pool": ["src/transfer/pinned_pool.c", "src/backend/rt_host.c", "src/pages.c", "src/numa.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/forklock.c", "src/backend/events_host.c", "src/transfer/settings.c", "src/env.c"],
    "test_lanes": ["src/transfer/lanes.c", "src/transfer/pinned_pool.c", "src/backend/rt_host.c", "src/pages.c", "src/numa.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/forklock.c", "src/backend/events_host.c",
                   "src/transfer/settings.c", "src/env.c"],
    "test_background": ["src/transfer/background.c", "src/transfer/background_up.c", "src/transfer/background_down.c",
                        "src/transfer/hostcopy.c", "src/transfer/events.c",
                        "src/transfer/workers.c", "src/transfer/lanes.c", "src/transfer/pinned_pool.c", "src/backend/rt_host.c", "src/pages.c", "src/numa.c", "src/backend/locked_host.c", "src/backend/captured_host.c", "src/forklock.c", "src/backend/events_host.c",
                        "src/transfer/settings.c", "src/transfer/trace.c", "src/shape.c", "src/env.c"],
}
CC = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]


def build(tmp_path, unit, extra=()):
    if not CC:
        pytest.skip("no C compiler")
    exe = tmp_path / (unit + ("-san" if extra else ""))
    cmd = [CC, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", *extra, "-I" + SRC,
           "-I" + os.path.join(ROOT, "include"), os.path.join(HERE, "c", unit + ".c"), *[os.path.join(ROOT, s) for s in UNITS[unit]], "-lm", "-pthread", "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 and extra:
        pytest.skip(f"{CC} cannot build with {' '.join(extra)}: {proc.stderr.strip()[-300:]}")
    assert proc.returncode == 0, proc.stderr
    return str(exe)


def run(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited with {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert " 0 failed" in proc.stdout, proc.stdout
    return proc


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """unit -> its plain build (made once)."""
    cache = {}

    def get(unit):
        if unit not in cache:
            cache[unit] = build(tmp_path_factory.mktemp(unit), unit)
        return cache[unit]
    return get


# (test_background waits for its mover: tools/timing-stress.sh runs it under load)
TIMED_UNITS = [pytest.param(u, marks=pytest.mark.timing) if u == "test_background" else u for u in sorted(UNITS)]


@pytest.mark.parametrize("unit", TIMED_UNITS)
def test_c_unit(built, unit):
    run([built(unit)])


@pytest.mark.slow
@pytest.mark.parametrize("unit", TIMED_UNITS)
def test_c_unit_under_valgrind(built, unit):
    valgrind = shutil.which("valgrind")
    if not valgrind:
        pytest.skip("valgrind is not installed (.ci/run installs it)")
    exe = built(unit)
    proc = run([valgrind, "-q", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                exe])
    assert "ERROR SUMMARY" not in proc.stderr or "0 errors" in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("unit", sorted(UNITS))
def test_c_unit_with_sanitizers(tmp_path, unit):
    if sysconfig.get_platform().startswith("win"):
        pytest.skip("sanitizers: not on this platform")
    exe = build(tmp_path, unit, SANITIZE)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS")}
    env["ASAN_OPTIONS"] = "detect_leaks=1"
    run([exe], env=env)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["test_workers", "test_lanes", "test_background"])
def test_threaded_units_under_thread_sanitizer(tmp_path, unit):
    """The worker pool's slots, claims and joins with twelve callers at
    once, the lanes taken and given by twelve threads (their count of
    transfers at work read without the lock), and twelve threads' uploads
    in the background (the mover, the gates, the reaper), under
    ThreadSanitizer: no data race."""
    if sysconfig.get_platform().startswith("win"):
        pytest.skip("sanitizers: not on this platform")
    exe = build(tmp_path, unit, ["-fsanitize=thread"])
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS")}
    env["TSAN_OPTIONS"] = "halt_on_error=1"
    proc = run([exe], env=env)
    assert "WARNING: ThreadSanitizer" not in proc.stderr, proc.stderr


def cuda_toolkit():
    """(include dir, static runtime) of an installed CUDA toolkit, or None."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if not root or not os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h")):
            continue
        for lib in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            static = os.path.join(root, lib, "libcudart_static.a")
            if os.path.exists(static):
                return os.path.join(root, "include"), static
    return None


def test_page_locked_blocks_on_the_cuda_runtime(tmp_path):
    """pygpu_rt_host_pin and unpin (rt_gpu.c) built against the CUDA
    runtime: on a GPU every block is made, aligned, read by a forked child
    and unpinned; without one every registration is refused; sizes past the
    machine's memory are refused at once; no mapping is left behind."""
    found = cuda_toolkit()
    if not CC or not found or not sysconfig.get_platform().startswith("linux"):
        pytest.skip("no C compiler, or no CUDA toolkit (headers and libcudart_static.a) installed")
    include, static = found
    exe = tmp_path / "test_pin_gpu"
    cmd = [CC, "-std=c11", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-DPYGPU_BACKEND_CUDA", "-I" + SRC,
           "-I" + os.path.join(SRC, "backend"), "-I" + os.path.join(ROOT, "include"), "-I" + include,
           os.path.join(HERE, "c", "test_pin_gpu.c"), os.path.join(SRC, "backend", "rt_gpu.c"),
           os.path.join(SRC, "pages.c"), os.path.join(SRC, "numa.c"), static,
           "-ldl", "-lrt", "-lm", "-pthread", "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = run([str(exe)]).stdout
    if pygpu.backend == "cuda":
        assert "refused (no GPU): 0" in out, out
