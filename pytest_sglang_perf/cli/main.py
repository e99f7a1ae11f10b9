"""The `sglang-perf` command: run the perf suite (on the simulator when there is no GPU) and inspect baselines."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from pytest_sglang_perf.config.run_options import RUN_COMMAND_ENV, RUN_GPU_HOST, RUN_REAL

if TYPE_CHECKING:
    from pytest_sglang_perf.config.settings import Settings
    from pytest_sglang_perf.server.target_gpus import TargetGpus

DISTRIBUTION = "pytest-sglang-perf"
SIMULATE_FLAG = "--sglang-simulate"
REQUIRE_REAL_FLAG = "--sglang-require-real"
_HELP = ("-h", "--help")
DEFAULT_REFERENCE = "default"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-perf", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run pytest on the perf suite; adds --sglang-simulate when nvidia-smi finds no GPU, and fails "
                    "(exit 4, with the install command) where it finds GPUs but SGLang is not installed",
        description="Every argument after 'run' but --real is passed to pytest, in order (e.g. -q tests/perf "
                    "--sglang-variants default); pytest runs as `python -m pytest` in this process's place.",
    )
    run.add_argument("--real", action="store_true",
                     help="a gate on real SGLang: never fall back to the simulator, and fail (exit non-zero) when "
                          "the perf tests cannot run here (adds --sglang-require-real)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments for pytest")
    check = sub.add_parser(
        "check", help="pre-flight: check every variant's flags before any server starts (exit 1 on an error)",
        description="Parses every variant's command line with the installed SGLang's parser (else the flag table "
                    "of the SGLang version the simulator models) and reports unknown, ambiguous and repeated flags, "
                    "known incompatible combinations, servers needing more GPUs than nvidia-smi shows, and bad "
                    "simulator knobs (--sim-*). No server is started; no GPU is needed. The configuration is found "
                    "as pytest finds its inifile: the nearest sglang-perf.toml, or pyproject.toml with a "
                    "[tool.sglang_perf] table, from this directory up.",
    )
    check.add_argument("--config", type=Path, default=None, help="sglang-perf.toml or pyproject.toml to check")
    check.add_argument("--simulate", action="store_true",
                       help="check as `pytest --sglang-simulate` runs: the simulator's SGLang flag table, its knobs "
                            "and its simulated GPU")
    check.add_argument("--gpu", action="append", default=[], metavar="NAME",
                       help="GPU model the matrix will run on, e.g. 'H100' (default: the simulated GPU with "
                            "--simulate, else what nvidia-smi finds); the GPU count is checked against nvidia-smi only")
    check.add_argument("--sglang-version", default=None, metavar="VERSION",
                       help="check against that SGLang release's flags (its flag table, read from its wheel; the "
                            "nearest older covered release's when it has none, said so), e.g. 0.5.19, instead of "
                            "the installed SGLang's or the simulator's")
    _add_compare(sub)
    show = sub.add_parser("baselines", help="the stored baselines (as `baseline show`: per file and test, each "
                                            "variant's medians with units, when and where recorded)",
                          description="The baseline files of the project's baseline_dir (the configuration is found "
                                      "as for 'check'), else of ./baselines; the same as `sglang-perf baseline show`.")
    show.add_argument("--dir", type=Path, default=None, help="baseline directory (default: the configuration's "
                                                             "baseline_dir, else ./baselines)")
    show.add_argument("--config", type=Path, default=None, help="sglang-perf.toml or pyproject.toml to read "
                                                                "baseline_dir from")
    from pytest_sglang_perf.cli.baseline.command import add_baseline_parser
    from pytest_sglang_perf.cli.plot import add_plot_parser
    from pytest_sglang_perf.cli.servers import add_servers_parsers

    add_baseline_parser(sub)
    add_plot_parser(sub)
    add_servers_parsers(sub)
    return parser


def package_version() -> str:
    """The installed distribution's version; the package's own when it is not installed (a source checkout)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        from pytest_sglang_perf import __version__

        return __version__


def _add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = sub.add_parser(
        "compare", help="A/B answers from results files: each variant against --reference, or before vs after",
        description="With one results file (pytest --sglang-results PATH): per test, every variant against the "
                    "reference variant. With two: per test and variant, RESULTS2 (after) against RESULTS (before). "
                    "Each line is the change of the geometric mean of a per-request metric with its confidence "
                    "interval, and whether it is significant (the interval excludes 0).",
    )
    compare.add_argument("results", type=Path, metavar="RESULTS", help="a results file (the 'before' one with two)")
    compare.add_argument("after", type=Path, nargs="?", default=None, metavar="RESULTS2",
                         help="a second results file: compare it (after) with RESULTS (before), variant by variant")
    compare.add_argument("--reference", default=None, metavar="NAME",
                         help=f"the variant the others are compared with (default: {DEFAULT_REFERENCE}); one file only")
    compare.add_argument("--confidence", type=float, default=0.95, metavar="LEVEL",
                         help="confidence level of the intervals, between 0 and 1 (default: 0.95)")


def compare(before: Path, after: Path | None, *, reference: str | None, confidence: float) -> int:
    """`sglang-perf compare`: print the A/B (one file) or before/after (two files) report; 2 on a bad input."""
    from pytest_sglang_perf.gate.ab import ab_lines, before_after_lines, missing_reference
    from pytest_sglang_perf.gate.results_read import ResultsFileError, read_result_cells

    if not 0 < confidence < 1:
        print(f"sglang-perf compare: --confidence must be between 0 and 1, e.g. 0.95; got {confidence:g}",
              file=sys.stderr)
        return 2
    try:
        cells = [read_result_cells(path) for path in (before, after) if path is not None]
    except ResultsFileError as exc:
        print(f"sglang-perf compare: {exc}", file=sys.stderr)
        return 2
    if len(cells) == 2:
        if reference is not None:
            print("sglang-perf compare: --reference does not apply to two files (each variant is compared with "
                  "itself); ignoring it", file=sys.stderr)
        print("\n".join(before_after_lines(cells[0], cells[1], confidence, labels=(str(before), str(after)))))
        return 0
    problem = missing_reference(cells[0], reference or DEFAULT_REFERENCE)
    if problem is not None:
        print(f"sglang-perf compare: {before}: {problem} (choose one with --reference NAME)", file=sys.stderr)
        return 2
    print("\n".join(ab_lines(cells[0], reference or DEFAULT_REFERENCE, confidence)))
    return 0


def run(pytest_args: Sequence[str], *, real: bool) -> NoReturn:
    """`sglang-perf run`: pytest in this process's place. Not `pytest.main()` in this process: this package is
    imported by now, so pytest could not rewrite the asserts of its plugin (PytestAssertRewriteWarning); a fresh
    interpreter imports the plugin through pytest, as the `pytest` command does."""
    command = pytest_command(pytest_args, real=real, has_gpu=_has_gpu)
    required = real_sglang_required(pytest_args, real=real, has_gpu=_has_gpu)
    os.environ.pop(RUN_COMMAND_ENV, None)  # only this command's own decision (an outer run's is not)
    if required is not None:  # the session refuses to skip the perf tests, naming this command (config/run_options.py)
        os.environ[RUN_COMMAND_ENV] = required
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)


def _has_gpu() -> bool:
    from pytest_sglang_perf.gate.environment import detect_gpus

    return bool(detect_gpus().names)


def pytest_command(pytest_args: Sequence[str], *, real: bool, has_gpu: Callable[[], bool]) -> list[str]:
    """`python -P -m pytest ARGS` (-P: nothing prepended to sys.path, as with the `pytest` script), plus
    --sglang-require-real with --real, or --sglang-simulate (said on stderr) when nvidia-smi finds no GPU."""
    args = list(pytest_args)
    if real:
        args.append(REQUIRE_REAL_FLAG)
    elif SIMULATE_FLAG not in args and not has_gpu():
        print("sglang-perf: no GPU found (nvidia-smi): running on the simulator; numbers are SIMULATED",
              file=sys.stderr)
        args.append(SIMULATE_FLAG)
    return [sys.executable, "-P", "-m", "pytest", *args]


def real_sglang_required(pytest_args: Sequence[str], *, real: bool, has_gpu: Callable[[], bool]) -> str | None:
    """Whether the run must measure real SGLang, and why: --real (RUN_REAL), or GPUs nvidia-smi finds (RUN_GPU_HOST:
    a GPU host without SGLang fails with the install command instead of skipping every perf test and exiting 0).
    None with --sglang-simulate, and on a host without GPUs (pytest_command adds it)."""
    if real:
        return RUN_REAL
    if SIMULATE_FLAG in pytest_args or not has_gpu():
        return None
    return RUN_GPU_HOST


def _settings(command: str, config: Path | None, *, required: bool) -> Settings | int | None:
    """The project's settings (the nearest configuration from here up, or --config); an exit code (2) after
    printing why when it is bad, or missing and `required`."""
    from pytest_sglang_perf.config.discovery import load_project_settings
    from pytest_sglang_perf.config.settings import ConfigError

    try:
        settings = load_project_settings(Path.cwd(), config)
    except ConfigError as exc:
        print(f"sglang-perf {command}: {exc}", file=sys.stderr)
        return 2
    if settings is None and required:
        print(f"sglang-perf {command}: no configuration found (sglang-perf.toml, or [tool.sglang_perf] in "
              "pyproject.toml, in this directory or one above it; or pass --config PATH)", file=sys.stderr)
        return 2
    return settings


def check(config: Path | None, *, simulate: bool, gpus: Sequence[str], version: str | None = None) -> int:
    """`sglang-perf check`: the session's pre-flight, as a command; 1 on an error, 2 on a configuration problem."""
    from pytest_sglang_perf.errors import SGLangPerfError
    from pytest_sglang_perf.server.plan import plan_server
    from pytest_sglang_perf.server.preflight import Level, check_plans
    from pytest_sglang_perf.server.sim_knobs import simulated_version
    from pytest_sglang_perf.sglang_facts.parsers import choose_parser

    settings = _settings("check", config, required=True)
    if settings is None or isinstance(settings, int):
        return 2 if settings is None else settings
    if version is None and simulate:
        version = simulated_version(settings.simulate.args, {**os.environ, **settings.env})
    parser = choose_parser(simulate=simulate, version=version)
    if parser.note is not None:
        print(f"sglang-perf check: {parser.note}")
    target = _check_gpus(settings, simulate=simulate, named=gpus)
    try:
        plans = [plan_server(settings, variant, simulate=simulate) for variant in settings.variants]
        findings = check_plans(plans, parser, gpus=target)
        knob_errors = [] if simulate else _simulate_args_errors(settings.simulate.args)
    except SGLangPerfError as exc:  # a bad simulated model folder; a broken simulator installation
        print(f"sglang-perf check: {exc}", file=sys.stderr)
        return 2
    for line in [*map(str, findings), *knob_errors]:
        print(line)
    errors = sum(f.level is Level.ERROR for f in findings) + len(knob_errors)
    warnings = sum(f.level is Level.WARNING for f in findings)
    gpu_text = ", ".join(dict.fromkeys(target.names)) or "none found"
    print(f"sglang-perf check: {len(plans)} variants, {errors} errors, {warnings} warnings "
          f"({settings.path or settings.source}; checked with {parser.source}; GPU: {gpu_text}, from {target.origin})")
    return 1 if errors else 0


def _check_gpus(settings: Settings, *, simulate: bool, named: Sequence[str]) -> TargetGpus:
    """--gpu NAME when given (a GPU model; the count is unknown), else what the session would use."""
    from pytest_sglang_perf.server.target_gpus import TargetGpus, target_gpus

    if named:
        return TargetGpus(tuple(named), None, "--gpu")
    from pytest_sglang_perf.gate.environment import detect_gpus

    return target_gpus(settings, simulate=simulate, host=lambda: detect_gpus().names)


def _simulate_args_errors(args: Sequence[str]) -> list[str]:
    """Without --simulate the variants' knobs are SGLang's business (it rejects them), but a bad knob in
    [simulate] args would still stop every `--sglang-simulate` run: report it too."""
    from pytest_sglang_perf.server.sim_knobs import SIMULATE_ARGS, check_knobs

    [checked] = check_knobs([args])
    return [f"error: {SIMULATE_ARGS}: {error} (a knob for --sglang-simulate runs)" for error in checked.errors]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"] and not set(args[1:2]) & set(_HELP):
        return _run_command(args[1:])
    ns = _parser().parse_args(args)
    if ns.command == "run":
        return run(ns.pytest_args, real=ns.real)
    if ns.command == "check":
        return check(ns.config, simulate=ns.simulate, gpus=ns.gpu, version=ns.sglang_version)
    if ns.command == "compare":
        return compare(ns.results, ns.after, reference=ns.reference, confidence=ns.confidence)
    if ns.command == "baseline":
        from pytest_sglang_perf.cli.baseline.command import baseline_command

        return baseline_command(ns)
    if ns.command in ("servers", "stop"):
        from pytest_sglang_perf.cli.servers import servers_command, stop_command

        return servers_command() if ns.command == "servers" else stop_command(ns.servers, every=ns.all,
                                                                               force=ns.force)
    if ns.command == "plot":
        from pytest_sglang_perf.cli.plot import plot_command

        return plot_command(ns)
    from pytest_sglang_perf.cli.baseline.show import show_command

    return show_command(ns.dir, ns.config, command="baselines")


def _run_command(args: list[str]) -> int:
    """`sglang-perf run ...`: pytest's arguments in any position and order (argparse would take `-q` for one of
    its own), and `--real` wherever it stands."""
    return run([arg for arg in args if arg != "--real"], real="--real" in args)


if __name__ == "__main__":
    raise SystemExit(main())
