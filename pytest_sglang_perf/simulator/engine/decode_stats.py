"""The scheduler's batch statistics: `Prefill batch` / `Decode batch` log lines, `last_gen_throughput`,
`avg_spec_accept_length` (srt/managers/scheduler_components/metrics_reporter.py,
docs/sglang-0.5.23.md §5.2, §7.2, §7.3).

The batcher reports every step it runs. A decode window closes every `--decode-log-interval` decode steps (one
speculative round is one step); only closed windows feed the cumulative accept length, so it stays absent until
the first window closes. `gen throughput` is the window's tokens over the time since the previous decode line
(idle time included, as in SGLang); `input throughput` the prefill's tokens over the time since the previous prefill
line. Times come from the batcher's clock (seconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class DecodeStats:
    interval: int
    max_total_tokens: int
    num_draft_tokens: int
    """0 without speculative decoding."""
    graph_label: str = "cuda graph"
    """`cpu graph` on a CPU device (metrics_reporter.py::_graph_backend_label)."""
    extra: str = ""
    """Fields SGLang inserts before the graph field in a mode (`waiting-image-req: 0, ` with --language-only)."""
    now: float = 0.0
    forward_ct: int = 0
    last_gen_throughput: float = 0.0
    last_input_throughput: float = 0.0
    last_accept_length: float | None = None
    last_accept_rate: float | None = None
    _window_tokens: int = 0
    _window_verify: int = 0
    _window_correct: int = 0
    _total_accept_tokens: int = 0
    _total_verify: int = 0
    _decode_tic: float = 0.0
    _prefill_tic: float = 0.0

    def start(self, now: float) -> None:
        self.now = self._decode_tic = self._prefill_tic = now

    @property
    def speculative(self) -> bool:
        return self.num_draft_tokens > 0

    @property
    def avg_spec_accept_length(self) -> float | None:
        if not self.speculative or self._total_verify == 0:
            return None
        return self._total_accept_tokens / self._total_verify

    def prefill_line(self, new_seqs: int, new_tokens: int, running_reqs: int, running_tokens: int, queue: int,
                     graph: bool, now: float, cached_tokens: int = 0) -> str:
        """`new_tokens` are computed; `cached_tokens` came from the radix cache (not in the input throughput)."""
        gap = now - self._prefill_tic
        self._prefill_tic = now
        self.last_input_throughput = new_tokens / gap if gap > 0 else 0.0
        return (f"Prefill batch, #new-seq: {new_seqs}, #new-token: {new_tokens}, #cached-token: {cached_tokens}, "
                f"token usage: {self._ratio(running_tokens):.2f}, #running-req: {running_reqs}, "
                f"#queue-req: {queue}, #pending-token: 0, "
                f"{self.extra}{self.graph_label}: {graph}, "
                f"input throughput (token/s): {self.last_input_throughput:.2f}")

    def decode_step(self, step_tokens: Sequence[int], running_tokens: int, graph: bool, queue: int,
                    now: float) -> str | None:
        """Count one decode step of the batch (`step_tokens`: one entry per running request); returns the
        `Decode batch` line when it closes a window."""
        self.forward_ct += 1
        self._window_tokens += sum(step_tokens)
        self._window_verify += len(step_tokens)
        self._window_correct += sum(step_tokens) - len(step_tokens)
        if self.forward_ct % self.interval != 0:
            return None
        return self._close_window(len(step_tokens), running_tokens, graph, queue, now)

    def reset(self, now: float) -> None:
        """`/flush_cache` (metrics_reporter.reset_metrics): restart the step count and every spec counter."""
        self.forward_ct = 0
        self._window_tokens = self._window_verify = self._window_correct = 0
        self._total_accept_tokens = self._total_verify = 0

    def _close_window(self, running: int, running_tokens: int, graph: bool, queue: int, now: float) -> str:
        gap = now - self._decode_tic
        self._decode_tic = now
        self.last_gen_throughput = self._window_tokens / gap if gap > 0 else 0.0
        line = (f"Decode batch, #running-req: {running}, {self._usage(running_tokens)}{self._spec_part()}"
                f"{self.extra}{self.graph_label}: {graph}, gen throughput (token/s): {self.last_gen_throughput:.2f}, "
                f"#queue-req: {queue}")
        if self.speculative:
            self._total_accept_tokens += self._window_tokens
            self._total_verify += self._window_verify
        self._window_tokens = self._window_verify = self._window_correct = 0
        return line

    def _usage(self, running_tokens: int) -> str:
        return f"#token: {running_tokens}, token usage: {self._ratio(running_tokens):.2f}, "

    def _ratio(self, running_tokens: int) -> float:
        return running_tokens / max(1, self.max_total_tokens)

    def _spec_part(self) -> str:
        if not self.speculative or self._window_verify == 0:
            return ""
        self.last_accept_length = self._window_tokens / self._window_verify
        proposed = self._window_verify * max(1, self.num_draft_tokens - 1)
        self.last_accept_rate = self._window_correct / proposed
        return f"accept len: {self.last_accept_length:.2f}, accept rate: {self.last_accept_rate:.2f}, "
