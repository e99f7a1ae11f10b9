"""Which GPUs a simulated server runs on, as SGLang picks them: `CUDA_VISIBLE_DEVICES` when set, the first ones.

SGLang's scheduler ranks use local GPU ids `base_gpu_id + rank` (0, 1, ... by default) among the devices CUDA makes
visible, so a server needs as many visible devices as it uses GPUs (tp x pp x dp, the rules' `gpu_count_fields`,
docs/sglang-0.5.23.md §12). The simulator has no GPU, so it checks that count itself and fails at boot when too few
are visible, with a `simulator:` line (not a line of SGLang's, whose failure there is a CUDA error).

With `--sim-device-dir DIR` (or SGLANG_SIM_DEVICE_DIR) the simulators of one host share a folder where each holds a
lock per GPU it runs on for its whole life: a second simulator on a GPU that one already uses fails at boot, as a
real second server on a full GPU would run out of memory. That makes two servers on one GPU a loud failure in tests of
GPU placement (pytest-xdist workers, tests/plugin/test_xdist_gpus.py).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from pytest_sglang_perf.sglang_facts.rules import load_rules

VISIBLE = "CUDA_VISIBLE_DEVICES"


class DeviceProblem(Exception):
    """The simulated server cannot run on the GPUs it was given; the message is for its log."""


def gpus_needed(args: Mapping[str, Any], version: str) -> int:
    """tp x pp x dp of the resolved args (the rules' gpu_count_fields)."""
    return load_rules(version).gpu_count(args)


def devices_used(needed: int, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The devices a server using `needed` GPUs runs on; raises DeviceProblem when fewer are visible."""
    visible = environ.get(VISIBLE)
    if visible is None:
        return tuple(str(i) for i in range(needed))
    devices = tuple(part.strip() for part in visible.split(",") if part.strip())
    if len(devices) < needed:
        raise DeviceProblem(f"{VISIBLE}={visible!r} makes {len(devices)} GPU(s) visible but this server uses {needed} "
                            "(tp x pp x dp); make more GPUs visible or lower --tp-size/--pp-size/--dp-size")
    return devices[:needed]


def occupy(devices: tuple[str, ...], folder: Path) -> list[TextIO]:
    """Hold a lock per device in `folder` (released when the process ends); raises DeviceProblem when another
    simulated server holds one."""
    folder.mkdir(parents=True, exist_ok=True)
    held: list[TextIO] = []
    for device in devices:
        handle = open(folder / f"device-{device}.lock", "a")  # noqa: SIM115 (held open for the process's life)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            for other in held:
                other.close()
            raise DeviceProblem(f"GPU {device} is in use by another simulated server (lock in {folder}): two servers "
                                "on one GPU") from None
        held.append(handle)
    return held


def device_line(devices: tuple[str, ...], environ: Mapping[str, str] = os.environ) -> str:
    source = f"{VISIBLE}={environ[VISIBLE]}" if VISIBLE in environ else f"{VISIBLE} unset"
    return f"running on GPU(s) {','.join(devices)} ({source})"
