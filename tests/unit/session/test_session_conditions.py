"""The session's use of a measurement's conditions (session/conditions.py): a regression re-measured under disturbed
conditions is inconclusive, a disturbed baseline is refused, and --sglang-ignore-conditions turns both off."""

from __future__ import annotations

import pytest
from report_records import BUSY_HOST, CALM_HOST, LAGGING_CLIENT, check, result, variant_run

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.gate.conditions import DisturbedRecording
from pytest_sglang_perf.measurement.host_load import HostLoad
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.session.conditions import SessionConditions
from pytest_sglang_perf.session.live import Live

BUSY = "host busy: 3.0 other runnable tasks on 2 cores (limit 0.5 per core)"
TEST = "tests/perf/test_p.py::test_a"


def conditions(*, ignore: bool = False, limits: ConditionLimits | None = None,
               heard: list[str] | None = None) -> SessionConditions:
    say = heard.append if heard is not None else (lambda line: None)
    live = Live(say, verbosity=1, heartbeat=0, simulated=True)
    return SessionConditions(limits or ConditionLimits(), ignore=ignore, live=live, simulate=True)


def regressed_cell() -> Cell:
    return Cell(TEST, "default", (check("ttft", Verdict.REGRESSED), check("tpot", Verdict.OK),
                                  check("output_throughput", Verdict.REGRESSED)), True)


@pytest.mark.parametrize(("measured", "why"), [
    (result(host=BUSY_HOST), BUSY),
    (result(host=HostLoad(cores=4, runnable=0.0, busy=0.5, steal=0.4, iowait=0.0, load1=1.0, samples=10)),
     "CPU stolen by the hypervisor: 40% of the time (limit 30%)"),
    (result(client=LAGGING_CLIENT), "the client fell behind: event-loop lag p99 20.0 ms (limit 5 ms)"),
    (result(host=CALM_HOST), None),
    (result(), None),
])
def test_why_names_the_disturbance_or_none(measured: Result, why: str | None) -> None:
    """Why a result was disturbed, by the configured limits; None for a calm or unwatched measurement."""
    assert conditions().why(measured) == why


def test_the_limits_are_the_configured_ones() -> None:
    """Three other tasks on two cores are fine once the limit allows two per core."""
    assert conditions(limits=ConditionLimits(max_others_per_core=2.0)).why(result(host=BUSY_HOST)) is None


def test_ignored_conditions_disturb_nothing() -> None:
    """With --sglang-ignore-conditions no result is disturbed, however busy its host."""
    assert conditions(ignore=True).why(result(host=BUSY_HOST, client=LAGGING_CLIENT)) is None


def test_a_regression_that_held_on_a_disturbed_remeasure_is_inconclusive() -> None:
    """Each regressed metric becomes inconclusive, the others stay, and the cell says why."""
    judged = conditions().judge(regressed_cell(), result(host=BUSY_HOST))
    assert [c.verdict for c in judged.checks] == [Verdict.INCONCLUSIVE, Verdict.OK, Verdict.INCONCLUSIVE]
    assert [c.metric for c in judged.checks] == ["ttft", "tpot", "output_throughput"]
    assert judged.disturbed == BUSY
    assert judged.verdict is Verdict.INCONCLUSIVE


def test_a_regression_on_a_calm_remeasure_stands() -> None:
    """A calm re-measure leaves the regression as it was."""
    judged = conditions().judge(regressed_cell(), result(host=CALM_HOST))
    assert judged == regressed_cell()
    assert judged.verdict is Verdict.REGRESSED and judged.disturbed is None


def test_a_cell_that_did_not_regress_is_left_alone_even_when_disturbed() -> None:
    """Only a regression is made inconclusive: an improved cell keeps its verdict and no reason."""
    improved = Cell(TEST, "default", (check("ttft", Verdict.IMPROVED),), True)
    assert conditions().judge(improved, result(host=BUSY_HOST)) == improved


def test_with_ignored_conditions_a_disturbed_regression_fails() -> None:
    """--sglang-ignore-conditions: the regression stands whatever the re-measure's conditions."""
    judged = conditions(ignore=True).judge(regressed_cell(), result(host=BUSY_HOST))
    assert judged.verdict is Verdict.REGRESSED and judged.disturbed is None


def test_a_disturbed_baseline_is_refused_after_the_session_is_told() -> None:
    """refused() runs once, then DisturbedRecording names the cell, the reason and the way out."""
    refusals: list[str] = []
    with pytest.raises(DisturbedRecording) as raised:
        conditions().check_recording(TEST, result("tp2", host=BUSY_HOST), lambda: refusals.append("refused"))
    assert refusals == ["refused"]
    assert str(raised.value) == (
        f"sglang-perf: the baseline of {TEST} [tp2] was NOT recorded: it was measured under disturbed conditions "
        f"({BUSY}); re-run when the host is calm, or add --sglang-ignore-conditions to record it anyway")


@pytest.mark.parametrize(("ignore", "measured"), [(False, result(host=CALM_HOST)), (True, result(host=BUSY_HOST))])
def test_a_calm_or_ignored_baseline_is_recorded(ignore: bool, measured: Result) -> None:
    """No refusal and no error: the baseline may be recorded."""
    refusals: list[str] = []
    conditions(ignore=ignore).check_recording(TEST, measured, lambda: refusals.append("refused"))
    assert refusals == []


def test_a_calm_first_measurement_is_remeasured_at_once() -> None:
    """No wait and nothing said: the re-measure's own result is returned."""
    heard: list[str] = []
    again = result(e2e=2.0)
    calls: list[Result] = []

    def remeasure() -> Result:
        calls.append(again)
        return again

    assert conditions(heard=heard).remeasure(result(host=CALM_HOST), remeasure, variant_run()) is again
    assert calls == [again] and heard == []


def test_a_disturbed_first_measurement_is_still_remeasured() -> None:
    """After the (bounded) wait for calm the re-measure runs once; a remote server has no GPUs to wait for."""
    again = result(e2e=2.0)
    calls: list[Result] = []

    def remeasure() -> Result:
        calls.append(again)
        return again

    lenient = ConditionLimits(max_others_per_core=1e6, settle_timeout=0.0)  # any host counts as calm: one sample
    found = conditions(limits=lenient).remeasure(result(client=LAGGING_CLIENT), remeasure, variant_run())
    assert found is again and calls == [again]
