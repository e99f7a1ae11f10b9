"""A lean streaming chat client: the request, what a stream delivered, and why a request failed; orjson, on uvloop
when importable, timed per read.

Why not the `openai` package: it builds a pydantic object per chunk (~70 µs) and falls behind above ~10 k
tok/s; see docs/client-measurement.md. A reader takes one `perf_counter()` per socket read before any parsing,
splits SSE events on blank lines and feeds them to a `StreamAccumulator`, which keeps flat lists of floats.
Measurements read with the bare-connection reader (wire.py, through rounds.py; `run_requests` is a round of one
stream); aiohttp_reader.py is the aiohttp reader, kept for the side-by-side benchmark. Every failed, truncated or
short request raises `RequestFailed`; nothing is silently dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.measurement.samples import Sample

_T = TypeVar("_T")
CHAT_PATH = "/v1/chat/completions"
ERROR_BODY_LIMIT = 65536
_REASON_TEXT_LIMIT = 300
_STATUS_HINTS: Mapping[int, str] = {
    401: "the server was started with --api-key: pass the same key as api_key",
    403: "the server refused the API key: pass the key the server was started with",
    404: "no chat endpoint here: is base_url an SGLang server (without /v1)?",
}


@dataclass(frozen=True)
class ChatRequest:
    """One streamed chat completion, sent identically for every repeat."""

    model: str
    prompt: str
    """Sent as one user message."""
    max_tokens: int
    temperature: float
    seed: int
    ignore_eos: bool = True
    spec_details: bool = True
    """Sends `return_spec_tokens_details` so the server reports per-request speculative statistics."""
    cache_details: bool = True
    """Sends `return_cached_tokens_details` so the server reports the request's prefix-cache hits."""
    timeout: float = 600.0
    """Whole-request timeout, seconds."""

    def body(self) -> dict[str, Any]:
        """The JSON body of POST /v1/chat/completions (field names per SGLang 0.5.23)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt}],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": self.ignore_eos,
        }
        if self.spec_details:
            body["return_spec_tokens_details"] = True
        if self.cache_details:
            body["return_cached_tokens_details"] = True
        return body


class RequestFailed(SGLangPerfError):
    """A request that yielded no valid sample; `reason` says why in one line."""

    def __init__(self, reason: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.body = body


@dataclass(frozen=True)
class StreamRecord:
    """One request as received."""

    sample: Sample
    chunk_times: tuple[float, ...]
    """`perf_counter()` of each content chunk, seconds after the request was sent."""
    text: str
    finish_reason: str | None
    sent_at: float = 0.0
    """`perf_counter()` when the request was sent (a concurrent round's streams are placed by it)."""


class StreamAccumulator:
    """What one streamed request has delivered so far: flat lists, no per-chunk objects.

    A chunk counts as content when its delta carries text in `content` or `reasoning_content` (with a
    reasoning parser SGLang streams the thinking part as `reasoning_content`; those are tokens too).
    """

    __slots__ = ("cached", "done", "finish_reason", "parts", "spec", "times", "usage")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.parts: list[str] = []
        self.finish_reason: str | None = None
        self.usage: tuple[int, int] | None = None
        """(completion_tokens, prompt_tokens) from the usage chunk."""
        self.spec: tuple[int, float] | None = None
        """(spec_verify_ct, spec_accept_length) from `sglext.spec_tokens_details`."""
        self.cached: int | None = None
        """Prompt tokens from the prefix cache, the most either report said (see add_sglext, add_usage)."""
        self.done = False

    def feed_event(self, event: bytes, t: float) -> None:
        """One SSE event (the bytes between blank lines) that arrived `t` seconds after the send."""
        payload = event[6:] if event.startswith(b"data: ") else _data_field(event)
        if payload is None or self.done:
            return
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise RequestFailed(f"server sent an event that is not JSON: {clip_line(payload.decode(errors='replace'))}",
                                body=payload.decode(errors="replace")) from None
        self.feed_object(obj, t)

    def feed_events(self, events: Sequence[bytes], t: float) -> None:
        """The SSE events of one read, all `t` seconds after the send: as feed_event one by one, with the common
        case (a `data: ` line holding one choice's delta) handled inline, which the client runs once per token."""
        loads, times, parts = orjson.loads, self.times, self.parts
        for event in events:
            if self.done or event[:6] != b"data: " or event == b"data: [DONE]":
                self.feed_event(event, t)
                continue
            try:
                obj = loads(event[6:])
            except orjson.JSONDecodeError:
                self.feed_event(event, t)  # raises its RequestFailed
                continue
            choices = obj.get("choices") if type(obj) is dict else None
            if not choices or len(choices) != 1:
                self.feed_object(obj, t)
                continue
            choice = choices[0]
            delta = choice.get("delta")
            if delta:
                content, reasoning = delta.get("content"), delta.get("reasoning_content")
                if content and not reasoning:
                    times.append(t)
                    parts.append(content)
                else:
                    self.add_delta(content, reasoning, t)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def feed_object(self, obj: Mapping[str, Any], t: float) -> None:
        """One parsed chunk (a `chat.completion.chunk`, an sglext/usage chunk or an error event)."""
        choices = obj.get("choices")
        if choices:
            for choice in choices:
                delta = choice.get("delta") or {}
                self.add_delta(delta.get("content"), delta.get("reasoning_content"), t)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
            return
        if "error" in obj:
            raise RequestFailed(f"server reported an error mid-stream: {_error_message(obj)}",
                                body=orjson.dumps(obj).decode())
        usage = obj.get("usage")
        if usage:
            self.add_usage(usage)
        sglext = obj.get("sglext")
        if sglext:
            self.add_sglext(sglext)

    def add_usage(self, usage: Mapping[str, Any]) -> None:
        """The usage chunk; its `prompt_tokens_details.cached_tokens` is there with `--enable-cache-report`."""
        self.usage = (int(usage.get("completion_tokens") or 0), int(usage.get("prompt_tokens") or 0))
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping) and details.get("cached_tokens") is not None:
            self._note_cached(int(details["cached_tokens"]))

    def add_sglext(self, sglext: Mapping[str, Any]) -> None:
        """The `choices: []` sglext chunk: speculative statistics, and `cached_tokens_details`
        (`{"device": X, "host": Y[, "storage": Z, "storage_backend": ...]}`), sent only after a cache hit."""
        if sglext.get("spec_tokens_details"):
            self.add_spec(sglext["spec_tokens_details"])
        details = sglext.get("cached_tokens_details")
        if isinstance(details, Mapping):
            self._note_cached(cached_tier_sum(details))

    def _note_cached(self, count: int) -> None:
        self.cached = count if self.cached is None else max(self.cached, count)

    def add_delta(self, content: str | None, reasoning: str | None, t: float) -> None:
        if content:
            self.times.append(t)
            self.parts.append(reasoning + content if reasoning else content)
        elif reasoning:
            self.times.append(t)
            self.parts.append(reasoning)

    def add_spec(self, details: Mapping[str, Any] | list[Mapping[str, Any]]) -> None:
        first = details[0] if isinstance(details, list) else details
        self.spec = (int(first.get("spec_verify_ct") or 0), float(first.get("spec_accept_length") or 0.0))

    def record(self, request: ChatRequest, sent_at: float = 0.0) -> StreamRecord:
        """The validated result, or RequestFailed naming what is missing."""
        n = len(self.times)
        if not self.done:
            raise RequestFailed(f"stream ended without data: [DONE] after {n} content chunks: the response was "
                                "truncated (did the server die or restart? check its log)")
        if self.usage is None:
            raise RequestFailed("server sent no usage: the stream had no chunk with `usage` although the request "
                                "sets stream_options.include_usage (is this SGLang's OpenAI API?)")
        completion, prompt = self.usage
        if request.ignore_eos and completion != request.max_tokens:
            raise self._length_failure(request.max_tokens, completion)
        if n == 0:
            raise RequestFailed(f"server sent no content: usage says {completion} completion tokens but no chunk "
                                "carried delta.content or delta.reasoning_content")
        return self._build(completion, prompt, self._cached(request), sent_at)

    def _cached(self, request: ChatRequest) -> int | None:
        """No report of a request that asked for `cached_tokens_details` means no hit (SGLang sends the field only
        after one); without asking and without `--enable-cache-report`, unknown."""
        if self.cached is None and request.cache_details:
            return 0
        return self.cached

    def _length_failure(self, asked: int, got: int) -> RequestFailed:
        seen = f"asked {asked}, got {got} (finish_reason={self.finish_reason})"
        if got < asked:
            return RequestFailed(f"short: {seen}; with ignore_eos only max_tokens should end a request: the "
                                 "server stopped it early (context length? abort?) or ignored ignore_eos")
        return RequestFailed(f"long: {seen}; the server generated more than max_tokens")

    def _build(self, completion: int, prompt: int, cached: int | None, sent_at: float) -> StreamRecord:
        times = self.times
        verify_ct, accept_length = self.spec if self.spec is not None else (None, None)
        sample = Sample(
            ttft=times[0], e2e=times[-1], decode_time=times[-1] - times[0],
            completion_tokens=completion, prompt_tokens=prompt, chunks=len(times),
            spec_verify_ct=verify_ct, spec_accept_length=accept_length, cached_tokens=cached,
        )
        return StreamRecord(sample, tuple(times), "".join(self.parts), self.finish_reason, sent_at)


def cached_tier_sum(details: Mapping[str, Any]) -> int:
    """The cached tokens of every tier of a `cached_tokens_details` object (device, host and storage)."""
    return sum(int(value) for key, value in details.items()
               if key != "storage_backend" and isinstance(value, int) and not isinstance(value, bool))


def _data_field(event: bytes) -> bytes | None:
    """The data of a multi-line SSE event (`event: ...` / comments / several `data:` lines), or None."""
    lines = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


def clip_line(text: str) -> str:
    """`text` on one line, cut at _REASON_TEXT_LIMIT characters."""
    line = " ".join(text.split())
    return line if len(line) <= _REASON_TEXT_LIMIT else line[:_REASON_TEXT_LIMIT] + "..."


def _error_message(obj: Any) -> str:
    """SGLang's error text from `{"message": ...}`, `{"error": {"message": ...}}`, `{"error": "..."}`."""
    if isinstance(obj, dict):
        for value in (obj.get("message"), obj.get("error"), obj.get("detail")):
            if isinstance(value, dict):
                return _error_message(value)
            if value:
                return clip_line(str(value))
    return clip_line(str(obj))


def _body_message(text: str) -> str:
    try:
        return _error_message(orjson.loads(text))
    except orjson.JSONDecodeError:
        return clip_line(text) or "(empty body)"


def status_failure(status: int, url: str, body: str) -> RequestFailed:
    """RequestFailed for a non-200 answer, with SGLang's error message and a hint where one helps."""
    hint = _STATUS_HINTS.get(status)
    reason = f"HTTP {status} from POST {url}: {_body_message(body)}" + (f" ({hint})" if hint else "")
    return RequestFailed(reason, status=status, body=body)


def timeout_failure(url: str, request: ChatRequest, chunks: int) -> RequestFailed:
    return RequestFailed(f"timed out after {request.timeout:g} s (ChatRequest.timeout) on POST {url} after "
                         f"{chunks} content chunks: the server is hung or far slower than expected")


def connect_failure(url: str, error: BaseException) -> RequestFailed:
    return RequestFailed(f"cannot connect to {url}: {error} (is the server running? it may have died: "
                         "check its log)")


def broken_failure(url: str, chunks: int, error: BaseException) -> RequestFailed:
    return RequestFailed(f"connection to {url} broke after {chunks} content chunks: {type(error).__name__}: "
                         f"{error or 'closed'} (the server died or dropped the stream: check its log)")


def request_headers(api_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _run_in_new_loop(make: Callable[[], Awaitable[_T]]) -> _T:
    async def main() -> _T:
        return await make()

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main())


def run_sync(make: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine on a private event loop; from inside a running loop, on a short-lived thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_in_new_loop(make)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sglang-perf-client") as pool:
        return pool.submit(_run_in_new_loop, make).result()
