"""outputs/machine.py: the machine and commit a results file records, simulated runs included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_sglang_perf.gate.environment import Gpus
from pytest_sglang_perf.outputs import machine


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root, check=True,
                   capture_output=True)


def test_commit_and_dirty(tmp_path: Path) -> None:
    assert machine.git_commit(tmp_path) == machine.Commit(None, None)  # not a checkout
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("1")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    clean = machine.git_commit(tmp_path)
    assert clean.id is not None and len(clean.id) == 12 and clean.dirty is False
    (tmp_path / "untracked.txt").write_text("not part of the commit's files")
    assert machine.git_commit(tmp_path).dirty is False
    (tmp_path / "a.txt").write_text("2")
    assert machine.git_commit(tmp_path) == machine.Commit(clean.id, True)


def test_cpu_model_from_cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\n")
    monkeypatch.setattr(machine, "_CPUINFO", info)
    assert machine.cpu_model() == "AMD EPYC 7B13 64-Core Processor"


def test_a_simulated_run_records_the_host_labelled() -> None:
    facts = machine.machine_facts(machine.Commit("abc", True), Gpus(("NVIDIA H100",), "550.1"), simulated=True)
    assert facts["label"] == machine.SIMULATED_HOST and "SIMULATED" in facts["label"]
    assert facts["gpus"] == ["NVIDIA H100"] and facts["driver"] == "550.1"
    assert facts["commit"] == "abc" and facts["dirty"] is True and facts["host"] and facts["cpu_count"]
    real = machine.machine_facts(machine.Commit(None, None), Gpus((), None), simulated=False)
    assert real["label"] == machine.MEASURED
