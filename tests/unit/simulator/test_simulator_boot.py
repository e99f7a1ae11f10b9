"""Startup log lines (docs/sglang-0.5.23.md §2.1, §7.1), boot phase split and knobs, boot failures, log format, info
payloads."""

from __future__ import annotations

import asyncio
import io
import re

import pytest
from sim_setup import LLAMA_1B, SEED_CONFIG, SEED_FLAGS, engine, resolve

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE, load_flag_table
from pytest_sglang_perf.sglang_facts.log_wordings import all_wordings, wording_for
from pytest_sglang_perf.simulator.args.faults import Faults, parse_faults
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.args.memory import plan_memory
from pytest_sglang_perf.simulator.engine.boot import BootPlan, SchedulerBoot, engine_startup_line
from pytest_sglang_perf.simulator.engine.crash import MSG_SBO_SM90, SchedulerCrash
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes

pytestmark = pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")

LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<prefix>[^\]]*)\] (?P<message>.*)$")
NO_FAULTS = Faults()
SPEC = ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4")


async def _no_sleep(seconds: float) -> None:
    return None


def _boot(*flags: str, config: dict[str, object] = LLAMA_1B, gpu: str | None = None,
          faults: Faults = NO_FAULTS) -> tuple[SchedulerBoot, io.StringIO, list[float]]:
    model, resolution, device = resolve(dict(config), *flags, gpu=gpu)
    memory = plan_memory(resolution, model, device)
    stream, slept = io.StringIO(), []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    plan = BootPlan.split(1.0, resolution, True)
    boot = SchedulerBoot(resolution, model, memory, plan, SimLogger(stream=stream), fake_sleep, device, faults)
    return boot, stream, slept


def _lines(stream: io.StringIO) -> list[tuple[str, str]]:
    matches = [LINE.match(line) for line in stream.getvalue().splitlines()]
    assert all(matches)
    return [(m["prefix"], m["message"]) for m in matches if m]


def _boot_lines(*flags: str, gpu: str | None = None) -> list[tuple[str, str]]:
    boot, stream, slept = _boot(*flags, gpu=gpu)
    asyncio.run(boot.run())
    assert sum(slept) == pytest.approx(1.0 - boot.plan.warmup)
    return _lines(stream)


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


def test_spec_boot_loads_both_models_before_the_kv_cache_then_captures_everything() -> None:
    """scheduler.py::init_model_worker: target weights, draft weights, KV pools, then all CUDA graphs."""
    lines = _boot_lines("--tp-size", "2", *SPEC, "--disable-prefill-cuda-graph")
    assert {prefix for prefix, _ in lines} == {" TP0", " TP1"}
    rank0 = [message.split(",")[0].split(".")[0] for prefix, message in lines if prefix == " TP0"]
    assert rank0 == ["Load weight begin", "Load weight end", "Load weight begin", "Load weight end",
                     "KV Cache is allocated", "Memory pool end", wording_for("0.5.23").prefill_disabled.split(".")[0],
                     "Capture target verify CUDA graph begin", "Capture target verify CUDA graph end",
                     "Capture draft decode CUDA graph begin", "Capture draft decode CUDA graph end",
                     "Capture draft extend CUDA graph begin", "Capture draft extend CUDA graph end",
                     "max_total_num_tokens=" + rank0[-1].removeprefix("max_total_num_tokens=")]
    messages = [message for _, message in lines]
    assert any(m.startswith("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4,")
               for m in messages)
    assert sum("type=LlamaForCausalLMEagle," in m for m in messages) == 2  # the draft model, on both ranks
    assert [p for p, m in lines if m.startswith("Capture draft")] == [" TP0"] * 4  # rank 0 only
    assert "max_running_requests=48," in next(m for m in messages if m.startswith("max_total_num_tokens="))
    avail = [float(m.split("avail mem=")[1].split(" ")[0]) for p, m in lines if p == " TP0" and "avail mem=" in m]
    assert avail == sorted(avail, reverse=True)  # free memory only shrinks, phase after phase


@pytest.mark.parametrize("era", [era.since for era in all_wordings()])
def test_every_eras_capture_lines_are_read_by_the_plugins_log_reader(era: str) -> None:
    """Each era of data/sglang-log-wordings.json, printed by the simulator's boot (speculative, so the draft graphs
    print too): the plugin's log reader finds the target prefill and decode graphs with their sizes and seconds."""
    from pytest_sglang_perf.server.startup import startup_facts

    boot, stream, _ = _boot(*SPEC)
    boot.wording = wording_for(era)
    asyncio.run(boot.run())
    facts = startup_facts(stream.getvalue())
    [prefill], decode = facts.target_captures("prefill"), facts.target_captures("decode")
    assert prefill.batch_sizes == boot.resolution.cuda_graph.prefill.bs and prefill.seconds is not None
    assert decode[0].batch_sizes == boot.memory.decode_capture_bs and decode[0].seconds is not None
    assert facts.captured_decode_bs == boot.memory.decode_capture_bs
    assert len(facts.captures) == 4  # prefill, verify, draft decode, draft extend


def test_sbo_fails_scheduler_init_on_sm90_before_loading() -> None:
    """docs/sglang-0.5.23.md §8.5 / §11.15: layers/moe/utils.py::initialize_moe_config raises on SM90."""
    boot, stream, _ = _boot(*SEED_FLAGS, "--enable-single-batch-overlap", config=SEED_CONFIG, gpu="H100 SXM")
    with pytest.raises(SchedulerCrash) as crash:
        asyncio.run(boot.run())
    assert str(crash.value) == f"ValueError: {MSG_SBO_SM90}" and crash.value.all_ranks
    assert crash.value.traceback().splitlines()[0] == "Traceback (most recent call last):"
    assert "in initialize_moe_config" in crash.value.traceback() and stream.getvalue() == ""


@pytest.mark.parametrize(("config", "gpu"), [(SEED_CONFIG, "RTX A6000"), (SEED_CONFIG, "B200"),
                                             (LLAMA_1B, "H100 SXM")],
                         ids=["seed-model-sm86", "seed-model-sm100", "llama-no-moe-config"])
def test_sbo_boots_elsewhere(config: dict[str, object], gpu: str) -> None:
    """Only SM90, and only for models whose text config makes the scheduler run initialize_moe_config."""
    flags = (*SEED_FLAGS, "--enable-single-batch-overlap") if config is SEED_CONFIG else \
        ("--enable-single-batch-overlap",)
    boot, _, _ = _boot(*flags, config=config, gpu=gpu)
    asyncio.run(boot.run())


def test_crash_at_boot_raises_while_loading_weights() -> None:
    boot, stream, _ = _boot(faults=parse_faults("crash-at-boot"))
    with pytest.raises(SchedulerCrash, match=r"torch\.OutOfMemoryError: CUDA out of memory"):
        asyncio.run(boot.run())
    assert [m for _, m in _lines(stream)][-1].startswith("Load weight begin.")


def test_hang_at_boot_never_finishes_capturing() -> None:
    boot, stream, _ = _boot(faults=parse_faults("hang-at-boot"))

    async def run() -> None:
        await asyncio.wait_for(boot.run(), timeout=0.2)

    with pytest.raises(TimeoutError):
        asyncio.run(run())
    assert _lines(stream)[-1][1].startswith("Capture target prefill CUDA graph begin.")


def test_engine_startup_line_format() -> None:
    boot, _, _ = _boot()
    line = engine_startup_line(asyncio.run(boot.run()), 1.5)
    assert re.fullmatch(r"Engine startup timings \(s\): load_weight=\d+\.\d\d, kv_cache_allocation=\d+\.\d\d, "
                        r"scheduler_e2e=\d+\.\d\d, cuda_graph=\{prefill=\d+\.\d\d, decode=\d+\.\d\d, "
                        r"target_verify=0\.00, draft_prefill=0\.00, draft_decode=0\.00, draft_extend=0\.00\}, "
                        r"tokenizer_e2e=1\.50", line)


def test_boot_plan_shares_add_up() -> None:
    _, resolution, _ = resolve(LLAMA_1B, "--speculative-algorithm", "EAGLE")
    plan = BootPlan.split(2.0, resolution, True)
    total = plan.load_weight + plan.draft_load_weight + plan.kv_cache + sum(plan.graphs.values()) + plan.warmup
    assert total == pytest.approx(2.0)
    assert set(plan.graphs) == {"prefill", "target_verify", "draft_decode", "draft_extend"}


def test_phase_knobs_fix_their_phase_and_the_rest_shares_the_total() -> None:
    _, resolution, _ = resolve(LLAMA_1B)
    plan = BootPlan.split(10.0, resolution, True, load_seconds=3.0, capture_seconds=1.0)
    assert plan.load_weight == pytest.approx(3.0) and sum(plan.graphs.values()) == pytest.approx(1.0)
    assert plan.kv_cache + plan.warmup == pytest.approx(6.0) and plan.kv_cache < plan.warmup
    over = BootPlan.split(1.0, resolution, True, load_seconds=5.0)
    assert over.load_weight == 5.0 and over.kv_cache == over.warmup == 0.0  # the total is then just a floor


def test_without_captured_graphs_capture_time_goes_to_warmup() -> None:
    _, resolution, _ = resolve(LLAMA_1B, "--disable-cuda-graph")
    plan = BootPlan.split(1.0, resolution, True, capture_seconds=5.0)
    assert plan.graphs == {} and plan.warmup == pytest.approx(0.5)


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
    sim = engine(LLAMA_1B, "--speculative-algorithm", "NEXTN")
    info = sim.server_info()
    assert {spec.dest for spec in load_flag_table().options} - {"config"} <= set(info)  # --config: no ServerArgs field
    assert info["speculative_algorithm"] == "EAGLE" and info["max_running_requests"] == 48
    assert (info["version"], info["status"], info["max_total_num_tokens"]) == ("0.5.23", "ready",
                                                                               sim.setup.memory.kv_tokens)
    assert set(info["startup_time"]) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph",
                                         "tokenizer_e2e"}
    assert set(info["cuda_graph_config"]) == {"decode", "prefill"}
    for phase in info["cuda_graph_config"].values():
        assert set(phase) == {"backend", "max_bs", "bs", "tc_compiler", "max_context_size", "full_prefill_max_req",
                              "full_prefill_prefix_chunk_tokens", "max_seq_len"}
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] == 48 and state["last_gen_throughput"] == 0.0
    assert "avg_spec_accept_length" not in state  # no decode window has closed yet
    assert set(sim.model_info()) == {
        "model_path", "served_model_name", "tokenizer_path", "is_generation", "preferred_sampling_params",
        "weight_version", "load_format", "reasoning_parser", "tool_call_parser", "disaggregation_mode",
        "has_image_understanding", "has_audio_understanding", "model_type", "architectures", "embedding"}


def test_knobs_pick_the_gpu() -> None:
    sim = engine(LLAMA_1B, knobs=Knobs(gpu="NVIDIA RTX A6000"))
    assert sim.setup.gpu.sm == 86 and sim.setup.resolution["chunked_prefill_size"] == 4096
