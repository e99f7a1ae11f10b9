"""The Markdown report (outputs/markdown.py): what a job summary and --sglang-markdown show, from results documents
built here with the plugin's own Cell and results_document, so the report reads what the plugin writes."""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.gate.errored import BOOT, ErroredVariant
from pytest_sglang_perf.gate.results_file import records_of, results_document
from pytest_sglang_perf.outputs.machine import MEASURED, SIMULATED_HOST
from pytest_sglang_perf.outputs.markdown import markdown_report
from pytest_sglang_perf.outputs.markdown_text import code, text

ENV = {"model": "Qwen/Qwen3.6-27B", "simulated": False, "python": "3.11.7", "platform": "Linux-6.1-x86_64",
       "pytest_sglang_perf": "0.1.0", "sglang": "0.5.23", "torch": "2.9.1", "gpus": ["NVIDIA H200", "NVIDIA H200"],
       "driver": "570.86"}
MACHINE = {"label": MEASURED, "host": "gpu-runner-7", "cpu": "AMD EPYC 9654", "cpu_count": 192,
           "gpus": ["NVIDIA H200", "NVIDIA H200"], "driver": "570.86", "python": "3.11.7",
           "platform": "Linux-6.1-x86_64", "commit": "0123456789ab", "dirty": True}


def check(metric: str, unit: str, baseline: float | None, measured: float | None, verdict: Verdict, *,
          allowed: float = 0.05, p: float | None = None, detectable: float | None = 0.021,
          note: str | None = None) -> MetricCheck:
    change = None if baseline is None or measured is None else (measured - baseline) / baseline
    return MetricCheck(metric, unit, baseline, measured, change, allowed, verdict, p_value=p, detectable=detectable,
                       method="welch", n=5, note=note)


def ok_cell(test_id: str, variant: str, *, simulated: bool = False) -> Cell:
    return Cell(test_id, variant, (check("output_throughput", "tok/s", 50.0, 50.5, Verdict.OK),
                                   check("ttft", "s", 0.120, 0.118, Verdict.OK, allowed=0.10)), simulated)


def regressed_cell() -> Cell:
    checks = (check("output_throughput", "tok/s", 52.31, 45.0, Verdict.REGRESSED, p=0.0001),
              check("ttft", "s", 0.1204, 0.1210, Verdict.OK, allowed=0.10),
              check("tpot", "s", 0.0190, 0.0191, Verdict.OK, allowed=0.10,
                    note="tpot: 4/5 samples (1 arrived in one read)"))
    again = (check("output_throughput", "tok/s", 52.31, 44.9, Verdict.REGRESSED, p=0.0002),)
    return Cell("tests/perf/test_prompts.py::test_red_black_tree", "default", checks, simulated=False,
                confirmation=again)


def document(cells: list[Cell], *, simulated: bool = False, errored: tuple[ErroredVariant, ...] = (),
             servers: dict[str, Any] | None = None, machine: dict[str, Any] | None = MACHINE,
             baselines: dict[str, Any] | None = None) -> dict[str, Any]:
    env = {**ENV, "simulated": True, "gpus": [], "driver": None} if simulated else ENV  # as build_environment does
    doc = results_document(records_of(cells, {}), env, servers, errored=errored,
                           simulated=simulated, machine=machine, baselines=baselines)
    loaded: dict[str, Any] = json.loads(json.dumps(doc, sort_keys=True))  # as read back from a results file
    return loaded


def server(warnings: list[str], verdict: str = "ok", boot: float = 41.23) -> dict[str, Any]:
    return {"effective": {"verdict": verdict, "warnings": warnings, "notes": [], "flags": [], "ran": {},
                          "unavailable": None}, "boot_seconds": boot, "startup": None, "graph_use": None}


def cells_of(line: str) -> list[str]:
    """A table row's cells, split at the `|` GitHub splits at (not an escaped `\\|`)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def tables(report: str) -> list[list[list[str]]]:
    found: list[list[list[str]]] = []
    previous = ""
    for line in report.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                found.append([])
            found[-1].append(cells_of(line))
        previous = line
    return found


def test_a_regression_is_shown_first_with_units_change_band_and_verdict() -> None:
    report = markdown_report(document([regressed_cell(), ok_cell("tests/perf/test_prompts.py::test_short",
                                                                 "default")]))
    assert report.splitlines()[0] == "# sglang-perf results"
    assert "❌ **2 cells**: 1 regressed, 1 ok" in report
    visible, collapsed = tables(report)
    assert visible[0] == ["test", "metric", "baseline", "measured", "change", "band", "verdict"]
    assert visible[2] == [code("tests/perf/test_prompts.py::test_red_black_tree"), "`output_throughput`",
                          "52.31 tok/s", "45.00 tok/s", "-14.0%", "-5.0% (detects 2.1%)", "**REGRESSED** (p<0.001)"]
    assert len(visible) == 3  # header, rule, the one regressed metric: the ok ones are collapsed
    # the collapsed block: the regressed cell's ok metrics (its name again on its first row), then the ok cell
    assert report.index("<details>") > report.index("**REGRESSED**")
    rows = {(row[0], row[1]): row for row in collapsed[2:]}
    assert rows[(code("tests/perf/test_prompts.py::test_red_black_tree"), "`ttft`")][2:] == [
        "120.4 ms", "121.0 ms", "+0.5%", "+10.0% (detects 2.1%)", "ok"]
    assert rows[("", "`tpot`")][2:4] == ["19.0 ms", "19.1 ms"]
    assert (code("tests/perf/test_prompts.py::test_short"), "`output_throughput`") in rows
    assert "<summary>4 more metrics, each ok</summary>" in report


def test_confirmation_notes_and_the_legend_are_shown() -> None:
    report = markdown_report(document([regressed_cell()]))
    joined = " ".join(report.split())
    assert ("`tests/perf/test_prompts.py::test_red_black_tree`: regression confirmed: re-measured on the same "
            "server, it regressed again: `output_throughput` -14.2% (regressed)") in joined
    assert "samples that define each metric: tpot: 4/5 samples (1 arrived in one read)" in joined
    assert "*band*: the change allowed in the worse direction" in report


def test_an_all_ok_variant_is_one_collapsed_block() -> None:
    report = markdown_report(document([ok_cell("t.py::a", "fast"), ok_cell("t.py::b", "fast")]))
    assert "✅ **2 cells**: 2 ok" in report
    section = report[report.index("### Variant `fast`"):]
    assert section.split("\n", 2)[2].startswith("<details>\n<summary>2 cells ok (4 metrics)</summary>\n\n| test")
    assert report.count("| test | metric |") == 1


def test_simulated_runs_say_so_first_and_label_the_host() -> None:
    machine = {**MACHINE, "label": SIMULATED_HOST, "gpus": [], "driver": None, "dirty": False}
    report = markdown_report(document([ok_cell("t.py::a", "default", simulated=True)], simulated=True,
                                      machine=machine))
    first, *rest = report.splitlines()
    assert first.startswith("# ") and "SIMULATED" in first
    assert "### Variant `default` (SIMULATED)" in rest
    assert f"*{text(SIMULATED_HOST)}*" in rest
    assert "- **GPUs**: none (simulated)" in rest  # the environment's
    assert "- **GPUs**: none found" in rest  # the host's
    assert "- **Commit**: `0123456789ab` (clean)" in rest


def test_stale_new_and_updated_cells() -> None:
    stale = Cell("t.py::a", "default", (check("output_throughput", "tok/s", None, 50.0, Verdict.NEW),), False,
                 stale=("max_tokens 512 -> 128", "--tp-size 1 -> 2"))
    new = Cell("t.py::b", "default", (check("ttft", "s", None, 0.2, Verdict.NEW, allowed=0.1),), False)
    was_regressed = Cell("t.py::c", "default", (check("output_throughput", "tok/s", 50.0, 40.0, Verdict.REGRESSED,
                                                      p=0.01),), False, updated=True)
    report = markdown_report(document([stale, new, was_regressed]))
    assert "⚠️ **3 cells**: 1 stale, 1 new, 1 updated" in report  # no comparable baseline: a look is needed
    [table] = tables(report)
    assert [row[1:] for row in table[2:]] == [
        ["`output_throughput`", "-", "50.00 tok/s", "-", "-5.0% (detects 2.1%)", "stale"],
        ["`ttft`", "-", "200.0 ms", "-", "+10.0% (detects 2.1%)", "new"],
        ["`output_throughput`", "50.00 tok/s", "40.00 tok/s", "-20.0%", "-5.0% (detects 2.1%)",
         "updated (was regressed)"],
    ]
    assert ("`t.py::a`: the baseline is not comparable (recorded for something else): max\\_tokens 512 -> 128; "
            "--tp-size 1 -> 2") in report


def test_an_underpowered_band_and_a_change_under_the_floor() -> None:
    cell = Cell("t.py::a", "default", (
        check("ttft", "s", 0.010, 0.0115, Verdict.OK, allowed=0.10, detectable=0.30),), False)
    [table] = tables(markdown_report(document([cell])))
    assert table[2][5:] == ["+10.0% (detects 30.0% ⚠)", "ok (under the 2.00 ms floor)"]


def test_table_cells_escape_what_github_would_read_as_markup() -> None:
    cell = ok_cell("t.py::test_x[a|b]", "v|1")
    cell = Cell(cell.test_id, cell.variant, (check("output_throughput", "tok/s", 50.0, 40.0, Verdict.REGRESSED,
                                                   p=0.2),), False)
    report = markdown_report(document([cell], servers={"v|1": server(["<script> *not* bold | ~x~"])}))
    for table in tables(report):
        assert len({len(row) for row in table}) == 1, table
    assert "`t.py::test_x[a\\|b]`" in report
    assert "\\<script> \\*not\\* bold \\| \\~x\\~" in report
    assert "<script>" not in report.replace("\\<script>", "")


def test_servers_warnings_and_errored_variants() -> None:
    boot_failed = ErroredVariant("broken", BOOT, "server exited with code 1\nTraceback: ```oops```",
                                 ("t.py::a[broken]", "t.py::b[broken]"))
    servers = {"default": server([]), "overlap": server(["--enable-single-batch-overlap: SGLang turned it off"],
                                                        verdict="differs", boot=62.0)}
    report = markdown_report(document([ok_cell("t.py::a", "default"), ok_cell("t.py::a", "overlap")],
                                      errored=(boot_failed,), servers=servers))
    assert "❌ **4 cells**: 2 ok, 2 errored" in report
    servers_table = tables(report)[-1]
    assert servers_table[2:] == [["`default`", "41.2 s", "ok", "0"], ["`overlap`", "62.0 s", "differs", "1"]]
    assert "- `overlap`: --enable-single-batch-overlap: SGLang turned it off" in report
    errored = report[report.index("## Errored variants"):]
    assert "- `broken`: boot failed; its 2 tests measured nothing. Why:" in errored
    assert "  ````\n  server exited with code 1\n  Traceback: ```oops```\n  ````" in errored


def test_no_warnings_is_said() -> None:
    report = markdown_report(document([ok_cell("t.py::a", "default")], servers={"default": server([])}))
    assert "No effective-configuration warnings" in report


def test_environment_versions_and_machine() -> None:
    report = markdown_report(document([ok_cell("t.py::a", "default")]))
    env = report[report.index("## Environment"):]
    assert "- **Model**: `Qwen/Qwen3.6-27B`" in env
    assert "- **Versions**: pytest-sglang-perf 0.1.0 · SGLang 0.5.23 · torch 2.9.1 · Python 3.11.7" in env
    assert "- **GPUs**: 2 x NVIDIA H200 (driver 570.86)" in env
    assert f"*{text(MEASURED)}*" in env
    assert "- **Host**: gpu-runner-7" in env
    assert "- **CPU**: AMD EPYC 9654 (192 logical CPUs)" in env
    assert "- **Commit**: `0123456789ab` (dirty: tracked files had uncommitted changes)" in env


def test_an_older_file_without_machine_or_baselines_still_reads() -> None:
    doc = document([ok_cell("t.py::a", "default")], machine=None)
    del doc["baselines"]
    report = markdown_report(doc)
    assert "Not recorded (a results file written before pytest-sglang-perf recorded it)." in report
    assert "## Baselines" not in report


def test_what_recording_did_to_the_baselines() -> None:
    ledger = {"mode": "new", "created": [["t.py::a", "default"]], "updated": [], "unchanged": [["t.py::b", "x"]],
              "unused": [["t.py::gone", "default"]],
              "old": [{"test_id": "t.py::b", "variant": "x", "recorded_at": "2025-01-01T00:00:00+00:00",
                       "age_days": 334.2}], "max_age_days": 90.0}
    report = markdown_report(document([ok_cell("t.py::a", "default")], baselines=ledger))
    section = report[report.index("## Baselines"):report.index("## Environment")]
    assert "- Recorded with `--sglang-update-baselines=new`: 1 created, 0 updated, 1 unchanged." in section
    assert "  - created: `t.py::a` [default]" in section
    assert "- 1 unused" in section
    assert ("- 1 older than `baseline_max_age` (90 days); re-record them with `--sglang-update-baselines`:"
            in section)
    assert "  - `t.py::b` [x], recorded 2025-01-01T00:00:00+00:00 (334 days ago)" in section


def test_a_gate_run_without_old_entries_has_no_baselines_section() -> None:
    ledger = {"mode": None, "created": [], "updated": [], "unchanged": [], "unused": [["t.py::x", "v"]], "old": [],
              "max_age_days": None}
    assert "## Baselines" not in markdown_report(document([ok_cell("t.py::a", "default")], baselines=ledger))


def test_nothing_measured() -> None:
    report = markdown_report(document([]))
    assert report.startswith("# sglang-perf results\n\nNo perf test measured anything in this run.\n")
    assert "## Results" not in report and report.endswith("\n")


def test_code_spans_hold_backticks() -> None:
    assert code("a`b") == "`` a`b ``"
    assert code("x|y", in_table=True) == "`x\\|y`" and code("x|y") == "`x|y`"


def test_each_cells_conditions_and_the_reason_a_disturbed_one_did_not_fail() -> None:
    doc = document([regressed_cell(), ok_cell("tests/perf/test_prompts.py::test_short", "default")])
    first, second = doc["cells"]
    first["disturbed"] = "another process on GPU 1: pid 4242 (2.0 GiB)"
    first["client"] = {"lag_p50": 0.1, "lag_p99": 0.1, "lag_max": 0.1, "probes": 1, "cpu_share": 1.0, "seconds": 1}
    again: dict[str, Any] = {"metrics": {}, "samples": []}
    first["confirmation"] = again  # the re-measure decided: its readings are shown
    again["client"] = {"lag_p50": 0.0001, "lag_p99": 0.0004, "lag_max": 0.001, "probes": 70, "cpu_share": 0.12,
                       "seconds": 1.4}
    again["host"] = {"cores": 64, "runnable": 0.4, "busy": 0.1, "steal": 0.0, "iowait": 0.0, "load1": 1.2,
                     "samples": 14, "server_wait": 0.01, "client_wait": 0.0}
    again["gpu"] = [{"index": 1, "name": "NVIDIA H200", "samples": 14, "busy_samples": 12, "sm_mhz": 1980.0,
                     "sm_max_mhz": 1980, "memory_mhz": 3201.0, "memory_max_mhz": 3201, "reasons": ["power cap"],
                     "temperature_max": 61, "power_w": 612.0, "power_limit_w": 700.0, "foreign_known": True,
                     "foreign": [{"pid": 4242, "memory": 2147483648}]}]
    second["gpu"] = [{"index": 1, "name": "broken record"}]  # another version's record: left out, not a crash
    report = markdown_report(doc)
    assert "## Conditions" in report
    [rows] = [t for t in tables(report) if t[0][0] == "test" and "GPUs" in t[0]]
    assert rows[0] == ["test", "variant", "client", "host", "GPUs", "disturbed"]
    assert len(rows) == 3  # the second cell recorded nothing that reads
    assert rows[2][2] == "client lag p50/p99/max 0.10/0.40/1.00 ms, 12% of a core"
    assert rows[2][3].startswith("server waited for a CPU 1% of the time, client 0%; 0.4 other runnable tasks on 64")
    assert rows[2][4] == ("GPU 1 (NVIDIA H200): SM 1980/1980 MHz, memory 3201/3201 MHz, 61 °C max, 612/700 W, "
                          "reasons: power cap; 1 other process(es) (pid 4242, 2.0 GiB)")
    assert rows[2][5] == "**another process on GPU 1: pid 4242 (2.0 GiB)** (the re-measure's conditions)"
    del again["client"], again["host"], again["gpu"]
    assert "## Conditions" not in markdown_report(doc)


def test_load_section_lists_concurrent_and_slo_cells_and_survives_partial_records() -> None:
    from pytest_sglang_perf.outputs.markdown_load import load_section

    one: dict[str, Any] = {"streams": 1, "rounds": None, "latency_percentiles": {}, "slo": None, "slo_attainment": None}
    cells: list[dict[str, Any]] = [
        {"test_id": "t.py::test_one", "variant": "v", "load": one, "summaries": {}},  # one stream, no SLO: not listed
        {"test_id": "t.py::test_failed", "variant": "v", "load": None},
        {"test_id": "t.py::test_slo", "variant": "v", "samples": [{}, {}],
         "load": {**one, "slo": {"ttft": 0.2}, "slo_attainment": 0.5,
                  "latency_percentiles": {"ttft": {"p50": 0.1, "p90": 0.2, "p99": 0.3}}},
         "summaries": {"output_throughput": {"median": 50.0}, "goodput": {"median": 1.25}}},
        {"test_id": "t.py::test_c16", "variant": "v", "summaries": None,
         "load": {"streams": 16, "rounds": 3, "slo": {"ttft": "fast"}, "slo_attainment": None}},
    ]
    lines = load_section(cells)
    rows = [line for line in lines if line.startswith("| `t.py")]
    assert [row.split(" | ")[0] for row in rows] == ["| `t.py::test_slo`", "| `t.py::test_c16`"]
    assert rows[0].endswith("| 1 x 2 | 50.0 tok/s | - | 100.0/200.0/300.0 ms | - | - | 1.25 req/s (50% met ttft <= "
                            "200 ms) |")
    assert rows[1].endswith("| 16 x 3 | - | - | - | - | - | - (? met ?) |")
    assert load_section(cells[:2]) == []
