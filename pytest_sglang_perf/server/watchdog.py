"""A watchdog next to each launched server: when pytest dies without stopping it, by any signal (SIGKILL
included), the watchdog stops the server's whole process tree, then exits.

Plain Python (no pytest). pytest holds the only write end of a pipe whose read end the watchdog holds; the kernel
closes a dead process's descriptors whatever killed it, so the watchdog reads end-of-file exactly when pytest is
gone. A normal stop writes `done` first and the watchdog exits without touching anything. The watchdog runs in a
session of its own, so a Ctrl-C or a kill of pytest's process group does not reach it. Every process of the server
carries TOKEN_VAR in its environment, which finds the server even when pytest died before it could say its pid.

A kept server's watchdog (`--sglang-reuse`, server/kept.py) is its keeper: once pytest says `keep`, the end of the
pipe no longer stops the server; the watchdog stays, checking each second (server/keeper.py) that the server's record
is there and that a run used it within its idle timeout, and stops the tree when either fails, or exits when the
server exits on its own.

`Watchdog` is pytest's side; `main()` the watchdog's (`python -m pytest_sglang_perf.server.watchdog`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import IO

import psutil

from pytest_sglang_perf.server.keeper import TICK_SECONDS, Keep
from pytest_sglang_perf.server.process_tree import (
    KILL_WAIT,
    ProcessTree,
    alive,
    group_members,
    marked_processes,
    signal_each,
    signal_group,
    wait_exit,
    wait_gone,
)

TOKEN_VAR = "SGLANG_PERF_SERVER_TOKEN"
"""Environment variable that marks a server's processes for its watchdog (a random token per launch)."""
SCAN_EVERY = 5.0
"""Seconds between the watchdog's scans of the server's tree (to remember a descendant that leaves it)."""
RELEASE_WAIT = 10.0
"""Seconds pytest waits for a released watchdog to exit before killing it."""
LATE_LAUNCH_WAIT = 1.0
"""Seconds to look again for a server that pytest was launching as it died (it had not exec'd yet)."""


class Watchdog:
    """pytest's side of one server's watchdog: `start()` before launching the server (with `env` in its
    environment), `watch(pid)` once it runs, `release()` once it is stopped."""

    def __init__(self, name: str, grace: float) -> None:
        self.name = name
        self.grace = grace
        self.token = secrets.token_hex(16)
        self._pipe: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """What the guarded server's environment must hold."""
        return {TOKEN_VAR: self.token}

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def argv(self, fd: int) -> list[str]:
        return [sys.executable, "-m", __name__, "--fd", str(fd), "--grace", repr(self.grace), "--token", self.token,
                "--name", self.name]

    def start(self, log_file: IO[bytes]) -> None:
        """Start the watchdog process, its messages going to `log_file` (the server's log)."""
        read_end, write_end = os.pipe()  # not inheritable: only the watchdog gets the read end, nobody the write end
        try:
            self._proc = subprocess.Popen(
                self.argv(read_end), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                pass_fds=(read_end,), start_new_session=True,
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._pipe = write_end

    def watch(self, pid: int) -> None:
        """Tell the watchdog the server's pid (its process group)."""
        self._send(f"watch {pid}\n")

    def keep(self, keep: Keep) -> None:
        """The server is kept: from now on the watchdog is its keeper (stops it when idle or unregistered)."""
        self._send(keep.message())

    def detach(self) -> None:
        """pytest lets go of a kept server: close the pipe without `done`; the keeper carries on alone."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        self._proc = None

    def release(self) -> None:
        """The server is stopped: the watchdog exits without touching anything; wait for it. Idempotent."""
        if self._pipe is not None:
            self._send("done\n")
            os.close(self._pipe)
            self._pipe = None
        proc = self._proc
        if proc is not None and not wait_exit(proc, RELEASE_WAIT):
            proc.kill()
            proc.wait()

    def _send(self, message: str) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):  # the watchdog is gone (killed by hand): nothing to tell
                os.write(self._pipe, message.encode())


# -- the watchdog process --------------------------------------------------------------------------------------


class Guard:
    """The watchdog's state: the server's tree as seen so far, and how to stop it."""

    def __init__(self, name: str, token: str, grace: float) -> None:
        self.name = name
        self.token = token
        self.grace = grace
        self.parent = os.getppid()
        self.tree = ProcessTree()
        self.pgid: int | None = None
        self.keep: Keep | None = None

    def follow(self, fd: int) -> bool:
        """Read pytest's messages until `done` (True) or end-of-file, pytest is gone (False); a `keep` message puts
        the watchdog in keep mode."""
        pending = b""
        while True:
            ready, _, _ = select.select([fd], [], [], SCAN_EVERY if self.keep is None else TICK_SECONDS)
            if not ready:
                self.tree.track()
                if self.keep is not None and self.keeping_ends():
                    return True
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            *lines, pending = (pending + chunk).split(b"\n")
            if b"done" in lines:
                return True
            for line in (line.decode() for line in lines):
                if line.startswith("keep "):
                    self.keep = Keep.parse(line)
                    self.say(f"kept: stops after {self.keep.idle_timeout:g} s without a run, or when "
                             f"{self.keep.record_file.name} is removed")
                elif line.startswith("watch "):
                    self._watch(line.removeprefix("watch "))

    def keep_alone(self) -> None:
        """pytest is gone and the server is kept: check each second until the server must stop or is gone."""
        while not self.keeping_ends():
            time.sleep(TICK_SECONDS)

    def keeping_ends(self) -> bool:
        """One keeper check: whether the keeping is over (the server stopped here, or it exited on its own)."""
        assert self.keep is not None
        if not (any(alive(p) for p in self.tree.processes()) or self._group()):
            self.say("the kept server exited on its own")
            self.keep.forget(self.pgid)
            return True
        reason = self.keep.why_stop()
        if reason is None:
            return False
        self.say(f"stopping the kept server: {reason}")
        self.stop_server()
        self.keep.forget(self.pgid)
        return True

    def _watch(self, pid: str) -> None:
        self.pgid = int(pid)
        self.tree.attach(self.pgid)
        self.tree.track()

    def stop_server(self) -> None:
        """SIGTERM the server's main process (SGLang stops its own children), wait up to the grace for the whole
        tree, then SIGKILL the process group and every process of the tree that is left."""
        targets = self._targets()
        if not targets:
            time.sleep(LATE_LAUNCH_WAIT)
            targets = self._targets()
        if not targets:
            return
        if self.keep is None:
            self.say(f"pytest (pid {self.parent}) died without stopping the server (pid {self.pgid}): SIGTERM, "
                     f"SIGKILL after {self.grace:g} s")
        main_process = [p for p in self.tree.processes()[:1] if alive(p)]
        signal_each(main_process or targets, signal.SIGTERM)
        wait_gone(targets, self.grace)
        survivors = self._targets()
        if survivors:
            self.say(f"{len(survivors)} process(es) left after {self.grace:g} s: SIGKILL")
        self._kill(survivors)

    def _kill(self, processes: list[psutil.Process]) -> None:
        if self.pgid is not None and group_members(self.pgid):  # a group with members cannot have a reused id
            signal_group(self.pgid, signal.SIGKILL)
        signal_each(processes, signal.SIGKILL)
        for process in wait_gone([*processes, *self._group()], KILL_WAIT):
            self.say(f"process {process.pid} survived SIGKILL for {KILL_WAIT:g} s")

    def _targets(self) -> list[psutil.Process]:
        """Every running process of the server: its tree as seen so far, its process group, those carrying the
        token (the server itself when pytest died before saying its pid)."""
        marked = marked_processes(TOKEN_VAR, self.token)
        if self.pgid is None and marked:
            self._watch(str(min(marked, key=_started).pid))
        self.tree.track()
        found = {p.pid: p for p in (*self.tree.processes(), *self._group(), *marked) if p.pid != os.getpid()}
        return [p for p in found.values() if alive(p)]

    def _group(self) -> list[psutil.Process]:
        return [] if self.pgid is None else group_members(self.pgid)

    def say(self, message: str) -> None:
        stamp = datetime.now().isoformat(sep=" ", timespec="seconds")
        print(f"# sglang-perf watchdog [{stamp}] {self.name}: {message}", file=sys.stderr, flush=True)


def _started(process: psutil.Process) -> float:
    try:
        return process.create_time()
    except psutil.Error:
        return float("inf")


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pytest_sglang_perf.server.watchdog",
                                     description="Stops a server's process tree when pytest dies.")
    parser.add_argument("--fd", type=int, required=True, help="read end of the pipe whose write end pytest holds")
    parser.add_argument("--grace", type=float, required=True, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--token", required=True, help=f"the value of {TOKEN_VAR} in the server's environment")
    parser.add_argument("--name", required=True, help="the server's variant, for messages")
    return parser.parse_args(argv)


class _Terminated(Exception):
    """SIGTERM reached the watchdog."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for pytest: pytest stops the server itself
    guard = Guard(args.name, args.token, args.grace)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        if not guard.follow(args.fd):
            if guard.keep is None:
                guard.stop_server()
            else:
                guard.keep_alone()
    except _Terminated:  # a kept server's keeper is the only thing that would stop it: it goes with its keeper
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if guard.keep is not None:
            guard.say("the keeper got SIGTERM: stopping the kept server")
            guard.stop_server()
            guard.keep.forget(guard.pgid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
