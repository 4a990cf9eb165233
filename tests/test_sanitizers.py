"""The host backend under AddressSanitizer, LeakSanitizer and
UndefinedBehaviorSanitizer, in CI's long runs (marked slow): tools/asan.sh builds it (into
build/asan) and runs a part of the suite against that build.

The whole suite takes about ten minutes that way (`bash tools/asan.sh`);
here, within CI's budget, the tests that reach the most C with bad input,
DLPack capsules, leaks and faults run, each in a fresh interpreter whose
exit a leak fails.  Skipped when the compiler cannot build with the
sanitizers, when this run already is a sanitized one, or when it tests a
pygpu installed from elsewhere (CI's run against the wheel: the checkout's
sources are built and checked in its run against the checkout).
"""
import os
import shutil
import subprocess

import pytest

import pygpu

# A long run (a sanitized build, then a part of the suite under it): in
# `python3 -m pytest -m slow`, not in the default run.
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "asan.sh")

# The part of the suite that runs here: every entry point with bad input,
# DLPack both ways (hostile producers, consumed capsules, deleters), the
# leak loops (in a fresh interpreter, whose exit is checked for leaks; 20
# rounds a phase here), the out-of-memory and interrupt faults, and the
# uploads that complete in the background (a mover thread, gates), and the
# copies on the device (overlapping assignments, through a temporary).  The
# rest (the fuzzing, the threads, fork...) runs in the full sanitized run.
SUBSET = [
    "tests/test_bad_input.py",
    "tests/test_device_copy.py",
    "tests/test_dlpack.py",
    "tests/test_leaks.py",
    "tests/test_faults.py::test_out_of_memory_mid_operation_host",
    "tests/test_faults.py::test_interrupt_stops_staged_transfers_cleanly",
    "tests/test_background.py",
]


def test_host_backend_under_asan_and_ubsan():
    if pygpu.backend != "host":
        pytest.skip("the sanitized build is of the host backend")
    if os.environ.get("LD_PRELOAD", "").find("asan") >= 0 or "asan" in os.path.abspath(pygpu.__file__):
        pytest.skip("this run is the sanitized one already")
    if not shutil.which("bash"):
        pytest.skip("tools/asan.sh needs bash")
    if not os.path.abspath(pygpu.__file__).startswith(os.path.join(ROOT, "")):
        pytest.skip("the sanitized build is of this checkout's sources, and this run tests a pygpu installed "
                    "elsewhere (the run against the checkout builds them)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYGPU_", "ASAN_", "LSAN_", "UBSAN_"))}
    env["PYGPU_LEAK_ROUNDS"] = "20"
    proc = subprocess.run(["bash", SCRIPT, *SUBSET, "-q", "-x"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode == 77:
        pytest.skip(proc.stderr.strip())
    tail = (proc.stdout[-6000:] + "\n" + proc.stderr[-6000:]).strip()
    assert proc.returncode == 0, f"tools/asan.sh exited with {proc.returncode}:\n{tail}"
    assert "ERROR: AddressSanitizer" not in tail and "runtime error:" not in tail, tail
    assert "ERROR: LeakSanitizer" not in tail, tail
