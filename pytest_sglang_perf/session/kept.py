"""The session's kept servers (`--sglang-reuse`): a variant's server attached to when a kept one has its key, booted
and registered otherwise, let go of (not stopped) at the variant's end. docs/reuse.md.

Plain Python (no pytest). The registry, its locks and the keeper are server/kept*.py's; this room decides, per
variant: the key's parts, whether the kept server may be used (alive, kept, answering, the same `/server_info`, not a
baseline recording), which stale server to stop, and what the run's cells say about the server they ran on.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import Settings
from pytest_sglang_perf.server.boot import RunningServer
from pytest_sglang_perf.server.boot_error import BootError
from pytest_sglang_perf.server.gpu_claims import VISIBLE
from pytest_sglang_perf.server.keeper import Keep
from pytest_sglang_perf.server.kept import (
    KeptServer,
    Registry,
    create_time,
    keeper_process,
    server_info_hash,
    server_key,
    server_process,
    state_folder,
    this_host,
)
from pytest_sglang_perf.server.kept_locks import FileLock
from pytest_sglang_perf.server.kept_stop import stop_kept
from pytest_sglang_perf.server.model_dir import config_file_hash, local_model_dir
from pytest_sglang_perf.server.redaction import redact_argv, redact_env, redact_text, secret_values
from pytest_sglang_perf.session.kept_use import KeptUse
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.variant_run import VariantRun

INHERITED = ("SGLANG_", "SGL_", "CUDA_", "NCCL_", "TORCH", "PYTORCH_", "HF_", "TRANSFORMERS_", "OMP_", "NVIDIA_",
             "LD_LIBRARY_PATH")
"""The inherited environment variables a server may read (SGLang's, the simulator's SGLANG_SIM_*, CUDA's, NCCL's,
torch's, Hugging Face's, OpenMP's): part of the key beside the variant's own `env`; the plugin's SGLANG_PERF_* are
not (they steer the run, not the server)."""


class SessionKept:
    def __init__(self, settings: Settings, options: RunOptions, live: Live, *, version: Callable[[], str],
                 pool: Callable[[], tuple[str, ...]], registry: Registry | None = None) -> None:
        self._settings = settings
        self._options = options
        self._live = live
        self._version = version
        self._pool = pool
        self.registry = registry or Registry(state_folder())

    # -- the key ---------------------------------------------------------------------------------------------------

    def parts(self, run: VariantRun) -> tuple[dict[str, str], dict[str, str]]:
        """The key's parts (exact text, hashed) and as shown (secrets redacted)."""
        plan = run.plan
        model_dir = plan.model_config.parent if plan.model_config is not None else local_model_dir(
            self._settings.model, self._settings.root)
        config = None if model_dir is None else config_file_hash(model_dir / "config.json")
        env = dict(sorted(plan.env.items()))
        inherited = {k: v for k, v in sorted(os.environ.items()) if k.startswith(INHERITED)
                     and not k.startswith("SGLANG_PERF_") and k not in env}
        pool = self._pool()
        exact = {
            "command": shlex.join(plan.command),
            "env": json.dumps(env),
            "inherited env": json.dumps(inherited),
            "model": f"{self._settings.model} (config.json {config or 'not found'})",
            "sglang": self._version() + (" (simulator)" if plan.simulated else ""),
            "gpus": "claimed from " + ",".join(pool) if pool else "as the server places itself",
            "host": this_host(),
        }
        secrets = secret_values(plan.command, plan.api_key, plan.admin_api_key)
        shown = {**exact, "command": redact_text(shlex.join(redact_argv(plan.command)), secrets),
                 "env": json.dumps(redact_env(env)), "inherited env": json.dumps(redact_env(inherited))}
        return exact, shown

    # -- attach or boot --------------------------------------------------------------------------------------------

    def start(self, run: VariantRun, boot: Callable[[Path], None], *, fresh: bool = False) -> bool:
        """Attach the variant to its kept server, or boot one with `boot(log_path)` and keep it; whether a server
        was booted. `fresh`: always boot (a reboot: a confirmation, more boots). Raises BootError (not started) when
        the kept server stays locked by another run."""
        exact, shown = self.parts(run)
        key = server_key(exact)
        self.registry.ensure()
        boot_lock = FileLock(self.registry.boot_lock_file(key))
        self._take(run, boot_lock, "another run is booting or checking it")
        try:
            self._stop_stale(run, key, shown)
            record = self.registry.get(key)
            if record is not None and self._attach(run, record, fresh):
                return False
            record = self.registry.get(key)  # gone meanwhile when its keeper stopped it
            if record is not None:
                self._replace(run, record)
            boot(self.registry.log_file(key))
            self._register(run, key, shown)
            return True
        finally:
            boot_lock.release()

    def _take(self, run: VariantRun, lock: FileLock, why: str) -> None:
        timeout = self._settings.startup_timeout * (3 if lock.path.name.endswith(".boot.lock") else 1)
        waited = lock.acquire(timeout, lambda seconds: self._live.note(
            f"[{run.name}] waiting for the kept server's lock ({why}; {seconds:.0f} s so far)"))
        if not waited:
            raise BootError(name=run.name, command=" ".join(redact_argv(run.plan.command)), started=False,
                            log_path=self.registry.folder, reason=(
                                f"its kept server's lock {lock.path} stayed taken for {timeout:g} s ({why}); wait "
                                "for that run, pass --sglang-reuse-shared to measure beside it, or run without "
                                "--sglang-reuse to boot a server of this run's own"))

    def _attach(self, run: VariantRun, record: KeptServer, fresh: bool) -> bool:
        """Attach to the kept server when it may be used (its use lock taken); whether it was."""
        problem = "a fresh boot was asked for (a reboot)" if fresh else self._unusable(record, run)
        if problem is not None:
            self._live.note(f"[{run.name}] kept server {record.key} not reused: {problem}")
            return False
        lock = FileLock(self.registry.use_lock_file(record.key), shared=self._options.reuse_shared)
        self._take(run, lock, f"run pid {record.last_user} is measuring on it")
        current = self.registry.get(record.key)  # it may have been stopped while this run waited
        problem = "it was stopped while this run waited" if current is None or (current.pid, current.create_time) != (
            record.pid, record.create_time) else self._unusable(current, run)
        if problem is not None or current is None:
            lock.release()
            self._live.note(f"[{run.name}] kept server {record.key} not reused: {problem}")
            return False
        record = current
        number = record.runs + 1
        self.registry.update(record.key, runs=number, last_user=_pid())
        run.kept = KeptUse(record.key, True, record.booted_at, number, lock)
        run.server = self._running(run, record)
        self._live.note(f"[{run.name}] {run.kept.describe()}: {record.base_url}, no boot")
        return True

    def _unusable(self, record: KeptServer, run: VariantRun) -> str | None:
        """Why the kept server must not be measured for this run, or None."""
        from pytest_sglang_perf.server.info import ServerInfoError, fetch_server_info

        if self._options.update_baselines:
            return "recording baselines boots a fresh server (docs/reuse.md)"
        if self._options.boots > 1:
            return f"--sglang-boots {self._options.boots} measures fresh boots"
        if server_process(record) is None:
            return f"its process (pid {record.pid}) is gone"
        if keeper_process(record) is None:
            return "its keeper is gone, so nothing would stop it when idle"
        health = _health(record.base_url, run.plan.api_key, self._settings.request.timeout)
        if health != 200:
            return f"GET {record.base_url}/health answered {health or 'nothing'}"
        try:
            info = fetch_server_info(record.base_url, run.plan.api_key, timeout=self._settings.request.timeout)
        except ServerInfoError as exc:
            return str(exc)
        if server_info_hash(info) != record.server_info_hash:
            return f"GET {record.base_url}/server_info no longer answers what it answered when it was kept"
        return None

    def _running(self, run: VariantRun, record: KeptServer) -> RunningServer:
        plan = run.plan
        if record.gpus and VISIBLE not in plan.env:
            plan = replace(plan, env={**plan.env, VISIBLE: ",".join(record.gpus)})
        log = Path(record.log_path)
        secrets = secret_values(plan.command, plan.api_key, plan.admin_api_key)
        return RunningServer(plan, record.base_url, record.boot_seconds, record.pid, log,
                             lambda wait: None if server_process(record) is not None else "exited (a kept server)",
                             lambda: redact_text(_last_attempt(log), secrets))

    def _replace(self, run: VariantRun, record: KeptServer) -> None:
        """Stop the kept server that may not be used, once no run measures on it, so a fresh one takes its key."""
        lock = FileLock(self.registry.use_lock_file(record.key))
        self._take(run, lock, f"run pid {record.last_user} is measuring on it")
        try:
            stop_kept(self.registry, record, force=True)
        finally:
            lock.release()
        self._live.note(f"[{run.name}] kept server {record.key} stopped: a fresh one boots in its place")

    def _stop_stale(self, run: VariantRun, key: str, shown: Mapping[str, str]) -> None:
        """Stop the kept servers of this project's variant that have another key (what changed is said)."""
        for record in self.registry.all():
            if record.variant != run.name or record.project != str(self._settings.root) or record.key == key:
                continue
            if record.host != shown["host"]:
                continue
            changed = "; ".join(changes(record.parts, shown)) or "its key"
            why = stop_kept(self.registry, record)
            if why is None:
                self._live.note(f"[{run.name}] kept server {record.key} stopped: {changed} changed")
            else:
                self._live.note(f"[{run.name}] kept server {record.key} ({changed} changed) not stopped: {why}")

    def _register(self, run: VariantRun, key: str, shown: Mapping[str, str]) -> None:
        """Keep the server this run booted: its record, the run's use lock, its watchdog made its keeper."""
        from pytest_sglang_perf.server.info import ServerInfoError, fetch_server_info

        assert run.process is not None and run.server is not None
        lock = FileLock(self.registry.use_lock_file(key), shared=self._options.reuse_shared)
        self._take(run, lock, "a run still measures on the server it replaced")
        try:
            info_hash = server_info_hash(fetch_server_info(run.server.base_url, run.plan.api_key))
        except ServerInfoError:
            info_hash = None
        watchdog = run.process.watchdog_pid
        record = KeptServer(
            key=key, variant=run.name, project=str(self._settings.root), base_url=run.server.base_url,
            pid=run.process.pid or 0, create_time=create_time(run.process.pid) or 0.0,
            log_path=str(run.server.log_path),
            command=shown["command"], parts=dict(shown),
            gpus=tuple(run.claim.gpus) if run.claim is not None else _visible(run.plan.env),
            boot_seconds=run.server.boot_seconds, booted_at=time.time(), idle_timeout=self._options.reuse_idle,
            simulated=run.plan.simulated, stop_grace=self._settings.stop_grace, keeper_pid=watchdog,
            keeper_create_time=create_time(watchdog), last_user=_pid(), server_info_hash=info_hash,
            host=shown["host"])
        try:
            self.registry.put(record)
            run.process.keep(Keep(self.registry.record_file(key), self.registry.use_lock_file(key),
                                  self._options.reuse_idle))
        except BaseException:  # a Ctrl-C, a full disk: not kept (the run stops the server as any other)
            self.registry.drop(key)
            lock.release()
            raise
        run.kept = KeptUse(key, False, record.booted_at, 1, lock)

    # -- the variant's end -----------------------------------------------------------------------------------------

    def let_go(self, run: VariantRun) -> bool:
        """The variant's tests are done: the server stays for the next run; this run's locks and descriptors go.
        False (nothing let go) when it cannot be kept: its keeper or its record is gone; the run stops it then."""
        kept = run.kept
        if kept is None:
            return False
        record = self.registry.get(kept.key)
        if record is None or keeper_process(record) is None:
            why = "its record is gone" if record is None else "its keeper is gone (killed?), so nothing would stop it"
            self._live.note(f"[{run.name}] kept server {kept.key} stopped instead of kept: {why}")
            return False
        if run.process is not None:
            run.process.detach()
            run.process = None
        if run.claim is not None:
            run.claim.forget()
            run.claim = None
        self.registry.update(kept.key, released_at=time.time())
        kept.lock.release()
        self._live.detail(f"[{run.name}] server kept ({kept.key}): it stops after {self._options.reuse_idle:g} s "
                          "without a run, or on `sglang-perf stop`")
        return True

    def forget(self, run: VariantRun) -> None:
        """This run stops the variant's kept server (a reboot, the end of a run that cannot keep it): with its use
        lock held exclusively, so no other run measures on it meanwhile; then its record goes."""
        kept, run.kept = run.kept, None
        if kept is None:
            return
        lock = kept.lock
        if not lock.held or lock.shared:
            lock.release()
            lock = FileLock(self.registry.use_lock_file(kept.key))
            if not lock.acquire(self._settings.startup_timeout, lambda seconds: self._live.note(
                    f"[{run.name}] waiting for another run to finish measuring on kept server {kept.key} before "
                    f"stopping it ({seconds:.0f} s so far)")):
                self._live.note(f"[{run.name}] kept server {kept.key} left running: another run measures on it; "
                                "it stops at its idle timeout")
                return
        try:
            record = self.registry.get(kept.key)
            if run.process is None and record is not None:
                stop_kept(self.registry, record, force=True)  # the lock is this run's: force passes it
            else:
                self.registry.drop(kept.key)
        finally:
            lock.release()


def changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """What differs between two keys' parts, in words: `command: +--enable-x -1 +2`."""
    out = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name, ""), new.get(name, "")
        if before == after:
            continue
        if name == "command":
            a, b = shlex.split(before), shlex.split(after)
            added = [t for t in b if t not in a]
            removed = [t for t in a if t not in b]
            out.append("command: " + " ".join([*(f"+{t}" for t in added), *(f"-{t}" for t in removed)]))
        else:
            out.append(f"{name}: {before} -> {after}")
    return out


def _health(base_url: str, api_key: str | None, timeout: float) -> int | None:
    """The status of the kept server's `GET /health` (open even with --api-key; the key is sent all the same)."""
    from urllib.parse import urlsplit

    from pytest_sglang_perf.server.probe import http_status

    url = urlsplit(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return http_status(url.hostname or "127.0.0.1", url.port or 80, "/health", headers, timeout)


def _visible(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(part.strip() for part in env.get(VISIBLE, "").split(",") if part.strip())


def _pid() -> int:
    return os.getpid()


def _last_attempt(log: Path) -> str:
    from pytest_sglang_perf.server.logfeed import last_attempt

    try:
        return last_attempt(log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""
