"""What SGLang 0.5.13 makes of its own command line where it differs from the 0.5.23 resolution the simulator runs
(docs/sglang-older-releases.md §3.1): read only while the simulator plays 0.5.13 (its flag table has
`--disable-piecewise-cuda-graph` and no per-phase backends).

- `from_cli_args` copies the parallel dests (`tensor_parallel_size`, ...) into the fields `/server_info` shows
  (`tp_size`, ...);
- the prefill graph is the "piecewise" CUDA graph: on by default on CUDA, switched off without a log line for
  DP attention, pipeline parallelism, a multimodal model, LoRA, `--enable-torch-compile` and a device other than
  CUDA (`ServerArgs._handle_piecewise_cuda_graph`, the rules the simulator models), unless
  `--enforce-piecewise-cuda-graph`; `--disable-piecewise-cuda-graph` turns it off. One departure: real 0.5.13
  switches it off for the CPU engine (`SGLANG_USE_CPU_ENGINE=1`) only, so a plain `--device cpu` server keeps it in
  its plan and fails to capture it (tests/sglang_cpu/releases.py passes the flag for none); the simulator, which
  does not model that crash, turns it off for `--device cpu` as the CPU engine does;
- `--disable-cuda-graph` turns off the decode graph only; `--cuda-graph-max-bs` / `--cuda-graph-bs` size it;
- `/server_info` has no `cuda_graph_config`: each graph is its own field (`disable_piecewise_cuda_graph`,
  `disable_cuda_graph`), its sizes resolved in place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig

PARALLEL_FIELDS = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
                   "data_parallel_size": "dp_size", "attention_context_parallel_size": "attn_cp_size",
                   "moe_data_parallel_size": "moe_dp_size", "expert_parallel_size": "ep_size"}
PIECEWISE = "piecewise"


def plays_0_5_13(values: Mapping[str, Any]) -> bool:
    """The parsed command line is 0.5.13's (its table's prefill switch, no per-phase backend)."""
    return "disable_piecewise_cuda_graph" in values and "cuda_graph_backend_prefill" not in values


def as_fields(values: dict[str, Any]) -> None:
    """The parallel dests under the field names `/server_info` shows (ServerArgs.from_cli_args)."""
    for dest, name in PARALLEL_FIELDS.items():
        if dest in values:
            values[name] = values.pop(dest)


def plan_flags(values: Mapping[str, Any], model: ModelConfig) -> dict[str, Any]:
    """The 0.5.23 graph flags that stand for 0.5.13's: what the simulator's graph plan reads."""
    out: dict[str, Any] = {"cuda_graph_max_bs_decode": values.get("cuda_graph_max_bs"),
                           "cuda_graph_bs_decode": values.get("cuda_graph_bs"),
                           "disable_decode_cuda_graph": bool(values.get("disable_cuda_graph")),
                           "disable_cuda_graph": False}  # 0.5.13's switch is the decode graph's alone
    if values.get("disable_piecewise_cuda_graph") or (
            not values.get("enforce_piecewise_cuda_graph") and _silently_off(values, model)):
        out["cuda_graph_backend_prefill"] = "disabled"
    else:
        out["cuda_graph_backend_prefill"] = PIECEWISE
    return out


def _silently_off(values: Mapping[str, Any], model: ModelConfig) -> bool:
    device = str(values.get("device") or "cuda").split(":")[0]
    return (device != "cuda" or bool(values.get("enable_dp_attention")) or int(values.get("pp_size") or 1) > 1
            or model.is_multimodal or bool(values.get("enable_lora")) or bool(values.get("enable_torch_compile")))


def flat_graph_fields(values: dict[str, Any], plan: Mapping[str, Mapping[str, Any]]) -> None:
    """`/server_info`'s graph fields as 0.5.13 reports them, from the resolved plan (`cuda_graph_config`)."""
    prefill, decode = plan["prefill"], plan["decode"]
    values["disable_piecewise_cuda_graph"] = prefill["backend"] == "disabled"
    values["cuda_graph_max_bs"], values["cuda_graph_bs"] = decode["max_bs"], decode["bs"]
    values["piecewise_cuda_graph_max_tokens"], values["piecewise_cuda_graph_tokens"] = prefill["max_bs"], prefill["bs"]
