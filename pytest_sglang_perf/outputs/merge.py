"""One results document from the documents of several pytest-xdist workers of one run.

Plain Python (no pytest). Each worker measures the variants it was given and sends its results document
(gate/results_file.py) to the controller, which writes the run's results file, Markdown report and plots from the
merged one: the cells and the servers of every worker, the errored variants (once each: every worker checks every
variant before any boot), and one account of the baselines: an entry a worker recorded is created or updated, one
that a worker's files hold and no test of the run measured is unused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_CHANGED = ("created", "updated")


def merge_documents(docs: Sequence[Mapping[str, Any]], workers: Sequence[str] = ()) -> dict[str, Any]:
    """The run's results document from its workers' (in worker order); `workers` names them for the document."""
    if not docs:
        raise ValueError("merge_documents needs at least one document")
    first = docs[0]
    merged = dict(first)
    merged["generated_at"] = max(str(doc.get("generated_at", "")) for doc in docs)
    merged["simulated"] = any(bool(doc.get("simulated")) for doc in docs)
    merged["servers"] = {name: record for doc in docs for name, record in _mapping(doc.get("servers")).items()}
    merged["cells"] = [cell for doc in docs for cell in _list(doc.get("cells"))]
    merged["errored"] = _one_per_variant(errored for doc in docs for errored in _list(doc.get("errored")))
    merged["baselines"] = _baselines([doc.get("baselines") for doc in docs])
    merged["workers"] = list(workers)
    return merged


def _baselines(ledgers: Iterable[object]) -> dict[str, Any] | None:
    present = [ledger for ledger in ledgers if isinstance(ledger, Mapping)]
    if not present:
        return None
    merged = dict(present[0])
    for key in (*_CHANGED, "unchanged"):
        merged[key] = _unique(pair for ledger in present for pair in _list(ledger.get(key)))
    touched = {tuple(pair) for key in _CHANGED for pair in merged[key]}
    merged["unused"] = [pair for pair in _unique(p for ledger in present for p in _list(ledger.get("unused")))
                        if tuple(pair) not in touched]
    merged["unchanged"] = [pair for pair in merged["unchanged"] if tuple(pair) not in touched]
    merged["old"] = _unique(old for ledger in present for old in _list(ledger.get("old")))
    return merged


def _one_per_variant(errored: Iterable[Any]) -> list[Any]:
    """Every worker runs the pre-flight check of every variant: a variant it rejected is in each worker's list."""
    seen: dict[object, Any] = {}
    for item in errored:
        key = item.get("variant") if isinstance(item, Mapping) else repr(item)
        seen.setdefault(key, item)
    return list(seen.values())


def _unique(items: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []
