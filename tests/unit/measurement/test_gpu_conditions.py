"""The server GPUs' conditions against a fake NVML (tests/fake_nvml/pynvml.py, pynvml's names and units): what is
read (measurement/nvml.py), which GPUs are the server's and which processes are not (gpu_watch.py), a watch's
summary (gpu_conditions.py), what disturbs a verdict (gate/conditions.py) and the pre-measurement check
(gate/precheck.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.config.conditions import ConditionLimits
from pytest_sglang_perf.gate import precheck as precheck_module
from pytest_sglang_perf.gate.conditions import disturbance, gpu_disturbance
from pytest_sglang_perf.gate.precheck import current_problems, precheck
from pytest_sglang_perf.measurement.gpu_conditions import GpuCondition, GpuProcess, reason_names
from pytest_sglang_perf.measurement.gpu_watch import GpuWatch, ServerGpus, server_gpus
from pytest_sglang_perf.measurement.nvml import Nvml, open_nvml
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result, conditions_record
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

FAKE = Path(__file__).resolve().parents[2] / "fake_nvml"
GIB = 2**30
HW_THERMAL, POWER_CAP, IDLE = 0x40, 0x4, 0x1


def h200(**changes: Any) -> dict[str, Any]:
    gpu = {"name": "NVIDIA H200", "sm": 1980, "sm_max": 1980, "memory": 3201, "memory_max": 3201, "reasons": 0,
           "temperature": 40, "power_mw": 450_000, "power_limit_mw": 700_000, "processes": [], "utilization": 60}
    return {**gpu, **changes}


@pytest.fixture
def gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set the fake GPUs' state (`gpus(h200(), h200(reasons=...), old=True)`); pynvml is the fake meanwhile."""
    state = tmp_path / "nvml.json"
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)

    def write(*found: dict[str, Any], **flags: Any) -> None:
        text = json.dumps({"gpus": list(found), **flags})
        state.with_suffix(".tmp").write_text(text)
        state.with_suffix(".tmp").replace(state)  # a watching thread never reads half a file

    write(h200())
    yield write
    sys.modules.pop("pynvml", None)


def nvml() -> Nvml:
    found, why = open_nvml()
    assert found is not None, why
    return found


def test_readings_in_the_plugins_units(gpus: Callable[..., None]) -> None:
    gpus(h200(sm=1410, reasons=POWER_CAP | 0x2, processes=[{"pid": 7, "memory": 3 * GIB}]))
    reader = nvml()
    limits, reading = reader.limits(0), reader.read(0)
    assert (limits.name, limits.sm_max_mhz, limits.memory_max_mhz, limits.power_limit_w) == \
        ("NVIDIA H200", 1980, 3201, 700.0)  # a name in bytes decoded, milliwatts as watts
    assert (reading.sm_mhz, reading.memory_mhz, reading.temperature, reading.power_w) == (1410, 3201, 40, 450.0)
    assert reading.busy and reason_names(reading.reasons) == ("applications clocks", "power cap")
    assert reading.processes == (GpuProcess(7, 3 * GIB),) and reader.pids(0) == {7}


def test_what_nvml_does_not_support_is_left_out_and_old_packages_still_say_why(gpus: Callable[..., None]) -> None:
    gpu = h200(reasons=HW_THERMAL)
    del gpu["power_mw"], gpu["power_limit_mw"], gpu["utilization"]
    gpus(gpu, old=True)
    reader = nvml()
    reading = reader.read(0)
    assert reading.power_w is None and reader.limits(0).power_limit_w is None and reading.utilization is None
    assert reason_names(reading.reasons) == ("hw thermal slowdown",)  # ...ThrottleReasons answered
    assert reading.busy  # no utilization: busy when NVML does not say idle
    gpus({**gpu, "reasons": IDLE}, old=True)
    assert not reader.read(0).busy


def test_nvml_that_cannot_start_or_is_missing_says_why(gpus: Callable[..., None]) -> None:
    gpus(h200(), starts=False)
    assert open_nvml() == (None, "NVML did not start: Driver Not Loaded")
    gpus(h200(lost=True))
    with pytest.raises(Exception, match="GPU is lost"):
        nvml().read(0)
    missing, why = open_nvml("pynvml_not_installed_here")
    assert missing is None and why is not None and "pip install 'pytest-sglang-perf[gpu]'" in why


def test_the_servers_gpus_are_those_nvml_shows_its_processes_on(gpus: Callable[..., None]) -> None:
    server, other = 4101, 4202
    gpus(h200(processes=[{"pid": other, "memory": GIB}]), h200(processes=[{"pid": server, "memory": 70 * GIB}]),
         h200(processes=[{"pid": server + 1, "memory": 70 * GIB}]))
    found = server_gpus(nvml(), [server, server + 1], os.getpid(), visible="0,1")
    assert found == ServerGpus((1, 2), frozenset({server, server + 1, os.getpid()}), True)
    gpus(h200(processes=[{"pid": os.getpid()}]), h200(processes=[{"pid": server}]))  # the test itself uses CUDA
    found = server_gpus(nvml(), [server], os.getpid(), visible=None)
    assert found is not None and found.indices == (1,)  # the measuring process never makes a GPU the server's


def test_in_another_pid_namespace_the_given_gpus_are_watched_and_no_process_is_called_foreign(
        gpus: Callable[..., None]) -> None:
    gpus(h200(processes=[{"pid": 99, "memory": GIB}]), h200(processes=[{"pid": 98, "memory": GIB}]))
    found = server_gpus(nvml(), [4101], 1, visible="1")
    assert found is not None and (found.indices, found.foreign_known) == ((1,), False)
    assert server_gpus(nvml(), [4101], 1, visible=None) is None  # a CPU server: none of its processes on a GPU
    assert server_gpus(nvml(), [4101], 1, visible="GPU-8f2e") is None  # a UUID cannot be matched to NVML's index


def test_with_nothing_naming_them_the_gpus_sglang_picks_are_watched(gpus: Callable[..., None]) -> None:
    """NVML lists none of the server's processes (another pid namespace) and no CUDA_VISIBLE_DEVICES is set: the
    GPUs SGLang picks by default (session/gpus.py default_gpus) are watched, none called foreign by pid; a default
    beyond the GPUs NVML shows, or one under a CUDA_VISIBLE_DEVICES it cannot match, is not."""
    gpus(h200(), h200())
    found = server_gpus(nvml(), [4101], 1, visible=None, default=(0, 1))
    assert found is not None and (found.indices, found.foreign_known) == ((0, 1), False)
    assert server_gpus(nvml(), [4101], 1, visible=None, default=(1, 2)) is None
    assert server_gpus(nvml(), [4101], 1, visible="GPU-8f2e", default=(0,)) is None


def test_a_watch_counts_clocks_only_while_the_gpu_worked_and_lists_other_processes(
        gpus: Callable[..., None]) -> None:
    server = ServerGpus((0,), frozenset({4101}), True)
    gpus(h200(sm=345, memory=405, reasons=IDLE, utilization=0, processes=[{"pid": 4101, "memory": 70 * GIB}]))
    with GpuWatch(nvml(), server, every=0.01) as watch:
        time.sleep(0.05)  # idle first: low clocks on purpose, not counted
        gpus(h200(sm=1700, reasons=POWER_CAP, temperature=71,
                  processes=[{"pid": 4101, "memory": 70 * GIB}, {"pid": 5555, "memory": 2 * GIB}]))
        time.sleep(0.08)
    assert watch.conditions is not None
    [gpu] = watch.conditions
    assert gpu.samples > gpu.busy_samples > 0 and gpu.sm_mhz == 1700 and gpu.memory_mhz == 3201
    assert gpu.reasons == ("power cap",) and gpu.temperature_max == 71 and gpu.power_w == 450.0
    assert gpu.foreign == (GpuProcess(5555, 2 * GIB),)
    assert gpu.busy_before is None  # idle before the measurement: the server's own work during it is not "before"
    assert gpu.describe() == ("GPU 0 (NVIDIA H200): SM 1700/1980 MHz, memory 3201/3201 MHz, 71 °C max, 450/700 W, "
                              "reasons: power cap; 1 other process(es) (pid 5555, 2.0 GiB)")
    assert GpuCondition.from_dict(json.loads(json.dumps(gpu.to_dict()))) == gpu


def _gpu(**changes: Any) -> GpuCondition:
    calm = GpuCondition(index=0, name="NVIDIA H200", samples=10, busy_samples=9, sm_mhz=1980, sm_max_mhz=1980,
                        memory_mhz=3201, memory_max_mhz=3201, reasons=(), temperature_max=60, power_w=400.0,
                        power_limit_w=700.0, foreign=())
    return GpuCondition(**{**calm.__dict__, **changes})


@pytest.mark.parametrize(("gpu", "reason"), [
    (_gpu(), None),
    (_gpu(reasons=("power cap",), sm_mhz=1600), None),  # 81% of the maximum: a GPU at its power limit works so
    (_gpu(reasons=("hw thermal slowdown",), temperature_max=91),
     "GPU 0 slowed down: hw thermal slowdown (91 °C max)"),
    (_gpu(sm_mhz=1200, reasons=("power cap",)), None),  # 61%: a power-capped GPU at full work may run so
    (_gpu(sm_mhz=900, reasons=("applications clocks",)),
     "GPU 0 SM clock low: 900 of 1980 MHz while working (45%, limit 50%); reasons: applications clocks"),
    (_gpu(memory_mhz=1593), "GPU 0 memory clock low: 1593 of 3201 MHz while working (50%, limit 90%)"),
    (_gpu(sm_mhz=345, memory_mhz=405, busy_samples=0), None),  # idle throughout: its clocks say nothing
    (_gpu(foreign=(GpuProcess(5555, 2 * GIB),)), "another process on GPU 0: pid 5555 (2.0 GiB)"),
    (_gpu(busy_before=100, foreign_known=False),
     "GPU 0 busy before the measurement while the server had no request: utilization 100% in 3 readings over 1.2 s; "
     "NVML lists none of the server's processes (another pid namespace), so this utilization stands in for another "
     "process on it"),
    (_gpu(busy_before=35), "GPU 0 busy before the measurement while the server had no request: utilization 35% in 3 "
     "readings over 1.2 s (NVML lists no other process on it)"),
])
def test_what_makes_a_gpu_disturb_a_measurement(gpu: GpuCondition, reason: str | None) -> None:
    assert gpu_disturbance(gpu, ConditionLimits()) == reason


def test_limits_are_the_users_and_a_result_carries_its_gpus_into_the_records() -> None:
    shared = _gpu(foreign=(GpuProcess(5555, None),), sm_mhz=1400)
    assert gpu_disturbance(shared, ConditionLimits(allow_foreign_gpu_processes=True)) is None
    sample = Sample(ttft=0.05, e2e=1.0, decode_time=0.95, completion_tokens=100, prompt_tokens=10, chunks=100)
    result = Result("v", RequestParams(prompt="p", max_tokens=100, repeats=1, warmup=0), "h", (sample,),
                    {"output_throughput": Summary.of([100.0])}, 1.0, False, gpu=(shared,))
    assert disturbance(result, ConditionLimits(min_sm_clock=0.75)) == \
        "GPU 0 SM clock low: 1400 of 1980 MHz while working (71%, limit 75%)"
    assert disturbance(result, ConditionLimits()) == "another process on GPU 0: pid 5555"
    assert conditions_record(result) == {"client": None, "host": None, "gpu": [shared.to_dict()]}


def test_the_precheck_names_what_is_wrong_before_the_first_measurement(
        gpus: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precheck_module, "BUSY_CONFIRM", 0.01)
    gpus(h200(reasons=IDLE | HW_THERMAL, temperature=88, utilization=0, processes=[{"pid": 4101}, {"pid": 5555}]),
         h200(reasons=0, utilization=35, processes=[{"pid": 4101}]),  # kernels ran: busy
         h200(reasons=0, utilization=0, processes=[{"pid": 4101}]))  # a live CUDA context, no kernel: idle
    server = ServerGpus((0, 1, 2), frozenset({4101}), True)
    problems = current_problems(ConditionLimits(), [], (nvml(), server), sample=lambda: 0)
    assert problems == ["GPU 0 has 1 other process(es) on it (pid 5555)",
                        "GPU 0 is slowed down: hw thermal slowdown at 88 °C",
                        "GPU 1 is busy before any request (utilization 35%)"]
    busy = current_problems(ConditionLimits(), [], None, sample=lambda: 40)
    assert len(busy) == 1 and busy[0].startswith("the host is busy (40.0 other runnable tasks on ")


def test_the_precheck_waits_a_bounded_time_for_the_gpu_to_clear(
        gpus: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precheck_module, "POLL_EVERY", 0.02)
    server = ServerGpus((0,), frozenset({4101}), True)
    gpus(h200(reasons=IDLE, utilization=0, processes=[{"pid": 4101}, {"pid": 5555}]))
    said: list[str] = []
    clear = threading.Timer(0.1, lambda: gpus(h200(reasons=IDLE, utilization=0, processes=[{"pid": 4101}])))
    clear.start()
    left = precheck(ConditionLimits(wait_before_measuring=5.0), said.append, name="tp2", pids=[],
                    gpus=(nvml(), server), sample=lambda: 0)
    clear.join()
    assert left == []
    assert said == ["[tp2] before the first measurement: GPU 0 has 1 other process(es) on it (pid 5555); waiting up "
                    "to 5 s for it to clear", "[tp2] cleared: measuring"]

    gpus(h200(reasons=IDLE, utilization=0, processes=[{"pid": 5555}]))
    said.clear()
    left = precheck(ConditionLimits(wait_before_measuring=0.05), said.append, name="tp2", pids=[],
                    gpus=(nvml(), server), sample=lambda: 0)
    assert left == ["GPU 0 has 1 other process(es) on it (pid 5555)"]
    assert said[-1] == "[tp2] still after 0.05 s: GPU 0 has 1 other process(es) on it (pid 5555); measuring anyway"
    said.clear()
    precheck(ConditionLimits(), said.append, name="tp2", pids=[], gpus=(nvml(), server), sample=lambda: 0)
    assert said == ["[tp2] before the first measurement: GPU 0 has 1 other process(es) on it (pid 5555); measuring "
                    "anyway (conditions.wait_before_measuring waits a bounded time for it to clear)"]


def test_nvml_breaking_off_mid_measurement_is_said_and_the_measurement_stands(gpus: Callable[..., None]) -> None:
    server = ServerGpus((0,), frozenset({4101}), True)
    heard: list[str] = []
    with GpuWatch(nvml(), server, every=0.01, failed=heard.append, confirm_every=0.01) as watch:
        time.sleep(0.03)
        gpus(h200(lost=True))  # an error that is not "not supported": no reading of zeros, the failure said
        time.sleep(0.03)
    assert watch.conditions is None
    assert heard == ["the GPUs' conditions of this measurement are not recorded: NVML failed (NVMLError: GPU is "
                     "lost)"]


def test_an_idle_gpus_reasons_say_nothing_and_unknown_utilization_is_not_busy_before_requests(
        gpus: Callable[..., None]) -> None:
    server = ServerGpus((0,), frozenset({4101}), True)
    gpus(h200(reasons=IDLE | HW_THERMAL, utilization=0))
    with GpuWatch(nvml(), server, every=0.01) as watch:
        time.sleep(0.03)
    assert watch.conditions is not None and watch.conditions[0].reasons == () and not watch.conditions[0].busy_samples
    no_utilization = h200(reasons=0)
    del no_utilization["utilization"]
    gpus(no_utilization)
    assert current_problems(ConditionLimits(), [], (nvml(), server), sample=lambda: 0) == []


def test_a_failing_cells_conditions_lines_name_its_gpus() -> None:
    from pytest_sglang_perf.gate.failing import conditions_lines

    sample = Sample(ttft=0.05, e2e=1.0, decode_time=0.95, completion_tokens=100, prompt_tokens=10, chunks=100)
    shared = _gpu(foreign=(GpuProcess(77, None),))
    result = Result("v", RequestParams(prompt="p", max_tokens=100, repeats=1, warmup=0), "h", (sample,),
                    {"output_throughput": Summary.of([100.0])}, 1.0, False, gpu=(shared,))
    assert " ".join(" ".join(conditions_lines(result, None)).split()) == (  # wrapped at 120
        "conditions: GPU 0 (NVIDIA H200): SM 1980/1980 MHz, memory 3201/3201 MHz, 60 °C max, 400/700 W; 1 other "
        "process(es) (pid 77)")


def test_a_gpu_busy_before_the_measurement_is_kept_only_when_every_confirming_reading_found_it_busy(
        gpus: Callable[..., None]) -> None:
    """The server has no request before the measurement: a GPU that runs kernels then is someone else's work, but only
    when it keeps running them; a blip (the tail of the server's own warm-up or last cell) is not counted."""
    server = ServerGpus((0, 1), frozenset({4101}), False)  # NVML lists none of the server's processes
    gpus(h200(utilization=100), h200(utilization=0))
    with GpuWatch(nvml(), server, every=0.01, confirm_every=0.02) as watch:
        time.sleep(0.03)
    assert watch.conditions is not None
    saturated, idle = watch.conditions
    assert (saturated.busy_before, idle.busy_before) == (100, None)
    assert saturated.describe().endswith(", busy before the measurement (100%); other processes not known (the "
                                         "server's pids are not NVML's: another pid namespace)")
    assert GpuCondition.from_dict(json.loads(json.dumps(saturated.to_dict()))) == saturated

    gpus(h200(utilization=100), h200(utilization=0))
    blip = threading.Timer(0.05, lambda: gpus(h200(utilization=0), h200(utilization=0)))
    blip.start()
    with GpuWatch(nvml(), server, every=0.01, confirm_every=0.25) as watch:  # busy at the first reading only
        gpus(h200(utilization=90), h200(utilization=90))  # then the measurement itself: the server's work
        time.sleep(0.03)
    blip.join()
    assert watch.conditions is not None and [gpu.busy_before for gpu in watch.conditions] == [None, None]
    assert all(gpu.busy_samples for gpu in watch.conditions)


def test_a_gpu_shared_on_purpose_is_not_disturbed_by_being_busy_before(gpus: Callable[..., None],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precheck_module, "BUSY_CONFIRM", 0.01)
    shared = ConditionLimits(allow_foreign_gpu_processes=True)
    assert gpu_disturbance(_gpu(busy_before=100, foreign_known=False), shared) is None
    gpus(h200(utilization=100))
    server = ServerGpus((0,), frozenset({4101}), False)
    assert current_problems(shared, [], (nvml(), server), sample=lambda: 0) == []
    assert current_problems(ConditionLimits(), [], (nvml(), server), sample=lambda: 0) == [
        "GPU 0 is busy before any request (utilization 100%)"]
