"""benchmarks/gpu_prefill.py: its FLOP count for a Llama-3-8B prefill, and its --tiny run on the CPU (a Python with
torch: this one's, else the sglang-cpu tox environment's; skipped without either), whose prefill agrees with the
decode step it reuses and masks the future."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "benchmarks"
SGLANG_CPU_PYTHON = Path.home() / ".cache/pytest-sglang-perf/tox/sglang-cpu/bin/python"


def _load() -> ModuleType:
    """The benchmark is no package: load it from its file, with benchmarks/ importable for its siblings."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("gpu_prefill", BENCH / "gpu_prefill.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("gpu_prefill", module)
        spec.loader.exec_module(sys.modules["gpu_prefill"])
    finally:
        sys.path.remove(str(BENCH))
    return sys.modules["gpu_prefill"]


prefill = _load()


def _torch_python() -> str | None:
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return str(SGLANG_CPU_PYTHON) if SGLANG_CPU_PYTHON.exists() else None


needs_torch = pytest.mark.skipif(_torch_python() is None, reason="no Python with torch (tox -e sglang-cpu makes one)")


def llama_8b() -> object:
    return prefill.llama.Shape.from_config(json.loads(prefill.LLAMA.read_text()))


def test_a_llama_8b_layer_multiplies_each_token_with_218m_weights() -> None:
    shape = llama_8b()
    # QKV 4096 x (4096 + 2 x 1024), O 4096 x 4096, gate/up and down 3 x 4096 x 14336
    assert prefill.layer_matrix_params(shape) == 4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336 == 218_103_808
    assert prefill.layer_gemm_shapes(shape, 512) == {"qkv": (512, 6144, 4096), "o": (512, 4096, 4096),
                                                     "gate_up": (512, 28672, 4096), "down": (512, 4096, 14336)}


def test_a_prefill_counts_every_token_s_layers_one_lm_head_and_half_the_attention_scores() -> None:
    shape = llama_8b()
    flops = prefill.prefill_flops(shape, 8192)
    assert flops.linear == 2 * 8192 * 32 * 218_103_808 + 2 * 4096 * 128256
    assert flops.attention == 32 * 4 * 8192 * (8192 // 2) * 32 * 128  # QK^T and PV over the causal half
    assert flops.total == flops.linear + flops.attention
    assert flops.total / 1e12 == pytest.approx(131.94, abs=0.01)


def test_a_row_derives_rates_shares_of_the_peak_and_the_launch_cost_per_layer() -> None:
    shape = llama_8b()
    row = prefill.prefill_row(shape, 2048, {"eager": [40.0, 41.0, 39.0], "graph": [36.0, 35.0, 37.0],
                                            "issue": [6.4, 6.5, 6.6]}, 989.0)
    flops = prefill.prefill_flops(shape, 2048).total
    assert (row["eager_s"], row["graph_s"], row["graph_best_s"]) == (0.040, 0.036, 0.035)
    assert row["tflops_graph"] == pytest.approx(flops / 0.036 / 1e12)
    assert row["mfu"] == pytest.approx(flops / 0.036 / 1e12 / 989.0)
    assert row["launch_per_layer_s"] == pytest.approx(0.004 / 32)
    assert row["issue_per_layer_s"] == pytest.approx(0.0065 / 32)
    assert row["gemm_s"] is None  # no GEMMs-alone timing given
    with_gemms = prefill.prefill_row(shape, 2048, {"eager": [40.0], "graph": [36.0], "issue": [6.5],
                                                   "gemms": [30.0, 29.0, 31.0]}, 989.0)
    assert with_gemms["gemm_s"] == 0.030 and with_gemms["other_s"] == pytest.approx(0.006)
    assert with_gemms["gemm_tflops"] == pytest.approx(prefill.prefill_flops(shape, 2048).linear / 0.030 / 1e12)
    assert with_gemms["gemm_mfu"] == pytest.approx(with_gemms["gemm_tflops"] / 989.0)


@needs_torch
def test_the_tiny_run_on_the_cpu_prints_a_row_per_prompt_length(tmp_path: Path) -> None:
    python = _torch_python()
    assert python is not None
    done = subprocess.run([python, str(BENCH / "gpu_prefill.py"), "--tiny", "--cpu", "--repeats", "2", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu_prefill.json").read_text())
    assert (report["tiny"], report["device"], report["probe"], report["gemm"]) == (True, "cpu", None, None)
    assert [row["tokens"] for row in report["prefill"]] == [16, 64]
    for row in report["prefill"]:
        assert "error" not in row and len(row["eager_ms"]) == 2 and row["graph_s"] is None
        assert row["flops"] == prefill.prefill_flops(prefill.llama.Shape.from_config(prefill.TINY), row["tokens"]).total
        assert (row["gemm_s"], row["launch_per_layer_s"]) == (None, None)  # both need a GPU
    assert done.stdout.splitlines()[-4].split() == ["N", "eager", "ms", "graph", "ms", "TFLOP", "TFLOP/s", "MFU",
                                                    "launch/layer", "us", "issue/layer", "us", "GEMMs", "ms",
                                                    "GEMM", "TFLOP/s"]


CHECK = """
import sys, torch
sys.path.insert(0, {bench!r})
import gpu_prefill as gp
shape = gp.llama.Shape.from_config(gp.TINY)
n = 48
ids = torch.randint(0, shape.vocab, (n,), generator=torch.Generator().manual_seed(1))
for repeat_kv in (False, True):
    model = gp.LlamaPrefill(torch, gp.random_weights(torch, shape, "cpu"), shape, n, "cpu", repeat_kv=repeat_kv)
    with torch.no_grad():
        model.prefill(ids[: n // 2])
        keys = model.k_cache[1][:, : n // 2].float().clone()
        last = model.prefill(ids).float()
        future = (model.k_cache[1][:, : n // 2].float() - keys).abs().max() / keys.abs().max()
        model.token.copy_(ids[-1:])
        step = model.step().float()  # the decode step over the cache the prefill filled, at position n - 1
    print(repeat_kv, future.item(), ((last - step).abs().max() / last.abs().max()).item())
"""


@needs_torch
def test_the_prefill_masks_the_future_and_agrees_with_a_decode_step_over_its_cache() -> None:
    """A later token leaves an earlier one's keys in layer 2 as they were (causal attention in layer 1), and the
    last token's logits are the decode step's over the K and V the prefill wrote; with K/V repeated as without."""
    python = _torch_python()
    assert python is not None
    done = subprocess.run([python, "-c", CHECK.format(bench=str(BENCH))], capture_output=True, text=True,
                          timeout=120, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [line.split() for line in done.stdout.splitlines()]
    assert [line[0] for line in lines] == ["False", "True"], done.stdout
    for _, future, mismatch in lines:
        assert float(future) < 0.02  # bf16 rounding at most: attending to later tokens moves them ~8%
        assert float(mismatch) < 0.02
