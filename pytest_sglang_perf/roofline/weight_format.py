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
leaves them unquantized (the LM head is a ParallelLMHead, not a linear layer; MoE routers are built with
`quant_config=None`, qwen2_moe.py, qwen3_moe.py, llama4.py). mxfp4 (mxfp4.py) quantizes only the routed experts
(FusedMoE): its other linear layers load unquantized whatever `modules_to_not_convert` says.

Modules a config leaves unquantized count at the model's dtype, matched as each method matches them:
- `awq`, `awq_marlin`, `moe_wna16` (awq/awq.py, moe_wna16.py): `modules_to_not_convert`, any entry that is a
  substring of the module's name;
- `fp8` (fp8.py, utils.py `is_layer_skipped`): `ignored_layers`, else `modules_to_not_convert`, each with and without
  a leading `model.`; an entry matches the module itself, a parent of it, or a dotted run of its path;
- `compressed-tensors` (compressed_tensors/utils.py): `ignore`, `re:<regex>` matched from the name's start, else the
  name itself or a dotted suffix of it;
- `modelopt` (modelopt_quant.py): `ignore`, `exclude_modules` or `modules_to_not_convert`, `*` a wildcard, the whole
  name or one of its dotted parts;
- `bitsandbytes` (bitsandbytes.py): `llm_int8_skip_modules`, one of the name's dotted parts or a leading run of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_DTYPE_LABELS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                 "float8_e4m3fn": "fp8_e4m3"}
_SAFETENSORS_LABELS = {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp64", "F8_E4M3": "fp8_e4m3",
                       "F8_E5M2": "fp8_e5m2", "F4": "fp4", "I8": "int8", "U8": "uint8"}
_INT_METHODS = frozenset({"awq", "gptq", "awq_marlin", "gptq_marlin", "auto-round", "moe_wna16"})
_ONE_BYTE = {"w8a8_fp8": "fp8_e4m3", "modelopt_fp8": "fp8_e4m3", "w8a8_int8": "int8", "blockwise_int8": "int8",
             "auto-round-int8": "int8"}
_SKIP_KEYS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "awq": ("substring", ("modules_to_not_convert",)),
    "awq_marlin": ("substring", ("modules_to_not_convert",)),
    "moe_wna16": ("substring", ("modules_to_not_convert",)),
    "fp8": ("path", ("ignored_layers", "modules_to_not_convert")),
    "compressed-tensors": ("suffix_or_regex", ("ignore",)),
    "modelopt": ("glob", ("ignore", "exclude_modules", "modules_to_not_convert")),
    "modelopt_fp4": ("glob", ("ignore", "exclude_modules", "modules_to_not_convert")),
    "modelopt_fp8": ("glob", ("ignore", "exclude_modules", "modules_to_not_convert")),
    "bitsandbytes": ("component", ("llm_int8_skip_modules",)),
}
"""Per method: how its list of unquantized modules matches a name, and the config keys that give the list (the
first one given)."""
SKIP_LIST_KEYS = frozenset(key for _, keys in _SKIP_KEYS.values() for key in keys)
"""quantization_config keys holding a list of module names (config_fields.py checks their type)."""


@dataclass(frozen=True)
class WeightFormat:
    label: str
    """What a report shows: "bf16", "fp8_e4m3", "int4 (awq)", ..."""
    linear_bytes: float
    """Bytes per weight of a quantized linear layer, scales and zero points included."""
    note: str = ""
    """What was assumed, for WeightBytes.notes; empty for an unquantized model."""
    model_bytes: float = 2.0
    """Bytes per weight of a module the method leaves unquantized: the model's dtype."""
    skipped: tuple[str, ...] = ()
    """The config's list of unquantized modules (`modules_to_not_convert`, `ignore`, ...)."""
    matcher: str = ""
    """How `skipped` matches a module name, as the method's SGLang code matches it (module docstring)."""
    experts_only: bool = False
    """mxfp4: only the routed experts are quantized."""

    def bytes_for(self, module: str, *, expert: bool = False) -> float:
        """Bytes per weight of the linear layer `module` (an SGLang module name such as
        `model.layers.3.self_attn.o_proj`; `expert`: the layer's routed experts, `model.layers.3.mlp.experts`)."""
        if self.experts_only and not expert:
            return self.model_bytes
        if self.skipped and is_skipped(self.matcher, module, self.skipped):
            return self.model_bytes
        return self.linear_bytes

    def mean_bytes(self, modules: Sequence[str], *, expert: bool = False) -> float:
        """Bytes per weight of a block made of `modules`, each weighing the same (a block half of whose
        projections are left unquantized counts half at the model dtype)."""
        return sum(self.bytes_for(module, expert=expert) for module in modules) / len(modules)


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
    model = dtype_label(torch_dtype)
    if quant is None:
        return WeightFormat(model, dtype_bytes, model_bytes=dtype_bytes)
    method = str(quant.get("quant_method") or quant.get("quant_algo") or "unknown").lower()
    found = _quantized(method, quant)
    if found is None:
        return WeightFormat(f"{method} (not modelled)", dtype_bytes,
                            f"quantization '{method}' is not modelled: its weights are counted at {model}, which "
                            "overestimates them", model_bytes=dtype_bytes)
    label, per_weight = found
    matcher, skipped = _skip_list(method, quant)
    what = "routed experts" if method == "mxfp4" else "linear layers"
    return WeightFormat(label, per_weight,
                        f"quantization '{method}': {what} at {per_weight:.3f} bytes per weight (scales included); "
                        f"embeddings, LM head, routers, norms and towers at {model}{_kept(skipped, model)}",
                        model_bytes=dtype_bytes, skipped=skipped, matcher=matcher,
                        experts_only=method == "mxfp4")


def _kept(skipped: Sequence[str], model: str) -> str:
    if not skipped:
        return ""
    named = ", ".join(skipped[:3]) + (", ..." if len(skipped) > 3 else "")
    return f"; the modules its config leaves unquantized ({named}) at {model}"


def is_skipped(matcher: str, module: str, skipped: Sequence[str]) -> bool:
    """Whether `module` is in the list of unquantized modules `skipped`, matched the `matcher` way."""
    if matcher == "substring":
        return any(entry in module for entry in skipped)
    if matcher == "path":
        return any(_path_match(variant, module) for entry in skipped
                   for variant in (entry.removeprefix("model."), "model." + entry.removeprefix("model.")))
    if matcher == "suffix_or_regex":
        return any(re.match(entry[3:], module) is not None if entry.startswith("re:")
                   else module == entry or module.endswith("." + entry) for entry in skipped)
    if matcher == "glob":
        bare = module.removeprefix("language_model.")
        parts = [module, bare, *module.split(".")]
        return any(_glob(entry).fullmatch(part) is not None for entry in skipped for part in parts)
    if matcher == "component":
        parts = module.split(".")
        leading = {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
        return any(entry in parts or entry in leading for entry in skipped)
    return False


def _path_match(entry: str, module: str) -> bool:
    """fp8's match on dotted boundaries: the module, a parent of it, or a dotted run inside its path."""
    entry, module = entry.rstrip("."), module.rstrip(".")
    return module == entry or module.startswith(entry + ".") or f".{entry}." in f".{module}."


def _glob(entry: str) -> re.Pattern[str]:
    return re.compile(re.escape(entry).replace(r"\*", ".*"))


def _skip_list(method: str, quant: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(matcher, the config's unquantized modules) of `method`; ("", ()) when it has none."""
    matcher, keys = _SKIP_KEYS.get(method, ("", ()))
    listed = next((quant[key] for key in keys if quant.get(key)), None)
    if not isinstance(listed, list):
        return "", ()
    return matcher, tuple(entry for entry in listed if isinstance(entry, str))


def _quantized(method: str, quant: Mapping[str, Any]) -> tuple[str, float] | None:
    if method == "fp8":
        return _fp8(quant)
    if method in _ONE_BYTE:
        return _ONE_BYTE[method], 1.0
    if method == "mxfp8":
        return "mxfp8", 1 + 1 / 32
    if method in _INT_METHODS:
        bits = next((value for value in (quant.get("bits"), quant.get("w_bit"))
                     if isinstance(value, int) and not isinstance(value, bool) and value > 0), 4)
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
