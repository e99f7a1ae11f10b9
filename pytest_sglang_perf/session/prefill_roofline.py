"""The session's prefill ceilings: each cold cell of exact prompt length against the compute its prompt needs
(roofline/prefill_flops.py, roofline/prefill_ceiling.py; docs/prefill.md §4).

Plain Python (no pytest). A prefill cell gets a `PrefillCeiling`, or a sentence saying why it has none (a CPU run,
a remote server, a model without a config.json, a GPU neither the table nor the probe knows): never a silent gap.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.measurement.metrics import PREFILL
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.config_fields import model_sizes
from pytest_sglang_perf.roofline.model_source import find_model_config
from pytest_sglang_perf.roofline.prefill_ceiling import GEMM_EFFICIENCY, ComputeRate, PrefillCeiling
from pytest_sglang_perf.roofline.prefill_flops import prefill_flops
from pytest_sglang_perf.roofline.server_shape import prefill_layout
from pytest_sglang_perf.server.model_dir import local_model_dir
from pytest_sglang_perf.server.plan import flag_value
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_fields import read_model_config

if TYPE_CHECKING:
    from pytest_sglang_perf.hardware.probe import ProbeReport


def gemm_rate(name: str, table: Gpu | None, probe: ProbeReport | None, *, simulate: bool) -> ComputeRate | str:
    """The simulated GPU's rate, the probe's measurement of this host's GPU, else its datasheet figure."""
    if simulate:
        if table is None:
            return f"no prefill ceiling: the simulated GPU {name!r} is not in the GPU table"
        return _table_rate(table, "simulated")
    measured = _probed(probe, name)
    if measured is not None:
        return measured
    if table is None:
        return (f"no prefill ceiling: GPU {name!r} is not in the GPU table (sglang_facts/data/gpus.json) and its "
                "GEMM rate was not measured")
    return _table_rate(table, "datasheet")


def prefill_ceiling(run: VariantRun, result: Result, rate: ComputeRate, root: Path,
                    model: str) -> PrefillCeiling | str:
    """The cell's ceiling: FLOPs of its prompt on this server's layout, over `rate`."""
    if run.config is None or run.config.unavailable is not None:
        return "no prefill ceiling: the server's /server_info could not be read, so its tp and chunk size are unknown"
    config = _config_file(run, root, model)
    if isinstance(config, str):
        return config
    try:
        sizes = model_sizes(read_model_config(config), str(config))
    except (OSError, SGLangPerfError) as exc:
        return f"no prefill ceiling: cannot read the model's sizes from {config} ({exc})"
    tp, chunk = prefill_layout(run.config.info)
    computed = statistics.median(s.prompt_tokens - (s.cached_tokens or 0) for s in result.samples)
    flops = prefill_flops(sizes, int(computed), tp=tp, chunk_size=chunk)
    return PrefillCeiling(flops, rate, statistics.median(result.values[PREFILL]), str(config))


def _config_file(run: VariantRun, root: Path, model: str) -> Path | str:
    """The simulated model's config.json, else the served model's, found as its bytes are (roofline/model_source.py)."""
    if run.plan.model_config is not None:
        return run.plan.model_config
    model_path = flag_value(run.plan.command, "--model-path") or model
    local = local_model_dir(model_path, root)
    found = find_model_config(str(local) if local is not None else model_path)
    if isinstance(found, Path):
        return found
    return f"no prefill ceiling: its FLOPs come from the model's sizes, and {found}"


def _probed(probe: ProbeReport | None, name: str) -> ComputeRate | None:
    if probe is None:
        return None
    found = probe.gemm_for(name)
    if found is None or found.tflops <= 0:
        return None
    return ComputeRate(found.tflops, "measured", name, found.method)


def _table_rate(gpu: Gpu, source: str) -> ComputeRate:
    return ComputeRate(gpu.bf16_tflops * GEMM_EFFICIENCY, source, gpu.name,
                       f"{gpu.bf16_tflops:g} TFLOP/s dense bf16 datasheet x {GEMM_EFFICIENCY:.2f} GEMM efficiency")

