"""The pieces of the pre-flight that `sglang-perf check` and the session share: the GPU count, the simulator's
knobs, the target GPUs, finding the configuration from a subdirectory, and what `sglang-perf run` executes."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from pytest_sglang_perf.cli import main as cli
from pytest_sglang_perf.config.discovery import find_config_dir, load_project_settings
from pytest_sglang_perf.config.settings import Settings, SimulateSettings, Variant
from pytest_sglang_perf.server.plan import plan_server
from pytest_sglang_perf.server.preflight import Finding, Level, check_plans, check_variant
from pytest_sglang_perf.server.target_gpus import TargetGpus, target_gpus
from pytest_sglang_perf.sglang_facts.gpus import find_gpu
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser
from pytest_sglang_perf.simulator.args.knob_check import without_knobs

H200 = "NVIDIA H200"
TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def _errors(args: list[str], gpus: TargetGpus) -> list[str]:
    return [f.message for f in check_variant("v", args, flag_table_parser(), gpus=gpus) if f.level is Level.ERROR]


# The GPU count ------------------------------------------------------------------------------------------------

def test_a_server_needing_more_gpus_than_the_host_shows_is_an_error() -> None:
    assert _errors(["--tp-size", "2"], TargetGpus((H200,), 1, "nvidia-smi")) == [
        "--tp-size 2 needs 2 GPUs for one server, but nvidia-smi shows 1 GPU on this host (NVIDIA H200); lower "
        "--tp-size, or run this variant on a host with 2 GPUs"]


def test_the_message_names_each_counting_flag_as_written() -> None:
    host = TargetGpus((H200, H200), 2, "nvidia-smi")
    assert _errors(["--tp", "2", "--pp-size", "1", "--pp-size", "2"], host) == [
        "--tp 2 x --pp-size 2 needs 4 GPUs for one server, but nvidia-smi shows 2 GPUs on this host (NVIDIA H200); "
        "lower --tp or --pp-size, or run this variant on a host with 4 GPUs"]


@pytest.mark.parametrize(("args", "gpus"), [
    (["--tp-size", "2"], TargetGpus((H200, H200), 2)),  # fits
    (["--tp-size", "2"], TargetGpus((H200,), None, "the simulator")),  # count unknown: not checked
    (["--tp-size", "2"], TargetGpus((), None)),  # no nvidia-smi (a CPU runner): not checked
    (["--tp-size", "16", "--nnodes", "2"], TargetGpus((H200,) * 8, 8)),  # multi-node: this host holds a share
    (["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], TargetGpus((H200, H200), 2)),  # deprecated: 2
])
def test_the_count_is_checked_only_when_known_and_on_one_host(args: list[str], gpus: TargetGpus) -> None:
    assert _errors(args, gpus) == []


# The simulator's knobs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "rest"), [
    (["--sim-gpu", "H200", "--tp-size", "2"], ["--tp-size", "2"]),
    (["--sim-gpu=H200", "--tp-size", "2"], ["--tp-size", "2"]),
    (["--sim-slowdwn", "0.2", "--random-seed", "0"], ["--random-seed", "0"]),  # unknown knobs go too
    (["--sim-slowdown", "-0.5", "--x"], ["--x"]),  # a negative number is a value
    (["--sim-gpu", "--tp-size", "2"], ["--tp-size", "2"]),  # no value: the next flag stays
])
def test_sglang_gets_the_command_line_without_knobs(args: list[str], rest: list[str]) -> None:
    assert without_knobs(args) == rest


def _settings(root: Path, *, sim: tuple[str, ...], variants: tuple[Variant, ...],
              env: dict[str, str] | None = None) -> Settings:
    (root / "model").mkdir(exist_ok=True)
    (root / "model" / "config.json").write_text(json.dumps(TINY_CONFIG))
    return Settings(source="pyproject.toml [tool.sglang_perf]", root=root, model="model", args=("--random-seed", "0"),
                    variants=variants, simulate=SimulateSettings(args=sim), env=env or {})


def test_simulated_variants_get_their_knobs_checked_with_where_each_is(tmp_path: Path) -> None:
    settings = _settings(tmp_path, sim=("--sim-slowdwn", "0.2"), variants=(
        Variant("ok", ("--sim-decode-tok-s", "100")), Variant("bad", ("--sim-noise", "2"))))
    plans = [plan_server(settings, variant, simulate=True) for variant in settings.variants]
    typo = "simulate.args: unknown knob --sim-slowdwn (did you mean --sim-slowdown?)"
    assert check_plans(plans, flag_table_parser()) == [
        Finding("ok", Level.ERROR, typo),
        Finding("bad", Level.ERROR, "variants.bad: invalid value '2' for --sim-noise: expected a number in [0, 1)"),
        Finding("bad", Level.ERROR, typo),
    ]


def test_a_knob_on_a_real_sglang_command_line_is_an_unknown_flag_with_the_fix(tmp_path: Path) -> None:
    settings = _settings(tmp_path, sim=(), variants=(Variant("a", ("--sim-slowdown", "0.2")),))
    [finding] = check_plans([plan_server(settings, settings.variants[0], simulate=False)], flag_table_parser())
    assert finding.message == (
        "unrecognized arguments: --sim-slowdown 0.2 (checked with the flag table of SGLang 0.5.23); --sim-slowdown "
        "is a knob of the plugin's simulator, not an SGLang flag: put it in simulate.args (used only with "
        "--sglang-simulate)")


# The target GPUs ----------------------------------------------------------------------------------------------

def test_the_simulated_gpu_is_what_the_simulator_process_sees(tmp_path: Path) -> None:
    def simulated(sim: tuple[str, ...], env: dict[str, str], environ: dict[str, str]) -> TargetGpus:
        settings = _settings(tmp_path, sim=sim, variants=(Variant("a"),), env=env)
        return target_gpus(settings, simulate=True, host=lambda: pytest.fail("nvidia-smi asked"), environ=environ)

    assert simulated(("--sim-gpu", "H200"), {"SGLANG_SIM_GPU": "B200"}, {}) == TargetGpus(("H200",), None,
                                                                                           "the simulator")
    assert simulated((), {"SGLANG_SIM_GPU": "B200"}, {"SGLANG_SIM_GPU": "A100"}).names == ("B200",)
    assert simulated((), {}, {"SGLANG_SIM_GPU": "A100"}).names == ("A100",)
    assert simulated((), {}, {}).names == (find_gpu().name,)


def test_without_the_simulator_the_host_gpus_and_their_count(tmp_path: Path) -> None:
    settings = _settings(tmp_path, sim=("--sim-gpu", "H200"), variants=(Variant("a"),))
    assert target_gpus(settings, simulate=False, host=lambda: (H200, H200)) == TargetGpus((H200, H200), 2)
    assert target_gpus(settings, simulate=False, host=tuple).count is None


# Finding the configuration ------------------------------------------------------------------------------------

def test_the_nearest_configuration_from_a_subdirectory_up_is_found(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.sglang_perf]\nmodel = "outer"\nbaseline_dir = "perf"\n')
    inner = tmp_path / "sub"
    (inner / "tests" / "deep").mkdir(parents=True)
    (inner / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")  # no [tool.sglang_perf]: go on up
    assert find_config_dir(inner / "tests" / "deep") == tmp_path
    settings = load_project_settings(inner / "tests" / "deep")
    assert settings is not None and settings.baseline_dir == tmp_path / "perf"

    (inner / "sglang-perf.toml").write_text('model = "inner"\n')
    assert find_config_dir(inner / "tests" / "deep") == inner


def test_no_configuration_anywhere_up(tmp_path: Path) -> None:
    if find_config_dir(tmp_path.parent) is not None:
        pytest.skip("a perf configuration above the temporary directory")
    assert find_config_dir(tmp_path) is None and load_project_settings(tmp_path) is None


# The command line ---------------------------------------------------------------------------------------------

def test_run_executes_a_fresh_pytest_with_the_simulator_when_there_is_no_gpu(
        capsys: pytest.CaptureFixture[str]) -> None:
    command = cli.pytest_command(["-q", "tests/perf"], real=False, has_gpu=lambda: False)
    assert command[1:] == ["-P", "-m", "pytest", "-q", "tests/perf", "--sglang-simulate"]
    assert "no GPU found (nvidia-smi): running on the simulator" in capsys.readouterr().err
    assert cli.pytest_command(["-q"], real=True, has_gpu=lambda: pytest.fail("not asked"))[-1] == \
        "--sglang-require-real"
    assert cli.pytest_command(["--sglang-simulate"], real=False,
                              has_gpu=lambda: pytest.fail("not asked"))[-1] == "--sglang-simulate"


def test_run_requires_real_sglang_with_real_and_on_a_gpu_host_unless_simulating() -> None:
    """What `sglang-perf run` tells its pytest (config/run_options.py RUN_COMMAND_ENV): a GPU host without SGLang
    fails with the install command instead of skipping every perf test and exiting 0."""
    assert cli.real_sglang_required(["-q"], real=True, has_gpu=lambda: pytest.fail("not asked")) == "real"
    assert cli.real_sglang_required(["tests/perf"], real=False, has_gpu=lambda: True) == "gpu-host"
    assert cli.real_sglang_required(["tests/perf"], real=False, has_gpu=lambda: False) is None
    assert cli.real_sglang_required(["--sglang-simulate"], real=False,
                                    has_gpu=lambda: pytest.fail("not asked")) is None


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"sglang-perf {metadata.version('pytest-sglang-perf')}\n"
