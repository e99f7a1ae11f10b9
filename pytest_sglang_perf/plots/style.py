"""What every plot shares: matplotlib, imported only here and only when drawing (an optional extra), readable sizes,
the header (title, subtitle, SIMULATED in red with a watermark), the footnotes and the PNG file.

Figures are made with matplotlib's object API on the Agg canvas: no pyplot, no window, no global backend switch
in the process that draws (a pytest session may use matplotlib itself).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

P = TypeVar("P")

MATPLOTLIB_MISSING = "plots need matplotlib: pip install 'pytest-sglang-perf[plots]'"
SIMULATED_LINE = "SIMULATED: numbers from the plugin's simulator, not from SGLang on a GPU"
WATERMARK = "SIMULATED"
RED = "#c0392b"
GREEN = "#1e8449"
GREY = "#566573"
VARIANT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
MIN_WIDTH = 8.0
"""Inches: a figure of one panel still has room for its header lines."""
_TITLE_SIZE, _TITLE_MIN, _TITLE_LINE_IN = 15.0, 11.0, 0.3
_LINE_IN = 0.28
_FOOT_LINE_IN = 0.22
_DPI = 110
_CHAR_EM = 0.62
"""A generous average character width of DejaVu Sans (bold), in ems: for fitting a header line."""
_TITLE_BREAKS = ("::", "[", "/", "-", "_", "=")
"""Where a long test id is best broken, in order of preference (the break goes before the mark)."""


@dataclass(frozen=True)
class Header:
    """The text above the panels: a bold title (a test id), grey lines, and SIMULATED when the numbers are."""

    title: str
    lines: Sequence[str] = ()
    simulated: bool = False


def require_matplotlib() -> None:
    """ImportError with the install command when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(MATPLOTLIB_MISSING) from None


@contextmanager
def drawing() -> Iterator[None]:
    """The house font sizes and grid for the figures made inside."""
    import matplotlib

    with matplotlib.rc_context({
        "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "xtick.labelsize": 10, "ytick.labelsize": 10,
        "legend.fontsize": 10, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
        "axes.spines.right": False, "figure.facecolor": "white", "axes.formatter.useoffset": False,
    }):
        yield


def new_figure(width: float, height: float, header: Header, notes: Sequence[str] = ()) -> Figure:
    """A figure on the Agg canvas with its header and footnotes written; `height` inches are left between them
    for the panels (laid out by matplotlib's constrained layout)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    width = max(width, MIN_WIDTH)
    titles = title_rows(header.title, width)
    notes = [line for note in notes for line in wrap(note, wrap_width(width))]
    top = _TITLE_LINE_IN * len(titles) + 0.12 + _LINE_IN * (len(header.lines) + header.simulated) + 0.1
    bottom = _FOOT_LINE_IN * len(notes) + (0.05 if notes else 0.0)
    full = height + top + bottom
    layout = ConstrainedLayoutEngine(rect=(0.0, bottom / full, 1.0, height / full))
    figure = Figure(figsize=(width, full), layout=layout)
    FigureCanvasAgg(figure)
    _header(figure, titles, header)
    _footnotes(figure, notes)
    return figure


def panel_figure(width: float, height: float, header: Header, notes: Sequence[str], grid: tuple[int, int],
                 panels: Sequence[P], draw: Callable[[Axes, P], None]) -> Figure:
    """A figure of `panels` on a rows x columns grid, each drawn by `draw`; the unused cells are hidden."""
    rows, columns = grid
    with drawing():
        figure = new_figure(width * columns, height * rows, header, notes)
        axes = figure.subplots(rows, columns, squeeze=False).flatten()
        for ax, panel in zip(axes, panels, strict=False):
            draw(ax, panel)
        for ax in axes[len(panels):]:
            ax.set_visible(False)
    return figure


def title_rows(title: str, width_in: float) -> list[str]:
    """The title on one line when it fits at a readable size, else broken at its natural marks (`::`, `[`, ...)."""
    if _fitting(title, width_in, _TITLE_SIZE) >= _TITLE_MIN:
        return [title]
    room = max(20, int(width_in * 0.96 * 72 / (_TITLE_MIN * _CHAR_EM)))
    rows, rest = [], title
    while len(rest) > room:
        cut = next((at for at in (rest.rfind(mark, 1, room) for mark in _TITLE_BREAKS) if at > room // 2), room)
        rows.append(rest[:cut])
        rest = rest[cut:]
    return [*rows, rest]


def _header(figure: Figure, titles: Sequence[str], header: Header) -> None:
    height, width = figure.get_figheight(), figure.get_figwidth()
    y = 0.08
    size = max(min(_fitting(row, width, _TITLE_SIZE) for row in titles), _TITLE_MIN)
    for row in titles:
        figure.text(0.5, 1 - y / height, row, ha="center", va="top", fontweight="bold", fontsize=size)
        y += _TITLE_LINE_IN
    y += 0.12
    for line in header.lines:
        figure.text(0.5, 1 - y / height, line, ha="center", va="top", fontsize=_fitting(line, width, 11), color=GREY)
        y += _LINE_IN
    if header.simulated:
        figure.text(0.5, 1 - y / height, SIMULATED_LINE, ha="center", va="top",
                    fontsize=_fitting(SIMULATED_LINE, width, 12), fontweight="bold", color=RED)
        figure.text(0.5, 0.45, WATERMARK, ha="center", va="center", fontsize=72, fontweight="bold", color=RED,
                    alpha=0.08, rotation=25, zorder=0)


def _fitting(text: str, width_in: float, size: float) -> float:
    """`size`, or the smaller size (down to 7 points) at which `text` fits across the figure."""
    needed_in = len(text) * size * _CHAR_EM / 72
    return size if needed_in <= width_in * 0.96 else max(7.0, size * width_in * 0.96 / needed_in)


def _footnotes(figure: Figure, lines: Sequence[str]) -> None:
    """Small grey lines at the bottom left (what the marks mean, where the numbers come from)."""
    height = figure.get_figheight()
    for i, line in enumerate(lines):
        figure.text(0.01, (_FOOT_LINE_IN * (len(lines) - i) - 0.04) / height, line, ha="left", va="top",
                    fontsize=9, color=GREY)


def wrap(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def wrap_width(width_in: float) -> int:
    """About how many characters of a 9-point footnote fit across a figure this wide."""
    return max(60, int(width_in * 13))


def display_unit(unit: str, values: Sequence[float]) -> tuple[str, float]:
    """The unit to label an axis with and the factor to multiply values by: seconds below 1 are shown in ms."""
    if unit == "s" and values and max(abs(v) for v in values) < 1.0:
        return "ms", 1000.0
    return unit, 1.0


def percent(value: float) -> str:
    """'+1.2%'; a change that rounds to 0 is '+0.0%', never '-0.0%'."""
    shown = round(value * 100, 1)
    return f"{shown if shown != 0 else 0.0:+.1f}%"


def colour(index: int) -> str:
    """The colour of the index-th variant (cycling)."""
    return VARIANT_COLOURS[index % len(VARIANT_COLOURS)]


def save(figure: Figure, path: Path) -> Path:
    """Write the figure as a PNG at `path` (its folder must exist)."""
    figure.savefig(path, format="png", dpi=_DPI, facecolor="white")
    return path
