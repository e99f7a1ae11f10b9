"""--sglang-update-baselines, --sglang-update-baselines=new and their ini / environment twins
(pytest_plugin/options.py); how a command line parses them: tests/plugin/test_update_new.py."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.pytest_plugin.options import UPDATE_ALL, UPDATE_NEW, _update


@pytest.mark.parametrize(("raw", "mode"), [
    (None, None), ("", None), ("0", None), ("false", None), ("1", UPDATE_ALL), ("yes", UPDATE_ALL),
    ("all", UPDATE_ALL), ("new", UPDATE_NEW), (" NEW ", UPDATE_NEW),
])
def test_the_mode_from_any_source(raw: object, mode: str | None) -> None:
    assert _update(raw) == mode


def test_a_bad_ini_or_environment_value_names_the_choices() -> None:
    with pytest.raises(pytest.UsageError, match="SGLANG_PERF_UPDATE_BASELINES = 'newest': expected true, false or new"):
        _update("newest")
