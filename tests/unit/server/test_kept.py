"""Kept servers' parts that need no server: the key, the record file, the locks, the keeper's decision."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_sglang_perf.server.keeper import Keep
from pytest_sglang_perf.server.kept import KeptServer, Registry, server_info_hash, server_key, state_folder
from pytest_sglang_perf.server.kept_locks import FileLock, in_use
from pytest_sglang_perf.session.kept import changes

PARTS = {"command": "python -m sglang.launch_server --tp 2", "env": "{}", "model": "m", "sglang": "0.5.19",
         "gpus": "claimed from 0,1", "host": "h"}


def _record(key: str = "abc", **changed: object) -> KeptServer:
    values: dict[str, object] = dict(
        key=key, variant="a", project="/p", base_url="http://127.0.0.1:1", pid=1, create_time=0.0, log_path="/l",
        command="c", parts=PARTS, gpus=("0",), boot_seconds=1.0, booted_at=0.0, idle_timeout=60.0,
        simulated=True)
    values.update(changed)
    return KeptServer(**values)  # type: ignore[arg-type]


def test_the_key_changes_with_every_part_and_only_with_them() -> None:
    key = server_key(PARTS)
    assert server_key(dict(reversed(list(PARTS.items())))) == key
    for name in PARTS:
        assert server_key({**PARTS, name: PARTS[name] + " "}) != key, name


def test_the_state_folder_follows_the_environment(tmp_path: Path) -> None:
    assert state_folder({"SGLANG_PERF_STATE_DIR": str(tmp_path)}) == tmp_path / "servers"
    assert state_folder({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "pytest-sglang-perf" / "servers"


def test_records_round_trip_and_a_broken_one_is_no_record(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "servers")
    registry.put(_record())
    assert registry.get("abc") == _record()
    registry.update("abc", released_at=5.0, runs=2)
    assert registry.get("abc") == _record(released_at=5.0, runs=2)
    registry.record_file("bad").write_text("{\"key\": 1}")
    assert [r.key for r in registry.all()] == ["abc"]
    assert list(registry.matching("ab")) == list(registry.matching("a")) == [registry.get("abc")]
    assert (registry.folder.stat().st_mode & 0o777) == 0o700


def test_the_server_info_hash_ignores_only_the_volatile_fields() -> None:
    info = {"tp_size": 2, "internal_states": [{"last_gen_throughput": 1.0}], "version": "0.5.19"}
    assert server_info_hash(info) == server_info_hash({**info, "internal_states": [{"last_gen_throughput": 9.0}]})
    assert server_info_hash(info) != server_info_hash({**info, "tp_size": 1})


def test_exclusive_and_shared_use_locks(tmp_path: Path) -> None:
    path = tmp_path / "k.use.lock"
    first, second = FileLock(path, shared=True), FileLock(path, shared=True)
    assert first.try_acquire() and second.try_acquire() and in_use(path)
    assert not FileLock(path).try_acquire()
    first.release()
    second.release()
    assert not in_use(path)
    exclusive = FileLock(path)
    assert exclusive.acquire(1.0)
    waited: list[float] = []
    start = time.monotonic()
    assert not FileLock(path, shared=True).acquire(0.3, waited.append)
    assert time.monotonic() - start >= 0.3 and waited[:1] == [pytest.approx(0.0, abs=0.05)]
    exclusive.release()


def _keep(tmp_path: Path, idle: float, released_at: float | None = None) -> Keep:
    record = tmp_path / "k.json"
    record.write_text(json.dumps({"pid": 7, "released_at": released_at}))
    return Keep(record, tmp_path / "k.use.lock", idle, last_active=100.0)


def test_the_keeper_waits_while_a_run_uses_the_server(tmp_path: Path) -> None:
    keep = _keep(tmp_path, 10.0)
    user = FileLock(keep.use_lock_file)
    assert user.try_acquire()
    assert keep.why_stop(now=500.0) is None and keep.last_active == 500.0
    user.release()
    assert keep.why_stop(now=509.0) is None
    assert keep.why_stop(now=511.0) == "idle for 11 s (no run used it; idle timeout 10 s)"
    assert keep.lock is not None and in_use(keep.use_lock_file)  # held while it stops the server
    keep.forget(7)
    assert not keep.record_file.exists() and not in_use(keep.use_lock_file)


def test_the_keeper_counts_idle_time_from_the_last_release(tmp_path: Path) -> None:
    keep = _keep(tmp_path, 10.0, released_at=200.0)
    assert keep.why_stop(now=205.0) is None
    assert keep.why_stop(now=211.0) is not None


def test_the_keeper_stops_when_its_record_is_gone_and_spares_another_servers(tmp_path: Path) -> None:
    keep = _keep(tmp_path, 1e9)
    keep.forget(8)  # the record is another server's now: it stays
    assert keep.record_file.exists()
    keep.record_file.unlink()
    assert keep.why_stop() == (f"its record {keep.record_file} is gone (sglang-perf stop, or the state folder was "
                               "removed)")
    parsed = Keep.parse(keep.message().rstrip("\n"))
    assert (parsed.record_file, parsed.use_lock_file, parsed.idle_timeout) == (keep.record_file, keep.use_lock_file,
                                                                                1e9)


def test_what_changed_between_two_keys_is_said() -> None:
    new = {**PARTS, "command": "python -m sglang.launch_server --tp 4", "sglang": "0.5.20"}
    assert changes(PARTS, new) == ["command: +4 -2", "sglang: 0.5.19 -> 0.5.20"]
    assert changes(PARTS, PARTS) == []
