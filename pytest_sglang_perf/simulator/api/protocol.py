"""OpenAI chat-completions wire format as SGLang 0.5.23 writes it (srt/entrypoints/openai/).

Field names, their order and which nulls are emitted follow protocol.py and sse_utils.py: a content
chunk's delta always carries `reasoning_content`; the `choices: []` sglext chunk carries `usage: null`;
the usage chunk has no `sglext` key. A request's prefix-cache hits (docs/sglang-0.5.23.md §3.5) show as
`sglext.cached_tokens_details` when asked (`return_cached_tokens_details`) and there was a hit, and as
`usage.prompt_tokens_details.cached_tokens` with `--enable-cache-report`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from pytest_sglang_perf.simulator.engine.requests import Outcome

DONE = b"data: [DONE]\n\n"
_SSE_END = b"\n\n"


class RequestError(Exception):
    """A request SGLang answers with an error object (400 unless stated)."""

    def __init__(self, message: str, err_type: str = "BadRequestError", status: int = 400) -> None:
        super().__init__(message)
        self.message, self.err_type, self.status = message, err_type, status

    def body(self) -> dict[str, Any]:
        return {"object": "error", "message": self.message, "type": self.err_type, "param": None,
                "code": self.status}


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[Mapping[str, Any], ...]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    seed: int | None
    stream: bool
    include_usage: bool
    continuous_usage_stats: bool
    return_spec_tokens_details: bool
    n: int
    return_cached_tokens_details: bool = False


def check_content_type(content_type: str) -> None:
    """http_server.py::validate_json_request; the message is `f"{exc} {exc.errors()}"` of its RequestValidationError."""
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        error = ("{'loc': ['header', 'content-type'], 'msg': \"Unsupported Media Type: Only 'application/json' "
                 "is allowed\", 'type': 'value_error'}")
        raise RequestError(f"1 validation error:\n  {error} [{error}]", err_type="Bad Request")


def parse_chat_request(body: bytes, default_include_usage: bool = False) -> ChatRequest:
    """Decode and type-check a request body; raises RequestError like SGLang's validation handler."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _validation_error("body", f"JSON decode error: {exc}") from None
    if not isinstance(data, dict):
        raise _validation_error("body", "Input should be a valid dictionary or object")
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _validation_error("messages", "Field required" if messages is None else "Input should be a valid list")
    options = data.get("stream_options") or {}
    return ChatRequest(
        model=_typed(data, "model", str, "default"), messages=tuple(messages),
        max_tokens=_typed(data, "max_completion_tokens", int, None) or _typed(data, "max_tokens", int, None),
        min_tokens=_typed(data, "min_tokens", int, 0), ignore_eos=_typed(data, "ignore_eos", bool, False),
        seed=_typed(data, "seed", int, None), stream=_typed(data, "stream", bool, False),
        include_usage=bool(options.get("include_usage")) or default_include_usage,
        continuous_usage_stats=bool(options.get("continuous_usage_stats")),
        return_spec_tokens_details=_typed(data, "return_spec_tokens_details", bool, False),
        n=_typed(data, "n", int, 1),
        return_cached_tokens_details=_typed(data, "return_cached_tokens_details", bool, False),
    )


def _typed(data: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    value = data.get(key)
    if value is None:
        return default
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise _validation_error(key, "Input should be a valid integer")
    if not isinstance(value, kind):
        raise _validation_error(key, f"Input should be a valid {kind.__name__}")
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise _negative(key, value)
    return value


def _negative(key: str, value: int) -> RequestError:
    """sampling_params.py::SamplingParams.verify, where SGLang rejects negative token counts."""
    if key in ("max_tokens", "max_completion_tokens"):
        return RequestError(f"max_new_tokens must be at least 0, got {value}.")
    if key == "min_tokens":
        return RequestError(f"min_new_tokens must be in [0, max_new_tokens], got {value}.")
    return _validation_error(key, "Input should be greater than or equal to 0")


def _validation_error(field: str, message: str) -> RequestError:
    return RequestError(f"1 validation error for ChatCompletionRequest\n{field}\n  {message}",
                        err_type="Bad Request")


def check_request(chat: ChatRequest, prompt_tokens: int, context_len: int) -> None:
    """The semantic checks of serving_chat.py and tokenizer_manager.py that can reject a request."""
    if not chat.messages:
        raise RequestError("Messages cannot be empty.")
    if chat.n != 1:
        raise RequestError(f"n={chat.n}: the simulator serves one choice per request (n=1).")
    if chat.max_tokens is not None and chat.max_tokens > context_len:
        raise RequestError(f"max_completion_tokens is too large: {chat.max_tokens}."
                           f"This model supports at most {context_len} completion tokens.")
    check_prompt_fits(prompt_tokens, context_len)
    if chat.max_tokens is not None and chat.max_tokens + prompt_tokens > context_len:
        raise RequestError(
            f"Requested token count exceeds the model's maximum context length of {context_len} tokens. "
            f"You requested a total of {chat.max_tokens + prompt_tokens} tokens: {prompt_tokens} tokens "
            f"from the input messages and {chat.max_tokens} tokens for the completion. Please reduce the "
            "number of tokens in the input messages or the completion to fit within the limit.")


def check_prompt_fits(prompt_tokens: int, context_len: int) -> None:
    """tokenizer_manager.py: a prompt must leave room for one output token (chat and /generate alike)."""
    if prompt_tokens >= context_len:
        raise RequestError(f"The input ({prompt_tokens} tokens) is longer than the model's context length "
                           f"({context_len} tokens).")


def usage_dict(outcome: Outcome, cache_report: bool, cached_tokens: int = 0) -> dict[str, Any]:
    """The final UsageInfo of a request."""
    return token_usage(outcome.prompt_tokens, outcome.completion_tokens, cache_report, cached_tokens)


def token_usage(prompt_tokens: int, completion_tokens: int, cache_report: bool,
                cached_tokens: int = 0) -> dict[str, Any]:
    """UsageInfo (also per chunk with `continuous_usage_stats`): nulls are emitted; `prompt_tokens_details` only
    with --enable-cache-report (usage_processor.py), with the prompt tokens the radix cache held;
    completion_tokens_details only with reasoning tokens."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens} if cache_report else None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def cached_tokens_details(cached_tokens: int) -> dict[str, int] | None:
    """CachedTokensDetails of a request: None without a hit (SGLang then sends no field), else the hits by tier;
    all on the device here (output_streamer.py::get_cached_tokens_details without hierarchical cache)."""
    return {"device": cached_tokens, "host": 0} if cached_tokens > 0 else None


def sglext_fields(chat: ChatRequest, outcome: Outcome, cached_tokens: int) -> dict[str, Any]:
    """What a request's `sglext` carries, in SglExt's field order; empty when nothing was asked or found."""
    fields: dict[str, Any] = {}
    cached = cached_tokens_details(cached_tokens) if chat.return_cached_tokens_details else None
    if cached is not None:
        fields["cached_tokens_details"] = cached
    spec = spec_tokens_details(outcome) if chat.return_spec_tokens_details else None
    if spec is not None:
        fields["spec_tokens_details"] = spec
    return fields


def spec_tokens_details(outcome: Outcome) -> dict[str, Any] | None:
    """SpecTokensDetails, or None when the request ran no verify step (no `sglext` then)."""
    proposed = outcome.verify_ct * (outcome.num_draft_tokens - 1)
    if outcome.verify_ct <= 0 or proposed <= 0:
        return None
    return {
        "spec_accept_rate": outcome.correct_drafts / proposed,
        "spec_accept_length": outcome.completion_tokens / outcome.verify_ct,
        "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0,
        "spec_num_correct_drafts": outcome.correct_drafts,
        "spec_num_proposed_drafts": proposed,
        "spec_verify_ct": outcome.verify_ct,
        "spec_correct_drafts_histogram": list(outcome.correct_drafts_histogram),
        "spec_cap_lens_histogram": [],
    }


class ChunkEncoder:
    """Pre-serialised SSE chunks of one streamed request (the hot path: one per decode step)."""

    def __init__(self, rid: str, created: int, model: str) -> None:
        self._head = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}
        head = orjson.dumps(self._head)[:-1]
        self._prefix = b"data: " + head + b',"choices":[{"index":0,"delta":{"reasoning_content":null'
        self._suffix = b'},"logprobs":null,"finish_reason":null,"matched_stop":null}]}' + _SSE_END

    def role(self) -> bytes:
        return self._prefix + b',"role":"assistant","content":""' + self._suffix

    def content(self, text: str) -> bytes:
        return self._prefix + b',"content":' + orjson.dumps(text) + self._suffix

    def content_with_usage(self, text: str, usage: Mapping[str, Any]) -> bytes:
        choice = _stream_choice({"reasoning_content": None, "content": text}, None, None)
        return _sse({**self._head, "choices": [choice], "usage": usage})

    def finish(self, reason: str, matched_stop: int | None) -> bytes:
        return _sse({**self._head, "choices": [_stream_choice({"reasoning_content": None}, reason, matched_stop)]})

    def sglext(self, spec: Mapping[str, Any] | None = None, cached: Mapping[str, Any] | None = None) -> bytes:
        """The `choices: []` chunk with the request's speculative statistics and/or prefix-cache hits."""
        fields: dict[str, Any] = {}
        if cached is not None:
            fields["cached_tokens_details"] = cached
        if spec is not None:
            fields["spec_tokens_details"] = spec
        return _sse({**self._head, "choices": [], "usage": None, "sglext": fields})

    def usage(self, usage: Mapping[str, Any]) -> bytes:
        return _sse({**self._head, "choices": [], "usage": usage})


def _stream_choice(delta: Mapping[str, Any], reason: str | None, matched_stop: int | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason, "matched_stop": matched_stop}


def _sse(payload: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(payload) + _SSE_END


def completion_response(rid: str, created: int, chat: ChatRequest, text: str, outcome: Outcome,
                        cache_report: bool, weight_version: str, cached_tokens: int = 0) -> dict[str, Any]:
    """ChatCompletionResponse (non-streamed)."""
    message = {"role": "assistant", "content": text, "reasoning_content": None}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": outcome.finish_reason,
              "matched_stop": outcome.matched_stop}
    response: dict[str, Any] = {
        "id": rid, "object": "chat.completion", "created": created, "model": chat.model, "choices": [choice],
        "usage": usage_dict(outcome, cache_report, cached_tokens),
        "metadata": weight_metadata(weight_version, outcome),
    }
    sglext = sglext_fields(chat, outcome, cached_tokens)
    if sglext:
        response["sglext"] = sglext
    return response


def weight_metadata(weight_version: str, outcome: Outcome) -> dict[str, Any]:
    """utils/weight_versions.py: the version, and the output-token span each version produced (one span here)."""
    span = {"version": weight_version, "start": 0, "end": outcome.completion_tokens}
    return {"weight_version": weight_version, "weight_versions": [span]}
