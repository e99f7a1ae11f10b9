"""pytest-sglang-perf: performance regression tests for SGLang servers.

Importing this package is cheap on purpose: pytest loads the plugin in every run of the
environment, so nothing here imports aiohttp, openai, sglang or torch.
"""

from __future__ import annotations

__version__ = "0.1.0"


class SGLangConfigWarning(UserWarning):
    """A variant's server did not run what it requested, or ran what another variant already measured.

    Every test of the variant carries it; `--sglang-strict-flags` turns the former into a failure.
    """


class SGLangPrefixCacheWarning(UserWarning):
    """A measurement asked for a warm prefix cache (`prefix_cache = "warm"`) but no request hit it."""
