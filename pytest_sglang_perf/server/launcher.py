"""One SGLang server's lifecycle: launch in its own session, wait for readiness, stop the whole process tree.

Plain Python (no pytest). Readiness follows docs/sglang-0.5.23.md §2.3: the port stays closed while weights
load and CUDA graphs are captured, then `GET /ready` answers 503 until the warmup request is done, then 200.
The probes are in probe.py, the process-tree signalling in process_tree.py, the reading of the log file in
logfeed.py.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from pytest_sglang_perf.config.settings import DEFAULT_STOP_GRACE
from pytest_sglang_perf.server.boot_error import BootError
from pytest_sglang_perf.server.keeper import Keep
from pytest_sglang_perf.server.logfeed import LogFeed, attempt_header, last_attempt
from pytest_sglang_perf.server.logscan import ProgressEvent, is_first_rank, logical_lines, progress_event
from pytest_sglang_perf.server.ports import free_port
from pytest_sglang_perf.server.probe import http_status, listens_on, port_open
from pytest_sglang_perf.server.process_tree import ProcessTree, exit_reason, kill, terminate
from pytest_sglang_perf.server.redaction import redact_argv, redact_file, redact_text, secret_values
from pytest_sglang_perf.server.watchdog import Watchdog

__all__ = ["BootError", "LaunchSpec", "ProgressEvent", "ServerProcess", "redact_argv", "redact_file"]

_PORT_IN_USE = ("address already in use", "[errno 98]", "port is already in use")
_PROBE_TIMEOUT = 5.0
_STUCK: dict[str | None, str] = {
    None: "before the server logged any progress",
    "launched": "before the server logged any progress",
    "loading_weights": "while loading weights",
    "weights_loaded": "after loading weights",
    "kv_cache": "after allocating the KV cache",
    "capturing_graphs": "while capturing graphs",
    "graphs_captured": "after capturing graphs, before the HTTP server came up",
    "http_up": "with the HTTP server up, before warmup",
    "warming_up": "while warming up",
}


@dataclass(frozen=True)
class LaunchSpec:
    """How to launch one server variant."""

    name: str
    """Variant name, used in messages."""
    command: tuple[str, ...]
    """Full argv without host and port; the launcher appends `--host H --port P`."""
    log_path: Path
    """Server stdout and stderr go here (appended; parent directories are created)."""
    startup_timeout: float
    """Seconds for the whole boot, readiness included."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Layered on os.environ (after PYTHONUNBUFFERED=1, so the log can be followed live)."""
    host: str = "127.0.0.1"
    pass_fds: tuple[int, ...] = ()
    """Descriptors the server inherits: its GPU claim's locks (server/gpu_claims.py), held as long as it lives."""
    api_key: str | None = None
    """Bearer token for the probes; redacted wherever a command or log tail is shown."""
    poll_interval: float = 0.2
    stop_grace: float = DEFAULT_STOP_GRACE
    """Seconds between SIGTERM and SIGKILL when the server is stopped, by stop() or by its watchdog."""

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError(f"server {self.name!r}: the launch command is empty")
        if self.startup_timeout <= 0 or self.poll_interval <= 0:
            raise ValueError(
                f"server {self.name!r}: startup_timeout ({self.startup_timeout}) and poll_interval "
                f"({self.poll_interval}) must be positive seconds"
            )
        if self.stop_grace < 0:
            raise ValueError(f"server {self.name!r}: stop_grace ({self.stop_grace}) must be 0 or more seconds")

    def argv(self, port: int) -> tuple[str, ...]:
        return (*self.command, "--host", self.host, "--port", str(port))


class _PortInUse(Exception):
    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} already in use")
        self.port = port


class ServerProcess:
    """One server: `start()` launches it and waits until it is ready, `stop()` ends its whole process tree.

    Each launch has a watchdog (watchdog.py) that stops the tree if this process dies without calling stop()."""

    def __init__(self, spec: LaunchSpec, on_progress: Callable[[ProgressEvent], None] | None = None) -> None:
        self.spec = spec
        self._on_progress = on_progress
        self._secrets = secret_values(spec.command, spec.api_key)
        self._proc: subprocess.Popen[bytes] | None = None
        self._tree = ProcessTree()
        self._watchdog: Watchdog | None = None
        self._feed: LogFeed | None = None
        self._port = 0
        self._launched_at = 0.0
        self._boot_seconds: float | None = None
        self._phase: str | None = None
        self._seen: set[str] = set()
        self._ready_path = "/ready"
        self._last_probe = ""
        self._port_conflict = False
        self._port_owned = False
        self._stopped = True

    # -- what callers read -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def watchdog_pid(self) -> int | None:
        return None if self._watchdog is None else self._watchdog.pid

    @property
    def base_url(self) -> str:
        host = f"[{self.spec.host}]" if ":" in self.spec.host else self.spec.host
        return f"http://{host}:{self._port}"

    @property
    def boot_seconds(self) -> float:
        """Launch -> ready, in seconds (of the attempt that came up)."""
        if self._boot_seconds is None:
            raise RuntimeError(f"server {self.spec.name!r} has not become ready: call start() first")
        return self._boot_seconds

    @property
    def command_line(self) -> str:
        """The exact command (shell-quoted), secrets replaced by '***'."""
        return redact_text(shlex.join(redact_argv(self.spec.argv(self._port))), self._secrets)

    def is_running(self) -> bool:
        return self._proc is not None and not self._stopped and self._proc.poll() is None

    def exit_description(self, wait: float = 0.0) -> str | None:
        """How the server process ended ("killed by SIGKILL", "exited with code 1"), waiting up to `wait` seconds
        for it to finish exiting; None while it runs (or before it started, or after stop())."""
        if self._proc is None or self._stopped:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=wait)
        code = self._proc.poll()
        return None if code is None else exit_reason(code).removesuffix(" during boot")

    def attempt_log_text(self) -> str:
        """The log of the running attempt only (a log file keeps earlier boots), secrets redacted."""
        return last_attempt(self.log_text())

    def log_text(self) -> str:
        """The server's log file so far (all attempts), secrets redacted."""
        if not self.spec.log_path.exists():
            return ""
        return redact_text(self.spec.log_path.read_text(encoding="utf-8", errors="replace"), self._secrets)

    def failure(self, reason: str) -> BootError:
        """A BootError for this server with `reason` (e.g. "interrupted"), the command, exit code and log tail."""
        tail = self._feed.tail() if self._feed is not None else ()
        return BootError(
            name=self.spec.name, command=self.command_line, reason=redact_text(reason, self._secrets),
            log_path=self.spec.log_path, exit_code=None if self._proc is None else self._proc.poll(),
            log_tail=tuple(redact_text(line, self._secrets) for line in tail), phase=self._phase,
            started=self._proc is not None, log_lines=tuple(logical_lines(last_attempt(self.log_text()))),
        )

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Launch and wait for readiness. Raises BootError; on any failure (Ctrl-C included) the whole
        process tree is stopped before the exception propagates."""
        if self._proc is not None:
            raise RuntimeError(f"server {self.spec.name!r} was already started; create a new ServerProcess")
        try:
            self._boot(time.monotonic() + self.spec.startup_timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM, wait up to `grace` seconds (default: the spec's stop_grace), SIGKILL what is left, wait until
        every process is gone, then release the watchdog. Idempotent; never raises because a process is already
        gone. Interrupted before the end, it leaves the watchdog armed: it finishes the job once pytest exits."""
        proc = self._proc
        if proc is None or self._stopped:
            self._release_watchdog()
            return
        self._tree.track()
        try:
            terminate(proc, self._tree.descendants(), self.spec.stop_grace if grace is None else grace)
        finally:
            self._tree.track()
            kill(proc, self._tree.descendants())
            self._stopped = True
            self._release_watchdog()
            redact_file(self.spec.log_path, self._secrets)

    def keep(self, keep: Keep) -> None:
        """Make the server's watchdog its keeper (server/kept.py): the server outlives this process, until idle."""
        if self._watchdog is not None:
            self._watchdog.keep(keep)

    def detach(self) -> None:
        """Let go of a kept server without stopping it: its keeper stops it later; stop() does nothing after."""
        if self._watchdog is not None:
            self._watchdog.detach()
            self._watchdog = None
        self._stopped = True

    def _release_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.release()
            self._watchdog = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- boot ----------------------------------------------------------------------------------------

    def _boot(self, deadline: float) -> None:
        self._launch("launched")
        try:
            self._wait_ready(deadline)
        except _PortInUse as first:
            self.stop()
            self._launch(f"relaunched (port {first.port} was already in use)")
            try:
                self._wait_ready(deadline)
            except _PortInUse as again:
                raise self.failure(
                    f"port {again.port} was already in use too (retried once after port {first.port})"
                ) from None

    def _launch(self, what: str) -> None:
        try:
            self._reset_attempt(free_port(self.spec.host))
        except OSError as exc:
            raise self.failure(f"cannot get a free port on host {self.spec.host!r}: {exc}") from exc
        argv = self.spec.argv(self._port)
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.spec.log_path.open("ab") as log_file:
            log_file.write(attempt_header(self.spec.name, self.command_line).encode())
            log_file.flush()
            self._feed = LogFeed(self.spec.log_path, log_file.tell())
            self._watchdog = self._start_watchdog(log_file)
            try:
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.spec.env, **self._watchdog.env},
                    start_new_session=True, pass_fds=self.spec.pass_fds,
                )
            except OSError as exc:
                raise self.failure(f"could not launch {argv[0]!r}: {exc.strerror or exc}") from exc
        self._watchdog.watch(self._proc.pid)
        self._launched_at = time.monotonic()
        self._tree.attach(self._proc.pid)
        self._report("launched", f"{what}: pid {self._proc.pid}, port {self._port}")

    def _start_watchdog(self, log_file: BinaryIO) -> Watchdog:
        """The watchdog that stops the server if pytest dies without stopping it (started first: it also finds a
        server that pytest was launching as it died)."""
        watchdog = Watchdog(self.spec.name, self.spec.stop_grace)
        try:
            watchdog.start(log_file)
        except OSError as exc:
            raise self.failure(f"could not start the server's watchdog: {exc.strerror or exc}") from exc
        return watchdog

    def _reset_attempt(self, port: int) -> None:
        self._port = port
        self._proc, self._tree, self._feed = None, ProcessTree(), None
        self._phase, self._seen, self._ready_path, self._last_probe = None, set(), "/ready", ""
        self._port_conflict, self._port_owned, self._stopped = False, False, False

    def _wait_ready(self, deadline: float) -> None:
        assert self._proc is not None
        while True:
            code = self._proc.poll()
            if self._tree.scan_due():
                self._tree.track()
            self._scan_log()
            if self._port_conflict:
                raise _PortInUse(self._port)
            if code is not None:
                raise self.failure(exit_reason(code))
            if self._probe_ready(deadline):
                self._boot_seconds = time.monotonic() - self._launched_at
                self._report("ready", f"ready in {self._boot_seconds:.1f} s ({self.base_url})", self._boot_seconds)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.failure(self._timeout_reason())
            time.sleep(min(self.spec.poll_interval, remaining))

    def _timeout_reason(self) -> str:
        probe = f"; last probe: {self._last_probe}" if self._last_probe else ""
        return f"no readiness after {self.spec.startup_timeout:g} s (stuck {_STUCK.get(self._phase, '')}{probe})"

    def _scan_log(self) -> None:
        assert self._feed is not None
        for line in self._feed.new_lines():
            for segment in logical_lines(line):  # progress bars, and another rank's line glued to this one
                self._port_conflict |= any(marker in segment.lower() for marker in _PORT_IN_USE)
                event = progress_event(segment, 0.0) if is_first_rank(segment) else None
                if event is not None and event.phase != "ready":  # readiness is the probe's call
                    self._report(event.phase, event.message)

    def _check_port_owner(self, timeout: float) -> bool:
        """Whether the open port is this server's. Another process that took the port between free_port()
        and the server's bind would otherwise answer the probes; that is a port conflict."""
        if self._port_owned:
            return True
        if not port_open(self.spec.host, self._port, timeout):
            return False
        self._tree.track()
        if listens_on(self._tree.processes(), self._port) is False:
            if self._dying(timeout):
                return False  # not a conflict: the server is exiting (e.g. a failed warmup); the loop reports it
            raise _PortInUse(self._port)
        self._port_owned = True
        return True

    def _dying(self, timeout: float) -> bool:
        """Whether our server exited, or closed its port, while the port's owner was being checked."""
        assert self._proc is not None
        return self._proc.poll() is not None or not port_open(self.spec.host, self._port, timeout)

    def _probe_ready(self, deadline: float) -> bool:
        timeout = max(min(_PROBE_TIMEOUT, deadline - time.monotonic()), 0.05)
        if not self._check_port_owner(timeout):
            return False
        headers = {"Authorization": f"Bearer {self.spec.api_key}"} if self.spec.api_key else {}
        status = http_status(self.spec.host, self._port, self._ready_path, headers, timeout)
        if status == 404 and self._ready_path == "/ready":
            self._ready_path = "/health"  # SGLang without /ready
            status = http_status(self.spec.host, self._port, self._ready_path, headers, timeout)
        if status is None:
            return False
        self._last_probe = f"GET {self._ready_path} -> {status}"
        self._report("http_up", f"HTTP server answering on {self.base_url}")
        if status == 200:
            return True
        self._report("warming_up", f"warming up (GET {self._ready_path} -> {status})")
        return False

    def _report(self, phase: str, message: str, elapsed: float | None = None) -> None:
        if phase in ("http_up", "warming_up"):
            if phase in self._seen:
                return
            self._seen.add(phase)
        self._phase = phase
        if self._on_progress is not None:
            since_launch = time.monotonic() - self._launched_at if elapsed is None else elapsed
            self._on_progress(ProgressEvent(phase, message, since_launch))
