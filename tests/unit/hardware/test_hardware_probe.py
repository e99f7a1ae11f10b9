"""hardware/: the GPU probe with fake torch / pynvml modules (its bandwidth and GEMM measurements), its report's
round trip, and the child process (fake interpreters that crash, hang or print nothing; the real one of this machine,
which has no GPU)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_sglang_perf.hardware import facts, gemm
from pytest_sglang_perf.hardware.__main__ import human
from pytest_sglang_perf.hardware.bandwidth import GIB, BandwidthMeasurement, buffer_bytes, gb_s
from pytest_sglang_perf.hardware.facts import GpuFacts
from pytest_sglang_perf.hardware.gemm import GemmMeasurement, square_size
from pytest_sglang_perf.hardware.probe import INSTALL, ProbeReport, probe, probe_in_subprocess

REPO = Path(__file__).resolve().parents[3]
SGLANG_CPU_PYTHON = Path.home() / ".cache/pytest-sglang-perf/tox/sglang-cpu/bin/python"
H200 = {"name": "NVIDIA H200", "major": 9, "minor": 0, "total_memory": 143771 * 2**20, "clock_rate": 1980000,
        "memory_clock_rate": 2619000, "uuid": "58b3bbfa-0000-4000-8000-00000000000a", "free": 140 * 10**9}
A6000 = {"name": "NVIDIA RTX A6000", "major": 8, "minor": 6, "total_memory": 49140 * 2**20, "clock_rate": 1800000,
         "memory_clock_rate": 8001000, "uuid": "0c1d2e3f-0000-4000-8000-00000000000b", "free": 10 * GIB}


@dataclass
class Clock:
    """The fake GPU's time: each kernel advances it by the next duration its kind was given (milliseconds; 1 once
    they are used up, or for a kind given none)."""

    durations: dict[str, list[float]]
    now: float = 0.0
    launched: list[tuple[str, str]] = field(default_factory=list)

    def run(self, kind: str, device: str) -> None:
        self.launched.append((kind, device))
        left = self.durations.get(kind)
        self.now += left.pop(0) if left else 1.0


def fake_torch(gpus: list[dict[str, Any]], clock: Clock, *, cuda: bool = True, ones: Callable[..., Any] | None = None,
               matmul: Callable[..., Any] | None = None) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__ = "2.11.0+cu128"  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(cuda="12.8")  # type: ignore[attr-defined]
    torch.bfloat16 = "bfloat16"  # type: ignore[attr-defined]

    class Tensor:
        def __init__(self, numel: int, device: str) -> None:
            self.numel, self.device = numel, device

        def sum(self) -> None:
            clock.run("read", self.device)

        def copy_(self, other: Tensor) -> None:
            clock.run("copy", self.device)

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            self.time = 0.0

        def record(self) -> None:
            self.time = clock.now

        def elapsed_time(self, end: Event) -> float:
            return end.time - self.time

    @contextmanager
    def device(index: int) -> Any:
        yield

    torch.ones = ones or (lambda numel, dtype, device: Tensor(numel, device))  # type: ignore[attr-defined]
    torch.empty_like = lambda t: Tensor(t.numel, t.device)  # type: ignore[attr-defined]
    torch.randn = torch.empty = lambda rows, cols, dtype, device: Tensor(rows * cols, device)  # type: ignore[attr-defined]
    torch.matmul = matmul or (lambda a, b, out: clock.run("matmul", a.device))  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: cuda, device_count=lambda: len(gpus) if cuda else 0,
        get_device_properties=lambda i: types.SimpleNamespace(**gpus[i]),
        get_device_name=lambda i: gpus[i]["name"], mem_get_info=lambda i: (gpus[i]["free"], gpus[i]["total_memory"]),
        device=device, synchronize=lambda: None, empty_cache=lambda: None, Event=Event,
    )
    return torch


class NVMLError(Exception):
    pass


def fake_pynvml(gpus: list[dict[str, Any]], *, starts: bool = True) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")

    def init() -> None:
        if not starts:
            raise NVMLError("Driver Not Loaded")

    def power(handle: dict[str, Any]) -> int:
        if "power_mw" not in handle:
            raise NVMLError("Not Supported")
        return int(handle["power_mw"])

    nvml.__dict__.update(
        NVMLError=NVMLError, NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, nvmlInit=init, nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "570.124.06", nvmlSystemGetCudaDriverVersion=lambda: 12080,
        nvmlDeviceGetCount=lambda: len(gpus), nvmlDeviceGetHandleByIndex=lambda i: gpus[i],
        nvmlDeviceGetName=lambda h: h["name"].encode(),  # old nvidia-ml-py answers bytes
        nvmlDeviceGetUUID=lambda h: "GPU-" + h["uuid"].upper(),
        nvmlDeviceGetCudaComputeCapability=lambda h: (h["major"], h["minor"]),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=h["total_memory"]),
        nvmlDeviceGetMaxClockInfo=lambda h, clock: {1: 1980, 2: 3201}[clock],
        nvmlDeviceGetPowerManagementLimit=power,
    )
    return nvml


@pytest.fixture
def modules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Install fake torch / pynvml modules (None: not installed) and a driver version file."""
    version_file = tmp_path / "version"
    version_file.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    monkeypatch.setattr(facts, "DRIVER_FILE", version_file)

    def install(torch: types.ModuleType | None, pynvml: types.ModuleType | None) -> None:
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "pynvml", pynvml)
    return install


def test_gpus_found_facts_and_one_measurement_per_model(modules: Callable[..., None]) -> None:
    clock = Clock({"read": [9.0, 9.0, 9.0, 0.5, 0.25, 0.3] + [0.4] * 17 + [8.0] * 3 + [0.3] * 20,
                   "copy": [9.0] * 3 + [0.6, 0.5] + [0.7] * 18,
                   "matmul": [9.0] * 10 + [1.5, 1.375] + [1.4] * 18 + [9.0] * 10 + [2.75] * 20})
    modules(fake_torch([H200, H200, A6000], clock), None)
    report = probe()
    assert report.gpus[0] == GpuFacts(0, "NVIDIA H200", "9.0", 143771, "570.124.06", "12.8", 1980, 2619, None)
    assert [(g.index, g.name, g.sm) for g in report.gpus[1:]] == [(1, "NVIDIA H200", "9.0"),
                                                                    (2, "NVIDIA RTX A6000", "8.6")]
    assert report.via == "torch 2.11.0+cu128" and report.skipped is None
    assert sorted({device for _, device in clock.launched}) == ["cuda:0", "cuda:2"]  # once per GPU model
    h200 = report.bandwidth_for("NVIDIA H200")
    assert h200 is not None and h200.size_bytes == GIB and h200.repeats == 20
    assert h200.read_gb_s == pytest.approx(GIB / 0.25e-3 / 1e9)  # the best of 20, warm-up runs left out
    assert h200.median_gb_s == pytest.approx(GIB / 0.4e-3 / 1e9)
    assert h200.copy_gb_s == pytest.approx(2 * GIB / 0.5e-3 / 1e9)
    assert h200.method == "sum of a 1 GiB bf16 tensor, best of 20 (CUDA events, 3 warm-up runs)"
    a6000 = report.bandwidth_for("NVIDIA RTX A6000")
    assert a6000 is not None and a6000.size_bytes == 512 * 2**20  # 5% of 10 GiB free is less than 1 GiB
    assert a6000.read_gb_s == pytest.approx(512 * 2**20 / 0.3e-3 / 1e9) and "512 MiB" in a6000.method
    assert report.bandwidth_for("NVIDIA B200") is None
    h200_gemm, a6000_gemm = report.gemm_for("NVIDIA H200"), report.gemm_for("NVIDIA RTX A6000")
    assert h200_gemm is not None and (h200_gemm.m, h200_gemm.n, h200_gemm.k, h200_gemm.repeats) == (8192,) * 3 + (20,)
    assert h200_gemm.tflops == pytest.approx(2 * 8192**3 / 1.375e-3 / 1e12)  # the best of 20, warm-up left out
    assert h200_gemm.median_tflops == pytest.approx(2 * 8192**3 / 1.4e-3 / 1e12)
    assert h200_gemm.method == ("bf16 matmul (8192x8192)@(8192x8192) of random values, best of 20 "
                                "(CUDA events, 10 warm-up runs)")
    assert a6000_gemm is not None and a6000_gemm.tflops == pytest.approx(399.8, abs=0.1)
    assert report.gemm_for("NVIDIA B200") is None


def test_a_product_is_two_flops_per_multiply_add() -> None:
    assert gemm.flops(8192, 8192, 8192) == 2 * 8192**3 == 1_099_511_627_776
    assert gemm.flops(512, 6144, 4096) == 2 * 512 * 6144 * 4096
    assert gemm.tflops(2 * 10**12, 2.5) == pytest.approx(800.0)  # 2 TFLOP in 2.5 ms
    assert gemm.matrices_bytes(8192, 8192, 8192) == 3 * 128 * 2**20


def test_the_gemm_shrinks_until_its_three_matrices_fit_in_5_percent_of_free_memory() -> None:
    assert square_size(100 * GIB) == 8192  # 384 MiB in 5 GiB
    assert square_size(int(7.5 * GIB)) == 8192  # exactly 384 MiB
    assert square_size(4 * GIB) == 4096  # 96 MiB in 205 MiB
    assert square_size(GIB) == 2048
    assert square_size(0) == gemm.MIN_SIZE == 1024
    assert square_size(100 * GIB, size=2048) == 2048


def test_the_gemm_on_a_gpu_with_little_free_memory_or_of_a_given_shape(modules: Callable[..., None]) -> None:
    clock = Clock({"matmul": [1.0] * 10 + [0.25] * 5})
    torch = fake_torch([{**A6000, "free": 4 * GIB}], clock)
    small = gemm.measure(torch, 0, repeats=5)
    assert (small.m, small.n, small.k) == (4096, 4096, 4096) and small.tflops == pytest.approx(549.76, abs=0.01)
    assert "(4096x4096)@(4096x4096)" in small.method and "best of 5" in small.method
    shaped = gemm.measure(torch, 0, dims=(512, 6144, 4096), repeats=3, warmup=1)
    assert (shaped.m, shaped.n, shaped.k) == (512, 6144, 4096) and "(512x4096)@(4096x6144)" in shaped.method
    assert shaped.tflops == pytest.approx(2 * 512 * 6144 * 4096 / 1e-3 / 1e12)  # the clock's default 1 ms
    assert gemm.summary(small) == (f"NVIDIA RTX A6000: bf16 matmul 550 TFLOP/s (median 550); {small.method}")


def test_the_buffer_is_1_gib_or_5_percent_of_free_memory() -> None:
    assert buffer_bytes(100 * GIB) == GIB
    assert buffer_bytes(10 * GIB) == 512 * 2**20
    assert buffer_bytes(1001) == 50  # whole bf16 elements
    assert gb_s(4 * 10**9, 1.0) == 4000.0


def test_nvml_fills_what_torch_leaves_empty(modules: Callable[..., None]) -> None:
    old_torch = {k: v for k, v in H200.items() if k not in ("clock_rate", "memory_clock_rate")}
    modules(fake_torch([old_torch, A6000], Clock({"read": [], "copy": []})),
            fake_pynvml([A6000, {**H200, "power_mw": 700000}]))  # NVML's order differs from CUDA's
    report = probe(measure=False)
    h200, a6000 = report.gpus
    assert (h200.index, h200.power_limit_w, h200.sm_clock_mhz, h200.mem_clock_mhz) == (0, 700.0, 1980, 3201)
    assert (a6000.power_limit_w, a6000.sm_clock_mhz, a6000.mem_clock_mhz) == (None, 1800, 8001)  # torch's kept
    assert report.bandwidth == () and report.gemm == ()
    assert report.skipped == "bandwidth and GEMM rate not measured: asked not to (--no-measure)"


def test_no_gpu(modules: Callable[..., None]) -> None:
    modules(fake_torch([], Clock({}), cuda=False), None)
    report = probe()
    assert (report.gpus, report.bandwidth) == ((), ())
    assert report.skipped == "no GPU: torch.cuda.is_available() is false" and report.via == "torch 2.11.0+cu128"


def test_no_torch_but_nvml(modules: Callable[..., None]) -> None:
    modules(None, fake_pynvml([{**H200, "power_mw": 700000}, A6000]))
    report = probe()
    assert report.gpus[0] == GpuFacts(0, "NVIDIA H200", "9.0", 143771, "570.124.06", "12.8", 1980, 3201, 700.0)
    assert report.gpus[1].name == "NVIDIA RTX A6000" and report.gpus[1].power_limit_w is None
    assert report.bandwidth == () and report.via == "nvml (no torch: no bandwidth)"
    assert report.skipped == f"no torch: bandwidth not measured; {INSTALL}"


def test_no_torch_and_nvml_without_a_driver(modules: Callable[..., None]) -> None:
    modules(None, fake_pynvml([], starts=False))
    report = probe()
    assert report.gpus == () and report.skipped == "no GPU: NVML could not start: Driver Not Loaded; no torch"


def test_neither_torch_nor_nvml(modules: Callable[..., None]) -> None:
    modules(None, None)
    report = probe()
    assert (report.gpus, report.bandwidth, report.via) == ((), (), "nothing")
    assert report.skipped == "no torch and no nvidia-ml-py: pip install 'pytest-sglang-perf[probe]'"


def test_a_failed_measurement_keeps_the_facts_and_names_the_gpu(modules: Callable[..., None]) -> None:
    def out_of_memory(numel: int, dtype: str, device: str) -> None:
        raise RuntimeError("CUDA out of memory. Tried to allocate 1.00 GiB\nmore details")
    modules(fake_torch([H200], Clock({}), ones=out_of_memory), None)
    report = probe()
    assert report.gpus[0].name == "NVIDIA H200" and report.bandwidth == ()
    assert report.skipped == ("bandwidth not measured on GPU 0 (NVIDIA H200): RuntimeError: CUDA out of memory. "
                              "Tried to allocate 1.00 GiB")
    assert len(report.gemm) == 1  # the GEMM rate is still measured


def test_a_failed_gemm_keeps_the_bandwidth_and_names_the_gpu(modules: Callable[..., None]) -> None:
    def cublas_fails(a: object, b: object, out: object) -> None:
        raise RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`")
    modules(fake_torch([H200], Clock({}), matmul=cublas_fails), None)
    report = probe()
    assert len(report.bandwidth) == 1 and report.gemm == ()
    assert report.skipped == ("GEMM rate not measured on GPU 0 (NVIDIA H200): RuntimeError: CUDA error: "
                              "CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`")


def full_report() -> ProbeReport:
    gpu = GpuFacts(0, "NVIDIA H200", "9.0", 143771, "570.124.06", "12.8", 1980, 2619, 700.0)
    measured = BandwidthMeasurement("NVIDIA H200", 4400.5, 4390.0, GIB, 20, "sum of a 1 GiB bf16 tensor", 4300.0)
    rate = GemmMeasurement("NVIDIA H200", 790.4, 781.0, 8192, 8192, 8192, 20, "bf16 matmul (8192x8192)@(8192x8192)")
    return ProbeReport((gpu, GpuFacts(1, "NVIDIA H200", "9.0", 143771, None, None, None, None, None)),
                       (measured,), "torch 2.11.0+cu128", None, 1.25, (rate,))


def test_report_round_trip() -> None:
    report = full_report()
    assert ProbeReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    old = report.to_dict()
    del old["bandwidth"][0]["copy_gb_s"]  # an optional field may be absent
    assert ProbeReport.from_dict(old).bandwidth[0].copy_gb_s is None


def test_a_report_written_before_the_gemm_rate_reads_back_without_one() -> None:
    old = full_report().to_dict()
    del old["gemm"]
    report = ProbeReport.from_dict(json.loads(json.dumps(old)))
    assert report.gemm == () and report.gemm_for("NVIDIA H200") is None
    assert report.bandwidth == full_report().bandwidth


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["gpus"][0].pop("memory_mib"), "field 'gpus[0].memory_mib' is missing"),
    (lambda d: d["gpus"][1].update(memory_mib=12.5), "field 'gpus[1].memory_mib' must be an integer, got 12.5"),
    (lambda d: d["bandwidth"][0].update(read_gb_s="fast"), "field 'bandwidth[0].read_gb_s' must be a number, got"),
    (lambda d: d.update(skipped=3), "field 'skipped' must be a string or null, got 3"),
    (lambda d: d["gemm"][0].pop("k"), "field 'gemm[0].k' is missing"),
    (lambda d: d.update(gemm={}), "field 'gemm' must be a list, got {}"),
    (lambda d: d.update(gpus=None), "field 'gpus' must be a list, got None"),
])
def test_from_dict_names_the_bad_field(edit: Callable[[dict[str, Any]], object], message: str) -> None:
    data = full_report().to_dict()
    edit(data)
    with pytest.raises(ValueError, match="^probe report: " + message.replace("[", r"\[").replace("]", r"\]")):
        ProbeReport.from_dict(data)


def test_the_summary_for_a_person() -> None:
    assert human(full_report()).splitlines() == [
        "GPU 0: NVIDIA H200, SM 9.0, 143,771 MiB, driver 570.124.06, CUDA 12.8, max SM clock 1980 MHz, "
        "max memory clock 2619 MHz, power limit 700 W",
        "GPU 1: NVIDIA H200, SM 9.0, 143,771 MiB",
        "NVIDIA H200: read 4,400 GB/s (median 4,390), copy 4,300 GB/s; sum of a 1 GiB bf16 tensor",
        "NVIDIA H200: bf16 matmul 790 TFLOP/s (median 781); bf16 matmul (8192x8192)@(8192x8192)",
        "via torch 2.11.0+cu128 in 1.2 s",
    ]


def fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_crashing_probe_process_gives_a_skipped_report(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "echo 'Traceback ...' >&2\necho 'RuntimeError: CUDA driver failed' >&2\nexit 3")
    report = probe_in_subprocess(python=python, timeout=60)
    assert report.gpus == () and report.bandwidth == ()
    assert report.skipped == (f"the probe's process ({python} -m pytest_sglang_perf.hardware --json) exited with "
                              "code 3; its stderr ended: RuntimeError: CUDA driver failed")


def test_a_hanging_probe_process_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    python = fake_python(tmp_path, f"echo $$ > {pid_file}\necho 'initialising CUDA' >&2\nexec sleep 60")
    report = probe_in_subprocess(python=python, timeout=2, measure=False)
    assert report.skipped == (f"the probe's process ({python} -m pytest_sglang_perf.hardware --json --no-measure) "
                              "timed out after 2 s and was killed; its stderr ended: initialising CUDA")
    assert not psutil.pid_exists(int(pid_file.read_text()))


def test_a_grandchild_holding_the_output_cannot_keep_the_probe_waiting(tmp_path: Path) -> None:
    """The child exits at once, but a process it left holds the output pipe open: the whole group is killed."""
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    report = probe_in_subprocess(python=fake_python(tmp_path, f"sleep 60 &\necho $! > {pid_file}\nexit 0"),
                                 timeout=2)
    assert time.monotonic() - start < 30
    assert report.skipped is not None and "timed out after 2 s and was killed" in report.skipped
    assert _gone(int(pid_file.read_text()))


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """The process has exited (a zombie awaiting its new parent counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_a_probe_process_that_prints_no_report(tmp_path: Path) -> None:
    report = probe_in_subprocess(python=fake_python(tmp_path, "echo hello"), timeout=60)
    assert report.skipped is not None and "printed no report (Expecting value" in report.skipped


def test_the_report_the_probe_process_prints_is_read_back(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(json.dumps(full_report().to_dict()))
    report = probe_in_subprocess(python=fake_python(tmp_path, f"echo noise\ncat {tmp_path / 'report.json'}"))
    assert report == ProbeReport(**{**full_report().__dict__, "seconds": report.seconds})


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has GPUs: the probe measures them")
def test_this_machine_no_gpu_gives_a_skipped_report_with_the_reason() -> None:
    report = probe_in_subprocess(timeout=120)
    assert report.gpus == () and report.bandwidth == () and report.gemm == ()
    assert report.skipped is not None and report.skipped.startswith(("no torch", "no GPU")), report.skipped


@pytest.mark.slow
@pytest.mark.skipif(not SGLANG_CPU_PYTHON.exists(), reason="no sglang-cpu environment (tox -e sglang-cpu)")
def test_a_cpu_only_torch_says_there_is_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    report = probe_in_subprocess(python=str(SGLANG_CPU_PYTHON), timeout=180)
    assert report.via.startswith("torch ") and report.gpus == ()
    assert report.skipped == "no GPU: torch.cuda.is_available() is false"


def test_importing_the_package_imports_neither_torch_nor_pynvml() -> None:
    code = ("import sys, pytest_sglang_perf.hardware.probe, pytest_sglang_perf.hardware.__main__\n"
            "print(sorted(m for m in ('torch', 'pynvml') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "[]"
