"""Continuous batching: one scheduler loop runs the steps, and every running request shares each step's time.

Like SGLang's scheduler (docs/sglang-0.5.23.md §7.2, §7.3): at each step boundary, requests that have arrived are
admitted (up to `max_running_requests` running and `max_prefill_tokens` new tokens) and prefilled together in one step,
which pauses decoding (the part of a prompt the radix cache holds, radix.py, is not prefilled again). With chunked
prefill (`chunked_prefill_size` C > 0) a step computes at most C new tokens: a longer prompt is cut, its first C
tokens prefilled in this step and the rest in the next ones, C at a time and before anything else (SGLang's
`chunked_req`), one `Prefill batch` line per chunk (docs/prefill.md §3); its first token comes after the last chunk.
Otherwise one
decode step (one speculative round) runs for the whole running batch and every request gets its next tokens. A
step's duration comes from `Pacing` (the roofline model or the knobs) for the batch as it is, so aggregate
throughput grows with concurrency while each stream slows a little.

Steps are laid on a clock of absolute deadlines (the event loop's time): when the loop wakes late, the steps already
due are completed at once, so a late wake-up costs no throughput and shifts no later step. The loop yields to the
HTTP handlers at least every YIELD_EVERY seconds of catch-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean

from pytest_sglang_perf.simulator.engine.decode_stats import DecodeStats
from pytest_sglang_perf.simulator.engine.radix import RadixCache
from pytest_sglang_perf.simulator.engine.schedule import Pacing

YIELD_EVERY = 0.002


@dataclass(eq=False)
class Ticket:
    """One request inside the batcher: its pre-drawn tokens per step and how far it got."""

    step_tokens: tuple[int, ...]
    prompt_tokens: int
    jitter: float
    arrival: float
    prompt_ids: tuple[int, ...] = ()
    cached_tokens: int = 0
    """Prompt tokens the prefill read from the radix cache (set when the request is admitted)."""
    prefilled: int = 0
    """New prompt tokens computed so far (chunked prefill: less than new_tokens until the last chunk)."""
    done_steps: int = 0
    generated: int = 0
    """Tokens of the completed steps."""
    step_times: list[float] = field(default_factory=list)
    """Loop time at which each completed step ended."""
    aborted: bool = False
    _event: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.done_steps >= len(self.step_tokens)

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def new_tokens(self) -> int:
        """Prompt tokens its prefill computes."""
        return self.prompt_tokens - self.cached_tokens

    @property
    def unprefilled(self) -> int:
        """New prompt tokens its prefill has still to compute."""
        return self.new_tokens - self.prefilled

    async def progressed(self) -> None:
        """Wait until at least one more step completed (or the request finished)."""
        await self._event.wait()
        self._event.clear()

    def abort(self) -> None:
        """The client went away: the batcher drops it at the next step boundary."""
        self.aborted = True

    def _advance(self, now: float) -> None:
        self.generated += self.step_tokens[self.done_steps]
        self.done_steps += 1
        self.step_times.append(now)
        self._event.set()


@dataclass(frozen=True)
class _Chunk:
    """What one prefill step computes of one request: `tokens` new tokens after `prefix` already in its KV cache."""

    ticket: Ticket
    tokens: int
    prefix: int


@dataclass(frozen=True)
class _Step:
    end: float
    graph: bool
    prefill: tuple[_Chunk, ...] = ()
    decode: tuple[Ticket, ...] = ()


class Batcher:
    def __init__(self, pacing: Pacing, stats: DecodeStats, max_running: int, max_prefill_tokens: int,
                 emit: Callable[[str], None], cache: RadixCache | None = None, chunk_size: int = 0) -> None:
        self.pacing, self.stats = pacing, stats
        self.chunk_size = chunk_size
        """chunked_prefill_size: new tokens one prefill step computes at most; 0 or less: no chunking."""
        self._chunked: Ticket | None = None
        """The request whose prompt is being prefilled chunk by chunk."""
        self.cache = cache if cache is not None else RadixCache(enabled=False)
        self.max_running, self.max_prefill_tokens = max(1, max_running), max(1, max_prefill_tokens)
        self.emit = emit
        self.slow_factor = 1.0
        """Multiplies every step from now on (the `slow-after` fault)."""
        self.on_forward: Callable[[str, bool, int], None] | None = None
        """Told of each forward pass: ("prefill" or "decode", whether a CUDA graph ran it, its new tokens)."""
        self.clock = 0.0
        self._waiting: deque[Ticket] = deque()
        self._running: list[Ticket] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._last_yield = 0.0

    # -- what the HTTP side uses -------------------------------------------------------------------

    def submit(self, step_tokens: tuple[int, ...], prompt_tokens: int, jitter: float = 1.0,
               prompt_ids: tuple[int, ...] = ()) -> Ticket:
        ticket = Ticket(step_tokens, prompt_tokens, jitter, asyncio.get_running_loop().time(), prompt_ids)
        if not step_tokens:
            ticket._event.set()
            return ticket
        self._waiting.append(ticket)
        self._idle.clear()
        self._wake.set()
        return ticket

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def running_tokens(self) -> int:
        return sum(ticket.context_tokens for ticket in self._running)

    @property
    def idle(self) -> bool:
        return not self._running and not self._waiting and self._chunked is None

    async def wait_idle(self, timeout: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        return self.idle

    # -- the scheduler loop ------------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.clock = self._last_yield = loop.time()
        self.stats.start(self.clock)
        while True:
            self._drop_aborted()
            if self.idle:
                await self._sleep_until_work(loop)
                continue
            step = self._plan_step()
            if step is None:
                continue
            await self._until(loop, step.end)
            self._complete(step)

    async def _sleep_until_work(self, loop: asyncio.AbstractEventLoop) -> None:
        self._idle.set()
        self._wake.clear()
        await self._wake.wait()
        self.clock = max(self.clock, loop.time())

    def _plan_step(self) -> _Step | None:
        admitted = self._admit()
        if admitted:
            return self._prefill_step(tuple(admitted))
        if self._running:
            return self._decode_step()
        self.clock = max(self.clock, min(t.arrival for t in self._waiting))  # nothing runs until it arrives
        return None

    def _admit(self) -> list[_Chunk]:
        """What the next prefill step computes: the rest of a chunked prompt first (at most one chunk of it), then
        arrived requests, first come first served, within the free slots and the step's token budget (of new tokens:
        what the radix cache holds of a prompt is not prefilled); with chunked prefill, the request that does not
        fit whole is cut to the budget left and continues in the next steps."""
        chunking = self.chunk_size > 0
        budget = min(self.chunk_size, self.max_prefill_tokens) if chunking else self.max_prefill_tokens
        admitted: list[_Chunk] = []
        if self._chunked is not None:
            ticket = self._chunked
            admitted.append(_Chunk(ticket, min(ticket.unprefilled, budget), ticket.cached_tokens + ticket.prefilled))
            budget -= admitted[-1].tokens
        while self._waiting and budget > 0 and len(self._running) + len(admitted) < self.max_running:
            ticket = self._waiting[0]
            if ticket.arrival > self.clock:
                break
            ticket.cached_tokens = self.cache.match(ticket.prompt_ids)
            if ticket.new_tokens > budget and (admitted and not chunking):
                break
            self._waiting.popleft()
            take = min(ticket.new_tokens, budget) if chunking else ticket.new_tokens
            admitted.append(_Chunk(ticket, take, ticket.cached_tokens))
            budget -= take
        return admitted

    def _prefill_step(self, admitted: tuple[_Chunk, ...]) -> _Step:
        new_tokens = sum(chunk.tokens for chunk in admitted)
        cached_tokens = sum(chunk.ticket.cached_tokens for chunk in admitted if chunk.ticket.prefilled == 0)
        graph = self.pacing.costs.uses_prefill_graph(new_tokens)
        self.emit(self.stats.prefill_line(len(admitted), new_tokens, len(self._running), self.running_tokens,
                                          len(self._waiting), graph, self.clock, cached_tokens))
        factor = fmean(chunk.ticket.jitter for chunk in admitted) * self.slow_factor
        attention = sum(self.pacing.costs.attention_flops(chunk.tokens, chunk.prefix) for chunk in admitted)
        finishing = sum(1 for chunk in admitted if chunk.tokens == chunk.ticket.unprefilled)
        # --sim-ttft prices a whole prompt: a chunk takes its share (what this step does not compute counts as read)
        elsewhere = sum(chunk.ticket.prompt_tokens - chunk.tokens for chunk in admitted)
        seconds = self.pacing.prefill(new_tokens, factor, elsewhere, attention, finishing)
        return _Step(self.clock + seconds, graph, prefill=admitted)

    def _decode_step(self) -> _Step:
        batch = tuple(self._running)
        factor = fmean(t.jitter for t in batch) * self.slow_factor
        seconds = self.pacing.decode_step(len(batch), self.running_tokens, factor)
        return _Step(self.clock + seconds, self.pacing.costs.uses_decode_graph(len(batch)), decode=batch)

    async def _until(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        now = loop.time()
        if deadline > now:
            await asyncio.sleep(deadline - now)
            self._last_yield = loop.time()
        elif now - self._last_yield >= YIELD_EVERY:  # behind schedule: let the handlers write what is due
            await asyncio.sleep(0)
            self._last_yield = loop.time()

    def _complete(self, step: _Step) -> None:
        self.clock = step.end
        self._chunked = None
        for chunk in step.prefill:
            ticket = chunk.ticket
            ticket.prefilled += chunk.tokens
            if ticket.unprefilled > 0:  # SGLang caches a chunked request's computed part: a later prompt may hit it
                self.cache.insert(ticket.prompt_ids[:ticket.cached_tokens + ticket.prefilled])
                self._chunked = ticket
                continue
            self.cache.insert(ticket.prompt_ids)
            ticket._advance(step.end)
            if not ticket.finished:
                self._running.append(ticket)
        if step.prefill and self.on_forward is not None:
            self.on_forward("prefill", step.graph, sum(chunk.tokens for chunk in step.prefill))
        if step.decode:
            self._complete_decode(step)
        self._running = [t for t in self._running if not t.finished and not t.aborted]

    def _complete_decode(self, step: _Step) -> None:
        tokens = [t.step_tokens[t.done_steps] for t in step.decode if not t.finished]
        for ticket in step.decode:
            if not ticket.finished:
                ticket._advance(step.end)
        if self.on_forward is not None:
            self.on_forward("decode", step.graph, sum(tokens))
        line = self.stats.decode_step(tokens, sum(t.context_tokens for t in step.decode), step.graph,
                                      len(self._waiting), step.end)
        if line is not None:
            self.emit(line)

    def _drop_aborted(self) -> None:
        if self._chunked is not None and self._chunked.aborted:
            self._chunked = None
        if any(t.aborted for t in self._waiting):
            self._waiting = deque(t for t in self._waiting if not t.aborted)
        self._running = [t for t in self._running if not t.aborted]
