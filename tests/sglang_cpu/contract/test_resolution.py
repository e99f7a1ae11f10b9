"""The simulator's startup against SGLang 0.5.23's own argument resolution (`prepare_server_args` +
`ServerArgs.resolve_once()`, what `python -m sglang.launch_server` runs before it starts anything).

Combinations SGLang rejects only at resolution (a partial speculative triple, an unknown algorithm, encoder
disaggregation for a text model) must stop the simulator too, with exit code 1 and the same last line as SGLang's
traceback. Combinations SGLang accepts must resolve to the same record (`resolved_dict()`, which `server_args=` and
`/server_info` show): the same fields, and the same values except the ones listed below with the reason.

SGLang resolves here with `--device cpu` (no GPU on this machine); the simulator resolves for the GPU it simulates.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RunScript = Callable[..., Any]
SEED_MATRIX = ("--tp-size", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--random-seed", "0")

DEVICE_DEPENDENT = {
    "attention_backend": "SGLang picks torch_native on CPU; on a GPU its choice depends on the GPU and model, the "
                         "simulator leaves it unset",
    "sampling_backend": "pytorch on CPU, flashinfer on CUDA (platform_hook.py); the simulator leaves it unset",
    "mm_feature_transport": "'cpu' on a CPU device (serving_hook.py); the simulator leaves it unset",
    "chunked_prefill_size": "sized from the accelerator's memory (memory_hook.py); the simulator sizes for 80 GB",
    "mem_fraction_static": "sized from the accelerator's memory (memory_hook.py); the simulator sizes for 80 GB",
    "cuda_graph_config": "CUDA-graph sizes follow GPU memory; the simulator's plan is for 80 GB",
    "disable_overlap_schedule": "speculative decoding on CPU turns the overlap scheduler off "
                                "(speculative_hook.py::_disable_overlap_schedule_for_cpu)",
}
NOT_MODELLED = {
    "boundary_reduction": "derived from the model's HF config (boundary_reduction.py::model_boundary_reduction)",
    "speculative_moe_runner_backend": "MoE runner selection (overrides.py), not simulated",
    "expert_distribution_recorder_buffer_size": "expert-distribution metrics hook (parallel_hook.py), not simulated",
}
RANDOM = {"random_seed": "drawn at random when --random-seed is not given"}
EXEMPT = {**DEVICE_DEPENDENT, **NOT_MODELLED, **RANDOM}


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]
    error: str | None
    """SGLang's last traceback line, or None when it resolves."""


CASES = (
    Case("seed-matrix", SEED_MATRIX, None),
    Case("seed-prefill-graph", (*SEED_MATRIX, "--cuda-graph-backend-prefill", "breakable"), None),
    Case("seed-single-batch-overlap", (*SEED_MATRIX, "--enable-single-batch-overlap"), None),
    Case("nccl-nvls-deprecated-graph-flag", ("--enable-nccl-nvls", "--disable-cuda-graph"), None),
    Case("model-only", (), None),
    Case("nextn-auto-params", ("--speculative-algorithm", "NEXTN"), None),
    Case("eagle-topk-4-no-draft-tokens", ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                                          "--speculative-eagle-topk", "4"), None),
    Case("eagle-max-running", ("--speculative-algorithm", "eagle", "--max-running-requests", "16"), None),
    Case("ngram", ("--speculative-algorithm", "NGRAM"), None),
    Case("steps-without-topk", ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"),
         "TypeError: '>' not supported between instances of 'NoneType' and 'int'"),
    Case("topk-without-steps", ("--speculative-algorithm", "NEXTN", "--speculative-eagle-topk", "1"),
         "AssertionError"),
    Case("draft-tokens-without-steps", ("--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4"),
         "AssertionError"),
    Case("unknown-algorithm", ("--speculative-algorithm", "medusa"), "ValueError: Unknown speculative algorithm name: "
                                                                      "MEDUSA"),
    Case("language-only-text-model", ("--language-only",),
         "ValueError: Model type LlamaForCausalLM is not supported for encoder disaggregation. Supported "
         "architectures: Qwen2VL, Qwen3VL, Qwen3.5, InternS2, Qwen2Audio, Qwen2.5Omni, Dots3-Note, Kimi, MiMoV2, "
         "GLM5Next, MiniMax-M3, MuseSpark."),
    Case("encoder-and-language-only", ("--encoder-only", "--language-only"),
         "ValueError: Cannot set --encoder-only and --language-only together"),
    Case("prefix-mm-cache-without-encoder", ("--enable-prefix-mm-cache",),
         "ValueError: --enable-prefix-mm-cache requires --encoder-only to be enabled"),
)


@pytest.fixture(scope="module")
def resolved(run_script: RunScript, tiny_model: Path, require: Callable[..., None]) -> dict[str, Any]:
    """Every case through both resolutions (forked from one interpreter): {case id: {"sglang": .., "simulator": ..}}."""
    require("transformers", "SGLang's argument resolution (it reads the model's config)")
    head = ["--model-path", str(tiny_model), "--device", "cpu"]
    answer = run_script("resolve_both.py", {"cases": [[*head, *case.args] for case in CASES]},
                        env={"HF_HUB_OFFLINE": "1"})
    return dict(zip((case.id for case in CASES), answer["results"], strict=True))


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_startup_resolves_like_sglang(case: Case, resolved: Mapping[str, Any]) -> None:
    sglang, sim = resolved[case.id]["sglang"], resolved[case.id]["simulator"]
    assert (sglang["exit"], sglang["error"]) == (0 if case.error is None else 1, case.error), (
        f"SGLang's own resolution changed: {sglang['error']}")
    assert sim["exit"] == sglang["exit"], f"simulator: {_last_line(sim['stderr'])}"
    if case.error is not None:
        assert _last_line(sim["stderr"]) == case.error
        return
    ours, theirs = sim["resolved"], sglang["resolved"]
    assert sorted(ours.keys() - theirs.keys()) == [] and sorted(theirs.keys() - ours.keys()) == []
    different = {key: (theirs[key], ours[key]) for key in theirs if key not in EXEMPT and theirs[key] != ours[key]}
    assert different == {}, f"(sglang, simulator) per field: {different}"


def test_exempt_fields_are_real_fields(resolved: Mapping[str, Any]) -> None:
    """The exemption list names fields SGLang resolves, and only ones that differ for a reason still present."""
    theirs = resolved["seed-matrix"]["sglang"]["resolved"]
    assert set(EXEMPT) <= set(theirs)
    ours = resolved["seed-matrix"]["simulator"]["resolved"]
    stale = sorted(key for key in NOT_MODELLED if theirs[key] == ours[key])
    assert stale == [], f"now resolved like SGLang; drop them from NOT_MODELLED: {stale}"


def test_simulator_process_stops_like_sglang(sim_model: Path) -> None:
    """The real entry point, not only `prepare()`: exit code 1, SGLang's last traceback line last on stderr."""
    case = next(case for case in CASES if case.id == "steps-without-topk")
    command = [sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", str(sim_model), *case.args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, _last_line(done.stderr)) == (1, case.error)


# ---- the prefill CUDA-graph rule for multimodal models (docs/sglang-0.5.23.md §8.1 item 2) -------

VL_CONFIG = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"], "model_type": "qwen2_5_vl", "torch_dtype": "bfloat16",
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 1, "vocab_size": 1024, "max_position_embeddings": 4096, "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6, "eos_token_id": 2, "image_token_id": 1000, "video_token_id": 1001,
    "vision_start_token_id": 1002,
    "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2, "out_hidden_size": 128},
}
"""A tiny Qwen2.5-VL: multimodal and not on 0.5.23's breakable-graph allow-list. (Qwen3.5, which is on it, cannot be
resolved here: SGLang resolves it as a hybrid Mamba model and asserts that this platform lacks Mamba state
snapshots, so its side of the rule is held by tests/unit/simulator/test_simulator_resolve.py.)"""
VL_CASES = {
    "default": ((), "disabled"),
    "explicit-breakable": (("--cuda-graph-backend-prefill", "breakable"), "breakable"),
    "language-only": (("--language-only",), "disabled"),
    "language-model-only": (("--language-model-only",), None),  # rejected for this architecture
}
"""Case: (flags, the resolved prefill backend, or None when resolution must fail)."""


@pytest.fixture(scope="module")
def vl_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-qwen2.5-vl")
    for item in tiny_model.iterdir():
        if item.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(item, folder / item.name)
    (folder / "config.json").write_text(json.dumps(VL_CONFIG), encoding="utf-8")
    return folder


def test_multimodal_prefill_graph_rule_like_sglang(run_script: RunScript, vl_model: Path,
                                                   require: Callable[..., None]) -> None:
    """Resolved with `--device cuda` (resolution runs without a GPU; the prefill graph defaults on only on CUDA)."""
    require("transformers", "SGLang's argument resolution (it reads the model's config)")
    head = ["--model-path", str(vl_model), "--device", "cuda"]
    answer = run_script("resolve_both.py", {"cases": [[*head, *args] for args, _ in VL_CASES.values()]},
                        env={"HF_HUB_OFFLINE": "1"})
    for (case, (_, expected)), result in zip(VL_CASES.items(), answer["results"], strict=True):
        sglang, sim = result["sglang"], result["simulator"]
        if expected is None:
            assert (sglang["exit"], sim["exit"]) == (1, 1), case
            assert _last_line(sim["stderr"]) == sglang["error"], case
            continue
        backends = {}
        for side in ("sglang", "simulator"):
            assert result[side]["exit"] == 0, (case, side, result[side]["error"], result[side]["stderr"][-2000:])
            graphs = result[side]["resolved"]["cuda_graph_config"]
            backends[side] = (graphs["prefill"]["backend"], graphs["decode"]["backend"])
        assert backends == {"sglang": (expected, "full"), "simulator": (expected, "full")}, case
