"""The session's use of each measurement's conditions (gate/conditions.py): a regression re-measured under disturbed
conditions is inconclusive, the re-measure waits a bounded time for a calm host first, and a baseline measured under
disturbed conditions is not recorded. `--sglang-ignore-conditions` turns all three off (the readings are still
recorded and shown).

Plain Python (no pytest): the session (session.py) calls it from `check`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.gate.conditions import DisturbedRecording, disturbance, wait_for_calm
from pytest_sglang_perf.measurement.host_load import running_threads, server_processes, usable_cores
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.server.boot import RunningServer


class SessionConditions:
    def __init__(self, limits: ConditionLimits, *, ignore: bool, say: Callable[[str], None]) -> None:
        self.limits = limits
        self._ignore = ignore
        self._say = say

    def why(self, result: Result) -> str | None:
        """Why `result` was measured under disturbed conditions; None when it was not, or conditions are ignored."""
        return None if self._ignore else disturbance(result, self.limits)

    def check_recording(self, test_id: str, result: Result, refused: Callable[[], None]) -> None:
        """Raise DisturbedRecording when `result` may not become a baseline, after calling `refused()` (the session
        keeps the cell for its reports)."""
        why = self.why(result)
        if why is not None:
            refused()
            raise DisturbedRecording(
                f"sglang-perf: the baseline of {test_id} [{result.variant}] was NOT recorded: it was measured under "
                f"disturbed conditions ({why}); re-run when the host is calm, or add --sglang-ignore-conditions to "
                "record it anyway")

    def remeasure(self, first: Result, again: Callable[[], Result], server: RunningServer | None) -> Result:
        """The confirmation re-measure of a regression; when the first measurement was disturbed, after waiting a
        bounded time (settle_timeout) for the rest of the host to calm down."""
        if self.why(first) is not None:
            pids = [*server_processes(None if server is None else server.pid), os.getpid()]
            wait_for_calm(self.limits, self._say, cores=first.host.cores if first.host else usable_cores(),
                          own=lambda: running_threads(pids))
        return again()

    def judge(self, cell: Cell, again: Result) -> Cell:
        """A regression that held on its re-measure stands only when the re-measure's conditions were fine;
        otherwise each regressed metric is inconclusive, with the reason."""
        why = self.why(again)
        if cell.verdict is not Verdict.REGRESSED or why is None:
            return cell
        checks = tuple(replace(c, verdict=Verdict.INCONCLUSIVE) if c.verdict is Verdict.REGRESSED else c
                       for c in cell.checks)
        return replace(cell, checks=checks, disturbed=why)
