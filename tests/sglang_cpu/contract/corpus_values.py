"""A representative command line for each flag of SGLang's flag table, for the corpus test (test_flag_corpus.py).

Plain Python: `corpus_args(spec)` gives the arguments that set one flag to a value other than its default, or None
when the table gives nothing to vary (a choice list of one, a flag the head of every command line already sets).
"""

from __future__ import annotations

from pytest_sglang_perf.sglang_facts.flags import FlagSpec

HEAD_DESTS = {"model_path", "device", "help"}
"""Set by every command line's head (the tiny model, --device cpu), or not a flag."""
VALUES = {
    "str": "sglang-perf-corpus", "nullable_str": "sglang-perf-corpus", "loads": "{}", "json_list_type": "[]",
    "human_readable_int": "4096",
}
"""A plain value for each argparse type the table names, where the default gives no better one."""
DEST_VALUES = {
    "log_level": "warning", "log_level_http": "warning", "cuda_graph_config": '{"decode": {"max_bs": 8}}',
    "json_model_override_args": '{"max_position_embeddings": 2048}', "speculative_algorithm": "NGRAM",
}
"""Flags whose plain value means nothing to SGLang (a log level, a JSON document, an algorithm's name)."""


def corpus_args(spec: FlagSpec) -> list[str] | None:
    """The arguments that set `spec`'s flag to a non-default value; None when there is none to set."""
    if spec.dest in HEAD_DESTS:
        return None
    flag = spec.flags[0]
    if spec.action in ("store_true", "boolean_optional"):
        return [flag]
    value = _value(spec)
    if value is None:
        return None
    return [flag, value]


def _value(spec: FlagSpec) -> str | None:
    if spec.dest in DEST_VALUES:
        return DEST_VALUES[spec.dest]
    if spec.choices:
        other = [str(choice) for choice in spec.choices if str(choice) != str(spec.default)]
        return other[0] if other else None
    if spec.type == "int":
        return str(spec.default + 1 if isinstance(spec.default, int) and not isinstance(spec.default, bool) else 2)
    if spec.type == "float":
        return str(spec.default / 2 if isinstance(spec.default, float) and spec.default else 0.5)
    return VALUES.get(spec.type or "str", "sglang-perf-corpus")
