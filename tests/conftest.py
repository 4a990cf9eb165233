"""Shared fixtures for the PyGPU test suite.

Every test runs on every backend, the host backend included, except those
marked ``gpu_only``: they check what only real hardware can show (copy
engines overlapping, the driver's view of a device) and skip on ``host``
with a reason that says so.

Long runs (the sanitizer builds, valgrind, the suite again in another
configuration, a build's every file) are marked ``slow``: pyproject.toml's
addopts leave them out of the default run (``python3 -m pytest``), and
``python3 -m pytest -m slow`` runs exactly them (CI runs both).

On the host backend the suite runs with two devices (PYGPU_HOST_DEVICES=2,
set below unless already set), so that the tests of several devices run
everywhere.  Tests that need a configuration the current process cannot
have (another number of host devices, a small host "device memory", a
forced backend) run a short script in a fresh interpreter through the
``run_python`` fixture.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

# The host backend presents two devices to the suite (unless
# PYGPU_HOST_DEVICES says otherwise), so that the tests of several devices
# (tests/test_multi_device.py and others) run in every run, CI's included;
# it is read at the first call, after this.  GPU backends ignore it.
os.environ.setdefault("PYGPU_HOST_DEVICES", "2")

import pygpu  # noqa: E402

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:             # (the property tests then fail to import, saying why)
    pass
else:
    # No time limit on an example, for every property test, not only those
    # that pass settings of their own (gpuarray_helpers.PROPERTY and
    # test_fuzz.budget say deadline=None too): Hypothesis' default of 200 ms
    # fails a test whose example met a loaded machine.
    _hypothesis_settings.register_profile("pygpu", deadline=None)
    _hypothesis_settings.load_profile("pygpu")

GPU_BACKENDS = ("cuda", "hip")

# The directory that holds the pygpu package, so that subprocesses import
# the same build as this process whatever their working directory.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(pygpu.__file__)))


def pytest_sessionstart(session):
    """PYGPU_TEST_STAGING=1 sends every pageable copy of the run through the
    staging pipeline in small chunks (it is off by default on the host
    backend, where it only adds a copy)."""
    if os.environ.get("PYGPU_TEST_STAGING"):
        pygpu.transfer_config(min_bytes=0, chunk=16 << 10, depth=3, threads=3)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu_only: needs a real GPU; skipped when pygpu.backend == 'host'",
    )
    config.addinivalue_line(
        "markers",
        "slow: a long run, left out of the default run; `python3 -m pytest -m slow` runs them",
    )
    config.addinivalue_line(
        "markers",
        "timing: arms a timer, sleeps, counts ticks or races threads: written so that a loaded "
        "machine cannot fail it, and run many times under a CPU hog by tools/timing-stress.sh",
    )


def pytest_collection_modifyitems(config, items):
    if pygpu.backend != "host":
        return
    skip = pytest.mark.skip(
        reason="needs a real GPU: pygpu.backend is 'host' (no CUDA/HIP device here)"
    )
    for item in items:
        if "gpu_only" in item.keywords:
            item.add_marker(skip)


def clean_env(**overrides):
    """A copy of os.environ without PYGPU_* settings (but PYGPU_KERNELS, so
    that a run without PyGPU's kernels has none in its subprocesses either),
    plus `overrides` (a value of None removes the variable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYGPU_") or k == "PYGPU_KERNELS"}
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = PACKAGE_ROOT + (os.pathsep + old if old else "")
    for k, v in overrides.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def _run_python(code, env=None, timeout=120, check=True):
    """Run `code` (dedented) in a fresh interpreter with `env` overrides.

    Returns the CompletedProcess.  With check=True a non-zero exit fails the
    calling test and shows the subprocess's output."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean_env(**(env or {})),
        cwd=PACKAGE_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        pytest.fail(
            "subprocess exited with %d\n--- stdout ---\n%s\n--- stderr ---\n%s"
            % (proc.returncode, proc.stdout, proc.stderr)
        )
    return proc


@pytest.fixture
def run_python():
    """run_python(code, env={...}, check=True) -> CompletedProcess."""
    return _run_python


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's name: reproducible per test."""
    seed = sum(request.node.nodeid.encode())
    return np.random.default_rng(seed)


@pytest.fixture
def random_bytes(rng):
    """random_bytes(n) -> a fresh uint8 array of n random bytes."""
    def make(n):
        return rng.integers(0, 256, size=n, dtype=np.uint8)
    return make


@pytest.fixture
def stream():
    """A freshly created Stream on the current device, synchronized at teardown."""
    s = pygpu.Stream()
    yield s
    s.synchronize()


@pytest.fixture(autouse=True)
def _restore_device():
    """Each test starts on device 0 and leaves the current device as it found
    it.  (Importing some libraries, at collection, can leave another device
    current on a machine with several GPUs.)"""
    if pygpu.get_device() != 0:
        pygpu.set_device(0)
    dev = 0
    yield
    if pygpu.get_device() != dev:
        pygpu.set_device(dev)
