"""Read-only views of the session's servers (report/servers.py): the variants that never ran, the results file's
`servers` records and what a failing test's report says about its server."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_records import RAN, booted, variant_run

from pytest_sglang_perf.gate.errored import BOOT, PREFLIGHT, ErroredVariant
from pytest_sglang_perf.report.servers import errored_variants, server_failure_lines, server_records
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.startup import StartupFacts

BATCHES = ("[2026-11-29 10:00:01] Prefill batch, #new-seq: 1, #new-token: 20, cuda graph: True\n"
           "[2026-11-29 10:00:02] Decode batch, #running-req: 1, #token: 41, cuda graph: True\n"
           "[2026-11-29 10:00:03] Decode batch, #running-req: 1, #token: 81, cuda graph: False\n")
OK = "effective configuration: ok (0 requested flag(s) verified against /server_info)"


def boot_error(name: str, reason: str) -> BootError:
    return BootError(name=name, command="python -m sim", reason=reason, log_path=Path(f"{name}.log"))


def test_errored_variants_are_those_whose_server_never_ran(tmp_path: Path) -> None:
    """Pre-flight errors (joined) and a failed first boot are errored, with the variant's tests; others are not."""
    rejected = variant_run("sbo", tests=["t.py::a[sbo]", "t.py::b[sbo]"])
    rejected.preflight_errors = ["--enable-single-batch-overlap crashes on SM90", "tp 8 needs 8 GPUs"]
    failed = variant_run("bad", tests=["t.py::a[bad]"])
    failed.boot_error = boot_error("bad", "exited with code 1 during boot")
    rebooted = booted(variant_run("later"), tmp_path / "later.log")  # ran once, then a later boot failed
    rebooted.boot_error = boot_error("later", "exited with code 1 during boot")
    fine = booted(variant_run("default"), tmp_path / "default.log")
    assert errored_variants([rejected, failed, rebooted, fine, variant_run("unused")]) == [
        ErroredVariant("sbo", PREFLIGHT, "--enable-single-batch-overlap crashes on SM90; tp 8 needs 8 GPUs",
                       ("t.py::a[sbo]", "t.py::b[sbo]")),
        ErroredVariant("bad", BOOT, "exited with code 1 during boot", ("t.py::a[bad]",)),
    ]


def test_a_booted_servers_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its effective configuration, boot seconds, startup facts, graph use from its log, GPUs and worker."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    log = tmp_path / "tp2.log"
    log.write_text(BATCHES)
    run = booted(variant_run("tp2"), log, boot_seconds=42.0, env={"CUDA_VISIBLE_DEVICES": "2,3"})
    run.startup = StartupFacts(graph_capture_seconds=3.5)
    [(name, record)] = server_records([run, variant_run("never_booted")]).items()
    assert name == "tp2"
    assert record["effective"]["verdict"] == "ok" and record["effective"]["ran"] == dict(RAN)
    assert (record["boot_seconds"], record["url"], record["cuda_visible_devices"], record["worker"]) == (
        42.0, None, "2,3", "gw1")
    assert record["startup"]["graph_capture_seconds"] == 3.5
    assert record["graph_use"] == {"prefill_true": 1, "prefill_false": 0, "decode_true": 1, "decode_false": 1}


def test_a_remote_servers_record_has_no_boot_and_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server attached at a url: its url, no boot seconds, no graph use (its log is not this run's)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    log = tmp_path / "remote.log"
    log.write_text(BATCHES)
    record = server_records([booted(variant_run("remote", url="http://gpu:30000"), log)])["remote"]
    assert (record["boot_seconds"], record["url"], record["graph_use"], record["worker"]) == (
        None, "http://gpu:30000", None, None)


def test_a_server_without_a_log_file_has_no_graph_use(tmp_path: Path) -> None:
    """The log is read when it exists; a missing one is no graph use, never an error."""
    record = server_records([booted(variant_run(), tmp_path / "gone.log")])["default"]
    assert record["graph_use"] is None and record["startup"] is None


def test_a_failing_tests_report_names_the_servers_verdict_startup_and_log(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdict, the boot costs and the log, shown relative to the working directory."""
    monkeypatch.chdir(tmp_path)
    run = booted(variant_run("tp2"), tmp_path / "logs" / "tp2.log", boot_seconds=61.53)
    run.startup = StartupFacts(load_weight=40.1)
    assert server_failure_lines(run) == [f"server: {OK}", "  startup: boot 61.5 s, load_weight 40.10 s",
                                         f"  log: {Path('logs') / 'tp2.log'}"]


def test_a_remote_servers_failure_lines_have_no_startup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A remote server's boot was not observed: no startup line, even with facts recorded; a log outside the
    working directory is shown whole."""
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    run = booted(variant_run("remote", url="http://gpu:30000"), tmp_path / "remote.log")
    run.startup = StartupFacts(load_weight=40.1)
    assert server_failure_lines(run) == [f"server: {OK}", f"  log: {tmp_path / 'remote.log'}"]


def test_a_server_never_inspected_adds_nothing_to_a_failure() -> None:
    """No configuration or no server: no lines."""
    assert server_failure_lines(variant_run()) == []
