"""The session's boots (session/boots.py), the parts that need no server process: a failed boot's report with its
hints, a failed boot never retried, and a stop that gives the GPUs back."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_records import variant_run

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.server.gpu_claims import claim_gpus
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.logdirs import RunLogs
from pytest_sglang_perf.server.target_gpus import TargetGpus
from pytest_sglang_perf.session.boots import SessionBoots
from pytest_sglang_perf.session.gpus import SessionGpus
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.roofline import SessionRoofline
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def boots(tmp_path: Path) -> SessionBoots:
    settings = Settings("test", tmp_path, "org/m")
    live = Live(lambda line: None, verbosity=0, heartbeat=0, simulated=True)
    gpus = SessionGpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path / "locks"), 0.0, flag_table_parser, live)
    return SessionBoots(settings, simulate=True, logs=RunLogs(tmp_path / "logs", None), live=live, gpus=gpus,
                        roofline=SessionRoofline(settings, TargetGpus(), simulate=True), parser=flag_table_parser,
                        targets=TargetGpus, runs={})


def error(tail: tuple[str, ...], log_path: Path) -> BootError:
    return BootError(name="v", command="python -m sim --model-path org/m", reason="exited with code 1 during boot",
                     log_path=log_path, exit_code=1, log_tail=tail, phase="loading weights")


def test_a_failed_boots_report_ends_with_the_hints_it_matches(tmp_path: Path) -> None:
    """The error's report, its cause and tail, then one `hint:` line per SGLang failure the tail matches."""
    report = boots(tmp_path).report(error(("loading...", OOM), tmp_path / "v.log"))
    lines = report.split("\n")
    assert lines[:8] == [
        "SGLang server 'v' failed to boot: exited with code 1 during boot",
        f"  cause:      {OOM}",
        "  command:    python -m sim --model-path org/m",
        "  exit code:  1",
        "  last phase: loading weights",
        f"  log file:   {tmp_path / 'v.log'}",
        "  last 2 log lines:",
        "    | loading...",
    ]
    assert lines[8] == f"    | {OOM}"
    assert len(lines) == 10 and lines[9].startswith("hint: out of GPU memory: lower")


def test_an_unknown_failure_gets_no_hint(tmp_path: Path) -> None:
    """A tail that matches no known failure: the report alone, ending with the tail."""
    report = boots(tmp_path).report(error(("ValueError: something new",), tmp_path / "v.log"))
    assert "hint:" not in report
    assert report.endswith("  last 1 log lines:\n    | ValueError: something new")


def test_a_failed_boot_is_raised_again_and_never_retried(tmp_path: Path) -> None:
    """A variant whose boot failed fails its later tests with the same error; nothing is started."""
    run = variant_run()
    failed = error((), tmp_path / "v.log")
    run.boot_error = failed
    with pytest.raises(BootError) as raised:
        boots(tmp_path).boot(run)
    assert raised.value is failed
    assert (run.process, run.server, run.claim) == (None, None, None)
    assert not (tmp_path / "logs").exists()


def test_stopping_a_run_releases_its_gpu_claim(tmp_path: Path) -> None:
    """stop() with no process still gives the GPUs back: another claim can take them."""
    run = variant_run()
    run.claim = claim_gpus(("0",), 1, tmp_path / "locks", timeout=0)
    boots(tmp_path).stop(run)
    assert run.claim is None
    again = claim_gpus(("0",), 1, tmp_path / "locks", timeout=0)
    assert again.gpus == ("0",)
    again.release()
