"""The `embedding` entry of `/model_info` for a generation model (SGLang 0.5.23, configs/embedding_model_spec.py).

SGLang reports it for every model: the static capabilities of the model's embedding spec (the `NONE` spec for a
causal LM) combined with the resolved server configuration (`resolved_embedding_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang_perf.simulator.args.cudagraph import CudaGraphPlan

NONE_SPEC: Mapping[str, Any] = {
    "family": "none", "task": "none", "execution": "none", "attention": "none", "pooling": "model_defined",
    "normalize": False, "postprocessor": "none", "tokenizer_special_tokens": "model_default",
    "supports_dimensions": False, "supports_token_embeddings": False, "supports_multimodal": False,
    "requires_embedding_flag": False, "auto_enable_embedding": False, "bcg_eligibility": "disabled",
    "safe_disable_kv_cache": False, "safe_disable_radix_cache": False, "safe_disable_chunked_prefill": False,
}


def embedding_plan(args: Mapping[str, Any], cuda_graph: CudaGraphPlan) -> dict[str, Any]:
    prefill = cuda_graph.prefill
    return {
        **NONE_SPEC,
        "enabled": bool(args.get("is_embedding")),
        "supports_dimensions": False,
        "matryoshka_dimensions": [],
        "bcg": {"prefill_backend": prefill.backend, "enabled": prefill.backend == "breakable",
                "capture_token_budget": prefill.max_bs, "capture_batch_sizes": list(prefill.bs or ())},
        "cache": {"kv_cache_disabled": bool(args.get("prefill_only_disable_kv_cache")),
                  "radix_cache_disabled": bool(args.get("disable_radix_cache")),
                  "chunked_prefill_disabled": args.get("chunked_prefill_size") == -1},
    }
