"""The state of the server's GPUs over a measurement (plain data; nvml.py reads it, gpu_watch.py samples it):
clocks against their maximum, why the driver held the clocks back, temperature, power, and processes on those GPUs
that are not the server's.

The reasons are NVML's "clocks event reasons" bits (nvml.h, `nvmlClocksEventReason*`, named
`nvmlClocksThrottleReason*` before driver 535): docs/conditions.md lists them. Only busy samples count for clocks
and reasons (a kernel ran: NVML's utilization), since an idle GPU lowers its clocks on purpose. A GPU that ran
kernels just before the measurement, while the server had no request, carries that utilization (`busy_before`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REASONS: Mapping[int, str] = {
    0x1: "idle", 0x2: "applications clocks", 0x4: "power cap", 0x8: "hw slowdown", 0x10: "sync boost",
    0x20: "sw thermal slowdown", 0x40: "hw thermal slowdown", 0x80: "hw power brake", 0x100: "display clocks",
    0x200: "board limit", 0x400: "reliability",
}
"""NVML's clocks event reason bits and the names this plugin shows for them."""
IDLE = 0x1
SLOWDOWNS = frozenset({"hw slowdown", "sw thermal slowdown", "hw thermal slowdown", "hw power brake"})
"""Reasons that are never a GPU's normal working state: heat, a power brake, an external slowdown signal."""


def reason_names(bits: int) -> tuple[str, ...]:
    """The named reasons set in `bits`, in bit order (an unnamed bit reads `0x...`)."""
    names = [name for bit, name in REASONS.items() if bits & bit]
    unknown = bits & ~sum(REASONS)
    return (*names, *([f"{unknown:#x}"] if unknown else []))


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    memory: int | None
    """Bytes of GPU memory it holds (None: NVML cannot say)."""


@dataclass(frozen=True)
class GpuReading:
    """One sample of one GPU (nvml.py)."""

    index: int
    sm_mhz: int
    memory_mhz: int
    reasons: int
    temperature: int
    power_w: float | None
    processes: tuple[GpuProcess, ...]
    utilization: int | None = None
    """Percent of NVML's last sample period in which a kernel ran (None: not supported)."""

    @property
    def busy(self) -> bool:
        """A kernel ran lately. NVML's `idle` reason alone does not say it: measured on an H200, a process that
        holds a CUDA context keeps the GPU out of `idle` (clocks at their maximum, no reason) for as long as it
        lives, working or not."""
        return bool(self.utilization) if self.utilization is not None else not self.reasons & IDLE


@dataclass(frozen=True)
class GpuLimits:
    """A GPU's fixed figures (nvml.py): its name and its maximum clocks and power limit."""

    index: int
    name: str
    sm_max_mhz: int
    memory_max_mhz: int
    power_limit_w: float | None


@dataclass(frozen=True)
class GpuCondition:
    """One server GPU over a measurement."""

    index: int
    name: str
    samples: int
    busy_samples: int
    sm_mhz: float
    """Mean SM clock over the busy samples (over all of them when none was busy)."""
    sm_max_mhz: int
    memory_mhz: float
    memory_max_mhz: int
    reasons: tuple[str, ...]
    """Every reason seen in a sample in which the GPU worked, `idle` left out."""
    temperature_max: int
    power_w: float | None
    """Mean power draw over the busy samples (watts)."""
    power_limit_w: float | None
    foreign: tuple[GpuProcess, ...]
    """Processes on this GPU that are not the server's, as first seen (empty when they cannot be told apart)."""
    foreign_known: bool = True
    """False when the server's own processes were not among NVML's (another pid namespace, as in a container):
    then no process can be called foreign."""
    busy_before: int | None = None
    """NVML's utilization (percent) of a GPU that ran kernels just before the measurement, while the server had no
    request, in every reading of a confirmation (gpu_watch.settled_readings); None: it was idle then, or its
    utilization is not known. Where the server's processes are not NVML's, this is the reading that says someone
    else is on the GPU."""

    @property
    def sm_share(self) -> float:
        return self.sm_mhz / self.sm_max_mhz if self.sm_max_mhz else 1.0

    @property
    def memory_share(self) -> float:
        return self.memory_mhz / self.memory_max_mhz if self.memory_max_mhz else 1.0

    def describe(self) -> str:
        """`GPU 0 (NVIDIA H200): SM 1980/1980 MHz, memory 3201/3201 MHz, 41 °C max, 402/700 W, reasons: power cap;
        1 other process (pid 4242, 2.0 GiB)`."""
        power = "" if self.power_w is None else f", {self.power_w:.0f}" + (
            "" if self.power_limit_w is None else f"/{self.power_limit_w:.0f}") + " W"
        reasons = f", reasons: {', '.join(self.reasons)}" if self.reasons else ""
        idle = "" if self.busy_samples else ", idle throughout"
        before = "" if not self.busy_before else f", busy before the measurement ({self.busy_before}%)"
        return (f"GPU {self.index} ({self.name}): SM {self.sm_mhz:.0f}/{self.sm_max_mhz} MHz, memory "
                f"{self.memory_mhz:.0f}/{self.memory_max_mhz} MHz, {self.temperature_max} °C max{power}{reasons}"
                f"{idle}{before}{self._others()}")

    def _others(self) -> str:
        if not self.foreign_known:
            return "; other processes not known (the server's pids are not NVML's: another pid namespace)"
        if not self.foreign:
            return ""
        listed = ", ".join(f"pid {p.pid}" + ("" if p.memory is None else f", {p.memory / 2**30:.1f} GiB")
                           for p in self.foreign)
        return f"; {len(self.foreign)} other process(es) ({listed})"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "samples": self.samples, "busy_samples": self.busy_samples,
                "sm_mhz": self.sm_mhz, "sm_max_mhz": self.sm_max_mhz, "memory_mhz": self.memory_mhz,
                "memory_max_mhz": self.memory_max_mhz, "reasons": list(self.reasons),
                "temperature_max": self.temperature_max, "power_w": self.power_w,
                "power_limit_w": self.power_limit_w, "foreign_known": self.foreign_known,
                "busy_before": self.busy_before,
                "foreign": [{"pid": p.pid, "memory": p.memory} for p in self.foreign]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuCondition:
        def optional(key: str) -> float | None:
            return None if data.get(key) is None else float(data[key])

        return cls(index=int(data["index"]), name=str(data["name"]), samples=int(data["samples"]),
                   busy_samples=int(data["busy_samples"]), sm_mhz=float(data["sm_mhz"]),
                   sm_max_mhz=int(data["sm_max_mhz"]), memory_mhz=float(data["memory_mhz"]),
                   memory_max_mhz=int(data["memory_max_mhz"]), reasons=tuple(str(r) for r in data["reasons"]),
                   temperature_max=int(data["temperature_max"]), power_w=optional("power_w"),
                   power_limit_w=optional("power_limit_w"), foreign_known=bool(data.get("foreign_known", True)),
                   busy_before=None if data.get("busy_before") is None else int(data["busy_before"]),
                   foreign=tuple(GpuProcess(int(p["pid"]), None if p.get("memory") is None else int(p["memory"]))
                                 for p in data.get("foreign", [])))


def condition(limits: GpuLimits, readings: Sequence[GpuReading], server_pids: Iterable[int],
              foreign_known: bool = True, busy_before: int | None = None) -> GpuCondition:
    """One GPU's condition from its samples (at least one); `server_pids`: the server's process tree;
    `busy_before`: its confirmed utilization before the measurement, if it was busy then."""
    worked = [r for r in readings if r.busy]
    busy = worked or list(readings)
    seen: set[str] = set()
    for reading in worked:  # an idle GPU's reasons say nothing about the measurement
        seen.update(name for name in reason_names(reading.reasons) if name != "idle")
    powers = [r.power_w for r in busy if r.power_w is not None]
    return GpuCondition(
        index=limits.index, name=limits.name, samples=len(readings),
        busy_samples=sum(r.busy for r in readings),
        sm_mhz=sum(r.sm_mhz for r in busy) / len(busy), sm_max_mhz=limits.sm_max_mhz,
        memory_mhz=sum(r.memory_mhz for r in busy) / len(busy), memory_max_mhz=limits.memory_max_mhz,
        reasons=tuple(name for name in REASONS.values() if name in seen) + tuple(sorted(seen - set(REASONS.values()))),
        temperature_max=max(r.temperature for r in readings),
        power_w=sum(powers) / len(powers) if powers else None, power_limit_w=limits.power_limit_w,
        foreign=_foreign(readings, set(server_pids)) if foreign_known else (), foreign_known=foreign_known,
        busy_before=busy_before or None)


def _foreign(readings: Sequence[GpuReading], server_pids: set[int]) -> tuple[GpuProcess, ...]:
    found: dict[int, GpuProcess] = {}
    for reading in readings:
        for process in reading.processes:
            if process.pid not in server_pids:
                found.setdefault(process.pid, process)
    return tuple(found.values())
