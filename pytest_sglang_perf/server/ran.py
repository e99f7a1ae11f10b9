"""What a server ran that matters for speed, in words, from its `/server_info` and its log's startup facts: the
prefill and decode CUDA graphs (the plan only counts when the log shows the capture), speculative decoding, the
request cap, the overlap scheduler."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang_perf.server.info_paths import MISSING, lookup
from pytest_sglang_perf.server.startup import StartupFacts


def ran_lines(info: Mapping[str, Any], facts: StartupFacts, *, log_seen: bool = True) -> tuple[tuple[str, str], ...]:
    """The configuration that matters for speed, as the server reported it."""
    lines = [("prefill CUDA graph", _graph(info, facts, "prefill", log_seen)),
             ("decode CUDA graph", _graph(info, facts, "decode", log_seen))]
    spec = info.get("speculative_algorithm")
    if spec:
        lines.append(("speculative decoding", f"{spec} steps={info.get('speculative_num_steps')} "
                                              f"topk={info.get('speculative_eagle_topk')} "
                                              f"draft_tokens={info.get('speculative_num_draft_tokens')}"))
    cap = lookup(info, ["internal_states", 0, "effective_max_running_requests_per_dp"])
    if cap is not MISSING:
        lines.append(("max running requests", f"{cap} per DP rank"))
    if "disable_overlap_schedule" in info:
        lines.append(("overlap scheduler", "off" if info["disable_overlap_schedule"] else "on"))
    return tuple(lines)


def _graph(info: Mapping[str, Any], facts: StartupFacts, phase: str, log_seen: bool = True) -> str:
    """The plan's backend only when the log shows the graph captured; otherwise what kept it from running.

    `cuda_graph_config` is the plan: on CPU it still says `full` for decode although nothing is captured
    (`decode_cuda_graph_bs` is empty), so the plan alone never makes a graph "full" here.
    """
    backend = _planned_backend(info, phase)
    captured = facts.target_captures(phase)
    if captured:
        seconds = sum(c.seconds or 0.0 for c in captured)
        sizes = next((c.batch_sizes for c in captured if c.batch_sizes), None)
        unit = "tokens" if phase == "prefill" else "bs"  # the prefill graph is captured per token count
        detail = f", {unit} {sizes[0]}..{sizes[-1]} ({len(sizes)} sizes)" if sizes else ""
        name = "not reported" if backend is MISSING else str(backend)
        return f"{name} (captured in {seconds:.2f} s{detail})"
    if backend is MISSING:
        return "not reported"
    if not log_seen and backend != "disabled":
        return f"capture not known (no server log: the server is remote); planned {backend}"
    if backend == "disabled":
        if phase != "prefill" or not facts.prefill_graph_skipped:
            return "disabled"
        fallbacks = facts.capture_fallbacks
        return f"disabled (not captured: {fallbacks[-1]})" if fallbacks else "disabled (not captured)"
    return f"not captured ({_not_captured_because(info, facts, phase)}; planned {backend})"


_FLAT_SWITCHES = {"prefill": ("disable_piecewise_cuda_graph", "piecewise"), "decode": ("disable_cuda_graph", "full")}
"""SGLang 0.5.13 has no `cuda_graph_config`: each graph is one switch of its own (docs/sglang-older-releases.md
§3.1), reported here as the backend that switch stands for."""


def _planned_backend(info: Mapping[str, Any], phase: str) -> Any:
    """The phase's planned backend: `cuda_graph_config.<phase>.backend` (0.5.14 on), else the phase's switch."""
    backend = lookup(info, ["cuda_graph_config", phase, "backend"])
    if backend is not MISSING or "cuda_graph_config" in info:
        return backend
    switch, name = _FLAT_SWITCHES[phase]
    if not isinstance(info.get(switch), bool):
        return MISSING
    return "disabled" if info[switch] else name


def _not_captured_because(info: Mapping[str, Any], facts: StartupFacts, phase: str) -> str:
    device = info.get("device")
    if isinstance(device, str) and device != "cuda":
        return device
    if phase == "prefill" and facts.capture_fallbacks:
        return facts.capture_fallbacks[-1]
    if info.get("disable_cuda_graph") is True:
        return "--disable-cuda-graph"
    return "no capture in the server log"
