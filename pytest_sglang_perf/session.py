"""The session's state: settings, the server pool, the baseline store and the cells checked so far.

Plain Python: plugin.py creates one PerfSession per pytest session and keeps it in `config.stash`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_sglang_perf.config.settings import Settings, Variant
from pytest_sglang_perf.gate.compare import check_all
from pytest_sglang_perf.gate.environment import Environment, build_environment, detect_gpus
from pytest_sglang_perf.gate.store import BaselineEntry, BaselineStore
from pytest_sglang_perf.gate.terminal import Cell
from pytest_sglang_perf.measurement.samples import Result
from pytest_sglang_perf.options import RunOptions
from pytest_sglang_perf.server.describe import config_lines, startup_text
from pytest_sglang_perf.server.effective import EffectiveConfig
from pytest_sglang_perf.server.hints import boot_hints
from pytest_sglang_perf.server.launcher import BootError, last_attempt, redact_argv
from pytest_sglang_perf.server.logscan import GraphUse, StartupFacts, graph_use
from pytest_sglang_perf.server.plan import ServerPlan, flag_value, plan_server
from pytest_sglang_perf.server.pool import RunningServer, ServerPool
from pytest_sglang_perf.server.preflight import ArgParser, Finding, check_plans, choose_parser

REFRESH_FLAG = "--sglang-update-baselines"


class PerfSession:
    def __init__(
        self, settings: Settings, options: RunOptions, log_dir: Path | None, say: Callable[[str], None]
    ) -> None:
        self.settings = settings
        self.options = options
        self.pool = ServerPool(log_dir, settings.startup_timeout, say)
        self.cells: list[Cell] = []
        self.results: dict[tuple[str, str], Result] = {}
        self._plans: dict[str, ServerPlan] = {}
        self.configs: dict[str, EffectiveConfig] = {}
        """Each booted variant's effective configuration, in boot order."""
        self.startup: dict[str, StartupFacts] = {}
        self.boot_seconds: dict[str, float] = {}
        self._logs: dict[str, Path] = {}
        self._say = say

    @cached_property
    def environment(self) -> Environment:
        return build_environment(
            model=self.settings.model, simulated=self.options.simulate, sim_args=self.settings.simulate.args
        )

    @cached_property
    def store(self) -> BaselineStore:
        return BaselineStore(self.settings.baseline_dir, self.environment.key)

    def plan(self, variant: Variant) -> ServerPlan:
        if variant.name not in self._plans:
            self._plans[variant.name] = plan_server(self.settings, variant, simulate=self.options.simulate)
        return self._plans[variant.name]

    def server(self, variant: Variant) -> RunningServer:
        """The variant's running server (booted on first use, then its effective configuration is read)."""
        server = self.pool.get(self.plan(variant))
        if variant.name not in self.configs:
            self._inspect(variant, server)
        return server

    def _inspect(self, variant: Variant, server: RunningServer) -> None:
        """Read what the new server really runs, compare it with what was asked and say so."""
        from pytest_sglang_perf.server.inspection import inspect_server

        config, facts = inspect_server(variant.name, self.plan(variant), server, self._parser,
                                       list(self.configs.values()))
        self.configs[variant.name] = config
        self.startup[variant.name] = facts
        self.boot_seconds[variant.name] = server.boot_seconds
        self._logs[variant.name] = server.log_path
        for line in config_lines(config):
            self._say(f"[{variant.name}] {line}")

    @cached_property
    def _parser(self) -> ArgParser:
        return choose_parser(simulate=self.options.simulate)

    def preflight(self, variants: Sequence[Variant]) -> list[Finding]:
        """Check the variants' command lines before any server starts (see preflight.py)."""
        gpus = self._preflight_gpus()
        return check_plans([self.plan(v) for v in variants], self._parser, gpu_names=gpus)

    def boot_report(self, error: BootError) -> str:
        """The failed boot's report, plus hints for the SGLang failures it matches."""
        hints = boot_hints(error.reason, error.log_tail, self._parser, self._parser.version)
        return error.report() + "".join(f"\nhint: {hint}" for hint in hints)

    def server_lines(self, name: str) -> list[str]:
        """What the variant's server ran and what its boot cost, for a failing test's report."""
        config = self.configs.get(name)
        if config is None:
            return []
        lines = [f"server: {line.strip()}" if i == 0 else line for i, line in enumerate(config_lines(config))]
        if name in self.startup:
            lines.append(f"  startup: {startup_text(self.startup[name], self.boot_seconds.get(name))}")
        return lines

    def server_records(self) -> dict[str, dict[str, Any]]:
        """Per booted variant: the effective configuration, the startup facts, boot seconds and runtime graph use."""
        records = {}
        for name, config in self.configs.items():
            facts, use = self.startup.get(name), self.graph_use(name)
            records[name] = {
                "effective": config.to_dict(), "boot_seconds": self.boot_seconds.get(name),
                "startup": None if facts is None else facts.to_dict(),
                "graph_use": None if use is None else use.to_dict(),
            }
        return records

    def graph_use(self, name: str) -> GraphUse | None:
        """How many of the variant's prefill/decode batches ran with a graph, from its server's log (so far)."""
        log = self._logs.get(name)
        if log is None or not log.exists():
            return None
        return graph_use(last_attempt(log.read_text(encoding="utf-8", errors="replace")))

    def _preflight_gpus(self) -> tuple[str, ...]:
        """The GPUs the variants will run on: nvidia-smi's, or the simulator's `--sim-gpu` (else its default)."""
        if not self.options.simulate:
            return detect_gpus().names
        from pytest_sglang_perf.sglang_facts.gpus import find_gpu

        asked = flag_value(self.settings.simulate.args, "--sim-gpu") or os.environ.get("SGLANG_SIM_GPU")
        return (asked or find_gpu().name,)

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
        return BaselineEntry(
            test_id=test_id,
            variant=result.variant,
            summaries=result.summaries,
            samples=result.samples,
            args=tuple(redact_argv(self.plan(self.settings.variant(result.variant)).args)),
            prompt_hash=result.prompt_hash,
            params=result.params.to_dict(),
            recorded_at=_now(),
            commit=self._commit,
            environment=self.environment.facts,
            startup=result.startup,
            ran=dict(self.configs[result.variant].ran) if result.variant in self.configs else None,
        )

    @cached_property
    def _commit(self) -> str | None:
        return _git_commit(self.settings.root)

    def refresh_command(self, nodeid: str) -> str:
        """The command that re-measures one test (one variant) and records it as the baseline."""
        simulate = " --sglang-simulate" if self.options.simulate else ""
        config = f" --sglang-config {self.options.config_path}" if self.options.config_path else ""
        return f"pytest '{nodeid}'{simulate}{config} {REFRESH_FLAG}"


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
