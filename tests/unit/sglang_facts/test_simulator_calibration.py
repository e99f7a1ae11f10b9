"""The simulator's calibration (docs/simulated-models.md, "Calibration"): the two measured anchors it reproduces, and
the data tables its constants come from (sglang_facts/data/sim-timing.json, gpus.json), each with its source."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pytest
from sim_setup import LLAMA_1B, REPO, SEED_CONFIG, SEED_FLAGS, costs

from pytest_sglang_perf.sglang_facts.gpus import GPU_TABLE, GpuTableError, find_gpu, load_gpu_table
from pytest_sglang_perf.sglang_facts.known_models import shipped_config
from pytest_sglang_perf.sglang_facts.sim_timing import (
    SIM_TIMING_TABLE,
    SOURCE_KINDS,
    SimTimingError,
    load_sim_timing,
    timing_constants,
)

LLAMA_3_8B = json.loads(Path(str(shipped_config("meta-llama/Llama-3.1-8B-Instruct"))).read_text())
"""Llama-3-8B's shape (3.1 differs only in its rope scaling and context length)."""
ACCEPT = 3.0
CONTEXT = 600
H200_GEMV_TB_S = 3.70
H200_STEP_S = 5.89e-3
"""Measured on an H200 (torch 2.11, issue 13): bf16 GEMVs of a Llama-3-8B step, and a whole CUDA-graphed step of a
plain torch forward at batch 1 and 600 tokens of context."""


def _seed_efficiency() -> float:
    """The step's bytes over the simulated GPU's read bandwidth, as a share of the simulated step: what the plugin's
    ceiling reports for a simulated cell (the lead's formula), with the bytes from the step's own terms."""
    seed = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    ceiling_seconds = seed.decode_bytes(1, CONTEXT) / (seed.gpu.read_bandwidth_gb_s * 1e9)
    return ceiling_seconds / seed.decode_step(1, CONTEXT)


def test_anchor_a_the_seed_reads_its_bytes_for_about_83_percent_of_the_step() -> None:
    """Qwen3.6-27B, tp 2 on 2x RTX A6000, NEXTN 3 steps: the engineer measured 50-57 tok/s, ~83% of it the read."""
    seed = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    assert 50 <= ACCEPT / seed.decode_step(1, CONTEXT) <= 57
    assert 0.80 <= _seed_efficiency() <= 0.86


def test_anchor_a_counts_the_bytes_of_the_ceiling_formula() -> None:
    """One verify forward's weights (27B / 2, LM head included) + 3 draft forwards + the KV cache, per GPU."""
    seed = costs(SEED_CONFIG, *SEED_FLAGS, gpu="RTX A6000")
    draft = 3 * seed.draft_bytes
    kv = CONTEXT * seed.kv_bytes_per_token
    assert seed.decode_bytes(1, CONTEXT) == pytest.approx(seed.weight_bytes + draft + kv)
    assert 1.6e9 < seed.draft_bytes < 1.8e9 and kv == 600 * 2 * 64 * 2 * 256 * 2  # 4 KV heads / tp 2


def test_anchor_b_the_h200_bandwidth_term_matches_the_measured_gemvs() -> None:
    """15.0 GB of Llama-3-8B weights at the measured 3.70 TB/s (0.77 of 4.8): within 2%."""
    h200 = costs(LLAMA_3_8B, gpu="H200")
    assert h200.weight_bytes == pytest.approx(15.0e9, rel=0.01)
    assert h200.decode_split(1, CONTEXT).target == pytest.approx(15.0e9 / (H200_GEMV_TB_S * 1e12), rel=0.02)


def test_anchor_b_a_whole_graphed_h200_step_matches_the_measured_one() -> None:
    """Batch 1, 600 tokens, decode CUDA graph: 5.89 ms measured; within 5% (the issue allows 10%)."""
    h200 = costs(LLAMA_3_8B, gpu="H200")
    assert h200.uses_decode_graph(1)
    split = h200.decode_split(1, CONTEXT)
    assert split.total == pytest.approx(H200_STEP_S, rel=0.05)
    assert 1.5e-3 < split.total - split.target < 2.1e-3  # "~1.8 ms of each step: attention, norms, small kernels"


def test_the_small_kernels_scale_with_the_layer_count() -> None:
    """Per layer, inside the graph: a model twice as deep pays twice; a wider one of the same depth, the same."""
    shallow = costs(LLAMA_1B, gpu="H200").decode_split(1, 0)
    deep = costs({**LLAMA_1B, "num_hidden_layers": 32}, gpu="H200").decode_split(1, 0)
    wide = costs({**LLAMA_1B, "intermediate_size": 16384}, gpu="H200").decode_split(1, 0)
    assert deep.kernels == pytest.approx(2 * shallow.kernels) and wide.kernels == shallow.kernels
    assert shallow.kernels == 16 * load_sim_timing().kernels_per_layer_s


def test_every_gpu_keeps_its_datasheet_proportions() -> None:
    """The bandwidth term follows each GPU's datasheet x its GEMV efficiency; the ceiling its read bandwidth."""
    h200, a6000 = find_gpu("H200"), find_gpu("RTX A6000")
    assert h200.read_bandwidth_gb_s == pytest.approx(4200, rel=0.01)  # the probe's read, measured on an H200
    assert h200.gemv_bandwidth_gb_s == pytest.approx(3700, rel=0.01)  # the measured GEMVs
    assert a6000.gemv_efficiency > h200.gemv_efficiency  # GDDR6: a higher share in GEMVs (calibrated, anchor A)
    terms = {name: costs(LLAMA_3_8B, gpu=name).decode_split(1, 0).target for name in ("A6000", "H100", "B200")}
    assert terms["A6000"] / terms["H100"] == pytest.approx(3350 * 0.77 / (768 * a6000.gemv_efficiency))
    assert terms["H100"] / terms["B200"] == pytest.approx(8000 / 3350)


def test_every_timing_constant_says_where_it_came_from() -> None:
    constants = timing_constants()
    assert {c.name for c in constants} >= {"kernels_per_layer_s", "step_overhead_s", "decode_mfu"}
    assert [c.name for c in constants if not c.source.startswith(SOURCE_KINDS) or not c.unit] == []
    assert next(c for c in constants if c.name == "kernels_per_layer_s").source.startswith("calibrated to anchor B")


def test_every_gpu_efficiency_says_where_it_came_from() -> None:
    for gpu in json.loads(GPU_TABLE.read_text())["gpus"]:
        for key in ("read_efficiency_source", "gemv_efficiency_source"):
            assert gpu[key].startswith(("measured", "calibrated", "assumed")), (gpu["name"], key)
    h200 = next(gpu for gpu in json.loads(GPU_TABLE.read_text())["gpus"] if gpu["name"] == "NVIDIA H200")
    assert h200["read_efficiency_source"].startswith("measured") and h200["gemv_efficiency_source"].startswith(
        "measured")


def test_the_timing_table_is_package_data() -> None:
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    relative = SIM_TIMING_TABLE.relative_to(REPO / "pytest_sglang_perf").as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns["pytest_sglang_perf"])


def _table(folder: Path, **changes: object) -> Path:
    """The shipped table with `changes` (None: the constant removed), written to `folder`."""
    data = json.loads(SIM_TIMING_TABLE.read_text())
    for name, entry in changes.items():
        if entry is None:
            del data["constants"][name]
        else:
            data["constants"][name] = entry
    folder.mkdir()
    path = folder / "sim-timing.json"
    path.write_text(json.dumps(data))
    return path


def test_a_broken_timing_table_names_the_file_and_the_constant(tmp_path: Path) -> None:
    missing = _table(tmp_path / "a", decode_mfu=None)
    with pytest.raises(SimTimingError, match=r"sim-timing.json: missing constants \['decode_mfu'\], unknown .*\[\]"):
        load_sim_timing(missing)
    text = _table(tmp_path / "b", step_overhead_s={"value": "fast", "source": "assumed"})
    with pytest.raises(SimTimingError, match=r"constant 'step_overhead_s': expected a number, got 'fast'"):
        load_sim_timing(text)
    unsourced = _table(tmp_path / "c", decode_mfu={"value": 0.5})
    with pytest.raises(SimTimingError, match=r"malformed .* needs a \"value\" and a \"source\""):
        load_sim_timing(unsourced)
    with pytest.raises(SimTimingError, match="simulator timing table not found"):
        load_sim_timing(tmp_path / "none.json")


def test_a_gpu_efficiency_outside_0_to_1_is_refused(tmp_path: Path) -> None:
    data = json.loads(GPU_TABLE.read_text())
    data["gpus"][0]["read_efficiency"] = 86
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GpuTableError, match=r"malformed GPU table .*read_efficiency 86.0 is not a share"):
        load_gpu_table(path)


H100_PREFILL = json.loads((REPO / "docs" / "measurements" / "h100-gpu-prefill.json").read_text())
"""A plain-torch Llama-3-8B prefill on an H100, eager and graphed (benchmarks/gpu_prefill.py,
docs/prefill-calibration.md)."""
PREFILL_WITHIN = {128: 0.20, 256: 0.15, 512: 0.12, 1024: 0.05, 2048: 0.05, 4096: 0.05, 8192: 0.05, 16384: 0.05}
"""How close the simulated prefill comes at each measured length (the soft maximum's fit, eager -19% at 128 tokens
and -13% at 256; docs/prefill-calibration.md)."""


@pytest.mark.parametrize("row", [r for r in H100_PREFILL["prefill"] if r["tokens"] in PREFILL_WITHIN],
                         ids=lambda row: str(row["tokens"]))
def test_the_prefill_reproduces_the_h100_measurement(row: dict[str, float]) -> None:
    """Graphed (a full prefill graph, as the measurement captured the whole forward) and eager: each within its
    tolerance, less the simulator's per-step host overhead, which the bare forward does not have."""
    tokens, within = int(row["tokens"]), PREFILL_WITHIN[int(row["tokens"])]
    overhead = load_sim_timing().step_overhead_s
    for backend, measured in (("full", row["graph_s"]), ("disabled", row["eager_s"])):
        step = costs(LLAMA_3_8B, "--cuda-graph-backend-prefill", backend, gpu="H100")
        simulated = step.prefill(tokens, step.attention_flops(tokens)) - overhead
        assert simulated == pytest.approx(measured, rel=within), (backend, simulated, measured)
