"""How a release words the boot lines the simulator prints while it plays that release (`--sim-sglang-version`):
`data/sglang-log-wordings.json`, one era per change, read in each release's wheel (docs/sglang-older-releases.md
§5.1). The plugin's log reader reads every era's wording (server/logscan.py); this is what the simulator writes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_sglang_perf.sglang_facts.versions import version_key

WORDINGS = Path(__file__).resolve().parent / "data" / "sglang-log-wordings.json"


@dataclass(frozen=True)
class LogWording:
    """One era's boot lines, as `str.format` templates (the data file's `_comment` names the fields)."""

    since: str
    device_graph: Mapping[str, str]
    decode_first: bool
    startup_timings: bool
    decode_begin: str
    decode_sizes: str | None
    decode_end: str
    prefill_begin: str
    prefill_sizes: str | None
    prefill_end: str
    prefill_disabled: str
    draft_names: Mapping[str, str]
    draft_begin: str
    draft_end: str

    def graph(self, device: str | None) -> str:
        """The device's word for a graph in this era (`cuda graph` in 0.5.13, `CUDA graph` later; `cpu graph`)."""
        return self.device_graph.get(device or "cuda", self.device_graph["cuda"])


@cache
def all_wordings() -> tuple[LogWording, ...]:
    """Every era, oldest first."""
    eras = [_era(item) for item in json.loads(WORDINGS.read_text(encoding="utf-8"))["eras"]]
    return tuple(sorted(eras, key=lambda era: version_key(era.since)))


@cache
def wording_for(version: str) -> LogWording:
    """The era of SGLang `version`: the last one starting at or before it (the oldest for an older release)."""
    eras = all_wordings()
    try:
        key = version_key(version)
    except ValueError:
        return eras[-1]
    return next((era for era in reversed(eras) if version_key(era.since) <= key), eras[0])


def _era(item: Mapping[str, object]) -> LogWording:
    def text(key: str) -> str:
        return str(item[key])

    def optional(key: str) -> str | None:
        value = item.get(key)
        return None if value is None else str(value)

    def names(key: str) -> dict[str, str]:
        value = item[key]
        if not isinstance(value, dict):
            raise ValueError(f"{WORDINGS}: {key} must be an object of strings")
        return {str(k): str(v) for k, v in value.items()}

    return LogWording(
        since=text("from"), device_graph=names("device_graph"), decode_first=item["graph_order"] == "decode_first",
        startup_timings=bool(item["startup_timings"]), decode_begin=text("decode_begin"),
        decode_sizes=optional("decode_sizes"), decode_end=text("decode_end"), prefill_begin=text("prefill_begin"),
        prefill_sizes=optional("prefill_sizes"), prefill_end=text("prefill_end"),
        prefill_disabled=text("prefill_disabled"), draft_names=names("draft_names"), draft_begin=text("draft_begin"),
        draft_end=text("draft_end"))
