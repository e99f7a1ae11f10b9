"""The simulated engine behind the HTTP API: readiness, per-request generation plans, info endpoints."""

from __future__ import annotations

import enum
import itertools
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.simulator.boot import GRAPH_PHASES, StartupTime
from pytest_sglang_perf.simulator.content import (
    estimate_prompt_tokens,
    natural_length,
    prompt_digest,
    request_key,
    token_texts,
)
from pytest_sglang_perf.simulator.decode_stats import DecodeStats
from pytest_sglang_perf.simulator.knobs import Knobs
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes
from pytest_sglang_perf.simulator.memory import MemoryPlan
from pytest_sglang_perf.simulator.model import ModelConfig
from pytest_sglang_perf.simulator.protocol import ChatRequest, Outcome, check_request
from pytest_sglang_perf.simulator.resolve import Resolution
from pytest_sglang_perf.simulator.schedule import RequestPlan, Timing, jitter_factor, plan_request

SGLANG_VERSION = "0.5.23"
WARMUP_PROMPT_TOKENS = 7
WARMUP_MAX_NEW_TOKENS = 8


class ServerStatus(enum.Enum):
    STARTING = "Starting"
    UP = "Up"
    EXITING = "Exiting"


@dataclass(frozen=True)
class EngineSetup:
    """Everything decided before the HTTP server starts."""

    resolution: Resolution
    model: ModelConfig
    memory: MemoryPlan
    knobs: Knobs
    scheduler_startup: StartupTime
    tokenizer_e2e: float
    launch_command: str


@dataclass(frozen=True)
class Generation:
    """One request, planned: its id, timing schedule, chunk texts and final numbers."""

    rid: str
    created: int
    plan: RequestPlan
    texts: tuple[str, ...]
    """Text of each chunk, aligned with plan.step_times."""
    outcome: Outcome


class SimEngine:
    def __init__(self, setup: EngineSetup, log: SimLogger) -> None:
        self.setup, self.log = setup, log
        self.status = ServerStatus.STARTING
        spec = setup.resolution.spec
        self.timing = Timing.from_knobs(setup.knobs, spec)
        self.stats = DecodeStats(
            interval=max(1, int(setup.resolution.args.get("decode_log_interval") or 40)),
            max_total_tokens=setup.memory.kv_tokens, num_draft_tokens=spec.num_draft_tokens if spec else 0,
            cuda_graph_max_bs=max(setup.memory.decode_capture_bs, default=0)
            if setup.resolution.cuda_graph.decode.enabled else 0,
        )
        self._counter = itertools.count()
        self.scheduler_prefix = rank_prefixes(setup.resolution.tp_size)[0]

    @property
    def ready(self) -> bool:
        return self.status is ServerStatus.UP

    def generation(self, chat: ChatRequest) -> Generation:
        """Plan a request; raises protocol.RequestError if SGLang would reject it."""
        prompt_tokens = estimate_prompt_tokens(chat.messages)
        check_request(chat, prompt_tokens, self.setup.resolution.context_len)
        counter = next(self._counter)
        key = request_key(self.setup.knobs.seed, chat.seed, counter, prompt_digest(chat.messages))
        num_tokens, finish = self._output_length(chat, key, prompt_tokens)
        jitter = jitter_factor(random.Random(f"{self.setup.knobs.seed}|jitter|{counter}"), self.setup.knobs.noise)
        plan = plan_request(num_tokens, self.timing, random.Random(f"{key}|accept"), jitter)
        return Generation(uuid.uuid4().hex, int(time.time()), plan, _chunk_texts(key, plan.step_tokens),
                          self._outcome(plan, prompt_tokens, finish))

    def _output_length(self, chat: ChatRequest, key: str, prompt_tokens: int) -> tuple[int, str]:
        if chat.ignore_eos:
            limit = chat.max_tokens
            return (limit if limit is not None else self.setup.resolution.context_len - prompt_tokens), "length"
        return natural_length(key, chat.max_tokens, chat.min_tokens), "stop"

    def _outcome(self, plan: RequestPlan, prompt_tokens: int, finish: str) -> Outcome:
        spec = self.setup.resolution.spec
        return Outcome(
            prompt_tokens=prompt_tokens, completion_tokens=plan.completion_tokens, finish_reason=finish,
            matched_stop=self.setup.model.eos_token_id if finish == "stop" else None,
            verify_ct=plan.verify_ct, correct_drafts=plan.correct_drafts,
            correct_drafts_histogram=plan.correct_drafts_histogram,
            num_draft_tokens=spec.num_draft_tokens if spec else 0,
        )

    def prefill_line(self, prompt_tokens: int, seconds: float) -> str:
        """The scheduler's `Prefill batch` line for one new request."""
        stats, prefill = self.stats, self.setup.resolution.cuda_graph.prefill
        graph = prefill.enabled and bool(prefill.bs) and prompt_tokens <= max(prefill.bs or (0,))
        return (f"Prefill batch, #new-seq: 1, #new-token: {prompt_tokens}, #cached-token: 0, "
                f"token usage: {stats.running_tokens / max(1, stats.max_total_tokens):.2f}, "
                f"#running-req: {max(0, stats.running_reqs - 1)}, #queue-req: 0, #pending-token: 0, "
                f"cuda graph: {graph}, input throughput (token/s): {prompt_tokens / max(seconds, 1e-6):.2f}")

    def record_warmup(self) -> None:
        """The startup warmup request (`POST /generate`, 8 new tokens) passes through the scheduler."""
        plan = plan_request(WARMUP_MAX_NEW_TOKENS, self.timing, random.Random("warmup"), 1.0)
        self.stats.start_request(WARMUP_PROMPT_TOKENS)
        self.log.info(self.prefill_line(WARMUP_PROMPT_TOKENS, max(plan.ttft, 1e-3)), self.scheduler_prefix)
        for line in self.stats.record_steps(plan.step_tokens[1:]):
            self.log.info(line, self.scheduler_prefix)
        self.stats.finish_request(WARMUP_PROMPT_TOKENS + plan.completion_tokens)

    # ---- info endpoints ------------------------------------------------------------------------

    def model_info(self) -> dict[str, Any]:
        args, model = self.setup.resolution.args, self.setup.model
        return {
            "model_path": args.get("model_path"), "served_model_name": args.get("served_model_name"),
            "tokenizer_path": args.get("tokenizer_path"), "is_generation": True,
            "preferred_sampling_params": args.get("preferred_sampling_params"),
            "weight_version": args.get("weight_version"), "load_format": args.get("load_format"),
            "reasoning_parser": args.get("reasoning_parser"), "tool_call_parser": args.get("tool_call_parser"),
            "disaggregation_mode": args.get("disaggregation_mode"),
            "has_image_understanding": model.is_multimodal, "has_audio_understanding": False,
            "model_type": model.model_type, "architectures": list(model.architectures) or None,
        }

    def models_list(self) -> dict[str, Any]:
        name = self.setup.resolution.args.get("served_model_name")
        card = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
                "parent": None, "max_model_len": self.setup.resolution.context_len}
        return {"object": "list", "data": [card]}

    def server_info(self) -> dict[str, Any]:
        setup = self.setup
        info = dict(setup.resolution.args)
        info.update(
            launch_command=setup.launch_command, status="ready", max_total_num_tokens=setup.memory.kv_tokens,
            max_req_input_len=self._max_req_input_len(), hicache_object_layout=None, kv_events=None,
            startup_time={**setup.scheduler_startup.to_dict(), "tokenizer_e2e": setup.tokenizer_e2e},
            internal_states=[self.internal_state()], version=SGLANG_VERSION, frontend="python",
        )
        return info

    def internal_state(self) -> dict[str, Any]:
        setup, memory = self.setup, self.setup.memory
        args = setup.resolution.args
        state = dict(args)
        state.update(
            world_size=int(args.get("dp_size") or 1) * setup.resolution.tp_size * int(args.get("pp_size") or 1),
            startup_time=setup.scheduler_startup.to_dict(),
            effective_max_running_requests_per_dp=memory.max_running_requests,
            last_gen_throughput=self.stats.last_gen_throughput, memory_usage=self._memory_usage(),
            disaggregation_mode=args.get("disaggregation_mode"), decode_cuda_graph_bs=list(memory.decode_capture_bs),
            decode_cuda_graph_memory_gb=round(memory.decode_graph_gib, 3),
        )
        accept = self.stats.avg_spec_accept_length
        if accept is not None:
            state["avg_spec_accept_length"] = accept
        return state

    def _max_req_input_len(self) -> int:
        return min(self.setup.resolution.context_len - 1, self.setup.memory.kv_tokens - 1)

    def _memory_usage(self) -> dict[str, Any]:
        memory, spec = self.setup.memory, self.setup.resolution.spec
        graph = dict.fromkeys(GRAPH_PHASES, 0.0)
        graph["prefill"] = round(memory.prefill_graph_gib, 3)
        graph["target_verify" if spec is not None else "decode"] = round(memory.decode_graph_gib, 3)
        if memory.draft_graph_gib:
            graph["draft_decode"] = graph["draft_extend"] = round(memory.draft_graph_gib / 2, 3)
        return {"weight": round(memory.weight_gib, 3), "kvcache": round(2 * memory.kv_gib_each, 3),
                "startup_available": round(memory.final_gib, 3), "token_capacity": memory.kv_tokens,
                "token_capacity_swa": None, "graph": graph}


def _chunk_texts(key: str, step_tokens: tuple[int, ...]) -> tuple[str, ...]:
    tokens = token_texts(key, sum(step_tokens))
    texts, start = [], 0
    for count in step_tokens:
        texts.append("".join(tokens[start:start + count]))
        start += count
    return tuple(texts)
