"""The simulator's own `--sim-*` knobs, each also settable as `SGLANG_SIM_<KNOB>`.

Precedence: command line > environment > default. A bad value names where it came from. Without
`--sim-decode-tok-s` / `--sim-ttft` the timing comes from the roofline model of `--sim-gpu` (engine/roofline.py).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu, load_gpu_table
from pytest_sglang_perf.simulator.args.faults import Faults, parse_faults

ENV_PREFIX = "SGLANG_SIM_"
KNOB_PREFIX = "--sim-"
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""What argparse takes as a value, not an option, after a flag (its `_negative_number_matcher`)."""


class KnobError(ValueError):
    """A knob value that cannot be used; the message names the flag or variable."""


def _number(kind: type[float] | type[int], valid: Callable[[float], bool], requirement: str) -> Callable[[str], Any]:
    noun = "an integer" if kind is int else "a number"
    expected = f"expected {noun} {requirement}".rstrip()

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(expected) from None
        if not valid(value):
            raise ValueError(expected)
        return value

    return convert


def _gpu_name(text: str) -> str:
    try:
        return find_gpu(text).name
    except GpuTableError as exc:
        raise ValueError(str(exc)) from None


def _sglang_version(text: str) -> str:
    """A release the plugin has a flag table of (sglang_facts/versions.py)."""
    from pytest_sglang_perf.sglang_facts.versions import covered

    versions = covered("flags")
    if text not in versions:
        raise ValueError(f"the simulator plays a release it has the flag table of: {', '.join(versions)}")
    return text


def _fault_spec(text: str) -> str:
    parse_faults(text)
    return text


@dataclass(frozen=True)
class KnobSpec:
    name: str
    convert: Callable[[str], Any]
    """Text -> value; raises ValueError saying what is expected."""
    default: Any
    help: str
    metavar: str = "NUMBER"

    @property
    def flag(self) -> str:
        return "--sim-" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def parse(self, text: str) -> Any:
        return self.convert(text)


_POSITIVE = _number(float, lambda v: v > 0, "> 0")
_NON_NEGATIVE = _number(float, lambda v: v >= 0, ">= 0")

KNOB_SPECS: tuple[KnobSpec, ...] = (
    KnobSpec("gpu", _gpu_name, find_gpu().name,
             "the GPU to simulate, from sglang_facts/data/gpus.json: " + ", ".join(load_gpu_table().names()),
             "NAME"),
    KnobSpec("decode_tok_s", _POSITIVE, None,
             "output tokens/s of one stream during decode; overrides the roofline model of --sim-gpu"),
    KnobSpec("ttft", _NON_NEGATIVE, None, "time to first token (the prefill), seconds; overrides the roofline model"),
    KnobSpec("accept_length", _number(float, lambda v: v >= 1, ">= 1"), 3.0,
             "mean tokens per verify step with a speculative algorithm (ignored without one)"),
    KnobSpec("noise", _number(float, lambda v: 0 <= v < 1, "in [0, 1)"), 0.0,
             "relative timing noise (0.01 = 1%): a per-boot offset and a per-request jitter, both seeded"),
    KnobSpec("boot_noise", _number(float, lambda v: 0 <= v < 1, "in [0, 1)"), None,
             "the per-boot offset's relative size, when it differs from the per-request jitter's (--sim-noise)"),
    KnobSpec("seed", _number(int, lambda v: True, ""), 0, "seed of the noise and of the simulated content", "INT"),
    KnobSpec("boot", str, "",
             "which boot this is, a label (the plugin sets SGLANG_SIM_BOOT to VARIANT#N, its Nth boot of the run): "
             "the noise's per-boot offset and per-request jitter are seeded from the seed and this label, so each "
             "boot draws its own, as real boots do, and a run replays the same boots", "LABEL"),
    KnobSpec("boot_seconds", _NON_NEGATIVE, 0.5,
             "launch -> ready in total: weight loading, KV cache, CUDA graph capture, warmup; phases set with "
             "--sim-load-seconds / --sim-capture-seconds take their share out of it"),
    KnobSpec("load_seconds", _NON_NEGATIVE, None, "weight loading (target and draft model), seconds"),
    KnobSpec("capture_seconds", _NON_NEGATIVE, None, "CUDA graph capture, all graphs together, seconds"),
    KnobSpec("slowdown", _number(float, lambda v: v > -1, "> -1"), 0.0,
             "make every duration (1 + x) times longer (0.2 = 20% slower)"),
    KnobSpec("fault", _fault_spec, "",
             "inject faults, e.g. 'die-after:3,http-500:0.2': crash-at-boot, hang-at-boot, fail-warmup, die-after:N, "
             "http-500:P, cut-stream:N, no-usage, short:N, slow-after:N:FACTOR, slow-boot:N:FACTOR, no-server-info",
             "SPEC"),
    KnobSpec("sglang_version", _sglang_version, "0.5.23",
             "the SGLang release to play: its command line (the release's flag table, from its wheel) and its version "
             "in /server_info; the rest (resolution, log, timing) is 0.5.23's", "VERSION"),
    KnobSpec("device_dir", str, "",
             "a folder the simulators of one host share: each locks the GPUs it runs on (CUDA_VISIBLE_DEVICES) there "
             "and fails at boot when another one holds one of them (process/devices.py)", "DIR"),
)


@dataclass(frozen=True)
class Knobs:
    gpu: str = field(default_factory=lambda: find_gpu().name)
    """The simulated GPU's nvidia-smi name (sglang_facts.gpus.find_gpu resolves it)."""
    decode_tok_s: float | None = None
    ttft: float | None = None
    accept_length: float = 3.0
    noise: float = 0.0
    boot_noise: float | None = None
    """The per-boot offset's size; None: `noise`."""
    seed: int = 0
    boot: str = ""
    """The boot's label (see KNOB_SPECS): with the seed, what seeds the noise."""
    boot_seconds: float = 0.5
    load_seconds: float | None = None
    capture_seconds: float | None = None
    slowdown: float = 0.0
    fault: str = ""
    device_dir: str = ""
    """Where simulators lock the GPUs they run on ("" : no locks)."""
    sglang_version: str = "0.5.23"
    """The release played: its flag table parses the command line; /server_info reports it."""

    @property
    def time_scale(self) -> float:
        """Factor applied to every simulated duration: the slowdown, and a slow boot's factor (fault slow-boot)."""
        return (1.0 + self.slowdown) * self.faults.boot_factor(self.boot)

    @property
    def offset_noise(self) -> float:
        """The relative size of a boot's offset (its timings' common factor)."""
        return self.noise if self.boot_noise is None else self.boot_noise

    @property
    def noise_seed(self) -> str:
        """What seeds this boot's noise (its offset, its requests' jitter): the seed, and the boot's label if any
        (none: every boot of a seed replays the same noise, as before boots had labels)."""
        return str(self.seed) if not self.boot else f"{self.seed}|boot={self.boot}"

    @property
    def faults(self) -> Faults:
        return parse_faults(self.fault)


def _dest(spec: KnobSpec) -> str:
    return "sim_" + spec.name


def add_knob_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulator knobs", f"each also settable as {ENV_PREFIX}<KNOB>")
    for spec in KNOB_SPECS:
        default = "the model" if spec.default is None else repr(spec.default) if spec.default == "" else spec.default
        group.add_argument(spec.flag, dest=_dest(spec), type=_argparse_type(spec), default=None,
                           metavar=spec.metavar,
                           help=f"{spec.help} (default {default}; env {spec.env})".replace("%", "%%"))


def _argparse_type(spec: KnobSpec) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return spec.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}: {exc}") from None

    return convert


def resolve_knobs(namespace: argparse.Namespace, environ: Mapping[str, str]) -> Knobs:
    """Command line beats environment beats default; raises KnobError naming a bad variable."""
    values: dict[str, Any] = {}
    for spec in KNOB_SPECS:
        values[spec.name] = _resolve_one(spec, getattr(namespace, _dest(spec), None), environ)
    return Knobs(**values)


def _resolve_one(spec: KnobSpec, cli_value: Any, environ: Mapping[str, str]) -> Any:
    if cli_value is not None:
        return cli_value
    text = environ.get(spec.env)
    if text is None or text.strip() == "":
        return spec.default
    try:
        return spec.parse(text.strip())
    except ValueError as exc:
        example = f" (e.g. {spec.env}={spec.default})" if spec.default not in (None, "") else ""
        raise KnobError(
            f"invalid value {text!r} for environment variable {spec.env}: {exc}{example}; unset it to use the "
            "default") from None


def played_version(args: Sequence[str], environ: Mapping[str, str]) -> str:
    """The SGLang release a command line plays (`--sim-sglang-version`, else its variable, else 0.5.23); a bad value
    falls back to the default here: knob_errors() and resolve_knobs() report it."""
    spec = next(spec for spec in KNOB_SPECS if spec.name == "sglang_version")
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument(spec.flag, dest="value", default=None)
    given = parser.parse_known_args(list(args))[0].value or environ.get(spec.env, "").strip()
    try:
        return str(spec.parse(given)) if given else str(spec.default)
    except ValueError:
        return str(spec.default)


def knob_errors(args: Sequence[str]) -> list[str]:
    """What is wrong with the `--sim-*` knobs of a command line, cause first, one message each: an unknown knob (with
    the closest known name), a knob without its value, a value the knob cannot use. Empty when they are all fine.

    Pure (the environment's SGLANG_SIM_* values are checked by resolve_knobs); the simulator prints these before
    parsing anything else, and a pre-flight check can call it on a planned command line. Other flags are SGLang's
    parser's business, and a knob is known only by its full name (no abbreviations, as split_knobs parses them)."""
    specs = {spec.flag: spec for spec in KNOB_SPECS}
    errors = []
    for i, arg in enumerate(args):
        if not arg.startswith(KNOB_PREFIX):
            continue
        flag, inline, value = arg.partition("=")
        spec = specs.get(flag)
        if spec is None:
            errors.append(_unknown_knob(flag, specs))
            continue
        given = value if inline else _next_value(args, i)
        problem = _value_problem(spec, given)
        if problem is not None:
            errors.append(problem)
    return errors


def _unknown_knob(flag: str, specs: Mapping[str, KnobSpec]) -> str:
    names = [known.removeprefix(KNOB_PREFIX) for known in specs]
    close = difflib.get_close_matches(flag.removeprefix(KNOB_PREFIX), names, n=1, cutoff=0.6)
    hint = f"did you mean {KNOB_PREFIX}{close[0]}?" if close else f"known knobs: {', '.join(specs)}"
    return f"unknown knob {flag} ({hint})"


def _next_value(args: Sequence[str], i: int) -> str | None:
    if i + 1 >= len(args):
        return None
    value = args[i + 1]
    return None if value.startswith("-") and not _NEGATIVE_NUMBER.match(value) else value


def _value_problem(spec: KnobSpec, value: str | None) -> str | None:
    if value is None:
        return f"{spec.flag} needs a value ({spec.metavar}): {spec.help}"
    try:
        spec.parse(value)
    except ValueError as exc:
        return f"invalid value {value!r} for {spec.flag}: {exc}"
    return None
