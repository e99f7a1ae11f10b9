"""A decode step's shape as the server resolved it: read from `/server_info` (SGLang's resolved `ServerArgs`, see
docs/sglang-0.5.23.md §5: `tp_size`, `pp_size`, `attn_dp_size`, `ep_size`, `speculative_algorithm`,
`speculative_num_steps`, `speculative_num_draft_tokens`, `speculative_draft_model_path`, `kv_cache_dtype`;
`server_args.py`).

With speculative decoding (EAGLE, EAGLE3, NEXTN, MTP aliases resolved to SGLang's upper-case names) one decode step
is one round: `speculative_num_steps` draft forwards, then one verify forward over `speculative_num_draft_tokens`
tokens. NGRAM drafts without a model: no draft forwards, a verify over its draft tokens. STANDALONE drafts with a
whole second model (its bytes come from `speculative_draft_model_path`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang_perf.roofline.step_bytes import DecodeShape

DRAFT_MODEL_FREE = frozenset({"NGRAM"})
"""Speculative algorithms whose drafts cost no forward of a model."""
KV_DTYPE_BYTES = {"fp8_e5m2": 1.0, "fp8_e4m3": 1.0, "mxfp8": 1.0, "bf16": 2.0, "bfloat16": 2.0,
                  "float16": 2.0, "fp16": 2.0, "nvfp4": 0.5, "fp4_mx_block16": 0.5}
"""`--kv-cache-dtype` choices (SGLang 0.5.23's flag table) and the bytes of one element; `auto` = the model's dtype."""


def kv_dtype_bytes(info: Mapping[str, Any]) -> float | None:
    """Bytes per KV element the server stores; None for `auto` (the model's own dtype) or an unknown choice."""
    return KV_DTYPE_BYTES.get(str(info.get("kv_cache_dtype") or "auto").lower())


def speculative_algorithm(info: Mapping[str, Any]) -> str | None:
    value = info.get("speculative_algorithm")
    return str(value).upper() if value else None


def decode_shape(info: Mapping[str, Any], *, context_tokens: int, batch: int = 1) -> DecodeShape:
    """The step one request decodes with on this server, at `context_tokens` tokens in its KV cache."""
    algorithm = speculative_algorithm(info)
    steps = _int(info, "speculative_num_steps") if algorithm else 0
    verify = _int(info, "speculative_num_draft_tokens") if algorithm else 1
    return DecodeShape(tp=max(1, _int(info, "tp_size")), pp=max(1, _int(info, "pp_size")),
                       verify_tokens=max(1, verify),
                       draft_steps=0 if algorithm in DRAFT_MODEL_FREE else max(0, steps),
                       context_tokens=max(0, context_tokens), batch=max(1, batch),
                       attn_dp=max(1, _int(info, "attn_dp_size")), ep=max(1, _int(info, "ep_size")))


def prefill_layout(info: Mapping[str, Any]) -> tuple[int, int]:
    """(tp, chunked_prefill_size) of the server: the GPUs a prefill's FLOPs split over and the tokens of its largest
    step (0: no chunking)."""
    chunk = info.get("chunked_prefill_size")
    return (max(1, _int(info, "tp_size")),
            chunk if isinstance(chunk, int) and not isinstance(chunk, bool) and chunk > 0 else 0)


def draft_model_path(info: Mapping[str, Any]) -> str | None:
    """A separate draft model's path (EAGLE / STANDALONE); None when the draft lives in the target's checkpoint
    (NEXTN / MTP layers) or the server names the target itself."""
    path = info.get("speculative_draft_model_path")
    if not path or path == info.get("model_path"):
        return None
    return str(path)


def _int(info: Mapping[str, Any], key: str) -> int:
    value = info.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1 if key.endswith("_size") else 0


# `attn_dp_size` (attention data parallelism: attention weights replicated in each group; SGLang 0.5.23 reports
# `enable_dp_attention` only as attn_dp_size > 1, server_args.py) and `ep_size` (expert parallelism) are read too.
