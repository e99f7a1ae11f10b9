"""The A/B between boots (session/ab_rounds.py): rounds in turns, every other one reversed; a failed boot ends its
variant's rounds and keeps the boots it completed; nothing to do without two measured variants."""

from __future__ import annotations

from dataclasses import replace

from report_records import cell, result, variant_run

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.session.ab_rounds import AbRounds
from pytest_sglang_perf.session.variant_run import VariantRun

TEST = "t.py::a"


class Host:
    """Boots and measurements as calls, in order; a boot of `failing` at its `fail_at`th reboot raises."""

    def __init__(self, failing: str | None = None, fail_at: int = 0) -> None:
        self.calls: list[str] = []
        self.failing, self.fail_at = failing, fail_at
        self.reboots: dict[str, int] = {}

    def reboot(self, run: VariantRun) -> None:
        self.reboots[run.name] = self.reboots.get(run.name, 0) + 1
        self.calls.append(f"boot {run.name}")
        if run.name == self.failing and self.reboots[run.name] == self.fail_at:
            raise SGLangPerfError("the server exited during startup")

    def stop(self, run: VariantRun) -> None:
        self.calls.append(f"stop {run.name}")

    def measure(self, name: str, params: RequestParams) -> Result:
        self.calls.append(f"measure {name} x{params.repeats}")
        return replace(result(name), params=params)


def rounds(host: Host, boots: int,
           names: tuple[str, ...] = ("default", "sbo")) -> dict[tuple[str, str], tuple[Result, ...]]:
    runs = [variant_run(name) for name in names]
    records = [CellRecord(cell(TEST, name), result(name)) for name in names]
    said: list[str] = []
    found = AbRounds(boots, host.reboot, host.stop, host.measure, said.append).run(runs, records)
    host.calls.extend(f"said {line}" for line in said if "failed" in line)
    return found


def test_rounds_run_in_turns_every_other_one_reversed() -> None:
    host = Host()
    found = rounds(host, 3)
    steps = [call for call in host.calls if call.startswith("boot")]
    assert steps == ["boot sbo", "boot default", "boot default", "boot sbo"]
    assert host.calls[:3] == ["boot sbo", "measure sbo x4", "stop sbo"]  # the first result's 4 requests, again
    assert {key: len(more) for key, more in found.items()} == {(TEST, "default"): 2, (TEST, "sbo"): 2}


def test_a_failed_boot_ends_that_variants_rounds_and_keeps_its_earlier_boots() -> None:
    host = Host(failing="sbo", fail_at=2)
    found = rounds(host, 4)
    assert [c for c in host.calls if c.startswith("boot")] == [
        "boot sbo", "boot default", "boot default", "boot sbo", "boot default"]
    assert len(found[(TEST, "sbo")]) == 1 and len(found[(TEST, "default")]) == 3
    assert host.calls.count("stop sbo") == 2  # stopped after the failed boot too
    assert any(call.startswith("said [sbo] A/B between boots: boot 3 of 4 failed, so the variant's A/B uses its "
                               "first 2 boot(s)") for call in host.calls)


def test_no_rounds_without_two_measured_variants() -> None:
    host = Host()
    assert rounds(host, 3, names=("default",)) == {} and host.calls == []
