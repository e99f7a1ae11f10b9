"""tools/sglang_cpu_env.py: every step that makes the sglang-cpu environment usable runs at install time, so
`tox -e sglang-cpu --notest` builds a complete environment (measured: 154 s from an empty workdir, then
`import sglang` works and the torchvision guard is in place)."""

from __future__ import annotations

import configparser
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sglang_cpu_env", ROOT / "tools" / "sglang_cpu_env.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    seen: list[list[str]] = []

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert kwargs.get("check") is True
        seen.append([str(a) for a in args])
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(subprocess, "run", run)
    return seen


def test_install_runs_pip_then_every_finishing_step(calls: list[list[str]]) -> None:
    assert _tool().main(["install", "--force-reinstall", "pkg.whl"]) == 0
    assert calls[0] == [sys.executable, "-I", "-m", "pip", "install", "--force-reinstall", "pkg.whl"]
    assert calls[1][1:5] == ["-m", "pip", "install", "--quiet"] and calls[1][-1].endswith("sglang-cpu-nodeps.txt")
    assert calls[2][1:] == ["-m", "pip", "uninstall", "--quiet", "-y", "torchvision", "torchaudio", "torchcodec"]
    assert calls[3][1].endswith("torchvision_guard.py")
    assert len(calls) == 4


def test_a_bad_call_prints_the_usage(calls: list[list[str]], capsys: pytest.CaptureFixture[str]) -> None:
    assert _tool().main(["instal"]) == 2
    assert "sglang_cpu_env.py install" in capsys.readouterr().err and calls == []


def test_tox_builds_the_environment_through_the_tool() -> None:
    """The install steps are in install_command (run under --notest), not only in commands_pre."""
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "tox.ini")
    env = ini["testenv:sglang-cpu"]
    assert env["install_command"].startswith("python {toxinidir}/tools/sglang_cpu_env.py install ")
    assert env["commands_pre"].strip() == "python {toxinidir}/tools/sglang_cpu_env.py finish"
    for name in ("requirements/sglang-cpu-nodeps.txt", "tools/torchvision_guard.py"):
        assert (ROOT / name).is_file()
