"""The session's checked cells (session/cells.py): a first check is new, a recorded baseline gates the next one, a
regression is re-measured on the same server and fails only if it holds, and a recording run writes the entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from report_records import PARAMS, samples, variant_run

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.gate.identity import ServerIdentity
from pytest_sglang_perf.measurement.result import RequestParams, Result
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.session.baselines import SessionBaselines
from pytest_sglang_perf.session.cells import SessionCells
from pytest_sglang_perf.session.conditions import SessionConditions
from pytest_sglang_perf.session.identity import ServerPlace
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun

TEST = "tests/perf/test_x.py::test_x"
KEY = "simulated-1xrtx-a6000__m"
IDENTITY = ServerIdentity(model="m", model_config=None, gpus="1x NVIDIA RTX A6000", args={})


def result(e2e: float = 1.0) -> Result:
    """Four identical requests of a remote server (no boot to measure): every statistic exact."""
    measured = samples(0.1, e2e)
    values = metric_values(measured, None, None)
    return Result("default", PARAMS, "hash", measured, {name: Summary.of(v) for name, v in values.items()}, None,
                  True, values=values)


class Server:
    """A stand-in for the variant's running server: each measure() gives the next result, and is counted."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results)
        self.asked: list[RequestParams] = []

    def measure(self, name: str, params: RequestParams, decided: Callable[[Result], bool] | None) -> Result:
        self.asked.append(params)
        return self.results.pop(0)


def cells(tmp_path: Path, server: Server, *, update: bool = False) -> SessionCells:
    settings = Settings(source="test", root=tmp_path, model="m", baseline_dir=tmp_path / "baselines")
    options = RunOptions(update_baselines=update, ignore_conditions=True)
    run = variant_run("default")
    run.place = ServerPlace(IDENTITY, KEY)
    runs: dict[str, VariantRun] = {"default": run}
    live = Live(lambda line: None, verbosity=0, heartbeat=0.0, simulated=True)
    baselines = SessionBaselines(settings, options, {"sglang": "sim"}, lambda: {})
    conditions = SessionConditions(ConditionLimits(), ignore=True, live=live, simulate=True)
    return SessionCells(options, runs, baselines, conditions, server.measure, [])


def test_a_cell_without_a_baseline_is_new_and_kept(tmp_path: Path) -> None:
    """No baseline file yet: the verdict is new, and the record keeps the result it was judged on."""
    measured = result()
    room = cells(tmp_path, Server())
    record = room.check(TEST, measured)
    assert record.cell.verdict is Verdict.NEW and record.result is measured
    assert room.records == [record]


def test_a_recording_run_writes_the_entry_and_the_next_run_gates_on_it(tmp_path: Path) -> None:
    """Recorded, then the same numbers are ok; twice as slow end to end is a regression that the re-measure
    confirms, on the same server, with the same request."""
    recorded = cells(tmp_path, Server(), update=True).check(TEST, result())
    assert recorded.cell.updated and (tmp_path / "baselines" / f"{KEY}.json").is_file()
    assert cells(tmp_path, Server()).check(TEST, result()).cell.verdict is Verdict.OK
    slow, again = result(e2e=2.0), result(e2e=2.0)
    server = Server(again)
    record = cells(tmp_path, server).check(TEST, slow)
    assert record.cell.verdict is Verdict.REGRESSED and record.confirmation is again
    assert server.asked == [slow.again()]


def test_a_regression_that_the_re_measure_does_not_repeat_is_inconclusive(tmp_path: Path) -> None:
    """Slow once, then back to the baseline's speed: not a regression that holds."""
    cells(tmp_path, Server(), update=True).check(TEST, result())
    record = cells(tmp_path, Server(result())).check(TEST, result(e2e=2.0))
    assert record.cell.verdict is Verdict.INCONCLUSIVE
