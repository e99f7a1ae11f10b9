"""The scheduler's decode counters: the `Decode batch` log window, `last_gen_throughput` and
`avg_spec_accept_length` (srt/managers/scheduler_components/metrics_reporter.py::report_decode_stats).

A window closes every `--decode-log-interval` decode steps; only closed windows feed the cumulative
accept length, so it stays absent until the first window closes. Requests run independently in the
simulator for now, so each request's step counts as one forward step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class DecodeStats:
    interval: int
    max_total_tokens: int
    num_draft_tokens: int
    """0 without speculative decoding."""
    cuda_graph_max_bs: int
    forward_ct: int = 0
    running_reqs: int = 0
    running_tokens: int = 0
    last_gen_throughput: float = 0.0
    _window_tokens: int = 0
    _window_verify: int = 0
    _window_correct: int = 0
    _total_accept_tokens: int = 0
    _total_verify: int = 0
    _last_tic: float = field(default_factory=time.perf_counter)

    @property
    def speculative(self) -> bool:
        return self.num_draft_tokens > 0

    @property
    def avg_spec_accept_length(self) -> float | None:
        if not self.speculative or self._total_verify == 0:
            return None
        return self._total_accept_tokens / self._total_verify

    def start_request(self, prompt_tokens: int) -> None:
        self.running_reqs += 1
        self.running_tokens += prompt_tokens

    def finish_request(self, total_tokens: int) -> None:
        self.running_reqs = max(0, self.running_reqs - 1)
        self.running_tokens = max(0, self.running_tokens - total_tokens)

    def record_steps(self, step_tokens: Sequence[int]) -> list[str]:
        """Count decode (verify) steps; returns the `Decode batch` lines of the windows they close."""
        lines = []
        for tokens in step_tokens:
            self.forward_ct += 1
            self.running_tokens += tokens
            self._window_tokens += tokens
            self._window_verify += 1
            self._window_correct += tokens - 1
            if self.forward_ct % self.interval == 0:
                lines.append(self._close_window())
        return lines

    def reset(self) -> None:
        """`/flush_cache`: restart the cumulative counters and the window clock."""
        self._window_tokens = self._window_verify = self._window_correct = 0
        self._total_accept_tokens = self._total_verify = 0
        self._last_tic = time.perf_counter()

    def _close_window(self) -> str:
        now = time.perf_counter()
        self.last_gen_throughput = self._window_tokens / max(now - self._last_tic, 1e-9)
        self._last_tic = now
        line = (f"Decode batch, #running-req: {self.running_reqs}, #token: {self.running_tokens}, "
                f"token usage: {self.running_tokens / max(1, self.max_total_tokens):.2f}, "
                f"{self._spec_part()}cuda graph: {0 < self.running_reqs <= self.cuda_graph_max_bs}, "
                f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: 0")
        if self.speculative:
            self._total_accept_tokens += self._window_tokens
            self._total_verify += self._window_verify
        self._window_tokens = self._window_verify = self._window_correct = 0
        return line

    def _spec_part(self) -> str:
        if not self.speculative or self._window_verify == 0:
            return ""
        accept_len = self._window_tokens / self._window_verify
        proposed = self._window_verify * max(1, self.num_draft_tokens - 1)
        return f"accept len: {accept_len:.2f}, accept rate: {self._window_correct / proposed:.2f}, "
