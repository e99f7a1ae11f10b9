"""What a user reads, at each verbosity: a passing run fits a screen, -q is terse, -v shows each boot step, a
heartbeat while a boot step is silent, what a regression says (its short summary line, the closing hint), the
variants that errored, and where the servers' logs go."""

from __future__ import annotations

import json

import pytest
from perf_project import LOOSE, server_processes, write_project

THREE_TESTS = """
def test_a(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))

def test_b(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a B-tree in Python."))

def test_c(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a trie in Python."))
"""
ONE_TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"
SCREEN = 45
LOGS = ".pytest_cache/d/sglang-perf/logs"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A user's run in its own process, as on the command line."""
    return pytester.runpytest_subprocess(*args)


def _plugin_lines(result: pytest.RunResult) -> list[str]:
    """The lines the plugin writes itself (live, and its summary sections), not pytest's."""
    lines, inside = [], False
    for line in result.outlines:
        if line.startswith("="):
            inside = " sglang-perf" in line
        elif inside or line.startswith("sglang-perf:"):
            lines.append(line)
    return lines


@pytest.mark.slow
@pytest.mark.calm
def test_a_passing_run_fits_a_screen(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=STEADY, extra=LOOSE)  # no noise verdict on a busy machine
    pytester.makepyfile(test_perf=THREE_TESTS)
    _run(pytester, "--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=3)
    result = _run(pytester, "--sglang-simulate")
    result.assert_outcomes(passed=3)
    assert len(result.outlines) <= SCREEN, result.stdout.str()
    result.stdout.fnmatch_lines([
        f"sglang-perf: server logs: {LOGS}/*/ (the last 10 runs are kept)",
        "sglang-perf: [[]default[]] ready in * s (SIMULATED; graphs * s; config ok; log default.log)",
        "*= sglang-perf servers =*",
        "variant default (SIMULATED): effective configuration: ok (1 requested flag(s) verified against /server_info)",
        "(-v shows what each server ran and its startup facts)",
        "*= sglang-perf =*",
        "variant default (SIMULATED): 3 cells ok (18 metrics; -v shows every metric)",
        "sglang-perf: 3 cells: 3 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 0 stale, 0 updated, 0 errored "
        "(SIMULATED)",
        "*= 3 passed in *",
    ])
    output = result.stdout.str()
    for detail in ("] booting (", "loading weights", "server stopped", "still booting", "re-run with"):
        assert detail not in output
    assert output.count("effective configuration") == 1  # the full report once: in the servers section
    assert all(len(line) <= 120 for line in _plugin_lines(result) if not line.startswith("  test_perf.py::"))


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_quiet_says_only_what_failed_and_the_counts(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": [], "old_flag": ["--enforce-piecewise-cuda-graph"]}, request=STEADY)
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "-q")
    result.assert_outcomes(passed=1, errors=1)
    assert [line for line in result.outlines if line.startswith("sglang-perf: [")] == []  # no live boot line
    result.stdout.fnmatch_lines([
        "sglang-perf: pre-flight [[]old_flag[]] error: unrecognized arguments: --enforce-piecewise-cuda-graph*",
        "*= sglang-perf =*",
        "sglang-perf: 2 cells: 0 ok, 0 regressed, 0 inconclusive, 0 improved, 1 new, 0 stale, 0 updated, 1 errored "
        "(SIMULATED)",
        "sglang-perf: ERRORED, nothing measured: old_flag (pre-flight check failed)",
    ])
    output = result.stdout.str()
    for section in ("sglang-perf servers", "sglang-perf A/B", "sglang-perf roofline", "variant default"):
        assert section not in output
    # no cells table (a busy machine's low-power warning may still name a metric: it is one of the closing lines)
    assert not [line for line in result.outlines if line.split()[:2] == ["test", "metric"]]


def test_verbose_shows_each_boot_step_the_command_and_the_configuration_live(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=STEADY)
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "sglang-perf: [[]default[]] booting (launched: pid *, port *): *python* -m pytest_sglang_perf.simulator *",
        f"sglang-perf: [[]default[]] log: {pytester.path}/{LOGS}/*/default.log",
        "sglang-perf: [[]default[]] loading weights (avail mem=* GB) (* s)",
        "sglang-perf: [[]default[]] captured * graph (* s) (* s)",
        "sglang-perf: [[]default[]] ready in * s (http://127.0.0.1:*)",
        "sglang-perf: [[]default[]] effective configuration: ok (1 requested flag(s) verified against /server_info)",
        "sglang-perf: [[]default[]]   decode CUDA graph: full *",
        "*test_perf.py::test_p[[]default[]] PASSED*",
        "sglang-perf: [[]default[]] server stopped",
        "*= sglang-perf servers =*",
        "*= sglang-perf =*",
        "  test_perf.py::test_p  output_throughput *new",
        "*tpot*new",  # every metric
    ])


@pytest.mark.slow
def test_a_heartbeat_says_where_a_silent_boot_is(pytester: pytest.Pytester) -> None:
    """Weight loading takes 2.5 s without a log line; a heartbeat of 0.5 s says the boot is alive, and in which
    step."""
    sim = ["--sim-decode-tok-s", "2000", "--sim-ttft", "0.02", "--sim-boot-seconds", "3", "--sim-load-seconds", "2.5"]
    write_project(pytester, {"default": []}, request="max_tokens = 20\nrepeats = 1\nwarmup = 0\n", sim=sim)
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "--sglang-heartbeat", "0.5")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "sglang-perf: [[]default[]] still booting, * s in; * s since the last step: loading weights (avail mem=*",
        "sglang-perf: [[]default[]] ready in * s *",
    ])
    beats = [line for line in result.outlines if "still booting" in line]
    assert 2 <= len(beats) <= 8
    quiet = _run(pytester, "--sglang-simulate", "--sglang-heartbeat", "0.5", "-q")
    quiet.assert_outcomes(passed=1)
    assert "still booting" not in quiet.stdout.str()


def test_a_bad_heartbeat_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []})
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "--sglang-heartbeat", "soon")
    result.stderr.fnmatch_lines(["*--sglang-heartbeat: expected seconds >= 0 (0 turns it off), got 'soon'"])


@pytest.mark.slow
@pytest.mark.calm
def test_a_regression_says_what_regressed_and_how_to_go_on(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30% slower server: the short summary line names each regressed metric; the closing hint says how to
    investigate an unintended change and how to record an intended one."""
    write_project(pytester, {"default": []}, request=STEADY,
                  extra='[tool.sglang_perf.tolerance]\nttft = "90%"\ntpot = "90%"\ndecode_throughput = "90%"')
    pytester.makepyfile(test_perf=ONE_TEST)
    _run(pytester, "--sglang-simulate", "--sglang-update-baselines").assert_outcomes(passed=1)
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "0.3")
    monkeypatch.setenv("COLUMNS", "200")  # pytest cuts a short summary line at the terminal's width
    result = _run(pytester, "--sglang-simulate", "--sglang-results", "out/results.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_p[[]default[]] _*",
        "[[]default[]] regressed: output_throughput -??.?% (allowed -5.0%)",  # ~-23%; the format is the subject
        "sglang-perf: test_perf.py::test_p [[]default[]]: regressed (confirmed*) (SIMULATED)",
        "server: effective configuration: ok (1 requested flag(s) verified against /server_info)",
        "  startup: boot * s, load_weight * s, cuda graphs * s, *",
        f"  log: {LOGS}/*/default.log",
        "Not intended? Start with the server's log and findings above, and what it ran in the sglang-perf *",
        "Intended? Record the measured values as the new baseline:",
        "  pytest 'test_perf.py::test_p[[]default[]]' --sglang-simulate --sglang-update-baselines",
        "*= sglang-perf =*",
        "sglang-perf: 1 cell: 0 ok, 1 regressed, *",
        "sglang-perf: 1 regressed cell. Not intended? Investigate:",
        f"  server logs:   {LOGS}/*/ (a <variant>.log per variant)",
        "  what ran:      each variant's effective configuration, in the sglang-perf servers section above",
        "  every sample:  out/results.json; compare two runs: sglang-perf compare before.json after.json",
        "Intended? Record the new values: the command at the end of each failure, or re-run with "
        "--sglang-update-baselines",
        "*= short test summary info =*",
        "FAILED test_perf.py::test_p[[]default[]] - Failed: [[]default[]] regressed: output_throughput -2?.?% "
        "(allowed -5.0%)",
    ])
    output = result.stdout.str()
    assert "re-run with --sglang-update-baselines to record" not in output
    assert "  decode CUDA graph:" not in output.split("= sglang-perf servers =")[0]  # what ran: once, in the summary


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_errored_variants_are_counted_and_in_the_results_file(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"good": [], "old_flag": ["--enforce-piecewise-cuda-graph"],
                             "bad_algo": ["--speculative-algorithm", "MEDUSA"]}, request=STEADY)
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "--sglang-results", "results.json")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "sglang-perf: [[]bad_algo[]] boot FAILED: *",
        "sglang-perf: 3 cells: 0 ok, 0 regressed, 0 inconclusive, 0 improved, 1 new, 0 stale, 0 updated, 2 errored "
        "(SIMULATED)",
        "sglang-perf: ERRORED, nothing measured: old_flag (pre-flight check failed), bad_algo (boot failed)",
    ])
    doc = json.loads((pytester.path / "results.json").read_text())
    assert [cell["variant"] for cell in doc["cells"]] == ["good"]
    errored = {entry["variant"]: entry for entry in doc["errored"]}
    assert errored["old_flag"]["stage"] == "pre-flight"
    assert "--enforce-piecewise-cuda-graph" in errored["old_flag"]["reason"]
    assert errored["old_flag"]["tests"] == ["test_perf.py::test_p[old_flag]"]
    assert errored["bad_algo"]["stage"] == "boot" and errored["bad_algo"]["reason"].startswith("exited with code")
    assert errored["bad_algo"]["tests"] == ["test_perf.py::test_p[bad_algo]"]
    assert server_processes(pytester.path) == []


def test_logs_go_to_a_run_folder_in_pytests_cache_and_old_runs_are_pruned(pytester: pytest.Pytester) -> None:
    root = pytester.path / LOGS
    old = [root / f"20000101-0000{i:02d}-1" for i in range(12)]
    for folder in old:
        folder.mkdir(parents=True)
    (root / "notes").mkdir()
    write_project(pytester, {"default": []}, request="max_tokens = 20\nrepeats = 1\nwarmup = 0\n")
    pytester.makepyfile(test_perf=ONE_TEST)
    _run(pytester, "--sglang-simulate").assert_outcomes(passed=1)
    runs = sorted(p.name for p in root.iterdir() if p.name != "notes")
    assert len(runs) == 10 and runs[:9] == [p.name for p in old[3:]]  # the new run and the 9 newest old ones
    assert (root / runs[-1] / "default.log").is_file() and (root / "notes").is_dir()


# The cached log folder's twin (the same pruning): slow lane.
@pytest.mark.slow
def test_without_the_cache_logs_go_to_a_pruned_temp_folder(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))
    write_project(pytester, {"default": []}, request="max_tokens = 20\nrepeats = 1\nwarmup = 0\n")
    pytester.makepyfile(test_perf=ONE_TEST)
    result = _run(pytester, "--sglang-simulate", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    [run] = (pytester.path / "tmp").glob("pytest-sglang-perf-*/logs/*")
    assert (run / "default.log").is_file()
    result.stdout.fnmatch_lines([f"sglang-perf: server logs: tmp/pytest-sglang-perf-*/logs/{run.name}/ (the last 10 "
                                 "runs are kept)"])
    assert not (pytester.path / ".pytest_cache").exists()
