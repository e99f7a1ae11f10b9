"""The seed's engineer ran an SGLang of the 0.5.12-0.5.19 era, with `--enforce-piecewise-cuda-graph`. The simulator
plays that release (`--sim-sglang-version 0.5.19`: its command line from 0.5.19's flag table, its version in
/server_info) and the plugin checks and judges with 0.5.19's flags and rules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from perf_project import FAST_SIM, write_project

SEED_FLAG = ["--enforce-piecewise-cuda-graph"]
TEST = """
def test_short(sglang_perf):
    sglang_perf.check(sglang_perf.measure("hi", max_tokens=32))
"""


def test_a_run_playing_0_5_19_takes_its_flag_and_says_whose_facts_judged_it(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": [], "prefill_graph": SEED_FLAG},
                  sim=[*FAST_SIM, "--sim-sglang-version", "0.5.19"])
    pytester.makepyfile(test_played=TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json")
    result.assert_outcomes(passed=2)
    # the plugin's lines are wrapped, each continuation prefixed with `sglang-perf:` too
    text = " ".join(line.removeprefix("sglang-perf:").strip() for line in result.stdout.lines)
    assert "the simulator plays SGLang 0.5.19 (its command line from that release's flag table)" in text
    assert "rules are used" not in text  # 0.5.19 is judged with its own rules (data/sglang-0.5.19-rules.json)
    assert ("pre-flight [prefill_graph] warning: --enforce-piecewise-cuda-graph is deprecated in SGLang 0.5.19: "
            "SGLang names --cuda-graph-backend-prefill=tc_piecewise instead") in text
    servers = json.loads((pytester.path / "results.json").read_text())["servers"]
    graph = servers["prefill_graph"]["effective"]
    assert graph["verdict"] == "ok" and graph["ran"]["prefill CUDA graph"].startswith("tc_piecewise (captured in ")
    assert graph.get("facts_note") is None
    assert servers["default"]["effective"]["ran"]["prefill CUDA graph"].startswith("breakable (captured in ")


def test_without_the_played_release_the_seeds_flag_is_0_5_23s_unknown_flag(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"prefill_graph": SEED_FLAG})
    pytester.makepyfile(test_played=TEST)
    result = pytester.runpytest("--sglang-simulate")
    result.assert_outcomes(errors=1)
    words = " ".join(result.stdout.str().split())
    assert "there it was deprecated for --cuda-graph-backend-prefill=tc_piecewise" in words


def test_check_simulate_uses_the_played_releases_flags(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"prefill_graph": SEED_FLAG}, sim=[*FAST_SIM, "--sim-sglang-version", "0.5.19"])
    done = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "check", "--simulate"], cwd=pytester.path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked with the flag table of SGLang 0.5.19" in done.stdout
    assert "--enforce-piecewise-cuda-graph is deprecated in SGLang 0.5.19" in done.stdout


def test_the_simulator_plays_only_a_release_it_has_the_flags_of(pytester: pytest.Pytester) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", "m",
                           "--sim-sglang-version", "0.4.6"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "the simulator plays a release it has the flag table of: 0.5.10.post1, 0.5.11" in done.stderr


def test_a_run_playing_0_5_13_prints_its_lines_and_reports_its_fields(pytester: pytest.Pytester) -> None:
    """0.5.13 (docs/sglang-older-releases.md §3.1, §5.1): the prefill graph is the piecewise one, on by default and
    captured after the decode graph with 0.5.13's wording, no `Engine startup timings`; /server_info has no
    cuda_graph_config, each graph its own switch; the plugin judges it with 0.5.13's rules and reads every line: the
    seed's flag asks for what 0.5.13 does anyway."""
    write_project(pytester, {"default": [], "prefill_graph": SEED_FLAG,
                             "eager": ["--disable-piecewise-cuda-graph", "--disable-cuda-graph"]},
                  sim=[*FAST_SIM, "--sim-sglang-version", "0.5.13"])
    pytester.makepyfile(test_played=TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-results=results.json", "--sglang-log-dir=logs")
    result.assert_outcomes(passed=3)
    log = (pytester.path / "logs" / "default.log").read_text()
    captures = [line.split("] ", 1)[1].split(" [")[0].split(". ")[0]
                for line in log.splitlines() if "] Capture " in line]
    assert captures == ["Capture cuda graph begin", "Capture cuda graph bs", "Capture cuda graph end",
                        "Capture piecewise CUDA graph begin", "Capture cuda graph num tokens",
                        "Capture piecewise CUDA graph end"]
    assert "Time elapsed:" in log and "Engine startup timings" not in log and "cuda_graph_config" not in log
    servers = json.loads((pytester.path / "results.json").read_text())["servers"]
    effective = {name: server["effective"] for name, server in servers.items()}
    assert {name: item["verdict"] for name, item in effective.items()} == {
        "default": "ok", "prefill_graph": "duplicate", "eager": "ok"}, effective
    assert all(item.get("facts_note") is None for item in effective.values())
    assert effective["default"]["ran"]["prefill CUDA graph"].startswith("piecewise (captured in ")
    assert "tokens 4.." in effective["default"]["ran"]["prefill CUDA graph"]
    assert effective["default"]["ran"]["decode CUDA graph"].startswith("full (captured in ")
    assert (effective["eager"]["ran"]["prefill CUDA graph"], effective["eager"]["ran"]["decode CUDA graph"]) == (
        "disabled", "disabled")
