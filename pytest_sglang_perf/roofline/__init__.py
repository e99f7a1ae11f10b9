"""The memory-bandwidth roofline of a decode step: how many bytes one step must read (the model's weights from a
checkpoint's safetensors headers or estimated from config.json, the draft's weights, the KV cache), and from those
and a bandwidth, the ceiling a decode cell is measured against; and the compute roofline of a prefill (its FLOPs
from config.json, over a GEMM rate: prefill_flops.py, prefill_ceiling.py).

Pure Python: it imports only itself, `sglang_facts` and `errors` (tests/unit/test_layout.py); docs/model-bytes.md
says what is counted and where each fact comes from.
"""
