"""`POST /v1/chat/completions` (docs/sglang-0.5.23.md §3): streamed and not, through the batcher.

Streamed, each completed step is its own SSE chunk; when several steps completed since the handler last ran (a
late wake-up, or a fast schedule), they go out in one socket write.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from pytest_sglang_perf.simulator.api.protocol import (
    DONE,
    ChatRequest,
    ChunkEncoder,
    RequestError,
    check_content_type,
    check_request,
    completion_response,
    parse_chat_request,
    sglext_fields,
    token_usage,
    usage_dict,
)
from pytest_sglang_perf.simulator.api.serving import (
    Injected500,
    Timing,
    admit,
    completed_steps,
    cut,
    observe_finished,
    until_finished,
)
from pytest_sglang_perf.simulator.api.web_util import json_response
from pytest_sglang_perf.simulator.engine.batcher import Ticket
from pytest_sglang_perf.simulator.engine.content import estimate_prompt_tokens, prompt_digest, prompt_token_ids
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.requests import Generation, PromptSpec


async def chat_completions(request: web.Request, engine: SimEngine) -> web.StreamResponse:
    start = asyncio.get_running_loop().time()
    try:
        check_content_type(request.headers.get("Content-Type", ""))
        default_usage = bool(engine.setup.resolution.args.get("stream_response_default_include_usage"))
        chat = parse_chat_request(await request.read(), default_usage)
        generation = engine.generation(_prompt(chat, engine))
        admit(engine)
    except RequestError as exc:
        return json_response(exc.body(), status=exc.status)
    except Injected500 as exc:
        return json_response(RequestError(str(exc), "InternalServerError", 500).body(), status=500)
    run = _stream if chat.stream else _complete
    return await run(request, engine, chat, generation, start)


def _prompt(chat: ChatRequest, engine: SimEngine) -> PromptSpec:
    prompt_tokens = estimate_prompt_tokens(chat.messages)
    check_request(chat, prompt_tokens, engine.setup.resolution.context_len)
    return PromptSpec(prompt_digest(chat.messages), prompt_tokens, chat.max_tokens, chat.min_tokens, chat.ignore_eos,
                      chat.seed, prompt_token_ids(chat.messages))


async def _complete(request: web.Request, engine: SimEngine, chat: ChatRequest, generation: Generation,
                    start: float) -> web.Response:
    ticket = engine.submit(generation)
    try:
        await until_finished(ticket)
    finally:
        ticket.abort()
    observe_finished(request, generation, Timing(start, ticket), streaming=False)
    body = completion_response(generation.rid, generation.created, chat, "".join(generation.texts),
                               generation.outcome, _cache_report(engine), _weight_version(engine),
                               ticket.cached_tokens)
    if engine.faults.no_usage:
        body["usage"] = None
    return json_response(body)


async def _stream(request: web.Request, engine: SimEngine, chat: ChatRequest, generation: Generation,
                  start: float) -> web.StreamResponse:
    encoder = ChunkEncoder(generation.rid, generation.created, chat.model)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    ticket = engine.submit(generation)
    cut_after = engine.faults.cut_stream
    burst = engine.faults.burst_at == engine.requests_arrived  # all content in one write, as a buffering proxy
    try:
        pending = [encoder.role()]
        async for first, end in completed_steps(ticket):
            if first == 0:
                await response.prepare(request)
            if cut_after is not None and end > cut_after:
                await response.write(b"".join([*pending, *_content(chat, generation, encoder, first, cut_after,
                                                                   engine, ticket)]))
                cut(request)
                return response
            pending.extend(_content(chat, generation, encoder, first, end, engine, ticket))
            if not burst:
                await response.write(b"".join(pending))
                pending = []
        await response.write(b"".join([*pending, _closing_chunks(engine, chat, generation, encoder, ticket)]))
        await response.write_eof()
    except ConnectionResetError:
        pass
    finally:
        ticket.abort()
    observe_finished(request, generation, Timing(start, ticket), streaming=True)
    return response


def _content(chat: ChatRequest, generation: Generation, encoder: ChunkEncoder, start: int, end: int,
             engine: SimEngine, ticket: Ticket) -> list[bytes]:
    texts = generation.texts
    if not chat.continuous_usage_stats:
        return [encoder.content(texts[i]) for i in range(start, end)]
    counts, prompt = generation.plan.step_tokens, generation.outcome.prompt_tokens
    done = sum(counts[:start])
    chunks = []
    for i in range(start, end):
        done += counts[i]
        usage = token_usage(prompt, done, _cache_report(engine), ticket.cached_tokens)
        chunks.append(encoder.content_with_usage(texts[i], usage))
    return chunks


def _closing_chunks(engine: SimEngine, chat: ChatRequest, generation: Generation, encoder: ChunkEncoder,
                    ticket: Ticket) -> bytes:
    outcome, cached_tokens = generation.outcome, ticket.cached_tokens
    chunks = [encoder.finish(outcome.finish_reason, outcome.matched_stop)]
    sglext = sglext_fields(chat, outcome, cached_tokens)
    if sglext:
        chunks.append(encoder.sglext(sglext.get("spec_tokens_details"), sglext.get("cached_tokens_details")))
    if chat.include_usage and not engine.faults.no_usage:
        chunks.append(encoder.usage(usage_dict(outcome, _cache_report(engine), cached_tokens)))
    chunks.append(DONE)
    return b"".join(chunks)


def _cache_report(engine: SimEngine) -> bool:
    return bool(engine.setup.resolution.args.get("enable_cache_report"))


def _weight_version(engine: SimEngine) -> str:
    return str(engine.setup.resolution.args.get("weight_version") or "default")
