"""How far a piece of data travels through the package's files: two walks, traced on a real simulated run.

    python tools/walk.py                 (about 10 s; needs the package importable, e.g. from the dev venv)

A one-test project (a tiny model on the simulator, one variant with one flag) is run in-process by pytest.main with
a profiler that sees every call into and return from the package's own functions. Two stretches are walked:

- `args`: a variant's args, from reading pyproject.toml to the effective-configuration verdict (everything the
  run does before the test's first `measure()`: settings, plan, pre-flight, boot, /server_info, the verdict);
- `sample`: one measured sample, from the socket read to the baseline file and the verdict (the test's
  `measure()` and `check()` calls, in a run that records the baseline, then in one that gates on it).

Each is walked twice: over every call and return in the package (`args`, `sample`), and over the calls only that
are handed the data itself (`args, followed`: a Variant, its ServerPlan or EffectiveConfig; `sample, followed`: a
StreamRecord, Sample, Result, Cell, CellRecord or MetricCheck), the path a reader follows the data along.

For each: `stays`, maximal runs of consecutive events in one file (a call, then its returns, in the same file is one
stay); `files`, the distinct files; `climbs`, moves from a file to a file of a higher layer that are calls (a lower
layer calling back up, through a callable it was handed), counted once per distinct pair of files; `revisits`, stays
in a file already stayed in, counted once per distinct (file, previous file) pair so that a loop over N lines or
samples counts once; `callbacks`, calls whose calling code (the nearest package frame beneath the call) is in a
lower layer than the called code, counted once per distinct pair of files: unlike `climbs`, which reads consecutive
stays (and so counts a higher layer calling one lower room after another as a climb between them), this is the call
graph's own count of a lower layer calling back up. Layers as tests/unit/test_layout.py declares them; the names of
the older layout (before the session and report wings) are mapped onto the same layers, so that a checkout from
before the change is walked the same way (run this file against it with PYTHONPATH).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
import test_layout  # the layers are declared once, there

OLD_PARTS = {
    "variant_run": "session", "live": "session", "session_baselines": "session", "session_conditions": "session",
    "session_gpus": "session", "session_roofline": "session", "session_reports": "report",
    "session_workers": "report", "server_views": "report", "load_views": "report", "roofline_views": "report",
    "options": "pytest_plugin", "handle": "pytest_plugin", "benchmark_bridge": "pytest_plugin",
    "xdist_scheduling": "pytest_plugin", "baseline_tools": "cli",
}
"""The layout before the session and report wings (top-level modules), mapped onto today's parts."""
LAYER = {**test_layout.LAYER_OF, **{old: test_layout.LAYER_OF[new] for old, new in OLD_PARTS.items()}}
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}
PYPROJECT = """[tool.sglang_perf]
model = "model"
args = ["--random-seed", "0"]
startup_timeout = "60s"
[tool.sglang_perf.variants]
graphs = ["--cuda-graph-max-bs-decode", "8"]
[tool.sglang_perf.simulate]
args = ["--sim-decode-tok-s", "2000", "--sim-ttft", "0.02", "--sim-boot-seconds", "0.3"]
[tool.sglang_perf.request]
max_tokens = 64
repeats = 3
warmup = 1
[tool.sglang_perf.tolerance]
output_throughput = "90%"
decode_throughput = "90%"
ttft = "500%"
tpot = "500%"
"""
TEST = """from pytest_sglang_perf.prompts import RED_BLACK_TREE

def test_walk(sglang_perf):
    result = sglang_perf.measure(RED_BLACK_TREE)
    sglang_perf.check(result)
"""


@dataclass
class Walk:
    stays: list[str] = field(default_factory=list)
    climbs: set[tuple[str, str]] = field(default_factory=set)
    callbacks: set[tuple[str, str]] = field(default_factory=set)

    def event(self, path: str, is_call: bool, caller: str | None = None) -> None:
        if is_call and caller is not None and _layer(path) > _layer(caller):
            self.callbacks.add((caller, path))
        if self.stays and self.stays[-1] == path:
            return
        if is_call and self.stays and _layer(path) > _layer(self.stays[-1]):
            self.climbs.add((self.stays[-1], path))
        self.stays.append(path)

    def figures(self) -> dict[str, int]:
        seen: set[str] = set()
        revisits: set[tuple[str, str]] = set()
        for previous, stay in zip(["", *self.stays], self.stays, strict=False):
            if stay in seen:
                revisits.add((stay, previous))
            seen.add(stay)
        return {"stays": len(self.stays), "files": len(seen), "climbs": len(self.climbs), "revisits": len(revisits),
                "callbacks": len(self.callbacks)}


FOLLOWED = {
    "args": {"Variant", "ServerPlan", "EffectiveConfig"},
    "sample": {"StreamRecord", "Sample", "Result", "Cell", "CellRecord", "MetricCheck"},
}
"""The records each walk follows (by class name, so that an older checkout is followed alike): a call that is
handed one of them (an argument, or `self`) is a step of the data's own path."""


def _carries(frame: FrameType, names: set[str]) -> bool:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    values = [frame.f_locals.get(arg) for arg in code.co_varnames[:count]]
    for value in values:
        items = value if isinstance(value, list | tuple) and len(value) < 64 else (value,)
        if any(type(item).__name__ in names for item in items):
            return True
    return False


def _part(path: str) -> str:
    parts = Path(path).parts
    head = parts[0] if len(parts) > 1 else Path(parts[0]).stem
    return head


def _layer(path: str) -> int:
    return LAYER.get(_part(path), 5)


class Tracer:
    """A profiler over the package's frames, writing into the walk that is open."""

    def __init__(self, package: Path) -> None:
        self.package = str(package) + os.sep
        self.walk: Walk | None = None
        self.walks: dict[str, Walk] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        name = frame.f_code.co_name
        if event == "call" and name in ("measure", "check") and "handle" in frame.f_code.co_filename:
            self.walk = self.walks.setdefault("sample", Walk())
        if self.walk is None or event not in ("call", "return") or name == "<module>":
            return  # an import's module code is not the data's path
        filename = frame.f_code.co_filename
        if not filename.startswith(self.package) or "simulator" in filename:
            return
        path = filename[len(self.package):]
        caller = self._caller(frame) if event == "call" else None
        self.walk.event(path, event == "call", caller)
        walk_name = next(key for key, walk in self.walks.items() if walk is self.walk)
        if event == "call" and _carries(frame, FOLLOWED[walk_name]):
            self.walks.setdefault(walk_name + ", followed", Walk()).event(path, True, caller)
        if event == "return" and name == "check" and "handle" in filename:
            self.walk = None  # the verdict is in: what follows is the end of the test and of the run

    def _caller(self, frame: FrameType) -> str | None:
        """The package file whose code made this call (the nearest package frame below it, the simulator and
        asyncio's loop skipped); None when the call came from outside the package (pytest, a test)."""
        back = frame.f_back
        while back is not None:
            name = back.f_code.co_filename
            if name.startswith(self.package) and "simulator" not in name:
                return name[len(self.package):]
            back = back.f_back
        return None

    @contextmanager
    def open(self, name: str) -> Iterator[None]:
        self.walk = self.walks.setdefault(name, Walk())
        try:
            yield
        finally:
            self.walk = None


class Stretches:
    """A pytest plugin opening the `args` walk from configure to the first measure(), and leaving the profiler on."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.tracer.walk = self.tracer.walks.setdefault("args", Walk())

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Any:
        self.tracer.walk = None  # the `sample` walk opens at the handle's measure() and check()
        return (yield)


def main() -> None:
    import pytest_sglang_perf

    package = Path(pytest_sglang_perf.__file__).parent
    results: dict[str, dict[str, int]] = {}
    last: dict[str, Walk] = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "model").mkdir()
        (root / "model" / "config.json").write_text(json.dumps(CONFIG))
        (root / "pyproject.toml").write_text(PYPROJECT)
        (root / "test_walk.py").write_text(TEST)
        os.chdir(root)
        os.environ["SGLANG_PERF_IGNORE_CONDITIONS"] = "1"
        for label, extra in (("record", ["--sglang-update-baselines"]), ("gate", [])):
            tracer = Tracer(package)
            sys.setprofile(tracer)
            try:
                code = pytest.main([str(root), "-q", "-p", "no:cacheprovider", "--sglang-simulate", *extra],
                                   plugins=[Stretches(tracer)])
            finally:
                sys.setprofile(None)
            assert code == 0, f"the {label} run failed ({code})"
            for name, walk in tracer.walks.items():
                results[f"{name} ({label} run)"] = walk.figures()
            last = tracer.walks
    for name, figures in results.items():
        print(f"{name:22} " + "  ".join(f"{key} {value}" for key, value in figures.items()))
    if os.environ.get("WALK_FILES"):
        for name, walk in last.items():
            if name.endswith("followed"):
                print(f"{name}: " + " > ".join(walk.stays))
                print(f"{name} climbs: " + ", ".join(f"{a} > {b}" for a, b in sorted(walk.climbs)))
                print(f"{name} callbacks: " + ", ".join(f"{a} > {b}" for a, b in sorted(walk.callbacks)))


if __name__ == "__main__":
    main()
