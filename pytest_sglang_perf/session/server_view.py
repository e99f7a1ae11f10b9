"""The server's own view of each measurement: the part of its log the measurement wrote, read for SGLang's decode
windows and prefill steps (server/batch_lines.py), and its `/metrics` counters before and after
(server/metrics_scrape.py, with `--enable-metrics`), set beside the client's numbers (measurement/server_view.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.server_view import ServerView, findings, server_view
from pytest_sglang_perf.measurement.values import measures_prefill
from pytest_sglang_perf.server.batch_lines import decode_windows, prefill_view
from pytest_sglang_perf.server.metrics_scrape import accept_length, scrape
from pytest_sglang_perf.session.variant_run import VariantRun


@dataclass(frozen=True)
class Before:
    """Where the server's log ended and what its counters said when the measurement began."""

    offset: int | None
    """None when this run reads no log of the server (a remote one)."""
    counters: dict[str, float] | None
    """None when the server exports no `/metrics`."""


def before(run: VariantRun) -> Before:
    if run.server is None:
        return Before(None, None)
    offset = None
    if run.plan.url is None:
        try:
            offset = run.server.log_path.stat().st_size
        except OSError:
            offset = None
    counters = scrape(run.server.base_url, run.server.plan.api_key) if _exports_metrics(run) else None
    return Before(offset, counters)


def _exports_metrics(run: VariantRun) -> bool:
    """False when `/server_info` says the server runs without `--enable-metrics` (no `/metrics` to ask: two
    requests per measurement saved); True when it says so or its configuration was not read."""
    if run.config is None:
        return True
    return run.config.info.get("enable_metrics") is not False


def with_server_view(run: VariantRun, start: Before, result: Result) -> Result:
    """`result` with what the server logged and counted since `start`, and the findings."""
    if run.server is None:
        return result
    text = _appended(run, start.offset)
    captured = None if run.startup is None else run.startup.captured_decode_bs
    view = server_view(decode_windows(text), captured) if text else None
    sent = (result.measured + result.params.warmup) * result.params.concurrency
    measured_prefill = measures_prefill(result.params.prompt_tokens, result.params.prefix_cache)
    prefill = prefill_view(text, sent) if text and measured_prefill else None
    metrics = accept_length(start.counters, scrape(run.server.base_url, run.server.plan.api_key)
                            if start.counters is not None else None)
    if view is None and metrics is None and prefill is None:
        return result
    view = replace(view or ServerView(0, None, None, None, 0, 0), metrics_accept_len=metrics, prefill=prefill)
    medians = {name: summary.median for name, summary in result.summaries.items()}
    return replace(result, server=replace(view, findings=findings(view, medians, result.params.concurrency)))


def _appended(run: VariantRun, offset: int | None) -> str:
    if offset is None or run.server is None:
        return ""
    try:
        with run.server.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
