"""The verdicts a user meets, each from a real run against the simulator: `stale` for every kind of change,
`inconclusive` (a regression that does not hold when re-measured), --sglang-require-baselines,
--sglang-fail-inconclusive, the adaptive plan, a baseline over several boots and the A/B section."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest
from perf_project import LOOSE, TINY_CONFIG, server_processes, use_model_config, write_project

from pytest_sglang_perf.cli import main as cli
from pytest_sglang_perf.session.baselines import NOT_WRITTEN

TEST_FILE = """
import json, os

def test_p(sglang_perf):
    options = json.loads(os.environ.get("PERF_OPTIONS", "{}"))
    prompt = os.environ.get("PERF_PROMPT", "Write a red-black tree in Python.")
    sglang_perf.check(sglang_perf.measure(prompt, **options))
"""
STEADY = "max_tokens = 200\nrepeats = 3\nwarmup = 1\n"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--sglang-simulate", "--sglang-results", "results.json", *args)


def _cells(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads((pytester.path / "results.json").read_text())["cells"]
    return cells


def _said(result: pytest.RunResult, pattern: str) -> bool:
    """Whether the output says `pattern` (fnmatch), its lines joined again where the plugin wrapped them."""
    return fnmatch.fnmatch(" ".join(line.strip() for line in result.outlines) + " ", f"* {pattern} *")


def _baseline_files(pytester: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in (pytester.path / "baselines").glob("*.json"))


@pytest.fixture
def recorded(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with one variant whose cell has a baseline."""
    write_project(pytester, {"default": ["--max-running-requests", "8"]}, request=STEADY, extra=LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)
    return pytester


REQUEST_CHANGES = [
    ({"PERF_PROMPT": "Write a B-tree."}, "prompt changed (hash * -> *)"),
    ({"PERF_OPTIONS": '{"max_tokens": 128}'}, "max_tokens 200 -> 128"),
    ({"PERF_OPTIONS": '{"temperature": 0.0}'}, "temperature 0.6 -> 0.0"),
    ({"PERF_OPTIONS": '{"seed": 7}'}, "seed 0 -> 7"),
    ({"PERF_OPTIONS": '{"ignore_eos": false}'}, "ignore_eos true -> false"),
]
NOT_COMPARABLE = "the baseline is not comparable (recorded for something else)"


@pytest.mark.slow
def test_a_changed_request_is_stale_and_names_the_change(recorded: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for change, expected in REQUEST_CHANGES:
        with monkeypatch.context() as env:
            for name, value in change.items():
                env.setenv(name, value)
            result = _run(recorded)
        result.assert_outcomes(passed=1)  # not gated, but loudly so
        assert _said(result, f"test_perf.py::test_p: {NOT_COMPARABLE}: {expected}"), result.stdout.str()
        result.stdout.fnmatch_lines([
            "*1 cell: 0 ok, 0 regressed, 0 inconclusive, 0 improved, 0 new, 1 stale, 0 updated*",
            "*1 cell(s) NOT GATED, no comparable baseline (1 stale); --sglang-require-baselines fails them",
        ])
        assert [cell["verdict"] for cell in _cells(recorded)] == ["stale"]
    monkeypatch.setenv("PERF_OPTIONS", '{"max_tokens": 128}')
    gate = _run(recorded, "--sglang-require-baselines")
    gate.assert_outcomes(failed=1)
    gate.stdout.fnmatch_lines([f"*{NOT_COMPARABLE}: max_tokens 200 -> 128", "*--sglang-update-baselines"])


@pytest.mark.slow
def test_a_changed_server_model_or_gpu_count_is_stale(recorded: pytest.Pytester) -> None:
    project = recorded.path / "pyproject.toml"
    original = project.read_text()

    def stale_because(args: str, *expected: str) -> None:
        """Each change is named, whole (a long list wraps between changes), in the summary and the results file."""
        project.write_text(original.replace('default = ["--max-running-requests", "8"]', f"default = {args}"))
        result = _run(recorded)
        result.assert_outcomes(passed=1)
        assert _said(result, f"{NOT_COMPARABLE}: {'; '.join(expected)}"), result.stdout.str()
        [cell] = _cells(recorded)
        assert len(cell["stale"]) == len(expected)
        assert all(fnmatch.fnmatch(text, change) for text, change in zip(cell["stale"], expected, strict=True))

    stale_because('["--max-running-requests", "16"]', "--max-running-requests 8 -> 16")
    stale_because('["--max-running-requests", "8", "--tp-size", "2"]',
                  "the baseline was recorded as simulated-1x*", "GPUs 1x * -> 2x *", "--tp-size 1 -> 2")
    # The same value in another spelling (argparse's unique prefix) runs the same server: compared, not stale.
    project.write_text(original.replace('"--max-running-requests", "8"', '"--max-running-req", "8"'))
    _run(recorded).assert_outcomes(passed=1)
    assert [cell["stale"] for cell in _cells(recorded)] == [[]]
    project.write_text(original)
    use_model_config(recorded, {**TINY_CONFIG, "num_hidden_layers": int(TINY_CONFIG["num_hidden_layers"]) + 1})
    assert _said(_run(recorded), f"{NOT_COMPARABLE}: model config.json * -> *")
    use_model_config(recorded, TINY_CONFIG)
    [name] = _baseline_files(recorded)
    path = recorded.path / "baselines" / name
    data = json.loads(path.read_text())
    del data["entries"]["test_perf.py::test_p"]["default"]["identity"]
    path.write_text(json.dumps(data))
    assert _said(_run(recorded), f"{NOT_COMPARABLE}: the baseline was recorded without the cell's identity*")


def test_a_tp_size_2_variant_files_its_baselines_as_2_gpus(recorded: pytest.Pytester) -> None:
    [before] = _baseline_files(recorded)
    assert before.startswith("simulated-1x")
    write_project(recorded, {"default": ["--max-running-requests", "8", "--tp-size", "2"]}, request=STEADY)
    _run(recorded, "--sglang-update-baselines").assert_outcomes(passed=1)
    assert [name[:12] for name in _baseline_files(recorded)] == ["simulated-1x", "simulated-2x"]


def test_require_baselines_fails_a_new_cell(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=STEADY)
    pytester.makepyfile(test_perf=TEST_FILE)
    result = _run(pytester, "--sglang-require-baselines")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_perf.py::test_p [[]default[]]: new (no baseline recorded for this cell)*"])
    assert server_processes(pytester.path) == []


@pytest.mark.slow
@pytest.mark.calm
def test_a_regression_that_does_not_hold_is_inconclusive(recorded: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The three measured requests (after one warmup) run 1.5x slower, the re-measure runs normally: a transient
    slowdown, as on a busy machine. The test passes, saying so; --sglang-fail-inconclusive fails it. The latencies
    get a wide band: a 20 ms simulated TTFT moves by a busy CI's milliseconds, and only output_throughput is judged."""
    write_project(recorded, {"default": ["--max-running-requests", "8"]}, request=STEADY,
                  extra='[tool.sglang_perf.tolerance]\nttft = "200%"\ntpot = "200%"\n'
                        '[tool.sglang_perf.gate]\nconfirm = "same-server"\n')  # a fresh boot would count from 0
    monkeypatch.setenv("SGLANG_SIM_FAULT", "slow-after:1:1.5:3")
    result = _run(recorded)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*1 cell: 0 ok, 0 regressed, 1 inconclusive*",
        "*1 inconclusive cell(s) passed*--sglang-fail-inconclusive fails them",
    ])
    [cell] = _cells(recorded)
    first, again = cell["metrics"]["output_throughput"], cell["confirmation"]["metrics"]["output_throughput"]
    assert (first["verdict"], again["verdict"]) == ("inconclusive", "ok")
    assert first["change"] < -0.2 and len(cell["confirmation"]["samples"]) == 3
    strict = _run(recorded, "--sglang-fail-inconclusive")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([
        "*: inconclusive (the regression did not hold when re-measured on the same server) (SIMULATED)",
        "*metric*baseline*measured*change*re-measured*allowed*p*detectable*verdict",
    ])


@pytest.mark.slow
@pytest.mark.calm
def test_the_adaptive_plan_measures_until_decided(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clear regression is decided in the first round; a noisy server needs more requests, never more than the
    maximum."""
    # 400 tok/s: steps of 2.5 ms, so the server's pacing (and its noise), not its per-chunk overhead, sets the time
    sim = ["--sim-decode-tok-s", "400", "--sim-ttft", "0.02", "--sim-boot-seconds", "0.3"]
    # the throughputs decide; a 20 ms TTFT moves by a busy CI's milliseconds
    latency_band = '[tool.sglang_perf.tolerance]\nttft = "500%"\ntpot = "500%"\n'
    write_project(pytester, {"default": []}, request='max_tokens = 60\nrepeats = "auto"\nmax_repeats = 8\n', sim=sim,
                  extra=latency_band)
    pytester.makepyfile(test_perf=TEST_FILE)
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)
    recorded = len(_cells(pytester)[0]["samples"])  # until a later run could detect a change of the tolerance
    assert 3 <= recorded <= 8
    with monkeypatch.context() as env:
        env.setenv("SGLANG_SIM_SLOWDOWN", "1.0")  # twice as slow
        _run(pytester).assert_outcomes(failed=1)
    [cell] = _cells(pytester)
    assert len(cell["samples"]) == 3 and cell["verdict"] == "regressed"
    assert len(cell["confirmation"]["samples"]) == 3  # the re-measure: a fixed plan of the first one's size
    monkeypatch.setenv("SGLANG_SIM_NOISE", "0.15")  # 15% per request (seeded: the same draws in every run)
    monkeypatch.setenv("SGLANG_SIM_SEED", "5")
    _run(pytester, "--sglang-update-baselines").assert_outcomes(passed=1)
    assert 3 < len(_cells(pytester)[0]["samples"]) <= 8
    _run(pytester).assert_outcomes(passed=1)
    assert 3 < len(_cells(pytester)[0]["samples"]) <= 8


@pytest.mark.slow
def test_a_baseline_over_several_boots_keeps_the_boot_spread(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=STEADY, extra=LOOSE)
    pytester.makepyfile(test_perf=TEST_FILE)
    record = _run(pytester, "--sglang-update-baselines", "--sglang-boots", "2")
    record.assert_outcomes(passed=1)
    record.stdout.fnmatch_lines(["*[[]default[]] recording baselines: boot 2 of 2*",
                                 "*[[]default[]] recorded 1 baseline(s) over 2 boots in *"])
    [name] = _baseline_files(pytester)
    entry = json.loads((pytester.path / "baselines" / name).read_text())["entries"]["test_perf.py::test_p"]["default"]
    assert [boot["samples"] for boot in entry["boots"]] == [3, 3] and len(entry["samples"]) == 6
    assert all(boot["boot_seconds"] > 0 for boot in entry["boots"])
    assert entry["metrics"]["boot_seconds"]["n"] == 2
    _run(pytester).assert_outcomes(passed=1)
    assert {check["method"] for check in _cells(pytester)[0]["metrics"].values()} == {"boots"}
    assert server_processes(pytester.path) == []


@pytest.mark.slow
def test_a_failed_extra_boot_records_nothing_and_fails_the_run(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"default": []}, request=STEADY)
    # After the first boot's measurement the model folder loses its config.json: the second boot fails.
    pytester.makepyfile(test_perf=TEST_FILE + "    os.remove('model/config.json')\n")
    result = _run(pytester, "--sglang-update-baselines", "--sglang-boots", "2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*ERROR: variant 'default': baselines NOT recorded: boot 2 of 2 failed: *"])
    assert _baseline_files(pytester) == []
    # The results file offers nothing to `sglang-perf baseline accept` either, and counts nothing recorded.
    assert [(cell["entry"], cell["withheld"]) for cell in _cells(pytester)] == [(None, NOT_WRITTEN)]
    assert json.loads((pytester.path / "results.json").read_text())["baselines"]["created"] == []
    assert server_processes(pytester.path) == []


@pytest.mark.slow
@pytest.mark.calm
def test_the_ab_section_and_the_compare_command(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = write_project(pytester, {"default": [], "slow": ["--max-running-requests", "8"]}, request=STEADY)
    slowed = 'slow = {args = ["--max-running-requests", "8"], env = {SGLANG_SIM_SLOWDOWN = "0.3"}}'
    path.write_text(path.read_text().replace('slow = ["--max-running-requests", "8"]', slowed))
    pytester.makepyfile(test_perf=TEST_FILE)
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*sglang-perf A/B*",
        "*against variant 'default'*(SIMULATED)",
        "test_perf.py::test_p",
        "  slow vs default: output_throughput -2?.?% [[]-*%, -*%[]] significant: worse",
    ])
    monkeypatch.chdir(pytester.path)
    assert cli.main(["compare", "results.json", "--reference", "default"]) == 0
    assert "slow vs default: output_throughput" in capsys.readouterr().out
    (pytester.path / "results.json").rename(pytester.path / "before.json")
    path.write_text(path.read_text().replace(slowed, 'slow = ["--max-running-requests", "8"]'))
    _run(pytester).assert_outcomes(passed=2)
    assert cli.main(["compare", "before.json", "results.json"]) == 0
    out = capsys.readouterr().out
    assert "  slow: output_throughput +" in out and "significant: better" in out
