"""The session's plans (session/plans.py): a run per variant the collected tests use, in run order; a flag the
pre-flight refuses keeps that variant's server from starting; a gate that cannot measure here says so at once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_sglang_perf.config.run_options import RUN_GPU_HOST, RUN_REAL, RunOptions
from pytest_sglang_perf.config.settings import Settings, Variant
from pytest_sglang_perf.session import INSTALL
from pytest_sglang_perf.session.facade import PerfSession
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.plans import NothingMeasured, SessionPlans

VARIANTS = (Variant("default", ()), Variant("typo", ("--enable-no-such-flag",)), Variant("unused", ()))


def settings(tmp_path: Path) -> Settings:
    return Settings(source="test", root=tmp_path, model="Qwen/Qwen3-8B", variants=VARIANTS,
                    baseline_dir=tmp_path / "b")


def plans(tmp_path: Path, said: list[str], unavailable: str | None = None, **options: object) -> SessionPlans:
    live = Live(said.append, verbosity=0, heartbeat=0.0, simulated=True)
    return SessionPlans(settings(tmp_path), RunOptions(**options), VARIANTS, live, {},  # type: ignore[arg-type]
                        unavailable=unavailable)


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


def test_without_sglang_a_gate_on_real_sglang_stops_before_anything_runs(tmp_path: Path) -> None:
    """--sglang-require-real on a host without SGLang: NothingMeasured, naming the count, the cause and the fix."""
    room = plans(tmp_path, [], "SGLang is not installed", require_real=True)
    with pytest.raises(NothingMeasured, match=r"2 perf test\(s\) cannot run: SGLang is not installed; install it"):
        room.collect([("t.py::a[default]", "default"), ("t.py::b[default]", "default")])


@pytest.mark.parametrize(("run_command", "message"), [
    (RUN_REAL, "sglang-perf run --real: 1 perf test(s) cannot run: SGLang is not installed; install it on this runner "
               f"({INSTALL})"),
    (RUN_GPU_HOST, "sglang-perf run: this host has GPUs (nvidia-smi), so the perf suite runs on SGLang, and 1 perf "
                   f"test(s) cannot run: SGLang is not installed; install it ({INSTALL}), or add --sglang-simulate to "
                   "run them on the simulator"),
])
def test_a_gate_sglang_perf_run_made_names_that_command(tmp_path: Path, run_command: str, message: str) -> None:
    """Not the option the user did not type, and never the simulator to `--real`, which refuses it."""
    room = plans(tmp_path, [], "SGLang is not installed", require_real=True, run_command=run_command)
    with pytest.raises(NothingMeasured) as refused:
        room.collect([("t.py::a[default]", "default")])
    assert str(refused.value) == message


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="SGLang is installed here")
def test_the_session_says_sglang_is_missing_unless_it_runs_the_simulator(tmp_path: Path) -> None:
    """Without SGLang, a real run's perf tests cannot run (and say how to get it); the simulator always can."""
    real = PerfSession(settings(tmp_path), RunOptions(), lambda line: None)
    assert real.unavailable == "SGLang is not installed"
    assert real.skip_reason == ("SGLang is not installed (pip install 'pytest-sglang-perf[sglang]'); run with "
                                "--sglang-simulate to use the simulator instead")
    assert PerfSession(settings(tmp_path), RunOptions(simulate=True), lambda line: None).unavailable is None
