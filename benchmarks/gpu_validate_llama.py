"""gpu_validate.py's Llama: a random-weight checkpoint in Hugging Face's layout, its loading without the
safetensors package, and a plain-torch decode step at batch 1 timed eagerly and as a CUDA graph.

The step is what SGLang's decode does at batch 1, in plain torch: the embedding row, per layer RMSNorm, one fused
QKV matrix-vector product (SGLang's qkv_proj), RoPE, grouped-query attention of the one new query over a
preallocated KV cache (a manual softmax: two small batched matmuls), the output projection, RMSNorm, one fused
gate/up product (SGLang's gate_up_proj), SiLU, the down projection; the final norm, the LM head and an argmax. The
cache holds `context` tokens and the step writes the last slot, so every replay attends over exactly `context`
tokens. Llama 3's RoPE frequency scaling is left out: it changes the numbers, not the bytes or the kernels.
"""

from __future__ import annotations

import ctypes
import json
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.roofline.safetensors_format import write_safetensors

Spec = tuple[str, tuple[int, ...]]
INDEX = "model.safetensors.index.json"


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    rope_theta: float
    eps: float

    @classmethod
    def from_config(cls, raw: Mapping[str, Any]) -> Shape:
        heads = int(raw["num_attention_heads"])
        return cls(hidden=int(raw["hidden_size"]), layers=int(raw["num_hidden_layers"]), heads=heads,
                   kv_heads=int(raw.get("num_key_value_heads", heads)),
                   head_dim=int(raw.get("head_dim") or int(raw["hidden_size"]) // heads),
                   intermediate=int(raw["intermediate_size"]), vocab=int(raw["vocab_size"]),
                   tied=bool(raw.get("tie_word_embeddings", False)),
                   rope_theta=float(raw.get("rope_theta", 10000.0)), eps=float(raw.get("rms_norm_eps", 1e-5)))


def tensor_specs(shape: Shape) -> dict[str, Spec]:
    """Every tensor of a Llama checkpoint, with Hugging Face's names, in bf16."""
    h, q, kv, i = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim, shape.intermediate
    specs: dict[str, Spec] = {"model.embed_tokens.weight": ("BF16", (shape.vocab, h))}
    layer = {"input_layernorm": (h,), "self_attn.q_proj": (q, h), "self_attn.k_proj": (kv, h),
             "self_attn.v_proj": (kv, h), "self_attn.o_proj": (h, q), "post_attention_layernorm": (h,),
             "mlp.gate_proj": (i, h), "mlp.up_proj": (i, h), "mlp.down_proj": (h, i)}
    for n in range(shape.layers):
        specs |= {f"model.layers.{n}.{part}.weight": ("BF16", dims) for part, dims in layer.items()}
    specs["model.norm.weight"] = ("BF16", (h,))
    if not shape.tied:
        specs["lm_head.weight"] = ("BF16", (shape.vocab, h))
    return specs


def nbytes(spec: Spec) -> int:
    size = 2
    for dim in spec[1]:
        size *= dim
    return size


def shard_plan(specs: Mapping[str, Spec], shard_bytes: int) -> list[dict[str, Spec]]:
    """Consecutive tensors grouped into shards of at most `shard_bytes` (a larger tensor alone), as HF saves."""
    shards: list[dict[str, Spec]] = [{}]
    size = 0
    for name, spec in specs.items():
        if shards[-1] and size + nbytes(spec) > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = spec
        size += nbytes(spec)
    return shards


def write_checkpoint(folder: Path, specs: Mapping[str, Spec], data: Callable[[str, int], bytes],
                     shard_bytes: int) -> list[Path]:
    """The shards and model.safetensors.index.json; the shards' paths."""
    shards = shard_plan(specs, shard_bytes)
    paths = [folder / f"model-{n + 1:05d}-of-{len(shards):05d}.safetensors" for n in range(len(shards))]
    weight_map: dict[str, str] = {}
    for path, shard in zip(paths, shards, strict=True):
        write_safetensors(path, shard, data=data)
        weight_map |= dict.fromkeys(shard, path.name)
    index = {"metadata": {"total_size": sum(nbytes(s) for s in specs.values())}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(index, indent=2))
    return paths


def random_data(torch: Any, device: str, seed: int = 0) -> Callable[[str, int], bytes]:
    """Each tensor's bytes: N(0, 0.02) bf16 weights made on `device`, norms of ones."""
    generator = torch.Generator(device=device).manual_seed(seed)

    def data(name: str, size: int) -> bytes:
        if name.endswith("norm.weight"):
            values = torch.ones(size // 2, dtype=torch.bfloat16, device=device)
        else:
            values = torch.randn(size // 2, generator=generator, dtype=torch.bfloat16, device=device).mul_(0.02)
        host = values.cpu().contiguous()
        return ctypes.string_at(host.data_ptr(), size)
    return data


def load_checkpoint(torch: Any, folder: Path, device: str) -> dict[str, Any]:
    """Every tensor of the checkpoint's shards, on `device` (the file's bytes, read without the safetensors package)."""
    index = json.loads((folder / INDEX).read_text())
    tensors: dict[str, Any] = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors |= _load_shard(torch, folder / shard, device)
    return tensors


def _load_shard(torch: Any, path: Path, device: str) -> dict[str, Any]:
    buffer = bytearray(path.stat().st_size)
    with path.open("rb") as file:
        file.readinto(buffer)
    (length,) = struct.unpack("<Q", buffer[:8])
    header = json.loads(buffer[8:8 + length])
    raw = torch.frombuffer(buffer, dtype=torch.uint8)
    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    out: dict[str, Any] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = (8 + length + offset for offset in entry["data_offsets"])
        view = raw[begin:end].view(dtypes[entry["dtype"]]).reshape(entry["shape"])
        out[name] = view.to(device=device, copy=True)
    return out


class LlamaDecoder:
    """One decode step of a Llama at batch 1 over a `context`-token KV cache; `step()` is graph-capturable."""

    def __init__(self, torch: Any, weights: dict[str, Any], shape: Shape, context: int, device: str) -> None:
        self.torch, self.shape, self.F = torch, shape, torch.nn.functional
        self.fused = False
        """False: RMSNorm and attention from elementary ops; True: torch's fused F.rms_norm and
        F.scaled_dot_product_attention (fewer, larger kernels: what a serving engine's step is closer to)."""
        cat = torch.cat
        self.embed = weights.pop("model.embed_tokens.weight")
        self.lm_head = self.embed if shape.tied else weights.pop("lm_head.weight")
        self.norm = weights.pop("model.norm.weight")
        self.layers = []
        for n in range(shape.layers):
            w = {k.removeprefix(f"model.layers.{n}."): weights.pop(k) for k in list(weights)
                 if k.startswith(f"model.layers.{n}.")}
            self.layers.append({
                "ln1": w["input_layernorm.weight"], "ln2": w["post_attention_layernorm.weight"],
                "qkv": cat([w[f"self_attn.{p}_proj.weight"] for p in "qkv"]), "o": w["self_attn.o_proj.weight"],
                "gate_up": cat([w["mlp.gate_proj.weight"], w["mlp.up_proj.weight"]]), "down": w["mlp.down_proj.weight"],
            })
        kv_shape = (shape.kv_heads, context, shape.head_dim)
        self.k_cache = [torch.randn(kv_shape, dtype=torch.bfloat16, device=device) for _ in range(shape.layers)]
        self.v_cache = [torch.randn(kv_shape, dtype=torch.bfloat16, device=device) for _ in range(shape.layers)]
        self.token = torch.zeros(1, dtype=torch.long, device=device)
        self.position = torch.full((1,), context - 1, dtype=torch.long, device=device)
        self.cos, self.sin = self._rope_tables(context, device)

    def _rope_tables(self, context: int, device: str) -> tuple[Any, Any]:
        torch, dim = self.torch, self.shape.head_dim
        inv_freq = 1.0 / (self.shape.rope_theta ** (torch.arange(0, dim, 2, device=device).float() / dim))
        angles = torch.outer(torch.arange(context, device=device).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)

    def matrices(self) -> list[Any]:
        """The weights the matrix-vector products read each step."""
        return [m for layer in self.layers for m in (layer["qkv"], layer["o"], layer["gate_up"], layer["down"])] + [
            self.lm_head]

    def step(self) -> Any:
        F, torch = self.F, self.torch
        x = F.embedding(self.token, self.embed)
        cos, sin = self.cos.index_select(0, self.position), self.sin.index_select(0, self.position)
        for layer, k_cache, v_cache in zip(self.layers, self.k_cache, self.v_cache, strict=True):
            x = x + self._attention(self._rms(x, layer["ln1"]), layer, k_cache, v_cache, cos, sin)
            gate, up = F.linear(self._rms(x, layer["ln2"]), layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        logits = F.linear(self._rms(x, self.norm), self.lm_head)
        self.token.copy_(torch.argmax(logits, dim=-1))
        return logits

    def _attention(self, h: Any, layer: Mapping[str, Any], k_cache: Any, v_cache: Any, cos: Any, sin: Any) -> Any:
        s = self.shape
        q, k, v = self.F.linear(h, layer["qkv"]).split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], dim=-1)
        q = self._rope(q.view(s.heads, s.head_dim), cos, sin)
        k = self._rope(k.view(s.kv_heads, s.head_dim), cos, sin)
        k_cache.index_copy_(1, self.position, k.unsqueeze(1))
        v_cache.index_copy_(1, self.position, v.view(s.kv_heads, 1, s.head_dim))
        if self.fused:
            out = self.F.scaled_dot_product_attention(q.view(1, s.heads, 1, s.head_dim), k_cache.unsqueeze(0),
                                                      v_cache.unsqueeze(0), enable_gqa=True)
            return self.F.linear(out.reshape(1, s.heads * s.head_dim), layer["o"])
        grouped = q.view(s.kv_heads, s.heads // s.kv_heads, s.head_dim)
        scores = self.torch.matmul(grouped, k_cache.transpose(1, 2)) * s.head_dim ** -0.5
        probs = self.torch.softmax(scores.float(), dim=-1).to(self.torch.bfloat16)
        out = self.torch.matmul(probs, v_cache).reshape(1, s.heads * s.head_dim)
        return self.F.linear(out, layer["o"])

    def _rope(self, x: Any, cos: Any, sin: Any) -> Any:
        half = x.shape[-1] // 2
        rotated = self.torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def _rms(self, x: Any, weight: Any) -> Any:
        if self.fused:
            return self.F.rms_norm(x, (x.shape[-1],), weight, self.shape.eps)
        x32 = x.float()
        return (x32 * self.torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.shape.eps)).to(x.dtype) * weight


def gemv_only(torch: Any, model: LlamaDecoder, device: str) -> Callable[[], None]:
    """The step's matrix-vector products alone, over the same weights, on fixed random inputs."""
    inputs = {m.shape[1]: torch.randn(1, m.shape[1], dtype=torch.bfloat16, device=device) for m in model.matrices()}
    pairs = [(inputs[m.shape[1]], m) for m in model.matrices()]

    def run() -> None:
        for x, m in pairs:
            model.F.linear(x, m)
    return run


def time_graph(torch: Any, run: Callable[[], object], steps: int, rounds: int = 3) -> list[float]:
    """Milliseconds per replay of `run` captured in a CUDA graph, one value per round of `steps` replays."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    graph.replay()
    return _rounds(torch, graph.replay, steps, rounds)


def time_eager(torch: Any, run: Callable[[], object], steps: int, rounds: int = 3, *, cuda: bool = True) -> list[float]:
    """Milliseconds per call of `run` without a graph (on the CPU: wall time)."""
    for _ in range(2):
        run()
    if not cuda:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(steps):
                run()
            times.append((time.perf_counter() - start) * 1e3 / steps)
        return times
    return _rounds(torch, run, steps, rounds)


def _rounds(torch: Any, run: Callable[[], object], steps: int, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / steps)
    return times
