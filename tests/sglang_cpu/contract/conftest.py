"""Contract tests: the simulator held to real SGLang 0.5.23 (its parser, resolution, wire format and endpoints).

They need `sglang` importable (the `sglang-cpu` tox env). Without it they skip with the reason, or fail when
SGLANG_PERF_REQUIRE_SGLANG=1 (which that tox env sets), so a broken environment cannot pass as "skipped".
Helpers that must run in a fresh interpreter (SGLang's parser and resolution configure logging globally) are the
scripts beside this file, run with this interpreter and JSON on stdin/stdout.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import psutil
import pytest
import tiny_model

from pytest_sglang_perf.server.launcher import LaunchSpec, ProgressEvent, ServerProcess

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
REQUIRE_ENV = "SGLANG_PERF_REQUIRE_SGLANG"
SCRIPT_TIMEOUT = 180.0
STOP_GRACE = 15.0

RunScript = Callable[..., Any]


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when the environment promises SGLang (SGLANG_PERF_REQUIRE_SGLANG=1)."""
    __tracebackhide__ = True
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 requires it)", pytrace=False)
    pytest.skip(reason)


@functools.cache
def import_error(module: str, load: bool) -> str | None:
    """Why `module` is unusable here, or None. `load=False` only looks for it (cheap; the helper scripts import
    it and fail loudly if the install is broken); `load=True` imports it into this process, once per session."""
    try:
        if not load:
            return None if importlib.util.find_spec(module) is not None else "not installed"
        importlib.import_module(module)
    except Exception as exc:  # a broken install is as unusable as a missing one; say which it is
        return f"{type(exc).__name__}: {exc}"
    return None


def require_module(module: str, purpose: str, load: bool = False) -> None:
    __tracebackhide__ = True
    error = import_error(module, load)
    if error is not None:
        unavailable(f"{purpose} needs `{module}` ({error}); run these tests with `tox -e sglang-cpu`")


@pytest.fixture(autouse=True)
def _sglang_installed() -> None:
    require_module("sglang", "the SGLang contract tests")


@pytest.fixture(scope="session")
def require() -> Callable[..., None]:
    """`require(module, purpose, load=False)`: skip (or fail under SGLANG_PERF_REQUIRE_SGLANG=1) unless `module`
    is installed (`load=True`: and imports in this process)."""
    return require_module


@pytest.fixture(scope="session")
def run_script() -> RunScript:
    """Run a helper script of this folder with this interpreter: JSON payload in, JSON answer out."""

    def run(script: str, payload: Any, *, env: Mapping[str, str] | None = None,
            timeout: float = SCRIPT_TIMEOUT, cwd: Path = REPO) -> Any:
        done = subprocess.run([sys.executable, str(HERE / script)], input=json.dumps(payload), capture_output=True,
                              text=True, timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd, check=False)
        assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}"
        return json.loads(done.stdout)

    return run


@pytest.fixture(scope="session")
def sim_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model (tests/sglang_cpu/tiny_model.py) for the simulator, which reads config.json only."""
    directory = tmp_path_factory.mktemp("tiny-llama-config")
    (directory / "config.json").write_text(json.dumps(tiny_model.CONFIG), encoding="utf-8")
    return directory


def _tree(pid: int | None) -> list[psutil.Process]:
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@contextlib.contextmanager
def serving(name: str, command: Sequence[str], log_path: Path, startup_timeout: float,
            env: Mapping[str, str] | None = None,
            on_progress: Callable[[ProgressEvent], None] | None = None) -> Iterator[ServerProcess]:
    """A server process, ready; on exit its whole tree is stopped and checked gone."""
    spec = LaunchSpec(name=name, command=tuple(command), log_path=log_path, startup_timeout=startup_timeout,
                      env=dict(env or {}))
    server = ServerProcess(spec, on_progress)
    server.start()
    tree = _tree(server.pid)
    try:
        yield server
    finally:
        tree += [p for p in _tree(server.pid) if p not in tree]
        server.stop(grace=STOP_GRACE)
        left = [p.pid for p in tree if _alive(p)]
        assert not left, f"{name}: processes left behind after stop(): {left}"


@pytest.fixture(scope="session")
def server_process() -> Callable[..., contextlib.AbstractContextManager[ServerProcess]]:
    """`with server_process(name, command, log_path, startup_timeout) as server:` (see `serving`)."""
    return serving
