"""What makes two cells comparable: the identity, its differences in words, resolved args, GPUs used, and the
baseline file's identity and boots fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang_perf.gate.baseline import BaselineFileError
from pytest_sglang_perf.gate.baseline_parse import load_entries
from pytest_sglang_perf.gate.identity import CellIdentity, ServerIdentity, differences
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser
from pytest_sglang_perf.sglang_facts.resolved import gpus_used, option_defaults, resolved_args

PARSER = flag_table_parser()
SERVER = ServerIdentity(model="Qwen/Qwen3.6-27B", model_config="abc", gpus="2x RTX A6000",
                        args={"--tp-size": "2"})
REQUEST = RequestSettings(max_tokens=512, temperature=0.6, seed=0, repeats=3, warmup=1)


def identity(server: ServerIdentity = SERVER, request: RequestSettings = REQUEST, prompt: str = "p1") -> CellIdentity:
    return CellIdentity.of(prompt, request, server)


def test_the_same_cell_has_no_differences_and_round_trips() -> None:
    one = identity()
    assert differences(one, identity()) == []
    assert CellIdentity.from_dict(json.loads(json.dumps(one.to_dict()))) == one


def test_repeats_and_warmup_are_not_part_of_it() -> None:
    more = RequestSettings(max_tokens=512, temperature=0.6, seed=0, repeats=10, warmup=3)
    assert differences(identity(), identity(request=more)) == []


def test_each_change_is_named() -> None:
    request = RequestSettings(max_tokens=128, temperature=0.0, seed=7, repeats=3, warmup=1, ignore_eos=False)
    server = ServerIdentity(model="Qwen/Qwen3.6-27B", model_config="def", gpus="1x RTX A6000", args={})
    found = differences(identity(), identity(server, request, prompt="p2"), option_defaults(PARSER).get)
    assert found == [
        "prompt changed (hash p1 -> p2)", "max_tokens 512 -> 128", "temperature 0.6 -> 0.0", "seed 0 -> 7",
        "ignore_eos true -> false", "GPUs 2x RTX A6000 -> 1x RTX A6000", "model config.json abc -> def",
        "--tp-size 2 -> 1",
    ]


def test_an_exact_prompt_length_is_part_of_it() -> None:
    exact = RequestSettings(max_tokens=512, temperature=0.6, seed=0, prompt_tokens=2048)
    longer = RequestSettings(max_tokens=512, temperature=0.6, seed=0, prompt_tokens=8192)
    assert differences(identity(request=exact), identity(request=longer)) == ["prompt_tokens 2048 -> 8192"]
    assert differences(identity(), identity(request=exact)) == ["prompt_tokens none -> 2048"]
    assert CellIdentity.from_dict(json.loads(json.dumps(identity(request=exact).to_dict()))).prompt_tokens == 2048
    assert "prompt_tokens" not in identity().to_dict()  # entries of a test's own prompt read as before


def test_an_option_without_a_known_default_reads_not_set() -> None:
    server = ServerIdentity(model="m", model_config=None, gpus="cpu", args={"--custom": "1"})
    plain = ServerIdentity(model="m", model_config=None, gpus="cpu", args={})
    assert differences(identity(plain), identity(server)) == ["--custom (not set) -> 1"]


def test_resolved_args_are_spelling_independent_and_keep_no_secret() -> None:
    assert resolved_args(["--tp", "2"], PARSER) == resolved_args(["--tensor-parallel-size", "2"], PARSER)
    assert resolved_args(["--tp", "2", "--api-key", "sk-1"], PARSER) == {"--tp-size": "2"}
    assert resolved_args(["--enable-single-batch-overlap"], PARSER) == {"--enable-single-batch-overlap": "true"}
    assert resolved_args(["--no-such-flag"], PARSER) == {}


@pytest.mark.parametrize(("args", "count"), [
    ([], 1), (["--tp-size", "2"], 2), (["--tp", "2", "--dp-size", "2"], 4), (["--pp-size", "2", "--tp", "4"], 8),
    (["--attn-dp-size", "2", "--tp", "2"], 2), (["--bogus"], 1),
])
def test_gpus_used_is_tp_times_pp_times_dp(args: list[str], count: int) -> None:
    assert gpus_used(args, PARSER) == count


def _write(path: Path, entry_extra: dict[str, object]) -> None:
    entry = {"metrics": {}, "samples": [], "args": [], "prompt_hash": "h", "recorded_at": "t", "commit": None,
             "environment": {}, "params": REQUEST.to_dict(), **entry_extra}
    doc = {"schema_version": 1, "environment_key": "k", "environment": {}, "entries": {"t": {"v": entry}}}
    path.write_text(json.dumps(doc))


def test_a_baseline_entry_keeps_identity_and_boots(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    _write(path, {"identity": identity().to_dict(), "boots": []})
    [entry] = load_entries(path, "k").values()
    assert entry.identity == identity() and entry.boots == ()


@pytest.mark.parametrize(("extra", "problem"), [
    ({"identity": {"prompt_hash": "p"}}, "'identity' is malformed (missing key 'args')"),
    ({"identity": "x"}, "'identity' is malformed (expected an object"),
    ({"boots": {}}, "'boots' is malformed (expected a list"),
    ({"boots": [{"samples": -1}]}, "'boots' is malformed (a boot's 'samples' must be a count"),
    ({"boots": [{"samples": 2, "boot_seconds": 1.0}]}, "'boots' counts 2 samples, the entry holds 0"),
])
def test_a_malformed_identity_or_boots_names_the_entry(tmp_path: Path, extra: dict[str, object],
                                                      problem: str) -> None:
    path = tmp_path / "k.json"
    _write(path, extra)
    with pytest.raises(BaselineFileError) as info:
        load_entries(path, "k")
    assert "entry 't' variant 'v'" in str(info.value) and problem in str(info.value)
