"""The README's Quick Start, executed as written: its files and its commands, with and without the simulator."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.config.request import RequestDefaults

ROOT = Path(__file__).resolve().parents[2]
SLACK = 4
"""How much longer than the README says a run may take here: CI is a busy 2-core machine."""
KEPT = {"SGLANG_PERF_IGNORE_CONDITIONS"}
"""Kept from the suite's environment (the root conftest.py): a recording refused because the CI host was busy is
tests/plugin/test_conditions.py's subject, not the Quick Start's (one CI run refused one here)."""


def _readme() -> str:
    return (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _readme(), flags=re.S)


def _prose() -> str:
    """The README without its code blocks, one space between words (its lines are wrapped anywhere)."""
    return " ".join(re.sub(r"```.*?```", " ", _readme(), flags=re.S).split())


def _stated(pattern: str) -> tuple[int, ...]:
    """The numbers the README's prose states where `pattern` (its groups: the numbers) matches, once."""
    [match] = re.findall(pattern, _prose())
    return tuple(int(n) for n in ((match,) if isinstance(match, str) else match))


def _quick_start_commands() -> list[list[str]]:
    """The `$ pytest ...` lines of the Quick Start's console block, as argument lists (comments dropped)."""
    block = _blocks("console")[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("$ ")]
    return [shlex.split(line)[2:] for line in lines]  # without "$" and "pytest"


def _quick_start_files() -> dict[str, str]:
    """The Quick Start's two files, exactly as the README writes them, by the path their first line names."""
    files = {}
    for block in (_blocks("toml")[0], _blocks("python")[0]):
        files[block.split("\n", 1)[0].removeprefix("# ").strip()] = block
    assert set(files) == {"pyproject.toml", "tests/perf/test_prompts.py"}
    return files


@pytest.fixture
def quick_start(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project made of the Quick Start's two files, exactly as the README writes them (paths included)."""
    for name, text in _quick_start_files().items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for name in [n for n in os.environ if n.startswith(("SGLANG_PERF_", "SGLANG_SIM_")) and n not in KEPT]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "80")  # pytest's width when its output is not a terminal: the README's count
    return pytester


def _the_fast_way(project: pytest.Pytester) -> int:
    """The README's fast way applied to the project: the smaller `max_tokens` it offers, in place of the snippet's."""
    [fast] = _stated(r"For a first look, write `max_tokens=(\d+)` in the test")
    test = project.path / "tests" / "perf" / "test_prompts.py"
    [written] = re.findall(r"max_tokens=(\d+)", test.read_text())
    test.write_text(test.read_text().replace(f"max_tokens={written}", f"max_tokens={fast}"))
    return int(written)


def _timed(project: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, float]:
    start = time.monotonic()
    result = project.runpytest_subprocess(*args)
    return result, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.calm
def test_quick_start_on_the_simulator_prints_and_takes_what_the_readme_says(quick_start: pytest.Pytester) -> None:
    """The Quick Start's three simulated runs (first, recording, passing), the fast way the README offers; every
    number the README states about them: lines printed, seconds taken, and the arithmetic of the 2 minutes it
    takes as written (from this run's own measurements, with fewer tokens)."""
    _, simulated, update = _quick_start_commands()
    assert simulated == ["tests/perf", "--sglang-simulate"] and update[-1] == "--sglang-update-baselines"
    written_tokens = _the_fast_way(quick_start)
    [fast_seconds] = _stated(r"the same simulated GPU and the same report in about (\d+) s")

    first, first_s = _timed(quick_start, *simulated)
    first.assert_outcomes(passed=3, warnings=1)  # prefill_graph measures nothing new on this model: said once
    first.stdout.fnmatch_lines(["*SGLangConfigWarning: variant 'prefill_graph': measures nothing new: *",
                                "sglang-perf: 3 cells: * 3 new, * (SIMULATED)"])

    results = quick_start.path / "results.json"
    recorded, _ = _timed(quick_start, *update, "--sglang-simulate", f"--sglang-results={results}")
    recorded.assert_outcomes(passed=3, warnings=1)
    [baseline] = (quick_start.path / "baselines").glob("*.json")
    assert baseline.name == "simulated-2xrtx-a6000__qwen-qwen3.6-27b.json"  # the shipped Qwen3.6-27B config

    again, again_s = _timed(quick_start, *simulated)
    again.assert_outcomes(passed=3, warnings=1)
    _every_cell_compared_and_none_regressed(again)

    [first_lines, passing_lines] = _stated(r"first run \(no baselines yet\) prints (\d+) lines, and its passing run "
                                           r"\(after `--sglang-update-baselines`\) (\d+), at pytest's default 80")
    assert _lines_of_a_calm_host(first.outlines) == first_lines, first.stdout.str()
    assert _lines_of_a_calm_host(again.outlines) == passing_lines, again.stdout.str()
    assert max(first_s, again_s) < fast_seconds * SLACK, (first_s, again_s)
    _as_written_takes_what_the_readme_says(json.loads(results.read_text()), written_tokens)


@pytest.mark.slow
def test_the_simulators_speed_knobs_take_what_the_readme_says(quick_start: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The other fast way: the Quick Start's files as written, the knobs in the environment, as the README types it;
    and what it says the roofline section then says."""
    [(command, seconds)] = re.findall(r"`((?:SGLANG_SIM_\w+=\S+ )+pytest [^`]+)` takes about (\d+) s", _prose())
    words = shlex.split(command)
    at = words.index("pytest")
    for name, value in (knob.split("=", 1) for knob in words[:at]):
        monkeypatch.setenv(name, value)
    result, took = _timed(quick_start, *words[at + 1:])
    result.assert_outcomes(passed=3, warnings=1)
    assert took < int(seconds) * SLACK, took
    assert "faster than the weights can be read" in " ".join(result.stdout.str().split())
    assert "the roofline section says they are faster than the weights can be read" in _prose()


def _every_cell_compared_and_none_regressed(result: pytest.RunResult) -> None:
    """The run was gated against the baselines just recorded: an inconclusive cell (a busy machine's noise, said as
    such) passes like an ok one, and nothing may be new, stale, errored or regressed."""
    [line] = [line for line in result.outlines if line.startswith("sglang-perf: 3 cells: ")]
    counts = {name: int(n) for n, name in re.findall(r"(\d+) (\w+)", line.split(": ", 1)[1])}
    assert counts["ok"] + counts["inconclusive"] + counts["improved"] == 3, line
    assert counts["regressed"] == counts["new"] == counts["stale"] == counts["errored"] == 0, line
    assert line.endswith("(SIMULATED)"), line


BUSY_HOST_SECTIONS = {"sglang-perf load"}
"""Sections a busy host adds (the client fell behind)."""
BUSY_HOST_NOTICES = ("before the first measurement", "measure too few requests", "requests detect only changes")
"""Lines a busy host adds (each with its indented continuation lines), as the README says."""
CONTINUED = ("  ", "sglang-perf:  ")
SHORT_PATH_LINE = "sglang-perf: baselines:"
"""One line in a project with a short path, as the README's count was taken; pytester's temporary folder wraps it."""


def _lines_of_a_calm_host(lines: list[str]) -> int:
    """How many lines the run would have printed on a calm host: without the notices the README says a busy one adds
    (the progress mark a notice pushes onto a line of its own takes the place of the blank line after it), and with
    a variant's table one line where a busy host made a cell of it inconclusive (a variant whose cells are all ok is
    one line)."""
    kept: list[str] = []
    section, notice, path = "", False, False
    for line in lines:
        if line.startswith("=") and line.endswith("="):
            section = line.strip("= ")
        notice = any(words in line for words in BUSY_HOST_NOTICES) or (notice and line.startswith(CONTINUED))
        path = (path and line.startswith(CONTINUED)) or line.startswith(SHORT_PATH_LINE)
        if not (notice or section in BUSY_HOST_SECTIONS) and not (path and line.startswith(CONTINUED)):
            kept.append(line)
    return len(kept) - _inconclusive_table_lines(kept)


def _inconclusive_table_lines(lines: list[str]) -> int:
    """The lines of the variant tables that have an inconclusive cell, less the one each would be if all were ok."""
    tables = re.split(r"\n(?=variant )", "\n".join(lines))
    inconclusive = [table.splitlines() for table in tables if re.search(r"^  .*\binconclusive\b", table, flags=re.M)]
    return sum(len([line for line in table if line.startswith("  ")]) for table in inconclusive)


def _as_written_takes_what_the_readme_says(results: dict[str, Any], written_tokens: int) -> None:
    """The README's arithmetic of the as-written run (variants x requests x tokens / tok/s), each factor checked
    against this run: its variants, its requests per test (the warmup and the measured ones), the snippet's tokens,
    the decode speed it measured; and the minutes it states, against the time those requests and boots take."""
    variants, requests, warmup, measured, tokens, tok_s, seconds = _arithmetic()
    cells = results["cells"]
    assert variants == len({cell["variant"] for cell in cells}) == len(cells)
    assert tokens == written_tokens
    assert {cell["metrics"]["output_throughput"]["n"] for cell in cells} == {measured}
    assert requests == warmup + measured == RequestDefaults().warmup + measured
    decode = [cell["metrics"]["decode_throughput"]["measured"] for cell in cells]
    assert all(abs(rate / tok_s - 1) < 0.1 for rate in decode), decode
    assert seconds == round(variants * requests * tokens / tok_s)
    per_request = [cell["metrics"]["ttft"]["measured"] + tokens * cell["metrics"]["tpot"]["measured"] for cell in cells]
    estimate = sum(requests * one for one in per_request) + sum(cell["boot_seconds"] for cell in cells)
    [minutes] = _stated(r"the Quick Start takes about (\d+) minutes")
    assert 0.75 < estimate / (minutes * 60) < 1.25, estimate


def _arithmetic() -> tuple[int, ...]:
    """The README's `3 variants x 4 requests (a warmup and 3 measured) x 512 tokens / 53 tok/s is 116 s`: variants,
    requests, warmups (one: "a warmup"), measured, tokens, tok/s, seconds."""
    [(variants, requests, measured, tokens, tok_s, seconds)] = re.findall(
        r"(\d+) variants x (\d+) requests \(a warmup and (\d+) measured\) x (\d+) tokens / (\d+) tok/s is (\d+) s",
        _prose())
    return int(variants), int(requests), 1, int(measured), int(tokens), int(tok_s), int(seconds)


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
