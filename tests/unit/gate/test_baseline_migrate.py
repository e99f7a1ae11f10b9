"""Baseline schema 2 (each entry's `source`) and the upgrade of schema-1 files, in one place (gate/migrate.py).

`data/simulated-2xrtx-a6000__qwen-qwen3.6-27b.json` is a schema-1 file as the project's own perf suite recorded it
(four of its entries), copied before the schema changed.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from baseline_docs import KEY, make_entry

from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineFileError
from pytest_sglang_perf.gate.baseline_parse import load_entries, read_baseline_file
from pytest_sglang_perf.gate.migrate import upgrade
from pytest_sglang_perf.gate.store import BaselineStore

SCHEMA_1 = Path(__file__).parents[1] / "data" / "simulated-2xrtx-a6000__qwen-qwen3.6-27b.json"
SCHEMA_1_KEY = SCHEMA_1.stem
ACCEPTED = {"how": "accepted", "dirty": False, "host": "gpu-1", "results_file": "run.json",
            "generated_at": "2026-12-01T08:00:00+00:00"}


def test_a_schema_1_file_reads_with_no_source_and_every_other_field_as_stored() -> None:
    raw = json.loads(SCHEMA_1.read_text())
    assert raw["schema_version"] == 1
    found = read_baseline_file(SCHEMA_1, SCHEMA_1_KEY)
    assert found is not None
    assert found.stored_schema == 1
    assert len(found.entries) == 4
    for (test_id, variant), entry in found.entries.items():
        assert entry.source is None
        written = entry.to_dict()
        assert written.pop("source") is None
        assert written == raw["entries"][test_id][variant]  # nothing else changed on the way in


def test_the_next_write_stores_a_schema_1_file_as_schema_2(tmp_path: Path) -> None:
    path = tmp_path / SCHEMA_1.name
    shutil.copy(SCHEMA_1, path)
    before = json.loads(path.read_text())
    added = dataclasses.replace(make_entry("tests/new.py::test_n"), source=ACCEPTED)
    BaselineStore(tmp_path, SCHEMA_1_KEY).write([added], {"writer": "new"})
    after = json.loads(path.read_text())
    assert after["schema_version"] == SCHEMA_VERSION == 2
    for test_id, variants in before["entries"].items():
        for variant, old in variants.items():
            assert after["entries"][test_id][variant] == {**old, "source": None}
    assert after["entries"]["tests/new.py::test_n"]["default"]["source"] == ACCEPTED
    again = read_baseline_file(path, SCHEMA_1_KEY)
    assert again is not None and again.stored_schema == 2


def test_a_source_round_trips(tmp_path: Path) -> None:
    entry = dataclasses.replace(make_entry(), source=ACCEPTED)
    BaselineStore(tmp_path, KEY).write([entry], {})
    assert load_entries(tmp_path / f"{KEY}.json", KEY)[(entry.test_id, entry.variant)] == entry


def _doc(version: int, **entry_fields: Any) -> dict[str, Any]:
    return {"schema_version": version, "environment_key": KEY, "environment": {},
            "entries": {"t": {"v": {**make_entry().to_dict(), **entry_fields}}}}


@pytest.mark.parametrize(("doc", "problem"), [
    (_doc(3), "was written with schema 3 by a newer pytest-sglang-perf; this one reads schema 2; upgrade "
              "pytest-sglang-perf (pip install -U pytest-sglang-perf)"),
    (_doc(0), "was recorded with schema 0; this plugin reads schemas 1 to 2; to re-record, move the file away and "
              "re-record with --sglang-update-baselines"),
    (_doc(2, source={"how": "guessed"}), "entry 't' variant 'v': 'source' 'how' must be one of 'recorded', "
                                         "'accepted', found 'guessed'"),
    (_doc(2, source={"how": "accepted", "host": 7}), "entry 't' variant 'v': 'source' 'host' has the wrong type: 7"),
    (_doc(2, source="ci"), "entry 't' variant 'v': 'source' must be an object or null, found a string"),
])
def test_an_unknown_schema_or_a_bad_source_is_an_error_naming_the_file(tmp_path: Path, doc: dict[str, Any],
                                                                        problem: str) -> None:
    path = tmp_path / f"{KEY}.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineFileError) as raised:
        load_entries(path, KEY)
    assert str(raised.value).startswith(f"baseline file {path}: {problem}")


def test_upgrading_leaves_a_malformed_entry_for_the_parser_to_name(tmp_path: Path) -> None:
    doc = {"schema_version": 1, "environment_key": KEY, "environment": {}, "entries": {"t": {"v": 3}, "u": []}}
    assert upgrade(tmp_path, doc) == {**doc, "schema_version": 2}
    path = tmp_path / f"{KEY}.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineFileError, match="entry 't' variant 'v' must be an object, found a number"):
        load_entries(path, KEY)
