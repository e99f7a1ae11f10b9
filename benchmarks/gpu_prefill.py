"""Time one prefill (extend) forward of a Llama-3-8B-shaped model on one GPU, eagerly and as a CUDA graph, against
the GPU's measured bf16 GEMM rate: what the simulator's `prefill_mfu` and `prefill_launch_per_layer_s` stand for
(docs/prefill-calibration.md).

    python benchmarks/gpu_prefill.py --out DIR          # one GPU, torch; ~2 minutes, ~20 GB of GPU memory
    python benchmarks/gpu_prefill.py --tiny --out DIR   # a 2-layer model with small sizes, on the CPU too: a smoke test

Needs torch and nothing else; random bf16 weights made on the GPU (no checkpoint), Llama-3.1-8B's shape
(sglang_facts/data/models/). One request of N new tokens, an empty KV cache, batch 1, in plain torch
(gpu_validate_llama.py's layers): the embedding rows, per layer RMSNorm, the fused QKV GEMM, RoPE, the new K and V
written to the cache, causal grouped-query attention (torch's scaled_dot_product_attention), the output projection,
RMSNorm, the fused gate/up GEMM, SiLU x up, the down GEMM; the final norm and the LM head on the last token only, as
SGLang computes logits for the last position of a prefill alone. Per N: the forward eagerly and replayed from a CUDA
graph (a static token tensor per N), CUDA events after warm-up, best and median of the repeats; its FLOPs; the rate
and share of the datasheet peak it reaches; (eager - graphed) / layers, the launch cost a prefill graph removes per
layer; the host's time to issue an eager forward, per layer (what launching costs where GPU work hides none); and
the forward's GEMMs alone, graphed (their rate; the rest of the forward is attention and the small kernels). Beside
it: the probe's square 8192^3 GEMM (a child process, as the plugin runs it) and the rate of the GEMM shapes a
prefill of 512 and of 8192 tokens runs. Prints a JSON report and a table; writes DIR/gpu_prefill.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))  # the probe's

import gpu_validate_llama as llama  # noqa: E402
from gpu_validate import LLAMA, TINY  # noqa: E402

from pytest_sglang_perf.hardware import gemm  # noqa: E402
from pytest_sglang_perf.hardware.probe import probe_in_subprocess  # noqa: E402
from pytest_sglang_perf.roofline.prefill_flops import prefill_flops as count_prefill_flops  # noqa: E402
from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu  # noqa: E402
from pytest_sglang_perf.sglang_facts.model_sizes import model_config_from_dict  # noqa: E402

TOKENS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
TINY_TOKENS = (16, 64)
GEMM_TOKENS = (512, 8192)
REPEATS = 10


@dataclass(frozen=True)
class PrefillFlops:
    """One prefill forward's floating-point operations, 2 per multiply-add."""

    linear: int
    """The layers' weight matrices for every token, and the LM head for the last token alone."""
    attention: int
    """QK^T and PV over the causal half of the N x N scores: layers x 4 x N x (N/2) x heads x head_dim."""

    @property
    def total(self) -> int:
        return self.linear + self.attention


def layer_matrix_params(shape: llama.Shape) -> int:
    """The weights one layer multiplies each token with: QKV, O, gate/up, down (norms do no matrix work)."""
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    return shape.hidden * (q + 2 * kv) + q * shape.hidden + 3 * shape.hidden * shape.intermediate


def prefill_flops(shape: llama.Shape, tokens: int) -> PrefillFlops:
    """FLOPs of one prefill of `tokens` new tokens over an empty cache, logits for the last token only: the plugin's
    own count (roofline/prefill_flops.py, what the compute ceiling and the simulator use) of this shape."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": shape.hidden,
              "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
              "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
              "intermediate_size": shape.intermediate, "vocab_size": shape.vocab,
              "tie_word_embeddings": shape.tied, "torch_dtype": "bfloat16"}
    counted = count_prefill_flops(model_config_from_dict("benchmark shape", config), tokens)
    return PrefillFlops(linear=round(counted.linear + counted.head), attention=round(counted.attention))


def layer_gemm_shapes(shape: llama.Shape, tokens: int) -> dict[str, tuple[int, int, int]]:
    """(m, n, k) of each GEMM a prefill layer runs on `tokens` tokens: (N x k) @ (k x n)."""
    q, kv, h, i = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim, shape.hidden, shape.intermediate
    return {"qkv": (tokens, q + 2 * kv, h), "o": (tokens, h, q), "gate_up": (tokens, 2 * i, h),
            "down": (tokens, h, i)}


def random_weights(torch: Any, shape: llama.Shape, device: str, seed: int = 0) -> dict[str, Any]:
    """Every tensor of the checkpoint gpu_validate_llama describes, made in place: N(0, 0.02) bf16, norms of ones."""
    generator = torch.Generator(device=device).manual_seed(seed)
    weights = {}
    for name, (_, dims) in llama.tensor_specs(shape).items():
        if name.endswith("norm.weight"):
            weights[name] = torch.ones(dims, dtype=torch.bfloat16, device=device)
        else:
            weights[name] = torch.randn(dims, generator=generator, dtype=torch.bfloat16, device=device).mul_(0.02)
    return weights


class LlamaPrefill(llama.LlamaDecoder):
    """The decoder's weights and fused kernels (F.rms_norm, scaled_dot_product_attention), run over N new tokens:
    `prefill(tokens)` is graph-capturable for a fixed N. The KV cache holds `max_tokens` and starts empty; each
    forward writes its N tokens' K and V from slot 0."""

    def __init__(self, torch: Any, weights: dict[str, Any], shape: llama.Shape, max_tokens: int, device: str,
                 *, repeat_kv: bool = False) -> None:
        super().__init__(torch, weights, shape, max_tokens, device)
        self.fused = True
        self.repeat_kv = repeat_kv
        """Repeat each K and V head for its group of query heads before attention, for a torch whose fused attention
        kernels lack grouped-query attention (`enable_gqa`)."""

    def prefill(self, tokens: Any) -> Any:
        """The logits of the last token (1 x vocab)."""
        F, n = self.F, tokens.shape[0]
        x = F.embedding(tokens, self.embed)
        cos, sin = self.cos[:n].unsqueeze(1), self.sin[:n].unsqueeze(1)
        for layer, k_cache, v_cache in zip(self.layers, self.k_cache, self.v_cache, strict=True):
            x = x + self._extend_attention(self._rms(x, layer["ln1"]), layer, k_cache, v_cache, cos, sin)
            gate, up = F.linear(self._rms(x, layer["ln2"]), layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        return F.linear(self._rms(x[-1:], self.norm), self.lm_head)

    def gemms(self, tokens: int) -> Callable[[], None]:
        """The prefill's GEMMs alone at `tokens` rows, over the same weights and layouts (F.linear), on fixed random
        inputs; the LM head on one row. Their time against the whole forward's is what attention, the norms, RoPE
        and the elementwise kernels take."""
        torch, device = self.torch, self.embed.device
        inputs = {width: torch.randn(tokens, width, dtype=torch.bfloat16, device=device)
                  for width in {m.shape[1] for m in self.matrices()}}
        pairs = [(inputs[m.shape[1]], m) for m in self.matrices()[:-1]]
        pairs.append((inputs[self.shape.hidden][-1:], self.lm_head))

        def run() -> None:
            for x, m in pairs:
                self.F.linear(x, m)
        return run

    def _extend_attention(self, h: Any, layer: dict[str, Any], k_cache: Any, v_cache: Any, cos: Any,
                          sin: Any) -> Any:
        s, n = self.shape, h.shape[0]
        q, k, v = self.F.linear(h, layer["qkv"]).split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], dim=-1)
        q = self._rope(q.view(n, s.heads, s.head_dim), cos, sin)
        k = self._rope(k.view(n, s.kv_heads, s.head_dim), cos, sin)
        k_cache[:, :n].copy_(k.transpose(0, 1))
        v_cache[:, :n].copy_(v.view(n, s.kv_heads, s.head_dim).transpose(0, 1))
        keys, values = k_cache[:, :n].unsqueeze(0), v_cache[:, :n].unsqueeze(0)
        if self.repeat_kv:
            keys, values = (t.repeat_interleave(s.heads // s.kv_heads, dim=1) for t in (keys, values))
        out = self.F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), keys, values, is_causal=True,
                                                  enable_gqa=not self.repeat_kv)
        return self.F.linear(out.squeeze(0).transpose(0, 1).reshape(n, s.heads * s.head_dim), layer["o"])


def fused_attention(torch: Any, cuda: bool) -> contextlib.AbstractContextManager[object]:
    """On a GPU, scaled_dot_product_attention's fused kernels only (flash, memory-efficient, cuDNN), never its math
    fallback, which would hold the N x N scores in memory and time something no serving engine runs."""
    if not cuda:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fused: contextlib.AbstractContextManager[object] = sdpa_kernel(
        [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])
    return fused


def native_gqa(torch: Any, shape: llama.Shape, device: str) -> bool:
    """Whether a fused attention kernel takes fewer K/V heads than query heads (`enable_gqa=True`) on this torch."""
    q = torch.zeros(1, shape.heads, 16, shape.head_dim, dtype=torch.bfloat16, device=device)
    kv = torch.zeros(1, shape.kv_heads, 16, shape.head_dim, dtype=torch.bfloat16, device=device)
    try:
        torch.nn.functional.scaled_dot_product_attention(q, kv, kv, is_causal=True, enable_gqa=True)
    except RuntimeError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import torch
    except ImportError as exc:
        print(f"gpu_prefill: needs torch ({exc}); run it with the Python that has torch", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.tiny:
        print("gpu_prefill: no GPU (torch.cuda.is_available() is false): run with --tiny for a smoke test on the "
              "CPU", file=sys.stderr)
        return 2
    report = run(torch, args, cuda)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_prefill.json").write_text(text + "\n")
    print("\n" + summary(report))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model with small sizes (seconds; CPU too)")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when a GPU is there (with --tiny)")
    parser.add_argument("--out", type=Path, help="write gpu_prefill.json into this folder")
    parser.add_argument("--tokens", type=int, nargs="+",
                        help=f"the prompt lengths N (default {_words(TOKENS)}; with --tiny {_words(TINY_TOKENS)})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"timed forwards per N (default {REPEATS})")
    return parser


def _words(numbers: Sequence[int]) -> str:
    return " ".join(map(str, numbers))


def run(torch: Any, args: argparse.Namespace, cuda: bool) -> dict[str, Any]:
    """The whole report: the probe first (a child process, before this one holds a CUDA context), the GEMM shapes,
    then the prefill at each N."""
    started = time.perf_counter()
    shape = llama.Shape.from_config(TINY if args.tiny else json.loads(LLAMA.read_text()))
    tokens = tuple(args.tokens or (TINY_TOKENS if args.tiny else TOKENS))
    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "tiny": args.tiny,
                              "torch": torch.__version__, "device": "cuda" if cuda else "cpu",
                              "shape": asdict(shape), "repeats": args.repeats}
    report["probe"] = probe_in_subprocess(timeout=300).to_dict() if cuda else None
    report["gpu"] = torch.cuda.get_device_name(0) if cuda else "cpu"
    report["datasheet_bf16_tflops"] = _datasheet_tflops(report["gpu"])
    report["gemm"] = gemm_section(torch, shape, cuda, args.repeats)
    report["prefill"] = prefill_section(torch, shape, tokens, cuda, args.repeats, report["datasheet_bf16_tflops"])
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report


def _datasheet_tflops(name: str) -> float | None:
    try:
        return find_gpu(name).bf16_tflops
    except GpuTableError:
        return None


def gemm_section(torch: Any, shape: llama.Shape, cuda: bool, repeats: int) -> dict[str, Any] | None:
    """The probe's square GEMM in this process, and each GEMM shape of a prefill layer at GEMM_TOKENS, with the
    rate of a whole layer's four GEMMs (their FLOPs over their summed times); None on the CPU."""
    if not cuda:
        return None
    square = gemm.measure(torch, 0)
    out: dict[str, Any] = {"square": asdict(square), "shapes": {}}
    for tokens in GEMM_TOKENS:
        measured = {name: gemm.measure(torch, 0, dims=dims, repeats=2 * repeats)
                    for name, dims in layer_gemm_shapes(shape, tokens).items()}
        seconds = sum(gemm.flops(m.m, m.n, m.k) / (m.tflops * 1e12) for m in measured.values())
        flops = sum(gemm.flops(m.m, m.n, m.k) for m in measured.values())
        out["shapes"][str(tokens)] = {"each": {name: asdict(m) for name, m in measured.items()},
                                      "layer_tflops": flops / seconds / 1e12}
    return out


def prefill_section(torch: Any, shape: llama.Shape, tokens: Sequence[int], cuda: bool, repeats: int,
                    peak: float | None) -> list[dict[str, Any]]:
    """The model, built once for the longest N, timed at each N (a failed N, e.g. out of memory, says why)."""
    device = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    with torch.no_grad(), fused_attention(torch, cuda):
        model = LlamaPrefill(torch, random_weights(torch, shape, device), shape, max(tokens), device,
                             repeat_kv=not native_gqa(torch, shape, device))
        return [time_tokens(torch, model, n, cuda, repeats, peak) for n in tokens]


def time_tokens(torch: Any, model: LlamaPrefill, n: int, cuda: bool, repeats: int,
                peak: float | None) -> dict[str, Any]:
    """One N's row; a failure (out of memory, a CUDA error) gives a row that says why."""
    ids = torch.randint(0, model.shape.vocab, (n,), device="cuda" if cuda else "cpu")
    try:
        ms = time_forward(torch, functools.partial(model.prefill, ids), cuda, repeats)
        ms["gemms"] = llama.time_graph(torch, model.gemms(n), 1, repeats) if cuda else []
        row = prefill_row(model.shape, n, ms, peak)
    except RuntimeError as exc:  # torch's OutOfMemoryError and CUDA errors are RuntimeErrors
        row = {"tokens": n, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"}
    row["gqa"] = "repeat_interleave of K and V" if model.repeat_kv else "native (enable_gqa)"
    if cuda:
        torch.cuda.empty_cache()  # the graph's memory pool died with time_forward's frame
    return row


def time_forward(torch: Any, forward: Callable[[], object], cuda: bool, repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each timed forward: eager (CUDA events around one forward each; on the CPU, wall time) and,
    on a GPU, the host's time to issue an eager forward's kernels, and replays of one CUDA graph captured for it."""
    eager = llama.time_eager(torch, forward, 1, repeats, cuda=cuda)
    if not cuda:
        return {"eager": eager, "issue": [], "graph": []}
    return {"eager": eager, "issue": issue_ms(torch, forward, repeats),
            "graph": llama.time_graph(torch, forward, 1, repeats)}


def issue_ms(torch: Any, forward: Callable[[], object], repeats: int) -> list[float]:
    """Wall milliseconds of the eager call alone, from an idle GPU: the Python and launch work of its kernels, which
    the GPU's own work hides when it takes longer (the eager time is then the GPU's, not this)."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        forward()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return times


def prefill_row(shape: llama.Shape, tokens: int, ms: dict[str, list[float]], peak: float | None) -> dict[str, Any]:
    """One N's figures: times in seconds (medians; bests beside), FLOPs, rates, shares of the peak, launch cost."""
    flops = prefill_flops(shape, tokens)
    eager_s = statistics.median(ms["eager"]) / 1e3
    graph_s = statistics.median(ms["graph"]) / 1e3 if ms["graph"] else None
    timed_s = graph_s or eager_s
    row: dict[str, Any] = {
        "tokens": tokens, "eager_s": eager_s, "eager_best_s": min(ms["eager"]) / 1e3, "graph_s": graph_s,
        "graph_best_s": min(ms["graph"]) / 1e3 if ms["graph"] else None, "eager_ms": ms["eager"],
        "graph_ms": ms["graph"], "issue_ms": ms["issue"],
        "issue_per_layer_s": statistics.median(ms["issue"]) / 1e3 / shape.layers if ms["issue"] else None,
        "flops_linear": flops.linear, "flops_attention": flops.attention, "flops": flops.total,
        "tflops_eager": flops.total / eager_s / 1e12, "tflops_graph": flops.total / graph_s / 1e12 if graph_s else None,
        "launch_per_layer_s": (eager_s - graph_s) / shape.layers if graph_s else None,
    }
    if peak:
        row["mfu"] = flops.total / timed_s / 1e12 / peak
    return row | gemm_part(flops, graph_s, ms.get("gemms", []), peak)


def gemm_part(flops: PrefillFlops, graph_s: float | None, gemm_ms: list[float], peak: float | None) -> dict[str, Any]:
    """The GEMMs alone (graphed): their time, rate and share of the peak, and what the rest of the forward takes."""
    if not gemm_ms:
        return {"gemm_s": None, "gemm_tflops": None, "gemm_mfu": None, "other_s": None}
    gemm_s = statistics.median(gemm_ms) / 1e3
    rate = flops.linear / gemm_s / 1e12
    return {"gemm_s": gemm_s, "gemm_ms": gemm_ms, "gemm_tflops": rate, "gemm_mfu": rate / peak if peak else None,
            "other_s": graph_s - gemm_s if graph_s else None}


def summary(report: dict[str, Any]) -> str:
    """A few lines for a person: the GEMM rates, then one row per N."""
    peak = report["datasheet_bf16_tflops"]
    lines = [f"{report['gpu']}, torch {report['torch']}" + (f", datasheet bf16 {peak:g} TFLOP/s" if peak else "")]
    probe = report["probe"]
    if probe is not None:
        lines += [f"probe (child process): {gemm.summary(gemm.GemmMeasurement(**m))}" for m in probe.get("gemm", [])]
        lines += [f"probe skipped: {probe['skipped']}"] if probe["skipped"] else []
    if report["gemm"] is not None:
        lines.append(f"in-process: {gemm.summary(gemm.GemmMeasurement(**report['gemm']['square']))}")
        for tokens, found in report["gemm"]["shapes"].items():
            each = ", ".join(f"{name} {m['tflops']:.0f}" for name, m in found["each"].items())
            lines.append(f"GEMMs of a {tokens}-token prefill layer (TFLOP/s, best): {each}; the layer's four "
                         f"{found['layer_tflops']:.0f}")
    lines.append(f"{'N':>6} {'eager ms':>10} {'graph ms':>10} {'TFLOP':>8} {'TFLOP/s':>8} {'MFU':>6} "
                 f"{'launch/layer us':>16} {'issue/layer us':>15} {'GEMMs ms':>9} {'GEMM TFLOP/s':>13}")
    lines += [_row_line(row) for row in report["prefill"]]
    lines.append(f"done in {report['seconds']:.0f} s")
    return "\n".join(lines)


def _row_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['tokens']:>6} {row['error']}"
    graph = f"{row['graph_s'] * 1e3:10.3f}" if row["graph_s"] else f"{'-':>10}"
    rate = row["tflops_graph"] or row["tflops_eager"]
    mfu = f"{row['mfu']:6.1%}" if "mfu" in row else f"{'-':>6}"
    launch = f"{row['launch_per_layer_s'] * 1e6:16.1f}" if row["launch_per_layer_s"] is not None else f"{'-':>16}"
    issue = f"{row['issue_per_layer_s'] * 1e6:15.1f}" if row["issue_per_layer_s"] is not None else f"{'-':>15}"
    gemms = f"{row['gemm_s'] * 1e3:9.3f} {row['gemm_tflops']:13.1f}" if row["gemm_s"] else f"{'-':>9} {'-':>13}"
    return (f"{row['tokens']:>6} {row['eager_s'] * 1e3:10.3f} {graph} {row['flops'] / 1e12:8.3f} {rate:8.1f} "
            f"{mfu} {launch} {issue} {gemms}")


if __name__ == "__main__":
    raise SystemExit(main())
