"""logscan: SGLang 0.5.23 log lines (formats copied from the wheel's f-strings, see docs/sglang-0.5.23.md §7)."""

from __future__ import annotations

import pytest
from log_text import PREFIXES, rank0

from pytest_sglang_perf.server.logscan import (
    PHASES,
    is_first_rank,
    line_ranks,
    progress_event,
    strip_prefix,
)

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


@pytest.mark.parametrize("prefix", PREFIXES)
def test_old_kv_line_is_a_progress_event(prefix: str) -> None:
    event = progress_event(prefix + "KV Cache is allocated. #tokens: 549277, K size: 25.14 GB, V size: 25.14 GB", 1.0)
    assert event is not None
    assert (event.phase, event.message) == ("kv_cache", "KV cache allocated (#tokens: 549277)")


def test_rank0_helper() -> None:
    assert rank0("[2026-11-29 10:00:00.007 DP0 TP1] ") == "[2026-11-29 10:00:00.007 DP0 TP0] "
    assert rank0("[2026-11-29 10:00:00 DP1 PP0 ATTN_CP0 MOE_DP0 TP3 EP3] ") == \
        "[2026-11-29 10:00:00 DP0 PP0 ATTN_CP0 MOE_DP0 TP0 EP0] "
