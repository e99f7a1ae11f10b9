"""How many bytes a quantized model stores per weight of its linear layers, from config.json's
`quantization_config`, and the dtype label a report shows ("bf16", "fp8_e4m3", "int4 (awq)").

The storage each method uses (SGLang 0.5.23 loads them through sglang/srt/layers/quantization/):
- `fp8` (fp8.py): one byte per weight, plus one float32 scale per `weight_block_size` block (DeepSeek-V3, Qwen3-FP8
  store it as `weight_scale_inv`) or per output channel; `mxfp8`: one byte and one 8-bit scale per 32 weights;
  `w8a8_fp8`, `w8a8_int8`, `blockwise_int8`, `modelopt_fp8`: one byte;
- `awq` / `gptq` and their Marlin forms, `auto-round` (awq.py, gptq.py): `bits` per weight packed in int32, one
  16-bit scale and one `bits`-wide zero point per `group_size` weights;
- `compressed-tensors` (compressed_tensors/): `num_bits` and `group_size` of its first config group's weights;
- `mxfp4` (mxfp4.py, gpt-oss): 4 bits and one 8-bit scale per 32 weights; `modelopt` FP4 (modelopt_quant.py):
  4 bits and one 8-bit scale per 16 weights, FP8: one byte;
- `bitsandbytes`: 4-bit with one float32 absmax per 64 weights, or 8-bit.
Embeddings, the LM head, norms, routers and vision towers are counted at the model's dtype: every method above
leaves them unquantized by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_DTYPE_LABELS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                 "float8_e4m3fn": "fp8_e4m3"}
_SAFETENSORS_LABELS = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp64", "F8_E4M3": "fp8_e4m3",
                       "F8_E5M2": "fp8_e5m2", "F4": "fp4", "I8": "int8", "U8": "uint8"}
_INT_METHODS = frozenset({"awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "moe_wna16"})
_ONE_BYTE = {"w8a8_fp8": "fp8_e4m3", "modelopt_fp8": "fp8_e4m3", "w8a8_int8": "int8", "blockwise_int8": "int8",
             "auto-round-int8": "int8"}


@dataclass(frozen=True)
class WeightFormat:
    label: str
    """What a report shows: "bf16", "fp8_e4m3", "int4 (awq)", ..."""
    linear_bytes: float
    """Bytes per weight of a quantized linear layer, scales and zero points included."""
    note: str = ""
    """What was assumed, for WeightBytes.notes; empty for an unquantized model."""


def quantization_config(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """config.json's `quantization_config` (top level, else a multimodal model's `text_config`)."""
    for scope in (raw, raw.get("text_config")):
        if isinstance(scope, Mapping) and isinstance(scope.get("quantization_config"), Mapping):
            found: Mapping[str, Any] = scope["quantization_config"]
            return found
    return None


def dtype_label(torch_dtype: str) -> str:
    """A config.json `torch_dtype` as a report shows it: "bfloat16" -> "bf16"."""
    return _DTYPE_LABELS.get(torch_dtype, torch_dtype)


def safetensors_label(dtype: str) -> str:
    """A safetensors dtype as a report shows it: "BF16" -> "bf16"."""
    return _SAFETENSORS_LABELS.get(dtype, dtype.lower())


def weight_format(raw: Mapping[str, Any], torch_dtype: str, dtype_bytes: float) -> WeightFormat:
    """The linear layers' storage: the model dtype, or what its quantization_config gives."""
    quant = quantization_config(raw)
    if quant is None:
        return WeightFormat(dtype_label(torch_dtype), dtype_bytes)
    method = str(quant.get("quant_method") or quant.get("quant_algo") or "unknown").lower()
    found = _quantized(method, quant)
    if found is None:
        return WeightFormat(f"{method} (not modelled)", dtype_bytes,
                            f"quantization '{method}' is not modelled: its weights are counted at "
                            f"{dtype_label(torch_dtype)}, which overestimates them")
    label, per_weight = found
    return WeightFormat(label, per_weight,
                        f"quantization '{method}': linear layers at {per_weight:.3f} bytes per weight (scales "
                        f"included); embeddings, LM head, norms and towers at {dtype_label(torch_dtype)}")


def _quantized(method: str, quant: Mapping[str, Any]) -> tuple[str, float] | None:
    if method == "fp8":
        return _fp8(quant)
    if method in _ONE_BYTE:
        return _ONE_BYTE[method], 1.0
    if method == "mxfp8":
        return "mxfp8", 1 + 1 / 32
    if method in _INT_METHODS:
        bits = int(quant.get("bits") or quant.get("w_bit") or 4)
        return f"int{bits} ({method})", _grouped(bits, _group(quant.get("group_size", quant.get("q_group_size"))))
    if method == "compressed-tensors":
        return _compressed_tensors(quant)
    if method == "mxfp4":
        return "mxfp4", 0.5 + 1 / 32
    if method in ("modelopt", "modelopt_fp4"):
        algo = str(quant.get("quant_algo") or method).upper()
        return ("nvfp4", 0.5 + 1 / 16) if "FP4" in algo else ("fp8_e4m3", 1.0)
    if method == "bitsandbytes":
        return ("nf4 (bitsandbytes)", 0.5 + 4 / 64) if quant.get("load_in_4bit") else ("int8 (bitsandbytes)", 1.0)
    return None


def _fp8(quant: Mapping[str, Any]) -> tuple[str, float]:
    fmt = "fp8_e5m2" if "e5m2" in str(quant.get("fmt", "")).lower() else "fp8_e4m3"
    block = quant.get("weight_block_size")
    if isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block):
        return fmt, 1 + 4 / (block[0] * block[1])
    return fmt, 1.0


def _compressed_tensors(quant: Mapping[str, Any]) -> tuple[str, float] | None:
    groups = quant.get("config_groups")
    first = next(iter(groups.values()), None) if isinstance(groups, Mapping) else None
    weights = first.get("weights") if isinstance(first, Mapping) else None
    if not isinstance(weights, Mapping) or not isinstance(weights.get("num_bits"), int):
        return None
    bits = weights["num_bits"]
    if weights.get("type") == "float":
        return (f"fp{bits}", bits / 8) if bits != 4 else ("nvfp4", 0.5 + 1 / 16)
    return f"int{bits} (compressed-tensors)", _grouped(bits, _group(weights.get("group_size")))


def _group(value: Any) -> int:
    """The weights per scale; per-channel (-1, None) is counted as no overhead."""
    return value if isinstance(value, int) and value > 0 else 0


def _grouped(bits: int, group: int) -> float:
    """`bits` per weight, and per group a 16-bit scale and a `bits`-wide zero point."""
    overhead = (2 + bits / 8) / group if group else 0.0
    return bits / 8 + overhead
