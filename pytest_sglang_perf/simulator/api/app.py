"""The HTTP API (aiohttp): SGLang 0.5.23's health, info, cache, metrics, chat and native generate endpoints
(docs/sglang-0.5.23.md §2.2, §3, §4, §5, §6) and tokenize (docs/prefill.md §1). Generation goes through the engine's
batcher (chat_api.py, generate_api.py).

Auth follows srt/utils/auth.py::decide_request_auth: with `--api-key` (or `--admin-api-key`) every endpoint needs
`Authorization: Bearer <key>` except paths starting with `/health`, `/ready`, `/metrics`; `/flush_cache` is
admin-optional (the admin key when one is set). A refusal is 401 `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from pytest_sglang_perf.simulator.api.chat_api import chat_completions
from pytest_sglang_perf.simulator.api.generate_api import generate
from pytest_sglang_perf.simulator.api.prometheus import CONTENT_TYPE, SimMetrics
from pytest_sglang_perf.simulator.api.serving import METRICS, metrics_of
from pytest_sglang_perf.simulator.api.tokenize_api import tokenize
from pytest_sglang_perf.simulator.api.web_util import json_response
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.logs import SimLogger

ENGINE = web.AppKey("engine", SimEngine)
ACTIVE = web.AppKey("active_requests", set)
OPEN_PREFIXES = ("/health", "/ready", "/metrics")
ADMIN_OPTIONAL = frozenset({"/flush_cache"})
FLUSHED = ("Cache flushed.\nPlease check backend logs for more details. "
           "(When there are running or waiting requests, the operation will not be performed.)\n")
FLUSH_FAILED = "Flush cache failed.\n"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_app(engine: SimEngine) -> web.Application:
    args = engine.setup.resolution.args
    middlewares = [_tracking_middleware]
    if args.get("api_key") or args.get("admin_api_key"):
        middlewares.append(_auth_middleware(args.get("api_key"), args.get("admin_api_key")))
    app = web.Application(middlewares=middlewares)
    app[ENGINE] = engine
    app[ACTIVE] = set()
    for path in ("/health", "/health_generate", "/ready", "/ping"):
        app.router.add_get(path, _health)
    app.router.add_get("/model_info", _model_info)
    app.router.add_get("/get_model_info", _deprecated(_model_info, "/get_model_info", "/model_info"))
    app.router.add_get("/server_info", _server_info)
    app.router.add_get("/get_server_info", _deprecated(_server_info, "/get_server_info", "/server_info"))
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/v1/models/{name}", _model)
    app.router.add_route("GET", "/flush_cache", _flush_cache)
    app.router.add_route("POST", "/flush_cache", _flush_cache)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/v1/tokenize", _tokenize)
    app.router.add_post("/tokenize", _tokenize)
    app.router.add_route("POST", "/generate", _generate)
    app.router.add_route("PUT", "/generate", _generate)
    if args.get("enable_metrics"):
        app[METRICS] = SimMetrics.for_server(engine.setup.resolution)
        app.router.add_get("/metrics", _metrics)
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


@web.middleware
async def _tracking_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Registers the request for shutdown (cancelled on exit) and counts it in the HTTP metrics."""
    metrics = metrics_of(request)
    task = asyncio.current_task()
    request.app[ACTIVE].add(task)
    if metrics is not None:
        metrics.http_started(request.path, request.method)
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    finally:
        request.app[ACTIVE].discard(task)
        if metrics is not None:
            metrics.http_finished(request.path, request.method, status)


def _auth_middleware(api_key: str | None, admin_api_key: str | None) -> Any:
    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if _allowed(request, api_key, admin_api_key):
            return await handler(request)
        return json_response({"error": "Unauthorized"}, status=401)

    return auth


def _allowed(request: web.Request, api_key: str | None, admin_api_key: str | None) -> bool:
    if request.method == "OPTIONS" or request.path.startswith(OPEN_PREFIXES):
        return True
    header = request.headers.get("Authorization", "")
    if request.path in ADMIN_OPTIONAL and admin_api_key:
        return _bearer(header, admin_api_key)
    return _bearer(header, api_key) if api_key else True


def _bearer(header: str, key: str) -> bool:
    scheme, _, token = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token, key)


def _deprecated(handler: Handler, old: str, new: str) -> Handler:
    async def warn_then_handle(request: web.Request) -> web.StreamResponse:
        request.app[ENGINE].log.warning(f"Endpoint '{old}' is deprecated and will be removed in a future version. "
                                        f"Please use '{new}' instead.")
        return await handler(request)

    return warn_then_handle


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200 if request.app[ENGINE].ready else 503)


async def _model_info(request: web.Request) -> web.Response:
    return json_response(request.app[ENGINE].model_info())


async def _server_info(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    if engine.faults.no_server_info:
        return web.Response(status=404, text="Not Found")
    return json_response(engine.server_info())


async def _models(request: web.Request) -> web.Response:
    return json_response(request.app[ENGINE].models_list())


async def _model(request: web.Request) -> web.Response:
    models = request.app[ENGINE].models_list()
    name = request.match_info["name"]
    for card in models["data"]:
        if card["id"] == name:
            return json_response(card)
    return json_response({"error": {"message": f"The model '{name}' does not exist", "type": "invalid_request_error",
                                    "param": "model", "code": "model_not_found"}}, status=404)


async def _flush_cache(request: web.Request) -> web.Response:
    """Acts only when the scheduler is idle; `?timeout=<s>` waits that long for idle (docs/sglang-0.5.23.md §2.2)."""
    try:
        timeout = float(request.query.get("timeout", "0") or 0)
    except ValueError:
        return json_response({"detail": [{"type": "float_parsing", "loc": ["query", "timeout"],
                                          "msg": "Input should be a valid number"}]}, status=422)
    failure = await request.app[ENGINE].flush_cache(timeout)
    if failure is None:
        return web.Response(text=FLUSHED)
    return web.Response(text=failure or FLUSH_FAILED, status=400)


async def _metrics(request: web.Request) -> web.Response:
    text = request.app[METRICS].render(request.app[ENGINE].metrics_snapshot())
    return web.Response(body=text.encode(), headers={"Content-Type": CONTENT_TYPE})


async def _chat(request: web.Request) -> web.StreamResponse:
    return await chat_completions(request, request.app[ENGINE])


async def _tokenize(request: web.Request) -> web.Response:
    return await tokenize(request, request.app[ENGINE])


async def _generate(request: web.Request) -> web.StreamResponse:
    return await generate(request, request.app[ENGINE])
