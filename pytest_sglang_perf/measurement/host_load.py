"""How busy the host was while a cell was measured: runnable tasks against its cores, CPU time stolen or waited.

Plain Python, Linux `/proc` only (elsewhere nothing is recorded, and the record says so by its absence). The lag
monitor's probe thread (loop_lag.py) samples `/proc/loadavg`'s count of runnable tasks at each probe, and the
system-wide CPU times of `/proc/stat` are read at the start and the end of the measurement:

- `runnable`: the mean count of tasks that were running or ready to run, the sampling thread itself left out (the
  kernel's `nr_running`, `/proc/loadavg`'s fourth field before the slash). More runnable tasks than cores means
  something waited for a CPU: the server's scheduler, the client, or both. Unlike the load average (a one-minute
  decaying mean), it covers exactly the measurement.
- `busy`: the share of all cores' time not idle over the measurement (the measurement's own processes included).
- `steal`: the share taken by the hypervisor for other guests (a VM's neighbours); `iowait`: idle while waiting for
  I/O.
- `load1`: the one-minute load average at the end, for the reader who knows that number.

This is the record of issue 15's first step; verdicts do not use it yet (docs/concurrency.md, "Conditions").
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class HostLoad:
    cores: int
    runnable: float
    """Mean runnable tasks over the measurement, the sampling thread left out."""
    busy: float
    steal: float
    iowait: float
    load1: float
    samples: int

    def describe(self) -> str:
        """`host: 3.4 runnable tasks on 2 cores, 97% busy, steal 0%, iowait 0%, load 2.10`."""
        return (f"host: {self.runnable:.1f} runnable tasks on {self.cores} cores, {self.busy:.0%} busy, steal "
                f"{self.steal:.0%}, iowait {self.iowait:.0%}, load {self.load1:.2f}")

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "runnable": self.runnable, "busy": self.busy, "steal": self.steal,
                "iowait": self.iowait, "load1": self.load1, "samples": self.samples}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostLoad:
        return cls(cores=int(data["cores"]), runnable=float(data["runnable"]), busy=float(data["busy"]),
                   steal=float(data["steal"]), iowait=float(data["iowait"]), load1=float(data["load1"]),
                   samples=int(data["samples"]))


def cpu_times(proc: Path = PROC) -> tuple[int, ...] | None:
    """The host's CPU times (jiffies: user, nice, system, idle, iowait, irq, softirq, steal), or None off Linux."""
    try:
        first = (proc / "stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    values = [int(v) for v in first[1:1 + len(_CPU_FIELDS)]]
    return tuple(values + [0] * (len(_CPU_FIELDS) - len(values)))


def runnable_now(proc: Path = PROC) -> int | None:
    """Tasks running or ready to run right now (`/proc/loadavg`), or None off Linux."""
    try:
        return int((proc / "loadavg").read_text().split()[3].split("/")[0])
    except (OSError, IndexError, ValueError):
        return None


def load_average(proc: Path = PROC) -> float:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0


def host_load(start: Sequence[int] | None, end: Sequence[int] | None, runnable: Sequence[int],
              proc: Path = PROC) -> HostLoad | None:
    """The host's condition between two cpu_times() readings, with the runnable counts sampled in between."""
    if start is None or end is None or not runnable:
        return None
    delta = dict(zip(_CPU_FIELDS, (b - a for a, b in zip(start, end, strict=True)), strict=True))
    total = sum(delta.values())
    if total <= 0:
        return None
    idle = delta["idle"] + delta["iowait"]
    return HostLoad(cores=os.cpu_count() or 1, runnable=max(0.0, sum(runnable) / len(runnable) - 1.0),
                    busy=1.0 - idle / total, steal=delta["steal"] / total, iowait=delta["iowait"] / total,
                    load1=load_average(proc), samples=len(runnable))


def combined_hosts(hosts: Sequence[HostLoad | None]) -> HostLoad | None:
    """Several calls' conditions as one: the worst of each (a cell is as disturbed as its worst stretch)."""
    known = [host for host in hosts if host is not None]
    if not known:
        return None
    return HostLoad(cores=known[0].cores, runnable=max(h.runnable for h in known), busy=max(h.busy for h in known),
                    steal=max(h.steal for h in known), iowait=max(h.iowait for h in known),
                    load1=max(h.load1 for h in known), samples=sum(h.samples for h in known))
