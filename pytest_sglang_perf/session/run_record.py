"""What the session hands the report wing (report/) at its end: records, never the session object.

`RunRecord` is what the terminal summary is made of (cheap: made at every run's end); `DocumentRecord` adds what the
results document needs beyond it (the entries each cell offers, the commit, the baseline counts), made only when a
file is written or an xdist worker hands its part over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_sglang_perf.gate.results_file import CellRecord, measured_cells
from pytest_sglang_perf.gate.statistics import BootSpread
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.outputs.machine import Commit
from pytest_sglang_perf.session.variant_run import VariantRun

if TYPE_CHECKING:
    from pytest_sglang_perf.hardware.probe import ProbeReport


@dataclass(frozen=True)
class RunRecord:
    variants: tuple[str, ...]
    """The matrix's variants this run uses, in matrix order."""
    runs: tuple[VariantRun, ...]
    """The variants the tests used, in run order."""
    records: tuple[CellRecord, ...]
    """Every checked cell in order, with what it was judged on."""
    simulated: bool
    verbosity: int
    results_path: Path | None
    confidence: float
    """The A/B comparisons' confidence level ([tool.sglang_perf.gate])."""
    logs_path: Path
    baseline_lines: tuple[str, ...]
    """What the run did to the baselines, in words (gate/ledger.py)."""
    probe: ProbeReport | None
    tolerances: Mapping[str, float] = field(default_factory=dict)
    """Each metric's configured tolerance ([tool.sglang_perf.tolerance]): an A/B's allowance within one boot."""
    more_boots: Mapping[tuple[str, str], tuple[Result, ...]] = field(default_factory=dict)
    """Each cell's re-measures on further boots, by (test id, variant): the A/B between boots (ab_rounds.py)."""
    spreads: Mapping[tuple[str, str], Mapping[str, BootSpread]] = field(default_factory=dict)
    """Each cell's recorded boot spread per metric, where its baseline has several boots: the A/B within one boot
    each (session/baselines.py recorded_spreads)."""

    @property
    def results(self) -> dict[tuple[str, str], Result]:
        """Each cell's measurement by (test id, variant), for the A/B comparisons (a test's last check)."""
        return measured_cells(self.records)


@dataclass(frozen=True)
class DocumentRecord:
    run: RunRecord
    offered: tuple[CellRecord, ...]
    """The records with the baseline entry each offers `sglang-perf baseline accept`, or why it offers none."""
    environment: Mapping[str, Any]
    commit: Commit
    baselines: Mapping[str, Any]
    """What the run did to the baselines, counted (gate/ledger.py)."""
