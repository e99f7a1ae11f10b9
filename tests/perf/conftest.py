"""The project's own perf suite runs on a GPU runner with SGLang, or anywhere with --sglang-simulate."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang_perf.gate.environment import detect_gpus
from pytest_sglang_perf.pytest_plugin.options import resolve_options

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if HERE in item.path.parents]
    if not mine or resolve_options(config).simulate or detect_gpus().names:
        return
    skip = pytest.mark.skip(reason="the perf suite needs SGLang on a GPU runner, or --sglang-simulate "
                                   "to run it on the simulator (no GPU found by nvidia-smi)")
    for item in mine:
        item.add_marker(skip)
