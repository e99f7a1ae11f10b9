"""The picture of one test's concurrency sweep: a panel per metric (plots/sweep_data.py), each variant a line
against the streams sent at once (a log-2 axis with a tick per level measured)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.plots import style
from pytest_sglang_perf.plots.ab import grid
from pytest_sglang_perf.plots.sweep_data import SweepFigure, SweepPanel

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_PANEL_WIDTH, _PANEL_HEIGHT = 5.2, 3.9


def draw_sweep(figure: SweepFigure, path: Path, *, subtitle: Sequence[str]) -> Path:
    """Write the sweep PNG of one test to `path`."""
    return style.save(sweep_figure(figure, subtitle=subtitle), path)


def sweep_figure(figure: SweepFigure, *, subtitle: Sequence[str]) -> Figure:
    rows, columns = grid(len(figure.panels))
    header = style.Header(figure.test_id, ["concurrency sweep: each variant against the streams sent at once",
                                           *subtitle], figure.simulated)
    notes = ["a point per level measured (a cell of its own); throughputs and goodput are medians over rounds, "
             "percentiles are over every request of the cell"]
    variants = list(dict.fromkeys(line.variant for panel in figure.panels for line in panel.lines))
    levels = sorted({streams for panel in figure.panels for line in panel.lines for streams, _ in line.points})
    return style.panel_figure(_PANEL_WIDTH, _PANEL_HEIGHT, header, notes, (rows, columns), figure.panels,
                              lambda ax, panel: _panel(ax, panel, variants, levels))


def _panel(ax: Axes, panel: SweepPanel, variants: Sequence[str], levels: Sequence[int]) -> None:
    """The panel's lines on the figure's levels (every panel the same x axis, whichever levels it has values of)."""
    for line in panel.lines:
        xs, ys = zip(*line.points, strict=True)
        ax.plot(xs, ys, marker="o", markersize=6, linewidth=1.6, color=style.colour(variants.index(line.variant)),
                label=line.variant)
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(level) for level in levels])
    ax.set_xlim(levels[0] / 1.3, levels[-1] * 1.3)
    ax.minorticks_off()
    ax.set_xlabel("streams at once")
    ax.set_ylabel(panel.unit)
    ax.set_title(panel.title)
    ax.set_ylim(bottom=0)
    ax.legend(loc="best", frameon=False)
