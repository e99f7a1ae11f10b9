"""The `sglang-perf` command: run the perf suite (on the simulator when there is no GPU) and inspect baselines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_sglang_perf.environment import detect_gpus

SIMULATE_FLAG = "--sglang-simulate"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang-perf", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run pytest on the perf suite; adds --sglang-simulate when nvidia-smi finds no GPU",
        description="Everything after 'run' is passed to pytest (e.g. tests/perf --sglang-variants default).",
    )
    run.add_argument("--real", action="store_true", help="never fall back to the simulator")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments for pytest")
    show = sub.add_parser("baselines", help="list the stored baselines (environment, test, variant, medians)")
    show.add_argument("--dir", type=Path, default=Path("baselines"), help="baseline directory (default: baselines)")
    return parser


def run(pytest_args: Sequence[str], *, real: bool) -> int:
    import pytest

    args = list(pytest_args)
    if not real and SIMULATE_FLAG not in args and not detect_gpus().names:
        print("sglang-perf: no GPU found (nvidia-smi): running on the simulator; numbers are SIMULATED",
              file=sys.stderr)
        args.append(SIMULATE_FLAG)
    return int(pytest.main(args))


def show_baselines(directory: Path) -> int:
    from pytest_sglang_perf.store import BaselineFileError, BaselineStore

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


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    if ns.command == "run":
        return run(ns.pytest_args, real=ns.real)
    return show_baselines(ns.dir)


if __name__ == "__main__":
    raise SystemExit(main())
