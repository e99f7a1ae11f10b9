"""The files a session writes at its end: the results file, the Markdown report (and the GitHub job summary),
the plots. Each is written only when asked for; a file that cannot be written is an error naming it and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_sglang_perf.config.run_options import RunOptions

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
"""The file a GitHub Actions step appends Markdown to, for the job's summary page."""


def write_outputs(document: Callable[[], dict[str, Any]], options: RunOptions, environ: Mapping[str, str], *,
                  measured: bool) -> list[str]:
    """Write every output asked for; returns what could not be written. `measured`: the session had perf tests
    (the job summary gets no report from a run without any)."""
    summary = environ.get(STEP_SUMMARY) or None
    wanted = options.results_path or options.markdown_path or options.plots_dir or (summary and measured)
    if not wanted:
        return []
    doc = document()
    errors = []
    if options.results_path is not None:
        errors += _attempt("--sglang-results", options.results_path, lambda: _results(options.results_path, doc))
    if options.markdown_path is not None or (summary and measured):
        errors += _markdown(doc, options.markdown_path, Path(summary) if summary and measured else None)
    if options.plots_dir is not None:
        errors += _attempt("--sglang-plots", options.plots_dir, lambda: _plots(options.plots_dir, doc))
    return errors


def _results(path: Path | None, doc: Mapping[str, Any]) -> None:
    from pytest_sglang_perf.gate.results_file import write_results

    assert path is not None
    write_results(path, doc)


def _markdown(doc: Mapping[str, Any], path: Path | None, summary: Path | None) -> list[str]:
    from pytest_sglang_perf.gate.jsonfile import atomic_write
    from pytest_sglang_perf.outputs.markdown import markdown_report

    text = markdown_report(doc)
    errors = []
    if path is not None:
        errors += _attempt("--sglang-markdown", path, lambda: _write_new(path, text, atomic_write))
    if summary is not None:
        errors += _attempt(f"${STEP_SUMMARY}", summary, lambda: _append(summary, text))
    return errors


def _write_new(path: Path, text: str, atomic_write: Callable[[Path, str], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def _append(path: Path, text: str) -> None:
    """GitHub's job summary is one file per step that every writer appends to: the report starts a paragraph of
    its own after what is there."""
    tail = _tail(path, 2)
    separator = "" if tail in (b"", b"\n\n") else "\n" if tail.endswith(b"\n") else "\n\n"
    with path.open("a", encoding="utf-8") as out:
        out.write(separator + (text if text.endswith("\n") else text + "\n"))


def _tail(path: Path, size: int) -> bytes:
    """The file's last `size` bytes (fewer when it is shorter; none when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - size))
            return handle.read()
    except FileNotFoundError:
        return b""


def _plots(directory: Path | None, doc: Mapping[str, Any]) -> None:
    from pytest_sglang_perf.plots.render import write_plots

    assert directory is not None
    write_plots([doc], directory)


def _attempt(what: str, path: Path, write: Callable[[], None]) -> list[str]:
    """[] when `write` worked, else the error line naming the option, the path and the cause."""
    try:
        write()
    except OSError as exc:
        return [f"{what} {path}: cannot be written ({exc.strerror or exc}); choose a path you can write to"]
    except ImportError as exc:
        return [f"{what} {path}: {exc}"]
    return []
