"""The A/B between boots: `--sglang-boots N` in a gate run boots every variant N-1 more times, in turns, round by
round (as asv interleaves its processes), and re-measures each of its checked cells on every boot. Every other
round runs the variants in reverse order (A B, B A, A B, ...): a host that drifts slower boot by boot would
otherwise slow the later variant of every round alike, an offset that pairing by round cannot cancel
(benchmarks/bench_ab.py measures both orders).

One boot a variant cannot tell a flag's effect from the boot's own offset (clocks, memory layout, autotuning, what
else the host runs) or from the host's drift between one variant's boot and the next; boots in turns put both in
the spread that gate/ab.py tests against (statistics.paired_boots pairs each round's boots). The re-measures feed
the A/B section only: each cell's verdict is the one its test got on the first boot.

Plain Python (no pytest): the facade (session/facade.py) runs the rounds at the end of the session, after the
tests, and hands the re-measures to the report wing in the run's record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.results_file import CellRecord, measured_cells
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.session.variant_run import VariantRun

Cell = tuple[str, str]
"""(test id, variant)."""


def _round_order(runs: Sequence[VariantRun], boot: int) -> list[VariantRun]:
    """The variants of round `boot`: the tests' own order in odd rounds (the first is the tests'), reversed in even
    ones."""
    return list(runs) if boot % 2 else list(reversed(runs))


class AbRounds:
    def __init__(self, boots: int, reboot: Callable[[VariantRun], None], stop: Callable[[VariantRun], None],
                 measure: Callable[[str, RequestParams], Result], say: Callable[[str], None]) -> None:
        self._boots = boots
        self._reboot = reboot
        self._stop = stop
        self._measure = measure
        self._say = say

    def run(self, runs: Sequence[VariantRun], records: Sequence[CellRecord]) -> dict[Cell, tuple[Result, ...]]:
        """Rounds 2..N over the variants whose cells were measured (none when fewer than two were: there is no
        A/B); each cell's re-measures, in boot order. A variant whose boot or request fails is left out of the
        later rounds, keeping the boots it completed (the A/B pairs the rounds both sides have). A remote server
        (`url`) is not booted by this run, so it takes no round: its A/B stays within one boot."""
        cells = measured_cells(records)
        taking = [run for run in runs if run.boot_error is None and run.plan.url is None
                  and any(v == run.name for _, v in cells)]
        if len(taking) < 2:
            return {}
        more: dict[Cell, list[Result]] = {cell: [] for cell in cells}
        for boot in range(2, self._boots + 1):
            for run in _round_order(taking, boot):
                if not self._round(run, boot, cells, more):
                    taking.remove(run)
        return {cell: tuple(results) for cell, results in more.items() if results}

    def _round(self, run: VariantRun, boot: int, cells: Mapping[Cell, Result],
               more: dict[Cell, list[Result]]) -> bool:
        """One boot of one variant: boot, re-measure its cells, stop. Whether it went through."""
        mine = [(cell, result) for cell, result in cells.items() if cell[1] == run.name]
        self._say(f"[{run.name}] A/B between boots: boot {boot} of {self._boots} ({len(mine)} cell(s))")
        measured: list[tuple[Cell, Result]] = []
        try:
            self._reboot(run)
            measured = [(cell, self._measure(run.name, result.again())) for cell, result in mine]
        except SGLangPerfError as exc:
            self._say(f"[{run.name}] A/B between boots: boot {boot} of {self._boots} failed, so the variant's A/B "
                      f"uses its first {boot - 1} boot(s): {exc}")
            return False
        finally:
            self._stop(run)
        for cell, result in measured:
            more[cell].append(result)
        return True
