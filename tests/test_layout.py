"""The source tree keeps the shape docs/layout.md draws: every C file opens
by naming itself and its concern and is placed in the map; calls run
downward (no ring of files calling each other, the map's rows in an order
the calls respect); no file reaches into another's mutable globals; each
file includes the header of every file it calls; and the ledger holds
(the environment read in one place and listed in one table, tuned
constants in one header).  A file past 800 lines is a warning: a reason to
look for a second concern, never to cut by size."""
import os
import re
import shutil
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
MAX_LINES = 800


def sources(exts):
    if not os.path.isdir(SRC):
        pytest.skip("not a source checkout")
    found = []
    for folder, _, files in os.walk(SRC):
        found += [os.path.join(folder, f) for f in files if f.endswith(exts)]
    assert found
    return sorted(found)


def test_every_file_opens_with_its_name_and_concern():
    for path in sources((".c", ".h", ".cu")):
        with open(path) as f:
            first, second = f.readline(), f.readline()
        name = os.path.basename(path)
        assert first.strip() == "/*" and second.startswith(f" * {name} -- "), (path, second)
        assert len(second.split(" -- ", 1)[1].strip()) > 10, path


def test_every_c_file_is_in_the_map():
    with open(os.path.join(ROOT, "docs", "layout.md")) as f:
        text = f.read()
    for path in sources((".c", ".cu")):
        name = os.path.basename(path)
        rel = os.path.relpath(path, ROOT)
        under_src = os.path.relpath(path, SRC)
        assert f"`{name}`" in text or f"`{rel}`" in text or f"`{under_src}`" in text, \
            f"{rel} is not placed in docs/layout.md"


def test_long_files_are_named():
    """Files past 800 lines are named in a warning (and none is past 1500,
    where one file surely holds several concerns)."""
    for path in sources((".c", ".h")):
        with open(path) as f:
            n = sum(1 for _ in f)
        rel = os.path.relpath(path, ROOT)
        if n > MAX_LINES:
            warnings.warn(f"{rel} has {n} lines: does it hold more than one concern?")
        assert n <= 1500, f"{rel} has {n} lines"


# ---- floors: the calls between files, read from the object files ----

# NumPy's C-API table: written once by import_array at module init (state.c)
# and read by every file that calls NumPy, by NumPy's own design.
NUMPY_API = {"pygpu_ARRAY_API", "pygpu_ARRAY_APIPyArray_RUNTIME_VERSION"}


@pytest.fixture(scope="module")
def graph():
    if not os.path.isdir(SRC):
        pytest.skip("not a source checkout")
    if not (shutil.which("nm") and (os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc"))):
        pytest.skip("needs a C compiler and nm")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import callgraph
    finally:
        sys.path.pop(0)
    g = callgraph.graph(ROOT)
    g["rings"] = callgraph.rings(g["edges"])
    return g


def calls(graph):
    """(caller, callee) for every call from one file to another."""
    return [(a, b) for a, outs in graph["edges"].items() for b in outs if a != b]


def test_the_graph_sees_every_file(graph):
    assert len(graph["files"]) >= 50
    assert ("src/array_host.c", "src/copy/copy.c") in calls(graph)     # (it reads the objects' symbols)


def test_no_ring_of_files_calling_each_other(graph):
    assert not graph["rings"], "files that call each other in a ring: " + "; ".join(
        " <-> ".join(r) for r in graph["rings"])


def test_no_file_uses_another_files_mutable_globals(graph):
    shared = [f"{user} uses {owner}'s {name}" for owner, name, user in graph["shared_data"] if name not in NUMPY_API]
    assert not shared, shared


def header_of(src):
    """The header that declares `src`'s functions, or None."""
    h = src[:-2] + ".h"
    return h if os.path.exists(os.path.join(ROOT, h)) else None


def included(src):
    """The project headers `src` includes directly, as paths from the root."""
    found = set()
    with open(os.path.join(ROOT, src)) as f:
        for inc in re.findall(r'^#include "([^"]+)"', f.read(), re.M):
            for base in (os.path.dirname(src), "src"):
                p = os.path.normpath(os.path.join(base, inc))
                if os.path.exists(os.path.join(ROOT, p)):
                    found.add(p)
                    break
    return found


def test_each_file_includes_the_header_of_each_file_it_calls(graph):
    missing = []
    for a, b in calls(graph):
        h = header_of(b)
        if h and h not in included(a):
            missing.append(f"{a} calls {b} but does not include {h}")
    assert not missing, missing


def test_the_maps_rows_respect_the_calls(graph):
    """docs/layout.md lists the C files in floor order: each file's row
    comes after the rows of every file it calls."""
    text = read(os.path.join("docs", "layout.md"))
    row = {}
    for i, line in enumerate(l for l in text.splitlines() if l.startswith("|")):
        for name in re.findall(r"`([\w/]+\.c)`", line):
            row.setdefault("src/" + name, i)
    missing = sorted(set(graph["files"]) - set(row))
    assert not missing, f"not in docs/layout.md's table: {missing}"
    upward = [f"{a} (row {row[a]}) calls {b} (row {row[b]})" for a, b in calls(graph) if row[b] > row[a]]
    assert not upward, upward


# ---- one ledger: the environment read in one place, listed in one table; tuned constants in one header ----


DOCS = os.path.join(ROOT, "docs")
ENV_FILE = os.path.join("src", "env.c")
# The vendors' own variables (CUDA_VISIBLE_DEVICES and the like) belong to
# their runtimes: the GPU backend reads them where it explains a missing
# device, and that one file may call getenv besides env.c.
VENDOR_GETENV = {os.path.join("src", "backend", "diagnose_gpu.c"): "the vendors' *_VISIBLE_DEVICES, in VISIBLE_VARS"}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def c_env_names():
    """Every variable the C sources read: getenv's literal arguments, and the
    vendor lists that diagnose_gpu.c hands to getenv."""
    names = set()
    for path in sources((".c", ".h")):
        text = read(os.path.relpath(path, ROOT))
        names |= set(re.findall(r'\bgetenv\(\s*"([A-Z0-9_]+)"\s*\)', text))
        for listed in re.findall(r"#\s*define\s+VISIBLE_VARS\s*\{([^}]*)\}", text):
            names |= set(re.findall(r'"([A-Z0-9_]+)"', listed))
    return names


def py_env_names():
    """Every variable pygpu/ reads through os.environ (a literal name, or a
    loop over a tuple of them)."""
    names = set()
    folder = os.path.join(ROOT, "pygpu")
    for f in sorted(os.listdir(folder)):
        if f.endswith(".py"):
            text = read(os.path.join("pygpu", f))
            names |= set(re.findall(r"""environ(?:\.get)?\s*[\[(]\s*["']([A-Z0-9_]+)["']""", text))
            for var, listed in re.findall(r"for (\w+) in \(([^)]*)\):\s*\n\s*\w+ = os\.environ\.get\(\1\)", text):
                names |= set(re.findall(r'"([A-Z0-9_]+)"', listed))
    return names


def env_table():
    """name -> the files its row says read it (docs/environment.md)."""
    rows = {}
    for line in read(os.path.join("docs", "environment.md")).splitlines():
        m = re.match(r"\|\s*`([A-Z0-9_]+)`\s*\|(.*)\|\s*$", line)
        if m:
            cells = m.group(2).split("|")
            assert len(cells) == 3, line
            rows[m.group(1)] = re.findall(r"`([\w./-]+\.(?:c|py))`", cells[2])
    assert rows
    return rows


def test_every_variable_read_is_in_the_environment_table():
    table = env_table()
    read_names = c_env_names() | py_env_names()
    assert {"PYGPU_BACKEND", "PYGPU_HOST_DEVICES", "CUDA_VISIBLE_DEVICES"} <= read_names   # (the parsers see them)
    missing = sorted(read_names - set(table))
    assert not missing, f"read but not in docs/environment.md: {missing}"


def test_every_variable_in_the_table_is_read_where_it_says():
    for name, files in env_table().items():
        assert files, f"{name}: its row names no file that reads it"
        found = []
        for rel in files:
            assert os.path.exists(os.path.join(ROOT, rel)), f"{name}: {rel} does not exist"
            found += [rel] if re.search(r"""["']%s["']""" % name, read(rel)) else []
        assert found, f"{name}: none of {files} reads it"


def test_getenv_only_in_the_env_file():
    calls = {}
    for path in sources((".c", ".h")):
        rel = os.path.relpath(path, ROOT)
        text = read(rel)
        if re.search(r"\b(?:secure_)?getenv\s*\(|\benviron\b", text):
            calls[rel] = text
    assert ENV_FILE in calls
    assert set(calls) - {ENV_FILE} <= set(VENDOR_GETENV), f"getenv outside {ENV_FILE}: {sorted(calls)}"
    for rel in set(calls) & set(VENDOR_GETENV):
        assert not re.search(r'\bgetenv\(\s*"', calls[rel]), f"{rel} may read only {VENDOR_GETENV[rel]}"
        assert "PYGPU_" not in "".join(re.findall(r"#\s*define\s+VISIBLE_VARS[^\n]*", calls[rel]))


def slug(heading):
    """The anchor a Markdown heading gets (GitHub's rule)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def performance_anchors():
    text = read(os.path.join("docs", "performance.md"))
    return {slug(h) for h in re.findall(r"^#+\s+(.*)$", text, re.M)}


def test_tuning_header_gives_each_constant_a_reason_and_a_section():
    lines = read(os.path.join("src", "tuning.h")).splitlines()
    anchors = performance_anchors()
    defined = 0
    for i, line in enumerate(lines):
        m = re.match(r"#define\s+(PYGPU_\w+)\s+\S", line)
        if not m:
            continue
        defined += 1
        comment = lines[i - 1].strip()
        assert comment.startswith("/*") and comment.endswith("*/"), f"{m.group(1)}: no one-line reason above it"
        ref = re.search(r"See performance\.md#([\w-]+) \*/$", comment)
        assert ref, f"{m.group(1)}: its reason names no section of docs/performance.md"
        assert len(comment[:ref.start()].strip("/* .")) > 15, f"{m.group(1)}: its reason is too short"
        assert ref.group(1) in anchors, f"{m.group(1)}: docs/performance.md has no section #{ref.group(1)}"
    assert defined >= 30


def test_code_points_only_to_sections_that_exist():
    anchors = performance_anchors()
    for path in sources((".c", ".h")):
        rel = os.path.relpath(path, ROOT)
        for anchor in re.findall(r"performance\.md#([\w-]+)", read(rel)):
            assert anchor in anchors, f"{rel} points to docs/performance.md#{anchor}, which does not exist"
