"""Kept servers: servers that outlive the pytest run that booted them, on purpose (`--sglang-reuse`), registered in a
per-user state folder so that a later run of the same variant attaches instead of booting. docs/reuse.md.

Plain Python (no pytest). A kept server is registered under a key made of everything that decides what it measures
(session/kept.py makes the parts: the command line, the environment, the model and its config hash, the SGLang
version, the GPUs). The state folder (`SGLANG_PERF_STATE_DIR`, default `$XDG_STATE_HOME/pytest-sglang-perf`, else
`~/.local/state/pytest-sglang-perf`; readable by its user only) holds, per key: `<key>.json` (the record),
`<key>.boot.lock` and `<key>.use.lock` (server/kept_locks.py) and `<key>/server.log`. The server's watchdog, in
keep mode (server/watchdog.py), is its keeper: it stops the server when no run used it for its idle timeout, and
when its record is gone (`sglang-perf stop` removes it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import psutil

STATE_ENV = "SGLANG_PERF_STATE_DIR"
"""The per-user state folder (kept servers live in its `servers/`)."""
DEFAULT_IDLE_SECONDS = 900.0
"""A kept server stops after this many seconds without a run using it, unless --sglang-reuse-idle says otherwise."""
KEY_DIGITS = 12


def state_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where kept servers are registered: $SGLANG_PERF_STATE_DIR/servers, else the XDG state folder's."""
    given = environ.get(STATE_ENV)
    if given:
        return Path(given).expanduser() / "servers"
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "pytest-sglang-perf" / "servers"


def this_host() -> str:
    import socket

    return socket.gethostname()


def server_key(parts: Mapping[str, str]) -> str:
    """The key of a server made of `parts` (their exact text, secrets included, so that a changed key changes it)."""
    text = json.dumps(dict(sorted(parts.items())), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_DIGITS]


@dataclass(frozen=True)
class KeptServer:
    """One kept server's record (`<key>.json`)."""

    key: str
    variant: str
    project: str
    """The project's rootdir: a variant's stale server is one of the same project and variant with another key."""
    base_url: str
    pid: int
    create_time: float
    """The server process's start time (psutil): tells the server from a later process that got its pid."""
    log_path: str
    command: str
    """The command line, secrets redacted."""
    parts: Mapping[str, str]
    """The key's parts as shown (secrets redacted): what changed, when a run's key differs."""
    gpus: tuple[str, ...]
    """The GPUs it holds (its claim, or CUDA_VISIBLE_DEVICES as given); () when none is known."""
    boot_seconds: float
    booted_at: float
    """Wall-clock time (epoch seconds) it became ready."""
    idle_timeout: float
    simulated: bool
    stop_grace: float = 10.0
    """Seconds between SIGTERM and SIGKILL when it is stopped."""
    keeper_pid: int | None = None
    keeper_create_time: float | None = None
    released_at: float | None = None
    """When the last run stopped using it (epoch seconds); None while its first run uses it."""
    runs: int = 1
    """Runs that measured on it, its booting run included."""
    last_user: int | None = None
    """The pid of the run that last took its use lock."""
    server_info_hash: str | None = None
    """A hash of its `/server_info` at registration (server_info_hash): a later run attaches only while it matches."""
    host: str = ""
    """The host it runs on (a state folder in a home shared between hosts lists other hosts' servers too)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = list(self.gpus)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeptServer:
        """The record; ValueError (or KeyError, TypeError) for one that is not a record of this version."""
        values = dict(data)
        values["gpus"] = tuple(str(gpu) for gpu in values.get("gpus", ()))
        values["parts"] = {str(k): str(v) for k, v in dict(values["parts"]).items()}
        record = cls(**values)
        if not isinstance(record.pid, int) or not isinstance(record.base_url, str):
            raise ValueError("pid and base_url are not an int and a string")
        return record


class Registry:
    """The kept servers of one state folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def ensure(self) -> Path:
        """The folder, created readable by its user only (a kept server's log holds its command line)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self.folder, 0o700)
        return self.folder

    def record_file(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def boot_lock_file(self, key: str) -> Path:
        return self.folder / f"{key}.boot.lock"

    def use_lock_file(self, key: str) -> Path:
        return self.folder / f"{key}.use.lock"

    def log_file(self, key: str) -> Path:
        return self.folder / key / "server.log"

    def get(self, key: str) -> KeptServer | None:
        try:
            data = json.loads(self.record_file(key).read_text(encoding="utf-8"))
            return KeptServer.from_dict(data)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def all(self) -> list[KeptServer]:
        """Every readable record, oldest boot first."""
        if not self.folder.is_dir():
            return []
        found = (self.get(path.stem) for path in self.folder.glob("*.json"))
        return sorted((record for record in found if record is not None), key=lambda r: r.booted_at)

    def put(self, record: KeptServer) -> None:
        """Write the record atomically (a keeper reads it every second)."""
        self.ensure()
        path = self.record_file(record.key)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, path)

    def update(self, key: str, **changes: Any) -> None:
        record = self.get(key)
        if record is not None:
            self.put(replace(record, **changes))

    def drop(self, key: str) -> None:
        """Forget the record (its keeper, seeing it gone, stops the server)."""
        with contextlib.suppress(FileNotFoundError):
            self.record_file(key).unlink()

    def matching(self, wanted: str) -> Iterator[KeptServer]:
        """The records whose key starts with `wanted`, or whose variant is `wanted`."""
        return (record for record in self.all() if matches(record, wanted))


def matches(record: KeptServer, wanted: str) -> bool:
    """Whether `wanted` names the kept server: its key, the key's first digits, or its variant."""
    return record.key.startswith(wanted) or record.variant == wanted


def same_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    """The running process `pid` if it is the one started at `create_time` (not a later one that got its pid)."""
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        if create_time is not None and abs(process.create_time() - create_time) > 0.01:
            return None
        return None if process.status() == psutil.STATUS_ZOMBIE else process
    except psutil.Error:
        return None


def create_time(pid: int | None) -> float | None:
    """When the process `pid` started (what same_process compares); None when it is gone."""
    if pid is None:
        return None
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def server_process(record: KeptServer) -> psutil.Process | None:
    return same_process(record.pid, record.create_time)


def keeper_process(record: KeptServer) -> psutil.Process | None:
    return same_process(record.keeper_pid, record.keeper_create_time)


def tree_memory(process: psutil.Process) -> int:
    """Resident bytes of the process and its descendants (0 for those gone meanwhile)."""
    total = 0
    with contextlib.suppress(psutil.Error):
        for member in (process, *process.children(recursive=True)):
            with contextlib.suppress(psutil.Error):
                total += member.memory_info().rss
    return total


def idle_seconds(record: KeptServer, now: float | None = None) -> float | None:
    """Seconds since the last run released it; None while no run ever released it."""
    if record.released_at is None:
        return None
    return max((time.time() if now is None else now) - record.released_at, 0.0)


VOLATILE_INFO = ("internal_states",)
"""`/server_info` fields that change while a server runs (SGLang's per-request state; docs/reuse.md)."""


def server_info_hash(info: Mapping[str, Any]) -> str:
    """The hash of a `/server_info` document without its volatile fields: the same server answers the same hash."""
    stable = {key: value for key, value in info.items() if key not in VOLATILE_INFO}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, default=str).encode()).hexdigest()[:16]


def duration_text(seconds: float) -> str:
    """`42 s`, `4 min`, `1.5 h`: an age or idle time as the kept servers' lines tell it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
