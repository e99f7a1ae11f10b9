"""Raw per-request samples: what one streamed request took (plain data, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sample:
    """What one streamed request took. Times in seconds from `time.perf_counter()` deltas."""

    ttft: float
    """Request sent -> first chunk carrying content."""
    e2e: float
    """Request sent -> last content token received."""
    decode_time: float
    """First content chunk -> last content chunk."""
    completion_tokens: int
    prompt_tokens: int
    chunks: int
    """Content chunks received (several tokens per chunk with speculative decoding)."""
    spec_verify_ct: int | None = None
    spec_accept_length: float | None = None
    """`sglext.spec_tokens_details.spec_accept_length` as the server reported it."""
    cached_tokens: int | None = None
    """Prompt tokens the server read from its prefix cache (client.py: `sglext.cached_tokens_details` or
    `usage.prompt_tokens_details`); None where unknown (samples recorded before it was kept)."""
    round: int | None = None
    """Concurrent measurements only: which round of N streams sent at once this request belonged to (0-based,
    measured rounds only); None for a one-stream measurement."""
    start: float = 0.0
    """Concurrent measurements only: seconds from the round's first send to this request's send."""

    def metrics(self) -> dict[str, float]:
        """The gated per-request metrics (see metrics.METRICS), accept_length only with spec stats."""
        out = {
            "output_throughput": self.completion_tokens / self.e2e,
            "ttft": self.ttft,
        }
        if self.completion_tokens > 1 and self.decode_time > 0:
            out["decode_throughput"] = (self.completion_tokens - 1) / self.decode_time
            out["tpot"] = (self.e2e - self.ttft) / (self.completion_tokens - 1)
        if self.spec_verify_ct:
            out["accept_length"] = self.completion_tokens / self.spec_verify_ct
        return out

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ttft": self.ttft, "e2e": self.e2e, "decode_time": self.decode_time,
            "completion_tokens": self.completion_tokens, "prompt_tokens": self.prompt_tokens,
            "chunks": self.chunks,
        }
        if self.spec_verify_ct is not None:
            data["spec_verify_ct"] = self.spec_verify_ct
            data["spec_accept_length"] = self.spec_accept_length
        if self.cached_tokens is not None:
            data["cached_tokens"] = self.cached_tokens
        if self.round is not None:
            data["round"] = self.round
            data["start"] = self.start
        return data

    @property
    def end(self) -> float:
        """Seconds from its round's first send to this request's last token (its own e2e for one stream)."""
        return self.start + self.e2e

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sample:
        return cls(
            ttft=float(data["ttft"]), e2e=float(data["e2e"]), decode_time=float(data["decode_time"]),
            completion_tokens=int(data["completion_tokens"]), prompt_tokens=int(data["prompt_tokens"]),
            chunks=int(data["chunks"]),
            spec_verify_ct=None if data.get("spec_verify_ct") is None else int(data["spec_verify_ct"]),
            spec_accept_length=None if data.get("spec_accept_length") is None
            else float(data["spec_accept_length"]),
            cached_tokens=None if data.get("cached_tokens") is None else int(data["cached_tokens"]),
            round=None if data.get("round") is None else int(data["round"]),
            start=float(data.get("start") or 0.0),
        )
