"""Faults on demand: `--sim-fault SPEC` (or `SGLANG_SIM_FAULT=SPEC`), each one a way a real server fails.

SPEC is a comma-separated list of faults; each fault is a name with `:`-separated arguments:

| fault               | what the server does                                                                      |
|---------------------|-------------------------------------------------------------------------------------------|
| `crash-at-boot`     | the scheduler raises while loading weights: traceback in the log, then the whole process   |
|                     | tree is killed, as SGLang's SIGQUIT handler does (exit by SIGKILL)                         |
| `hang-at-boot`      | stops during CUDA-graph capture and never opens its port                                  |
| `fail-warmup`       | the port opens, the warmup request fails: `Initialization failed. warmup error: ...`,       |
|                     | then the process tree is killed                                                           |
| `die-after:N`       | serves N generation requests, then SIGKILLs itself when request N+1 arrives               |
| `http-500:P`        | answers a generation request with HTTP 500 with probability P (0 < P <= 1, seeded)        |
| `cut-stream:N`      | closes every streamed response after N content chunks, without `data: [DONE]`             |
| `no-usage`          | never sends usage (the stream's usage chunk, the response's `usage`)                       |
| `short:N`           | stops every request N tokens before its max_tokens, even with ignore_eos                   |
| `slow-after:N:F[:M]`| after N generation requests, every duration is F times longer (F >= 1); with M, only for  |
|                     | the next M requests, then normal again (a transient slowdown: a busy machine)             |
| `slow-boot:N:F`     | the run's Nth boot (a `--sim-boot` label ending in `#N`, as the plugin sets it) runs every  |
|                     | duration, its boot included, F times longer (F >= 1): a slow boot, which stays slow       |
| `burst-at:N`        | streams request N's content in one write at its end (one read carries every chunk, as  |
|                     | behind a buffering proxy): the client sees no decode time for that request              |
| `no-server-info`    | `/server_info` and `/get_server_info` answer 404, like a proxy that exposes only the APIs  |

e.g. `--sim-fault die-after:3` or `SGLANG_SIM_FAULT="http-500:0.3,slow-after:2:4"`. Generation requests are
`/v1/chat/completions` and `/generate` calls from clients (SGLang's own warmup request does not count).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

_USAGE = ("crash-at-boot, hang-at-boot, fail-warmup, die-after:N, http-500:P, cut-stream:N, burst-at:N, no-usage, "
          "short:N, slow-after:N:FACTOR[:M], slow-boot:N:FACTOR, no-server-info (combine with commas)")


@dataclass(frozen=True)
class Faults:
    crash_at_boot: bool = False
    hang_at_boot: bool = False
    fail_warmup: bool = False
    die_after: int | None = None
    http_500: float = 0.0
    cut_stream: int | None = None
    burst_at: int | None = None
    """The 1-based generation request whose streamed content goes out in one write."""
    no_usage: bool = False
    short: int = 0
    slow_after: tuple[int, float, int | None] | None = None
    """(after N requests, factor, for M requests or None: for good)."""
    no_server_info: bool = False
    slow_boot: tuple[int, float] | None = None
    """(the boot's number N, factor): the duration factor of the run's Nth boot."""

    def boot_factor(self, label: str) -> float:
        """The duration factor of the boot labelled `label` (`VARIANT#N`): slow-boot's factor on its Nth boot."""
        if self.slow_boot is None:
            return 1.0
        number, factor = self.slow_boot
        return factor if label.rpartition("#")[2] == str(number) else 1.0

    def slow_factor(self, requests_served: int) -> float:
        """The duration factor once `requests_served` generation requests have arrived."""
        if self.slow_after is None:
            return 1.0
        after, factor, lasting = self.slow_after
        if requests_served <= after or (lasting is not None and requests_served > after + lasting):
            return 1.0
        return factor


def parse_faults(spec: str) -> Faults:
    """`"die-after:3,no-usage"` -> Faults; raises ValueError naming the bad part and the syntax."""
    faults = Faults()
    for part in (item.strip() for item in spec.split(",")):
        if part:
            faults = _apply(faults, part)
    return faults


def _apply(faults: Faults, part: str) -> Faults:
    name, *args = part.split(":")
    handler = _HANDLERS.get(name.strip().lower())
    if handler is None:
        raise ValueError(f"unknown fault {name!r}; expected one of: {_USAGE}")
    try:
        return handler(faults, [arg.strip() for arg in args])
    except ValueError as exc:
        raise ValueError(f"fault {part!r}: {exc}; expected one of: {_USAGE}") from None


def _no_args(field: str) -> Callable[[Faults, list[str]], Faults]:
    def handle(faults: Faults, args: list[str]) -> Faults:
        if args:
            raise ValueError("takes no argument")
        return _set(faults, field, True)

    return handle


def _set(faults: Faults, field: str, value: object) -> Faults:
    changes: dict[str, Any] = {field: value}
    return replace(faults, **changes)


def _count(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{value} must be >= {minimum}")
    return value


def _one_count(field: str, minimum: int) -> Callable[[Faults, list[str]], Faults]:
    def handle(faults: Faults, args: list[str]) -> Faults:
        if len(args) != 1:
            raise ValueError("takes one integer argument")
        return _set(faults, field, _count(args[0], minimum))

    return handle


def _http_500(faults: Faults, args: list[str]) -> Faults:
    if len(args) != 1:
        raise ValueError("takes one probability, e.g. http-500:0.3")
    try:
        probability = float(args[0])
    except ValueError:
        raise ValueError(f"{args[0]!r} is not a number") from None
    if not 0 < probability <= 1:
        raise ValueError(f"probability {probability} must be in (0, 1]")
    return replace(faults, http_500=probability)


def _slow_after(faults: Faults, args: list[str]) -> Faults:
    if len(args) not in (2, 3):
        raise ValueError("takes a request count, a factor and optionally a duration in requests, e.g. "
                         "slow-after:2:3.5 or slow-after:2:3.5:4")
    count = _count(args[0], 0)
    lasting = _count(args[2], 1) if len(args) == 3 else None
    try:
        factor = float(args[1])
    except ValueError:
        raise ValueError(f"{args[1]!r} is not a number") from None
    if factor < 1:
        raise ValueError(f"factor {factor} must be >= 1")
    return replace(faults, slow_after=(count, factor, lasting))


def _slow_boot(faults: Faults, args: list[str]) -> Faults:
    if len(args) != 2:
        raise ValueError("takes a boot number and a factor, e.g. slow-boot:1:1.5")
    return replace(faults, slow_boot=(_count(args[0], 1), _factor(args[1])))


def _factor(text: str) -> float:
    try:
        factor = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if factor < 1:
        raise ValueError(f"factor {factor} must be >= 1")
    return factor


_HANDLERS: dict[str, Callable[[Faults, list[str]], Faults]] = {
    "crash-at-boot": _no_args("crash_at_boot"),
    "hang-at-boot": _no_args("hang_at_boot"),
    "fail-warmup": _no_args("fail_warmup"),
    "no-usage": _no_args("no_usage"),
    "no-server-info": _no_args("no_server_info"),
    "die-after": _one_count("die_after", 0),
    "cut-stream": _one_count("cut_stream", 0),
    "burst-at": _one_count("burst_at", 1),
    "short": _one_count("short", 1),
    "http-500": _http_500,
    "slow-after": _slow_after,
    "slow-boot": _slow_boot,
}
