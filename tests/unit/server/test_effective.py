"""effective: requested flags vs SGLang 0.5.23's `/server_info`, tied to SGLang's own log messages.

The `/server_info` documents follow docs/sglang-0.5.23.md §5 (resolved args at the top level, the `cuda_graph_config`
plan, `internal_states` per DP rank), the log lines §7 and the adjustments with their messages §8.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_sglang_perf.server.effective import (
    EffectiveConfig,
    FlagOutcome,
    Status,
    SwitchedOff,
    evaluate,
    redact_info,
    same_as,
    topic_messages,
    unavailable,
)
from pytest_sglang_perf.server.logscan import strip_prefix
from pytest_sglang_perf.server.startup import StartupFacts, startup_facts
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser
from pytest_sglang_perf.sglang_facts.requested import Requested, requested_flags
from pytest_sglang_perf.sglang_facts.rules import load_rules

RULES = load_rules("0.5.23")
API_KEY = "sk-perf-9f8e7d6c"

MULTIMODAL = "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph."
NO_LAYERS = "Disable prefill CUDA graph because the target model does not have a 'layers' attribute"
GENERIC_SKIP = ("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' (e.g. via "
                "--cuda-graph-backend-prefill=disabled or auto-disable rules).")
DRAFT_ADJUSTED = ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                  "speculative_eagle_topk == 1")
MAX_RUNNING_RESET = ("Max running requests is reset to 48 for speculative decoding. You can override this by "
                     "explicitly setting --max-running-requests.")
PP_OVERLAP = "Pipeline parallelism is incompatible with overlap schedule."
PP_PREFILL = ("Disabling breakable prefill CUDA graph by default for pipeline parallelism. Set "
              "--cuda-graph-backend-prefill=breakable to opt in.")
SPEC = ["--speculative-algorithm", "nextn", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "5"]


def _phase(backend: str, max_bs: int, bs: list[int]) -> dict[str, Any]:
    return {"backend": backend, "max_bs": max_bs, "bs": bs, "tc_compiler": None, "max_context_size": None,
            "full_prefill_max_req": None, "full_prefill_prefix_chunk_tokens": None, "max_seq_len": None}


def server_info(*, prefill: Mapping[str, Any] | None = None, decode: Mapping[str, Any] | None = None,
                cap: int = 2048, launch: str = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B",
                **args: Any) -> dict[str, Any]:
    """A `/server_info` of a single-GPU CUDA server (§5), with resolved args and plan phases overridden."""
    resolved: dict[str, Any] = {
        "model_path": "Qwen/Qwen3-8B", "served_model_name": "Qwen/Qwen3-8B", "device": "cuda", "tp_size": 1,
        "pp_size": 1, "dp_size": 1, "attn_dp_size": 1, "enable_dp_attention": False, "max_running_requests": None,
        "chunked_prefill_size": 8192, "mem_fraction_static": 0.83, "disable_overlap_schedule": False,
        "enable_mixed_chunk": False, "enable_nccl_nvls": False, "speculative_algorithm": None,
        "speculative_num_steps": None, "speculative_eagle_topk": None, "speculative_num_draft_tokens": None,
        "cuda_graph_backend_prefill": None, "cuda_graph_backend_decode": None, "cuda_graph_max_bs_decode": None,
        "disable_cuda_graph": False, "api_key": None, "admin_api_key": None, "random_seed": 12345,
        **args,
    }
    plan = {"decode": {**_phase("full", 256, [1, 2, 4, 8, 12, 16, 24, 32]), **(decode or {})},
            "prefill": {**_phase("breakable", 8192, [4, 8, 16, 32, 64]), **(prefill or {})}}
    state = {**resolved, "world_size": 1, "effective_max_running_requests_per_dp": cap,
             "last_gen_throughput": 0.0, "decode_cuda_graph_bs": plan["decode"]["bs"]}
    return {**resolved, "cuda_graph_config": plan, "launch_command": launch, "status": "ready",
            "max_total_num_tokens": 412345, "internal_states": [state], "version": "0.5.23", "frontend": "python"}


def requested(*args: str) -> list[Requested]:
    """The flags as SGLang 0.5.23's parser (the shipped flag table) reads them."""
    flags = requested_flags(list(args), flag_table_parser())
    assert flags or not args, f"{args} did not parse"
    return flags


def log(*messages: str) -> str:
    return "".join(f"[2026-11-29 10:00:{i:02d}] {message}\n" for i, message in enumerate(messages))


def judge(args: Sequence[str], info: Mapping[str, Any], messages: Sequence[str] = (),
          variant: str = "v") -> EffectiveConfig:
    """evaluate() as the plugin calls it: facts and messages from the same server log."""
    text = log(*messages)
    lines = [strip_prefix(line) for line in text.splitlines()]
    return evaluate(variant, requested(*args), redact_info(info, RULES, []), startup_facts(text), lines, RULES)


def outcome(config: EffectiveConfig, flag: str) -> FlagOutcome:
    [found] = [o for o in config.flags if o.flag == flag]
    return found


# Flags the server ran as asked -------------------------------------------------------------------------------


def test_flags_the_server_ran_as_requested_are_ok() -> None:
    config = judge(["--cuda-graph-backend-prefill", "breakable", "--cuda-graph-max-bs-decode", "256",
                    "--mem-fraction-static", "0.83", "--cuda-graph-bs-decode", "1", "2", "4"],
                   server_info(decode={"bs": [1, 2, 4]}, cuda_graph_backend_prefill="breakable",
                               cuda_graph_max_bs_decode=256))
    assert [(o.flag, o.status) for o in config.flags] == [
        ("--cuda-graph-backend-prefill", Status.OK), ("--cuda-graph-max-bs-decode", Status.OK),
        ("--mem-fraction-static", Status.OK), ("--cuda-graph-bs-decode", Status.OK)]
    assert outcome(config, "--cuda-graph-bs-decode").effective == [1, 2, 4]
    assert config.problems == () and config.notes == () and config.verdict == "ok" and not config.problems
    assert outcome(config, "--cuda-graph-backend-prefill").describe() == \
        "--cuda-graph-backend-prefill breakable: confirmed"


def test_flag_is_compared_with_the_plan_not_with_the_raw_arg() -> None:
    """The raw `cuda_graph_max_bs_decode` keeps the operator's 512; the plan (what ran) says 256."""
    config = judge(["--cuda-graph-max-bs-decode", "512"], server_info(cuda_graph_max_bs_decode=512))
    found = outcome(config, "--cuda-graph-max-bs-decode")
    assert (found.status, found.requested, found.effective) == (Status.OVERRIDDEN, 512, 256)
    assert found.describe() == ("requested --cuda-graph-max-bs-decode 512, server ran 256, "
                                "SGLang printed no reason")


# Overrides and SGLang's reasons ----------------------------------------------------------------------------


def test_capture_time_skip_overrides_a_requested_prefill_graph_with_sglangs_reason() -> None:
    """The plan keeps breakable, but the capture fell back to eager (§8.1 step 6): the graph did not run."""
    config = judge(["--cuda-graph-backend-prefill", "breakable"], server_info(cuda_graph_backend_prefill="breakable"),
                   ["Load weight end. elapsed=5.00 s, type=Qwen3ForCausalLM, avail mem=60.00 GB, mem usage=16.00 GB.",
                    NO_LAYERS])
    found = outcome(config, "--cuda-graph-backend-prefill")
    assert (found.status, found.requested, found.effective, found.because) == (
        Status.OVERRIDDEN, "breakable", "disabled", NO_LAYERS)
    assert config.problems == (f"requested --cuda-graph-backend-prefill breakable, server ran disabled, "
                               f"because: {NO_LAYERS}",)
    assert config.switched_off == ()  # the user asked for the prefill graph: an override, not a silent default
    assert dict(config.ran)["prefill CUDA graph"] == (
        "disabled (not captured: the target model does not have a 'layers' attribute)")
    assert config.verdict == "differs"


def test_generic_skip_line_is_not_a_reason() -> None:
    """`Disable prefill CUDA graph because cuda_graph_config resolved ...` only repeats the plan."""
    config = judge(["--cuda-graph-backend-prefill", "breakable"], server_info(prefill={"backend": "disabled"}),
                   [GENERIC_SKIP])
    found = outcome(config, "--cuda-graph-backend-prefill")
    assert (found.status, found.effective, found.because) == (Status.OVERRIDDEN, "disabled", None)
    assert found.describe().endswith("server ran disabled, SGLang printed no reason")
    assert dict(config.ran)["prefill CUDA graph"] == "disabled (not captured)"


def test_generic_skip_line_does_not_disable_a_graph_the_plan_keeps() -> None:
    config = judge(["--cuda-graph-backend-prefill", "breakable"], server_info(), [GENERIC_SKIP])
    assert outcome(config, "--cuda-graph-backend-prefill").status is Status.OK


def test_a_planned_graph_is_full_only_when_the_log_shows_it_captured() -> None:
    """On CPU the plan still says decode `full` and `/server_info` lists no graph batch sizes: nothing ran."""
    cpu = server_info(device="cpu", decode={"bs": []}, prefill={"backend": "disabled"})
    ran = dict(judge([], cpu).ran)
    assert ran["decode CUDA graph"] == "not captured (cpu; planned full)"
    assert ran["prefill CUDA graph"] == "disabled"


def test_a_planned_cuda_graph_without_a_capture_line_is_not_called_full() -> None:
    ran = dict(judge([], server_info()).ran)
    assert ran["decode CUDA graph"] == "not captured (no capture in the server log; planned full)"
    assert ran["prefill CUDA graph"] == "not captured (no capture in the server log; planned breakable)"


def test_reason_of_another_topic_is_not_given() -> None:
    config = judge(["--cuda-graph-max-bs-decode", "512"], server_info(), [MULTIMODAL, MAX_RUNNING_RESET])
    assert outcome(config, "--cuda-graph-max-bs-decode").because is None


def test_mixed_chunk_turned_off_for_speculative_decoding_names_the_message() -> None:
    message = "Mixed chunked prefill is disabled: EAGLE speculative decoding does not support it."
    config = judge(["--enable-mixed-chunk", *SPEC], _spec_info(), [message, DRAFT_ADJUSTED])
    found = outcome(config, "--enable-mixed-chunk")
    assert (found.status, found.requested, found.effective, found.because) == (
        Status.OVERRIDDEN, True, False, message)
    assert found.describe() == f"requested --enable-mixed-chunk true, server ran false, because: {message}"


# Speculative decoding ----------------------------------------------------------------------------------------------


def _spec_info(algorithm: str = "EAGLE", draft_tokens: int = 4, **args: Any) -> dict[str, Any]:
    return server_info(speculative_algorithm=algorithm, speculative_num_steps=3, speculative_eagle_topk=1,
                       speculative_num_draft_tokens=draft_tokens, max_running_requests=48, cap=48, **args)


def test_speculative_alias_is_ok_and_draft_token_adjustment_is_tied_to_its_message() -> None:
    config = judge(SPEC, _spec_info(), [MAX_RUNNING_RESET, DRAFT_ADJUSTED])
    statuses = {o.flag: (o.status, o.requested, o.effective) for o in config.flags}
    assert statuses == {
        "--speculative-algorithm": (Status.OK, "nextn", "EAGLE"),
        "--speculative-num-steps": (Status.OK, 3, 3),
        "--speculative-eagle-topk": (Status.OK, 1, 1),
        "--speculative-num-draft-tokens": (Status.OVERRIDDEN, 5, 4),
    }
    assert outcome(config, "--speculative-num-draft-tokens").because == DRAFT_ADJUSTED
    assert config.problems == (f"requested --speculative-num-draft-tokens 5, server ran 4, because: {DRAFT_ADJUSTED}",)
    assert dict(config.ran)["speculative decoding"] == "EAGLE steps=3 topk=1 draft_tokens=4"
    assert dict(config.ran)["max running requests"] == "48 per DP rank"


@pytest.mark.parametrize(("algorithm", "server", "status"), [
    ("NEXTN", "EAGLE", Status.OK), ("eagle", "EAGLE", Status.OK), ("EAGLE3", "EAGLE3", Status.OK),
    ("nextn", "EAGLE3", Status.OVERRIDDEN), ("eagle3", "EAGLE", Status.OVERRIDDEN),
])
def test_speculative_algorithm_is_compared_upper_case_with_aliases(algorithm: str, server: str,
                                                                    status: Status) -> None:
    args = ["--speculative-algorithm", algorithm, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"]
    assert outcome(judge(args, _spec_info(server)), "--speculative-algorithm").status is status


def test_promoted_speculative_algorithm_gives_the_promotion_message() -> None:
    message = "Detected Gemma4AssistantForCausalLM draft; promoting --speculative-algorithm EAGLE to FROZEN_KV_MTP."
    config = judge(SPEC, _spec_info("FROZEN_KV_MTP", draft_tokens=5), [message])
    found = outcome(config, "--speculative-algorithm")
    assert (found.status, found.effective, found.because) == (Status.OVERRIDDEN, "FROZEN_KV_MTP", message)
    assert outcome(config, "--speculative-num-draft-tokens").status is Status.OK


# The request cap -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("asked", "attn_dp", "per_dp", "status"), [
    (64, 1, 64, Status.OK),
    (64, 2, 32, Status.OK),  # the cap is per DP rank: 64 // 2
    (64, 2, 64, Status.OVERRIDDEN),
    (64, 1, 40, Status.OVERRIDDEN),  # KV sizing lowered it
    (1, 4, 1, Status.OK),  # never below one request per rank
])
def test_max_running_requests_is_checked_per_attention_dp_rank(asked: int, attn_dp: int, per_dp: int,
                                                                 status: Status) -> None:
    args = ["--max-running-requests", str(asked), *(["--attn-dp-size", str(attn_dp)] if attn_dp > 1 else [])]
    info = server_info(attn_dp_size=attn_dp, dp_size=attn_dp, enable_dp_attention=attn_dp > 1,
                       max_running_requests=asked, cap=per_dp)
    config = judge(args, info)
    found = outcome(config, "--max-running-requests")
    assert (found.status, found.effective) == (status, per_dp)
    assert dict(config.ran)["max running requests"] == f"{per_dp} per DP rank"


def test_max_running_requests_reset_message_is_its_reason() -> None:
    message = ("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
               "setting --max-running-requests.")
    found = outcome(judge(["--max-running-requests", "64"], server_info(cap=48), [message]), "--max-running-requests")
    assert (found.status, found.because) == (Status.OVERRIDDEN, message)


# CUDA-graph switches -----------------------------------------------------------------------------------------------


def test_disable_cuda_graph_is_ok_when_both_phases_are_disabled() -> None:
    config = judge(["--disable-cuda-graph"], server_info(prefill={"backend": "disabled"},
                                                         decode={"backend": "disabled"}, disable_cuda_graph=True))
    found = outcome(config, "--disable-cuda-graph")
    assert (found.status, found.requested, found.effective) == (Status.OK, True, "disabled")
    assert config.switched_off == () and config.verdict == "ok"


def test_disable_cuda_graph_with_one_phase_still_on_is_overridden_naming_each_phase() -> None:
    config = judge(["--disable-cuda-graph"], server_info(decode={"backend": "disabled"}, disable_cuda_graph=True))
    found = outcome(config, "--disable-cuda-graph")
    assert found.status is Status.OVERRIDDEN
    assert found.effective == {"decode.backend": "disabled", "prefill.backend": "breakable"}
    assert found.describe() == ('requested --disable-cuda-graph true, server ran '
                                '{"decode.backend": "disabled", "prefill.backend": "breakable"}, '
                                'SGLang printed no reason')


def test_disable_prefill_cuda_graph_is_checked_against_the_prefill_plan() -> None:
    ok = judge(["--disable-prefill-cuda-graph"], server_info(prefill={"backend": "disabled"}))
    ignored = judge(["--disable-prefill-cuda-graph"], server_info())
    assert outcome(ok, "--disable-prefill-cuda-graph").status is Status.OK
    assert (outcome(ignored, "--disable-prefill-cuda-graph").status,
            outcome(ignored, "--disable-prefill-cuda-graph").effective) == (Status.OVERRIDDEN, "breakable")


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "str"])
@pytest.mark.parametrize(("setting", "decode", "status"), [
    ({"decode": {"max_bs": 64}}, {"max_bs": 64}, Status.OK),
    ({"decode": {"max_bs": 64, "bs": [1, 2, 4]}}, {"max_bs": 64, "bs": [1, 2, 4]}, Status.OK),
    ({"decode": {"max_bs": 64}}, {"max_bs": 256}, Status.OVERRIDDEN),
    ({"decode": {"bs": [1, 2, 4]}}, {"bs": [1, 2, 4, 8]}, Status.OVERRIDDEN),
    ({"prefill": {"max_seq_len": 4096}}, {}, Status.OVERRIDDEN),  # the plan has None
    ({"prefill": {"backend": "disabled"}, "decode": {"max_bs": 256}}, {}, Status.OVERRIDDEN),
])
def test_cuda_graph_config_is_compared_key_by_key(as_text: bool, setting: dict[str, Any],
                                                  decode: dict[str, Any], status: Status) -> None:
    info = server_info(decode=decode)
    if as_text:  # a value the parser left as text (e.g. from a config file)
        flags = [Requested("--cuda-graph-config", "cuda_graph_config", json.dumps(setting))]
        config = evaluate("v", flags, info, StartupFacts(), [], RULES)
    else:
        config = judge(["--cuda-graph-config", json.dumps(setting)], info)
    found = outcome(config, "--cuda-graph-config")
    assert found.status is status
    assert found.effective == info["cuda_graph_config"]
    assert config.switched_off == ()  # the user configured the graphs: not a silent default
    json.dumps(config.to_dict())


def test_cuda_graph_config_key_the_plan_does_not_show_is_overridden() -> None:
    flags = [Requested("--cuda-graph-config", "cuda_graph_config", '{"decode": {"not_in_the_plan": 1}}')]
    config = evaluate("v", flags, server_info(), StartupFacts(), [], RULES)
    assert outcome(config, "--cuda-graph-config").status is Status.OVERRIDDEN


# Default optimizations SGLang switched off -------------------------------------------------------------------------


def _multimodal(**args: Any) -> dict[str, Any]:
    return server_info(prefill={"backend": "disabled"}, model_path="Qwen/Qwen2.5-VL-7B-Instruct", **args)


def test_multimodal_rule_is_reported_as_switched_off_with_its_message() -> None:
    config = judge(["--cuda-graph-max-bs-decode", "256"], _multimodal(), [MULTIMODAL, GENERIC_SKIP])
    assert config.switched_off == (SwitchedOff("the prefill CUDA graph", MULTIMODAL),)
    assert config.problems == (f"SGLang switched off the prefill CUDA graph (on by default) because: {MULTIMODAL}",)
    assert config.verdict == "differs"
    assert outcome(config, "--cuda-graph-max-bs-decode").status is Status.OK


def test_switched_off_without_a_message_says_so() -> None:
    config = judge([], server_info(decode={"backend": "disabled"}))
    assert config.switched_off == (SwitchedOff("the decode CUDA graph", None),)
    assert config.problems == ("SGLang switched off the decode CUDA graph (on by default) SGLang printed no reason",)


def test_capture_time_skip_is_a_switched_off_prefill_graph() -> None:
    config = judge([], server_info(), [NO_LAYERS])
    assert config.switched_off == (SwitchedOff("the prefill CUDA graph", NO_LAYERS),)


def test_nothing_is_switched_off_on_a_cpu_server() -> None:
    """On CPU the graphs are off by default (§8.1 step 1): not a surprise to report."""
    info = server_info(prefill={"backend": "disabled"}, decode={"backend": "disabled"}, device="cpu",
                       disable_overlap_schedule=True)
    assert judge([], info).switched_off == ()


@pytest.mark.parametrize("args", [
    ["--cuda-graph-backend-prefill", "disabled"], ["--disable-prefill-cuda-graph"], ["--disable-cuda-graph"],
    ["--cuda-graph-config", '{"prefill": {"backend": "disabled"}}'],
])
def test_prefill_graph_the_user_turned_off_is_not_reported(args: list[str]) -> None:
    config = judge(args, _multimodal(decode={"backend": "disabled"} if "--disable-cuda-graph" in args else None),
                   [MULTIMODAL])
    assert config.switched_off == ()
    assert [o.status for o in config.flags] == [Status.OK]


def test_overlap_scheduler_disabled_by_pipeline_parallelism_is_reported_unless_pp_was_requested() -> None:
    info = server_info(pp_size=2, disable_overlap_schedule=True, prefill={"backend": "disabled"})
    messages = [PP_PREFILL, PP_OVERLAP]
    silent = judge([], info, messages)
    assert silent.switched_off == (SwitchedOff("the prefill CUDA graph", PP_PREFILL),
                                   SwitchedOff("the overlap scheduler", PP_OVERLAP))
    assert dict(silent.ran)["overlap scheduler"] == "off"
    asked = judge(["--pp-size", "2"], info, messages)
    assert [s.name for s in asked.switched_off] == ["the prefill CUDA graph"]
    assert outcome(asked, "--pp-size").status is Status.OK


def test_overlap_scheduler_on_is_not_reported() -> None:
    config = judge([], server_info())
    assert config.switched_off == ()
    assert dict(config.ran)["overlap scheduler"] == "on"


# Flags nothing can confirm, flags /server_info does not show ----------------------------------------------------


def test_nccl_nvls_is_a_note_not_a_problem() -> None:
    config = judge(["--enable-nccl-nvls"], server_info(enable_nccl_nvls=True))
    found = outcome(config, "--enable-nccl-nvls")
    assert found.status is Status.UNCONFIRMED
    assert config.problems == () and config.verdict == "ok"
    [note] = config.notes
    assert note.startswith("--enable-nccl-nvls: cannot be confirmed: ")
    assert "NCCL_NVLS_ENABLE=1" in note


def test_flag_missing_from_server_info_is_not_reported() -> None:
    info = server_info()
    del info["enable_nccl_nvls"]
    config = judge(["--config", "variant.yaml", "--enable-nccl-nvls"], info)
    assert [(o.flag, o.status, o.effective) for o in config.flags] == [
        ("--config", Status.NOT_REPORTED, None), ("--enable-nccl-nvls", Status.NOT_REPORTED, None)]
    assert outcome(config, "--config").describe() == "--config: cannot be confirmed: /server_info does not report it"
    assert config.problems == () and config.verdict == "ok"  # listed as a note, never a finding
    assert config.notes == ("--config: cannot be confirmed: /server_info does not report it",
                            "--enable-nccl-nvls: cannot be confirmed: /server_info does not report it")


def test_last_occurrence_of_a_repeated_flag_wins() -> None:
    config = judge(["--cuda-graph-max-bs-decode", "512", "--cuda-graph-max-bs-decode", "256"], server_info())
    assert [(o.requested, o.status) for o in config.flags] == [(256, Status.OK)]


# Secrets ---------------------------------------------------------------------------------------------------------


def _secret_info() -> dict[str, Any]:
    launch = f"python -m sglang.launch_server --model-path Qwen/Qwen3-8B --api-key {API_KEY} --port 30000"
    return server_info(api_key=API_KEY, admin_api_key="admin-77", watermark_key="wm-1", launch=launch)


def test_redact_info_drops_secret_fields_everywhere_and_masks_the_key() -> None:
    raw = _secret_info()
    before = copy.deepcopy(raw)
    clean = redact_info(raw, RULES, [API_KEY, ""])
    text = json.dumps(clean)
    assert API_KEY not in text and "admin-77" not in text and "wm-1" not in text
    for part in (clean, clean["internal_states"][0]):
        assert not {"api_key", "admin_api_key", "watermark_key"} & part.keys()
    assert clean["launch_command"] == ("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --api-key *** "
                                       "--port 30000")
    assert clean["cuda_graph_config"] == raw["cuda_graph_config"]
    assert clean["internal_states"][0]["effective_max_running_requests_per_dp"] == 2048
    assert raw == before  # the caller's document is not changed


def test_api_key_is_never_in_the_outcomes() -> None:
    info = redact_info(_secret_info(), RULES, [API_KEY])
    config = evaluate("v", requested("--api-key", API_KEY, "--admin-api-key", "admin-77", "--enable-nccl-nvls",
                                     "--cuda-graph-max-bs-decode", "512"), info, StartupFacts(), [], RULES)
    assert [o.flag for o in config.flags] == ["--enable-nccl-nvls", "--cuda-graph-max-bs-decode"]
    shown = [json.dumps(config.to_dict()), *config.warnings, *config.notes, *(o.describe() for o in config.flags)]
    for text in shown:
        assert API_KEY not in text and "admin-77" not in text


def test_api_key_is_not_in_the_config_repr() -> None:
    info = redact_info(_secret_info(), RULES, [API_KEY])
    config = evaluate("v", requested("--api-key", API_KEY), info, StartupFacts(), [], RULES)
    assert API_KEY not in repr(config)


# Variants that measure the same thing ---------------------------------------------------------------------------


def test_flag_equal_to_the_default_measures_nothing_new() -> None:
    earlier = judge([], server_info(), variant="base")
    later = judge(["--cuda-graph-max-bs-decode", "256"], server_info(cuda_graph_max_bs_decode=256), variant="bs256")
    assert same_as(later, earlier, RULES) == (
        "measures nothing new: its only difference from variant 'base' (--cuda-graph-max-bs-decode) did not change "
        "what the server ran")


def test_each_differing_flag_is_named_also_when_only_the_earlier_variant_has_it() -> None:
    earlier = judge(["--cuda-graph-max-bs-decode", "256"], server_info(), variant="bs256")
    later = judge(["--cuda-graph-backend-prefill", "breakable"], server_info(), variant="bcg")
    why = same_as(later, earlier, RULES)
    assert why is not None
    assert "variant 'bs256' (--cuda-graph-backend-prefill, --cuda-graph-max-bs-decode)" in why


def test_nextn_and_eagle_run_the_same_speculative_decoding() -> None:
    eagle = ["--speculative-algorithm", "EAGLE", *SPEC[2:]]
    earlier = judge(eagle, _spec_info(), [DRAFT_ADJUSTED], variant="eagle")
    later = judge(SPEC, _spec_info(), [DRAFT_ADJUSTED], variant="nextn")
    assert same_as(later, earlier, RULES) == (
        "measures nothing new: its only difference from variant 'eagle' (--speculative-algorithm) did not change "
        "what the server ran")


def test_flag_that_changed_what_ran_measures_something_new() -> None:
    earlier = judge([], server_info(), variant="base")
    later = judge(["--cuda-graph-max-bs-decode", "128"], server_info(decode={"max_bs": 128}), variant="bs128")
    assert same_as(later, earlier, RULES) is None


def test_capture_time_skip_makes_a_requested_graph_the_same_as_none() -> None:
    earlier = judge(["--cuda-graph-backend-prefill", "disabled"], server_info(prefill={"backend": "disabled"}),
                    variant="eager")
    later = judge(["--cuda-graph-backend-prefill", "breakable"], server_info(), [NO_LAYERS], variant="bcg")
    why = same_as(later, earlier, RULES)
    assert why is not None and "variant 'eager' (--cuda-graph-backend-prefill) did not change" in why
    assert same_as(judge(["--cuda-graph-backend-prefill", "breakable"], server_info()), earlier, RULES) is None


@pytest.mark.parametrize("args", [[], ["--cuda-graph-max-bs-decode", "256"], ["--api-key", API_KEY]])
def test_identical_requests_measure_something_new(args: list[str]) -> None:
    """Repeats of one variant (or variants differing only in a secret) are not duplicates."""
    earlier = judge(args, server_info(), variant="a")
    later = judge(args if "--api-key" not in args else [], server_info(), variant="b")
    assert same_as(later, earlier, RULES) is None


def test_a_different_api_key_is_not_a_difference() -> None:
    earlier = judge(["--api-key", API_KEY], server_info(), variant="keyed")
    later = judge(["--cuda-graph-max-bs-decode", "256"], server_info(), variant="bs256")
    assert same_as(later, earlier, RULES) == (
        "measures nothing new: its only difference from variant 'keyed' (--cuda-graph-max-bs-decode) did not change "
        "what the server ran")


def test_flag_not_in_server_info_is_never_a_duplicate() -> None:
    earlier = judge([], server_info(), variant="a")
    later = judge(["--config", "variant.yaml"], server_info(), variant="b")
    assert same_as(later, earlier, RULES) is None


def test_unavailable_configuration_is_never_a_duplicate() -> None:
    read = judge(["--cuda-graph-max-bs-decode", "256"], server_info(), variant="a")
    lost = dataclasses.replace(judge([], server_info(), variant="b"), unavailable="GET /server_info: HTTP 404")
    assert same_as(lost, read, RULES) is None
    assert same_as(read, lost, RULES) is None
    assert same_as(read, unavailable("c", "connection refused", StartupFacts()), RULES) is None


# Reports ---------------------------------------------------------------------------------------------------------


def test_to_dict_is_json_with_each_verdict() -> None:
    clean = judge(["--cuda-graph-bs-decode", "1", "2", "4"], server_info(decode={"bs": [1, 2, 4]}))
    differs = judge([*SPEC, "--enable-nccl-nvls"], _spec_info(enable_nccl_nvls=True), [DRAFT_ADJUSTED])
    duplicate = dataclasses.replace(clean, duplicate="measures nothing new: ...")
    assert [c.verdict for c in (clean, differs, duplicate)] == ["ok", "differs", "duplicate"]
    data = json.loads(json.dumps(differs.to_dict()))
    assert data["verdict"] == "differs"
    assert data["warnings"] == list(differs.problems)
    assert data["notes"] == list(differs.notes) and len(data["notes"]) == 1
    assert data["unavailable"] is None
    assert data["ran"]["speculative decoding"] == "EAGLE steps=3 topk=1 draft_tokens=4"
    assert {"flag": "--speculative-num-draft-tokens", "dest": "speculative_num_draft_tokens", "requested": 5,
            "effective": 4, "status": "overridden", "category": "changed by SGLang", "because": DRAFT_ADJUSTED} in \
        data["flags"]
    assert {flag["category"] for flag in data["flags"]} == {"confirmed", "changed by SGLang", "cannot be confirmed"}
    assert json.loads(json.dumps(clean.to_dict()))["flags"][0]["requested"] == [1, 2, 4]
    dup = json.loads(json.dumps(duplicate.to_dict()))
    assert (dup["verdict"], dup["warnings"]) == ("duplicate", ["measures nothing new: ..."])
    assert duplicate.problems == () and not duplicate.problems


def test_unavailable_configuration_is_a_problem_with_nothing_verified() -> None:
    config = unavailable("v", "GET /server_info: HTTP 404", StartupFacts())
    assert config.problems == ("the effective configuration could not be read: GET /server_info: HTTP 404",)
    assert config.verdict == "differs" and config.flags == ()
    assert dict(config.ran) == {"prefill CUDA graph": "not reported", "decode CUDA graph": "not reported"}
    assert json.loads(json.dumps(config.to_dict()))["unavailable"] == "GET /server_info: HTTP 404"


CAPTURES = [
    "Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 16], avail mem=20.00 GB",
    "Capture target prefill CUDA graph end. elapsed=20.51 s, mem usage=1.20 GB, avail mem=18.80 GB.",
    "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=18.80 GB",
    "Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 12, 16], elapsed=10.00 s, mem usage=0.50 GB, "
    "avail mem=18.30 GB.",
]


def test_ran_lines_show_the_captures() -> None:
    config = judge([], server_info(), CAPTURES)
    assert dict(config.ran) == {
        "prefill CUDA graph": "breakable (captured in 20.51 s, tokens 4..16 (3 sizes))",
        "decode CUDA graph": "full (captured in 10.00 s, bs 1..16 (6 sizes))",
        "max running requests": "2048 per DP rank",
        "overlap scheduler": "on",
    }


def test_ran_lines_of_0_5_13_read_each_graphs_own_switch() -> None:
    """0.5.13's /server_info has no cuda_graph_config: the prefill ("piecewise") graph is disable_piecewise_cuda_graph,
    the decode graph disable_cuda_graph (docs/sglang-older-releases.md §3.1); its capture lines are the old ones."""
    from pytest_sglang_perf.server.ran import ran_lines
    from pytest_sglang_perf.server.startup import startup_facts

    log = ("[2026-05-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. "
           "avail mem=20.00 GB\n[2026-05-01 10:00:00 TP0] Capture cuda graph bs [1, 2, 4]\n"
           "[2026-05-01 10:00:09 TP0] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=0.50 GB. "
           "avail mem=19.50 GB.\n")
    info = {"disable_piecewise_cuda_graph": True, "disable_cuda_graph": False}
    ran = dict(ran_lines(info, startup_facts(log)))
    assert ran["decode CUDA graph"] == "full (captured in 9.00 s, bs 1..4 (3 sizes))"
    assert ran["prefill CUDA graph"] == "disabled"
    planned = dict(ran_lines({**info, "disable_piecewise_cuda_graph": False}, startup_facts(log)))
    assert planned["prefill CUDA graph"] == "not captured (no capture in the server log; planned piecewise)"


def test_decode_line_with_speculative_decoding_shows_the_target_verify_capture() -> None:
    messages = [
        "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=18.80 GB",
        "Capture target verify CUDA graph end. bs=[1, 2, 4, 8], elapsed=10.00 s, mem usage=0.50 GB, "
        "avail mem=18.30 GB.",
        "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=18.30 GB",
        "Capture draft decode CUDA graph end. elapsed=3.00 s, mem usage=0.10 GB, avail mem=18.20 GB.",
    ]
    config = judge(SPEC, _spec_info(), [DRAFT_ADJUSTED, *messages])
    assert dict(config.ran)["decode CUDA graph"] == "full (captured in 10.00 s, bs 1..8 (4 sizes))"


def test_reasons_come_in_log_order_and_only_reasons_count() -> None:
    """Two messages about one topic: in the order SGLang printed them, whatever the rules file's order; the
    `backend='full' is experimental` note is not a reason for anything."""
    messages = [
        "Disable prefill CUDA graph because the target model does not have a 'layers' attribute",
        "cuda_graph_config[prefill].backend='full' is experimental. Use breakable for production workloads.",
        "Breakable CUDA graph is incompatible with multimodal model; disabling prefill CUDA graph.",
    ]
    found = topic_messages(messages, RULES)
    assert found["prefill_cuda_graph"] == [messages[0], messages[2]]
    assert not any("experimental" in m for topic in found.values() for m in topic)


def test_a_coloured_message_is_tied_to_its_flag_without_its_colour_codes() -> None:
    from pytest_sglang_perf.server.effective import topic_messages
    from pytest_sglang_perf.sglang_facts.rules import load_rules

    coloured = ("\x1b[1;33m'--enable-dp-attention' is deprecated and will be removed in a future release. Use "
                "'--attn-dp-size <dp-size>' instead.\x1b[0m")
    assert topic_messages([coloured], load_rules("0.5.23"))["enable_dp_attention"] == [coloured[7:-4]]
