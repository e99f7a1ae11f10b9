"""The A/B section against real simulator processes: one boot a variant never calls a boot's offset an effect, and
`--sglang-boots N` in a gate run boots every variant N times in turns and tests between the boots."""

from __future__ import annotations

import re

import pytest
from perf_project import FAST_SIM, LOOSE, write_project

TEST = """from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_rbt(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))
"""
NOISY = [*FAST_SIM, "--sim-noise", "0.005", "--sim-boot-noise", "0.04", "--sim-ttft", "0.2"]
"""Each boot draws its own offset of about 4% (its label seeds it), each request a jitter of 0.5%: one boot's
requests vary far less than two boots do, as on a GPU whose boots differ in clocks or memory layout. A TTFT of
0.2 s keeps a busy host's own delays small beside the offsets."""
AB_LINE = re.compile(r"  sbo vs default: (?P<metric>\w+) [+-]\d+\.\d% \[[+-]\d+\.\d%, [+-]\d+\.\d%\] (?P<decision>.+)")


def ab_decisions(lines: list[str]) -> dict[str, str]:
    """Each metric's decision in the A/B section's lines."""
    found = {}
    for line in lines:
        match = AB_LINE.fullmatch(line)
        if match is not None:
            found[match["metric"]] = match["decision"]
    return found


@pytest.mark.slow
def test_interleaved_boots_of_identical_variants_call_nothing_significant(pytester: pytest.Pytester) -> None:
    """Two variants whose flag changes nothing on the simulator, 3% boot noise: with --sglang-boots 3 each variant
    is booted 3 times, in turns, every other round reversed (the tests' default, sbo; then sbo, default; then
    default, sbo), its cell re-measured on every boot, and the A/B tests between the boots: nothing is
    significant, and the section says what it compared."""
    write_project(pytester, {"default": [], "sbo": ["--enable-single-batch-overlap"]}, extra=LOOSE, sim=NOISY,
                  request="max_tokens = 64\nrepeats = 4\nwarmup = 1\n")
    pytester.makepyfile(test_ab_project=TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-boots", "3", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    lines = result.outlines
    rounds = [line for line in lines if "A/B between boots: boot" in line]
    assert [re.sub(r" \(.*", "", line.split("] ")[-1]) for line in rounds] == [
        "A/B between boots: boot 2 of 3", "A/B between boots: boot 2 of 3",
        "A/B between boots: boot 3 of 3", "A/B between boots: boot 3 of 3"]
    assert [line.split("]")[0].split("[")[-1] for line in rounds] == ["sbo", "default", "default", "sbo"]
    decisions = ab_decisions(lines)
    assert decisions and set(decisions.values()) <= {"not significant",
                                                      "not significant (no spread: identical values measure no noise)"}
    assert ("note: between boots: each variant booted 3 times in turns (A B, B A, A B, ...), boots paired by round, "
            "so boot offsets and drift are in these intervals") in lines


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
@pytest.mark.calm
def test_one_boot_a_variant_calls_no_offset_within_the_tolerance_significant(pytester: pytest.Pytester) -> None:
    """One boot each, tolerances as the metrics' defaults (5% throughput, 10% ttft/tpot): the two boots' offsets put
    the intervals away from 0 (the requests barely vary), but none is called significant, and the lines and the
    footnote say why."""
    write_project(pytester, {"default": [], "sbo": ["--enable-single-batch-overlap"]}, sim=NOISY,
                  request="max_tokens = 64\nrepeats = 8\nwarmup = 1\n")
    pytester.makepyfile(test_ab_project=TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    decisions = ab_decisions(result.outlines)
    assert decisions and not any(decision.startswith("significant") for decision in decisions.values())
    assert any(decision.startswith("not significant (one boot each: within the") for decision in decisions.values())
    assert any(line.startswith("note: one server boot a variant: these intervals hold the requests' spread")
               for line in result.outlines)


@pytest.mark.slow  # a recording over 3 boots a variant, then a gate run: ~15 s
def test_one_boot_a_variant_uses_the_boot_spread_the_baselines_recorded(pytester: pytest.Pytester) -> None:
    """Baselines recorded over 3 boots a variant (`--sglang-update-baselines --sglang-boots 3`): a gate run of one
    boot each puts the spread those boots showed in the A/B interval instead of the tolerance, and says so; with 4%
    boot noise, two identical variants are still not significant."""
    write_project(pytester, {"default": [], "sbo": ["--enable-single-batch-overlap"]}, extra=LOOSE, sim=NOISY,
                  request="max_tokens = 64\nrepeats = 4\nwarmup = 1\n")
    pytester.makepyfile(test_ab_project=TEST)
    pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "--sglang-boots", "3",
                       "-p", "no:randomly").assert_outcomes(passed=2)
    result = pytester.runpytest("--sglang-simulate", "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    decisions = ab_decisions(result.outlines)
    assert decisions and not any(decision.startswith("significant") for decision in decisions.values())
    assert not any("(one boot each: within the" in decision for decision in decisions.values())  # not the tolerance
    text = " ".join(line.strip() for line in result.outlines)  # the footnote may be wrapped
    assert "the boot-to-boot spread they recorded is in the interval instead" in text
