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
boot of the variant already judged in this session (one a confirmation booted, say), else by a fresh boot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pytest_sglang_perf.config.request import CONFIRM_AUTO, CONFIRM_REBOOT
from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.measurement.values import BOOT_METRICS
from pytest_sglang_perf.session.variant_run import VariantRun

AUTO_REBOOT_SECONDS = 120.0
"""`confirm = "auto"` reboots a variant whose server booted in at most this long: the simulator, SGLang on a CPU, a
small model on a GPU; a large model that captures CUDA graphs for minutes is re-measured on the same server."""


class Confirmation:
    def __init__(self, mode: str, reboot: Callable[[VariantRun], None]) -> None:
        self._mode = mode
        self._reboot = reboot
        self._boots: dict[str, dict[int, dict[str, MetricCheck]]] = {}
        """Per variant, per boot number (VariantRun.boots): its boot metrics' checks, as first judged."""

    def seen(self, run: VariantRun, checks: tuple[MetricCheck, ...]) -> None:
        """Keep the boot metrics' checks of the variant's current boot (the first cell judged on it says them)."""
        booted = {c.metric: c for c in checks if c.metric in BOOT_METRICS and c.measured is not None}
        if booted:
            self._boots.setdefault(run.name, {}).setdefault(run.boots, booted)

    def on_fresh_boot(self, run: VariantRun, cell: Cell) -> bool:
        """Whether the cell's regression is re-measured on a fresh boot: its request metrics when the mode reboots,
        its boot metrics when no other boot of the variant was judged."""
        if run.plan.url is not None or run.process is None:
            return False
        regressed = {c.metric for c in cell.checks if c.verdict is Verdict.REGRESSED}
        if regressed - set(BOOT_METRICS) and self.reboots(run):
            return True
        return bool(regressed & set(BOOT_METRICS)) and not self.other_boot(run)

    def reboots(self, run: VariantRun) -> bool:
        """The mode for this variant: `reboot`, or `auto` and a boot that took at most AUTO_REBOOT_SECONDS."""
        if self._mode == CONFIRM_AUTO:
            return run.server is not None and run.server.boot_seconds <= AUTO_REBOOT_SECONDS
        return self._mode == CONFIRM_REBOOT

    def other_boot(self, run: VariantRun) -> Mapping[str, MetricCheck]:
        """The boot metrics' checks of the variant's latest other boot judged in this session ({}: none)."""
        boots = self._boots.get(run.name, {})
        others = [number for number in boots if number != run.boots]
        return boots[max(others)] if others else {}

    def reboot(self, run: VariantRun) -> None:
        """Stop the variant's server and boot it again (raises what the boot raises)."""
        self._reboot(run)
