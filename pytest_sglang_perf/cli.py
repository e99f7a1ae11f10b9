"""The `sglang-perf` command: run the perf suite (on the simulator when there is no GPU) and inspect baselines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_sglang_perf.gate.environment import detect_gpus

SIMULATE_FLAG = "--sglang-simulate"
REQUIRE_REAL_FLAG = "--sglang-require-real"
_HELP = ("-h", "--help")
DEFAULT_REFERENCE = "default"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-perf", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run pytest on the perf suite; adds --sglang-simulate when nvidia-smi finds no GPU",
        description="Every argument after 'run' but --real is passed to pytest, in order (e.g. -q tests/perf "
                    "--sglang-variants default).",
    )
    run.add_argument("--real", action="store_true",
                     help="a gate on real SGLang: never fall back to the simulator, and fail (exit non-zero) when "
                          "the perf tests cannot run here (adds --sglang-require-real)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments for pytest")
    check = sub.add_parser(
        "check", help="pre-flight: check every variant's flags before any server starts (exit 1 on an error)",
        description="Parses every variant's command line with the installed SGLang's parser (else the flag table "
                    "of the SGLang version the simulator models) and reports unknown, ambiguous and repeated flags "
                    "and known incompatible combinations. No server is started; no GPU is needed.",
    )
    check.add_argument("--config", type=Path, default=None, help="sglang-perf.toml or pyproject.toml to check")
    check.add_argument("--simulate", action="store_true", help="check against the simulator's SGLang flag table")
    check.add_argument("--gpu", action="append", default=[], metavar="NAME",
                       help="GPU the matrix will run on, e.g. 'H100' (default: what nvidia-smi finds)")
    _add_compare(sub)
    show = sub.add_parser("baselines", help="list the stored baselines (environment, test, variant, medians)")
    show.add_argument("--dir", type=Path, default=Path("baselines"), help="baseline directory (default: baselines)")
    return parser


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


def run(pytest_args: Sequence[str], *, real: bool) -> int:
    import pytest

    args = list(pytest_args)
    if real:
        args.append(REQUIRE_REAL_FLAG)
    elif SIMULATE_FLAG not in args and not detect_gpus().names:
        print("sglang-perf: no GPU found (nvidia-smi): running on the simulator; numbers are SIMULATED",
              file=sys.stderr)
        args.append(SIMULATE_FLAG)
    return int(pytest.main(args))


def show_baselines(directory: Path) -> int:
    from pytest_sglang_perf.gate.baseline import BaselineFileError
    from pytest_sglang_perf.gate.store import BaselineStore

    files = sorted(directory.glob("*.json"))
    if not files:
        print(f"no baselines in {directory}/ (record some with: pytest --sglang-update-baselines)")
        return 0
    status = 0
    for path in files:
        try:
            entries = BaselineStore(directory, path.stem).load()
        except BaselineFileError as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"{path} ({len(entries)} cells)")
        for (test_id, variant), entry in sorted(entries.items()):
            medians = ", ".join(f"{name}={s.median:.4g}" for name, s in entry.summaries.items())
            print(f"  {test_id} [{variant}] {medians}")
    return status


def check(config: Path | None, *, simulate: bool, gpus: Sequence[str]) -> int:
    from pytest_sglang_perf.config.settings import ConfigError, load_settings
    from pytest_sglang_perf.server.plan import plan_server
    from pytest_sglang_perf.server.preflight import Level, check_plans
    from pytest_sglang_perf.sglang_facts.parsers import choose_parser

    try:
        settings = load_settings(Path.cwd(), config)
    except ConfigError as exc:
        print(f"sglang-perf check: {exc}", file=sys.stderr)
        return 2
    if settings is None:
        print("sglang-perf check: no configuration found (sglang-perf.toml, or [tool.sglang_perf] in "
              "pyproject.toml, in this directory; or pass --config PATH)", file=sys.stderr)
        return 2
    parser = choose_parser(simulate=simulate)
    plans = [plan_server(settings, variant, simulate=False) for variant in settings.variants]
    findings = check_plans(plans, parser, gpu_names=tuple(gpus) or detect_gpus().names)
    for finding in findings:
        print(finding)
    errors = sum(f.level is Level.ERROR for f in findings)
    print(f"sglang-perf check: {len(plans)} variants, {errors} errors, {len(findings) - errors} warnings "
          f"({settings.source}; checked with {parser.source})")
    return 1 if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"] and not set(args[1:2]) & set(_HELP):
        return _run_command(args[1:])
    ns = _parser().parse_args(args)
    if ns.command == "run":
        return run(ns.pytest_args, real=ns.real)
    if ns.command == "check":
        return check(ns.config, simulate=ns.simulate, gpus=ns.gpu)
    if ns.command == "compare":
        return compare(ns.results, ns.after, reference=ns.reference, confidence=ns.confidence)
    return show_baselines(ns.dir)


def _run_command(args: list[str]) -> int:
    """`sglang-perf run ...`: pytest's arguments in any position and order (argparse would take `-q` for one of
    its own), and `--real` wherever it stands."""
    return run([arg for arg in args if arg != "--real"], real="--real" in args)


if __name__ == "__main__":
    raise SystemExit(main())
