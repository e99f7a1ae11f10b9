"""launcher: real processes booting like SGLang 0.5.23, checked with psutil for leftovers.

The fake server (written into tmp_path) follows docs/sglang-0.5.23.md §2.1 and §7.1: argparse first (exit 2 on a
bad flag), log lines in SGLang's format while the port is still closed (loading weights, capturing graphs),
then an HTTP server whose `/ready` and `/health` answer 503 until the warmup is done, then 200.
"""

from __future__ import annotations

import dataclasses
import http.client
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from pytest_sglang_perf.server import launcher
from pytest_sglang_perf.server.launcher import (
    BootError,
    LaunchSpec,
    ProgressEvent,
    ServerProcess,
    redact_argv,
    redact_file,
)
from pytest_sglang_perf.server.ports import free_port
from pytest_sglang_perf.server.startup import startup_facts

FAKE_SERVER = r'''
"""Boots like `sglang serve` 0.5.23. Knobs: FAKE_MODE (ok|hang|no-ready|exit-after-args), FAKE_LOAD,
FAKE_CAPTURE, FAKE_WARMUP (seconds), FAKE_CHILD (none|child|stubborn|stubborn-new-session), FAKE_PID_DIR."""
import argparse, os, subprocess, sys, threading, time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("FAKE_MODE", "ok")
LOAD, CAPTURE, WARMUP = (float(os.environ.get(k, "0.2")) for k in ("FAKE_LOAD", "FAKE_CAPTURE", "FAKE_WARMUP"))
PID_DIR = os.environ.get("FAKE_PID_DIR", ".")
READY, ANSWERED_503 = threading.Event(), threading.Event()
CHILD = """
import os, signal, sys, time
if sys.argv[1] != "child":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[1] == "stubborn-new-session":
    os.setsid()
print("child up", flush=True)
time.sleep(3600)
"""


def log(message, prefix=""):
    now = datetime.now()
    print(f"[{now:%Y-%m-%d %H:%M:%S}.{now.microsecond // 1000:03d}{prefix}] {message}", file=sys.stderr)


def ranks(tp_size):
    return [f" TP{rank}" if tp_size > 1 else "" for rank in range(tp_size)]


def spawn_child(kind):
    child = subprocess.Popen([sys.executable, "-c", CHILD, kind, __file__], stdout=subprocess.PIPE)
    child.stdout.readline()  # its signal disposition is set
    with open(os.path.join(PID_DIR, "child.pid"), "w") as f:
        f.write(str(child.pid))


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Authorization"):
            with open(os.path.join(PID_DIR, "auth.txt"), "w") as f:
                f.write(self.headers["Authorization"])
        if self.path == "/ready" and MODE == "no-ready":
            code = 404
        elif self.path in ("/ready", "/health"):
            code = 200 if READY.is_set() else 503
        else:
            code = 404
        if code == 503:
            ANSWERED_503.set()
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_request(self, code="-", size="-"):
        host, port = self.client_address[:2]
        log(f'INFO:     {host}:{port} - "{self.requestline}" {code}')


def warmup():
    time.sleep(WARMUP)
    ANSWERED_503.wait(30)  # so a loaded machine cannot skip the warming-up phase the tests look for
    READY.set()
    log("The server is fired up and ready to roll!")


def main():
    parser = argparse.ArgumentParser(prog="sglang serve")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--api-key")
    args = parser.parse_args()
    with open(os.path.join(PID_DIR, "main.pid"), "w") as f:
        f.write(str(os.getpid()))
    log(f"server_args={{'model_path': {args.model_path!r}, 'api_key': {args.api_key!r}, 'port': {args.port}}}")
    if MODE == "exit-after-args":
        sys.exit(3)
    if os.environ.get("FAKE_CHILD", "none") != "none":
        spawn_child(os.environ["FAKE_CHILD"])
    for prefix in ranks(args.tp_size):
        log("Load weight begin. avail mem=78.50 GB", prefix)
    time.sleep(LOAD)
    for prefix in ranks(args.tp_size):
        log(f"Load weight end. elapsed={LOAD:.2f} s, type=Qwen3ForCausalLM, avail mem=62.10 GB, "
            "mem usage=16.40 GB.", prefix)
        log("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 412345, K size: 9.44 GB, V size: 9.44 GB",
            prefix)
        log("Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8, 16], "
            "avail mem=43.20 GB", prefix)
    if MODE == "hang":
        time.sleep(3600)
    time.sleep(CAPTURE)
    for prefix in ranks(args.tp_size):
        log(f"Capture target prefill CUDA graph end. elapsed={CAPTURE:.2f} s, mem usage=1.20 GB, "
            "avail mem=42.00 GB.", prefix)
        log("Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, avail mem=42.00 GB",
            prefix)
        print("Capturing batches (bs=8 avail_mem=41.60 GB):  50%|#####     | 2/4\r", end="", file=sys.stderr)
        log("Capture target decode CUDA graph end. bs=[1, 2, 4, 8], elapsed=0.01 s, mem usage=0.50 GB, "
            "avail mem=41.50 GB.", prefix)
    log("max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=48, context_len=40960, available_gpu_mem=41.50 GB", ranks(args.tp_size)[0])
    log(f"Engine startup timings (s): load_weight={LOAD:.2f}, kv_cache_allocation=0.10, scheduler_e2e=0.50, "
        f"cuda_graph={{prefill={CAPTURE:.2f}, decode=0.01, target_verify=0.00, draft_prefill=0.00, "
        "draft_decode=0.00, draft_extend=0.00}, tokenizer_e2e=0.60")
    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as exc:  # what asyncio/uvicorn print for a taken port
        log(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"{(args.host, args.port)!r}: {exc.strerror.lower()}")
        sys.exit(1)
    log(f"INFO:     Started server process [{os.getpid()}]")
    log("INFO:     Waiting for application startup.")
    log("INFO:     Application startup complete.")
    log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    threading.Thread(target=warmup, daemon=True).start()
    server.serve_forever()


main()
'''

BOOT_ORDER = ["launched", "loading_weights", "weights_loaded", "kv_cache", "capturing_graphs", "graphs_captured",
              "capturing_graphs", "graphs_captured", "graphs_captured", "http_up", "warming_up", "ready"]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Fake:
    """The fake server script plus where it writes its pids; tells which of its processes still run."""

    script: Path
    pid_dir: Path
    log_path: Path

    def spec(self, *extra: str, timeout: float = 20.0, **env: str) -> LaunchSpec:
        env = {"FAKE_PID_DIR": str(self.pid_dir), **env}
        return LaunchSpec(
            name="default", command=(sys.executable, str(self.script), "--model-path", "Qwen/Qwen3-8B", *extra),
            log_path=self.log_path, startup_timeout=timeout, env=env, poll_interval=0.05,
        )

    def pid(self, which: str) -> int:
        return int((self.pid_dir / f"{which}.pid").read_text())

    def running(self) -> list[int]:
        """Processes of this fake that still run: its main process and children carry the script path."""
        found = []
        for process in psutil.process_iter(["cmdline"]):
            if str(self.script) in (process.info["cmdline"] or []) and _alive(process.pid):
                found.append(process.pid)
        return found


def _get(url_port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", url_port, timeout=5)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


def test_boot_reports_progress_in_order_and_stops(fake: Fake) -> None:
    events: list[ProgressEvent] = []
    spec = fake.spec("--tp-size", "2", FAKE_LOAD="0.4", FAKE_CAPTURE="0.2", FAKE_WARMUP="0.4")
    server = ServerProcess(spec, on_progress=events.append)
    with server:
        assert server.is_running()
        assert [event.phase for event in events] == BOOT_ORDER
        assert server.boot_seconds > 0.4 + 0.2 + 0.4
        assert events[-1].elapsed == server.boot_seconds
        assert [e.elapsed for e in events] == sorted(e.elapsed for e in events)
        assert events[2].message == "weights loaded (0.40 s, type=Qwen3ForCausalLM)"
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert _get(server.port, "/ready") == 200
        assert server.pid == fake.pid("main")
        assert server.command_line.endswith(f"--tp-size 2 --host 127.0.0.1 --port {server.port}")
    assert not server.is_running()
    assert fake.running() == []
    server.stop()  # idempotent


def test_log_file_has_header_output_and_startup_facts(fake: Fake) -> None:
    with ServerProcess(fake.spec(FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05")) as server:
        text = server.log_text()
    assert text.splitlines()[0].startswith("# pytest-sglang-perf [")
    assert server.command_line in text.splitlines()[0]
    assert "Uvicorn running on" in text
    facts = startup_facts(text)
    assert (facts.load_weight, facts.max_total_num_tokens, facts.available_gpu_mem) == (0.05, 412345, 41.5)


def test_exit_at_boot_fails_fast_with_command_and_argparse_message(fake: Fake) -> None:
    server = ServerProcess(fake.spec("--enforce-piecewise-cuda-graph", timeout=60))
    began = time.monotonic()
    with pytest.raises(BootError) as caught:
        server.start()
    assert time.monotonic() - began < 5
    error = caught.value
    assert (error.exit_code, error.reason, error.phase) == (2, "exited with code 2 during boot", "launched")
    assert error.command == server.command_line
    assert "--enforce-piecewise-cuda-graph" in error.command
    assert "sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph" in error.log_tail
    report = error.report()
    for part in (error.reason, error.command, "exit code:  2", str(fake.log_path),
                 "| sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph"):
        assert part in report
    assert not server.is_running()


def test_hang_times_out_naming_the_phase(fake: Fake) -> None:
    server = ServerProcess(fake.spec(timeout=1.0, FAKE_MODE="hang", FAKE_LOAD="0.05"))
    began = time.monotonic()
    with pytest.raises(BootError) as caught:
        server.start()
    assert 1.0 <= time.monotonic() - began < 4
    error = caught.value
    assert error.reason == "no readiness after 1 s (stuck while capturing graphs)"
    assert (error.phase, error.exit_code) == ("capturing_graphs", None)
    assert any("Capture target prefill CUDA graph begin." in line for line in error.log_tail)
    assert not _alive(fake.pid("main"))


@pytest.mark.parametrize("child", ["stubborn", "stubborn-new-session"])
def test_stop_kills_a_child_that_ignores_sigterm(fake: Fake, child: str) -> None:
    server = ServerProcess(fake.spec(FAKE_CHILD=child, FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05"))
    server.start()
    child_pid = fake.pid("child")
    assert _alive(child_pid)
    if child == "stubborn-new-session":
        assert os.getpgid(child_pid) != os.getpgid(server.pid or 0)
    began = time.monotonic()
    server.stop(grace=0.5)
    assert 0.5 <= time.monotonic() - began < 5
    assert not _alive(child_pid)
    assert not _alive(fake.pid("main"))


def test_ctrl_c_from_progress_callback_leaves_nothing_behind(fake: Fake) -> None:
    def interrupt_at_capture(event: ProgressEvent) -> None:
        if event.phase == "capturing_graphs":
            raise KeyboardInterrupt

    server = ServerProcess(fake.spec(FAKE_CHILD="child", FAKE_MODE="hang", FAKE_LOAD="0.05"), interrupt_at_capture)
    with pytest.raises(KeyboardInterrupt):
        server.start()
    assert not _alive(fake.pid("child"))
    assert not _alive(fake.pid("main"))
    assert not server.is_running()


BOOTING = """
import pickle, signal, sys
from pytest_sglang_perf.server.launcher import ServerProcess

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal (see the test's docstring)

with open(sys.argv[1], "rb") as spec_file:
    spec = pickle.load(spec_file)
server = ServerProcess(spec, lambda event: print(event.phase, flush=True))
try:
    server.start()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_signal_while_waiting_leaves_nothing_behind(fake: Fake, tmp_path: Path) -> None:
    """A real SIGINT to a process whose start() waits for the server, as a user's Ctrl-C in a terminal.

    The process sets Python's own SIGINT handler first: a suite started as a shell's background job (`cmd &`, as CI
    scripts and load tests do) inherits SIGINT ignored, and Python then leaves it ignored, so neither a signal nor
    `_thread.interrupt_main()` would reach it."""
    spec_file = tmp_path / "spec.pickle"
    spec_file.write_bytes(pickle.dumps(fake.spec(FAKE_CHILD="child", FAKE_MODE="hang", FAKE_LOAD="0.05")))
    booting = subprocess.Popen([sys.executable, "-c", BOOTING, str(spec_file)], stdout=subprocess.PIPE, text=True)
    try:
        assert booting.stdout is not None
        phases = []
        for line in booting.stdout:  # the fake hangs while capturing graphs: interrupt it there
            phases.append(line.strip())
            if phases[-1] == "capturing_graphs":
                booting.send_signal(signal.SIGINT)
                break
        assert booting.wait(timeout=30) == 130, phases
        assert booting.stdout.read().strip() == "interrupted"
    finally:
        booting.kill()
        booting.wait()
        if booting.stdout is not None:
            booting.stdout.close()
    assert not _alive(fake.pid("child"))
    assert not _alive(fake.pid("main"))


def test_api_key_is_sent_to_probes_and_redacted_everywhere(fake: Fake) -> None:
    spec = fake.spec("--api-key", "sekrit-key", FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05")
    spec = dataclasses.replace(spec, api_key="sekrit-key")
    with ServerProcess(spec) as server:
        assert (fake.pid_dir / "auth.txt").read_text() == "Bearer sekrit-key"
        assert "--api-key '***'" in server.command_line
        assert "sekrit" not in server.command_line + server.log_text()
        assert "sekrit-key" in fake.log_path.read_text()  # the server itself echoes it (like SGLang's server_args)
    assert "sekrit" not in fake.log_path.read_text()  # masked in the file once the server stopped
    assert "'api_key': '***'" in fake.log_path.read_text()

    failing = ServerProcess(dataclasses.replace(spec, env={**spec.env, "FAKE_MODE": "exit-after-args"}))
    with pytest.raises(BootError) as caught:
        failing.start()
    report = caught.value.report()
    assert caught.value.exit_code == 3
    assert "'api_key': '***'" in report
    assert "sekrit" not in report + str(caught.value)
    assert "sekrit" not in fake.log_path.read_text()  # a failed boot's log too


def test_redact_argv_covers_both_flags_and_forms() -> None:
    argv = ["sglang", "serve", "--api-key", "a1", "--admin-api-key=b2", "--api-k", "c3", "--tp-size", "2"]
    assert redact_argv(argv) == ["sglang", "serve", "--api-key", "***", "--admin-api-key=***", "--api-k", "***",
                                 "--tp-size", "2"]


def test_ready_404_falls_back_to_health(fake: Fake) -> None:
    events: list[ProgressEvent] = []
    spec = fake.spec(FAKE_MODE="no-ready", FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.5")
    with ServerProcess(spec, events.append) as server:
        assert server.boot_seconds > 0.5
        log = server.log_text()
    assert '"GET /ready HTTP/1.1" 404' in log
    assert '"GET /health HTTP/1.1" 503' in log
    assert '"GET /health HTTP/1.1" 200' in log
    assert [e.message for e in events if e.phase == "warming_up"] == ["warming up (GET /health -> 503)"]


@pytest.mark.parametrize("listening", [False, True], ids=["server-log-says-in-use", "foreign-listener"])
def test_port_taken_by_another_process_is_retried_once(
    fake: Fake, monkeypatch: pytest.MonkeyPatch, listening: bool
) -> None:
    """Bound only: the server's bind fails and its log says so. Listening: the probe would reach the other
    process, so the launcher sees that the port's listener is not in the server's tree."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        if listening:
            holder.listen()
        taken = holder.getsockname()[1]
        ports = itertools.chain([taken], iter(lambda: free_port("127.0.0.1"), None))
        monkeypatch.setattr(launcher, "free_port", lambda host: next(ports))
        events: list[ProgressEvent] = []
        spec = fake.spec(FAKE_LOAD="0.3", FAKE_CAPTURE="0.05", FAKE_WARMUP="0.05")
        began = time.monotonic()
        with ServerProcess(spec, events.append) as server:
            assert server.port != taken
            assert _get(server.port, "/ready") == 200
        assert time.monotonic() - began < 5
    launches = [e.message for e in events if e.phase == "launched"]
    assert len(launches) == 2
    assert launches[1].startswith(f"relaunched (port {taken} was already in use)")
    assert ("address already in use" in fake.log_path.read_text()) is not listening
    if listening:  # found before the server even tried to bind
        assert "Uvicorn running on http://127.0.0.1:" + str(taken) not in fake.log_path.read_text()


def test_port_taken_twice_is_a_boot_error(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        monkeypatch.setattr(launcher, "free_port", lambda host: taken)
        with pytest.raises(BootError) as caught:
            ServerProcess(fake.spec(FAKE_LOAD="0.01", FAKE_CAPTURE="0.01")).start()
    assert caught.value.reason == f"port {taken} was already in use too (retried once after port {taken})"


def test_missing_executable_is_a_boot_error(tmp_path: Path) -> None:
    spec = LaunchSpec(name="v", command=(str(tmp_path / "no-such-sglang"), "serve"), log_path=tmp_path / "v.log",
                      startup_timeout=5)
    with pytest.raises(BootError) as caught:
        ServerProcess(spec).start()
    assert caught.value.reason.startswith("could not launch ")
    assert "No such file or directory" in caught.value.reason
    assert caught.value.exit_code is None
    assert not caught.value.started  # no process ran: the report says so, not "had not exited on its own"
    assert "no server process was started" in caught.value.report()


def test_spec_rejects_empty_command_and_bad_timeouts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="launch command is empty"):
        LaunchSpec(name="v", command=(), log_path=tmp_path / "v.log", startup_timeout=5)
    with pytest.raises(ValueError, match="must be positive"):
        LaunchSpec(name="v", command=("x",), log_path=tmp_path / "v.log", startup_timeout=0)


def test_unstarted_server_stops_quietly(tmp_path: Path) -> None:
    server = ServerProcess(LaunchSpec(name="v", command=("x",), log_path=tmp_path / "v.log", startup_timeout=5))
    server.stop()
    assert (server.pid, server.is_running(), server.log_text()) == (None, False, "")
    with pytest.raises(RuntimeError, match="has not become ready"):
        _ = server.boot_seconds


def test_warmup_that_never_ends_times_out_with_the_last_probe(fake: Fake) -> None:
    server = ServerProcess(fake.spec(timeout=1.5, FAKE_LOAD="0.05", FAKE_CAPTURE="0.05", FAKE_WARMUP="60"))
    with pytest.raises(BootError) as caught:
        server.start()
    assert caught.value.reason == "no readiness after 1.5 s (stuck while warming up; last probe: GET /ready -> 503)"
    assert caught.value.phase == "warming_up"


def test_process_killed_by_a_signal_is_named(tmp_path: Path) -> None:
    spec = LaunchSpec(name="v", command=("sh", "-c", "echo loading; kill -KILL $$"), log_path=tmp_path / "v.log",
                      startup_timeout=10, poll_interval=0.05)
    with pytest.raises(BootError) as caught:
        ServerProcess(spec).start()
    assert (caught.value.exit_code, caught.value.reason) == (-9, "killed by SIGKILL during boot")
    assert caught.value.log_tail == ("loading",)


def test_redact_file_rewrites_only_a_file_with_a_secret(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"args: --api-key k-123 \xff binary kept\nk-123 again\n")
    redact_file(log, ["k-123"])
    assert log.read_bytes() == b"args: --api-key *** \xff binary kept\n*** again\n"
    clean = tmp_path / "b.log"
    clean.write_text("nothing secret\n")
    before = clean.stat().st_mtime_ns
    redact_file(clean, ["k-123"])
    assert clean.stat().st_mtime_ns == before and clean.read_text() == "nothing secret\n"
    redact_file(tmp_path / "missing.log", ["k-123"])  # a missing log is not an error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log", "b.log"]
