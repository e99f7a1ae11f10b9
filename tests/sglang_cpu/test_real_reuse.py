"""A kept real SGLang 0.5.23 server (--sglang-reuse) on CPU: the first run boots and keeps it; the second run boots
nothing, verifies the kept server (its process, its keeper, its `/server_info` unchanged, then the requested flags
against it as for any boot) and measures on it; its cells say they ran on a reused server and carry no boot metric.
`sglang-perf stop` then stops the whole tree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil
import pytest
from inner_pytest import MAX_TOTAL_TOKENS, Project, run_pytest

from pytest_sglang_perf.cli.main import main as sglang_perf
from pytest_sglang_perf.server.kept import Registry

TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_red_black_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))
"""


def _pyproject() -> str:
    args = ["--device", "cpu", "--load-format", "dummy", "--max-total-tokens", str(MAX_TOTAL_TOKENS),
            "--random-seed", "0"]
    return "\n".join([
        "[tool.sglang_perf]", 'model = "tiny-llama"', f"args = {json.dumps(args)}", 'startup_timeout = "5m"',
        "[tool.sglang_perf.request]", "max_tokens = 16\nrepeats = 3\nwarmup = 1",
        "[tool.sglang_perf.variants]", "default = []",
    ]) + "\n"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_kept_real_server_is_verified_and_measured(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path_factory.mktemp("reuse-project").resolve()
    shutil.copytree(tiny_model, path / "tiny-llama")
    (path / "pyproject.toml").write_text(_pyproject())
    (path / "test_reuse.py").write_text(TEST_FILE)
    state = path / "state"
    monkeypatch.setenv("SGLANG_PERF_STATE_DIR", str(state))
    registry = Registry(state / "servers")
    try:
        first = run_pytest(Project(path), "first", "--sglang-reuse", state_dir=state)
        assert first.result.ret == 0, first.out
        assert "[default] ready in " in first.out
        (kept,) = registry.all()
        tree = [psutil.Process(kept.pid), *psutil.Process(kept.pid).children(recursive=True)]
        assert _alive(kept.pid) and len(tree) >= 2, "SGLang's scheduler and detokenizer run beside its server"

        second = run_pytest(Project(path), "second", "--sglang-reuse", state_dir=state)
        assert second.result.ret == 0, second.out
        assert "] ready in " not in second.out and "[default] booting" not in second.out
        assert f"[default] reused kept server {kept.key} (booted " in second.out
        assert "effective configuration: ok" in second.out  # the flags checked against the kept server
        cell = second.cells()["default"]
        assert cell["reused"].startswith(f"reused kept server {kept.key}")
        assert "boot_seconds" not in cell["metrics"] and cell["metrics"]["output_throughput"]["measured"] > 0
        assert json.loads((path / "results-second.json").read_text())["servers"]["default"]["boot_seconds"] is None
        assert registry.all()[0].runs == 2
    finally:
        assert sglang_perf(["stop", "--all", "--force"]) == 0
    assert not [p for p in tree if _alive(p.pid)], "sglang-perf stop left a process of the kept server"
