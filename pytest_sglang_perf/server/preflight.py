"""Pre-flight check of a flag matrix, before any server starts (and before a GPU is spent).

Every variant's command line is parsed with the installed SGLang's own argument parser when SGLang is
importable, else with the flag table of the SGLang version the simulator models (`sglang_facts.parsers`).
Findings: unknown and ambiguous flags (with the closest real names and known renames), flags given twice with
different values, the known incompatible combinations of the SGLang version's rules (`sglang_facts.rules`), a server
that needs more GPUs (tp x pp x dp, `sglang_facts.resolved.gpus_used`) than the host has, and, for the simulator, bad
`--sim-*` knobs (server/sim_knobs.py). Plain Python, no pytest.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.server.model_dir import local_model_dir
from pytest_sglang_perf.server.plan import ServerPlan, flag_value
from pytest_sglang_perf.server.sim_knobs import KNOB_PREFIX, SIMULATE_ARGS, plan_knobs
from pytest_sglang_perf.server.target_gpus import NO_GPUS, TargetGpus
from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu
from pytest_sglang_perf.sglang_facts.known_models import shipped_config
from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.requested import ParseError, given_flags, parse_command_line, raising_parser
from pytest_sglang_perf.sglang_facts.resolved import gpus_used
from pytest_sglang_perf.sglang_facts.rules import AllOrNone, FatalOnGpu, Requires, SGLangRules, load_rules

_UNRECOGNIZED = re.compile(r"unrecognized arguments: (?P<args>.*)")
_AMBIGUOUS = re.compile(r"ambiguous option: (?P<flag>\S+?)(?:=\S*)? could match (?P<matches>.*)")


class Level(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    variant: str
    level: Level
    message: str

    def __str__(self) -> str:
        return f"[{self.variant}] {self.level.value}: {self.message}"


def check_plans(plans: Sequence[ServerPlan], parser: ArgParser, *, gpus: TargetGpus = NO_GPUS,
                root: Path | None = None) -> list[Finding]:
    """Every plan's findings, in order; a simulated plan's `--sim-*` knobs first, then its SGLang flags. `root`:
    where a relative `--model-path` folder is (default: the working directory)."""
    knobs = plan_knobs(plans)
    findings: list[Finding] = []
    for plan in plans:
        name, checked = plan.variant.name, knobs.get(plan.variant.name)
        config = plan_model_config(plan, root or Path.cwd())
        if checked is None:
            findings += check_variant(name, plan.args, parser, gpus=gpus, model_config=config)
            continue
        findings += [Finding(name, Level.ERROR, error) for error in checked.errors]
        findings += check_variant(name, checked.sglang_args, parser, gpus=gpus, model_config=config)
    return findings


def plan_model_config(plan: ServerPlan, root: Path) -> Mapping[str, Any] | None:
    """The model's config.json, parsed: the simulator's (a local folder, or a shipped config of a known model id),
    else the `--model-path` folder's (relative to `root`), else the shipped config of that id; None when none is
    found or it cannot be read (a hub id the plugin does not ship: the rules that depend on the model cannot be
    applied before the boot)."""
    model_path = flag_value(plan.command, "--model-path")
    found = plan.model_config
    if found is None and model_path is not None:
        local = local_model_dir(model_path, root)
        found = local / "config.json" if local is not None else shipped_config(model_path)
    if found is None:
        return None
    try:
        data = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_variant(name: str, args: Sequence[str], parser: ArgParser, *, gpu_names: Sequence[str] = (),
                  gpus: TargetGpus | None = None, model_config: Mapping[str, Any] | None = None) -> list[Finding]:
    """One variant's SGLang flags against the target GPUs (`gpu_names`: GPU models only, their count unknown) and the
    model (`model_config`: its config.json; None when not known)."""
    target = gpus if gpus is not None else TargetGpus(tuple(gpu_names))
    rules = load_rules(parser.version)
    argparser = raising_parser(parser)
    try:
        namespace = parse_command_line(args, argparser)
    except ParseError as exc:
        return [Finding(name, Level.ERROR, _explain(str(exc), parser))]
    findings = [Finding(name, Level.WARNING, m) for m in _repeated(args, argparser)]
    findings += [Finding(name, Level.WARNING, m) for m in _deprecated(args, argparser, parser.version)]
    findings += [Finding(name, level, m) for level, m in _combinations(args, rules, argparser, target.names,
                                                                       model_config)]
    too_many = _gpu_count(args, namespace, parser, target)
    return findings + ([Finding(name, Level.ERROR, too_many)] if too_many else [])


def _explain(message: str, source: ArgParser) -> str:
    hints = suggest_for_message(message, source)
    return f"{message} (checked with {source.source})" + "".join(f"; {hint}" for hint in hints)


def suggest_for_message(text: str, source: ArgParser) -> list[str]:
    """Suggestions for the unknown/ambiguous flags an argparse error in `text` names (e.g. a server log)."""
    parser, rules = source.make(), load_rules(source.version)
    unknown = _UNRECOGNIZED.search(text)
    if unknown:
        hints = [_suggest(flag, parser, rules, source.version) for flag in unknown["args"].split()
                 if flag.startswith("-")]
        return [hint for hint in hints if hint]
    ambiguous = _AMBIGUOUS.search(text)
    if ambiguous:
        renamed = rules.renamed_flags.get(ambiguous["flag"])
        return [f"use {renamed}" if renamed else f"spell {ambiguous['flag']} out in full"]
    return []


def _suggest(flag: str, parser: argparse.ArgumentParser, rules: SGLangRules, version: str) -> str | None:
    name = flag.split("=", 1)[0]
    renamed = rules.renamed_flags.get(name) if rules.sglang_version in (None, version) else None
    past = _history(name, parser, version)
    if renamed:
        return f"{name} was renamed: use {renamed}" + (f" ({past})" if past else "")
    if past:
        return past
    if name.startswith(KNOB_PREFIX):
        return (f"{name} is a knob of the plugin's simulator, not an SGLang flag: put it in {SIMULATE_ARGS} "
                "(used only with --sglang-simulate)")
    close = difflib.get_close_matches(name, _option_strings(parser), n=2, cutoff=0.75)
    return f"{name}: did you mean {' or '.join(close)}?" if close else None


def _history(name: str, parser: argparse.ArgumentParser, version: str) -> str | None:
    """What the covered SGLang releases say became of a flag this version does not know (flag_history.py)."""
    from pytest_sglang_perf.sglang_facts.flag_history import load_history

    history = load_history()
    if history is None:
        return None
    known = {option: action.choices for action in parser._actions for option in action.option_strings}
    try:
        return history.hint(name, version, {k: None if v is None else list(v) for k, v in known.items()})
    except ValueError:  # a version number the history cannot place (a development build)
        return None


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def _repeated(args: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    seen: dict[str, tuple[str, str]] = {}
    messages = []
    for given in given_flags(args, parser):
        dest, value = given.action.dest, _value_text(given.flag, given.action, given.values)
        if dest in seen and seen[dest][1] != value:
            first_flag, first_value = seen[dest]
            messages.append(f"{first_flag} is given twice with different values ({first_value}, then {value}); "
                            "SGLang uses the last one: drop one of them")
        seen[dest] = (given.flag, value)
    return messages


def _value_text(flag: str, action: argparse.Action, values: Sequence[str]) -> str:
    """What a flag sets, as the finding quotes it: its values, or the value a deprecated option stores under
    another flag's field (`'tc_piecewise' (by --enforce-piecewise-cuda-graph)`)."""
    const_value = getattr(action, "const_value", None)
    if not values and const_value is not None:
        return f"{str(getattr(const_value, 'value', const_value))!r} (by {flag})"
    return repr(" ".join(values))


def _deprecated(args: Sequence[str], parser: argparse.ArgumentParser, version: str) -> list[str]:
    """Each deprecated option given, with the replacement SGLang names for it (its `new_flag`)."""
    out = []
    for given in given_flags(args, parser):
        if "Deprecated" in type(given.action).__name__:
            new_flag = getattr(given.action, "new_flag", None)
            instead = f": SGLang names {new_flag} instead" if new_flag else ""
            out.append(f"{given.flag} is deprecated in SGLang {version}{instead}")
    return out


def _combinations(args: Sequence[str], rules: SGLangRules, parser: argparse.ArgumentParser,
                  gpu_names: Sequence[str], model_config: Mapping[str, Any] | None) -> list[tuple[Level, str]]:
    given = {g.action.option_strings[0]: g.values for g in given_flags(args, parser)}
    messages = [m for rule in rules.all_or_none if (m := _all_or_none(rule, given))]
    messages += [m for rule in rules.requires if (m := _requires(rule, given))]
    found = [(Level.ERROR, m) for m in messages]
    sms = {_gpu_sm(name, rules) for name in gpu_names}
    found += [finding for rule in rules.fatal_on_gpu for sm in sorted(s for s in sms if s is not None)
              if rule.flag in given and sm in rule.sm and (finding := _fatal(rule, sm, model_config))]
    return found


def _fatal(rule: FatalOnGpu, sm: int, model_config: Mapping[str, Any] | None) -> tuple[Level, str] | None:
    """A flag that kills SGLang on this GPU: an error; for a rule that depends on the model, only when the model's
    config matches it as SGLang reads it, and a warning when that config is not known."""
    if rule.model is None:
        return Level.ERROR, f"{rule.flag} fails at startup on this GPU (SM{sm}): {rule.message}"
    if model_config is None:
        return Level.WARNING, (f"{rule.flag} fails at startup on this GPU (SM{sm}) if {rule.model.says}; this "
                               "model's config.json was not found (a local --model-path folder, or a model the "
                               f"plugin ships), so it cannot be told before the boot: {rule.message}")
    if not rule.model.matches(model_config):
        return None
    return Level.ERROR, (f"{rule.flag} fails at startup on this GPU (SM{sm}) with this model ({rule.model.says}): "
                         f"{rule.message}")


def _all_or_none(rule: AllOrNone, given: Mapping[str, tuple[str, ...]]) -> str | None:
    trigger = given.get(rule.when)
    if trigger is None or any(v.upper() in rule.except_values for v in trigger):
        return None
    present = [f for f in rule.flags if f in given]
    if not present or len(present) == len(rule.flags):
        return None
    missing = [f for f in rule.flags if f not in given]
    return f"{rule.message}; missing: {', '.join(missing)}"


def _requires(rule: Requires, given: Mapping[str, tuple[str, ...]]) -> str | None:
    if rule.flag not in given or any(f in given for f in rule.needs_any):
        return None
    return rule.message


def _gpu_sm(name: str, rules: SGLangRules) -> int | None:
    """The GPU's SM version: from the GPU table (sglang_facts/data/gpus.json), else the rules' name patterns."""
    try:
        return find_gpu(name).sm
    except GpuTableError:
        pass
    for key, sm in sorted(rules.gpu_sm.items(), key=lambda kv: -len(kv[0])):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![0-9])", name, flags=re.I):
            return sm
    return None


_MULTI_NODE_DEST = "nnodes"
"""SGLang's `--nnodes`: a server spread over several hosts uses only its share of GPUs on each."""


def local_gpu_count(args: Sequence[str], parser: ArgParser, namespace: argparse.Namespace | None = None) -> int | None:
    """How many GPUs of this host one server with these args uses (tp x pp x dp); None when that is not known here:
    a multi-node server, or a command line with a deprecated flag (the rules' `renamed_flags`), which SGLang
    translates before it counts GPUs (`--dp-size 2 --enable-dp-attention` becomes `--attn-dp-size 2`, which adds no
    GPU). The pre-flight check and the GPU claims (server/gpu_claims.py) count alike."""
    if namespace is None:
        try:
            namespace = parse_command_line(args, raising_parser(parser))
        except ParseError:
            return None
    if getattr(namespace, _MULTI_NODE_DEST, 1) != 1:
        return None
    rules = load_rules(parser.version)
    written = given_flags(args, raising_parser(parser))
    if any(option in rules.renamed_flags for g in written for option in g.action.option_strings):
        return None
    return gpus_used(args, parser)


def _gpu_count(args: Sequence[str], namespace: argparse.Namespace, parser: ArgParser, gpus: TargetGpus) -> str | None:
    """A server that needs more GPUs than the host shows fails to boot: say so, naming the flags and the count.

    Not judged: a multi-node server, and a command line with a deprecated flag (the rules' `renamed_flags`), which
    SGLang translates before it counts GPUs (`--dp-size 2 --enable-dp-attention` becomes `--attn-dp-size 2`, which
    adds no GPU): better no finding than a wrong error."""
    needed = local_gpu_count(args, parser, namespace)
    if gpus.count is None or needed is None or needed <= gpus.count:
        return None
    rules = load_rules(parser.version)
    written = given_flags(args, raising_parser(parser))
    counting = set(rules.gpu_count_fields)
    given = {g.action.dest: g for g in written if g.action.dest in counting}
    flags = [g.flag for g in given.values()]
    product = " x ".join(f"{g.flag} {' '.join(g.values)}" for g in given.values())
    models = ", ".join(dict.fromkeys(gpus.names))
    return (f"{product} needs {needed} GPUs for one server, but {gpus.origin} shows {_gpus(gpus.count)} on this "
            f"host ({models}); lower {' or '.join(flags)}, or run this variant on a host with {needed} GPUs")


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
