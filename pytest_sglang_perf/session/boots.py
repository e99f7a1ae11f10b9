"""The session's boots: a variant's server booted (or a remote one attached) in one place, read once for what it
really runs, placed (its identity and baseline file, session/identity.py), and stopped with its whole tree.

Plain Python (no pytest): the facade (session/facade.py) decides when; this room does it and keeps what it
learns in the variant's record (session/variant_run.py). A failed boot is remembered in the record: the variant's
later tests fail with its report, none boots again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.server.boot import boot_server, stop_server
from pytest_sglang_perf.server.hints import boot_hints
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.logdirs import RunLogs
from pytest_sglang_perf.server.remote import REMOTE_GPU, attach_server
from pytest_sglang_perf.server.target_gpus import TargetGpus
from pytest_sglang_perf.session.gpus import SessionGpus
from pytest_sglang_perf.session.identity import server_place
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.roofline import SessionRoofline
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.parsers import ArgParser

if TYPE_CHECKING:
    from pytest_sglang_perf.session.kept import SessionKept

SIM_BOOT_ENV = "SGLANG_SIM_BOOT"
"""The simulator's boot label (its `--sim-boot` knob): each simulated boot gets `VARIANT#N`, so that each draws noise
of its own (a fresh per-boot offset), reproducibly; set in the environment, so the command line stays SGLang's."""


class SessionBoots:
    def __init__(self, settings: Settings, *, simulate: bool, logs: RunLogs, live: Live, gpus: SessionGpus,
                 roofline: SessionRoofline, parser: Callable[[], ArgParser], targets: Callable[[], TargetGpus],
                 runs: Mapping[str, VariantRun], kept: SessionKept | None = None) -> None:
        self._settings = settings
        self._simulate = simulate
        self._logs = logs
        self._live = live
        self._gpus = gpus
        self._roofline = roofline
        self._parser = parser
        self._targets = targets
        self._runs = runs
        self._kept = kept
        """--sglang-reuse: servers are kept after the run, and a kept one of the same key is attached to."""

    def boot(self, run: VariantRun, *, fresh: bool = False) -> None:
        """Boot the variant's server unless it runs, or attach to its remote server (a failed boot is raised again),
        then read what it runs and place it."""
        if run.boot_error is not None:
            raise run.boot_error
        try:
            started = self._start(run, fresh)
        except BootError as exc:
            run.boot_error = exc
            self._gpus.release(run)
            raise
        if run.config is None:
            self._inspect(run)
        elif started and run.server is not None:  # a later boot: its own startup (capture seconds), the same flags
            from pytest_sglang_perf.server.startup import startup_facts

            run.startup = startup_facts(run.server.log_text())  # this boot's lines only
        if run.place is None:
            run.place = server_place(run.plan, self._parser(), model=self._settings.model, root=self._settings.root,
                                     gpu_name=self._gpu_name(run), simulated=self._simulate)

    def _start(self, run: VariantRun, fresh: bool = False) -> bool:
        """Start (or attach) the variant's server when none runs; whether a server process was started."""
        if run.plan.url is not None and run.server is None:
            run.server = attach_server(run.plan, self._log_path(run), self._settings.request.timeout,
                                       self._live.detail)
        elif run.process is None and run.plan.url is None and run.kept is None:
            if self._kept is not None:
                return self._kept.start(run, lambda log_path: self._launch(run, log_path), fresh=fresh)
            self._launch(run, self._log_path(run))
            return True
        return False

    def _launch(self, run: VariantRun, log_path: Path) -> None:
        """Claim the variant's GPUs and boot its server, its log at `log_path`."""
        plan = self._gpus.claim(run, log_path)
        run.boots += 1
        if self._simulate:
            plan = replace(plan, env={**plan.env, SIM_BOOT_ENV: f"{run.name}#{run.boots}"})
        self._roofline.before_boot(plan.env.get("CUDA_VISIBLE_DEVICES"))  # only the GPUs claimed
        run.process, run.server = boot_server(plan, log_path, self._settings.startup_timeout,
                                              self._live.boot_progress(run.name),
                                              stop_grace=self._settings.stop_grace,
                                              pass_fds=() if run.claim is None else run.claim.fds)

    def _gpu_name(self, run: VariantRun) -> str | None:
        """The GPU model the server's cells are filed under: a remote server's as configured, else the host's."""
        if run.plan.url and not self._simulate:
            return run.variant.gpu or REMOTE_GPU
        return run.variant.gpu or next(iter(self._targets().names), None)

    def _log_path(self, run: VariantRun) -> Path:
        return self._logs.folder() / f"{run.name}.log"

    def _inspect(self, run: VariantRun) -> None:
        """Read what the new server really runs, compare it with what was asked and say so."""
        from pytest_sglang_perf.server.inspection import inspect_server

        assert run.server is not None
        earlier = [other.config for other in self._runs.values() if other.config is not None]
        run.config, run.startup = inspect_server(run.name, run.plan, run.server, self._parser(), earlier)
        self._live.booted(run)

    def report(self, error: BootError) -> str:
        """The failed boot's report, plus hints for the SGLang failures it matches."""
        parser = self._parser()
        hints = boot_hints(error.reason, error.log_lines, parser, parser.version)
        return error.report() + "".join(f"\nhint: {hint}" for hint in hints)

    def done(self, run: VariantRun) -> None:
        """The variant's tests are over: a kept server stays up for the next run (--sglang-reuse), any other stops."""
        if self._kept is None or run.kept is None or not self._kept.let_go(run):
            self.stop(run)

    def stop(self, run: VariantRun, *, keep_claim: bool = False) -> None:
        """Stop the variant's server tree, a kept one included; `keep_claim`: keep its GPUs for the boot that
        follows (a reboot), so that no other pytest-xdist worker takes them in between."""
        if run.process is not None:
            stop_server(run.process, self._live.detail)
            run.process = None
        if self._kept is not None:
            self._kept.forget(run)
        if not keep_claim:
            self._gpus.release(run)
