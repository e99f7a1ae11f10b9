"""The session's GPU claims (session/gpus.py): each server gets GPUs no other holds, a simulated run claims only
with a lock folder, and what cannot be placed boots unplaced or fails its boot."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_records import variant_run

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.session.gpus import SessionGpus, default_gpus
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser


def session_gpus(options: RunOptions, heard: list[str] | None = None) -> SessionGpus:
    live = Live(heard.append if heard is not None else (lambda line: None), verbosity=1, heartbeat=0,
                simulated=options.simulate)
    return SessionGpus(options, 0.0, flag_table_parser, live)


@pytest.fixture(autouse=True)
def four_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process may use GPUs 0-3 (never nvidia-smi's)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")


def test_a_simulated_run_claims_nothing_without_a_lock_folder(tmp_path: Path) -> None:
    """The simulator's servers use no GPU: no pool, the plan unchanged, no claim."""
    gpus = session_gpus(RunOptions(simulate=True))
    run = variant_run("tp2", args=("--tp-size", "2"))
    assert gpus.pool == ()
    assert gpus.claim(run, tmp_path / "tp2.log") == run.plan
    assert run.claim is None


def test_a_real_run_claims_from_cuda_visible_devices() -> None:
    """On a GPU host the pool is the process's CUDA_VISIBLE_DEVICES."""
    assert session_gpus(RunOptions(simulate=False)).pool == ("0", "1", "2", "3")


def test_with_a_lock_folder_servers_get_disjoint_gpus(tmp_path: Path) -> None:
    """Two tp2 servers get 0,1 and 2,3, each in its plan's CUDA_VISIBLE_DEVICES and its run's claim."""
    heard: list[str] = []
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path), heard)
    first, second = variant_run("a", args=("--tp-size", "2")), variant_run("b", args=("--tp", "2"))
    plans = [gpus.claim(run, tmp_path / f"{run.name}.log") for run in (first, second)]
    try:
        assert [plan.env["CUDA_VISIBLE_DEVICES"] for plan in plans] == ["0,1", "2,3"]
        assert first.claim is not None and first.claim.gpus == ("0", "1")
        assert second.claim is not None and second.claim.gpus == ("2", "3")
        assert heard == ["[a] GPUs 0,1 claimed (CUDA_VISIBLE_DEVICES)", "[b] GPUs 2,3 claimed (CUDA_VISIBLE_DEVICES)"]
    finally:
        gpus.release(first)
        gpus.release(second)


def test_a_released_claim_frees_its_gpus(tmp_path: Path) -> None:
    """After release the run holds nothing and the next server gets the same GPUs."""
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path))
    first, later = variant_run("a", args=("--tp-size", "2")), variant_run("b", args=("--tp-size", "2"))
    gpus.claim(first, tmp_path / "a.log")
    gpus.release(first)
    assert first.claim is None
    plan = gpus.claim(later, tmp_path / "b.log")
    gpus.release(later)
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_server_booted_again_keeps_its_claim(tmp_path: Path) -> None:
    """A reboot (a confirmation, more boots) keeps the claim: the same GPUs, and another server still gets others."""
    heard: list[str] = []
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path), heard)
    first, other = variant_run("a", args=("--tp-size", "2")), variant_run("b", args=("--tp-size", "2"))
    try:
        plans = [gpus.claim(first, tmp_path / "a.log"), gpus.claim(first, tmp_path / "a.log")]
        assert [plan.env["CUDA_VISIBLE_DEVICES"] for plan in plans] == ["0,1", "0,1"]
        assert gpus.claim(other, tmp_path / "b.log").env["CUDA_VISIBLE_DEVICES"] == "2,3"
        assert heard == ["[a] GPUs 0,1 claimed (CUDA_VISIBLE_DEVICES)", "[b] GPUs 2,3 claimed (CUDA_VISIBLE_DEVICES)"]
    finally:
        gpus.release(first)
        gpus.release(other)


def test_the_simulators_knobs_do_not_hide_the_gpu_count(tmp_path: Path) -> None:
    """`--sim-*` knobs (spaced or with `=`) are left out when the GPUs are counted: tp 2 claims two."""
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path))
    run = variant_run("k", args=("--sim-gpu", "H100", "--tp-size", "2", "--sim-slowdown=0.2"))
    plan = gpus.claim(run, tmp_path / "k.log")
    gpus.release(run)
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_multi_node_server_boots_unplaced_and_says_why(tmp_path: Path) -> None:
    """An unknown GPU count (--nnodes 2): no claim, the plan as it was, one -v line naming the variant."""
    heard: list[str] = []
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path), heard)
    run = variant_run("multi", args=("--tp-size", "2", "--nnodes", "2"))
    assert gpus.claim(run, tmp_path / "multi.log") == run.plan and run.claim is None
    assert len(heard) == 1 and heard[0].startswith("[multi] no GPU claim: how many GPUs of this host the server uses")


def test_a_remote_server_claims_nothing(tmp_path: Path) -> None:
    """A variant with a url boots nothing here: no claim and nothing said."""
    heard: list[str] = []
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path), heard)
    run = variant_run("remote", args=("--tp-size", "2"), url="http://gpu-host:30000")
    assert gpus.claim(run, tmp_path / "remote.log") == run.plan
    assert run.claim is None and heard == []


def test_a_server_needing_more_gpus_than_the_pool_fails_its_boot(tmp_path: Path) -> None:
    """tp 8 on four GPUs: the variant's BootError, naming the count, the pool and its log."""
    gpus = session_gpus(RunOptions(simulate=True, gpu_lock_dir=tmp_path))
    run = variant_run("big", args=("--tp-size", "8"))
    with pytest.raises(BootError) as raised:
        gpus.claim(run, tmp_path / "big.log")
    assert raised.value.name == "big" and raised.value.log_path == tmp_path / "big.log"
    assert "needs 8 GPU(s) (tp x pp x dp) but this host offers 4 (0,1,2,3)" in raised.value.reason
    assert run.claim is None


@pytest.mark.parametrize(("args", "expected"), [
    ((), (0,)),
    (("--tp-size", "2"), (0, 1)),
    (("--tp-size", "2", "--base-gpu-id", "4"), (4, 5)),
    (("--tp-size", "2", "--base-gpu-id", "1", "--gpu-id-step", "2"), (1, 3)),
    (("--device", "cpu"), ()),
])
def test_the_gpus_sglang_picks_when_nothing_names_them(args: tuple[str, ...], expected: tuple[int, ...]) -> None:
    """Rank r on GPU base_gpu_id + r x gpu_id_step; a CPU server on none."""
    assert default_gpus(args, flag_table_parser()) == expected
