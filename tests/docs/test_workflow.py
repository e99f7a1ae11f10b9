"""The GPU runner's workflow (.github/workflows/gpu-perf.yml), read as GitHub reads it: its triggers, its jobs, and
every command it runs (and tells a person to run) exists: `sglang-perf` subcommands in the CLI's parser, each
`--sglang-*` option in the plugin's options, pytest's own options in `pytest --help`, the install's extra in
pyproject.toml."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_sglang_perf.cli.main import _parser
from pytest_sglang_perf.pytest_plugin.options import _OPTIONS, UPDATE_NEW_FLAG

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "gpu-perf.yml"
BASELINE_SUBCOMMANDS = {"accept", "diff", "show", "validate", "prune"}
SHELL = {"echo", "cat", "cd", "test", "export"}
RUNNER_TOOLS = {"python3", "nvidia-smi"}
"""What the runner must have: the workflow's header comment says so."""
LAPTOP_TOOLS = {"gh": "GitHub CLI", "git": "checkout"}
"""What the refresh instructions expect on a laptop, and the words that say so."""
FAKE_CONTEXT = {"github.run_id": "4242", "github.repository": "me/project", "github.ref_name": "main"}


def _workflow() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return data


def _triggers(workflow: Mapping[Any, Any]) -> dict[str, Any]:
    """`on:` (YAML 1.1 reads the bare key `on` as true)."""
    on = workflow.get("on", workflow.get(True))
    assert isinstance(on, dict)
    return on


def _jobs() -> dict[str, Any]:
    jobs: dict[str, Any] = _workflow()["jobs"]
    return jobs


def _expand(value: str, job_inputs: Mapping[str, Any]) -> str:
    """`${{ inputs.x }}` as its default, `${{ github.y }}` as FAKE_CONTEXT says."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("inputs."):
            return str(job_inputs[name.removeprefix("inputs.")]["default"])
        return FAKE_CONTEXT[name]

    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", one, value)


def _inputs() -> dict[str, Any]:
    inputs: dict[str, Any] = _triggers(_workflow())["workflow_dispatch"]["inputs"]
    return inputs


def _commands(job: str) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """Each command line of the job's `run:` steps (folded lines joined, heredoc bodies left out), as words, with
    the step's environment variables and GitHub expressions filled in."""
    for step in _jobs()[job]["steps"]:
        if "run" not in step:
            continue
        env = {name: _expand(str(value), _inputs()) for name, value in (step.get("env") or {}).items()}
        heredoc_end = None
        for line in step["run"].splitlines():
            if heredoc_end is not None:
                heredoc_end = None if line.strip() == heredoc_end else heredoc_end
                continue
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            found = re.search(r"<<-?'?(\w+)'?", line)
            heredoc_end = found.group(1) if found else None
            words = shlex.split(os.path.expandvars(_substitute(line, env)))
            yield step, words


def _substitute(line: str, env: Mapping[str, str]) -> str:
    for name, value in env.items():
        line = line.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return line


def _sglang_perf_runs(job: str) -> list[list[str]]:
    return [words for _, words in _commands(job) if words[:2] == ["sglang-perf", "run"]]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


_LIST_OPTIONS = """
from _pytest.config import get_config
config = get_config()
config.pluginmanager.load_setuptools_entrypoints("pytest11")
groups = [config._parser._anonymous, *config._parser._groups]
print("\\n".join(name for group in groups for option in group.options for name in option.names()))
"""


@cache
def _pytest_options() -> frozenset[str]:
    """Every option string pytest and its installed plugins accept, aliases included (`pytest --help` shows one
    name of each), from a fresh interpreter outside the project."""
    out = subprocess.run([sys.executable, "-c", _LIST_OPTIONS], capture_output=True, text=True, check=True,
                         cwd=Path(os.sep)).stdout
    return frozenset(out.split())


def _check_sglang_perf(words: list[str]) -> None:
    """A `sglang-perf ...` line: the CLI parses it; `run`'s pytest arguments are real options of pytest and of the
    plugin, with values they accept, and its paths exist in the repository."""
    args = words[1:]
    if args[0] != "run":
        try:
            _parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"`{shlex.join(words)}`: the sglang-perf command does not accept it")
        return
    names = {f"--sglang-{name}": kind for name, kind, _ in _OPTIONS}
    for arg in args[1:]:
        if arg == "--real":
            continue
        option, _, value = arg.partition("=")
        if option.startswith("--sglang-"):
            assert option in names, f"{arg}: not an option of the plugin (pytest_plugin/options.py _OPTIONS)"
            if value:  # the only option written with =VALUE here: a flag of its own, whole
                assert arg == UPDATE_NEW_FLAG, f"{arg}: not an option of the plugin (pytest_plugin/options.py)"
        elif option.startswith("-"):
            assert option in _pytest_options(), f"{arg}: not an option of pytest"
        elif "/" in arg and not arg.endswith((".json", ".md", ".xml")):
            assert (ROOT / arg).exists(), f"{arg}: no such path in the repository"
    boots = [args[i + 1] for i, a in enumerate(args) if a == "--sglang-boots"]
    assert all(b.isdigit() and int(b) >= 1 for b in boots), boots


def _option_value(words: list[str], option: str) -> str:
    return words[words.index(option) + 1]


def test_triggers_and_jobs() -> None:
    workflow = _workflow()
    on = _triggers(workflow)
    assert set(on) == {"pull_request", "push", "workflow_dispatch"}
    assert on["push"]["branches"] == ["main"]
    inputs = on["workflow_dispatch"]["inputs"]
    assert inputs["mode"]["options"] == ["all", "new"] and inputs["mode"]["default"] == "all"
    assert int(inputs["boots"]["default"]) >= 1
    jobs = workflow["jobs"]
    assert set(jobs) == {"gate", "refresh-baselines"}
    gate, refresh = jobs["gate"]["if"], jobs["refresh-baselines"]["if"]
    assert "'push'" in gate and "'pull_request'" in gate and "workflow_dispatch" not in gate
    assert "head.repo.full_name == github.repository" in gate  # never a fork's code on the self-hosted runner
    assert refresh == "github.event_name == 'workflow_dispatch'"


def test_runs_on_the_documented_self_hosted_gpu_runner() -> None:
    header = WORKFLOW.read_text().split("\nname:", 1)[0]
    for job in _jobs().values():
        labels = job["runs-on"]
        assert labels[0] == "self-hosted" and "gpu" in labels
        assert all(f"`{label}`" in header for label in labels), "the header comment documents each label"
    assert all(tool in header for tool in RUNNER_TOOLS)
    assert "secret" in header


def test_actions_are_pinned_by_major_version() -> None:
    uses = [step["uses"] for job in _jobs().values() for step in job["steps"] if "uses" in step]
    assert set(uses) == {"actions/checkout@v4", "actions/upload-artifact@v4"}


@pytest.mark.parametrize("job", ["gate", "refresh-baselines"])
def test_every_command_exists(job: str) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for _, words in _commands(job):
        program = words[0]
        if program == "sglang-perf":
            _check_sglang_perf(words)
        elif program == ".venv/bin/python":
            assert words[1:3] == ["-m", "pip"]
            for spec in words[3:]:
                extra = re.fullmatch(r"\.\[([\w,-]+)\]", spec)
                assert extra is None or set(extra.group(1).split(",")) <= set(extras), spec
        else:
            assert program in SHELL | RUNNER_TOOLS, f"{program}: not a command the runner is documented to have"


def test_the_gate_fails_on_what_a_gate_must_not_let_through() -> None:
    [run] = _sglang_perf_runs("gate")
    assert "--real" in run or "--sglang-require-real" in run
    assert "--sglang-require-baselines" in run
    assert not any(arg.startswith("--sglang-update-baselines") for arg in run)


@pytest.mark.parametrize("job", ["gate", "refresh-baselines"])
def test_outputs_are_uploaded_even_when_the_run_fails(job: str) -> None:
    steps = _jobs()[job]["steps"]
    [upload] = [step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["if"] == "always()"
    paths = upload["with"]["path"].split()
    for run in _sglang_perf_runs(job):
        for option in ("--sglang-results", "--sglang-markdown", "--junitxml"):
            assert _option_value(run, option) in paths
        assert _option_value(run, "--sglang-log-dir").rstrip("/") + "/" in paths


def test_refresh_records_with_each_mode_and_the_boots_input() -> None:
    steps = [(step, words) for step, words in _commands("refresh-baselines") if words[:2] == ["sglang-perf", "run"]]
    modes = {}
    for step, words in steps:
        [flag] = [arg for arg in words if arg.startswith("--sglang-update-baselines")]
        modes[step["if"]] = flag
        assert _option_value(words, "--sglang-boots") == _inputs()["boots"]["default"]
        assert "--real" in words
    assert modes == {"inputs.mode == 'all'": "--sglang-update-baselines",
                     "inputs.mode == 'new'": "--sglang-update-baselines=new"}


def _summary_text(tmp_path: Path) -> str:
    """What the refresh job's last step appends to the job summary, by running it with bash."""
    step = _jobs()["refresh-baselines"]["steps"][-1]
    summary = tmp_path / "summary.md"
    env = {name: _expand(str(value), _inputs()) for name, value in step["env"].items()}
    subprocess.run(["bash", "-e", "-c", step["run"]], check=True, cwd=tmp_path,
                   env={"PATH": os.environ["PATH"], "GITHUB_STEP_SUMMARY": str(summary), **env})
    return summary.read_text()


def test_the_refresh_job_tells_a_person_how_to_accept_review_and_commit(tmp_path: Path) -> None:
    text = _summary_text(tmp_path)
    [block] = re.findall(r"~~~console\n(.*?)~~~", text, flags=re.S)
    commands = [shlex.split(line) for line in block.splitlines() if line.strip()]
    programs = [words[0] for words in commands]
    assert programs == ["gh", "sglang-perf", "sglang-perf", "git", "git"]
    download, accept, diff, add, commit = commands
    [refresh] = {_option_value(run, "--sglang-results") for run in _sglang_perf_runs("refresh-baselines")}
    artifact = _jobs()["refresh-baselines"]["steps"][-2]["with"]["name"]
    assert download[:3] == ["gh", "run", "download"] and "4242" in download
    assert _option_value(download, "--name") == artifact and _option_value(download, "--repo") == "me/project"
    assert accept[1:3] == ["baseline", "accept"]
    assert accept[3] == f"{_option_value(download, '--dir')}/{refresh}"
    assert diff[1:3] == ["baseline", "diff"]
    assert add == ["git", "add", "baselines/"] and commit[:2] == ["git", "commit"]
    for words in (accept, diff):
        _check_sglang_perf(words)
    for tool, said in LAPTOP_TOOLS.items():
        assert tool in programs and said in text
    assert "`" in text and "\\`" not in text  # the heredoc's escaped backticks came out as code spans
    accept_options = _subparsers(_subparsers(_parser())["baseline"])["accept"]._option_string_actions
    mentioned = set(re.findall(r"`(--[\w-]+)`", text))
    assert mentioned and mentioned <= set(accept_options), mentioned - set(accept_options)


def test_the_baseline_subcommands_the_instructions_use_exist() -> None:
    baseline = _subparsers(_parser()).get("baseline")
    assert baseline is not None, "sglang-perf has no `baseline` command"
    assert set(_subparsers(baseline)) >= BASELINE_SUBCOMMANDS
