"""Draw the plots of results documents into a folder: per test the A/B picture (ab__<test>.png), per concurrency
sweep its levels (sweep__<test>.png) and the boot timeline (boot.png) of the newest document, and with 2+ documents
each test x variant's history (history__<test>__<variant>.png). File names are stable slugs of the test ids and
variants.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.ab import DEFAULT_CONFIDENCE
from pytest_sglang_perf.plots.data import (
    ab_figures,
    by_time,
    cells_of,
    history_figures,
    run_commit,
    run_date,
)
from pytest_sglang_perf.plots.style import require_matplotlib
from pytest_sglang_perf.plots.sweep_data import sweep_figures
from pytest_sglang_perf.plots.timeline import boot_bars

BOOT_FILE = "boot.png"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SLUG_MAX = 80


def write_plots(docs: Sequence[Mapping[str, Any]], out_dir: Path, *,
                confidence: float = DEFAULT_CONFIDENCE) -> list[Path]:
    """The PNG files written for these results documents (oldest first; ordered again by generated_at): the A/B
    picture per test, the picture of each concurrency sweep and the boot timeline of the newest, and the history
    of each test x variant across them all when there are 2+. Nothing is drawn for documents without cells.
    Raises ImportError (naming the install command) without matplotlib, OSError when `out_dir` cannot be written,
    ValueError for a malformed sample."""
    require_matplotlib()
    runs = by_time(docs)
    if not any(cells_of(doc) for doc in runs):
        return []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    newest = [doc for doc in runs if cells_of(doc)][-1]
    written = _ab(newest, out_dir, confidence) + _sweeps(newest, out_dir) + _boot(newest, out_dir)
    if len(runs) > 1:
        written += _history(runs, out_dir, confidence)
    return written


def _ab(doc: Mapping[str, Any], out_dir: Path, confidence: float) -> list[Path]:
    from pytest_sglang_perf.plots.ab import draw_ab

    figures = ab_figures(doc, confidence)
    names = slugs([figure.test_id for figure in figures])
    return [draw_ab(figure, out_dir / f"ab__{names[figure.test_id]}.png", confidence=confidence,
                    subtitle=[subtitle(doc)]) for figure in figures]


def _sweeps(doc: Mapping[str, Any], out_dir: Path) -> list[Path]:
    from pytest_sglang_perf.plots.sweep import draw_sweep

    figures = sweep_figures(doc)
    names = slugs([figure.test_id for figure in figures])
    return [draw_sweep(figure, out_dir / f"sweep__{names[figure.test_id]}.png", subtitle=[subtitle(doc)])
            for figure in figures]


def _boot(doc: Mapping[str, Any], out_dir: Path) -> list[Path]:
    from pytest_sglang_perf.plots.boot import draw_boot

    bars = boot_bars(doc)
    if not bars:
        return []
    return [draw_boot(bars, out_dir / BOOT_FILE, subtitle=[subtitle(doc)], simulated=bool(doc.get("simulated")))]


def _history(runs: Sequence[Mapping[str, Any]], out_dir: Path, confidence: float) -> list[Path]:
    from pytest_sglang_perf.plots.history import draw_history

    figures = history_figures(runs, confidence)
    tests = slugs([figure.test_id for figure in figures])
    variants = slugs([figure.variant for figure in figures])
    model = _model(runs[-1])
    return [draw_history(figure, out_dir / f"history__{tests[figure.test_id]}__{variants[figure.variant]}.png",
                         confidence=confidence, subtitle=[model] if model else [])
            for figure in figures]


def subtitle(doc: Mapping[str, Any]) -> str:
    """The model and the results file's date and commit, on one line."""
    commit = run_commit(doc)
    parts = [_model(doc), f"results of {run_date(doc)}" + (f", commit {commit}" if commit else "")]
    return " | ".join(part for part in parts if part)


def _model(doc: Mapping[str, Any]) -> str:
    environment = doc.get("environment")
    model = environment.get("model") if isinstance(environment, Mapping) else None
    return f"model {model}" if isinstance(model, str) and model else ""


def slug(text: str) -> str:
    """A safe file-name part: runs of anything but letters, digits, '.', '_' and '-' become one '-'; a long one is
    cut and ends with a hash of the whole text."""
    cleaned = _UNSAFE.sub("-", text).strip("-.") or "unnamed"
    if len(cleaned) <= _SLUG_MAX:
        return cleaned
    return f"{cleaned[:_SLUG_MAX - 13].rstrip('-.')}-{_digest(text)}"


def slugs(texts: Sequence[str]) -> dict[str, str]:
    """Each distinct text's slug; texts whose slugs would be the same get a hash of the text each, so no file
    overwrites another."""
    distinct = list(dict.fromkeys(texts))
    plain = {text: slug(text) for text in distinct}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    return {text: name if counts[name] == 1 else f"{name}-{_digest(text)}" for text, name in plain.items()}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]
