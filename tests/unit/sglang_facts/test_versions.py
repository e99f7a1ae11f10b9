"""SGLang versions as data: each covered release's flag table (read from its wheel by tools/sglang_versions.py), the
history of every flag across them, and the version whose facts serve one that has none of its own."""

from __future__ import annotations

import json

import pytest

from pytest_sglang_perf.server.preflight import check_variant, suggest_for_message
from pytest_sglang_perf.sglang_facts.flag_history import HISTORY, FlagHistory, diff_tables, history_of, load_history
from pytest_sglang_perf.sglang_facts.flags import FlagSpec, FlagTable, load_flag_table, table_for
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser
from pytest_sglang_perf.sglang_facts.rules import load_rules, rules_note
from pytest_sglang_perf.sglang_facts.versions import DATA, covered, facts_version, version_key

RANGE = ["0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21",
         "0.5.22", "0.5.23"]
"""The releases a runner plausibly has (issue: at least 0.5.12 to 0.5.23)."""


def test_every_release_of_the_range_has_its_own_flag_table_dumped_from_its_wheel() -> None:
    assert set(RANGE) <= set(covered("flags"))
    for version in covered("flags"):
        table = load_flag_table(DATA / f"sglang-{version}-flags.json")
        assert table.sglang_version == version and len(table.options) > 300


def test_the_history_file_is_what_the_tables_say() -> None:
    """Regenerate with `python tools/sglang_versions.py history` after adding a table."""
    tables = [load_flag_table(DATA / f"sglang-{version}-flags.json") for version in covered("flags")]
    assert json.loads(HISTORY.read_text()) == history_of(tables).to_dict()


def test_release_numbers_sort_as_releases() -> None:
    assert sorted(["0.5.12.post1", "0.5.9", "0.5.12", "0.5.10.post1"], key=version_key) == \
        ["0.5.9", "0.5.10.post1", "0.5.12", "0.5.12.post1"]
    with pytest.raises(ValueError, match="not an SGLang release number"):
        version_key("main")


def test_the_seeds_flag_is_an_alias_of_tc_piecewise_in_its_era_and_gone_in_0_5_23() -> None:
    history = load_history()
    assert history is not None
    span = history.flags["--enforce-piecewise-cuda-graph"]
    assert (span.last, span.new_flag) == ("0.5.19", "--cuda-graph-backend-prefill=tc_piecewise")
    assert version_key(span.first) <= version_key("0.5.12")
    changes = diff_tables(table_for("0.5.19")[0], table_for("0.5.23")[0])
    assert "--enforce-piecewise-cuda-graph" in changes.removed
    assert "tc_piecewise" not in (changes.choices["--cuda-graph-backend-prefill"][1] or ())


def test_a_deprecated_alias_stores_what_its_release_stores() -> None:
    """0.5.19's --enforce-piecewise-cuda-graph sets the prefill backend to tc_piecewise (its const_value), so a
    variant that also says `--cuda-graph-backend-prefill disabled` is told which value wins, and that the flag is
    deprecated, with the replacement 0.5.19 names."""
    parser = flag_table_parser("0.5.19")
    namespace = parser.make().parse_args(["--model-path", "m", "--enforce-piecewise-cuda-graph"])
    assert namespace.cuda_graph_backend_prefill == "tc_piecewise"
    found = [f.message for f in check_variant("v", ["--cuda-graph-backend-prefill", "disabled",
                                                    "--enforce-piecewise-cuda-graph"], parser)]
    assert found == [
        "--cuda-graph-backend-prefill is given twice with different values ('disabled', then 'tc_piecewise' (by "
        "--enforce-piecewise-cuda-graph)); SGLang uses the last one: drop one of them",
        "--enforce-piecewise-cuda-graph is deprecated in SGLang 0.5.19: SGLang names "
        "--cuda-graph-backend-prefill=tc_piecewise instead"]


def test_an_unknown_flag_is_explained_by_the_releases_that_had_it() -> None:
    text = "error: unrecognized arguments: --enforce-piecewise-cuda-graph"
    [newer] = suggest_for_message(text, flag_table_parser("0.5.22"))
    assert newer == ("--enforce-piecewise-cuda-graph is gone after SGLang 0.5.19 (this is 0.5.22); there it was "
                     "deprecated for --cuda-graph-backend-prefill=tc_piecewise; 0.5.22's "
                     "--cuda-graph-backend-prefill has no tc_piecewise (it takes full, breakable, disabled)")
    [older] = suggest_for_message("error: unrecognized arguments: --attn-dp-size 2", flag_table_parser("0.5.21"))
    assert older == "--attn-dp-size is new in SGLang 0.5.22 (this is 0.5.21)"


def test_a_flag_that_left_and_came_back_is_explained_by_its_gap() -> None:
    def table(version: str, *flags: str) -> FlagTable:
        return FlagTable(version, "sglang serve", tuple(FlagSpec((flag,), flag[2:].replace("-", "_"), "store_true")
                                                         for flag in flags))
    tables = [table("0.5.1", "--a", "--back"), table("0.5.2", "--a"), table("0.5.3", "--a"),
              table("0.5.4", "--a", "--back")]
    history = FlagHistory.from_dict(history_of(tables).to_dict())
    assert history.flags["--back"].absent == ("0.5.2", "0.5.3")
    assert history.hint("--back", "0.5.3", {}) == "--back is not in SGLang 0.5.3: it left after SGLang 0.5.1 and " \
                                                  "came back in 0.5.4"
    assert history.hint("--a", "0.5.3", {}) == "SGLang 0.5.1 to 0.5.4 have --a, but this build of 0.5.3 does not"


def test_0_5_23s_rename_advice_is_given_only_with_0_5_23s_flags() -> None:
    text = "error: unrecognized arguments: --enforce-piecewise-cuda-graph"
    [hint] = suggest_for_message(text, flag_table_parser("0.5.23"))
    assert hint.startswith("--enforce-piecewise-cuda-graph was renamed: use --cuda-graph-backend-prefill breakable (")
    assert "there it was deprecated for --cuda-graph-backend-prefill=tc_piecewise" in hint
    [other] = suggest_for_message(text, flag_table_parser("0.5.22"))
    assert "breakable" not in other.split("(it takes")[0]


@pytest.mark.parametrize(("asked", "used", "note"), [
    ("0.5.19", "0.5.19", None),
    ("0.5.18.post3", "0.5.18", "SGLang 0.5.18.post3 has no flag table of its own here: that of 0.5.18, the "
                               "nearest older covered version, is used"),
    ("0.5.19rc1", "0.5.19", "SGLang 0.5.19rc1 has no flag table of its own here: that of 0.5.19, the nearest "
                            "older covered version, is used"),
    ("0.4.6", "0.5.10.post1", "SGLang 0.4.6 is older than every covered version (0.5.10.post1 to 0.5.23): "
                              "0.5.10.post1's flag table is used"),
])
def test_a_version_without_a_table_gets_the_nearest_older_ones_and_says_so(asked: str, used: str,
                                                                           note: str | None) -> None:
    chosen = facts_version(asked, "flags")
    assert (chosen.used, chosen.note) == (used, note)
    assert flag_table_parser(asked).note == note


def test_each_release_is_judged_by_rules_read_in_its_own_source_and_another_never_silently() -> None:
    """Rules files exist where a rule changes (docs/sglang-older-releases.md §1); a file's `holds_for` names the
    releases it was read against; any other release gets the nearest older file's, and a line saying so."""
    assert covered("rules") == ("0.5.12", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.19", "0.5.21", "0.5.22",
                                "0.5.23")
    for release in ("0.5.12", "0.5.12.post1", "0.5.13", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19",
                    "0.5.20", "0.5.21", "0.5.22", "0.5.23"):
        assert rules_note(release) is None and release in load_rules(release).holds_for
    assert load_rules("0.5.17").sglang_version == "0.5.16" and load_rules("0.5.20").sglang_version == "0.5.19"
    assert rules_note("0.5.18.post3") == ("SGLang 0.5.18.post3 has no rules of its own here: those of 0.5.16, the "
                                          "nearest older covered version, are used")
    assert rules_note("0.5.11") == ("SGLang 0.5.11 is older than every covered version (0.5.12 to 0.5.23): "
                                    "0.5.12's rules are used")


def test_dp_attention_before_0_5_22_adds_no_gpu_and_divides_the_request_cap() -> None:
    """Before 0.5.22, `--dp-size N --enable-dp-attention` splits the tensor-parallel group (no GPU added) and each
    scheduler gets max_running_requests // N; without DP attention each replica adds GPUs and gets the whole cap."""
    from pytest_sglang_perf.server.effective import expected_value
    from pytest_sglang_perf.sglang_facts.resolved import gpus_used

    parser = flag_table_parser("0.5.19")
    assert gpus_used(["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], parser) == 2
    assert gpus_used(["--tp-size", "2", "--dp-size", "2"], parser) == 4
    assert gpus_used(["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"], flag_table_parser("0.5.13")) == 2
    rules = load_rules("0.5.19")
    assert expected_value("max_running_requests", 64, {"dp_size": 2, "enable_dp_attention": True}, rules) == 32
    assert expected_value("max_running_requests", 64, {"dp_size": 2, "enable_dp_attention": False}, rules) == 64
    assert expected_value("max_running_requests", 64, {"attn_dp_size": 2}, load_rules("0.5.23")) == 32
