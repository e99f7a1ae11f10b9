"""The client's own condition: its event loop's lag, measured by queued probes, and its CPU share
(measurement/loop_lag.py); a result whose client fell behind says so in the load section (report/load.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from pytest_sglang_perf.measurement.client_load import ClientLoad, combined
from pytest_sglang_perf.measurement.loop_lag import LagMonitor, tail_lag
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.report.load import load_lines


async def _busy_then_idle(block: float) -> ClientLoad:
    async with LagMonitor(every=0.002) as monitor:
        await asyncio.sleep(0.05)
        stuck = time.perf_counter() + block
        while time.perf_counter() < stuck:  # the loop is stuck, busy: a probe queued meanwhile waits it out
            pass
        await asyncio.sleep(0.05)
    assert monitor.load is not None
    return monitor.load


def test_a_blocked_loop_shows_as_lag_and_an_idle_one_does_not() -> None:
    idle = asyncio.run(_busy_then_idle(0.0))  # a busy host delays it too: no absolute bound for the idle loop
    blocked = asyncio.run(_busy_then_idle(0.12))
    # a probe queued during the 120 ms block waits out the rest of it; on a loaded host the probe thread itself may
    # get the GIL only well into the block, and only a few times (it was once in a 30 ms block, beside two spinning
    # processes: too few for the tail, which is never the single worst probe), so 10 ms is the bound that holds
    assert blocked.lag_max >= 0.01 and blocked.behind and blocked.lag_max > idle.lag_max
    assert idle.probes >= 10
    assert idle.cpu_share < blocked.cpu_share <= 1.5  # the busy wait is the client's own CPU time
    assert ClientLoad.from_dict(blocked.to_dict()) == blocked


def test_rounds_combine_to_the_worst_lag_and_the_overall_cpu_share() -> None:
    a = ClientLoad(0.0001, 0.0002, 0.0003, 10, 0.5, 1.0)
    b = ClientLoad(0.0002, 0.004, 0.009, 30, 0.1, 3.0)
    both = combined([a, b])
    assert both is not None and (both.lag_p99, both.lag_max, both.probes) == (0.004, 0.009, 40)
    assert both.cpu_share == pytest.approx(0.2)
    assert combined([]) is None


def test_the_reads_stamps_are_said_summed_and_kept_only_when_counted() -> None:
    lags = (0.0001, 0.0002, 0.0003, 10, 0.5, 1.0)
    uncounted = ClientLoad(*lags)
    assert uncounted.describe().endswith("50% of a core") and "reads" not in uncounted.to_dict()
    assert ClientLoad.from_dict(uncounted.to_dict()) == uncounted  # a results file from before the counts
    kernel = ClientLoad(*lags, reads=90, kernel_stamped=90, chunks=80, shared=2)
    loop = ClientLoad(*lags, reads=10, kernel_stamped=0, chunks=9, shared=1)
    assert kernel.describe().endswith("50% of a core, kernel stamps")
    assert loop.describe().endswith("50% of a core, loop stamps")
    both = combined([kernel, loop])
    assert both is not None and (both.reads, both.kernel_stamped, both.chunks, both.shared) == (100, 90, 89, 3)
    assert both.describe().endswith(", kernel stamps on 90% of reads")
    assert ClientLoad.from_dict(both.to_dict()) == both


def test_a_result_whose_client_fell_behind_is_listed_with_a_warning() -> None:
    sample = Sample(ttft=0.05, e2e=1.0, decode_time=0.95, completion_tokens=100, prompt_tokens=10, chunks=100)
    params = RequestParams(prompt="p", max_tokens=100, repeats=1, warmup=0)
    result = Result("v", params, "h", (sample,), {"output_throughput": Summary.of([100.0])}, 1.0, False,
                    client=ClientLoad(0.0005, 0.003, 0.004, 100, 0.9, 1.0))
    lines = " ".join(" ".join(load_lines([("t.py::t", result)], simulated=False)).split())
    assert ("t.py::t [v]: one stream x 1 requests: 100.0 tok/s; client lag p50/p99/max 0.50/3.00/4.00 ms, 90% of a "
            "core; THE CLIENT FELL BEHIND (lag p99 above 1 ms): these timings include its own delay") in lines
    brief = " ".join(" ".join(load_lines([("t.py::t", result)], simulated=False, verbose=False)).split())
    assert brief == ("sglang-perf: the client fell behind in 1 one-stream cell(s) (event-loop lag p99 above 1 ms): "
                     "their timings may be off by up to that lag (-v names them and says how)")
    calm = Result("v", params, "h", (sample,), {"output_throughput": Summary.of([100.0])}, 1.0, False,
                  client=ClientLoad(0.00001, 0.0001, 0.0002, 100, 0.1, 1.0))
    assert load_lines([("t.py::t", calm)], simulated=False) == []


@pytest.mark.parametrize(("shared", "said"), [
    ((0, 0), "the kernel's stamps kept every chunk's own time"),
    ((0, 2), "in 1 the kernel's stamps kept every chunk's own time; the others' may be off by up to that lag"),
    ((3, 2), "their timings may be off by up to that lag"),
])
def test_the_brief_count_says_whether_the_kernels_stamps_kept_the_timings(shared: tuple[int, int],
                                                                          said: str) -> None:
    """One-stream cells whose client fell behind, at pytest's default verbosity: a lag changed no timing where every
    read carried the kernel's stamp and no chunk came in one read with the one before it."""
    sample = Sample(ttft=0.05, e2e=1.0, decode_time=0.95, completion_tokens=100, prompt_tokens=10, chunks=100)
    params = RequestParams(prompt="p", max_tokens=100, repeats=1, warmup=0)
    behind = [Result("v", params, "h", (sample,), {"output_throughput": Summary.of([100.0])}, 1.0, False,
                     client=ClientLoad(0.0005, 0.003, 0.004, 100, 0.9, 1.0, reads=60, kernel_stamped=60, chunks=99,
                                       shared=count)) for count in shared]
    assert [result.client.untouched for result in behind if result.client] == [count == 0 for count in shared]
    brief = " ".join(" ".join(load_lines([(f"t.py::t{i}", r) for i, r in enumerate(behind)], simulated=False,
                                         verbose=False)).split())
    assert brief == ("sglang-perf: the client fell behind in 2 one-stream cell(s) (event-loop lag p99 above 1 ms): "
                     f"{said} (-v names them and says how)")
    loop_stamped = ClientLoad(0.0005, 0.003, 0.004, 100, 0.9, 1.0, reads=60, kernel_stamped=59, chunks=99, shared=0)
    assert not loop_stamped.untouched and not ClientLoad(0.0005, 0.003, 0.004, 100, 0.9, 1.0).untouched


@pytest.mark.parametrize(("reads", "stamped", "chunks", "shared", "effect"), [
    (0, 0, 0, 0, "these timings include its own delay"),  # not counted (the aiohttp reader)
    (50, 0, 48, 3, "these timings include its own delay"),  # loop stamps: taken when the loop got to each read
    (50, 50, 48, 0, "no chunk came in one read with the one before it, so every kernel-stamped chunk kept its own "
                    "time"),  # behind, but never by the gap between two of a stream's chunks
    (50, 50, 48, 3, "3 of 48 chunks came in one read with the one before it and share that read's stamp"),
    (50, 40, 48, 3, "its loop-stamped reads (20%) include its delay, and 3 of 48 chunks came in one read with the "
                    "one before it and share that read's stamp"),
    (50, 50, 0, 0, "chunks that reached it while it was behind were read together and share the last one's "
                   "stamp"),  # a results file from before the chunks were counted
])
def test_what_falling_behind_did_depends_on_whose_stamps_the_reads_carried(reads: int, stamped: int, chunks: int,
                                                                             shared: int, effect: str) -> None:
    sample = Sample(ttft=0.05, e2e=1.0, decode_time=0.95, completion_tokens=100, prompt_tokens=10, chunks=100)
    params = RequestParams(prompt="p", max_tokens=100, repeats=4, warmup=0)
    client = ClientLoad(0.0005, 0.003, 0.004, 100, 0.9, 1.0, reads=reads, kernel_stamped=stamped, chunks=chunks,
                        shared=shared)
    result = Result("v", params, "h", (sample,), {"output_throughput": Summary.of([100.0])}, 1.0, False,
                    client=client)
    lines = " ".join(" ".join(load_lines([("t.py::t", result)], simulated=False)).split())
    assert lines.endswith(f"; THE CLIENT FELL BEHIND (lag p99 above 1 ms): {effect}"), lines


def test_the_tail_lag_is_never_one_late_probe() -> None:
    calm = [0.0003] * 70
    assert tail_lag([*calm, 0.012]) == 0.0003  # one garbage collection in a short cell: not a client behind
    assert tail_lag([*calm, 0.012, 0.006]) == 0.006  # two late probes: the second one is the tail
    many = [0.0003] * 900 + [0.004] * 100  # enough probes for a real p99
    assert tail_lag(many) == 0.004 and tail_lag([0.002]) == 0.002
