"""The request a measurement sends, as one record: RequestSettings (what a baseline records beside the prompt's
hash), extended by RequestParams (the request sent) and by config's RequestDefaults (the `request` table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from pytest_sglang_perf.measurement.concurrency import Level, Slo, level_suffix
from pytest_sglang_perf.measurement.prefix_cache import COLD, UNKNOWN


@dataclass(frozen=True)
class RequestSettings:
    """How a fixed prompt is sent: what a baseline records of the request beside the prompt's hash. Its defaults
    are the project's (a test that passes nothing and a `[request]` table that sets nothing send these); the one
    record of the request's settings: RequestParams (the request sent) and config's RequestDefaults extend it."""

    max_tokens: int = 512
    temperature: float = 0.6
    seed: int = 0
    repeats: int = 3
    """Requests per measurement (the first round, AUTO_FIRST_ROUND, with the adaptive plan)."""
    warmup: int = 1
    ignore_eos: bool = True
    """SGLang's `ignore_eos`: every request yields exactly max_tokens tokens."""
    prefix_cache: str = COLD
    """"cold": every request prefills its whole prompt (/flush_cache before each); "warm": the cached case
    (measurement/prefix_cache.py); "unknown" in files written before it was kept."""
    concurrency: int = 1
    """Streams sent at once per round (measurement/concurrency.py); 1: one stream, requests one after another.
    With concurrency > 1, `repeats` and `warmup` count rounds."""
    slo: Slo | None = None
    """The objectives a request must meet to count for goodput; None: no goodput."""
    prompt_tokens: int | None = None
    """`measure(prompt_tokens=N)`: the prompt was built to be exactly N tokens by the server's own count
    (measurement/exact_prompt.py) and every request's usage said so; None: a prompt of the test's own."""

    def to_dict(self) -> dict[str, Any]:
        """Concurrency, SLO and an exact prompt length are written only when set: a one-stream entry reads as before
        they existed."""
        return {
            "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
            "repeats": self.repeats, "warmup": self.warmup, "ignore_eos": self.ignore_eos,
            "prefix_cache": self.prefix_cache,
            **({"concurrency": self.concurrency} if self.concurrency != 1 else {}),
            **({"slo": self.slo.to_dict()} if self.slo is not None else {}),
            **({"prompt_tokens": self.prompt_tokens} if self.prompt_tokens is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestSettings:
        """Raises KeyError for a missing field, TypeError for a value of the wrong type. A missing `ignore_eos`
        (files written before it was recorded) is true: every earlier version sent it."""
        ignore_eos = data.get("ignore_eos", True)
        if not isinstance(ignore_eos, bool):
            raise TypeError(f"expected true or false for ignore_eos, found {ignore_eos!r}")
        prefix_cache = data.get("prefix_cache", UNKNOWN)
        if not isinstance(prefix_cache, str):
            raise TypeError(f"expected a text for prefix_cache, found {prefix_cache!r}")
        slo = data.get("slo")
        if slo is not None and not isinstance(slo, Mapping):
            raise TypeError(f"expected a table of objectives for slo, found {slo!r}")
        prompt_tokens = data.get("prompt_tokens")
        return cls(max_tokens=_int(data["max_tokens"]), temperature=_number(data["temperature"]),
                   seed=_int(data["seed"]), repeats=_int(data["repeats"]), warmup=_int(data["warmup"]),
                   ignore_eos=ignore_eos, prefix_cache=prefix_cache, concurrency=_int(data.get("concurrency", 1)),
                   slo=None if slo is None else Slo.from_dict(slo),
                   prompt_tokens=None if prompt_tokens is None else _int(prompt_tokens))


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, found {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, found {value!r}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class RequestParams(RequestSettings):
    """The fixed request a measurement sends: its settings (every field of RequestSettings, resolved: `concurrency`
    is the streams per round, "max" read from the server) plus the prompt, whose hash identifies it in baselines,
    the adaptive plan's limit and the level as the test asked for it."""

    prompt: str
    max_repeats: int | None = None
    """The adaptive plan (`repeats="auto"`): keep measuring, up to this many requests, until the verdict is
    decided; None for a fixed plan. With it, `repeats` is the plan's first round."""
    level: Level = 1
    """The level as the test asked for it (16 or "max"): it names the cell (`@c16`, `@cmax`)."""

    @property
    def settings(self) -> RequestSettings:
        """The part of the request a baseline records: its RequestSettings fields alone."""
        return RequestSettings(**{name: getattr(self, name) for name in SETTINGS_FIELDS})

    @property
    def cell_suffix(self) -> str:
        """What this request adds to its cell's test id (concurrency.level_suffix)."""
        return level_suffix(self.level)


SETTINGS_FIELDS = tuple(f.name for f in fields(RequestSettings))
"""The request settings' field names, in order: what RequestParams and config's RequestDefaults add to them is
theirs alone."""
