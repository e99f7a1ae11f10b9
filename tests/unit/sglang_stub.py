"""An in-process HTTP server that streams SGLang 0.5.23 chat chunks byte for byte on a set schedule.

The chunk shapes follow sglang/srt/entrypoints/openai (sse_utils.build_sse_content for the role, content and
finish chunks; ChatCompletionStreamResponse.model_dump_json for the sglext and usage chunks;
create_streaming_error_response for a mid-stream error). `Script` sets the schedule and injects one fault;
the server records what it received and when each content chunk left, for comparison with the client.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import orjson
from aiohttp import web

CHUNK_ID = "6f0c2b1e9d8a4f3b8c7e5a2d1f0e9c8b"
CREATED = 1764410000


@dataclass
class Script:
    """What the server sends for the next requests (tests mutate it between calls)."""

    ttft: float = 0.02
    chunks: int = 10
    interval: float = 0.002
    tokens_per_chunk: int = 1
    together: int = 1
    """Content chunks written at once (one write of that many SSE events, at the last one's time), as a server
    that fell behind sends them: they reach the client in one read."""
    prompt_tokens: int = 9
    spec_verify_ct: int | None = None
    status: int = 200
    error_body: bytes = b""
    api_key: str | None = None
    reported_tokens: int | None = None
    """Completion tokens in the usage chunk; None means chunks * tokens_per_chunk."""
    finish_reason: str = "length"
    truncate_after: int | None = None
    """End the stream cleanly after this many content chunks (no finish/usage/[DONE])."""
    reset_after: int | None = None
    """Reset the TCP connection after this many content chunks."""
    error_after: int | None = None
    """Send SGLang's `{"error": ...}` event and [DONE] after this many content chunks."""
    hang: float = 0.0
    json_answer: bytes | None = None
    """Answer 200 with this JSON body instead of a stream."""
    send_usage: bool = True
    send_content: bool = True
    reasoning: bool = False
    """Stream the text as reasoning_content (a server with --reasoning-parser)."""
    cached_tokens: dict[str, int] | None = None
    """The request's prefix-cache hits by tier (`{"device": 63, "host": 0}`): sent as
    `sglext.cached_tokens_details` when asked; None: no hit, SGLang then sends no such field."""
    cache_report: bool = False
    """The server runs with --enable-cache-report: `usage.prompt_tokens_details = {"cached_tokens": N}`."""
    flush_status: int = 200
    flush_text: str = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                       "waiting requests, the operation will not be performed.)\n")


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]
    t_received: float
    peer: object
    sent: list[float] = field(default_factory=list)
    """perf_counter() right after each content chunk was written."""


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(model: str, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason, "matched_stop": None}
    return _sse({"id": CHUNK_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                 "choices": [choice]})


def _spec_details(verify_ct: int, completion: int) -> dict[str, Any]:
    return {
        "spec_accept_rate": 0.0, "spec_accept_length": completion / verify_ct, "spec_cap_length": 0.0,
        "spec_block_accept_length": 0.0, "spec_num_correct_drafts": completion - verify_ct,
        "spec_num_proposed_drafts": verify_ct * 3, "spec_verify_ct": verify_ct,
        "spec_correct_drafts_histogram": [], "spec_cap_lens_histogram": [],
    }


def _sglext_chunk(model: str, sglext: dict[str, Any]) -> bytes:
    return _sse({"id": CHUNK_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                 "choices": [], "usage": None, "sglext": sglext})


def _usage_chunk(model: str, prompt: int, completion: int, cached: int | None) -> bytes:
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
             "prompt_tokens_details": None if cached is None else {"cached_tokens": cached}, "reasoning_tokens": 0,
             "completion_tokens_details": None}
    return _sse({"id": CHUNK_ID, "object": "chat.completion.chunk", "created": CREATED, "model": model,
                 "choices": [], "usage": usage})


def _error_event(message: str) -> bytes:
    error = {"object": "error", "message": message, "type": "INTERNAL_SERVER_ERROR", "param": None, "code": 500}
    return b"data: " + orjson.dumps({"error": error}) + b"\n\n"


def token_text(index: int, tokens: int) -> str:
    return "".join(f" t{index}.{k}" for k in range(tokens))


class StubServer:
    """aiohttp.web on 127.0.0.1 in a daemon thread; `with StubServer() as s: ... s.url`."""

    def __init__(self) -> None:
        self.script = Script()
        self.received: list[Received] = []
        self.calls: list[str] = []
        """The path and query of every request, in order (`/flush_cache?timeout=30`, `/v1/chat/completions`)."""
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-stub", daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> StubServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._stop(self._runner), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/flush_cache", self._flush)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def _stop(self, runner: web.AppRunner) -> None:
        await runner.cleanup()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _unauthorized(self, request: web.Request) -> bool:
        key = self.script.api_key
        return key is not None and request.headers.get("Authorization") != f"Bearer {key}"

    async def _models(self, request: web.Request) -> web.Response:
        if self._unauthorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        model = {"id": "stub-model", "object": "model", "created": CREATED, "owned_by": "sglang",
                 "root": "stub-model", "parent": None, "max_model_len": 32768}
        return web.json_response({"object": "list", "data": [model]})

    async def _flush(self, request: web.Request) -> web.Response:
        self.calls.append(request.path_qs)
        if self._unauthorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.Response(text=self.script.flush_text, status=self.script.flush_status)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        t_received = perf_counter()
        self.calls.append(request.path_qs)
        body = orjson.loads(await request.read())
        peer = request.transport.get_extra_info("peername") if request.transport else None
        got = Received(dict(request.headers), body, t_received, peer)
        self.received.append(got)
        script = self.script
        if self._unauthorized(request):
            return web.json_response({"error": "Unauthorized"}, status=401)
        if script.json_answer is not None:
            return web.Response(body=script.json_answer, content_type="application/json")
        if script.status != 200:
            return web.Response(body=script.error_body, status=script.status, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await self._stream(request, response, script, got)
        return response

    async def _stream(self, request: web.Request, response: web.StreamResponse, script: Script,
                      got: Received) -> None:
        model = got.body["model"]
        if script.hang:
            await asyncio.sleep(script.hang)
        held = b""
        for index, deadline in enumerate(self._schedule(got.t_received, script)):
            await asyncio.sleep(max(0.0, deadline - perf_counter()))
            if index == 0:
                await response.write(_chunk(model, {"reasoning_content": None, "role": "assistant", "content": ""}))
            if self._fault_before(index, request, script):
                if script.error_after == index:
                    await response.write(_error_event("Generation aborted: out of memory."))
                    await response.write(b"data: [DONE]\n\n")
                return
            if script.send_content:
                held += _chunk(model, self._delta(script, index))
                if (index + 1) % script.together == 0 or index + 1 == script.chunks:
                    await response.write(held)
                    held = b""
            got.sent.append(perf_counter())
        await self._finish(response, script, got.body)

    def _schedule(self, start: float, script: Script) -> Iterator[float]:
        return (start + script.ttft + k * script.interval for k in range(script.chunks))

    def _fault_before(self, index: int, request: web.Request, script: Script) -> bool:
        if script.reset_after == index and request.transport is not None:
            sock = request.transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            request.transport.abort()
            return True
        return index in (script.truncate_after, script.error_after)

    def _delta(self, script: Script, index: int) -> dict[str, Any]:
        text = token_text(index, script.tokens_per_chunk)
        if script.reasoning:
            return {"reasoning_content": text}
        return {"reasoning_content": None, "content": text}

    async def _finish(self, response: web.StreamResponse, script: Script, body: dict[str, Any]) -> None:
        model = body["model"]
        completion = script.reported_tokens
        if completion is None:
            completion = script.chunks * script.tokens_per_chunk
        await response.write(_chunk(model, {"reasoning_content": None}, script.finish_reason))
        sglext: dict[str, Any] = {}
        if script.cached_tokens and body.get("return_cached_tokens_details"):
            sglext["cached_tokens_details"] = script.cached_tokens
        if script.spec_verify_ct and body.get("return_spec_tokens_details"):
            sglext["spec_tokens_details"] = _spec_details(script.spec_verify_ct, completion)
        if sglext:
            await response.write(_sglext_chunk(model, sglext))
        if script.send_usage and body.get("stream_options", {}).get("include_usage"):
            cached = sum((script.cached_tokens or {}).values()) if script.cache_report else None
            await response.write(_usage_chunk(model, script.prompt_tokens, completion, cached))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
