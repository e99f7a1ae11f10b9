"""A roofline timing model: how long one scheduler step takes on the simulated GPU (`--sim-gpu`).

A **decode step** is one forward of the running batch (with EAGLE / MTP speculative decoding: one round of
`speculative_num_steps` draft forwards and one verify forward of `speculative_num_draft_tokens` tokens per request),
split into the terms of `DecodeSplit`:

    target   = max(bytes / (bandwidth * gemv_efficiency), flops / (bf16 peak * decode_mfu))
               bytes: the weights one forward reads, per GPU (parameters * dtype bytes / tp), plus the KV cache
               of every running request; flops: 2 * active parameters / tp per token
    kernels  = kernels_per_layer * layers: attention, norms and the other small kernels, inside the CUDA graph
    draft    = per draft forward, the same for one draft layer and the LM head, tokens = batch * topk, plus its
               all-reduces and draft_overhead
    comm     = tp > 1: allreduces_per_layer per layer and forward, link latency + bytes over the link
    overhead = step_overhead + per_request * batch (+ verify_overhead with speculative decoding)
               + without the decode CUDA graph (or a batch larger than the captured sizes): kernel launches,
               eager_launch_per_layer per layer and forward

Tokens per step are the accept length (schedule.py draws them). A **prefill** (extend) step of N new tokens after P
tokens already in the KV cache costs the same roofline at prefill_mfu, with the flops a prefill does:

    flops    = 2 * (active parameters - LM head) / tp * N     every token through every layer's GEMMs
             + 2 * LM head / tp                              logits of the last position only (SGLang's extend)
             + 4 * N * (P + N / 2) * heads * head_dim / tp   per full-attention layer: QK^T and PV, causal
    gpu      = that roofline + prefill_kernels_per_layer * layers   (norms, RoPE, attention, activations)
    host     = prefill_launch_per_layer * layers             the host's time to issue the kernels eagerly, of which
                                                              the prefill CUDA graph leaves prefill_graph_launch_share
                                                              (when N fits its largest size, chunked_prefill_size)
    forward  = (gpu^p + host^p)^(1/p), p = prefill_overlap_power: the host issues while the GPU runs, so the longer
               of the two sets the time, the other adding little once it is much shorter

Measured on a plain-torch Llama-3-8B prefill on an H100 (docs/prefill-calibration.md): the host issue time, about
11 ms a forward, matters below ~1,000 tokens and not above.

A prompt longer than chunked_prefill_size is prefilled in chunks of that size, one step (and one `Prefill batch`
line) each (batcher.py), each chunk's attention reading the chunks before it. The launch cost is the same at every
length, the compute grows with it: the prefill graph shortens a short prompt's TTFT and hardly a long one's, and
never the decode step. Single-batch overlap changes nothing here: it overlaps MoE communication (DeepEP), which a
dense model does not have.

The per-GPU efficiencies come from the GPU table (sglang_facts/data/gpus.json), the other constants from
sglang_facts/data/sim-timing.json, each with where it came from. They reproduce two anchors
(tests/unit/sglang_facts/test_simulator_calibration.py, docs/simulated-models.md "Calibration"): the seed's 27B with
3-step MTP on 2x RTX A6000 (50-57 tok/s, its bytes over the read bandwidth ~83% of the step) and a graphed
Llama-3-8B step on an H200 (GEMVs at 3.70 TB/s, 5.89 ms a step).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.sglang_facts.sim_timing import SimTiming, load_sim_timing
from pytest_sglang_perf.simulator.args.resolve import Resolution

TIMING: SimTiming = load_sim_timing()


@dataclass(frozen=True)
class DecodeSplit:
    """One decode step's seconds, term by term (see the module's docstring)."""

    target: float
    """The target (verify) forward's weight and KV read, or its compute when that is longer."""
    kernels: float
    """The target forward's attention, norms and small kernels."""
    draft: float
    """Every draft forward: its read, kernels, all-reduces and overhead."""
    comm: float
    """The target forward's tensor-parallel all-reduces."""
    overhead: float
    """Scheduler, sampling, verify and (without the decode graph) kernel launches."""

    @property
    def total(self) -> float:
        return self.target + self.kernels + self.draft + self.comm + self.overhead


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
    head_flops: float = 0.0
    """Per GPU: the LM head's flops for one token (a prefill computes the last position's logits only)."""
    attention_width: float = 0.0
    """Per GPU: query heads x head_dim / tp, the width of the attention's QK^T and PV products."""
    attention_layers: int = 0
    """Layers with full (quadratic) attention."""

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
            head_flops=2.0 * model.vocab_size * model.hidden_size / tp,
            attention_width=model.num_attention_heads * model.head_dim / tp,
            attention_layers=model.num_kv_layers,
        )

    # -- decode ------------------------------------------------------------------------------------

    def decode_step(self, batch: int, context_tokens: int) -> float:
        """Seconds for one decode step (one speculative round) of `batch` requests holding `context_tokens` in KV."""
        return self.decode_split(batch, context_tokens).total

    def decode_split(self, batch: int, context_tokens: int) -> DecodeSplit:
        """`decode_step`, term by term."""
        batch = max(1, batch)
        tokens = batch * self.verify_width
        target = self._roofline(self._weights(tokens) + context_tokens * self.kv_bytes_per_token,
                                self.flops_per_token * tokens, TIMING.decode_mfu)
        overhead = TIMING.step_overhead_s + TIMING.per_request_s * batch + self._launch_cost(batch)
        if self.verify_width > 1:
            overhead += TIMING.verify_overhead_s
        kernels = TIMING.kernels_per_layer_s * self.num_layers
        return DecodeSplit(target, kernels, self._draft(batch), self._comm(tokens), overhead)

    def decode_bytes(self, batch: int, context_tokens: int) -> float:
        """Bytes one decode step reads per GPU: the verify forward's weights, each draft forward's, the KV cache."""
        tokens = max(1, batch) * self.verify_width
        return (self._weights(tokens) + context_tokens * self.kv_bytes_per_token
                + self.draft_forwards * self.draft_bytes)

    def uses_decode_graph(self, batch: int) -> bool:
        return 0 < batch <= self.decode_graph_max_bs

    def _launch_cost(self, batch: int) -> float:
        if self.uses_decode_graph(batch):
            return 0.0
        return TIMING.eager_launch_per_layer_s * self.num_layers * (1 + self.draft_forwards)

    def _draft(self, batch: int) -> float:
        if self.draft_forwards == 0:
            return 0.0
        tokens = batch * max(1, self.draft_tokens_per_request)
        one = self._roofline(self.draft_bytes, self.draft_flops_per_token * tokens, TIMING.decode_mfu)
        comm = self._allreduces(TIMING.allreduces_per_layer, tokens)
        return self.draft_forwards * (one + TIMING.kernels_per_layer_s + comm + TIMING.draft_overhead_s)

    # -- prefill -----------------------------------------------------------------------------------

    def prefill(self, new_tokens: int, attention_flops: float = 0.0, finishing: int = 1) -> float:
        """Seconds for one prefill (extend) forward over `new_tokens` tokens, the draft's included;
        `attention_flops`: the step's quadratic attention term (`attention_flops`, summed over its requests);
        `finishing`: the requests whose prompt ends in this step, each computing its last position's logits."""
        tokens = max(1, new_tokens)
        flops = (self.flops_per_token - self.head_flops) * tokens + self.head_flops * finishing + attention_flops
        gpu = (self._roofline(self._weights(tokens), flops, TIMING.prefill_mfu)
               + TIMING.prefill_kernels_per_layer_s * self.num_layers)
        host = TIMING.prefill_launch_per_layer_s * self.num_layers
        if self.uses_prefill_graph(tokens):
            host *= TIMING.prefill_graph_share(self.prefill_graph_backend)
        power = TIMING.prefill_overlap_power
        forward = float((gpu**power + host**power) ** (1 / power))
        draft = 0.0
        if self.draft_forwards:
            draft = (self._roofline(self.draft_bytes, self.draft_flops_per_token * tokens, TIMING.prefill_mfu)
                     + TIMING.draft_overhead_s)
        return forward + self._comm(tokens) + draft + TIMING.step_overhead_s

    def attention_flops(self, new_tokens: int, prefix_tokens: int = 0) -> float:
        """Per GPU, the causal attention of `new_tokens` queries over `prefix_tokens` cached keys and each other:
        QK^T and PV, 2 flops per multiply-add each, in every full-attention layer."""
        pairs = new_tokens * (prefix_tokens + new_tokens / 2)
        return 4.0 * pairs * self.attention_width * self.attention_layers

    def uses_prefill_graph(self, new_tokens: int) -> bool:
        return 0 < new_tokens <= self.prefill_graph_max_tokens

    # -- shared ------------------------------------------------------------------------------------

    def _weights(self, tokens: int) -> float:
        if self.moe_model is None:
            return self.weight_bytes
        return self.moe_model.decode_read_params(tokens) * self.dtype_bytes / self.tp

    def _roofline(self, read_bytes: float, flops: float, mfu: float) -> float:
        memory = read_bytes / (self.gpu.gemv_bandwidth_gb_s * 1e9)
        compute = flops / (self.gpu.bf16_tflops * 1e12 * mfu)
        return max(memory, compute)

    def _comm(self, tokens: int) -> float:
        return self._allreduces(TIMING.allreduces_per_layer * self.num_layers, tokens)

    def _allreduces(self, count: int, tokens: int) -> float:
        """Ring all-reduce of the hidden states: 2 (tp - 1) / tp of the bytes cross each link."""
        if self.tp <= 1:
            return 0.0
        payload = tokens * self.hidden_size * self.dtype_bytes * 2 * (self.tp - 1) / self.tp
        return count * (self.gpu.link_latency_us * 1e-6 + payload / (self.gpu.link_gb_s * 1e9))
