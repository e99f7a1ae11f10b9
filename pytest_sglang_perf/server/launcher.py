"""One SGLang server's lifecycle: launch in its own session, wait for readiness, stop the whole process tree.

Plain Python (no pytest). Readiness follows sglang-reference.md §2.3: the port stays closed while weights
load and CUDA graphs are captured, then `GET /ready` answers 503 until the warmup request is done, then 200.
Stdlib `http.client` only, so importing this module stays cheap.
"""

from __future__ import annotations

import codecs
import contextlib
import http.client
import logging
import os
import shlex
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType

import psutil

from pytest_sglang_perf.server.logscan import ProgressEvent, is_first_rank, progress_event
from pytest_sglang_perf.server.ports import free_port
from pytest_sglang_perf.server.redaction import redact_argv, redact_file, redact_text, secret_values

__all__ = ["BootError", "LaunchSpec", "ProgressEvent", "ServerProcess", "redact_argv", "redact_file"]

log = logging.getLogger(__name__)

ATTEMPT_HEADER = "# pytest-sglang-perf "
"""Starts the line the launcher writes to the log file before each launch attempt."""
TAIL_LINES = 30
TAIL_LINE_CHARS = 400
"""Longer log lines (SGLang's `server_args={...}` runs to ~15,000 characters) are clipped in a boot report's tail."""
_PORT_IN_USE = ("address already in use", "[errno 98]", "port is already in use")
_PROBE_TIMEOUT = 5.0
_FAILED_BOOT_GRACE = 10.0
_KILL_WAIT = 10.0
_TREE_SCAN_EVERY = 1.0
"""Seconds between scans of the process tree while booting (a scan reads every process's stat file)."""
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
    api_key: str | None = None
    """Bearer token for the probes; redacted wherever a command or log tail is shown."""
    poll_interval: float = 0.2

    def __post_init__(self) -> None:
        if not self.command:
            raise ValueError(f"server {self.name!r}: the launch command is empty")
        if self.startup_timeout <= 0 or self.poll_interval <= 0:
            raise ValueError(
                f"server {self.name!r}: startup_timeout ({self.startup_timeout}) and poll_interval "
                f"({self.poll_interval}) must be positive seconds"
            )

    def argv(self, port: int) -> tuple[str, ...]:
        return (*self.command, "--host", self.host, "--port", str(port))


def last_attempt(text: str) -> str:
    """The part of a server log written by the last launch attempt (from its header line on)."""
    start = text.rfind("\n" + ATTEMPT_HEADER)
    return text if start < 0 else text[start + 1:]


class BootError(Exception):
    """A server did not become ready. `report()` says why, with the exact command and the log tail."""

    def __init__(
        self, *, name: str, command: str, reason: str, log_path: Path, exit_code: int | None = None,
        log_tail: tuple[str, ...] = (), phase: str | None = None,
    ) -> None:
        super().__init__(f"SGLang server {name!r} failed to boot: {reason}")
        self.name = name
        self.command = command
        self.reason = reason
        self.log_path = log_path
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.phase = phase

    def report(self) -> str:
        exit_code = "none (the process had not exited on its own)" if self.exit_code is None else self.exit_code
        lines = [
            str(self),
            f"  command:    {self.command}",
            f"  exit code:  {exit_code}",
            f"  last phase: {self.phase or 'none recognised in the log'}",
            f"  log file:   {self.log_path}",
        ]
        if not self.log_tail:
            return "\n".join([*lines, "  (the log is empty)"])
        return "\n".join([*lines, f"  last {len(self.log_tail)} log lines:", *(f"    | {t}" for t in self.log_tail)])


class _PortInUse(Exception):
    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} already in use")
        self.port = port


def _screen_line(line: str) -> str:
    """What a terminal shows of a line: the last carriage-return segment (tqdm bars), right-stripped; clipped to
    TAIL_LINE_CHARS."""
    segments = [segment for segment in line.split("\r") if segment.strip()]
    shown = segments[-1].rstrip() if segments else ""
    if len(shown) <= TAIL_LINE_CHARS:
        return shown
    return f"{shown[:TAIL_LINE_CHARS]}... ({len(shown) - TAIL_LINE_CHARS} more characters in the log file)"


class _LogFeed:
    """The lines a server appended to its log since the last read, and the tail of its output."""

    def __init__(self, path: Path, offset: int) -> None:
        self._path = path
        self._offset = offset
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    def new_lines(self) -> list[str]:
        with self._path.open("rb") as log_file:
            log_file.seek(self._offset)
            data = log_file.read()
        self._offset += len(data)
        *lines, self._partial = (self._partial + self._decoder.decode(data)).split("\n")
        self._tail.extend(_screen_line(line) for line in lines)
        return lines

    def tail(self) -> tuple[str, ...]:
        partial = _screen_line(self._partial)
        return (*self._tail, partial)[-TAIL_LINES:] if partial else tuple(self._tail)


def _http_status(host: str, port: int, path: str, headers: Mapping[str, str], timeout: float) -> int | None:
    """The status of `GET path`, or None when nothing answers (port closed, reset, timeout)."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers=dict(headers))
        response = connection.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()


def _port_open(host: str, port: int, timeout: float) -> bool:
    """Whether something accepts TCP connections on the port (SGLang keeps it closed until it is loaded)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def _listens_on(processes: Iterable[psutil.Process], port: int) -> bool | None:
    """Whether one of `processes` listens on `port`; None when the OS does not tell."""
    for process in processes:
        try:
            sockets = process.net_connections(kind="tcp")
        except psutil.AccessDenied:
            return None
        except psutil.NoSuchProcess:
            continue
        if any(s.status == psutil.CONN_LISTEN and s.laddr and s.laddr.port == port for s in sockets):
            return True
    return False


def _exit_reason(code: int) -> str:
    if code >= 0:
        return f"exited with code {code} during boot"
    try:
        return f"killed by {signal.Signals(-code).name} during boot"
    except ValueError:
        return f"killed by signal {-code} during boot"


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(processes: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until none of `processes` runs (zombies count as gone); return those still running."""
    deadline = time.monotonic() + timeout
    alive = [p for p in processes if _alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [p for p in alive if _alive(p)]
    return alive


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _signal_each(processes: Iterable[psutil.Process], signum: signal.Signals) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signum)  # psutil refuses a pid that was reused by another process


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    try:
        proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _terminate(proc: subprocess.Popen[bytes], tree: list[psutil.Process], grace: float) -> None:
    """SIGTERM the main process (SGLang drains and stops its own children); once it is gone, SIGTERM
    what is left of its group and tree (e.g. a server behind a wrapper script); wait up to `grace`."""
    deadline = time.monotonic() + grace
    proc.send_signal(signal.SIGTERM)  # no-op when already reaped
    if _wait_exit(proc, deadline - time.monotonic()):
        _signal_group(proc.pid, signal.SIGTERM)
        _signal_each(tree, signal.SIGTERM)
        _wait_gone(tree, deadline - time.monotonic())


def _kill(proc: subprocess.Popen[bytes], tree: list[psutil.Process]) -> None:
    """SIGKILL the group and every known descendant (also one that left the group); wait until all are gone."""
    _signal_group(proc.pid, signal.SIGKILL)
    proc.kill()  # no-op when already reaped
    _signal_each([p for p in tree if _alive(p)], signal.SIGKILL)
    _wait_exit(proc, _KILL_WAIT)
    for process in _wait_gone([*tree, *_group_members(proc.pid)], _KILL_WAIT):
        log.warning("process %d survived SIGKILL for %.0f s", process.pid, _KILL_WAIT)


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid:
                members.append(process)
        except (OSError, psutil.Error):
            continue
    return members


class ServerProcess:
    """One server: `start()` launches it and waits until it is ready, `stop()` ends its whole process tree."""

    def __init__(self, spec: LaunchSpec, on_progress: Callable[[ProgressEvent], None] | None = None) -> None:
        self.spec = spec
        self._on_progress = on_progress
        self._secrets = secret_values(spec.command, spec.api_key)
        self._proc: subprocess.Popen[bytes] | None = None
        self._root: psutil.Process | None = None
        self._tree: dict[int, psutil.Process] = {}
        self._feed: _LogFeed | None = None
        self._port = 0
        self._launched_at = 0.0
        self._boot_seconds: float | None = None
        self._phase: str | None = None
        self._seen: set[str] = set()
        self._ready_path = "/ready"
        self._last_probe = ""
        self._port_conflict = False
        self._port_owned = False
        self._next_tree_scan = 0.0
        self._stopped = True

    # -- what callers read -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

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
        return None if code is None else _exit_reason(code).removesuffix(" during boot")

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
            self.stop(grace=_FAILED_BOOT_GRACE)
            raise

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM, wait up to `grace` seconds, SIGKILL what is left, wait until every process is gone.
        Idempotent; never raises because a process is already gone."""
        proc = self._proc
        if proc is None or self._stopped:
            return
        self._track_tree()
        try:
            _terminate(proc, list(self._tree.values()), grace)
        finally:
            self._track_tree()
            _kill(proc, list(self._tree.values()))
            self._stopped = True
            redact_file(self.spec.log_path, self._secrets)

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
            self.stop(grace=_FAILED_BOOT_GRACE)
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
            stamp = datetime.now().isoformat(sep=" ", timespec="seconds")
            log_file.write(f"{ATTEMPT_HEADER}[{stamp}] {self.spec.name}: {self.command_line}\n".encode())
            log_file.flush()
            self._feed = _LogFeed(self.spec.log_path, log_file.tell())
            try:
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.spec.env}, start_new_session=True,
                )
            except OSError as exc:
                raise self.failure(f"could not launch {argv[0]!r}: {exc.strerror or exc}") from exc
        self._launched_at = time.monotonic()
        try:
            self._root = psutil.Process(self._proc.pid)
        except psutil.Error:
            self._root = None
        self._report("launched", f"{what}: pid {self._proc.pid}, port {self._port}")

    def _reset_attempt(self, port: int) -> None:
        self._port = port
        self._proc, self._root, self._tree, self._feed = None, None, {}, None
        self._phase, self._seen, self._ready_path, self._last_probe = None, set(), "/ready", ""
        self._port_conflict, self._port_owned, self._stopped = False, False, False
        self._next_tree_scan = 0.0

    def _wait_ready(self, deadline: float) -> None:
        assert self._proc is not None
        while True:
            code = self._proc.poll()
            if time.monotonic() >= self._next_tree_scan:
                self._track_tree()
            self._scan_log()
            if self._port_conflict:
                raise _PortInUse(self._port)
            if code is not None:
                raise self.failure(_exit_reason(code))
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

    def _track_tree(self) -> None:
        """Remember every descendant seen, so stop() reaches one that left the process group."""
        self._next_tree_scan = time.monotonic() + _TREE_SCAN_EVERY
        if self._root is None:
            return
        try:
            children = self._root.children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            self._tree.setdefault(child.pid, child)

    def _scan_log(self) -> None:
        assert self._feed is not None
        for line in self._feed.new_lines():
            for segment in line.split("\r"):
                self._port_conflict |= any(marker in segment.lower() for marker in _PORT_IN_USE)
                event = progress_event(segment, 0.0) if is_first_rank(segment) else None
                if event is not None and event.phase != "ready":  # readiness is the probe's call
                    self._report(event.phase, event.message)

    def _check_port_owner(self, timeout: float) -> bool:
        """Whether the open port is this server's. Another process that took the port between free_port()
        and the server's bind would otherwise answer the probes; that is a port conflict."""
        if self._port_owned:
            return True
        if not _port_open(self.spec.host, self._port, timeout):
            return False
        self._track_tree()
        processes = [p for p in (self._root, *self._tree.values()) if p is not None]
        if _listens_on(processes, self._port) is False:
            if self._dying(timeout):
                return False  # not a conflict: the server is exiting (e.g. a failed warmup); the loop reports it
            raise _PortInUse(self._port)
        self._port_owned = True
        return True

    def _dying(self, timeout: float) -> bool:
        """Whether our server exited, or closed its port, while the port's owner was being checked."""
        assert self._proc is not None
        return self._proc.poll() is not None or not _port_open(self.spec.host, self._port, timeout)

    def _probe_ready(self, deadline: float) -> bool:
        timeout = max(min(_PROBE_TIMEOUT, deadline - time.monotonic()), 0.05)
        if not self._check_port_owner(timeout):
            return False
        headers = {"Authorization": f"Bearer {self.spec.api_key}"} if self.spec.api_key else {}
        status = _http_status(self.spec.host, self._port, self._ready_path, headers, timeout)
        if status == 404 and self._ready_path == "/ready":
            self._ready_path = "/health"  # SGLang without /ready
            status = _http_status(self.spec.host, self._port, self._ready_path, headers, timeout)
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
