"""The simulated engine behind the HTTP API: readiness, request planning, the batcher, the info payloads and the
scheduler's metrics (factory.py builds it)."""

from __future__ import annotations

import asyncio
import enum
import itertools
import random
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pytest_sglang_perf.simulator.args.faults import Faults
from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.engine import info
from pytest_sglang_perf.simulator.engine.batcher import Batcher, Ticket
from pytest_sglang_perf.simulator.engine.content import natural_length, request_key, token_ids, token_texts
from pytest_sglang_perf.simulator.engine.decode_stats import DecodeStats
from pytest_sglang_perf.simulator.engine.radix import RadixCache
from pytest_sglang_perf.simulator.engine.requests import Generation, Outcome, PromptSpec
from pytest_sglang_perf.simulator.engine.roofline import StepCosts
from pytest_sglang_perf.simulator.engine.schedule import Acceptance, Pacing, TokenPlan, jitter_factor, plan_tokens
from pytest_sglang_perf.simulator.engine.scheduler_metrics import (
    SchedulerGauges,
    SchedulerMetrics,
    SchedulerSnapshot,
    StartupFigures,
)
from pytest_sglang_perf.simulator.engine.setup import EngineSetup
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes

WARMUP_PROMPT_TOKENS = 7
"""SGLang's warmup prompt, "The capital city of France is"."""
WARMUP_MAX_NEW_TOKENS = 8


class ServerStatus(enum.Enum):
    STARTING = "Starting"
    UP = "Up"
    EXITING = "Exiting"


class SimEngine:
    def __init__(self, setup: EngineSetup, log: SimLogger) -> None:
        self.setup, self.log = setup, log
        self.status = ServerStatus.STARTING
        self.faults: Faults = setup.knobs.faults
        resolution, knobs = setup.resolution, setup.knobs
        spec = resolution.spec
        self.acceptance = Acceptance.from_knobs(knobs, spec)
        self.costs = StepCosts.build(setup.model, resolution, setup.gpu, setup.memory.decode_capture_bs)
        boot_offset = jitter_factor(random.Random(f"{knobs.noise_seed}|boot-offset"), knobs.offset_noise)
        self.pacing = Pacing.from_knobs(knobs, self.costs, self.acceptance, boot_offset)
        self.scheduler_prefix = rank_prefixes(resolution.tp_size)[0]
        self.stats = DecodeStats(
            interval=max(1, int(resolution.args.get("decode_log_interval") or 40)),
            max_total_tokens=setup.memory.kv_tokens, num_draft_tokens=spec.num_draft_tokens if spec else 0,
            graph_label="cpu graph" if resolution.args.get("device") == "cpu" else "cuda graph",
            extra="waiting-image-req: 0, " if _waits_for_images(resolution) else "",
        )
        self.cache = RadixCache(enabled=not resolution.args.get("disable_radix_cache"),
                                page_size=int(resolution.args.get("page_size") or 1), capacity=setup.memory.kv_tokens)
        self.batcher = Batcher(self.pacing, self.stats, setup.memory.max_running_requests,
                               int(resolution.args.get("max_prefill_tokens") or 16384), self._scheduler_line,
                               self.cache, chunk_size=int(resolution.args.get("chunked_prefill_size") or 0))
        self._metrics: SchedulerMetrics | None = None
        self._counter = itertools.count()
        self.requests_arrived = 0
        self._flush_waiting = False
        self._task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        return self.status is ServerStatus.UP

    def start(self, on_crash: Callable[[BaseException], None] | None = None) -> None:
        """Start the scheduler loop (inside the running event loop) and, with `--enable-metrics`, its metrics.
        Should the loop ever raise, `on_crash` gets the exception (the server ends the process as SGLang does)."""
        self._task = asyncio.ensure_future(self.batcher.run())
        self._task.add_done_callback(lambda task: self._loop_ended(task, on_crash))
        if self.setup.resolution.args.get("enable_metrics"):
            self._metrics = SchedulerMetrics(StartupFigures.of(self.setup), self._gauges())
            self.batcher.on_forward = self._metrics.forward

    def metrics_snapshot(self) -> SchedulerSnapshot | None:
        """The scheduler's metrics now; None without `--enable-metrics` or before start()."""
        return None if self._metrics is None else self._metrics.snapshot()

    def _gauges(self) -> SchedulerGauges:
        return SchedulerGauges.read(self.batcher, self.setup.resolution.spec)

    def _loop_ended(self, task: asyncio.Task[None], on_crash: Callable[[BaseException], None] | None) -> None:
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        assert error is not None
        self.log.error("Scheduler hit an exception: " + "".join(traceback.format_exception(error)).rstrip(),
                       self.scheduler_prefix)
        if on_crash is not None:
            on_crash(error)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _scheduler_line(self, line: str) -> None:
        self.log.info(line, self.scheduler_prefix)
        if self._metrics is not None:
            self._metrics.gauges = self._gauges()

    # ---- requests ----------------------------------------------------------------------------------

    def arrive(self) -> int:
        """Count a client's generation request (1-based); applies the `slow-after` fault from here on."""
        self.requests_arrived += 1
        self.batcher.slow_factor = self.faults.slow_factor(self.requests_arrived)
        return self.requests_arrived

    def fails_with_500(self, number: int) -> bool:
        """The `http-500:P` fault: whether request `number` is answered with HTTP 500 (seeded)."""
        if self.faults.http_500 <= 0:
            return False
        return random.Random(f"{self.setup.knobs.seed}|http-500|{number}").random() < self.faults.http_500

    def dies_at(self, number: int) -> bool:
        """The `die-after:N` fault: whether the server dies as request `number` arrives."""
        return self.faults.die_after is not None and number > self.faults.die_after

    def generation(self, prompt: PromptSpec) -> Generation:
        """Plan a request: its output length, its tokens per step, their texts and ids, its jitter."""
        counter = next(self._counter)
        knobs = self.setup.knobs
        key = request_key(knobs.seed, prompt.seed, counter, prompt.digest)
        num_tokens, finish = self._output_length(prompt, key)
        plan = plan_tokens(num_tokens, self.acceptance, random.Random(f"{key}|accept"))
        jitter = jitter_factor(random.Random(f"{knobs.noise_seed}|jitter|{counter}"), knobs.noise)
        texts, ids = _chunk_tokens(key, plan.step_tokens, self.setup.model.vocab_size)
        return Generation(uuid.uuid4().hex, int(time.time()), plan, texts, ids,
                          self._outcome(plan, prompt.prompt_tokens, finish), jitter, prompt.token_ids)

    def _output_length(self, prompt: PromptSpec, key: str) -> tuple[int, str]:
        if prompt.ignore_eos:
            limit = prompt.max_tokens
            length = limit if limit is not None else self.setup.resolution.context_len - prompt.prompt_tokens
            if self.faults.short:
                length = max(1, length - self.faults.short) if length > 0 else length
            return length, "length"
        length = natural_length(key, prompt.max_tokens, prompt.min_tokens)
        if self.faults.short and length > 0:
            return max(1, length - self.faults.short), "length"
        return length, "stop"

    def _outcome(self, plan: TokenPlan, prompt_tokens: int, finish: str) -> Outcome:
        spec = self.setup.resolution.spec
        return Outcome(
            prompt_tokens=prompt_tokens, completion_tokens=plan.completion_tokens, finish_reason=finish,
            matched_stop=self.setup.model.eos_token_id if finish == "stop" else None,
            verify_ct=plan.verify_ct, correct_drafts=plan.correct_drafts,
            correct_drafts_histogram=plan.correct_drafts_histogram,
            num_draft_tokens=spec.num_draft_tokens if spec else 0,
        )

    def submit(self, generation: Generation) -> Ticket:
        """Queue a planned request; its ticket says, once admitted, how much of its prompt the radix cache held."""
        return self.batcher.submit(generation.plan.step_tokens, generation.outcome.prompt_tokens, generation.jitter,
                                   generation.prompt_ids)

    async def warmup(self) -> None:
        """The startup warmup request (8 new tokens at temperature 0) through the scheduler; SGLang counts it in
        its decode statistics until a /flush_cache."""
        prompt = PromptSpec("warmup", WARMUP_PROMPT_TOKENS, WARMUP_MAX_NEW_TOKENS, 0, False, 0)
        plan = plan_tokens(WARMUP_MAX_NEW_TOKENS, self.acceptance, random.Random("warmup"))
        ticket = self.batcher.submit(plan.step_tokens, prompt.prompt_tokens)
        while not ticket.finished:
            await ticket.progressed()

    @property
    def warmup_path(self) -> str:
        """VLMs warm up through the chat API with an image (http_server.py::_execute_server_warmup)."""
        return "/v1/chat/completions" if self.setup.model.is_multimodal else "/generate"

    async def flush_cache(self, timeout: float) -> str | None:
        """SchedulerFlushWrapper: flush now when idle, or wait up to `timeout` s for idle; None when flushed (the
        radix cache emptied, the decode statistics reset), else the failure message ("" when SGLang gives none)."""
        if self._flush_waiting:
            return "Another flush_cache is already in progress."
        if self.batcher.idle or (timeout > 0 and await self._wait_idle(timeout)):
            self.cache.reset()
            self.stats.reset(asyncio.get_running_loop().time())
            self.log.info("Cache flushed successfully!", self.scheduler_prefix)
            return None
        if timeout > 0:
            self.log.warning("Deferred flush_cache timed out while waiting for idle state.")
            return "Timed out waiting for idle state."
        self.log.warning(f"Cache not flushed because there are pending requests. #queue-req: {self.batcher.queued}, "
                         f"#running-req: {self.batcher.running}")
        return ""

    async def _wait_idle(self, timeout: float) -> bool:
        """A deferred flush: one at a time, like SchedulerFlushWrapper's single pending slot."""
        self._flush_waiting = True
        try:
            return await self.batcher.wait_idle(timeout)
        finally:
            self._flush_waiting = False

    # ---- info endpoints ------------------------------------------------------------------------

    def model_info(self) -> dict[str, Any]:
        return info.model_info(self.setup)

    def models_list(self) -> dict[str, Any]:
        return info.models_list(self.setup)

    def server_info(self) -> dict[str, Any]:
        return info.server_info(self.setup, self.stats)


def _waits_for_images(resolution: Resolution) -> bool:
    """metrics_reporter.py: decode lines of a language-only server that receives images in the scheduler."""
    args = resolution.args
    return bool(args.get("language_only")) and args.get("encoder_transfer_backend") == "zmq_to_scheduler"


def _chunk_tokens(key: str, step_tokens: Sequence[int],
                  vocab_size: int) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    total = sum(step_tokens)
    texts, ids = token_texts(key, total), token_ids(key, total, vocab_size)
    step_texts, step_ids, start = [], [], 0
    for count in step_tokens:
        step_texts.append("".join(texts[start:start + count]))
        step_ids.append(tuple(ids[start:start + count]))
        start += count
    return tuple(step_texts), tuple(step_ids)
