"""The server's own view beside the client's (measurement/server_view.py): the decode windows summed up, and a
finding only where the two disagree beyond what their definitions explain."""

from __future__ import annotations

from pytest_sglang_perf.measurement.server_view import DecodeWindow, findings, server_view


def _windows(*rates: float, accept: float | None = None, graph: bool = True, running: int = 1) -> list[DecodeWindow]:
    return [DecodeWindow(running, rate, accept, graph) for rate in rates]


def test_the_view_is_the_windows_median_rate_and_mean_accept_length() -> None:
    view = server_view(_windows(100.0, 140.0, 150.0, accept=2.5) + _windows(160.0, accept=3.5), (1, 2, 4))
    assert view is not None
    assert (view.windows, view.gen_throughput, view.accept_len, view.graph_true, view.graph_false) == \
        (4, 145.0, 2.75, 4, 0)
    assert server_view([], (1, 2, 4)) is None


def test_agreeing_views_have_no_finding() -> None:
    """At one stream the server's windows span the gaps between requests: it reads below the client, not a finding."""
    view = server_view(_windows(120.0, 130.0, accept=2.9), (1, 2))
    assert findings(view, {"decode_throughput": 150.0, "accept_length": 2.8}, streams=1) == ()


def test_a_server_faster_than_the_client_and_a_different_accept_length_are_findings() -> None:
    view = server_view(_windows(200.0, 210.0, accept=2.0), (1, 2))
    found = findings(view, {"decode_throughput": 150.0, "accept_length": 2.9}, streams=1)
    assert found == (
        "client and server disagree: the server generated 205.0 tok/s (median of its decode windows), the client "
        "measured 150.0 tok/s of decode: the client lost time the server did not (a busy or slow client)",
        "client and server disagree: accept length 2.90 per the client (per request), 2.00 per the server's decode "
        "windows")
    # At 4 streams a window's rate is the batch's, not one stream's: not comparable; its accept length still is (the
    # same prompt's requests, weighted alike).
    assert findings(view, {"decode_throughput": 150.0, "accept_length": 2.9}, streams=4) == found[1:]


def test_a_decode_step_without_its_graph_is_a_finding_only_at_a_captured_batch_size() -> None:
    eager = _windows(100.0, graph=False, running=2) + _windows(100.0, graph=False, running=8)
    view = server_view(eager + _windows(100.0), (1, 2, 4))
    assert view is not None and view.eager_at_captured_bs == 1  # batch 8 is past the captured sizes: not a finding
    assert findings(view, {}, streams=4) == (
        "1 of 3 decode windows ran without the CUDA graph at a batch size the server captured one for "
        "(`cuda graph: False` in the server's log)",)
    assert server_view(eager, None).eager_at_captured_bs == 0  # type: ignore[union-attr]  # nothing captured (CPU)


def test_the_metrics_accept_length_is_held_to_the_clients_too() -> None:
    view = server_view(_windows(120.0, accept=2.9), (1, 2))
    assert view is not None
    off = type(view)(**{**view.__dict__, "metrics_accept_len": 2.2})
    assert findings(off, {"accept_length": 2.9}, streams=1) == (
        "client and server disagree: accept length 2.90 per the client (per request), 2.20 per the server's /metrics "
        "counters",)
