"""The README's quick start, executed as written (on the simulator, sped up by its knobs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_SHAPE = ROOT / "tests" / "perf" / "models" / "qwen3.6-27b"


def _blocks(lang: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_quick_start_runs(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _blocks("toml")[0]
    test_file = _blocks("python")[0]
    pytester.makefile(".toml", pyproject=config + (
        "\n[tool.sglang_perf.simulate]\n"
        f"model_path = {str(MODEL_SHAPE)!r}\n"
        "[tool.sglang_perf.request]\nrepeats = 1\nwarmup = 0\n"
    ))
    pytester.makepyfile(test_readme_quick_start=test_file)
    knobs = {"DECODE_TOK_S": "20000", "TTFT": "0.01", "BOOT_SECONDS": "0.2", "GPU": "RTX A6000"}  # the engineer's GPU
    for knob, value in knobs.items():
        monkeypatch.setenv(f"SGLANG_SIM_{knob}", value)
    result = pytester.runpytest("--sglang-simulate", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*test_red_black_tree[[]default[]] PASSED*",
        "*test_red_black_tree[[]prefill_graph[]] PASSED*",
        "*test_red_black_tree[[]single_batch_overlap[]] PASSED*",
        "*accept_length*new",
    ])


def test_readme_starts_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [line for line in head.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "sglang-perf run tests/perf" in lines[0]
    assert lines[1].split("#")[0].strip().endswith(".venv/bin/pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/pytest\n" in ci, ".ci/run must run the README's test command"
