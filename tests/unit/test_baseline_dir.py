"""A session's baseline directory read before any server starts, and the `sglang-perf baselines` listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_store import ENV, KEY, entry

from pytest_sglang_perf.gate.baseline_list import list_baselines, medians_text
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
        f"  baseline file {newer}: was written with schema 99 by a newer pytest-sglang-perf; this one reads schema 1; "
        "upgrade pytest-sglang-perf (pip install -U pytest-sglang-perf)")


def test_the_listing_shows_each_median_in_its_unit(tmp_path: Path) -> None:
    path = BaselineStore(tmp_path, KEY).write([entry()], ENV)
    assert list_baselines(tmp_path).lines == [
        f"{path}: 1 cell (medians)",
        "  tests/perf/test_a.py::test_rbt [default]: 3 requests over 1 boot, recorded 2026-05-09T07:35:25+00:00 at "
        "commit abc123",
        "    output_throughput 55.12 tok/s, ttft 442.9 ms",
    ]
    assert medians_text(entry()) == "output_throughput 55.12 tok/s, ttft 442.9 ms"


def test_the_listing_names_a_bad_file_and_goes_on(tmp_path: Path) -> None:
    BaselineStore(tmp_path, KEY).write([entry()], ENV)
    (tmp_path / "broken.json").write_text("{")
    listing = list_baselines(tmp_path)
    assert len(listing.lines) == 3
    [problem] = listing.problems
    assert problem.startswith(f"baseline file {tmp_path / 'broken.json'}: is not valid JSON")
