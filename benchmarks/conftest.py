"""Benchmarks: `python -m pytest benchmarks` (pytest-benchmark).

Peers (CuPy, PyTorch) are measured in the same run when they import and a GPU
is present, so that ratios compare like with like.
"""
import importlib

import pytest

import pygpu


def peer(name):
    """The peer module `name`, or skip: not installed, or no GPU to run it on."""
    if pygpu.backend == "host":
        pytest.skip("peers are compared on a GPU backend only")
    try:
        return importlib.import_module(name)
    except Exception as e:  # any import failure means the peer is not usable here
        pytest.skip(f"{name} not usable: {e}")


def median_seconds(benchmark):
    """The median time of the benchmark just run, or None where timing is off
    (`--benchmark-disable` runs each benchmark once, as a plain test)."""
    stats = getattr(benchmark, "stats", None)
    return stats.stats.median if stats else None
