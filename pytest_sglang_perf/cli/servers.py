"""`sglang-perf servers` and `sglang-perf stop`: the kept servers of `--sglang-reuse` (server/kept.py), listed and
stopped. docs/reuse.md."""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Sequence

from pytest_sglang_perf.server.kept import (
    KeptServer,
    Registry,
    duration_text,
    idle_seconds,
    keeper_process,
    matches,
    server_process,
    state_folder,
    tree_memory,
)
from pytest_sglang_perf.server.kept_locks import in_use
from pytest_sglang_perf.server.kept_stop import stop_kept


def add_servers_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser("servers", help="the servers kept by --sglang-reuse: key, variant, age, idle time, GPUs, memory",
                   description=f"Lists the kept servers registered in {state_folder()} (SGLANG_PERF_STATE_DIR "
                               "sets the state folder).")
    stop = sub.add_parser("stop", help="stop kept servers (by key, its first digits, or variant name; --all)",
                          description="Stops kept servers: their records are removed, their keepers stop them "
                                      "(SIGTERM, SIGKILL after the grace). A server a run is measuring on is left "
                                      "running unless --force.")
    stop.add_argument("servers", nargs="*", metavar="KEY_OR_VARIANT", help="keys (or their first digits) or "
                                                                           "variant names")
    stop.add_argument("--all", action="store_true", help="every kept server of this host")
    stop.add_argument("--force", action="store_true", help="stop a server even while a run measures on it")


def servers_command(registry: Registry | None = None) -> int:
    registry = registry or Registry(state_folder())
    records = [r for r in registry.all() if r.host in ("", socket.gethostname())]
    if not records:
        print(f"sglang-perf: no kept server ({registry.folder}); pytest --sglang-reuse keeps the servers it boots")
        return 0
    now = time.time()
    rows: list[tuple[str, ...]] = [("key", "variant", "url", "pid", "age", "idle", "GPUs", "memory", "state")]
    rows += [_row(registry, record, now) for record in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"({len(records)} kept in {registry.folder}; `sglang-perf stop KEY` or `--all` stops them)")
    return 0


def _row(registry: Registry, record: KeptServer, now: float) -> tuple[str, ...]:
    process = server_process(record)
    idle = idle_seconds(record, now)
    busy = in_use(registry.use_lock_file(record.key))
    state = ("in use by a run" if busy else f"stops after {duration_text(record.idle_timeout)} idle"
             if process is not None else "gone (its process exited)")
    if process is not None and keeper_process(record) is None:
        state = "no keeper: will not stop when idle (sglang-perf stop it)"
    memory = "-" if process is None else f"{tree_memory(process) / 2**30:.2f} GiB RSS"
    return (record.key, record.variant, record.base_url, str(record.pid), duration_text(now - record.booted_at),
            "-" if busy or idle is None else duration_text(idle), ",".join(record.gpus) or "-", memory,
            state + (" (SIMULATED)" if record.simulated else ""))


def stop_command(wanted: Sequence[str], *, every: bool, force: bool, registry: Registry | None = None) -> int:
    registry = registry or Registry(state_folder())
    if not wanted and not every:
        print("sglang-perf stop: name the kept servers (keys, their first digits, or variants), or pass --all; "
              "`sglang-perf servers` lists them")
        return 2
    records = [r for r in registry.all() if r.host in ("", socket.gethostname())]
    chosen = records if every else [r for r in records if any(matches(r, w) for w in wanted)]
    unknown = [] if every else [w for w in wanted if not any(matches(r, w) for r in records)]
    code = 0
    for name in unknown:
        print(f"sglang-perf stop: no kept server {name!r} (`sglang-perf servers` lists them)")
        code = 1
    for record in chosen:
        why = stop_kept(registry, record, force=force)
        print(f"sglang-perf: kept server {record.key} ({record.variant}) "
              + ("stopped" if why is None else f"not stopped: {why}"))
        code = code if why is None else 1
    return code
