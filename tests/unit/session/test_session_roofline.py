"""The session's ceilings (session/roofline.py): which bandwidth, which bytes, which shape, and why a cell has none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.config.settings import Settings, Variant
from pytest_sglang_perf.hardware.bandwidth import BandwidthMeasurement
from pytest_sglang_perf.hardware.facts import GpuFacts
from pytest_sglang_perf.hardware.probe import ProbeReport
from pytest_sglang_perf.measurement.metrics import EFFICIENCY
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling
from pytest_sglang_perf.server.effective import EffectiveConfig
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.server.target_gpus import TargetGpus
from pytest_sglang_perf.session.roofline import NO_GPU, SessionRoofline, tokens_per_step
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.known_models import shipped_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SEED = "Qwen/Qwen3.6-27B"
H200 = TargetGpus(("NVIDIA H200",), 1)
PARAMS = RequestParams(prompt="p", max_tokens=513, temperature=0.6, seed=0, repeats=3, warmup=0)
SEED_INFO = {"tp_size": 2, "pp_size": 1, "speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
             "speculative_num_draft_tokens": 4, "kv_cache_dtype": "auto", "model_path": SEED,
             "speculative_draft_model_path": SEED}


def _run(model: str, info: dict[str, Any] | None, *, simulated: bool = False) -> VariantRun:
    config_file = shipped_config(model) if simulated else None
    plan = ServerPlan(Variant("default"), (), ("sglang", "--model-path", model), {}, simulated, None, True,
                      model_config=config_file)
    run = VariantRun(Variant("default"), plan)
    if info is not None:
        run.config = EffectiveConfig("default", (), (), (), info=info)
    return run


def _result(decode: tuple[float, ...], *, verify: int | None = None, tokens: int = 513) -> Result:
    samples = tuple(Sample(ttft=0.1, e2e=5.0, decode_time=4.9, completion_tokens=tokens, prompt_tokens=88,
                           chunks=tokens, spec_verify_ct=verify) for _ in decode)
    return Result("default", PARAMS, "hash", samples, {}, 1.0, False, values={"decode_throughput": decode})


def _session(tmp_path: Path, gpus: TargetGpus = H200, *, simulate: bool = False,
             tolerances: dict[str, float] | None = None, probe: ProbeReport | None = None) -> SessionRoofline:
    settings = Settings("test", tmp_path, LLAMA, tolerances=tolerances or {})
    session = SessionRoofline(settings, gpus, simulate=simulate)
    session.probe = probe
    return session


def _measured(gb_s: float) -> ProbeReport:
    bandwidth = BandwidthMeasurement("NVIDIA H200", gb_s, gb_s, 1 << 30, 20, "sum of 1 GiB, best of 20")
    gpu = GpuFacts(0, "NVIDIA H200", "9.0", 143155, "580.159.04", "13.0", 1980, 3201, 700.0)
    return ProbeReport((gpu,), (bandwidth,), "torch 2.11", None, 4.0)


def test_the_probes_measurement_comes_first(tmp_path: Path) -> None:
    ceiling = _session(tmp_path, probe=_measured(4200.0)).ceiling(_run(LLAMA, {"tp_size": 1}), _result((150.0,)))
    assert isinstance(ceiling, DecodeCeiling)
    assert (ceiling.bandwidth.source, ceiling.bandwidth.gb_s) == ("measured", 4200.0)
    assert ceiling.bandwidth.detail == ("sum of 1 GiB, best of 20; SM 9.0, 143155 MiB, driver 580.159.04, CUDA 13.0, "
                                        "max SM clock 1980 MHz, max memory clock 3201 MHz, power limit 700 W")
    assert ceiling.step.target == pytest.approx(15.01e9, rel=0.001)  # Llama-3.1-8B, bf16: the shipped config
    assert ceiling.tok_s == pytest.approx(4200e9 / ceiling.step.total)
    assert ceiling.efficiency == pytest.approx(150.0 / ceiling.tok_s)


def test_without_a_measurement_the_datasheet_figure_is_used_and_said(tmp_path: Path) -> None:
    ceiling = _session(tmp_path).ceiling(_run(LLAMA, {"tp_size": 1}), _result((150.0,)))
    assert isinstance(ceiling, DecodeCeiling)
    assert ceiling.bandwidth.source == "datasheet" and ceiling.bandwidth.gb_s == pytest.approx(4200.0)
    assert "4800 GB/s datasheet x 0.88 read efficiency" in ceiling.bandwidth.detail


def test_a_simulated_run_uses_the_simulated_gpu(tmp_path: Path) -> None:
    session = _session(tmp_path, TargetGpus(("RTX A6000",), None, "the simulator"), simulate=True)
    ceiling = session.ceiling(_run(SEED, SEED_INFO, simulated=True), _result((54.0,), verify=171))
    assert isinstance(ceiling, DecodeCeiling)
    assert (ceiling.bandwidth.source, ceiling.bandwidth.gpu) == ("simulated", "NVIDIA RTX A6000")
    assert ceiling.accept_length == pytest.approx(512 / 171)  # the prefill's first token is not a decode step's
    assert 30.0e9 < ceiling.step.total < 30.5e9  # per GPU at tp 2: target, 3 draft forwards, KV


@pytest.mark.parametrize(("gpus", "info", "expected"), [
    (TargetGpus(), {"tp_size": 1}, NO_GPU),
    (TargetGpus(("NVIDIA Quantum X1",), 1), {"tp_size": 1}, "is not in the GPU table"),
    (H200, None, "/server_info could not be read"),
])
def test_a_cell_without_a_ceiling_says_why(tmp_path: Path, gpus: TargetGpus, info: dict[str, Any] | None,
                                           expected: str) -> None:
    found = _session(tmp_path, gpus).ceiling(_run(LLAMA, info), _result((150.0,)))
    assert isinstance(found, str) and expected in found


def test_a_speculative_server_without_verify_counts_has_no_ceiling(tmp_path: Path) -> None:
    found = _session(tmp_path).ceiling(_run(SEED, SEED_INFO), _result((54.0,)))
    assert isinstance(found, str) and "no speculative statistics" in found


def test_a_model_nobody_ships_and_no_folder_holds_says_how_to_get_one(tmp_path: Path) -> None:
    found = _session(tmp_path).ceiling(_run("acme/unknown-7b", {"tp_size": 1}), _result((150.0,)))
    assert isinstance(found, str) and "acme/unknown-7b" in found


def test_a_failure_while_computing_is_a_reason_never_a_failed_measurement(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    config = {**json.loads(Path(str(shipped_config(LLAMA))).read_text()), "num_key_value_heads": "eight"}
    (folder / "config.json").write_text(json.dumps(config))
    annotated = _session(tmp_path).annotate(_run(str(folder), {"tp_size": 1}), _result((150.0,)))
    assert isinstance(annotated.roofline, str) and "num_key_value_heads" in annotated.roofline  # the field named
    assert annotated.values == {"decode_throughput": (150.0,)}  # the measurement itself is untouched


def test_a_cell_without_decode_has_no_ceiling_at_all(tmp_path: Path) -> None:
    assert _session(tmp_path).ceiling(_run(LLAMA, {"tp_size": 1}), _result(())) is None


def test_the_optional_gate_adds_each_requests_share_only_when_asked(tmp_path: Path) -> None:
    run, result = _run(LLAMA, {"tp_size": 1}), _result((140.0, 150.0, 160.0))
    plain = _session(tmp_path).annotate(run, result)
    assert EFFICIENCY not in plain.values and isinstance(plain.roofline, DecodeCeiling)
    gated = _session(tmp_path, tolerances={EFFICIENCY: 0.05}).annotate(run, result)
    assert isinstance(gated.roofline, DecodeCeiling)
    assert gated.values[EFFICIENCY] == pytest.approx([v / gated.roofline.tok_s for v in (140.0, 150.0, 160.0)])
    assert gated.summaries[EFFICIENCY].median == pytest.approx(150.0 / gated.roofline.tok_s)


def test_tokens_per_step_leave_the_prefills_token_out() -> None:
    assert tokens_per_step(_result((1.0,), verify=100, tokens=301), speculative=True) == 3.0
    assert tokens_per_step(_result((1.0,), tokens=301), speculative=True) is None
    assert tokens_per_step(_result((1.0,), tokens=301), speculative=False) == 1.0


KNOWN = [  # model, /server_info, tokens, verify steps, weights read per step per GPU (GB; docs/model-bytes.md)
    (LLAMA, {"tp_size": 1}, 513, None, 15.009),
    ("Qwen/Qwen3-30B-A3B", {"tp_size": 1}, 513, None, 6.083),  # MoE: 8 of 128 experts a token
    ("Qwen/Qwen2.5-VL-7B-Instruct", {"tp_size": 1}, 513, None, 14.141),  # multimodal: the vision tower is not read
    (SEED, SEED_INFO, 513, 171, 30.183),  # tp 2, 3 MTP draft forwards, a verify over 4 tokens
]


@pytest.mark.parametrize(("model", "info", "tokens", "verify", "weights_gb"), KNOWN, ids=[k[0] for k in KNOWN])
def test_the_ceiling_and_diagnosis_of_the_known_configs(tmp_path: Path, model: str, info: dict[str, Any],
                                                        tokens: int, verify: int | None, weights_gb: float) -> None:
    """On the simulated H200 (4,200 GB/s read): the ceiling is the read bandwidth over the step's bytes, times the
    decode tokens per step; a decode at 83% of it is called memory-bandwidth bound."""
    session = _session(tmp_path, TargetGpus(("H200",), None, "the simulator"), simulate=True)
    run = _run(model, info, simulated=True)
    probe = session.ceiling(run, _result((1.0,), verify=verify, tokens=tokens))
    assert isinstance(probe, DecodeCeiling)
    assert probe.step.target + probe.step.draft == pytest.approx(weights_gb * 1e9, rel=0.001)
    per_step = 1.0 if verify is None else (tokens - 1) / verify
    assert probe.tok_s == pytest.approx(per_step * 4200e9 / probe.step.total, rel=1e-6)
    ceiling = session.ceiling(run, _result((0.83 * probe.tok_s,), verify=verify, tokens=tokens))
    assert isinstance(ceiling, DecodeCeiling) and ceiling.efficiency == pytest.approx(0.83)
    assert ceiling.diagnosis() == ("decode at 83% of the bandwidth ceiling: memory-bandwidth bound; graph or overlap "
                                   "flags can gain at most ~17% of the step (+20% tok/s)")


EAGLE3_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "torch_dtype": "bfloat16",
                "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                "num_hidden_layers": 1, "vocab_size": 128256, "draft_vocab_size": 32000, "tie_word_embeddings": False}


def test_a_separate_draft_model_counts_its_own_bytes_per_draft_forward(tmp_path: Path) -> None:
    """EAGLE3 on Llama-3.1-8B: each of the 3 draft forwards reads the draft's layer and its own 32k-row LM head."""
    folder = tmp_path / "eagle3"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(EAGLE3_DRAFT))
    info = {"tp_size": 1, "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
            "speculative_num_draft_tokens": 4, "model_path": LLAMA, "speculative_draft_model_path": "eagle3"}
    ceiling = _session(tmp_path).ceiling(_run(LLAMA, info), _result((150.0,), verify=200))
    assert isinstance(ceiling, DecodeCeiling)
    head = 32000 * 4096 * 2
    assert 3 * head < ceiling.step.draft < 3 * (head + 0.8e9)  # not the target's 1.05 GB head three times
    missing = {**info, "speculative_draft_model_path": "nowhere/eagle"}
    unknown = _session(tmp_path).ceiling(_run(LLAMA, missing), _result((150.0,), verify=200))
    assert isinstance(unknown, DecodeCeiling) and unknown.step.draft == 3 * 128256 * 4096 * 2  # the heads alone
    assert any(note.startswith("draft model bytes unknown") for note in unknown.notes)


def test_attention_data_parallel_replicates_attention_and_a_layout_it_cannot_model_is_said(tmp_path: Path) -> None:
    plain = _session(tmp_path).ceiling(_run(LLAMA, {"tp_size": 4}), _result((150.0,)))
    dp = _session(tmp_path).ceiling(_run(LLAMA, {"tp_size": 4, "attn_dp_size": 4}), _result((150.0,)))
    assert isinstance(plain, DecodeCeiling) and isinstance(dp, DecodeCeiling)
    assert dp.step.target > plain.step.target  # each GPU holds all the attention weights of its DP group
    odd = _session(tmp_path).ceiling(_run(LLAMA, {"tp_size": 8, "ep_size": 3}), _result((150.0,)))
    assert isinstance(odd, str) and "parallel layout" in odd and "ep" in odd


def test_a_run_on_kept_servers_uses_the_probe_of_the_run_that_booted_them(tmp_path: Path) -> None:
    settings = Settings("test", tmp_path, LLAMA)
    cache = tmp_path / "state" / "probe-host.json"
    booting = SessionRoofline(settings, H200, simulate=False, cache=cache)
    booting.probe = _measured(4200.0)
    booting._keep_probe()
    reusing = SessionRoofline(settings, H200, simulate=False, cache=cache)
    ceiling = reusing.annotate(_run(LLAMA, {"tp_size": 1}), _result((150.0,))).roofline
    assert isinstance(ceiling, DecodeCeiling) and ceiling.bandwidth.gb_s == pytest.approx(4200.0)
    assert reusing.probe is not None and "by the run that booted the kept servers (--sglang-reuse)" in reusing.probe.via
    other_gpus = SessionRoofline(settings, TargetGpus(("NVIDIA H100 80GB HBM3",), 1), simulate=False, cache=cache)
    other_gpus.annotate(_run(LLAMA, {"tp_size": 1}), _result((150.0,)))
    assert other_gpus.probe is None  # another host's GPUs: the datasheet, as without reuse
