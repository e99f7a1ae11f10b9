"""A session's baseline directory read before any server starts, and the `sglang-perf baselines` listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_store import ENV, KEY, entry

from pytest_sglang_perf.gate.store import BaselineStore, BrokenBaselines, check_baseline_dir

RERECORD = "move the file away and re-record with --sglang-update-baselines"


def test_a_missing_or_healthy_directory_passes(tmp_path: Path) -> None:
    check_baseline_dir(tmp_path / "missing")
    BaselineStore(tmp_path, KEY).write([entry()], ENV)
    check_baseline_dir(tmp_path)


def test_a_corrupt_file_stops_the_session_once_with_the_file_and_the_fix(tmp_path: Path) -> None:
    path = BaselineStore(tmp_path, KEY).write([entry()], ENV)
    path.write_text(path.read_text()[:-40])
    with pytest.raises(BrokenBaselines) as raised:
        check_baseline_dir(tmp_path)
    assert str(raised.value).startswith(f"sglang-perf: baseline file {path}: is not valid JSON (")
    assert str(raised.value).endswith(f"repair it (an unresolved merge?) or {RERECORD}. No server was started.")


def test_an_unknown_schema_and_a_second_bad_file_are_both_named(tmp_path: Path) -> None:
    newer = tmp_path / f"{KEY}.json"
    newer.write_text(json.dumps({"schema_version": 99, "environment_key": KEY, "environment": {}, "entries": {}}))
    other = tmp_path / "other.json"
    other.write_text("[]")
    with pytest.raises(BrokenBaselines) as raised:
        check_baseline_dir(tmp_path)
    assert str(raised.value) == (
        "sglang-perf: 2 baseline files cannot be used; no server was started:\n"
        f"  baseline file {other}: must hold a JSON object, found a list; {RERECORD}\n"
        f"  baseline file {newer}: was written with schema 99 by a newer pytest-sglang-perf; this one reads schema 2; "
        "upgrade pytest-sglang-perf (pip install -U pytest-sglang-perf)")
