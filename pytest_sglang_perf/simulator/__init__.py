"""A stand-in SGLang 0.5.23 server: `python -m pytest_sglang_perf.simulator --model-path DIR [flags]`.

It takes SGLang's command line (rebuilt from the flag table in `sglang_facts/data/`) plus `--sim-*` knobs,
resolves it as SGLang does, logs SGLang's startup lines, keeps its port closed while "loading", then serves
SGLang's health, info, cache, metrics, OpenAI chat and native generate endpoints. Requests share the steps of one
continuous-batching scheduler loop whose step times come from a roofline model of the simulated GPU
(`--sim-gpu`, `sglang_facts/data/gpus.json`) and the model's config.json, or from the `--sim-decode-tok-s` /
`--sim-ttft` knobs. `--sim-fault` makes it fail the ways a real server fails (args/faults.py). Importing this
package is cheap: aiohttp is imported only when the server runs.

Layers, each importing only those before it: `args/` (the command line, resolved), `engine/` (the scheduler),
`api/` (HTTP), `process/` (the CLI and the server process); `logs.py` (SGLang's log lines) serves them all.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the simulator with SGLang-style arguments; returns the process exit code."""
    from pytest_sglang_perf.simulator.process.cli import main as cli_main

    return cli_main(argv)


__all__ = ["main"]
