"""Native `POST /generate` (docs/sglang-0.5.23.md §4): the request fields the simulator reads and SGLang's response
objects.

A single prompt (`text` or `input_ids`) gives one object, a list of prompts a list (non-streamed). Streamed, each
scheduler output is `data: {"text", "output_ids", "meta_info"}` with the text and ids so far (cumulative; with
`--incremental-streaming-output` only the new part), then `data: [DONE]`. `meta_info` carries `e2e_latency` and the
speculative fields only in the final object (tokenizer_manager.py::_handle_batch_output and
_calculate_spec_decoding_metrics).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from pytest_sglang_perf.simulator.api.protocol import RequestError, cached_tokens_details
from pytest_sglang_perf.simulator.engine.content import text_token_ids
from pytest_sglang_perf.simulator.engine.requests import Outcome

DEFAULT_MAX_NEW_TOKENS = 128
"""sampling/sampling_params.py::SamplingParams.max_new_tokens."""


@dataclass(frozen=True)
class GenerateRequest:
    prompts: tuple[str | tuple[int, ...], ...]
    """Each prompt: its text, or its token ids."""
    batch: bool
    """A list was sent: answer with a list."""
    max_new_tokens: int
    min_new_tokens: int
    ignore_eos: bool
    stream: bool
    rid: str | None

    def prompt_tokens(self, index: int) -> int:
        prompt = self.prompts[index]
        return len(prompt) if isinstance(prompt, tuple) else max(1, len(prompt.encode()) // 4)

    def prompt_ids(self, index: int) -> tuple[int, ...]:
        """The ids sent, or the text's stand-in ids (as many as prompt_tokens counts), for the prefix cache."""
        prompt = self.prompts[index]
        if isinstance(prompt, tuple):
            return prompt
        return text_token_ids(prompt) or (zlib.crc32(prompt.encode()),)

    def digest_text(self, index: int) -> str:
        prompt = self.prompts[index]
        return prompt if isinstance(prompt, str) else ",".join(map(str, prompt))


def _error(message: str) -> RequestError:
    return RequestError(message)


def parse_generate_request(body: bytes) -> GenerateRequest:
    """Raises RequestError (400) for what SGLang rejects before generating."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _error(f"JSON decode error: {exc}") from None
    if not isinstance(data, dict):
        raise _error("The request body must be a JSON object")
    prompts, batch = _prompts(data)
    params = data.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise _error("sampling_params must be an object")
    max_new = _int(params, "max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    min_new = _int(params, "min_new_tokens", 0)
    if max_new < 0:
        raise _error(f"max_new_tokens must be at least 0, got {max_new}.")
    if min_new < 0 or min_new > max_new:
        raise _error(f"min_new_tokens must be in [0, max_new_tokens], got {min_new}.")
    stream = bool(data.get("stream", False))
    if stream and batch:
        raise _error("The simulator streams one prompt per /generate request; send a single text or input_ids.")
    rid = data.get("rid")
    return GenerateRequest(prompts, batch, max_new, min_new, bool(params.get("ignore_eos", False)), stream,
                           rid if isinstance(rid, str) else None)


def _prompts(data: Mapping[str, Any]) -> tuple[tuple[str | tuple[int, ...], ...], bool]:
    text, ids = data.get("text"), data.get("input_ids")
    if text is None and ids is None:
        raise _error("Either text, input_ids or input_embeds should be provided.")
    if text is not None and ids is not None:
        raise _error("Either text or input_ids should be provided, not both.")
    if isinstance(text, str):
        return (text,), False
    if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
        return tuple(text), True
    if isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids):
        return (tuple(ids),), False
    if isinstance(ids, list) and ids and all(isinstance(p, list) for p in ids):
        return tuple(tuple(int(i) for i in p) for p in ids), True
    raise _error("text must be a string or a list of strings; input_ids a list of ints or a list of lists")


def _int(params: Mapping[str, Any], key: str, default: int) -> int:
    value = params.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(f"sampling_params.{key} must be an integer, got {value!r}")
    return value


def finish_reason(outcome: Outcome) -> dict[str, Any]:
    """managers/schedule_batch.py::FINISH_LENGTH / FINISH_MATCHED_TOKEN `.to_json()`."""
    if outcome.finish_reason == "length":
        return {"type": "length", "length": outcome.completion_tokens}
    return {"type": "stop", "matched": outcome.matched_stop}


def meta_info(rid: str, outcome: Outcome, completion_tokens: int, weight_version: str,
              final: bool, e2e_latency: float, cached_tokens: int = 0) -> dict[str, Any]:
    """The meta_info of one output object; `final` adds the finish reason, e2e_latency and spec fields.
    `cached_tokens`: the prompt tokens the radix cache held (details by tier, or null without a hit)."""
    info: dict[str, Any] = {
        "id": rid, "finish_reason": finish_reason(outcome) if final else None,
        "prompt_tokens": outcome.prompt_tokens, "weight_version": weight_version, "num_retractions": 0,
        "reasoning_tokens": 0, "completion_tokens": completion_tokens, "cached_tokens": cached_tokens,
        "weight_versions": [{"version": weight_version, "start": 0, "end": completion_tokens}],
        "cached_tokens_details": cached_tokens_details(cached_tokens), "dp_rank": None,
    }
    if final:
        info["e2e_latency"] = e2e_latency
        info.update(spec_meta_info(outcome))
    return info


def spec_meta_info(outcome: Outcome) -> dict[str, Any]:
    """Only with a speculative algorithm and at least one verify step (docs/sglang-0.5.23.md §4.1)."""
    proposed = outcome.verify_ct * (outcome.num_draft_tokens - 1)
    if outcome.verify_ct <= 0 or proposed <= 0:
        return {}
    fields: dict[str, Any] = {
        "spec_accept_rate": outcome.correct_drafts / proposed,
        "spec_accept_length": outcome.completion_tokens / outcome.verify_ct,
        "spec_num_correct_drafts": outcome.correct_drafts, "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": outcome.verify_ct,
    }
    if any(outcome.correct_drafts_histogram):
        fields["spec_correct_drafts_histogram"] = list(outcome.correct_drafts_histogram)
    return fields


def output_object(text: str, output_ids: Sequence[int], info: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": text, "output_ids": list(output_ids), "meta_info": dict(info)}


def sse(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def error_object(message: str) -> dict[str, Any]:
    """http_server.py::_create_error_response."""
    return {"error": {"message": message}}
