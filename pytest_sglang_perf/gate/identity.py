"""What a cell measured, for "compare like with like": the request, the server args as resolved, the model and the
GPUs. A baseline is compared only when its identity equals the cell's; otherwise the cell is `stale`, and
`differences()` names what changed ("max_tokens 512 -> 128", "--tp-size 1 -> 2").

How often a request is sent (repeats, warmup) is not part of the identity: more samples measure the same thing.
Whether the prefix cache was cold or warm is: a cache hit prefills one token instead of the prompt. Entries recorded
before the mode was kept read `unknown`, never equal to a mode (those requests, after a warmup, were cache hits on
SGLang but full prefills on the simulator), so such a cell is stale until its baseline is refreshed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.measurement.prefix_cache import COLD, UNKNOWN
from pytest_sglang_perf.measurement.request import RequestSettings


def _no_args() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ServerIdentity:
    """What a variant's server is, for its cells' identities (session/identity.py builds it)."""

    model: str
    model_config: str | None
    gpus: str
    args: Mapping[str, str]


@dataclass(frozen=True)
class CellIdentity:
    prompt_hash: str
    """sha256 (first 16 hex digits) of the prompt's text."""
    max_tokens: int
    temperature: float
    seed: int
    ignore_eos: bool
    model: str
    """The model id the configuration names (`--model-path`)."""
    model_config: str | None
    """sha256 (first 16 hex digits) of the model's local config.json; None when the model is not a local folder."""
    gpus: str
    """The GPUs one server uses: `2x RTX A6000`, `cpu`."""
    args: Mapping[str, str] = field(default_factory=_no_args)
    """The options the server's command line sets, as SGLang's parser resolves them: `{"--tp-size": "2"}`."""
    prefix_cache: str = COLD
    """"cold" or "warm" (measurement/prefix_cache.py); "unknown" in entries recorded before it was kept."""
    concurrency: int = 1
    """Streams sent at once (measurement/concurrency.py): batched decode is another thing than one stream's. The
    SLO is not part of the identity: goodput is recomputed from the baseline's samples under the run's SLO."""
    prompt_tokens: int | None = None
    """`measure(prompt_tokens=N)`: the prompt's exact length by the server's own count (docs/prefill.md); None for a
    prompt of the test's own."""

    @classmethod
    def of(cls, prompt_hash: str, request: RequestSettings, server: ServerIdentity) -> CellIdentity:
        return cls(prompt_hash, request.max_tokens, request.temperature, request.seed, request.ignore_eos,
                   server.model, server.model_config, server.gpus, MappingProxyType(dict(server.args)),
                   request.prefix_cache, request.concurrency, request.prompt_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_hash": self.prompt_hash, "max_tokens": self.max_tokens, "temperature": self.temperature,
            "seed": self.seed, "ignore_eos": self.ignore_eos, "prefix_cache": self.prefix_cache,
            "model": self.model, "model_config": self.model_config, "gpus": self.gpus, "args": dict(self.args),
            **({"concurrency": self.concurrency} if self.concurrency != 1 else {}),
            **({"prompt_tokens": self.prompt_tokens} if self.prompt_tokens is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellIdentity:
        """Raises KeyError for a missing field, TypeError for a value of the wrong type."""
        args = data["args"]
        if not isinstance(args, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in args.items()):
            raise TypeError(f"'args' must map option names to value texts, found {args!r}")
        return cls(
            prompt_hash=_typed(data, "prompt_hash", str), max_tokens=_typed(data, "max_tokens", int),
            temperature=float(_typed(data, "temperature", int | float)), seed=_typed(data, "seed", int),
            ignore_eos=_typed(data, "ignore_eos", bool), model=_typed(data, "model", str),
            model_config=_typed(data, "model_config", str | None), gpus=_typed(data, "gpus", str),
            args=MappingProxyType(dict(args)),
            prefix_cache=_typed(data, "prefix_cache", str) if "prefix_cache" in data else UNKNOWN,
            concurrency=_typed(data, "concurrency", int) if "concurrency" in data else 1,
            prompt_tokens=_typed(data, "prompt_tokens", int) if data.get("prompt_tokens") is not None else None,
        )


def _typed(data: Mapping[str, Any], key: str, kind: Any) -> Any:
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key!r} has the wrong type: {value!r}")
    return value


_FIELDS: tuple[tuple[str, str], ...] = (
    ("max_tokens", "max_tokens"), ("temperature", "temperature"), ("seed", "seed"), ("ignore_eos", "ignore_eos"),
    ("model", "model"), ("gpus", "GPUs"), ("concurrency", "concurrency"), ("prompt_tokens", "prompt_tokens"),
)


def differences(baseline: CellIdentity, current: CellIdentity,
                default_of: Callable[[str], str | None] = lambda option: None) -> list[str]:
    """What changed from the baseline's identity to the current one, in words; empty when they are the same.

    `default_of` gives an option's default, so that an option set on one side only reads `--tp-size 1 -> 2`.
    """
    out = []
    if baseline.prompt_hash != current.prompt_hash:
        out.append(f"prompt changed (hash {baseline.prompt_hash} -> {current.prompt_hash})")
    for name, label in _FIELDS:
        old, new = getattr(baseline, name), getattr(current, name)
        if old != new:
            out.append(f"{label} {_text(old)} -> {_text(new)}")
    if baseline.prefix_cache != current.prefix_cache:
        out.append(_prefix_cache_change(baseline.prefix_cache, current.prefix_cache))
    if baseline.model_config != current.model_config:
        out.append(f"model config.json {baseline.model_config or 'none'} -> {current.model_config or 'none'}")
    for option in sorted(set(baseline.args) | set(current.args)):
        old_value = baseline.args.get(option, default_of(option))
        new_value = current.args.get(option, default_of(option))
        if old_value != new_value:
            out.append(f"{option} {_or_unset(old_value)} -> {_or_unset(new_value)}")
    return out


def _prefix_cache_change(old: str, new: str) -> str:
    change = f"prefix_cache {old} -> {new}"
    if old == UNKNOWN:
        return (change + " (recorded before the prefix cache was controlled: on SGLang those requests hit the cache "
                "the warmup filled; refresh the baseline)")
    return change


def _text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _or_unset(value: str | None) -> str:
    return "(not set)" if value is None else value
