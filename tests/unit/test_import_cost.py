"""pytest imports the plugin in every run of the environment: it must not pull in heavy modules."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("aiohttp", "openai", "orjson", "filelock", "psutil", "uvloop", "sglang", "torch", "numpy")


def test_plugin_import_pulls_in_nothing_heavy() -> None:
    code = (
        "import sys, pytest_sglang_perf.plugin\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_a_run_without_configuration_imports_nothing_heavy(tmp_path: object) -> None:
    code = (
        "import sys, pytest\n"
        "pytest.main(['-q', '-p', 'no:cacheprovider', '--co'])\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path)).stdout
    assert "HEAVY=\n" in out or out.rstrip().endswith("HEAVY=")
