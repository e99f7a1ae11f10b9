"""GPU claims (server/gpu_claims.py) and pytest-xdist's variant scopes (xdist_scheduling.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang_perf.server.gpu_claims import GpuClaimError, claim_gpus, gpu_pool
from pytest_sglang_perf.xdist_scheduling import variant_scope

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


@pytest.mark.parametrize(("nodeid", "scope"), [
    ("tests/perf/test_p.py::test_x[tp2]", "tp2"),
    ("tests/perf/test_p.py::test_x[512-tp2]", "tp2"),
    ("tests/perf/test_p.py::Test::test_x[default]@default", "default"),
    ("tests/perf/test_p.py::test_x[tp2x]", None),
    ("tests/unit/test_a.py::test_b", None),
    ("tests/unit/test_a.py::test_b[a@b]", None),
])
def test_a_perf_test_is_scheduled_with_its_variant(nodeid: str, scope: str | None) -> None:
    assert variant_scope(nodeid, ["default", "tp2"]) == scope
