"""A prefill's FLOPs and its compute ceiling (roofline/prefill_flops.py, roofline/prefill_ceiling.py;
docs/prefill.md §4)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.roofline.prefill_ceiling import ComputeRate, PrefillCeiling, prefill_ceiling_record
from pytest_sglang_perf.roofline.prefill_flops import prefill_flops
from pytest_sglang_perf.sglang_facts.model_sizes import model_config_from_dict

LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
MOE = {**LLAMA_8B, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 64,
       "num_experts_per_tok": 4, "moe_intermediate_size": 1024}


def test_llama_8b_at_2048_tokens() -> None:
    model = model_config_from_dict("config.json", LLAMA_8B)
    flops = prefill_flops(model, 2048)
    layer = 4096 * (4096 + 4096 + 2 * 1024) + 3 * 4096 * 14336  # q, o, k, v; gate, up, down
    assert flops.linear == pytest.approx(2 * 32 * layer * 2048)
    assert flops.head == pytest.approx(2 * 128256 * 4096)  # the last position's logits only
    assert flops.attention == pytest.approx(2 * 2048**2 * 4096 * 32)
    assert flops.total / 1e12 == pytest.approx(29.69, abs=0.01)  # 6.98 B weights: 2 x 6.98e9 x 2048 + attention
    assert flops.chunks == 1


def test_tensor_parallelism_chunks_and_experts() -> None:
    model = model_config_from_dict("config.json", LLAMA_8B)
    whole, split = prefill_flops(model, 8192), prefill_flops(model, 8192, tp=2)
    assert split.total == pytest.approx(whole.total / 2)
    chunked = prefill_flops(model, 8192, chunk_size=3000)
    assert chunked.chunks == 3 and chunked.attention == pytest.approx(whole.attention)
    after = prefill_flops(model, 1024, cached_tokens=4096)
    assert after.attention == pytest.approx(4 * 1024 * (4096 + 512) * 4096 * 32)
    dense, moe = model_config_from_dict("c", {**MOE, "num_experts_per_tok": 64}), model_config_from_dict("c", MOE)
    assert prefill_flops(moe, 512).linear < prefill_flops(dense, 512).linear / 4  # 4 of 64 experts per token
    with pytest.raises(ValueError, match="at least one token"):
        prefill_flops(model, 0)


def _ceiling(measured_tok_s: float) -> PrefillCeiling:
    model = model_config_from_dict("config.json", LLAMA_8B)
    return PrefillCeiling(prefill_flops(model, 2048), ComputeRate(800.0, "measured", "NVIDIA H200"), measured_tok_s,
                          "config.json")


def test_the_ceiling_and_the_diagnosis() -> None:
    ceiling = _ceiling(30_000.0)
    assert ceiling.seconds == pytest.approx(ceiling.flops.total / 800e12)
    assert ceiling.tok_s == pytest.approx(2048 / ceiling.seconds)
    assert ceiling.mfu == pytest.approx(30_000 / ceiling.tok_s)
    assert "compute-bound; a prefill graph can gain little here" in _ceiling(0.6 * ceiling.tok_s).diagnosis()
    assert "launch- or overhead-bound; a prefill graph may help" in _ceiling(0.08 * ceiling.tok_s).diagnosis()
    assert "partly compute-bound" in _ceiling(0.3 * ceiling.tok_s).diagnosis()
    assert "is wrong" in _ceiling(1.2 * ceiling.tok_s).diagnosis()
    assert _ceiling(0.61 * ceiling.tok_s).diagnosis().startswith("prefill at 61% of the compute ceiling (MFU 0.61)")
    record = prefill_ceiling_record(ceiling)
    assert record is not None and record["mfu"] == pytest.approx(ceiling.mfu)
    assert record["rate"] == {"tflops": 800.0, "source": "measured", "gpu": "NVIDIA H200", "detail": ""}
    assert ComputeRate.from_dict(record["rate"]) == ceiling.rate
    assert prefill_ceiling_record("no GPU") == {"unavailable": "no GPU"} and prefill_ceiling_record(None) is None
