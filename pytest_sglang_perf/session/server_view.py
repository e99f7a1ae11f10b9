"""The server's own view of each measurement: the part of its log the measurement wrote, read for SGLang's decode
windows (server/batch_lines.py) and set beside the client's numbers (measurement/server_view.py)."""

from __future__ import annotations

from dataclasses import replace

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.server_view import findings, server_view
from pytest_sglang_perf.server.batch_lines import decode_windows
from pytest_sglang_perf.session.variant_run import VariantRun


def log_offset(run: VariantRun) -> int | None:
    """Where the variant's server log ends now; None when this run reads no log of it (a remote server)."""
    if run.server is None or run.plan.url is not None:
        return None
    try:
        return run.server.log_path.stat().st_size
    except OSError:
        return None


def with_server_view(run: VariantRun, offset: int | None, result: Result) -> Result:
    """`result` with what the server logged since `offset` (its decode windows) and the findings."""
    if offset is None or run.server is None:
        return result
    try:
        with run.server.log_path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return result
    captured = None if run.startup is None else run.startup.captured_decode_bs
    view = server_view(decode_windows(text), captured)
    if view is None:
        return result
    medians = {name: summary.median for name, summary in result.summaries.items()}
    return replace(result, server=replace(view, findings=findings(view, medians, result.params.concurrency)))
