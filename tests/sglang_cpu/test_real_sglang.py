"""The plugin against real SGLang 0.5.23 on CPU, driven as a user drives it: a project with a
[tool.sglang_perf] matrix and a test file, run with pytest.

A real boot of the tiny model takes 17-30 s on 2 cores, so the whole file boots four servers (plus one that
exits in seconds) in three pytest runs of one project:
  run 1 (plain):               default and capped serve; old_flag (an unknown flag) fails the pre-flight and
                               starts nothing; bad_algo (a flag value SGLang rejects at resolution) exits in seconds;
                               then `sglang-perf baseline accept` keeps its results as the project's baselines
  run 2 (plain):               default only, now gated on those baselines
  run 3 (a sweep):             capped only, test_load.py: one stream, then "max" (its cap of 4) streams at once
Each test below reads what one of these runs left behind: its output, the results file, the server logs, and
what the test file inside recorded about the server's process tree. Every run records its measurements' conditions
but does not use them (run_pytest says why).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from inner_pytest import MAX_TOTAL_TOKENS, Project, Run, run_pytest

from pytest_sglang_perf.server.startup import startup_facts
from pytest_sglang_perf.session.roofline import NO_GPU

MAX_TOKENS = 256
GEN_THROUGHPUT_TOLERANCE = 0.20
"""Per request, the client's decode rate and SGLang's own `gen throughput` windows agree within 20%."""
VARIANTS = {
    "default": [],
    "capped": ["--max-running-requests", "4", "--chunked-prefill-size", "512"],
    "old_flag": ["--enforce-piecewise-cuda-graph"],
    "bad_algo": ["--speculative-algorithm", "MEDUSA"],
}

TEST_FILE = """
import json, os, pathlib

import psutil
from pytest_sglang_perf.prompts import RED_BLACK_TREE, SHORT_FACTUAL

RECORD = pathlib.Path(os.environ["SGLANG_PERF_CPU_TEST_RECORD"])


def _process(proc):
    return {"pid": proc.pid, "created": proc.create_time(), "cmdline": " ".join(proc.cmdline()).strip(),
            "sid": os.getsid(proc.pid)}


def _record(sglang_perf, test):
    root = psutil.Process(sglang_perf.server.pid)
    entry = {"kind": "server", "test": test, "variant": sglang_perf.variant.name, "pid": root.pid,
             "boot_seconds": sglang_perf.server.boot_seconds, "log": str(sglang_perf.server.log_path),
             "tree": [_process(p) for p in (root, *root.children(recursive=True))]}
    with RECORD.open("a") as fh:
        fh.write(json.dumps(entry) + "\\n")


def test_red_black_tree(sglang_perf):
    result = sglang_perf.measure(RED_BLACK_TREE)
    sglang_perf.check(result)
    _record(sglang_perf, "red_black_tree")


def test_openai_client(sglang_perf):
    reply = sglang_perf.openai.chat.completions.create(
        model=sglang_perf.model, messages=[{"role": "user", "content": SHORT_FACTUAL}], max_tokens=8,
        temperature=0, extra_body={"ignore_eos": True})
    assert reply.usage.completion_tokens == 8
    assert reply.choices[0].finish_reason == "length"
    _record(sglang_perf, "openai_client")
"""

LOAD_TEST_FILE = """
import json, os, pathlib

from pytest_sglang_perf.prompts import RED_BLACK_TREE


def test_sweep(sglang_perf):
    sweep = sglang_perf.measure(RED_BLACK_TREE, max_tokens=64, concurrency=[1, "max"], slo={"ttft": "10s"})
    sglang_perf.check(sweep)
    assert [r.params.concurrency for r in sweep] == [1, 4]
"""

CONFTEST = """
import json, os, pathlib, time

import pytest

RECORD = pathlib.Path(os.environ["SGLANG_PERF_CPU_TEST_RECORD"])


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.monotonic()
    try:
        return (yield)
    finally:
        entry = {"kind": "protocol", "nodeid": item.nodeid, "seconds": time.monotonic() - start}
        with RECORD.open("a") as fh:
            fh.write(json.dumps(entry) + "\\n")
"""


def _toml_list(items: Sequence[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def _pyproject() -> str:
    base = ["--device", "cpu", "--load-format", "dummy", "--max-total-tokens", str(MAX_TOTAL_TOKENS),
            "--random-seed", "0"]
    lines = [
        "[tool.sglang_perf]",
        'model = "tiny-llama"',
        f"args = {_toml_list(base)}",
        'startup_timeout = "5m"',
        "[tool.sglang_perf.request]",
        f"max_tokens = {MAX_TOKENS}\nrepeats = 3\nwarmup = 1\ntemperature = 0.6",
        "# 2 cores and a tiny model: wide bands, so that the cycle gates real numbers without flaking.",
        "[tool.sglang_perf.tolerance]",
        'output_throughput = "75%"\ndecode_throughput = "75%"\nttft = "400%"\ntpot = "300%"\nboot_seconds = "200%"',
        "[tool.sglang_perf.variants]",
        *(f"{name} = {_toml_list(args)}" for name, args in VARIANTS.items()),
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def project(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Project:
    path = tmp_path_factory.mktemp("user-project").resolve()
    shutil.copytree(tiny_model, path / "tiny-llama")
    (path / "pyproject.toml").write_text(_pyproject())
    (path / "test_perf.py").write_text(TEST_FILE)
    (path / "test_load.py").write_text(LOAD_TEST_FILE)
    (path / "conftest.py").write_text(CONFTEST)
    return Project(path)


@pytest.fixture(scope="module")
def first_run(project: Project) -> Run:
    return run_pytest(project, "first", "test_perf.py")


@pytest.fixture(scope="module")
def baseline_runs(first_run: Run) -> tuple[subprocess.CompletedProcess[str], Run]:
    """The first run's results accepted as the project's baselines (`sglang-perf baseline accept`: a user keeping a
    run they trust, without measuring it again), then a plain run that gates on them. (`--sglang-update-baselines`
    writes baselines through the same code; the simulator's tests run it.)"""
    accept = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "baseline", "accept", "--dir",
                             "baselines", "--new-environment", "results-first.json"], cwd=first_run.project.path,
                            capture_output=True, text=True, timeout=120)
    gated = run_pytest(first_run.project, "gated", "test_perf.py", "--sglang-variants", "default",
                       "--sglang-markdown=report-gated.md", "--junitxml=junit-gated.xml")
    return accept, gated


@pytest.fixture(scope="module")
def sweep_run(project: Project) -> Run:
    return run_pytest(project, "sweep", "test_load.py", "--sglang-variants", "capped")


def _servers(run: Run) -> dict[str, list[dict[str, Any]]]:
    """The server records of one run, by variant (each test of a variant records its server)."""
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for entry in run.project.records("server"):
        if Path(entry["log"]).parent == run.log_dir:
            by_variant.setdefault(entry["variant"], []).append(entry)
    return by_variant


def test_each_variant_boots_once_and_serves_its_tests(first_run: Run) -> None:
    """Two real variants pass both tests on one server each; old_flag and bad_algo error both of theirs."""
    first_run.result.assert_outcomes(passed=4, errors=4)
    assert first_run.out.count("] booting (") == 3, first_run.out  # default, capped, bad_algo: once each
    servers = _servers(first_run)
    assert set(servers) == {"default", "capped"}
    for variant, entries in servers.items():
        assert len(entries) == 2 and len({e["pid"] for e in entries}) == 1, (variant, entries)
    assert servers["default"][0]["pid"] != servers["capped"][0]["pid"]


def test_readiness_rides_through_the_real_startup(first_run: Run) -> None:
    """Progress comes from SGLang's own log lines while the port is closed, then the launcher's probes meet
    503 (warmup) before 200; SGLang's log shows those probes answered 503 before it was fired up."""
    first_run.result.stdout.fnmatch_lines([
        "sglang-perf: [[]default[]] booting (launched: pid *, port *): *-m sglang.launch_server "
        "--model-path tiny-llama --device cpu --load-format dummy*",
        "sglang-perf: [[]default[]] loading weights (avail mem=* GB) (* s)",
        "sglang-perf: [[]default[]] weights loaded (* s, type=LlamaForCausalLM) (* s)",
        f"sglang-perf: [[]default[]] KV cache allocated (#tokens: {MAX_TOTAL_TOKENS}, dtype: torch.bfloat16) (* s)",
        f"sglang-perf: [[]default[]] scheduler ready (max_total_num_tokens={MAX_TOTAL_TOKENS}, *) (* s)",
        "sglang-perf: [[]default[]] HTTP server * on http://127.0.0.1:* (* s)",
        "sglang-perf: [[]default[]] warming up (GET /ready -> 503) (* s)",
        "sglang-perf: [[]default[]] ready in * s (http://127.0.0.1:*)",
        "sglang-perf: [[]default[]] server stopped",
        "sglang-perf: [[]capped[]] booting (launched: *",
        "sglang-perf: [[]capped[]] ready in * s (*",
        "sglang-perf: [[]capped[]] server stopped",
    ])
    log = first_run.log("default")
    probes = [m.group(1) for m in re.finditer(r'"GET /ready HTTP/1\.1" (\d+)', log)]
    assert probes and probes[0] == "503" and probes[-1] == "200", probes
    assert log.index("Uvicorn running on") < log.index('"GET /ready HTTP/1.1" 503')
    assert log.index('"GET /ready HTTP/1.1" 503') < log.index("The server is fired up and ready to roll!")


_DECODE_LINE = re.compile(r"\] Decode batch, #running-req: (\d+), .*gen throughput \(token/s\): ([\d.]+)")


def sglang_decode_rates(log: str) -> list[float]:
    """SGLang's own decode rate of each request in a server log, from its `Decode batch, ... gen throughput`
    lines (docs/sglang-0.5.23.md §7.2; they say `cpu graph:` on CPU): the harmonic mean, i.e. tokens over time, of
    the request's windows. A request starts at its `Prefill batch` line; its first window is skipped, since it
    also spans the prefill and the idle time before the request. Requests with fewer than 2 windows are left out.
    """
    requests: list[list[float]] = []
    first_window = False
    for line in log.splitlines():
        if "] Prefill batch, " in line:
            requests.append([])
            first_window = True
        elif (match := _DECODE_LINE.search(line)) and requests:
            assert match[1] == "1", f"requests are sent one at a time, yet: {line}"
            if not first_window:
                requests[-1].append(float(match[2]))
            first_window = False
    return [statistics.harmonic_mean(rates) for rates in requests if len(rates) >= 2]


@pytest.mark.parametrize("variant", ["default", "capped"])
def test_measurements_agree_with_sglangs_own_gen_throughput(first_run: Run, variant: str) -> None:
    """Every request yields MAX_TOKENS tokens; throughput, TTFT and TPOT are positive and self-consistent; per
    request, the client's decode rate and 1/TPOT match SGLang's `gen throughput` over that request within 20%
    (median over the 3 measured requests: the last 3 in the log after the plugin's warmup request)."""
    cell = first_run.cells()[variant]
    samples = cell["samples"]
    assert cell["verdict"] == "new"
    assert [s["completion_tokens"] for s in samples] == [MAX_TOKENS] * 3
    assert all(s["prompt_tokens"] > 10 and 0 < s["ttft"] < s["e2e"] for s in samples)
    medians = {name: summary["median"] for name, summary in cell["summaries"].items()}
    assert all(medians[name] > 0 for name in ("output_throughput", "decode_throughput", "ttft", "tpot"))
    assert medians["output_throughput"] <= medians["decode_throughput"] * 1.01
    server = sglang_decode_rates(first_run.log(variant))
    assert len(server) == 4, server  # the plugin's warmup request, then the 3 measured ones
    client = [(s["completion_tokens"] - 1) / s["decode_time"] for s in samples]
    per_token = [(s["e2e"] - s["ttft"]) / (s["completion_tokens"] - 1) for s in samples]
    ratios = [c / r for c, r in zip(client, server[1:], strict=True)]
    inverse_tpot = [1 / (t * r) for t, r in zip(per_token, server[1:], strict=True)]
    detail = {"client": client, "sglang": server[1:], "medians": medians}
    assert statistics.median(ratios) == pytest.approx(1, abs=GEN_THROUGHPUT_TOLERANCE), detail
    assert statistics.median(inverse_tpot) == pytest.approx(1, abs=GEN_THROUGHPUT_TOLERANCE), detail


def test_startup_facts_parse_from_the_real_log(first_run: Run) -> None:
    """SGLang's startup timings and KV capacity line parse; the capped variant's flags show in them. On CPU
    the capacity line says `available_cpu_mem` (not `available_gpu_mem`) and every graph timing is 0."""
    default, capped = (startup_facts(first_run.log(name)) for name in ("default", "capped"))
    for facts in (default, capped):
        assert facts.load_weight is not None and facts.load_weight >= 0
        assert facts.kv_cache_allocation is not None and facts.scheduler_e2e is not None
        assert facts.tokenizer_e2e is not None and facts.tokenizer_e2e > 0
        assert facts.max_total_num_tokens == MAX_TOTAL_TOKENS
        assert facts.context_len == 4096
        assert facts.available_gpu_mem is None
        assert facts.available_cpu_mem is not None and facts.available_cpu_mem > 0
        assert facts.cuda_graph is not None and set(facts.cuda_graph) >= {"prefill", "decode"}
        assert all(seconds == 0 for seconds in facts.cuda_graph.values())
    assert (capped.max_running_requests, capped.chunked_prefill_size) == (4, 512)
    assert default.max_running_requests not in (None, 4)
    assert default.chunked_prefill_size not in (None, 512)


def _servers_section(run: Run) -> dict[str, dict[str, Any]]:
    servers: dict[str, dict[str, Any]] = json.loads(
        (run.project.path / f"results-{run.name}.json").read_text())["servers"]
    return servers


def test_effective_configuration_is_verified_against_the_real_server_info(first_run: Run) -> None:
    """Every requested flag is found in real SGLang's /server_info with the value asked (the capped variant's
    request cap through `effective_max_running_requests_per_dp`); CPU runs no CUDA graph, and that is not a
    finding (SGLang's default on CPU, not something it switched off)."""
    servers = _servers_section(first_run)
    assert set(servers) == {"default", "capped"}
    for name, server in servers.items():
        effective = server["effective"]
        assert effective["verdict"] == "ok", (name, effective)
        statuses = {flag["flag"]: flag["status"] for flag in effective["flags"]}
        for flag in ("--device", "--load-format", "--max-total-tokens", "--random-seed"):
            assert statuses[flag] == "ok", (name, effective["flags"])
        # SGLang's plan says decode "full" on CPU too; nothing was captured, and the report says so.
        assert effective["ran"]["decode CUDA graph"] == "not captured (cpu; planned full)", effective["ran"]
        assert f"[{name}] effective configuration: ok" in first_run.out
    capped = {flag["flag"]: flag for flag in servers["capped"]["effective"]["flags"]}
    assert capped["--max-running-requests"]["effective"] == 4
    assert capped["--chunked-prefill-size"]["status"] == "ok"
    assert "max running requests: 4 per DP rank" in first_run.out


def test_startup_facts_and_graph_use_are_in_the_results(first_run: Run) -> None:
    """The results file carries each server's startup facts (as parsed from its log) and how many of its
    prefill/decode batches ran with a graph (none on CPU), and every cell carries its server's facts."""
    servers = _servers_section(first_run)
    for name, server in servers.items():
        assert server["startup"] == startup_facts(first_run.log(name)).to_dict()
        assert server["startup"]["graph_capture_seconds"] == 0
        assert server["boot_seconds"] > 0
        use = server["graph_use"]
        assert use["prefill_true"] == use["decode_true"] == 0
        assert use["prefill_false"] >= 4, use  # warmup + 3 measured requests, one prefill batch each at least
    for cell in first_run.cells().values():
        assert cell["startup"]["max_total_num_tokens"] == MAX_TOTAL_TOKENS


def test_a_cpu_run_says_why_it_has_no_bandwidth_ceiling(first_run: Run) -> None:
    """No GPU, no probe and no ceiling: each decode cell says why, in the results file and once per variant in the
    summary's roofline section (never a silent gap, never a made-up ceiling)."""
    cells = first_run.cells()
    assert cells
    for cell in cells.values():
        assert cell["roofline"] == {"unavailable": NO_GPU}
    words = " ".join(first_run.result.stdout.str().split())
    assert "sglang-perf roofline: decode against the memory-bandwidth ceiling, batch 1" in words
    assert f"variant default: {NO_GPU}" in words


def _protocol_seconds(run: Run) -> dict[str, float]:
    """Seconds of each inner test's whole run protocol (its variant's boot included, for the first test)."""
    return {e["nodeid"]: e["seconds"] for e in run.project.records("protocol")}


def test_unknown_flag_fails_the_preflight_with_sglangs_own_message(first_run: Run) -> None:
    """--enforce-piecewise-cuda-graph (gone in 0.5.23): the installed SGLang's own parser rejects it before any
    server starts; both old_flag tests error at once with that message."""
    first_run.result.stdout.fnmatch_lines([
        "sglang-perf: pre-flight [[]old_flag[]] error: unrecognized arguments: --enforce-piecewise-cuda-graph "
        "(checked with the installed SGLang 0.5.23)*",
        "*ERROR at setup of test_red_black_tree[[]old_flag[]]*",
        "*variant 'old_flag' failed the pre-flight check; no server was started*",
        "*ERROR at setup of test_openai_client[[]old_flag[]]*",
    ])
    assert "[old_flag] booting" not in first_run.out
    seconds = _protocol_seconds(first_run)
    assert max(seconds[f"test_perf.py::test_{name}[old_flag]"] for name in ("red_black_tree", "openai_client")) < 2


def test_server_exiting_at_boot_fails_its_variant_fast(first_run: Run) -> None:
    """--speculative-algorithm MEDUSA parses, then SGLang's resolution raises and the server exits 1 before it
    loads anything: both bad_algo tests error with SGLang's message from the log tail, the failed boot is not
    retried, and it took a fraction of a real boot."""
    first_run.result.stdout.fnmatch_lines([
        "*ERROR at setup of test_red_black_tree[[]bad_algo[]]*",
        "*SGLang server 'bad_algo' failed to boot: exited with code 1 during boot*",
        "*exit code:  1*",
        "*| ValueError: Unknown speculative algorithm name: MEDUSA*",
        "*ERROR at setup of test_openai_client[[]bad_algo[]]*",
    ])
    assert first_run.out.count("[bad_algo] booting") == 1
    seconds = _protocol_seconds(first_run)
    real_boots = [entries[0]["boot_seconds"] for entries in _servers(first_run).values()]
    assert seconds["test_perf.py::test_red_black_tree[bad_algo]"] < 0.75 * min(real_boots), (seconds, real_boots)
    assert seconds["test_perf.py::test_openai_client[bad_algo]"] < 2


def test_no_sglang_process_survives_teardown(first_run: Run,
                                            baseline_runs: tuple[subprocess.CompletedProcess[str], Run]) -> None:
    """Each server tree had an sglang::scheduler and an sglang::detokenizer in the server's session; after every
    run no process of any launched server's session is left, nor any process the test file saw in a tree."""
    for entries in _servers(first_run).values():
        titles = {p["cmdline"] for p in entries[0]["tree"] if p["sid"] == entries[0]["pid"]}
        assert {"sglang::scheduler", "sglang::detokenizer"} <= titles, titles
    _, gated = baseline_runs
    assert len(first_run.sessions) == 3 and len(gated.sessions) == 1
    for run in (first_run, gated):
        assert run.leftovers == (), (run.name, run.leftovers)
    for entry in first_run.project.records("server"):
        for proc in entry["tree"]:
            assert not _same_process_alive(proc["pid"], proc["created"]), proc


def _same_process_alive(pid: int, created: float) -> bool:
    """Whether that process (not a later one with its pid) still runs; a zombie awaiting its reaper is gone."""
    try:
        proc = psutil.Process(pid)
        return proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_baseline_cycle_new_then_recorded_then_passing(
        first_run: Run, baseline_runs: tuple[subprocess.CompletedProcess[str], Run]) -> None:
    """Run 1 wrote no baseline (cells `new`); accepting its results file records its real samples; the next plain
    run gates on them and passes."""
    accept, gated = baseline_runs
    first_run.result.stdout.fnmatch_lines(["*test_perf.py::test_red_black_tree*output_throughput*new"])
    assert accept.returncode == 0, accept.stdout + accept.stderr
    [baseline_file] = (first_run.project.path / "baselines").glob("*.json")
    assert baseline_file.name == "cpu__tiny-llama.json"
    cells = json.loads(baseline_file.read_text())["entries"]["test_perf.py::test_red_black_tree"]
    assert set(cells) == {"default", "capped"}  # the variants that were measured; the two that errored are not
    assert len(cells["default"]["samples"]) == 3
    assert cells["default"]["args"][:2] == ["--device", "cpu"]
    gated.result.assert_outcomes(passed=2)
    # Compared with its own baseline (the identity read with the installed SGLang's parser matches: not stale), and
    # an unchanged server is never red; a noisy CPU run may leave a metric inconclusive, never regressed.
    assert gated.cells()["default"]["stale"] == [] and gated.cells()["default"]["verdict"] != "stale"
    assert cells["default"]["identity"]["gpus"] == "cpu"
    verdicts = {name: check["verdict"] for name, check in gated.cells()["default"]["metrics"].items()}
    assert set(verdicts.values()) <= {"ok", "improved", "inconclusive"}, verdicts
    assert all(check["baseline"] is not None for check in gated.cells()["default"]["metrics"].values())


def test_a_real_runs_results_leave_the_terminal_and_are_accepted_as_baselines(
        first_run: Run, baseline_runs: tuple[subprocess.CompletedProcess[str], Run]) -> None:
    """The gated run's Markdown report, junit.xml properties and results file carry real numbers labelled as
    measured here; `sglang-perf baseline accept` turns its results file into entries that validate, with the same
    identity as the recorded baseline (a later run would gate on them, not find them stale)."""
    _, gated = baseline_runs
    gated.result.assert_outcomes(passed=2)
    path = first_run.project.path
    report = (path / "report-gated.md").read_text()
    assert report.startswith("# sglang-perf results\n") and "SIMULATED" not in report
    assert "`output_throughput`" in report and "tok/s" in report
    props = {p.get("name"): p.get("value") for p in ET.parse(path / "junit-gated.xml").iter("property")}
    assert props["sglang_perf.variant"] == "default" and props["sglang_perf.simulated"] == "False"
    assert float(props["sglang_perf.output_throughput.measured"] or "nan") > 0
    doc = json.loads((path / "results-gated.json").read_text())
    assert doc["machine"]["label"] == "the machine that measured these numbers" and doc["machine"]["cpu_count"]
    [cell] = [c for c in doc["cells"] if c["test_id"].endswith("test_red_black_tree")]
    # the conditions are recorded though not used (run_pytest); real SGLang's stream is read with kernel stamps
    assert cell["host"]["cores"] == len(os.sched_getaffinity(0)) and cell["client"]["lag_p99"] is not None
    assert cell["client"]["kernel_stamped"] >= 0.9 * cell["client"]["reads"] > 0, cell["client"]
    # every content chunk counted, and those that shared a read with the one before (SGLang may write some together)
    assert cell["client"]["chunks"] == sum(s["chunks"] for s in cell["samples"]) > cell["client"]["shared"] >= 0
    folder = path / "accepted"
    accept = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "baseline", "accept", "--dir",
                             str(folder), "--new-environment", "results-gated.json"], cwd=path, capture_output=True,
                            text=True, timeout=120)
    assert accept.returncode == 0, accept.stdout + accept.stderr
    validate = subprocess.run([sys.executable, "-m", "pytest_sglang_perf.cli", "baseline", "validate",
                               str(folder)], cwd=path, capture_output=True, text=True, timeout=120)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    [accepted_file] = folder.glob("*.json")
    assert accepted_file.name == "cpu__tiny-llama.json"
    accepted = json.loads(accepted_file.read_text())["entries"]["test_perf.py::test_red_black_tree"]["default"]
    recorded = json.loads((path / "baselines" / accepted_file.name).read_text())
    recorded_entry = recorded["entries"]["test_perf.py::test_red_black_tree"]["default"]
    assert accepted["identity"] == recorded_entry["identity"]
    assert accepted["source"]["how"] == "accepted" and accepted["source"]["results_file"] == "results-gated.json"


def test_a_concurrency_sweep_batches_real_sglang_and_max_is_its_cap(sweep_run: Run) -> None:
    """concurrency="max" is the capped variant's --max-running-requests 4, read from real SGLang's /server_info;
    its four streams ran together (each one's first token before any one's last), SGLang decoded them as one batch
    of 4, and the batch raised the aggregate throughput above one stream's."""
    sweep_run.result.assert_outcomes(passed=1)
    assert sweep_run.leftovers == ()
    cells = {cell["test_id"]: cell for cell in
             json.loads((sweep_run.project.path / "results-sweep.json").read_text())["cells"]}
    one, most = cells["test_load.py::test_sweep"], cells["test_load.py::test_sweep@cmax"]
    assert most["load"]["streams"] == 4 and most["load"]["rounds"] == 3 and len(most["samples"]) == 12
    for index in range(3):
        streams = [s for s in most["samples"] if s["round"] == index]
        assert max(s["start"] + s["ttft"] for s in streams) < min(s["start"] + s["e2e"] for s in streams), streams
    assert all(s["completion_tokens"] == 64 for s in most["samples"])
    batches = [int(n) for n in re.findall(r"\] Decode batch, #running-req: (\d+)", sweep_run.log("capped"))]
    assert max(batches) == 4, batches
    aggregate = [c["summaries"]["output_throughput"]["median"] for c in (one, most)]
    assert aggregate[1] > 1.5 * aggregate[0], aggregate
    assert most["summaries"]["request_throughput"]["n"] == 3 and most["load"]["slo_attainment"] == 1.0
    words = " ".join(sweep_run.out.split())
    assert "test_load.py::test_sweep@cmax [capped]: 4 streams x 3 rounds:" in words, sweep_run.out
