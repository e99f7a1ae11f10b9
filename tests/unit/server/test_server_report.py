"""server_report: the text about each variant's server (effective configuration, startup costs) users read."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_sglang_perf.server.describe import (
    config_brief,
    config_lines,
    failure_lines,
    graph_use_text,
    ready_line,
    server_summary_lines,
    startup_text,
    strict_failure,
    verdict_line,
    warning_text,
)
from pytest_sglang_perf.server.effective import EffectiveConfig, evaluate, redact_info, unavailable
from pytest_sglang_perf.server.logscan import strip_prefix
from pytest_sglang_perf.server.startup import GraphUse, StartupFacts, graph_use, startup_facts
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser
from pytest_sglang_perf.sglang_facts.requested import requested_flags
from pytest_sglang_perf.sglang_facts.rules import load_rules
from pytest_sglang_perf.wrapping import wrap_lines

RULES = load_rules("0.5.23")
MULTIMODAL = "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph."
DRAFT_ADJUSTED = ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                  "speculative_eagle_topk == 1")
SPEC = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "5"]
DUPLICATE = ("measures nothing new: its only difference from variant 'base' (--cuda-graph-max-bs-decode) did not "
             "change what the server ran")

PREFILL_CAPTURE = [
    "Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 16], avail mem=20.00 GB",
    "Capture target prefill CUDA graph end. elapsed=20.51 s, mem usage=1.20 GB, avail mem=18.80 GB.",
]
NO_PREFILL_CAPTURE = [
    "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
    "--cuda-graph-backend-prefill=disabled or auto-disable rules).",
]


def boot_log(prefill: list[str], resolution: Sequence[str] = ()) -> str:
    """A single-GPU boot (docs/sglang-0.5.23.md §7.1): resolution warnings first, then the startup lines."""
    messages = [
        *resolution,
        "server_args={'model_path': 'Qwen/Qwen3-8B', 'tp_size': 1}",
        "Load weight begin. avail mem=78.50 GB",
        "Load weight end. elapsed=40.10 s, type=Qwen3ForCausalLM, avail mem=62.10 GB, mem usage=16.40 GB.",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 9.44 GB, V size: 9.44 GB",
        *prefill,
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.80 GB",
        "Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=10.00 s, mem usage=0.50 GB, "
        "avail mem=18.30 GB.",
        "max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=48, context_len=40960, available_gpu_mem=18.30 GB",
        "The server is fired up and ready to roll!",
    ]
    return "".join(f"[2026-11-29 10:00:{i:02d}] {message}\n" for i, message in enumerate(messages))


BOOT_LOG = boot_log(PREFILL_CAPTURE)


def server_info(prefill: str = "breakable", **args: Any) -> dict[str, Any]:
    """A single-GPU CUDA server's `/server_info` (docs/sglang-0.5.23.md §5), trimmed to what the report reads."""
    resolved = {"model_path": "Qwen/Qwen3-8B", "device": "cuda", "attn_dp_size": 1, "pp_size": 1,
                "disable_overlap_schedule": False, "enable_nccl_nvls": False, "speculative_algorithm": None,
                "speculative_num_steps": None, "speculative_eagle_topk": None, "speculative_num_draft_tokens": None,
                "mem_fraction_static": 0.83, "api_key": "sk-report-1", **args}
    plan = {"decode": {"backend": "full", "max_bs": 256, "bs": [1, 2, 4, 8]},
            "prefill": {"backend": prefill, "max_bs": 8192, "bs": [4, 8, 16]}}
    state = {**resolved, "effective_max_running_requests_per_dp": 48}
    return {**resolved, "cuda_graph_config": plan, "internal_states": [state], "version": "0.5.23"}


def judge(variant: str, args: Sequence[str], info: dict[str, Any], log: str = BOOT_LOG) -> EffectiveConfig:
    messages = [strip_prefix(line) for line in log.splitlines()]
    flags = requested_flags(list(args), flag_table_parser())
    return evaluate(variant, flags, redact_info(info, RULES, ["sk-report-1"]), startup_facts(log), messages, RULES)


def ok_config() -> EffectiveConfig:
    return judge("base", ["--cuda-graph-max-bs-decode", "256", "--mem-fraction-static", "0.83", "--config", "x.yaml"],
                 server_info())


def differing_config() -> EffectiveConfig:
    """Overridden draft tokens (with SGLang's reason), the multimodal prefill rule, an unconfirmable flag."""
    log = boot_log(NO_PREFILL_CAPTURE, [MULTIMODAL, DRAFT_ADJUSTED])
    info = server_info("disabled", speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1,
                       speculative_num_draft_tokens=4, enable_nccl_nvls=True)
    return judge("mm", [*SPEC, "--enable-nccl-nvls"], info, log)


# The effective configuration -------------------------------------------------------------------------------------


def test_config_lines_of_a_server_that_ran_as_requested() -> None:
    assert config_lines(ok_config()) == [
        "effective configuration: ok (2 requested flag(s) verified against /server_info; 1 note(s))",
        "  prefill CUDA graph: breakable (captured in 20.51 s, tokens 4..16 (3 sizes))",
        "  decode CUDA graph: full (captured in 10.00 s, bs 1..8 (4 sizes))",
        "  max running requests: 48 per DP rank",
        "  overlap scheduler: on",
        # confirmed (counted), changed by SGLang (none here) and cannot be confirmed (a note): each said as such
        "  note: --config: cannot be confirmed: /server_info does not report it",
    ]


def test_config_lines_of_a_server_that_differs() -> None:
    lines = config_lines(differing_config())
    assert lines[0] == "effective configuration DIFFERS from the request (2 finding(s))"
    assert "  speculative decoding: EAGLE steps=3 topk=1 draft_tokens=4" in lines
    assert "  prefill CUDA graph: disabled (not captured)" in lines
    warnings = [line for line in lines if line.startswith("  WARNING: ")]
    assert warnings == [
        f"  WARNING: requested --speculative-num-draft-tokens 5, server ran 4, because: {DRAFT_ADJUSTED}",
        f"  WARNING: SGLang switched off the prefill CUDA graph (on by default) because: {MULTIMODAL}",
    ]
    [note] = [line for line in lines if line.startswith("  note: ")]
    assert note.startswith("  note: --enable-nccl-nvls: cannot be confirmed: ")
    assert lines[-1] == note  # warnings, then notes, after what ran
    assert "sk-report-1" not in "\n".join(lines)


def test_config_lines_of_a_duplicate_variant() -> None:
    config = dataclasses.replace(ok_config(), duplicate=DUPLICATE)
    lines = config_lines(config)
    assert lines[0] == "effective configuration: as requested, but the same as another variant's"
    assert lines[-2:] == [f"  WARNING: {DUPLICATE}",
                          "  note: --config: cannot be confirmed: /server_info does not report it"]


def test_verdict_line_counts_only_verified_flags() -> None:
    """`--config` is not in /server_info and --enable-nccl-nvls cannot be confirmed: neither counts as verified."""
    config = judge("v", ["--config", "x.yaml", "--enable-nccl-nvls", "--cuda-graph-max-bs-decode", "256"],
                   server_info(enable_nccl_nvls=True))
    assert verdict_line(config) == ("effective configuration: ok (1 requested flag(s) verified against /server_info; "
                                    "2 note(s))")
    assert config.notes == ("--config: cannot be confirmed: /server_info does not report it",
                            "--enable-nccl-nvls: cannot be confirmed: SGLang only sets NCCL_NVLS_ENABLE=1; whether "
                            "NVLS is used is NCCL's decision, and nothing SGLang reports confirms it")


def test_unreadable_configuration() -> None:
    config = unavailable("v", "GET /server_info: HTTP 404", startup_facts(BOOT_LOG))
    assert config_lines(config) == [
        "effective configuration DIFFERS from the request (1 finding(s))",
        "  prefill CUDA graph: not reported (captured in 20.51 s, tokens 4..16 (3 sizes))",
        "  decode CUDA graph: not reported (captured in 10.00 s, bs 1..8 (4 sizes))",
        "  WARNING: the effective configuration could not be read: GET /server_info: HTTP 404",
    ]


# Startup costs ---------------------------------------------------------------------------------------------------


def test_startup_text_with_every_fact() -> None:
    assert startup_text(startup_facts(BOOT_LOG), 183.24) == (
        "boot 183.2 s, load_weight 40.10 s, cuda graphs 30.51 s, KV cache 412345 tokens (18.88 GB), "
        "max_total_num_tokens 412345, max_running_requests 48, context_len 40960, chunked_prefill_size 8192, "
        "available_gpu_mem 18.30 GB")


@pytest.mark.parametrize(("facts", "boot", "text"), [
    (StartupFacts(), None, "SGLang logged no startup facts"),
    (StartupFacts(), 12.04, "boot 12.0 s"),
    (StartupFacts(kv_cache_tokens=1000), None, "KV cache 1000 tokens"),
    (StartupFacts(graph_capture_seconds=0.0, available_cpu_mem=9.5), 3.0,
     "boot 3.0 s, cuda graphs 0.00 s, available_cpu_mem 9.50 GB"),
    (StartupFacts(load_weight=1.234, max_running_requests=16), None, "load_weight 1.23 s, max_running_requests 16"),
])
def test_startup_text_leaves_out_what_was_not_logged(facts: StartupFacts, boot: float | None, text: str) -> None:
    assert startup_text(facts, boot) == text


# The summary section, strict mode, warnings --------------------------------------------------------------------


def test_server_summary_lines_per_variant() -> None:
    configs = {"base": ok_config(), "mm": differing_config()}
    facts = {"base": startup_facts(BOOT_LOG), "mm": StartupFacts()}
    lines = server_summary_lines(configs, facts, {"base": 61.5}, simulated=True)
    assert lines[0] == ("variant base (SIMULATED): effective configuration: ok (2 requested flag(s) verified against "
                        "/server_info; 1 note(s))")
    assert lines[1:6] == config_lines(configs["base"])[1:]
    assert lines[6].startswith("  startup: boot 61.5 s, load_weight 40.10 s, cuda graphs 30.51 s, ")
    mm = lines.index("variant mm (SIMULATED): effective configuration DIFFERS from the request (2 finding(s))")
    assert mm > 7 and all(line.startswith("    ") for line in lines[7:mm])  # wrapped, indented deeper
    assert lines[-1] == "  startup: SGLang logged no startup facts"  # no boot time measured for mm
    assert lines[mm + 1:-1] == wrap_lines(config_lines(configs["mm"]))[1:]
    assert all(len(line) <= 120 for line in lines)


def test_server_summary_lines_without_simulation_or_facts() -> None:
    lines = server_summary_lines({"base": ok_config()}, {}, {"base": 61.5}, simulated=False)
    assert lines[0] == ("variant base: effective configuration: ok (2 requested flag(s) verified against /server_info; "
                        "1 note(s))")
    assert not any("SIMULATED" in line or "startup:" in line for line in lines)


def test_strict_failure_lists_each_problem() -> None:
    text = strict_failure("mm", differing_config())
    assert text.splitlines() == [
        "sglang-perf: variant 'mm': the server did not run what was requested (--sglang-strict-flags):",
        f"  requested --speculative-num-draft-tokens 5, server ran 4, because: {DRAFT_ADJUSTED}",
        f"  SGLang switched off the prefill CUDA graph (on by default) because: {MULTIMODAL}",
        "Fix the variant's flags (or drop --sglang-strict-flags to only warn).",
    ]
    assert "nccl" not in text  # a note is not a failure


def test_warning_text_joins_problems_and_the_duplicate() -> None:
    config = dataclasses.replace(differing_config(), duplicate=DUPLICATE)
    assert warning_text("mm", config) == (
        f"variant 'mm': requested --speculative-num-draft-tokens 5, server ran 4, because: {DRAFT_ADJUSTED}; "
        f"SGLang switched off the prefill CUDA graph (on by default) because: {MULTIMODAL}; {DUPLICATE}")
    assert warning_text("base", dataclasses.replace(ok_config(), duplicate=DUPLICATE)) == (
        f"variant 'base': {DUPLICATE}")


def test_runtime_graph_use_line_counts_batches_with_a_graph() -> None:
    log = "\n".join([
        "[2026-11-29 10:00:00] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 3.00",
        "[2026-11-29 10:00:01] Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, token usage: 0.00, "
        "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: True, input throughput (token/s): 3.00",
        "[2026-11-29 10:00:02] Decode batch, #running-req: 1, #token: 41, token usage: 0.00, cuda graph: True, "
        "gen throughput (token/s): 11.57, #queue-req: 0",
    ])
    use = graph_use(log)
    assert graph_use_text(use) == ("prefill batches 1/2, decode batches 1/1 ran with a graph (SGLang's batch log "
                                   "lines)")
    lines = server_summary_lines({"base": ok_config()}, {}, {}, simulated=False, uses={"base": use})
    assert lines[-1] == f"  runtime: {graph_use_text(use)}"
    assert graph_use_text(GraphUse(0, 0, 0, 0)) == ("prefill batches 0/0, decode batches 0/0 ran with a graph "
                                                    "(SGLang's batch log lines)")


# The one-line boot summary and a failing test's server lines ----------------------------------------------------


def test_config_brief_in_a_few_words() -> None:
    assert config_brief(ok_config()) == "config ok, 1 note(s)"  # --config: not in /server_info
    assert config_brief(differing_config()) == "config DIFFERS (2 finding(s))"
    assert config_brief(dataclasses.replace(ok_config(), duplicate=DUPLICATE)) == "config: measures nothing new"
    assert config_brief(unavailable("v", "HTTP 404", StartupFacts())) == "config NOT verified"
    nvls = judge("v", ["--enable-nccl-nvls"], server_info(enable_nccl_nvls=True))
    assert config_brief(nvls) == "config ok, 1 note(s)"


def test_ready_line() -> None:
    assert ready_line(ok_config(), startup_facts(BOOT_LOG), 61.54, True, "base.log") == (
        "ready in 61.5 s (SIMULATED; graphs 30.51 s; config ok, 1 note(s); log base.log)")
    assert ready_line(differing_config(), None, 2.0, False, "mm.log") == (
        "ready in 2.0 s (config DIFFERS (2 finding(s)); log mm.log)")


def test_failure_lines_name_the_findings_boot_costs_and_log_but_not_what_ran() -> None:
    lines = failure_lines(differing_config(), startup_facts(BOOT_LOG), 61.5, "logs/mm.log")
    assert lines[0] == "server: effective configuration DIFFERS from the request (2 finding(s))"
    assert lines[1].startswith("  WARNING: requested --speculative-num-draft-tokens 5, server ran 4, because: ")
    assert [line for line in lines if line.startswith("  startup: boot 61.5 s, load_weight 40.10 s")]
    assert lines[-1] == "  log: logs/mm.log"
    assert not [line for line in lines if "CUDA graph: " in line]  # what ran: the servers section has it
    assert all(len(line) <= 120 for line in lines)
