"""`python -m pytest_sglang_perf.hardware [--json] [--no-measure]`: this machine's GPUs, read bandwidth and bf16
matmul rate.

With --json, one line of JSON (`ProbeReport.to_dict()`), what `probe_in_subprocess` reads back; without it, a few
lines for a person. Exits 0 whenever a report was made, a report that measured nothing included.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from pytest_sglang_perf.hardware import bandwidth, gemm
from pytest_sglang_perf.hardware.facts import GpuFacts
from pytest_sglang_perf.hardware.probe import ProbeReport, probe


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_sglang_perf.hardware", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the report as one line of JSON")
    parser.add_argument("--no-measure", action="store_true", help="GPU facts only: no bandwidth or GEMM measurement")
    args = parser.parse_args(argv)
    report = probe(measure=not args.no_measure)
    print(json.dumps(report.to_dict()) if args.json else human(report))
    return 0


def human(report: ProbeReport) -> str:
    lines = [gpu_line(gpu) for gpu in report.gpus]
    lines += [bandwidth.summary(measurement) for measurement in report.bandwidth]
    lines += [gemm.summary(measurement) for measurement in report.gemm]
    if report.skipped:
        lines.append(f"skipped: {report.skipped}")
    lines.append(f"via {report.via} in {report.seconds:.1f} s")
    return "\n".join(lines)


def gpu_line(gpu: GpuFacts) -> str:
    parts = [f"GPU {gpu.index}: {gpu.name}", f"SM {gpu.sm}", f"{gpu.memory_mib:,} MiB"]
    parts += [f"{label} {value}" for label, value in (
        ("driver", gpu.driver), ("CUDA", gpu.cuda), ("max SM clock", _unit(gpu.sm_clock_mhz, "MHz")),
        ("max memory clock", _unit(gpu.mem_clock_mhz, "MHz")), ("power limit", _unit(gpu.power_limit_w, "W")),
    ) if value is not None]
    return ", ".join(parts)


def _unit(value: float | None, unit: str) -> str | None:
    return None if value is None else f"{value:g} {unit}"


if __name__ == "__main__":
    raise SystemExit(main())
