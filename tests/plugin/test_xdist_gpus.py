"""pytest-xdist on a multi-GPU host: workers claim disjoint GPU sets, a variant boots on one worker only, several
workers record into one baseline file without losing an entry, and the controller writes one results file.

The host is fake: an `nvidia-smi` on PATH that lists 4 GPUs. The simulator honours CUDA_VISIBLE_DEVICES (it fails at
boot with fewer visible GPUs than tp x pp x dp) and, with --sim-device-dir, fails at boot on a GPU another simulated
server holds: two servers on one GPU at the same time fail the run loudly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from perf_project import FAST_SIM, LOOSE, fake_gpu_host, write_project

pytest.importorskip("xdist")

VARIANTS = {"tp2_a": ["--tp-size", "2"], "tp2_b": ["--tp-size", "2"], "tp1": []}
TESTS = """
import time

def test_short(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Say hi", max_tokens=16, repeats=2, warmup=0))
    time.sleep(1.0)  # servers of different workers overlap: the claims, not luck, keep them apart

def test_long(sglang_perf):
    sglang_perf.check(sglang_perf.measure("Write a poem", max_tokens=32, repeats=2, warmup=0))
"""


def _four_gpu_host(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu_host(pytester, monkeypatch, 4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "--sglang-simulate",
                                         "--sglang-gpu-lock-dir", str(pytester.path / "claims"),
                                         "--sglang-log-dir", "logs", "--sglang-results", "results.json", *args)


@pytest.mark.slow
@pytest.mark.calm
def test_workers_claim_disjoint_gpus_and_boot_each_variant_once(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _four_gpu_host(pytester, monkeypatch)
    devices = pytester.path / "devices"
    write_project(pytester, VARIANTS, extra=LOOSE, sim=[*FAST_SIM, "--sim-device-dir", str(devices)])
    pytester.makepyfile(test_perf=TESTS)

    recorded = _run(pytester, "--sglang-update-baselines")
    recorded.assert_outcomes(passed=6)
    results = json.loads((pytester.path / "results.json").read_text())
    servers = results["servers"]
    assert sorted(servers) == sorted(VARIANTS)
    assert set(results["workers"]) == {"gw0", "gw1"}
    claimed = {name: record["cuda_visible_devices"].split(",") for name, record in servers.items()}
    assert {name: len(gpus) for name, gpus in claimed.items()} == {"tp2_a": 2, "tp2_b": 2, "tp1": 1}
    assert all(set(gpus) <= {"0", "1", "2", "3"} for gpus in claimed.values())
    for name in VARIANTS:  # one boot per variant, across both workers
        log = (pytester.path / "logs" / f"{name}.log").read_text()
        assert len(re.findall(r"simulator: running on GPU\(s\) ", log)) == 1, log
        assert f"CUDA_VISIBLE_DEVICES={servers[name]['cuda_visible_devices']})" in log
    assert sorted((c["test_id"].split("::")[1], c["variant"]) for c in results["cells"]) == \
        sorted((t, v) for t in ("test_short", "test_long") for v in VARIANTS)
    assert "@" not in "".join(c["test_id"] for c in results["cells"])  # xdist's @group is not part of a cell id

    baselines = _entries(pytester.path / "baselines")
    assert baselines == {(t, v) for t in ("test_perf.py::test_short", "test_perf.py::test_long") for v in VARIANTS}

    gated = _run(pytester)
    gated.assert_outcomes(passed=6)
    verdicts = {(c["test_id"], c["variant"]): c["verdict"] for c in
                json.loads((pytester.path / "results.json").read_text())["cells"]}
    assert set(verdicts.values()) <= {"ok", "improved"}, verdicts
    assert len(verdicts) == 6
    summary = gated.stdout.str()
    assert "sglang-perf [gw0]" in summary and "sglang-perf [gw1]" in summary
    assert "sglang-perf A/B against variant 'tp2_a'" in summary  # over both workers' cells, once
    assert summary.count("sglang-perf A/B against") == 1


def _entries(folder: Path) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in folder.glob("*.json"):
        for test_id, variants in json.loads(path.read_text())["entries"].items():
            found.update((test_id, variant) for variant in variants)
    return found


def test_too_few_visible_gpus_fail_the_boot_with_the_cause(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A variant that pins CUDA_VISIBLE_DEVICES itself claims nothing, and the simulator honours the variable as
    SGLang's ranks do (tp 2 on one visible GPU does not start); a pool too small for a claim says so before any boot."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    write_project(pytester, {"pinned": {"args": ["--tp-size", "2"], "env": {"CUDA_VISIBLE_DEVICES": "3"}}})
    pytester.makepyfile(test_perf="def test_x(sglang_perf): pass")
    pinned = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-log-dir", "logs")
    pinned.assert_outcomes(errors=1)
    assert "CUDA_VISIBLE_DEVICES='3' makes 1 GPU(s) visible but this server uses 2" in pinned.stdout.str()

    write_project(pytester, {"tp2": ["--tp-size", "2"]})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    claimed = pytester.runpytest_subprocess("--sglang-simulate", "--sglang-log-dir", "logs",
                                            "--sglang-gpu-lock-dir", str(pytester.path / "claims"))
    claimed.assert_outcomes(errors=1)
    shown = " ".join(claimed.stdout.str().split())
    assert "the server needs 2 GPU(s) (tp x pp x dp) but this host offers 1 (3)" in shown
    assert not (pytester.path / "logs" / "tp2.log").exists()


@pytest.mark.slow
@pytest.mark.calm
def test_dist_each_is_refused_and_other_modes_keep_a_variant_on_one_worker(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": [], "b": ["--chunked-prefill-size", "4096"]}, extra=LOOSE)
    pytester.makepyfile(test_perf=TESTS.replace("time.sleep(1.0)", "pass"),
                        test_other="import pytest\n@pytest.mark.parametrize('n', range(4))\ndef test_n(n): pass\n")
    each = pytester.runpytest_subprocess("-n", "2", "--dist", "each", "--sglang-simulate")
    assert each.ret == pytest.ExitCode.USAGE_ERROR
    assert "--dist each runs every test on every pytest-xdist worker" in " ".join(each.stderr.str().split())
    by_file = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "--sglang-simulate",
                                            "--sglang-log-dir", "logs", "-v")
    by_file.assert_outcomes(passed=8)
    workers: dict[str, set[str]] = {}
    for line in by_file.stdout.lines:
        found = re.search(r"\[(gw\d)\] .*PASSED (test_perf\.py::test_\w+\[(\w+)\])", line)
        if found:
            workers.setdefault(found[3], set()).add(found[1])
    assert sorted(workers) == ["a", "b"] and all(len(ran_on) == 1 for ran_on in workers.values()), workers
