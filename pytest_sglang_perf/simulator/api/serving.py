"""What every generation endpoint shares: admission (faults included), following a request through the batcher,
cutting a stream, and the tokenizer-side metrics of a finished request (the app's SimMetrics, with
`--enable-metrics`).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from pytest_sglang_perf.simulator.api.prometheus import SimMetrics
from pytest_sglang_perf.simulator.engine.batcher import Ticket
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.requests import Generation

METRICS = web.AppKey("metrics", SimMetrics)
"""The app's metrics; set only with `--enable-metrics`."""
INJECTED_500 = ("Internal server error: CUDA error: an illegal memory access was encountered "
                "(simulated: --sim-fault http-500)")


class Injected500(Exception):
    """The `http-500` fault picked this request."""


def admit(engine: SimEngine) -> None:
    """Count a client's generation request and apply the arrival faults: `die-after` SIGKILLs the whole server
    (its scheduler child follows through PR_SET_PDEATHSIG), `http-500` raises Injected500."""
    number = engine.arrive()
    if engine.dies_at(number):
        os.kill(os.getpid(), signal.SIGKILL)
    if engine.fails_with_500(number):
        engine.log.error(f"Error in request: {INJECTED_500.removeprefix('Internal server error: ')}")
        raise Injected500(INJECTED_500)


async def completed_steps(ticket: Ticket) -> AsyncIterator[tuple[int, int]]:
    """(first, end) index ranges of the steps that completed since the last range, as they complete."""
    sent, total = 0, len(ticket.step_tokens)
    while sent < total:
        await ticket.progressed()
        done = ticket.done_steps
        if done > sent:
            yield sent, done
            sent = done


async def until_finished(ticket: Ticket) -> None:
    while not ticket.finished:
        await ticket.progressed()


def cut(request: web.Request) -> None:
    """The `cut-stream` fault: drop the connection without finishing the response (no `data: [DONE]`)."""
    if request.transport is not None:
        request.transport.abort()


@dataclass(frozen=True)
class Timing:
    """Server-side timestamps of one request (event-loop clock), for meta_info and metrics."""

    start: float
    ticket: Ticket

    @property
    def ttft(self) -> float:
        return self.ticket.step_times[0] - self.start if self.ticket.step_times else 0.0

    @property
    def e2e(self) -> float:
        end = self.ticket.step_times[-1] if self.ticket.step_times else asyncio.get_running_loop().time()
        return end - self.start

    def token_gaps(self) -> list[float]:
        """Inter-token latency as SGLang observes it: each output's gap over its new tokens, once per token."""
        times, tokens = self.ticket.step_times, self.ticket.step_tokens
        gaps: list[float] = []
        for index in range(1, len(times)):
            count = max(1, tokens[index])
            gaps.extend([(times[index] - times[index - 1]) / count] * count)
        return gaps


def metrics_of(request: web.Request) -> SimMetrics | None:
    return request.app.get(METRICS)


def observe_finished(request: web.Request, generation: Generation, timing: Timing, streaming: bool) -> None:
    metrics = metrics_of(request)
    if metrics is None or not timing.ticket.finished:
        return
    outcome = generation.outcome
    metrics.first_token(timing.ttft, streaming)
    metrics.inter_token(timing.token_gaps())
    metrics.finished(outcome.prompt_tokens, outcome.completion_tokens, timing.e2e, timing.e2e - timing.ttft,
                     outcome.verify_ct, streaming)
