"""What a server really ran: every requested flag against SGLang's resolved configuration, with SGLang's reasons.

Inputs are plain data: the flags the variant asked for (parsed by SGLang's own parser, see
`sglang_facts.requested`), the
`/server_info` document (its resolved server args, the `cuda_graph_config` plan, the schedulers' `internal_states`)
and the startup facts of the server log (logscan.py). Where a flag's effect shows up in `/server_info`, which log
messages explain an override and which optimizations SGLang turns on by default are version-specific facts: they
live in the SGLang version's rules (`sglang_facts.rules`: `effective_fields`, `resolution_messages`,
`default_optimizations`, `unconfirmable`, `secret_fields`), not here. No I/O, no pytest.

Each requested flag is `confirmed`, `changed by SGLang` (a finding, with SGLang's message where it logged one) or
`cannot be confirmed` (a note: nothing SGLang reports shows its effect, or `/server_info` has no field for it). The
contract test tests/sglang_cpu/contract/test_flag_corpus.py holds this against SGLang's own resolution for every
flag of its table. What ran, in words: ran.py.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang_perf.server.info_paths import MISSING, lookup
from pytest_sglang_perf.server.ran import ran_lines
from pytest_sglang_perf.server.redaction import redact_text
from pytest_sglang_perf.server.startup import StartupFacts
from pytest_sglang_perf.sglang_facts.requested import Requested
from pytest_sglang_perf.sglang_facts.rules import SGLangRules

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""A terminal colour code, as SGLang wraps some warnings in."""


class Status(enum.Enum):
    OK = "ok"
    OVERRIDDEN = "overridden"
    UNCONFIRMED = "unconfirmed"
    """Taken as given, but nothing SGLang reports can confirm its effect."""
    NOT_REPORTED = "not reported"
    """`/server_info` has no field for it (e.g. `--config`)."""

    @property
    def category(self) -> str:
        """What the report calls it: `confirmed`, `changed by SGLang` (a finding, with SGLang's reason where it
        logged one) or `cannot be confirmed` (listed as a note, never a finding)."""
        if self is Status.OK:
            return "confirmed"
        return "changed by SGLang" if self is Status.OVERRIDDEN else "cannot be confirmed"


@dataclass(frozen=True)
class FlagOutcome:
    flag: str
    dest: str
    requested: Any
    effective: Any
    status: Status
    because: str | None = None
    """SGLang's own message explaining the difference (or, for an unconfirmed flag, why it cannot be checked)."""

    def describe(self) -> str:
        if self.status is Status.OVERRIDDEN:
            reason = f"because: {self.because}" if self.because else "SGLang printed no reason"
            return (f"requested {self.flag} {show(self.requested)}, server ran {show(self.effective)}, "
                    f"{reason}")
        if self.status is Status.UNCONFIRMED:
            return f"{self.flag}: cannot be confirmed: {self.because}"
        if self.status is Status.NOT_REPORTED:
            return f"{self.flag}: cannot be confirmed: /server_info does not report it"
        return f"{self.flag} {show(self.requested)}: {self.status.category}"

    def to_dict(self) -> dict[str, Any]:
        return {"flag": self.flag, "dest": self.dest, "requested": _jsonable(self.requested),
                "effective": _jsonable(self.effective), "status": self.status.value,
                "category": self.status.category, "because": self.because}


@dataclass(frozen=True)
class SwitchedOff:
    """An optimization SGLang runs by default that it turned off for this server without being asked."""

    name: str
    because: str | None

    def describe(self) -> str:
        reason = f"because: {self.because}" if self.because else "SGLang printed no reason"
        return f"SGLang switched off {self.name} (on by default) {reason}"


@dataclass(frozen=True)
class EffectiveConfig:
    """One variant's server: what was asked, what ran, and SGLang's reasons for any difference."""

    variant: str
    flags: tuple[FlagOutcome, ...]
    switched_off: tuple[SwitchedOff, ...]
    ran: tuple[tuple[str, str], ...]
    """(what, how it ran) lines for the report: CUDA graphs, speculative decoding, request cap, ..."""
    requested: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """Requested value by dest (for comparing variants)."""
    info: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """`/server_info` with secrets removed and capture-time fallbacks applied (for comparing variants)."""
    unavailable: str | None = None
    """Why the configuration could not be read (then nothing could be verified)."""
    duplicate: str | None = None
    """Set when another variant's server ran the same configuration (see same_as)."""
    facts_note: str | None = None
    """Set when another SGLang release's rules judged this server (its own release has none here: versions.py)."""

    @property
    def problems(self) -> tuple[str, ...]:
        """What strict mode fails on: overridden flags, optimizations switched off, an unreadable configuration."""
        overridden = [o.describe() for o in self.flags if o.status is Status.OVERRIDDEN]
        unverified = [f"the effective configuration could not be read: {self.unavailable}"] if self.unavailable else []
        return (*unverified, *overridden, *(s.describe() for s in self.switched_off))

    @property
    def warnings(self) -> tuple[str, ...]:
        """Everything the report warns about: the problems, then a variant that measures nothing new."""
        return (*self.problems, *([self.duplicate] if self.duplicate else []))

    @property
    def notes(self) -> tuple[str, ...]:
        """The flags that cannot be confirmed, each with why: listed, never a finding."""
        return tuple(o.describe() for o in self.flags if o.status in (Status.UNCONFIRMED, Status.NOT_REPORTED))

    @property
    def verdict(self) -> str:
        """`ok`, `differs` (a problem), or `duplicate` (ok, but the same configuration as another variant)."""
        if self.problems:
            return "differs"
        return "duplicate" if self.duplicate else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "warnings": list(self.warnings), "notes": list(self.notes),
            "flags": [o.to_dict() for o in self.flags], "ran": dict(self.ran), "unavailable": self.unavailable,
            "facts_note": self.facts_note,
        }


def unavailable(variant: str, why: str, facts: StartupFacts) -> EffectiveConfig:
    """The report of a server whose configuration could not be read (e.g. no `/server_info`)."""
    return EffectiveConfig(variant=variant, flags=(), switched_off=(), ran=ran_lines({}, facts), unavailable=why)


def show(value: Any) -> str:
    """A value as a user would type or read it: `breakable`, `48`, `[1, 2, 4]`, `true`."""
    if value is True or value is False or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), sort_keys=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


# Reading /server_info -------------------------------------------------------------------------------


def redact_info(info: Mapping[str, Any], rules: SGLangRules, secrets: Sequence[str]) -> dict[str, Any]:
    """`/server_info` without secrets: secret fields dropped (also in `internal_states`), secret values masked."""
    hidden = set(rules.secret_fields)

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items() if k not in hidden}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            return redact_text(value, secrets)
        return value

    cleaned: dict[str, Any] = clean(info)
    return cleaned


def effective_value(dest: str, info: Mapping[str, Any], rules: SGLangRules) -> Any:
    """What the server ran for a flag's dest (see `effective_fields`), or MISSING when it is not reported."""
    spec = rules.effective_fields.get(dest)
    if spec is None:
        return info.get(dest, MISSING)
    values = [lookup(info, path) for path in spec.paths]
    if any(v is MISSING for v in values):
        return MISSING
    if all(_same(v, values[0]) for v in values):
        return values[0]
    return {".".join(str(s) for s in path[-2:]): v for path, v in zip(spec.paths, values, strict=True)}


def expected_value(dest: str, value: Any, info: Mapping[str, Any], rules: SGLangRules) -> Any:
    """The value the server should report for a requested flag, in `/server_info`'s terms."""
    spec = rules.effective_fields.get(dest)
    if spec is None:
        return value
    if spec.requested is not None:
        return spec.requested
    if spec.upper and isinstance(value, str):
        value = value.upper()
        value = spec.aliases.get(value, value)
    divisor = spec.divide_requested_by
    if divisor and isinstance(value, int) and (spec.divide_when is None or info.get(spec.divide_when)):
        value = max(1, value // max(1, int(info.get(divisor) or 1)))
    return value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


# Messages and capture-time fallbacks ----------------------------------------------------------------


def topic_messages(messages: Sequence[str], rules: SGLangRules) -> dict[str, list[str]]:
    """SGLang's resolution messages by the topic (flag group) they explain, in log order."""
    found: dict[str, list[str]] = {}
    for message in (_ANSI.sub("", line) for line in messages):  # SGLang colours its deprecation warnings
        for rule in rules.resolution_messages:
            if rule.pattern.search(message):
                for topic in rule.topics:
                    if message not in found.setdefault(topic, []):
                        found[topic].append(message)
    return found


def _apply_capture_skips(info: dict[str, Any], facts: StartupFacts, rules: SGLangRules) -> None:
    """A graph the plan kept but the capture skipped (`Disable prefill CUDA graph because ...`) did not run."""
    if not facts.capture_fallbacks:
        return
    for optimization in rules.default_optimizations:
        if optimization.skipped_at_capture:
            for path in optimization.paths:
                _set_path(info, path, optimization.off[0])


def _set_path(info: dict[str, Any], path: Sequence[str | int], value: Any) -> None:
    node: Any = info
    for step in path[:-1]:
        node = node[int(step)] if isinstance(node, list) else node.setdefault(step, {})
    if isinstance(node, dict):
        node[path[-1]] = value


# The verdict --------------------------------------------------------------------------------------------


def evaluate(variant: str, requested: Sequence[Requested], info: Mapping[str, Any], facts: StartupFacts,
             messages: Sequence[str], rules: SGLangRules, *, log_seen: bool = True) -> EffectiveConfig:
    """Compare each requested flag with what the server ran; find default optimizations switched off.

    `info` must already be redacted (redact_info); `messages` are the log's lines without prefixes. `log_seen`:
    False for a server whose log this run cannot read (a remote one), whose graph captures are then unknown.
    """
    view = json.loads(json.dumps(info))  # a private copy to apply capture-time fallbacks to
    _apply_capture_skips(view, facts, rules)
    by_topic = topic_messages(messages, rules)
    secret = set(rules.secret_fields)
    latest = {r.dest: r for r in requested if r.dest not in secret}
    outcomes = tuple(_outcome(r, view, by_topic, rules) for r in latest.values())
    return EffectiveConfig(
        variant=variant, flags=outcomes, switched_off=_switched_off(latest, view, by_topic, rules),
        ran=ran_lines(view, facts, log_seen=log_seen), requested={d: r.value for d, r in latest.items()}, info=view,
    )


def _outcome(requested: Requested, info: Mapping[str, Any], by_topic: Mapping[str, list[str]],
             rules: SGLangRules) -> FlagOutcome:
    dest, value = requested.dest, requested.value
    unconfirmable = rules.unconfirmable.get(dest)
    effective = effective_value(dest, info, rules)
    if effective is MISSING:
        return FlagOutcome(requested.flag, dest, value, None, Status.NOT_REPORTED)
    if unconfirmable:
        return FlagOutcome(requested.flag, dest, value, effective, Status.UNCONFIRMED, unconfirmable)
    if _matches(dest, value, effective, info, rules):
        return FlagOutcome(requested.flag, dest, value, effective, Status.OK)
    because = " / ".join(by_topic.get(rules.topic_of(dest), ())) or None
    return FlagOutcome(requested.flag, dest, value, effective, Status.OVERRIDDEN, because)


def _matches(dest: str, value: Any, effective: Any, info: Mapping[str, Any], rules: SGLangRules) -> bool:
    spec = rules.effective_fields.get(dest)
    if spec is not None and spec.nested:
        nested = json.loads(value) if isinstance(value, str) else value
        return all(_same(v, lookup(effective, [phase, key]))
                   for phase, settings in (nested or {}).items() for key, v in settings.items())
    return _same(expected_value(dest, value, info, rules), effective)


def _switched_off(requested: Mapping[str, Requested], info: Mapping[str, Any],
                  by_topic: Mapping[str, list[str]], rules: SGLangRules) -> tuple[SwitchedOff, ...]:
    out = []
    for optimization in rules.default_optimizations:
        if optimization.device not in (None, info.get("device")):
            continue
        if any(dest in requested for dest in optimization.unless_requested):
            continue
        values = [lookup(info, path) for path in optimization.paths]
        if any(v is not MISSING and any(_same(v, off) for off in optimization.off) for v in values):
            because = " / ".join(by_topic.get(optimization.topic, ())) or None
            out.append(SwitchedOff(optimization.name, because))
    return tuple(out)


# Variants that measure the same thing -------------------------------------------------------------------


def same_as(later: EffectiveConfig, earlier: EffectiveConfig, rules: SGLangRules) -> str | None:
    """Why `later` measures nothing new compared with `earlier`, or None when its server ran differently.

    The variants differ in some flags; when each of those flags ran the same way on both servers, the later
    variant measured the same configuration again.
    """
    dests = {d for d in later.requested.keys() | earlier.requested.keys()
             if d not in earlier.requested or d not in later.requested
             or not _same(_jsonable(earlier.requested[d]), _jsonable(later.requested[d]))}
    dests -= set(rules.secret_fields)
    if not dests or later.unavailable or earlier.unavailable:
        return None
    for dest in dests:
        a, b = effective_value(dest, earlier.info, rules), effective_value(dest, later.info, rules)
        if a is MISSING or b is MISSING or not _same(a, b):
            return None
    flags = ", ".join(sorted(_flag_name(dest, later, earlier) for dest in dests))
    return (f"measures nothing new: its only difference from variant {earlier.variant!r} ({flags}) did not change "
            "what the server ran")


def _flag_name(dest: str, *configs: EffectiveConfig) -> str:
    for config in configs:
        for outcome in config.flags:
            if outcome.dest == dest:
                return outcome.flag
    return "--" + dest.replace("_", "-")
