"""The results document of a pytest-xdist run: its workers' documents merged (outputs/merge.py)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_sglang_perf.outputs.merge import merge_documents


def _doc(variant: str, generated: str, ledger: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": 1, "generated_at": generated, "simulated": True, "environment": {"python": "3.11"},
            "servers": {variant: {"boot_seconds": 1.0}},
            "cells": [{"test_id": "t.py::test_x", "variant": variant, "verdict": "ok"}],
            "errored": [], "baselines": ledger}


def test_cells_servers_and_the_baselines_account_of_every_worker_are_kept() -> None:
    a = _doc("a", "2026-12-01T10:00:00+00:00", {"mode": "all", "created": [["t.py::test_x", "a"]], "updated": [],
                                                  "unchanged": [], "unused": [["t.py::gone", "a"],
                                                                              ["t.py::test_x", "b"]], "old": []})
    b = _doc("b", "2026-12-01T10:00:05+00:00", {"mode": "all", "created": [], "updated": [["t.py::test_x", "b"]],
                                                  "unchanged": [], "unused": [["t.py::gone", "a"],
                                                                              ["t.py::test_x", "a"]], "old": []})
    merged = merge_documents([a, b], ["gw0", "gw1"])
    assert [(c["variant"], c["verdict"]) for c in merged["cells"]] == [("a", "ok"), ("b", "ok")]
    assert sorted(merged["servers"]) == ["a", "b"]
    assert merged["generated_at"] == "2026-12-01T10:00:05+00:00"
    assert merged["workers"] == ["gw0", "gw1"]
    ledger = merged["baselines"]
    assert ledger["created"] == [["t.py::test_x", "a"]] and ledger["updated"] == [["t.py::test_x", "b"]]
    assert ledger["unused"] == [["t.py::gone", "a"]]  # what one worker recorded is not unused


def test_nothing_to_merge_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        merge_documents([])
