"""The `openai` package bound to a server, and a cross-check of our client through it.

`openai` is imported lazily: the plugin does not need it to measure (it is ~35x slower per chunk than
`client.py`), only to give users a familiar client for a variant's server and to confirm that both clients
see the same tokens.
"""

from __future__ import annotations

from time import perf_counter
from types import ModuleType
from typing import TYPE_CHECKING, Any

import orjson

from pytest_sglang_perf.measurement.client import (
    ChatRequest,
    RequestFailed,
    StreamAccumulator,
    StreamRecord,
    broken_failure,
    connect_failure,
    status_failure,
    timeout_failure,
)

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionChunk

_STANDARD_FIELDS = frozenset({"model", "messages", "max_tokens", "temperature", "seed", "stream", "stream_options"})


def _import_openai() -> ModuleType:
    try:
        import openai
    except ImportError as exc:
        raise ImportError("this needs the `openai` package, which is not installed: pip install openai") from exc
    return openai


def make_openai_client(base_url: str, api_key: str | None = None, timeout: float = 600.0) -> openai.OpenAI:
    """An `openai.OpenAI` client for the server at `base_url` (no retries: a failure must show)."""
    module = _import_openai()
    client: openai.OpenAI = module.OpenAI(base_url=base_url.rstrip("/") + "/v1", api_key=api_key or "EMPTY",
                                          timeout=timeout, max_retries=0)
    return client


def _feed_chunk(acc: StreamAccumulator, chunk: ChatCompletionChunk, t: float) -> None:
    for choice in chunk.choices:
        delta = choice.delta
        acc.add_delta(delta.content, getattr(delta, "reasoning_content", None), t)
        if choice.finish_reason:
            acc.finish_reason = choice.finish_reason
    if chunk.usage is not None:
        acc.add_usage(chunk.usage.model_dump())
    sglext = (chunk.model_extra or {}).get("sglext")
    if sglext:
        acc.add_sglext(sglext)


def _create_stream(client: openai.OpenAI, request: ChatRequest) -> Any:
    body = request.body()
    extras = {key: value for key, value in body.items() if key not in _STANDARD_FIELDS}
    return client.chat.completions.create(
        model=request.model, messages=body["messages"], max_tokens=request.max_tokens,
        temperature=request.temperature, seed=request.seed, stream=True,
        stream_options={"include_usage": True}, extra_body=extras,
    )


def _failure(module: ModuleType, exc: Exception, url: str, request: ChatRequest, chunks: int) -> RequestFailed:
    """Our RequestFailed for an `openai` exception, with the same reasons as client.py."""
    if isinstance(exc, module.APIStatusError):
        return status_failure(exc.status_code, url, exc.response.text)
    if isinstance(exc, module.APITimeoutError):
        return timeout_failure(url, request, chunks)
    if isinstance(exc, module.APIConnectionError):
        cause = exc.__cause__ or exc
        if chunks == 0 and type(cause).__name__ == "ConnectError":
            return connect_failure(url, cause)
        return broken_failure(url, chunks, cause)
    body = orjson.dumps(getattr(exc, "body", None), default=str).decode()
    return RequestFailed(f"server reported an error mid-stream: {exc}", body=body)


def stream_with_openai(client: openai.OpenAI, request: ChatRequest) -> StreamRecord:
    """One streamed request through `client`, timed like client.py and validated the same way.

    `openai` stops at `data: [DONE]` without saying whether it saw it, so a stream that ends early is
    caught by the missing usage chunk rather than by the missing [DONE].
    """
    module = _import_openai()
    url = str(client.base_url).rstrip("/") + "/chat/completions"
    acc = StreamAccumulator()
    t0 = perf_counter()
    try:
        with _create_stream(client, request) as stream:
            for chunk in stream:
                _feed_chunk(acc, chunk, perf_counter() - t0)
    except module.APIError as exc:
        raise _failure(module, exc, url, request, len(acc.times)) from None
    acc.done = True
    return acc.record(request)


def cross_check(base_url: str, request: ChatRequest, api_key: str | None = None) -> StreamRecord:
    """Send `request` through the `openai` package (SGLang extras in extra_body) and return its record."""
    with make_openai_client(base_url, api_key, request.timeout) as client:
        return stream_with_openai(client, request)
