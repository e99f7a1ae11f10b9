"""The base class of every error the plugin reports to a user.

Each one's message says what is wrong, where (file, flag, value) and how to fix it. A leaf module: it imports
nothing of the package, so that every part (the simulator and the SGLang facts too) may use it.
"""

from __future__ import annotations


class SGLangPerfError(Exception):
    """An error a user can act on: catch this to handle every error of pytest-sglang-perf."""
