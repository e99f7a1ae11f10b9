"""logscan: SGLang 0.5.23 log lines (formats copied from the wheel's f-strings, see sglang-reference.md §7)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.logscan import (
    PHASES,
    StartupFacts,
    is_first_rank,
    line_ranks,
    progress_event,
    startup_facts,
    strip_prefix,
)

PREFIXES = ["[2026-11-29 10:00:00] ", "[2026-11-29 10:00:00.123] ", "[2026-11-29 10:00:00 TP1] ",
            "[2026-11-29 10:00:00.007 DP0 TP1] ", "[2026-11-29 10:00:00 DP1 PP0 ATTN_CP0 MOE_DP0 TP3 EP3] ", ""]

STARTUP_LINES = [
    ("Load weight begin. avail mem=78.50 GB", "loading_weights", "loading weights (avail mem=78.50 GB)"),
    ("Load weight end. elapsed=12.34 s, type=Qwen3ForCausalLM, avail mem=24.10 GB, mem usage=54.40 GB.",
     "weights_loaded", "weights loaded (12.34 s, type=Qwen3ForCausalLM)"),
    ("Load weight end. elapsed=3.10 s, type=DeepseekV3ForCausalLM, quant=fp8, fmt=e4m3, avail mem=9.00 GB, "
     "mem usage=60.00 GB.", "weights_loaded", "weights loaded (3.10 s, type=DeepseekV3ForCausalLM)"),
    ("Load weight end. Committed real weights after CUDA graph capture in 4.20 s (capture overlap window "
     "1.00 s, startup overlap total 5.00 s)", "weights_loaded", "weights committed after graph capture (4.20 s)"),
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 9.44 GB, V size: 9.44 GB",
     "kv_cache", "KV cache allocated (#tokens: 412345, dtype: torch.bfloat16)"),
    ("KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 1000, KV size: 1.00 GB",
     "kv_cache", "KV cache allocated (#tokens: 1000, dtype: torch.float8_e4m3fn)"),
    ("Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 16], avail mem=20.00 GB",
     "capturing_graphs", "capturing target prefill CUDA graph (backend=breakable)"),
    ("Capture target prefill CUDA graph end. elapsed=20.51 s, mem usage=1.20 GB, avail mem=18.80 GB.",
     "graphs_captured", "captured target prefill CUDA graph (20.51 s)"),
    ("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=18.80 GB",
     "capturing_graphs", "capturing target verify CUDA graph (backend=full)"),
    ("Capture target verify CUDA graph end. bs=[1, 2, 4, 8], elapsed=10.00 s, mem usage=0.50 GB, "
     "avail mem=18.30 GB.", "graphs_captured", "captured target verify CUDA graph (10.00 s)"),
    ("Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=18.30 GB",
     "capturing_graphs", "capturing draft decode CUDA graph (backend=full)"),
    ("Capture target decode CPU graph end. bs=[1], elapsed=0.30 s, mem usage=0.00 GB, avail mem=9.00 GB.",
     "graphs_captured", "captured target decode CPU graph (0.30 s)"),
    ("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
     "--cuda-graph-backend-prefill=disabled or auto-disable rules).", "capturing_graphs",
     "prefill CUDA graph disabled (because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
     "--cuda-graph-backend-prefill=disabled or auto-disable rules))"),
    ("Disable target prefill CUDA graph because the target model does not have a 'layers' attribute",
     "capturing_graphs",
     "target prefill CUDA graph disabled (because the target model does not have a 'layers' attribute)"),
    ("max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, "
     "context_len=40960, available_gpu_mem=18.30 GB", "graphs_captured",
     "scheduler ready (max_total_num_tokens=412345, max_running_requests=48, context_len=40960)"),
    ("INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)", "http_up",
     "HTTP server listening on http://127.0.0.1:30000"),
    ("The server is fired up and ready to roll!", "ready", "server fired up and ready to roll"),
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(("message", "phase", "text"), STARTUP_LINES)
def test_progress_event_recognises_startup_lines(prefix: str, message: str, phase: str, text: str) -> None:
    event = progress_event(prefix + message + "\n", 4.5)
    assert event is not None
    assert (event.phase, event.message, event.elapsed) == (phase, text, 4.5)
    assert event.phase in PHASES


@pytest.mark.parametrize("line", [
    "[2026-11-29 10:00:00 TP0] Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: True, "
    "gen throughput (token/s): 55.10, #queue-req: 0",
    "[2026-11-29 10:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'load_format': 'dummy'}",
    "Capturing batches (bs=8 avail_mem=18.50 GB): 100%|##########| 4/4",
    "[2026-11-29 10:00:00] INFO:     127.0.0.1:51234 - \"GET /ready HTTP/1.1\" 503",
    "",
])
def test_progress_event_ignores_other_lines(line: str) -> None:
    assert progress_event(line, 1.0) is None


def test_strip_prefix_removes_time_ranks_level_and_colour() -> None:
    assert strip_prefix("[2026-11-29 10:00:00.123 DP0 TP1] Load weight begin. avail mem=1.00 GB\n") == \
        "Load weight begin. avail mem=1.00 GB"
    assert strip_prefix("[2026-11-29 10:00:00] \x1b[32mINFO\x1b[0m:     Application startup complete.") == \
        "Application startup complete."
    assert strip_prefix("no prefix here") == "no prefix here"
    assert strip_prefix("[not a time] text") == "[not a time] text"


def test_line_ranks_and_first_rank() -> None:
    assert line_ranks("[2026-11-29 10:00:00 DP1 PP0 ATTN_CP0 MOE_DP0 TP3 EP3] x") == \
        {"DP": 1, "PP": 0, "ATTN_CP": 0, "MOE_DP": 0, "TP": 3, "EP": 3}
    assert line_ranks("[2026-11-29 10:00:00.001] x") == {}
    assert is_first_rank("[2026-11-29 10:00:00.001 DP0 TP0] x")
    assert is_first_rank("Capture target decode CUDA graph begin.")
    assert not is_first_rank("[2026-11-29 10:00:00 TP1] x")
    assert not is_first_rank("[2026-11-29 10:00:00 DP1 TP0] x")


BOOT_LOG = """\
[2026-11-29 10:00:00] server_args={'model_path': 'Qwen/Qwen3-8B'}
[2026-11-29 10:00:01.100 TP0] Load weight begin. avail mem=78.50 GB
[2026-11-29 10:00:13.200 TP1] max_total_num_tokens=1, chunked_prefill_size=1, max_prefill_tokens=1, \
max_running_requests=1, context_len=1, available_gpu_mem=1.00 GB
[2026-11-29 10:00:13.400 TP0] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=48, context_len=40960, available_gpu_mem=18.30 GB
[2026-11-29 10:00:14.000] Engine startup timings (s): load_weight=12.34, kv_cache_allocation=0.50, \
scheduler_e2e=40.10, cuda_graph={prefill=20.51, decode=0.00, target_verify=10.00, draft_prefill=0.00, \
draft_decode=3.25, draft_extend=1.50}, tokenizer_e2e=45.67
[2026-11-29 10:00:15] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
"""


def test_startup_facts_reads_timings_and_capacity() -> None:
    facts = startup_facts(BOOT_LOG)
    assert facts == StartupFacts(
        load_weight=12.34, kv_cache_allocation=0.5, scheduler_e2e=40.1, tokenizer_e2e=45.67,
        cuda_graph={"prefill": 20.51, "decode": 0.0, "target_verify": 10.0, "draft_prefill": 0.0,
                    "draft_decode": 3.25, "draft_extend": 1.5},
        max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384,
        max_running_requests=48, context_len=40960, available_gpu_mem=18.3,
    )
    data = facts.to_dict()
    assert data["cuda_graph"]["draft_decode"] == 3.25
    assert data["available_cpu_mem"] is None
    assert data["max_running_requests"] == 48


def test_startup_facts_on_cpu_and_with_missing_lines() -> None:
    cpu = startup_facts("[2026-11-29 10:00:00] max_total_num_tokens=9000, chunked_prefill_size=None, "
                        "max_prefill_tokens=16384, max_running_requests=4096, context_len=8192, "
                        "available_cpu_mem=12.25 GB\n")
    assert (cpu.available_cpu_mem, cpu.available_gpu_mem, cpu.chunked_prefill_size, cpu.max_total_num_tokens) \
        == (12.25, None, None, 9000)
    assert (cpu.load_weight, cpu.cuda_graph) == (None, None)
    empty = startup_facts("nothing SGLang-like\n")
    assert empty == StartupFacts()
    assert set(empty.to_dict().values()) == {None}


def test_startup_facts_takes_the_last_boot_of_a_log() -> None:
    first = "[2026-11-29 10:00:00] Engine startup timings (s): load_weight=1.00, kv_cache_allocation=0.10, " \
            "scheduler_e2e=2.00, cuda_graph={decode=0.50}, tokenizer_e2e=3.00\n"
    second = first.replace("load_weight=1.00", "load_weight=7.00")
    facts = startup_facts(first + second)
    assert facts.load_weight == 7.0
    assert facts.cuda_graph == {"decode": 0.5}
