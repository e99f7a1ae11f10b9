"""`--sim-*` knobs: command line > SGLANG_SIM_* environment > default; bad values name their source."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from pytest_sglang_perf.simulator import main
from pytest_sglang_perf.simulator.args.faults import Faults
from pytest_sglang_perf.simulator.args.knobs import KNOB_SPECS, KnobError, Knobs, add_knob_arguments, resolve_knobs


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sim")
    add_knob_arguments(parser)
    return parser.parse_args(argv)


def test_defaults() -> None:
    knobs = resolve_knobs(_parse([]), {})
    assert knobs == Knobs()
    assert (knobs.decode_tok_s, knobs.ttft, knobs.accept_length) == (None, None, 3.0)  # None: the roofline model
    assert (knobs.noise, knobs.seed, knobs.boot_seconds, knobs.slowdown) == (0.0, 0, 0.5, 0.0)
    assert (knobs.gpu, knobs.load_seconds, knobs.capture_seconds, knobs.faults) == (
        "NVIDIA H100 80GB HBM3", None, None, Faults())


def test_spec_defaults_match_the_dataclass() -> None:
    assert {spec.name: spec.default for spec in KNOB_SPECS} == dataclasses.asdict(Knobs())


def test_env_beats_default() -> None:
    knobs = resolve_knobs(_parse([]), {"SGLANG_SIM_SLOWDOWN": "0.2", "SGLANG_SIM_DECODE_TOK_S": "500"})
    assert knobs.slowdown == pytest.approx(0.2) and knobs.decode_tok_s == 500
    assert knobs.time_scale == pytest.approx(1.2)


def test_cli_beats_env() -> None:
    knobs = resolve_knobs(_parse(["--sim-decode-tok-s", "250", "--sim-seed", "7"]),
                          {"SGLANG_SIM_DECODE_TOK_S": "500", "SGLANG_SIM_SEED": "3"})
    assert (knobs.decode_tok_s, knobs.seed) == (250, 7)


def test_empty_env_value_means_unset() -> None:
    assert resolve_knobs(_parse([]), {"SGLANG_SIM_TTFT": " "}).ttft is None


def test_gpu_and_fault_knobs() -> None:
    knobs = resolve_knobs(_parse(["--sim-gpu", "rtx a6000"]), {"SGLANG_SIM_FAULT": "die-after:2,no-usage"})
    assert knobs.gpu == "NVIDIA RTX A6000"
    assert knobs.faults == Faults(die_after=2, no_usage=True)


def test_unknown_gpu_lists_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse(["--sim-gpu", "V100"])
    assert "argument --sim-gpu: invalid value 'V100': unknown GPU 'V100'; known GPUs" in capsys.readouterr().err
    with pytest.raises(KnobError, match=r"SGLANG_SIM_GPU: unknown GPU 'K80'.*H100 SXM"):
        resolve_knobs(_parse([]), {"SGLANG_SIM_GPU": "K80"})


@pytest.mark.parametrize(("name", "value"), [
    ("SGLANG_SIM_SLOWDOWN", "fast"), ("SGLANG_SIM_DECODE_TOK_S", "0"), ("SGLANG_SIM_SEED", "1.5"),
    ("SGLANG_SIM_ACCEPT_LENGTH", "0.5"), ("SGLANG_SIM_NOISE", "-0.1"), ("SGLANG_SIM_LOAD_SECONDS", "-1"),
])
def test_bad_env_value_names_the_variable(name: str, value: str) -> None:
    with pytest.raises(KnobError, match=f"invalid value '{value}' for environment variable {name}: expected"):
        resolve_knobs(_parse([]), {name: value})


def test_bad_cli_value_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parse(["--sim-decode-tok-s", "-5"])
    assert exc.value.code == 2
    assert "argument --sim-decode-tok-s: invalid value '-5': expected a number > 0" in capsys.readouterr().err


def test_main_exits_2_on_bad_env(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SGLANG_SIM_SLOWDOWN", "lots")
    with pytest.raises(SystemExit) as exc:
        main(["--model-path", "/nonexistent"])
    assert exc.value.code == 2
    assert "environment variable SGLANG_SIM_SLOWDOWN" in capsys.readouterr().err
