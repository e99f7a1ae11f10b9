"""The fields of a model's `config.json` the simulator cannot do without, and the check both sides run.

The simulator models a model's decode speed and memory from its sizes (sglang_facts/model_sizes.py): without them it
would be simulating some other model. The plugin checks a simulated run's config.json before any server starts
(server/plan.py); the simulator checks it when it loads it. Fields that SGLang / Hugging Face fill with an honest
default stay optional: `num_key_value_heads` (= heads), `head_dim` (= hidden / heads), `torch_dtype`, the context
length (SGLang's `get_context_length` falls back to 2048), `eos_token_id`, `tie_word_embeddings`.

A multimodal config nests its language model under `text_config` (SGLang reads `hf_text_config`); a field counts
there or at the top level, as the simulator reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_sglang_perf.errors import SGLangPerfError

EXPERT_COUNT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts")
"""How MoE configs name their routed-expert count (Qwen-MoE, DeepSeek, Mixtral); 0 or 1 means a dense MLP."""
EXPERT_SIZE_KEYS = ("moe_intermediate_size", "intermediate_size")
"""One expert's MLP width: Mixtral gives it as `intermediate_size`."""
MOE_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "top_k_experts", "moe_top_k", "moe_topk")
"""scheduler.py::init_moe_gemm_config: a text config with one of these runs layers/moe/utils.py::initialize_moe_config;
the value is the number of experts each token is routed to."""


class ModelConfigFileError(SGLangPerfError, ValueError):
    """config.json is unreadable, not a JSON object, or lacks what the simulator needs; the message names the file,
    the fields and the fix."""


@dataclass(frozen=True)
class RequiredField:
    """One field the simulator needs; any one of `keys` gives it (the first one given is read)."""

    keys: tuple[str, ...]
    why: str
    check: Literal["int", "names"] = "int"
    """`int`: a positive integer; `names`: a non-empty list of strings."""

    @property
    def name(self) -> str:
        others = f" (or {', '.join(self.keys[1:])})" if len(self.keys) > 1 else ""
        return self.keys[0] + others


REQUIRED_MODEL_FIELDS = (
    RequiredField(("architectures",), "the model class: /model_info, SGLang's per-architecture rules", "names"),
    RequiredField(("hidden_size",), "every weight matrix's width: weights, KV cache, FLOPs"),
    RequiredField(("num_hidden_layers",), "how many layers each forward reads"),
    RequiredField(("num_attention_heads",), "the attention projections and head_dim's default"),
    RequiredField(("vocab_size",), "the embedding table and the LM head"),
)
"""What every model needs."""
DENSE_MODEL_FIELDS = (RequiredField(("intermediate_size",), "the MLP's width"),)
MOE_MODEL_FIELDS = (
    RequiredField(EXPERT_COUNT_KEYS, "how many experts the weights hold"),
    RequiredField(EXPERT_SIZE_KEYS, "one expert's MLP width"),
    RequiredField(MOE_TOPK_KEYS, "how many experts each token reads while decoding"),
)


def language_config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's fields: a multimodal config's `text_config` over its top level."""
    text = raw.get("text_config")
    return {**raw, **text} if isinstance(text, dict) else raw


def first_given(data: Mapping[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    """The value of the first of `keys` that is given (null counts as not given)."""
    return next((data[key] for key in keys if data.get(key) is not None), default)


def is_moe(raw: Mapping[str, Any]) -> bool:
    """An expert count above 1, or an expert width without a count (then the count is missing)."""
    text = language_config(raw)
    experts = first_given(text, EXPERT_COUNT_KEYS)
    if experts is None:
        return text.get("moe_intermediate_size") is not None
    return not (_is_int(experts) and experts <= 1)


def required_fields(raw: Mapping[str, Any]) -> tuple[RequiredField, ...]:
    return REQUIRED_MODEL_FIELDS + (MOE_MODEL_FIELDS if is_moe(raw) else DENSE_MODEL_FIELDS)


def missing_model_fields(raw: Mapping[str, Any]) -> list[str]:
    """The required fields `raw` (a parsed config.json) does not give, by name, in the table's order."""
    text = language_config(raw)
    return [field.name for field in required_fields(raw) if first_given(text, field.keys) is None]


def invalid_model_fields(raw: Mapping[str, Any]) -> list[str]:
    """The required fields given with a value the simulator cannot use, each with what it needs."""
    text = language_config(raw)
    found = []
    for field in required_fields(raw):
        key = next((key for key in field.keys if text.get(key) is not None), None)
        if key is not None and not _valid(field, text[key]):
            expected = "a positive integer" if field.check == "int" else "a non-empty list of class names"
            found.append(f"{key} must be {expected}, not {json.dumps(text[key])[:40]}")
    return found


def check_model_config(config_file: Path | str, raw: object) -> dict[str, Any]:
    """`raw` (config.json's parsed content) when the simulator can model it; else ModelConfigFileError."""
    if not isinstance(raw, dict):
        raise ModelConfigFileError(f"{config_file} is not a JSON object; {fix(config_file)}")
    problems = invalid_model_fields(raw)
    missing = missing_model_fields(raw)
    if missing:
        where = " (looked for at the top level and under text_config)" if isinstance(raw.get("text_config"),
                                                                                    dict) else ""
        problems.insert(0, f"lacks {', '.join(missing)}{where}")
    if problems:
        raise ModelConfigFileError(
            f"{config_file} {'; '.join(problems)}: the simulator needs these fields to model the model's decode "
            f"speed and memory; {fix(config_file)}")
    return raw


def read_model_config(config_file: Path) -> dict[str, Any]:
    """Read and check a config.json. FileNotFoundError when there is none (the caller says where to point);
    ModelConfigFileError when it is unreadable, not JSON, or not usable (check_model_config)."""
    try:
        text = config_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise ModelConfigFileError(f"{config_file}: can't read it ({exc}); {fix(config_file)}") from None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ModelConfigFileError(f"{config_file} is not valid JSON ({exc}); {fix(config_file)}") from None
    return check_model_config(config_file, raw)


def fix(config_file: Path | str) -> str:
    """How to get a config.json the simulator can model: the model's own (no weights are needed)."""
    return ("copy the model's real config.json from its Hugging Face repository "
            f"(https://huggingface.co/<org>/<model>/blob/main/config.json) to {config_file}")


def _valid(field: RequiredField, value: object) -> bool:
    if field.check == "names":
        return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
