"""The server's own view of a measurement, beside the client's: what SGLang's `Decode batch` lines said while the
cell was measured (server/batch_lines.py reads them; session/facade.py takes the part of the log the measurement
wrote), and where the two views disagree beyond what their definitions explain.

The definitions differ on purpose, so the comparisons allow for it:

- `gen throughput (token/s)` is all running requests' tokens over a window of `--decode-log-interval` decode steps
  (40 by default), wall time between two such lines: at one stream it also spans the gaps between requests (the
  cache flush, the next prefill), so it reads at or below the client's decode rate; above it by more than
  GEN_THROUGHPUT_ABOVE means the client measured less than the server generated.
- `accept len` is the mean tokens per verify step over the same window, all requests; the client's accept length
  is per request (completion tokens over verify steps), its median over the measurement's requests: at one stream
  both average the same steps; at several, the windows weigh each request by its steps, which differ little
  between requests of one prompt and one length; so they differ beyond ACCEPT_LENGTH_APART, at any number of
  streams, only when one of them counts wrong. (The throughput comparison is held at one stream only: at several,
  a window's rate is the whole batch's.)
- a window's `cuda graph: False` on a server that captured its decode graph, at a batch its graph covers, is a
  decode step that ran eagerly: a finding.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GEN_THROUGHPUT_ABOVE = 0.20
"""The server's median window throughput may exceed the client's decode rate by this share (one stream)."""
ACCEPT_LENGTH_APART = 0.15
"""The server's and the client's accept length may differ by this share (any number of streams)."""


@dataclass(frozen=True)
class DecodeWindow:
    """One `Decode batch` line of the measured server's lead rank."""

    running_req: int | None
    gen_throughput: float | None
    accept_len: float | None
    graph: bool | None


@dataclass(frozen=True)
class PrefillView:
    """What the server's `Prefill batch` lines (its lead rank's) said during one measurement, warmup included: one
    line per prefill step, so one per chunk of a chunked prompt (`#new-token` is the chunk's tokens)."""

    batches: int
    new_tokens: int
    """`#new-token` summed over the lines: prompt tokens computed (not read from the prefix cache)."""
    graph_true: int
    """Lines that said the step ran as a captured graph (`cuda graph: True`): the prefill CUDA graph ran it."""
    requests: int
    """Requests the measurement sent (warmup included), each prefilled once."""

    @property
    def chunks_per_request(self) -> float | None:
        """Prefill steps per request: ceil(uncached prompt tokens / chunked_prefill_size) for a lone request."""
        return self.batches / self.requests if self.requests else None

    def to_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "new_tokens": self.new_tokens, "graph_true": self.graph_true,
                "requests": self.requests, "chunks_per_request": self.chunks_per_request}


@dataclass(frozen=True)
class ServerView:
    """What the server's decode lines said during one measurement (warmup included: the windows span it)."""

    windows: int
    gen_throughput: float | None
    """Median over the windows, tokens/s."""
    accept_len: float | None
    """Mean over the windows that report one (speculative decoding)."""
    max_running_req: int | None
    graph_true: int
    graph_false: int
    eager_at_captured_bs: int = 0
    """Windows that said `cuda graph: False` at a batch size the server captured a decode graph for."""
    findings: tuple[str, ...] = ()
    """Where it disagrees with the client beyond the definitions (`findings`), each a sentence."""
    metrics_accept_len: float | None = None
    """Generated tokens per verify call between two `/metrics` scrapes (server/metrics_scrape.py): every request
    of the measurement, warmup included; None without `--enable-metrics` or speculative decoding."""
    prefill: PrefillView | None = None
    """The measurement's prefill steps; None when the server logged none (a remote server, a log level that hides
    them)."""

    def to_dict(self) -> dict[str, Any]:
        return {"windows": self.windows, "gen_throughput": self.gen_throughput, "accept_len": self.accept_len,
                "max_running_req": self.max_running_req, "graph_true": self.graph_true,
                "graph_false": self.graph_false, "eager_at_captured_bs": self.eager_at_captured_bs,
                "findings": list(self.findings), "metrics_accept_len": self.metrics_accept_len,
                **({"prefill": self.prefill.to_dict()} if self.prefill is not None else {})}


def server_view(windows: Sequence[DecodeWindow], captured_bs: Sequence[int] | None) -> ServerView | None:
    """The view of a measurement's decode windows (None when the server logged none: a remote server, a log level
    that hides them, a measurement shorter than one window)."""
    if not windows:
        return None
    rates = [w.gen_throughput for w in windows if w.gen_throughput is not None]
    accepts = [w.accept_len for w in windows if w.accept_len is not None]
    running = [w.running_req for w in windows if w.running_req is not None]
    top = max(captured_bs) if captured_bs else None
    eager = sum(1 for w in windows if w.graph is False and top is not None
                and w.running_req is not None and w.running_req <= top)
    return ServerView(len(windows), statistics.median(rates) if rates else None,
                      statistics.fmean(accepts) if accepts else None, max(running) if running else None,
                      sum(w.graph is True for w in windows), sum(w.graph is False for w in windows), eager)


def findings(view: ServerView | None, medians: Mapping[str, float], streams: int) -> tuple[str, ...]:
    """Where the server's view and the client's `medians` disagree beyond their definitions (module docstring)."""
    if view is None:
        return ()
    out = []
    if view.eager_at_captured_bs:
        out.append(f"{view.eager_at_captured_bs} of {view.windows} decode windows ran without the CUDA graph at a "
                   "batch size the server captured one for (`cuda graph: False` in the server's log)")
    client_rate, client_accept = medians.get("decode_throughput"), medians.get("accept_length")
    above = None if view.gen_throughput is None or not client_rate else view.gen_throughput / client_rate - 1
    if streams == 1 and above is not None and above > GEN_THROUGHPUT_ABOVE:
        out.append(f"client and server disagree: the server generated {view.gen_throughput:.1f} tok/s (median of "
                   f"its decode windows), the client measured {client_rate:.1f} tok/s of decode: the client lost "
                   "time the server did not (a busy or slow client)")
    if view.accept_len is not None and client_accept and abs(view.accept_len - client_accept) > \
            ACCEPT_LENGTH_APART * client_accept:
        out.append(f"client and server disagree: accept length {client_accept:.2f} per the client (per request), "
                   f"{view.accept_len:.2f} per the server's decode windows")
    if view.metrics_accept_len is not None and client_accept and abs(view.metrics_accept_len - client_accept) > \
            ACCEPT_LENGTH_APART * client_accept:
        out.append(f"client and server disagree: accept length {client_accept:.2f} per the client (per request), "
                   f"{view.metrics_accept_len:.2f} per the server's /metrics counters")
    return tuple(out)
