"""The plugin against an older real SGLang release on CPU: CI's older-release lane.

    tox -e sglang-cpu -- python tools/sglang_versions.py run 0.5.13 -- \
        pytest tests/sglang_cpu/test_older_release.py tests/sglang_cpu/test_sigkill_no_orphan.py

The runner the plugin is for pins whatever SGLang its deployment runs. 0.5.13 is the oldest release that serves on
this CPU with the project's recipe (0.5.12 imports `sgl_kernel`, a CUDA-only package, at startup:
docs/sglang-versions.md); like every release up to 0.5.19 it needs its own flag to capture no prefill graph on a
CPU (releases.py). One project, one variant with a flag to verify, two runs of one boot each:
  run 1: `--sglang-update-baselines`: the red-black-tree cell recorded on a cold prefix cache;
  run 2: the same cell gated on that baseline, and a concurrency sweep (one stream, then "max" = the cap of 4).
The SIGKILL test (test_sigkill_no_orphan.py) runs in the same lane.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from inner_pytest import Project, Run, run_pytest
from releases import CPU_ARGS, OLDER, OLDER_VAR

from pytest_sglang_perf.server.batch_lines import batch_lines

pytestmark = pytest.mark.skipif(OLDER is None, reason=(
    f"the older-release lane's test ({OLDER_VAR} unset): run it with `tox -e sglang-cpu -- python "
    "tools/sglang_versions.py run 0.5.13 -- pytest tests/sglang_cpu/test_older_release.py`"))

CAPPED = ["--max-running-requests", "4"]
PYPROJECT = f"""
[tool.sglang_perf]
model = "tiny-llama"
args = {json.dumps(CPU_ARGS)}
startup_timeout = "5m"
[tool.sglang_perf.request]
max_tokens = 128
repeats = 3
warmup = 1
temperature = 0.6
# 2 cores and a tiny model: wide bands, so that the cycle gates real numbers without flaking.
[tool.sglang_perf.tolerance]
output_throughput = "75%"
decode_throughput = "75%"
ttft = "400%"
tpot = "300%"
boot_seconds = "200%"
[tool.sglang_perf.variants]
capped = {json.dumps(CAPPED)}
"""
PERF_TEST = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_red_black_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))
"""
LOAD_TEST = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_sweep(sglang_perf):
    sweep = sglang_perf.measure(RED_BLACK_TREE, max_tokens=64, concurrency=[1, "max"])
    sglang_perf.check(sweep)
    assert [r.params.concurrency for r in sweep] == [1, 4]
"""


@pytest.fixture(scope="module")
def project(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Project:
    path = tmp_path_factory.mktemp("older-release-project").resolve()
    shutil.copytree(tiny_model, path / "tiny-llama")
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "test_perf.py").write_text(PERF_TEST)
    (path / "test_load.py").write_text(LOAD_TEST)
    (path / "conftest.py").write_text("")
    return Project(path)


@pytest.fixture(scope="module")
def recorded(project: Project) -> Run:
    return run_pytest(project, "record", "test_perf.py", "--sglang-update-baselines")


@pytest.fixture(scope="module")
def gated(recorded: Run) -> Run:
    return run_pytest(recorded.project, "gated", "test_perf.py", "test_load.py")


def _results(run: Run) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run.project.path / f"results-{run.name}.json").read_text())
    return data


def _cells(run: Run) -> dict[str, dict[str, Any]]:
    return {cell["test_id"].split("::")[-1]: cell for cell in _results(run)["cells"]}


def test_the_older_release_serves_and_the_results_say_which(recorded: Run) -> None:
    import sglang.version

    assert sglang.version.__version__ == OLDER  # the lane put the release first on the path
    recorded.result.assert_outcomes(passed=1)
    assert recorded.leftovers == ()
    assert f'"sglang": "{OLDER}"' in json.dumps(_results(recorded))


def test_its_effective_configuration_has_no_false_finding(recorded: Run) -> None:
    """Every flag asked is found in that release's /server_info with the value asked: its own prefill-graph flag
    and the request cap included; no flag is reported overridden, nothing switched off."""
    [server] = _results(recorded)["servers"].values()
    effective = server["effective"]
    assert effective["verdict"] == "ok", effective
    statuses = {flag["flag"]: flag["status"] for flag in effective["flags"]}
    assert statuses["--max-running-requests"] == "ok", effective["flags"]
    assert "[capped] effective configuration: ok" in recorded.out
    # judged by that release's own rules (sglang_facts/data), which say where its /server_info shows the prefill
    # graph: 0.5.13's own switch (disable_piecewise_cuda_graph), cuda_graph_config from 0.5.14
    assert effective.get("facts_note") is None, effective
    assert effective["ran"]["prefill CUDA graph"].startswith("disabled"), effective["ran"]


def test_a_cold_prefix_cache_prefills_every_prompt_whole(recorded: Run) -> None:
    """Each request follows a /flush_cache: that release's own `Prefill batch` lines say no token was cached."""
    prefills = [batch for batch in batch_lines(recorded.log("capped")) if batch.kind == "Prefill"]
    assert len(prefills) >= 4 and all(batch.fields.get("#cached-token") == "0" for batch in prefills[1:]), prefills
    samples = _cells(recorded)["test_red_black_tree"]["samples"]
    assert [sample["cached_tokens"] for sample in samples] == [0, 0, 0]


def test_a_cell_recorded_on_the_older_release_gates_the_next_run(gated: Run) -> None:
    gated.result.assert_outcomes(passed=2)
    assert gated.leftovers == ()
    cell = _cells(gated)["test_red_black_tree"]
    verdicts = {name: check["verdict"] for name, check in cell["metrics"].items()}
    assert cell["stale"] == [] and set(verdicts.values()) <= {"ok", "improved", "inconclusive"}, verdicts
    assert verdicts["output_throughput"] != "new"


def test_a_sweep_reaches_the_releases_request_cap(gated: Run) -> None:
    cells = _cells(gated)
    assert {"test_sweep", "test_sweep@cmax"} <= set(cells), sorted(cells)  # one stream: no suffix
    running = [batch.running_req for batch in batch_lines(gated.log("capped")) if batch.kind == "Decode"]
    assert max(r for r in running if r is not None) == 4, running
