"""GPU claims: on a host with several GPUs, each server gets GPUs no other server of any pytest process holds.

Plain Python (no pytest). Before a variant's server boots, the session claims as many GPUs as the server uses
(tp x pp x dp, preflight.local_gpu_count) from the host's pool and starts the server with
`CUDA_VISIBLE_DEVICES` set to its claim; the claim is released when the server stops. A claim is a file lock per GPU
(`gpu-<id>.lock`) in a folder every process on the host shares (`--sglang-gpu-lock-dir`, default
`<tmp>/pytest-sglang-perf-gpus`): pytest-xdist workers, and separate pytest runs, never boot two servers on one GPU.

The locks are flock(2) locks on descriptors the server process inherits: the kernel drops them when the last holder
exits, so a crashed run leaves no stale claim, and a server that outlives its pytest keeps its GPUs until it is gone.
A claim takes all its GPUs or none (a GPU that is busy releases the ones already taken and the claim tries again),
so two processes waiting for two GPUs each cannot deadlock on one GPU each. The folder and its files are made
writable by every user of the host.

The pool is the GPUs this process may use: `CUDA_VISIBLE_DEVICES` when it is set (its entries as given, indices or
UUIDs), else the indices nvidia-smi lists. A variant whose own `env` sets `CUDA_VISIBLE_DEVICES` claims nothing:
the user placed it. The facts behind all this: docs/scaling.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.server.redaction import redact_argv

VISIBLE = "CUDA_VISIBLE_DEVICES"
DEFAULT_LOCK_DIR = Path("/tmp/pytest-sglang-perf-gpus")
"""In /tmp itself, not $TMPDIR: a per-user TMPDIR would keep two users' claims apart."""
RETRY_SECONDS = 0.5
"""How often a waiting claim tries again."""
WAIT_NOTE_SECONDS = 30.0
"""How often a waiting claim says it is still waiting."""


class GpuClaimError(SGLangPerfError):
    """A claim that cannot be made: too few GPUs on the host, or none free in time."""


def gpu_pool(environ: Mapping[str, str], host_count: Callable[[], int]) -> tuple[str, ...]:
    """The GPUs this process may hand out: CUDA_VISIBLE_DEVICES's entries when set, else 0..N-1 for the N GPUs
    nvidia-smi lists (`host_count`)."""
    visible = environ.get(VISIBLE)
    if visible is not None:
        return tuple(part.strip() for part in visible.split(",") if part.strip())
    return tuple(str(index) for index in range(host_count()))


@dataclass
class GpuClaim:
    """GPUs held for one server until `release()`: one locked file descriptor per GPU. The server process inherits
    them (`fds`, launcher.LaunchSpec.pass_fds), so a claim lasts as long as its server even when pytest dies first;
    `release()` unlocks them for every holder."""

    gpus: tuple[str, ...]
    fds: tuple[int, ...] = field(default=(), repr=False)

    @property
    def visible_devices(self) -> str:
        return ",".join(self.gpus)

    def forget(self) -> None:
        """Close this process's descriptors, keeping the locks: the server holds them (a kept one, server/kept.py)."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()

    def release(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = ()


def claim_gpus(pool: Sequence[str], count: int, lock_dir: Path, *, timeout: float,
               waiting: Callable[[str], None] = lambda message: None) -> GpuClaim:
    """Claim `count` GPUs of `pool`, waiting up to `timeout` seconds for enough of them to be free; raises
    GpuClaimError when the pool is too small, the lock folder cannot be used or the wait times out. `waiting` hears
    why it waits (every 30 s)."""
    if count > len(pool):
        raise GpuClaimError(f"the server needs {count} GPU(s) (tp x pp x dp) but this host offers {len(pool)} "
                            f"({_pool_text(pool)}); lower the variant's --tp-size/--pp-size/--dp-size, or run it on "
                            "a host with more GPUs")
    deadline = time.monotonic() + timeout
    next_note = time.monotonic()
    while True:
        try:
            claim = _try_claim(pool, count, _shared_folder(lock_dir))
        except OSError as exc:
            raise GpuClaimError(f"the GPU lock folder {lock_dir} cannot be used ({exc.strerror or exc}); give one "
                                "every user of this host can write with --sglang-gpu-lock-dir") from None
        if claim is not None:
            return claim
        now = time.monotonic()
        if now >= deadline:
            raise GpuClaimError(f"no {count} of the GPUs {_pool_text(pool)} became free within {timeout:.0f} s: "
                                f"other servers hold them (locks in {lock_dir}); wait for the other runs, or give "
                                "this run fewer xdist workers")
        if now >= next_note:
            waiting(f"waiting for {count} free GPU(s) of {_pool_text(pool)}: other servers hold them")
            next_note = now + WAIT_NOTE_SECONDS
        time.sleep(RETRY_SECONDS)


def _shared_folder(lock_dir: Path) -> Path:
    """The lock folder, made writable by every user of the host when this call creates it (as /tmp is)."""
    if not lock_dir.is_dir():
        lock_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another user made it first: theirs stands
            os.chmod(lock_dir, 0o1777)
    return lock_dir


def _try_claim(pool: Sequence[str], count: int, lock_dir: Path) -> GpuClaim | None:
    """`count` free GPUs of the pool, locked, in pool order; None (holding nothing) when fewer are free."""
    taken: list[tuple[str, int]] = []
    try:
        for gpu in pool:
            fd = _lock_file(lock_dir / f"gpu-{_file_part(gpu)}.lock")
            if fd is None:
                continue
            taken.append((gpu, fd))
            if len(taken) == count:
                return GpuClaim(tuple(g for g, _ in taken), tuple(f for _, f in taken))
    except BaseException:  # an OSError, or Ctrl-C between two locks: hold nothing
        GpuClaim((), tuple(f for _, f in taken)).release()
        raise
    GpuClaim((), tuple(f for _, f in taken)).release()
    return None


def _lock_file(path: Path) -> int | None:
    """An open descriptor holding the file's exclusive lock, or None when another process holds it. An existing file
    is opened read-only (flock needs no write access, and a sticky shared folder with fs.protected_regular refuses
    O_CREAT on another user's file); a missing one is created, writable by every user."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _file_part(gpu: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in gpu)


def _pool_text(pool: Sequence[str]) -> str:
    return ",".join(pool) if pool else "none"


def claimed_plan(plan: ServerPlan, count: int | None, pool: Sequence[str], lock_dir: Path, log_path: Path, *,
                 timeout: float, waiting: Callable[[str], None]) -> tuple[ServerPlan, GpuClaim | None]:
    """The plan with CUDA_VISIBLE_DEVICES set to a claim of `count` GPUs of the pool, and the claim; the plan
    unchanged and no claim when there is nothing to claim: no GPU in the pool, a remote server, a variant that sets
    the variable itself, or a GPU count that is not known (`count` None: a multi-node server). A claim that cannot be
    made is the variant's BootError (no server was started)."""
    if VISIBLE in plan.env or not pool or plan.url is not None or count is None:
        return plan, None
    try:
        claim = claim_gpus(pool, count, lock_dir, timeout=timeout, waiting=waiting)
    except GpuClaimError as exc:
        raise BootError(name=plan.variant.name, command=" ".join(redact_argv(plan.command)), reason=str(exc),
                        log_path=log_path, started=False) from None
    return replace(plan, env={**plan.env, VISIBLE: claim.visible_devices}), claim
