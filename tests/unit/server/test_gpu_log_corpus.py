"""The plugin reads real SGLang GPU logs right: every log of tests/data/sglang_gpu_logs/ (excerpts of published
logs, with the facts an engineer reads from each), fact by fact, through the plugin's public functions
(log_corpus.py; `python tests/unit/server/log_corpus.py -v` prints the score and every miss)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_corpus import CORPUS, compare, expected, logs, read

from pytest_sglang_perf.server.batch_lines import batch_lines, decode_windows
from pytest_sglang_perf.server.failure_cause import boot_failure_cause, failure_kind
from pytest_sglang_perf.server.hints import boot_hints
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.logscan import line_ranks, logical_lines, progress_event
from pytest_sglang_perf.server.startup import startup_facts

EXCERPT_ARTIFACTS = {
    ("sgl-11576-rtx5090-cudagraph-exception", "failure.kind"): "the excerpt ends inside a traceback: no cause line",
    ("sgl-11576-rtx5090-cudagraph-exception", "failure.cause_line"): "the excerpt ends inside a traceback",
    ("sgl-16526-ascend-tp2-piecewise", "weights_loaded"): "the posted Load weight end line lost its '[' (no prefix)",
    ("sgl-16526-ascend-tp2-piecewise", "weights_gb"): "the same line",
    ("sgl-38849-mi300-segfault-interleaved", "failure.kind"): "only interleaved stack fragments: no line to quote",
    ("sgl-1751-phi35-capture-traceback", "failure.kind"): "the excerpt ends inside a traceback: no cause line",
    ("sgl-2037-docker-ts-logger-traceback", "failure.kind"): "the excerpt ends inside a traceback: no cause line",
}
"""Facts of a posted excerpt that no reader of a real log could take from it, each with why (the collector's
window cut the line, or the author's copy mangled it). They must stay misses: the test says when one is read."""

FOLDERS = sorted(path.name for path in CORPUS.iterdir() if path.is_dir())
ALL = [log for folder in FOLDERS for log in logs(folder)]


def test_the_corpus_has_dev_and_holdout_logs_with_their_facts() -> None:
    assert len(logs("dev")) >= 40 and len(logs("holdout")) >= 10
    assert {"holdout2", "holdout3", "holdout4", "holdout5"} <= set(FOLDERS)
    assert all(log.with_suffix(".json").is_file() for log in ALL)
    assert (CORPUS / "README.md").is_file()


@pytest.mark.parametrize("log", ALL, ids=[f"{log.parent.name}/{log.stem}" for log in ALL])
def test_every_fact_of_a_real_log_is_read_right(log: Path) -> None:
    _, misses = compare(expected(log), read(log.read_text(encoding="utf-8")))
    missed = {path for path, _, _ in misses}
    unexplained = [(path, want, got) for path, want, got in misses if (log.stem, path) not in EXCERPT_ARTIFACTS]
    assert unexplained == []
    assert missed >= {path for stem, path in EXCERPT_ARTIFACTS if stem == log.stem}, "an artifact is read now"


def test_the_prefill_graph_under_its_0_5_12_name_is_the_prefill_graph() -> None:
    """0.5.12 logs the prefill graph as `Capture piecewise CUDA graph begin/end` (model_runner.py); the begin line
    is from a published log (dev/sgl-22051-...), the end line is 0.5.12's format with values filled in."""
    text = ("[2026-03-17 07:16:38 TP0] Capture piecewise CUDA graph begin. avail mem=10.81 GB\n"
            "[2026-03-17 07:16:52 TP0] Capture piecewise CUDA graph end. Time elapsed: 14.02 s. mem usage=0.61 GB. "
            "avail mem=10.20 GB.\n")
    facts = startup_facts(text)
    assert [(c.graph, c.seconds) for c in facts.target_captures("prefill")] == [("prefill", 14.02)]


def test_a_prefill_graphs_token_sizes_and_a_negative_memory_delta_are_read() -> None:
    """0.5.23's prefill capture lines (cuda_graph_setup.py): sizes as `num_tokens=[...]`; `mem usage` is free memory
    before minus after, negative when the allocator gave some back."""
    text = ("[2026-11-29 10:00:01 TP0] Capture target prefill CUDA graph begin. backend=breakable, "
            "num_tokens=[4, 8, 16], avail mem=20.00 GB\n"
            "[2026-11-29 10:00:03 TP0] Capture target prefill CUDA graph end. elapsed=2.10 s, mem usage=-0.01 GB, "
            "avail mem=20.01 GB.\n")
    [capture] = startup_facts(text).target_captures("prefill")
    assert (capture.batch_sizes, capture.mem_usage_gb, capture.seconds) == ((4, 8, 16), -0.01, 2.1)


def test_wordings_first_seen_in_the_third_holdout_are_read() -> None:
    """Lines as holdout3's logs print them: a time-only prefix of 2024 SGLang with its `Exception in run_tp_server:`,
    a quantized checkpoint's `Load weight end` without `type=`, a capture begin line whose end the log lacks, and a
    kernel library's own `CUDA error (...)` line as the cause."""
    old = ["[23:17:01 TP7] Load weight end. type=DeepseekV2ForCausalLM, dtype=torch.bfloat16, avail mem=22.01 GB",
           "[23:17:08 TP4] Exception in run_tp_server:", "Traceback (most recent call last):"]
    assert [line_ranks(line) for line in old[:2]] == [{"TP": 7}, {"TP": 4}]
    assert boot_failure_cause(old) == "Exception in run_tp_server:"
    event = progress_event("Load weight end. quant=fp8, fmt=e4m3, avail mem=12.25 GB, mem usage=125.65 GB.", 1.0)
    assert event is not None and event.message == "weights loaded"
    begin = ("[2026-07-12 13:55:29 TP0 EP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, "
             "bs=[1, 2, 4, 8], avail mem=13.24 GB")
    assert startup_facts(begin).captured_decode_bs == (1, 2, 4, 8)
    kernel = ["[2025-12-09 05:12:23 DP6 TP6] Capture cuda graph begin. This can take up to several minutes.",
              "CUDA error (get_mla_metadata.cu:93): no kernel image is available for execution on the device"]
    assert boot_failure_cause(kernel) == kernel[1]


def test_holdout5s_first_misses_are_read() -> None:
    """FlashInfer's own `CUDA Error: ...` line as a cause, and a logging configuration's `[time][file:line][LEVEL]: `
    prefix (holdout5's published logs)."""
    flashinfer = ["CUDA Error: an illegal memory access was encountered (CUDA Error: 700an illegal memory access was "
                  "encountered)  (/opt/conda/lib/python3.10/site-packages/flashinfer/data/include/flashinfer/"
                  "attention/prefill.cuh700: line ) 2349", "[2025-04-01 10:00:00 TP0] Scheduler hit an exception: "
                  "Traceback (most recent call last):"]
    assert boot_failure_cause(flashinfer) == flashinfer[0] and failure_kind(flashinfer[0]) == "cuda"
    ready = "[2026-04-15 17:13:02][http_server.py:1991][INFO]: The server is fired up and ready to roll!"
    event = progress_event(ready, 1.0)
    assert event is not None and event.phase == "ready"


def test_sglang_0_1_lines_are_read() -> None:
    """SGLang 0.1's lines (holdout4's 2024 logs): `Rank N: ` before the message, a lower-case `load weight end.`,
    the capacity line's singular keys, the router's and the TP server's exception headers."""
    lines = ["Rank 1: load weight end.", "Rank 0: load weight end.",
             "Rank 0: max_total_num_token=52656, max_prefill_num_token=8776, context_len=4096, model_mode=[]"]
    assert [line_ranks(line) for line in lines] == [{"Rank": 1}, {"Rank": 0}, {"Rank": 0}]
    facts = startup_facts("\n".join(lines))
    assert (facts.max_total_num_tokens, facts.max_prefill_tokens, facts.context_len) == (52656, 8776, 4096)
    assert progress_event(lines[1], 1.0) is not None
    headers = ("router init state: Traceback (most recent call last):", "[14:47:01 TP0] Exception in ModelTpServer:")
    for header in headers:
        cause = boot_failure_cause([header, '  File "manager.py", line 68, in start_router_process'])
        assert cause == header.split("] ")[-1] and failure_kind(cause) == "exception"


def test_a_glued_line_and_a_progress_bar_hide_no_fact() -> None:
    """An 8-GPU boot where TP0's `Load weight end` follows another rank's unterminated write and a progress bar
    redrawn with carriage returns (wordings from dev/sgl-11716-... and 0.5.23's)."""
    text = ("[2025-10-16 09:06:10 TP3] Load weight begin. avail mem=137.29 GB"
            "[2025-10-16 09:06:21 TP0] Load weight end. elapsed=11.02 s, type=DeepseekV3ForCausalLM, "
            "dtype=torch.bfloat16, avail mem=57.10 GB, mem usage=80.24 GB.\n"
            "Loading safetensors checkpoint shards:  50% Completed | 1/2\rLoading safetensors checkpoint shards: 100% "
            "Completed | 2/2\r[2025-10-16 09:06:22 TP0] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, "
            "V size: 53.31 GB\n")
    facts = startup_facts(text)
    assert (facts.load_weight, facts.weights_mem_gb) == (11.02, 80.24)
    assert [(pool.tokens, pool.gb) for pool in facts.kv_pools] == [(2795207, 106.62)]


CPU_LOGS = CORPUS.parent / "sglang_cpu_logs"


def test_a_cause_far_from_the_end_of_a_real_log_is_found_and_hinted() -> None:
    """Real SGLang 0.5.15 on this CPU (tests/data/sglang_cpu_logs/README.md): the prefill graph's capture fails 51
    lines before the end of the log, past the 30-line tail a boot report shows; the cause and the hint come from
    the whole log of the attempt."""
    text = (CPU_LOGS / "sglang-0.5.15-cpu-tc-piecewise-prefill-capture-failure.log").read_text(encoding="utf-8")
    lines = tuple(logical_lines(text))
    error = BootError(name="v", command="python -m sglang.launch_server ...", reason="exited with code 1 during boot",
                      log_path=Path("v.log"), exit_code=1, log_tail=lines[-30:], log_lines=lines)
    cause = next(line for line in error.report().splitlines() if line.startswith("  cause:"))
    assert cause.startswith("  cause:      Exception: Capture prefill CUDA graph failed: Could not run "
                            "'sglang::unified_attention_with_output' with arguments from the 'CPU' backend.")
    assert boot_failure_cause(lines[-30:]) is None or "Capture prefill" not in (boot_failure_cause(lines[-30:]) or "")
    assert ("the prefill CUDA graph failed to capture with backend tc_piecewise (SGLang's own message and suggestions "
            "are in the log): run the variant with --cuda-graph-backend-prefill disabled, or another backend; a CPU "
            "captures no prefill graph") in boot_hints(error.reason, error.log_lines, version="0.5.15")


def test_the_decode_windows_of_a_dp_attention_log_are_each_groups_lead() -> None:
    """A published multi-node DP-attention decode log (holdout/sgl-20766-...: ranks DP8 to DP15): every DP rank
    schedules its own batches, so each one's lines are its group's windows."""
    text = (CORPUS / "holdout" / "sgl-20766-dp16-multinode-decode.log").read_text(encoding="utf-8")
    windows = decode_windows(text)
    groups = {batch.ranks.get("DP") for batch in batch_lines(text) if batch.kind == "Decode"}
    assert windows and len(groups) > 1
    assert all(window.gen_throughput is not None and window.running_req is not None for window in windows)
