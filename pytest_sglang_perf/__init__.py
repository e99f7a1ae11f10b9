"""pytest-sglang-perf: performance regression tests for SGLang servers.

Importing this package is cheap on purpose: pytest loads the plugin in every run of the
environment, so nothing here imports aiohttp, openai, sglang or torch.
"""

from __future__ import annotations

__version__ = "0.1.0"
