"""The simulator's own `--sim-*` knobs, each also settable as `SGLANG_SIM_<KNOB>`.

Precedence: command line > environment > default. A bad value names where it came from.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "SGLANG_SIM_"


class KnobError(ValueError):
    """A knob value that cannot be used; the message names the flag or variable."""


@dataclass(frozen=True)
class KnobSpec:
    name: str
    kind: type[float] | type[int]
    default: float
    help: str
    valid: Callable[[float], bool]
    requirement: str

    @property
    def flag(self) -> str:
        return "--sim-" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def parse(self, text: str) -> float:
        """Convert and check one value; raises ValueError with the requirement."""
        try:
            value = self.kind(text)
        except ValueError:
            raise ValueError(f"expected {self._expected()}") from None
        if not self.valid(value):
            raise ValueError(f"expected {self._expected()}")
        return value

    def _expected(self) -> str:
        noun = "an integer" if self.kind is int else "a number"
        return f"{noun} {self.requirement}".rstrip()


KNOB_SPECS: tuple[KnobSpec, ...] = (
    KnobSpec("decode_tok_s", float, 100.0, "output tokens/s of one stream during decode",
             lambda v: v > 0, "> 0"),
    KnobSpec("ttft", float, 0.05, "time to first token, seconds", lambda v: v >= 0, ">= 0"),
    KnobSpec("accept_length", float, 3.0,
             "mean tokens per verify step with a speculative algorithm (ignored without one)",
             lambda v: v >= 1, ">= 1"),
    KnobSpec("noise", float, 0.0, "relative per-request timing jitter (0.01 = 1%)",
             lambda v: 0 <= v < 1, "in [0, 1)"),
    KnobSpec("seed", int, 0, "seed of the jitter and of the simulated content", lambda v: True, ""),
    KnobSpec("boot_seconds", float, 0.5,
             "launch -> ready: weight loading, KV cache, CUDA graph capture, warmup",
             lambda v: v >= 0, ">= 0"),
    KnobSpec("slowdown", float, 0.0, "make every duration (1 + x) times longer (0.2 = 20% slower)",
             lambda v: v > -1, "> -1"),
)


@dataclass(frozen=True)
class Knobs:
    decode_tok_s: float = 100.0
    ttft: float = 0.05
    accept_length: float = 3.0
    noise: float = 0.0
    seed: int = 0
    boot_seconds: float = 0.5
    slowdown: float = 0.0

    @property
    def time_scale(self) -> float:
        """Factor applied to every simulated duration."""
        return 1.0 + self.slowdown


def dest(spec: KnobSpec) -> str:
    return "sim_" + spec.name


def add_knob_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulator knobs", f"each also settable as {ENV_PREFIX}<KNOB>")
    for spec in KNOB_SPECS:
        group.add_argument(spec.flag, dest=dest(spec), type=_argparse_type(spec), default=None,
                           metavar=spec.kind.__name__.upper(),
                           help=f"{spec.help} (default {spec.default}; env {spec.env})".replace("%", "%%"))


def _argparse_type(spec: KnobSpec) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            return spec.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {exc}") from None

    return convert


def resolve_knobs(namespace: argparse.Namespace, environ: Mapping[str, str]) -> Knobs:
    """Command line beats environment beats default; raises KnobError naming a bad variable."""
    values: dict[str, Any] = {}
    for spec in KNOB_SPECS:
        values[spec.name] = _resolve_one(spec, getattr(namespace, dest(spec), None), environ)
    return Knobs(**values)


def _resolve_one(spec: KnobSpec, cli_value: float | None, environ: Mapping[str, str]) -> float:
    if cli_value is not None:
        return cli_value
    text = environ.get(spec.env)
    if text is None or text.strip() == "":
        return spec.default
    try:
        return spec.parse(text.strip())
    except ValueError as exc:
        raise KnobError(
            f"invalid value {text!r} for environment variable {spec.env}: {exc} "
            f"(e.g. {spec.env}={spec.default}; unset it to use the default)") from None


def knob_dests() -> frozenset[str]:
    return frozenset(dest(spec) for spec in KNOB_SPECS)

