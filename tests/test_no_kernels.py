"""The ways device copies take where PyGPU's own kernels cannot run (a CUDA
build made without nvcc, HIP without hiprtc, a driver that cannot load
them): the copy, transfer and fault tests again, in a fresh interpreter
with PYGPU_KERNELS=0, which switches the kernels off.  Layout copies then
go by runtime copies or through the host, casts through NumPy, fills by
copies; every result must be the same.  The copy tests run so in the
default run; the transfer and fault tests (half a minute more) are a long
run, marked slow."""
import os
import subprocess
import sys

import pytest

import pygpu
from conftest import PACKAGE_ROOT

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {
    "copies": ["test_device_copy.py", "test_array_copy.py"],
    "transfers and faults": pytest.param(["test_transfers.py", "test_faults.py"], marks=pytest.mark.slow),
}


@pytest.mark.parametrize("files", FILES.values(), ids=FILES.keys())
def test_without_kernels_every_copy_is_the_same(files):
    env = dict(os.environ, PYGPU_KERNELS="0")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           "-W", "ignore::pygpu.BackendWarning", *[os.path.join(HERE, f) for f in files]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800,
                          cwd=PACKAGE_ROOT)     # (where the pygpu under test is: the checkout, or an installed wheel)
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
    assert proc.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail, tail


def test_the_switch_says_so(run_python):
    out = run_python("import pygpu; print(pygpu.copy_kernels())", env={"PYGPU_KERNELS": "0"}).stdout
    assert "'ready': False" in out and "PYGPU_KERNELS=0" in out and "ErrorNotSupported" in out, out
    assert pygpu.copy_kernels()["origin"] != out
