"""Which tests a project has now, for `sglang-perf baseline prune`: pytest's own collection, run as a process in the
project's root (`python -c` running `pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *PATHS])` with a
small collecting plugin).

The plugin takes the node ids when collection is done but before `-m`, `-k` or `--deselect` (from the user's
addopts, say) drop any: a deselected test still exists, and its baseline is kept. Collecting boots no server (the
session boots a variant's server when its first test runs). A test id is a node id without its variant parameter
(`test_a[default]` -> `test_a`, `test_a[7-default]` -> `test_a[7]`), as the gate keys baselines.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pytest_sglang_perf.cli.baseline.project import ToolError
from pytest_sglang_perf.gate.cell_ids import strip_variant

_TIMEOUT = 600
_NO_TESTS = 5
"""pytest's exit code when it collected no test."""
_SHOWN = 40
"""The last lines of pytest's output a failed collection shows."""

_SCRIPT = """
import json, sys
import pytest

class Collected:
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items):
        with open(sys.argv[1], "w", encoding="utf-8") as out:
            json.dump([item.nodeid for item in items], out)

sys.exit(pytest.main(sys.argv[2:], plugins=[Collected()]))
"""


def collect_node_ids(root: Path, paths: Sequence[str]) -> list[str]:
    """The node ids pytest collects in `root` (for PATHS, else pytest's default); raises ToolError with pytest's
    output when collection fails."""
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", *paths]
    with tempfile.TemporaryDirectory(prefix="sglang-perf-collect-") as tmp:
        out = Path(tmp) / "nodeids.json"
        try:
            done = subprocess.run([sys.executable, "-c", _SCRIPT, str(out), *args], cwd=root, capture_output=True,
                                  text=True, timeout=_TIMEOUT)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ToolError(f"cannot run pytest's collection in {root} ({exc})") from None
        if done.returncode not in (0, _NO_TESTS) or (done.returncode == 0 and not out.is_file()):
            shown = "\n  ".join((done.stdout + done.stderr).strip().splitlines()[-_SHOWN:])
            raise ToolError(f"pytest could not collect the tests in {root} (exit {done.returncode}); nothing was "
                            f"pruned. Fix what pytest says, or pass the test paths to collect:\n  {shown}")
        if not out.is_file():
            return []
        ids = json.loads(out.read_text(encoding="utf-8"))
    return [str(node) for node in ids]


def collected_test_ids(nodeids: Sequence[str], variants: Sequence[str]) -> set[str]:
    """Every collected node id without its variant parameter (a node id of no variant stays as it is)."""
    found: set[str] = set()
    for nodeid in nodeids:
        found.add(nodeid)
        found.update(strip_variant(nodeid, variant) for variant in variants)
    return found
