"""No silent metric loss, as a user meets it: a request whose content arrived in one read (the simulator's
`burst-at:N` fault) keeps its other metrics; tpot and decode_throughput are gated on the other samples and the
report says how many samples defined them. A metric the baseline has and a run cannot measure stays in the table.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from perf_project import FAST_SIM, LOOSE, write_project

REQUEST = "max_tokens = 20\nrepeats = 4\nwarmup = 1\n"
TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("hello"))
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-results", "out.json", *args)


def _words(result: pytest.RunResult) -> str:
    """The output with its wrapped lines joined (long report lines wrap at the terminal's width)."""
    return " ".join(result.stdout.str().split())


def _cell(pytester: pytest.Pytester) -> dict[str, Any]:
    [cell] = json.loads((pytester.path / "out.json").read_text())["cells"]
    return dict(cell)


def test_a_sample_that_arrived_in_one_read_is_kept_counted_and_shown(pytester: pytest.Pytester) -> None:
    # request 3 = the second measured one (request 1 is the warmup)
    write_project(pytester, {"default": []}, request=REQUEST, sim=[*FAST_SIM, "--sim-fault", "burst-at:3"])
    pytester.makepyfile(test_p=TEST)
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    assert ("test_p.py::test_p: samples that define each metric: decode_throughput: 3/4 samples (1 arrived in one "
            "read); tpot: 3/4 samples (1 arrived in one read)") in _words(result)
    cell = _cell(pytester)
    assert len(cell["samples"]) == 4
    assert [s["decode_time"] == 0 for s in cell["samples"]] == [False, True, False, False]
    assert cell["metrics"]["tpot"]["n"] == cell["metrics"]["decode_throughput"]["n"] == 3
    assert cell["metrics"]["output_throughput"]["n"] == cell["metrics"]["ttft"]["n"] == 4
    assert cell["metrics"]["tpot"]["note"] == "tpot: 3/4 samples (1 arrived in one read)"


@pytest.mark.slow
@pytest.mark.calm
def test_a_metric_the_run_cannot_measure_is_reported_not_dropped(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=REQUEST, sim=FAST_SIM, extra=LOOSE)
    pytester.makepyfile(test_p=TEST)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)

    one = "max_tokens = 20\nrepeats = 1\nwarmup = 0\n"  # the only request arrives in one read
    write_project(pytester, {"default": []}, request=one, sim=[*FAST_SIM, "--sim-fault", "burst-at:1"],
                  extra=LOOSE)
    result = _run(pytester)
    result.assert_outcomes(passed=1)
    metrics = _cell(pytester)["metrics"]
    for name in ("tpot", "decode_throughput"):
        assert metrics[name]["measured"] is None and metrics[name]["baseline"] is not None
        assert metrics[name]["verdict"] == "inconclusive"
        assert metrics[name]["note"] == f"{name}: 0/1 samples (1 arrived in one read)"
    assert "tpot: 0/1 samples (1 arrived in one read)" in _words(result)
    result.stdout.fnmatch_lines(["*  tpot  * ms  *-  *inconclusive*"])
