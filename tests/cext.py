"""Building a small C extension in a test: the C compiler on PATH, strict
warnings, the interpreter's and PyGPU's public headers (pygpu.get_include())."""
import importlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

import pygpu


def c_compiler():
    """The C compiler on PATH, or None."""
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def build_extension(directory, source, name):
    """Compile `source` (C text) as module `name` in `directory` and import
    it; skips the test where there is no C compiler."""
    cc = c_compiler()
    if not cc:
        pytest.skip("no C compiler")
    src = directory / (name + ".c")
    src.write_text(source)
    out = directory / (name + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [cc, "-shared", "-fPIC", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
           "-Wno-missing-field-initializers", "-I", sysconfig.get_paths()["include"],
           "-I", pygpu.get_include(), str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(directory))
