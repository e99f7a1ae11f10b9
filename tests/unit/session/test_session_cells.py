"""The session's checked cells (session/cells.py): a first check is new, a recorded baseline gates the next one, a
regression is re-measured (on the same server, or on a fresh boot: session/confirmation.py) and fails only if it
holds, and a recording run writes the entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from report_records import PARAMS, booted, samples, variant_run

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.config.request import CONFIRM_AUTO, CONFIRM_REBOOT, CONFIRM_SAME_SERVER
from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.compare import FRESH_BOOT, SAME_SERVER, Verdict
from pytest_sglang_perf.gate.identity import ServerIdentity
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.server.kept_locks import FileLock
from pytest_sglang_perf.server.launcher import ServerProcess
from pytest_sglang_perf.session.baselines import SessionBaselines
from pytest_sglang_perf.session.cells import SessionCells
from pytest_sglang_perf.session.conditions import SessionConditions
from pytest_sglang_perf.session.confirmation import AUTO_REBOOT_SECONDS, Confirmation
from pytest_sglang_perf.session.identity import ServerPlace
from pytest_sglang_perf.session.kept_use import KeptUse
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun

TEST = "tests/perf/test_x.py::test_x"
KEY = "simulated-1xrtx-a6000__m"
IDENTITY = ServerIdentity(model="m", model_config=None, gpus="1x NVIDIA RTX A6000", args={})


def result(e2e: float = 1.0, boot_seconds: float | None = None, boot: int | None = None) -> Result:
    """Four identical requests (of a remote server: no boot to measure, unless `boot_seconds`, measured on the
    variant's `boot`-th boot): every statistic exact."""
    measured = samples(0.1, e2e)
    values = metric_values(measured, boot_seconds, None)
    return Result("default", PARAMS, "hash", measured, {name: Summary.of(v) for name, v in values.items()},
                  boot_seconds, True, values=values, boot=boot)


class Server:
    """A stand-in for the variant's running server: each measure() gives the next result, and is counted."""

    def __init__(self, *results: Result) -> None:
        self.results = list(results)
        self.asked: list[RequestParams] = []

    def measure(self, name: str, params: RequestParams, decided: Callable[[Result], bool] | None) -> Result:
        self.asked.append(params)
        return self.results.pop(0)


class Reboots:
    """A stand-in for the session's fresh boot: counts the boots, as VariantRun.boots does, and logs the order."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.log: list[str] = []

    def __call__(self, run: VariantRun) -> None:
        run.boots += 1
        self.log.append(f"boot {run.boots} before request {len(self.server.asked) + 1}")


def cells(tmp_path: Path, server: Server, *, update: bool = False, mode: str = CONFIRM_SAME_SERVER,
          reboots: Callable[[VariantRun], None] | None = None, boot_seconds: float = 0.5,
          reused: bool = False) -> SessionCells:
    settings = Settings(source="test", root=tmp_path, model="m", baseline_dir=tmp_path / "baselines")
    options = RunOptions(update_baselines=update, ignore_conditions=True)
    run = variant_run("default")
    run.place = ServerPlace(IDENTITY, KEY)
    if reboots is not None:  # a server this run booted (a process to stop and boot again)
        booted(run, tmp_path / "default.log", boot_seconds=boot_seconds)
        run.process = cast(ServerProcess, object())
        run.boots = 1
    if reused:  # a kept server an earlier run booted (--sglang-reuse): no process of this run
        run.process, run.boots = None, 0
        run.kept = KeptUse("0123456789ab", True, 0.0, 2, FileLock(tmp_path / "use.lock"))
    runs: dict[str, VariantRun] = {"default": run}
    live = Live(lambda line: None, verbosity=0, heartbeat=0.0, simulated=True)
    baselines = SessionBaselines(settings, options, {"sglang": "sim"}, lambda: {})
    conditions = SessionConditions(ConditionLimits(), ignore=True, live=live, simulate=True)
    confirmation = Confirmation(mode, reboots or Reboots(server))
    return SessionCells(options, runs, baselines, conditions, server.measure, [], confirmation)


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
    assert server.asked == [slow.again()] and record.cell.confirmed_on == SAME_SERVER


def test_a_regression_that_the_re_measure_does_not_repeat_is_inconclusive(tmp_path: Path) -> None:
    """Slow once, then back to the baseline's speed: not a regression that holds."""
    cells(tmp_path, Server(), update=True).check(TEST, result())
    record = cells(tmp_path, Server(result())).check(TEST, result(e2e=2.0))
    assert record.cell.verdict is Verdict.INCONCLUSIVE


def test_a_regression_is_re_measured_on_a_fresh_boot_before_it_fails(tmp_path: Path) -> None:
    """confirm = "reboot": the server is booted again, then the same request re-measured on it; a slow first boot
    that the fresh one does not repeat is inconclusive, a slowdown that both boots show holds."""
    cells(tmp_path, Server(), update=True).check(TEST, result())
    server = Server(result())
    reboots = Reboots(server)
    record = cells(tmp_path, server, mode=CONFIRM_REBOOT, reboots=reboots).check(TEST, result(e2e=2.0))
    assert reboots.log == ["boot 2 before request 1"]
    assert record.cell.verdict is Verdict.INCONCLUSIVE and record.cell.confirmed_on == FRESH_BOOT

    server = Server(result(e2e=2.0))
    record = cells(tmp_path, server, mode=CONFIRM_REBOOT, reboots=Reboots(server)).check(TEST, result(e2e=2.0))
    assert record.cell.verdict is Verdict.REGRESSED and record.cell.confirmed_on == FRESH_BOOT


def test_a_regression_on_a_reused_kept_server_is_confirmed_on_a_fresh_boot(tmp_path: Path) -> None:
    cells(tmp_path, Server(), update=True).check(TEST, result())
    server = Server(result())
    reboots = Reboots(server)
    record = cells(tmp_path, server, mode=CONFIRM_REBOOT, reboots=reboots, reused=True).check(TEST, result(e2e=2.0))
    assert reboots.log == ["boot 1 before request 1"]
    assert record.cell.verdict is Verdict.INCONCLUSIVE and record.cell.confirmed_on == FRESH_BOOT


def test_auto_reboots_only_a_server_that_boots_quickly(tmp_path: Path) -> None:
    cells(tmp_path, Server(), update=True).check(TEST, result())
    for boot_seconds, fresh in ((1.0, True), (AUTO_REBOOT_SECONDS + 1, False)):
        server = Server(result(e2e=2.0))
        reboots = Reboots(server)
        record = cells(tmp_path, server, mode=CONFIRM_AUTO, reboots=reboots,
                       boot_seconds=boot_seconds).check(TEST, result(e2e=2.0))
        assert (len(reboots.log), record.cell.confirmed_on) == ((1, FRESH_BOOT) if fresh else (0, SAME_SERVER))


def test_a_boot_metric_is_confirmed_only_by_a_boot(tmp_path: Path) -> None:
    """boot_seconds regressed (same requests): on the same server, its re-measure would repeat the boot's value, so
    even confirm = "same-server" boots again for it, and the fresh boot's own value decides."""
    cells(tmp_path, Server(), update=True).check(TEST, result(boot_seconds=10.0))
    server = Server(result(boot_seconds=10.0, boot=2))
    reboots = Reboots(server)
    room = cells(tmp_path, server, mode=CONFIRM_SAME_SERVER, reboots=reboots, boot_seconds=30.0)
    record = room.check(TEST, result(boot_seconds=30.0, boot=1))
    assert reboots.log == ["boot 2 before request 1"] and record.cell.confirmed_on == FRESH_BOOT
    assert record.cell.verdict is Verdict.INCONCLUSIVE  # the fresh boot took 10 s: a slow boot, not a change


def test_a_boot_regression_that_held_confirms_the_next_cell_by_the_boot_before(tmp_path: Path) -> None:
    """Boots that take 30 s against 10 s recorded: the first cell's fresh boot (2) holds it; the next cell, measured
    on boot 2, is confirmed by boot 1 (its requests re-measured on the same server), no boot more."""
    for test in (TEST, TEST + "_2"):
        cells(tmp_path, Server(), update=True).check(test, result(boot_seconds=10.0))
    server = Server(result(boot_seconds=30.0, boot=2), result(boot_seconds=30.0, boot=2))
    reboots = Reboots(server)
    room = cells(tmp_path, server, mode=CONFIRM_SAME_SERVER, reboots=reboots, boot_seconds=30.0)
    first = room.check(TEST, result(boot_seconds=30.0, boot=1))
    second = room.check(TEST + "_2", result(boot_seconds=30.0, boot=2))
    assert reboots.log == ["boot 2 before request 1"]
    assert (first.cell.verdict, first.cell.confirmed_on) == (Verdict.REGRESSED, FRESH_BOOT)
    assert (second.cell.verdict, second.cell.confirmed_on) == (Verdict.REGRESSED, SAME_SERVER)
    [boot_check] = [c for c in second.cell.confirmation or () if c.metric == "boot_seconds"]
    assert boot_check.measured == 30.0 and boot_check.verdict is Verdict.REGRESSED  # boot 1's, judged for this cell


def test_a_cell_measured_before_a_reboot_is_re_measured_on_the_new_boot_without_another(tmp_path: Path) -> None:
    """A sweep's second level, measured on boot 1, checked after the first level's confirmation booted boot 2: its
    re-measure runs on boot 2, a fresh boot already (no boot more); its own boot's value never confirms it."""
    for test in (TEST, TEST + "@c2"):
        cells(tmp_path, Server(), update=True).check(test, result(boot_seconds=10.0))
    server = Server(result(boot_seconds=10.0, boot=2), result(boot_seconds=10.0, boot=2))
    reboots = Reboots(server)
    room = cells(tmp_path, server, mode=CONFIRM_SAME_SERVER, reboots=reboots, boot_seconds=30.0)
    room.check(TEST, result(boot_seconds=30.0, boot=1))
    level = room.check(TEST + "@c2", result(boot_seconds=30.0, boot=1))
    assert reboots.log == ["boot 2 before request 1"]
    assert (level.cell.verdict, level.cell.confirmed_on) == (Verdict.INCONCLUSIVE, FRESH_BOOT)


def test_a_re_measure_that_cannot_be_made_keeps_the_cell_and_raises(tmp_path: Path) -> None:
    """The fresh boot fails: the error goes to the test (its message is the boot's report); the cell measured is
    kept in the records, with its verdict as measured."""
    cells(tmp_path, Server(), update=True).check(TEST, result())

    def failing(run: VariantRun) -> None:
        raise SGLangPerfError("the fresh boot to confirm a regression on failed")

    room = cells(tmp_path, Server(), mode=CONFIRM_REBOOT, reboots=failing)
    with pytest.raises(SGLangPerfError, match="fresh boot"):
        room.check(TEST, result(e2e=2.0, boot=1))
    [kept] = room.records
    assert kept.cell.verdict is Verdict.REGRESSED and kept.confirmation is None


def test_against_a_one_boot_baseline_two_boots_far_apart_establish_no_regression(tmp_path: Path) -> None:
    """Twice as slow on the first boot, 1.5 times on the fresh one: worse on both, but two boots that far apart do
    not establish a change against a baseline of one boot (gate/across_boots.py); two that agree do."""
    cells(tmp_path, Server(), update=True).check(TEST, result())
    server = Server(result(e2e=1.5, boot=2))
    record = cells(tmp_path, server, mode=CONFIRM_REBOOT, reboots=Reboots(server)).check(TEST, result(e2e=2.0, boot=1))
    assert record.cell.verdict is Verdict.INCONCLUSIVE
    [again] = [c for c in record.cell.confirmation or () if c.metric == "output_throughput"]
    assert again.change is not None and again.change < -0.3 and again.note is not None
    assert "the two boots differ too much" in again.note

    server = Server(result(e2e=2.02, boot=2))
    record = cells(tmp_path, server, mode=CONFIRM_REBOOT, reboots=Reboots(server)).check(TEST, result(e2e=2.0, boot=1))
    assert record.cell.verdict is Verdict.REGRESSED
