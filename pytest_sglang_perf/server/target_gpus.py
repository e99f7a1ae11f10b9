"""The GPUs the pre-flight checks the variants against: the host's (nvidia-smi), or the simulator's.

One answer for the session and for `sglang-perf check --simulate`, so that both judge a matrix alike: without the
simulator, the GPUs nvidia-smi lists (their model decides the GPU rules, their count how many GPUs a server may
use); with it, the GPU the simulator simulates: `--sim-gpu` in `[simulate] args`, else `SGLANG_SIM_GPU` from the
configuration's `env` or the environment (what the simulator process sees), else the GPU table's default. The
simulator has no GPU count: a simulated server may use any number, so the count is not checked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.server.plan import flag_value
from pytest_sglang_perf.sglang_facts.gpus import find_gpu

SIM_GPU_FLAG = "--sim-gpu"
SIM_GPU_ENV = "SGLANG_SIM_GPU"


@dataclass(frozen=True)
class TargetGpus:
    """What the pre-flight checks each variant against."""

    names: tuple[str, ...] = ()
    """GPU models (one name per GPU as nvidia-smi lists them); their SM versions decide the GPU rules."""
    count: int | None = None
    """How many GPUs one server can use there; None when unknown (then the count is not checked)."""
    origin: str = "nvidia-smi"
    """Where the GPUs come from, for messages: `nvidia-smi`, `the simulator`, `--gpu`."""


NO_GPUS = TargetGpus()
"""Nothing known about the GPUs: only the flags are checked."""


def target_gpus(settings: Settings, *, simulate: bool, host: Callable[[], Sequence[str]],
                environ: Mapping[str, str] = os.environ) -> TargetGpus:
    """The simulated GPU when simulating, else the host's GPUs (`host()`: nvidia-smi's names, one per GPU; none on a
    machine without nvidia-smi, where the count is unknown)."""
    if simulate:
        return TargetGpus((simulated_gpu_name(settings, environ),), None, "the simulator")
    names = tuple(host())
    return TargetGpus(names, len(names) or None, "nvidia-smi")


def simulated_gpu_name(settings: Settings, environ: Mapping[str, str] = os.environ) -> str:
    """The GPU the simulator simulates for this configuration, as the user named it (the baseline key shows it)."""
    asked = flag_value(settings.simulate.args, SIM_GPU_FLAG) or {**environ, **settings.env}.get(SIM_GPU_ENV)
    return asked or find_gpu().name
