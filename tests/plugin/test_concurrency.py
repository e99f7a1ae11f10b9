"""Concurrency sweeps as a user runs them against the simulator's continuous batching: each level is a cell of its
own in baselines and reports, aggregate throughput grows with the batch, "max" is the server's request cap, SLOs give
goodput, and the client never holds a stream back."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from perf_project import LOOSE, write_project

from pytest_sglang_perf.measurement import kernel_stamps

KERNEL_STAMPS = kernel_stamps.available()
SIM = ["--sim-decode-tok-s", "500", "--sim-ttft", "0.05", "--sim-boot-seconds", "0.3"]
"""500 tok/s a stream: one 40-token round lasts ~0.13 s, long enough for the batch to form."""
REQUEST = 'max_tokens = 40\nrepeats = 3\nwarmup = 1\nslo = {ttft = "2s", tpot = "100ms"}\n'
SWEEP = """
def test_tree(sglang_perf):
    sweep = sglang_perf.measure("Write a red-black tree.", concurrency=[1, 4, "max"])
    assert [r.params.concurrency for r in sweep] == [1, 4, 8]
    sglang_perf.check(sweep)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-results", "out.json", *args)


def _cells(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    return {cell["test_id"]: cell for cell in json.loads((pytester.path / "out.json").read_text())["cells"]}


def _words(result: pytest.RunResult) -> str:
    return " ".join(result.stdout.str().split())


def _all_in_flight_together(samples: list[dict[str, Any]]) -> bool:
    """Every round's streams overlapped: each one's first token came before any one's last (none waited for a
    connection that another stream held)."""
    rounds: dict[int, list[dict[str, Any]]] = {}
    for sample in samples:
        rounds.setdefault(sample["round"], []).append(sample)
    return all(max(s["start"] + s["ttft"] for s in r) < min(s["start"] + s["e2e"] for s in r)
               for r in rounds.values())


@pytest.fixture
def swept(pytester: pytest.Pytester) -> pytest.Pytester:
    """A sweep recorded as baselines on a server capped at 8 running requests."""
    write_project(pytester, {"default": ["--max-running-requests", "8"]}, request=REQUEST, sim=SIM, extra=LOOSE)
    pytester.makepyfile(test_load=SWEEP)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)
    return pytester


def test_each_level_is_a_cell_and_the_batch_raises_aggregate_throughput(swept: pytest.Pytester) -> None:
    cells = _cells(swept)
    one, four, most = (cells[f"test_load.py::test_tree{suffix}"] for suffix in ("", "@c4", "@cmax"))
    throughput = [c["summaries"]["output_throughput"]["median"] for c in (one, four, most)]
    assert throughput[1] > 2.5 * throughput[0] and throughput[2] > throughput[1], throughput
    assert "request_throughput" not in one["summaries"] and four["summaries"]["request_throughput"]["n"] == 3
    assert len(four["samples"]) == 12 and {s["round"] for s in four["samples"]} == {0, 1, 2}
    assert most["load"]["streams"] == 8 and most["load"]["concurrency"] == "max" and most["load"]["rounds"] == 3
    assert set(most["load"]["latency_percentiles"]) == {"ttft", "tpot", "itl"}
    assert most["load"]["slo_attainment"] == 1.0 and most["summaries"]["goodput"]["median"] > 0
    assert all(_all_in_flight_together(c["samples"]) for c in (four, most))  # the client held no stream back
    client = most["client"]  # every measured read counted; on Linux, stamped by the kernel as it arrived
    assert client["reads"] >= 8 * 3 * 40 // 4 and 0 <= client["kernel_stamped"] <= client["reads"]
    assert client["chunks"] == sum(s["chunks"] for s in most["samples"]) and 0 <= client["shared"] < client["chunks"]
    if KERNEL_STAMPS:
        assert client["kernel_stamped"] >= 0.9 * client["reads"], client

    [baseline] = (swept.path / "baselines").glob("*.json")
    entries = json.loads(baseline.read_text())["entries"]
    assert entries["test_load.py::test_tree@c4"]["default"]["identity"]["concurrency"] == 4
    assert entries["test_load.py::test_tree@cmax"]["default"]["params"]["slo"] == {"ttft": 2.0, "tpot": 0.1}

    again = _run(swept, "--sglang-markdown", "out.md")
    again.assert_outcomes(passed=1)
    assert {c["verdict"] for c in _cells(swept).values()} <= {"ok", "improved", "inconclusive"}
    words = _words(again)
    assert "sglang-perf: 3 cells:" in words and " 0 new, 0 stale," in words
    assert re.search(r"test_load.py::test_tree@c4 \[default\]: 4 streams x 3 rounds: [\d.]+ tok/s, [\d.]+ req/s; "
                     r"ttft p50/p90/p99 [\d./]+ ms", words), words
    assert "goodput" in words and "(100% met ttft <= 2000 ms, tpot <= 100 ms)" in words
    report = (swept.path / "out.md").read_text()
    load = report[report.index("## Load"):].split("\n## ")[0]
    rows = {line.split(" | ")[0].strip("| `"): line for line in load.splitlines() if line.startswith("| `test_load")}
    assert set(rows) == {"test_load.py::test_tree", "test_load.py::test_tree@c4", "test_load.py::test_tree@cmax"}
    assert re.search(r"\| 8 x 3 \| [\d.]+ tok/s \| [\d.]+ req/s \|( [\d.]+/[\d.]+/[\d.]+ ms \|){3} [\d.]+ req/s "
                     r"\(100% met ttft <= 2000 ms, tpot <= 100 ms\) \|$", rows["test_load.py::test_tree@cmax"]), load
    assert "| 1 x 3 |" in rows["test_load.py::test_tree"] and "| - |" in rows["test_load.py::test_tree"], load


# One more run of the sweep, for its plot (the plots' drawing is unit-tested): slow lane.
@pytest.mark.slow
def test_a_sweep_is_plotted_with_its_levels(swept: pytest.Pytester) -> None:
    result = _run(swept, "--sglang-plots", "plots")
    result.assert_outcomes(passed=1)
    written = sorted(path.name for path in (swept.path / "plots").glob("*.png"))
    assert "sweep__test_load.py-test_tree.png" in written, written
    assert (swept.path / "plots" / "sweep__test_load.py-test_tree.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert re.search(rf"{len(written)} (sglang-perf: )?plot\(s\)", _words(result)), _words(result)  # wrapped anywhere


@pytest.mark.slow
@pytest.mark.calm
def test_a_regressed_level_fails_the_test_by_its_cell_name(swept: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(swept, {"default": ["--max-running-requests", "8"]}, request=REQUEST, sim=SIM,
                  extra=LOOSE.replace('output_throughput = "90%"', 'output_throughput = "25%"'))
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # every step twice as long
    result = _run(swept)
    result.assert_outcomes(failed=1)
    verdicts = {test_id: cell["verdict"] for test_id, cell in _cells(swept).items()}
    assert set(verdicts.values()) == {"regressed"}, verdicts
    result.stdout.fnmatch_lines(["*test_load.py::test_tree@c4 [[]default[]]: regressed*",
                                 "*test_load.py::test_tree@cmax [[]default[]]: regressed*"])


@pytest.mark.slow
def test_a_changed_level_is_stale_and_a_bad_level_is_a_clear_error(swept: pytest.Pytester) -> None:
    project = swept.path / "pyproject.toml"
    project.write_text(project.read_text().replace('"--max-running-requests", "8"', '"--max-running-requests", "6"'))
    swept.makepyfile(test_load=SWEEP.replace("[1, 4, 8]", "[1, 4, 6]"))
    _run(swept).assert_outcomes(passed=1)
    assert _cells(swept)["test_load.py::test_tree@cmax"]["stale"][0] == "concurrency 8 -> 6"

    swept.makepyfile(test_load="""
        def test_zero(sglang_perf):
            sglang_perf.measure("x", concurrency=0)
    """)
    result = _run(swept)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(['*ValueError: measure(concurrency=...): a concurrency level is a whole number from 1 '
                                 'to 1024 or "max", got 0'])


# The limit's message is unit-tested (test_concurrency_metrics.py); this is the user's view: slow lane.
@pytest.mark.slow
def test_max_above_what_the_client_opens_is_refused_with_the_fix(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=REQUEST, sim=SIM)  # the simulator's cap: 4096 requests
    pytester.makepyfile(test_load="""
        def test_max(sglang_perf):
            sglang_perf.measure("x", concurrency="max")
    """)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    assert ('[default] concurrency="max" is 4096 streams here (/server_info effective_max_running_requests_per_dp), '
            "more than the 1024 the client opens at once: cap the server with --max-running-requests in the "
            "variant's args, or pass a number") in _words(result)
