"""A session split over pytest-xdist workers: what a worker hands the controller, and the controller's end.

Plain Python (no pytest). Each worker runs the variants it was given (pytest_plugin/xdist_scheduling.py keeps a
variant's tests on one worker) and, at its end, stops its servers and hands over its summary sections, its errors
and its results document (`worker_output`, a JSON-ready dict: xdist carries it as the worker's `workeroutput`),
made from the session's records. The controller measures nothing itself: it writes the run's files from the merged
documents (outputs/merge.py), shows each worker's sections and one A/B section over every worker's cells
(`finish_controller`, `worker_sections`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord

if TYPE_CHECKING:
    from pytest_sglang_perf.config.run_options import RunOptions
    from pytest_sglang_perf.outputs.writers import Outputs

AB_TITLE = "sglang-perf A/B"
OUTPUT_KEY = "sglang_perf"
"""The key of the worker's part in xdist's `workeroutput`."""


@dataclass(frozen=True)
class WorkerPart:
    """What one worker handed over."""

    worker: str
    sections: list[tuple[str, list[str]]]
    """Its summary sections, the closing line of a run that measured nothing last (what the run wrote is the
    controller's to say)."""
    errors: list[str]
    document: dict[str, Any] | None


def worker_output(doc: DocumentRecord, nothing: str | None, errors: list[str]) -> dict[str, Any]:
    """At a worker's end (its servers stopped): its summary sections, errors and results document."""
    from pytest_sglang_perf.report.sections import results_document, summary_sections

    sections = [[title, lines] for title, lines in summary_sections(doc.run)]
    return {
        "sections": sections + ([["sglang-perf", [nothing]]] if nothing is not None else []),
        "errors": list(errors),
        "document": results_document(doc) if doc.run.runs else None,
    }


def read_part(worker: str, output: object) -> WorkerPart | None:
    """A worker's part from its `workeroutput` entry (None when it sent none: a worker without the plugin's session)."""
    if not isinstance(output, dict):
        return None
    sections = [(str(title), [str(line) for line in lines]) for title, lines in output.get("sections", [])]
    document = output.get("document")
    return WorkerPart(worker, sections, [str(error) for error in output.get("errors", [])],
                      document if isinstance(document, dict) else None)


def finish_controller(options: RunOptions, parts: Sequence[WorkerPart]) -> Outputs:
    """The controller's end: the run's files written from the merged documents; the workers' errors become the
    run's, beside what could not be written."""
    from pytest_sglang_perf.outputs.merge import merge_documents
    from pytest_sglang_perf.outputs.writers import Outputs, write_outputs

    errors = [f"[{part.worker}] {error}" for part in parts for error in part.errors]
    documents = [part for part in parts if part.document is not None]
    if not documents:
        return Outputs(errors=errors)
    outputs = write_outputs(lambda: merge_documents([p.document for p in documents if p.document is not None],
                                                    [p.worker for p in documents]),
                            options, os.environ, measured=True)
    return Outputs(outputs.written, errors + outputs.errors)


def worker_sections(run: RunRecord, parts: Sequence[WorkerPart]) -> list[tuple[str, list[str]]]:
    """Each worker's summary sections, titled with the worker, then the A/B section of every worker's cells (a
    worker's own compares only the variants it ran)."""
    shown = [(f"{title} [{part.worker}]", lines) for part in parts for title, lines in part.sections
             if title != AB_TITLE]
    ab = _ab_lines(run, parts)
    return [*shown, (AB_TITLE, ab)] if ab else shown


def _ab_lines(run: RunRecord, parts: Sequence[WorkerPart]) -> list[str]:
    """As summary_sections: none below pytest's default verbosity, the significant ones at it, all with -v."""
    from pytest_sglang_perf.gate.ab import CellSamples, section_lines
    from pytest_sglang_perf.report.sections import significant_only

    if run.verbosity < 0:
        return []

    cells = []
    for part in parts:
        for cell in (part.document or {}).get("cells", []):
            try:
                cells.append(CellSamples.from_results_cell(cell))
            except ValueError:  # a cell that measured nothing (its test failed before measuring)
                continue
    lines = section_lines(cells, list(run.variants), run.confidence, run.tolerances)
    return significant_only(lines) if run.verbosity == 0 else lines
