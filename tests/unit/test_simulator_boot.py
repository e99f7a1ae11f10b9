"""Startup log lines (reference §7.1), boot phase split, log format and the info endpoints' payloads."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest

from pytest_sglang_perf.simulator.boot import MSG_PREFILL_DISABLED, BootPlan, SchedulerBoot, engine_startup_line
from pytest_sglang_perf.simulator.engine import EngineSetup, SimEngine
from pytest_sglang_perf.simulator.flags import DEFAULT_TABLE, build_parser, load_flag_table
from pytest_sglang_perf.simulator.hardware import H100_80GB
from pytest_sglang_perf.simulator.knobs import Knobs, knob_dests
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes
from pytest_sglang_perf.simulator.memory import plan_memory
from pytest_sglang_perf.simulator.model import ModelConfig, model_config_from_dict
from pytest_sglang_perf.simulator.resolve import Resolution, resolve_args

pytestmark = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")

LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<prefix>[^\]]*)\] (?P<message>.*)$")
MODEL = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
         "max_position_embeddings": 131072}


def _setup(*flags: str) -> tuple[ModelConfig, Resolution]:
    model = model_config_from_dict("/models/llama", MODEL)
    namespace = build_parser(load_flag_table()).parse_args(["--model-path", model.path, *flags])
    raw: dict[str, Any] = {k: v for k, v in vars(namespace).items() if k not in knob_dests()}
    return model, resolve_args(raw, model, H100_80GB)


def _boot_lines(*flags: str) -> list[tuple[str, str]]:
    model, resolution = _setup(*flags)
    memory = plan_memory(resolution, model, H100_80GB)
    stream = io.StringIO()
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    plan = BootPlan.split(1.0, resolution, True)
    asyncio.run(SchedulerBoot(resolution, model, memory, plan, SimLogger(stream=stream), fake_sleep).run())
    assert sum(slept) == pytest.approx(1.0 - plan.warmup)
    matches = [LINE.match(line) for line in stream.getvalue().splitlines()]
    assert all(matches)
    return [(m["prefix"], m["message"]) for m in matches if m]


def test_single_gpu_boot_sequence() -> None:
    lines = _boot_lines()
    assert {prefix for prefix, _ in lines} == {""}
    messages = [message.split(".")[0] for _, message in lines]
    assert messages == ["Load weight begin", "Load weight end", "KV Cache is allocated", "Memory pool end",
                        "Capture target prefill CUDA graph begin", "Capture target prefill CUDA graph end",
                        "Capture target decode CUDA graph begin", "Capture target decode CUDA graph end",
                        lines[-1][1].split(".")[0]]
    assert re.fullmatch(r"Load weight end\. elapsed=\d+\.\d\d s, type=LlamaForCausalLM, avail mem=\d+\.\d\d GB, "
                        r"mem usage=\d+\.\d\d GB\.", lines[1][1])
    assert re.fullmatch(r"KV Cache is allocated\. dtype: torch\.bfloat16, #tokens: \d+, K size: \d+\.\d\d GB, "
                        r"V size: \d+\.\d\d GB", lines[2][1])
    assert re.fullmatch(r"max_total_num_tokens=\d+, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                        r"max_running_requests=\d+, context_len=131072, available_gpu_mem=\d+\.\d\d GB", lines[-1][1])


def test_tp2_spec_boot_has_rank_prefixes_and_verify_capture() -> None:
    lines = _boot_lines("--tp-size", "2", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                        "--disable-prefill-cuda-graph")
    assert {prefix for prefix, _ in lines} == {" TP0", " TP1"}
    messages = [message for _, message in lines]
    assert messages.count(MSG_PREFILL_DISABLED) == 2
    verify = "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4,"
    assert any(m.startswith(verify) for m in messages)
    assert sum("type=LlamaForCausalLMEagle," in m for m in messages) == 2  # the draft model, on both ranks
    draft = [(p, m) for p, m in lines if m.startswith("Capture draft")]
    assert [p for p, _ in draft] == [" TP0"] * 4  # rank 0 only
    assert [p for p, m in lines if m.startswith("max_total_num_tokens=")] == [" TP0"]
    assert "max_running_requests=48," in next(m for m in messages if m.startswith("max_total_num_tokens="))


def test_engine_startup_line_format() -> None:
    model, resolution = _setup()
    memory = plan_memory(resolution, model, H100_80GB)
    boot = SchedulerBoot(resolution, model, memory, BootPlan.split(0.0, resolution, True),
                         SimLogger(stream=io.StringIO()), _no_sleep)
    startup = asyncio.run(boot.run())
    line = engine_startup_line(startup, 1.5)
    assert re.fullmatch(r"Engine startup timings \(s\): load_weight=\d+\.\d\d, kv_cache_allocation=\d+\.\d\d, "
                        r"scheduler_e2e=\d+\.\d\d, cuda_graph=\{prefill=\d+\.\d\d, decode=\d+\.\d\d, "
                        r"target_verify=0\.00, draft_prefill=0\.00, draft_decode=0\.00, draft_extend=0\.00\}, "
                        r"tokenizer_e2e=1\.50", line)


async def _no_sleep(seconds: float) -> None:
    return None


def test_boot_plan_shares_add_up() -> None:
    _, resolution = _setup("--speculative-algorithm", "EAGLE")
    plan = BootPlan.split(2.0, resolution, True)
    total = plan.load_weight + plan.draft_load_weight + plan.kv_cache + sum(plan.graphs.values()) + plan.warmup
    assert total == pytest.approx(2.0)
    assert set(plan.graphs) == {"prefill", "target_verify", "draft_decode", "draft_extend"}


def test_rank_prefixes() -> None:
    assert rank_prefixes(1) == ("",)
    assert rank_prefixes(2) == (" TP0", " TP1")
    assert rank_prefixes(2, pp_size=2)[-1] == " PP1 TP1"


def test_logger_levels_and_uvicorn_format() -> None:
    stream, access = io.StringIO(), io.StringIO()
    log = SimLogger("warning", None, stream=stream, access_stream=access)
    log.info("hidden")
    log.warning("shown", " TP0")
    log.uvicorn("Started server process [1]", level=30)
    log.access("127.0.0.1:5000", "GET /health HTTP/1.1", 503)
    out = stream.getvalue().splitlines()
    assert len(out) == 2 and out[0].endswith(" TP0] shown")
    assert re.fullmatch(r"\[[\d\- :]+\] WARNING:  Started server process \[1\]", out[1])
    assert access.getvalue() == ""
    SimLogger("info", None, stream=stream, access_stream=access).access("127.0.0.1:5", "GET /health HTTP/1.1", 503)
    assert access.getvalue().rstrip().endswith('INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 503 Service Unavailable')


def test_server_info_payload() -> None:
    model, resolution = _setup("--speculative-algorithm", "NEXTN")
    memory = plan_memory(resolution, model, H100_80GB)
    startup = asyncio.run(SchedulerBoot(resolution, model, memory, BootPlan.split(0.0, resolution, True),
                                        SimLogger(stream=io.StringIO()), _no_sleep).run())
    setup = EngineSetup(resolution, model, memory, Knobs(), startup, 0.5, "--model-path /models/llama")
    engine = SimEngine(setup, SimLogger(stream=io.StringIO(), access_stream=io.StringIO()))
    info = engine.server_info()
    assert set(load_flag_table().defaults()) <= set(info)
    assert info["speculative_algorithm"] == "EAGLE" and info["max_running_requests"] == 48
    assert (info["version"], info["status"], info["max_total_num_tokens"]) == ("0.5.23", "ready", memory.kv_tokens)
    assert set(info["startup_time"]) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph",
                                         "tokenizer_e2e"}
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] == 48 and "last_gen_throughput" in state
    assert "avg_spec_accept_length" not in state  # no decode window has closed yet
    assert set(engine.model_info()) == {
        "model_path", "served_model_name", "tokenizer_path", "is_generation", "preferred_sampling_params",
        "weight_version", "load_format", "reasoning_parser", "tool_call_parser", "disaggregation_mode",
        "has_image_understanding", "has_audio_understanding", "model_type", "architectures"}
