"""What loading the plugin costs pytest, beside pytest-benchmark's plugin, measured side by side in one run.

    python benchmarks/bench_import.py               (about 20 s on 2 cores; --rounds N, default 9)

pytest imports every installed plugin's entry point in every run of the environment, so that import is a cost every
user pays, perf project or not. Each round starts fresh interpreters that import pytest, then time one import, in
turn (so that the machine's drift touches every column alike), after a first round that is not counted:

- `ours`: `import pytest_sglang_perf.plugin` (the pytest11 entry point);
- `pytest-benchmark`: `import pytest_benchmark.plugin` (its entry point);
- `run, ours` / `run, neither`: a whole `pytest --co` in a project without `[tool.sglang_perf]`, with only our plugin
  loaded, against the same with no plugin: what the plugin adds to a run that has no perf configuration;
- `run, configured`: the same run in a project with a `[tool.sglang_perf]` table whose tests are no perf tests
  (the configuration is read; the session's rooms, the gate and the report are not loaded).

Each column's figure is the best of the rounds (the least disturbed), and the ratios are between best figures.
The last line lists the package's modules that the plugin-only `pytest --co` run imported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_IMPORT = ("import time, pytest\nstart = time.perf_counter()\nimport {module}\n"
           "print(time.perf_counter() - start)\n")
_RUN = ("import sys, time, pytest, json\nstart = time.perf_counter()\n"
        "pytest.main(['-q', '-p', 'no:cacheprovider', {plugin}'--co'])\n"
        "elapsed = time.perf_counter() - start\n"
        "print(json.dumps([elapsed, sorted(m for m in sys.modules if m.startswith('pytest_sglang_perf'))]))\n")


def _env() -> dict[str, str]:
    """Only the plugin asked for is loaded; bytecode is written (as an installed package has it), so that no column
    pays for compiling its sources."""
    skipped = ("PYTEST_PLUGINS", "PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in skipped}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _child(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(cwd), env=_env(),
                          timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def _import_seconds(module: str, cwd: Path) -> float:
    return float(_child(_IMPORT.format(module=module), cwd))


def _run(plugin: str | None, cwd: Path) -> tuple[float, list[str]]:
    loaded = f"'-p', '{plugin}', " if plugin else ""
    seconds, modules = json.loads(_child(_RUN.format(plugin=loaded), cwd))
    return float(seconds), list(modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    columns: dict[str, list[float]] = {"ours": [], "pytest-benchmark": [], "run, ours": [], "run, neither": [],
                                       "run, configured": []}
    loaded: list[str] = []
    with tempfile.TemporaryDirectory() as project, tempfile.TemporaryDirectory() as configured_project:
        cwd, configured = Path(project), Path(configured_project)
        for folder in (cwd, configured):
            (folder / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        (configured / "pyproject.toml").write_text('[tool.sglang_perf]\nmodel = "Qwen/Qwen3-8B"\n')
        for number in range(rounds + 1):  # round 0 writes every column's bytecode and is not counted
            figures = {"ours": _import_seconds("pytest_sglang_perf.plugin", cwd),
                       "pytest-benchmark": _import_seconds("pytest_benchmark.plugin", cwd)}
            figures["run, ours"], loaded = _run("pytest_sglang_perf.plugin", cwd)
            figures["run, neither"] = _run(None, cwd)[0]
            figures["run, configured"] = _run("pytest_sglang_perf.plugin", configured)[0]
            for name, seconds in figures.items():
                if number:
                    columns[name].append(seconds)
    best = {name: min(values) for name, values in columns.items()}
    print(f"best of {rounds} rounds, ms (median in brackets):")
    for name, values in columns.items():
        print(f"  {name:18} {best[name] * 1e3:7.1f}  ({sorted(values)[len(values) // 2] * 1e3:.1f})")
    print(f"ours / pytest-benchmark's plugin import: x{best['ours'] / best['pytest-benchmark']:.2f}")
    added = best["run, ours"] - best["run, neither"]
    print(f"a pytest --co run without a perf configuration, with our plugin / without: "
          f"x{best['run, ours'] / best['run, neither']:.3f} ({added * 1e3:+.1f} ms)")
    configured_added = best["run, configured"] - best["run, neither"]
    print(f"the same run in a project with a perf configuration and no perf test: "
          f"x{best['run, configured'] / best['run, neither']:.3f} ({configured_added * 1e3:+.1f} ms)")
    print(f"package modules the plugin-only run imported ({len(loaded)}): {', '.join(loaded)}")


if __name__ == "__main__":
    main()
