"""One test x variant across saved results files: each metric's geometric mean with its confidence interval per
file, oldest first (x: the file's date and commit), and the baseline median as a dashed line where there was one."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.plots import style
from pytest_sglang_perf.plots.ab import axis_panel, grid, has_baseline
from pytest_sglang_perf.plots.data import Estimate, HistoryFigure, Panel

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_PANEL_HEIGHT = 4.2


def draw_history(figure: HistoryFigure, path: Path, *, confidence: float, subtitle: Sequence[str]) -> Path:
    """Write the history PNG of one test x variant to `path`."""
    return style.save(history_figure(figure, confidence=confidence, subtitle=subtitle), path)


def history_figure(figure: HistoryFigure, *, confidence: float, subtitle: Sequence[str]) -> Figure:
    """One test x variant across results files: a panel per metric, a column per file."""
    runs = len(figure.labels)
    columns = 1 if runs > 5 else grid(len(figure.panels))[1]
    rows = math.ceil(len(figure.panels) / columns)
    width = max(5.2, 1.35 * runs + 1.6)
    simulated = any(figure.simulated)
    what = (f"variant {figure.variant} across {runs} results files, oldest first: geometric mean, whiskers: "
            f"{confidence * 100:g}% confidence interval")
    notes = ["each run is one server boot per variant"]
    if has_baseline(figure.panels):
        notes.insert(0, "dashed line: the baseline's median each run was compared with (where it had one)")
    if simulated and not all(figure.simulated):
        notes.append("red x labels: results files with SIMULATED numbers")
    header = style.Header(figure.test_id, [what, *subtitle], simulated)
    return style.panel_figure(width, _PANEL_HEIGHT, header, notes, (rows, columns), figure.panels,
                              lambda ax, panel: _panel(ax, panel, figure))


def _panel(ax: Axes, panel: Panel, figure: HistoryFigure) -> None:
    estimates = axis_panel(ax, panel)
    points = [(i, e) for i, e in enumerate(estimates) if e is not None]
    if points:
        xs, found = [i for i, _ in points], [e for _, e in points]
        ax.plot(xs, [e.center for e in found], color=style.colour(0), linewidth=1.2, alpha=0.6)
        ax.errorbar(xs, [e.center for e in found], yerr=_whiskers(found), fmt="o", color=style.colour(0),
                    markersize=7, capsize=7, elinewidth=2, capthick=2)
    for i, estimate in enumerate(estimates):
        if estimate is None:
            ax.annotate("n/a", (i, 0.5), xycoords=("data", "axes fraction"), ha="center", color=style.GREY)
    baselines = [math.nan if e is None or e.baseline is None else e.baseline for e in estimates]
    if any(not math.isnan(b) for b in baselines):
        ax.plot(range(len(baselines)), baselines, linestyle="--", color="black", linewidth=1.5, marker="_",
                markersize=14)
    ax.set_xticks(range(len(figure.labels)), figure.labels, fontsize=9)
    for label, simulated in zip(ax.get_xticklabels(), figure.simulated, strict=True):
        if simulated and not all(figure.simulated):
            label.set_color(style.RED)
    ax.set_xlim(-0.5, len(figure.labels) - 0.5)
    ax.grid(False, axis="x")


def _whiskers(estimates: Sequence[Estimate]) -> list[list[float]]:
    return [[e.center - e.low for e in estimates], [e.high - e.center for e in estimates]]
