"""A/B answers: did a variant (or an upgrade) change a per-request metric, with a confidence interval?

Two forms, both on raw per-request samples (CellSamples):
- `ab_lines`: per test, every variant against a reference variant (e.g. `prefill_graph vs default`);
- `before_after_lines`: two result sets (before and after an SGLang upgrade) matched by (test id, variant).

Each line gives the relative change of the geometric mean (Welch's t on log values, gate/statistics.py), its
two-sided confidence interval, and whether the interval excludes 0 ("significant: better" / "worse", in the
metric's own direction). A comparison that cannot be made gets an `n/a (why)` line, never silence.
Each side is one server boot, so the intervals hold request-to-request spread only; the footnote says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.gate.statistics import log_difference
from pytest_sglang_perf.gate.terminal import SIMULATED
from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.measurement.metrics import METRICS, Direction
from pytest_sglang_perf.measurement.result import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.values import BOOT_METRICS, metric_values

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.result import Result

DEFAULT_REFERENCE = "default"
DEFAULT_CONFIDENCE = 0.95
AB_FOOTNOTE = ("note: A/B across variants compares one server boot each, so boot-to-boot spread is not in "
               "these intervals")
BEFORE_AFTER_FOOTNOTE = ("note: each side is one session (one server boot per variant), so boot-to-boot spread "
                         "is not in these intervals")


@dataclass(frozen=True)
class CellSamples:
    """One test x variant's metric values, as the gate computes them from the raw samples (measurement/values.py):
    per request for one stream, per round at concurrency N."""

    test_id: str
    variant: str
    simulated: bool
    values: Mapping[str, tuple[float, ...]]
    """Per metric, one value per request that has it (e.g. no tpot for a one-token completion)."""
    prompt_hash: str | None = None
    """The request's prompt hash when known: samples of different prompts are not compared."""
    streams: int = 1
    """Streams sent at once: cells of different concurrency are not compared (e.g. `@cmax` of two variants whose
    request caps differ)."""

    @classmethod
    def from_samples(cls, test_id: str, variant: str, simulated: bool, samples: Sequence[Sample],
                     prompt_hash: str | None = None, *, streams: int = 1, slo: Slo | None = None) -> CellSamples:
        values = {name: found for name, found in metric_values(samples, None, None, slo).items()
                  if name not in BOOT_METRICS}
        return cls(test_id, variant, simulated, values, prompt_hash, streams)

    @classmethod
    def from_result(cls, test_id: str, result: Result) -> CellSamples:
        """A session's measurement (session.results[(test_id, variant)])."""
        return cls.from_samples(test_id, result.variant, result.simulated, result.samples, result.prompt_hash,
                                streams=result.params.concurrency, slo=result.params.slo)

    @classmethod
    def from_results_cell(cls, data: Mapping[str, Any]) -> CellSamples:
        """A cell of a `--sglang-results` file; raises ValueError saying what is wrong. Unknown fields are ignored."""
        test_id, variant, simulated = data.get("test_id"), data.get("variant"), data.get("simulated", False)
        samples, prompt_hash = data.get("samples"), data.get("prompt_hash")
        if not isinstance(test_id, str) or not isinstance(variant, str):
            raise ValueError("'test_id' and 'variant' must be strings")
        if not isinstance(simulated, bool) or not isinstance(samples, list):
            raise ValueError("'simulated' must be true or false and 'samples' a list")
        if prompt_hash is not None and not isinstance(prompt_hash, str):
            raise ValueError("'prompt_hash' must be a string or null")
        streams, slo = _load(data.get("params"))
        return cls.from_samples(test_id, variant, simulated, _samples(samples), prompt_hash, streams=streams, slo=slo)


def _load(params: object) -> tuple[int, Slo | None]:
    """A results cell's concurrency and SLO from its `params` (absent: one stream, no SLO)."""
    if not isinstance(params, Mapping):
        return 1, None
    try:
        settings = RequestSettings.from_dict(params)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"'params' is not a request's settings: {exc}") from None
    return settings.concurrency, settings.slo


def _samples(raw: Sequence[Any]) -> list[Sample]:
    out = []
    for i, item in enumerate(raw):
        try:
            sample = Sample.from_dict(item)
            sample.metrics()  # a zero e2e divides by zero: report it here
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise ValueError(f"sample {i} is malformed ({type(exc).__name__}: {exc})") from None
        out.append(sample)
    return out


# The two forms -----------------------------------------------------------------------------------------------

def ab_lines(cells: Sequence[CellSamples], reference: str = DEFAULT_REFERENCE,
             confidence: float = DEFAULT_CONFIDENCE) -> list[str]:
    """Per test, each variant but `reference` against `reference`; one line saying why when that is impossible."""
    _check_confidence(confidence)
    problem = missing_reference(cells, reference)
    if problem is not None:
        return [f"sglang-perf A/B: {problem}"]
    variants = [v for v in _ordered(c.variant for c in cells) if v != reference]
    if not variants:
        what = f"only the reference variant '{reference}' was measured" if cells else "no results"
        return [f"sglang-perf A/B: {what}: nothing to compare"]
    table = _by_key(cells)
    lines = [f"sglang-perf A/B against variant '{reference}': {_what(confidence)}{_tag(cells)}"]
    for test_id in _ordered(c.test_id for c in cells):
        lines.append(test_id)
        for variant in variants:
            sides = (table.get((test_id, reference)), table.get((test_id, variant)))
            lines.extend(_pair_lines(f"{variant} vs {reference}", sides, (reference, variant), confidence))
    return [*lines, AB_FOOTNOTE]


def missing_reference(cells: Sequence[CellSamples], reference: str) -> str | None:
    """What is wrong when there are cells but none of `reference`: the variants present; else None."""
    variants = _ordered(c.variant for c in cells)
    if not variants or reference in variants:
        return None
    return f"no results of the reference variant '{reference}'; variants present: {', '.join(variants)}"


def before_after_lines(before: Sequence[CellSamples], after: Sequence[CellSamples],
                       confidence: float = DEFAULT_CONFIDENCE,
                       labels: tuple[str, str] = ("before", "after")) -> list[str]:
    """Per test and variant, `after` against `before` (e.g. an SGLang upgrade), matched by (test id, variant)."""
    _check_confidence(confidence)
    if not before and not after:
        return [f"sglang-perf before/after: no results in {labels[0]} or {labels[1]}"]
    old, new = _by_key(before), _by_key(after)
    header = f"sglang-perf before/after: {labels[1]} vs {labels[0]}: {_what(confidence)}"
    lines = [header + _before_after_tag(before, after, labels)]
    everything = [*before, *after]
    for test_id in _ordered(c.test_id for c in everything):
        lines.append(test_id)
        for variant in _ordered(c.variant for c in everything if c.test_id == test_id):
            sides = (old.get((test_id, variant)), new.get((test_id, variant)))
            lines.extend(_pair_lines(variant, sides, labels, confidence))
    return [*lines, BEFORE_AFTER_FOOTNOTE]


# One comparison -----------------------------------------------------------------------------------------------

def _pair_lines(label: str, sides: tuple[CellSamples | None, CellSamples | None], names: tuple[str, str],
                confidence: float) -> list[str]:
    """The measured side (second) against the reference side (first), one line per metric either has.

    `names` name the sides in the text: the variants for A/B, the result sets for before/after.
    """
    reference, measured = sides
    if reference is None or measured is None:
        return [f"  {label}: n/a (no result in {names[0] if reference is None else names[1]})"]
    if reference.prompt_hash and measured.prompt_hash and reference.prompt_hash != measured.prompt_hash:
        return [f"  {label}: n/a (different prompts: {reference.prompt_hash} vs {measured.prompt_hash})"]
    if reference.streams != measured.streams:
        return [f"  {label}: n/a (different concurrency: {reference.streams} vs {measured.streams} streams)"]
    if not reference.values or not measured.values:
        return [f"  {label}: n/a (no samples {_where(reference, measured, names)})"]
    return [f"  {label}: {_metric_text(name, (reference.values, measured.values), names, confidence)}"
            for name in _metric_names(reference, measured)]


def _where(reference: CellSamples, measured: CellSamples, names: tuple[str, str]) -> str:
    if not reference.values and not measured.values:
        return "on either side"
    return f"in {names[0] if not reference.values else names[1]}"


def _metric_text(name: str, values: tuple[Mapping[str, Sequence[float]], Mapping[str, Sequence[float]]],
                 names: tuple[str, str], confidence: float) -> str:
    ref, new = values[0].get(name, ()), values[1].get(name, ())
    if not ref or not new:
        return f"{name} n/a (no {name} samples in {names[0] if not ref else names[1]})"
    result = log_difference([list(ref)], list(new))
    if result is None:
        return f"{name} n/a ({_no_test_reason(ref, new)})"
    low, high = result.interval(confidence)
    return f"{name} {_percent(result.change)} [{_percent(low)}, {_percent(high)}] {_decision(name, low, high)}"


def _no_test_reason(reference: Sequence[float], measured: Sequence[float]) -> str:
    if min(len(reference), len(measured)) < 2:
        return f"needs >= 2 samples a side; has {len(reference)} and {len(measured)}"
    if not all(math.isfinite(v) and v > 0 for v in (*reference, *measured)):
        return "needs positive values"
    return "no test possible on these samples"


def _decision(name: str, low: float, high: float) -> str:
    """Significant when the interval excludes 0; then better or worse in the metric's direction."""
    if low <= 0 <= high:
        return "not significant"
    spec = METRICS.get(name)
    if spec is None:
        return f"significant: {'higher' if low > 0 else 'lower'}"
    higher_is_better = spec.direction is Direction.HIGHER_IS_BETTER
    return f"significant: {'better' if (low > 0) == higher_is_better else 'worse'}"


# Small helpers --------------------------------------------------------------------------------------------------

def _metric_names(reference: CellSamples, measured: CellSamples) -> list[str]:
    """Every metric either side has: METRICS order first, then any other in the order seen."""
    present = _ordered([*reference.values, *measured.values])
    return [n for n in METRICS if n in present] + [n for n in present if n not in METRICS]


def _by_key(cells: Iterable[CellSamples]) -> dict[tuple[str, str], CellSamples]:
    """Cells by (test id, variant); a later cell for the same key replaces an earlier one."""
    return {(c.test_id, c.variant): c for c in cells}


def _ordered(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _percent(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _what(confidence: float) -> str:
    return f"change of the geometric mean, {confidence * 100:g}% confidence interval"


def _tag(cells: Iterable[CellSamples]) -> str:
    return f" ({SIMULATED})" if any(c.simulated for c in cells) else ""


def _before_after_tag(before: Sequence[CellSamples], after: Sequence[CellSamples], labels: tuple[str, str]) -> str:
    simulated = [label for label, cells in zip(labels, (before, after), strict=True) if any(c.simulated for c in cells)]
    if len(simulated) == 1:
        return f" ({SIMULATED}: {simulated[0]})"
    return f" ({SIMULATED})" if simulated else ""


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), e.g. 0.95; got {confidence!r}")


def session_lines(results: Mapping[tuple[str, str], Result], variants: Sequence[str],
                  confidence: float = DEFAULT_CONFIDENCE) -> list[str]:
    """The session's A/B section: every measured variant against `default` (else the first variant measured, in
    matrix order); no lines when fewer than two variants were measured."""
    cells = [CellSamples.from_result(test_id, result) for (test_id, _), result in results.items()]
    return section_lines(cells, variants, confidence)


def section_lines(cells: Sequence[CellSamples], variants: Sequence[str],
                  confidence: float = DEFAULT_CONFIDENCE) -> list[str]:
    """The A/B section of these cells (a session's, or the merged cells of pytest-xdist workers): every measured
    variant against `default` (else the first variant measured, in matrix order); no lines when fewer than two
    variants were measured."""
    measured = [name for name in variants if any(cell.variant == name for cell in cells)]
    if len(measured) < 2:
        return []
    reference = DEFAULT_REFERENCE if DEFAULT_REFERENCE in measured else measured[0]
    return ab_lines(cells, reference, confidence)
