"""The client's own condition over a measurement (plain data; loop_lag.py measures it): how late its event loop
ran callbacks, and how much of a core it used."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LAG_LIMIT = 0.001
"""A p99 lag above this (1 ms) says the client fell behind: its reads (and so its timestamps, where the event loop
takes them) may be that late (docs/concurrency.md)."""


@dataclass(frozen=True)
class ClientLoad:
    """The client's own condition over one measurement."""

    lag_p50: float
    lag_p99: float
    """The tail, never the single worst probe (loop_lag.tail_lag)."""
    lag_max: float
    """Seconds a callback queued on the loop waited before it ran."""
    probes: int
    cpu_share: float
    """The measuring process's CPU time / wall time (1.0 = one core busy)."""
    seconds: float
    reads: int = 0
    """Socket reads of the measured answers (0: not counted, e.g. the aiohttp reader or an older results file)."""
    kernel_stamped: int = 0
    """How many of them carried the kernel's receive stamp (the rest were stamped by the event loop as it handed them
    over: over TLS, off Linux, or before the kernel's stamping was on; docs/client-measurement.md)."""
    chunks: int = 0
    """Content chunks of the measured answers (0: not counted, as `reads`)."""
    shared: int = 0
    """How many of them came in the same read as the chunk before them, so that both carry that read's one stamp
    (a client that fell behind by more than the gap between two of a stream's chunks, or a server that wrote them
    together)."""

    @property
    def behind(self) -> bool:
        return self.lag_p99 > LAG_LIMIT

    def describe(self) -> str:
        """`client lag p50/p99/max 0.02/0.09/0.4 ms, 12% of a core` and, when the reads were counted, whose stamps
        they carried: `, kernel stamps` (all of them), `, loop stamps` (none), `, kernel stamps on 97% of reads`."""
        lags = "/".join(f"{v * 1000:.2f}" for v in (self.lag_p50, self.lag_p99, self.lag_max))
        return f"client lag p50/p99/max {lags} ms, {self.cpu_share:.0%} of a core{self._stamps()}"

    @property
    def untouched(self) -> bool:
        """Whether its timings are its chunks' own arrivals however late its loop ran: every read stamped by the
        kernel, and no chunk read together with the one before it (counted)."""
        return self.kernel_share == 1 and self.chunks > 0 and not self.shared

    @property
    def kernel_share(self) -> float | None:
        """The share of the reads that carried the kernel's stamp; None when the reads were not counted."""
        return self.kernel_stamped / self.reads if self.reads else None

    def lag_effect(self) -> str:
        """What a lagging loop did to the timings, by whose stamps the reads carried: a loop stamp is taken when the
        loop gets to the read, a kernel stamp when the data arrived, but chunks of a stream that arrived while the
        loop was behind are read at once and share the last one's stamp (docs/client-measurement.md, "Kernel
        receive stamps"); how many did is counted, where the chunks were."""
        share = self.kernel_share
        if not share:
            return "these timings include its own delay"
        merged = self._merged()
        return merged if share == 1 else f"its loop-stamped reads ({1 - share:.0%}) include its delay, and {merged}"

    def _merged(self) -> str:
        if not self.chunks:  # an older results file: not counted
            return "chunks that reached it while it was behind were read together and share the last one's stamp"
        if not self.shared:
            return "no chunk came in one read with the one before it, so every kernel-stamped chunk kept its own time"
        return (f"{self.shared} of {self.chunks} chunks came in one read with the one before it and share that read's "
                "stamp")

    def _stamps(self) -> str:
        share = self.kernel_share
        if share is None:
            return ""
        if share in (0, 1):
            return ", kernel stamps" if share else ", loop stamps"
        return f", kernel stamps on {share:.0%} of reads"

    def to_dict(self) -> dict[str, Any]:
        counted = {"reads": self.reads, "kernel_stamped": self.kernel_stamped, "chunks": self.chunks,
                   "shared": self.shared} if self.reads else {}
        return {"lag_p50": self.lag_p50, "lag_p99": self.lag_p99, "lag_max": self.lag_max, "probes": self.probes,
                "cpu_share": self.cpu_share, "seconds": self.seconds, **counted}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClientLoad:
        return cls(lag_p50=float(data["lag_p50"]), lag_p99=float(data["lag_p99"]), lag_max=float(data["lag_max"]),
                   probes=int(data["probes"]), cpu_share=float(data["cpu_share"]), seconds=float(data["seconds"]),
                   reads=int(data.get("reads", 0)), kernel_stamped=int(data.get("kernel_stamped", 0)),
                   chunks=int(data.get("chunks", 0)), shared=int(data.get("shared", 0)))


def combined(loads: list[ClientLoad]) -> ClientLoad | None:
    """Several rounds' loads as one: the worst lags, the CPU share over the whole time."""
    if not loads:
        return None
    seconds = sum(load.seconds for load in loads)
    return ClientLoad(lag_p50=max(load.lag_p50 for load in loads), lag_p99=max(load.lag_p99 for load in loads),
                      lag_max=max(load.lag_max for load in loads), probes=sum(load.probes for load in loads),
                      cpu_share=sum(load.cpu_share * load.seconds for load in loads) / seconds if seconds else 0.0,
                      seconds=seconds, reads=sum(load.reads for load in loads),
                      kernel_stamped=sum(load.kernel_stamped for load in loads),
                      chunks=sum(load.chunks for load in loads), shared=sum(load.shared for load in loads))
