"""Tests against real SGLang 0.5.23 on CPU (`tox -e sglang-cpu` builds their environment).

Without SGLang these tests skip with the reason; with SGLANG_PERF_REQUIRE_SGLANG=1 (set by the tox env, so CI
never skips them silently) they fail instead.

Two real-SGLang sessions at once on 2 cores slow each other 10-30x (both servers bind their OpenMP threads to
the same cores), which makes every measured number meaningless: sessions running these tests take turns on a
lock file, held from their first test here to their end.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock
import pytest
from tiny_model import build_tiny_model

REQUIRE_VAR = "SGLANG_PERF_REQUIRE_SGLANG"
LOCK_PATH = Path(tempfile.gettempdir()) / "pytest-sglang-perf-real-sglang.lock"
LOCK_TIMEOUT = 1800.0
"""Seconds to wait for another session's real-SGLang tests (a whole tox -e sglang-cpu run is ~5 min)."""
BUILD_HINT = ("run them with `tox -e sglang-cpu` (builds the CPU serving environment from "
              "requirements/sglang-cpu.txt and requirements/sglang-cpu-nodeps.txt)")


def missing_sglang() -> str | None:
    """Why real SGLang cannot run here, or None when it can be imported."""
    for module in ("sglang", "torch", "tokenizers"):
        if importlib.util.find_spec(module) is None:
            return f"real-SGLang tests need {module!r}, which is not installed in this environment; {BUILD_HINT}"
    return None


def sglang_required() -> bool:
    return os.environ.get(REQUIRE_VAR, "").strip().lower() not in ("", "0", "false", "no", "off")


@pytest.fixture(scope="session", autouse=True)
def _real_sglang_available() -> None:
    """Skip (or, with SGLANG_PERF_REQUIRE_SGLANG=1, fail) every test here when SGLang is missing."""
    reason = missing_sglang()
    if reason is None:
        return
    if sglang_required():
        pytest.fail(f"{reason}. {REQUIRE_VAR}=1 is set, so this is a failure, not a skip", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _one_real_sglang_session_at_a_time(_real_sglang_available: None) -> Iterator[None]:
    """Hold LOCK_PATH for the rest of the session; wait (saying so) while another session holds it."""
    lock = filelock.FileLock(LOCK_PATH)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        print(f"\nsglang-cpu: another session runs real-SGLang tests; waiting up to {LOCK_TIMEOUT:g} s for "
              f"{LOCK_PATH}", file=sys.__stderr__, flush=True)
        try:
            lock.acquire(timeout=LOCK_TIMEOUT)
        except filelock.Timeout:
            pytest.fail(f"another session held {LOCK_PATH} for {LOCK_TIMEOUT:g} s; is a real-SGLang test run "
                        "stuck? (`lsof` on the file names it)", pytrace=False)
    try:
        yield
    finally:
        lock.release()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama folder (config, tokenizer, chat template; no weights: serve with --load-format dummy)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-llama")
