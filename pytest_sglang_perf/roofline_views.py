"""The summary's roofline section: each decode cell against its memory-bandwidth ceiling, in one line, with what
the ceiling was computed from underneath (docs/roofline.md).

    sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1 (SIMULATED)
    tests/perf/test_prompts.py::test_long_context_summary [default]: 53.5 of 64.1 tok/s: decode at 83% of the
      bandwidth ceiling: memory-bandwidth bound; graph or overlap flags can gain at most ~17% of the step (+20% tok/s)
      (simulated 660 GB/s on NVIDIA RTX A6000; 30.32 GB per step: target 25.10, draft 5.09, KV 0.13, estimated;
        tokens per step 2.94)

What the bytes assumed or could not count follows as `note:` lines, once per variant (under its first cell). A
variant whose cells have no ceiling says why once. Plain Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling
from pytest_sglang_perf.wrapping import wrap_lines

if TYPE_CHECKING:
    from pytest_sglang_perf.hardware.probe import ProbeReport

GB = 1e9


def probe_text(report: ProbeReport | None) -> str | None:
    """`1x NVIDIA H200 (SM 9.0, driver 570.1): read 4321 GB/s (sum of 1 GiB, best of 20); torch 2.11.0`, or why
    it measured nothing; None when the probe did not run (a simulated run, a host without GPUs)."""
    if report is None:
        return None
    names: dict[str, int] = {}
    for gpu in report.gpus:
        names[gpu.name] = names.get(gpu.name, 0) + 1
    found = ", ".join(f"{count}x {name}" for name, count in names.items()) or "no GPU"
    measured = "; ".join(f"{m.gpu_name}: read {m.read_gb_s:.0f} GB/s ({m.method})" for m in report.bandwidth)
    why = f"; {report.skipped}" if report.skipped else ""
    return f"{found}{': ' + measured if measured else ''}{why} (via {report.via}, {report.seconds:.1f} s)"


def roofline_lines(results: Iterable[tuple[str, Result]], *, simulated: bool, probe: str | None = None) -> list[str]:
    """The section's lines for (test id, result) pairs in run order; empty when no cell decoded."""
    cells = [(test_id, result) for test_id, result in results if result.roofline is not None]
    if not cells:
        return []
    label = " (SIMULATED)" if simulated else ""
    lines = [f"sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1{label}"]
    if probe:
        lines += wrap_lines([f"GPU probe: {probe}"])
    told: set[tuple[str, str]] = set()
    for test_id, result in cells:
        lines += _cell_lines(test_id, result, told)
    return lines


def _cell_lines(test_id: str, result: Result, told: set[tuple[str, str]]) -> list[str]:
    ceiling = result.roofline
    if isinstance(ceiling, str):
        if (result.variant, ceiling) in told:
            return []
        told.add((result.variant, ceiling))
        return wrap_lines([f"variant {result.variant}: {ceiling}"])
    assert isinstance(ceiling, DecodeCeiling)
    head = f"{test_id} [{result.variant}]: {ceiling.measured_tok_s:.1f} of {ceiling.tok_s:.1f} tok/s: "
    notes = [f"  note: {note}" for note in ceiling.notes if (result.variant, note) not in told]
    told.update((result.variant, note) for note in ceiling.notes)
    return wrap_lines([head + ceiling.diagnosis(), f"  ({basis(ceiling)})", *notes])


def basis(ceiling: DecodeCeiling) -> str:
    """What the ceiling was computed from, in one parenthesis-free phrase."""
    step = ceiling.step
    how = "exact" if ceiling.bytes_exact else "estimated"
    parts: Sequence[str] = [f"target {step.target / GB:.2f}", *([f"draft {step.draft / GB:.2f}"] if step.draft else []),
                            f"KV {step.kv / GB:.2f}"]
    bandwidth = ceiling.bandwidth
    return (f"{bandwidth.source} {bandwidth.gb_s:.0f} GB/s on {bandwidth.gpu}; {step.total / GB:.2f} GB per step: "
            f"{', '.join(parts)}, {how}; tokens per step {ceiling.accept_length:.2f}")
