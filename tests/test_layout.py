"""The source tree keeps the shape docs/layout.md draws: every C file opens
by naming itself and its concern, every one is placed in the map, and none
grows past 800 lines (beyond that a file holds more than one concern)."""
import os

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
        assert f"`{name}`" in text or f"`{rel}`" in text, f"{rel} is not placed in docs/layout.md"


def test_no_file_over_800_lines():
    for path in sources((".c", ".h")):
        with open(path) as f:
            n = sum(1 for _ in f)
        assert n <= MAX_LINES, f"{os.path.relpath(path, ROOT)} has {n} lines"


# ---- one ledger: the environment read in one place, listed in one table; tuned constants in one header ----

import re  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
ENV_FILE = os.path.join("src", "env.c")
# The vendors' own variables (CUDA_VISIBLE_DEVICES and the like) belong to
# their runtimes: the GPU backend reads them where it explains a missing
# device, and that one file may call getenv besides env.c.
VENDOR_GETENV = {os.path.join("src", "backend", "rt_gpu.c"): "the vendors' *_VISIBLE_DEVICES, in VISIBLE_VARS"}


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def c_env_names():
    """Every variable the C sources read: getenv's literal arguments, and the
    vendor lists that rt_gpu.c hands to getenv."""
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
