"""How fast the simulator streams, measured by the plugin's own client: asked vs achieved tok/s.

    python benchmarks/bench_simulator.py

The simulator must never be what limits a measurement: each row runs one simulator process at the asked
decode rate and reads 2,000-token streams with the plugin's client. Loopback only; bounded (~30 s).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from pytest_sglang_perf.measurement.client import ChatRequest
from pytest_sglang_perf.measurement.rounds import run_requests
from pytest_sglang_perf.server.launcher import LaunchSpec, ServerProcess

RATES = (1_000, 10_000, 50_000, 200_000)
TOKENS = 2_000
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
          "intermediate_size": 512, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def achieved(rate: int, workdir: Path) -> tuple[float, float]:
    command = (sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", str(workdir),
               "--sim-decode-tok-s", str(rate), "--sim-ttft", "0.001", "--sim-boot-seconds", "0.1")
    spec = LaunchSpec(name=f"sim-{rate}", command=command, log_path=workdir / f"{rate}.log", startup_timeout=60)
    with ServerProcess(spec) as server:
        request = ChatRequest(model="m", prompt="hi", max_tokens=TOKENS, temperature=0.0, seed=0)
        records = run_requests(server.base_url, request, count=3, warmup=1)
    rates = [(r.sample.completion_tokens - 1) / r.sample.decode_time for r in records]
    chunks = statistics.median(len(r.chunk_times) for r in records)
    return statistics.median(rates), chunks


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "config.json").write_text(json.dumps(CONFIG))
        print(f"{'asked tok/s':>12} {'achieved tok/s':>15} {'ratio':>6} {'chunks/stream':>14}")
        for rate in RATES:
            got, chunks = achieved(rate, workdir)
            print(f"{rate:>12,} {got:>15,.0f} {got / rate:>6.2f} {chunks:>14,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
