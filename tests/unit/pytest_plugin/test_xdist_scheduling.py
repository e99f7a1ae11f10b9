"""pytest-xdist's variant scopes (pytest_plugin/xdist_scheduling.py): a perf test's node id names its variant's
work unit, so that a variant's tests go to one worker; every other test keeps the unit its --dist mode gives it."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.pytest_plugin.xdist_scheduling import variant_scope


@pytest.mark.parametrize(("nodeid", "scope"), [
    ("tests/perf/test_p.py::test_x[tp2]", "tp2"),
    ("tests/perf/test_p.py::test_x[512-tp2]", "tp2"),
    ("tests/perf/test_p.py::Test::test_x[default]@default", "default"),
    ("tests/perf/test_p.py::test_x[tp2x]", None),
    ("tests/unit/test_a.py::test_b", None),
    ("tests/unit/test_a.py::test_b[a@b]", None),
])
def test_a_perf_test_is_scheduled_with_its_variant(nodeid: str, scope: str | None) -> None:
    assert variant_scope(nodeid, ["default", "tp2"]) == scope
