"""The session's report as Markdown, from the results document (gate/results_file.results_document): what
--sglang-markdown writes and what a GitHub Actions job summary ($GITHUB_STEP_SUMMARY) gets.

Top to bottom: a heading (SIMULATED when the numbers come from the simulator), one line of counts by verdict,
a table per variant (markdown_cells.py), the concurrent cells' load (markdown_load.py), the bandwidth ceilings,
each cell's conditions (markdown_conditions.py), the servers and the warnings of their effective configuration, the
variants that errored and why, what recording did to the baseline files, then the environment, the versions and
the machine (markdown_env.py). It renders on GitHub; every value from the document is escaped (markdown_text.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.gate.compare import SEVERITY
from pytest_sglang_perf.outputs.markdown_cells import variant_section
from pytest_sglang_perf.outputs.markdown_conditions import conditions_section
from pytest_sglang_perf.outputs.markdown_env import environment_section
from pytest_sglang_perf.outputs.markdown_load import load_section
from pytest_sglang_perf.outputs.markdown_prefill import prefill_section
from pytest_sglang_perf.outputs.markdown_roofline import roofline_section
from pytest_sglang_perf.outputs.markdown_text import bullets, code, fenced, table, text

TITLE = "sglang-perf"
_ORDER = tuple(v.value for v in SEVERITY)
"""Counts are listed most severe first."""
_NEEDS_LOOK = ("inconclusive", "new", "stale")
_LISTED = 20
"""The baseline entries a recording run names (the rest are counted)."""
LEGEND = ("*band*: the change allowed in the worse direction (a minus sign where higher is better); *detects*: the "
          "smallest change these samples can establish (⚠: wider than the band, measure more requests).")


def markdown_report(doc: Mapping[str, Any]) -> str:
    """The Markdown report of one results document; GitHub-renderable, ends with a newline."""
    cells = _list(doc.get("cells"))
    errored = _list(doc.get("errored"))
    simulated = bool(doc.get("simulated"))
    parts = [[_heading(simulated), "", _count_line(cells, errored)]]
    if simulated:
        parts.append(["> [!NOTE]", "> SIMULATED: these numbers come from the plugin's SGLang simulator, not from "
                                   "SGLang on a GPU. They test the plugin and the suite, not a server's speed."])
    variants = list(dict.fromkeys(str(c.get("variant", "?")) for c in cells))
    if variants:
        parts.append(["## Results"])
        for variant in variants:
            mine = [c for c in cells if str(c.get("variant", "?")) == variant]
            parts.append(variant_section(variant, mine, simulated=any(bool(c.get("simulated")) for c in mine)))
        parts.append([LEGEND])
        sections = (load_section(cells), prefill_section(cells, simulated=simulated),
                    roofline_section(cells, simulated=simulated), conditions_section(cells))
        parts += [section for section in sections if section]
    servers = _servers(doc.get("servers"), variants)
    parts.extend(section for section in (servers, _errored(errored), _baselines(doc)) if section)
    parts.append(environment_section(doc))
    return "\n\n".join("\n".join(part) for part in parts) + "\n"


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _heading(simulated: bool) -> str:
    return f"# {TITLE}: SIMULATED results" if simulated else f"# {TITLE} results"


def _count_line(cells: Sequence[Mapping[str, Any]], errored: Sequence[Mapping[str, Any]]) -> str:
    """`❌ **12 cells**: 1 regressed, 2 new, 6 ok, 3 errored`: every test of an errored variant is an errored cell."""
    verdicts = [str(c.get("verdict", "?")) for c in cells]
    failed = sum(len(e.get("tests") or ()) for e in errored)
    counts = [f"{verdicts.count(v)} {v}" for v in (*_ORDER, *sorted(set(verdicts) - set(_ORDER))) if v in verdicts]
    if failed or errored:
        counts.append(f"{failed} errored")
    total = len(cells) + failed
    if total == 0:
        return "No perf test measured anything in this run."
    noun = "cell" if total == 1 else "cells"
    return f"{_status(verdicts, bool(errored))} **{total} {noun}**: {', '.join(counts)}"


def _status(verdicts: Sequence[str], errored: bool) -> str:
    if errored or "regressed" in verdicts:
        return "❌"
    return "⚠️" if any(v in _NEEDS_LOOK for v in verdicts) else "✅"


def _servers(servers: Any, variants: Sequence[str]) -> list[str]:
    """A row per booted server (boot time, whether it ran what was requested), in the order of the results, then
    every warning about its effective configuration."""
    if not isinstance(servers, Mapping) or not servers:
        return []
    rows = []
    warnings: list[str] = []
    order = [v for v in variants if v in servers] + [v for v in servers if v not in variants]
    for variant in order:
        raw = servers[variant]
        record: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        effective: Mapping[str, Any] = record.get("effective") or {}
        boot = record.get("boot_seconds")
        found = [str(w) for w in effective.get("warnings") or ()]
        if effective.get("unavailable"):
            found.append(f"its effective configuration could not be read: {effective['unavailable']}")
        rows.append((code(variant, in_table=True), _seconds(boot), text(effective.get("verdict") or "-"),
                     str(len(found))))
        warnings.extend(f"{code(variant)}: {text(w)}" for w in found)
    lines = ["## Servers", "", *table(("variant", "boot", "configuration", "warnings"), rows, "lrlr"), ""]
    if warnings:
        lines.extend(["Effective-configuration warnings (what a server ran differs from what its variant asked):",
                      "", *bullets(warnings)])
    else:
        lines.append("No effective-configuration warnings: every server ran what its variant asked for.")
    return lines


def _seconds(value: Any) -> str:
    return f"{value:.1f} s" if isinstance(value, int | float) else "-"


def _errored(errored: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each variant whose server never ran, its stage, its tests and the reason (as written, in a code block)."""
    if not errored:
        return []
    lines = ["## Errored variants (nothing measured)", ""]
    for entry in errored:
        stage = "pre-flight check failed" if entry.get("stage") == "pre-flight" else "boot failed"
        tests = len(entry.get("tests") or ())
        noun = "test" if tests == 1 else "tests"
        lines.extend([f"- {code(entry.get('variant', '?'))}: {stage}; its {tests} {noun} measured nothing. Why:",
                      "", *("  " + line for line in fenced(str(entry.get("reason") or "(no reason recorded)"))), ""])
    return lines[:-1]


def _baselines(doc: Mapping[str, Any]) -> list[str]:
    """What the session did with the baseline files (gate/ledger.py): what recording created and updated, the
    entries no test of the run measured, the entries older than baseline_max_age."""
    ledger = doc.get("baselines")
    if not isinstance(ledger, Mapping):
        return []
    lines: list[str] = []
    mode = ledger.get("mode")
    if mode:
        flag = "--sglang-update-baselines" + ("=new" if mode == "new" else "")
        counts = ", ".join(f"{len(ledger.get(what) or ())} {what}" for what in ("created", "updated", "unchanged"))
        lines.append(f"- Recorded with {code(flag)}: {counts}.")
        lines.extend(_entries(ledger.get("created"), "created"))
        lines.extend(_entries(ledger.get("updated"), "updated"))
    unused = ledger.get("unused") or []
    if unused and mode:
        lines.append(f"- {len(unused)} unused: entries of these files that no test of this run measured "
                     f"({code('sglang-perf baseline prune')} removes those whose test or variant is gone).")
    old = [o for o in ledger.get("old") or () if isinstance(o, Mapping)]
    if old:
        days = ledger.get("max_age_days")
        limit = f" ({days:g} days)" if isinstance(days, int | float) else ""
        lines.append(f"- {len(old)} older than {code('baseline_max_age')}{limit}; re-record them with "
                     f"{code('--sglang-update-baselines')}:")
        lines.extend(f"  - {code(o.get('test_id', '?'))} [{text(o.get('variant', '?'))}], recorded "
                     f"{text(o.get('recorded_at', '?'))} ({_days(o.get('age_days'))})" for o in old)
    return ["## Baselines", "", *lines] if lines else []


def _entries(keys: Any, what: str) -> list[str]:
    """`  - created: test_id [variant], ...`: the (test id, variant) pairs, the first _LISTED of them."""
    pairs = [k for k in keys or () if isinstance(k, list | tuple) and len(k) == 2]
    if not pairs:
        return []
    shown = ", ".join(f"{code(test)} [{text(variant)}]" for test, variant in pairs[:_LISTED])
    more = f" and {len(pairs) - _LISTED} more" if len(pairs) > _LISTED else ""
    return [f"  - {what}: {shown}{more}"]


def _days(age: Any) -> str:
    return f"{age:.0f} days ago" if isinstance(age, int | float) else "age unknown"
