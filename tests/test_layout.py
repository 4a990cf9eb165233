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
