"""The session's plans (session/plans.py): a run per variant the collected tests use, in run order; a flag the
pre-flight refuses keeps that variant's server from starting; a gate that cannot measure here says so at once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings, Variant
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.plans import NothingMeasured, SessionPlans

VARIANTS = (Variant("default", ()), Variant("typo", ("--enable-no-such-flag",)), Variant("unused", ()))


def plans(tmp_path: Path, said: list[str], **options: object) -> SessionPlans:
    settings = Settings(source="test", root=tmp_path, model="Qwen/Qwen3-8B", variants=VARIANTS,
                        baseline_dir=tmp_path / "b")
    live = Live(said.append, verbosity=0, heartbeat=0.0, simulated=True)
    return SessionPlans(settings, RunOptions(**options), VARIANTS, live)  # type: ignore[arg-type]


def test_the_runs_are_the_variants_the_tests_use_in_their_order(tmp_path: Path) -> None:
    """Three tests over two variants: two runs, in the order their first test comes, each with its tests."""
    room = plans(tmp_path, [], simulate=True)
    room.collect([("t.py::a[typo]", "typo"), ("t.py::a[default]", "default"), ("t.py::b[typo]", "typo")])
    assert list(room.runs) == ["typo", "default"]
    assert room.runs["typo"].tests == ["t.py::a[typo]", "t.py::b[typo]"]
    assert room.runs["typo"].plan.args == ("--enable-no-such-flag",)


def test_a_flag_the_pre_flight_refuses_is_said_and_kept_in_the_run(tmp_path: Path) -> None:
    """An unknown flag: an error finding said live, and the variant's run carries it (its server never starts)."""
    said: list[str] = []
    room = plans(tmp_path, said, simulate=True)
    room.collect([("t.py::a[default]", "default"), ("t.py::a[typo]", "typo")])
    assert room.runs["default"].preflight_errors == []
    [error] = room.runs["typo"].preflight_errors
    assert "--enable-no-such-flag" in error
    assert any("pre-flight [typo] error" in line for line in said)


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="SGLang is installed here")
def test_without_sglang_a_gate_on_real_sglang_stops_before_anything_runs(tmp_path: Path) -> None:
    """--sglang-require-real on a host without SGLang: NothingMeasured, naming the count, the cause and the fix."""
    room = plans(tmp_path, [], require_real=True)
    assert room.unavailable == "SGLang is not installed"
    with pytest.raises(NothingMeasured, match=r"2 perf test\(s\) cannot run: SGLang is not installed; install it"):
        room.collect([("t.py::a[default]", "default"), ("t.py::b[default]", "default")])


def test_the_simulator_is_always_available(tmp_path: Path) -> None:
    assert plans(tmp_path, [], simulate=True).unavailable is None
