"""The simulator's command line against SGLang 0.5.23's own parser (`argparse.ArgumentParser(prog="sglang serve")` +
`ServerArgs.add_cli_args`, as `prepare_server_args` builds it): same verdict, exit code, messages and parsed values
for a corpus of command lines; the same parser structure; and a flag table that is still what the installed SGLang
gives.

Known, deliberate differences (asserted where they show):
- `--help` output: the flag table holds no help texts; the simulator lists the options and its `--sim-*` knobs.
- `--sampling-backend` choices: SGLang keeps them in a `set`, so their order in its usage line and error message
  changes from process to process; they are compared as sets.
- `--sim-*` knobs exist only in the simulator (parsed first, by exact name, so they never change SGLang's messages).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

RunScript = Callable[..., Any]
REPO = Path(__file__).resolve().parents[3]
TABLE_FILE = REPO / "pytest_sglang_perf" / "sglang_facts" / "data" / "sglang-0.5.23-flags.json"
TOOL = REPO / "tools" / "extract_sglang_flags.py"
MODEL = "/models/Qwen3.6-27B"
SEED_MATRIX = ("--tp-size", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--random-seed", "0")
CONFIG_YAML = """\
tp-size: 2
enable-single-batch-overlap: true
disable-overlap-schedule: false
cuda-graph-bs-decode: [1, 2, 4]
cuda-graph-config: {decode: {backend: full, max_bs: 64}}
speculative-algorithm: NEXTN
"""


@dataclass(frozen=True)
class Line:
    id: str
    args: tuple[str, ...]
    exit: int
    """SGLang's verdict: 0 parsed, 2 argparse error, 1 an exception out of the parse step."""
    needs_model_path: bool = True
    needs: str | None = None
    """A module the line needs in SGLang's environment (`yaml` for --config)."""

    def argv(self, config_dir: Path) -> list[str]:
        head = ["--model-path", MODEL] if self.needs_model_path else []
        return head + [arg.replace("{dir}", str(config_dir)) for arg in self.args]


CORPUS = (
    # accepted
    Line("model-only", (), 0),
    Line("seed-matrix", SEED_MATRIX, 0),
    Line("seed-prefill-graph", (*SEED_MATRIX, "--cuda-graph-backend-prefill", "breakable"), 0),
    Line("seed-single-batch-overlap", (*SEED_MATRIX, "--enable-single-batch-overlap"), 0),
    Line("language-only", ("--language-only",), 0),
    Line("nccl-nvls", ("--enable-nccl-nvls",), 0),
    Line("deprecated-disable-cuda-graph", ("--disable-cuda-graph",), 0),
    Line("deprecated-dp-attention", ("--enable-dp-attention", "--dp-size", "2"), 0),
    Line("deprecated-monokernel", ("--monokernel-backend", "amd"), 0),
    Line("aliases", ("--tensor-parallel-size", "2", "--speculative-draft-model", "/d"), 0),
    Line("alias-model", ("--model", MODEL, "--port=30001"), 0, needs_model_path=False),
    Line("unique-prefix", ("--cuda-graph-max-bs-d", "8", "--cuda-graph-backend-pre", "disabled"), 0),
    Line("cuda-graph-json", ("--cuda-graph-config",
                             '{"decode":{"backend":"full","max_bs":256},"prefill":{"backend":"breakable"}}'), 0),
    Line("nargs-plus", ("--cuda-graph-bs-decode", "1", "2", "4", "8", "--encoder-urls", "http://a", "http://b"), 0),
    Line("human-readable-ints", ("--max-total-tokens", "4Ki", "--max-prefill-tokens", "4.35k",
                                 "--context-length", "32k"), 0),
    Line("boolean-optional", ("--no-lora-strict-loading", "--enable-tf32-matmul"), 0),
    Line("lora-paths", ("--lora-paths", '{"lora_name": "a", "lora_path": "/p"}', "b=/q"), 0),
    Line("nargs-optional-const", ("--model-checksum",), 0),
    Line("json-types", ("--preferred-sampling-params", '{"temperature": 0.5}', "--sidecar-args", "[1, 2]"), 0),
    Line("spec-bogus-name", ("--speculative-algorithm", "bogus"), 0),
    Line("spec-partial-triple", ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3"), 0),
    Line("cpu-dummy", ("--device", "cpu", "--load-format", "dummy", "--chunked-prefill-size", "-1"), 0),
    Line("logging", ("--log-level", "debug", "--decode-log-interval", "10", "--enable-metrics"), 0),
    Line("config-file", ("--config", "{dir}/server.yaml", "--tp-size", "4"), 0, needs="yaml"),
    Line("help", ("--help",), 0),
    # rejected by argparse
    Line("enforce-piecewise", ("--enforce-piecewise-cuda-graph",), 2),
    Line("disable-piecewise", ("--disable-piecewise-cuda-graph",), 2),
    Line("ambiguous-max-bs", ("--cuda-graph-max-bs", "8"), 2),
    Line("ambiguous-s", ("--s", "1"), 2),
    Line("prefix-of-sim-knobs", ("--sim", "1"), 2),
    Line("abbreviated-sim-knob", ("--sim-gp", "H200"), 2),  # knobs only by their full names: SGLang's error stays
    Line("abbreviated-fault-knob", ("--sim-faul=no-usage",), 2),
    Line("removed-backend", ("--cuda-graph-backend-prefill", "tc_piecewise"), 2),
    Line("removed-backend-in-json", ("--cuda-graph-config", '{"prefill": {"backend": "tc_piecewise"}}'), 2),
    Line("bad-backend-choice", ("--cuda-graph-backend-decode", "piecewise"), 2),
    Line("bad-load-format", ("--load-format", "nope"), 2),
    Line("bad-int", ("--tp-size", "two"), 2),
    Line("bad-float", ("--mem-fraction-static", "0.8x"), 2),
    Line("bad-human-int", ("--max-total-tokens", "lots"), 2),
    Line("iec-decimal", ("--max-total-tokens", "4.5Ki"), 2),
    Line("bad-nargs-item", ("--cuda-graph-bs-decode", "1", "2", "x"), 2),
    Line("nargs-plus-empty", ("--encoder-urls",), 2),
    Line("missing-value", ("--speculative-num-steps",), 2),
    Line("store-true-with-value", ("--enable-single-batch-overlap", "yes"), 2),
    Line("cuda-graph-json-list", ("--cuda-graph-config", "[1]"), 2),
    Line("cuda-graph-json-phase", ("--cuda-graph-config", '{"verify": {}}'), 2),
    Line("cuda-graph-json-key", ("--cuda-graph-config", '{"decode": {"max_bs": 8, "zzz": 1}}'), 2),
    Line("cuda-graph-json-syntax", ("--cuda-graph-config", "{decode}"), 2),
    Line("json-list-syntax", ("--sidecar-args", "[1,"), 2),
    Line("loads-syntax", ("--preferred-sampling-params", "{bad"), 2),
    Line("bad-monokernel", ("--monokernel-backend", "nvidia"), 2),
    Line("bad-sampling-backend", ("--sampling-backend", "nope"), 2),
    Line("no-model-path", ("--tp-size", "2"), 2, needs_model_path=False),
    Line("unknown-negated", ("--no-enable-nccl-nvls",), 2),
    Line("config-underscore-key", ("--config", "{dir}/underscore.yaml"), 2, needs="yaml"),
    # an exception out of the parse step (a traceback and exit code 1 in a real launch)
    Line("lora-json-without-keys", ("--lora-paths", '{"lora_name": "a"}'), 1),
    Line("config-missing-file", ("--config", "{dir}/missing.yaml"), 1, needs="yaml"),
    Line("config-not-yaml", ("--config", "{dir}/server.json"), 1, needs="yaml"),
    Line("config-unsupported-option", ("--config", "{dir}/deprecated.yaml"), 1, needs="yaml"),
)


def _write_configs(directory: Path) -> None:
    (directory / "server.yaml").write_text(CONFIG_YAML, encoding="utf-8")
    (directory / "server.json").write_text("{}", encoding="utf-8")
    (directory / "deprecated.yaml").write_text("disable-cuda-graph: true\n", encoding="utf-8")
    (directory / "underscore.yaml").write_text("speculative_algorithm: NEXTN\n", encoding="utf-8")


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("configs")
    _write_configs(directory)
    return directory


@pytest.fixture(scope="module")
def answer(run_script: RunScript, config_dir: Path) -> dict[str, Any]:
    """Both parsers on the corpus, their structure, and the regenerated flag table: one fresh interpreter."""
    request = {"lines": [line.argv(config_dir) for line in CORPUS], "parsers": True, "table": str(TOOL)}
    result: dict[str, Any] = run_script("parse_both.py", request)
    return result


@pytest.fixture(scope="module")
def parsed(answer: Mapping[str, Any]) -> dict[str, Any]:
    """{"results": {line id: {"sglang": outcome, "simulator": outcome}}, "unordered": [choice sets]}."""
    results = dict(zip((line.id for line in CORPUS), answer["lines"]["results"], strict=True))
    return {"results": results, "unordered": [frozenset(c) for c in answer["lines"]["unordered"]]}


def _sorted_sets(text: str, unordered: Iterable[frozenset[str]]) -> str:
    """Choice lists SGLang keeps in a set, in sorted order: `{b,a}` -> `{a,b}`, `(choose from 'b', 'a')` likewise."""
    sets = list(unordered)

    def braces(match: re.Match[str]) -> str:
        items = match[1].split(",")
        return "{" + ",".join(sorted(items)) + "}" if frozenset(items) in sets else match[0]

    def choose(match: re.Match[str]) -> str:
        items = [item.strip().strip("'") for item in match[1].split(",")]
        listed = ", ".join(f"'{item}'" for item in sorted(items))
        return f"(choose from {listed})" if frozenset(items) in sets else match[0]

    return re.sub(r"\(choose from ([^()]*)\)", choose, re.sub(r"\{([^{}\s]*)\}", braces, text))


def _diff(expected: str, actual: str) -> str:
    return "\n".join(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "sglang", "simulator",
                                          lineterm="", n=1))


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def test_corpus_is_broad() -> None:
    verdicts = [line.exit for line in CORPUS]
    assert len(CORPUS) >= 30 and verdicts.count(0) >= 10 and verdicts.count(2) >= 10 and 1 in verdicts
    assert len({line.id for line in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("line", CORPUS, ids=lambda line: line.id)
def test_line_parses_like_sglang(line: Line, parsed: Mapping[str, Any], require: Callable[..., None]) -> None:
    if line.needs is not None:
        require(line.needs, f"command line {line.id!r}")
    result = parsed["results"][line.id]
    sglang, sim = result["sglang"], result["simulator"]
    assert sglang["exit"] == line.exit, f"SGLang's own verdict changed for {line.args}: {_last_line(sglang['stderr'])}"
    assert sim["exit"] == sglang["exit"], (
        f"exit {sim['exit']} != SGLang's {sglang['exit']}: {_last_line(sim['stderr'])} | SGLang: "
        f"{_last_line(sglang['stderr'])}")
    if line.exit == 1:
        assert _last_line(sim["stderr"]) == _last_line(sglang["stderr"])
        return
    unordered = parsed["unordered"]
    expected, actual = _sorted_sets(sglang["stderr"], unordered), _sorted_sets(sim["stderr"], unordered)
    assert actual == expected, f"stderr differs:\n{_diff(expected, actual)}"
    if line.id == "help":  # no help texts in the flag table: only the usage line can match
        assert sim["stdout"].startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
        assert "--sim-decode-tok-s" in sim["stdout"]
        return
    assert sim["stdout"] == sglang["stdout"]
    assert sim["args"] == sglang["args"]


def test_parser_structure_matches_sglang(answer: Mapping[str, Any]) -> None:
    """Every option: flags, dest, nargs, const, default, choices, required, type name, hidden or not; and the
    parser's own settings (prog, allow_abbrev, ...). The simulator side is its SGLang-only parser (knobs apart)."""
    both = answer["parsers"]
    assert both["simulator"]["settings"] == both["sglang"]["settings"]
    sglang = {tuple(a["option_strings"]): a for a in both["sglang"]["actions"]}
    sim = {tuple(a["option_strings"]): a for a in both["simulator"]["actions"]}
    assert sorted(set(sim) - set(sglang)) == [] and sorted(set(sglang) - set(sim)) == []
    assert list(sim) == list(sglang), "options are registered in a different order (usage and ambiguity lists differ)"
    different = {flags: {key: (sglang[flags][key], sim[flags][key]) for key in sglang[flags]
                         if sglang[flags][key] != sim[flags][key]}
                 for flags in sglang if sglang[flags] != sim[flags]}
    assert different == {}, f"(sglang, simulator) per option: {different}"


def _normalised(table: Mapping[str, Any], unordered: Sequence[str]) -> dict[str, Any]:
    options = [{**option, "choices": sorted(option["choices"])} if option["dest"] in unordered else option
               for option in table["options"]]
    return {**table, "options": options}


def test_flag_table_is_current(answer: Mapping[str, Any]) -> None:
    """tools/extract_sglang_flags.py run against the installed SGLang writes the table file we ship."""
    fresh, unordered = answer["table"]["table"], answer["table"]["unordered_dests"]
    stored = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
    version = fresh["sglang_version"]
    regenerate = (f"regenerate it with `python tools/extract_sglang_flags.py > "
                  f"pytest_sglang_perf/sglang_facts/data/sglang-{version}-flags.json` in this environment (and point "
                  f"pytest_sglang_perf/sglang_facts/flags.py DEFAULT_TABLE at it)")
    assert stored["sglang_version"] == version, (
        f"{TABLE_FILE.name} is for SGLang {stored['sglang_version']}, the installed SGLang is {version}: {regenerate}")
    new, old = _by_flags(_normalised(fresh, unordered)), _by_flags(_normalised(stored, unordered))
    changed = sorted(key for key in new.keys() & old.keys() if new[key] != old[key])
    assert (sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys()), changed) == ([], [], []), (
        f"(added, removed, changed) options; {regenerate}")
    assert _normalised(stored, unordered) == _normalised(fresh, unordered), f"option order differs; {regenerate}"


def _by_flags(table: Mapping[str, Any]) -> dict[str, Any]:
    return {f"{option['dest']} {' '.join(option['flags'])}": option for option in table["options"]}
