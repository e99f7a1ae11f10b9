"""stop_grace: the seconds a stopping server gets between SIGTERM and SIGKILL, read from the configuration file."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sglang_perf.config.settings import DEFAULT_STOP_GRACE, ConfigError, load_settings, parse_settings
from pytest_sglang_perf.server.launcher import LaunchSpec


def _grace(value: object) -> float:
    return parse_settings({"model": "m", "stop_grace": value}, source="x", root=Path("/proj")).stop_grace


def test_default_is_short() -> None:
    assert parse_settings({"model": "m"}, source="x", root=Path("/proj")).stop_grace == DEFAULT_STOP_GRACE == 5.0


@pytest.mark.parametrize(("value", "seconds"), [("5s", 5.0), ("1m30s", 90.0), (2.5, 2.5), (0, 0.0), ("0s", 0.0)])
def test_durations_and_zero_are_accepted(value: object, seconds: float) -> None:
    assert _grace(value) == seconds


@pytest.mark.parametrize(("toml", "problem"), [
    ('"soon"', "expected a duration like '30m', '90s', '1h30m' or '90d', got 'soon'"),
    ("-1", "a grace period must be 0 or more seconds, got -1; write e.g. '5s', or 0 for none"),
    ("inf", "a grace period must be 0 or more seconds, got inf; write e.g. '5s', or 0 for none"),
    ("true", "expected a duration like '30m' or a number of seconds, not true/false"),
])
def test_a_bad_value_names_the_file_the_key_and_the_value(tmp_path: Path, toml: str, problem: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f'[tool.sglang_perf]\nmodel = "m"\nstop_grace = {toml}\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert str(caught.value) == f"pyproject.toml [tool.sglang_perf]: stop_grace: {problem}"


def test_a_launch_spec_rejects_a_negative_grace(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"server 'v': stop_grace \(-1\) must be 0 or more seconds"):
        LaunchSpec(name="v", command=("x",), log_path=tmp_path / "v.log", startup_timeout=5, stop_grace=-1)
