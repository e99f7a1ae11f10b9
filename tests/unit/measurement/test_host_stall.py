"""The host's stall readings (issue 29, item 2): a run whose server logged half its usual speed was judged undisturbed
from its runnable tasks (0.18-0.57 besides its own, steal 0) while the load average it recorded was 12.38. The
runnable count leaves out tasks in uninterruptible sleep, which the load average counts; the kernel's pressure stall
information (/proc/pressure/*, Documentation/accounting/psi.rst) measures the time they lose. These tests feed the
readers the kernel's own text (as read on the 6.18 dev VM) from a stand-in /proc folder."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate.conditions import disturbance
from pytest_sglang_perf.measurement.host_load import HostLoad, HostWatch, stall_shares, stall_totals
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.stats import Summary

STAT = ("cpu  {busy} 0 5000 {idle} 300 0 40 0 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\nintr 0\nctxt 1\nbtime 1\n"
        "processes 29284\nprocs_running 3\nprocs_blocked {blocked}\n")


def pressure(some: int, full: int | None = None, avg10: float = 0.47) -> str:
    """/proc/pressure/<resource> as the kernel writes it (kernel/sched/psi.c psi_show)."""
    lines = [f"some avg10={avg10:.2f} avg60=0.49 avg300=1.18 total={some}",
             f"full avg10=0.00 avg60=0.00 avg300=0.00 total={some if full is None else full}"]
    return "\n".join(lines) + "\n"


def fake_proc(root: Path, *, memory: int, io: int = 31851446, load: str = "0.17 0.42 0.28 2/155 29284") -> Path:
    (root / "pressure").mkdir(parents=True, exist_ok=True)
    (root / "pressure" / "cpu").write_text(pressure(616571959, full=0))
    (root / "pressure" / "io").write_text(pressure(io, full=27897360, avg10=0.21))
    (root / "pressure" / "memory").write_text(pressure(memory, avg10=0.0))
    (root / "loadavg").write_text(load + "\n")
    (root / "stat").write_text(STAT.format(busy=1000, idle=9000, blocked=0))
    return root


def half_speed_run(**stalls: float) -> Result:
    """The readings of the half-speed run: few other runnable tasks, no steal, a load average of 12.38."""
    host = HostLoad(cores=2, runnable=0.4, busy=0.6, steal=0.0, iowait=0.05, load1=12.38, samples=40,
                    server_wait=0.01, client_wait=0.02, **stalls)
    return Result("v", RequestParams(prompt="p", max_tokens=10, repeats=1, warmup=0), "h", (),
                  {"ttft": Summary.of([0.1])}, 1.0, True, host=host)


def test_the_stall_totals_are_read_from_the_kernels_text(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, memory=0)
    assert stall_totals(proc) == {"cpu": 616571959, "io": 31851446, "memory": 0}
    (proc / "pressure" / "memory").unlink()  # a kernel without memory pressure (or psi=0: the read fails)
    (proc / "pressure" / "io").write_text("")
    assert stall_totals(proc) == {"cpu": 616571959}
    assert stall_totals(tmp_path / "elsewhere") == {}  # no PSI at all: nothing, and nothing decided from it


def test_stall_shares_are_time_over_the_measurements_wall_time() -> None:
    start = {"cpu": 1_000_000, "io": 5_000_000, "memory": 0}
    end = {"cpu": 1_200_000, "io": 5_000_000, "memory": 2_000_000, "extra": 9}  # 4 s of wall time
    assert stall_shares(start, end, 4.0) == {"stall_cpu": 0.05, "stall_io": 0.0, "stall_memory": 0.5}
    assert stall_shares(start, {**end, "memory": 9_000_000}, 4.0)["stall_memory"] == 1.0  # at most all of it
    assert stall_shares({"cpu": 200_000}, end, 4.0) == {"stall_cpu": 0.25}  # a resource read at both ends only


def test_a_watch_records_the_stall_of_its_measurement(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, memory=100_000_000)
    stalled = threading.Timer(0.05, lambda: fake_proc(tmp_path, memory=100_000_000 + 60_000_000,
                                                      load="12.38 9.10 4.02 3/155 29290"))
    stalled.start()
    with HostWatch([], proc, every=0.01) as watch:
        time.sleep(0.15)
        (proc / "stat").write_text(STAT.format(busy=1100, idle=9100, blocked=9))
    stalled.join()
    host = watch.load
    assert host is not None and host.stall_memory == 1.0  # 60 s of stall in a fraction of a second: all of it
    assert (host.stall_cpu, host.stall_io, host.load1) == (0.0, 0.0, 12.38)
    assert host.describe().endswith("load 12.38; stalled cpu 0%, io 0%, memory 100%")
    assert HostLoad.from_dict(host.to_dict()) == host


def test_the_half_speed_run_is_disturbed_by_its_stall_not_by_its_runnable_tasks() -> None:
    assert disturbance(half_speed_run(), ConditionLimits()) is None  # what it was judged on: no runnable others
    assert disturbance(half_speed_run(stall_cpu=0.9, stall_io=0.02, stall_memory=0.0), ConditionLimits()) is None
    assert disturbance(half_speed_run(stall_cpu=0.3, stall_io=0.02, stall_memory=0.45), ConditionLimits()) == (
        "host stalled: tasks waited for memory during 45% of the measurement (/proc/pressure/memory, limit 20%); "
        "load 12.38 beside 0.4 other runnable tasks on 2 cores")
    assert disturbance(half_speed_run(stall_io=0.5), ConditionLimits(max_stall=0.6)) is None
    assert disturbance(half_speed_run(stall_io=0.5), ConditionLimits()) == (
        "host stalled: tasks waited for io during 50% of the measurement (/proc/pressure/io, limit 20%); load 12.38 "
        "beside 0.4 other runnable tasks on 2 cores")
