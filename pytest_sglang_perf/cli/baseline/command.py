"""`sglang-perf baseline show|diff|accept|validate|prune`: the command line of the baseline tools (cli/main.py wires
`sglang-perf baseline` here). Each subcommand's work lives in its own module; every one exits 2 on bad input (a
flag, a configuration or an input it cannot use: the message names it and the fix), except that `show` and
`validate` name a baseline file they cannot use and exit 1: finding such files is part of their job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_sglang_perf.errors import SGLangPerfError

_CONFIG_HELP = "sglang-perf.toml or pyproject.toml to read (default: the nearest one from this directory up)"
_DIR_HELP = "baseline directory (default: the configuration's baseline_dir, else ./baselines)"


def add_baseline_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    baseline = sub.add_parser("baseline", help="baselines as reviewed artifacts: show, diff, accept, validate, prune",
                              description="Baseline files as reviewed artifacts: look at them, diff them, accept "
                                          "results files from CI runs into them, validate and prune them.")
    tools = baseline.add_subparsers(dest="baseline_command", required=True)
    show = tools.add_parser("show", help="a table per baseline file: medians with units, n, age, commit, source",
                            description="A table per baseline file (environment key, model, versions), per test x "
                                        "variant: the metrics' medians in their units, requests and boots, when it "
                                        "was recorded and its age (OLD past baseline_max_age), commit and source.")
    _dir_and_config(show)
    _add_diff(tools)
    _add_accept(tools)
    validate = tools.add_parser("validate", help="check baseline files (schema, consistency, age) for CI; exit 1 on "
                                                 "an error",
                                description="Every file parses, its environment_key matches its name, each entry's "
                                            "summaries agree with its samples, boots add up, params match identity; "
                                            "entries older than baseline_max_age are warnings.")
    validate.add_argument("paths", type=Path, nargs="*", metavar="PATH",
                          help="baseline files or folders (default: the configuration's baseline_dir)")
    validate.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)
    prune = tools.add_parser("prune", help="entries whose test or variant no longer exists (a dry run unless "
                                           "--apply)",
                             description="Collects the tests with pytest (no server boots) in the project's root, "
                                         "and lists the entries whose variant the configuration no longer names or "
                                         "whose test is no longer collected; --apply removes them.")
    prune.add_argument("paths", nargs="*", metavar="PATHS", help="test paths to collect (default: pytest's default)")
    _dir_and_config(prune)
    prune.add_argument("--apply", action="store_true", help="remove the entries (default: only list them)")
    prune.add_argument("--all", action="store_true", dest="everything",
                       help="with --apply: allow removing every entry (refused otherwise)")


def _dir_and_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, default=None, help=_DIR_HELP)
    parser.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP)


def _add_diff(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    diff = tools.add_parser(
        "diff", help="OLD -> NEW per cell and metric: medians, change, noise band, the gate's verdict",
        description="OLD and NEW are baseline files or folders; with --git REV, OLD is NEW as it is at REV. Per cell "
                    "and metric: old median -> new median, the change, and the verdict the gate would give NEW "
                    "measured against OLD (within band, improved, inconclusive, REGRESSED), with the project's "
                    "tolerances when a configuration is found.")
    diff.add_argument("paths", type=Path, nargs="*", metavar="OLD NEW",
                      help="two baseline files or folders (with --git: NEW only, default the baseline_dir)")
    diff.add_argument("--git", default=None, metavar="REV", help="take OLD from git: NEW as it is at REV (git show)")
    diff.add_argument("--markdown", action="store_true", help="GitHub Markdown tables instead of terminal columns")
    diff.add_argument("--config", type=Path, default=None, help=_CONFIG_HELP + "; its tolerances and gate policy")


def _add_accept(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    accept = tools.add_parser(
        "accept", help="turn results files from CI runs into baseline entries (no GPU needed)",
        description="Each cell of the results files (pytest --sglang-results PATH) becomes the entry "
                    "--sglang-update-baselines would have recorded, marked as accepted from that file. Several files "
                    "merge (the later generated_at wins). Refused unless told: stale cells, regressed or "
                    "inconclusive cells, environments with no baseline file yet. Exit 1 when a cell was refused.")
    accept.add_argument("results", type=Path, nargs="+", metavar="RESULTS.json", help="results files, in order")
    _dir_and_config(accept)
    accept.add_argument("--allow-stale", action="store_true",
                        help="accept cells measured for another request, args, model or GPUs than their baseline")
    accept.add_argument("--allow-regressed", action="store_true",
                        help="accept regressed and inconclusive cells (worse than their baseline) as the new bar")
    accept.add_argument("--new-environment", action="store_true",
                        help="start a baseline file for an environment key the folder has no file for")
    accept.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")


def baseline_command(ns: argparse.Namespace) -> int:
    """Run `sglang-perf baseline <subcommand>`; its exit code."""
    name = ns.baseline_command
    try:
        return _run(name, ns)
    except SGLangPerfError as exc:
        print(f"sglang-perf baseline {name}: {exc}", file=sys.stderr)
        return 2


def _run(name: str, ns: argparse.Namespace) -> int:
    from pytest_sglang_perf.cli.baseline.project import baseline_dir, project_settings

    if name == "show":
        from pytest_sglang_perf.cli.baseline.show import show_command

        return show_command(ns.dir, ns.config)
    if name == "diff":
        return _diff(ns)
    if name == "accept":
        from pytest_sglang_perf.cli.baseline.accept import AcceptOptions, accept_command

        options = AcceptOptions(allow_stale=ns.allow_stale, allow_regressed=ns.allow_regressed,
                                new_environment=ns.new_environment, dry_run=ns.dry_run)
        return accept_command(ns.results, baseline_dir(ns.dir, project_settings(ns.config)), options)
    if name == "validate":
        from pytest_sglang_perf.cli.baseline.validate import validate_command

        settings = project_settings(ns.config)
        default = baseline_dir(None, settings)
        paths = ns.paths or ([default] if default.exists() else [])  # no baselines yet: nothing to validate
        return validate_command(paths, None if settings is None else settings.baseline_max_age)
    from pytest_sglang_perf.cli.baseline.prune import prune_command

    settings = project_settings(ns.config, required=True)
    assert settings is not None  # required
    return prune_command(settings, baseline_dir(ns.dir, settings), ns.paths, apply=ns.apply,
                         everything=ns.everything)


def _diff(ns: argparse.Namespace) -> int:
    from pytest_sglang_perf.cli.baseline.diff import Judging, diff_sides, read_side
    from pytest_sglang_perf.cli.baseline.diff_render import markdown_lines, terminal_lines
    from pytest_sglang_perf.cli.baseline.project import ToolError, baseline_dir, project_settings

    settings = project_settings(ns.config)
    paths: list[Path] = ns.paths
    if ns.git is not None:
        from pytest_sglang_perf.cli.baseline.gitfiles import git_side

        if len(paths) > 1:
            raise ToolError("with --git REV, pass only NEW (a baseline file or folder; default: the baseline_dir)")
        new_path = paths[0] if paths else baseline_dir(None, settings)
        old, new = git_side(ns.git, new_path), read_side(new_path)
    elif len(paths) != 2:
        raise ToolError(f"pass OLD and NEW (two baseline files or folders), or --git REV [NEW]; got {len(paths)} "
                        "path(s)")
    else:
        old, new = read_side(paths[0]), read_side(paths[1])
    files = diff_sides(old, new, Judging.of(settings))
    render = markdown_lines if ns.markdown else terminal_lines
    print("\n".join(render(files, old.label, new.label)))
    return 0
