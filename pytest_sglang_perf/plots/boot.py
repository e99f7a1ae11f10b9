"""The boot timeline: one horizontal stacked bar per variant, its server's logged boot steps (weights, KV cache,
graph capture per phase) and the rest until ready, with what SGLang did not log said in words."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.plots import style
from pytest_sglang_perf.plots.timeline import GRAPHS, KV_CACHE, OTHER, WEIGHTS, BootBar, Segment

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_KIND_COLOURS = {WEIGHTS: "#4e79a7", KV_CACHE: "#f28e2b", OTHER: "#c9c3bf"}
_GRAPH_COLOURS = ("#59a14f", "#8cd17d", "#499894", "#86bcb6", "#b6992d", "#f1ce63", "#9c755f", "#d4a6c8")
_BAR_IN = 0.75
_WIDTH = 12.0
_LEGEND_COLUMNS = 4
NOTES = (
    "steps: SGLang's own startup timings from the server log (weights, KV cache, CUDA-graph capture per phase), "
    "in that order",
    "'other, until ready': launch -> ready as the plugin timed it, less the logged steps (process start, imports, "
    "warm-up); a step SGLang did not log is said so, never estimated",
)


def draw_boot(bars: Sequence[BootBar], path: Path, *, subtitle: Sequence[str], simulated: bool) -> Path:
    """Write the boot timeline PNG of these variants to `path`."""
    return style.save(boot_figure(bars, subtitle=subtitle, simulated=simulated), path)


def boot_figure(bars: Sequence[BootBar], *, subtitle: Sequence[str], simulated: bool) -> Figure:
    """One horizontal stacked bar per variant: its logged boot steps and the rest until ready."""
    header = style.Header("Server boot timeline", ["each variant's server boot, launch -> ready", *subtitle], simulated)
    colours = _colours(bars)
    height = _BAR_IN * len(bars) + 1.1 + 0.3 * math.ceil(len(colours) / _LEGEND_COLUMNS)
    with style.drawing():
        fig = style.new_figure(_WIDTH, height, header, NOTES)
        ax = fig.subplots()
        for row, bar in enumerate(bars):
            _bar(ax, row, bar, colours)
        ax.set_yticks(range(len(bars)), [bar.variant for bar in bars])
        ax.set_ylim(len(bars) - 0.5, -0.5)  # first variant on top; a row without a bar keeps its place
        ax.set_xlabel("seconds from launch")
        ax.grid(False, axis="y")
        longest = max((_end(bar) for bar in bars), default=0.0) or 1.0
        ax.set_xlim(0, longest * 1.65)
        handles = _legend_handles(colours)
        if handles:
            ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                      ncols=min(len(handles), _LEGEND_COLUMNS), frameon=False)
    return fig


def _colours(bars: Sequence[BootBar]) -> dict[str, str]:
    """A colour per step label: one per kind, a distinct one per graph phase."""
    colours: dict[str, str] = {}
    graphs = 0
    for segment in (s for bar in bars for s in bar.segments):
        if segment.label in colours:
            continue
        if segment.kind == GRAPHS:
            colours[segment.label] = _GRAPH_COLOURS[graphs % len(_GRAPH_COLOURS)]
            graphs += 1
        else:
            colours[segment.label] = _KIND_COLOURS[segment.kind]
    return colours


def _end(bar: BootBar) -> float:
    return max(bar.total or 0.0, sum(s.seconds for s in bar.segments))


def _bar(ax: Axes, row: int, bar: BootBar, colours: dict[str, str]) -> None:
    left = 0.0
    for segment in bar.segments:
        ax.barh(row, segment.seconds, left=left, height=0.6, color=colours[segment.label], edgecolor="white")
        _segment_text(ax, row, left, segment, _end(bar))
        left += segment.seconds
    ax.annotate(_side_text(bar), (_end(bar), row), xytext=(8, 0), textcoords="offset points", ha="left",
                va="center", fontsize=10)


def _segment_text(ax: Axes, row: int, left: float, segment: Segment, total: float) -> None:
    """The seconds inside a segment wide enough to hold them."""
    if total <= 0 or segment.seconds / total < 0.07:
        return
    ax.text(left + segment.seconds / 2, row, f"{segment.seconds:.2f} s", ha="center", va="center", fontsize=9,
            color="black")


def _side_text(bar: BootBar) -> str:
    lines = [f"ready in {bar.total:.2f} s" if bar.total is not None else "ready time: not logged"]
    steps = _step_sums(bar)
    if steps:
        lines.append(", ".join(steps))
    missing = [step for step in bar.not_logged if step != "ready time"]
    if missing:
        lines.append(f"not logged: {', '.join(missing)}")
    if bar.note:
        lines.append(bar.note)
    return "\n".join(lines)


def _step_sums(bar: BootBar) -> list[str]:
    """'weights 0.20 s', 'KV cache 0.05 s', 'graphs 0.16 s': the logged steps by kind, for the narrow segments."""
    names = {WEIGHTS: "weights", KV_CACHE: "KV cache", GRAPHS: "graphs"}
    sums: dict[str, float] = {}
    for segment in bar.segments:
        if segment.kind in names:
            sums[segment.kind] = sums.get(segment.kind, 0.0) + segment.seconds
    return [f"{names[kind]} {seconds:.2f} s" for kind, seconds in sums.items()]


def _legend_handles(colours: dict[str, str]) -> list[Artist]:
    from matplotlib.patches import Patch

    return [Patch(color=colour, label=label) for label, colour in colours.items()]
