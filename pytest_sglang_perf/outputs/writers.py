"""The files a session writes at its end: the results file, the Markdown report (and the GitHub job summary),
the plots. Each is written only when asked for; a file that cannot be written is an error naming it and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_sglang_perf.config.run_options import RunOptions

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
"""The file a GitHub Actions step appends Markdown to, for the job's summary page."""


def missing_requirement(options: RunOptions) -> str | None:
    """Why an output asked for cannot be made here (said before any server boots, not after the run); None: fine."""
    if options.plots_dir is None:
        return None
    from pytest_sglang_perf.plots.style import require_matplotlib

    try:
        require_matplotlib()
    except ImportError as exc:
        return f"--sglang-plots {options.plots_dir}: {exc}; or leave out --sglang-plots"
    return None


@dataclass
class Outputs:
    """What the end of a session wrote (one line each, for the summary) and what it could not write."""

    written: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def attempt(self, what: str, path: Path, write: Callable[[], str]) -> None:
        """Run `write` (it returns what it wrote, in words); an error names the option, the path and the cause."""
        try:
            self.written.append(write())
        except OSError as exc:
            self.errors.append(f"{what} {path}: cannot be written ({exc.strerror or exc}); choose a path you can "
                               "write to")
        except ImportError as exc:
            self.errors.append(f"{what} {path}: {exc}")


def outputs_wanted(options: RunOptions, environ: Mapping[str, str], *, measured: bool) -> bool:
    """Whether the session writes any file at its end (then it builds its results document)."""
    summary = bool(environ.get(STEP_SUMMARY)) and measured
    return bool(options.results_path or options.markdown_path or options.plots_dir or summary)


def write_outputs(document: Callable[[], dict[str, Any]], options: RunOptions, environ: Mapping[str, str], *,
                  measured: bool) -> Outputs:
    """Write every output asked for. `measured`: the session had perf tests (the job summary gets no report from a
    run without any)."""
    summary = Path(environ[STEP_SUMMARY]) if environ.get(STEP_SUMMARY) and measured else None
    outputs = Outputs()
    if not outputs_wanted(options, environ, measured=measured):
        return outputs
    doc = document()
    if options.results_path is not None:
        results = options.results_path
        outputs.attempt("--sglang-results", results, lambda: _results(results, doc))
    if options.markdown_path is not None or summary is not None:
        _markdown(outputs, doc, options.markdown_path, summary)
    if options.plots_dir is not None:
        plots = options.plots_dir
        outputs.attempt("--sglang-plots", plots, lambda: _plots(plots, doc))
    return outputs


def _results(path: Path, doc: Mapping[str, Any]) -> str:
    from pytest_sglang_perf.gate.results_file import write_results

    write_results(path, doc)
    return f"results {path}"


def _markdown(outputs: Outputs, doc: Mapping[str, Any], path: Path | None, summary: Path | None) -> None:
    from pytest_sglang_perf.outputs.markdown import markdown_report

    text = markdown_report(doc)
    if path is not None:
        outputs.attempt("--sglang-markdown", path, lambda: _write_new(path, text))
    if summary is not None:
        outputs.attempt(f"${STEP_SUMMARY}", summary, lambda: _append(summary, text))


def _write_new(path: Path, text: str) -> str:
    from pytest_sglang_perf.gate.jsonfile import atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    return f"Markdown report {path}"


def _append(path: Path, text: str) -> str:
    """GitHub's job summary is one file per step that every writer appends to: the report starts a paragraph of
    its own after what is there."""
    tail = _tail(path, 2)
    separator = "" if tail in (b"", b"\n\n") else "\n" if tail.endswith(b"\n") else "\n\n"
    with path.open("a", encoding="utf-8") as out:
        out.write(separator + (text if text.endswith("\n") else text + "\n"))
    return f"the job summary (${STEP_SUMMARY})"


def _tail(path: Path, size: int) -> bytes:
    """The file's last `size` bytes (fewer when it is shorter; none when it does not exist)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - size))
            return handle.read()
    except FileNotFoundError:
        return b""


def _plots(directory: Path, doc: Mapping[str, Any]) -> str:
    from pytest_sglang_perf.plots.render import write_plots

    written = write_plots([doc], directory)
    if not written:
        return f"no plots in {directory}: no cell was measured"
    return f"{len(written)} plot(s) in {directory}"
