"""The probe: this machine's GPUs and each GPU model's read bandwidth and bf16 matmul rate, in-process or in a child
process.

`probe()` imports torch (else pynvml) inside the call. `probe_in_subprocess()` runs `python -m
pytest_sglang_perf.hardware --json` and reads its report back, so that the CUDA context the probe needs never lives
in the pytest process (it would hold GPU memory that SGLang's memory plan counts on); it never raises: no GPU, no
torch, a crash or a timeout give a report whose `skipped` says why.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, replace
from typing import Any, TypeVar

from pytest_sglang_perf.hardware.bandwidth import BandwidthMeasurement
from pytest_sglang_perf.hardware.bandwidth import measure as measure_bandwidth
from pytest_sglang_perf.hardware.facts import (
    GpuFacts,
    NvmlUnavailable,
    fill_from_nvml,
    nvml_gpus,
    torch_facts,
    torch_uuids,
)
from pytest_sglang_perf.hardware.gemm import GemmMeasurement
from pytest_sglang_perf.hardware.gemm import measure as measure_gemm

INSTALL = "pip install 'pytest-sglang-perf[probe]'"
MODULE = "pytest_sglang_perf.hardware"
_T = TypeVar("_T")


@dataclass(frozen=True)
class ProbeReport:
    gpus: tuple[GpuFacts, ...]
    bandwidth: tuple[BandwidthMeasurement, ...]
    """One measurement per GPU model."""
    via: str
    """What read the facts, e.g. "torch 2.11.0+cu128" or "nvml (no torch: no bandwidth)"."""
    skipped: str | None
    """Why nothing (or no bandwidth, or no GEMM rate) was measured; None when every GPU model was measured."""
    seconds: float
    gemm: tuple[GemmMeasurement, ...] = ()
    """One bf16 matmul rate per GPU model, measured right after its bandwidth; empty in reports written before the
    probe measured it."""

    def bandwidth_for(self, gpu_name: str) -> BandwidthMeasurement | None:
        return next((m for m in self.bandwidth if m.gpu_name == gpu_name), None)

    def gemm_for(self, gpu_name: str) -> GemmMeasurement | None:
        return next((m for m in self.gemm if m.gpu_name == gpu_name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": [asdict(gpu) for gpu in self.gpus], "bandwidth": [asdict(m) for m in self.bandwidth],
                "gemm": [asdict(m) for m in self.gemm], "via": self.via, "skipped": self.skipped,
                "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: object) -> ProbeReport:
        """The report `to_dict` wrote (one without `gemm`, from before the probe measured it, too); ValueError naming
        the field that is missing or of the wrong type."""
        root = _mapping(data, "the report")
        return cls(
            gpus=tuple(_record(GpuFacts, item, f"gpus[{i}]") for i, item in enumerate(_items(root, "gpus"))),
            bandwidth=tuple(_record(BandwidthMeasurement, item, f"bandwidth[{i}]")
                            for i, item in enumerate(_items(root, "bandwidth"))),
            via=_value(root, "via", "str", "via"), skipped=_value(root, "skipped", "str | None", "skipped"),
            seconds=_value(root, "seconds", "float", "seconds"),
            gemm=tuple(_record(GemmMeasurement, item, f"gemm[{i}]")
                       for i, item in enumerate(_items(root, "gemm", optional=True))),
        )


def probe(measure: bool = True) -> ProbeReport:
    """Probe in this process (it keeps the CUDA context torch creates): torch, else NVML, else nothing."""
    start = time.perf_counter()
    torch, torch_missing = _load("torch")
    pynvml, _ = _load("pynvml")
    report = _probe_nvml(pynvml, torch_missing) if torch is None else _probe_torch(torch, pynvml, measure)
    return replace(report, seconds=round(time.perf_counter() - start, 3))


def _load(name: str) -> tuple[Any, str]:
    """The module, or None and why: "no torch" when it is not installed, else its import error."""
    try:
        return importlib.import_module(name), ""
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None, f"no {name}"
        return None, f"{name} failed to import ({type(exc).__name__}: {exc})"
    except (ImportError, OSError, RuntimeError) as exc:  # a torch whose CUDA libraries are broken
        return None, f"{name} failed to import ({type(exc).__name__}: {exc})"


def _probe_nvml(pynvml: Any, torch_missing: str) -> ProbeReport:
    if pynvml is None:
        return ProbeReport((), (), "nothing", f"{torch_missing} and no nvidia-ml-py: {INSTALL}", 0.0)
    via = "nvml (no torch: no bandwidth)"
    try:
        gpus = tuple(gpu.facts for gpu in nvml_gpus(pynvml))
    except NvmlUnavailable as exc:
        return ProbeReport((), (), via, f"no GPU: {exc}; {torch_missing}", 0.0)
    if not gpus:
        return ProbeReport((), (), via, "no GPU: NVML lists none", 0.0)
    return ProbeReport(gpus, (), via, f"{torch_missing}: bandwidth not measured; {INSTALL}", 0.0)


def _probe_torch(torch: Any, pynvml: Any, measure: bool) -> ProbeReport:
    via = f"torch {torch.__version__}"
    if not torch.cuda.is_available():
        gpus = _nvml_only(pynvml)
        why = "no GPU" if not gpus else f"{len(gpus)} GPU(s) NVML lists, but torch cannot use them"
        return ProbeReport(gpus, (), via, f"{why}: torch.cuda.is_available() is false", 0.0)
    gpus = torch_facts(torch)
    if pynvml is not None:
        gpus = _with_nvml(torch, pynvml, gpus)
    if not gpus:
        return ProbeReport((), (), via, "no GPU: torch.cuda.device_count() is 0", 0.0)
    if not measure:
        return ProbeReport(gpus, (), via, "bandwidth and GEMM rate not measured: asked not to (--no-measure)", 0.0)
    return _measure_models(torch, gpus, via)


def _nvml_only(pynvml: Any) -> tuple[GpuFacts, ...]:
    if pynvml is None:
        return ()
    try:
        return tuple(gpu.facts for gpu in nvml_gpus(pynvml))
    except NvmlUnavailable:
        return ()


def _with_nvml(torch: Any, pynvml: Any, gpus: tuple[GpuFacts, ...]) -> tuple[GpuFacts, ...]:
    try:
        return fill_from_nvml(gpus, torch_uuids(torch), nvml_gpus(pynvml))
    except NvmlUnavailable:
        return gpus


def _measure_models(torch: Any, gpus: tuple[GpuFacts, ...], via: str) -> ProbeReport:
    """The bandwidth, then the GEMM rate, of each GPU model, on its first GPU; each measurement that fails (out of
    memory, a CUDA error) is named in `skipped`, and the other still runs."""
    first: dict[str, GpuFacts] = {}
    for gpu in gpus:
        first.setdefault(gpu.name, gpu)
    bandwidth: list[BandwidthMeasurement] = []
    gemm: list[GemmMeasurement] = []
    failures: list[str] = []
    for gpu in first.values():
        bandwidth += _attempt(measure_bandwidth, torch, gpu, "bandwidth", failures)
        gemm += _attempt(measure_gemm, torch, gpu, "GEMM rate", failures)
    return ProbeReport(gpus, tuple(bandwidth), via, "; ".join(failures) or None, 0.0, tuple(gemm))


def _attempt(measure: Callable[[Any, int], _T], torch: Any, gpu: GpuFacts, what: str,
             failures: list[str]) -> list[_T]:
    """`measure(torch, gpu.index)` as a list of one, or an empty list and, in `failures`, e.g. "bandwidth not measured
    on GPU 0 (NVIDIA H200): RuntimeError: CUDA out of memory..."."""
    try:
        return [measure(torch, gpu.index)]
    except RuntimeError as exc:  # torch's CUDA errors and OutOfMemoryError are RuntimeErrors
        failures.append(f"{what} not measured on GPU {gpu.index} ({gpu.name}): {type(exc).__name__}: "
                        f"{_first_line(str(exc))}")
        return []


def probe_in_subprocess(*, python: str | None = None, timeout: float = 180.0, measure: bool = True,
                        visible: str | None = None) -> ProbeReport:
    """`probe()` in a child process of `python` (this interpreter by default; it must be able to import
    pytest_sglang_perf). `seconds` is the child's whole run, interpreter start and imports included. `visible`: the
    GPUs it may use (CUDA_VISIBLE_DEVICES), when only those are free of other servers."""
    command = [python or sys.executable, "-m", MODULE, "--json", *(() if measure else ("--no-measure",))]
    start = time.perf_counter()
    try:
        done = _run_in_own_group(command, timeout, visible)
    except subprocess.TimeoutExpired as exc:  # the child's whole process group was killed
        return _failed(command, f"timed out after {timeout:g} s and was killed", exc.stderr, start)
    except OSError as exc:
        return _failed(command, f"could not start ({exc})", None, start)
    if done.returncode != 0:
        return _failed(command, f"exited with code {done.returncode}", done.stderr, start)
    try:
        report = ProbeReport.from_dict(json.loads(_last_line(done.stdout) or "null"))
    except ValueError as exc:
        return _failed(command, f"printed no report ({exc})", done.stderr, start)
    return replace(report, seconds=round(time.perf_counter() - start, 3))


def _run_in_own_group(command: list[str], timeout: float,
                      visible: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `command` in a process group of its own: on a timeout, a Ctrl-C or any error the whole group is killed
    (a grandchild holding the output pipes cannot keep pytest waiting), then the error goes on."""
    env = None if visible is None else {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
    with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True, env=env) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(child.pid)
            out, err = child.communicate()
            raise subprocess.TimeoutExpired(command, timeout, out, err) from None
        except BaseException:
            _kill_group(child.pid)
            raise
    return subprocess.CompletedProcess(command, child.returncode, out, err)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _failed(command: list[str], what: str, stderr: str | bytes | None, start: float) -> ProbeReport:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else (stderr or "")
    tail = _last_line(text)
    reason = f"the probe's process ({shlex.join(command)}) {what}" + (f"; its stderr ended: {tail}" if tail else "")
    return ProbeReport((), (), f"subprocess: {shlex.join(command)}", reason, round(time.perf_counter() - start, 3))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# --- reading a report back: every field checked, the bad one named ---------------------------------------------

_KINDS: Mapping[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,)}
_WORDS = {"int": "an integer", "float": "a number", "str": "a string"}


def _record(cls: type[_T], data: object, where: str) -> _T:
    item = _mapping(data, f"'{where}'")
    values = {f.name: _value(item, f.name, str(f.type), f"{where}.{f.name}")
              for f in fields(cls)  # type: ignore[arg-type]
              if f.name in item or f.default is MISSING}
    return cls(**values)


def _value(data: Mapping[str, Any], key: str, annotation: str, where: str) -> Any:
    if key not in data:
        raise ValueError(f"probe report: field '{where}' is missing")
    value = data[key]
    base = annotation.removesuffix(" | None")
    if value is None and base != annotation:
        return None
    right_kind = isinstance(value, _KINDS[base]) and not isinstance(value, bool)
    if not right_kind:
        either = " or null" if base != annotation else ""
        raise ValueError(f"probe report: field '{where}' must be {_WORDS[base]}{either}, got {value!r}")
    return float(value) if base == "float" else value


def _items(data: Mapping[str, Any], key: str, *, optional: bool = False) -> list[Any]:
    """The list at `key`; an empty one when `optional` and the key is absent (a field newer than the report)."""
    value = data.get(key, [] if optional else None)
    if not isinstance(value, list):
        raise ValueError(f"probe report: field '{key}' must be a list, got {value!r}")
    return value


def _mapping(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"probe report: {what} must be a JSON object, got {data!r}")
    return data
