"""Which checked cells fail their test under this run's options, and the command that refreshes one.

Plain Python (no pytest): pytest_plugin/handle.py asks after each check.
"""

from __future__ import annotations

import shlex

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.wrapping import wrap_lines

REFRESH_FLAG = "--sglang-update-baselines"


def gate_failure(cell: Cell, options: RunOptions) -> str | None:
    """Why a checked cell fails its test, or None: regressed always; inconclusive with --sglang-fail-inconclusive;
    new and stale with --sglang-require-baselines."""
    verdict = cell.verdict
    if verdict is Verdict.REGRESSED:
        return "regressed"
    if verdict is Verdict.INCONCLUSIVE and options.fail_inconclusive:
        return "inconclusive (--sglang-fail-inconclusive)"
    if verdict in (Verdict.NEW, Verdict.STALE) and options.require_baselines:
        return f"{verdict.value}: no comparable baseline (--sglang-require-baselines)"
    return None


def refresh_command(nodeid: str, variant: str, options: RunOptions) -> str:
    """The command that re-measures one test (one variant) and records it as the baseline (a run against
    --sglang-url again selects the variant the server runs, and keys it by the same GPU)."""
    simulate = " --sglang-simulate" if options.simulate else ""
    config = f" --sglang-config {options.config_path}" if options.config_path else ""
    remote = ""
    if options.url:
        remote = f" --sglang-url {shlex.quote(options.url)} --sglang-variants {variant}"
        remote += f" --sglang-remote-gpu {shlex.quote(options.remote_gpu)}" if options.remote_gpu else ""
    return f"pytest '{nodeid}'{simulate}{config}{remote} {REFRESH_FLAG}"


def conditions_lines(result: Result, again: Result | None) -> list[str]:
    """What a failing cell's report says about the conditions it was measured in (the client's event-loop lag and
    CPU, how busy the host was, and the server GPUs' clocks, slowdowns and other processes: measurement/
    client_load.py, host_load.py, gpu_conditions.py), and its re-measure's."""
    lines = [f"conditions: {text}" for text in [_conditions(result)] if text]
    lines += [f"conditions of the re-measure: {text}" for text in [_conditions(again)] if text]
    return wrap_lines(lines)


def _conditions(result: Result | None) -> str | None:
    if result is None:
        return None
    parts = [part.describe() for part in (result.client, result.host) if part is not None]
    parts += [gpu.describe() for gpu in result.gpu or ()]
    return "; ".join(parts) or None
