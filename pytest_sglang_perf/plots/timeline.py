"""Each variant's server boot as the boot timeline draws it, from a results document, without matplotlib.

The steps are what SGLang logged about its own boot (server/startup.py's StartupFacts, as `to_dict` writes them
into `servers[variant].startup`): weights loaded, KV cache allocated, then the CUDA-graph capture per phase
(`cuda_graph`, else the capture lines, else their total); `boot_seconds` is launch -> ready as the plugin timed it,
and what the steps leave of it is "other, until ready" (process start, imports, warm-up). A step SGLang did not log
is listed as not logged; nothing is estimated in its place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.plots.data import cells_of, ordered

WEIGHTS = "weights loaded"
KV_CACHE = "KV cache allocated"
GRAPHS = "graph capture"
OTHER = "other, until ready"
_SLACK = 0.005
"""Seconds of rounding (SGLang logs 2 decimals) allowed before the steps count as longer than the whole boot."""


@dataclass(frozen=True)
class Segment:
    """One step of a boot: its label ('graph capture: decode' for a graph phase), kind and seconds."""

    label: str
    kind: str
    """WEIGHTS, KV_CACHE, GRAPHS or OTHER: the colour family."""
    seconds: float


@dataclass(frozen=True)
class BootBar:
    """One variant's boot: the logged steps in order, the rest until ready, and what was not logged."""

    variant: str
    total: float | None
    """Launch -> ready (boot_seconds); None when the file does not have it."""
    segments: tuple[Segment, ...]
    not_logged: tuple[str, ...]
    """The steps SGLang did not log (WEIGHTS, KV_CACHE, GRAPHS), or 'ready time' without a total."""
    note: str | None = None
    """Why no 'other' step is drawn when the logged steps add up to more than the boot."""


def boot_bars(doc: Mapping[str, Any]) -> list[BootBar]:
    """One bar per variant with a server record (`servers`), else with a cell (older files), in the file's order."""
    raw = doc.get("servers")
    servers: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    cells = cells_of(doc)
    variants = ordered([*map(str, servers), *(str(cell.get("variant")) for cell in cells)])
    bars = []
    for variant in variants:
        record = servers.get(variant)
        record = record if isinstance(record, Mapping) else _cell_record(cells, variant)
        if record is not None:
            bars.append(boot_bar(variant, record.get("startup"), record.get("boot_seconds")))
    return bars


def _cell_record(cells: list[Mapping[str, Any]], variant: str) -> Mapping[str, Any] | None:
    """The boot facts of a variant's first cell that has any (a file without `servers`)."""
    for cell in cells:
        if str(cell.get("variant")) == variant and (cell.get("startup") or cell.get("boot_seconds") is not None):
            return cell
    return None


def boot_bar(variant: str, startup: Any, boot_seconds: Any) -> BootBar:
    """The bar of one boot from its StartupFacts dict (or None) and its seconds to ready (or None)."""
    facts: Mapping[str, Any] = startup if isinstance(startup, Mapping) else {}
    segments: list[Segment] = []
    not_logged: list[str] = []
    for label, key in ((WEIGHTS, "load_weight"), (KV_CACHE, "kv_cache_allocation")):
        seconds = _seconds(facts.get(key))
        if seconds is None:
            not_logged.append(label)
        elif seconds > 0:
            segments.append(Segment(label, label, seconds))
    graphs = graph_segments(facts)
    if graphs is None:
        not_logged.append(GRAPHS)
    else:
        segments.extend(graphs)
    total = _seconds(boot_seconds)
    if total is None:
        return BootBar(variant, None, tuple(segments), (*not_logged, "ready time"))
    logged = math.fsum(segment.seconds for segment in segments)
    if logged > total + _SLACK:
        note = f"the logged steps ({logged:.2f} s) add up to more than the boot ({total:.2f} s)"
        return BootBar(variant, total, tuple(segments), tuple(not_logged), note)
    if total - logged > 0:
        segments.append(Segment(OTHER, OTHER, total - logged))
    return BootBar(variant, total, tuple(segments), tuple(not_logged))


def graph_segments(facts: Mapping[str, Any]) -> list[Segment] | None:
    """The capture per phase (`cuda_graph`), else per captured graph (`captures`), else the total
    (`graph_capture_seconds`); phases of 0 s are left out. None when none of them was logged."""
    phases = facts.get("cuda_graph")
    if isinstance(phases, Mapping) and phases:
        return _positive((f"{GRAPHS}: {name}", _seconds(value)) for name, value in phases.items())
    captures = [c for c in facts.get("captures") or () if isinstance(c, Mapping) and _seconds(c.get("seconds"))
                is not None]
    if captures:
        return _positive((f"{GRAPHS}: {c.get('graph')}", _seconds(c.get("seconds"))) for c in captures)
    total = _seconds(facts.get("graph_capture_seconds"))
    return None if total is None else _positive([(GRAPHS, total)])


def _positive(pairs: Iterable[tuple[str, float | None]]) -> list[Segment]:
    return [Segment(label, GRAPHS, seconds) for label, seconds in pairs if seconds is not None and seconds > 0]


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)
