"""The session's use of each measurement's conditions (gate/conditions.py): a regression re-measured under disturbed
conditions is inconclusive, the re-measure waits a bounded time for a calm host first, and a baseline measured under
disturbed conditions is not recorded. `--sglang-ignore-conditions` turns all three off (the readings are still
recorded and shown). It also watches each measurement (the host, and the server's GPUs where NVML can read them)
and, before a variant's first measurement, says what is already wrong (pre-measurement check, precheck.py).

Plain Python (no pytest): the session (session/facade.py) calls it from `check`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.gate.conditions import DisturbedRecording, disturbance, wait_for_calm, withheld_text
from pytest_sglang_perf.gate.environment import detect_gpus
from pytest_sglang_perf.gate.precheck import precheck
from pytest_sglang_perf.measurement.gpu_watch import ServerGpus, server_gpus
from pytest_sglang_perf.measurement.host_load import running_threads, server_processes, usable_cores
from pytest_sglang_perf.measurement.nvml import Nvml, open_nvml
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.watch import ConditionsWatch
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun


class SessionConditions:
    def __init__(self, limits: ConditionLimits, *, ignore: bool, live: Live, simulate: bool) -> None:
        self.limits = limits
        self._ignore = ignore
        self._live = live
        self._say = live.note
        self._simulate = simulate
        self._checked: set[str] = set()
        self._said: set[str] = set()

    def watch(self, run: VariantRun) -> ConditionsWatch:
        """Around a measurement on the variant's server; the variant's first is preceded by the pre-measurement
        check (and, with `wait_before_measuring`, a bounded wait for calm), unless conditions are ignored."""
        assert run.server is not None
        pids = server_processes(run.server.pid)
        gpus = self._server_gpus(run, pids)
        if run.name not in self._checked and not self._ignore:
            self._checked.add(run.name)
            precheck(self.limits, self._say, name=run.name, pids=[*pids, os.getpid()], gpus=gpus)
        return ConditionsWatch(pids, gpus, failed=self._say_once)

    def _server_gpus(self, run: VariantRun, pids: list[int]) -> tuple[Nvml, ServerGpus] | None:
        """The variant's server's GPUs, to be read through NVML; None for a remote server, a simulated one that
        holds no GPU claim, a CPU server, or when NVML cannot be read (said once, when the host has GPUs)."""
        if not pids or (self._simulate and run.claim is None) or self._nvml is None:
            return None
        assert run.server is not None
        visible = run.server.plan.env.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
        try:
            found = server_gpus(self._nvml, pids, os.getpid(), visible, () if self._simulate else run.default_gpus)
        except Exception as exc:  # NVML refused (a GPU this job may not see): the measurement goes on without
            self._say_once(f"the GPUs' conditions are not recorded: NVML failed ({type(exc).__name__}: {exc})")
            return None
        if found is None:
            self._say_once(f"[{run.name}] the GPUs' conditions are not recorded: NVML lists no process of the server "
                           "on any GPU (a CPU server, or its pids are in another pid namespace) and its "
                           "CUDA_VISIBLE_DEVICES names none", say=self._live.detail)
        return None if found is None else (self._nvml, found)

    def _say_once(self, message: str, say: Callable[[str], None] | None = None) -> None:
        """Say it the first time only (a broken NVML, a server on no GPU: not once per measurement)."""
        if message not in self._said:
            self._said.add(message)
            (say or self._say)(message)

    @cached_property
    def _nvml(self) -> Nvml | None:
        nvml, why = open_nvml()
        if nvml is None:
            say = self._live.note if not self._simulate and detect_gpus().names else self._live.detail
            say(f"the GPUs' conditions (clocks, throttling, other processes) are not recorded: {why}")
        return nvml

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
                f"sglang-perf: the baseline of {test_id} [{result.variant}] was NOT recorded: it was "
                f"{withheld_text(why)}")

    def remeasure(self, first: Result, again: Callable[[], Result], run: VariantRun) -> Result:
        """The confirmation re-measure of a regression; when the first measurement was disturbed, after waiting a
        bounded time (settle_timeout) for the rest of the host to calm down and the server's GPUs to clear."""
        if self.why(first) is not None:
            pids = [*server_processes(None if run.server is None else run.server.pid), os.getpid()]
            wait_for_calm(self.limits, self._say, cores=first.host.cores if first.host else usable_cores(),
                          own=lambda: running_threads(pids))
            gpus = self._server_gpus(run, pids[:-1]) if run.server is not None else None
            if gpus is not None:  # the host was waited for just now: the GPUs alone, within the same bound
                precheck(replace(self.limits, wait_before_measuring=self.limits.settle_timeout), self._say,
                         name=run.name, pids=pids, gpus=gpus, when="before the re-measure", host=False)
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
