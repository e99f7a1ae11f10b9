"""`sglang-perf baseline show|diff|validate|prune` on baseline folders in tmp dirs (accept: test_baseline_accept.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from baseline_docs import KEY, make_entry

from pytest_sglang_perf.cli import main as cli
from pytest_sglang_perf.gate.store import BaselineStore
from pytest_sglang_perf.wrapping import WIDTH

A = "tests/test_x.py::test_a"
B = "tests/test_x.py::test_b"
C = "tests/test_x.py::test_c"
D = "tests/test_x.py::test_d"


def _ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="seconds")


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = cli.main(["baseline", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _flat(text: str) -> str:
    return " ".join(text.split())


def _project(root: Path, *, variants: str = 'default = []\nfast = ["--tp-size", "1"]\n') -> Path:
    """A user project whose configuration keeps baselines for 30 days; its server would leave a file if it booted."""
    root.mkdir(parents=True, exist_ok=True)
    server = json.dumps([sys.executable, "-c", f"open({str(root / 'BOOTED')!r}, 'w').close()"])
    (root / "pyproject.toml").write_text(
        f'[tool.sglang_perf]\nmodel = "tiny/model"\nbaseline_max_age = "30d"\nserver_command = {server}\n'
        f"[tool.sglang_perf.variants]\n{variants}")
    return root / "baselines"


# show ------------------------------------------------------------------------------------------------------------


def test_show_tables_each_file_with_units_age_commit_and_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    BaselineStore(folder, KEY).write([make_entry(A, recorded_at=_ago(2)),
                                      make_entry(A, "fast", recorded_at=_ago(45), commit=None)], {"model": "tiny/model",
                                                                                              "sglang": "0.5.23"})
    code, out, err = _run(capsys, "show")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:5] == [
        f"{folder / KEY}.json: 2 cells, SIMULATED (numbers from the simulator, not a GPU)",
        f"  environment key: {KEY}",
        "  model: tiny/model",
        "  versions: sglang 0.5.23, torch -, python -, pytest-sglang-perf -",
        "  GPUs: -; driver -",
    ]
    table = [" ".join(line.split()) for line in lines[6:]]
    assert table[:3] == [A, "metric default fast", "output_throughput 61.84 tok/s 61.84 tok/s"]
    assert "ttft 51.8 ms 51.8 ms" in table
    assert "n 8 in 1 boot 8 in 1 boot" in table
    recorded = next(line for line in table if line.startswith("recorded "))
    assert recorded.endswith("(2d) " + _ago(45)[:10] + " (45d, OLD)")
    assert "commit abc123def456 -" in table
    assert "source unknown unknown" in table
    assert _flat(out).endswith("1 entry older than baseline_max_age (30d): refresh it (pytest "
                               "--sglang-update-baselines, or sglang-perf baseline accept RESULTS.json)")
    assert max(map(len, lines[1:])) <= WIDTH  # the first names the file, however long its path


def test_show_names_a_file_it_cannot_use_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    BaselineStore(tmp_path, KEY).write([make_entry()], {})
    (tmp_path / "broken.json").write_text("{")
    code, out, err = _run(capsys, "show", "--dir", tmp_path)
    assert code == 1
    assert out.startswith(f"{tmp_path / KEY}.json: 1 cell")
    assert err.startswith(f"sglang-perf baseline show: baseline file {tmp_path / 'broken.json'}: is not valid JSON")


# diff ------------------------------------------------------------------------------------------------------------


def _old_and_new(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old", tmp_path / "new"
    BaselineStore(old, KEY).write([make_entry(A), make_entry(C), make_entry(D), make_entry(B, "fast")], {})
    BaselineStore(new, KEY).write([make_entry(A, slower=1.3), make_entry(B), make_entry(D),
                                   make_entry(B, "fast", max_tokens=128)], {})
    return old, new


def test_diff_in_a_terminal_gives_the_gates_verdict_per_metric(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_and_new(tmp_path)
    code, out, _ = _run(capsys, "diff", old, new)
    assert code == 0
    rows = [" ".join(line.split()) for line in out.splitlines()]
    assert _flat(out).startswith(f"baseline diff: {old} (old) -> {new} (new)")
    assert f"{KEY}.json (in both): 2 cells changed, 1 added, 1 removed, 1 unchanged" in rows
    at = rows.index(f"{A} [default]")
    assert rows[at + 1:at + 7] == [
        "metric old new change band verdict",
        "output_throughput 61.84 tok/s 47.57 tok/s -23.1% -5.0% REGRESSED",
        "decode_throughput 64.07 tok/s 49.29 tok/s -23.1% -5.0% REGRESSED",
        "ttft 51.8 ms 67.3 ms +30.0% +10.0% REGRESSED",
        "tpot 15.6 ms 20.3 ms +30.0% +10.0% REGRESSED",
        "boot_seconds 1.50 s 1.50 s +0.0% +25.0% within band",
    ]
    assert f"{B} [default]: added" in rows and f"{C} [default]: removed" in rows
    assert f"{D} [default]" not in " ".join(rows)  # unchanged: counted, not listed
    at = rows.index(f"{B} [fast]")
    assert rows[at + 1] == "not comparable (the gate would call it stale): max_tokens 64 -> 128"
    assert "ttft 51.8 ms 51.8 ms +0.0% - not comparable" in rows
    assert rows[-1] == "sglang-perf baseline diff: 2 cells changed, 1 added, 1 removed, 1 unchanged"
    assert max(map(len, out.splitlines())) <= WIDTH


def test_diff_as_markdown_is_a_github_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = _old_and_new(tmp_path)
    code, out, _ = _run(capsys, "diff", "--markdown", old / f"{KEY}.json", new / f"{KEY}.json")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"## Baseline diff: `{old / KEY}.json` → `{new / KEY}.json`"
    assert "| test | variant | metric | old | new | change | band | verdict |" in lines
    assert "|---|---|---|---:|---:|---:|---:|---|" in lines
    assert (f"| `{A}` | `default` | output_throughput | 61.84 tok/s | 47.57 tok/s | -23.1% | -5.0% | "
            "**REGRESSED** |") in lines
    assert "|  |  | boot_seconds | 1.50 s | 1.50 s | +0.0% | +25.0% | within band |" in lines
    assert f"| `{B}` | `default` | | | | | | added |" in lines
    # the reason is text, its Markdown characters escaped (GitHub shows max_tokens)
    assert f"- `{B} [fast]`: not comparable (the gate would call it stale): max\\_tokens 64 -> 128" in lines


def test_diff_takes_old_from_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "baselines"
    BaselineStore(folder, KEY).write([make_entry(A)], {})
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for command in (["init", "-q"], ["add", "baselines"], ["commit", "-q", "-m", "baselines"]):
        subprocess.run(["git", *command], cwd=tmp_path, env=env, check=True, capture_output=True)
    BaselineStore(folder, KEY).write([make_entry(A, slower=0.7), make_entry(B)], {})
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "diff", "--git", "HEAD", "baselines")
    assert code == 0
    rows = [" ".join(line.split()) for line in out.splitlines()]
    assert rows[0] == "baseline diff: HEAD:baselines (old) -> baselines (new)"
    assert "ttft 51.8 ms 36.2 ms -30.0% +10.0% improved" in rows
    assert f"{B} [default]: added" in rows
    code, _, err = _run(capsys, "diff", "--git", "no-such-rev", "baselines")
    assert code == 2
    assert err.startswith("sglang-perf baseline diff: --git no-such-rev: git ls-tree failed in baselines")


# validate --------------------------------------------------------------------------------------------------------


def test_validate_catches_a_tampered_median_and_warns_about_an_old_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    old = _ago(40)  # once: a second call may fall in the next second on a busy machine
    path = BaselineStore(folder, KEY).write([make_entry(A, recorded_at=_ago(1)), make_entry(B, recorded_at=old)], {})
    code, out, _ = _run(capsys, "validate")
    assert code == 0
    assert _flat(out) == _flat(
        f"warning: {path}: {B} [default]: recorded {old}, 40d ago, older than baseline_max_age (30d); re-record "
        f"it (pytest '{B}' --sglang-update-baselines), accept fresh results, or restore it from git "
        "sglang-perf baseline validate: 1 file, 2 entries: 0 errors, 1 warning")

    doc = json.loads(path.read_text())
    doc["entries"][A]["default"]["metrics"]["ttft"]["median"] = 0.04
    path.write_text(json.dumps(doc))
    code, out, _ = _run(capsys, "validate", folder)
    assert code == 1
    assert (f"error: {path}: {A} [default]: metric 'ttft': median 40.0 ms recorded, its samples give 51.8 ms; "
            f"re-record it (pytest '{A}' --sglang-update-baselines), accept fresh results, or restore it from "
            "git") in _flat(out)
    assert _flat(out).endswith("1 file, 2 entries: 1 error, 1 warning")


def test_validate_names_a_file_whose_key_is_not_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = BaselineStore(tmp_path, KEY).write([make_entry()], {})
    renamed = path.rename(tmp_path / "other-key.json")
    code, out, _ = _run(capsys, "validate", renamed)
    assert code == 1
    assert _flat(out).startswith(f"error: baseline file {renamed}: holds environment_key '{KEY}', but its name says "
                                 "'other-key'; rename the file to match its environment_key")


# prune -----------------------------------------------------------------------------------------------------------


@pytest.fixture
def perf_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with tests/test_x.py (test_a with the sglang_perf fixture, for variants default and fast)."""
    for name in list(os.environ):
        if name.startswith(("SGLANG_PERF_", "SGLANG_SIM_", "PYTEST_")):
            monkeypatch.delenv(name)
    folder = _project(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_a(sglang_perf):\n    pass\n\n\ndef test_b():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    return folder


def test_prune_lists_then_removes_entries_whose_test_or_variant_is_gone(perf_project: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = BaselineStore(perf_project, KEY).write([make_entry(A), make_entry(A, "fast"), make_entry(A, "gone"),
                                                   make_entry(C)], {})
    before = path.read_bytes()
    code, out, _ = _run(capsys, "prune")
    assert code == 0
    assert _flat(out) == _flat(
        f"would remove {A} [gone] from {path}: variant 'gone' is not in the configuration (variants: default, fast) "
        f"would remove {C} [default] from {path}: pytest no longer collects this test "
        "sglang-perf baseline prune: 2 entries of 4 would be removed (a dry run: pass --apply to remove them)")
    assert path.read_bytes() == before
    assert not (perf_project.parent / "BOOTED").exists()  # collecting boots no server

    code, out, _ = _run(capsys, "prune", "--apply")
    assert code == 0
    assert _flat(out).endswith(f"rewrote {path}: 2 entries kept sglang-perf baseline prune: 2 entries of 4 removed")
    assert {(t, v) for t, vs in json.loads(path.read_text())["entries"].items() for v in vs} == {
        (A, "default"), (A, "fast")}


def test_prune_never_removes_everything_unless_told_and_stops_when_collection_fails(
        perf_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = BaselineStore(perf_project, KEY).write([make_entry(A)], {})
    code, out, _ = _run(capsys, "prune", "--apply", "tests/test_x.py::test_b")
    assert code == 1
    assert "every entry (1) would go, which a wrong PATHS or a broken conftest also gives; nothing was removed" in \
        _flat(out)
    assert path.is_file()

    (perf_project.parent / "tests" / "test_y.py").write_text("def test_broken(:\n")
    code, out, err = _run(capsys, "prune", "--apply")
    assert (code, out) == (2, "")
    assert _flat(err).startswith(f"sglang-perf baseline prune: pytest could not collect the tests in "
                                 f"{perf_project.parent} (exit 2); nothing was pruned.")
    assert "SyntaxError" in err
    (perf_project.parent / "tests" / "test_y.py").unlink()

    code, out, _ = _run(capsys, "prune", "--apply", "--all", "tests/test_x.py::test_b")
    assert code == 0
    assert f"deleted {path}: no entry left" in _flat(out)
    assert not path.exists()
