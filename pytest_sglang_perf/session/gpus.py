"""The session's GPU claims: each server boots with CUDA_VISIBLE_DEVICES set to GPUs no other server holds.

Plain Python (no pytest): the session (session/facade.py) claims before a variant's boot and releases at its stop; the
claims themselves are server/gpu_claims.py's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.gate.environment import detect_gpus
from pytest_sglang_perf.server.gpu_claims import DEFAULT_LOCK_DIR, VISIBLE, claimed_plan, gpu_pool
from pytest_sglang_perf.server.kept import Registry, state_folder
from pytest_sglang_perf.server.kept_stop import evict_idle
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.server.sim_knobs import KNOB_PREFIX
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.parsers import ArgParser


class SessionGpus:
    """Claims are made on a GPU host; a simulated run claims only when --sglang-gpu-lock-dir asks for it (its
    servers use no real GPU, so by default they hold none)."""

    def __init__(self, options: RunOptions, timeout: float, parser: Callable[[], ArgParser], live: Live) -> None:
        self._enabled = not options.simulate or options.gpu_lock_dir is not None
        self._lock_dir = options.gpu_lock_dir or DEFAULT_LOCK_DIR
        self._timeout = timeout
        self._parser = parser
        self._live = live

    @cached_property
    def pool(self) -> tuple[str, ...]:
        """The GPUs this process may claim: CUDA_VISIBLE_DEVICES's, else those nvidia-smi lists."""
        return gpu_pool(os.environ, lambda: len(detect_gpus().names)) if self._enabled else ()

    def claim(self, run: VariantRun, log_path: Path) -> ServerPlan:
        """The variant's plan with CUDA_VISIBLE_DEVICES set to GPUs claimed for it alone, kept in `run.claim`; raises
        BootError when no claim can be made."""
        from pytest_sglang_perf.server.preflight import local_gpu_count

        if run.claim is not None:  # booted again (a confirmation, more boots): the same GPUs, never given up between
            return replace(run.plan, env={**run.plan.env, VISIBLE: run.claim.visible_devices})
        args = _without_knobs(run.plan.args)
        run.default_gpus = () if run.plan.url is not None else default_gpus(args, self._parser())
        count = local_gpu_count(args, self._parser()) if self.pool and run.plan.url is None else None
        if self.pool and run.plan.url is None and count is None:
            self._live.detail(f"[{run.name}] no GPU claim: how many GPUs of this host the server uses is not known "
                              "(a multi-node server, or a deprecated flag SGLang rewrites); it boots unplaced")
        plan, run.claim = claimed_plan(run.plan, count, self.pool,
                                       self._lock_dir, log_path, timeout=self._timeout,
                                       waiting=lambda message: self._waiting(run, message))
        if run.claim is not None:
            self._live.detail(f"[{run.name}] GPUs {run.claim.visible_devices} claimed (CUDA_VISIBLE_DEVICES)")
        return plan

    def _waiting(self, run: VariantRun, message: str) -> None:
        """A claim waits: first stop the idle kept servers that hold GPUs of the pool, then say so."""
        def say(line: str) -> None:
            self._live.note(f"[{run.name}] {line}")

        # at each note while it waits: a kept server (docs/reuse.md) may have gone idle meanwhile
        evict_idle(Registry(state_folder()), self.pool, say)
        say(message)

    @staticmethod
    def release(run: VariantRun) -> None:
        if run.claim is not None:
            run.claim.release()
            run.claim = None


def _without_knobs(args: tuple[str, ...]) -> tuple[str, ...]:
    """The SGLang flags of a command line, the simulator's `--sim-*` knobs (each with its value) left out."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith(KNOB_PREFIX):
            skip = "=" not in arg
        else:
            out.append(arg)
    return tuple(out)


def default_gpus(args: tuple[str, ...], parser: ArgParser) -> tuple[int, ...]:
    """The host GPUs a server with these args runs on when no CUDA_VISIBLE_DEVICES names them: SGLang's rank r uses
    GPU `base_gpu_id + r * gpu_id_step` (managers/data_parallel_controller.py, 0.5.23); () when the count is not
    known here (server/preflight.py local_gpu_count)."""
    from pytest_sglang_perf.server.preflight import local_gpu_count
    from pytest_sglang_perf.sglang_facts.requested import ParseError, parse_command_line, raising_parser

    try:
        namespace = parse_command_line(args, raising_parser(parser))
    except ParseError:
        return ()
    count = local_gpu_count(args, parser, namespace)
    base, step = getattr(namespace, "base_gpu_id", 0), getattr(namespace, "gpu_id_step", 1)
    if getattr(namespace, "device", None) not in (None, "cuda"):  # a CPU (or other device) server uses no GPU
        return ()
    if not count or not isinstance(base, int) or not isinstance(step, int):
        return ()
    return tuple(base + rank * step for rank in range(count))
