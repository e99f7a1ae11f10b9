"""A results file (`pytest --sglang-results PATH`) read for `sglang-perf baseline accept`: per cell its verdict, the
environment key it was judged against and the baseline entry it offers (`entry`, parsed by the same parser as a
baseline file's entries), marked as accepted from this file. A file that cannot be used raises ResultsFileError
naming the file, the problem and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.gate.baseline import SOURCE_ACCEPTED, BaselineEntry, BaselineFileError
from pytest_sglang_perf.gate.baseline_parse import parse_entry
from pytest_sglang_perf.gate.results_read import REWRITE, ResultsFileError, read_results_document


@dataclass(frozen=True)
class OfferedCell:
    """One cell of a results file and the baseline entry it offers (None: nothing was measured)."""

    test_id: str
    variant: str
    verdict: str
    environment_key: str | None
    entry: BaselineEntry | None
    stale: tuple[str, ...] = ()
    """What differed from the baseline the cell was judged against (a `stale` cell)."""
    skipped: str | None = None
    """Why the cell offers no entry although it was measured: KEPT_BY_NEW, or the results file's `withheld` (e.g.
    measured under disturbed conditions)."""


KEPT_BY_NEW = ("not recorded by its --sglang-update-baselines=new run (the cell had a baseline and was gated), so "
               "it is not offered either")


@dataclass(frozen=True)
class ResultsFile:
    path: Path
    generated_at: str | None
    machine: Mapping[str, Any] | None
    cells: tuple[OfferedCell, ...]


def read_results(path: Path) -> ResultsFile:
    """The results file at `path`, its cells' entries marked as accepted from it; raises ResultsFileError."""
    doc = read_results_document(path)
    machine = doc.get("machine") if isinstance(doc.get("machine"), dict) else None
    generated_at = doc.get("generated_at") if isinstance(doc.get("generated_at"), str) else None
    source = MappingProxyType({
        "how": SOURCE_ACCEPTED, "dirty": _typed(machine, "dirty", bool), "host": _typed(machine, "host", str),
        "results_file": path.name, "generated_at": generated_at,
    })
    baselines = doc.get("baselines")
    kept_by_new = isinstance(baselines, dict) and baselines.get("mode") == "new"
    cells = tuple(_cell(path, index, data, source, kept_by_new) for index, data in enumerate(doc["cells"]))
    return ResultsFile(path, generated_at, None if machine is None else MappingProxyType(machine), cells)


def _cell(path: Path, index: int, data: Any, source: Mapping[str, Any], kept_by_new: bool) -> OfferedCell:
    """The cell at `index`; in a results file of a --sglang-update-baselines=new run, a cell the run did not record
    offers nothing (accepting it would refresh a baseline nobody meant to refresh)."""
    if not isinstance(data, dict):
        raise ResultsFileError(path, f"cell {index} is a {type(data).__name__}, not an object")
    test_id, variant = data.get("test_id"), data.get("variant")
    where = f"cell {index} ({test_id} [{variant}])"
    if not isinstance(test_id, str) or not isinstance(variant, str):
        raise ResultsFileError(path, f"{where} has no test_id or variant")
    if "entry" not in data or "environment_key" not in data:
        raise ResultsFileError(path, f"{where} carries no baseline entry ('entry', 'environment_key'): the file was "
                                     "written by an older pytest-sglang-perf", REWRITE + " (this version)")
    key = data["environment_key"]
    if key is not None and not isinstance(key, str):
        raise ResultsFileError(path, f"{where}: 'environment_key' must be a string or null, found {key!r}")
    entry = None
    if data["entry"] is not None:
        try:
            entry = replace(parse_entry(path, test_id, variant, data["entry"]), source=source)
        except BaselineFileError as exc:
            raise ResultsFileError(path, f"{where}: its 'entry' is malformed: {exc.problem}") from None
    stale = tuple(str(s) for s in data["stale"]) if isinstance(data.get("stale"), list) else ()
    withheld = data.get("withheld")
    skipped = KEPT_BY_NEW if kept_by_new and entry is not None and data.get("updated") is not True else None
    if entry is None and isinstance(withheld, str):
        skipped = withheld
    return OfferedCell(test_id, variant, _verdict(data, stale), key, None if skipped else entry, stale, skipped)


def _verdict(data: Mapping[str, Any], stale: tuple[str, ...]) -> str:
    """The cell's verdict against the baseline it was judged on. A cell a refresh run recorded reads `updated`,
    but accepting it is the same decision: it is `stale` when its old baseline was not comparable, else its worst
    metric's verdict when that was regressed or inconclusive."""
    verdict = str(data.get("verdict"))
    if data.get("updated") is not True:
        return verdict
    if stale:
        return "stale"
    metrics = data.get("metrics")
    found = {m.get("verdict") for m in metrics.values() if isinstance(m, dict)} if isinstance(metrics, dict) else set()
    return next((worse for worse in ("regressed", "inconclusive") if worse in found), verdict)


def _typed(data: Mapping[str, Any] | None, key: str, kind: type) -> Any:
    value = None if data is None else data.get(key)
    return value if isinstance(value, kind) else None
