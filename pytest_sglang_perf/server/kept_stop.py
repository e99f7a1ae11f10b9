"""Stopping a kept server from outside its keeper: `sglang-perf stop`, a run whose key replaced it, a run that needs
its GPUs (server/kept.py).

Plain Python (no pytest). The record is removed first, so its keeper (server/keeper.py) stops the tree within a
second; when the keeper is gone (killed by hand), the tree is stopped here, as the keeper would: SIGTERM to the main
process, SIGKILL to its process group and every descendant after the grace. A server a run is measuring on is not
stopped unless `force` says so.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import psutil

from pytest_sglang_perf.server.kept import KeptServer, Registry, keeper_process, server_process, this_host
from pytest_sglang_perf.server.kept_locks import FileLock
from pytest_sglang_perf.server.process_tree import group_members, signal_each, signal_group, wait_gone

KEEPER_WAIT = 5.0
"""Seconds, beyond the grace, for a keeper to stop its server once its record is gone."""


def stop_kept(registry: Registry, record: KeptServer, *, force: bool = False) -> str | None:
    """Stop the kept server; None once it is gone, else why it was not stopped (a run is using it)."""
    lock = FileLock(registry.use_lock_file(record.key))
    if not lock.try_acquire() and not force:
        return (f"a run is measuring on it (pid {record.last_user}); wait for that run, or stop it anyway with "
                "--force")
    try:
        process = server_process(record)
        tree = [] if process is None else _tree(process)
        registry.drop(record.key)
        if process is None:
            return None
        if keeper_process(record) is not None and not wait_gone(tree, record.stop_grace + KEEPER_WAIT):
            return None
        _stop_tree(record, process, tree)
        return None
    finally:
        lock.release()


def _tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return [process]


def _stop_tree(record: KeptServer, process: psutil.Process, tree: list[psutil.Process]) -> None:
    """What the keeper would have done: SIGTERM the main process, SIGKILL what is left after the grace."""
    signal_each([process], signal.SIGTERM)
    left = wait_gone(tree, record.stop_grace)
    if group_members(record.pid):
        signal_group(record.pid, signal.SIGKILL)
    signal_each(left, signal.SIGKILL)
    wait_gone(left, 5.0)


def evict_idle(registry: Registry, pool: tuple[str, ...], say: Callable[[str], None]) -> None:
    """Stop the idle kept servers of this host that hold GPUs of `pool`: a run that needs GPUs comes first (with
    --sglang-reuse or not)."""
    for record in registry.all():
        if record.host == this_host() and set(record.gpus) & set(pool) and stop_kept(registry, record) is None:
            say(f"kept server {record.key} ({record.variant}) stopped: this run needs its GPUs {','.join(record.gpus)}")
