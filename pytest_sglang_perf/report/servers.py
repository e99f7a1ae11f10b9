"""Read-only views of the session's servers: the summary's servers section, the results file's `servers`, the
variants whose server never ran (`errored`) and what a failing test's report says about its server.

Plain Python: what each booted variant's server ran, what its boot cost and how many batches ran with a graph.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.gate.errored import BOOT, PREFLIGHT, ErroredVariant
from pytest_sglang_perf.server.describe import failure_lines, server_summary_lines
from pytest_sglang_perf.server.logdirs import shown_path
from pytest_sglang_perf.server.logfeed import last_attempt
from pytest_sglang_perf.server.startup import GraphUse, graph_use
from pytest_sglang_perf.session.variant_run import VariantRun

if TYPE_CHECKING:
    from pytest_sglang_perf.server.boot import RunningServer
    from pytest_sglang_perf.server.effective import EffectiveConfig


def server_summary(runs: Iterable[VariantRun], simulated: bool, *, brief: bool = False) -> list[str]:
    """The summary's servers section (see describe.server_summary_lines; `brief` at pytest's default verbosity)."""
    booted = _booted(runs)
    configs = {run.name: config for run, config, _ in booted}
    facts = {run.name: run.startup for run, _, _ in booted if run.startup is not None and not _reused(run)}
    boot_seconds = {run.name: server.boot_seconds for run, _, server in booted}
    uses = {run.name: use for run, _, _ in booted if (use := _graph_use(run)) is not None and not _reused(run)}
    remote = {run.name: run.plan.url for run, _, _ in booted if run.plan.url is not None}
    reused = {run.name: run.kept.describe() for run, _, _ in booted if run.kept is not None and run.kept.reused}
    lines = server_summary_lines(configs, facts, boot_seconds, simulated, uses, brief=brief, remote=remote,
                                 reused=reused)
    return [*lines, "(-v shows what each server ran and its startup facts)"] if brief and lines else lines


def _reused(run: VariantRun) -> bool:
    """A kept server an earlier run booted: its startup and its log's counts are that boot's, not this run's."""
    return run.kept is not None and run.kept.reused


def _booted(runs: Iterable[VariantRun]) -> list[tuple[VariantRun, EffectiveConfig, RunningServer]]:
    """The variants whose server booted and was inspected, in boot order."""
    return [(run, run.config, run.server) for run in runs
            if run.config is not None and run.server is not None]


def _graph_use(run: VariantRun) -> GraphUse | None:
    """How many of the variant's prefill/decode batches ran with a graph, from its server's log (so far); None
    without a log (a remote server)."""
    if run.server is None or run.plan.url is not None or not run.server.log_path.exists():
        return None
    return graph_use(last_attempt(run.server.log_path.read_text(encoding="utf-8", errors="replace")))


def server_records(runs: Iterable[VariantRun]) -> dict[str, dict[str, Any]]:
    """Per booted variant: the effective configuration, the startup facts, boot seconds and runtime graph use."""
    records = {}
    for run, config, server in _booted(runs):
        use = _graph_use(run)
        reused = run.kept.describe() if run.kept is not None and run.kept.reused else None
        records[run.name] = {
            "effective": config.to_dict(),
            "boot_seconds": None if run.plan.url or reused else server.boot_seconds,
            "url": run.plan.url,
            "kept": None if run.kept is None else run.kept.key,
            "reused": reused,
            "startup": None if run.startup is None or reused else run.startup.to_dict(),
            "graph_use": None if use is None or reused else use.to_dict(),
            "cuda_visible_devices": server.plan.env.get("CUDA_VISIBLE_DEVICES"),
            "worker": os.environ.get("PYTEST_XDIST_WORKER"),
        }
    return records


def errored_variants(runs: Iterable[VariantRun]) -> list[ErroredVariant]:
    """The variants whose server never ran: rejected by the pre-flight check, or failed its (first) boot."""
    errored = []
    for run in runs:
        if run.preflight_errors:
            errored.append(ErroredVariant(run.name, PREFLIGHT, "; ".join(run.preflight_errors), tuple(run.tests)))
        elif run.boot_error is not None and run.server is None:
            errored.append(ErroredVariant(run.name, BOOT, run.boot_error.reason, tuple(run.tests),
                                          started=run.boot_error.started))
    return errored


def server_failure_lines(run: VariantRun) -> list[str]:
    """What a failing test's report says about its variant's server (see describe.failure_lines)."""
    if run.config is None or run.server is None:
        return []
    unseen = run.plan.url is not None or _reused(run)  # no boot of this run: its startup was not observed
    return failure_lines(run.config, None if unseen else run.startup, None if unseen else run.server.boot_seconds,
                         shown_path(run.server.log_path, Path.cwd()))
