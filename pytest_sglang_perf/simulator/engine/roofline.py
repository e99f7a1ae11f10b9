"""A roofline timing model: how long one scheduler step takes on the simulated GPU (`--sim-gpu`).

A **decode step** is one forward of the running batch (with EAGLE / MTP speculative decoding: one round of
`speculative_num_steps` draft forwards and one verify forward of `speculative_num_draft_tokens` tokens per request):

    target   = max(bytes / (bandwidth * BANDWIDTH_EFFICIENCY), flops / (bf16 peak * DECODE_MFU))
               bytes: the weights one forward reads, per GPU (parameters * dtype bytes / tp), plus the KV cache
               of every running request; flops: 2 * active parameters / tp per token
    draft    = per draft forward, the same for one draft layer and the LM head, tokens = batch * topk
    comm     = tp > 1: two all-reduces per layer per forward, link latency + bytes over the link
    overhead = STEP_OVERHEAD + PER_REQUEST * batch (+ VERIFY_OVERHEAD with speculative decoding)
               + without the decode CUDA graph (or a batch larger than the captured sizes): kernel launches,
               EAGER_LAUNCH_PER_LAYER per layer and forward

Tokens per step are the accept length (schedule.py draws them). A **prefill** of N new tokens costs the same
roofline with flops for N tokens at PREFILL_MFU, plus launch overhead that the prefill CUDA graph mostly removes
(when N fits its largest capture size): the prefill graph changes TTFT, never the decode step. Single-batch
overlap changes nothing here: it overlaps MoE communication (DeepEP), which a dense model does not have.

The constants are calibrated, not measured: they make a 27B dense model with 3-step MTP on 2x RTX A6000 decode
at ~54 tok/s (the engineer's finding: 50-57 tok/s) and keep the other GPUs in proportion to their datasheets.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.simulator.args.resolve import Resolution

BANDWIDTH_EFFICIENCY = 0.77
"""Share of the datasheet bandwidth that decode GEMVs reach."""
DECODE_MFU = 0.55
PREFILL_MFU = 0.45
"""Share of the bf16 tensor-core peak reached by batched decode / by prefill GEMMs."""
STEP_OVERHEAD = 1.2e-3
"""Scheduler, sampling, detokenizer hand-off: seconds per step."""
PER_REQUEST = 40e-6
"""Per running request and step (sampling, output processing): why one stream slows a little in a big batch."""
VERIFY_OVERHEAD = 0.8e-3
"""Building and checking the draft tree of a speculative round."""
DRAFT_OVERHEAD = 0.2e-3
"""Per draft forward (graph replay, top-k)."""
EAGER_LAUNCH_PER_LAYER = 60e-6
"""Kernel launches of one layer of one forward without a CUDA graph."""
PREFILL_LAUNCH_PER_LAYER = 80e-6
"""Kernel launches of one layer of a prefill (extend) forward run eagerly."""
PREFILL_GRAPH_LAUNCH_SHARE = {"breakable": 0.3, "full": 0.1}
"""What is left of the prefill launch cost with the prefill CUDA graph: a breakable graph still runs attention
eagerly between its pieces."""
ALLREDUCES_PER_LAYER = 2


@dataclass(frozen=True)
class StepCosts:
    """Step durations for one server (GPU, model, tp, speculative and CUDA-graph settings)."""

    gpu: Gpu
    tp: int
    num_layers: int
    hidden_size: int
    dtype_bytes: int
    weight_bytes: float
    """Per GPU, read by one target forward over one token (MoE: touched experts grow with tokens; see below)."""
    moe_model: ModelConfig | None
    """For MoE models, the model (experts touched depend on the batch); None for dense models."""
    flops_per_token: float
    """Per GPU."""
    kv_bytes_per_token: float
    """Per GPU."""
    draft_forwards: int
    draft_bytes: float
    draft_flops_per_token: float
    draft_tokens_per_request: int
    """Tokens per request in one draft forward (eagle topk)."""
    verify_width: int
    """Tokens per request in one target forward: 1, or the speculative draft-token count."""
    decode_graph_max_bs: int
    """Largest captured decode batch; 0 without the decode CUDA graph."""
    prefill_graph_backend: str
    prefill_graph_max_tokens: int

    @classmethod
    def build(cls, model: ModelConfig, resolution: Resolution, gpu: Gpu,
              decode_capture_bs: tuple[int, ...]) -> StepCosts:
        tp, spec, graphs = resolution.tp_size, resolution.spec, resolution.cuda_graph
        per_gpu = model.dtype_bytes / tp
        eagle = spec is not None and spec.is_eagle_family
        return cls(
            gpu=gpu, tp=tp, num_layers=model.num_layers, hidden_size=model.hidden_size, dtype_bytes=model.dtype_bytes,
            weight_bytes=model.decode_read_params() * per_gpu,
            moe_model=model if model.num_experts > 1 else None,
            flops_per_token=2.0 * model.active_param_count() / tp,
            kv_bytes_per_token=float(model.kv_bytes_per_token(tp)),
            draft_forwards=spec.num_steps if eagle and spec is not None else 0,
            draft_bytes=model.draft_read_params() * per_gpu if eagle else 0.0,
            draft_flops_per_token=2.0 * model.draft_read_params() / tp if eagle else 0.0,
            draft_tokens_per_request=spec.eagle_topk if eagle and spec is not None else 0,
            verify_width=spec.num_draft_tokens if spec is not None else 1,
            decode_graph_max_bs=max(decode_capture_bs, default=0) if graphs.decode.enabled else 0,
            prefill_graph_backend=graphs.prefill.backend,
            prefill_graph_max_tokens=max(graphs.prefill.bs or (0,)) if graphs.prefill.enabled else 0,
        )

    # -- decode ------------------------------------------------------------------------------------

    def decode_step(self, batch: int, context_tokens: int) -> float:
        """Seconds for one decode step (one speculative round) of `batch` requests holding `context_tokens` in KV."""
        batch = max(1, batch)
        tokens = batch * self.verify_width
        target = self._roofline(self._weights(tokens) + context_tokens * self.kv_bytes_per_token,
                                self.flops_per_token * tokens, DECODE_MFU)
        overhead = STEP_OVERHEAD + PER_REQUEST * batch + self._launch_cost(batch)
        if self.verify_width > 1:
            overhead += VERIFY_OVERHEAD
        return target + self._comm(tokens) + self._draft(batch) + overhead

    def uses_decode_graph(self, batch: int) -> bool:
        return 0 < batch <= self.decode_graph_max_bs

    def _launch_cost(self, batch: int) -> float:
        if self.uses_decode_graph(batch):
            return 0.0
        return EAGER_LAUNCH_PER_LAYER * self.num_layers * (1 + self.draft_forwards)

    def _draft(self, batch: int) -> float:
        if self.draft_forwards == 0:
            return 0.0
        tokens = batch * max(1, self.draft_tokens_per_request)
        one = self._roofline(self.draft_bytes, self.draft_flops_per_token * tokens, DECODE_MFU)
        comm = self._allreduces(ALLREDUCES_PER_LAYER, tokens)
        return self.draft_forwards * (one + comm + DRAFT_OVERHEAD)

    # -- prefill -----------------------------------------------------------------------------------

    def prefill(self, new_tokens: int) -> float:
        """Seconds for one prefill (extend) forward over `new_tokens` tokens, the draft's included."""
        tokens = max(1, new_tokens)
        target = self._roofline(self._weights(tokens), self.flops_per_token * tokens, PREFILL_MFU)
        launch = PREFILL_LAUNCH_PER_LAYER * self.num_layers
        if self.uses_prefill_graph(tokens):
            launch *= PREFILL_GRAPH_LAUNCH_SHARE.get(self.prefill_graph_backend, 1.0)
        draft = 0.0
        if self.draft_forwards:
            draft = self._roofline(self.draft_bytes, self.draft_flops_per_token * tokens, PREFILL_MFU) + DRAFT_OVERHEAD
        return target + self._comm(tokens) + launch + draft + STEP_OVERHEAD

    def uses_prefill_graph(self, new_tokens: int) -> bool:
        return 0 < new_tokens <= self.prefill_graph_max_tokens

    # -- shared ------------------------------------------------------------------------------------

    def _weights(self, tokens: int) -> float:
        if self.moe_model is None:
            return self.weight_bytes
        return self.moe_model.decode_read_params(tokens) * self.dtype_bytes / self.tp

    def _roofline(self, read_bytes: float, flops: float, mfu: float) -> float:
        memory = read_bytes / (self.gpu.bandwidth_gb_s * 1e9 * BANDWIDTH_EFFICIENCY)
        compute = flops / (self.gpu.bf16_tflops * 1e12 * mfu)
        return max(memory, compute)

    def _comm(self, tokens: int) -> float:
        return self._allreduces(ALLREDUCES_PER_LAYER * self.num_layers, tokens)

    def _allreduces(self, count: int, tokens: int) -> float:
        """Ring all-reduce of the hidden states: 2 (tp - 1) / tp of the bytes cross each link."""
        if self.tp <= 1:
            return 0.0
        payload = tokens * self.hidden_size * self.dtype_bytes * 2 * (self.tp - 1) / self.tp
        return count * (self.gpu.link_latency_us * 1e-6 + payload / (self.gpu.link_gb_s * 1e9))
