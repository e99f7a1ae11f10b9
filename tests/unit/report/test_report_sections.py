"""The end-of-run report (report/sections.py): the summary's sections at each verbosity, the cells section's
pointers, the results document made from the session's records and the files written from it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_records import booted, cell, result, run_record, variant_run

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.gate.compare import Verdict
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.outputs.machine import Commit
from pytest_sglang_perf.report.sections import cells_lines, results_document, summary_sections, write_files
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord

TEST = "t.py::a"
VS = "  fast vs default: "
# e2e 1.0 s -> 0.5 s (each +-1.5% over 4 requests) at the same ttft (0.1 s) and 65 tokens: throughput x2, decode
# (64 / (e2e - ttft)) x2.25, tpot ((e2e - ttft) / 64) x0.444, ttft unchanged (and without spread)
THROUGHPUT = re.compile(rf"{VS}output_throughput \+100\.0% \[\+9\d\.\d%, \+10\d\.\d%\] significant: better")
DECODE = re.compile(rf"{VS}decode_throughput \+125\.0% \[\+1[12]\d\.\d%, \+1[23]\d\.\d%\] significant: better")
TTFT = f"{VS}ttft +0.0% [+0.0%, +0.0%] not significant (no spread: identical values measure no noise)"
TPOT = re.compile(rf"{VS}tpot -55\.6% \[-5\d\.\d%, -5\d\.\d%\] significant: better")


def ab_run(tmp_path: Path, verbosity: int) -> RunRecord:
    """Two booted variants, `fast` regressed on its ttft check and twice as fast end to end."""
    runs = [booted(variant_run(name), tmp_path / f"{name}.log") for name in ("default", "fast")]
    records = [CellRecord(cell(TEST, "default", Verdict.OK), result("default", spread=0.01)),
               CellRecord(cell(TEST, "fast", Verdict.REGRESSED, Verdict.OK), result("fast", e2e=0.5, spread=0.01))]
    return run_record(records, runs, logs_path=tmp_path, variants=("default", "fast"), verbosity=verbosity)


def test_with_q_only_the_cells_section_is_shown(tmp_path: Path) -> None:
    """-q: no servers, load, roofline or A/B section; the cells section without tables."""
    [(title, lines)] = summary_sections(ab_run(tmp_path, -1))
    assert title == "sglang-perf"
    assert lines[0] == ("sglang-perf: 2 cells: 1 ok, 1 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, "
                        "0 updated, 0 errored (SIMULATED)")
    assert not any(line.startswith("variant ") for line in lines)


def test_the_default_summary_has_servers_cells_and_the_significant_ab(tmp_path: Path) -> None:
    """Sections in order, empty ones left out; the A/B keeps the significant comparisons and counts the rest."""
    sections = dict(summary_sections(ab_run(tmp_path, 0)))
    assert list(sections) == ["sglang-perf servers", "sglang-perf", "sglang-perf A/B"]
    assert sections["sglang-perf servers"][-1] == "(-v shows what each server ran and its startup facts)"
    ab = sections["sglang-perf A/B"]
    assert ab[1] == TEST and ab[5] == "(1 comparison(s) not significant; -v shows every comparison)"
    assert [pattern.fullmatch(line) is not None for pattern, line in zip((THROUGHPUT, DECODE, TPOT), ab[2:5],
                                                                          strict=True)] == [True] * 3


def test_with_v_every_ab_comparison_is_shown(tmp_path: Path) -> None:
    """-v: the not significant comparison too, in metric order, and each server's configuration."""
    sections = dict(summary_sections(ab_run(tmp_path, 1)))
    ab = sections["sglang-perf A/B"]
    assert ab[1] == TEST and ab[4] == TTFT
    shown = (ab[2], ab[3], ab[5])
    assert [pattern.fullmatch(line) is not None for pattern, line in zip((THROUGHPUT, DECODE, TPOT), shown,
                                                                          strict=True)] == [True] * 3
    assert "  CUDA graphs: decode on" in sections["sglang-perf servers"]


def test_the_cells_section_points_at_the_logs_and_results_it_has(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A regression names the run's log folder and results file, relative to the working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    record = run_record([CellRecord(cell(TEST, "default", Verdict.REGRESSED), result())], logs_path=tmp_path / "logs",
                        results_path=tmp_path / "out" / "results.json")
    lines = cells_lines(record)
    assert "  server logs:   logs/ (a <variant>.log per variant)" in lines
    assert ("  every sample:  out/results.json; compare two runs: sglang-perf compare before.json after.json"
            in lines)


def test_without_a_log_folder_or_results_file_the_cells_section_says_where_instead(tmp_path: Path) -> None:
    """No log folder yet: each failure report names its log; no results file: how to get one."""
    record = run_record([CellRecord(cell(TEST, "default", Verdict.REGRESSED), result())],
                        logs_path=tmp_path / "never-made", verbosity=-1)
    lines = cells_lines(record)
    assert "  server logs:   named in each failure report" in lines
    assert any(line.startswith("  every sample:  re-run with --sglang-results FILE;") for line in lines)


def test_errored_variants_and_baseline_lines_are_in_the_cells_section(tmp_path: Path) -> None:
    """A variant whose boot failed counts its tests as errored and is named; what the run did to baselines is said."""
    bad = variant_run("bad", tests=["t.py::a[bad]", "t.py::b[bad]"])
    bad.boot_error = BootError(name="bad", command="x", reason="exited with code 1", log_path=tmp_path / "bad.log")
    record = run_record([CellRecord(cell(TEST, "default", Verdict.OK), result())], [bad], logs_path=tmp_path,
                        baseline_lines=["sglang-perf: baselines: 1 entry updated"])
    lines = cells_lines(record)
    assert any(line.startswith("sglang-perf: 3 cells: 1 ok,") and line.endswith("2 errored (SIMULATED)")
               for line in lines)
    assert "sglang-perf: ERRORED, nothing measured: bad (boot failed)" in lines
    assert "sglang-perf: baselines: 1 entry updated" in lines


def document_record(tmp_path: Path) -> DocumentRecord:
    run = ab_run(tmp_path, 0)
    offered = (CellRecord(cell(TEST, "default", Verdict.OK), result(), entry={"offered": True}),)
    return DocumentRecord(run, offered, {"model": "org/m"}, Commit("abc123def456", True), {"created": [[TEST, "x"]]})


def test_the_results_document_is_made_of_the_offered_records_servers_and_commit(tmp_path: Path) -> None:
    """Its cells are the offered records (with their entries), beside the servers, the commit and the ledger."""
    doc = results_document(document_record(tmp_path))
    assert [(c["test_id"], c["variant"], c["entry"]) for c in doc["cells"]] == [(TEST, "default", {"offered": True})]
    assert sorted(doc["servers"]) == ["default", "fast"]
    assert (doc["machine"]["commit"], doc["machine"]["dirty"], doc["machine"]["probe"]) == ("abc123def456", True,
                                                                                             None)
    assert (doc["environment"], doc["baselines"], doc["simulated"], doc["errored"]) == (
        {"model": "org/m"}, {"created": [[TEST, "x"]]}, True, [])


def test_files_are_written_only_when_asked_and_the_document_made_only_then(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """No output asked: the record is never made; --sglang-results: the file holds the document."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    made: list[int] = []

    def doc() -> DocumentRecord:
        made.append(1)
        return document_record(tmp_path)

    nothing = write_files(doc, RunOptions(), measured=True)
    assert (nothing.written, nothing.errors, made) == ([], [], [])
    path = tmp_path / "out" / "results.json"
    outputs = write_files(doc, RunOptions(results_path=path), measured=True)
    assert (outputs.written, outputs.errors, made) == ([f"results {path}"], [], [1])
    assert json.loads(path.read_text())["cells"][0]["entry"] == {"offered": True}
