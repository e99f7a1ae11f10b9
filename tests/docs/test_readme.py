"""The README's Quick Start, executed as written: its files and its commands, with and without the simulator."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAST = {"SGLANG_SIM_DECODE_TOK_S": "2000", "SGLANG_SIM_TTFT": "0.1", "SGLANG_SIM_BOOT_SECONDS": "0.2"}
"""The simulator's speed knobs, from the environment: the Quick Start's files stay as written, and its 512-token
requests take a quarter of a second instead of the ~10 s the simulated 2x RTX A6000 would take at 53 tok/s. Not
faster: a busy 2-core machine delays a token by milliseconds, which must stay well inside the default tolerances."""


KEPT = {"SGLANG_PERF_IGNORE_CONDITIONS"}
"""Kept from the suite's environment (the root conftest.py): a recording refused because the CI host was busy is
tests/plugin/test_conditions.py's subject, not the Quick Start's (one CI run refused one here)."""


def _blocks(lang: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def _quick_start_commands() -> list[list[str]]:
    """The `$ pytest ...` lines of the Quick Start's console block, as argument lists (comments dropped)."""
    block = _blocks("console")[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("$ ")]
    return [shlex.split(line)[2:] for line in lines]  # without "$" and "pytest"


@pytest.fixture
def quick_start(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project made of the Quick Start's two files, exactly as the README writes them (paths included)."""
    files = {}
    for block in (_blocks("toml")[0], _blocks("python")[0]):
        first = block.split("\n", 1)[0]
        files[first.removeprefix("# ").strip()] = block
    assert set(files) == {"pyproject.toml", "tests/perf/test_prompts.py"}
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name in [n for n in os.environ if n.startswith(("SGLANG_PERF_", "SGLANG_SIM_")) and n not in KEPT]:
        monkeypatch.delenv(name)
    for knob, value in FAST.items():
        monkeypatch.setenv(knob, value)
    return pytester


@pytest.mark.slow
@pytest.mark.calm
def test_quick_start_runs_as_written_on_the_simulator(quick_start: pytest.Pytester) -> None:
    _, simulated, update = _quick_start_commands()
    assert simulated == ["tests/perf", "--sglang-simulate"] and update[-1] == "--sglang-update-baselines"

    first = quick_start.runpytest_subprocess(*simulated)
    first.assert_outcomes(passed=3, warnings=1)  # prefill_graph measures nothing new on this model: said once
    first.stdout.fnmatch_lines(["sglang-perf: 3 cells: * 3 new, * (SIMULATED)"])

    quick_start.runpytest_subprocess(*update, "--sglang-simulate").assert_outcomes(passed=3, warnings=1)
    [baseline] = (quick_start.path / "baselines").glob("*.json")
    assert baseline.name == "simulated-2xrtx-a6000__qwen-qwen3.6-27b.json"  # the shipped Qwen3.6-27B config

    again = quick_start.runpytest_subprocess(*simulated)
    again.assert_outcomes(passed=3, warnings=1)
    _every_cell_compared_and_none_regressed(again)


def _every_cell_compared_and_none_regressed(result: pytest.RunResult) -> None:
    """The run was gated against the baselines just recorded: an inconclusive cell (a busy machine's noise, said as
    such) passes like an ok one, and nothing may be new, stale, errored or regressed."""
    [line] = [line for line in result.outlines if line.startswith("sglang-perf: 3 cells: ")]
    counts = {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", line.split(": ", 1)[1])}
    assert counts["ok"] + counts["inconclusive"] + counts["improved"] == 3, line
    assert counts["regressed"] == counts["new"] == counts["stale"] == counts["errored"] == 0, line
    assert line.endswith("(SIMULATED)"), line


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="SGLang is installed: a real boot")
def test_quick_start_without_the_simulator_says_what_it_needs(quick_start: pytest.Pytester) -> None:
    """The GPU-runner command, here: nothing is measured, and the output says why and what to do."""
    on_gpu = _quick_start_commands()[0]
    assert on_gpu == ["tests/perf"]
    result = quick_start.runpytest_subprocess(*on_gpu)
    result.assert_outcomes(skipped=3)
    words = " ".join(result.stdout.str().split())
    assert ("0 of 3 cells measured: SGLang is not installed (pip install 'pytest-sglang-perf[sglang]'); run with "
            "--sglang-simulate to use the simulator instead") in words


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in head.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "sglang-perf run tests/perf" in lines[0]
    assert lines[1].split("#")[0].strip().endswith(".venv/bin/pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/pytest\n" in ci, ".ci/run must run the README's test command"


def test_every_page_the_readme_and_the_usage_pages_link_to_exists() -> None:
    """The README is the Quick Start and a table of contents: each local link must lead somewhere."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs" / "usage").glob("*.md"))]
    links = [(page, target) for page in pages
             for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()) if "://" not in target]
    assert len([link for link in links if link[0].name == "README.md"]) >= 17
    missing = [f"{page.relative_to(ROOT)} -> {target}" for page, target in links if not (page.parent / target).exists()]
    assert missing == []
