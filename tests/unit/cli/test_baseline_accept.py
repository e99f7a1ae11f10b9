"""`sglang-perf baseline accept`: results files from CI runs become baseline entries, with the refusals, the merge of
several files and concurrent accepts into one folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from baseline_docs import KEY, REAL_KEY, entries_of, make_entry, result_cell, results_doc, write_doc

from pytest_sglang_perf.cli import main as cli
from pytest_sglang_perf.gate.baseline_parse import load_entries
from pytest_sglang_perf.gate.conditions import withheld_text
from pytest_sglang_perf.gate.store import BaselineStore

A = "tests/test_x.py::test_a"
B = "tests/test_x.py::test_b"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _folder(tmp_path: Path, key: str = KEY) -> Path:
    """A baseline folder that already gates on `key` (one entry: test_a [default])."""
    folder = tmp_path / "baselines"
    BaselineStore(folder, key).write([make_entry(A, commit="0ld0ld0ld0ld")], {"writer": "old"})
    return folder


def _accept(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["baseline", "accept", *map(str, args)])
    out, err = capsys.readouterr()
    return code, _flat(out), _flat(err)


def test_cells_are_created_and_updated_as_accepted_entries(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path)
    fresh_a, new_b = make_entry(A, slower=1.01, commit="c1c1c1c1c1c1"), make_entry(B)
    results = write_doc(tmp_path / "run1.json", results_doc([result_cell(fresh_a), result_cell(new_b)],
                                                            host="gpu-7", dirty=True))
    code, out, err = _accept(capsys, results, "--dir", folder)
    assert (code, err) == (0, "")
    assert f"updated {A} [default] in {KEY}.json (from run1.json)" in out
    assert f"created {B} [default] in {KEY}.json (from run1.json)" in out
    assert out.endswith(f"1 created, 1 updated, 0 refused, 0 skipped; 1 file written in {folder}/")
    stored = entries_of(folder / f"{KEY}.json")[A]["default"]
    assert stored["source"] == {"how": "accepted", "results_file": "run1.json", "host": "gpu-7", "dirty": True,
                                "generated_at": "2026-12-01T08:00:00+00:00"}
    assert (stored["commit"], stored["recorded_at"]) == ("c1c1c1c1c1c1", fresh_a.recorded_at)  # the entry's own
    loaded = load_entries(folder / f"{KEY}.json", KEY)
    assert loaded[(A, "default")].summaries == fresh_a.summaries
    assert json.loads((folder / f"{KEY}.json").read_text())["environment"] == dict(fresh_a.environment)


def test_a_results_file_of_another_environment_is_refused_until_told(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, REAL_KEY)  # the project gates on a real GPU
    results = write_doc(tmp_path / "sim.json", results_doc([result_cell(make_entry(B), key=KEY)]))
    code, out, _ = _accept(capsys, results, "--dir", folder)
    assert code == 1
    assert f"refused {B} [default] (sim.json): environment key '{KEY}' is not accepted (below)" in out
    assert (f"refused sim.json: environment key '{KEY}' has no baseline file in {folder}/ (it has: '{REAL_KEY}'); "
            "these are SIMULATED numbers, the folder holds real-GPU baselines; pass --new-environment to start a "
            "baseline file for it") in out
    assert out.endswith("0 created, 0 updated, 1 refused, 0 skipped; nothing written")
    assert not (folder / f"{KEY}.json").exists()

    code, out, _ = _accept(capsys, results, "--dir", folder, "--new-environment")
    assert code == 0
    assert f"created {B} [default] in {KEY}.json (from sim.json)" in out
    assert set(entries_of(folder / f"{KEY}.json")) == {B}
    assert set(entries_of(folder / f"{REAL_KEY}.json")) == {A}  # the real file is untouched


@pytest.mark.parametrize(("verdict", "flag", "reason"), [
    ("stale", "--allow-stale", "stale: measured for another request, server args, model or GPUs than its baseline "
                               "(max_tokens 64 -> 128); pass --allow-stale to accept it"),
    ("regressed", "--allow-regressed", "regressed: worse than its baseline beyond the tolerance; pass "
                                       "--allow-regressed to accept it as the new baseline"),
    ("inconclusive", "--allow-regressed", "inconclusive: worse than its baseline beyond the tolerance; pass "
                                          "--allow-regressed to accept it as the new baseline"),
])
def test_stale_regressed_and_inconclusive_cells_are_refused_unless_allowed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], verdict: str, flag: str, reason: str) -> None:
    folder = _folder(tmp_path)
    before = (folder / f"{KEY}.json").read_bytes()
    offered = make_entry(A, slower=1.3, max_tokens=128)
    results = write_doc(tmp_path / "ci.json", results_doc([
        result_cell(offered, verdict=verdict, stale=["max_tokens 64 -> 128"] if verdict == "stale" else []),
        result_cell(make_entry(B)),
    ]))
    code, out, _ = _accept(capsys, results, "--dir", folder)
    assert code == 1
    assert f"refused {A} [default] (ci.json): {reason}" in out
    assert f"created {B} [default]" in out  # the other cell is still accepted
    assert entries_of(folder / f"{KEY}.json")[A]["default"]["commit"] == "0ld0ld0ld0ld"

    (folder / f"{KEY}.json").write_bytes(before)
    code, out, _ = _accept(capsys, results, "--dir", folder, flag)
    assert code == 0, out
    assert entries_of(folder / f"{KEY}.json")[A]["default"]["params"]["max_tokens"] == 128


def test_a_cell_that_measured_nothing_is_skipped_and_a_dry_run_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path)
    before = (folder / f"{KEY}.json").read_bytes()
    results = write_doc(tmp_path / "r.json", results_doc([result_cell(None, test_id=B),
                                                          result_cell(make_entry(A, slower=1.01))]))
    code, out, _ = _accept(capsys, results, "--dir", folder, "--dry-run")
    assert code == 0
    assert f"skipped {B} [default] (r.json): nothing measured, no entry to accept" in out
    assert f"would update {A} [default] in {KEY}.json (from r.json)" in out
    assert out.endswith("0 created, 1 updated, 0 refused, 1 skipped (dry run: nothing written)")
    assert (folder / f"{KEY}.json").read_bytes() == before


def test_a_cell_measured_under_disturbed_conditions_is_skipped_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gated cell measured on a busy host offers no entry; the results file says why, and so does accept (not
    "nothing measured": it was measured)."""
    folder = _folder(tmp_path)
    before = (folder / f"{KEY}.json").read_bytes()
    why = withheld_text("the client fell behind: event-loop lag p99 7.2 ms (limit 5 ms)")
    results = write_doc(tmp_path / "r.json", results_doc([{**result_cell(None, test_id=B), "withheld": why}]))
    code, out, _ = _accept(capsys, results, "--dir", folder)
    assert code == 0, out
    flat = " ".join(out.split())
    assert (f"skipped {B} [default] (r.json): measured under disturbed conditions (the client fell behind: "
            "event-loop lag p99 7.2 ms (limit 5 ms)); re-run when the host is calm, or add "
            "--sglang-ignore-conditions to record it anyway") in flat, out
    assert "nothing measured" not in out
    assert flat.endswith("0 created, 0 updated, 0 refused, 1 skipped; nothing written")
    assert (folder / f"{KEY}.json").read_bytes() == before


def test_a_ci_matrix_across_runners_merges_into_one_folder_the_later_file_winning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path)
    BaselineStore(folder, REAL_KEY).write([make_entry(A)], {})
    later, earlier = make_entry(A, slower=1.02, commit="1a7e71a7e71a"), make_entry(A, commit="ea71e4ea71e4")
    runner1 = write_doc(tmp_path / "runner1.json", results_doc(
        [result_cell(later), result_cell(make_entry(B), key=REAL_KEY)], generated_at="2026-12-01T09:00:00+00:00"))
    runner2 = write_doc(tmp_path / "runner2.json", results_doc(
        [result_cell(earlier), result_cell(make_entry(B, slower=1.1))], generated_at="2026-12-01T08:00:00+00:00"))
    code, out, _ = _accept(capsys, runner1, runner2, "--dir", folder)
    assert code == 0
    assert (f"note {A} [default]: measured by runner2.json (generated 2026-12-01T08:00:00+00:00) and runner1.json "
            "(generated 2026-12-01T09:00:00+00:00): taking runner1.json's, the later") in out
    assert out.endswith(f"2 created, 1 updated, 0 refused, 0 skipped; 2 files written in {folder}/")
    simulated, real = entries_of(folder / f"{KEY}.json"), entries_of(folder / f"{REAL_KEY}.json")
    assert simulated[A]["default"]["commit"] == "1a7e71a7e71a"
    assert simulated[A]["default"]["source"]["results_file"] == "runner1.json"
    assert simulated[B]["default"]["source"]["results_file"] == "runner2.json"
    assert real[B]["default"]["source"]["results_file"] == "runner1.json"


@pytest.mark.parametrize(("content", "problem"), [
    (None, "no such file; check the path, or write one with: pytest --sglang-results PATH"),
    ("{", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2); write it again "
          "with: pytest --sglang-results PATH"),
    ('{"schema_version": 1, "entries": {}}', "not a pytest-sglang-perf results file (no 'cells' list); pass a file "
                                             "written by: pytest --sglang-results PATH"),
    (json.dumps(results_doc([{k: v for k, v in result_cell(None, test_id="t", variant="v").items()
                              if k not in ("entry", "environment_key")}])),
     "cell 0 (t [v]) carries no baseline entry ('entry', 'environment_key'): the file was written by an older "
     "pytest-sglang-perf; write it again with: pytest --sglang-results PATH (this version)"),
    (json.dumps(results_doc([{**result_cell(make_entry()), "entry": {"metrics": {}}}])),
     f"cell 0 ({A} [default]): its 'entry' is malformed: entry '{A}' variant 'default' has no 'samples'"),
])
def test_a_file_that_is_not_a_usable_results_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                content: str | None, problem: str) -> None:
    folder = _folder(tmp_path)
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    code, out, err = _accept(capsys, path, "--dir", folder)
    assert (code, out) == (2, "")
    assert err.startswith(f"sglang-perf baseline accept: results file {path}: {problem}")


def test_concurrent_accepts_into_one_folder_keep_every_cell(tmp_path: Path) -> None:
    """Four processes accept at once into the same baseline file: each write merges under the file's lock."""
    folder = _folder(tmp_path)
    tests = [f"tests/test_x.py::test_{n}" for n in range(8)]
    commands = []
    for number in range(4):
        cells = [result_cell(make_entry(t, variant=f"v{number}")) for t in tests]
        path = write_doc(tmp_path / f"runner{number}.json", results_doc(cells, host=f"runner{number}"))
        commands.append([sys.executable, "-m", "pytest_sglang_perf.cli", "baseline", "accept", str(path),
                         "--dir", str(folder)])
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    outputs = [p.communicate(timeout=120) for p in running]
    assert [p.returncode for p in running] == [0, 0, 0, 0], outputs
    doc = json.loads((folder / f"{KEY}.json").read_text())
    assert doc["schema_version"] == 2
    stored = {(t, v) for t, variants in doc["entries"].items() for v in variants}
    assert stored == {(A, "default")} | {(t, f"v{n}") for t in tests for n in range(4)}
    assert {doc["entries"][tests[0]][f"v{n}"]["source"]["host"] for n in range(4)} == {f"runner{n}" for n in range(4)}


def test_a_new_only_refresh_offers_only_the_cells_it_recorded(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A --sglang-update-baselines=new run gated the cells that had a baseline: accepting its file must not refresh
    them."""
    folder = _folder(tmp_path)
    gated = result_cell(make_entry(A, slower=1.2))
    recorded = {**result_cell(make_entry(B)), "verdict": "updated", "updated": True}
    doc = {**results_doc([gated, recorded]), "baselines": {"mode": "new"}}
    results = write_doc(tmp_path / "r.json", doc)
    before = entries_of(folder / f"{KEY}.json")[A]
    code, out, _ = _accept(capsys, results, "--dir", folder)
    assert code == 0, out
    assert f"skipped {A} [default] (r.json): not recorded by its --sglang-update-baselines=new run" in out
    entries = entries_of(folder / f"{KEY}.json")
    assert entries[A] == before and B in entries


def test_a_refresh_runs_recorded_cells_are_judged_on_what_they_were_against_the_old_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cell --sglang-update-baselines recorded reads `updated`; accepting it lowers the bar just the same when it
    regressed against the old baseline, or replaces a baseline measured for something else (stale)."""
    folder = _folder(tmp_path)
    regressed = {**result_cell(make_entry(A, slower=1.3)), "verdict": "updated", "updated": True,
                 "metrics": {"output_throughput": {"verdict": "regressed"}, "ttft": {"verdict": "ok"}}}
    stale = {**result_cell(make_entry(B)), "verdict": "updated", "updated": True, "stale": ["max_tokens 512 -> 128"],
             "metrics": {"output_throughput": {"verdict": "new"}}}
    results = write_doc(tmp_path / "r.json", {**results_doc([regressed, stale]), "baselines": {"mode": "all"}})
    code, out, _ = _accept(capsys, results, "--dir", folder)
    assert code == 1
    assert f"refused {A} [default] (r.json): regressed: worse than its baseline beyond the tolerance" in out
    assert f"refused {B} [default] (r.json): stale: " in out and "max_tokens 512 -> 128" in out
    code, out, _ = _accept(capsys, results, "--dir", folder, "--allow-regressed", "--allow-stale")
    assert code == 0, out
