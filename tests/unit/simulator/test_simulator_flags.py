"""The simulator's SGLang command line, built from a flag table (a small one here, and the real one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE, FlagTable, FlagTableError, load_flag_table
from pytest_sglang_perf.simulator.args.command_line import build_parser


def _option(flags: list[str], dest: str, action: str = "store", **extra: Any) -> dict[str, Any]:
    base = {"flags": flags, "dest": dest, "action": action, "type": None, "nargs": None, "choices": None,
            "default": None, "required": False}
    return {**base, **extra}


SMALL_TABLE = {
    "sglang_version": "0.5.23",
    "prog": "sglang serve",
    "options": [
        _option(["--model-path", "--model"], "model_path", type="str", required=True),
        _option(["--tp-size", "--tensor-parallel-size"], "tp_size", type="int", default=1),
        _option(["--cuda-graph-max-bs-decode"], "cuda_graph_max_bs_decode", type="int"),
        _option(["--cuda-graph-max-bs-prefill"], "cuda_graph_max_bs_prefill", type="int"),
        _option(["--cuda-graph-backend-prefill"], "cuda_graph_backend_prefill", type="parse_cuda_graph_backend_arg",
                choices=["full", "breakable", "disabled"]),
        _option(["--enable-single-batch-overlap"], "enable_single_batch_overlap", "store_true", default=False),
        _option(["--cuda-graph-bs-decode"], "cuda_graph_bs_decode", type="int", nargs="+"),
        _option(["--max-total-tokens"], "max_total_tokens", type="human_readable_int"),
        _option(["--preferred-sampling-params"], "preferred_sampling_params", type="loads"),
        _option(["--strange"], "strange", type="some_unknown_callable"),
        _option(["--lora-strict-loading", "--no-lora-strict-loading"], "lora_strict_loading", "boolean_optional",
                default=False),
        _option(["--disable-cuda-graph"], "disable_cuda_graph", "store_true", default=False, deprecated=True,
                action_class="DeprecatedStoreTrueAction"),
    ],
}


@pytest.fixture()
def table() -> FlagTable:
    return FlagTable.from_dict(SMALL_TABLE)


def _parse_error(table: FlagTable, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        build_parser(table).parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_unknown_flag_exits_2_with_argparse_message(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--model-path", "m", "--enforce-piecewise-cuda-graph"], capsys)
    assert "sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph" in err


def test_ambiguous_prefix_exits_2(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--model-path", "m", "--cuda-graph-max-bs", "8"], capsys)
    assert "ambiguous option: --cuda-graph-max-bs could match" in err
    assert "--cuda-graph-max-bs-decode" in err and "--cuda-graph-max-bs-prefill" in err


def test_unique_prefix_is_accepted_like_sglang(table: FlagTable) -> None:
    args = build_parser(table).parse_args(["--model-path", "m", "--cuda-graph-max-bs-d", "8"])
    assert args.cuda_graph_max_bs_decode == 8


def test_choices_are_enforced(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--model-path", "m", "--cuda-graph-backend-prefill", "piecewise"], capsys)
    assert "argument --cuda-graph-backend-prefill: invalid choice: 'piecewise'" in err


def test_removed_backend_gets_sglang_message(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--model-path", "m", "--cuda-graph-backend-prefill", "tc_piecewise"], capsys)
    assert "tc_piecewise was removed; select breakable, full, or disabled" in err


def test_store_true_takes_no_value(table: FlagTable) -> None:
    parser = build_parser(table)
    assert parser.parse_args(["--model-path", "m"]).enable_single_batch_overlap is False
    args = parser.parse_args(["--model-path", "m", "--enable-single-batch-overlap"])
    assert args.enable_single_batch_overlap is True


def test_required_model_path(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--tp-size", "2"], capsys)
    assert "the following arguments are required: --model-path/--model" in err


def test_alias_types_nargs_and_defaults(table: FlagTable) -> None:
    args = build_parser(table).parse_args(
        ["--model", "m", "--tensor-parallel-size", "2", "--cuda-graph-bs-decode", "1", "2", "4",
         "--max-total-tokens", "4Ki", "--preferred-sampling-params", '{"temperature": 0.5}', "--strange", "x"])
    assert (args.model_path, args.tp_size, args.cuda_graph_bs_decode) == ("m", 2, [1, 2, 4])
    assert args.max_total_tokens == 4096
    assert args.preferred_sampling_params == {"temperature": 0.5}
    assert args.strange == "x"
    assert args.cuda_graph_max_bs_decode is None


def test_bad_int_value(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(table, ["--model-path", "m", "--tp-size", "two"], capsys)
    assert "argument --tp-size/--tensor-parallel-size: invalid int value: 'two'" in err


def test_boolean_optional_pair(table: FlagTable) -> None:
    parser = build_parser(table)
    assert parser.parse_args(["--model-path", "m", "--lora-strict-loading"]).lora_strict_loading is True
    assert parser.parse_args(["--model-path", "m", "--no-lora-strict-loading"]).lora_strict_loading is False


def test_deprecated_flag_warns_and_stores_true(table: FlagTable, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser(table).parse_args(["--model-path", "m", "--disable-cuda-graph"])
    assert args.disable_cuda_graph is True
    assert "'--disable-cuda-graph' is deprecated and will be removed in a future release." in capsys.readouterr().err


def test_sim_knobs_are_added(table: FlagTable) -> None:
    args = build_parser(table).parse_args(["--model-path", "m", "--sim-slowdown", "0.2"])
    assert args.sim_slowdown == pytest.approx(0.2)
    assert args.sim_decode_tok_s is None


def test_help_lists_the_knobs(table: FlagTable) -> None:
    text = build_parser(table).format_help()
    assert "--sim-noise" in text and "SGLANG_SIM_SLOWDOWN" in text and "--model-path" in text


def test_defaults_follow_table_order(table: FlagTable) -> None:
    defaults: dict[str, Any] = {}
    for spec in table.options:  # the first option of a dest gives its default
        defaults.setdefault(spec.dest, spec.default)
    assert list(defaults)[:3] == ["model_path", "tp_size", "cuda_graph_max_bs_decode"]
    assert defaults["tp_size"] == 1


def test_load_flag_table_from_path(tmp_path: Path) -> None:
    path = tmp_path / "flags.json"
    path.write_text(json.dumps(SMALL_TABLE))
    loaded = load_flag_table(path)
    assert loaded.prog == "sglang serve" and len(loaded.options) == len(SMALL_TABLE["options"])


def test_load_flag_table_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(FlagTableError, match=r"not found: .*missing\.json"):
        load_flag_table(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"options": [{"flags": ["--x"]}]}')
    with pytest.raises(FlagTableError, match=r"malformed SGLang flag table .*bad\.json"):
        load_flag_table(bad)


@pytest.mark.skipif(not DEFAULT_TABLE.exists(), reason="the real SGLang flag table is not generated yet")
class TestRealTable:
    def test_parses_the_perf_suite_flags(self) -> None:
        argv = ["--model-path", "m", "--tp-size", "2", "--speculative-algorithm", "NEXTN",
                "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                "--random-seed", "0", "--cuda-graph-backend-prefill", "breakable", "--enable-single-batch-overlap"]
        args = build_parser(load_flag_table()).parse_args(argv)
        assert (args.tp_size, args.speculative_algorithm, args.speculative_num_draft_tokens) == (2, "NEXTN", 4)
        assert args.enable_single_batch_overlap is True

    @pytest.mark.parametrize(("flag", "message"), [
        ("--cuda-graph-max-bs", "ambiguous option: --cuda-graph-max-bs could match"),
        ("--enforce-piecewise-cuda-graph", "unrecognized arguments: --enforce-piecewise-cuda-graph"),
        ("--disable-piecewise-cuda-graph", "unrecognized arguments: --disable-piecewise-cuda-graph"),
    ])
    def test_old_flag_names_fail_like_sglang(self, flag: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
        argv = ["--model-path", "m", flag] + (["8"] if flag == "--cuda-graph-max-bs" else [])
        err = _parse_error(load_flag_table(), argv, capsys)
        assert message in err
