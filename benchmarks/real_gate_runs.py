"""Gate runs of unchanged code against real SGLang on CPU: does any regression survive a fresh boot?

    tox -e sglang-cpu --workdir ~/.cache/pytest-sglang-perf/tox -- python benchmarks/real_gate_runs.py [--runs 5]

A user's project (the tiny model of tests/sglang_cpu, one variant, two tests, the plugin's default tolerances and
`confirm = "auto"`, which reboots a server that boots in under 2 minutes) records its baselines once (over 3 boots,
as docs/usage/baselines.md advises; --record-boots 1 for one), then runs
the gate N times in a row without a change. Each gate run's line: its exit code, its cells' verdicts, and each
regression's confirmation (where it was re-measured, and whether it held). Unchanged code should never fail; a
cell that regressed on its first boot and not on the fresh one is `inconclusive` and passes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "sglang_cpu"))

from tiny_model import build_tiny_model  # noqa: E402  (the real-SGLang tests' model, built on the spot)

TESTS = """
from pytest_sglang_perf.prompts import RED_BLACK_TREE, SHORT_FACTUAL


def test_red_black_tree(sglang_perf):
    sglang_perf.check(sglang_perf.measure(RED_BLACK_TREE))


def test_short_factual(sglang_perf):
    sglang_perf.check(sglang_perf.measure(SHORT_FACTUAL))
"""
PYPROJECT = """[tool.sglang_perf]
model = "tiny-llama"
args = ["--device", "cpu", "--load-format", "dummy", "--max-total-tokens", "32768", "--random-seed", "0"]
startup_timeout = "5m"
[tool.sglang_perf.request]
max_tokens = 256
repeats = 5
warmup = 1
temperature = 0.6
[tool.sglang_perf.conditions]
# real SGLang computes on both cores of the 2-core CI host, so the client's event loop lags behind it by 5-15 ms in
# most measurements there (the default limit, 5 ms, is for a GPU server's host): not a disturbance of this setup
max_client_lag = "50ms"
[tool.sglang_perf.variants]
default = []
"""


def run(project: Path, name: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    results = project / f"results-{name}.json"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--sglang-results={results}", *args]
    # the tox env's SGLANG_PERF_IGNORE_CONDITIONS (and any other SGLANG_PERF_* setting) stays outside: the gate judges
    # the conditions of its measurements as a user's run does
    env = {key: value for key, value in os.environ.items() if not key.startswith("SGLANG_PERF_")}
    proc = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=1200)
    (project / f"out-{name}.txt").write_text(proc.stdout + proc.stderr)
    cells = json.loads(results.read_text())["cells"] if results.exists() else []
    return proc.returncode, cells


def describe(cell: dict[str, Any]) -> str:
    text = f"{cell['test_id'].split('::')[-1]} {cell['verdict']}"
    confirmation = cell.get("confirmation")
    if confirmation:
        worst = [f"{name} {check['change']:+.1%}" for name, check in cell["metrics"].items()
                 if check["verdict"] in ("regressed", "inconclusive") and check["change"] is not None]
        again = [f"{name} {check['change']:+.1%}" for name, check in confirmation["metrics"].items()
                 if name in {w.split()[0] for w in worst} and check["change"] is not None]
        text += f" ({', '.join(worst)}; re-measured on {confirmation.get('on')}: {', '.join(again)})"
    elif cell.get("disturbed"):
        text += f" (disturbed: {cell['disturbed']})"
    if cell.get("withheld"):
        text += f" (withheld: {cell['withheld']})"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--record-boots", type=int, default=3,
                        help="record the baselines over this many boots (--sglang-boots; default 3, as docs advise)")
    ns = parser.parse_args(argv)
    project = Path(tempfile.mkdtemp(prefix="real-gate-"))
    build_tiny_model(project / "tiny-llama")
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "test_perf.py").write_text(TESTS)
    code, cells = run(project, "record", "--sglang-update-baselines", f"--sglang-boots={ns.record_boots}")
    print(f"record: exit {code}, {len(cells)} cell(s) {[c['verdict'] for c in cells]} (project {project})")
    failed = 0
    for number in range(1, ns.runs + 1):
        code, cells = run(project, f"gate{number}")
        failed += code != 0
        print(f"gate run {number}: exit {code}: " + "; ".join(describe(c) for c in cells), flush=True)
    print(f"{failed} of {ns.runs} gate runs of unchanged code failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
