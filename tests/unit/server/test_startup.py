"""startup: the facts SGLang 0.5.23 logs about its boot, and its batch lines' graph use (formats copied from the
wheel's f-strings, see docs/sglang-0.5.23.md §7)."""

from __future__ import annotations

import json

import pytest
from log_text import PREFIXES, log, rank0, tp2

from pytest_sglang_perf.server.logscan import is_first_rank, progress_event
from pytest_sglang_perf.server.startup import GraphCapture, GraphUse, StartupFacts, graph_use, startup_facts
from pytest_sglang_perf.simulator.engine.decode_stats import DecodeStats

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
        max_running_requests=48, context_len=40960, available_gpu_mem=18.3, graph_capture_seconds=35.26,
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
    assert all(value in (None, []) for value in empty.to_dict().values())


def test_startup_facts_takes_the_last_boot_of_a_log() -> None:
    first = "[2026-11-29 10:00:00] Engine startup timings (s): load_weight=1.00, kv_cache_allocation=0.10, " \
            "scheduler_e2e=2.00, cuda_graph={decode=0.50}, tokenizer_e2e=3.00\n"
    second = first.replace("load_weight=1.00", "load_weight=7.00")
    facts = startup_facts(first + second)
    assert facts.load_weight == 7.0
    assert facts.cuda_graph == {"decode": 0.5}


# ---- startup facts: KV cache, graph captures, prefill graph fallbacks ----------------------------------------------

OLD_CAPTURE_LINES = [
    ("Capture cuda graph end. Time elapsed: 7.23 s. mem usage=0.93 GB. avail mem=0.53 GB.", 7.23, 0.93),
    ("Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.", 7.23, 0.93),
    ("Capture cuda graph end. Time elapsed: 26.12 s.", 26.12, None),
]
OLD_BEGIN = "Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB"
SKIP_CONFIG = ("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
               "--cuda-graph-backend-prefill=disabled or auto-disable rules).")
SKIP_LAYERS = "Disable target prefill CUDA graph because the target model does not have a 'layers' attribute"
CAPACITY = ("max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=48, context_len=40960, available_gpu_mem=18.30 GB")
GPU_BOOT = [
    "server_args={'model_path': 'Qwen/Qwen3-8B'}",
    "Load weight begin. avail mem=78.50 GB",
    "Load weight end. elapsed=12.34 s, type=Qwen3ForCausalLM, avail mem=24.10 GB, mem usage=54.40 GB.",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 9.44 GB, V size: 9.44 GB",
    "Memory pool end. avail mem=20.00 GB",
    "Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 16], avail mem=20.00 GB",
    "Capture target prefill CUDA graph end. elapsed=20.51 s, mem usage=1.20 GB, avail mem=18.80 GB.",
    "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.80 GB",
    "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=3.00 s, mem usage=0.50 GB, avail mem=18.30 GB.",
    CAPACITY,
]
GPU_CAPTURES = (
    GraphCapture(graph="target prefill", seconds=20.51, batch_sizes=(4, 8, 16), mem_usage_gb=1.2),
    GraphCapture(graph="target decode", seconds=3.0, batch_sizes=(1, 2, 4, 8), mem_usage_gb=0.5),
)
SPEC_BOOT = [
    "server_args={'model_path': 'meta-llama/Llama-3.1-8B-Instruct', 'speculative_algorithm': 'EAGLE3'}",
    "Load weight begin. avail mem=78.50 GB",
    "Load weight end. elapsed=10.00 s, type=LlamaForCausalLM, avail mem=62.00 GB, mem usage=16.50 GB.",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 300000, K size: 18.31 GB, V size: 18.31 GB",
    SKIP_CONFIG,
    "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=18.80 GB",
    "Capture target verify CUDA graph end. bs=[1, 2, 4], elapsed=10.00 s, mem usage=0.50 GB, avail mem=18.30 GB.",
    "Load weight begin. avail mem=18.30 GB",
    "Load weight end. elapsed=0.80 s, type=LlamaForCausalLMEagle3, avail mem=17.40 GB, mem usage=0.90 GB.",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 300000, K size: 0.57 GB, V size: 0.57 GB",
    "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=16.00 GB",
    "Capture draft decode CUDA graph end. elapsed=3.25 s, mem usage=0.20 GB, avail mem=15.80 GB.",
    "Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=4, bs=[1, 2, 4], avail mem=15.80 GB",
    "Capture draft extend CUDA graph end. elapsed=1.50 s, mem usage=0.10 GB, avail mem=15.70 GB.",
    CAPACITY,
]
@pytest.mark.parametrize("prefix", PREFIXES)
def test_startup_facts_of_a_gpu_boot_with_any_prefix(prefix: str) -> None:
    facts = startup_facts(log(GPU_BOOT, rank0(prefix)))
    assert (facts.kv_cache_tokens, facts.kv_cache_gb, facts.kv_cache_dtype) == (412345, 18.88, "torch.bfloat16")
    assert facts.captures == GPU_CAPTURES
    assert facts.captured_decode_bs == (1, 2, 4, 8)
    assert facts.graph_capture_seconds == 23.51
    assert facts.load_weight == 12.34
    assert facts.prefill_graph_skipped == ()
    assert facts.max_total_num_tokens == 412345


@pytest.mark.parametrize("prefix", [p for p in PREFIXES if not is_first_rank(p)])
def test_a_log_without_rank_0_is_read_from_its_lowest_rank(prefix: str) -> None:
    """One node's log of a multi-node server (its ranks start at 8), or a log cut by hand: what rank 0 did not log
    is read from the lowest rank that did, as rank 0's would be."""
    lines = GPU_BOOT + SPEC_BOOT
    assert startup_facts(log(lines, prefix)) == startup_facts(log(lines, rank0(prefix))) != StartupFacts()


def test_another_ranks_line_fills_only_what_rank_0_did_not_log() -> None:
    """Rank 0's facts stand: rank 1's weights line differs, and is read only where rank 0 has none (its KV pool)."""
    text = "\n".join([
        "[2026-11-29 10:00:00 TP0] Load weight end. elapsed=12.00 s, type=LlamaForCausalLM, avail mem=60.00 GB, "
        "mem usage=16.00 GB.",
        "[2026-11-29 10:00:00 TP1] Load weight end. elapsed=13.00 s, type=LlamaForCausalLM, avail mem=59.00 GB, "
        "mem usage=17.00 GB.",
        "[2026-11-29 10:00:01 TP1] KV Cache is allocated. #tokens: 300000, K size: 18.31 GB, V size: 18.31 GB",
        "[2026-11-29 10:00:01 TP2] KV Cache is allocated. #tokens: 1, K size: 1.00 GB, V size: 1.00 GB",
    ])
    facts = startup_facts(text)
    assert (facts.load_weight, facts.weights_mem_gb) == (12.0, 16.0)
    assert [(pool.tokens, pool.gb) for pool in facts.kv_pools] == [(300000, 36.62)]


@pytest.mark.parametrize(("line", "tokens", "gb", "dtype"), [
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 9.44 GB, V size: 9.44 GB",
     412345, 18.88, "torch.bfloat16"),
    ("KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 1000, KV size: 1.00 GB",
     1000, 1.0, "torch.float8_e4m3fn"),
    ("KV Cache is allocated. #tokens: 549277, K size: 25.14 GB, V size: 25.14 GB", 549277, 50.28, None),
    ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 64", 64, None, "torch.bfloat16"),
])
@pytest.mark.parametrize("prefix", PREFIXES)
def test_kv_cache_facts(prefix: str, line: str, tokens: int, gb: float | None, dtype: str | None) -> None:
    facts = startup_facts(log([line], rank0(prefix)))
    assert (facts.kv_cache_tokens, facts.kv_cache_gb, facts.kv_cache_dtype) == (tokens, gb, dtype)


def test_speculative_boot_decode_bs_from_target_verify_and_draft_bs_from_begin_lines() -> None:
    facts = startup_facts(log(SPEC_BOOT))
    assert facts.captures == (
        GraphCapture(graph="target verify", seconds=10.0, batch_sizes=(1, 2, 4), mem_usage_gb=0.5),
        GraphCapture(graph="draft decode", seconds=3.25, batch_sizes=(1, 2), mem_usage_gb=0.2),
        GraphCapture(graph="draft extend", seconds=1.5, batch_sizes=(1, 2, 4), mem_usage_gb=0.1),
    )
    assert facts.captured_decode_bs == (1, 2, 4)
    assert facts.graph_capture_seconds == 14.75
    assert (facts.load_weight, facts.kv_cache_tokens, facts.kv_cache_gb) == (10.0, 300000, 36.62)
    assert facts.prefill_graph_skipped == (SKIP_CONFIG.split(" because ", 1)[1][:-1],)


def test_target_decode_wins_over_target_verify_for_decode_bs() -> None:
    lines = ["Capture target verify CUDA graph end. bs=[1, 2], elapsed=1.00 s, mem usage=0.10 GB, avail mem=1.00 GB.",
             "Capture target decode CUDA graph end. bs=[8], elapsed=1.00 s, mem usage=0.10 GB, avail mem=1.00 GB."]
    assert startup_facts(log(lines)).captured_decode_bs == (8,)


def test_cpu_graph_capture() -> None:
    facts = startup_facts(log([
        "Capture target decode CPU graph begin. backend=full, num_tokens_per_req=1, avail mem=9.30 GB",
        "Capture target decode CPU graph end. bs=[1], elapsed=0.30 s, mem usage=0.00 GB, avail mem=9.00 GB.",
    ]))
    assert facts.captures == (GraphCapture(graph="target decode", seconds=0.3, batch_sizes=(1,), mem_usage_gb=0.0),)
    assert (facts.captured_decode_bs, facts.graph_capture_seconds) == ((1,), 0.3)


@pytest.mark.parametrize(("line", "seconds", "usage"), OLD_CAPTURE_LINES)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_old_capture_lines(prefix: str, line: str, seconds: float, usage: float | None) -> None:
    facts = startup_facts(log([OLD_BEGIN, line], rank0(prefix)))
    assert facts.captures == (GraphCapture(graph="decode", seconds=seconds, batch_sizes=None, mem_usage_gb=usage),)
    assert (facts.captured_decode_bs, facts.graph_capture_seconds) == (None, seconds)
    begin, end = progress_event(prefix + OLD_BEGIN, 1.0), progress_event(prefix + line, 2.0)
    assert begin is not None and end is not None
    assert (begin.phase, begin.message) == ("capturing_graphs", "capturing decode cuda graph")
    assert (end.phase, end.message) == ("graphs_captured", f"captured decode cuda graph ({seconds:.2f} s)")


def test_old_boot_with_speculative_decoding_lists_both_captures() -> None:
    """SGLang <= 0.5.10's EAGLE draft worker printed the same `Capture cuda graph end.` wording as the target."""
    facts = startup_facts(log([OLD_BEGIN, OLD_CAPTURE_LINES[0][0], "Capture cuda graph begin. This can take up to "
                               "several minutes.", "Capture cuda graph end. Time elapsed: 7.00 s"]))
    assert [(c.graph, c.seconds) for c in facts.captures] == [("decode", 7.23), ("decode", 7.0)]
    assert facts.graph_capture_seconds == 14.23


def test_graph_seconds_come_from_the_timings_line_when_there_is_one() -> None:
    timings = ("Engine startup timings (s): load_weight=12.00, kv_cache_allocation=0.50, scheduler_e2e=40.10, "
               "cuda_graph={prefill=20.00, decode=3.50}, tokenizer_e2e=45.67")
    facts = startup_facts(log([*GPU_BOOT, timings]))
    assert (facts.graph_capture_seconds, facts.load_weight) == (23.5, 12.0)
    assert facts.captures == GPU_CAPTURES
    cpu = startup_facts(log([timings.replace("prefill=20.00, decode=3.50", "prefill=0.00, decode=0.00")]))
    assert (cpu.graph_capture_seconds, cpu.captures) == (0.0, ())


@pytest.mark.parametrize("prefix", PREFIXES)
def test_prefill_graph_skipped_reasons_deduplicated_in_order(prefix: str) -> None:
    facts = startup_facts(log([SKIP_LAYERS, SKIP_CONFIG, SKIP_LAYERS + "."], rank0(prefix)))
    assert facts.prefill_graph_skipped == (
        "the target model does not have a 'layers' attribute",
        "cuda_graph_config resolved prefill.backend='disabled' (e.g. via --cuda-graph-backend-prefill=disabled or "
        "auto-disable rules)",
    )


@pytest.mark.parametrize("prefix", PREFIXES)
def test_load_weight_falls_back_to_the_first_load_weight_end(prefix: str) -> None:
    lines = ["Load weight begin. avail mem=78.50 GB",
             "Load weight end. elapsed=8.01 s, type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=62.08 GB, "
             "mem usage=16.41 GB.",
             "Load weight end. elapsed=0.80 s, type=LlamaForCausalLMEagle3, avail mem=17.40 GB, mem usage=0.90 GB."]
    assert startup_facts(log(lines, rank0(prefix))).load_weight == 8.01


def test_tp2_log_counts_each_fact_once_from_rank_0() -> None:
    facts = startup_facts(tp2([*GPU_BOOT, SKIP_LAYERS]))
    assert facts.captures == GPU_CAPTURES
    assert (facts.kv_cache_tokens, facts.kv_cache_gb, facts.load_weight) == (412345, 18.88, 12.34)
    assert (facts.captured_decode_bs, facts.graph_capture_seconds) == ((1, 2, 4, 8), 23.51)
    assert facts.prefill_graph_skipped == ("the target model does not have a 'layers' attribute",)
    assert facts.max_total_num_tokens == 412345


def test_missing_lines_give_none_and_empty() -> None:
    facts = startup_facts(log([CAPACITY]))
    assert (facts.kv_cache_tokens, facts.kv_cache_gb, facts.kv_cache_dtype) == (None, None, None)
    assert (facts.captures, facts.captured_decode_bs, facts.graph_capture_seconds) == ((), None, None)
    assert (facts.prefill_graph_skipped, facts.load_weight) == ((), None)
    no_bs = startup_facts(log(GPU_BOOT[:7]))
    assert (no_bs.captured_decode_bs, no_bs.graph_capture_seconds) == (None, 20.51)


def test_new_facts_come_from_the_last_boot_split_at_server_args() -> None:
    first = [*GPU_BOOT, SKIP_LAYERS]
    second = ["server_args={'model_path': 'Qwen/Qwen3-8B', 'disable_cuda_graph': True}",
              "Load weight begin. avail mem=78.50 GB",
              "Load weight end. elapsed=5.00 s, type=Qwen3ForCausalLM, avail mem=24.10 GB, mem usage=54.40 GB."]
    facts = startup_facts(log(first + second))
    assert facts.load_weight == 5.0
    assert (facts.captures, facts.prefill_graph_skipped, facts.kv_cache_tokens) == ((), (), None)
    assert facts.max_total_num_tokens is None


def test_a_boot_without_server_args_starts_at_load_weight_begin_after_the_capacity_line() -> None:
    second = [line.replace("12.34 s", "6.00 s").replace("[1, 2, 4, 8]", "[1, 2]") for line in GPU_BOOT[1:]]
    facts = startup_facts(log(GPU_BOOT[1:] + second))
    assert (facts.load_weight, facts.captured_decode_bs, len(facts.captures)) == (6.0, (1, 2), 2)
    crashed = startup_facts(log(GPU_BOOT[1:] + GPU_BOOT[1:3]))
    assert (crashed.load_weight, crashed.captures, crashed.max_total_num_tokens) == (12.34, (), None)


def test_startup_facts_to_dict_is_json() -> None:
    data = startup_facts(log(SPEC_BOOT)).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["captures"][0] == {"graph": "target verify", "seconds": 10.0, "batch_sizes": [1, 2, 4],
                                   "mem_usage_gb": 0.5}
    assert data["captured_decode_bs"] == [1, 2, 4]
    assert data["prefill_graph_skipped"] == [SKIP_CONFIG.split(" because ", 1)[1][:-1]]
    assert (data["kv_cache_tokens"], data["kv_cache_gb"], data["kv_cache_dtype"]) == (300000, 36.62, "torch.bfloat16")


# ---- runtime graph evidence ------------------------------------------------------------------------------------------

PREFILL_TRUE = ("Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01, #running-req: 0, "
                "#queue-req: 0, #pending-token: 0, cuda graph: True, input throughput (token/s): 1000.00")
DECODE_FALSE = ("Decode batch, #running-req: 1, #token: 90, token usage: 0.00, cuda graph: False, "
                "gen throughput (token/s): 55.10, #queue-req: 0")
DECODE_SPEC = ("Decode batch, #running-req: 4, #token: 900, token usage: 0.01, accept len: 2.50, accept rate: 0.50, "
               "cuda graph: True, gen throughput (token/s): 155.10, #queue-req: 0")
DECODE_ITER = ("Decode batch [iter], #running-req: 1, #token: 91, token usage: 0.00, cuda graph: True, "
               "gen throughput (token/s): 55.10, #queue-req: 0")


@pytest.mark.parametrize("prefix", PREFIXES)
def test_graph_use_counts_batch_lines(prefix: str) -> None:
    lines = [PREFILL_TRUE, PREFILL_TRUE.replace("True", "False"), PREFILL_TRUE, DECODE_FALSE, DECODE_SPEC,
             DECODE_ITER, "Load weight begin. avail mem=78.50 GB", "Prefill batch without a graph field"]
    expected = GraphUse(prefill_true=2, prefill_false=1, decode_true=2, decode_false=1)
    assert graph_use(log(lines, rank0(prefix))) == expected
    if not is_first_rank(prefix):  # another rank's lines; with DP attention, DP1's lead schedules its own batches
        assert graph_use(log(lines, prefix)) == (expected if " DP1 " in prefix else GraphUse(0, 0, 0, 0))


def test_graph_use_reads_each_dp_groups_lead_and_the_older_wording() -> None:
    """DP attention (published logs: dev/sgl-6836-..., holdout/sgl-20766-...): each DP rank logs its own batches;
    the ranks beside DP are global, so DP1's lead is its lowest TP. `Decode batch.` is the older wording."""
    lines = ["[2025-05-27 04:36:06 DP0 TP0] " + DECODE_FALSE, "[2025-05-27 04:36:06 DP0 TP1] " + DECODE_FALSE,
             "[2025-05-27 04:36:06 DP1 TP2] " + DECODE_SPEC, "[2025-05-27 04:36:06 DP1 TP3] " + DECODE_SPEC,
             "[2025-05-27 04:36:07 DP1 TP2] " + DECODE_SPEC.replace("Decode batch,", "Decode batch.")]
    assert graph_use("\n".join(lines)) == GraphUse(prefill_true=0, prefill_false=0, decode_true=2, decode_false=1)


def test_graph_use_counts_rank_0_of_a_tp2_log_and_the_cpu_label() -> None:
    lines = [PREFILL_TRUE.replace("cuda graph", "cpu graph"), DECODE_FALSE.replace("cuda graph", "cpu graph")]
    assert graph_use(tp2(lines)) == GraphUse(prefill_true=1, prefill_false=0, decode_true=0, decode_false=1)
    assert graph_use("") == GraphUse(0, 0, 0, 0)
    assert GraphUse(1, 2, 3, 4).to_dict() == {"prefill_true": 1, "prefill_false": 2, "decode_true": 3,
                                              "decode_false": 4}


@pytest.mark.parametrize("label", ["cuda graph", "cpu graph"])
def test_graph_use_reads_the_simulators_batch_lines(label: str) -> None:
    stats = DecodeStats(interval=1, max_total_tokens=1000, num_draft_tokens=0, graph_label=label)
    stats.start(0.0)
    lines = [stats.prefill_line(1, 100, 0, 100, 0, graph=True, now=1.0),
             stats.decode_step([1], 101, graph=False, queue=0, now=2.0),
             stats.decode_step([1], 102, graph=True, queue=0, now=3.0)]
    assert graph_use(log([line for line in lines if line is not None], "[2026-11-29 10:00:00 TP0] ")) == \
        GraphUse(prefill_true=1, prefill_false=0, decode_true=1, decode_false=1)
