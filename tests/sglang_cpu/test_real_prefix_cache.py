"""Cold and warm prefill against real SGLang 0.5.23 on CPU: by default every measured request prefills its whole
prompt (the plugin POSTs /flush_cache before each), and `prefix_cache="warm"` measures the cached case. The samples'
cached_tokens (from `sglext.cached_tokens_details`, and from `usage.prompt_tokens_details` with
--enable-cache-report) agree with SGLang's own `Prefill batch ... #cached-token:` log lines, request by request.

One pytest run of a user project boots two servers (~20-30 s each on 2 cores): one plain, one with
--enable-cache-report and chunks of 128 tokens; each serves a cold and a warm measurement of the same prompt, and a
prompt of exactly 300 tokens (`measure(prompt_tokens=300)`, built with the server's /v1/tokenize): SGLang's own
usage counts 300, its `Prefill batch` lines count the chunks (docs/prefill.md).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from inner_pytest import MAX_TOTAL_TOKENS, Project, Run, run_pytest

VARIANTS = {"default": [], "cache_report": ["--enable-cache-report", "--chunked-prefill-size", "128"]}
EXACT = 300
"""test_exact's prompt length: 3 chunks of at most 128 tokens on the cache_report server, 1 on the default one."""
TEST_FILE = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_cold(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))


def test_warm(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE, prefix_cache="warm"))


def test_exact(sglang_perf):
    sglang_perf.check(sglang_perf.measure(prompt_tokens=300, max_tokens=4))
"""
_PREFILL = re.compile(r"\] Prefill batch, #new-seq: 1, #new-token: (\d+), #cached-token: (\d+),")


def _pyproject() -> str:
    args = ["--device", "cpu", "--load-format", "dummy", "--max-total-tokens", str(MAX_TOTAL_TOKENS),
            "--random-seed", "0"]
    lines = [
        "[tool.sglang_perf]",
        'model = "tiny-llama"',
        f"args = {json.dumps(args)}",
        'startup_timeout = "5m"',
        "[tool.sglang_perf.request]",
        "max_tokens = 16\nrepeats = 3\nwarmup = 1\ntemperature = 0.6",
        "[tool.sglang_perf.variants]",
        *(f"{name} = {json.dumps(flags)}" for name, flags in VARIANTS.items()),
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    path = tmp_path_factory.mktemp("prefix-cache-project").resolve()
    shutil.copytree(tiny_model, path / "tiny-llama")
    (path / "pyproject.toml").write_text(_pyproject())
    (path / "test_prefix.py").write_text(TEST_FILE)
    # A warm measurement that never hit the cache would only warn: make that a failure here.
    return run_pytest(Project(path), "prefix", "-W", "error::pytest_sglang_perf.SGLangPrefixCacheWarning")


def _cells(run: Run) -> dict[str, dict[str, Any]]:
    data = json.loads((run.project.path / f"results-{run.name}.json").read_text())
    return {f"{cell['test_id'].split('::')[-1]}[{cell['variant']}]": cell for cell in data["cells"]}


def _prefills(run: Run, variant: str) -> list[tuple[int, int]]:
    """(#new-token, #cached-token) of each of the server's `Prefill batch` lines, in order."""
    return [(int(new), int(cached)) for new, cached in _PREFILL.findall(run.log(variant))]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cold_prefills_the_whole_prompt_and_warm_reads_it_from_the_cache(run: Run, variant: str) -> None:
    """After SGLang's own warmup: test_cold's warmup and 3 requests each follow a flush and compute every prompt
    token (`#cached-token: 0`, samples 0); test_warm's requests find the prompt cached (`#new-token: 1`) and the
    samples report exactly the log's `#cached-token`."""
    outcomes = run.result.parseoutcomes()
    assert (run.result.ret, outcomes.get("passed"), outcomes.get("failed")) == (0, 6, None), run.out
    cells = _cells(run)
    cold, warm = cells[f"test_cold[{variant}]"]["samples"], cells[f"test_warm[{variant}]"]["samples"]
    prompt = cold[0]["prompt_tokens"]
    assert prompt > 10 and all(s["prompt_tokens"] == prompt for s in cold + warm)
    lines = _prefills(run, variant)
    # SGLang's startup warmup, then warmup + 3 requests per test, test_exact's in chunks
    assert len(lines) == 1 + 4 + 4 + 4 * (1 if variant == "default" else 3), lines
    cold_lines, warm_lines = lines[1:5], lines[5:9]
    assert cold_lines == [(prompt, 0)] * 4, lines
    assert [s["cached_tokens"] for s in cold] == [0, 0, 0]
    assert all(new + cached == prompt and 0 < cached < prompt for new, cached in warm_lines), lines
    assert [s["cached_tokens"] for s in warm] == [cached for _, cached in warm_lines[1:]]
    assert run.log(variant).count("Cache flushed successfully!") == 4 + 4  # test_cold, test_exact
    assert run.leftovers == ()


@pytest.mark.parametrize(("variant", "chunks"), [("default", [EXACT]), ("cache_report", [128, 128, EXACT - 256])])
def test_a_prompt_of_exact_length_and_its_prefill(run: Run, variant: str, chunks: list[int]) -> None:
    """test_exact: every request (warmup included) counted exactly 300 prompt tokens by SGLang's own usage, was
    prefilled in the chunks its server's chunked_prefill_size allows (its `Prefill batch` lines, after a flush each),
    and the cell has a prefill throughput (prompt tokens / TTFT) and TTFT percentiles; no compute ceiling on CPU."""
    cell = _cells(run)[f"test_exact[{variant}]"]
    assert [s["prompt_tokens"] for s in cell["samples"]] == [EXACT] * 3
    assert cell["params"]["prompt_tokens"] == EXACT
    assert [new for new, _ in _prefills(run, variant)[9:]] == chunks * 4
    view = cell["server_view"]["prefill"]
    assert (view["chunks_per_request"], view["new_tokens"]) == (len(chunks), 4 * EXACT)
    rate, ttft = cell["summaries"]["prefill_throughput"]["median"], cell["summaries"]["ttft"]["median"]
    assert rate == pytest.approx(EXACT / ttft, rel=1e-9)  # per request: the median of 3 is the median's
    assert set(cell["load"]["latency_percentiles"]["ttft"]) == {"p50", "p90", "p99"}
    assert cell["prefill_roofline"]["unavailable"].startswith("no GPU")
