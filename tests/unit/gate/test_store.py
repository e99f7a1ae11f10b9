from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from pytest_sglang_perf.gate.baseline import SCHEMA_VERSION, BaselineEntry, BaselineFileError
from pytest_sglang_perf.gate.jsonfile import lock_path
from pytest_sglang_perf.gate.store import BaselineStore, environment_key_slug
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary

KEY = "simulated-h100-x2__qwen-qwen3-8b"
ENV = {"gpu": "H100", "sglang": "0.5.23", "simulated": True}
PARAMS = RequestSettings(max_tokens=512, temperature=0.6, seed=0, repeats=3, warmup=1)


def entry(test_id: str = "tests/perf/test_a.py::test_rbt", variant: str = "default", scale: float = 1.0,
          commit: str | None = "abc123") -> BaselineEntry:
    samples = tuple(
        Sample(ttft=0.1 + 0.2 + i / 7, e2e=9.123456789012345 * scale + i, decode_time=8.9 + i / 3,
               completion_tokens=512, prompt_tokens=40, chunks=170,
               spec_verify_ct=170 if i else None, spec_accept_length=3.0117647058823529 if i else None)
        for i in range(3)
    )
    summaries = {
        "output_throughput": Summary.of([55.12345678901234 * scale, 54.9, 56.1]),
        "ttft": Summary.of([s.ttft for s in samples]),
    }
    return BaselineEntry(
        test_id=test_id, variant=variant, summaries=summaries, samples=samples,
        args=("--tp-size", "2"), prompt_hash="sha256:0123", params=PARAMS,
        recorded_at="2026-05-09T07:35:25+00:00", commit=commit, environment={"sglang": "0.5.23"},
    )


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_no_file_means_no_baselines(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path / "missing", KEY)
    assert store.load() == {}
    assert store.lookup("t", "default") is None
    assert store.path == tmp_path / "missing" / f"{KEY}.json"


def test_round_trip_keeps_every_value_exactly(tmp_path: Path) -> None:
    written = [entry(), entry(variant="prefill_graph", scale=0.9, commit=None)]
    path = BaselineStore(tmp_path, KEY).write(written, ENV)
    loaded = BaselineStore(tmp_path, KEY).load()
    assert set(loaded) == {(e.test_id, e.variant) for e in written}
    for e in written:
        assert loaded[(e.test_id, e.variant)] == e
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == SCHEMA_VERSION
    assert doc["environment_key"] == KEY
    assert doc["environment"] == ENV
    assert doc["entries"]["tests/perf/test_a.py::test_rbt"]["default"]["commit"] == "abc123"


def test_write_merges_with_the_file_on_disk(tmp_path: Path) -> None:
    BaselineStore(tmp_path, KEY).write([entry("a"), entry("b")], {"writer": 1})
    replacement = entry("a", scale=2.0)
    other = BaselineStore(tmp_path, KEY)
    other.write([replacement, entry("c")], {"writer": 2})
    loaded = BaselineStore(tmp_path, KEY).load()
    assert sorted(loaded) == [("a", "default"), ("b", "default"), ("c", "default")]
    assert loaded[("a", "default")] == replacement
    assert loaded[("b", "default")] == entry("b")
    assert json.loads(other.path.read_text())["environment"] == {"writer": 2}
    assert other.lookup("c", "default") == entry("c")


def test_a_stale_store_does_not_drop_entries_written_since(tmp_path: Path) -> None:
    first, second = BaselineStore(tmp_path, KEY), BaselineStore(tmp_path, KEY)
    assert first.load() == {} and second.load() == {}
    first.write([entry("a")], ENV)
    second.write([entry("b")], ENV)
    assert sorted(BaselineStore(tmp_path, KEY).load()) == [("a", "default"), ("b", "default")]


def test_load_is_cached(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path, KEY)
    store.write([entry("a")], ENV)
    assert store.lookup("a", "default") is not None
    store.path.unlink()
    assert store.lookup("a", "default") == entry("a")


def test_output_is_stable_sorted_and_leaves_nothing_else(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    BaselineStore(one, KEY).write([entry("b"), entry("a"), entry("a", "v2")], ENV)
    BaselineStore(two, KEY).write([entry("a", "v2"), entry("a"), entry("b")], dict(reversed(ENV.items())))
    first = (one / f"{KEY}.json").read_bytes()
    assert first == (two / f"{KEY}.json").read_bytes()
    BaselineStore(one, KEY).write([entry("a")], ENV)  # rewriting the same values changes nothing
    assert (one / f"{KEY}.json").read_bytes() == first
    text = first.decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert "0.30000000000000004" in text  # 0.1 + 0.2, written exactly, not rounded
    assert listing(one) == [f"{KEY}.json"]
    assert not lock_path(one / f"{KEY}.json").is_relative_to(one)


def test_refuses_to_record_nan(tmp_path: Path) -> None:
    bad = dataclasses.replace(entry(), summaries={"ttft": Summary.of([float("nan")])})
    store = BaselineStore(tmp_path, KEY)
    store.write([entry("keep")], ENV)
    before = store.path.read_bytes()
    with pytest.raises(ValueError, match=r"test_rbt \[default\].*NaN"):
        store.write([bad], ENV)
    assert store.path.read_bytes() == before


def test_a_failed_replace_leaves_the_old_file_and_no_temp_file(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store = BaselineStore(tmp_path, KEY)
    store.write([entry("a")], ENV)
    before = store.path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="No space left"):
        BaselineStore(tmp_path, KEY).write([entry("b")], ENV)
    assert store.path.read_bytes() == before
    assert listing(tmp_path) == [f"{KEY}.json"]


# Corrupt files -------------------------------------------------------------------------------------


def _valid_doc() -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION, "environment_key": KEY, "environment": ENV,
        "entries": {"t": {"default": entry("t").to_dict()}},
    }


def _with(change: Callable[[dict[str, Any]], object]) -> bytes:
    doc = _valid_doc()
    change(doc)
    return json.dumps(doc, indent=2).encode()


def _cell(doc: dict[str, Any]) -> dict[str, Any]:
    cell: dict[str, Any] = doc["entries"]["t"]["default"]
    return cell


CORRUPT: dict[str, tuple[bytes, str]] = {
    "truncated": (b'{\n  "schema_version": 1,\n  "entries": {', r"not valid JSON .*line 3, column"),
    "merge conflict": (b"<<<<<<< HEAD\n{}\n=======\n{}\n>>>>>>> main\n", r"not valid JSON .*line 1.*unresolved merge"),
    "empty": (b"", r"not valid JSON"),
    "not utf-8": (b'{"schema_version": 1, "x": "\xff"}', r"not UTF-8"),
    "nan": (b'{"schema_version": 1, "x": NaN}', r"not valid JSON .*NaN"),
    "a list": (b"[1, 2]", r"must hold a JSON object, found a list"),
    "no schema": (_with(lambda d: d.pop("schema_version")), r"has no schema_version"),
    "string schema": (_with(lambda d: d.update(schema_version="1")), r"schema_version must be an integer"),
    "older schema": (_with(lambda d: d.update(schema_version=0)),
                     r"recorded with schema 0; this plugin reads schemas 1 to 2.*re-record with "
                     r"--sglang-update-baselines"),
    "newer schema": (_with(lambda d: d.update(schema_version=3)),
                     r"schema 3 by a newer pytest-sglang-perf.*upgrade pytest-sglang-perf"),
    "no environment key": (_with(lambda d: d.pop("environment_key")), r"has no environment_key"),
    "other environment": (_with(lambda d: d.update(environment_key="a100")),
                          r"environment_key 'a100'.*rename the file"),
    "entries not an object": (_with(lambda d: d.update(entries=[])), r"'entries' must be an object, found a list"),
    "no environment": (_with(lambda d: d.pop("environment")), r"'environment' must be an object, found nothing"),
    "variants not an object": (_with(lambda d: d["entries"].update(t=3)), r"entry 't' must map variant names"),
    "missing key": (_with(lambda d: _cell(d).pop("prompt_hash")),
                    r"entry 't' variant 'default' has no 'prompt_hash'; fix or delete that entry"),
    "wrong type": (_with(lambda d: _cell(d).update(commit=5)),
                   r"entry 't' variant 'default': 'commit' must be a string or null, found a number"),
    "bad args": (_with(lambda d: _cell(d).update(args=["--tp", 2])), r"'args' must be a list of strings"),
    "bad summary": (_with(lambda d: _cell(d)["metrics"]["ttft"].update(median="fast")),
                    r"entry 't' variant 'default': metric 'ttft' is malformed"),
    "summary missing key": (_with(lambda d: _cell(d)["metrics"]["ttft"].pop("mad")),
                            r"metric 'ttft' is malformed \(missing key 'mad'\)"),
    "bad sample": (_with(lambda d: _cell(d)["samples"][1].update(e2e=None)),
                   r"entry 't' variant 'default': sample 1 is malformed"),
    "sample not an object": (_with(lambda d: _cell(d)["samples"].append(7)), r"sample 3 is malformed"),
    "startup not an object": (_with(lambda d: _cell(d).update(startup=[1])),
                              r"entry 't' variant 'default': 'startup' must be an object or null, found a list"),
    "ran not an object": (_with(lambda d: _cell(d).update(ran="fast")), r"'ran' must be an object or null"),
    "params missing a field": (_with(lambda d: _cell(d)["params"].pop("seed")),
                               r"entry 't' variant 'default': 'params' is malformed \(missing key 'seed'\)"),
    "params of the wrong type": (_with(lambda d: _cell(d)["params"].update(max_tokens="512")),
                                 r"'params' is malformed \(expected a whole number, found '512'\)"),
}


@pytest.mark.parametrize("content,pattern", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_file_is_reported_and_never_modified(tmp_path: Path, content: bytes, pattern: str) -> None:
    path = tmp_path / f"{KEY}.json"
    path.write_bytes(content)
    with pytest.raises(BaselineFileError, match=pattern) as loading:
        BaselineStore(tmp_path, KEY).load()
    assert loading.value.path == path
    assert str(path) in str(loading.value)
    with pytest.raises(BaselineFileError, match=pattern):
        BaselineStore(tmp_path, KEY).write([entry("new")], ENV)
    assert path.read_bytes() == content
    assert listing(tmp_path) == [path.name]


def test_startup_facts_and_what_ran_round_trip_and_older_entries_have_none(tmp_path: Path) -> None:
    """Entries written before these fields existed (no `startup`, no `ran` keys) still load, as None."""
    recorded = dataclasses.replace(entry(), startup={"load_weight": 40.1, "cuda_graph": {"decode": 12.5}},
                                   ran={"prefill CUDA graph": "breakable (captured in 20.51 s)"})
    BaselineStore(tmp_path, KEY).write([recorded], ENV)
    assert BaselineStore(tmp_path, KEY).lookup(recorded.test_id, "default") == recorded
    (tmp_path / f"{KEY}.json").write_bytes(_with(lambda d: [_cell(d).pop(k, None) for k in ("startup", "ran")]))
    older = BaselineStore(tmp_path, KEY).lookup("t", "default")
    assert older is not None and older.startup is None and older.ran is None


def test_the_valid_corruption_template_loads(tmp_path: Path) -> None:
    (tmp_path / f"{KEY}.json").write_bytes(_with(lambda d: None))
    assert BaselineStore(tmp_path, KEY).lookup("t", "default") == entry("t")


def test_an_unreadable_path_is_reported(tmp_path: Path) -> None:
    (tmp_path / f"{KEY}.json").mkdir()
    with pytest.raises(BaselineFileError, match="cannot be read"):
        BaselineStore(tmp_path, KEY).load()


# Parallel writers ----------------------------------------------------------------------------------


def _write_cells(directory: str, worker: int, start: Any) -> None:
    start.wait(timeout=30)
    store = BaselineStore(Path(directory), KEY)
    for cell in range(5):
        store.write([entry(f"test_{worker}_{cell}", variant=f"v{cell % 2}")], {"worker": worker})


def test_parallel_writers_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(4)
    workers = [ctx.Process(target=_write_cells, args=(str(tmp_path), w, start)) for w in range(4)]
    for proc in workers:
        proc.start()
    try:
        for proc in workers:
            proc.join(timeout=60)
        assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    finally:
        for proc in workers:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=10)
    assert not any(psutil.pid_exists(p.pid) and psutil.Process(p.pid).status() != psutil.STATUS_ZOMBIE
                   for p in workers if p.pid is not None)
    loaded = BaselineStore(tmp_path, KEY).load()
    expected = {(f"test_{w}_{c}", f"v{c % 2}") for w in range(4) for c in range(5)}
    assert set(loaded) == expected
    assert listing(tmp_path) == [f"{KEY}.json"]


# Environment keys ----------------------------------------------------------------------------------


def test_environment_key_slug_is_a_safe_file_name() -> None:
    assert environment_key_slug(["NVIDIA H100 80GB HBM3 x2", "Qwen/Qwen3.6-27B"]) == (
        "nvidia-h100-80gb-hbm3-x2__qwen-qwen3.6-27b"
    )
    assert environment_key_slug(["../../etc", "", "a b"]) == "etc__a-b"


def test_long_environment_keys_stay_distinct() -> None:
    a = environment_key_slug(["x" * 200, "model-a"])
    b = environment_key_slug(["x" * 200, "model-b"])
    assert a != b
    assert len(a) <= 120 and len(b) <= 120
    assert BaselineStore(Path("."), a).path.name == f"{a}.json"


def test_unusable_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="no letters or digits"):
        environment_key_slug(["///", ""])
    with pytest.raises(ValueError, match="environment_key_slug"):
        BaselineStore(Path("."), "../outside")


def test_each_boot_keeps_the_conditions_it_was_measured_under(tmp_path: Path) -> None:
    from pytest_sglang_perf.gate.baseline import BootRecord

    conditions = {"client": {"lag_p99": 0.0004}, "host": None,
                  "gpu": [{"index": 0, "name": "NVIDIA H200", "sm_mhz": 1980.0, "foreign": []}]}
    boots = (BootRecord(2, 31.0, 4.2, conditions), BootRecord(1, 30.5, 4.1))  # the second: read before they were kept
    path = BaselineStore(tmp_path, KEY).write([dataclasses.replace(entry(), boots=boots)], ENV)
    saved = json.loads(path.read_text())["entries"]["tests/perf/test_a.py::test_rbt"]["default"]["boots"]
    assert saved[0]["conditions"] == conditions and "conditions" not in saved[1]  # an older boot is kept as it was
    [loaded] = BaselineStore(tmp_path, KEY).load().values()
    assert loaded.boots == boots
    saved[0]["conditions"] = "hot"
    document = json.loads(path.read_text())
    document["entries"]["tests/perf/test_a.py::test_rbt"]["default"]["boots"] = saved
    path.write_text(json.dumps(document))
    with pytest.raises(BaselineFileError, match=r"'boots' is malformed \(a boot's 'conditions' must be an object or "
                                                r"null, found a string\)"):
        BaselineStore(tmp_path, KEY).load()
