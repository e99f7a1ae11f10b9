"""Speculative-decoding defaults SGLang 0.5.23 resolves (srt/arg_groups/speculative_hook.py, a subset).

Implemented: algorithm name upper-casing and the NEXTN -> EAGLE alias, `max_running_requests` -> 48,
EAGLE-family auto parameters and the topk-1 draft-token rewrite, NGRAM's draft-token default.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig

EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})
CAPPED_AT_48 = EAGLE_FAMILY | {"NGRAM", "DFLASH", "DSPARK", "FROZEN_KV_MTP"}
KNOWN_ALGORITHMS = CAPPED_AT_48 | {"UNO"}
ALIASES = {"NEXTN": "EAGLE"}

MSG_MAX_RUNNING = ("Max running requests is reset to 48 for speculative decoding. "
                   "You can override this by explicitly setting --max-running-requests.")
MSG_DRAFT_TOKENS = ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                    "when speculative_eagle_topk == 1")
MSG_NGRAM_DRAFT = ("speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
                   "You can override this by explicitly setting --speculative-num-draft-tokens.")

_MTP_DRAFT_ARCHS = {
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5MoeForConditionalGeneration": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5ForCausalLM": "Qwen3_5ForCausalLMMTP",
    "Qwen3_5MoeForCausalLM": "Qwen3_5ForCausalLMMTP",
    "Qwen3NextForCausalLM": "Qwen3NextForCausalLMMTP",
    "Qwen3MoeForCausalLM": "Qwen3MoeForCausalLMMTP",
    "DeepseekV3ForCausalLM": "DeepseekV3ForCausalLMNextN",
    "Glm4MoeForCausalLM": "Glm4MoeForCausalLMNextN",
    "MiMoForCausalLM": "MiMoMTP",
}
"""The class SGLang loads for a draft layer shipped inside the target checkpoint (configs/model_config.py)."""
_FALLBACK_PARAMS = (3, 1, 4)
_PASS_ALL_THREE = ("Pass all three of --speculative-num-steps, --speculative-eagle-topk, "
                   "--speculative-num-draft-tokens, or none of them.")
_WIDE_TREE_ARCHS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})


class ResolutionError(ValueError):
    """A flag combination SGLang rejects while resolving its arguments.

    `exc_type` and `message` are what SGLang 0.5.23 raises there (the last line of its traceback); `hint` is the
    simulator's own explanation, printed before it."""

    def __init__(self, message: str, exc_type: str = "ValueError", hint: str | None = None) -> None:
        super().__init__(f"{message} ({hint})" if hint else message)
        self.message, self.exc_type, self.hint = message, exc_type, hint

    def traceback_line(self) -> str:
        """As Python ends a traceback: `TypeError: ...`, or the bare type for an empty message."""
        return f"{self.exc_type}: {self.message}" if self.message else self.exc_type


@dataclass(frozen=True)
class SpecConfig:
    algorithm: str
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int

    @property
    def max_tokens_per_step(self) -> int:
        """Most tokens one verify step can yield: the accepted drafts plus the bonus token."""
        return max(1, min(self.num_steps + 1, self.num_draft_tokens))

    @property
    def is_eagle_family(self) -> bool:
        return self.algorithm in EAGLE_FAMILY


def resolve_speculative(values: MutableMapping[str, Any], model: ModelConfig,
                        messages: list[str]) -> SpecConfig | None:
    """Rewrite the speculative fields of `values` in place; None when no algorithm is set."""
    raw = values.get("speculative_algorithm")
    if raw is None:
        return None
    name = ALIASES.get(str(raw).upper(), str(raw).upper())
    if name not in KNOWN_ALGORITHMS:
        raise ResolutionError(f"Unknown speculative algorithm name: {name}")
    values["speculative_algorithm"] = name
    if name in CAPPED_AT_48 and values.get("max_running_requests") is None:
        values["max_running_requests"] = 48
        messages.append(MSG_MAX_RUNNING)
    if name in EAGLE_FAMILY:
        _resolve_eagle(values, name, model, messages)
    elif name == "NGRAM":
        _resolve_ngram(values, messages)
    return _spec_config(values, name)


def _resolve_eagle(values: MutableMapping[str, Any], name: str, model: ModelConfig, messages: list[str]) -> None:
    steps, topk = values.get("speculative_num_steps"), values.get("speculative_eagle_topk")
    draft = values.get("speculative_num_draft_tokens")
    if steps is None:
        if topk is not None or draft is not None:
            raise ResolutionError("", "AssertionError", hint=(
                "SGLang 0.5.23 fails an assert when --speculative-eagle-topk or --speculative-num-draft-tokens is set "
                f"without --speculative-num-steps. {_PASS_ALL_THREE}"))
        steps, topk, draft = _auto_params(name, model.architecture)
    elif topk is None:
        raise ResolutionError("'>' not supported between instances of 'NoneType' and 'int'", "TypeError", hint=(
            "SGLang 0.5.23 fails when --speculative-num-steps is set without --speculative-eagle-topk. "
            f"{_PASS_ALL_THREE}"))
    if topk == 1 and draft != steps + 1:
        messages.append(MSG_DRAFT_TOKENS)
        draft = steps + 1
    values.update(speculative_num_steps=steps, speculative_eagle_topk=topk, speculative_num_draft_tokens=draft)


def _auto_params(name: str, architecture: str) -> tuple[int, int, int]:
    if name != "STANDALONE" and architecture in _WIDE_TREE_ARCHS:
        return 5, 4, 8
    return _FALLBACK_PARAMS


def _resolve_ngram(values: MutableMapping[str, Any], messages: list[str]) -> None:
    topk = int(values.get("speculative_ngram_max_bfs_breadth") or 10)
    values["speculative_eagle_topk"] = topk
    if values.get("speculative_num_draft_tokens") is None:
        values["speculative_num_draft_tokens"] = 12
        messages.append(MSG_NGRAM_DRAFT)
    if values.get("speculative_num_steps") is None:
        values["speculative_num_steps"] = int(values["speculative_num_draft_tokens"]) // topk


def draft_architecture(spec: SpecConfig, target_architecture: str) -> str:
    """The `type=` of the draft model's `Load weight end` line."""
    if target_architecture in _MTP_DRAFT_ARCHS:
        return _MTP_DRAFT_ARCHS[target_architecture]
    suffix = "Eagle3" if spec.algorithm == "EAGLE3" else "Eagle"
    return f"{target_architecture}{suffix}"


def _spec_config(values: MutableMapping[str, Any], name: str) -> SpecConfig:
    steps = values.get("speculative_num_steps")
    topk = values.get("speculative_eagle_topk")
    draft = values.get("speculative_num_draft_tokens")
    fallback = _FALLBACK_PARAMS
    return SpecConfig(
        algorithm=name,
        num_steps=int(steps if steps is not None else fallback[0]),
        eagle_topk=int(topk if topk is not None else fallback[1]),
        num_draft_tokens=int(draft if draft is not None else fallback[2]),
    )
