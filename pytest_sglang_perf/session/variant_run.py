"""One variant's run in this session: its plan, its tests, its server and what the server really ran.

Plain data (no pytest, no I/O): the session (session/facade.py) creates one VariantRun per variant its tests use and
updates it as the variant is checked, booted, inspected and stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_sglang_perf.config.settings import Variant
from pytest_sglang_perf.server.plan import ServerPlan

if TYPE_CHECKING:
    from pytest_sglang_perf.server.boot import RunningServer
    from pytest_sglang_perf.server.effective import EffectiveConfig
    from pytest_sglang_perf.server.gpu_claims import GpuClaim
    from pytest_sglang_perf.server.launcher import BootError, ServerProcess
    from pytest_sglang_perf.server.startup import StartupFacts
    from pytest_sglang_perf.session.identity import ServerPlace
    from pytest_sglang_perf.session.kept_use import KeptUse


@dataclass
class VariantRun:
    variant: Variant
    plan: ServerPlan
    tests: list[str] = field(default_factory=list)
    """Node ids of the variant's tests, in run order (after deselection)."""
    preflight_errors: list[str] = field(default_factory=list)
    """Pre-flight errors: the variant's server is never started, its tests fail."""
    process: ServerProcess | None = None
    """The server process while it runs."""
    server: RunningServer | None = None
    """The variant's server as its tests see it (kept after it stops, for the reports)."""
    claim: GpuClaim | None = None
    """The GPUs claimed for the server while it runs (server/gpu_claims.py); None when nothing was claimed."""
    default_gpus: tuple[int, ...] = ()
    """The host GPUs SGLang picks for the server when no CUDA_VISIBLE_DEVICES names them: base GPU id plus each of
    its tp x pp x dp ranks times the GPU id step (session/gpus.py); () when not known."""
    boots: int = 0
    """Server boots started in this session (the first is 1)."""
    boot_error: BootError | None = None
    """The failed boot: every later test of the variant fails with its report, none boots again."""
    config: EffectiveConfig | None = None
    """What the server really ran, read once after its first boot."""
    startup: StartupFacts | None = None
    """What the server's first boot logged about its startup costs."""
    kept: KeptUse | None = None
    """The server as a kept one (--sglang-reuse, session/kept.py): booted by this run and kept, or reused."""
    place: ServerPlace | None = None
    """What the server is (model, GPUs used, resolved args) and its baseline file key, for its cells' identities;
    set when it is first booted or attached (session/identity.py)."""

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def last_test(self) -> str | None:
        return self.tests[-1] if self.tests else None
