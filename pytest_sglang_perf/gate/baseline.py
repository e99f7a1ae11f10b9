"""One recorded baseline (BaselineEntry), the error a bad baseline file raises, and the file schema's version.

The file format is described in store.py; baseline_parse.py reads a file's entries, store.py writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.measurement.result import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

SCHEMA_VERSION = 1

EntryKey = tuple[str, str]
"""(test id, variant)."""


@dataclass(frozen=True)
class BaselineEntry:
    """The recorded baseline of one test x variant cell."""

    test_id: str
    variant: str
    summaries: Mapping[str, Summary]
    samples: tuple[Sample, ...]
    args: tuple[str, ...]
    prompt_hash: str
    params: RequestSettings
    recorded_at: str
    commit: str | None
    environment: Mapping[str, Any]
    """The software facts when it was recorded (gate/environment.py), as recorded: shown, never interpreted."""
    startup: Mapping[str, Any] | None = None
    """The server's startup facts when the baseline was recorded (server.startup.StartupFacts.to_dict())."""
    ran: Mapping[str, str] | None = None
    """What the server ran (effective.EffectiveConfig.ran), e.g. {"prefill CUDA graph": "breakable (...)"}."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "startup": None if self.startup is None else dict(self.startup),
            "ran": None if self.ran is None else dict(self.ran),
            "metrics": {name: s.to_dict() for name, s in self.summaries.items()},
            "samples": [s.to_dict() for s in self.samples],
            "args": list(self.args),
            "prompt_hash": self.prompt_hash,
            "params": self.params.to_dict(),
            "recorded_at": self.recorded_at,
            "commit": self.commit,
            "environment": dict(self.environment),
        }


class BaselineFileError(SGLangPerfError):
    """A baseline file that cannot be used: the message names the file, the problem and the fix."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        super().__init__(f"baseline file {path}: {problem}; {fix}")
        self.path = path
