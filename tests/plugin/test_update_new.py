"""`--sglang-update-baselines=new` records only cells without an entry, and the summary counts what a run did with
the baselines (created, updated, unchanged, unused) and which gated baselines are older than baseline_max_age. Neither
flag takes a value, so a test path may follow it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from perf_project import LOOSE, write_project

TEST_FILE = """
import pytest
from pytest_sglang_perf.prompts import RED_BLACK_TREE

@pytest.mark.parametrize("tokens", [16, 24])
def test_short(sglang_perf, tokens):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, max_tokens=tokens))
"""


def _entries(pytester: pytest.Pytester) -> dict[str, dict[str, dict[str, object]]]:
    [path] = (pytester.path / "baselines").glob("*.json")
    entries: dict[str, dict[str, dict[str, object]]] = json.loads(path.read_text())["entries"]
    return entries


def _joined(run: pytest.RunResult) -> str:
    """The run's output with report lines unwrapped."""
    return " ".join(run.stdout.str().split())


def _age(path: Path, test_id: str, variant: str, recorded_at: str) -> None:
    doc = json.loads(path.read_text())
    doc["entries"][test_id][variant]["recorded_at"] = recorded_at
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


@pytest.mark.slow
@pytest.mark.calm
def test_update_new_adds_only_missing_cells_and_counts(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, extra='baseline_max_age = "30d"\n' + LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    first = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "-k", "16")
    first.assert_outcomes(passed=1, deselected=1)
    assert "baselines: 1 created, 0 updated, 0 unchanged; 0 unused" in _joined(first)
    [path] = (pytester.path / "baselines").glob("*.json")
    old_id = "test_perf.py::test_short[16]"
    _age(path, old_id, "default", "2020-01-02T03:04:05+00:00")
    before = path.read_text()

    second = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines=new", "--sglang-results", "r.json")
    second.assert_outcomes(passed=2)
    text = _joined(second)
    assert "baselines: 1 created, 0 updated, 1 unchanged (=new: they have an entry); 0 unused" in text
    assert f"baselines: 1 older than baseline_max_age (30 days); the oldest: {old_id} [default], recorded 2020-01-02" \
        in text
    entries = _entries(pytester)
    assert set(entries) == {old_id, "test_perf.py::test_short[24]"}
    assert entries[old_id]["default"]["recorded_at"] == "2020-01-02T03:04:05+00:00"  # kept as it was
    assert json.loads(before)["entries"][old_id] == entries[old_id]
    doc = json.loads((pytester.path / "r.json").read_text())
    verdicts = {c["test_id"]: c["verdict"] for c in doc["cells"]}
    assert verdicts["test_perf.py::test_short[24]"] == "updated" and verdicts[old_id] != "updated"
    assert doc["baselines"]["mode"] == "new" and doc["baselines"]["unchanged"] == [[old_id, "default"]]
    assert doc["baselines"]["old"][0]["test_id"] == old_id

    third = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "-k", "24")
    third.assert_outcomes(passed=1, deselected=1)
    assert ("baselines: 0 created, 1 updated, 0 unchanged; 1 unused (entries of these files no test of this run "
            "measured; `sglang-perf baseline prune` removes those whose test or variant is gone)") in _joined(third)


def test_a_path_may_follow_either_flag(pytester: pytest.Pytester) -> None:
    """`pytest --sglang-update-baselines tests/perf`, as most people type it: neither flag takes a value."""
    write_project(pytester, {"default": []}, request="max_tokens = 16\nrepeats = 3\nwarmup = 0\n", extra=LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    first = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines", "test_perf.py", "-k", "16")
    first.assert_outcomes(passed=1, deselected=1)
    assert "baselines: 1 created, 0 updated, 0 unchanged" in _joined(first)
    second = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines=new", "test_perf.py")
    second.assert_outcomes(passed=2)
    assert "baselines: 1 created, 0 updated, 1 unchanged (=new: they have an entry)" in _joined(second)
    assert set(_entries(pytester)) == {"test_perf.py::test_short[16]", "test_perf.py::test_short[24]"}


@pytest.mark.parametrize("word", ["new", "all"])
def test_a_mode_written_as_a_separate_word_names_the_spelling(pytester: pytest.Pytester, word: str) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_perf=TEST_FILE)
    result = pytester.runpytest("--sglang-simulate", "test_perf.py", "--sglang-update-baselines", word)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--sglang-update-baselines {word}: the flag takes no value, so '{word}' is read as "
                                 "a test path, and there is none; write --sglang-update-baselines=new (no space)*"])


def test_another_mode_is_a_usage_error_naming_the_flag_and_the_value(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_perf=TEST_FILE)
    result = pytester.runpytest("--sglang-simulate", "--sglang-update-baselines=newest", "test_perf.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --sglang-update-baselines: ignored explicit argument 'newest'*"])
