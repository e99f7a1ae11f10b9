"""The server's own view beside the client's: while a cell is measured, SGLang's `Decode batch` lines (the
simulator writes them as SGLang does) and, with --enable-metrics, its /metrics counters are read, and the report and
the results file show the server's accept length and generation throughput next to the client's
(measurement/server_view.py says how they differ by definition)."""

from __future__ import annotations

import json
import re

import pytest
from perf_project import write_project

SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4", "--enable-metrics"]
TEST = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_rbt(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))


def test_rbt_four_streams(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, concurrency=4, max_tokens=160))
"""


def test_a_speculative_cell_shows_the_servers_accept_length_and_throughput_beside_the_clients(
        pytester: pytest.Pytester) -> None:
    write_project(pytester, {"mtp": SPEC, "plain": []}, request="max_tokens = 300\nrepeats = 3\nwarmup = 1\n",
                  sim=["--sim-decode-tok-s", "600", "--sim-ttft", "0.02", "--sim-accept-length", "2.5",
                       "--sim-boot-seconds", "0.3"])
    pytester.makepyfile(test_spec=TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json", "--sglang-log-dir=logs")
    result.assert_outcomes(passed=4)
    words = " ".join(result.stdout.str().split())
    assert "sglang-perf server's view: SGLang's own Decode batch lines, beside the client (SIMULATED)" in words
    line = re.search(r"test_spec\.py::test_rbt \[mtp\]: server: gen throughput ([\d.]+) tok/s, accept len ([\d.]+) "
                     r"\((\d+) decode windows, cuda graph (\d+)/(\d+)\); /metrics: accept length ([\d.]+); client: "
                     r"decode ([\d.]+) tok/s, accept length ([\d.]+)", words)
    assert line is not None, words
    server_accept, metrics_accept, client_accept = float(line[2]), float(line[6]), float(line[8])
    assert abs(metrics_accept - client_accept) < 0.05 * client_accept  # the same requests' tokens per verify
    assert abs(server_accept - client_accept) < 0.15 * client_accept  # one stream: the same steps, averaged apart
    assert line[4] == line[5] and int(line[3]) >= 2
    assert "[plain]: server:" not in words  # not speculative: listed with -v only
    every = json.loads((pytester.path / "results.json").read_text())["cells"]
    cells = {cell["variant"]: cell for cell in every if cell["test_id"].endswith("test_rbt")}
    [four] = [cell["server_view"] for cell in every if cell["variant"] == "mtp" and "four" in cell["test_id"]]
    assert four["max_running_req"] == 4 and four["findings"] == []  # the accept lengths are held at 4 streams too
    assert abs(four["accept_len"] - four["metrics_accept_len"]) < 0.15 * four["metrics_accept_len"]
    view = cells["mtp"]["server_view"]
    assert view["accept_len"] == pytest.approx(server_accept, abs=0.01) and view["findings"] == []
    assert view["metrics_accept_len"] == pytest.approx(metrics_accept, abs=0.01)
    plain = cells["plain"]["server_view"]
    assert plain["accept_len"] is None and plain["metrics_accept_len"] is None and plain["windows"] >= 2
    asked = {log.name: "GET /metrics" in log.read_text() for log in (pytester.path / "logs").rglob("*.log")}
    assert sorted(asked.values()) == [False, True], asked  # only the server with --enable-metrics is asked
