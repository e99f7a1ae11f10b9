"""Where a regression is confirmed before it fails a test: on a fresh boot of its variant, or on the same server, as
`[tool.sglang_perf.gate] confirm` says (docs/verdicts.md, "Confirming a regression").

- `reboot`: stop the variant's server, boot it again, re-measure the regressed cell; the variant's later tests run on
  the new server. Guards against a slow boot: what a boot settles for its whole life (clocks, memory layout,
  autotuned kernels, a host that was busy while it loaded) makes a re-measure on the same server repeat the
  regression. Costs a boot per regressed cell.
- `same-server`: re-measure on the server that measured it. Guards against request noise and a disturbance that has
  passed, not against the boot; costs the re-measure only. The documented choice where a boot takes minutes.
- `auto` (the default): `reboot` when this run booted the variant's server in at most AUTO_REBOOT_SECONDS, else
  `same-server`. A remote server (--sglang-url) is never rebooted.

A boot metric (boot_seconds, graph_capture_seconds) is only ever confirmed by a boot, whatever the mode: by another
boot of the variant measured in this session (one a confirmation booted, say), else by a fresh boot. A result carries
the boot that measured it (Result.boot): when the variant's server was booted again since (a sweep's later level, a
confirmation of an earlier cell), its re-measure runs on that later boot, a fresh one, without booting again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pytest_sglang_perf.config.request import CONFIRM_AUTO, CONFIRM_REBOOT
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.values import BOOT_METRICS
from pytest_sglang_perf.session.variant_run import VariantRun

AUTO_REBOOT_SECONDS = 120.0
"""`confirm = "auto"` reboots a variant whose server booted in at most this long: the simulator, SGLang on a CPU, a
small model on a GPU; a large model that captures CUDA graphs for minutes is re-measured on the same server."""

BootMetrics = Mapping[str, tuple[float, ...]]
"""A boot's boot metrics, as measured (`boot_seconds`, `graph_capture_seconds`)."""


@dataclass(frozen=True)
class Plan:
    """Where one regression is re-measured."""

    reboot: bool
    """Stop the variant's server and boot it again first."""
    fresh: bool
    """The re-measure runs on another boot than the measurement's (booted for it, or since)."""
    other_boot: BootMetrics = field(default_factory=dict)
    """On the same server: another boot's boot metrics, which confirm the cell's ({}: none measured yet)."""


class Confirmation:
    def __init__(self, mode: str, reboot: Callable[[VariantRun], None]) -> None:
        self._mode = mode
        self._reboot = reboot
        self._boots: dict[str, dict[int, BootMetrics]] = {}
        """Per variant, per boot number (Result.boot): its boot metrics as measured."""

    def seen(self, result: Result) -> None:
        """Keep the boot metrics of the boot that measured `result` (each boot's are the same for all its cells)."""
        booted = {name: values for name, values in result.values.items() if name in BOOT_METRICS and values}
        if result.boot is not None and booted:
            self._boots.setdefault(result.variant, {}).setdefault(result.boot, booted)

    def plan(self, run: VariantRun, cell: Cell, result: Result) -> Plan:
        """Where the cell's regression (measured as `result`) is re-measured: on a fresh boot for its request
        metrics when the mode reboots, for its boot metrics when no other boot of the variant was measured; a
        variant whose server was booted again since the measurement is re-measured there, a fresh boot already."""
        if run.boot_error is not None:  # its last boot failed: booting again raises that failure, said once more
            return Plan(reboot=True, fresh=True)
        reused = run.kept is not None and run.kept.reused  # a kept server this run attached to: it may reboot it
        if run.plan.url is not None or (run.process is None and not reused):
            return Plan(reboot=False, fresh=False, other_boot=self.other_boot(run.name, result.boot))
        moved = result.boot is not None and result.boot != run.boots
        regressed = {c.metric for c in cell.checks if c.verdict is Verdict.REGRESSED}
        other = self.other_boot(run.name, result.boot)
        requests_fresh = bool(regressed - set(BOOT_METRICS)) and self.reboots(run)
        boots_fresh = bool(regressed & set(BOOT_METRICS)) and not other
        if moved or requests_fresh or boots_fresh:
            return Plan(reboot=not moved, fresh=True)
        return Plan(reboot=False, fresh=False, other_boot=other)

    def reboots(self, run: VariantRun) -> bool:
        """The mode for this variant: `reboot`, or `auto` and a boot that took at most AUTO_REBOOT_SECONDS."""
        if self._mode == CONFIRM_AUTO:
            return run.server is not None and run.server.boot_seconds <= AUTO_REBOOT_SECONDS
        return self._mode == CONFIRM_REBOOT

    def other_boot(self, variant: str, measured_on: int | None) -> BootMetrics:
        """The boot metrics of the variant's latest boot other than `measured_on` ({}: none measured)."""
        boots = self._boots.get(variant, {})
        others = [number for number in boots if number != measured_on]
        return boots[max(others)] if others else {}

    def reboot(self, run: VariantRun) -> None:
        """Stop the variant's server and boot it again (raises what the boot raises)."""
        self._reboot(run)
