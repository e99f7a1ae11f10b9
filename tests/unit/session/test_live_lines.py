"""What the session says while it runs (session/live.py), at each of pytest's verbosities."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_records import booted, variant_run

from pytest_sglang_perf.server.startup import StartupFacts
from pytest_sglang_perf.session.live import Live

WIDTH = 120 - len("sglang-perf: ")
LONG = " ".join(f"word{i:02d}" for i in range(40))
"""40 words of 6 characters and their spaces: 279 characters, three lines at 107."""


def live(verbosity: int, *, simulated: bool = True, heartbeat: float = 15.0) -> tuple[Live, list[str]]:
    heard: list[str] = []
    return Live(heard.append, verbosity=verbosity, heartbeat=heartbeat, simulated=simulated), heard


@pytest.mark.parametrize(("verbosity", "shown"), [(-1, False), (0, False), (1, True), (2, True)])
def test_a_detail_is_said_only_with_v(verbosity: int, shown: bool) -> None:
    """detail() lines are the -v ones."""
    speaker, heard = live(verbosity)
    speaker.detail("the exact command")
    assert heard == (["the exact command"] if shown else [])


@pytest.mark.parametrize(("verbosity", "shown"), [(-1, False), (0, True), (1, True)])
def test_a_note_is_said_except_with_q(verbosity: int, shown: bool) -> None:
    """note() lines are the default verbosity's."""
    speaker, heard = live(verbosity)
    speaker.note("waiting for GPUs")
    assert heard == (["waiting for GPUs"] if shown else [])


def test_a_long_note_is_wrapped_to_fit_the_prefixed_terminal_line() -> None:
    """Wrapped so that `sglang-perf: ` plus each line fits 120 columns, continuations indented, no word lost."""
    speaker, heard = live(0)
    speaker.note(LONG)
    assert len(heard) == 3
    assert all(len(line) <= WIDTH for line in heard)
    assert heard[0].startswith("word00 ") and all(line.startswith("  word") for line in heard[1:])
    assert " ".join(heard).split() == LONG.split()


@pytest.mark.parametrize("verbosity", [-1, 0])
def test_a_finding_is_said_at_every_verbosity_wrapped(verbosity: int) -> None:
    """A pre-flight finding is said even with -q, wrapped as a note is."""
    speaker, heard = live(verbosity)
    speaker.finding(LONG)
    assert len(heard) == 3 and " ".join(heard).split() == LONG.split()


def test_a_finding_is_said_whole_with_v() -> None:
    """With -v a finding is one line, however long."""
    speaker, heard = live(1)
    speaker.finding(LONG)
    assert heard == [LONG]


@pytest.mark.parametrize(("verbosity", "heartbeat", "beating"), [(-1, 15.0, False), (0, 15.0, True),
                                                                  (1, 15.0, True), (0, 0.0, False)])
def test_a_boot_has_a_heartbeat_except_with_q_or_none_asked(verbosity: int, heartbeat: float,
                                                            beating: bool) -> None:
    """boot_progress() hands the session's verbosity and heartbeat to the boot's live lines."""
    speaker, _ = live(verbosity, heartbeat=heartbeat)
    assert speaker.boot_progress("default").beating is beating


def test_a_booted_server_is_one_line_at_the_default_verbosity(tmp_path: Path) -> None:
    """`[name] ready in ...`: the boot seconds, the graphs' capture, the configuration in a word and the log."""
    run = booted(variant_run("tp2"), tmp_path / "tp2.log", boot_seconds=61.53)
    run.startup = StartupFacts(graph_capture_seconds=12.4)
    for simulated, tag in ((True, "SIMULATED; "), (False, "")):
        speaker, heard = live(0, simulated=simulated)
        speaker.booted(run)
        assert heard == [f"[tp2] ready in 61.5 s ({tag}graphs 12.40 s; config ok; log tp2.log)"]


def test_a_remote_server_is_named_by_its_url(tmp_path: Path) -> None:
    """A server attached, not booted: its url and configuration, no boot seconds."""
    run = booted(variant_run("remote", url="http://gpu-host:30000"), tmp_path / "remote.log")
    speaker, heard = live(0)
    speaker.booted(run)
    assert heard == ["[remote] remote server http://gpu-host:30000 (SIMULATED; config ok)"]


def test_with_v_a_booted_server_shows_its_effective_configuration(tmp_path: Path) -> None:
    """Each line of the effective configuration, tagged with the variant."""
    run = booted(variant_run("default"), tmp_path / "default.log")
    speaker, heard = live(1)
    speaker.booted(run)
    assert heard == ["[default] effective configuration: ok (0 requested flag(s) verified against /server_info)",
                     "[default]   CUDA graphs: decode on"]


def test_nothing_is_said_of_a_boot_with_q_or_of_a_server_never_inspected(tmp_path: Path) -> None:
    """-q says no boot line; a run without configuration or server says nothing at any verbosity."""
    quiet, heard = live(-1)
    quiet.booted(booted(variant_run(), tmp_path / "default.log"))
    for verbosity in (0, 1):
        speaker, more = live(verbosity)
        speaker.booted(variant_run())
        heard += more
    assert heard == []
