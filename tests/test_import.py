"""Import, backend choice, and the PYGPU_BACKEND switch (docs/api.md, Backends)."""
import ctypes
import json
import os
import re
import subprocess
import sys
import types
import warnings

import pytest

import pygpu

GPU_BACKENDS = ("cuda", "hip")
ALL_BACKENDS = GPU_BACKENDS + ("host",)


def test_PyGPU_is_pygpu():
    import PyGPU
    assert PyGPU is pygpu


def test_backends_is_a_tuple_of_known_names_with_host():
    built = pygpu.backends()
    assert isinstance(built, tuple)
    assert "host" in built
    assert set(built) <= set(ALL_BACKENDS), built
    assert len(set(built)) == len(built), built


def test_backend_in_use_was_built():
    assert isinstance(pygpu.backend, str)
    assert pygpu.backend in pygpu.backends()


def test_backend_module_is_the_extension_in_use():
    mod = pygpu.backend_module
    assert isinstance(mod, types.ModuleType)
    assert mod.__name__ == "pygpu._" + pygpu.backend


def test_versions_are_ints():
    rv, dv = pygpu.runtime_version(), pygpu.driver_version()
    assert isinstance(rv, int) and isinstance(dv, int)
    if pygpu.backend == "host":
        assert rv == 0 and dv == 0
    else:
        assert rv > 0


def test_BackendWarning_is_a_Warning():
    assert issubclass(pygpu.BackendWarning, Warning)


def test_imports_in_fresh_process_after_numpy(run_python):
    proc = run_python(
        """
        import time
        import numpy
        t0 = time.perf_counter()
        import pygpu
        t1 = time.perf_counter()
        print(pygpu.backend)
        print("import took %.3f s" % (t1 - t0))
        """
    )
    lines = proc.stdout.splitlines()
    assert lines[0] in ALL_BACKENDS, proc.stdout


def test_default_choice_warns_only_when_falling_back_to_host(run_python):
    """Unforced: the first GPU backend that sees a device, else host with
    exactly one BackendWarning saying why."""
    proc = run_python(
        """
        import json, warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import pygpu
        msgs = [str(x.message) for x in w
                if issubclass(x.category, pygpu.BackendWarning)]
        print(json.dumps({"backend": pygpu.backend, "warnings": msgs}))
        """
    )
    out = json.loads(proc.stdout.splitlines()[-1])
    if out["backend"] == "host":
        assert len(out["warnings"]) == 1, out
        assert out["warnings"][0].strip(), "the BackendWarning must say why"
        assert "\n" not in out["warnings"][0].strip(), "one line, says the doc"
    else:
        assert out["warnings"] == [], out


def test_forced_host(run_python):
    proc = run_python(
        "import pygpu; print(pygpu.backend, pygpu.backend_module.__name__)",
        env={"PYGPU_BACKEND": "host"},
    )
    assert proc.stdout.split() == ["host", "pygpu._host"]


def test_forced_bogus_backend_raises_naming_choices(run_python):
    proc = run_python(
        """
        import sys
        try:
            import pygpu
        except (ImportError, ValueError) as e:
            print(type(e).__name__)
            print(e)
            sys.exit(3)
        print("imported", pygpu.backend)
        """,
        env={"PYGPU_BACKEND": "bogus"},
        check=False,
    )
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    kind, _, message = proc.stdout.partition("\n")
    assert kind in ("ImportError", "ModuleNotFoundError", "ValueError")
    for name in pygpu.backends():
        assert name in message, "the error should list the valid choice %r: %s" % (
            name, message)


_GPU_PROBE = """
import json, sys
try:
    import pygpu
except ImportError as e:
    print(json.dumps({"import_error": str(e)}))
    sys.exit(0)
out = {"backend": pygpu.backend, "module": pygpu.backend_module.__name__}
try:
    out["count"] = pygpu.device_count()
except pygpu.GPUError as e:
    out["error"] = {"type": type(e).__name__, "name": e.name, "code": e.code,
                    "str": str(e), "message": e.message, "call": e.call}
print(json.dumps(out))
"""


@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_forced_gpu_backend(run_python, name):
    """A built GPU backend imports when forced and either sees devices or
    raises GPUError with the vendor's status; an unbuilt one is an ImportError."""
    proc = run_python(_GPU_PROBE, env={"PYGPU_BACKEND": name})
    out = json.loads(proc.stdout.splitlines()[-1])
    if name not in pygpu.backends():
        assert "import_error" in out, (
            "%r is not in pygpu.backends() %r, so forcing it must raise ImportError; got %r"
            % (name, pygpu.backends(), out))
        return
    assert "import_error" not in out, out
    assert out["backend"] == name
    assert out["module"] == "pygpu._" + name
    if "count" in out:
        assert isinstance(out["count"], int) and out["count"] > 0, out
    else:
        err = out["error"]
        assert err["name"].startswith(name), err
        assert err["name"] in err["str"], err
        assert isinstance(err["code"], int) and err["code"] != 0, err
        assert str(err["code"]) in err["str"], err


def _driver_state(name):
    """What the machine has for GPU backend `name`: 'none' (no driver),
    'present' (a driver, devices or not)."""
    if name == "cuda":
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            return "none"
        return "present"
    return "present" if os.access("/dev/kfd", os.R_OK | os.W_OK) else "none"


@pytest.mark.parametrize("name", GPU_BACKENDS)
@pytest.mark.parametrize("hide", [False, True])
def test_forced_gpu_backend_says_why_it_has_no_device(run_python, name, hide):
    """No driver, a driver too old for the runtime (versions named), and a
    driver that sees no device each read as what they are, with the
    vendor's status kept."""
    if name not in pygpu.backends():
        pytest.skip(f"the {name} backend was not built")
    env = {"PYGPU_BACKEND": name}
    if hide:
        env["CUDA_VISIBLE_DEVICES" if name == "cuda" else "HIP_VISIBLE_DEVICES"] = ""
    out = json.loads(run_python(_GPU_PROBE, env=env).stdout.splitlines()[-1])
    if "count" in out:
        assert not hide, out
        return
    err, vendor = out["error"], {"cuda": "NVIDIA", "hip": "AMD"}[name]
    assert err["name"] in err["str"] and f"({err['code']})" in err["str"], err
    if _driver_state(name) == "none":
        assert f"no {vendor} " in err["str"] and "driver found" in err["str"], err
        assert "PYGPU_BACKEND=host" in err["str"], err
    elif err["name"].endswith("InsufficientDriver"):
        assert re.search(r"driver is too old for this runtime: the driver supports \w+ \d+\.\d+, "
                         r"PyGPU was built with \w+ \d+\.\d+", err["str"]), err
    else:
        assert err["name"].endswith("NoDevice"), err
        assert f"the {vendor} driver is there" in err["str"] and "sees no device" in err["str"], err
        if hide:
            assert "VISIBLE_DEVICES=\"\" is set" in err["str"], err


def test_hidden_devices_fall_back_to_host(run_python):
    """With every device hidden, the choice is host and the warning says why,
    without initialising any driver."""
    r = run_python("""
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            import pygpu
        assert pygpu.backend == "host", pygpu.backend
        msgs = [str(x.message) for x in w if issubclass(x.category, pygpu.BackendWarning)]
        assert len(msgs) == 1, msgs
        print(msgs[0])
        """, env={"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    line = r.stdout.strip()
    for name in pygpu.backends():
        if name != "host":
            assert f"{name}: " in line, line
    if "cuda" in pygpu.backends():
        assert "CUDA_VISIBLE_DEVICES hides every device" in line


README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _readme_line(prefix):
    with open(README, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.startswith(prefix)]
    assert len(lines) == 1, f"README.md should show one line starting {prefix!r}: {lines}"
    return lines[0]


def _warning_shape(line):
    """The warning with the machine's reasons and backends taken out."""
    line = re.sub(r"no GPU found \(.*?\): ", "no GPU found (...): ", line)
    return re.sub(r"PYGPU_BACKEND=[\w ]+? says", "PYGPU_BACKEND=... says", line)


def test_backend_warning_is_one_line_that_says_how_to_choose(run_python):
    """The fallback warning: one line, why and how to choose, as README shows
    it; PYGPU_BACKEND=host and README's filter quiet it."""
    if set(pygpu.backends()) == {"host"}:
        pytest.skip("README shows the warning of a build with GPU backends (it names them); this one has only "
                    "the host backend (tools/asan.sh's)")
    r = run_python("import pygpu", env={"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pygpu:0: BackendWarning: no GPU found ("), r.stderr
    assert "PYGPU_BACKEND=host chooses it without this warning" in lines[0]
    assert _warning_shape(lines[0]) == _warning_shape(_readme_line("pygpu:0: BackendWarning:"))
    quiet = run_python("import pygpu; assert pygpu.backend == 'host'",
                       env={"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "PYGPU_BACKEND": "host"})
    assert quiet.stderr == "", quiet.stderr
    block = re.search(r"```python\n(import warnings\n.*?)```", open(README, encoding="utf-8").read(), re.S)
    filtered = run_python(block.group(1), env={"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    assert filtered.stderr == "", filtered.stderr


def test_readme_shows_the_no_driver_error_as_it_appears(run_python):
    """Where the CUDA backend is built and no NVIDIA driver is installed (CI),
    README's error line is what a forced CUDA backend really says."""
    if "cuda" not in pygpu.backends() or _driver_state("cuda") != "none":
        pytest.skip("needs the cuda backend built on a machine without an NVIDIA driver")
    out = json.loads(run_python(_GPU_PROBE, env={"PYGPU_BACKEND": "cuda"}).stdout.splitlines()[-1])
    assert "pygpu.GPUError: " + out["error"]["str"] == _readme_line("pygpu.GPUError: cudaGetDeviceCount")


@pytest.mark.gpu_only
def test_unforced_import_takes_the_gpu(run_python):
    """On a GPU machine the default choice is the GPU backend."""
    r = run_python("import pygpu; print(pygpu.backend, pygpu.device_count())")
    name, count = r.stdout.split()
    assert name == pygpu.backend and int(count) >= 1


def test_dir_shows_pygpus_names_only():
    """dir(pygpu) lists the API (and the submodules, the PyCUDA and PyGPU
    names loaded on first use), not the standard modules pygpu/__init__.py
    imports for itself."""
    names = set(dir(pygpu))
    assert not names & {"os", "re", "warnings", "importlib"}, sorted(names & {"os", "re", "warnings", "importlib"})
    assert {"to_gpu", "GPUArray", "Stream", "driver", "pagelocked_empty", "DeviceArray_float64"} <= names
    assert set(pygpu.__all__) <= names


def test_a_folder_named_pygpu_where_python_runs_does_not_shadow_the_package(tmp_path):
    """Run from a clone's parent, where the clone's folder is named pygpu
    (and has no __init__.py), `import pygpu` still finds the package, not
    an empty namespace package: the editable install puts the checkout on
    sys.path (build_support/pygpu_build.py), and an installed wheel is a
    regular package in site-packages."""
    probe = [sys.executable, "-c", "import pygpu; print(pygpu.__file__, hasattr(pygpu, 'to_gpu'))"]
    env = {**os.environ, "PYGPU_BACKEND": "host"}
    plain = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    if plain.returncode or not plain.stdout.strip().endswith("True"):
        pytest.skip("pygpu is not importable outside the checkout here (not installed)")
    (tmp_path / "pygpu").mkdir()
    (tmp_path / "pygpu" / "README.md").write_text("the clone's folder\n")
    shadowed = subprocess.run(probe, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert shadowed.returncode == 0, shadowed.stderr
    assert shadowed.stdout == plain.stdout
