"""Validate on a real GPU that a busy GPU is never recorded (issue 29, item 3; docs/conditions.md "busy before").

    python benchmarks/gpu_busy_validate.py --out DIR        # one NVIDIA GPU, torch, nvidia-ml-py; ~2 minutes

A user's project on the simulator (`--sglang-simulate`: no SGLang needed), its server claiming GPU 0 of this host
(`--sglang-gpu-lock-dir`: the simulator itself runs no kernel, so NVML lists none of its processes, as for a server
in another pid namespace), run four times as a user types it, with real NVML watching the GPU:
  1. `--sglang-update-baselines` while a second process runs a bf16 matmul loop on GPU 0: refused (disturbed);
  2. the same with the GPU idle: recorded;
  3. a gate run with the simulator twice as slow and the matmul loop back: the regression is inconclusive;
  4. the same with the GPU idle: regressed.
Prints each run's summary lines and the verdicts from its results file; writes DIR/gpu_busy_validate.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MATMUL = """
import sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("spinning", flush=True)
while True:
    for _ in range(50):
        a = (a @ b).clamp_(-1, 1)
    torch.cuda.synchronize()
"""
TESTS = """
def test_red_black_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a red-black tree in Python."))
"""
PYPROJECT = """[tool.sglang_perf]
model = "model"
args = ["--random-seed", "0"]
startup_timeout = "60s"
[tool.sglang_perf.simulate]
args = ["--sim-decode-tok-s", "500", "--sim-ttft", "0.02", "--sim-boot-seconds", "0.5"]
[tool.sglang_perf.request]
max_tokens = 200
repeats = 5
warmup = 1
[tool.sglang_perf.tolerance]
ttft = "500%"
tpot = "500%"
[tool.sglang_perf.conditions]
settle_timeout = "2s"
[tool.sglang_perf.variants]
default = []
"""
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


@contextmanager
def matmul_loop() -> Iterator[int]:
    """A second process keeping GPU 0 at full utilization (its own CUDA context)."""
    proc = subprocess.Popen([sys.executable, "-c", MATMUL], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "spinning"
        time.sleep(2.0)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
        time.sleep(2.0)


def pytest_run(project: Path, name: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    results = project / f"results-{name}.json"
    argv = [sys.executable, "-m", "pytest", "-p", "pytest_sglang_perf.plugin", "-p", "no:cacheprovider",
            "--sglang-simulate", f"--sglang-gpu-lock-dir={project / 'claims'}", f"--sglang-results={results}", *args]
    run_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               **(env or {})}
    proc = subprocess.run(argv, cwd=project, env=run_env, capture_output=True, text=True, timeout=300)
    cells = json.loads(results.read_text())["cells"] if results.exists() else []
    lines = [line for line in proc.stdout.splitlines() if "GPU" in line or "baseline" in line or "passed" in line
             or "failed" in line or "verdict" in line or "disturbed" in line or "cell" in line or "busy" in line]
    return {"name": name, "exit": proc.returncode, "lines": lines,
            "cells": [{k: c.get(k) for k in ("test_id", "verdict", "disturbed", "withheld")} for c in cells],
            "gpu": [c.get("gpu") for c in cells], "stdout_tail": proc.stdout[-4000:],
            "stderr_tail": proc.stderr[-2000:]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    ns = parser.parse_args(argv)
    project = Path(tempfile.mkdtemp(prefix="gpu-busy-"))
    (project / "model").mkdir()
    (project / "model" / "config.json").write_text(json.dumps(CONFIG))
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "test_perf.py").write_text(TESTS)
    runs = []
    with matmul_loop() as pid:
        runs.append({**pytest_run(project, "record-busy", "--sglang-update-baselines"), "matmul_pid": pid})
    runs.append(pytest_run(project, "record-idle", "--sglang-update-baselines"))
    slow = {"SGLANG_SIM_SLOWDOWN": "1.0"}
    with matmul_loop() as pid:
        runs.append({**pytest_run(project, "gate-busy", env=slow), "matmul_pid": pid})
    runs.append(pytest_run(project, "gate-idle", env=slow))
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "gpu_busy_validate.json").write_text(json.dumps(runs, indent=1))
    for run in runs:
        print(f"== {run['name']}: exit {run['exit']}; cells {run['cells']}")
        for line in run["lines"]:
            print(f"   {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
