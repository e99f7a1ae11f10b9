"""`sglang-perf run`: pytest runs in a fresh interpreter in the command's place, so that pytest imports the plugin
itself and can rewrite its asserts, as with the `pytest` command: no PytestAssertRewriteWarning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_sglang_perf

WARNING = "PytestAssertRewriteWarning"


def _regular_install(root: Path) -> Path:
    """A site folder holding the package as a regular (non-editable) install lays it out: the package and a
    dist-info whose RECORD lists its files. pytest marks the modules of a pytest11 distribution's files for assert
    rewriting; an editable install lists none of them, so the warning never showed in this checkout's own venv."""
    site = root / "site"
    site.mkdir()
    package = Path(pytest_sglang_perf.__file__).parent
    (site / package.name).symlink_to(package, target_is_directory=True)
    dist = site / f"pytest_sglang_perf-{pytest_sglang_perf.__version__}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pytest-sglang-perf\n"
                                   f"Version: {pytest_sglang_perf.__version__}\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nsglang_perf = pytest_sglang_perf.plugin\n")
    files = sorted(str(path.relative_to(package.parent)) for path in package.rglob("*.py"))
    (dist / "RECORD").write_text("".join(f"{name},,\n" for name in files))
    return site


def _python(pytester: pytest.Pytester, site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, *args], cwd=pytester.path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_run_leaves_the_plugin_to_pytest(pytester: pytest.Pytester) -> None:
    site = _regular_install(pytester.path)
    pytester.makepyfile(test_a="def test_a():\n    assert 1 + 1 == 2\n")
    pytest_args = ["-q", "-p", "no:cacheprovider", "--sglang-simulate", "test_a.py"]

    in_process = _python(pytester, site, "-c", "import sys, pytest_sglang_perf, pytest; "
                                               f"sys.exit(pytest.main({pytest_args!r}))")
    assert WARNING in in_process.stdout  # the setup shows the warning of a run that imported the package first

    done = _python(pytester, site, "-m", "pytest_sglang_perf.cli", "run", *pytest_args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert WARNING not in done.stdout + done.stderr
