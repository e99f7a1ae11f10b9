"""The simulator's timing model and the plugin's ceiling read the same bytes: what a simulated decode step spends
its bandwidth term on (simulator/engine/roofline.py) is what the plugin divides by the bandwidth
(roofline/step_bytes.py), so a simulated run's efficiency means what a real one's does."""

from __future__ import annotations

import json

import pytest
from sim_setup import SEED_CONFIG, SEED_FLAGS, costs

from pytest_sglang_perf.roofline.step_bytes import DecodeShape, decode_step_bytes
from pytest_sglang_perf.roofline.weights import weights_from_config
from pytest_sglang_perf.sglang_facts.known_models import known_models

CASES = [
    *[(model.model_id, json.loads(model.config_file.read_text()), (), DecodeShape(context_tokens=600))
      for model in known_models()],
    ("seed", SEED_CONFIG, SEED_FLAGS, DecodeShape(tp=2, verify_tokens=4, draft_steps=3, context_tokens=600)),
    ("Qwen3-30B-A3B at tp 2", json.loads(next(m for m in known_models() if m.model_id == "Qwen/Qwen3-30B-A3B")
                                         .config_file.read_text()), ("--tp-size", "2"),
     DecodeShape(tp=2, context_tokens=1000)),
]


@pytest.mark.parametrize(("name", "config", "flags", "shape"), CASES, ids=[case[0] for case in CASES])
def test_the_simulator_and_the_ceiling_count_the_same_bytes(name: str, config: dict[str, object],
                                                            flags: tuple[str, ...], shape: DecodeShape) -> None:
    simulated = costs(config, *flags).decode_bytes(1, shape.context_tokens)
    ceiling = decode_step_bytes(weights_from_config(config, source=name), shape).total
    assert ceiling == pytest.approx(simulated, rel=0.005)
