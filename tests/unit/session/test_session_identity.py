"""What a variant's server is and where its cells are filed (session/identity.py): the model and its config.json's
hash, the GPUs one server uses by its command line, the resolved args, and the baseline file key."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytest_sglang_perf.config.settings import Variant
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.session.identity import server_identity, server_place
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser

PARSER = flag_table_parser()
A6000 = "NVIDIA RTX A6000"


def plan(*args: str, model_path: str = "Qwen/Qwen3-8B", model_config: Path | None = None) -> ServerPlan:
    return ServerPlan(Variant("v", args), args, ("python", "-m", "sim", "--model-path", model_path, *args), {}, True,
                      None, False, model_config=model_config)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def write_config(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(text)
    return folder / "config.json"


def test_the_gpus_are_counted_from_the_command_line() -> None:
    """tp 2 x dp 2 is four GPUs of the named model, whatever the host has."""
    identity, label = server_identity(plan("--tp", "2", "--dp-size", "2"), PARSER, model="Qwen/Qwen3-8B",
                                      model_dir=None, gpu_name=A6000)
    assert identity.gpus == "4x NVIDIA RTX A6000"
    assert label == "4xRTX A6000"


def test_a_server_without_a_gpu_is_cpu() -> None:
    """No GPU name: `cpu` in the identity and in the label, whatever tp says."""
    identity, label = server_identity(plan("--tp-size", "2"), PARSER, model="m", model_dir=None, gpu_name=None)
    assert (identity.gpus, label) == ("cpu", "cpu")


def test_the_args_are_resolved_spelling_independently_without_secrets() -> None:
    """`--tp 2` and `--tensor-parallel-size 2` are the same server; an API key is never part of it."""
    short, _ = server_identity(plan("--tp", "2", "--api-key", "sk-secret"), PARSER, model="m", model_dir=None,
                               gpu_name=A6000)
    long, _ = server_identity(plan("--tensor-parallel-size", "2"), PARSER, model="m", model_dir=None,
                              gpu_name=A6000)
    assert short == long
    assert dict(short.args) == {"--tp-size": "2"}
    assert short.model == "m"


def test_the_model_config_hash_is_of_the_simulators_file_first(tmp_path: Path) -> None:
    """The config.json the simulator reads wins over the model folder's; the folder's is used without it."""
    simulated = write_config(tmp_path / "shipped", '{"model_type": "llama"}')
    folder = tmp_path / "local"
    local = write_config(folder, '{"model_type": "qwen3"}')
    with_file, _ = server_identity(plan(model_config=simulated), PARSER, model="m", model_dir=folder, gpu_name=None)
    without, _ = server_identity(plan(), PARSER, model="m", model_dir=folder, gpu_name=None)
    assert with_file.model_config == digest(simulated)
    assert without.model_config == digest(local)
    assert digest(simulated) != digest(local)


def test_no_config_file_anywhere_is_no_hash(tmp_path: Path) -> None:
    """A hub id without a local folder, or a folder without config.json: model_config is None."""
    for model_dir in (None, tmp_path):
        identity, _ = server_identity(plan(), PARSER, model="m", model_dir=model_dir, gpu_name=None)
        assert identity.model_config is None


def test_the_place_key_names_simulation_gpus_and_model(tmp_path: Path) -> None:
    """`simulated-2xrtx-a6000__qwen-qwen3-8b` on the simulator, the same without the prefix on a GPU runner."""
    tp2 = plan("--tp-size", "2")
    simulated = server_place(tp2, PARSER, model="Qwen/Qwen3-8B", root=tmp_path, gpu_name=A6000, simulated=True)
    real = server_place(tp2, PARSER, model="Qwen/Qwen3-8B", root=tmp_path, gpu_name=A6000, simulated=False)
    cpu = server_place(tp2, PARSER, model="Qwen/Qwen3-8B", root=tmp_path, gpu_name=None, simulated=False)
    assert simulated.key == "simulated-2xrtx-a6000__qwen-qwen3-8b"
    assert real.key == "2xrtx-a6000__qwen-qwen3-8b"
    assert cpu.key == "cpu__qwen-qwen3-8b"
    assert simulated.identity.gpus == "2x NVIDIA RTX A6000"


def test_the_place_reads_the_model_folder_the_command_line_names(tmp_path: Path) -> None:
    """`--model-path models/m`, relative to the rootdir, is the folder whose config.json is hashed."""
    config = write_config(tmp_path / "models" / "m", '{"model_type": "llama", "hidden_size": 64}')
    place = server_place(plan(model_path="models/m"), PARSER, model="org/m", root=tmp_path, gpu_name=None,
                         simulated=False)
    assert place.identity.model_config == digest(config)
    assert place.identity.model == "org/m" and place.key == "cpu__org-m"
