"""Pre-flight check of a flag matrix, before any server starts (and before a GPU is spent).

Every variant's command line is parsed with the installed SGLang's own argument parser when SGLang is
importable, else with the flag table of the SGLang version the simulator models. Findings: unknown and
ambiguous flags (with the closest real names and known renames), flags given twice with different values,
and the known incompatible combinations of `data/sglang-<version>-rules.json`. Plain Python, no pytest.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pytest_sglang_perf.server.effective import Requested
from pytest_sglang_perf.server.plan import ServerPlan

DATA = Path(__file__).resolve().parent.parent / "sglang_facts" / "data"
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


class _ParseError(Exception):
    pass


@dataclass(frozen=True)
class ArgParser:
    """A source of SGLang's parser: `source` says which (installed SGLang, or the simulator's flag table)."""

    source: str
    version: str
    make: Callable[[], argparse.ArgumentParser]


def installed_sglang_parser() -> ArgParser | None:
    """The installed SGLang's own parser, or None when SGLang is not importable."""
    try:
        from sglang.srt.server_args import ServerArgs  # heavy: only here, only for a pre-flight
        from sglang.version import __version__
    except Exception:
        return None

    def make() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        return parser

    return ArgParser(f"the installed SGLang {__version__}", str(__version__), make)


def flag_table_parser() -> ArgParser:
    """The parser of the SGLang version the simulator models, from the shipped flag table."""
    from pytest_sglang_perf.sglang_facts.flags import build_sglang_parser, load_flag_table

    table = load_flag_table()
    return ArgParser(f"the flag table of SGLang {table.sglang_version}", table.sglang_version,
                     lambda: build_sglang_parser(table))


def choose_parser(*, simulate: bool) -> ArgParser:
    """The simulator's flags when simulating; else the installed SGLang's, falling back to the table."""
    if not simulate:
        installed = installed_sglang_parser()
        if installed is not None:
            return installed
    return flag_table_parser()


@cache
def load_rules(version: str) -> Mapping[str, Any]:
    path = DATA / f"sglang-{version}-rules.json"
    if not path.is_file():
        path = DATA / "sglang-0.5.23-rules.json"
    rules: Mapping[str, Any] = json.loads(path.read_text())
    return rules


def check_plans(plans: Sequence[ServerPlan], parser: ArgParser, *, gpu_names: Sequence[str] = ()) -> list[Finding]:
    findings: list[Finding] = []
    for plan in plans:
        findings += check_variant(plan.variant.name, plan.args, parser, gpu_names=gpu_names)
    return findings


def check_variant(name: str, args: Sequence[str], parser: ArgParser, *,
                  gpu_names: Sequence[str] = ()) -> list[Finding]:
    rules = load_rules(parser.version)
    argparser = _raising(parser.make())
    try:
        argparser.parse_args(["--model-path", "m", *args])
    except _ParseError as exc:
        return [Finding(name, Level.ERROR, _explain(str(exc), parser))]
    findings = [Finding(name, Level.WARNING, m) for m in _repeated(args, argparser)]
    findings += [Finding(name, Level.ERROR, m) for m in _combinations(args, rules, argparser, gpu_names)]
    return findings


def requested_flags(args: Sequence[str], parser: ArgParser) -> list[Requested]:
    """Each flag of a command line that parses, with the value SGLang's own parser gives it (last one wins)."""
    argparser = _raising(parser.make())
    try:
        namespace = argparser.parse_args(["--model-path", "m", *args])
    except _ParseError:  # the pre-flight check reports it
        return []
    return [Requested(flag, action.dest, getattr(namespace, action.dest))
            for flag, action, _ in _given(args, argparser)]


def _raising(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    def error(message: str) -> Any:
        raise _ParseError(message)

    parser.error = error  # type: ignore[method-assign]
    return parser


def _explain(message: str, source: ArgParser) -> str:
    hints = suggest_for_message(message, source)
    return f"{message} (checked with {source.source})" + "".join(f"; {hint}" for hint in hints)


def suggest_for_message(text: str, source: ArgParser) -> list[str]:
    """Suggestions for the unknown/ambiguous flags an argparse error in `text` names (e.g. a server log)."""
    parser, rules = source.make(), load_rules(source.version)
    unknown = _UNRECOGNIZED.search(text)
    if unknown:
        hints = [_suggest(flag, parser, rules) for flag in unknown["args"].split() if flag.startswith("-")]
        return [hint for hint in hints if hint]
    ambiguous = _AMBIGUOUS.search(text)
    if ambiguous:
        renamed = rules.get("renamed_flags", {}).get(ambiguous["flag"])
        return [f"use {renamed}" if renamed else f"spell {ambiguous['flag']} out in full"]
    return []


def _suggest(flag: str, parser: argparse.ArgumentParser, rules: Mapping[str, Any]) -> str | None:
    name = flag.split("=", 1)[0]
    renamed = rules.get("renamed_flags", {}).get(name)
    if renamed:
        return f"{name} was renamed: use {renamed}"
    close = difflib.get_close_matches(name, _option_strings(parser), n=2, cutoff=0.75)
    return f"{name}: did you mean {' or '.join(close)}?" if close else None


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings if s.startswith("--")]


def _lookup(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    """The action argparse would pick for `flag` (exact, or the unique prefix it accepts)."""
    exact = {s: a for a in parser._actions for s in a.option_strings}
    if flag in exact:
        return exact[flag]
    matches = {a.dest: a for s, a in exact.items() if s.startswith(flag)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _given(args: Sequence[str], parser: argparse.ArgumentParser) -> list[tuple[str, argparse.Action, tuple[str, ...]]]:
    """(flag as written, its action, its values) for every flag on the command line."""
    out = []
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        flag, eq, inline = arg.partition("=")
        action = _lookup(parser, flag)
        if action is None:
            continue
        values = (inline,) if eq else tuple(_values_after(args, i + 1, action))
        out.append((flag, action, values))
    return out


def _values_after(args: Sequence[str], start: int, action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    values = []
    for arg in args[start:]:
        if arg.startswith("--"):
            break
        values.append(arg)
        if action.nargs is None or action.nargs == "?":
            break
    return values


def _repeated(args: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    seen: dict[str, tuple[str, tuple[str, ...]]] = {}
    messages = []
    for flag, action, values in _given(args, parser):
        if action.dest in seen and seen[action.dest][1] != values:
            first_flag, first_values = seen[action.dest]
            messages.append(f"{first_flag} is given twice with different values ({' '.join(first_values)!r}, then "
                            f"{' '.join(values)!r}); SGLang uses the last one: drop one of them")
        seen[action.dest] = (flag, values)
    return messages


def _combinations(args: Sequence[str], rules: Mapping[str, Any], parser: argparse.ArgumentParser,
                  gpu_names: Sequence[str]) -> list[str]:
    given = {action.option_strings[0]: values for _, action, values in _given(args, parser)}
    messages = [m for rule in rules.get("all_or_none", []) if (m := _all_or_none(rule, given))]
    messages += [m for rule in rules.get("requires", []) if (m := _requires(rule, given))]
    sms = {_gpu_sm(name, rules) for name in gpu_names}
    messages += [f"{rule['flag']} fails at startup on this GPU (SM{sm}): {rule['message']}"
                 for rule in rules.get("fatal_on_gpu", []) for sm in sms
                 if rule["flag"] in given and sm in rule["sm"]]
    return messages


def _all_or_none(rule: Mapping[str, Any], given: Mapping[str, tuple[str, ...]]) -> str | None:
    trigger = given.get(rule["when"])
    if trigger is None or any(v.upper() in rule.get("except_values", []) for v in trigger):
        return None
    present = [f for f in rule["flags"] if f in given]
    if not present or len(present) == len(rule["flags"]):
        return None
    missing = [f for f in rule["flags"] if f not in given]
    return f"{rule['message']}; missing: {', '.join(missing)}"


def _requires(rule: Mapping[str, Any], given: Mapping[str, tuple[str, ...]]) -> str | None:
    if rule["flag"] not in given or any(f in given for f in rule["needs_any"]):
        return None
    return str(rule["message"])


def _gpu_sm(name: str, rules: Mapping[str, Any]) -> int | None:
    """The GPU's SM version: from the simulator's GPU table (data/gpus.json), else the rules' name patterns."""
    from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu

    try:
        return find_gpu(name).sm
    except GpuTableError:
        pass
    for key, sm in sorted(rules.get("gpu_sm", {}).items(), key=lambda kv: -len(kv[0])):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![0-9])", name, flags=re.I):
            return int(sm)
    return None
