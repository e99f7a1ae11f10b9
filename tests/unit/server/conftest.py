"""Fixtures shared by the unit tests that launch real processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from test_launcher import FAKE_SERVER, Fake


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Fake]:
    script = tmp_path / "fake_sglang.py"
    script.write_text(FAKE_SERVER)
    (tmp_path / "pids").mkdir()
    fake = Fake(script=script, pid_dir=tmp_path / "pids", log_path=tmp_path / "logs" / "default.log")
    yield fake
    leftovers = fake.running()
    for pid in leftovers:  # clean up so one failure does not leak into the next tests
        psutil.Process(pid).kill()
    assert leftovers == [], "processes left behind"
