"""tools/walk.py: how far data travels through the package (docs/architecture.md, "How far data travels"). Its
counting is checked on made-up paths; a traced run of the real package shows that no lower layer calls back up."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("walk", ROOT / "tools" / "walk.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("walk", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_lower_layer_calling_a_higher_one_is_a_callback_and_a_return_is_not() -> None:
    walk = _tool().Walk()
    walk.event("session/cells.py", True)
    walk.event("gate/judge.py", True, caller="session/cells.py")  # down: no climb, no callback
    walk.event("session/cells.py", False)  # the return: no climb
    walk.event("measurement/values.py", True, caller="session/cells.py")
    walk.event("session/roofline.py", True, caller="measurement/values.py")  # a lower room calls back up
    walk.event("gate/judge.py", True, caller="session/cells.py")
    assert walk.figures() == {"stays": 6, "files": 4, "climbs": 1, "revisits": 2, "callbacks": 1}
    assert walk.callbacks == {("measurement/values.py", "session/roofline.py")}


@pytest.mark.slow
def test_no_lower_layer_calls_back_up_on_either_walk(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "walk.py")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    figures = {match["name"]: {key: int(value) for key, value in re.findall(r"(\w+) (\d+)", match["rest"])}
               for match in re.finditer(r"^(?P<name>(args|sample)[^\n]*?run\))\s+(?P<rest>stays[^\n]*)$",
                                        done.stdout, re.M)}
    assert set(figures) == {f"{walk}{followed} ({run} run)" for walk in ("args", "sample")
                            for followed in ("", ", followed") for run in ("record", "gate")}
    assert all(found["stays"] > 0 and found["callbacks"] == 0 for found in figures.values()), figures
