"""The A/B picture of one test: its variants side by side, one panel per metric, each variant's geometric mean with
its confidence interval, the baseline median where the cell had one, and each variant's change against the
reference variant (coloured when the interval excludes 0)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.plots import style
from pytest_sglang_perf.plots.data import AbFigure, Change, Estimate, Panel

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_PANEL_HEIGHT = 3.9
_MAX_WIDTH = 24.0
"""Inches: many variants make wide panels, so fewer of them go side by side."""
_HEADROOM = 0.55
"""How much of the data's span is kept free above it for the change texts."""


def grid(panels: int, max_columns: int = 3) -> tuple[int, int]:
    """(rows, columns) for this many panels: 2 columns for 2 or 4, else up to 3; never over `max_columns`."""
    columns = max(min(2 if panels in (2, 4) else min(panels, 3), max_columns), 1)
    return math.ceil(panels / columns), columns


def draw_ab(figure: AbFigure, path: Path, *, confidence: float, subtitle: Sequence[str]) -> Path:
    """Write the A/B PNG of one test to `path`."""
    return style.save(ab_figure(figure, confidence=confidence, subtitle=subtitle), path)


def ab_figure(figure: AbFigure, *, confidence: float, subtitle: Sequence[str]) -> Figure:
    """The A/B picture of one test: a panel per metric, the variants side by side."""
    width = max(4.6, 1.45 * len(figure.variants) + 1.4)
    rows, columns = grid(len(figure.panels), max_columns=max(1, int(_MAX_WIDTH // width)))
    what = f"geometric mean per variant, whiskers: {confidence * 100:g}% confidence interval"
    header = style.Header(figure.test_id, [what, *subtitle], figure.simulated)
    return style.panel_figure(width, _PANEL_HEIGHT, header, _notes(figure, confidence), (rows, columns),
                              figure.panels, lambda ax, panel: _panel(ax, panel, figure))


def _notes(figure: AbFigure, confidence: float) -> list[str]:
    notes = []
    if has_baseline(figure.panels):
        notes.append("dashed line: the baseline's median (where the cell was compared with a baseline)")
    if figure.reference is not None:
        notes.append(f"text: change of the geometric mean against '{figure.reference}' with its {confidence * 100:g}% "
                     "interval; green: better, red: worse, grey: not significant (the interval holds 0)")
        notes.append("each variant is one server boot: boot-to-boot spread is not in these intervals")
    if figure.missing:
        notes.append(f"no samples (not drawn): {', '.join(figure.missing)}")
    return notes


def has_baseline(panels: Sequence[Panel]) -> bool:
    """Whether any estimate of these panels has a baseline median to draw."""
    return any(e is not None and e.baseline is not None for panel in panels for e in panel.estimates)


def axis_panel(ax: Axes, panel: Panel) -> tuple[Estimate | None, ...]:
    """Title and y label of a metric's panel; returns its estimates in the unit shown (ms for short seconds)."""
    values = [v for e in panel.estimates if e is not None for v in (e.high, e.baseline) if v is not None]
    unit, factor = style.display_unit(panel.unit, values)
    title = f"{panel.metric} ({unit})" if unit else panel.metric
    ax.set_title(f"{title}\n{panel.better}" if panel.better else title)
    ax.set_ylabel(unit or "value")
    return tuple(None if e is None else e.scaled(factor) for e in panel.estimates)


def _panel(ax: Axes, panel: Panel, figure: AbFigure) -> None:
    estimates = axis_panel(ax, panel)
    for i, estimate in enumerate(estimates):
        if estimate is None:
            ax.annotate("n/a", (i, 0.5), xycoords=("data", "axes fraction"), ha="center", color=style.GREY)
            continue
        _point(ax, i, estimate)
    for i, found in enumerate(panel.changes):
        if found is not None:
            _change_text(ax, i, found)
    ax.set_xticks(range(len(figure.variants)), [_tick(v, e) for v, e in zip(figure.variants, estimates, strict=True)])
    ax.set_xlim(-0.6, len(figure.variants) - 0.4)
    ax.grid(False, axis="x")
    _limits(ax, [e for e in estimates if e is not None], headroom=bool(panel.changes))


def _point(ax: Axes, i: int, estimate: Estimate) -> None:
    colour = style.colour(i)
    below, above = estimate.center - estimate.low, estimate.high - estimate.center
    ax.errorbar([i], [estimate.center], yerr=[[below], [above]], fmt="o", color=colour, markersize=8,
                capsize=10, elinewidth=2.2, capthick=2.2)
    if estimate.baseline is not None:
        ax.hlines(estimate.baseline, i - 0.32, i + 0.32, colors="black", linestyles="--", linewidth=1.6)


def _change_text(ax: Axes, i: int, found: Change) -> None:
    colour = {"better": style.GREEN, "worse": style.RED}.get(found.verdict, style.GREY)
    text = f"{style.percent(found.change)}\n[{style.percent(found.low)}, {style.percent(found.high)}]\n{found.verdict}"
    ax.annotate(text, (i, 0.97), xycoords=("data", "axes fraction"), ha="center", va="top", fontsize=9,
                color=colour, fontweight="bold" if found.verdict != "not significant" else "normal")


def _tick(variant: str, estimate: Estimate | None) -> str:
    name = variant if len(variant) <= 16 else variant.replace("_", "_\n", 1)
    return f"{name}\nn={estimate.n}" if estimate is not None else name


def _limits(ax: Axes, estimates: Sequence[Estimate], *, headroom: bool) -> None:
    """Y limits around the intervals and baselines, with room above for the change texts."""
    values = [v for e in estimates for v in (e.low, e.high, e.baseline) if v is not None]
    if not values:
        return
    low, high = min(values), max(values)
    span = high - low or abs(high) * 0.05 or 1.0
    ax.set_ylim(low - 0.15 * span, high + (_HEADROOM if headroom else 0.15) * span)
