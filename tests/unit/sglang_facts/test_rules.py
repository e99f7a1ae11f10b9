"""sglang_facts.rules: the rules file read into typed data, strictly (every key read, clear errors)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.sglang_facts.rules import DATA, RulesError, SGLangRules, load_rules, read_rules

SHIPPED = DATA / "sglang-0.5.23-rules.json"


def _assert_read(raw: Any, typed: Any, where: str) -> None:
    """Every key and value of the JSON `raw` is in `typed` (attributes of a dataclass, or entries of a mapping)."""
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key == "_comment":
                continue
            assert isinstance(typed, Mapping) or hasattr(typed, key), f"{where}.{key} was not read"
            _assert_read(value, typed[key] if isinstance(typed, Mapping) else getattr(typed, key), f"{where}.{key}")
    elif isinstance(raw, list):
        assert isinstance(typed, tuple) and len(typed) == len(raw), where
        for i, (value, item) in enumerate(zip(raw, typed, strict=True)):
            _assert_read(value, item, f"{where}[{i}]")
    elif isinstance(typed, re.Pattern):
        assert typed.pattern == raw, where
    else:
        assert (type(typed), typed) == (type(raw), raw), where


def test_every_key_of_the_shipped_rules_is_in_the_typed_rules() -> None:
    raw = json.loads(SHIPPED.read_text())
    rules = load_rules("0.5.23")
    _assert_read(raw, rules, "rules")
    assert rules.file == SHIPPED
    assert rules.effective_fields["speculative_algorithm"].aliases == {"NEXTN": "EAGLE"}
    assert rules.effective_fields["disable_cuda_graph"].requested == "disabled"
    assert rules.default_optimizations[1].skipped_at_capture is False  # optional keys take their defaults


def test_a_version_without_rules_reads_those_of_0_5_23_once() -> None:
    assert load_rules("9.9.9") == load_rules("0.5.23")
    assert load_rules("0.5.23") is load_rules("0.5.23")


def test_topic_is_the_dest_unless_effective_fields_groups_it() -> None:
    rules = load_rules("0.5.23")
    assert rules.topic_of("cuda_graph_max_bs_decode") == "decode_cuda_graph"
    assert rules.topic_of("speculative_algorithm") == "speculative_algorithm"  # listed, without a topic
    assert rules.topic_of("chunked_prefill_size") == "chunked_prefill_size"  # not listed


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        node: Any = data
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value

    return change


def _drop(path: tuple[str | int, ...]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        node: Any = data
        for step in path[:-1]:
            node = node[step]
        del node[path[-1]]

    return change


@pytest.mark.parametrize(("change", "key", "problem"), [
    (_drop(("all_or_none", 0, "when")), "all_or_none[0].when", "missing"),
    (_set(("requires", 0, "needs_any"), "--attn-dp-size"), "requires[0].needs_any", "must be a list of strings"),
    (_set(("fatal_on_gpu", 0, "sm"), ["90"]), "fatal_on_gpu[0].sm", "must be a list of integers"),
    (_set(("gpu_sm", "H100"), True), "gpu_sm", "must be an object of integers"),
    (_set(("boot_hints", 1, "pattern"), "(unclosed"), "boot_hints[1].pattern", "not a regular expression"),
    (_set(("effective_fields", "max_running_requests", "divide_by"), "dp_size"),
     "effective_fields.max_running_requests.divide_by", "unknown key"),
    (_set(("effective_fields", "enable_dp_attention", "paths"), [[]]), "effective_fields.enable_dp_attention.paths",
     "must be a non-empty list of paths"),
    (_set(("effective_fields", "disable_cuda_graph", "requested"), None),
     "effective_fields.disable_cuda_graph.requested", "must be a string, number or boolean"),
    (_set(("default_optimizations", 2, "off"), []), "default_optimizations[2].off", "must be a non-empty list"),
    (_set(("resolution_messages", 0), "^Breakable"), "resolution_messages[0]", "must be a JSON object"),
    (_set(("secret_feilds",), ["api_key"]), "secret_feilds", "unknown key"),
])
def test_a_malformed_rules_file_names_the_file_and_the_key(tmp_path: Path, change: Callable[[dict[str, Any]], None],
                                                           key: str, problem: str) -> None:
    data = copy.deepcopy(json.loads(SHIPPED.read_text()))
    change(data)
    path = tmp_path / "sglang-0.5.23-rules.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RulesError) as caught:
        read_rules(path)
    assert str(caught.value).startswith(f"malformed SGLang rules file {path}: {key}: {problem}")


def test_a_rules_file_that_is_not_json_or_missing_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text("{not json")
    with pytest.raises(RulesError, match=f"the SGLang rules file {re.escape(str(path))} is not JSON"):
        read_rules(path)
    with pytest.raises(RulesError, match=f"cannot read the SGLang rules file {re.escape(str(tmp_path / 'gone'))}"):
        read_rules(tmp_path / "gone")


def test_comments_are_skipped_everywhere_and_every_key_is_optional(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"_comment": "top", "renamed_flags": {"_comment": "a map", "--a": "--b"},
                                "effective_fields": {"_comment": "dests", "x": {"_comment": "one", "paths": [["x"]]}}}))
    rules = read_rules(path)
    assert rules.renamed_flags == {"--a": "--b"}
    assert list(rules.effective_fields) == ["x"] and rules.effective_fields["x"].paths == (("x",),)
    assert (rules.boot_hints, rules.secret_fields, rules.sglang_version) == ((), (), None)
    assert isinstance(rules, SGLangRules)
