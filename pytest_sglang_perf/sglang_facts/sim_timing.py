"""The simulator's timing constants (`sglang_facts/data/sim-timing.json`): what its roofline model
(simulator/engine/roofline.py) adds to the bytes and FLOPs of a step, each with where its value came from.

Per-GPU figures (datasheet peaks, the share of the bandwidth a copy and a GEMV reach) live in the GPU table
(gpus.json, gpus.py); this table holds what is the same on every GPU. docs/simulated-models.md, "Calibration",
says how the two tables reproduce the measured anchors.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError

SIM_TIMING_TABLE = Path(__file__).resolve().parent / "data" / "sim-timing.json"
SOURCE_KINDS = ("measured", "calibrated", "assumed", "structure")
"""How a constant's `source` starts: measured (where), calibrated (to which anchor), assumed (why), or
structure (it follows from how the model or SGLang is built)."""


class SimTimingError(SGLangPerfError, ValueError):
    """The timing table is missing or malformed; the message names the file and the constant."""


@dataclass(frozen=True)
class SimTiming:
    step_overhead_s: float
    """Host work per decode step left on the critical path (sampling, result hand-off)."""
    per_request_s: float
    """Per running request and step (sampling, output processing)."""
    verify_overhead_s: float
    """Building and checking the draft tree of a speculative round."""
    draft_overhead_s: float
    """Per draft forward (graph replay, top-k)."""
    kernels_per_layer_s: float
    """Attention, norms, rotary and the other small kernels of one layer of one forward, inside the CUDA graph."""
    eager_launch_per_layer_s: float
    """Kernel launches of one layer of one decode forward without a CUDA graph (on top of the kernels)."""
    prefill_launch_per_layer_s: float
    """The host's time to issue one layer of a prefill (extend) forward run eagerly (it overlaps the GPU's work)."""
    prefill_kernels_per_layer_s: float
    """The GPU's time for one layer of a prefill beyond its GEMMs' roofline: norms, RoPE, attention, activations."""
    prefill_overlap_power: float
    """p of the soft maximum (GPU time^p + host issue time^p)^(1/p) an eager prefill step takes."""
    prefill_graph_launch_share: tuple[tuple[str, float], ...]
    """Per prefill graph backend, what is left of the prefill launch cost with the prefill CUDA graph."""
    decode_mfu: float
    """Share of the bf16 tensor-core peak reached by batched decode GEMMs."""
    prefill_mfu: float
    """Share of the bf16 tensor-core peak reached by prefill GEMMs."""
    allreduces_per_layer: int
    """Tensor-parallel all-reduces of the hidden states per layer and forward."""

    def prefill_graph_share(self, backend: str) -> float:
        """1.0 for a backend the table does not name (no saving)."""
        return dict(self.prefill_graph_launch_share).get(backend, 1.0)


@dataclass(frozen=True)
class TimingConstant:
    """One entry of the table as written: its value, unit and where it came from."""

    name: str
    value: Any
    unit: str
    source: str


def _shares(value: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object of backend: share, got {value!r}")
    return tuple((str(backend), float(share)) for backend, share in value.items())


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


_CONVERT: dict[str, Callable[[Any], Any]] = {"prefill_graph_launch_share": _shares, "allreduces_per_layer": _count}


def timing_constants(path: Path = SIM_TIMING_TABLE) -> tuple[TimingConstant, ...]:
    """Every constant of the table as written, in the table's order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["constants"]
        return tuple(TimingConstant(str(name), entry["value"], str(entry.get("unit", "")), str(entry["source"]))
                     for name, entry in entries.items())
    except FileNotFoundError:
        raise SimTimingError(f"simulator timing table not found: {path}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SimTimingError(f"malformed simulator timing table {path}: {exc!r}; every entry of \"constants\" "
                             "needs a \"value\" and a \"source\"") from None


@functools.cache
def load_sim_timing(path: Path = SIM_TIMING_TABLE) -> SimTiming:
    given = {constant.name: constant.value for constant in timing_constants(path)}
    names = [field.name for field in fields(SimTiming)]
    missing, unknown = [n for n in names if n not in given], sorted(set(given) - set(names))
    if missing or unknown:
        raise SimTimingError(f"simulator timing table {path}: missing constants {missing}, unknown constants "
                             f"{unknown}; the simulator reads exactly: {', '.join(names)}")
    values: dict[str, Any] = {}
    for name in names:
        convert: Callable[[Any], Any] = _CONVERT.get(name, _number)
        try:
            values[name] = convert(given[name])
        except (TypeError, ValueError) as exc:
            raise SimTimingError(f"simulator timing table {path}: constant {name!r}: {exc}") from None
    return SimTiming(**values)
