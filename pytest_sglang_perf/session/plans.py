"""The session's plans: one VariantRun per variant its tests use, each with its server's plan, and the pre-flight
check of their flags before any server starts; whether SGLang can run here at all.

Plain Python (no pytest): the facade (session/facade.py) hands it the collected tests; the runs it makes are the
records every other room of the session updates.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property

from pytest_sglang_perf.config.run_options import RUN_GPU_HOST, RUN_REAL, RunOptions
from pytest_sglang_perf.config.settings import Settings, Variant
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.environment import detect_gpus
from pytest_sglang_perf.gate.store import check_baseline_dir
from pytest_sglang_perf.server.plan import plan_server
from pytest_sglang_perf.server.preflight import Level, check_plans
from pytest_sglang_perf.server.sim_knobs import simulated_version
from pytest_sglang_perf.server.target_gpus import TargetGpus, target_gpus
from pytest_sglang_perf.session import INSTALL
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.parsers import ArgParser, choose_parser


class NothingMeasured(SGLangPerfError):
    """A gate run (--sglang-require-real) whose perf tests cannot run here: the message says why and the fix."""


def cannot_run(count: int, unavailable: str, run_command: str | None) -> str:
    """A gate run's refusal: what made it a gate (the option, or the `sglang-perf run` that was typed), why its perf
    tests cannot run, and the fixes that gate allows (never the simulator for --real, which refuses it)."""
    tests = f"{count} perf test(s) cannot run: {unavailable}"
    if run_command == RUN_REAL:
        return f"sglang-perf run --real: {tests}; install it on this runner ({INSTALL})"
    if run_command == RUN_GPU_HOST:
        return (f"sglang-perf run: this host has GPUs (nvidia-smi), so the perf suite runs on SGLang, and {tests}; "
                f"install it ({INSTALL}), or add --sglang-simulate to run them on the simulator")
    return (f"sglang-perf: --sglang-require-real: {tests}; install it on this runner ({INSTALL}), or drop "
            "--sglang-require-real to let them skip")


class SessionPlans:
    def __init__(self, settings: Settings, options: RunOptions, variants: Sequence[Variant], live: Live,
                 runs: dict[str, VariantRun], *, unavailable: str | None) -> None:
        self._settings = settings
        self._options = options
        self._variants = variants
        self._live = live
        self.runs = runs
        """The variants the session's tests use, in run order (the session's own record, filled here)."""
        self.unavailable = unavailable
        """Why no variant can run here (the session tells), or None."""

    @cached_property
    def parser(self) -> ArgParser:
        """SGLang's flags as the installed version (or the simulator, in the release it plays) parses them."""
        if not self._options.simulate:
            return choose_parser(simulate=False)
        played = simulated_version(self._settings.simulate.args, {**os.environ, **self._settings.env})
        return choose_parser(simulate=True, version=played)

    @cached_property
    def targets(self) -> TargetGpus:
        """The GPUs the variants will run on: nvidia-smi's, or the simulated one (server/target_gpus.py)."""
        return target_gpus(self._settings, simulate=self._options.simulate, host=lambda: detect_gpus().names)

    def collect(self, tests: Sequence[tuple[str, str]]) -> None:
        """The tests (node id, variant name) in run order: plan each variant they use, then check its flags."""
        for nodeid, name in tests:
            self.run(name).tests.append(nodeid)
        if self.runs and self.unavailable is not None and self._options.require_real:
            raise NothingMeasured(cannot_run(len(tests), self.unavailable, self._options.run_command))
        if self.runs and self.unavailable is None:
            check_baseline_dir(self._settings.baseline_dir)  # a broken store stops the session before any boot
            self._preflight()

    def run(self, name: str) -> VariantRun:
        """The variant's run, planned when first asked for."""
        run = self.runs.get(name)
        if run is None:
            variant = next((v for v in self._variants if v.name == name), None) or self._settings.variant(name)
            run = self.runs[name] = VariantRun(variant, plan_server(self._settings, variant,
                                                                    simulate=self._options.simulate))
        return run

    def _preflight(self) -> None:
        """Unknown, ambiguous, repeated or incompatible flags: reported before any server starts."""
        local = [run.plan for run in self.runs.values() if run.plan.url is None]
        remote = [run.plan for run in self.runs.values() if run.plan.url is not None]
        findings = [*check_plans(local, self.parser, gpus=self.targets), *check_plans(remote, self.parser)]
        for finding in findings:
            self._live.finding(f"pre-flight {finding}")
            if finding.level is Level.ERROR:
                self.runs[finding.variant].preflight_errors.append(finding.message)
