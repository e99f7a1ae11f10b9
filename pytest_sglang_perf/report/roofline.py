"""The summary's roofline section: each decode cell against its memory-bandwidth ceiling, in one line, with what
the ceiling was computed from underneath (docs/roofline.md).

    sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1 (SIMULATED)
    variant default: ceilings from simulated 660 GB/s on NVIDIA RTX A6000 and 30.18 GB of weights per step (target
      25.10, draft 5.09), estimated; -v: each cell's KV cache and tokens per step, and 3 note(s) on the bytes
    tests/perf/test_prompts.py::test_red_black_tree [default]: 53.7 of 64.9 tok/s: decode at 83% of the bandwidth
      ceiling: memory-bandwidth bound; graph or overlap flags can gain at most ~17% of the step (+21% tok/s)

With -v each cell's line is followed by its whole basis, `(simulated 660 GB/s on NVIDIA RTX A6000; 30.22 GB per
step: target 25.10, draft 5.09, KV 0.04, estimated; tokens per step 2.97)`, and what the bytes assumed or could not
count by `note:` lines, once per variant (the results file and the Markdown report always have them). A variant
whose cells have no ceiling says why once. Plain Python (no pytest).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling
from pytest_sglang_perf.wrapping import wrap_lines

GB = 1e9


def roofline_lines(results: Iterable[tuple[str, Result]], *, simulated: bool, probe: str | None = None,
                   verbose: bool = False) -> list[str]:
    """The section's lines for (test id, result) pairs in run order; empty when no cell decoded. What a ceiling was
    computed from is said once per variant (its bandwidth and weights), or per cell with `verbose` (-v: its KV cache
    and tokens per step too)."""
    cells = [(test_id, result) for test_id, result in results if result.roofline is not None]
    if not cells:
        return []
    label = " (SIMULATED)" if simulated else ""
    lines = [f"sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1{label}"]
    if probe:
        lines += wrap_lines([f"GPU probe: {probe}"])
    told: set[tuple[str, str]] = set()
    for test_id, result in cells:
        lines += _cell_lines(test_id, result, told, verbose)
    return lines


def _cell_lines(test_id: str, result: Result, told: set[tuple[str, str]], verbose: bool) -> list[str]:
    ceiling = result.roofline
    if isinstance(ceiling, str):
        if (result.variant, ceiling) in told:
            return []
        told.add((result.variant, ceiling))
        return wrap_lines([f"variant {result.variant}: {ceiling}"])
    assert isinstance(ceiling, DecodeCeiling)
    head = f"{test_id} [{result.variant}]: {ceiling.measured_tok_s:.1f} of {ceiling.tok_s:.1f} tok/s: "
    variant = [] if verbose or (result.variant, "") in told else [f"variant {result.variant}: {weights_basis(ceiling)}"]
    told.add((result.variant, ""))
    notes = [f"  note: {note}" for note in ceiling.notes if verbose and (result.variant, note) not in told]
    told.update((result.variant, note) for note in ceiling.notes)
    cell = [head + ceiling.diagnosis(), *([f"  ({basis(ceiling)})"] if verbose else [])]
    return wrap_lines([*variant, *notes, *cell])


def weights_basis(ceiling: DecodeCeiling) -> str:
    """What every decode cell of a variant shares: `ceilings from simulated 660 GB/s on NVIDIA RTX A6000 and 30.18 GB
    of weights per step (target 25.10, draft 5.09), estimated; -v: each cell's KV cache and tokens per step`."""
    step = ceiling.step
    weights = step.target + step.draft
    split = f" (target {step.target / GB:.2f}, draft {step.draft / GB:.2f})" if step.draft else ""
    how = "exact" if ceiling.bytes_exact else "estimated"
    notes = f", and {len(ceiling.notes)} note(s) on the bytes" if ceiling.notes else ""
    return (f"ceilings from {ceiling.bandwidth.source} {ceiling.bandwidth.gb_s:.0f} GB/s on {ceiling.bandwidth.gpu} "
            f"and {weights / GB:.2f} GB of weights per step{split}, {how}; -v: each cell's KV cache and tokens per "
            f"step{notes}")


def basis(ceiling: DecodeCeiling) -> str:
    """What the ceiling was computed from, in one parenthesis-free phrase."""
    step = ceiling.step
    how = "exact" if ceiling.bytes_exact else "estimated"
    parts: Sequence[str] = [f"target {step.target / GB:.2f}", *([f"draft {step.draft / GB:.2f}"] if step.draft else []),
                            f"KV {step.kv / GB:.2f}"]
    bandwidth = ceiling.bandwidth
    return (f"{bandwidth.source} {bandwidth.gb_s:.0f} GB/s on {bandwidth.gpu}; {step.total / GB:.2f} GB per step: "
            f"{', '.join(parts)}, {how}; tokens per step {ceiling.accept_length:.2f}")
