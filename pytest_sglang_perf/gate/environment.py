"""Which environment a measurement belongs to: the baseline file key and the recorded software facts.

The GPU model, the number of GPUs a variant's server uses and the model pick the baseline file
(`baselines/<key>.json`); software versions (SGLang, torch, driver)
are recorded inside it and shown when they differ, since "did the upgrade regress?" compares across them.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pytest_sglang_perf import __version__
from pytest_sglang_perf.gate.store import environment_key_slug

SIMULATED_PREFIX = "simulated-"
"""How the key of a baseline file of simulated numbers starts."""


@dataclass(frozen=True)
class Gpus:
    names: tuple[str, ...]
    driver: str | None


@dataclass(frozen=True)
class Environment:
    """The session's software facts; each variant's baseline file key comes from `environment_key`."""

    simulated: bool
    facts: Mapping[str, Any]


@functools.cache
def detect_gpus(timeout: float = 10.0) -> Gpus:
    """GPUs as nvidia-smi lists them; none when nvidia-smi is absent or fails. Asked once per process: the
    report header, the environment key and the pre-flight check all need it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return Gpus((), None)
    query = [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return Gpus((), None)
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]
    return Gpus(tuple(r[0] for r in rows), rows[0][1] if rows and len(rows[0]) > 1 else None)


def _short_gpu_name(name: str) -> str:
    return re.sub(r"^(NVIDIA|AMD)\s+", "", name).replace("GeForce ", "")


def hardware_label(gpu_name: str | None, count: int) -> str:
    """`2xrtx-a6000`-style: the GPU model times the GPUs one server uses; `cpu` without a GPU."""
    return "cpu" if gpu_name is None else f"{count}x{_short_gpu_name(gpu_name)}"


def environment_key(*, model: str, simulated: bool, hardware: str) -> str:
    """`2xrtx-a6000__qwen-qwen3.6-27b` on a GPU runner, `simulated-2xrtx-a6000__...` on the simulator."""
    return environment_key_slug([(SIMULATED_PREFIX if simulated else "") + hardware, model])


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def software_facts(gpus: Gpus) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "pytest_sglang_perf": __version__,
        "sglang": package_version("sglang"),
        "torch": package_version("torch"),
        "gpus": list(gpus.names),
        "driver": gpus.driver,
    }


def build_environment(*, model: str, simulated: bool) -> Environment:
    gpus = Gpus((), None) if simulated else detect_gpus()
    return Environment(simulated, {"model": model, "simulated": simulated, **software_facts(gpus)})
