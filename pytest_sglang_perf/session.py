"""The session: one VariantRun per variant, the baseline store and the cells checked so far.

Plain Python (no pytest). plugin.py creates one PerfSession per pytest session and keeps it in `config.stash`; its
hooks and fixtures only call into it: `collected()` once the tests are known, `begin()` and `end()` around each
test, `ready()` for the fixture, `check()` for a measured result and `finish()` at the end. A variant's server
boots in one place (`_boot`), before the variant's first test, and stops after its last one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import ConfigError, Settings, variant_line
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.baseline import BaselineEntry
from pytest_sglang_perf.gate.compare import Cell, check_all
from pytest_sglang_perf.gate.environment import Environment, build_environment, detect_gpus
from pytest_sglang_perf.gate.store import BaselineStore
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.server.boot import boot_server, stop_server
from pytest_sglang_perf.server.describe import (
    config_lines,
    server_summary_lines,
    startup_text,
    strict_failure,
    warning_text,
)
from pytest_sglang_perf.server.hints import boot_hints
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.logfeed import last_attempt
from pytest_sglang_perf.server.plan import flag_value, plan_server
from pytest_sglang_perf.server.preflight import Level, check_plans
from pytest_sglang_perf.server.redaction import redact_argv
from pytest_sglang_perf.server.startup import GraphUse, graph_use
from pytest_sglang_perf.sglang_facts.parsers import ArgParser, choose_parser
from pytest_sglang_perf.variant_run import VariantRun

if TYPE_CHECKING:
    from pytest_sglang_perf.server.boot import RunningServer
    from pytest_sglang_perf.server.effective import EffectiveConfig

REFRESH_FLAG = "--sglang-update-baselines"
_INSTALL = "pip install 'pytest-sglang-perf[sglang]'"


class VariantUnavailable(SGLangPerfError):
    """A variant's tests cannot run: it failed the pre-flight check or its server failed to boot."""


class NothingMeasured(SGLangPerfError):
    """A gate run (--sglang-require-real) whose perf tests cannot run here: the message says why and the fix."""


@dataclass(frozen=True)
class ConfigWarning:
    """The warning every test of a variant carries when its server did not run what was asked."""

    message: str
    path: Path | None
    """The configuration file, to point the warning at the variant's definition."""
    line: int | None


class PerfSession:
    def __init__(self, settings: Settings, options: RunOptions, say: Callable[[str], None]) -> None:
        if options.require_real and options.simulate:
            raise ConfigError("--sglang-require-real and --sglang-simulate contradict each other: a gate on real "
                              "SGLang cannot measure the simulator; drop one of them")
        self.settings = settings
        self.options = options
        self.variants = settings.select(options.variants)
        """The variants this run uses, in matrix order (--sglang-variants selects)."""
        self.runs: dict[str, VariantRun] = {}
        """The variants the session's tests use, in run order."""
        self.cells: list[Cell] = []
        self.results: dict[tuple[str, str], Result] = {}
        self._log_dir = options.log_dir or settings.log_dir
        self._say = say

    @cached_property
    def environment(self) -> Environment:
        return build_environment(
            model=self.settings.model, simulated=self.options.simulate, sim_args=self.settings.simulate.args
        )

    @cached_property
    def store(self) -> BaselineStore:
        return BaselineStore(self.settings.baseline_dir, self.environment.key)

    @cached_property
    def unavailable(self) -> str | None:
        """Why no variant can run here (SGLang is not installed), or None."""
        if self.options.simulate or self.settings.server_command is not None:
            return None
        if importlib.util.find_spec("sglang") is None:
            return "SGLang is not installed"
        return None

    @property
    def skip_reason(self) -> str | None:
        """Why every perf test skips here (see unavailable), with the two ways out."""
        if self.unavailable is None:
            return None
        return f"{self.unavailable} ({_INSTALL}); run with --sglang-simulate to use the simulator instead"

    # Collection -----------------------------------------------------------------------------------------------

    def collected(self, tests: Sequence[tuple[str, str]]) -> None:
        """The tests (node id, variant name) in run order: plan each variant they use, then check its flags."""
        for nodeid, name in tests:
            self._run(name).tests.append(nodeid)
        if self.runs and self.unavailable is not None and self.options.require_real:
            raise NothingMeasured(
                f"sglang-perf: --sglang-require-real: {len(tests)} perf test(s) cannot run: {self.unavailable}; "
                f"install it on this runner ({_INSTALL}), or drop --sglang-require-real to let them skip")
        if self.runs and self.unavailable is None:
            self._preflight()

    def _run(self, name: str) -> VariantRun:
        run = self.runs.get(name)
        if run is None:
            variant = self.settings.variant(name)
            run = self.runs[name] = VariantRun(variant, plan_server(self.settings, variant,
                                                                    simulate=self.options.simulate))
        return run

    def _preflight(self) -> None:
        """Unknown, ambiguous, repeated or incompatible flags: reported before any server starts."""
        plans = [run.plan for run in self.runs.values()]
        for finding in check_plans(plans, self._parser, gpu_names=self._preflight_gpus()):
            self._say(f"pre-flight {finding}")
            if finding.level is Level.ERROR:
                self.runs[finding.variant].preflight_errors.append(finding.message)

    @cached_property
    def _parser(self) -> ArgParser:
        return choose_parser(simulate=self.options.simulate)

    def _preflight_gpus(self) -> tuple[str, ...]:
        """The GPUs the variants will run on: nvidia-smi's, or the simulator's `--sim-gpu` (else its default)."""
        if not self.options.simulate:
            return detect_gpus().names
        from pytest_sglang_perf.sglang_facts.gpus import find_gpu

        asked = flag_value(self.settings.simulate.args, "--sim-gpu") or os.environ.get("SGLANG_SIM_GPU")
        return (asked or find_gpu().name,)

    # Around each test -----------------------------------------------------------------------------------------

    def begin(self, name: str, *, skipped: bool) -> None:
        """Before a test's setup: boot its variant's server, so that boot progress reaches the terminal live."""
        run = self.runs.get(name)
        if run is None or skipped or run.preflight_errors or self.unavailable is not None:
            return
        with contextlib.suppress(BootError):  # remembered in the run: the fixture fails the variant's tests
            self._boot(run)

    def end(self, nodeid: str, name: str) -> None:
        """After a test: stop its variant's server when this was the variant's last test."""
        run = self.runs.get(name)
        if run is not None and run.last_test == nodeid:
            self._stop(run)

    def ready(self, name: str) -> VariantRun:
        """The variant's run with its server up; raises VariantUnavailable with the report when it cannot be."""
        run = self._run(name)
        if run.preflight_errors:
            raise VariantUnavailable(f"sglang-perf: variant {name!r} failed the pre-flight check; no server was "
                                     "started:\n  " + "\n  ".join(run.preflight_errors))
        try:
            self._boot(run)
        except BootError as exc:
            raise VariantUnavailable(self._boot_report(exc)) from None
        return run

    def _boot(self, run: VariantRun) -> None:
        """Boot the variant's server unless it runs (a failed boot is raised again), then read what it runs."""
        if run.boot_error is not None:
            raise run.boot_error
        if run.process is None:
            log_path = self._logs() / f"{run.name}.log"
            try:
                run.process, run.server = boot_server(run.plan, log_path, self.settings.startup_timeout, self._say)
            except BootError as exc:
                run.boot_error = exc
                raise
        if run.config is None:
            self._inspect(run)

    def _logs(self) -> Path:
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="sglang-perf-logs-"))
        return self._log_dir

    def _inspect(self, run: VariantRun) -> None:
        """Read what the new server really runs, compare it with what was asked and say so."""
        from pytest_sglang_perf.server.inspection import inspect_server

        assert run.server is not None
        earlier = [other.config for other in self.runs.values() if other.config is not None]
        run.config, run.startup = inspect_server(run.name, run.plan, run.server, self._parser, earlier)
        for line in config_lines(run.config):
            self._say(f"[{run.name}] {line}")

    def _boot_report(self, error: BootError) -> str:
        """The failed boot's report, plus hints for the SGLang failures it matches."""
        hints = boot_hints(error.reason, error.log_tail, self._parser, self._parser.version)
        return error.report() + "".join(f"\nhint: {hint}" for hint in hints)

    def _stop(self, run: VariantRun) -> None:
        if run.process is not None:
            stop_server(run.process, self._say)
            run.process = None

    def strict_failure(self, name: str) -> str | None:
        """With --sglang-strict-flags: why the variant's tests fail unrun (its server did not run what was asked)."""
        run = self.runs.get(name)
        if not self.options.strict_flags or run is None or run.config is None or not run.config.problems:
            return None
        return strict_failure(name, run.config)

    def config_warning(self, name: str) -> ConfigWarning | None:
        """The warning for a variant whose server ran something else than asked (strict mode fails instead)."""
        config = self.runs[name].config
        if config is None or not config.warnings or (self.options.strict_flags and config.problems):
            return None
        path = self.settings.path
        line = variant_line(path, name) if path is not None else None
        return ConfigWarning(warning_text(name, config), path, line)

    # Checking results ---------------------------------------------------------------------------------------

    def check(self, test_id: str, result: Result) -> Cell:
        """Compare a result with its baseline (or record it), remember the cell and return it."""
        baseline = self.store.lookup(test_id, result.variant)
        tolerances = {name: self.settings.tolerance(name) for name in result.summaries}
        checks = check_all(result.summaries, baseline.summaries if baseline else None, tolerances)
        updated = self.options.update_baselines
        if updated:
            self.store.write([self._entry(test_id, result)], self.environment.facts)
        cell = Cell(test_id, result.variant, checks, result.simulated, updated=updated)
        self.cells.append(cell)
        self.results[(test_id, result.variant)] = result
        return cell

    def _entry(self, test_id: str, result: Result) -> BaselineEntry:
        run = self.runs[result.variant]
        return BaselineEntry(
            test_id=test_id,
            variant=result.variant,
            summaries=result.summaries,
            samples=result.samples,
            args=tuple(redact_argv(run.plan.args)),
            prompt_hash=result.prompt_hash,
            params=result.params.settings,
            recorded_at=_now(),
            commit=self._commit,
            environment=self.environment.facts,
            startup=None if result.startup is None else result.startup.to_dict(),
            ran=None if run.config is None else dict(run.config.ran),
        )

    @cached_property
    def _commit(self) -> str | None:
        return _git_commit(self.settings.root)

    def refresh_command(self, nodeid: str) -> str:
        """The command that re-measures one test (one variant) and records it as the baseline."""
        simulate = " --sglang-simulate" if self.options.simulate else ""
        config = f" --sglang-config {self.options.config_path}" if self.options.config_path else ""
        return f"pytest '{nodeid}'{simulate}{config} {REFRESH_FLAG}"

    # Reports --------------------------------------------------------------------------------------------------

    def server_lines(self, run: VariantRun) -> list[str]:
        """What the variant's server ran and what its boot cost, for a failing test's report."""
        if run.config is None:
            return []
        lines = [f"server: {line.strip()}" if i == 0 else line for i, line in enumerate(config_lines(run.config))]
        if run.startup is not None:
            boot_seconds = None if run.server is None else run.server.boot_seconds
            lines.append(f"  startup: {startup_text(run.startup, boot_seconds)}")
        return lines

    def summary(self) -> list[str]:
        """The summary's cells section: a table per variant, the counts and the refresh hint."""
        from pytest_sglang_perf.gate.terminal import summary_lines

        return summary_lines(self.cells)

    def nothing_measured(self) -> str | None:
        """The closing line of a run whose perf tests all skipped because they cannot run here: never a silent
        green."""
        total = sum(len(run.tests) for run in self.runs.values())
        if self.unavailable is None or total == 0:
            return None
        return f"sglang-perf: {len(self.cells)} of {total} cells measured: {self.skip_reason}"

    def server_summary(self) -> list[str]:
        """The summary's servers section (see describe.server_summary_lines)."""
        booted = self._booted()
        configs = {run.name: config for run, config, _ in booted}
        facts = {run.name: run.startup for run, _, _ in booted if run.startup is not None}
        boot_seconds = {run.name: server.boot_seconds for run, _, server in booted}
        uses = {run.name: use for run, _, _ in booted if (use := self._graph_use(run)) is not None}
        return server_summary_lines(configs, facts, boot_seconds, self.options.simulate, uses)

    def _booted(self) -> list[tuple[VariantRun, EffectiveConfig, RunningServer]]:
        """The variants whose server booted and was inspected, in boot order."""
        return [(run, run.config, run.server) for run in self.runs.values()
                if run.config is not None and run.server is not None]

    def _graph_use(self, run: VariantRun) -> GraphUse | None:
        """How many of the variant's prefill/decode batches ran with a graph, from its server's log (so far)."""
        if run.server is None or not run.server.log_path.exists():
            return None
        return graph_use(last_attempt(run.server.log_path.read_text(encoding="utf-8", errors="replace")))

    def server_records(self) -> dict[str, dict[str, Any]]:
        """Per booted variant: the effective configuration, the startup facts, boot seconds and runtime graph use."""
        records = {}
        for run, config, server in self._booted():
            use = self._graph_use(run)
            records[run.name] = {
                "effective": config.to_dict(),
                "boot_seconds": server.boot_seconds,
                "startup": None if run.startup is None else run.startup.to_dict(),
                "graph_use": None if use is None else use.to_dict(),
            }
        return records

    # The end --------------------------------------------------------------------------------------------------

    def stop_all(self) -> None:
        for run in self.runs.values():
            self._stop(run)

    def finish(self) -> None:
        """Stop every server, then write the results file if one was asked for."""
        self.stop_all()
        if self.options.results_path is not None:
            from pytest_sglang_perf.gate.results_file import write_results

            write_results(self.options.results_path, self.cells, self.results, self.environment.facts,
                          self.server_records())


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def _git_commit(root: Path) -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None
