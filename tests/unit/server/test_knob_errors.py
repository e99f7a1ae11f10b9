"""The simulator's own errors say "simulator" and put the cause first: `knob_errors` (a pure check of a command
line's `--sim-*` knobs), the simulator's exit on a bad knob or SGLANG_SIM_* variable, and the line a failed boot's
report shows as its cause (server/startup.py `boot_failure_cause`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang_perf.server.failure_cause import boot_failure_cause
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.simulator import main
from pytest_sglang_perf.simulator.args.knobs import KNOB_SPECS, knob_errors

MODEL = ["--model-path", "Qwen/Qwen3-8B"]


def test_good_knobs_and_other_flags_give_no_error() -> None:
    assert knob_errors([*MODEL, "--tp-size", "2", "--sim-slowdown", "0.2", "--sim-gpu=H200",
                        "--sim-fault", "die-after:3,no-usage", "--sim-seed", "7", "--sim-slowdown", "-0.5"]) == []
    assert knob_errors([*MODEL, "--enforce-piecewise-cuda-graph", "--sim", "1"]) == []  # SGLang's parser's business


@pytest.mark.parametrize(("typo", "meant"), [
    ("--sim-slowdwn", "--sim-slowdown"), ("--sim-gpus", "--sim-gpu"), ("--sim-decode-toks", "--sim-decode-tok-s"),
    ("--sim-boot-second", "--sim-boot-seconds"), ("--sim-gp", "--sim-gpu"),
])
def test_an_unknown_knob_names_the_closest_one(typo: str, meant: str) -> None:
    assert knob_errors([*MODEL, typo, "1"]) == [f"unknown knob {typo} (did you mean {meant}?)"]
    assert knob_errors([f"{typo}=1"]) == [f"unknown knob {typo} (did you mean {meant}?)"]


def test_an_unknown_knob_far_from_any_lists_them_all() -> None:
    [message] = knob_errors(["--sim-xyzzy", "1"])
    assert message == f"unknown knob --sim-xyzzy (known knobs: {', '.join(spec.flag for spec in KNOB_SPECS)})"


def test_bad_values_say_what_is_expected() -> None:
    *numbers, gpu, fault = knob_errors(["--sim-slowdown", "abc", "--sim-noise=1.5", "--sim-gpu", "V100",
                                        "--sim-fault", "boom"])
    assert numbers == ["invalid value 'abc' for --sim-slowdown: expected a number > -1",
                       "invalid value '1.5' for --sim-noise: expected a number in [0, 1)"]
    assert gpu.startswith("invalid value 'V100' for --sim-gpu: unknown GPU 'V100'; known GPUs (from gpus.json): ")
    assert fault.startswith("invalid value 'boom' for --sim-fault: unknown fault 'boom'; expected one of: ")


def test_a_knob_without_its_value() -> None:
    assert knob_errors(["--sim-ttft", "--tp-size", "2", "--sim-seed"]) == [
        "--sim-ttft needs a value (NUMBER): time to first token (the prefill), seconds; overrides the roofline model",
        "--sim-seed needs a value (INT): seed of the noise and of the simulated content",
    ]


def _run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    code = exc.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err.splitlines()


def test_the_simulator_exits_2_with_the_cause_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_main([*MODEL, "--sim-slowdwn", "0.2", "--tp-size", "2"], capsys)
    assert code == 2
    assert err[0] == "simulator: unknown knob --sim-slowdwn (did you mean --sim-slowdown?)"
    assert err[1:] == ["simulator: the knobs are listed under 'simulator knobs' by "
                       "`python -m pytest_sglang_perf.simulator --help`"]


def test_a_bad_environment_variable_is_the_simulators_error(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "lots")
    code, err = _run_main(MODEL, capsys)
    assert code == 2
    assert err == ["simulator: invalid value 'lots' for environment variable SGLANG_SIM_SLOWDOWN: expected a number "
                   "> -1 (e.g. SGLANG_SIM_SLOWDOWN=0.0); unset it to use the default"]


def test_sglangs_own_flag_errors_stay_sglangs(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_main([*MODEL, "--enforce-piecewise-cuda-graph"], capsys)
    assert code == 2
    assert err[0].startswith("usage: sglang serve ")
    assert err[-1] == "sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph"


USAGE = [f"                    [--option-{i} VALUE]" for i in range(28)]


@pytest.mark.parametrize(("tail", "cause"), [
    (["simulator: unknown knob --sim-slowdwn (did you mean --sim-slowdown?)", "simulator: the knobs are listed"],
     "simulator: unknown knob --sim-slowdwn (did you mean --sim-slowdown?)"),
    (["usage: sglang serve [-h] --model-path MODEL_PATH", *USAGE,
      "sglang serve: error: unrecognized arguments: --tp-sizee 2"],
     "sglang serve: error: unrecognized arguments: --tp-sizee 2"),
    (["Traceback (most recent call last):", '  File "x.py", line 1, in <module>',
      "OSError: Can't load the configuration of 'org/M'"], "OSError: Can't load the configuration of 'org/M'"),
    (["[2026-01-01 00:00:00] Scheduler hit an exception: Traceback (most recent call last):",
      "ValueError: first", "  more", "torch.OutOfMemoryError: CUDA out of memory."],
     "torch.OutOfMemoryError: CUDA out of memory."),
    (["[2026-01-01 00:00:00] Load weight begin.", "Killed"], None),
    ([], None),
])
def test_the_cause_of_a_failed_boot(tail: list[str], cause: str | None) -> None:
    assert boot_failure_cause(tail) == cause


def test_the_boot_report_shows_the_cause_above_the_tail(tmp_path: Path) -> None:
    tail = ("usage: sglang serve [-h] --model-path MODEL_PATH", *USAGE,
            "sglang serve: error: unrecognized arguments: --tp-sizee 2")
    error = BootError(name="v", command="python -m sglang.launch_server", reason="exited with code 2 during boot",
                      log_path=tmp_path / "v.log", exit_code=2, log_tail=tail, phase="launched")
    lines = error.report().splitlines()
    assert lines[:3] == ["SGLang server 'v' failed to boot: exited with code 2 during boot",
                         "  cause:      sglang serve: error: unrecognized arguments: --tp-sizee 2",
                         "  command:    python -m sglang.launch_server"]
    assert lines[-1] == "    | sglang serve: error: unrecognized arguments: --tp-sizee 2"
    quiet = BootError(name="v", command="c", reason="r", log_path=tmp_path / "v.log", log_tail=("Killed",))
    assert not any(line.startswith("  cause:") for line in quiet.report().splitlines())
