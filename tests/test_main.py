"""`python -m pygpu`, the main job: it runs, reports the backend and devices,
passes its round trip, and prints the throughput table."""
import re
import subprocess
import sys


def test_main_job(run_python):
    r = run_python("import runpy, sys; sys.argv = ['pygpu', '--repeats', '1']; "
                   "runpy.run_module('pygpu', run_name='__main__')",
                   env={"PYGPU_BACKEND": __import__("pygpu").backend})
    out = r.stdout
    assert r.returncode == 0, r.stderr + out
    assert re.search(r"^backend: \w+ \(built: .*host", out, re.M)
    assert re.search(r"^devices: [1-9]", out, re.M)
    assert "round trip host -> device -> device -> host, 8 MiB: ok" in out
    rows = re.findall(r"^\s+\d+ MiB((?:\s+\d+\.\d)+)$", out, re.M)
    assert len(rows) == 3 and all(len(r.split()) == 4 for r in rows)
    assert all(float(x) > 0 for r in rows for x in r.split())


def test_main_job_help():
    r = subprocess.run([sys.executable, "-m", "pygpu", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--no-bench" in r.stdout
