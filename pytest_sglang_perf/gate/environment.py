"""Which environment a measurement belongs to: the baseline file key and the recorded software facts.

Hardware and model pick the baseline file (`baselines/<key>.json`); software versions (SGLang, torch, driver)
are recorded inside it and shown when they differ, since "did the upgrade regress?" compares across them.
"""

from __future__ import annotations

import functools
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pytest_sglang_perf import __version__
from pytest_sglang_perf.gate.store import environment_key_slug
from pytest_sglang_perf.server.plan import flag_value


@dataclass(frozen=True)
class Gpus:
    names: tuple[str, ...]
    driver: str | None

    def label(self) -> str:
        if not self.names:
            return "cpu"
        first = self.names[0]
        return f"{len(self.names)}x{_short_gpu_name(first)}"


@dataclass(frozen=True)
class Environment:
    key: str
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


def environment_key(*, model: str, simulated: bool, sim_args: Sequence[str], gpus: Gpus) -> str:
    """`2xrtx-a6000__qwen-qwen3.6-27b` on a GPU runner, `simulated-gpu__...` on the simulator."""
    hardware = "simulated-" + (flag_value(sim_args, "--sim-gpu") or "gpu") if simulated else gpus.label()
    return environment_key_slug([hardware, model])


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


def build_environment(*, model: str, simulated: bool, sim_args: Sequence[str]) -> Environment:
    gpus = Gpus((), None) if simulated else detect_gpus()
    key = environment_key(model=model, simulated=simulated, sim_args=sim_args, gpus=gpus)
    facts = {"key": key, "model": model, "simulated": simulated, **software_facts(gpus)}
    return Environment(key, simulated, facts)
