"""The session's end-of-run report: the summary's sections (servers, cells, A/B), at pytest's verbosity; and its
results document (what the results file, the Markdown report and the plots are made of).

Plain Python (no pytest): plugin.py writes each section under its title. Below 0 (-q) only the cells section's
closing lines (the counts, what was not gated, what errored, how to go on); 0 and more every section, the cells
tables showing every metric only with -v (gate/terminal.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.server.logdirs import shown_path

if TYPE_CHECKING:
    from pytest_sglang_perf.session import PerfSession


def summary_sections(session: PerfSession) -> list[tuple[str, list[str]]]:
    """(title, lines) of each summary section that has lines, in order."""
    from pytest_sglang_perf.gate.ab import session_lines
    from pytest_sglang_perf.load_views import load_lines
    from pytest_sglang_perf.roofline_views import probe_text, roofline_lines
    from pytest_sglang_perf.server_views import server_summary

    sections = [("sglang-perf", cells_lines(session))]
    if session.options.verbosity >= 0:
        brief = session.options.verbosity == 0
        servers = server_summary(session.runs.values(), session.options.simulate, brief=brief)
        ab = session_lines(session.results, [v.name for v in session.variants], session.settings.gate.confidence)
        ab = significant_only(ab) if brief else ab
        roofline = roofline_lines([(test_id, result) for (test_id, _), result in session.results.items()],
                                  simulated=session.options.simulate, probe=probe_text(session.roofline.probe),
                                  verbose=not brief)
        load = load_lines([(test_id, result) for (test_id, _), result in session.results.items()],
                          simulated=session.options.simulate, verbose=not brief)
        sections = [("sglang-perf servers", servers), *sections, ("sglang-perf load", load),
                    ("sglang-perf roofline", roofline), ("sglang-perf A/B", ab)]
    return [(title, lines) for title, lines in sections if lines]


def cells_lines(session: PerfSession) -> list[str]:
    """The cells section: a table per variant, the counts, the errored variants and how to go on."""
    from pytest_sglang_perf.gate.terminal import Pointers, summary_lines
    from pytest_sglang_perf.server_views import errored_variants

    cwd = Path.cwd()
    logs = f"{shown_path(session.logs.path, cwd)}/" if session.logs.path.is_dir() else None
    results = session.options.results_path
    pointers = Pointers(logs, None if results is None else shown_path(results, cwd),
                        servers_shown=session.options.verbosity >= 0)
    return summary_lines(session.cells, errored=errored_variants(session.runs.values()),
                         verbosity=session.options.verbosity, pointers=pointers,
                         baselines=session.baselines.ledger.lines(collected_cells(session)))


def significant_only(ab: list[str]) -> list[str]:
    """The A/B section at pytest's default verbosity: its title, the comparisons that are significant (under the
    test they belong to) and a count of the others; -v shows every comparison."""
    if len(ab) < 2:
        return ab
    title, *body, footnote = ab
    kept: list[str] = []
    quiet = 0
    test: str | None = None
    for line in body:
        if not line.startswith(" "):
            test = line
        elif line.endswith("not significant"):
            quiet += 1
        else:
            kept += [test] if test is not None and test not in kept else []
            kept.append(line)
    if not quiet:
        return ab
    counted = f"({quiet} comparison(s) not significant; -v shows every comparison)"
    return [title, *kept, counted, footnote] if kept else [title, counted]  # the footnote is about intervals shown


def results_document(session: PerfSession) -> dict[str, Any]:
    """The session's results (gate/results_file.py), with the machine it ran on and what it did to the baselines."""
    from pytest_sglang_perf.gate.environment import detect_gpus
    from pytest_sglang_perf.gate.results_file import results_document as document
    from pytest_sglang_perf.outputs.machine import machine_facts
    from pytest_sglang_perf.server_views import errored_variants, server_records

    machine = machine_facts(session.baselines.commit, detect_gpus(), simulated=session.options.simulate)
    probe = session.roofline.probe
    machine["probe"] = None if probe is None else probe.to_dict()
    runs = session.runs.values()
    offered = session.baselines.offered(session.records, session.conditions.why)
    return document(offered, session.environment.facts, server_records(runs),
                    errored_variants(runs), simulated=session.options.simulate, machine=machine,
                    baselines=session.baselines.ledger.to_dict(collected_cells(session)))


def collected_cells(session: PerfSession) -> set[tuple[str, str]]:
    """(test id, variant) of every collected perf test."""
    from pytest_sglang_perf.gate.cell_ids import strip_variant

    return {(strip_variant(nodeid, run.name), run.name) for run in session.runs.values() for nodeid in run.tests}

