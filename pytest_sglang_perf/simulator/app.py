"""The HTTP API (aiohttp): SGLang 0.5.23's health, info and OpenAI chat endpoints (reference §2.2, §3, §5).

Streamed tokens are scheduled against absolute deadlines from the request start. Each step is its own
SSE chunk; when the loop wakes up late, every step already due goes out in one socket write, so a late
wake-up costs no throughput and shifts no later token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from pytest_sglang_perf.simulator.engine import Generation, SimEngine
from pytest_sglang_perf.simulator.logs import SimLogger
from pytest_sglang_perf.simulator.protocol import (
    DONE,
    ChatRequest,
    ChunkEncoder,
    RequestError,
    check_content_type,
    completion_response,
    parse_chat_request,
    spec_tokens_details,
    usage_dict,
)

ENGINE = web.AppKey("engine", SimEngine)
ACTIVE = web.AppKey("active_requests", set)
_OPEN_PREFIXES = ("/health", "/ready", "/metrics")
_FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(engine: SimEngine) -> web.Application:
    middlewares = [_auth_middleware(str(engine.setup.resolution.args["api_key"]))] \
        if engine.setup.resolution.args.get("api_key") else []
    app = web.Application(middlewares=middlewares)
    app[ENGINE] = engine
    app[ACTIVE] = set()
    app.router.add_get("/health", _health)
    app.router.add_get("/health_generate", _health)
    app.router.add_get("/ready", _health)
    app.router.add_get("/ping", _health)
    app.router.add_get("/model_info", _model_info)
    app.router.add_get("/get_model_info", _deprecated(_model_info, "/get_model_info", "/model_info"))
    app.router.add_get("/server_info", _server_info)
    app.router.add_get("/get_server_info", _deprecated(_server_info, "/get_server_info", "/server_info"))
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/v1/models/{name}", _model)
    app.router.add_route("*", "/flush_cache", _flush_cache)
    app.router.add_post("/v1/chat/completions", _chat_completions)
    return app


def access_logger_class(log: SimLogger) -> type[AbstractAccessLogger]:
    """uvicorn-style access lines through the simulator's logger."""

    class UvicornAccessLogger(AbstractAccessLogger):
        def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
            peer = request.transport.get_extra_info("peername") if request.transport else None
            client = f"{peer[0]}:{peer[1]}" if peer else str(request.remote)
            version = f"{request.version.major}.{request.version.minor}"
            log.access(client, f"{request.method} {request.path_qs} HTTP/{version}", response.status)

    return UvicornAccessLogger


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _auth_middleware(api_key: str) -> Any:
    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(_OPEN_PREFIXES) or request.headers.get("Authorization") == f"Bearer {api_key}":
            return await handler(request)
        return _json({"error": "Unauthorized"}, status=401)

    return auth


def _deprecated(handler: Handler, old: str, new: str) -> Handler:
    async def warn_then_handle(request: web.Request) -> web.StreamResponse:
        request.app[ENGINE].log.warning(f"Endpoint '{old}' is deprecated and will be removed in a future version. "
                                        f"Please use '{new}' instead.")
        return await handler(request)

    return warn_then_handle


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200 if request.app[ENGINE].ready else 503)


async def _model_info(request: web.Request) -> web.Response:
    return _json(request.app[ENGINE].model_info())


async def _server_info(request: web.Request) -> web.Response:
    return _json(request.app[ENGINE].server_info())


async def _models(request: web.Request) -> web.Response:
    return _json(request.app[ENGINE].models_list())


async def _model(request: web.Request) -> web.Response:
    models = request.app[ENGINE].models_list()
    name = request.match_info["name"]
    for card in models["data"]:
        if card["id"] == name:
            return _json(card)
    return _json({"error": {"message": f"The model '{name}' does not exist", "type": "invalid_request_error",
                            "param": "model", "code": "model_not_found"}}, status=404)


async def _flush_cache(request: web.Request) -> web.Response:
    request.app[ENGINE].stats.reset()
    return web.Response(text=_FLUSHED)


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    engine = request.app[ENGINE]
    start = asyncio.get_running_loop().time()
    try:
        check_content_type(request.headers.get("Content-Type", ""))
        default_usage = bool(engine.setup.resolution.args.get("stream_response_default_include_usage"))
        chat = parse_chat_request(await request.read(), default_usage)
        generation = engine.generation(chat)
    except RequestError as exc:
        return _json(exc.body(), status=exc.status)
    task = asyncio.current_task()
    assert task is not None
    request.app[ACTIVE].add(task)
    engine.stats.start_request(generation.outcome.prompt_tokens)
    try:
        run = _stream if chat.stream else _complete
        return await run(request, engine, chat, generation, start)
    finally:
        engine.stats.finish_request(generation.outcome.prompt_tokens + generation.outcome.completion_tokens)
        request.app[ACTIVE].discard(task)


async def _sleep_until(deadline: float) -> None:
    delay = deadline - asyncio.get_running_loop().time()
    if delay > 0:
        await asyncio.sleep(delay)


async def _complete(request: web.Request, engine: SimEngine, chat: ChatRequest, generation: Generation,
                    start: float) -> web.Response:
    plan = generation.plan
    await _sleep_until(start + plan.ttft)
    engine.log.info(engine.prefill_line(generation.outcome.prompt_tokens, plan.ttft), engine.scheduler_prefix)
    await _sleep_until(start + plan.duration)
    for line in engine.stats.record_steps(plan.step_tokens[1:]):
        engine.log.info(line, engine.scheduler_prefix)
    body = completion_response(generation.rid, generation.created, chat, "".join(generation.texts),
                               generation.outcome, _cache_report(engine), _weight_version(engine))
    return _json(body)


async def _stream(request: web.Request, engine: SimEngine, chat: ChatRequest, generation: Generation,
                  start: float) -> web.StreamResponse:
    plan, encoder = generation.plan, ChunkEncoder(generation.rid, generation.created, chat.model)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await _sleep_until(start + plan.ttft)
    await response.prepare(request)
    engine.log.info(engine.prefill_line(generation.outcome.prompt_tokens, plan.ttft), engine.scheduler_prefix)
    try:
        await _stream_steps(response, engine, chat, generation, encoder, start)
        await response.write(_closing_chunks(engine, chat, generation, encoder))
        await response.write_eof()
    except ConnectionResetError:
        pass
    return response


async def _stream_steps(response: web.StreamResponse, engine: SimEngine, chat: ChatRequest, generation: Generation,
                        encoder: ChunkEncoder, start: float) -> None:
    loop = asyncio.get_running_loop()
    times, total = generation.plan.step_times, len(generation.plan.step_times)
    pending = [encoder.role()]
    index = 0
    while index < total:
        await _sleep_until(start + times[index])
        now = loop.time() - start
        end = index + 1
        while end < total and times[end] <= now:
            end += 1
        pending.extend(_content_chunks(chat, generation, encoder, index, end))
        await response.write(b"".join(pending))
        pending = []
        for line in engine.stats.record_steps(generation.plan.step_tokens[max(index, 1):end]):
            engine.log.info(line, engine.scheduler_prefix)
        index = end
    if pending:
        await response.write(b"".join(pending))


def _content_chunks(chat: ChatRequest, generation: Generation, encoder: ChunkEncoder, start: int,
                    end: int) -> list[bytes]:
    texts = generation.texts
    if not chat.continuous_usage_stats:
        return [encoder.content(texts[i]) for i in range(start, end)]
    counts, prompt = generation.plan.step_tokens, generation.outcome.prompt_tokens
    done = sum(counts[:start])
    chunks = []
    for i in range(start, end):
        done += counts[i]
        usage = {"prompt_tokens": prompt, "total_tokens": prompt + done, "completion_tokens": done,
                 "prompt_tokens_details": None, "reasoning_tokens": 0, "completion_tokens_details": None}
        chunks.append(encoder.content_with_usage(texts[i], usage))
    return chunks


def _closing_chunks(engine: SimEngine, chat: ChatRequest, generation: Generation, encoder: ChunkEncoder) -> bytes:
    outcome = generation.outcome
    chunks = [encoder.finish(outcome.finish_reason, outcome.matched_stop)]
    details = spec_tokens_details(outcome) if chat.return_spec_tokens_details else None
    if details is not None:
        chunks.append(encoder.sglext(details))
    if chat.include_usage:
        chunks.append(encoder.usage(usage_dict(outcome, _cache_report(engine))))
    chunks.append(DONE)
    return b"".join(chunks)


def _cache_report(engine: SimEngine) -> bool:
    return bool(engine.setup.resolution.args.get("enable_cache_report"))


def _weight_version(engine: SimEngine) -> str:
    return str(engine.setup.resolution.args.get("weight_version") or "default")
