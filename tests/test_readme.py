"""README.md holds to the code: every ```python block runs (on the backend
in use), it stays short (at most 250 lines: the rest lives in docs/), and
the commands it gives for installing and testing are the ones CI runs."""
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
TEXT = open(README, encoding="utf-8").read()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)
MAX_LINES = 250


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(code, capsys):
    exec(compile(code, "README.md", "exec"), {})


def test_readme_has_python_blocks():
    assert BLOCKS


def test_readme_is_short():
    n = TEXT.count("\n")
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}: move the detail into docs/)"


def _commands(section):
    """The command lines of the ``` blocks of the README's `## section`
    (comments after `#` left out)."""
    body = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(section), TEXT, re.S | re.M)
    assert body, f"README.md has no '## {section}' section"
    blocks = re.findall(r"```\n(.*?)```", body.group(1), re.S)
    return [line.split(" #")[0].strip() for b in blocks for line in b.splitlines() if line.strip()]


def test_ci_runs_the_readme_commands():
    """.ci/run runs the README's install, the default test run and the long
    runs, each as a line of its own."""
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = {line.strip() for line in f}
    commands = _commands("Install") + _commands("Tests and development")
    assert "python3 -m pytest" in commands and "python3 -m pytest -m slow" in commands, commands
    missing = [c for c in commands if c not in ci]
    assert not missing, f".ci/run does not run the README's {missing}"
