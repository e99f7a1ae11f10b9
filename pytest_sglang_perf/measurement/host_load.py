"""How busy the host was while a cell was measured: what other tasks wanted of its cores, and how long the server
and the client waited for a CPU.

Plain Python, Linux `/proc` only (elsewhere nothing is recorded, and the record says so by its absence). A
`HostWatch` around a measurement reads, at its start and end:

- **cpu wait** of the server's threads and of the client's: the time each spent runnable but waiting on a run queue
  (`/proc/<pid>/task/<tid>/schedstat`, second field, nanoseconds), as a share of the measurement's wall time: 0-1% on
  a calm machine, tens of percent when other processes take the cores (measured on the 2-core dev machine: 0.06% for a
  spinning process alone, 73% beside three others). `server_wait` is the most any one thread of the server's processes
  waited (the one that runs the batches is the one that counts), `client_wait` the most any thread of the measuring
  process waited (the one that runs the client's event loop, wherever run_sync runs it).
- **busy, steal, iowait**: shares of all cores' time from `/proc/stat`'s `cpu` line: not idle (the measurement's own
  processes included), taken by the hypervisor for other guests (a VM's neighbours), idle waiting for I/O.

and in between, every 100 ms on a thread of its own, **runnable**: `/proc/loadavg`'s count of tasks running or ready
to run (the kernel's `nr_running`), less the measurement's own running threads (the server's processes' and the
measuring process's, read from `/proc/<pid>/task/*/stat`): what other tasks wanted of the cores. The waits are
recorded and shown but decide nothing: on a small host the server itself (a real SGLang scheduler spins on its
core) keeps the client waiting, in the baseline's run as in this one.
`load1`, the one-minute load average at the end, is kept for the reader who knows that number.

`runnable` counts tasks at instants, and only those on a run queue: a task in uninterruptible sleep (waiting on a
disk, or on memory being reclaimed or swapped in) is not in it, though the load average counts it (its `nr_running +
nr_uninterruptible`, kernel/sched/loadavg.c), and it is where a server at half speed with few runnable tasks around
it loses its time. So the watch also reads **stall**: the kernel's pressure stall information
(`/proc/pressure/{cpu,io,memory}`, Documentation/accounting/psi.rst), the share of the measurement's wall time in
which at least one task was waiting for a CPU, for I/O, or for memory (the `some` line's `total`, microseconds,
read at the start and the end: time, not instants). Absent where the kernel keeps none (CONFIG_PSI off, or `psi=0`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from types import TracebackType
from typing import Any

PROC = Path("/proc")
SAMPLE_EVERY = 0.1
"""Each sample reads /proc/loadavg and the state of every thread of the measurement's processes."""
_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PRESSURES = ("cpu", "io", "memory")
"""The resources the kernel keeps stall time of (/proc/pressure/<resource>)."""


@dataclass(frozen=True)
class HostLoad:
    cores: int
    runnable: float
    """Mean runnable tasks over the measurement besides the measurement's own (the server's processes and the
    measuring one)."""
    busy: float
    steal: float
    iowait: float
    load1: float
    samples: int
    server_wait: float | None = None
    """The largest share of the measurement any server thread spent waiting for a CPU (None: not watched, e.g. a
    remote server)."""
    client_wait: float | None = None
    """The largest share any thread of the measuring process spent waiting for a CPU."""
    stall_cpu: float | None = None
    """Share of the measurement in which some task waited for a CPU (PSI `some`; the measurement's own tasks
    included). None: no PSI."""
    stall_io: float | None = None
    """Share of the measurement in which some task waited for I/O (PSI `some`)."""
    stall_memory: float | None = None
    """Share of the measurement in which some task waited for memory (reclaim, swap-in, thrashing; PSI `some`)."""

    def describe(self) -> str:
        """`host: server waited for a CPU 35% of the time, client 2%; 3.4 other runnable tasks on 2 cores, 97% busy,
        steal 0%, iowait 0%, load 2.10`."""
        waits = []
        if self.server_wait is not None:
            waits.append(f"server waited for a CPU {self.server_wait:.0%} of the time")
        if self.client_wait is not None:
            waits.append(f"client {self.client_wait:.0%}" if waits else
                         f"client waited for a CPU {self.client_wait:.0%} of the time")
        head = f"{', '.join(waits)}; " if waits else ""
        stalls = ", ".join(f"{what} {share:.0%}" for what, share in self.stalls().items())
        stalled = f"; stalled {stalls}" if stalls else ""
        return (f"host: {head}{self.runnable:.1f} other runnable tasks on {self.cores} cores, {self.busy:.0%} busy, "
                f"steal {self.steal:.0%}, iowait {self.iowait:.0%}, load {self.load1:.2f}{stalled}")

    def stalls(self) -> dict[str, float]:
        """The stall shares read (PSI), by resource."""
        found = {"cpu": self.stall_cpu, "io": self.stall_io, "memory": self.stall_memory}
        return {what: share for what, share in found.items() if share is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "runnable": self.runnable, "busy": self.busy, "steal": self.steal,
                "iowait": self.iowait, "load1": self.load1, "samples": self.samples,
                "server_wait": self.server_wait, "client_wait": self.client_wait, "stall_cpu": self.stall_cpu,
                "stall_io": self.stall_io, "stall_memory": self.stall_memory}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostLoad:
        def optional(key: str) -> float | None:
            return None if data.get(key) is None else float(data[key])

        return cls(cores=int(data["cores"]), runnable=float(data["runnable"]), busy=float(data["busy"]),
                   steal=float(data["steal"]), iowait=float(data["iowait"]), load1=float(data["load1"]),
                   samples=int(data["samples"]), server_wait=optional("server_wait"),
                   client_wait=optional("client_wait"), stall_cpu=optional("stall_cpu"),
                   stall_io=optional("stall_io"), stall_memory=optional("stall_memory"))


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


def stall_totals(proc: Path = PROC) -> dict[str, int]:
    """Microseconds some task has stalled on each resource since boot: `/proc/pressure/<resource>`'s first line,
    `some avg10=0.47 avg60=0.49 avg300=1.18 total=616571959` (Documentation/accounting/psi.rst); a resource the
    kernel keeps no pressure of (no file, or `psi=0`: the read fails with EOPNOTSUPP) is left out."""
    found = {}
    for resource in PRESSURES:
        try:
            first = (proc / "pressure" / resource).read_text().split("\n", 1)[0].split()
        except OSError:
            continue
        fields = dict(part.split("=", 1) for part in first[1:] if "=" in part)
        if first[:1] == ["some"] and fields.get("total", "").isdigit():
            found[resource] = int(fields["total"])
    return found


def stall_shares(start: Mapping[str, int], end: Mapping[str, int], wall: float) -> dict[str, float]:
    """Each resource's stall between two stall_totals() readings, as a share of `wall` seconds (at most 1)."""
    return {f"stall_{what}": min(1.0, max(0, end[what] - start[what]) / 1e6 / wall)
            for what in PRESSURES if what in start and what in end and wall > 0}


def load_average(proc: Path = PROC) -> float:
    try:
        return float((proc / "loadavg").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return 0.0


def run_queue_wait(task: Path) -> int | None:
    """Nanoseconds the task (`/proc/<pid>/task/<tid>`) has waited on a run queue; None when not known (no such
    task, or a kernel without scheduler statistics, which writes zeros)."""
    try:
        ran, waited = (int(v) for v in (task / "schedstat").read_text().split()[:2])
    except (OSError, ValueError):
        return None
    return None if ran == 0 and waited == 0 else waited


def thread_waits(process: Path) -> dict[Path, int]:
    """Each thread of the process (`/proc/<pid>`) and its run-queue wait so far: a process's own schedstat is its
    main thread's only, and the thread that runs the batches may be another."""
    try:
        tasks = list((process / "task").iterdir())
    except OSError:
        return {}
    waits = {task: run_queue_wait(task) for task in tasks}
    return {task: wait for task, wait in waits.items() if wait is not None}


def running_threads(pids: Sequence[int], proc: Path = PROC) -> int:
    """How many threads of these processes are running or ready to run right now (state R in their `stat`): a real
    SGLang scheduler spins on a core even when it has nothing to do, so "is the rest of the host busy" leaves them
    out."""
    count = 0
    for pid in pids:
        try:
            tasks = list((proc / str(pid) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            count += state == "R"
    return count


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else all of them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_load(start: Sequence[int] | None, end: Sequence[int] | None, runnable: Sequence[int],
              proc: Path = PROC) -> HostLoad | None:
    """The host's condition between two cpu_times() readings, with the other tasks' runnable counts sampled in
    between."""
    if start is None or end is None or not runnable:
        return None
    delta = dict(zip(_CPU_FIELDS, (b - a for a, b in zip(start, end, strict=True)), strict=True))
    total = sum(delta.values())
    if total <= 0:
        return None
    idle = delta["idle"] + delta["iowait"]
    return HostLoad(cores=usable_cores(), runnable=sum(runnable) / len(runnable),
                    busy=1.0 - idle / total, steal=delta["steal"] / total, iowait=delta["iowait"] / total,
                    load1=load_average(proc), samples=len(runnable))


class HostWatch:
    """`with HostWatch(server_pids) as watch:` around a measurement; `watch.load` afterwards (None off Linux).

    `server_pids`: the server's process and its descendants (none for a remote server)."""

    def __init__(self, server_pids: Sequence[int] = (), proc: Path = PROC, every: float = SAMPLE_EVERY) -> None:
        self._servers = [proc / str(pid) for pid in server_pids]
        self._own = [*server_pids, os.getpid()]
        self._client = proc / "self"
        self._proc = proc
        self._every = every
        self._runnable: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start: tuple[float, tuple[int, ...] | None, dict[Path, int], dict[Path, int], dict[str, int]] | None = \
            None
        self.load: HostLoad | None = None

    def __enter__(self) -> HostWatch:
        self._start = (perf_counter(), cpu_times(self._proc), self._waits(self._servers), thread_waits(self._client),
                       stall_totals(self._proc))
        self._thread = threading.Thread(target=self._sample, name="sglang-perf-host", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        assert self._thread is not None and self._start is not None
        self._thread.join()
        began, cpu, servers, client, stalls = self._start
        wall = perf_counter() - began
        found = host_load(cpu, cpu_times(self._proc), self._runnable, self._proc)
        if found is None or wall <= 0:
            return
        self.load = HostLoad(**{**found.to_dict(),
                                "server_wait": _largest_share(servers, self._waits(self._servers), wall),
                                "client_wait": _largest_share(client, thread_waits(self._client), wall),
                                **stall_shares(stalls, stall_totals(self._proc), wall)})

    def _sample(self) -> None:
        while True:
            runnable = runnable_now(self._proc)
            if runnable is not None:  # others only: the measurement's own running threads (this one too) left out
                self._runnable.append(max(0, runnable - running_threads(self._own, self._proc)))
            if self._stop.wait(self._every):
                return

    @staticmethod
    def _waits(processes: Sequence[Path]) -> dict[Path, int]:
        return {task: wait for process in processes for task, wait in thread_waits(process).items()}


def _largest_share(start: Mapping[Path, int], end: Mapping[Path, int], wall: float) -> float | None:
    """The largest share of `wall` any one thread spent waiting for a CPU between the two readings (a thread born
    meanwhile from zero); None when no thread was read."""
    shares = [(wait - start.get(task, 0)) / 1e9 / wall for task, wait in end.items()]
    return max(shares) if shares else None


def server_processes(pid: int | None) -> list[int]:
    """The server's process and its descendants (their pids), or none when it is not known (a remote server)."""
    if pid is None:
        return []
    import psutil

    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return [pid]
