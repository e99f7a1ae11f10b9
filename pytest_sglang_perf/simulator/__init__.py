"""A stand-in SGLang 0.5.23 server: `python -m pytest_sglang_perf.simulator --model-path DIR [flags]`.

It takes SGLang's command line (rebuilt from the flag table in `pytest_sglang_perf/data/`) plus `--sim-*`
knobs, logs SGLang's startup lines, keeps its port closed while "loading", then serves SGLang's health,
info and OpenAI chat endpoints with tokens paced by the knobs. Importing this package is cheap: aiohttp
is imported only when the server runs.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the simulator with SGLang-style arguments; returns the process exit code."""
    from pytest_sglang_perf.simulator.cli import main as cli_main

    return cli_main(argv)


__all__ = ["main"]
