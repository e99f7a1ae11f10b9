"""Issue 16: no false findings. Every flag of SGLang 0.5.23's flag table, set to a value other than its default, goes
through SGLang's own parser and resolution (`prepare_server_args` + `resolve_once()`, what `sglang.launch_server`
runs before it starts anything; no server is booted) and through the plugin's effective-configuration comparison
(`server/effective.py::evaluate`) against the record `/server_info` would serve (`resolved_dict()`). For every flag
SGLang kept, the plugin must report no change; for every flag SGLang changed, it must report the change. Flags that
SGLang refuses to resolve on this CPU machine with this tiny Llama are listed below with SGLang's own reason. Flags
are batched into command lines of BATCH flags (a batch SGLang refuses is split until the flag stands alone), except
the listed ones and those the plugin reads from SGLang's plans (the rules' `effective_fields`: the CUDA-graph,
speculative and request-cap flags), which interact (two graph flags in one line decide one plan): each runs alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from corpus_values import corpus_args

from pytest_sglang_perf.sglang_facts.flags import load_flag_table
from pytest_sglang_perf.sglang_facts.rules import load_rules

RunScript = Callable[..., Any]
BATCH = 24
SEED_MATRIX = (("--tp-size", ["--tp-size", "2"]), ("--speculative-algorithm", ["--speculative-algorithm", "NEXTN"]),
               ("--speculative-num-steps", ["--speculative-num-steps", "3"]),
               ("--speculative-eagle-topk", ["--speculative-eagle-topk", "1"]),
               ("--speculative-num-draft-tokens", ["--speculative-num-draft-tokens", "4"]))
"""The project's own matrix (pyproject.toml: Qwen3.6-27B, tp 2, 3-step MTP), as one command line (key `seed --x`)."""
UNRESOLVABLE = {
    "--model-config-parser": "ValueError: Unknown model-config parser",
    "--quantize-and-serve": "ValueError: quantize_and_serve requires ModelOpt quantization",
    "--prefill-only-disable-kv-cache": "ValueError: --prefill-only-disable-kv-cache currently requires --is-embedding",
    "--enable-page-major-kv-layout": "AssertionError: --enable-page-major-kv-layout without --enable-unified-memory",
    "--enable-unified-memory": "AssertionError: --enable-page-major-kv-layout: the resolved attention backends",
    "--attn-dp-size": "AssertionError",
    "--attn-cp-size": "AssertionError: tp_size must be divisible by attn_cp_size",
    "--moe-dp-size": "AssertionError: tp_size must be divisible by moe_dp_size",
    "--dwdp-size": "AssertionError: dwdp_size (2) must equal tp_size (1)",
    "--dcp-replicate-q-proj": "ValueError: --dcp-replicate-q-proj requires --dcp-size > 1.",
    "--enable-prefill-cp": "ValueError: --cp-strategy must be set when --enable-prefill-cp is enabled.",
    "--enable-dsa-cache-layer-split": "ValueError: --enable-dsa-cache-layer-split is only supported for DSA",
    "--enable-cp-decode-attn-tp": "ValueError: --enable-cp-decode-attn-tp is only supported for models whose",
    "--enable-kv-cache-sharding": "ValueError: --enable-kv-cache-sharding is only supported on PD prefill workers",
    "--enable-tp-lm-head-all-to-all": "AssertionError: --enable-tp-lm-head-all-to-all requires attention DP",
    "--shared-experts-tp-size": "ValueError: --shared-experts-tp-size (2) must be a positive divisor",
    "--enable-layernorm-sp": "ValueError: --enable-layernorm-sp is only supported for",
    "--sidecar": "ValueError: --sidecar requires --grpc-port or SGLANG_GRPC_PORT.",
    "--sidecar-args": "ValueError: --sidecar-args requires --sidecar.",
    "--enable-http2": "ValueError: --enable-http2 requires the 'granian' package.",
    "--ssl-keyfile": "ValueError: --ssl-keyfile requires --ssl-certfile",
    "--ssl-certfile": "ValueError: --ssl-certfile requires --ssl-keyfile",
    "--ssl-ca-certs": "ValueError: --ssl-ca-certs has no effect without --ssl-certfile and --ssl-keyfile.",
    "--ssl-keyfile-password": "ValueError: --ssl-keyfile-password has no effect without --ssl-certfile",
    "--enable-ssl-refresh": "ValueError: --enable-ssl-refresh requires --ssl-certfile and --ssl-keyfile",
    "--mamba-backend": "ValueError: FlashInfer mamba module not available",
    "--enable-deepseek-v4-fp4-indexer": "ValueError: --enable-deepseek-v4-fp4-indexer requires SM100, SM120, or gfx95",
    "--speculative-draft-model-path": "OSError: We couldn't connect to 'https://huggingface.co'",
    "--ep-dispatch-algorithm": "ValueError: --ep-dispatch-algorithm static picks a different physical replica",
    "--enable-eplb": "AssertionError",
    "--elastic-ep-join-mode": "AssertionError: --elastic-ep-join-mode requires --elastic-ep-backend",
    "--elastic-ep-join-rank-offset": "AssertionError: --elastic-ep-join-rank-offset is only valid with",
    "--elastic-ep-initial-size": "AssertionError: --elastic-ep-initial-size is only valid for an Elastic EP",
    "--max-ep-size": "AssertionError: --max-ep-size requires --elastic-ep-backend to be set.",
    "--mamba-max-states-per-path": "ValueError: --mamba-max-states-per-path must be -1 (unlimited) or a positive",
    "--enable-mamba-cache-stochastic-rounding": "ValueError: Stochastic rounding for the Mamba SSM cache requires",
    "--enable-prefix-mm-cache": "ValueError: --enable-prefix-mm-cache requires --encoder-only to be enabled",
    "--dllm-algorithm": "RuntimeError: Unknown diffusion LLM algorithm",
    "--disaggregation-decode-enable-offload-kvcache": "ValueError: The argument "
                                                      "disaggregation-decode-enable-offload-kvcache is only supported",
    "--encoder-only": "ValueError: Model type LlamaForCausalLM is not supported for encoder disaggregation.",
    "--language-only": "ValueError: Model type LlamaForCausalLM is not supported for encoder disaggregation.",
    "--language-model-only": "ValueError: --language-model-only does not support ['LlamaForCausalLM'].",
    "--decrypted-config-file": "OSError: ",
    "--enable-deterministic-inference": "ValueError: Currently only ['ascend', 'fa3', 'fa4', 'flashinfer', "
                                        "'intel_xpu', 'triton'] attention b",
    "--rl-on-policy-target": "ValueError: Currently only ['ascend', 'fa3', 'fa4', 'flashinfer', 'intel_xpu', "
                             "'triton'] attention b",
    "--enable-mis": "AssertionError: Multi-item scoring requires flashinfer attention backend",
    "--prefill-kv-cache-dequant-dtype": "ValueError: --prefill-kv-cache-dequant-dtype applies only with "
                                        "--kv-cache-dtype=nvfp4.",
    "--enable-linker-mla-dedup": "ValueError: --enable-linker-mla-dedup requires the Mooncake linker.",
    "--enable-encoder-swa-bounded-replay": "ValueError: --enable-encoder-swa-bounded-replay requires DeepSeek-V4.1",
    "--disaggregation-decode-host-receive-threshold": "ValueError: --disaggregation-decode-retraction-backup=host_pool "
                                                      "is only supported on a PD decode",
    "--disaggregation-decode-allocation-policy": "ValueError: --disaggregation-decode-allocation-policy "
                                                 "prefill_complete does not yet support",
    "--speculative-use-block-verification": "ValueError: --speculative-use-block-verification only supports EAGLE",
    "--speculative-draft-sink-size": "ValueError: --speculative-draft-sink-size requires "
                                     "--speculative-draft-window-size.",
    "--enable-amd-monokernel": "ValueError: --enable-amd-monokernel cannot run this setup:",
    "--monokernel-backend": "ValueError: --enable-amd-monokernel cannot run this setup:",
    "--watermark-config": "sglang.srt.sampling.watermarking.config.WatermarkConfigError: failed to read watermark",
    "--enable-nvidia-megakernel": "ValueError: --enable-nvidia-megakernel cannot run this setup:",
    "--enable-megamoe-for-layernorm-sp": "ValueError: --enable-megamoe-for-layernorm-sp requires "
                                         "--enable-layernorm-sp.",
    "--enable-http-worker-reuseport": "ValueError: --enable-http-worker-reuseport requires --tokenizer-worker-num > 1",
    "--enable-return-aux-hidden-states": "ValueError: --enable-return-aux-hidden-states needs --speculative-algorithm",
    "--return-aux-hidden-state-layer-ids": "ValueError: --return-aux-hidden-state-layer-ids requires "
                                           "--enable-return-aux-hidden-states.",
    "--config": "ValueError: Config file must be YAML format",
}
"""Flags SGLang refuses to resolve here, alone on the tiny Llama with --device cpu, and its reason (the start of its
last traceback line): each needs another flag, a file, a package, a GPU or a model of another kind. The test checks
that each still fails so, so the list cannot go stale."""
PLAN_OVER_FIELD = {
    "cuda_graph_max_bs_decode": "on CPU, SGLang's decode CUDA-graph plan (cuda_graph_config.decode.max_bs, what the "
                                "plugin reads: what runs) keeps its own 32 whatever the flag asks, while the "
                                "top-level field keeps the request; with --device cuda the plan follows the flag",
}
"""Dests the plugin reads somewhere else than their top-level field (the rules' `effective_fields`), where that
place and the field disagree here: the plugin's report follows the place, and says why."""
NEEDS_A_SERVER = {
    "max_running_requests": "the plugin reads the scheduler's own cap (/server_info internal_states), which only a "
                            "running server reports: test_real_sglang.py holds it",
}


@pytest.fixture(scope="module")
def corpus(run_script: RunScript, tiny_model: Path, require: Callable[..., None],
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, Mapping[str, Any]]:
    require("transformers", "SGLang's argument resolution (it reads the model's config)")
    specs = {args[0]: (spec, args) for spec in load_flag_table().options if (args := corpus_args(spec))}
    cases = {flag: args for flag, (_, args) in specs.items()}
    mapped = set(load_rules("0.5.23").effective_fields)
    single = {flag for flag, (spec, _) in specs.items() if flag in UNRESOLVABLE or spec.dest in mapped}
    alone = [[{"flag": flag, "args": args}] for flag, args in cases.items() if flag in single]
    rest = [{"flag": flag, "args": args} for flag, args in cases.items() if flag not in single]
    seed = [{"key": f"seed {flag}", "flag": flag, "args": args} for flag, args in SEED_MATRIX]
    batches = [*alone, *(rest[i:i + BATCH] for i in range(0, len(rest), BATCH)), seed]
    answer = run_script("flag_corpus.py", {"head": ["--model-path", str(tiny_model), "--device", "cpu"],
                                           "batches": batches}, env={"HF_HUB_OFFLINE": "1"}, timeout=600,
                        cwd=tmp_path_factory.mktemp("corpus-cwd"))  # some flags' values are folders SGLang creates
    results: dict[str, Mapping[str, Any]] = answer["results"]
    assert set(results) == {*cases, *(f"seed {flag}" for flag, _ in SEED_MATRIX)}
    return results


def test_the_corpus_is_every_flag_with_a_value_to_set() -> None:
    table = load_flag_table().options
    left_out = sorted(spec.flags[0] for spec in table if corpus_args(spec) is None)
    assert left_out == ["--device", "--help", "--model-path"] or set(left_out) >= {"--device", "--model-path"}
    assert len(table) - len(left_out) >= 520, "the 0.5.23 table has 531 options"


def test_flags_sglang_cannot_resolve_here_are_listed_with_its_reason(corpus: Mapping[str, Mapping[str, Any]]) -> None:
    refused = {flag: result["error"] or f"exit {result['exit']}" for flag, result in corpus.items()
               if result["exit"] != 0}
    unlisted = {flag: why for flag, why in refused.items() if flag not in UNRESOLVABLE}
    assert unlisted == {}, "SGLang refuses these now: list them with why, or give them a value it takes"
    stale = sorted(flag for flag in UNRESOLVABLE if flag not in refused)
    assert stale == [], "SGLang resolves these now: drop them from UNRESOLVABLE"
    wrong = {flag: refused[flag] for flag, why in UNRESOLVABLE.items() if not refused[flag].startswith(why)}
    assert wrong == {}, "SGLang refuses these for another reason now"


def test_the_plugin_reports_a_change_exactly_where_sglang_made_one(corpus: Mapping[str, Mapping[str, Any]]) -> None:
    mapped = set(load_rules("0.5.23").effective_fields)
    disagree = {}
    for flag, result in corpus.items():
        dest, status = result.get("dest"), result.get("status")
        if result["exit"] != 0 or status == "secret" or dest in PLAN_OVER_FIELD or dest in NEEDS_A_SERVER:
            continue
        kept = result["requested"] == result["after"]
        if dest in mapped and status != "overridden":
            kept = True  # read elsewhere (test_resolution.py and test_effective_config.py hold those places)
        expected = {"ok", "unconfirmed"} if kept else {"overridden"}
        if status not in expected:
            disagree[flag] = (result["requested"], result["after"], status, result.get("effective"))
    assert disagree == {}, "(requested, SGLang's resolved field, the plugin's status, the plugin's effective value)"


def test_a_change_sglang_explained_carries_its_reason(corpus: Mapping[str, Mapping[str, Any]]) -> None:
    """Where SGLang logged a message naming a flag it changed, the report ties it to the flag."""
    unexplained = {flag: result["logged"] for flag, result in corpus.items()
                   if result.get("status") == "overridden" and result.get("logged") and not result.get("because")}
    assert unexplained == {}, "add the message to the rules' resolution_messages"


def test_the_seed_matrix_is_judged_as_sglang_resolves_it(corpus: Mapping[str, Mapping[str, Any]]) -> None:
    seed = {key: result for key, result in corpus.items() if key.startswith("seed ")}
    assert {key: (result["exit"], result.get("status")) for key, result in seed.items()} == {
        f"seed {flag}": (0, "ok") for flag, _ in SEED_MATRIX}  # NEXTN reported as EAGLE: the same algorithm


def test_the_listed_exceptions_still_hold(corpus: Mapping[str, Mapping[str, Any]]) -> None:
    by_dest = {result.get("dest"): result for result in corpus.values() if result["exit"] == 0}
    plan = by_dest["cuda_graph_max_bs_decode"]
    assert plan["requested"] == plan["after"] and plan["status"] == "overridden"  # PLAN_OVER_FIELD's case
    assert by_dest["max_running_requests"]["status"] == "not reported"  # NEEDS_A_SERVER's case


def test_the_corpus_counts(corpus: Mapping[str, Mapping[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    """The figures the issue's note asks for: printed (pytest -s), and bounded so that a change shows."""
    statuses = Counter(result.get("status") or "refused" for result in corpus.values())
    changed = {flag: result for flag, result in corpus.items() if result.get("status") == "overridden"}
    with capsys.disabled():
        print(f"\nflag corpus: {len(corpus)} flags; " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
        for flag, result in sorted(changed.items()):
            print(f"  changed: {flag} {result['requested']!r} -> {result['effective']!r}; reason: {result['because']}; "
                  f"SGLang logged: {result['logged']}")
    assert statuses["ok"] >= 400 and statuses["refused"] == len(UNRESOLVABLE)
