"""--sglang-reuse on the simulator, as a user iterates: a first run boots and keeps each variant's server; a second,
unchanged run boots nothing and measures at once; a changed variant boots alone and its old server stops; kept
servers stop when idle, on `sglang-perf stop`, and after their run was SIGKILLed; two runs never boot one server
twice nor measure on it at the same time. Every pytest run is a process of its own, as a user's (the servers outlive
it on purpose). The fast suite runs the iteration loop; the rest are slow (4-9 s each)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from perf_project import LOOSE, server_processes, write_project

from pytest_sglang_perf.cli.main import main as sglang_perf
from pytest_sglang_perf.server.kept import KeptServer, Registry

GONE_WITHIN = 20.0
"""Seconds for a stopped kept server's processes to be gone (a busy 2-core machine; the grace is 5 s)."""
TIMED_TEST = """
import json, os, time
from pathlib import Path

def test_one(sglang_perf):
    start = time.time()
    sglang_perf.check(sglang_perf.measure("Tell me about trees."))
    with Path("timeline.jsonl").open("a") as out:
        out.write(json.dumps({"pid": os.getpid(), "variant": sglang_perf.variant.name, "start": start,
                              "end": time.time(), "server": sglang_perf.server.pid}) + "\\n")
"""
COLLECTION_STAMP = """
import time
from pathlib import Path

def pytest_collection_finish(session):
    Path("collected.txt").write_text(repr(time.time()))
"""


@pytest.fixture
def state(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    """The kept servers' state folder of this test: every server left in it is stopped at the end, and none may be."""
    folder = pytester.path / "state"
    monkeypatch.setenv("SGLANG_PERF_STATE_DIR", str(folder))
    registry = Registry(folder / "servers")
    yield registry
    left = [(r.key, r.variant, r.pid) for r in registry.all()]
    sglang_perf(["stop", "--all", "--force"])
    _wait_gone(pytester.path)
    assert not server_processes(pytester.path), "a server of this test outlived it"
    assert not [entry for entry in left if _alive(entry[2])], left


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--sglang-simulate", "--sglang-reuse", *args)


def _booted(result: pytest.RunResult) -> list[str]:
    """The variants the run booted a server for (their `ready in` lines)."""
    return [line.split("]")[0].split("[")[-1] for line in result.outlines if "] ready in " in line]


def _attached(result: pytest.RunResult) -> list[str]:
    return [line.split("]")[0].split("[")[-1] for line in result.outlines if "] reused kept server " in line]


def _kept_one(pytester: pytest.Pytester, state: Registry) -> KeptServer:
    """A project of one variant `a`, run once with --sglang-reuse: its kept server's record."""
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_timed=TIMED_TEST)
    _run(pytester).assert_outcomes(passed=1)
    return _records(state)["a"]


def _records(registry: Registry) -> dict[str, KeptServer]:
    return {record.variant: record for record in registry.all()}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(path: Path, timeout: float = GONE_WITHIN) -> None:
    deadline = time.monotonic() + timeout
    while server_processes(path) and time.monotonic() < deadline:
        time.sleep(0.2)


def _wait_dead(pid: int, timeout: float) -> float:
    """Seconds until the process was gone; AssertionError when it outlived `timeout`."""
    start = time.monotonic()
    while _alive(pid):
        assert time.monotonic() - start < timeout, f"process {pid} still runs after {timeout:g} s"
        time.sleep(0.1)
    return time.monotonic() - start


def test_the_iteration_loop(pytester: pytest.Pytester, state: Registry) -> None:
    project = write_project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]})
    pytester.makeconftest(COLLECTION_STAMP)
    pytester.makepyfile(test_timed=TIMED_TEST)

    first = _run(pytester)
    first.assert_outcomes(passed=2)
    assert _booted(first) == ["a", "b"] and _attached(first) == []
    kept = _records(state)
    assert sorted(kept) == ["a", "b"] and all(_alive(r.pid) for r in kept.values())

    second = _run(pytester, "--sglang-results", "second.json", "--sglang-markdown", "second.md",
                  "--junitxml", "second.xml")
    second.assert_outcomes(passed=2)
    assert _booted(second) == [] and _attached(second) == ["a", "b"]
    timeline = [json.loads(line) for line in (pytester.path / "timeline.jsonl").read_text().splitlines()]
    collected = float((pytester.path / "collected.txt").read_text())
    first_measure = min(entry["start"] for entry in timeline[2:])
    assert 0 <= first_measure - collected < 1.0, f"measuring began {first_measure - collected:.2f} s after collection"
    assert {entry["server"] for entry in timeline[2:]} == {kept["a"].pid, kept["b"].pid}
    doc = json.loads((pytester.path / "second.json").read_text())
    assert all(cell["reused"].startswith("reused kept server ") for cell in doc["cells"])
    assert all("boot_seconds" not in cell["metrics"] for cell in doc["cells"])
    assert all(server["boot_seconds"] is None and server["reused"] for server in doc["servers"].values())
    second.stdout.fnmatch_lines(["variant a (SIMULATED)*(on a reused server)*"])
    markdown = (pytester.path / "second.md").read_text()
    assert "### Variant `a` (SIMULATED) (reused server)" in markdown
    said = f"Measured on a server an earlier run booted and kept (`--sglang-reuse`): reused kept server {kept['a'].key}"
    assert said in markdown
    junit = (pytester.path / "second.xml").read_text()
    assert junit.count('<property name="sglang_perf.reused_server" value="reused kept server ') == 2

    project.write_text(project.read_text().replace('b = ["--chunked-prefill-size", "4096"]',
                                                   'b = ["--chunked-prefill-size", "2048"]'))
    third = _run(pytester)
    third.assert_outcomes(passed=2)
    assert _booted(third) == ["b"] and _attached(third) == ["a"]
    third.stdout.fnmatch_lines(["*[[]b[]] kept server * stopped: command: +2048 -4096 changed*"])
    _wait_dead(kept["b"].pid, GONE_WITHIN)
    now = _records(state)
    assert now["a"].pid == kept["a"].pid and now["b"].pid != kept["b"].pid and _alive(now["b"].pid)


@pytest.mark.slow
def test_idle_timeout_stops_every_process(pytester: pytest.Pytester, state: Registry) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_timed=TIMED_TEST)
    _run(pytester, "--sglang-reuse-idle", "2").assert_outcomes(passed=1)
    record = _records(state)["a"]
    assert record.idle_timeout == 2 and _alive(record.pid) and record.keeper_pid is not None
    assert _alive(record.keeper_pid)
    waited = _wait_dead(record.pid, 2 + GONE_WITHIN)
    _wait_dead(record.keeper_pid, GONE_WITHIN)
    assert waited > 0.5 and not server_processes(pytester.path) and state.all() == []
    log = Path(record.log_path).read_text()
    assert re.search(r"stopping the kept server: idle for \d s \(no run used it; idle timeout 2 s\)", log), log


@pytest.mark.slow
def test_servers_and_stop_commands(pytester: pytest.Pytester, state: Registry,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    write_project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]})
    pytester.makepyfile(test_timed=TIMED_TEST)
    _run(pytester).assert_outcomes(passed=2)
    kept = _records(state)
    capsys.readouterr()
    assert sglang_perf(["servers"]) == 0
    listing = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in listing.splitlines()[1:-1]}
    for record in kept.values():
        assert rows[record.key][:4] == [record.key, record.variant, record.base_url, str(record.pid)]
    assert "(2 kept in " in listing and "GiB RSS" in listing and "stops after 15 min idle (SIMULATED)" in listing

    assert sglang_perf(["stop", kept["a"].key[:6]]) == 0
    assert f"kept server {kept['a'].key} (a) stopped" in capsys.readouterr().out
    assert not _alive(kept["a"].pid) and _alive(kept["b"].pid)
    assert sglang_perf(["stop", "nothing-here"]) == 1
    assert "no kept server 'nothing-here'" in capsys.readouterr().out
    assert sglang_perf(["stop", "--all"]) == 0
    _wait_dead(kept["b"].pid, GONE_WITHIN)
    assert sglang_perf(["servers"]) == 0 and "no kept server" in capsys.readouterr().out


HOLDING_TEST = """
import pathlib, time

def test_hold(sglang_perf):
    pathlib.Path("server.pid.tmp").write_text(str(sglang_perf.server.pid))
    pathlib.Path("server.pid.tmp").rename("server.pid")
    time.sleep(600)
"""


@pytest.mark.slow
def test_a_sigkilled_run_leaves_its_kept_server_to_its_idle_timeout(pytester: pytest.Pytester,
                                                                    state: Registry) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_hold=HOLDING_TEST)
    with (pytester.path / "pytest.out").open("wb") as out:
        inner = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate",
                                  "--sglang-reuse", "--sglang-reuse-idle", "3"], cwd=pytester.path, stdout=out,
                                 stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while not (pytester.path / "server.pid").exists():
            assert inner.poll() is None and time.monotonic() < deadline, (pytester.path / "pytest.out").read_text()
            time.sleep(0.2)
        pid = int((pytester.path / "server.pid").read_text())
        keeper = _records(state)["a"].keeper_pid
        assert keeper is not None
        time.sleep(4)  # longer than the idle timeout: a run that measures keeps its server
        assert _alive(pid)
    finally:
        inner.send_signal(signal.SIGKILL)
        inner.wait()
    killed = time.monotonic()
    time.sleep(1.5)
    assert _alive(pid), "a kept server must outlive a SIGKILLed run until its idle timeout"
    _wait_dead(pid, 3 + GONE_WITHIN)
    assert time.monotonic() - killed >= 2.5
    _wait_dead(keeper, GONE_WITHIN)  # it forgets the record once the tree is gone, then exits
    assert state.all() == []


@pytest.mark.slow
def test_two_runs_share_one_boot_and_measure_in_turn(pytester: pytest.Pytester, state: Registry) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_timed=TIMED_TEST)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--sglang-simulate", "--sglang-reuse"]
    outs = [pytester.path / f"run{i}.out" for i in range(2)]
    runs = []
    for out in outs:
        with out.open("wb") as handle:
            runs.append(subprocess.Popen(argv, cwd=pytester.path, stdout=handle, stderr=subprocess.STDOUT))
    codes = [run.wait(timeout=300) for run in runs]
    texts = [out.read_text() for out in outs]
    assert codes == [0, 0], texts
    boots = sum(text.count("] ready in ") for text in texts)
    assert boots == 1, texts
    spans = sorted((entry["start"], entry["end"], entry["server"]) for entry in map(
        json.loads, (pytester.path / "timeline.jsonl").read_text().splitlines()))
    assert len(spans) == 2 and spans[0][2] == spans[1][2]
    assert spans[0][1] <= spans[1][0], f"the two runs measured at the same time: {spans}"


@pytest.mark.slow
def test_recording_baselines_boots_fresh(pytester: pytest.Pytester, state: Registry) -> None:
    before = _kept_one(pytester, state)
    recording = _run(pytester, "--sglang-update-baselines")
    recording.assert_outcomes(passed=1)
    assert _booted(recording) == ["a"]
    recording.stdout.fnmatch_lines(["*kept server * not reused: recording baselines boots a fresh server*"])
    _wait_dead(before.pid, GONE_WITHIN)
    assert _records(state)["a"].pid != before.pid


@pytest.mark.slow
def test_a_run_that_needs_the_gpus_stops_an_idle_kept_server(pytester: pytest.Pytester, state: Registry,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]})
    pytester.makepyfile(test_timed=TIMED_TEST)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    locks = ("--sglang-gpu-lock-dir", str(pytester.path / "gpu-locks"))
    _run(pytester, *locks, "--sglang-variants", "a").assert_outcomes(passed=1)
    held = _records(state)["a"]
    assert held.gpus == ("0",)
    other = _run(pytester, *locks, "--sglang-variants", "b")
    other.assert_outcomes(passed=1)
    other.stdout.fnmatch_lines([f"*[[]b[]] kept server {held.key} (a) stopped: this run needs its GPUs 0*"])
    _wait_dead(held.pid, GONE_WITHIN)
    assert _records(state)["b"].gpus == ("0",)


@pytest.mark.slow
def test_a_server_variable_of_the_environment_is_part_of_the_key(pytester: pytest.Pytester, state: Registry,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _kept_one(pytester, state)
    monkeypatch.setenv("SGLANG_SIM_DECODE_TOK_S", "1500")  # the simulator reads it: another server
    again = _run(pytester)
    again.assert_outcomes(passed=1)
    assert _booted(again) == ["a"]
    again.stdout.fnmatch_lines(['*[[]a[]] kept server * stopped: inherited env: {} -> {"SGLANG_SIM_DECODE_TOK_S": '
                                '"1500"} changed*'])


@pytest.mark.slow
def test_a_gate_on_a_reused_server_compares_what_it_measured(pytester: pytest.Pytester, state: Registry) -> None:
    write_project(pytester, {"a": []}, extra=LOOSE)
    pytester.makepyfile(test_timed=TIMED_TEST)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)
    recorded = json.loads(next((pytester.path / "baselines").glob("*.json")).read_text())
    assert "boot_seconds" in json.dumps(recorded)
    gate = _run(pytester, "--sglang-require-baselines", "--sglang-results", "gate.json", "-v")
    gate.assert_outcomes(passed=1)
    assert _attached(gate) == ["a"]
    (cell,) = json.loads((pytester.path / "gate.json").read_text())["cells"]
    assert cell["verdict"] == "ok" and cell["reused"] and "boot_seconds" not in cell["metrics"]
    assert cell["metrics"]["output_throughput"]["verdict"] == "ok"


@pytest.mark.parametrize("given", ["0", "soon", "inf"])
def test_a_bad_idle_timeout_is_refused_naming_the_option(pytester: pytest.Pytester, given: str) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_timed=TIMED_TEST)
    result = pytester.runpytest("--sglang-simulate", "--sglang-reuse", "--sglang-reuse-idle", given)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--sglang-reuse-idle: expected seconds > 0, got '{given}'"])


@pytest.mark.slow
def test_a_keeper_stopped_by_hand_takes_its_server_with_it(pytester: pytest.Pytester, state: Registry) -> None:
    record = _kept_one(pytester, state)
    assert record.keeper_pid is not None
    os.kill(record.keeper_pid, signal.SIGTERM)
    _wait_dead(record.pid, GONE_WITHIN)
    _wait_dead(record.keeper_pid, GONE_WITHIN)
    assert state.all() == []
    assert "the keeper got SIGTERM: stopping the kept server" in Path(record.log_path).read_text()


@pytest.mark.slow
def test_xdist_workers_keep_and_reuse_their_variants_servers(pytester: pytest.Pytester, state: Registry) -> None:
    write_project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]})
    pytester.makepyfile(test_timed=TIMED_TEST)
    _run(pytester, "-n", "2").assert_outcomes(passed=2)
    kept = _records(state)
    again = _run(pytester, "-n", "2", "--sglang-results", "again.json")
    again.assert_outcomes(passed=2)
    cells = json.loads((pytester.path / "again.json").read_text())["cells"]
    assert sorted(cell["variant"] for cell in cells if cell["reused"]) == ["a", "b"]
    timeline = [json.loads(line) for line in (pytester.path / "timeline.jsonl").read_text().splitlines()]
    assert {entry["server"] for entry in timeline[2:]} == {kept["a"].pid, kept["b"].pid}
    assert len({entry["pid"] for entry in timeline[2:]}) == 2  # two workers, one variant each
