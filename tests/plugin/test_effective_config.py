"""What each variant's server really ran, as a user meets it: warnings, strict mode, startup facts, boot gating.

Every test runs a user project in pytester against real simulator processes (`--sglang-simulate`). The simulator
resolves flags as SGLang 0.5.23 does: a multimodal model outside the breakable-CUDA-graph allow-list gets its
prefill CUDA graph switched off, with SGLang's log line saying why, unless `--cuda-graph-backend-prefill` is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from perf_project import VL_CONFIG, fast_sim, server_processes, use_model_config, write_project

from pytest_sglang_perf.wrapping import wrap_lines

QUICK = "max_tokens = 20\nrepeats = 2\nwarmup = 0\n"
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"
"""Longer requests: timer and HTTP noise small enough that a 30% slowdown stands out of the noise band."""
BCG_REASON = "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph."
SWITCHED_OFF = f"SGLang switched off the prefill CUDA graph (on by default) because: {BCG_REASON}"
BREAKABLE = ["--cuda-graph-backend-prefill", "breakable"]

# Two tests per variant; each leaves a marker file when its body runs (strict mode must not run it).
TEST_FILE = """
from pathlib import Path

def _ran(sglang_perf, name):
    Path(f"ran-{name}-{sglang_perf.variant.name}").touch()

def test_a(sglang_perf):
    _ran(sglang_perf, "a")
    sglang_perf.check(sglang_perf.measure("hello"))

def test_b(sglang_perf):
    _ran(sglang_perf, "b")
    sglang_perf.check(sglang_perf.measure("hi there"))
"""

ONE_TEST = """
def test_p(sglang_perf):
    sglang_perf.check(sglang_perf.measure("hello"))
"""


StrictBy = Callable[[pytest.Pytester, pytest.MonkeyPatch], list[str]]
"""Turns strict mode on one way (command line, ini, environment) and returns the extra command-line args."""


def _vl_project(pytester: pytest.Pytester, variants: dict[str, list[str]], *, request: str = QUICK,
                extra: str = "") -> Path:
    """A project serving the multimodal VL_CONFIG model."""
    path = write_project(pytester, variants, extra=extra, request=request, sim=fast_sim())
    use_model_config(pytester, VL_CONFIG)
    return path


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A user's run in its own process (as on the command line), server logs kept in the project."""
    return pytester.runpytest_subprocess("--sglang-simulate", "--sglang-log-dir", "logs", *args)


def _line_of(path: Path, prefix: str) -> int:
    """1-based number of the first line of `path` starting with `prefix`."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line.startswith(prefix))


def _ran(pytester: pytest.Pytester) -> set[str]:
    return {p.name for p in pytester.path.glob("ran-*")}


def _only_baseline(pytester: pytest.Pytester) -> dict[str, Any]:
    [path] = (pytester.path / "baselines").glob("*.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# 1-3: a multimodal model whose prefill CUDA graph SGLang switches off ------------------------------------


def test_default_prefill_graph_on_multimodal_model_warns_with_sglangs_reason(pytester: pytest.Pytester) -> None:
    project = _vl_project(pytester, {"default": []})
    pytester.makepyfile(test_p=TEST_FILE)
    result = _run(pytester)
    result.assert_outcomes(passed=2, warnings=2)
    line = _line_of(project, "default = ")
    result.stdout.fnmatch_lines([
        "sglang-perf: [[]default[]] ready in * s (SIMULATED; graphs * s; config DIFFERS (1 finding(s)); log "
        "default.log)",
        "*= warnings summary =*",
        "test_p.py::test_a[[]default[]]",
        "test_p.py::test_b[[]default[]]",
        f"  {project}:{line}: SGLangConfigWarning: variant 'default': {SWITCHED_OFF}",
        "*= sglang-perf servers =*",
        "variant default (SIMULATED): effective configuration DIFFERS from the request (1 finding(s))",
        "  prefill CUDA graph: disabled (not captured)",
        "  decode CUDA graph: full (captured in *",
        *wrap_lines([f"  WARNING: {SWITCHED_OFF}"]),
        "  startup: boot * s, load_weight * s, cuda graphs * s, KV cache * tokens*",
        "  runtime: prefill batches 0/*, decode batches * ran with a graph (SGLang's batch log lines)",
    ])
    assert _ran(pytester) == {"ran-a-default", "ran-b-default"}


def _strict_by_cli(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return ["--sglang-strict-flags"]


def _strict_by_ini(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    project = pytester.path / "pyproject.toml"
    project.write_text(project.read_text() + "[tool.pytest.ini_options]\nsglang_strict_flags = true\n")
    return []


def _strict_by_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("SGLANG_PERF_STRICT_FLAGS", "1")
    return []


@pytest.mark.parametrize("strict", [
    pytest.param(_strict_by_cli, id="cli"),
    # The ini and environment twins of every option share one resolver (pytest_plugin/options.py): their runs are in
    # the slow lane.
    pytest.param(_strict_by_ini, id="ini", marks=pytest.mark.slow),
    pytest.param(_strict_by_env, id="env", marks=pytest.mark.slow),
])
def test_strict_flags_fail_the_variant_unrun_with_the_reason_and_the_fix(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, strict: StrictBy) -> None:
    _vl_project(pytester, {"default": [], "breakable": BREAKABLE})
    pytester.makepyfile(test_p=TEST_FILE)
    result = _run(pytester, *strict(pytester, monkeypatch))
    result.assert_outcomes(passed=2, failed=2, warnings=0)
    result.stdout.fnmatch_lines([
        "*_ test_a[[]default[]] _*",
        "sglang-perf: variant 'default': the server did not run what was requested (--sglang-strict-flags):",
        f"  {SWITCHED_OFF}",
        "Fix the variant's flags (or drop --sglang-strict-flags to only warn).",
        "*_ test_b[[]default[]] _*",
        "sglang-perf: variant 'default': the server did not run what was requested*",
    ])
    result.stdout.fnmatch_lines(["FAILED test_p.py::test_a[[]default[]]*", "FAILED test_p.py::test_b[[]default[]]*"])
    assert _ran(pytester) == {"ran-a-breakable", "ran-b-breakable"}, "a failed variant's test body ran"


@pytest.mark.slow
def test_explicit_breakable_prefill_graph_is_ok_even_strict(pytester: pytest.Pytester) -> None:
    _vl_project(pytester, {"breakable": BREAKABLE})
    pytester.makepyfile(test_p=TEST_FILE)
    result = _run(pytester, "--sglang-strict-flags", "-v")  # -v: what each server ran, also when it is clean
    result.assert_outcomes(passed=2, warnings=0)
    result.stdout.fnmatch_lines([
        "*= sglang-perf servers =*",
        "variant breakable (SIMULATED): effective configuration: ok (2 requested flag(s) verified against "
        "/server_info)",
        "  prefill CUDA graph: breakable (captured in * s, tokens * sizes))",
    ])
    # every prefill batch (warmup and 2 x 2 measured requests at least) ran with the prefill graph
    result.stdout.re_match_lines([r"  runtime: prefill batches ([1-9]\d*)/\1, decode batches (\d+)/\2 ran with "])
    output = result.stdout.str()
    assert "SGLangConfigWarning" not in output
    assert "WARNING:" not in output
    assert BCG_REASON not in output


# 4: a variant whose only difference the server ran anyway -------------------------------------------------


@pytest.mark.slow
def test_variant_that_changes_nothing_warns_but_strict_does_not_fail_it(pytester: pytest.Pytester) -> None:
    project = write_project(pytester, {"base": [], "same": BREAKABLE}, request=QUICK)
    pytester.makepyfile(test_p=ONE_TEST)
    result = _run(pytester, "--sglang-strict-flags", "-v")
    result.assert_outcomes(passed=2, warnings=1)
    duplicate = ("measures nothing new: its only difference from variant 'base' (--cuda-graph-backend-prefill) "
                 "did not change what the server ran")
    result.stdout.fnmatch_lines([
        "*= warnings summary =*",
        "test_p.py::test_p[[]same[]]",
        f"  {project}:{_line_of(project, 'same = ')}: SGLangConfigWarning: variant 'same': {duplicate}",
        "*= sglang-perf servers =*",
        "variant base (SIMULATED): effective configuration: ok (1 requested flag(s) verified against /server_info)",
        "variant same (SIMULATED): effective configuration: as requested, but the same as another variant's",
        "  prefill CUDA graph: breakable (captured in *",
        *wrap_lines([f"  WARNING: {duplicate}"]),
    ])


# 5-6: startup facts in results and baselines; the CUDA-graph capture time is gated -------------------------


@pytest.mark.slow  # a few seconds of simulated boots: the slow lane (CI runs it)
def test_startup_facts_in_results_and_baselines(pytester: pytest.Pytester) -> None:
    capture, boot = 0.4, 1.0
    write_project(pytester, {"a": []}, request=QUICK, sim=fast_sim(boot_seconds=boot, capture_seconds=capture))
    pytester.makepyfile(test_p=ONE_TEST)
    result = _run(pytester, "--sglang-update-baselines", "--sglang-results", "out.json")
    result.assert_outcomes(passed=1)

    server = json.loads((pytester.path / "out.json").read_text())["servers"]["a"]
    startup = server["startup"]
    assert capture <= startup["graph_capture_seconds"] < capture + 0.3
    assert sorted(c["graph"] for c in startup["captures"]) == ["target decode", "target prefill"]
    assert sum(c["seconds"] for c in startup["captures"]) == pytest.approx(startup["graph_capture_seconds"], abs=0.02)
    assert 0 < startup["load_weight"] < boot
    assert startup["kv_cache_tokens"] == startup["max_total_num_tokens"] > 0
    assert capture < server["boot_seconds"] < boot + 5
    assert server["effective"]["verdict"] == "ok"
    assert [f["flag"] for f in server["effective"]["flags"]] == ["--random-seed"]
    assert sum(server["graph_use"].values()) > 0

    [cell] = json.loads((pytester.path / "out.json").read_text())["cells"]
    assert cell["startup"] == startup

    entry = _only_baseline(pytester)["entries"]["test_p.py::test_p"]["a"]
    assert entry["startup"] == startup
    assert entry["ran"] == server["effective"]["ran"]
    assert entry["ran"]["prefill CUDA graph"].startswith("breakable (captured in ")
    assert entry["metrics"]["graph_capture_seconds"]["median"] == startup["graph_capture_seconds"]
    assert "boot_seconds" in entry["metrics"]


# Real SGLang on CPU shows it too (tests/sglang_cpu: 'not captured (cpu; planned full)'): slow lane.
@pytest.mark.slow
def test_a_graph_the_server_did_not_capture_is_not_reported_as_running(pytester: pytest.Pytester) -> None:
    """On CPU SGLang's plan still says decode `full`; the report says what ran: no graph was captured."""
    write_project(pytester, {"gpu": [], "cpu": ["--device", "cpu"]}, request=QUICK, sim=fast_sim())
    pytester.makepyfile(test_p=ONE_TEST)
    _run(pytester, "--sglang-results", "out.json").assert_outcomes(passed=2)
    servers = json.loads((pytester.path / "out.json").read_text())["servers"]
    assert servers["cpu"]["effective"]["ran"]["decode CUDA graph"] == "not captured (cpu; planned full)"
    assert servers["cpu"]["effective"]["ran"]["prefill CUDA graph"].startswith("disabled")  # opt-in off CUDA
    assert servers["gpu"]["effective"]["ran"]["decode CUDA graph"].startswith("full (captured in ")


@pytest.mark.slow
@pytest.mark.calm
def test_slower_graph_capture_fails_the_boot_time_check(pytester: pytest.Pytester) -> None:
    """Baseline capture 1 s; 3 s fails graph_capture_seconds (default tolerance 50%); 1 s again passes."""
    loose = "\n".join(f'{m} = "90%"' for m in ("output_throughput", "decode_throughput", "ttft", "tpot"))
    extra = f"[tool.sglang_perf.tolerance]\n{loose}"

    def run(capture_seconds: float, *args: str) -> pytest.RunResult:
        sim = fast_sim(boot_seconds=1.5, capture_seconds=capture_seconds)
        write_project(pytester, {"a": []}, extra=extra, request=QUICK, sim=sim)
        return _run(pytester, *args)

    pytester.makepyfile(test_p=ONE_TEST)
    run(1, "--sglang-update-baselines").assert_outcomes(passed=1)
    slower = run(3, "--sglang-results", "slower.json")
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines([
        "*test_p.py::test_p [[]a[]]: regressed (confirmed*) (SIMULATED)",
        "*metric*baseline*measured*change*re-measured*allowed*p*detectable*verdict",
        "*graph_capture_seconds*1.0? s*3.0? s*+*%*+50.0%*-*-*REGRESSED",
        "*startup: boot * s, load_weight * s, cuda graphs 3.0? s*",
    ])
    [cell] = json.loads((pytester.path / "slower.json").read_text())["cells"]
    assert {m for m, check in cell["metrics"].items() if check["verdict"] == "regressed"} == {"graph_capture_seconds"}
    run(1).assert_outcomes(passed=1)
    assert server_processes(pytester.path) == []


# 7-8: the API key stays secret; a regression report says what the server ran -------------------------------


# test_secrets.py keeps the key out of every output in the fast suite; this twin adds the flags: slow lane.
@pytest.mark.slow
def test_api_key_stays_out_of_every_output_while_flags_are_verified(pytester: pytest.Pytester) -> None:
    secret = "sk-effective-7d1e0c"
    write_project(pytester, {"a": ["--api-key", secret, "--max-running-requests", "8"]}, request=QUICK)
    pytester.makepyfile(test_p=ONE_TEST)
    result = _run(pytester, "--sglang-update-baselines", "--sglang-results", "out.json", "-v")
    result.assert_outcomes(passed=1, warnings=0)
    result.stdout.fnmatch_lines([
        "variant a (SIMULATED): effective configuration: ok (2 requested flag(s) verified against /server_info)",
        "  max running requests: 8 per DP rank",
    ])
    results = (pytester.path / "out.json").read_text()
    effective = json.loads(results)["servers"]["a"]["effective"]
    assert {f["flag"]: f["status"] for f in effective["flags"]} == {"--random-seed": "ok",
                                                                    "--max-running-requests": "ok"}
    # The server's log: SGLang prints its server_args (api_key in clear) there; masked once the server stopped.
    outputs = {
        "terminal": result.stdout.str() + result.stderr.str(),
        "results": results,
        "log file names": " ".join(p.name for p in (pytester.path / "logs").iterdir()),
        **{p.name: p.read_text() for p in (pytester.path / "logs").iterdir()},
        **{p.name: p.read_text() for p in (pytester.path / "baselines").glob("*.json")},
    }
    assert len(outputs) == 5
    for name, text in outputs.items():
        assert secret not in text, f"the API key leaked into {name}"


@pytest.mark.slow
@pytest.mark.calm
def test_regression_report_shows_the_servers_effective_configuration(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30% slower server: its failure report says what the server ran and what its boot cost."""
    # A tight throughput tolerance: the ~23% slowdown regresses, and holds when re-measured.
    tight = '[tool.sglang_perf.tolerance]\noutput_throughput = "2%"'
    _vl_project(pytester, {"default": []}, request=STEADY, extra=tight)
    pytester.makepyfile(test_p=ONE_TEST)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1, warnings=1)
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "0.3")
    result = _run(pytester)
    result.assert_outcomes(failed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "*_ test_p[[]default[]] _*",
        "*test_p.py::test_p [[]default[]]: regressed (confirmed*) (SIMULATED)",
        "*output_throughput*REGRESSED",
        "server: effective configuration DIFFERS from the request (1 finding(s))",
        *wrap_lines([f"  WARNING: {SWITCHED_OFF}"]),
        "  startup: boot * s, load_weight * s, cuda graphs * s, KV cache * tokens*",
        "  log: logs/default.log",
        "Not intended? Start with the server's log and findings above, and what it ran in the sglang-perf *",
        "Intended? Record the measured values as the new baseline:",
        "  pytest 'test_p.py::test_p[[]default[]]' --sglang-simulate --sglang-update-baselines",
    ])
    failure = result.stdout.str().split("= sglang-perf servers =")[0]
    assert "  prefill CUDA graph: disabled" not in failure  # what ran in full: once, in the servers section


# 9: a server whose configuration cannot be read ---------------------------------------------------------


@pytest.mark.parametrize("strict", [pytest.param(False, marks=pytest.mark.slow), True])
def test_a_server_without_server_info_is_unverified(pytester: pytest.Pytester, strict: bool) -> None:
    """A server that answers /server_info with 404 (here: the simulator's `no-server-info` fault, like a proxy in
    front of SGLang): nothing can be verified; a warning that says so, and a failure in strict mode."""
    project = write_project(pytester, {"hidden": []}, request=QUICK, sim=fast_sim())
    hidden = 'hidden = {args = [], env = {SGLANG_SIM_FAULT = "no-server-info"}}'
    project.write_text(project.read_text().replace("hidden = []", hidden))
    pytester.makepyfile(test_p=ONE_TEST)
    result = _run(pytester, *(["--sglang-strict-flags"] if strict else []))
    unverified = "the effective configuration could not be read: GET http://127.0.0.1:*/server_info answered HTTP 404"
    if strict:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*variant 'hidden': the server did not run what was requested*",
                                     f"  {unverified}"])
    else:
        result.assert_outcomes(passed=1, warnings=1)
        line = _line_of(project, "hidden = ")
        result.stdout.fnmatch_lines([f"  {project}:{line}: SGLangConfigWarning: variant 'hidden': {unverified}"])
    result.stdout.fnmatch_lines(["variant hidden (SIMULATED): effective configuration DIFFERS*",
                                 "  startup: boot * s, load_weight * s*"])
