"""The config.json fields the byte count reads, their types checked before any is used: a wrong-typed field
(`"num_key_value_heads": "eight"`, `"head_dim": [128]`, a `vision_config` that is not an object) is a
ModelBytesError naming the file and the field, never a TypeError deep in the arithmetic. A field that is absent or
null is "not given" (its default applies), as sglang_facts/model_sizes.py reads it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.roofline.weight_format import SKIP_LIST_KEYS, quantization_config
from pytest_sglang_perf.sglang_facts.model_fields import EXPERT_COUNT_KEYS, EXPERT_SIZE_KEYS, MOE_TOPK_KEYS
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig, model_config_from_dict

_POSITIVE = ("hidden_size", "num_attention_heads", "vocab_size", "moe_layer_freq", "decoder_sparse_step")
_COUNTS = (
    "num_hidden_layers", "intermediate_size", "num_key_value_heads", "head_dim", *EXPERT_COUNT_KEYS,
    *MOE_TOPK_KEYS, *EXPERT_SIZE_KEYS, "mtp_num_hidden_layers", "num_nextn_predict_layers", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "linear_num_value_heads",
    "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
    "shared_expert_intermediate_size", "n_shared_experts", "first_k_dense_replace", "interleave_moe_layer_step",
    "intermediate_size_mlp", "sliding_window", "full_attention_interval", "draft_vocab_size", "target_hidden_size",
    "num_aux_hidden_states",
)
_NUMBERS = ("max_position_embeddings", "max_sequence_length", "seq_length", "max_seq_len", "model_max_length")
"""The context length's keys: model_sizes.py reads them as numbers (a float is truncated)."""
_BOOLS = ("tie_word_embeddings", "attn_output_gate")
_STRINGS = ("torch_dtype", "dtype", "model_type")
_STRING_LISTS = ("architectures", "layer_types")
_INT_LISTS = ("mlp_only_layers",)
_OBJECTS = ("text_config", "vision_config", "quantization_config", "eagle_config")
_VISION_COUNTS = ("hidden_size", "depth", "num_hidden_layers", "intermediate_size", "out_hidden_size", "patch_size",
                  "num_position_embeddings")
_QUANT_INTS = ("bits", "w_bit", "group_size", "q_group_size")
_FIX = ("correct it in config.json (the model's own config.json from its Hugging Face repository has it right), "
        "or remove the field to use its default")


class ModelBytesError(SGLangPerfError, ValueError):
    """A config.json whose fields the byte count cannot use; the message names the file, the field and the fix."""


def model_sizes(raw: Mapping[str, Any], source: str) -> ModelConfig:
    """The model's sizes (sglang_facts/model_sizes.py) from config.json `raw` (`source`: the file it came from),
    its fields checked first (check_config_fields)."""
    check_config_fields(raw, source)
    try:
        return model_config_from_dict(source, raw)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ModelBytesError(f"{source}: can't read the model's sizes from it ({exc}); {_FIX}") from None


def check_config_fields(raw: Mapping[str, Any], source: str) -> None:
    """ModelBytesError naming `source` and the first field of `raw` given with a type the byte count can't use."""
    for key in _OBJECTS:
        _check(raw, key, source, "", _is_object, "a JSON object")
    text = raw.get("text_config")
    for scope, prefix in ((raw, ""), (text, "text_config.")):
        if isinstance(scope, Mapping):
            _check_scope(scope, source, prefix)
    vision = raw.get("vision_config")
    if isinstance(vision, Mapping):
        for key in _VISION_COUNTS:
            _check(vision, key, source, "vision_config.", _is_count, "a whole number, 0 or more")
    quant = quantization_config(raw)
    if quant is not None:
        for key in _QUANT_INTS:
            _check(quant, key, source, "quantization_config.", _is_int, "a whole number")
        for key in sorted(SKIP_LIST_KEYS):
            _check(quant, key, source, "quantization_config.", _is_string_list, "a list of module names")


def _check_scope(scope: Mapping[str, Any], source: str, prefix: str) -> None:
    for key in _POSITIVE:
        _check(scope, key, source, prefix, _is_positive, "a whole number above 0")
    for key in _COUNTS:
        _check(scope, key, source, prefix, _is_count, "a whole number, 0 or more")
    for key in _NUMBERS:
        _check(scope, key, source, prefix, lambda value: _is_int(value) or isinstance(value, float), "a number")
    for key in _BOOLS:
        _check(scope, key, source, prefix, lambda value: isinstance(value, bool), "true or false")
    for key in _STRINGS:
        _check(scope, key, source, prefix, lambda value: isinstance(value, str), "a string")
    for key in _STRING_LISTS:
        _check(scope, key, source, prefix, _is_string_list, "a list of strings")
    for key in _INT_LISTS:
        _check(scope, key, source, prefix, _is_int_list, "a list of layer numbers")
    eagle = scope.get("eagle_config")
    if isinstance(eagle, Mapping):
        _check(eagle, "eagle_aux_hidden_state_layer_ids", source, prefix + "eagle_config.", _is_int_list,
               "a list of layer numbers")


def _check(scope: Mapping[str, Any], key: str, source: str, prefix: str, valid: Callable[[Any], bool],
           expected: str) -> None:
    value = scope.get(key)
    if value is not None and not valid(value):
        raise ModelBytesError(f"{source}: field '{prefix}{key}' must be {expected}, not "
                              f"{json.dumps(value, default=str)[:40]}; {_FIX}")



def int_field(data: Mapping[str, Any], key: str) -> int:
    """`data[key]` when it is a whole number, else 0 (not given)."""
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _is_positive(value: Any) -> bool:
    return _is_int(value) and value > 0


def _is_object(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(item) for item in value)
