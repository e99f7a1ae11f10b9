"""mypy --strict on what is not the package: the tests, the benchmarks, the tools and the root conftest.py.

pytest imports a test folder's modules by their bare names (its rootdir "prepend" import mode puts each folder with
a conftest.py on sys.path), and several folders have a conftest.py, so one mypy run over `tests/` would meet modules
named twice. Each folder is checked on its own instead, with MYPYPATH naming the folders its modules import from.
`python tools/typecheck_tests.py` (the lint step of .ci/run and tox -e lint); exit 1 when any run finds an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    # (what is checked, MYPYPATH)
    (("conftest.py", "tools"), ("tests/unit",)),  # tools/import_map.py reads the layers from test_layout
    (("benchmarks",), ("benchmarks", "tests/sglang_cpu")),
    # tests/unit mirrors the package, a folder per part; server/ has a conftest.py of its own, checked apart
    (("tests/unit", "--exclude", "tests/unit/server"), ("tests/unit",)),
    (("tests/unit/server",), ("tests/unit/server", "tests/unit")),
    (("tests/plugin",), ("tests/plugin",)),
    (("tests/e2e",), ("tests/e2e",)),
    (("tests/perf",), ("tests/perf",)),
    (("tests/docs",), ("tests/docs",)),
    (("tests/fake_nvml",), ("tests/fake_nvml",)),
    (("tests/sglang_cpu", "--exclude", "tests/sglang_cpu/contract"), ("tests/sglang_cpu",)),
    (("tests/sglang_cpu/contract",), ("tests/sglang_cpu/contract", "tests/sglang_cpu")),
)


def main() -> int:
    failed = []
    for paths, roots in RUNS:
        env = {**os.environ, "MYPYPATH": os.pathsep.join(str(ROOT / root) for root in roots)}
        done = subprocess.run([sys.executable, "-m", "mypy", "--strict", *paths], cwd=ROOT, env=env, check=False)
        if done.returncode:
            failed.append(paths[0])
    if failed:
        print(f"typecheck_tests: mypy found errors in {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
