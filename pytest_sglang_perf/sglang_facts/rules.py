"""SGLang's rules as typed data: what one SGLang version does with flag combinations and how it reports them.

The facts live in `sglang_facts/data/sglang-<version>-rules.json` (one file per SGLang version); this module
reads that file into frozen dataclasses, strictly: a missing or unknown key, or a value of the wrong type, is a
`RulesError` naming the file and the key (`_comment` keys are documentation and skipped). The pre-flight check,
the boot hints and the effective-configuration report read the rules only through these types.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.sglang_facts.json_reader import JsonObject, JsonScalar, JsonValueError

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_VERSION = "0.5.23"

JsonPath = tuple[str | int, ...]
"""A path into `/server_info`: keys, and ints that index lists."""


def _no_entries() -> Mapping[str, Any]:
    return MappingProxyType({})


class RulesError(SGLangPerfError, ValueError):
    """The rules file is missing or malformed; the message names the file and the key."""


@dataclass(frozen=True)
class AllOrNone:
    """Flags SGLang needs all of or none of, once `when` is given (unless its value is one of `except_values`)."""

    flags: tuple[str, ...]
    when: str
    message: str
    except_values: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelCondition:
    """The models a rule applies to, decided as SGLang decides it: on the Hugging Face text config
    (`hf_text_config`: a multimodal config's `text_config`, else the config itself), which has one of
    `text_config_has_any` (SGLang's `hasattr`: a key present, even null) or is of a model type whose config class
    defines one by default."""

    text_config_has_any: tuple[str, ...]
    model_types: tuple[str, ...]
    says: str
    """What a matching model has, for the finding's text."""

    def matches(self, config: Mapping[str, Any]) -> bool:
        """Whether a model with this config.json (parsed) is one the rule applies to."""
        text = config.get("text_config")
        return self.matches_text(text if isinstance(text, dict) else config)

    def matches_text(self, text: Mapping[str, Any]) -> bool:
        model_type = text.get("model_type")
        return self.matches_fields(text.keys(), model_type if isinstance(model_type, str) else None)

    def matches_fields(self, keys: Collection[str], model_type: str | None) -> bool:
        """The same, from the text config's keys and model type (what the simulator keeps of a config)."""
        return any(key in keys for key in self.text_config_has_any) or model_type in self.model_types


@dataclass(frozen=True)
class FatalOnGpu:
    """A flag SGLang dies on at startup on GPUs of these SM versions (for the models `model` says; every model when
    None)."""

    flag: str
    sm: tuple[int, ...]
    message: str
    model: ModelCondition | None = None


@dataclass(frozen=True)
class Requires:
    """A flag SGLang rejects unless one of `needs_any` is given too."""

    flag: str
    needs_any: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class BootHint:
    """A failed boot's known message and the hint for it (`{name}` fills from the pattern's named groups)."""

    pattern: re.Pattern[str]
    hint: str


@dataclass(frozen=True)
class EffectiveField:
    """Where `/server_info` shows what a flag (by its dest) really did, and how its requested value reads there."""

    paths: tuple[JsonPath, ...]
    requested: JsonScalar = None
    """The value a flag without an argument stands for (None: the flag's own value)."""
    upper: bool = False
    """Compare the requested string upper-cased (then resolved through `aliases`)."""
    aliases: Mapping[str, str] = field(default_factory=_no_entries)
    divide_requested_by: str | None = None
    """A `/server_info` field the requested number is divided by (e.g. per DP rank)."""
    divide_when: str | None = None
    """Divide only when this `/server_info` field is true (SGLang before 0.5.22 divides by `dp_size` only with
    `--enable-dp-attention`); None: always."""
    nested: bool = False
    """The requested value is a JSON document of phase -> setting -> value, compared setting by setting."""
    topic: str | None = None
    """The group of flags whose resolution messages explain this one (None: the dest itself)."""


@dataclass(frozen=True)
class ResolutionMessage:
    """A log message in which SGLang explains an override, and the topics (flag groups) it explains."""

    pattern: re.Pattern[str]
    topics: tuple[str, ...]


@dataclass(frozen=True)
class DefaultOptimization:
    """An optimization SGLang runs by default: where it shows, which values mean off, which flags turn it off."""

    name: str
    topic: str
    paths: tuple[JsonPath, ...]
    off: tuple[JsonScalar, ...]
    unless_requested: tuple[str, ...]
    """Dests whose request makes "off" expected (the user asked for it)."""
    device: str | None = None
    """Only on this device (None: on every device)."""
    skipped_at_capture: bool = False
    """A capture-time fallback in the log turns it off even when the plan kept it."""


@dataclass(frozen=True)
class SGLangRules:
    """Everything one rules file says."""

    file: Path
    sglang_version: str | None = None
    holds_for: tuple[str, ...] = ()
    """The releases whose source was read and found to need these rules (sglang_facts/versions.py::read_for)."""
    renamed_flags: Mapping[str, str] = field(default_factory=_no_entries)
    all_or_none: tuple[AllOrNone, ...] = ()
    fatal_on_gpu: tuple[FatalOnGpu, ...] = ()
    requires: tuple[Requires, ...] = ()
    gpu_sm: Mapping[str, int] = field(default_factory=_no_entries)
    boot_hints: tuple[BootHint, ...] = ()
    effective_fields: Mapping[str, EffectiveField] = field(default_factory=_no_entries)
    secret_fields: tuple[str, ...] = ()
    gpu_count_fields: tuple[str, ...] = ()
    """The parallelism dests whose product is the number of GPUs one server uses (tp x pp x dp)."""
    gpu_count_uncounted: Mapping[str, str] = field(default_factory=_no_entries)
    """A counting dest that adds no GPU while another dest is true (before 0.5.22, `dp_size` under
    `enable_dp_attention`: attention DP splits the tensor-parallel group)."""
    unconfirmable: Mapping[str, str] = field(default_factory=_no_entries)
    """Dests whose effect nothing SGLang reports can confirm, with why."""
    resolution_messages: tuple[ResolutionMessage, ...] = ()
    default_optimizations: tuple[DefaultOptimization, ...] = ()

    def gpu_count(self, values: Mapping[str, Any]) -> int:
        """How many GPUs one server with these resolved values (dest -> value) uses: the product of the counting
        fields, each unless its `gpu_count_uncounted` condition is true."""
        counted = [values.get(dest) for dest in self.gpu_count_fields
                   if not (dest in self.gpu_count_uncounted and values.get(self.gpu_count_uncounted[dest]))]
        return math.prod(v for v in counted if isinstance(v, int) and not isinstance(v, bool) and v > 0)

    def topic_of(self, dest: str) -> str:
        """The topic whose resolution messages explain a flag (its dest, unless `effective_fields` groups it)."""
        spec = self.effective_fields.get(dest)
        return spec.topic if spec is not None and spec.topic is not None else dest


@cache
def load_rules(version: str) -> SGLangRules:
    """The rules of an SGLang version: its own file, else the covered version's that serves it (the nearest older,
    or the oldest: sglang_facts/versions.py; `rules_note` says which)."""
    from pytest_sglang_perf.sglang_facts.versions import facts_version

    return read_rules(DATA / f"sglang-{facts_version(version, 'rules').used}-rules.json")


def rules_note(version: str) -> str | None:
    """The line that says another version's rules judge SGLang `version`, or None when it has its own."""
    from pytest_sglang_perf.sglang_facts.versions import facts_version

    return facts_version(version, "rules").note


def read_rules(path: Path) -> SGLangRules:
    """One rules file, checked key by key (RulesError names the file and the first bad key)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RulesError(f"cannot read the SGLang rules file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RulesError(f"the SGLang rules file {path} is not JSON: {exc}") from None
    try:
        return _rules(JsonObject(data, ""), path)
    except JsonValueError as exc:
        raise RulesError(f"malformed SGLang rules file {path}: {exc}") from None


def _rules(top: JsonObject, path: Path) -> SGLangRules:
    with top:
        return SGLangRules(
            file=path, sglang_version=top.optional_text("sglang_version"), holds_for=top.texts("holds_for", default=()),
            renamed_flags=top.text_map("renamed_flags"),
            all_or_none=tuple(_all_or_none(rule) for rule in top.children("all_or_none")),
            fatal_on_gpu=tuple(_fatal_on_gpu(rule) for rule in top.children("fatal_on_gpu")),
            requires=tuple(_requires(rule) for rule in top.children("requires")),
            gpu_sm=top.int_map("gpu_sm"),
            boot_hints=tuple(_boot_hint(rule) for rule in top.children("boot_hints")),
            effective_fields=_effective_fields(top.child("effective_fields")),
            secret_fields=top.texts("secret_fields", default=()),
            gpu_count_fields=top.texts("gpu_count_fields", default=()),
            gpu_count_uncounted=top.text_map("gpu_count_uncounted"),
            unconfirmable=top.text_map("unconfirmable"),
            resolution_messages=tuple(_resolution(rule) for rule in top.children("resolution_messages")),
            default_optimizations=tuple(_optimization(rule) for rule in top.children("default_optimizations")),
        )


def _all_or_none(rule: JsonObject) -> AllOrNone:
    with rule:
        return AllOrNone(flags=rule.texts("flags"), when=rule.text("when"), message=rule.text("message"),
                         except_values=rule.texts("except_values", default=()))


def _fatal_on_gpu(rule: JsonObject) -> FatalOnGpu:
    with rule:
        model = rule.child("model")
        with model:
            condition = None if not model.key_names() else ModelCondition(
                text_config_has_any=model.texts("text_config_has_any"), model_types=model.texts("model_types"),
                says=model.text("says"))
        return FatalOnGpu(flag=rule.text("flag"), sm=rule.ints("sm"), message=rule.text("message"), model=condition)


def _requires(rule: JsonObject) -> Requires:
    with rule:
        return Requires(flag=rule.text("flag"), needs_any=rule.texts("needs_any"), message=rule.text("message"))


def _boot_hint(rule: JsonObject) -> BootHint:
    with rule:
        return BootHint(pattern=rule.pattern("pattern"), hint=rule.text("hint"))


def _effective_fields(fields: JsonObject) -> Mapping[str, EffectiveField]:
    with fields:
        return MappingProxyType({dest: _effective_field(fields.child(dest)) for dest in fields.key_names()})


def _effective_field(spec: JsonObject) -> EffectiveField:
    with spec:
        return EffectiveField(
            paths=spec.paths("paths"), requested=spec.optional_scalar("requested"),
            upper=spec.flag("upper"), aliases=spec.text_map("aliases"),
            divide_requested_by=spec.optional_text("divide_requested_by"),
            divide_when=spec.optional_text("divide_when"), nested=spec.flag("nested"),
            topic=spec.optional_text("topic"),
        )


def _resolution(rule: JsonObject) -> ResolutionMessage:
    with rule:
        return ResolutionMessage(pattern=rule.pattern("pattern"), topics=rule.texts("topics"))


def _optimization(rule: JsonObject) -> DefaultOptimization:
    with rule:
        return DefaultOptimization(
            name=rule.text("name"), topic=rule.text("topic"), paths=rule.paths("paths"), off=rule.scalars("off"),
            unless_requested=rule.texts("unless_requested"), device=rule.optional_text("device"),
            skipped_at_capture=rule.flag("skipped_at_capture"),
        )
