"""Which SGLang release these tests drive, and what it needs to serve the tiny model on a CPU.

The `sglang-cpu` tox environment holds SGLang 0.5.23; CI's older-release lane runs some of these tests with another
release in its place (`tools/sglang_versions.py run VERSION -- pytest ...`, docs/sglang-versions.md).
"""

from __future__ import annotations

import os

OLDER_VAR = "SGLANG_PERF_OLDER_SGLANG"
"""Set by `tools/sglang_versions.py run VERSION -- ...` (CI's older-release lane): the SGLang on the path is VERSION."""
OLDER = os.environ.get(OLDER_VAR) or None
NO_PREFILL_GRAPH = {"0.5.13": ["--disable-piecewise-cuda-graph"],
                    "0.5.14": ["--cuda-graph-backend-prefill", "disabled"],
                    "0.5.16": ["--cuda-graph-backend-prefill", "disabled"],
                    "0.5.19": ["--cuda-graph-backend-prefill", "disabled"]}
"""0.5.13-0.5.19 capture a prefill graph on a CPU by default (0.5.13: piecewise, `module 'torch.cpu' has no attribute
'graph_pool_handle'`; 0.5.14-0.5.19: tc_piecewise, `Capture prefill CUDA graph failed`), which kills the boot:
each release's own flag for none (measured here, docs/sglang-versions.md)."""
CPU_ARGS = ["--device", "cpu", "--load-format", "dummy", "--max-total-tokens", "32768", "--random-seed", "0",
            *NO_PREFILL_GRAPH.get(OLDER or "", [])]
"""What every real-SGLang project here serves the tiny model with (a small KV cache: SGLang on CPU otherwise sizes
it to most of RAM, 15 GB and 30 s to allocate)."""
