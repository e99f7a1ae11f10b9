"""`POST /generate` (docs/sglang-0.5.23.md §4), streamed and not, through the batcher.

With `--enable-metrics`, meta_info also carries SGLang's request time stats: the scheduler's (`queue_time`,
`forward_entry_time`, `prefill_finished_time`, storage waits) in every object, the tokenizer's
(`request_received_ts`, `first_token_latency`, ..., `decode_throughput`) in the final one
(observability/req_time_stats.py::convert_to_output_meta_info). Wall-clock fields are epoch seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pytest_sglang_perf.simulator.api.generate import (
    GenerateRequest,
    error_object,
    meta_info,
    output_object,
    parse_generate_request,
    sse,
)
from pytest_sglang_perf.simulator.api.protocol import DONE, RequestError, check_prompt_fits
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
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.requests import Generation, PromptSpec


async def generate(request: web.Request, engine: SimEngine) -> web.StreamResponse:
    start = asyncio.get_running_loop().time()
    try:
        parsed = parse_generate_request(await request.read())
        generations = [engine.generation(_prompt(parsed, index, engine)) for index in range(len(parsed.prompts))]
        admit(engine)
    except RequestError as exc:
        engine.log.error(f"[http_server] Error: {exc.message}")
        return json_response(error_object(exc.message), status=exc.status)
    except Injected500 as exc:
        return json_response(error_object(str(exc)), status=500)
    if parsed.stream:
        return await _stream(request, engine, generations[0], start)
    return await _complete(request, engine, parsed, generations, start)


def _prompt(parsed: GenerateRequest, index: int, engine: SimEngine) -> PromptSpec:
    tokens = parsed.prompt_tokens(index)
    check_prompt_fits(tokens, engine.setup.resolution.context_len)
    return PromptSpec(parsed.digest_text(index), tokens, parsed.max_new_tokens, parsed.min_new_tokens,
                      parsed.ignore_eos, None, parsed.prompt_ids(index))


@dataclass(frozen=True)
class _Clock:
    """Converts event-loop times to epoch seconds (SGLang's `*_ts` fields)."""

    offset: float

    @classmethod
    def now(cls) -> _Clock:
        return cls(time.time() - asyncio.get_running_loop().time())

    def wall(self, loop_time: float) -> float:
        return loop_time + self.offset


async def _complete(request: web.Request, engine: SimEngine, parsed: GenerateRequest,
                    generations: Sequence[Generation], start: float) -> web.Response:
    tickets = [engine.submit(generation) for generation in generations]
    try:
        for ticket in tickets:
            await until_finished(ticket)
    finally:
        for ticket in tickets:
            ticket.abort()
    objects = []
    for generation, ticket in zip(generations, tickets, strict=True):
        timing = Timing(start, ticket)
        observe_finished(request, generation, timing, streaming=False)
        objects.append(_object(engine, generation, timing, len(generation.plan.step_tokens), final=True,
                               streamed=False))
    return json_response(objects if parsed.batch else objects[0])


async def _stream(request: web.Request, engine: SimEngine, generation: Generation,
                  start: float) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    ticket = engine.submit(generation)
    timing, total = Timing(start, ticket), len(generation.plan.step_tokens)
    cut_after = engine.faults.cut_stream
    try:
        async for first, end in completed_steps(ticket):
            if first == 0:
                await response.prepare(request)
            stop = end if cut_after is None else min(end, cut_after)
            chunks = [sse(_object(engine, generation, timing, step + 1, final=step + 1 == total, streamed=True))
                      for step in range(first, stop)]
            await response.write(b"".join(chunks))
            if stop < end:
                cut(request)
                return response
        await response.write(DONE)
        await response.write_eof()
    except ConnectionResetError:
        pass
    finally:
        ticket.abort()
    observe_finished(request, generation, timing, streaming=True)
    return response


def _object(engine: SimEngine, generation: Generation, timing: Timing, steps: int, final: bool,
            streamed: bool) -> dict[str, Any]:
    """The output object after `steps` steps: cumulative text and ids (streamed with
    --incremental-streaming-output: only this step's)."""
    delta = streamed and bool(engine.setup.resolution.args.get("incremental_streaming_output"))
    chosen = range(steps - 1, steps) if delta else range(steps)
    text = "".join(generation.texts[i] for i in chosen)
    ids = [token for i in chosen for token in generation.ids[i]]
    done = sum(generation.plan.step_tokens[:steps])
    info = meta_info(generation.rid, generation.outcome, done, _weight_version(engine), final, timing.e2e,
                     timing.ticket.cached_tokens)
    if not final:
        info.pop("weight_versions")
    return output_object(text, ids, _with_time_stats(info, timing, final, streamed and steps == 1, streamed,
                                                     bool(engine.setup.resolution.args.get("enable_metrics"))))


def _with_time_stats(info: dict[str, Any], timing: Timing, final: bool, first: bool, streamed: bool,
                     metrics: bool) -> dict[str, Any]:
    """SGLang's time stats in its order: with --enable-metrics the scheduler's after num_retractions, in every
    object, and the tokenizer's in the final one; `response_sent_to_client_ts` in the first streamed object and in
    a non-streamed answer even without metrics."""
    clock, ticket = _Clock.now(), timing.ticket
    prefill_end = ticket.step_times[0] if ticket.step_times else timing.start
    ordered: dict[str, Any] = {}
    for key, value in info.items():
        ordered[key] = value
        if key == "num_retractions" and metrics:
            ordered.update({"storage_prefetch_wait": 0.0, "storage_staging_wait": 0.0,
                            "forward_entry_time": clock.wall(timing.start),
                            "prefill_finished_time": clock.wall(prefill_end), "queue_time": 0.0})
    if first:
        ordered["response_sent_to_client_ts"] = clock.wall(prefill_end)
    if final and metrics:
        ordered.update(_tokenizer_stats(clock, timing, int(info["completion_tokens"])))
    elif final and not streamed:
        ordered["response_sent_to_client_ts"] = clock.wall(ticket.step_times[-1] if ticket.step_times else prefill_end)
    return ordered


def _tokenizer_stats(clock: _Clock, timing: Timing, completion_tokens: int) -> dict[str, Any]:
    times = timing.ticket.step_times
    end = times[-1] if times else timing.start
    decode = end - times[0] if times else 0.0
    stats: dict[str, Any] = {
        "request_received_ts": clock.wall(timing.start), "first_token_latency": timing.ttft,
        "api_server_dispatch_finish_ts": clock.wall(timing.start),
        "response_sent_to_client_ts": clock.wall(times[0] if times else timing.start),
        "request_finished_ts": clock.wall(end),
    }
    if completion_tokens > 1 and decode > 0:
        stats["decode_throughput"] = (completion_tokens - 1) / decode
    return stats


def _weight_version(engine: SimEngine) -> str:
    return str(engine.setup.resolution.args.get("weight_version") or "default")

