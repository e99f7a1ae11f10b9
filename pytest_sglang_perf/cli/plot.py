"""`sglang-perf plot RESULTS... -o DIR`: draw the plots of results files (PNG) and print each file written.

Exit codes: 0 plots written; 1 a results file has no cells (nothing measured: said on stderr, the other files are
still drawn); 2 a bad input (a file that is not a results file, a bad --confidence, matplotlib missing, a folder
that cannot be written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.ab import DEFAULT_CONFIDENCE

PROG = "sglang-perf plot"


def add_plot_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `plot` subcommand and its options."""
    plot = sub.add_parser(
        "plot", help="draw PNG plots of results files: A/B with confidence intervals, sweeps, boot timelines, "
                     "history",
        description="Draws, from results files (pytest --sglang-results PATH): per test, the variants side by side "
                    "with confidence intervals (ab__<test>.png), each concurrency sweep's levels "
                    "(sweep__<test>.png) and each variant's server boot (boot.png), all of the newest file; with "
                    "two or more files, each test x variant across them, oldest first "
                    "(history__<test>__<variant>.png). Needs matplotlib: pip install 'pytest-sglang-perf[plots]'.",
    )
    plot.add_argument("results", type=Path, nargs="+", metavar="RESULTS", help="results files, in any order "
                      "(they are ordered by the time they were written)")
    plot.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                      help="folder to write the PNG files into (created if needed; files of the same name are "
                           "replaced)")
    plot.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE, metavar="LEVEL",
                      help=f"confidence level of the intervals, between 0 and 1 (default: {DEFAULT_CONFIDENCE})")


def plot_command(ns: argparse.Namespace) -> int:
    """Run `sglang-perf plot`; the exit code (see the module docstring)."""
    from pytest_sglang_perf.gate.results_read import ResultsFileError

    if not 0 < ns.confidence < 1:
        return _fail(f"--confidence must be between 0 and 1, e.g. 0.95; got {ns.confidence:g}")
    try:
        docs = [(path, read_document(path)) for path in ns.results]
    except ResultsFileError as exc:
        return _fail(str(exc))
    empty = [path for path, doc in docs if not doc["cells"]]
    for path in empty:
        print(f"{PROG}: results file {path}: no cells (no test measured anything): nothing to plot from it",
              file=sys.stderr)
    drawn = [doc for _, doc in docs if doc["cells"]]
    if not drawn:
        return 1
    written = _write(drawn, ns.output, ns.confidence)
    if isinstance(written, int):
        return written
    for path in written:
        print(path)
    return 1 if empty else 0


def read_document(path: Path) -> dict[str, Any]:
    """A results file as a document; raises ResultsFileError naming the file, the problem and the fix.

    gate/results_read.py checks it (JSON, schema version, cells and their samples) before it is used whole."""
    from pytest_sglang_perf.gate.results_read import read_results_document

    return read_results_document(path)


def _write(docs: list[dict[str, Any]], out_dir: Path, confidence: float) -> list[Path] | int:
    from pytest_sglang_perf.plots.render import write_plots

    try:
        written = write_plots(docs, out_dir, confidence=confidence)
    except ImportError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"-o {out_dir}: cannot be written ({exc.strerror or exc}); choose a folder you can write to")
    if not written:
        print(f"{PROG}: nothing to plot: no cell of these results files has samples", file=sys.stderr)
        return 1
    return written


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2
