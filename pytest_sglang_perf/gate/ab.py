"""A/B answers: did a variant (or an upgrade) change a per-request metric, with a confidence interval?

Two forms, both on raw per-request samples (CellSamples):
- `ab_lines`: per test, every variant against a reference variant (e.g. `prefill_graph vs default`);
- `before_after_lines`: two result sets (before and after an SGLang upgrade) matched by (test id, variant).

Each line gives the relative change of the geometric mean, its two-sided confidence interval, and a decision in
the metric's own direction ("significant: better" / "worse"). What may be called significant depends on what the
interval holds (docs/usage/ab.md):

- One boot a side (the default): Welch's t on the requests' log values (gate/statistics.py). The interval holds the
  requests' spread only, not the offset each boot has of its own (clocks, memory layout, autotuning; on a CPU host,
  whatever else runs), nor the drift between one variant's boot and the next. So a difference is significant only
  when the interval clears the metric's tolerance on one side (the change a boot may move it by, the gate's own
  allowance); a difference inside it is "within one boot's noise", never an effect.
- Several boots a side, booted in turns (A B A B ..., `--sglang-boots N`): the boots are paired by round and the
  test is between them (statistics.paired_boots), so boot offsets and drift are in the interval: significant when
  it excludes 0.
- One boot a side, both cells' baselines recorded over several boots (`--sglang-update-baselines --sglang-boots N`):
  the boot spread those recorded is added to the interval (statistics.with_boot_spread), which then decides alone.
- Never significant on zero spread: identical values measure no noise at all, which is not certainty.

A comparison that cannot be made gets an `n/a (why)` line, never silence.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.gate.statistics import (
    BootSpread,
    LogDifference,
    log_difference,
    paired_boots,
    with_boot_spread,
)
from pytest_sglang_perf.gate.terminal import SIMULATED
from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.measurement.metrics import METRICS, Direction
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.values import BOOT_METRICS, measures_prefill, metric_values

if TYPE_CHECKING:
    from pytest_sglang_perf.measurement.result import Result

DEFAULT_REFERENCE = "default"
DEFAULT_CONFIDENCE = 0.95
AB_FOOTNOTE = ("note: one server boot a variant: these intervals hold the requests' spread, not a boot's own "
               "offset, so only a change beyond the metric's tolerance is called significant; "
               "--sglang-boots N boots each variant N times in turns and tests between the boots")
AB_BOOTS_FOOTNOTE = ("note: between boots: each variant booted {boots} times in turns (A B, B A, A B, ...), boots "
                     "paired by round, so boot offsets and drift are in these intervals")
BEFORE_AFTER_FOOTNOTE = ("note: each side is one session (one server boot per variant): these intervals hold the "
                         "requests' spread, not a boot's own offset, so only a change beyond the metric's tolerance "
                         "is called significant")


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
    more_boots: tuple[Mapping[str, tuple[float, ...]], ...] = ()
    """The values of the cell's further boots, in boot order (`--sglang-boots N` in a gate run: rounds 2..N)."""
    recorded_spread: Mapping[str, BootSpread] = field(default_factory=dict)
    """Per metric, the boot spread of the cell's baseline when it was recorded over several boots: a comparison
    within one boot each adds it to the interval instead of allowing the tolerance."""

    @property
    def boots(self) -> int:
        return 1 + len(self.more_boots)

    def boot_values(self, name: str) -> list[tuple[float, ...]]:
        """One group of `name`'s values per boot, in boot order (empty for a boot without any)."""
        return [values.get(name, ()) for values in (self.values, *self.more_boots)]

    @classmethod
    def from_samples(cls, test_id: str, variant: str, simulated: bool, samples: Sequence[Sample],
                     prompt_hash: str | None = None, *, streams: int = 1, slo: Slo | None = None,
                     prefill: bool = False) -> CellSamples:
        values = {name: found for name, found in metric_values(samples, None, None, slo, prefill=prefill).items()
                  if name not in BOOT_METRICS}
        return cls(test_id, variant, simulated, values, prompt_hash, streams)

    @classmethod
    def from_result(cls, test_id: str, result: Result, more: Sequence[Result] = ()) -> CellSamples:
        """A session's measurement (session.results[(test_id, variant)]), and its re-measures on further boots."""
        prefill = measures_prefill(result.params.prompt_tokens, result.params.prefix_cache)
        first = cls.from_samples(test_id, result.variant, result.simulated, result.samples, result.prompt_hash,
                                 streams=result.params.concurrency, slo=result.params.slo, prefill=prefill)
        later = tuple(cls.from_samples(test_id, again.variant, again.simulated, again.samples,
                                       streams=again.params.concurrency, slo=again.params.slo, prefill=prefill).values
                      for again in more)
        return replace(first, more_boots=later)

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
        streams, slo, prefill = _load(data.get("params"))
        return cls.from_samples(test_id, variant, simulated, _samples(samples), prompt_hash, streams=streams, slo=slo,
                                prefill=prefill)


def _load(params: object) -> tuple[int, Slo | None, bool]:
    """A results cell's concurrency, SLO and whether it measured prefill, from its `params` (absent: one stream, no
    SLO, no prefill)."""
    if not isinstance(params, Mapping):
        return 1, None, False
    try:
        settings = RequestSettings.from_dict(params)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"'params' is not a request's settings: {exc}") from None
    return settings.concurrency, settings.slo, measures_prefill(settings.prompt_tokens, settings.prefix_cache)


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
             confidence: float = DEFAULT_CONFIDENCE, tolerances: Mapping[str, float] | None = None) -> list[str]:
    """Per test, each variant but `reference` against `reference`; one line saying why when that is impossible.
    `tolerances`: each metric's allowance for a comparison within one boot a side (absent: the metric's default)."""
    _check_confidence(confidence)
    problem = missing_reference(cells, reference)
    if problem is not None:
        return [f"sglang-perf A/B: {problem}"]
    variants = [v for v in _ordered(c.variant for c in cells) if v != reference]
    if not variants:
        what = f"only the reference variant '{reference}' was measured" if cells else "no results"
        return [f"sglang-perf A/B: {what}: nothing to compare"]
    table = _by_key(cells)
    judge = Judge(confidence, tolerances or {})
    lines = [f"sglang-perf A/B against variant '{reference}': {_what(confidence)}{_tag(cells)}"]
    for test_id in _ordered(c.test_id for c in cells):
        lines.append(test_id)
        for variant in variants:
            sides = (table.get((test_id, reference)), table.get((test_id, variant)))
            lines.extend(_pair_lines(f"{variant} vs {reference}", sides, (reference, variant), judge))
    return [*lines, _footnote(cells)]


AB_SPREAD_FOOTNOTE = ("; where both variants' baselines were recorded over several boots, the boot-to-boot spread "
                      "they recorded is in the interval instead")


def _footnote(cells: Sequence[CellSamples]) -> str:
    boots = min((cell.boots for cell in cells), default=1)
    if boots > 1:
        return AB_BOOTS_FOOTNOTE.format(boots=boots)
    return AB_FOOTNOTE + (AB_SPREAD_FOOTNOTE if any(cell.recorded_spread for cell in cells) else "")


def missing_reference(cells: Sequence[CellSamples], reference: str) -> str | None:
    """What is wrong when there are cells but none of `reference`: the variants present; else None."""
    variants = _ordered(c.variant for c in cells)
    if not variants or reference in variants:
        return None
    return f"no results of the reference variant '{reference}'; variants present: {', '.join(variants)}"


def before_after_lines(before: Sequence[CellSamples], after: Sequence[CellSamples],
                       confidence: float = DEFAULT_CONFIDENCE,
                       labels: tuple[str, str] = ("before", "after"),
                       tolerances: Mapping[str, float] | None = None) -> list[str]:
    """Per test and variant, `after` against `before` (e.g. an SGLang upgrade), matched by (test id, variant)."""
    _check_confidence(confidence)
    if not before and not after:
        return [f"sglang-perf before/after: no results in {labels[0]} or {labels[1]}"]
    old, new = _by_key(before), _by_key(after)
    header = f"sglang-perf before/after: {labels[0]} (before) -> {labels[1]} (after): {_what(confidence)}"
    lines = [header + _before_after_tag(before, after, labels)]
    everything = [*before, *after]
    judge = Judge(confidence, tolerances or {})
    for test_id in _ordered(c.test_id for c in everything):
        lines.append(test_id)
        for variant in _ordered(c.variant for c in everything if c.test_id == test_id):
            sides = (old.get((test_id, variant)), new.get((test_id, variant)))
            lines.extend(_pair_lines(variant, sides, labels, judge))
    return [*lines, BEFORE_AFTER_FOOTNOTE]


# One comparison -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judge:
    """How a difference is decided: the confidence level, and each metric's allowance within one boot a side."""

    confidence: float
    tolerances: Mapping[str, float]

    def allowance(self, name: str) -> float:
        """The change one boot may move `name` by: its tolerance as configured, else the metric's default."""
        spec = METRICS.get(name)
        return self.tolerances.get(name, spec.default_tolerance if spec is not None else 0.0)


def _pair_lines(label: str, sides: tuple[CellSamples | None, CellSamples | None], names: tuple[str, str],
                judge: Judge) -> list[str]:
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
    return [f"  {label}: {_metric_text(name, (reference, measured), names, judge)}"
            for name in _metric_names(reference, measured)]


def _where(reference: CellSamples, measured: CellSamples, names: tuple[str, str]) -> str:
    if not reference.values and not measured.values:
        return "on either side"
    return f"in {names[0] if not reference.values else names[1]}"


def _metric_text(name: str, sides: tuple[CellSamples, CellSamples], names: tuple[str, str], judge: Judge) -> str:
    reference, measured = sides
    if not reference.values.get(name) or not measured.values.get(name):
        return f"{name} n/a (no {name} samples in {names[0] if not reference.values.get(name) else names[1]})"
    compared = compare_metric(name, reference, measured, judge)
    if isinstance(compared, str):
        return f"{name} n/a ({compared})"
    low, high = compared.interval
    return f"{name} {_percent(compared.result.change)} [{_percent(low)}, {_percent(high)}] {compared.decision}"


@dataclass(frozen=True)
class Compared:
    """One metric of two cells compared: the difference, its interval at the judge's confidence, the decision."""

    result: LogDifference
    interval: tuple[float, float]
    decision: str

    @property
    def significant(self) -> bool:
        return self.decision.startswith("significant")


def compare_metric(name: str, reference: CellSamples, measured: CellSamples, judge: Judge) -> Compared | str:
    """`measured` against `reference` on one metric both have: between boots when both sides have several (paired by
    round), else within one boot each against the metric's allowance; why no test is possible, as a string."""
    between = reference.boots > 1 and measured.boots > 1
    spreads = [spread for cell in (reference, measured) if (spread := cell.recorded_spread.get(name)) is not None]
    recorded = not between and len(spreads) == 2
    if between:
        result = paired_boots(reference.boot_values(name), measured.boot_values(name))
        why = "needs >= 2 boots a side with positive values"
    else:
        ref, new = reference.values.get(name, ()), measured.values.get(name, ())
        result = log_difference([list(ref)], list(new))
        why = _no_test_reason(ref, new)
        result = with_boot_spread(result, spreads) if result is not None and recorded else result
    if result is None:
        return why
    interval = result.interval(judge.confidence)
    allowance = 0.0 if between or recorded else judge.allowance(name)
    return Compared(result, interval, _decision(name, result, interval, allowance))


def _no_test_reason(reference: Sequence[float], measured: Sequence[float]) -> str:
    if min(len(reference), len(measured)) < 2:
        return f"needs >= 2 samples a side; has {len(reference)} and {len(measured)}"
    if not all(math.isfinite(v) and v > 0 for v in (*reference, *measured)):
        return "needs positive values"
    return "no test possible on these samples"


def _decision(name: str, result: LogDifference, interval: tuple[float, float], allowance: float) -> str:
    """Significant when the interval excludes 0, and, within one boot a side (`allowance` > 0), clears the
    allowance too; never on zero spread. Then better or worse in the metric's direction."""
    low, high = interval
    if result.se == 0:
        return "not significant (no spread: identical values measure no noise)"
    if low <= 0 <= high:
        return "not significant"
    if _reaches_into(interval, allowance):
        return f"not significant (one boot each: within the ±{allowance * 100:g}% a boot may move it)"
    spec = METRICS.get(name)
    if spec is None:
        return f"significant: {'higher' if low > 0 else 'lower'}"
    higher_is_better = spec.direction is Direction.HIGHER_IS_BETTER
    return f"significant: {'better' if (low > 0) == higher_is_better else 'worse'}"


def _reaches_into(interval: tuple[float, float], allowance: float) -> bool:
    """Whether an interval on one side of 0 reaches into the band of ±allowance (so it shows no change beyond it).
    """
    low, high = interval
    return low <= allowance if low > 0 else high >= -allowance


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
                  confidence: float = DEFAULT_CONFIDENCE, tolerances: Mapping[str, float] | None = None,
                  more_boots: Mapping[tuple[str, str], Sequence[Result]] | None = None,
                  spreads: Mapping[tuple[str, str], Mapping[str, BootSpread]] | None = None) -> list[str]:
    """The session's A/B section: every measured variant against `default` (else the first variant measured, in
    matrix order); no lines when fewer than two variants were measured. By (test id, variant): `more_boots`, each
    cell's re-measures on further boots (`--sglang-boots N` in a gate run); `spreads`, the boot spread of its
    baseline recorded over several boots."""
    more, spread = more_boots or {}, spreads or {}
    cells = [replace(CellSamples.from_result(test_id, result, more.get((test_id, variant), ())),
                     recorded_spread=spread.get((test_id, variant), {}))
             for (test_id, variant), result in results.items()]
    return section_lines(cells, variants, confidence, tolerances)


def section_lines(cells: Sequence[CellSamples], variants: Sequence[str],
                  confidence: float = DEFAULT_CONFIDENCE, tolerances: Mapping[str, float] | None = None) -> list[str]:
    """The A/B section of these cells (a session's, or the merged cells of pytest-xdist workers): every measured
    variant against `default` (else the first variant measured, in matrix order); no lines when fewer than two
    variants were measured."""
    measured = [name for name in variants if any(cell.variant == name for cell in cells)]
    if len(measured) < 2:
        return []
    reference = DEFAULT_REFERENCE if DEFAULT_REFERENCE in measured else measured[0]
    return ab_lines(cells, reference, confidence, tolerances)
