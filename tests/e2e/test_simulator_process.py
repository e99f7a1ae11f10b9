"""The simulator as a real process on a real port: boot, readiness, streaming, pacing, shutdown."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

pytestmark = pytest.mark.e2e

MODEL_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
                "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                "intermediate_size": 8192, "vocab_size": 128256, "max_position_embeddings": 131072,
                "torch_dtype": "bfloat16", "eos_token_id": 128001}
SPEC_FLAGS = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "4"]
STOP_SECONDS = 2.0


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """The processes still alive after timeout; a zombie counts as gone (its reaping is its parent's business)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [proc for proc in procs if _alive(proc)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Sim:
    """One simulator process, launched in its own session with its log in a file."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    children: list[psutil.Process] = field(default_factory=list)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert self.process.poll() is None, f"simulator exited {self.process.returncode}:\n{self.log()}"
            assert time.monotonic() < deadline, f"no {text!r} in the log after {timeout} s:\n{self.log()}"
            time.sleep(0.005)

    def wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not (port_open(self.port) and get(self.port, "/ready")[0] == 200):
            assert self.process.poll() is None, f"simulator exited {self.process.returncode}:\n{self.log()}"
            assert time.monotonic() < deadline, f"not ready after {timeout} s:\n{self.log()}"
            time.sleep(0.01)

    def tree(self) -> list[psutil.Process]:
        try:
            return [psutil.Process(self.process.pid), *psutil.Process(self.process.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        procs = self.tree() + self.children
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        wait_gone(procs, timeout=5)
        self.process.wait(timeout=5)


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def post(port: int, path: str, body: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@dataclass
class Stream:
    sent: float
    events: list[tuple[float, dict[str, Any]]]

    def content(self) -> list[tuple[float, dict[str, Any]]]:
        return [(t, e) for t, e in self.events if e["choices"] and e["choices"][0]["delta"].get("content")]

    def usage(self) -> dict[str, Any]:
        return next(e["usage"] for _, e in self.events if not e["choices"] and e.get("usage"))

    def decode_rate(self) -> float:
        """Tokens after the first / (last content chunk - first content chunk)."""
        content = self.content()
        return float(self.usage()["completion_tokens"] - 1) / (content[-1][0] - content[0][0])


def stream_chat(port: int, **fields: Any) -> Stream:
    body = {"model": "sim", "messages": [{"role": "user", "content": "Write a red-black tree in C."}],
            "stream": True, "stream_options": {"include_usage": True}, **fields}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    events: list[tuple[float, dict[str, Any]]] = []
    try:
        sent = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body=orjson.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type", "").startswith("text/event-stream")
        while line := response.readline():
            if not line.startswith(b"data: "):
                continue
            now, payload = time.perf_counter(), line[6:].strip()
            if payload == b"[DONE]":
                break
            events.append((now, orjson.loads(payload)))
    finally:
        conn.close()
    return Stream(sent, events)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model")
    (path / "config.json").write_text(json.dumps(MODEL_CONFIG))
    return path


Launch = Callable[..., Sim]


def _launcher(model_dir: Path, tmp_dir: Path) -> tuple[Launch, list[Sim]]:
    launched: list[Sim] = []

    def launch(*flags: str, boot_seconds: float = 0.3, env: dict[str, str] | None = None) -> Sim:
        port = free_port()
        log_path = tmp_dir / f"sim-{port}.log"
        command = [sys.executable, "-m", "pytest_sglang_perf.simulator", "--model-path", str(model_dir),
                   "--sim-boot-seconds", str(boot_seconds), *flags, "--host", "127.0.0.1", "--port", str(port)]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, **(env or {})})
        sim = Sim(process, port, log_path)
        launched.append(sim)
        return sim

    return launch, launched


def _cleanup(launched: list[Sim]) -> None:
    for sim in launched:
        sim.kill()
        assert not wait_gone(sim.tree() + sim.children, timeout=0)


@pytest.fixture()
def launch(model_dir: Path, tmp_path: Path) -> Iterator[Launch]:
    factory, launched = _launcher(model_dir, tmp_path)
    yield factory
    _cleanup(launched)


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """A plain (no speculative decoding) simulator shared by the read-only tests."""
    factory, launched = _launcher(model_dir, tmp_path_factory.mktemp("logs"))
    sim = factory("--sim-decode-tok-s", "400", "--sim-ttft", "0.05")
    sim.wait_ready()
    yield sim
    _cleanup(launched)


def test_port_closed_during_boot_then_503_until_warmup_then_200(launch: Launch) -> None:
    sim = launch(boot_seconds=1.5)
    sim.wait_for_log("Load weight begin.")
    assert not port_open(sim.port), "the port must not listen while weights load"
    sim.wait_for_log("Capture target decode CUDA graph begin.")
    assert not port_open(sim.port), "the port must not listen during CUDA graph capture"
    deadline = time.monotonic() + 10
    while not port_open(sim.port):
        assert time.monotonic() < deadline, sim.log()
        time.sleep(0.002)
    assert [get(sim.port, path)[0] for path in ("/health", "/health_generate", "/ready")] == [503, 503, 503]
    sim.wait_ready()
    assert [get(sim.port, path)[0] for path in ("/health", "/health_generate", "/ready")] == [200, 200, 200]
    sim.wait_for_log("The server is fired up and ready to roll!")
    log = sim.log()
    order = ["server_args={'model_path': ", "Load weight begin.", "KV Cache is allocated.",
             "Capture target prefill CUDA graph end.", "max_total_num_tokens=", "Engine startup timings (s):",
             "INFO:     Started server process [", "Uvicorn running on http://127.0.0.1:",
             "The server is fired up and ready to roll!"]
    positions = [log.index(text) for text in order]
    assert positions == sorted(positions), log
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Load weight begin\. avail mem=\d+\.\d\d GB$", log, re.M)


def test_streamed_completion_exact_tokens_usage_and_rate(server: Sim) -> None:
    stream = stream_chat(server.port, max_tokens=200, ignore_eos=True, seed=1)
    usage = stream.usage()
    assert usage["completion_tokens"] == 200 and usage["total_tokens"] == usage["prompt_tokens"] + 200
    assert set(usage) == {"prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details",
                          "reasoning_tokens", "completion_tokens_details"}
    assert stream.events[0][1]["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant",
                                                          "content": ""}
    assert len(stream.content()) == 200  # one token per chunk without speculative decoding
    finish = [e for _, e in stream.events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert [e["choices"][0]["finish_reason"] for e in finish] == ["length"]
    assert not any("sglext" in e for _, e in stream.events)
    assert stream.decode_rate() == pytest.approx(400, rel=0.10)
    ttft = stream.content()[0][0] - stream.sent
    assert 0.05 <= ttft < 0.05 + 0.05


def test_seed_makes_content_deterministic_and_eos_stops_early(server: Sim) -> None:
    texts = []
    for _ in range(2):
        stream = stream_chat(server.port, max_tokens=40, seed=7)
        texts.append("".join(e["choices"][0]["delta"]["content"] for _, e in stream.content()))
        usage = stream.usage()
        assert 20 <= usage["completion_tokens"] <= 40
        finish = next(e for _, e in stream.events if e["choices"] and e["choices"][0]["finish_reason"])
        assert finish["choices"][0]["finish_reason"] == "stop"
        assert finish["choices"][0]["matched_stop"] == MODEL_CONFIG["eos_token_id"]
    assert texts[0] == texts[1] and texts[0]


def test_non_streamed_completion(server: Sim) -> None:
    body = {"model": "sim", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "ignore_eos": True}
    status, raw = post(server.port, "/v1/chat/completions", orjson.dumps(body))
    response = orjson.loads(raw)
    assert status == 200 and response["object"] == "chat.completion"
    assert response["usage"]["completion_tokens"] == 20 and response["choices"][0]["finish_reason"] == "length"
    assert "sglext" not in response


def test_bad_requests_are_400(server: Sim) -> None:
    body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}]})
    status, raw = post(server.port, "/v1/chat/completions", body, content_type="text/plain")
    assert status == 400 and orjson.loads(raw)["code"] == 400
    status, raw = post(server.port, "/v1/chat/completions", b"{oops")
    assert status == 400 and orjson.loads(raw)["object"] == "error"


def test_info_endpoints(server: Sim) -> None:
    status, raw = get(server.port, "/model_info")
    assert status == 200
    model_info = orjson.loads(raw)
    assert model_info["architectures"] == ["LlamaForCausalLM"] and model_info["model_type"] == "llama"
    assert orjson.loads(get(server.port, "/get_model_info")[1]) == model_info
    info = orjson.loads(get(server.port, "/server_info")[1])
    assert (info["version"], info["status"]) == ("0.5.23", "ready")
    assert info["tp_size"] == 1 and info["speculative_algorithm"] is None and info["max_running_requests"] is None
    assert set(info["cuda_graph_config"]) == {"decode", "prefill"}
    assert info["cuda_graph_config"]["prefill"]["backend"] == "breakable"
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] > 0
    assert "launch_command" in info and info["max_total_num_tokens"] > 0
    models = orjson.loads(get(server.port, "/v1/models")[1])
    assert models["data"][0]["max_model_len"] == 131072 and models["data"][0]["owned_by"] == "sglang"
    assert "Endpoint '/get_model_info' is deprecated" in server.log()


def test_speculative_stream_reports_accept_length(launch: Launch) -> None:
    sim = launch(*SPEC_FLAGS, "--sim-decode-tok-s", "600", "--sim-accept-length", "2.5", "--sim-seed", "3")
    sim.wait_ready()
    stream = stream_chat(sim.port, max_tokens=300, ignore_eos=True, return_spec_tokens_details=True)
    assert stream.usage()["completion_tokens"] == 300
    sglext = [e for _, e in stream.events if not e["choices"] and "sglext" in e]
    assert len(sglext) == 1 and sglext[0]["usage"] is None
    details = sglext[0]["sglext"]["spec_tokens_details"]
    assert details["spec_verify_ct"] == len(stream.content()) - 1  # one chunk per verify step + the prefill token
    assert details["spec_accept_length"] == pytest.approx(300 / details["spec_verify_ct"])
    assert 2.0 < details["spec_accept_length"] < 3.2
    assert details["spec_num_proposed_drafts"] == details["spec_verify_ct"] * 3
    assert stream.decode_rate() == pytest.approx(600, rel=0.10)
    log = sim.log()
    assert "Max running requests is reset to 48 for speculative decoding." in log
    assert "Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4" in log
    info = orjson.loads(get(sim.port, "/server_info")[1])
    assert info["speculative_algorithm"] == "EAGLE" and info["max_running_requests"] == 48


def test_streams_well_above_10k_tokens_per_second(launch: Launch) -> None:
    sim = launch("--sim-decode-tok-s", "50000", "--sim-ttft", "0.01")
    sim.wait_ready()
    stream = stream_chat(sim.port, max_tokens=20000, ignore_eos=True)
    assert stream.usage()["completion_tokens"] == 20000
    rate = stream.decode_rate()
    print(f"simulator decode rate at --sim-decode-tok-s 50000: {rate:.0f} tok/s")
    # unloaded it streams above 10k tok/s; with both cores of the host taken by other processes 9.4k was measured, so
    # the bound that holds on a busy CI is lower (still far above the 2,000 tok/s the plugin's tests pace at)
    assert rate > 5_000
    assert rate < 50000 * 1.1


def test_slowdown_env_var_slows_decoding(launch: Launch) -> None:
    sim = launch("--sim-decode-tok-s", "500", env={"SGLANG_SIM_SLOWDOWN": "0.25"})
    sim.wait_ready()
    assert stream_chat(sim.port, max_tokens=150, ignore_eos=True).decode_rate() == pytest.approx(400, rel=0.10)


def test_sigterm_stops_server_and_child_quickly(launch: Launch) -> None:
    sim = launch()
    sim.wait_ready()
    tree = sim.tree()
    assert len(tree) >= 2, "the simulator must have a scheduler child"
    sim.children = tree[1:]
    tic = time.monotonic()
    sim.process.send_signal(signal.SIGTERM)
    alive = wait_gone(tree, timeout=STOP_SECONDS)
    assert not alive, f"still alive after {STOP_SECONDS} s: {alive}"
    assert time.monotonic() - tic < STOP_SECONDS
    assert sim.process.wait(timeout=1) == 0
    assert "Finished server process" in sim.log()


def test_sigterm_during_boot_stops_quickly(launch: Launch) -> None:
    sim = launch(boot_seconds=5.0)
    sim.wait_for_log("Load weight begin.")
    tree = sim.tree()
    sim.children = tree[1:]
    sim.process.send_signal(signal.SIGTERM)
    assert not wait_gone(tree, timeout=STOP_SECONDS)


def test_group_sigterm_is_a_clean_stop(launch: Launch) -> None:
    sim = launch()
    sim.wait_ready()
    tree = sim.tree()
    sim.children = tree[1:]
    os.killpg(sim.process.pid, signal.SIGTERM)
    assert not wait_gone(tree, timeout=STOP_SECONDS)
    assert sim.process.wait(timeout=1) == 0
    assert "It usually means one child failed" not in sim.log()


def test_server_exits_when_its_scheduler_dies(launch: Launch) -> None:
    sim = launch()
    sim.wait_ready()
    children = sim.tree()[1:]
    sim.children = children
    children[0].kill()
    assert sim.process.wait(timeout=5) == 1
    assert "SIGQUIT received. signum=3, frame=None. It usually means one child failed." in sim.log()


def test_child_dies_with_a_killed_parent(launch: Launch) -> None:
    sim = launch()
    sim.wait_ready()
    children = sim.tree()[1:]
    sim.children = children
    assert children
    sim.process.kill()
    assert not wait_gone(children, timeout=STOP_SECONDS)


def test_port_in_use_exits_1_like_uvicorn(launch: Launch) -> None:
    sim = launch()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", sim.port))
        blocker.listen()
        assert sim.process.wait(timeout=10) == 1
    assert re.search(r"ERROR: +\[Errno 98\] error while attempting to bind on address \('127\.0\.0\.1', \d+\): "
                     r"address already in use", sim.log())


def test_unknown_flag_exits_2(launch: Launch) -> None:
    sim = launch("--enforce-piecewise-cuda-graph")
    assert sim.process.wait(timeout=10) == 2
    assert "sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph" in sim.log()


def test_missing_config_exits_1_naming_the_path(launch: Launch, tmp_path: Path) -> None:
    empty = tmp_path / "no-model"
    empty.mkdir()
    sim = launch("--model-path", str(empty))
    assert sim.process.wait(timeout=10) == 1
    assert f"{empty}/config.json does not exist" in sim.log()


def test_bad_env_knob_exits_2(launch: Launch) -> None:
    sim = launch(env={"SGLANG_SIM_DECODE_TOK_S": "fast"})
    assert sim.process.wait(timeout=10) == 2
    assert "environment variable SGLANG_SIM_DECODE_TOK_S" in sim.log()


SEED_MODEL = Path(__file__).resolve().parents[1] / "perf" / "models" / "qwen3.6-27b"
SEED_FLAGS = ["--model-path", str(SEED_MODEL), "--tp-size", "2", *SPEC_FLAGS]


def scheduler_children_of(pid: int) -> list[psutil.Process]:
    """Simulated scheduler processes started by `pid` (alive or not yet reaped)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.info["cmdline"] or []
            if "pytest_sglang_perf.simulator.process.child" in cmdline and str(pid) in cmdline and _alive(proc):
                found.append(proc)
    return found


def assert_killed_like_sglang(sim: Sim) -> str:
    """SGLang's launch-phase SIGQUIT handler: kill_process_tree(os.getpid()) ends with the main process's own
    SIGKILL (docs/sglang-0.5.23.md §10); the scheduler child goes too."""
    assert sim.process.wait(timeout=10) == -signal.SIGKILL
    deadline = time.monotonic() + STOP_SECONDS
    while scheduler_children_of(sim.process.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert scheduler_children_of(sim.process.pid) == []
    log = sim.log()
    assert "Received sigquit from a child process. It usually means the child failed." in log or \
        "Initialization failed. warmup error:" in log
    assert f"kill_process_tree called: parent_pid={sim.process.pid}, include_parent=True" in log
    return log


def test_single_batch_overlap_on_an_sm90_gpu_kills_the_server_at_scheduler_init(launch: Launch) -> None:
    """docs/sglang-0.5.23.md §8.5, §11 item 15 (GPU-only: SM90): the scheduler raises before loading anything."""
    sim = launch(*SEED_FLAGS, "--enable-single-batch-overlap", "--sim-gpu", "H100 SXM")
    log = assert_killed_like_sglang(sim)
    assert log.index("server_args=") < log.index("Scheduler hit an exception: Traceback (most recent call last):")
    assert log.count("ValueError: SBO (single batch overlap) is not supported on SM90 GPUs with latest "
                     "sgl-deep-gemm wheel. Please try removing --enable-single-batch-overlap argument.") == 2  # TP0+1
    assert "Load weight begin" not in log and not port_open(sim.port)


def test_crash_at_boot_fault_leaves_a_traceback_and_no_process(launch: Launch) -> None:
    sim = launch(env={"SGLANG_SIM_FAULT": "crash-at-boot"})
    log = assert_killed_like_sglang(sim)
    assert log.index("Load weight begin.") < log.index("Scheduler hit an exception: Traceback")
    assert re.search(r"^torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate", log, re.M)


def test_fail_warmup_fault_opens_the_port_then_dies(launch: Launch) -> None:
    sim = launch("--sim-fault", "fail-warmup", boot_seconds=0.6)
    log = assert_killed_like_sglang(sim)
    assert log.index("Uvicorn running on") < log.index("Initialization failed. warmup error: Traceback")
    assert "The server is fired up and ready to roll!" not in log
