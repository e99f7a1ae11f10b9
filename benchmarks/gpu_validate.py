"""Validate the probe, the model bytes and the bandwidth ceiling on a real GPU (issue 13, item 5; docs/gpu-probe.md).

    python benchmarks/gpu_validate.py --out DIR            # one GPU, torch; ~2-4 minutes, ~17 GB of disk
    python benchmarks/gpu_validate.py --tiny --out DIR     # a 2-layer model, on the CPU too: a smoke test

Needs torch and nothing else (no safetensors, no transformers): the package is imported from this checkout.
  1. the probe (`python -m pytest_sglang_perf.hardware`, a child process as the plugin runs it) and its read
     bandwidth against a plain device-to-device copy of the same size, and of a 4 GiB tensor;
  2. a random-weight bf16 checkpoint shaped like Llama-3.1-8B (sglang_facts/data/models/), ~5 GB shards and
     model.safetensors.index.json in a temporary folder; its exact bytes (safetensors headers) against the
     estimate from config.json;
  3. that checkpoint loaded into a plain-torch decode step (gpu_validate_llama.py) at batch 1 over 600 tokens of
     context, captured in a CUDA graph and timed, with the matrix-vector products alone; against the ceiling
     bytes per step / measured read bandwidth.
Prints a JSON report and a short summary; writes DIR/gpu_validate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))

import gpu_validate_llama as llama  # noqa: E402

from pytest_sglang_perf.hardware import bandwidth  # noqa: E402
from pytest_sglang_perf.hardware.probe import probe_in_subprocess  # noqa: E402
from pytest_sglang_perf.roofline.step_bytes import DecodeShape, decode_step_bytes  # noqa: E402
from pytest_sglang_perf.roofline.weights import weights_from_checkpoint, weights_from_config  # noqa: E402
from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu  # noqa: E402

LLAMA = REPO / "pytest_sglang_perf/sglang_facts/data/models/meta-llama--Llama-3.1-8B-Instruct.json"
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1024,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "rope_theta": 500000.0, "rms_norm_eps": 1e-5}
CONTEXT = 600
GIB = 1 << 30


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        import torch
    except ImportError as exc:
        print(f"gpu_validate: needs torch ({exc}); run it with the Python that has torch", file=sys.stderr)
        return 2

    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.tiny:
        print("gpu_validate: no GPU (torch.cuda.is_available() is false): run with --tiny for a smoke test on the "
              "CPU", file=sys.stderr)
        return 2
    started = time.perf_counter()
    config = TINY if args.tiny else json.loads(LLAMA.read_text())
    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "tiny": args.tiny,
                              "torch": torch.__version__, "device": "cuda" if cuda else "cpu"}
    report["probe"] = probe_section(cuda)
    report["bandwidth"] = bandwidth_section(torch, cuda, args.tiny)
    workdir = Path(tempfile.mkdtemp(prefix="gpu-validate-", dir=args.workdir))
    try:
        report["checkpoint"], folder = checkpoint_section(torch, config, workdir, cuda, args.tiny)
        report["decode"] = decode_section(torch, config, folder, cuda, args.steps)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report["ceiling"] = ceiling_section(report)
    report["seconds"] = round(time.perf_counter() - started, 1)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_validate.json").write_text(text + "\n")
    print("\n" + summary(report))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model with small sizes (seconds; CPU too)")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even when a GPU is there (with --tiny)")
    parser.add_argument("--out", type=Path, help="write gpu_validate.json into this folder")
    parser.add_argument("--workdir", type=Path, help="where the temporary checkpoint goes (default: the system's)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint (its folder is in the report)")
    parser.add_argument("--steps", type=int, default=100, help="decode steps per timed round (default 100)")
    return parser


def probe_section(cuda: bool) -> dict[str, Any]:
    """The probe as the plugin runs it: a child process, before this process holds any CUDA context."""
    report = probe_in_subprocess(timeout=300, measure=cuda)
    return report.to_dict()


def bandwidth_section(torch: Any, cuda: bool, tiny: bool) -> dict[str, Any]:
    """The probe's measurement in this process (1 GiB, as the probe does) and at 4 GiB, read and copy, against the
    datasheet; on the CPU, one timed read (the pipeline runs; the number means little)."""
    if not cuda:
        data = torch.ones((64 if tiny else 1024) << 19, dtype=torch.bfloat16)
        ms = llama.time_eager(torch, data.sum, 10, cuda=False)
        return {"gpu": "cpu", "read_gb_s": bandwidth.gb_s(data.numel() * 2, min(ms)), "copy_gb_s": None,
                "method": f"sum of a {bandwidth.size_text(data.numel() * 2)} bf16 tensor on the CPU, best of 3",
                "datasheet_gb_s": None}
    probe = bandwidth.measure(torch, 0)
    large = bandwidth.measure(torch, 0, max_bytes=4 * GIB)
    sheet = _datasheet(probe.gpu_name)
    return {"gpu": probe.gpu_name, "read_gb_s": probe.read_gb_s, "read_median_gb_s": probe.median_gb_s,
            "copy_gb_s": probe.copy_gb_s, "method": probe.method, "size_bytes": probe.size_bytes,
            "read_4gib_gb_s": large.read_gb_s, "copy_4gib_gb_s": large.copy_gb_s, "large_method": large.method,
            "datasheet_gb_s": sheet,
            "read_of_datasheet": None if not sheet else probe.read_gb_s / sheet,
            "copy_of_datasheet": None if not sheet or probe.copy_gb_s is None else probe.copy_gb_s / sheet,
            "read_over_copy": None if not probe.copy_gb_s else probe.read_gb_s / probe.copy_gb_s}


def _datasheet(name: str) -> float | None:
    try:
        return find_gpu(name).bandwidth_gb_s
    except GpuTableError:
        return None


def checkpoint_section(torch: Any, config: dict[str, Any], workdir: Path, cuda: bool,
                       tiny: bool) -> tuple[dict[str, Any], Path]:
    """Write the checkpoint, then its exact bytes (headers) against the config.json estimate."""
    folder = workdir / ("tiny-llama" if tiny else "llama-3.1-8b-random")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    specs = llama.tensor_specs(llama.Shape.from_config(config))
    start = time.perf_counter()
    shards = llama.write_checkpoint(folder, specs, llama.random_data(torch, "cuda" if cuda else "cpu"),
                                    shard_bytes=(1 << 20) if tiny else 5 * 10**9)
    written = time.perf_counter() - start
    exact = weights_from_checkpoint(folder, config)
    estimate = weights_from_config(config, source=str(folder / "config.json"))
    file_bytes = sum(path.stat().st_size for path in shards)
    return {"folder": str(folder), "shards": len(shards), "tensors": len(specs), "file_bytes": file_bytes,
            "tensor_bytes": sum(llama.nbytes(spec) for spec in specs.values()), "write_seconds": round(written, 1),
            "exact": exact.to_dict(), "estimate": estimate.to_dict(),
            "estimate_over_exact": estimate.total / exact.total,
            "estimate_minus_exact_bytes": estimate.total - exact.total}, folder


def decode_section(torch: Any, config: dict[str, Any], folder: Path, cuda: bool, steps: int) -> dict[str, Any]:
    """Load the checkpoint, then time the decode step (graph and eager) and its matrix-vector products alone."""
    device = "cuda" if cuda else "cpu"
    shape = llama.Shape.from_config(config)
    start = time.perf_counter()
    weights = llama.load_checkpoint(torch, folder, device)
    loaded_bytes = sum(t.numel() * t.element_size() for t in weights.values())
    loaded = time.perf_counter() - start
    model = llama.LlamaDecoder(torch, weights, shape, CONTEXT, device)
    gemv_bytes = sum(m.numel() * m.element_size() for m in model.matrices())
    kv_bytes = sum(c.numel() * c.element_size() for c in (*model.k_cache, *model.v_cache))
    with torch.no_grad():
        eager = llama.time_eager(torch, model.step, max(steps // 5, 5), cuda=cuda)
        graph = llama.time_graph(torch, model.step, steps) if cuda else None
        model.fused = True
        fused = llama.time_graph(torch, model.step, steps) if cuda else None
        model.fused = False
        gemv_run = llama.gemv_only(torch, model, device)
        gemv = llama.time_graph(torch, gemv_run, steps) if cuda else llama.time_eager(torch, gemv_run, 5, cuda=False)
    step_ms = statistics.median(graph or eager)
    gemv_ms = statistics.median(gemv)
    return {"context_tokens": CONTEXT, "batch": 1, "loaded_bytes": loaded_bytes, "load_seconds": round(loaded, 1),
            "graph_ms_per_step": graph, "eager_ms_per_step": eager, "step_ms": step_ms, "tok_s": 1e3 / step_ms,
            "fused_graph_ms_per_step": fused, "fused_step_ms": statistics.median(fused) if fused else None,
            "timed_with": "CUDA graph" if graph else "eager (CPU)", "kv_cache_bytes": kv_bytes,
            "gemv_ms": gemv_ms, "gemv_bytes": gemv_bytes, "gemv_gb_s": bandwidth.gb_s(gemv_bytes, gemv_ms),
            "step_effective_gb_s": bandwidth.gb_s(gemv_bytes + kv_bytes, step_ms)}


def ceiling_section(report: dict[str, Any]) -> dict[str, Any]:
    """The plugin's ceiling for this step (exact bytes, 600 tokens of context) against the measured step."""
    from pytest_sglang_perf.roofline.weight_bytes import WeightBytes

    weights = WeightBytes.from_dict(report["checkpoint"]["exact"])
    step = decode_step_bytes(weights, DecodeShape(context_tokens=CONTEXT))
    bw, decode = report["bandwidth"], report["decode"]
    out: dict[str, Any] = {"step_bytes": step.total, "step": _plain(step), "measured_tok_s": decode["tok_s"]}
    for label, gb_s in (("read", bw["read_gb_s"]), ("copy", bw.get("copy_gb_s")),
                        ("datasheet", bw.get("datasheet_gb_s"))):
        if gb_s:
            ceiling = gb_s * 1e9 / step.total
            out[label] = {"gb_s": gb_s, "ceiling_tok_s": ceiling, "ceiling_ms": 1e3 / ceiling,
                          "efficiency": decode["tok_s"] / ceiling}
    out["gemv_of_read_bandwidth"] = decode["gemv_gb_s"] / bw["read_gb_s"]
    return out


def _plain(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return {k: v for k, v in vars(value).items() if isinstance(v, int | float | str | bool)}


def summary(report: dict[str, Any]) -> str:
    bw, ck, dec, ceil = report["bandwidth"], report["checkpoint"], report["decode"], report["ceiling"]
    probe = report["probe"]
    lines = [f"probe (child process, {probe['seconds']:.1f} s): {probe['via']}; "
             + (f"skipped: {probe['skipped']}" if probe["skipped"] else
                "; ".join(f"{m['gpu_name']} read {m['read_gb_s']:,.0f} GB/s" for m in probe["bandwidth"]))]
    copy = f", copy {bw['copy_gb_s']:,.0f} GB/s" if bw.get("copy_gb_s") else ""
    sheet = f" (datasheet {bw['datasheet_gb_s']:,.0f})" if bw.get("datasheet_gb_s") else ""
    lines.append(f"bandwidth on {bw['gpu']}: read {bw['read_gb_s']:,.0f} GB/s{copy}{sheet}; {bw['method']}")
    if "read_4gib_gb_s" in bw:
        lines.append(f"  at 4 GiB: read {bw['read_4gib_gb_s']:,.0f} GB/s, copy {bw['copy_4gib_gb_s']:,.0f} GB/s")
    lines.append(f"checkpoint: {ck['tensors']} tensors in {ck['shards']} shard(s), {ck['tensor_bytes'] / 1e9:.3f} GB; "
                 f"exact {ck['exact']['total'] / 1e9:.3f} GB, config.json estimate {ck['estimate']['total'] / 1e9:.3f} "
                 f"GB ({ck['estimate_over_exact'] - 1:+.3%})")
    lines.append(f"decode ({dec['timed_with']}, batch 1, {dec['context_tokens']} tokens of context): "
                 f"{dec['step_ms']:.3f} ms/step = {dec['tok_s']:.1f} tok/s ({dec['step_effective_gb_s']:,.0f} GB/s "
                 f"effective); GEMVs alone {dec['gemv_ms']:.3f} ms = {dec['gemv_gb_s']:,.0f} GB/s")
    if dec.get("fused_step_ms"):
        lines.append(f"  with torch's fused RMSNorm and SDPA attention: {dec['fused_step_ms']:.3f} ms/step = "
                     f"{1e3 / dec['fused_step_ms']:.1f} tok/s")
    for label in ("read", "copy", "datasheet"):
        if label in ceil:
            c = ceil[label]
            lines.append(f"ceiling with {label} bandwidth {c['gb_s']:,.0f} GB/s: {ceil['step_bytes'] / 1e9:.3f} GB per "
                         f"step -> {c['ceiling_tok_s']:.1f} tok/s ({c['ceiling_ms']:.3f} ms); efficiency "
                         f"{c['efficiency']:.1%}")
    lines.append(f"done in {report['seconds']:.0f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
