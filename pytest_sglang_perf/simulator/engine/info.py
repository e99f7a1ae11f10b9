"""The payloads of the info endpoints (`/model_info`, `/v1/models`, `/server_info`), as SGLang 0.5.23 fills them
from its resolved args, its memory plan and its scheduler's statistics."""

from __future__ import annotations

import time
from typing import Any

from pytest_sglang_perf.simulator.args.server_fields import hicache_layout, scheduler_record, shown_record
from pytest_sglang_perf.simulator.engine.boot import GRAPH_PHASES
from pytest_sglang_perf.simulator.engine.decode_stats import DecodeStats
from pytest_sglang_perf.simulator.engine.embedding import embedding_plan
from pytest_sglang_perf.simulator.engine.setup import EngineSetup


def model_info(setup: EngineSetup) -> dict[str, Any]:
    args, model = setup.resolution.args, setup.model
    return {
        "model_path": args.get("model_path"), "served_model_name": args.get("served_model_name"),
        "tokenizer_path": args.get("tokenizer_path"), "is_generation": True,
        "preferred_sampling_params": args.get("preferred_sampling_params"),
        "weight_version": args.get("weight_version"), "load_format": args.get("load_format"),
        "reasoning_parser": args.get("reasoning_parser"), "tool_call_parser": args.get("tool_call_parser"),
        "disaggregation_mode": args.get("disaggregation_mode"),
        "has_image_understanding": model.is_multimodal, "has_audio_understanding": False,
        "model_type": model.model_type, "architectures": list(model.architectures) or None,
        "embedding": embedding_plan(args, setup.resolution.cuda_graph),
    }


def models_list(setup: EngineSetup) -> dict[str, Any]:
    name = setup.resolution.args.get("served_model_name")
    card = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
            "parent": None, "max_model_len": setup.resolution.context_len}
    return {"object": "list", "data": [card]}


def server_info(setup: EngineSetup, stats: DecodeStats) -> dict[str, Any]:
    info = shown_record(setup.resolution.args)
    info.update(
        launch_command=setup.launch_command, status="ready", max_total_num_tokens=setup.memory.kv_tokens,
        max_req_input_len=_max_req_input_len(setup), hicache_object_layout=hicache_layout(info), kv_events=None,
        startup_time={**setup.scheduler_startup.to_dict(), "tokenizer_e2e": setup.tokenizer_e2e},
        internal_states=[internal_state(setup, stats)], version=setup.knobs.sglang_version, frontend="python",
    )
    return info


def internal_state(setup: EngineSetup, stats: DecodeStats) -> dict[str, Any]:
    memory = setup.memory
    args = setup.resolution.args
    state = scheduler_record(args, memory.max_running_requests)
    state.update(
        world_size=int(args.get("dp_size") or 1) * setup.resolution.tp_size * int(args.get("pp_size") or 1),
        startup_time=setup.scheduler_startup.to_dict(),
        effective_max_running_requests_per_dp=memory.max_running_requests,
        last_gen_throughput=stats.last_gen_throughput, memory_usage=_memory_usage(setup),
        disaggregation_mode=args.get("disaggregation_mode"), decode_cuda_graph_bs=list(memory.decode_capture_bs),
        decode_cuda_graph_memory_gb=round(memory.decode_graph_gib, 3),
    )
    accept = stats.avg_spec_accept_length
    if accept is not None:
        state["avg_spec_accept_length"] = accept
    return state


def graph_memory(setup: EngineSetup) -> dict[str, float]:
    """GiB of each device-graph phase (boot.GRAPH_PHASES order), rounded as SGLang reports them."""
    memory, spec = setup.memory, setup.resolution.spec
    graph = dict.fromkeys(GRAPH_PHASES, 0.0)
    graph["prefill"] = round(memory.prefill_graph_gib, 3)
    graph["target_verify" if spec is not None else "decode"] = round(memory.decode_graph_gib, 3)
    if memory.draft_graph_gib:
        graph["draft_decode"] = graph["draft_extend"] = round(memory.draft_graph_gib / 2, 3)
    return graph


def _max_req_input_len(setup: EngineSetup) -> int:
    """managers/tp_worker.py: the longest request (context and KV pool permitting) less 5 tokens."""
    return min(setup.resolution.context_len - 1, setup.memory.kv_tokens - 1) - 5


def _memory_usage(setup: EngineSetup) -> dict[str, Any]:
    memory = setup.memory
    return {"weight": round(memory.weight_gib, 3), "kvcache": round(2 * memory.kv_gib_each, 3),
            "startup_available": round(memory.final_gib, 3), "token_capacity": memory.kv_tokens,
            "token_capacity_swa": None, "graph": graph_memory(setup)}
