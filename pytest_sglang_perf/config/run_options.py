"""This run's options (`--sglang-*` on the command line, their environment and ini twins), resolved once.

Plain data: `pytest_plugin/options.py` fills it from pytest's configuration; the session and the command reader use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RUN_COMMAND_ENV = "SGLANG_PERF_RUN_COMMAND"
"""Set by `sglang-perf run` for the pytest it starts (cli/main.py): how that run requires real SGLang, so that its
refusal names the command the user typed. Not an option of its own: users pass --sglang-require-real."""
RUN_REAL = "real"
"""`sglang-perf run --real`."""
RUN_GPU_HOST = "gpu-host"
"""`sglang-perf run` on a host where nvidia-smi finds GPUs: the perf suite runs on SGLang, so SGLang is required
(unless the run simulates after all: --sglang-simulate, its ini or environment twin)."""


@dataclass(frozen=True)
class RunOptions:
    config_path: Path | None = None
    simulate: bool = False
    update_baselines: bool = False
    update_new_only: bool = False
    """`--sglang-update-baselines=new`: record only the cells that have no baseline entry yet."""
    results_path: Path | None = None
    variants: tuple[str, ...] | None = None
    log_dir: Path | None = None
    strict_flags: bool = False
    require_real: bool = False
    """A gate: perf tests that cannot run on SGLang fail the session instead of skipping."""
    run_command: str | None = None
    """RUN_REAL or RUN_GPU_HOST when `sglang-perf run` started this pytest and requires real SGLang; None otherwise."""
    require_baselines: bool = False
    """A gate: `new` and `stale` cells fail instead of passing loudly."""
    fail_inconclusive: bool = False
    """`inconclusive` cells fail instead of passing with a warning line."""
    boots: int = 1
    """Recording baselines: server boots per variant (the gate then knows the boot-to-boot spread)."""
    verbosity: int = 0
    """pytest's verbosity: below 0 (-q) terse, 0 one line per boot, 1 and more (-v) every boot step live."""
    heartbeat: float = 15.0
    """Seconds of terminal silence during a boot before a "still booting" line (0: none)."""
    markdown_path: Path | None = None
    """`--sglang-markdown PATH`: the session's Markdown report (also appended to $GITHUB_STEP_SUMMARY when set)."""
    plots_dir: Path | None = None
    """`--sglang-plots DIR`: the session's plots (PNG; needs matplotlib)."""
    benchmark: bool = False
    """`--sglang-benchmark`: feed every cell to pytest-benchmark even when none of its outputs was asked for."""
    probe: bool = True
    """Run the GPU probe before the first real boot (`--sglang-no-probe`: datasheet bandwidths instead)."""
    log_root: Path | None = None
    """Where run folders of server logs go when no log_dir is set (pytest's cache dir); None: a temp dir."""
    gpu_lock_dir: Path | None = None
    """`--sglang-gpu-lock-dir DIR`: the host's shared folder of GPU claims (server/gpu_claims.py); None: the default."""
    url: str | None = None
    """`--sglang-url URL`: measure the server running there (the one selected variant) instead of booting one."""
    remote_gpu: str | None = None
    """`--sglang-remote-gpu NAME`: the GPU model of a remote server, for its baseline key."""
    reuse: bool = False
    """`--sglang-reuse`: keep each booted server after the run, and attach to a kept one of the same key
    (docs/reuse.md)."""
    reuse_idle: float = 900.0
    """`--sglang-reuse-idle SECONDS`: a kept server stops after this long without a run."""
    reuse_shared: bool = False
    """`--sglang-reuse-shared`: measure on a kept server while another run measures on it too."""
    ignore_conditions: bool = False
    """`--sglang-ignore-conditions`: a measurement's conditions are recorded, never used (gate/conditions.py)."""
