"""A/B answers (gate/ab.py): lines, the significance decision, direction words, n/a lines, before/after."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from pytest_sglang_perf.gate.ab import (
    AB_FOOTNOTE,
    AB_SPREAD_FOOTNOTE,
    BEFORE_AFTER_FOOTNOTE,
    CellSamples,
    ab_lines,
    before_after_lines,
)
from pytest_sglang_perf.gate.statistics import boot_spread
from pytest_sglang_perf.measurement.samples import Sample

TEST = "tests/perf/test_prompts.py::test_red_black_tree"
NOISE = (0.97, 0.99, 1.0, 1.01, 1.03, 0.98, 1.02, 1.0)
"""Relative request-to-request spread of about 2%."""
LINE = re.compile(r"  (?P<label>.+): (?P<metric>\w+) (?P<change>[+-]\d+\.\d)% \[(?P<low>[+-]\d+\.\d)%, "
                  r"(?P<high>[+-]\d+\.\d)%\] (?P<decision>.+)")


def cell(variant: str, test_id: str = TEST, simulated: bool = False, prompt_hash: str | None = None,
         **values: tuple[float, ...]) -> CellSamples:
    return CellSamples(test_id, variant, simulated, values, prompt_hash)


def noisy(center: float, noise: tuple[float, ...] = NOISE) -> tuple[float, ...]:
    return tuple(center * n for n in noise)


def parsed(line: str) -> re.Match[str]:
    match = LINE.fullmatch(line)
    assert match is not None, line
    return match


def test_zero_spread_is_never_significant() -> None:
    """Identical values on each side measure no noise at all: the interval is the point, and no change is called
    significant on it, however large (the issue's `+0.0% [+0.0%, +0.0%] significant: better`)."""
    cells = [cell("default", output_throughput=(100.0, 100.0, 100.0), ttft=(0.2, 0.2)),
             cell("prefill_graph", output_throughput=(150.0, 150.0), ttft=(0.2, 0.2))]
    assert ab_lines(cells) == [
        "sglang-perf A/B against variant 'default': change of the geometric mean, 95% confidence interval",
        TEST,
        "  prefill_graph vs default: output_throughput +50.0% [+50.0%, +50.0%] not significant (no spread: "
        "identical values measure no noise)",
        "  prefill_graph vs default: ttft +0.0% [+0.0%, +0.0%] not significant (no spread: identical values "
        "measure no noise)",
        AB_FOOTNOTE,
    ]
    assert "not a boot's own offset" in AB_FOOTNOTE and "--sglang-boots N" in AB_FOOTNOTE


TIGHT = (0.999, 1.0, 1.001, 1.0, 0.999, 1.001)
"""A request spread of about 0.1%: a boot's offset of a few percent is far outside it."""


@pytest.mark.parametrize(("metric", "shift", "tolerance"), [
    ("output_throughput", 1.03, 0.05), ("ttft", 1.08, 0.10), ("tpot", 0.93, 0.10),
])
def test_within_one_boot_a_change_inside_the_tolerance_is_not_an_effect(metric: str, shift: float,
                                                                        tolerance: float) -> None:
    """One boot a side: the interval excludes 0 by far (the requests barely vary), but a boot may move the metric
    by its tolerance, so the change is not called significant; the line says why."""
    cells = [CellSamples(TEST, "default", False, {metric: noisy(10.0, TIGHT)}),
             CellSamples(TEST, "sbo", False, {metric: noisy(10.0 * shift, TIGHT)})]
    match = parsed(ab_lines(cells)[2])
    assert float(match["low"]) * (shift - 1) > 0 and float(match["high"]) * (shift - 1) > 0
    assert match["decision"] == f"not significant (one boot each: within the ±{tolerance * 100:g}% a boot may move it)"


def test_within_one_boot_the_configured_tolerance_is_the_allowance() -> None:
    cells = [CellSamples(TEST, "default", False, {"output_throughput": noisy(10.0, TIGHT)}),
             CellSamples(TEST, "sbo", False, {"output_throughput": noisy(10.3, TIGHT)})]
    assert parsed(ab_lines(cells, tolerances={"output_throughput": 0.02})[2])["decision"] == "significant: better"
    assert parsed(ab_lines(cells, tolerances={"output_throughput": 0.04})[2])["decision"].startswith(
        "not significant (one boot each: within the ±4%")


def test_an_interval_that_reaches_into_the_allowance_is_not_significant() -> None:
    """+7% measured, but the interval's low end is inside the 5% band: no change beyond it is shown."""
    cells = [cell("default", output_throughput=noisy(10.0)), cell("sbo", output_throughput=noisy(10.7))]
    match = parsed(ab_lines(cells)[2])
    assert 0 < float(match["low"]) < 5 < float(match["change"])
    assert match["decision"].startswith("not significant (one boot each")


def test_within_one_boot_a_recorded_boot_spread_replaces_the_tolerance() -> None:
    """Both variants' baselines recorded over 3 boots (`--sglang-boots 3`): the spread those boots show is in the
    interval. Boots that varied by ~5% make a +7% one-boot difference noise (the tolerance rule called the same
    difference significant); boots that varied by ~0.1% make a +3% difference, inside the tolerance, an effect."""
    wide = boot_spread([noisy(10.0 * o, TIGHT) for o in (1.0, 1.05, 0.95)])
    narrow = boot_spread([noisy(10.0 * o, TIGHT) for o in (1.0, 1.001, 0.999)])
    assert wide is not None and narrow is not None and wide.df == narrow.df == 2
    big = [CellSamples(TEST, "default", False, {"output_throughput": noisy(10.0, TIGHT)}),
           CellSamples(TEST, "sbo", False, {"output_throughput": noisy(10.7, TIGHT)})]
    assert parsed(ab_lines(big)[2])["decision"] == "significant: better"
    spread = [replace(c, recorded_spread={"output_throughput": wide}) for c in big]
    lines = ab_lines(spread)
    assert parsed(lines[2])["decision"] == "not significant"
    assert lines[-1] == AB_FOOTNOTE + AB_SPREAD_FOOTNOTE
    small = [CellSamples(TEST, "default", False, {"output_throughput": noisy(10.0, TIGHT)},
                         recorded_spread={"output_throughput": narrow}),
             CellSamples(TEST, "sbo", False, {"output_throughput": noisy(10.3, TIGHT)},
                         recorded_spread={"output_throughput": narrow})]
    assert parsed(ab_lines(small)[2])["decision"] == "significant: better"
    one_side = [small[0], replace(small[1], recorded_spread={})]  # a spread on one side only: the tolerance rule
    assert parsed(ab_lines(one_side)[2])["decision"].startswith("not significant (one boot each")


def booted(variant: str, *boots: tuple[float, ...]) -> CellSamples:
    """A cell measured on several boots (`--sglang-boots N`), output_throughput only."""
    first, *more = boots
    return CellSamples(TEST, variant, False, {"output_throughput": first}, None, 1,
                       tuple({"output_throughput": values} for values in more))


def test_between_boots_offsets_are_noise_and_a_change_that_holds_across_boots_is_significant() -> None:
    """Three boots a side, in turns: boot offsets of several percent that do not follow the variant are in the
    interval (not significant); a 3% change that holds in every round is significant, though within the tolerance
    (the test is between boots, so no allowance is needed)."""
    offsets_a, offsets_b = (1.0, 1.06, 0.95), (1.05, 0.96, 1.01)
    same = [booted("default", *(noisy(10.0 * o, TIGHT) for o in offsets_a)),
            booted("sbo", *(noisy(10.0 * o, TIGHT) for o in offsets_b))]
    lines = ab_lines(same)
    assert parsed(lines[2])["decision"] == "not significant"
    assert lines[-1] == ("note: between boots: each variant booted 3 times in turns (A B, B A, A B, ...), boots "
                         "paired by round, so boot offsets and drift are in these intervals")
    drift = (1.0, 0.97, 0.94)  # the host slows down round by round; each round's pair shares it
    effect = [booted("default", *(noisy(10.0 * d, TIGHT) for d in drift)),
              booted("sbo", *(noisy(10.0 * d * f, TIGHT) for d, f in zip(drift, (1.031, 1.029, 1.030), strict=True)))]
    match = parsed(ab_lines(effect)[2])
    assert match["change"] == "+3.0" and match["decision"] == "significant: better"


def test_between_boots_zero_spread_and_too_few_rounds() -> None:
    exact = [booted("default", (10.0, 10.0), (10.0, 10.0)), booted("sbo", (12.0, 12.0), (12.0, 12.0))]
    assert parsed(ab_lines(exact)[2])["decision"] == "not significant (no spread: identical values measure no noise)"
    one_side = [booted("default", noisy(10.0), noisy(10.0)), booted("sbo", noisy(10.0), ())]
    assert ab_lines(one_side)[2] == ("  sbo vs default: output_throughput n/a (needs >= 2 boots a side with positive "
                                     "values)")


def test_the_change_is_the_ratio_of_geometric_means_and_lies_in_its_interval() -> None:
    reference, measured = (90.0, 100.0, 110.0, 105.0), (120.0, 130.0, 125.0, 128.0)
    ratio = math.exp(sum(map(math.log, measured)) / 4 - sum(map(math.log, reference)) / 4) - 1
    line = ab_lines([cell("default", output_throughput=reference), cell("sbo", output_throughput=measured)])[2]
    match = parsed(line)
    assert match["label"] == "sbo vs default" and match["metric"] == "output_throughput"
    assert match["change"] == f"{ratio * 100:+.1f}"
    assert float(match["low"]) < float(match["change"]) < float(match["high"])


@pytest.mark.parametrize(("metric", "better_when_higher"), [
    ("output_throughput", True), ("decode_throughput", True), ("accept_length", True),
    ("ttft", False), ("tpot", False),
])
@pytest.mark.parametrize("factor", [1.3, 0.7])
def test_a_large_shift_is_significant_in_the_metrics_own_direction(
        metric: str, better_when_higher: bool, factor: float) -> None:
    cells = [CellSamples(TEST, "default", False, {metric: noisy(10.0)}),
             CellSamples(TEST, "prefill_graph", False, {metric: noisy(10.0 * factor)})]
    match = parsed(ab_lines(cells)[2])
    assert match["metric"] == metric
    assert match["change"] == f"{(factor - 1) * 100:+.1f}"
    assert float(match["low"]) * (factor - 1) > 0 and float(match["high"]) * (factor - 1) > 0
    better = (factor > 1) == better_when_higher
    assert match["decision"] == ("significant: better" if better else "significant: worse")


def test_identical_distributions_are_not_significant() -> None:
    cells = [cell("default", output_throughput=noisy(50.0), ttft=noisy(0.3)),
             cell("prefill_graph", output_throughput=noisy(50.0), ttft=noisy(0.3))]
    for line in ab_lines(cells)[2:4]:
        match = parsed(line)
        assert match["change"] == "+0.0"
        assert float(match["low"]) < 0 < float(match["high"])
        assert match["decision"] == "not significant"


def test_a_small_shift_in_noisy_samples_is_not_significant_and_a_wider_confidence_widens_the_interval() -> None:
    cells = [cell("default", ttft=noisy(0.3)), cell("sbo", ttft=noisy(0.303))]
    narrow, wide = parsed(ab_lines(cells, confidence=0.8)[2]), parsed(ab_lines(cells, confidence=0.99)[2])
    assert narrow["decision"] == wide["decision"] == "not significant"
    assert float(wide["low"]) < float(narrow["low"]) and float(narrow["high"]) < float(wide["high"])
    assert "99% confidence interval" in ab_lines(cells, confidence=0.99)[0]


def test_every_variant_is_compared_with_the_reference_grouped_under_each_test() -> None:
    other = "tests/perf/test_prompts.py::test_haiku"
    cells = [cell(v, test_id=t, output_throughput=noisy(20.0))
             for t in (TEST, other) for v in ("default", "prefill_graph", "sbo")]
    lines = ab_lines(cells)
    assert [line.split(":")[0] if line.startswith("  ") else line for line in lines[1:-1]] == [
        TEST, "  prefill_graph vs default", "  sbo vs default",
        other, "  prefill_graph vs default", "  sbo vs default",
    ]
    against_sbo = ab_lines(cells, reference="sbo")
    assert against_sbo[0].startswith("sglang-perf A/B against variant 'sbo'")
    assert [line.split(":")[0] for line in against_sbo[2:4]] == ["  default vs sbo", "  prefill_graph vs sbo"]


def test_no_test_possible_says_why_in_the_line() -> None:
    cells = [
        cell("default", output_throughput=(10.0,), ttft=(0.1, 0.2), accept_length=(3.0, 3.1)),
        cell("prefill_graph", output_throughput=(10.0, 11.0, 12.0), ttft=(0.0, 0.2)),
    ]
    assert ab_lines(cells)[2:5] == [
        "  prefill_graph vs default: output_throughput n/a (needs >= 2 samples a side; has 1 and 3)",
        "  prefill_graph vs default: ttft n/a (needs positive values)",
        "  prefill_graph vs default: accept_length n/a (no accept_length samples in prefill_graph)",
    ]


def test_a_missing_variant_or_empty_samples_get_an_na_line() -> None:
    cells = [cell("default", output_throughput=noisy(1.0)), cell("sbo", output_throughput=noisy(1.0)),
             cell("default", test_id="test_b", output_throughput=noisy(1.0)), cell("sbo", test_id="test_b"),
             cell("prefill_graph", test_id="test_c", output_throughput=noisy(1.0))]
    lines = ab_lines(cells)
    assert parsed(lines[2])["label"] == "sbo vs default"
    assert lines[3:-1] == [
        "  prefill_graph vs default: n/a (no result in prefill_graph)",
        "test_b",
        "  sbo vs default: n/a (no samples in sbo)",
        "  prefill_graph vs default: n/a (no result in prefill_graph)",
        "test_c",
        "  sbo vs default: n/a (no result in default)",
        "  prefill_graph vs default: n/a (no result in default)",
    ]
    both_empty = [cell("default"), cell("sbo")]
    assert ab_lines(both_empty)[2] == "  sbo vs default: n/a (no samples on either side)"


def test_different_prompts_are_not_compared() -> None:
    cells = [cell("default", prompt_hash="sha256:aa", ttft=noisy(0.1)),
             cell("sbo", prompt_hash="sha256:bb", ttft=noisy(0.1))]
    assert ab_lines(cells)[2] == "  sbo vs default: n/a (different prompts: sha256:aa vs sha256:bb)"


def test_a_missing_reference_is_one_line_naming_the_variants_present() -> None:
    cells = [cell("prefill_graph", ttft=noisy(0.1)), cell("sbo", ttft=noisy(0.1))]
    assert ab_lines(cells) == ["sglang-perf A/B: no results of the reference variant 'default'; variants present: "
                               "prefill_graph, sbo"]
    assert ab_lines([cell("default", ttft=noisy(0.1))]) == [
        "sglang-perf A/B: only the reference variant 'default' was measured: nothing to compare"]
    assert ab_lines([]) == ["sglang-perf A/B: no results: nothing to compare"]


def test_simulated_results_are_labelled_in_the_header() -> None:
    real = [cell("default", ttft=noisy(0.1)), cell("sbo", ttft=noisy(0.1))]
    mixed = [real[0], cell("sbo", simulated=True, ttft=noisy(0.1))]
    assert "SIMULATED" not in "\n".join(ab_lines(real))
    assert ab_lines(mixed)[0].endswith("95% confidence interval (SIMULATED)")


@pytest.mark.parametrize("confidence", [0.0, 1.0, 95.0, -0.5])
def test_a_confidence_outside_0_1_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        ab_lines([cell("default", ttft=noisy(0.1))], confidence=confidence)
    with pytest.raises(ValueError, match="between 0 and 1"):
        before_after_lines([], [], confidence=confidence)


# Before / after ---------------------------------------------------------------------------------------------

def test_before_after_matches_by_test_and_variant_and_names_a_cell_on_one_side() -> None:
    before = [cell("default", output_throughput=noisy(100.0)), cell("sbo", output_throughput=noisy(100.0)),
              cell("default", test_id="test_gone", output_throughput=noisy(1.0))]
    after = [cell("sbo", output_throughput=noisy(100.0)), cell("default", output_throughput=noisy(80.0)),
             cell("prefill_graph", output_throughput=noisy(1.0))]
    lines = before_after_lines(before, after, labels=("old.json", "new.json"))
    assert lines[0] == ("sglang-perf before/after: old.json (before) -> new.json (after): change of the geometric "
                        "mean, 95% confidence interval")
    assert lines[1] == TEST and lines[-1] == BEFORE_AFTER_FOOTNOTE
    default, sbo = parsed(lines[2]), parsed(lines[3])
    assert (default["label"], default["change"], default["decision"]) == ("default", "-20.0", "significant: worse")
    assert (sbo["label"], sbo["change"], sbo["decision"]) == ("sbo", "+0.0", "not significant")
    assert lines[4:-1] == ["  prefill_graph: n/a (no result in old.json)", "test_gone",
                           "  default: n/a (no result in new.json)"]
    assert "only a change beyond the metric's tolerance is called significant" in BEFORE_AFTER_FOOTNOTE


def test_before_after_labels_simulated_sides() -> None:
    real, simulated = [cell("default", ttft=noisy(0.1))], [cell("default", simulated=True, ttft=noisy(0.1))]
    assert "SIMULATED" not in before_after_lines(real, real)[0]
    assert before_after_lines(simulated, simulated)[0].endswith(" (SIMULATED)")
    assert before_after_lines(real, simulated)[0].endswith(" (SIMULATED: after)")
    assert before_after_lines([], []) == ["sglang-perf before/after: no results in before or after"]


def test_before_after_with_too_few_samples_says_so() -> None:
    lines = before_after_lines([cell("default", ttft=(0.1,))], [cell("default", ttft=(0.1, 0.2))])
    assert lines[2] == "  default: ttft n/a (needs >= 2 samples a side; has 1 and 2)"


# Building CellSamples ---------------------------------------------------------------------------------------

def sample(e2e: float, completion_tokens: int = 101, spec_verify_ct: int | None = None) -> Sample:
    return Sample(ttft=0.1, e2e=e2e, decode_time=e2e - 0.1, completion_tokens=completion_tokens,
                  prompt_tokens=20, chunks=completion_tokens, spec_verify_ct=spec_verify_ct)


def test_cell_samples_from_samples_holds_each_requests_metrics() -> None:
    built = CellSamples.from_samples(TEST, "default", True, [sample(2.0), sample(4.0, completion_tokens=1)], "h")
    assert (built.test_id, built.variant, built.simulated, built.prompt_hash) == (TEST, "default", True, "h")
    assert built.values["output_throughput"] == (101 / 2.0, 1 / 4.0)
    assert built.values["ttft"] == (0.1, 0.1)
    assert built.values["decode_throughput"] == pytest.approx((100 / 1.9,))  # no decode for one token
    assert "accept_length" not in built.values


def test_cell_samples_from_a_results_cell_ignores_unknown_fields() -> None:
    data = {"test_id": TEST, "variant": "sbo", "simulated": False, "verdict": "ok", "future_field": [1],
            "samples": [sample(2.0, spec_verify_ct=50).to_dict(), sample(3.0, spec_verify_ct=25).to_dict()],
            "prompt_hash": "sha256:beef"}
    built = CellSamples.from_results_cell(data)
    assert (built.variant, built.prompt_hash) == ("sbo", "sha256:beef")
    assert built.values["accept_length"] == (101 / 50, 101 / 25)


@pytest.mark.parametrize(("change", "message"), [
    ({"variant": None}, "'test_id' and 'variant' must be strings"),
    ({"samples": None}, "'samples' a list"),
    ({"samples": [{"ttft": 0.1}]}, "sample 0 is malformed"),
    ({"samples": [{**sample(1.0).to_dict(), "e2e": 0.0}]}, "sample 0 is malformed .*ZeroDivisionError"),
])
def test_a_malformed_results_cell_is_a_value_error(change: dict[str, object], message: str) -> None:
    data = {"test_id": TEST, "variant": "sbo", "simulated": False, "samples": [], **change}
    with pytest.raises(ValueError, match=message):
        CellSamples.from_results_cell(data)


def test_the_default_ab_section_keeps_the_significant_comparisons_and_counts_the_rest() -> None:
    from pytest_sglang_perf.report.sections import significant_only

    section = ["sglang-perf A/B against variant 'default': ...", "t.py::test_a",
               "  fast vs default: ttft -18.2% [-20.3%, -16.1%] significant: better",
               "  fast vs default: tpot +0.1% [-0.5%, +0.7%] not significant", "t.py::test_b",
               "  fast vs default: ttft +0.4% [-1.1%, +1.9%] not significant", "note: ..."]
    assert significant_only(section) == [
        "sglang-perf A/B against variant 'default': ...", "t.py::test_a",
        "  fast vs default: ttft -18.2% [-20.3%, -16.1%] significant: better",
        "(2 comparison(s) not significant; -v shows every comparison)", "note: ..."]
    nothing_significant = [section[0], section[1], section[3], section[4], section[5], section[6]]
    assert significant_only(nothing_significant) == [
        "sglang-perf A/B against variant 'default': ...",
        "(2 comparison(s) not significant; -v shows every comparison)"]
    everything_significant = [line for line in section if not line.endswith("not significant")]
    assert significant_only(everything_significant) == everything_significant
    assert significant_only(["sglang-perf A/B: nothing to compare"]) == ["sglang-perf A/B: nothing to compare"]
