"""GPU claims (server/gpu_claims.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang_perf.config.settings import Variant
from pytest_sglang_perf.server.gpu_claims import GpuClaimError, claim_gpus, claimed_plan, gpu_pool
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.plan import ServerPlan

POOL = ("0", "1", "2", "3")


def test_the_pool_is_cuda_visible_devices_when_set_else_what_nvidia_smi_lists() -> None:
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2, 5,GPU-abc"}, lambda: 8) == ("2", "5", "GPU-abc")
    assert gpu_pool({}, lambda: 3) == ("0", "1", "2")
    assert gpu_pool({}, lambda: 0) == ()


def test_claims_are_disjoint_until_released(tmp_path: Path) -> None:
    first = claim_gpus(POOL, 2, tmp_path, timeout=0)
    second = claim_gpus(POOL, 2, tmp_path, timeout=0)
    assert (first.visible_devices, second.visible_devices) == ("0,1", "2,3")
    with pytest.raises(GpuClaimError, match=r"no 1 of the GPUs 0,1,2,3 became free within 0 s"):
        claim_gpus(POOL, 1, tmp_path, timeout=0)
    first.release()
    assert claim_gpus(POOL, 1, tmp_path, timeout=0).gpus == ("0",)
    second.release()


def test_a_claim_takes_all_its_gpus_or_none(tmp_path: Path) -> None:
    """A claim that cannot be completed holds nothing afterwards: two waiting claims never deadlock."""
    holder = claim_gpus(("1",), 1, tmp_path, timeout=0)
    with pytest.raises(GpuClaimError):
        claim_gpus(POOL, 4, tmp_path, timeout=0)
    assert claim_gpus(POOL, 3, tmp_path, timeout=0).gpus == ("0", "2", "3")
    holder.release()


def test_a_claim_waits_for_a_release(tmp_path: Path) -> None:
    import threading

    holder = claim_gpus(("0",), 1, tmp_path, timeout=0)
    heard: list[str] = []
    threading.Timer(0.3, holder.release).start()
    claim = claim_gpus(("0",), 1, tmp_path, timeout=30, waiting=heard.append)
    assert claim.gpus == ("0",)
    assert heard == ["waiting for 1 free GPU(s) of 0: other servers hold them"]
    claim.release()


def test_more_gpus_than_the_pool_holds_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(GpuClaimError, match=r"needs 8 GPU\(s\) \(tp x pp x dp\) but this host offers 4 \(0,1,2,3\)"):
        claim_gpus(POOL, 8, tmp_path, timeout=60)


def test_a_claim_lasts_as_long_as_the_server_that_inherited_it(tmp_path: Path) -> None:
    """pytest dies (its descriptors close without an unlock): the server still holds the GPUs until it exits."""
    import os
    import subprocess
    import sys

    claim = claim_gpus(("0",), 1, tmp_path, timeout=0)
    server = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE,
                              pass_fds=claim.fds)
    try:
        for fd in claim.fds:
            os.close(fd)  # as the kernel does when pytest dies: no unlock
        with pytest.raises(GpuClaimError):
            claim_gpus(("0",), 1, tmp_path, timeout=0)
    finally:
        server.communicate(b"", timeout=30)
    assert claim_gpus(("0",), 1, tmp_path, timeout=0).gpus == ("0",)


def test_an_unusable_lock_folder_is_a_claim_error_naming_it(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with pytest.raises(GpuClaimError, match=r"lock folder .*not-a-folder cannot be used .*--sglang-gpu-lock-dir"):
        claim_gpus(POOL, 1, blocked, timeout=0)


def _plan(**changes: object) -> ServerPlan:
    base = {"variant": Variant("v"), "args": (), "command": ("x",), "env": {}, "simulated": True, "api_key": None,
            "uses_default_launcher": False}
    return ServerPlan(**{**base, **changes})  # type: ignore[arg-type]


def test_nothing_is_claimed_where_the_user_placed_the_server_or_its_gpus_are_unknown(tmp_path: Path) -> None:
    plan = _plan
    log = tmp_path / "v.log"
    for unclaimed, count in ((plan(env={"CUDA_VISIBLE_DEVICES": "3"}), 1), (plan(url="http://h:1"), 1),
                             (plan(), None)):
        assert claimed_plan(unclaimed, count, POOL, tmp_path, log, timeout=0, waiting=print) == (unclaimed, None)
    placed, claim = claimed_plan(plan(), 2, POOL, tmp_path, log, timeout=0, waiting=print)
    assert placed.env == {"CUDA_VISIBLE_DEVICES": "0,1"} and claim is not None
    claim.release()


def test_a_claim_that_cannot_be_made_says_no_server_was_started(tmp_path: Path) -> None:
    """No process ran: the report has no exit code, no phase and no log to show, and says so."""
    with pytest.raises(BootError) as caught:
        claimed_plan(_plan(command=("python", "-m", "sglang")), 2, ("3",), tmp_path, tmp_path / "v.log", timeout=0,
                     waiting=print)
    error = caught.value
    assert not error.started
    assert error.report().splitlines() == [
        "SGLang server 'v' was not started: the server needs 2 GPU(s) (tp x pp x dp) but this host offers 1 (3); "
        "lower the variant's --tp-size/--pp-size/--dp-size, or run it on a host with more GPUs",
        "  command:    python -m sglang (not run)",
        "  no server process was started, so there is no exit code and no server log",
    ]
