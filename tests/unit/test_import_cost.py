"""pytest imports the plugin in every run of the environment: it must not pull in heavy modules.

Both checks run in a fresh interpreter with only this plugin loaded: other installed pytest plugins (a GPU
image's jaxtyping imports numpy, for one) are kept out through PYTEST_DISABLE_PLUGIN_AUTOLOAD, so the verdict is
about this plugin whatever else the environment holds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HEAVY = ("aiohttp", "openai", "orjson", "filelock", "psutil", "uvloop", "sglang", "torch", "numpy")
REPORT = f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"


def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_PLUGINS", "PYTEST_ADDOPTS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _heavy_modules(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(cwd),
                          env=_isolated_env(), timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("HEAVY=")]
    assert lines, f"no report from the child (rc {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return lines[-1].removeprefix("HEAVY=")


def test_plugin_import_pulls_in_nothing_heavy(tmp_path: Path) -> None:
    assert _heavy_modules(f"import sys, pytest_sglang_perf.plugin\n{REPORT}", tmp_path) == ""


def test_a_run_without_configuration_imports_nothing_heavy(tmp_path: Path) -> None:
    code = (
        "import sys, pytest\n"
        "pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'pytest_sglang_perf.plugin', '--co'])\n"
        "assert 'pytest_sglang_perf.plugin' in sys.modules, 'the plugin was not loaded'\n"
        f"{REPORT}"
    )
    assert _heavy_modules(code, tmp_path) == ""


def test_the_check_catches_a_heavy_import(tmp_path: Path) -> None:
    """The probe itself works: a module that imports a heavy one is reported."""
    code = f"import sys, pytest_sglang_perf.plugin, psutil\n{REPORT}"
    assert _heavy_modules(code, tmp_path) == "psutil"
