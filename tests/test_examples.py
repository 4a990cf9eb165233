"""Every example in examples/ runs, as a user would run it.

An example is a file ``examples/NAME.py`` or a folder ``examples/NAME/``
with a ``README.md``.  It declares how it runs in header lines: for a file,
comment lines at its top (before the first line of code); for a folder,
lines of its README (inside an HTML comment, so they do not show):

    # requires: cuda, cupy           what must be present, else the test skips
    # run: mpirun -np 2              launcher put before `python3 FILE` (a file),
                                     or the whole command (a folder: run: python3 x.py)
    # build: nvcc -o libx.so x.cu    commands run first, in the folder (one per line)
    # expect: saxpy: ok              a line the output must contain (a regex)
    # timeout: 300                   seconds for each command (default 300)

Requirements: ``gpu`` (pygpu.backend is not "host"), ``cuda`` / ``hip``
(that backend), ``N ranks`` (N MPI processes: the -np of ``run: mpirun``
when that gives none), otherwise a command on PATH or an importable module.
An example that requires no GPU must run on the host backend, so it runs
in CI.  Each runs in a subprocess, in a temporary folder (a folder example
is copied there, so its build leaves nothing in the tree), on the backend
this test session uses.  ``python``/``python3`` in commands is this
interpreter; ``mpirun`` gets ``--oversubscribe``, and ``--allow-run-as-root``
when running as root, where it is Open MPI's.  ``$CUDA_HOME/bin`` (or
``/usr/local/cuda/bin``) is appended to PATH, for nvcc.

Examples build without a warning: a build command that prints one fails,
and every ``.c`` and ``.cu`` file under examples/ compiles with -Werror
(gcc and clang, nvcc; each where it is installed).
"""
import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

import pygpu
from conftest import clean_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
KEYS = ("requires", "run", "build", "expect", "timeout")
DEFAULT_TIMEOUT = 300
MPI_LAUNCHERS = ("mpirun", "mpiexec")

# Where each example is expected to run: names of those that need no GPU run
# on the host backend (checked below, so that a requirement added by mistake
# does not silently drop an example from CI).
HOST_EXAMPLES = {"streams_pipeline.py", "pinned_memory.py", "c_exchange/"}


# ---- finding examples and their headers ---------------------------------------------

def _header_lines(path):
    """The lines of an example that may carry headers: a file's leading
    comment block, or every line of a folder's README.md."""
    if os.path.isdir(path):
        with open(os.path.join(path, "README.md"), encoding="utf-8") as f:
            return [line.strip() for line in f]
    lines = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                break
            lines.append(line.lstrip("#").strip())
    return lines


def parse_headers(path):
    """{key: [values]} of the example at `path` (file or folder)."""
    headers = {}
    pattern = re.compile(r"^(%s):\s*(.*?)\s*$" % "|".join(KEYS))
    for line in _header_lines(path):
        m = pattern.match(line)
        if m and m.group(2):
            headers.setdefault(m.group(1), []).append(m.group(2))
    return headers


def discover(root=EXAMPLES):
    """[(name, path)] of the examples under `root`: *.py files and folders
    with a README.md."""
    found = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith((".", "_")):
            continue
        if os.path.isfile(path) and name.endswith(".py"):
            found.append((name, path))
        elif os.path.isdir(path) and os.path.exists(os.path.join(path, "README.md")):
            found.append((name + "/", path))
    return found


# ---- requirements ---------------------------------------------------------------------

def _search_path(env):
    return env.get("PATH", os.defpath)


def example_env():
    """The environment examples run in: this session's backend, this
    checkout's pygpu, and the CUDA toolkit's bin folder on PATH."""
    env = clean_env(PYGPU_BACKEND=pygpu.backend)
    cuda_bin = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin")
    if os.path.isdir(cuda_bin):
        env["PATH"] = _search_path(env) + os.pathsep + cuda_bin
    return env


def missing_requirement(req, env):
    """Why requirement `req` is not met here, or None when it is."""
    if req == "gpu":
        return None if pygpu.backend != "host" else "needs a GPU: pygpu.backend is 'host'"
    if req in ("cuda", "hip"):
        return None if pygpu.backend == req else f"needs the {req} backend: pygpu.backend is {pygpu.backend!r}"
    if re.fullmatch(r"\d+ ranks?", req):
        return None     # MPI processes on one machine: mpirun is required separately
    if shutil.which(req, path=_search_path(env)):
        return None
    try:
        if importlib.util.find_spec(req) is not None:
            return None
    except (ImportError, ValueError):
        pass
    return f"needs {req}: not a command on PATH nor an importable module"


def requirements(headers):
    return [r.strip() for line in headers.get("requires", []) for r in line.split(",") if r.strip()]


# ---- commands -----------------------------------------------------------------------------

def _is_open_mpi(launcher, env):
    try:
        out = subprocess.run([launcher, "--version"], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    text = out.stdout + out.stderr
    return "Open MPI" in text or "OpenRTE" in text or "open-mpi" in text


def _ranks(reqs):
    for r in reqs:
        m = re.fullmatch(r"(\d+) ranks?", r)
        if m:
            return m.group(1)
    return None


def command(words, reqs, env, open_mpi=None):
    """`words` (a command as a list) as it will run: python -> this
    interpreter, mpirun with the flags it needs here."""
    words = [sys.executable if w in ("python", "python3") else w for w in words]
    if words and os.path.basename(words[0]) in MPI_LAUNCHERS:
        launcher, rest = words[0], words[1:]
        extra = []
        if open_mpi is None:
            open_mpi = _is_open_mpi(launcher, env)
        if open_mpi:
            extra.append("--oversubscribe")         # more ranks than cores is fine here
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                extra.append("--allow-run-as-root")
        if not any(w in ("-np", "-n", "--np", "-c") for w in rest) and _ranks(reqs):
            extra += ["-np", _ranks(reqs)]
        words = [launcher] + extra + rest
    return words


def commands(name, path, headers, env, open_mpi=None):
    """(build commands, the run command) of an example, as argument lists."""
    reqs = requirements(headers)
    builds = [command(shlex.split(b), reqs, env, open_mpi) for b in headers.get("build", [])]
    run = headers.get("run", [])
    if len(run) > 1:
        raise ValueError(f"{name}: more than one run: line")
    if os.path.isdir(path):
        if not run:
            raise ValueError(f"{name}: its README.md declares no `run:` line; add one in an HTML comment, "
                             "e.g. <!-- run: python3 main.py -->, and `expect:` with a line of its output "
                             "(the header lines are described in tests/test_examples.py)")
        return builds, command(shlex.split(run[0]), reqs, env, open_mpi)
    prefix = shlex.split(run[0]) if run else []
    return builds, command(prefix + ["python3", path], reqs, env, open_mpi)


def _run(words, cwd, env, timeout):
    try:
        proc = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{shlex.join(words)} ran past {timeout} s\n--- stdout ---\n{e.stdout}\n--- stderr ---\n{e.stderr}")
    if proc.returncode != 0:
        pytest.fail(f"{shlex.join(words)} exited with {proc.returncode}\n"
                    f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}")
    return proc


def run_example(name, path, workdir):
    """Run one example in `workdir` (skipping where a requirement is missing);
    returns the run command's CompletedProcess after checking its output."""
    headers = parse_headers(path)
    env = example_env()
    missing = [why for why in (missing_requirement(r, env) for r in requirements(headers)) if why]
    if missing:
        pytest.skip(f"{name}: " + "; ".join(missing))
    timeout = int(headers.get("timeout", [DEFAULT_TIMEOUT])[0])
    builds, run = commands(name, path, headers, env)
    cwd = str(workdir)
    if os.path.isdir(path):
        cwd = os.path.join(cwd, os.path.basename(path))
        shutil.copytree(path, cwd)
    for words in builds:
        built = _run(words, cwd, env, timeout)
        warned = [line for line in (built.stdout + built.stderr).splitlines() if "warning:" in line]
        assert not warned, f"{name}: {shlex.join(words)} warns (examples build warning-free):\n" + "\n".join(warned)
    proc = _run(run, cwd, env, timeout)
    for pattern in headers.get("expect", []):
        if not any(re.search(pattern, line) for line in proc.stdout.splitlines()):
            pytest.fail(f"{name}: no line of its output matches {pattern!r}\n--- stdout ---\n{proc.stdout}\n"
                        f"--- stderr ---\n{proc.stderr}")
    if not headers.get("expect"):
        assert proc.stdout.strip(), f"{name} printed nothing (declare `expect:` with a line it prints)"
    return proc


# ---- the examples ------------------------------------------------------------------------

ALL = discover()


@pytest.mark.parametrize("name, path", ALL, ids=[n for n, _p in ALL])
def test_example_runs(name, path, tmp_path):
    run_example(name, path, tmp_path)


# Every C and CUDA source of the examples compiles without a warning, with
# -Werror, under each compiler a user may have (the build uses the one
# Python was built with): the examples are code people copy.
def _sources(ending):
    return sorted(os.path.relpath(os.path.join(folder, f), EXAMPLES)
                  for folder, _dirs, files in os.walk(EXAMPLES) for f in files if f.endswith(ending))


C_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC"]      # (build.py's, and -Werror)


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
@pytest.mark.parametrize("source", _sources(".c"))
def test_example_c_compiles_without_warnings(source, compiler, tmp_path):
    cc = shutil.which(compiler)
    if not cc:
        pytest.skip(f"no {compiler}")
    cmd = [cc, "-c", *C_FLAGS, "-I", sysconfig.get_paths()["include"], "-I", pygpu.get_include(),
           os.path.join(EXAMPLES, source), "-o", str(tmp_path / "out.o")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and not r.stderr.strip(), f"{shlex.join(cmd)}\n{r.stderr}"


@pytest.mark.parametrize("source", _sources(".cu"))
def test_example_cuda_compiles_without_warnings(source, tmp_path):
    nvcc = shutil.which("nvcc", path=_search_path(example_env()))
    if not nvcc:
        pytest.skip("no nvcc")
    cmd = [nvcc, "-c", "-O2", "-Werror", "all-warnings", "-Xcompiler", "-fPIC,-Wall,-Wextra,-Werror",
           os.path.join(EXAMPLES, source), "-o", str(tmp_path / "out.o")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and not r.stderr.strip(), f"{shlex.join(cmd)}\n{r.stderr}"


KNOWN = {"ctypes_kernel/", "cupy_handoff.py", "torch_handoff.py", "numba_kernel.py"} | HOST_EXAMPLES


def test_examples_found():
    names = {n for n, _p in ALL}
    assert KNOWN <= names, f"missing: {sorted(KNOWN - names)}"


@pytest.mark.parametrize("name", sorted(KNOWN))
def test_example_headers(name):
    """These examples say which line of output shows they worked, and the
    host examples need no GPU (so they run in CI)."""
    headers = parse_headers(os.path.join(EXAMPLES, name))
    assert headers.get("expect"), f"{name}: no `expect:` header (a line of output the test checks)"
    reqs = set(requirements(headers))
    if name in HOST_EXAMPLES:
        assert not reqs & {"gpu", "cuda", "hip"}, f"{name} must run on the host backend: requires {reqs}"
    else:
        assert reqs & {"gpu", "cuda", "hip"}, f"{name} runs on a GPU: declare it (requires: gpu or cuda)"


@pytest.mark.parametrize("name, path", ALL, ids=[n for n, _p in ALL])
def test_examples_listed_in_readme(name, path):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert f"examples/{name}" in readme, f"README.md does not name examples/{name}"


def test_every_file_in_examples_is_listed_in_examples_readme():
    """examples/README.md's table names every file and folder of examples/."""
    with open(os.path.join(EXAMPLES, "README.md"), encoding="utf-8") as f:
        listed = set(re.findall(r"^\| `([^`]+)` \|", f.read(), re.M))
    present = {name + ("/" if os.path.isdir(os.path.join(EXAMPLES, name)) else "")
               for name in os.listdir(EXAMPLES) if name != "README.md" and not name.startswith((".", "_"))}
    assert present <= listed, f"examples/README.md does not list {sorted(present - listed)}"
    assert listed <= present, f"examples/README.md lists what is not there: {sorted(listed - present)}"


def _help_is_whole(words, doc, env):
    """`words --help` shows every line of `doc` (the program's docstring)."""
    proc = subprocess.run(words + ["--help"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    missing = [line.strip() for line in doc.splitlines() if line.strip() and line.strip() not in proc.stdout]
    assert not missing, f"{shlex.join(words)} --help leaves out: {missing}"


@pytest.mark.parametrize("name", sorted(n for n in HOST_EXAMPLES if n.endswith(".py")))   # (folders: no --help)
def test_example_help_is_whole(name):
    path = os.path.join(EXAMPLES, name)
    with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read()), clean=False)
    _help_is_whole([sys.executable, path], doc, clean_env(PYGPU_BACKEND="host"))


def _size_text(n):
    for unit, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


def _staging_default_on_a_gpu():
    """transfer_config()["min_bytes"] of a GPU backend as built (it needs no
    device), or None where none was built."""
    for name in ("cuda", "hip"):
        if name in pygpu.backends():
            out = subprocess.run([sys.executable, "-c", "import pygpu; print(pygpu.transfer_config()['min_bytes'])"],
                                 capture_output=True, text=True, env=clean_env(PYGPU_BACKEND=name), timeout=120)
            return int(out.stdout.split()[-1])
    return None


def _pooled_get_min():
    """PYGPU_POOLED_GET_MIN of src/tuning.h: get()'s arrays from this size
    come from the page-locked pool."""
    with open(os.path.join(REPO, "src", "tuning.h"), encoding="utf-8") as f:
        m = re.search(r"#define PYGPU_POOLED_GET_MIN \(\(size_t\)(\d+) << (\d+)\)", f.read())
    return int(m.group(1)) << int(m.group(2))


# Sizes the examples quote, each with where the code keeps it: a size quoted
# anywhere else in an example needs an entry here.
QUOTED = {
    ("pinned_memory.py", r"pageable copies of (\d+ [KM]iB) or more"): _staging_default_on_a_gpu,
    ("pinned_memory.py", r"GPUArray\.get\(\) of (\d+ [KM]iB) or more"): _pooled_get_min,
}


def test_sizes_quoted_in_examples_are_the_codes():
    found = set()
    for (name, pattern), source in QUOTED.items():
        with open(os.path.join(EXAMPLES, name), encoding="utf-8") as f:
            text = " ".join(f.read().split())
        m = re.search(pattern, text)
        assert m, f"{name} no longer says {pattern!r}: update QUOTED"
        found.add((name, m.group(1)))
        value = source()
        if value is not None:
            assert m.group(1) == _size_text(value), f"{name} quotes {m.group(1)}, the code has {_size_text(value)}"
    for name, path in ALL:
        if path.endswith(".py"):
            with open(path, encoding="utf-8") as f:
                text = " ".join(f.read().split())
            for size in re.findall(r"(\d+ [KM]iB) or more", text):
                assert (name, size) in found, f"{name} quotes {size} or more: add where the code keeps it to QUOTED"


@pytest.mark.gpu_only
def test_get_returns_page_locked_arrays_from_the_quoted_size():
    """What pinned_memory.py says of get(), on the device."""
    n = _pooled_get_min()
    g = pygpu.zeros(n, np.uint8)
    assert pygpu.is_pinned(g.get())
    assert not pygpu.is_pinned(g[: n - 8].get())


# ---- the runner itself, on made-up examples -----------------------------------------------

def _write(path, text):
    path.write_text(text)
    return str(path)


def test_headers_of_a_file_stop_at_the_code(tmp_path):
    p = _write(tmp_path / "x.py", "#!/usr/bin/env python3\n# requires: gpu, cupy\n\n# run: mpirun -np 2\n"
                                  '"""doc"""\n# expect: not a header\n')
    assert parse_headers(p) == {"requires": ["gpu, cupy"], "run": ["mpirun -np 2"]}
    assert requirements(parse_headers(p)) == ["gpu", "cupy"]


def test_headers_of_a_folder_come_from_its_readme(tmp_path):
    (tmp_path / "d").mkdir()
    _write(tmp_path / "d" / "README.md", "# D\n\n<!--\nrequires: gpu, mpi4py, mpirun, 2 ranks\n"
                                         "run: mpirun python3 main.py\n-->\nText: more.\n")
    h = parse_headers(str(tmp_path / "d"))
    assert h == {"requires": ["gpu, mpi4py, mpirun, 2 ranks"], "run": ["mpirun python3 main.py"]}
    assert discover(str(tmp_path)) == [("d/", str(tmp_path / "d"))]


def test_requirements_judged(monkeypatch):
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    assert missing_requirement("numpy", env) is None                 # a module
    assert missing_requirement("sh", env) is None                    # a command
    assert missing_requirement("2 ranks", env) is None
    assert "not a command" in missing_requirement("no_such_thing_here_x", env)
    assert (missing_requirement("gpu", env) is None) == (pygpu.backend != "host")
    assert (missing_requirement("cuda", env) is None) == (pygpu.backend == "cuda")


def test_mpirun_command(tmp_path):
    """`# run: mpirun -np 2` on a file: Open MPI's flags added, -np kept."""
    p = _write(tmp_path / "mpi_x.py", "# requires: mpi4py, mpirun, 2 ranks\n# run: mpirun -np 2\nprint(1)\n")
    builds, run = commands("mpi_x.py", p, parse_headers(p), {}, open_mpi=True)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert builds == [] and run == ["mpirun", "--oversubscribe"] + root + ["-np", "2", sys.executable, p]
    _b, run = commands("mpi_x.py", p, parse_headers(p), {}, open_mpi=False)      # MPICH: as written
    assert run == ["mpirun", "-np", "2", sys.executable, p]
    p = _write(tmp_path / "mpi_y.py", "# requires: mpirun, 3 ranks\n# run: mpirun\n")
    _b, run = commands("mpi_y.py", p, parse_headers(p), {}, open_mpi=False)      # -np from "3 ranks"
    assert run == ["mpirun", "-np", "3", sys.executable, p]


def test_mpirun_example_runs(tmp_path, monkeypatch):
    """A file with `# run: mpirun -np 2` runs through a stand-in mpirun on
    PATH (one that says it is Open MPI and starts the ranks itself)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mpirun"
    fake.write_text("#!/bin/sh\n"
                    'if [ "$1" = --version ]; then echo "mpirun (Open MPI) 5.0.0"; exit 0; fi\n'
                    'echo "launcher flags: $*"\n'
                    "while [ \"$1\" != -np ]; do shift; done; n=$2; shift 2\n"
                    'i=0; while [ $i -lt $n ]; do RANK=$i "$@" || exit 1; i=$((i+1)); done\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    examples = tmp_path / "examples"
    examples.mkdir()
    p = _write(examples / "mpi_scatter_gather.py",
               "# requires: mpirun, 2 ranks\n# run: mpirun -np 2\n# expect: ^rank 1 of 2: ok\n"
               "import os, pygpu\nprint(f\"rank {os.environ['RANK']} of 2: ok ({pygpu.backend})\")\n")
    proc = run_example("mpi_scatter_gather.py", p, tmp_path)
    assert "--oversubscribe" in proc.stdout
    assert ("--allow-run-as-root" in proc.stdout) == (os.geteuid() == 0)


def test_folder_example_builds_then_runs(tmp_path):
    """A folder: its build lines run first, in a copy of it, then its run line."""
    src = tmp_path / "src"
    (src / "kit").mkdir(parents=True)
    _write(src / "kit" / "README.md", "# Kit\n\n<!--\nrequires: python3\n"
                                      "build: python3 -c \"open('built.txt', 'w').write('made')\"\n"
                                      "run: python3 main.py\nexpect: ^kit: made$\n-->\n")
    _write(src / "kit" / "main.py", "print('kit:', open('built.txt').read())\n")
    work = tmp_path / "work"
    work.mkdir()
    run_example("kit/", str(src / "kit"), work)
    assert (work / "kit" / "built.txt").exists() and not (src / "kit" / "built.txt").exists()


def test_folder_without_run_line_fails_clearly(tmp_path):
    (tmp_path / "mpi").mkdir()
    _write(tmp_path / "mpi" / "README.md", "# MPI\n\nrequires: mpirun\n")
    with pytest.raises(ValueError, match="declares no `run:` line"):
        commands("mpi/", str(tmp_path / "mpi"), parse_headers(str(tmp_path / "mpi")), {})
