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

import pytest

HEAVY = ("aiohttp", "openai", "orjson", "filelock", "psutil", "uvloop", "sglang", "torch", "numpy")
REPORT = f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"


def _isolated_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_PLUGINS", "PYTEST_ADDOPTS")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def _reported(code: str, cwd: Path, tag: str) -> str:
    """What the child printed after `tag=` (its last such line)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(cwd),
                          env=_isolated_env(), timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith(f"{tag}=")]
    assert lines, f"no report from the child (rc {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return lines[-1].removeprefix(f"{tag}=")


def _heavy_modules(code: str, cwd: Path) -> str:
    return _reported(code, cwd, "HEAVY")


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


OWN = "print('OWN=' + ','.join(sorted(m for m in sys.modules if m.startswith('pytest_sglang_perf'))))"
ENTRY_POINT_OWN = "pytest_sglang_perf,pytest_sglang_perf.plugin"
RUN_OWN = ENTRY_POINT_OWN + ",pytest_sglang_perf.pytest_plugin,pytest_sglang_perf.pytest_plugin.options"
"""What a run loads beyond the entry point: the options it registers (pytest_addoption), nothing else."""


def _own_modules(code: str, cwd: Path) -> str:
    return _reported(code, cwd, "OWN")


def test_importing_the_entry_point_loads_nothing_else_of_the_package(tmp_path: Path) -> None:
    assert _own_modules(f"import sys, pytest, pytest_sglang_perf.plugin\n{OWN}", tmp_path) == ENTRY_POINT_OWN


@pytest.mark.parametrize("pyproject", [None, "[tool.pytest.ini_options]\naddopts = []\n"])
def test_a_run_without_a_perf_configuration_loads_only_the_options(tmp_path: Path, pyproject: str | None) -> None:
    """pytest with only this plugin, in a project without [tool.sglang_perf] (no pyproject.toml, or one without
    the table): the entry point and the options it registers; no configuration is read, no session made."""
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    code = ("import sys, pytest\n"
            "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'pytest_sglang_perf.plugin'])\n"
            "assert code == 0, code\n"
            f"{OWN}")
    assert _own_modules(code, tmp_path) == RUN_OWN


HEAVY_PARTS = ("gate", "report", "roofline", "hardware", "plots", "simulator", "sglang_facts")
ROOMS = ("session.plans", "session.boots", "session.cells", "session.baselines", "session.live")


@pytest.mark.parametrize("perf_test", [False, True])
def test_a_configured_project_loads_the_session_only_when_a_perf_test_is_collected(tmp_path: Path,
                                                                                 perf_test: bool) -> None:
    """With a [tool.sglang_perf] table the pytest face is registered and the configuration read; the session's
    rooms, the gate and the report load only once a perf test is collected (the counter-check: one is)."""
    (tmp_path / "pyproject.toml").write_text('[tool.sglang_perf]\nmodel = "Qwen/Qwen3-8B"\n'
                                             "[tool.sglang_perf.variants]\ndefault = []\n")
    body = "sglang_perf" if perf_test else ""
    (tmp_path / "test_one.py").write_text(f"def test_one({body}):\n    pass\n")
    code = ("import sys, pytest\n"
            "pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'pytest_sglang_perf.plugin', '--sglang-simulate',"
            " '--co'])\n"
            f"{OWN}")
    loaded = {name.removeprefix("pytest_sglang_perf.") for name in _own_modules(code, tmp_path).split(",")}
    assert {"pytest_plugin.hooks", "config.settings", "session.facade"} <= loaded
    heavy = sorted(name for name in loaded
                   if name.partition(".")[0] in HEAVY_PARTS or name in ROOMS)
    if perf_test:
        assert {"session.plans", "sglang_facts.flags"} <= set(heavy)
    else:
        assert heavy == []


def test_the_check_catches_a_heavy_import(tmp_path: Path) -> None:
    """The probe itself works: a module that imports a heavy one is reported."""
    code = f"import sys, pytest_sglang_perf.plugin, psutil\n{REPORT}"
    assert _heavy_modules(code, tmp_path) == "psutil"
