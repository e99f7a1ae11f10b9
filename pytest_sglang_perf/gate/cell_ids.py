"""A cell's test id: the pytest node id without the variant's parameter, the key of the test's baselines."""

from __future__ import annotations

import re

_LEVEL = re.compile(r"@c(?:\d+|max)$")


def strip_variant(nodeid: str, variant: str) -> str:
    """`tests/perf/test_p.py::test_x[default]` -> `tests/perf/test_p.py::test_x`; a test with parameters of its own
    keeps them: `...::test_x[512-default]` -> `...::test_x[512]`."""
    for suffix, replacement in ((f"[{variant}]", ""), (f"-{variant}]", "]")):
        if nodeid.endswith(suffix):
            return nodeid[: -len(suffix)] + replacement
    return nodeid


def collected_test(test_id: str) -> str:
    """The collected test a cell belongs to: a concurrency level's cell (`...::test_x@c16`, measurement/concurrency.py)
    belongs to `...::test_x`; any other cell is its test."""
    return _LEVEL.sub("", test_id)
