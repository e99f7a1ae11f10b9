"""A model's bytes, split the way a decode step reads them: the record (WeightBytes) and its two sources, a
checkpoint's safetensors headers (exact: roofline/checkpoint_weights.py) or config.json (estimated:
roofline/config_weights.py), and the error a config.json whose fields can't be used raises (ModelBytesError).
roofline/model_source.py picks the source for a `--model-path` and counts a separate draft model.
"""

from __future__ import annotations

from pytest_sglang_perf.roofline.checkpoint_weights import weights_from_checkpoint
from pytest_sglang_perf.roofline.config_fields import ModelBytesError
from pytest_sglang_perf.roofline.config_weights import weights_from_config
from pytest_sglang_perf.roofline.weight_bytes import WeightBytes

__all__ = ["ModelBytesError", "WeightBytes", "weights_from_checkpoint", "weights_from_config"]
