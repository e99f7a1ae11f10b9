"""The run's end-of-run report: the summary's sections (servers, cells, A/B), at pytest's verbosity; and its
results document (what the results file, the Markdown report and the plots are made of), and the files written from
it. Fed by the session's records (session/run_record.py), never by the session.

Plain Python (no pytest): the pytest face (pytest_plugin/hooks.py) writes each section under its title. Below 0
(-q) only the cells section's closing lines (the counts, what was not gated, what errored, how to go on); 0 and more
every section, the cells tables showing every metric only with -v (gate/terminal.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.server.logdirs import shown_path
from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord

if TYPE_CHECKING:
    from pytest_sglang_perf.config.run_options import RunOptions
    from pytest_sglang_perf.outputs.writers import Outputs


def summary_sections(run: RunRecord) -> list[tuple[str, list[str]]]:
    """(title, lines) of each summary section that has lines, in order."""
    from pytest_sglang_perf.gate.ab import session_lines
    from pytest_sglang_perf.report.load import load_lines
    from pytest_sglang_perf.report.prefill import prefill_lines
    from pytest_sglang_perf.report.roofline import roofline_lines
    from pytest_sglang_perf.report.server_view import server_view_lines
    from pytest_sglang_perf.report.servers import server_summary
    from pytest_sglang_perf.session.roofline import probe_text

    sections = [("sglang-perf", cells_lines(run))]
    if run.verbosity >= 0:
        brief = run.verbosity == 0
        servers = server_summary(run.runs, run.simulated, brief=brief)
        results = run.results
        ab = session_lines(results, list(run.variants), run.confidence, run.tolerances, run.more_boots, run.spreads)
        ab = significant_only(ab) if brief else ab
        roofline = roofline_lines([(test_id, result) for (test_id, _), result in results.items()],
                                  simulated=run.simulated, probe=probe_text(run.probe), verbose=not brief)
        load = load_lines([(test_id, result) for (test_id, _), result in results.items()],
                          simulated=run.simulated, verbose=not brief)
        prefill = prefill_lines([(test_id, result) for (test_id, _), result in results.items()],
                                simulated=run.simulated, verbose=not brief)
        own = server_view_lines([(test_id, result) for (test_id, _), result in results.items()],
                                simulated=run.simulated, verbose=not brief)
        sections = [("sglang-perf servers", servers), *sections, ("sglang-perf load", load),
                    ("sglang-perf server's view", own), ("sglang-perf prefill", prefill),
                    ("sglang-perf roofline", roofline), ("sglang-perf A/B", ab)]
    return [(title, lines) for title, lines in sections if lines]


def cells_lines(run: RunRecord) -> list[str]:
    """The cells section: a table per variant, the counts, the errored variants and how to go on."""
    from pytest_sglang_perf.gate.terminal import Pointers, summary_lines
    from pytest_sglang_perf.report.servers import errored_variants

    cwd = Path.cwd()
    logs = f"{shown_path(run.logs_path, cwd)}/" if run.logs_path.is_dir() else None
    results = run.results_path
    pointers = Pointers(logs, None if results is None else shown_path(results, cwd), servers_shown=run.verbosity >= 0)
    return summary_lines([record.cell for record in run.records], errored=errored_variants(run.runs),
                         verbosity=run.verbosity, pointers=pointers, baselines=list(run.baseline_lines))


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
        elif "] not significant" in line:
            quiet += 1
        else:
            kept += [test] if test is not None and test not in kept else []
            kept.append(line)
    if not quiet:
        return ab
    counted = f"({quiet} comparison(s) not significant; -v shows every comparison)"
    return [title, *kept, counted, footnote] if kept else [title, counted]  # the footnote is about intervals shown


def results_document(doc: DocumentRecord) -> dict[str, Any]:
    """The run's results (gate/results_file.py), with the machine it ran on and what it did to the baselines."""
    from pytest_sglang_perf.gate.environment import detect_gpus
    from pytest_sglang_perf.gate.results_file import results_document as document
    from pytest_sglang_perf.outputs.machine import machine_facts
    from pytest_sglang_perf.report.servers import errored_variants, server_records

    run = doc.run
    machine = machine_facts(doc.commit, detect_gpus(), simulated=run.simulated)
    machine["probe"] = None if run.probe is None else run.probe.to_dict()
    return document(list(doc.offered), doc.environment, server_records(run.runs), errored_variants(run.runs),
                    simulated=run.simulated, machine=machine, baselines=dict(doc.baselines))


def write_files(doc: Callable[[], DocumentRecord], options: RunOptions, *, measured: bool) -> Outputs:
    """Write what the run asked for besides the terminal: the results file, the Markdown report (and the GitHub job
    summary), the plots; `doc` is made only when one of them is asked for."""
    from pytest_sglang_perf.outputs.writers import write_outputs

    return write_outputs(lambda: results_document(doc()), options, os.environ, measured=measured)
